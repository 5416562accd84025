/*
 * verify.c - live verification against the CPU reference (verify.h).
 */
#include "verify.h"

#include "engine.h"
#include "model.h"
#include "trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VERIFY_CHUNK 64 /* ids per catch-up eval of the reference */

struct verify {
	struct engine *primary; /* the engine checked (borrowed) */
	struct trace *pt;       /* its trace (owned when own_pt) */
	bool own_pt;            /* the verifier made pt */
	struct engine *ref;     /* CPU exact-dot reference (owned) */
	struct trace *rt;       /* the reference's trace (owned) */
	int32_t n_layer;        /* layers of both models */
	int32_t n_embd;         /* residual width of both models */
	int32_t n_vocab;        /* logits per row */
	bool moe;               /* the model has mixture layers */
	double layer_tol;       /* by the primary's arithmetic (verify.h) */
	double logit_tol;
	int32_t *ids;       /* [cap] ids in the reference's cache */
	int32_t n_ids, cap; /* invariant 1: n_ids == n_past(ref) */
};

/* A trace for the reference or the primary, capturing vectors. */
static struct trace *verify_trace_new(const struct model_config *c)
{
	struct trace *t = trace_new(c->n_layer, 10, NULL);

	if (t != NULL && trace_capture(t, c->n_embd) != 0) {
		trace_free(t);
		return NULL;
	}
	return t;
}

int verify_open(struct engine *primary, const struct model *ref,
                struct trace *trace, int32_t n_threads, struct verify **out,
                char *err, size_t errlen)
{
	const struct model_config *c = &ref->cfg;
	struct engine_params ep = {0};
	struct verify *v;

	*out = NULL;
	if (engine_n_vocab(primary) != c->n_vocab ||
	    (trace != NULL && trace->n_layer != c->n_layer)) {
		snprintf(err, errlen,
		         "verify: the reference model (%d layers, %d tokens) "
		         "is not the primary's shape",
		         c->n_layer, c->n_vocab);
		return -1;
	}
	v = calloc(1, sizeof(*v));
	if (v == NULL)
		goto nomem;
	v->primary = primary;
	v->n_layer = c->n_layer;
	v->n_embd = c->n_embd;
	v->n_vocab = c->n_vocab;
	if (engine_int8_activations(primary)) {
		v->layer_tol = VERIFY_TOL_INT8_LAYER;
		v->logit_tol = VERIFY_TOL_INT8_LOGIT;
	} else {
		v->layer_tol = VERIFY_TOL_LAYER;
		v->logit_tol = VERIFY_TOL_LOGIT;
	}
	/* a q8_0 cache's own deviation comes on top (verify.h) */
	if (engine_kv_type(primary) == ENGINE_KV_Q8_0) {
		v->layer_tol += VERIFY_TOL_Q8KV_LAYER;
		v->logit_tol += engine_int8_activations(primary)
		                    ? VERIFY_TOL_INT8_Q8KV_LOGIT
		                    : VERIFY_TOL_Q8KV_LOGIT;
	}
	ep.backend = "cpu";
	ep.exact_dots = true;
	ep.n_ctx = engine_n_ctx(primary);
	ep.n_threads = n_threads;
	/* every position (as before the window cache): it shifts wherever
	   the primary does, whatever the primary's window rows hold */
	ep.window_full = true;
	if (engine_open(ref, &ep, &v->ref, err, errlen) != 0) {
		verify_close(v);
		return -1;
	}
	v->rt = verify_trace_new(c);
	if (v->rt == NULL)
		goto nomem_v;
	engine_set_trace(v->ref, v->rt);
	if (trace == NULL) {
		v->pt = verify_trace_new(c);
		v->own_pt = true;
		if (v->pt == NULL)
			goto nomem_v;
	} else {
		if (trace_capture(trace, c->n_embd) != 0)
			goto nomem_v;
		v->pt = trace;
	}
	/* a mixture: both traces keep every row's choice of experts, so
	   that the reference follows the primary's choice row by row
	   (verify_step) */
	v->moe = c->max_expert_used > 0;
	if (v->moe && (trace_rows(v->rt, VERIFY_PIN_ROWS) != 0 ||
	               trace_rows(v->pt, VERIFY_PIN_ROWS) != 0))
		goto nomem_v;
	v->pt->hold = 1;
	engine_set_trace(primary, v->pt);
	*out = v;
	return 0;
nomem_v:
	verify_close(v);
nomem:
	snprintf(err, errlen, "verify: out of memory");
	return -1;
}

void verify_close(struct verify *v)
{
	if (v == NULL)
		return;
	if (v->pt != NULL) {
		if (v->own_pt) {
			engine_set_trace(v->primary, NULL);
			trace_free(v->pt);
		} else {
			v->pt->hold = 0;
			trace_capture(v->pt, 0);
			if (v->moe)
				trace_rows(v->pt, 0);
		}
	}
	engine_close(v->ref);
	trace_free(v->rt);
	free(v->ids);
	free(v);
}

/* Append IDS[0..n) to the kept ids. */
static int verify_keep(struct verify *v, const int32_t *ids, int32_t n)
{
	if (v->n_ids + n > v->cap) {
		int32_t cap = v->cap ? v->cap : 256;
		int32_t *p;

		while (cap < v->n_ids + n)
			cap *= 2;
		p = realloc(v->ids, (size_t)cap * sizeof(*p));
		if (p == NULL)
			return -1;
		v->ids = p;
		v->cap = cap;
	}
	memcpy(v->ids + v->n_ids, ids, (size_t)n * sizeof(*ids));
	v->n_ids += n;
	return 0;
}

/*
 * Bring the reference to hold IDS[0..base): cut it to the common prefix
 * and evaluate the rest without logits. *CAUGHT gets the ids evaluated.
 */
static int verify_catch_up(struct verify *v, const int32_t *ids, int32_t base,
                           int32_t *caught, char *err, size_t errlen)
{
	int32_t p = 0;

	while (p < base && p < v->n_ids && ids[p] == v->ids[p])
		p++;
	p = engine_rewind_point(v->ref, p); /* a recurrent state's snapshot */
	if (engine_truncate(v->ref, p) != 0) {
		snprintf(err, errlen, "cannot truncate to %d", p);
		return -1;
	}
	v->n_ids = p;
	*caught = base - p;
	while (p < base) {
		int32_t c = base - p < VERIFY_CHUNK ? base - p : VERIFY_CHUNK;

		if (engine_eval(v->ref, ids + p, c, ENGINE_EVAL_NO_LOGITS, err,
		                errlen) != 0 ||
		    verify_keep(v, ids + p, c) != 0)
			return -1;
		p += c;
	}
	return 0;
}

int verify_shift(struct verify *v, const int32_t *ids, int32_t n_ids,
                 int32_t p0, int32_t d, char *err, size_t errlen)
{
	int32_t caught = 0;
	char msg[256] = "";

	if (p0 < 0 || d < 1 || p0 > n_ids - d) {
		snprintf(err, errlen,
		         "verify: shift of %d+%d out of the %d ids held", p0, d,
		         n_ids);
		return -1;
	}
	/* the reference holds what the primary held (caught up where it
	   lagged), then moves as the primary moved */
	if (verify_catch_up(v, ids, n_ids, &caught, msg, sizeof(msg)) != 0 ||
	    engine_kv_shift(v->ref, p0, d, msg, sizeof(msg)) != 0) {
		/* the next step cuts the reference to what still agrees */
		v->n_ids = engine_n_past(v->ref) < v->n_ids
		               ? engine_n_past(v->ref)
		               : v->n_ids;
		snprintf(err, errlen, "verify: reference: %s",
		         msg[0] ? msg : "out of memory");
		return -1;
	}
	memmove(v->ids + p0, v->ids + p0 + d,
	        (size_t)(v->n_ids - p0 - d) * sizeof(*v->ids));
	v->n_ids -= d;
	return 0;
}

/* ||a-b|| / ||b|| (2-norms) over N floats; infinite when either is not
   finite. */
static float verify_rel_diff(const float *a, const float *b, int32_t n)
{
	double e = 0, s = 0;

	for (int32_t i = 0; i < n; i++) {
		double d = (double)a[i] - b[i];

		if (!isfinite(a[i]) || !isfinite(b[i]))
			return INFINITY;
		e += d * d;
		s += (double)b[i] * b[i];
	}
	return (float)sqrt(e / (s > 1e-60 ? s : 1e-60));
}

/* sum (a-b)^2 / sum b^2 over N floats; infinite when either is not
   finite (a NaN logit is a failure, never "no logits"). */
static double verify_nmse(const float *a, const float *b, int32_t n)
{
	double e = 0, s = 0;

	for (int32_t i = 0; i < n; i++) {
		double d = (double)a[i] - b[i];

		if (!isfinite(a[i]) || !isfinite(b[i]))
			return INFINITY;
		e += d * d;
		s += (double)b[i] * b[i];
	}
	if (s > 0)
		return e / s;
	return e == 0 ? 0 : INFINITY;
}

/* Compare the captured layers and the logit rows into the trace and R. */
static void verify_compare(struct verify *v, const float *la, const float *lb,
                           struct verify_report *r)
{
	struct trace_verify *tv = &v->pt->verify;

	r->worst_layer = 0;
	r->worst_diff = -1;
	r->first_bad = -1;
	r->first_bad_diff = 0;
	for (int32_t il = 0; il < v->n_layer; il++) {
		size_t off = (size_t)il * (size_t)v->n_embd;
		float d = verify_rel_diff(v->pt->resid + off,
		                          v->rt->resid + off, v->n_embd);

		tv->diff[il] = d;
		if (!(d <= r->worst_diff)) { /* NaN-proof: INFINITY wins */
			r->worst_diff = d;
			r->worst_layer = il;
		}
		if (r->first_bad < 0 && !(d <= verify_tolerance(v, il))) {
			r->first_bad = il;
			r->first_bad_diff = d;
		}
	}
	r->logit_nmse = NAN;
	if (la != NULL && lb != NULL)
		r->logit_nmse = verify_nmse(la, lb, v->n_vocab);
	r->logits_bad =
	    !isnan(r->logit_nmse) && !(r->logit_nmse <= v->logit_tol);
	r->layer_tol = v->layer_tol;
	r->logit_tol = v->logit_tol;
	tv->checked = 1;
	tv->worst_layer = r->worst_layer;
	tv->worst_diff = r->worst_diff;
	tv->first_bad = r->first_bad;
	tv->logit_nmse = r->logit_nmse;
	tv->logits_bad = r->logits_bad;
}

/* What the primary's choice of experts gave up for the reference's
 * router in the step just evaluated: the most over the mixture layers
 * (model_moe_pin; 0 where every choice was the reference's own). */
static float verify_route_dev(const struct verify *v)
{
	float worst = 0.0f;

	for (int il = 0; il < v->n_layer; il++)
		if (!(v->rt->expert_dev[il] <= worst))
			worst = v->rt->expert_dev[il];
	return worst;
}

int verify_step(struct verify *v, const int32_t *ids, int32_t n_ids,
                int32_t n_new, struct verify_report *r, char *err,
                size_t errlen)
{
	struct verify_report rep = {0};
	struct trace *t = v->pt;
	const float *la, *lb;
	int32_t base = n_ids - n_new;
	char msg[256] = "";
	int rc;

	if (n_new < 1 || base < 0 || t->pos != n_ids - 1 ||
	    t->n_tokens != n_new || engine_n_past(v->primary) != n_ids) {
		snprintf(err, errlen,
		         "verify: step of %d ids at %d does not match the "
		         "primary's last eval (%d ids ending at %d)",
		         n_new, base, t->n_tokens, t->pos);
		return -1;
	}
	if (verify_catch_up(v, ids, base, &rep.n_caught_up, msg, sizeof(msg)) !=
	    0)
		goto fail;
	/* the primary's last row, if its eval kept logits: the reference
	   then computes its own, else none (the same work as the primary);
	   the primary's buffer stays valid until its next eval */
	la = engine_logits(v->primary);
	if (la != NULL)
		la += (size_t)(engine_n_logits(v->primary) - 1) *
		      (size_t)v->n_vocab;
	/* a mixture: the reference takes the experts the primary chose, so
	   that a near tie flipped by the primary's rounding is not counted
	   as its error: for every row of the step where the primary's trace
	   kept them (a prefill: otherwise the rows before the last would
	   put other keys and values in the reference's cache for every
	   later step), else for its last token (trace.h pin_rows,
	   pin_experts; a decode graph keeps no rows); the catch-up above
	   routed on its own */
	rep.rows_pinned = v->moe && n_new > 1 && t->row_expert_id != NULL &&
	                  t->n_rows == n_new && trace_pin_rows(v->rt, t) == 0;
	if (!rep.rows_pinned)
		trace_pin_experts(v->rt, t);
	rc = engine_eval(v->ref, ids + base, n_new,
	                 la ? 0 : ENGINE_EVAL_NO_LOGITS, msg, sizeof(msg));
	trace_pin_experts(v->rt, NULL);
	trace_pin_rows(v->rt, NULL);
	rep.route_dev = v->moe ? verify_route_dev(v) : -1.0f;
	if (rc != 0 || verify_keep(v, ids + base, n_new) != 0)
		goto fail;
	lb = la ? engine_logits(v->ref) : NULL;
	rep.step = t->step;
	rep.pos = t->pos;
	rep.n_tokens = n_new;
	rep.token = ids[n_ids - 1];
	verify_compare(v, la, lb, &rep);
	trace_end_step(t);
	if (r != NULL)
		*r = rep;
	return 0;
fail:
	/* the reference holds some prefix of IDS: the next step cuts it;
	   the primary's step is ended uncompared (its JSON line written) */
	trace_end_step(t);
	snprintf(err, errlen, "verify: reference: %s",
	         msg[0] ? msg : "out of memory");
	return -1;
}

double verify_tolerance(const struct verify *v, int il)
{
	(void)il; /* one bound for every layer: see the notes */
	return v->layer_tol;
}

double verify_logit_tolerance(const struct verify *v)
{
	return v->logit_tol;
}

const struct trace *verify_trace(const struct verify *v)
{
	return v->pt;
}

void verify_summary_init(struct verify_summary *s)
{
	memset(s, 0, sizeof(*s));
	s->worst_layer = -1;
	s->worst_diff = -1;
	s->worst_pos = -1;
	s->max_nmse = -1;
	s->bad_pos = -1;
	s->bad_layer = -1;
	s->max_route_dev = -1;
}

void verify_summary_add(struct verify_summary *s, const struct verify_report *r)
{
	bool bad = r->first_bad >= 0 || r->logits_bad;

	s->n_checked++;
	s->layer_tol = r->layer_tol;
	s->logit_tol = r->logit_tol;
	if (!(r->worst_diff <= s->worst_diff)) {
		s->worst_diff = r->worst_diff;
		s->worst_layer = r->worst_layer;
		s->worst_pos = r->pos;
	}
	if (!isnan(r->logit_nmse) && !(r->logit_nmse <= s->max_nmse))
		s->max_nmse = r->logit_nmse;
	if (r->route_dev >= 0 && !(r->route_dev <= s->max_route_dev))
		s->max_route_dev = r->route_dev;
	if (bad && s->n_bad++ == 0) {
		s->bad_pos = r->pos;
		s->bad_layer = r->first_bad;
	}
}

const char *verify_summary_format(const struct verify_summary *s, char *buf,
                                  size_t len)
{
	int n = snprintf(buf, len,
	                 "verify: %d steps; worst layer %d diff %.3g (position "
	                 "%d); max logit NMSE %.3g; ",
	                 s->n_checked, s->worst_layer, s->worst_diff,
	                 s->worst_pos, s->max_nmse);
	size_t k = n < 0 ? 0 : (size_t)n < len ? (size_t)n : len;

	if (s->n_checked == 0)
		snprintf(buf, len, "verify: nothing evaluated");
	else if (s->n_bad == 0)
		snprintf(buf + k, len - k,
		         "all within tolerance (%g per layer, %g logits)",
		         s->layer_tol, s->logit_tol);
	else if (s->bad_layer >= 0)
		snprintf(buf + k, len - k,
		         "%d over tolerance (%g), the first at position %d, "
		         "layer %d",
		         s->n_bad, s->layer_tol, s->bad_pos, s->bad_layer);
	else
		snprintf(buf + k, len - k,
		         "%d over tolerance (%g), the first at position %d "
		         "(logits)",
		         s->n_bad, s->logit_tol, s->bad_pos);
	k = strlen(buf);
	if (s->n_checked > 0 && s->max_route_dev >= 0 && k < len)
		snprintf(buf + k, len - k,
		         "; experts: the reference took the primary's, which "
		         "gave up at most %.3g of its router's scores",
		         s->max_route_dev);
	return buf;
}

/*
 * t_engine_select.c - the engine's select step (engine.h) against a
 * brute-force definition, sampling from a selection against sampling from
 * the full row (same ids, same reports), and the CPU engine's select and
 * ENGINE_EVAL_NO_LOGITS on a real (tiny, committed) model.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine_backend.h"
#include "engine_util.h"
#include "gguf.h"
#include "model.h"
#include "sampler.h"
#include "select_util.h"
#include "tap.h"

struct ent {
	float l;
	int32_t id;
};

static int ent_cmp(const void *pa, const void *pb)
{
	const struct ent *a = pa, *b = pb;

	if (a->l != b->l)
		return a->l > b->l ? -1 : 1;
	return (a->id > b->id) - (a->id < b->id);
}

/* Brute force: penalise a copy, sort everything. */
static void brute(const float *row, int32_t n,
                  const struct engine_select_req *q, struct ent *pen,
                  struct ent *raw, double *lse, double *ent, double *plse)
{
	int32_t *cnt = calloc((size_t)n, sizeof(*cnt));
	double mx = -INFINITY, s = 0, a = 0;

	for (int32_t i = 0; i < q->n_recent; i++)
		if (q->recent[i] >= 0 && q->recent[i] < n)
			cnt[q->recent[i]]++;
	for (int32_t i = 0; i < n; i++) {
		float l = row[i];

		raw[i].l = l;
		raw[i].id = i;
		if (cnt[i] > 0 && (q->repeat_penalty != 1.0f ||
		                   q->frequency_penalty != 0.0f ||
		                   q->presence_penalty != 0.0f)) {
			l = l <= 0.0f ? l * q->repeat_penalty
			              : l / q->repeat_penalty;
			l -= (float)cnt[i] * q->frequency_penalty +
			     q->presence_penalty;
		}
		pen[i].l = l;
		pen[i].id = i;
		if (row[i] > mx)
			mx = row[i];
	}
	for (int32_t i = 0; i < n; i++)
		if (row[i] != -INFINITY) {
			double w = exp(row[i] - mx);

			s += w;
			a += w * (row[i] - mx);
		}
	*lse = mx + log(s);
	*ent = log(s) - a / s;
	mx = -INFINITY;
	s = 0;
	for (int32_t i = 0; i < n; i++)
		if (pen[i].l > mx)
			mx = pen[i].l;
	for (int32_t i = 0; i < n; i++)
		if (pen[i].l != -INFINITY)
			s += exp(pen[i].l - mx);
	*plse = mx + log(s);
	qsort(pen, (size_t)n, sizeof(*pen), ent_cmp);
	qsort(raw, (size_t)n, sizeof(*raw), ent_cmp);
	free(cnt);
}

static int close_rel(double a, double b, double tol)
{
	return fabs(a - b) <= tol * (1.0 + fabs(b));
}

/* engine_select_row against the brute force over many shapes. */
static void check_select_row(void)
{
	static const int32_t sizes[] = {1, 2, 7, 100, 1000, 49152};
	struct engine_select_buf b;
	char err[256];
	int bad = 0, cases = 0;

	buf_alloc(&b);
	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		int32_t n = sizes[si];
		float *row = malloc((size_t)n * sizeof(float));
		struct ent *pen = malloc((size_t)n * sizeof(*pen));
		struct ent *raw = malloc((size_t)n * sizeof(*raw));
		int32_t win[300];

		for (int rep = 0; rep < 12; rep++) {
			struct engine_select_req q = {0};
			double lse, ent, plse;

			make_row(row, n, rep & 1, rep % 3 == 2 ? 5 : 0);
			if (rep % 3 == 2)
				row[rnd() % (uint32_t)n] =
				    1.0f; /* one finite */
			q.k = 1 + (int32_t)(rnd() % 300);
			if (rep == 5)
				q.k = ENGINE_SELECT_MAX;
			q.n_raw = (int32_t)(rnd() % 40);
			q.n_recent = rep % 4 == 0 ? 0 : (int32_t)(rnd() % 300);
			for (int32_t i = 0; i < q.n_recent; i++)
				win[i] = (int32_t)(rnd() % (uint32_t)(n + 3)) -
				         (i % 17 == 0 ? n + 1 : 0);
			q.recent = win;
			q.repeat_penalty = rep % 2 ? 1.3f : 1.0f;
			q.frequency_penalty = rep % 5 == 1 ? 0.2f : 0.0f;
			q.presence_penalty = rep % 3 == 1 ? 0.5f : 0.0f;
			cases++;
			if (engine_select_row(row, n, &q, &b, err,
			                      sizeof(err)) != 0) {
				tap_diag("n %d: %s", n, err);
				bad++;
				continue;
			}
			brute(row, n, &q, pen, raw, &lse, &ent, &plse);
			int ok = b.out.k == (q.k < n ? q.k : n) &&
			         b.out.n_raw == (q.n_raw < n ? q.n_raw : n);
			for (int32_t i = 0; ok && i < b.out.k; i++)
				ok = b.out.id[i] == pen[i].id &&
				     b.out.logit[i] == pen[i].l &&
				     b.out.raw_logit[i] == row[pen[i].id];
			for (int32_t i = 0; ok && i < b.out.n_raw; i++)
				ok = b.out.raw_id[i] == raw[i].id &&
				     b.out.raw_top[i] == raw[i].l;
			ok = ok && close_rel(b.out.raw_lse, lse, 1e-12) &&
			     close_rel(b.out.raw_entropy, ent, 1e-9) &&
			     close_rel(b.out.lse, plse, 1e-12);
			if (!ok) {
				tap_diag("mismatch: n %d k %d n_raw %d window "
				         "%d rep %d",
				         n, q.k, q.n_raw, q.n_recent, rep);
				bad++;
			}
		}
		free(row);
		free(pen);
		free(raw);
	}
	tap_ok(bad == 0,
	       "select = brute force (ids, penalised and raw logits, "
	       "lse, entropy) in %d cases, ties and -inf included",
	       cases);
	buf_free(&b);
}

/* Garbage logits are errors that name the token. */
static void check_select_errors(void)
{
	struct engine_select_buf b;
	struct engine_select_req q = {.k = 3, .repeat_penalty = 1.0f};
	float row[50];
	char err[256] = "";
	int rc;

	buf_alloc(&b);
	make_row(row, 50, 0, 0);
	row[17] = NAN;
	rc = engine_select_row(row, 50, &q, &b, err, sizeof(err));
	tap_ok(rc != 0 && strstr(err, "17") && strstr(err, "NaN"),
	       "NaN logit: error naming token 17 (%s)", err);
	row[17] = INFINITY;
	rc = engine_select_row(row, 50, &q, &b, err, sizeof(err));
	tap_ok(rc != 0 && strstr(err, "17") && strstr(err, "+inf"),
	       "+inf logit: error naming token 17 (%s)", err);
	for (int i = 0; i < 50; i++)
		row[i] = -INFINITY;
	rc = engine_select_row(row, 50, &q, &b, err, sizeof(err));
	tap_ok(rc != 0 && strstr(err, "-inf"), "all -inf: error (%s)", err);
	buf_free(&b);
}

/* One sampler configuration for the equivalence test. */
static void config_for(int c, struct sampler_config *g)
{
	sampler_config_default(g);
	g->seed = 1000 + (uint64_t)c;
	g->temperature = c % 4 == 0 ? 0.0f : (c % 4 == 1 ? 0.7f : 1.3f);
	g->top_k = 1 + (c * 37) % 400;
	g->top_p = c % 3 == 0 ? 1.0f : (c % 3 == 1 ? 0.9f : 0.5f);
	g->min_p = c % 5 == 0 ? 0.0f : 0.05f * (float)(c % 5);
	g->repeat_penalty = c % 2 ? 1.15f : 1.0f;
	g->frequency_penalty = c % 7 == 3 ? 0.3f : 0.0f;
	g->presence_penalty = c % 6 == 2 ? 0.4f : 0.0f;
	g->penalty_last_n = c % 8 == 7 ? -1 : 64;
	g->n_probs = c % 3 == 2 ? 0 : 10;
}

/* Sampling from the selection = sampling from the full row. */
static void check_sampler_equivalence(void)
{
	const int32_t nv = 3000;
	float *row = malloc((size_t)nv * sizeof(float));
	int32_t hist[600];
	struct engine_select_buf b;
	int bad = 0, steps = 0, configs = 0;
	char err[256];

	buf_alloc(&b);
	for (int c = 0; c < 24; c++) {
		struct sampler_config g;
		struct sampler *full, *top;
		size_t nh = 0;

		config_for(c, &g);
		full = sampler_new(&g, nv, err, sizeof(err));
		top = sampler_new(&g, nv, err, sizeof(err));
		if (full == NULL || top == NULL) {
			tap_diag("sampler_new: %s", err);
			bad++;
			break;
		}
		configs++;
		for (int step = 0; step < 120; step++) {
			struct sampler_report ra, rb;
			struct engine_select_req q = {0};
			struct sampler_top t;
			int32_t k = sampler_select_k(top, ENGINE_SELECT_MAX);
			size_t w = sampler_window(top, nh);
			int32_t a, bb;

			make_row(row, nv, step % 2, step % 5 == 0 ? 40 : 0);
			a = sampler_sample(full, row, nv, hist, nh, &ra, err,
			                   sizeof(err));
			q.k = k;
			q.n_raw = g.n_probs;
			q.recent = hist + (nh - w);
			q.n_recent = (int32_t)w;
			q.repeat_penalty = g.repeat_penalty;
			q.frequency_penalty = g.frequency_penalty;
			q.presence_penalty = g.presence_penalty;
			if (k < 1 || engine_select_row(row, nv, &q, &b, err,
			                               sizeof(err)) != 0) {
				tap_diag("config %d: k %d: %s", c, k, err);
				bad++;
				break;
			}
			t.k = b.out.k;
			t.id = b.out.id;
			t.logit = b.out.logit;
			t.raw_logit = b.out.raw_logit;
			t.n_raw = b.out.n_raw;
			t.raw_id = b.out.raw_id;
			t.raw_top = b.out.raw_top;
			t.raw_lse = b.out.raw_lse;
			t.raw_entropy = b.out.raw_entropy;
			bb = sampler_sample_top(top, &t, &rb, err, sizeof(err));
			steps++;
			int ok =
			    a >= 0 && a == bb && ra.chosen == rb.chosen &&
			    ra.n_kept == rb.n_kept && ra.n_top == rb.n_top &&
			    close_rel(ra.chosen_prob, rb.chosen_prob, 1e-5) &&
			    close_rel(ra.entropy, rb.entropy, 1e-5) &&
			    close_rel(ra.raw_entropy, rb.raw_entropy, 1e-5) &&
			    close_rel(ra.chosen_raw_logprob,
			              rb.chosen_raw_logprob, 1e-5);
			for (int32_t j = 0; ok && j < ra.n_top; j++)
				ok = ra.top[j].id == rb.top[j].id &&
				     close_rel(ra.top[j].prob, rb.top[j].prob,
				               1e-5);
			if (!ok) {
				tap_diag("config %d step %d: full %d top %d "
				         "(%s) kept %d/%d ntop %d/%d p %g/%g "
				         "H %g/%g rawH %g/%g lp %g/%g",
				         c, step, a, bb, bb < 0 ? err : "",
				         ra.n_kept, rb.n_kept, ra.n_top,
				         rb.n_top, ra.chosen_prob,
				         rb.chosen_prob, ra.entropy, rb.entropy,
				         ra.raw_entropy, rb.raw_entropy,
				         ra.chosen_raw_logprob,
				         rb.chosen_raw_logprob);
				bad++;
				break;
			}
			if (nh < sizeof(hist) / sizeof(hist[0]))
				hist[nh++] = a;
			/* the best candidate again: penalties then matter */
			if (step % 3 == 0 &&
			    nh < sizeof(hist) / sizeof(hist[0]))
				hist[nh++] = b.out.id[0];
		}
		sampler_free(full);
		sampler_free(top);
	}
	tap_ok(bad == 0 && configs == 24,
	       "sampling from a selection = sampling from the full row: "
	       "%d configurations, %d steps, same ids and reports",
	       configs, steps);
	/* a configuration that needs the full row says so */
	{
		struct sampler_config g;
		struct sampler *s;

		sampler_config_default(&g);
		g.top_k = 0;
		s = sampler_new(&g, nv, err, sizeof(err));
		tap_ok(s && sampler_select_k(s, ENGINE_SELECT_MAX) == 0,
		       "top_k disabled: the sampler asks for the full row");
		sampler_free(s);
		g.top_k = nv;
		s = sampler_new(&g, nv, err, sizeof(err));
		tap_ok(s && sampler_select_k(s, ENGINE_SELECT_MAX) == 0,
		       "top_k = n_vocab: the full row (id order of the draw)");
		sampler_free(s);
	}
	buf_free(&b);
	free(row);
}

/* The CPU engine: select = the reference over its own logits;
   ENGINE_EVAL_NO_LOGITS keeps the cache right and computes no logits. */
static void check_engine(void)
{
	char path[1024], err[512];
	struct gguf_file *f;
	struct model *m = NULL;
	struct engine *a = NULL, *c = NULL;
	struct engine_params p = {0};
	int32_t toks[20];
	float *ref = NULL;
	int32_t nv;

	eu_data_path("llama_f32", ".gguf", path, sizeof(path));
	f = gguf_open(path, err, sizeof(err));
	if (f == NULL || model_load(f, &m, err, sizeof(err)) != 0) {
		tap_ok(0, "open the llama_f32 test model: %s", err);
		return;
	}
	nv = m->cfg.n_vocab;
	for (int i = 0; i < 20; i++)
		toks[i] = (int32_t)(rnd() % (uint32_t)nv);
	p.n_ctx = 64;
	p.n_threads = 1;
	if (engine_open(m, &p, &a, err, sizeof(err)) != 0 ||
	    engine_open(m, &p, &c, err, sizeof(err)) != 0) {
		tap_ok(0, "engine_open: %s", err);
		goto out;
	}
	tap_ok(strcmp(engine_backend_name(a), "cpu") == 0 &&
	           engine_device_name(a) == NULL,
	       "backend name is cpu, no device name");
	/* a: all 20 at once; c: 12 without logits, then 8 */
	if (engine_eval(a, toks, 20, 0, err, sizeof(err)) != 0 ||
	    engine_eval(c, toks, 12, ENGINE_EVAL_NO_LOGITS, err, sizeof(err)) !=
	        0) {
		tap_ok(0, "eval: %s", err);
		goto out;
	}
	{
		struct engine_select_req q = {.k = 5, .repeat_penalty = 1.0f};

		tap_ok(engine_logits(c) == NULL &&
		           engine_select(c, &q, err, sizeof(err)) == NULL &&
		           strstr(err, "no logits"),
		       "after a no-logits eval: no logits, select refuses "
		       "(%s)",
		       err);
	}
	if (engine_eval(c, toks + 12, 8, 0, err, sizeof(err)) != 0) {
		tap_ok(0, "eval: %s", err);
		goto out;
	}
	ref = malloc((size_t)nv * sizeof(float));
	memcpy(ref, engine_logits(a), (size_t)nv * sizeof(float));
	{
		double d = 0;
		const float *l = engine_logits(c);

		for (int32_t i = 0; i < nv; i++)
			if (fabs(l[i] - ref[i]) > d)
				d = fabs(l[i] - ref[i]);
		tap_ok(d < 1e-4,
		       "12 tokens without logits + 8 = 20 at once (max "
		       "|diff| %.3g)",
		       d);
	}
	{
		struct engine_select_req q = {.k = 7,
		                              .n_raw = 4,
		                              .recent = toks,
		                              .n_recent = 20,
		                              .repeat_penalty = 1.3f,
		                              .presence_penalty = 0.2f};
		struct engine_select_buf b;
		const struct engine_selection *s =
		    engine_select(a, &q, err, sizeof(err));
		int ok = s != NULL;

		buf_alloc(&b);
		ok = ok &&
		     engine_select_row(ref, nv, &q, &b, err, sizeof(err)) == 0;
		for (int32_t i = 0; ok && i < s->k; i++)
			ok = s->id[i] == b.out.id[i] &&
			     s->logit[i] == b.out.logit[i];
		ok = ok && s->k == 7 && s->n_raw == 4 &&
		     s->raw_lse == b.out.raw_lse;
		tap_ok(ok, "engine_select on the CPU engine = the reference "
		           "over its logits");
		buf_free(&b);
	}
out:
	free(ref);
	engine_close(a);
	engine_close(c);
	model_free(m);
	gguf_close(f);
}

int main(void)
{
	check_select_row();
	check_select_errors();
	check_sampler_equivalence();
	check_engine();
	return tap_done();
}

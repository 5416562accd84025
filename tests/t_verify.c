/*
 * t_verify.c - live verification (src/verify.h) without a GPU: the CPU
 * engine in its default arithmetic (int8 activation blocks) is the
 * primary, the CPU exact-dot engine the reference.
 *   - agreement: on the committed Q8_0 models (and SmolLM2 when present)
 *     every step differs a little (> 0: two arithmetics are compared) and
 *     no layer nor the logits exceed their tolerance;
 *   - keeping in step: after a truncate of the primary, and on a primary
 *     that loaded a saved state, the reference catches up by itself;
 *   - divergence: a reference model whose layer K reads another layer's
 *     FFN down-projection (the bug of a kernel indexing the wrong layer)
 *     is caught at layer K, never earlier, on every step, for several K;
 *   - the trace: the step's JSON line carries the comparison, and the
 *     step counter advances once per eval.
 */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "engine.h"
#include "engine_util.h"
#include "gguf.h"
#include "model.h"
#include "tap.h"
#include "trace.h"
#include "verify.h"

#define N_PROMPT 24 /* prompt ids (two evals: 10 then 14) */
#define N_DECODE 8  /* one-id steps after the prompt */

/* Open the GGUF at PATH and load a model from it. */
static struct model *load_model(const char *path, struct gguf_file **f)
{
	char err[512];
	struct model *m = NULL;

	*f = gguf_open(path, err, sizeof(err));
	if (*f == NULL || model_load(*f, &m, err, sizeof(err)) != 0) {
		tap_diag("%s: %s", path, err);
		return NULL;
	}
	return m;
}

/* The CPU engine in its default arithmetic (the primary). */
static struct engine *open_primary(const struct model *m)
{
	struct engine_params p = {0};
	struct engine *e = NULL;
	char err[512];

	p.backend = "cpu";
	p.n_ctx = 128;
	p.n_threads = 2;
	if (engine_open(m, &p, &e, err, sizeof(err)) != 0)
		tap_diag("engine_open: %s", err);
	return e;
}

/* What a run of steps saw. */
struct run {
	int steps;         /* verify_step calls that succeeded */
	int failed;        /* verify_step calls that failed */
	float worst;       /* largest layer difference */
	double nmse;       /* largest logit NMSE */
	int n_nmse;        /* steps with logits compared */
	int bad_steps;     /* steps with a layer over tolerance */
	int first_bad_min; /* smallest first_bad over the bad steps */
	int first_bad_max; /* largest */
	float below_worst; /* largest difference of a layer < first_bad */
	int caught_up;     /* ids the reference evaluated to catch up */
	int logits_bad;    /* steps with logits over tolerance */
};

/* Eval IDS[0..n) on E (FLAGS), then verify_step over CTX[0..n_ctx). */
static void step(struct engine *e, struct verify *v, const int32_t *ctx,
                 int32_t n_ctx, int32_t n, unsigned flags, struct run *r)
{
	struct verify_report rep;
	char err[512];

	if (engine_eval(e, ctx + n_ctx - n, n, flags, err, sizeof(err)) != 0 ||
	    verify_step(v, ctx, n_ctx, n, &rep, err, sizeof(err)) != 0) {
		tap_diag("step at %d: %s", n_ctx - n, err);
		r->failed++;
		return;
	}
	r->steps++;
	r->caught_up += rep.n_caught_up;
	if (!(rep.worst_diff <= r->worst))
		r->worst = rep.worst_diff;
	if (!isnan(rep.logit_nmse)) {
		r->n_nmse++;
		if (!(rep.logit_nmse <= r->nmse))
			r->nmse = rep.logit_nmse;
	}
	r->logits_bad += rep.logits_bad;
	if (rep.first_bad >= 0) {
		const float *d = verify_trace(v)->verify.diff;

		if (r->bad_steps++ == 0 || rep.first_bad < r->first_bad_min)
			r->first_bad_min = rep.first_bad;
		if (rep.first_bad > r->first_bad_max)
			r->first_bad_max = rep.first_bad;
		for (int il = 0; il < rep.first_bad; il++)
			if (d[il] > r->below_worst)
				r->below_worst = d[il];
	}
}

/* The prompt (10 ids without logits, 14 with) and N_DECODE steps of
   CTX's ids through primary E verified by V. */
static void run_steps(struct engine *e, struct verify *v, const int32_t *ctx,
                      struct run *r)
{
	step(e, v, ctx, 10, 10, ENGINE_EVAL_NO_LOGITS, r);
	step(e, v, ctx, N_PROMPT, N_PROMPT - 10, ENGINE_EVAL_ALL, r);
	for (int i = 0; i < N_DECODE; i++)
		step(e, v, ctx, N_PROMPT + 1 + i, 1, 0, r);
}

/* N_PROMPT + N_DECODE ids below N_VOCAB. */
static void make_ids(int32_t *ids, int32_t n_vocab)
{
	for (int i = 0; i < N_PROMPT + N_DECODE; i++)
		ids[i] = (int32_t)((i * 37 + 11) % n_vocab);
}

/* A correct primary agrees with the reference within tolerance. */
static void check_agree(const char *what, const char *path, bool require_diff)
{
	struct gguf_file *f = NULL;
	struct model *m = load_model(path, &f);
	struct engine *e = m ? open_primary(m) : NULL;
	struct verify *v = NULL;
	struct run r = {0};
	int32_t ids[N_PROMPT + N_DECODE];
	char err[512];

	if (!tap_ok(e != NULL &&
	                verify_open(e, m, NULL, 2, &v, err, sizeof(err)) == 0,
	            "%s: primary and verifier open", what))
		goto out;
	make_ids(ids, m->cfg.n_vocab);
	run_steps(e, v, ids, &r);
	tap_ok(r.failed == 0 && r.steps == 2 + N_DECODE,
	       "%s: %d steps verified", what, r.steps);
	tap_ok(r.bad_steps == 0 && r.logits_bad == 0 && isfinite(r.worst) &&
	           r.worst <= VERIFY_TOL_INT8_LAYER && r.n_nmse == 1 + N_DECODE,
	       "%s: int8 dots vs exact dots: worst layer difference %.3g "
	       "(tolerance %g), logit NMSE at most %.3g over %d rows, no "
	       "layer over",
	       what, r.worst, VERIFY_TOL_INT8_LAYER, r.nmse, r.n_nmse);
	if (require_diff)
		tap_ok(r.worst > 0 && r.nmse > 0,
		       "%s: the two arithmetics do differ (the check compares "
		       "two computations)",
		       what);
out:
	verify_close(v);
	engine_close(e);
	model_free(m);
	gguf_close(f);
}

/* Truncate and state load of the primary: the reference catches up. */
static void check_in_step(const char *path)
{
	struct gguf_file *f = NULL;
	struct model *m = load_model(path, &f);
	struct engine *e = m ? open_primary(m) : NULL;
	struct engine *e2 = m ? open_primary(m) : NULL;
	struct verify *v = NULL;
	struct run r = {0}, r2 = {0};
	int32_t ids[N_PROMPT + N_DECODE], alt[N_PROMPT + N_DECODE];
	char err[512];
	void *st = NULL;
	size_t len;

	if (!tap_ok(e && e2 &&
	                verify_open(e, m, NULL, 2, &v, err, sizeof(err)) == 0,
	            "in step: setup"))
		goto out;
	make_ids(ids, m->cfg.n_vocab);
	run_steps(e, v, ids, &r);
	/* cut the primary back to 12 and go on with other ids */
	memcpy(alt, ids, sizeof(ids));
	for (int i = 12; i < N_PROMPT + N_DECODE; i++)
		alt[i] = (int32_t)((i * 53 + 5) % m->cfg.n_vocab);
	engine_truncate(e, 12);
	r.caught_up = 0;
	step(e, v, alt, 16, 4, 0, &r);
	step(e, v, alt, 17, 1, 0, &r);
	tap_ok(r.failed == 0 && r.bad_steps == 0 && r.caught_up == 0,
	       "in step: after truncate(12) the reference follows (%d "
	       "steps, caught up %d ids, worst %.3g)",
	       r.steps, r.caught_up, r.worst);
	/* a fresh primary that loads the state: the reference is empty */
	len = engine_state_size(e);
	st = malloc(len);
	if (!tap_ok(st && engine_state_save(e, st, len, err, sizeof(err)) &&
	                engine_state_load(e2, st, len, err, sizeof(err)) == 0,
	            "in step: state saved and loaded"))
		goto out;
	verify_close(v);
	v = NULL;
	if (verify_open(e2, m, NULL, 2, &v, err, sizeof(err)) != 0)
		goto out;
	step(e2, v, alt, 18, 1, 0, &r2);
	tap_ok(r2.failed == 0 && r2.bad_steps == 0 && r2.caught_up == 17,
	       "in step: after a state load the reference evaluates the "
	       "17 ids it lacks (caught up %d, worst %.3g)",
	       r2.caught_up, r2.worst);
	{ /* a call that does not match the last eval is refused */
		struct verify_report rep;

		tap_ok(verify_step(v, alt, 18, 2, &rep, err, sizeof(err)) != 0,
		       "in step: a step that is not the last eval is refused "
		       "(%s)",
		       err);
	}
out:
	free(st);
	verify_close(v);
	engine_close(e);
	engine_close(e2);
	model_free(m);
	gguf_close(f);
}

/* Write a 6-layer Q8_0 llama into PATH (parley-mkmodel). */
static int make_deep_model(const char *path)
{
	char *argv[] = {"dev-mkmodel", "--arch",      "llama",      "--n-embd",
	                "128",         "--n-ff",      "256",        "--n-head",
	                "4",           "--n-head-kv", "2",          "--n-layer",
	                "6",           "--n-vocab",   "96",         "--type",
	                "Q8_0",        "-o",          (char *)path, NULL};

	return cmd_mkmodel((int)(sizeof(argv) / sizeof(argv[0])) - 1, argv);
}

/* A reference whose layer K is wrong: caught at K, on every step. With
   SLACK (a real model under the int8 tolerance, where the wrong layer's
   own difference, 0.2..0.45, may stay under it for a layer or two):
   never before K, at most SLACK layers after it, on 4 steps in 5. */
static void check_divergence(const char *what, const char *path, int k,
                             int slack)
{
	struct gguf_file *f = NULL;
	struct model *m = load_model(path, &f), *bad = NULL;
	struct engine *e = m ? open_primary(m) : NULL;
	struct verify *v = NULL;
	struct trace *t = NULL;
	struct run r = {0};
	int32_t ids[N_PROMPT + N_DECODE];
	char err[512], line[1 << 14], want[64];
	FILE *tf = tmpfile();
	int n_lines = 0, n_named = 0;

	if (m == NULL || model_load(f, &bad, err, sizeof(err)) != 0 ||
	    e == NULL || tf == NULL)
		goto out;
	/* layer k reads the down-projection of the next layer */
	bad->w.layers[k].ffn.down =
	    m->w.layers[(k + 1) % m->cfg.n_layer].ffn.down;
	t = trace_new(m->cfg.n_layer, 5, tf);
	if (t == NULL)
		goto out;
	engine_set_trace(e, t);
	if (verify_open(e, bad, t, 2, &v, err, sizeof(err)) != 0) {
		tap_diag("verify_open: %s", err);
		goto out;
	}
	make_ids(ids, m->cfg.n_vocab);
	run_steps(e, v, ids, &r);
	tap_ok(r.failed == 0 && r.steps > 0 &&
	           (slack ? r.bad_steps * 5 >= r.steps * 4
	                  : r.bad_steps == r.steps) &&
	           r.first_bad_min >= k && r.first_bad_max <= k + slack &&
	           (slack || r.first_bad_min == k),
	       "%s, divergence at layer %d: every step (%d of %d) names "
	       "layer %d..%d first",
	       what, k, r.bad_steps, r.steps, r.first_bad_min, r.first_bad_max);
	tap_ok(r.below_worst <= VERIFY_TOL_INT8_LAYER,
	       "%s, divergence at layer %d: layers before the named one "
	       "within tolerance (worst %.3g; the worst %.3g)",
	       what, k, r.below_worst, r.worst);
	tap_ok(r.logits_bad > 0 && r.nmse > VERIFY_TOL_INT8_LOGIT,
	       "%s, divergence at layer %d: logits over tolerance in %d of "
	       "%d rows (NMSE up to %.3g)",
	       what, k, r.logits_bad, r.n_nmse, r.nmse);
	/* the JSON lines: one per eval, each with the comparison */
	fflush(tf);
	rewind(tf);
	while (fgets(line, sizeof(line), tf)) {
		const char *p = strstr(line, "\"verify\":{");
		int named = 0;

		n_lines++;
		for (int j = k; p && j <= k + slack; j++) {
			snprintf(want, sizeof(want), "\"first_bad\":%d,", j);
			named |= strstr(p, want) != NULL;
		}
		n_named += named;
	}
	tap_ok(n_lines == r.steps && n_named == r.bad_steps &&
	           t->step == r.steps,
	       "%s, divergence at layer %d: %d JSON lines, %d name the "
	       "layer, trace step %lld",
	       what, k, n_lines, n_named, (long long)t->step);
out:
	verify_close(v);
	engine_close(e);
	trace_free(t);
	if (tf)
		fclose(tf);
	model_free(bad);
	model_free(m);
	gguf_close(f);
}

/* A NaN in layer K of the reference: infinitely different from K on, the
   logits too (a NaN is never "no logits"). */
static void check_nan(const char *path, int k)
{
	struct gguf_file *f = NULL;
	struct model *m = load_model(path, &f), *bad = NULL;
	struct engine *e = m ? open_primary(m) : NULL;
	struct verify *v = NULL;
	struct run r = {0};
	int32_t ids[N_PROMPT + N_DECODE];
	char err[512];

	if (m == NULL || e == NULL ||
	    model_load(f, &bad, err, sizeof(err)) != 0 ||
	    verify_open(e, bad, NULL, 2, &v, err, sizeof(err)) != 0)
		goto out;
	bad->w.layers[k].ffn.norm[0] = NAN;
	make_ids(ids, m->cfg.n_vocab);
	run_steps(e, v, ids, &r);
	tap_ok(r.failed == 0 && r.bad_steps == r.steps && r.steps > 0 &&
	           r.first_bad_min == k && r.first_bad_max == k &&
	           isinf(r.worst) && r.logits_bad == r.n_nmse && r.n_nmse > 0,
	       "NaN at layer %d: every step names it (%d of %d), difference "
	       "%g, logits over in %d of %d rows",
	       k, r.bad_steps, r.steps, r.worst, r.logits_bad, r.n_nmse);
out:
	verify_close(v);
	engine_close(e);
	model_free(bad);
	model_free(m);
	gguf_close(f);
}

/* Write a qwen3moe of 64 experts choosing 8 into PATH (parley-mkmodel):
 * many near ties, which the primary's int8 activations flip. */
static int make_moe_model(const char *path)
{
	char *argv[] = {
	    "dev-mkmodel", "--arch",     "qwen3moe", "--n-embd",
	    "64",          "--n-head",   "4",        "--n-head-kv",
	    "1",           "--head-dim", "32",       "--n-ff",
	    "64",          "--n-expert", "64",       "--n-expert-used",
	    "8",           "--n-ff-exp", "32",       "--n-layer",
	    "4",           "--n-vocab",  "96",       "--type",
	    "Q8_0",        "--seed",     "7",        "-o",
	    (char *)path,  NULL};

	return cmd_mkmodel((int)(sizeof(argv) / sizeof(argv[0])) - 1, argv);
}

/* A mixture: the reference takes the primary's experts for every row of
 * a prompt's step (rows_pinned) and for a decode step's token, so that the
 * steps agree within tolerance although the primary's int8 activations
 * flip near ties of the routers (route_dev > 0 on a prompt's step: a row
 * the reference, routing on its own, would have sent elsewhere). */
static void check_moe(const char *path)
{
	struct gguf_file *f = NULL;
	struct model *m = load_model(path, &f);
	struct engine *e = m ? open_primary(m) : NULL;
	struct verify *v = NULL;
	struct verify_report rep;
	int32_t ids[N_PROMPT + N_DECODE];
	int pinned = 0, flipped_rows = 0, flipped = 0, bad = 0, failed = 0;
	float worst = 0.0f, dev = 0.0f;
	char err[512];

	if (!tap_ok(e != NULL &&
	                verify_open(e, m, NULL, 2, &v, err, sizeof(err)) == 0,
	            "moe: primary and verifier open"))
		goto out;
	make_ids(ids, m->cfg.n_vocab);
	for (int i = 0; i < 2 + N_DECODE; i++) {
		const int32_t n_ctx = i == 0   ? 10
		                      : i == 1 ? N_PROMPT
		                               : N_PROMPT + i - 1;
		const int32_t n = i == 0 ? 10 : i == 1 ? N_PROMPT - 10 : 1;

		if (engine_eval(e, ids + n_ctx - n, n, 0, err, sizeof(err)) ||
		    verify_step(v, ids, n_ctx, n, &rep, err, sizeof(err))) {
			tap_diag("step %d: %s", i, err);
			failed++;
			continue;
		}
		pinned += rep.rows_pinned && n > 1;
		flipped_rows += rep.rows_pinned && rep.route_dev > 0;
		flipped += rep.route_dev > 0;
		bad += rep.first_bad >= 0 || rep.logits_bad;
		worst = rep.worst_diff > worst ? rep.worst_diff : worst;
		dev = rep.route_dev > dev ? rep.route_dev : dev;
	}
	tap_ok(failed == 0 && pinned == 2,
	       "moe: both prompt steps pinned row by row (%d of 2)", pinned);
	tap_ok(flipped_rows > 0,
	       "moe: the primary flipped a near tie in a prompt step (%d "
	       "steps, %d in all; at most %.3g of the scores given up)",
	       flipped_rows, flipped, dev);
	tap_ok(failed == 0 && bad == 0,
	       "moe: every step within tolerance with the experts pinned "
	       "(worst layer difference %.3g)",
	       worst);
out:
	verify_close(v);
	engine_close(e);
	model_free(m);
	gguf_close(f);
}

int main(void)
{
	const char *tmpdir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char path[1024], deep[1024];

	eu_data_path("llama_q8_0", ".gguf", path, sizeof(path));
	check_agree("llama_q8_0", path, true);
	eu_data_path("qwen2_q8_0", ".gguf", path, sizeof(path));
	check_agree("qwen2_q8_0", path, true);
	eu_data_path("llama_f32_gqa7_tied", ".gguf", path, sizeof(path));
	check_agree("llama_f32_gqa7_tied", path, false);
	eu_data_path("llama_q8_0", ".gguf", path, sizeof(path));
	check_in_step(path);

	snprintf(deep, sizeof(deep), "%.900s/t_verify_%d.gguf", tmpdir,
	         (int)getpid());
	if (tap_ok(make_deep_model(deep) == 0, "6-layer Q8_0 model written")) {
		check_agree("6-layer q8_0", deep, true);
		check_divergence("6-layer q8_0", deep, 0, 0);
		check_divergence("6-layer q8_0", deep, 3, 0);
		check_divergence("6-layer q8_0", deep, 5, 0);
		check_nan(deep, 2);
	}
	unlink(deep);
	if (tap_ok(make_moe_model(deep) == 0, "qwen3moe model written"))
		check_moe(deep);
	unlink(deep);

	eu_model_path(path, sizeof(path));
	if (access(path, R_OK) == 0) {
		check_agree("SmolLM2-135M Q4_1", path, true);
		check_divergence("SmolLM2-135M Q4_1", path, 10, 2);
	} else
		tap_diag("%s not present: SmolLM2 not checked", path);
	return tap_done();
}

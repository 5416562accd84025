/*
 * t_cuda_engine.c - the CUDA engine against the CPU reference engine
 * (exact_dots: dequantized rows dotted with fp32 activations) on the same
 * tokens: random-weight models of every architecture and weight type
 * (made by tests/parley-mkmodel), and the real SmolLM2 when present.
 * Prints "1..0 # SKIP" without a CUDA device.
 *
 * Per model: a 20-token prefill with the logits of every position, then 4
 * one-token decode steps; NMSE = mse(gpu, cpu) / mse(cpu, 0) over each
 * eval's logits must stay <= 5e-4 (the GPU rounds GEMM inputs and the KV
 * cache to fp16), plus, for decode steps with int8 activations, twice the
 * deviation of the CPU engine's own int8 arithmetic on the same steps
 * (open_cpu_x8). Also: a state saved by one backend restores in the other
 * (same bytes layout) and the next token agrees; truncate + re-evaluate
 * reproduces the CPU's logits (within the decode steps' bound); on
 * SmolLM2, greedy continuation picks the CPU's token at every step where
 * the CPU's top-2 margin is clear (> 0.1, and > 3 times the rms deviation
 * of the CPU engine's own int8 arithmetic at that step).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_ops.h"
#include "engine.h"
#include "engine_backend.h" /* ops.kv_save: the caches after a shift */
#include "engine_util.h"
#include "gguf.h"
#include "model.h"
#include "tap.h"
#include "qtype.h"
#include "trace.h"
#include "verify.h"

#define TOL       5e-4
#define N_PREFILL 20
#define N_DECODE  4

/* mse(g, c) / mse(c, 0). */
static double nmse(const float *g, const float *c, size_t n)
{
	double num = 0, den = 0;

	for (size_t i = 0; i < n; i++) {
		double d = (double)g[i] - c[i];

		num += d * d;
		den += (double)c[i] * c[i];
	}
	return den > 0 ? num / den : num;
}

/* Open a CPU (reference) or CUDA engine of N_CTX positions. */
static struct engine *open_engine_ctx(const struct model *m,
                                      const char *backend, int32_t n_batch,
                                      int32_t n_ctx, const char *what)
{
	struct engine_params p = {0};
	struct engine *e = NULL;
	char err[512] = "";

	p.backend = backend;
	p.n_ctx = n_ctx;
	p.n_batch = n_batch;
	p.exact_dots = true;
	int rc = engine_open(m, &p, &e, err, sizeof(err));

	/* the call first: argument evaluation order is unspecified */
	if (!tap_ok(rc == 0, "%s: open %s %s", what, backend, rc ? err : ""))
		return NULL;
	return e;
}

static struct engine *open_engine(const struct model *m, const char *backend,
                                  int32_t n_batch, const char *what)
{
	return open_engine_ctx(m, backend, n_batch, 128, what);
}

/*
 * A CPU engine in the arithmetic of the GPU's decode steps: int8
 * activations for the weight types whose mat-vec quantizes them
 * (cuda_x8_types), exact dots for the rest. Rounding activations to int8
 * is noise of its own (cuda_vecdot8.cuh note 3: up to 1.2e-3 NMSE on a
 * SmolLM2 step, in the CPU engine's default arithmetic as on the GPU), far
 * above the fp16 bound, and the two engines' roundings are independent
 * (an activation a hair from a rounding boundary goes either way). So a
 * decode step of the GPU is held to the exact reference within TOL plus
 * twice the deviation of this engine from the exact one on the same step
 * (x8_bound); with no int8 type it is the exact engine and the bound TOL.
 */
static struct engine *open_cpu_x8(const struct model *m, int32_t n_ctx,
                                  const char *what)
{
	struct engine_params p = {0};
	struct engine *e = NULL;
	char err[512] = "";

	p.backend = "cpu";
	p.n_ctx = n_ctx;
	p.exact_dot_types = ~cuda_x8_types();
	int rc = engine_open(m, &p, &e, err, sizeof(err));

	if (!tap_ok(rc == 0, "%s: open cpu (int8 where the GPU) %s", what,
	            rc ? err : ""))
		return NULL;
	return e;
}

/* The bound of a GPU decode step's NMSE against the exact CPU engine,
 * given E8, the int8 CPU engine's on the same step (open_cpu_x8). */
static double x8_bound(double e8)
{
	return TOL + 2 * e8;
}

/* Evaluate token T on the int8 CPU engine C8; its logits' NMSE against
 * the exact engine C's current ones, or -1. */
/*
 * A mixture: a one-token eval of the CPU engines takes the experts the
 * GPU chose (trace.h pin_experts, as cuda_parity and --verify do), so that
 * a near tie that the two arithmetics break differently is not counted
 * as their difference (one flipped choice moves the logits by 1e-1);
 * pin_layers is the model's layer count while a mixture is checked, else
 * 0 (no traces attached: the untraced paths stay the ones tested).
 */
static int pin_layers;
static struct trace *pin_g; /* the GPU's last choice, or NULL */

/* Eval N tokens on E, pinned to pin_g's choice when PIN (and a mixture
   is checked): a token's, or a batch's row by row (trace_rows: the same
   N tokens' batch on the GPU just before); with RECORD, E's choice
   becomes pin_g. 0 or -1. */
static int eval_pinned(struct engine *e, const int32_t *toks, int32_t n,
                       unsigned flags, bool pin, bool record, char *err,
                       size_t errlen)
{
	struct trace *t = NULL;
	int rc;

	if (pin_layers > 0 && (record || (pin && pin_g != NULL))) {
		t = trace_new(pin_layers, 1, NULL);
		if (t != NULL && trace_rows(t, n) != 0) {
			trace_free(t);
			t = NULL;
		}
		if (t != NULL && pin && pin_g != NULL) {
			if (n == 1)
				trace_pin_experts(t, pin_g);
			else if (pin_g->n_rows != n ||
			         trace_pin_rows(t, pin_g) != 0) {
				snprintf(err, errlen,
				         "no rows of the GPU's to pin %d "
				         "tokens to",
				         n);
				trace_free(t);
				return -1;
			}
		}
		engine_set_trace(e, t);
	}
	rc = engine_eval(e, toks, n, flags, err, errlen);
	if (t != NULL) {
		engine_set_trace(e, NULL);
		if (record) {
			trace_free(pin_g);
			pin_g = t;
		} else {
			trace_free(t);
		}
	}
	return rc;
}

static double eval_x8(struct engine *c8, struct engine *c, int32_t t)
{
	char err[512] = "";

	if (eval_pinned(c8, &t, 1, 0, true, false, err, sizeof(err)) != 0) {
		tap_diag("eval failed: %s", err);
		return -1;
	}
	return nmse(engine_logits(c8), engine_logits(c),
	            (size_t)engine_n_vocab(c));
}

/* Evaluate the N tokens TOKS on the int8 CPU engine C8 (fresh), every
 * row, pinned as C's eval of them was; its rows' NMSE against C's, or -1.
 * C8's state is then C's to be (the caller copies it). */
static double eval_x8_rows(struct engine *c8, struct engine *c,
                           const int32_t *toks, int32_t n)
{
	char err[512] = "";

	if (eval_pinned(c8, toks, n, ENGINE_EVAL_ALL, true, false, err,
	                sizeof(err)) != 0) {
		tap_diag("eval failed: %s", err);
		return -1;
	}
	return nmse(engine_logits(c8), engine_logits(c),
	            (size_t)n * (size_t)engine_n_vocab(c));
}

/* Eval on both; compare the logits rows. Returns the NMSE or -1. */
static double eval_both(struct engine *g, struct engine *c, const int32_t *toks,
                        int32_t n, unsigned flags)
{
	char err[512] = "";
	size_t rows = (flags & ENGINE_EVAL_ALL) ? (size_t)n : 1;

	if (eval_pinned(g, toks, n, flags, false, true, err, sizeof(err)) !=
	        0 ||
	    eval_pinned(c, toks, n, flags, true, false, err, sizeof(err)) !=
	        0) {
		tap_diag("eval failed: %s", err);
		return -1;
	}
	return nmse(engine_logits(g), engine_logits(c),
	            rows * (size_t)engine_n_vocab(c));
}

/* Save E's state into a new buffer (*len bytes). */
static void *save_state(struct engine *e, size_t *len)
{
	char err[256];
	size_t n = engine_state_size(e);
	void *buf = malloc(n);

	if (buf && engine_state_save(e, buf, n, err, sizeof(err)) != n) {
		free(buf);
		return NULL;
	}
	*len = n;
	return buf;
}

/* Load the state of FROM into TO. 0 or -1 (message in ERR). */
static int copy_state(struct engine *from, struct engine *to, char *err,
                      size_t errlen)
{
	size_t n = 0;
	void *buf = save_state(from, &n);
	int rc = buf == NULL || engine_state_load(to, buf, n, err, errlen);

	free(buf);
	return rc ? -1 : 0;
}

/*
 * Whether M has a mixture whose expert products take int8 activations on
 * the GPU (cuda_x8_types): a prefill chunk's do too while its slots are
 * few (cuda_op_moe_grouped: <= MODEL_MAX_EXPERTS_USED, every model here),
 * so its rows carry the int8 rounding the decode steps do, and are held
 * to the same bound: TOL plus twice the int8 CPU engine's deviation on
 * the same rows, both CPU engines following the GPU's choice of experts
 * row by row (eval_pinned: a near tie that the roundings break
 * differently is not counted as their difference).
 */
static bool moe_x8(const struct model *m)
{
	const uint64_t x8 = cuda_x8_types();

	for (int il = 0; il < m->cfg.n_layer; il++) {
		const struct model_ffn *f = &m->w.layers[il].ffn;
		const struct model_tensor *gate =
		    f->gate.data != NULL ? &f->gate : &f->gate_up;

		if (f->kind == MODEL_FFN_EXPERTS &&
		    ((x8 >> gate->type & 1) || (x8 >> f->down.type & 1)))
			return true;
	}
	return false;
}

/*
 * The parity checks on one loaded model; TOKS has N_PREFILL + N_DECODE
 * + 2 ids. The prefill against the exact CPU engine (TOL); the decode
 * steps too, within x8_bound of the int8 CPU engine's deviation on the
 * same steps (from the exact engine's state).
 */
static void check_model(const struct model *m, const char *what,
                        const int32_t *toks, int32_t gpu_batch)
{
	struct engine *g = open_engine(m, "cuda", gpu_batch, what);
	struct engine *c = open_engine(m, "cpu", 0, what);
	struct engine *c8 = open_cpu_x8(m, 128, what);
	struct engine *g2 = NULL, *c2 = NULL, *c3 = NULL;
	int32_t nv = m->cfg.n_vocab;
	float *keep = malloc(sizeof(float) * (size_t)nv);
	double e, e8, e_pre, e8_pre, bound, worst = 0, worst8 = 0;
	void *sg = NULL, *sc = NULL;
	size_t lg = 0, lc = 0;
	char err[512] = "";

	if (g == NULL || c == NULL || c8 == NULL || keep == NULL)
		goto out;
	e_pre = eval_both(g, c, toks, N_PREFILL, ENGINE_EVAL_ALL);
	/* the int8 CPU engine's deviation on the prefill (pinned to the
	   GPU's rows as the exact one is): moe_x8's bound */
	e8_pre = e_pre < 0 ? -1 : eval_x8_rows(c8, c, toks, N_PREFILL);
	/* the CPU's logits of the prefill's last position: what the GPU's
	   re-evaluation after a cut must reproduce (its own prefill's are
	   no reference: a batch of half the size may take other products,
	   a mixture's int8 mat-vec instead of the grouped fp16 GEMM) */
	memcpy(keep, engine_logits(c) + (size_t)(N_PREFILL - 1) * nv,
	       sizeof(float) * (size_t)nv);
	if (copy_state(c, c8, err, sizeof(err)) != 0)
		worst = -1;
	for (int i = 0; i < N_DECODE && worst >= 0; i++) {
		e = eval_both(g, c, toks + N_PREFILL + i, 1, 0);
		e8 = e < 0 ? -1 : eval_x8(c8, c, toks[N_PREFILL + i]);
		worst = e < 0 || e8 < 0 ? -1 : e > worst ? e : worst;
		worst8 = e8 > worst8 ? e8 : worst8;
	}
	tap_ok(worst >= 0 && worst <= x8_bound(worst8),
	       "%s: %d decode steps: worst nmse %.3g (<= %.3g: int8 cpu "
	       "%.3g) %s",
	       what, N_DECODE, worst, x8_bound(worst8), worst8, err);
	bound = moe_x8(m) ? x8_bound(e8_pre) : TOL;
	tap_ok(e_pre >= 0 && e8_pre >= 0 && e_pre <= bound,
	       "%s: prefill %d tokens (all rows): nmse %.3g (<= %.3g)", what,
	       N_PREFILL, e_pre, bound);

	/* state saved on each backend restores on the other */
	sg = save_state(g, &lg);
	sc = save_state(c, &lc);
	tap_ok(sg && sc && lg == lc, "%s: state sizes gpu %zu cpu %zu", what,
	       lg, lc);
	g2 = open_engine(m, "cuda", gpu_batch, what);
	c2 = open_engine(m, "cpu", 0, what);
	c3 = open_cpu_x8(m, 128, what);
	if (sg && sc && lg == lc && g2 && c2 && c3) {
		int rc = engine_state_load(c2, sg, lg, err, sizeof(err)) ||
		         engine_state_load(c3, sg, lg, err, sizeof(err)) ||
		         engine_state_load(g2, sc, lc, err, sizeof(err));
		int32_t t = toks[N_PREFILL + N_DECODE];

		e = rc ? -1 : eval_both(g2, c2, &t, 1, 0);
		e8 = e < 0 ? -1 : eval_x8(c3, c2, t);
		tap_ok(!rc && e >= 0 && e8 >= 0 && e <= x8_bound(e8),
		       "%s: cpu state -> cuda, cuda state -> cpu, next token: "
		       "nmse %.3g (<= %.3g) %s",
		       what, e, x8_bound(e8), rc ? err : "");
	}

	/* a recurrent state cuts only where a snapshot is (engine.h): none
	   at half the prefill yet, so one is taken there, the rest evaluated
	   over it, and the cut below goes back to it */
	if (engine_recurrent(g))
		tap_ok(engine_truncate(g, N_PREFILL / 2) == -1 &&
		           engine_n_past(g) == N_PREFILL + N_DECODE &&
		           engine_truncate(g, 0) == 0 &&
		           engine_eval(g, toks, N_PREFILL / 2,
		                       ENGINE_EVAL_NO_LOGITS, err,
		                       sizeof(err)) == 0 &&
		           engine_snapshot(g, err, sizeof(err)) == 0 &&
		           engine_eval(g, toks + N_PREFILL / 2, N_PREFILL / 2,
		                       0, err, sizeof(err)) == 0,
		       "%s: recurrent: no cut at %d without a snapshot; one "
		       "taken there %s",
		       what, N_PREFILL / 2, err);
	/* truncate to half and evaluate the rest again as one batch */
	if (engine_truncate(g, N_PREFILL / 2) == 0 &&
	    engine_eval(g, toks + N_PREFILL / 2, N_PREFILL / 2, 0, err,
	                sizeof(err)) == 0) {
		const double bound = x8_bound(worst8);

		e = nmse(engine_logits(g), keep, (size_t)nv);
		tap_ok(e <= bound,
		       "%s: truncate + re-eval reproduces the CPU's logits "
		       "(nmse %.3g <= %.3g)",
		       what, e, bound);
	} else {
		tap_ok(0, "%s: truncate + re-eval: %s", what, err);
	}
out:
	free(sg);
	free(sc);
	free(keep);
	engine_close(g);
	engine_close(c);
	engine_close(c8);
	engine_close(g2);
	engine_close(c2);
	engine_close(c3);
}

/* Every layer's K/V of E's positions [0, n_past) (kv_save's layout: the
   same on both backends), a new array, or NULL. */
static float *kv_dump(struct engine *e)
{
	float *p = (float *)malloc(engine_kv_state_bytes(e, engine_n_past(e)) +
	                           sizeof(float));
	char err[256];

	if (p != NULL &&
	    e->ops->kv_save(e, engine_n_past(e), p, err, sizeof(err)) != 0) {
		free(p);
		return NULL;
	}
	return p;
}

/* Sums of (g - c)^2 and c^2 over rows [r0, r1) of a layer's keys (KV 0)
   or values (KV 1) in dumps G and C of N positions: into SUM[2]. */
static void kv_sums(const struct engine *e, const float *g, const float *c,
                    int32_t n, int il, int kv, int32_t r0, int32_t r1,
                    double *sum)
{
	struct model_cache_desc d = model_layer_cache(e->model, il);
	size_t off = 0;

	for (int l = 0; l < il; l++)
		off += engine_kv_layer_bytes(e, l, n) / sizeof(float);
	off += kv ? (size_t)n * d.k_dim : 0;
	const size_t dim = kv ? (size_t)d.v_dim : (size_t)d.k_dim;

	for (size_t i = (size_t)r0 * dim; i < (size_t)r1 * dim; i++) {
		const double x = (double)g[off + i] - c[off + i];

		sum[0] += x * x;
		sum[1] += (double)c[off + i] * c[off + i];
	}
}

/* The worst over layers of the keys' (KV 0) or values' NMSE GPU vs CPU,
   before the shift (dumps G0, C0 of N0 positions, the rows kept: [0, p0)
   and [p0 + d, n0)) and after it (G1, C1, all n0 - d): *BEFORE, *AFTER. */
static void kv_nmse(const struct engine *e, const float *g0, const float *c0,
                    const float *g1, const float *c1, int32_t n0, int32_t p0,
                    int32_t d, int kv, double *before, double *after)
{
	*before = *after = 0;
	for (int il = 0; il < e->model->cfg.n_layer; il++) {
		double b[2] = {0, 0}, a[2] = {0, 0};

		if (model_layer_cache(e->model, il).kind == MODEL_CACHE_SHARED)
			continue;
		kv_sums(e, g0, c0, n0, il, kv, 0, p0, b);
		kv_sums(e, g0, c0, n0, il, kv, p0 + d, n0, b);
		kv_sums(e, g1, c1, n0 - d, il, kv, 0, n0 - d, a);
		*before = fmax(*before, b[1] > 0 ? b[0] / b[1] : b[0]);
		*after = fmax(*after, a[1] > 0 ? a[0] / a[1] : a[0]);
	}
}

/*
 * The context shift (engine.h invariant 6) on the GPU against the CPU's,
 * on the same model and ids: N_PREFILL ids, then positions [3, 9)
 * shifted out on both. A shift is a rotation of the keys and a move of
 * the values, so GPU and CPU caches differ after it as they differed
 * before it on the rows kept: values the same NMSE (the same fp16
 * numbers moved), keys at most twice it plus 1e-6 (the fp16 rounding of
 * the rotated key: ~1e-7; a wrong angle or pairing is O(1)). Then one id
 * more on both: logits within the decode steps' bound. A model with
 * recurrent layers: both refuse, nothing changed.
 */
static void check_shift(const struct model *m, const char *what,
                        const int32_t *toks, int32_t gpu_batch)
{
	const int32_t p0 = 3, d = 6, n0 = N_PREFILL;
	struct engine *g = open_engine(m, "cuda", gpu_batch, what);
	struct engine *c = open_engine(m, "cpu", 0, what);
	struct engine *c8 = open_cpu_x8(m, 128, what);
	float *g0 = NULL, *c0 = NULL, *g1 = NULL, *c1 = NULL;
	double kb, ka, vb, va, e, e8;
	char err[512] = "";

	if (g == NULL || c == NULL || c8 == NULL ||
	    eval_both(g, c, toks, n0, 0) < 0)
		goto out;
	if (!engine_can_shift(c)) {
		tap_ok(!engine_can_shift(g) &&
		           engine_kv_shift(g, p0, d, err, sizeof(err)) != 0 &&
		           engine_n_past(g) == n0,
		       "%s: no shift on the GPU either: \"%s\"", what, err);
		goto out;
	}
	g0 = kv_dump(g);
	c0 = kv_dump(c);
	if (!tap_ok(g0 && c0 && engine_can_shift(g) &&
	                engine_kv_shift(g, p0, d, err, sizeof(err)) == 0 &&
	                engine_kv_shift(c, p0, d, err, sizeof(err)) == 0 &&
	                engine_n_past(g) == n0 - d &&
	                engine_n_past(c) == n0 - d,
	            "%s: shift [%d, %d) on both %s", what, p0, p0 + d, err))
		goto out;
	g1 = kv_dump(g);
	c1 = kv_dump(c);
	if (g1 == NULL || c1 == NULL)
		goto out;
	kv_nmse(g, g0, c0, g1, c1, n0, p0, d, 0, &kb, &ka);
	kv_nmse(g, g0, c0, g1, c1, n0, p0, d, 1, &vb, &va);
	tap_ok(ka <= 2 * kb + 1e-6 && va <= vb * (1 + 1e-9) + 1e-30,
	       "%s: shifted caches GPU vs CPU: keys nmse %.3g (before %.3g), "
	       "values %.3g (before %.3g)",
	       what, ka, kb, va, vb);
	if (copy_state(c, c8, err, sizeof(err)) != 0)
		goto out;
	e = eval_both(g, c, toks + n0, 1, 0);
	e8 = e < 0 ? -1 : eval_x8(c8, c, toks[n0]);
	tap_ok(e >= 0 && e8 >= 0 && e <= x8_bound(e8),
	       "%s: after the shift, the next id's logits GPU vs CPU: nmse "
	       "%.3g (<= %.3g)",
	       what, e, x8_bound(e8));
out:
	free(g0);
	free(c0);
	free(g1);
	free(c1);
	engine_close(g);
	engine_close(c);
	engine_close(c8);
}

/*
 * The live verifier with the GPU as its primary (verify.h): the bounds it
 * takes follow the GPU's arithmetic - INT8 (the mat-vec of quantized
 * weights rounds its input to int8 blocks, as the CPU's default dots do)
 * or not (F16: fp32 activations, the tight bounds) - and a correct GPU
 * has no step over them: the prompt, then N_VERIFY greedy steps. (Held to
 * the tight bounds, the real SmolLM2 on the GPU had steps flagged.)
 */
#define N_VERIFY 8
static void check_verify(const struct model *m, const char *what,
                         const int32_t *prompt, int32_t n_prompt, bool int8)
{
	struct engine *g = open_engine_ctx(m, "cuda", 0, 256, what);
	struct verify *v = NULL;
	struct verify_summary sum;
	struct engine_select_req q = {.k = 1, .repeat_penalty = 1.0f};
	int32_t ids[128];
	int32_t n = n_prompt < 64 ? n_prompt : 64;
	char err[512] = "";
	int rc = 0;

	verify_summary_init(&sum);
	if (g == NULL)
		return;
	if (!tap_ok(verify_open(g, m, NULL, 2, &v, err, sizeof(err)) == 0,
	            "%s: verifier on the GPU %s", what, err))
		goto out;
	tap_ok(engine_int8_activations(g) == int8 &&
	           verify_tolerance(v, 0) ==
	               (int8 ? VERIFY_TOL_INT8_LAYER : VERIFY_TOL_LAYER),
	       "%s: the GPU %s int8 activations: layer bound %g", what,
	       int8 ? "takes" : "takes no", verify_tolerance(v, 0));
	memcpy(ids, prompt, (size_t)n * sizeof(*ids));
	for (int i = 0; i <= N_VERIFY && rc == 0; i++) {
		const struct engine_selection *sel;
		struct verify_report r;
		const int32_t n_new = i == 0 ? n : 1;

		rc = engine_eval(g, ids + n - n_new, n_new, 0, err,
		                 sizeof(err)) ||
		     verify_step(v, ids, n, n_new, &r, err, sizeof(err));
		if (rc != 0)
			break;
		verify_summary_add(&sum, &r);
		if (r.first_bad >= 0 || r.logits_bad)
			tap_diag(
			    "%s: pos %d: layer %d at %.3g, logit NMSE %.3g",
			    what, r.pos, r.first_bad, r.first_bad_diff,
			    r.logit_nmse);
		sel = engine_select(g, &q, err, sizeof(err));
		if (sel == NULL)
			rc = -1;
		else
			ids[n++] = sel->id[0];
	}
	tap_ok(rc == 0 && sum.n_checked == N_VERIFY + 1 && sum.n_bad == 0,
	       "%s: verified on the GPU: %d steps, %d over the bounds "
	       "(worst layer difference %.3g) %s",
	       what, sum.n_checked, sum.n_bad, sum.worst_diff, err);
out:
	verify_close(v);
	engine_close(g);
}

/*
 * Every mixture layer's gate and up stacks of M merged into one stack, as
 * Gemma 4's files may have them (ffn_gate_up_exps: each expert's n_ff gate
 * rows, then its n_ff up rows; model.h MODEL_FEAT_EXPERTS_MERGED), gate
 * and up then absent: the same model, its experts read through
 * model_expert_gate_up on the CPU and split at load on the GPU. The
 * stacks' memory in BUFS[n_layer] (freed by the caller). 0 or -1.
 */
static int merge_experts(struct model *m, void **bufs)
{
	for (int il = 0; il < m->cfg.n_layer; il++) {
		struct model_ffn *f = &m->w.layers[il].ffn;
		const size_t half = f->gate.row_size * (size_t)f->n_ff;
		unsigned char *b;

		bufs[il] = NULL;
		if (f->kind != MODEL_FFN_EXPERTS || f->gate.data == NULL)
			continue;
		if (f->up.type != f->gate.type ||
		    f->up.row_size != f->gate.row_size)
			return -1;
		b = malloc(2 * half * (size_t)f->n_expert);
		if (b == NULL)
			return -1;
		bufs[il] = b;
		for (int32_t e = 0; e < f->n_expert; e++) {
			memcpy(b + (size_t)(2 * e) * half,
			       (const unsigned char *)f->gate.data +
			           (size_t)e * half,
			       half);
			memcpy(b + (size_t)(2 * e + 1) * half,
			       (const unsigned char *)f->up.data +
			           (size_t)e * half,
			       half);
		}
		f->gate_up = f->gate;
		f->gate_up.name = "ffn_gate_up_exps.weight";
		f->gate_up.ne1 = 2 * (int64_t)f->n_ff;
		f->gate_up.data = b;
		memset(&f->gate, 0, sizeof(f->gate));
		memset(&f->up, 0, sizeof(f->up));
	}
	m->cfg.features |= MODEL_FEAT_EXPERTS_MERGED;
	return 0;
}

/* Load PATH and run check_model; MERGE: with its experts' gate and up
 * merged first (merge_experts). */
static void check_file(const char *path, const char *what, const int32_t *toks,
                       int32_t gpu_batch, bool merge)
{
	char err[512] = "";
	struct gguf_file *f = gguf_open(path, err, sizeof(err));
	struct model *m = NULL;

	if (!tap_ok(f != NULL, "%s: open %s %s", what, path, f ? "" : err))
		return;
	int rc = model_load(f, &m, err, sizeof(err));
	void **bufs = NULL;

	if (rc == 0 && merge) {
		bufs = calloc((size_t)m->cfg.n_layer, sizeof(*bufs));
		rc = bufs == NULL || merge_experts(m, bufs) != 0;
		snprintf(err, sizeof(err), "merging the experts");
	}
	if (tap_ok(rc == 0, "%s: load %s", what, rc ? err : "")) {
		pin_layers = m->cfg.max_expert > 0 ? m->cfg.n_layer : 0;
		check_model(m, what, toks, gpu_batch);
		check_shift(m, what, toks, gpu_batch);
		pin_layers = 0;
		trace_free(pin_g);
		pin_g = NULL;
		/* fp32 activations on the GPU: the verifier's tight bounds */
		int la = 0; /* an attention layer (a recurrent one has no wq) */

		while (la < m->cfg.n_layer - 1 &&
		       m->w.layers[la].attn.kind == MODEL_ATTN_RECURRENT)
			la++;
		if (m->w.layers[la].attn.wq.type == QTYPE_F16 &&
		    m->w.output.type == QTYPE_F16)
			check_verify(m, what, toks, N_PREFILL, false);
	}
	for (int il = 0; bufs != NULL && il < m->cfg.n_layer; il++)
		free(bufs[il]);
	free(bufs);
	model_free(m);
	gguf_close(f);
}

/* Random-weight models: ARGS for parley-mkmodel, n_vocab 300. */
static const struct {
	const char *name;
	const char *args;
	int32_t gpu_batch; /* 0 = default; 16 splits the 20-token prefill;
	                      -1: default, and greedy decoding checked */
} models[] = {
    {"llama_f32_gqa_ropefreqs",
     "--arch llama --type F32 --n-head 8 --n-head-kv 2 --rope-freqs", 0},
    {"llama_f16_tied", "--arch llama --type F16 --tied", 16},
    {"qwen2_bf16_gqa", "--arch qwen2 --type BF16 --n-head 8 --n-head-kv 2", 0},
    {"llama_q8_0_q6k_out",
     "--arch llama --type Q8_0 --embd-type Q4_0 --out-type Q6_K", 0},
    {"qwen2_q4_0_q4_1",
     "--arch qwen2 --type Q4_0 --embd-type Q4_1 --out-type Q5_0", 16},
    {"llama_q5_1", "--arch llama --type Q5_1 --embd-type Q8_0 --tied", 0},
    {"qwen2_q4_k_q5_k",
     "--arch qwen2 --type Q4_K --embd-type Q5_K --out-type Q2_K", 0},
    {"llama_q3_k_q2_k",
     "--arch llama --type Q3_K --embd-type Q2_K --out-type Q3_K", 16},
    {"qwen2_q6_k_q5_k_tied",
     "--arch qwen2 --type Q6_K --embd-type Q5_K --tied --n-head 2 "
     "--n-head-kv 1",
     0},
    {"llama_q5_k", "--arch llama --type Q5_K --embd-type F16", 0},
    /* features of the model description the writer sets by flag */
    {"llama_f16_rope_linear",
     "--arch llama --type F16 --rope-scaling linear --rope-scale-factor 4", 16},
    /* qwen3: q/k norm (the unfused QKV chain), n_head * head_dim !=
       n_embd; gemma3: embedding scale, q/k norm, post-norms, GELU-tanh,
       sliding windows of 8 with their own RoPE base (the 20-token
       prompt and its decode cross them on every attention path), linear
       scaling on the global layers, head_dim 256 */
    /* (the Q4_K one in one chunk: split at 16, its last 4 prompt tokens
       take the int8 mat-vec, and the truncate check's fixed bound, which
       compares that with the batch path, sees the int8 rounding: 7.6e-4,
       3.8e-7 with fp32 activations, h100) */
    {"qwen3_f16",
     "--arch qwen3 --type F16 --n-head 8 --n-head-kv 2 "
     "--head-dim 64",
     16},
    {"qwen3_q4_k_q6_k",
     "--arch qwen3 --type Q4_K --embd-type Q6_K "
     "--n-head 4 --n-head-kv 2 --head-dim 128",
     0},
    {"gemma3_f16_swa",
     "--arch gemma3 --type F16 --n-head 4 --n-head-kv 1 "
     "--head-dim 64 --sliding-window 8 "
     "--sliding-window-pattern 3",
     16},
    {"gemma3_q8_0_hd256",
     "--arch gemma3 --type Q8_0 --n-head 2 "
     "--n-head-kv 1 --head-dim 256 --sliding-window 6 "
     "--sliding-window-pattern 2 --rope-scaling linear "
     "--rope-scale-factor 8 --rope-base-swa 20000",
     0},
    /* SmolLM2-135M's shape and type, random weights (-1: greedy too) */
    {"smollm2_shape_q4_1",
     "--arch llama --type Q4_1 --tied --n-vocab 49152 --n-embd 576 "
     "--n-ff 1536 --n-layer 30 --n-head 9 --n-head-kv 3 --rope-base 100000",
     -1},
    /* (new models go last: a model's seed is its place in the list)
       qwen3moe: the chosen experts' products (the int8 unit mat-vec of
       Q8_0 in its GPU layout; Q4_K gate/up with Q6_K down in some
       layers; F16's fp32 unit; Q5_K's int8 one), the F32
       router, prefill split at 16 and in one chunk */
    {"qwen3moe_q8_0",
     "--arch qwen3moe --type Q8_0 --n-head 4 --n-head-kv 2 --head-dim 64 "
     "--n-expert 8 --n-expert-used 2 --n-ff-exp 128",
     16},
    {"qwen3moe_q4_k_q6_k",
     "--arch qwen3moe --type Q4_K --more-bits-type Q6_K --out-type Q6_K "
     "--n-head 4 --n-head-kv 1 --head-dim 64 --n-expert 8 "
     "--n-expert-used 2 --n-ff-exp 256",
     0},
    {"qwen3moe_f16",
     "--arch qwen3moe --type F16 --n-head 4 --n-head-kv 2 --head-dim 64 "
     "--n-expert 8 --n-expert-used 3 --n-ff-exp 64",
     16},
    /* (its router has near ties in the prefill that int8 activations
       break otherwise than the exact reference: rows 1 and 5 at NMSE
       0.078 and 0.046 on the int8 CPU engine unpinned, 0.0212 over the
       rows on the GPU, h200; the prefill's rows are pinned since) */
    {"qwen3moe_q5_k",
     "--arch qwen3moe --type Q5_K --embd-type Q8_0 --n-head 4 "
     "--n-head-kv 2 --head-dim 64 --n-expert 8 --n-expert-used 2 "
     "--n-ff-exp 256",
     0},
    /* gpt-oss's features: attention sinks on each attention path
       (prefill split at 16, one chunk), the output bias, the biased
       router and experts, the clamped SwiGLU, sliding layers */
    {"gpt_oss_q8_0",
     "--arch gpt-oss --type Q8_0 --n-head 4 --n-head-kv 2 --head-dim 64 "
     "--n-expert 8 --n-expert-used 2 --n-ff-exp 128 --sliding-window 8",
     16},
    /* (a prefill's fp16 GEMM inputs move the router's logits by ~1e-3:
       with 3 of 8 experts token 20's choice in one layer was a near tie
       that flipped, NMSE 7.4e-4 over the prefill's rows; 2 of 8 here) */
    {"gpt_oss_f16",
     "--arch gpt-oss --type F16 --n-head 8 --n-head-kv 2 --head-dim 64 "
     "--n-expert 8 --n-expert-used 2 --n-ff-exp 64 --sliding-window 6",
     0},
    /* gpt-oss as its files are: MXFP4 experts (the int8 unit
       mat-vec), YaRN (factor 32 over an original context of 16) */
    {"gpt_oss_mxfp4_yarn",
     "--arch gpt-oss --type Q8_0 --expert-type MXFP4 --n-head 4 "
     "--n-head-kv 2 --head-dim 64 --n-expert 8 --n-expert-used 2 "
     "--n-ff-exp 256 --sliding-window 8 --rope-scaling yarn "
     "--rope-scale-factor 32 --yarn-orig-ctx 16 --rope-base 150000",
     16},
    /* Qwen3.5: Gated DeltaNet layers (0, 2) and gated attention (1, 3;
       partial rotation, 32 of 64 dims), 8 value heads on 2 key heads of
       64; prefill split at 16 (the state across chunks, the chunked and
       the token-by-token delta rule), Q8_0's int8 mat-vec */
    {"qwen35_q8_0",
     "--arch qwen35 --type Q8_0 --n-layer 4 --n-head 4 --n-head-kv 2 "
     "--head-dim 64 --n-rot 32 --rope-sections 6,5,5,0 "
     "--rope-base 10000000 --ssm-conv-kernel 4 --ssm-state-size 64 "
     "--ssm-group-count 2 --ssm-time-step-rank 8 --ssm-inner-size 512 "
     "--full-attention-interval 2",
     16},
    /* the real models' state size (128), every fourth layer attention,
       F16 (fp32 activations: the verifier's tight bounds), one chunk */
    {"qwen35_f16_s128",
     "--arch qwen35 --type F16 --n-layer 4 --n-head 4 --n-head-kv 1 "
     "--head-dim 128 --n-rot 32 --rope-sections 6,5,5,0 "
     "--ssm-conv-kernel 4 --ssm-state-size 128 --ssm-group-count 2 "
     "--ssm-time-step-rank 4 --ssm-inner-size 512 "
     "--full-attention-interval 4 --out-type F16 --embd-type F16",
     0},
    /* the mixture: 8 experts choose 2, the gated shared expert */
    {"qwen35moe_q8_0",
     "--arch qwen35moe --type Q8_0 --n-layer 4 --n-head 4 --n-head-kv 2 "
     "--head-dim 64 --n-rot 32 --rope-sections 6,5,5,0 "
     "--ssm-conv-kernel 4 --ssm-state-size 64 --ssm-group-count 2 "
     "--ssm-time-step-rank 4 --ssm-inner-size 256 "
     "--full-attention-interval 2 --n-expert 8 --n-expert-used 2 "
     "--n-ff-exp 128 --n-ff-shexp 192",
     16},
    /* the i-quants and ternary types (issue 33), four a model as
       gen_arch.py's qwen3_iq_*: layer matrices, attn_v/ffn_down of the
       more-bits layers, the embedding (get_rows), the LM head */
    {"qwen3_iq_a",
     "--arch qwen3 --type IQ4_XS --more-bits-type IQ4_NL --embd-type "
     "IQ2_XXS --out-type IQ3_S --n-head 4 --n-head-kv 2 --head-dim 64",
     0},
    {"qwen3_iq_b",
     "--arch qwen3 --type IQ2_XS --more-bits-type IQ3_XXS --embd-type "
     "IQ1_S --out-type IQ2_S --n-head 4 --n-head-kv 2 --head-dim 64",
     16},
    {"qwen3_iq_c",
     "--arch qwen3 --type IQ1_M --more-bits-type TQ1_0 --embd-type TQ2_0 "
     "--out-type Q8_0 --n-head 4 --n-head-kv 2 --head-dim 64",
     0},
    /* i-quant experts: their int8 units in the expert products */
    {"qwen3moe_iq",
     "--arch qwen3moe --type IQ4_XS --more-bits-type IQ3_S --n-head 4 "
     "--n-head-kv 2 --head-dim 64 --n-expert 8 --n-expert-used 2 "
     "--n-ff-exp 256",
     0},
    /* Gemma 4 (issue 32), as gen_arch.py's three flavours: dense with
       global layers of the real models' head of 512 (1 KV head, a
       quarter of the pairs rotating, keys as values) and sliding ones of
       256 (2 KV heads), the weightless V norm, the last 3 of 6 layers
       reading layers 1 and 2's caches, the final softcap; Q8_0 (int8
       mat-vec, its GPU layout), prefill split at 16 */
    {"gemma4_q8_0_kvshared",
     "--arch gemma4 --type Q8_0 --n-head 2 --n-head-kv 1 --n-head-kv-swa 2 "
     "--head-dim 512 --head-dim-swa 256 --n-layer 6 --sliding-window 8 "
     "--sliding-window-pattern 3 --attn-k-eq-v --kv-shared-layers 3 "
     "--final-logit-softcap 30 --rope-base 1000000",
     16},
    /* the mixture beside the dense MLP (26B-A4B): its norms, the
       router's scaled input, 8 experts choose 2 with output scales;
       F16 (fp32 activations), one chunk */
    {"gemma4_moe_f16",
     "--arch gemma4 --type F16 --n-head 4 --n-head-kv 1 --n-head-kv-swa 2 "
     "--head-dim 128 --head-dim-swa 64 --n-layer 3 --sliding-window 8 "
     "--sliding-window-pattern 3 --attn-k-eq-v --n-expert 8 "
     "--n-expert-used 2 --n-ff-exp 64 --final-logit-softcap 30 "
     "--rope-base 1000000",
     0},
    /* the E models: per-layer embeddings of 64 (5 layers), the last 3
       sharing KV with a double-wide FFN, layer output scales; Q8_0 */
    {"gemma4_e_q8_0",
     "--arch gemma4 --type Q8_0 --n-head 4 --n-head-kv 1 --head-dim 64 "
     "--head-dim-swa 32 --n-layer 5 --sliding-window 8 "
     "--sliding-window-pattern 2 --kv-shared-layers 3 --double-wide-mlp "
     "--n-embd-per-layer 64 --final-logit-softcap 30 --rope-base 1000000",
     16},
    /* the mixture with its gate and up experts merged in one stack
       (a name ending in _merged: merge_experts at load; split at load on
       the GPU); prefill split at 16 (the grouped products, then the
       mat-vec of 4 tokens). F16 (fp32 activations): as Q8_0 (its GPU
       layout) this model's prefill was 2.3e-3 from the CPU's (h200)
       while its decode steps, the state and the re-eval passed, most
       likely a near tie of a router's choice that the 4 tokens' int8
       activations broke the other way (a prefill is not pinned) */
    {"gemma4_moe_f16_merged",
     "--arch gemma4 --type F16 --n-head 4 --n-head-kv 1 --n-head-kv-swa 2 "
     "--head-dim 128 --head-dim-swa 64 --n-layer 3 --sliding-window 8 "
     "--sliding-window-pattern 3 --attn-k-eq-v --n-expert 8 "
     "--n-expert-used 2 --n-ff-exp 64 --final-logit-softcap 30 "
     "--rope-base 1000000",
     16},
};

/* Per-layer trace statistics of the last token agree (relative 1e-3 on
 * the rms, which sees every element of the residual). */
static void check_trace(const struct model *m, const char *what,
                        const int32_t *toks)
{
	struct engine *g = open_engine(m, "cuda", 0, what);
	struct engine *c = open_engine(m, "cpu", 0, what);
	struct trace *tg = trace_new(m->cfg.n_layer, 5, NULL);
	struct trace *tc = trace_new(m->cfg.n_layer, 5, NULL);
	double worst = -1;

	if (g && c && tg && tc) {
		engine_set_trace(g, tg);
		engine_set_trace(c, tc);
		if (eval_both(g, c, toks, N_PREFILL, 0) >= 0) {
			worst = 0;
			for (int il = 0; il < m->cfg.n_layer; il++) {
				double r = fabs(tg->layers[il].rms -
				                tc->layers[il].rms) /
				           tc->layers[il].rms;

				worst = r > worst ? r : worst;
			}
		}
	}
	tap_ok(worst >= 0 && worst <= 1e-3,
	       "%s: trace per-layer rms gpu vs cpu: worst relative %.3g", what,
	       worst);
	engine_close(g);
	engine_close(c);
	trace_free(tg);
	trace_free(tc);
}

/* A context whose fp16 KV cache cannot fit (16 layers x 4096 dims x 2^20
 * positions = 256 GiB) fails at open with what it needs and what is free. */
static void check_oom(const char *path)
{
	char err[512] = "";
	struct gguf_file *f = gguf_open(path, err, sizeof(err));
	struct model *m = NULL;
	struct engine *e = NULL;
	struct engine_params p = {0};
	int rc = -1;

	if (f != NULL && model_load(f, &m, err, sizeof(err)) == 0) {
		p.backend = "cuda";
		p.n_ctx = 1048576;
		rc = engine_open(m, &p, &e, err, sizeof(err));
	}
	tap_ok(rc != 0 && strstr(err, "model needs") != NULL &&
	           strstr(err, "GiB free") != NULL,
	       "KV cache too large for the GPU: \"%s\"", err);
	engine_close(e);
	e = NULL;
	/* the context it says fits opens */
	{
		const char *at = strstr(err, "--ctx ");
		long fit = at != NULL ? strtol(at + 6, NULL, 10) : 0;

		rc = -1;
		if (m != NULL && fit >= 256 && fit < 1048576) {
			p.n_ctx = (int32_t)fit;
			rc = engine_open(m, &p, &e, err, sizeof(err));
		}
		tap_ok(rc == 0, "the --ctx %ld it names opens %s", fit,
		       rc == 0 ? "" : err);
		engine_close(e);
		e = NULL;
	}
	/* a feature the GPU's recipe does not run is refused by name */
	rc = -1;
	if (m != NULL) {
		m->cfg.features |= MODEL_FEAT_ATTN_SOFTCAP;
		p.n_ctx = 64;
		rc = engine_open(m, &p, &e, err, sizeof(err));
	}
	tap_ok(rc != 0 && strstr(err, "attention logit softcap, which "
	                              "the cuda backend") != NULL,
	       "an unsupported feature refused: \"%s\"", err);
	engine_close(e);
	model_free(m);
	gguf_close(f);
}

/* Greedy decoding from PROMPT (N_PREFILL ids) with the CPU's choices: the
 * GPU's argmax must be the CPU's wherever the CPU's top-2 margin > 0.1. */
static void check_greedy(const struct model *m, const char *what,
                         const int32_t *prompt)
{
	struct engine *g = open_engine(m, "cuda", 0, what);
	struct engine *c = open_engine(m, "cpu", 0, what);
	struct engine *c8 = open_cpu_x8(m, 128, what);
	int32_t tok, checked = 0, agree = 0, nv = m->cfg.n_vocab;
	double worst_noise = 0;
	char err[512] = "";

	if (g == NULL || c == NULL || c8 == NULL ||
	    eval_both(g, c, prompt, N_PREFILL, 0) < 0 ||
	    engine_eval(c8, prompt, N_PREFILL, 0, err, sizeof(err)) != 0)
		goto out;
	for (int step = 0; step < 24; step++) {
		const float *lc = engine_logits(c), *lg = engine_logits(g);
		const float *l8 = engine_logits(c8);
		int32_t best = eu_argmax(lc, nv);
		float second = -INFINITY;
		double se = 0;

		for (int32_t i = 0; i < nv; i++) {
			if (i != best && lc[i] > second)
				second = lc[i];
			se += ((double)l8[i] - lc[i]) * ((double)l8[i] - lc[i]);
		}
		/* clear: past 0.1 and past 3 times the rms deviation of the
		   int8 arithmetic the GPU shares (the CPU engine's own int8
		   path): a random model's logits of rms ~35 move by ~2 under
		   it, and the int8 CPU engine itself picks another token at 2
		   of the 23 steps whose margin is merely over 0.1 */
		const double noise = sqrt(se / nv);

		worst_noise = noise > worst_noise ? noise : worst_noise;
		if (lc[best] - second > 0.1f && lc[best] - second > 3 * noise) {
			checked++;
			agree += eu_argmax(lg, nv) == best;
		}
		tok = best;
		if (eval_both(g, c, &tok, 1, 0) < 0 ||
		    engine_eval(c8, &tok, 1, 0, err, sizeof(err)) != 0)
			goto out;
	}
	tap_ok(checked > 0 && agree == checked,
	       "%s: greedy 24 steps, GPU argmax = CPU argmax at %d of %d "
	       "steps with a clear margin (> 0.1 and > 3 x the int8 "
	       "arithmetic's rms deviation, at most %.3g) %s",
	       what, agree, checked, worst_noise, err);
out:
	engine_close(g);
	engine_close(c);
	engine_close(c8);
}

/* One decode step as the chat session runs it with the debug pane open:
 * eval token *T, then select (10 candidates); 0 or -1. */
static int pane_step(struct engine *e, const int32_t *t, char *err,
                     size_t errlen)
{
	struct engine_select_req q;

	memset(&q, 0, sizeof(q));
	q.k = 10;
	q.n_raw = 10;
	q.repeat_penalty = 1.0f;
	return engine_eval(e, t, 1, 0, err, errlen) ||
	               engine_select(e, &q, err, errlen) == NULL
	           ? -1
	           : 0;
}

/*
 * Decode steps replayed from CUDA graphs (one per 1,024 positions, the
 * position read from device memory) across the graphs' boundaries at 1,024
 * and 2,048: each step's logits equal, bit for bit, those of a CUDA engine
 * launching the same kernels one by one (PARLEY_CUDA_GRAPHS=0), and match
 * the CPU reference. A graph that kept the position it was captured at
 * would fail both. The steps after 2,040 are traced: the statistics the
 * traced graphs compute on the device equal those the host computes from
 * each layer's copied output (a capturing trace, plain launches). A third
 * CUDA engine replays the same graphs with ordinary launches
 * (PARLEY_CUDA_PDL=0): programmatic dependent launch changes when a
 * kernel is scheduled, never what it computes, so every step is bit for
 * bit the same; a kernel reading before its predecessor finished would
 * differ (cuda_launch.cuh). A fourth keeps the weights in the file's
 * layout (PARLEY_CUDA_REPACK=0; the model's Q6_K tensors, as in a Q4_K_M
 * file, are otherwise rearranged at load, cuda_repack.cu): again every
 * step the same bit for bit. A fifth carries the debug pane's kind of
 * trace (no logits: its statistics follow the step to the host and the
 * engine fills the trace after the select's wait, engine.c): after each
 * engine_select its layers equal the first engine's, bit for bit, and
 * its step count is one a token.
 */
static void check_graphs(const char *path)
{
	char err[512] = "";
	struct gguf_file *f = gguf_open(path, err, sizeof(err));
	struct model *m = NULL;
	struct engine *g = NULL, *p = NULL, *q = NULL, *u = NULL, *d = NULL,
	              *c = NULL, *c8 = NULL;
	int32_t *toks = NULL, nv, n_steps = 0, n_same = 0, n_same_pdl = 0,
	        n_same_rp = 0, n_pane = 0, n_pane_steps = 0;
	double worst = 0, worst8 = 0, worst_rms = -1;
	struct trace *tg = NULL, *tc = NULL, *td = NULL;
	const int32_t n_ctx = 2100, at[2] = {1016, 2040};

	if (f == NULL || model_load(f, &m, err, sizeof(err)) != 0) {
		tap_ok(0, "graphs: load %s: %s", path, err);
		goto out;
	}
	nv = m->cfg.n_vocab;
	toks = malloc(sizeof(int32_t) * (size_t)n_ctx);
	g = open_engine_ctx(m, "cuda", 0, n_ctx, "graphs");
	setenv("PARLEY_CUDA_GRAPHS", "0", 1);
	p = open_engine_ctx(m, "cuda", 0, n_ctx, "graphs (off)");
	unsetenv("PARLEY_CUDA_GRAPHS");
	setenv("PARLEY_CUDA_PDL", "0", 1);
	q = open_engine_ctx(m, "cuda", 0, n_ctx, "graphs (PDL off)");
	unsetenv("PARLEY_CUDA_PDL");
	setenv("PARLEY_CUDA_REPACK", "0", 1);
	u = open_engine_ctx(m, "cuda", 0, n_ctx, "graphs (file's layout)");
	unsetenv("PARLEY_CUDA_REPACK");
	d = open_engine_ctx(m, "cuda", 0, n_ctx, "graphs (the pane's trace)");
	c = open_engine_ctx(m, "cpu", 0, n_ctx, "graphs");
	c8 = open_cpu_x8(m, n_ctx, "graphs");
	if (toks == NULL || g == NULL || p == NULL || q == NULL || u == NULL ||
	    d == NULL || c == NULL || c8 == NULL)
		goto out;
	for (int32_t i = 0; i < n_ctx; i++)
		toks[i] = (int32_t)((i * 7919 + 13) % nv);
	tg = trace_new(m->cfg.n_layer, 5, NULL);
	tc = trace_new(m->cfg.n_layer, 5, NULL);
	td = trace_new(m->cfg.n_layer, 1, NULL);
	if (tg == NULL || tc == NULL || td == NULL ||
	    trace_capture(tc, m->cfg.n_embd) != 0)
		goto out;
	td->skip_logits = 1; /* as session_set_trace sets the pane's */
	for (int r = 0; r < 2; r++) {
		int32_t n0 = engine_n_past(g), n = at[r] - n0;

		if (r == 1) { /* the second run traced: G replays its
			         traced graphs (statistics on the device), P
			         launches one by one and captures whole
			         vectors (statistics on the host) */
			engine_set_trace(g, tg);
			engine_set_trace(p, tc);
			engine_set_trace(d, td);
			worst_rms = 0;
		}
		if (engine_eval(g, toks + n0, n, 0, err, sizeof(err)) ||
		    engine_eval(p, toks + n0, n, 0, err, sizeof(err)) ||
		    engine_eval(q, toks + n0, n, 0, err, sizeof(err)) ||
		    engine_eval(u, toks + n0, n, 0, err, sizeof(err)) ||
		    engine_eval(d, toks + n0, n, 0, err, sizeof(err)) ||
		    engine_eval(c, toks + n0, n, 0, err, sizeof(err)) ||
		    copy_state(c, c8, err, sizeof(err))) {
			tap_ok(0, "graphs: prefill to %d: %s", at[r], err);
			goto out;
		}
		for (int i = 0; i < 16; i++) {
			const int32_t *t = toks + at[r] + i;
			const int64_t td0 = td->step;
			double e, e8;

			if (engine_eval(p, t, 1, 0, err, sizeof(err)) ||
			    engine_eval(q, t, 1, 0, err, sizeof(err)) ||
			    engine_eval(u, t, 1, 0, err, sizeof(err)) ||
			    pane_step(d, t, err, sizeof(err)) ||
			    (e = eval_both(g, c, t, 1, 0)) < 0 ||
			    (e8 = eval_x8(c8, c, *t)) < 0) {
				tap_ok(0, "graphs: step at %d: %s", at[r] + i,
				       err);
				goto out;
			}
			worst = e > worst ? e : worst;
			worst8 = e8 > worst8 ? e8 : worst8;
			for (int il = 0; r == 1 && il < m->cfg.n_layer; il++) {
				const struct trace_stats *a = &tg->layers[il],
				                         *b = &tc->layers[il];
				double d = fabs(a->rms - b->rms) / b->rms;

				if (a->min != b->min || a->max != b->max ||
				    fabs(a->mean - b->mean) >
				        1e-6 * (fabs(b->mean) + b->rms)) {
					if (worst_rms < 1)
						tap_diag("step %d layer %d: "
						         "device %g %g %g %g, "
						         "host %g %g %g %g",
						         at[r] + i, il, a->min,
						         a->max, a->mean,
						         a->rms, b->min, b->max,
						         b->mean, b->rms);
					d = 1;
				}
				worst_rms = d > worst_rms ? d : worst_rms;
			}
			n_steps++;
			n_same += memcmp(engine_logits(g), engine_logits(p),
			                 sizeof(float) * (size_t)nv) == 0;
			n_same_pdl += memcmp(engine_logits(g), engine_logits(q),
			                     sizeof(float) * (size_t)nv) == 0;
			n_same_rp += memcmp(engine_logits(g), engine_logits(u),
			                    sizeof(float) * (size_t)nv) == 0;
			if (r == 1) {
				const int64_t s1 = td->step;

				n_pane +=
				    memcmp(td->layers, tg->layers,
				           sizeof(*td->layers) *
				               (size_t)m->cfg.n_layer) == 0;
				/* the step ended at the select, once: a later
				   engine call does not end it again */
				engine_logits(d);
				n_pane_steps += s1 == td0 + 1 && td->step == s1;
			}
		}
	}
	tap_ok(n_same == n_steps,
	       "graphs: %d of %d decode steps across positions 1024 and "
	       "2048 bit-identical to plain launches",
	       n_same, n_steps);
	tap_ok(n_same_pdl == n_steps,
	       "graphs: %d of %d decode steps bit-identical with ordinary "
	       "launches (PARLEY_CUDA_PDL=0)",
	       n_same_pdl, n_steps);
	tap_ok(n_pane == 16 && n_pane_steps == 16,
	       "graphs: the pane's trace (statistics filled at the select): "
	       "%d of 16 traced steps' layers = the synchronous trace's, "
	       "%d of 16 ended once",
	       n_pane, n_pane_steps);
	tap_ok(n_same_rp == n_steps,
	       "graphs: %d of %d decode steps bit-identical with the weights "
	       "in the file's layout (PARLEY_CUDA_REPACK=0)",
	       n_same_rp, n_steps);
	tap_ok(worst <= x8_bound(worst8),
	       "graphs: those steps vs the CPU: worst nmse %.3g (<= %.3g: "
	       "int8 cpu %.3g)",
	       worst, x8_bound(worst8), worst8);
	tap_ok(worst_rms >= 0 && worst_rms <= 1e-6,
	       "graphs: traced steps' per-layer statistics computed on the "
	       "device = those of the host copies (min, max exact; rms "
	       "worst relative %.3g)",
	       worst_rms);
out:
	engine_close(g);
	engine_close(p);
	engine_close(q);
	engine_close(u);
	engine_close(d);
	engine_close(c);
	engine_close(c8);
	trace_free(tg);
	trace_free(tc);
	trace_free(td);
	free(toks);
	model_free(m);
	gguf_close(f);
}

/* Load PATH; parity checks and greedy decoding. */
static void check_real(const char *path, const char *what,
                       const int32_t *prompt, int32_t n_prompt)
{
	char err[512] = "";
	struct gguf_file *f = gguf_open(path, err, sizeof(err));
	struct model *m = NULL;

	int rc = f != NULL ? model_load(f, &m, err, sizeof(err)) : -1;

	if (!tap_ok(rc == 0, "%s: load %s", what, rc ? err : ""))
		goto out;
	check_model(m, what, prompt, 0);
	check_shift(m, what, prompt, 0);
	check_greedy(m, what, prompt);
	check_trace(m, what, prompt);
	check_verify(m, what, prompt, n_prompt, true);
out:
	model_free(m);
	gguf_close(f);
}

/* A chat-like prompt of SmolLM2 ids (any ids < 49152 serve). */
static const int32_t smol_prompt[] = {
    1,    9690, 198, 2683,  359,  253,  5356, 5646, 11173,
    3365, 3511, 308, 34519, 28,   7018, 411,  407,  19712,
    30,   2,    198, 1,     4093, 198,  57,   22,   23};
#define N_SMOL_PROMPT (int32_t)(sizeof(smol_prompt) / sizeof(smol_prompt[0]))

/* A CPU (exact dots) or CUDA engine with a cache of kv type T. */
static struct engine *open_kv(const struct model *m, const char *backend,
                              enum engine_kv_type t, const char *what)
{
	struct engine_params p = {0};
	struct engine *e = NULL;
	char err[512] = "";

	p.backend = backend;
	p.n_ctx = 128;
	p.exact_dots = true;
	p.kv_type = t;
	int rc = engine_open(m, &p, &e, err, sizeof(err));

	if (!tap_ok(rc == 0, "%s: open %s with a %s cache %s", what, backend,
	            engine_kv_type_name(t), rc ? err : ""))
		return NULL;
	return e;
}

/*
 * The context shift of a q8_0 cache, GPU against CPU from the same
 * blocks (G's state loaded into C): positions [3, 9) shifted out on both,
 * then the caches as floats: values the same (bytes moved), keys within
 * NMSE 2e-5 (each key row is turned and quantized again; the two
 * rotations' floats may round to neighbouring quants, a step being
 * 1/127 of a block's largest value: a wrong angle or pairing is O(1));
 * then the next id TOK on both within TOL.
 */
static void check_kvq_shift(struct engine *g, struct engine *c,
                            const int32_t *tok, const char *what)
{
	const int32_t p0 = 3, d = 6, n0 = engine_n_past(g);
	size_t ng = 0;
	void *sg = save_state(g, &ng);
	float *g0 = NULL, *c0 = NULL, *g1 = NULL, *c1 = NULL;
	double kb = 1, ka = 1, vb = 1, va = 1, e = -1;
	char err[512] = "";
	int ok = sg != NULL &&
	         engine_state_load(c, sg, ng, err, sizeof(err)) == 0 &&
	         (g0 = kv_dump(g)) != NULL && (c0 = kv_dump(c)) != NULL &&
	         engine_can_shift(g) &&
	         engine_kv_shift(g, p0, d, err, sizeof(err)) == 0 &&
	         engine_kv_shift(c, p0, d, err, sizeof(err)) == 0 &&
	         engine_n_past(g) == n0 - d && engine_n_past(c) == n0 - d &&
	         (g1 = kv_dump(g)) != NULL && (c1 = kv_dump(c)) != NULL;

	if (ok) {
		kv_nmse(g, g0, c0, g1, c1, n0, p0, d, 0, &kb, &ka);
		kv_nmse(g, g0, c0, g1, c1, n0, p0, d, 1, &vb, &va);
		e = eval_both(g, c, tok, 1, 0);
	}
	tap_ok(ok && kb == 0 && vb == 0 && va == 0 && ka <= 2e-5,
	       "%s: q8_0 cache shifted [%d, %d) on both from the same blocks: "
	       "values the same, keys nmse %.3g (<= 2e-5) %s",
	       what, p0, p0 + d, ka, err);
	tap_ok(ok && e >= 0 && e <= TOL,
	       "%s: after the q8_0 shift, the next id's logits GPU vs CPU: "
	       "nmse %.3g (<= %g)",
	       what, e, TOL);
	free(sg);
	free(g0);
	free(c0);
	free(g1);
	free(c1);
}

/*
 * The q8_0 cache on the GPU against the CPU's q8_0 cache (exact dots,
 * check_model's reference): logit NMSE of the 20-token prefill (every
 * row; the batch kernels read the layer's fp16 copy) and of the decode
 * steps (the split kernel reads the blocks) within TOL; the GPU's state
 * loaded into the CPU and saved again is the same bytes (the CPU's
 * blocks, quantized from the GPU's floats, are the GPU's blocks) and
 * loaded into another GPU engine gives bit-identical next logits; the
 * GPU refuses an f32 cache naming the option and the backend.
 */
static void check_kvq(const char *path, const char *what, const int32_t *toks)
{
	struct gguf_file *f;
	struct model *m = NULL;
	struct engine *g = NULL, *c = NULL, *g2 = NULL;
	struct engine_params p = {0};
	char err[512] = "";
	double worst = 0;

	f = gguf_open(path, err, sizeof(err));
	if (!tap_ok(f != NULL && model_load(f, &m, err, sizeof(err)) == 0,
	            "%s: load %s", what, err))
		goto out;
	g = open_kv(m, "cuda", ENGINE_KV_Q8_0, what);
	c = open_kv(m, "cpu", ENGINE_KV_Q8_0, what);
	g2 = open_kv(m, "cuda", ENGINE_KV_Q8_0, what);
	if (g == NULL || c == NULL || g2 == NULL)
		goto out;
	/* (eval_both: -1 when an eval failed) */
	worst = eval_both(g, c, toks, N_PREFILL, ENGINE_EVAL_ALL);
	worst = worst < 0 || isnan(worst) ? INFINITY : worst;
	for (int i = 0; i < N_DECODE; i++) {
		double e = eval_both(g, c, toks + N_PREFILL + i, 1, 0);

		worst = e < 0 || isnan(e) ? INFINITY : e > worst ? e : worst;
	}
	tap_ok(worst <= TOL,
	       "%s: q8_0 cache, GPU against CPU: prefill and %d decode steps "
	       "within NMSE %g (worst %.3g)",
	       what, N_DECODE, TOL, worst);
	{
		size_t ng = 0, nc = 0;
		void *sg = save_state(g, &ng), *sc = NULL;

		if (sg != NULL &&
		    engine_state_load(c, sg, ng, err, sizeof(err)) == 0)
			sc = save_state(c, &nc);
		tap_ok(
		    sc != NULL && nc == ng && memcmp(sg, sc, ng) == 0,
		    "%s: the GPU's q8_0 state through the CPU's cache is the "
		    "same bytes (the same blocks) %s",
		    what, err);
		if (tap_ok(sg != NULL && engine_state_load(g2, sg, ng, err,
		                                           sizeof(err)) == 0,
		           "%s: the GPU's state loads into a GPU engine %s",
		           what, err)) {
			const size_t nv = (size_t)m->cfg.n_vocab;
			float *l = malloc(nv * sizeof(float));
			int rc = l == NULL ||
			         engine_eval(g, toks + N_PREFILL + N_DECODE, 1,
			                     0, err, sizeof(err)) != 0 ||
			         engine_logits(g) == NULL;

			if (!rc)
				memcpy(l, engine_logits(g), nv * sizeof(float));
			rc = rc ||
			     engine_eval(g2, toks + N_PREFILL + N_DECODE, 1, 0,
			                 err, sizeof(err)) != 0 ||
			     engine_logits(g2) == NULL;
			tap_ok(
			    !rc && memcmp(l, engine_logits(g2),
			                  nv * sizeof(float)) == 0,
			    "%s: ... and the next logits are bit-identical %s",
			    what, err);
			free(l);
		}
		free(sg);
		free(sc);
	}
	check_kvq_shift(g, c, toks + N_PREFILL + N_DECODE + 1, what);
	engine_close(g2);
	g2 = NULL;
	p.backend = "cuda";
	p.n_ctx = 64;
	p.kv_type = ENGINE_KV_F32;
	tap_ok(engine_open(m, &p, &g2, err, sizeof(err)) != 0 &&
	           strstr(err, "--kv-type f32") != NULL &&
	           strstr(err, "cuda backend") != NULL,
	       "%s: an f32 cache refused on the GPU: %s", what, err);
out:
	engine_close(g);
	engine_close(c);
	engine_close(g2);
	model_free(m);
	if (f)
		gguf_close(f);
}

/* Random-weight models of the q8_0 cache check: parley-mkmodel ARGS. */
static const struct {
	const char *name;
	const char *args;
} kvq_models[] = {
    {"kvq_llama_f16", "--arch llama --type F16 --n-head 8 --n-head-kv 2"},
    {"kvq_qwen3_f16", "--arch qwen3 --type F16 --n-head 4 --n-head-kv 2 "
                      "--head-dim 128"},
    {"kvq_gemma3_f32", "--arch gemma3 --type F32 --n-head 2 --n-head-kv 1 "
                       "--head-dim 256"},
};

int main(void)
{
	const char *top = getenv("top_builddir");
	char dir[] = "/tmp/t_cuda_engine.XXXXXX", cmd[2048], path[1024];
	int32_t toks[N_PREFILL + N_DECODE + 2];
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
		return tap_skip_all("no CUDA device");
	if (mkdtemp(dir) == NULL) {
		printf("Bail out! mkdtemp\n");
		return 1;
	}
	for (size_t i = 0; i < sizeof(toks) / sizeof(toks[0]); i++)
		toks[i] = (int32_t)((i * 7919 + 13) % 300);
	/* (first: the q8_0 cache's checks are new and short) */
	for (size_t i = 0; i < sizeof(kvq_models) / sizeof(kvq_models[0]);
	     i++) {
		snprintf(path, sizeof(path), "%s/%s.gguf", dir,
		         kvq_models[i].name);
		snprintf(
		    cmd, sizeof(cmd),
		    "%s/tests/parley-mkmodel --n-vocab 300 --n-embd 256 "
		    "--n-ff 512 --n-layer 3 --n-ctx 256 --seed %zu -o %s %s",
		    top ? top : ".", i + 31, path, kvq_models[i].args);
		if (tap_ok(system(cmd) == 0, "%s: parley-mkmodel",
		           kvq_models[i].name))
			check_kvq(path, kvq_models[i].name, toks);
		unlink(path);
	}
	for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s.gguf", dir, models[i].name);
		snprintf(
		    cmd, sizeof(cmd),
		    "%s/tests/parley-mkmodel --n-vocab 300 --n-embd 256 "
		    "--n-ff 512 --n-layer 3 --n-ctx 256 --seed %zu -o %s %s",
		    top ? top : ".", i + 1, path, models[i].args);
		if (!tap_ok(system(cmd) == 0, "%s: parley-mkmodel",
		            models[i].name))
			continue;
		if (models[i].gpu_batch < 0)
			check_real(path, models[i].name, smol_prompt,
			           N_SMOL_PROMPT);
		else
			check_file(path, models[i].name, toks,
			           models[i].gpu_batch,
			           strstr(models[i].name, "_merged") != NULL);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/graphs.gguf", dir);
	snprintf(cmd, sizeof(cmd),
	         "%s/tests/parley-mkmodel --arch qwen2 --type Q4_K "
	         "--more-bits-type Q6_K --out-type Q6_K --n-vocab "
	         "300 --n-embd 256 --n-ff 512 --n-layer 3 --n-head 8 "
	         "--n-head-kv 2 --n-ctx 4096 --seed 11 -o %s",
	         top ? top : ".", path);
	if (tap_ok(system(cmd) == 0, "graphs model: parley-mkmodel"))
		check_graphs(path);
	unlink(path);
	snprintf(path, sizeof(path), "%s/oom.gguf", dir);
	snprintf(
	    cmd, sizeof(cmd),
	    "%s/tests/parley-mkmodel --arch llama --type Q8_0 --n-vocab 64 "
	    "--n-embd 256 --n-ff 256 --n-layer 16 --n-head 16 --head-dim "
	    "256 --seed 7 -o %s",
	    top ? top : ".", path);
	if (tap_ok(system(cmd) == 0, "oom model: parley-mkmodel"))
		check_oom(path);
	unlink(path);
	rmdir(dir);
	eu_model_path(path, sizeof(path));
	if (access(path, R_OK) == 0)
		check_real(path, "SmolLM2", smol_prompt, N_SMOL_PROMPT);
	else
		tap_diag("SmolLM2 not found at %s: skipped", path);
	return tap_done();
}

/*
 * t_engine_shift.c - the context shift (engine_kv_shift, engine.h
 * invariant 6) on the CPU engine (its fp32 cache: the bounds below are
 * float rounding; the GPU's fp16 cache is held to the CPU's in
 * t_cuda_engine), over random-weight models written at test time by
 * tests/parley-mkmodel, and measured on the real SmolLM2 when present.
 *
 * Per model (llama's adjacent pairs, qwen2/qwen3's halves, a partial
 * rotation, linear scaling with rope_freqs, YaRN, gemma3's sliding
 * layers with their own base, gemma4's proportional RoPE, per-layer
 * shapes and shared KV):
 *   1. after evaluating 40 ids and shifting out [5, 17), every layer with
 *      a cache of its own holds: positions < 5 as they were (bit for
 *      bit); values moved as they were (bit for bit); keys equal to the
 *      old keys 12 positions on rotated by -12 pairs in double here, from
 *      the layer's RoPE class as model.h describes it (bound 1e-6 of the
 *      row's largest element);
 *   2. layer 0's keys (a function of token and position only) equal those
 *      of an engine that evaluated the kept ids afresh (1e-5 of the row's
 *      largest: float rounding; YaRN's magnitude applied twice would be
 *      14% off, a wrong direction or pairing O(1)), its values bit for bit;
 *   3. a one-layer model (every key and value a function of token and
 *      position): logits after the shift and one more id equal those of
 *      the fresh evaluation of the kept ids and that id (NMSE <= 1e-9);
 *   4. refusals change nothing: arguments out of range, a model with
 *      recurrent layers (qwen35: engine_can_shift false, "recurrent"
 *      named);
 *   5. the f16 and q8_0 caches shift as check 1 says, each moved key
 *      within one more rounding of its type (the key is read, turned and
 *      stored again).
 * SmolLM2 (multi-layer: a shifted cache is not the re-evaluated one, the
 * kept tokens' deeper K/V saw the dropped turns): a chat that overflows a
 * 256-token context, the oldest turn dropped each time; the turns that
 * follow are evaluated on a shifted engine and on one that re-evaluates
 * the kept turns, and their logits rows compared (NMSE, greedy
 * agreement). Measured, not equal: the check is that the shift stays far
 * closer to re-evaluation than moving the cache without re-rotating the
 * keys (a control built with the backend's kv_save / kv_load).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "engine_backend.h" /* ops.kv_save/kv_load, kv_elem_bytes */
#include "engine_util.h"
#include "gguf.h"
#include "model.h"
#include "tap.h"
#include "tok.h"

#define N_IDS  40 /* ids evaluated before the shift */
#define P0     5  /* first position forgotten */
#define D      12 /* positions forgotten */
#define N_CTX  64
#define K_TOL  1e-6 /* moved keys vs the double rotation, of the row max */
#define K0_TOL 1e-5 /* layer 0's keys vs a fresh evaluation */
#define L1_TOL 1e-9 /* a one-layer model's logits, NMSE */
/* an f16 / q8_0 cache's moved keys vs the double rotation, of the row
   max: one more rounding of the turned key (f16: 2^-11 of an element;
   q8_0: half a block's step, its max / 254, plus the step's own fp16
   rounding, up to 127 steps x 2^-11: max x 4.43e-3, the row's at most) */
#define F16_TOL 5e-4
#define Q8_TOL  4.5e-3

/* Random-weight models: ARGS for parley-mkmodel (n_vocab 300, n_embd 128,
   3 layers unless ARGS say); ONE: the one-layer variant's extra args, or
   NULL where the architecture needs more layers. */
static const struct {
	const char *name;
	const char *args;
	const char *one;
} models[] = {
    {"llama (adjacent pairs)", "--arch llama --n-head 4 --n-head-kv 2", ""},
    {"llama (16 of 32 dims rotated)",
     "--arch llama --n-head 4 --n-head-kv 2 --head-dim 32 --n-rot 16", ""},
    {"llama (linear scaling, rope_freqs)",
     "--arch llama --n-head 4 --n-head-kv 2 --rope-scaling linear "
     "--rope-scale-factor 4 --rope-freqs",
     ""},
    {"qwen2 (halves, biases)", "--arch qwen2 --n-head 4 --n-head-kv 2", ""},
    {"qwen3 (q/k norm, YaRN)",
     "--arch qwen3 --n-head 4 --n-head-kv 2 --head-dim 32 --rope-scaling "
     "yarn --rope-scale-factor 4 --yarn-orig-ctx 32",
     ""},
    {"gemma3 (sliding window 8, two bases)",
     "--arch gemma3 --n-head 4 --n-head-kv 1 --head-dim 32 "
     "--sliding-window 8 --sliding-window-pattern 2 --rope-base-swa 20000",
     ""},
    {"gemma4 (proportional RoPE, shared KV)",
     "--arch gemma4 --n-head 2 --n-head-kv 1 --head-dim 64 --head-dim-swa "
     "32 --n-layer 4 --sliding-window 8 --sliding-window-pattern 2 "
     "--kv-shared-layers 2 --rope-base 1000000",
     NULL},
};

/* Write and load a model: parley-mkmodel ARGS (after the shared ones)
 * into PATH. 0 or -1. */
static int make_model(const char *args, const char *path, struct gguf_file **f,
                      struct model **m)
{
	char a[1024];

	snprintf(a, sizeof(a),
	         "--type F32 --n-vocab 300 --n-embd 128 --n-ff 256 --n-layer 3 "
	         "--n-ctx 256 --seed 5 %s",
	         args);
	return eu_mkmodel(a, path, f, m);
}

/* An engine of N_CTX positions on M with a KV cache of type KT, or
 * NULL. */
static struct engine *open_engine_kv(const struct model *m, int32_t n_ctx,
                                     enum engine_kv_type kt)
{
	struct engine_params p = {0};
	struct engine *e = NULL;
	char err[512];

	p.backend = "cpu";
	p.n_ctx = n_ctx;
	p.n_threads = 2;
	p.kv_type = kt;
	if (engine_open(m, &p, &e, err, sizeof(err)) != 0) {
		tap_diag("engine_open: %s", err);
		return NULL;
	}
	return e;
}

/* An engine of N_CTX positions on M (the default cache), or NULL. */
static struct engine *open_engine(const struct model *m, int32_t n_ctx)
{
	return open_engine_kv(m, n_ctx, ENGINE_KV_DEFAULT);
}

/* Every layer's K/V of positions [0, n_past) (kv_save's layout), a new
   array, or NULL. */
static float *dump(struct engine *e)
{
	size_t n = engine_kv_state_bytes(e, engine_n_past(e));
	float *p = malloc(n ? n : 1);
	char err[256];

	if (p != NULL &&
	    e->ops->kv_save(e, engine_n_past(e), p, err, sizeof(err)) != 0) {
		free(p);
		return NULL;
	}
	return p;
}

/* Layer IL's keys in a dump of N positions ([n][k_dim]); its values
   follow them. */
static const float *dump_k(const struct engine *e, const float *d, int il,
                           int32_t n)
{
	for (int l = 0; l < il; l++)
		d += engine_kv_layer_bytes(e, l, n) / sizeof(float);
	return d;
}

/* max |a - b| / max |b| over N floats (b the reference). */
static double rel_err(const float *a, const double *b, int n)
{
	double mx = 0, sc = 0;

	for (int i = 0; i < n; i++) {
		double x = fabs((double)a[i] - b[i]);

		mx = x > mx ? x : mx;
		sc = fabs(b[i]) > sc ? fabs(b[i]) : sc;
	}
	return sc > 0 ? mx / sc : mx;
}

/* Key row X (n_head_kv heads of layer IL) turned by -D positions in
   double, as model.h's recipe rotates: into Y[k_dim]. */
static void rotate_back(const struct model *m, int il, const float *x,
                        int32_t d, double *y)
{
	const struct model_attn *a = &m->w.layers[il].attn;
	const struct model_rope *r = model_layer_rope(m, il);
	const int half = r->n_rot / 2;

	for (int h = 0; h < a->n_head_kv; h++) {
		const float *xh = x + (size_t)h * a->head_dim_k;
		double *yh = y + (size_t)h * a->head_dim_k;

		for (int i = 0; i < a->head_dim_k; i++)
			yh[i] = xh[i];
		for (int i = 0; i < half; i++) {
			const int p = r->style == MODEL_ROPE_NEOX ? i : 2 * i;
			const int q =
			    r->style == MODEL_ROPE_NEOX ? i + half : 2 * i + 1;
			const double t = -(double)d * r->inv_freq[i];

			yh[p] = xh[p] * cos(t) - xh[q] * sin(t);
			yh[q] = xh[p] * sin(t) + xh[q] * cos(t);
		}
	}
}

/* Check 1 on dumps S0 (N_IDS positions, before) and S1 (N_IDS - D,
   after): the worst key error; *EXACT false if a kept prefix row or a
   moved value differs in a bit. */
static double check_moved(const struct engine *e, const float *s0,
                          const float *s1, bool *exact)
{
	const struct model *m = e->model;
	const int32_t n1 = N_IDS - D;
	double worst = 0, y[MODEL_MAX_HEAD_DIM * 8];

	*exact = true;
	for (int il = 0; il < m->cfg.n_layer; il++) {
		struct model_cache_desc c = model_layer_cache(m, il);
		const float *k0 = dump_k(e, s0, il, N_IDS),
		            *k1 = dump_k(e, s1, il, n1);
		const float *v0 = k0 + (size_t)N_IDS * c.k_dim,
		            *v1 = k1 + (size_t)n1 * c.k_dim;

		if (c.kind == MODEL_CACHE_SHARED)
			continue;
		if ((size_t)c.k_dim > sizeof(y) / sizeof(y[0]))
			return INFINITY;
		if (memcmp(k0, k1, sizeof(float) * P0 * (size_t)c.k_dim) ||
		    memcmp(v0, v1, sizeof(float) * P0 * (size_t)c.v_dim) ||
		    memcmp(v0 + (size_t)(P0 + D) * c.v_dim,
		           v1 + (size_t)P0 * c.v_dim,
		           sizeof(float) * (size_t)(n1 - P0) * c.v_dim))
			*exact = false;
		for (int32_t j = P0; j < n1; j++) {
			double r;

			rotate_back(m, il, k0 + (size_t)(j + D) * c.k_dim, D,
			            y);
			r = rel_err(k1 + (size_t)j * c.k_dim, y, c.k_dim);
			worst = r > worst ? r : worst;
		}
	}
	return worst;
}

/* Check 2: layer 0 of dump S1 against the fresh dump SF (both N_IDS - D
   positions): the worst key error; *EXACT false if a value differs. */
static double check_layer0(const struct engine *e, const float *s1,
                           const float *sf, bool *exact)
{
	struct model_cache_desc c = model_layer_cache(e->model, 0);
	const int32_t n1 = N_IDS - D;
	double worst = 0, y[MODEL_MAX_HEAD_DIM * 8];

	*exact = memcmp(s1 + (size_t)n1 * c.k_dim, sf + (size_t)n1 * c.k_dim,
	                sizeof(float) * (size_t)n1 * c.v_dim) == 0;
	for (int32_t j = 0; j < n1; j++) {
		double r;

		for (int i = 0; i < c.k_dim; i++)
			y[i] = sf[(size_t)j * c.k_dim + i];
		r = rel_err(s1 + (size_t)j * c.k_dim, y, c.k_dim);
		worst = r > worst ? r : worst;
	}
	return worst;
}

/* The ids: N_IDS + 1 of them, the last the one after the shift. */
static void make_ids(int32_t *ids, int32_t n_vocab)
{
	for (int i = 0; i <= N_IDS; i++)
		ids[i] = (int32_t)((i * 7919 + 13) % n_vocab);
}

/* The kept ids after the shift: ids[0, P0) + ids[P0 + D, N_IDS + 1). */
static int32_t kept_ids(const int32_t *ids, int32_t *out)
{
	int32_t n = 0;

	for (int i = 0; i <= N_IDS; i++)
		if (i < P0 || i >= P0 + D)
			out[n++] = ids[i];
	return n;
}

/* Checks 1, 2, 4 (arguments) and 5 on model M. */
static void check_model(const struct model *m, const char *what)
{
	struct engine *e = open_engine(m, N_CTX), *f = open_engine(m, N_CTX);
	int32_t ids[N_IDS + 1], kept[N_IDS + 1];
	float *s0 = NULL, *s1 = NULL, *sf = NULL;
	char err[512] = "";
	bool ex1 = false, ex2 = false;
	double w1, w2;
	int32_t nk;

	make_ids(ids, m->cfg.n_vocab);
	nk = kept_ids(ids, kept);
	if (!tap_ok(e && f && engine_can_shift(e) &&
	                engine_eval(e, ids, N_IDS, 0, err, sizeof(err)) == 0 &&
	                engine_eval(f, kept, nk - 1, 0, err, sizeof(err)) == 0,
	            "%s: %d ids evaluated, the kept %d afresh %s", what, N_IDS,
	            nk - 1, err))
		goto out;
	/* 4: out of range, nothing changed */
	tap_ok(engine_kv_shift(e, -1, D, err, sizeof(err)) != 0 &&
	           engine_kv_shift(e, P0, 0, err, sizeof(err)) != 0 &&
	           engine_kv_shift(e, N_IDS - D + 1, D, err, sizeof(err)) !=
	               0 &&
	           engine_kv_shift(e, 0, N_IDS + 1, err, sizeof(err)) != 0 &&
	           engine_n_past(e) == N_IDS,
	       "%s: shifts out of range refused, nothing changed (\"%s\")",
	       what, err);
	/* 1 on the f16 and q8_0 caches: kv_save's floats are the stored
	   values, so the prefix and the values are bit for bit; each key is
	   stored once more after its turn, within that type's rounding */
	for (int qt = 0; qt < 2; qt++) {
		const enum engine_kv_type kt =
		    qt ? ENGINE_KV_Q8_0 : ENGINE_KV_F16;
		const double tol = qt ? Q8_TOL : F16_TOL;
		struct engine *q = open_engine_kv(m, N_CTX, kt);
		float *q0 = NULL, *q1 = NULL;
		bool exq = false;
		double wq = INFINITY;

		err[0] = '\0';
		if (q != NULL && engine_can_shift(q) &&
		    engine_eval(q, ids, N_IDS, ENGINE_EVAL_NO_LOGITS, err,
		                sizeof(err)) == 0 &&
		    (q0 = dump(q)) != NULL &&
		    engine_kv_shift(q, P0, D, err, sizeof(err)) == 0 &&
		    engine_n_past(q) == N_IDS - D && (q1 = dump(q)) != NULL)
			wq = check_moved(q, q0, q1, &exq);
		tap_ok(exq && wq <= tol,
		       "%s: a %s cache shifts: prefix and values %s, keys = "
		       "old keys rotated by -%d (double): worst %.3g of the "
		       "row (<= %g) %s",
		       what, engine_kv_type_name(kt),
		       exq ? "kept bit for bit" : "CHANGED", D, wq, tol, err);
		free(q0);
		free(q1);
		engine_close(q);
	}
	s0 = dump(e);
	err[0] = '\0';
	if (!tap_ok(s0 && engine_kv_shift(e, P0, D, err, sizeof(err)) == 0 &&
	                engine_n_past(e) == N_IDS - D,
	            "%s: shift [%d, %d): n_past %d %s", what, P0, P0 + D,
	            engine_n_past(e), err))
		goto out;
	s1 = dump(e);
	sf = dump(f);
	if (s1 == NULL || sf == NULL)
		goto out;
	w1 = check_moved(e, s0, s1, &ex1);
	tap_ok(ex1 && w1 <= K_TOL,
	       "%s: every cache: prefix and values %s, keys = old keys "
	       "rotated by -%d (double): worst %.3g (<= %g)",
	       what, ex1 ? "kept bit for bit" : "CHANGED", D, w1, K_TOL);
	w2 = check_layer0(e, s1, sf, &ex2);
	tap_ok(ex2 && w2 <= K0_TOL,
	       "%s: layer 0 = a fresh evaluation of the kept ids: values "
	       "%s, keys worst %.3g (<= %g)",
	       what, ex2 ? "bit for bit" : "DIFFER", w2, K0_TOL);
	/* the tail dropped: nothing moves, the rest stays */
	err[0] = '\0';
	tap_ok(engine_kv_shift(e, N_IDS - D - 3, 3, err, sizeof(err)) == 0 &&
	           engine_n_past(e) == N_IDS - D - 3,
	       "%s: the last 3 positions shifted out: n_past %d %s", what,
	       engine_n_past(e), err);
out:
	free(s0);
	free(s1);
	free(sf);
	engine_close(e);
	engine_close(f);
}

/* Check 3: a one-layer model's logits after the shift and one id. */
static void check_one_layer(const struct model *m, const char *what)
{
	struct engine *e = open_engine(m, N_CTX), *f = open_engine(m, N_CTX);
	int32_t ids[N_IDS + 1], kept[N_IDS + 1], nk;
	char err[512] = "";
	double r = -1;

	make_ids(ids, m->cfg.n_vocab);
	nk = kept_ids(ids, kept);
	if (e && f && engine_eval(e, ids, N_IDS, 0, err, sizeof(err)) == 0 &&
	    engine_kv_shift(e, P0, D, err, sizeof(err)) == 0 &&
	    engine_eval(e, ids + N_IDS, 1, 0, err, sizeof(err)) == 0 &&
	    engine_eval(f, kept, nk, 0, err, sizeof(err)) == 0)
		r = eu_nmse(engine_logits(e), engine_logits(f), m->cfg.n_vocab);
	tap_ok(r >= 0 && r <= L1_TOL,
	       "%s, one layer: logits after shift + 1 id = fresh evaluation "
	       "of the kept ids: nmse %.3g (<= %g) %s",
	       what, r, L1_TOL, err);
	engine_close(e);
	engine_close(f);
}

/* Check 4: a model with recurrent layers refuses, nothing changed. */
static void check_recurrent(const char *path)
{
	struct gguf_file *f;
	struct model *m;
	struct engine *e = NULL;
	int32_t ids[N_IDS + 1];
	char err[512] = "";
	int rc = -1;

	if (make_model("--arch qwen35 --n-head 4 --n-head-kv 2 --head-dim 32 "
	               "--n-rot 16 --ssm-state-size 32 --ssm-group-count 2 "
	               "--ssm-time-step-rank 4 --full-attention-interval 2",
	               path, &f, &m) == 0 &&
	    (e = open_engine(m, N_CTX)) != NULL) {
		make_ids(ids, m->cfg.n_vocab);
		if (engine_eval(e, ids, N_IDS, 0, err, sizeof(err)) == 0)
			rc = engine_kv_shift(e, P0, D, err, sizeof(err));
	}
	tap_ok(e && !engine_can_shift(e) && !model_kv_shiftable(m) &&
	           rc == -1 && engine_n_past(e) == N_IDS &&
	           strstr(err, "recurrent") != NULL,
	       "qwen35 (recurrent layers): no shift: \"%s\"", err);
	engine_close(e);
	model_free(m);
	gguf_close(f);
	unlink(path);
}

/* ------------------------------------------------ SmolLM2, measured */

#define SM_CTX 256

/* A chat in ChatML, one string a turn (the first the system prompt). */
static const char *const sm_turns[] = {
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n",
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
    "<|im_start|>assistant\nThe capital of France is Paris, a city on the "
    "Seine known for the Eiffel Tower, the Louvre and its cafes.<|im_end|>\n",
    "<|im_start|>user\nAnd what is the capital of Germany?<|im_end|>\n"
    "<|im_start|>assistant\nThe capital of Germany is Berlin. It became the "
    "capital again after the reunification in 1990.<|im_end|>\n",
    "<|im_start|>user\nName three colors of the rainbow.<|im_end|>\n"
    "<|im_start|>assistant\nRed, green and blue are three of the seven "
    "colors of the rainbow; the others are orange, yellow, indigo and "
    "violet.<|im_end|>\n",
    "<|im_start|>user\nWhat is 12 times 7?<|im_end|>\n"
    "<|im_start|>assistant\n12 times 7 is 84. You can check it as 10 times "
    "7, which is 70, plus 2 times 7, which is 14.<|im_end|>\n",
    "<|im_start|>user\nHow do I say hello in Spanish?<|im_end|>\n"
    "<|im_start|>assistant\nIn Spanish, hello is \"hola\". In the morning "
    "you can also say \"buenos dias\", which means good "
    "morning.<|im_end|>\n",
    "<|im_start|>user\nWhich is the largest planet?<|im_end|>\n"
    "<|im_start|>assistant\nJupiter is the largest planet of the solar "
    "system. It is a gas giant more than eleven times as wide as the "
    "Earth.<|im_end|>\n",
    "<|im_start|>user\nWhat is water made of?<|im_end|>\n"
    "<|im_start|>assistant\nWater is made of molecules of two hydrogen atoms "
    "bound to one oxygen atom, which is why its formula is "
    "H2O.<|im_end|>\n",
    "<|im_start|>user\nWho wrote Hamlet?<|im_end|>\n"
    "<|im_start|>assistant\nHamlet was written by William Shakespeare, "
    "probably around 1600. It is one of his best known "
    "tragedies.<|im_end|>\n",
    "<|im_start|>user\nGive me a tip for sleeping well.<|im_end|>\n"
    "<|im_start|>assistant\nGo to bed at the same time every night, keep the "
    "room dark and cool, and avoid screens for an hour before "
    "sleep.<|im_end|>\n",
    "<|im_start|>user\nThanks, goodbye!<|im_end|>\n"
    "<|im_start|>assistant\nYou are welcome! Have a nice day, and come back "
    "whenever you have another question.<|im_end|>\n",
};
#define SM_N (int)(sizeof(sm_turns) / sizeof(sm_turns[0]))

/* The moved-but-not-rotated control: W's cache loses [p0, p0 + d) with
   its keys left as they are (kv_save, move, truncate, kv_load). */
static int shift_unrotated(struct engine *w, int32_t p0, int32_t d)
{
	const int32_t n = engine_n_past(w), n1 = n - d;
	float *a = dump(w), *b = malloc(engine_kv_state_bytes(w, n1) + 1);
	char err[256];
	int rc = -1;

	if (a != NULL && b != NULL) {
		float *o = b;

		for (int il = 0; il < w->model->cfg.n_layer; il++) {
			struct model_cache_desc c =
			    model_layer_cache(w->model, il);
			const float *k = dump_k(w, a, il, n);
			const float *v = k + (size_t)n * c.k_dim;

			for (int kv = 0; kv < 2; kv++) {
				const float *x = kv ? v : k;
				const size_t dim = kv ? c.v_dim : c.k_dim;

				memcpy(o, x, sizeof(float) * dim * p0);
				memcpy(o + dim * p0, x + dim * (p0 + d),
				       sizeof(float) * dim * (n1 - p0));
				o += dim * n1;
			}
		}
		rc = engine_truncate(w, n1) ||
		     w->ops->kv_load(w, n1, b, err, sizeof(err));
	}
	free(a);
	free(b);
	return rc ? -1 : 0;
}

/* Compare the last eval's N rows of A and B into the sums. */
static void sm_compare(struct engine *a, struct engine *b, int32_t n,
                       int32_t nv, double *sum, double *worst, int *agree)
{
	const float *la = engine_logits(a), *lb = engine_logits(b);

	for (int32_t i = 0; i < n; i++) {
		const float *x = la + (size_t)i * nv, *y = lb + (size_t)i * nv;
		double r = eu_nmse(x, y, nv);

		*sum += r;
		*worst = r > *worst ? r : *worst;
		*agree += eu_argmax(x, nv) == eu_argmax(y, nv);
	}
}

/* The chat through SM_CTX positions: S shifts, R re-evaluates, W moves
   without rotating; the turns after the first drop compared. */
static void check_smollm(const char *path)
{
	char err[512] = "";
	struct gguf_file *f = gguf_open(path, err, sizeof(err));
	struct model *m = NULL;
	struct tok *t = NULL;
	struct engine *s = NULL, *r = NULL, *w = NULL;
	struct tok_ids ids[SM_N];
	int kept[SM_N], n_kept = 0, drops = 0, rows = 0, ag_s = 0, ag_w = 0;
	double sum_s = 0, max_s = 0, sum_w = 0, max_w = 0;
	int32_t nv;
	bool ok = true;

	memset(ids, 0, sizeof(ids));
	if (f == NULL || model_load(f, &m, err, sizeof(err)) != 0 ||
	    (t = tok_load(f, err, sizeof(err))) == NULL) {
		tap_ok(0, "SmolLM2: load %s", err);
		goto out;
	}
	nv = m->cfg.n_vocab;
	err[0] = '\0'; /* (tok_load may leave a note of a missing key) */
	for (int i = 0; i < SM_N && ok; i++)
		ok = tok_encode(t, sm_turns[i], strlen(sm_turns[i]),
		                TOK_PARSE_SPECIAL, &ids[i], err,
		                sizeof(err)) == 0;
	s = open_engine(m, SM_CTX);
	r = open_engine(m, SM_CTX);
	w = open_engine(m, SM_CTX);
	if (!ok || !s || !r || !w)
		goto out;
	for (int i = 0; i < SM_N && ok; i++) {
		const int32_t n = (int32_t)ids[i].n;
		const int32_t p = (int32_t)ids[0].n;

		/* the oldest kept turn leaves until turn i fits */
		while (ok && n_kept > 0 && engine_n_past(s) + n > SM_CTX) {
			const int32_t d = (int32_t)ids[kept[0]].n;

			ok = engine_kv_shift(s, p, d, err, sizeof(err)) == 0 &&
			     shift_unrotated(w, p, d) == 0 &&
			     engine_truncate(r, p) == 0;
			memmove(kept, kept + 1,
			        sizeof(*kept) * (size_t)--n_kept);
			for (int k = 0; ok && k < n_kept; k++)
				ok = engine_eval(r, ids[kept[k]].v,
				                 (int32_t)ids[kept[k]].n,
				                 ENGINE_EVAL_NO_LOGITS, err,
				                 sizeof(err)) == 0;
			drops++;
		}
		ok = ok &&
		     engine_eval(s, ids[i].v, n, ENGINE_EVAL_ALL, err,
		                 sizeof(err)) == 0 &&
		     engine_eval(r, ids[i].v, n, ENGINE_EVAL_ALL, err,
		                 sizeof(err)) == 0 &&
		     engine_eval(w, ids[i].v, n, ENGINE_EVAL_ALL, err,
		                 sizeof(err)) == 0;
		if (ok && drops > 0) {
			sm_compare(s, r, n, nv, &sum_s, &max_s, &ag_s);
			sm_compare(w, r, n, nv, &sum_w, &max_w, &ag_w);
			rows += n;
		}
		if (i > 0)
			kept[n_kept++] = i;
	}
	if (!tap_ok(ok && drops > 0 && rows > 0,
	            "SmolLM2: a %d-turn chat through a %d-token context: %d "
	            "turns dropped, %d positions compared after the first "
	            "drop %s",
	            SM_N - 1, SM_CTX, drops, rows, err))
		goto out;
	tap_diag("SmolLM2 shift vs re-evaluation: logit NMSE mean %.3g, max "
	         "%.3g; greedy agreement %d of %d (%.1f%%)",
	         sum_s / rows, max_s, ag_s, rows, 100.0 * ag_s / rows);
	tap_diag("SmolLM2 moved without re-rotating (control): NMSE mean "
	         "%.3g, max %.3g; greedy agreement %d of %d (%.1f%%)",
	         sum_w / rows, max_w, ag_w, rows, 100.0 * ag_w / rows);
	tap_ok(sum_s * 10 < sum_w && ag_s > ag_w,
	       "SmolLM2: the shifted cache is far closer to re-evaluation "
	       "(mean NMSE %.3g, %.1f%% greedy agreement) than the same move "
	       "without re-rotated keys (%.3g, %.1f%%)",
	       sum_s / rows, 100.0 * ag_s / rows, sum_w / rows,
	       100.0 * ag_w / rows);
out:
	for (int i = 0; i < SM_N; i++)
		free(ids[i].v);
	engine_close(s);
	engine_close(r);
	engine_close(w);
	tok_free(t);
	model_free(m);
	gguf_close(f);
}

int main(void)
{
	char path[512];

	snprintf(path, sizeof(path), "/tmp/t_engine_shift_%d.gguf",
	         (int)getpid());
	for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++) {
		struct gguf_file *f;
		struct model *m;
		char one[1024];

		if (tap_ok(make_model(models[i].args, path, &f, &m) == 0,
		           "%s: parley-mkmodel", models[i].name))
			check_model(m, models[i].name);
		model_free(m);
		gguf_close(f);
		if (models[i].one == NULL)
			continue;
		snprintf(one, sizeof(one), "%s --n-layer 1 %s", models[i].args,
		         models[i].one);
		if (tap_ok(make_model(one, path, &f, &m) == 0,
		           "%s, one layer: parley-mkmodel", models[i].name))
			check_one_layer(m, models[i].name);
		model_free(m);
		gguf_close(f);
	}
	check_recurrent(path);
	unlink(path);
	eu_model_path(path, sizeof(path));
	if (access(path, R_OK) == 0)
		check_smollm(path);
	else
		tap_diag("SmolLM2 not found at %s: skipped", path);
	return tap_done();
}

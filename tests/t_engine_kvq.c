/*
 * t_engine_kvq.c - the CPU engine's f16 and q8_0 KV caches
 * (engine_params.kv_type) on random-weight models (tests/parley-mkmodel):
 *   - the cache's q8_0 blocks are quant_q8_0_row's bytes: layer 0's keys
 *     and values (which no attention feeds) against the f32 engine's
 *     floats quantized, and every layer against its own saved state
 *     quantized again;
 *   - a state round trip: a q8_0 cache saved and loaded into another
 *     engine is the same bytes and gives bit-identical next logits; an
 *     f32 state loads into a q8_0 cache as its floats quantized;
 *   - accuracy: logit NMSE of f16 and q8_0 against the f32 cache over a
 *     prefill of every position and decode steps, within bounds measured
 *     here (see KVQ_TOL_*);
 *   - the planned bytes (engine_kv_read_bytes) are q8_0's 34 per 32;
 *   - refusals: q8_0 with a head size not a multiple of 32, an unknown
 *     type at the engine, a bad kv-type in the config.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend_cpu_int.h"
#include "config.h"
#include "engine.h"
#include "engine_backend.h"
#include "engine_util.h"
#include "gguf.h"
#include "model.h"
#include "quant.h"
#include "tap.h"
#include "verify.h"

#define N_PREFILL 96 /* tokens evaluated at once (two CPU chunks) */
#define N_DECODE  8  /* then one at a time */

/*
 * Bounds of the logit NMSE against the f32 cache, the worst row of the
 * prefill and the decode steps. Measured on these models (x86-64, 2
 * threads): q8_0 6.0e-5 (llama), 5.0e-5 (qwen3), 1.06e-4 (gemma3, head
 * 128); f16 6.1e-8, 7.4e-8, 1.28e-7. The bounds are about 4 times the
 * worst; the check that q8_0 differs more than f16 (and both at all)
 * keeps a cache that stored f32 from passing.
 */
#define KVQ_TOL_Q8  4e-4
#define KVQ_TOL_F16 5e-7

/* Random-weight models: parley-mkmodel arguments (n_vocab 300). */
static const struct {
	const char *name;
	const char *args;
} models[] = {
    {"llama_gqa", "--arch llama --type F32 --n-head 8 --n-head-kv 2"},
    {"qwen3_qknorm", "--arch qwen3 --type F16 --n-head 4 --n-head-kv 2 "
                     "--head-dim 64"},
    {"gemma3_window", "--arch gemma3 --type F32 --n-head 2 --n-head-kv 1 "
                      "--head-dim 128"},
};

/* A CPU engine of kv type T (2 threads, chunks of 64), or NULL. */
static struct engine *open_kv(const struct model *m, enum engine_kv_type t)
{
	struct engine_params p = {0};
	struct engine *e = NULL;
	char err[512] = "";

	p.backend = "cpu";
	p.n_ctx = 256;
	p.n_threads = 2;
	p.n_batch = 64;
	p.kv_type = t;
	if (!tap_ok(engine_open(m, &p, &e, err, sizeof(err)) == 0,
	            "open a %s cache: %s", engine_kv_type_name(t),
	            e ? "" : err))
		return NULL;
	return e;
}

/* Evaluate the prefill (every row) and the decode steps on E; the
 * logits into OUT [(N_PREFILL + N_DECODE)][n_vocab]. 0 or -1. */
static int run_all(struct engine *e, const int32_t *toks, float *out)
{
	const size_t nv = (size_t)engine_n_vocab(e);
	char err[256];

	if (engine_eval(e, toks, N_PREFILL, ENGINE_EVAL_ALL, err,
	                sizeof(err)) != 0)
		return -1;
	memcpy(out, engine_logits(e), N_PREFILL * nv * sizeof(float));
	for (int i = 0; i < N_DECODE; i++) {
		if (engine_eval(e, toks + N_PREFILL + i, 1, 0, err,
		                sizeof(err)) != 0)
			return -1;
		memcpy(out + (N_PREFILL + i) * nv, engine_logits(e),
		       nv * sizeof(float));
	}
	return 0;
}

/* E's state (malloc'd; *LEN its bytes), or NULL. */
static void *save(struct engine *e, size_t *len)
{
	char err[256];
	void *b;

	*len = engine_state_size(e);
	b = malloc(*len);
	if (b && engine_state_save(e, b, *len, err, sizeof(err)) != *len) {
		free(b);
		return NULL;
	}
	return b;
}

/* The floats of layer IL's K (V when V) in state BUF of engine E. */
static const float *state_rows(const struct engine *e, const void *buf, int il,
                               bool v)
{
	/* the header (32 bytes) and the layer records (32 each) */
	const char *p = (const char *)buf + 32 + 32 * e->model->cfg.n_layer;
	const int32_t n = engine_n_past(e);

	for (int l = 0; l < il; l++)
		p += engine_kv_layer_bytes(e, l, n);
	if (v)
		p += (size_t)n * model_layer_cache(e->model, il).k_dim *
		     sizeof(float);
	return (const float *)p;
}

/* Whether layer IL's cache rows in Q (a q8_0 engine) are F's floats of
 * rows of DIM quantized by quant_q8_0_row, for N positions. */
static bool blocks_are(const struct engine *q, int il, bool v, const float *f,
                       int32_t n)
{
	const struct cpu_state *s = q->impl;
	const struct model_cache_desc d = model_layer_cache(q->model, il);
	const int32_t dim = v ? d.v_dim : d.k_dim;
	const size_t row = v ? s->v_row[il] : s->k_row[il];
	unsigned char *want = malloc(row);
	bool same = want != NULL;

	for (int32_t p = 0; same && p < n; p++) {
		quant_q8_0_row(f + (size_t)p * dim, dim, want);
		same = memcmp(want, (v ? s->vb[il] : s->kb[il]) + p * row,
		              row) == 0;
	}
	free(want);
	return same;
}

/* The block checks and the state round trip on model M. */
static void check_blocks(const struct model *m, const char *what,
                         const int32_t *toks)
{
	struct engine *f = open_kv(m, ENGINE_KV_F32);
	struct engine *q = open_kv(m, ENGINE_KV_Q8_0);
	struct engine *q2 = open_kv(m, ENGINE_KV_Q8_0);
	const size_t nv = (size_t)m->cfg.n_vocab;
	float *l1 = malloc(nv * sizeof(float)),
	      *l2 = malloc(nv * sizeof(float));
	void *fs = NULL, *qs = NULL;
	size_t flen = 0, qlen = 0;
	char err[256] = "";
	bool all = true;

	if (!f || !q || !q2 || !l1 || !l2)
		goto out;
	if (!tap_ok(engine_eval(f, toks, N_PREFILL, 0, err, sizeof(err)) == 0 &&
	                engine_eval(q, toks, N_PREFILL, 0, err, sizeof(err)) ==
	                    0,
	            "%s: prefill", what))
		goto out;
	fs = save(f, &flen);
	qs = save(q, &qlen);
	if (!tap_ok(fs && qs && flen == qlen, "%s: states saved (%zu bytes)",
	            what, qlen))
		goto out;
	/* layer 0's K and V depend on the tokens only */
	tap_ok(
	    blocks_are(q, 0, false, state_rows(f, fs, 0, false), N_PREFILL) &&
	        blocks_are(q, 0, true, state_rows(f, fs, 0, true), N_PREFILL),
	    "%s: layer 0's q8_0 blocks are the f32 keys and values "
	    "quantized by quant_q8_0_row",
	    what);
	for (int il = 0; il < m->cfg.n_layer; il++)
		if (model_layer_cache(m, il).kind != MODEL_CACHE_SHARED)
			all =
			    all &&
			    blocks_are(q, il, false,
			               state_rows(q, qs, il, false),
			               N_PREFILL) &&
			    blocks_are(q, il, true, state_rows(q, qs, il, true),
			               N_PREFILL);
	tap_ok(all,
	       "%s: every layer's blocks are its saved floats quantized "
	       "again (dequantize, quantize: the same bytes)",
	       what);
	/* round trip: the same cache bytes, the same next logits */
	if (tap_ok(engine_state_load(q2, qs, qlen, err, sizeof(err)) == 0,
	           "%s: q8_0 state loads: %s", what, err)) {
		const struct cpu_state *a = q->impl, *b = q2->impl;
		bool same = true;

		for (int il = 0; il < m->cfg.n_layer; il++)
			same = same &&
			       memcmp(a->kb[il], b->kb[il],
			              N_PREFILL * a->k_row[il]) == 0 &&
			       memcmp(a->vb[il], b->vb[il],
			              N_PREFILL * a->v_row[il]) == 0;
		tap_ok(same, "%s: the loaded q8_0 cache is the saved bytes",
		       what);
		if (engine_eval(q, toks + N_PREFILL, 1, 0, err, sizeof(err)) ==
		        0 &&
		    engine_eval(q2, toks + N_PREFILL, 1, 0, err, sizeof(err)) ==
		        0) {
			memcpy(l1, engine_logits(q), nv * sizeof(float));
			memcpy(l2, engine_logits(q2), nv * sizeof(float));
		}
		tap_ok(memcmp(l1, l2, nv * sizeof(float)) == 0,
		       "%s: the next token's logits are bit-identical after "
		       "the round trip",
		       what);
	}
	/* an f32 state into a q8_0 cache: its floats quantized */
	if (tap_ok(engine_state_load(q2, fs, flen, err, sizeof(err)) == 0,
	           "%s: f32 state loads into a q8_0 cache: %s", what, err)) {
		all = true;
		for (int il = 0; il < m->cfg.n_layer; il++)
			if (model_layer_cache(m, il).kind != MODEL_CACHE_SHARED)
				all = all &&
				      blocks_are(q2, il, false,
				                 state_rows(f, fs, il, false),
				                 N_PREFILL) &&
				      blocks_are(q2, il, true,
				                 state_rows(f, fs, il, true),
				                 N_PREFILL);
		tap_ok(all, "%s: ... as the f32 floats quantized", what);
	}
out:
	free(fs);
	free(qs);
	free(l1);
	free(l2);
	engine_close(f);
	engine_close(q);
	engine_close(q2);
}

/* Logit NMSE of kv type T against the f32 cache on M; -1 on failure. */
static double check_accuracy(const struct model *m, const char *what,
                             const int32_t *toks, enum engine_kv_type t,
                             const float *ref)
{
	const size_t nv = (size_t)m->cfg.n_vocab;
	const size_t n = (size_t)(N_PREFILL + N_DECODE) * nv;
	struct engine *e = open_kv(m, t);
	float *got = malloc(n * sizeof(float));
	double worst = -1;

	if (e && got && run_all(e, toks, got) == 0) {
		worst = 0;
		for (int r = 0; r < N_PREFILL + N_DECODE; r++) {
			double x = eu_nmse(got + r * nv, ref + r * nv, nv);

			worst = x > worst || isnan(x) ? x : worst;
		}
		tap_diag("%s: %s cache: worst row logit NMSE %.3g", what,
		         engine_kv_type_name(t), worst);
	}
	if (e)
		tap_ok(engine_kv_read_bytes(e, 1000) ==
		               engine_kv_type_bytes(
		                   t, model_cache_floats(m, 1000)) &&
		           (t != ENGINE_KV_Q8_0 ||
		            engine_kv_read_bytes(e, 1000) ==
		                model_cache_floats(m, 1000) / 32 * 34),
		       "%s: %s: planned KV bytes are the type's", what,
		       engine_kv_type_name(t));
	free(got);
	engine_close(e);
	return worst;
}

/* --verify of a q8_0 primary (CPU, exact dots): its bounds are the fp32
 * ones plus the q8_0 term (verify.h), an f32 primary's are not, and the
 * steps of a prefill and decode stay within them. */
static void check_verify(const struct model *m, const char *what,
                         const int32_t *toks)
{
	for (int q8 = 0; q8 < 2; q8++) {
		struct engine_params p = {0};
		struct engine *e = NULL;
		struct verify *v = NULL;
		struct verify_report r;
		char err[512] = "";
		int bad = 0, n = 0;

		p.backend = "cpu";
		p.n_ctx = 256;
		p.n_threads = 2;
		p.exact_dots = true;
		p.kv_type = q8 ? ENGINE_KV_Q8_0 : ENGINE_KV_F32;
		if (!tap_ok(engine_open(m, &p, &e, err, sizeof(err)) == 0 &&
		                verify_open(e, m, NULL, 2, &v, err,
		                            sizeof(err)) == 0,
		            "%s: verifier on a %s primary %s", what,
		            engine_kv_type_name(p.kv_type), err)) {
			engine_close(e);
			continue;
		}
		tap_ok(verify_tolerance(v, 0) ==
		               VERIFY_TOL_LAYER +
		                   (q8 ? VERIFY_TOL_Q8KV_LAYER : 0) &&
		           verify_logit_tolerance(v) ==
		               VERIFY_TOL_LOGIT +
		                   (q8 ? VERIFY_TOL_Q8KV_LOGIT : 0),
		       "%s: %s primary: bounds %g, %g", what,
		       engine_kv_type_name(p.kv_type), verify_tolerance(v, 0),
		       verify_logit_tolerance(v));
		for (int pos = 0; n <= N_DECODE; n++) {
			const int k = n == 0 ? N_PREFILL : 1;

			if (engine_eval(e, toks + pos, k, 0, err,
			                sizeof(err)) != 0 ||
			    verify_step(v, toks, pos + k, k, &r, err,
			                sizeof(err)) != 0) {
				bad++;
				break;
			}
			pos += k;
			bad += r.first_bad >= 0 || r.logits_bad;
		}
		tap_ok(bad == 0 && n == N_DECODE + 1,
		       "%s: %s primary: %d steps within the bounds %s", what,
		       engine_kv_type_name(p.kv_type), n, err);
		verify_close(v);
		engine_close(e);
	}
}

/* Every check on the model made with ARGS. */
static void check_model(const char *path, const char *what, const int32_t *toks)
{
	struct gguf_file *f;
	struct model *m = NULL;
	struct engine *e;
	float *ref = NULL;
	char err[512] = "";
	size_t n;

	f = gguf_open(path, err, sizeof(err));
	if (!tap_ok(f != NULL && model_load(f, &m, err, sizeof(err)) == 0,
	            "%s: load: %s", what, err))
		goto out;
	n = (size_t)(N_PREFILL + N_DECODE) * m->cfg.n_vocab;
	ref = malloc(n * sizeof(float));
	e = open_kv(m, ENGINE_KV_F32);
	if (e == NULL || ref == NULL ||
	    !tap_ok(run_all(e, toks, ref) == 0, "%s: the f32 run", what)) {
		engine_close(e);
		goto out;
	}
	engine_close(e);
	{
		double q8 = check_accuracy(m, what, toks, ENGINE_KV_Q8_0, ref);
		double f16 = check_accuracy(m, what, toks, ENGINE_KV_F16, ref);

		tap_ok(q8 >= 0 && q8 <= KVQ_TOL_Q8,
		       "%s: q8_0 logits within NMSE %g of the f32 cache's "
		       "(%.3g)",
		       what, KVQ_TOL_Q8, q8);
		tap_ok(f16 >= 0 && f16 <= KVQ_TOL_F16,
		       "%s: f16 logits within NMSE %g of the f32 cache's "
		       "(%.3g)",
		       what, KVQ_TOL_F16, f16);
		/* the caches differ at all: each check can fail */
		tap_ok(q8 > 0 && f16 > 0 && q8 > f16,
		       "%s: q8_0 differs from f32 more than f16 does", what);
	}
	check_blocks(m, what, toks);
	if (strcmp(what, "llama_gqa") == 0)
		check_verify(m, what, toks);
out:
	free(ref);
	model_free(m);
	if (f)
		gguf_close(f);
}

/* The refusals: q8_0 blocks that would cross a head, an unknown type, a
 * bad config value. */
static void check_refusals(const char *path)
{
	struct gguf_file *f;
	struct model *m = NULL;
	struct engine_params p = {0};
	struct engine *e = NULL;
	struct config c;
	char err[512] = "";

	f = gguf_open(path, err, sizeof(err));
	if (!tap_ok(f != NULL && model_load(f, &m, err, sizeof(err)) == 0,
	            "hd48: load: %s", err))
		goto out;
	p.backend = "cpu";
	p.n_ctx = 64;
	p.kv_type = ENGINE_KV_Q8_0;
	err[0] = '\0';
	tap_ok(engine_open(m, &p, &e, err, sizeof(err)) != 0 && e == NULL &&
	           strstr(err, "--kv-type q8_0") != NULL &&
	           strstr(err, "48") != NULL,
	       "q8_0 with head size 48 refused, naming the option: %s", err);
	p.kv_type = ENGINE_KV_F16; /* any head size */
	tap_ok(engine_open(m, &p, &e, err, sizeof(err)) == 0,
	       "f16 with head size 48 opens");
	engine_close(e);
	e = NULL;
	p.kv_type = (enum engine_kv_type)7;
	tap_ok(engine_open(m, &p, &e, err, sizeof(err)) != 0 &&
	           strstr(err, "cpu backend") != NULL,
	       "an unknown kv type refused, naming the backend: %s", err);
out:
	config_init(&c);
	tap_ok(config_set(&c, "kv-type", "q8_0", err, sizeof(err)) == 0 &&
	           c.kv_type == ENGINE_KV_Q8_0,
	       "config kv-type q8_0");
	tap_ok(config_set(&c, "kv-type", "q4_0", err, sizeof(err)) != 0 &&
	           strstr(err, "kv-type") != NULL &&
	           c.kv_type == ENGINE_KV_Q8_0,
	       "config kv-type q4_0 refused: %s", err);
	config_free(&c);
	model_free(m);
	if (f)
		gguf_close(f);
}

int main(void)
{
	const char *top = getenv("top_builddir");
	char dir[] = "/tmp/t_engine_kvq.XXXXXX", cmd[2048], path[1024];
	int32_t toks[N_PREFILL + N_DECODE + 1];

	if (mkdtemp(dir) == NULL) {
		printf("Bail out! mkdtemp\n");
		return 1;
	}
	for (size_t i = 0; i < sizeof(toks) / sizeof(toks[0]); i++)
		toks[i] = (int32_t)((i * 7919 + 13) % 300);
	for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s.gguf", dir, models[i].name);
		snprintf(cmd, sizeof(cmd),
		         "%s/tests/parley-mkmodel --n-vocab 300 --n-embd 256 "
		         "--n-ff 512 --n-layer 3 --n-ctx 256 --seed %zu -o %s "
		         "%s >/dev/null",
		         top ? top : ".", i + 1, path, models[i].args);
		if (tap_ok(system(cmd) == 0, "%s: parley-mkmodel",
		           models[i].name))
			check_model(path, models[i].name, toks);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/hd48.gguf", dir);
	snprintf(cmd, sizeof(cmd),
	         "%s/tests/parley-mkmodel --arch llama --type F32 --n-vocab 64 "
	         "--n-embd 192 --n-ff 256 --n-layer 1 --n-head 4 --head-dim 48 "
	         "--seed 5 -o %s >/dev/null",
	         top ? top : ".", path);
	if (tap_ok(system(cmd) == 0, "hd48: parley-mkmodel"))
		check_refusals(path);
	unlink(path);
	rmdir(dir);
	return tap_done();
}

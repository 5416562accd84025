/*
 * t_engine_smollm.c - the CPU engine on the real SmolLM2-135M-Instruct Q4_1
 * model against two independent implementations (goldens under
 * tests/data/engine/smollm2*, by tests/oracles/gen_engine.py):
 *
 *  - llama-cpp-python: 64 greedy tokens per prompt (6 prompts: English,
 *    code, ChatML, CJK/unicode, numbers, 390 tokens of prose), its top-2
 *    gap per step, its logits at the first generated position;
 *  - a numpy float64 forward pass written from Hugging Face's
 *    LlamaForCausalLM on the dequantized weights, run on the same tokens
 *    (teacher-forced on llama.cpp's continuation): its argmax and top-2 gap
 *    per step, its first-position logits.
 *
 * Two runs of the engine, each evaluating prompt + continuation in one
 * batch with the logits of every position (teacher forcing: the argmax at
 * each step is what greedy decoding picks, given the same context):
 *
 *  1. exact_dots (fp32 activations, dequantized rows): the same function
 *     as the numpy pass up to fp32 rounding. Pass (issue 3, point 4a): the
 *     argmax equals the reference's at all 64 steps on at least 5 of the 6
 *     prompts, every differing step is a near-tie in the reference (top-2
 *     gap < 0.1), first-position logits within EXACT_MAX_DELTA.
 *  2. the default path (activations rounded to int8 blocks, like
 *     llama.cpp). That rounding is discontinuous (backend_cpu.c): a 1e-7
 *     change of the input moves logits by ~0.1, so two correct int8
 *     implementations differ by that much per prompt, at random. The
 *     comparison is therefore statistical, over the 6 prompts: the default
 *     path must be at least as faithful to the float64 pass as llama.cpp
 *     is: (a) its first-position logits' mean |delta| from the float64
 *     pass, averaged over the prompts, at most 1.25 x llama.cpp's (the
 *     goldens' lcpdev); (b) its argmax equal to the float64 pass's on at
 *     least 95% of the 384 steps (llama.cpp's greedy tokens: 371 = 96.6%).
 *     Calibration: two builds of parley that differ only in the summation
 *     order of the attention scores gave 0.168 / 0.186 for (a) against
 *     llama.cpp's 0.183, and 380 / 370 steps for (b): that is the spread
 *     of equally correct int8 implementations; a real mistake (a wrong
 *     scale, bias or head) moves (a) by whole units. The agreement with
 *     llama.cpp's own tokens and logits is printed.
 */
#include <math.h>

#include "engine.h"
#include "engine_util.h"
#include "smollm_golden.h"
#include "gguf.h"
#include "model.h"
#include "tap.h"

#define GAP_NEAR_TIE 0.1
/* exact_dots vs float64: fp32 rounding through 30 layers */
#define EXACT_MAX_DELTA 0.01

/* IEEE half bits as a double. */
static double half_to_double(uint16_t h)
{
	int e = (h >> 10) & 31, m = h & 1023;
	double v = e == 0 ? ldexp(m, -24) : ldexp(m + 1024, e - 25);

	return (h & 0x8000) ? -v : v;
}

/* llama.cpp's first-position logits (float16 file) as floats. */
static float *read_f16(const char *path, size_t n)
{
	FILE *f = fopen(path, "rb");
	uint16_t *h = malloc(n * sizeof(*h));
	float *out = malloc(n * sizeof(float));

	if (f == NULL || h == NULL || out == NULL ||
	    fread(h, sizeof(*h), n, f) != n) {
		free(out);
		out = NULL;
	}
	for (size_t i = 0; out && i < n; i++)
		out[i] = (float)half_to_double(h[i]);
	if (f)
		fclose(f);
	free(h);
	return out;
}

/* max and mean |a - b| over n. */
static void deltas(const float *a, const float *b, int32_t n, double *mx,
                   double *mean)
{
	double sum = 0;

	*mx = 0;
	for (int32_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - b[i]);

		*mx = d > *mx || isnan(d) ? d : *mx;
		sum += d;
	}
	*mean = sum / n;
}

/* Evaluate prompt + continuation of G with all logits; NULL on failure. */
static const float *run_forced(struct engine *e, const struct golden *g)
{
	int32_t n = g->n_ids + g->n_gen - 1;
	int32_t *seq = malloc((size_t)n * sizeof(*seq));
	char err[512];
	int rc;

	if (seq == NULL)
		return NULL;
	memcpy(seq, g->ids, (size_t)g->n_ids * sizeof(*seq));
	memcpy(seq + g->n_ids, g->gen, (size_t)(g->n_gen - 1) * sizeof(*seq));
	engine_truncate(e, 0);
	rc = engine_eval(e, seq, n, ENGINE_EVAL_ALL, err, sizeof(err));
	free(seq);
	if (rc != 0) {
		tap_diag("%s: eval: %s", g->name, err);
		return NULL;
	}
	return engine_logits(e) + (size_t)(g->n_ids - 1) * engine_n_vocab(e);
}

/* Run 1: exact dots against the float64 reference. */
static void check_exact(struct engine *e, struct golden *g, const float *ref)
{
	int full = 0, near_tie_only = 1;
	int32_t nv = engine_n_vocab(e);

	for (int k = 0; k < N_PROMPTS; k++) {
		const float *lg = run_forced(e, &g[k]);
		int32_t matched = 0, first = -1;
		double mx, mean;
		int ok = 1;

		if (!tap_ok(lg != NULL, "%s: exact run", g[k].name))
			continue;
		deltas(lg, ref + (size_t)k * nv, nv, &mx, &mean);
		tap_ok(mx < EXACT_MAX_DELTA,
		       "%s: exact dots, first-position logits vs float64: max "
		       "|d| %.2e mean %.2e",
		       g[k].name, mx, mean);
		for (int32_t s = 0; s < g[k].n_gen; s++) {
			int32_t tok = eu_argmax(lg + (size_t)s * nv, nv);

			if (tok == g[k].rtop[s]) {
				matched++;
				continue;
			}
			first = first < 0 ? s : first;
			tap_diag("%s: step %d: got %d, reference %d, reference "
			         "gap %.4f",
			         g[k].name, s, tok, g[k].rtop[s], g[k].rgap[s]);
			if (g[k].rgap[s] >= GAP_NEAR_TIE)
				ok = near_tie_only = 0;
		}
		full += matched == g[k].n_gen;
		tap_ok(ok,
		       "%s: exact dots: %d/%d greedy tokens equal the "
		       "float64 reference's (first divergence %d, gap there "
		       "%.4f)",
		       g[k].name, matched, g[k].n_gen, first,
		       first >= 0 ? g[k].rgap[first] : 0.0);
	}
	tap_ok(full >= 5,
	       "exact dots: %d of %d prompts equal on all tokens "
	       "(need 5)",
	       full, N_PROMPTS);
	tap_ok(near_tie_only,
	       "exact dots: every divergence is a near-tie "
	       "(reference gap < %.1f)",
	       GAP_NEAR_TIE);
}

/* Run 2: the default (int8 activation) path, statistically. */
static void check_default(struct engine *e, struct golden *g, const float *ref,
                          const float *lcp)
{
	int32_t nv = engine_n_vocab(e);
	int lfull = 0, ok = 1;
	long agree = 0, lcp_agree = 0;
	double dev = 0, lcp_dev = 0;

	for (int k = 0; k < N_PROMPTS; k++) {
		const float *lg = run_forced(e, &g[k]);
		int32_t lmatched = 0, rmatched = 0, lfirst = -1;
		double mx, mean, lmx, lmean;

		if (lg == NULL) {
			ok = 0;
			continue;
		}
		deltas(lg, ref + (size_t)k * nv, nv, &mx, &mean);
		deltas(lg, lcp + (size_t)k * nv, nv, &lmx, &lmean);
		for (int32_t s = 0; s < g[k].n_gen; s++) {
			int32_t tok = eu_argmax(lg + (size_t)s * nv, nv);

			rmatched += tok == g[k].rtop[s];
			lcp_agree += g[k].gen[s] == g[k].rtop[s];
			if (tok == g[k].gen[s])
				lmatched++;
			else if (lfirst < 0)
				lfirst = s;
		}
		lfull += lmatched == g[k].n_gen;
		agree += rmatched;
		dev += mean / N_PROMPTS;
		lcp_dev += g[k].lcpdev / N_PROMPTS;
		tap_diag("%s: default path vs llama.cpp: %d/%d tokens (first "
		         "divergence %d, llama.cpp gap there %.4f), first "
		         "logits max |d| %.4f mean %.4f; vs float64: %d/%d "
		         "tokens, first logits max |d| %.4f mean %.4f "
		         "(llama.cpp's mean: %.4f)",
		         g[k].name, lmatched, g[k].n_gen, lfirst,
		         lfirst >= 0 ? g[k].gap[lfirst] : 0.0, lmx, lmean,
		         rmatched, g[k].n_gen, mx, mean, g[k].lcpdev);
	}
	tap_ok(ok, "default path: all runs evaluated");
	tap_ok(dev <= 1.25 * lcp_dev,
	       "default path: first logits mean |d| from float64, averaged "
	       "over the prompts, %.4f <= 1.25 x llama.cpp's %.4f",
	       dev, lcp_dev);
	tap_ok(agree * 100 >= 95L * N_PROMPTS * 64,
	       "default path: argmax equals the float64 pass's on %ld of %d "
	       "steps, >= 95%% (llama.cpp's tokens: %ld)",
	       agree, N_PROMPTS * 64, lcp_agree);
	tap_diag("default path: %d of %d prompts equal llama.cpp on all 64 "
	         "tokens",
	         lfull, N_PROMPTS);
}

int main(void)
{
	char path[1024], gpath[1024], err[512];
	struct golden g[N_PROMPTS];
	struct gguf_file *f;
	struct model *m;
	struct engine *e;
	struct engine_params p = {0};
	float *ref, *lcp;
	const char *thr = getenv("PARLEY_TEST_THREADS");

	memset(g, 0, sizeof(g));
	eu_model_path(path, sizeof(path));
	f = gguf_open(path, err, sizeof(err));
	if (f == NULL)
		return tap_skip_all(
		    "SmolLM2-135M-Instruct.Q4_1.gguf not found");
	eu_data_path("smollm2", ".golden", gpath, sizeof(gpath));
	if (!tap_ok(read_golden(gpath, g) == N_PROMPTS, "read %s", gpath))
		return tap_done();
	for (int k = 0; k < N_PROMPTS; k++)
		if (!tap_ok(g[k].ids && g[k].gen && g[k].rtop &&
		                g[k].n_gen == g[k].n_rtop &&
		                g[k].n_gen <= 256 && g[k].lcpdev > 0,
		            "golden %s complete", g[k].name))
			return tap_done();
	if (!tap_ok(model_load(f, &m, err, sizeof(err)) == 0, "model loads %s",
	            err))
		return tap_done();
	eu_data_path("smollm2", ".logits", gpath, sizeof(gpath));
	ref = eu_read_f32(gpath, (size_t)N_PROMPTS * m->cfg.n_vocab);
	eu_data_path("smollm2_llamacpp", ".logits", gpath, sizeof(gpath));
	lcp = read_f16(gpath, (size_t)N_PROMPTS * m->cfg.n_vocab);
	if (!tap_ok(ref != NULL && lcp != NULL, "read the reference logits"))
		return tap_done();
	p.n_ctx = 512;
	p.n_threads = thr ? atoi(thr) : 0;
	p.exact_dots = true;
	if (tap_ok(engine_open(m, &p, &e, err, sizeof(err)) == 0,
	           "engine (exact dots) opens %s", err)) {
		check_exact(e, g, ref);
		engine_close(e);
	}
	p.exact_dots = false;
	if (tap_ok(engine_open(m, &p, &e, err, sizeof(err)) == 0,
	           "engine (default) opens %s", err)) {
		check_default(e, g, ref, lcp);
		engine_close(e);
	}
	model_free(m);
	gguf_close(f);
	free(ref);
	free(lcp);
	for (int k = 0; k < N_PROMPTS; k++) {
		free(g[k].ids);
		free(g[k].gen);
		free(g[k].rtop);
	}
	return tap_done();
}

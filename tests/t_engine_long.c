/*
 * t_engine_long.c - the CPU engine at 32k positions against llama.cpp, on
 * random-weight models whose files stretch their RoPE (issue 34 item 3):
 * YaRN (qwen3: trained for 8,192 positions, 4 times that) and linear
 * (llama, 4 times). tests/oracles/gen_long.py wrote the models and, in
 * tests/data/engine/NAME.long, llama-cpp-python's logits (ggml's CPU
 * kernels, fp32 KV cache) at ten positions from 0 to 32,767 of the tokens
 * long_tok makes.
 *
 * The engine evaluates the 32,768 tokens in prefill chunks that end at
 * those positions (exact dots: F32 weights, fp32 activations) and each
 * position's NMSE (sum (a - b)^2 / sum b^2 over the vocabulary) must stay
 * under LONG_NMSE: fp32 rounding over 32k keys. The same weights without
 * the file's scaling move them by 3e-3 to 2e-2 (gen_long.py prints it), so
 * an engine that ignored or misread the scaling fails at every position but
 * the first.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "engine_util.h"
#include "gguf.h"
#include "model.h"
#include "tap.h"

#define N_TOK 32768
/* exact dots vs llama.cpp at 32k positions: fp32 rounding (measured on the
   dev machine: 1.3e-11 worst, YaRN at 32,766; linear 9.4e-13) */
#define LONG_NMSE 1e-9

static const char *const models[] = {"qwen3_yarn_f32", "llama_linear_f32"};

/* gen_long.py's tokens: an LCG mod 2^31, token (x >> 16) % N_VOCAB. */
static void long_tok(int32_t *t, int32_t n_vocab)
{
	uint32_t x = 1;

	for (int32_t i = 0; i < N_TOK; i++) {
		x = (x * 1103515245u + 12345u) & 0x7fffffffu;
		t[i] = (int32_t)((x >> 16) % (uint32_t)n_vocab);
	}
}

/* NAME.long: *N_VOCAB, *N_POS, the positions and the logits (freed by the
   caller), or -1. */
static int read_long(const char *name, int32_t *n_vocab, int32_t *n_pos,
                     int32_t **pos, float **lg)
{
	char path[1024];
	int32_t h[2];
	FILE *f;
	int rc = -1;

	eu_data_path(name, ".long", path, sizeof(path));
	f = fopen(path, "rb");
	*pos = NULL;
	*lg = NULL;
	if (f == NULL || fread(h, sizeof(int32_t), 2, f) != 2 || h[0] < 1 ||
	    h[0] > 1 << 20 || h[1] < 1 || h[1] > 64)
		goto out;
	*pos = malloc(sizeof(int32_t) * (size_t)h[1]);
	*lg = malloc(sizeof(float) * (size_t)h[0] * (size_t)h[1]);
	if (*pos == NULL || *lg == NULL ||
	    fread(*pos, sizeof(int32_t), (size_t)h[1], f) != (size_t)h[1] ||
	    fread(*lg, sizeof(float), (size_t)h[0] * (size_t)h[1], f) !=
	        (size_t)h[0] * (size_t)h[1])
		goto out;
	*n_vocab = h[0];
	*n_pos = h[1];
	rc = 0;
out:
	if (f != NULL)
		fclose(f);
	return rc;
}

/* Model NAME: the engine's logits at each golden position. */
static void check_model(const char *name, const int32_t *toks)
{
	struct engine_params p = {.backend = "cpu",
	                          .n_ctx = N_TOK,
	                          .n_threads = 2,
	                          .exact_dots = true};
	struct gguf_file *f = NULL;
	struct model *m = NULL;
	struct engine *e = NULL;
	int32_t nv = 0, np = 0, *pos = NULL, done = 0;
	float *want = NULL;
	char path[1024], err[512] = "";
	double worst = 0;
	int bad = 0;

	eu_data_path(name, ".gguf", path, sizeof(path));
	if (!tap_ok(read_long(name, &nv, &np, &pos, &want) == 0,
	            "%s: golden logits read", name))
		goto out;
	f = gguf_open(path, err, sizeof(err));
	if (!tap_ok(f != NULL && model_load(f, &m, err, sizeof(err)) == 0 &&
	                m->cfg.n_vocab == nv &&
	                engine_open(m, &p, &e, err, sizeof(err)) == 0,
	            "%s: load and open for %d positions %s", name, N_TOK, err))
		goto out;
	for (int32_t k = 0; k < np; k++) {
		const int32_t at = pos[k];
		double d;

		if (at < done || at >= N_TOK ||
		    engine_eval(e, toks + done, at + 1 - done, 0, err,
		                sizeof(err)) != 0) {
			tap_ok(0, "%s: eval to position %d: %s", name, at, err);
			bad++;
			break;
		}
		done = at + 1;
		d = eu_nmse(engine_logits(e), want + (size_t)k * (size_t)nv,
		            nv);
		worst = d > worst || d != d ? d : worst;
		bad += !(d <= LONG_NMSE);
		tap_diag("%s: position %d: NMSE %.3g", name, at, d);
	}
	tap_ok(bad == 0,
	       "%s: logits at %d positions up to %d = llama.cpp's (worst NMSE "
	       "%.3g <= %g)",
	       name, np, pos[np - 1], worst, LONG_NMSE);
out:
	engine_close(e);
	model_free(m);
	gguf_close(f);
	free(pos);
	free(want);
}

int main(void)
{
	int32_t *toks = malloc(sizeof(int32_t) * N_TOK);

	if (toks == NULL)
		return 1;
	for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++) {
		long_tok(toks, 128);
		check_model(models[i], toks);
	}
	free(toks);
	return tap_done();
}

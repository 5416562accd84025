/*
 * bench_engine.c - prefill and greedy decode speed of the CPU engine on a
 * GGUF file, without the tokenizer or the CLI (a dev tool, built by `make
 * check`, never run by it): the same timing as `parley generate` prints,
 * on fixed token ids, so it also runs on random-weight models of a real
 * model's shape (parley dev-mkmodel) on machines without the model file.
 *
 * Usage: bench_engine MODEL [N_PROMPT [N_GEN [THREADS...]]]
 * (defaults 390 64 1 2). One line per thread count.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "engine.h"
#include "gguf.h"
#include "model.h"
#include "quant.h"

static double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Index of the largest of N logits. */
static int32_t bench_argmax(const float *l, int32_t n)
{
	int32_t best = 0;

	for (int32_t i = 1; i < n; i++)
		if (l[i] > l[best])
			best = i;
	return best;
}

/* One run: prefill N_PROMPT ids, then N_GEN - 1 greedy steps. */
static int bench_run(const struct model *m, int n_prompt, int n_gen, int nt)
{
	struct engine_params p = {0};
	struct engine *e;
	char err[256];
	int32_t *ids = malloc((size_t)n_prompt * sizeof(*ids)), tok;
	double t0, t1, t2;

	p.n_ctx = n_prompt + n_gen + 8;
	p.n_threads = nt;
	if (ids == NULL || engine_open(m, &p, &e, err, sizeof(err)) != 0) {
		fprintf(stderr, "bench_engine: %s\n", ids ? err : "no memory");
		free(ids);
		return -1;
	}
	for (int i = 0; i < n_prompt; i++) /* fixed, spread over the vocab */
		ids[i] = (int32_t)((i * 7919L + 13) % engine_n_vocab(e));
	t0 = bench_now();
	if (engine_eval(e, ids, n_prompt, 0, err, sizeof(err)) != 0)
		goto fail;
	t1 = bench_now();
	for (int i = 0; i < n_gen - 1; i++) {
		tok = bench_argmax(engine_logits(e), engine_n_vocab(e));
		if (engine_eval(e, &tok, 1, 0, err, sizeof(err)) != 0)
			goto fail;
	}
	t2 = bench_now();
	printf("prefill: %d tokens in %.3f s (%.1f tokens/s); decode: %d "
	       "tokens in %.3f s (%.1f tokens/s); %d threads%s\n",
	       n_prompt, t1 - t0, n_prompt / (t1 - t0), n_gen - 1, t2 - t1,
	       (n_gen - 1) / (t2 - t1), nt,
	       quant_simd_active() ? "" : " (portable kernels)");
	engine_close(e);
	free(ids);
	return 0;
fail:
	fprintf(stderr, "bench_engine: %s\n", err);
	engine_close(e);
	free(ids);
	return -1;
}

int main(int argc, char **argv)
{
	struct gguf_file *f;
	struct model *m;
	char err[256];
	int n_prompt = argc > 2 ? atoi(argv[2]) : 390;
	int n_gen = argc > 3 ? atoi(argv[3]) : 64;
	int rc = 0;

	if (argc < 2 || n_prompt < 1 || n_gen < 1) {
		fprintf(stderr, "usage: bench_engine MODEL [N_PROMPT [N_GEN "
		                "[THREADS...]]]\n");
		return 2;
	}
	f = gguf_open(argv[1], err, sizeof(err));
	if (f == NULL || model_load(f, &m, err, sizeof(err)) != 0) {
		fprintf(stderr, "bench_engine: %s\n", err);
		return 1;
	}
	if (argc > 4)
		for (int i = 4; i < argc && rc == 0; i++)
			rc = bench_run(m, n_prompt, n_gen, atoi(argv[i]));
	else
		for (int nt = 1; nt <= 2 && rc == 0; nt++)
			rc = bench_run(m, n_prompt, n_gen, nt);
	model_free(m);
	gguf_close(f);
	return rc ? 1 : 0;
}

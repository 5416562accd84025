/*
 * t_cuda_select.c - the select step on the GPU (cuda/cuda_select.cu)
 * against the host reference (engine_select_row): the same ids, in the
 * same order, with the same penalised and raw logits bit for bit, and the
 * log-sum-exp and entropy to double rounding; garbage logits reported as
 * the reference reports them; and the CUDA engine's engine_select against
 * the reference over its own logits read back. Skips without a device.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_select.h"
#include "engine_backend.h"
#include "engine_util.h"
#include "gguf.h"
#include "model.h"
#include "select_util.h"
#include "tap.h"

/* Whether the passes launch as the engine launches them on this GPU:
   with programmatic dependent launch from compute capability 9.0. */
static int g_pdl;

static int close_rel(double a, double b, double tol)
{
	return fabs(a - b) <= tol * (1.0 + fabs(b));
}

/* Exact equality of two selections (sums to TOL). */
static int same_selection(const struct engine_selection *a,
                          const struct engine_selection *b, double tol)
{
	if (a->k != b->k || a->n_raw != b->n_raw)
		return 0;
	for (int32_t i = 0; i < a->k; i++)
		if (a->id[i] != b->id[i] || a->logit[i] != b->logit[i] ||
		    a->raw_logit[i] != b->raw_logit[i])
			return 0;
	for (int32_t i = 0; i < a->n_raw; i++)
		if (a->raw_id[i] != b->raw_id[i] ||
		    a->raw_top[i] != b->raw_top[i])
			return 0;
	return close_rel(a->raw_lse, b->raw_lse, tol) &&
	       close_rel(a->raw_entropy, b->raw_entropy, tol) &&
	       close_rel(a->lse, b->lse, tol);
}

/*
 * Rows the device's tiles (cuda_select.cu: 2048 entries, the last one
 * short) must get right beside the random ones: REP 14, one value
 * everywhere, k = n_raw = ENGINE_SELECT_MAX (ties across every tile, the
 * lowest ids win); 15, -inf but every 3001st entry (more wanted than a tile
 * has finite entries); 16, a ramp (the whole answer in the last tiles,
 * more wanted than the last tile holds). Returns 0 for other reps.
 */
static void special_row(float *row, int32_t n, int rep,
                        struct engine_select_req *q)
{
	if (rep < 14)
		return;
	for (int32_t i = 0; i < n; i++)
		row[i] = rep == 14 ? 1.5f
		         : rep == 15
		             ? (i % 3001 == 0 ? rndf(-3.0f, 3.0f) : -INFINITY)
		             : (float)(i / 3) * 0.001f;
	q->k = rep == 15 ? 300 : rep == 16 ? 2100 : ENGINE_SELECT_MAX;
	q->n_raw = rep == 16 ? 2049 : ENGINE_SELECT_MAX;
	if (rep == 14)
		q->presence_penalty = 0.5f;
}

/*
 * Diagnostic only (no check): the device time of one select (k 40, no
 * penalties) over a row of CS's vocabulary, from events around the call.
 */
static void time_select(struct cuda_select *cs, cudaStream_t st,
                        const float *d_row, struct engine_select_buf *dev)
{
	struct engine_select_req q = {.k = 40, .repeat_penalty = 1.0f};
	cudaEvent_t a, b;
	char err[256];
	float ms = 0.0f;

	cudaEventCreate(&a);
	cudaEventCreate(&b);
	cuda_select_run(cs, st, g_pdl, d_row, &q, dev, err,
	                sizeof(err)); /* warm */
	cudaEventRecord(a, st);
	for (int i = 0; i < 50; i++)
		cuda_select_run(cs, st, g_pdl, d_row, &q, dev, err,
		                sizeof(err));
	cudaEventRecord(b, st);
	cudaEventSynchronize(b);
	cudaEventElapsedTime(&ms, a, b);
	tap_diag("select over %d logits, k 40: %.1f us a call (with the "
	         "host's wait for the mapped answer)",
	         cs->n_vocab, ms * 1e3f / 50.0f);
	cudaEventDestroy(a);
	cudaEventDestroy(b);
}

/* Random rows of several vocabulary sizes, with ties, -inf, penalties;
   then the special rows. */
static void check_rows(void)
{
	static const int32_t sizes[] = {1, 7, 1000, 2048, 2049, 49152, 151936};
	struct engine_select_buf ref, dev;
	char err[256];
	int bad = 0, cases = 0;
	cudaStream_t st;

	buf_alloc(&ref);
	buf_alloc(&dev);
	cudaStreamCreate(&st);
	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		int32_t n = sizes[si];
		float *row = malloc((size_t)n * sizeof(float)), *d_row = NULL;
		struct cuda_select cs;
		int32_t win[400];

		if (cudaMalloc((void **)&d_row, (size_t)n * sizeof(float)) !=
		        cudaSuccess ||
		    cuda_select_init(&cs, n, err, sizeof(err)) != 0) {
			tap_ok(0, "device buffers for n %d: %s", n, err);
			free(row);
			continue;
		}
		for (int rep = 0; rep < 17; rep++) {
			struct engine_select_req q = {0};

			make_row(row, n, rep & 1, rep % 3 == 2 ? 9 : 0);
			if (rep % 3 == 2)
				row[rnd() % (uint32_t)n] = 2.0f;
			q.k = rep == 5 ? ENGINE_SELECT_MAX
			               : 1 + (int32_t)(rnd() % 300);
			q.n_raw = rep == 6 ? ENGINE_SELECT_MAX
			                   : (int32_t)(rnd() % 40);
			q.n_recent = rep % 4 == 0 ? 0 : (int32_t)(rnd() % 400);
			for (int32_t i = 0; i < q.n_recent; i++)
				win[i] = (int32_t)(rnd() % (uint32_t)(n + 3)) -
				         (i % 17 == 0 ? n + 1 : 0);
			q.recent = win;
			q.repeat_penalty = rep % 2 ? 1.3f : 1.0f;
			q.frequency_penalty = rep % 5 == 1 ? 0.2f : 0.0f;
			q.presence_penalty = rep % 3 == 1 ? 0.5f : 0.0f;
			special_row(row, n, rep, &q);
			cudaMemcpy(d_row, row, (size_t)n * sizeof(float),
			           cudaMemcpyHostToDevice);
			cases++;
			if (engine_select_row(row, n, &q, &ref, err,
			                      sizeof(err)) != 0 ||
			    cuda_select_run(&cs, st, g_pdl, d_row, &q, &dev,
			                    err, sizeof(err)) != 0) {
				tap_diag("n %d rep %d: %s", n, rep, err);
				bad++;
				continue;
			}
			if (!same_selection(&dev.out, &ref.out, 1e-9)) {
				tap_diag("n %d rep %d k %d n_raw %d window %d: "
				         "device differs (first id %d vs %d, "
				         "lse %.17g vs %.17g)",
				         n, rep, q.k, q.n_raw, q.n_recent,
				         dev.out.id[0], ref.out.id[0],
				         dev.out.raw_lse, ref.out.raw_lse);
				bad++;
			}
		}
		/* garbage: the reference's messages */
		if (n >= 50) {
			struct engine_select_req q = {.k = 3,
			                              .repeat_penalty = 1.0f};

			make_row(row, n, 0, 0);
			row[40] = INFINITY;
			row[17] = NAN;
			cudaMemcpy(d_row, row, (size_t)n * sizeof(float),
			           cudaMemcpyHostToDevice);
			err[0] = '\0';
			cases++;
			if (cuda_select_run(&cs, st, g_pdl, d_row, &q, &dev,
			                    err, sizeof(err)) == 0 ||
			    strcmp(err, "logit of token 17 is NaN") != 0) {
				tap_diag("n %d: NaN at 17 gave \"%s\"", n, err);
				bad++;
			}
			/* the lowest bad index over several tiles */
			if (n > 5000) {
				make_row(row, n, 0, 0);
				row[n - 1] = NAN;
				row[4500] = NAN;
				row[2100] = INFINITY;
				cudaMemcpy(d_row, row,
				           (size_t)n * sizeof(float),
				           cudaMemcpyHostToDevice);
				cases++;
				if (cuda_select_run(&cs, st, g_pdl, d_row, &q,
				                    &dev, err,
				                    sizeof(err)) == 0 ||
				    strcmp(err,
				           "logit of token 2100 is +inf") !=
				        0) {
					tap_diag(
					    "n %d: +inf at 2100 gave \"%s\"", n,
					    err);
					bad++;
				}
			}
			for (int32_t i = 0; i < n; i++)
				row[i] = -INFINITY;
			cudaMemcpy(d_row, row, (size_t)n * sizeof(float),
			           cudaMemcpyHostToDevice);
			cases++;
			if (cuda_select_run(&cs, st, g_pdl, d_row, &q, &dev,
			                    err, sizeof(err)) == 0 ||
			    strstr(err, "-inf") == NULL) {
				tap_diag("n %d: all -inf gave \"%s\"", n, err);
				bad++;
			}
		}
		if (n == 151936) {
			make_row(row, n, 0, 0);
			cudaMemcpy(d_row, row, (size_t)n * sizeof(float),
			           cudaMemcpyHostToDevice);
			time_select(&cs, st, d_row, &dev);
		}
		cuda_select_free(&cs);
		cudaFree(d_row);
		free(row);
	}
	tap_ok(bad == 0,
	       "device select = reference bit for bit in %d cases (vocab up "
	       "to 151936, k up to %d, ties, -inf, penalties, ties across "
	       "tiles, sparse finite, ramp; NaN/+inf/all -inf errors)",
	       cases, ENGINE_SELECT_MAX);
	cudaStreamDestroy(st);
	buf_free(&ref);
	buf_free(&dev);
}

/* The CUDA engine: engine_select = the reference over its logits. */
static void check_engine(void)
{
	char path[1024], err[512];
	struct gguf_file *f;
	struct model *m = NULL;
	struct engine *e = NULL;
	struct engine_params p = {0};
	struct engine_select_buf ref;
	int32_t toks[12];
	const struct engine_selection *s;
	const float *l;

	eu_data_path("qwen2_q8_0", ".gguf", path, sizeof(path));
	f = gguf_open(path, err, sizeof(err));
	if (f == NULL || model_load(f, &m, err, sizeof(err)) != 0) {
		tap_ok(0, "open the qwen2_q8_0 test model: %s", err);
		return;
	}
	p.backend = "cuda";
	p.n_ctx = 64;
	if (engine_open(m, &p, &e, err, sizeof(err)) != 0) {
		tap_ok(0, "cuda engine_open: %s", err);
		goto out;
	}
	tap_ok(engine_device_name(e) != NULL &&
	           strlen(engine_device_name(e)) > 0,
	       "cuda engine names its device: %s",
	       engine_device_name(e) ? engine_device_name(e) : "(none)");
	for (int i = 0; i < 12; i++)
		toks[i] = (int32_t)(rnd() % (uint32_t)m->cfg.n_vocab);
	if (engine_eval(e, toks, 12, 0, err, sizeof(err)) != 0) {
		tap_ok(0, "eval: %s", err);
		goto out;
	}
	{
		struct engine_select_req q = {.k = 9,
		                              .n_raw = 5,
		                              .recent = toks,
		                              .n_recent = 12,
		                              .repeat_penalty = 1.2f,
		                              .frequency_penalty = 0.1f};

		s = engine_select(e, &q, err, sizeof(err));
		tap_ok(s != NULL, "cuda engine_select: %s", s ? "ok" : err);
		l = engine_logits(e);
		buf_alloc(&ref);
		tap_ok(s != NULL && l != NULL &&
		           engine_select_row(l, m->cfg.n_vocab, &q, &ref, err,
		                             sizeof(err)) == 0 &&
		           same_selection(s, &ref.out, 1e-9),
		       "cuda engine_select = reference over its own logits");
		buf_free(&ref);
	}
out:
	engine_close(e);
	model_free(m);
	gguf_close(f);
}

/* The device bandwidth measurement gives a plausible figure. */
static void check_bandwidth(void)
{
	double bw = 0;
	char err[256] = "";
	int rc = cuda_read_bandwidth(&bw, err, sizeof(err));

	tap_ok(rc == 0 && bw > 1e10,
	       "device read bandwidth measured: %.0f GB/s %s", bw / 1e9, err);
}

int main(void)
{
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
		printf("1..0 # SKIP no CUDA device\n");
		return 0;
	}
	{
		int major = 0;

		cudaDeviceGetAttribute(&major,
		                       cudaDevAttrComputeCapabilityMajor, 0);
		g_pdl = major >= 9;
	}
	check_rows();
	check_engine();
	check_bandwidth();
	return tap_done();
}

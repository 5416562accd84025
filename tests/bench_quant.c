/*
 * bench_quant.c - throughput of quant_dot (a tool, not a test).
 *
 * For each type: a matrix of random blocks (sane float16 scales), one
 * activation vector, repeated mat-vec products (quant_dot over every row),
 * single thread. Prints GB/s of weight bytes read, for a matrix that fits
 * in cache and one that streams from memory, with the AVX2 and the
 * portable kernels. Usage: tests/bench_quant [TYPE...] (default Q4_1 Q8_0
 * Q4_K Q6_K; any computable type, e.g. IQ2_XXS IQ4_XS MXFP4 TQ2_0), or
 * tests/bench_quant all.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "f16.h"
#include "quant.h"

/* CPU seconds of this thread (the dev machine is shared). */
static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Byte offsets of the half fields of a block of TYPE (-1 ends). */
static const int *half_fields(uint32_t t)
{
	static const int d0[] = {0, -1}, d02[] = {0, 2, -1},
	                 q2k[] = {80, 82, -1}, q3k[] = {108, -1},
	                 q6k[] = {208, -1}, tq1[] = {52, -1}, tq2[] = {64, -1},
	                 none[] = {-1};

	switch (t) {
	case QTYPE_Q4_1:
	case QTYPE_Q5_1:
	case QTYPE_Q4_K:
	case QTYPE_Q5_K:
		return d02;
	case QTYPE_Q2_K:
		return q2k;
	case QTYPE_Q3_K:
		return q3k;
	case QTYPE_Q6_K:
		return q6k;
	case QTYPE_TQ1_0:
		return tq1;
	case QTYPE_TQ2_0:
		return tq2;
	case QTYPE_Q4_0:
	case QTYPE_Q5_0:
	case QTYPE_Q8_0:
	case QTYPE_IQ2_XXS:
	case QTYPE_IQ2_XS:
	case QTYPE_IQ2_S:
	case QTYPE_IQ3_XXS:
	case QTYPE_IQ3_S:
	case QTYPE_IQ1_S:
	case QTYPE_IQ4_NL:
	case QTYPE_IQ4_XS:
		return d0;
	default:
		return none;
	}
}

/* Scales that are not a plain half (MXFP4's exponent, IQ1_M's half spread
 * over four nibbles) set near 0.01 too: random ones would be subnormal or
 * infinite, whose arithmetic runs at other speeds. */
static void set_other_scales(uint32_t t, uint8_t *b)
{
	const uint16_t h = f32_to_f16(0.01f);

	if (t == QTYPE_MXFP4)
		b[0] = 120; /* 2^-8 */
	if (t == QTYPE_IQ1_M)
		for (int k = 0; k < 4; k++)
			b[49 + 2 * k] = (uint8_t)((b[49 + 2 * k] & 0x0F) |
			                          ((h >> (4 * k)) & 0xF) << 4);
}

static volatile float bench_sink; /* where results go, so they are computed */

/* Time mat-vecs of ROWS x N of TYPE; returns GB/s of weights. */
static double bench(uint32_t type, int64_t rows, int64_t n, double secs)
{
	const size_t rs = quant_row_size(type, n);
	const struct qtype_info *qi = qtype_get(type);
	uint8_t *w = malloc(rs * rows);
	float *x = malloc(n * sizeof *x);
	void *vec = malloc(quant_vec_size(type, n));
	float sink = 0;
	double t0, t;
	int reps = 0;

	for (size_t i = 0; i < rs * rows; i++)
		w[i] = (uint8_t)(rand() >> 7);
	if (qi->blck_size == 1) {
		for (size_t i = 0; i < rs * rows; i += qi->type_size)
			if (type == QTYPE_F32) {
				float v =
				    (float)((double)rand() / RAND_MAX - 0.5);
				memcpy(w + i, &v, 4);
			} else {
				w[i + 1] =
				    0x3c; /* around 1.0 in half and bfloat16 */
			}
	}
	for (size_t b = 0; b < rs * rows; b += qi->type_size)
		for (const int *o = half_fields(type); *o >= 0; o++) {
			uint16_t h = f32_to_f16(0.01f);
			memcpy(w + b + *o, &h, 2);
		}
	for (size_t b = 0; b < rs * rows; b += qi->type_size)
		set_other_scales(type, w + b);
	for (int64_t i = 0; i < n; i++)
		x[i] = (float)((double)rand() / RAND_MAX - 0.5);
	quant_vec_prepare(type, x, n, vec);
	t0 = now();
	do {
		for (int64_t r = 0; r < rows; r++)
			sink += quant_dot(type, w + r * rs, vec, n);
		reps++;
		t = now() - t0;
	} while (t < secs);
	bench_sink = sink; /* keep the dots */
	free(w);
	free(x);
	free(vec);
	return (double)rs * rows * reps / t / 1e9;
}

int main(int argc, char **argv)
{
	static const char *defaults[] = {"Q4_1", "Q8_0", "Q4_K", "Q6_K"};
	const char *all[QTYPE_COUNT];
	const char **names = argc > 1 ? (const char **)argv + 1 : defaults;
	int count = argc > 1 ? argc - 1 : 4;

	if (argc == 2 && strcmp(argv[1], "all") == 0) {
		count = 0;
		for (uint32_t t = 0; t < QTYPE_COUNT; t++)
			if (quant_can_compute(t))
				all[count++] = qtype_name(t);
		names = all;
	}

	printf(
	    "quant_dot, one thread; GB/s of weight bytes (AVX2 kernels %s)\n",
	    quant_simd_active() ? "available" : "not available");
	printf("%-7s %14s %14s %14s %14s\n", "type", "cache avx2", "cache C",
	       "memory avx2", "memory C");
	for (int i = 0; i < count; i++) {
		uint32_t t = 0;

		while (t < QTYPE_COUNT && strcmp(qtype_name(t), names[i]) != 0)
			t++;
		if (t == QTYPE_COUNT || !quant_can_compute(t)) {
			fprintf(stderr, "bench_quant: unknown type %s\n",
			        names[i]);
			return 1;
		}
		double r[4];
		for (int k = 0; k < 4; k++) {
			quant_set_simd(k % 2 == 0);
			/* cache: 256 rows x 1024 (<= 300 KB); memory: 16384 x
			 * 2048 */
			r[k] = k < 2 ? bench(t, 32, 8192, 0.4)
			             : bench(t, 16384, 2048, 0.8);
		}
		printf("%-7s %14.2f %14.2f %14.2f %14.2f\n", names[i], r[0],
		       r[1], r[2], r[3]);
	}
	return 0;
}

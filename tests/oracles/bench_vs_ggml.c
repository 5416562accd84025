/*
 * bench_vs_ggml.c - quant_dot against ggml's CPU vec_dot kernels, same data,
 * same machine, one thread (a development tool, like the oracles: it needs
 * the libggml-cpu.so that PyPI llama-cpp-python builds; not part of make).
 *
 * Build and run from the repository root:
 *   gcc -std=c11 -D_GNU_SOURCE -O2 -Isrc tests/oracles/bench_vs_ggml.c \
 *       src/quant.c src/qtype.c -ldl -lm -o /tmp/bench_vs_ggml
 *   /tmp/bench_vs_ggml "$(python3 -c 'import llama_cpp, os;
 *       print(os.path.dirname(llama_cpp.__file__))')/lib/libggml-cpu.so"
 * Prints GB/s of weight bytes: "cache" = 32 rows x 8192 (fits in L2),
 * "mem" = 16384 rows x 2048. Activations are quantized by each library's
 * own routine first (not timed). CPU time of this thread.
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "f16.h"
#include "quant.h"

/* ggml_vec_dot_* and quantize_row_* as exported by libggml-cpu. */
typedef void (*vec_dot_fn)(int n, float *s, size_t bs, const void *x, size_t bx,
                           const void *y, size_t by, int nrc);
typedef void (*quantize_fn)(const float *x, void *y, int64_t k);

/* CPU seconds of this thread. */
static double cpu_seconds(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static const struct {
	const char *name;
	uint32_t type;
	const char *vec_dot, *quantize;
	size_t act_block_bytes; /* ggml's activation block size in bytes */
	int halves[3];          /* byte offsets of float16 fields, -1 ends */
} cases[] = {
    {"Q4_1",
     QTYPE_Q4_1,
     "ggml_vec_dot_q4_1_q8_1",
     "quantize_row_q8_1",
     36,
     {0, 2, -1}},
    {"Q8_0",
     QTYPE_Q8_0,
     "ggml_vec_dot_q8_0_q8_0",
     "quantize_row_q8_0",
     34,
     {0, -1}},
    {"Q5_0",
     QTYPE_Q5_0,
     "ggml_vec_dot_q5_0_q8_0",
     "quantize_row_q8_0",
     34,
     {0, -1}},
    {"Q4_K",
     QTYPE_Q4_K,
     "ggml_vec_dot_q4_K_q8_K",
     "quantize_row_q8_K",
     292,
     {0, 2, -1}},
    {"Q6_K",
     QTYPE_Q6_K,
     "ggml_vec_dot_q6_K_q8_K",
     "quantize_row_q8_K",
     292,
     {208, -1}},
};

int main(int argc, char **argv)
{
	void *lib = argc == 2 ? dlopen(argv[1], RTLD_NOW) : NULL;
	void (*init)(void);

	if (lib == NULL) {
		fprintf(stderr,
		        "usage: bench_vs_ggml PATH/libggml-cpu.so (%s)\n",
		        argc == 2 ? dlerror() : "no path");
		return 1;
	}
	*(void **)&init = dlsym(lib, "ggml_cpu_init");
	if (init != NULL)
		init();
	printf("GB/s of weights, one thread\n%-5s %12s %12s %12s %12s\n",
	       "type", "ggml cache", "parley cache", "ggml mem", "parley mem");
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		const struct qtype_info *qi = qtype_get(cases[c].type);
		vec_dot_fn vd;
		quantize_fn qr;
		double res[4];

		*(void **)&vd = dlsym(lib, cases[c].vec_dot);
		*(void **)&qr = dlsym(lib, cases[c].quantize);
		if (vd == NULL || qr == NULL) {
			fprintf(stderr, "bench_vs_ggml: %s or %s missing\n",
			        cases[c].vec_dot, cases[c].quantize);
			return 1;
		}
		for (int m = 0; m < 2; m++) {
			const int64_t n = m ? 2048 : 8192,
			              rows = m ? 16384 : 32;
			const size_t rs = quant_row_size(cases[c].type, n);
			uint8_t *w = malloc(rs * rows);
			float *x = malloc(n * sizeof *x);
			void *gv = malloc(
			    n / qi->blck_size * cases[c].act_block_bytes + 64);
			void *pv = malloc(quant_vec_size(cases[c].type, n));

			for (size_t i = 0; i < rs * rows; i++)
				w[i] = (uint8_t)(rand() >> 7);
			for (size_t b = 0; b < rs * rows; b += qi->type_size)
				for (const int *o = cases[c].halves; *o >= 0;
				     o++) {
					const uint16_t h = f32_to_f16(0.01f);
					memcpy(w + b + *o, &h, 2);
				}
			for (int64_t i = 0; i < n; i++)
				x[i] = (float)((double)rand() / RAND_MAX - 0.5);
			qr(x, gv, n);
			quant_vec_prepare(cases[c].type, x, n, pv);
			for (int who = 0; who < 2; who++) {
				const double t0 = cpu_seconds();
				double t;
				float s = 0, acc = 0;
				int reps = 0;

				do {
					for (int64_t r = 0; r < rows; r++) {
						if (who == 0) {
							vd((int)n, &s, 0,
							   w + r * rs, 0, gv, 0,
							   1);
							acc += s;
						} else {
							acc += quant_dot(
							    cases[c].type,
							    w + r * rs, pv, n);
						}
					}
					reps++;
					t = cpu_seconds() - t0;
				} while (t < 0.5);
				res[m * 2 + who] =
				    (double)rs * rows * reps / t / 1e9;
				if (acc == 1234.5f) /* keep the results alive */
					printf(" ");
			}
			free(w);
			free(x);
			free(gv);
			free(pv);
		}
		printf("%-5s %12.2f %12.2f %12.2f %12.2f\n", cases[c].name,
		       res[0], res[1], res[2], res[3]);
	}
	return 0;
}

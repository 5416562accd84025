/*
 * engine_util.h - helpers shared by the engine tests: locating the test
 * model and the golden data, reading token lists and raw float32 files.
 * All functions are static: each test includes this header once.
 */
#ifndef PARLEY_ENGINE_UTIL_H
#define PARLEY_ENGINE_UTIL_H

#include "gguf.h"
#include "model.h"
#include "tap.h"
#include "testenv.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Path of NAME + EXT under $top_srcdir/tests/data/engine. */
/* Write and load a random-weight model: tests/parley-mkmodel (under
 * $top_builddir) ARGS -o PATH, then *F and *M (NULL on failure, said).
 * 0 or -1. */
static inline int eu_mkmodel(const char *args, const char *path,
                             struct gguf_file **f, struct model **m)
{
	const char *bd = getenv("top_builddir");
	char cmd[2048], err[512];

	snprintf(cmd, sizeof(cmd),
	         "%s/tests/parley-mkmodel %s -o %s >/dev/null", bd ? bd : ".",
	         args, path);
	*f = NULL;
	*m = NULL;
	if (system(cmd) != 0)
		return -1;
	*f = gguf_open(path, err, sizeof(err));
	if (*f == NULL || model_load(*f, m, err, sizeof(err)) != 0) {
		tap_diag("load %s: %s", path, err);
		return -1;
	}
	return 0;
}

static inline void eu_data_path(const char *name, const char *ext, char *out,
                                size_t len)
{
	const char *top = getenv("top_srcdir");

	snprintf(out, len, "%.512s/tests/data/engine/%.200s%.16s",
	         top ? top : ".", name, ext);
}

/* The SmolLM2 test model path (PARLEY_TEST_MODEL or the XDG cache). */
static inline void eu_model_path(char *out, size_t len)
{
	testenv_model(out, len);
}

/* Read N float32 from PATH into a new array (caller frees), or NULL. */
static inline float *eu_read_f32(const char *path, size_t n)
{
	FILE *f = fopen(path, "rb");
	float *p = f ? malloc(n * sizeof(float)) : NULL;

	if (p && fread(p, sizeof(float), n, f) != n) {
		free(p);
		p = NULL;
	}
	if (f)
		fclose(f);
	return p;
}

/* Parse "COUNT id id ..." from S into a new array; *n gets COUNT. */
static inline int32_t *eu_parse_ids(const char *s, int32_t *n)
{
	char *end;
	long cnt = strtol(s, &end, 10);
	int32_t *ids;

	if (end == s || cnt < 0 || cnt > 1000000)
		return NULL;
	ids = malloc((size_t)(cnt ? cnt : 1) * sizeof(*ids));
	for (long i = 0; ids && i < cnt; i++) {
		s = end;
		ids[i] = (int32_t)strtol(s, &end, 10);
		if (end == s) {
			free(ids);
			return NULL;
		}
	}
	*n = (int32_t)cnt;
	return ids;
}

/* Index of the largest logit (lowest index on ties). */
static inline int32_t eu_argmax(const float *x, int32_t n)
{
	int32_t best = 0;

	for (int32_t i = 1; i < n; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

/* mse(a, b) / mse(b, 0) over N values (b the reference); +inf when b is
 * all zeros. */
static inline double eu_nmse(const float *a, const float *b, int64_t n)
{
	double num = 0, den = 0;

	for (int64_t i = 0; i < n; i++) {
		double d = (double)a[i] - b[i];

		num += d * d;
		den += (double)b[i] * b[i];
	}
	return den > 0 ? num / den : INFINITY;
}

#endif /* PARLEY_ENGINE_UTIL_H */

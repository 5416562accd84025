/*
 * t_gguf_write.c - the GGUF writer's rows made by several threads
 * (gguf_writer_set_threads): the file is byte for byte the one a single
 * thread writes, for tensors with more rows than a chunk, fewer rows than
 * threads, one row larger than a chunk, and a borrowed buffer between
 * them; the reader finds every row where it belongs; a fill that fails
 * in one thread's share stops the write with a message naming the tensor,
 * and no file is left.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf.h"
#include "gguf_write.h"
#include "qtype.h"
#include "tap.h"

/* A FILL tensor: bytes from (seed, row, index); FAIL_ROW fails (or -1). */
struct fill_ctx {
	uint64_t seed;
	int64_t fail_row;
};

static unsigned char byte_at(uint64_t seed, uint64_t row, size_t i)
{
	uint64_t z = seed ^ (row * 0x9E3779B97F4A7C15ull) ^ (i * 0xBF58476Dull);

	z ^= z >> 29;
	z *= 0x94D049BB133111EBull;
	return (unsigned char)(z >> 40);
}

static int fill(void *ctx, uint64_t row, void *buf, size_t n)
{
	const struct fill_ctx *c = ctx;
	unsigned char *b = buf;

	if ((int64_t)row == c->fail_row)
		return -1;
	for (size_t i = 0; i < n; i++)
		b[i] = byte_at(c->seed, row, i);
	return 0;
}

/* The writer never looks inside rows and the reader checks only sizes,
 * so FILL's bytes need not be valid Q8_0 blocks. */
static struct fill_ctx big = {11, -1}, few = {22, -1}, wide = {33, -1};
static unsigned char borrowed[3 * 40];

/* Write the test model with N_THREADS to PATH; FAIL: BIG fails at a row
 * of its second chunk. Returns gguf_writer_write's result. */
static int write_model(const char *path, int n_threads, int64_t fail_row,
                       char *err, size_t errlen)
{
	struct gguf_writer *w = gguf_writer_new();
	/* 5,000 rows of 4,000 bytes: 4,194 a chunk, then 806 */
	const uint64_t ne_big[2] = {1000, 5000}, ne_few[2] = {64, 3},
	               ne_b[2] = {10, 3}, ne_wide[1] = {5000000};
	int rc;

	big.fail_row = fail_row;
	if (w == NULL)
		return -1;
	gguf_writer_set_str(w, "general.architecture", "test");
	gguf_writer_set_threads(w, n_threads);
	gguf_writer_add_tensor(w, "big", QTYPE_F32, 2, ne_big, NULL, fill,
	                       &big);
	gguf_writer_add_tensor(w, "borrowed", QTYPE_F32, 2, ne_b, borrowed,
	                       NULL, NULL);
	gguf_writer_add_tensor(w, "few", QTYPE_Q8_0, 2, ne_few, NULL, fill,
	                       &few);
	gguf_writer_add_tensor(w, "wide", QTYPE_F32, 1, ne_wide, NULL, fill,
	                       &wide);
	rc = gguf_writer_write(w, path, err, errlen);
	gguf_writer_free(w);
	return rc;
}

static unsigned char *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	unsigned char *p = NULL;
	long len;

	if (f == NULL)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) > 0 &&
	    fseek(f, 0, SEEK_SET) == 0 && (p = malloc((size_t)len)) != NULL &&
	    fread(p, 1, (size_t)len, f) != (size_t)len) {
		free(p);
		p = NULL;
	}
	if (p != NULL)
		*n = (size_t)len;
	fclose(f);
	return p;
}

/* Rows ROWS of tensor NAME in the file read by gguf_open equal FILL's. */
static int rows_ok(struct gguf_file *g, const char *name,
                   const struct fill_ctx *c, const uint64_t *rows, int n)
{
	const struct gguf_tensor *t = gguf_find_tensor(g, name);

	if (t == NULL)
		return 0;
	for (int k = 0; k < n; k++) {
		size_t rs = t->nbytes / (t->ne[1] ? t->ne[1] : 1);
		const unsigned char *r =
		    (const unsigned char *)t->data + rows[k] * rs;

		for (size_t i = 0; i < rs; i++)
			if (r[i] != byte_at(c->seed, rows[k], i))
				return 0;
	}
	return 1;
}

int main(void)
{
	char dir[] = "/tmp/t_gguf_write.XXXXXX", one[256], path[256];
	char err[512];
	const int threads[] = {2, 3, 5};
	unsigned char *ref = NULL;
	size_t n_ref = 0;

	for (size_t i = 0; i < sizeof(borrowed); i++)
		borrowed[i] = (unsigned char)(i * 7);
	if (mkdtemp(dir) == NULL) {
		printf("Bail out! mkdtemp\n");
		return 1;
	}
	snprintf(one, sizeof(one), "%s/one.gguf", dir);
	tap_ok(write_model(one, 1, -1, err, sizeof(err)) == 0,
	       "one thread writes the model: %s", err);
	ref = slurp(one, &n_ref);
	tap_ok(ref != NULL && n_ref > 40000000,
	       "its file read back (%zu bytes)", n_ref);
	{
		struct gguf_file *g = gguf_open(one, err, sizeof(err));
		const uint64_t big_rows[] = {0, 1, 4193, 4194, 4999},
		               few_rows[] = {0, 2}, wide_rows[] = {0};

		tap_ok(
		    g != NULL && rows_ok(g, "big", &big, big_rows, 5) &&
		        rows_ok(g, "few", &few, few_rows, 2) &&
		        rows_ok(g, "wide", &wide, wide_rows, 1),
		    "the reader finds the rows each side of a chunk boundary, "
		    "of a short tensor and of a row wider than a chunk: %s",
		    g ? "" : err);
		gguf_close(g);
	}
	for (size_t k = 0; k < sizeof(threads) / sizeof(threads[0]); k++) {
		unsigned char *p = NULL;
		size_t n = 0;

		snprintf(path, sizeof(path), "%s/t%d.gguf", dir, threads[k]);
		if (!tap_ok(write_model(path, threads[k], -1, err,
		                        sizeof(err)) == 0,
		            "%d threads write the model: %s", threads[k], err))
			continue;
		p = slurp(path, &n);
		tap_ok(p != NULL && ref != NULL && n == n_ref &&
		           memcmp(p, ref, n) == 0,
		       "%d threads: the file is byte for byte the one-thread "
		       "file",
		       threads[k]);
		free(p);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/fail.gguf", dir);
	err[0] = '\0';
	tap_ok(write_model(path, 3, 4500, err, sizeof(err)) != 0 &&
	           strstr(err, "producing tensor big failed") != NULL &&
	           strstr(err, path) != NULL,
	       "a fill failing in one thread's share stops the write, the "
	       "message names file and tensor: %s",
	       err);
	tap_ok(access(path, F_OK) != 0, "and no file is left behind");
	free(ref);
	unlink(one);
	rmdir(dir);
	return tap_done();
}

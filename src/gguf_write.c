/*
 * gguf_write.c - GGUF v3 writer (gguf_write.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "gguf_write.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qtype.h"
#include "threadpool.h"

/* Limits on what the writer accepts (hostile callers are not expected,
 * but a shape typo must not make it allocate or write terabytes). */
#define GGUF_WRITER_MAX_KEY     65535
#define GGUF_WRITER_MAX_TENSORS 1000000
/* Bytes of rows produced together by the threads (at least one row). */
#define GGUF_WRITER_CHUNK ((size_t)16 << 20)

/* One tensor to write. */
struct gguf_writer_tensor {
	char *name;                 /* owned */
	uint32_t type;              /* ggml type id */
	uint32_t n_dims;            /* 1..4 */
	uint64_t ne[GGUF_MAX_DIMS]; /* unused dims are 1 */
	size_t row_size;            /* bytes of ne[0] elements */
	uint64_t n_rows;            /* ne[1] * ne[2] * ne[3] */
	uint64_t offset;            /* in the data section, aligned */
	const void *data;           /* borrowed, or NULL */
	gguf_writer_fill_fn fill;   /* or a row producer */
	void *ctx;                  /* its argument */
};

struct gguf_writer {
	unsigned char *kv;  /* serialized key/values (owned) */
	size_t kv_len;      /* bytes used */
	size_t kv_cap;      /* bytes allocated */
	uint64_t n_kv;      /* pairs serialized */
	char **keys;        /* [n_kv] copies, to refuse duplicates */
	uint32_t alignment; /* general.alignment or 32 */
	struct gguf_writer_tensor *tensors; /* [n_tensors] (owned) */
	uint64_t n_tensors;
	uint64_t cap_tensors;
	int n_threads;   /* producing FILL rows (gguf_writer_set_threads) */
	char error[256]; /* first error, "" if none */
};

/* Record the first error; always returns -1. */
static int gw_fail(struct gguf_writer *w, const char *msg, const char *what)
{
	if (w->error[0] == '\0')
		snprintf(w->error, sizeof(w->error), "%.100s%s%.128s", msg,
		         what ? ": " : "", what ? what : "");
	return -1;
}

/* A new empty writer. */
struct gguf_writer *gguf_writer_new(void)
{
	struct gguf_writer *w = calloc(1, sizeof(*w));

	if (w != NULL) {
		w->alignment = GGUF_DEFAULT_ALIGNMENT;
		w->n_threads = 1;
	}
	return w;
}

/* See gguf_write.h. */
int gguf_writer_set_threads(struct gguf_writer *w, int n)
{
	if (w->error[0])
		return -1;
	w->n_threads = n > 0 ? n : threadpool_cpu_count();
	return 0;
}

/* Free the writer. */
void gguf_writer_free(struct gguf_writer *w)
{
	if (w == NULL)
		return;
	for (uint64_t i = 0; i < w->n_kv; i++)
		free(w->keys[i]);
	for (uint64_t i = 0; i < w->n_tensors; i++)
		free(w->tensors[i].name);
	free(w->keys);
	free(w->tensors);
	free(w->kv);
	free(w);
}

/* Append N bytes to the key/value buffer. */
static int gw_put(struct gguf_writer *w, const void *p, size_t n)
{
	if (w->kv_len + n > w->kv_cap) {
		size_t cap = w->kv_cap ? w->kv_cap : 4096;
		unsigned char *q;

		while (cap < w->kv_len + n) {
			if (cap > SIZE_MAX / 2)
				return gw_fail(w, "metadata too large", NULL);
			cap *= 2;
		}
		q = realloc(w->kv, cap);
		if (q == NULL)
			return gw_fail(w, "out of memory for metadata", NULL);
		w->kv = q;
		w->kv_cap = cap;
	}
	memcpy(w->kv + w->kv_len, p, n);
	w->kv_len += n;
	return 0;
}

/* Little-endian integers (the host is little-endian: x86-64, arm64). */
static int gw_u32(struct gguf_writer *w, uint32_t v)
{
	return gw_put(w, &v, 4);
}

static int gw_u64(struct gguf_writer *w, uint64_t v)
{
	return gw_put(w, &v, 8);
}

/* A GGUF string: u64 length, bytes. */
static int gw_str(struct gguf_writer *w, const char *s, uint64_t n)
{
	if (gw_u64(w, n))
		return -1;
	return n ? gw_put(w, s, (size_t)n) : 0;
}

/* Start a pair: refuse a duplicate key, write key and type. */
static int gw_key(struct gguf_writer *w, const char *key, enum gguf_type t)
{
	size_t n = strlen(key);
	char **keys;

	if (w->error[0])
		return -1;
	if (n == 0 || n > GGUF_WRITER_MAX_KEY)
		return gw_fail(w, "bad metadata key length", key);
	for (uint64_t i = 0; i < w->n_kv; i++)
		if (strcmp(w->keys[i], key) == 0)
			return gw_fail(w, "duplicate metadata key", key);
	keys = realloc(w->keys, (size_t)(w->n_kv + 1) * sizeof(*keys));
	if (keys == NULL)
		return gw_fail(w, "out of memory", key);
	w->keys = keys;
	w->keys[w->n_kv] = strdup(key);
	if (w->keys[w->n_kv] == NULL)
		return gw_fail(w, "out of memory", key);
	w->n_kv++;
	if (gw_str(w, key, n) || gw_u32(w, (uint32_t)t))
		return -1;
	return 0;
}

int gguf_writer_set_u32(struct gguf_writer *w, const char *key, uint32_t v)
{
	if (gw_key(w, key, GGUF_TYPE_UINT32))
		return -1;
	if (strcmp(key, "general.alignment") == 0) {
		if (v == 0 || (v & (v - 1)) != 0 || v > 65536)
			return gw_fail(w,
			               "general.alignment must be a power "
			               "of two <= 65536",
			               key);
		w->alignment = v;
	}
	return gw_u32(w, v);
}

int gguf_writer_set_i32(struct gguf_writer *w, const char *key, int32_t v)
{
	if (gw_key(w, key, GGUF_TYPE_INT32))
		return -1;
	return gw_put(w, &v, 4);
}

int gguf_writer_set_u64(struct gguf_writer *w, const char *key, uint64_t v)
{
	if (gw_key(w, key, GGUF_TYPE_UINT64))
		return -1;
	return gw_u64(w, v);
}

int gguf_writer_set_f32(struct gguf_writer *w, const char *key, float v)
{
	if (gw_key(w, key, GGUF_TYPE_FLOAT32))
		return -1;
	return gw_put(w, &v, 4);
}

int gguf_writer_set_bool(struct gguf_writer *w, const char *key, bool v)
{
	unsigned char b = v ? 1 : 0;

	if (gw_key(w, key, GGUF_TYPE_BOOL))
		return -1;
	return gw_put(w, &b, 1);
}

int gguf_writer_set_str(struct gguf_writer *w, const char *key, const char *v)
{
	if (gw_key(w, key, GGUF_TYPE_STRING))
		return -1;
	return gw_str(w, v, strlen(v));
}

int gguf_writer_set_arr(struct gguf_writer *w, const char *key,
                        enum gguf_type elem, const void *data, uint64_t n)
{
	size_t es = gguf_type_size(elem);

	if (gw_key(w, key, GGUF_TYPE_ARRAY))
		return -1;
	if (es == 0)
		return gw_fail(w, "array element type is not fixed-size", key);
	if (n > SIZE_MAX / es)
		return gw_fail(w, "array too large", key);
	if (gw_u32(w, (uint32_t)elem) || gw_u64(w, n))
		return -1;
	return n ? gw_put(w, data, (size_t)n * es) : 0;
}

int gguf_writer_set_arr_str(struct gguf_writer *w, const char *key,
                            const struct gguf_str *strs, uint64_t n)
{
	if (gw_key(w, key, GGUF_TYPE_ARRAY))
		return -1;
	if (gw_u32(w, GGUF_TYPE_STRING) || gw_u64(w, n))
		return -1;
	for (uint64_t i = 0; i < n; i++)
		if (gw_str(w, strs[i].ptr, strs[i].len))
			return -1;
	return 0;
}

/* Serialize the body of a value (after its type), recursively. */
static int gw_value(struct gguf_writer *w, const struct gguf_value *v,
                    int depth)
{
	size_t es;

	if (depth > GGUF_MAX_ARRAY_DEPTH)
		return gw_fail(w, "arrays nested too deeply", NULL);
	switch (v->type) {
	case GGUF_TYPE_STRING:
		return gw_str(w, v->v.str.ptr, v->v.str.len);
	case GGUF_TYPE_ARRAY:
		if (gw_u32(w, (uint32_t)v->v.arr.elem_type) ||
		    gw_u64(w, v->v.arr.n))
			return -1;
		if (v->v.arr.elem_type == GGUF_TYPE_STRING) {
			for (uint64_t i = 0; i < v->v.arr.n; i++)
				if (gw_str(w, v->v.arr.strs[i].ptr,
				           v->v.arr.strs[i].len))
					return -1;
			return 0;
		}
		if (v->v.arr.elem_type == GGUF_TYPE_ARRAY) {
			for (uint64_t i = 0; i < v->v.arr.n; i++)
				if (gw_value(w, &v->v.arr.elems[i], depth + 1))
					return -1;
			return 0;
		}
		es = gguf_type_size(v->v.arr.elem_type);
		if (es == 0 || v->v.arr.n > SIZE_MAX / es)
			return gw_fail(w, "bad array", NULL);
		return v->v.arr.n
		           ? gw_put(w, v->v.arr.raw, (size_t)v->v.arr.n * es)
		           : 0;
	case GGUF_TYPE_BOOL: {
		unsigned char b = v->v.b ? 1 : 0;

		return gw_put(w, &b, 1);
	}
	case GGUF_TYPE_FLOAT32: {
		float f = (float)v->v.f64;

		return gw_put(w, &f, 4);
	}
	case GGUF_TYPE_FLOAT64:
		return gw_put(w, &v->v.f64, 8);
	case GGUF_TYPE_UINT8:
	case GGUF_TYPE_INT8:
	case GGUF_TYPE_UINT16:
	case GGUF_TYPE_INT16:
	case GGUF_TYPE_UINT32:
	case GGUF_TYPE_INT32:
	case GGUF_TYPE_UINT64:
	case GGUF_TYPE_INT64:
		/* two's complement little-endian: the low bytes of u64 */
		return gw_put(w, &v->v.u64, gguf_type_size(v->type));
	default:
		return gw_fail(w, "unknown metadata type", NULL);
	}
}

/* Copy a key/value read by gguf.h. */
int gguf_writer_copy_kv(struct gguf_writer *w, const struct gguf_kv *kv)
{
	if (gw_key(w, kv->key, kv->val.type))
		return -1;
	if (strcmp(kv->key, "general.alignment") == 0 &&
	    kv->val.type == GGUF_TYPE_UINT32) {
		uint64_t a = kv->val.v.u64;

		if (a == 0 || (a & (a - 1)) != 0 || a > 65536)
			return gw_fail(w, "bad general.alignment", kv->key);
		w->alignment = (uint32_t)a;
	}
	return gw_value(w, &kv->val, 0);
}

/* Bytes of one row of TYPE, or 0. */
size_t gguf_writer_row_size(uint32_t type, uint64_t ne0)
{
	const struct qtype_info *q = qtype_get(type);

	if (q == NULL || q->blck_size == 0 || ne0 == 0 ||
	    ne0 % q->blck_size != 0)
		return 0;
	if (ne0 / q->blck_size > SIZE_MAX / q->type_size)
		return 0;
	return (size_t)(ne0 / q->blck_size) * q->type_size;
}

/* Add a tensor description. */
int gguf_writer_add_tensor(struct gguf_writer *w, const char *name,
                           uint32_t type, uint32_t n_dims, const uint64_t *ne,
                           const void *data, gguf_writer_fill_fn fill,
                           void *ctx)
{
	struct gguf_writer_tensor *t;
	uint64_t rows = 1;

	if (w->error[0])
		return -1;
	if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
		return gw_fail(w, "tensor must have 1..4 dimensions", name);
	if ((data == NULL) == (fill == NULL))
		return gw_fail(w, "tensor needs exactly one of data and fill",
		               name);
	if (w->n_tensors >= GGUF_WRITER_MAX_TENSORS)
		return gw_fail(w, "too many tensors", name);
	for (uint64_t i = 0; i < w->n_tensors; i++)
		if (strcmp(w->tensors[i].name, name) == 0)
			return gw_fail(w, "duplicate tensor name", name);
	for (uint32_t d = 1; d < n_dims; d++) {
		if (ne[d] == 0 || rows > UINT64_MAX / ne[d])
			return gw_fail(w, "bad tensor dimension", name);
		rows *= ne[d];
	}
	if (w->n_tensors == w->cap_tensors) {
		uint64_t cap = w->cap_tensors ? 2 * w->cap_tensors : 64;
		void *p = realloc(w->tensors, (size_t)cap * sizeof(*t));

		if (p == NULL)
			return gw_fail(w, "out of memory", name);
		w->tensors = p;
		w->cap_tensors = cap;
	}
	t = &w->tensors[w->n_tensors];
	memset(t, 0, sizeof(*t));
	t->row_size = gguf_writer_row_size(type, ne[0]);
	if (t->row_size == 0)
		return gw_fail(w,
		               "ne[0] is not a whole number of blocks of "
		               "the tensor's type",
		               name);
	if (rows > UINT64_MAX / t->row_size)
		return gw_fail(w, "tensor too large", name);
	t->name = strdup(name);
	if (t->name == NULL)
		return gw_fail(w, "out of memory", name);
	t->type = type;
	t->n_dims = n_dims;
	for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++)
		t->ne[d] = d < n_dims ? ne[d] : 1;
	t->n_rows = rows;
	t->data = data;
	t->fill = fill;
	t->ctx = ctx;
	w->n_tensors++;
	return 0;
}

/* Write N zero bytes. */
static int gw_pad(FILE *f, uint64_t n)
{
	static const unsigned char zero[64];

	while (n > 0) {
		size_t k = n > sizeof(zero) ? sizeof(zero) : (size_t)n;

		if (fwrite(zero, 1, k, f) != k)
			return -1;
		n -= k;
	}
	return 0;
}

/* Round N up to a multiple of A (a power of two). */
static uint64_t gw_align(uint64_t n, uint64_t a)
{
	return (n + a - 1) & ~(a - 1);
}

/* Header, key/values and tensor infos; assigns the data offsets. */
static int gw_write_head(struct gguf_writer *w, FILE *f, uint64_t *pos)
{
	uint32_t version = 3;
	uint64_t off = 0;

	if (fwrite("GGUF", 1, 4, f) != 4 || fwrite(&version, 4, 1, f) != 1 ||
	    fwrite(&w->n_tensors, 8, 1, f) != 1 ||
	    fwrite(&w->n_kv, 8, 1, f) != 1)
		return -1;
	if (w->kv_len && fwrite(w->kv, 1, w->kv_len, f) != w->kv_len)
		return -1;
	*pos = 24 + w->kv_len;
	for (uint64_t i = 0; i < w->n_tensors; i++) {
		struct gguf_writer_tensor *t = &w->tensors[i];
		uint64_t len = strlen(t->name);

		t->offset = off;
		off = gw_align(off + t->row_size * t->n_rows, w->alignment);
		if (fwrite(&len, 8, 1, f) != 1 ||
		    fwrite(t->name, 1, len, f) != len ||
		    fwrite(&t->n_dims, 4, 1, f) != 1 ||
		    fwrite(t->ne, 8, t->n_dims, f) != t->n_dims ||
		    fwrite(&t->type, 4, 1, f) != 1 ||
		    fwrite(&t->offset, 8, 1, f) != 1)
			return -1;
		*pos += 8 + len + 4 + 8ull * t->n_dims + 4 + 8;
	}
	return 0;
}

/* Rows [r0, r0 + n) of a FILL tensor, produced by the pool's threads. */
struct gw_chunk {
	const struct gguf_writer_tensor *t;
	unsigned char *buf; /* n rows */
	uint64_t r0, n;
	int *failed; /* [threads]: a fill of that thread's share failed */
};

/* threadpool_fn: thread ITH's contiguous share of the chunk's rows. */
static void gw_fill_share(void *arg, int ith, int nth)
{
	struct gw_chunk *c = arg;
	const size_t rs = c->t->row_size;
	long lo, hi;

	threadpool_split((long)c->n, ith, nth, &lo, &hi);
	for (long r = lo; r < hi; r++)
		if (c->t->fill(c->t->ctx, c->r0 + (uint64_t)r,
		               c->buf + (size_t)r * rs, rs) != 0) {
			c->failed[ith] = 1;
			return;
		}
}

/* The data of tensor T: its buffer, or its rows a chunk at a time (by
 * the pool's threads when POOL; FAILED has one flag per thread). BUF
 * holds CHUNK_ROWS rows. Returns 0, -1 (write) or -2 (fill). */
static int gw_write_tensor(FILE *f, const struct gguf_writer_tensor *t,
                           struct threadpool *pool, int *failed, void *buf,
                           uint64_t chunk_rows)
{
	if (t->data != NULL) {
		uint64_t n = t->row_size * t->n_rows;

		return fwrite(t->data, 1, (size_t)n, f) == n ? 0 : -1;
	}
	for (uint64_t r = 0; r < t->n_rows; r += chunk_rows) {
		struct gw_chunk c = {t, buf, r, t->n_rows - r, failed};
		int nth = pool != NULL ? threadpool_size(pool) : 1;

		if (c.n > chunk_rows)
			c.n = chunk_rows;
		memset(failed, 0, (size_t)nth * sizeof(*failed));
		if (pool != NULL)
			threadpool_run(pool, gw_fill_share, &c);
		else
			gw_fill_share(&c, 0, 1);
		for (int i = 0; i < nth; i++)
			if (failed[i])
				return -2;
		if (fwrite(buf, t->row_size, (size_t)c.n, f) != c.n)
			return -1;
	}
	return 0;
}

/* Rows of T produced and written together. */
static uint64_t gw_chunk_rows(const struct gguf_writer_tensor *t)
{
	uint64_t n = t->row_size ? GGUF_WRITER_CHUNK / t->row_size : 1;

	n = n < 1 ? 1 : n;
	return n < t->n_rows ? n : t->n_rows;
}

/* Write the file; see gguf_write.h. */
int gguf_writer_write(struct gguf_writer *w, const char *path, char *err,
                      size_t errlen)
{
	FILE *f;
	uint64_t pos = 0;
	size_t cap = 1;
	void *buf = NULL;
	struct threadpool *pool = NULL;
	int *failed = NULL, rc = 0, fills = 0;
	char perr[128];

	if (w->error[0]) {
		snprintf(err, errlen, "%s: %s", path, w->error);
		return -1;
	}
	for (uint64_t i = 0; i < w->n_tensors; i++) {
		const struct gguf_writer_tensor *t = &w->tensors[i];
		size_t b = t->fill != NULL
		               ? (size_t)gw_chunk_rows(t) * t->row_size
		               : 0;

		fills |= t->fill != NULL;
		cap = b > cap ? b : cap;
	}
	/* no pool (one thread, or it could not start): the same file */
	if (fills && w->n_threads > 1)
		pool = threadpool_new(w->n_threads, perr, sizeof(perr));
	buf = malloc(cap);
	failed = calloc(pool != NULL ? (size_t)threadpool_size(pool) : 1,
	                sizeof(*failed));
	f = fopen(path, "wb");
	if (f == NULL || buf == NULL || failed == NULL) {
		snprintf(err, errlen, "%s: %s", path,
		         f == NULL ? strerror(errno) : "out of memory");
		if (f != NULL)
			fclose(f);
		free(buf);
		free(failed);
		threadpool_free(pool);
		return -1;
	}
	if (gw_write_head(w, f, &pos) ||
	    gw_pad(f, gw_align(pos, w->alignment) - pos))
		rc = -1;
	for (uint64_t i = 0; rc == 0 && i < w->n_tensors; i++) {
		const struct gguf_writer_tensor *t = &w->tensors[i];
		uint64_t n = t->row_size * t->n_rows;

		rc = gw_write_tensor(f, t, pool, failed, buf, gw_chunk_rows(t));
		if (rc == -2) {
			snprintf(err, errlen, "%s: producing tensor %s failed",
			         path, t->name);
			break;
		}
		if (rc == 0 && i + 1 < w->n_tensors &&
		    gw_pad(f, gw_align(n, w->alignment) - n))
			rc = -1;
	}
	if (rc == -1)
		snprintf(err, errlen, "%s: write failed: %s", path,
		         strerror(errno));
	if (fclose(f) != 0 && rc == 0) {
		snprintf(err, errlen, "%s: close failed: %s", path,
		         strerror(errno));
		rc = -1;
	}
	free(buf);
	free(failed);
	threadpool_free(pool);
	if (rc != 0) {
		unlink(path);
		return -1;
	}
	return 0;
}

/*
 * gguf.c - the GGUF reader: map, parse, validate, look up.
 *
 * NOTES ON THE DESIGN
 *
 * Layout of a GGUF file (little-endian throughout):
 *
 *     magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv     (v2, v3)
 *     n_kv    x { string key | u32 type | value }
 *     n_tensors x { string name | u32 n_dims | u64 ne[n_dims] | u32 type |
 *                   u64 offset }
 *     padding to general.alignment
 *     tensor data (each tensor at data_offset + offset)
 *
 * with string = u64 length + bytes, and array = u32 element type + u64 count
 * + elements.
 *
 * Parsing walks a cursor over [base, base + size). Every read goes through
 * cur_take(), which fails instead of moving past the end; so no read can
 * leave the file. Before any allocation proportional to a count, the count
 * is compared with the bytes left divided by the smallest possible size of
 * one element: a claimed count of 2^60 fails before malloc is called, and
 * the total allocated stays within a small multiple of the file size.
 */
#include "gguf.h"

#include "qtype.h"
#include "utf8.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* A bounded reading position in the file. */
struct cur {
	const uint8_t *base; /* start of the file */
	uint64_t size;       /* bytes in the file */
	uint64_t pos;        /* next byte to read */
};

/* Parsing context: the file being built and where errors go. */
struct parse {
	struct cur c;        /* the cursor */
	struct gguf_file *f; /* result under construction */
	const char *name;    /* file name for messages */
	char *err;           /* message buffer, may be NULL */
	size_t errlen;       /* its size */
};

static const char *const gguf_type_names[GGUF_TYPE_COUNT] = {
    "uint8", "int8",   "uint16", "int16",  "uint32", "int32",   "float32",
    "bool",  "string", "array",  "uint64", "int64",  "float64",
};

static const size_t gguf_type_sizes[GGUF_TYPE_COUNT] = {
    1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8,
};

/* Write a message prefixed with the file name into the parse's err. */
static int perr(struct parse *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int perr(struct parse *p, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (p->err == NULL || p->errlen == 0)
		return -1;
	n = snprintf(p->err, p->errlen, "%s: ", p->name);
	if (n < 0 || (size_t)n >= p->errlen)
		return -1;
	va_start(ap, fmt);
	vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

/* Format a message into err (may be NULL). */
static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

const char *gguf_type_name(enum gguf_type t)
{
	if ((unsigned)t >= GGUF_TYPE_COUNT)
		return "invalid";
	return gguf_type_names[t];
}

size_t gguf_type_size(enum gguf_type t)
{
	if ((unsigned)t >= GGUF_TYPE_COUNT)
		return 0;
	return gguf_type_sizes[t];
}

/* Bytes left after the cursor. */
static uint64_t cur_left(const struct cur *c)
{
	return c->size - c->pos;
}

/* Point *out at the next N bytes and advance; -1 if fewer are left. */
static int cur_take(struct cur *c, uint64_t n, const uint8_t **out)
{
	if (n > cur_left(c))
		return -1;
	*out = c->base + c->pos;
	c->pos += n;
	return 0;
}

/* Little-endian loads from possibly unaligned memory. */
static uint64_t load_le(const uint8_t *b, size_t n)
{
	uint64_t v = 0;

	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)b[i] << (8 * i);
	return v;
}

static int cur_u32(struct cur *c, uint32_t *v)
{
	const uint8_t *b;

	if (cur_take(c, 4, &b) != 0)
		return -1;
	*v = (uint32_t)load_le(b, 4);
	return 0;
}

static int cur_u64(struct cur *c, uint64_t *v)
{
	const uint8_t *b;

	if (cur_take(c, 8, &b) != 0)
		return -1;
	*v = load_le(b, 8);
	return 0;
}

/* Read a GGUF string at the cursor. WHAT names it for the error. */
static int read_str(struct parse *p, struct gguf_str *s, const char *what)
{
	uint64_t at = p->c.pos, len;
	const uint8_t *b;

	if (cur_u64(&p->c, &len) != 0)
		return perr(p,
		            "%s: string length at offset %" PRIu64
		            " runs past the end of the file (%" PRIu64
		            " bytes)",
		            what, at, p->c.size);
	if (cur_take(&p->c, len, &b) != 0)
		return perr(p,
		            "%s: string at offset %" PRIu64 " claims %" PRIu64
		            " bytes but only %" PRIu64 " are left in the file",
		            what, at, len, cur_left(&p->c));
	s->ptr = (const char *)b;
	s->len = len;
	return 0;
}

/* S for a message: printable ASCII kept, every other byte as \xNN, cut
   with "..." to fit OUT (OUTLEN >= 8). */
static const char *escape_str(struct gguf_str s, char *out, size_t outlen)
{
	size_t o = 0;

	for (uint64_t i = 0; i < s.len; i++) {
		unsigned char c = (unsigned char)s.ptr[i];

		if (o + 8 > outlen) {
			memcpy(out + o, "...", 3);
			o += 3;
			break;
		}
		if (c >= 0x20 && c < 0x7f && c != '\\')
			out[o++] = (char)c;
		else
			o +=
			    (size_t)snprintf(out + o, outlen - o, "\\x%02x", c);
	}
	out[o] = '\0';
	return out;
}

/* Refuse S unless it is valid UTF-8 (utf8_check): WHAT names the key,
   element or tensor; the message gives the first bad byte and its offset
   in the file, so that a hex dump finds it. */
static int check_utf8(struct parse *p, struct gguf_str s, const char *what)
{
	size_t bad = utf8_check(s.ptr, (size_t)s.len);

	if (bad == s.len)
		return 0;
	return perr(p,
	            "%s is not valid UTF-8 (byte 0x%02x at offset %" PRIu64
	            " of the file)",
	            what, (unsigned char)s.ptr[bad],
	            (uint64_t)((const uint8_t *)s.ptr - p->c.base) + bad);
}

char *gguf_str_dup(struct gguf_str s)
{
	char *z;

	if (s.len >= SIZE_MAX)
		return NULL;
	z = malloc((size_t)s.len + 1);
	if (z == NULL)
		return NULL;
	memcpy(z, s.ptr, (size_t)s.len);
	z[s.len] = '\0';
	return z;
}

bool gguf_str_eq(struct gguf_str s, const char *z)
{
	size_t n = strlen(z);

	return s.len == n && memcmp(s.ptr, z, n) == 0;
}

/* Free what a value owns (nested arrays, string tables). */
static void value_free(struct gguf_value *v)
{
	if (v->type != GGUF_TYPE_ARRAY)
		return;
	free(v->v.arr.strs);
	if (v->v.arr.elems != NULL) {
		for (uint64_t i = 0; i < v->v.arr.n; i++)
			value_free(&v->v.arr.elems[i]);
		free(v->v.arr.elems);
	}
	v->v.arr.strs = NULL;
	v->v.arr.elems = NULL;
}

static int read_value(struct parse *p, struct gguf_value *v, uint32_t type,
                      const char *key, int depth);

/* Read an array body (element type, count, elements) into V. */
static int read_array(struct parse *p, struct gguf_value *v, const char *key,
                      int depth)
{
	struct gguf_array *a = &v->v.arr;
	uint64_t at = p->c.pos, n, min_size;
	uint32_t et;
	const uint8_t *b = NULL;

	if (depth >= GGUF_MAX_ARRAY_DEPTH)
		return perr(p, "key '%s': arrays nested deeper than %d levels",
		            key, GGUF_MAX_ARRAY_DEPTH);
	if (cur_u32(&p->c, &et) != 0 || cur_u64(&p->c, &n) != 0)
		return perr(p,
		            "key '%s': array header at offset %" PRIu64
		            " runs past the end of the file",
		            key, at);
	if (et >= GGUF_TYPE_COUNT)
		return perr(p,
		            "key '%s': array element type %" PRIu32
		            " is not a GGUF type (0..%d)",
		            key, et, GGUF_TYPE_COUNT - 1);
	a->elem_type = (enum gguf_type)et;
	a->n = 0;
	/* Smallest encoding of one element: a string is at least its 8-byte
	 * length, a nested array its 12-byte header. */
	min_size = et == GGUF_TYPE_STRING  ? 8
	           : et == GGUF_TYPE_ARRAY ? 12
	                                   : gguf_type_sizes[et];
	if (n > cur_left(&p->c) / min_size)
		return perr(p,
		            "key '%s': array of %" PRIu64 " %s elements "
		            "needs at least %" PRIu64 " bytes per element "
		            "but only %" PRIu64 " bytes are left in the file",
		            key, n, gguf_type_names[et], min_size,
		            cur_left(&p->c));
	if (et == GGUF_TYPE_STRING) {
		a->strs = calloc(n ? n : 1, sizeof(*a->strs));
		if (a->strs == NULL)
			return perr(p, "key '%s': out of memory", key);
		a->n = n;
		for (uint64_t i = 0; i < n; i++) {
			struct gguf_str *s = &a->strs[i];
			char what[300];

			if (read_str(p, s, key) != 0)
				return -1;
			/* the element's name only for the message: formatting
			   it for each of a vocabulary's 150k tokens was most of
			   the time of opening a model's header */
			if (utf8_check(s->ptr, (size_t)s->len) == s->len)
				continue;
			snprintf(what, sizeof(what),
			         "key '%s': string array element %" PRIu64, key,
			         i);
			return check_utf8(p, *s, what);
		}
	} else if (et == GGUF_TYPE_ARRAY) {
		a->elems = calloc(n ? n : 1, sizeof(*a->elems));
		if (a->elems == NULL)
			return perr(p, "key '%s': out of memory", key);
		a->n = n;
		for (uint64_t i = 0; i < n; i++) {
			a->elems[i].type = GGUF_TYPE_ARRAY;
			if (read_array(p, &a->elems[i], key, depth + 1) != 0)
				return -1;
		}
	} else {
		/* Checked above: n * min_size <= bytes left. */
		cur_take(&p->c, n * min_size, &b);
		a->raw = b;
		a->n = n;
	}
	return 0;
}

/* Read one value of TYPE at the cursor into V. */
static int read_value(struct parse *p, struct gguf_value *v, uint32_t type,
                      const char *key, int depth)
{
	const uint8_t *b;
	uint64_t raw;
	size_t sz;

	if (type >= GGUF_TYPE_COUNT)
		return perr(p,
		            "key '%s': value type %" PRIu32
		            " is not a GGUF type (0..%d)",
		            key, type, GGUF_TYPE_COUNT - 1);
	v->type = (enum gguf_type)type;
	if (type == GGUF_TYPE_STRING) {
		char what[300];

		if (read_str(p, &v->v.str, key) != 0)
			return -1;
		snprintf(what, sizeof(what), "key '%s': string value", key);
		return check_utf8(p, v->v.str, what);
	}
	if (type == GGUF_TYPE_ARRAY)
		return read_array(p, v, key, depth);
	sz = gguf_type_sizes[type];
	if (cur_take(&p->c, sz, &b) != 0)
		return perr(p,
		            "key '%s': %s value runs past the end of the "
		            "file (%" PRIu64 " bytes)",
		            key, gguf_type_names[type], p->c.size);
	raw = load_le(b, sz);
	switch (type) {
	case GGUF_TYPE_UINT8:
	case GGUF_TYPE_UINT16:
	case GGUF_TYPE_UINT32:
	case GGUF_TYPE_UINT64:
		v->v.u64 = raw;
		break;
	case GGUF_TYPE_INT8:
		v->v.i64 = (int8_t)raw;
		break;
	case GGUF_TYPE_INT16:
		v->v.i64 = (int16_t)raw;
		break;
	case GGUF_TYPE_INT32:
		v->v.i64 = (int32_t)raw;
		break;
	case GGUF_TYPE_INT64:
		v->v.i64 = (int64_t)raw;
		break;
	case GGUF_TYPE_FLOAT32: {
		uint32_t u = (uint32_t)raw;
		float fl;

		memcpy(&fl, &u, 4);
		v->v.f64 = fl;
		break;
	}
	case GGUF_TYPE_FLOAT64:
		memcpy(&v->v.f64, &raw, 8);
		break;
	case GGUF_TYPE_BOOL:
		if (raw > 1)
			return perr(p,
			            "key '%s': bool value %" PRIu64
			            " is neither 0 nor 1",
			            key, raw);
		v->v.b = raw != 0;
		break;
	}
	return 0;
}

/* qsort over index arrays, by key or tensor name. */
static const struct gguf_file *sort_file;

static int cmp_kv(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;

	return strcmp(sort_file->kv[*x].key, sort_file->kv[*y].key);
}

static int cmp_tensor_name(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;

	return strcmp(sort_file->tensors[*x].name, sort_file->tensors[*y].name);
}

static int cmp_tensor_offset(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;
	uint64_t ox = sort_file->tensors[*x].offset;
	uint64_t oy = sort_file->tensors[*y].offset;

	return ox < oy ? -1 : ox > oy;
}

/* Copy a key or name, rejecting embedded NULs (they would alias) and
   bytes that are not UTF-8 (every name is text for callers and users). */
static int dup_name(struct parse *p, struct gguf_str s, char **out,
                    const char *what, uint64_t idx)
{
	char shown[80], msg[128];

	if (memchr(s.ptr, '\0', (size_t)s.len) != NULL)
		return perr(p, "%s %" PRIu64 ": name contains a NUL byte", what,
		            idx);
	snprintf(msg, sizeof(msg), "%s %" PRIu64 ": name '%s'", what, idx,
	         escape_str(s, shown, sizeof(shown)));
	if (check_utf8(p, s, msg) != 0)
		return -1;
	*out = gguf_str_dup(s);
	if (*out == NULL)
		return perr(p, "%s %" PRIu64 ": out of memory", what, idx);
	return 0;
}

/* Parse the key/value section. */
static int parse_kv(struct parse *p)
{
	struct gguf_file *f = p->f;

	/* Each pair takes at least 8 (key length) + 4 (type) + 1 bytes. */
	if (f->n_kv > cur_left(&p->c) / 13)
		return perr(p,
		            "header claims %" PRIu64 " metadata keys but "
		            "only %" PRIu64 " bytes are left in the file",
		            f->n_kv, cur_left(&p->c));
	f->kv = calloc(f->n_kv ? f->n_kv : 1, sizeof(*f->kv));
	f->kv_by_key = calloc(f->n_kv ? f->n_kv : 1, sizeof(uint64_t));
	if (f->kv == NULL || f->kv_by_key == NULL)
		return perr(p, "out of memory for %" PRIu64 " keys", f->n_kv);
	for (uint64_t i = 0; i < f->n_kv; i++) {
		struct gguf_kv *kv = &f->kv[i];
		struct gguf_str key;
		char what[48];
		uint32_t type;

		snprintf(what, sizeof(what), "metadata key %" PRIu64, i);
		if (read_str(p, &key, what) != 0 ||
		    dup_name(p, key, &kv->key, "metadata key", i) != 0)
			return -1;
		kv->val.type = GGUF_TYPE_UINT8; /* nothing owned yet */
		if (cur_u32(&p->c, &type) != 0)
			return perr(p,
			            "key '%s': type runs past the end of "
			            "the file",
			            kv->key);
		if (read_value(p, &kv->val, type, kv->key, 0) != 0)
			return -1;
		f->kv_by_key[i] = i;
	}
	sort_file = f;
	qsort(f->kv_by_key, f->n_kv, sizeof(uint64_t), cmp_kv);
	for (uint64_t i = 1; i < f->n_kv; i++) {
		const char *a = f->kv[f->kv_by_key[i - 1]].key;

		if (strcmp(a, f->kv[f->kv_by_key[i]].key) == 0)
			return perr(p, "key '%s' appears more than once", a);
	}
	return 0;
}

/* Take general.alignment into account, if present. */
static int parse_alignment(struct parse *p)
{
	const struct gguf_kv *kv = gguf_find_kv(p->f, "general.alignment");

	p->f->alignment = GGUF_DEFAULT_ALIGNMENT;
	if (kv == NULL)
		return 0;
	if (kv->val.type != GGUF_TYPE_UINT32)
		return perr(p,
		            "key 'general.alignment' has type %s, expected "
		            "uint32",
		            gguf_type_name(kv->val.type));
	/* The GGUF spec: a multiple of 8. Below 8 a tensor could start at
	   an odd offset, and the block structs (fp16 scales) would be read
	   misaligned: undefined behaviour the fuzz_model long run found
	   (tests/data/model/crashers/alignment-1-odd-tensor.gguf). */
	if (kv->val.v.u64 < 8 || (kv->val.v.u64 & (kv->val.v.u64 - 1)) != 0)
		return perr(p,
		            "key 'general.alignment' is %" PRIu64
		            ", not a power of two of at least 8",
		            kv->val.v.u64);
	p->f->alignment = (uint32_t)kv->val.v.u64;
	return 0;
}

/* Parse one tensor descriptor (not yet checked against the data). */
static int parse_tensor(struct parse *p, uint64_t i)
{
	struct gguf_tensor *t = &p->f->tensors[i];
	struct gguf_str name;
	char what[48];

	snprintf(what, sizeof(what), "tensor %" PRIu64, i);
	if (read_str(p, &name, what) != 0 ||
	    dup_name(p, name, &t->name, "tensor", i) != 0)
		return -1;
	if (cur_u32(&p->c, &t->n_dims) != 0)
		return perr(p,
		            "tensor '%s': header runs past the end of the "
		            "file",
		            t->name);
	if (t->n_dims == 0 || t->n_dims > GGUF_MAX_DIMS)
		return perr(p,
		            "tensor '%s': %" PRIu32 " dimensions (1..%d "
		            "supported)",
		            t->name, t->n_dims, GGUF_MAX_DIMS);
	for (int d = 0; d < GGUF_MAX_DIMS; d++)
		t->ne[d] = 1;
	for (uint32_t d = 0; d < t->n_dims; d++)
		if (cur_u64(&p->c, &t->ne[d]) != 0)
			return perr(p,
			            "tensor '%s': header runs past the end "
			            "of the file",
			            t->name);
	if (cur_u32(&p->c, &t->type) != 0 || cur_u64(&p->c, &t->offset) != 0)
		return perr(p,
		            "tensor '%s': header runs past the end of the "
		            "file",
		            t->name);
	return 0;
}

/* Compute and check a tensor's byte size from its type and shape. */
static int size_tensor(struct parse *p, struct gguf_tensor *t)
{
	const struct qtype_info *qi = qtype_get(t->type);
	uint64_t rows = 1, nbytes;

	for (uint32_t d = 0; d < t->n_dims; d++)
		if (t->ne[d] == 0 || t->ne[d] > INT64_MAX)
			return perr(p,
			            "tensor '%s': dimension %" PRIu32
			            " is %" PRIu64 " (must be 1..2^63-1)",
			            t->name, d, t->ne[d]);
	if (qi == NULL)
		return perr(p, "tensor '%s': unknown ggml type id %" PRIu32,
		            t->name, t->type);
	if (qi->blck_size == 0)
		return perr(p,
		            "tensor '%s': type %s (id %" PRIu32 ") was "
		            "removed from ggml; its size is unknown",
		            t->name, qi->name, t->type);
	if (t->ne[0] % qi->blck_size != 0)
		return perr(p,
		            "tensor '%s': row length %" PRIu64 " is not a "
		            "multiple of the %s block size %" PRIu32,
		            t->name, t->ne[0], qi->name, qi->blck_size);
	for (uint32_t d = 1; d < t->n_dims; d++) {
		if (rows > UINT64_MAX / t->ne[d])
			goto overflow;
		rows *= t->ne[d];
	}
	nbytes = t->ne[0] / qi->blck_size;
	if (nbytes > UINT64_MAX / qi->type_size)
		goto overflow;
	nbytes *= qi->type_size;
	if (rows != 0 && nbytes > UINT64_MAX / rows)
		goto overflow;
	t->nbytes = nbytes * rows;
	return 0;
overflow:
	return perr(p,
	            "tensor '%s': shape [%" PRIu64 ", %" PRIu64 ", %" PRIu64
	            ", %" PRIu64 "] overflows a 64-bit byte size",
	            t->name, t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
}

/* Parse the tensor table and check every tensor against the data. */
static int parse_tensors(struct parse *p)
{
	struct gguf_file *f = p->f;
	uint64_t *by_off, data_size;

	/* Each descriptor takes at least 8 + 4 + 8 + 4 + 8 bytes. */
	if (f->n_tensors > cur_left(&p->c) / 32)
		return perr(p,
		            "header claims %" PRIu64 " tensors but only "
		            "%" PRIu64 " bytes are left in the file",
		            f->n_tensors, cur_left(&p->c));
	f->tensors =
	    calloc(f->n_tensors ? f->n_tensors : 1, sizeof(*f->tensors));
	f->tensor_by_name =
	    calloc(f->n_tensors ? f->n_tensors : 1, sizeof(uint64_t));
	if (f->tensors == NULL || f->tensor_by_name == NULL)
		return perr(p, "out of memory for %" PRIu64 " tensors",
		            f->n_tensors);
	for (uint64_t i = 0; i < f->n_tensors; i++) {
		if (parse_tensor(p, i) != 0)
			return -1;
		f->tensor_by_name[i] = i;
	}
	/* The data section starts at the next multiple of the alignment. */
	f->data_offset = p->c.pos;
	if (f->data_offset % f->alignment != 0)
		f->data_offset += f->alignment - f->data_offset % f->alignment;
	if (f->n_tensors > 0 && f->data_offset > f->size)
		return perr(p,
		            "data section would start at offset %" PRIu64
		            ", past the end of the file (%" PRIu64 " bytes)",
		            f->data_offset, f->size);
	data_size = f->data_offset <= f->size ? f->size - f->data_offset : 0;

	sort_file = f;
	qsort(f->tensor_by_name, f->n_tensors, sizeof(uint64_t),
	      cmp_tensor_name);
	for (uint64_t i = 1; i < f->n_tensors; i++) {
		const char *a = f->tensors[f->tensor_by_name[i - 1]].name;

		if (strcmp(a, f->tensors[f->tensor_by_name[i]].name) == 0)
			return perr(p, "tensor '%s' appears more than once", a);
	}
	for (uint64_t i = 0; i < f->n_tensors; i++) {
		struct gguf_tensor *t = &f->tensors[i];

		if (size_tensor(p, t) != 0)
			return -1;
		if (t->offset % f->alignment != 0)
			return perr(p,
			            "tensor '%s': data offset %" PRIu64
			            " is not a multiple of the alignment "
			            "%" PRIu32,
			            t->name, t->offset, f->alignment);
		if (t->offset > data_size || t->nbytes > data_size - t->offset)
			return perr(p,
			            "tensor '%s': data [offset %" PRIu64
			            ", %" PRIu64 " bytes] ends past the "
			            "end of the file (%" PRIu64 " bytes)",
			            t->name, f->data_offset + t->offset,
			            t->nbytes, f->size);
		t->data = f->base + f->data_offset + t->offset;
	}

	/* No two tensors may share bytes: sort by offset, compare
	 * neighbours. */
	by_off = malloc((f->n_tensors ? f->n_tensors : 1) * sizeof(uint64_t));
	if (by_off == NULL)
		return perr(p, "out of memory");
	for (uint64_t i = 0; i < f->n_tensors; i++)
		by_off[i] = i;
	qsort(by_off, f->n_tensors, sizeof(uint64_t), cmp_tensor_offset);
	for (uint64_t i = 1; i < f->n_tensors; i++) {
		const struct gguf_tensor *a = &f->tensors[by_off[i - 1]];
		const struct gguf_tensor *b = &f->tensors[by_off[i]];

		if (a->offset + a->nbytes > b->offset) {
			perr(p,
			     "tensors '%s' [offset %" PRIu64 ", %" PRIu64
			     " bytes] and '%s' [offset %" PRIu64 "] overlap",
			     a->name, a->offset, a->nbytes, b->name, b->offset);
			free(by_off);
			return -1;
		}
	}
	free(by_off);
	return 0;
}

/* Parse the whole file at f->base. */
static int parse_file(struct parse *p)
{
	struct gguf_file *f = p->f;
	const uint8_t *magic;

	if (cur_take(&p->c, 4, &magic) != 0 || memcmp(magic, "GGUF", 4) != 0)
		return perr(p, "not a GGUF file (no \"GGUF\" magic at offset "
		               "0)");
	if (cur_u32(&p->c, &f->version) != 0)
		return perr(p,
		            "file ends inside the header (%" PRIu64 " bytes)",
		            f->size);
	if (f->version != 2 && f->version != 3)
		return perr(p,
		            "GGUF version %" PRIu32 " is not supported "
		            "(versions 2 and 3 are)",
		            f->version);
	if (cur_u64(&p->c, &f->n_tensors) != 0 || cur_u64(&p->c, &f->n_kv) != 0)
		return perr(p,
		            "file ends inside the header (%" PRIu64 " bytes)",
		            f->size);
	/* n_tensors is read first but the tensor table follows the kv. */
	if (parse_kv(p) != 0 || parse_alignment(p) != 0 ||
	    parse_tensors(p) != 0)
		return -1;
	return 0;
}

/* Build a gguf_file over BASE/SIZE; NAME for messages. */
static struct gguf_file *open_common(const uint8_t *base, uint64_t size,
                                     bool mapped, const char *name, char *err,
                                     size_t errlen)
{
	struct gguf_file *f = calloc(1, sizeof(*f));
	struct parse p;

	if (f == NULL || (f->path = strdup(name)) == NULL) {
		set_err(err, errlen, "%s: out of memory", name);
		free(f);
		if (mapped)
			munmap((void *)base, size);
		return NULL;
	}
	f->base = base;
	f->size = size;
	f->mapped = mapped;
	memset(&p, 0, sizeof(p));
	p.c.base = base;
	p.c.size = size;
	p.f = f;
	p.name = name;
	p.err = err;
	p.errlen = errlen;
	if (parse_file(&p) != 0) {
		gguf_close(f);
		return NULL;
	}
	return f;
}

struct gguf_file *gguf_open_memory(const void *buf, size_t len,
                                   const char *name, char *err, size_t errlen)
{
	return open_common(buf, len, false, name, err, errlen);
}

struct gguf_file *gguf_open(const char *path, char *err, size_t errlen)
{
	struct stat st;
	void *map;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		set_err(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) != 0) {
		set_err(err, errlen, "%s: %s", path, strerror(errno));
		close(fd);
		return NULL;
	}
	if (!S_ISREG(st.st_mode)) {
		set_err(err, errlen, "%s: not a regular file", path);
		close(fd);
		return NULL;
	}
	if (st.st_size < 8) {
		set_err(err, errlen,
		        "%s: not a GGUF file (%lld bytes, too short)", path,
		        (long long)st.st_size);
		close(fd);
		return NULL;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED) {
		set_err(err, errlen, "%s: mmap: %s", path, strerror(errno));
		return NULL;
	}
	return open_common(map, (uint64_t)st.st_size, true, path, err, errlen);
}

void gguf_close(struct gguf_file *f)
{
	if (f == NULL)
		return;
	if (f->shards != NULL) {
		/* merged (gguf_split.c): kv and names belong to the shards */
		for (uint32_t i = 0; i < f->n_shards; i++)
			gguf_close(f->shards[i]);
		free(f->shards);
		free(f->tensors);
		free(f->tensor_by_name);
		free(f->path);
		free(f);
		return;
	}
	if (f->kv != NULL) {
		for (uint64_t i = 0; i < f->n_kv; i++) {
			free(f->kv[i].key);
			value_free(&f->kv[i].val);
		}
	}
	if (f->tensors != NULL)
		for (uint64_t i = 0; i < f->n_tensors; i++)
			free(f->tensors[i].name);
	free(f->kv);
	free(f->kv_by_key);
	free(f->tensors);
	free(f->tensor_by_name);
	if (f->mapped)
		munmap((void *)f->base, (size_t)f->size);
	free(f->path);
	free(f);
}

const struct gguf_kv *gguf_find_kv(const struct gguf_file *f, const char *key)
{
	uint64_t lo = 0, hi = f->n_kv;

	/* Binary search over the sorted index. kv_by_key may be partly
	 * filled while parsing; n_kv entries are valid after open. */
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		const struct gguf_kv *kv = &f->kv[f->kv_by_key[mid]];
		int c = strcmp(key, kv->key);

		if (c == 0)
			return kv;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

const struct gguf_tensor *gguf_find_tensor(const struct gguf_file *f,
                                           const char *name)
{
	uint64_t lo = 0, hi = f->n_tensors;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		const struct gguf_tensor *t =
		    &f->tensors[f->tensor_by_name[mid]];
		int c = strcmp(name, t->name);

		if (c == 0)
			return t;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

/* Find KEY or report it missing. */
static const struct gguf_kv *get_kv(const struct gguf_file *f, const char *key,
                                    char *err, size_t errlen)
{
	const struct gguf_kv *kv = gguf_find_kv(f, key);

	if (kv == NULL)
		set_err(err, errlen, "%s: key '%s' is missing", f->path, key);
	return kv;
}

/* Report KV has the wrong type. */
static int type_err(const struct gguf_file *f, const struct gguf_kv *kv,
                    const char *want, char *err, size_t errlen)
{
	set_err(err, errlen, "%s: key '%s' has type %s, expected %s", f->path,
	        kv->key, gguf_type_name(kv->val.type), want);
	return GGUF_ETYPE;
}

static bool is_unsigned(enum gguf_type t)
{
	return t == GGUF_TYPE_UINT8 || t == GGUF_TYPE_UINT16 ||
	       t == GGUF_TYPE_UINT32 || t == GGUF_TYPE_UINT64;
}

static bool is_signed(enum gguf_type t)
{
	return t == GGUF_TYPE_INT8 || t == GGUF_TYPE_INT16 ||
	       t == GGUF_TYPE_INT32 || t == GGUF_TYPE_INT64;
}

int gguf_get_u64(const struct gguf_file *f, const char *key, uint64_t *out,
                 char *err, size_t errlen)
{
	const struct gguf_kv *kv = get_kv(f, key, err, errlen);

	if (kv == NULL)
		return GGUF_ENOKEY;
	if (is_unsigned(kv->val.type)) {
		*out = kv->val.v.u64;
		return GGUF_OK;
	}
	if (is_signed(kv->val.type)) {
		if (kv->val.v.i64 < 0) {
			set_err(err, errlen,
			        "%s: key '%s' is %" PRId64
			        ", expected a non-negative integer",
			        f->path, key, kv->val.v.i64);
			return GGUF_ETYPE;
		}
		*out = (uint64_t)kv->val.v.i64;
		return GGUF_OK;
	}
	return type_err(f, kv, "an unsigned integer", err, errlen);
}

int gguf_get_u32(const struct gguf_file *f, const char *key, uint32_t *out,
                 char *err, size_t errlen)
{
	uint64_t v;
	int rc = gguf_get_u64(f, key, &v, err, errlen);

	if (rc != GGUF_OK)
		return rc;
	if (v > UINT32_MAX) {
		set_err(err, errlen,
		        "%s: key '%s' is %" PRIu64 ", too large for 32 bits",
		        f->path, key, v);
		return GGUF_ETYPE;
	}
	*out = (uint32_t)v;
	return GGUF_OK;
}

int gguf_get_i64(const struct gguf_file *f, const char *key, int64_t *out,
                 char *err, size_t errlen)
{
	const struct gguf_kv *kv = get_kv(f, key, err, errlen);

	if (kv == NULL)
		return GGUF_ENOKEY;
	if (is_signed(kv->val.type)) {
		*out = kv->val.v.i64;
		return GGUF_OK;
	}
	if (is_unsigned(kv->val.type)) {
		if (kv->val.v.u64 > INT64_MAX) {
			set_err(err, errlen,
			        "%s: key '%s' is %" PRIu64
			        ", too large for a signed 64-bit integer",
			        f->path, key, kv->val.v.u64);
			return GGUF_ETYPE;
		}
		*out = (int64_t)kv->val.v.u64;
		return GGUF_OK;
	}
	return type_err(f, kv, "an integer", err, errlen);
}

int gguf_get_f64(const struct gguf_file *f, const char *key, double *out,
                 char *err, size_t errlen)
{
	const struct gguf_kv *kv = get_kv(f, key, err, errlen);

	if (kv == NULL)
		return GGUF_ENOKEY;
	if (kv->val.type != GGUF_TYPE_FLOAT32 &&
	    kv->val.type != GGUF_TYPE_FLOAT64)
		return type_err(f, kv, "float32 or float64", err, errlen);
	*out = kv->val.v.f64;
	return GGUF_OK;
}

int gguf_get_f32(const struct gguf_file *f, const char *key, float *out,
                 char *err, size_t errlen)
{
	double v;
	int rc = gguf_get_f64(f, key, &v, err, errlen);

	if (rc == GGUF_OK)
		*out = (float)v;
	return rc;
}

int gguf_get_bool(const struct gguf_file *f, const char *key, bool *out,
                  char *err, size_t errlen)
{
	const struct gguf_kv *kv = get_kv(f, key, err, errlen);

	if (kv == NULL)
		return GGUF_ENOKEY;
	if (kv->val.type != GGUF_TYPE_BOOL)
		return type_err(f, kv, "bool", err, errlen);
	*out = kv->val.v.b;
	return GGUF_OK;
}

int gguf_get_str(const struct gguf_file *f, const char *key,
                 struct gguf_str *out, char *err, size_t errlen)
{
	const struct gguf_kv *kv = get_kv(f, key, err, errlen);

	if (kv == NULL)
		return GGUF_ENOKEY;
	if (kv->val.type != GGUF_TYPE_STRING)
		return type_err(f, kv, "string", err, errlen);
	*out = kv->val.v.str;
	return GGUF_OK;
}

int gguf_get_arr(const struct gguf_file *f, const char *key,
                 enum gguf_type elem, const struct gguf_array **out, char *err,
                 size_t errlen)
{
	const struct gguf_kv *kv = get_kv(f, key, err, errlen);

	if (kv == NULL)
		return GGUF_ENOKEY;
	if (kv->val.type != GGUF_TYPE_ARRAY)
		return type_err(f, kv, "array", err, errlen);
	if (elem != GGUF_TYPE_COUNT && kv->val.v.arr.elem_type != elem) {
		set_err(err, errlen,
		        "%s: key '%s' is an array of %s, expected an array "
		        "of %s",
		        f->path, key, gguf_type_name(kv->val.v.arr.elem_type),
		        gguf_type_name(elem));
		return GGUF_ETYPE;
	}
	*out = &kv->val.v.arr;
	return GGUF_OK;
}

/* D as an int64_t, truncated toward zero and saturated: NaN is 0, and a
 * value out of range the nearest end (a plain cast of those is undefined
 * behaviour: the gguf fuzz harness found it with hostile float arrays). */
static int64_t gguf_f64_to_i64(double d)
{
	if (d != d)
		return 0;
	if (d >= 9223372036854775808.0)
		return INT64_MAX;
	if (d < -9223372036854775808.0)
		return INT64_MIN;
	return (int64_t)d;
}

int64_t gguf_arr_i64(const struct gguf_array *a, uint64_t i)
{
	size_t sz = gguf_type_sizes[a->elem_type];
	uint64_t raw = load_le((const uint8_t *)a->raw + i * sz, sz);

	switch (a->elem_type) {
	case GGUF_TYPE_INT8:
		return (int8_t)raw;
	case GGUF_TYPE_INT16:
		return (int16_t)raw;
	case GGUF_TYPE_INT32:
		return (int32_t)raw;
	case GGUF_TYPE_FLOAT32:
	case GGUF_TYPE_FLOAT64:
		return gguf_f64_to_i64(gguf_arr_f64(a, i));
	default:
		return (int64_t)raw;
	}
}

double gguf_arr_f64(const struct gguf_array *a, uint64_t i)
{
	size_t sz = gguf_type_sizes[a->elem_type];
	uint64_t raw = load_le((const uint8_t *)a->raw + i * sz, sz);

	if (a->elem_type == GGUF_TYPE_FLOAT32) {
		uint32_t u = (uint32_t)raw;
		float fl;

		memcpy(&fl, &u, 4);
		return fl;
	}
	if (a->elem_type == GGUF_TYPE_FLOAT64) {
		double d;

		memcpy(&d, &raw, 8);
		return d;
	}
	if (is_signed(a->elem_type))
		return (double)gguf_arr_i64(a, i);
	return (double)raw;
}

/*
 * gguf.h - read-only access to a GGUF model file (the llama.cpp container).
 *
 * NOTES ON THE DESIGN
 *
 * The file is mapped read-only and parsed once by gguf_open(); afterwards
 * every accessor is a lookup in tables built at open time and never fails
 * for a reason other than a missing key or a type mismatch.
 *
 * Invariants after a successful open (each one checked while parsing, with
 * the offending key, tensor and numbers in the error message):
 *   1. Every string, array and tensor lies entirely inside the mapping.
 *   2. Every count was bounded by the bytes left in the file before anything
 *      was allocated for it, so a hostile header cannot make the reader
 *      allocate more than a small multiple of the file's size.
 *   3. Keys are unique; tensor names are unique; tensor data regions are
 *      aligned to general.alignment and do not overlap.
 *   4. Every tensor has 1..4 dimensions, none of them zero, a known ggml
 *      type whose block size divides ne[0], and a byte size that fits.
 *   5. Every key, tensor name, string value and string array element is
 *      valid UTF-8 (utf8_check: shortest form, no surrogates, nothing
 *      past U+10FFFF); the error names the key (the index of a key or
 *      tensor whose name is broken, shown with \xNN escapes), the array
 *      element, the byte and its offset in the file.
 *
 * Strings that point into the mapping (struct gguf_str) are NOT
 * NUL-terminated; keys and tensor names are copied and NUL-terminated
 * because callers compare them as C strings.
 */
#ifndef PARLEY_GGUF_H
#define PARLEY_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" { /* included by the CUDA backend */
#endif

/* Metadata value types, numbered as in the GGUF specification. */
enum gguf_type {
	GGUF_TYPE_UINT8 = 0,
	GGUF_TYPE_INT8 = 1,
	GGUF_TYPE_UINT16 = 2,
	GGUF_TYPE_INT16 = 3,
	GGUF_TYPE_UINT32 = 4,
	GGUF_TYPE_INT32 = 5,
	GGUF_TYPE_FLOAT32 = 6,
	GGUF_TYPE_BOOL = 7,
	GGUF_TYPE_STRING = 8,
	GGUF_TYPE_ARRAY = 9,
	GGUF_TYPE_UINT64 = 10,
	GGUF_TYPE_INT64 = 11,
	GGUF_TYPE_FLOAT64 = 12,
	GGUF_TYPE_COUNT
};

#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DIMS          4
#define GGUF_MAX_ARRAY_DEPTH   8 /* nesting of arrays of arrays */

/* Return codes of the typed getters. */
#define GGUF_OK     0
#define GGUF_ENOKEY (-1) /* no such key */
#define GGUF_ETYPE                                                             \
	(-2) /* key present with another type, or value out of range */

struct gguf_str {
	const char *ptr; /* into the mapping; not NUL-terminated */
	uint64_t len;    /* bytes */
};

struct gguf_value;

struct gguf_array {
	enum gguf_type elem_type; /* type of every element */
	uint64_t n;               /* element count */
	const void
	    *raw; /* fixed-size elements: little-endian, maybe unaligned */
	struct gguf_str *strs;    /* elem_type STRING: n entries (owned) */
	struct gguf_value *elems; /* elem_type ARRAY: n nested values (owned) */
};

struct gguf_value {
	enum gguf_type type;
	union {
		uint64_t u64; /* UINT8..UINT64 */
		int64_t i64;  /* INT8..INT64 */
		double f64;   /* FLOAT32, FLOAT64 */
		bool b;       /* BOOL */
		struct gguf_str str;
		struct gguf_array arr;
	} v;
};

struct gguf_kv {
	char *key; /* NUL-terminated copy (owned) */
	struct gguf_value val;
};

struct gguf_tensor {
	char *name;                 /* NUL-terminated copy (owned) */
	uint32_t type;              /* ggml type id, see qtype.h */
	uint32_t n_dims;            /* 1..GGUF_MAX_DIMS */
	uint64_t ne[GGUF_MAX_DIMS]; /* ne[0] is contiguous; unused dims are 1 */
	uint64_t offset;            /* from the start of the data section */
	uint64_t nbytes;            /* size of the data */
	const void *data;           /* into the mapping */
	uint32_t shard; /* merged file: index into its shards; else 0 */
};

struct gguf_file {
	char *path;           /* as given to gguf_open (owned) */
	const uint8_t *base;  /* start of the mapping (or caller's buffer);
	                         NULL in a merged file */
	uint64_t size;        /* bytes in the file (merged: all shards) */
	bool mapped;          /* base must be munmap'ed on close */
	uint32_t version;     /* 2 or 3 */
	uint32_t alignment;   /* general.alignment, or 32 */
	uint64_t data_offset; /* start of the tensor data section */
	uint64_t n_kv;
	struct gguf_kv *kv; /* n_kv entries, file order (owned) */
	uint64_t n_tensors;
	struct gguf_tensor *tensors; /* n_tensors entries, file order (owned) */
	uint64_t *tensor_by_name;    /* indices into tensors sorted by name */
	uint64_t *kv_by_key;         /* indices into kv sorted by key */
	/* A split model merged by gguf_split.h: kv, kv_by_key and the tensor
	 * names are borrowed from shards[0..n_shards); 0 and NULL otherwise. */
	uint32_t n_shards;
	struct gguf_file **shards; /* shard i = split.no i (owned) */
};

/*
 * Map and parse PATH. On success returns a new gguf_file the caller frees
 * with gguf_close(). On failure returns NULL and writes a message naming
 * the file and the offending key or tensor into err (errlen bytes).
 */
struct gguf_file *gguf_open(const char *path, char *err, size_t errlen);

/*
 * Parse LEN bytes at BUF (not copied: BUF must outlive the result). NAME is
 * used in error messages. Same contract as gguf_open otherwise.
 */
struct gguf_file *gguf_open_memory(const void *buf, size_t len,
                                   const char *name, char *err, size_t errlen);

/* Free everything gguf_open allocated and unmap the file (a merged file:
 * its shards too). NULL is allowed. */
void gguf_close(struct gguf_file *f);

/* Name of a metadata value type ("uint32", "array", ...). */
const char *gguf_type_name(enum gguf_type t);

/* The key/value pair named KEY, or NULL. */
const struct gguf_kv *gguf_find_kv(const struct gguf_file *f, const char *key);

/* The tensor named NAME, or NULL. */
const struct gguf_tensor *gguf_find_tensor(const struct gguf_file *f,
                                           const char *name);

/*
 * Typed getters. Each returns GGUF_OK and stores the value, GGUF_ENOKEY if
 * the key is absent (err says so), or GGUF_ETYPE if the key holds another
 * type or a value that does not fit (err names the key, the expected and
 * the actual type). Integers of any width and signedness are accepted when
 * the value fits; floats accept FLOAT32 and FLOAT64. err may be NULL.
 */
int gguf_get_u64(const struct gguf_file *f, const char *key, uint64_t *out,
                 char *err, size_t errlen);
int gguf_get_u32(const struct gguf_file *f, const char *key, uint32_t *out,
                 char *err, size_t errlen);
int gguf_get_i64(const struct gguf_file *f, const char *key, int64_t *out,
                 char *err, size_t errlen);
int gguf_get_f64(const struct gguf_file *f, const char *key, double *out,
                 char *err, size_t errlen);
int gguf_get_f32(const struct gguf_file *f, const char *key, float *out,
                 char *err, size_t errlen);
int gguf_get_bool(const struct gguf_file *f, const char *key, bool *out,
                  char *err, size_t errlen);
int gguf_get_str(const struct gguf_file *f, const char *key,
                 struct gguf_str *out, char *err, size_t errlen);
/* An array whose elements have type ELEM (GGUF_TYPE_COUNT accepts any). */
int gguf_get_arr(const struct gguf_file *f, const char *key,
                 enum gguf_type elem, const struct gguf_array **out, char *err,
                 size_t errlen);

/* Element I of a fixed-size numeric array, converted (a float to an integer:
   truncated, NaN 0, out of range saturated). I < a->n required. */
int64_t gguf_arr_i64(const struct gguf_array *a, uint64_t i);
double gguf_arr_f64(const struct gguf_array *a, uint64_t i);

/* Size in bytes of one element of a fixed-size type; 0 for STRING/ARRAY. */
size_t gguf_type_size(enum gguf_type t);

/* Copy S into a new NUL-terminated string (caller frees), or NULL. */
char *gguf_str_dup(struct gguf_str s);

/* True when S equals the C string Z. */
bool gguf_str_eq(struct gguf_str s, const char *z);

#ifdef __cplusplus
}
#endif

#endif /* PARLEY_GGUF_H */

/*
 * json.h - a small, bounded JSON value model, parser and serializer.
 *
 * NOTES ON THE DESIGN
 *
 * A JSON document is a tree of heap-allocated struct json_value nodes.
 * Each node owns its children, its string bytes and its object keys;
 * json_free() releases a whole tree.  The model keeps what Python's json
 * module keeps, because the serializer must be byte-exact with
 * json.dumps (transformers' `tojson` filter) and message lists come from
 * Python-made files:
 *
 *   1. Numbers are JSON_INT when the literal has no fraction or exponent
 *      and fits int64_t, else JSON_FLOAT (a double).
 *   2. Strings are UTF-8 byte runs with explicit lengths; they may hold
 *      NUL bytes (from "\u0000").  The parser rejects invalid UTF-8 and
 *      lone surrogates, so every string in a parsed tree is valid UTF-8.
 *   3. Objects keep their members in insertion order (json.dumps writes
 *      them in that order).  A duplicate key in parsed text replaces the
 *      earlier value in place, as Python's dict does.
 *
 * Limits (hostile input): nesting depth JSON_MAX_DEPTH; the parser
 * allocates at most a small multiple of the input size.  Every parse
 * error names the line and column (1-based, column counted in bytes).
 *
 * Building a tree by hand (the chat session passes messages this way,
 * without going through JSON text): json_new_*() constructors, then
 * json_array_push() / json_object_set(), which take ownership of the
 * value they are given.
 */
#ifndef PARLEY_JSON_H
#define PARLEY_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JSON_MAX_DEPTH 128

enum json_type {
	JSON_NULL,
	JSON_BOOL,
	JSON_INT,
	JSON_FLOAT,
	JSON_STRING,
	JSON_ARRAY,
	JSON_OBJECT
};

struct json_value;

struct json_member {
	char *key;              /* UTF-8, NUL-terminated copy (owned) */
	size_t klen;            /* key length in bytes (may hold NULs) */
	struct json_value *val; /* owned */
};

struct json_value {
	enum json_type type;
	union {
		bool b;    /* JSON_BOOL */
		int64_t i; /* JSON_INT */
		double f;  /* JSON_FLOAT */
		struct {
			char *ptr;  /* owned, NUL-terminated for convenience */
			size_t len; /* bytes, not counting the terminator */
		} str;              /* JSON_STRING */
		struct {
			struct json_value **items; /* owned; n used, cap room */
			size_t n, cap;
		} arr; /* JSON_ARRAY */
		struct {
			struct json_member *members; /* owned; n used */
			size_t n, cap;
		} obj; /* JSON_OBJECT */
	} u;
};

/*
 * Parse LEN bytes of TEXT (no terminator needed) into a new tree stored in
 * *OUT.  Returns 0, or -1 with "line L, column C: what" in ERR (then *OUT
 * is NULL).  The caller owns *OUT and frees it with json_free().
 */
int json_parse(const char *text, size_t len, struct json_value **out, char *err,
               size_t errlen);

/* Free a tree (NULL is fine). */
void json_free(struct json_value *v);

/* Constructors: each returns a new node owned by the caller, or NULL when
 * memory runs out.  json_new_string copies LEN bytes of S. */
struct json_value *json_new_null(void);
struct json_value *json_new_bool(bool b);
struct json_value *json_new_int(int64_t i);
struct json_value *json_new_float(double f);
struct json_value *json_new_string(const char *s, size_t len);
struct json_value *json_new_array(void);
struct json_value *json_new_object(void);

/* Append V to array A; takes ownership of V even on failure (-1: no
 * memory, or A is not an array; V is then freed). */
int json_array_push(struct json_value *a, struct json_value *v);

/* Set member KEY (KLEN bytes) of object O to V, replacing an existing
 * member of that key in place.  Takes ownership of V even on failure. */
int json_object_set(struct json_value *o, const char *key, size_t klen,
                    struct json_value *v);

/* Member KEY (NUL-terminated) of object O, or NULL (also when O is not an
 * object).  The result is borrowed from O. */
const struct json_value *json_object_get(const struct json_value *o,
                                         const char *key);

/* A deep copy of V owned by the caller, or NULL (no memory). */
struct json_value *json_clone(const struct json_value *v);

/* Output options of json_serialize, mirroring Python json.dumps. */
struct json_fmt {
	int indent;        /* < 0: one line with ", " and ": "; >= 0: that
	                      many spaces per level, "," and ": " */
	bool ensure_ascii; /* escape non-ASCII as \uXXXX (surrogate pairs) */
	bool sort_keys;    /* members in byte order of their keys */
};

/* A growable byte buffer (used by the serializer and the template
 * renderer).  MAX bounds its size; 0 means 1 GiB. */
struct json_buf {
	char *ptr;  /* owned, NUL-terminated when non-NULL */
	size_t len; /* bytes used */
	size_t cap; /* bytes allocated */
	size_t max; /* refuse to grow past this many bytes */
};

/* Append LEN bytes; -1 when memory runs out or MAX would be passed. */
int json_buf_add(struct json_buf *b, const char *s, size_t len);

/*
 * Serialize V into *OUT (malloc'd, NUL-terminated, owned by the caller)
 * and its length into *OUTLEN, the way json.dumps(v, indent, ensure_ascii,
 * sort_keys) does.  Returns 0 or -1 with a message (no memory).
 */
int json_serialize(const struct json_value *v, const struct json_fmt *fmt,
                   char **out, size_t *outlen, char *err, size_t errlen);

/* Append V serialized (as json_serialize) to B; LEVEL is the current
 * indentation level (0 at the top).  Returns 0 or -1 (buffer limit). */
int json_write(struct json_buf *b, const struct json_value *v,
               const struct json_fmt *fmt, int level);

/* Append string S (LEN bytes of UTF-8) as a JSON string literal. */
int json_write_string(struct json_buf *b, const char *s, size_t len,
                      bool ensure_ascii);

/*
 * Format F the way Python's repr(float) does ("1.0", "0.1", "1e+20",
 * "inf", "nan") into BUF (at least 32 bytes).  JSON flavour (JSON_ != 0)
 * writes "Infinity", "-Infinity" and "NaN" instead, as json.dumps does.
 * Returns the length.
 */
size_t json_fmt_double(double f, bool json_flavour, char *buf, size_t n);

#endif /* PARLEY_JSON_H */

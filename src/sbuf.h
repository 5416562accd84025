/*
 * sbuf.h - a growable byte buffer for building output text.
 *
 * Invariant: buf is NUL-terminated at len whenever it is non-NULL, so the
 * contents can be used as a C string; embedded NULs are allowed (len counts
 * them). An allocation failure sets `failed` and turns later appends into
 * no-ops, so callers check once, at the end.
 */
#ifndef PARLEY_SBUF_H
#define PARLEY_SBUF_H

#include <stdbool.h>
#include <stddef.h>

struct sbuf {
	char *buf;   /* contents, NUL-terminated (owned) */
	size_t len;  /* bytes used, excluding the terminator */
	size_t cap;  /* bytes allocated */
	bool failed; /* an allocation failed; contents are truncated */
};

#define SBUF_INIT                                                              \
	{                                                                      \
		NULL, 0, 0, false                                              \
	}

/* Append N bytes at P. */
void sbuf_add(struct sbuf *sb, const void *p, size_t n);
/* Append the C string Z. */
void sbuf_adds(struct sbuf *sb, const char *z);
/* Append formatted text. */
void sbuf_printf(struct sbuf *sb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Append N bytes at P as the inside of a JSON string (no quotes added);
 * control characters and invalid UTF-8 bytes are escaped as \u00XX. */
void sbuf_add_json_str(struct sbuf *sb, const char *p, size_t n);
/* Hand the contents to the caller (who frees them) and reset SB. */
char *sbuf_take(struct sbuf *sb);
/* Free the contents and reset SB. */
void sbuf_free(struct sbuf *sb);

#endif /* PARLEY_SBUF_H */

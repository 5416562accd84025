/*
 * tok_util.h - helpers shared by the tokenizer tests: locating the shared
 * test data and the default model, reading whole files, parsing id lists.
 * Header-only (static functions), included by tests/t_tok_*.c and the
 * bench tool.
 */
#ifndef PARLEY_TOK_UTIL_H
#define PARLEY_TOK_UTIL_H

#include "testenv.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* PATH of a file under the shared test data (../shared), into BUF. */
static inline const char *tu_shared(const char *rel, char *buf, size_t n)
{
	const char *s = getenv("PARLEY_SHARED");
	const char *src = getenv("top_srcdir");

	if (src == NULL || *src == 0)
		src = getenv("srcdir");

	if (s && *s)
		snprintf(buf, n, "%s/%s", s, rel);
	else
		snprintf(buf, n, "%s/../shared/%s", src && *src ? src : ".",
		         rel);
	return buf;
}

/* PATH of the default model (PARLEY_TEST_MODEL or the XDG cache). */
static inline const char *tu_model(char *buf, size_t n)
{
	return testenv_model(buf, n);
}

/* A path under the source tree (top_srcdir, srcdir or "."). */
static inline const char *tu_src(const char *rel, char *buf, size_t n)
{
	const char *src = getenv("top_srcdir");

	if (src == NULL || *src == 0)
		src = getenv("srcdir");

	snprintf(buf, n, "%s/%s", src && *src ? src : ".", rel);
	return buf;
}

/* Read PATH whole (NUL-terminated, *len bytes); NULL if unreadable. The
   caller frees the result. */
static inline char *tu_read(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *p = NULL;
	long n;

	if (f == NULL)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
	    fseek(f, 0, SEEK_SET) == 0 && (p = malloc((size_t)n + 1))) {
		if (fread(p, 1, (size_t)n, f) != (size_t)n) {
			free(p);
			p = NULL;
		} else {
			p[n] = 0;
			*len = (size_t)n;
		}
	}
	fclose(f);
	return p;
}

/* Parse space-separated ids from S up to the end of the line into V
   (at most cap); returns the count, or -1 on a malformed number. *END is
   set past the newline. */
static inline long tu_parse_ids(const char *s, int32_t *v, size_t cap,
                                const char **end)
{
	long n = 0;

	for (;;) {
		char *e;
		long x;

		while (*s == ' ')
			s++;
		if (*s == '\n' || *s == 0)
			break;
		x = strtol(s, &e, 10);
		if (e == s || (size_t)n >= cap)
			return -1;
		v[n++] = (int32_t)x;
		s = e;
	}
	*end = *s ? s + 1 : s;
	return n;
}

#endif /* PARLEY_TOK_UTIL_H */

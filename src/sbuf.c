/*
 * sbuf.c - growable byte buffer.
 */
#include "sbuf.h"

#include "utf8.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Make room for N more bytes plus the terminator. */
static bool sbuf_reserve(struct sbuf *sb, size_t n)
{
	size_t need, cap;
	char *nb;

	if (sb->failed)
		return false;
	if (n > SIZE_MAX - sb->len - 1) {
		sb->failed = true;
		return false;
	}
	need = sb->len + n + 1;
	if (need <= sb->cap)
		return true;
	cap = sb->cap ? sb->cap : 64;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	nb = realloc(sb->buf, cap);
	if (nb == NULL) {
		sb->failed = true;
		return false;
	}
	sb->buf = nb;
	sb->cap = cap;
	return true;
}

void sbuf_add(struct sbuf *sb, const void *p, size_t n)
{
	if (!sbuf_reserve(sb, n))
		return;
	if (n > 0)
		memcpy(sb->buf + sb->len, p, n);
	sb->len += n;
	sb->buf[sb->len] = '\0';
}

void sbuf_adds(struct sbuf *sb, const char *z)
{
	sbuf_add(sb, z, strlen(z));
}

void sbuf_printf(struct sbuf *sb, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !sbuf_reserve(sb, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	sb->len += (size_t)n;
}

void sbuf_add_json_str(struct sbuf *sb, const char *p, size_t n)
{
	const unsigned char *s = (const unsigned char *)p;
	size_t i = 0;

	while (i < n) {
		size_t l = utf8_valid_len(s + i, n - i);

		if (l == 0) {
			sbuf_printf(sb, "\\u%04x", s[i]);
			i++;
		} else if (l > 1) {
			sbuf_add(sb, s + i, l);
			i += l;
		} else if (s[i] == '"' || s[i] == '\\') {
			sbuf_printf(sb, "\\%c", s[i]);
			i++;
		} else if (s[i] == '\n') {
			sbuf_adds(sb, "\\n"), i++;
		} else if (s[i] == '\t') {
			sbuf_adds(sb, "\\t"), i++;
		} else if (s[i] == '\r') {
			sbuf_adds(sb, "\\r"), i++;
		} else if (s[i] < 0x20 || s[i] == 0x7f) {
			sbuf_printf(sb, "\\u%04x", s[i]);
			i++;
		} else {
			sbuf_add(sb, s + i, 1);
			i++;
		}
	}
}

char *sbuf_take(struct sbuf *sb)
{
	char *p = sb->buf;

	if (p == NULL)
		p = calloc(1, 1);
	sb->buf = NULL;
	sb->len = sb->cap = 0;
	sb->failed = false;
	return p;
}

void sbuf_free(struct sbuf *sb)
{
	free(sb->buf);
	sb->buf = NULL;
	sb->len = sb->cap = 0;
	sb->failed = false;
}

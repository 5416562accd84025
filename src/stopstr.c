/*
 * stopstr.c - stop strings across token boundaries. See stopstr.h.
 */
#include "stopstr.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct stopstr {
	char **stop;    /* n stop strings (owned, NUL-terminated) */
	size_t *len;    /* n lengths */
	size_t n;       /* number of stop strings */
	char *buf;      /* pending text: held tail, then the new piece */
	size_t used;    /* bytes in buf */
	size_t cap;     /* bytes allocated in buf */
	char *out;      /* released text of the last call (owned) */
	size_t out_cap; /* bytes allocated in out */
	bool stopped;   /* a stop string was found */
	int which;      /* its index, else -1 */
};

struct stopstr *stopstr_new(const char *const *stops, size_t n, char *err,
                            size_t errlen)
{
	struct stopstr *d;

	if (n > STOPSTR_MAX_STRINGS) {
		snprintf(err, errlen, "stop strings: %zu given, at most %d", n,
		         STOPSTR_MAX_STRINGS);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(stops[i]);

		if (l == 0 || l > STOPSTR_MAX_LEN) {
			snprintf(err, errlen,
			         "stop string %zu: length %zu not in 1..%d", i,
			         l, STOPSTR_MAX_LEN);
			return NULL;
		}
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		goto oom;
	d->stop = calloc(n ? n : 1, sizeof(*d->stop));
	d->len = calloc(n ? n : 1, sizeof(*d->len));
	if (!d->stop || !d->len)
		goto oom;
	d->n = n;
	for (size_t i = 0; i < n; i++) {
		d->len[i] = strlen(stops[i]);
		d->stop[i] = malloc(d->len[i] + 1);
		if (!d->stop[i])
			goto oom;
		memcpy(d->stop[i], stops[i], d->len[i] + 1);
	}
	d->which = -1;
	return d;
oom:
	stopstr_free(d);
	snprintf(err, errlen, "stop strings: out of memory");
	return NULL;
}

void stopstr_free(struct stopstr *d)
{
	if (!d)
		return;
	for (size_t i = 0; d->stop && i < d->n; i++)
		free(d->stop[i]);
	free(d->stop);
	free(d->len);
	free(d->buf);
	free(d->out);
	free(d);
}

size_t stopstr_count(const struct stopstr *d)
{
	return d->n;
}

void stopstr_reset(struct stopstr *d)
{
	d->used = 0;
	d->stopped = false;
	d->which = -1;
}

/* Grow *P (capacity *CAP) to hold at least NEED bytes. */
static int grow(char **p, size_t *cap, size_t need)
{
	size_t c = *cap ? *cap : 64;
	char *q;

	if (need <= *cap)
		return 0;
	while (c < need) {
		if (c > SIZE_MAX / 2)
			return -1;
		c *= 2;
	}
	q = realloc(*p, c);
	if (!q)
		return -1;
	*p = q;
	*cap = c;
	return 0;
}

/* Bytes at the end of B[0..n) that start an incomplete UTF-8 sequence. */
static size_t utf8_incomplete_tail(const unsigned char *b, size_t n)
{
	for (size_t k = 1; k <= 3 && k <= n; k++) {
		unsigned char c = b[n - k];
		size_t need;

		if ((c & 0xc0) == 0x80)
			continue; /* continuation byte: look further back */
		need = c >= 0xf0 && c <= 0xf4  ? 4
		       : c >= 0xe0 && c < 0xf0 ? 3
		       : c >= 0xc2 && c < 0xe0 ? 2
		                               : 1;
		return need > k ? k : 0;
	}
	return 0;
}

/* Move B[0..n) into the output slot (B may be NULL when N is 0: a piece
 * that is no text fed before any buffer was allocated). */
static int set_out(struct stopstr *d, const char *b, size_t n,
                   struct stopstr_out *out)
{
	if (grow(&d->out, &d->out_cap, n + 1) != 0)
		return -1;
	if (n > 0)
		memcpy(d->out, b, n);
	d->out[n] = '\0';
	out->text = d->out;
	out->len = n;
	out->stopped = d->stopped;
	out->which = d->which;
	return 0;
}

int stopstr_feed(struct stopstr *d, const char *piece, size_t len,
                 struct stopstr_out *out, char *err, size_t errlen)
{
	size_t best = SIZE_MAX, hold = 0, emit;

	if (d->stopped ||
	    (len > 0 && (d->used > SIZE_MAX - len ||
	                 grow(&d->buf, &d->cap, d->used + len + 1) != 0))) {
		if (d->stopped)
			return set_out(d, "", 0, out) == 0 ? 0 : -1;
		snprintf(err, errlen, "stop strings: out of memory");
		return -1;
	}
	if (len > 0)
		memcpy(d->buf + d->used, piece, len);
	d->used += len;
	/* earliest match; on equal starts the longest string */
	for (size_t i = 0; i < d->n; i++) {
		const char *h = d->buf;
		size_t left = d->used;

		while (left >= d->len[i]) {
			const char *p =
			    memchr(h, d->stop[i][0], left - d->len[i] + 1);
			size_t at;

			if (!p)
				break;
			at = (size_t)(p - d->buf);
			if (memcmp(p, d->stop[i], d->len[i]) == 0) {
				if (at < best ||
				    (at == best &&
				     d->len[i] > d->len[d->which])) {
					best = at;
					d->which = (int)i;
				}
				break;
			}
			left = d->used - at - 1;
			h = p + 1;
		}
	}
	if (best != SIZE_MAX) {
		d->stopped = true;
		d->used = 0;
		return set_out(d, d->buf, best, out) == 0 ? 0 : -1;
	}
	/* hold the longest suffix that is a proper prefix of a stop string */
	for (size_t i = 0; i < d->n; i++)
		for (size_t k = d->len[i] - 1; k > hold; k--)
			if (k <= d->used &&
			    memcmp(d->buf + d->used - k, d->stop[i], k) == 0) {
				hold = k;
				break;
			}
	emit = d->used - hold;
	emit -= utf8_incomplete_tail((const unsigned char *)d->buf, emit);
	if (set_out(d, d->buf, emit, out) != 0) {
		snprintf(err, errlen, "stop strings: out of memory");
		return -1;
	}
	if (emit > 0 && d->used > emit)
		memmove(d->buf, d->buf + emit, d->used - emit);
	d->used -= emit;
	return 0;
}

void stopstr_flush(struct stopstr *d, struct stopstr_out *out)
{
	/* swap the buffers: buf always has room for the terminator */
	char *t = d->out;
	size_t tc = d->out_cap;

	d->out = d->buf;
	d->out_cap = d->cap;
	d->buf = t;
	d->cap = tc;
	if (d->out)
		d->out[d->used] = '\0';
	out->text = d->out ? d->out : "";
	out->len = d->used;
	out->stopped = d->stopped;
	out->which = d->which;
	d->used = 0;
}

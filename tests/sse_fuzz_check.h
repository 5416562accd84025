/*
 * sse_fuzz_check.h - the property the SSE parser must keep on any input
 * (shared by tests/t_sse.c and fuzz/fuzz_sse.c): the events and the
 * "cut" flag are the same whether the bytes come all at once, split at
 * one point, or one byte at a time; each event's data is NUL-terminated
 * at data_len and its name is not empty.
 */
#ifndef PARLEY_SSE_FUZZ_CHECK_H
#define PARLEY_SSE_FUZZ_CHECK_H

#include "sse.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The events of one parse, each as NAME_LEN NAME DATA_LEN DATA. */
struct sse_fuzz_log {
	char *buf;
	size_t n, cap;
	bool bad; /* an event broke an invariant (or no memory) */
};

static int sse_fuzz_put(struct sse_fuzz_log *l, const void *p, size_t n)
{
	if (l->n + n > l->cap) {
		size_t c = l->cap ? l->cap * 2 : 1024;
		char *q;

		while (c < l->n + n)
			c *= 2;
		q = realloc(l->buf, c);
		if (q == NULL)
			return -1;
		l->buf = q;
		l->cap = c;
	}
	memcpy(l->buf + l->n, p, n);
	l->n += n;
	return 0;
}

static int sse_fuzz_event(void *ud, const struct sse_event *ev)
{
	struct sse_fuzz_log *l = ud;

	if (ev->name_len == 0 || ev->data[ev->data_len] != '\0')
		l->bad = true;
	if (sse_fuzz_put(l, &ev->name_len, sizeof(ev->name_len)) ||
	    sse_fuzz_put(l, ev->name, ev->name_len) ||
	    sse_fuzz_put(l, &ev->data_len, sizeof(ev->data_len)) ||
	    sse_fuzz_put(l, ev->data, ev->data_len))
		l->bad = true;
	return 0;
}

/* Parse D[0, n) in chunks of STEP bytes (0: whole) after a first chunk of
   FIRST bytes; the log into L, the cut flag into *PENDING. */
static void sse_fuzz_run(const char *d, size_t n, size_t first, size_t step,
                         struct sse_fuzz_log *l, bool *pending)
{
	struct sse p;
	char err[128];
	size_t i = 0;
	bool start = true;

	sse_init(&p);
	while (start || i < n) {
		size_t c = start ? first : step ? step : n - i;

		start = false;
		if (c > n - i)
			c = n - i;
		if (sse_feed(&p, d + i, c, sse_fuzz_event, l, err,
		             sizeof(err)) != 0) {
			l->bad = true; /* only over SSE_MAX_EVENT: not here */
			break;
		}
		i += c;
	}
	*pending = sse_pending(&p);
	sse_reset(&p);
}

/* 0 when D[0, n) keeps the property, 1 when it does not. */
static int sse_fuzz_check(const char *d, size_t n)
{
	struct sse_fuzz_log a = {0}, b = {0}, c = {0};
	bool pa, pb, pc;
	size_t cut = n ? (unsigned char)d[0] % (n + 1) : 0;
	int bad;

	sse_fuzz_run(d, n, n, 0, &a, &pa);
	sse_fuzz_run(d, n, cut, 0, &b, &pb);
	sse_fuzz_run(d, n, 1, 1, &c, &pc);
	bad = a.bad || b.bad || c.bad || pa != pb || pa != pc || a.n != b.n ||
	      a.n != c.n ||
	      (a.n && (memcmp(a.buf, b.buf, a.n) || memcmp(a.buf, c.buf, a.n)));
	free(a.buf);
	free(b.buf);
	free(c.buf);
	return bad;
}

#endif /* PARLEY_SSE_FUZZ_CHECK_H */

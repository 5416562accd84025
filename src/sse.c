/*
 * sse.c - server-sent events, parsed incrementally (see sse.h).
 *
 * Invariant between calls: line holds the bytes of the current line after
 * its last end (never a CR or LF), data the event's data lines so far each
 * followed by a LF, name the event field's value; after_cr is set when the
 * last byte fed was a CR, so that a LF starting the next chunk ends
 * nothing (a CRLF split between chunks is one line end).
 */
#include "sse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const unsigned char sse_bom[3] = {0xef, 0xbb, 0xbf};

void sse_init(struct sse *p)
{
	memset(p, 0, sizeof(*p));
}

void sse_reset(struct sse *p)
{
	free(p->line);
	free(p->data);
	free(p->name);
	sse_init(p);
}

bool sse_pending(const struct sse *p)
{
	return p->line_len > 0 || p->data_len > 0 || p->bom_seen > 0;
}

/* Append N bytes of S to the buffer *B (*LEN used, *CAP allocated), keeping
   room for a NUL. 0, or -1 when over SSE_MAX_EVENT or out of memory. */
static int sse_add(char **b, size_t *len, size_t *cap, const char *s, size_t n,
                   char *err, size_t errlen)
{
	if (n > SSE_MAX_EVENT - *len) {
		snprintf(err, errlen, "server-sent event longer than %u MiB",
		         SSE_MAX_EVENT >> 20);
		return -1;
	}
	if (*len + n + 1 > *cap) {
		size_t c = *cap ? *cap : 256;
		char *q;

		while (c < *len + n + 1)
			c *= 2;
		q = realloc(*b, c);
		if (q == NULL) {
			snprintf(err, errlen,
			         "server-sent event: out of memory");
			return -1;
		}
		*b = q;
		*cap = c;
	}
	if (n)
		memcpy(*b + *len, s, n);
	*len += n;
	(*b)[*len] = '\0';
	return 0;
}

/* The empty line: dispatch the event if it has data (rule 4). */
static int sse_dispatch(struct sse *p, sse_cb cb, void *ud)
{
	struct sse_event ev;
	int rc = 0;

	if (p->data_len > 0) {
		p->data[--p->data_len] = '\0'; /* the last LF */
		ev.name = p->name_len ? p->name : "message";
		ev.name_len = p->name_len ? p->name_len : 7;
		ev.data = p->data;
		ev.data_len = p->data_len;
		rc = cb ? cb(ud, &ev) : 0;
	}
	p->data_len = 0;
	p->name_len = 0;
	return rc;
}

/* One complete line (rules 2-4). */
static int sse_line(struct sse *p, sse_cb cb, void *ud, char *err,
                    size_t errlen)
{
	const char *l = p->line ? p->line : "", *v, *c;
	size_t n = p->line_len, f, vn;

	p->line_len = 0;
	if (n == 0)
		return sse_dispatch(p, cb, ud);
	if (l[0] == ':')
		return 0; /* a comment */
	c = memchr(l, ':', n);
	f = c ? (size_t)(c - l) : n;
	v = c ? c + 1 : l + n;
	vn = (size_t)(l + n - v);
	if (vn > 0 && v[0] == ' ') {
		v++;
		vn--;
	}
	if (f == 4 && memcmp(l, "data", 4) == 0)
		return sse_add(&p->data, &p->data_len, &p->data_cap, v, vn, err,
		               errlen) ||
		               sse_add(&p->data, &p->data_len, &p->data_cap,
		                       "\n", 1, err, errlen)
		           ? -1
		           : 0;
	if (f == 5 && memcmp(l, "event", 5) == 0) {
		p->name_len = 0;
		return sse_add(&p->name, &p->name_len, &p->name_cap, v, vn, err,
		               errlen);
	}
	return 0; /* id, retry and unknown fields */
}

/* Skip a UTF-8 BOM at the very start of the stream (rule 1); the bytes of
   BUF it used are returned. A partial match that fails is line text. */
static size_t sse_bom_skip(struct sse *p, const char *buf, size_t len,
                           char *err, size_t errlen, int *rc)
{
	size_t i = 0;

	*rc = 0;
	while (!p->started && i < len) {
		if ((unsigned char)buf[i] == sse_bom[p->bom_seen]) {
			i++;
			if (++p->bom_seen == sizeof(sse_bom)) {
				p->started = true;
				p->bom_seen = 0;
			}
			continue;
		}
		/* not a BOM: the bytes matched so far were text */
		p->started = true;
		*rc = sse_add(&p->line, &p->line_len, &p->line_cap,
		              (const char *)sse_bom, p->bom_seen, err, errlen);
		p->bom_seen = 0;
	}
	return i;
}

int sse_feed(struct sse *p, const char *buf, size_t len, sse_cb cb, void *ud,
             char *err, size_t errlen)
{
	size_t i;
	int rc;

	if (p->dead) {
		snprintf(err, errlen,
		         "server-sent events: input after the end");
		return -1;
	}
	i = sse_bom_skip(p, buf, len, err, errlen, &rc);
	while (rc == 0 && i < len) {
		size_t j = i;

		if (p->after_cr && buf[i] == '\n') {
			p->after_cr = false;
			i++;
			continue;
		}
		p->after_cr = false;
		while (j < len && buf[j] != '\n' && buf[j] != '\r')
			j++;
		rc = sse_add(&p->line, &p->line_len, &p->line_cap, buf + i,
		             j - i, err, errlen);
		if (rc != 0 || j == len)
			break;
		p->after_cr = buf[j] == '\r';
		i = j + 1;
		rc = sse_line(p, cb, ud, err, errlen);
	}
	if (rc != 0)
		p->dead = true;
	return rc;
}

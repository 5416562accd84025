/*
 * harmony.c - gpt-oss's harmony messages split into reasoning and answer
 * as the reply streams (the notes and the state diagram are in
 * harmony.h).
 */
#include "harmony.h"

#include <stdlib.h>
#include <string.h>

enum harmony_marker {
	HM_START,
	HM_END,
	HM_MESSAGE,
	HM_CHANNEL,
	HM_CONSTRAIN,
	HM_RETURN,
	HM_CALL,
	HM_COUNT,
};

static const char *const harmony_markers[HM_COUNT] = {
    "<|start|>",     "<|end|>",    "<|message|>", "<|channel|>",
    "<|constrain|>", "<|return|>", "<|call|>",
};

/* Whether byte C is a blank. */
static bool harmony_blank(char c)
{
	return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

void harmony_init(struct harmony *h)
{
	memset(h, 0, sizeof(*h));
	h->state = HARMONY_START;
}

void harmony_init_analysis(struct harmony *h)
{
	harmony_init(h);
	h->state = HARMONY_BODY;
	h->body_reasoning = true;
}

void harmony_free(struct harmony *h)
{
	free(h->pend.p);
	free(h->hdr.p);
	free(h->note.p);
	h->pend = (struct tok_buf){0};
	h->hdr = (struct tok_buf){0};
	h->note = (struct tok_buf){0};
}

/* Begin the current body's output: the blank line that joins it to an
   earlier body of the same side, and its note. */
static int harmony_begin(struct harmony *h, harmony_fn out, void *ud)
{
	bool r = h->body_reasoning;
	size_t *n = r ? &h->n_reasoning : &h->n_answer;

	h->body_begun = true;
	if (*n > 0 && out(ud, r, "\n\n", 2))
		return -1;
	if (h->note.n && out(ud, r, h->note.p, h->note.n))
		return -1;
	*n += (*n > 0 ? 2 : 0) + h->note.n;
	h->note.n = 0;
	return 0;
}

/* A body that ends before its first byte: its note alone, if any. */
static int harmony_note(struct harmony *h, harmony_fn out, void *ud)
{
	if (h->state == HARMONY_BODY && !h->body_begun && h->note.n)
		return harmony_begin(h, out, ud);
	return 0;
}

/* Release LEN bytes of the current body (START's text is answer). */
static int harmony_out(struct harmony *h, const char *p, size_t len,
                       harmony_fn out, void *ud)
{
	bool r = h->state == HARMONY_BODY && h->body_reasoning;

	if (len == 0)
		return 0;
	if (h->state == HARMONY_BODY && !h->body_begun &&
	    harmony_begin(h, out, ud))
		return -1;
	*(r ? &h->n_reasoning : &h->n_answer) += len;
	return out(ud, r, p, len);
}

/* Begin a body: REASONING or answer, NOTE[0, nlen) written before its
   first bytes. 0 or -1 (no memory). */
static int harmony_body(struct harmony *h, bool reasoning, const char *note,
                        size_t nlen)
{
	h->state = HARMONY_BODY;
	h->ended = false;
	h->body_reasoning = reasoning;
	h->body_begun = false;
	h->note.n = 0;
	return nlen ? tok_buf_append(&h->note, note, nlen) : 0;
}

/* The header in hdr ended (by <|message|> when CUT is false): start its
   body. The first word names the channel; cut short, the rest of the
   header is the body's first bytes. */
static int harmony_header_end(struct harmony *h, bool cut, harmony_fn out,
                              void *ud)
{
	const char *p = h->hdr.p ? h->hdr.p : "";
	size_t n = h->hdr.n, b = 0, w, e;
	int rc;

	while (b < n && harmony_blank(p[b]))
		b++;
	for (w = b; w < n && !harmony_blank(p[w]); w++)
		;
	e = n;
	if (!cut)
		while (e > b && harmony_blank(p[e - 1]))
			e--;
	if (w - b == 5 && memcmp(p + b, "final", 5) == 0) {
		rc = harmony_body(h, false, NULL, 0);
	} else if (w - b == 8 && memcmp(p + b, "analysis", 8) == 0) {
		rc = harmony_body(h, true, NULL, 0);
	} else {
		/* commentary, unknown: noted with the header (cut short:
		   the channel word only, the rest is text) */
		size_t nl = (cut ? w : e) - b;
		char *note = malloc(nl + 3);

		if (note == NULL)
			return -1;
		note[0] = '[';
		memcpy(note + 1, p + b, nl);
		memcpy(note + 1 + nl, "] ", 2);
		rc = harmony_body(h, true, note, nl + 3);
		free(note);
	}
	h->hdr.n = 0;
	if (rc == 0 && cut) {
		while (w < n && harmony_blank(p[w]))
			w++;
		rc = harmony_out(h, p + w, n - w, out, ud);
	}
	return rc;
}

/* Bytes P[0, len) outside markers, in the current state. */
static int harmony_text(struct harmony *h, const char *p, size_t len,
                        harmony_fn out, void *ud)
{
	size_t b = 0;

	switch (h->state) {
	case HARMONY_START:
	case HARMONY_BODY:
		return harmony_out(h, p, len, out, ud);
	case HARMONY_ROLE:
		/* the role name: kept only to be dropped */
		if (h->hdr.n + len > HARMONY_HEADER_MAX) {
			/* no role is that long: text without a header */
			size_t hn = h->hdr.n;

			h->hdr.n = 0;
			if (harmony_body(h, false, NULL, 0) ||
			    harmony_out(h, h->hdr.p, hn, out, ud))
				return -1;
			return harmony_out(h, p, len, out, ud);
		}
		return tok_buf_append(&h->hdr, p, len);
	case HARMONY_HEADER:
		/* cut at HARMONY_HEADER_MAX + 1 bytes whatever the pieces */
		b = HARMONY_HEADER_MAX + 1 - h->hdr.n;
		if (tok_buf_append(&h->hdr, p, len < b ? len : b))
			return -1;
		if (h->hdr.n <= HARMONY_HEADER_MAX)
			return 0;
		if (harmony_header_end(h, true, out, ud))
			return -1;
		return harmony_out(h, p + b, len - b, out, ud);
	case HARMONY_BETWEEN:
		while (b < len && harmony_blank(p[b]))
			b++;
		if (b == len)
			return 0;
		if (harmony_body(h, false, NULL, 0))
			return -1;
		return harmony_out(h, p + b, len - b, out, ud);
	}
	return 0;
}

/* Marker M in the current state. */
static int harmony_marker(struct harmony *h, enum harmony_marker m,
                          harmony_fn out, void *ud)
{
	if (h->state == HARMONY_HEADER && m == HM_CONSTRAIN)
		return h->hdr.n >= HARMONY_HEADER_MAX ||
		               (h->hdr.n &&
		                harmony_blank(h->hdr.p[h->hdr.n - 1]))
		           ? 0
		           : tok_buf_append(&h->hdr, " ", 1);
	if (h->state == HARMONY_HEADER &&
	    harmony_header_end(h, m != HM_MESSAGE, out, ud))
		return -1;
	if (m != HM_MESSAGE && m != HM_CONSTRAIN && harmony_note(h, out, ud))
		return -1;
	switch (m) {
	case HM_START:
		h->state = HARMONY_ROLE;
		h->hdr.n = 0;
		return 0;
	case HM_CHANNEL:
		h->state = HARMONY_HEADER;
		h->hdr.n = 0;
		return 0;
	case HM_MESSAGE:
		/* without a channel: an answer (after a header: begun) */
		if (h->state == HARMONY_ROLE || h->state == HARMONY_START ||
		    h->state == HARMONY_BETWEEN) {
			h->hdr.n = 0;
			return harmony_body(h, false, NULL, 0);
		}
		return 0;
	case HM_RETURN:
	case HM_CALL:
		h->ended = true;
		/* fall through */
	case HM_END:
		h->state = HARMONY_BETWEEN;
		h->hdr.n = 0;
		return 0;
	case HM_CONSTRAIN:
	case HM_COUNT:
		break;
	}
	return 0;
}

/* The marker at P[0, n): its index, HM_COUNT when none, or -1 when P may
   be the beginning of one (n too short to tell). */
static int harmony_match(const char *p, size_t n)
{
	bool maybe = false;

	for (int k = 0; k < HM_COUNT; k++) {
		size_t ml = strlen(harmony_markers[k]);

		if (n >= ml && memcmp(p, harmony_markers[k], ml) == 0)
			return k;
		if (n < ml && memcmp(p, harmony_markers[k], n) == 0)
			maybe = true;
	}
	return maybe ? -1 : HM_COUNT;
}

int harmony_feed(struct harmony *h, const char *p, size_t len, harmony_fn out,
                 void *ud)
{
	size_t at = 0, k = 0, n;
	const char *b;
	int rc = 0, m = HM_COUNT;

	if (len == 0 && h->pend.n == 0)
		return 0;
	if (len && tok_buf_append(&h->pend, p, len))
		return -1;
	b = h->pend.p;
	n = h->pend.n;
	while (k < n && rc == 0) {
		const char *lt = memchr(b + k, '<', n - k);

		if (lt == NULL) {
			k = n;
			break;
		}
		k = (size_t)(lt - b);
		m = harmony_match(b + k, n - k);
		if (m < 0)
			break; /* maybe a marker: hold from k */
		if (m == HM_COUNT) {
			k++;
			continue;
		}
		rc = harmony_text(h, b + at, k - at, out, ud);
		if (rc == 0)
			rc = harmony_marker(h, (enum harmony_marker)m, out, ud);
		k += strlen(harmony_markers[m]);
		at = k;
	}
	if (rc == 0)
		rc = harmony_text(h, b + at, k - at, out, ud);
	/* keep the held tail (from k: empty unless it may be a marker) */
	if (k < n)
		memmove(h->pend.p, b + k, n - k);
	h->pend.n = n - (k < n ? k : n);
	return rc;
}

int harmony_flush(struct harmony *h, harmony_fn out, void *ud)
{
	int rc = 0;

	if (h->pend.n) {
		rc = harmony_text(h, h->pend.p, h->pend.n, out, ud);
		h->pend.n = 0;
	}
	if (rc == 0 && h->state == HARMONY_HEADER)
		rc = harmony_header_end(h, true, out, ud);
	return rc == 0 ? harmony_note(h, out, ud) : rc;
}

void harmony_end(struct harmony *h)
{
	h->ended = true;
}

bool harmony_in_reasoning(const struct harmony *h)
{
	if (h->ended)
		return false;
	if (h->state == HARMONY_HEADER)
		return h->hdr.n < 5 || memcmp(h->hdr.p, "final", 5) != 0;
	return h->state == HARMONY_BODY && h->body_reasoning;
}

bool harmony_vocab(const struct tok *t)
{
	static const char *const need[] = {
	    "<|channel|>", "<|message|>", "<|return|>", "<|start|>", "<|end|>"};

	for (size_t k = 0; k < sizeof(need) / sizeof(need[0]); k++)
		if (tok_find(t, need[k], strlen(need[k])) < 0)
			return false;
	return true;
}

/*
 * tok_stream.c - streaming decode: token pieces in, whole UTF-8 characters
 * out.
 *
 * A token may end in the middle of a character (byte-level BPE splits
 * emoji and CJK across tokens; SentencePiece's <0xXX> fallback emits one
 * byte per token). The decoder keeps the bytes of the incomplete trailing
 * character (at most 3) and emits them once the character is complete. A
 * byte that cannot be part of a valid character is replaced by U+FFFD at
 * once, so the output is always valid UTF-8.
 *
 * States: at_start (nothing emitted; for SentencePiece with a space prefix
 * the first space is still to be dropped) -> streaming, on the first
 * non-empty piece.
 */
#include "tok_impl.h"

#include <string.h>

static const char tok_repl[] = "\xef\xbf\xbd"; /* U+FFFD */

void tok_stream_init(struct tok_stream *s, const struct tok *t, unsigned flags)
{
	memset(s, 0, sizeof(*s));
	s->t = t;
	s->flags = flags;
	s->at_start = true;
}

/* True when the N bytes at P are a proper prefix of a valid character. */
static bool tok_stream_incomplete(const unsigned char *p, size_t n)
{
	size_t need, k;

	if (n == 0 || p[0] < 0xc2 || p[0] > 0xf4)
		return false;
	need = utf8_lead_len(p[0]);
	if (n >= need)
		return false;
	for (k = 1; k < n; k++)
		if ((p[k] & 0xc0) != 0x80)
			return false;
	/* second-byte limits that rule out overlongs and surrogates */
	if (n >= 2 &&
	    ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] > 0x9f) ||
	     (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] > 0x8f)))
		return false;
	return true;
}

/* Feed one byte C; append what becomes complete to OUT. */
static int tok_stream_byte(struct tok_stream *s, unsigned char c,
                           struct tok_buf *out)
{
	size_t len;

	s->pend[s->npend++] = c;
	for (;;) {
		len = utf8_valid_len(s->pend, s->npend);
		if (len > 0) {
			if (tok_buf_append(out, s->pend, len))
				return -1;
			memmove(s->pend, s->pend + len, s->npend - len);
			s->npend -= len;
		} else if (tok_stream_incomplete(s->pend, s->npend)) {
			return 0;
		} else {
			/* pend[0] can never start a character here */
			if (tok_buf_append(out, tok_repl, 3))
				return -1;
			memmove(s->pend, s->pend + 1, s->npend - 1);
			s->npend--;
		}
		if (s->npend == 0)
			return 0;
	}
}

int tok_stream_push(struct tok_stream *s, int32_t id, struct tok_buf *out)
{
	size_t len, k = 0;
	const char *p = tok_piece(s->t, id, s->flags, &len);

	if (p == NULL)
		return -1;
	if (len == 0)
		return 0;
	if (s->at_start) {
		s->at_start = false;
		if (s->t->add_space_prefix && p[0] == ' ')
			k = 1;
	}
	for (; k < len; k++)
		if (tok_stream_byte(s, (unsigned char)p[k], out))
			return -1;
	return 0;
}

int tok_stream_flush(struct tok_stream *s, struct tok_buf *out)
{
	if (s->npend > 0) {
		s->npend = 0;
		return tok_buf_append(out, tok_repl, 3);
	}
	return 0;
}

/*
 * tok_fuzz_check.h - the properties fuzz/fuzz_tok.c checks on any input,
 * shared with the replay of its regression files (t_tok_fuzz).
 *
 * For arbitrary bytes TEXT, with and without TOK_PARSE_SPECIAL:
 *   1. tok_encode succeeds and every id is in range;
 *   2. the streaming decoder accepts every id and emits valid UTF-8;
 *   3. if TEXT is valid UTF-8 and not parsed for specials:
 *      decode(encode(TEXT)) == TEXT (NFC(TEXT) for qwen2), unless the
 *      vocabulary lacks a byte of TEXT (HF drops it) or, for
 *      SentencePiece and Gemma 4's BPE, TEXT holds U+2581 (it decodes
 *      as a space).
 * Header-only; returns NULL when all hold, else what failed.
 */
#ifndef PARLEY_TOK_FUZZ_CHECK_H
#define PARLEY_TOK_FUZZ_CHECK_H

#include "tok.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* Bytes of the valid UTF-8 prefix of P[0..n) (n when all valid). */
static inline size_t tfc_valid_prefix(const char *p, size_t n)
{
	size_t off = 0;
	utf8proc_int32_t cp;

	while (off < n) {
		utf8proc_ssize_t l =
		    utf8proc_iterate((const utf8proc_uint8_t *)p + off,
		                     (utf8proc_ssize_t)(n - off), &cp);

		if (l <= 0)
			break;
		off += (size_t)l;
	}
	return off;
}

/* True when every byte of TEXT has a byte-level symbol in T (a byte alone
   then encodes to exactly one id). */
static inline int tfc_covered(const struct tok *t, const char *text, size_t n)
{
	unsigned char seen[256] = {0};
	char err[64];
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)text[i];
		struct tok_ids ids = {0};
		char b = (char)c;
		int one;

		if (seen[c])
			continue;
		seen[c] = 1;
		tok_encode(t, &b, 1, 0, &ids, err, sizeof(err));
		one = ids.n == 1;
		free(ids.v);
		if (!one)
			return 0;
	}
	return 1;
}

static inline const char *tok_fuzz_check(const struct tok *t, int nfc,
                                         const char *text, size_t n)
{
	const char *fail = NULL;
	unsigned flags;
	char err[256];

	for (flags = 0; flags <= TOK_PARSE_SPECIAL && !fail;
	     flags += TOK_PARSE_SPECIAL) {
		struct tok_ids ids = {0};
		struct tok_buf dec = {0}, str = {0};
		struct tok_stream s;
		utf8proc_uint8_t *want = NULL;
		utf8proc_ssize_t wn = (utf8proc_ssize_t)n;
		size_t i;

		if (tok_encode(t, text, n, flags | TOK_ADD_SPECIAL, &ids, err,
		               sizeof(err)) ||
		    (ids.n = 0,
		     tok_encode(t, text, n, flags, &ids, err, sizeof(err)))) {
			fail = "tok_encode failed";
			goto next;
		}
		tok_stream_init(&s, t, 0);
		for (i = 0; i < ids.n && !fail; i++) {
			if (ids.v[i] < 0 || ids.v[i] >= tok_n_vocab(t))
				fail = "id out of range";
			else if (tok_stream_push(&s, ids.v[i], &str))
				fail = "tok_stream_push failed";
		}
		if (!fail && (tok_stream_flush(&s, &str) ||
		              tfc_valid_prefix(str.p, str.n) != str.n))
			fail = "stream output is not valid UTF-8";
		if (fail || flags || tfc_valid_prefix(text, n) != n ||
		    (strcmp(tok_model_name(t), "bpe") == 0 &&
		     !tfc_covered(t, text, n)) ||
		    ((strcmp(tok_model_name(t), "spm") == 0 ||
		      strcmp(tok_pre_name(t), "gemma4") == 0) &&
		     memmem(text, n, "\xe2\x96\x81", 3) != NULL))
			goto next;
		if (tok_decode(t, ids.v, ids.n, 0, &dec, err, sizeof(err))) {
			fail = "tok_decode failed";
			goto next;
		}
		if (nfc)
			wn = utf8proc_map((const utf8proc_uint8_t *)text, wn,
			                  &want,
			                  UTF8PROC_STABLE | UTF8PROC_COMPOSE);
		if (wn < 0 || (size_t)wn != dec.n ||
		    (dec.n > 0 &&
		     memcmp(dec.p, want ? (const char *)want : text, dec.n)))
			fail = "decode(encode(x)) != x";
		free(want);
	next:
		free(ids.v);
		free(dec.p);
		free(str.p);
	}
	return fail;
}

#endif /* PARLEY_TOK_FUZZ_CHECK_H */

/*
 * prompt_check.h - properties of prompt_encode() (src/prompt.h), shared by
 * tests/t_prompt.c and fuzz/fuzz_prompt.c. For a byte-level BPE tokenizer
 * (lossless: the pieces of the ids are the text) and any text with any
 * provenance spans:
 *   1. the pieces of the ids (control tokens as their text) are the text
 *      (for texts whose bytes the vocabulary can all represent, see
 *      prompt_check_representable);
 *   2. a control id comes only from bytes that all lie in one template
 *      literal span (content never becomes a control token);
 *   3. with no spans (all literal) the ids equal tok_encode(text,
 *      TOK_PARSE_SPECIAL);
 *   4. marks increase, end at (all ids, all bytes), and restarting the
 *      encoding at any clean mark gives ids whose pieces are the text.
 */
#ifndef PARLEY_PROMPT_CHECK_H
#define PARLEY_PROMPT_CHECK_H

#include "prompt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * True when every byte value in TEXT has a token of its own. Some
 * vocabularies lack a few byte tokens (SmolLM2: 0x04, 0x06, 0x13, 0x14,
 * 0x16, 0x1d, 0xf2, ...), which tok_encode then drops, as Hugging Face
 * does; property 1 cannot hold for such texts.
 */
static int prompt_check_representable(const struct prompt_vocab *pv,
                                      const char *text, size_t len)
{
	static const struct tok *for_tok;
	static signed char ok[256]; /* 0 unknown, 1 yes, -1 no */

	if (for_tok != pv->tok) {
		memset(ok, 0, sizeof(ok));
		for_tok = pv->tok;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)text[i];

		if (ok[c] == 0) {
			struct tok_ids ids = {0};
			char err[64];
			size_t pl = 0;

			if (tok_encode(pv->tok, (const char *)&c, 1, 0, &ids,
			               err, sizeof(err)) == 0 &&
			    ids.n == 1)
				tok_piece(pv->tok, ids.v[0], 0, &pl);
			ok[c] = pl == 1 ? 1 : -1;
			free(ids.v);
		}
		if (ok[c] < 0)
			return 0;
	}
	return 1;
}

/* True when [a, b) lies inside one literal span. */
static int prompt_check_literal(const struct tmpl_span *sp, size_t n, size_t a,
                                size_t b)
{
	if (sp == NULL)
		return 1;
	for (size_t i = 0; i < n; i++)
		if (sp[i].off <= a && b <= sp[i].off + sp[i].len)
			return !sp[i].is_content;
	return 0;
}

/* Property 1 (and 2 when SPANS is given) for IDS; -1 with WHY. */
static int prompt_check_ids(const struct prompt_vocab *pv, const char *text,
                            size_t len, const struct tmpl_span *sp, size_t nsp,
                            const struct tok_ids *ids, char *why, size_t wlen)
{
	size_t pos = 0;

	for (size_t i = 0; i < ids->n; i++) {
		size_t pl;
		const char *p =
		    tok_piece(pv->tok, ids->v[i], TOK_DECODE_SPECIAL, &pl);

		if (p == NULL || pos + pl > len || memcmp(text + pos, p, pl)) {
			snprintf(why, wlen,
			         "id %zu (%d) does not match the text "
			         "at byte %zu",
			         i, ids->v[i], pos);
			return -1;
		}
		if (tok_is_control(pv->tok, ids->v[i]) &&
		    !prompt_check_literal(sp, nsp, pos, pos + pl)) {
			snprintf(why, wlen,
			         "control id %d from content at byte "
			         "%zu",
			         ids->v[i], pos);
			return -1;
		}
		pos += pl;
	}
	if (pos != len) {
		snprintf(why, wlen, "ids cover %zu of %zu bytes", pos, len);
		return -1;
	}
	return 0;
}

/* All properties for TEXT with SPANS (NULL: all literal). */
static int prompt_check(const struct prompt_vocab *pv, const char *text,
                        size_t len, const struct tmpl_span *sp, size_t nsp,
                        char *why, size_t wlen)
{
	struct tok_ids ids = {0}, ref = {0}, re = {0};
	struct prompt_marks mk = {0};
	char err[256];
	int rc = -1;

	if (prompt_encode(pv, text, len, sp, nsp, 0, &ids, &mk, err,
	                  sizeof(err))) {
		snprintf(why, wlen, "prompt_encode: %s", err);
		goto out;
	}
	if (prompt_check_ids(pv, text, len, sp, nsp, &ids, why, wlen))
		goto out;
	if (sp == NULL) {
		if (tok_encode(pv->tok, text, len, TOK_PARSE_SPECIAL, &ref, err,
		               sizeof(err)) ||
		    ref.n != ids.n ||
		    (ids.n && memcmp(ref.v, ids.v, ids.n * sizeof(*ids.v)))) {
			snprintf(why, wlen,
			         "differs from tok_encode "
			         "(%zu vs %zu ids)",
			         ids.n, ref.n);
			goto out;
		}
	}
	for (size_t k = 0; k < mk.n; k++) {
		const struct prompt_mark *m = &mk.v[k];

		if ((k && (m->n_tok < mk.v[k - 1].n_tok ||
		           m->n_bytes <= mk.v[k - 1].n_bytes)) ||
		    m->n_tok > ids.n || m->n_bytes > len) {
			snprintf(why, wlen, "mark %zu out of order", k);
			goto out;
		}
		if (!m->clean)
			continue;
		re.n = 0;
		for (size_t i = 0; i < m->n_tok; i++)
			tok_ids_push(&re, ids.v[i]);
		if (prompt_encode(pv, text, len, sp, nsp, m->n_bytes, &re, NULL,
		                  err, sizeof(err)) ||
		    prompt_check_ids(pv, text, len, sp, nsp, &re, why, wlen)) {
			size_t l = strlen(why);

			snprintf(why + l, wlen - l, " (restart at mark %zu)",
			         k);
			goto out;
		}
	}
	if (len > 0 && (mk.n == 0 || mk.v[mk.n - 1].n_tok != ids.n ||
	                mk.v[mk.n - 1].n_bytes != len)) {
		snprintf(why, wlen, "the last mark is not the end");
		goto out;
	}
	rc = 0;
out:
	free(ids.v);
	free(ref.v);
	free(re.v);
	free(mk.v);
	return rc;
}

#endif /* PARLEY_PROMPT_CHECK_H */

/*
 * tok_spm.c - SentencePiece BPE (Llama 2, TinyLlama, Gemma): the text's
 * spaces become U+2581 ("▁"), one "▁" is prepended when the model asks for
 * it, every UTF-8 character starts as a symbol, and adjacent symbols whose
 * concatenation is a token are merged highest score first (leftmost first
 * among equal scores), as sentencepiece's bpe_model.cc. A final symbol that
 * is not a token (a character outside the vocabulary) falls back to the
 * <0xXX> byte tokens, or to <unk> when those are missing.
 *
 * Merges may only produce NORMAL, USER_DEFINED or UNUSED tokens (the
 * pieces sentencepiece keeps in its merge table); control, unknown and
 * byte tokens are never reached by merging text.
 */
#include "tok_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One candidate merge of symbol LEFT with its successor. */
struct spm_cand {
	float score;   /* the merged token's score: higher first */
	int32_t left;  /* left symbol: lower first among equal scores */
	uint32_t size; /* bytes of the merged text when pushed */
	int32_t id;    /* the merged token */
};

/* A token that merging may produce. */
static bool spm_mergeable(const struct tok *t, int32_t id)
{
	uint8_t ty = t->type[id];

	return ty == TOK_TYPE_NORMAL || ty == TOK_TYPE_USER_DEFINED ||
	       ty == TOK_TYPE_UNUSED || ty == TOK_TYPE_UNDEFINED;
}

int tok_spm_setup(struct tok *t, char *err, size_t errlen)
{
	unsigned b;

	(void)err;
	(void)errlen;
	for (b = 0; b < 256; b++) {
		char name[8];
		int32_t id;

		snprintf(name, sizeof(name), "<0x%02X>", b);
		id = tok_lookup(t, name, 6);
		t->byte_id[b] =
		    id >= 0 && t->type[id] == TOK_TYPE_BYTE ? id : -1;
	}
	return 0;
}

static int spm_before(const struct spm_cand *a, const struct spm_cand *b)
{
	return a->score > b->score ||
	       (a->score == b->score && a->left < b->left);
}

/* Push the merge of symbol L with its successor if it is a token. */
static int spm_push(const struct tok *t, struct tok_scratch *sc, const char *s,
                    int32_t l)
{
	int32_t r, id;
	struct spm_cand *h, c;
	size_t i;

	if (l < 0 || (r = sc->sym_next[l]) < 0)
		return 0;
	id = tok_lookup(t, s + sc->sym_start[l],
	                sc->sym_len[l] + sc->sym_len[r]);
	if (id < 0 || !spm_mergeable(t, id))
		return 0;
	if (sc->heap_n == sc->heap_cap) {
		size_t cap = sc->heap_cap ? sc->heap_cap * 2 : 256;
		void *p = realloc(sc->heap, cap * sizeof(struct spm_cand));

		if (p == NULL)
			return -1;
		sc->heap = p;
		sc->heap_cap = cap;
	}
	h = sc->heap;
	c.score = t->score[id];
	c.left = l;
	c.size = sc->sym_len[l] + sc->sym_len[r];
	c.id = id;
	i = sc->heap_n++;
	while (i > 0 && spm_before(&c, &h[(i - 1) / 2])) {
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h[i] = c;
	return 0;
}

static void spm_pop(struct tok_scratch *sc, struct spm_cand *out)
{
	struct spm_cand *h = sc->heap, last;
	size_t i = 0, n;

	*out = h[0];
	last = h[--sc->heap_n];
	n = sc->heap_n;
	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= n)
			break;
		if (c + 1 < n && spm_before(&h[c + 1], &h[c]))
			c++;
		if (!spm_before(&h[c], &last))
			break;
		h[i] = h[c];
		i = c;
	}
	if (n > 0)
		h[i] = last;
}

/* Emit symbol I: its token, or its bytes as <0xXX> tokens, or <unk>. */
static int spm_emit(const struct tok *t, struct tok_scratch *sc, const char *s,
                    int32_t i, struct tok_ids *out)
{
	int32_t id = sc->sym_id[i];
	uint32_t k;

	if (id >= 0)
		return tok_ids_push(out, id);
	for (k = 0; k < sc->sym_len[i]; k++) {
		int32_t b = t->byte_id[(unsigned char)s[sc->sym_start[i] + k]];

		if (b < 0) { /* no byte tokens: one <unk> for the symbol */
			return t->unk >= 0 ? tok_ids_push(out, t->unk) : 0;
		}
		if (tok_ids_push(out, b))
			return -1;
	}
	return 0;
}

/* Encode S[0..n) (no added tokens in it), prepending "▁" if PREFIX. */
int tok_spm_encode(const struct tok *t, struct tok_scratch *sc, const char *s,
                   size_t n, bool prefix, struct tok_ids *out)
{
	struct tok_buf *b = &sc->tmp;
	int32_t i, nsym = 0;
	struct spm_cand c;
	size_t k;

	b->n = 0;
	if (prefix && tok_buf_append(b, "\xe2\x96\x81", 3))
		return -1;
	for (k = 0; k < n; k++) {
		if (s[k] == ' ' ? tok_buf_append(b, "\xe2\x96\x81", 3)
		                : tok_buf_append(b, s + k, 1))
			return -1;
	}
	if (b->n > INT32_MAX / 2 || tok_scratch_syms(sc, b->n))
		return -1;
	s = b->p;
	for (k = 0; k < b->n; nsym++) {
		size_t len = utf8_lead_len((unsigned char)s[k]);
		int32_t id;

		if (len > b->n - k)
			len = b->n - k;
		sc->sym_start[nsym] = (uint32_t)k;
		sc->sym_len[nsym] = (uint32_t)len;
		sc->sym_prev[nsym] = nsym - 1;
		sc->sym_next[nsym] = -1;
		if (nsym > 0)
			sc->sym_next[nsym - 1] = nsym;
		id = tok_lookup(t, s + k, len);
		sc->sym_id[nsym] = id >= 0 && spm_mergeable(t, id) ? id : -1;
		k += len;
	}
	sc->heap_n = 0;
	for (i = 0; i < nsym; i++)
		if (spm_push(t, sc, s, i))
			return -1;
	while (sc->heap_n > 0) {
		int32_t r;

		spm_pop(sc, &c);
		r = sc->sym_next[c.left];
		if (sc->sym_len[c.left] == 0 || r < 0 ||
		    sc->sym_len[c.left] + sc->sym_len[r] != c.size)
			continue;
		sc->sym_len[c.left] = c.size;
		sc->sym_id[c.left] = c.id;
		sc->sym_len[r] = 0;
		sc->sym_next[c.left] = sc->sym_next[r];
		if (sc->sym_next[r] >= 0)
			sc->sym_prev[sc->sym_next[r]] = c.left;
		if (spm_push(t, sc, s, sc->sym_prev[c.left]) ||
		    spm_push(t, sc, s, c.left))
			return -1;
	}
	for (i = 0; nsym > 0 && i >= 0; i = sc->sym_next[i])
		if (spm_emit(t, sc, s, i, out))
			return -1;
	return 0;
}

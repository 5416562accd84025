/*
 * tok_o200k.h - gpt-oss's vocabulary (tiktoken's o200k_base ranks plus the
 * harmony control tokens) written as the vocabulary GGUF llama.cpp's
 * converter would make, for the tokenizer tests. The ranks come from
 * tests/data/tok/o200k.tokens (one length byte and the raw bytes per
 * token, in rank order; written by tests/oracles/gen_tok_o200k.py, which
 * documents the layout); the GGUF, with its 446k merges, is ~12 MB and so
 * is built at run time rather than committed. Header-only (static
 * functions), included by tests/t_tok_corpus.c and tests/t_tok_fuzz.c.
 */
#ifndef PARLEY_TOK_O200K_H
#define PARLEY_TOK_O200K_H

#include "gguf_write.h"
#include "tok.h"
#include "tok_util.h"

#include <stdbool.h>

#define O200K_RANKS   199998 /* tiktoken's mergeable tokens */
#define O200K_VOCAB   201088 /* with gpt-oss's control tokens */
#define O200K_MAX_LEN 128    /* bytes of the longest token */

/* The o200k ranks: token R's raw bytes are raw + off[R], len[R] long. */
struct o200k {
	char *raw;     /* tests/data/tok/o200k.tokens (owned) */
	uint32_t *off; /* O200K_RANKS offsets (owned) */
	uint8_t *len;  /* O200K_RANKS lengths (owned) */
	int32_t *slot; /* bytes -> rank hash, -1 = empty (owned) */
	uint32_t mask; /* slots - 1 */
};

static inline uint32_t o200k_hash(const char *s, size_t n)
{
	uint32_t h = 2166136261u;

	while (n--)
		h = (h ^ (unsigned char)*s++) * 16777619u;
	return h;
}

/* The rank of the N bytes at S, or -1. */
static inline int32_t o200k_rank(const struct o200k *o, const char *s, size_t n)
{
	uint32_t i = o200k_hash(s, n) & o->mask;

	for (; o->slot[i] >= 0; i = (i + 1) & o->mask) {
		int32_t r = o->slot[i];

		if (o->len[r] == n && memcmp(o->raw + o->off[r], s, n) == 0)
			return r;
	}
	return -1;
}

/* Read PATH ("<len byte><bytes>" per token, in rank order) into O, and
   index it in a 2^19-slot hash (38% full). 0, or -1 when the file is
   missing or malformed; the caller frees O with o200k_free() either way. */
static inline int o200k_read(const char *path, struct o200k *o)
{
	size_t n, at = 0;
	int32_t r;

	memset(o, 0, sizeof(*o));
	o->raw = tu_read(path, &n);
	o->off = malloc(O200K_RANKS * sizeof(*o->off));
	o->len = malloc(O200K_RANKS);
	o->slot = malloc((1u << 19) * sizeof(*o->slot));
	if (!o->raw || !o->off || !o->len || !o->slot)
		return -1;
	o->mask = (1u << 19) - 1;
	memset(o->slot, 0xff, (1u << 19) * sizeof(*o->slot));
	for (r = 0; r < O200K_RANKS; r++) {
		uint32_t i;

		if (at >= n || (unsigned char)o->raw[at] == 0 ||
		    (unsigned char)o->raw[at] > O200K_MAX_LEN ||
		    at + 1 + (unsigned char)o->raw[at] > n)
			return -1;
		o->len[r] = (uint8_t)o->raw[at];
		o->off[r] = (uint32_t)(at + 1);
		at += 1 + o->len[r];
		if (o200k_rank(o, o->raw + o->off[r], o->len[r]) >= 0)
			return -1; /* a token twice */
		i = o200k_hash(o->raw + o->off[r], o->len[r]) & o->mask;
		while (o->slot[i] >= 0)
			i = (i + 1) & o->mask;
		o->slot[i] = r;
	}
	return at == n ? 0 : -1;
}

static inline void o200k_free(struct o200k *o)
{
	free(o->raw);
	free(o->off);
	free(o->len);
	free(o->slot);
}

/* Append the byte-level text (GPT-2's bytes_to_unicode) of N bytes at S. */
static inline int o200k_text(struct tok_buf *b, const char *s, size_t n)
{
	size_t k;

	for (k = 0; k < n; k++) {
		unsigned c = (unsigned char)s[k], cp = c, j;
		char u[2];

		if (!((c >= 0x21 && c <= 0x7e) || (c >= 0xa1 && c <= 0xac) ||
		      c >= 0xae))
			for (cp = 256, j = 0; j < c; j++)
				cp += !((j >= 0x21 && j <= 0x7e) ||
				        (j >= 0xa1 && j <= 0xac) || j >= 0xae);
		if (cp < 0x80) {
			u[0] = (char)cp;
			if (tok_buf_append(b, u, 1))
				return -1;
			continue;
		}
		u[0] = (char)(0xc0 | cp >> 6);
		u[1] = (char)(0x80 | (cp & 0x3f));
		if (tok_buf_append(b, u, 2))
			return -1;
	}
	return 0;
}

/* gpt-oss's control tokens above the ranks; the rest are reserved. */
static inline const char *o200k_special(int32_t id)
{
	switch (id) {
	case 199998:
		return "<|startoftext|>";
	case 199999:
		return "<|endoftext|>";
	case 200002:
		return "<|return|>";
	case 200003:
		return "<|constrain|>";
	case 200005:
		return "<|channel|>";
	case 200006:
		return "<|start|>";
	case 200007:
		return "<|end|>";
	case 200008:
		return "<|message|>";
	case 200012:
		return "<|call|>";
	case 200018:
		return "<|endofprompt|>";
	default:
		return NULL;
	}
}

struct o200k_split {
	int32_t l, r; /* ranks of the two halves */
};

static inline int o200k_split_cmp(const void *a, const void *b)
{
	const struct o200k_split *x = a, *y = b;

	if (x->l != y->l)
		return x->l < y->l ? -1 : 1;
	return x->r < y->r ? -1 : x->r > y->r;
}

/* The merges transformers' TikTokenConverter derives from the ranks (and
   convert_hf_to_gguf.py copies): for each token in rank order, every split
   into two tokens, sorted by (rank of left, rank of right). Appended to
   TEXT as "left right" texts, offsets into *OFF (n_merges + 1 of them;
   malloc'ed, the caller frees it, also after a failure). */
static inline int o200k_merges(const struct o200k *o, struct tok_buf *text,
                               uint32_t **off, size_t *n_merges)
{
	size_t cap = 1 << 19, n = 0;
	int32_t r;

	*off = malloc(cap * sizeof(**off));
	if (*off == NULL)
		return -1;
	for (r = 0; r < O200K_RANKS; r++) {
		const char *s = o->raw + o->off[r];
		struct o200k_split sp[O200K_MAX_LEN];
		size_t k, m = 0;

		for (k = 1; k < o->len[r]; k++) {
			sp[m].l = o200k_rank(o, s, k);
			sp[m].r = o200k_rank(o, s + k, o->len[r] - k);
			m += sp[m].l >= 0 && sp[m].r >= 0;
		}
		qsort(sp, m, sizeof(*sp), o200k_split_cmp);
		for (k = 0; k < m; k++) {
			if (n + 2 > cap) {
				uint32_t *p =
				    realloc(*off, 2 * cap * sizeof(*p));

				if (p == NULL)
					return -1;
				*off = p;
				cap *= 2;
			}
			(*off)[n++] = (uint32_t)text->n;
			if (o200k_text(text, o->raw + o->off[sp[k].l],
			               o->len[sp[k].l]) ||
			    tok_buf_append(text, " ", 1) ||
			    o200k_text(text, o->raw + o->off[sp[k].r],
			               o->len[sp[k].r]))
				return -1;
		}
	}
	(*off)[n] = (uint32_t)text->n;
	*n_merges = n;
	return 0;
}

/* Write gpt-oss's vocabulary GGUF (tokenizer keys only) to PATH. */
static inline int o200k_write(const struct o200k *o, const char *path,
                              char *err, size_t errlen)
{
	struct gguf_writer *w = gguf_writer_new();
	struct tok_buf tt = {0}, mt = {0};
	uint32_t *toff = malloc((O200K_VOCAB + 1) * sizeof(*toff)),
	         *moff = NULL;
	int32_t *type = malloc(O200K_VOCAB * sizeof(*type)), id;
	struct gguf_str *strs = NULL;
	size_t n_merges = 0, k;
	int rc = -1;

	snprintf(err, errlen, "out of memory");
	if (!w || !toff || !type)
		goto out;
	for (id = 0; id < O200K_VOCAB; id++) {
		char name[32];
		const char *sp = o200k_special(id);
		int bad;

		toff[id] = (uint32_t)tt.n;
		type[id] =
		    id < O200K_RANKS ? TOK_TYPE_NORMAL : TOK_TYPE_CONTROL;
		if (id < O200K_RANKS) {
			bad = o200k_text(&tt, o->raw + o->off[id], o->len[id]);
		} else {
			snprintf(name, sizeof(name), "<|reserved_%d|>",
			         (int)id);
			bad = tok_buf_append(&tt, sp ? sp : name,
			                     strlen(sp ? sp : name));
		}
		if (bad)
			goto out;
	}
	toff[O200K_VOCAB] = (uint32_t)tt.n;
	if (o200k_merges(o, &mt, &moff, &n_merges))
		goto out;
	strs = malloc((n_merges > O200K_VOCAB ? n_merges : O200K_VOCAB) *
	              sizeof(*strs));
	if (strs == NULL)
		goto out;
	for (k = 0; k < O200K_VOCAB; k++) {
		strs[k].ptr = tt.p + toff[k];
		strs[k].len = toff[k + 1] - toff[k];
	}
	gguf_writer_set_str(w, "general.architecture", "gpt-oss");
	gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
	gguf_writer_set_str(w, "tokenizer.ggml.pre", "gpt-4o");
	gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", strs, O200K_VOCAB);
	gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32,
	                    type, O200K_VOCAB);
	for (k = 0; k < n_merges; k++) {
		strs[k].ptr = mt.p + moff[k];
		strs[k].len = moff[k + 1] - moff[k];
	}
	gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", strs, n_merges);
	gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 199998);
	gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 200002);
	gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", 199999);
	gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", false);
	rc = gguf_writer_write(w, path, err, errlen);
	if (rc == 0)
		snprintf(err, errlen, "%d tokens, %zu merges", O200K_VOCAB,
		         n_merges);
out:
	gguf_writer_free(w);
	free(tt.p);
	free(mt.p);
	free(toff);
	free(moff);
	free(type);
	free(strs);
	return rc;
}

/* Read tests/data/tok/o200k.tokens and write the GGUF to PATH; 0 or -1
   with a message in ERR. */
static inline int o200k_make(const char *path, char *err, size_t errlen)
{
	struct o200k o;
	char p[1024];
	int rc = -1;

	if (o200k_read(tu_src("tests/data/tok/o200k.tokens", p, sizeof(p)),
	               &o) != 0)
		snprintf(err, errlen, "%.400s: unreadable or malformed", p);
	else
		rc = o200k_write(&o, path, err, errlen);
	o200k_free(&o);
	return rc;
}

#endif /* PARLEY_TOK_O200K_H */

/*
 * tok.c - tokenizer loading from GGUF metadata, the added-token partition
 * and the encode / decode entry points. See tok.h for the design.
 */
#include "tok_impl.h"

#include "gguf.h"
#include "utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ---------- small helpers ---------- */

/* Grow A to hold one more id and append ID. */
int tok_ids_push(struct tok_ids *a, int32_t id)
{
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 64;
		int32_t *v;

		if (cap > SIZE_MAX / sizeof(*v))
			return -1;
		v = realloc(a->v, cap * sizeof(*v));
		if (v == NULL)
			return -1;
		a->v = v;
		a->cap = cap;
	}
	a->v[a->n++] = id;
	return 0;
}

/* Append N bytes at P to B, growing it. */
int tok_buf_append(struct tok_buf *b, const void *p, size_t n)
{
	if (n > SIZE_MAX / 2 - b->n)
		return -1;
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		char *q;

		while (cap < b->n + n)
			cap *= 2;
		q = realloc(b->p, cap);
		if (q == NULL)
			return -1;
		b->p = q;
		b->cap = cap;
	}
	if (n > 0)
		memcpy(b->p + b->n, p, n);
	b->n += n;
	return 0;
}

/* FNV-1a (64-bit) over N bytes at S, then a murmur3 finalizer so that
   the low bits used as the slot index depend on every byte: vocabularies
   are full of near-identical texts ("<unused17>", runs of spaces). */
static uint32_t tok_hash_str(const char *s, size_t n)
{
	uint64_t h = 14695981039346656037ull;
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 1099511628211ull;
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return (uint32_t)h;
}

/* The id whose text is S[0..n), or -1. */
int32_t tok_lookup(const struct tok *t, const char *s, size_t n)
{
	uint32_t mask = t->hash_cap - 1;
	uint32_t h = tok_hash_str(s, n);
	uint32_t i = h & mask;
	int32_t id;

	/* the stored hash rejects almost every other text without touching
	   the text arena (a cache miss per probe otherwise) */
	while ((id = t->hash[i].id) >= 0) {
		if (t->hash[i].h == h) {
			uint32_t off = t->text_off[id];
			uint32_t len = t->text_off[id + 1] - off;

			if (len == n && memcmp(t->text + off, s, n) == 0)
				return id;
		}
		i = (i + 1) & mask;
	}
	return -1;
}

int32_t tok_find(const struct tok *t, const char *text, size_t len)
{
	return tok_lookup(t, text, len);
}

/* Make every sym_* array of SC hold at least N entries. */
int tok_scratch_syms(struct tok_scratch *sc, size_t n)
{
	size_t cap = sc->sym_cap ? sc->sym_cap : 256;
	void *p;

	if (n <= sc->sym_cap)
		return 0;
	while (cap < n)
		cap *= 2;
	if (cap > SIZE_MAX / 8)
		return -1;
#define TOK_GROW(field)                                                        \
	do {                                                                   \
		p = realloc(sc->field, cap * sizeof(*sc->field));              \
		if (p == NULL)                                                 \
			return -1;                                             \
		sc->field = p;                                                 \
	} while (0)
	TOK_GROW(sym_id);
	TOK_GROW(sym_prev);
	TOK_GROW(sym_next);
	TOK_GROW(sym_start);
	TOK_GROW(sym_len);
#undef TOK_GROW
	sc->sym_cap = cap;
	return 0;
}

/* Free what an encode call allocated in SC. */
void tok_scratch_free(struct tok_scratch *sc)
{
	if (sc->md)
		pcre2_match_data_free(sc->md);
	free(sc->sym_id);
	free(sc->sym_prev);
	free(sc->sym_next);
	free(sc->sym_start);
	free(sc->sym_len);
	free(sc->heap);
	free(sc->tmp.p);
	free(sc->tmp2.p);
	free(sc->cache);
	free(sc->cache_keys.p);
	free(sc->cache_ids.v);
}

/* ---------- loading ---------- */

/* Read optional special id KEY into *OUT (-1 when absent). */
static int tok_load_id(const struct gguf_file *f, struct tok *t,
                       const char *key, int32_t *out, char *err, size_t errlen)
{
	uint32_t v;
	int rc = gguf_get_u32(f, key, &v, err, errlen);

	*out = -1;
	if (rc == GGUF_ENOKEY)
		return 0;
	if (rc != GGUF_OK)
		return -1;
	if (v >= (uint32_t)t->n_vocab) {
		snprintf(err, errlen, "%s: %s = %u is out of range (%d tokens)",
		         f->path, key, v, t->n_vocab);
		return -1;
	}
	*out = (int32_t)v;
	return 0;
}

/* Read optional boolean KEY into *OUT, leaving it when absent. */
static int tok_load_bool(const struct gguf_file *f, const char *key, bool *out,
                         char *err, size_t errlen)
{
	int rc = gguf_get_bool(f, key, out, err, errlen);

	return rc == GGUF_OK || rc == GGUF_ENOKEY ? 0 : -1;
}

/* Copy the token texts into one arena and build the text hash. */
static int tok_load_texts(const struct gguf_file *f, struct tok *t,
                          const struct gguf_array *a, char *err, size_t errlen)
{
	uint64_t total = 0;
	uint32_t cap = 1;
	int32_t i;

	for (i = 0; i < t->n_vocab; i++) {
		if (a->strs[i].len > TOK_MAX_TOKEN_LEN) {
			snprintf(err, errlen,
			         "%s: tokenizer.ggml.tokens[%d] is %llu bytes "
			         "long (limit %d)",
			         f->path, i, (unsigned long long)a->strs[i].len,
			         TOK_MAX_TOKEN_LEN);
			return -1;
		}
		total += a->strs[i].len;
	}
	if (total >= UINT32_MAX) {
		snprintf(err, errlen,
		         "%s: tokenizer.ggml.tokens holds %llu "
		         "bytes of text (limit 4 GB)",
		         f->path, (unsigned long long)total);
		return -1;
	}
	t->text = malloc(total ? total : 1);
	t->text_off = malloc(((size_t)t->n_vocab + 1) * sizeof(uint32_t));
	while (cap < 2u * (uint32_t)t->n_vocab)
		cap *= 2;
	t->hash_cap = cap;
	t->hash = malloc((size_t)cap * sizeof(*t->hash));
	if (!t->text || !t->text_off || !t->hash) {
		snprintf(err, errlen, "%s: out of memory for %d tokens",
		         f->path, t->n_vocab);
		return -1;
	}
	memset(t->hash, 0xff, (size_t)cap * sizeof(*t->hash));
	total = 0;
	for (i = 0; i < t->n_vocab; i++) {
		t->text_off[i] = (uint32_t)total;
		memcpy(t->text + total, a->strs[i].ptr, a->strs[i].len);
		total += a->strs[i].len;
	}
	t->text_off[t->n_vocab] = (uint32_t)total;
	/* insert: on duplicate texts the lowest id wins */
	for (i = 0; i < t->n_vocab; i++) {
		const char *s = t->text + t->text_off[i];
		size_t n = t->text_off[i + 1] - t->text_off[i];
		uint32_t h, k;

		if (tok_lookup(t, s, n) >= 0)
			continue;
		h = tok_hash_str(s, n);
		k = h & (cap - 1);
		while (t->hash[k].id >= 0)
			k = (k + 1) & (cap - 1);
		t->hash[k].h = h;
		t->hash[k].id = i;
	}
	return 0;
}

/* Read scores and types (both optional, SPM needs scores). */
static int tok_load_scores_types(const struct gguf_file *f, struct tok *t,
                                 char *err, size_t errlen)
{
	const struct gguf_array *a;
	int32_t i;
	int rc;

	t->score = calloc((size_t)t->n_vocab, sizeof(float));
	t->type = malloc((size_t)t->n_vocab);
	t->attr = calloc((size_t)t->n_vocab, 1);
	t->eog = calloc((size_t)t->n_vocab, 1);
	if (!t->score || !t->type || !t->attr || !t->eog) {
		snprintf(err, errlen, "%s: out of memory", f->path);
		return -1;
	}
	memset(t->type, TOK_TYPE_NORMAL, (size_t)t->n_vocab);
	rc = gguf_get_arr(f, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, &a,
	                  err, errlen);
	if (rc == GGUF_OK) {
		if (a->n != (uint64_t)t->n_vocab) {
			snprintf(err, errlen,
			         "%s: tokenizer.ggml.scores has %llu entries, "
			         "tokens has %d",
			         f->path, (unsigned long long)a->n, t->n_vocab);
			return -1;
		}
		for (i = 0; i < t->n_vocab; i++)
			t->score[i] = (float)gguf_arr_f64(a, (uint64_t)i);
	} else if (rc != GGUF_ENOKEY || t->model == TOK_MODEL_SPM) {
		return -1;
	}
	rc = gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, &a,
	                  err, errlen);
	if (rc == GGUF_ENOKEY)
		return 0;
	if (rc != GGUF_OK)
		return -1;
	if (a->n != (uint64_t)t->n_vocab) {
		snprintf(err, errlen,
		         "%s: tokenizer.ggml.token_type has %llu entries, "
		         "tokens has %d",
		         f->path, (unsigned long long)a->n, t->n_vocab);
		return -1;
	}
	for (i = 0; i < t->n_vocab; i++) {
		int64_t v = gguf_arr_i64(a, (uint64_t)i);

		if (v < 0 || v > TOK_TYPE_BYTE) {
			snprintf(err, errlen,
			         "%s: tokenizer.ggml.token_type[%d] = %lld is "
			         "not a token type (0..6)",
			         f->path, i, (long long)v);
			return -1;
		}
		t->type[i] = (uint8_t)v;
	}
	return 0;
}

/* Hidden from the user: control and unknown tokens. */
static bool tok_type_hidden(uint8_t type)
{
	return type == TOK_TYPE_CONTROL || type == TOK_TYPE_UNKNOWN;
}

/* Whether the N bytes at S (not NUL-terminated: the vocabulary's text is
 * one buffer) spell a byte token "<0xHH>", its value in *V. (sscanf would
 * read on past the token, to a NUL that may lie beyond the buffer.) */
static bool tok_byte_value(const char *s, size_t n, unsigned *v)
{
	int hi, lo;

	if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
		return false;
	hi = utf8_hex_digit(s[3]);
	lo = utf8_hex_digit(s[4]);
	if (hi < 0 || lo < 0)
		return false;
	*v = (unsigned)(hi * 16 + lo);
	return true;
}

/* Append the decoded bytes of token I to B (see tok_piece). */
static int tok_make_piece(const struct tok *t, int32_t i, struct tok_buf *b)
{
	const char *s = t->text + t->text_off[i];
	size_t n = t->text_off[i + 1] - t->text_off[i];
	size_t k, start = b->n;
	unsigned v;

	if (tok_type_hidden(t->type[i]))
		return tok_buf_append(b, s, n);
	/* gemma4 as llama.cpp: user-defined text as it is, unused nothing */
	if (t->pre == TOK_PRE_GEMMA4 && t->type[i] == TOK_TYPE_USER_DEFINED)
		return tok_buf_append(b, s, n);
	if (t->pre == TOK_PRE_GEMMA4 && t->type[i] == TOK_TYPE_UNUSED)
		return 0;
	if (t->model == TOK_MODEL_SPM || t->pre == TOK_PRE_GEMMA4) {
		if (t->type[i] == TOK_TYPE_BYTE && tok_byte_value(s, n, &v)) {
			char c = (char)v;

			return tok_buf_append(b, &c, 1);
		}
		for (k = 0; k < n;) {
			if (n - k >= 3 &&
			    memcmp(s + k, "\xe2\x96\x81", 3) == 0) {
				if (tok_buf_append(b, " ", 1))
					return -1;
				k += 3;
			} else {
				if (tok_buf_append(b, s + k, 1))
					return -1;
				k++;
			}
		}
		return 0;
	}
	/* byte-level: every character maps back to one byte, else raw */
	for (k = 0; k < n;) {
		size_t len =
		    utf8_valid_len((const unsigned char *)s + k, n - k);
		uint32_t cp = 0;
		size_t j;
		int byte;
		char c;

		if (len == 0)
			goto raw;
		cp = (unsigned char)s[k] & (len == 1 ? 0x7f : 0x7f >> len);
		for (j = 1; j < len; j++)
			cp = cp << 6 | ((unsigned char)s[k + j] & 0x3f);
		byte = tok_bpe_cp_byte(cp);
		if (byte < 0)
			goto raw;
		c = (char)byte;
		if (tok_buf_append(b, &c, 1))
			return -1;
		k += len;
	}
	return 0;
raw:
	b->n = start;
	return tok_buf_append(b, s, n);
}

/* Build the decoded-piece arena. */
static int tok_load_pieces(const struct gguf_file *f, struct tok *t, char *err,
                           size_t errlen)
{
	struct tok_buf b = {0};
	int32_t i;

	t->piece_off = malloc(((size_t)t->n_vocab + 1) * sizeof(uint32_t));
	if (t->piece_off == NULL)
		goto oom;
	for (i = 0; i < t->n_vocab; i++) {
		t->piece_off[i] = (uint32_t)b.n;
		if (tok_make_piece(t, i, &b))
			goto oom;
	}
	t->piece_off[t->n_vocab] = (uint32_t)b.n;
	t->piece = b.p ? b.p : malloc(1);
	if (t->piece == NULL)
		goto oom;
	return 0;
oom:
	free(b.p);
	snprintf(err, errlen, "%s: out of memory for token pieces", f->path);
	return -1;
}

/* Order added tokens by first byte, then longest first. */
static int tok_added_cmp(const void *pa, const void *pb)
{
	const struct tok_added *a = pa, *b = pb;

	if (a->first != b->first)
		return a->first < b->first ? -1 : 1;
	if (a->len != b->len)
		return a->len > b->len ? -1 : 1;
	return a->id < b->id ? -1 : a->id > b->id;
}

/* True for the token types the partition matches in text. */
static bool tok_type_added(uint8_t ty)
{
	return ty == TOK_TYPE_CONTROL || ty == TOK_TYPE_USER_DEFINED ||
	       ty == TOK_TYPE_UNKNOWN;
}

/* The harmony format (gpt-oss): a reply is several messages, each ended
   by <|end|>; the reply ends at <|return|> (an answer) or <|call|> (a tool
   call). With both in the vocabulary, <|end|> no longer ends a turn (as
   llama.cpp decides). */
static void tok_load_harmony_eog(struct tok *t)
{
	int32_t ret = tok_lookup(t, "<|return|>", 10);
	int32_t call = tok_lookup(t, "<|call|>", 8);
	int32_t end = tok_lookup(t, "<|end|>", 7);

	if (ret < 0 || call < 0)
		return;
	t->eog[ret] = 1;
	t->eog[call] = 1;
	if (end >= 0)
		t->eog[end] = 0;
}

/* Collect the lengths the partition must try, and the end-of-turn set. */
static int tok_load_added(const struct gguf_file *f, struct tok *t, char *err,
                          size_t errlen)
{
	static const char *const eog_texts[] = {
	    "<|eot_id|>",
	    "<|eom_id|>",
	    "<|im_end|>",
	    "<|end|>",
	    "<end_of_turn>",
	    "<turn|>",          /* Gemma 4 */
	    "<eos>",            /* Gemma 4's, not its file's EOS id */
	    "<|tool_response>", /* Gemma 4: a tool call's turn ends where
	                           the response would begin (as llama.cpp) */
	    "<|endoftext|>",
	    "<EOT>",
	    "<|end_of_text|>",
	    "<\xef\xbd\x9c"
	    "end\xe2\x96\x81of\xe2\x96\x81sentence"
	    "\xef\xbd\x9c>",
	};
	struct tok_added *added;
	uint32_t n = 0, i, b;
	int32_t id;
	size_t k;

	for (id = 0; id < t->n_vocab; id++)
		if (tok_type_added(t->type[id]) &&
		    t->text_off[id + 1] > t->text_off[id])
			n++;
	added = malloc((n ? n : 1) * sizeof(*added));
	t->added_len = malloc((n ? n : 1) * sizeof(*t->added_len));
	if (added == NULL || t->added_len == NULL) {
		free(added);
		snprintf(err, errlen, "%s: out of memory", f->path);
		return -1;
	}
	for (n = 0, id = 0; id < t->n_vocab; id++) {
		uint32_t len = t->text_off[id + 1] - t->text_off[id];

		if (tok_type_added(t->type[id]) && len > 0) {
			added[n].id = id;
			added[n].len = len;
			added[n].first =
			    (unsigned char)t->text[t->text_off[id]];
			n++;
		}
	}
	qsort(added, n, sizeof(*added), tok_added_cmp);
	for (b = 0, i = 0; b < 257; b++) {
		t->added_first[b] = t->n_added_len;
		for (; i < n && added[i].first == b; i++)
			if (t->n_added_len == t->added_first[b] ||
			    t->added_len[t->n_added_len - 1] != added[i].len)
				t->added_len[t->n_added_len++] = added[i].len;
	}
	free(added);
	for (k = 0; k < sizeof(eog_texts) / sizeof(eog_texts[0]); k++) {
		id = tok_lookup(t, eog_texts[k], strlen(eog_texts[k]));
		if (id >= 0 && (t->type[id] == TOK_TYPE_CONTROL ||
		                t->type[id] == TOK_TYPE_USER_DEFINED))
			t->eog[id] = 1;
	}
	tok_load_harmony_eog(t);
	return 0;
}

/* Read the model kind and the pre-tokenizer name (llama.cpp's names; it
   gives the o200k pattern to llama4, kanana2 and talkie too). */
static int tok_load_kind(const struct gguf_file *f, struct tok *t, char *err,
                         size_t errlen)
{
	static const struct {
		const char *name;
		enum tok_pre pre;
	} pres[] = {
	    {"gpt-2", TOK_PRE_GPT2},       {"gpt2", TOK_PRE_GPT2},
	    {"llama-bpe", TOK_PRE_LLAMA3}, {"llama3", TOK_PRE_LLAMA3},
	    {"qwen2", TOK_PRE_QWEN2},      {"deepseek-r1-qwen", TOK_PRE_QWEN2},
	    {"smollm", TOK_PRE_SMOLLM},    {"gpt-4o", TOK_PRE_GPT4O},
	    {"llama4", TOK_PRE_GPT4O},     {"kanana2", TOK_PRE_GPT4O},
	    {"talkie", TOK_PRE_GPT4O},
	};
	struct gguf_str s;
	size_t k;
	int rc;

	if (gguf_get_str(f, "tokenizer.ggml.model", &s, err, errlen))
		return -1;
	if (gguf_str_eq(s, "gpt2")) {
		t->model = TOK_MODEL_BPE;
	} else if (gguf_str_eq(s, "llama")) {
		t->model = TOK_MODEL_SPM;
	} else if (gguf_str_eq(s, "gemma4")) {
		/* BPE; llama.cpp ignores tokenizer.ggml.pre for it */
		t->model = TOK_MODEL_BPE;
		t->pre = TOK_PRE_GEMMA4;
		t->pre_name = gguf_str_dup(s);
		if (t->pre_name == NULL) {
			snprintf(err, errlen, "%s: out of memory", f->path);
			return -1;
		}
		return 0;
	} else {
		snprintf(err, errlen,
		         "%s: tokenizer.ggml.model \"%.*s\" is not supported "
		         "(supported: gpt2, llama, gemma4)",
		         f->path, (int)(s.len > 64 ? 64 : s.len), s.ptr);
		return -1;
	}
	rc = gguf_get_str(f, "tokenizer.ggml.pre", &s, err, errlen);
	if (rc == GGUF_ENOKEY) {
		s.ptr = "default";
		s.len = 7;
	} else if (rc != GGUF_OK) {
		return -1;
	}
	t->pre_name = gguf_str_dup(s);
	if (t->pre_name == NULL) {
		snprintf(err, errlen, "%s: out of memory", f->path);
		return -1;
	}
	t->pre = TOK_PRE_NONE;
	if (t->model == TOK_MODEL_SPM)
		return 0;
	for (k = 0; k < sizeof(pres) / sizeof(pres[0]); k++)
		if (gguf_str_eq(s, pres[k].name))
			t->pre = pres[k].pre;
	if (t->pre == TOK_PRE_NONE) {
		snprintf(err, errlen,
		         "%s: tokenizer.ggml.pre \"%.*s\" is not a known "
		         "pre-tokenizer (known: gpt-2, llama-bpe, qwen2, "
		         "deepseek-r1-qwen, smollm, gpt-4o)",
		         f->path, (int)(s.len > 64 ? 64 : s.len), s.ptr);
		return -1;
	}
	return 0;
}

/* Special ids and the BOS / EOS / space-prefix rules. */
static int tok_load_specials(const struct gguf_file *f, struct tok *t,
                             char *err, size_t errlen)
{
	int32_t eot, eom;

	if (tok_load_id(f, t, "tokenizer.ggml.bos_token_id", &t->bos, err,
	                errlen) ||
	    tok_load_id(f, t, "tokenizer.ggml.eos_token_id", &t->eos, err,
	                errlen) ||
	    tok_load_id(f, t, "tokenizer.ggml.unknown_token_id", &t->unk, err,
	                errlen) ||
	    tok_load_id(f, t, "tokenizer.ggml.eot_token_id", &eot, err,
	                errlen) ||
	    tok_load_id(f, t, "tokenizer.ggml.eom_token_id", &eom, err, errlen))
		return -1;
	if (t->unk < 0 && t->model == TOK_MODEL_SPM)
		t->unk = tok_lookup(t, "<unk>", 5);
	t->add_bos = t->model == TOK_MODEL_SPM || t->pre == TOK_PRE_LLAMA3;
	t->add_eos = false;
	t->add_space_prefix = t->model == TOK_MODEL_SPM;
	if (tok_load_bool(f, "tokenizer.ggml.add_bos_token", &t->add_bos, err,
	                  errlen) ||
	    tok_load_bool(f, "tokenizer.ggml.add_eos_token", &t->add_eos, err,
	                  errlen) ||
	    tok_load_bool(f, "tokenizer.ggml.add_space_prefix",
	                  &t->add_space_prefix, err, errlen))
		return -1;
	if (t->model != TOK_MODEL_SPM)
		t->add_space_prefix = false;
	/* llama.cpp overrides the file's add_bos_token for Gemma 4 */
	if (t->pre == TOK_PRE_GEMMA4)
		t->add_bos = true;
	t->ignore_merges = t->pre == TOK_PRE_LLAMA3;
	if (t->eos >= 0)
		t->eog[t->eos] = 1;
	if (eot >= 0)
		t->eog[eot] = 1;
	if (eom >= 0)
		t->eog[eom] = 1;
	return 0;
}

struct tok *tok_load(const struct gguf_file *f, char *err, size_t errlen)
{
	const struct gguf_array *a;
	struct tok *t = calloc(1, sizeof(*t));

	if (t == NULL) {
		snprintf(err, errlen, "%s: out of memory", f->path);
		return NULL;
	}
	if (tok_load_kind(f, t, err, errlen))
		goto fail;
	if (gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &a, err,
	                 errlen))
		goto fail;
	if (a->n == 0 || a->n > TOK_MAX_VOCAB) {
		snprintf(err, errlen,
		         "%s: tokenizer.ggml.tokens has %llu entries "
		         "(must be 1..%d)",
		         f->path, (unsigned long long)a->n, TOK_MAX_VOCAB);
		goto fail;
	}
	t->n_vocab = (int32_t)a->n;
	if (tok_load_texts(f, t, a, err, errlen) ||
	    tok_load_scores_types(f, t, err, errlen) ||
	    tok_load_pieces(f, t, err, errlen) ||
	    tok_load_added(f, t, err, errlen) ||
	    tok_load_specials(f, t, err, errlen))
		goto fail;
	if (t->model == TOK_MODEL_BPE) {
		if (tok_bpe_setup(t, f, err, errlen) ||
		    (t->pre != TOK_PRE_GEMMA4 &&
		     tok_pretok_compile(t, err, errlen)))
			goto fail;
	} else if (tok_spm_setup(t, err, errlen)) {
		goto fail;
	}
	return t;
fail:
	tok_free(t);
	return NULL;
}

void tok_free(struct tok *t)
{
	if (t == NULL)
		return;
	tok_pretok_free(t);
	free(t->pre_name);
	free(t->text);
	free(t->text_off);
	free(t->piece);
	free(t->piece_off);
	free(t->score);
	free(t->type);
	free(t->attr);
	free(t->eog);
	free(t->hash);
	free(t->merges);
	free(t->added_len);
	free(t);
}

/* ---------- encoding ---------- */

/* True for a Unicode White_Space character of LEN bytes at S. */
static size_t tok_space_at(const char *s, size_t n)
{
	utf8proc_int32_t cp;
	utf8proc_ssize_t len = utf8proc_iterate((const utf8proc_uint8_t *)s,
	                                        (utf8proc_ssize_t)n, &cp);

	if (len <= 0)
		return 0;
	switch (cp) {
	case 0x09:
	case 0x0a:
	case 0x0b:
	case 0x0c:
	case 0x0d:
	case 0x20:
	case 0x85:
	case 0xa0:
	case 0x1680:
	case 0x2028:
	case 0x2029:
	case 0x202f:
	case 0x205f:
	case 0x3000:
		return (size_t)len;
	default:
		return cp >= 0x2000 && cp <= 0x200a ? (size_t)len : 0;
	}
}

/* Bytes of Unicode whitespace ending exactly at S[end] (scanning back
   no further than BEGIN). */
static size_t tok_space_before(const char *s, size_t begin, size_t end)
{
	size_t k = end;

	while (k > begin) {
		size_t j = k - 1, w;

		while (j > begin && ((unsigned char)s[j] & 0xc0) == 0x80 &&
		       k - j < 4)
			j--;
		w = tok_space_at(s + j, k - j);
		if (w != k - j)
			break;
		k = j;
	}
	return end - k;
}

/* Encode one stretch of text that holds no added token. */
static int tok_encode_raw(const struct tok *t, struct tok_scratch *sc,
                          const char *s, size_t n, bool prev_special,
                          struct tok_ids *out)
{
	size_t k;

	if (n == 0)
		return 0;
	if (t->model == TOK_MODEL_SPM)
		return tok_spm_encode(t, sc, s, n,
		                      t->add_space_prefix && prev_special, out);
	if (t->pre == TOK_PRE_GEMMA4)
		return tok_gemma4_encode(t, sc, s, n, out);
	if (t->pre == TOK_PRE_QWEN2) {
		for (k = 0; k < n && (unsigned char)s[k] < 0x80; k++)
			;
		if (k < n) {
			utf8proc_uint8_t *nfc = NULL;
			utf8proc_ssize_t m = utf8proc_map(
			    (const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n,
			    &nfc, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
			int rc;

			if (m < 0) /* invalid UTF-8: take it as bytes */
				return tok_pretok_encode(t, sc, s, n, out);
			rc = tok_pretok_encode(t, sc, (const char *)nfc,
			                       (size_t)m, out);
			free(nfc);
			return rc;
		}
	}
	return tok_pretok_encode(t, sc, s, n, out);
}

/* The longest enabled added token starting at S[i], or -1. */
static int32_t tok_added_at(const struct tok *t, const char *s, size_t n,
                            size_t i, unsigned flags)
{
	unsigned char c = (unsigned char)s[i];
	uint32_t k;

	for (k = t->added_first[c]; k < t->added_first[c + 1]; k++) {
		uint32_t len = t->added_len[k];
		int32_t id;

		if (len > n - i)
			continue;
		id = tok_lookup(t, s + i, len);
		if (id < 0 || !tok_type_added(t->type[id]))
			continue;
		if (t->type[id] == TOK_TYPE_USER_DEFINED ||
		    (flags & TOK_PARSE_SPECIAL))
			return id;
	}
	return -1;
}

/* Split on added tokens (leftmost-longest) and encode the parts. */
static int tok_encode_parts(const struct tok *t, struct tok_scratch *sc,
                            const char *s, size_t n, unsigned flags,
                            bool prev_special, struct tok_ids *out)
{
	size_t i = 0, last = 0;

	while (i < n) {
		int32_t id = -1;
		size_t start = i, end;

		if (t->added_first[(unsigned char)s[i]] !=
		    t->added_first[(unsigned char)s[i] + 1])
			id = tok_added_at(t, s, n, i, flags);
		if (id < 0) {
			i++;
			continue;
		}
		end = i + (t->text_off[id + 1] - t->text_off[id]);
		if (t->attr[id] & TOK_ATTR_LSTRIP)
			start -= tok_space_before(s, last, start);
		if (t->attr[id] & TOK_ATTR_RSTRIP) {
			size_t w;

			while (end < n && (w = tok_space_at(s + end, n - end)))
				end += w;
		}
		if (tok_encode_raw(t, sc, s + last, start - last, prev_special,
		                   out) ||
		    tok_ids_push(out, id))
			return -1;
		prev_special = true;
		i = last = end;
	}
	return tok_encode_raw(t, sc, s + last, n - last, prev_special, out);
}

int tok_encode(const struct tok *t, const char *text, size_t len,
               unsigned flags, struct tok_ids *out, char *err, size_t errlen)
{
	struct tok_scratch sc = {0};
	size_t n0 = out->n;
	int rc = 0;

	if (len > TOK_MAX_TEXT) {
		snprintf(err, errlen,
		         "text of %zu bytes is longer than the "
		         "limit of %u bytes",
		         len, TOK_MAX_TEXT);
		return -1;
	}
	/* a chunk cache sized to the text: one slot per ~8 bytes */
	if (len >= TOK_CACHE_MIN_TEXT)
		for (sc.cache_cap = 512;
		     sc.cache_cap < TOK_CACHE_SLOTS && sc.cache_cap < len / 8;
		     sc.cache_cap *= 2)
			;
	if ((flags & TOK_ADD_SPECIAL) && t->add_bos && t->bos >= 0)
		rc = tok_ids_push(out, t->bos);
	if (rc == 0)
		rc = tok_encode_parts(t, &sc, text, len, flags, true, out);
	if (rc == 0 && (flags & TOK_ADD_SPECIAL) && t->add_eos && t->eos >= 0)
		rc = tok_ids_push(out, t->eos);
	tok_scratch_free(&sc);
	if (rc) {
		out->n = n0;
		snprintf(err, errlen,
		         "out of memory while tokenizing %zu "
		         "bytes",
		         len);
	}
	return rc;
}

/* ---------- decoding and queries ---------- */

const char *tok_piece(const struct tok *t, int32_t id, unsigned flags,
                      size_t *len)
{
	if (id < 0 || id >= t->n_vocab) {
		*len = 0;
		return NULL;
	}
	if (tok_type_hidden(t->type[id]) && !(flags & TOK_DECODE_SPECIAL)) {
		*len = 0;
		return "";
	}
	*len = t->piece_off[id + 1] - t->piece_off[id];
	return t->piece + t->piece_off[id];
}

const char *tok_text(const struct tok *t, int32_t id, size_t *len)
{
	if (id < 0 || id >= t->n_vocab) {
		*len = 0;
		return NULL;
	}
	*len = t->text_off[id + 1] - t->text_off[id];
	return t->text + t->text_off[id];
}

int tok_decode(const struct tok *t, const int32_t *ids, size_t n,
               unsigned flags, struct tok_buf *out, char *err, size_t errlen)
{
	size_t i, n0 = out->n, len;

	for (i = 0; i < n; i++) {
		const char *p = tok_piece(t, ids[i], flags, &len);

		if (p == NULL) {
			snprintf(err, errlen,
			         "token id %d at position %zu is "
			         "out of range (%d tokens)",
			         ids[i], i, t->n_vocab);
			out->n = n0;
			return -1;
		}
		if (tok_buf_append(out, p, len)) {
			snprintf(err, errlen, "out of memory while decoding");
			out->n = n0;
			return -1;
		}
	}
	if (t->add_space_prefix && out->n > n0 && out->p[n0] == ' ') {
		memmove(out->p + n0, out->p + n0 + 1, out->n - n0 - 1);
		out->n--;
	}
	return 0;
}

bool tok_is_eog(const struct tok *t, int32_t id)
{
	return id >= 0 && id < t->n_vocab && t->eog[id];
}

bool tok_is_control(const struct tok *t, int32_t id)
{
	return id >= 0 && id < t->n_vocab && tok_type_hidden(t->type[id]);
}

int tok_set_attr(struct tok *t, int32_t id, unsigned attr)
{
	if (id < 0 || id >= t->n_vocab ||
	    attr & ~(TOK_ATTR_LSTRIP | TOK_ATTR_RSTRIP))
		return -1;
	t->attr[id] = (uint8_t)attr;
	return 0;
}

int32_t tok_n_vocab(const struct tok *t)
{
	return t->n_vocab;
}

int32_t tok_bos(const struct tok *t)
{
	return t->bos;
}

int32_t tok_eos(const struct tok *t)
{
	return t->eos;
}

bool tok_add_bos(const struct tok *t)
{
	return t->add_bos && t->bos >= 0;
}

bool tok_add_eos(const struct tok *t)
{
	return t->add_eos && t->eos >= 0;
}

const char *tok_model_name(const struct tok *t)
{
	return t->model == TOK_MODEL_BPE ? "bpe" : "spm";
}

const char *tok_pre_name(const struct tok *t)
{
	return t->pre_name;
}

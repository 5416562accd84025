/*
 * tok_bpe.c - byte-level BPE: the GPT-2 byte <-> character mapping, the
 * merge table and the merge loop over one pre-tokenized chunk.
 *
 * The merge loop is HF tokenizers' Word::merge_all: a min-heap of
 * candidate pairs ordered by (rank, position); a popped pair is applied
 * only if both symbols still hold the ids it was made from; the merged
 * symbol then forms new candidates with its neighbours. Symbol ids only
 * grow longer when merged, so "same ids" means "same symbols".
 *
 * gemma4 (tokenizer.ggml.model "gemma4", as llama.cpp runs it): no GPT-2
 * byte mapping; ' ' becomes U+2581, newline runs are split off (one that
 * is a token is taken whole), the symbols are UTF-8 characters, and a
 * symbol that is no token becomes the byte tokens <0xXX> of its bytes.
 */
#include "tok_impl.h"

#include "gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One candidate merge of symbols POS and its successor. */
struct bpe_cand {
	int32_t rank;  /* merge rank: lower first */
	int32_t pos;   /* left symbol: lower first among equal ranks */
	int32_t left;  /* id the left symbol had when pushed */
	int32_t right; /* id the right symbol had when pushed */
	int32_t id;    /* merged token */
};

/* GPT-2's bytes_to_unicode(): the printable bytes 0x21-0x7e, 0xa1-0xac
   and 0xae-0xff stand for themselves; the other 68 (0x00-0x20, 0x7f-0xa0,
   0xad) stand for 256, 257, ... in byte order. */
uint32_t tok_bpe_byte_cp(unsigned b)
{
	if (b <= 0x20)
		return 256 + b;
	if (b >= 0x7f && b <= 0xa0)
		return 256 + 33 + (b - 0x7f);
	if (b == 0xad)
		return 256 + 67;
	return b;
}

/* The byte code point CP stands for, or -1. */
int tok_bpe_cp_byte(uint32_t cp)
{
	if (cp < 256)
		return tok_bpe_byte_cp(cp) == cp ? (int)cp : -1;
	if (cp < 256 + 33)
		return (int)(cp - 256);
	if (cp < 256 + 67)
		return (int)(0x7f + (cp - 256 - 33));
	if (cp == 256 + 67)
		return 0xad;
	return -1;
}

static uint32_t tok_pair_hash(uint64_t key)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdull;
	key ^= key >> 33;
	return (uint32_t)key;
}

/* The merge of LEFT and RIGHT, or NULL. */
static const struct tok_merge *tok_merge_find(const struct tok *t, int32_t left,
                                              int32_t right)
{
	uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
	uint32_t mask = t->merge_cap - 1;
	uint32_t i = tok_pair_hash(key) & mask;

	while (t->merges[i].rank >= 0) {
		if (t->merges[i].key == key)
			return &t->merges[i];
		i = (i + 1) & mask;
	}
	return NULL;
}

/* Parse merge I ("left right") into ids, using BOTH (2 *
   TOK_MAX_TOKEN_LEN bytes) as scratch; -1 with a message on error. */
static int tok_merge_parse(const struct tok *t, const struct gguf_str *m,
                           uint64_t i, int32_t ids[3], char *both, char *err,
                           size_t errlen)
{
	const char *s = m->ptr;
	size_t n = (size_t)m->len, sp;

	for (sp = 1; sp < n && s[sp] != ' '; sp++)
		;
	if (n < 3 || sp >= n - 1 || n > 2 * TOK_MAX_TOKEN_LEN) {
		snprintf(err, errlen,
		         "tokenizer.ggml.merges[%llu] \"%.*s\" is not two "
		         "tokens separated by a space (or is too long)",
		         (unsigned long long)i, (int)(n > 64 ? 64 : n), s);
		return -1;
	}
	ids[0] = tok_lookup(t, s, sp);
	ids[1] = tok_lookup(t, s + sp + 1, n - sp - 1);
	memcpy(both, s, sp);
	memcpy(both + sp, s + sp + 1, n - sp - 1);
	ids[2] = tok_lookup(t, both, n - 1);
	if (ids[0] < 0 || ids[1] < 0 || ids[2] < 0) {
		snprintf(err, errlen,
		         "tokenizer.ggml.merges[%llu] \"%.*s\": %s is not a "
		         "token",
		         (unsigned long long)i, (int)(n > 64 ? 64 : n), s,
		         ids[0] < 0   ? "the left part"
		         : ids[1] < 0 ? "the right part"
		                      : "the merged text");
		return -1;
	}
	return 0;
}

/* Byte symbols and the merge table from tokenizer.ggml.merges. */
int tok_bpe_setup(struct tok *t, const struct gguf_file *f, char *err,
                  size_t errlen)
{
	const struct gguf_array *a;
	uint32_t cap = 16;
	uint64_t i;
	unsigned b;
	char *both;

	for (b = 0; b < 256; b++) {
		char u[8];
		size_t n = utf8_put(tok_bpe_byte_cp(b), u);

		if (t->pre == TOK_PRE_GEMMA4) /* byte fallback tokens */
			n = (size_t)snprintf(u, sizeof(u), "<0x%02X>", b);
		t->byte_id[b] = tok_lookup(t, u, n);
	}
	if (gguf_get_arr(f, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &a, err,
	                 errlen))
		return -1;
	if (a->n > (uint64_t)INT32_MAX / 4) {
		snprintf(err, errlen,
		         "%s: tokenizer.ggml.merges has %llu "
		         "entries",
		         f->path, (unsigned long long)a->n);
		return -1;
	}
	while (cap < 2 * a->n)
		cap *= 2;
	t->merges = malloc((size_t)cap * sizeof(*t->merges));
	if (t->merges == NULL) {
		snprintf(err, errlen, "out of memory for %llu merges",
		         (unsigned long long)a->n);
		return -1;
	}
	t->merge_cap = cap;
	both = malloc(2 * TOK_MAX_TOKEN_LEN);
	if (both == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (i = 0; i < cap; i++) {
		t->merges[i].key = 0;
		t->merges[i].rank = -1;
		t->merges[i].id = -1;
	}
	for (i = 0; i < a->n; i++) {
		int32_t ids[3];
		uint64_t key;
		uint32_t h;

		if (tok_merge_parse(t, &a->strs[i], i, ids, both, err,
		                    errlen)) {
			char m[384];

			if (err != NULL && errlen > 0) {
				snprintf(m, sizeof(m), "%s", err);
				snprintf(err, errlen, "%s: %s", f->path, m);
			}
			free(both);
			return -1;
		}
		if (tok_merge_find(t, ids[0], ids[1]))
			continue; /* a repeated merge keeps its first rank */
		key = (uint64_t)(uint32_t)ids[0] << 32 | (uint32_t)ids[1];
		h = tok_pair_hash(key) & (cap - 1);
		while (t->merges[h].rank >= 0)
			h = (h + 1) & (cap - 1);
		t->merges[h].key = key;
		t->merges[h].rank = (int32_t)i;
		t->merges[h].id = ids[2];
	}
	free(both);
	return 0;
}

/* True when candidate A comes before B. */
static int bpe_before(const struct bpe_cand *a, const struct bpe_cand *b)
{
	return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

/* Push the candidate merge of symbol POS with its successor, if any. */
static int bpe_push(const struct tok *t, struct tok_scratch *sc, int32_t pos)
{
	const struct tok_merge *m;
	struct bpe_cand *h, c;
	int32_t nx;
	size_t i;

	if (pos < 0 || (nx = sc->sym_next[pos]) < 0 || sc->sym_id[pos] < 0 ||
	    sc->sym_id[nx] < 0)
		return 0;
	m = tok_merge_find(t, sc->sym_id[pos], sc->sym_id[nx]);
	if (m == NULL)
		return 0;
	if (sc->heap_n == sc->heap_cap) {
		size_t cap = sc->heap_cap ? sc->heap_cap * 2 : 256;
		void *p = realloc(sc->heap, cap * sizeof(struct bpe_cand));

		if (p == NULL)
			return -1;
		sc->heap = p;
		sc->heap_cap = cap;
	}
	h = sc->heap;
	c.rank = m->rank;
	c.pos = pos;
	c.left = sc->sym_id[pos];
	c.right = sc->sym_id[nx];
	c.id = m->id;
	i = sc->heap_n++;
	while (i > 0 && bpe_before(&c, &h[(i - 1) / 2])) {
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h[i] = c;
	return 0;
}

/* Remove the first candidate into *OUT. */
static void bpe_pop(struct tok_scratch *sc, struct bpe_cand *out)
{
	struct bpe_cand *h = sc->heap, last;
	size_t i = 0, n;

	*out = h[0];
	last = h[--sc->heap_n];
	n = sc->heap_n;
	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= n)
			break;
		if (c + 1 < n && bpe_before(&h[c + 1], &h[c]))
			c++;
		if (!bpe_before(&h[c], &last))
			break;
		h[i] = h[c];
		i = c;
	}
	if (n > 0)
		h[i] = last;
}

/* The cache slot for chunk S[0..n) with hash H: its entry, or the empty
   slot where it goes. NULL when there is no cache. */
static struct tok_cache_ent *bpe_cache_slot(struct tok_scratch *sc,
                                            const char *s, size_t n, uint32_t h)
{
	uint32_t i;

	if (sc->cache == NULL) {
		sc->cache = calloc(sc->cache_cap, sizeof(*sc->cache));
		if (sc->cache == NULL)
			return NULL;
	}
	for (i = h & (sc->cache_cap - 1);; i = (i + 1) & (sc->cache_cap - 1)) {
		struct tok_cache_ent *e = &sc->cache[i];

		if (e->key_len == 0 ||
		    (e->hash == h && e->key_len == n &&
		     memcmp(sc->cache_keys.p + e->key_off, s, n) == 0))
			return e;
	}
}

/* Remember that chunk S[0..n) gave OUT->v[from..]. Failure is harmless. */
static void bpe_cache_put(struct tok_scratch *sc, struct tok_cache_ent *e,
                          const char *s, size_t n, uint32_t h,
                          const struct tok_ids *out, size_t from)
{
	size_t k, cnt = out->n - from;

	if (e == NULL || sc->cache_n >= sc->cache_cap / 2 || cnt > 255)
		return;
	e->hash = h;
	e->key_off = (uint32_t)sc->cache_keys.n;
	e->ids_off = (uint32_t)sc->cache_ids.n;
	if (tok_buf_append(&sc->cache_keys, s, n))
		return;
	for (k = 0; k < cnt; k++)
		if (tok_ids_push(&sc->cache_ids, out->v[from + k]))
			return;
	e->n_ids = (uint8_t)cnt;
	e->key_len = (uint8_t)n; /* last: the entry is complete */
	sc->cache_n++;
}

static int tok_bpe_merge(const struct tok *t, struct tok_scratch *sc,
                         const char *s, size_t n, struct tok_ids *out);
static int tok_gemma4_merge(const struct tok *t, struct tok_scratch *sc,
                            const char *s, size_t n, struct tok_ids *out);
static int bpe_run(const struct tok *t, struct tok_scratch *sc, int32_t head);

/* Encode the chunk S[0..n) (raw bytes) and append its ids to OUT. Short
   chunks go through a cache: the result only depends on the bytes. */
int tok_bpe_chunk(const struct tok *t, struct tok_scratch *sc, const char *s,
                  size_t n, struct tok_ids *out)
{
	struct tok_cache_ent *e;
	size_t from = out->n, k;
	uint32_t h = 2166136261u;

	if (n == 0)
		return 0;
	if (n == 1 && t->pre != TOK_PRE_GEMMA4 &&
	    t->byte_id[(unsigned char)s[0]] >= 0)
		return tok_ids_push(out, t->byte_id[(unsigned char)s[0]]);
	if (n > TOK_CACHE_MAX_KEY || sc->cache_cap == 0)
		return tok_bpe_merge(t, sc, s, n, out);
	for (k = 0; k < n; k++)
		h = (h ^ (unsigned char)s[k]) * 16777619u;
	e = bpe_cache_slot(sc, s, n, h);
	if (e && e->key_len) {
		for (k = 0; k < e->n_ids; k++)
			if (tok_ids_push(out, sc->cache_ids.v[e->ids_off + k]))
				return -1;
		return 0;
	}
	if (tok_bpe_merge(t, sc, s, n, out))
		return -1;
	bpe_cache_put(sc, e, s, n, h, out, from);
	return 0;
}

/* The merge loop proper over chunk S[0..n). */
static int tok_bpe_merge(const struct tok *t, struct tok_scratch *sc,
                         const char *s, size_t n, struct tok_ids *out)
{
	int32_t i, head = -1, prev = -1, cnt = 0;

	if (t->ignore_merges) {
		size_t k;
		int32_t id;

		sc->tmp2.n = 0;
		for (k = 0; k < n; k++) {
			char u[4];
			size_t l =
			    utf8_put(tok_bpe_byte_cp((unsigned char)s[k]), u);

			if (tok_buf_append(&sc->tmp2, u, l))
				return -1;
		}
		id = tok_lookup(t, sc->tmp2.p, sc->tmp2.n);
		if (id >= 0)
			return tok_ids_push(out, id);
	}
	if (n > INT32_MAX / 2 || tok_scratch_syms(sc, n))
		return -1;
	if (t->pre == TOK_PRE_GEMMA4)
		return tok_gemma4_merge(t, sc, s, n, out);
	for (i = 0; i < (int32_t)n; i++) {
		int32_t id = t->byte_id[(unsigned char)s[i]];

		if (id < 0) { /* no symbol for this byte: HF drops it */
			sc->sym_id[i] = -1;
			continue;
		}
		sc->sym_id[i] = id;
		sc->sym_prev[i] = prev;
		sc->sym_next[i] = -1;
		if (prev >= 0)
			sc->sym_next[prev] = i;
		else
			head = i;
		prev = i;
		cnt++;
	}
	if (bpe_run(t, sc, head))
		return -1;
	(void)cnt;
	for (i = head; i >= 0; i = sc->sym_next[i])
		if (tok_ids_push(out, sc->sym_id[i]))
			return -1;
	return 0;
}

/* Apply the merges to the symbol list starting at HEAD, lowest rank first
   (leftmost among equal ranks). */
static int bpe_run(const struct tok *t, struct tok_scratch *sc, int32_t head)
{
	struct bpe_cand c;
	int32_t i;

	sc->heap_n = 0;
	for (i = head; i >= 0; i = sc->sym_next[i])
		if (bpe_push(t, sc, i))
			return -1;
	while (sc->heap_n > 0) {
		int32_t nx;

		bpe_pop(sc, &c);
		nx = sc->sym_next[c.pos];
		if (sc->sym_id[c.pos] != c.left || nx < 0 ||
		    sc->sym_id[nx] != c.right)
			continue;
		sc->sym_id[c.pos] = c.id;
		sc->sym_id[nx] = -1;
		sc->sym_next[c.pos] = sc->sym_next[nx];
		if (sc->sym_next[nx] >= 0)
			sc->sym_prev[sc->sym_next[nx]] = c.pos;
		if (bpe_push(t, sc, sc->sym_prev[c.pos]) ||
		    bpe_push(t, sc, c.pos))
			return -1;
	}
	return 0;
}

/* ---------- gemma4 ---------- */

/* Bytes of the character whose first byte is C, as llama.cpp's
   unicode_len_utf8 counts them (by the top four bits only). */
static size_t g4_len(unsigned char c)
{
	static const unsigned char len[16] = {1, 1, 1, 1, 1, 1, 1, 1,
	                                      1, 1, 1, 1, 2, 2, 3, 4};

	return len[c >> 4];
}

/* BPE over chunk S[0..n) with one symbol per UTF-8 character; a symbol
   that is no token (it cannot take part in a merge) becomes the byte
   tokens <0xXX> of its bytes, a byte without one being dropped (as
   llama.cpp's BPE session does). */
static int tok_gemma4_merge(const struct tok *t, struct tok_scratch *sc,
                            const char *s, size_t n, struct tok_ids *out)
{
	int32_t i, cnt = 0;
	size_t k, len;

	for (k = 0; k < n; k += len, cnt++) {
		len = g4_len((unsigned char)s[k]);
		if (len > n - k)
			len = n - k;
		sc->sym_id[cnt] = tok_lookup(t, s + k, len);
		sc->sym_start[cnt] = (uint32_t)k;
		sc->sym_len[cnt] = (uint32_t)len;
		sc->sym_prev[cnt] = cnt - 1;
		sc->sym_next[cnt] = k + len < n ? cnt + 1 : -1;
	}
	if (bpe_run(t, sc, 0))
		return -1;
	for (i = 0; i >= 0; i = sc->sym_next[i]) {
		if (sc->sym_id[i] >= 0) {
			if (tok_ids_push(out, sc->sym_id[i]))
				return -1;
			continue;
		}
		for (k = 0; k < sc->sym_len[i]; k++) {
			int32_t b =
			    t->byte_id[(unsigned char)s[sc->sym_start[i] + k]];

			if (b >= 0 && tok_ids_push(out, b))
				return -1;
		}
	}
	return 0;
}

/* Decode the character at S[0..n) as llama.cpp's unicode_cpt_from_utf8
   does: the lead byte gives the length and only the continuation bytes
   are checked (overlong forms and surrogates pass). Its bytes, *CP set;
   0 when invalid. */
static size_t g4_cpt(const unsigned char *s, size_t n, uint32_t *cp)
{
	size_t len, k;

	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	}
	if ((s[0] & 0x40) == 0)
		return 0;
	len = (s[0] & 0x20) == 0 ? 2 : (s[0] & 0x10) == 0 ? 3 : 4;
	if ((s[0] & 0x08) != 0 && len == 4)
		return 0;
	if (len > n)
		return 0;
	*cp = s[0] & (0x7f >> len);
	for (k = 1; k < len; k++) {
		if ((s[k] & 0xc0) != 0x80)
			return 0;
		*cp = *cp << 6 | (s[k] & 0x3f);
	}
	return len;
}

/* Rewrite S[0..n) into B as llama.cpp hands it to the BPE session: ' '
   becomes U+2581, then every character is decoded and encoded again (an
   invalid byte becomes U+FFFD, an overlong form its shortest one). */
static int g4_normalize(const char *s, size_t n, struct tok_buf *b)
{
	size_t k = 0, len;

	b->n = 0;
	while (k < n) {
		uint32_t cp = 0xfffd;
		char u[4];

		if (s[k] == ' ') {
			if (tok_buf_append(b, "\xe2\x96\x81", 3))
				return -1;
			k++;
			continue;
		}
		len = g4_cpt((const unsigned char *)s + k, n - k, &cp);
		/* above U+10FFFF llama.cpp throws; U+FFFD here */
		if (len == 0 || cp > 0x10ffff)
			cp = 0xfffd;
		k += len ? len : 1;
		if (tok_buf_append(b, u, utf8_put(cp, u)))
			return -1;
	}
	return 0;
}

/* Encode S[0..n) (no added tokens in it): runs of newlines and the text
   between them are encoded apart; a newline run that is a token is taken
   whole (llama.cpp: the merges need not reach it). */
int tok_gemma4_encode(const struct tok *t, struct tok_scratch *sc,
                      const char *s, size_t n, struct tok_ids *out)
{
	size_t k = 0, j;

	if (g4_normalize(s, n, &sc->tmp))
		return -1;
	s = sc->tmp.p;
	n = sc->tmp.n;
	while (k < n) {
		bool nl = s[k] == '\n';
		int32_t id;

		for (j = k; j < n && (s[j] == '\n') == nl; j++)
			;
		id = nl ? tok_lookup(t, s + k, j - k) : -1;
		if (id >= 0 ? tok_ids_push(out, id)
		            : tok_bpe_chunk(t, sc, s + k, j - k, out))
			return -1;
		k = j;
	}
	return 0;
}

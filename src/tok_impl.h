/*
 * tok_impl.h - the tokenizer's internals, shared by tok.c, tok_bpe.c,
 * tok_spm.c, tok_pretok.c and tok_stream.c. Not for other modules.
 *
 * NOTES ON THE DESIGN
 *
 * Token texts and decoded pieces live in two byte arenas indexed by
 * per-token offsets, so a 262k-token vocabulary costs a handful of
 * allocations. Lookups by text go through an open-addressing hash table
 * (power-of-two size, at most half full, linear probing). BPE merges
 * are keyed by the pair of ids (left << 32 | right) in a second table
 * that stores the merge's rank and the id of the merged token, so the
 * merge loop never builds strings.
 */
#ifndef PARLEY_TOK_IMPL_H
#define PARLEY_TOK_IMPL_H

#include "tok.h"
#include "utf8.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

enum tok_model { TOK_MODEL_BPE, TOK_MODEL_SPM };

enum tok_pre {
	TOK_PRE_NONE,   /* SentencePiece: no regex */
	TOK_PRE_GPT2,   /* "gpt-2" */
	TOK_PRE_LLAMA3, /* "llama-bpe" */
	TOK_PRE_QWEN2,  /* "qwen2", "deepseek-r1-qwen" (NFC first) */
	TOK_PRE_SMOLLM, /* "smollm": digits split, then gpt-2 */
	TOK_PRE_GPT4O,  /* "gpt-4o" (o200k), "llama4", "kanana2", "talkie" */
	TOK_PRE_GEMMA4, /* model "gemma4": ' ' -> U+2581, newline runs split,
	                   BPE over raw UTF-8, <0xXX> byte fallback */
};

/* A slot of the text -> id table. */
struct tok_hslot {
	uint32_t h; /* tok_hash_str() of the token's text */
	int32_t id; /* the token, -1 when the slot is empty */
};

struct tok_merge {
	uint64_t key; /* left id << 32 | right id; 0 with rank -1 = empty */
	int32_t rank; /* index in tokenizer.ggml.merges; -1 = empty slot */
	int32_t id;   /* the merged token */
};

/* An added token that the partition step may match (sorted at load). */
struct tok_added {
	int32_t id;          /* token id */
	uint32_t len;        /* bytes of its text (> 0) */
	unsigned char first; /* its first byte (sort key) */
};

struct tok {
	/* configuration, fixed at load */
	enum tok_model model;  /* BPE or SPM */
	enum tok_pre pre;      /* pre-tokenizer */
	char *pre_name;        /* tokenizer.ggml.pre as found (owned) */
	int32_t n_vocab;       /* tokens */
	int32_t bos, eos, unk; /* special ids, -1 when none */
	bool add_bos, add_eos; /* TOK_ADD_SPECIAL adds these */
	bool add_space_prefix; /* SPM: prepend U+2581 */
	bool ignore_merges;    /* BPE: a chunk that is a token is kept whole */

	/* vocabulary: n_vocab entries each */
	char *text;          /* token texts back to back (owned) */
	uint32_t *text_off;  /* n_vocab + 1 offsets into text (owned) */
	char *piece;         /* decoded bytes back to back (owned) */
	uint32_t *piece_off; /* n_vocab + 1 offsets into piece (owned) */
	float *score;        /* n_vocab scores, SPM merge priority (owned) */
	uint8_t *type;       /* n_vocab enum tok_type values (owned) */
	uint8_t *attr;       /* n_vocab TOK_ATTR_* bits (owned) */
	uint8_t *eog;        /* n_vocab booleans: ends a turn (owned) */

	/* text -> id */
	struct tok_hslot *hash; /* hash_cap slots, id -1 = empty (owned) */
	uint32_t hash_cap;      /* power of two >= 2 * n_vocab */

	/* BPE merges */
	struct tok_merge *merges; /* merge_cap slots (owned) */
	uint32_t merge_cap;       /* power of two, or 0 */
	int32_t byte_id[256];     /* BPE: id of each byte's symbol; SPM and
	                             gemma4: id of <0xXX>; -1 when missing */

	/* added tokens: for each first byte, the distinct lengths of the
	   added tokens starting with it, longest first; the partition looks
	   each length up in the text hash */
	uint32_t *added_len; /* n_added_len lengths (owned) */
	uint32_t n_added_len;
	uint32_t added_first[257]; /* added_len[added_first[b] .. [b+1])
	                              are the lengths for first byte b */

	/* pre-tokenizer regexes (compiled at load) */
	pcre2_code *re;        /* the split pattern, NULL for SPM */
	pcre2_code *re_digits; /* smollm: one numeric character */
};

/* Scratch space of one encode call (so struct tok stays read-only). */
struct tok_scratch {
	pcre2_match_data *md; /* PCRE2 match data for re (owned) */
	int32_t *sym_id;      /* symbol ids (owned) */
	int32_t *sym_prev;    /* linked list (owned) */
	int32_t *sym_next;    /* linked list (owned) */
	uint32_t *sym_start;  /* SPM: byte offset of each symbol (owned) */
	uint32_t *sym_len;    /* SPM: bytes of each symbol (owned) */
	size_t sym_cap;       /* entries in each sym_* array */
	void *heap;           /* priority queue entries (owned) */
	size_t heap_n, heap_cap;
	struct tok_buf tmp;  /* text rewritten (NFC, U+2581) */
	struct tok_buf tmp2; /* second buffer */
	/* BPE chunk cache: text repeats (" the"), merging need not */
	struct tok_cache_ent *cache; /* cache_cap slots (owned) */
	uint32_t cache_cap; /* power of two <= TOK_CACHE_SLOTS; 0 = off */
	uint32_t cache_n;   /* slots in use, at most half */
	struct tok_buf cache_keys; /* chunk bytes back to back */
	struct tok_ids cache_ids;  /* their ids back to back */
};

#define TOK_CACHE_SLOTS    16384 /* per encode call: ~0.4 MB at most */
#define TOK_CACHE_MIN_TEXT 4096  /* shorter texts are not worth a cache */
#define TOK_CACHE_MAX_KEY  48    /* longer chunks are not cached */

struct tok_cache_ent {
	uint32_t hash;    /* of the chunk bytes; 0 with len 0 = empty */
	uint32_t key_off; /* into cache_keys */
	uint32_t ids_off; /* into cache_ids */
	uint8_t key_len;  /* 1..TOK_CACHE_MAX_KEY, 0 = empty slot */
	uint8_t n_ids;    /* ids of the chunk (<= key_len) */
};

/* tok.c */
int32_t tok_lookup(const struct tok *t, const char *s, size_t n);
int tok_scratch_syms(struct tok_scratch *sc, size_t n);
void tok_scratch_free(struct tok_scratch *sc);

/* tok_bpe.c: encode one pre-tokenized chunk (raw bytes) */
int tok_bpe_chunk(const struct tok *t, struct tok_scratch *sc, const char *s,
                  size_t n, struct tok_ids *out);
/* byte-level: the code point standing for byte b, and its inverse */
uint32_t tok_bpe_byte_cp(unsigned b);
int tok_bpe_cp_byte(uint32_t cp);
struct gguf_file;
int tok_bpe_setup(struct tok *t, const struct gguf_file *f, char *err,
                  size_t errlen);

/* gemma4: escape spaces, split off newline runs, BPE-encode the parts */
int tok_gemma4_encode(const struct tok *t, struct tok_scratch *sc,
                      const char *s, size_t n, struct tok_ids *out);

/* tok_pretok.c */
int tok_pretok_compile(struct tok *t, char *err, size_t errlen);
void tok_pretok_free(struct tok *t);
/* Split raw text and BPE-encode each chunk. */
int tok_pretok_encode(const struct tok *t, struct tok_scratch *sc,
                      const char *s, size_t n, struct tok_ids *out);

/* tok_spm.c */
int tok_spm_setup(struct tok *t, char *err, size_t errlen);
int tok_spm_encode(const struct tok *t, struct tok_scratch *sc, const char *s,
                   size_t n, bool prefix, struct tok_ids *out);

#endif /* PARLEY_TOK_IMPL_H */

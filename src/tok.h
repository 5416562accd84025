/*
 * tok.h - the tokenizer: text <-> token ids, exactly as the model's
 * training tokenizer (Hugging Face `tokenizers`) does it.
 *
 * NOTES ON THE DESIGN
 *
 * Two algorithms, chosen by the GGUF key tokenizer.ggml.model:
 *   "gpt2"  byte-level BPE (tok_bpe.c). The text is split into chunks by a
 *           pre-tokenizer regex (tok_pretok.c, PCRE2 with Unicode
 *           properties), every byte of a chunk becomes its byte-level
 *           symbol, and merges are applied lowest rank first, leftmost
 *           first among equal ranks (HF's BinaryHeap order).
 *   "llama" SentencePiece (tok_spm.c): spaces become U+2581, an optional
 *           U+2581 is prepended, characters are merged highest score
 *           first, and what is not in the vocabulary falls back to the
 *           <0xXX> byte tokens.
 *
 * Before either runs, the text is partitioned on "added" tokens
 * (tok.c): USER_DEFINED tokens are always matched (HF matches them in
 * any text); CONTROL and UNKNOWN tokens only with TOK_PARSE_SPECIAL, so
 * that a user who types "<|im_end|>" does not end the turn. Matching is
 * leftmost-longest, as HF's Aho-Corasick; tokens marked lstrip / rstrip
 * swallow the Unicode whitespace to their left / right.
 *
 * Invariants after a successful tok_load():
 *   1. 0 < n_vocab <= TOK_MAX_VOCAB; every special id (bos, eos, ...) is
 *      -1 or < n_vocab; token types are in 0..6.
 *   2. Every merge names two known tokens whose concatenation is a known
 *      token (checked, with the merge's index in the error).
 *   3. The struct is immutable: encode and decode only read it, so one
 *      tokenizer may be shared by threads.
 *   4. tok_piece() bytes are what the token decodes to; concatenating the
 *      pieces of tok_encode(x) (plain flags) gives back x for byte-level
 *      BPE (after NFC for qwen2, whose HF tokenizer normalizes to NFC),
 *      except for bytes the vocabulary has no symbol for: HF drops those
 *      and so do we (SmolLM2 lacks 21 of the 256 bytes, e.g. 0x04, 0xf1).
 *
 * Exactness: every id is checked against an oracle (tests/t_tok_vocab.c,
 * tests/t_tok_corpus.c; goldens from tests/oracles/gen_tok.py): HF
 * tokenizers for qwen2, llama-bpe, SmolLM2 and a Llama-2-style
 * tokenizer.json, sentencepiece for Llama-2, llama.cpp for Gemma-3.
 * Assumptions not covered by an oracle: "deepseek-r1-qwen" is treated
 * exactly as "qwen2" (NFC included); Gemma-3's user-defined whitespace
 * tokens ("  ", "\t\t", "\n\n") are matched in the raw text, as llama.cpp
 * does (a sentencepiece model rebuilt from the GGUF disagrees on runs of
 * spaces; no Gemma-3 tokenizer.json was available to settle it).
 *
 * The tokenizer copies everything it needs out of the GGUF file: the
 * gguf_file may be closed after tok_load().
 */
#ifndef PARLEY_TOK_H
#define PARLEY_TOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gguf_file;
struct tok;

#define TOK_MAX_VOCAB     (1 << 22)    /* 4M tokens: far above any model */
#define TOK_MAX_TEXT      (256u << 20) /* longest text tok_encode accepts */
#define TOK_MAX_TOKEN_LEN 4096         /* longest token text accepted */

/* Token types, numbered as tokenizer.ggml.token_type (llama.cpp). */
enum tok_type {
	TOK_TYPE_UNDEFINED = 0,
	TOK_TYPE_NORMAL = 1,
	TOK_TYPE_UNKNOWN = 2,
	TOK_TYPE_CONTROL = 3,
	TOK_TYPE_USER_DEFINED = 4,
	TOK_TYPE_UNUSED = 5,
	TOK_TYPE_BYTE = 6,
};

/* Flags of tok_encode(). */
#define TOK_ADD_SPECIAL   1u /* add BOS / EOS as the model asks */
#define TOK_PARSE_SPECIAL 2u /* match control-token text ("<|im_end|>") */

/* Flags of tok_piece() / tok_decode() / tok_stream. */
#define TOK_DECODE_SPECIAL 1u /* render control tokens as their text */

/* Attribute bits of added tokens (tok_set_attr). */
#define TOK_ATTR_LSTRIP 1u /* swallows whitespace on its left */
#define TOK_ATTR_RSTRIP 2u /* swallows whitespace on its right */

/* A growable array of token ids; the owner frees v. */
struct tok_ids {
	int32_t *v; /* n ids (malloc'ed, may be NULL when cap is 0) */
	size_t n;   /* ids in use */
	size_t cap; /* ids allocated */
};

/* A growable byte buffer; the owner frees p. Not NUL-terminated. */
struct tok_buf {
	char *p;    /* n bytes (malloc'ed, may be NULL when cap is 0) */
	size_t n;   /* bytes in use */
	size_t cap; /* bytes allocated */
};

/*
 * Build a tokenizer from the tokenizer.ggml.* metadata of F. Returns a new
 * tokenizer the caller frees with tok_free(), or NULL with a message in err
 * naming the key, the index and the numbers that are wrong.
 */
struct tok *tok_load(const struct gguf_file *f, char *err, size_t errlen);

/* Free T and everything it owns. NULL is allowed. */
void tok_free(struct tok *t);

/*
 * Append the ids of LEN bytes of TEXT to OUT (flags: TOK_ADD_SPECIAL,
 * TOK_PARSE_SPECIAL). TEXT should be UTF-8; invalid bytes are encoded as
 * bytes, never rejected. Returns 0, or -1 with a message (out of memory,
 * text longer than TOK_MAX_TEXT); on error OUT keeps its old ids.
 */
int tok_encode(const struct tok *t, const char *text, size_t len,
               unsigned flags, struct tok_ids *out, char *err, size_t errlen);

/*
 * The bytes token ID decodes to: *len bytes at the returned pointer, owned
 * by T (not NUL-terminated, may be partial UTF-8). Control tokens give ""
 * unless flags has TOK_DECODE_SPECIAL. An id out of range gives NULL.
 */
const char *tok_piece(const struct tok *t, int32_t id, unsigned flags,
                      size_t *len);

/* The token's text as stored in the vocabulary (e.g. "Ġthe"), or NULL. */
const char *tok_text(const struct tok *t, int32_t id, size_t *len);

/*
 * Append the text of N ids to OUT, as HF's decode() does (for
 * SentencePiece with a space prefix, the first leading space is removed).
 * Returns 0 or -1 (out of memory, id out of range) with a message.
 */
int tok_decode(const struct tok *t, const int32_t *ids, size_t n,
               unsigned flags, struct tok_buf *out, char *err, size_t errlen);

/* The id whose text is exactly TEXT[0..len), or -1. */
int32_t tok_find(const struct tok *t, const char *text, size_t len);

/* True when ID ends a turn (eos, eot, eom, <|im_end|>, <end_of_turn>...). */
bool tok_is_eog(const struct tok *t, int32_t id);

/* True when ID is a control token (never shown to the user). */
bool tok_is_control(const struct tok *t, int32_t id);

/* Set the lstrip / rstrip attributes of token ID (an added token). */
int tok_set_attr(struct tok *t, int32_t id, unsigned attr);

int32_t tok_n_vocab(const struct tok *t);
int32_t tok_bos(const struct tok *t); /* -1 when none */
int32_t tok_eos(const struct tok *t); /* -1 when none */
bool tok_add_bos(const struct tok *t);
bool tok_add_eos(const struct tok *t);

/* "bpe" or "spm", and the pre-tokenizer name ("qwen2", "default"). */
const char *tok_model_name(const struct tok *t);
const char *tok_pre_name(const struct tok *t);

/*
 * A streaming decoder: feed it ids as they are sampled, it appends to OUT
 * only whole, valid UTF-8 characters. Bytes of an incomplete character wait
 * for the next token; a byte that can never start or continue a valid
 * character becomes U+FFFD. For SentencePiece with a space prefix the
 * first space of the stream is dropped (as HF's decode of the reply).
 * The struct holds no heap memory.
 */
struct tok_stream {
	const struct tok *t;   /* the tokenizer (not owned) */
	unsigned flags;        /* TOK_DECODE_SPECIAL or 0 */
	bool at_start;         /* nothing emitted yet (leading space rule) */
	unsigned char pend[4]; /* bytes of an incomplete character */
	size_t npend;          /* bytes in pend, 0..3 */
};

void tok_stream_init(struct tok_stream *s, const struct tok *t, unsigned flags);
/* Append what token ID completes. Returns 0 or -1 (bad id, no memory). */
int tok_stream_push(struct tok_stream *s, int32_t id, struct tok_buf *out);
/* Emit what is pending (an incomplete character becomes U+FFFD). */
int tok_stream_flush(struct tok_stream *s, struct tok_buf *out);

/* Append to the growable arrays; 0 or -1 when out of memory. */
int tok_ids_push(struct tok_ids *a, int32_t id);
int tok_buf_append(struct tok_buf *b, const void *p, size_t n);

#endif /* PARLEY_TOK_H */

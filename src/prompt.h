/*
 * prompt.h - turn a rendered chat template (text + provenance spans) into
 * token ids, matching control tokens only where the template wrote them.
 *
 * NOTES ON THE DESIGN
 *
 * tmpl_render() returns the prompt as spans {off, len, is_content}: bytes
 * the template wrote itself ("<|im_start|>", "\n") and bytes that came
 * from messages (what the user typed). A user who types "<|im_end|>" must
 * get the plain-text tokens of those characters, never the control token.
 *
 * prompt_encode() partitions the text the way tok_encode(TOK_PARSE_SPECIAL)
 * does (control tokens leftmost-longest, everything between them one raw
 * run encoded with tok_encode(flags 0), which still matches USER_DEFINED
 * tokens as Hugging Face does), except that a control token is recognised
 * only when all its bytes lie in one template-literal span. Raw runs cross
 * span boundaries, so "Hi" in "[INST] Hi" tokenizes exactly as the whole
 * string would. For text without control-token look-alikes in the content
 * the result equals tok_encode(text, TOK_PARSE_SPECIAL). (Not reproduced:
 * the lstrip / rstrip attributes of control tokens, which no template in
 * prompts/ relies on; tok.h exposes no getter for them.)
 *
 * Marks: the encoder records "checkpoints" (n_tokens, n_bytes) at which
 * the token list and the text are aligned: after each control token and at
 * the end of each raw run. The chat session uses them to cut a token list
 * at a byte position and re-encode only the rest (session_prompt.c).
 */
#ifndef PARLEY_PROMPT_H
#define PARLEY_PROMPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "template.h"
#include "tok.h"

/* A point where tokens [0, n_tok) are exactly the text [0, n_bytes). */
struct prompt_mark {
	size_t n_tok;   /* tokens before the point */
	size_t n_bytes; /* bytes before the point */
	bool clean;     /* encoding may restart here (after a control token,
	                   at the start, or anywhere for byte-level BPE) */
};

/* A growable list of marks (owner frees v). */
struct prompt_marks {
	struct prompt_mark *v; /* n marks, increasing in both fields */
	size_t n;              /* in use */
	size_t cap;            /* allocated */
};

/* The control tokens of a vocabulary, for the partition step. */
struct prompt_vocab {
	const struct tok *tok; /* borrowed: outlives this struct */
	int32_t *ctl;          /* ids of control tokens with text (owned) */
	size_t n_ctl;          /* entries in ctl, sorted by text length desc */
	bool restart_anywhere; /* byte-level BPE: encoding may restart at any
	                          token boundary (no space-prefix rule) */
};

/* Collect the control tokens of T. 0, or -1 with a message (no memory). */
int prompt_vocab_init(struct prompt_vocab *pv, const struct tok *t, char *err,
                      size_t errlen);

/* Free what prompt_vocab_init allocated. */
void prompt_vocab_free(struct prompt_vocab *pv);

/*
 * Encode TEXT[from, len) whose provenance is SPANS[0, nspans) (covering
 * [0, len) in order; NULL = all template literal), appending ids to OUT
 * and marks (byte positions in TEXT, token counts = positions in OUT)
 * to MARKS (may be NULL). FROM must be 0 or a
 * clean mark of an earlier encoding of the same bytes [0, from): the
 * first raw run is encoded as if it followed a control token. Returns 0,
 * or -1 with a message (no memory); OUT keeps what it had then.
 */
int prompt_encode(const struct prompt_vocab *pv, const char *text, size_t len,
                  const struct tmpl_span *spans, size_t nspans, size_t from,
                  struct tok_ids *out, struct prompt_marks *marks, char *err,
                  size_t errlen);

/*
 * Encode a whole rendered prompt from scratch, as the chat session feeds
 * it: BOS first when the vocabulary asks for it (tok_add_bos), unless the
 * template already wrote it, then prompt_encode(). OUT is reset; MARKS (may
 * be NULL) gets a clean mark at the start. 0, or -1 with a message.
 */
int prompt_encode_prompt(const struct prompt_vocab *pv, const char *text,
                         size_t len, const struct tmpl_span *spans,
                         size_t nspans, struct tok_ids *out,
                         struct prompt_marks *marks, char *err, size_t errlen);

/* Append a mark; 0 or -1 (no memory). */
int prompt_marks_push(struct prompt_marks *m, size_t n_tok, size_t n_bytes,
                      bool clean);

#endif /* PARLEY_PROMPT_H */

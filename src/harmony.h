/*
 * harmony.h - a reply in OpenAI's harmony format (gpt-oss) split into
 * reasoning and answer as it streams.
 *
 * NOTES ON THE DESIGN
 *
 * gpt-oss writes its reply as messages, each a header and a body between
 * control tokens (the session decodes them as their text):
 *
 *   <|channel|>analysis<|message|>...<|end|>
 *   <|start|>assistant<|channel|>final<|message|>...<|return|>
 *
 * (the generation prompt already wrote the first "<|start|>assistant").
 * The channel says where a body goes: `analysis` is reasoning, `final` the
 * answer; `commentary` (tool calls and their preambles: parley runs no
 * tools) and any unknown channel go to the reasoning too, after a
 * "[header] " note naming the channel and its recipient, so nothing is
 * lost and the answer holds only what was meant for the user. A body
 * without a channel (`<|start|>assistant<|message|>...`) is an answer.
 *
 * States (harmony.state):
 *
 *   START --text--> answer      ROLE (after <|start|>: the role, dropped)
 *     |                           |
 *     +--<|channel|>--> HEADER <--+--<|channel|>
 *                         | <|message|>: channel from the header
 *                         v
 *   BETWEEN <--<|end|>-- BODY --text--> reasoning or answer
 *     ^  <|return|>, <|call|> also (ended set)
 *     +-- text other than blanks: a body without channel (answer)
 *
 * Malformed input: a header cut short (a marker other than <|message|>,
 * the reply's end, or more than HARMONY_HEADER_MAX bytes) is read as if
 * <|message|> followed its first word: that word is the channel, the rest
 * the body's first bytes. <|message|> or <|constrain|> where no header is
 * open is dropped; so is <|constrain|> inside a header (the note keeps
 * the rest).
 *
 * Invariants: a marker is recognised across any split of the text (a
 * tail that may begin one is held back until the next bytes decide);
 * successive bodies of the same side are joined by a blank line; nothing
 * but role names, markers and blanks between messages is dropped.
 */
#ifndef PARLEY_HARMONY_H
#define PARLEY_HARMONY_H

#include "tok.h"

#include <stdbool.h>
#include <stddef.h>

#define HARMONY_HEADER_MAX 256 /* bytes of a header before it is cut */

enum harmony_state {
	HARMONY_START,   /* the reply's first bytes */
	HARMONY_ROLE,    /* after <|start|>: the role name */
	HARMONY_HEADER,  /* after <|channel|>: channel, recipient */
	HARMONY_BODY,    /* after <|message|>: the message's text */
	HARMONY_BETWEEN, /* after <|end|>, <|return|> or <|call|> */
};

/* The splitter of one reply. */
struct harmony {
	enum harmony_state state;
	bool body_reasoning; /* BODY (or START): its text is reasoning */
	bool body_begun;     /* BODY: bytes of it released */
	bool ended;          /* <|return|> or <|call|> seen (or
	                        harmony_end), no body since */
	size_t n_reasoning;  /* reasoning bytes released */
	size_t n_answer;     /* answer bytes released */
	struct tok_buf pend; /* a marker's possible beginning (owned) */
	struct tok_buf hdr;  /* ROLE / HEADER: the bytes so far (owned) */
	struct tok_buf note; /* BODY: "[header] " still to write (owned) */
};

/* Receives split text: REASONING or answer, LEN bytes. 0 or -1. */
typedef int (*harmony_fn)(void *ud, bool reasoning, const char *p, size_t len);

/* Start a reply (the prompt ended in "<|start|>assistant"). */
void harmony_init(struct harmony *h);
/* Start a reply whose prompt ended in HARMONY_OPEN_ANALYSIS (a template
   that opens the analysis channel itself): its first bytes are
   reasoning. */
void harmony_init_analysis(struct harmony *h);
/* What such a prompt ends with (blanks after it aside). */
#define HARMONY_OPEN_ANALYSIS "<|channel|>analysis<|message|>"
/* Free what is held (the struct may be initialised again). */
void harmony_free(struct harmony *h);
/* Split LEN bytes of reply text through OUT (a marker's possible
   beginning waits for the next bytes). 0, or -1 when OUT failed or out of
   memory. */
int harmony_feed(struct harmony *h, const char *p, size_t len, harmony_fn out,
                 void *ud);
/* The reply ended: release what is held (a partial marker as text, a
   header cut short as above). The state stays: a reply cut inside an
   analysis body is unfinished reasoning. 0 or -1. */
int harmony_flush(struct harmony *h, harmony_fn out, void *ud);
/* The reply ended at its end token (<|return|>, <|call|>: the session
   stops before decoding it): nothing of it is unfinished. */
void harmony_end(struct harmony *h);
/* Whether the text now arriving is reasoning (a reasoning body, or a
   header whose channel is not yet known to be final), false once the
   reply has ended. */
bool harmony_in_reasoning(const struct harmony *h);
/* Whether vocabulary T has the harmony control tokens. */
bool harmony_vocab(const struct tok *t);

#endif /* PARLEY_HARMONY_H */

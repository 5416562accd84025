/*
 * session_think.c - a reply's text split into reasoning and answer as it
 * streams: thinking models write their reasoning in a block before the
 * answer, between tags the vocabulary tells (session_think_fmt_of):
 *
 *   TAGS     <think> ... </think>              Qwen3, DeepSeek-R1 distills
 *   CHANNEL  <|channel>thought ... <channel|>  Gemma 4 (its turn ends at
 *                                              <turn|>, an end-of-turn id)
 *
 * States (session_think.state):
 *
 *   START --open tag (after blanks only)--> IN --close tag--> ANSWER
 *     |                                     ^ ^                 |
 *     +--any other text--> ANSWER           | +----open tag-----+
 *                          (blanks kept)    |      (CHANNEL only)
 *                                           +-- the prompt ended in the
 *                                               open tag: start here
 *
 * Invariants: a tag is recognised across any split of the text (pieces
 * end anywhere: a piece that may be a tag's beginning is held back until
 * the next one decides); a block opens only at the reply's start (after
 * blanks) or, with CHANNEL, anywhere in the answer; blanks around the
 * reasoning and at the start of the answer after it are dropped (the
 * template writes its own); nothing else is lost: session_think_flush
 * releases what is held, and a reply that ends inside a block leaves state
 * IN (unfinished reasoning).
 *
 * CHANNEL reads a reply as llama.cpp's Gemma 4 parser does: a thought
 * block later in the answer (Gemma 4 may end its answer with an empty one)
 * is reasoning too, joined to the earlier by a blank line, and a close tag
 * outside a block is dropped. The answer's trailing blanks wait in gap:
 * when answer text follows, one run of the blanks around the blocks
 * between is kept (those before, else those after), and at the reply's
 * end they are dropped if a block came after them. Its tags are control
 * tokens: the session decodes the reply with them.
 *
 * A model whose vocabulary has the harmony control tokens (gpt-oss) writes
 * channels instead of tags: its replies go to harmony.c, and the functions
 * below pass them on.
 */
#include "session_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each format's block tags (HARMONY's: only the open of a template that
   opens the analysis channel itself; its markers are harmony.c's). */
static const struct {
	const char *open, *close;
} think_tags[] = {
    [SESSION_THINK_TAGS] = {"<think>", "</think>"},
    [SESSION_THINK_CHANNEL] = {"<|channel>thought", "<channel|>"},
    [SESSION_THINK_HARMONY] = {HARMONY_OPEN_ANALYSIS, ""},
};

/* The open and close tags of T's format (a zeroed struct: <think>). */
#define THINK_OPEN(t)  (think_tags[(t)->fmt].open)
#define THINK_CLOSE(t) (think_tags[(t)->fmt].close)

/* Whether byte C is a blank (dropped around the reasoning). */
static bool think_blank(char c)
{
	return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

enum session_think_fmt session_think_fmt_of(const struct tok *t)
{
	if (harmony_vocab(t))
		return SESSION_THINK_HARMONY;
	if (tok_find(t, "<|channel>", 10) >= 0 &&
	    tok_find(t, "<channel|>", 10) >= 0)
		return SESSION_THINK_CHANNEL;
	return SESSION_THINK_TAGS;
}

void session_think_init(struct session_think *t, enum session_think_fmt fmt,
                        bool open)
{
	memset(t, 0, sizeof(*t));
	t->fmt = fmt;
	if (fmt == SESSION_THINK_HARMONY) {
		if (open)
			harmony_init_analysis(&t->hm);
		else
			harmony_init(&t->hm);
		return;
	}
	t->state = open ? SESSION_THINK_IN : SESSION_THINK_START;
	t->seen = open;
}

void session_think_free(struct session_think *t)
{
	free(t->pend.p);
	free(t->gap.p);
	t->pend = (struct tok_buf){0};
	t->gap = (struct tok_buf){0};
	harmony_free(&t->hm);
}

void session_think_eog(struct session_think *t)
{
	if (t->fmt == SESSION_THINK_HARMONY)
		harmony_end(&t->hm);
}

bool session_think_inside(const struct session_think *t)
{
	return t->fmt == SESSION_THINK_HARMONY ? harmony_in_reasoning(&t->hm)
	                                       : t->state == SESSION_THINK_IN;
}

/* Hand LEN bytes of KIND to OUT. */
static int think_out(struct session_think *t, bool reasoning, const char *p,
                     size_t len, session_think_fn out, void *ud)
{
	if (len == 0)
		return 0;
	if (reasoning)
		t->n_reasoning_bytes += len;
	return out(ud, reasoning, p, len);
}

/* Hand LEN bytes of the current block's reasoning to OUT, after the blank
   line that joins a block to an earlier one's reasoning. */
static int think_reason(struct session_think *t, const char *p, size_t len,
                        session_think_fn out, void *ud)
{
	if (len == 0)
		return 0;
	if (!t->block_begun && t->n_reasoning_bytes > 0 &&
	    think_out(t, true, "\n\n", 2, out, ud))
		return -1;
	t->block_begun = true;
	return think_out(t, true, p, len, out, ud);
}

/* The length of the longest suffix of P[0, n) that is a proper prefix of
   TAG. */
static size_t think_partial(const char *p, size_t n, const char *tag)
{
	size_t tl = strlen(tag), k = n < tl - 1 ? n : tl - 1;

	for (; k > 0; k--)
		if (memcmp(p + n - k, tag, k) == 0)
			return k;
	return 0;
}

/* A block opens: state IN, its reasoning not yet begun. */
static void think_open_block(struct session_think *t)
{
	t->state = SESSION_THINK_IN;
	t->seen = true;
	t->block_begun = false;
}

/* State START over the pending bytes: an open tag after blanks opens the
   block (*REST: the bytes it took), other text makes all of it the answer
   (state ANSWER, nothing taken). 1: decided, 0: maybe the tag, wait. */
static int think_start(struct session_think *t, size_t *rest)
{
	const char *p = t->pend.p;
	size_t n = t->pend.n, k = 0, m, tl = strlen(THINK_OPEN(t));

	while (k < n && think_blank(p[k]))
		k++;
	m = n - k < tl ? n - k : tl;
	*rest = 0;
	/* (m > 0: an empty buffer may have no storage yet) */
	if (m > 0 && memcmp(p + k, THINK_OPEN(t), m) != 0) {
		t->state = SESSION_THINK_ANSWER; /* not a thinking reply */
		return 1;
	}
	if (m < tl)
		return 0;
	think_open_block(t);
	*rest = k + m;
	return 1;
}

/* State IN over the pending bytes: release reasoning up to a close tag
   (then ANSWER), holding back trailing blanks and a possible tag's
   beginning. *REST: the bytes consumed. 1: a tag was taken, 0: wait for
   more, -1: OUT failed. */
static int think_in(struct session_think *t, session_think_fn out, void *ud,
                    size_t *rest)
{
	const char *p = t->pend.p;
	size_t n = t->pend.n, cl = strlen(THINK_CLOSE(t)), end, b = 0, e;
	const char *c = n > 0 ? memmem(p, n, THINK_CLOSE(t), cl) : NULL;

	end = c ? (size_t)(c - p) : n - think_partial(p, n, THINK_CLOSE(t));
	/* blanks at the very start of a block are dropped */
	if (!t->block_begun)
		while (b < end && think_blank(p[b]))
			b++;
	/* so are those before the close tag; without it they wait */
	e = end;
	while (e > b && think_blank(p[e - 1]))
		e--;
	if (think_reason(t, p + b, e - b, out, ud))
		return -1;
	if (c == NULL) {
		*rest = e;
		return 0;
	}
	t->state = SESSION_THINK_ANSWER;
	t->after_block = true;
	*rest = end + cl;
	return 1;
}

/* State ANSWER over the pending bytes: release the answer; with CHANNEL up
   to a tag (an open tag opens a block, a close tag is dropped), holding
   back trailing blanks (in gap) and a possible tag's beginning. *REST,
   the return value: as think_in's. */
static int think_answer(struct session_think *t, session_think_fn out, void *ud,
                        size_t *rest)
{
	const char *p = t->pend.p, *o = NULL, *c = NULL, *tag;
	size_t n = t->pend.n, end = n, b = 0, e;
	bool reopen = t->fmt == SESSION_THINK_CHANNEL;

	if (reopen && n > 0) {
		size_t ho = think_partial(p, n, THINK_OPEN(t)),
		       hc = think_partial(p, n, THINK_CLOSE(t));

		o = memmem(p, n, THINK_OPEN(t), strlen(THINK_OPEN(t)));
		c = memmem(p, n, THINK_CLOSE(t), strlen(THINK_CLOSE(t)));
		end = n - (ho > hc ? ho : hc);
	}
	tag = o && (c == NULL || o < c) ? o : c;
	if (tag)
		end = (size_t)(tag - p);
	/* blanks right after a block are dropped, unless they alone join
	   answer text on both sides */
	if (t->after_block && (!t->answer_begun || t->gap.n > 0))
		while (b < end && think_blank(p[b]))
			b++;
	e = end;
	while (reopen && e > b && think_blank(p[e - 1]))
		e--;
	if (e > b) {
		if (think_out(t, false, t->gap.p, t->gap.n, out, ud) ||
		    think_out(t, false, p + b, e - b, out, ud))
			return -1;
		t->gap.n = 0;
		t->answer_begun = true;
		t->after_block = false;
	}
	if (e < end && tok_buf_append(&t->gap, p + e, end - e))
		return -1;
	*rest = end;
	if (tag == NULL)
		return 0;
	if (tag == o) {
		think_open_block(t);
		*rest += strlen(THINK_OPEN(t));
	} else {
		*rest += strlen(THINK_CLOSE(t)); /* outside a block: dropped */
	}
	return 1;
}

int session_think_feed(struct session_think *t, const char *text, size_t len,
                       session_think_fn out, void *ud)
{
	int more;

	if (t->fmt == SESSION_THINK_HARMONY)
		return harmony_feed(&t->hm, text, len, out, ud);
	if (tok_buf_append(&t->pend, text, len))
		return -1;
	do {
		size_t rest = 0;

		if (t->state == SESSION_THINK_START)
			more = think_start(t, &rest);
		else if (t->state == SESSION_THINK_IN)
			more = think_in(t, out, ud, &rest);
		else
			more = think_answer(t, out, ud, &rest);
		if (more < 0)
			return -1;
		/* keep what was not consumed */
		if (rest > 0) {
			t->pend.n -= rest;
			memmove(t->pend.p, t->pend.p + rest, t->pend.n);
		}
	} while (more > 0);
	return 0;
}

int session_think_flush(struct session_think *t, session_think_fn out, void *ud)
{
	const char *p = t->pend.p;
	size_t n = t->pend.n, b = 0;
	int rc = 0;

	if (t->fmt == SESSION_THINK_HARMONY)
		return harmony_flush(&t->hm, out, ud);
	if (t->state == SESSION_THINK_START) {
		if (n > 0)
			t->state = SESSION_THINK_ANSWER;
		rc = think_out(t, false, p, n, out, ud);
	} else if (t->state == SESSION_THINK_IN) {
		if (!t->block_begun)
			while (b < n && think_blank(p[b]))
				b++;
		rc = think_reason(t, p + b, n - b, out, ud);
	} else {
		/* a tag's beginning is answer text; the trailing blanks are
		   kept unless a block came after them */
		if (n > 0 || !t->after_block)
			rc = think_out(t, false, t->gap.p, t->gap.n, out, ud);
		if (rc == 0)
			rc = think_out(t, false, p, n, out, ud);
	}
	t->pend.n = 0;
	t->gap.n = 0;
	return rc;
}

bool session_think_opened(enum session_think_fmt fmt, const char *t, size_t n)
{
	const char *tag = think_tags[fmt].open;
	size_t tl = strlen(tag);

	while (n > 0 && think_blank(t[n - 1]))
		n--;
	return tl > 0 && n >= tl && memcmp(t + n - tl, tag, tl) == 0;
}

/* ---------- reasoning_effort (gpt-oss's "Reasoning: low") ---------- */

static const char *const think_levels[] = {"unset", "low", "medium", "high"};

const char *session_reasoning_name(int level)
{
	return level >= 1 && level <= 3 ? think_levels[level] : "unset";
}

int session_reasoning_parse(const char *name)
{
	for (int k = 1; k <= 3; k++)
		if (strcmp(name, think_levels[k]) == 0)
			return k;
	return -1;
}

void session_set_reasoning(struct session *s, int level)
{
	s->reasoning = level >= 1 && level <= 3 ? level : 0;
}

int session_reasoning(const struct session *s)
{
	return s->reasoning;
}

const char *session_reasoning_cmd(struct session *s, const char *arg)
{
	/* the line lives until the next call (one per thread) */
	static _Thread_local char line[200];
	int level = *arg ? session_reasoning_parse(arg) : s->reasoning;
	const char *why = s->rem ? "; the server's template decides, it is "
	                           "not sent"
	                  : s->tmpl_effort ? ""
	                                   : "; this model's template does "
	                                     "not read it";

	if (level < 0)
		return NULL;
	if (*arg)
		session_set_reasoning(s, level);
	if (level == 0)
		snprintf(line, sizeof(line),
		         "as the template decides (reasoning_effort unset)%s",
		         why);
	else
		snprintf(line, sizeof(line),
		         "%s: reasoning_effort \"%s\", from the next turn%s",
		         think_levels[level], think_levels[level], why);
	return line;
}

/*
 * session_think.c - a reply's text split into reasoning and answer as it
 * streams: thinking models (Qwen3, DeepSeek-R1 distills) write their
 * reasoning between <think> and </think> before the answer.
 *
 * States (session_think.state):
 *
 *   START --"<think>" (after blanks only)--> IN --"</think>"--> ANSWER
 *     |                                       ^
 *     +--any other text--> ANSWER             +-- the prompt ended in
 *                          (blanks kept)          "<think>": start here
 *
 * Invariants: a tag is recognised across any split of the text (pieces
 * end anywhere: a piece that may be a tag's beginning is held back until
 * the next one decides); only the first <think> of a reply, before any
 * other text, opens reasoning; blanks around the reasoning and at the
 * start of the answer after it are dropped (the template writes its own);
 * nothing else is lost: session_think_flush releases what is held, and a
 * reply that ends inside the block leaves state IN (unfinished reasoning).
 *
 * A model whose vocabulary has the harmony control tokens (gpt-oss) writes
 * channels instead of tags: session_think_init_harmony hands its replies
 * to harmony.c, and the functions below pass them on.
 */
#include "session_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char think_open[] = "<think>";
static const char think_close[] = "</think>";

/* Whether byte C is a blank (dropped around the reasoning). */
static bool think_blank(char c)
{
	return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

void session_think_init(struct session_think *t, bool open)
{
	memset(t, 0, sizeof(*t));
	t->state = open ? SESSION_THINK_IN : SESSION_THINK_START;
	t->seen = open;
}

void session_think_init_harmony(struct session_think *t)
{
	memset(t, 0, sizeof(*t));
	t->harmony = true;
	harmony_init(&t->hm);
}

void session_think_free(struct session_think *t)
{
	free(t->pend.p);
	t->pend = (struct tok_buf){0};
	harmony_free(&t->hm);
}

void session_think_eog(struct session_think *t)
{
	if (t->harmony)
		harmony_end(&t->hm);
}

bool session_think_inside(const struct session_think *t)
{
	return t->harmony ? harmony_in_reasoning(&t->hm)
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

/* State IN over the pending bytes: release reasoning up to a close tag
   (then ANSWER with the rest), holding back trailing blanks and a
   possible tag's beginning. *REST: the bytes consumed. */
static int think_in(struct session_think *t, session_think_fn out, void *ud,
                    size_t *rest)
{
	const char *p = t->pend.p;
	size_t n = t->pend.n, end, hold;
	const char *c =
	    n > 0 ? memmem(p, n, think_close, sizeof(think_close) - 1) : NULL;
	size_t b = 0;

	*rest = n;
	if (c) {
		end = (size_t)(c - p);
		*rest = end + sizeof(think_close) - 1;
	} else {
		hold = think_partial(p, n, think_close);
		end = n - hold;
	}
	/* blanks at the very start of the reasoning are dropped */
	if (t->n_reasoning_bytes == 0)
		while (b < end && think_blank(p[b]))
			b++;
	size_t e = end;

	while (e > b && think_blank(p[e - 1]))
		e--;
	if (c == NULL && e < end)
		end = e; /* trailing blanks wait: the tag may follow */
	if (think_out(t, true, p + b, (c ? e : end) - b, out, ud))
		return -1;
	if (c)
		t->state = SESSION_THINK_ANSWER;
	else
		*rest = end;
	return 0;
}

int session_think_feed(struct session_think *t, const char *text, size_t len,
                       session_think_fn out, void *ud)
{
	size_t rest, b = 0;

	if (t->harmony)
		return harmony_feed(&t->hm, text, len, out, ud);
	if (t->state == SESSION_THINK_ANSWER && t->pend.n == 0) {
		/* blanks after </think> are dropped */
		if (t->seen && !t->answer_begun) {
			while (b < len && think_blank(text[b]))
				b++;
			t->answer_begun = b < len;
		}
		return think_out(t, false, text + b, len - b, out, ud);
	}
	if (tok_buf_append(&t->pend, text, len))
		return -1;
	if (t->state == SESSION_THINK_START) {
		const char *p = t->pend.p;
		size_t n = t->pend.n, k = 0, m;

		while (k < n && think_blank(p[k]))
			k++;
		m = n - k < sizeof(think_open) - 1 ? n - k
		                                   : sizeof(think_open) - 1;
		/* (m > 0: an empty buffer may have no storage yet) */
		if (m > 0 && memcmp(p + k, think_open, m) != 0) {
			/* not a thinking reply: all of it is the answer */
			t->state = SESSION_THINK_ANSWER;
			t->answer_begun = true;
			t->pend.n = 0;
			return think_out(t, false, p, n, out, ud);
		}
		if (m < sizeof(think_open) - 1)
			return 0; /* maybe the tag: wait */
		t->state = SESSION_THINK_IN;
		t->seen = true;
		memmove(t->pend.p, p + k + m, n - k - m);
		t->pend.n = n - k - m;
	}
	if (think_in(t, out, ud, &rest))
		return -1;
	/* keep what was not released; after </think> the rest is answer */
	size_t left = t->pend.n - rest;

	if (left > 0)
		memmove(t->pend.p, t->pend.p + rest, left);
	t->pend.n = left;
	if (t->state == SESSION_THINK_ANSWER && left) {
		char *p = t->pend.p;

		t->pend.p = NULL;
		t->pend.n = 0;
		t->pend.cap = 0;
		int rc = session_think_feed(t, p, left, out, ud);

		free(p);
		return rc;
	}
	return 0;
}

int session_think_flush(struct session_think *t, session_think_fn out, void *ud)
{
	int rc = 0;

	if (t->harmony)
		return harmony_flush(&t->hm, out, ud);
	if (t->pend.n == 0)
		return 0;
	if (t->state == SESSION_THINK_START) {
		t->state = SESSION_THINK_ANSWER;
		rc = think_out(t, false, t->pend.p, t->pend.n, out, ud);
	} else if (t->state == SESSION_THINK_IN) {
		size_t b = 0;

		if (t->n_reasoning_bytes == 0)
			while (b < t->pend.n && think_blank(t->pend.p[b]))
				b++;
		rc = think_out(t, true, t->pend.p + b, t->pend.n - b, out, ud);
	}
	t->pend.n = 0;
	return rc;
}

bool session_think_opened(const char *t, size_t n)
{
	size_t tl = sizeof(think_open) - 1;

	while (n > 0 && think_blank(t[n - 1]))
		n--;
	return n >= tl && memcmp(t + n - tl, think_open, tl) == 0;
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

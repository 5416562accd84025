/*
 * sink_util.h - what the session tests share (t_session, t_session_rs,
 * t_session_shift): a reply's text and notices as they collect them
 * through struct session_cb, a session opened or the test ended, and the
 * questions of their conversations. Static: each test includes it once.
 */
#ifndef PARLEY_SINK_UTIL_H
#define PARLEY_SINK_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session.h"
#include "tap.h"

/* Reply text collected by the piece callback; notices counted, the last
 * kept. */
struct sink {
	char buf[8192];
	size_t n;
	int notices;
	char notice[512];
};

static inline void sink_piece(void *ud, const char *t, size_t n)
{
	struct sink *k = ud;

	if (k->n + n < sizeof(k->buf)) {
		memcpy(k->buf + k->n, t, n);
		k->n += n;
		k->buf[k->n] = '\0';
	}
}

static inline void sink_notice(void *ud, const char *msg)
{
	struct sink *k = ud;

	k->notices++;
	snprintf(k->notice, sizeof(k->notice), "%s", msg);
	tap_diag("notice: %s", msg);
}

/* A session with options O, or the test ends (a failed check naming
 * why). */
static inline struct session *sink_session_open(const struct session_opts *o)
{
	struct session *s;
	char err[512];

	if (session_open(o, &s, err, sizeof(err))) {
		tap_ok(0, "session_open: %s", err);
		exit(tap_done());
	}
	return s;
}

/* A greedy session's options on MODEL (borrowed): N_CTX positions,
 * replies of at most N_PREDICT tokens, a system prompt, two threads, the
 * engine $PARLEY_TEST_BACKEND names (default the CPU). */
static inline struct session_opts sink_opts(const char *model, int32_t n_ctx,
                                            int32_t n_predict)
{
	struct session_opts o;

	memset(&o, 0, sizeof(o));
	o.model_path = model;
	sampler_config_default(&o.sampling);
	o.sampling.temperature = 0; /* greedy */
	o.n_ctx = n_ctx;
	o.n_threads = 2;
	o.backend = getenv("PARLEY_TEST_BACKEND");
	o.n_predict = n_predict;
	o.system_prompt = "You are a helpful assistant.";
	return o;
}

/* The callbacks that collect into K, emptied first (text, notices). */
static inline struct session_cb sink_cb(struct sink *k)
{
	struct session_cb cb = {sink_piece, NULL, sink_notice, k, NULL, NULL};

	k->n = 0;
	k->buf[0] = '\0';
	k->notices = 0;
	k->notice[0] = '\0';
	return cb;
}

/* Send TEXT through S: the reply and notices into K (emptied first), the
 * stats into ST. 0, or -1 (said). */
static inline int sink_send(struct session *s, const char *text, struct sink *k,
                            struct session_stats *st)
{
	struct session_cb cb = sink_cb(k);
	char err[512];

	memset(st, 0, sizeof(*st));
	if (session_send(s, text, strlen(text), &cb, st, err, sizeof(err))) {
		tap_diag("session_send: %s", err);
		return -1;
	}
	return 0;
}

/* Ten turns of a conversation, each with a short answer. */
static const char *const sink_questions[10] = {
    "What is the capital of France?",
    "And of Germany?",
    "Name a color.",
    "What is 2 + 2?",
    "Say hello in Spanish.",
    "What is the largest planet?",
    "Name a fruit.",
    "What is water made of?",
    "Who wrote Hamlet?",
    "Thanks, goodbye!",
};

#endif /* PARLEY_SINK_UTIL_H */

/*
 * session_remote.c - a reply from a remote model (opts.server): the
 * conversation sent to the server, its stream shown and stored as it
 * comes.
 */
#include "session_int.h"

#include "remote.h"
#include "tok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A remote reply in progress: the session_reply, and the front end's
   callbacks the remote's are passed on to. */
struct session_rstream {
	struct session *s;
	const struct session_cb *cb;
	struct session_reply r;
	bool begun; /* store_msg_begin was tried */
	bool oom;   /* text was lost (out of memory) */
};

/* The reply's message in the store, begun once the server answers (an
   error before that stores nothing but the user's message). */
static void session_rs_begin(struct session_rstream *x)
{
	struct session *s = x->s;
	char msg[512];

	if (x->begun)
		return;
	x->begun = true;
	if (s->st && s->conv_id &&
	    store_msg_begin(s->st, s->conv_id, session_parent(s, s->n_msgs),
	                    STORE_ROLE_ASSISTANT, &x->r.store_id, msg,
	                    sizeof(msg)) != STORE_OK) {
		x->r.store_id = 0;
		session_store_notice(x->cb, "store the reply", msg,
		                     "it is shown but not saved");
	}
	session_record_sampling(s, x->r.store_id, x->cb);
	/* the server's token reports are stored as a local reply's (ids -1,
	   their texts with them: store_report.c) */
	x->r.recording = s->store_reports && x->r.store_id != 0;
	x->r.last_store = session_ms();
}

static void session_rs_start(void *ud)
{
	session_rs_begin(ud);
}

static void session_rs_piece(void *ud, const char *text, size_t len)
{
	struct session_rstream *x = ud;

	session_rs_begin(x);
	/* a thinking model's <think> block, split as a local reply's */
	if (session_reply_text(&x->r, text, len, false, x->cb))
		x->oom = true;
	session_store_update(x->s, &x->r, x->cb);
}

static void session_rs_token(void *ud, const struct sampler_report *rep)
{
	struct session_rstream *x = ud;

	session_rs_begin(x);
	session_record(x->s, &x->r, rep, 0, x->cb);
	if (x->cb && x->cb->token)
		x->cb->token(x->cb->ud, rep);
}

static void session_rs_notice(void *ud, const char *msg)
{
	struct session_rstream *x = ud;

	if (x->cb && x->cb->notice)
		x->cb->notice(x->cb->ud, msg);
}

/*
 * The reply from the server: every message of the conversation is sent
 * (the server's template and context apply), the stream is shown and
 * stored as it comes. An error before the server answered stores
 * nothing (the user's message stays); one during the stream keeps the
 * text so far with finish "error".
 */
int session_reply_remote(struct session *s, const struct session_cb *cb,
                         struct session_stats *st, char *err, size_t errlen)
{
	struct session_rstream x = {.s = s, .cb = cb};
	struct remote_cb rcb = {session_rs_piece, session_rs_token,
	                        session_rs_notice, session_rs_start, &x};
	struct remote_params p = {0};
	struct remote_result res;
	struct store_msg_stats ms = {0};
	struct remote_msg *m = calloc(s->n_msgs ? s->n_msgs : 1, sizeof(*m));
	char msg[512];
	int rc;

	memset(st, 0, sizeof(*st));
	if (m == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < s->n_msgs; i++) {
		m[i].role = store_role_name(s->msgs[i].role);
		m[i].content = s->msgs[i].content;
		m[i].len = s->msgs[i].len;
	}
	p.samp = *sampler_config(s->smp);
	p.max_tokens = s->n_predict;
	p.stops = (const char *const *)s->rstops;
	p.n_stops = s->n_rstops;
	rc = remote_chat(s->rem, m, s->n_msgs, &p, &rcb, &res, err, errlen);
	free(m);
	st->finish = res.finish == REMOTE_LENGTH ? STORE_FINISH_LENGTH
	             : res.finish == REMOTE_INTERRUPTED
	                 ? STORE_FINISH_INTERRUPTED
	             : res.finish == REMOTE_ERROR ? STORE_FINISH_ERROR
	                                          : STORE_FINISH_STOP;
	st->n_gen = res.n_tokens;
	st->n_prompt = res.n_prompt;
	st->prefill_ms = res.first_ms;
	st->first_ms = res.first_ms;
	st->decode_ms = res.total_ms - res.first_ms;
	st->server_prompt_n = res.server_prompt_n;
	st->server_prompt_ms = res.server_prompt_ms;
	if (rc < 0 && !res.started) {
		free(x.r.text.p);
		free(x.r.reasoning.p);
		session_think_free(&x.r.think);
		store_reports_free(&x.r.rep);
		return -1;
	}
	session_rs_begin(&x); /* an interrupted wait keeps an empty reply */
	if (session_reply_text(&x.r, NULL, 0, true, cb))
		x.oom = true;
	if (x.oom)
		session_store_notice(cb, "keep the whole reply",
		                     "out of memory", "its end is missing");
	ms.n_tokens = st->n_gen;
	ms.n_prompt_tokens = st->n_prompt;
	ms.prefill_ms = st->prefill_ms;
	ms.decode_ms = st->decode_ms;
	if (x.r.store_id &&
	    (session_store_reasoning(s, &x.r, true, msg, sizeof(msg)) ||
	     store_msg_finish_rep(
	         s->st, x.r.store_id, x.r.text.p ? x.r.text.p : "", x.r.text.n,
	         st->finish, &ms, x.r.recording ? &x.r.rep : NULL, msg,
	         sizeof(msg)) != STORE_OK))
		session_store_notice(cb, "save the finished reply", msg,
		                     "the history may keep it incomplete");
	store_reports_free(&x.r.rep);
	session_record_origin(s, x.r.store_id, cb);
	if (session_push_reply(s, &x.r, st->finish)) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return rc;
}

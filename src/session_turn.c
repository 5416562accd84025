/*
 * session_turn.c - one turn: the user's message stored, the reply
 * generated on the local engine (step 5 of the notes in session.c),
 * shown and stored as it goes; send, regenerate and edit.
 */
#include "session_int.h"

#include "engine.h"
#include "prompt.h"
#include "remote.h"
#include "stopstr.h"
#include "tok.h"
#include "trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A store write of the reply failed: tell the user what (WHAT), why (MSG)
   and what it means (THEN); the reply goes on. */
void session_store_notice(const struct session_cb *cb, const char *what,
                          const char *msg, const char *then)
{
	char note[800];

	if (cb == NULL || cb->notice == NULL)
		return;
	snprintf(note, sizeof(note), "could not %s: %s; %s", what, msg, then);
	cb->notice(cb->ud, note);
}

/* Whether reply R is inside its reasoning block (and has begun it: a
   reply cut before its first token has no reasoning). */
bool session_reply_open(const struct session_reply *r)
{
	return session_think_inside(&r->think) &&
	       (r->reasoning.n > 0 || r->n_reasoning > 0);
}

/* Store the reply's reasoning when it grew (or FINAL: with its state).
   0, or -1 with a message. */
int session_store_reasoning(struct session *s, struct session_reply *r,
                            bool final, char *msg, size_t msglen)
{
	bool open = session_reply_open(r);

	if (!final && r->reasoning.n == r->reasoning_saved)
		return 0;
	if (final && r->reasoning.n == 0 && !open && r->reasoning_saved == 0)
		return 0;
	if (store_msg_set_reasoning(s->st, r->store_id, r->reasoning.p,
	                            r->reasoning.n, r->n_reasoning, open, msg,
	                            msglen) != STORE_OK)
		return -1;
	r->reasoning_saved = r->reasoning.n;
	return 0;
}

/* Store the reply in progress (every SESSION_STORE_MS). A failure is told
   once per reply: the next update or the final one may still succeed. */
void session_store_update(struct session *s, struct session_reply *r,
                          const struct session_cb *cb)
{
	char msg[512];

	if (s->st == NULL || r->store_id == 0 ||
	    session_ms() - r->last_store < SESSION_STORE_MS)
		return;
	if (session_store_reasoning(s, r, false, msg, sizeof(msg)) ||
	    store_msg_update_rep(s->st, r->store_id, r->text.p, r->text.n,
	                         r->recording ? &r->rep : NULL, r->rep_saved,
	                         msg, sizeof(msg)) != STORE_OK) {
		if (!r->update_failed)
			session_store_notice(cb, "save the reply in progress",
			                     msg, "the reply goes on");
		r->update_failed = true;
	} else {
		r->rep_saved = r->rep.n;
	}
	r->last_store = session_ms();
}

/* Where the splitter's text goes: the reply and the front end. */
struct session_sink {
	struct session_reply *r;
	const struct session_cb *cb;
};

/* Keep and show LEN bytes of reasoning or answer (session_think_fn). */
static int session_sink_out(void *ud, bool reasoning, const char *p, size_t len)
{
	struct session_sink *k = ud;
	const struct session_cb *cb = k->cb;

	if (tok_buf_append(reasoning ? &k->r->reasoning : &k->r->text, p, len))
		return -1;
	if (cb && reasoning && cb->reasoning)
		cb->reasoning(cb->ud, p, len);
	else if (cb && !reasoning && cb->piece)
		cb->piece(cb->ud, p, len);
	return 0;
}

/* Split, show and keep LEN bytes of the reply's text (END: the reply
   ended, release what the splitter holds). 0 or -1 (no memory). */
int session_reply_text(struct session_reply *r, const char *p, size_t len,
                       bool end, const struct session_cb *cb)
{
	struct session_sink k = {r, cb};

	if (len && session_think_feed(&r->think, p, len, session_sink_out, &k))
		return -1;
	return end ? session_think_flush(&r->think, session_sink_out, &k) : 0;
}

/* Show and keep OUT's released text. */
static int session_emit(struct session_reply *r, const struct stopstr_out *o,
                        const struct session_cb *cb)
{
	if (o->len == 0)
		return 0;
	return session_reply_text(r, o->text, o->len, false, cb);
}

/* ---------- generation ---------- */

/*
 * The next token from the engine's last logits. Where the sampler can work
 * from a selection (greedy, or top-k within ENGINE_SELECT_MAX) the engine
 * selects where its logits are; otherwise the full row is read. Both give
 * the same token (sampler.h). Returns the id, or -1 with a message.
 */
static int32_t session_pick(struct session *s, int32_t nv,
                            struct sampler_report *rep, char *err,
                            size_t errlen)
{
	int32_t k = sampler_select_k(s->smp, ENGINE_SELECT_MAX);
	const struct sampler_config *g = sampler_config(s->smp);
	const struct engine_selection *sel;
	struct engine_select_req q = {0};
	struct sampler_top t;
	size_t w;
	const float *row;

	if (k == 0) {
		row = engine_logits(s->eng);
		if (row == NULL) {
			snprintf(err, errlen, "no logits to sample from");
			return -1;
		}
		return sampler_sample(s->smp, row, nv, s->kv.v, s->kv.n, rep,
		                      err, errlen);
	}
	w = sampler_window(s->smp, s->kv.n);
	q.k = k;
	q.n_raw = rep ? (g->n_probs < nv ? g->n_probs : nv) : 0;
	q.recent = s->kv.v + (s->kv.n - w);
	q.n_recent = (int32_t)w;
	q.repeat_penalty = g->repeat_penalty;
	q.frequency_penalty = g->frequency_penalty;
	q.presence_penalty = g->presence_penalty;
	sel = engine_select(s->eng, &q, err, errlen);
	if (sel == NULL)
		return -1;
	t.k = sel->k;
	t.id = sel->id;
	t.logit = sel->logit;
	t.raw_logit = sel->raw_logit;
	t.n_raw = sel->n_raw;
	t.raw_id = sel->raw_id;
	t.raw_top = sel->raw_top;
	t.raw_lse = sel->raw_lse;
	t.raw_entropy = sel->raw_entropy;
	return sampler_sample_top(s->smp, &t, rep, err, errlen);
}

/* Keep what the token callback reads of the trace - the eval its token
   was sampled from - before a step queued ahead moves the trace on: the
   layers and the header (the other arrays stay the live trace's: the
   pane's trace has no logits and no vectors). false: out of memory (the
   step is then not queued ahead). */
static bool session_pick_keep(struct session *s)
{
	const struct trace *t = s->tr;

	if (t == NULL)
		return true;
	if (s->pick_cap < t->n_layer) {
		struct trace_stats *p =
		    realloc(s->pick_layers, (size_t)t->n_layer * sizeof(*p));

		if (p == NULL)
			return false;
		s->pick_layers = p;
		s->pick_cap = t->n_layer;
	}
	s->pick_tr = *t;
	memcpy(s->pick_layers, t->layers,
	       (size_t)t->n_layer * sizeof(*s->pick_layers));
	s->pick_tr.layers = s->pick_layers;
	s->pick_valid = true;
	return true;
}

/* Take back the last id evaluated (a step queued ahead for a token the
   reply does not keep): cache and engine as if it had not been. */
static void session_take_back(struct session *s)
{
	if (engine_truncate(s->eng, (int32_t)s->kv.n - 1) == 0) {
		s->kv.n--;
		s->n_evaluated--;
	}
}

/*
 * Step 5: generate after the prompt. Fills ST; 0 or -1 (hard error).
 *
 * Where the engine only queues a step (engine_eval_queues: the GPU), the
 * step of a sampled token is queued as soon as the token is known, before
 * its reports, its piece and the stop strings: the host's work for the
 * token then runs beside the device's step instead of between two steps
 * (item 6 of BENCHMARKS.md: ~5 us a token, 1% of SmolLM2's step). A token
 * that ends the reply is not evaluated (an end of generation), or is
 * taken back (a stop string): the cache ends as it always did. Not while
 * verifying: the verifier compares each step as it is evaluated.
 */
static int session_decode(struct session *s, struct session_reply *r,
                          const struct session_cb *cb, struct session_stats *st,
                          char *err, size_t errlen)
{
	struct tok_stream ts;
	struct tok_buf piece = {0};
	struct stopstr_out o;
	enum store_finish fin = STORE_FINISH_STOP;
	int32_t n_ctx = engine_n_ctx(s->eng), nv = engine_n_vocab(s->eng);
	double t0 = session_ms();
	char msg[256];
	int rc = 0;

	/* the reply's ids are kv[reply_at..]; a branch's replayed ids are
	   already there */
	size_t reply_at = s->kv.n - (r->n_replay - r->end_after_replay);
	bool want_rep = (cb && cb->token) || r->recording;

	/* harmony's markers and Gemma 4's channel tags are control tokens
	   the splitter reads */
	tok_stream_init(&ts, s->tok,
	                s->think_fmt != SESSION_THINK_TAGS ? TOK_DECODE_SPECIAL
	                                                   : 0);
	stopstr_reset(s->stop);
	o.stopped = false;
	for (size_t k = 0; k < r->n_replay && !o.stopped; k++) {
		struct sampler_report rep;

		if (cb && cb->token && k < r->rep.n) {
			session_rep_to_sampler(&r->rep, &r->rep.v[k], &rep);
			cb->token(cb->ud, &rep);
		}
		if (r->end_after_replay && k + 1 == r->n_replay) {
			session_think_eog(&r->think);
			break;
		}
		piece.n = 0;
		if (tok_stream_push(&ts, r->replay[k], &piece) ||
		    stopstr_feed(s->stop, piece.p, piece.n, &o, msg,
		                 sizeof(msg)) ||
		    session_emit(r, &o, cb)) {
			snprintf(err, errlen, "out of memory in the reply");
			fin = STORE_FINISH_ERROR;
			o.stopped = true;
		}
	}
	for (; !o.stopped && !r->end_after_replay;) {
		struct sampler_report rep;
		int32_t id;
		size_t plen;
		const char *p;
		bool eog, ahead, in_think;

		if (session_cancelled(s)) {
			fin = STORE_FINISH_INTERRUPTED;
			break;
		}
		if (s->n_predict > 0 &&
		    st->n_gen + (int64_t)r->n_replay >= s->n_predict) {
			fin = STORE_FINISH_LENGTH;
			break;
		}
		if ((int32_t)s->kv.n >= n_ctx &&
		    (rc = session_shift(s, &reply_at, cb, st, err, errlen))) {
			fin = rc < 0                 ? STORE_FINISH_ERROR
			      : session_cancelled(s) ? STORE_FINISH_INTERRUPTED
			                             : STORE_FINISH_LENGTH;
			if (fin == STORE_FINISH_LENGTH && cb && cb->notice)
				cb->notice(
				    cb->ud,
				    "context full: no older turn left to "
				    "drop; the reply was cut");
			rc = 0;
			break;
		}
		id = session_pick(s, nv, want_rep ? &rep : NULL, msg,
		                  sizeof(msg));
		if (id < 0) {
			snprintf(err, errlen, "sampler: %s", msg);
			fin = STORE_FINISH_ERROR;
			break;
		}
		if (++st->n_gen == 1)
			st->first_ms = session_ms() - r->t_start;
		eog = tok_is_eog(s->tok, id);
		/* (not where a stop string may take the step back and a
		   recurrent state cannot be: engine.h invariant 3) */
		ahead =
		    s->eval_ahead && s->ver == NULL && !eog &&
		    session_pick_keep(s) &&
		    !(engine_recurrent(s->eng) && stopstr_count(s->stop) > 0);
		if (ahead)
			rc = session_eval(s, &id, 1, err, errlen);
		if (want_rep)
			session_record(s, r, &rep, eog ? STORE_REPORT_EOG : 0,
			               cb);
		if (cb && cb->token)
			cb->token(cb->ud, &rep);
		s->pick_valid = false;
		if (eog) {
			session_think_eog(&r->think);
			break;
		}
		piece.n = 0;
		in_think = session_think_inside(&r->think);
		if (tok_stream_push(&ts, id, &piece) ||
		    stopstr_feed(s->stop, piece.p, piece.n, &o, msg,
		                 sizeof(msg)) ||
		    session_emit(r, &o, cb)) {
			if (ahead && rc == 0)
				session_take_back(s);
			snprintf(err, errlen, "out of memory in the reply");
			fin = STORE_FINISH_ERROR;
			rc = 0;
			break;
		}
		if (in_think || session_think_inside(&r->think))
			r->n_reasoning++;
		if (o.stopped) {
			if (ahead && rc == 0)
				session_take_back(s);
			/* a queued step that failed is still an error; one
			   cancelled before it started is not */
			if (ahead && rc < 0)
				fin = STORE_FINISH_ERROR;
			rc = 0;
			break;
		}
		if (!ahead)
			rc = session_eval(s, &id, 1, err, errlen);
		if (rc != 0) {
			fin = rc > 0 ? STORE_FINISH_INTERRUPTED
			             : STORE_FINISH_ERROR;
			rc = 0;
			break;
		}
		st->n_gen_eval++;
		p = tok_piece(s->tok, id, TOK_DECODE_SPECIAL, &plen);
		if (tok_ids_push(&s->al_tok, id) ||
		    tok_buf_append(&s->al_text, p, plen) ||
		    prompt_marks_push(&s->al_marks, s->al_tok.n, s->al_text.n,
		                      s->pv.restart_anywhere ||
		                          tok_is_control(s->tok, id))) {
			session_align_clear(s);
		}
		session_store_update(s, r, cb);
	}
	/* release what is held back (an incomplete character, a possible
	   stop-string prefix) unless a stop string ended the reply */
	stopstr_feed(s->stop, "", 0, &o, msg, sizeof(msg));
	if (!o.stopped) {
		piece.n = 0;
		tok_stream_flush(&ts, &piece);
		if (stopstr_feed(s->stop, piece.p, piece.n, &o, msg,
		                 sizeof(msg)) == 0)
			session_emit(r, &o, cb);
		if (!o.stopped) {
			stopstr_flush(s->stop, &o);
			session_emit(r, &o, cb);
		}
	}
	/* a block still open here is kept as unfinished reasoning */
	if (session_reply_text(r, NULL, 0, true, cb) && rc == 0) {
		snprintf(err, errlen, "out of memory in the reply");
		fin = STORE_FINISH_ERROR;
	}
	free(piece.p);
	st->decode_ms = session_ms() - t0;
	st->finish = fin;
	return fin == STORE_FINISH_ERROR ? -1 : rc;
}

/* Append reply R as the assistant message (finish FIN) and free its
   buffers. 0 or -1 (no memory). */
int session_push_reply(struct session *s, struct session_reply *r,
                       enum store_finish fin)
{
	bool open = session_reply_open(r);
	int rc = session_push_msg(s, STORE_ROLE_ASSISTANT,
	                          r->text.p ? r->text.p : "", r->text.n,
	                          r->store_id, fin);

	if (rc == 0 && (r->reasoning.n || open))
		rc = session_msg_set_reasoning(&s->msgs[s->n_msgs - 1],
		                               r->reasoning.p, r->reasoning.n,
		                               r->n_reasoning, open);
	free(r->text.p);
	free(r->reasoning.p);
	session_think_free(&r->think);
	r->text = (struct tok_buf){0};
	r->reasoning = (struct tok_buf){0};
	return rc;
}

/* ---------- a turn ---------- */

/* Create the conversation in the store on the first message. */
static int session_ensure_conv(struct session *s, const char *first_text,
                               size_t len, char *err, size_t errlen)
{
	struct store_conv_new c = {0};
	struct stat sb;
	char *title;
	int rc;

	if (s->st == NULL || s->conv_id)
		return 0;
	title = store_fmt_title(first_text, len, 60);
	c.title = title ? title : "";
	c.model_path = s->model_path ? s->model_path : "";
	c.model_size = s->model_path && stat(s->model_path, &sb) == 0
	                   ? (int64_t)sb.st_size
	                   : 0;
	c.model_fingerprint = s->model_fp;
	c.template_name = s->template_name ? s->template_name : "";
	c.system_prompt = session_base(s) ? s->msgs[0].content : NULL;
	const struct sampler_config *sc = sampler_config(s->smp);
	char samp[512];

	snprintf(samp, sizeof(samp),
	         "{\"temperature\":%.9g,\"top_k\":%d,\"top_p\":%.9g,"
	         "\"min_p\":%.9g,\"repeat_penalty\":%.9g,\"penalty_last_n\":%d,"
	         "\"seed\":%llu,\"n_predict\":%d,\"n_ctx\":%d}",
	         sc->temperature, sc->top_k, sc->top_p, sc->min_p,
	         sc->repeat_penalty, sc->penalty_last_n,
	         (unsigned long long)sc->seed, s->n_predict,
	         s->eng ? engine_n_ctx(s->eng) : 0);
	c.sampling_json = samp;
	rc = store_conv_create(s->st, &c, &s->conv_id, err, errlen);
	s->origin_done = s->rem == NULL; /* a new row records the local one */
	s->model_done = true;            /* and this model */
	free(title);
	return rc == STORE_OK ? 0 : -1;
}

/* The store id of the message before index I (0: a root). */
int64_t session_parent(const struct session *s, size_t i)
{
	while (i > 0) {
		i--;
		if (s->msgs[i].role != STORE_ROLE_SYSTEM)
			return s->msgs[i].store_id;
	}
	return STORE_PARENT_NONE;
}

/* After a switch of models: the conversation's row names the model that
   answers now (what a resume opens). A failure is a notice. */
static void session_record_model(struct session *s, const struct session_cb *cb)
{
	struct store_conv_new c = {0};
	struct stat sb;
	char msg[512];

	c.model_path = s->model_path;
	c.model_size = stat(s->model_path, &sb) == 0 ? (int64_t)sb.st_size : 0;
	c.model_fingerprint = s->model_fp;
	c.template_name = s->template_name ? s->template_name : "";
	if (store_conv_set_model(s->st, s->conv_id, &c, msg, sizeof(msg)) ==
	    STORE_OK)
		s->model_done = true;
	else
		session_store_notice(cb, "record the conversation's model", msg,
		                     "a resume may open the previous one");
}

/*
 * Tell the store who answers the conversation (once after it was opened,
 * resumed or cleared: the server's base URL and model, "" for the local
 * engine; after a switch, the local model) and who wrote reply MSG_ID
 * (the server and its model, or "" and the local model's name). A
 * failure is a notice: the reply itself is saved.
 */
void session_record_origin(struct session *s, int64_t msg_id,
                           const struct session_cb *cb)
{
	const char *srv = s->rem ? remote_url(s->rem) : "";
	const char *mod = s->rem ? remote_model(s->rem) : "";
	char msg[512];

	if (s->st == NULL || s->conv_id == 0)
		return;
	if (!s->origin_done) {
		if (store_conv_set_origin(s->st, s->conv_id, srv, mod, msg,
		                          sizeof(msg)) == STORE_OK)
			s->origin_done = true;
		else
			session_store_notice(cb,
			                     "record the conversation's "
			                     "server",
			                     msg,
			                     "a resume may ask another model");
	}
	if (!s->model_done && s->rem == NULL)
		session_record_model(s, cb);
	/* a local reply: which model wrote it (a conversation may move
	   between models: session_set_model) */
	if (msg_id && store_msg_set_origin(s->st, msg_id, srv,
	                                   s->rem ? mod : session_model_name(s),
	                                   msg, sizeof(msg)) != STORE_OK)
		session_store_notice(cb,
		                     s->rem ? "record the reply's server"
		                            : "record the reply's model",
		                     msg,
		                     "the history will not say what wrote "
		                     "it");
}

/*
 * Generate the reply to the messages as they are (last one: user). BR
 * (may be NULL) makes it a branch: its replay ids follow the prompt in
 * the cache before anything is sampled, its reports (owned by BR, taken
 * here) start the reply's.
 */
int session_reply(struct session *s, const struct session_cb *cb,
                  struct session_stats *st, struct session_reply *br, char *err,
                  size_t errlen)
{
	struct session_reply r = {0};
	struct store_msg_stats ms = {0};
	size_t n_extra = 0;
	char msg[512];
	int rc;

	if (s->rem)
		return session_reply_remote(s, cb, st, err, errlen);
	if (br) {
		r.rep = br->rep;
		br->rep = (struct store_reports){0};
		r.replay = br->replay;
		r.n_replay = br->n_replay;
		r.end_after_replay = br->end_after_replay;
		n_extra = r.n_replay - r.end_after_replay;
	}
	memset(st, 0, sizeof(*st));
	r.t_start = session_ms();
	st->n_ctx = engine_n_ctx(s->eng);
	verify_summary_init(&s->vsum);
	s->cb = cb; /* for session_eval's progress reports */
	rc = session_prepare(s, cb, st, r.replay, n_extra, err, errlen);
	s->cb = NULL;
	if (rc < 0) {
		st->finish = STORE_FINISH_ERROR;
		st->n_ctx_used = (int32_t)s->kv.n;
		st->verify = s->vsum;
		s->cb = NULL;
		store_reports_free(&r.rep);
		return -1;
	}
	if (s->st && s->conv_id &&
	    store_msg_begin(s->st, s->conv_id, session_parent(s, s->n_msgs),
	                    STORE_ROLE_ASSISTANT, &r.store_id, msg,
	                    sizeof(msg)) != STORE_OK) {
		r.store_id = 0;
		session_store_notice(cb, "store the reply", msg,
		                     "it is generated but not saved");
	}
	session_record_sampling(s, r.store_id, cb);
	r.recording = s->store_reports && r.store_id != 0;
	r.last_store = session_ms();
	session_think_init(&r.think, s->think_fmt, s->think_prompt);
	if (rc > 0) {
		/* nothing of the reply was shown: no tokens, no reports */
		st->finish = STORE_FINISH_INTERRUPTED;
		r.n_replay = 0;
		r.rep.n = 0;
		rc = 0;
	} else {
		rc = session_decode(s, &r, cb, st, err, errlen);
	}
	/* a recurrent state, or the window of window layers keeping it
	   only, at the turn's end, where the next turn starts (engine.h: a
	   cut goes back to a snapshot only) */
	if (rc == 0 && engine_snapshot(s->eng, msg, sizeof(msg)) != 0)
		session_store_notice(cb,
		                     engine_recurrent(s->eng)
		                         ? "keep the recurrent state"
		                         : "keep the sliding window",
		                     msg, "the next turn evaluates more again");
	st->n_ctx_used = (int32_t)s->kv.n;
	st->verify = s->vsum;
	s->cb = NULL;
	ms.n_tokens = (int64_t)r.n_replay + st->n_gen;
	ms.n_prompt_tokens = st->n_prompt - (int32_t)n_extra;
	ms.prefill_ms = st->prefill_ms;
	ms.decode_ms = st->decode_ms;
	if (r.store_id &&
	    (session_store_reasoning(s, &r, true, msg, sizeof(msg)) ||
	     store_msg_finish_rep(s->st, r.store_id, r.text.p ? r.text.p : "",
	                          r.text.n, st->finish, &ms,
	                          r.recording ? &r.rep : NULL, msg,
	                          sizeof(msg)) != STORE_OK))
		session_store_notice(cb, "save the finished reply", msg,
		                     "the history may keep it incomplete");
	store_reports_free(&r.rep);
	session_record_origin(s, r.store_id, cb);
	if (session_push_reply(s, &r, st->finish)) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	/* the ids of the cache, so that a resume rebuilds the same cache */
	if (s->st && s->conv_id &&
	    store_kv_set(s->st, s->conv_id, "tokens", s->kv.v, s->kv.n, NULL, 0,
	                 msg, sizeof(msg)) != STORE_OK)
		session_store_notice(cb, "save the cache's token ids", msg,
		                     "a resume evaluates the conversation "
		                     "again");
	return rc;
}

int session_send(struct session *s, const char *text, size_t len,
                 const struct session_cb *cb, struct session_stats *st,
                 char *err, size_t errlen)
{
	int64_t id = 0;

	if (session_ensure_conv(s, text, len, err, errlen))
		return -1;
	if (s->st) {
		struct store_msg_new m = {0};

		m.conv_id = s->conv_id;
		m.parent_id = session_parent(s, s->n_msgs);
		m.role = STORE_ROLE_USER;
		m.content = text;
		m.len = len;
		m.finish = STORE_FINISH_STOP;
		if (store_msg_append(s->st, &m, &id, err, errlen) != STORE_OK)
			return -1;
	}
	if (session_push_msg(s, STORE_ROLE_USER, text, len, id,
	                     STORE_FINISH_STOP)) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return session_reply(s, cb, st, NULL, err, errlen);
}

/* Index of the last user message, or n_msgs when none. */
static size_t session_last_user(const struct session *s)
{
	for (size_t k = s->n_msgs; k > 0; k--)
		if (s->msgs[k - 1].role == STORE_ROLE_USER)
			return k - 1;
	return s->n_msgs;
}

int session_regen(struct session *s, const struct session_cb *cb,
                  struct session_stats *st, char *err, size_t errlen)
{
	size_t u = session_last_user(s);

	if (u == s->n_msgs) {
		snprintf(err, errlen, "nothing to regenerate yet");
		return -1;
	}
	session_pop_to(s, u + 1);
	if (s->first > u)
		s->first = u;
	if (s->st && s->conv_id && s->msgs[u].store_id)
		store_conv_set_leaf(s->st, s->conv_id, s->msgs[u].store_id,
		                    NULL, 0);
	return session_reply(s, cb, st, NULL, err, errlen);
}

int session_edit_last(struct session *s, const char *text, size_t len,
                      const struct session_cb *cb, struct session_stats *st,
                      char *err, size_t errlen)
{
	size_t u = session_last_user(s);
	int64_t parent;

	if (u == s->n_msgs) {
		snprintf(err, errlen, "no message to edit yet");
		return -1;
	}
	parent = session_parent(s, u);
	session_pop_to(s, u);
	if (s->first > u)
		s->first = u;
	if (s->st && s->conv_id) {
		struct store_msg_new m = {0};
		int64_t id = 0;

		m.conv_id = s->conv_id;
		m.parent_id = parent;
		m.role = STORE_ROLE_USER;
		m.content = text;
		m.len = len;
		m.finish = STORE_FINISH_STOP;
		if (store_msg_append(s->st, &m, &id, err, errlen) != STORE_OK)
			return -1;
		if (session_push_msg(s, STORE_ROLE_USER, text, len, id,
		                     STORE_FINISH_STOP))
			goto nomem;
	} else if (session_push_msg(s, STORE_ROLE_USER, text, len, 0,
	                            STORE_FINISH_STOP)) {
		goto nomem;
	}
	return session_reply(s, cb, st, NULL, err, errlen);
nomem:
	snprintf(err, errlen, "out of memory");
	return -1;
}

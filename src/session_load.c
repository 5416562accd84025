/*
 * session_load.c - opening the session's model: the GGUF file, tokenizer,
 * engine, chat template, sampler and stop strings (remote mode: the
 * server), and resuming a stored conversation: its messages and its saved
 * KV state.
 */
#include "session_int.h"

#include "engine.h"
#include "gguf.h"
#include "gguf_split.h"
#include "model.h"
#include "prompt.h"
#include "promptdir.h"
#include "remote.h"
#include "stopstr.h"
#include "template.h"
#include "tok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SESSION_DEFAULT_CTX 4096
#define SESSION_STALE_MS                                                       \
	10000 /* a reply in progress not updated for this                      \
	         long lost its writer */

/* Compile the chat template chosen by NAME (see session_opts and
   promptdir_template for the choice). */
static int session_load_template(struct session *s, const char *name, char *err,
                                 size_t errlen)
{
	char *src = NULL, msg[512];
	size_t len = 0;
	int rc;

	if (promptdir_template(s->gf, name, &src, &len, &s->template_name, err,
	                       errlen) != 0)
		return -1;
	rc = tmpl_compile(src, len, &s->tmpl, msg, sizeof(msg));
	/* what the template reads, so that the prompt gives it that */
	s->tmpl_effort = memmem(src, len, "reasoning_effort", 16) != NULL;
	s->tmpl_thinking =
	    memmem(src, len, "reasoning_content", 17) == NULL &&
	    (memmem(src, len, "message.thinking", 16) != NULL ||
	     memmem(src, len, "message['thinking']", 19) != NULL ||
	     memmem(src, len, "message[\"thinking\"]", 19) != NULL);
	free(src);
	if (rc != TMPL_OK) {
		snprintf(err, errlen, "chat template %s: %s", s->template_name,
		         msg);
		return -1;
	}
	return 0;
}

/* The text of special token ID (or "" when none). Malloc'd. */
static char *session_special_text(const struct tok *t, int32_t id)
{
	size_t len = 0;
	const char *p = id >= 0 ? tok_text(t, id, &len) : NULL;
	char *r = malloc(len + 1);

	if (r == NULL)
		return NULL;
	if (len)
		memcpy(r, p, len);
	r[len] = '\0';
	return r;
}

/* Step WHAT of a load begins: told to o->phase, which also makes a
   raised cancel flag stop the load here (-1, "cancelled"). */
static int session_load_phase(struct session *s, const struct session_opts *o,
                              const char *what, char *err, size_t errlen)
{
	if (o->phase == NULL)
		return 0;
	if (session_cancelled(s)) {
		snprintf(err, errlen, "cancelled");
		return -1;
	}
	o->phase(o->notice_ud, what);
	return 0;
}

/* Open the model, tokenizer, engine, template, sampler and stop strings. */
int session_load(struct session *s, const struct session_opts *o, char *err,
                 size_t errlen)
{
	struct engine_params ep = {0};
	int32_t n_ctx = o->n_ctx;

	if (session_load_phase(s, o, "the file", err, errlen))
		return -1;
	s->gf = gguf_split_open(o->model_path, err, errlen);
	if (s->gf == NULL)
		return -1;
	if (session_load_phase(s, o, "the weights", err, errlen) ||
	    model_load(s->gf, &s->model, err, errlen))
		return -1;
	if (s->model->cfg.n_vision_tensors > 0 && o->notice != NULL) {
		char note[600];

		snprintf(
		    note, sizeof(note),
		    "%s also holds a vision model (%d tensors): parley runs "
		    "the text model only",
		    o->model_path, s->model->cfg.n_vision_tensors);
		o->notice(o->notice_ud, note);
	}
	if (session_load_phase(s, o, "the tokenizer", err, errlen))
		return -1;
	s->tok = tok_load(s->gf, err, errlen);
	if (s->tok == NULL)
		return -1;
	if (tok_n_vocab(s->tok) > s->model->cfg.n_vocab) {
		snprintf(err, errlen,
		         "%s: tokenizer has %d tokens, the model "
		         "only %d",
		         o->model_path, tok_n_vocab(s->tok),
		         s->model->cfg.n_vocab);
		return -1;
	}
	if (n_ctx <= 0) {
		n_ctx = s->model->cfg.n_ctx_train;
		if (n_ctx <= 0 || n_ctx > SESSION_DEFAULT_CTX)
			n_ctx = SESSION_DEFAULT_CTX;
	}
	ep.n_ctx = n_ctx;
	ep.n_threads = o->n_threads;
	ep.backend = o->backend;
	ep.kv_type = (enum engine_kv_type)o->kv_type;
	ep.window_full = o->full_window_cache;
	ep.window_slack = o->window_slack;
	ep.n_batch = o->n_batch;
	if (session_load_phase(s, o, "the engine", err, errlen) ||
	    engine_open(s->model, &ep, &s->eng, err, errlen))
		return -1;
	s->eval_ahead = engine_eval_queues(s->eng);
	if (engine_notice(s->eng) != NULL && o->notice != NULL)
		o->notice(o->notice_ud, engine_notice(s->eng));
	if (session_load_template(s, o->template_name, err, errlen))
		return -1;
	/* the reply's format comes with the vocabulary: gpt-oss's harmony
	   tokens, Gemma 4's thought channel, else <think> tags */
	s->think_fmt = session_think_fmt_of(s->tok);
	s->bos_text = session_special_text(s->tok, tok_bos(s->tok));
	s->eos_text = session_special_text(s->tok, tok_eos(s->tok));
	if (!s->bos_text || !s->eos_text ||
	    prompt_vocab_init(&s->pv, s->tok, err, errlen)) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	s->smp = NULL;
	if (session_set_sampling(s, &o->sampling, err, errlen))
		return -1;
	s->seed_random = o->seed_random;
	s->stop = stopstr_new(o->stops, o->n_stops, err, errlen);
	if (s->stop == NULL)
		return -1;
	int64_t size = 0;

	/* s->gf->path: a split model's first shard, whichever was given,
	 * so that each shard names the same model */
	if (store_model_fingerprint(s->gf->path, s->model_fp,
	                            sizeof(s->model_fp), &size, NULL, 0))
		s->model_fp[0] = '\0';
	char fmt[512];
	/* a cache type other than the backend's default is named, so a
	   state saved with another one is not loaded (it would convert,
	   but not into the cache this one would have computed); states
	   saved with the default keep their tag */
	snprintf(fmt, sizeof(fmt),
	         "parley-kv/1 backend=%s n_ctx=%d model=%s size=%lld arch=%s "
	         "layers=%d%s%s",
	         engine_backend_name(s->eng), engine_n_ctx(s->eng), s->model_fp,
	         (long long)size, s->model->cfg.arch_name,
	         s->model->cfg.n_layer, o->kv_type ? " kv=" : "",
	         o->kv_type ? engine_kv_type_name(engine_kv_type(s->eng)) : "");
	s->kv_format = strdup(fmt);
	return s->kv_format ? 0 : -1;
}

/*
 * Remote mode: the server instead of the model. A sampler of one id keeps
 * the sampling options (session_sampling); those the API lacks are
 * refused here, before anything is sent.
 */
int session_load_remote(struct session *s, const struct session_opts *o,
                        char *err, size_t errlen)
{
	struct remote_opts ro = {0};

	if (remote_check_sampling(&o->sampling, err, errlen))
		return -1;
	s->smp = sampler_new(&o->sampling, 1, err, errlen);
	if (s->smp == NULL)
		return -1;
	s->seed_random = o->seed_random;
	if (o->n_stops > 0) {
		s->rstops = calloc(o->n_stops, sizeof(*s->rstops));
		if (s->rstops == NULL)
			goto nomem;
		for (; s->n_rstops < o->n_stops; s->n_rstops++)
			if ((s->rstops[s->n_rstops] =
			         strdup(o->stops[s->n_rstops])) == NULL)
				goto nomem;
	}
	ro.url = o->server;
	ro.model = o->server_model;
	ro.api_key = o->api_key;
	ro.insecure = o->insecure;
	ro.timeout_s = o->server_timeout;
	ro.cancel = o->cancel;
	return remote_open(&ro, &s->rem, err, errlen);
nomem:
	snprintf(err, errlen, "out of memory");
	return -1;
}

/* ---------- resuming a stored conversation ---------- */

/* Tell the user about something that happened while opening. */
static void session_open_notice(const struct session_opts *o, const char *msg)
{
	if (o->notice)
		o->notice(o->notice_ud, msg);
}

/*
 * Load the saved KV state KV (non-empty) into the engine. When it does
 * not load (made by another backend, model, context size or KV cache
 * type, or damaged),
 * the cache is left empty and the user is told: the first turn then
 * evaluates the whole conversation, which gives the same reply, only
 * slower. Sets s->restored on success.
 */
static void session_restore_kv(struct session *s, const struct store_kv *kv,
                               const struct session_opts *o)
{
	char why[300], msg[512];
	size_t i;

	why[0] = '\0';
	if (strcmp(kv->format, s->kv_format) != 0)
		snprintf(why, sizeof(why),
		         "it was saved by another backend, model, context "
		         "size or KV cache type (%.200s)",
		         kv->format);
	else if (engine_state_load(s->eng, kv->state, kv->state_len, why,
	                           sizeof(why)) != 0)
		; /* why says it */
	else if ((size_t)engine_n_past(s->eng) != kv->n_tokens)
		snprintf(why, sizeof(why),
		         "it holds %d positions for %zu saved tokens",
		         engine_n_past(s->eng), kv->n_tokens);
	if (why[0] == '\0') {
		s->kv.n = 0;
		for (i = 0; i < kv->n_tokens; i++)
			if (tok_ids_push(&s->kv, kv->tokens[i]))
				break;
		if (s->kv.n == kv->n_tokens) {
			s->restored = true;
			return;
		}
		snprintf(why, sizeof(why), "out of memory");
	}
	engine_truncate(s->eng, 0);
	s->kv.n = 0;
	snprintf(msg, sizeof(msg),
	         "the saved KV cache was not loaded: %s; the conversation "
	         "is evaluated again from the start",
	         why);
	session_open_notice(o, msg);
}

/* origin_done when the store already records who answers now (the
   server and model, or "" for the local engine): no write then. */
static void session_origin_known(struct session *s)
{
	char *srv = NULL, *mod = NULL, msg[256];

	s->origin_done = false;
	if (store_conv_origin(s->st, s->conv_id, &srv, &mod, msg,
	                      sizeof(msg)) != STORE_OK)
		return;
	s->origin_done = s->rem ? strcmp(srv, remote_url(s->rem)) == 0 &&
	                              strcmp(mod, remote_model(s->rem)) == 0
	                        : srv[0] == '\0';
	free(srv);
	free(mod);
}

/* Append the stored messages M[0, n) (an active branch, root first).
   0 or -1 (no memory). */
int session_push_stored(struct session *s, struct store_msg *m, size_t n)
{
	int rc = 0;

	for (size_t i = 0; i < n && rc == 0; i++) {
		enum store_finish f = m[i].finish;

		/* a reply whose writer died (no update for a while): close it
		   as interrupted; a live writer updates every SESSION_STORE_MS
		 */
		if (f == STORE_FINISH_NONE &&
		    m[i].updated_ms < store_now_ms() - SESSION_STALE_MS &&
		    store_msg_finish(s->st, m[i].id, m[i].content, m[i].len,
		                     STORE_FINISH_INTERRUPTED, &m[i].stats,
		                     NULL, 0) == STORE_OK)
			f = STORE_FINISH_INTERRUPTED;
		rc = session_push_msg(s, m[i].role, m[i].content, m[i].len,
		                      m[i].id, f);
		if (rc == 0 && (m[i].reasoning_len || m[i].reasoning_open))
			rc = session_msg_set_reasoning(
			    &s->msgs[s->n_msgs - 1], m[i].reasoning,
			    m[i].reasoning_len, (int32_t)m[i].n_reasoning,
			    m[i].reasoning_open);
	}
	return rc;
}

/* Load conversation CONV_ID's messages (and KV slot) from the store. */
int session_resume(struct session *s, int64_t conv_id,
                   const struct session_opts *o, char *err, size_t errlen)
{
	struct store_conv c;
	struct store_msg *m = NULL;
	struct store_kv kv;
	size_t n = 0;
	char msg[512];
	int rc;

	rc = store_conv_get(s->st, conv_id, &c, &m, &n, err, errlen);
	if (rc != STORE_OK)
		return -1;
	session_pop_to(s, 0);
	rc = 0;
	if (c.system_prompt)
		rc = session_push_msg(s, STORE_ROLE_SYSTEM, c.system_prompt,
		                      strlen(c.system_prompt), 0,
		                      STORE_FINISH_STOP);
	if (rc == 0)
		rc = session_push_stored(s, m, n);
	store_msg_free(m, n);
	store_conv_clear(&c);
	if (rc) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	s->first = session_base(s);
	s->conv_id = conv_id;
	session_origin_known(s);
	if (s->rem)
		return 0; /* a server: no cache to rebuild */
	rc = store_kv_get(s->st, conv_id, &kv, msg, sizeof(msg));
	if (rc != STORE_OK) {
		/* no slot: the first turn prefills everything */
		if (rc != STORE_ENOTFOUND && s->use_kv_slot) {
			char note[700];

			snprintf(note, sizeof(note),
			         "the saved KV cache could not be read: %s; "
			         "the conversation is evaluated again from "
			         "the start",
			         msg);
			session_open_notice(o, note);
		}
		return 0;
	}
	double t0 = session_ms();
	if (session_align_ids(s, kv.tokens, kv.n_tokens)) {
		store_kv_free(&kv);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (s->use_kv_slot && kv.state_len > 0)
		session_restore_kv(s, &kv, o);
	s->restore_ms = session_ms() - t0;
	store_kv_free(&kv);
	return 0;
}

/*
 * session.c - the chat session (see session.h).
 *
 * NOTES ON THE DESIGN: how "only the new tokens" is kept
 *
 * Two token lists are kept:
 *
 *   kv        the ids in the engine's KV cache, exactly (invariant 1).
 *   align     a token list with the text it stands for: al_text, al_tok
 *             and marks (n_tok, n_bytes) where both are aligned. After a
 *             reply, al_text = the rendered prompt + the raw bytes of
 *             every evaluated sampled id, al_tok = the prompt ids + the
 *             sampled ids (so al_tok == kv), and every sampled id is a
 *             mark. After a resume, align holds the saved kv ids and
 *             their decoded text (not yet in the cache).
 *
 * One turn (session_prepare):
 *   1. Render all messages (system first, then the turns still in the
 *      window) with add_generation_prompt; T = text, spans = provenance.
 *   2. L = the common byte prefix of al_text and T. The last clean mark
 *      at or before L gives (n, b): the new list is al_tok[0, n) followed
 *      by prompt_encode(T from byte b). The previous reply is thus reused
 *      as the sampled ids whenever the template renders it back as the
 *      same bytes, however the tokenizer would split it today. When it
 *      does not (a template that trims the content, a stop string cut the
 *      text), the cut falls at the last mark before the difference: a few
 *      more tokens are evaluated, never a wrong one.
 *   3. Context: if the list plus room for a reply exceeds n_ctx, the
 *      oldest turn after the system prompt leaves the window (it stays in
 *      the store) and the prompt is rendered again; the user is told.
 *   4. session_sync_kv: p = LCP(new, kv); engine_truncate(p); evaluate
 *      new[p..]; kv = new.
 *      Regenerate and edit need nothing more: the rendering without the
 *      old reply diverges from kv exactly at the turn boundary.
 *   5. Generate: sample, stream the piece, evaluate, append to kv and
 *      align, until end-of-generation (the eog id itself is not evaluated:
 *      the next rendering brings the template's own closing tokens), a
 *      stop string, the limit or an interrupt. When the cache fills in the
 *      middle of a reply, session_shift() drops the oldest turns, renders
 *      the prompt again, appends the reply's ids so far and evaluates what
 *      changed; the reply goes on (cut only when no turn is left to drop).
 *
 * Invariant 1 is asserted (debug builds: configure --enable-debug) after
 * every truncate and eval.
 *
 * Counting: every id passed to engine_eval is counted (n_evaluated and
 * the per-reply stats), which tests/t_session.c uses to prove that a
 * 10-turn conversation evaluates each token once.
 */
#include "session.h"

#include "engine.h"
#include "gguf.h"
#include "model.h"
#include "prompt.h"
#include "promptdir.h"
#include "remote.h"
#include "stopstr.h"
#include "template.h"
#include "tok.h"
#include "trace.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define SESSION_DEFAULT_CTX   4096
#define SESSION_PREFILL_CHUNK 64 /* ids per eval call (interrupt checks) */
#define SESSION_STALE_MS                                                       \
	10000 /* a reply in progress not updated for this                      \
	         long lost its writer */

struct session {
	/* configuration (fixed after open, except where noted) */
	char *model_path;            /* GGUF path (owned) */
	char *template_name;         /* "model", "chatml" or a path (owned) */
	struct gguf_file *gf;        /* the mapping (owned) */
	struct model *model;         /* weights (owned) */
	struct tok *tok;             /* tokenizer (owned) */
	struct engine *eng;          /* engine + KV cache (owned) */
	struct tmpl *tmpl;           /* compiled chat template (owned) */
	char *bos_text, *eos_text;   /* bos_token / eos_token (owned) */
	struct prompt_vocab pv;      /* control tokens for prompt_encode */
	struct sampler *smp;         /* sampler (owned; set_sampling) */
	struct stopstr *stop;        /* stop strings (owned) */
	int32_t n_predict;           /* reply limit, <= 0 none (mutable) */
	int32_t n_threads;           /* CPU threads asked for, 0: all */
	struct store *st;            /* store or NULL (borrowed) */
	bool use_kv_slot;            /* save the KV state on close */
	bool store_reports;          /* token reports with each reply */
	atomic_int *cancel;          /* cancel flag or NULL (borrowed) */
	const struct session_cb *cb; /* callbacks of the reply running */
	char *kv_format;             /* producer tag of saved states (owned) */
	char model_fp[STORE_FP_LEN]; /* store_model_fingerprint of the file */

	/* conversation */
	struct session_msg *msgs; /* n_msgs messages, system first (owned) */
	size_t n_msgs, cap_msgs;
	size_t first;    /* first non-system message in the window */
	int64_t conv_id; /* store id, 0 until the first message */

	/* cache and alignment (see the notes above) */
	struct tok_ids kv;            /* ids in the cache (invariant 1) */
	struct tok_ids al_tok;        /* aligned ids */
	struct tok_buf al_text;       /* the text they stand for */
	struct prompt_marks al_marks; /* aligned points */
	int64_t n_evaluated;          /* ids evaluated since open */
	double restore_ms;            /* time to load the KV slot */
	bool restored;                /* a KV state was loaded */

	/* live verification (session_set_verify) */
	struct verify *ver;         /* CPU reference beside eng, or NULL */
	struct verify_summary vsum; /* the current reply's steps */

	/* observation for a debug pane */
	struct trace *tr;  /* session_set_trace's trace (owned), attached
	                      to eng (the verifier holds steps of it open
	                      while verifying), or NULL */
	struct tok_ids lp; /* the last prompt's ids (session_last_prompt) */
	size_t lp_reused;  /* of those, taken from the cache */

	/* a reply's step queued before its token is reported (see
	   session_decode): the token callback then reads pick_tr, the trace
	   as the pick left it - the eval that followed has moved tr on */
	bool eval_ahead;      /* queue a token's step first (engine_eval_queues,
	                         or session_set_eval_ahead) */
	bool pick_valid;      /* session_trace returns &pick_tr */
	struct trace pick_tr; /* tr's fields, its own layers */
	struct trace_stats *pick_layers; /* [pick_cap] */
	int pick_cap;                    /* entries of pick_layers */

	/* remote mode (opts.server): no gf, model, tok, eng or tmpl */
	struct remote *rem; /* the server, or NULL: local (owned) */
	char **rstops;      /* stop strings sent to it (owned) */
	size_t n_rstops;    /* entries in rstops */
	bool origin_done;   /* the store knows who answers this conv */
};

/* Monotonic time in milliseconds. */
static double session_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Whether the owner asked to stop the reply (the flag is only read). */
static bool session_cancelled(const struct session *s)
{
	return s->cancel && atomic_load(s->cancel) != 0;
}

/* strdup that returns NULL for NULL. */
static char *session_dup(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* ---------- messages ---------- */

/* Append a message (content copied). 0 or -1 (no memory). */
static int session_push_msg(struct session *s, enum store_role role,
                            const char *text, size_t len, int64_t store_id,
                            enum store_finish finish)
{
	struct session_msg *m;

	if (s->n_msgs == s->cap_msgs) {
		size_t cap = s->cap_msgs ? s->cap_msgs * 2 : 16;

		m = realloc(s->msgs, cap * sizeof(*m));
		if (m == NULL)
			return -1;
		s->msgs = m;
		s->cap_msgs = cap;
	}
	m = &s->msgs[s->n_msgs];
	m->content = malloc(len + 1);
	if (m->content == NULL)
		return -1;
	if (len)
		memcpy(m->content, text, len);
	m->content[len] = '\0';
	m->len = len;
	m->role = role;
	m->store_id = store_id;
	m->finish = finish;
	s->n_msgs++;
	return 0;
}

/* Drop messages from index I on. */
static void session_pop_to(struct session *s, size_t i)
{
	while (s->n_msgs > i)
		free(s->msgs[--s->n_msgs].content);
	if (s->first > s->n_msgs)
		s->first = s->n_msgs;
}

/* Index of the first non-system message. */
static size_t session_base(const struct session *s)
{
	return s->n_msgs > 0 && s->msgs[0].role == STORE_ROLE_SYSTEM;
}

/* ---------- loading ---------- */

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

/* Open the model, tokenizer, engine, template, sampler and stop strings. */
static int session_load(struct session *s, const struct session_opts *o,
                        char *err, size_t errlen)
{
	struct engine_params ep = {0};
	int32_t n_ctx = o->n_ctx;

	s->gf = gguf_open(o->model_path, err, errlen);
	if (s->gf == NULL)
		return -1;
	if (model_load(s->gf, &s->model, err, errlen))
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
	if (engine_open(s->model, &ep, &s->eng, err, errlen))
		return -1;
	s->eval_ahead = engine_eval_queues(s->eng);
	if (engine_notice(s->eng) != NULL && o->notice != NULL)
		o->notice(o->notice_ud, engine_notice(s->eng));
	if (session_load_template(s, o->template_name, err, errlen))
		return -1;
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
	s->stop = stopstr_new(o->stops, o->n_stops, err, errlen);
	if (s->stop == NULL)
		return -1;
	int64_t size = 0;

	if (store_model_fingerprint(o->model_path, s->model_fp,
	                            sizeof(s->model_fp), &size, NULL, 0))
		s->model_fp[0] = '\0';
	char fmt[512];
	snprintf(fmt, sizeof(fmt),
	         "parley-kv/1 backend=%s n_ctx=%d model=%s size=%lld arch=%s "
	         "layers=%d",
	         engine_backend_name(s->eng), engine_n_ctx(s->eng), s->model_fp,
	         (long long)size, s->model->cfg.arch_name,
	         s->model->cfg.n_layer);
	s->kv_format = strdup(fmt);
	return s->kv_format ? 0 : -1;
}

/*
 * Remote mode: the server instead of the model. A sampler of one id keeps
 * the sampling options (session_sampling); those the API lacks are
 * refused here, before anything is sent.
 */
static int session_load_remote(struct session *s, const struct session_opts *o,
                               char *err, size_t errlen)
{
	struct remote_opts ro = {0};

	if (remote_check_sampling(&o->sampling, err, errlen))
		return -1;
	s->smp = sampler_new(&o->sampling, 1, err, errlen);
	if (s->smp == NULL)
		return -1;
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

/* ---------- alignment ---------- */

/* Reset align to empty. */
static void session_align_clear(struct session *s)
{
	s->al_tok.n = 0;
	s->al_text.n = 0;
	s->al_marks.n = 0;
}

/* Align to the saved ids TOKS[0, n): their decoded text, a mark at each. */
static int session_align_ids(struct session *s, const int32_t *toks, size_t n)
{
	size_t i = 0;

	session_align_clear(s);
	if (n > 0 && tok_add_bos(s->tok) && toks[0] == tok_bos(s->tok)) {
		if (tok_ids_push(&s->al_tok, toks[0]))
			return -1;
		i = 1;
	}
	if (prompt_marks_push(&s->al_marks, s->al_tok.n, 0, true))
		return -1;
	for (; i < n; i++) {
		size_t len;
		const char *p =
		    tok_piece(s->tok, toks[i], TOK_DECODE_SPECIAL, &len);

		if (p == NULL)
			return -1;
		if (tok_ids_push(&s->al_tok, toks[i]) ||
		    tok_buf_append(&s->al_text, p, len) ||
		    prompt_marks_push(&s->al_marks, s->al_tok.n, s->al_text.n,
		                      s->pv.restart_anywhere ||
		                          tok_is_control(s->tok, toks[i])))
			return -1;
	}
	return 0;
}

/* ---------- open / close ---------- */

/* Tell the user about something that happened while opening. */
static void session_open_notice(const struct session_opts *o, const char *msg)
{
	if (o->notice)
		o->notice(o->notice_ud, msg);
}

/*
 * Load the saved KV state KV (non-empty) into the engine. When it does
 * not load (made by another backend, model or context size, or damaged),
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
		         "it was saved by another backend, model or context "
		         "size (%.200s)",
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
static int session_push_stored(struct session *s, struct store_msg *m, size_t n)
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
	}
	return rc;
}

/* Load conversation CONV_ID's messages (and KV slot) from the store. */
static int session_resume(struct session *s, int64_t conv_id,
                          const struct session_opts *o, char *err,
                          size_t errlen)
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

int session_open(const struct session_opts *o, struct session **out, char *err,
                 size_t errlen)
{
	struct session *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (s == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	s->model_path = session_dup(o->model_path);
	s->n_predict = o->n_predict;
	s->n_threads = o->n_threads;
	s->st = o->store;
	s->use_kv_slot = o->use_kv_slot && o->store;
	s->store_reports = o->store_reports && o->store;
	s->cancel = o->cancel;
	if (o->server) {
		if (session_load_remote(s, o, err, errlen))
			goto fail;
	} else if (o->model_path == NULL || s->model_path == NULL) {
		snprintf(err, errlen, "no model given");
		goto fail;
	} else if (session_load(s, o, err, errlen)) {
		goto fail;
	}
	if (o->conv_id && s->st) {
		if (session_resume(s, o->conv_id, o, err, errlen))
			goto fail;
	} else if (o->system_prompt &&
	           session_push_msg(s, STORE_ROLE_SYSTEM, o->system_prompt,
	                            strlen(o->system_prompt), 0,
	                            STORE_FINISH_STOP)) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	s->first = session_base(s);
	if (o->verify && session_set_verify(s, true, err, errlen))
		goto fail;
	*out = s;
	return 0;
fail:
	session_close(s);
	return -1;
}

int session_save_kv(struct session *s, char *err, size_t errlen)
{
	size_t len;
	void *buf;
	int rc;

	if (s->st == NULL || s->conv_id == 0 || s->kv.n == 0)
		return 0;
	len = engine_state_size(s->eng);
	buf = malloc(len ? len : 1);
	if (buf == NULL) {
		snprintf(err, errlen, "KV state of %zu bytes: out of memory",
		         len);
		return -1;
	}
	if (engine_state_save(s->eng, buf, len, err, errlen) == 0) {
		free(buf);
		return -1;
	}
	rc = store_kv_set(s->st, s->conv_id, s->kv_format, s->kv.v, s->kv.n,
	                  buf, len, err, errlen);
	free(buf);
	return rc == STORE_OK ? 0 : -1;
}

void session_close(struct session *s)
{
	if (s == NULL)
		return;
	if (s->use_kv_slot && s->eng)
		session_save_kv(s, NULL, 0);
	session_pop_to(s, 0);
	verify_close(s->ver); /* detaches its trace from eng */
	if (s->eng)
		engine_set_trace(s->eng, NULL);
	trace_free(s->tr);
	free(s->pick_layers);
	free(s->lp.v);
	free(s->msgs);
	free(s->kv.v);
	free(s->al_tok.v);
	free(s->al_text.p);
	free(s->al_marks.v);
	stopstr_free(s->stop);
	sampler_free(s->smp);
	remote_close(s->rem);
	for (size_t i = 0; i < s->n_rstops; i++)
		free(s->rstops[i]);
	free(s->rstops);
	prompt_vocab_free(&s->pv);
	free(s->bos_text);
	free(s->eos_text);
	tmpl_free(s->tmpl);
	engine_close(s->eng);
	tok_free(s->tok);
	model_free(s->model);
	gguf_close(s->gf);
	free(s->kv_format);
	free(s->template_name);
	free(s->model_path);
	free(s);
}

/* ---------- one turn ---------- */

/* Render the window with the generation prompt: *T, *SPANS malloc'd. */
static int session_render(struct session *s, char **t, size_t *tlen,
                          struct tmpl_span **spans, size_t *nspans, char *err,
                          size_t errlen)
{
	struct json_value *arr = json_new_array();
	struct tmpl_ctx ctx = {0};
	size_t i;
	int rc;

	if (arr == NULL)
		goto nomem;
	for (i = 0; i < s->n_msgs; i++) {
		const struct session_msg *m = &s->msgs[i];
		struct json_value *o;

		if (m->role != STORE_ROLE_SYSTEM && i < s->first)
			continue;
		o = json_new_object();
		if (o == NULL || json_array_push(arr, o) ||
		    json_object_set(
		        o, "role", 4,
		        json_new_string(store_role_name(m->role),
		                        strlen(store_role_name(m->role)))) ||
		    json_object_set(o, "content", 7,
		                    json_new_string(m->content, m->len)))
			goto nomem;
	}
	ctx.messages = arr;
	ctx.add_generation_prompt = true;
	ctx.bos_token = s->bos_text;
	ctx.eos_token = s->eos_text;
	rc = tmpl_render(s->tmpl, &ctx, t, tlen, spans, nspans, err, errlen);
	json_free(arr);
	return rc == TMPL_OK ? 0 : -1;
nomem:
	json_free(arr);
	snprintf(err, errlen, "out of memory rendering %zu messages",
	         s->n_msgs);
	return -1;
}

/*
 * The ids of prompt T (see the notes, step 2) into OUT with MARKS.
 */
static int session_tokens(struct session *s, const char *t, size_t tlen,
                          const struct tmpl_span *spans, size_t nspans,
                          struct tok_ids *out, struct prompt_marks *marks,
                          char *err, size_t errlen)
{
	size_t l = 0, k, from = 0;
	const struct prompt_mark *best = NULL;

	out->n = 0;
	marks->n = 0;
	while (l < tlen && l < s->al_text.n && t[l] == s->al_text.p[l])
		l++;
	for (k = 0; k < s->al_marks.n; k++) {
		const struct prompt_mark *m = &s->al_marks.v[k];

		if (m->n_bytes > l)
			break;
		if (m->clean && m->n_tok <= s->al_tok.n)
			best = m;
	}
	if (best && best->n_tok > 0) {
		for (k = 0; k < best->n_tok; k++)
			if (tok_ids_push(out, s->al_tok.v[k]))
				goto nomem;
		for (k = 0;
		     k < s->al_marks.n && s->al_marks.v[k].n_tok <= best->n_tok;
		     k++)
			if (prompt_marks_push(marks, s->al_marks.v[k].n_tok,
			                      s->al_marks.v[k].n_bytes,
			                      s->al_marks.v[k].clean))
				goto nomem;
		from = best->n_bytes;
		return prompt_encode(&s->pv, t, tlen, spans, nspans, from, out,
		                     marks, err, errlen);
	}
	/* from scratch: BOS unless the template wrote it */
	return prompt_encode_prompt(&s->pv, t, tlen, spans, nspans, out, marks,
	                            err, errlen);
nomem:
	snprintf(err, errlen, "out of memory");
	return -1;
}

/* Move the window past the oldest turn. False when none can go. */
static bool session_drop_turn(struct session *s)
{
	size_t i = s->first, last_user = s->n_msgs;

	/* never drop the newest user message (the one being answered) */
	for (size_t k = s->n_msgs; k > s->first; k--)
		if (s->msgs[k - 1].role == STORE_ROLE_USER) {
			last_user = k - 1;
			break;
		}
	if (i >= last_user)
		return false;
	i++; /* the oldest message, then everything up to the next user one */
	while (i < last_user && s->msgs[i].role != STORE_ROLE_USER)
		i++;
	s->first = i;
	return true;
}

/* Tell the current reply's front end MSG (a notice), if it listens. */
static void session_cb_notice(struct session *s, const char *msg)
{
	if (s->cb && s->cb->notice)
		s->cb->notice(s->cb->ud, msg);
}

/*
 * Verify the eval of the last N ids of kv (when verifying): the step into
 * the reply's summary, a notice for the reply's first step over
 * tolerance. A failing reference is a notice and turns verification off:
 * the reply goes on unverified.
 */
static void session_verify_step(struct session *s, size_t n)
{
	struct verify_report r;
	char msg[400], note[512];

	if (s->ver == NULL)
		return;
	if (verify_step(s->ver, s->kv.v, (int32_t)s->kv.n, (int32_t)n, &r, msg,
	                sizeof(msg)) != 0) {
		verify_close(s->ver);
		s->ver = NULL;
		snprintf(note, sizeof(note), "%s; verification is off", msg);
		session_cb_notice(s, note);
		return;
	}
	if ((r.first_bad >= 0 || r.logits_bad) && s->vsum.n_bad == 0) {
		if (r.first_bad >= 0)
			snprintf(note, sizeof(note),
			         "verify: token at position %d: layer %d "
			         "differs from the CPU reference by %.3g (over "
			         "%g)",
			         r.pos, r.first_bad, r.first_bad_diff,
			         r.layer_tol);
		else
			snprintf(note, sizeof(note),
			         "verify: token at position %d: logits differ "
			         "from the CPU reference, NMSE %.3g (over %g)",
			         r.pos, r.logit_nmse, r.logit_tol);
		session_cb_notice(s, note);
	}
	verify_summary_add(&s->vsum, &r);
}

/* Evaluate IDS[0, n) at the end of the cache (chunks, interrupt checks).
   Returns 0, 1 when interrupted, -1 on error. */
static int session_eval(struct session *s, const int32_t *ids, size_t n,
                        char *err, size_t errlen)
{
	size_t i = 0;

	while (i < n) {
		size_t c = n - i > SESSION_PREFILL_CHUNK ? SESSION_PREFILL_CHUNK
		                                         : n - i;

		if (session_cancelled(s))
			return 1;
		/* only the last chunk's last token needs logits */
		if (engine_eval(s->eng, ids + i, (int32_t)c,
		                i + c < n ? ENGINE_EVAL_NO_LOGITS : 0, err,
		                errlen))
			return -1;
		for (size_t k = 0; k < c; k++)
			if (tok_ids_push(&s->kv, ids[i + k])) {
				/* invariant 1: the engine forgets what kv
				   could not take */
				engine_truncate(s->eng, (int32_t)s->kv.n);
				snprintf(err, errlen, "out of memory");
				return -1;
			}
		s->n_evaluated += (int64_t)c;
		i += c;
		if (s->cb && s->cb->progress)
			s->cb->progress(s->cb->ud, (int32_t)i, (int32_t)n);
		assert(engine_n_past(s->eng) == (int32_t)s->kv.n); /* inv. 1 */
		session_verify_step(s, c);
	}
	return 0;
}

/*
 * Step 4, shared by a new turn and a shift: bring the cache to hold
 * exactly IDS[0, n). P = the longest common prefix of IDS and kv; the
 * engine is truncated to P and IDS[P, n) evaluated. When IDS is entirely
 * in the cache its last id is evaluated again (P = n - 1): its logits are
 * what the next token is sampled from.
 *
 * Invariant 1 (kv = exactly the ids whose K/V are in the cache) holds on
 * every return, also after an error or an interrupt: kv is cut to P with
 * the engine, and session_eval appends ids only once they are evaluated.
 * *REUSED gets P, *MS the time spent evaluating; kv.n - P ids were
 * evaluated. Returns 0, 1 when interrupted, -1 on error.
 */
static int session_sync_kv(struct session *s, const int32_t *ids, size_t n,
                           size_t *reused, double *ms, char *err, size_t errlen)
{
	size_t p;
	double t0;
	int rc;

	for (p = 0; p < n && p < s->kv.n && ids[p] == s->kv.v[p]; p++)
		;
	if (p == n && p > 0)
		p--; /* re-evaluate the last id: its logits are needed */
	*reused = p;
	*ms = 0;
	if (engine_truncate(s->eng, (int32_t)p)) {
		snprintf(err, errlen, "engine cannot truncate to %zu", p);
		return -1;
	}
	s->kv.n = p;
	assert(engine_n_past(s->eng) == (int32_t)s->kv.n); /* invariant 1 */
	t0 = session_ms();
	rc = session_eval(s, ids + p, n - p, err, errlen);
	*ms = session_ms() - t0;
	return rc;
}

/*
 * Steps 1-4: render, fit, and bring the cache to the prompt followed by
 * EXTRA[0, n_extra) (a branch's reply ids up to the forced one; aligned
 * like sampled ids). Returns 0, 1 when interrupted during the prefill, -1
 * on error.
 */
static int session_prepare(struct session *s, const struct session_cb *cb,
                           struct session_stats *st, const int32_t *extra,
                           size_t n_extra, char *err, size_t errlen)
{
	struct tok_ids ids = {0};
	struct prompt_marks marks = {0};
	struct tmpl_span *spans = NULL;
	char *t = NULL;
	size_t tlen = 0, nspans = 0, p = 0, prompt_n;
	int32_t n_ctx = engine_n_ctx(s->eng), reserve;
	double ms = 0;
	int rc = -1;

	reserve = s->n_predict > 0 ? s->n_predict : SESSION_MIN_REPLY;
	if (reserve > n_ctx / 2)
		reserve = n_ctx / 2;
	for (;;) {
		free(t);
		free(spans);
		t = NULL;
		spans = NULL;
		if (session_render(s, &t, &tlen, &spans, &nspans, err,
		                   errlen) ||
		    session_tokens(s, t, tlen, spans, nspans, &ids, &marks, err,
		                   errlen))
			goto out;
		if ((int64_t)(ids.n + n_extra) + reserve <= n_ctx)
			break;
		if (!session_drop_turn(s)) {
			if ((int64_t)(ids.n + n_extra) < n_ctx)
				break; /* fits, with less room for the reply */
			snprintf(err, errlen,
			         "the prompt needs %zu tokens, the "
			         "context holds %d (use a larger --ctx or a "
			         "shorter message)",
			         ids.n + n_extra, n_ctx);
			goto out;
		}
		st->n_dropped_turns++;
	}
	if (st->n_dropped_turns && cb && cb->notice) {
		char msg[160];

		snprintf(msg, sizeof(msg),
		         "context full: the oldest %d "
		         "turn%s left the context (still in the history)",
		         st->n_dropped_turns,
		         st->n_dropped_turns == 1 ? "" : "s");
		cb->notice(cb->ud, msg);
	}
	prompt_n = ids.n;
	for (size_t k = 0; k < n_extra; k++)
		if (tok_ids_push(&ids, extra[k]))
			goto nomem;
	rc = session_sync_kv(s, ids.v, ids.n, &p, &ms, err, errlen);
	s->lp.n = 0; /* the prompt view's copy; none if out of memory */
	for (size_t i = 0; i < ids.n; i++)
		if (tok_ids_push(&s->lp, ids.v[i])) {
			s->lp.n = 0;
			break;
		}
	s->lp_reused = p;
	st->n_prompt = (int32_t)ids.n;
	st->n_reused = (int32_t)p;
	st->prefill_ms = ms;
	st->n_prompt_eval = (int32_t)(s->kv.n - p);
	if (rc != 0)
		goto out;
	/* the cache now holds the prompt (and EXTRA): align to it */
	s->al_text.n = 0;
	if (tok_buf_append(&s->al_text, t, tlen))
		goto nomem;
	for (size_t k = 0; k < n_extra; k++) {
		size_t plen;
		const char *pc =
		    tok_piece(s->tok, extra[k], TOK_DECODE_SPECIAL, &plen);

		if (pc == NULL || tok_buf_append(&s->al_text, pc, plen) ||
		    prompt_marks_push(&marks, prompt_n + k + 1, s->al_text.n,
		                      s->pv.restart_anywhere ||
		                          tok_is_control(s->tok, extra[k])))
			goto nomem;
	}
	free(s->al_tok.v);
	free(s->al_marks.v);
	s->al_tok = ids;
	s->al_marks = marks;
	ids = (struct tok_ids){0};
	marks = (struct prompt_marks){0};
	goto out;
nomem:
	session_align_clear(s);
	snprintf(err, errlen, "out of memory");
	rc = -1;
out:
	free(ids.v);
	free(marks.v);
	free(t);
	free(spans);
	return rc;
}

/* The reply being generated. */
struct session_reply {
	struct tok_buf text;      /* what was shown (owned) */
	int64_t store_id;         /* its message in the store, or 0 */
	double last_store;        /* session_ms() of the last update */
	bool update_failed;       /* the user was told an update failed */
	bool recording;           /* token reports are kept and stored */
	bool rep_full;            /* STORE_REPORTS_MAX reached: no more kept */
	struct store_reports rep; /* the reply's token reports (owned) */
	size_t rep_saved;         /* of those, in the store */
	const int32_t *replay;    /* ids already in the cache to show first
	                             (a branch: the kept ones, the forced) */
	size_t n_replay;          /* entries in replay */
	bool end_after_replay;    /* the forced id ends the reply (eog) */
};

/* A store write of the reply failed: tell the user what (WHAT), why (MSG)
   and what it means (THEN); the reply goes on. */
static void session_store_notice(const struct session_cb *cb, const char *what,
                                 const char *msg, const char *then)
{
	char note[800];

	if (cb == NULL || cb->notice == NULL)
		return;
	snprintf(note, sizeof(note), "could not %s: %s; %s", what, msg, then);
	cb->notice(cb->ud, note);
}

/* Store the reply in progress (every SESSION_STORE_MS). A failure is told
   once per reply: the next update or the final one may still succeed. */
static void session_store_update(struct session *s, struct session_reply *r,
                                 const struct session_cb *cb)
{
	char msg[512];

	if (s->st == NULL || r->store_id == 0 ||
	    session_ms() - r->last_store < SESSION_STORE_MS)
		return;
	if (store_msg_update_rep(s->st, r->store_id, r->text.p, r->text.n,
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

/* Append the bytes of token ID to SET's text; *OFF, *LEN where. An id
   of -1 (a remote model's token, sampler.h) has no piece here: its text
   is TEXT's TLEN bytes (what the server sent). */
static int session_rep_text(struct session *s, struct store_reports *set,
                            int32_t id, const char *text, size_t tlen,
                            uint32_t *off, uint32_t *len)
{
	size_t n = tlen;
	const char *p =
	    id < 0 ? text : tok_piece(s->tok, id, TOK_DECODE_SPECIAL, &n);

	if (p == NULL)
		n = 0;
	*len = (uint32_t)n;
	return store_reports_text(set, p ? p : "", n, off);
}

/* The stored form of sampler report REP (its first STORE_REPORT_TOP
   candidates) appended to SET with the tokens' bytes. 0 or -1 (memory). */
static int session_rep_add(struct session *s, struct store_reports *set,
                           const struct sampler_report *rep, unsigned flags)
{
	struct store_tok_report t;

	memset(&t, 0, sizeof(t));
	t.chosen = rep->chosen;
	t.flags = flags;
	t.prob = rep->chosen_prob;
	t.raw_logprob = rep->chosen_raw_logprob;
	t.entropy = rep->entropy;
	t.raw_entropy = rep->raw_entropy;
	t.n_kept = rep->n_kept;
	t.n_top = rep->n_top < STORE_REPORT_TOP ? rep->n_top : STORE_REPORT_TOP;
	if (session_rep_text(s, set, t.chosen, rep->chosen_text,
	                     strlen(rep->chosen_text), &t.text_off,
	                     &t.text_len))
		return -1;
	for (int32_t j = 0; j < t.n_top; j++) {
		t.top[j].id = rep->top[j].id;
		t.top[j].logit = rep->top[j].logit;
		t.top[j].logprob = rep->top[j].logprob;
		if (session_rep_text(s, set, t.top[j].id, rep->top_text[j],
		                     strlen(rep->top_text[j]),
		                     &t.top[j].text_off, &t.top[j].text_len))
			return -1;
	}
	return store_reports_push(set, &t);
}

/* Copy the text at OFF, LEN of SET into DST (SAMPLER_TEXT_MAX bytes,
   NUL-terminated), cut at a UTF-8 character boundary when too long (only
   a damaged store has such: they were cut so when recorded). */
static void session_rep_copy_text(const struct store_reports *set, uint32_t off,
                                  uint32_t len, char *dst)
{
	const unsigned char *p = (const unsigned char *)set->text + off;
	size_t n = len;

	if (n > SAMPLER_TEXT_MAX - 1) {
		n = SAMPLER_TEXT_MAX - 1;
		while (n > 0 && (p[n] & 0xC0) == 0x80)
			n--;
	}
	if (n)
		memcpy(dst, p, n);
	dst[n] = '\0';
}

/* The sampler report of stored report T of SET (store.h: NaN where
   unknown); the texts of ids -1 (remote) from SET's text. */
static void session_rep_to_sampler(const struct store_reports *set,
                                   const struct store_tok_report *t,
                                   struct sampler_report *rep)
{
	memset(rep, 0, sizeof(*rep));
	rep->chosen = t->chosen;
	rep->chosen_prob = t->prob;
	rep->chosen_raw_logprob = t->raw_logprob;
	rep->chosen_raw_prob = expf(t->raw_logprob);
	rep->entropy = t->entropy;
	rep->raw_entropy = t->raw_entropy;
	rep->n_kept = t->n_kept;
	rep->n_top = t->n_top;
	for (int32_t j = 0; j < t->n_top; j++) {
		rep->top[j].id = t->top[j].id;
		rep->top[j].logit = t->top[j].logit;
		rep->top[j].logprob = t->top[j].logprob;
		rep->top[j].prob = expf(t->top[j].logprob);
		if (t->top[j].id < 0)
			session_rep_copy_text(set, t->top[j].text_off,
			                      t->top[j].text_len,
			                      rep->top_text[j]);
	}
	if (t->chosen < 0)
		session_rep_copy_text(set, t->text_off, t->text_len,
		                      rep->chosen_text);
}

/* Keep the report of the reply's next token (when recording). Past
   STORE_REPORTS_MAX the reply goes on without reports, told once. */
static void session_record(struct session *s, struct session_reply *r,
                           const struct sampler_report *rep, unsigned flags,
                           const struct session_cb *cb)
{
	char msg[160];

	if (!r->recording || r->rep_full)
		return;
	if (r->rep.n >= STORE_REPORTS_MAX) {
		r->rep_full = true;
		snprintf(msg, sizeof(msg),
		         "token reports are kept for the first %d tokens of "
		         "a reply; the rest of this one has none",
		         STORE_REPORTS_MAX);
		if (cb && cb->notice)
			cb->notice(cb->ud, msg);
		return;
	}
	if (session_rep_add(s, &r->rep, rep, flags)) {
		r->rep_full = true;
		if (cb && cb->notice)
			cb->notice(cb->ud, "token reports: out of memory; the "
			                   "reply goes on without them");
	}
}

/* Show and keep OUT's released text. */
static int session_emit(struct session_reply *r, const struct stopstr_out *o,
                        const struct session_cb *cb)
{
	if (o->len == 0)
		return 0;
	if (tok_buf_append(&r->text, o->text, o->len))
		return -1;
	if (cb && cb->piece)
		cb->piece(cb->ud, o->text, o->len);
	return 0;
}

/*
 * The context filled up in the middle of a reply: drop the oldest turns,
 * render the prompt again, put the reply's ids so far after it and
 * evaluate what the cache lacks (from the first dropped turn on); the
 * reply then goes on. *REPLY_AT (where the reply starts in kv) is updated.
 * Returns 0, 1 when no turn can be dropped (nothing changed), -1 on error.
 */
static int session_shift(struct session *s, size_t *reply_at,
                         const struct session_cb *cb, struct session_stats *st,
                         char *err, size_t errlen)
{
	int32_t n_ctx = engine_n_ctx(s->eng);
	size_t nrep = s->kv.n - *reply_at, p = 0, k;
	struct tok_ids ids = {0};
	struct prompt_marks marks = {0};
	struct tmpl_span *spans = NULL;
	int32_t *rep = NULL;
	char *t = NULL;
	size_t tlen = 0, nspans = 0;
	int dropped = 0, rc = -1;

	rep = malloc((nrep ? nrep : 1) * sizeof(*rep));
	if (rep == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	memcpy(rep, s->kv.v + *reply_at, nrep * sizeof(*rep));
	for (;;) {
		if (!session_drop_turn(s)) {
			rc = 1;
			if (dropped == 0 || ids.n + nrep >= (size_t)n_ctx)
				goto out;
			break; /* fits, with little room left */
		}
		dropped++;
		free(t);
		free(spans);
		t = NULL;
		spans = NULL;
		if (session_render(s, &t, &tlen, &spans, &nspans, err,
		                   errlen) ||
		    session_tokens(s, t, tlen, spans, nspans, &ids, &marks, err,
		                   errlen))
			goto out;
		if (ids.n + nrep + SESSION_MIN_REPLY / 2 <= (size_t)n_ctx)
			break;
	}
	/* the new list: prompt ids, then the reply's ids with their pieces */
	size_t prompt_n = ids.n;

	s->al_text.n = 0;
	if (tok_buf_append(&s->al_text, t, tlen))
		goto nomem;
	for (k = 0; k < nrep; k++) {
		size_t plen;
		const char *pc =
		    tok_piece(s->tok, rep[k], TOK_DECODE_SPECIAL, &plen);

		if (tok_ids_push(&ids, rep[k]) ||
		    tok_buf_append(&s->al_text, pc, plen) ||
		    prompt_marks_push(&marks, ids.n, s->al_text.n,
		                      s->pv.restart_anywhere ||
		                          tok_is_control(s->tok, rep[k])))
			goto nomem;
	}
	double ms = 0;
	int e = session_sync_kv(s, ids.v, ids.n, &p, &ms, err, errlen);

	st->prefill_ms += ms;
	st->n_prompt_eval += (int32_t)(s->kv.n - p);
	if (e != 0) {
		session_align_clear(s);
		rc = e > 0 ? 1 : -1;
		goto out;
	}
	free(s->al_tok.v);
	free(s->al_marks.v);
	s->al_tok = ids;
	s->al_marks = marks;
	ids = (struct tok_ids){0};
	marks = (struct prompt_marks){0};
	*reply_at = prompt_n;
	st->n_dropped_turns += dropped;
	if (cb && cb->notice) {
		char msg[200];

		snprintf(msg, sizeof(msg),
		         "context full: the oldest %d turn%s left the context "
		         "(still in the history); %zu tokens evaluated again",
		         dropped, dropped == 1 ? "" : "s", s->kv.n - p);
		cb->notice(cb->ud, msg);
	}
	rc = 0;
	goto out;
nomem:
	session_align_clear(s);
	snprintf(err, errlen, "out of memory");
	rc = -1;
out:
	free(rep);
	free(ids.v);
	free(marks.v);
	free(t);
	free(spans);
	return rc;
}

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

	tok_stream_init(&ts, s->tok, 0);
	stopstr_reset(s->stop);
	o.stopped = false;
	for (size_t k = 0; k < r->n_replay && !o.stopped; k++) {
		struct sampler_report rep;

		if (cb && cb->token && k < r->rep.n) {
			session_rep_to_sampler(&r->rep, &r->rep.v[k], &rep);
			cb->token(cb->ud, &rep);
		}
		if (r->end_after_replay && k + 1 == r->n_replay)
			break;
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
		bool eog, ahead;

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
		st->n_gen++;
		eog = tok_is_eog(s->tok, id);
		ahead = s->eval_ahead && s->ver == NULL && !eog &&
		        session_pick_keep(s);
		if (ahead)
			rc = session_eval(s, &id, 1, err, errlen);
		if (want_rep)
			session_record(s, r, &rep, eog ? STORE_REPORT_EOG : 0,
			               cb);
		if (cb && cb->token)
			cb->token(cb->ud, &rep);
		s->pick_valid = false;
		if (eog)
			break;
		piece.n = 0;
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
	free(piece.p);
	st->decode_ms = session_ms() - t0;
	st->finish = fin;
	return fin == STORE_FINISH_ERROR ? -1 : rc;
}

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
	free(title);
	return rc == STORE_OK ? 0 : -1;
}

/* The store id of the message before index I (0: a root). */
static int64_t session_parent(const struct session *s, size_t i)
{
	while (i > 0) {
		i--;
		if (s->msgs[i].role != STORE_ROLE_SYSTEM)
			return s->msgs[i].store_id;
	}
	return STORE_PARENT_NONE;
}

/*
 * Tell the store who answers the conversation (once after it was opened,
 * resumed or cleared: the server's base URL and model, "" for the local
 * engine) and, in remote mode, who wrote reply MSG_ID. A failure is a
 * notice: the reply itself is saved.
 */
static void session_record_origin(struct session *s, int64_t msg_id,
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
	if (msg_id && s->rem &&
	    store_msg_set_origin(s->st, msg_id, srv, mod, msg, sizeof(msg)) !=
	        STORE_OK)
		session_store_notice(cb, "record the reply's server", msg,
		                     "the reply is saved");
}

/* ---------- remote replies ---------- */

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
	if (tok_buf_append(&x->r.text, text, len))
		x->oom = true;
	if (x->cb && x->cb->piece)
		x->cb->piece(x->cb->ud, text, len);
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
static int session_reply_remote(struct session *s, const struct session_cb *cb,
                                struct session_stats *st, char *err,
                                size_t errlen)
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
	st->decode_ms = res.total_ms - res.first_ms;
	if (rc < 0 && !res.started) {
		free(x.r.text.p);
		store_reports_free(&x.r.rep);
		return -1;
	}
	session_rs_begin(&x); /* an interrupted wait keeps an empty reply */
	if (x.oom)
		session_store_notice(cb, "keep the whole reply",
		                     "out of memory", "its end is missing");
	ms.n_tokens = st->n_gen;
	ms.n_prompt_tokens = st->n_prompt;
	ms.prefill_ms = st->prefill_ms;
	ms.decode_ms = st->decode_ms;
	if (x.r.store_id &&
	    store_msg_finish_rep(
	        s->st, x.r.store_id, x.r.text.p ? x.r.text.p : "", x.r.text.n,
	        st->finish, &ms, x.r.recording ? &x.r.rep : NULL, msg,
	        sizeof(msg)) != STORE_OK)
		session_store_notice(cb, "save the finished reply", msg,
		                     "the history may keep it incomplete");
	store_reports_free(&x.r.rep);
	session_record_origin(s, x.r.store_id, cb);
	if (session_push_msg(s, STORE_ROLE_ASSISTANT,
	                     x.r.text.p ? x.r.text.p : "", x.r.text.n,
	                     x.r.store_id, st->finish)) {
		free(x.r.text.p);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	free(x.r.text.p);
	return rc;
}

/*
 * Generate the reply to the messages as they are (last one: user). BR
 * (may be NULL) makes it a branch: its replay ids follow the prompt in
 * the cache before anything is sampled, its reports (owned by BR, taken
 * here) start the reply's.
 */
static int session_reply(struct session *s, const struct session_cb *cb,
                         struct session_stats *st, struct session_reply *br,
                         char *err, size_t errlen)
{
	struct session_reply r = {{0}, 0, 0,    false, false, false,
	                          {0}, 0, NULL, 0,     false};
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
	r.recording = s->store_reports && r.store_id != 0;
	r.last_store = session_ms();
	if (rc > 0) {
		/* nothing of the reply was shown: no tokens, no reports */
		st->finish = STORE_FINISH_INTERRUPTED;
		r.n_replay = 0;
		r.rep.n = 0;
		rc = 0;
	} else {
		rc = session_decode(s, &r, cb, st, err, errlen);
	}
	st->n_ctx_used = (int32_t)s->kv.n;
	st->verify = s->vsum;
	s->cb = NULL;
	ms.n_tokens = (int64_t)r.n_replay + st->n_gen;
	ms.n_prompt_tokens = st->n_prompt - (int32_t)n_extra;
	ms.prefill_ms = st->prefill_ms;
	ms.decode_ms = st->decode_ms;
	if (r.store_id &&
	    store_msg_finish_rep(s->st, r.store_id, r.text.p ? r.text.p : "",
	                         r.text.n, st->finish, &ms,
	                         r.recording ? &r.rep : NULL, msg,
	                         sizeof(msg)) != STORE_OK)
		session_store_notice(cb, "save the finished reply", msg,
		                     "the history may keep it incomplete");
	store_reports_free(&r.rep);
	session_record_origin(s, 0, cb);
	if (session_push_msg(s, STORE_ROLE_ASSISTANT, r.text.p ? r.text.p : "",
	                     r.text.n, r.store_id, st->finish)) {
		free(r.text.p);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	free(r.text.p);
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

int session_clear(struct session *s, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	session_pop_to(s, session_base(s));
	s->first = session_base(s);
	s->conv_id = 0;
	s->origin_done = false;
	return 0;
}

int session_set_system(struct session *s, const char *text, char *err,
                       size_t errlen)
{
	size_t base = session_base(s);

	if (base) {
		free(s->msgs[0].content);
		memmove(s->msgs, s->msgs + 1,
		        (s->n_msgs - 1) * sizeof(*s->msgs));
		s->n_msgs--;
		if (s->first > 0)
			s->first--;
	}
	if (text) {
		if (session_push_msg(s, STORE_ROLE_SYSTEM, text, strlen(text),
		                     0, STORE_FINISH_STOP)) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		struct session_msg m = s->msgs[s->n_msgs - 1];

		memmove(s->msgs + 1, s->msgs,
		        (s->n_msgs - 1) * sizeof(*s->msgs));
		s->msgs[0] = m;
		s->first++;
	}
	if (s->st && s->conv_id &&
	    store_conv_set_system(s->st, s->conv_id, text, err, errlen) !=
	        STORE_OK)
		return -1;
	return 0;
}

int session_set_sampling(struct session *s, const struct sampler_config *c,
                         char *err, size_t errlen)
{
	struct sampler_config k = *c;
	struct sampler *n;

	/* the stored reports want STORE_REPORT_TOP candidates; reports never
	   change which token is drawn (sampler.h) */
	if (s->store_reports && k.n_probs < STORE_REPORT_TOP)
		k.n_probs = STORE_REPORT_TOP;
	if (s->rem && remote_check_sampling(c, err, errlen))
		return -1;
	n = sampler_new(&k, s->eng ? engine_n_vocab(s->eng) : 1, err, errlen);
	if (n == NULL)
		return -1;
	sampler_free(s->smp);
	s->smp = n;
	return 0;
}

const struct sampler_config *session_sampling(const struct session *s)
{
	return sampler_config(s->smp);
}

int session_set_verify(struct session *s, bool on, char *err, size_t errlen)
{
	if (on == (s->ver != NULL))
		return 0;
	if (on && s->rem) {
		snprintf(
		    err, errlen,
		    "verification needs the local engine (a remote model's "
		    "layers are on the server)");
		return -1;
	}
	if (!on) {
		verify_close(s->ver);
		s->ver = NULL;
		return 0;
	}
	/* the reference is CPU exact dots on the same weights; it evaluates
	   the cache's ids at the next eval (verify.h, keeping in step); the
	   pane's trace, when there is one, is the one it fills */
	return verify_open(s->eng, s->model, s->tr, s->n_threads, &s->ver, err,
	                   errlen);
}

/*
 * The pane's trace goes on or off. A verifier running uses the trace
 * attached when it opened (its own or ours), so it is closed and opened
 * again around the change (its reference catches up by itself).
 */
int session_set_trace(struct session *s, bool on, char *err, size_t errlen)
{
	bool ver = s->ver != NULL;

	if (on == (s->tr != NULL) || s->rem != NULL) /* remote: the layers
	                                                are on the server */
		return 0;
	verify_close(s->ver); /* detaches its own trace, releases ours */
	s->ver = NULL;
	if (on) {
		s->tr = trace_new_layers(s->model->cfg.n_layer);
		if (s->tr == NULL) {
			char e2[256];

			snprintf(err, errlen, "trace: out of memory");
			if (ver) /* as it was, if it can be */
				session_set_verify(s, true, e2, sizeof(e2));
			return -1;
		}
		engine_set_trace(s->eng, s->tr);
	} else {
		engine_set_trace(s->eng, NULL);
		trace_free(s->tr);
		s->tr = NULL;
	}
	return ver ? session_set_verify(s, true, err, errlen) : 0;
}

int32_t session_n_vocab(const struct session *s)
{
	return s->eng ? engine_n_vocab(s->eng) : 0; /* 0: remote mode */
}

const char *session_token_text(const struct session *s, int32_t id, size_t *len,
                               bool *control)
{
	if (control)
		*control = false;
	if (s->tok == NULL) /* remote mode: no tokenizer of ours */
		return NULL;
	if (control)
		*control = id >= 0 && tok_is_control(s->tok, id);
	return tok_piece(s->tok, id, TOK_DECODE_SPECIAL, len);
}

const int32_t *session_last_prompt(const struct session *s, size_t *n,
                                   size_t *reused)
{
	*n = s->lp.n;
	*reused = s->lp.n ? s->lp_reused : 0;
	return s->lp.v;
}

bool session_verifying(const struct session *s)
{
	return s->ver != NULL;
}

const struct trace *session_trace(const struct session *s)
{
	if (s->pick_valid)
		return &s->pick_tr;
	if (s->tr)
		return s->tr;
	return s->ver ? verify_trace(s->ver) : NULL;
}

void session_set_eval_ahead(struct session *s, bool on)
{
	s->eval_ahead = on;
}

void session_set_n_predict(struct session *s, int32_t n)
{
	s->n_predict = n;
}

int session_set_title(struct session *s, const char *title, char *err,
                      size_t errlen)
{
	if (s->st == NULL || s->conv_id == 0) {
		snprintf(err, errlen, "no stored conversation yet");
		return -1;
	}
	return store_conv_rename(s->st, s->conv_id, title, err, errlen) ==
	               STORE_OK
	           ? 0
	           : -1;
}

const struct session_msg *session_messages(const struct session *s, size_t *n)
{
	*n = s->n_msgs;
	return s->msgs;
}

int64_t session_conv_id(const struct session *s)
{
	return s->conv_id;
}

const int32_t *session_kv_tokens(const struct session *s, size_t *n)
{
	*n = s->kv.n;
	return s->kv.v;
}

int64_t session_n_evaluated(const struct session *s)
{
	return s->n_evaluated;
}

const struct gguf_file *session_gguf(const struct session *s)
{
	return s->gf;
}

int32_t session_n_ctx(const struct session *s)
{
	return s->eng ? engine_n_ctx(s->eng) : 0;
}

const char *session_backend_name(const struct session *s)
{
	return s->eng ? engine_backend_name(s->eng) : "remote";
}

const char *session_device_name(const struct session *s)
{
	return s->eng ? engine_device_name(s->eng) : remote_url(s->rem);
}

const char *session_server(const struct session *s)
{
	return s->rem ? remote_url(s->rem) : NULL;
}

const char *session_server_model(const struct session *s)
{
	return s->rem ? remote_model(s->rem) : NULL;
}

const char *session_model_path(const struct session *s)
{
	return s->rem ? remote_model(s->rem) : s->model_path;
}

const char *session_template_name(const struct session *s)
{
	return s->template_name;
}

double session_restore_ms(const struct session *s, bool *loaded)
{
	if (loaded)
		*loaded = s->restored;
	return s->restore_ms;
}

int session_msg_reports(struct session *s, size_t msg_index,
                        struct sampler_report **out, size_t *n, char *err,
                        size_t errlen)
{
	struct store_reports r = {0};
	const struct session_msg *m;

	*out = NULL;
	*n = 0;
	if (msg_index >= s->n_msgs) {
		snprintf(err, errlen, "no message %zu (of %zu)", msg_index,
		         s->n_msgs);
		return -1;
	}
	m = &s->msgs[msg_index];
	if (s->st == NULL || m->store_id == 0 ||
	    m->role != STORE_ROLE_ASSISTANT)
		return 0;
	if (store_msg_reports(s->st, m->store_id, &r, err, errlen) != STORE_OK)
		return -1;
	if (r.n > 0) {
		*out = malloc(r.n * sizeof(**out));
		if (*out == NULL) {
			store_reports_free(&r);
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		for (size_t i = 0; i < r.n; i++)
			session_rep_to_sampler(&r, &r.v[i], &(*out)[i]);
		*n = r.n;
	}
	store_reports_free(&r);
	return 0;
}

/*
 * The forced token's report: the distribution is the one stored for the
 * same position (the context before it is the same), the choice is
 * FORCED; what is not known is NaN (session.h).
 */
static int session_rep_forced(struct session *s, struct store_reports *dst,
                              const struct store_reports *src, size_t pos,
                              int32_t forced)
{
	struct store_tok_report t = src->v[pos];

	t.chosen = forced;
	t.flags = STORE_REPORT_FORCED |
	          (tok_is_eog(s->tok, forced) ? STORE_REPORT_EOG : 0);
	t.prob = NAN;
	t.raw_logprob = NAN;
	for (int32_t j = 0; j < t.n_top; j++) {
		if (t.top[j].id == forced)
			t.raw_logprob = t.top[j].logprob;
		if (session_rep_text(s, dst, t.top[j].id,
		                     src->text + t.top[j].text_off,
		                     t.top[j].text_len, &t.top[j].text_off,
		                     &t.top[j].text_len))
			return -1;
	}
	if (session_rep_text(s, dst, forced, NULL, 0, &t.text_off, &t.text_len))
		return -1;
	return store_reports_push(dst, &t);
}

/* Copy report I of SRC (with its texts) to DST. */
static int session_rep_copy(struct store_reports *dst,
                            const struct store_reports *src, size_t i)
{
	struct store_tok_report t = src->v[i];

	if (store_reports_text(dst, src->text + t.text_off, t.text_len,
	                       &t.text_off))
		return -1;
	for (int32_t j = 0; j < t.n_top; j++)
		if (store_reports_text(dst, src->text + t.top[j].text_off,
		                       t.top[j].text_len, &t.top[j].text_off))
			return -1;
	return store_reports_push(dst, &t);
}

int session_branch_at(struct session *s, size_t msg_index, int32_t token_pos,
                      int32_t forced_id, const struct session_cb *cb,
                      struct session_stats *st, char *err, size_t errlen)
{
	struct session_reply br;
	struct store_reports old = {0};
	int32_t *ids = NULL;
	const struct session_msg *m;
	int rc = -1;

	memset(&br, 0, sizeof(br));
	if (s->rem != NULL) {
		snprintf(err, errlen,
		         "branching at a token needs the local model's token "
		         "ids: not available for a remote model");
		return -1;
	}
	if (msg_index >= s->n_msgs || msg_index == 0 ||
	    s->msgs[msg_index].role != STORE_ROLE_ASSISTANT ||
	    s->msgs[msg_index - 1].role != STORE_ROLE_USER) {
		snprintf(err, errlen,
		         "message %zu is not a reply to a user message",
		         msg_index);
		return -1;
	}
	m = &s->msgs[msg_index];
	if (forced_id < 0 || forced_id >= engine_n_vocab(s->eng)) {
		snprintf(err, errlen, "token id %d is not in the vocabulary",
		         forced_id);
		return -1;
	}
	if (s->st == NULL || m->store_id == 0) {
		snprintf(err, errlen,
		         "message %zu is not stored: no token "
		         "reports to branch from",
		         msg_index);
		return -1;
	}
	if (store_msg_reports(s->st, m->store_id, &old, err, errlen) !=
	    STORE_OK)
		return -1;
	if (token_pos < 0 || (size_t)token_pos >= old.n) {
		snprintf(err, errlen,
		         "message %zu has %zu token reports; no token at "
		         "position %d",
		         msg_index, old.n, token_pos);
		goto out;
	}
	/* a remote model's reply (continued here with a local model) has
	   its reports stored with ids -1: nothing to replay */
	for (int32_t k = 0; k <= token_pos; k++)
		if (old.v[k].chosen < 0) {
			snprintf(err, errlen,
			         "message %zu came from a remote model: its "
			         "token ids are unknown here, it cannot be "
			         "branched at a token",
			         msg_index);
			goto out;
		}
	/* the kept ids, then the forced one (sampled ids never are eog
	   before the last report, which token_pos < n excludes) */
	ids = malloc(((size_t)token_pos + 1) * sizeof(*ids));
	if (ids == NULL)
		goto nomem;
	for (int32_t k = 0; k < token_pos; k++) {
		ids[k] = old.v[k].chosen;
		if (session_rep_copy(&br.rep, &old, (size_t)k))
			goto nomem;
	}
	ids[token_pos] = forced_id;
	if (session_rep_forced(s, &br.rep, &old, (size_t)token_pos, forced_id))
		goto nomem;
	br.replay = ids;
	br.n_replay = (size_t)token_pos + 1;
	br.end_after_replay = tok_is_eog(s->tok, forced_id);
	/* the old reply stays in the store as a sibling; the new one
	   becomes the leaf when it is stored */
	session_pop_to(s, msg_index);
	if (s->first > msg_index - 1)
		s->first = msg_index - 1;
	rc = session_reply(s, cb, st, &br, err, errlen);
	goto out;
nomem:
	snprintf(err, errlen, "out of memory");
	rc = -1;
out:
	store_reports_free(&br.rep);
	store_reports_free(&old);
	free(ids);
	return rc;
}

int session_sibling(struct session *s, size_t msg_index, int dir,
                    int64_t *msg_id, int32_t *which, int32_t *count, char *err,
                    size_t errlen)
{
	struct store_msg *v = NULL;
	const struct session_msg *m;
	int64_t parent = -1;
	size_t n = 0, self = 0, k = 0, nsib = 0;

	if (msg_index >= s->n_msgs ||
	    s->msgs[msg_index].role == STORE_ROLE_SYSTEM) {
		snprintf(err, errlen, "no message %zu", msg_index);
		return -1;
	}
	m = &s->msgs[msg_index];
	if (s->st == NULL || s->conv_id == 0 || m->store_id == 0) {
		snprintf(err, errlen, "message %zu is not stored", msg_index);
		return -1;
	}
	if (store_msg_list(s->st, s->conv_id, &v, &n, err, errlen) != STORE_OK)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (v[i].id == m->store_id)
			parent = v[i].parent_id;
	/* the siblings by id (store_msg_list's order): find M among them */
	for (size_t i = 0; i < n; i++) {
		if (v[i].parent_id != parent)
			continue;
		if (v[i].id == m->store_id)
			self = nsib;
		nsib++;
	}
	if (parent < 0 || nsib == 0) {
		store_msg_free(v, n);
		snprintf(err, errlen, "message %zu is not in the store",
		         msg_index);
		return -1;
	}
	k = (self + nsib + (size_t)(dir % (int)nsib + (int)nsib)) % nsib;
	for (size_t i = 0, j = 0; i < n; i++) {
		if (v[i].parent_id != parent)
			continue;
		if (j++ == k)
			*msg_id = v[i].id;
	}
	*which = (int32_t)k + 1;
	*count = (int32_t)nsib;
	store_msg_free(v, n);
	return 0;
}

int session_switch_branch(struct session *s, int64_t msg_id, char *err,
                          size_t errlen)
{
	struct store_conv c;
	struct store_msg *m = NULL;
	size_t n = 0, base = session_base(s);
	int rc;

	if (s->st == NULL || s->conv_id == 0) {
		snprintf(err, errlen, "the conversation is not stored");
		return -1;
	}
	if (store_conv_select(s->st, s->conv_id, msg_id, NULL, err, errlen) !=
	    STORE_OK)
		return -1;
	if (store_conv_get(s->st, s->conv_id, &c, &m, &n, err, errlen) !=
	    STORE_OK)
		return -1;
	/* the system prompt stays; the cache and align stay too: the next
	   turn's rendering diverges from them where the branches do
	   (session_prepare), so only what differs is evaluated */
	session_pop_to(s, base);
	rc = session_push_stored(s, m, n);
	store_msg_free(m, n);
	store_conv_clear(&c);
	s->first = session_base(s);
	if (rc) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

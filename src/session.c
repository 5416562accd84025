/*
 * session.c - the chat session (see session.h): opening and closing, the
 * messages, the settings and the accessors. The rest of the module:
 *
 *   session_load.c    loading the model (or the server), resuming a
 *                     stored conversation;
 *   session_prompt.c  a turn's prompt: rendered, tokenized, fitted to the
 *                     context and brought into the KV cache (steps 1-4
 *                     below, and the shift of step 5);
 *   session_turn.c    generating a reply (step 5) and the turns that ask
 *                     for one: send, regenerate, edit;
 *   session_report.c  the replies' token reports, kept and read back;
 *   session_remote.c  a reply from a remote server;
 *   session_branch.c  branches: at a token, siblings, switching;
 *   session_int.h     what they share.
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
 *      The context shift: where the engine can (engine_can_shift: RoPE
 *      keys, no recurrent layer) and opts.no_context_shift is off, the
 *      cache loses the run of ids of the turns that left and keeps what
 *      followed them, re-rotated (session_kv_shift, engine.h invariant
 *      6), so step 4 evaluates only what is new. The new list keeps the
 *      kept turns' aligned ids (session_tokens_gap: as step 2 keeps the
 *      previous reply's sampled ids), so that they are the cached ones
 *      whatever the tokenizer would make of their text; st->n_shifted
 *      counts the ids so kept. Deeper layers of a shifted cache still saw
 *      the dropped turns: an approximation, which --no-context-shift
 *      avoids.
 *   4. session_sync_kv: p = LCP(new, kv); engine_truncate(p); evaluate
 *      new[p..]; kv = new.
 *      Regenerate and edit need nothing more: the rendering without the
 *      old reply diverges from kv exactly at the turn boundary.
 *   5. Generate: sample, stream the piece, evaluate, append to kv and
 *      align, until end-of-generation (the eog id itself is not evaluated:
 *      the next rendering brings the template's own closing tokens), a
 *      stop string, the limit or an interrupt. When the cache fills in the
 *      middle of a reply, session_shift() drops the oldest turns, renders
 *      the prompt again, appends the reply's ids so far and shifts (step
 *      3) or evaluates what changed; the reply goes on (cut only when no
 *      turn is left to drop).
 *
 * Invariant 1 is asserted (debug builds: configure --enable-debug) after
 * every truncate and eval.
 *
 * Counting: every id passed to engine_eval is counted (n_evaluated and
 * the per-reply stats), which tests/t_session.c uses to prove that a
 * 10-turn conversation evaluates each token once.
 */
#include "session_int.h"

#include "engine.h"
#include "gguf.h"
#include "model.h"
#include "prompt.h"
#include "remote.h"
#include "stopstr.h"
#include "template.h"
#include "tok.h"
#include "trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Monotonic time in milliseconds. */
double session_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Whether the owner asked to stop the reply (the flag is only read). */
bool session_cancelled(const struct session *s)
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
int session_push_msg(struct session *s, enum store_role role, const char *text,
                     size_t len, int64_t store_id, enum store_finish finish)
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
	m->reasoning = NULL;
	m->reasoning_len = 0;
	m->n_reasoning = 0;
	m->reasoning_open = false;
	m->role = role;
	m->store_id = store_id;
	m->finish = finish;
	s->n_msgs++;
	return 0;
}

/* Give message M its reasoning (copied). 0 or -1 (no memory). */
int session_msg_set_reasoning(struct session_msg *m, const char *p, size_t len,
                              int32_t n_tok, bool open)
{
	char *r = NULL;

	if (len || open) {
		r = malloc(len + 1);
		if (r == NULL)
			return -1;
		if (len)
			memcpy(r, p, len);
		r[len] = '\0';
	}
	free(m->reasoning);
	m->reasoning = r;
	m->reasoning_len = len;
	m->n_reasoning = n_tok;
	m->reasoning_open = open;
	return 0;
}

/* Drop messages from index I on. */
void session_pop_to(struct session *s, size_t i)
{
	while (s->n_msgs > i) {
		s->n_msgs--;
		free(s->msgs[s->n_msgs].content);
		free(s->msgs[s->n_msgs].reasoning);
	}
	if (s->first > s->n_msgs)
		s->first = s->n_msgs;
}

/* Index of the first non-system message. */
size_t session_base(const struct session *s)
{
	return s->n_msgs > 0 && s->msgs[0].role == STORE_ROLE_SYSTEM;
}

/* ---------- open / close ---------- */

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
	s->model_name = session_dup(o->model_name);
	s->model_done = true; /* a new row, or the resumed one, as it is */
	s->n_predict = o->n_predict;
	s->n_threads = o->n_threads;
	s->st = o->store;
	s->use_kv_slot = o->use_kv_slot && o->store;
	s->context_shift = !o->no_context_shift;
	s->store_reports = o->store_reports && o->store;
	s->cancel = o->cancel;
	s->think = o->think;
	session_set_reasoning(s, o->reasoning);
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
	free(s->model_name);
	free(s);
}

/* ---------- settings and accessors ---------- */

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
	if (s->smp && sampler_config(s->smp)->seed != c->seed)
		s->seed_random = false; /* a seed asked for */
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

void session_set_think(struct session *s, int think)
{
	s->think = think > 0 ? 1 : think < 0 ? -1 : 0;
}

int session_think(const struct session *s)
{
	return s->think;
}

const char *session_think_cmd(struct session *s, const char *arg)
{
	if (!strcmp(arg, "on") || !strcmp(arg, "off"))
		session_set_think(s, arg[1] == 'n' ? 1 : -1);
	else if (*arg != '\0')
		return NULL;
	return s->think > 0 ? "on: enable_thinking true, from the next turn"
	       : s->think < 0
	           ? "off: enable_thinking false, from the next turn"
	           : "as the template decides (enable_thinking unset)";
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

const char *session_model_name(const struct session *s)
{
	if (s->rem)
		return remote_model(s->rem);
	return s->model_name ? s->model_name : s->model_path;
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

/*
 * session_model.c - switching the session's model in the middle of a
 * conversation (session_set_model).
 *
 * The new model is loaded into a scratch session first, by the same
 * session_load that session_open uses; only when everything opened are
 * the model's parts swapped into S, and the scratch session then closes
 * the old ones. So a failure leaves S as it was, and two models are in
 * memory for a moment (the price of never losing the working one).
 *
 * What belongs to the model moves (mapping, weights, tokenizer, engine,
 * template, special texts, sampler over the new vocabulary, KV format);
 * what belongs to the conversation stays (messages, sampling settings,
 * stop strings, limits, thinking switch). The cache holds the old model's
 * ids, which mean nothing to the new one: kv and align are emptied, so
 * the next turn renders every message with the new template and
 * evaluates the whole prompt (session.c, invariant 1 with kv empty).
 */
#include "session_int.h"

#include "engine.h"
#include "remote.h"
#include "stopstr.h"
#include "trace.h"
#include "verify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SESSION_SWAP(a, b)                                                     \
	do {                                                                   \
		__typeof__(a) tmp_ = (a);                                      \
		(a) = (b);                                                     \
		(b) = tmp_;                                                    \
	} while (0)

/* A scratch session with the new model loaded (configured as S), or
   NULL with a message. */
static struct session *session_model_load(struct session *s,
                                          const struct session_opts *o,
                                          char *err, size_t errlen)
{
	struct session_opts lo = *o;
	struct session *n = calloc(1, sizeof(*n));

	if (n == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	n->model_path = o->model_path ? strdup(o->model_path) : NULL;
	n->model_name = o->model_name ? strdup(o->model_name) : NULL;
	if (n->model_path == NULL || (o->model_name && !n->model_name)) {
		snprintf(err, errlen,
		         o->model_path ? "out of memory" : "no model given");
		session_close(n);
		return NULL;
	}
	n->n_threads = o->n_threads;
	n->st = s->st;
	n->store_reports = s->store_reports;
	n->cancel = s->cancel;
	/* the conversation's settings; a remote session's stop strings
	   become the engine's */
	lo.sampling = *sampler_config(s->smp);
	lo.seed_random = s->seed_random;
	lo.n_stops = 0;
	for (size_t i = 0; s->rem && i < s->n_rstops && i < SESSION_MAX_STOPS;
	     i++)
		lo.stops[lo.n_stops++] = s->rstops[i];
	if (session_load(n, &lo, err, errlen)) {
		session_close(n);
		return NULL;
	}
	return n;
}

/* Move the model's parts of N into S and S's old ones into N. */
static void session_model_swap(struct session *s, struct session *n)
{
	SESSION_SWAP(s->model_path, n->model_path);
	SESSION_SWAP(s->model_name, n->model_name);
	SESSION_SWAP(s->template_name, n->template_name);
	SESSION_SWAP(s->gf, n->gf);
	SESSION_SWAP(s->model, n->model);
	SESSION_SWAP(s->tok, n->tok);
	SESSION_SWAP(s->eng, n->eng);
	SESSION_SWAP(s->tmpl, n->tmpl);
	SESSION_SWAP(s->bos_text, n->bos_text);
	SESSION_SWAP(s->eos_text, n->eos_text);
	SESSION_SWAP(s->pv, n->pv);
	SESSION_SWAP(s->smp, n->smp);
	SESSION_SWAP(s->kv_format, n->kv_format);
	SESSION_SWAP(s->eval_ahead, n->eval_ahead);
	/* what the vocabulary and template imply for a reply's format */
	SESSION_SWAP(s->think_fmt, n->think_fmt);
	SESSION_SWAP(s->tmpl_effort, n->tmpl_effort);
	SESSION_SWAP(s->tmpl_thinking, n->tmpl_thinking);
	for (size_t i = 0; i < sizeof(s->model_fp); i++)
		SESSION_SWAP(s->model_fp[i], n->model_fp[i]);
	if (s->rem) { /* remote to local: the server goes, its stops too */
		SESSION_SWAP(s->stop, n->stop);
		SESSION_SWAP(s->rem, n->rem);
		SESSION_SWAP(s->rstops, n->rstops);
		SESSION_SWAP(s->n_rstops, n->n_rstops);
		s->origin_done = false; /* the next reply records "" */
	}
}

/* The cache belongs to the old model: empty, and everything derived
   from it forgotten. */
static void session_model_forget_cache(struct session *s)
{
	s->kv.n = 0;
	session_align_clear(s);
	s->lp.n = 0;
	s->lp_reused = 0;
	s->pick_valid = false;
	s->restored = false;
	s->restore_ms = 0;
	s->think_prompt = false;
	s->first = session_base(s); /* the new context decides the window */
}

int session_set_model(struct session *s, const struct session_opts *o,
                      char *err, size_t errlen)
{
	bool tr_on = s->tr != NULL, ver_on = s->ver != NULL;
	struct session *n = session_model_load(s, o, err, errlen);
	char e2[256], note[400];

	if (n == NULL)
		return -1;
	/* the old model's cache to the slot, as closing would save it */
	if (s->use_kv_slot && s->eng)
		session_save_kv(s, NULL, 0);
	/* trace and verifier hold the old engine and its layer count */
	session_set_verify(s, false, e2, sizeof(e2));
	session_set_trace(s, false, e2, sizeof(e2));
	session_model_swap(s, n);
	session_close(n); /* the old model's parts */
	session_model_forget_cache(s);
	s->model_done = false; /* the next reply names it in the row */
	if ((tr_on && session_set_trace(s, true, e2, sizeof(e2))) ||
	    (ver_on && session_set_verify(s, true, e2, sizeof(e2)))) {
		snprintf(note, sizeof(note), "the model is switched, but: %s",
		         e2);
		if (o->notice)
			o->notice(o->notice_ud, note);
	}
	return 0;
}

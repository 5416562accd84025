/*
 * tui_worker.c - the session's thread and its event queue (tui_worker.h).
 */
#include "tui_worker.h"

#include "cmd.h"
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void tui_tok_clear(struct tui_tok *t)
{
	free(t->text);
	free(t->layers);
	free(t->exp_n);
	free(t->exp_id);
	free(t->exp_w);
	memset(t, 0, sizeof(*t));
}

/* OUT's copy of the experts TR's layers chose (none for a dense model).
   0 or -1 (out of memory). */
static int tui_worker_tok_experts(const struct trace *tr, struct tui_tok *out)
{
	int mx = 0;

	for (int il = 0; il < tr->n_layer; il++)
		if (tr->n_experts[il] > mx)
			mx = tr->n_experts[il];
	if (mx == 0)
		return 0;
	out->exp_n = calloc((size_t)tr->n_layer, sizeof(*out->exp_n));
	out->exp_id = calloc((size_t)tr->n_layer * mx, sizeof(*out->exp_id));
	out->exp_w = calloc((size_t)tr->n_layer * mx, sizeof(*out->exp_w));
	if (!out->exp_n || !out->exp_id || !out->exp_w)
		return -1;
	out->exp_max = mx;
	for (int il = 0; il < tr->n_layer; il++) {
		const size_t o = (size_t)il * TRACE_MAX_EXPERTS;

		out->exp_n[il] = (uint8_t)tr->n_experts[il];
		memcpy(out->exp_id + (size_t)il * mx, tr->expert_id + o,
		       (size_t)tr->n_experts[il] * sizeof(*out->exp_id));
		memcpy(out->exp_w + (size_t)il * mx, tr->expert_w + o,
		       (size_t)tr->n_experts[il] * sizeof(*out->exp_w));
	}
	return 0;
}

int tui_worker_tok_fill(struct session *s, const struct sampler_report *rep,
                        const struct trace *tr, struct tui_tok *out)
{
	const char *piece[TUI_TOP + 1];
	size_t total = 0;

	memset(out, 0, sizeof(*out));
	out->id = rep->chosen;
	out->p = rep->chosen_prob;
	out->p_raw = rep->chosen_raw_prob;
	out->entropy = rep->entropy;
	out->raw_entropy = rep->raw_entropy;
	out->n_kept = rep->n_kept;
	out->rank = rep->chosen_rank;
	out->rank_raw = rep->chosen_raw_rank;
	out->n_top = rep->n_top < TUI_TOP ? rep->n_top : TUI_TOP;
	memcpy(out->top, rep->top, (size_t)out->n_top * sizeof(out->top[0]));
	out->samp = *session_sampling(s);
	out->seed_random = session_seed_random(s);
	out->samp_remote = session_server(s) != NULL;
	out->flag_layer = -1;
	out->pos = -1;
	for (int i = 0; i <= out->n_top; i++) {
		size_t n = 0;
		int32_t id = i ? out->top[i - 1].id : out->id;

		if (id < 0) { /* a remote model's token: its text */
			piece[i] = i ? rep->top_text[i - 1] : rep->chosen_text;
			n = strlen(piece[i]);
			out->remote = true;
		} else {
			piece[i] = session_token_text(s, id, &n, &out->ctl[i]);
		}
		out->len[i] = piece[i] ? (uint32_t)n : 0;
		total += out->len[i];
	}
	out->text = malloc(total + 1);
	if (out->text == NULL)
		goto nomem;
	total = 0;
	for (int i = 0; i <= out->n_top; i++) {
		out->off[i] = (uint32_t)total;
		memcpy(out->text + total, piece[i] ? piece[i] : "",
		       out->len[i]);
		total += out->len[i];
	}
	if (tr && tr->n_layer > 0) {
		/* the eval this token was sampled from (session_trace) */
		out->layers =
		    malloc((size_t)tr->n_layer * sizeof(*out->layers));
		if (out->layers == NULL)
			goto nomem;
		memcpy(out->layers, tr->layers,
		       (size_t)tr->n_layer * sizeof(*out->layers));
		out->n_layer = tr->n_layer;
		out->pos = tr->pos;
		if (tui_worker_tok_experts(tr, out))
			goto nomem;
	}
	return 0;
nomem:
	tui_tok_clear(out);
	return -1;
}

/* Free the stored reports V[0, n) and V. */
static void tui_worker_toks_free(struct tui_tok *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		tui_tok_clear(&v[i]);
	free(v);
}

/* REP's raw rank from its stored candidates (by raw logit, desc), 0 when
   the chosen id is not among them. */
static int32_t tui_worker_raw_rank(const struct sampler_report *rep)
{
	for (int32_t j = 0; j < rep->n_top; j++)
		if (rep->top[j].id == rep->chosen)
			return j + 1;
	return 0;
}

/* Fill OUT from the stored report REP (session_rep_to_sampler's: no
   ranks): no layers (the trace holds no step of it), the raw rank found
   among its candidates, the final rank 0 (not stored). 0 or -1. */
static int tui_worker_fill_stored(struct session *s,
                                  const struct sampler_report *rep,
                                  struct tui_tok *out)
{
	if (tui_worker_tok_fill(s, rep, NULL, out))
		return -1;
	out->rank_raw = tui_worker_raw_rank(rep);
	out->rank = 0;
	return 0;
}

/* Give the stored reports V[0, n) of message MSG_INDEX the settings its
   row recorded; none (an older reply) or unreadable: samp_none. */
static void tui_worker_stored_samp(struct session *s, size_t msg_index,
                                   struct tui_tok *v, size_t n)
{
	struct session_sampling sm;
	char err[256];
	int r = session_msg_sampling(s, msg_index, &sm, err, sizeof(err));

	for (size_t i = 0; i < n; i++) {
		v[i].samp_none = r != 1;
		if (r != 1)
			continue;
		v[i].samp = sm.c;
		v[i].seed_random = sm.seed_random;
		v[i].samp_remote = sm.remote;
	}
}

int tui_worker_stored_toks(struct session *s, size_t msg_index,
                           struct tui_tok **out, size_t *n, char *err,
                           size_t errlen)
{
	struct sampler_report *rep = NULL;
	size_t nr = 0, i;

	*out = NULL;
	*n = 0;
	if (session_msg_reports(s, msg_index, &rep, &nr, err, errlen))
		return -1;
	if (nr == 0) {
		snprintf(err, errlen,
		         "no token reports stored for this message");
		return -1;
	}
	*out = calloc(nr, sizeof(**out));
	if (*out == NULL) {
		free(rep);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (i = 0; i < nr; i++)
		if (tui_worker_fill_stored(s, &rep[i], &(*out)[i]))
			break;
	free(rep);
	if (i < nr) {
		tui_worker_toks_free(*out, i);
		*out = NULL;
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	*n = nr;
	tui_worker_stored_samp(s, msg_index, *out, nr);
	return 0;
}

void tui_ev_free(struct tui_ev *e)
{
	while (e) {
		struct tui_ev *next = e->next;

		if (e->tok) {
			tui_tok_clear(e->tok);
			free(e->tok);
		}
		for (size_t i = 0; i < e->n_msgs; i++) {
			free(e->msgs[i].text);
			free(e->msgs[i].reasoning);
			tui_worker_toks_free(e->msgs[i].toks,
			                     e->msgs[i].n_toks);
		}
		free(e->msgs);
		free(e->text);
		modelstore_free(&e->models);
		free(e);
		e = next;
	}
}

/* Queue E; wake the UI when the queue was empty. E is taken over. */
static void tui_worker_post(struct tui_worker *w, struct tui_ev *e)
{
	bool wake;

	pthread_mutex_lock(&w->mu);
	wake = w->head == NULL;
	if (w->tail)
		w->tail->next = e;
	else
		w->head = e;
	w->tail = e;
	if (e->kind == TUI_EV_END)
		w->busy = false; /* invariant 1: after the last session call */
	pthread_mutex_unlock(&w->mu);
	if (wake) {
		char b = 1;

		/* non-blocking: a full pipe already means "wake up" */
		while (write(w->pipe[1], &b, 1) < 0 && errno == EINTR)
			;
	}
}

/* A new event of KIND with a copy of TEXT[0, len) (TEXT may be NULL). */
static struct tui_ev *tui_ev_new(enum tui_ev_kind kind, const char *text,
                                 size_t len)
{
	struct tui_ev *e = calloc(1, sizeof(*e));

	if (e == NULL)
		return NULL;
	e->kind = kind;
	if (text) {
		e->text = malloc(len + 1);
		if (e->text == NULL) {
			free(e);
			return NULL;
		}
		memcpy(e->text, text, len);
		e->text[len] = '\0';
		e->len = len;
	}
	return e;
}

/* Session callbacks: each becomes an event. A lost event (no memory)
   loses text on the screen only; the store has the reply. */
static void tui_worker_piece(void *ud, const char *t, size_t n)
{
	struct tui_ev *e = tui_ev_new(TUI_EV_PIECE, t, n);

	if (e)
		tui_worker_post(ud, e);
}

static void tui_worker_reasoning(void *ud, const char *t, size_t n)
{
	struct tui_ev *e = tui_ev_new(TUI_EV_REASONING, t, n);

	if (e)
		tui_worker_post(ud, e);
}

static void tui_worker_token(void *ud, const struct sampler_report *rep)
{
	struct tui_worker *w = ud;
	struct tui_ev *e = tui_ev_new(TUI_EV_TOKEN, NULL, 0);

	w->n_gen++;
	if (e) {
		e->a = w->n_gen;
		/* a sampled token's final rank is >= 1; 0 marks a report a
		   branch replays from the store (session_branch_at: the kept
		   tokens and the forced one), whose step the trace does not
		   hold */
		bool stored = rep->chosen_rank == 0;

		e->tok = malloc(sizeof(*e->tok));
		if (e->tok &&
		    (stored ? tui_worker_fill_stored(w->s, rep, e->tok)
		            : tui_worker_tok_fill(
		                  w->s, rep, session_trace(w->s), e->tok))) {
			free(e->tok); /* the pane misses this token only */
			e->tok = NULL;
		}
		tui_worker_post(w, e);
	}
}

static void tui_worker_notice(void *ud, const char *msg)
{
	struct tui_ev *e = tui_ev_new(TUI_EV_NOTICE, msg, strlen(msg));

	if (e)
		tui_worker_post(ud, e);
}

static void tui_worker_phase(void *ud, const char *what)
{
	struct tui_ev *e = tui_ev_new(TUI_EV_PHASE, what, strlen(what));

	if (e)
		tui_worker_post(ud, e);
}

static void tui_worker_progress(void *ud, int32_t done, int32_t total)
{
	struct tui_ev *e = tui_ev_new(TUI_EV_PROGRESS, NULL, 0);

	if (e) {
		e->a = done;
		e->b = total;
		tui_worker_post(ud, e);
	}
}

/* Copy the session's messages into E (OPEN, CLEAR, SIBLING, a failed
   BRANCH). */
static void tui_worker_copy_msgs(struct tui_worker *w, struct tui_ev *e)
{
	size_t n = 0;
	const struct session_msg *m = session_messages(w->s, &n);

	e->msgs = calloc(n ? n : 1, sizeof(*e->msgs));
	if (e->msgs == NULL)
		return;
	for (size_t i = 0; i < n; i++) {
		struct tui_ev_msg *d = &e->msgs[e->n_msgs];

		d->text = malloc(m[i].len + 1);
		if (d->text == NULL)
			break;
		memcpy(d->text, m[i].content, m[i].len);
		d->text[m[i].len] = '\0';
		d->len = m[i].len;
		d->role = m[i].role;
		d->finish = m[i].finish;
		if (m[i].reasoning_len || m[i].reasoning_open) {
			d->reasoning = malloc(m[i].reasoning_len + 1);
			if (d->reasoning) { /* lost: shown without it */
				memcpy(d->reasoning, m[i].reasoning,
				       m[i].reasoning_len);
				d->reasoning[m[i].reasoning_len] = '\0';
				d->reasoning_len = m[i].reasoning_len;
			}
			d->n_reasoning = m[i].n_reasoning;
			d->reasoning_open = m[i].reasoning_open;
		}
		if (d->role == STORE_ROLE_ASSISTANT) {
			char err[256];

			tui_worker_stored_toks(w->s, i, &d->toks, &d->n_toks,
			                       err, sizeof(err));
		}
		e->n_msgs++;
	}
}

int tui_worker_observe(struct session *s, char *err, size_t errlen)
{
	struct sampler_config c = *session_sampling(s);

	if (c.n_probs < TUI_TOP) {
		c.n_probs = TUI_TOP;
		if (session_set_sampling(s, &c, err, errlen))
			return -1;
	}
	return session_set_trace(s, true, err, errlen);
}

/* Close the session and open it on conversation ID (0: a new one). On
   failure a new conversation is opened so that the UI keeps a session. */
static int tui_worker_reopen(struct tui_worker *w, int64_t id, char *err,
                             size_t errlen)
{
	struct session_opts o = w->so;
	char err2[256];

	session_close(w->s);
	w->s = NULL;
	o.conv_id = id;
	if (session_open(&o, &w->s, err, errlen) == 0)
		return tui_worker_observe(w->s, err, errlen);
	o.conv_id = 0;
	if (session_open(&o, &w->s, err2, sizeof(err2)))
		w->s = NULL;
	else
		tui_worker_observe(w->s, err2, sizeof(err2));
	return -1;
}

/* Keep the model's path and name for later reopenings (so's strings are
   borrowed: these copies are the worker's). */
static void tui_worker_keep_model(struct tui_worker *w, const char *path,
                                  const char *name)
{
	char *p = strdup(path), *n = name ? strdup(name) : NULL;

	if (p == NULL || (name && n == NULL)) {
		free(p); /* out of memory: a reopening uses the old model */
		free(n);
		return;
	}
	free(w->model_path);
	free(w->model_name);
	w->model_path = p;
	w->model_name = n;
	w->so.model_path = p;
	w->so.model_name = n;
	w->so.template_name = NULL; /* the model's own */
	w->so.server = NULL;        /* a local model now */
}

/* MODEL: TEXT is NAME, NUL, PATH (or ""): the conversation goes on on
   that model (session_set_model); without PATH, NAME is resolved as -m
   resolves it (its errors list the nearest names). */
static int tui_worker_model(struct tui_worker *w, const char *text, size_t len,
                            char *err, size_t errlen)
{
	const char *name = text, *given = text + strlen(text) + 1;
	char *path = NULL, *listed = NULL, e2[256];
	struct session_opts o = w->so;
	int rc;

	if (given > text + len || *given == '\0') {
		tui_worker_phase(w, "finding it");
		if (cmd_model_resolve_name(w->cfg, name, &path, &listed, err,
		                           errlen))
			return -1;
		given = path;
		if (listed)
			name = listed;
	}
	o.model_path = given;
	o.model_name = listed || path == NULL ? name : NULL; /* a path: none */
	o.template_name = NULL;
	o.server = NULL;
	o.conv_id = 0;
	o.notice = tui_worker_notice;
	o.notice_ud = w;
	o.phase = tui_worker_phase;
	if (w->s)
		rc = session_set_model(w->s, &o, err, errlen);
	else
		rc = session_open(&o, &w->s, err, errlen);
	/* the pane's trace, also for a session that was remote (none); the
	   model is switched even without it */
	if (rc == 0 && tui_worker_observe(w->s, e2, sizeof(e2)))
		tui_worker_notice(w, e2);
	if (rc == 0)
		tui_worker_keep_model(w, given, o.model_name);
	free(path);
	free(listed);
	return rc;
}

/* The index in S's messages of the reply with ordinal ORD among the
   user and assistant messages, or (size_t)-1 when it is no reply. */
static size_t tui_worker_reply_index(struct session *s, size_t ord)
{
	size_t n = 0;
	const struct session_msg *m = session_messages(s, &n);

	for (size_t i = 0, k = 0; i < n; i++) {
		if (m[i].role == STORE_ROLE_SYSTEM)
			continue;
		if (k++ == ord)
			return m[i].role == STORE_ROLE_ASSISTANT ? i
			                                         : (size_t)-1;
	}
	return (size_t)-1;
}

/* BRANCH: the reply A->reply cut before token A->pos, A->val forced. */
static int tui_worker_branch(struct tui_worker *w, const struct tui_job_arg *a,
                             const struct session_cb *cb,
                             struct session_stats *st, char *err, size_t errlen)
{
	size_t i = tui_worker_reply_index(w->s, a->reply);
	struct session_stats dummy;

	if (i == (size_t)-1) {
		snprintf(err, errlen, "that reply is not in the session");
		return -1;
	}
	return session_branch_at(w->s, i, a->pos, a->val, cb, st ? st : &dummy,
	                         err, errlen);
}

/* SIBLING: the reply A->reply's sibling A->val steps away becomes the
   active branch; *WHICH of *COUNT is it. */
static int tui_worker_sibling(struct tui_worker *w, const struct tui_job_arg *a,
                              int32_t *which, int32_t *count, char *err,
                              size_t errlen)
{
	size_t i = tui_worker_reply_index(w->s, a->reply);
	int64_t id = 0;

	if (i == (size_t)-1) {
		snprintf(err, errlen, "that reply is not in the session");
		return -1;
	}
	if (session_sibling(w->s, i, a->val, &id, which, count, err, errlen))
		return -1;
	if (*count < 2) {
		snprintf(err, errlen, "this reply has no other branch");
		return -1;
	}
	return session_switch_branch(w->s, id, err, errlen);
}

/* The last reply's reasoning figures into E (the exact count of its
   tokens, and whether the block stayed open), after a generation. */
static void tui_worker_end_reasoning(struct tui_worker *w, struct tui_ev *e)
{
	size_t n = 0;
	const struct session_msg *m = session_messages(w->s, &n);

	if (n == 0 || m[n - 1].role != STORE_ROLE_ASSISTANT)
		return;
	e->n_reasoning = m[n - 1].n_reasoning;
	e->reasoning_open = m[n - 1].reasoning_open;
}

/* Run one job; its END event goes to the UI. */
static void tui_worker_run(struct tui_worker *w, enum tui_job_kind job,
                           const char *text, size_t len,
                           const struct tui_job_arg *arg)
{
	struct session_cb cb = {tui_worker_piece,    tui_worker_token,
	                        tui_worker_notice,   w,
	                        tui_worker_progress, tui_worker_reasoning};
	struct tui_ev *e = tui_ev_new(TUI_EV_END, NULL, 0);
	char err[1024] = "";
	int rc = -1;
	int32_t which = 0, count = 0;
	bool msgs = job == TUI_JOB_OPEN || job == TUI_JOB_CLEAR;

	w->n_gen = 0;
	if (e == NULL)
		e = calloc(1, sizeof(*e)); /* last try; NULL handled below */
	if (w->s == NULL && job != TUI_JOB_OPEN && job != TUI_JOB_CLEAR &&
	    job != TUI_JOB_MODELS && job != TUI_JOB_MODEL) {
		snprintf(err, sizeof(err),
		         "no session (the model failed to "
		         "load)");
	} else if (job == TUI_JOB_SEND) {
		rc = session_send(w->s, text, len, &cb, e ? &e->st : NULL, err,
		                  sizeof(err));
	} else if (job == TUI_JOB_REGEN) {
		rc = session_regen(w->s, &cb, e ? &e->st : NULL, err,
		                   sizeof(err));
	} else if (job == TUI_JOB_EDIT) {
		rc = session_edit_last(w->s, text, len, &cb, e ? &e->st : NULL,
		                       err, sizeof(err));
	} else if (job == TUI_JOB_BRANCH) {
		rc = tui_worker_branch(w, arg, &cb, e ? &e->st : NULL, err,
		                       sizeof(err));
		/* a branch that failed may have left the old reply or not:
		   the UI shows what the session holds */
		msgs = rc != 0;
	} else if (job == TUI_JOB_SIBLING) {
		rc = tui_worker_sibling(w, arg, &which, &count, err,
		                        sizeof(err));
		msgs = rc == 0;
	} else if (job == TUI_JOB_OPEN) {
		rc = tui_worker_reopen(w, arg->conv_id, err, sizeof(err));
	} else if (job == TUI_JOB_MODELS) {
		/* no event to carry the list: nothing to scan for */
		rc = e ? modelstore_scan(w->cfg ? w->cfg->models_dir : NULL,
		                         &e->models, err, sizeof(err))
		       : -1;
	} else if (job == TUI_JOB_MODEL) {
		rc = tui_worker_model(w, text, len, err, sizeof(err));
	} else if (w->s) { /* CLEAR */
		rc = session_clear(w->s, err, sizeof(err));
	} else {
		rc = tui_worker_reopen(w, 0, err, sizeof(err));
	}
	if (e == NULL) { /* no memory for the event: still end the job */
		pthread_mutex_lock(&w->mu);
		w->busy = false;
		pthread_mutex_unlock(&w->mu);
		return;
	}
	e->job = job;
	e->rc = rc;
	e->a = which;
	e->b = count;
	if (rc) {
		e->text = strdup(err);
		e->len = e->text ? strlen(e->text) : 0;
	}
	if (w->s && msgs)
		tui_worker_copy_msgs(w, e);
	else if (w->s && rc == 0)
		tui_worker_end_reasoning(w, e);
	e->conv_id = w->s ? session_conv_id(w->s) : 0;
	if (w->s) {
		e->st.n_ctx = session_n_ctx(w->s);
		if (msgs) {
			size_t n = 0;

			session_kv_tokens(w->s, &n);
			e->st.n_ctx_used = (int32_t)n;
		}
	}
	tui_worker_post(w, e);
}

static void *tui_worker_main(void *arg)
{
	struct tui_worker *w = arg;

	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (!w->quit && (!w->busy || w->text == (char *)w))
			pthread_cond_wait(&w->cv, &w->mu);
		if (w->quit)
			break;
		enum tui_job_kind job = w->job;
		char *text = w->text;
		size_t len = w->len;
		struct tui_job_arg ja = w->arg;

		w->text = (char *)w; /* taken: wait for the next start */
		pthread_mutex_unlock(&w->mu);
		tui_worker_run(w, job, text, len, &ja);
		free(text);
		pthread_mutex_lock(&w->mu);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

int tui_worker_open(struct tui_worker *w, struct session *s,
                    const struct session_opts *opts, char *err, size_t errlen)
{
	memset(w, 0, sizeof(*w));
	if (tui_worker_observe(s, err, errlen))
		return -1;
	w->s = s;
	w->so = *opts;
	w->cancel = opts->cancel;
	w->text = (char *)w;
	if (w->cancel == NULL) {
		snprintf(err, errlen, "the session has no cancel flag");
		return -1;
	}
	if (pipe(w->pipe)) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		return -1;
	}
	for (int i = 0; i < 2; i++) {
		fcntl(w->pipe[i], F_SETFL, O_NONBLOCK);
		fcntl(w->pipe[i], F_SETFD, FD_CLOEXEC);
	}
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	if (pthread_create(&w->th, NULL, tui_worker_main, w)) {
		snprintf(err, errlen, "cannot start the worker thread");
		close(w->pipe[0]);
		close(w->pipe[1]);
		return -1;
	}
	return 0;
}

int tui_worker_start(struct tui_worker *w, enum tui_job_kind job,
                     const char *text, size_t len, int64_t conv_id)
{
	struct tui_job_arg a = {0};

	a.conv_id = conv_id;
	return tui_worker_start_arg(w, job, text, len, &a);
}

int tui_worker_start_arg(struct tui_worker *w, enum tui_job_kind job,
                         const char *text, size_t len,
                         const struct tui_job_arg *arg)
{
	char *copy = malloc(len + 1);

	if (copy == NULL)
		return -1;
	if (text)
		memcpy(copy, text, len);
	copy[len] = '\0';
	atomic_store(w->cancel, 0); /* invariant 3 */
	pthread_mutex_lock(&w->mu);
	w->job = job;
	w->text = copy;
	w->len = text ? len : 0;
	w->arg = *arg;
	w->busy = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	return 0;
}

void tui_worker_cancel(struct tui_worker *w)
{
	atomic_store(w->cancel, 1);
}

struct tui_ev *tui_worker_take(struct tui_worker *w)
{
	struct tui_ev *e;
	char buf[64];

	while (read(w->pipe[0], buf, sizeof(buf)) > 0)
		;
	pthread_mutex_lock(&w->mu);
	e = w->head;
	w->head = w->tail = NULL;
	pthread_mutex_unlock(&w->mu);
	return e;
}

struct session *tui_worker_session(struct tui_worker *w)
{
	struct session *s;

	pthread_mutex_lock(&w->mu);
	s = w->busy ? NULL : w->s;
	pthread_mutex_unlock(&w->mu);
	return s;
}

void tui_worker_close(struct tui_worker *w)
{
	tui_worker_cancel(w);
	pthread_mutex_lock(&w->mu);
	w->quit = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->th, NULL);
	tui_ev_free(w->head);
	w->head = w->tail = NULL;
	if (w->text != (char *)w)
		free(w->text);
	session_close(w->s);
	w->s = NULL;
	free(w->model_path);
	free(w->model_name);
	close(w->pipe[0]);
	close(w->pipe[1]);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
}

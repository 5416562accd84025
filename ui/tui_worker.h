/*
 * tui_worker.h - the thread that owns the chat session for the
 * full-screen UI, and the events it sends back.
 *
 * NOTES ON THE DESIGN
 *
 * The worker runs one job at a time (send, regenerate, edit, open a
 * stored conversation, new conversation, find the local models, switch
 * to another model) on the session it owns, with
 * the session's store connection. The session's callbacks become events
 * in a queue guarded by a mutex; the first event put in an empty queue
 * writes one byte to a pipe, whose read end the UI's poll() loop watches
 * beside the keyboard. Events carry copies (text, figures), never
 * pointers into the session.
 *
 * States:  IDLE --tui_worker_start--> BUSY --(job done: TUI_EV_END)--> IDLE
 *
 * Invariants:
 *   1. The worker touches the session only while BUSY. It queues
 *      TUI_EV_END after its last call on the session, under the mutex;
 *      so once the UI has taken that event, and until it starts the next
 *      job, the UI thread may call the session itself (settings,
 *      messages): the mutex orders the two threads' accesses.
 *   2. tui_worker_start is called only when IDLE (one job at a time).
 *   3. The cancel flag is cleared by tui_worker_start before the job is
 *      handed over; a cancel raised after that (Ctrl-C right after
 *      Enter) stops that job, at its first check.
 */
#ifndef PARLEY_TUI_WORKER_H
#define PARLEY_TUI_WORKER_H

#include "modelstore.h"
#include "session.h"
#include "trace.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct config;

#define TUI_TOP 10 /* alternatives the debug pane lists per token */

/*
 * One generated token as the debug pane shows it: a compact copy of the
 * sampler's report (its top TUI_TOP), the texts, the step's layers. Made
 * from a live report by tui_worker_tok_fill, or from a stored one the
 * same way (tui_worker_stored_toks).
 */
struct tui_tok {
	int32_t id;             /* the chosen id */
	float p, p_raw;         /* its probability: sampled, raw */
	float entropy;          /* nats, sampled distribution */
	float raw_entropy;      /* nats, raw distribution */
	int32_t n_kept;         /* candidates left after truncation */
	int32_t rank, rank_raw; /* 1-based; rank_raw 0: beyond the top */
	int n_top;              /* entries of top */
	struct sampler_cand top[TUI_TOP]; /* by raw logit, desc */
	struct sampler_config samp;       /* the settings that applied:
	                                     the session's (live), the
	                                     reply's stored ones */
	bool samp_none;   /* a stored reply's settings were not recorded */
	bool seed_random; /* samp.seed was picked at random */
	bool samp_remote; /* sent to a server: top-k, min-p and the repeat
	                     penalty did not apply */
	char *text;       /* the pieces below (owned) */
	uint32_t off[TUI_TOP + 1];  /* [0] chosen, [1 + i] top[i] */
	uint32_t len[TUI_TOP + 1];  /* bytes of each piece */
	bool ctl[TUI_TOP + 1];      /* a control token */
	struct trace_stats *layers; /* [n_layer] (owned) or NULL */
	int n_layer;                /* 0: no trace on this step */
	/* a mixture: the experts each layer chose for this token (the
	   trace's), or exp_n NULL */
	int exp_max;     /* slots a layer has in exp_id, exp_w */
	uint8_t *exp_n;  /* [n_layer] experts chosen (0: a dense layer) */
	int32_t *exp_id; /* [n_layer][exp_max] best first (owned) */
	float *exp_w;    /* [n_layer][exp_max] their weights (owned) */
	int32_t pos;     /* context position sampled at */
	bool remote;     /* from a server's logprobs: ids -1, texts given */
	/* set by the UI on arrival (tui_health.h) */
	unsigned flags; /* TUI_FLAG_* */
	int flag_layer; /* the layer flagged, or -1 */
};

/* Free what T owns (T itself is not freed). */
void tui_tok_clear(struct tui_tok *t);

/*
 * Fill OUT from the sampler's report REP, the texts from S and, when TR is
 * not NULL, its layer statistics (copied). Returns 0, or -1 when out of
 * memory (OUT is then empty but valid).
 */
int tui_worker_tok_fill(struct session *s, const struct sampler_report *rep,
                        const struct trace *tr, struct tui_tok *out);

/*
 * The stored token reports of message MSG_INDEX of S's conversation
 * (session_msg_reports), as tui_toks in *OUT (malloc'd; *N of them):
 * each stored report through tui_worker_tok_fill without layers (the
 * store keeps none), its raw rank found among the stored candidates and
 * its final rank 0 (not stored), the sampling settings the reply's row
 * recorded (samp_none when it has none: the session's are not the
 * reply's). Called by whichever thread owns S (the
 * UI before the worker starts, the worker after). Returns 0, or -1 with a
 * message when there are none (*OUT NULL) or on an error.
 */
int tui_worker_stored_toks(struct session *s, size_t msg_index,
                           struct tui_tok **out, size_t *n, char *err,
                           size_t errlen);

enum tui_job_kind {
	TUI_JOB_SEND,    /* text: the user's message */
	TUI_JOB_REGEN,   /* the last reply again */
	TUI_JOB_EDIT,    /* text replaces the last user message */
	TUI_JOB_OPEN,    /* reopen the session on conversation conv_id */
	TUI_JOB_CLEAR,   /* a new, empty conversation */
	TUI_JOB_BRANCH,  /* arg: branch the reply at a token (generates) */
	TUI_JOB_SIBLING, /* arg: show another sibling of the reply */
	TUI_JOB_MODELS,  /* find the local models (modelstore_scan of
	                    models_dir; no session call): END's models */
	TUI_JOB_MODEL,   /* text: NAME, then after its NUL a PATH or "":
	                    run the conversation on that model (PATH, else
	                    NAME resolved as -m resolves it) */
};

/*
 * What a job works on besides its text. A reply is named by its ordinal
 * among the conversation's user and assistant messages (system prompts
 * and the UI's notices not counted): the UI and the session agree on
 * that, not on indexes.
 */
struct tui_job_arg {
	int64_t conv_id; /* OPEN: the conversation (0: a new one) */
	size_t reply;    /* BRANCH, SIBLING: the reply's ordinal */
	int32_t pos;     /* BRANCH: the token to replace (0-based) */
	int32_t val;     /* BRANCH: the forced id; SIBLING: 1 next, -1
	                    previous */
};

enum tui_ev_kind {
	TUI_EV_PIECE,     /* text: reply text (whole UTF-8 characters) */
	TUI_EV_REASONING, /* text: reply reasoning (a thinking model's text
	                     between <think> and </think>), before the
	                     answer's pieces */
	TUI_EV_TOKEN,     /* a: tokens sampled so far in this reply;
	                     tok: its report (owned, may be NULL) */
	TUI_EV_PROGRESS,  /* a of b prompt ids evaluated */
	TUI_EV_NOTICE,    /* text: a message for the user */
	TUI_EV_PHASE,     /* text: the step of a model load beginning */
	TUI_EV_END,       /* rc, stats, text: the error when rc != 0;
	                     msgs: the conversation (OPEN, CLEAR, SIBLING,
	                     a BRANCH that failed);
	                     SIBLING: a of b, the sibling now shown;
	                     a generation that ended well: n_reasoning and
	                     reasoning_open of the reply */
};

/* A message as copied for the UI. */
struct tui_ev_msg {
	enum store_role role;
	char *text; /* owned */
	size_t len;
	enum store_finish finish;
	struct tui_tok *toks; /* stored token reports (owned) or NULL */
	size_t n_toks;
	char *reasoning; /* the reply's reasoning (owned) or NULL */
	size_t reasoning_len;
	int32_t n_reasoning; /* its tokens (0: not known) */
	bool reasoning_open; /* unfinished: the block was never closed */
};

/* One event; the UI frees it with tui_ev_free. */
struct tui_ev {
	struct tui_ev *next;
	enum tui_ev_kind kind;
	enum tui_job_kind job; /* END: the job that ended */
	char *text;            /* owned, NUL-terminated, or NULL */
	size_t len;
	int32_t a, b;
	int rc;                  /* END: 0 or -1 */
	struct session_stats st; /* END of a generation */
	struct tui_ev_msg *msgs; /* END of OPEN / CLEAR / SIBLING: owned */
	size_t n_msgs;
	int64_t conv_id;               /* END: the session's conversation */
	struct tui_tok *tok;           /* TOKEN: the token's report (owned) */
	int32_t n_reasoning;           /* END: the reply's reasoning tokens */
	bool reasoning_open;           /* END: its reasoning is unfinished */
	struct modelstore_list models; /* END of MODELS (owned) */
};

struct tui_worker {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int pipe[2]; /* [0] the UI polls, [1] written on the first event */
	atomic_int *cancel; /* the session's cancel flag (invariant 3):
	                       opts->cancel of tui_worker_open (borrowed) */

	/* guarded by mu */
	bool busy;             /* a job is handed over or running */
	bool quit;             /* the thread should end */
	enum tui_job_kind job; /* the job to run */
	char *text;            /* its text (owned) */
	size_t len;
	struct tui_job_arg arg;     /* the job's other arguments */
	struct tui_ev *head, *tail; /* events not yet taken */

	/* owned by the worker while busy (invariant 1) */
	struct session *s;        /* the session (owned) */
	struct session_opts so;   /* how to reopen it (strings borrowed,
	                             but the model's after a MODEL job) */
	int32_t n_gen;            /* tokens of the reply so far */
	char *model_path;         /* so.model_path after a switch (owned) */
	char *model_name;         /* so.model_name after a switch (owned) */
	const struct config *cfg; /* its models-dir for MODELS and MODEL,
	                             or NULL: the config file's (borrowed;
	                             set before the first job) */
};

/*
 * Start the thread on session S (ownership passes to W), opened with
 * OPTS, which is kept to reopen it on another conversation (its strings
 * borrowed); opts->cancel must be set: it is the flag the worker raises.
 * 0, or -1 with a message.
 */
int tui_worker_open(struct tui_worker *w, struct session *s,
                    const struct session_opts *opts, char *err, size_t errlen);

/*
 * What the debug pane needs of session S: reports of TUI_TOP alternatives
 * per token (n_probs raised to it; nothing else of the sampling changes)
 * and a trace attached (per-layer statistics of each step). Done by
 * tui_worker_open and for every session the worker reopens. 0, or -1 with
 * a message.
 */
int tui_worker_observe(struct session *s, char *err, size_t errlen);

/* Hand a job over (invariant 2). TEXT is copied. 0 or -1 (no memory). */
int tui_worker_start(struct tui_worker *w, enum tui_job_kind job,
                     const char *text, size_t len, int64_t conv_id);

/* The same with the job's arguments ARG (copied; BRANCH, SIBLING). */
int tui_worker_start_arg(struct tui_worker *w, enum tui_job_kind job,
                         const char *text, size_t len,
                         const struct tui_job_arg *arg);

/* Ask the running job to stop (thread- and signal-safe). */
void tui_worker_cancel(struct tui_worker *w);

/* Take all queued events (oldest first; NULL if none) and drain the pipe. */
struct tui_ev *tui_worker_take(struct tui_worker *w);
void tui_ev_free(struct tui_ev *e);

/* The session, for the UI thread while idle (invariant 1), or NULL. */
struct session *tui_worker_session(struct tui_worker *w);

/* Stop the running job, end the thread, close the session. */
void tui_worker_close(struct tui_worker *w);

#endif /* PARLEY_TUI_WORKER_H */

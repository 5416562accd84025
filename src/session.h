/*
 * session.h - the chat session: messages -> chat template -> tokens -> the
 * engine -> sampled reply, with the KV cache kept across turns and every
 * message in the store.
 *
 * NOTES ON THE DESIGN
 *
 * The session owns the model (GGUF mapping, weights, tokenizer, engine),
 * the compiled chat template, the sampler and the messages of one
 * conversation. It knows nothing of terminals: front ends (ui/repl.c,
 * the one-shot mode of ui/cmd_chat.c, later the ncurses screen) call
 * session_send() and receive the reply through callbacks.
 *
 * Invariants (session.c states how they are kept):
 *   1. kv_tokens holds exactly the ids whose K/V are in the engine's cache
 *      (engine_n_past(e) == kv.n); they are evaluated in order, once.
 *   2. A new turn evaluates only the ids after the longest common prefix
 *      of the new prompt's ids and kv_tokens; the previous reply stays in
 *      the cache as the ids that were sampled.
 *   3. The system prompt (if any) is always the first message and is never
 *      dropped when the context is full; the oldest other turns are.
 *   4. With a store: every user message is committed before the model
 *      runs; the reply is a message in progress updated every
 *      SESSION_STORE_MS and finished with its finish reason. With
 *      opts.store_reports each update also stores the token reports
 *      since the previous one, in the same transaction as the text.
 *
 * Degraded, not failed (the user gets a notice, the work goes on): a
 * saved KV state that does not load (the first turn evaluates the whole
 * conversation instead: the same reply, slower; notice through
 * opts.notice), and a store write of a reply that fails (the reply is
 * still generated and shown; notice through session_cb.notice, once per
 * reply and kind of write).
 *
 * Remote models (opts.server): the session sends the messages to an
 * OpenAI-compatible server (remote.h) instead of running the engine; no
 * model, tokenizer, template or engine is loaded, there is no KV cache
 * (the accessors of those answer 0 / NULL / empty), and the server's
 * logprobs reach session_cb.token as reports with id -1 and the token's
 * text (sampler.h). The store records which server and model answered
 * each reply and the conversation (store_conv_set_origin).
 *
 * Cancelling: *opts.cancel (an atomic int, lock-free, so a signal
 * handler or another thread may set it) stops a reply when nonzero; the
 * generation loop checks it before each token and each prefill chunk and
 * keeps the partial reply (finish "interrupted"). The session only reads
 * the flag: its owner clears it before a request, so that a cancel set
 * just after the request was made (Ctrl-C right after Enter) is never
 * lost.
 */
#ifndef PARLEY_SESSION_H
#define PARLEY_SESSION_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sampler.h"
#include "store.h"
#include "verify.h"

struct session;
struct gguf_file;

#define SESSION_STORE_MS  250 /* store a reply in progress this often */
#define SESSION_MAX_STOPS 16  /* stop strings */
#define SESSION_MIN_REPLY 64  /* tokens kept free for a reply */

/* How the session is opened. Zero / NULL fields take defaults. */
struct session_opts {
	const char *model_path;         /* GGUF file (required) */
	const char *template_name;      /* NULL: the model's own template, else
	                                   chatml; a name of prompts/templates
	                                   or a path to a .jinja file */
	const char *system_prompt;      /* NULL: none */
	struct sampler_config sampling; /* sampler_config_default() first */
	int32_t n_ctx;                  /* 0: min(model's, 4096) */
	int32_t n_threads;              /* 0: online CPUs */
	const char *backend; /* engine backend (engine_params); NULL: cpu */
	int kv_type;         /* enum engine_kv_type (--kv-type); 0: the
	                        backend's */
	int32_t n_predict;   /* max reply tokens; <= 0: until full */
	const char *stops[SESSION_MAX_STOPS]; /* stop strings (borrowed) */
	size_t n_stops;                       /* entries used in stops */
	struct store *store; /* NULL: nothing stored (borrowed) */
	bool store_reports;  /* store each reply token's sampler report
	                        (store.h, token reports; needs store); the
	                        sampler then reports >= STORE_REPORT_TOP
	                        candidates, which changes no token */
	int64_t conv_id;     /* resume this conversation (store) */
	bool use_kv_slot;    /* resume from / save the KV state */
	bool verify; /* check every eval against the CPU reference (verify.h;
	                session_set_verify) */
	bool full_window_cache; /* sliding-window layers keep every
	                           position (engine_params.window_full) */
	int32_t window_slack;   /* else the positions they keep beyond
	                           their window; 0: ENGINE_WINDOW_SLACK */
	int32_t n_batch;        /* tokens a chunk of the prompt at most
	                           (engine_params.n_batch; 0: the backend's) */
	bool no_context_shift;  /* when turns leave a full context, evaluate
	                           the kept ones again instead of shifting
	                           their cache (where the model allows a
	                           shift: engine_can_shift) */
	atomic_int *cancel;     /* nonzero stops a reply, or NULL (borrowed) */
	/* notices while opening (a saved KV state that does not load), in
	   the style of session_cb.notice; NULL: none */
	void (*notice)(void *ud, const char *msg);
	void *notice_ud; /* passed back to notice */
	/* A remote model (remote.h) instead of the local engine: the
	   conversation's messages go to SERVER, which applies its own chat
	   template; model_path, template_name, n_ctx, n_threads, backend,
	   use_kv_slot and verify are then unused, and sampling must pass
	   remote_check_sampling. NULL: the local engine. */
	const char *server;       /* base URL */
	const char *server_model; /* NULL: the server's first model */
	const char *api_key;      /* NULL: none (borrowed; never stored) */
	bool insecure;            /* plain http to a non-loopback host */
	int server_timeout;       /* seconds; 0: REMOTE_DEFAULT_TIMEOUT */
	int think;        /* the template's enable_thinking: 0 unset (the
	                     template's default), 1 on, -1 off (session_set_think) */
	int reasoning;    /* the template's reasoning_effort: 0 unset, 1 low,
	                     2 medium, 3 high (session_set_reasoning) */
	bool seed_random; /* sampling.seed was picked at random (the front
	                     end's clock seed), not asked for: each reply
	                     records it as such (session_sampling.c) */
	const char *model_name; /* the model as the user named it (a listed
	                           name such as "qwen3:8b", modelname.h);
	                           NULL: model_path (session_model_name) */
	/* loading: each step as it begins ("the weights", ...), in the
	   style of notice; with it, a raised *cancel stops the load
	   between steps ("cancelled"). NULL: none */
	void (*phase)(void *ud, const char *what);
};

/* One message of the conversation (the active branch). */
struct session_msg {
	enum store_role role;     /* system / user / assistant */
	char *content;            /* text, NUL-terminated (owned) */
	size_t len;               /* bytes of content */
	int64_t store_id;         /* message id in the store, 0 if none */
	enum store_finish finish; /* assistant: how the reply ended */
	char *reasoning;          /* assistant: what a thinking model wrote
	                             between <think> and </think>, apart
	                             from the answer (content); NULL: none
	                             (owned, NUL-terminated) */
	size_t reasoning_len;     /* bytes of reasoning */
	int32_t n_reasoning;      /* tokens of reasoning (0: not known) */
	bool reasoning_open;      /* the reply ended inside the block (its
	                             limit, Ctrl-C): unfinished reasoning */
};

/* What one reply cost; filled by session_send and friends. */
struct session_stats {
	int32_t n_prompt;        /* tokens of the whole prompt */
	int32_t n_reused;        /* of those, already in the cache */
	int32_t n_prompt_eval;   /* of those, evaluated now */
	int32_t n_reeval;        /* of those, ids the cache held but evaluated
	                            again: a recurrent state goes back only to a
	                            snapshot (engine.h), 0 for other models */
	int32_t n_gen;           /* tokens sampled for the reply */
	int32_t n_gen_eval;      /* of those, evaluated (kept in the cache) */
	int32_t n_dropped_turns; /* turns dropped to fit the context */
	int32_t n_shifted;       /* of n_reused, ids kept by shifting the
	                            cache when turns were dropped (a context
	                            shift, engine_kv_shift) instead of being
	                            evaluated again; also counted mid-reply */
	double prefill_ms;       /* time evaluating the prompt */
	double decode_ms;        /* time generating */
	/* from the turn's start (the prompt's rendering) to its first
	   sampled token, 0 if none: the wait before the reply starts (a
	   remote reply's: to its first text) */
	double first_ms;
	int32_t n_ctx_used;           /* kv tokens after the reply */
	int32_t n_ctx;                /* capacity */
	enum store_finish finish;     /* STOP, LENGTH, INTERRUPTED or ERROR */
	struct verify_summary verify; /* the reply's evals against the CPU
	                                 reference (n_checked 0: not on) */
	/* a remote reply (n_ctx 0): prefill_ms is the time to its first
	   text; the server's own prompt figures when it sent them (0: it
	   did not, as most do not) */
	int32_t server_prompt_n; /* prompt tokens it evaluated */
	double server_prompt_ms; /* its time on them */
};

/* Callbacks of one reply; any may be NULL. */
struct session_cb {
	/* LEN bytes of reply text, whole UTF-8 characters only */
	void (*piece)(void *ud, const char *text, size_t len);
	/* the sampler's report of each sampled token (debug pane) */
	void (*token)(void *ud, const struct sampler_report *rep);
	/* a message for the user ("context full: dropped 2 turns", "could
	   not save the reply in progress: ..."); the reply goes on */
	void (*notice)(void *ud, const char *msg);
	void *ud; /* passed back */
	/* prefill: DONE of TOTAL prompt ids evaluated (after each chunk);
	   last, so that initialisers written before it still fit */
	void (*progress)(void *ud, int32_t done, int32_t total);
	/* LEN bytes of the reply's reasoning (a thinking model's text
	   between <think> and </think>, the tags and the blanks around it
	   left out), whole UTF-8 characters; piece then gets only the
	   answer. NULL: the reasoning is not shown (it is still kept) */
	void (*reasoning)(void *ud, const char *text, size_t len);
};

/*
 * Open a session. Loads the model (borrowed strings of OPTS are copied
 * where kept), and with opts->conv_id != 0 the conversation's messages
 * (and its KV state when use_kv_slot; one that does not load is a notice,
 * not an error). Stores the session in *OUT (session_close) and returns
 * 0, or -1 with a message.
 */
int session_open(const struct session_opts *opts, struct session **out,
                 char *err, size_t errlen);

/* Save the KV slot if asked, free everything. NULL allowed. */
void session_close(struct session *s);

/*
 * Run the conversation on another local model (session_model.c): the
 * GGUF file opts->model_path (named opts->model_name) with the template
 * opts->template_name (NULL: its own), opts->n_ctx, n_threads and backend;
 * phase, notice and cancel as for session_open, the other fields unused.
 * The messages are the source of truth: the new model's cache starts
 * empty, so the next turn renders them all with its template and
 * tokenizer and evaluates them (no cache is shared between models). The
 * sampling settings, stop strings, reply limit, system prompt, thinking
 * switch, trace and verification carry over; a remote session becomes a
 * local one. The old model's KV state goes to the store's slot first
 * (with use_kv_slot), and the next reply records the new model as the
 * conversation's (store_conv_set_model). The old model is closed only
 * after the new one opened: on failure (-1 with a message, "cancelled"
 * when *cancel was raised) nothing changed.
 */
int session_set_model(struct session *s, const struct session_opts *opts,
                      char *err, size_t errlen);

/* The model as the user named it: opts.model_name, else the path given
   (remote: the server's model name). What each local reply records. */
const char *session_model_name(const struct session *s);

/*
 * Add the user message TEXT[0, len) and generate the reply, streamed
 * through CB. Returns 0 (the reply's finish reason in st->finish, also
 * "interrupted"), or -1 with a message when nothing could be generated
 * (the user message then stays in the conversation).
 */
int session_send(struct session *s, const char *text, size_t len,
                 const struct session_cb *cb, struct session_stats *st,
                 char *err, size_t errlen);

/* Replace the last reply by a new one (the cache is cut at the turn). */
int session_regen(struct session *s, const struct session_cb *cb,
                  struct session_stats *st, char *err, size_t errlen);

/* Replace the last user message (and its reply) and generate anew. */
int session_edit_last(struct session *s, const char *text, size_t len,
                      const struct session_cb *cb, struct session_stats *st,
                      char *err, size_t errlen);

/* Start a new, empty conversation (same model, same system prompt). */
int session_clear(struct session *s, char *err, size_t errlen);

/* Replace the system prompt (NULL: none); applies from the next turn. */
int session_set_system(struct session *s, const char *text, char *err,
                       size_t errlen);

/* Change the sampling options (checked); applies from the next reply.
   A seed other than the one in use is one asked for (no longer random). */
int session_set_sampling(struct session *s, const struct sampler_config *c,
                         char *err, size_t errlen);
const struct sampler_config *session_sampling(const struct session *s);
/* Whether the seed in use was picked at random (opts.seed_random). */
bool session_seed_random(const struct session *s);

/*
 * The sampling settings that produced a reply (session_sampling.c), as
 * each reply records them in the store (messages.sampling, a JSON
 * object): for a remote reply only what the API was sent.
 */
struct session_sampling {
	struct sampler_config c; /* the settings (n_probs: 0, not kept) */
	bool seed_random; /* c.seed was picked at random: the effective seed */
	bool remote;      /* sent to a server: only temperature, top_p, the
	                     frequency and presence penalties and the seed
	                     (modulo 2^31) applied; the rest are defaults */
};

/* The JSON of settings SM (malloc'd), or NULL out of memory. */
char *session_sampling_json(const struct session_sampling *sm);

/* Parse JSON of LEN bytes (hostile: a store's row, an import) into *SM;
   missing keys keep sampler_config_default's values. 0, or -1 with a
   message when it is not an object of finite numbers in range. */
int session_sampling_parse(const char *json, size_t len,
                           struct session_sampling *sm, char *err,
                           size_t errlen);

/* The settings stored with message MSG_INDEX (of session_messages):
   1 with *SM, 0 when none were recorded (a reply of an older parley, a
   user message, no store), -1 with a message. */
int session_msg_sampling(struct session *s, size_t msg_index,
                         struct session_sampling *sm, char *err, size_t errlen);

/* The template's enable_thinking from the next turn: 1 on, -1 off, 0
   unset (the variable is not defined: the template's default). Only
   templates that read the variable (Qwen3's, Gemma 4's) change. */
void session_set_think(struct session *s, int think);
int session_think(const struct session *s);

/* The /think command of both UIs: ARG "on" or "off" sets enable_thinking
   from the next turn, "" only asks; the state as the words after
   "thinking " ("on: enable_thinking true, from the next turn"), or NULL
   when ARG is anything else (nothing changed). */
const char *session_think_cmd(struct session *s, const char *arg);

/* The template's reasoning_effort from the next turn (gpt-oss writes it
   as "Reasoning: low|medium|high" where its template puts it): 1 low,
   2 medium, 3 high, 0 unset (the template's default). */
void session_set_reasoning(struct session *s, int level);
int session_reasoning(const struct session *s);
/* "low", "medium", "high" for LEVEL 1..3, else "unset". */
const char *session_reasoning_name(int level);
/* LEVEL's number for NAME ("low", "medium", "high"), or -1. */
int session_reasoning_parse(const char *name);
/* The /reasoning command of both UIs: ARG "low", "medium" or "high" sets
   reasoning_effort, "" only asks. Returns the state as a line for
   "reasoning " (saying when the template does not read it), or NULL when
   ARG is not a level. */
const char *session_reasoning_cmd(struct session *s, const char *arg);

/* Change the reply limit (<= 0: until the context is full). */
void session_set_n_predict(struct session *s, int32_t n);

/* Whether a sampled token's step is queued before the token is reported
   (so that the reports run beside the step); on by default where the
   engine only queues its work (engine_eval_queues: the GPU), off on the
   CPU, where it would only delay each token's text by one step. The
   replies are the same either way. For tests and measurements. */
void session_set_eval_ahead(struct session *s, bool on);

/* Set the conversation's title in the store. */
int session_set_title(struct session *s, const char *title, char *err,
                      size_t errlen);

/* The messages of the active branch (borrowed, valid until the next call). */
const struct session_msg *session_messages(const struct session *s, size_t *n);

/* The conversation id in the store (0 before the first message). */
int64_t session_conv_id(const struct session *s);

/* The ids in the KV cache (borrowed) and their number. */
const int32_t *session_kv_tokens(const struct session *s, size_t *n);

/* Total ids evaluated by the engine since the session opened. */
int64_t session_n_evaluated(const struct session *s);

/* The model's GGUF file, open for the session's life (borrowed): its
   metadata, such as the sampling defaults config_apply_model reads. */
const struct gguf_file *session_gguf(const struct session *s);

/* Context capacity in tokens (remote: 0, the server's business); the
   model file's path (remote: the server's model name); the template's
   name (remote: NULL, the server's); the engine's backend ("cpu", ...;
   remote: "remote"). */
int32_t session_n_ctx(const struct session *s);
const char *session_backend_name(const struct session *s);
const char *session_model_path(const struct session *s);
const char *session_template_name(const struct session *s);

/* The device the engine runs on ("NVIDIA H100 80GB HBM3"), NULL: the
   host CPU; remote: the server's base URL (so a status bar that shows
   "backend device" shows "remote http://host:8000/v1"). */
const char *session_device_name(const struct session *s);

/* The time in milliseconds session_open spent restoring the cache (KV
 * slot) or 0, and whether a KV state was loaded. */
double session_restore_ms(const struct session *s, bool *loaded);

/*
 * Live verification on (ON) or off: a CPU exact-dot reference engine
 * beside the session's engine checks every eval (verify.h). Each reply's
 * summary is in session_stats.verify; the first step of a reply over
 * tolerance is also a notice (session_cb.notice), and a reference that
 * fails turns verification off with a notice, the reply going on. The
 * reference catches up with the cache by itself (on the next eval).
 * Returns 0, or -1 with a message (out of memory).
 */
int session_set_verify(struct session *s, bool on, char *err, size_t errlen);
bool session_verifying(const struct session *s);

/* The trace of the session's engine: the pane's (session_set_trace) or,
   without one, the verifier's; each eval's layer statistics, top-k and,
   while verifying, comparison. NULL when neither is on. Borrowed; it
   changes with every eval: read it between evals (in session_cb.token,
   it holds the eval whose logits that token was sampled from). */
const struct trace *session_trace(const struct session *s);

/*
 * Attach a trace to the engine (ON) without verifying, or remove it: each
 * eval then fills per-layer statistics of the residual (trace.h) for the
 * last token, at the cost of one pass over each layer's output (on the
 * CUDA backend computed on the device, copied back once per step); the
 * trace's
 * top-k stays empty (skip_logits: the sampler's report has it). Works
 * beside verification (the verifier then fills the same trace). Returns
 * 0, or -1 with a message (out of memory; nothing changed).
 */
int session_set_trace(struct session *s, bool on, char *err, size_t errlen);

/* The vocabulary's size (ids are 0 .. n - 1). */
int32_t session_n_vocab(const struct session *s);

/*
 * The bytes token ID decodes to, control tokens included ("<|im_end|>"):
 * *LEN bytes, not NUL-terminated, possibly partial UTF-8, owned by the
 * session. *CONTROL (may be NULL) tells whether it is a control token.
 * NULL when ID is out of range.
 */
const char *session_token_text(const struct session *s, int32_t id, size_t *len,
                               bool *control);

/*
 * The ids of the last prompt the session evaluated (the chat template's
 * rendering of the last turn, tokenized), borrowed until the next reply;
 * *N of them, the first *REUSED of which were already in the KV cache
 * (the others were evaluated anew). NULL with *N = 0 before the first
 * reply.
 */
const int32_t *session_last_prompt(const struct session *s, size_t *n,
                                   size_t *reused);

/*
 * The token reports of message MSG_INDEX of session_messages(), read from
 * the store: *OUT a malloc'd array of *N (the caller frees it), one per
 * token of the reply in order, the end-of-generation token included
 * (last); *N = 0 and *OUT NULL when none are stored (a user message, no
 * store, a reply made without store_reports). Every field of struct
 * sampler_report is filled from what is stored (top: at most
 * STORE_REPORT_TOP entries; prob = exp(logprob)); NaN marks what was not
 * known: the chosen_prob of a token forced by session_branch_at, and its
 * raw probability when it is not among the stored candidates. Returns 0,
 * or -1 with a message (a damaged report names the message).
 */
int session_msg_reports(struct session *s, size_t msg_index,
                        struct sampler_report **out, size_t *n, char *err,
                        size_t errlen);

/*
 * Branch at a token: message MSG_INDEX (a stored reply with token
 * reports, answering the user message before it) is cut before position
 * TOKEN_POS (0-based, an index of session_msg_reports), FORCED_ID is
 * emitted at that position, and generation goes on from there. The
 * messages after the user message leave the active branch; the old reply
 * stays in the store as a sibling and the new one becomes the leaf.
 * The cache keeps the prompt and the reply's first TOKEN_POS ids where
 * it holds them (truncated there, nothing before re-evaluated), so
 * FORCED_ID is the only id evaluated before sampling resumes
 * (st->n_prompt_eval counts it, st->n_reused what was kept). The reply's
 * text streams through CB from its start (the kept tokens' text and
 * reports first); st->n_gen counts only the tokens sampled after the
 * forced one, while the reply limit (n_predict) counts the whole reply.
 * A forced end-of-generation id ends the reply there.
 * Returns 0 or -1 with a message, as session_send.
 */
int session_branch_at(struct session *s, size_t msg_index, int32_t token_pos,
                      int32_t forced_id, const struct session_cb *cb,
                      struct session_stats *st, char *err, size_t errlen);

/* Remote mode: the server's base URL and model name, else NULL. */
const char *session_server(const struct session *s);
const char *session_server_model(const struct session *s);

/*
 * The sibling DIR steps away (1 the next, -1 the previous, cyclic; 0
 * itself) of message MSG_INDEX of session_messages(): the stored messages
 * that share its parent, ordered by id (the order of `parley show
 * --branches`). *MSG_ID receives its store id, *WHICH its 1-based place
 * among them and *COUNT their number (1: no other branch). Nothing
 * changes. Returns 0, or -1 with a message (no store, a message not
 * stored).
 */
int session_sibling(struct session *s, size_t msg_index, int dir,
                    int64_t *msg_id, int32_t *which, int32_t *count, char *err,
                    size_t errlen);

/*
 * Make the branch through stored message MSG_ID active, as `parley
 * branch` does (the leaf becomes its newest descendant), and reload the
 * messages from the store: session_messages() then lists that branch (the
 * system prompt is kept). The KV cache is not touched: the next turn
 * reuses what it shares with the new branch and evaluates the rest.
 * Returns 0, or -1 with a message (nothing changed when the store refused
 * the message).
 */
int session_switch_branch(struct session *s, int64_t msg_id, char *err,
                          size_t errlen);

/* Save the KV state (tokens and cache bytes) to the store's slot now. */
int session_save_kv(struct session *s, char *err, size_t errlen);

#endif /* PARLEY_SESSION_H */

/*
 * session_int.h - what the session's source files share (session.c lists
 * them); not for other modules.
 */
#ifndef PARLEY_SESSION_INT_H
#define PARLEY_SESSION_INT_H

#include "harmony.h"
#include "prompt.h"
#include "session.h"
#include "tok.h"
#include "trace.h"

/* How a model writes its reasoning (session_think.c). */
enum session_think_fmt {
	SESSION_THINK_TAGS,    /* <think>...</think> (Qwen3, DeepSeek-R1) */
	SESSION_THINK_CHANNEL, /* <|channel>thought...<channel|> (Gemma 4) */
	SESSION_THINK_HARMONY, /* harmony's channels (gpt-oss) */
};

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
	bool seed_random;            /* its seed was picked at random */
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
	char *model_name;            /* opts.model_name or NULL (owned) */
	bool model_done; /* the conversation's row names this model (a
	                    switch clears it: session_record_origin) */

	/* conversation */
	struct session_msg *msgs; /* n_msgs messages, system first (owned) */
	size_t n_msgs, cap_msgs;
	size_t first;    /* first non-system message in the window */
	int64_t conv_id; /* store id, 0 until the first message */

	/* cache and alignment (see the notes in session.c) */
	struct tok_ids kv;            /* ids in the cache (invariant 1) */
	struct tok_ids al_tok;        /* aligned ids */
	struct tok_buf al_text;       /* the text they stand for */
	struct prompt_marks al_marks; /* aligned points */
	int64_t n_evaluated;          /* ids evaluated since open */
	bool context_shift;           /* shift the cache when turns leave the
	                                 window (opts.no_context_shift off) */
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

	/* thinking models (session_think.c) */
	int think;         /* enable_thinking for the template: 1 on, -1
	                      off, 0 unset (the template's default) */
	bool think_prompt; /* the last prompt ended inside the reasoning
	                      block (the generation prompt opened it) */
	enum session_think_fmt think_fmt; /* how replies write reasoning
	                                     (session_think_fmt_of the
	                                     vocabulary) */
	int reasoning;      /* reasoning_effort for the template: 0 unset,
	                       1 low, 2 medium, 3 high */
	bool tmpl_effort;   /* the template reads reasoning_effort */
	bool tmpl_thinking; /* it reads a message's thinking field, not
	                       reasoning_content (gpt-oss's) */
};

/* Where a reply's text is in the reasoning block (session_think.c). */
enum session_think_state {
	SESSION_THINK_START,  /* nothing but blanks yet */
	SESSION_THINK_IN,     /* inside the block: reasoning */
	SESSION_THINK_ANSWER, /* after it, or no block: the answer */
};

/* The splitter of one reply's text into reasoning and answer: tags around
   a block (<think>, Gemma 4's thought channel), or gpt-oss's harmony
   channels (harmony.h). */
struct session_think {
	enum session_think_fmt fmt; /* the format (HARMONY: hm splits, the
	                               rest is unused; zeroed: TAGS) */
	struct harmony hm;          /* harmony's splitter (owned) */
	enum session_think_state state;
	bool seen;                /* a block was opened */
	bool block_begun;         /* IN: bytes of this block released */
	bool after_block;         /* ANSWER: only blanks since a block */
	bool answer_begun;        /* answer bytes released */
	size_t n_reasoning_bytes; /* reasoning bytes released */
	struct tok_buf pend;      /* bytes held back (owned) */
	struct tok_buf gap;       /* CHANNEL: the answer's trailing blanks,
	                             held until text follows them (owned) */
};

/* Receives split text: REASONING or answer, LEN bytes. 0 or -1. */
typedef int (*session_think_fn)(void *ud, bool reasoning, const char *p,
                                size_t len);

/* The format of vocabulary T's replies: HARMONY with harmony's control
   tokens, CHANNEL with <|channel> and <channel|>, else TAGS. */
enum session_think_fmt session_think_fmt_of(const struct tok *t);
/* Start a reply in format FMT; OPEN: the prompt already opened the block
   (not for HARMONY, whose prompt always ends in "<|start|>assistant"). */
void session_think_init(struct session_think *t, enum session_think_fmt fmt,
                        bool open);
/* The model ended the reply with an end-of-turn id: harmony's reply is
   then finished (a block left open stays unfinished). */
void session_think_eog(struct session_think *t);
/* Whether the text now arriving is reasoning (tags: inside the block). */
bool session_think_inside(const struct session_think *t);
/* Free what is held (the struct may be initialised again). */
void session_think_free(struct session_think *t);
/* Split LEN bytes of reply text, released through OUT (maybe later:
   a tag's possible beginning and blanks that may end the reasoning wait
   for the next bytes). 0, or -1 when OUT failed or out of memory. */
int session_think_feed(struct session_think *t, const char *text, size_t len,
                       session_think_fn out, void *ud);
/* The reply ended: release what is held (inside the block: reasoning,
   left unfinished: state stays IN). 0 or -1. */
int session_think_flush(struct session_think *t, session_think_fn out,
                        void *ud);
/* Whether rendered prompt T[0, n) ends inside a block of format FMT. */
bool session_think_opened(enum session_think_fmt fmt, const char *t, size_t n);

/* The reply being generated. */
struct session_reply {
	struct tok_buf text;      /* what was shown (owned) */
	int64_t store_id;         /* its message in the store, or 0 */
	double last_store;        /* session_ms() of the last update */
	double t_start;           /* session_ms() at the turn's start */
	bool update_failed;       /* the user was told an update failed */
	bool recording;           /* token reports are kept and stored */
	bool rep_full;            /* STORE_REPORTS_MAX reached: no more kept */
	struct store_reports rep; /* the reply's token reports (owned) */
	size_t rep_saved;         /* of those, in the store */
	const int32_t *replay;    /* ids already in the cache to show first
	                             (a branch: the kept ones, the forced) */
	size_t n_replay;          /* entries in replay */
	bool end_after_replay;    /* the forced id ends the reply (eog) */
	struct tok_buf reasoning; /* its reasoning, shown apart (owned) */
	struct session_think think; /* splits text into the two (owned) */
	int32_t n_reasoning;        /* tokens of the reasoning */
	size_t reasoning_saved;     /* bytes of reasoning in the store */
};

/* session.c: helpers and the messages */

/* Monotonic time in milliseconds. */
double session_ms(void);
/* Whether the owner asked to stop the reply (the flag is only read). */
bool session_cancelled(const struct session *s);
/* Append a message (content copied). 0 or -1 (no memory). */
int session_push_msg(struct session *s, enum store_role role, const char *text,
                     size_t len, int64_t store_id, enum store_finish finish);
/* Give message M its reasoning: LEN bytes of P (copied), N_TOK tokens,
   OPEN when the reply ended inside the block. 0 or -1 (no memory). */
int session_msg_set_reasoning(struct session_msg *m, const char *p, size_t len,
                              int32_t n_tok, bool open);
/* Drop messages from index I on. */
void session_pop_to(struct session *s, size_t i);
/* Index of the first non-system message. */
size_t session_base(const struct session *s);

/* session_load.c */

/* Open the model, tokenizer, engine, template, sampler and stop strings. */
int session_load(struct session *s, const struct session_opts *o, char *err,
                 size_t errlen);
/* Remote mode: the server instead of the model. */
int session_load_remote(struct session *s, const struct session_opts *o,
                        char *err, size_t errlen);
/* Append the stored messages M[0, n) (an active branch, root first).
   0 or -1 (no memory). */
int session_push_stored(struct session *s, struct store_msg *m, size_t n);
/* Load conversation CONV_ID's messages (and KV slot) from the store. */
int session_resume(struct session *s, int64_t conv_id,
                   const struct session_opts *o, char *err, size_t errlen);

/* session_prompt.c */

/* Reset align to empty. */
void session_align_clear(struct session *s);
/* Align to the saved ids TOKS[0, n): their decoded text, a mark at each. */
int session_align_ids(struct session *s, const int32_t *toks, size_t n);
/* Evaluate IDS[0, n) at the end of the cache (chunks, interrupt checks).
   Returns 0, 1 when interrupted, -1 on error. */
int session_eval(struct session *s, const int32_t *ids, size_t n, char *err,
                 size_t errlen);
/* Steps 1-4: render, fit, bring the cache to the prompt and EXTRA.
   Returns 0, 1 when interrupted during the prefill, -1 on error. */
int session_prepare(struct session *s, const struct session_cb *cb,
                    struct session_stats *st, const int32_t *extra,
                    size_t n_extra, char *err, size_t errlen);
/* The context filled up in the middle of a reply: drop the oldest turns.
   Returns 0, 1 when no turn can be dropped (nothing changed), -1 on
   error. */
int session_shift(struct session *s, size_t *reply_at,
                  const struct session_cb *cb, struct session_stats *st,
                  char *err, size_t errlen);

/* session_report.c */

/* The sampler report of stored report T of SET (NaN where unknown). */
void session_rep_to_sampler(const struct store_reports *set,
                            const struct store_tok_report *t,
                            struct sampler_report *rep);
/* Keep the report of the reply's next token (when recording). */
void session_record(struct session *s, struct session_reply *r,
                    const struct sampler_report *rep, unsigned flags,
                    const struct session_cb *cb);
/* The forced token's report appended to DST. 0 or -1 (memory). */
int session_rep_forced(struct session *s, struct store_reports *dst,
                       const struct store_reports *src, size_t pos,
                       int32_t forced);
/* Copy report I of SRC (with its texts) to DST. */
int session_rep_copy(struct store_reports *dst, const struct store_reports *src,
                     size_t i);

/* session_turn.c */

/* A store write of the reply failed: tell the user (a notice). */
void session_store_notice(const struct session_cb *cb, const char *what,
                          const char *msg, const char *then);
/* Store the reply in progress (every SESSION_STORE_MS). */
void session_store_update(struct session *s, struct session_reply *r,
                          const struct session_cb *cb);
/* The store id of the message before index I (0: a root). */
int64_t session_parent(const struct session *s, size_t i);
/* Tell the store who answers the conversation (and wrote reply MSG_ID). */
void session_record_origin(struct session *s, int64_t msg_id,
                           const struct session_cb *cb);
/* session_sampling.c: record the settings in use with reply MSG_ID (a
   failure is a notice). */
void session_record_sampling(struct session *s, int64_t msg_id,
                             const struct session_cb *cb);
/* Whether reply R is (so far) unfinished reasoning. */
bool session_reply_open(const struct session_reply *r);
/* Store R's reasoning when it grew (FINAL: also its open state). 0, or
   -1 with a message. */
int session_store_reasoning(struct session *s, struct session_reply *r,
                            bool final, char *msg, size_t msglen);
/* Split, show and keep LEN bytes of reply text (END: release what is
   held back). 0 or -1 (no memory). */
int session_reply_text(struct session_reply *r, const char *p, size_t len,
                       bool end, const struct session_cb *cb);
/* Append reply R as the assistant message and free its buffers. */
int session_push_reply(struct session *s, struct session_reply *r,
                       enum store_finish fin);
/* Generate the reply to the messages as they are (last one: user); BR
   (may be NULL) makes it a branch. */
int session_reply(struct session *s, const struct session_cb *cb,
                  struct session_stats *st, struct session_reply *br, char *err,
                  size_t errlen);

/* session_remote.c */

/* The reply from the server (remote mode's session_reply). */
int session_reply_remote(struct session *s, const struct session_cb *cb,
                         struct session_stats *st, char *err, size_t errlen);

/* Message MSG_INDEX of S as a stored reply: -1 with a message in ERR when
 * S has no such message, 0 when it is not an assistant reply in the store
 * (no store, not yet stored, another role), 1 with *M set. */
int session_stored_reply(const struct session *s, size_t msg_index,
                         const struct session_msg **m, char *err,
                         size_t errlen);

#endif /* PARLEY_SESSION_INT_H */

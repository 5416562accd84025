/*
 * store.h - conversations and messages in a SQLite database.
 *
 * NOTES ON THE DESIGN
 *
 * One file, $XDG_DATA_HOME/parley/parley.db by default (store_path_resolve
 * gives the precedence), in WAL mode with synchronous=FULL, foreign keys
 * on and a busy timeout, so two parley processes can share it: readers
 * never block, a second writer waits (5 s by default) instead of failing.
 *
 * Schema (store_schema.c has the SQL; PRAGMA user_version is the version,
 * PRAGMA application_id marks the file as parley's):
 *   conversations(id, title, model_path, model_size, model_fingerprint,
 *                 template, system_prompt, sampling JSON, created, updated,
 *                 archived, leaf_id)
 *   messages(id, conversation_id, parent_id, role, content, n_tokens,
 *            n_prompt_tokens, prefill_ms, decode_ms, finish, created,
 *            updated)                       + messages_fts (FTS5, triggers)
 *   kv_states(conversation_id, format, n_tokens, tokens, state, created)
 *   token_reports(message_id, first_pos, n_tokens, data)   (version 3)
 *   messages also keep who answered (server, server_model: version 4),
 *   a thinking model's reasoning (version 5) and the sampling settings
 *   that produced a reply (sampling JSON: version 6)
 * Times are Unix milliseconds (UTC). Messages form a tree through
 * parent_id (parent_id < id always): regenerating a reply or editing a
 * message adds a sibling. The active branch is the path from the root to
 * the conversation's leaf_id, or to its newest message when leaf_id is
 * unset; appending a message makes it the leaf.
 *
 * Transactions and the crash guarantee:
 *   1. Every call that writes is one transaction (BEGIN IMMEDIATE ...
 *      COMMIT, or a single autocommit statement) and is durable when it
 *      returns: a finished message is never lost by a crash or kill -9.
 *   2. A reply in progress is a message with finish = NONE. The session
 *      calls store_msg_update() with the whole text so far (each call a
 *      small transaction, meant for every ~0.25-1 s) and store_msg_finish()
 *      at the end; a crash loses only the text since the last update, and
 *      the row stays with finish = NONE (readers show it as interrupted;
 *      the session that resumes the conversation may close it with
 *      store_msg_finish(..., STORE_FINISH_INTERRUPTED) - the store never
 *      does so itself, since another process may still be writing it).
 *      Checked by tests/t_store_kill.sh (kill -9 at points of a writer's
 *      progress): every update that returned is there after the kill.
 *   3. A file that is not a SQLite database, is corrupt, belongs to another
 *      program (application_id, or tables without a version) or has a
 *      newer schema than this program knows is reported and never written:
 *      the checks happen before the first write on open, and a corruption
 *      found later marks the handle read-only for the rest of its life.
 *   4. Migrations run forward only, each step and the version bump in one
 *      transaction, so an interrupted migration leaves the old version.
 *   5. Token reports (what the sampler saw at each token of a reply) are
 *      written in the same transaction as the text they belong to: each
 *      store_msg_update_rep() adds the reports since the previous update
 *      as one chunk row, store_msg_finish_rep() replaces the chunks by one
 *      row; text and reports are therefore never out of step by more
 *      than one update interval after a kill -9. store_report.c documents
 *      the BLOB layout; a chunk that does not decode is an error naming
 *      the message, never a crash.
 *
 * All text from the caller is bound as a parameter; no SQL is built from
 * user text. Strings returned in structs are malloc'd and owned by the
 * struct (free with the matching *_free / *_clear function). No function
 * prints, exits or aborts. Every function returns STORE_OK or a negative
 * STORE_E* code and writes a message into err (which may be NULL).
 */
#ifndef PARLEY_STORE_H
#define PARLEY_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STORE_OK        0
#define STORE_ERR       (-1) /* I/O, SQL or memory error */
#define STORE_ENOTFOUND (-2) /* no such conversation / message / kv state */
#define STORE_EBUSY     (-3) /* the database stayed locked past the timeout */
#define STORE_ECORRUPT  (-4) /* not a (parley) database, or corrupt */
#define STORE_ENEWER    (-5) /* schema newer than this program */
#define STORE_EINVAL    (-6) /* bad argument or malformed import */

#define STORE_SCHEMA_VERSION  6           /* what this program writes */
#define STORE_APPLICATION_ID  0x50726c79  /* "Prly" in the file header */
#define STORE_BUSY_TIMEOUT_MS 5000        /* default busy timeout */
#define STORE_IMPORT_MAX      (64u << 20) /* bytes of JSON accepted */

/* store_open flags */
#define STORE_OPEN_NOCREATE 0x1 /* fail if the file does not exist */

/* store_conv_list flags */
#define STORE_LIST_ARCHIVED 0x1 /* include archived conversations */

/* store_search flags */
#define STORE_SEARCH_RAW      0x1 /* TEXT is an FTS5 query, not plain words */
#define STORE_SEARCH_ARCHIVED 0x2 /* include archived conversations */

/* store_msg_append / store_msg_begin parent_id values */
#define STORE_PARENT_LEAF (-1) /* the conversation's active leaf */
#define STORE_PARENT_NONE 0    /* a root message */

enum store_role {
	STORE_ROLE_SYSTEM,
	STORE_ROLE_USER,
	STORE_ROLE_ASSISTANT,
};

enum store_finish {
	STORE_FINISH_NONE,        /* in progress (or its writer died) */
	STORE_FINISH_STOP,        /* end-of-turn / stop string; complete */
	STORE_FINISH_LENGTH,      /* hit the token limit */
	STORE_FINISH_INTERRUPTED, /* the user stopped it */
	STORE_FINISH_ERROR,       /* generation failed */
};

struct store;

/* Fields of a new conversation. NULL strings are stored as empty. */
struct store_conv_new {
	const char *title;             /* shown by list; "" until named */
	const char *model_path;        /* GGUF file the chat used */
	int64_t model_size;            /* its size in bytes */
	const char *model_fingerprint; /* cheap hash (size + header bytes) */
	const char *template_name;     /* chat template used */
	const char *system_prompt;     /* NULL: none (distinct from "") */
	const char *sampling_json;     /* NULL or a JSON object */
};

/* A conversation as read back. Strings owned (store_conv_clear). */
struct store_conv {
	int64_t id;              /* conversation id */
	char *title;             /* never NULL */
	char *model_path;        /* never NULL */
	int64_t model_size;      /* bytes, 0 if unknown */
	char *model_fingerprint; /* never NULL */
	char *template_name;     /* never NULL */
	char *system_prompt;     /* NULL when none */
	char *sampling_json;     /* NULL when none */
	int64_t created_ms;      /* creation time */
	int64_t updated_ms;      /* last message or change */
	bool archived;           /* hidden from list by default */
	int64_t leaf_id;         /* active leaf message, 0 if no messages */
	int64_t n_messages;      /* messages in all branches */
};

/* Generation statistics of a message (zero for user messages). */
struct store_msg_stats {
	int64_t n_tokens;        /* tokens of this message */
	int64_t n_prompt_tokens; /* tokens prefilled before it was generated */
	double prefill_ms;       /* time spent on the prompt */
	double decode_ms;        /* time spent generating */
};

/* A complete message to append. */
struct store_msg_new {
	int64_t conv_id;              /* conversation */
	int64_t parent_id;            /* STORE_PARENT_LEAF, _NONE or an id */
	enum store_role role;         /* who wrote it */
	const char *content;          /* text (not necessarily NUL-ended) */
	size_t len;                   /* bytes of content */
	enum store_finish finish;     /* not NONE; STOP for user messages */
	struct store_msg_stats stats; /* generation statistics */
};

/* A message as read back. content owned (store_msg_free). */
struct store_msg {
	int64_t id;                   /* message id */
	int64_t conv_id;              /* conversation */
	int64_t parent_id;            /* 0 for a root */
	enum store_role role;         /* who wrote it */
	char *content;                /* NUL-terminated; may hold NULs */
	size_t len;                   /* bytes of content */
	enum store_finish finish;     /* NONE: in progress or cut by a crash */
	struct store_msg_stats stats; /* generation statistics */
	int64_t created_ms;           /* creation time */
	int64_t updated_ms;           /* last update */
	int32_t n_siblings;           /* messages sharing its parent (>= 1) */
	int32_t sibling_index;        /* 0-based rank among them by id */
	char *reasoning;      /* a thinking model's reasoning, apart from
	                         content; "" when none (owned, NUL-ended) */
	size_t reasoning_len; /* bytes of reasoning */
	int64_t n_reasoning;  /* its tokens (0: none or not known) */
	bool reasoning_open;  /* the reply ended inside the block */
	char *server;         /* a remote reply: the server's base URL that
	                         answered; "" for the local engine (owned) */
	char *server_model;   /* and its model; "" when local (owned) */
	char *sampling_json;  /* replies: the sampling settings that produced
	                         it (a JSON object, store_msg_set_sampling),
	                         or NULL when not recorded (owned) */
};

/* One search result. Strings owned (store_hits_free). */
struct store_hit {
	int64_t conv_id;      /* conversation */
	int64_t msg_id;       /* message */
	char *title;          /* conversation title */
	enum store_role role; /* message role */
	char *snippet;        /* excerpt with the matches between marks */
	int64_t created_ms;   /* message time */
};

/* The KV-cache slot of a conversation. Buffers owned (store_kv_free). */
struct store_kv {
	char *format;     /* producer tag: backend, model fingerprint, layout */
	int32_t *tokens;  /* n_tokens ids whose K/V the state holds */
	size_t n_tokens;  /* entries in tokens */
	void *state;      /* opaque engine bytes */
	size_t state_len; /* bytes in state */
	int64_t created_ms; /* when it was saved */
};

/* Names used in the database and exports ("user", "length", ...). */
const char *store_role_name(enum store_role r);
const char *store_finish_name(enum store_finish f); /* NONE -> NULL */

/*
 * The database path: OPT if non-empty, else $PARLEY_DB, else
 * $XDG_DATA_HOME/parley/parley.db (only if absolute, as the XDG spec
 * says), else $HOME/.local/share/parley/parley.db. *OUT is malloc'd (caller
 * frees). Fails (STORE_EINVAL) when none applies (no HOME).
 */
int store_path_resolve(const char *opt, char **out, char *err, size_t errlen);

/* The same with the environment given explicitly (NULL = unset). */
int store_path_resolve_env(const char *opt, const char *parley_db,
                           const char *xdg_data_home, const char *home,
                           char **out, char *err, size_t errlen);

/*
 * Open or create the database at PATH (missing parent directories are
 * created with mode 0700), check it, migrate it to STORE_SCHEMA_VERSION.
 * On success *OUT is a handle the caller closes with store_close(). On
 * failure *OUT is NULL, the file is left as it was, and err names it.
 */
int store_open(const char *path, unsigned flags, struct store **out, char *err,
               size_t errlen);

/* Close ST (NULL allowed). */
void store_close(struct store *st);

/* The path ST was opened with (owned by ST). */
const char *store_path(const struct store *st);

/* Change the busy timeout (milliseconds, >= 0). */
void store_set_busy_timeout(struct store *st, int ms);

/* PRAGMA integrity_check: STORE_OK, or STORE_ECORRUPT with its report. */
int store_check(struct store *st, char *err, size_t errlen);

/* Conversations ---------------------------------------------------------- */

/* Create a conversation; *ID receives its id. */
int store_conv_create(struct store *st, const struct store_conv_new *c,
                      int64_t *id, char *err, size_t errlen);

/*
 * Conversations, most recently updated first, at most LIMIT (0 = all).
 * *V is a malloc'd array of *N entries (store_conv_list_free).
 */
int store_conv_list(struct store *st, unsigned flags, size_t limit,
                    struct store_conv **v, size_t *n, char *err, size_t errlen);
void store_conv_list_free(struct store_conv *v, size_t n);

/*
 * Conversation ID into *C (store_conv_clear) and, if MSGS is not NULL, its
 * active branch root first into a malloc'd *MSGS of *N entries
 * (store_msg_free). STORE_ENOTFOUND if there is no such conversation.
 */
int store_conv_get(struct store *st, int64_t id, struct store_conv *c,
                   struct store_msg **msgs, size_t *n, char *err,
                   size_t errlen);
void store_conv_clear(struct store_conv *c);

int store_conv_rename(struct store *st, int64_t id, const char *title,
                      char *err, size_t errlen);
int store_conv_archive(struct store *st, int64_t id, bool archived, char *err,
                       size_t errlen);
/* Replace the system prompt (NULL = none) or the sampling JSON (NULL). */
int store_conv_set_system(struct store *st, int64_t id, const char *text,
                          char *err, size_t errlen);
int store_conv_set_sampling(struct store *st, int64_t id, const char *json,
                            char *err, size_t errlen);
/* Make MSG_ID (a message of conversation ID) the active leaf. */
int store_conv_set_leaf(struct store *st, int64_t id, int64_t msg_id, char *err,
                        size_t errlen);
/* Delete the conversation, its messages and its KV state. */
int store_conv_delete(struct store *st, int64_t id, char *err, size_t errlen);

/* Which server (base URL; "" = the local engine) and server model answered
 * (store_origin.c): of conversation ID (its latest reply's, what resume
 * talks to) and of assistant message MSG_ID. NULL is stored as "". */
int store_conv_set_origin(struct store *st, int64_t id, const char *server,
                          const char *server_model, char *err, size_t errlen);
/* *SERVER and *SERVER_MODEL malloc'd (never NULL on success). */
int store_conv_origin(struct store *st, int64_t id, char **server,
                      char **server_model, char *err, size_t errlen);
int store_msg_set_origin(struct store *st, int64_t msg_id, const char *server,
                         const char *server_model, char *err, size_t errlen);
/* A local reply records its model in server_model (server ""): the name
 * the user chose it by (session_model_name). The conversation's local
 * model (model_path, model_size, model_fingerprint, template: what a
 * resume opens) becomes the one of C, after a switch of models; C's
 * other fields are unused. */
int store_conv_set_model(struct store *st, int64_t id,
                         const struct store_conv_new *c, char *err,
                         size_t errlen);
/* The sampling settings that produced assistant message MSG_ID: JSON, a
 * JSON object (its keys are the session's business: session.h) or NULL
 * (not recorded). STORE_EINVAL when JSON is not an object, ENOTFOUND when
 * there is no such assistant message. */
int store_msg_set_sampling(struct store *st, int64_t msg_id, const char *json,
                           char *err, size_t errlen);

/* Messages -------------------------------------------------------------- */

/* Append a complete message (committed before returning); *ID its id. */
int store_msg_append(struct store *st, const struct store_msg_new *m,
                     int64_t *id, char *err, size_t errlen);

/* Start a message in progress (empty, finish NONE) under PARENT_ID. */
int store_msg_begin(struct store *st, int64_t conv_id, int64_t parent_id,
                    enum store_role role, int64_t *id, char *err,
                    size_t errlen);

/* Replace the text of in-progress message ID (one small transaction). */
int store_msg_update(struct store *st, int64_t id, const char *content,
                     size_t len, char *err, size_t errlen);

/* Final text, finish reason (not NONE) and statistics of message ID. */
int store_msg_finish(struct store *st, int64_t id, const char *content,
                     size_t len, enum store_finish finish,
                     const struct store_msg_stats *stats, char *err,
                     size_t errlen);

/* Message ID into the caller's *M (free its content: store_msg_clear). */
int store_msg_get(struct store *st, int64_t id, struct store_msg *m, char *err,
                  size_t errlen);

/* Free the contents of the N messages of V and the array V itself. */
void store_msg_free(struct store_msg *v, size_t n);
/* Free the content of one caller-owned message and zero it. */
void store_msg_clear(struct store_msg *m);

/* Token reports (store_report.c) ----------------------------------------- */

#define STORE_REPORT_TOP    10    /* candidates stored per token, at most */
#define STORE_REPORTS_MAX   32768 /* tokens per message, at most */
#define STORE_REPORT_EOG    0x1   /* flag: end of generation (not text) */
#define STORE_REPORT_FORCED 0x2   /* flag: forced (a branch), not sampled */

/* One candidate of a token's raw distribution. TEXT_OFF/TEXT_LEN locate
   its bytes in the owning set's text buffer. */
struct store_tok_cand {
	int32_t id;        /* token id, or -1 (remote: see chosen) */
	float logit;       /* raw logit */
	float logprob;     /* raw log-probability (logit - logsumexp) */
	uint32_t text_off; /* its bytes: set->text[text_off, +text_len) */
	uint32_t text_len;
};

/* What the sampler saw at one token of a reply (struct sampler_report,
   restricted to what is stored). NaN marks a value that was not known
   when it was recorded (a forced token's sampled probability). */
struct store_tok_report {
	int32_t chosen;    /* the token emitted, or -1 when its id is unknown
	                      (a remote model's, sampler.h): the text is
	                      then all there is of it */
	unsigned flags;    /* STORE_REPORT_EOG | STORE_REPORT_FORCED */
	float prob;        /* chosen, in the sampled distribution */
	float raw_logprob; /* chosen, in the raw distribution */
	float entropy;     /* nats, sampled distribution */
	float raw_entropy; /* nats, raw distribution */
	int32_t n_kept;    /* candidates left after truncation */
	int32_t n_top;     /* entries used in top[] (<= STORE_REPORT_TOP) */
	uint32_t text_off; /* the chosen token's bytes in set->text */
	uint32_t text_len;
	struct store_tok_cand top[STORE_REPORT_TOP]; /* by raw logit, desc */
};

/* The reports of one message, position i at v[i]; the bytes of every
   token text in TEXT. Owned: store_reports_free. */
struct store_reports {
	struct store_tok_report *v; /* n reports */
	size_t n, cap;
	char *text; /* token bytes (not NUL-terminated) */
	size_t text_len, text_cap;
};

/* Free the set's buffers and empty it (it stays usable). */
void store_reports_free(struct store_reports *r);
/* Append LEN bytes of token text to R's text buffer; *OFF their offset.
   0, or -1 when out of memory or past 4 GiB. */
int store_reports_text(struct store_reports *r, const char *p, size_t len,
                       uint32_t *off);
/* Append a copy of T (its text offsets already in R). 0 or -1 (memory). */
int store_reports_push(struct store_reports *r,
                       const struct store_tok_report *t);

/*
 * Encode R->v[from, to) as one BLOB (layout in store_report.c); *OUT is
 * malloc'd (caller frees). STORE_EINVAL when a report is out of range
 * (n_top, flags, ids, a text over 65535 bytes), STORE_ERR on no memory.
 */
int store_reports_encode(const struct store_reports *r, size_t from, size_t to,
                         unsigned char **out, size_t *len, char *err,
                         size_t errlen);

/*
 * Decode a BLOB of LEN bytes (hostile input: every length and id is
 * checked) and append its N_TOKENS reports to OUT. Errors (STORE_ECORRUPT)
 * name MSG_ID and the byte offset; OUT then keeps only what it had.
 */
int store_reports_decode(const void *blob, size_t len, int64_t msg_id,
                         size_t n_tokens, struct store_reports *out, char *err,
                         size_t errlen);

/*
 * The reports stored with message MSG_ID into OUT (emptied first; n = 0
 * when none are stored). The chunks must follow each other from position
 * 0; a gap or a BLOB that does not decode is STORE_ECORRUPT naming the
 * message.
 */
int store_msg_reports(struct store *st, int64_t msg_id,
                      struct store_reports *out, char *err, size_t errlen);

/*
 * store_msg_update with reports: the text, and REP->v[from, rep->n) as a
 * new chunk at position FROM (which must be where the stored ones end),
 * in one transaction. REP NULL or from == rep->n: text only. More than
 * STORE_REPORTS_MAX reports in all is refused (STORE_EINVAL) and nothing
 * is written.
 */
int store_msg_update_rep(struct store *st, int64_t id, const char *content,
                         size_t len, const struct store_reports *rep,
                         size_t from, char *err, size_t errlen);

/*
 * The reasoning of assistant message ID (a thinking model's text between
 * <think> and </think>, kept apart from the answer in content): LEN bytes
 * of TEXT, N_TOKENS tokens, OPEN when the reply ended inside the block
 * (unfinished reasoning). Written before each update of a reply in
 * progress and before its finish, so that a kill keeps the reasoning as
 * it keeps the text. STORE_ENOTFOUND when there is no such assistant
 * message.
 */
int store_msg_set_reasoning(struct store *st, int64_t id, const char *text,
                            size_t len, int64_t n_tokens, bool open, char *err,
                            size_t errlen);

/*
 * store_msg_finish with reports: REP (all of the message's reports, or
 * NULL to keep the chunks as they are) replaces the stored chunks by one,
 * in the same transaction as the final text.
 */
int store_msg_finish_rep(struct store *st, int64_t id, const char *content,
                         size_t len, enum store_finish finish,
                         const struct store_msg_stats *stats,
                         const struct store_reports *rep, char *err,
                         size_t errlen);

/* Every message of conversation CONV_ID, all branches, by id, into a
   malloc'd *V of *N (store_msg_free). */
int store_msg_list(struct store *st, int64_t conv_id, struct store_msg **v,
                   size_t *n, char *err, size_t errlen);

/*
 * Make the branch through message MSG_ID active: the leaf becomes its
 * newest descendant (following the newest child at each step), or MSG_ID
 * itself. *LEAF (may be NULL) receives it.
 */
int store_conv_select(struct store *st, int64_t conv_id, int64_t msg_id,
                      int64_t *leaf, char *err, size_t errlen);

/* Search ---------------------------------------------------------------- */

/*
 * Messages matching TEXT (plain words, all required, each as a phrase;
 * or an FTS5 query with STORE_SEARCH_RAW), best first, at most LIMIT
 * (0 = 50). Snippets have matches between OPEN and CLOSE (NULL = "[" and
 * "]"). *HITS is a malloc'd array of *N (store_hits_free).
 */
int store_search(struct store *st, const char *text, unsigned flags,
                 size_t limit, const char *open, const char *close,
                 struct store_hit **hits, size_t *n, char *err, size_t errlen);
void store_hits_free(struct store_hit *v, size_t n);

/* Export and import ---------------------------------------------------- */

/*
 * Conversation ID's active branch as JSON (OpenAI messages shape):
 *   {"model": PATH, "messages": [{"role": R, "content": C}, ...],
 *    "parley": {"format": "parley-conversation", "version": 1,
 *               "title", "created", "updated", "archived", "model_size",
 *               "model_fingerprint", "template", "sampling",
 *               "messages": [{"finish", "n_tokens", "n_prompt_tokens",
 *                             "prefill_ms", "decode_ms", "created"}, ...]}}
 * A reply's meta also has "server" and "server_model" when a server
 * answered it, and "sampling" (the settings that produced it) when they
 * were recorded.
 * The system prompt is messages[0] with role "system" and parley meta
 * {"system_prompt": true}. Built with SQLite's JSON1. *OUT malloc'd.
 */
int store_export_json(struct store *st, int64_t id, char **out, size_t *len,
                      char *err, size_t errlen);

/*
 * The same with FLAGS: STORE_EXPORT_LOGPROBS adds to each assistant
 * message with stored reports "logprobs": {"content": [{"token", "logprob",
 * "bytes", "top_logprobs": [{"token", "logprob", "bytes"}, ...]}, ...]}
 * in the OpenAI chat-completions shape: raw (model) log-probabilities,
 * the end-of-generation token left out, "token" the bytes as a JSON
 * string (a byte that is not UTF-8 becomes \u00XX; "bytes" is exact),
 * a log-probability that is not finite written as -9999.0.
 */
#define STORE_EXPORT_LOGPROBS 0x1
int store_export_json_flags(struct store *st, int64_t id, unsigned flags,
                            char **out, size_t *len, char *err, size_t errlen);

/* The active branch as Markdown (title, metadata, one section per message). */
int store_export_md(struct store *st, int64_t id, char **out, size_t *len,
                    char *err, size_t errlen);

/*
 * Import JSON of LEN bytes: either the object above (only "messages" is
 * required; "parley" optional) or a bare array of {"role", "content"}.
 * Validated completely and inserted in one transaction; on any error
 * (STORE_EINVAL, naming the offending element) nothing is written.
 * A first "system" message without parley meta becomes the system prompt.
 */
int store_import_json(struct store *st, const char *json, size_t len,
                      int64_t *id, char *err, size_t errlen);

/*
 * Read the file at PATH (at most STORE_IMPORT_MAX bytes, else
 * STORE_EINVAL) and import it as store_import_json does; errors name the
 * file.
 */
int store_import_file(struct store *st, const char *path, int64_t *id,
                      char *err, size_t errlen);

/* KV-cache slot ---------------------------------------------------------- */

/* Save (replace) the KV state of conversation CONV_ID. */
int store_kv_set(struct store *st, int64_t conv_id, const char *format,
                 const int32_t *tokens, size_t n_tokens, const void *state,
                 size_t state_len, char *err, size_t errlen);
/* Load it into *KV (store_kv_free); STORE_ENOTFOUND when none is saved. */
int store_kv_get(struct store *st, int64_t conv_id, struct store_kv *kv,
                 char *err, size_t errlen);
int store_kv_clear(struct store *st, int64_t conv_id, char *err, size_t errlen);
void store_kv_free(struct store_kv *kv);

/* Formatting helpers for the CLI (pure; malloc'd results, NULL on OOM) --- */

/*
 * A table of conversations: "ID  UPDATED  MSGS  TITLE", one per line,
 * titles cut to fit WIDTH columns (0 = no limit) and control characters
 * replaced. Times relative to NOW_MS when recent ("5 min ago").
 */
char *store_fmt_list(const struct store_conv *v, size_t n, int64_t now_ms,
                     int width);

/* Search results for `parley search`: "CONV#MSG  ROLE  TITLE: SNIPPET",
 * one per line, control characters folded away. */
char *store_fmt_hits(const struct store_hit *h, size_t n);

/*
 * The message tree of a conversation for `parley show --branches`: one
 * line per message (V: store_msg_list's, by id), children indented under
 * their parent, "*" on the active branch (ending at LEAF_ID).
 */
char *store_fmt_tree(const struct store_msg *v, size_t n, int64_t leaf_id);

/* A plain-text transcript for `parley show` (control characters escaped);
 * SERVER and SERVER_MODEL (store_conv_origin's; NULL or "" for the local
 * engine) name the server that answered last; each reply a server wrote
 * names it and its model after the reply's heading. */
char *store_fmt_show(const struct store_conv *c, const char *server,
                     const char *server_model, const struct store_msg *m,
                     size_t n);

/* The Markdown of store_export_md from already-read rows. */
char *store_fmt_markdown(const struct store_conv *c, const struct store_msg *m,
                         size_t n);

/* A one-line title from TEXT: whitespace folded, at most MAX_CHARS
 * characters (UTF-8 aware), "..." appended when cut. */
char *store_fmt_title(const char *text, size_t len, size_t max_chars);

/*
 * The fingerprint of the model file at PATH for conversations'
 * model_fingerprint: "fnv1a64:" + 16 hex digits over the size and the
 * first and last 64 KiB (store_fp.c). OUT gets at least 25 bytes; *SIZE
 * (may be NULL) the file size.
 */
#define STORE_FP_LEN 32 /* a buffer size that always fits */
int store_model_fingerprint(const char *path, char *out, size_t outlen,
                            int64_t *size, char *err, size_t errlen);

/* Current time in Unix milliseconds. */
int64_t store_now_ms(void);

#endif /* PARLEY_STORE_H */

/*
 * tui_int.h - the full-screen UI's state, shared by its files: tui.c (the
 * loop, keys, events), tui_draw.c (frames), tui_cmd.c (slash commands),
 * tui_list.c (the conversation list).
 */
#ifndef PARLEY_TUI_INT_H
#define PARLEY_TUI_INT_H

#include "tui.h"
#include "tui_input.h"
#include "tui_lines.h"
#include "tui_worker.h"

#include "session.h"
#include "store.h"

#include <stdbool.h>
#include <stdint.h>

#define TUI_ROLE_NOTICE 100 /* a transcript entry that is no message */

/* One entry of the transcript. */
struct tui_msg {
	int role;                 /* enum store_role or TUI_ROLE_NOTICE */
	char *text;               /* UTF-8 (owned), NUL-terminated */
	size_t len, cap;          /* bytes used, allocated */
	enum store_finish finish; /* replies: how they ended */
	bool live;                /* a reply still streaming */
	struct tui_lines lines;   /* laid out (cache) */
	int lines_w;              /* width they were laid out at, 0: none */
	bool lines_raw;           /* laid out in /raw mode */
	unsigned lines_tag;       /* token view it was laid out for
	                             (tui_tokens_tag), 0: none */
	int cur_line;             /* token view: the line of the cursor's
	                             token in lines, or -1 */
	/* replies: one report per sampled token (debug pane), live or
	   stored (tui_worker_stored_toks) */
	struct tui_tok *toks; /* n_toks reports (owned) */
	size_t n_toks, cap_toks;
	bool toks_none; /* none kept for this reply (an older message) */
	/* replies of a thinking model: the reasoning, a block above the
	   answer, folded to one line unless unfolded (tui_draw.c) */
	char *reasoning;      /* UTF-8 (owned) or NULL */
	size_t reasoning_len; /* bytes */
	size_t reasoning_cap; /* allocated */
	int32_t n_reasoning;  /* its tokens: the first n_reasoning of
	                         toks (live: counted so far) */
	bool reasoning_open;  /* unfinished: never closed */
	bool unfold;          /* the block is shown whole */
};

enum tui_mode {
	TUI_MODE_CHAT,   /* transcript and input */
	TUI_MODE_HELP,   /* F1 */
	TUI_MODE_LIST,   /* F3: stored conversations */
	TUI_MODE_PROMPT, /* F6, /prompt: the last prompt's tokens */
	TUI_MODE_TOKENS, /* F4: cursor mode over the replies' tokens */
	TUI_MODE_MODELS, /* F8, /model: the model picker */
};

/* The last prompt as the prompt view shows it (a copy: the session may
   change while the view is open). */
struct tui_pview {
	int32_t *ids;     /* n ids (owned) */
	uint32_t *off;    /* [n + 1] offsets of each id's piece in text */
	bool *ctl;        /* [n] control tokens */
	char *text;       /* the pieces, back to back (owned) */
	size_t n, reused; /* ids; of those, taken from the KV cache */
	int top;          /* first line shown */
};

enum tui_ask {
	TUI_ASK_NONE,
	TUI_ASK_QUIT,   /* quit while a reply runs? */
	TUI_ASK_DELETE, /* delete the selected conversation? */
};

/* The conversation list (F3). */
struct tui_list {
	struct store_conv *v; /* conversations (owned) */
	size_t n;
	struct store_hit *hits; /* search results, when searching (owned) */
	size_t n_hits;
	bool searched; /* hits are shown */
	int sel, top;  /* selected row, first row shown */
	int edit;      /* 0, 's' typing a search, 'r' a new title */
	char buf[512]; /* what is typed for edit */
	size_t buf_n;
	char query[512]; /* the search whose hits are shown */
};

/* Ctrl-R: the history search shown in the input area (tui_search.c). */
struct tui_search {
	bool on;        /* searching: keys go to the search */
	wchar_t *q;     /* the search text, n characters (owned) */
	size_t n, cap;  /* used, allocated */
	char *saved;    /* the line before the search (UTF-8, owned):
	                   Esc puts it back */
	wchar_t *match; /* the history entry found (owned) or NULL */
	int idx;        /* its place in the history, 0 the newest */
	size_t at;      /* where the search text starts in it */
};

/* The model picker (F8, /model: tui_models.c). */
struct tui_models {
	struct modelstore_list l; /* what the scan found (owned) */
	bool scanning;            /* the worker's MODELS job runs */
	size_t *rows;             /* indexes into l the filter keeps */
	size_t n_rows;
	int sel, top;     /* selected row, first row shown */
	char filter[256]; /* typed so far (UTF-8) */
	size_t filter_n;  /* its bytes */
};

struct tui {
	const struct tui_opts *o;
	struct tui_worker w; /* owns the session */
	struct tui_input in; /* the input line */
	struct store *st;    /* the UI's own store connection, or NULL */
	enum tui_mode mode;
	int help_top; /* first help line shown */
	enum tui_ask ask;
	struct tui_list list;

	/* transcript */
	struct tui_msg *msgs;
	size_t n_msgs, cap_msgs;
	int scroll;     /* lines scrolled back from the bottom */
	int last_total; /* transcript lines at the last frame */
	int view_rows;  /* transcript rows at the last frame */
	bool raw;       /* /raw: replies as generated */
	bool color;     /* colours in use (not NO_COLOR, terminal has them) */

	/* the job running */
	bool busy;
	enum tui_job_kind job;
	bool editing;                /* Enter replaces the last user message */
	int32_t live_gen;            /* tokens so far */
	double live_t0;              /* when the first token came (ms) */
	int32_t pre_done, pre_total; /* prefill progress */

	/* the status bar */
	char model[128];
	char backend[128];
	char title[128];
	int64_t conv_id;
	int32_t n_ctx, ctx_used, reused;
	double prefill_tps, decode_tps;
	bool have_last;
	struct session_stats last;
	char msg[512]; /* a message instead of the figures, or "" */
	bool msg_err;  /* it is an error */

	/* the debug pane (tui_pane.c, tui_tokens.c, tui_health.c) */
	bool pane;       /* F2: shown */
	bool shade;      /* F5: reply tokens shaded by probability */
	size_t cur_msg;  /* cursor mode: the message (a reply with toks) */
	size_t cur_tok;  /* and the token in it */
	float jump_p;    /* 'n' jumps to the next token under this p */
	int32_t n_vocab; /* for the flat-logits flag */
	unsigned flags;  /* TUI_FLAG_* of the last reply's tokens */
	int flag_layer;  /* the first layer flagged, or -1 */
	size_t flag_tok; /* the first token flagged (1-based), or 0 */
	/* a sibling switch running (TUI_JOB_SIBLING): where the cursor was,
	   to put it back on the reply shown instead */
	bool sib_cursor; /* it ran from cursor mode */
	size_t sib_msg, sib_tok;
	struct tui_pview pv;

	struct tui_models models; /* F8 */
	char load_name[128];      /* the model a MODEL job loads */
	char load_phase[64];      /* its step (TUI_EV_PHASE), or "" */

	struct tui_paste paste;   /* a bracketed paste being collected */
	struct tui_search search; /* Ctrl-R */

	/* the loop */
	bool quit;
	int status; /* exit status */
	bool dirty; /* a frame is due */
	int sig_fd; /* read end of the signal pipe */
};

/* tui.c */
void tui_say(struct tui *t, bool err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
struct tui_msg *tui_add(struct tui *t, int role, const char *text, size_t len);
void tui_drop_last(struct tui *t);
void tui_remove(struct tui *t, size_t i);
void tui_msgs_clear(struct tui *t);
/* Append TEXT[0, len) to M's reasoning. 0 or -1 (no memory). */
int tui_msg_reasoning(struct tui_msg *m, const char *text, size_t len);
/* Whether M has a reasoning block. */
bool tui_msg_has_reasoning(const struct tui_msg *m);
/* Fold or unfold the reasoning of reply I; the cursor leaves it. */
void tui_fold(struct tui *t, size_t i);
int tui_start(struct tui *t, enum tui_job_kind job, const char *text,
              size_t len, int64_t conv_id);
int tui_start_arg(struct tui *t, enum tui_job_kind job, const char *text,
                  size_t len, const struct tui_job_arg *arg);
/* The transcript from a copy of the session's messages V[0, n); their
   stored token reports are taken over. */
void tui_load_msgs(struct tui *t, struct tui_ev_msg *v, size_t n);
double tui_now_ms(void);
void tui_refresh_title(struct tui *t);

/* tui_draw.c */
void tui_draw(struct tui *t);
void tui_draw_colors(struct tui *t);

/* tui_cmd.c */
void tui_cmd(struct tui *t, char *line);
extern const char tui_cmd_help[];

/* tui_out.c: one write per frame (see there) */
void tui_out_capture(void);
void tui_out_flush(void);
void tui_out_release(void);
void tui_out_err_release(void);
int tui_out_fd(void);
int tui_out_write(const char *buf, size_t n);

/* tui_draw.c, for the pane and views: line L at row Y, column X */
void tui_draw_line_at(const struct tui *t, int y, int x,
                      const struct tui_line *l);

/* tui_pane.c: the pane in the box at (Y, X), ROWS x COLS */
void tui_pane_draw(struct tui *t, int y, int x, int rows, int cols);
int tui_pane_visible(const char *s, size_t n, char *out, size_t outn);

/* tui_tokens.c: cursor mode and the token view of replies */
void tui_tokens_enter(struct tui *t);
void tui_tokens_key(struct tui *t, int k, bool fkey);
unsigned tui_tokens_tag(const struct tui *t, const struct tui_msg *m);
void tui_tokens_lay(struct tui *t, struct tui_msg *m, struct tui_lay *y);
const struct tui_tok *tui_tokens_target(const struct tui *t,
                                        const struct tui_msg **m, size_t *idx);
void tui_tokens_push(struct tui *t, struct tui_msg *m, struct tui_tok *k);
void tui_tokens_switched(struct tui *t, struct tui_ev *e);
void tui_tokens_free(struct tui_msg *m);
/* The reasoning's tokens among M's reports (0: no block) */
size_t tui_tokens_n_reasoning(const struct tui_msg *m);
/* The first token the cursor may take in M (past a folded block) */
size_t tui_tokens_lo(const struct tui_msg *m);

/* tui_prompt.c: the prompt view */
void tui_prompt_open(struct tui *t);
void tui_prompt_close(struct tui *t);
void tui_prompt_key(struct tui *t, int k, bool fkey);
void tui_prompt_draw(struct tui *t, int rows, int cols);

/* tui_search.c: Ctrl-R, the history search in the input area */
void tui_search_open(struct tui *t);
/* A key while searching; false when it ends the search without being
   used (the caller then handles it in the chat). */
bool tui_search_key(struct tui *t, int k, bool fkey);
/* The search in the input area: the rows it takes, then drawn from row
   Y at COLS columns (places the cursor). */
int tui_search_rows(const struct tui *t);
void tui_search_draw(struct tui *t, int y, int cols);
void tui_search_free(struct tui *t);

/* tui_models.c: the model picker and switching models */
void tui_models_open(struct tui *t);
void tui_models_close(struct tui *t);
void tui_models_key(struct tui *t, int k, bool fkey);
void tui_models_draw(struct tui *t, int rows, int cols);
/* END of the MODELS job: E's list taken over. */
void tui_models_scanned(struct tui *t, struct tui_ev *e);
/* /model NAME: load it (resolved by the worker, as -m NAME). */
void tui_models_switch(struct tui *t, const char *name);
/* END of a MODEL job: the status bar's model, or the error. */
void tui_models_loaded(struct tui *t, struct tui_ev *e);
/* The status bar's model and backend from S (the UI thread's, idle). */
void tui_models_status(struct tui *t, struct session *s);

/* tui_list.c */
void tui_list_open(struct tui *t);
void tui_list_close(struct tui *t);
void tui_list_key(struct tui *t, int k, bool fkey);
void tui_list_draw(struct tui *t, int rows, int cols);

#endif /* PARLEY_TUI_INT_H */

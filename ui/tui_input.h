/*
 * tui_input.h - the full-screen UI's input line: libedit on a private
 * pseudo-terminal, fed with keys read by ncurses, drawn by the UI from
 * el_wline (../shared/design/libedit-ncurses.md has the recipe and why).
 *
 * NOTES ON THE DESIGN
 *
 * libedit gets the pty's slave as its terminal and /dev/null as its
 * output, so it never writes to the real terminal. EL_UNBUFFERED makes
 * each el_wgets handle one command. Keys come from a callback (EL_GETCFN)
 * that returns the key the UI pushed; when libedit wants more keys in
 * the middle of a command (ESC-b, Ctrl-R search), the callback calls the
 * UI's WAIT function, which keeps the screen and the model's output going
 * until the next key.
 *
 * Enter submits (the "parley-submit" function bound to ^M); Ctrl-J and
 * Alt-Enter insert a newline; pasted text is inserted in one call.
 * History: one line a entry, the plain REPL's file (libedit's format).
 *
 * The terminal's bytes are decoded by ncurses (UTF-8, escape sequences
 * by terminfo, the bracketed paste markers defined by
 * tui_input_define_keys); function keys become emacs keys through
 * tui_input_translate; a paste is collected (struct tui_paste) and
 * inserted whole at its end marker. fuzz/fuzz_tui_input.c drives this
 * path with hostile bytes. Invariants: every character between the paste
 * markers but NUL reaches the line, in order, at the cursor ('\r' as
 * '\n'); tui_input_utf8 always returns valid UTF-8.
 */
#ifndef PARLEY_TUI_INPUT_H
#define PARLEY_TUI_INPUT_H

#include <curses.h>
#include <histedit.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <wchar.h>

/* ncurses key codes of our own (tui_input_define_keys): bracketed paste */
#define TUI_KEY_PASTE_BEGIN (KEY_MAX + 1)
#define TUI_KEY_PASTE_END   (KEY_MAX + 2)

/* The UI's wait for the next key: 1 with *K set, 0 to abandon the
   command (the UI quits), as EL_GETCFN's contract. */
typedef int (*tui_input_wait_fn)(void *ud, wchar_t *k);

struct tui_input {
	EditLine *el;
	HistoryW *hist;
	int master, slave;      /* the private pty */
	FILE *fin, *fnull;      /* libedit's input and output streams */
	const char *hist_path;  /* history file or NULL (borrowed) */
	tui_input_wait_fn wait; /* see above */
	void *ud;               /* for wait */
	wchar_t pending;        /* the key to hand to libedit next */
	bool has_pending;
	bool submitted; /* Enter was pressed: the line is complete */
};

/* Set IN up; HIST_PATH (may be NULL) is loaded. 0, or -1 with a message. */
int tui_input_open(struct tui_input *in, const char *hist_path,
                   tui_input_wait_fn wait, void *ud, char *err, size_t errlen);
void tui_input_close(struct tui_input *in);

/*
 * Feed key K (a character; arrows and such already translated to their
 * emacs control characters) to libedit. Returns 1 when the line was
 * submitted (read it with tui_input_line, then tui_input_reset), 0
 * otherwise.
 */
int tui_input_key(struct tui_input *in, wchar_t k);

/* Insert TEXT[0, n) at the cursor (a paste), its NULs left out. */
void tui_input_insert(struct tui_input *in, const wchar_t *text, size_t n);

/* The line: buffer, length and cursor index (borrowed, valid until the
   next call). */
const wchar_t *tui_input_line(struct tui_input *in, size_t *len,
                              size_t *cursor);

/* Empty the line (after a submit) and add TEXT (UTF-8) to the history
   when not NULL. */
void tui_input_reset(struct tui_input *in, const char *text);

/* Replace the line by TEXT (UTF-8), the cursor at its end. */
void tui_input_set(struct tui_input *in, const char *text);

/* The history entry at place *IDX or older (0: the newest) that holds
   Q[0, qn) (wide, qn > 0), or NULL when none: a malloc'd wide copy, its
   place in *IDX and where Q starts in it in *AT. The UI's own Ctrl-R
   search (tui_search.c) reads the history through this, not libedit's
   search, whose prompt is written into the line. */
wchar_t *tui_input_hist_find(struct tui_input *in, const wchar_t *q, size_t qn,
                             int *idx, size_t *at);

/* Define the paste markers (ESC[200~, ESC[201~) as ncurses keys; after
   initscr or newterm. */
void tui_input_define_keys(void);

/* The emacs key libedit knows for the ncurses function key K, or 0. */
wchar_t tui_input_translate(int k);

/* A bracketed paste being collected: the characters between its markers. */
struct tui_paste {
	bool on;      /* between the markers */
	wchar_t *buf; /* n characters (owned) */
	size_t n, cap;
};

/* The begin marker: start collecting (P keeps its buffer). */
void tui_input_paste_begin(struct tui_paste *p);

/* Add character K to P ('\r' as '\n'); dropped if memory runs out. */
void tui_input_paste_add(struct tui_paste *p, wchar_t k);

/* The end marker: insert P's characters into IN at the cursor. */
void tui_input_paste_end(struct tui_input *in, struct tui_paste *p);

/* Free P's buffer (P is then empty, usable). */
void tui_input_paste_free(struct tui_paste *p);

/* UTF-8 of W[0, n) whatever the locale (malloc'd, NUL-terminated; NUL
   and what has no UTF-8 form, a surrogate or a value past U+10FFFF, are
   left out), or NULL out of memory. */
char *tui_input_utf8(const wchar_t *w, size_t n);

#endif /* PARLEY_TUI_INPUT_H */

/*
 * tui.h - the full-screen ncurses chat: a scrollable transcript with
 * Markdown replies, an input area edited by libedit, a status bar; the
 * session runs in a worker thread so that the screen never freezes.
 *
 * NOTES ON THE DESIGN
 *
 * One poll() loop (tui.c) watches the keyboard, the worker's event pipe
 * and a pipe written by the signal handlers (SIGWINCH, SIGTERM, SIGHUP,
 * SIGINT): signals only set a flag and write a byte. Every pass through
 * the loop that changed something draws one frame (tui_draw.c) and
 * hands it to the terminal with a single doupdate(). The terminal is
 * restored on every exit path: the normal end, atexit() for exit()
 * anywhere, the termination signals (as loop events), and for fatal
 * signals (abort, SIGSEGV) a handler that puts the saved termios back
 * and leaves the alternate screen with async-signal-safe calls.
 */
#ifndef PARLEY_TUI_H
#define PARLEY_TUI_H

#include <stdbool.h>
#include <stddef.h>

struct session;
struct session_opts;
struct config;

struct tui_opts {
	const struct session_opts *so; /* to reopen the session (borrowed) */
	const char *history_path;      /* the REPL's history file, or NULL */
	const char *db_path;           /* the store, for the list; NULL: none */
	struct config *cfg;            /* options /set changes (borrowed) */
	bool resumed;                  /* S holds a stored conversation */
};

/*
 * Whether the full-screen UI can run here: standard input and output are
 * terminals, TERM can address the cursor, the locale is UTF-8. When not,
 * WHY gets the reason (a caller falls back to the plain REPL).
 */
bool tui_usable(char *why, size_t whylen);

/*
 * Run the UI on S until the user quits; S passes to the UI (closed when
 * it ends). Returns the exit status: 0, 1 after an error (printed on
 * stderr once the terminal is restored), 128 + N after signal N.
 */
int tui_run(struct session *s, const struct tui_opts *o);

#endif /* PARLEY_TUI_H */

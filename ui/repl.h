/*
 * repl.h - the plain REPL: one line (or block) of input, the reply
 * streamed after it, slash commands.
 *
 * NOTES ON THE DESIGN
 *
 * A front end on top of the chat session (src/session.h), the other one
 * besides the one-shot mode and the ncurses screen. Input comes from
 * libedit (line editing, history persisted under the XDG state
 * directory) when standard input is a terminal, from plain reads
 * otherwise (no prompt, no editing), so that scripts can pipe a chat in.
 *
 * Input:
 *   - a line ending with a backslash continues on the next line;
 *   - a line holding only """ opens a block that a line """ closes;
 *   - a line starting with '/' is a command (/help lists them); "//"
 *     sends a message that starts with one '/'.
 * Signals: the caller installs a SIGINT handler that sets *intr. While a
 * reply streams, Ctrl-C stops it (the partial reply is kept, in the
 * session and the store); at the prompt it drops the line being typed.
 * The REPL clears the flag once a reply has ended (the session only
 * reads it).
 * Ctrl-D (end of input) on an empty line ends the REPL.
 * A thinking model's reasoning is printed before the answer, dimmed on
 * a terminal (between <think> and </think> lines otherwise), or not at
 * all with hide_thinking.
 */
#ifndef PARLEY_REPL_H
#define PARLEY_REPL_H

#include <stdatomic.h>
#include <stdbool.h>

struct session;
struct config;

struct repl_opts {
	bool interactive;         /* libedit on a terminal, prompts */
	bool verbose;             /* stats after each reply */
	const char *history_path; /* NULL: no history file */
	atomic_int *intr;         /* the SIGINT flag (also the
	                             session's cancel), or NULL */
	struct config *cfg;       /* options /set changes (borrowed) */
	bool hide_thinking;       /* a thinking model's reasoning not shown */
	bool dim;                 /* reasoning dimmed (SGR 2); else between
	                             <think> and </think> lines */
};

/*
 * Run the REPL on S until /quit or end of input. Returns 0, or 1 when an
 * error ended it (printed on stderr).
 */
int repl_run(struct session *s, const struct repl_opts *o);

#endif /* PARLEY_REPL_H */

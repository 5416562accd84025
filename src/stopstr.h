/*
 * stopstr.h - find user stop strings in text that arrives piece by piece.
 *
 * NOTES ON THE DESIGN
 *
 * A generated reply reaches the session one token piece at a time, and a
 * stop string ("\nUser:", "</s>") may straddle several pieces. The
 * detector keeps back the shortest tail of the text that could still
 * become a stop string, and releases everything before it:
 *
 *   feed(piece) --no match--> emit = all pending text except the held tail
 *        |                    (held tail = longest suffix that is a proper
 *        |                     prefix of some stop string, plus an
 *        |                     incomplete UTF-8 sequence at the very end)
 *        +--match-----------> emit = text before the earliest match;
 *                              stopped; later feeds emit nothing
 *   flush() ---------------> emit = whatever is still held (end of reply)
 *
 * Invariants:
 *   1. The concatenation of everything emitted equals the fed text cut
 *      before the first occurrence (leftmost; on equal starts the longest
 *      stop string wins) of any stop string, or the whole text if none.
 *   2. Held text is shorter than the longest stop string plus 4 bytes.
 *   3. Emitted text never ends inside a UTF-8 sequence unless the input
 *      itself is invalid there (invalid bytes are passed through, never
 *      held forever) or flush() is called.
 * Empty stop strings are rejected. Stop strings are bytes; compare is exact.
 */
#ifndef PARLEY_STOPSTR_H
#define PARLEY_STOPSTR_H

#include <stdbool.h>
#include <stddef.h>

#define STOPSTR_MAX_STRINGS 64   /* stop strings per detector */
#define STOPSTR_MAX_LEN     1024 /* bytes per stop string */

struct stopstr;

/* What one feed or flush released. Pointers are valid until the next call. */
struct stopstr_out {
	const char *text; /* bytes safe to show and store (owned by detector) */
	size_t len;       /* length of text */
	bool stopped;     /* a stop string was found (now or earlier) */
	int which;        /* index of the stop string found, else -1 */
};

/*
 * A detector for the N stop strings in STOPS (copied). N may be 0 (then
 * only UTF-8 holding applies). Returns NULL with a message for an empty or
 * over-long string, too many strings, or out of memory. Free with
 * stopstr_free().
 */
struct stopstr *stopstr_new(const char *const *stops, size_t n, char *err,
                            size_t errlen);

/* Free D. NULL is allowed. */
void stopstr_free(struct stopstr *d);

/* Stop strings D looks for (0: only UTF-8 holding). */
size_t stopstr_count(const struct stopstr *d);

/* Forget all text and the stopped state (a new reply). */
void stopstr_reset(struct stopstr *d);

/*
 * Append LEN bytes of PIECE and report what can be released. Returns 0, or
 * -1 with a message when out of memory (nothing is released then).
 */
int stopstr_feed(struct stopstr *d, const char *piece, size_t len,
                 struct stopstr_out *out, char *err, size_t errlen);

/* Release the held tail (the reply ended without a stop string). */
void stopstr_flush(struct stopstr *d, struct stopstr_out *out);

#endif /* PARLEY_STOPSTR_H */

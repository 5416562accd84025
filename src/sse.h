/*
 * sse.h - an incremental parser of server-sent events (text/event-stream,
 * the WHATWG HTML standard, section 9.2 "Server-sent events").
 *
 * NOTES ON THE DESIGN
 *
 * The parser is a pure function of the bytes fed to it: sse_feed() takes
 * any split of the stream (one byte at a time, or all at once) and calls
 * back the same events in the same order. It keeps only what it needs
 * across calls: the current line's bytes, the event's data and name so
 * far, and whether the last byte was a CR (a CRLF may be split between
 * two chunks). Because a line is handed on only when its end is seen, a
 * UTF-8 character split across chunks is always whole in the event.
 *
 * The rules kept from the standard:
 *   1. A line ends at CRLF, LF or CR. A UTF-8 BOM at the very start is
 *      dropped.
 *   2. A line starting with ':' is a comment (servers send them to keep a
 *      connection alive); it is ignored.
 *   3. "name:value" (one space after the colon dropped) sets a field; a
 *      line without ':' is a field with an empty value. "data" appends the
 *      value and a LF to the data buffer; "event" sets the event's name;
 *      "id" and "retry" are accepted and not reported; other names are
 *      ignored.
 *   4. An empty line dispatches the event: when the data buffer is empty
 *      nothing is dispatched; else its last LF is dropped and the event
 *      (name "message" when none was given) is called back. The buffers
 *      are then reset.
 *   5. At the end of the stream an event without its empty line is not
 *      dispatched (sse_pending() tells the caller one was cut).
 *
 * Limits (hostile input): a line or an event's data longer than
 * SSE_MAX_EVENT bytes is an error; so is running out of memory. After an
 * error or a callback that asked to stop, the parser refuses more input
 * until sse_reset().
 */
#ifndef PARLEY_SSE_H
#define PARLEY_SSE_H

#include <stdbool.h>
#include <stddef.h>

#define SSE_MAX_EVENT (16u << 20) /* bytes of one line or one event */

/* One dispatched event; the pointers are valid during the callback. */
struct sse_event {
	const char *name; /* "message" unless an event field named it */
	size_t name_len;
	const char *data; /* the data lines joined by LF, NUL-terminated */
	size_t data_len;
};

/* Called for each event; nonzero stops the parser (sse_feed returns it). */
typedef int (*sse_cb)(void *ud, const struct sse_event *ev);

struct sse {
	char *line; /* the current line so far (owned) */
	size_t line_len, line_cap;
	char *data; /* the event's data so far (owned) */
	size_t data_len, data_cap;
	char *name; /* the event's name, or NULL (owned) */
	size_t name_len, name_cap;
	bool after_cr;   /* the last byte was a CR: skip a LF next */
	bool started;    /* past the first bytes (BOM check) */
	size_t bom_seen; /* bytes of a leading BOM matched so far */
	bool dead;       /* an error or a stop: no more input */
};

/* A parser at the start of a stream (no allocation). */
void sse_init(struct sse *p);

/* Free what P holds and start again (sse_init). */
void sse_reset(struct sse *p);

/*
 * Parse LEN bytes of BUF, calling CB(UD, event) for each complete event.
 * Returns 0; the callback's nonzero value when it stopped the parser; -1
 * with a message on an error (a line or event over SSE_MAX_EVENT, no
 * memory, or input after an error or stop).
 */
int sse_feed(struct sse *p, const char *buf, size_t len, sse_cb cb, void *ud,
             char *err, size_t errlen);

/* Whether the stream so far ends inside an event (a line or data not yet
   dispatched): a stream that was cut. */
bool sse_pending(const struct sse *p);

#endif /* PARLEY_SSE_H */

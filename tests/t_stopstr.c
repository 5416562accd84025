/*
 * t_stopstr.c - stop strings across piece boundaries, UTF-8 holding.
 */
#include "stopstr.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

static char err[256];

/* Feed TEXT cut into pieces at the byte offsets CUTS (ascending, ending
 * with -1), flush unless stopped; return everything released (static). */
static const char *run(struct stopstr *d, const char *text, const int *cuts,
                       int *which, int *max_held)
{
	static char acc[4096];
	size_t n = 0, at = 0, len = strlen(text);
	struct stopstr_out o = {0};

	stopstr_reset(d);
	*max_held = 0;
	for (int i = 0;; i++) {
		size_t to = cuts[i] < 0 ? len : (size_t)cuts[i];

		if (stopstr_feed(d, text + at, to - at, &o, err, sizeof(err)))
			return NULL;
		memcpy(acc + n, o.text, o.len);
		n += o.len;
		if ((int)(to - n) > *max_held && !o.stopped)
			*max_held = (int)(to - n);
		at = to;
		if (cuts[i] < 0)
			break;
	}
	if (!o.stopped) {
		stopstr_flush(d, &o);
		memcpy(acc + n, o.text, o.len);
		n += o.len;
	}
	acc[n] = '\0';
	*which = o.which;
	return acc;
}

int main(void)
{
	const char *stops[] = {"\nUser:", "</s>", "ab"};
	struct stopstr *d = stopstr_new(stops, 3, err, sizeof(err));
	int which, held;
	const char *r;

	tap_ok(d != NULL, "new with 3 stop strings");
	{
		int cuts[] = {3, 7, 9, -1};

		r = run(d, "Hello\nUser: hi", cuts, &which, &held);
		tap_ok(r && strcmp(r, "Hello") == 0 && which == 0,
		       "stop string split over 3 pieces: \"%s\", which %d", r,
		       which);
	}
	{
		int cuts[] = {-1};

		r = run(d, "Hello there", cuts, &which, &held);
		tap_ok(r && strcmp(r, "Hello there") == 0 && which == -1,
		       "no stop: everything released");
	}
	{
		/* every possible cut of a text with a stop in the middle */
		const char *t = "xx\nUsxy </ </s> tail";
		int ok = 1;

		for (int a = 0; a <= 20; a++)
			for (int b = a; b <= 20; b++) {
				int cuts[] = {a, b, -1};

				r = run(d, t, cuts, &which, &held);
				ok &= r && strcmp(r, "xx\nUsxy </ ") == 0 &&
				      which == 1 && held < 6 + 4;
			}
		tap_ok(ok,
		       "all two-cut splits give the same prefix, held < 10");
	}
	{
		int cuts[] = {1, 2, 3, 4, 5, -1};

		r = run(d, "xyz</", cuts, &which, &held);
		tap_ok(r && strcmp(r, "xyz</") == 0 && which == -1,
		       "partial stop at the end is released by flush");
	}
	{
		/* "ab" (index 2) and "</s>" both present: the earliest wins */
		int cuts[] = {-1};

		r = run(d, "1</s>ab", cuts, &which, &held);
		tap_ok(r && strcmp(r, "1") == 0 && which == 1,
		       "earliest match wins");
	}
	stopstr_free(d);
	{
		const char *s2[] = {"ab", "abc"};
		int cuts[] = {-1};

		d = stopstr_new(s2, 2, err, sizeof(err));
		r = run(d, "zabcd", cuts, &which, &held);
		tap_ok(r && strcmp(r, "z") == 0 && which == 1,
		       "same start: the longer stop string is reported");
		stopstr_free(d);
	}
	{
		/* UTF-8: "é" = c3 a9, "€" = e2 82 ac; no stops */
		const char *t = "a\xc3\xa9\xe2\x82\xac!";
		struct stopstr_out o;
		d = stopstr_new(NULL, 0, err, sizeof(err));
		stopstr_feed(d, t, 2, &o, err, sizeof(err));
		tap_ok(o.len == 1, "lead byte of é held back (%zu released)",
		       o.len);
		stopstr_feed(d, t + 2, 2, &o, err, sizeof(err));
		tap_ok(o.len == 2 && memcmp(o.text, "\xc3\xa9", 2) == 0,
		       "é released whole, € lead held");
		stopstr_feed(d, t + 4, 1, &o, err, sizeof(err));
		tap_ok(o.len == 0, "two bytes of € still held");
		stopstr_feed(d, t + 5, 2, &o, err, sizeof(err));
		tap_ok(o.len == 4 && memcmp(o.text, "\xe2\x82\xac!", 4) == 0,
		       "€ and ! released");
		stopstr_feed(d, "\x80\x80\x80\x80x", 5, &o, err, sizeof(err));
		tap_ok(o.len == 5, "stray continuation bytes pass through");
		stopstr_feed(d, "\xf0\x9f", 2, &o, err, sizeof(err));
		stopstr_flush(d, &o);
		tap_ok(o.len == 2 && o.text[2] == '\0',
		       "flush releases an incomplete tail, NUL-terminated");
		stopstr_free(d);
	}
	{
		/* a piece that is no text (a special token's) before any
		   text, and again after a flush swapped the buffers: nothing
		   released, nothing read from a buffer never allocated (the
		   sanitizers' build aborted on memcpy from NULL here) */
		const char *s4[] = {"END"};
		struct stopstr_out o;
		int ok;

		d = stopstr_new(s4, 1, err, sizeof(err));
		ok = stopstr_feed(d, "", 0, &o, err, sizeof(err)) == 0 &&
		     o.len == 0 && !o.stopped && o.text[0] == '\0';
		stopstr_flush(d, &o);
		ok = ok && o.len == 0 &&
		     stopstr_feed(d, "", 0, &o, err, sizeof(err)) == 0 &&
		     o.len == 0 &&
		     stopstr_feed(d, "hi", 2, &o, err, sizeof(err)) == 0 &&
		     o.len == 2 && memcmp(o.text, "hi", 2) == 0;
		tap_ok(ok, "empty pieces before any text and after a flush");
		stopstr_free(d);
	}
	{
		const char *bad[] = {""};
		char big[STOPSTR_MAX_LEN + 2];
		const char *bb[] = {big};

		tap_ok(stopstr_new(bad, 1, err, sizeof(err)) == NULL,
		       "empty stop string rejected: %s", err);
		memset(big, 'x', sizeof(big) - 1);
		big[sizeof(big) - 1] = '\0';
		tap_ok(stopstr_new(bb, 1, err, sizeof(err)) == NULL,
		       "over-long stop string rejected: %s", err);
	}
	{
		/* after a stop, later feeds release nothing */
		const char *s3[] = {"STOP"};
		struct stopstr_out o;

		d = stopstr_new(s3, 1, err, sizeof(err));
		stopstr_feed(d, "aSTOPb", 6, &o, err, sizeof(err));
		tap_ok(o.stopped && o.len == 1, "stopped after \"a\"");
		stopstr_feed(d, "more", 4, &o, err, sizeof(err));
		tap_ok(o.stopped && o.len == 0, "nothing after the stop");
		stopstr_reset(d);
		stopstr_feed(d, "ok", 2, &o, err, sizeof(err));
		tap_ok(!o.stopped && o.len == 2, "reset starts a new reply");
		stopstr_free(d);
	}
	return tap_done();
}

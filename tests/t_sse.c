/*
 * t_sse.c - the server-sent events parser: the events of a stream are the
 * same for every split of its bytes (each split point, two-byte chunks,
 * one byte at a time), with CRLF / CR / LF line ends, comments,
 * multi-line data, event names, a BOM, a UTF-8 character split across
 * chunks, a cut stream, and the size limit; then the fuzz harness's
 * property (tests/sse_fuzz_check.h) over generated streams and the
 * inputs kept in tests/data/sse/crashers/.
 */
#include "sse.h"
#include "sse_fuzz_check.h"
#include "tap.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Events written as "name=data|" into a buffer. */
struct log {
	char buf[4096];
	size_t n;
	int stop_after; /* return 1 after this many events (0: never) */
	int count;
};

static int on_event(void *ud, const struct sse_event *ev)
{
	struct log *l = ud;

	l->n += (size_t)snprintf(l->buf + l->n, sizeof(l->buf) - l->n,
	                         "%.*s=%.*s|", (int)ev->name_len, ev->name,
	                         (int)ev->data_len, ev->data);
	if (strlen(ev->data) != ev->data_len)
		l->n += (size_t)snprintf(l->buf + l->n, sizeof(l->buf) - l->n,
		                         "(NUL not at data_len)");
	l->count++;
	return l->stop_after && l->count >= l->stop_after ? 1 : 0;
}

/* Feed S in chunks: the first at CUT1 bytes, then STEP bytes each (0: the
   rest at once). The events into L; returns sse_feed's last result. */
static int run(const char *s, size_t len, size_t cut1, size_t step,
               struct log *l, bool *pending)
{
	struct sse p;
	char err[128];
	size_t i = 0;
	int rc = 0;
	bool first = true;

	memset(l, 0, sizeof(*l));
	sse_init(&p);
	while ((first || i < len) && rc == 0) {
		size_t n = first ? cut1 : step ? step : len - i;

		first = false; /* an empty first chunk is fed too */
		if (n > len - i)
			n = len - i;
		rc = sse_feed(&p, s + i, n, on_event, l, err, sizeof(err));
		i += n;
	}
	if (pending)
		*pending = sse_pending(&p);
	sse_reset(&p);
	return rc;
}

/* S gives WANT (and WANT_PENDING at its end) for every split. */
static void check(const char *what, const char *s, const char *want,
                  bool want_pending)
{
	size_t len = strlen(s);
	struct log l;
	int bad = 0;
	bool pend;

	for (size_t cut = 0; cut <= len; cut++) {
		run(s, len, cut, 0, &l, &pend);
		if (strcmp(l.buf, want) != 0 || pend != want_pending) {
			if (!bad)
				tap_diag("%s: split at %zu: got '%s' "
				         "pending %d",
				         what, cut, l.buf, pend);
			bad++;
		}
	}
	run(s, len, 1, 1, &l, &pend);
	if (strcmp(l.buf, want) != 0 || pend != want_pending) {
		tap_diag("%s: byte by byte: got '%s'", what, l.buf);
		bad++;
	}
	run(s, len, 2, 2, &l, &pend);
	if (strcmp(l.buf, want) != 0 || pend != want_pending) {
		tap_diag("%s: two bytes at a time: got '%s'", what, l.buf);
		bad++;
	}
	tap_ok(bad == 0, "%s: the same events at every split (%d bad)", what,
	       bad);
}

int main(void)
{
	check("one event", "data: hello\n\n", "message=hello|", false);
	check("OpenAI-style stream",
	      "data: {\"a\":1}\n\ndata: {\"b\":2}\n\ndata: [DONE]\n\n",
	      "message={\"a\":1}|message={\"b\":2}|message=[DONE]|", false);
	check("CRLF line ends", "data: x\r\n\r\ndata: y\r\n\r\n",
	      "message=x|message=y|", false);
	check("CR line ends", "data: x\r\rdata: y\r\r", "message=x|message=y|",
	      false);
	check("mixed line ends", "data: a\r\ndata: b\rdata: c\n\r\n",
	      "message=a\nb\nc|", false);
	check("comments", ": keep-alive\n\n: ping\ndata: z\n: mid\n\n",
	      "message=z|", false);
	check("multi-line data", "data: one\ndata:two\ndata:  three\n\n",
	      "message=one\ntwo\n three|", false);
	check("empty data line", "data\n\ndata:\ndata:\n\n",
	      "message=|message=\n|", false);
	check("event names",
	      "event: error\ndata: bad\n\ndata: next\n\nevent:\ndata: e\n\n",
	      "error=bad|message=next|message=e|", false);
	check("other fields ignored",
	      "id: 7\nretry: 100\nfoo: bar\ndata: d\n\n", "message=d|", false);
	check("no data, no event", "event: x\n\n\n\ndata: y\n\n", "message=y|",
	      false);
	check("BOM at the start",
	      "\xef\xbb\xbf"
	      "data: b\n\n",
	      "message=b|", false);
	check("BOM prefix that is not one",
	      "\xef\xbb"
	      "data: b\n\n",
	      "", false);
	check("UTF-8 split in every way",
	      "data: \xe2\x82\xac \xf0\x9f\x98\x80\n\n",
	      "message=\xe2\x82\xac \xf0\x9f\x98\x80|", false);
	check("colon in the value", "data: a: b\n\n", "message=a: b|", false);
	check("cut stream: data without its empty line", "data: 1\n\ndata: 2\n",
	      "message=1|", true);
	check("cut stream: inside a line", "data: 1\n\ndata: [DO", "message=1|",
	      true);

	/* a callback's nonzero value stops the parser and is returned */
	{
		struct sse p;
		struct log l;
		char err[128];
		const char *s = "data: 1\n\ndata: 2\n\n";
		int rc;

		memset(&l, 0, sizeof(l));
		l.stop_after = 1;
		sse_init(&p);
		rc = sse_feed(&p, s, strlen(s), on_event, &l, err, sizeof(err));
		tap_ok(rc == 1 && l.count == 1, "a callback stops the parser");
		rc = sse_feed(&p, "\n", 1, on_event, &l, err, sizeof(err));
		tap_ok(rc == -1 && strstr(err, "after the end") != NULL,
		       "input after a stop is refused: %s", err);
		sse_reset(&p);
	}
	/* the limit: a line longer than SSE_MAX_EVENT is an error */
	{
		struct sse p;
		struct log l;
		char err[128];
		size_t chunk = 1 << 20, fed = 0;
		char *big = malloc(chunk);
		int rc = 0;

		memset(big, 'x', chunk);
		memset(&l, 0, sizeof(l));
		sse_init(&p);
		rc = sse_feed(&p, "data: ", 6, on_event, &l, err, sizeof(err));
		while (rc == 0 && fed <= SSE_MAX_EVENT) {
			rc = sse_feed(&p, big, chunk, on_event, &l, err,
			              sizeof(err));
			fed += chunk;
		}
		tap_ok(rc == -1 && strstr(err, "longer than") != NULL &&
		           fed <= SSE_MAX_EVENT + chunk,
		       "a line over the limit is an error: %s", err);
		sse_reset(&p);
		free(big);
	}
	/* the harness's property on streams built from SSE's own pieces */
	{
		static const char *const pieces[] = {
		    "data:",  "data: ",       "event:",       "event: x",
		    ":",      ": c",          "id: 1",        "retry: 5",
		    "\r",     "\n",           "\r\n",         "x",
		    " ",      "\xe2\x82\xac", "\xf0\x9f",     "\x98\x80",
		    "[DONE]", "{\"a\":1}",    "\xef\xbb\xbf", "\0"};
		uint64_t r = 0x9e3779b97f4a7c15u;
		int bad = 0, runs = 3000;

		for (int k = 0; k < runs; k++) {
			char buf[512];
			size_t n = 0;
			int m;

			r ^= r << 13, r ^= r >> 7, r ^= r << 17;
			m = (int)(r % 24);
			for (int j = 0; j < m; j++) {
				size_t pi, pl;

				r ^= r << 13, r ^= r >> 7, r ^= r << 17;
				pi = r % (sizeof(pieces) / sizeof(*pieces));
				pl = pieces[pi][0] ? strlen(pieces[pi]) : 1;
				memcpy(buf + n, pieces[pi], pl);
				n += pl;
			}
			buf[0] = n ? buf[0] : 0;
			if (sse_fuzz_check(buf, n))
				bad++;
		}
		tap_ok(bad == 0,
		       "%d generated streams: split-independent "
		       "(%d not)",
		       runs, bad);
	}
	/* fuzz findings (and regression inputs) replayed */
	{
		const char *top = getenv("top_srcdir");
		char path[4096];
		DIR *d;
		struct dirent *e;
		int n = 0, bad = 0;

		snprintf(path, sizeof(path), "%s/tests/data/sse/crashers",
		         top ? top : ".");
		d = opendir(path);
		while (d && (e = readdir(d))) {
			char file[8192], buf[65536];
			FILE *f;
			size_t len;

			if (e->d_name[0] == '.')
				continue;
			snprintf(file, sizeof(file), "%s/%s", path, e->d_name);
			f = fopen(file, "rb");
			if (!f)
				continue;
			len = fread(buf, 1, sizeof(buf), f);
			fclose(f);
			n++;
			if (sse_fuzz_check(buf, len)) {
				bad++;
				tap_diag("%s fails", e->d_name);
			}
		}
		if (d)
			closedir(d);
		tap_ok(n > 0 && bad == 0,
		       "%d inputs of %s pass the harness's "
		       "check",
		       n, path);
	}
	return tap_done();
}

/*
 * store_writer.c - a stand-in for a chat session, for the kill -9 test.
 *
 * usage: store_writer DB IDSFILE
 *
 * Appends a user message, then streams an assistant reply into the
 * database the way the session does (store_msg_begin, store_msg_update
 * with the whole text so far, store_msg_finish), and again, up to
 * STORE_WRITER_REPLIES times or until killed. The replies' text and the
 * save points are those of tests/store_kill.h: a save every
 * STORE_KILL_SAVE_EVERY chunks with the token reports since the last
 * save (store_msg_update_rep), each chunk printed on stdout ("c ID K")
 * before that save, so the test kills by progress (tests/kill_at) and the
 * checker knows what must be there. After each commit of a finished
 * message it appends "u|a ID BYTES\n" to IDSFILE and fsyncs it, so the
 * checker knows which messages must survive and how long they are.
 */
#define _POSIX_C_SOURCE 200809L
#include "store.h"
#include "store_kill.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define STORE_WRITER_REPLIES 1000
#define STORE_WRITER_PACE_MS 5 /* between chunks: only paces the output */

static void die(const char *what, const char *err)
{
	fprintf(stderr, "store_writer: %s: %s\n", what, err);
	exit(1);
}

/* Write all of P to FD. */
static void put(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			die("write", "failed");
		p += w;
		n -= (size_t)w;
	}
}

/* Add chunk K's token report (P, N: its text) to R. */
static void add_report(struct store_reports *r, int k, const char *p, size_t n)
{
	struct store_tok_report t;

	memset(&t, 0, sizeof(t));
	t.chosen = k;
	t.prob = 0.75f;
	t.raw_logprob = -0.25f;
	t.n_kept = 2;
	t.n_top = 2;
	t.top[0].id = k;
	t.top[1].id = k + STORE_KILL_ALT;
	t.top[1].logprob = -1.5f;
	if (store_reports_text(r, p, n, &t.text_off) ||
	    store_reports_text(r, "alt", 3, &t.top[1].text_off) ||
	    store_reports_push(r, &t) != 0)
		die("reports", "out of memory");
	t.text_len = (uint32_t)n;
	r->v[r->n - 1].text_len = (uint32_t)n;
	r->v[r->n - 1].top[0].text_off = t.text_off;
	r->v[r->n - 1].top[0].text_len = (uint32_t)n;
	r->v[r->n - 1].top[1].text_len = 3;
}

static void report(int fd, char kind, int64_t id, size_t len)
{
	char line[64];
	int n = snprintf(line, sizeof(line), "%c %lld %zu\n", kind,
	                 (long long)id, len);

	put(fd, line, (size_t)n);
	if (fsync(fd) != 0)
		die("ids file", "fsync failed");
}

int main(int argc, char **argv)
{
	char err[512], *text = NULL;
	struct store *st;
	struct store_conv_new cn = {.title = "writer",
	                            .model_path = "/dev/null"};
	int64_t conv, id;
	size_t len = 0, cap = 1 << 16, saved;
	struct store_reports rep = {0};
	int fd;

	if (argc != 3) {
		fprintf(stderr, "usage: store_writer DB IDSFILE\n");
		return 2;
	}
	fd = open(argv[2], O_WRONLY | O_CREAT | O_APPEND, 0600);
	if (fd < 0)
		die(argv[2], "cannot open");
	if (store_open(argv[1], 0, &st, err, sizeof(err)) != STORE_OK)
		die("open", err);
	if (store_conv_create(st, &cn, &conv, err, sizeof(err)) != STORE_OK)
		die("create", err);
	text = malloc(cap);
	if (!text)
		die("malloc", "out of memory");
	for (int q = 0; q < STORE_WRITER_REPLIES; q++) {
		char buf[64];
		int n = snprintf(buf, sizeof(buf), "question %d", q);
		struct store_msg_new m = {.conv_id = conv,
		                          .parent_id = STORE_PARENT_LEAF,
		                          .role = STORE_ROLE_USER,
		                          .content = buf,
		                          .len = (size_t)n,
		                          .finish = STORE_FINISH_STOP};
		struct store_msg_stats stats = {0};
		int chunks;

		if (store_msg_append(st, &m, &id, err, sizeof(err)))
			die("append", err);
		report(fd, 'u', id, (size_t)n);
		if (store_msg_begin(st, conv, STORE_PARENT_LEAF,
		                    STORE_ROLE_ASSISTANT, &id, err,
		                    sizeof(err)))
			die("begin", err);
		chunks = store_kill_chunks(id);
		len = 0;
		rep.n = 0;
		rep.text_len = 0;
		saved = 0;
		for (int c = 0; c < chunks; c++) {
			struct timespec d = {0,
			                     STORE_WRITER_PACE_MS * 1000000L};
			size_t at = len;

			if (len + 64 > cap)
				die("text", "too long");
			len += (size_t)store_kill_chunk(text + len, cap - len,
			                                id, c);
			add_report(&rep, c, text + at, len - at);
			n = snprintf(buf, sizeof(buf), "c %lld %d\n",
			             (long long)id, c);
			put(1, buf, (size_t)n);
			if ((c + 1) % STORE_KILL_SAVE_EVERY == 0) {
				if (store_msg_update_rep(st, id, text, len,
				                         &rep, saved, err,
				                         sizeof(err)))
					die("update", err);
				saved = rep.n;
			}
			nanosleep(&d, NULL);
		}
		stats.n_tokens = chunks;
		if (store_msg_finish_rep(st, id, text, len, STORE_FINISH_STOP,
		                         &stats, &rep, err, sizeof(err)))
			die("finish", err);
		report(fd, 'a', id, len);
	}
	store_close(st);
	store_reports_free(&rep);
	free(text);
	return 0;
}

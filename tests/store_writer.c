/*
 * store_writer.c - a stand-in for a chat session, for the kill -9 test.
 *
 * usage: store_writer DB IDSFILE
 *
 * Loops until killed (or 60 s): appends a user message, then streams an
 * assistant reply into the database the way the session does: every 5 ms
 * a chunk " t<unix ms>" is generated, every 50 ms the whole text so far is
 * saved with store_msg_update(), and the reply is finished after 20-60
 * chunks. After each commit of a finished message it appends
 * "u|a ID BYTES\n" to IDSFILE and fsyncs it, so the checker knows which
 * messages must survive and how long they are.
 */
#define _POSIX_C_SOURCE 200809L
#include "store.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHUNK_MS 5
#define SAVE_MS  50

static void die(const char *what, const char *err)
{
	fprintf(stderr, "store_writer: %s: %s\n", what, err);
	exit(1);
}

static void report(int fd, char kind, int64_t id, size_t len)
{
	char line[64];
	int n = snprintf(line, sizeof(line), "%c %lld %zu\n", kind,
	                 (long long)id, len);

	if (write(fd, line, (size_t)n) != n || fsync(fd) != 0)
		die("ids file", "write failed");
}

int main(int argc, char **argv)
{
	char err[512], *text = NULL;
	struct store *st;
	struct store_conv_new cn = {.title = "writer",
	                            .model_path = "/dev/null"};
	int64_t conv, id, start = store_now_ms();
	uint64_t rng = (uint64_t)getpid() * 0x9e3779b97f4a7c15ULL;
	size_t len = 0, cap = 1 << 16;
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
	for (int q = 0; store_now_ms() - start < 60000; q++) {
		char buf[64];
		int n = snprintf(buf, sizeof(buf), "question %d", q);
		struct store_msg_new m = {.conv_id = conv,
		                          .parent_id = STORE_PARENT_LEAF,
		                          .role = STORE_ROLE_USER,
		                          .content = buf,
		                          .len = (size_t)n,
		                          .finish = STORE_FINISH_STOP};
		struct store_msg_stats stats = {0};
		int64_t last_save;
		int chunks;

		if (store_msg_append(st, &m, &id, err, sizeof(err)))
			die("append", err);
		report(fd, 'u', id, (size_t)n);
		if (store_msg_begin(st, conv, STORE_PARENT_LEAF,
		                    STORE_ROLE_ASSISTANT, &id, err,
		                    sizeof(err)))
			die("begin", err);
		rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
		chunks = 20 + (int)((rng >> 33) % 41);
		len = 0;
		last_save = store_now_ms();
		for (int c = 0; c < chunks; c++) {
			struct timespec d = {0, CHUNK_MS * 1000000L};
			int64_t now = store_now_ms();

			if (len + 64 > cap)
				die("text", "too long");
			len += (size_t)snprintf(text + len, cap - len, " t%lld",
			                        (long long)now);
			if (now - last_save >= SAVE_MS) {
				if (store_msg_update(st, id, text, len, err,
				                     sizeof(err)))
					die("update", err);
				last_save = now;
			}
			nanosleep(&d, NULL);
		}
		stats.n_tokens = chunks;
		if (store_msg_finish(st, id, text, len, STORE_FINISH_STOP,
		                     &stats, err, sizeof(err)))
			die("finish", err);
		report(fd, 'a', id, len);
	}
	store_close(st);
	free(text);
	return 0;
}

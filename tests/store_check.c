/*
 * store_check.c - the checker of the kill -9 test (see t_store_kill.sh).
 *
 * usage: store_check DB IDSFILE OUTFILE
 *
 * Opens DB with the plain SQLite API (nothing else is trusted) and checks:
 * PRAGMA integrity_check = ok, no foreign key violations, the FTS index
 * consistent with the messages; every message listed in IDSFILE (complete
 * lines "u|a ID BYTES") present, finished, and of that length; every
 * assistant message holds the text tests/store_kill.h prescribes, whole
 * chunks of it (all of them when finished, a prefix when in progress),
 * and exactly one token report per stored chunk (decoded by
 * store_reports_decode from rows read here: chunks following each other
 * from 0, report K choosing K with the chunk's text).
 * OUTFILE is what the writer printed ("c ID K" per chunk): for the reply
 * it was writing when killed, the stored chunks S and the printed ones P
 * must satisfy S <= P and S >= the last multiple of STORE_KILL_SAVE_EVERY
 * below P (every save made before the last printed chunk survived).
 * Prints one line
 *   ok ids=N replies=R in_progress=0|1 printed=P stored=S
 * and exits 0, or prints the failure and exits 1. Finally it opens the
 * database through store_open() to prove the store accepts it again.
 */
#include "store.h"
#include "store_kill.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Report "FAIL WHAT: A (B)" and return the failure status. */
static int fail(const char *what, const char *a, long long b)
{
	printf("FAIL %s: %s (%lld)\n", what, a, b);
	return 1;
}

/* How many whole chunks of reply ID the text S (LEN bytes) is, or -1
   when it is not exactly the first chunks of that reply. */
static int whole_chunks(int64_t id, const char *s, size_t len)
{
	char chunk[64];
	size_t at = 0;
	int k;

	for (k = 0; at < len && k < store_kill_chunks(id); k++) {
		int n = store_kill_chunk(chunk, sizeof(chunk), id, k);

		if (len - at < (size_t)n || memcmp(s + at, chunk, (size_t)n))
			return -1;
		at += (size_t)n;
	}
	return at == len ? k : -1;
}

/* Whether reply ID's token reports (read with plain SQL, decoded by the
   library's pure decoder) are exactly one per chunk for its K chunks. */
static int reports_in_step(sqlite3 *db, int64_t id, int k)
{
	struct store_reports r = {0};
	sqlite3_stmt *s;
	char chunk[64], err[300];
	int ok = 1;

	sqlite3_prepare_v2(
	    db,
	    "SELECT first_pos, n_tokens, data FROM token_reports "
	    "WHERE message_id = ?1 ORDER BY first_pos",
	    -1, &s, NULL);
	sqlite3_bind_int64(s, 1, id);
	while (ok && sqlite3_step(s) == SQLITE_ROW) {
		ok =
		    sqlite3_column_int64(s, 0) == (int64_t)r.n &&
		    store_reports_decode(sqlite3_column_blob(s, 2),
		                         (size_t)sqlite3_column_bytes(s, 2), id,
		                         (size_t)sqlite3_column_int64(s, 1), &r,
		                         err, sizeof(err)) == STORE_OK;
		if (!ok)
			printf("# reports of %lld: %s\n", (long long)id, err);
	}
	sqlite3_finalize(s);
	ok = ok && r.n == (size_t)k;
	for (size_t i = 0; ok && i < r.n; i++) {
		int n = store_kill_chunk(chunk, sizeof(chunk), id, (int)i);

		ok = r.v[i].chosen == (int32_t)i && r.v[i].n_top == 2 &&
		     r.v[i].top[1].id == (int32_t)i + STORE_KILL_ALT &&
		     r.v[i].text_len == (uint32_t)n &&
		     memcmp(r.text + r.v[i].text_off, chunk, (size_t)n) == 0;
	}
	if (!ok)
		printf("# reply %lld: %zu reports for %d chunks\n",
		       (long long)id, r.n, k);
	store_reports_free(&r);
	return ok;
}

/* The last "c ID K" line of the writer's output FILE: *ID, *K (or -1). */
static int last_printed(const char *file, long long *id, int *k)
{
	FILE *f = fopen(file, "r");
	char line[128];

	*id = -1;
	*k = -1;
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		long long i;
		int c;

		if (strchr(line, '\n') &&
		    sscanf(line, "c %lld %d", &i, &c) == 2) {
			*id = i;
			*k = c;
		}
	}
	fclose(f);
	return 0;
}

int main(int argc, char **argv)
{
	sqlite3 *db;
	sqlite3_stmt *s;
	FILE *f;
	char line[128], err[512];
	long long n_ids = 0, n_replies = 0, cur_id;
	int in_progress = 0, printed = 0, stored = -1, cur_k;
	struct store *st;

	if (argc != 4) {
		fprintf(stderr, "usage: store_check DB IDSFILE OUTFILE\n");
		return 2;
	}
	if (last_printed(argv[3], &cur_id, &cur_k))
		return fail("cannot read", argv[3], 0);
	printed = cur_k + 1;
	if (sqlite3_open_v2(argv[1], &db, SQLITE_OPEN_READWRITE, NULL))
		return fail("open", argv[1], 0);
	if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &s, NULL) ||
	    sqlite3_step(s) != SQLITE_ROW ||
	    strcmp((const char *)sqlite3_column_text(s, 0), "ok") != 0)
		return fail("integrity_check", sqlite3_errmsg(db), 0);
	sqlite3_finalize(s);
	if (sqlite3_prepare_v2(db,
	                       "SELECT count(*) FROM "
	                       "pragma_foreign_key_check",
	                       -1, &s, NULL) ||
	    sqlite3_step(s) != SQLITE_ROW || sqlite3_column_int(s, 0) != 0)
		return fail("foreign keys", "violations",
		            sqlite3_column_int(s, 0));
	sqlite3_finalize(s);
	if (sqlite3_exec(db,
	                 "INSERT INTO messages_fts(messages_fts) "
	                 "VALUES ('integrity-check')",
	                 NULL, NULL, NULL))
		return fail("FTS index", sqlite3_errmsg(db), 0);

	f = fopen(argv[2], "r");
	if (!f)
		return fail("cannot read", argv[2], 0);
	sqlite3_prepare_v2(db,
	                   "SELECT length(CAST(content AS BLOB)), finish "
	                   "FROM messages WHERE id = ?1",
	                   -1, &s, NULL);
	while (fgets(line, sizeof(line), f)) {
		char kind;
		long long id, len;

		if (!strchr(line, '\n'))
			break; /* torn last line: the writer died writing it */
		if (sscanf(line, "%c %lld %lld", &kind, &id, &len) != 3)
			return fail("bad ids line", line, 0);
		sqlite3_reset(s);
		sqlite3_bind_int64(s, 1, id);
		if (sqlite3_step(s) != SQLITE_ROW)
			return fail("finished message lost", "id", id);
		if (sqlite3_column_type(s, 1) == SQLITE_NULL)
			return fail("message not finished", "id", id);
		if (sqlite3_column_int64(s, 0) != len)
			return fail("message text changed", "id", id);
		n_ids++;
	}
	fclose(f);
	sqlite3_finalize(s);

	/* every reply: whole chunks of its text, all of them when finished */
	sqlite3_prepare_v2(db,
	                   "SELECT id, CAST(content AS BLOB), finish IS NULL "
	                   "FROM messages WHERE role = 'assistant' ORDER BY id",
	                   -1, &s, NULL);
	while (sqlite3_step(s) == SQLITE_ROW) {
		int64_t id = sqlite3_column_int64(s, 0);
		const char *c = sqlite3_column_blob(s, 1);
		size_t len = (size_t)sqlite3_column_bytes(s, 1);
		int open = sqlite3_column_int(s, 2);
		int k = whole_chunks(id, c ? c : "", len);

		if (k < 0)
			return fail(
			    "reply text is not whole chunks of what was "
			    "written",
			    "id", id);
		if (!open && k != store_kill_chunks(id))
			return fail("finished reply incomplete", "id", id);
		if (!reports_in_step(db, id, k))
			return fail("token reports out of step with the text",
			            "id", id);
		if (id == cur_id) {
			in_progress = open;
			stored = k;
		}
		n_replies++;
	}
	sqlite3_finalize(s);
	sqlite3_close(db);

	/* the reply being written at the kill: no save lost, nothing more
	   stored than was written */
	if (cur_id >= 0) {
		int saved = printed - 1 - (printed - 1) % STORE_KILL_SAVE_EVERY;

		if (stored < 0)
			return fail("the reply being written is missing", "id",
			            cur_id);
		if (in_progress && (stored > printed || stored < saved)) {
			snprintf(err, sizeof(err),
			         "reply in progress holds %d chunks; %d were "
			         "printed, %d saved before the last of them",
			         stored, printed, saved);
			return fail("lost a save", err, cur_id);
		}
	}

	if (store_open(argv[1], 0, &st, err, sizeof(err)) != STORE_OK)
		return fail("store_open after the kill", err, 0);
	store_close(st);
	printf("ok ids=%lld replies=%lld in_progress=%d printed=%d "
	       "stored=%d\n",
	       n_ids, n_replies, in_progress, cur_id >= 0 ? printed : 0,
	       stored < 0 ? 0 : stored);
	return 0;
}

/*
 * store_check.c - the checker of the kill -9 test (see t_store_kill.sh).
 *
 * usage: store_check DB IDSFILE KILL_MS
 *
 * Opens DB with the plain SQLite API (nothing else is trusted) and checks:
 * PRAGMA integrity_check = ok, no foreign key violations, the FTS index
 * consistent with the messages; every message listed in IDSFILE (complete
 * lines "u|a ID BYTES") present, finished, and of that length. Then it
 * measures the text lost: KILL_MS minus the newest " t<ms>" stamp saved
 * in the newest assistant messages. Prints one line
 *   ok ids=N lost_ms=L in_progress=0|1
 * and exits 0, or prints the failure and exits 1. Finally it opens the
 * database through store_open() to prove the store accepts it again.
 */
#include "store.h"

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

/* The largest " t<digits>" stamp in S, or -1. */
static long long last_stamp(const char *s)
{
	long long best = -1;

	for (const char *p = s; (p = strstr(p, " t")); p += 2) {
		char *end;
		long long v = strtoll(p + 2, &end, 10);

		if (end > p + 2 && v > best)
			best = v;
	}
	return best;
}

int main(int argc, char **argv)
{
	sqlite3 *db;
	sqlite3_stmt *s;
	FILE *f;
	char line[128], err[512];
	long long kill_ms, stamp = -1, n_ids = 0;
	int in_progress = 0;
	struct store *st;

	if (argc != 4) {
		fprintf(stderr, "usage: store_check DB IDSFILE KILL_MS\n");
		return 2;
	}
	kill_ms = strtoll(argv[3], NULL, 10);
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

	sqlite3_prepare_v2(db,
	                   "SELECT content, finish IS NULL FROM messages "
	                   "WHERE role = 'assistant' ORDER BY id DESC LIMIT 2",
	                   -1, &s, NULL);
	for (int i = 0; sqlite3_step(s) == SQLITE_ROW; i++) {
		long long t =
		    last_stamp((const char *)sqlite3_column_text(s, 0));

		if (i == 0)
			in_progress = sqlite3_column_int(s, 1);
		if (t > stamp)
			stamp = t;
	}
	sqlite3_finalize(s);
	sqlite3_close(db);

	if (store_open(argv[1], 0, &st, err, sizeof(err)) != STORE_OK)
		return fail("store_open after the kill", err, 0);
	store_close(st);
	printf("ok ids=%lld lost_ms=%lld in_progress=%d\n", n_ids,
	       stamp < 0 ? -1 : (kill_ms > stamp ? kill_ms - stamp : 0),
	       in_progress);
	return 0;
}

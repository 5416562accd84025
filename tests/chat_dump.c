/*
 * chat_dump.c - print a parley database for the shell tests:
 *
 *   chat_dump DB
 *
 * First line: the result of PRAGMA integrity_check ("ok" when sound).
 * Then one line per message, by id: ID TAB CONV TAB ROLE TAB FINISH (or
 * "-" for a reply in progress) TAB CONTENT as hex. Opens the file
 * read-only through SQLite itself, not through store.c, so a bug there
 * cannot hide a damaged file. Exit status 0, or 1 when the file cannot
 * be read.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	sqlite3 *db;
	sqlite3_stmt *s;
	int rc;

	if (argc != 2) {
		fputs("usage: chat_dump DB\n", stderr);
		return 2;
	}
	if (sqlite3_open_v2(argv[1], &db, SQLITE_OPEN_READONLY, NULL) !=
	    SQLITE_OK) {
		fprintf(stderr, "chat_dump: %s: %s\n", argv[1],
		        sqlite3_errmsg(db));
		return 1;
	}
	sqlite3_busy_timeout(db, 5000);
	rc = sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &s, NULL);
	while (rc == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
		printf("%s\n", (const char *)sqlite3_column_text(s, 0));
	sqlite3_finalize(s);
	rc = sqlite3_prepare_v2(db,
	                        "SELECT id, conversation_id, role, "
	                        "coalesce(finish, '-'), hex(content) FROM "
	                        "messages ORDER BY id",
	                        -1, &s, NULL);
	if (rc != SQLITE_OK) {
		fprintf(stderr, "chat_dump: %s\n", sqlite3_errmsg(db));
		sqlite3_close(db);
		return 1;
	}
	while (sqlite3_step(s) == SQLITE_ROW)
		printf("%lld\t%lld\t%s\t%s\t%s\n",
		       (long long)sqlite3_column_int64(s, 0),
		       (long long)sqlite3_column_int64(s, 1),
		       (const char *)sqlite3_column_text(s, 2),
		       (const char *)sqlite3_column_text(s, 3),
		       (const char *)sqlite3_column_text(s, 4));
	sqlite3_finalize(s);
	sqlite3_close(db);
	return 0;
}

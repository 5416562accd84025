/*
 * store_util.h - a scratch conversation database for the session tests
 * (t_session, t_session_rs). Static: each test includes it once.
 */
#ifndef PARLEY_STORE_UTIL_H
#define PARLEY_STORE_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "store.h"
#include "tap.h"

/* A new database under /tmp: its path into PATH (LEN bytes), or NULL
 * (reported). */
static inline struct store *new_db(char *path, size_t len)
{
	char tmpl[] = "/tmp/t_session_XXXXXX", err[512];
	int fd = mkstemp(tmpl);
	struct store *db = NULL;

	if (fd < 0) {
		tap_ok(0, "mkstemp");
		return NULL;
	}
	close(fd);
	unlink(tmpl);
	snprintf(path, len, "%s.db", tmpl);
	if (store_open(path, 0, &db, err, sizeof(err)) != STORE_OK) {
		tap_ok(0, "store_open: %s", err);
		return NULL;
	}
	return db;
}

/* Close DB and remove its files. */
static inline void drop_db(struct store *db, const char *path)
{
	char side[700];

	store_close(db);
	unlink(path);
	snprintf(side, sizeof(side), "%s-wal", path);
	unlink(side);
	snprintf(side, sizeof(side), "%s-shm", path);
	unlink(side);
}

#endif /* PARLEY_STORE_UTIL_H */

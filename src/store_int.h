/*
 * store_int.h - what the store's source files share; not for other modules
 * (tests include it to build old schema versions).
 */
#ifndef PARLEY_STORE_INT_H
#define PARLEY_STORE_INT_H

#include "sbuf.h"
#include "store.h"

#include <sqlite3.h>
#include <stdarg.h>

struct store {
	sqlite3 *db;  /* the connection (owned) */
	char *path;   /* as given to store_open (owned) */
	bool corrupt; /* corruption was seen: refuse every write */
	int busy_ms;  /* busy timeout in use */
};

/* Append S escaped for a terminal: controls other than \n and \t shown
 * as ^X, invalid UTF-8 bytes and C1 controls as \xNN. */
void store_sb_safe(struct sbuf *b, const char *s, size_t n, bool keep_newlines);
/* Take B's text (caller frees) and its length, or NULL (B freed) after an
 * allocation failure. */
char *store_sb_take(struct sbuf *b, size_t *len);

/*
 * Report a SQLite failure RC of WHAT on ST into err, with the path and
 * SQLite's message; returns the STORE_E* code (and marks ST corrupt on
 * SQLITE_CORRUPT / SQLITE_NOTADB).
 */
int store_fail(struct store *st, int rc, const char *what, char *err,
               size_t errlen);

/* Set err to "PATH: message" and return CODE. */
int store_errf(struct store *st, int code, char *err, size_t errlen,
               const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Prepare SQL on ST; reports failures like store_fail. */
int store_prepare(struct store *st, const char *sql, sqlite3_stmt **stmt,
                  char *err, size_t errlen);

/* BEGIN IMMEDIATE / COMMIT / ROLLBACK (rollback never fails visibly). */
int store_begin(struct store *st, char *err, size_t errlen);
int store_commit(struct store *st, char *err, size_t errlen);
void store_rollback(struct store *st);

/* Refuse writes on a handle that has seen corruption. */
int store_writable(struct store *st, char *err, size_t errlen);

/* A malloc'd copy of column COL (text), or of "" when NULL; NULL on OOM.
 * *LEN (if not NULL) receives its length. */
char *store_col_text(sqlite3_stmt *s, int col, size_t *len);

/* Conversation and branch readers shared by export. */
int store_conv_read(struct store *st, int64_t id, struct store_conv *c,
                    char *err, size_t errlen);
int store_branch_read(struct store *st, int64_t conv_id, int64_t leaf_id,
                      struct store_msg **msgs, size_t *n, char *err,
                      size_t errlen);

/* Inside a transaction (store_report.c): where message MSG_ID's stored
   reports end (*END, 0 when none); write R->v[from, r->n) as the chunk at
   FROM; delete them all. */
int store_report_end(struct store *st, int64_t msg_id, size_t *end, char *err,
                     size_t errlen);
int store_report_write(struct store *st, int64_t msg_id,
                       const struct store_reports *r, size_t from, char *err,
                       size_t errlen);
int store_report_clear(struct store *st, int64_t msg_id, char *err,
                       size_t errlen);

/* Parse a role / finish name; -1 if unknown. */
int store_role_parse(const char *s);
int store_finish_parse(const char *s);

/*
 * Schema. store_schema_migrate brings DB (user_version FROM) to version
 * TO inside the caller's transaction, one step at a time.
 */
int store_schema_migrate(sqlite3 *db, int from, int to, char *err,
                         size_t errlen);

#endif /* PARLEY_STORE_INT_H */

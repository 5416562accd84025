/*
 * store.c - opening the database, errors, conversations, messages, KV.
 * See store.h for the design and the transaction rules.
 */
#define _POSIX_C_SOURCE 200809L
#include "store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define STORE_MAX_DEPTH 1000000 /* bound on parent chains (no cycles) */

/* The columns of a message row, in the order read_msg expects. */
#define MSG_COLS                                                               \
	"m.id, m.conversation_id, m.parent_id, m.role, m.content, "            \
	"m.n_tokens, m.n_prompt_tokens, m.prefill_ms, m.decode_ms, "           \
	"m.finish, m.created, m.updated, "                                     \
	"(SELECT count(*) FROM messages s WHERE s.conversation_id = "          \
	"m.conversation_id AND s.parent_id IS m.parent_id), "                  \
	"(SELECT count(*) FROM messages s WHERE s.conversation_id = "          \
	"m.conversation_id AND s.parent_id IS m.parent_id AND s.id < m.id), "  \
	"m.reasoning, m.reasoning_tokens, m.reasoning_open, m.server, "        \
	"m.server_model, m.sampling"

/* The columns of a conversation row, in the order read_conv expects. */
#define CONV_COLS                                                              \
	"c.id, c.title, c.model_path, c.model_size, c.model_fingerprint, "     \
	"c.template, c.system_prompt, c.sampling, c.created, c.updated, "      \
	"c.archived, "                                                         \
	"COALESCE((SELECT l.id FROM messages l WHERE l.id = c.leaf_id "        \
	"AND l.conversation_id = c.id), (SELECT max(l.id) FROM messages l "    \
	"WHERE l.conversation_id = c.id), 0), "                                \
	"(SELECT count(*) FROM messages n WHERE n.conversation_id = c.id)"

static const char *const role_names[] = {"system", "user", "assistant"};
static const char *const finish_names[] = {NULL, "stop", "length",
                                           "interrupted", "error"};

const char *store_role_name(enum store_role r)
{
	return (unsigned)r < 3 ? role_names[r] : "?";
}

const char *store_finish_name(enum store_finish f)
{
	return (unsigned)f < 5 ? finish_names[f] : NULL;
}

int store_role_parse(const char *s)
{
	for (int i = 0; s && i < 3; i++)
		if (strcmp(s, role_names[i]) == 0)
			return i;
	return -1;
}

int store_finish_parse(const char *s)
{
	for (int i = 1; s && i < 5; i++)
		if (strcmp(s, finish_names[i]) == 0)
			return i;
	return -1;
}

int64_t store_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Errors ------------------------------------------------------------------ */

int store_errf(struct store *st, int code, char *err, size_t errlen,
               const char *fmt, ...)
{
	va_list ap;
	int n = 0;

	if (!err || errlen == 0)
		return code;
	if (st && st->path)
		n = snprintf(err, errlen, "%s: ", st->path);
	if (n < 0 || (size_t)n >= errlen)
		return code;
	va_start(ap, fmt);
	vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return code;
}

int store_fail(struct store *st, int rc, const char *what, char *err,
               size_t errlen)
{
	int prim = rc & 0xff;

	if (prim == SQLITE_CORRUPT || prim == SQLITE_NOTADB) {
		st->corrupt = true;
		return store_errf(st, STORE_ECORRUPT, err, errlen,
		                  "%s: the database is damaged or not a "
		                  "database (%s); parley will not write to it",
		                  what, sqlite3_errstr(rc));
	}
	if (prim == SQLITE_BUSY || prim == SQLITE_LOCKED)
		return store_errf(st, STORE_EBUSY, err, errlen,
		                  "%s: the database is locked by another "
		                  "process (%s)",
		                  what, sqlite3_errmsg(st->db));
	if (prim == SQLITE_NOMEM)
		return store_errf(st, STORE_ERR, err, errlen,
		                  "%s: out of memory", what);
	return store_errf(st, STORE_ERR, err, errlen, "%s: %s", what,
	                  st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc));
}

int store_writable(struct store *st, char *err, size_t errlen)
{
	if (st->corrupt)
		return store_errf(st, STORE_ECORRUPT, err, errlen,
		                  "the database was found damaged; "
		                  "refusing to write to it");
	return STORE_OK;
}

int store_prepare(struct store *st, const char *sql, sqlite3_stmt **stmt,
                  char *err, size_t errlen)
{
	int rc = sqlite3_prepare_v2(st->db, sql, -1, stmt, NULL);

	if (rc != SQLITE_OK) {
		*stmt = NULL;
		return store_fail(st, rc, "prepare", err, errlen);
	}
	return STORE_OK;
}

/* Run one statement without results. */
static int exec1(struct store *st, const char *sql, const char *what, char *err,
                 size_t errlen)
{
	int rc = sqlite3_exec(st->db, sql, NULL, NULL, NULL);

	return rc == SQLITE_OK ? STORE_OK
	                       : store_fail(st, rc, what, err, errlen);
}

int store_begin(struct store *st, char *err, size_t errlen)
{
	int rc = store_writable(st, err, errlen);

	return rc ? rc : exec1(st, "BEGIN IMMEDIATE", "begin", err, errlen);
}

int store_commit(struct store *st, char *err, size_t errlen)
{
	int rc = exec1(st, "COMMIT", "commit", err, errlen);

	if (rc != STORE_OK)
		store_rollback(st);
	return rc;
}

void store_rollback(struct store *st)
{
	if (!sqlite3_get_autocommit(st->db))
		sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
}

char *store_col_text(sqlite3_stmt *s, int col, size_t *len)
{
	const unsigned char *t = sqlite3_column_text(s, col);
	size_t n = t ? (size_t)sqlite3_column_bytes(s, col) : 0;
	char *p = malloc(n + 1);

	if (!p)
		return NULL;
	if (n)
		memcpy(p, t, n);
	p[n] = '\0';
	if (len)
		*len = n;
	return p;
}

/* Path and open ------------------------------------------------------------ */

/* malloc'd concatenation of A and B. */
static char *cat2(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	char *p = malloc(la + lb + 1);

	if (p) {
		memcpy(p, a, la);
		memcpy(p + la, b, lb + 1);
	}
	return p;
}

int store_path_resolve_env(const char *opt, const char *parley_db,
                           const char *xdg_data_home, const char *home,
                           char **out, char *err, size_t errlen)
{
	*out = NULL;
	if (opt && *opt)
		*out = cat2(opt, "");
	else if (parley_db && *parley_db)
		*out = cat2(parley_db, "");
	else if (xdg_data_home && xdg_data_home[0] == '/')
		*out = cat2(xdg_data_home, "/parley/parley.db");
	else if (home && *home)
		*out = cat2(home, "/.local/share/parley/parley.db");
	else
		return store_errf(NULL, STORE_EINVAL, err, errlen,
		                  "no database path: set PARLEY_DB, "
		                  "XDG_DATA_HOME or HOME");
	if (!*out)
		return store_errf(NULL, STORE_ERR, err, errlen,
		                  "out of memory");
	return STORE_OK;
}

int store_path_resolve(const char *opt, char **out, char *err, size_t errlen)
{
	return store_path_resolve_env(opt, getenv("PARLEY_DB"),
	                              getenv("XDG_DATA_HOME"), getenv("HOME"),
	                              out, err, errlen);
}

/* Create the missing parent directories of PATH with mode 0700. */
static int make_parents(const char *path, char *err, size_t errlen)
{
	char *p = cat2(path, "");

	if (!p)
		return store_errf(NULL, STORE_ERR, err, errlen,
		                  "out of memory");
	for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		if (mkdir(p, 0700) != 0 && errno != EEXIST) {
			int e = errno;

			snprintf(err, errlen, "%s: cannot create directory: %s",
			         p, strerror(e));
			free(p);
			return STORE_ERR;
		}
		*s = '/';
	}
	free(p);
	return STORE_OK;
}

/*
 * Create PATH empty with mode 0600 if it does not exist (an empty file is
 * an empty SQLite database): chats are private, and SQLite would create it
 * 0644; its -wal and -shm files take the database file's mode.
 */
static int create_private(const char *path, char *err, size_t errlen)
{
	int fd;

	if (strcmp(path, ":memory:") == 0)
		return STORE_OK;
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd >= 0) {
		close(fd);
		return STORE_OK;
	}
	if (errno == EEXIST)
		return STORE_OK;
	snprintf(err, errlen, "%s: cannot create: %s", path, strerror(errno));
	return STORE_ERR;
}

/* One integer from a PRAGMA or query, or a store_fail code. */
static int query_int(struct store *st, const char *sql, int64_t *v, char *err,
                     size_t errlen)
{
	sqlite3_stmt *s;
	int rc = store_prepare(st, sql, &s, err, errlen);

	if (rc)
		return rc;
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		*v = sqlite3_column_int64(s, 0);
		rc = SQLITE_OK;
	} else if (rc == SQLITE_DONE) {
		*v = 0;
		rc = SQLITE_OK;
	}
	sqlite3_finalize(s);
	return rc == SQLITE_OK
	           ? STORE_OK
	           : store_fail(st, rc, "read the header", err, errlen);
}

/*
 * Read-only checks before anything is written: a SQLite file, parley's
 * (application_id 0 or ours; no tables without a version), not newer.
 */
static int check_header(struct store *st, int64_t *version, char *err,
                        size_t errlen)
{
	int64_t app = 0, n_tables = 0;
	int rc;

	if ((rc = query_int(st, "SELECT count(*) FROM sqlite_schema", &n_tables,
	                    err, errlen)) ||
	    (rc = query_int(st, "PRAGMA application_id", &app, err, errlen)) ||
	    (rc = query_int(st, "PRAGMA user_version", version, err, errlen)))
		return rc;
	if (app != 0 && app != STORE_APPLICATION_ID)
		return store_errf(st, STORE_ECORRUPT, err, errlen,
		                  "not a parley database (application_id "
		                  "0x%08llx); left untouched",
		                  (unsigned long long)app);
	if (*version == 0 && n_tables > 0)
		return store_errf(st, STORE_ECORRUPT, err, errlen,
		                  "not a parley database (%lld tables, no "
		                  "schema version); left untouched",
		                  (long long)n_tables);
	if (*version > STORE_SCHEMA_VERSION)
		return store_errf(st, STORE_ENEWER, err, errlen,
		                  "schema version %lld is newer than this "
		                  "parley knows (%d); upgrade parley",
		                  (long long)*version, STORE_SCHEMA_VERSION);
	if (*version < 0)
		return store_errf(st, STORE_ECORRUPT, err, errlen,
		                  "bad schema version %lld",
		                  (long long)*version);
	return STORE_OK;
}

/*
 * Switch to WAL unless already there. Changing the journal mode needs an
 * exclusive lock, and SQLite does not call the busy handler for it when
 * that could deadlock, so a concurrent opener can get SQLITE_BUSY at once:
 * retry every 10 ms up to the busy timeout.
 */
static int set_wal(struct store *st, char *err, size_t errlen)
{
	struct timespec d = {0, 10 * 1000000L};
	int64_t deadline = store_now_ms() + st->busy_ms;
	sqlite3_stmt *s;
	int rc;

	for (;;) {
		if ((rc = store_prepare(st, "PRAGMA journal_mode = WAL", &s,
		                        err, errlen)))
			return rc;
		rc = sqlite3_step(s);
		sqlite3_finalize(s);
		if (rc == SQLITE_ROW || rc == SQLITE_DONE)
			return STORE_OK;
		if ((rc & 0xff) != SQLITE_BUSY || store_now_ms() > deadline)
			return store_fail(st, rc, "set WAL mode", err, errlen);
		nanosleep(&d, NULL);
	}
}

/* Bring the schema to STORE_SCHEMA_VERSION in one transaction. */
static int migrate(struct store *st, char *err, size_t errlen)
{
	int64_t v, bad = 0;
	char msg[512];
	int rc;

	if ((rc = store_begin(st, err, errlen)))
		return rc;
	/* re-read under the write lock: another process may have migrated */
	rc = check_header(st, &v, err, errlen);
	if (rc == STORE_OK && v < STORE_SCHEMA_VERSION) {
		rc = store_schema_migrate(st->db, (int)v, STORE_SCHEMA_VERSION,
		                          msg, sizeof(msg));
		if (rc)
			store_errf(st, rc, err, errlen, "%s", msg);
		else
			rc = query_int(st,
			               "SELECT count(*) FROM "
			               "pragma_foreign_key_check",
			               &bad, err, errlen);
		if (rc == STORE_OK && bad)
			rc = store_errf(st, STORE_ERR, err, errlen,
			                "migration to version %d left %lld "
			                "broken references; not applied",
			                STORE_SCHEMA_VERSION, (long long)bad);
	}
	if (rc) {
		store_rollback(st);
		return rc;
	}
	return store_commit(st, err, errlen);
}

int store_open(const char *path, unsigned flags, struct store **out, char *err,
               size_t errlen)
{
	struct store *st;
	int64_t v;
	int rc, oflags = SQLITE_OPEN_READWRITE;
	struct stat sb;

	*out = NULL;
	if (!path || !*path)
		return store_errf(NULL, STORE_EINVAL, err, errlen,
		                  "empty database path");
	if (flags & STORE_OPEN_NOCREATE) {
		if (stat(path, &sb) != 0)
			return store_errf(NULL, STORE_ENOTFOUND, err, errlen,
			                  "%s: %s", path, strerror(errno));
	} else {
		oflags |= SQLITE_OPEN_CREATE;
		if ((rc = make_parents(path, err, errlen)) ||
		    (rc = create_private(path, err, errlen)))
			return rc;
	}
	st = calloc(1, sizeof(*st));
	if (!st || !(st->path = cat2(path, ""))) {
		free(st);
		return store_errf(NULL, STORE_ERR, err, errlen,
		                  "out of memory");
	}
	rc = sqlite3_open_v2(path, &st->db, oflags, NULL);
	if (rc != SQLITE_OK) {
		rc = store_errf(st, STORE_ERR, err, errlen, "cannot open: %s",
		                st->db ? sqlite3_errmsg(st->db)
		                       : sqlite3_errstr(rc));
		store_close(st);
		return rc;
	}
	sqlite3_extended_result_codes(st->db, 1);
	st->busy_ms = STORE_BUSY_TIMEOUT_MS;
	sqlite3_busy_timeout(st->db, st->busy_ms);
	rc = check_header(st, &v, err, errlen);
	if (rc == STORE_OK && sqlite3_db_readonly(st->db, "main") == 1)
		rc = store_errf(st, STORE_ERR, err, errlen,
		                "the file is read-only");
	if (rc == STORE_OK)
		rc = set_wal(st, err, errlen);
	if (rc == STORE_OK)
		rc = exec1(st, "PRAGMA synchronous = FULL", "set synchronous",
		           err, errlen);
	if (rc == STORE_OK && v < STORE_SCHEMA_VERSION)
		rc = migrate(st, err, errlen);
	if (rc == STORE_OK)
		rc = exec1(st, "PRAGMA foreign_keys = ON", "set foreign keys",
		           err, errlen);
	if (rc != STORE_OK) {
		store_close(st);
		return rc;
	}
	*out = st;
	return STORE_OK;
}

void store_close(struct store *st)
{
	if (!st)
		return;
	sqlite3_close_v2(st->db);
	free(st->path);
	free(st);
}

const char *store_path(const struct store *st)
{
	return st->path;
}

void store_set_busy_timeout(struct store *st, int ms)
{
	st->busy_ms = ms < 0 ? 0 : ms;
	sqlite3_busy_timeout(st->db, st->busy_ms);
}

int store_check(struct store *st, char *err, size_t errlen)
{
	sqlite3_stmt *s;
	int rc = store_prepare(st, "PRAGMA integrity_check", &s, err, errlen);
	int ok = 0;

	if (rc)
		return rc;
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		const char *t = (const char *)sqlite3_column_text(s, 0);

		ok = t && strcmp(t, "ok") == 0;
		if (!ok)
			store_errf(st, STORE_ECORRUPT, err, errlen,
			           "integrity check: %s", t ? t : "?");
		rc = SQLITE_OK;
	}
	sqlite3_finalize(s);
	if (rc != SQLITE_OK)
		return store_fail(st, rc, "integrity check", err, errlen);
	if (!ok)
		st->corrupt = true;
	return ok ? STORE_OK : STORE_ECORRUPT;
}

/* Conversations ------------------------------------------------------------ */

/* Bind a C string or NULL; NULL_AS_EMPTY stores "" for NULL. */
static int bind_str(sqlite3_stmt *s, int i, const char *t, bool null_empty)
{
	if (!t && !null_empty)
		return sqlite3_bind_null(s, i);
	return sqlite3_bind_text(s, i, t ? t : "", -1, SQLITE_STATIC);
}

/* Step a write statement to completion; STORE_OK or a failure code. */
static int step_done(struct store *st, sqlite3_stmt *s, const char *what,
                     char *err, size_t errlen)
{
	int rc = sqlite3_step(s);

	if (rc == SQLITE_ROW || rc == SQLITE_DONE)
		return STORE_OK;
	return store_fail(st, rc, what, err, errlen);
}

/* Check that JSON, if not NULL, is a JSON object. */
static int check_json_object(struct store *st, const char *json, char *err,
                             size_t errlen)
{
	sqlite3_stmt *s;
	int rc, ok = 0;

	if (!json)
		return STORE_OK;
	if ((rc = store_prepare(st,
	                        "SELECT json_valid(?1) AND "
	                        "json_type(?1) = 'object'",
	                        &s, err, errlen)))
		return rc;
	sqlite3_bind_text(s, 1, json, -1, SQLITE_STATIC);
	if (sqlite3_step(s) == SQLITE_ROW)
		ok = sqlite3_column_int(s, 0);
	sqlite3_finalize(s);
	return ok ? STORE_OK
	          : store_errf(st, STORE_EINVAL, err, errlen,
	                       "sampling options are not a JSON object");
}

int store_conv_create(struct store *st, const struct store_conv_new *c,
                      int64_t *id, char *err, size_t errlen)
{
	sqlite3_stmt *s;
	int64_t now = store_now_ms();
	int rc;

	if ((rc = store_writable(st, err, errlen)) ||
	    (rc = check_json_object(st, c->sampling_json, err, errlen)))
		return rc;
	if ((rc = store_prepare(st,
	                        "INSERT INTO conversations (title, model_path, "
	                        "model_size, model_fingerprint, template, "
	                        "system_prompt, sampling, created, updated) "
	                        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)",
	                        &s, err, errlen)))
		return rc;
	bind_str(s, 1, c->title, true);
	bind_str(s, 2, c->model_path, true);
	sqlite3_bind_int64(s, 3, c->model_size);
	bind_str(s, 4, c->model_fingerprint, true);
	bind_str(s, 5, c->template_name, true);
	bind_str(s, 6, c->system_prompt, false);
	bind_str(s, 7, c->sampling_json, false);
	sqlite3_bind_int64(s, 8, now);
	rc = step_done(st, s, "create a conversation", err, errlen);
	sqlite3_finalize(s);
	if (rc == STORE_OK)
		*id = sqlite3_last_insert_rowid(st->db);
	return rc;
}

void store_conv_clear(struct store_conv *c)
{
	if (!c)
		return;
	free(c->title);
	free(c->model_path);
	free(c->model_fingerprint);
	free(c->template_name);
	free(c->system_prompt);
	free(c->sampling_json);
	memset(c, 0, sizeof(*c));
}

void store_conv_list_free(struct store_conv *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		store_conv_clear(&v[i]);
	free(v);
}

/* Fill C from a row of CONV_COLS; -1 on OOM (C cleared). */
static int read_conv(sqlite3_stmt *s, struct store_conv *c)
{
	memset(c, 0, sizeof(*c));
	c->id = sqlite3_column_int64(s, 0);
	c->title = store_col_text(s, 1, NULL);
	c->model_path = store_col_text(s, 2, NULL);
	c->model_size = sqlite3_column_int64(s, 3);
	c->model_fingerprint = store_col_text(s, 4, NULL);
	c->template_name = store_col_text(s, 5, NULL);
	if (sqlite3_column_type(s, 6) != SQLITE_NULL &&
	    !(c->system_prompt = store_col_text(s, 6, NULL)))
		goto oom;
	if (sqlite3_column_type(s, 7) != SQLITE_NULL &&
	    !(c->sampling_json = store_col_text(s, 7, NULL)))
		goto oom;
	c->created_ms = sqlite3_column_int64(s, 8);
	c->updated_ms = sqlite3_column_int64(s, 9);
	c->archived = sqlite3_column_int(s, 10) != 0;
	c->leaf_id = sqlite3_column_int64(s, 11);
	c->n_messages = sqlite3_column_int64(s, 12);
	if (c->title && c->model_path && c->model_fingerprint &&
	    c->template_name)
		return 0;
oom:
	store_conv_clear(c);
	return -1;
}

int store_conv_list(struct store *st, unsigned flags, size_t limit,
                    struct store_conv **v, size_t *n, char *err, size_t errlen)
{
	sqlite3_stmt *s;
	struct store_conv *a = NULL;
	size_t cnt = 0, cap = 0;
	int rc;

	*v = NULL;
	*n = 0;
	if ((rc = store_prepare(st,
	                        "SELECT " CONV_COLS " FROM conversations c "
	                        "WHERE ?1 OR c.archived = 0 "
	                        "ORDER BY c.updated DESC, c.id DESC LIMIT ?2",
	                        &s, err, errlen)))
		return rc;
	sqlite3_bind_int(s, 1, (flags & STORE_LIST_ARCHIVED) != 0);
	sqlite3_bind_int64(s, 2, limit ? (int64_t)limit : -1);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (cnt == cap) {
			size_t nc = cap ? cap * 2 : 16;
			struct store_conv *p = realloc(a, nc * sizeof(*p));

			if (!p)
				break;
			a = p;
			cap = nc;
		}
		if (read_conv(s, &a[cnt]) != 0)
			break;
		cnt++;
	}
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE) {
		store_conv_list_free(a, cnt);
		return rc == SQLITE_ROW
		           ? store_errf(st, STORE_ERR, err, errlen,
		                        "list: out of memory")
		           : store_fail(st, rc, "list conversations", err,
		                        errlen);
	}
	*v = a;
	*n = cnt;
	return STORE_OK;
}

int store_conv_read(struct store *st, int64_t id, struct store_conv *c,
                    char *err, size_t errlen)
{
	sqlite3_stmt *s;
	int rc;

	memset(c, 0, sizeof(*c));
	if ((rc = store_prepare(st,
	                        "SELECT " CONV_COLS
	                        " FROM conversations c WHERE c.id = ?1",
	                        &s, err, errlen)))
		return rc;
	sqlite3_bind_int64(s, 1, id);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		rc = read_conv(s, c) == 0 ? STORE_OK
		                          : store_errf(st, STORE_ERR, err,
		                                       errlen, "out of memory");
	else if (rc == SQLITE_DONE)
		rc = store_errf(st, STORE_ENOTFOUND, err, errlen,
		                "no conversation %lld", (long long)id);
	else
		rc = store_fail(st, rc, "read a conversation", err, errlen);
	sqlite3_finalize(s);
	return rc;
}

void store_msg_clear(struct store_msg *m)
{
	if (!m)
		return;
	free(m->content);
	free(m->reasoning);
	free(m->server);
	free(m->server_model);
	free(m->sampling_json);
	memset(m, 0, sizeof(*m));
}

void store_msg_free(struct store_msg *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		free(v[i].content);
		free(v[i].reasoning);
		free(v[i].server);
		free(v[i].server_model);
		free(v[i].sampling_json);
	}
	free(v);
}

/* Fill M from a row of MSG_COLS; -1 on OOM. */
static int read_msg(sqlite3_stmt *s, struct store_msg *m)
{
	const char *t;
	int r;

	memset(m, 0, sizeof(*m));
	m->id = sqlite3_column_int64(s, 0);
	m->conv_id = sqlite3_column_int64(s, 1);
	m->parent_id = sqlite3_column_int64(s, 2);
	t = (const char *)sqlite3_column_text(s, 3);
	r = store_role_parse(t);
	m->role = r < 0 ? STORE_ROLE_USER : (enum store_role)r;
	m->content = store_col_text(s, 4, &m->len);
	m->stats.n_tokens = sqlite3_column_int64(s, 5);
	m->stats.n_prompt_tokens = sqlite3_column_int64(s, 6);
	m->stats.prefill_ms = sqlite3_column_double(s, 7);
	m->stats.decode_ms = sqlite3_column_double(s, 8);
	t = (const char *)sqlite3_column_text(s, 9);
	r = store_finish_parse(t);
	m->finish = r < 0 ? STORE_FINISH_NONE : (enum store_finish)r;
	m->created_ms = sqlite3_column_int64(s, 10);
	m->updated_ms = sqlite3_column_int64(s, 11);
	m->n_siblings = sqlite3_column_int(s, 12);
	m->sibling_index = sqlite3_column_int(s, 13);
	m->reasoning = store_col_text(s, 14, &m->reasoning_len);
	m->n_reasoning = sqlite3_column_int64(s, 15);
	m->reasoning_open = sqlite3_column_int(s, 16) != 0;
	m->server = store_col_text(s, 17, NULL);
	m->server_model = store_col_text(s, 18, NULL);
	if (sqlite3_column_type(s, 19) != SQLITE_NULL)
		m->sampling_json = store_col_text(s, 19, NULL);
	if (m->content && m->reasoning && m->server && m->server_model &&
	    (m->sampling_json || sqlite3_column_type(s, 19) == SQLITE_NULL))
		return 0;
	store_msg_clear(m); /* out of memory: nothing half read is kept */
	return -1;
}

/* Step S (finalized here) to its end, reading each row (MSG_COLS) into a
   malloc'd *MSGS of *N. */
static int read_rows(struct store *st, sqlite3_stmt *s, struct store_msg **msgs,
                     size_t *n, char *err, size_t errlen)
{
	struct store_msg *a = NULL;
	size_t cnt = 0, cap = 0;
	int rc;

	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (cnt == cap) {
			size_t nc = cap ? cap * 2 : 16;
			struct store_msg *p = realloc(a, nc * sizeof(*p));

			if (!p)
				break;
			a = p;
			cap = nc;
		}
		if (read_msg(s, &a[cnt]) != 0)
			break;
		cnt++;
	}
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE) {
		store_msg_free(a, cnt);
		return rc == SQLITE_ROW
		           ? store_errf(st, STORE_ERR, err, errlen,
		                        "messages: out of memory")
		           : store_fail(st, rc, "read messages", err, errlen);
	}
	*msgs = a;
	*n = cnt;
	return STORE_OK;
}

int store_msg_list(struct store *st, int64_t conv_id, struct store_msg **v,
                   size_t *n, char *err, size_t errlen)
{
	sqlite3_stmt *s;
	int rc;

	*v = NULL;
	*n = 0;
	if ((rc = store_prepare(st,
	                        "SELECT " MSG_COLS " FROM messages m WHERE "
	                        "m.conversation_id = ?1 ORDER BY m.id",
	                        &s, err, errlen)))
		return rc;
	sqlite3_bind_int64(s, 1, conv_id);
	return read_rows(st, s, v, n, err, errlen);
}

int store_branch_read(struct store *st, int64_t conv_id, int64_t leaf_id,
                      struct store_msg **msgs, size_t *n, char *err,
                      size_t errlen)
{
	sqlite3_stmt *s;
	int rc;

	*msgs = NULL;
	*n = 0;
	if ((rc = store_prepare(
	         st,
	         "WITH RECURSIVE br(id, depth) AS ("
	         " SELECT ?1, 0"
	         " UNION ALL"
	         " SELECT m.parent_id, br.depth + 1 FROM messages m"
	         " JOIN br ON m.id = br.id"
	         " WHERE m.parent_id IS NOT NULL AND br.depth < ?3)"
	         " SELECT " MSG_COLS " FROM br JOIN messages m"
	         " ON m.id = br.id WHERE m.conversation_id = ?2"
	         " ORDER BY br.depth DESC",
	         &s, err, errlen)))
		return rc;
	sqlite3_bind_int64(s, 1, leaf_id);
	sqlite3_bind_int64(s, 2, conv_id);
	sqlite3_bind_int(s, 3, STORE_MAX_DEPTH);
	return read_rows(st, s, msgs, n, err, errlen);
}

int store_conv_get(struct store *st, int64_t id, struct store_conv *c,
                   struct store_msg **msgs, size_t *n, char *err, size_t errlen)
{
	int rc;

	if (msgs) {
		*msgs = NULL;
		*n = 0;
	}
	/* one read transaction: the conversation and its branch agree */
	if ((rc = exec1(st, "BEGIN", "begin", err, errlen)))
		return rc;
	rc = store_conv_read(st, id, c, err, errlen);
	if (rc == STORE_OK && msgs) {
		rc =
		    store_branch_read(st, id, c->leaf_id, msgs, n, err, errlen);
		if (rc)
			store_conv_clear(c);
	}
	store_rollback(st);
	return rc;
}

/* Run an UPDATE/DELETE on conversation ID binding ?1 = id and ?2 = text
 * (or int); ENOTFOUND when no row changed. */
static int conv_write(struct store *st, const char *sql, int64_t id,
                      const char *text, bool have_text, int64_t num,
                      const char *what, char *err, size_t errlen)
{
	sqlite3_stmt *s;
	int rc;

	if ((rc = store_writable(st, err, errlen)) ||
	    (rc = store_prepare(st, sql, &s, err, errlen)))
		return rc;
	sqlite3_bind_int64(s, 1, id);
	if (have_text)
		bind_str(s, 2, text, false);
	else
		sqlite3_bind_int64(s, 2, num);
	sqlite3_bind_int64(s, 3, store_now_ms());
	rc = step_done(st, s, what, err, errlen);
	sqlite3_finalize(s);
	if (rc == STORE_OK && sqlite3_changes(st->db) == 0)
		rc = store_errf(st, STORE_ENOTFOUND, err, errlen,
		                "no conversation %lld", (long long)id);
	return rc;
}

int store_conv_rename(struct store *st, int64_t id, const char *title,
                      char *err, size_t errlen)
{
	return conv_write(st,
	                  "UPDATE conversations SET title = COALESCE(?2, ''), "
	                  "updated = ?3 WHERE id = ?1",
	                  id, title, true, 0, "rename", err, errlen);
}

int store_conv_archive(struct store *st, int64_t id, bool archived, char *err,
                       size_t errlen)
{
	return conv_write(st,
	                  "UPDATE conversations SET archived = ?2 "
	                  "WHERE id = ?1 AND ?3 IS NOT NULL",
	                  id, NULL, false, archived ? 1 : 0, "archive", err,
	                  errlen);
}

int store_conv_set_system(struct store *st, int64_t id, const char *text,
                          char *err, size_t errlen)
{
	return conv_write(st,
	                  "UPDATE conversations SET system_prompt = ?2, "
	                  "updated = ?3 WHERE id = ?1",
	                  id, text, true, 0, "set the system prompt", err,
	                  errlen);
}

int store_conv_set_sampling(struct store *st, int64_t id, const char *json,
                            char *err, size_t errlen)
{
	int rc = check_json_object(st, json, err, errlen);

	return rc ? rc
	          : conv_write(st,
	                       "UPDATE conversations SET sampling = ?2, "
	                       "updated = ?3 WHERE id = ?1",
	                       id, json, true, 0, "set sampling options", err,
	                       errlen);
}

int store_conv_delete(struct store *st, int64_t id, char *err, size_t errlen)
{
	return conv_write(st,
	                  "DELETE FROM conversations WHERE id = ?1 AND "
	                  "?2 IS NOT NULL AND ?3 IS NOT NULL",
	                  id, NULL, false, 0, "delete", err, errlen);
}

/* ID's conversation, or 0 if there is no such message. */
static int msg_conv(struct store *st, int64_t id, int64_t *conv, char *err,
                    size_t errlen)
{
	sqlite3_stmt *s;
	int rc;

	*conv = 0;
	if ((rc = store_prepare(st,
	                        "SELECT conversation_id FROM messages "
	                        "WHERE id = ?1",
	                        &s, err, errlen)))
		return rc;
	sqlite3_bind_int64(s, 1, id);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		*conv = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return rc == SQLITE_ROW || rc == SQLITE_DONE
	           ? STORE_OK
	           : store_fail(st, rc, "read a message", err, errlen);
}

int store_conv_set_leaf(struct store *st, int64_t id, int64_t msg_id, char *err,
                        size_t errlen)
{
	int64_t conv;
	int rc = msg_conv(st, msg_id, &conv, err, errlen);

	if (rc)
		return rc;
	if (conv != id)
		return store_errf(st, STORE_ENOTFOUND, err, errlen,
		                  "no message %lld in conversation %lld",
		                  (long long)msg_id, (long long)id);
	return conv_write(st,
	                  "UPDATE conversations SET leaf_id = ?2, updated = ?3 "
	                  "WHERE id = ?1",
	                  id, NULL, false, msg_id, "select a branch", err,
	                  errlen);
}

int store_conv_select(struct store *st, int64_t conv_id, int64_t msg_id,
                      int64_t *leaf, char *err, size_t errlen)
{
	sqlite3_stmt *s;
	int64_t at = msg_id, next;
	int rc;

	/* the newest child at each step; parent_id < id bounds the walk */
	if ((rc = store_prepare(st,
	                        "SELECT max(id) FROM messages WHERE "
	                        "parent_id = ?1 AND conversation_id = ?2",
	                        &s, err, errlen)))
		return rc;
	for (;;) {
		sqlite3_reset(s);
		sqlite3_bind_int64(s, 1, at);
		sqlite3_bind_int64(s, 2, conv_id);
		rc = sqlite3_step(s);
		if (rc != SQLITE_ROW) {
			sqlite3_finalize(s);
			return store_fail(st, rc, "read messages", err, errlen);
		}
		if (sqlite3_column_type(s, 0) == SQLITE_NULL)
			break;
		next = sqlite3_column_int64(s, 0);
		if (next <= at)
			break; /* parent_id < id: cannot happen */
		at = next;
	}
	sqlite3_finalize(s);
	if ((rc = store_conv_set_leaf(st, conv_id, at, err, errlen)))
		return rc;
	if (leaf)
		*leaf = at;
	return STORE_OK;
}

/* Messages ----------------------------------------------------------------- */

/*
 * Inside a transaction: resolve PARENT (LEAF/NONE/id) for a new message
 * of CONV into *OUT (0 = none), checking that conversation and parent
 * exist and belong together.
 */
static int resolve_parent(struct store *st, int64_t conv, int64_t parent,
                          int64_t *out, char *err, size_t errlen)
{
	struct store_conv c;
	int64_t pc;
	int rc = store_conv_read(st, conv, &c, err, errlen);

	if (rc)
		return rc;
	*out = parent == STORE_PARENT_LEAF ? c.leaf_id : parent;
	store_conv_clear(&c);
	if (*out < 0)
		return store_errf(st, STORE_EINVAL, err, errlen,
		                  "bad parent id %lld", (long long)parent);
	if (*out == 0)
		return STORE_OK;
	if ((rc = msg_conv(st, *out, &pc, err, errlen)))
		return rc;
	if (pc != conv)
		return store_errf(st, STORE_ENOTFOUND, err, errlen,
		                  "no message %lld in conversation %lld",
		                  (long long)*out, (long long)conv);
	return STORE_OK;
}

/* Inside a transaction: insert a message row and make it the leaf. */
static int insert_msg(struct store *st, const struct store_msg_new *m,
                      const char *finish, int64_t parent, int64_t *id,
                      char *err, size_t errlen)
{
	sqlite3_stmt *s;
	int64_t now = store_now_ms();
	int rc;

	if ((rc = store_prepare(st,
	                        "INSERT INTO messages (conversation_id, "
	                        "parent_id, role, content, n_tokens, "
	                        "n_prompt_tokens, prefill_ms, decode_ms, "
	                        "finish, created, updated) VALUES (?1, ?2, "
	                        "?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10)",
	                        &s, err, errlen)))
		return rc;
	sqlite3_bind_int64(s, 1, m->conv_id);
	if (parent)
		sqlite3_bind_int64(s, 2, parent);
	sqlite3_bind_text(s, 3, store_role_name(m->role), -1, SQLITE_STATIC);
	sqlite3_bind_text64(s, 4, m->content ? m->content : "", m->len,
	                    SQLITE_STATIC, SQLITE_UTF8);
	sqlite3_bind_int64(s, 5, m->stats.n_tokens);
	sqlite3_bind_int64(s, 6, m->stats.n_prompt_tokens);
	sqlite3_bind_double(s, 7, m->stats.prefill_ms);
	sqlite3_bind_double(s, 8, m->stats.decode_ms);
	if (finish)
		sqlite3_bind_text(s, 9, finish, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 10, now);
	rc = step_done(st, s, "add a message", err, errlen);
	sqlite3_finalize(s);
	if (rc)
		return rc;
	*id = sqlite3_last_insert_rowid(st->db);
	if ((rc = store_prepare(st,
	                        "UPDATE conversations SET leaf_id = ?2, "
	                        "updated = ?3 WHERE id = ?1",
	                        &s, err, errlen)))
		return rc;
	sqlite3_bind_int64(s, 1, m->conv_id);
	sqlite3_bind_int64(s, 2, *id);
	sqlite3_bind_int64(s, 3, now);
	rc = step_done(st, s, "update the conversation", err, errlen);
	sqlite3_finalize(s);
	return rc;
}

/* Statistics must be non-negative and finite (they are exported). */
static int check_stats(struct store *st, const struct store_msg_stats *x,
                       char *err, size_t errlen)
{
	if (x->n_tokens < 0 || x->n_prompt_tokens < 0 ||
	    !(x->prefill_ms >= 0 && isfinite(x->prefill_ms)) ||
	    !(x->decode_ms >= 0 && isfinite(x->decode_ms)))
		return store_errf(st, STORE_EINVAL, err, errlen,
		                  "message statistics must be finite and "
		                  ">= 0");
	return STORE_OK;
}

/* Shared body of append and begin. */
static int add_msg(struct store *st, const struct store_msg_new *m,
                   const char *finish, int64_t *id, char *err, size_t errlen)
{
	int64_t parent;
	int rc;

	if ((unsigned)m->role > STORE_ROLE_ASSISTANT)
		return store_errf(st, STORE_EINVAL, err, errlen, "bad role %d",
		                  (int)m->role);
	if ((rc = check_stats(st, &m->stats, err, errlen)) ||
	    (rc = store_begin(st, err, errlen)))
		return rc;
	rc = resolve_parent(st, m->conv_id, m->parent_id, &parent, err, errlen);
	if (rc == STORE_OK)
		rc = insert_msg(st, m, finish, parent, id, err, errlen);
	if (rc) {
		store_rollback(st);
		return rc;
	}
	return store_commit(st, err, errlen);
}

int store_msg_append(struct store *st, const struct store_msg_new *m,
                     int64_t *id, char *err, size_t errlen)
{
	const char *f = store_finish_name(m->finish);

	if (!f)
		return store_errf(st, STORE_EINVAL, err, errlen,
		                  "a complete message needs a finish reason");
	return add_msg(st, m, f, id, err, errlen);
}

int store_msg_begin(struct store *st, int64_t conv_id, int64_t parent_id,
                    enum store_role role, int64_t *id, char *err, size_t errlen)
{
	struct store_msg_new m = {.conv_id = conv_id,
	                          .parent_id = parent_id,
	                          .role = role,
	                          .content = "",
	                          .len = 0};

	return add_msg(st, &m, NULL, id, err, errlen);
}

int store_msg_update(struct store *st, int64_t id, const char *content,
                     size_t len, char *err, size_t errlen)
{
	return store_msg_update_rep(st, id, content, len, NULL, 0, err, errlen);
}

/* Refuse a set of more reports than a message may hold (store.h). */
static int check_rep(struct store *st, int64_t id,
                     const struct store_reports *rep, char *err, size_t errlen)
{
	if (rep && rep->n > STORE_REPORTS_MAX)
		return store_errf(st, STORE_EINVAL, err, errlen,
		                  "message %lld: %zu token reports are more "
		                  "than the %d stored per message",
		                  (long long)id, rep->n, STORE_REPORTS_MAX);
	return STORE_OK;
}

/* Inside a transaction: add REP->v[from..] to message ID's chunks, FROM
   being where the stored ones end. */
static int append_rep(struct store *st, int64_t id,
                      const struct store_reports *rep, size_t from, char *err,
                      size_t errlen)
{
	size_t end = 0;
	int rc;

	if (rep == NULL || from >= rep->n)
		return STORE_OK;
	if ((rc = store_report_end(st, id, &end, err, errlen)))
		return rc;
	if (end != from)
		return store_errf(st, STORE_EINVAL, err, errlen,
		                  "message %lld: token reports are stored up "
		                  "to position %zu, not %zu",
		                  (long long)id, end, from);
	return store_report_write(st, id, rep, from, err, errlen);
}

int store_msg_update_rep(struct store *st, int64_t id, const char *content,
                         size_t len, const struct store_reports *rep,
                         size_t from, char *err, size_t errlen)
{
	sqlite3_stmt *s;
	int rc;

	if ((rc = check_rep(st, id, rep, err, errlen)) ||
	    (rc = store_begin(st, err, errlen)))
		return rc;
	rc = store_prepare(st,
	                   "UPDATE messages SET content = ?2, "
	                   "updated = ?3 WHERE id = ?1 AND finish IS NULL",
	                   &s, err, errlen);
	if (rc == STORE_OK) {
		sqlite3_bind_int64(s, 1, id);
		sqlite3_bind_text64(s, 2, content ? content : "", len,
		                    SQLITE_STATIC, SQLITE_UTF8);
		sqlite3_bind_int64(s, 3, store_now_ms());
		rc =
		    step_done(st, s, "save the reply in progress", err, errlen);
		sqlite3_finalize(s);
	}
	if (rc == STORE_OK && sqlite3_changes(st->db) == 0)
		rc = store_errf(st, STORE_ENOTFOUND, err, errlen,
		                "no message %lld in progress", (long long)id);
	if (rc == STORE_OK)
		rc = append_rep(st, id, rep, from, err, errlen);
	if (rc) {
		store_rollback(st);
		return rc;
	}
	return store_commit(st, err, errlen);
}

int store_msg_set_reasoning(struct store *st, int64_t id, const char *text,
                            size_t len, int64_t n_tokens, bool open, char *err,
                            size_t errlen)
{
	sqlite3_stmt *s;
	int rc;

	if ((rc = store_prepare(st,
	                        "UPDATE messages SET reasoning = ?2, "
	                        "reasoning_tokens = ?3, reasoning_open = ?4 "
	                        "WHERE id = ?1 AND role = 'assistant'",
	                        &s, err, errlen)))
		return rc;
	sqlite3_bind_int64(s, 1, id);
	sqlite3_bind_text64(s, 2, text ? text : "", len, SQLITE_STATIC,
	                    SQLITE_UTF8);
	sqlite3_bind_int64(s, 3, n_tokens);
	sqlite3_bind_int(s, 4, open ? 1 : 0);
	rc = step_done(st, s, "save the reasoning", err, errlen);
	sqlite3_finalize(s);
	if (rc == STORE_OK && sqlite3_changes(st->db) == 0)
		rc = store_errf(st, STORE_ENOTFOUND, err, errlen,
		                "no assistant message %lld", (long long)id);
	return rc;
}

int store_msg_finish(struct store *st, int64_t id, const char *content,
                     size_t len, enum store_finish finish,
                     const struct store_msg_stats *stats, char *err,
                     size_t errlen)
{
	return store_msg_finish_rep(st, id, content, len, finish, stats, NULL,
	                            err, errlen);
}

int store_msg_finish_rep(struct store *st, int64_t id, const char *content,
                         size_t len, enum store_finish finish,
                         const struct store_msg_stats *stats,
                         const struct store_reports *rep, char *err,
                         size_t errlen)
{
	static const struct store_msg_stats zero;
	const char *f = store_finish_name(finish);
	sqlite3_stmt *s;
	int64_t now = store_now_ms(), conv = 0;
	int rc;

	if (!f)
		return store_errf(st, STORE_EINVAL, err, errlen,
		                  "finishing message %lld needs a reason",
		                  (long long)id);
	if (!stats)
		stats = &zero;
	if ((rc = check_stats(st, stats, err, errlen)) ||
	    (rc = check_rep(st, id, rep, err, errlen)) ||
	    (rc = store_begin(st, err, errlen)))
		return rc;
	rc = store_prepare(st,
	                   "UPDATE messages SET content = ?2, finish = ?3, "
	                   "n_tokens = ?4, n_prompt_tokens = ?5, "
	                   "prefill_ms = ?6, decode_ms = ?7, updated = ?8 "
	                   "WHERE id = ?1 AND finish IS NULL "
	                   "RETURNING conversation_id",
	                   &s, err, errlen);
	if (rc == STORE_OK) {
		sqlite3_bind_int64(s, 1, id);
		sqlite3_bind_text64(s, 2, content ? content : "", len,
		                    SQLITE_STATIC, SQLITE_UTF8);
		sqlite3_bind_text(s, 3, f, -1, SQLITE_STATIC);
		sqlite3_bind_int64(s, 4, stats->n_tokens);
		sqlite3_bind_int64(s, 5, stats->n_prompt_tokens);
		sqlite3_bind_double(s, 6, stats->prefill_ms);
		sqlite3_bind_double(s, 7, stats->decode_ms);
		sqlite3_bind_int64(s, 8, now);
		rc = sqlite3_step(s);
		if (rc == SQLITE_ROW) {
			conv = sqlite3_column_int64(s, 0);
			rc = step_done(st, s, "finish a message", err, errlen);
		} else if (rc == SQLITE_DONE) {
			rc = store_errf(st, STORE_ENOTFOUND, err, errlen,
			                "no message %lld in progress",
			                (long long)id);
		} else {
			rc =
			    store_fail(st, rc, "finish a message", err, errlen);
		}
		sqlite3_finalize(s);
	}
	if (rc == STORE_OK &&
	    (rc = store_prepare(st,
	                        "UPDATE conversations SET updated = ?2 "
	                        "WHERE id = ?1",
	                        &s, err, errlen)) == STORE_OK) {
		sqlite3_bind_int64(s, 1, conv);
		sqlite3_bind_int64(s, 2, now);
		rc = step_done(st, s, "update the conversation", err, errlen);
		sqlite3_finalize(s);
	}
	/* the chunks of the updates become one row */
	if (rc == STORE_OK && rep &&
	    (rc = store_report_clear(st, id, err, errlen)) == STORE_OK)
		rc = store_report_write(st, id, rep, 0, err, errlen);
	if (rc) {
		store_rollback(st);
		return rc;
	}
	return store_commit(st, err, errlen);
}

int store_msg_get(struct store *st, int64_t id, struct store_msg *m, char *err,
                  size_t errlen)
{
	sqlite3_stmt *s;
	int rc;

	memset(m, 0, sizeof(*m));
	if ((rc = store_prepare(
	         st, "SELECT " MSG_COLS " FROM messages m WHERE m.id = ?1", &s,
	         err, errlen)))
		return rc;
	sqlite3_bind_int64(s, 1, id);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		rc = read_msg(s, m) == 0 ? STORE_OK
		                         : store_errf(st, STORE_ERR, err,
		                                      errlen, "out of memory");
	else if (rc == SQLITE_DONE)
		rc = store_errf(st, STORE_ENOTFOUND, err, errlen,
		                "no message %lld", (long long)id);
	else
		rc = store_fail(st, rc, "read a message", err, errlen);
	sqlite3_finalize(s);
	if (rc)
		store_msg_clear(m);
	return rc;
}

/* KV-cache slot ------------------------------------------------------------ */

int store_kv_set(struct store *st, int64_t conv_id, const char *format,
                 const int32_t *tokens, size_t n_tokens, const void *state,
                 size_t state_len, char *err, size_t errlen)
{
	sqlite3_stmt *s;
	unsigned char *tb;
	int rc;

	if (n_tokens > (size_t)INT32_MAX)
		return store_errf(st, STORE_EINVAL, err, errlen,
		                  "KV state: %zu tokens is too many", n_tokens);
	tb = malloc(n_tokens * 4 + 1);
	if (!tb)
		return store_errf(st, STORE_ERR, err, errlen,
		                  "KV state: out of memory");
	for (size_t i = 0; i < n_tokens; i++) { /* little-endian int32 */
		uint32_t u = (uint32_t)tokens[i];

		tb[4 * i] = (unsigned char)u;
		tb[4 * i + 1] = (unsigned char)(u >> 8);
		tb[4 * i + 2] = (unsigned char)(u >> 16);
		tb[4 * i + 3] = (unsigned char)(u >> 24);
	}
	if ((rc = store_writable(st, err, errlen)) == STORE_OK &&
	    (rc = store_prepare(
	         st,
	         "INSERT OR REPLACE INTO kv_states "
	         "(conversation_id, format, n_tokens, tokens, "
	         "state, created) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
	         &s, err, errlen)) == STORE_OK) {
		sqlite3_bind_int64(s, 1, conv_id);
		bind_str(s, 2, format, true);
		sqlite3_bind_int64(s, 3, (int64_t)n_tokens);
		sqlite3_bind_blob64(s, 4, tb, n_tokens * 4, SQLITE_STATIC);
		if (state_len)
			sqlite3_bind_blob64(s, 5, state, state_len,
			                    SQLITE_STATIC);
		else
			sqlite3_bind_zeroblob(s, 5, 0);
		sqlite3_bind_int64(s, 6, store_now_ms());
		rc = sqlite3_step(s);
		if (rc == SQLITE_DONE)
			rc = STORE_OK;
		else if ((rc & 0xff) == SQLITE_CONSTRAINT)
			rc = store_errf(st, STORE_ENOTFOUND, err, errlen,
			                "KV state: no conversation %lld",
			                (long long)conv_id);
		else
			rc = store_fail(st, rc, "save the KV state", err,
			                errlen);
		sqlite3_finalize(s);
	}
	free(tb);
	return rc;
}

void store_kv_free(struct store_kv *kv)
{
	if (!kv)
		return;
	free(kv->format);
	free(kv->tokens);
	free(kv->state);
	memset(kv, 0, sizeof(*kv));
}

int store_kv_get(struct store *st, int64_t conv_id, struct store_kv *kv,
                 char *err, size_t errlen)
{
	sqlite3_stmt *s;
	int rc;

	memset(kv, 0, sizeof(*kv));
	if ((rc = store_prepare(st,
	                        "SELECT format, tokens, state, created "
	                        "FROM kv_states WHERE conversation_id = ?1",
	                        &s, err, errlen)))
		return rc;
	sqlite3_bind_int64(s, 1, conv_id);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		const unsigned char *tb = sqlite3_column_blob(s, 1);
		size_t tl = (size_t)sqlite3_column_bytes(s, 1);
		const void *sb = sqlite3_column_blob(s, 2);
		size_t sl = (size_t)sqlite3_column_bytes(s, 2);

		kv->format = store_col_text(s, 0, NULL);
		kv->n_tokens = tl / 4;
		kv->tokens = malloc(tl + 4);
		kv->state = malloc(sl + 1);
		kv->state_len = sl;
		kv->created_ms = sqlite3_column_int64(s, 3);
		rc = STORE_OK;
		if (!kv->format || !kv->tokens || !kv->state) {
			rc = store_errf(st, STORE_ERR, err, errlen,
			                "KV state: out of memory");
		} else {
			for (size_t i = 0; i < kv->n_tokens; i++)
				kv->tokens[i] =
				    (int32_t)((uint32_t)tb[4 * i] |
				              (uint32_t)tb[4 * i + 1] << 8 |
				              (uint32_t)tb[4 * i + 2] << 16 |
				              (uint32_t)tb[4 * i + 3] << 24);
			if (sl)
				memcpy(kv->state, sb, sl);
		}
	} else if (rc == SQLITE_DONE) {
		rc = store_errf(st, STORE_ENOTFOUND, err, errlen,
		                "no KV state saved for conversation %lld",
		                (long long)conv_id);
	} else {
		rc = store_fail(st, rc, "read the KV state", err, errlen);
	}
	sqlite3_finalize(s);
	if (rc)
		store_kv_free(kv);
	return rc;
}

int store_kv_clear(struct store *st, int64_t conv_id, char *err, size_t errlen)
{
	sqlite3_stmt *s;
	int rc;

	if ((rc = store_writable(st, err, errlen)) ||
	    (rc = store_prepare(st,
	                        "DELETE FROM kv_states WHERE "
	                        "conversation_id = ?1",
	                        &s, err, errlen)))
		return rc;
	sqlite3_bind_int64(s, 1, conv_id);
	rc = step_done(st, s, "clear the KV state", err, errlen);
	sqlite3_finalize(s);
	return rc;
}

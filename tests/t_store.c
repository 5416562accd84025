/*
 * t_store.c - the SQLite store: every API function, migrations from every
 * older version, refusal of newer/foreign/corrupt files (bytes unchanged),
 * two connections, FTS search, export/import round trip, KV slot.
 */
#define _POSIX_C_SOURCE 200809L
#include "store_int.h"
#include "tap.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

/* Wait for child PID. */
static void waitpid_compat(pid_t pid)
{
	int status;

	waitpid(pid, &status, 0);
}

static char err[1024];
static char dir[256];

/* DIR/NAME in a static buffer (one of 16 rotating). */
static const char *tpath(const char *name)
{
	static char buf[16][512];
	static int k;

	k = (k + 1) % 16;
	snprintf(buf[k], sizeof(buf[k]), "%s/%s", dir, name);
	return buf[k];
}

/* The whole file at PATH (malloc'd) and its size; NULL if unreadable. */
static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *p = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
	    fseek(f, 0, SEEK_SET) == 0 && (p = malloc((size_t)n + 1)) &&
	    fread(p, 1, (size_t)n, f) == (size_t)n) {
		p[n] = '\0';
		*len = (size_t)n;
	} else {
		free(p);
		p = NULL;
	}
	fclose(f);
	return p;
}

static int spit(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	int ok = f && fwrite(p, 1, n, f) == n;

	if (f)
		fclose(f);
	return ok;
}

/* Run SQL on a raw connection to PATH (no store checks). */
static int raw_exec(const char *path, const char *sql)
{
	sqlite3 *db;
	int rc = sqlite3_open(path, &db);

	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
	sqlite3_close(db);
	return rc;
}

/* One integer from SQL on a raw connection, or -999. */
static int64_t raw_int(const char *path, const char *sql)
{
	sqlite3 *db;
	sqlite3_stmt *s;
	int64_t v = -999;

	if (sqlite3_open(path, &db) == SQLITE_OK &&
	    sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK) {
		if (sqlite3_step(s) == SQLITE_ROW)
			v = sqlite3_column_int64(s, 0);
		sqlite3_finalize(s);
	}
	sqlite3_close(db);
	return v;
}

static int64_t add(struct store *st, int64_t conv, int64_t parent,
                   enum store_role role, const char *text)
{
	struct store_msg_new m = {.conv_id = conv,
	                          .parent_id = parent,
	                          .role = role,
	                          .content = text,
	                          .len = strlen(text),
	                          .finish = STORE_FINISH_STOP};
	int64_t id = 0;

	if (store_msg_append(st, &m, &id, err, sizeof(err)) != STORE_OK)
		tap_diag("append failed: %s", err);
	return id;
}

static void test_paths(void)
{
	char *p = NULL;

	store_path_resolve_env("/o/p.db", "/e.db", "/x", "/h", &p, err,
	                       sizeof(err));
	tap_ok(p && strcmp(p, "/o/p.db") == 0, "option wins: %s", p);
	free(p);
	store_path_resolve_env("", "/e.db", "/x", "/h", &p, err, sizeof(err));
	tap_ok(p && strcmp(p, "/e.db") == 0, "then $PARLEY_DB: %s", p);
	free(p);
	store_path_resolve_env(NULL, "", "/x", "/h", &p, err, sizeof(err));
	tap_ok(p && strcmp(p, "/x/parley/parley.db") == 0,
	       "then $XDG_DATA_HOME/parley/parley.db: %s", p);
	free(p);
	store_path_resolve_env(NULL, NULL, "rel", "/h", &p, err, sizeof(err));
	tap_ok(p && strcmp(p, "/h/.local/share/parley/parley.db") == 0,
	       "relative XDG_DATA_HOME ignored: %s", p);
	free(p);
	tap_ok(store_path_resolve_env(NULL, NULL, NULL, NULL, &p, err,
	                              sizeof(err)) == STORE_EINVAL &&
	           p == NULL,
	       "no HOME: %s", err);
}

static void test_open(void)
{
	struct store *st;
	struct stat sb;
	const char *path = tpath("a/b/parley.db");

	tap_ok(store_open(tpath("none/x.db"), STORE_OPEN_NOCREATE, &st, err,
	                  sizeof(err)) == STORE_ENOTFOUND &&
	           st == NULL,
	       "NOCREATE on a missing file: %s", err);
	tap_ok(store_open(path, 0, &st, err, sizeof(err)) == STORE_OK,
	       "open creates the file and its directories");
	tap_ok(stat(tpath("a"), &sb) == 0 && (sb.st_mode & 0777) == 0700 &&
	           stat(tpath("a/b"), &sb) == 0 && (sb.st_mode & 0777) == 0700,
	       "parent directories have mode 0700");
	tap_ok(strcmp(store_path(st), path) == 0, "store_path");
	{
		struct store_conv_new cn = {.title = "x"};
		int64_t id;
		struct stat w;

		store_conv_create(st, &cn, &id, err, sizeof(err));
		tap_ok(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600 &&
		           stat(tpath("a/b/parley.db-wal"), &w) == 0 &&
		           (w.st_mode & 0777) == 0600,
		       "database and WAL files have mode 0600");
		store_conv_delete(st, id, err, sizeof(err));
	}
	tap_ok(store_check(st, err, sizeof(err)) == STORE_OK,
	       "integrity check ok");
	store_close(st);
	tap_ok(raw_int(path, "PRAGMA user_version") == STORE_SCHEMA_VERSION &&
	           raw_int(path, "PRAGMA application_id") ==
	               STORE_APPLICATION_ID,
	       "user_version %d and application_id set", STORE_SCHEMA_VERSION);
	tap_ok(raw_int(path, "SELECT journal_mode = 'wal' FROM "
	                     "pragma_journal_mode") == 1,
	       "WAL mode is persistent");
	tap_ok(store_open(path, STORE_OPEN_NOCREATE, &st, err, sizeof(err)) ==
	           STORE_OK,
	       "reopen");
	store_close(st);
}

static void test_conversations(struct store *st)
{
	struct store_conv_new cn = {.title = "first",
	                            .model_path = "/m/smol.gguf",
	                            .model_size = 123456,
	                            .model_fingerprint = "fp1",
	                            .template_name = "chatml",
	                            .system_prompt = "Be brief.",
	                            .sampling_json = "{\"temperature\":0.7}"};
	struct store_conv c, *v;
	size_t n;
	int64_t a, b, bad;

	tap_ok(store_conv_create(st, &cn, &a, err, sizeof(err)) == STORE_OK,
	       "create conversation");
	cn.title = NULL;
	cn.system_prompt = NULL;
	cn.sampling_json = NULL;
	store_conv_create(st, &cn, &b, err, sizeof(err));
	cn.sampling_json = "[1,2]";
	tap_ok(store_conv_create(st, &cn, &bad, err, sizeof(err)) ==
	           STORE_EINVAL,
	       "sampling must be a JSON object: %s", err);
	tap_ok(store_conv_get(st, a, &c, NULL, NULL, err, sizeof(err)) ==
	               STORE_OK &&
	           strcmp(c.title, "first") == 0 &&
	           strcmp(c.model_path, "/m/smol.gguf") == 0 &&
	           c.model_size == 123456 &&
	           strcmp(c.model_fingerprint, "fp1") == 0 &&
	           strcmp(c.template_name, "chatml") == 0 &&
	           strcmp(c.system_prompt, "Be brief.") == 0 &&
	           strcmp(c.sampling_json, "{\"temperature\":0.7}") == 0 &&
	           !c.archived && c.n_messages == 0 && c.leaf_id == 0 &&
	           c.created_ms > 1600000000000LL,
	       "get returns every field");
	store_conv_clear(&c);
	store_conv_get(st, b, &c, NULL, NULL, err, sizeof(err));
	tap_ok(c.system_prompt == NULL && c.sampling_json == NULL &&
	           c.title[0] == '\0',
	       "NULL system prompt and sampling stay NULL, title \"\"");
	store_conv_clear(&c);
	tap_ok(store_conv_get(st, 999, &c, NULL, NULL, err, sizeof(err)) ==
	           STORE_ENOTFOUND,
	       "missing conversation: %s", err);

	{
		/* distinct times: wait until the store's clock has moved on
		   (observed, not assumed from a sleep) */
		struct timespec d = {0, 1000000L};
		int64_t t = store_now_ms();

		while (store_now_ms() <= t)
			nanosleep(&d, NULL);
	}
	add(st, a, STORE_PARENT_LEAF, STORE_ROLE_USER, "hello");
	tap_ok(
	    store_conv_list(st, 0, 0, &v, &n, err, sizeof(err)) == STORE_OK &&
	        n == 2 && v[0].id == a && v[0].n_messages == 1 && v[1].id == b,
	    "list: most recently updated first, with message counts");
	store_conv_list_free(v, n);
	store_conv_list(st, 0, 1, &v, &n, err, sizeof(err));
	tap_ok(n == 1, "list limit");
	store_conv_list_free(v, n);

	tap_ok(store_conv_rename(st, b, "second", err, sizeof(err)) == STORE_OK,
	       "rename");
	tap_ok(store_conv_rename(st, 999, "x", err, sizeof(err)) ==
	           STORE_ENOTFOUND,
	       "rename missing: %s", err);
	tap_ok(store_conv_archive(st, b, true, err, sizeof(err)) == STORE_OK,
	       "archive");
	store_conv_list(st, 0, 0, &v, &n, err, sizeof(err));
	tap_ok(n == 1 && v[0].id == a, "archived hidden from list");
	store_conv_list_free(v, n);
	store_conv_list(st, STORE_LIST_ARCHIVED, 0, &v, &n, err, sizeof(err));
	tap_ok(n == 2 && v[0].id == b && v[0].archived &&
	           strcmp(v[0].title, "second") == 0,
	       "STORE_LIST_ARCHIVED shows it (renamed, updated first)");
	store_conv_list_free(v, n);
	store_conv_archive(st, b, false, err, sizeof(err));
	tap_ok(store_conv_set_system(st, b, "New system.", err, sizeof(err)) ==
	               STORE_OK &&
	           store_conv_set_sampling(st, b, "{\"top_k\":5}", err,
	                                   sizeof(err)) == STORE_OK &&
	           store_conv_set_sampling(st, b, "nope", err, sizeof(err)) ==
	               STORE_EINVAL,
	       "set system prompt and sampling; bad JSON rejected");
	store_conv_get(st, b, &c, NULL, NULL, err, sizeof(err));
	tap_ok(strcmp(c.system_prompt, "New system.") == 0 &&
	           strcmp(c.sampling_json, "{\"top_k\":5}") == 0,
	       "new values read back");
	store_conv_clear(&c);
	store_conv_set_system(st, b, NULL, err, sizeof(err));
	store_conv_get(st, b, &c, NULL, NULL, err, sizeof(err));
	tap_ok(c.system_prompt == NULL, "system prompt cleared");
	store_conv_clear(&c);
}

static void test_messages(struct store *st)
{
	struct store_conv_new cn = {.title = "branches"};
	struct store_conv c;
	struct store_msg *m, one;
	struct store_msg_stats stats = {12, 30, 45.5, 250.25};
	size_t n;
	int64_t conv, other, u1, a1, u2, a2, a2b, p, bad;

	store_conv_create(st, &cn, &conv, err, sizeof(err));
	store_conv_create(st, &cn, &other, err, sizeof(err));
	u1 = add(st, conv, STORE_PARENT_LEAF, STORE_ROLE_USER, "Question one");
	a1 = add(st, conv, STORE_PARENT_LEAF, STORE_ROLE_ASSISTANT, "Answer");
	u2 = add(st, conv, STORE_PARENT_LEAF, STORE_ROLE_USER, "Question two");
	tap_ok(u1 > 0 && a1 > u1 && u2 > a1, "three appends");

	/* a streamed reply */
	tap_ok(store_msg_begin(st, conv, STORE_PARENT_LEAF,
	                       STORE_ROLE_ASSISTANT, &a2, err,
	                       sizeof(err)) == STORE_OK,
	       "begin a reply");
	store_msg_get(st, a2, &one, err, sizeof(err));
	tap_ok(one.finish == STORE_FINISH_NONE && one.len == 0 &&
	           one.parent_id == u2,
	       "in progress: empty, finish NONE, parent = leaf");
	store_msg_clear(&one);
	tap_ok(store_msg_update(st, a2, "Partial te", 10, err, sizeof(err)) ==
	           STORE_OK,
	       "update");
	store_msg_get(st, a2, &one, err, sizeof(err));
	tap_ok(strcmp(one.content, "Partial te") == 0, "update visible");
	store_msg_clear(&one);
	tap_ok(store_msg_finish(st, a2, "Partial text.", 13,
	                        STORE_FINISH_LENGTH, &stats, err,
	                        sizeof(err)) == STORE_OK,
	       "finish");
	tap_ok(store_msg_update(st, a2, "x", 1, err, sizeof(err)) ==
	           STORE_ENOTFOUND,
	       "update after finish refused: %s", err);
	tap_ok(store_msg_finish(st, a2, "x", 1, STORE_FINISH_STOP, NULL, err,
	                        sizeof(err)) == STORE_ENOTFOUND,
	       "finish twice refused");
	tap_ok(store_msg_finish(st, u1, "x", 1, STORE_FINISH_NONE, NULL, err,
	                        sizeof(err)) == STORE_EINVAL,
	       "finish NONE refused");
	{
		struct store_msg_stats inf = {1, 1, 1.0 / 0.0, 0};

		tap_ok(store_msg_finish(st, a2, "x", 1, STORE_FINISH_STOP, &inf,
		                        err, sizeof(err)) == STORE_EINVAL,
		       "non-finite timings refused: %s", err);
	}
	store_msg_get(st, a2, &one, err, sizeof(err));
	tap_ok(
	    one.finish == STORE_FINISH_LENGTH &&
	        strcmp(one.content, "Partial text.") == 0 &&
	        one.stats.n_tokens == 12 && one.stats.n_prompt_tokens == 30 &&
	        one.stats.prefill_ms == 45.5 && one.stats.decode_ms == 250.25 &&
	        one.role == STORE_ROLE_ASSISTANT && one.conv_id == conv,
	    "finished message: text, reason, counts, timings");
	store_msg_clear(&one);

	/* regenerate: a sibling of a2 under u2 */
	a2b = add(st, conv, u2, STORE_ROLE_ASSISTANT, "Second try.");
	store_conv_get(st, conv, &c, &m, &n, err, sizeof(err));
	tap_ok(n == 4 && m[0].id == u1 && m[1].id == a1 && m[2].id == u2 &&
	           m[3].id == a2b && m[3].n_siblings == 2 &&
	           m[3].sibling_index == 1 && m[0].n_siblings == 1 &&
	           c.leaf_id == a2b && c.n_messages == 5,
	       "active branch follows the newest leaf (branch 2/2)");
	store_msg_free(m, n);
	store_conv_clear(&c);
	tap_ok(store_conv_set_leaf(st, conv, a2, err, sizeof(err)) == STORE_OK,
	       "select the other branch");
	store_conv_get(st, conv, &c, &m, &n, err, sizeof(err));
	tap_ok(n == 4 && m[3].id == a2 && m[3].sibling_index == 0,
	       "branch 1/2 is active");
	store_msg_free(m, n);
	store_conv_clear(&c);
	tap_ok(store_conv_set_leaf(st, other, a2, err, sizeof(err)) ==
	           STORE_ENOTFOUND,
	       "leaf from another conversation refused");

	/* edit the first question: a new root branch */
	p = add(st, conv, STORE_PARENT_NONE, STORE_ROLE_USER, "Edited q");
	store_conv_get(st, conv, &c, &m, &n, err, sizeof(err));
	tap_ok(n == 1 && m[0].id == p && m[0].n_siblings == 2,
	       "a new root is a sibling of the first message");
	store_msg_free(m, n);
	store_conv_clear(&c);

	struct store_msg_new bm = {.conv_id = other,
	                           .parent_id = u1,
	                           .role = STORE_ROLE_USER,
	                           .content = "x",
	                           .len = 1,
	                           .finish = STORE_FINISH_STOP};
	tap_ok(store_msg_append(st, &bm, &bad, err, sizeof(err)) ==
	           STORE_ENOTFOUND,
	       "parent from another conversation refused: %s", err);
	bm.conv_id = 9999;
	bm.parent_id = STORE_PARENT_LEAF;
	tap_ok(store_msg_append(st, &bm, &bad, err, sizeof(err)) ==
	           STORE_ENOTFOUND,
	       "append to a missing conversation refused");
	bm.conv_id = other;
	bm.finish = STORE_FINISH_NONE;
	tap_ok(store_msg_append(st, &bm, &bad, err, sizeof(err)) ==
	           STORE_EINVAL,
	       "append needs a finish reason");
	tap_ok(store_msg_get(st, 99999, &one, err, sizeof(err)) ==
	           STORE_ENOTFOUND,
	       "missing message");
	/* the schema's own guard: a parent must be older than its child */
	tap_ok(sqlite3_exec(st->db,
	                    "UPDATE messages SET parent_id = id + 1 "
	                    "WHERE id = (SELECT min(id) FROM messages)",
	                    NULL, NULL, NULL) == SQLITE_CONSTRAINT_CHECK,
	       "CHECK parent_id < id rejects cycles");

	/* text with NUL bytes and UTF-8 survives */
	const char blob[] = "a\0b \xc3\xa9";
	struct store_msg_new nm = {.conv_id = other,
	                           .parent_id = STORE_PARENT_LEAF,
	                           .role = STORE_ROLE_USER,
	                           .content = blob,
	                           .len = sizeof(blob) - 1,
	                           .finish = STORE_FINISH_STOP};
	int64_t nid;
	store_msg_append(st, &nm, &nid, err, sizeof(err));
	store_msg_get(st, nid, &one, err, sizeof(err));
	tap_ok(one.len == sizeof(blob) - 1 &&
	           memcmp(one.content, blob, one.len) == 0,
	       "content with a NUL byte and UTF-8 round-trips");
	store_msg_clear(&one);

	/* delete cascades to messages, the FTS index and the KV slot */
	int32_t toks[3] = {1, 2, 3};
	store_kv_set(st, conv, "cpu", toks, 3, "abc", 3, err, sizeof(err));
	tap_ok(store_conv_delete(st, conv, err, sizeof(err)) == STORE_OK,
	       "delete");
	tap_ok(store_conv_get(st, conv, &c, NULL, NULL, err, sizeof(err)) ==
	           STORE_ENOTFOUND,
	       "deleted conversation is gone");
	{
		int64_t left = -1, kv = -1;
		sqlite3_stmt *s;

		sqlite3_prepare_v2(st->db,
		                   "SELECT (SELECT count(*) FROM messages WHERE"
		                   " conversation_id = ?1), (SELECT count(*) "
		                   "FROM kv_states WHERE conversation_id = ?1)",
		                   -1, &s, NULL);
		sqlite3_bind_int64(s, 1, conv);
		if (sqlite3_step(s) == SQLITE_ROW) {
			left = sqlite3_column_int64(s, 0);
			kv = sqlite3_column_int64(s, 1);
		}
		sqlite3_finalize(s);
		tap_ok(left == 0 && kv == 0,
		       "its messages and KV state are gone too");
	}
	tap_ok(store_conv_delete(st, conv, err, sizeof(err)) == STORE_ENOTFOUND,
	       "delete twice: %s", err);
}

static void test_search(struct store *st)
{
	struct store_conv_new cn = {.title = "search me"};
	struct store_hit *h;
	size_t n;
	int64_t conv, u, conv2;

	store_conv_create(st, &cn, &conv, err, sizeof(err));
	u = add(st, conv, STORE_PARENT_LEAF, STORE_ROLE_USER,
	        "The quick brown fox jumps over the lazy dog");
	add(st, conv, STORE_PARENT_LEAF, STORE_ROLE_ASSISTANT,
	    "Foxes are quick; café au lait");
	tap_ok(store_search(st, "quick fox", 0, 0, "<", ">", &h, &n, err,
	                    sizeof(err)) == STORE_OK &&
	           n == 1 && h[0].msg_id == u && h[0].conv_id == conv &&
	           strcmp(h[0].title, "search me") == 0 &&
	           strstr(h[0].snippet, "<quick>") &&
	           strstr(h[0].snippet, "<fox>"),
	       "plain words: all required; snippet marks the matches");
	store_hits_free(h, n);
	tap_ok(store_search(st, "cafe", 0, 0, NULL, NULL, &h, &n, err,
	                    sizeof(err)) == STORE_OK &&
	           n == 1 && strstr(h[0].snippet, "[café]"),
	       "diacritics folded: cafe finds café");
	store_hits_free(h, n);
	tap_ok(store_search(st, "\"quick\" OR ) NEAR(", 0, 0, NULL, NULL, &h,
	                    &n, err, sizeof(err)) == STORE_OK &&
	           n == 0,
	       "FTS5 syntax in plain mode is just text (no error)");
	store_hits_free(h, n);
	tap_ok(store_search(st, "quick OR nothing", STORE_SEARCH_RAW, 0, NULL,
	                    NULL, &h, &n, err, sizeof(err)) == STORE_OK &&
	           n == 2,
	       "raw FTS5 query: OR finds both");
	store_hits_free(h, n);
	tap_ok(store_search(st, "quick AND (", STORE_SEARCH_RAW, 0, NULL, NULL,
	                    &h, &n, err, sizeof(err)) == STORE_EINVAL,
	       "raw syntax error reported: %s", err);
	{
		char *txt;

		store_search(st, "quick", 0, 0, "<", ">", &h, &n, err,
		             sizeof(err));
		txt = store_fmt_hits(h, n);
		tap_ok(txt && strstr(txt, "#") && strstr(txt, "search me: ") &&
		           strstr(txt, "<quick>"),
		       "store_fmt_hits: %s", txt ? txt : "(null)");
		free(txt);
		store_hits_free(h, n);
	}
	tap_ok(store_search(st, "   ", 0, 0, NULL, NULL, &h, &n, err,
	                    sizeof(err)) == STORE_EINVAL,
	       "empty search refused");
	store_conv_create(st, &cn, &conv2, err, sizeof(err));
	add(st, conv2, STORE_PARENT_LEAF, STORE_ROLE_USER, "archived zebra");
	store_conv_archive(st, conv2, true, err, sizeof(err));
	store_search(st, "zebra", 0, 0, NULL, NULL, &h, &n, err, sizeof(err));
	tap_ok(n == 0, "archived conversations not searched by default");
	store_hits_free(h, n);
	store_search(st, "zebra", STORE_SEARCH_ARCHIVED, 0, NULL, NULL, &h, &n,
	             err, sizeof(err));
	tap_ok(n == 1, "STORE_SEARCH_ARCHIVED finds them");
	store_hits_free(h, n);
	/* the index follows updates of a streamed message */
	int64_t a;
	store_msg_begin(st, conv2, STORE_PARENT_LEAF, STORE_ROLE_ASSISTANT, &a,
	                err, sizeof(err));
	store_msg_update(st, a, "alpha", 5, err, sizeof(err));
	store_msg_finish(st, a, "omega", 5, STORE_FINISH_STOP, NULL, err,
	                 sizeof(err));
	store_search(st, "alpha", STORE_SEARCH_ARCHIVED, 0, NULL, NULL, &h, &n,
	             err, sizeof(err));
	size_t n2 = n;
	store_hits_free(h, n);
	store_search(st, "omega", STORE_SEARCH_ARCHIVED, 0, NULL, NULL, &h, &n,
	             err, sizeof(err));
	tap_ok(n2 == 0 && n == 1, "FTS follows updates (old text gone)");
	store_hits_free(h, n);
	tap_ok(sqlite3_exec(st->db,
	                    "INSERT INTO messages_fts(messages_fts) "
	                    "VALUES ('integrity-check')",
	                    NULL, NULL, NULL) == SQLITE_OK,
	       "FTS integrity-check passes");
}

static const char doc[] =
    "{\"model\":\"/m/smol.gguf\",\"messages\":["
    "{\"role\":\"system\",\"content\":\"Be brief.\"},"
    "{\"role\":\"user\",\"content\":\"Hi \\\"there\\\"\\n\xc3\xa9\"},"
    "{\"role\":\"assistant\",\"content\":\"Hello!\"},"
    "{\"role\":\"user\",\"content\":\"Bye\"},"
    "{\"role\":\"assistant\",\"content\":\"Goodb\"}],"
    "\"parley\":{\"format\":\"parley-conversation\",\"version\":1,"
    "\"title\":\"Greetings\",\"created\":1700000000000,"
    "\"updated\":1700000009000,\"archived\":false,"
    "\"model_size\":99,\"model_fingerprint\":\"abc\","
    "\"template\":\"chatml\",\"sampling\":{\"temperature\":0.5},"
    "\"messages\":[{\"system_prompt\":true},"
    "{\"finish\":\"stop\",\"n_tokens\":0,\"n_prompt_tokens\":0,"
    "\"prefill_ms\":0.0,\"decode_ms\":0.0,\"created\":1700000001000},"
    "{\"finish\":\"stop\",\"n_tokens\":3,\"n_prompt_tokens\":20,"
    "\"prefill_ms\":1.5,\"decode_ms\":30.25,\"created\":1700000002000},"
    "{\"finish\":\"stop\",\"n_tokens\":0,\"n_prompt_tokens\":0,"
    "\"prefill_ms\":0.0,\"decode_ms\":0.0,\"created\":1700000003000},"
    "{\"finish\":\"length\",\"n_tokens\":2,\"n_prompt_tokens\":31,"
    "\"prefill_ms\":2.0,\"decode_ms\":20.0,\"created\":1700000004000}]}}";

/* Conversations and messages in the database. */
static void counts(struct store *st, int64_t *nc, int64_t *nm)
{
	sqlite3_stmt *s;

	sqlite3_prepare_v2(st->db,
	                   "SELECT (SELECT count(*) FROM conversations), "
	                   "(SELECT count(*) FROM messages)",
	                   -1, &s, NULL);
	if (sqlite3_step(s) == SQLITE_ROW) {
		*nc = sqlite3_column_int64(s, 0);
		*nm = sqlite3_column_int64(s, 1);
	}
	sqlite3_finalize(s);
}

static void test_export_import(struct store *st)
{
	int64_t id, id2, nc0, nm0, nc1, nm1;
	char *out = NULL, *out2 = NULL, *md = NULL;
	size_t len, len2;
	struct store_conv c;
	struct store_msg *m;
	size_t n;

	int rc = store_import_json(st, doc, strlen(doc), &id, err, sizeof(err));

	tap_ok(rc == STORE_OK, "import a full export document: %s",
	       rc ? err : "ok");
	store_conv_get(st, id, &c, &m, &n, err, sizeof(err));
	tap_ok(n == 4 && strcmp(c.system_prompt, "Be brief.") == 0 &&
	           strcmp(c.title, "Greetings") == 0 &&
	           c.created_ms == 1700000000000LL &&
	           strcmp(m[0].content, "Hi \"there\"\n\xc3\xa9") == 0 &&
	           m[3].finish == STORE_FINISH_LENGTH &&
	           m[1].stats.decode_ms == 30.25 && m[2].parent_id == m[1].id,
	       "imported fields, escapes and parent chain");
	store_conv_clear(&c);
	store_msg_free(m, n);
	tap_ok(store_export_json(st, id, &out, &len, err, sizeof(err)) ==
	               STORE_OK &&
	           strcmp(out, doc) == 0,
	       "export reproduces the imported document byte for byte");
	if (out && strcmp(out, doc) != 0)
		tap_diag("got  %s\nwant %s", out, doc);
	store_import_json(st, out, len, &id2, err, sizeof(err));
	store_export_json(st, id2, &out2, &len2, err, sizeof(err));
	tap_ok(out2 && len2 == len && strcmp(out, out2) == 0,
	       "export -> import -> export is the identity (%zu bytes)", len);
	free(out);
	free(out2);

	tap_ok(store_export_md(st, id, &md, &len, err, sizeof(err)) ==
	               STORE_OK &&
	           strstr(md, "# Greetings\n") &&
	           strstr(md, "## System\n\nBe brief.\n") &&
	           strstr(md, "## User\n\nHi \"there\"\n") &&
	           strstr(md, "## Assistant [length]") && len == strlen(md),
	       "Markdown export");
	free(md);

	/* from a file */
	{
		const char *f = tpath("import.json"), *big = tpath("big.json");
		FILE *fp;

		spit(f, doc, strlen(doc));
		tap_ok(store_import_file(st, f, &id2, err, sizeof(err)) ==
		               STORE_OK &&
		           id2 > 0,
		       "import a file");
		spit(f, "[{\"role\":1}]", 12);
		tap_ok(store_import_file(st, f, &id2, err, sizeof(err)) ==
		               STORE_EINVAL &&
		           strstr(err, "import.json: ") &&
		           strstr(err, "messages[0]"),
		       "a bad file is named: %s", err);
		fp = fopen(big, "wb");
		if (fp) {
			fseek(fp, (long)STORE_IMPORT_MAX + 10, SEEK_SET);
			fputc(' ', fp);
			fclose(fp);
		}
		tap_ok(store_import_file(st, big, &id2, err, sizeof(err)) ==
		               STORE_EINVAL &&
		           strstr(err, "limit"),
		       "a file over the limit is refused: %s", err);
		unlink(big);
		tap_ok(store_import_file(st, tpath("none.json"), &id2, err,
		                         sizeof(err)) == STORE_ERR,
		       "a missing file: %s", err);
	}

	/* an empty conversation round-trips too */
	{
		struct store_conv_new cn = {.title = "empty"};
		int64_t e, e2;

		store_conv_create(st, &cn, &e, err, sizeof(err));
		store_export_json(st, e, &out, &len, err, sizeof(err));
		rc = store_import_json(st, out, len, &e2, err, sizeof(err));
		store_export_json(st, e2, &out2, &len2, err, sizeof(err));
		tap_ok(rc == STORE_OK && out2 && strcmp(out, out2) == 0 &&
		           strstr(out2, "\"messages\":[]") &&
		           strstr(out2, "\"title\":\"empty\""),
		       "an empty conversation exports and imports: %s",
		       rc ? err : "ok");
		free(out);
		free(out2);
	}

	/* a bare OpenAI messages array */
	const char *bare = "[{\"role\":\"system\",\"content\":\"S\"},"
	                   "{\"role\":\"user\",\"content\":\"What is 2+2?\"},"
	                   "{\"role\":\"assistant\",\"content\":\"4\"}]";
	tap_ok(store_import_json(st, bare, strlen(bare), &id, err,
	                         sizeof(err)) == STORE_OK,
	       "import a bare messages array");
	store_conv_get(st, id, &c, &m, &n, err, sizeof(err));
	tap_ok(n == 2 && strcmp(c.system_prompt, "S") == 0 &&
	           strcmp(c.title, "What is 2+2?") == 0 &&
	           m[1].finish == STORE_FINISH_STOP,
	       "first system message -> system prompt; title from the "
	       "first user message");
	store_conv_clear(&c);
	store_msg_free(m, n);

	/* malformed inputs: clear errors, nothing written */
	static const struct {
		const char *json, *what;
	} bad[] = {
	    {"{\"messages\":[", "not valid JSON"},
	    {"\"hello\"", "expected an array of messages"},
	    {"{\"msgs\":[]}", "object with a \"messages\" array"},
	    {"[]", "no messages"},
	    {"[1]", "messages[0] is integer"},
	    {"[{\"role\":\"tool\",\"content\":\"x\"}]", "messages[0].role"},
	    {"[{\"role\":7,\"content\":\"x\"}]", "messages[0].role is"},
	    {"[{\"role\":\"user\"}]", "messages[0].content"},
	    {"[{\"role\":\"user\",\"content\":\"a\"},"
	     "{\"role\":\"user\",\"content\":[1]}]",
	     "messages[1].content"},
	    {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],"
	     "\"parley\":{\"messages\":[]}}",
	     "1 messages but 0"},
	    {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],"
	     "\"parley\":{\"messages\":[{\"finish\":\"done\"}]}}",
	     "finish \"done\""},
	    {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],"
	     "\"parley\":{\"messages\":[{\"n_tokens\":\"3\"}]}}",
	     "n_tokens is text"},
	    {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],"
	     "\"parley\":{\"version\":2}}",
	     "version 2"},
	    {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],"
	     "\"parley\":{\"messages\":[{\"decode_ms\":1e999}]}}",
	     "decode_ms is not a finite number"},
	    {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],"
	     "\"parley\":{\"messages\":[{\"created\":-5}]}}",
	     "created is out of range"},
	    {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],"
	     "\"parley\":{\"model_size\":99999999999999999999999}}",
	     "model_size is"},
	    {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],"
	     "\"parley\":{\"sampling\":3}}",
	     "sampling is integer"},
	    {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},"
	     "{\"role\":\"system\",\"content\":\"b\"}],"
	     "\"parley\":{\"messages\":[{},{\"system_prompt\":true}]}}",
	     "only messages[0]"},
	};
	counts(st, &nc0, &nm0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int irc =
		    store_import_json(st, bad[i].json, strlen(bad[i].json), &id,
		                      err, sizeof(err));

		tap_ok(irc == STORE_EINVAL && strstr(err, bad[i].what) &&
		           id == 0,
		       "rejects %s: %s", bad[i].what, err);
	}
	{
		char nul[] = "[{\"role\":\"user\",\"content\":\"a\"}]\0";

		tap_ok(store_import_json(st, nul, sizeof(nul), &id, err,
		                         sizeof(err)) == STORE_EINVAL,
		       "rejects a NUL byte: %s", err);
		tap_ok(store_import_json(st, nul, STORE_IMPORT_MAX + 1u, &id,
		                         err, sizeof(err)) == STORE_EINVAL,
		       "rejects input over the size limit: %s", err);
	}
	counts(st, &nc1, &nm1);
	tap_ok(nc0 == nc1 && nm0 == nm1,
	       "failed imports left the database unchanged (%lld conv, %lld "
	       "msgs)",
	       (long long)nc1, (long long)nm1);
	tap_ok(store_export_json(st, 424242, &out, &len, err, sizeof(err)) ==
	           STORE_ENOTFOUND,
	       "export of a missing conversation: %s", err);
}

/* Every file in DIR (if it exists) fed to import: no crash, a failed
 * import leaves nothing behind, a successful one round-trips exactly.
 * MUST_PASS: each must import. */
static void replay_dir(struct store *st, const char *sub, bool must_pass)
{
	const char *top = getenv("top_srcdir");
	char path[1024], file[1300];
	int64_t nc0, nm0, nc1, nm1, id;
	int files = 0, good = 1;
	DIR *d;
	struct dirent *e;

	snprintf(path, sizeof(path), "%s/tests/data/%s", top ? top : ".", sub);
	d = opendir(path);
	if (!d) {
		tap_ok(0, "%s: the regression directory is missing", path);
		return;
	}
	while ((e = readdir(d))) {
		char *buf;
		size_t len;
		int rc;

		if (e->d_name[0] == '.')
			continue;
		snprintf(file, sizeof(file), "%s/%s", path, e->d_name);
		if (!(buf = slurp(file, &len))) {
			tap_diag("cannot read %s", file);
			good = 0;
			continue;
		}
		counts(st, &nc0, &nm0);
		rc = store_import_json(st, buf, len, &id, err, sizeof(err));
		counts(st, &nc1, &nm1);
		if (rc != STORE_OK && (nc1 != nc0 || nm1 != nm0 || id != 0))
			good = 0;
		if (must_pass && rc != STORE_OK) {
			tap_diag("%s: %s", file, err);
			good = 0;
		}
		if (rc == STORE_OK) { /* the fuzzer's property: round trip */
			char *a = NULL, *b = NULL;
			size_t la = 0, lb = 0;
			int64_t id2 = 0;

			if (store_export_json(st, id, &a, &la, err,
			                      sizeof(err)) ||
			    store_import_json(st, a, la, &id2, err,
			                      sizeof(err)) ||
			    store_export_json(st, id2, &b, &lb, err,
			                      sizeof(err)) ||
			    la != lb || memcmp(a, b, la) != 0) {
				tap_diag("%s: round trip differs: %s", file,
				         err);
				good = 0;
			}
			free(a);
			free(b);
		}
		files++;
		free(buf);
	}
	closedir(d);
	/* a replay of nothing proves nothing: the directory holds inputs */
	tap_ok(good && files > 0, "replayed %d files of %s", files, sub);
}

static void test_kv(struct store *st)
{
	struct store_conv_new cn = {.title = "kv"};
	struct store_kv kv;
	int64_t conv;
	size_t big = 8u << 20;
	int32_t toks[5] = {0, -1, 49151, 7, 2147483647};
	unsigned char *state = malloc(big);

	for (size_t i = 0; i < big; i++)
		state[i] = (unsigned char)(i * 131 + (i >> 9));
	store_conv_create(st, &cn, &conv, err, sizeof(err));
	tap_ok(store_kv_get(st, conv, &kv, err, sizeof(err)) == STORE_ENOTFOUND,
	       "no KV state yet: %s", err);
	tap_ok(store_kv_set(st, conv, "cpu/f32/v1", toks, 5, state, big, err,
	                    sizeof(err)) == STORE_OK,
	       "save 8 MiB of KV state");
	tap_ok(store_kv_get(st, conv, &kv, err, sizeof(err)) == STORE_OK &&
	           kv.n_tokens == 5 &&
	           memcmp(kv.tokens, toks, sizeof(toks)) == 0 &&
	           kv.state_len == big && memcmp(kv.state, state, big) == 0 &&
	           strcmp(kv.format, "cpu/f32/v1") == 0,
	       "read back: tokens, bytes and format identical");
	store_kv_free(&kv);
	store_kv_set(st, conv, "x", toks, 2, "ab", 2, err, sizeof(err));
	store_kv_get(st, conv, &kv, err, sizeof(err));
	tap_ok(kv.n_tokens == 2 && kv.state_len == 2, "set replaces");
	store_kv_free(&kv);
	tap_ok(store_kv_clear(st, conv, err, sizeof(err)) == STORE_OK &&
	           store_kv_get(st, conv, &kv, err, sizeof(err)) ==
	               STORE_ENOTFOUND,
	       "clear");
	tap_ok(store_kv_set(st, 777777, "x", toks, 1, "a", 1, err,
	                    sizeof(err)) == STORE_ENOTFOUND,
	       "KV for a missing conversation: %s", err);
	free(state);
}

static void test_fmt(struct store *st)
{
	struct store_conv_new cn = {.title = "evil \x1b]0;pwned\x07 title",
	                            .model_path = "/m.gguf"};
	struct store_conv *v, c;
	struct store_msg *m;
	size_t n;
	int64_t conv;
	char *s;

	store_conv_create(st, &cn, &conv, err, sizeof(err));
	add(st, conv, STORE_PARENT_LEAF, STORE_ROLE_USER,
	    "line1\nline2\x1b[2J");
	store_conv_list(st, 0, 0, &v, &n, err, sizeof(err));
	s = store_fmt_list(v, n, store_now_ms(), 80);
	tap_ok(s && strstr(s, "evil ]0;pwned title") && !strchr(s, 0x1b) &&
	           !strchr(s, 0x07) && strstr(s, "just now") &&
	           strstr(s, "TITLE"),
	       "list: control characters folded away, relative time");
	free(s);
	store_conv_list_free(v, n);
	store_conv_get(st, conv, &c, &m, &n, err, sizeof(err));
	s = store_fmt_show(&c, m, n);
	tap_ok(s && strstr(s, "line1\nline2^[[2J") && !strchr(s, 0x1b),
	       "show keeps newlines, escapes ESC");
	free(s);
	store_conv_clear(&c);
	store_msg_free(m, n);
	s = store_fmt_title("  Héllo   wörld\n\tand more  ", 28, 11);
	tap_ok(s && strcmp(s, "Héllo wörld...") == 0,
	       "title: folded whitespace, cut at 11 chars: \"%s\"", s);
	free(s);
	s = store_fmt_title("short", 5, 60);
	tap_ok(s && strcmp(s, "short") == 0, "title: short text unchanged");
	free(s);
}

static void test_fingerprint(void)
{
	char a[STORE_FP_LEN], b[STORE_FP_LEN], c[STORE_FP_LEN];
	const char *p = tpath("model.bin");
	static unsigned char data[300000];
	int64_t size = 0;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)(i * 2654435761u >> 13);
	spit(p, data, sizeof(data));
	store_model_fingerprint(p, a, sizeof(a), &size, err, sizeof(err));
	store_model_fingerprint(p, b, sizeof(b), NULL, err, sizeof(err));
	tap_ok(strncmp(a, "fnv1a64:", 8) == 0 && strlen(a) == 24 &&
	           strcmp(a, b) == 0 && size == (int64_t)sizeof(data),
	       "fingerprint %s is stable, size %lld", a, (long long)size);
	data[100] ^= 1; /* header */
	spit(p, data, sizeof(data));
	store_model_fingerprint(p, b, sizeof(b), NULL, err, sizeof(err));
	data[100] ^= 1;
	data[sizeof(data) - 5] ^= 1; /* tail */
	spit(p, data, sizeof(data));
	store_model_fingerprint(p, c, sizeof(c), NULL, err, sizeof(err));
	tap_ok(strcmp(a, b) != 0 && strcmp(a, c) != 0 && strcmp(b, c) != 0,
	       "a changed header or tail byte changes it");
	spit(p, data, 10); /* smaller than one span */
	tap_ok(store_model_fingerprint(p, c, sizeof(c), &size, err,
	                               sizeof(err)) == STORE_OK &&
	           size == 10,
	       "small file: %s", c);
	tap_ok(store_model_fingerprint(tpath("nope.bin"), c, sizeof(c), NULL,
	                               err, sizeof(err)) == STORE_ERR &&
	           strstr(err, "nope.bin"),
	       "missing file: %s", err);
}

/* Migrations ----------------------------------------------------------------
 */

static void check_v1_data(const char *path, const char *what)
{
	struct store *st;
	struct store_conv c;
	struct store_msg *m;
	struct store_hit *h;
	size_t n;

	int rc = store_open(path, 0, &st, err, sizeof(err));

	tap_ok(rc == STORE_OK, "%s: opens and migrates: %s", what,
	       rc ? err : "ok");
	if (!st)
		return;
	store_conv_get(st, 1, &c, &m, &n, err, sizeof(err));
	tap_ok(n == 4 && strcmp(c.title, "Capitals") == 0 &&
	           strcmp(c.model_path, "/models/smol.gguf") == 0 &&
	           strcmp(c.system_prompt, "You are terse.") == 0 &&
	           m[0].id == 1 && m[1].id == 3 && m[2].id == 4 &&
	           m[3].id == 6 && m[0].parent_id == 0 && m[1].parent_id == 1 &&
	           m[3].parent_id == 4 && strcmp(m[3].content, "Rome.") == 0 &&
	           m[3].finish == STORE_FINISH_STOP &&
	           m[2].created_ms == 1700000003000LL &&
	           c.updated_ms == 1700000005000LL,
	       "%s: conversation 1 intact, linked in order", what);
	store_conv_clear(&c);
	store_msg_free(m, n);
	store_conv_get(st, 2, &c, &m, &n, err, sizeof(err));
	tap_ok(n == 2 && m[1].parent_id == 2 && c.system_prompt == NULL &&
	           strcmp(c.title, "Zürich trip") == 0,
	       "%s: conversation 2 intact (interleaved ids)", what);
	store_conv_clear(&c);
	store_msg_free(m, n);
	store_search(st, "lake", 0, 0, NULL, NULL, &h, &n, err, sizeof(err));
	tap_ok(n == 1 && h[0].msg_id == 5, "%s: old messages are indexed",
	       what);
	store_hits_free(h, n);
	tap_ok(store_check(st, err, sizeof(err)) == STORE_OK &&
	           raw_int(path, "SELECT count(*) FROM "
	                         "pragma_foreign_key_check") == 0,
	       "%s: integrity and foreign keys ok", what);
	store_close(st);
	tap_ok(raw_int(path, "PRAGMA user_version") == STORE_SCHEMA_VERSION,
	       "%s: now at version %d", what, STORE_SCHEMA_VERSION);
}

static void test_migrations(void)
{
	const char *p0 = tpath("v0.db"), *p1 = tpath("v1-fixture.db");
	const char *p1b = tpath("v1-steps.db");
	char *sql, path[1024];
	const char *srcdir = getenv("top_srcdir");
	size_t len;
	struct store *st;
	sqlite3 *db;

	if (!srcdir)
		srcdir = getenv("srcdir");
	/* v0: an empty file */
	spit(p0, "", 0);
	tap_ok(store_open(p0, 0, &st, err, sizeof(err)) == STORE_OK,
	       "v0 (empty file) migrates");
	store_close(st);
	tap_ok(raw_int(p0, "PRAGMA user_version") == STORE_SCHEMA_VERSION,
	       "v0 -> %d", STORE_SCHEMA_VERSION);

	/* v1 from the frozen fixture */
	snprintf(path, sizeof(path), "%s/tests/data/store/v1.sql",
	         srcdir ? srcdir : ".");
	sql = slurp(path, &len);
	if (!sql) {
		tap_ok(0, "read %s", path);
	} else {
		tap_ok(raw_exec(p1, sql) == SQLITE_OK &&
		           raw_int(p1, "PRAGMA user_version") == 1,
		       "v1 fixture loaded");
		check_v1_data(p1, "v1 fixture");
		free(sql);
	}

	/* v1 made by the program's own first migration step */
	sqlite3_open(p1b, &db);
	tap_ok(store_schema_migrate(db, 0, 1, err, sizeof(err)) == STORE_OK,
	       "schema step 0 -> 1");
	sqlite3_exec(
	    db,
	    "INSERT INTO conversations VALUES (1, 'Capitals', "
	    "'/models/smol.gguf', 'You are terse.', 1700000000000, "
	    "1700000005000);"
	    "INSERT INTO conversations VALUES (2, 'Zürich trip', "
	    "'/models/smol.gguf', NULL, 1700000100000, 1700000200000);"
	    "INSERT INTO messages VALUES (1, 1, 'user', 'What is the "
	    "capital of France?', 1700000001000);"
	    "INSERT INTO messages VALUES (2, 2, 'user', 'Plan a day', "
	    "1700000101000);"
	    "INSERT INTO messages VALUES (3, 1, 'assistant', 'Paris.', "
	    "1700000002000);"
	    "INSERT INTO messages VALUES (4, 1, 'user', 'And Italy?', "
	    "1700000003000);"
	    "INSERT INTO messages VALUES (5, 2, 'assistant', 'The "
	    "lake.', 1700000102000);"
	    "INSERT INTO messages VALUES (6, 1, 'assistant', 'Rome.', "
	    "1700000004000);",
	    NULL, NULL, NULL);
	sqlite3_close(db);
	check_v1_data(p1b, "v1 by step 1");

	/* a migration that fails midway leaves the old version */
	tap_ok(raw_exec(tpath("v1-bad.db"),
	                "PRAGMA application_id = 1349676153;"
	                "PRAGMA user_version = 1;"
	                "CREATE TABLE conversations (id INTEGER PRIMARY KEY);"
	                "CREATE TABLE messages (id INTEGER PRIMARY KEY);") ==
	           SQLITE_OK,
	       "a damaged v1 schema");
	tap_ok(store_open(tpath("v1-bad.db"), 0, &st, err, sizeof(err)) ==
	               STORE_ERR &&
	           raw_int(tpath("v1-bad.db"), "PRAGMA user_version") == 1 &&
	           raw_int(tpath("v1-bad.db"),
	                   "SELECT count(*) FROM sqlite_schema") == 2,
	       "failed migration rolled back: %s", err);
}

/* Refusals: newer, foreign, corrupt; the file's bytes never change. */
static void test_refusals(void)
{
	const char *pn = tpath("newer.db"), *pf = tpath("foreign.db");
	const char *pa = tpath("otherapp.db"), *pg = tpath("garbage.db");
	const char *pc = tpath("corrupt.db");
	struct store *st;
	char *before, *after, garbage[8192];
	size_t lb, la;

	/* newer */
	store_open(pn, 0, &st, err, sizeof(err));
	store_close(st);
	char newer[64], newer_v[16];

	snprintf(newer, sizeof(newer), "PRAGMA user_version = %d",
	         STORE_SCHEMA_VERSION + 1);
	snprintf(newer_v, sizeof(newer_v), "%d", STORE_SCHEMA_VERSION + 1);
	raw_exec(pn, newer);
	before = slurp(pn, &lb);
	tap_ok(store_open(pn, 0, &st, err, sizeof(err)) == STORE_ENEWER &&
	           st == NULL && strstr(err, pn) && strstr(err, newer_v),
	       "newer version refused: %s", err);
	after = slurp(pn, &la);
	tap_ok(before && after && la == lb && memcmp(before, after, la) == 0,
	       "newer file unchanged (%zu bytes)", la);
	free(before);
	free(after);

	/* another program's database */
	raw_exec(pf, "CREATE TABLE t(x); INSERT INTO t VALUES (1);");
	before = slurp(pf, &lb);
	tap_ok(store_open(pf, 0, &st, err, sizeof(err)) == STORE_ECORRUPT,
	       "unversioned database with tables refused: %s", err);
	after = slurp(pf, &la);
	tap_ok(la == lb && memcmp(before, after, la) == 0, "file unchanged");
	free(before);
	free(after);
	raw_exec(pa, "PRAGMA application_id = 42;");
	tap_ok(store_open(pa, 0, &st, err, sizeof(err)) == STORE_ECORRUPT &&
	           strstr(err, "application_id"),
	       "foreign application_id refused: %s", err);

	/* not a database at all */
	for (size_t i = 0; i < sizeof(garbage); i++)
		garbage[i] = (char)(i * 7 + 3);
	spit(pg, garbage, sizeof(garbage));
	tap_ok(store_open(pg, 0, &st, err, sizeof(err)) == STORE_ECORRUPT &&
	           strstr(err, pg),
	       "garbage refused: %s", err);
	after = slurp(pg, &la);
	tap_ok(la == sizeof(garbage) && memcmp(after, garbage, la) == 0,
	       "garbage file unchanged");
	free(after);

	/* a real database with its later pages overwritten (a copy) */
	{
		struct store_conv_new cn = {.title = "to be damaged"};
		int64_t conv;
		struct store_conv c;
		struct store_msg *m;
		size_t n;
		int rc;

		store_open(pc, 0, &st, err, sizeof(err));
		/* durability is not under test here (t_store_kill.sh) */
		sqlite3_exec(st->db, "PRAGMA synchronous = OFF", NULL, NULL,
		             NULL);
		store_conv_create(st, &cn, &conv, err, sizeof(err));
		for (int i = 0; i < 300; i++)
			add(st, conv, STORE_PARENT_LEAF, STORE_ROLE_USER,
			    "some text to fill a few pages of the file ....");
		store_close(st);
		before = slurp(pc, &lb);
		memcpy(before + 4096, garbage, sizeof(garbage));
		memcpy(before + lb - 8192, garbage, sizeof(garbage));
		spit(pc, before, lb);
		rc = store_open(pc, 0, &st, err, sizeof(err));
		if (rc == STORE_OK) {
			rc = store_conv_get(st, conv, &c, &m, &n, err,
			                    sizeof(err));
			if (rc == STORE_OK) {
				store_conv_clear(&c);
				store_msg_free(m, n);
				rc = store_check(st, err, sizeof(err));
			}
			tap_ok(rc == STORE_ECORRUPT, "damage found on use: %s",
			       err);
			tap_ok(add(st, conv, STORE_PARENT_LEAF, STORE_ROLE_USER,
			           "x") == 0 &&
			           strstr(err, "refusing"),
			       "then writes are refused: %s", err);
			store_close(st);
		} else {
			tap_ok(rc == STORE_ECORRUPT, "damage found on open: %s",
			       err);
			/* no handle, so no write can be tried: the refusal
			   must name the file and hand out nothing */
			tap_ok(st == NULL && strstr(err, pc),
			       "no handle returned, the error names the file");
		}
		after = slurp(pc, &la);
		tap_ok(la == lb && memcmp(before, after, la) == 0,
		       "damaged file unchanged (%zu bytes)", la);
		free(before);
		free(after);
	}
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void test_two_connections(void)
{
	const char *p = tpath("two.db");
	struct store *a, *b;
	struct store_conv_new cn = {.title = "shared"};
	struct store_conv *v;
	size_t n;
	int64_t conv, id = 0;
	sqlite3 *lock;
	double t0, t1;
	int rc;

	store_open(p, 0, &a, err, sizeof(err));
	tap_ok(store_open(p, 0, &b, err, sizeof(err)) == STORE_OK,
	       "second connection to the same file");
	store_conv_create(a, &cn, &conv, err, sizeof(err));
	add(a, conv, STORE_PARENT_LEAF, STORE_ROLE_USER, "from a");
	add(b, conv, STORE_PARENT_LEAF, STORE_ROLE_ASSISTANT, "from b");
	store_conv_list(a, 0, 0, &v, &n, err, sizeof(err));
	tap_ok(n == 1 && v[0].n_messages == 2,
	       "each sees the other's committed messages");
	store_conv_list_free(v, n);

	/* a third process holds the write lock for 300 ms */
	sqlite3_open(p, &lock);
	sqlite3_exec(lock, "BEGIN IMMEDIATE", NULL, NULL, NULL);
	store_set_busy_timeout(b, 100);
	t0 = now_s();
	id = add(b, conv, STORE_PARENT_LEAF, STORE_ROLE_USER, "blocked");
	t1 = now_s();
	/* a lower bound only: a wait cannot be shorter than the timeout,
	   whatever the machine's speed; load can only lengthen it (proves
	   the timeout is used, not an immediate "locked") */
	tap_ok(id == 0 && strstr(err, "locked") && t1 - t0 >= 0.09,
	       "busy: waited %.0f ms, then: %s", (t1 - t0) * 1e3, err);
	store_conv_list(b, 0, 0, &v, &n, err, sizeof(err));
	tap_ok(n == 1, "reads are not blocked by the writer");
	store_conv_list_free(v, n);
	sqlite3_exec(lock, "COMMIT", NULL, NULL, NULL);
	/* 60 s: a hang guard, not a speed bound */
	store_set_busy_timeout(b, 60000);
	/* A child process takes the write lock, says so through a pipe,
	 * holds it for 300 ms and commits: b's write, started once the lock
	 * is known to be held, must wait for it and then succeed. No sleep
	 * decides the order, so a loaded machine cannot make this flaky. */
	int sync[2];
	char byte = 0;

	if (pipe(sync) != 0)
		sync[0] = sync[1] = -1;
	pid_t pid = fork();
	if (pid == 0) {
		sqlite3 *l2;
		struct timespec d = {0, 300 * 1000000L};

		close(sync[0]);
		sqlite3_open(p, &l2);
		sqlite3_busy_timeout(l2, 60000);
		sqlite3_exec(l2, "BEGIN IMMEDIATE", NULL, NULL, NULL);
		if (write(sync[1], "L", 1) != 1)
			_exit(1);
		nanosleep(&d, NULL);
		sqlite3_exec(l2, "COMMIT", NULL, NULL, NULL);
		sqlite3_close(l2);
		_exit(0);
	}
	close(sync[1]);
	if (read(sync[0], &byte, 1) != 1)
		byte = 0;
	close(sync[0]);
	t0 = now_s();
	rc = store_conv_rename(b, conv, "renamed while locked", err,
	                       sizeof(err));
	t1 = now_s();
	waitpid_compat(pid);
	tap_ok(byte == 'L' && rc == STORE_OK,
	       "busy_timeout: a write started while another process held the "
	       "lock waited %.0f ms and succeeded",
	       (t1 - t0) * 1e3);
	sqlite3_close(lock);
	store_close(a);
	store_close(b);
}

/* Four processes create the same new database at once and write to it. */
static void test_many_processes(void)
{
	const char *p = tpath("race.db");
	int go[2], ok = 1;
	pid_t pids[4];
	struct store *st;
	struct store_conv *v;
	size_t n;
	int64_t total = 0;

	if (pipe(go) != 0) {
		tap_ok(0, "pipe");
		return;
	}
	for (int k = 0; k < 4; k++) {
		pids[k] = fork();
		if (pids[k] == 0) {
			struct store *cs;
			struct store_conv_new cn = {.title = "racer"};
			int64_t conv;
			char c;

			close(go[1]);
			if (read(go[0], &c, 1) < 0) /* wait for the start */
				_exit(3);
			if (store_open(p, 0, &cs, err, sizeof(err)) ||
			    store_conv_create(cs, &cn, &conv, err,
			                      sizeof(err))) {
				tap_diag("process %d: %s", k, err);
				_exit(1);
			}
			for (int i = 0; i < 20; i++)
				if (add(cs, conv, STORE_PARENT_LEAF,
				        STORE_ROLE_USER, "concurrent") == 0)
					_exit(2); /* add() printed why */
			store_close(cs);
			_exit(0);
		}
	}
	close(go[0]);
	close(go[1]); /* EOF releases all four at once */
	for (int k = 0; k < 4; k++) {
		int status = -1;

		waitpid(pids[k], &status, 0);
		ok &= WIFEXITED(status) && WEXITSTATUS(status) == 0;
	}
	tap_ok(ok, "4 processes created and wrote one new database at once");
	if (store_open(p, 0, &st, err, sizeof(err)) != STORE_OK) {
		tap_ok(0, "reopen: %s", err);
		return;
	}
	store_conv_list(st, 0, 0, &v, &n, err, sizeof(err));
	for (size_t i = 0; i < n; i++)
		total += v[i].n_messages;
	store_conv_list_free(v, n);
	tap_ok(n == 4 && total == 80 &&
	           store_check(st, err, sizeof(err)) == STORE_OK,
	       "all 4 conversations and 80 messages are there, integrity ok");
	store_close(st);
}

int main(void)
{
	struct store *st;
	const char *tmp = getenv("TMPDIR");

	snprintf(dir, sizeof(dir), "%s/t_store.XXXXXX", tmp ? tmp : "/tmp");
	if (!mkdtemp(dir))
		return tap_skip_all("cannot create a temporary directory");
	tap_diag("working in %s", dir);
	test_paths();
	test_open();
	if (store_open(tpath("main.db"), 0, &st, err, sizeof(err)) != 0) {
		tap_ok(0, "open main.db: %s", err);
		return tap_done();
	}
	/* fsync per commit is tested by t_store_kill.sh; keep this fast */
	sqlite3_exec(st->db, "PRAGMA synchronous = NORMAL", NULL, NULL, NULL);
	test_conversations(st);
	test_messages(st);
	test_search(st);
	test_export_import(st);
	replay_dir(st, "store/seeds", true);
	replay_dir(st, "store_import/crashers", false);
	test_kv(st);
	test_fmt(st);
	tap_ok(store_check(st, err, sizeof(err)) == STORE_OK,
	       "integrity check after all API tests");
	store_close(st);
	test_fingerprint();
	test_migrations();
	test_refusals();
	test_two_connections();
	test_many_processes();
	if (!getenv("T_STORE_KEEP")) {
		char cmd[600];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			tap_diag("could not remove %s", dir);
	}
	return tap_done();
}

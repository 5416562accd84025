/*
 * t_store.c - the SQLite store: every API function, migrations from every
 * older version, refusal of newer/foreign/corrupt files (bytes unchanged),
 * two connections, FTS search, export/import round trip, KV slot; token
 * reports (chunks in step with the text, the bound, hostile BLOBs, export
 * with --logprobs), the message tree and branch selection.
 */
#define _POSIX_C_SOURCE 200809L
#include "json.h"
#include "store_int.h"
#include "tap.h"

#include <math.h>
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

/* A reply's reasoning (a thinking model's) survives export -> import ->
 * export, an unfinished block too; reasoning_content of the wrong type or
 * on a user message is refused by name. */
static void test_import_reasoning(struct store *st)
{
	struct store_conv_new cn = {.title = "think"};
	struct store_msg_new u = {.parent_id = STORE_PARENT_NONE,
	                          .role = STORE_ROLE_USER,
	                          .content = "Why?",
	                          .len = 4,
	                          .finish = STORE_FINISH_STOP};
	struct store_msg_new a = {.parent_id = STORE_PARENT_LEAF,
	                          .role = STORE_ROLE_ASSISTANT,
	                          .content = "Because.",
	                          .len = 8,
	                          .finish = STORE_FINISH_STOP};
	int64_t conv = 0, uid = 0, aid = 0, a2 = 0, id2 = 0, id3 = 0;
	char *out = NULL, *out2 = NULL;
	size_t len = 0, len2 = 0, n = 0;
	struct store_conv c;
	struct store_msg *m = NULL;
	int rc;

	rc = store_conv_create(st, &cn, &conv, err, sizeof(err));
	u.conv_id = a.conv_id = conv;
	rc = rc ? rc : store_msg_append(st, &u, &uid, err, sizeof(err));
	rc = rc ? rc : store_msg_append(st, &a, &aid, err, sizeof(err));
	rc = rc ? rc
	        : store_msg_set_reasoning(st, aid, "Let me \"think\".", 15, 5,
	                                  false, err, sizeof(err));
	a.content = "";
	a.len = 0;
	a.finish = STORE_FINISH_INTERRUPTED;
	rc = rc ? rc : store_msg_append(st, &a, &a2, err, sizeof(err));
	rc = rc ? rc
	        : store_msg_set_reasoning(st, a2, "Hmm", 3, 1, true, err,
	                                  sizeof(err));
	tap_ok(rc == STORE_OK, "a conversation with reasoning: %s",
	       rc ? err : "ok");
	rc = store_export_json(st, conv, &out, &len, err, sizeof(err));
	tap_ok(rc == STORE_OK && out && strstr(out, "\"reasoning_content\"") &&
	           strstr(out, "\"reasoning_unfinished\":true"),
	       "the export carries reasoning_content and an unfinished block");
	rc = out ? store_import_json(st, out, len, &id2, err, sizeof(err)) : -1;
	tap_ok(rc == STORE_OK, "it imports: %s", rc ? err : "ok");
	store_export_json(st, id2, &out2, &len2, err, sizeof(err));
	tap_ok(out && out2 && len2 == len && strcmp(out, out2) == 0,
	       "export -> import -> export is the identity, reasoning "
	       "included (%zu bytes)",
	       len);
	if (out && out2 && strcmp(out, out2) != 0)
		tap_diag("first  %s\nsecond %s", out, out2);
	memset(&c, 0, sizeof(c));
	if (store_conv_get(st, id2, &c, &m, &n, err, sizeof(err)) == STORE_OK &&
	    n == 3)
		tap_ok(m[1].reasoning &&
		           strcmp(m[1].reasoning, "Let me \"think\".") == 0 &&
		           m[1].n_reasoning == 5 && !m[1].reasoning_open &&
		           m[2].reasoning &&
		           strcmp(m[2].reasoning, "Hmm") == 0 &&
		           m[2].reasoning_open && m[0].reasoning_len == 0,
		       "the imported replies' reasoning, tokens and unfinished "
		       "flag");
	else
		tap_ok(0, "the imported conversation reads back: %s", err);
	store_conv_clear(&c);
	store_msg_free(m, n);
	{
		const char *j1 =
		    "[{\"role\":\"user\",\"content\":\"a\"},{\"role\":"
		    "\"assistant\",\"content\":\"b\",\"reasoning_content\":"
		    "[1]}]";

		rc = store_import_json(st, j1, strlen(j1), &id3, err,
		                       sizeof(err));
	}
	tap_ok(rc == STORE_EINVAL &&
	           strstr(err, "messages[1].reasoning_content is array"),
	       "reasoning_content not a string: %s", err);
	{
		const char *j2 = "[{\"role\":\"user\",\"content\":\"a\","
		                 "\"reasoning_content\":\"x\"}]";

		rc = store_import_json(st, j2, strlen(j2), &id3, err,
		                       sizeof(err));
	}
	tap_ok(rc == STORE_EINVAL &&
	           strstr(err, "messages[0].reasoning_content: only an "
	                       "assistant message"),
	       "reasoning on a user message: %s", err);
	free(out);
	free(out2);
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
		tap_ok(store_import_json(
		           st, "[{\"role\":\"user\",\"content\":\"a\xab\"}]",
		           32, &id, err, sizeof(err)) == STORE_EINVAL &&
		           strstr(err, "not valid UTF-8 (byte 28)") != NULL,
		       "rejects bytes that are not UTF-8, naming the first: %s",
		       err);
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

/* A thinking model's reasoning: kept apart from the answer, updated with
   a reply in progress, read back, exported as reasoning_content (JSON)
   and in a <details> block (Markdown); an unclosed block stays marked
   unfinished; a user message has none. */
static void test_reasoning(struct store *st)
{
	struct store_conv_new cn = {.title = "think", .model_path = "/m.gguf"};
	struct store_conv c;
	struct store_msg *m;
	size_t n, len;
	int64_t conv, u, a, b;
	char *s;
	int rc;

	store_conv_create(st, &cn, &conv, err, sizeof(err));
	u = add(st, conv, STORE_PARENT_LEAF, STORE_ROLE_USER, "2+2?");
	store_msg_begin(st, conv, u, STORE_ROLE_ASSISTANT, &a, err,
	                sizeof(err));
	rc = store_msg_set_reasoning(st, a, "Two and two", 11, 3, true, err,
	                             sizeof(err));
	if (rc == STORE_OK)
		rc = store_msg_update(st, a, "", 0, err, sizeof(err));
	if (rc == STORE_OK)
		rc = store_msg_set_reasoning(st, a, "Two and two is four.", 20,
		                             6, false, err, sizeof(err));
	if (rc == STORE_OK)
		rc = store_msg_finish(st, a, "Four.", 5, STORE_FINISH_STOP,
		                      NULL, err, sizeof(err));
	tap_ok(rc == STORE_OK, "reasoning saved beside a reply: %s",
	       rc ? err : "ok");
	tap_ok(store_msg_set_reasoning(st, u, "x", 1, 1, false, err,
	                               sizeof(err)) == STORE_ENOTFOUND,
	       "a user message has no reasoning");
	/* a second reply cut inside its block */
	store_msg_begin(st, conv, u, STORE_ROLE_ASSISTANT, &b, err,
	                sizeof(err));
	store_msg_set_reasoning(st, b, "First, ", 7, 2, true, err, sizeof(err));
	store_msg_finish(st, b, "", 0, STORE_FINISH_LENGTH, NULL, err,
	                 sizeof(err));
	store_conv_select(st, conv, a, NULL, err, sizeof(err));
	rc = store_conv_get(st, conv, &c, &m, &n, err, sizeof(err));
	tap_ok(rc == STORE_OK && n == 2 && m[0].reasoning_len == 0 &&
	           strcmp(m[1].content, "Four.") == 0 &&
	           strcmp(m[1].reasoning, "Two and two is four.") == 0 &&
	           m[1].n_reasoning == 6 && !m[1].reasoning_open,
	       "reasoning read back apart from the answer");
	s = store_fmt_markdown(&c, m, n);
	tap_ok(s && strstr(s, "<details>\n<summary>Reasoning (6 tokens)"
	                      "</summary>\n\nTwo and two is four.\n\n"
	                      "</details>\n\nFour.\n"),
	       "Markdown folds the reasoning in <details> before the answer");
	free(s);
	store_conv_clear(&c);
	store_msg_free(m, n);
	rc = store_export_json(st, conv, &s, &len, err, sizeof(err));
	tap_ok(rc == STORE_OK &&
	           strstr(s, "{\"role\":\"user\",\"content\":\"2+2?\"}") &&
	           strstr(s,
	                  "{\"role\":\"assistant\",\"content\":\"Four.\","
	                  "\"reasoning_content\":\"Two and two is four.\"}") &&
	           strstr(s, "\"reasoning_tokens\":6,"
	                     "\"reasoning_unfinished\":false"),
	       "JSON exports reasoning_content as the OpenAI API does");
	free(s);
	store_conv_select(st, conv, b, NULL, err, sizeof(err));
	store_conv_get(st, conv, &c, &m, &n, err, sizeof(err));
	tap_ok(n == 2 && m[1].reasoning_open && m[1].len == 0 &&
	           strcmp(m[1].reasoning, "First, ") == 0 &&
	           m[1].finish == STORE_FINISH_LENGTH,
	       "an unclosed block is kept as unfinished reasoning");
	s = store_fmt_markdown(&c, m, n);
	tap_ok(s && strstr(s, "<summary>Reasoning, unfinished (2 tokens)"),
	       "Markdown says the reasoning is unfinished");
	free(s);
	store_conv_clear(&c);
	store_msg_free(m, n);
}

/* Each reply's sampling settings (schema 6), and the server that answered
   it in `parley show`. */
static void test_sampling(struct store *st)
{
	struct store_conv_new cn = {.title = "samp", .model_path = "/m.gguf"};
	static const char js[] = "{\"temperature\":0.5,\"seed\":7,"
	                         "\"seed_random\":true}";
	struct store_conv c;
	struct store_msg *m, one;
	size_t n, len;
	int64_t conv, u, a, b;
	char *s;
	int rc;

	store_conv_create(st, &cn, &conv, err, sizeof(err));
	u = add(st, conv, STORE_PARENT_LEAF, STORE_ROLE_USER, "Hi");
	store_msg_begin(st, conv, u, STORE_ROLE_ASSISTANT, &a, err,
	                sizeof(err));
	rc = store_msg_set_sampling(st, a, js, err, sizeof(err));
	tap_ok(rc == STORE_OK, "a reply's sampling settings saved: %s",
	       rc ? err : "ok");
	store_msg_finish(st, a, "Hello.", 6, STORE_FINISH_STOP, NULL, err,
	                 sizeof(err));
	tap_ok(store_msg_set_sampling(st, a, "[1, 2]", err, sizeof(err)) ==
	               STORE_EINVAL &&
	           store_msg_set_sampling(st, a, "{bad", err, sizeof(err)) ==
	               STORE_EINVAL,
	       "settings that are not a JSON object are refused: %s", err);
	tap_ok(store_msg_set_sampling(st, u, js, err, sizeof(err)) ==
	           STORE_ENOTFOUND,
	       "a user message has no sampling settings");
	rc = store_msg_get(st, a, &one, err, sizeof(err));
	tap_ok(rc == STORE_OK && one.sampling_json &&
	           strcmp(one.sampling_json, js) == 0,
	       "read back unchanged (the refusals changed nothing)");
	store_msg_clear(&one);
	/* a second reply from a server, without settings */
	store_msg_begin(st, conv, a, STORE_ROLE_ASSISTANT, &b, err,
	                sizeof(err));
	store_msg_finish(st, b, "Remote.", 7, STORE_FINISH_STOP, NULL, err,
	                 sizeof(err));
	store_msg_set_origin(st, b, "http://127.0.0.1:8080/v1", "smol\x1b", err,
	                     sizeof(err));
	rc = store_conv_get(st, conv, &c, &m, &n, err, sizeof(err));
	tap_ok(rc == STORE_OK && n == 3 && m[0].sampling_json == NULL &&
	           m[2].sampling_json == NULL &&
	           strcmp(m[2].server, "http://127.0.0.1:8080/v1") == 0 &&
	           strcmp(m[1].server, "") == 0,
	       "messages read back with their settings (or none) and server");
	s = store_fmt_show(&c, NULL, NULL, m, n);
	tap_ok(s &&
	           strstr(s, "--- assistant from server "
	                     "http://127.0.0.1:8080/v1, model smol^[\n") &&
	           strstr(s, "--- assistant\nHello.") && !strchr(s, 0x1b),
	       "show names the server and model of the reply it wrote");
	free(s);
	store_conv_clear(&c);
	store_msg_free(m, n);
	rc = store_export_json(st, conv, &s, &len, err, sizeof(err));
	tap_ok(rc == STORE_OK && strstr(s, "\"created\":") &&
	           strstr(s, ",\"sampling\":{\"temperature\":0.5,\"seed\":7,"
	                     "\"seed_random\":true}}") &&
	           strstr(s, ",\"server\":\"http://127.0.0.1:8080/v1\","
	                     "\"server_model\":\"smol\\u001b\"}"),
	       "JSON export: each reply's settings and server in its meta");
	if (rc == STORE_OK) {
		int64_t id2 = 0;
		struct store_msg *m2;
		size_t n2;

		rc = store_import_json(st, s, len, &id2, err, sizeof(err));
		if (rc == STORE_OK)
			rc = store_conv_get(st, id2, &c, &m2, &n2, err,
			                    sizeof(err));
		tap_ok(rc == STORE_OK && n2 == 3 && m2[1].sampling_json &&
		           strstr(m2[1].sampling_json, "\"seed\":7") &&
		           m2[2].sampling_json == NULL,
		       "import keeps a reply's settings: %s", rc ? err : "ok");
		if (rc == STORE_OK) {
			store_conv_clear(&c);
			store_msg_free(m2, n2);
		}
	}
	free(s);
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
	s = store_fmt_show(&c, NULL, NULL, m, n);
	tap_ok(s && strstr(s, "line1\nline2^[[2J") && !strchr(s, 0x1b) &&
	           !strstr(s, "server"),
	       "show keeps newlines, escapes ESC; no server line when local");
	free(s);
	s = store_fmt_show(&c, "http://127.0.0.1:8080/v1", "qwen\x1b[2J", m, n);
	tap_ok(s &&
	           strstr(s, "\nserver http://127.0.0.1:8080/v1, model "
	                     "qwen^[[2J\n") &&
	           !strchr(s, 0x1b),
	       "show names the server and its model, escaped");
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

/* Token reports ------------------------------------------------------------
 */

/* The text make_reports gives token ID (one per id, as a tokenizer): some
   multi-byte, some invalid UTF-8, one empty. */
static size_t fake_text(int32_t id, char *buf, size_t cap)
{
	if (id == 7)
		return 0;
	snprintf(buf, cap, "%s%d",
	         id % 5 == 0 ? "\xff" : (id % 3 == 0 ? "\xc3\xa9" : " t"), id);
	return strlen(buf);
}

/* N made-up reports into R (emptied), the last one end-of-generation. */
static void make_reports(struct store_reports *r, size_t n, unsigned seed)
{
	char txt[32];

	r->n = 0;
	r->text_len = 0;
	for (size_t i = 0; i < n; i++) {
		struct store_tok_report t;
		uint32_t u = seed + (uint32_t)i * 7u;

		memset(&t, 0, sizeof(t));
		t.chosen = (int32_t)(u % 500);
		t.flags = i + 1 == n ? STORE_REPORT_EOG : 0;
		t.prob = (float)(i % 10) / 10.0f;
		t.raw_logprob = -(float)i / 3.0f;
		t.entropy = 1.5f;
		t.raw_entropy = 2.25f + (float)i;
		t.n_kept = (int32_t)(i % 40);
		t.n_top = (int32_t)(i % (STORE_REPORT_TOP + 1));
		t.text_len = (uint32_t)fake_text(t.chosen, txt, sizeof(txt));
		store_reports_text(r, txt, t.text_len, &t.text_off);
		for (int32_t j = 0; j < t.n_top; j++) {
			int32_t id =
			    j == 0 ? t.chosen
			           : (int32_t)((u + 13u * (uint32_t)j) % 600);

			t.top[j].id = id;
			t.top[j].logit = 10.0f - (float)j;
			t.top[j].logprob = -0.5f - (float)j;
			t.top[j].text_len =
			    (uint32_t)fake_text(id, txt, sizeof(txt));
			store_reports_text(r, txt, t.top[j].text_len,
			                   &t.top[j].text_off);
		}
		store_reports_push(r, &t);
	}
}

/* The text of id ID as make_reports writes it. */
static bool rep_text_is(const struct store_reports *r, uint32_t off,
                        uint32_t len, const struct store_reports *w,
                        uint32_t woff, uint32_t wlen)
{
	return len == wlen && memcmp(r->text + off, w->text + woff, len) == 0;
}

/* A[ia] equals B[ib] in every field and text. */
static bool rep_same(const struct store_reports *a, size_t ia,
                     const struct store_reports *b, size_t ib)
{
	const struct store_tok_report *x = &a->v[ia], *y = &b->v[ib];
	bool ok = x->chosen == y->chosen && x->flags == y->flags &&
	          memcmp(&x->prob, &y->prob, 4) == 0 &&
	          memcmp(&x->raw_logprob, &y->raw_logprob, 4) == 0 &&
	          x->entropy == y->entropy &&
	          x->raw_entropy == y->raw_entropy && x->n_kept == y->n_kept &&
	          x->n_top == y->n_top &&
	          rep_text_is(a, x->text_off, x->text_len, b, y->text_off,
	                      y->text_len);

	for (int32_t j = 0; ok && j < x->n_top; j++)
		ok = x->top[j].id == y->top[j].id &&
		     x->top[j].logit == y->top[j].logit &&
		     x->top[j].logprob == y->top[j].logprob &&
		     rep_text_is(a, x->top[j].text_off, x->top[j].text_len, b,
		                 y->top[j].text_off, y->top[j].text_len);
	return ok;
}

static bool reps_same(const struct store_reports *a,
                      const struct store_reports *b)
{
	bool ok = a->n == b->n;

	for (size_t i = 0; ok && i < a->n; i++)
		ok = rep_same(a, i, b, i);
	return ok;
}

/* Decode BLOB[0, len) into a fresh set; the STORE_* code. */
static int try_decode(const unsigned char *blob, size_t len, size_t n,
                      struct store_reports *out)
{
	char e[300];

	return store_reports_decode(blob, len, 77, n, out, e, sizeof(e));
}

/* The codec against hostile input: every truncation, bit flips, junk. */
static void test_reports_codec(void)
{
	struct store_reports w = {0}, r = {0};
	unsigned char *b = NULL, *c;
	size_t len = 0, bad = 0, crashed = 0, okay = 0;
	uint64_t x = 88172645463325252ull;
	char e[300];
	int rc;

	make_reports(&w, 40, 3);
	rc = store_reports_encode(&w, 0, w.n, &b, &len, e, sizeof(e));
	tap_ok(rc == STORE_OK && b && len > 12, "encode 40 reports: %zu bytes",
	       len);
	rc = store_reports_decode(b, len, 77, 40, &r, e, sizeof(e));
	tap_ok(rc == STORE_OK && reps_same(&r, &w),
	       "decode gives every field and text back");
	for (size_t k = 0; k < len; k++) {
		r.n = 0;
		if (try_decode(b, k, 40, &r) != STORE_ECORRUPT || r.n != 0)
			bad++;
	}
	tap_ok(bad == 0, "each of the %zu truncations is refused", len);
	store_reports_decode(b, 5, 77, 40, &r, e, sizeof(e));
	tap_ok(strstr(e, "message 77") && strstr(e, "byte"),
	       "the error names the message and the offset: %s", e);
	tap_ok(try_decode(b, len, 39, &r) == STORE_ECORRUPT,
	       "a token count that differs from the row's is refused");
	c = malloc(len + 1);
	memcpy(c, b, len);
	c[len] = 0;
	tap_ok(try_decode(c, len + 1, 40, &r) == STORE_ECORRUPT,
	       "a byte left over is refused");
	c[0] = 3;
	tap_ok(try_decode(c, len, 40, &r) == STORE_ECORRUPT,
	       "an unknown version is refused");
	for (int i = 0; i < 5000; i++) { /* xorshift: flip 1-3 bytes */
		memcpy(c, b, len);
		for (int f = 0; f < 1 + i % 3; f++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			c[x % len] ^= (unsigned char)(1u << (x >> 32) % 8);
		}
		r.n = 0;
		r.text_len = 0;
		rc = try_decode(c, len, 40, &r);
		if (rc == STORE_OK)
			okay++;
		else if (rc != STORE_ECORRUPT)
			crashed++;
		for (size_t k = 0; rc == STORE_OK && k < r.n; k++)
			if (r.v[k].n_top > STORE_REPORT_TOP ||
			    (size_t)r.v[k].text_off + r.v[k].text_len >
			        r.text_len)
				crashed++;
	}
	tap_ok(crashed == 0,
	       "5000 damaged BLOBs: %zu decode (float bits), the rest refused",
	       okay);
	/* a header that claims 2^32-1 texts and tokens */
	memset(c, 0xff, 12);
	c[0] = 1;
	tap_ok(try_decode(c, 12, 0xffffffffu, &r) == STORE_ECORRUPT,
	       "huge counts in a short BLOB are refused before allocating");
	/* ranges and limits on encoding */
	w.v[3].n_top = STORE_REPORT_TOP + 1;
	free(b);
	b = NULL;
	tap_ok(store_reports_encode(&w, 0, w.n, &b, &len, e, sizeof(e)) ==
	               STORE_EINVAL &&
	           strstr(e, "position 3"),
	       "encode refuses n_top > %d: %s", STORE_REPORT_TOP, e);
	free(b);
	free(c);
	store_reports_free(&w);
	store_reports_free(&r);
}

/* Little-endian writers for hand-made BLOBs. */
static unsigned char *le(unsigned char *p, uint32_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (unsigned char)(v >> (8 * i));
	return p + n;
}

static unsigned char *le_f(unsigned char *p, float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return le(p, u, 4);
}

/* A version-1 BLOB (before remote reports) into B: one token, chosen id
   KEY ("a"; KEY != 9), one candidate id 9 ("bc"). Its length. */
static size_t v1_blob(unsigned char *b, uint32_t key)
{
	unsigned char *p = b;

	p = le(p, 1, 1); /* version 1 */
	p = le(p, 0, 3);
	p = le(p, 1, 4); /* n_tokens */
	p = le(p, 2, 4); /* n_texts, keys ascending */
	for (int k = 0; k < 2; k++) {
		if ((k == 0) == (key < 9)) {
			p = le(p, key, 4);
			p = le(p, 1, 2);
			*p++ = 'a';
		} else {
			p = le(p, 9, 4);
			p = le(p, 2, 2);
			*p++ = 'b';
			*p++ = 'c';
		}
	}
	p = le(p, STORE_REPORT_EOG, 1);
	p = le(p, 1, 1); /* n_top */
	p = le(p, key, 4);
	p = le_f(p, 0.5f);
	p = le_f(p, -0.75f);
	p = le_f(p, 1.0f);
	p = le_f(p, 2.0f);
	p = le(p, 3, 4); /* n_kept */
	p = le(p, 9, 4);
	p = le_f(p, 4.0f);
	p = le_f(p, -0.25f);
	return (size_t)(p - b);
}

/* A remote model's reports (ids -1, the texts the server sent) among
   local ones round-trip; version-1 BLOBs still decode; keys out of their
   version's range are refused. */
static void test_reports_remote(void)
{
	static const char *const tx[] = {"Hel", "lo", "\xc3\xa9", "", " x"};
	static char a[] = "a", bc[] = "bc";
	struct store_reports w = {0}, r = {0};
	unsigned char *b = NULL, v1[128]; /* v1_blob writes 65 bytes */
	size_t len = 0, n1;
	char e[300];
	int rc;

	for (size_t i = 0; i < 6; i++) {
		struct store_tok_report t;

		memset(&t, 0, sizeof(t));
		t.chosen = i == 2 ? 42 : -1; /* one local token among them */
		t.prob = 0.25f;
		t.raw_logprob = logf(0.25f);
		t.entropy = t.raw_entropy = 1.0f;
		t.n_top = (int32_t)(i % 4);
		store_reports_text(&w, tx[i % 5], strlen(tx[i % 5]),
		                   &t.text_off);
		t.text_len = (uint32_t)strlen(tx[i % 5]);
		for (int32_t j = 0; j < t.n_top; j++) {
			const char *s = tx[(i + (size_t)j) % 5];

			t.top[j].id = t.chosen < 0 ? -1 : 40 + j;
			t.top[j].logit = t.top[j].logprob = -0.5f - (float)j;
			t.top[j].text_len = (uint32_t)strlen(s);
			store_reports_text(&w, s, t.top[j].text_len,
			                   &t.top[j].text_off);
		}
		store_reports_push(&w, &t);
	}
	rc = store_reports_encode(&w, 0, w.n, &b, &len, e, sizeof(e));
	tap_ok(rc == STORE_OK && b && b[0] == 2,
	       "remote reports (ids -1) encode, as version 2: %s",
	       rc ? e : "ok");
	rc = store_reports_decode(b, len, 77, w.n, &r, e, sizeof(e));
	tap_ok(rc == STORE_OK && reps_same(&r, &w) && r.v[0].chosen == -1 &&
	           r.v[3].top[2].id == -1 && r.v[2].chosen == 42,
	       "they decode with ids -1 and each its own text: %s",
	       rc ? e : "ok");
	for (size_t k = 0; k < len; k++) {
		r.n = 0;
		r.text_len = 0;
		if (try_decode(b, k, w.n, &r) != STORE_ECORRUPT || r.n != 0)
			rc = -1;
	}
	tap_ok(rc == STORE_OK, "each truncation of it is refused");
	w.v[1].chosen = -2;
	free(b);
	b = NULL;
	tap_ok(store_reports_encode(&w, 0, w.n, &b, &len, e, sizeof(e)) ==
	           STORE_EINVAL,
	       "an id below -1 is refused on encoding");

	n1 = v1_blob(v1, 5);
	r.n = 0;
	r.text_len = 0;
	rc = store_reports_decode(v1, n1, 77, 1, &r, e, sizeof(e));
	tap_ok(rc == STORE_OK && r.n == 1 && r.v[0].chosen == 5 &&
	           r.v[0].flags == STORE_REPORT_EOG && r.v[0].n_kept == 3 &&
	           r.v[0].prob == 0.5f && r.v[0].top[0].id == 9 &&
	           r.v[0].top[0].logprob == -0.25f &&
	           rep_text_is(&r, r.v[0].text_off, r.v[0].text_len,
	                       &(struct store_reports){.text = a}, 0, 1) &&
	           rep_text_is(&r, r.v[0].top[0].text_off,
	                       r.v[0].top[0].text_len,
	                       &(struct store_reports){.text = bc}, 0, 2),
	       "a version-1 BLOB still decodes: %s", rc ? e : "ok");
	n1 = v1_blob(v1, 1u << 30);
	r.n = 0;
	r.text_len = 0;
	tap_ok(try_decode(v1, n1, 1, &r) == STORE_ECORRUPT && r.n == 0,
	       "version 1 knows no key of 2^30 (no remote ids)");
	v1[0] = 2;
	tap_ok(try_decode(v1, n1, 1, &r) == STORE_OK && r.v[0].chosen == -1,
	       "in version 2 the key 2^30 is an id -1 with its text");
	n1 = v1_blob(v1, 1u << 31);
	v1[0] = 2;
	r.n = 0;
	r.text_len = 0;
	tap_ok(try_decode(v1, n1, 1, &r) == STORE_ECORRUPT && r.n == 0,
	       "version 2 refuses a key of 2^31");
	free(b);
	store_reports_free(&w);
	store_reports_free(&r);
}

/* Rows of token_reports for message ID. */
static int64_t n_chunks(struct store *st, int64_t id)
{
	sqlite3_stmt *s;
	int64_t n = -1;

	sqlite3_prepare_v2(st->db,
	                   "SELECT count(*) FROM token_reports WHERE "
	                   "message_id = ?1",
	                   -1, &s, NULL);
	sqlite3_bind_int64(s, 1, id);
	if (sqlite3_step(s) == SQLITE_ROW)
		n = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return n;
}

/* A JSON member of O by key, or NULL (also when O is no object). */
static const struct json_value *jget(const struct json_value *o, const char *k)
{
	return o && o->type == JSON_OBJECT ? json_object_get(o, k) : NULL;
}

/* One OpenAI logprob entry: token (string), logprob (number <= 0),
   bytes (ints 0-255 spelling the token when it is valid UTF-8). */
static bool lp_entry_ok(const struct json_value *e)
{
	const struct json_value *t = jget(e, "token"), *l = jget(e, "logprob");
	const struct json_value *b = jget(e, "bytes");
	double v;

	if (!t || t->type != JSON_STRING || !l || !b || b->type != JSON_ARRAY)
		return false;
	if (l->type != JSON_INT && l->type != JSON_FLOAT)
		return false;
	v = l->type == JSON_INT ? (double)l->u.i : l->u.f;
	if (!(v <= 0))
		return false;
	for (size_t i = 0; i < b->u.arr.n; i++)
		if (b->u.arr.items[i]->type != JSON_INT ||
		    b->u.arr.items[i]->u.i < 0 || b->u.arr.items[i]->u.i > 255)
			return false;
	return true;
}

/* Export with logprobs: the OpenAI shape, EOG left out, bytes exact. */
static void check_export_logprobs(struct store *st, int64_t conv,
                                  const struct store_reports *w)
{
	char *out = NULL;
	size_t len = 0, n_ent = 0, n_bad = 0;
	struct json_value *jd = NULL;
	const struct json_value *msgs, *lp = NULL;
	int rc = store_export_json_flags(st, conv, STORE_EXPORT_LOGPROBS, &out,
	                                 &len, err, sizeof(err));

	tap_ok(rc == STORE_OK &&
	           json_parse(out, len, &jd, err, sizeof(err)) == 0,
	       "export --logprobs is JSON: %s", rc ? err : "ok");
	msgs = jget(jd, "messages");
	for (size_t i = 0; msgs && i < msgs->u.arr.n; i++) {
		const struct json_value *m = msgs->u.arr.items[i];
		const struct json_value *role = jget(m, "role");

		if (role && strcmp(role->u.str.ptr, "assistant") == 0)
			lp = jget(m, "logprobs");
		else if (jget(m, "logprobs"))
			n_bad++;
	}
	const struct json_value *content = jget(lp, "content");

	for (size_t i = 0;
	     content && content->type == JSON_ARRAY && i < content->u.arr.n;
	     i++) {
		const struct json_value *e = content->u.arr.items[i];
		const struct json_value *top = jget(e, "top_logprobs");
		const struct json_value *b = jget(e, "bytes");

		n_ent++;
		if (!lp_entry_ok(e) || !top || top->type != JSON_ARRAY ||
		    top->u.arr.n != (size_t)w->v[i].n_top ||
		    b->u.arr.n != w->v[i].text_len)
			n_bad++;
		for (size_t k = 0; b && k < b->u.arr.n && k < w->v[i].text_len;
		     k++)
			if (b->u.arr.items[k]->u.i !=
			    (unsigned char)w->text[w->v[i].text_off + k])
				n_bad++;
		for (size_t j = 0; top && j < top->u.arr.n; j++)
			if (!lp_entry_ok(top->u.arr.items[j]))
				n_bad++;
	}
	tap_ok(n_ent + 1 == w->n && n_bad == 0,
	       "logprobs.content: %zu entries (end of generation left out), "
	       "each in the OpenAI shape with exact bytes (%zu bad)",
	       n_ent, n_bad);
	json_free(jd);
	free(out);
	rc = store_export_json(st, conv, &out, &len, err, sizeof(err));
	tap_ok(rc == STORE_OK && !strstr(out, "logprobs"),
	       "without the flag the export has no logprobs");
	free(out);
}

static void test_reports(struct store *st)
{
	struct store_conv_new cn = {.title = "reports"};
	struct store_reports w = {0}, r = {0}, big = {0};
	struct store_msg m;
	int64_t conv, u, a, other;
	int rc;

	make_reports(&w, 30, 11);
	store_conv_create(st, &cn, &conv, err, sizeof(err));
	u = add(st, conv, STORE_PARENT_LEAF, STORE_ROLE_USER, "Question");
	store_msg_begin(st, conv, STORE_PARENT_LEAF, STORE_ROLE_ASSISTANT, &a,
	                err, sizeof(err));
	tap_ok(store_msg_reports(st, a, &r, err, sizeof(err)) == STORE_OK &&
	           r.n == 0,
	       "a reply without reports: none");
	/* two periodic updates: two chunks */
	size_t full = w.n;

	w.n = 12;
	rc = store_msg_update_rep(st, a, "Twelve", 6, &w, 0, err, sizeof(err));
	w.n = 25;
	if (rc == STORE_OK)
		rc = store_msg_update_rep(st, a, "Twenty-five", 11, &w, 12, err,
		                          sizeof(err));
	tap_ok(rc == STORE_OK && n_chunks(st, a) == 2,
	       "two updates add two chunks: %s", rc ? err : "ok");
	rc = store_msg_reports(st, a, &r, err, sizeof(err));
	tap_ok(rc == STORE_OK && reps_same(&r, &w),
	       "the chunks read back as the first 25 reports");
	/* an update whose reports do not follow changes nothing */
	w.n = full;
	rc = store_msg_update_rep(st, a, "Wrong", 5, &w, 20, err, sizeof(err));
	store_msg_get(st, a, &m, err, sizeof(err));
	tap_ok(rc == STORE_EINVAL && strcmp(m.content, "Twenty-five") == 0 &&
	           n_chunks(st, a) == 2,
	       "reports that leave a gap are refused with the text: %s",
	       rc ? err : "ok");
	store_msg_clear(&m);
	/* the bound */
	make_reports(&big, STORE_REPORTS_MAX + 1, 5);
	rc = store_msg_update_rep(st, a, "Too many", 8, &big, 25, err,
	                          sizeof(err));
	store_msg_get(st, a, &m, NULL, 0);
	tap_ok(rc == STORE_EINVAL && strstr(err, "32769") &&
	           strcmp(m.content, "Twenty-five") == 0,
	       "more than %d reports per message are refused: %s",
	       STORE_REPORTS_MAX, err);
	store_msg_clear(&m);
	rc = store_msg_finish_rep(st, a, "x", 1, STORE_FINISH_STOP, NULL, &big,
	                          err, sizeof(err));
	tap_ok(rc == STORE_EINVAL && n_chunks(st, a) == 2,
	       "... also when finishing (nothing written)");
	big.n = STORE_REPORTS_MAX;
	/* finish: the chunks become one row */
	rc = store_msg_finish_rep(st, a, "All thirty", 10, STORE_FINISH_STOP,
	                          NULL, &w, err, sizeof(err));
	tap_ok(rc == STORE_OK && n_chunks(st, a) == 1,
	       "finish replaces the chunks by one: %s", rc ? err : "ok");
	rc = store_msg_reports(st, a, &r, err, sizeof(err));
	tap_ok(rc == STORE_OK && reps_same(&r, &w), "all 30 read back");
	check_export_logprobs(st, conv, &w);

	/* the most a message holds, measured */
	store_msg_begin(st, conv, u, STORE_ROLE_ASSISTANT, &other, err,
	                sizeof(err));
	rc = store_msg_finish_rep(st, other, "max", 3, STORE_FINISH_LENGTH,
	                          NULL, &big, err, sizeof(err));
	r.n = 0;
	tap_ok(rc == STORE_OK &&
	           store_msg_reports(st, other, &r, err, sizeof(err)) ==
	               STORE_OK &&
	           r.n == STORE_REPORTS_MAX,
	       "a reply of %d reports is stored and read back",
	       STORE_REPORTS_MAX);

	/* hostile rows */
	sqlite3_stmt *s;

	sqlite3_prepare_v2(st->db,
	                   "UPDATE token_reports SET data = "
	                   "substr(data, 1, length(data) - 3) WHERE "
	                   "message_id = ?1",
	                   -1, &s, NULL);
	sqlite3_bind_int64(s, 1, a);
	sqlite3_step(s);
	sqlite3_finalize(s);
	rc = store_msg_reports(st, a, &r, err, sizeof(err));
	char want[64];

	snprintf(want, sizeof(want), "message %lld", (long long)a);
	tap_ok(rc == STORE_ECORRUPT && r.n == 0 && strstr(err, want),
	       "a truncated BLOB is an error naming the message: %s", err);
	st->corrupt = false; /* a bad BLOB is not a damaged database */
	sqlite3_prepare_v2(st->db,
	                   "UPDATE token_reports SET first_pos = 3 WHERE "
	                   "message_id = ?1",
	                   -1, &s, NULL);
	sqlite3_bind_int64(s, 1, a);
	sqlite3_step(s);
	sqlite3_finalize(s);
	rc = store_msg_reports(st, a, &r, err, sizeof(err));
	tap_ok(rc == STORE_ECORRUPT && strstr(err, "does not follow"),
	       "a chunk that does not start at 0 is an error: %s", err);
	store_conv_set_leaf(st, conv, a, err, sizeof(err));
	rc = store_export_json_flags(st, conv, STORE_EXPORT_LOGPROBS,
	                             &(char *){NULL}, &(size_t){0}, err,
	                             sizeof(err));
	tap_ok(rc == STORE_ECORRUPT, "export --logprobs reports it (%d): %s",
	       rc, err);
	st->corrupt = false;
	/* the reports go with their message */
	store_conv_delete(st, conv, err, sizeof(err));
	tap_ok(n_chunks(st, a) == 0 && n_chunks(st, other) == 0,
	       "deleting the conversation deletes its reports");
	store_reports_free(&w);
	store_reports_free(&r);
	store_reports_free(&big);
}

/* Every message of a conversation, the tree, selecting a branch. */
static void test_tree(struct store *st)
{
	struct store_conv_new cn = {.title = "tree"};
	struct store_msg *v = NULL;
	struct store_conv c;
	size_t n = 0;
	int64_t conv, u1, a1, a1b, u2, u2b, a2b, leaf = 0;
	char *t;

	store_conv_create(st, &cn, &conv, err, sizeof(err));
	u1 = add(st, conv, STORE_PARENT_LEAF, STORE_ROLE_USER, "Hi");
	a1 = add(st, conv, u1, STORE_ROLE_ASSISTANT, "Hello");
	u2 = add(st, conv, a1, STORE_ROLE_USER, "More");
	a1b = add(st, conv, u1, STORE_ROLE_ASSISTANT, "Hey there");
	u2b = add(st, conv, a1b, STORE_ROLE_USER, "And?");
	a2b = add(st, conv, u2b, STORE_ROLE_ASSISTANT, "That is all");
	tap_ok(store_msg_list(st, conv, &v, &n, err, sizeof(err)) == STORE_OK &&
	           n == 6 && v[0].id == u1 && v[5].id == a2b,
	       "store_msg_list: all 6 messages of both branches");
	t = store_fmt_tree(v, n, a2b);
	char w1[64], w2[64], w3[64], w4[64], w5[64];

	snprintf(w1, sizeof(w1), "* #%lld user: Hi\n", (long long)u1);
	snprintf(w2, sizeof(w2), "    #%lld assistant [1/2]: Hello\n",
	         (long long)a1);
	snprintf(w3, sizeof(w3), "    #%lld user: More\n", (long long)u2);
	snprintf(w4, sizeof(w4), "*   #%lld assistant [2/2]: Hey there\n",
	         (long long)a1b);
	snprintf(w5, sizeof(w5), "*   #%lld assistant: That is all\n",
	         (long long)a2b);
	tap_ok(t && strncmp(t, w1, strlen(w1)) == 0 && strstr(t, w2) &&
	           strstr(t, w3) && strstr(t, w4) && strstr(t, w5) &&
	           strstr(t, w2) < strstr(t, w3) &&
	           strstr(t, w3) < strstr(t, w4),
	       "the tree: branches indented, * on the active one:\n%s", t);
	free(t);
	store_msg_free(v, n);
	(void)u2;
	tap_ok(store_conv_select(st, conv, a1, &leaf, err, sizeof(err)) ==
	               STORE_OK &&
	           leaf == u2,
	       "selecting #%lld makes its newest descendant #%lld the leaf",
	       (long long)a1, (long long)leaf);
	store_conv_get(st, conv, &c, &v, &n, err, sizeof(err));
	tap_ok(c.leaf_id == u2 && n == 3 && v[1].id == a1,
	       "the active branch goes through it");
	store_conv_clear(&c);
	store_msg_free(v, n);
	tap_ok(store_conv_select(st, conv, 999999, &leaf, err, sizeof(err)) ==
	           STORE_ENOTFOUND,
	       "a message of no such id: %s", err);
	store_conv_delete(st, conv, err, sizeof(err));
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

/* The frozen v2 database (tests/data/store/v2.sql) after migration. */
static void check_v2_data(const char *path, const char *what)
{
	struct store *st;
	struct store_conv c;
	struct store_msg *m;
	struct store_kv kv;
	struct store_reports r = {0};
	size_t n;
	int rc = store_open(path, 0, &st, err, sizeof(err));

	tap_ok(rc == STORE_OK, "%s: opens and migrates: %s", what,
	       rc ? err : "ok");
	if (!st)
		return;
	rc = store_conv_get(st, 1, &c, &m, &n, err, sizeof(err));
	tap_ok(rc == STORE_OK && n == 6 && c.leaf_id == 9 && m[3].id == 6 &&
	           m[3].n_siblings == 2 && m[3].stats.n_tokens == 3 &&
	           m[3].stats.decode_ms == 30.25 && m[5].id == 9 &&
	           m[5].finish == STORE_FINISH_NONE &&
	           strcmp(c.template_name, "chatml") == 0 &&
	           c.model_size == 134217728 &&
	           strcmp(c.sampling_json,
	                  "{\"temperature\":0.8,\"seed\":42}") == 0,
	       "%s: conversation 1, its branch, leaf and reply in progress "
	       "intact",
	       what);
	store_conv_clear(&c);
	store_msg_free(m, n);
	rc = store_conv_get(st, 2, &c, NULL, NULL, err, sizeof(err));
	tap_ok(rc == STORE_OK && c.archived && c.n_messages == 2,
	       "%s: the archived conversation intact", what);
	store_conv_clear(&c);
	rc = store_kv_get(st, 1, &kv, err, sizeof(err));
	tap_ok(rc == STORE_OK && kv.n_tokens == 3 && kv.tokens[2] == 3,
	       "%s: the KV slot intact", what);
	store_kv_free(&kv);
	rc = store_msg_reports(st, 9, &r, err, sizeof(err));
	tap_ok(rc == STORE_OK && r.n == 0, "%s: old replies have no reports",
	       what);
	rc = store_conv_get(st, 1, &c, &m, &n, err, sizeof(err));
	tap_ok(rc == STORE_OK && n == 6 && m[3].reasoning &&
	           m[3].reasoning_len == 0 && !m[3].reasoning_open &&
	           m[3].n_reasoning == 0,
	       "%s: old replies have no reasoning", what);
	store_conv_clear(&c);
	store_msg_free(m, n);
	/* the reply in progress goes on with reports */
	make_reports(&r, 4, 1);
	rc = store_msg_update_rep(st, 9, "Madrid", 6, &r, 0, err, sizeof(err));
	if (rc == STORE_OK)
		rc =
		    store_msg_finish_rep(st, 9, "Madrid.", 7, STORE_FINISH_STOP,
		                         NULL, &r, err, sizeof(err));
	r.n = 0;
	tap_ok(rc == STORE_OK &&
	           store_msg_reports(st, 9, &r, err, sizeof(err)) == STORE_OK &&
	           r.n == 4,
	       "%s: reports stored with a migrated message: %s", what,
	       rc ? err : "ok");
	store_reports_free(&r);
	tap_ok(store_check(st, err, sizeof(err)) == STORE_OK &&
	           raw_int(path, "SELECT count(*) FROM "
	                         "pragma_foreign_key_check") == 0,
	       "%s: integrity and foreign keys ok", what);
	store_close(st);
	tap_ok(raw_int(path, "PRAGMA user_version") == STORE_SCHEMA_VERSION,
	       "%s: now at version %d", what, STORE_SCHEMA_VERSION);
}

/* The frozen v5 database (tests/data/store/v5.sql) after migration:
   every row as it was, no reply with settings, new ones get them. */
static void check_v5_data(const char *path, const char *what)
{
	struct store *st;
	struct store_conv c;
	struct store_msg *m;
	struct store_reports r = {0};
	size_t n;
	int rc = store_open(path, 0, &st, err, sizeof(err));

	tap_ok(rc == STORE_OK, "%s: opens and migrates: %s", what,
	       rc ? err : "ok");
	if (!st)
		return;
	rc = store_conv_get(st, 1, &c, &m, &n, err, sizeof(err));
	tap_ok(rc == STORE_OK && n == 6 && c.leaf_id == 9 &&
	           m[5].finish == STORE_FINISH_NONE &&
	           strcmp(c.sampling_json,
	                  "{\"temperature\":0.8,\"seed\":42}") == 0 &&
	           m[3].sampling_json == NULL,
	       "%s: conversation 1, its reply in progress, no reply settings",
	       what);
	store_conv_clear(&c);
	store_msg_free(m, n);
	store_conv_select(st, 1, 7, NULL, err, sizeof(err));
	rc = store_conv_get(st, 1, &c, &m, &n, err, sizeof(err));
	tap_ok(rc == STORE_OK && n == 4 && m[3].id == 7 &&
	           strcmp(m[3].reasoning, "Italy: Rome.") == 0 &&
	           m[3].n_reasoning == 4 && m[3].finish == STORE_FINISH_LENGTH,
	       "%s: the other branch's reasoning intact", what);
	store_conv_clear(&c);
	store_msg_free(m, n);
	rc = store_conv_get(st, 2, &c, &m, &n, err, sizeof(err));
	tap_ok(rc == STORE_OK && c.archived && n == 2 &&
	           strcmp(m[1].server, "http://127.0.0.1:8080/v1") == 0 &&
	           strcmp(m[1].server_model, "smol-remote") == 0,
	       "%s: the remote reply's server and model intact", what);
	store_conv_clear(&c);
	store_msg_free(m, n);
	rc = store_msg_reports(st, 11, &r, err, sizeof(err));
	tap_ok(rc == STORE_OK && r.n == 4 && r.v[0].n_top == 10,
	       "%s: the token reports decode (%zu): %s", what, r.n,
	       rc ? err : "ok");
	store_reports_free(&r);
	rc = store_msg_set_sampling(st, 11, "{\"temperature\":0}", err,
	                            sizeof(err));
	tap_ok(rc == STORE_OK, "%s: an old reply takes settings: %s", what,
	       rc ? err : "ok");
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

	/* v2 from the frozen fixture */
	snprintf(path, sizeof(path), "%s/tests/data/store/v2.sql",
	         srcdir ? srcdir : ".");
	sql = slurp(path, &len);
	if (!sql) {
		tap_ok(0, "read %s", path);
	} else {
		tap_ok(raw_exec(tpath("v2-fixture.db"), sql) == SQLITE_OK &&
		           raw_int(tpath("v2-fixture.db"),
		                   "PRAGMA user_version") == 2,
		       "v2 fixture loaded");
		check_v2_data(tpath("v2-fixture.db"), "v2 fixture");
		/* the same fixture with a step 3 that cannot apply: the
		   migration rolls back whole and leaves version 2 */
		tap_ok(raw_exec(tpath("v2-bad.db"), sql) == SQLITE_OK &&
		           raw_exec(tpath("v2-bad.db"),
		                    "CREATE TABLE token_reports (x);") ==
		               SQLITE_OK,
		       "a v2 database that step 3 cannot migrate");
		int64_t objs = raw_int(tpath("v2-bad.db"),
		                       "SELECT count(*) FROM sqlite_schema");

		tap_ok(
		    store_open(tpath("v2-bad.db"), 0, &st, err, sizeof(err)) ==
		            STORE_ERR &&
		        raw_int(tpath("v2-bad.db"), "PRAGMA user_version") ==
		            2 &&
		        raw_int(tpath("v2-bad.db"),
		                "SELECT count(*) FROM sqlite_schema") == objs,
		    "failed migration to 3 rolled back, still version 2: %s",
		    err);
		free(sql);
	}

	/* v5 from the frozen fixture */
	snprintf(path, sizeof(path), "%s/tests/data/store/v5.sql",
	         srcdir ? srcdir : ".");
	sql = slurp(path, &len);
	if (!sql) {
		tap_ok(0, "read %s", path);
	} else {
		tap_ok(raw_exec(tpath("v5-fixture.db"), sql) == SQLITE_OK &&
		           raw_int(tpath("v5-fixture.db"),
		                   "PRAGMA user_version") == 5,
		       "v5 fixture loaded");
		check_v5_data(tpath("v5-fixture.db"), "v5 fixture");
		free(sql);
	}

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
	test_import_reasoning(st);
	replay_dir(st, "store/seeds", true);
	replay_dir(st, "store_import/crashers", false);
	test_kv(st);
	test_fmt(st);
	test_reasoning(st);
	test_sampling(st);
	test_reports_codec();
	test_reports_remote();
	test_reports(st);
	test_tree(st);
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

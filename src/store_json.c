/*
 * store_json.c - search (FTS5), export (JSON1, Markdown) and import.
 *
 * Import treats its input as hostile: size-limited, checked with
 * json_valid, every element's type checked before use (SQLite's JSON1 does
 * the parsing; elements are walked with json_each so the cost is linear),
 * all rows inserted in one transaction that is rolled back on the first
 * problem, with the element named in the message ("messages[3].role").
 */
#define _POSIX_C_SOURCE 200809L
#include "json.h"
#include "store_int.h"
#include "utf8.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define EXPORT_VERSION  1       /* "parley.version" written and accepted */
#define IMPORT_MAX_MSGS 1000000 /* messages per imported conversation */

/* Search ------------------------------------------------------------------ */

/* Plain words -> an FTS5 query of quoted phrases ("a" "b"), all required. */
static char *fts_query(const char *text)
{
	struct sbuf b = SBUF_INIT;
	const char *p = text;

	while (*p) {
		size_t n;

		while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
			p++;
		n = strcspn(p, " \t\n\r");
		if (n == 0)
			break;
		if (b.len)
			sbuf_add(&b, " ", 1);
		sbuf_add(&b, "\"", 1);
		for (size_t i = 0; i < n; i++)
			sbuf_add(&b, p[i] == '"' ? "\"\"" : p + i,
			         p[i] == '"' ? 2 : 1);
		sbuf_add(&b, "\"", 1);
		p += n;
	}
	return store_sb_take(&b, NULL);
}

void store_hits_free(struct store_hit *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		free(v[i].title);
		free(v[i].snippet);
	}
	free(v);
}

int store_search(struct store *st, const char *text, unsigned flags,
                 size_t limit, const char *open, const char *close,
                 struct store_hit **hits, size_t *n, char *err, size_t errlen)
{
	sqlite3_stmt *s;
	struct store_hit *a = NULL;
	size_t cnt = 0, cap = 0;
	char *q;
	int rc;

	*hits = NULL;
	*n = 0;
	q = flags & STORE_SEARCH_RAW ? strdup(text ? text : "")
	                             : fts_query(text ? text : "");
	if (!q)
		return store_errf(st, STORE_ERR, err, errlen,
		                  "search: out of memory");
	if (!q[0]) {
		free(q);
		return store_errf(st, STORE_EINVAL, err, errlen,
		                  "search: no words to look for");
	}
	rc = store_prepare(
	    st,
	    "SELECT m.conversation_id, m.id, c.title, m.role, "
	    "snippet(messages_fts, 0, ?2, ?3, '...', 16), m.created "
	    "FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid "
	    "JOIN conversations c ON c.id = m.conversation_id "
	    "WHERE messages_fts MATCH ?1 AND (?4 OR c.archived = 0) "
	    "ORDER BY rank, m.id DESC LIMIT ?5",
	    &s, err, errlen);
	if (rc) {
		free(q);
		return rc;
	}
	sqlite3_bind_text(s, 1, q, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, open ? open : "[", -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 3, close ? close : "]", -1, SQLITE_STATIC);
	sqlite3_bind_int(s, 4, (flags & STORE_SEARCH_ARCHIVED) != 0);
	sqlite3_bind_int64(s, 5, limit ? (int64_t)limit : 50);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct store_hit *h;
		int r;

		if (cnt == cap) {
			size_t nc = cap ? cap * 2 : 16;
			struct store_hit *p = realloc(a, nc * sizeof(*p));

			if (!p)
				break;
			a = p;
			cap = nc;
		}
		h = &a[cnt];
		h->conv_id = sqlite3_column_int64(s, 0);
		h->msg_id = sqlite3_column_int64(s, 1);
		h->title = store_col_text(s, 2, NULL);
		r = store_role_parse((const char *)sqlite3_column_text(s, 3));
		h->role = r < 0 ? STORE_ROLE_USER : (enum store_role)r;
		h->snippet = store_col_text(s, 4, NULL);
		h->created_ms = sqlite3_column_int64(s, 5);
		cnt++;
		if (!h->title || !h->snippet)
			break;
	}
	sqlite3_finalize(s);
	free(q);
	if (rc != SQLITE_DONE) {
		store_hits_free(a, cnt);
		if (rc == SQLITE_ROW)
			return store_errf(st, STORE_ERR, err, errlen,
			                  "search: out of memory");
		if ((rc & 0xff) == SQLITE_ERROR)
			return store_errf(st, STORE_EINVAL, err, errlen,
			                  "search: %s", sqlite3_errmsg(st->db));
		return store_fail(st, rc, "search", err, errlen);
	}
	*hits = a;
	*n = cnt;
	return STORE_OK;
}

/* Export --------------------------------------------------------------------
 */

/* Append one token's text as "token" and "bytes" members. */
static void export_tok(struct sbuf *b, const struct store_reports *r,
                       uint32_t off, uint32_t len)
{
	sbuf_adds(b, "\"token\":\"");
	sbuf_add_json_str(b, r->text + off, len);
	sbuf_adds(b, "\",\"bytes\":[");
	for (uint32_t i = 0; i < len; i++)
		sbuf_printf(b, "%s%u", i ? "," : "",
		            (unsigned)(unsigned char)r->text[off + i]);
	sbuf_adds(b, "]");
}

/* A log-probability for JSON (which has no infinities or NaN). */
static void export_lp(struct sbuf *b, float lp)
{
	sbuf_printf(b, ",\"logprob\":%.9g",
	            isfinite(lp) ? (double)lp : -9999.0);
}

/* Append the "logprobs" object of message ID (OpenAI chat completions'
   shape, store.h) to B: {"content": [...]} or {"content": null}. */
static int export_logprobs(struct store *st, int64_t id, struct sbuf *b,
                           char *err, size_t errlen)
{
	struct store_reports r = {0};
	size_t k = 0;
	int rc = store_msg_reports(st, id, &r, err, errlen);

	if (rc)
		return rc;
	sbuf_adds(b, ",\"logprobs\":{\"content\":");
	sbuf_adds(b, r.n ? "[" : "null");
	for (size_t i = 0; i < r.n; i++) {
		const struct store_tok_report *t = &r.v[i];

		if (t->flags & STORE_REPORT_EOG)
			continue;
		sbuf_adds(b, k++ ? ",{" : "{");
		export_tok(b, &r, t->text_off, t->text_len);
		export_lp(b, t->raw_logprob);
		sbuf_adds(b, ",\"top_logprobs\":[");
		for (int32_t j = 0; j < t->n_top; j++) {
			sbuf_adds(b, j ? ",{" : "{");
			export_tok(b, &r, t->top[j].text_off,
			           t->top[j].text_len);
			export_lp(b, t->top[j].logprob);
			sbuf_adds(b, "}");
		}
		sbuf_adds(b, "]}");
	}
	sbuf_adds(b, r.n ? "]}" : "}");
	store_reports_free(&r);
	return STORE_OK;
}

/* Append the JSON arrays of the branch's messages and their meta; with
   LOGPROBS each assistant message's token reports. */
static int export_msgs(struct store *st, const struct store_conv *c,
                       bool logprobs, struct sbuf *msgs, struct sbuf *meta,
                       char *err, size_t errlen)
{
	sqlite3_stmt *s;
	int rc;

	sbuf_add(msgs, "[", 1);
	sbuf_add(meta, "[", 1);
	if (c->system_prompt) {
		if ((rc = store_prepare(st,
		                        "SELECT json_object('role', 'system', "
		                        "'content', ?1)",
		                        &s, err, errlen)))
			return rc;
		sqlite3_bind_text(s, 1, c->system_prompt, -1, SQLITE_STATIC);
		if ((rc = sqlite3_step(s)) == SQLITE_ROW)
			sbuf_adds(msgs,
			          (const char *)sqlite3_column_text(s, 0));
		sqlite3_finalize(s);
		if (rc != SQLITE_ROW)
			return store_fail(st, rc, "export", err, errlen);
		sbuf_adds(meta, "{\"system_prompt\":true}");
	}
	if ((rc = store_prepare(
	         st,
	         "WITH RECURSIVE br(id, depth) AS ("
	         " SELECT ?1, 0"
	         " UNION ALL"
	         " SELECT m.parent_id, br.depth + 1 FROM messages m"
	         " JOIN br ON m.id = br.id"
	         " WHERE m.parent_id IS NOT NULL AND br.depth < 1000000)"
	         /* reasoning as the OpenAI API gives it; its token count
	            and an unfinished block in the metadata, with the server
	            that answered and the sampling settings (merged in: no
	            key when there is nothing to say) */
	         " SELECT CASE WHEN m.reasoning <> '' OR m.reasoning_open"
	         " THEN json_object('role', m.role, 'content', m.content,"
	         " 'reasoning_content', m.reasoning)"
	         " ELSE json_object('role', m.role, 'content', m.content) END,"
	         " json_patch(json_patch(json_patch(json_object("
	         " 'finish', m.finish, 'n_tokens', m.n_tokens,"
	         " 'n_prompt_tokens', m.n_prompt_tokens,"
	         " 'prefill_ms', m.prefill_ms, 'decode_ms', m.decode_ms,"
	         " 'created', m.created),"
	         " CASE WHEN m.reasoning <> '' OR m.reasoning_open"
	         " THEN json_object('reasoning_tokens', m.reasoning_tokens,"
	         " 'reasoning_unfinished', json(CASE WHEN m.reasoning_open"
	         " THEN 'true' ELSE 'false' END)) ELSE '{}' END),"
	         " CASE WHEN m.server <> '' THEN json_object('server',"
	         " m.server, 'server_model', m.server_model) ELSE '{}' END),"
	         " CASE WHEN m.sampling IS NOT NULL THEN json_object("
	         "'sampling', json(m.sampling)) ELSE '{}' END),"
	         " m.id, m.role = 'assistant'"
	         " FROM br JOIN messages m ON m.id = br.id"
	         " WHERE m.conversation_id = ?2 ORDER BY br.depth DESC",
	         &s, err, errlen)))
		return rc;
	sqlite3_bind_int64(s, 1, c->leaf_id);
	sqlite3_bind_int64(s, 2, c->id);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		const char *mj = (const char *)sqlite3_column_text(s, 0);
		size_t ml = (size_t)sqlite3_column_bytes(s, 0);

		if (msgs->len > 1)
			sbuf_add(msgs, ",", 1);
		if (meta->len > 1)
			sbuf_add(meta, ",", 1);
		if (logprobs && sqlite3_column_int(s, 3) && ml > 1) {
			/* json_object's text ends with its closing brace */
			sbuf_add(msgs, mj, ml - 1);
			if ((rc =
			         export_logprobs(st, sqlite3_column_int64(s, 2),
			                         msgs, err, errlen))) {
				sqlite3_finalize(s);
				return rc;
			}
			sbuf_add(msgs, "}", 1);
		} else {
			sbuf_add(msgs, mj, ml);
		}
		sbuf_adds(meta, (const char *)sqlite3_column_text(s, 1));
	}
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE)
		return store_fail(st, rc, "export", err, errlen);
	sbuf_add(msgs, "]", 1);
	sbuf_add(meta, "]", 1);
	return STORE_OK;
}

int store_export_json(struct store *st, int64_t id, char **out, size_t *len,
                      char *err, size_t errlen)
{
	return store_export_json_flags(st, id, 0, out, len, err, errlen);
}

int store_export_json_flags(struct store *st, int64_t id, unsigned flags,
                            char **out, size_t *len, char *err, size_t errlen)
{
	struct sbuf msgs = SBUF_INIT, meta = SBUF_INIT;
	struct store_conv c;
	sqlite3_stmt *s = NULL;
	int rc;

	*out = NULL;
	if ((rc = sqlite3_exec(st->db, "BEGIN", NULL, NULL, NULL)))
		return store_fail(st, rc, "export", err, errlen);
	rc = store_conv_read(st, id, &c, err, errlen);
	if (rc == STORE_OK) {
		rc = export_msgs(st, &c, (flags & STORE_EXPORT_LOGPROBS) != 0,
		                 &msgs, &meta, err, errlen);
		store_conv_clear(&c);
	}
	if (rc == STORE_OK && (msgs.failed || meta.failed))
		rc = store_errf(st, STORE_ERR, err, errlen,
		                "export: out of memory");
	if (rc == STORE_OK)
		rc = store_prepare(
		    st,
		    "SELECT json_object('model', c.model_path,"
		    " 'messages', json(?2),"
		    " 'parley', json_object("
		    "  'format', 'parley-conversation', 'version', ?4,"
		    "  'title', c.title, 'created', c.created,"
		    "  'updated', c.updated,"
		    "  'archived', json(CASE WHEN c.archived THEN 'true'"
		    "   ELSE 'false' END),"
		    "  'model_size', c.model_size,"
		    "  'model_fingerprint', c.model_fingerprint,"
		    "  'template', c.template,"
		    "  'sampling', json(c.sampling),"
		    "  'messages', json(?3)))"
		    " FROM conversations c WHERE c.id = ?1",
		    &s, err, errlen);
	if (rc == STORE_OK) {
		sqlite3_bind_int64(s, 1, id);
		sqlite3_bind_text64(s, 2, msgs.buf, msgs.len, SQLITE_STATIC,
		                    SQLITE_UTF8);
		sqlite3_bind_text64(s, 3, meta.buf, meta.len, SQLITE_STATIC,
		                    SQLITE_UTF8);
		sqlite3_bind_int(s, 4, EXPORT_VERSION);
		rc = sqlite3_step(s);
		if (rc == SQLITE_ROW) {
			*out = store_col_text(s, 0, len);
			rc = *out ? STORE_OK
			          : store_errf(st, STORE_ERR, err, errlen,
			                       "export: out of memory");
		} else {
			rc = store_fail(st, rc, "export", err, errlen);
		}
		sqlite3_finalize(s);
	}
	store_rollback(st);
	free(store_sb_take(&msgs, NULL));
	free(store_sb_take(&meta, NULL));
	return rc;
}

int store_export_md(struct store *st, int64_t id, char **out, size_t *len,
                    char *err, size_t errlen)
{
	struct store_conv c;
	struct store_msg *m;
	size_t n;
	int rc;

	*out = NULL;
	if ((rc = store_conv_get(st, id, &c, &m, &n, err, errlen)))
		return rc;
	*out = store_fmt_markdown(&c, m, n);
	if (*out && len)
		*len = strlen(*out);
	store_conv_clear(&c);
	store_msg_free(m, n);
	return *out ? STORE_OK
	            : store_errf(st, STORE_ERR, err, errlen,
	                         "export: out of memory");
}

/* Import --------------------------------------------------------------------
 */

/* Conversation-level fields of an import document. */
struct imp_conv {
	char *model, *title, *fingerprint, *template_name, *sampling;
	int64_t model_size, created, updated; /* -1 when absent */
	int archived;                         /* 0/1 */
};

static void imp_conv_clear(struct imp_conv *c)
{
	free(c->model);
	free(c->title);
	free(c->fingerprint);
	free(c->template_name);
	free(c->sampling);
}

/* Type-checked field K of an import statement row (type at K, value at
 * K+1). WANT: "text", "integer", "number", "bool", "object". NULL type
 * (absent) or JSON null is allowed and leaves the output untouched. */
static int imp_field(struct store *st, sqlite3_stmt *s, int k, const char *want,
                     const char *name, char **str, int64_t *num, double *real,
                     char *err, size_t errlen)
{
	const char *t = (const char *)sqlite3_column_text(s, k);
	bool ok;

	if (!t || strcmp(t, "null") == 0)
		return STORE_OK;
	if (strcmp(want, "number") == 0)
		ok = strcmp(t, "integer") == 0 || strcmp(t, "real") == 0;
	else if (strcmp(want, "bool") == 0)
		ok = strcmp(t, "true") == 0 || strcmp(t, "false") == 0;
	else
		ok = strcmp(t, want) == 0;
	if (!ok)
		return store_errf(st, STORE_EINVAL, err, errlen,
		                  "import: %s is %s, expected %s", name, t,
		                  want);
	if (str && !(*str = store_col_text(s, k + 1, NULL)))
		return store_errf(st, STORE_ERR, err, errlen,
		                  "import: out of memory");
	/* every number of the format is a non-negative count, size, time */
	if (strcmp(want, "integer") == 0 &&
	    (sqlite3_column_type(s, k + 1) != SQLITE_INTEGER ||
	     sqlite3_column_int64(s, k + 1) < 0))
		return store_errf(st, STORE_EINVAL, err, errlen,
		                  "import: %s is out of range (0..2^63)", name);
	if (strcmp(want, "number") == 0 &&
	    !(sqlite3_column_double(s, k + 1) >= 0 &&
	      isfinite(sqlite3_column_double(s, k + 1))))
		return store_errf(st, STORE_EINVAL, err, errlen,
		                  "import: %s is not a finite number >= 0",
		                  name);
	if (num && strcmp(want, "bool") == 0)
		*num = strcmp(t, "true") == 0;
	else if (num)
		*num = sqlite3_column_int64(s, k + 1);
	if (real)
		*real = sqlite3_column_double(s, k + 1);
	return STORE_OK;
}

/* Read and check the conversation-level fields and the document shape. */
static int imp_read_conv(struct store *st, const char *json, size_t len,
                         struct imp_conv *c, const char **msgs_path,
                         bool *has_meta, char *err, size_t errlen)
{
	sqlite3_stmt *s;
	int64_t version = EXPORT_VERSION;
	char *format = NULL;
	const char *top, *mt, *pt, *pm;
	int rc;

	if ((rc = store_prepare(
	         st,
	         "SELECT json_valid(?1), json_type(?1),"
	         " json_type(?1, '$.messages'), json_type(?1, '$.parley'),"
	         " json_type(?1, '$.parley.messages'),"
	         " json_type(?1, '$.model'), json_extract(?1, '$.model'),"
	         " json_type(?1, '$.parley.title'),"
	         " json_extract(?1, '$.parley.title'),"
	         " json_type(?1, '$.parley.created'),"
	         " json_extract(?1, '$.parley.created'),"
	         " json_type(?1, '$.parley.updated'),"
	         " json_extract(?1, '$.parley.updated'),"
	         " json_type(?1, '$.parley.archived'),"
	         " json_extract(?1, '$.parley.archived'),"
	         " json_type(?1, '$.parley.model_size'),"
	         " json_extract(?1, '$.parley.model_size'),"
	         " json_type(?1, '$.parley.model_fingerprint'),"
	         " json_extract(?1, '$.parley.model_fingerprint'),"
	         " json_type(?1, '$.parley.template'),"
	         " json_extract(?1, '$.parley.template'),"
	         " json_type(?1, '$.parley.sampling'),"
	         " json_extract(?1, '$.parley.sampling'),"
	         " json_type(?1, '$.parley.format'),"
	         " json_extract(?1, '$.parley.format'),"
	         " json_type(?1, '$.parley.version'),"
	         " json_extract(?1, '$.parley.version'),"
	         " json_array_length(?1, '$.messages'),"
	         " json_array_length(?1, '$.parley.messages')",
	         &s, err, errlen)))
		return rc;
	sqlite3_bind_text64(s, 1, json, len, SQLITE_STATIC, SQLITE_UTF8);
	rc = sqlite3_step(s);
	if (rc != SQLITE_ROW) {
		rc = store_errf(st, STORE_EINVAL, err, errlen,
		                "import: not valid JSON (%s)",
		                sqlite3_errmsg(st->db));
		goto out;
	}
	rc = STORE_OK;
	top = (const char *)sqlite3_column_text(s, 1);
	mt = (const char *)sqlite3_column_text(s, 2);
	pt = (const char *)sqlite3_column_text(s, 3);
	pm = (const char *)sqlite3_column_text(s, 4);
	if (!sqlite3_column_int(s, 0)) {
		rc = store_errf(st, STORE_EINVAL, err, errlen,
		                "import: not valid JSON");
		goto out;
	}
	if (strcmp(top, "array") == 0) {
		*msgs_path = "$";
		*has_meta = false;
		goto out;
	}
	if (strcmp(top, "object") != 0 || !mt || strcmp(mt, "array") != 0) {
		rc = store_errf(st, STORE_EINVAL, err, errlen,
		                "import: expected an array of messages or an "
		                "object with a \"messages\" array");
		goto out;
	}
	*msgs_path = "$.messages";
	if (pt && strcmp(pt, "object") != 0 && strcmp(pt, "null") != 0) {
		rc =
		    store_errf(st, STORE_EINVAL, err, errlen,
		               "import: \"parley\" is %s, expected object", pt);
		goto out;
	}
	*has_meta = pm != NULL && strcmp(pm, "null") != 0;
	if (*has_meta && strcmp(pm, "array") != 0) {
		rc = store_errf(st, STORE_EINVAL, err, errlen,
		                "import: parley.messages is %s, expected array",
		                pm);
		goto out;
	}
	if (*has_meta &&
	    sqlite3_column_int64(s, 27) != sqlite3_column_int64(s, 28)) {
		rc = store_errf(st, STORE_EINVAL, err, errlen,
		                "import: %lld messages but %lld entries in "
		                "parley.messages",
		                (long long)sqlite3_column_int64(s, 27),
		                (long long)sqlite3_column_int64(s, 28));
		goto out;
	}
	int64_t arch = 0;
	if ((rc = imp_field(st, s, 5, "text", "model", &c->model, NULL, NULL,
	                    err, errlen)) ||
	    (rc = imp_field(st, s, 7, "text", "parley.title", &c->title, NULL,
	                    NULL, err, errlen)) ||
	    (rc = imp_field(st, s, 9, "integer", "parley.created", NULL,
	                    &c->created, NULL, err, errlen)) ||
	    (rc = imp_field(st, s, 11, "integer", "parley.updated", NULL,
	                    &c->updated, NULL, err, errlen)) ||
	    (rc = imp_field(st, s, 13, "bool", "parley.archived", NULL, &arch,
	                    NULL, err, errlen)) ||
	    (rc = imp_field(st, s, 15, "integer", "parley.model_size", NULL,
	                    &c->model_size, NULL, err, errlen)) ||
	    (rc = imp_field(st, s, 17, "text", "parley.model_fingerprint",
	                    &c->fingerprint, NULL, NULL, err, errlen)) ||
	    (rc = imp_field(st, s, 19, "text", "parley.template",
	                    &c->template_name, NULL, NULL, err, errlen)) ||
	    (rc = imp_field(st, s, 21, "object", "parley.sampling",
	                    &c->sampling, NULL, NULL, err, errlen)) ||
	    (rc = imp_field(st, s, 23, "text", "parley.format", &format, NULL,
	                    NULL, err, errlen)) ||
	    (rc = imp_field(st, s, 25, "integer", "parley.version", NULL,
	                    &version, NULL, err, errlen)))
		goto out;
	c->archived = arch != 0;
	if (format && strcmp(format, "parley-conversation") != 0)
		rc = store_errf(st, STORE_EINVAL, err, errlen,
		                "import: parley.format is not "
		                "\"parley-conversation\"");
	else if (version < 1 || version > EXPORT_VERSION)
		rc = store_errf(st, STORE_EINVAL, err, errlen,
		                "import: parley.version %lld is not supported "
		                "(this parley writes %d)",
		                (long long)version, EXPORT_VERSION);
	else if (c->model_size < -1)
		rc = store_errf(st, STORE_EINVAL, err, errlen,
		                "import: negative parley.model_size");
out:
	free(format);
	sqlite3_finalize(s);
	return rc;
}

/* One message of an import document, checked. */
struct imp_msg {
	int role;      /* enum store_role */
	char *content; /* owned */
	size_t len;    /* bytes of content */
	char *finish;  /* owned; NULL when absent */
	struct store_msg_stats stats;
	int64_t created;     /* -1 when absent */
	int64_t system;      /* meta system_prompt flag */
	char *sampling;      /* a reply's sampling settings (JSON object, owned;
	                        NULL when absent) */
	char *reasoning;     /* a reply's reasoning_content (owned) or NULL */
	size_t rlen;         /* bytes of reasoning */
	int64_t n_reasoning; /* parley.messages[i].reasoning_tokens */
	int64_t reasoning_open; /* .reasoning_unfinished */
};

/* Read message row S (and meta row M, or NULL) into *X. */
static int imp_read_msg(struct store *st, sqlite3_stmt *s, sqlite3_stmt *m,
                        size_t i, struct imp_msg *x, char *err, size_t errlen)
{
	char name[64], *role = NULL;
	int rc;

	memset(x, 0, sizeof(*x));
	x->created = -1;
	if (strcmp((const char *)sqlite3_column_text(s, 0), "object") != 0)
		return store_errf(
		    st, STORE_EINVAL, err, errlen,
		    "import: messages[%zu] is %s, expected object", i,
		    sqlite3_column_text(s, 0));
	snprintf(name, sizeof(name), "messages[%zu].role", i);
	if ((rc = imp_field(st, s, 1, "text", name, &role, NULL, NULL, err,
	                    errlen)))
		return rc;
	x->role = store_role_parse(role);
	free(role);
	if (x->role < 0)
		return store_errf(st, STORE_EINVAL, err, errlen,
		                  "import: %s must be \"system\", \"user\" or "
		                  "\"assistant\"",
		                  name);
	snprintf(name, sizeof(name), "messages[%zu].content", i);
	if (!sqlite3_column_text(s, 3) ||
	    strcmp((const char *)sqlite3_column_text(s, 3), "text") != 0)
		return store_errf(st, STORE_EINVAL, err, errlen,
		                  "import: %s must be a string", name);
	if (!(x->content = store_col_text(s, 4, &x->len)))
		return store_errf(st, STORE_ERR, err, errlen,
		                  "import: out of memory");
	/* a reply's reasoning, as the export (and the OpenAI API) gives it */
	snprintf(name, sizeof(name), "messages[%zu].reasoning_content", i);
	if ((rc = imp_field(st, s, 5, "text", name, NULL, NULL, NULL, err,
	                    errlen)))
		return rc;
	if (sqlite3_column_type(s, 6) != SQLITE_NULL) {
		if (x->role != STORE_ROLE_ASSISTANT)
			return store_errf(st, STORE_EINVAL, err, errlen,
			                  "import: %s: only an assistant "
			                  "message has reasoning",
			                  name);
		if (!(x->reasoning = store_col_text(s, 6, &x->rlen)))
			return store_errf(st, STORE_ERR, err, errlen,
			                  "import: out of memory");
	}
	if (!m)
		return STORE_OK;
	if (strcmp((const char *)sqlite3_column_text(m, 0), "object") != 0)
		return store_errf(st, STORE_EINVAL, err, errlen,
		                  "import: parley.messages[%zu] is %s, "
		                  "expected object",
		                  i, sqlite3_column_text(m, 0));
#define F(k, want, what, str, num, real)                                       \
	(snprintf(name, sizeof(name), "parley.messages[%zu]." what, i),        \
	 imp_field(st, m, k, want, name, str, num, real, err, errlen))
	if ((rc = F(1, "text", "finish", &x->finish, NULL, NULL)) ||
	    (rc =
	         F(3, "integer", "n_tokens", NULL, &x->stats.n_tokens, NULL)) ||
	    (rc = F(5, "integer", "n_prompt_tokens", NULL,
	            &x->stats.n_prompt_tokens, NULL)) ||
	    (rc = F(7, "number", "prefill_ms", NULL, NULL,
	            &x->stats.prefill_ms)) ||
	    (rc = F(9, "number", "decode_ms", NULL, NULL,
	            &x->stats.decode_ms)) ||
	    (rc = F(11, "integer", "created", NULL, &x->created, NULL)) ||
	    (rc = F(13, "bool", "system_prompt", NULL, &x->system, NULL)) ||
	    (rc = F(15, "object", "sampling", &x->sampling, NULL, NULL)) ||
	    (rc = F(17, "integer", "reasoning_tokens", NULL, &x->n_reasoning,
	            NULL)) ||
	    (rc = F(19, "bool", "reasoning_unfinished", NULL,
	            &x->reasoning_open, NULL)))
		return rc;
#undef F
	if (x->finish && store_finish_parse(x->finish) < 0)
		return store_errf(st, STORE_EINVAL, err, errlen,
		                  "import: parley.messages[%zu].finish \"%s\" "
		                  "is not stop, length, interrupted or error",
		                  i, x->finish);
	return STORE_OK;
}

/* Insert the conversation row; *ID its id. */
static int imp_insert_conv(struct store *st, const struct imp_conv *c,
                           const char *system, int64_t now, int64_t *id,
                           char *err, size_t errlen)
{
	sqlite3_stmt *s;
	int rc;

	if ((rc = store_prepare(st,
	                        "INSERT INTO conversations (title, model_path,"
	                        " model_size, model_fingerprint, template,"
	                        " system_prompt, sampling, created, updated,"
	                        " archived) VALUES (?1, ?2, ?3, ?4, ?5, ?6,"
	                        " ?7, ?8, ?9, ?10)",
	                        &s, err, errlen)))
		return rc;
	sqlite3_bind_text(s, 1, c->title ? c->title : "", -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, c->model ? c->model : "", -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 3, c->model_size > 0 ? c->model_size : 0);
	sqlite3_bind_text(s, 4, c->fingerprint ? c->fingerprint : "", -1,
	                  SQLITE_STATIC);
	sqlite3_bind_text(s, 5, c->template_name ? c->template_name : "", -1,
	                  SQLITE_STATIC);
	if (system)
		sqlite3_bind_text(s, 6, system, -1, SQLITE_STATIC);
	if (c->sampling)
		sqlite3_bind_text(s, 7, c->sampling, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 8, c->created >= 0 ? c->created : now);
	sqlite3_bind_int64(s, 9, c->updated >= 0 ? c->updated : now);
	sqlite3_bind_int(s, 10, c->archived);
	rc = sqlite3_step(s);
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE)
		return store_fail(st, rc, "import", err, errlen);
	*id = sqlite3_last_insert_rowid(st->db);
	return STORE_OK;
}

/* Insert message X of conversation CONV under PARENT; *ID its id. */
static int imp_insert_msg(struct store *st, int64_t conv, int64_t parent,
                          const struct imp_msg *x, bool has_meta, int64_t when,
                          int64_t *id, char *err, size_t errlen)
{
	sqlite3_stmt *s;
	const char *finish = x->finish;
	int rc;

	if (!finish)
		finish = has_meta && x->role == STORE_ROLE_ASSISTANT
		             ? "interrupted"
		             : "stop";
	if ((rc = store_prepare(st,
	                        "INSERT INTO messages (conversation_id,"
	                        " parent_id, role, content, n_tokens,"
	                        " n_prompt_tokens, prefill_ms, decode_ms,"
	                        " finish, created, updated, sampling,"
	                        " reasoning, reasoning_tokens, reasoning_open)"
	                        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9,"
	                        " ?10, ?10, ?11, ?12, ?13, ?14)",
	                        &s, err, errlen)))
		return rc;
	sqlite3_bind_int64(s, 1, conv);
	if (parent)
		sqlite3_bind_int64(s, 2, parent);
	sqlite3_bind_text(s, 3, store_role_name((enum store_role)x->role), -1,
	                  SQLITE_STATIC);
	sqlite3_bind_text64(s, 4, x->content, x->len, SQLITE_STATIC,
	                    SQLITE_UTF8);
	sqlite3_bind_int64(s, 5, x->stats.n_tokens);
	sqlite3_bind_int64(s, 6, x->stats.n_prompt_tokens);
	sqlite3_bind_double(s, 7, x->stats.prefill_ms);
	sqlite3_bind_double(s, 8, x->stats.decode_ms);
	sqlite3_bind_text(s, 9, finish, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 10, x->created >= 0 ? x->created : when);
	if (x->sampling && x->role == STORE_ROLE_ASSISTANT) /* replies' only */
		sqlite3_bind_text(s, 11, x->sampling, -1, SQLITE_STATIC);
	sqlite3_bind_text64(s, 12, x->reasoning ? x->reasoning : "",
	                    x->reasoning ? x->rlen : 0, SQLITE_STATIC,
	                    SQLITE_UTF8);
	sqlite3_bind_int64(s, 13, x->reasoning ? x->n_reasoning : 0);
	sqlite3_bind_int(s, 14, x->reasoning && x->reasoning_open ? 1 : 0);
	rc = sqlite3_step(s);
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE)
		return store_fail(st, rc, "import", err, errlen);
	*id = sqlite3_last_insert_rowid(st->db);
	return STORE_OK;
}

/* Walk the messages (and meta) and insert them; inside the transaction. */
static int imp_messages(struct store *st, const char *json, size_t len,
                        const char *path, bool has_meta, struct imp_conv *c,
                        int64_t *conv, char *err, size_t errlen)
{
	static const char msg_sql[] =
	    "SELECT type,"
	    " CASE WHEN type = 'object' THEN json_type(value, '$.role') END,"
	    " CASE WHEN type = 'object' THEN json_extract(value, '$.role') END,"
	    " CASE WHEN type = 'object' THEN json_type(value, '$.content') END,"
	    " CASE WHEN type = 'object' THEN json_extract(value, '$.content')"
	    " END,"
	    " CASE WHEN type = 'object' THEN"
	    " json_type(value, '$.reasoning_content') END,"
	    " CASE WHEN type = 'object' THEN"
	    " json_extract(value, '$.reasoning_content') END"
	    " FROM json_each(?1, ?2) ORDER BY key";
#define JT(p) " CASE WHEN type = 'object' THEN json_type(value, '" p "') END,"
#define JX(p) " CASE WHEN type = 'object' THEN json_extract(value, '" p "') END"
	static const char meta_sql[] =
	    "SELECT type," JT("$.finish") JX("$.finish") "," JT(
	        "$.n_tokens") JX("$.n_tokens") "," JT("$.n_prompt_tokens")
	        JX("$.n_prompt_tokens") "," JT("$.prefill_ms") JX(
	            "$.prefill_ms") "," JT("$.decode_ms")
	            JX("$.decode_ms") "," JT("$.created") JX(
	                "$.created") "," JT("$.system_prompt")
	                JX("$.system_prompt") "," JT("$.sampling") JX(
	                    "$.sampling") "," JT("$.reasoning_tokens")
	                    JX("$.reasoning_tokens") "," JT(
	                        "$.reasoning_unfinished")
	                        JX("$.reasoning_unfinished") " FROM json_each("
	                                                     "?1, "
	                                                     "'$.parley."
	                                                     "messages') "
	                                                     "ORDER BY key";
#undef JT
#undef JX
	sqlite3_stmt *s = NULL, *m = NULL;
	struct imp_msg x;
	int64_t parent = 0, id = 0, now = store_now_ms();
	size_t i = 0;
	int rc;

	rc = store_prepare(st, msg_sql, &s, err, errlen);
	if (rc == STORE_OK && has_meta)
		rc = store_prepare(st, meta_sql, &m, err, errlen);
	if (rc)
		goto out;
	sqlite3_bind_text64(s, 1, json, len, SQLITE_STATIC, SQLITE_UTF8);
	sqlite3_bind_text(s, 2, path, -1, SQLITE_STATIC);
	if (m)
		sqlite3_bind_text64(m, 1, json, len, SQLITE_STATIC,
		                    SQLITE_UTF8);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (m && sqlite3_step(m) != SQLITE_ROW) {
			rc = store_errf(st, STORE_EINVAL, err, errlen,
			                "import: parley.messages too short");
			goto out;
		}
		if (i >= IMPORT_MAX_MSGS) {
			rc = store_errf(st, STORE_EINVAL, err, errlen,
			                "import: more than %d messages",
			                IMPORT_MAX_MSGS);
			goto out;
		}
		rc = imp_read_msg(st, s, m, i, &x, err, errlen);
		if (rc == STORE_OK && x.system && (i > 0 || x.role != 0))
			rc = store_errf(st, STORE_EINVAL, err, errlen,
			                "import: only messages[0] with role "
			                "system can be the system prompt");
		if (rc == STORE_OK && i == 0) {
			bool sys = x.role == STORE_ROLE_SYSTEM &&
			           (has_meta ? x.system != 0 : true);

			rc = imp_insert_conv(st, c, sys ? x.content : NULL, now,
			                     conv, err, errlen);
			if (sys) {
				free(x.content);
				free(x.finish);
				free(x.sampling);
				free(x.reasoning);
				i++;
				continue;
			}
		}
		if (rc == STORE_OK) {
			if (!c->title && x.role == STORE_ROLE_USER) {
				/* title from the first user message */
				c->title =
				    store_fmt_title(x.content, x.len, 60);
				if (c->title) {
					sqlite3_stmt *u;

					if (store_prepare(st,
					                  "UPDATE conversations"
					                  " SET title = ?2 "
					                  "WHERE id = ?1",
					                  &u, err,
					                  errlen) == STORE_OK) {
						sqlite3_bind_int64(u, 1, *conv);
						sqlite3_bind_text(
						    u, 2, c->title, -1,
						    SQLITE_STATIC);
						sqlite3_step(u);
						sqlite3_finalize(u);
					}
				}
			}
			rc = imp_insert_msg(st, *conv, parent, &x, has_meta,
			                    c->created >= 0 ? c->created : now,
			                    &id, err, errlen);
			parent = id;
		}
		free(x.content);
		free(x.finish);
		free(x.sampling);
		free(x.reasoning);
		if (rc)
			goto out;
		i++;
	}
	if (rc != SQLITE_DONE) {
		rc = store_fail(st, rc, "import", err, errlen);
		goto out;
	}
	rc = STORE_OK;
	if (i == 0 && strcmp(path, "$") == 0) {
		rc = store_errf(st, STORE_EINVAL, err, errlen,
		                "import: no messages");
		goto out;
	}
	if (i == 0) /* an exported empty conversation */
		rc = imp_insert_conv(st, c, NULL, now, conv, err, errlen);
	if (id) {
		sqlite3_stmt *u;

		if ((rc = store_prepare(st,
		                        "UPDATE conversations SET leaf_id = ?2"
		                        " WHERE id = ?1",
		                        &u, err, errlen)) == STORE_OK) {
			sqlite3_bind_int64(u, 1, *conv);
			sqlite3_bind_int64(u, 2, id);
			rc = sqlite3_step(u) == SQLITE_DONE
			         ? STORE_OK
			         : store_fail(st, sqlite3_errcode(st->db),
			                      "import", err, errlen);
			sqlite3_finalize(u);
		}
	}
out:
	sqlite3_finalize(s);
	sqlite3_finalize(m);
	return rc;
}

/* LEN bytes of JSON checked by the project's strict parser before any of
 * SQLite's JSON functions sees them: Debian 12's SQLite (3.40) calls an
 * object with an array for a key valid and then crashes in a path lookup
 * inside it (a crash found by fuzz_store_import). The parser is bounded
 * (json.h: depth, memory a small multiple of LEN, LEN at most
 * STORE_IMPORT_MAX here) and names the line and column of the fault. */
static int imp_check_json(struct store *st, const char *json, size_t len,
                          char *err, size_t errlen)
{
	struct json_value *v = NULL;
	char jerr[160];

	if (json_parse(json, len, &v, jerr, sizeof(jerr)) != 0)
		return store_errf(st, STORE_EINVAL, err, errlen,
		                  "import: not valid JSON (%s)", jerr);
	json_free(v);
	return STORE_OK;
}

int store_import_json(struct store *st, const char *json, size_t len,
                      int64_t *id, char *err, size_t errlen)
{
	struct imp_conv c = {.model_size = -1, .created = -1, .updated = -1};
	const char *path = "$";
	bool has_meta = false;
	size_t bad;
	int rc;

	*id = 0;
	if (len > STORE_IMPORT_MAX)
		return store_errf(st, STORE_EINVAL, err, errlen,
		                  "import: %zu bytes is over the limit of %u",
		                  len, STORE_IMPORT_MAX);
	if (memchr(json, '\0', len))
		return store_errf(st, STORE_EINVAL, err, errlen,
		                  "import: the input contains a NUL byte");
	/* SQLite's JSON functions take text as UTF-8 and read past the end
	   of a broken sequence (a crash found by fuzz_store_import) */
	if ((bad = utf8_check(json, len)) != len)
		return store_errf(st, STORE_EINVAL, err, errlen,
		                  "import: the input is not valid UTF-8 (byte "
		                  "%zu)",
		                  bad);
	if ((rc = imp_check_json(st, json, len, err, errlen)))
		return rc;
	if ((rc = store_begin(st, err, errlen)))
		return rc;
	rc = imp_read_conv(st, json, len, &c, &path, &has_meta, err, errlen);
	if (rc == STORE_OK)
		rc = imp_messages(st, json, len, path, has_meta, &c, id, err,
		                  errlen);
	imp_conv_clear(&c);
	if (rc) {
		*id = 0;
		store_rollback(st);
		return rc;
	}
	return store_commit(st, err, errlen);
}

int store_import_file(struct store *st, const char *path, int64_t *id,
                      char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	size_t cap = 1 << 16, len = 0, r;
	char *buf = NULL, *p;
	struct stat sb;
	int rc;

	*id = 0;
	if (!f)
		return store_errf(NULL, STORE_ERR, err, errlen, "%s: %s", path,
		                  strerror(errno));
	if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) &&
	    (uint64_t)sb.st_size > STORE_IMPORT_MAX) {
		rc = store_errf(NULL, STORE_EINVAL, err, errlen,
		                "%s: larger than the import limit of %u bytes",
		                path, STORE_IMPORT_MAX);
		goto out;
	}
	for (;;) { /* bounded even when the size is unknown (a pipe) */
		if (len == cap || !buf) {
			if (buf)
				cap *= 2;
			p = realloc(buf, cap);
			if (!p) {
				rc = store_errf(NULL, STORE_ERR, err, errlen,
				                "%s: out of memory", path);
				goto out;
			}
			buf = p;
		}
		r = fread(buf + len, 1, cap - len, f);
		len += r;
		if (len > STORE_IMPORT_MAX) {
			rc = store_errf(NULL, STORE_EINVAL, err, errlen,
			                "%s: larger than the import limit of "
			                "%u bytes",
			                path, STORE_IMPORT_MAX);
			goto out;
		}
		if (r == 0)
			break;
	}
	if (ferror(f)) {
		rc = store_errf(NULL, STORE_ERR, err, errlen, "%s: read error",
		                path);
		goto out;
	}
	rc = store_import_json(st, buf, len, id, err, errlen);
	if (rc && err && errlen) { /* name the file, not only the database */
		size_t n = strlen(err);
		char *copy = malloc(n + 1);

		if (copy) {
			memcpy(copy, err, n + 1);
			snprintf(err, errlen, "%s: %s", path, copy);
			free(copy);
		}
	}
out:
	free(buf);
	fclose(f);
	return rc;
}

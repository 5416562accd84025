/*
 * store_origin.c - what produced a reply: which server and model answered
 * (schema step 4: the columns server and server_model of conversations
 * and messages; '' means the local engine) and the sampling settings it
 * was drawn with (step 6: messages.sampling, a JSON object, NULL when not
 * recorded). A local reply's server_model names the local model; after a
 * switch of models the conversation's model columns follow it. A server
 * is stored as its base URL, which never holds a key or a password
 * (remote_url_check refuses them).
 */
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* UPDATE TABLE's row ID with the two texts; ENOTFOUND when no row. */
static int origin_write(struct store *st, const char *sql, int64_t id,
                        const char *server, const char *model, const char *what,
                        char *err, size_t errlen)
{
	sqlite3_stmt *s;
	int rc;

	if ((rc = store_writable(st, err, errlen)) ||
	    (rc = store_prepare(st, sql, &s, err, errlen)))
		return rc;
	sqlite3_bind_int64(s, 1, id);
	sqlite3_bind_text(s, 2, server ? server : "", -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(s, 3, model ? model : "", -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(s);
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE)
		return store_fail(st, rc, what, err, errlen);
	if (sqlite3_changes(st->db) == 0)
		return store_errf(st, STORE_ENOTFOUND, err, errlen,
		                  "%s: no row %lld", what, (long long)id);
	return STORE_OK;
}

int store_conv_set_origin(struct store *st, int64_t id, const char *server,
                          const char *server_model, char *err, size_t errlen)
{
	return origin_write(st,
	                    "UPDATE conversations SET server = ?2, "
	                    "server_model = ?3 WHERE id = ?1",
	                    id, server, server_model,
	                    "record the conversation's server", err, errlen);
}

int store_msg_set_origin(struct store *st, int64_t msg_id, const char *server,
                         const char *server_model, char *err, size_t errlen)
{
	return origin_write(st,
	                    "UPDATE messages SET server = ?2, "
	                    "server_model = ?3 WHERE id = ?1",
	                    msg_id, server, server_model,
	                    "record the reply's server", err, errlen);
}

int store_conv_set_model(struct store *st, int64_t id,
                         const struct store_conv_new *c, char *err,
                         size_t errlen)
{
	sqlite3_stmt *s;
	int rc;

	if ((rc = store_writable(st, err, errlen)) ||
	    (rc = store_prepare(st,
	                        "UPDATE conversations SET model_path = ?2, "
	                        "model_size = ?3, model_fingerprint = ?4, "
	                        "template = ?5 WHERE id = ?1",
	                        &s, err, errlen)))
		return rc;
	sqlite3_bind_int64(s, 1, id);
	sqlite3_bind_text(s, 2, c->model_path ? c->model_path : "", -1,
	                  SQLITE_TRANSIENT);
	sqlite3_bind_int64(s, 3, c->model_size);
	sqlite3_bind_text(s, 4,
	                  c->model_fingerprint ? c->model_fingerprint : "", -1,
	                  SQLITE_TRANSIENT);
	sqlite3_bind_text(s, 5, c->template_name ? c->template_name : "", -1,
	                  SQLITE_TRANSIENT);
	rc = sqlite3_step(s);
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE)
		return store_fail(st, rc, "record the conversation's model",
		                  err, errlen);
	if (sqlite3_changes(st->db) == 0)
		return store_errf(st, STORE_ENOTFOUND, err, errlen,
		                  "record the conversation's model: no "
		                  "conversation %lld",
		                  (long long)id);
	return STORE_OK;
}

int store_conv_origin(struct store *st, int64_t id, char **server,
                      char **server_model, char *err, size_t errlen)
{
	sqlite3_stmt *s;
	int rc;

	*server = *server_model = NULL;
	if ((rc = store_prepare(st,
	                        "SELECT server, server_model FROM "
	                        "conversations WHERE id = ?1",
	                        &s, err, errlen)))
		return rc;
	sqlite3_bind_int64(s, 1, id);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		*server = store_col_text(s, 0, NULL);
		*server_model = store_col_text(s, 1, NULL);
		sqlite3_finalize(s);
		if (*server && *server_model)
			return STORE_OK;
		free(*server);
		free(*server_model);
		*server = *server_model = NULL;
		return store_errf(st, STORE_ERR, err, errlen, "out of memory");
	}
	sqlite3_finalize(s);
	if (rc == SQLITE_DONE)
		return store_errf(st, STORE_ENOTFOUND, err, errlen,
		                  "no conversation %lld", (long long)id);
	return store_fail(st, rc, "read the conversation's server", err,
	                  errlen);
}

int store_msg_set_sampling(struct store *st, int64_t msg_id, const char *json,
                           char *err, size_t errlen)
{
	sqlite3_stmt *s;
	int rc;

	if ((rc = store_writable(st, err, errlen)) ||
	    (rc = store_prepare(st,
	                        "UPDATE messages SET sampling = ?2 WHERE "
	                        "id = ?1 AND role = 'assistant'",
	                        &s, err, errlen)))
		return rc;
	sqlite3_bind_int64(s, 1, msg_id);
	if (json)
		sqlite3_bind_text(s, 2, json, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(s);
	sqlite3_finalize(s);
	/* the column's CHECK refuses what is not a JSON object */
	if ((rc & 0xff) == SQLITE_CONSTRAINT)
		return store_errf(st, STORE_EINVAL, err, errlen,
		                  "message %lld: the sampling settings are "
		                  "not a JSON object",
		                  (long long)msg_id);
	if (rc != SQLITE_DONE)
		return store_fail(st, rc, "record the reply's sampling", err,
		                  errlen);
	if (sqlite3_changes(st->db) == 0)
		return store_errf(st, STORE_ENOTFOUND, err, errlen,
		                  "no assistant message %lld",
		                  (long long)msg_id);
	return STORE_OK;
}

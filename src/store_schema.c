/*
 * store_schema.c - the schema versions and the forward migrations.
 *
 * Step N turns a version N-1 database into version N. Steps are never
 * edited once released: a change is a new step. tests/data/store/v1.sql
 * is a frozen database written at version 1 that the tests migrate.
 *
 *   0 -> 1  the first schema: conversations (title, model, system prompt)
 *           and a flat list of messages per conversation.
 *   1 -> 2  model size/fingerprint, template, sampling JSON, archived and
 *           leaf; messages rebuilt with parent links (each old message's
 *           parent is the previous message of its conversation), token
 *           counts, timings, finish reason; FTS5 index; KV-state slot.
 *   2 -> 3  token_reports: what the sampler saw at each token of a reply,
 *           chunks of BLOBs (store_report.c has the layout) keyed by
 *           message and first position; removed with their message.
 *           tests/data/store/v2.sql is a frozen version 2 database.
 *   3 -> 4  remote models (issue 14): which server and model answered, per
 *           conversation (the last reply's; resume talks to it again)
 *           and per assistant message; '' = the local engine.
 *   4 -> 5  thinking models (issue 29): an assistant message's reasoning
 *           (between <think> and </think>) apart from its content, its
 *           token count and whether the block was left open (the reply
 *           hit its limit); '' / 0 / 0 for everything written before.
 *   5 -> 6  the sampling settings that produced each reply (issue 36): a
 *           JSON object per assistant message (session_sampling.c writes
 *           it); NULL for everything written before: not recorded, which
 *           is not the same as the conversation's first settings (a
 *           /set may have changed them in between).
 *           tests/data/store/v5.sql is a frozen version 5 database.
 */
#include "store_int.h"

#include <stdio.h>

static const char schema_v1[] =
    "PRAGMA application_id = 1349676153;\n" /* 0x50726c79 */
    "CREATE TABLE conversations (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  title TEXT NOT NULL DEFAULT '',\n"
    "  model TEXT NOT NULL DEFAULT '',\n"
    "  system_prompt TEXT,\n"
    "  created INTEGER NOT NULL,\n"
    "  updated INTEGER NOT NULL\n"
    ");\n"
    "CREATE TABLE messages (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  conversation_id INTEGER NOT NULL\n"
    "    REFERENCES conversations(id) ON DELETE CASCADE,\n"
    "  role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),\n"
    "  content TEXT NOT NULL,\n"
    "  created INTEGER NOT NULL\n"
    ");\n"
    "CREATE INDEX messages_by_conversation ON messages(conversation_id, id);\n";

static const char schema_v2[] =
    "ALTER TABLE conversations RENAME COLUMN model TO model_path;\n"
    "ALTER TABLE conversations ADD COLUMN model_size INTEGER NOT NULL\n"
    "  DEFAULT 0;\n"
    "ALTER TABLE conversations ADD COLUMN model_fingerprint TEXT NOT NULL\n"
    "  DEFAULT '';\n"
    "ALTER TABLE conversations ADD COLUMN template TEXT NOT NULL DEFAULT '';\n"
    "ALTER TABLE conversations ADD COLUMN sampling TEXT\n"
    "  CHECK (sampling IS NULL OR json_valid(sampling));\n"
    "ALTER TABLE conversations ADD COLUMN archived INTEGER NOT NULL\n"
    "  DEFAULT 0 CHECK (archived IN (0, 1));\n"
    "ALTER TABLE conversations ADD COLUMN leaf_id INTEGER;\n"
    "CREATE INDEX conversations_by_updated\n"
    "  ON conversations(archived, updated DESC, id DESC);\n"
    "CREATE TABLE messages_v2 (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  conversation_id INTEGER NOT NULL\n"
    "    REFERENCES conversations(id) ON DELETE CASCADE,\n"
    "  parent_id INTEGER REFERENCES messages(id) ON DELETE CASCADE,\n"
    "  role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),\n"
    "  content TEXT NOT NULL,\n"
    "  n_tokens INTEGER NOT NULL DEFAULT 0,\n"
    "  n_prompt_tokens INTEGER NOT NULL DEFAULT 0,\n"
    "  prefill_ms REAL NOT NULL DEFAULT 0,\n"
    "  decode_ms REAL NOT NULL DEFAULT 0,\n"
    "  finish TEXT CHECK (finish IN\n"
    "    ('stop', 'length', 'interrupted', 'error')),\n"
    "  created INTEGER NOT NULL,\n"
    "  updated INTEGER NOT NULL,\n"
    "  CHECK (parent_id IS NULL OR parent_id < id)\n"
    ");\n"
    "INSERT INTO messages_v2 (id, conversation_id, parent_id, role,\n"
    "    content, finish, created, updated)\n"
    "  SELECT m.id, m.conversation_id,\n"
    "    (SELECT max(p.id) FROM messages p\n"
    "      WHERE p.conversation_id = m.conversation_id AND p.id < m.id),\n"
    "    m.role, m.content, 'stop', m.created, m.created\n"
    "  FROM messages m ORDER BY m.id;\n"
    "DROP TABLE messages;\n"
    "ALTER TABLE messages_v2 RENAME TO messages;\n"
    "CREATE INDEX messages_by_conversation ON messages(conversation_id, id);\n"
    "CREATE INDEX messages_by_parent ON messages(parent_id);\n"
    "CREATE VIRTUAL TABLE messages_fts USING fts5(content,\n"
    "  content = 'messages', content_rowid = 'id',\n"
    "  tokenize = 'unicode61 remove_diacritics 2');\n"
    "CREATE TRIGGER messages_fts_ai AFTER INSERT ON messages BEGIN\n"
    "  INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);\n"
    "END;\n"
    "CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages BEGIN\n"
    "  INSERT INTO messages_fts(messages_fts, rowid, content)\n"
    "    VALUES ('delete', old.id, old.content);\n"
    "END;\n"
    "CREATE TRIGGER messages_fts_au AFTER UPDATE OF content ON messages\n"
    "BEGIN\n"
    "  INSERT INTO messages_fts(messages_fts, rowid, content)\n"
    "    VALUES ('delete', old.id, old.content);\n"
    "  INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);\n"
    "END;\n"
    "INSERT INTO messages_fts(messages_fts) VALUES ('rebuild');\n"
    "CREATE TABLE kv_states (\n"
    "  conversation_id INTEGER PRIMARY KEY\n"
    "    REFERENCES conversations(id) ON DELETE CASCADE,\n"
    "  format TEXT NOT NULL,\n"
    "  n_tokens INTEGER NOT NULL,\n"
    "  tokens BLOB NOT NULL,\n"
    "  state BLOB NOT NULL,\n"
    "  created INTEGER NOT NULL,\n"
    "  CHECK (length(tokens) = 4 * n_tokens)\n"
    ");\n";

static const char schema_v3[] =
    "CREATE TABLE token_reports (\n"
    "  message_id INTEGER NOT NULL\n"
    "    REFERENCES messages(id) ON DELETE CASCADE,\n"
    "  first_pos INTEGER NOT NULL CHECK (first_pos >= 0),\n"
    "  n_tokens INTEGER NOT NULL CHECK (n_tokens > 0),\n"
    "  data BLOB NOT NULL,\n"
    "  PRIMARY KEY (message_id, first_pos)\n"
    ") WITHOUT ROWID;\n";

/* Remote models: the server (base URL, never a key) and its model name
   that answered; '' for replies of the local engine. */
static const char schema_v4_remote[] =
    "ALTER TABLE conversations ADD COLUMN server TEXT NOT NULL DEFAULT '';\n"
    "ALTER TABLE conversations ADD COLUMN server_model TEXT NOT NULL\n"
    "  DEFAULT '';\n"
    "ALTER TABLE messages ADD COLUMN server TEXT NOT NULL DEFAULT '';\n"
    "ALTER TABLE messages ADD COLUMN server_model TEXT NOT NULL\n"
    "  DEFAULT '';\n";

/* Thinking models: the reasoning kept apart from the answer. */
static const char schema_v5_reasoning[] =
    "ALTER TABLE messages ADD COLUMN reasoning TEXT NOT NULL DEFAULT '';\n"
    "ALTER TABLE messages ADD COLUMN reasoning_tokens INTEGER NOT NULL\n"
    "  DEFAULT 0;\n"
    "ALTER TABLE messages ADD COLUMN reasoning_open INTEGER NOT NULL\n"
    "  DEFAULT 0 CHECK (reasoning_open IN (0, 1));\n";

/* The sampling settings of each reply. */
static const char schema_v6_sampling[] =
    "ALTER TABLE messages ADD COLUMN sampling TEXT CHECK (sampling IS NULL\n"
    "  OR CASE WHEN json_valid(sampling) THEN json_type(sampling) = 'object'\n"
    "  ELSE 0 END);\n";

static const char *const steps[STORE_SCHEMA_VERSION] = {
    schema_v1,        schema_v2,           schema_v3,
    schema_v4_remote, schema_v5_reasoning, schema_v6_sampling,
};

int store_schema_migrate(sqlite3 *db, int from, int to, char *err,
                         size_t errlen)
{
	char *msg = NULL;
	char sql[64];

	if (from < 0 || to > STORE_SCHEMA_VERSION || from > to) {
		snprintf(err, errlen, "no migration from version %d to %d",
		         from, to);
		return STORE_EINVAL;
	}
	for (int v = from + 1; v <= to; v++) {
		if (sqlite3_exec(db, steps[v - 1], NULL, NULL, &msg) !=
		    SQLITE_OK) {
			snprintf(err, errlen, "migration to version %d: %s", v,
			         msg ? msg : "failed");
			sqlite3_free(msg);
			return STORE_ERR;
		}
		snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", v);
		if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
			snprintf(err, errlen, "migration to version %d: %s", v,
			         msg ? msg : "failed");
			sqlite3_free(msg);
			return STORE_ERR;
		}
	}
	return STORE_OK;
}

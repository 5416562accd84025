-- A parley database at schema version 2, frozen: written by parley at
-- schema version 2 (src/store_schema.c, steps 0 -> 1 -> 2) from v1.sql plus
-- what version 2 added: a branch (messages 6 and 7 share a parent), a
-- reply in progress (9, finish NULL), the leaf, an archived conversation,
-- sampling JSON and a KV-state slot. t_store loads it into a fresh file
-- and checks that store_open migrates it to the current version with
-- every row intact. Never edit this file.
PRAGMA application_id = 1349676153;
PRAGMA user_version = 2;
CREATE TABLE conversations (
  id INTEGER PRIMARY KEY,
  title TEXT NOT NULL DEFAULT '',
  model_path TEXT NOT NULL DEFAULT '',
  system_prompt TEXT,
  created INTEGER NOT NULL,
  updated INTEGER NOT NULL
, model_size INTEGER NOT NULL
  DEFAULT 0, model_fingerprint TEXT NOT NULL
  DEFAULT '', template TEXT NOT NULL DEFAULT '', sampling TEXT
  CHECK (sampling IS NULL OR json_valid(sampling)), archived INTEGER NOT NULL
  DEFAULT 0 CHECK (archived IN (0, 1)), leaf_id INTEGER);
INSERT INTO conversations VALUES(1,'Capitals','/models/smol.gguf','You are terse.',1700000000000,1700000008000,134217728,'fnv1a64:0123456789abcdef','chatml','{"temperature":0.8,"seed":42}',0,9);
INSERT INTO conversations VALUES(2,'Zürich trip','/models/smol.gguf',NULL,1700000100000,1700000200000,0,'','',NULL,1,NULL);
CREATE TABLE IF NOT EXISTS "messages" (
  id INTEGER PRIMARY KEY,
  conversation_id INTEGER NOT NULL
    REFERENCES conversations(id) ON DELETE CASCADE,
  parent_id INTEGER REFERENCES messages(id) ON DELETE CASCADE,
  role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
  content TEXT NOT NULL,
  n_tokens INTEGER NOT NULL DEFAULT 0,
  n_prompt_tokens INTEGER NOT NULL DEFAULT 0,
  prefill_ms REAL NOT NULL DEFAULT 0,
  decode_ms REAL NOT NULL DEFAULT 0,
  finish TEXT CHECK (finish IN
    ('stop', 'length', 'interrupted', 'error')),
  created INTEGER NOT NULL,
  updated INTEGER NOT NULL,
  CHECK (parent_id IS NULL OR parent_id < id)
);
INSERT INTO messages VALUES(1,1,NULL,'user','What is the capital of France?',0,0,0.0,0.0,'stop',1700000001000,1700000001000);
INSERT INTO messages VALUES(2,2,NULL,'user','Plan a day in Zürich',0,0,0.0,0.0,'stop',1700000101000,1700000101000);
INSERT INTO messages VALUES(3,1,1,'assistant','Paris.',0,0,0.0,0.0,'stop',1700000002000,1700000002000);
INSERT INTO messages VALUES(4,1,3,'user','And of Italy?',0,0,0.0,0.0,'stop',1700000003000,1700000003000);
INSERT INTO messages VALUES(5,2,2,'assistant','Morning: the old town; afternoon: the lake.',0,0,0.0,0.0,'stop',1700000102000,1700000102000);
INSERT INTO messages VALUES(6,1,4,'assistant','Rome.',3,20,12.5,30.25,'stop',1700000004000,1700000004000);
INSERT INTO messages VALUES(7,1,4,'assistant','Rome, of course.',5,20,11.0,40.0,'length',1700000006000,1700000006000);
INSERT INTO messages VALUES(8,1,6,'user','And Spain?',0,0,0.0,0.0,'stop',1700000007000,1700000007000);
INSERT INTO messages VALUES(9,1,8,'assistant','Mad',0,0,0.0,0.0,NULL,1700000008000,1700000008000);
CREATE VIRTUAL TABLE messages_fts USING fts5(content,
  content = 'messages', content_rowid = 'id',
  tokenize = 'unicode61 remove_diacritics 2');
CREATE TABLE kv_states (
  conversation_id INTEGER PRIMARY KEY
    REFERENCES conversations(id) ON DELETE CASCADE,
  format TEXT NOT NULL,
  n_tokens INTEGER NOT NULL,
  tokens BLOB NOT NULL,
  state BLOB NOT NULL,
  created INTEGER NOT NULL,
  CHECK (length(tokens) = 4 * n_tokens)
);
INSERT INTO kv_states VALUES(1,'tokens',3,X'010000000200000003000000',X'',1700000008000);
CREATE INDEX conversations_by_updated
  ON conversations(archived, updated DESC, id DESC);
CREATE INDEX messages_by_conversation ON messages(conversation_id, id);
CREATE INDEX messages_by_parent ON messages(parent_id);
CREATE TRIGGER messages_fts_ai AFTER INSERT ON messages BEGIN
  INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages BEGIN
  INSERT INTO messages_fts(messages_fts, rowid, content)
    VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER messages_fts_au AFTER UPDATE OF content ON messages
BEGIN
  INSERT INTO messages_fts(messages_fts, rowid, content)
    VALUES ('delete', old.id, old.content);
  INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END;
INSERT INTO messages_fts(messages_fts) VALUES ('rebuild');

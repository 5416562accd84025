-- A parley database at schema version 1, frozen: written the way the first
-- schema (src/store_schema.c, step 0 -> 1) stores conversations. t_store
-- loads it into a fresh file and checks that store_open migrates it to the
-- current version with every row intact. Never edit this file.
PRAGMA application_id = 1349676153;
PRAGMA user_version = 1;
CREATE TABLE conversations (
  id INTEGER PRIMARY KEY,
  title TEXT NOT NULL DEFAULT '',
  model TEXT NOT NULL DEFAULT '',
  system_prompt TEXT,
  created INTEGER NOT NULL,
  updated INTEGER NOT NULL
);
CREATE TABLE messages (
  id INTEGER PRIMARY KEY,
  conversation_id INTEGER NOT NULL
    REFERENCES conversations(id) ON DELETE CASCADE,
  role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
  content TEXT NOT NULL,
  created INTEGER NOT NULL
);
CREATE INDEX messages_by_conversation ON messages(conversation_id, id);
INSERT INTO conversations VALUES (1, 'Capitals', '/models/smol.gguf',
  'You are terse.', 1700000000000, 1700000005000);
INSERT INTO conversations VALUES (2, 'Zürich trip', '/models/smol.gguf',
  NULL, 1700000100000, 1700000200000);
INSERT INTO messages VALUES (1, 1, 'user', 'What is the capital of France?',
  1700000001000);
INSERT INTO messages VALUES (2, 2, 'user', 'Plan a day in Zürich', 1700000101000);
INSERT INTO messages VALUES (3, 1, 'assistant', 'Paris.', 1700000002000);
INSERT INTO messages VALUES (4, 1, 'user', 'And of Italy?', 1700000003000);
INSERT INTO messages VALUES (5, 2, 'assistant',
  'Morning: the old town; afternoon: the lake.', 1700000102000);
INSERT INTO messages VALUES (6, 1, 'assistant', 'Rome.', 1700000004000);

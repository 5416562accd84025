-- A parley database at schema version 5, frozen: v2.sql migrated by
-- parley at schema version 5 (src/store_schema.c, steps 3, 4 and 5), then
-- written by it: conversation 3 is `parley -p Hi --temp 0 --seed 7 -n 4`
-- on SmolLM2 (message 11 has its token reports), message 7 has a
-- thinking model's reasoning, and message 5 and conversation 2 the server
-- and model that answered. No reply has sampling settings (version 6
-- added them). t_store loads it into a fresh file and checks that
-- store_open migrates it to the current version with every row intact.
-- Never edit this file.
PRAGMA application_id = 1349676153;
PRAGMA user_version = 5;
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
  DEFAULT 0 CHECK (archived IN (0, 1)), leaf_id INTEGER, server TEXT NOT NULL DEFAULT '', server_model TEXT NOT NULL
  DEFAULT '');
INSERT INTO conversations VALUES(1,'Capitals','/models/smol.gguf','You are terse.',1700000000000,1700000008000,134217728,'fnv1a64:0123456789abcdef','chatml','{"temperature":0.8,"seed":42}',0,9,'','');
INSERT INTO conversations VALUES(2,'Zürich trip','/models/smol.gguf',NULL,1700000100000,1700000200000,0,'','',NULL,1,NULL,'http://127.0.0.1:8080/v1','smol-remote');
INSERT INTO conversations VALUES(3,'Hi','/root/.cache/parley/models/SmolLM2-135M-Instruct.Q4_1.gguf',NULL,1795834695127,1795834695477,98362432,'fnv1a64:9372154526fe62ba','model','{"temperature":0,"top_k":40,"top_p":0.949999988,"min_p":0.0500000007,"repeat_penalty":1,"penalty_last_n":64,"seed":7,"n_predict":4,"n_ctx":4096}',0,11,'','');
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
  updated INTEGER NOT NULL, server TEXT NOT NULL DEFAULT '', server_model TEXT NOT NULL
  DEFAULT '', reasoning TEXT NOT NULL DEFAULT '', reasoning_tokens INTEGER NOT NULL
  DEFAULT 0, reasoning_open INTEGER NOT NULL
  DEFAULT 0 CHECK (reasoning_open IN (0, 1)),
  CHECK (parent_id IS NULL OR parent_id < id)
);
INSERT INTO messages VALUES(1,1,NULL,'user','What is the capital of France?',0,0,0.0,0.0,'stop',1700000001000,1700000001000,'','','',0,0);
INSERT INTO messages VALUES(2,2,NULL,'user','Plan a day in Zürich',0,0,0.0,0.0,'stop',1700000101000,1700000101000,'','','',0,0);
INSERT INTO messages VALUES(3,1,1,'assistant','Paris.',0,0,0.0,0.0,'stop',1700000002000,1700000002000,'','','',0,0);
INSERT INTO messages VALUES(4,1,3,'user','And of Italy?',0,0,0.0,0.0,'stop',1700000003000,1700000003000,'','','',0,0);
INSERT INTO messages VALUES(5,2,2,'assistant','Morning: the old town; afternoon: the lake.',0,0,0.0,0.0,'stop',1700000102000,1700000102000,'http://127.0.0.1:8080/v1','smol-remote','',0,0);
INSERT INTO messages VALUES(6,1,4,'assistant','Rome.',3,20,12.5,30.25,'stop',1700000004000,1700000004000,'','','',0,0);
INSERT INTO messages VALUES(7,1,4,'assistant','Rome, of course.',5,20,11.0,40.0,'length',1700000006000,1700000006000,'','','Italy: Rome.',4,0);
INSERT INTO messages VALUES(8,1,6,'user','And Spain?',0,0,0.0,0.0,'stop',1700000007000,1700000007000,'','','',0,0);
INSERT INTO messages VALUES(9,1,8,'assistant','Mad',0,0,0.0,0.0,NULL,1700000008000,1700000008000,'','','',0,0);
INSERT INTO messages VALUES(10,3,NULL,'user','Hi',0,0,0.0,0.0,'stop',1795834695128,1795834695128,'','','',0,0);
INSERT INTO messages VALUES(11,3,10,'assistant','Hello! How can',4,31,299.89275299943983555,46.907440001145005227,'length',1795834695429,1795834695477,'','','',0,0);
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
INSERT INTO kv_states VALUES(3,'tokens',35,X'01000000da250000c60000007b0a000067010000fd000000ec1400000e160000a52b0000250d0000b70d000034010000d78600001c0000006a1b00009b01000097010000004d0000f61f000002000000c600000001000000fd0f0000c6000000db68000002000000c600000001000000080200003b250000c6000000644c00001100000031040000a0010000',X'',1795834695478);
CREATE TABLE token_reports (
  message_id INTEGER NOT NULL
    REFERENCES messages(id) ON DELETE CASCADE,
  first_pos INTEGER NOT NULL CHECK (first_pos >= 0),
  n_tokens INTEGER NOT NULL CHECK (n_tokens > 0),
  data BLOB NOT NULL,
  PRIMARY KEY (message_id, first_pos)
) WITHOUT ROWID;
INSERT INTO token_reports VALUES(11,0,4,X'020000000400000027000000110000000100211c00000001002c1e00000001002e380000000100483900000001004900010000020020201c010000040020616e6420010000030020746f3a0100000300206973530100000200204967010000040020617265a001000004002063616ec901000005002068617665fa010000020027733302000006002061626f75747e020000040020686f778e0200000400206d6179910200000300204974990200000600207468657265e8020000030020616d58030000060020636f756c648b03000002002023a50300000200205bbd0300000300206d7931040000040020486f77640400000600206d696768743506000002004974880600000200202a14070000050020576861746f0700000300202a2ae40700000300486f777d230000070057656c636f6d652737000005002064656172953700000400476f6f64033b0000030020f09f644c0000050048656c6c6fda5600000300486579db6800000200486919890000040044656172000a644c00000000803fd7cbf4be00000000f3810a4001000000644c0000fa670042d7cbf4bedb6800007c39f0413b4d23c07d23000082d1eb410b8d46c0390000002207e8410be064c0da560000bd70e541339379c0e40700001854e0412d3c91c035060000762be041b5de91c038000000f4c0df41bd8893c019890000a79fde41f10d98c095370000a64cde41f55999c0000a110000000000803fb52fcbbe00000000e85e863f010000001100000036aa6b41b52fcbbe1c0000007d705741b599d4bf9902000079c64c41ebf414c01e00000027bd3041198d82c0530100008dff1e414d08a6c0bd0300001ca01e412fc7a6c01c010000b50e0a41fde9cfc020010000c89e0741d7c9d4c027370000771dfc40f0e9e7c0a50300009b67fa40cc9fe9c0000a310400000000803f964c8dbd000000003284eb3e0100000031040000b7e87041964c8dbd88060000051f33412d917bc0530100002ada25414c5298c014070000d46f2441f8269bc07e020000ecb21e41c8a0a6c09102000066500b41d465cdc06f070000c6460a411479cfc00001000094af074178a7d4c0033b000003bd06419a8cd6c08b0300000cff05418808d8c0000aa00100000000803fcac520bd000000007afa353e01000000a001000091cb9a41cac520bd670100008f788041271b55c03a0100004d0d4d413655d2c08e02000088833b41c068f5c0e8020000338f3441b5a801c1580300004d8022419bb713c164040000585c204190db15c1c901000079591f416fde16c1fa0100007a5d1a416eda1bc13302000007150c41e1222ac1');
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

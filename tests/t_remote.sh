#!/bin/sh
# t_remote.sh - remote models (issue 14) against a real OpenAI-compatible
# server: llama-cpp-python's, started here on 127.0.0.1 with the SmolLM2
# model (tests/remote_fixture.py serve), and a fault-injecting proxy in
# front of it (remote_fixture.py proxy). Checks: `parley models`; a
# one-shot question streams an answer that is stored with its server and
# model; the plain REPL on a pty (two turns, then Ctrl-C in the middle of
# a stream: the reply is kept as interrupted and the server sees the
# connection close); the session's logprob reports (t_remote_session);
# resume talks to the same server, and a local model continues the
# conversation; a server that rejects logprobs; the options the API
# lacks; TLS verification (a self-signed certificate refused); then each
# fault - connection refused, 401 (the key scrubbed),
# 404, 429 with Retry-After, 500, a stream cut before [DONE], a chunk
# that is not JSON - with its message and the store intact (user message
# kept, a begun reply kept as "error" with its text); the key never in
# the database, the history or a message.
#
# Skipped (TAP "1..0 # SKIP") only when parley was built without libcurl.
. "${top_srcdir:-.}/tests/lib.sh"
model=$(test_model)
fixture=${top_srcdir:-.}/tests/remote_fixture.py
pty=${top_builddir:-.}/tests/pty_run
sess=${top_builddir:-.}/tests/t_remote_session
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_remote.XXXXXX") || exit 1
srv_pid=
proxy_pid=
tls_pid=
cleanup() {
	[ -n "$tls_pid" ] && kill "$tls_pid" 2>/dev/null
	command -v tui_stop >/dev/null 2>&1 && tui_stop
	[ -n "$proxy_pid" ] && kill "$proxy_pid" 2>/dev/null
	# the server runs in its own session: end its process group
	[ -n "$srv_pid" ] && kill -- "-$srv_pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
export XDG_CONFIG_HOME=$tmp/config XDG_STATE_HOME=$tmp/state TERM=dumb
export PARLEY_DB=$tmp/chat.db

"$PARLEY" models --server http://127.0.0.1:9 >/dev/null 2>"$tmp/nocurl"
if grep -q "built without libcurl" "$tmp/nocurl"; then
	# TAP's skip (the harness's tap-driver.sh counts a status 77 as an
	# error, not a skip)
	skip_all "parley was built without libcurl"
fi
[ -f "$model" ] || { echo "Bail out! no model $model"; exit 1; }

# db_q SQL: one query on the test database (Python's sqlite3, read only)
db_q() {
	python3 - "$PARLEY_DB" "$1" <<'PY'
import sqlite3, sys
c = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
for row in c.execute(sys.argv[2]):
    print("|".join(str(x) for x in row))
PY
}
# db_intact: integrity, foreign keys and the full-text index agree
db_intact() {
	python3 - "$PARLEY_DB" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
assert not c.execute("PRAGMA foreign_key_check").fetchall()
c.execute("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')")
PY
}

python3 "$fixture" serve "$model" "$tmp/srv.pid" "$tmp/srv.port" \
	"$tmp/srv.log"
st=$?
srv_pid=$(cat "$tmp/srv.pid" 2>/dev/null)
ok $st "llama-cpp-python's server answers /v1/models"
[ $st -eq 0 ] || { done_testing; exit 1; }
port=$(cat "$tmp/srv.port")
url=http://127.0.0.1:$port
mkdir "$tmp/marks"
python3 "$fixture" proxy "$port" "$tmp/proxy.port" "$tmp/marks" \
	2>"$tmp/proxy.log" &
proxy_pid=$!
while [ ! -s "$tmp/proxy.port" ]; do # the proxy writes it once listening
	kill -0 "$proxy_pid" 2>/dev/null || break
	sleep 0.1
done
pport=$(cat "$tmp/proxy.port")
purl=http://127.0.0.1:$pport
opts="--temp 0 --seed 1"

# --- the server --------------------------------------------------------
"$PARLEY" models --server "$url" >"$tmp/models"
ok $? "parley models --server exits 0"
grep -q "SmolLM2-135M-Instruct" "$tmp/models"
ok $? "it lists the served model: $(cat "$tmp/models")"

"$PARLEY" --server "$url" $opts -n 16 \
	-p "What is the capital of France?" >"$tmp/o1" 2>"$tmp/e1"
ok $? "a one-shot question exits 0 ($(cat "$tmp/e1"))"
[ -s "$tmp/o1" ]
ok $? "the answer streams to stdout: $(cat "$tmp/o1")"
smodel=$(head -n 1 "$tmp/models")
db_q "SELECT server, server_model FROM conversations" >"$tmp/q1"
[ "$(cat "$tmp/q1")" = "$url/v1|$smodel" ]
ok $? "the conversation records the server and model: $(cat "$tmp/q1")"
db_q "SELECT role, finish IN ('stop', 'length'), server, n_tokens > 0,
	content FROM messages ORDER BY id" >"$tmp/q2"
printf 'user|1||0|What is the capital of France?\nassistant|1|%s|1|%s\n' \
	"$url/v1" "$(cat "$tmp/o1")" >"$tmp/w2"
cmp -s "$tmp/q2" "$tmp/w2"
ok $? "the stored reply is the one shown, finished, with its server"
sed 's/^/#   /' "$tmp/q2"
cid=$(db_q "SELECT id FROM conversations")
"$PARLEY" show "$cid" >"$tmp/show1" 2>&1 &&
	grep -qxF "server $url/v1, model $smodel" "$tmp/show1"
ok $? "parley show names the server and its model: $(sed -n 3p "$tmp/show1")"
# its token reports are stored (ids unknown: the server's texts) and
# exported in the OpenAI shape, the tokens spelling the stored reply (not
# --greedy: at temperature 0 the server still applies its default repeat
# penalty, so the chosen token is not always the top raw one)
cid=$(db_q "SELECT max(id) FROM conversations")
"$PARLEY" export "$cid" --format json --logprobs >"$tmp/lp1.json"
ok $? "export --format json --logprobs of the remote reply"
python3 "${top_srcdir:-.}/tests/check_logprobs.py" "$tmp/lp1.json" \
	>"$tmp/lp1.out" 2>&1
ok $? "its stored logprobs: $(head -n 3 "$tmp/lp1.out" | tr '\n' ' ')"
python3 - "$tmp/lp1.json" <<'PY' >"$tmp/lp1.n"
import json, sys
m = [m for m in json.load(open(sys.argv[1]))["messages"]
     if m["role"] == "assistant"][0]
c = m["logprobs"]["content"]
print(len(c), min(len(e["top_logprobs"]) for e in c),
      sum(e["token"] != t["token"] for e in c for t in e["top_logprobs"]))
PY
n_rep=$(db_q "SELECT n_tokens FROM messages WHERE role = 'assistant'")
read -r n_lp n_top n_other <"$tmp/lp1.n"
[ "$n_lp" = "$n_rep" ] && [ "$n_top" -gt 1 ] && [ "$n_other" -gt 0 ]
ok $? "a report per token ($n_lp of $n_rep), each with alternatives" \
	"(at least $n_top; $n_other other tokens named)"

# the session's reports from the server's logprobs (a C test)
PARLEY_TEST_SERVER=$url "$sess" >"$tmp/sess.tap" 2>&1
ok $? "t_remote_session: the logprob reports reach session_cb.token"
sed 's/^/#   /' "$tmp/sess.tap"

# --- resume: the same server; then a local model continues ----------------
"$PARLEY" resume --last $opts -n 8 -p "And of Germany?" >"$tmp/o3" 2>&1
ok $? "resume --last without --server exits 0"
n=$(db_q "SELECT count(*) FROM messages WHERE role = 'assistant' AND
	server = '$url/v1' AND conversation_id =
	(SELECT max(id) FROM conversations)")
[ "$n" = 2 ]
ok $? "resume talked to the same server (2 replies from it, got $n)"
"$PARLEY" resume --last -m "$model" --threads 1 $opts -n 8 \
	-p "And of Italy?" >"$tmp/o4" 2>&1
ok $? "a local model continues the remote conversation"
db_q "SELECT server FROM conversations WHERE id =
	(SELECT max(id) FROM conversations)" >"$tmp/q4"
n=$(db_q "SELECT count(*) FROM messages WHERE conversation_id =
	(SELECT max(id) FROM conversations)")
[ "$(cat "$tmp/q4")" = "" ] && [ "$n" = 6 ]
ok $? "...and the conversation now records the local engine ($n messages)"
"$PARLEY" resume --last --server "$url" $opts -n 8 -p "And of Spain?" \
	>"$tmp/o5" 2>&1
n=$(db_q "SELECT count(*) FROM messages WHERE conversation_id =
	(SELECT max(id) FROM conversations)")
[ $? -eq 0 ] && [ "$n" = 8 ]
ok $? "...and back to the server with --server ($n messages)"

# --- the REPL on a terminal: two turns, then Ctrl-C mid-stream ------------
cat >"$tmp/repl.script" <<'S'
expect > 
send Say hello.
expect > 
send What is two plus two?
expect > 
send /stats
expect first text after
expect > 
send /quit
wait
S
rm -f "$PARLEY_DB"*
"$pty" -t 300 "$tmp/repl.script" -- "$PARLEY" --plain --server "$url" \
	$opts -n 12 >"$tmp/repl.out" 2>&1
ok $? "the REPL chats with the server and exits 0"
n=$(db_q "SELECT count(*) FROM messages m JOIN conversations c ON
	c.id = m.conversation_id WHERE m.role = 'assistant' AND
	m.finish IN ('stop', 'length') AND length(m.content) > 0 AND
	m.server = '$url/v1' AND c.server = '$url/v1'")
[ "$n" = 2 ]
ok $? "both REPL replies are stored, from the server (got $n)"
grep -q "at $url/v1" "$tmp/repl.out"
ok $? "the REPL's banner names the server and model"
grep -Eq '^\[reply [0-9]+ tokens, [0-9.]+ tok/s; first text after [0-9]+ ms\]' \
	"$tmp/repl.out"
ok $? "/stats of a remote reply: tokens, speed, time to the first text"

cat >"$tmp/intr.script" <<'S'
expect > 
send Tell me a story.
expect Hello wor
ctrl C
expect > 
send /quit
wait
S
rm -f "$PARLEY_DB"* "$tmp/marks/hold-closed"
"$pty" -t 60 "$tmp/intr.script" -- "$PARLEY" --plain \
	--server "$purl/hold" --server-model m $opts >"$tmp/intr.out" 2>&1
ok $? "Ctrl-C in the middle of a stream returns to the prompt"
db_q "SELECT finish, content FROM messages WHERE role = 'assistant'" \
	>"$tmp/q6"
[ "$(cat "$tmp/q6")" = "interrupted|Hello wor" ]
ok $? "the partial reply is kept as interrupted: $(cat "$tmp/q6")"
i=0
while [ ! -f "$tmp/marks/hold-closed" ] && [ $i -lt 100 ]; do
	sleep 0.1 # the proxy notices the close at its next write (50 ms)
	i=$((i + 1))
done
[ -f "$tmp/marks/hold-closed" ]
ok $? "the server saw the stream closed"

# --- the full-screen UI (tmux): status bar, a reply, Ctrl-C, an error -----
if command -v tmux >/dev/null 2>&1; then
	. "${top_srcdir:-.}/tests/tui_lib.sh"
	rm -f "$PARLEY_DB"*
	tui_start "$tmp" 120 24 --server "$url" $opts -n 12
	tui_wait "SmolLM2-135M-Instruct.Q4_1 │ remote 127.0.0.1:$port │" 60
	ok $? "the UI's status bar shows the model and the server"
	tui_type "Say hello."
	tui_keys Enter
	tui_wait '│ tg [0-9.]+ t/s │' 120
	ok $? "the UI streams a reply from the server"
	! tui_status | grep -q 'pp '
	ok $? "the status bar shows no prompt speed the server did not give"
	n=$(db_q "SELECT count(*) FROM messages WHERE role = 'assistant' AND
		server = '$url/v1' AND length(content) > 0")
	[ "$n" = 1 ]
	ok $? "the UI's reply is stored with its server (got $n)"
	smodel=$(db_q "SELECT server_model FROM messages WHERE
		role = 'assistant'")
	"$PARLEY" show 1 >"$tmp/show.out" 2>&1
	grep -q -- "^--- assistant.* from server $url/v1, model $smodel\$" \
		"$tmp/show.out"
	ok $? "show names the server and model that answered the reply"
	r=$(db_q "SELECT json_extract(sampling, '\$.remote'),
		json_extract(sampling, '\$.seed') < 2147483648 FROM messages
		WHERE role = 'assistant'")
	[ "$r" = "1|1" ]
	ok $? "the reply's sampling settings are what the API was sent ($r)"
	tui_stop
	# a server that gives its prompt time (llama.cpp's "timings")
	rm -f "$PARLEY_DB"*
	tui_start "$tmp" 120 24 --server "$purl/timings" --server-model m $opts
	tui_wait "F1 help" 60
	tui_type "Hello?"
	tui_keys Enter
	tui_wait '^Hello world$' 30 && tui_wait '│ pp 3000 tg [0-9.]+ t/s │' 10
	ok $? "the server's prompt time: pp 3000 (12 tokens in 4 ms)"
	tui_type "/stats"
	tui_keys Enter
	tui_wait "the server's prompt: 12 tokens in 4 ms" 10
	ok $? "/stats says what the server measured"
	tui_stop
	rm -f "$PARLEY_DB"* "$tmp/marks/hold-closed"
	tui_start "$tmp" 120 24 --server "$purl/hold" --server-model m $opts
	tui_wait "F1 help" 60
	tui_type "Tell me a story."
	tui_keys Enter
	tui_wait 'Hello wor' 30
	tui_keys C-c
	tui_wait '^\[stopped\]' 20
	ok $? "Ctrl-C in the UI stops the stream: the reply is marked [stopped]"
	tui_stop
	tui_start "$tmp" 120 24 --server "$purl/500" --server-model m $opts
	tui_wait "F1 help" 60
	tui_type "Hello?"
	tui_keys Enter
	tui_wait 'server error \(HTTP 500\): internal boom' 30
	ok $? "a server error shows in the UI"
	tui_stop
else
	diag "tmux not installed: the UI's checks are left out"
fi

# --- logprobs refused by the server: asked once more without them -------
rm -f "$PARLEY_DB"*
"$PARLEY" --server "$purl/nologprobs" $opts -n 6 -p "Hi" >"$tmp/o7" \
	2>"$tmp/e7"
ok $? "a server that refuses logprobs still answers"
grep -q "does not accept logprobs" "$tmp/e7"
ok $? "...and the user is told: $(cat "$tmp/e7")"

# --- reasoning streamed apart from the answer --------------------------------
# (vLLM, llama.cpp's server: delta.reasoning_content; OpenRouter:
# delta.reasoning) - the reply's reasoning, stored apart, not the answer
for mode in reasoning reasoning2; do
	rm -f "$PARLEY_DB"*
	"$PARLEY" --server "$purl/$mode" --server-model m $opts -p "Hi" \
		>"$tmp/r1" 2>"$tmp/re1"
	[ $? -eq 0 ] && [ "$(cat "$tmp/r1")" = "Hello world" ]
	ok $? "$mode: -p prints the answer only: $(cat "$tmp/r1")"
	[ "$(db_q "SELECT reasoning, content FROM messages WHERE
	           role = 'assistant'")" = "Let me think.|Hello world" ]
	ok $? "$mode: the reasoning is stored apart from the answer:" \
		"$(db_q "SELECT reasoning, content FROM messages WHERE
		         role = 'assistant'")"
	"$PARLEY" --server "$purl/$mode" --server-model m $opts --thinking \
		-p "Hi" >"$tmp/r2" 2>&1
	grep -q "Let me think\." "$tmp/r2" && grep -q "Hello world" "$tmp/r2"
	ok $? "$mode: --thinking prints the reasoning too"
done
# the plain REPL shows a remote reply's reasoning, unless --hide-thinking
cat >"$tmp/think.script" <<'S'
expect > 
send Hi
expect Hello world
expect > 
send /quit
wait
S
for hide in "" --hide-thinking; do
	rm -f "$PARLEY_DB"*
	"$pty" -t 60 "$tmp/think.script" -- "$PARLEY" --plain \
		--server "$purl/reasoning" --server-model m $opts $hide \
		>"$tmp/think.out" 2>&1
	rc=$?
	if [ -z "$hide" ]; then
		[ $rc -eq 0 ] && grep -q "Let me think\." "$tmp/think.out"
		ok $? "the REPL shows the remote reply's reasoning"
	else
		[ $rc -eq 0 ] && ! grep -q "Let me think" "$tmp/think.out" &&
			grep -q "Hello world" "$tmp/think.out"
		ok $? "--hide-thinking: the REPL shows the answer only"
	fi
	[ "$(db_q "SELECT reasoning FROM messages WHERE
	           role = 'assistant'")" = "Let me think." ]
	ok $? "...and stores the reasoning either way ($hide)"
done

# --- options the API lacks, and security rules ------------------------------
"$PARLEY" --server "$url" --top-k 5 --repeat-penalty 1.2 -p x \
	>/dev/null 2>"$tmp/e8"
[ $? -ne 0 ] && grep -q "no field for top-k, repeat-penalty" "$tmp/e8"
ok $? "top-k and repeat-penalty refused by name: $(cat "$tmp/e8")"
"$PARLEY" --server http://example.com -p x >/dev/null 2>"$tmp/e9"
[ $? -ne 0 ] && grep -q "use https, or --insecure" "$tmp/e9"
ok $? "plain http to a non-local host refused: $(cat "$tmp/e9")"
"$PARLEY" --server http://user:pw@localhost:1 -p x >/dev/null 2>"$tmp/e10"
[ $? -ne 0 ] && grep -q "user or password in the URL" "$tmp/e10"
ok $? "a password in the URL refused"
printf 'sk-file-key\n' >"$tmp/key"
chmod 644 "$tmp/key"
"$PARLEY" --server "$url" --api-key-file "$tmp/key" -p x >/dev/null \
	2>"$tmp/e11"
[ $? -ne 0 ] && grep -q "chmod 600" "$tmp/e11"
ok $? "a key file others can read refused: $(cat "$tmp/e11")"

# TLS: certificates are verified (a self-signed one is refused, also
# with --insecure, which only allows plain http)
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 \
	-addext subjectAltName=IP:127.0.0.1 \
	-keyout "$tmp/tls.key" -out "$tmp/tls.crt" >/dev/null 2>&1
python3 "$fixture" tls "$tmp/tls.crt" "$tmp/tls.key" "$tmp/tls.port" \
	2>"$tmp/tls.log" &
tls_pid=$!
while [ ! -s "$tmp/tls.port" ]; do # written once it listens
	kill -0 "$tls_pid" 2>/dev/null || break
	sleep 0.1
done
turl=https://127.0.0.1:$(cat "$tmp/tls.port")
python3 -c 'import ssl, sys, urllib.request as u
c = ssl.create_default_context(cafile=sys.argv[2])
print(u.urlopen(sys.argv[1] + "/v1/models", context=c).read().decode())' \
	"$turl" "$tmp/tls.crt" | grep -q '"m"'
ok $? "the https test server answers a client that trusts its certificate"
"$PARLEY" models --server "$turl" >/dev/null 2>"$tmp/e15"
[ $? -ne 0 ] && grep -q "TLS with $turl/v1 failed" "$tmp/e15"
ok $? "a self-signed certificate is refused: $(cat "$tmp/e15")"
"$PARLEY" models --server "$turl" --insecure >/dev/null 2>"$tmp/e16"
[ $? -ne 0 ] && grep -q "TLS with" "$tmp/e16"
ok $? "...also with --insecure (which only allows plain http)"
kill "$tls_pid" 2>/dev/null

# the config file's keys (api_key_file and server_timeout with '_')
chmod 600 "$tmp/key"
mkdir -p "$XDG_CONFIG_HOME/parley"
printf 'server = %s\nserver-model = %s\napi_key_file = %s\nserver_timeout = 300\n' \
	"$purl/pass" "$smodel" "$tmp/key" >"$XDG_CONFIG_HOME/parley/config"
"$PARLEY" $opts -n 4 -p "Hi" >"$tmp/o12" 2>"$tmp/e12"
st=$?
[ $st -eq 0 ] && [ -s "$tmp/o12" ] && grep -q "^Bearer sk-file-key$" \
	"$tmp/marks/auth"
ok $? "server, server-model and api_key_file from the config file ($st)"
"$PARLEY" models >"$tmp/m12" 2>&1
grep -q "SmolLM2" "$tmp/m12"
ok $? "parley models takes the server from the config file"
rm -f "$XDG_CONFIG_HOME/parley/config"

# --- faults -------------------------------------------------------------------
rm -f "$PARLEY_DB"*
secret=sk-test-SECRET-0123456789
export PARLEY_TEST_KEY=$secret
# fault NAME URL WANT: the one-shot fails with WANT on stderr; the store
# is intact and holds the user's message
nfault=0
fault() {
	nfault=$((nfault + 1))
	"$PARLEY" --server "$2" --server-model m --api-key-env PARLEY_TEST_KEY \
		$opts -p "fault $1" >"$tmp/f.out" 2>"$tmp/f.err"
	st=$?
	[ $st -ne 0 ] && grep -q -- "$3" "$tmp/f.err"
	ok $? "$1: exit $st, '$(cat "$tmp/f.err")'"
	u=$(db_q "SELECT count(*) FROM messages WHERE role = 'user' AND
		content = 'fault $1'")
	db_intact && [ "$u" = 1 ]
	ok $? "$1: the store is intact and keeps the user's message"
}
fault "connection refused" http://127.0.0.1:9 "cannot connect to the server"
fault "DNS failure" https://no-such-host.invalid "cannot find the server's host"
fault 401 "$purl/401" "HTTP 401.*check the API key"
grep -q "Incorrect API key provided: \[api key\]" "$tmp/f.err"
ok $? "the server's echo of the key is scrubbed from the message"
fault 404 "$purl/404" "no model 'm'.*HTTP 404"
fault 429 "$purl/429" "rate limiting (HTTP 429).*retry after 7 s"
fault 500 "$purl/500" "server error (HTTP 500): internal boom"
"$PARLEY" --server "$purl/silent" --server-model m --server-timeout 1 \
	-p "fault timeout" >/dev/null 2>"$tmp/f.err"
[ $? -ne 0 ] && grep -q "did not answer for 1 s (server-timeout)" "$tmp/f.err"
ok $? "timeout: '$(cat "$tmp/f.err")'"
n=$(db_q "SELECT count(*) FROM messages WHERE role = 'assistant'")
[ "$n" = 0 ]
ok $? "an error before the stream stores no reply (got $n)"
fault "cut stream" "$purl/cut" "ended before \[DONE\]"
db_q "SELECT finish, content FROM messages WHERE role = 'assistant'" \
	>"$tmp/q12"
[ "$(cat "$tmp/q12")" = "error|Hello wor" ]
ok $? "cut stream: the reply so far is kept as error: $(cat "$tmp/q12")"
fault "garbage chunk" "$purl/garbage" "malformed chunk"
db_q "SELECT finish, content FROM messages WHERE role = 'assistant'
	ORDER BY id DESC LIMIT 1" >"$tmp/q13"
[ "$(cat "$tmp/q13")" = "error|Hello wor" ]
ok $? "garbage chunk: the reply so far is kept as error: $(cat "$tmp/q13")"
grep -c "Bearer $secret" "$tmp/marks/auth" >"$tmp/nauth"
[ "$(cat "$tmp/nauth")" -ge 5 ]
ok $? "the key went to the server in the Authorization header"
! grep -q "SECRET" "$PARLEY_DB" "$PARLEY_DB-wal" "$tmp/f.err" 2>/dev/null &&
	! grep -rq "SECRET" "$XDG_STATE_HOME" 2>/dev/null
ok $? "the key is in neither the database nor the history nor a message"

"$PARLEY" --server "$purl/500" --server-timeout 0 -p x 2>"$tmp/e14"
[ $? -eq 2 ] && grep -q "server-timeout" "$tmp/e14"
ok $? "server-timeout is checked (1..86400)"

done_testing

#!/bin/sh
# t_pull.sh - `parley pull ORG/REPO[:QUANT]` (issue 35 items 4-5) against a
# fake hub on 127.0.0.1 (tests/hub_fixture.py); nothing reaches the
# network. The models are small real GGUF files written now (parley
# dev-mkmodel; the split one by t_gguf_split --write), so `parley info`
# reads what was pulled. Checks: an ollama name refused; the pulled file
# in the hub cache layout (blob named by its SHA-256, the snapshot's
# relative link, refs/main) and readable; a second pull fetches nothing;
# the quantization chosen case-insensitively, a missing or ambiguous one
# listing the choices (mmproj only when asked, UD- told apart); a split
# model fetched whole; each fault with one clear message: 404, 401
# without a token, a wrong token (echoed by the server, never shown), a
# token file others may read; the token sent to the hub but not to the
# CDN it redirects to, and stored nowhere; a wrong SHA-256 (nothing
# kept); a connection cut mid-file, then the next pull continuing with a
# Range (and a server ignoring Range: the file replaced); Ctrl-C during a
# slow stream (once the fixture has sent 8 KiB), the partial file kept
# and resumed; a listing with a path out of the repository; a token over
# plain http refused. Nothing half-written is ever linked as a model.
#
# Skipped (TAP "1..0 # SKIP") only when parley was built without libcurl.
. "${top_srcdir:-.}/tests/lib.sh"
fixture=${top_srcdir:-.}/tests/hub_fixture.py
splitw=${top_builddir:-.}/tests/t_gguf_split
pty=${top_builddir:-.}/tests/pty_run
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_pull.XXXXXX") || exit 1
hub_pid=
cleanup() {
	[ -n "$hub_pid" ] && kill "$hub_pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
unset HF_TOKEN HF_TOKEN_PATH HF_HUB_CACHE XDG_CACHE_HOME HF_ENDPOINT
export HOME=$tmp/home HF_HOME=$tmp/hf
mkdir -p "$HOME" "$HF_HOME"
cache=$HF_HOME/hub

# --- an ollama name, before anything else --------------------------------
"$PARLEY" pull qwen3:8b >"$tmp/o" 2>"$tmp/e"
st=$?
[ $st -eq 1 ] && grep -q "ollama pull qwen3:8b" "$tmp/e" && [ ! -s "$tmp/o" ]
ok $? "an ollama name is refused, pointing at ollama: $(cat "$tmp/e")"

"$PARLEY" pull test/model >/dev/null 2>"$tmp/nocurl"
if grep -q "built without libcurl" "$tmp/nocurl"; then
	skip_all "parley was built without libcurl"
fi

# --- the hub's repositories ------------------------------------------------
hub=$tmp/hub
mk() { # mk FILE SEED [LAYERS]: a small random llama
	mkdir -p "$(dirname "$1")"
	"$PARLEY" dev-mkmodel -o "$1" --arch llama --seed "$2" \
		--n-embd 64 --n-ff 128 --n-head 4 --n-head-kv 2 \
		--n-layer "${3:-1}" --n-vocab 96 --type Q8_0 >/dev/null 2>&1
}
mk "$hub/test/model/model-Q4_K_M.gguf" 1
mk "$hub/test/model/model-Q8_0.gguf" 2
mk "$hub/test/model/mmproj-model-f16.gguf" 3
mk "$hub/test/ambig/a-Q4_K_M.gguf" 4
mk "$hub/test/ambig/b-Q4_K_M.gguf" 5
mk "$hub/test/ud/x-Q4_K_XL.gguf" 6
mk "$hub/test/ud/x-UD-Q4_K_XL.gguf" 7
mk "$hub/test/gated/g-Q4_K_M.gguf" 8
mk "$hub/test/badhash/bad-Q4_K_M.gguf" 9
mk "$hub/test/cut/cut-Q4_K_M.gguf" 10 4
mk "$hub/test/cut-norange/cn-Q4_K_M.gguf" 11 4
mk "$hub/test/slow/slow-Q4_K_M.gguf" 12 8
mk "$hub/test/evil/e-Q4_K_M.gguf" 13
mk "$tmp/whole.gguf" 14 2
mkdir -p "$hub/test/split/Q4_K_M"
"$splitw" --write "$tmp/whole.gguf" "$hub/test/split/Q4_K_M" \
	split-Q4_K_M 2 >/dev/null 2>&1
ok $? "the fixture's models are written (the split one in 2 shards)"

mkdir "$tmp/log"
python3 "$fixture" "$hub" "$tmp/port" "$tmp/log" 2>"$tmp/hub.err" &
hub_pid=$!
while [ ! -s "$tmp/port" ]; do # the fixture writes it once listening
	kill -0 "$hub_pid" 2>/dev/null || break
	sleep 0.1
done
port=$(cat "$tmp/port")
[ -n "$port" ]
ok $? "the fake hub listens on 127.0.0.1:$port"
[ -n "$port" ] || { cat "$tmp/hub.err"; done_testing; exit 1; }
export HF_ENDPOINT=http://127.0.0.1:$port

sha() { sha256sum "$1" | cut -d' ' -f1; }
size() { wc -c <"$1" | tr -d ' '; }
commit() { printf '%s' "$1" | sha1sum | cut -d' ' -f1; }
cdn_gets() { grep -c "^/cdn/" "$tmp/log/log" 2>/dev/null || echo 0; }
# pull ARGS...: parley pull, stdout in $tmp/o, stderr in $tmp/e, status $st
pull() {
	"$PARLEY" pull "$@" >"$tmp/o" 2>"$tmp/e"
	st=$?
}

# --- a model into the cache --------------------------------------------------
src=$hub/test/model/model-Q4_K_M.gguf
c=$(commit test/model)
dir=$cache/models--test--model
pull test/model
[ $st -eq 0 ] && [ "$(cat "$tmp/o")" = "$dir/snapshots/$c/model-Q4_K_M.gguf" ]
ok $? "pull test/model picks Q4_K_M and prints its snapshot path: $(cat "$tmp/o") $(cat "$tmp/e")"
[ "$(readlink "$dir/snapshots/$c/model-Q4_K_M.gguf")" = "../../blobs/$(sha "$src")" ]
ok $? "the snapshot file links to ../../blobs/SHA256 (the hub cache layout)"
[ "$(sha "$dir/blobs/$(sha "$src")")" = "$(sha "$src")" ] &&
	[ "$(cat "$dir/refs/main")" = "$c" ]
ok $? "the blob holds the bytes; refs/main holds the commit"
! ls "$dir/blobs" | grep -q incomplete
ok $? "no partial file is left behind"
"$PARLEY" info "$(cat "$tmp/o")" >"$tmp/info" 2>&1 && grep -q llama "$tmp/info"
ok $? "parley info reads the pulled model"
grep -q "SHA-256 verified" "$tmp/e"
ok $? "a line per file says it was verified: $(tail -n 1 "$tmp/e")"
grep -q "^/test/model/resolve/$c/model-Q4_K_M.gguf host=127.0.0.1:$port .*status=302" "$tmp/log/log" &&
	grep -q "^/cdn/test/model/model-Q4_K_M.gguf host=localhost:$port .*status=200" "$tmp/log/log"
ok $? "the download resolves at the commit and follows the hub's redirect"
n=$(cdn_gets)
pull test/model
[ $st -eq 0 ] && [ "$(cdn_gets)" = "$n" ] && grep -q "already in the cache" "$tmp/e"
ok $? "a second pull fetches nothing: $(tail -n 1 "$tmp/e")"

# --- choosing the file ---------------------------------------------------------
pull test/model:q8_0
[ $st -eq 0 ] && [ "$(cat "$tmp/o")" = "$dir/snapshots/$c/model-Q8_0.gguf" ]
ok $? "the quantization is matched case-insensitively (:q8_0)"
pull test/model:Q5_K_M
[ $st -eq 1 ] && grep -q "has no model 'Q5_K_M'" "$tmp/e" &&
	grep -q "Q4_K_M .*model-Q4_K_M.gguf" "$tmp/e" &&
	grep -q "Q8_0 .*model-Q8_0.gguf" "$tmp/e" && ! grep -q mmproj "$tmp/e"
ok $? "a missing quantization lists the choices, mmproj left out"
sed 's/^/#   /' "$tmp/e"
pull test/model:mmproj
[ $st -eq 0 ] && grep -q "mmproj-model-f16.gguf$" "$tmp/o"
ok $? "an mmproj file when asked for"
pull test/ambig:Q4_K_M
[ $st -eq 1 ] && grep -q "has 2 models that 'Q4_K_M' names" "$tmp/e" &&
	grep -q "a-Q4_K_M.gguf" "$tmp/e" && grep -q "b-Q4_K_M.gguf" "$tmp/e"
ok $? "an ambiguous quantization lists the choices"
pull test/ambig
[ $st -eq 1 ] && grep -q "a-Q4_K_M.gguf" "$tmp/e"
ok $? "so does no quantization when Q4_K_M is ambiguous"
pull test/ud:UD-Q4_K_XL
[ $st -eq 0 ] && grep -q "/x-UD-Q4_K_XL.gguf$" "$tmp/o"
ok $? ":UD-Q4_K_XL picks unsloth's file"
pull test/ud:Q4_K_XL
[ $st -eq 0 ] && grep -q "/x-Q4_K_XL.gguf$" "$tmp/o"
ok $? ":Q4_K_XL picks the file of exactly that name"

# --- a split model --------------------------------------------------------------
cs=$(commit test/split)
sdir=$cache/models--test--split/snapshots/$cs/Q4_K_M
pull test/split
[ $st -eq 0 ] && [ "$(cat "$tmp/o")" = "$sdir/split-Q4_K_M-00001-of-00002.gguf" ] &&
	[ -f "$sdir/split-Q4_K_M-00002-of-00002.gguf" ]
ok $? "a split model comes with all its shards: $(cat "$tmp/e" | tr '\n' ' ')"
s2=$hub/test/split/Q4_K_M/split-Q4_K_M-00002-of-00002.gguf
[ "$(readlink "$sdir/split-Q4_K_M-00002-of-00002.gguf")" = "../../../blobs/$(sha "$s2")" ]
ok $? "a file in a folder links with one more ../"
"$PARLEY" info "$(cat "$tmp/o")" >"$tmp/info" 2>&1 && grep -qi "shard" "$tmp/info"
ok $? "parley info reads the pulled split model"

# --- errors ---------------------------------------------------------------------
pull test/nothere
[ $st -eq 1 ] && grep -q "test/nothere: not on http://127.0.0.1:$port (HTTP 404: Repository not found)" "$tmp/e"
ok $? "a missing repository: $(cat "$tmp/e")"
pull test/gated
[ $st -eq 1 ] && grep -q "HTTP 401" "$tmp/e" && grep -q "set HF_TOKEN" "$tmp/e"
ok $? "a gated repository without a token asks for HF_TOKEN"
HF_TOKEN=wrong-token-4711 "$PARLEY" pull test/gated >"$tmp/o" 2>"$tmp/e"
st=$?
[ $st -eq 1 ] && grep -q "refused the token" "$tmp/e" &&
	grep -q "\[token\]" "$tmp/e" && ! grep -q "wrong-token-4711" "$tmp/e" "$tmp/o"
ok $? "a wrong token: the server echoes it, parley never shows it: $(cat "$tmp/e")"
: >"$tmp/log/log"
HF_TOKEN=secret-token "$PARLEY" pull test/gated >"$tmp/o" 2>"$tmp/e"
st=$?
[ $st -eq 0 ] && [ -f "$(cat "$tmp/o")" ]
ok $? "with HF_TOKEN the gated model is pulled"
grep -q "^/test/gated/resolve/.* auth=sent .*status=302" "$tmp/log/log" &&
	grep -q "^/cdn/test/gated/.* auth=none .*status=200" "$tmp/log/log"
ok $? "the token goes to the hub, not to the CDN it redirects to"
sed 's/^/#   /' "$tmp/log/log"
! grep -rq "secret-token" "$cache" "$tmp/o" "$tmp/e" "$HOME"
ok $? "the token is stored and shown nowhere"
rm -rf "$cache/models--test--gated"
printf 'secret-token\n' >"$HF_HOME/token"
chmod 644 "$HF_HOME/token"
pull test/gated
[ $st -eq 1 ] && grep -q "chmod 600 $HF_HOME/token" "$tmp/e"
ok $? "a token file others may read is refused: $(cat "$tmp/e")"
chmod 600 "$HF_HOME/token"
pull test/gated
[ $st -eq 0 ]
ok $? "a token file readable by its owner only is used"
rm "$HF_HOME/token"

cb=$cache/models--test--badhash
pull test/badhash
[ $st -eq 1 ] && grep -q "SHA-256 mismatch" "$tmp/e" &&
	[ -z "$(ls "$cb/blobs")" ] && [ ! -e "$cb/snapshots" ] && [ ! -e "$cb/refs" ]
ok $? "a wrong SHA-256: one message, nothing kept: $(cat "$tmp/e")"
pull test/evil
[ $st -eq 1 ] && grep -q "bad name" "$tmp/e" && [ ! -e "$cache/evil.gguf" ] &&
	[ ! -e "$cache/models--test--evil" ]
ok $? "a listing with a path out of the repository is refused: $(cat "$tmp/e")"
HF_TOKEN=x HF_ENDPOINT=http://hub.example.invalid "$PARLEY" pull test/model \
	>"$tmp/o" 2>"$tmp/e"
[ $? -eq 1 ] && grep -q "travel unencrypted" "$tmp/e"
ok $? "a token over plain http to another machine is refused"

# --- a connection cut mid-file, then resumed --------------------------------------
src=$hub/test/cut/cut-Q4_K_M.gguf
cd_=$cache/models--test--cut
pull test/cut
part=$cd_/blobs/$(sha "$src").incomplete
[ $st -eq 1 ] && grep -q "run the same pull again to continue" "$tmp/e" &&
	[ "$(size "$part")" -eq $(($(size "$src") / 2)) ] &&
	[ ! -e "$cd_/blobs/$(sha "$src")" ] && [ ! -e "$cd_/snapshots" ]
ok $? "a cut connection: one message, half the file kept as .incomplete, nothing linked: $(cat "$tmp/e")"
pull test/cut
[ $st -eq 0 ] && grep -q "range=bytes=$(($(size "$src") / 2))- status=206" "$tmp/log/log" &&
	[ "$(sha "$(cat "$tmp/o")")" = "$(sha "$src")" ] && [ ! -e "$part" ] &&
	grep -q "(resumed)" "$tmp/e" && grep -q "continuing after" "$tmp/e"
ok $? "the next pull continues with a Range and verifies the whole file: $(cat "$tmp/e" | tr '\n' ' ')"
src=$hub/test/cut-norange/cn-Q4_K_M.gguf
rm "$tmp/log/cut-done" # the fixture cuts once more
pull test/cut-norange
pull test/cut-norange
[ $st -eq 0 ] && [ "$(sha "$(cat "$tmp/o")")" = "$(sha "$src")" ] &&
	grep -q "^/cdn/test/cut-norange/.*range=bytes=.*- status=200" "$tmp/log/log"
ok $? "a server that ignores Range: the partial file is replaced, the file right"

# --- Ctrl-C during a slow stream ------------------------------------------------------
src=$hub/test/slow/slow-Q4_K_M.gguf
part=$cache/models--test--slow/blobs/$(sha "$src").incomplete
"$PARLEY" pull test/slow >"$tmp/o" 2>"$tmp/e" &
pid=$!
i=0
while [ ! -e "$tmp/log/streaming" ] && [ $i -lt 300 ]; do # observed state
	i=$((i + 1))
	sleep 0.1
done
kill -INT "$pid"
wait "$pid"
st=$?
[ $st -eq 1 ] && grep -q "interrupted" "$tmp/e" && [ -s "$part" ] &&
	[ "$(size "$part")" -lt "$(size "$src")" ] &&
	[ ! -e "$cache/models--test--slow/snapshots" ]
ok $? "Ctrl-C: one message, the partial file kept ($(size "$part" 2>/dev/null) of $(size "$src") bytes), nothing linked: $(cat "$tmp/e")"
have=$(size "$part")
pull test/slow
[ $st -eq 0 ] && grep -q "^/cdn/test/slow/.*range=bytes=$have- status=206" "$tmp/log/log" &&
	[ "$(sha "$(cat "$tmp/o")")" = "$(sha "$src")" ]
ok $? "the next pull resumes from the partial file (Range: bytes=$have-)"

# on a terminal: a progress bar with the rate and the time left; Ctrl-C
# typed there
mk "$hub/test/slow-tty/st-Q4_K_M.gguf" 15 8
printf 'expect left\nctrl C\nwait\n' >"$tmp/script"
"$pty" -t 60 "$tmp/script" -- "$PARLEY" pull test/slow-tty >"$tmp/tty" 2>&1
st=$?
[ $st -eq 1 ] && grep -q '\[1/1\] st-Q4_K_M.gguf \[#*\.*\] *[0-9]*% .* kB/s [0-9]*:[0-9][0-9] left' "$tmp/tty" &&
	grep -q "interrupted" "$tmp/tty"
ok $? "on a terminal: a bar with percent, rate and time left; Ctrl-C stops it"
tail -c 300 "$tmp/tty" | tr '\033' '^' | sed 's/^/#   /'

# --- the cache folder by HF_HUB_CACHE ---------------------------------------------------
HF_HUB_CACHE=$tmp/other "$PARLEY" pull -q test/model:Q8_0 >"$tmp/o" 2>"$tmp/e"
[ $? -eq 0 ] && [ "$(cat "$tmp/o")" = "$tmp/other/models--test--model/snapshots/$c/model-Q8_0.gguf" ] &&
	[ ! -s "$tmp/e" ]
ok $? "HF_HUB_CACHE places the cache; -q prints only the path"

done_testing

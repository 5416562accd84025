#!/bin/sh
# t_tui_model.sh - the model picker of the full-screen UI (issue 35 item
# 3), in tmux, over a fake models-dir written now: two small random models
# with different tokenizers and contexts (alpha-one: llama2's SentencePiece
# vocabulary, context 512; beta-two: a 263-token BPE one, context 1024) and
# a truncated file parley cannot run, and an ollama store holding beta-two
# as tiny:1b. F8 lists them; typing filters; an
# unrunnable entry shows its reason and cannot be chosen; Esc leaves with
# nothing changed; choosing beta-two loads it while the UI stays usable, the
# status bar names it, and the next turn renders the whole conversation for
# it (nothing of alpha's cache reused) and is stored as beta-two's reply;
# /model NAME switches back, an unknown name shows the nearest ones; a load
# held in its first step (a FIFO) leaves the UI usable and refuses a turn;
# an ollama model is named tiny:1b, also when given by its blob's path.
. "${top_srcdir:-.}/tests/lib.sh"
. "${top_srcdir:-.}/tests/tui_lib.sh"
command -v tmux >/dev/null 2>&1 || skip_all "tmux not installed"
command -v sqlite3 >/dev/null 2>&1 || skip_all "sqlite3 not installed"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_tui_model.XXXXXX") || exit 1
proxy_pid=
trap 'tui_stop; [ -n "$proxy_pid" ] && kill "$proxy_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
# no real store of this machine may show up in the list
HOME=$tmp/home HF_HOME=$tmp/hf OLLAMA_MODELS=$tmp/ollama
export HOME HF_HOME OLLAMA_MODELS
unset XDG_CACHE_HOME HF_HUB_CACHE
export XDG_CONFIG_HOME=$tmp/config XDG_STATE_HOME=$tmp/state
export PARLEY_DB=$tmp/chat.db
export NO_COLOR=1
tok=${top_srcdir:-.}/tests/data/tok
dir=$tmp/models
mkdir -p "$dir" "$XDG_CONFIG_HOME/parley"
"$PARLEY" dev-mkmodel -o "$dir/alpha-one.gguf" --arch llama --seed 1 \
	--n-ctx 512 --tokenizer-from "$tok/llama2-hf.gguf" >/dev/null 2>&1 &&
	"$PARLEY" dev-mkmodel -o "$dir/beta-two.gguf" --arch qwen3 --seed 2 \
		--n-ctx 1024 --tokenizer-from "$tok/tiny-bpe.gguf" >/dev/null 2>&1
ok $? "two random models written"
head -c 3000 "$dir/alpha-one.gguf" >"$dir/gamma-cut.gguf"
# an ollama model: a blob named by its hash, a manifest naming it tiny:1b
blob=sha256-$(sha256sum "$dir/beta-two.gguf" | cut -d' ' -f1)
mkdir -p "$OLLAMA_MODELS/blobs" "$OLLAMA_MODELS/manifests/registry.ollama.ai/library/tiny"
cp "$dir/beta-two.gguf" "$OLLAMA_MODELS/blobs/$blob"
cat >"$OLLAMA_MODELS/manifests/registry.ollama.ai/library/tiny/1b" <<EOF
{"schemaVersion":2,"layers":[{"mediaType":"application/vnd.ollama.image.model",
 "digest":"sha256:${blob#sha256-}","size":$(wc -c <"$dir/beta-two.gguf" | tr -d ' ')}]}
EOF
printf 'models-dir = %s\n' "$dir" >"$XDG_CONFIG_HOME/parley/config"

tui_start "$tmp" 160 30 -m alpha-one --threads 1 -n 6 --temp 0
tui_wait '^ alpha-one │ cpu │ ctx 0/512 .*F1 help' 60
ok $? "the UI starts on alpha-one, named as listed"

# --- Esc: nothing changes ------------------------------------------------------
tui_keys F8
tui_wait '^Models: 4 of 4 ' 20
ok $? "F8 opens the picker with the four models"
tui_screen | grep -q '^  gamma-cut  *cannot run: ' &&
	tui_screen | grep -Eq '^  beta-two  *qwen3 '
ok $? "each model with its facts, the truncated one with its reason"
tui_keys Escape
tui_wait 'model unchanged' 10 && ! tui_screen | grep -q '^Models:'
ok $? "Esc leaves the picker, saying the model is unchanged"
tui_keys Left # the message goes: the figures again
tui_wait '^ alpha-one │ cpu │ ctx 0/512 ' 10
ok $? "and it is"

# --- a first turn on alpha-one -------------------------------------------------
tui_type "first question"
tui_keys Enter
tui_wait '│ pp [0-9]+ tg ' 60
ok $? "a reply from alpha-one"

# --- the unrunnable entry -------------------------------------------------------
tui_keys F8
tui_wait '^Models: 4 of 4 ' 20
tui_type "CUT"
tui_wait '^Models: 1 of 4 ' 10 && tui_screen | grep -q '^filter: CUT'
ok $? "typing filters, case folded (CUT: gamma-cut alone)"
tui_keys Enter
tui_wait 'gamma-cut cannot run here: ' 10 && tui_screen | grep -q '^Models: 1 of 4 '
ok $? "an unrunnable model cannot be chosen: said, the picker stays"

# --- choosing beta-two ------------------------------------------------------------
tui_keys BSpace BSpace BSpace
tui_wait '^Models: 4 of 4 ' 10
ok $? "Backspace widens the filter again"
tui_type "two"
tui_wait '^Models: 1 of 4 ' 10
tui_keys Enter
tui_wait 'model beta-two loaded \(cpu, context 1024\)' 60 &&
	tui_screen | grep -q 'model: beta-two'
ok $? "Enter loads beta-two: reported, the transcript marks the switch"
tui_keys Left
tui_wait '^ beta-two │ cpu │ ctx 0/1024 ' 10
ok $? "the status bar names beta-two, with its context"
tui_screen | grep -q 'first question'
ok $? "the conversation stays on screen"

tui_type "second question"
tui_keys Enter
tui_wait '│ pp [0-9]+ tg ' 60
tui_type "/stats"
tui_keys Enter
tui_wait 'prompt [0-9]+ tokens \(0 reused, [0-9]+ new\)' 10
ok $? "the turn after the switch reuses nothing of alpha-one's cache"
n=$(tui_screen | sed -n 's/.*prompt \([0-9]*\) tokens (0 reused.*/\1/p' | tail -n 1)
# the whole conversation rendered for beta-two's byte-level BPE: both
# questions and the first reply, far more than the last question's ids
[ "${n:-0}" -gt 30 ]
ok $? "the whole conversation is the new prompt ($n tokens)"

q() { sqlite3 "$PARLEY_DB" "$1"; }
[ "$(q "SELECT server || '|' || server_model FROM messages WHERE role = 'assistant' ORDER BY id")" = "|alpha-one
|beta-two" ]
ok $? "the store records each reply's model: $(q "SELECT server_model FROM messages WHERE role = 'assistant'" | tr '\n' ' ')"
q "SELECT model_path FROM conversations" | grep -q '/beta-two.gguf$'
ok $? "the conversation's model (what resume opens) is beta-two now"

# --- /model NAME ---------------------------------------------------------------------
tui_type "/model alpah-one"
tui_keys Enter
tui_wait "no model 'alpah-one'; the nearest: alpha-one" 30
ok $? "/model with an unknown name: the nearest names"
tui_keys Left
tui_wait '^ beta-two │ cpu │ ctx [0-9]+/1024 ' 10
ok $? "and the model stays"
tui_type "/model alpha"
tui_keys Enter
tui_wait 'model alpha-one loaded' 60 && tui_keys Left &&
	tui_wait '^ alpha-one │ cpu │ ctx 0/512 ' 10
ok $? "/model NAME (a unique prefix) switches back to alpha-one"

# --- the UI stays usable while a model loads -----------------------------------
# a FIFO as the model: its open waits for a writer, so the load stays in
# its first step until the test writes to it
mkdir -p "$tmp/slow"
fifo=$tmp/slow/slow.gguf
mkfifo "$fifo"
tui_type "/model $fifo"
tui_keys Enter
tui_wait 'loading .*slow\.gguf… the file' 10
ok $? "the status bar shows the load and its step"
tui_type "typed while loading"
tui_wait '^> typed while loading$' 10
ok $? "typing goes on during the load"
tui_keys Enter
tui_wait 'a model is loading' 10 && ! tui_screen | grep -q '^typed while loading$'
ok $? "a turn cannot start mid-load (the text stays in the input)"
timeout 20 sh -c "printf 'not a model' >'$fifo'" &
tui_wait 'model .*slow\.gguf not loaded: ' 30
ok $? "a model that fails to load: the error"
tui_keys C-c # the input goes (and the message)
tui_wait '^ alpha-one │ cpu │ ctx 0/512 ' 10
ok $? "the old model is kept"
wait
tui_type "third"
tui_keys Enter
tui_wait '│ pp [0-9]+ tg ' 60
ok $? "and the old model still answers"
[ "$(q "SELECT server_model FROM messages WHERE role = 'assistant' ORDER BY id DESC LIMIT 1")" = "alpha-one" ]
ok $? "its reply recorded as alpha-one's"


# --- an ollama model is named as ollama names it -----------------------------------
tui_type "/model tiny"
tui_keys Enter
tui_wait 'model tiny:1b loaded' 60 && tui_keys Left &&
	tui_wait '^ tiny:1b │ cpu │ ' 10
ok $? "/model tiny: the status bar says tiny:1b, not the blob's file name"
tui_stop
tui_start "$tmp" 160 30 -m "$OLLAMA_MODELS/blobs/$blob" --threads 1 -n 6
tui_wait '^ tiny:1b │ cpu │ ' 60
ok $? "-m with the blob's path (as a resume gives it): tiny:1b too"
tui_stop

# --- from a remote model to a local one ----------------------------------------------
# the fixture's proxy answers /timings/ itself ("Hello world"): no upstream
if command -v python3 >/dev/null 2>&1; then
	rm -f "$PARLEY_DB"*
	mkdir -p "$tmp/marks"
	python3 "${top_srcdir:-.}/tests/remote_fixture.py" proxy 9 \
		"$tmp/proxy.port" "$tmp/marks" 2>"$tmp/proxy.log" &
	proxy_pid=$!
	while [ ! -s "$tmp/proxy.port" ]; do # written once it listens
		kill -0 "$proxy_pid" 2>/dev/null || break
		sleep 0.1
	done
	url=http://127.0.0.1:$(cat "$tmp/proxy.port")/timings
	tui_start "$tmp" 160 30 --server "$url" --server-model m --temp 0 -n 6
	tui_wait '│ remote 127\.0\.0\.1:' 60
	tui_type "Hello?"
	tui_keys Enter
	# (the reply has ended when the status bar has its speeds: the
	# server's timings; a command typed before then waits in the input)
	tui_wait '^Hello world$' 30 && tui_wait '│ pp [0-9]+ tg ' 30
	ok $? "a reply from the remote model, ended"
	tui_type "/model beta"
	tui_keys Enter
	tui_wait 'model beta-two loaded' 60 && tui_keys Left &&
		tui_wait '^ beta-two │ cpu │ ctx 0/1024 ' 10
	ok $? "/model beta: from the server to the local beta-two"
	tui_type "and now?"
	tui_keys Enter
	tui_wait '│ pp [0-9]+ tg ' 60
	ok $? "the local model answers the conversation"
	[ "$(q "SELECT server <> '' AND server_model = 'm' FROM messages WHERE role = 'assistant' ORDER BY id LIMIT 1")|$(q "SELECT server || '|' || server_model FROM messages WHERE role = 'assistant' ORDER BY id DESC LIMIT 1")|$(q "SELECT server FROM conversations")" = "1||beta-two|" ]
	ok $? "each reply records what wrote it; the conversation is local now"
	tui_stop
else
	diag "no python3 for the remote fixture: that part is left out"
fi

tui_stop
done_testing

#!/bin/sh
# t_tui_chat.sh - the full-screen UI in tmux with the real SmolLM2 model
# (CPU, greedy, one thread): start, a question and its streamed reply with
# the status bar's figures, a second turn reusing the cache, history
# recall, multi-line input, /regen, Ctrl-C mid-stream and right after
# Enter (during the prefill), resize to 20x6 and back, quit with Ctrl-D
# and with SIGTERM mid-reply, the terminal's settings identical after.
. "${top_srcdir:-.}/tests/lib.sh"
. "${top_srcdir:-.}/tests/tui_lib.sh"
tui_need
model=$(test_model)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_tui_chat.XXXXXX") || exit 1
trap 'tui_stop; rm -rf "$tmp"' EXIT
export XDG_CONFIG_HOME=$tmp/config XDG_STATE_HOME=$tmp/state
export PARLEY_DB=$tmp/chat.db
opts="-m $model --temp 0 --seed 42 --threads 1 --ctx 2048"
sys="You are a helpful assistant."

# --- start, one question -------------------------------------------------
tui_start "$tmp" 100 30 $opts -n 24 --system "$sys"
tui_wait 'SmolLM2-135M-Instruct.Q4_1 │ cpu │ ctx 0/2048 .* F1 help' 60
ok $? "the UI starts: status bar with model, backend cpu, context 0/2048"
tui_type "What is the capital of France?"
tui_keys Enter
tui_wait '^▍you' 10
ok $? "the question is in the transcript under the user's label"
tui_wait 'The capital of France is Paris\.' 60
ok $? "the reply streams in: The capital of France is Paris."
tui_wait 'pp [0-9]+ tg [0-9.]+ t/s' 30
ok $? "after the reply the status bar shows prefill and decode speeds"
st1=$(tui_status)
diag "status: $st1"
echo "$st1" | grep -Eq 'ctx [1-9][0-9]*/2048 .* reused 0 '
ok $? "context gauge counts the turn, nothing reused on the first turn"
# (at 100 columns the lower-priority parts give way to the model's name)
tmux -S "$tui_sock" resize-window -x 160 -y 30
tui_wait 't/s │ first ([0-9]+ ms|[0-9]+\.[0-9]{2} s) │' 10
ok $? "a wide status bar shows the wait before the last reply's first token"
tmux -S "$tui_sock" resize-window -x 100 -y 30
tui_wait 'F1 help' 10

# --- a second turn reuses the cache --------------------------------------
tui_type "And of Germany?"
tui_keys Enter
tui_wait 'Berlin' 60 && tui_wait 'reused [1-9][0-9]* .*pp [0-9]+ tg' 30
ok $? "second turn: reply about Berlin, tokens reused from the KV cache"
diag "status: $(tui_status)"

# --- history: Up recalls the last line, twice the one before ------------
tui_keys Up
tui_wait '^> And of Germany\?' 10
ok $? "Up recalls the last message"
tui_keys Up
tui_wait '^> What is the capital of France\?' 10
ok $? "Up again recalls the one before"
tui_keys C-c
tui_wait_gone '^> What is' 10
ok $? "Ctrl-C on a typed line clears it (and does not quit)"
grep -q 'capital.040of.040France?$' "$XDG_STATE_HOME/parley/history"
ok $? "history saved in the plain REPL's file (\$XDG_STATE_HOME/parley/history)"

# --- multi-line input ------------------------------------------------------
tui_type "Name two fruits."
tui_keys C-j
tui_type "Keep it short."
tui_wait '^  Keep it short\.' 10
ok $? "Ctrl-J makes a second input line"
tui_keys Enter
tui_wait '^Name two fruits\.$' 10 && tui_wait '^Keep it short\.$' 10
ok $? "the two-line message is sent with its line break"
tui_wait 'pp [0-9]+ tg' 60

# --- /regen: the same greedy reply, once ---------------------------------
tui_screen >"$tmp/before_regen"
tui_type "/regen"
tui_wait '^> /regen' 10
tui_keys Enter
# the command has left the input (the regen runs, or has run: the status
# bar's pp/tg figures are those of a finished reply)
tui_wait_gone '^> /regen' 30
tui_wait 'pp [0-9]+ tg' 60
tui_screen >"$tmp/after_regen"
diff "$tmp/before_regen" "$tmp/after_regen" | grep '^[<>] ' | grep -v 'F1 help' >"$tmp/regen_diff"
[ ! -s "$tmp/regen_diff" ]
ok $? "/regen replaces the reply by the same greedy one (screen unchanged)"
sed 's/^/#   /' "$tmp/regen_diff" | head -n 10

# --- /edit: without text the last message goes to the input ------------
tui_type "/edit"
tui_keys Enter
tui_wait '^✎ Name two fruits\.$' 10 && tui_wait '^  Keep it short\.$' 10
ok $? "/edit puts the last message in the input (both lines)"
tui_keys C-c
tui_wait_gone '^✎' 10
tui_type "/edit What is the capital of Italy?"
tui_keys Enter
tui_wait 'Rome' 60 && tui_wait 'pp [0-9]+ tg' 30
ok $? "/edit TEXT replaces the last message and generates anew"
tui_screen >"$tmp/edited"
! grep -q 'Name two fruits' "$tmp/edited"
ok $? "the replaced message is gone from the transcript"

# --- commands: /stats /system /set /title /export --------------------------
tui_type "/stats"
tui_keys Enter
tui_wait '^\[reply [0-9]+ tokens, [0-9.]+ tok/s; prompt [0-9]+ tokens \([0-9]+ reused' 10
ok $? "/stats shows the last reply's figures in the transcript"
tui_type "/system"
tui_keys Enter
tui_wait "^\\[$sys\\]\$" 10
ok $? "/system shows the system prompt"
tui_type "/set temp 0.5"
tui_keys Enter
tui_wait 'temp = 0\.5' 10
tui_type "/set"
tui_keys Enter
tui_wait 'temp 0\.5  top-k' 10
ok $? "/set changes an option, /set alone shows them"
tui_type "/set temp 0"
tui_keys Enter
tui_wait 'temp = 0' 10
tui_type "/title Capitals quiz"
tui_keys Enter
tui_wait 'title saved' 10 && "$PARLEY" list | grep -q 'Capitals quiz'
ok $? "/title names the conversation in the store"
tui_type "/export $tmp/export.md"
tui_keys Enter
tui_wait "exported to $tmp/export.md" 10 && grep -q 'capital of Italy' "$tmp/export.md"
ok $? "/export writes the conversation as Markdown"

# --- resize to 20x6 and back: what is shown equals a full redraw ---------
tmux -S "$tui_sock" resize-window -x 20 -y 6
tui_wait '^ .*F1 help' 10
tui_screen >"$tmp/small"
tui_keys C-l
tui_wait 'F1 help' 10
tui_screen >"$tmp/small2"
cmp -s "$tmp/small" "$tmp/small2" && [ "$(wc -l <"$tmp/small")" -eq 6 ]
ok $? "at 20x6 the screen equals a full redraw (no garbage)"
sed 's/^/#   |/' "$tmp/small"
tmux -S "$tui_sock" resize-window -x 100 -y 30
tui_wait 'The capital of France is Paris\.' 10
tui_screen >"$tmp/big"
tui_keys C-l
tui_wait 'F1 help' 10
tui_screen >"$tmp/big2"
cmp -s "$tmp/big" "$tmp/big2" && grep -q 'The capital of France is Paris\.' "$tmp/big"
ok $? "back at 100x30 the transcript is whole and equals a full redraw"

# --- /verify: each step checked against the CPU reference ---------------
tui_type "/verify"
tui_keys Enter
tui_wait 'verification on' 10
ok $? "/verify turns verification on"
tui_type "Say hello."
tui_keys Enter
tui_wait 'verify: [0-9]+ steps; worst layer [0-9]+ diff' 120
ok $? "a reply under /verify ends with its verification summary"
tui_type "/verify"
tui_keys Enter
tui_wait 'verification off' 10
ok $? "/verify again turns it off"

# --- /clear: a new conversation ------------------------------------------
tui_type "/clear"
tui_keys Enter
tui_wait 'new conversation' 10 && tui_wait_gone 'capital of Italy' 10
ok $? "/clear starts a new conversation (empty transcript)"

# --- quit with Ctrl-D: status 0, terminal settings as before ------------
tui_keys C-d
tui_wait 'PARLEY-EXIT 0' 20
ok $? "Ctrl-D on an empty input quits with status 0"
cmp -s "$tmp/stty.before" "$tmp/stty.after"
ok $? "stty -g after equals before"
[ ! -s "$tmp/stderr" ]
ok $? "nothing on stderr"
tui_stop

# --- Ctrl-C mid-stream; Ctrl-C right after Enter (prefill) ---------------
export PARLEY_DB=$tmp/stop.db
tui_start "$tmp" 100 30 $opts -n 400
tui_wait 'F1 help' 60
tui_type "Tell me a very long story about a dragon and a knight."
tui_keys Enter
tui_wait 'gen [0-9]+ tok' 60
ok $? "a long reply streams (tokens counted in the status bar)"
tui_keys C-d
tui_wait 'a reply is running: quit anyway\? \(y/n\)' 10
ok $? "Ctrl-D while a reply runs asks first"
tui_keys n
tui_wait 'gen [0-9]+ tok' 10
ok $? "n: the reply goes on"
tui_keys C-c
tui_wait '^\[stopped\]' 20
ok $? "Ctrl-C mid-stream stops it: the partial reply is marked [stopped]"
tui_wait 'pp [0-9]+ tg' 10
ok $? "the UI is idle again after the stop"
# a long message (pasted): its prefill takes seconds on one thread.
# Ctrl-C once the status bar shows the prefill's progress; then again
# with Ctrl-C sent right after Enter (same send-keys)
awk 'BEGIN { for (i = 0; i < 60; i++) printf "The quick brown fox jumps over the lazy dog %d. ", i }' >"$tmp/long"
tmux -S "$tui_sock" load-buffer "$tmp/long"
tmux -S "$tui_sock" paste-buffer -p
tui_wait '^  .*lazy dog 59\.$' 30
tui_keys Enter
tui_wait 'prefill [0-9]+/[0-9]+ ' 60
ok $? "the status bar shows the prefill's progress"
tui_keys C-c
tui_wait '^\[stopped\]' 30 && tui_wait 'pp [0-9]+ tg' 30
ok $? "Ctrl-C mid-prefill stops the request"
tmux -S "$tui_sock" paste-buffer -p
tui_wait '^  .*lazy dog 59\.$' 30
tui_keys Enter C-c
tui_wait_gone '^  .*lazy dog 59\.$' 30 && tui_wait '^\[stopped\]' 30 &&
	tui_wait 'pp [0-9]+ tg' 30
ok $? "Ctrl-C right after Enter stops the request"
tui_keys C-d
tui_wait 'PARLEY-EXIT 0' 20
"$PARLEY" show 1 >"$tmp/show1"
grep -c '^--- assistant \[interrupted\]' "$tmp/show1" >"$tmp/nint"
[ "$(cat "$tmp/nint")" -eq 3 ]
ok $? "the three replies are stored as interrupted ($(cat "$tmp/nint") of 3)"
awk '/^--- / { a = /^--- assistant/; n += a; next } a && n >= 2 && NF { text++ }
	END { exit text > 0 }' "$tmp/show1"
ok $? "the replies stopped before or during their prefill have no text"
sed 's/^/#   /' "$tmp/show1" | cut -c1-100 | head -n 20
tui_stop

# --- SIGTERM mid-reply: the terminal is restored -------------------------
export PARLEY_DB=$tmp/term.db
tui_start "$tmp" 100 30 $opts -n 400
tui_wait 'F1 help' 60
tui_type "Tell me a very long story about a dragon."
tui_keys Enter
tui_wait 'gen [0-9]+ tok' 60
pid=$(tui_pid)
kill -TERM "$pid"
tui_wait 'PARLEY-EXIT 143' 20
ok $? "SIGTERM mid-reply ends parley with status 143"
cmp -s "$tmp/stty.before" "$tmp/stty.after"
ok $? "stty -g after SIGTERM equals before"
tui_screen | grep -q 'gen [0-9]* tok'
[ $? -ne 0 ]
ok $? "the UI's screen is gone (normal screen back)"
"$PARLEY" show 1 | grep -q '^--- assistant \[interrupted\]'
ok $? "the reply cut by SIGTERM is stored as interrupted"
tui_stop

# --- a crash (SIGABRT, as a failed assertion): the terminal is restored --
export PARLEY_DB=$tmp/abrt.db
tui_start "$tmp" 100 30 $opts -n 400
tui_wait 'F1 help' 60
tui_type "Tell me a story."
tui_keys Enter
tui_wait 'gen [0-9]+ tok' 60
kill -ABRT "$(tui_pid)"
tui_wait 'PARLEY-EXIT 134' 20
ok $? "SIGABRT ends parley (status 134)"
cmp -s "$tmp/stty.before" "$tmp/stty.after"
ok $? "stty -g after the crash equals before"
done_testing

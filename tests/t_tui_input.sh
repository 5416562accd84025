#!/bin/sh
# t_tui_input.sh - the full-screen UI's input: a 100 KB bracketed paste
# (tmux paste-buffer -p) arrives whole, fast, as one edit; F1 help; and
# the fallbacks: --plain and a non-UTF-8 locale give the plain REPL (the
# latter with a message saying why).
. "${top_srcdir:-.}/tests/lib.sh"
. "${top_srcdir:-.}/tests/tui_lib.sh"
tui_need
model=$(test_model)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_tui_input.XXXXXX") || exit 1
trap 'tui_stop; rm -rf "$tmp"' EXIT
export XDG_CONFIG_HOME=$tmp/config XDG_STATE_HOME=$tmp/state
export PARLEY_DB=$tmp/chat.db
opts="-m $model --temp 0 --seed 42 --threads 1 --ctx 1024 -n 16"

# 100 KB: a first and a last marker, 1600 numbered lines between
awk 'BEGIN { print "PASTE-START"; for (i = 1; i <= 1600; i++) printf "line %04d of the pasted text, some words %s\n", i, "abcdefghijklmnopqrstuvwxyz"; printf "PASTE-END" }' >"$tmp/paste"
size=$(wc -c <"$tmp/paste")
diag "paste: $size bytes"

tui_start "$tmp" 100 30 $opts
tui_wait 'F1 help' 60
# idle: no busy-waiting (CPU ticks of the process over 2 s of nothing)
pid=$(tui_pid)
ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
c0=$(ticks)
sleep 2
c1=$(ticks)
diag "idle: $((c1 - c0)) clock ticks of CPU in 2 s (ticks of $(getconf CLK_TCK) Hz)"
[ $((c1 - c0)) -le 2 ]
ok $? "idle, the UI uses no CPU (<= 2 ticks in 2 s)"
tmux -S "$tui_sock" load-buffer "$tmp/paste"
t0=$(date +%s%N)
tmux -S "$tui_sock" paste-buffer -p
tui_wait '^  .*PASTE-END$' 60
ok $? "the end of a $size-byte paste shows in the input"
t1=$(date +%s%N)
diag "paste to screen: $(((t1 - t0) / 1000000)) ms (not a verdict)"
tui_keys C-a
tui_wait '^> PASTE-START$' 10
ok $? "its first line is there too (Ctrl-A)"
tui_keys Enter
tui_wait 'the prompt needs [0-9]+ tokens' 60
n=$(sed -n 's/.*the prompt needs \([0-9]*\) tokens.*/\1/p' "$tui_dir/screen")
[ "${n:-0}" -gt 20000 ]
ok $? "sent whole: the model was asked for $n tokens (error in the status bar)"
tui_keys F1
tui_wait '^  /regen ' 10 && tui_wait '^  Ctrl-C ' 10
ok $? "F1 shows the keys and the commands"
# half a screen a PgDn, clamped at the end: three reach it
! grep -q 'Esc, q, F3 *back to the chat' "$tui_dir/screen" &&
	tui_keys NPage NPage NPage && tui_wait 'Esc, q, F3 *back to the chat' 10
ok $? "PgDn scrolls the help to its end"
tui_keys q
tui_wait_gone '^  /regen ' 10
ok $? "any key closes the help"
tui_keys C-d
tui_wait 'PARLEY-EXIT 0' 20
ok $? "quit"
tui_stop

# --plain: the REPL on the terminal
tui_start "$tmp" 100 30 --plain $opts
tui_wait '^>' 60 && ! grep -q 'F1 help' "$tui_dir/screen" &&
	grep -q '^\[SmolLM2-135M-Instruct.Q4_1.gguf, context 1024 tokens' "$tmp/stderr"
ok $? "--plain keeps the plain REPL on a terminal"
tui_keys C-d
tui_wait 'PARLEY-EXIT 0' 20
tui_stop

# a non-UTF-8 locale: a message, then the plain REPL
cat >"$tmp/c.sh" <<SH
LANG=C LC_ALL=C exec "$PARLEY" $opts
SH
tmux -S "$tmp/tmux2.sock" -f /dev/null new-session -d -x 100 -y 30 \
	-e "PARLEY_DB=$PARLEY_DB" -e "XDG_STATE_HOME=$XDG_STATE_HOME" \
	-e "XDG_CONFIG_HOME=$XDG_CONFIG_HOME" -e TERM=screen \
	"sh $tmp/c.sh; echo PARLEY-EXIT \$?; exec sleep 600"
tui_sock=$tmp/tmux2.sock
tui_wait 'needs a UTF-8 locale' 60 && tui_wait 'using the plain REPL' 10 &&
	tui_wait '^\[SmolLM2-135M-Instruct.Q4_1.gguf, context' 10
ok $? "a non-UTF-8 locale: a clear message, then the plain REPL"
tui_keys C-d
tui_wait 'PARLEY-EXIT 0' 20
done_testing

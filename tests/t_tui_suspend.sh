#!/bin/sh
# t_tui_suspend.sh - Ctrl-Z in the full-screen UI (issue 36 item 1), in
# tmux with an interactive shell that keeps jobs (bash) and the real
# SmolLM2 model (CPU, greedy, one thread). Ctrl-Z while a reply streams
# stops parley as any full-screen program: the shell says so and shows its
# prompt on the normal screen (alternate screen left, keypad mode off,
# cursor shown), the process is stopped (state T), the reply does not move;
# the terminal is made smaller meanwhile and `fg` redraws the whole screen
# at the new size (the status bar on its row, nothing of the shell left),
# the reply goes on to its end. Ctrl-Z on an idle screen keeps the text
# typed in the input; kill -TSTP does what Ctrl-Z does; Ctrl-D then quits
# with status 0.
. "${top_srcdir:-.}/tests/lib.sh"
. "${top_srcdir:-.}/tests/tui_lib.sh"
tui_need
command -v bash >/dev/null 2>&1 || skip_all "bash not installed (job control)"
model=$(test_model)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_tui_suspend.XXXXXX") || exit 1
trap 'tui_stop; rm -rf "$tmp"' EXIT
export XDG_CONFIG_HOME=$tmp/config XDG_STATE_HOME=$tmp/state
export PARLEY_DB=$tmp/chat.db
parley=$(cd "$(dirname "$PARLEY")" && pwd)/$(basename "$PARLEY")

# proc_state PID: the process's state letter (R, S, T, ...).
proc_state() {
	sed 's/^[0-9]* (.*) \([A-Za-z]\) .*/\1/' "/proc/$1/stat" 2>/dev/null
}

tui_start_shell "$tmp" 100 30
tui_wait '^SHELL\$$' 20
ok $? "an interactive shell runs in tmux"
tui_type "'$parley' -m '$model' --temp 0 --threads 1 --ctx 2048 -n 160"
tui_keys Enter
tui_wait 'SmolLM2-135M-Instruct.Q4_1 │ cpu │ .*F1 help' 60
ok $? "parley starts from the shell"
[ "$(tui_flag alternate_on)" = 1 ]
ok $? "the UI runs on the alternate screen"
pid=$(tui_pid)
diag "parley's pid: $pid"

# --- Ctrl-Z while a reply streams -------------------------------------------
tui_type "Tell me a long story about a dragon."
tui_keys Enter
tui_wait 'gen [0-9]+ tok' 60
ok $? "a reply streams"
tui_keys C-z
tui_wait '^\[1\]\+ +Stopped' 10
ok $? "Ctrl-Z: the shell reports the job stopped"
tui_wait '^SHELL\$$' 10
ok $? "Ctrl-Z: the shell's prompt is back"
[ "$(tui_flag alternate_on)" = 0 ] && [ "$(tui_flag keypad_flag)" = 0 ] &&
	[ "$(tui_flag cursor_flag)" = 1 ]
ok $? "the terminal is restored: normal screen, keypad off, cursor shown"
! tui_screen | grep -q 'F1 help'
ok $? "nothing of the UI is left on the shell's screen"
[ -n "$pid" ] && [ "$(proc_state "$pid")" = T ]
ok $? "parley is stopped (state $(proc_state "$pid"))"

# --- fg at another size: the whole screen, the reply goes on ----------------
tmux -S "$tui_sock" resize-window -x 80 -y 24
tui_type "fg"
tui_keys Enter
tui_wait 'F1 help' 20
ok $? "fg: the UI is back"
tui_wait '^\[reply limit reached\]$' 120
ok $? "the reply went on to its end"
tui_screen | sed -n '23p' | grep -q 'F1 help'
ok $? "redrawn at the new size: the status bar on row 23 of 24"
! tui_screen | grep -q 'SHELL\$\|Stopped'
ok $? "redrawn whole: nothing of the shell is left"
tui_screen | grep -q '^▍you$'
ok $? "the transcript is there"
[ "$(tui_flag alternate_on)" = 1 ]
ok $? "back on the alternate screen"

# --- Ctrl-Z on an idle screen: the input survives ----------------------------
tui_type "half a thought"
tui_wait '^> half a thought' 10
tui_keys C-z
tui_wait '^SHELL\$$' 10
ok $? "Ctrl-Z on an idle screen: the shell's prompt"
tui_type "fg"
tui_keys Enter
tui_wait '^> half a thought' 20
ok $? "fg: the text typed in the input is still there"

# --- kill -TSTP does what Ctrl-Z does ----------------------------------------
kill -TSTP "$pid"
tui_wait '^SHELL\$$' 10 && [ "$(tui_flag alternate_on)" = 0 ]
ok $? "SIGTSTP from outside: stopped with the terminal restored"
tui_type "fg"
tui_keys Enter
tui_wait '^> half a thought' 20
ok $? "fg after SIGTSTP: the UI is back"

# --- quit ---------------------------------------------------------------------
tui_keys C-c
tui_wait_gone '^> half a thought' 10
tui_keys C-d
tui_wait '^SHELL\$$' 20
ok $? "Ctrl-D quits to the shell"
tui_type 'echo "EXIT=$?"'
tui_keys Enter
tui_wait '^EXIT=0$' 10
ok $? "parley's exit status is 0"
tui_stop
done_testing

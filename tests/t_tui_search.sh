#!/bin/sh
# t_tui_search.sh - Ctrl-R in the full-screen UI (issue 36 item 2), in
# tmux with the real SmolLM2 model (nothing is sent to it). The line
# history is the plain REPL's file, written here in libedit's format.
# Ctrl-R shows parley's own search in the input area - a label naming it,
# the search text, the newest entry that holds it with the text marked -
# never libedit's "bck:" prompt in the line; Ctrl-R again goes older and
# says when nothing older holds it; Backspace widens the search; Enter
# takes the entry into the input line; Esc puts the line typed before
# back; an arrow key takes the entry and moves in it.
. "${top_srcdir:-.}/tests/lib.sh"
. "${top_srcdir:-.}/tests/tui_lib.sh"
tui_need
model=$(test_model)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_tui_search.XXXXXX") || exit 1
trap 'tui_stop; rm -rf "$tmp"' EXIT
export XDG_CONFIG_HOME=$tmp/config XDG_STATE_HOME=$tmp/state
export PARLEY_DB=$tmp/chat.db
export NO_COLOR=1 # the match is marked in reverse video then

# the history, oldest first; libedit's file encodes a space as \040
mkdir -p "$XDG_STATE_HOME/parley"
{
	echo "_HiStOrY_V2_"
	for l in "what is the capital of France" "tell me about dragons" \
		"the capital of Italy?" "an unrelated line"; do
		printf '%s\n' "$l" | sed 's/ /\\040/g'
	done
} >"$XDG_STATE_HOME/parley/history"

tui_start "$tmp" 100 24 -m "$model" --threads 1
tui_wait 'SmolLM2-135M-Instruct.Q4_1 │ cpu │ .*F1 help' 60
ok $? "the UI starts"

# --- the search in the input area --------------------------------------------
tui_keys C-r
tui_wait '^history search:' 10
ok $? "Ctrl-R: the input area names the search"
tui_screen | grep -q '^> (type what the line held)$'
ok $? "before any text: a hint where the entry goes"
tui_type "capital"
tui_wait '^history search: capital$' 10
ok $? "the search text is shown beside the label"
tui_wait '^> the capital of Italy\?$' 10
ok $? "the newest entry that holds it is shown"
! tui_screen | grep -q 'bck:'
ok $? "no libedit prompt (bck:) anywhere"
tmux -S "$tui_sock" capture-pane -e -p | grep 'of Italy' |
	grep -q "$(printf '\033')\[[0-9;]*7[0-9;]*mcapital"
ok $? "the text found is marked (reverse video without colours)"
tui_keys C-r
tui_wait '^> what is the capital of France$' 10
ok $? "Ctrl-R again: the next older entry"
tui_keys C-r
tui_wait 'no older entry holds it' 10 &&
	tui_screen | grep -q '^> what is the capital of France$'
ok $? "Ctrl-R past the oldest: said, the entry stays"
tui_keys Enter
tui_wait '^> what is the capital of France$' 10 &&
	! tui_screen | grep -q '^history search:'
ok $? "Enter takes the entry into the input line (not sent)"
! tui_screen | grep -q '^▍you$'
ok $? "nothing was sent"

# --- Esc puts the line back ---------------------------------------------------
tui_keys C-c # clear the input
tui_wait_gone '^> what is' 10
tui_type "my draft"
tui_keys C-r
tui_type "dragx"
tui_wait '^> \(no entry holds it\)$' 10
ok $? "a text no entry holds: said so"
tui_keys BSpace
tui_wait '^> tell me about dragons$' 10
ok $? "Backspace widens the search again"
tui_keys Escape
tui_wait '^> my draft$' 10 && ! tui_screen | grep -q '^history search:'
ok $? "Esc: the line typed before is back"

# --- an arrow key takes the entry and moves ------------------------------------
tui_keys C-r
tui_type "unrel"
tui_wait '^> an unrelated line$' 10
tui_keys Home
tui_type "X"
tui_wait '^> Xan unrelated line$' 10
ok $? "Home takes the entry and moves to its start"

tui_stop
done_testing

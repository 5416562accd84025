#!/bin/sh
# t_tui_think.sh - a thinking model's reasoning in the full-screen UI, in
# tmux with the real SmolLM2 model (CPU, greedy, one thread). The test
# template tests/data/think/think.jinja opens <think> in the generation
# prompt, so the whole reply of this small model (which never writes
# </think>) is unfinished reasoning: the reply shows one dim folded line
# with the stored token count and "… unfinished", not the text (while
# a longer reply streams, the line is there and its count grows); F7
# unfolds it (the text, dimmed) and folds it again; in cursor mode (F4)
# the folded reasoning's tokens are skipped, `r` unfolds them and they
# become reachable (the pane says "reasoning"), `r` with the cursor in
# them folds and moves the cursor out; a resumed conversation shows the
# stored reasoning folded the same way.
. "${top_srcdir:-.}/tests/lib.sh"
. "${top_srcdir:-.}/tests/tui_lib.sh"
tui_need
model=$(test_model)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_tui_think.XXXXXX") || exit 1
trap 'tui_stop; rm -rf "$tmp"' EXIT
export XDG_CONFIG_HOME=$tmp/config XDG_STATE_HOME=$tmp/state
export PARLEY_DB=$tmp/chat.db
tpl=${top_srcdir:-.}/tests/data/think/think.jinja
opts="-m $model --temp 0 --seed 42 --threads 1 --ctx 2048 -n 40 --template $tpl"

# pane_tok: the pane's "token I of N..." line.
pane_tok() { tui_screen | grep -o 'token [0-9]* of [0-9]*[^│]*(cursor)' | head -n 1; }
# dim_line REGEX: the line matching REGEX (with escapes) has dim on.
dim_line() {
	tmux -S "$tui_sock" capture-pane -e -p | grep -E -- "$1" |
		grep -q "$(printf '\033')\[[0-9;]*;2[;m]\|$(printf '\033')\[2[;m]"
}

# --- a reply that is only reasoning, folded -------------------------------
tui_start "$tmp" 100 30 $opts
tui_wait 'SmolLM2-135M-Instruct.Q4_1 │ cpu │ ctx 0/2048 .* F1 help' 60
ok $? "the UI starts with the thinking template"
tui_type "What is 2+2?"
tui_keys Enter
tui_wait 'pp [0-9]+ tg [0-9.]+ t/s' 60
ok $? "the reply ends"
"$PARLEY" export --format json 1 >"$tmp/export.json" 2>"$tmp/export.err"
reason=$(export_str "$tmp/export.json" reasoning_content)
nr=$(export_num "$tmp/export.json" reasoning_tokens)
ntok=$(export_num "$tmp/export.json" n_tokens)
diag "stored: reasoning \"$reason\", $nr of $ntok tokens, unfinished: $(grep -c '"reasoning_unfinished":true' "$tmp/export.json")"
[ -n "$reason" ] && [ -n "$nr" ] && [ "$nr" -gt 0 ] && [ -n "$ntok" ] &&
	grep -q '"reasoning_unfinished":true' "$tmp/export.json"
ok $? "the reply was stored as unfinished reasoning (the template opened <think>)"
tui_wait "^▸ reasoning \\($nr tokens\\) … unfinished\$" 10
ok $? "folded: one line with the stored token count, marked unfinished"
tui_screen | grep -qF -- "$reason"
[ $? -ne 0 ]
ok $? "folded: the reasoning's text is not on the screen"
dim_line '▸ reasoning'
ok $? "the folded line is dim"

# --- F7 unfolds and folds ---------------------------------------------------
tui_keys F7
tui_wait "^▾ reasoning \\($nr tokens\\) … unfinished\$" 10
ok $? "F7 unfolds: the line's marker turns"
tui_screen | grep -qF -- "  $reason"
ok $? "unfolded: the reasoning's text is shown under the line"
dim_line "$reason"
ok $? "unfolded: the text is dim"
tui_keys F7
tui_wait "^▸ reasoning \\($nr tokens\\)" 10 &&
	! tui_screen | grep -qF -- "$reason"
ok $? "F7 again folds it: the text is gone"

# --- cursor mode: folded tokens skipped, reachable unfolded ---------------
last="token $ntok of $ntok (cursor)"
last_re="token $ntok of $ntok \\(cursor\\)"
tui_keys F4
tui_wait "$last_re" 10
ok $? "F4: the cursor on the reply's last token (the end of turn, after the reasoning)"
tui_keys Left
sleep 0.3
[ "$(pane_tok)" = "$last" ]
ok $? "folded: Left does not move into the reasoning's tokens ($(pane_tok))"
tui_keys r
tui_wait "^▾ reasoning \\($nr tokens\\)" 10
ok $? "r in cursor mode unfolds the cursor's reply"
tui_keys Left
tui_wait "token $nr of $ntok, reasoning \\(cursor\\)" 10
ok $? "unfolded: Left reaches the reasoning's last token, marked in the pane"
tui_keys r
tui_wait "^▸ reasoning \\($nr tokens\\)" 10 && tui_wait "$last_re" 10
ok $? "r with the cursor in the reasoning folds it and moves the cursor out"
tui_keys Escape
tui_wait_gone 'cursor mode' 10

# --- a longer reply: the count grows while the reasoning streams ----------
tui_type "Write a long story about a dragon."
tui_keys Enter
tui_wait '^▸ reasoning \([0-9]+ tokens?\) …$' 60
ok $? "streaming: the folded line is there while the reasoning streams"
n1=$(grep -o '^▸ reasoning ([0-9]* tokens\{0,1\}) …$' "$tmp/screen" | tail -n 1 | tr -dc 0-9)
tui_wait 'pp [0-9]+ tg [0-9.]+ t/s' 60
n2=$(tui_screen | grep -o '^▸ reasoning ([0-9]* tokens) … unfinished$' | tail -n 1 | tr -dc 0-9)
diag "count while streaming $n1, at the end $n2"
[ -n "$n1" ] && [ -n "$n2" ] && [ "$n2" -gt "$n1" ] &&
	tui_screen | grep -q '^\[reply limit reached\]$'
ok $? "the count grew while it streamed; the reply hit its limit inside the reasoning"
tui_keys C-d
tui_wait 'PARLEY-EXIT 0' 20
ok $? "Ctrl-D quits"
tui_stop

# --- a resumed conversation: the stored reasoning, folded ---------------
tui_start "$tmp" 100 30 resume --last $opts
tui_wait "^▸ reasoning \\($nr tokens\\) … unfinished\$" 60
ok $? "resumed: the stored reasoning folded, with its count"
tui_wait "^▸ reasoning \\($n2 tokens\\) … unfinished\$" 10
ok $? "resumed: the second reply's reasoning too"
"$PARLEY" export --format json 1 >"$tmp/export.json" 2>"$tmp/export.err"
reason2=$(export_str "$tmp/export.json" reasoning_content | sed 's/\\.*//' | cut -c1-20)
diag "the second reasoning begins \"$reason2\""
tui_keys F7
tui_wait "^▾ reasoning \\($n2 tokens\\)" 10 &&
	[ -n "$reason2" ] && tui_screen | grep -qF -- "  $reason2"
ok $? "resumed: F7 unfolds the last reply's stored text"
tui_keys C-d
tui_wait 'PARLEY-EXIT 0' 20
tui_stop

# --- /think off: the template's empty block, so the reply is the answer --
tui_start "$tmp" 100 30 $opts
tui_wait 'F1 help' 60
tui_type "/think"
tui_keys Enter
tui_wait 'thinking as the template decides \(enable_thinking unset\)' 10
ok $? "/think alone: enable_thinking unset"
tui_type "/think maybe"
tui_keys Enter
tui_wait '/think on or /think off' 10
ok $? "/think with another word: what it takes"
tui_type "/think off"
tui_keys Enter
tui_wait 'thinking off: enable_thinking false, from the next turn' 10
ok $? "/think off: enable_thinking false from the next turn"
tui_type "Say hello."
tui_keys Enter
tui_wait 'pp [0-9]+ tg [0-9.]+ t/s' 60
ok $? "the reply ends"
! tui_screen | grep -q 'reasoning ('
ok $? "thinking off: no reasoning block, the reply is the answer"
tui_keys F6
tui_wait '^<\[[0-9]+\]think\[[0-9]+\]>\[[0-9]+\]↵' 10 &&
	tui_wait '^</\[[0-9]+\]think\[[0-9]+\]>\[[0-9]+\]↵↵' 10
ok $? "the prompt view shows the template's empty <think></think> block"
tui_keys Escape
tui_keys C-d
tui_wait 'PARLEY-EXIT 0' 20
tui_stop

done_testing

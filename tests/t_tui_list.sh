#!/bin/sh
# t_tui_list.sh - the conversation list of the full-screen UI (F3): the
# stored conversations, full-text search with the matches highlighted,
# rename, delete (asked first: n keeps it, y deletes it), open (the
# transcript comes back), /list; then quit and `parley resume --last`
# shows the history again.
. "${top_srcdir:-.}/tests/lib.sh"
. "${top_srcdir:-.}/tests/tui_lib.sh"
tui_need
model=$(test_model)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_tui_list.XXXXXX") || exit 1
trap 'tui_stop; rm -rf "$tmp"' EXIT
export XDG_CONFIG_HOME=$tmp/config XDG_STATE_HOME=$tmp/state
export PARLEY_DB=$tmp/chat.db
opts="-m $model --temp 0 --seed 42 --threads 1 --ctx 1024 -n 16"

for i in 1 2 3; do
	printf '[{"role":"user","content":"Question %s about apples"},{"role":"assistant","content":"Answer %s: zebras are striped."}]' \
		"$i" "$i" >"$tmp/c$i.json"
	"$PARLEY" import "$tmp/c$i.json" >/dev/null
done
printf '[{"role":"user","content":"Something else entirely"},{"role":"assistant","content":"Fine."}]' >"$tmp/c4.json"
"$PARLEY" import "$tmp/c4.json" >/dev/null
"$PARLEY" rename 2 "Second chat"

tui_start "$tmp" 90 20 $opts
tui_wait 'F1 help' 60
tui_keys F3
tui_wait '^Conversations: 4 ' 10
ok $? "F3 lists the 4 stored conversations"
grep -q '^ *2  [0-9-]* [0-9:]*  Second chat ' "$tui_dir/screen"
ok $? "each row shows id, date and title"

# search: 3 hits, the word highlighted (reverse or colour around it)
tui_type "/zebras"
tui_keys Enter
tui_wait '^Search "zebras": 3 matches' 10
ok $? "full-text search finds the 3 conversations with the word"
tmux -S "$tui_sock" capture-pane -p -e >"$tmp/hits"
esc=$(printf '\033')
n=$(grep -c "Answer [0-9]: ${esc}\[[0-9;]*m\(${esc}\[[0-9;]*m\)*zebras${esc}\[" "$tmp/hits")
[ "$n" -eq 3 ]
ok $? "each match is highlighted ($n of 3)"
grep -q 'Something else' "$tmp/hits"
[ $? -ne 0 ]
ok $? "the conversation without the word is not listed"

# rename the selected hit (conversation 3, the newest)
tui_keys r
tui_type "Renamed three"
tui_keys Enter
tui_wait 'Renamed three: Answer 3' 10
ok $? "r renames the selected conversation"
"$PARLEY" list | grep -q 'Renamed three'
ok $? "the new title is in the store"

# delete, asked first: n keeps it, y deletes it
tui_keys Escape
tui_wait '^Conversations: 4 ' 10
tui_keys Down Down
tui_keys d
tui_wait 'delete conversation [0-9]+\? \(y/n\)' 10
ok $? "d asks before deleting"
victim=$(sed -n 's/.*delete conversation \([0-9]*\)? (y\/n).*/\1/p' "$tui_dir/screen")
tui_keys n
tui_wait '^Conversations: 4 ' 10
ok $? "n keeps it"
tui_keys d
tui_wait 'delete conversation [0-9]+\?' 10
tui_keys y
tui_wait '^Conversations: 3 ' 10
ok $? "y deletes conversation $victim"
"$PARLEY" show "$victim" >/dev/null 2>&1
[ $? -ne 0 ]
ok $? "it is gone from the store"

# open the first one: its transcript comes back
tui_keys Up Up Enter
tui_wait 'conversation [0-9]+ opened' 30 && tui_wait '^Answer [0-9]: zebras are striped\.$' 10
ok $? "Enter opens a conversation and shows its messages"
opened=$(sed -n 's/.*conversation \([0-9]*\) opened.*/\1/p' "$tui_dir/screen")
tui_type "Say hello."
tui_keys Enter
tui_wait 'pp [0-9]+ tg' 60
ok $? "a new turn in the opened conversation"
tui_type "/list"
tui_keys Enter
tui_wait '^Conversations: 3 ' 10
grep -q "^ *$opened .*(open)" "$tui_dir/screen"
ok $? "/list opens the list too, the open conversation marked"
tui_keys Escape
tui_wait '^>' 10
tui_keys C-d
tui_wait 'PARLEY-EXIT 0' 20
ok $? "quit"
"$PARLEY" show "$opened" | grep -c '^--- ' >"$tmp/n"
[ "$(cat "$tmp/n")" -eq 4 ]
ok $? "the opened conversation now has 4 messages in the store"
tui_stop

# resume --last: the history is shown again
tui_start "$tmp" 90 20 resume --last $opts
tui_wait "conversation $opened resumed" 60 && tui_wait '^Say hello\.$' 10
ok $? "parley resume --last shows the conversation's history"
tui_keys C-d
tui_wait 'PARLEY-EXIT 0' 20
done_testing

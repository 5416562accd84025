#!/bin/sh
# t_tui_md.sh - replies rendered as Markdown in the full-screen UI: an
# imported conversation (so the reply's text is known) with headings,
# **bold**, lists, a fenced code block, a quote, a table, CJK, emoji and a
# combining mark; /raw shows the text as generated; /copy puts the reply
# or a code block on the clipboard with OSC 52 (tmux keeps it as a paste
# buffer: set-clipboard on) and in the file fallback; NO_COLOR.
. "${top_srcdir:-.}/tests/lib.sh"
. "${top_srcdir:-.}/tests/tui_lib.sh"
tui_need
model=$(test_model)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_tui_md.XXXXXX") || exit 1
trap 'tui_stop; rm -rf "$tmp"' EXIT
export XDG_CONFIG_HOME=$tmp/config XDG_STATE_HOME=$tmp/state
export PARLEY_DB=$tmp/chat.db
opts="-m $model --temp 0 --seed 42 --threads 1 --ctx 1024 -n 16"

cat >"$tmp/conv.json" <<'JSON'
[{"role": "user", "content": "Show me some Markdown."},
 {"role": "assistant", "content": "# Title here\n\nSome **bold words** and *italic* and `inline code`.\n\n- first item\n- second item\n  - nested item\n\n1. one\n2. two\n\n```c\nint main(void)\n{\n    return 0;\n}\n```\n\n> a quoted line\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nDone: 日本語 テキスト, emoji 🎉, e\u0301 combining."}]
JSON
id=$("$PARLEY" import "$tmp/conv.json")
ok $? "the conversation is imported (id $id)"

tui_start "$tmp" 60 40 resume "$id" $opts
tui_wait 'conversation [0-9]+ resumed' 60
ok $? "parley resume ID opens the UI on the stored conversation"
tui_screen >"$tmp/md"
grep -q '^Some bold words and italic and inline code\.$' "$tmp/md"
ok $? "emphasis and inline code are shown without their marks"
! grep -q '\*\*\|```\|^#\|^- ' "$tmp/md"
ok $? "no Markdown mark (**, \`\`\`, #, - ) is left on the screen"
grep -q '^Title here$' "$tmp/md" && grep -q '^• first item$' "$tmp/md" &&
	grep -q '^  • nested item$' "$tmp/md" && grep -q '^2\. two$' "$tmp/md"
ok $? "heading, bullets, nested bullets and numbers"
grep -q '^│ int main(void)$' "$tmp/md" && grep -q '^│     return 0;$' "$tmp/md" &&
	grep -q '^│ }$' "$tmp/md"
ok $? "the fenced code block is set off by a bar, indentation kept"
grep -q '^┃ a quoted line$' "$tmp/md" && grep -q '^a │ b$' "$tmp/md"
ok $? "quote bar and table cells"
comb=$(printf 'e\314\201') # e + U+0301 COMBINING ACUTE ACCENT
grep -q "^Done: 日本語 テキスト, emoji 🎉, $comb combining\.\$" "$tmp/md"
ok $? "CJK, emoji and a combining mark on one line"
sed 's/^/#   |/' "$tmp/md" | head -n 34
tmux -S "$tui_sock" capture-pane -p -e >"$tmp/md_e"
esc=$(printf '\033')
grep -q "${esc}\[1mbold words${esc}\[0m" "$tmp/md_e"
ok $? "bold words are drawn bold"

# /raw: the text as generated
tui_type "/raw"
tui_keys Enter
tui_wait '^Some \*\*bold words\*\* and \*italic\*' 10 && tui_wait '^```c$' 10
ok $? "/raw shows the reply as generated (marks and fences)"
tui_type "/raw"
tui_keys Enter
tui_wait '^Some bold words and' 10
ok $? "/raw again: Markdown again"

# /copy 1: the code block, by OSC 52 (a tmux buffer) and a file
tui_type "/copy 1"
tui_keys Enter
tui_wait 'copied 33 bytes' 10
ok $? "/copy 1 says what it copied"
printf 'int main(void)\n{\n    return 0;\n}\n' >"$tmp/want1"
tmux -S "$tui_sock" show-buffer >"$tmp/got1" 2>/dev/null
cmp -s "$tmp/want1" "$tmp/got1"
ok $? "OSC 52 carried the code block (base64 decoded by tmux)"
cmp -s "$tmp/want1" "$XDG_STATE_HOME/parley/clipboard.txt"
ok $? "the file fallback holds the same text"
tui_type "/copy"
tui_keys Enter
# (the first copy's line may still be on the screen: its own first)
tui_wait_gone 'copied 33 bytes' 10 && tui_wait 'copied [0-9]+ bytes' 10
tmux -S "$tui_sock" show-buffer >"$tmp/got2" 2>/dev/null
"$PARLEY" export "$id" --format json | grep -q 'Title here' &&
	head -n 1 "$tmp/got2" | grep -qx '# Title here' &&
	tail -n 1 "$tmp/got2" | grep -q 'combining\.$'
ok $? "/copy copies the whole reply as generated"
# scrolling: on a short screen PgUp reaches the top, PgDn the bottom
tmux -S "$tui_sock" resize-window -x 60 -y 10
tui_wait_gone '^Show me some Markdown\.$' 10
tui_keys PPage PPage PPage PPage PPage PPage PPage PPage
tui_wait '^Show me some Markdown\.$' 10
ok $? "PgUp scrolls back to the first message"
tui_keys NPage NPage NPage NPage NPage NPage NPage NPage
tui_wait 'combining\.$' 10 && ! grep -q '^Show me some' "$tui_dir/screen"
ok $? "PgDn comes back to the end"
tui_keys C-d
tui_wait 'PARLEY-EXIT 0' 20
ok $? "quit"
tui_stop

# NO_COLOR: no colour escapes, bold still there
NO_COLOR=1
export NO_COLOR
tui_start "$tmp" 60 40 resume "$id" $opts
tui_wait 'conversation [0-9]+ resumed' 60
tmux -S "$tui_sock" capture-pane -p -e >"$tmp/nc"
! grep -q "${esc}\[3[0-7]m\|${esc}\[3[0-7];" "$tmp/nc" &&
	grep -q "${esc}\[1mbold words" "$tmp/nc"
ok $? "NO_COLOR: no foreground colours, attributes kept"
tui_keys C-d
tui_wait 'PARLEY-EXIT 0' 20
tui_stop
unset NO_COLOR
done_testing

#!/bin/sh
# t_tui_branch.sh - branches and stored token reports in the full-screen UI,
# in tmux with the real SmolLM2 model (CPU, greedy, one thread): in cursor
# mode a digit branches the reply at the cursor's token to the pane's
# alternative (the kept tokens' text unchanged, the token replaced by the
# alternative's, exactly 1 token evaluated for the prompt: /stats), and
# `parley show --branches` then lists both replies as siblings; [ and ]
# switch the active reply among them (the store's leaf follows, the
# transcript and the pane show the sibling's stored reports); after quit
# and `parley resume` the pane shows an earlier token's stored report with
# the candidates it had live (ids, probabilities, logits to the printed
# precision). A reply whose reports were not stored (--no-reports) cannot
# be branched: the status bar says why, the transcript keeps the reply.
# With TUI_SCREENS=FILE the screens of the issue's closing note are
# appended to FILE: the pane during a stream, cursor mode on an earlier
# token, the transcript after a branch, the branch's forced token.
. "${top_srcdir:-.}/tests/lib.sh"
. "${top_srcdir:-.}/tests/tui_lib.sh"
tui_need
model=$(test_model)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_tui_branch.XXXXXX") || exit 1
trap 'tui_stop; rm -rf "$tmp"' EXIT
export XDG_CONFIG_HOME=$tmp/config XDG_STATE_HOME=$tmp/state
export PARLEY_DB=$tmp/chat.db
opts="-m $model --temp 0 --seed 42 --threads 1 --ctx 2048"
sys="You are a helpful assistant."
q1="What is the capital of France?"
n=24
shots=${TUI_SCREENS:-}

# shot TITLE: append the screen to $shots under TITLE (when asked for).
shot() {
	[ -n "$shots" ] || return 0
	{
		printf '=== %s ===\n' "$1"
		tui_screen
		printf '\n'
	} >>"$shots"
}
# pane: the pane's column of the screen (right of the divider).
pane() { tui_screen | sed -n 's/^.*│ //p'; }
# pane_top: "ID PROB LOGIT" per candidate row of the pane.
pane_top() { pane | awk '/^#[0-9]+ / { print $2, $4, $3 }'; }
# tok_is K N: the pane shows token K of N in cursor mode.
tok_is() { tui_wait "│ token $1 of $2 \\(cursor\\) *\$" 20; }
# toks ID FILE: the tokens of conversation ID's active reply, as JSON
# strings, a line each; FILE.top: each token's second candidate likewise
# (export --logprobs; the top_logprobs in the pane's order).
toks() {
	"$PARLEY" export "$1" --format json --logprobs | python3 -c '
import json, sys
m = [x for x in json.load(sys.stdin)["messages"] if x["role"] == "assistant"]
c = m[-1]["logprobs"]["content"]
with open(sys.argv[1], "w") as f:
    f.write("".join(json.dumps(e["token"]) + "\n" for e in c))
with open(sys.argv[1] + ".top", "w") as f:
    f.write("".join(json.dumps(e["top_logprobs"][1]["token"]) + "\n" for e in c))
' "$2"
}
# text FILE K: the text of the first K tokens of FILE (toks).
text() {
	head -n "$2" "$1" | python3 -c '
import json, sys
sys.stdout.write("".join(json.loads(l) for l in sys.stdin))'
}

# --- a greedy reply, cursor mode on an earlier token -----------------------
tui_start "$tmp" 160 50 $opts -n $n --system "$sys"
tui_wait 'F1 help' 60
tui_keys F2
tui_type "$q1"
tui_keys Enter
tui_wait 'The capital of France is Paris\.' 60 && tui_wait 'pp [0-9]+ tg' 30
ok $? "a greedy reply"
id=$("$PARLEY" list | sed -n 2p | awk '{print $1}')
toks "$id" "$tmp/orig"
ok $? "export --logprobs of conversation $id"
tui_keys F4
tui_wait '│ token [0-9]+ of [0-9]+ \(cursor\) *$' 10
nt=$(pane | sed -n 's/^token \([0-9]*\) of \1 (cursor) *$/\1/p')
[ -n "$nt" ] && [ "$nt" -ge 5 ]
ok $? "F4: cursor mode on the reply's last token ($nt)"
k=$((nt - 3))
tui_keys Left Left Left
tok_is $k "$nt"
ok $? "cursor on token $k"
shot "cursor mode on an earlier token (token $k of $nt)"
pane_top >"$tmp/live_k"
[ "$(wc -l <"$tmp/live_k")" -eq 10 ]
ok $? "the pane lists token $k's 10 candidates"
rawp=$(pane | sed -n 's/^raw p \([0-9.]*\) rank 1 · final p 1\.0000 rank 1 *$/\1/p')
alt=$(sed -n 2p "$tmp/live_k" | cut -d ' ' -f 1)
chosen=$(pane | sed -n 's/^chosen ".*" id \([0-9]*\).*/\1/p')
[ -n "$alt" ] && [ "$alt" != "$chosen" ]
ok $? "alternative #2 (id $alt) is not the chosen token (id $chosen)"

# --- branch at token k to alternative #2 -----------------------------------
tui_keys 2
tui_wait "branch at token $k: #2 .* id $alt" 10
ok $? "2 branches at token $k to alternative #2"
tui_wait_gone 'branch at token' 60 && tui_wait 'pp [0-9]+ tg' 30
ok $? "the new reply is generated"
shot "the transcript after a branch at token $k (pane open)"
toks "$id" "$tmp/new"
head -n $((k - 1)) "$tmp/orig" >"$tmp/orig_pre"
head -n $((k - 1)) "$tmp/new" >"$tmp/new_pre"
cmp -s "$tmp/orig_pre" "$tmp/new_pre"
ok $? "the new reply's first $((k - 1)) tokens are the old reply's"
want=$(sed -n "${k}p" "$tmp/orig.top")
got=$(sed -n "${k}p" "$tmp/new")
[ -n "$got" ] && [ "$got" = "$want" ]
ok $? "its token $k is alternative #2's text ($got)"
newk=$(text "$tmp/new" $((k + 1)) | tr '\n' ' ')
oldk=$(text "$tmp/orig" $((k + 1)) | tr '\n' ' ')
tui_screen | grep -Fq -- "$newk" && ! tui_screen | grep -Fq -- "$oldk"
ok $? "the transcript shows the new reply ('$newk'), not the old one"
tui_type "/stats"
tui_keys Enter
tui_wait 'prompt [0-9]+ tokens \([0-9]+ reused, 1 new\)' 10
ok $? "/stats: exactly 1 token evaluated for the prompt (the forced one)"
"$PARLEY" show "$id" --branches >"$tmp/tree"
grep -q '^  *#[0-9]* assistant \[1/2\]: ' "$tmp/tree" &&
	grep -q '^\* *#[0-9]* assistant \[2/2\]: ' "$tmp/tree"
ok $? "show --branches: both replies, siblings, the new one active"
sed 's/^/#   /' "$tmp/tree"

# --- switching between the siblings ------------------------------------------
tui_keys F4
tok_is '[0-9]+' '[0-9]+'
nn=$(pane | sed -n 's/^token \([0-9]*\) of \1 (cursor) *$/\1/p')
tui_keys Home
i=1
while [ $i -lt $k ]; do
	tui_keys Right
	i=$((i + 1))
done
tok_is $k "$nn" && pane | grep -q "^chosen \".*\" id $alt *\$" &&
	pane | grep -q '^raw p [0-9.]* rank 2 · forced (branch) *$' &&
	pane | grep -q '^layers: no trace for this step'
ok $? "cursor mode on the new reply's token $k: id $alt, raw rank 2, forced, no layers"
shot "cursor mode on the new branch's token $k (the forced alternative)"
tui_keys ']'
tui_wait 'branch 1 of 2' 20
ok $? "] in cursor mode: the next sibling (cyclic): branch 1 of 2"
tui_screen | grep -Fq -- "$oldk" && ! tui_screen | grep -Fq -- "$newk"
ok $? "the transcript shows the old reply again"
"$PARLEY" show "$id" --branches >"$tmp/tree2"
grep -q '^\* *#[0-9]* assistant \[1/2\]: ' "$tmp/tree2"
ok $? "the store's active branch follows"
tui_keys End Left Left Left
tok_is $k "$nt" && pane_top >"$tmp/sib_k" && cmp -s "$tmp/live_k" "$tmp/sib_k"
ok $? "cursor mode on it: token $k's stored report, the candidates as live"
tui_keys '['
tui_wait 'branch 2 of 2' 20 && tui_screen | grep -Fq -- "$newk"
ok $? "[: the previous sibling, the new reply: branch 2 of 2"
tui_keys '['
tui_wait 'branch 1 of 2' 20 && tui_screen | grep -Fq -- "$oldk"
ok $? "[ again: back to the old reply"
tui_keys Escape
tui_wait_gone '\(cursor\)' 10
tui_keys C-d
tui_wait 'PARLEY-EXIT 0' 20
ok $? "quit"
tui_stop

# --- resume: the stored reports in the pane -----------------------------------
tui_start "$tmp" 160 50 resume "$id" $opts
tui_wait "conversation $id resumed" 60 && tui_wait 'The capital of France is Paris\.' 10
ok $? "parley resume $id: the old reply is the active one"
tui_keys F4
tok_is "$nt" "$nt"
ok $? "F4: cursor mode on the resumed reply's last token"
tui_keys Left Left Left
tok_is $k "$nt"
pane_top >"$tmp/stored_k"
cmp -s "$tmp/live_k" "$tmp/stored_k"
st=$?
[ $st -eq 0 ] || paste -d '|' "$tmp/live_k" "$tmp/stored_k" | sed 's/^/#   live|stored: /'
ok $st "token $k after resume: the same candidates (ids, p, logits) as live"
pane | grep -q "^chosen \".*\" id $chosen *\$" && [ -n "$rawp" ] &&
	pane | grep -q "^raw p $rawp rank 1 · final p 1\.0000 *\$"
ok $? "and the same chosen token (id $chosen), raw p $rawp, rank 1 (the final rank is not stored)"
pane | grep -q '^layers: no trace for this step'
ok $? "no layers for a stored report (the store keeps none)"
tui_keys Escape
tui_wait_gone '\(cursor\)' 10
tui_keys C-d
tui_wait 'PARLEY-EXIT 0' 20
ok $? "quit"
tui_stop

# --- a reply whose reports were not stored cannot be branched ---------------
rm -f "$PARLEY_DB"
tui_start "$tmp" 160 50 $opts -n $n --system "$sys" --no-reports
tui_wait 'F1 help' 60
tui_type "$q1"
tui_keys Enter
tui_wait 'The capital of France is Paris\.' 60 && tui_wait 'pp [0-9]+ tg' 30
tui_keys F4
tok_is "$nt" "$nt"
ok $? "--no-reports: cursor mode on the live reports of the reply"
tui_keys Left 2
tui_wait 'has 0 token reports' 30
ok $? "2 there: the session refuses (no stored reports), said in the status bar"
tui_screen | grep -q '^The capital of France is Paris\.' &&
	"$PARLEY" show 1 --branches | grep -c assistant | grep -qx 1
ok $? "the reply stays in the transcript and alone in the store"
tui_keys F4
tui_wait 'no token reports stored for this message' 10
ok $? "the transcript is the session's: the reply has no reports"
tui_keys C-d
tui_wait 'PARLEY-EXIT 0' 20
ok $? "quit"
tui_stop

# --- the screen of the pane during a stream (for the issue's note) -----------
if [ -n "$shots" ]; then
	tui_start "$tmp" 160 50 $opts -n 200 --system "$sys"
	tui_wait 'F1 help' 60
	tui_keys F2
	tui_type "Write a long poem about the sea."
	tui_keys Enter
	tui_wait '│ gen [0-9]+ tok' 60 && tui_wait '│ token [2-9][0-9] of [2-9][0-9] *$' 60
	shot "the pane during a stream"
	tui_wait 'pp [0-9]+ tg' 120
	tui_keys C-d
	tui_wait 'PARLEY-EXIT 0' 20
	tui_stop
fi

done_testing

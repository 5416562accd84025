#!/bin/sh
# t_tui_recurrent.sh - the full-screen UI on a model with recurrent layers
# (issue 31 item 2): a Qwen3.5-shaped model of random weights with
# SmolLM2's tokenizer and chat template (tests/parley-mkmodel), in tmux,
# CPU, greedy. Turns evaluate only their new tokens (/stats: nothing
# evaluated again); /regen gives the same reply with one token evaluated
# (the snapshot before the prompt's last token); a branch at a token of
# the reply forcing its chosen token (#1 of the pane, greedy) gives the
# same reply, the transcript says how many tokens were evaluated again
# from the snapshot, and /stats counts them.
. "${top_srcdir:-.}/tests/lib.sh"
. "${top_srcdir:-.}/tests/tui_lib.sh"
tui_need
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_tui_recurrent.XXXXXX") || exit 1
trap 'tui_stop; rm -rf "$tmp"' EXIT
export XDG_CONFIG_HOME=$tmp/config XDG_STATE_HOME=$tmp/state
export PARLEY_DB=$tmp/chat.db
model=$tmp/q35.gguf
"${top_builddir:-.}/tests/parley-mkmodel" --arch qwen35 \
	--tokenizer-from "$(test_model)" --type Q8_0 --embd-type Q8_0 --tied \
	--n-embd 64 --n-ff 128 --n-layer 4 --n-head 4 --n-head-kv 2 \
	--head-dim 32 --n-rot 16 --ssm-state-size 32 --ssm-group-count 2 \
	--ssm-time-step-rank 4 --full-attention-interval 2 --out-norm-scale 8 \
	--seed 3 -o "$model" >/dev/null
ok $? "parley-mkmodel: a qwen35 model with SmolLM2's tokenizer"
opts="-m $model --temp 0 --seed 42 --threads 1 --ctx 2048"

# reply ID: the text of conversation ID's last reply (the store's)
reply() {
	python3 - "$PARLEY_DB" "$1" <<'PY'
import sqlite3, sys
c = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
r = c.execute("SELECT content FROM messages WHERE conversation_id = ? AND "
              "role = 'assistant' ORDER BY id DESC LIMIT 1",
              (int(sys.argv[2]),)).fetchone()
print(r[0] if r else "")
PY
}
# stats: /stats, then its line
stats() {
	tui_type "/stats"
	tui_keys Enter
	tui_wait 'prompt [0-9]+ tokens \(' 10
	tui_screen | grep -o 'prompt [0-9]* tokens ([^)]*)' | tail -n 1
}

tui_start "$tmp" 160 50 $opts -n 12 --system "You are a helpful assistant."
tui_wait 'F1 help' 60
for q in "What is the capital of France?" "And of Germany?"; do
	tui_type "$q"
	tui_keys Enter
	tui_wait_gone 'pp [0-9]+ tg' 5
	tui_wait 'pp [0-9]+ tg' 60
done
ok $? "two turns"
s=$(stats)
echo "$s" | grep -Eq '^prompt [0-9]+ tokens \([1-9][0-9]* reused, [0-9]+ new\)$'
ok $? "the second turn reuses the first's cache, nothing evaluated again: $s"
id=$("$PARLEY" list | sed -n 2p | awk '{print $1}')
first=$(reply "$id")

tui_type "/regen"
tui_keys Enter
tui_wait_gone 'pp [0-9]+ tg' 10
tui_wait 'pp [0-9]+ tg' 60
s=$(stats)
echo "$s" | grep -Eq '^prompt [0-9]+ tokens \([0-9]+ reused, 1 new\)$' &&
	[ "$(reply "$id")" = "$first" ]
ok $? "/regen: the same reply, 1 token evaluated: $s"

# cursor on the reply's 4th token, branch forcing its chosen token (#1)
tui_keys F2
tui_keys F4
tui_wait '│ token [0-9]+ of [0-9]+ \(cursor\) *$' 10
tui_keys Home Right Right Right
tui_wait '│ token 4 of [0-9]+ \(cursor\) *$' 10
ok $? "cursor mode on token 4"
tui_keys 1
tui_wait 'tokens the cache held were' 60 && tui_wait 'pp [0-9]+ tg' 60
ok $? "a branch at token 4: the transcript says what was evaluated again"
s=$(stats)
echo "$s" | grep -Eq '^prompt [0-9]+ tokens \([0-9]+ reused, [0-9]+ new, [0-9]+ of them evaluated again\)$'
ok $? "/stats counts them: $s"
[ "$(reply "$id")" = "$first" ]
ok $? "forcing the chosen token gives the same reply"
tui_stop
done_testing

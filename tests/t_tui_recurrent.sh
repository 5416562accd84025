#!/bin/sh
# t_tui_recurrent.sh - the full-screen UI on a model with recurrent layers
# (issue 31 item 2): a Qwen3.5-shaped model of random weights with
# SmolLM2's tokenizer and chat template (tests/parley-mkmodel), in tmux,
# greedy, on the engine $PARLEY_TEST_BACKEND names (default the CPU).
# Ten turns evaluate only their new tokens (/stats: nothing evaluated
# again) and each reply is that of a fresh session asked the same: for
# each turn a one-shot process (`parley resume ID -p`) on a copy of the
# store with the conversation cut back to the turn before, evaluating all
# of it anew (on a GPU a reply may part from it at a near tie of the two
# rounding orders: the rest of it is then checked against a fresh engine
# forced to the UI's tokens up to there); /regen gives the same reply with
# one token evaluated (the snapshot before the prompt's last token); a
# branch at a token of the reply forcing its chosen token (#1 of the pane,
# greedy) gives the same reply, the transcript says how many tokens were
# evaluated again from the snapshot, and /stats counts them.
# PARLEY_TEST_RS_MODEL names another such model (a real model's shape on
# the GPU machine: bench/session-shapes.sh); the default model is then
# not needed. PARLEY_TEST_RS_RECURRENT=0: that model has no recurrent
# layers, so a branch cuts its KV cache back and evaluates only the
# forced token (the same UI checks for the attention-only shapes).
. "${top_srcdir:-.}/tests/lib.sh"
. "${top_srcdir:-.}/tests/tui_lib.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_tui_recurrent.XXXXXX") || exit 1
trap 'tui_stop; rm -rf "$tmp"' EXIT
export XDG_CONFIG_HOME=$tmp/config XDG_STATE_HOME=$tmp/state
export PARLEY_DB=$tmp/chat.db
backend=${PARLEY_TEST_BACKEND:-cpu}
model=${PARLEY_TEST_RS_MODEL:-}
recurrent=${PARLEY_TEST_RS_RECURRENT:-1}
if [ -n "$model" ]; then
	command -v tmux >/dev/null 2>&1 || skip_all "tmux not installed"
	ok 0 "the model $model"
else
	tui_need
	model=$tmp/q35.gguf
	"${top_builddir:-.}/tests/parley-mkmodel" --arch qwen35 \
		--tokenizer-from "$(test_model)" --type Q8_0 --embd-type Q8_0 --tied \
		--n-embd 64 --n-ff 128 --n-layer 4 --n-head 4 --n-head-kv 2 \
		--head-dim 32 --n-rot 16 --ssm-state-size 32 --ssm-group-count 2 \
		--ssm-time-step-rank 4 --full-attention-interval 2 --out-norm-scale 8 \
		--seed 3 -o "$model" >/dev/null
	ok $? "parley-mkmodel: a qwen35 model with SmolLM2's tokenizer"
fi
sys="You are a helpful assistant."
opts="-m $model --backend $backend --temp 0 --seed 42 --threads 1 --ctx 2048 -n 12"
set -- "What is the capital of France?" "And of Germany?" "Name a color." \
	"What is 2 + 2?" "Say hello." "Name a fruit." "And a vegetable?" \
	"Count to three." "Which is larger, 7 or 9?" "Thank you."

# stats: /stats, then its line's prompt part. The line before is still on
# the screen: wait for a line that differs (its reply speed, its counts)
stats_line() {
	tui_screen | grep -o 'reply [0-9]* tokens, [0-9.]* tok/s; prompt [0-9]* tokens ([^)]*)' | tail -n 1
}
stats() {
	st_before=$(stats_line)
	tui_type "/stats"
	tui_keys Enter
	st_n=300
	while [ "$st_n" -gt 0 ]; do
		st_now=$(stats_line)
		[ -n "$st_now" ] && [ "$st_now" != "$st_before" ] && break
		sleep 0.1
		st_n=$((st_n - 1))
	done
	echo "$st_now" | grep -o 'prompt [0-9]* tokens ([^)]*)'
}

# last_id: the id of the newest conversation
last_id() {
	"$PARLEY" list | sed -n 2p | awk '{print $1}'
}
# round_trips ID: the second-to-last reply of conversation ID tokenizes
# back to as many tokens as it was made of
round_trips() {
	python3 - "$PARLEY_DB" "$1" "$PARLEY" "$model" <<'PY'
import sqlite3, subprocess, sys
db, conv, parley, model = sys.argv[1:5]
c = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
rows = c.execute("SELECT content, n_tokens FROM messages WHERE "
                 "conversation_id = ? AND role = 'assistant' ORDER BY id "
                 "DESC LIMIT 2", (int(conv),)).fetchall()
text, n = rows[-1]
ids = subprocess.run([parley, "tokenize", "-m", model, "--ids", "--", text],
                     capture_output=True, text=True).stdout.split()
sys.exit(0 if len(ids) == n else 1)
PY
}
# wait_replies N SECONDS: until the store holds N finished replies (a
# reply of a few tokens on a GPU can end before the screen is read twice)
wait_replies() {
	python3 - "$PARLEY_DB" "$1" "$2" <<'PY'
import sqlite3, sys, time
db, n, t = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
end = time.monotonic() + t
while time.monotonic() < end:
    try:
        c = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
        k = c.execute("SELECT count(*) FROM messages WHERE role = "
                      "'assistant' AND finish IS NOT NULL").fetchone()[0]
        c.close()
        if k >= n:
            sys.exit(0)
    except sqlite3.Error:
        pass
    time.sleep(0.1)
print("# the store never held %d finished replies" % n)
sys.exit(1)
PY
}

tui_start "$tmp" 160 50 $opts --system "$sys"
tui_wait 'F1 help' 600
turns=0 reuse=yes
for q in "$@"; do
	tui_type "$q"
	tui_keys Enter
	wait_replies $((turns + 1)) 600 && tui_wait 'pp [0-9]+ tg' 30 || break
	turns=$((turns + 1))
	s=$(stats)
	# the first turn has nothing to reuse, each later one all before it;
	# unless the reply before does not come back as its own tokens when
	# its text is tokenized again (a random model's reply can end inside
	# a character: the text holds U+FFFD, the prompt other tokens there),
	# then the state goes back to that turn's snapshot
	re='[1-9][0-9]*'
	[ "$turns" -eq 1 ] && re=0
	if ! echo "$s" | grep -Eq "^prompt [0-9]+ tokens \\($re reused, [0-9]+ new\\)\$"; then
		if [ "$turns" -gt 1 ] &&
			echo "$s" | grep -Eq '^prompt [0-9]+ tokens \([1-9][0-9]* reused, [0-9]+ new, [0-9]+ of them evaluated again\)$' &&
			! round_trips "$(last_id)"; then
			diag "turn $turns: $s (the reply before does not tokenize back to its tokens)"
		else
			reuse="no ($s)"
			diag "turn $turns: $s"
		fi
	fi
done
[ "$turns" -eq 10 ] && [ "$reuse" = yes ]
ok $? "10 turns, each evaluating only its new tokens: $turns turns, $reuse"
id=$(last_id)
# each turn's reply against a fresh session's: a copy of the store with
# the UI's conversation cut back to the turn before (its active leaf moved
# to that reply; the ids the UI's cache held stay with it, as a resume
# aligns its prompt to them), then a one-shot process (no --save-kv:
# nothing saved to resume from) evaluates all of it anew and answers the
# turn's question; the first turn from an empty store
k=0
for q in "$@"; do
	k=$((k + 1))
	python3 - "$PARLEY_DB" "$tmp/fresh$k.db" "$id" $k <<'PY'
import sqlite3, sys
src, dst, conv, k = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
d = sqlite3.connect(dst)
if k > 1:
    s = sqlite3.connect("file:%s?mode=ro" % src, uri=True)
    s.backup(d)
    s.close()
    leaf = [r[0] for r in d.execute(
        "SELECT id FROM messages WHERE conversation_id = ? AND role = "
        "'assistant' ORDER BY id", (conv,))][k - 2]
    d.execute("UPDATE conversations SET leaf_id = ? WHERE id = ?",
              (leaf, conv))
    d.commit()
d.close()
PY
	if [ $k -eq 1 ]; then
		PARLEY_DB=$tmp/fresh1.db "$PARLEY" $opts --system "$sys" -p "$q"
	else
		PARLEY_DB=$tmp/fresh$k.db "$PARLEY" resume "$id" $opts -p "$q"
	fi >/dev/null 2>"$tmp/fresh.err" || { diag "$(cat "$tmp/fresh.err")"; break; }
done
# the UI's replies against the fresh ones token by token
# (tests/tui_replies.py: the stored reports' chosen ids and top logits).
# On the CPU they must be the same; on a GPU a one-token decode step
# (int8 activations) and a batched prefill (fp16 GEMM) round differently,
# so a reply may part from the fresh one at a near tie (the fresh
# session's top two within 0.1 in logit, cuda_parity's line), and the rest
# of it is compared with a fresh engine forced to the UI's tokens up to
# there (the fresh session's saved prompt ids and the reply's tokens)
tie=0
[ "$backend" = cpu ] || tie=0.1
replies() {
	python3 "${top_srcdir:-.}/tests/tui_replies.py" "$@"
}
verdict=$(replies fresh "$PARLEY_DB" "$id" "$tie" "$tmp" "$PARLEY" "$model" "$backend")
[ "${verdict#yes}" != "$verdict" ]
ok $? "each of the 10 replies is a fresh session's asked the UI's conversation up to it: $verdict"
first=$(replies newest "$PARLEY_DB" "$id")
tui_type "/regen"
tui_keys Enter
# the UI's 10, and now the regenerated one: the 10th again (the same
# prompt: the 10th fresh session's ids), up to near ties on a GPU (the
# prompt's last token, prefilled with the turn, is now a decode step)
wait_replies 11 600 && tui_wait 'pp [0-9]+ tg' 30
s=$(stats)
regen=$(replies newest "$PARLEY_DB" "$id")
v=$(replies same "$PARLEY_DB" "$first" "$regen" "$tie" "$tmp/fresh10.db" \
	"$PARLEY" "$model" "$backend")
echo "$s" | grep -Eq '^prompt [0-9]+ tokens \([0-9]+ reused, 1 new\)$' &&
	[ "${v#yes}" != "$v" ]
ok $? "/regen: the same reply, 1 token evaluated: $s; $v"

# cursor on the reply's 4th token, branch forcing its chosen token (#1)
tui_keys F2
tui_keys F4
tui_wait '│ token [0-9]+ of [0-9]+ \(cursor\) *$' 10
tui_keys Home Right Right Right
tui_wait '│ token 4 of [0-9]+ \(cursor\) *$' 10
ok $? "cursor mode on token 4"
tui_keys 1
if [ "$recurrent" = 1 ]; then
	tui_wait 'tokens the cache held were' 600 && wait_replies 12 600 &&
		tui_wait 'pp [0-9]+ tg' 30
	ok $? "a branch at token 4: the transcript says what was evaluated again"
	s=$(stats)
	echo "$s" | grep -Eq '^prompt [0-9]+ tokens \([0-9]+ reused, [0-9]+ new, [0-9]+ of them evaluated again\)$'
	ok $? "/stats counts them: $s"
else # a KV cache is cut back: only the forced token is new
	wait_replies 12 600 && tui_wait 'pp [0-9]+ tg' 30
	ok $? "a branch at token 4"
	s=$(stats)
	echo "$s" | grep -Eq '^prompt [0-9]+ tokens \([1-9][0-9]* reused, 1 new\)$'
	ok $? "/stats: the cache cut back, 1 token evaluated: $s"
fi
v=$(replies same "$PARLEY_DB" "$regen" "$(replies newest "$PARLEY_DB" "$id")" \
	"$tie" "$tmp/fresh10.db" "$PARLEY" "$model" "$backend")
[ "${v#yes}" != "$v" ]
ok $? "forcing the chosen token gives the reply it branched from: $v"
tui_stop
done_testing

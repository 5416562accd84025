#!/bin/sh
# t_repl.sh - a scripted multi-turn chat through the plain REPL on a
# pseudo-terminal (tests/pty_run types the keys and records the screen),
# with the real SmolLM2 model, greedy decoding and short replies; then a
# restart with `parley resume --last` and one more turn.
#
# The transcripts must equal the goldens tests/data/chat/repl.golden and
# resume.golden. They were produced ONCE by running this very script with
# PARLEY_REGEN_GOLDENS=1 (parley itself on the 2-core dev machine, CPU
# engine) and checked by reading them: the prompts, echo, multi-line
# input, slash commands and replies are where they belong. They hold
# greedy outputs of the model, so they change when the engine's numbers
# change; the engine's own correctness is tested against llama.cpp
# elsewhere (the engine's tests), not here. The speed line of /stats is
# masked.
. "${top_srcdir:-.}/tests/lib.sh"
model=$(test_model)
[ -f "$model" ] || skip_all "default model not fetched ($model)"
pty=${top_builddir:-.}/tests/pty_run
[ -x "$pty" ] || skip_all "tests/pty_run not built"
data=${top_srcdir:-.}/tests/data/chat
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_repl.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
export XDG_CONFIG_HOME=$tmp/config XDG_STATE_HOME=$tmp/state TERM=dumb
export PARLEY_DB=$tmp/chat.db
opts="-m $model --temp 0 --seed 42 -n 24 --threads 1 --ctx 1024"
sys="You are a helpful assistant."

mask() {
	sed -e 's/^\[reply [0-9]* tokens, .*\]$/[reply STATS]/' \
		-e "s#$model#MODEL#g"
}
run() { # SCRIPT GOLDEN ARGS...
	script=$1 golden=$2
	shift 2
	"$pty" -t 120 "$data/$script" -- "$PARLEY" "$@" >"$tmp/raw"
	st=$?
	mask <"$tmp/raw" >"$tmp/$golden"
	if [ -n "${PARLEY_REGEN_GOLDENS:-}" ]; then
		cp "$tmp/$golden" "$data/$golden"
	fi
	return $st
}

run repl.script repl.golden $opts --system "$sys"
ok $? "the REPL ran the script and exited 0"
grep -Eq '^\[reply [0-9]+ tokens, .*; first token after [0-9]+ ms\]' "$tmp/raw"
ok $? "/stats ends with the wait before the reply's first token"
diff -u "$data/repl.golden" "$tmp/repl.golden" >"$tmp/diff1"
ok $? "REPL transcript = tests/data/chat/repl.golden"
sed 's/^/#   /' "$tmp/diff1" | head -n 40

# libedit's format: a header line, then one entry a line, spaces as \040
grep -q 'capital.040of.040France?$' "$XDG_STATE_HOME/parley/history"
ok $? "line history saved under \$XDG_STATE_HOME/parley/history"
"$PARLEY" list >"$tmp/list"
grep -q "Capitals and fruit" "$tmp/list"
ok $? "the conversation is stored, titled by /save-title"

run resume.script resume.golden resume --last $opts
ok $? "parley resume --last ran and exited 0"
diff -u "$data/resume.golden" "$tmp/resume.golden" >"$tmp/diff2"
ok $? "resume transcript = tests/data/chat/resume.golden"
sed 's/^/#   /' "$tmp/diff2" | head -n 40

# Ctrl-C in the middle of a reply: the REPL goes on, the next line is
# taken, the partial reply is stored as interrupted (not a golden: where
# the reply stops depends on timing). No reply limit (-n -1): the reply
# could only end by filling the context, hundreds of tokens after the
# "Once" that the Ctrl-C follows, so the Ctrl-C lands in it on any machine
export PARLEY_DB=$tmp/int.db
"$pty" -t 120 "$data/interrupt.script" -- "$PARLEY" $opts -n -1 \
	--system "$sys" >"$tmp/int"
ok $? "Ctrl-C during a reply: the REPL stays and exits 0 on /quit"
"$PARLEY" show 1 >"$tmp/show"
grep -q '^--- assistant \[interrupted\]' "$tmp/show" &&
	grep -qx 'Thanks.' "$tmp/show"
ok $? "the partial reply is stored as interrupted and the next message was taken"
sed 's/^/#   /' "$tmp/show" | head -n 30
done_testing

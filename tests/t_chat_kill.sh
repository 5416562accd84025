#!/bin/bash
# t_chat_kill.sh - kill -9 the real parley (one-shot mode, SmolLM2 on the
# CPU, greedy, short replies) at random moments, CHAT_KILL_RUNS times
# (default 20) on one database (most of them while the reply streams),
# and check after each kill:
#   - PRAGMA integrity_check = ok (read through SQLite, tests/chat_dump);
#   - no finished message lost: every message that was finished before
#     the kill is still there, byte for byte;
#   - the reply being written when the kill came is either finished or a
#     reply in progress (finish NULL) whose text is a prefix of what
#     parley had already printed (so at most the last moment is lost).
# A run that is not killed finishes normally and must store exactly what
# it printed. tests/chat_kill_stress.sh runs it many more times.
. "${top_srcdir:-.}/tests/lib.sh"
set -u
runs=${CHAT_KILL_RUNS:-20}
dump=${top_builddir:-.}/tests/chat_dump
model=$(test_model)
[ -f "$model" ] || skip_all "default model not fetched ($model)"
[ -x "$dump" ] || skip_all "tests/chat_dump not built"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_chat_kill.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
db=$tmp/chat.db
export XDG_CONFIG_HOME=$tmp/config XDG_STATE_HOME=$tmp/state

hex() { od -An -v -tx1 "$1" | tr -d ' \n' | tr a-f A-F; }
prompts=("Write a story about a dragon." "Describe the sea." \
	"Explain how rain forms." "Tell me about cats." "What is a star?")
: >"$tmp/prev"
mid=0 finished=0 early=0
for i in $(seq 1 "$runs"); do
	p=${prompts[$((i % ${#prompts[@]}))]}
	"$PARLEY" -m "$model" --db "$db" -p "$p" --temp 0 -n 32 --threads 1 \
		>"$tmp/out" 2>"$tmp/err" &
	pid=$!
	# two runs in three: a random moment 0 .. 0.9 s after the reply began
	# to print (whatever the machine's load); else 0.1 .. 2 s after start
	if [ $((RANDOM % 3)) -ne 0 ]; then
		t=0
		while [ ! -s "$tmp/out" ] && [ $t -lt 1500 ] &&
			kill -0 "$pid" 2>/dev/null; do
			sleep 0.02
			t=$((t + 1))
		done
		sleep "0.$(printf '%03d' $((RANDOM % 900)))"
	else
		sleep "$((RANDOM % 2)).$(printf '%03d' $((100 + RANDOM % 900)))"
	fi
	kill -9 "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	"$dump" "$db" >"$tmp/now" 2>"$tmp/dump.err"
	rc=$?
	integ=$(head -n 1 "$tmp/now")
	# finished messages before the kill, all still there unchanged?
	lost=0
	while IFS= read -r line; do
		grep -qxF -- "$line" "$tmp/now" || lost=$((lost + 1))
	done < <(awk -F'\t' 'NR > 1 && $4 != "-"' "$tmp/prev")
	# the reply of this run: the last assistant row newer than before
	last_prev=$(awk -F'\t' 'NR > 1 { id = $1 } END { print id + 0 }' "$tmp/prev")
	reply=$(awk -F'\t' -v n="$last_prev" 'NR > 1 && $1 > n && $3 == "assistant"' "$tmp/now" | tail -n 1)
	printed=$(hex "$tmp/out")
	state="no reply yet"
	good=1
	if [ -n "$reply" ]; then
		fin=$(echo "$reply" | cut -f4)
		text=$(echo "$reply" | cut -f5)
		if [ "$fin" = "-" ]; then
			state="reply in progress (${#text} hex of ${#printed} printed)"
			mid=$((mid + 1))
			case "$printed" in "$text"*) ;; *) good=0 ;; esac
		else
			state="reply finished ($fin)"
			finished=$((finished + 1))
			# printed = stored text + the final newline
			[ "$printed" = "${text}0A" ] || [ "$printed" = "$text" ] || good=0
		fi
	else
		early=$((early + 1))
	fi
	if [ $rc -eq 0 ] && [ "$integ" = ok ] && [ $lost -eq 0 ] && [ $good -eq 1 ]; then
		ok 0 "kill $i: integrity $integ, finished messages lost 0, $state"
	else
		ok 1 "kill $i: rc $rc, integrity '$integ', lost $lost, $state, text ok $good"
	fi
	cp "$tmp/now" "$tmp/prev"
done
diag "$runs kills: $mid in the middle of a reply, $finished after the end, $early before the reply began"
[ "$mid" -ge $((runs / 3)) ]
ok $? "at least a third of the kills ($mid of $runs) hit a reply in progress"
done_testing

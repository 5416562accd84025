#!/bin/bash
# t_chat_kill.sh - kill -9 the real parley (one-shot mode, SmolLM2 on the
# CPU, greedy, short replies) CHAT_KILL_RUNS times (default 20) on one
# database, at points of its progress, never at moments of the clock:
# tests/kill_at reads parley's stdout and kills it once the reply has
# streamed a chosen number of bytes. Those numbers come from a seed that
# is printed ("# seed S"); KILL_SEED=S replays the same kill points.
#
# First, one run of each prompt that is not killed: it must exit 0 and
# store exactly what it printed, and its length L is the reply's length
# (greedy decoding: every run of the prompt prints the same reply). Then
# each kill is one of (drawn from the seed):
#   6 in 10  after N bytes of the reply, N uniform in 1 .. L-1: the reply
#            is still streaming when the kill comes, by construction (the
#            rest of it is at least one more token away);
#   2 in 10  once the store's update is proven (below);
#   1 in 10  at once, before parley printed anything;
#   1 in 10  not at all (the run must finish and store what it printed).
# After each run:
#   - PRAGMA integrity_check = ok (read through SQLite, tests/chat_dump);
#   - no finished message lost: every message finished before the run is
#     still there, byte for byte;
#   - the reply of the run is either finished (stored = printed) or in
#     progress (finish NULL) with a text that is a prefix of what parley
#     printed;
#   - a reply in progress older than the store interval holds text (the
#     session stores it every SESSION_STORE_MS, src/session.h). "Older"
#     is proven by order, not by speed: kill_at -i counts the writes that
#     came after a read begun SESSION_STORE_MS after parley's first
#     output. parley writes each piece of the reply at once, then
#     evaluates the token, then stores the text when SESSION_STORE_MS
#     have passed since the message began; only the end of a reply (a
#     stop string, an error) writes up to two more pieces with no such
#     check in between. So 4 writes after the mark mean a check ran after
#     the mark, hence an update with the text so far: the row cannot be
#     empty.
# The kills after N bytes must hit the reply in progress; that is checked
# on their total (a kill delayed past the end of a reply, e.g. on a very
# loaded machine, is allowed once in a while, not as a rule). How many
# kills were old enough for the store-interval check is printed; on a
# machine that writes a whole reply within SESSION_STORE_MS none is.
# tests/chat_kill_stress.sh runs this many more times.
. "${top_srcdir:-.}/tests/lib.sh"
set -u
runs=${CHAT_KILL_RUNS:-20}
dump=${top_builddir:-.}/tests/chat_dump
killat=${top_builddir:-.}/tests/kill_at
model=$(test_model)
[ -f "$model" ] || skip_all "default model not fetched ($model)"
[ -x "$dump" ] || skip_all "tests/chat_dump not built"
[ -x "$killat" ] || skip_all "tests/kill_at not built"
store_ms=$(sed -n 's/^#define SESSION_STORE_MS *\([0-9][0-9]*\).*/\1/p' \
	"${top_srcdir:-.}/src/session.h")
if [ -z "$store_ms" ]; then
	ok 1 "SESSION_STORE_MS found in src/session.h"
	done_testing
	exit
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_chat_kill.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
db=$tmp/chat.db
export XDG_CONFIG_HOME=$tmp/config XDG_STATE_HOME=$tmp/state

# the seed only picks kill points; the clock merely varies it between runs
seed=${KILL_SEED:-$((($$ * 31 + $(date +%s)) % 32768))}
RANDOM=$seed
diag "seed $seed (KILL_SEED=$seed replays these kill points)"

hex() { od -An -v -tx1 "$1" | tr -d ' \n' | tr a-f A-F; }
prompts=("Write a story about a dragon." "Describe the sea." \
	"Explain how rain forms." "Tell me about cats." "What is a star?")
: >"$tmp/prev" # a new database: no messages yet

# run_one KILL_AT_OPTS... -- PROMPT: run parley under kill_at, then check
# the database. Sets: state (mid|finished|early), line (description),
# good (1 when every check passed), wa (writes after the interval mark).
run_one() {
	local opts=() p
	while [ "$1" != -- ]; do
		opts+=("$1")
		shift
	done
	p=$2
	res=$("$killat" "${opts[@]}" -i "$store_ms" -t 300 "$tmp/out" -- \
		"$PARLEY" -m "$model" --db "$db" -p "$p" --temp 0 -n 32 \
		--threads 1 2>"$tmp/err")
	krc=$?
	killed=$(echo "$res" | sed -n 's/.*killed=\([01]\).*/\1/p')
	status=$(echo "$res" | sed -n 's/.*status=\([0-9]*\).*/\1/p')
	wa=$(echo "$res" | sed -n 's/.*writes_after=\([0-9]*\).*/\1/p')
	"$dump" "$db" >"$tmp/now" 2>"$tmp/dump.err"
	rc=$?
	integ=$(head -n 1 "$tmp/now")
	# finished messages before the run, all still there unchanged?
	lost=0
	while IFS= read -r l; do
		grep -qxF -- "$l" "$tmp/now" || lost=$((lost + 1))
	done < <(awk -F'\t' 'NR > 1 && $4 != "-"' "$tmp/prev")
	# the reply of this run: the last assistant row newer than before
	last_prev=$(awk -F'\t' 'NR > 1 { id = $1 } END { print id + 0 }' "$tmp/prev")
	reply=$(awk -F'\t' -v n="$last_prev" 'NR > 1 && $1 > n && $3 == "assistant"' "$tmp/now" | tail -n 1)
	printed=$(hex "$tmp/out")
	good=1
	if [ $krc -ne 0 ] || [ -z "$killed" ]; then
		good=0
		state=error
		line="kill_at failed ($krc): $res $(head -c 300 "$tmp/err")"
	elif [ -n "$reply" ]; then
		fin=$(echo "$reply" | cut -f4)
		text=$(echo "$reply" | cut -f5)
		if [ "$fin" = "-" ]; then
			state=mid
			line="reply in progress (${#text} hex of ${#printed} printed, $wa writes after the mark)"
			case "$printed" in "$text"*) ;; *) good=0 ;; esac
			# older than the store interval (proven): holds text
			if [ "$wa" -ge 4 ] && [ -z "$text" ]; then
				good=0
				line="$line: EMPTY although older than ${store_ms} ms"
			fi
		else
			state=finished
			line="reply finished ($fin)"
			# printed = stored text + the final newline
			[ "$printed" = "${text}0A" ] || [ "$printed" = "$text" ] || good=0
		fi
	else
		state=early
		line="no reply yet"
		# the reply's row is begun before its first piece is printed
		[ -z "$printed" ] || good=0
	fi
	if [ "$killed" = 0 ]; then
		# not killed: it must have finished normally
		[ "$status" = 0 ] && [ "$state" = finished ] || good=0
		line="$line, exit status $status"
	fi
	[ $rc -eq 0 ] && [ "$integ" = ok ] && [ $lost -eq 0 ] || good=0
	line="integrity '$integ', finished messages lost $lost, $line"
	cp "$tmp/now" "$tmp/prev"
}

# the reference runs: not killed; their lengths place the kills
declare -a len
for k in "${!prompts[@]}"; do
	run_one -- "${prompts[$k]}"
	size=$(wc -c <"$tmp/out")
	# the final newline is printed after the reply is finished
	[ "$(tail -c 1 "$tmp/out" | od -An -tx1 | tr -d ' ')" = 0a ] &&
		size=$((size - 1))
	len[$k]=$size
	[ $good -eq 1 ] && [ "$size" -ge 2 ]
	ok $? "reference $k: not killed, $line, reply $size bytes"
done

mid=0 finished=0 early=0 by_bytes=0 by_bytes_mid=0 aged=0
for i in $(seq 1 "$runs"); do
	k=$((i % ${#prompts[@]}))
	L=${len[$k]}
	r=$((RANDOM % 10))
	if [ $r -lt 6 ] && [ "$L" -ge 2 ]; then
		n=$((1 + RANDOM % (L - 1)))
		how="after $n of $L bytes"
		run_one -b "$n" -- "${prompts[$k]}"
		by_bytes=$((by_bytes + 1))
		[ "$state" = mid ] && by_bytes_mid=$((by_bytes_mid + 1))
	elif [ $r -lt 8 ]; then
		how="once the update is proven"
		run_one -u 4 -- "${prompts[$k]}"
	elif [ $r -lt 9 ]; then
		how="at once"
		run_one -b 0 -- "${prompts[$k]}"
	else
		how="not killed"
		run_one -- "${prompts[$k]}"
	fi
	case $state in
	mid) mid=$((mid + 1)) ;;
	finished) finished=$((finished + 1)) ;;
	*) early=$((early + 1)) ;;
	esac
	[ "$state" = mid ] && [ "$wa" -ge 4 ] && aged=$((aged + 1))
	[ $good -eq 1 ]
	ok $? "run $i, $how: $line"
done
diag "$runs runs: $mid in the middle of a reply ($aged of them older than the store interval, their text checked), $finished after the end, $early before the reply began"
# by construction every kill after N < L bytes lands in the reply; a
# rare kill delayed past the reply's end is tolerated, a rule is not
[ $((2 * by_bytes_mid)) -ge "$by_bytes" ]
ok $? "kills after N bytes of the reply: $by_bytes_mid of $by_bytes hit it in progress"
done_testing

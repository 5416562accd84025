#!/bin/bash
# t_store_kill.sh - kill -9 a writer in the middle of streamed replies,
# STORE_KILL_RUNS times (default 20) on one database, and check after each
# kill: PRAGMA integrity_check = ok, FTS and foreign keys consistent, every
# message the writer reported finished present and intact, and the text
# lost from the reply in progress at most 1000 ms of writing (the writer
# saves every 50 ms). Emits TAP. Helpers: store_writer, store_check, found
# in $STORE_TEST_BIN (default: $top_builddir/tests).
set -u
runs=${STORE_KILL_RUNS:-20}
bin=${STORE_TEST_BIN:-${top_builddir:-.}/tests}
limit_ms=1000

if [ ! -x "$bin/store_writer" ] || [ ! -x "$bin/store_check" ]; then
	echo "1..0 # SKIP store_writer/store_check not built in $bin"
	exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_store_kill.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
db=$tmp/kill.db
echo "1..$((runs + 1))"
max_lost=0
mid=0
fail=0
for i in $(seq 1 "$runs"); do
	ids=$tmp/ids.$i
	: >"$ids"
	"$bin/store_writer" "$db" "$ids" &
	pid=$!
	# a random moment 150..749 ms after the start
	sleep "0.$(printf '%03d' $((150 + RANDOM % 600)))"
	now=$(date +%s%3N)
	kill -9 "$pid"
	wait "$pid" 2>/dev/null
	out=$("$bin/store_check" "$db" "$ids" "$now")
	rc=$?
	lost=$(echo "$out" | sed -n 's/.*lost_ms=\([-0-9]*\).*/\1/p')
	prog=$(echo "$out" | sed -n 's/.*in_progress=\([01]\).*/\1/p')
	if [ $rc -eq 0 ] && [ -n "$lost" ] && [ "$lost" -ge 0 ] &&
		[ "$lost" -le $limit_ms ]; then
		echo "ok $i - kill $i: $out"
	else
		echo "not ok $i - kill $i: $out"
		fail=1
	fi
	[ -n "$lost" ] && [ "$lost" -gt "$max_lost" ] && max_lost=$lost
	[ "$prog" = 1 ] && mid=$((mid + 1))
done
echo "# $runs kills, $mid in the middle of a reply, max text lost ${max_lost} ms"
# most kills must land in a reply in progress, or the test proves little
if [ "$mid" -ge $((runs / 2)) ]; then
	echo "ok $((runs + 1)) - $mid of $runs kills hit a reply in progress"
else
	echo "not ok $((runs + 1)) - only $mid of $runs kills hit a reply"
	fail=1
fi
exit $fail

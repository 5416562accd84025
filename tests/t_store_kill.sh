#!/bin/bash
# t_store_kill.sh - kill -9 a writer in the middle of streamed replies,
# STORE_KILL_RUNS times (default 20) on one database, at points of its
# progress, never at moments of the clock: tests/kill_at reads the
# writer's stdout (one line per chunk of a reply) and kills it once N
# bytes have come, N drawn from a seed that is printed ("# seed S");
# KILL_SEED=S replays the same kill points. After each kill: PRAGMA
# integrity_check = ok, FTS and foreign keys consistent, every message the
# writer reported finished present and intact, every reply made of whole
# chunks of what was written, and the reply in progress holding every
# chunk that was saved before the last chunk printed (the writer saves
# every STORE_KILL_SAVE_EVERY chunks, tests/store_kill.h: so at most that
# many chunks are lost). Emits TAP. Helpers: store_writer, store_check,
# kill_at, found in $STORE_TEST_BIN (default: $top_builddir/tests).
set -u
runs=${STORE_KILL_RUNS:-20}
bin=${STORE_TEST_BIN:-${top_builddir:-.}/tests}

for p in store_writer store_check kill_at; do
	if [ ! -x "$bin/$p" ]; then
		echo "1..0 # SKIP $p not built in $bin"
		exit 0
	fi
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_store_kill.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
db=$tmp/kill.db
# the seed only picks kill points; the clock merely varies it between runs
seed=${KILL_SEED:-$((($$ * 31 + $(date +%s)) % 32768))}
RANDOM=$seed
echo "1..$((runs + 1))"
echo "# seed $seed (KILL_SEED=$seed replays these kill points)"
max_lost=0
mid=0
fail=0
for i in $(seq 1 "$runs"); do
	ids=$tmp/ids.$i
	: >"$ids"
	# a chunk line is about 10 bytes and a reply 20..60 chunks: N falls
	# in the first three replies, almost always inside one (the few
	# bytes between two replies are the only other places)
	n=$((1 + RANDOM % 1200))
	res=$("$bin/kill_at" -b "$n" -t 300 "$tmp/out" -- \
		"$bin/store_writer" "$db" "$ids")
	krc=$?
	out=$("$bin/store_check" "$db" "$ids" "$tmp/out")
	rc=$?
	prog=$(echo "$out" | sed -n 's/.*in_progress=\([01]\).*/\1/p')
	printed=$(echo "$out" | sed -n 's/.*printed=\([0-9]*\).*/\1/p')
	stored=$(echo "$out" | sed -n 's/.*stored=\([0-9]*\).*/\1/p')
	if [ $krc -eq 0 ] && [ $rc -eq 0 ] &&
		echo "$res" | grep -q 'killed=1 status=137'; then
		echo "ok $i - kill $i after $n bytes: $out"
	else
		echo "not ok $i - kill $i after $n bytes: $res; $out"
		fail=1
	fi
	if [ "$prog" = 1 ]; then
		mid=$((mid + 1))
		lost=$((printed - stored))
		[ "$lost" -gt "$max_lost" ] && max_lost=$lost
	fi
done
echo "# $runs kills, $mid in the middle of a reply, at most $max_lost chunks of a reply lost"
# by design nearly every kill lands in a reply; at least half is robust
if [ $((2 * mid)) -ge "$runs" ]; then
	echo "ok $((runs + 1)) - $mid of $runs kills hit a reply in progress"
else
	echo "not ok $((runs + 1)) - only $mid of $runs kills hit a reply"
	fail=1
fi
exit $fail

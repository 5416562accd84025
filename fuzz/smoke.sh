#!/bin/sh
# fuzz/smoke.sh - CI's short fuzz run: every harness of fuzz/harnesses.sh
# for SECONDS on its committed corpus under ASan + UBSan (libFuzzer).
#
#   fuzz/smoke.sh [SECONDS] [PARALLEL]    (default 30 s, nproc at a time)
#
# Builds the harnesses with clang in build-fuzz/ (configure
# --enable-fuzzing; $FUZZ_BUILD overrides the directory), then runs
# PARALLEL harnesses at a time, each on a scratch corpus (seeded from the
# repository's data: fuzz/harnesses.sh's fuzz_seed) beside the committed
# fuzz/corpus/NAME/ (which it never changes). Fails on any
# crash, sanitizer report, property failure (the harnesses abort), leak,
# timeout (an input running 10 s) or out-of-memory (2 GB): the log's tail
# and the input (base64) are printed. One line per harness otherwise.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/fuzz/harnesses.sh"
secs=${1:-30}
par=${2:-$(nproc)}
bld=${FUZZ_BUILD:-$top/build-fuzz}
work=$(mktemp -d "${TMPDIR:-/tmp}/parley-smoke.XXXXXX")
trap 'rm -rf "$work"' EXIT
start=$(date +%s)
# shellcheck disable=SC2086
fuzz_build "$top" "$bld" $FUZZ_HARNESSES
echo "fuzz smoke: built in $(($(date +%s) - start)) s; $secs s per harness, $par at a time"
fuzz_env "$top"
UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export UBSAN_OPTIONS

# Run harness $1: its log, exit status and findings go to $work.
smoke_one() {
	mkdir -p "$work/corpus-$1" "$work/art-$1"
	FUZZ_BUILD=$bld fuzz_seed "$1" "$top" "$work/corpus-$1"
	rc=0
	# shellcheck disable=SC2046
	(cd "$bld" && "./fuzz/fuzz_$1" $(fuzz_opts "$1" "$top") \
		-max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
		-artifact_prefix="$work/art-$1/" -print_final_stats=1 \
		"$work/corpus-$1" "$top/fuzz/corpus/$1") >"$work/$1.log" 2>&1 ||
		rc=$?
	echo "$rc" >"$work/$1.rc"
}

# PARALLEL lanes, each running its share of the list one after another.
lane=0
while [ "$lane" -lt "$par" ]; do
	(
		i=0
		for n in $FUZZ_HARNESSES; do
			[ $((i % par)) -eq "$lane" ] && smoke_one "$n"
			i=$((i + 1))
		done
	) &
	lane=$((lane + 1))
done
wait

status=0
for n in $FUZZ_HARNESSES; do
	rc=$(cat "$work/$n.rc" 2>/dev/null || echo missing)
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$n.log")
	cov=$(grep -o 'cov: [0-9]*' "$work/$n.log" | tail -n 1)
	found=$(ls "$work/art-$n" 2>/dev/null | tr '\n' ' ')
	if [ "$rc" = 0 ] && [ -z "$found" ]; then
		echo "fuzz smoke: $n ok (${runs:-?} runs, ${cov:-cov: ?})"
		continue
	fi
	status=1
	echo "fuzz smoke: $n FAILED (exit $rc) ${found:+findings: $found}"
	grep -v '^#[0-9]' "$work/$n.log" | tail -n 40
	for f in "$work/art-$n"/*; do
		[ -f "$f" ] || continue
		echo "--- $f (base64; keep it in tests/data/$n/crashers/):"
		base64 "$f" | head -c 4000
		echo
	done
done
echo "fuzz smoke: $(($(date +%s) - start)) s in all"
exit $status

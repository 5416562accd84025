#!/bin/sh
# fuzz/run.sh - build the libFuzzer harnesses and fuzz one of them, or all.
#
#   fuzz/run.sh NAME [SECONDS] [JOBS]    one harness (fuzz/fuzz_NAME.c)
#   fuzz/run.sh all [SECONDS] [JOBS]     every harness, one after another
#
# Builds in build-fuzz/ with clang (configure --enable-fuzzing), fuzzes
# NAME for SECONDS (default 600) with JOBS processes (default 1) on the
# working corpus build-fuzz/corpus-NAME/ (seeded from the repository's
# data) plus the committed fuzz/corpus/NAME/ (read only: fuzz/merge.sh
# folds new inputs into it), and copies every crash, leak, timeout or
# out-of-memory input into tests/data/NAME/crashers/, where `make check`
# replays it. Exits non-zero when a harness found something.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/fuzz/harnesses.sh"
name=${1:?usage: fuzz/run.sh NAME|all [SECONDS] [JOBS]}
secs=${2:-600}
jobs=${3:-1}
bld=${FUZZ_BUILD:-$top/build-fuzz}
if [ "$name" = all ]; then
	names=$FUZZ_HARNESSES
else
	case " $FUZZ_HARNESSES " in
	*" $name "*) names=$name ;;
	*) echo "fuzz/run.sh: no harness $name (one of: $FUZZ_HARNESSES)" >&2; exit 2 ;;
	esac
fi
# shellcheck disable=SC2086
fuzz_build "$top" "$bld" $names
fuzz_env "$top"
status=0
for n in $names; do
	corpus=$bld/corpus-$n
	art=$bld/artifacts-$n
	mkdir -p "$corpus" "$art" "$top/tests/data/$n/crashers"
	fuzz_seed "$n" "$top" "$corpus"
	committed=$top/fuzz/corpus/$n
	[ -d "$committed" ] || committed=
	# One job runs in the foreground; several write build-fuzz/fuzz-N.log.
	par=
	[ "$jobs" -gt 1 ] && par="-jobs=$jobs -workers=$jobs"
	echo "fuzz/run.sh: fuzz_$n for $secs s" >&2
	rc=0
	# shellcheck disable=SC2046,SC2086
	(cd "$bld" && "./fuzz/fuzz_$n" $(fuzz_opts "$n" "$top") $par \
		-max_total_time="$secs" -timeout=30 -artifact_prefix="$art/" \
		-print_final_stats=1 "$corpus" $committed) || rc=$?
	for c in "$art"/crash-* "$art"/leak-* "$art"/timeout-* "$art"/oom-*; do
		[ -f "$c" ] || continue
		mv "$c" "$top/tests/data/$n/crashers/"
		echo "fuzz/run.sh: kept ${c##*/} in tests/data/$n/crashers/" >&2
		rc=1
	done
	[ "$rc" -eq 0 ] || status=1
done
exit $status

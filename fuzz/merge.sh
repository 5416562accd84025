#!/bin/sh
# fuzz/merge.sh - minimise the committed corpora with libFuzzer's -merge=1.
#
#   fuzz/merge.sh [NAME...]     (default: every harness of fuzz/harnesses.sh)
#
# fuzz/corpus/NAME/ becomes the smallest set of inputs, from itself, the
# working corpus build-fuzz/corpus-NAME/ (fuzz/run.sh) and the seeds of
# the repository's data, that keeps every feature (edge, counter) any of
# them reaches; inputs over FUZZ_SEED_MAX bytes (64 KB) stay out. Inputs
# are named by their SHA-1, as libFuzzer writes them.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/fuzz/harnesses.sh"
names=${*:-$FUZZ_HARNESSES}
bld=${FUZZ_BUILD:-$top/build-fuzz}
# shellcheck disable=SC2086
fuzz_build "$top" "$bld" $names
fuzz_env "$top"
cap=${FUZZ_SEED_MAX:-65536}
for n in $names; do
	cand=$bld/candidates-$n seeds=$bld/seeds-$n new=$bld/merged-$n
	rm -rf "$cand" "$seeds" "$new"
	mkdir -p "$cand" "$seeds" "$new" "$bld/corpus-$n" "$top/fuzz/corpus/$n"
	fuzz_seed "$n" "$top" "$seeds"
	# Files over $cap bytes (the model files, vocabularies) stay out of
	# the committed corpus: run.sh and long-run.sh seed them afresh from
	# the repository's data each run.
	find "$top/fuzz/corpus/$n" "$bld/corpus-$n" "$seeds" -type f \
		-size -"$((cap + 1))"c -exec cp {} "$cand/" \;
	# shellcheck disable=SC2046
	(cd "$bld" && "./fuzz/fuzz_$n" $(fuzz_opts "$n" "$top") -merge=1 \
		-timeout=30 "$new" "$cand") >"$bld/merge-$n.log" 2>&1 || {
		tail -n 20 "$bld/merge-$n.log" >&2
		exit 1
	}
	rm -rf "$top/fuzz/corpus/$n" "$seeds" "$cand"
	mv "$new" "$top/fuzz/corpus/$n"
	echo "fuzz/merge.sh: $n: $(ls "$top/fuzz/corpus/$n" | wc -l) inputs," \
		"$(du -sk "$top/fuzz/corpus/$n" | cut -f1) KB" >&2
done

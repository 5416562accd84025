#!/bin/sh
# fuzz/run.sh - build the libFuzzer harnesses and fuzz one of them.
#
#   fuzz/run.sh gguf [SECONDS] [JOBS]
#
# Builds in build-fuzz/ with clang (configure --enable-fuzzing), seeds the
# corpus (fuzz/corpus-NAME/), runs for SECONDS (default 600) and copies any
# crash into tests/data/NAME/crashers/ so that `make check` replays it.
set -eu
name=${1:?usage: fuzz/run.sh NAME [SECONDS] [JOBS]}
secs=${2:-600}
jobs=${3:-1}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
[ -x configure ] || autoreconf -fi
mkdir -p build-fuzz
(cd build-fuzz && { [ -f Makefile ] || ../configure CC=clang --enable-fuzzing --without-cuda >/dev/null; } \
	&& make -j2 "fuzz/fuzz_$name" >/dev/null)
corpus="fuzz/corpus-$name"
mkdir -p "$corpus" "tests/data/$name/crashers"
if [ "$name" = gguf ]; then
	clang -std=c11 -D_GNU_SOURCE -Isrc -Itests -o build-fuzz/seed_gguf \
		fuzz/seed_gguf.c tests/gguf_bytes.c src/sbuf.c
	build-fuzz/seed_gguf "$corpus"
	for f in ../shared/testdata/vocab/*.gguf; do
		[ -f "$f" ] && [ "$(stat -c %s "$f")" -lt 4000000 ] && cp "$f" "$corpus/" || true
	done
fi
if [ "$name" = model ]; then
	cp tests/data/engine/*.gguf "$corpus/"
fi
if [ "$name" = store_import ]; then
	cp tests/data/store/seeds/*.json "$corpus/"
fi
if [ "$name" = template ]; then
	# the two directories share names (chatml.jinja, ...): prefix them
	for f in tests/data/template/templates/*.jinja; do cp "$f" "$corpus/t-${f##*/}"; done
	for f in prompts/templates/*.jinja; do cp "$f" "$corpus/p-${f##*/}"; done
fi
if [ "$name" = sse ]; then
	cp tests/data/sse/crashers/* "$corpus/"
fi
if [ "$name" = json ]; then
	cp tests/data/template/cases/*.json tests/data/template/manifest.json "$corpus/"
fi
if [ "$name" = tok ]; then
	clang -std=c11 -o build-fuzz/seed_tok fuzz/seed_tok.c
	build-fuzz/seed_tok tests/data/tok/corpus.txt "$corpus"
fi
if [ "$name" = tok_load ]; then
	cp tests/data/tok/tiny-*.gguf "$corpus/"
fi
[ -f "fuzz/dict/$name.dict" ] && dict="-dict=../fuzz/dict/$name.dict" || dict=
mkdir -p build-fuzz/artifacts
status=0
# One job runs in the foreground; several write build-fuzz/fuzz-N.log each.
par=
[ "$jobs" -gt 1 ] && par="-jobs=$jobs -workers=$jobs"
# shellcheck disable=SC2086
(cd build-fuzz && "./fuzz/fuzz_$name" $dict $par -max_total_time="$secs" \
	-artifact_prefix=artifacts/ -print_final_stats=1 "../$corpus") || status=$?
for c in build-fuzz/artifacts/crash-* build-fuzz/artifacts/leak-* build-fuzz/artifacts/timeout-* build-fuzz/artifacts/oom-*; do
	[ -f "$c" ] && cp "$c" "tests/data/$name/crashers/" && echo "kept $c as a regression file"
done
exit $status

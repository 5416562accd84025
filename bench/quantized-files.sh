#!/bin/sh
# bench/quantized-files.sh - files made by llama.cpp's own quantizer, as
# users download them, for a real model's shape: parley's writer writes the
# shape's layers in F16 with TOKSRC's tokenizer and chat template (so the
# files chat: session-shapes.sh runs on them), llama-imatrix computes an
# importance matrix over a text (the i-quants below 4 bits need one), and
# llama-quantize makes each TYPE with it.
#
#   bench/quantized-files.sh BUILD_DIR LLAMA_DIR TOKSRC SHAPE TYPE...
#
# BUILD_DIR: a built parley tree. LLAMA_DIR: llama.cpp's build/bin with
# llama-quantize and llama-imatrix (a CPU build does: neither needs the
# GPU; ../shared/peers/build-llamacpp.sh builds them with CUDA). TOKSRC: a
# GGUF with tokenizer.* keys and a chat template (session-shapes.sh's).
# SHAPE: one of bench/shapes.sh. TYPE: a llama-quantize type (IQ4_XS,
# IQ3_XXS, IQ2_XXS, Q4_K_M, ...) or UD (a mix in the manner of the "UD"
# files: Q4_K_M with the FFN's gate and up in IQ4_XS, attn_v and the
# output in Q6_K, the first and last layers' FFN in Q8_0).
# Writes MODELS_DIR/SHAPE-TYPE.gguf (MODELS_DIR default /tmp/parley-q) and
# prints each file's size. Environment: TEXT (the imatrix's text, default
# the README and the man page), CHUNKS (its chunks of 512 tokens, 8),
# THREADS (default nproc).
set -eu
B=$(cd "$1" && pwd)
L=$2
T=$3
S=$4
shift 4
here=$(cd "$(dirname "$0")" && pwd)
. "$here/shapes.sh"
DIR=${MODELS_DIR:-/tmp/parley-q}
TH=${THREADS:-$(nproc)}
mkdir -p "$DIR"
f16=$DIR/$S-F16.gguf
im=$DIR/$S-imatrix.gguf
if [ ! -f "$f16" ]; then
	# shellcheck disable=SC2046
	"$B/parley" dev-mkmodel $(shape "$S" | sed 's/--n-vocab [0-9]*//') \
		--type F16 --tokenizer-from "$T" --n-ctx 4096 -o "$f16.tmp" >/dev/null
	mv "$f16.tmp" "$f16"
fi
if [ ! -f "$im" ]; then
	text=${TEXT:-$DIR/imatrix-text.txt}
	[ -n "${TEXT:-}" ] || cat "$here/../README.md" "$here/../man/parley.1" >"$text"
	"$L/llama-imatrix" -m "$f16" -f "$text" -o "$im.tmp.gguf" \
		--chunks "${CHUNKS:-8}" -t "$TH" -c 512 >"$DIR/imatrix.log" 2>&1 ||
		{ tail -n 20 "$DIR/imatrix.log"; exit 1; }
	mv "$im.tmp.gguf" "$im"
fi
last=$(($(shape "$S" | sed 's/.*--n-layer \([0-9]*\).*/\1/') - 1))
# quantize OUT TYPE [OPTION...]: llama-quantize with the importance matrix
quantize() {
	o=$1 q=$2
	shift 2
	"$L/llama-quantize" --imatrix "$im" "$@" "$f16" "$o.tmp" "$q" "$TH" \
		>"${o%.gguf}.log" 2>&1 || { tail -n 20 "${o%.gguf}.log"; exit 1; }
	mv "$o.tmp" "$o"
}
for t in "$@"; do
	out=$DIR/$S-$t.gguf
	if [ ! -f "$out" ]; then
		case $t in
		# (the first pattern that matches a tensor decides its type)
		UD) quantize "$out" Q4_K_M --tensor-type "blk\.0\.ffn_.*=q8_0" \
			--tensor-type "blk\.$last\.ffn_.*=q8_0" \
			--tensor-type ffn_gate=iq4_xs --tensor-type ffn_up=iq4_xs \
			--tensor-type attn_v=q6_k --output-tensor-type q6_k ;;
		*) quantize "$out" "$t" ;;
		esac
	fi
	echo "$t: $(du -h "$out" | cut -f1)"
done

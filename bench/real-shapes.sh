#!/bin/sh
# bench/real-shapes.sh - the CUDA engine on random-weight models with the
# real models' shapes and quantization mixes (made here by the random-weight
# writer, `parley dev-mkmodel`): each one loads, matches the CPU reference
# (exact dots) on its first N tokens (tests/cuda_parity), and is measured by
# `parley bench`. Run on the GPU machine from a built tree:
#
#   bench/real-shapes.sh [BUILD_DIR] [NAME...]     (default: all, in order)
#
# NAME: qwen05-f16 tinyllama-q8 llama1b-f16 qwen3b-q4km qwen7b-q4km qwen7b-q8
# Environment: MODELS_DIR (default /tmp/parley-shapes), N_TOKENS (8),
# BENCH_ARGS (default "-p 512 -n 128 -r 3").
set -eu
B=$(cd "${1:-build}" && pwd)
[ $# -gt 0 ] && shift
DIR=${MODELS_DIR:-/tmp/parley-shapes}
mkdir -p "$DIR"
names=${*:-qwen05-f16 tinyllama-q8 llama1b-f16 qwen3b-q4km qwen7b-q4km qwen7b-q8}
q4km="--type Q4_K --more-bits-type Q6_K --out-type Q6_K --embd-type Q4_K"

# Shapes from the models' published configurations.
shape() {
	case $1 in
	qwen05-f16) echo "--arch qwen2 --n-vocab 151936 --n-embd 896 --n-ff 4864 --n-layer 24 --n-head 14 --n-head-kv 2 --head-dim 64 --rope-base 1000000 --tied --type F16" ;;
	tinyllama-q8) echo "--arch llama --n-vocab 32000 --n-embd 2048 --n-ff 5632 --n-layer 22 --n-head 32 --n-head-kv 4 --head-dim 64 --type Q8_0" ;;
	llama1b-f16) echo "--arch llama --n-vocab 128256 --n-embd 2048 --n-ff 8192 --n-layer 16 --n-head 32 --n-head-kv 8 --head-dim 64 --rope-base 500000 --rope-freqs --tied --type F16" ;;
	qwen3b-q4km) echo "--arch qwen2 --n-vocab 151936 --n-embd 2048 --n-ff 11008 --n-layer 36 --n-head 16 --n-head-kv 2 --head-dim 128 --rope-base 1000000 --tied $q4km" ;;
	qwen7b-q4km) echo "--arch qwen2 --n-vocab 152064 --n-embd 3584 --n-ff 18944 --n-layer 28 --n-head 28 --n-head-kv 4 --head-dim 128 --rope-base 1000000 $q4km" ;;
	qwen7b-q8) echo "--arch qwen2 --n-vocab 152064 --n-embd 3584 --n-ff 18944 --n-layer 28 --n-head 28 --n-head-kv 4 --head-dim 128 --rope-base 1000000 --type Q8_0" ;;
	*) echo "real-shapes: unknown model $1" >&2; exit 2 ;;
	esac
}

status=0
for n in $names; do
	f="$DIR/$n.gguf"
	if [ ! -f "$f" ]; then
		# shellcheck disable=SC2046
		"$B/parley" dev-mkmodel $(shape "$n") --n-ctx 32768 -o "$f.tmp" >/dev/null
		mv "$f.tmp" "$f"
	fi
	echo "=== $n ($(du -h "$f" | cut -f1))"
	"$B/tests/cuda_parity" "$f" "${N_TOKENS:-8}" | grep -v '^token' || status=1
	# shellcheck disable=SC2086
	"$B/parley" bench -m "$f" --backend cuda ${BENCH_ARGS:--p 512 -n 128 -r 3} | grep -v '^model:'
done
exit $status

#!/bin/sh
# bench/vs-llamacpp.sh - parley and llama.cpp side by side on the GPU machine,
# on the same files, in the same run: random-weight models of real models'
# shapes written by parley's writer (F16, no tokenizer: both engines bench
# token ids), quantized by llama.cpp's own llama-quantize (so parley reads
# the files users have), then llama-bench and `parley bench` alternately.
#
#   bench/vs-llamacpp.sh BUILD_DIR LLAMA_DIR [SHAPE...]
#
# BUILD_DIR: a built parley tree (parley in it). LLAMA_DIR: a llama.cpp
# build with build/bin/llama-bench and llama-quantize in it; when missing and
# LLAMA_BUILD names a build script (../shared/peers/build-llamacpp.sh), that
# script builds it there first (about 4.5 minutes on 16 cores). Or build
# it on the development machine without device time: cmake as that script
# does plus -DBUILD_SHARED_LIBS=OFF, `--target llama-bench` (about 45
# minutes on 2 cores), strip it, `xz -6` (38 MiB), split it in two parts
# carried by two calls of one warm machine (a call carries 64 MiB with the
# checkout's 34), and `cat` the parts through `xz -dc` into
# LLAMA_DIR/build/bin/llama-bench there.
# SHAPE: qwen2.5-7b qwen3-0.6b qwen3-4b qwen3-8b gemma3-270m gemma3-1b gemma3-4b
# gemma3-12b qwen3-14b qwen3-32b gemma3-27b qwen3-30b-a3b qwen36-27b
# qwen36-35b-a3b gpt-oss-20b gpt-oss-120b (default: the first seven; see big(); gpt-oss
# as its files are: MXFP4 experts, Q8_0 elsewhere, written by parley's
# writer whatever QUANT says). Environment:
# MODELS_DIR (default /tmp/parley-vs), QUANT (default Q4_K_M), MIX (writer:
# every shape's Q4_K_M mix written by parley's writer as big() shapes are, no
# llama-quantize needed), N_CTX (the files' context length, default 40960,
# Qwen3's: room for PDEPTH 32768), REPEATS
# (default 3), DEPTH (the third column's depth, default 16384; 0 leaves it
# out), PDEPTH (depths at which to prefill 64 and 512 tokens, a follow-up
# turn deep in a chat: "4096 16384"; default none).
#
# Prints one table: decode after 512, prefill 512, decode at DEPTH, for each
# engine and the ratio parley / llama.cpp. FOLLOWUP=N (0: none): then, per
# shape, parley's prefill of 64 tokens after N tokens of conversation and of
# 64 alone (a recurrent model's follow-up turn costs what its new tokens
# cost).
set -eu
B=$(cd "$1" && pwd)
L=$2
shift 2
DIR=${MODELS_DIR:-/tmp/parley-vs}
Q=${QUANT:-Q4_K_M}
R=${REPEATS:-3}
D=${DEPTH:-16384}
NCTX=${N_CTX:-40960}
mkdir -p "$DIR"
shapes=${*:-qwen3-0.6b qwen3-4b qwen3-8b gemma3-270m gemma3-1b gemma3-4b gemma3-12b}

if [ ! -x "$L/build/bin/llama-bench" ]; then
	[ -n "${LLAMA_BUILD:-}" ] || { echo "vs-llamacpp: no $L/build/bin/llama-bench and no LLAMA_BUILD" >&2; exit 2; }
	sh "$LLAMA_BUILD" "$L" >/dev/null
fi

. "$(dirname "$0")/shapes.sh"

# 1 for a shape whose F16 file does not fit the GPU machine's disk (61 GB
# for Qwen3-30B-A3B, 54 and 65 GB for Gemma-3-27B and Qwen3-32B): the writer
# writes its Q4_K_M mix itself (Q4_K, Q6_K
# for attn_v and ffn_down in llama.cpp's more-bits layers and the output;
# random valid blocks, the same file for both engines)
big() {
	[ "${MIX:-}" = writer ] && { echo 1; return; }
	case $1 in qwen3-30b-a3b | qwen3-32b | gemma3-27b | qwen36-*) echo 1 ;; *) echo 0 ;; esac
}

# tok/s of llama-bench's one test (ARGS) on FILE, the median of R repeats
llama() {
	f=$1
	shift
	"$L/build/bin/llama-bench" -m "$f" -ngl 99 -fa 1 -r "$R" -o json "$@" 2>/dev/null |
		python3 -c 'import json,sys; print("%.1f" % json.load(sys.stdin)[0]["avg_ts"])'
}

# tok/s of parley bench's prefill or decode line (WHAT) with ARGS
parley() {
	what=$1 f=$2
	shift 2
	"$B/parley" bench -m "$f" --backend cuda -r "$R" "$@" 2>/dev/null |
		sed -n "s/^$what: .*: \([0-9.]*\) tok\/s.*/\1/p"
}

ratio() { python3 -c "import sys; a, b = float(sys.argv[1] or 0), float(sys.argv[2] or 0); print('%.2fx' % (a / b) if b else '-')" "$1" "$2"; }

printf '%-12s %-7s | %9s %9s %6s | %9s %9s %6s | %9s %9s %6s\n' shape type \
	"tg@512 p" "llama" ratio "pp512 p" "llama" ratio "tg@$D p" "llama" ratio
for s in $shapes; do
	f="$DIR/$s-$Q.gguf"
	case $s in gpt-oss-*)
		f="$DIR/$s-MXFP4.gguf"
		# shellcheck disable=SC2046
		[ -f "$f" ] || "$B/parley" dev-mkmodel $(shape "$s") $(writer_mix "$s") \
			--no-vocab --n-ctx "$NCTX" -o "$f" >/dev/null ;;
	esac
	if [ ! -f "$f" ] && [ "$Q" = Q4_K_M ] && [ "$(big "$s")" = 1 ]; then
		# shellcheck disable=SC2046
		"$B/parley" dev-mkmodel $(shape "$s") $(writer_mix "$s") \
			--no-vocab --n-ctx "$NCTX" -o "$f" >/dev/null
	fi
	if [ ! -f "$f" ]; then
		# shellcheck disable=SC2046
		"$B/parley" dev-mkmodel $(shape "$s") --type F16 --no-vocab --n-ctx "$NCTX" \
			-o "$DIR/$s-f16.gguf" >/dev/null
		"$L/build/bin/llama-quantize" "$DIR/$s-f16.gguf" "$f.tmp" "$Q" >/dev/null 2>&1
		rm -f "$DIR/$s-f16.gguf"
		mv "$f.tmp" "$f"
	fi
	# alternated: llama.cpp, parley, per column
	lt=$(llama "$f" -p 0 -n 128 -d 512)
	pt=$(parley decode "$f" -p 512 -n 128)
	lp=$(llama "$f" -p 512 -n 0)
	pp=$(parley prefill "$f" -p 512 -n 1)
	if [ "$D" -gt 0 ]; then
		ld=$(llama "$f" -p 0 -n 128 -d "$D")
		pd=$(parley decode "$f" --depth "$D" -p 1 -n 128)
	else
		ld='' pd=''
	fi
	printf '%-12s %-7s | %9s %9s %6s | %9s %9s %6s | %9s %9s %6s\n' "$s" "$(basename "$f" .gguf | sed "s/^$s-//")" \
		"$pt" "$lt" "$(ratio "$pt" "$lt")" "$pp" "$lp" "$(ratio "$pp" "$lp")" \
		"$pd" "$ld" "$(ratio "$pd" "$ld")"
	for d in ${PDEPTH:-}; do
		for n in 64 512; do
			lq=$(llama "$f" -p "$n" -n 0 -d "$d")
			pq=$(parley prefill "$f" --depth "$d" -p "$n" -n 1)
			echo "  prefill $n after $d: parley $pq llama.cpp $lq tok/s ($(ratio "$pq" "$lq"))"
		done
	done
	if [ "${FOLLOWUP:-0}" -gt 0 ]; then
		fa=$(parley prefill "$f" --depth "$FOLLOWUP" -p 64 -n 1)
		f0=$(parley prefill "$f" -p 64 -n 1)
		echo "  follow-up: 64 tokens after $FOLLOWUP at $fa tok/s; 64 alone at $f0 tok/s"
	fi
done

#!/bin/sh
# t_bench.sh - `parley bench` end to end on a tiny committed model (CPU):
# every figure it promises is printed and consistent (the decode share is
# floor time / measured time, recomputed here from the printed numbers),
# bad options are usage errors, an unknown backend names the available
# ones. Speeds themselves are never asserted: CI machines differ.
. "${top_srcdir:-.}/tests/lib.sh"

model="$top_srcdir/tests/data/engine/llama_f32.gguf"
out=$(mktemp)
trap 'rm -f "$out" "$out.err"' EXIT

"$PARLEY" bench -m "$model" -p 8 -n 6 -r 3 --depth 5 --backend cpu -t 1 \
	>"$out" 2>"$out.err"
ok $? "parley bench exits 0 $(cat "$out.err")"
while read -r l; do diag "$l"; done <"$out"
grep -Eq '^backend: +cpu, host threads 1, KV cache f32; holds [0-9.]+ MiB$' "$out"
ok $? "backend line names the backend, threads, the KV cache's type and memory held"
# llama_f32: 2 layers, 2 KV heads of 16 dims: (16 + 16) * 2 * 2 floats
grep -Eq '^kv cache: +0\.5 KiB a position: 2 of 2 layers hold keys and values$' "$out"
ok $? "kv cache line: bytes a position, the layers that hold a cache"
grep -Eq '^load: +[0-9.]+ s \(file [0-9.]+ s, engine [0-9.]+ s\)$' "$out"
ok $? "load time"
grep -Eq '^bandwidth: +[0-9.]+ GB/s read' "$out" &&
	! grep -Eq '^bandwidth: +0\.0 GB/s' "$out"
ok $? "a measured, non-zero bandwidth"
grep -Eq '^prefill: +8 tokens at depth 5: [0-9.]+ tok/s \(median of 3; [0-9.]+\.\.[0-9.]+\)$' "$out"
ok $? "prefill: 8 tokens at depth 5, median of 3 with its range"
grep -Eq '^decode: +6 tokens after 13: [0-9.]+ tok/s, [0-9.]+ ms/token' "$out"
ok $? "decode: 6 tokens after depth + prompt = 13"
# floor ms / measured ms must equal the printed share (to rounding)
awk '/^decode:/ { for (i = 1; i <= NF; i++) if ($(i+1) == "ms/token") ms = $i }
     /^floor:/ { for (i = 1; i <= NF; i++) if ($(i+1) == "ms/token") fl = $i }
     /^decode at/ { sub("%", "", $3); share = $3 }
     END { want = 100 * fl / ms; d = want - share; if (d < 0) d = -d;
           exit !(ms > 0 && fl > 0 && d <= 0.06 + 0.001 * want) }' "$out"
ok $? "the share printed = floor / measured time per token"
# --trace: the debug pane's trace fills every eval: the depth's, then per
# repeat, the untimed warm-up's first, the prefill's and each decode step's
# (1 + (1 + 3) x (1 + 6) = 29; --no-warmup: 1 + 3 x 7 = 22), the last at
# depth + p + n - 1 = 18; --top 10 rides along on each select
"$PARLEY" bench -m "$model" -p 8 -n 6 -r 3 --depth 5 --backend cpu -t 1 \
	--trace --top 10 >"$out" 2>"$out.err"
ok $? "parley bench --trace --top 10 exits 0 $(cat "$out.err")"
grep -Eq '^decode: +6 tokens after 13: [0-9.]+ tok/s' "$out" &&
	grep -q '^trace: *29 steps traced, the last at position 18; raw top 10 a select$' "$out"
ok $? "--trace, a warm-up repeat and 3 timed: $(grep '^trace:' "$out")"
"$PARLEY" bench -m "$model" -p 8 -n 6 -r 3 --depth 5 --backend cpu -t 1 \
	--trace --no-warmup >"$out" 2>"$out.err" &&
	grep -Eq '^decode: +6 tokens after 13: [0-9.]+ tok/s.*median of 3' "$out" &&
	grep -q '^trace: *22 steps traced, the last at position 18; raw top 0 a select$' "$out"
ok $? "--no-warmup: the 3 timed repeats only: $(grep '^trace:' "$out") $(cat "$out.err")"
"$PARLEY" bench -m "$model" -p 8 -n 2 -r 1 --backend cpu -t 1 >"$out" 2>&1 &&
	! grep -q '^trace:' "$out"
ok $? "no trace line without --trace"
# --kv-type: the cache's type, named on the backend line; a bad one is a
# usage error naming it
"$PARLEY" bench -m "$model" -p 4 -n 2 -r 1 --backend cpu -t 1 --kv-type f16 \
	>"$out" 2>"$out.err" &&
	grep -Eq '^backend: +cpu, host threads 1, KV cache f16; holds' "$out"
ok $? "--kv-type f16: $(grep '^backend:' "$out") $(cat "$out.err")"
# sliding-window layers: past their rows (window 8 + a chunk of 512 + two
# slacks of 2,048) a long context keeps those rows only, said on the kv
# line, in less memory; --full-window-cache keeps every position
swa="$out.swa.gguf"
"$PARLEY" dev-mkmodel -o "$swa" --arch gemma3 --type F32 --n-vocab 300 \
	--n-embd 64 --n-ff 128 --n-layer 2 --n-head 2 --n-head-kv 1 \
	--head-dim 32 --sliding-window 8 --sliding-window-pattern 2 \
	--n-ctx 8192 --seed 3 >/dev/null 2>"$out.err" &&
	"$PARLEY" bench -m "$swa" -p 4 -n 2 -r 1 --depth 5000 --backend cpu \
		-t 1 >"$out" 2>>"$out.err" &&
	"$PARLEY" bench -m "$swa" -p 4 -n 2 -r 1 --depth 5000 --backend cpu \
		-t 1 --full-window-cache >"$out.full" 2>>"$out.err"
st=$?
ring=$(grep '^kv cache:' "$out"; grep '^backend:' "$out")
full=$(grep '^kv cache:' "$out.full"; grep '^backend:' "$out.full")
mib() { sed -n 's/^backend:.*holds \([0-9.]*\) MiB$/\1/p' "$1"; }
[ $st -eq 0 ] &&
	grep -Eq '^kv cache: .*\(1 sliding: 4616 positions kept, the last 8 read\)$' "$out" &&
	grep -Eq '^kv cache: .*\(1 sliding: every position kept, the last 8 read\)$' "$out.full" &&
	awk -v a="$(mib "$out")" -v b="$(mib "$out.full")" 'BEGIN { exit !(a > 0 && a < b) }'
ok $? "a window's rows past 5,000 positions, less memory; --full-window-cache every position: $ring / $full $(cat "$out.err")"
rm -f "$swa" "$out.full"
"$PARLEY" bench -m "$model" --kv-type q4_0 >/dev/null 2>"$out.err"
[ $? -eq 2 ] && grep -q "kv-type 'q4_0' is not" "$out.err"
ok $? "--kv-type q4_0: usage error: $(cat "$out.err")"
"$PARLEY" bench -m "$model" --top 4097 >/dev/null 2>&1
[ $? -eq 2 ]
ok $? "--top 4097: usage error (exit 2)"
"$PARLEY" bench -m "$model" -p x >/dev/null 2>&1
[ $? -eq 2 ]
ok $? "-p x: usage error (exit 2)"
"$PARLEY" bench -m "$model" -r 0 >/dev/null 2>&1
[ $? -eq 2 ]
ok $? "-r 0: usage error (exit 2)"
"$PARLEY" bench -m "$model" --backend tpu >/dev/null 2>"$out.err"
[ $? -eq 1 ] && grep -q 'unknown backend "tpu" (available: .*cpu' "$out.err"
ok $? "unknown backend: $(cat "$out.err")"
# auto: the first backend that opens; falling back from a compiled-in GPU
# backend (no device here, or no room) is said on stderr
"$PARLEY" bench -m "$model" --backend auto -p 4 -n 2 -r 1 -t 1 >"$out" 2>"$out.err"
st=$?
got=$(sed -n 's/^backend: *\([a-z]*\),.*/\1/p' "$out")
"$PARLEY" bench -m "$model" --backend tpu 2>&1 | grep -q 'cuda' && has_cuda=1 || has_cuda=0
if [ "$got" = cpu ] && [ $has_cuda = 1 ]; then
	[ $st -eq 0 ] && grep -q '^parley: cuda backend: .*; using the cpu backend$' "$out.err"
else
	[ $st -eq 0 ] && [ -n "$got" ] && ! [ -s "$out.err" ]
fi
ok $? "auto opened the $got backend (build with cuda: $has_cuda) $(cat "$out.err")"
"$PARLEY" bench -m /nonexistent.gguf 2>"$out.err" >/dev/null
[ $? -eq 1 ] && grep -q nonexistent "$out.err"
ok $? "missing model: error names the file"
done_testing

#!/bin/sh
# bench/cpu-vs-llamacpp.sh - parley's CPU engine and llama-cpp-python on the
# same GGUF file, the same prompt and the same machine, side by side, with 1
# and 2 threads: prefill and greedy decode tokens/s, then a summary with the
# ratio parley / llama.cpp per thread count and the load before and after
# (figures taken on a loaded machine say little; see BENCHMARKS.md).
#
# Usage: bench/cpu-vs-llamacpp.sh [MODEL] [N_GEN] [REPEAT]   (run from a
# built tree; PARLEY=path/to/parley to use another binary; THREADS="1 2" to
# choose the thread counts). REPEAT (default 1) runs each pair that many
# times, alternating the engines, and the summary keeps each one's best.
# Needs python3 with llama-cpp-python and numpy.
set -eu
MODEL=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/parley/models/SmolLM2-135M-Instruct.Q4_1.gguf}
N_GEN=${2:-64}
REPEAT=${3:-1}
HERE=$(cd "$(dirname "$0")" && pwd)
PROMPT=$(mktemp)
LOG=$(mktemp)
trap 'rm -f "$PROMPT" "$LOG"' EXIT
python3 - "$PROMPT" "$HERE/../tests/oracles" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
from gen_engine import LONG  # the 390-token prompt of the engine goldens
open(sys.argv[1], "w").write(LONG)
PY
echo "machine: $(nproc) cores, $(uname -m), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
for t in ${THREADS:-1 2}; do
	r=0
	while [ "$r" -lt "$REPEAT" ]; do
		"${PARLEY:-./parley}" generate -m "$MODEL" -p "$(cat "$PROMPT")" \
			-n "$N_GEN" -t "$t" --ignore-eos 2>&1 >/dev/null |
			grep 'prefill:' | sed 's/^/parley: /' | tee -a "$LOG"
		python3 "$HERE/llamacpp_bench.py" "$MODEL" "$PROMPT" "$N_GEN" "$t" |
			tee -a "$LOG"
		r=$((r + 1))
	done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
# summary: best prefill and decode tokens/s per engine and thread count
awk '
/prefill:/ {
	eng = ($1 == "parley:") ? "parley" : "llama.cpp"
	match($0, /\(([0-9.]+) tokens\/s\); decode/); p = substr($0, RSTART + 1) + 0
	match($0, /decode: [0-9]+ tokens in [0-9.]+ s \(([0-9.]+)/)
	s = substr($0, RSTART, RLENGTH); sub(/.*\(/, "", s); d = s + 0
	match($0, /; ([0-9]+) threads/); s = substr($0, RSTART + 2); t = s + 0
	k = eng SUBSEP t
	if (p > P[k]) P[k] = p
	if (d > D[k]) D[k] = d
	T[t] = 1
}
END {
	printf "%-8s %-10s %10s %10s\n", "threads", "engine", "prefill", "decode"
	for (t = 1; t <= 256; t++) {
		if (!(t in T))
			continue
		a = "parley" SUBSEP t; b = "llama.cpp" SUBSEP t
		printf "%-8s %-10s %10.1f %10.1f\n", t, "parley", P[a], D[a]
		printf "%-8s %-10s %10.1f %10.1f\n", t, "llama.cpp", P[b], D[b]
		if (P[b] > 0 && D[b] > 0)
			printf "%-8s %-10s %9.2fx %9.2fx\n", t, "ratio", P[a] / P[b], D[a] / D[b]
	}
	p1 = "parley" SUBSEP 1; p2 = "parley" SUBSEP 2
	if (D[p1] > 0 && D[p2] > 0)
		printf "parley decode, 2 threads / 1 thread: %.2fx\n", D[p2] / D[p1]
}' "$LOG"

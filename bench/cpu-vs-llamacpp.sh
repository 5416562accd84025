#!/bin/sh
# bench/cpu-vs-llamacpp.sh - parley's CPU engine and llama-cpp-python on the
# same GGUF file, the same prompt and the same machine, side by side, with 1
# and 2 threads: prefill and greedy decode tokens/s.
#
# Usage: bench/cpu-vs-llamacpp.sh [MODEL] [N_GEN]   (run from a built tree;
# PARLEY=path/to/parley to use another binary). Needs python3 with
# llama-cpp-python and numpy.
set -eu
MODEL=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/parley/models/SmolLM2-135M-Instruct.Q4_1.gguf}
N_GEN=${2:-64}
HERE=$(cd "$(dirname "$0")" && pwd)
PROMPT=$(mktemp)
trap 'rm -f "$PROMPT"' EXIT
python3 - "$PROMPT" "$HERE/../tests/oracles" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
from gen_engine import LONG  # the 390-token prompt of the engine goldens
open(sys.argv[1], "w").write(LONG)
PY
echo "machine: $(nproc) cores, $(uname -m), load $(cut -d' ' -f1-3 /proc/loadavg)"
for t in 1 2; do
	"${PARLEY:-./parley}" generate -m "$MODEL" -p "$(cat "$PROMPT")" -n "$N_GEN" \
		-t "$t" --ignore-eos 2>&1 >/dev/null | sed 's/^/parley: /'
	python3 "$HERE/llamacpp_bench.py" "$MODEL" "$PROMPT" "$N_GEN" "$t"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

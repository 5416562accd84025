#!/bin/sh
# bench/kernel-profile.sh - where one decode step of the CUDA engine goes,
# per kernel (Nsight Compute: time and DRAM bytes of every launch). Run on
# the GPU machine from a built tree:
#
#   bench/kernel-profile.sh MODEL [DEPTH] [BUILD_DIR]
#
# `parley bench` fills the KV cache to DEPTH positions (default 100) and
# decodes 3 tokens with the decode graphs off (PARLEY_CUDA_GRAPHS=0: ncu
# sees each kernel as the graph would replay it, one launch at a time,
# each replayed with cold caches, so the sum is a little above the
# graph's step time); bench/kernel_table.py tabulates the last decode step
# (BENCHMARKS.md's per-kernel tables). Environment: NCU (default ncu),
# KEEP_CSV=FILE to keep ncu's CSV, KERNELS=REGEX to profile only the
# kernels whose names match it (and the embedding lookup that starts each
# step, which the table needs). The kernels that fill the cache to DEPTH
# are profiled too, each replayed: keep DEPTH small (100 takes about a
# minute on the 7B shape; 16,384 did not finish in 7 minutes) or name the
# kernels (KERNELS='at_split_kernel|at_merge_kernel': the decode attention at depth).
set -eu
[ $# -ge 1 ] || { echo "usage: $0 MODEL [DEPTH] [BUILD_DIR]" >&2; exit 2; }
model=$1
depth=${2:-100}
B=$(cd "${3:-build}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
csv=${KEEP_CSV:-$(mktemp)}
bw=$("$B/parley" bench -m "$model" --backend cuda -p 0 -n 1 -r 1 |
	sed -n 's/^bandwidth: *\([0-9.]*\) GB.*/\1/p')
set --
[ -z "${KERNELS:-}" ] || set -- --kernel-name "regex:cm_get_rows|$KERNELS"
PARLEY_CUDA_GRAPHS=0 "${NCU:-ncu}" --csv --print-units base --log-file "$csv" "$@" \
	--metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
	"$B/parley" bench -m "$model" --backend cuda --depth "$depth" -p 0 -n 3 -r 1 >/dev/null
python3 "$here/kernel_table.py" "$csv" $bw
[ -n "${KEEP_CSV:-}" ] || rm -f "$csv"

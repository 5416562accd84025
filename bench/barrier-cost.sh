#!/bin/sh
# bench/barrier-cost.sh - a kernel boundary in a CUDA graph (with and
# without programmatic dependent launch) against a grid barrier in one
# persistent kernel, per dependent step (bench/barrier_cost.cu). Run on
# the GPU machine:
#
#   bench/barrier-cost.sh [STEPS]      (default 300: SmolLM2's decode step)
#
# Environment: NVCC (default nvcc), ARCH (default 90).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"${NVCC:-nvcc}" -O2 -std=c++17 -arch=sm_"${ARCH:-90}" -o "$out/barrier_cost" \
	"$here/barrier_cost.cu"
"$out/barrier_cost" "${1:-300}"

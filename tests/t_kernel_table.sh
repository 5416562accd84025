#!/bin/sh
# t_kernel_table.sh - bench/kernel_table.py, the per-kernel table of one
# decode step (bench/kernel-profile.sh), on a recorded-format Nsight
# Compute CSV (tests/data/bench/ncu-decode.csv: ncu's --csv --print-units
# base columns and "==PROF==" lines; a bandwidth kernel, a prefill step
# and two decode steps of 2 layers, written by make-ncu-decode.py beside
# it). Runs without a GPU.
. "${top_srcdir:-.}/tests/lib.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
py="python3 ${top_srcdir:-.}/bench/kernel_table.py"
csv=${top_srcdir:-.}/tests/data/bench/ncu-decode.csv

$py "$csv" 3100 >"$tmp/out" 2>"$tmp/err"
ok $? "the table is made"
sed 's/^/# /' "$tmp/out"
grep -q '^decode steps seen: 2; kernel time of each: 620.8, 620.9 us$' "$tmp/out"
ok $? "two decode steps found (the prefill step and bw_read left out), each step's kernel time"
grep -Fq '| **step** | 18 | 620.9 us | 100% | 733.95 MB | 1182 GB/s | 38% |' "$tmp/out"
ok $? "the last step's totals: 18 launches, time, DRAM bytes (thousands separators read), share of 3100 GB/s"
grep -Fq '| `cm_matvec_unit<cm_x8_unit<Q4_K>, swiglu>` | 2 | 67.2 us | 10.8% | 152.15 MB | 2264 GB/s | 73% |' "$tmp/out"
ok $? "launches of one kernel summed, type id and mode named"
sed -n '5p' "$tmp/out" | grep -Fq 'cm_x8_unit<Q6_K>, set>` | 1 | 400.0 us'
ok $? "rows sorted by time, the largest first"
! grep -Eq 'ap_kernel|bw_read|gemm|dequant' "$tmp/out"
ok $? "no prefill or bandwidth kernel in the decode table"
grep -v 'as_kernel' "$csv" >"$tmp/nodecode.csv"
$py "$tmp/nodecode.csv" >"$tmp/out2" 2>"$tmp/err2"
[ $? -eq 1 ] && grep -q 'no decode step' "$tmp/err2"
ok $? "a profile without a decode step: exit 1 and a message naming it"
sed 's/"ns"/"furlong"/' "$csv" >"$tmp/unit.csv"
$py "$tmp/unit.csv" >"$tmp/out3" 2>"$tmp/err3"
[ $? -eq 1 ] && grep -q "unknown metric unit 'furlong'" "$tmp/err3" && [ ! -s "$tmp/out3" ]
ok $? "a unit it does not know: exit 1 and no table (not a misread one)"
lab=$(python3 -c "import sys; sys.path.insert(0, sys.argv[1]); import kernel_table as k; print(k.label(sys.argv[2]))" \
	"${top_srcdir:-.}/bench" 'void cm_matvec_unit<cm_x8_unit<(unsigned int)61>, (int)3>(cm_parts, long, const void *, int, int)')
[ "$lab" = 'cm_matvec_unit<cm_x8_unit<Q4_K GPU layout>, rope>' ]
ok $? "the Q4_K GPU layout and the QKV launch with RoPE named ($lab)"
done_testing

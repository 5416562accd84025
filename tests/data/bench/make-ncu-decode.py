#!/usr/bin/env python3
"""Writes ncu-decode.csv, the input of tests/t_kernel_table.sh: Nsight
Compute's --csv --print-units base layout as ncu 2025 on the h100 writes it
(one row per launch and metric, units "ns" and "byte", template arguments
as plain numbers, "==PROF==" lines first) for a made-up profile: parley bench's
bandwidth kernel, a prefill step, and two decode steps of a 2-layer model
(the second 100 ns slower in its first kernel)."""
import csv
import io
import os

HDR = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name",
       "Context", "Stream", "Block Size", "Grid Size", "Device", "CC",
       "Section Name", "Metric Name", "Metric Unit", "Metric Value"]
MV = "(cm_parts, long, const void *, int, int)"
ks = []


def k(name, t_ns, rd, wr):
    ks.append((name, t_ns, rd, wr))


k("bw_read(const uint4 *, unsigned long, unsigned long long *)", 400000,
  1073741824, 0)
k("void cm_get_rows<12>(const unsigned char *, unsigned long, long, "
  "const int *, long, float *)", 3000, 400000, 300000)
k("void el_rmsnorm(const float *, const float *, int, float, float *, "
  "unsigned char *)", 4000, 100000, 100000)
k("void cm_dequant8_f16<12>(const unsigned char *, unsigned long, "
  "long, long, long, __half *)", 20000, 9000000, 30000000)
k("sm90_xmma_gemm_f16f16_f32f32_f32_tn_n_tilesize128x128x64", 30000,
  40000000, 1000000)
k("void ap_kernel<128>(const float *, const __half *, const __half *, "
  "int, int, int, int, int, int, const int *, int, int, float *, float *, "
  "float *)", 50000, 2000000, 500000)
for step in range(2):
    k("void cm_get_rows<12>(const unsigned char *, unsigned long, "
      "long, const int *, long, float *)", 2000 + 100 * step, 8000, 14336)
    for layer in range(2):
        k("void el_rmsnorm(const float *, const float *, int, float, "
          "float *, unsigned char *)", 7000, 14336, 4608)
        k("void cm_matvec_unit<cm_x8_unit<12>, 0>" + MV, 8912,
          9289728, 18432)
        k("void el_rope_kv_store(float *, float *, const float *, int, int, "
          "int, int, const double *, int, const int *, int, int, int, "
          "__half *, __half *)", 4000, 2048, 4096)
        k("void as_kernel<128>(const float *, const __half *, "
          "const __half *, int, int, int, int, int, int, const int *, int, "
          "int, float *, float *)", 9000, 1600000, 300000)
        k("void as_merge(const float *, const float *, int, int, int, "
          "const int *, int, int, float *, unsigned char *)", 4400, 300000,
          4608)
        k("void cm_matvec_unit<cm_x8_unit<14>, 1>" + MV, 36000,
          56000000, 28672)
        k("void cm_matvec_unit<cm_x8_unit<12>, 2>" + MV, 33600,
          76000000, 75776)
    k("void el_rmsnorm(const float *, const float *, int, float, float *, "
      "unsigned char *)", 7000, 14336, 14336)
    k("void cm_matvec_unit<cm_x8_unit<14>, 0>" + MV, 400000,
      446000000, 608256)
    k("void sel_final(int, int, float *)", 6000, 10000, 1000)

out = io.StringIO()
out.write("==PROF== Connected to process 4242 (/tmp/pb/b/parley)\n")
out.write("==PROF== Disconnected from process 4242\n")
w = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
w.writerow(HDR)
for i, (name, t, rd, wr) in enumerate(ks):
    for mn, unit, v in (("dram__bytes_read.sum", "byte", rd),
                        ("dram__bytes_write.sum", "byte", wr),
                        ("gpu__time_duration.sum", "ns", t)):
        w.writerow([str(i), "4242", "parley", "127.0.0.1", name, "1", "13",
                    "(128, 1, 1)", "(64, 1, 1)", "0", "9.0",
                    "Command line profiler metrics", mn, unit,
                    "{:,}".format(v)])
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "ncu-decode.csv"), "w") as f:
    f.write(out.getvalue())

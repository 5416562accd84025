#!/usr/bin/env python3
"""kernel_table.py - one decode step of the CUDA engine, per kernel, from
Nsight Compute's CSV (bench/kernel-profile.sh writes it).

    kernel_table.py NCU.csv [BANDWIDTH_GBS]

The CSV has one row per (kernel launch, metric): columns "ID", "Kernel
Name", "Metric Name", "Metric Unit", "Metric Value" (others ignored; ncu's
own "==PROF==" lines skipped). Launches are split into engine steps at
each embedding lookup (cm_get_rows, the first kernel of every eval); a
decode step is a step with the split decode attention (at_split_kernel) and no
prefill kernel. The last decode step is tabulated: per kernel name
(template arguments kept, ggml type ids named), its launches, time, DRAM
bytes and achieved bandwidth, and the step's total; the other decode
steps' totals are listed for comparison. BANDWIDTH_GBS (e.g. what `parley
bench` measured) adds each kernel's share of it.
"""
import csv
import re
import sys

METRIC_TIME = "gpu__time_duration.sum"
METRIC_READ = "dram__bytes_read.sum"
METRIC_WRITE = "dram__bytes_write.sum"
# the units ncu writes (seen on the h100 with --print-units base: "ns",
# "byte"); any other stops the table rather than misreading it
SCALE = {
    "ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0,
    "nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0,
    "byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9,
}
# ggml type ids (src/qtype.h) that appear as template arguments, and the
# GPU layouts of Q4_K, Q8_0 and Q6_K (cuda/cuda_quant.cuh CQ_Q4_KR,
# CQ_Q8_0R, CQ_Q6_KR)
QTYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1",
          8: "Q8_0", 10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K",
          14: "Q6_K", 30: "BF16", 61: "Q4_K GPU layout",
          62: "Q8_0 GPU layout", 63: "Q6_K GPU layout"}
# cuda_matmul.cu CM_SET, CM_ADD, CM_SWIGLU, CM_ROPE
MODES = {0: "set", 1: "add", 2: "swiglu", 3: "rope"}
STEP_START = "cm_get_rows"
# kernel names since issue 28 (cuda/README.md "Names"), and before it
DECODE_MARKS = ("at_split_kernel", "as_kernel")
PREFILL_MARKS = ("at_tile_kernel", "at_warp_kernel", "ap_kernel", "at_kernel",
                 "cm_dequant", "gemm", "Gemm")
IGNORED = ("bw_read",)  # parley bench's bandwidth measurement (dev_bw_read)


def value(unit, text):
    """A metric value in base units (seconds, bytes)."""
    if unit not in SCALE:
        raise ValueError("unknown metric unit %r" % unit)
    return float(text.replace(",", "")) * SCALE[unit]


def label(name):
    """A kernel's name without 'void' and the argument list; type ids and
    the mat-vec's mode named."""
    n = name.strip()
    if n.startswith("void "):
        n = n[5:]
    depth = 0
    for i, c in enumerate(n):  # cut at the top-level '('
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "(" and depth == 0 and i > 0:
            n = n[:i]
            break
    n = re.sub(r"\(int\)|\(unsigned int\)|\(uint32_t\)", "", n)

    def unit(m):
        t = int(m.group(2))
        return "%s<%s>" % (m.group(1), QTYPES.get(t, str(t)))
    n = re.sub(r"\b(cm_x8_unit|cm_f32_unit|cm_get_rows|cm_matvec|"
               r"cm_dequant8?_f16)<(\d+)>", unit, n)
    m = re.match(r"(cm_matvec_unit<.*>), (\d)>$", n)
    if m:
        n = "%s, %s>" % (m.group(1), MODES.get(int(m.group(2)), m.group(2)))
    return n


def launches(path):
    """[(id, kernel name, {metric: base value})] in launch order."""
    rows = {}
    with open(path, newline="") as f:
        lines = [ln for ln in f if not ln.startswith("==")]
    for r in csv.DictReader(lines):
        if not r.get("ID") or r.get("Metric Name") is None:
            continue
        k = int(r["ID"])
        ent = rows.setdefault(k, [r["Kernel Name"], {}])
        ent[1][r["Metric Name"]] = value(r["Metric Unit"], r["Metric Value"])
    return [(k, rows[k][0], rows[k][1]) for k in sorted(rows)]


def steps(kernels):
    """Launches split at each STEP_START; launches before the first one
    and IGNORED kernels left out."""
    out = []
    for k in kernels:
        if any(s in k[1] for s in IGNORED):
            continue
        if STEP_START in k[1]:
            out.append([])
        if out:
            out[-1].append(k)
    return out


def is_decode(step):
    names = " ".join(k[1] for k in step)
    return (any(d in names for d in DECODE_MARKS)
            and not any(p in names for p in PREFILL_MARKS))


def main(argv):
    if len(argv) < 2:
        sys.stderr.write("usage: kernel_table.py NCU.csv [BANDWIDTH_GBS]\n")
        return 2
    bw = float(argv[2]) * 1e9 if len(argv) > 2 else 0.0
    try:
        decode = [s for s in steps(launches(argv[1])) if is_decode(s)]
    except (OSError, ValueError, KeyError) as e:
        sys.stderr.write("kernel_table: %s: %s\n" % (argv[1], e))
        return 1
    if not decode:
        sys.stderr.write("kernel_table: no decode step in %s\n" % argv[1])
        return 1
    step = decode[-1]
    groups = {}
    for _, name, m in step:
        g = groups.setdefault(label(name), [0, 0.0, 0.0])
        g[0] += 1
        g[1] += m.get(METRIC_TIME, 0.0)
        g[2] += m.get(METRIC_READ, 0.0) + m.get(METRIC_WRITE, 0.0)
    total_t = sum(g[1] for g in groups.values())
    total_b = sum(g[2] for g in groups.values())
    print("decode steps seen: %d; kernel time of each: %s us" % (
        len(decode), ", ".join("%.1f" % (sum(
            m.get(METRIC_TIME, 0.0) for _, _, m in s) * 1e6)
            for s in decode)))
    print()
    head = "| kernel | launches | time | share | DRAM bytes | achieved |"
    rule = "|---|---:|---:|---:|---:|---:|"
    if bw:
        head += " of %.0f GB/s |" % (bw / 1e9)
        rule += "---:|"
    print(head)
    print(rule)
    for name, (n, t, b) in sorted(groups.items(), key=lambda x: -x[1][1]):
        ach = b / t if t > 0 else 0.0
        line = "| `%s` | %d | %.1f us | %.1f%% | %.2f MB | %.0f GB/s |" % (
            name, n, t * 1e6, 100.0 * t / total_t if total_t else 0.0,
            b / 1e6, ach / 1e9)
        if bw:
            line += " %.0f%% |" % (100.0 * ach / bw)
        print(line)
    print("| **step** | %d | %.1f us | 100%% | %.2f MB | %.0f GB/s |%s" % (
        len(step), total_t * 1e6, total_b / 1e6,
        total_b / total_t / 1e9 if total_t else 0.0,
        " %.0f%% |" % (100.0 * total_b / total_t / bw)
        if bw and total_t else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

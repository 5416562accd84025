#!/usr/bin/env python3
"""gen_quant.py - goldens for src/quant.c and src/qtype.c from gguf-py.

Oracle: gguf-py, PyPI package `gguf` version 0.19.0 (gguf.quants.dequantize,
gguf.constants.GGML_QUANT_SIZES), with numpy. Development only; CI never runs
this. Writes under tests/data/quant/:

  sizes.txt        "id name blck_size type_size" for every type gguf-py knows
  TYPE.bin         random blocks of TYPE and gguf-py's float32 dequantization:
                   "PQGT" u32 type, u32 n_blocks, the raw blocks, then the
                   n_blocks*blck_size little-endian floats
  MODEL.hashes     with --model NAME=PATH: one line per tensor of the GGUF,
                   "name type_id n_elements hash" (hash: see qhash below)

Random blocks: uniform random quant bytes; every float16 scale/min field is a
finite half (mostly normal values of either sign around 1e-3..1, plus zeros,
subnormals and large values in a few blocks), so no golden holds a NaN.

Usage: tests/oracles/gen_quant.py [--model smollm2=PATH] [--model gemma3=PATH]
"""
import argparse
import os
import struct
import sys
from importlib.metadata import version

import numpy as np
from gguf import GGUFReader
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as T
from gguf.quants import dequantize

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "quant")
SEED = 20261121

# Byte offsets of the float16 fields of each block type (scales, mins).
HALF_FIELDS = {
    "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0],
    "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2],
    "Q6_K": [208],
}
N_BLOCKS = {"F32": 512, "F16": 1024, "BF16": 1024}  # elements for float types
N_BLOCKS_32 = 96
N_BLOCKS_K = 24


def rand_halves(rng, n):
    """N finite float16 values: mostly ordinary scales, some edge cases."""
    mag = np.exp(rng.uniform(np.log(1e-4), np.log(2.0), n))
    v = (mag * rng.choice([-1.0, 1.0], n)).astype(np.float16)
    k = rng.integers(0, 16, n)
    v[k == 0] = np.float16(0.0)
    v[k == 1] = np.float16(-0.0)
    sub = rng.integers(1, 1024, n).astype(np.uint16)  # subnormal bit patterns
    v[k == 2] = sub[k == 2].view(np.float16)
    v[k == 3] = np.float16(65504.0) * rng.choice([-1, 1])
    assert np.all(np.isfinite(v))
    return v


def random_type(rng, name):
    qt = T[name]
    blck, tsize = GGML_QUANT_SIZES[qt]
    if name == "F32":
        n = N_BLOCKS[name]
        vals = (rng.standard_normal(n) * np.exp(rng.uniform(-20, 20, n))).astype(np.float32)
        vals[:4] = [0.0, -0.0, 1e-45, -3.4e38]
        raw = vals.view(np.uint8)
    elif name in ("F16", "BF16"):
        n = N_BLOCKS[name]
        bits = rng.integers(0, 1 << 16, n, dtype=np.uint32).astype(np.uint16)
        if name == "F16":
            nan = (bits & 0x7C00) == 0x7C00
            bits[nan & ((bits & 0x3FF) != 0)] &= 0xFC00  # NaN -> inf
        else:
            nan = (bits & 0x7F80) == 0x7F80
            bits[nan & ((bits & 0x7F) != 0)] &= 0xFF80
        raw = bits.view(np.uint8)
    else:
        nb = N_BLOCKS_32 if blck == 32 else N_BLOCKS_K
        blocks = rng.integers(0, 256, (nb, tsize), dtype=np.uint32).astype(np.uint8)
        for off in HALF_FIELDS[name]:
            blocks[:, off:off + 2] = rand_halves(rng, nb).view(np.uint8).reshape(nb, 2)
        raw = blocks.reshape(-1)
    out = dequantize(raw.copy(), qt).astype(np.float32).reshape(-1)
    assert not np.any(np.isnan(out)), name
    nblk = raw.size // tsize
    with open(os.path.join(OUT, name + ".bin"), "wb") as f:
        f.write(b"PQGT" + struct.pack("<II", qt.value, nblk))
        f.write(raw.tobytes())
        f.write(out.astype("<f4").tobytes())
    return nblk


M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def qhash(f32):
    """Sum over i of splitmix64(bits(x_i) ^ (i * 0x9E3779B97F4A7C15)), mod 2^64.

    A per-element bijection summed: any single changed element changes the
    hash; computed in chunks so huge tensors fit in memory."""
    bits = f32.reshape(-1).view(np.uint32)
    total = np.uint64(0)
    step = 1 << 22
    with np.errstate(over="ignore"):
        for s in range(0, bits.size, step):
            z = bits[s:s + step].astype(np.uint64)
            idx = np.arange(s, s + z.size, dtype=np.uint64)
            z ^= idx * np.uint64(0x9E3779B97F4A7C15)
            z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            z = z ^ (z >> np.uint64(31))
            total = np.uint64((int(total) + int(z.sum(dtype=np.uint64))) & 0xFFFFFFFFFFFFFFFF)
    return int(total)


def model_hashes(tag, path):
    r = GGUFReader(path)
    lines = []
    for t in r.tensors:
        qt = T(t.tensor_type)
        n = int(np.prod(t.shape))
        try:
            rows = t.data.reshape(-1, t.data.shape[-1])
            step = max(1, (1 << 22) // max(1, rows.shape[1]))
            parts = [dequantize(np.ascontiguousarray(rows[i:i + step]), qt).astype(np.float32).reshape(-1)
                     for i in range(0, rows.shape[0], step)]
            h = qhash(np.concatenate(parts))
        except NotImplementedError:
            continue
        lines.append(f"{t.name} {qt.value} {n} {h:016x}\n")
    with open(os.path.join(OUT, tag + ".hashes"), "w") as f:
        f.write(f"# {os.path.basename(path)}: per-tensor qhash of gguf-py {version('gguf')} dequantization\n")
        f.writelines(lines)
    print(f"{tag}: {len(lines)} tensors")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", action="append", default=[], help="TAG=PATH")
    ap.add_argument("--no-random", action="store_true")
    a = ap.parse_args()
    print(f"oracle: gguf {version('gguf')}, numpy {np.__version__}")
    os.makedirs(OUT, exist_ok=True)
    if not a.no_random:
        with open(os.path.join(OUT, "sizes.txt"), "w") as f:
            for qt in T:
                b, s = GGML_QUANT_SIZES[qt]
                f.write(f"{qt.value} {qt.name} {b} {s}\n")
        rng = np.random.default_rng(SEED)
        for name in ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1",
                     "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"]:
            print(name, random_type(rng, name), "blocks")
    for m in a.model:
        tag, path = m.split("=", 1)
        model_hashes(tag, path)


if __name__ == "__main__":
    sys.exit(main())

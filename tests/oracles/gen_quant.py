#!/usr/bin/env python3
"""gen_quant.py - goldens for src/quant.c and src/qtype.c from gguf-py.

Oracle: gguf-py, PyPI package `gguf` version 0.19.0 (gguf.quants.dequantize,
gguf.constants.GGML_QUANT_SIZES), with numpy. Development only; CI never runs
this. Writes under tests/data/quant/:

  sizes.txt        "id name blck_size type_size" for every type gguf-py knows
  TYPE.bin         random blocks of TYPE and gguf-py's float32 dequantization:
                   "PQGT" u32 type, u32 n_blocks, the raw blocks, then the
                   n_blocks*blck_size little-endian floats
  TYPE.adv.bin     for the types of src/quant_iq.c: adversarial blocks (every
                   grid index, sign pattern and scale value; extreme
                   scales), same format
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
    "IQ2_XXS": [0], "IQ2_XS": [0], "IQ2_S": [0], "IQ3_XXS": [0], "IQ3_S": [0],
    "IQ1_S": [0], "IQ4_NL": [0], "IQ4_XS": [0], "TQ1_0": [52], "TQ2_0": [64],
    "IQ1_M": [], "MXFP4": [], "NVFP4": [],  # scales set by set_scales
}
N_BLOCKS = {"F32": 512, "F16": 1024, "BF16": 1024}  # elements for float types
N_BLOCKS_32 = 96
N_BLOCKS_K = 24

# The types of src/quant_iq.c, in the order the goldens are written.
IQ_TYPES = ["IQ4_NL", "IQ4_XS", "IQ3_S", "IQ3_XXS", "IQ2_S", "IQ2_XS", "IQ2_XXS",
            "IQ1_M", "IQ1_S", "TQ2_0", "TQ1_0", "MXFP4", "NVFP4"]

# Extreme float16 scales the adversarial blocks cycle through: zero, -0,
# the smallest and largest subnormals, the smallest normal, +-max, +-1.
EXTREME_HALVES = [0x0000, 0x8000, 0x0001, 0x83FF, 0x0400, 0x7BFF, 0xFBFF, 0x3C00, 0xBC00]


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


def set_iq1m_d(blocks, halves):
    """IQ1_M keeps its half d in the top nibbles of its four scale words."""
    sc = blocks[:, 48:56].copy().view("<u2")
    h = halves.view(np.uint16).reshape(-1, 1)
    for k in range(4):
        sc[:, k] = (sc[:, k] & 0x0FFF) | (((h[:, 0] >> (4 * k)) & 0xF) << 12)
    blocks[:, 48:56] = sc.view(np.uint8)


def set_scales(rng, name, blocks):
    """Scales of the types that have no plain float16 field: MXFP4's E8M0
    exponent kept within 2^-28..2^22 (so dots neither overflow nor go
    subnormal; the adversarial file has all 256), IQ1_M's split half.
    NVFP4's UE4M3 scales are bounded, so random bytes are kept."""
    nb = blocks.shape[0]
    if name == "MXFP4":
        blocks[:, 0] = rng.integers(100, 151, nb)
    elif name == "IQ1_M":
        set_iq1m_d(blocks, rand_halves(rng, nb))


def put_u16(blocks, off, vals):
    """Write the (nb, k) uint16 VALS little-endian at byte OFF of BLOCKS."""
    k = vals.shape[1]
    blocks[:, off:off + 2 * k] = vals.astype("<u2").view(np.uint8).reshape(blocks.shape[0], 2 * k)


def put_u32(blocks, off, vals):
    k = vals.shape[1]
    blocks[:, off:off + 4 * k] = vals.astype("<u4").view(np.uint8).reshape(blocks.shape[0], 4 * k)


def adversarial_blocks(rng, name):
    """Blocks that together hold every grid index, every sign index or sign
    byte and every scale value of NAME, with extreme scales: float16 d
    cycling through EXTREME_HALVES, every E8M0 / UE4M3 byte; plus one block
    of all-zero and one of all-0xFF quant bytes."""
    blck, tsize = GGML_QUANT_SIZES[T[name]]
    nb = {"IQ2_XXS": 8, "IQ2_XS": 16, "IQ2_S": 32, "IQ3_XXS": 4, "IQ3_S": 8,
          "IQ1_S": 64, "IQ1_M": 64, "MXFP4": 256, "NVFP4": 64}.get(name, 12)
    b = rng.integers(0, 256, (nb, tsize), dtype=np.uint32).astype(np.uint8)
    b[0, :] = 0
    b[1, :] = 0xFF
    k = np.arange(nb * 64, dtype=np.uint32)  # a counter over index slots
    if name == "IQ2_XXS":  # per 32: u32 of 4 indices, u32 of 4 signs + scale
        idx = (k[:nb * 32] % 256).reshape(nb, 8, 4)
        a0 = idx[..., 0] | idx[..., 1] << 8 | idx[..., 2] << 16 | idx[..., 3] << 24
        sg = ((k[:nb * 32] * 5) % 128).reshape(nb, 8, 4)
        a1 = sg[..., 0] | sg[..., 1] << 7 | sg[..., 2] << 14 | sg[..., 3] << 21 | (k[:nb * 8] % 16).reshape(nb, 8) << 28
        put_u32(b, 2, np.stack([a0, a1], axis=-1).reshape(nb, 16))
    elif name == "IQ2_XS":  # u16: 9-bit index, 7-bit sign index
        put_u16(b, 2, ((k[:nb * 32] % 512) | ((k[:nb * 32] * 3) % 128) << 9).reshape(nb, 32))
    elif name == "IQ2_S":  # 10-bit index: low byte + 2 bits in qh; sign bytes
        idx = (k[:nb * 32] % 1024).reshape(nb, 32)
        b[:, 2:34] = idx & 255
        hi = (idx >> 8).reshape(nb, 8, 4)
        b[:, 66:74] = hi[..., 0] | hi[..., 1] << 2 | hi[..., 2] << 4 | hi[..., 3] << 6
        b[:, 34:66] = ((k[:nb * 32] * 7) % 256).reshape(nb, 32)
    elif name == "IQ3_XXS":  # 64 index bytes; per 32: u32 of 4 signs + scale
        b[:, 2:66] = (k[:nb * 64] % 256).reshape(nb, 64)
        sg = ((k[:nb * 32] * 5) % 128).reshape(nb, 8, 4)
        put_u32(b, 66, sg[..., 0] | sg[..., 1] << 7 | sg[..., 2] << 14 | sg[..., 3] << 21
                | (k[:nb * 8] % 16).reshape(nb, 8) << 28)
    elif name == "IQ3_S":  # 9-bit index: low byte + 1 bit in qh; sign bytes
        idx = (k[:nb * 64] % 512).reshape(nb, 64)
        b[:, 2:66] = idx & 255
        hi = (idx >> 8).reshape(nb, 8, 8)
        b[:, 66:74] = sum(hi[..., j] << j for j in range(8))
        b[:, 74:106] = ((k[:nb * 32] * 7) % 256).reshape(nb, 32)
    elif name == "IQ1_S":  # 11-bit index: low byte + 3 bits in the u16
        idx = (k[:nb * 32] % 2048).reshape(nb, 8, 4)
        b[:, 2:34] = (idx & 255).reshape(nb, 32)
        hi = idx >> 8
        h = hi[..., 0] | hi[..., 1] << 3 | hi[..., 2] << 6 | hi[..., 3] << 9
        h |= (k[:nb * 8] % 16).reshape(nb, 8) << 12  # scale and delta sign
        put_u16(b, 34, h)
    elif name == "IQ1_M":  # 11-bit index: low byte + 3 bits of a nibble
        idx = (k[:nb * 32] % 2048).reshape(nb, 32)
        b[:, 0:32] = idx & 255
        nib = (idx >> 8) | ((k[:nb * 32] // 7) % 2 << 3).reshape(nb, 32)  # and delta sign
        nib = nib.reshape(nb, 16, 2)
        b[:, 32:48] = nib[..., 0] | nib[..., 1] << 4
    elif name == "MXFP4":
        b[:, 0] = np.arange(256)
    elif name == "NVFP4":
        b[:, 0:4] = np.arange(256).reshape(64, 4)
    elif name in ("TQ1_0", "TQ2_0"):  # every byte value in every position
        nq = 52 if name == "TQ1_0" else 64
        b[2:, :nq] = (np.arange(nq) * 37 + np.arange(nb - 2).reshape(-1, 1) * 23) % 256
    # float16 d: the extreme values in turn
    halves = np.array([EXTREME_HALVES[i % len(EXTREME_HALVES)] for i in range(nb)], dtype=np.uint16)
    if name == "IQ1_M":
        set_iq1m_d(b, halves.view(np.float16))
    for off in HALF_FIELDS[name]:
        b[:, off:off + 2] = halves.view(np.uint8).reshape(nb, 2)
    return b


def write_golden(fname, qt, raw, out):
    nblk = raw.size // GGML_QUANT_SIZES[qt][1]
    with open(os.path.join(OUT, fname), "wb") as f:
        f.write(b"PQGT" + struct.pack("<II", qt.value, nblk))
        f.write(raw.tobytes())
        f.write(out.astype("<f4").tobytes())
    return nblk


def adversarial_type(rng, name):
    qt = T[name]
    raw = adversarial_blocks(rng, name).reshape(-1)
    out = dequantize(raw.copy(), qt).astype(np.float32).reshape(-1)
    assert not np.any(np.isnan(out)), name
    return write_golden(name + ".adv.bin", qt, raw, out)


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
        nb = {32: N_BLOCKS_32, 64: N_BLOCKS_32 // 2}.get(blck, N_BLOCKS_K)
        blocks = rng.integers(0, 256, (nb, tsize), dtype=np.uint32).astype(np.uint8)
        for off in HALF_FIELDS[name]:
            blocks[:, off:off + 2] = rand_halves(rng, nb).view(np.uint8).reshape(nb, 2)
        set_scales(rng, name, blocks)
        raw = blocks.reshape(-1)
    out = dequantize(raw.copy(), qt).astype(np.float32).reshape(-1)
    assert not np.any(np.isnan(out)), name
    return write_golden(name + ".bin", qt, raw, out)


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
        # the i-quants after the others, so the older goldens stay as they were
        for name in IQ_TYPES:
            print(name, random_type(rng, name), "blocks,",
                  adversarial_type(rng, name), "adversarial")
    for m in a.model:
        tag, path = m.split("=", 1)
        model_hashes(tag, path)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Goldens for tests/t_engine_long.c: the CPU engine against llama.cpp
(llama-cpp-python on the CPU, the oracle; development only) at 32k
positions, on random-weight models whose files ask for RoPE scaling: YaRN
(qwen3, a file trained for 8,192 positions stretched 4 times, as
Qwen2.5/Qwen3's 128k files do) and linear (llama, 4 times).

For each model NAME: NAME.gguf (written by parley-mkmodel, F32 weights, a
context of 32,768) and NAME.long: the positions checked and llama.cpp's
logits there, little-endian:
    int32 n_vocab, int32 n_pos, int32 pos[n_pos], float32 logits[n_pos][n_vocab]
over the 32,768 tokens of the C test's generator (long_tok below). Also
printed, not stored: how far the same weights without the file's scaling
move the logits at each position (what the test would see if the engine
ignored the scaling), so that every check can fail.

Usage: gen_long.py --mkmodel BUILD/tests/parley-mkmodel [--out DIR]
"""
import argparse
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_engine import llama_cpp_setup  # noqa: E402

N_TOK = 32768
N_VOCAB = 128
# positions checked: the start, the original context's edge, the middle,
# the end
POS = [0, 1, 4095, 8191, 8192, 12287, 16383, 24575, 32766, 32767]
BASE = ("--n-vocab %d --n-embd 64 --n-head 4 --n-head-kv 2 --head-dim 16 "
        "--n-ff 128 --n-layer 2 --rope-base 10000 --n-ctx 32768 --type F32 "
        "--out-norm-scale 4" % N_VOCAB)
# name, the model, its RoPE scaling (left out: the same weights unscaled)
MODELS = [
    ("qwen3_yarn_f32", "--arch qwen3 --seed 70",
     "--rope-scaling yarn --rope-scale-factor 4 --yarn-orig-ctx 8192"),
    ("llama_linear_f32", "--arch llama --seed 71",
     "--rope-scaling linear --rope-scale-factor 4"),
]


def long_tok():
    """The C test's tokens: x = x * 1103515245 + 12345 mod 2^31, token
    (x >> 16) mod N_VOCAB, from x = 1."""
    out, x = [], 1
    for _ in range(N_TOK):
        x = (x * 1103515245 + 12345) % (1 << 31)
        out.append((x >> 16) % N_VOCAB)
    return out


def logits_at(path, toks):
    """llama.cpp's logits at POS (F32 KV cache, no flash attention)."""
    Llama = llama_cpp_setup().Llama
    llm = Llama(model_path=path, n_ctx=N_TOK, n_batch=512, n_ubatch=512,
                logits_all=True, n_threads=2, verbose=False, type_k=0,
                type_v=0, flash_attn=False)
    llm.eval(toks)
    return np.array([llm.scores[p] for p in POS], dtype=np.float32)


def nmse(a, b):
    return ((a - b) ** 2).sum(1) / (b ** 2).sum(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mkmodel", required=True)
    ap.add_argument("--out", default="tests/data/engine")
    a = ap.parse_args()
    toks = long_tok()
    for name, model, scaling in MODELS:
        path = os.path.join(a.out, name + ".gguf")
        subprocess.run([a.mkmodel, "-o", path, "--no-vocab"] +
                       (BASE + " " + model + " " + scaling).split(),
                       check=True)
        got = logits_at(path, toks)
        with open(os.path.join(a.out, name + ".long"), "wb") as f:
            f.write(struct.pack("<ii", N_VOCAB, len(POS)))
            f.write(struct.pack("<%di" % len(POS), *POS))
            f.write(got.astype("<f4").tobytes())
        # the same weights without the scaling: what ignoring it costs
        with tempfile.TemporaryDirectory() as d:
            plain = os.path.join(d, "plain.gguf")
            subprocess.run([a.mkmodel, "-o", plain, "--no-vocab"] +
                           (BASE + " " + model).split(), check=True)
            base = logits_at(plain, toks)
        print("%s: %d bytes, logits std %.2f; without the scaling, NMSE "
              "at each position: %s" % (
                  name, os.path.getsize(path), got.std(),
                  " ".join("%d:%.2e" % (p, e)
                           for p, e in zip(POS, nmse(base, got)))))


if __name__ == "__main__":
    main()

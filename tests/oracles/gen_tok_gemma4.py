#!/usr/bin/env python3
"""gen_tok_gemma4.py - goldens for parley's "gemma4" tokenizer
(tests/t_tok_gemma4.c).

Oracle (development only; CI never runs this script): `llama-cpp-python`
0.3.36 (its bundled llama.cpp knows tokenizer.ggml.model "gemma4"), through
Llama(model_path, vocab_only=True); ids from llama_tokenize, text from
llama_token_to_piece per id (what a chat prints; llama_detokenize would
also apply clean_up_tokenization_spaces).

No real Gemma 4 tokenizer is available offline, so this script writes a
synthetic vocabulary in the layout llama.cpp reads for Gemma 4
(tests/data/tok/gemma4.gguf, ~20 KB):
  - tokenizer.ggml.model "gemma4" (llama.cpp then ignores .pre and uses
    its "gemma4" pre-tokenizer: split on newline runs, raw UTF-8 symbols,
    ' ' escaped to U+2581 first, BPE over tokenizer.ggml.merges, <0xXX>
    byte tokens for a symbol that is no token);
  - <pad> <eos> <bos> <unk> <mask>, then the Gemma 4 control tokens
    <|turn> <turn|> <|channel> <channel|> <|tool_response>, and one
    USER_DEFINED token "<br>" (matched even without special parsing);
  - the 256 byte tokens <0x00>..<0xFF> (type BYTE);
  - "\\n", "\\n\\n" and "\\n\\n\\n": only "\\n \\n" is a merge, so
    "\\n\\n\\n" is reachable only by llama.cpp's rule that a newline run
    which is a token is taken whole (and "\\n"x4 is not a token: BPE gives
    "\\n\\n" "\\n\\n");
  - words with and without a leading U+2581, runs of U+2581, "\\t",
    accented letters, CJK (界 absent: byte fallback), the emoji 😀 (🎉
    absent: byte fallback). Each multi-character token is the merge of two
    shorter tokens, split at a random point; merges are ranked by the
    length of what they make, ties in random order (seeded), so ranks
    and positions both matter in the merge loop;
  - tokenizer.ggml.add_bos_token = false, which llama.cpp overrides to true
    for Gemma 4 (so the test can see the override);
  - general.architecture "llama" with the few hyper-parameters
    vocab_only loading reads, no tensors (parley's tokenizer reads only
    tokenizer.* keys).

Outputs (tests/data/tok/):
  gemma4.gguf          the vocabulary
  gemma4.txt           the strings (the last three invalid UTF-8): "<byte length>\\n<bytes>\\n" each
  gemma4.ids           llama_tokenize(add_special=False, parse_special=False)
  gemma4.special       llama_tokenize(add_special=False, parse_special=True)
  gemma4.bos           llama_tokenize(add_special=True, parse_special=True)
  gemma4.dec           hex of the concatenated pieces of each .ids line
                       (special=False), then a space, then hex of the
                       pieces of each .special line (special=True)

Usage: python3 tests/oracles/gen_tok_gemma4.py
"""
import ctypes
import os
import random
import sys

import gguf

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "tok")
sys.path.insert(0, HERE)
from gen_engine import llama_cpp_setup  # noqa: E402

SEED = 20260804
SP = "\u2581"

CONTROL = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<|turn>",
           "<turn|>", "<|channel>", "<channel|>", "<|tool_response>"]
USER = ["<br>"]

WORDS = [
    "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "hello",
    "world", "Hello", "World", "model", "user", "thought", "answer", "is",
    "a", "an", "of", "to", "and", "in", "it", "that", "token", "tokens",
    "Gemma", "chat", "turn", "channel", "response", "tool", "call", "print",
    "return", "def", "int", "main", "café", "naïve", "über", "résumé",
    "über", "straße", "hola", "señor", "12", "2026", "3", "x",
]
BARE = ["the", "ing", "er", "ed", "s", "tion", "(", ")", ":", ".", ",", "!",
        "?", "'", "\"", "-", "=", "+", "{", "}", "[", "]", "<", ">", "/",
        "|", "_", "é", "ü", "ß", "ñ", "ï", "你", "好", "你好", "世", "😀",
        "\t", "x", "y", "z", "print(", "):", "()", "->"]
SPACES = [SP * k for k in (1, 2, 3, 4, 8)]
NEWLINES = ["\n", "\n\n", "\n\n\n"]


def chars_of(words):
    """Every character the words use."""
    out = set()
    for w in words:
        out.update(w)
    return out


def build_vocab():
    """Tokens (text, type) and merges ("left right", ranked)."""
    r = random.Random(SEED)
    targets = [SP + w for w in WORDS] + BARE + SPACES + [SP + "你好"]
    targets += [SP + "(" , SP + "=", SP + "{", "ing" + SP]
    chars = chars_of(targets) | {"\n"}
    pieces, merges = set(chars), {}

    def split(w):
        if len(w) == 1:
            return
        if w in merges:
            return
        k = r.randint(1, len(w) - 1)
        merges[w] = (w[:k], w[k:])
        pieces.add(w[:k])
        pieces.add(w[k:])
        split(w[:k])
        split(w[k:])

    for w in targets:
        pieces.add(w)
        split(w)
    merges["\n\n"] = ("\n", "\n")
    pieces.update(NEWLINES)
    order = sorted(merges, key=lambda w: (len(w), r.random()))
    mlist = ["%s %s" % merges[w] for w in order]
    normal = sorted(pieces, key=lambda w: (len(w), w))
    toks = [(t, gguf.TokenType.CONTROL) for t in CONTROL]
    toks[3] = ("<unk>", gguf.TokenType.UNKNOWN)
    toks += [(t, gguf.TokenType.USER_DEFINED) for t in USER]
    toks += [("<0x%02X>" % b, gguf.TokenType.BYTE) for b in range(256)]
    toks += [(t, gguf.TokenType.NORMAL) for t in normal]
    return toks, mlist


def write_gguf(path, toks, merges):
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("parley gemma4 tokenizer test vocabulary")
    w.add_context_length(256)
    w.add_embedding_length(64)
    w.add_block_count(1)
    w.add_feed_forward_length(128)
    w.add_head_count(1)
    w.add_head_count_kv(1)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_tokenizer_model("gemma4")
    w.add_tokenizer_pre("gemma4")
    w.add_token_list([t for t, _ in toks])
    w.add_token_types([int(ty) for _, ty in toks])
    w.add_token_merges(merges)
    w.add_bos_token_id(2)
    w.add_eos_token_id(1)
    w.add_unk_token_id(3)
    w.add_pad_token_id(0)
    w.add_add_bos_token(False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


STRINGS = [
    "",
    "hello",
    "the quick brown fox jumps over the lazy dog",
    "Hello World",
    " hello",
    "hello ",
    "  hello  world  ",
    "        eight",
    "a  b   c    d",
    " ",
    "   ",
    "\t",
    "\tindented\ttext",
    "x\t y",
    "\n",
    "\n\n",
    "\n\n\n",
    "\n\n\n\n",
    "\n\n\n\n\n\n\n",
    "line one\nline two",
    "para\n\nnext para\n\n\nthird",
    " \n \n\n  \n",
    "end with newline\n",
    "\nstart with newline",
    "café naïve über résumé",
    "straße señor",
    "你好 世界",
    "你好你好",
    "ok 😀 great 🎉!",
    "🎉",
    "mixed 😀😀 and 🎉🎉",
    "Ω≈ç√∫",
    "def main():\n    return int(x)\n",
    "print(\"hello, world!\")",
    "{a: [1, 2, 3]}",
    "2026 - 12 = 2014",
    "<br>line break<br>",
    "a<br>b",
    "the token <|turn> is literal here",
    "<|turn>user\nhello<turn|>\n<|turn>model\n",
    "<bos><|turn>user\nhi<turn|>",
    "<|channel>thought\nhmm<channel|>answer",
    "x<eos>y<pad>z",
    "<|tool_response>{}<turn|>",
    "<unk> and <mask>",
    "<|turn",
    "turn|>",
    "zzz qqq",
    "\u00a0non-breaking\u3000ideographic",
    "ing" + " ing",
    # invalid UTF-8 (bytes): llama.cpp reads each bad byte as U+FFFD (no
    # token here: its three byte tokens) and overlong forms as the
    # character they spell
    b"a\xffb",
    b"\xc3(x \xe4\xbd",
    b"\xe0\x80\x81 \xf0\x9f\x98",
]


def as_bytes(s):
    return s if isinstance(s, bytes) else s.encode("utf-8")


def tokenize(low, vocab, s, add_special, special):
    b = as_bytes(s)
    n = len(b) + 8
    buf = (low.llama_token * n)()
    k = low.llama_tokenize(vocab, b, len(b), buf, n, add_special, special)
    assert k >= 0, (s, k)
    return list(buf[:k])


def detok(low, vocab, ids, special):
    out = b""
    buf = ctypes.create_string_buffer(256)
    for t in ids:
        k = low.llama_token_to_piece(vocab, t, buf, 256, 0, special)
        assert k >= 0
        out += buf.raw[:k]
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    toks, merges = build_vocab()
    path = os.path.join(OUT, "gemma4.gguf")
    write_gguf(path, toks, merges)
    llama_cpp = llama_cpp_setup()
    low = llama_cpp.llama_cpp
    m = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    vocab = low.llama_model_get_vocab(m.model)
    assert low.llama_vocab_n_tokens(vocab) == len(toks)
    with open(os.path.join(OUT, "gemma4.txt"), "wb") as f:
        for s in STRINGS:
            b = as_bytes(s)
            f.write(b"%d\n" % len(b) + b + b"\n")
    rows = {"ids": [], "special": [], "bos": [], "dec": []}
    for s in STRINGS:
        a = tokenize(low, vocab, s, False, False)
        b = tokenize(low, vocab, s, False, True)
        c = tokenize(low, vocab, s, True, True)
        rows["ids"].append(a)
        rows["special"].append(b)
        rows["bos"].append(c)
        rows["dec"].append(detok(low, vocab, a, False).hex() + " " +
                           detok(low, vocab, b, True).hex())
    for k in ("ids", "special", "bos"):
        with open(os.path.join(OUT, "gemma4." + k), "w") as f:
            for row in rows[k]:
                f.write(" ".join(str(i) for i in row) + "\n")
    with open(os.path.join(OUT, "gemma4.dec"), "w") as f:
        for line in rows["dec"]:
            f.write(line + "\n")
    nb = len(CONTROL) + len(USER)
    fb = sum(1 for r in rows["ids"] for i in r if nb <= i < nb + 256)
    print("gemma4: %d tokens, %d merges, %d strings, %d byte-fallback ids,"
          " %d bytes of GGUF" % (len(toks), len(merges), len(STRINGS), fb,
                                 os.path.getsize(path)))
    for s, r in zip(STRINGS[:8], rows["ids"]):
        print("  %r -> %s" % (s, r))


if __name__ == "__main__":
    main()

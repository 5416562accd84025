#!/usr/bin/env python3
"""gen_tok.py - corpus goldens for parley's tokenizer (tests/t_tok_corpus.c).

Oracles (development only; CI never runs this script):
  * Hugging Face `tokenizers` 0.23.3 (PyPI) on the tokenizer.json files of
    ../shared/testdata/tokenizers/{qwen,llama3,llama2}, encode(text,
    add_special_tokens=False). The C test loads the matching vocab GGUFs
    ggml-vocab-{qwen2,llama-bpe,llama-spm}.gguf, converted from those files.
  * SmolLM2-135M-Instruct: `tokenizers` 0.23.3 on a tokenizer rebuilt from
    the model GGUF's own vocabulary and merges (read with `gguf` 0.19.0) in
    SmolLM2's published tokenizer.json layout: BPE, pre_tokenizer
    Sequence[Digits(individual_digits=True), ByteLevel(add_prefix_space=
    False)], ByteLevel decoder, control tokens as special added tokens.
    Cross-checked with `llama-cpp-python` 0.3.36 (printed as a diagnostic).
  * Llama-2 (ggml-vocab-llama-spm.gguf): `sentencepiece` 0.2.1 on a
    ModelProto rebuilt from the GGUF's pieces, scores and types (BPE,
    byte_fallback, identity normalizer, add_dummy_prefix) - the training
    tokenizer itself. tokenizers/llama2/tokenizer.json is NOT this
    vocabulary ("\u2581The" is 415 there, 450 in Llama-2): it is compared
    as "llama2-hf" through tests/data/tok/llama2-hf.gguf, made from that
    tokenizer.json by this script (scores from the merge ranks).
  * Gemma-3-270M: `llama-cpp-python` 0.3.36 (llama.cpp's tokenizer),
    Llama(model_path, vocab_only=True).tokenize(text, add_bos=False,
    special=False); no tokenizer.json of Gemma-3 is available offline.

Outputs (tests/data/tok/):
  corpus.txt      the strings: for each, "<byte length>\\n<bytes>\\n"
  special.txt     strings holding control-token text, same format
  qwen2-strip.txt, qwen2-strip.ids  strings around <|im_end|> (lstrip) and
                  <|im_start|> (rstrip) and HF's ids for them
  tiny-bpe.gguf, tiny-spm.gguf  small vocabularies, fuzz seeds
  llama2-hf.gguf  vocab GGUF made from tokenizers/llama2/tokenizer.json
  NAME.ids        one line per corpus string: the ids, space-separated
  NAME.special    one line per special.txt string, encoded with special
                  tokens parsed (HF always matches added tokens; llama.cpp
                  with special=True); compared with TOK_PARSE_SPECIAL.

gpt-oss's o200k vocabulary ("gpt-4o" pre-tokenizer) has its own oracle
script, gen_tok_o200k.py (bpe-openai), run after this one.

Usage: python3 tests/oracles/gen_tok.py [--shared ../shared]
"""
import argparse
import json
import lzma
import os
import random
import sys
import unicodedata

import gguf
import tokenizers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

SEED = 20261121
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "tok")
CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME") or
                     os.path.expanduser("~/.cache"), "parley", "models")
SMOL = os.path.join(CACHE, "SmolLM2-135M-Instruct.Q4_1.gguf")
GEMMA = os.path.join(CACHE, "gemma-3-270m-q4_k_m.gguf")

ENGLISH = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello, world! How are you doing today?",
    "It was the best of times, it was the worst of times.",
    "In 1492, Columbus sailed the ocean blue.",
    "She sells sea shells by the sea shore.",
    "Can you explain how a transformer model works, step by step?",
    "Please summarize the following article in three sentences.",
    "Dr. Smith's appointment is at 3:30 p.m. on Jan. 5th, 2024.",
    "E-mail me at john.doe@example.com or call +1 (555) 123-4567.",
    "The U.S.A. has 50 states; Canada has 10 provinces & 3 territories.",
    "Wait... what?! No way!!! That's impossible??",
    "  Leading spaces and trailing spaces   ",
    "Tab\tseparated\tvalues\there",
    "Line one\nLine two\n\nLine four after a blank line",
    "Windows line endings\r\nare here\r\n\r\nand here",
    "Mixed\r\n\n\r\r\n endings",
    "URL: https://www.example.org/path/to/page?query=1&x=y#frag",
    "Markdown: **bold**, _italic_, `code`, [link](http://a.b)",
    "- item one\n- item two\n  - nested item\n1. numbered",
    "# Heading\n\nSome paragraph text.\n\n## Sub-heading",
    "| a | b |\n|---|---|\n| 1 | 2 |",
    "\"Quoted text\" and 'single quotes' and `backticks`",
    "Price: $1,234.56 (approx. \u20ac1.100,00 or \u00a3970)",
    "50% off! Buy 2, get 1 free. Offer ends 12/31/2025.",
    "Temperatures range from -40\u00b0C to +45\u00b0C.",
]

WORDS = ("the of and to in is you that it he was for on are as with his "
         "they I at be this have from or one had by word but not what all "
         "were we when your can said there use an each which she do how "
         "their if will up other about out many then them these so some her "
         "would make like him into time has look two more write go see "
         "number no way could people my than first water been call who oil "
         "its now find long down day did get come made may part Hello World "
         "Python tokenizer GGUF Llama Qwen model inference CUDA").split()

CODE = [
    "def foo(x):\n    return x * 2\n",
    "int main(int argc, char **argv)\n{\n\tprintf(\"hi\\n\");\n\treturn 0;\n}\n",
    "for (i = 0; i < n; i++) {\n\t\tsum += a[i] * b[i];\n\t}",
    "const f = async (a, b) => { await g(a); return b ?? null; };",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
    "#include <stdio.h>\n#define MAX(a, b) ((a) > (b) ? (a) : (b))",
    "    if x == 1:\n        pass\n    elif x != 2:\n        raise ValueError('x')",
    "{\"key\": [1, 2.5, -3e10, true, null], \"nested\": {\"a\": \"b\"}}",
    "<div class=\"row\"><span id='x'>text</span></div>",
    "x = [i**2 for i in range(10) if i % 2 == 0]  # squares",
    "fn main() { let v: Vec<u32> = vec![1, 2, 3]; println!(\"{:?}\", v); }",
    "$ ls -la | grep '\\.c$' && make -j2 check 2>&1 | tee log.txt",
    "a+=b;c-=d;e*=f;g/=h;i%=j;k<<=1;l>>=2;m&=n;o|=p;q^=r;",
    "   \t  mixed indentation\n\t    here",
    "// comment\n/* block\n * comment */\n",
    "lambda: None\n\n\n\nclass A(B, metaclass=M):\n    x: int = 0",
]

CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T",
                "'RE", "'Ve", "'M", "'LL", "'D", "\u2019s", "'x", "''", "'"]

EMOJI = ["\U0001F600", "\U0001F44D", "\U0001F44D\U0001F3FD",
         "\U0001F468\u200D\U0001F469\u200D\U0001F467\u200D\U0001F466",
         "\U0001F3F3\uFE0F\u200D\U0001F308", "\U0001F1FA\U0001F1F8",
         "\U0001F1EF\U0001F1F5", "\u2764\uFE0F", "\U0001F9D1\u200D\U0001F4BB",
         "\U0001F469\U0001F3FE\u200D\U0001F52C", "\u263A", "\U0001F525",
         "\U0001F680", "\U0001F914", "1\uFE0F\u20E3", "\U0001FAE0",
         "\U0001F636\u200D\U0001F32B\uFE0F"]

CJK = ["\u4f60\u597d\uff0c\u4e16\u754c\uff01", "\u6211\u7231\u5317\u4eac\u5929\u5b89\u95e8\u3002",
       "\u673a\u5668\u5b66\u4e60\u662f\u4eba\u5de5\u667a\u80fd\u7684\u4e00\u4e2a\u5206\u652f",
       "\u3053\u3093\u306b\u3061\u306f\u4e16\u754c", "\u6771\u4eac\u306f\u65e5\u672c\u306e\u9996\u90fd\u3067\u3059\u3002",
       "\u30ab\u30bf\u30ab\u30ca\u3068\u3072\u3089\u304c\u306a", "\uc548\ub155\ud558\uc138\uc694 \uc138\uacc4",
       "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8\uc785\ub2c8\ub2e4.", "\u7e41\u9ad4\u4e2d\u6587\u6e2c\u8a66",
       "\uff21\uff22\uff23\uff11\uff12\uff13", "\u3000\u5168\u89d2\u7a7a\u683c\u3000"]

SCRIPTS = ["\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
           "\u0627\u0644\u0644\u063a\u0629 \u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u0668\u0660\u0661",
           "\u0645\u064f\u062d\u064e\u0645\u0651\u064e\u062f",
           "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e",
           "\u0939\u093f\u0928\u094d\u0926\u0940 \u092d\u093e\u0937\u093e \u0967\u0968\u0969",
           "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd", "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e0a\u0e32\u0e27\u0e42\u0e25\u0e01",
           "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440!", "\u0393\u03b5\u03b9\u03ac \u03c3\u03bf\u03c5 \u039a\u03cc\u03c3\u03bc\u03b5",
           "\u10d2\u10d0\u10db\u10d0\u10e0\u10ef\u10dd\u10d1\u10d0", "\u0532\u0561\u0580\u0587",
           "\u1780\u17b6\u179a\u17a2\u1793\u17bb\u179c\u178f\u17d2\u178f", "\u0ba4\u0bae\u0bbf\u0bb4\u0bcd",
           "\u00c4pfel \u00fcber \u00d6sterreich \u00df", "Cr\u00e8me br\u00fbl\u00e9e, na\u00efve fa\u00e7ade",
           "\u017e\u0161\u010d\u0159\u010f\u0165\u0148 \u0142\u00f3d\u017a", "\u0130stanbul \u0131\u015f\u0131k"]

COMBINING = ["e\u0301", "a\u0300\u0316", "o\u0308\u0304", "n\u0303", "A\u030A",
             "\u1100\u1161\u11a8", "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324",
             "\u0915\u094d\u0937", "\u0627\u0653", "i\u0307", "\u212b", "\u2126",
             "\ufb01", "\u1e9b\u0323", "\u0041\u030a\u0301"]

ODD = ["\u00a0", "\u1680", "\u2000", "\u2003", "\u200a", "\u2028", "\u2029",
       "\u202f", "\u205f", "\u3000", "\u0085", "\u180e", "\u200b", "\u200c",
       "\u200d", "\u2060", "\ufeff", "\x0b", "\x0c", "\x1c", "\x1f", "\x00",
       "\x7f", "\u00ad", "\ufffd", "\U0010ffff", "\ue000", "\u017f",
       "'\u017f", "'\u212a"]


def rand_word(r):
    return r.choice(WORDS)


def sentence(r):
    n = r.randint(3, 18)
    w = [rand_word(r) for _ in range(n)]
    if r.random() < 0.5:
        w[0] = w[0].capitalize()
    s = " ".join(w)
    return s + r.choice([".", "!", "?", ",", ";", ":", "", "...", " ."])


def number(r):
    n = r.randint(1, 40)
    d = "".join(r.choice("0123456789") for _ in range(n))
    pre = r.choice(["", " ", "  ", "x", "$", "-", "+", "(", "#", "v"])
    post = r.choice(["", " ", ".", ",5", ".25", "%", "k", " apples", ")",
                     "th", "\n", "e10"])
    return pre + d + post


def whitespace(r):
    parts = [" ", "  ", "   ", "\t", "\n", "\r\n", "\r", "\n\n", " \n",
             "\t\t", "\u00a0", "\u3000", "\v", "\f"]
    s = ""
    for _ in range(r.randint(1, 8)):
        if r.random() < 0.6:
            s += r.choice(parts) * r.randint(1, 6)
        else:
            s += rand_word(r)
    return s


def rand_cp(r):
    k = r.random()
    if k < 0.25:
        return r.randint(0x20, 0x7e)
    if k < 0.35:
        return r.randint(0, 0x1f)
    if k < 0.5:
        return r.randint(0x80, 0x7ff)
    if k < 0.8:
        c = r.randint(0x800, 0xfffd)
        return c if not 0xd800 <= c <= 0xdfff else 0x4e00
    if k < 0.9:
        return r.randint(0x1f300, 0x1faff)
    return r.randint(0x10000, 0x10ffff)


def rand_unicode(r):
    return "".join(chr(rand_cp(r)) for _ in range(r.randint(1, 40)))


def rand_bytes(r):
    b = bytes(r.randint(0, 255) for _ in range(r.randint(1, 60)))
    return b.decode("utf-8", errors="ignore")


def build_corpus():
    r = random.Random(SEED)
    c = []
    c += ENGLISH + CODE + EMOJI + CJK + SCRIPTS + COMBINING + ODD
    c += [sentence(r) for _ in range(330)]
    c += [" ".join(sentence(r) for _ in range(r.randint(2, 5)))
          for _ in range(60)]
    for _ in range(150):
        s = r.choice(CODE)
        c.append(s.replace("    ", r.choice(["    ", "\t", "  ", "        "])))
    c += [whitespace(r) for _ in range(200)]
    c += [number(r) for _ in range(200)]
    c += ["".join(r.choice("0123456789") for _ in range(n)) for n in range(1, 41)]
    c += [" " + "9" * n for n in range(1, 25)]
    for _ in range(120):
        w = rand_word(r)
        c.append(r.choice(["", "I", "you", "We", "it", "THEY"]) +
                 r.choice(CONTRACTIONS) + r.choice(["", " ", " " + w, w]))
    c += ["I'm", "you're", "we've", "she'll", "he'd", "isn't", "DON'T",
          "It'S", "y'all'd've", "rock 'n' roll", "'twas", "O'Neil's"]
    for _ in range(150):
        c.append(" ".join(r.choice(EMOJI) * r.randint(1, 3)
                          for _ in range(r.randint(1, 4))) +
                 r.choice(["", " ok", "!", "\n"]))
    for _ in range(150):
        c.append(r.choice(CJK + SCRIPTS) + r.choice(["", " ", "\n", "123",
                                                       " abc"]) +
                 r.choice(CJK + SCRIPTS))
    for _ in range(100):
        base = r.choice(WORDS)
        c.append("".join(ch + "".join(chr(r.randint(0x300, 0x36f))
                                      for _ in range(r.randint(0, 3)))
                         for ch in base))
        c.append(unicodedata.normalize(r.choice(["NFD", "NFKD", "NFC"]),
                                       r.choice(SCRIPTS + COMBINING)))
    c += [rand_unicode(r) for _ in range(300)]
    c += [rand_bytes(r) for _ in range(200)]
    for ch in ["a", " ", "\n", "!", "1", "\u00e9", "\u4e00", "\U0001F600",
               "ab", "\t", "-", "=", "\r\n", ".", "0"]:
        for n in (50, 257, 1000):
            c.append(ch * n)
    c += ["", " ", "a", "\n", " a", "a ", "  a  "]
    for _ in range(80):
        c.append(r.choice(ODD).join(rand_word(r) for _ in range(3)))
    return c


SPECIAL_BASE = ["{s}", "a{s}b", " {s} ", "{s}{s}", "x {s}\ny", "{s}Hello",
                "Hello{s}", "<|im_start|>user\nhi{s}\n", "{s} {s}  {s}"]


def special_strings(names):
    out = []
    for s in names:
        out += [b.replace("{s}", s) for b in SPECIAL_BASE]
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


def hf_from_json(shared, name):
    with lzma.open(os.path.join(shared, "testdata", "tokenizers", name,
                                "tokenizer.json.xz")) as f:
        return Tokenizer.from_str(f.read().decode("utf-8"))


def field_strs(r, key):
    f = r.fields[key]
    return [bytes(f.parts[i]).decode("utf-8") for i in f.data]


def field_ints(r, key):
    f = r.fields[key]
    return [int(f.parts[i][0]) for i in f.data]


def hf_smollm(path):
    r = gguf.GGUFReader(path)
    toks = field_strs(r, "tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ", 1)) for m in
              field_strs(r, "tokenizer.ggml.merges")]
    types = field_ints(r, "tokenizer.ggml.token_type")
    vocab = {t: i for i, t in enumerate(toks)}
    tk = Tokenizer(models.BPE(vocab, merges, ignore_merges=False))
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tk.decoder = decoders.ByteLevel()
    tk.add_special_tokens([t for t, ty in zip(toks, types) if ty == 3])
    return tk, [t for t, ty in zip(toks, types) if ty == 3]


SP_TYPES = {1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6}


def sp_from_gguf(path, dummy_prefix):
    """A sentencepiece BPE model rebuilt from a GGUF's pieces, scores and
    types (the GGUF converter copied them from tokenizer.model)."""
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb
    r = gguf.GGUFReader(path)
    toks = field_strs(r, "tokenizer.ggml.tokens")
    f = r.fields["tokenizer.ggml.scores"]
    scores = [float(f.parts[i][0]) for i in f.data]
    types = field_ints(r, "tokenizer.ggml.token_type")
    m = pb.ModelProto()
    for t, sc, ty in zip(toks, scores, types):
        p = m.pieces.add()
        p.piece = t
        p.score = sc
        p.type = SP_TYPES.get(ty, 1)
    ts = m.trainer_spec
    ts.model_type = pb.TrainerSpec.BPE
    ts.vocab_size = len(toks)
    ts.byte_fallback = True
    ts.unk_id, ts.bos_id, ts.eos_id, ts.pad_id = 0, 1, 2, -1
    ns = m.normalizer_spec
    ns.name = "identity"
    ns.add_dummy_prefix = dummy_prefix
    ns.remove_extra_whitespaces = False
    ns.escape_whitespaces = True
    sp = spm.SentencePieceProcessor()
    sp.LoadFromSerializedProto(m.SerializeToString())
    return sp


def sp_encode_special(sp, specials, ids_of, s):
    """HF's legacy Llama behaviour emulated on sentencepiece: split on the
    special tokens' text (leftmost-longest), encode each other part on its
    own (so each gets the dummy prefix)."""
    out, i, last = [], 0, 0
    order = sorted(specials, key=len, reverse=True)
    while i < len(s):
        hit = next((t for t in order if s.startswith(t, i)), None)
        if hit is None:
            i += 1
            continue
        if i > last:
            out += sp.encode(s[last:i])
        out.append(ids_of[hit])
        i = last = i + len(hit)
    if last < len(s):
        out += sp.encode(s[last:])
    return out


def gguf_from_llama2_json(shared, path):
    """Write the Llama-2-style tokenizer.json of tokenizers/llama2 as a
    vocab-only GGUF the way llama.cpp's converter lays one out. HF's BPE
    model has no scores: a token's score is minus the rank of the first merge
    producing it (every split of every token is a merge in this file, which
    the script checks, so score order is merge order)."""
    with lzma.open(os.path.join(shared, "testdata", "tokenizers", "llama2",
                                "tokenizer.json.xz")) as f:
        j = json.loads(f.read().decode("utf-8"))
    vocab = j["model"]["vocab"]
    merges = [tuple(x.split(" ", 1)) if isinstance(x, str) else tuple(x)
              for x in j["model"]["merges"]]
    first = {}
    for r, (a, b) in enumerate(merges):
        first.setdefault(a + b, r)
    ms = set(merges)
    for t in first:
        for k in range(1, len(t)):
            if t[:k] in vocab and t[k:] in vocab:
                assert (t[:k], t[k:]) in ms, t
    toks = [None] * len(vocab)
    for t, i in vocab.items():
        toks[i] = t
    special = {a["id"]: a["content"] for a in j["added_tokens"]}
    types, scores = [], []
    for i, t in enumerate(toks):
        if i in special:
            types.append(2 if t == "<unk>" else 3)
        elif len(t) == 6 and t.startswith("<0x") and t.endswith(">"):
            types.append(6)
        else:
            types.append(1)
        scores.append(-float(first[t]) if t in first else 0.0)
    w = gguf.GGUFWriter(path, "llama")
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(toks)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


STRIP_STRINGS = [
    "a <|im_end|> b", "a\t\n <|im_end|>\n\nb", "<|im_start|>  user\n",
    "x<|im_start|> \u3000 y", "  <|im_end|>  <|im_start|>  ", "a\u00a0<|im_end|>",
    "<|im_end|><|im_start|>\n\n<|im_end|>", "hi   <|im_start|>", " \u2003<|im_end|>",
    "a \u180e<|im_end|>", "<|im_start|>\u200b x", "text\r\n<|im_end|>\r\n"]


def hf_qwen_strip(shared):
    """Qwen's tokenizer with <|im_end|> lstrip and <|im_start|> rstrip, to
    check TOK_ATTR_LSTRIP / TOK_ATTR_RSTRIP against HF."""
    with lzma.open(os.path.join(shared, "testdata", "tokenizers", "qwen",
                                "tokenizer.json.xz")) as f:
        j = json.loads(f.read().decode("utf-8"))
    for t in j["added_tokens"]:
        if t["content"] == "<|im_end|>":
            t["lstrip"] = True
        if t["content"] == "<|im_start|>":
            t["rstrip"] = True
    return Tokenizer.from_str(json.dumps(j))


def byte_level_chars():
    bs = (list(range(ord("!"), ord("~") + 1)) +
          list(range(ord("\u00a1"), ord("\u00ac") + 1)) +
          list(range(ord("\u00ae"), ord("\u00ff") + 1)))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    m = dict(zip(bs, cs))
    return [chr(m[b]) for b in range(256)]


def write_tiny_seeds():
    """Small vocab GGUFs: seeds for fuzz/fuzz_tok_load.c."""
    toks = byte_level_chars() + ["he", "ll", "hell", "hello", "\u0120w",
                                 "<|im_end|>", "<tool>"]
    types = [1] * 260 + [1, 3, 4]
    w = gguf.GGUFWriter(os.path.join(OUT, "tiny-bpe.gguf"), "llama")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(toks)
    w.add_token_types(types)
    w.add_token_merges(["h e", "l l", "he ll", "hell o", "\u0120 w"])
    w.add_eos_token_id(261)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    toks = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    toks += ["\u2581", "a", "b", "\u2581a", "ab", "\u2581ab", "<t>"]
    types = [2, 3, 3] + [6] * 256 + [1] * 6 + [4]
    w = gguf.GGUFWriter(os.path.join(OUT, "tiny-spm.gguf"), "llama")
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(toks)
    w.add_token_scores([0.0] * 259 + [-1.0 - i for i in range(7)])
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def hf_encode(tk, strs):
    return [tk.encode(s, add_special_tokens=False).ids for s in strs]


def llama_encode(path, strs, special):
    import llama_cpp
    m = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    return [m.tokenize(s.encode("utf-8"), add_bos=False, special=special)
            for s in strs]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(HERE, "..", "..", "..",
                                                     "shared"))
    a = ap.parse_args()
    print("oracles: tokenizers %s, gguf %s" % (
        tokenizers.__version__, "0.19.0"))
    try:
        import llama_cpp
        print("         llama-cpp-python %s" % llama_cpp.__version__)
    except ImportError:
        print("         llama-cpp-python missing: gemma skipped")
    corpus = build_corpus()
    os.makedirs(OUT, exist_ok=True)
    write_strings(os.path.join(OUT, "corpus.txt"), corpus)
    print("corpus: %d strings, %d bytes" % (
        len(corpus), sum(len(s.encode()) for s in corpus)))

    sets = {}
    for name, hf in (("qwen2", "qwen"), ("llama-bpe", "llama3")):
        tk = hf_from_json(a.shared, hf)
        specials = [t.content for t in tk.get_added_tokens_decoder().values()
                    if t.special][:6]
        sets[name] = (hf_encode(tk, corpus), specials, tk)
    spm_path = os.path.join(a.shared, "testdata", "vocab",
                            "ggml-vocab-llama-spm.gguf")
    sp = sp_from_gguf(spm_path, True)
    rows = [sp.encode(x) for x in corpus]
    sset = ["<unk>", "<s>", "</s>"]
    ids_of = {"<unk>": 0, "<s>": 1, "</s>": 2}
    sstr = special_strings(sset)
    write_ids(os.path.join(OUT, "llama-spm.ids"), rows)
    write_strings(os.path.join(OUT, "llama-spm.special.txt"), sstr)
    write_ids(os.path.join(OUT, "llama-spm.special"),
              [sp_encode_special(sp, sset, ids_of, x) for x in sstr])
    print("llama-spm: %d rows, %d ids (sentencepiece %s)" % (
        len(rows), sum(map(len, rows)), __import__("sentencepiece").__version__))
    write_tiny_seeds()
    tk = hf_qwen_strip(a.shared)
    write_strings(os.path.join(OUT, "qwen2-strip.txt"), STRIP_STRINGS)
    write_ids(os.path.join(OUT, "qwen2-strip.ids"),
              hf_encode(tk, STRIP_STRINGS))
    print("qwen2-strip: %d strings" % len(STRIP_STRINGS))
    gguf_from_llama2_json(a.shared, os.path.join(OUT, "llama2-hf.gguf"))
    tk = hf_from_json(a.shared, "llama2")
    sets["llama2-hf"] = (hf_encode(tk, corpus), ["<unk>", "<s>", "</s>"], tk)
    tk, sp = hf_smollm(SMOL)
    sets["smollm"] = (hf_encode(tk, corpus), sp[:6], tk)
    try:
        lc = llama_encode(SMOL, corpus, False)
        same = sum(x == y for x, y in zip(lc, sets["smollm"][0]))
        print("smollm: llama-cpp-python agrees with tokenizers on %d/%d" %
              (same, len(corpus)))
    except ImportError:
        pass

    spec_all = []
    for name, (rows, specials, tk) in sets.items():
        write_ids(os.path.join(OUT, name + ".ids"), rows)
        sstr = special_strings(specials)
        spec_all.append((name, sstr))
        write_strings(os.path.join(OUT, name + ".special.txt"), sstr)
        write_ids(os.path.join(OUT, name + ".special"), hf_encode(tk, sstr))
        print("%s: %d rows, %d ids; %d special strings (%s)" % (
            name, len(rows), sum(map(len, rows)), len(sstr),
            " ".join(specials)))
    if os.path.exists(GEMMA):
        try:
            rows = llama_encode(GEMMA, corpus, False)
            write_ids(os.path.join(OUT, "gemma3.ids"), rows)
            sstr = special_strings(["<start_of_turn>", "<end_of_turn>",
                                    "<bos>", "<eos>", "<table>", "\n\n"])
            write_strings(os.path.join(OUT, "gemma3.special.txt"), sstr)
            write_ids(os.path.join(OUT, "gemma3.special"),
                      llama_encode(GEMMA, sstr, True))
            print("gemma3: %d rows, %d ids" % (len(rows), sum(map(len, rows))))
        except ImportError:
            pass


if __name__ == "__main__":
    sys.exit(main())

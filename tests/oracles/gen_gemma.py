#!/usr/bin/env python3
"""Goldens for tests/t_engine_gemma.c: the real Gemma 3 270M (the base
model, Q4_K_M, tests/fetch-gemma.sh) under llama-cpp-python, the oracle
(ggml's CPU kernels, fp32 KV cache, no flash attention).

Six plain-text prompts (no chat template: the base model's greedy answers
to a turn are poor, in llama.cpp too): the five template-free prompts of
gen_engine.py and "window", a text longer than the model's sliding window
(512), so that its local layers drop the prompt's start. For each:
the prompt ids (<bos> first, as the file asks), llama.cpp's 64 greedy
tokens and its top1 - top2 logit gap at every step, the prompt as a JSON
string (tests/data/engine/gemma3_270m.golden: gen_engine.py's format and
a "text" line), and for
the prompts of WITH_LOGITS llama.cpp's logits at the first generated
position (gemma3_270m_llamacpp.logits: float16 [3][262144], rows in that
order; float16 rounding changes an NMSE by ~1e-8).

Usage: gen_gemma.py [--model gemma-3-270m-q4_k_m.gguf] [--out DIR]
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_engine import (LONG, N_GEN, PROMPTS, golden_lines,  # noqa: E402
                        llama_cpp_setup, llama_cpp_version, llama_greedy)

# The history of LONG goes on past the window; its closing request moves
# to the end.
WINDOW = LONG.rsplit(" Summarize", 1)[0] + (
    " The story of software runs alongside. The first programs were "
    "written as patterns of switches and plugged cables; assemblers let "
    "programmers write mnemonics instead of numbers, and in 1957 FORTRAN "
    "showed that a compiler could translate formulas into machine code "
    "nearly as good as a careful person's. COBOL brought English-like "
    "programs to business, LISP brought symbols and recursion to research "
    "on artificial intelligence, and ALGOL gave later languages their "
    "block structure. Operating systems grew from simple monitors that "
    "loaded one job after another into time-sharing systems that let many "
    "users work at once, and in 1969 Ken Thompson and Dennis Ritchie began "
    "Unix at Bell Labs, later rewriting it in their new language C so "
    "that it could move from one machine to another. The ARPANET linked "
    "its first computers the same year, and by the 1980s the TCP/IP "
    "protocols joined many networks into one internet. Tim Berners-Lee "
    "proposed the World Wide Web at CERN in 1989, with pages written in "
    "HTML, addressed by URLs and fetched over HTTP, and graphical browsers "
    "soon brought it to millions of homes. Free and open-source software, "
    "from the GNU project to Linux, showed that programs written by "
    "volunteers around the world could run banks, phones and "
    "supercomputers. Search engines, online shops, social networks and "
    "smartphones with their app stores followed, and with them came "
    "questions of privacy, security and who controls information. Most "
    "recently, machine learning systems trained on large amounts of text "
    "and images have learned to translate, to answer questions and to "
    "write programs themselves. Summarize the main stages of this history "
    "in a few sentences:")

GEMMA_PROMPTS = [(n, t) for n, t in PROMPTS if n != "chatml"] + [
    ("window", WINDOW)]
WITH_LOGITS = ["english", "unicode", "window"]
SLIDING_WINDOW = 512
CLEAR_GAP = 1.5  # t_engine_gemma.c checks the tokens of these steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
        "parley/models/gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--out", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "../data/engine"))
    a = ap.parse_args()
    print("oracle: llama-cpp-python %s, numpy %s" %
          (llama_cpp_version(), np.__version__))
    # fp32 KV cache (llama.cpp's default is fp16), no flash attention
    llm = llama_cpp_setup().Llama(
        model_path=a.model, n_ctx=1024, logits_all=True, n_threads=2,
        n_batch=1024, verbose=False, type_k=0, type_v=0, flash_attn=False)
    lines = ["# Gemma 3 270M Q4_K_M: greedy continuations by "
             "llama-cpp-python %s (tests/oracles/gen_gemma.py)" %
             llama_cpp_version(),
             "# prompt NAME / ids N ... / gen N ... / gap N ... (llama.cpp's "
             "greedy tokens and top1-top2 logit gaps) / text JSON (the "
             "prompt); first-position logits "
             "of %s in gemma3_270m_llamacpp.logits" % " ".join(WITH_LOGITS)]
    firsts = {}
    for name, text in GEMMA_PROMPTS:
        ids, gen, gaps, firsts[name] = llama_greedy(llm, text, N_GEN)
        if name == "window" and len(ids) <= SLIDING_WINDOW:
            sys.exit("the window prompt has only %d tokens" % len(ids))
        print("%-8s %3d prompt tokens -> %r (%d steps of gap > %.1f)" % (
            name, len(ids),
            llm.detokenize(gen).decode("utf-8", "replace")[:48],
            sum(g > CLEAR_GAP for g in gaps), CLEAR_GAP))
        lines += golden_lines(name, ids, gen, gaps)
        lines.append("text " + json.dumps(text, ensure_ascii=False))
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "gemma3_270m.golden"), "w") as f:
        f.write("\n".join(lines) + "\n")
    np.stack([firsts[n] for n in WITH_LOGITS]).astype("<f2").tofile(
        os.path.join(a.out, "gemma3_270m_llamacpp.logits"))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Golden for tests/t_tui_gemma.sh: one chat turn with the real Gemma 3
270M (the base model, Q4_K_M, tests/fetch-gemma.sh) as llama.cpp
(llama-cpp-python, ggml's CPU kernels, the oracle) answers it.

The prompt is Gemma 3's built-in template (prompts/templates/gemma3.jinja,
the verbatim google/gemma-3-it template) rendered by jinja2 for a system
prompt and one user message, with bos_token "<bos>" and the generation
prompt; its ids are llama.cpp's tokenization of that text (special tokens
parsed, no second <bos>). llama.cpp's N_GEN greedy tokens follow, with its
top1 - top2 logit gap at each step. The base model's answer is not a good
one (llama.cpp's is the same); the test checks that parley's full-screen
UI sends this prompt and streams these tokens where the gap is clear.

Output (tests/data/engine/gemma3_270m_chat.golden), one item a line:
  system TEXT (JSON string)    user TEXT (JSON string)
  ids ID ...                   the prompt's ids
  gen ID HEX GAP               a generated token: id, its bytes (hex), gap

Usage: gen_gemma_chat.py [--model gemma-3-270m-q4_k_m.gguf] [--out DIR]
"""
import argparse
import json
import os
import sys

import jinja2
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_engine import llama_cpp_setup, llama_cpp_version  # noqa: E402

SYSTEM = "You are a helpful assistant."
USER = "Write one sentence about the sea."
N_GEN = 24


def render(top):
    with open(os.path.join(top, "prompts", "templates", "gemma3.jinja")) as f:
        src = f.read()
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(src).render(
        messages=[{"role": "system", "content": SYSTEM},
                  {"role": "user", "content": USER}],
        bos_token="<bos>", add_generation_prompt=True)


def main():
    top = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.expanduser(
        "~/.cache/parley/models/gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--out", default=os.path.join(top, "tests", "data",
                                                  "engine"))
    a = ap.parse_args()
    text = render(top)
    llm = llama_cpp_setup().Llama(
        model_path=a.model, n_ctx=1024, logits_all=True, n_threads=2,
        n_batch=1024, verbose=False, type_k=0, type_v=0, flash_attn=False)
    ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
    llm.reset()
    llm.eval(ids)
    lines = ["# gen_gemma_chat.py, llama-cpp-python %s: %s" %
             (llama_cpp_version(), os.path.basename(a.model)),
             "system " + json.dumps(SYSTEM), "user " + json.dumps(USER),
             "ids " + " ".join(str(i) for i in ids)]
    for _ in range(N_GEN):
        logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
        order = np.argsort(-logits, kind="stable")
        tok = int(order[0])
        gap = float(logits[order[0]] - logits[order[1]])
        piece = llm.detokenize([tok], special=True)
        lines.append("gen %d %s %.4f" % (tok, piece.hex() or "-", gap))
        if tok == llm.token_eos() or piece == b"<end_of_turn>":
            break
        llm.eval([tok])
    path = os.path.join(a.out, "gemma3_270m_chat.golden")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(path)


if __name__ == "__main__":
    main()

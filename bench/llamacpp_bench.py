#!/usr/bin/env python3
"""llama-cpp-python side of bench/cpu-vs-llamacpp.sh: prefill of a prompt and
N one-token greedy decode steps, timed like `parley generate` does.

Usage: llamacpp_bench.py MODEL PROMPT_FILE N_GEN N_THREADS
(CPU extra buffer types are off: with them this llama-cpp-python build
crashes on the Q4_1 model, see tests/oracles/gen_engine.py.)"""
import sys
import time

import numpy as np
import llama_cpp
import llama_cpp.llama_cpp as low

_orig = low.llama_model_default_params


def _params():
    p = _orig()
    p.use_extra_bufts = False
    return p


low.llama_model_default_params = _params

model, prompt_file, n_gen, n_threads = (sys.argv[1], sys.argv[2],
                                        int(sys.argv[3]), int(sys.argv[4]))
text = open(prompt_file, encoding="utf-8").read()
llm = llama_cpp.Llama(model_path=model, n_ctx=1024, n_batch=512,
                      n_threads=n_threads, n_threads_batch=n_threads,
                      verbose=False)
ids = llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)
t0 = time.perf_counter()
llm.eval(ids)
t1 = time.perf_counter()
for _ in range(n_gen - 1):
    tok = int(np.argmax(llm.scores[llm.n_tokens - 1]))
    llm.eval([tok])
t2 = time.perf_counter()
print("llama-cpp-python %s: prefill: %d tokens in %.3f s (%.1f tokens/s); "
      "decode: %d tokens in %.3f s (%.1f tokens/s); %d threads" % (
          llama_cpp.__version__, len(ids), t1 - t0, len(ids) / (t1 - t0),
          n_gen - 1, t2 - t1, (n_gen - 1) / (t2 - t1), n_threads))

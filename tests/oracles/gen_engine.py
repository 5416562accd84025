#!/usr/bin/env python3
"""Goldens for the CPU engine tests (tests/t_engine_smollm.c, t_engine_random.c).

Oracles (development only; CI reads the committed goldens):
  * llama-cpp-python (PyPI; builds llama.cpp for the CPU) for the real
    SmolLM2-135M-Instruct Q4_1 model: prompt token ids, 64 greedy tokens per
    prompt, the top-2 logit gap at every step, and the full logits at the
    first generated position; then the numpy float64 forward pass (exact
    activations) on the same tokens (teacher-forced): its argmax and top-2
    gap at every step and its first-position logits;
  * a numpy float64 forward pass written from Hugging Face's
    LlamaForCausalLM / Qwen2ForCausalLM (gen_engine_ref.py) for random-weight
    models written by parley-mkmodel; that reference is itself cross-checked
    against llama-cpp-python on random models of both architectures.

Usage: gen_engine.py --mkmodel BUILD/tests/parley-mkmodel [--model SMOLLM2.gguf]
                     [--shared ../shared] [--out tests/data/engine]
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_engine_ref import RefModel  # noqa: E402

LONG = (
    "The history of computing is a story of people trying to make machines "
    "do arithmetic faster and more reliably than clerks could. In the "
    "seventeenth century Blaise Pascal built a mechanical calculator to help "
    "his father, a tax collector, add long columns of numbers. Gottfried "
    "Wilhelm Leibniz improved on the design with a stepped drum that could "
    "multiply. Two centuries later Charles Babbage designed the Difference "
    "Engine to compute mathematical tables without human error, and then the "
    "Analytical Engine, a general-purpose machine with a store for numbers, "
    "a mill for operating on them, and punched cards borrowed from the "
    "Jacquard loom to hold its program. Ada Lovelace wrote notes on the "
    "Analytical Engine that include what many consider the first published "
    "algorithm intended for a machine, and she saw that such a machine could "
    "manipulate symbols of any kind, not only numbers. The engines were "
    "never finished in Babbage's lifetime. In the twentieth century, "
    "electromechanical relays and then vacuum tubes made automatic "
    "computation practical. During the Second World War, machines such as "
    "Colossus in Britain and ENIAC in the United States were built to break "
    "codes and compute firing tables. After the war, the stored-program "
    "idea, described in John von Neumann's report on the EDVAC, became the "
    "basis of nearly every computer that followed: instructions and data "
    "share one memory, and the machine fetches, decodes and executes "
    "instructions one after another. Transistors replaced vacuum tubes in "
    "the late 1950s, integrated circuits put many transistors on one chip in "
    "the 1960s, and the microprocessor put a whole central processing unit "
    "on a single chip in 1971. Personal computers, networks, and the web "
    "followed, and each step made computing cheaper, smaller and more "
    "widely available. Today a phone in a pocket holds more computing power "
    "than all the machines of 1960 together. Summarize the main stages of "
    "this history in a few sentences:")

PROMPTS = [
    ("english", "The quick brown fox jumps over the lazy dog. Once upon a "
                "time, in a small village by the sea,"),
    ("code", "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci "
             "number.\"\"\"\n"),
    ("chatml", "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
               "<|im_start|>user\nWhat is the capital of France? Answer in "
               "one sentence.<|im_end|>\n<|im_start|>assistant\n"),
    ("unicode", "日本語の文章: 東京は日本の首都です。Ünïcödé façade naïve "
                "café — «quotes» 🙂 Переведите:"),
    ("numbers", "1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610,"),
    ("long", LONG),
]
N_GEN = 64

# Random models: name -> parley-mkmodel options. Small shapes, every case
# of the issue: F32 / F16 / Q8_0 weights, qwen2 biases, uneven GQA (14/2,
# 6/2), tied and untied output, head_dim != n_embd / n_head, rope_freqs.
RANDOM = [
    ("llama_f32", "--arch llama --n-embd 64 --n-head 4 --n-head-kv 2 "
                  "--n-ff 96 --n-layer 2 --n-vocab 128 --type F32 "
                  "--rope-freqs --seed 11"),
    ("llama_f32_gqa7_tied", "--arch llama --n-embd 112 --n-head 14 "
                            "--n-head-kv 2 --n-ff 64 --n-layer 2 "
                            "--n-vocab 128 --type F32 --tied --seed 12"),
    ("qwen2_f32_gqa7", "--arch qwen2 --n-embd 112 --n-head 14 --n-head-kv 2 "
                       "--n-ff 64 --n-layer 2 --n-vocab 128 --type F32 "
                       "--rope-base 1000000 --seed 13"),
    ("qwen2_f32_hd32_tied", "--arch qwen2 --n-embd 64 --n-head 4 "
                            "--n-head-kv 1 --head-dim 32 --n-ff 96 "
                            "--n-layer 2 --n-vocab 128 --type F32 --tied "
                            "--seed 14"),
    ("llama_f16", "--arch llama --n-embd 64 --n-head 4 --n-head-kv 2 "
                  "--n-ff 96 --n-layer 2 --n-vocab 128 --type F16 --seed 15"),
    ("qwen2_f16", "--arch qwen2 --n-embd 96 --n-head 6 --n-head-kv 2 "
                  "--n-ff 64 --n-layer 2 --n-vocab 128 --type F16 --seed 16"),
    ("llama_q8_0", "--arch llama --n-embd 64 --n-head 4 --n-head-kv 2 "
                   "--n-ff 96 --n-layer 2 --n-vocab 128 --type Q8_0 "
                   "--seed 17"),
    ("qwen2_q8_0", "--arch qwen2 --n-embd 96 --n-head 6 --n-head-kv 2 "
                   "--n-ff 64 --n-layer 2 --n-vocab 128 --type Q8_0 "
                   "--embd-type F32 --seed 18"),
    # features of the model description (model.h) as the writer sets
    # them: linear RoPE scaling (partial rotation, --n-rot, has no
    # oracle: llama.cpp's llama and qwen2 graphs assert n_rot == head dim)
    ("llama_f32_rope_linear", "--arch llama --n-embd 64 --n-head 4 "
                              "--n-head-kv 2 --n-ff 96 --n-layer 2 "
                              "--n-vocab 128 --type F32 --rope-scaling "
                              "linear --rope-scale-factor 4 --seed 19"),
]
N_RANDOM_TOKENS = 32  # 16 prefill + 16 decode in the C test


def llama_cpp_setup():
    """Import llama_cpp with the CPU "extra buffer types" (weight repacking,
    AMX) turned off: with them, llama-cpp-python 0.3.36's build crashes in
    llama_decode on the Q4_1 model on the dev machine (segfault). The plain
    ggml CPU kernels remain the oracle."""
    import llama_cpp
    import llama_cpp.llama_cpp as low  # what llama_cpp.Llama calls
    orig = low.llama_model_default_params

    def params():
        p = orig()
        p.use_extra_bufts = False
        return p
    low.llama_model_default_params = params
    return llama_cpp


def llama_cpp_version():
    import llama_cpp
    return llama_cpp.__version__


def llama_greedy(llm, text, n_gen):
    """TEXT's ids (<bos> and special tokens as the model asks), llama.cpp's
    N_GEN greedy tokens after them, its top1 - top2 logit gap at each step
    and its logits (float32) at the first generated position."""
    ids = llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)
    llm.reset()
    llm.eval(ids)
    gen, gaps, first = [], [], None
    for step in range(n_gen):
        logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
        if step == 0:
            first = logits.copy()
        order = np.argsort(-logits, kind="stable")
        tok = int(order[0])
        gen.append(tok)
        gaps.append(float(logits[order[0]] - logits[order[1]]))
        llm.eval([tok])
    return ids, gen, gaps, first


def golden_lines(name, ids, gen, gaps):
    """A prompt's lines of a .golden file: prompt / ids / gen / gap."""
    return ["prompt " + name,
            "ids %d %s" % (len(ids), " ".join(map(str, ids))),
            "gen %d %s" % (len(gen), " ".join(map(str, gen))),
            "gap %d %s" % (len(gaps), " ".join("%.4f" % g for g in gaps))]


def smollm_goldens(model, out):
    Llama = llama_cpp_setup().Llama
    # fp32 KV cache (llama.cpp's default is fp16), no flash attention
    llm = Llama(model_path=model, n_ctx=1024, logits_all=True, n_threads=2,
                n_batch=512, verbose=False, type_k=0, type_v=0,
                flash_attn=False)
    lines = ["# SmolLM2-135M-Instruct Q4_1: greedy continuations by "
             "llama-cpp-python %s (tests/oracles/gen_engine.py)" %
             llama_cpp_version(),
             "# prompt NAME / ids N ... / gen N ... / gap N ... (llama.cpp's "
             "greedy tokens and top1-top2 logit gaps) / rtop N ... / rgap N "
             "... (numpy float64 reference, exact activations, teacher-"
             "forced on llama.cpp's tokens: argmax and gap per step) / "
             "lcpdev X (mean |llama.cpp - reference| of the first logits)"]
    firsts, ref_firsts = [], []
    # exact float64 forward pass (HF's definition on the dequantized
    # weights, no int8 rounding of activations)
    ref = RefModel(model, act_quant=False)
    for name, text in PROMPTS:
        ids, gen, gaps, first = llama_greedy(llm, text, N_GEN)
        firsts.append(first)
        # the numpy reference, teacher-forced on llama.cpp's tokens
        rl = ref.forward(ids + gen[:-1])[len(ids) - 1:]
        ref_firsts.append(rl[0].astype(np.float32))
        rtop = [int(np.argmax(r)) for r in rl]
        rgap = [float(np.sort(r)[-1] - np.sort(r)[-2]) for r in rl]
        lcp_dev = float(np.abs(firsts[-1] - rl[0]).mean())
        print("%-8s %3d prompt tokens -> %s (numpy ref agrees on %d/%d; "
              "llama.cpp first logits vs ref: mean |d| %.4f max %.4f)" % (
                  name, len(ids),
                  repr(llm.detokenize(gen).decode("utf-8", "replace")[:40]),
                  sum(a == b for a, b in zip(rtop, gen)), N_GEN, lcp_dev,
                  np.abs(firsts[-1] - rl[0]).max()))
        if name == "unicode":  # end-to-end golden for tests/t_generate.sh
            with open(os.path.join(out, "generate_unicode.prompt"), "w",
                      encoding="utf-8") as f:
                f.write(text)
            with open(os.path.join(out, "generate_unicode.txt"), "wb") as f:
                f.write(llm.detokenize(gen))
        lines += golden_lines(name, ids, gen, gaps)
        lines.append("rtop %d %s" % (len(rtop), " ".join(map(str, rtop))))
        lines.append("rgap %d %s" % (len(rgap),
                                     " ".join("%.4f" % g for g in rgap)))
        lines.append("lcpdev %.6f" % lcp_dev)
    with open(os.path.join(out, "smollm2.golden"), "w") as f:
        f.write("\n".join(lines) + "\n")
    np.stack(ref_firsts).astype("<f4").tofile(
        os.path.join(out, "smollm2.logits"))
    np.stack(firsts).astype("<f2").tofile(
        os.path.join(out, "smollm2_llamacpp.logits"))


def random_tokens(n_vocab, seed):
    return np.random.default_rng(seed).integers(0, n_vocab,
                                                N_RANDOM_TOKENS).tolist()


def random_goldens(mkmodel, out):
    for name, opts in RANDOM:
        path = os.path.join(out, name + ".gguf")
        subprocess.run([mkmodel, "-o", path] + opts.split(), check=True)
        m = RefModel(path, act_quant=True)
        toks = random_tokens(m.emb.shape[0], 1234)
        logits = m.forward(toks)
        with open(os.path.join(out, name + ".tokens"), "w") as f:
            f.write("%d %s\n" % (len(toks), " ".join(map(str, toks))))
        logits.astype("<f4").tofile(os.path.join(out, name + ".logits"))
        exact = RefModel(path).forward(toks)
        print("%-22s %6d bytes, logits scale %.3f, int8-activation effect "
              "%.2e" % (name, os.path.getsize(path), np.abs(logits).max(),
                        (np.abs(exact - logits).max(1) /
                         np.abs(exact).max(1)).max()))


def cross_check(mkmodel, shared):
    """numpy reference vs llama-cpp-python on random models (with a vocab)."""
    Llama = llama_cpp_setup().Llama
    vocab = os.path.join(shared, "testdata/vocab/ggml-vocab-llama-spm.gguf")
    worst = 0.0
    with tempfile.TemporaryDirectory() as d:
        for name, opts in [
                ("llama", "--arch llama --n-embd 64 --n-head 4 --n-head-kv 2 "
                          "--n-ff 96 --n-layer 2 --type F32 --rope-freqs"),
                ("llama_gqa7_tied", "--arch llama --n-embd 112 --n-head 14 "
                                    "--n-head-kv 2 --n-ff 64 --n-layer 2 "
                                    "--type F32 --tied"),
                ("qwen2_gqa7", "--arch qwen2 --n-embd 112 --n-head 14 "
                               "--n-head-kv 2 --n-ff 64 --n-layer 2 "
                               "--type F32"),
                ("llama_hd32", "--arch llama --n-embd 64 --n-head 4 "
                               "--n-head-kv 1 --head-dim 32 --n-ff 96 "
                               "--n-layer 2 --type F32"),
                ("llama_rope_linear", "--arch llama --n-embd 64 --n-head 4 "
                                      "--n-head-kv 2 --n-ff 96 --n-layer 2 "
                                      "--type F32 --rope-scaling linear "
                                      "--rope-scale-factor 4")]:
            path = os.path.join(d, name + ".gguf")
            subprocess.run([mkmodel, "-o", path, "--tokenizer-from", vocab,
                            "--seed", "5"] + opts.split(), check=True)
            m = RefModel(path)
            toks = random_tokens(m.emb.shape[0], 99)
            ref = m.forward(toks)
            # fp32 KV cache (llama.cpp's default is fp16)
            llm = Llama(model_path=path, n_ctx=64, logits_all=True,
                        n_threads=2, verbose=False, type_k=0, type_v=0)
            llm.eval(toks)
            got = np.array(llm.scores[:len(toks)], dtype=np.float64)
            rel = (np.abs(got - ref).max(axis=1) /
                   np.abs(ref).max(axis=1)).max()
            worst = max(worst, rel)
            print("cross-check %-16s numpy vs llama-cpp-python: max rel "
                  "err %.2e" % (name, rel))
    return worst


def oracle_args(ap):
    """The options every goldens script takes: --mkmodel, --out."""
    ap.add_argument("--mkmodel", required=True)
    ap.add_argument("--out", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "../data/engine"))


def oracle_start(a):
    """Name the oracle's versions; make the output folder."""
    print("oracle: llama-cpp-python %s, numpy %s" %
          (llama_cpp_version(), np.__version__))
    os.makedirs(a.out, exist_ok=True)


def main():
    ap = argparse.ArgumentParser()
    oracle_args(ap)
    ap.add_argument("--model", default=os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
        "parley/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--shared", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "../../../shared"))
    ap.add_argument("--skip-smollm", action="store_true")
    a = ap.parse_args()
    oracle_start(a)
    worst = cross_check(a.mkmodel, a.shared)
    if worst > 1e-4:
        sys.exit("numpy reference and llama-cpp-python disagree: %.2e" % worst)
    random_goldens(a.mkmodel, a.out)
    if not a.skip_smollm:
        smollm_goldens(a.model, a.out)


if __name__ == "__main__":
    main()

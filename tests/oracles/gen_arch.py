#!/usr/bin/env python3
"""Goldens for tests/t_engine_llamacpp.c: random-weight qwen3, qwen3moe,
gpt-oss, gemma3, qwen35, qwen35moe and gemma4 models written by parley's
writer, and llama.cpp's logits on them.

For each model of MODELS:
  * parley-mkmodel writes NAME.gguf (--no-vocab: llama.cpp wants a
    tokenizer key, and loads "none" with placeholder tokens);
  * llama-cpp-python (the oracle: ggml's CPU kernels, fp32 KV cache, no
    flash attention, every position's logits of one batch) evaluates
    random tokens: NAME.logits (float32 [T][n_vocab]) and NAME.tokens
    (line 1 "T ids...", line 2 "margin T ..." : llama.cpp's top1 - top2
    logit at each position, where the C test checks greedy tokens);
  * mixtures: NAME.route, the float64 pass's choice of experts per
    position and layer ("pos layer gap ids... weights..."; gap: the
    softmax probability of the k-th choice minus the next one's), and
    NAME.lroute, the choice of the pass with ggml's rounding (llama.cpp's);
  * the numpy float64 forward pass (gen_engine_ref.py, written from
    Hugging Face's modules) runs three ways: "exact" (float activations),
    "parley" (activations of Q8_0 products rounded as parley's quant.h:
    the arithmetic of parley's default CPU path, saved as NAME.ref.logits
    for the C test's tight check) and "ggml" (activations rounded as
    ggml's quantize_row_q8_0, GELU through ggml's fp16 table). Each is
    compared with llama.cpp: "ggml" agreeing to ~1e-6 shows that the rest
    is those two roundings, not a misread model;
  * ablations: the "parley" pass with one feature of the file dropped
    (the window, the pattern, a RoPE base or scale, a norm, a layer...):
    the NMSE each makes, to show the C test's bound catches each one.

NMSE of a position = sum (a - b)^2 / sum b^2 over the vocabulary; "rel" is
max |a - b| / max |b| of a position; both reported as the worst position.
For the recurrent models (qwen35*) also the worst NMSE of each 16
positions, as the state carries each position's error to the next.

Usage: gen_arch.py --mkmodel BUILD/tests/parley-mkmodel [--out DIR]
                   [--only NAME,NAME...]
"""
import argparse
import copy
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_engine import (llama_cpp_setup, oracle_args,  # noqa: E402
                        oracle_start)
from gen_engine_ref import RefModel  # noqa: E402

# name -> parley-mkmodel options, tokens. Small (a few hundred KB), peaked
# logits (--out-norm-scale where the LM head is not the N(0, 1)
# embedding), n_head * head_dim != n_embd, GQA, F32 and Q8_0.
MODELS = [
    ("qwen3_f32", "--arch qwen3 --n-embd 64 --n-head 4 --n-head-kv 2 "
                  "--head-dim 24 --n-ff 96 --n-layer 2 --n-vocab 128 "
                  "--type F32 --rope-base 1000000 --out-norm-scale 4 "
                  "--seed 21", 32),
    ("qwen3_q8_0_tied", "--arch qwen3 --n-embd 64 --n-head 4 --n-head-kv 1 "
                        "--head-dim 32 --n-ff 128 --n-layer 3 --n-vocab 128 "
                        "--type Q8_0 --tied --seed 22", 32),
    # window 8, every third layer global (0, 1 slide), the loader's
    # default sliding RoPE base (no key)
    ("gemma3_f32_swa", "--arch gemma3 --n-embd 64 --n-head 4 --n-head-kv 1 "
                       "--head-dim 32 --n-ff 64 --n-layer 3 --n-vocab 128 "
                       "--type F32 --sliding-window 8 "
                       "--sliding-window-pattern 3 --rope-base 1000000 "
                       "--out-norm-scale 4 --seed 23", 48),
    # the keys of the real Gemma 3 files: a window, no pattern (the
    # loader's 6: layers 0-4 slide, 5 is global), no sliding base
    ("gemma3_q8_0_swa", "--arch gemma3 --n-embd 64 --n-head 4 --n-head-kv 2 "
                        "--head-dim 32 --n-ff 128 --n-layer 6 --n-vocab 128 "
                        "--type Q8_0 --sliding-window 8 --rope-base 1000000 "
                        "--out-norm-scale 4 --seed 24", 48),
    # linear RoPE scaling (the global layer only), a sliding base key
    ("gemma3_f32_rope_linear", "--arch gemma3 --n-embd 64 --n-head 4 "
                               "--n-head-kv 1 --head-dim 32 --n-ff 64 "
                               "--n-layer 2 --n-vocab 128 --type F32 "
                               "--sliding-window 8 "
                               "--sliding-window-pattern 2 "
                               "--rope-base 1000000 --rope-base-swa 20000 "
                               "--rope-scaling linear "
                               "--rope-scale-factor 8 --out-norm-scale 4 "
                               "--seed 25", 48),
    # mixtures: 8 experts choose 3 (F32), 8 choose 2 (Q8_0 experts, the
    # F32 router llama.cpp's quantizer leaves); n_ff_exp != n_ff. Int8
    # activations make a router's logits move by ~1e-3 between correct
    # implementations, so a choice closer than that may go either way and
    # changes the logits by up to 1e-1 NMSE (the size of the ablations).
    # The Q8_0 model's seed (56, of 27..56 tried) is one whose jittered
    # passes below all route alike (smallest gap 1.3e-3): its bound then
    # measures the arithmetic, as for the dense models.
    ("qwen3moe_f32", "--arch qwen3moe --n-embd 64 --n-head 4 --n-head-kv 2 "
                     "--head-dim 16 --n-ff 96 --n-expert 8 "
                     "--n-expert-used 3 --n-ff-exp 32 --n-layer 2 "
                     "--n-vocab 128 --type F32 --out-norm-scale 4 "
                     "--seed 26", 48),
    ("qwen3moe_q8_0", "--arch qwen3moe --n-embd 64 --n-head 4 "
                      "--n-head-kv 1 --head-dim 32 --n-ff 64 --n-expert 8 "
                      "--n-expert-used 2 --n-ff-exp 32 --n-layer 3 "
                      "--n-vocab 128 --type Q8_0 --out-norm-scale 4 "
                      "--seed 56", 48),
    # gpt-oss: Q/K/V and output biases, sinks, layers 0, 2 sliding (window
    # 8, crossed by the 48 tokens), YaRN (factor 32 over an original
    # context of 16: positions past it), a biased router choosing 2 of 8
    # by their logits, biased experts, the clamped SwiGLU; F32 and Q8_0
    # (seed 30: 29's jittered passes route differently, as for qwen3moe)
    ("gpt_oss_f32", "--arch gpt-oss --n-embd 64 --n-head 4 --n-head-kv 2 "
                    "--head-dim 16 --n-ff 64 --n-expert 8 --n-expert-used 2 "
                    "--n-ff-exp 32 --n-layer 3 --n-vocab 128 --type F32 "
                    "--sliding-window 8 --rope-scaling yarn "
                    "--rope-scale-factor 32 --yarn-orig-ctx 16 "
                    "--rope-base 150000 --out-norm-scale 4 --seed 28", 48),
    ("gpt_oss_q8_0", "--arch gpt-oss --n-embd 64 --n-head 4 --n-head-kv 1 "
                     "--head-dim 32 --n-ff 64 --n-expert 8 --n-expert-used 2 "
                     "--n-ff-exp 32 --n-layer 2 --n-vocab 128 --type Q8_0 "
                     "--sliding-window 8 --rope-scaling yarn "
                     "--rope-scale-factor 32 --yarn-orig-ctx 16 "
                     "--rope-base 150000 --out-norm-scale 4 --seed 30", 48),
    # the i-quants and TQ types (issue 33), four a model: the layer
    # matrices, attn_v/ffn_down in the more-bits layers, the embedding
    # (a row lookup) and the LM head; rows of 256 (their blocks)
    ("qwen3_iq_a", "--arch qwen3 --n-embd 256 --n-head 4 --n-head-kv 2 "
                   "--head-dim 64 --n-ff 512 --n-layer 2 --n-vocab 128 "
                   "--type IQ4_XS --more-bits-type IQ4_NL --embd-type "
                   "IQ2_XXS --out-type IQ3_S --out-norm-scale 4 --seed 31",
     32),
    ("qwen3_iq_b", "--arch qwen3 --n-embd 256 --n-head 4 --n-head-kv 2 "
                   "--head-dim 64 --n-ff 512 --n-layer 2 --n-vocab 128 "
                   "--type IQ2_XS --more-bits-type IQ3_XXS --embd-type "
                   "IQ1_S --out-type IQ2_S --out-norm-scale 4 --seed 32",
     32),
    ("qwen3_iq_c", "--arch qwen3 --n-embd 256 --n-head 4 --n-head-kv 2 "
                   "--head-dim 64 --n-ff 512 --n-layer 2 --n-vocab 128 "
                   "--type IQ1_M --more-bits-type TQ1_0 --embd-type TQ2_0 "
                   "--out-type Q8_0 --out-norm-scale 4 --seed 33", 32),
    # Qwen3.5 (hybrid): Gated DeltaNet layers and gated full attention
    # (interval 2: layers 1, 3; 4: layer 3 only, as the real models),
    # H_v = 2 H_k (f32) and 3 H_k (q8_0) value heads, so that the value ->
    # key head map (h % H_k, llama.cpp's) matters; partial RoPE (8 or 16
    # of 32 dims; q8_0 writes its sections, f32 takes the default); 96
    # tokens for the state's error over positions; the q8_0 file has an
    # MTP block (blk.4, --nextn-layers 1) that is not run, and a tied head
    ("qwen35_f32", "--arch qwen35 --n-embd 64 --n-head 4 --n-head-kv 2 "
                   "--head-dim 32 --n-rot 8 --n-ff 96 --n-layer 4 "
                   "--full-attention-interval 2 --ssm-state-size 16 "
                   "--ssm-group-count 2 --ssm-time-step-rank 4 "
                   "--n-vocab 128 --type F32 --out-norm-scale 4 "
                   "--seed 40", 96),
    ("qwen35_q8_0", "--arch qwen35 --n-embd 64 --n-head 4 --n-head-kv 1 "
                    "--head-dim 32 --n-rot 16 --rope-sections 3,3,2,0 "
                    "--n-ff 128 --n-layer 4 --full-attention-interval 4 "
                    "--ssm-state-size 16 --ssm-group-count 2 "
                    "--ssm-time-step-rank 6 --n-vocab 128 --type Q8_0 "
                    "--tied --nextn-layers 1 --seed 41", 96),
    # 8 experts choose 3 beside the shared one (F32; seed 44: smallest
    # k-th/(k+1)-th gap 3.5e-4). Q8_0: a routing flip in a recurrent model
    # moves every later position's state, so a choice must hold over the
    # whole sequence: with 4 layers and 8 experts no seed of 60..75 routed
    # alike under the jitter below; 3 layers (0, 1 recurrent) choosing 2
    # of 4: of seeds 60..399, 89, 200, 356 and 384 route alike in the
    # parley pass, the ggml pass and 24 jittered ones (1e-6 and 1e-5
    # relative). Int8 rounding also decides the odd activation within
    # 1e-7 of a boundary by fp32 order, and the state carries such a flip
    # to every later position: the ggml pass of 89, 200 and 356 is 3e-5
    # to 3e-4 NMSE from llama.cpp from one on; 384's agrees to 5e-15. An
    # MTP block besides
    ("qwen35moe_f32", "--arch qwen35moe --n-embd 64 --n-head 4 "
                      "--n-head-kv 2 --head-dim 16 --n-rot 8 --n-ff 96 "
                      "--n-expert 8 --n-expert-used 3 --n-ff-exp 16 "
                      "--n-ff-shexp 32 --n-layer 4 "
                      "--full-attention-interval 2 --ssm-state-size 16 "
                      "--ssm-group-count 2 --ssm-time-step-rank 4 "
                      "--n-vocab 128 --type F32 --out-norm-scale 4 "
                      "--seed 44", 64),
    ("qwen35moe_q8_0", "--arch qwen35moe --n-embd 64 --n-head 4 "
                       "--n-head-kv 2 --head-dim 32 --n-rot 8 --n-ff 64 "
                       "--n-expert 4 --n-expert-used 2 --n-ff-exp 32 "
                       "--n-ff-shexp 64 --n-layer 3 "
                       "--full-attention-interval 3 --ssm-state-size 16 "
                       "--ssm-group-count 2 --ssm-time-step-rank 4 "
                       "--n-vocab 128 --type Q8_0 --out-norm-scale 4 "
                       "--nextn-layers 1 --seed 384", 64),
    # Gemma 4, three flavours, each F32 and Q8_0; 64 tokens cross the
    # window of 8; global layers of 32-dim heads, 1 KV head, 1/4 of their
    # pairs rotating (rope_freqs), sliding ones of 16-dim heads, 2 KV
    # heads; the 31B's keys-as-values (--attn-k-eq-v) on the dense and
    # mixture files; a softcap of 30 (the real models'), logits of std ~4.
    # Dense: 6 layers, 2 and 5 global, the last 3 read layers 1 (sliding)
    # and 2 (global)'s KV (--kv-shared-layers 3)
    ("gemma4_f32", "--arch gemma4 --n-embd 64 --n-head 4 --n-head-kv 1 "
                   "--n-head-kv-swa 2 --head-dim 32 --head-dim-swa 16 "
                   "--n-ff 96 --n-layer 6 --sliding-window 8 "
                   "--sliding-window-pattern 3 --attn-k-eq-v "
                   "--kv-shared-layers 3 --rope-base 1000000 "
                   "--final-logit-softcap 30 --n-vocab 128 --type F32 "
                   "--out-norm-scale 4 --seed 60", 64),
    ("gemma4_q8_0", "--arch gemma4 --n-embd 64 --n-head 4 --n-head-kv 1 "
                    "--n-head-kv-swa 2 --head-dim 32 --head-dim-swa 16 "
                    "--n-ff 96 --n-layer 6 --sliding-window 8 "
                    "--sliding-window-pattern 3 --attn-k-eq-v "
                    "--kv-shared-layers 3 --rope-base 1000000 "
                    "--final-logit-softcap 30 --n-vocab 128 --type Q8_0 "
                    "--out-norm-scale 4 --seed 63", 64),
    # the mixture (26B-A4B): 8 experts choose 2 beside the dense MLP,
    # router scale, per-expert scales; 3 layers, 2 global. The Q8_0
    # model's seed (66, of 64..93 tried) is the one whose exact, parley,
    # ggml and 8 jittered passes all route alike (smallest gap 7.4e-4)
    ("gemma4_moe_f32", "--arch gemma4 --n-embd 64 --n-head 4 --n-head-kv 1 "
                      "--n-head-kv-swa 2 --head-dim 32 --head-dim-swa 16 "
                      "--n-ff 64 --n-expert 8 --n-expert-used 2 "
                      "--n-ff-exp 16 --n-layer 3 --sliding-window 8 "
                      "--sliding-window-pattern 3 --attn-k-eq-v "
                      "--rope-base 1000000 --final-logit-softcap 30 "
                      "--n-vocab 128 --type F32 --out-norm-scale 4 "
                      "--seed 61", 64),
    ("gemma4_moe_q8_0", "--arch gemma4 --n-embd 64 --n-head 4 "
                       "--n-head-kv 1 --n-head-kv-swa 2 --head-dim 32 "
                       "--head-dim-swa 16 --n-ff 64 --n-expert 8 "
                       "--n-expert-used 2 --n-ff-exp 32 --n-layer 3 "
                       "--sliding-window 8 --sliding-window-pattern 3 "
                       "--attn-k-eq-v --rope-base 1000000 "
                       "--final-logit-softcap 30 --n-vocab 128 --type Q8_0 "
                       "--out-norm-scale 4 --seed 66", 64),
    # the E models: per-layer embeddings of 32, 5 layers (1, 3 global),
    # the last 3 sharing KV (layers 1 and 2) with a double-wide FFN (E2B)
    ("gemma4_e_f32", "--arch gemma4 --n-embd 64 --n-head 4 --n-head-kv 1 "
                    "--head-dim 32 --head-dim-swa 16 --n-ff 64 --n-layer 5 "
                    "--sliding-window 8 --sliding-window-pattern 2 "
                    "--kv-shared-layers 3 --double-wide-mlp "
                    "--n-embd-per-layer 32 --rope-base 1000000 "
                    "--final-logit-softcap 30 --n-vocab 128 --type F32 "
                    "--out-norm-scale 4 --seed 62", 64),
    ("gemma4_e_q8_0", "--arch gemma4 --n-embd 64 --n-head 4 --n-head-kv 1 "
                     "--head-dim 32 --head-dim-swa 16 --n-ff 64 "
                     "--n-layer 5 --sliding-window 8 "
                     "--sliding-window-pattern 2 --kv-shared-layers 3 "
                     "--double-wide-mlp --n-embd-per-layer 32 "
                     "--rope-base 1000000 --final-logit-softcap 30 "
                     "--n-vocab 128 --type Q8_0 --out-norm-scale 4 "
                     "--seed 65", 64),
]
CLEAR = 0.1  # the C test's greedy check: llama.cpp's top-2 margin above


def nmse(a, b):
    """Per position: sum (a - b)^2 / sum b^2."""
    return ((a - b) ** 2).sum(1) / (b ** 2).sum(1)


def rel(a, b):
    """Per position: max |a - b| / max |b|."""
    return np.abs(a - b).max(1) / np.abs(b).max(1)


def llama_logits(path, toks):
    """llama.cpp's logits of every position, one batch."""
    Llama = llama_cpp_setup().Llama
    llm = Llama(model_path=path, n_ctx=max(64, len(toks)), logits_all=True,
                n_threads=2, verbose=False, type_k=0, type_v=0,
                flash_attn=False)
    llm.eval(toks)
    return np.array(llm.scores[:len(toks)], dtype=np.float32)


def ablations(m):
    """(name, RefModel with that feature of the file dropped)."""
    if m.arch == "gemma4":
        return g4_ablations(m)
    out = []

    def variant(name, fn):
        v = copy.deepcopy(m)
        fn(v)
        out.append((name, v))

    if m.n_swa:
        variant("no window", lambda v: setattr(v, "n_swa", 0))
        variant("window+1", lambda v: setattr(v, "n_swa", m.n_swa + 1))
        variant("all layers slide",
                lambda v: setattr(v, "is_swa", [True] * m.n_layer))
        variant("sliding base = global base",
                lambda v: setattr(v, "base_swa", m.base))
        variant("sliding base 10000 -> 1e6" if m.base_swa == 10000 else
                "sliding base -> 10000",
                lambda v: setattr(v, "base_swa",
                                  1e6 if m.base_swa == 10000 else 10000.0))
    if m.pos_scale != 1.0:
        variant("no linear RoPE scaling", lambda v: setattr(v, "pos_scale",
                                                             1.0))
        variant("scaling on sliding layers too",
                lambda v: setattr(v, "swa_pos_scale", m.pos_scale))
    if m.layers[0]["q_norm"] is not None:
        variant("no q/k norm", lambda v: [L.update(q_norm=None)
                                          for L in v.layers])
    if m.layers[0]["post_attn"] is not None:
        variant("no post-attention norm", lambda v: [L.update(post_attn=None)
                                                     for L in v.layers])
        variant("no post-FFN norm", lambda v: [L.update(post_ffn=None)
                                               for L in v.layers])
    if m.embd_scale != 1.0:
        variant("no embedding scale", lambda v: setattr(v, "embd_scale", 1.0))
        variant("attention scale 1/sqrt(n_embd/n_head)",
                lambda v: setattr(v, "attn_div", np.sqrt(m.n_embd /
                                                         m.n_head)))
    if m.act == "gelu_tanh":
        variant("GELU-erf for GELU-tanh",
                lambda v: setattr(v, "act", "gelu_erf"))
    if m.n_expert:
        variant("chosen weights not renormalised",
                lambda v: setattr(v, "norm_topk", False))
        variant("one expert more",
                lambda v: setattr(v, "n_expert_used", m.n_expert_used + 1))
        variant("one expert less",
                lambda v: setattr(v, "n_expert_used", m.n_expert_used - 1))
    for il in range(m.n_layer):  # o = f = 0 (also after a post-norm)
        variant("without layer %d" % il,
                lambda v, il=il: v.layers[il].update(
                    o=0 * v.layers[il]["o"], down=0 * v.layers[il]["down"],
                    down_sh=None if v.layers[il].get("down_sh") is None
                    else 0 * v.layers[il]["down_sh"]))
    if m.hybrid:
        out += hybrid_ablations(m)
    if m.oss:
        variant("no attention sinks", lambda v: [L.update(sinks=None)
                                                 for L in v.layers])
        variant("no output bias", lambda v: [L.update(bo=None)
                                             for L in v.layers])
        variant("no router bias", lambda v: [L.update(router_b=None)
                                             for L in v.layers])
        variant("no expert biases", lambda v: [L.update(gate_b=None)
                                               for L in v.layers])
        variant("no YaRN", lambda v: setattr(v, "yarn", None))
        variant("sliding layers with base 10000",
                lambda v: setattr(v, "base_swa", 10000.0))
        variant("softmax, then top-k",
                lambda v: setattr(v, "topk_softmax", False))
    if m.n_expert:  # routing decided by the other end of the router
        variant("routing by the smallest logits",
                lambda v: [L.update(router=-L["router"]) for L in v.layers])
    return out


def g4_ablations(m):
    """gemma4's (name, RefModel with that feature dropped or changed)."""
    out = []

    def variant(name, fn):
        v = copy.deepcopy(m)
        fn(v)
        out.append((name, v))

    def each(**kw):
        return lambda v: [L.update(kw) for L in v.layers]

    variant("no window", lambda v: setattr(v, "n_swa", 0))
    variant("window+1", lambda v: setattr(v, "n_swa", m.n_swa + 1))
    variant("sliding base = global base",
            lambda v: setattr(v, "base_swa", m.base))
    variant("global base = sliding base",
            lambda v: setattr(v, "base", m.base_swa))
    variant("global layers rotate every pair (no rope_freqs)",
            lambda v: setattr(v, "freqs_on", "none"))
    variant("rope_freqs on sliding layers too",
            lambda v: setattr(v, "freqs_on", "all"))
    variant("no q norm", each(q_norm=None))
    variant("no k norm", lambda v: [L.update(k_norm=None) for L in v.layers
                                    if L["k_norm"] is not None])
    variant("no value norm", lambda v: setattr(v, "v_norm", False))
    if any(L["v"] is None and L["k"] is not None for L in m.layers):
        variant("K-as-V layers: V from the normed K",
                lambda v: setattr(v, "v_src", "normed_k"))
    variant("attention scale 1/sqrt(%d)" % m.hd_swa,
            lambda v: setattr(v, "attn_div", np.sqrt(m.hd_swa)))
    variant("no post-attention norm", each(post_attn=None))
    variant("no post-FFN norm", each(post_ffn=None))
    variant("no embedding scale", lambda v: setattr(v, "embd_scale", 1.0))
    variant("GELU-erf for GELU-tanh", lambda v: setattr(v, "act",
                                                         "gelu_erf"))
    variant("no layer output scales",
            lambda v: setattr(v, "out_scale_on", False))
    if m.softcap:
        variant("no final logit softcap", lambda v: setattr(v, "softcap",
                                                             0.0))
    shared = range(m.kv_from, m.n_layer)
    if any(m._g4_kv_source(il) != m.is_swa.index(m.is_swa[il])
           for il in shared):
        variant("shared layers read the first layer of their kind",
                lambda v: setattr(v, "kv_share", "first_of_kind"))
    if m.n_ple:
        variant("no per-layer embeddings",
                lambda v: setattr(v, "ple_on", False))
        variant("per-layer inputs without the token embedding",
                lambda v: setattr(v, "ple_tok", False))
        variant("per-layer inputs without the projection",
                lambda v: setattr(v, "ple_proj", False))
        variant("no per-layer post norm", each(post_norm=None))
    if m.n_expert:
        variant("router without its scale",
                lambda v: setattr(v, "router_scale_on", False))
        variant("no per-expert scales",
                lambda v: setattr(v, "expert_scale_on", False))
        variant("no dense MLP beside the experts",
                lambda v: setattr(v, "dense_mlp_on", False))
        variant("no experts", lambda v: [L.update(down_e=0 * L["down_e"])
                                         for L in v.layers])
        # (not renormalising the chosen weights scales a token's expert
        # sum, which post_ffw_norm_2 undoes: 1e-8, no ablation)
        variant("no post_ffw_norm_1/2", each(post1=None, post2=None))
        variant("one expert more",
                lambda v: setattr(v, "n_expert_used", m.n_expert_used + 1))
        variant("one expert less",
                lambda v: setattr(v, "n_expert_used", m.n_expert_used - 1))
        variant("routing by the smallest logits",
                lambda v: [L.update(router=-L["router"]) for L in v.layers])
    for il in range(m.n_layer):  # o = f = 0, no output scale
        def drop(v, il=il):
            L = v.layers[il]
            for k in ("o", "down", "down_e", "proj"):
                if L[k] is not None:
                    L[k] = 0 * L[k]
            L["out_scale"] = None
        variant("without layer %d" % il, drop)
    return out


def hybrid_ablations(m):
    """qwen35's (name, RefModel with that detail changed)."""
    out = []

    def variant(name, fn):
        v = copy.deepcopy(m)
        fn(v)
        out.append((name, v))

    if m.ssm_Hv != m.ssm_Hk:
        variant("value heads grouped: k head h // (H_v/H_k)",
                lambda v: setattr(v, "gdn_head_map", "group"))
    variant("HF's L2 norm x / sqrt(|x|^2 + eps)",
            lambda v: setattr(v, "gdn_l2_hf", True))
    variant("no causal conv", lambda v: setattr(v, "gdn_conv", False))
    variant("conv taps reversed", lambda v: [
        L.update(conv=L["conv"][:, ::-1].copy()) for L in v.layers
        if L.get("conv") is not None])
    variant("q not scaled by 1/sqrt(S)",
            lambda v: setattr(v, "gdn_qscale", False))
    variant("no decay (g = 0)", lambda v: setattr(v, "gdn_decay", False))
    variant("decay without dt bias", lambda v: [
        L.update(dt_bias=0 * L["dt_bias"]) for L in v.layers
        if L.get("dt_bias") is not None])
    variant("beta = 1/2 (no beta projection)", lambda v: [
        L.update(beta=0 * L["beta"]) for L in v.layers
        if L.get("beta") is not None])
    variant("no silu(z) output gate", lambda v: setattr(v, "z_gated", False))
    variant("no sigmoid attention gate",
            lambda v: setattr(v, "attn_gated", False))
    variant("no q/k norm (full attention)",
            lambda v: setattr(v, "attn_qk_norm", False))
    variant("RoPE over all %d head dims (not %d)" % (m.head_dim, m.n_rot),
            lambda v: setattr(v, "n_rot", m.head_dim))
    if m.layers[0].get("up_sh") is not None:
        variant("shared expert not gated",
                lambda v: setattr(v, "shexp_gated", False))
        variant("no shared expert", lambda v: [L.update(up_sh=None)
                                               for L in v.layers])
    return out


def _ceil(x, digits):
    """X rounded up to DIGITS significant digits."""
    e = 10.0 ** (np.floor(np.log10(x)) - digits + 1)
    return float("%.3g" % (np.ceil(x / e - 1e-9) * e))


class Jittered(RefModel):
    """The "parley" pass with each quantized product's input perturbed by
    relative noise of fp32 rounding size (1e-6, as accumulated over a few
    layers): another correct fp32 implementation of parley's arithmetic,
    whose int8 activations round differently here and there."""
    rng = None

    def _mm(self, x, w, quantized):
        if self.act_quant and quantized:
            x = x * (1 + 1e-6 * self.rng.standard_normal(x.shape))
        return RefModel._mm(self, x, w, quantized)


def one_model(mkmodel, out, name, opts, n_tok, rng):
    """Write NAME's files; returns (the C test's NMSE bound, its margin)."""
    path = os.path.join(out, name + ".gguf")
    subprocess.run([mkmodel, "-o", path, "--no-vocab"] + opts.split(),
                   check=True)
    exact = RefModel(path)
    toks = rng.integers(0, exact.emb.shape[0], n_tok).tolist()
    got = llama_logits(path, toks).astype(np.float64)
    top = np.sort(got, axis=1)
    margin = top[:, -1] - top[:, -2]
    ex = exact.forward(toks)
    resid = np.sqrt(((exact.hidden[-1] - exact.emb[toks] *
                      exact.embd_scale) ** 2).mean() /
                    (exact.hidden[-1] ** 2).mean())
    print("%s: %d bytes, %d tokens, logits std %.2f, the layers' part of "
          "the last residual %.2f" % (name, os.path.getsize(path), n_tok,
                                      got.std(), resid))
    if exact.n_expert:  # the smallest gap at the k-th choice
        print("  routing: %d choices, smallest k-th/(k+1)-th probability "
              "gap %.2e, median %.2e" % (
                  len(exact.route), min(r[4] for r in exact.route),
                  np.median([r[4] for r in exact.route])))
    for label, m in (("exact", exact),
                     ("parley", RefModel(path, act_quant=True)),
                     ("ggml", RefModel(path, ggml_q8=True, gelu_fp16=True))):
        r = ex if m is exact else m.forward(toks)
        if label == "parley":
            worst_nmse, worst_d = nmse(r, got).max(), np.abs(r - got).max()
        print("  numpy %-6s vs llama.cpp: max rel %.2e, max NMSE %.2e, "
              "max |d| %.2e, argmax agrees %d/%d" % (
                  label, rel(r, got).max(), nmse(r, got).max(),
                  np.abs(r - got).max(),
                  (r.argmax(1) == got.argmax(1)).sum(), n_tok))
        if exact.hybrid:  # the recurrent state's error over positions
            e = nmse(r, got)
            print("    max NMSE per 16 positions: " + " ".join(
                "%.1e" % e[i:i + 16].max() for i in range(0, n_tok, 16)))
    # parley's arithmetic, 8 perturbed runs: how far a correct parley
    # may be from llama.cpp
    for seed in range(8):
        j = Jittered(path, act_quant=True)
        j.rng = np.random.default_rng(seed)
        r = j.forward(toks)
        worst_nmse = max(worst_nmse, nmse(r, got).max())
        worst_d = max(worst_d, np.abs(r - got).max())
    bound = max(1e-10, _ceil(4 * worst_nmse, 1))
    clear = max(CLEAR, _ceil(2.5 * worst_d, 2))
    ok = margin > clear
    print("  the parley pass and 8 perturbed ones: max NMSE %.2e, "
          "max |d| %.3f -> NMSE bound %.0e, greedy checked where the "
          "margin > %.2g: %d/%d positions (margins: min %.3f, median "
          "%.2f)" % (worst_nmse, worst_d, bound, clear, ok.sum(), n_tok,
                     margin.min(), np.median(margin)))
    for label, v in ablations(RefModel(path)):
        r = v.forward(toks)
        print("  ablation %-38s NMSE vs exact: max %.0e; vs llama.cpp: "
              "median %.0e max %.0e" % (label, nmse(r, ex).max(),
                                        np.median(nmse(r, got)),
                                        nmse(r, got).max()))
    with open(os.path.join(out, name + ".tokens"), "w") as f:
        f.write("%d %s\n" % (n_tok, " ".join(map(str, toks))))
        f.write("margin %d %s\n" % (n_tok, " ".join("%.4f" % x
                                                    for x in margin)))
    if exact.n_expert:  # choices for the trace checks: the float64
        # pass's (exact_dots) and the one with ggml's rounding (llama.cpp's
        # choices: its logits agree with llama.cpp's to 1e-14)
        g = RefModel(path, ggml_q8=True, gelu_fp16=True)
        g.forward(toks)
        for ext, m in ((".route", exact), (".lroute", g)):
            with open(os.path.join(out, name + ext), "w") as f:
                for il, t, top, w, gap in m.route:
                    f.write("%d %d %.6e %s %s\n" % (
                        t, il, gap, " ".join(map(str, top)),
                        " ".join("%.6e" % x for x in w)))
    got.astype("<f4").tofile(os.path.join(out, name + ".logits"))
    ex.astype("<f4").tofile(os.path.join(out, name + ".ref.logits"))
    return bound, clear


def main():
    ap = argparse.ArgumentParser()
    oracle_args(ap)
    ap.add_argument("--only", help="comma-separated model names")
    a = ap.parse_args()
    oracle_start(a)
    summary = []
    for i, (name, opts, n_tok) in enumerate(MODELS):
        if a.only is None or name in a.only.split(","):
            summary.append((name,) + one_model(
                a.mkmodel, a.out, name, opts, n_tok,
                np.random.default_rng(2929 + i)))
    print("for t_engine_llamacpp.c's table (NMSE bound, greedy margin):")
    for name, bound, clear in summary:
        print('    {"%s", %.0e, %g},' % (name, bound, clear))


if __name__ == "__main__":
    main()

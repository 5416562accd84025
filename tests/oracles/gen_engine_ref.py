"""Independent float64 forward pass of llama / qwen2 / qwen3 / qwen3moe /
gemma3 / gpt-oss / qwen35 / qwen35moe / gemma4 GGUF models (numpy).

Written from Hugging Face transformers' LlamaForCausalLM / Qwen2ForCausalLM /
Qwen3ForCausalLM / Qwen3MoeForCausalLM / Gemma3ForCausalLM (modeling_*.py),
not from parley's C code:

  * weights are read with gguf-py and dequantized by gguf-py (F16, Q8_0, ...);
  * HF keeps Q/K rows in their original order and rotates the two HALVES of
    each head (rotate_half). llama.cpp's converter permutes the rows of the
    "llama" architecture's attn_q / attn_k (convert_hf_to_gguf.py
    LlamaModel.permute) so that llama.cpp can rotate adjacent pairs. This
    script undoes that permutation for llama and then follows HF exactly;
    qwen2 tensors are stored un-permuted and are used as they are;
  * rope_freqs.weight (llama 3 scaling) divides HF's inv_freq, which is how
    the converter derives it from HF's rope_scaling;
  * RMSNorm, SwiGLU MLP, GQA (repeat_kv), causal softmax attention, tied
    embeddings as in the HF modules;
  * qwen3: no biases, RMSNorm of each head of Q and K (q_norm, k_norm)
    before RoPE; gemma3 besides: embeddings times sqrt(n_embd), post-
    attention and post-FFN RMSNorms, GELU-tanh gated FFN, the query scaled
    by query_pre_attn_scalar**-0.5 (GGUF has no key: llama.cpp takes
    head_dim, and n_embd / n_head for the 62-layer 27B, and so does this),
    sliding-window layers (Gemma3's layer_types: every pattern-th layer
    global) that see the last n_swa positions and rotate with their own
    RoPE base and no scaling (rope_local_base_freq). Gemma's RMSNorm
    multiplies by (1 + w); GGUF files store 1 + w (the converter adds it),
    so here, as for llama, the norm is x * w.
  * qwen35 / qwen35moe (HF Qwen3_5ForCausalLM / Qwen3_5MoeForCausalLM, whose
    layers are Qwen3-Next's): layer i is full attention iff (i + 1) %
    full_attention_interval == 0, the others Gated DeltaNet (_gdn below);
    every FFN's norm is post_attention_norm; the MTP blocks
    (nextn_predict_layers, counted in block_count) are not run. Full
    attention is gated: attn_q gives per head head_dim values of q, then
    head_dim of a gate; q_norm/k_norm, partial NEOX RoPE over n_rot dims
    (HF's interleaved M-RoPE is plain RoPE for text positions: the three
    position ids are equal; llama.cpp's IMROPE agrees where the sections
    cover every rotated pair, which is checked), softmax attention, then
    o * sigmoid(gate) before attn_output. qwen35moe: qwen3moe's routing
    plus a shared expert, f += sigmoid(ffn_gate_inp_shexp . h) *
    mlp_shexp(h). Where HF and llama.cpp differ in a detail the file
    cannot settle, this follows llama.cpp (the oracle) and the switch
    names the alternative: the L2 norm x / max(|x|, eps) (HF: x /
    sqrt(|x|^2 + eps); gdn_l2_hf) and value head h reading key head
    h % H_k (GGUF stores the value heads tiled; HF's repeat_interleave
    reads h // (H_v / H_k) of its own order; gdn_head_map "group").
    Measured on llama-cpp-python 0.3.36 (its CPU GATED_DELTA_NET op), one
    batch of 40 tokens and the same tokens fed 7, 1, 1, 1, 5, 1, 3, 1...
    at a time: "tile" agrees to 1e-12 NMSE at every position, "group" is
    off by up to 1 from position 0 on (H_v = 4, H_k = 2).

  * gemma4 (HF Gemma4ForCausalLM's text model, as llama.cpp's
    src/models/gemma4.cpp computes it; _forward_g4 below): sliding and
    global layers (attention.sliding_window_pattern, one boolean a layer)
    of their own head dims (key_length_swa / key_length), KV heads
    (head_count_kv an array) and rotated dims (rope.dimension_count_swa /
    rope.dimension_count) and bases (freq_base_swa / freq_base); scores not
    scaled (HF's scaling = 1: Q and K are normed); V RMS-normed without a
    weight; a layer without attn_v uses K's projection, before k_norm, as
    V (attention_k_eq_v); global layers divide their frequencies by
    rope_freqs (1 for rotated pairs, 1e30 for the others: HF's
    proportional RoPE has inv_freq 0 there, llama.cpp rotates by ~1e-28);
    the last shared_kv_layers layers read an earlier layer's K and V;
    mixtures keep the dense MLP (post_ffw_norm_1) beside the experts
    (pre_ffw_norm_2 / post_ffw_norm_2), the router reading rmsnorm(x) /
    sqrt(n_embd) * ffn_gate_inp.scale, softmax, top k renormalised, each
    expert's output times ffn_down_exps.scale (HF's per_expert_scale
    times the weight: the same); the E models' per-layer inputs
    ((rmsnorm(per_layer_model_proj x0 / sqrt(n_embd)) +
    per_layer_token_embd[tok] sqrt(n_ple)) / sqrt(2)) gated in after the
    FFN, then layer_output_scale times the residual; final logits
    softcap * tanh(logits / softcap). Where llama.cpp and HF could differ:
    a shared layer reads layer F - 1 if global, F - 2 if sliding (F the
    first shared layer; HF: the last earlier layer of its kind), the same
    wherever layers F - 2, F - 1 are sliding, global (the writer refuses
    other files; the real E2B/E4B are so). The chosen weights'
    renormalisation cannot be seen (post_ffw_norm_2 undoes a token's common
    factor). Measured on llama-cpp-python 0.3.36: F32 files 1e-7 to 1e-6
    NMSE from this pass, 8e-10 to 6e-8 with ggml's fp16 GELU table
    (gelu_fp16, which FFN and per-layer gates use), medians 1e-13 to 1e-10;
    Q8_0 files 1e-14 with ggml's rounding (ggml_q8), but the mixture's
    from position 9 on (2.8e-4): an activation of position 9 lies 3 fp32
    ulps from an int8 rounding tie (2.3e-5 of a quant step), decided by
    fp32 order, and the global layer's cache carries it on.

Everything is computed in float64. With act_quant=True the activation
vector of every product with a Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 weight is first
rounded the way parley's quant.h and ggml's quantize_row_q8_0 define it
(blocks of 32, d = amax/127 in float32, q = round-half-away(x/d), x ~ d*q):
the arithmetic parley's default CPU path defines, so that the comparison
measures everything else at fp32-rounding precision.

Two switches reproduce ggml's CPU arithmetic instead, to explain where
llama-cpp-python differs from the exact pass: ggml_q8=True rounds
activations as ggml's quantize_row_q8_0 does (scale stored as fp16, round
half to even), gelu_fp16=True applies GELU as ggml's CPU GEGLU does (the
argument rounded to fp16, the value read from a table of fp16 results).
"""
import math

import numpy as np
import gguf


Q32 = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0")


def _act_quant(x, ggml=False):
    """x [T, n] -> activations as the int8 blocks of 32 represent them
    (parley's quant.h; ggml: ggml's quantize_row_q8_0)."""
    T, n = x.shape
    b = x.astype(np.float32).reshape(T, n // 32, 32)
    amax = np.abs(b).max(-1, keepdims=True)
    d = (amax / np.float32(127)).astype(np.float32)
    if ggml:  # id = 127/amax, round half to even, the fp16 scale
        with np.errstate(divide="ignore"):
            idv = np.where(amax != 0, np.float32(127) / amax,
                           np.float32(0)).astype(np.float32)
        q = np.clip(np.rint((b * idv).astype(np.float32)), -127, 127)
        d = d.astype(np.float16)
        return (q.astype(np.float64) * d.astype(np.float64)).reshape(T, n)
    with np.errstate(divide="ignore"):
        idv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    v = (b * idv).astype(np.float32)
    q = np.clip(np.sign(v) * np.floor(np.abs(v) + np.float32(0.5)), -127, 127)
    return (q.astype(np.float64) * d.astype(np.float64)).reshape(T, n)


def _gelu_tanh(x):
    """GELU, tanh approximation (HF's gelu_pytorch_tanh)."""
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) *
                                    (x + 0.044715 * x ** 3)))


def _gelu_ggml(x):
    """ggml's CPU GELU (GGML_GELU_FP16): the argument rounded to fp16, the
    value ggml_gelu_f32 computes in float32 rounded to fp16."""
    xf = x.astype(np.float32)
    h = xf.astype(np.float16).astype(np.float32)
    f32 = np.float32
    y = (f32(0.5) * h * (f32(1) + np.tanh(f32(0.7978845608028654) * h *
                                          (f32(1) + f32(0.044715) * h * h))))
    y = y.astype(np.float16).astype(np.float64)
    return np.where(xf <= -10, 0.0,
                    np.where(xf >= 10, xf.astype(np.float64), y))


def _arr(t):
    """Tensor as float64 numpy array in (rows, cols) = (ne1, ne0) order."""
    data = gguf.quants.dequantize(t.data, t.tensor_type)
    shape = [int(x) for x in reversed(t.shape)]
    return np.asarray(data, dtype=np.float64).reshape(shape)


def _field(r, key, default=None):
    f = r.fields.get(key)
    if f is None:
        return default
    v = f.parts[f.data[0]]
    if f.types[0] == gguf.GGUFValueType.STRING:
        return bytes(v).decode()
    return v[0].item()


def _field_list(r, key, n, default=None):
    """A per-layer key: an array of N values, or a scalar repeated."""
    f = r.fields.get(key)
    if f is None:
        return [default] * n
    vals = [f.parts[i][0].item() for i in f.data]
    if f.types[0] != gguf.GGUFValueType.ARRAY:
        return vals[:1] * n
    if len(vals) != n:
        raise ValueError("%s has %d values, not %d" % (key, len(vals), n))
    return vals


def _unpermute(w, n_head):
    """Inverse of convert_hf_to_gguf's permute(): GGUF llama rows -> HF rows.

    permute: w.reshape(n_head, 2, d // n_head // 2, n_in).swapaxes(1, 2)
    """
    d = w.shape[0]
    return (w.reshape(n_head, d // n_head // 2, 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


class RefModel:
    def __init__(self, path, act_quant=False, ggml_q8=False,
                 gelu_fp16=False):
        r = gguf.GGUFReader(path)
        self.arch = _field(r, "general.architecture")
        a = self.arch
        if a not in ("llama", "qwen2", "qwen3", "qwen3moe", "gemma3",
                     "gpt-oss", "qwen35", "qwen35moe", "gemma4"):
            raise ValueError("unsupported architecture " + a)
        self.hybrid = a in ("qwen35", "qwen35moe")
        self.oss = False
        self.act_quant = act_quant or ggml_q8
        self.ggml_q8 = ggml_q8
        self.gelu_fp16 = gelu_fp16
        if a == "gemma4":
            self._g4_init(r)
            return
        if _field(r, a + ".final_logit_softcapping") is not None:
            raise ValueError("final_logit_softcapping is not implemented")
        # MTP blocks (qwen35) come after the stack and are not run
        self.n_nextn = _field(r, a + ".nextn_predict_layers", 0)
        self.n_layer = _field(r, a + ".block_count") - self.n_nextn
        self.n_embd = _field(r, a + ".embedding_length")
        self.n_head = _field(r, a + ".attention.head_count")
        self.n_head_kv = _field(r, a + ".attention.head_count_kv", self.n_head)
        self.head_dim = _field(r, a + ".attention.key_length",
                               self.n_embd // self.n_head)
        self.n_rot = _field(r, a + ".rope.dimension_count", self.head_dim)
        self.base = _field(r, a + ".rope.freq_base", 10000.0)
        # HF's linear RoPE scaling divides the positions by the factor
        scaling = _field(r, a + ".rope.scaling.type", "none")
        if scaling not in ("none", "linear", "yarn"):
            raise ValueError("unsupported RoPE scaling " + scaling)
        self.pos_scale = (1.0 / _field(r, a + ".rope.scaling.factor", 1.0)
                          if scaling == "linear" else 1.0)
        # YaRN as ggml's rope_yarn computes it (llama.cpp, the oracle):
        # the ramp's ends floored/ceiled, cos/sin times 1 + 0.1 ln factor
        self.yarn = None
        if scaling == "yarn":
            self.yarn = dict(
                factor=_field(r, a + ".rope.scaling.factor"),
                orig=_field(r, a + ".rope.scaling.original_context_length",
                            _field(r, a + ".context_length", 4096)),
                beta_fast=32.0, beta_slow=1.0)
        oss = a == "gpt-oss"
        self.oss = oss
        self.eps = _field(r, a + ".attention.layer_norm_rms_epsilon")
        # gemma3: Gemma3TextScaledWordEmbedding, GELU-tanh, attention scale
        gemma = a == "gemma3"
        self.embd_scale = np.sqrt(self.n_embd) if gemma else 1.0
        self.act = "gelu_tanh" if gemma else "silu"  # "gelu_erf": tests
        self.attn_div = np.sqrt(
            self.n_embd // self.n_head if gemma and self.n_layer == 62
            else self.head_dim)
        # sliding-window layers (llama.cpp's keys and defaults)
        self.n_swa = _field(r, a + ".attention.sliding_window", 0)
        pattern = _field(r, a + ".attention.sliding_window_pattern",
                         2 if oss else 6)
        self.is_swa = [bool(self.n_swa) and i % pattern < pattern - 1
                       for i in range(self.n_layer)]
        # gpt-oss's sliding layers rotate as its global ones (llama.cpp)
        self.base_swa = _field(r, a + ".rope.freq_base_swa",
                               self.base if oss else 10000.0)
        self.swa_pos_scale = 1.0  # linear scaling is the global layers'
        # qwen3moe: Qwen3MoeSparseMoeBlock (softmax over the router's
        # logits, the top k, norm_topk_prob as llama.cpp always does)
        self.n_expert = _field(r, a + ".expert_count", 0)
        self.n_expert_used = _field(r, a + ".expert_used_count", 0)
        self.norm_topk = not oss  # gpt-oss: top-k logits, then softmax
        self.topk_softmax = oss
        T = {t.name: t for t in r.tensors}
        self.qtype = {n: t.tensor_type.name for n, t in T.items()}
        out_name = "output.weight" if "output.weight" in T else "token_embd.weight"
        self.out_q = self.qtype[out_name] in Q32
        self.emb = _arr(T["token_embd.weight"])
        self.out = _arr(T["output.weight"]) if "output.weight" in T else self.emb
        self.out_norm = _arr(T["output_norm.weight"]).reshape(-1)
        self.rope_freqs = (_arr(T["rope_freqs.weight"]).reshape(-1)
                           if "rope_freqs.weight" in T else None)
        self.layers = []
        if self.hybrid:
            self._hybrid_init(r, T)
        for i in range(0 if self.hybrid else self.n_layer):
            g = lambda n: _arr(T["blk.%d.%s" % (i, n)])
            ex = "_exps" if self.n_expert else ""
            L = dict(attn_norm=g("attn_norm.weight").reshape(-1),
                     q=g("attn_q.weight"), k=g("attn_k.weight"),
                     v=g("attn_v.weight"), o=g("attn_output.weight"),
                     ffn_norm=g("post_attention_norm.weight" if self.oss
                                else "ffn_norm.weight").reshape(-1),
                     gate=g("ffn_gate%s.weight" % ex),
                     up=g("ffn_up%s.weight" % ex),
                     down=g("ffn_down%s.weight" % ex),
                     router=(g("ffn_gate_inp.weight") if self.n_expert
                             else None))
            L["quant"] = {n: self.qtype["blk.%d.%s.weight" % (i, n2)] in Q32
                          for n, n2 in (("q", "attn_q"), ("k", "attn_k"),
                                        ("v", "attn_v"), ("o", "attn_output"),
                                        ("gate", "ffn_gate" + ex),
                                        ("up", "ffn_up" + ex),
                                        ("down", "ffn_down" + ex))}
            for b in ("q", "k", "v"):
                n = "blk.%d.attn_%s.bias" % (i, b)
                L["b" + b] = _arr(T[n]).reshape(-1) if n in T else None
            for k, n in (("q_norm", "attn_q_norm"),
                         ("k_norm", "attn_k_norm"),
                         ("post_attn", "post_attention_norm"),
                         ("post_ffn", "post_ffw_norm"),
                         ("sinks", "attn_sinks"), ("bo", "attn_output"),
                         ("router_b", "ffn_gate_inp"),
                         ("gate_b", "ffn_gate_exps"),
                         ("up_b", "ffn_up_exps"),
                         ("down_b", "ffn_down_exps")):
                if k == "post_attn" and self.oss:  # its FFN norm
                    L[k] = None
                    continue
                if k in ("bo",) or k.endswith("_b"):
                    n2 = "blk.%d.%s.bias" % (i, n)
                    L[k] = _arr(T[n2]) if n2 in T else None
                    if L[k] is not None and k in ("bo", "router_b"):
                        L[k] = L[k].reshape(-1)
                    continue
                n = "blk.%d.%s.weight" % (i, n)
                L[k] = _arr(T[n]).reshape(-1) if n in T else None
            if a == "llama":  # back to HF's row order
                L["q"] = _unpermute(L["q"], self.n_head)
                L["k"] = _unpermute(L["k"], self.n_head_kv)
                if L["bq"] is not None:
                    L["bq"] = _unpermute(L["bq"][:, None], self.n_head)[:, 0]
                    L["bk"] = _unpermute(L["bk"][:, None], self.n_head_kv)[:, 0]
            self.layers.append(L)

    def _mm(self, x, w, quantized):
        """x @ w.T, with x rounded as parley's int8 blocks if asked."""
        if self.act_quant and quantized:
            x = _act_quant(x, self.ggml_q8)
        return x @ w.T

    def _rms(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def _rope(self, x, pos, swa=False):
        """HF apply_rotary_pos_emb on x [T, H, hd] (first n_rot dims); a
        sliding layer's base is base_swa, unscaled."""
        d = self.n_rot
        base = self.base_swa if swa else self.base
        inv = 1.0 / (base ** (np.arange(0, d, 2, dtype=np.float64) / d))
        mscale = 1.0
        if self.yarn is not None:  # ggml_rope_yarn_corr_dims, rope_yarn
            y = self.yarn
            cd = lambda b: d * np.log(y["orig"] / (b * 2 * np.pi)) / (
                2 * np.log(base))
            lo = max(0.0, np.floor(cd(y["beta_fast"])))
            hi = min(d - 1.0, np.ceil(cd(y["beta_slow"])))
            i = np.arange(d // 2, dtype=np.float64)
            ramp = 1 - np.clip((i - lo) / max(0.001, hi - lo), 0, 1)
            fs = 1.0 / y["factor"]
            inv = inv * (fs * (1 - ramp) + ramp)
            mscale = 1.0 + 0.1 * np.log(y["factor"])
        if self.rope_freqs is not None:
            inv = inv / self.rope_freqs
        ang = np.outer(np.asarray(pos, dtype=np.float64) *
                       (self.swa_pos_scale if swa else self.pos_scale),
                       inv)                           # [T, d/2]
        emb = np.concatenate([ang, ang], axis=-1)     # HF: cat(freqs, freqs)
        cos = np.cos(emb)[:, None, :] * mscale
        sin = np.sin(emb)[:, None, :] * mscale
        xr = x[..., :d]
        half = np.concatenate([-xr[..., d // 2:], xr[..., :d // 2]], axis=-1)
        out = x.copy()
        out[..., :d] = xr * cos + half * sin
        return out

    def _mlp(self, h, gate, up, down, Q, b=None):
        """down(act(gate h) * up h) of h [T, n_embd] (B: the biases of
        gate, up and down, gpt-oss)."""
        g = self._mm(h, gate, Q["gate"])
        u = self._mm(h, up, Q["up"])
        if b is not None:
            g, u = g + b[0], u + b[1]
        if self.oss:  # GptOssExperts: clamped, alpha 1.702, (up + 1)
            g = np.minimum(g, 7.0)
            u = np.clip(u, -7.0, 7.0)
            o = self._mm(g / (1.0 + np.exp(-1.702 * g)) * (u + 1.0), down,
                         Q["down"])
            return o if b is None else o + b[2]
        if self.act == "silu":
            act = g / (1.0 + np.exp(-g))
        elif self.act == "gelu_erf":
            act = 0.5 * g * (1.0 + np.vectorize(math.erf)(g / np.sqrt(2)))
        else:
            act = _gelu_ggml(g) if self.gelu_fp16 else _gelu_tanh(g)
        return self._mm(act * u, down, Q["down"])

    def _moe(self, h, L):
        """Qwen3MoeSparseMoeBlock: each token's top-k experts by the
        softmax of the (F32) router's logits, their weights renormalised,
        the weighted sum of their MLPs. self.route records the choices
        and the probability gap between the k-th and the next expert."""
        logits = h @ L["router"].T
        if L["router_b"] is not None:
            logits = logits + L["router_b"]
        if self.topk_softmax:  # the choice on the logits themselves
            p = logits
        else:
            p = np.exp(logits - logits.max(-1, keepdims=True))
            p /= p.sum(-1, keepdims=True)
        k = self.n_expert_used
        f = np.zeros_like(h)
        for t in range(h.shape[0]):
            top = np.argsort(-p[t], kind="stable")[:k]
            w = p[t, top]
            if self.topk_softmax:
                w = np.exp(w - w.max())
                w = w / w.sum()
            if self.norm_topk:
                w = w / w.sum()
            srt = np.sort(p[t])[::-1]
            self.route.append((self._il, t, top.tolist(), w.tolist(),
                               srt[k - 1] - srt[k] if k < len(srt)
                               else 1.0))
            for j, e in enumerate(top):
                b = None if L["gate_b"] is None else (
                    L["gate_b"][e], L["up_b"][e], L["down_b"][e])
                f[t] += w[j] * self._mlp(h[t:t + 1], L["gate"][e],
                                         L["up"][e], L["down"][e],
                                         L["quant"], b)[0]
        return f

    def forward(self, tokens):
        """Logits [T, n_vocab] of every position for tokens at 0..T-1."""
        if self.hybrid:
            return self._forward_hybrid(tokens)
        if self.arch == "gemma4":
            return self._forward_g4(tokens)
        T = len(tokens)
        hd, H, KV = self.head_dim, self.n_head, self.n_head_kv
        pos = np.arange(T, dtype=np.float64)
        x = self.emb[np.asarray(tokens)] * self.embd_scale
        mask = np.triu(np.full((T, T), -np.inf), 1)
        # sliding layers: p sees p' when p - p' < n_swa
        swa_mask = mask + np.tril(np.full((T, T), -np.inf), -self.n_swa) \
            if self.n_swa else mask
        self.hidden = []
        self.route = []  # mixtures: (layer, position, experts, weights, gap)
        for il, L in enumerate(self.layers):
            self._il = il
            swa = self.is_swa[il]
            h = self._rms(x, L["attn_norm"])
            Q = L["quant"]
            q = self._mm(h, L["q"], Q["q"])
            k = self._mm(h, L["k"], Q["k"])
            v = self._mm(h, L["v"], Q["v"])
            if L["bq"] is not None:
                q, k, v = q + L["bq"], k + L["bk"], v + L["bv"]
            q, k = q.reshape(T, H, hd), k.reshape(T, KV, hd)
            if L["q_norm"] is not None:  # per head, before RoPE
                q, k = self._rms(q, L["q_norm"]), self._rms(k, L["k_norm"])
            q = self._rope(q, pos, swa)
            k = self._rope(k, pos, swa)
            v = v.reshape(T, KV, hd)
            rep = H // KV                                  # repeat_kv
            k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
            s = (np.einsum("thd,shd->hts", q, k) / self.attn_div +
                 (swa_mask if swa else mask))
            if L["sinks"] is not None:  # GptOssAttention: a logit per head
                sk = L["sinks"].reshape(-1)[:, None, None] * np.ones(
                    (1, T, 1))
                m = np.maximum(s.max(-1, keepdims=True), sk)
                e = np.exp(s - m)
                s = e / (e.sum(-1, keepdims=True) + np.exp(sk - m))
            else:
                s = np.exp(s - s.max(-1, keepdims=True))
                s /= s.sum(-1, keepdims=True)
            a = np.einsum("hts,shd->thd", s, v).reshape(T, H * hd)
            o = self._mm(a, L["o"], Q["o"])
            if L["bo"] is not None:
                o = o + L["bo"]
            if L["post_attn"] is not None:
                o = self._rms(o, L["post_attn"])
            x = x + o
            h = self._rms(x, L["ffn_norm"])
            if L["router"] is not None:
                f = self._moe(h, L)
            else:
                f = self._mlp(h, L["gate"], L["up"], L["down"], Q)
            if L["post_ffn"] is not None:
                f = self._rms(f, L["post_ffn"])
            x = x + f
            self.hidden.append(x.copy())
        return self._mm(self._rms(x, self.out_norm), self.out, self.out_q)

    # ---- qwen35 / qwen35moe -------------------------------------------

    def _hybrid_init(self, r, T):
        """The layers of a qwen35 / qwen35moe file (self.layers), the Gated
        DeltaNet's shape and the switches the ablations turn."""
        a = self.arch
        self.d_conv = _field(r, a + ".ssm.conv_kernel")
        self.ssm_S = _field(r, a + ".ssm.state_size")
        self.ssm_Hk = _field(r, a + ".ssm.group_count")
        self.ssm_Hv = _field(r, a + ".ssm.time_step_rank")
        if _field(r, a + ".ssm.inner_size") != self.ssm_Hv * self.ssm_S:
            raise ValueError("ssm.inner_size is not time_step_rank * "
                             "state_size")
        interval = _field(r, a + ".full_attention_interval", 4)
        self.is_full = [(i + 1) % interval == 0 for i in range(self.n_layer)]
        f = r.fields[a + ".rope.dimension_sections"]
        sec = [int(f.parts[i][0]) for i in f.data]
        # ggml's IMROPE gives pair i (sector i % sum(sec)) the position
        # kind sector % 3 (t, h, w) while sector < 3 * sec[kind], else the
        # 4th kind, whose position is 0 for text: HF rotates that pair by
        # the position
        n = sum(sec)
        for i in range(self.n_rot // 2):
            sct = i % n
            if not sct < 3 * sec[sct % 3]:
                raise ValueError("rope sections %s leave pair %d to the "
                                 "4th position (llama.cpp rotates it by 0)"
                                 % (sec, i))
        self.rope_sections = sec
        # switches (the ablations): llama.cpp's choices
        self.gdn_head_map = "tile"  # v head h reads k head h % H_k
        self.gdn_l2_hf = False      # x / max(|x|, eps); True: HF's
        self.gdn_conv = True
        self.gdn_qscale = True
        self.gdn_decay = True
        self.attn_gated = True
        self.attn_qk_norm = True
        self.z_gated = True
        self.shexp_gated = True
        ex = "_exps" if self.n_expert else ""
        for i in range(self.n_layer):
            def g(n, i=i):
                n = "blk.%d.%s" % (i, n)
                return _arr(T[n]) if n in T else None

            def q(n, i=i):
                n = "blk.%d.%s.weight" % (i, n)
                return n in T and self.qtype[n] in Q32

            L = dict(attn_norm=g("attn_norm.weight").reshape(-1),
                     ffn_norm=g("post_attention_norm.weight").reshape(-1),
                     gate=g("ffn_gate%s.weight" % ex),
                     up=g("ffn_up%s.weight" % ex),
                     down=g("ffn_down%s.weight" % ex),
                     router=g("ffn_gate_inp.weight"), router_b=None,
                     gate_b=None, up_b=None, down_b=None, bq=None,
                     post_attn=None, post_ffn=None, sinks=None, bo=None,
                     q_norm=None, k_norm=None,
                     sh_inp=g("ffn_gate_inp_shexp.weight"),
                     gate_sh=g("ffn_gate_shexp.weight"),
                     up_sh=g("ffn_up_shexp.weight"),
                     down_sh=g("ffn_down_shexp.weight"))
            L["quant"] = {n: q(n2) for n, n2 in (
                ("q", "attn_q"), ("k", "attn_k"), ("v", "attn_v"),
                ("o", "attn_output" if self.is_full[i] else "ssm_out"),
                ("qkv", "attn_qkv"), ("z", "attn_gate"),
                ("beta", "ssm_beta"), ("alpha", "ssm_alpha"),
                ("gate", "ffn_gate" + ex), ("up", "ffn_up" + ex),
                ("down", "ffn_down" + ex))}
            L["quant_sh"] = {n: q("ffn_%s_shexp" % n)
                             for n in ("gate", "up", "down")}
            if L["sh_inp"] is not None:
                L["sh_inp"] = L["sh_inp"].reshape(-1)
            if self.is_full[i]:
                L.update(q=g("attn_q.weight"), k=g("attn_k.weight"),
                         v=g("attn_v.weight"), o=g("attn_output.weight"),
                         q_norm=g("attn_q_norm.weight").reshape(-1),
                         k_norm=g("attn_k_norm.weight").reshape(-1))
            else:
                L.update(qkv=g("attn_qkv.weight"), z=g("attn_gate.weight"),
                         conv=g("ssm_conv1d.weight"),  # [channels, d_conv]
                         dt_bias=g("ssm_dt.bias").reshape(-1),
                         ssm_a=g("ssm_a").reshape(-1),
                         beta=g("ssm_beta.weight"),
                         alpha=g("ssm_alpha.weight"),
                         ssm_norm=g("ssm_norm.weight").reshape(-1),
                         o=g("ssm_out.weight"))
            self.layers.append(L)

    def _l2(self, x):
        """L2 norm of the last axis: llama.cpp's x / max(|x|, eps), or
        HF's l2norm x / sqrt(|x|^2 + eps)."""
        ss = (x * x).sum(-1, keepdims=True)
        if self.gdn_l2_hf:
            return x / np.sqrt(ss + self.eps)
        return x / np.maximum(np.sqrt(ss), self.eps)

    def _gdn(self, h, L):
        """Gated DeltaNet (HF Qwen3NextGatedDeltaNet, the recurrent form of
        torch_recurrent_gated_delta_rule) of h [T, n_embd], from a zero
        state: c = silu(causal conv(attn_qkv h)) split [q | k | v] (H_k,
        H_k, H_v heads of S), q and k L2-normed, q / sqrt(S); beta =
        sigmoid(ssm_beta h), g = softplus(ssm_alpha h + dt_bias) * ssm_a;
        per value head, state [S key][S value]: state *= e^g, d = beta
        (v - state^T k), state += k d^T, o = state^T q; then o =
        rmsnorm(o) * ssm_norm * silu(attn_gate h), and ssm_out o."""
        T = h.shape[0]
        S, Hk, Hv, K = self.ssm_S, self.ssm_Hk, self.ssm_Hv, self.d_conv
        Q = L["quant"]
        mixed = self._mm(h, L["qkv"], Q["qkv"])        # [T, (2Hk + Hv) S]
        z = self._mm(h, L["z"], Q["z"]).reshape(T, Hv, S)
        beta = 1.0 / (1.0 + np.exp(-self._mm(h, L["beta"], Q["beta"])))
        a = self._mm(h, L["alpha"], Q["alpha"]) + L["dt_bias"]
        sp = np.where(a > 20, a, np.log1p(np.exp(np.minimum(a, 20))))
        g = sp * L["ssm_a"] if self.gdn_decay else 0 * sp  # [T, Hv], < 0
        # causal depthwise conv over time (K - 1 zeros before position 0),
        # tap 0 on the oldest input, then SiLU
        if self.gdn_conv:
            xp = np.concatenate([np.zeros((K - 1, mixed.shape[1])), mixed])
            c = sum(xp[i:i + T] * L["conv"][:, i] for i in range(K))
        else:
            c = mixed
        c = c / (1.0 + np.exp(-c))
        q = self._l2(c[:, :Hk * S].reshape(T, Hk, S))
        k = self._l2(c[:, Hk * S:2 * Hk * S].reshape(T, Hk, S))
        v = c[:, 2 * Hk * S:].reshape(T, Hv, S)
        if self.gdn_qscale:
            q = q / np.sqrt(S)
        hv = np.arange(Hv)
        kh = hv % Hk if self.gdn_head_map == "tile" else hv // (Hv // Hk)
        q, k = q[:, kh], k[:, kh]                      # [T, Hv, S]
        st = np.zeros((Hv, S, S))                      # [head, key, value]
        o = np.empty((T, Hv, S))
        for t in range(T):
            st *= np.exp(g[t])[:, None, None]
            d = beta[t][:, None] * (v[t] - np.einsum("hkv,hk->hv", st, k[t]))
            st += k[t][:, :, None] * d[:, None, :]
            o[t] = np.einsum("hkv,hk->hv", st, q[t])
        o = self._rms(o, L["ssm_norm"])
        if self.z_gated:
            o = o * (z / (1.0 + np.exp(-z)))
        return self._mm(o.reshape(T, Hv * S), L["o"], Q["o"])

    def _gated_attn(self, h, L, pos, mask):
        """Qwen3-Next's gated attention of h [T, n_embd]."""
        T = h.shape[0]
        hd, H, KV = self.head_dim, self.n_head, self.n_head_kv
        Q = L["quant"]
        qg = self._mm(h, L["q"], Q["q"]).reshape(T, H, 2 * hd)
        q, gate = qg[..., :hd], qg[..., hd:].reshape(T, H * hd)
        k = self._mm(h, L["k"], Q["k"]).reshape(T, KV, hd)
        v = self._mm(h, L["v"], Q["v"]).reshape(T, KV, hd)
        if self.attn_qk_norm:
            q, k = self._rms(q, L["q_norm"]), self._rms(k, L["k_norm"])
        q, k = self._rope(q, pos), self._rope(k, pos)
        rep = H // KV                                   # repeat_kv
        k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
        s = np.einsum("thd,shd->hts", q, k) / np.sqrt(hd) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        a = np.einsum("hts,shd->thd", s, v).reshape(T, H * hd)
        if self.attn_gated:
            a = a / (1.0 + np.exp(-gate))
        return self._mm(a, L["o"], Q["o"])

    def _forward_hybrid(self, tokens):
        """forward() of qwen35 / qwen35moe."""
        T = len(tokens)
        pos = np.arange(T, dtype=np.float64)
        x = self.emb[np.asarray(tokens)]
        mask = np.triu(np.full((T, T), -np.inf), 1)
        self.hidden = []
        self.route = []
        for il, L in enumerate(self.layers):
            self._il = il
            h = self._rms(x, L["attn_norm"])
            if self.is_full[il]:
                x = x + self._gated_attn(h, L, pos, mask)
            else:
                x = x + self._gdn(h, L)
            h = self._rms(x, L["ffn_norm"])
            if L["router"] is not None:
                f = self._moe(h, L)
            else:
                f = self._mlp(h, L["gate"], L["up"], L["down"], L["quant"])
            if L["up_sh"] is not None:  # Qwen3NextSparseMoeBlock
                sh = self._mlp(h, L["gate_sh"], L["up_sh"], L["down_sh"],
                               L["quant_sh"])
                if self.shexp_gated:
                    sh = sh / (1.0 + np.exp(-(h @ L["sh_inp"])))[:, None]
                f = f + sh
            x = x + f
            self.hidden.append(x.copy())
        return self._mm(self._rms(x, self.out_norm), self.out, self.out_q)

    # ---- gemma4 ---------------------------------------------------------

    def _g4_init(self, r):
        """A gemma4 file's shape, tensors and the switches the ablations
        turn (each set to what llama.cpp does)."""
        a = self.arch
        L = self.n_layer = _field(r, a + ".block_count")
        self.n_nextn = 0
        self.n_embd = _field(r, a + ".embedding_length")
        self.n_heads = _field_list(r, a + ".attention.head_count", L)
        self.n_head = self.n_heads[0]
        self.n_heads_kv = _field_list(r, a + ".attention.head_count_kv", L,
                                      self.n_head)
        self.hd_full = _field(r, a + ".attention.key_length",
                              self.n_embd // self.n_head)
        self.hd_swa = _field(r, a + ".attention.key_length_swa",
                             self.hd_full)
        self.rot_full = _field(r, a + ".rope.dimension_count", self.hd_full)
        self.rot_swa = _field(r, a + ".rope.dimension_count_swa",
                              self.rot_full)
        self.head_dim = self.hd_full
        self.is_swa = [bool(x) for x in _field_list(
            r, a + ".attention.sliding_window_pattern", L)]
        self.n_swa = _field(r, a + ".attention.sliding_window")
        self.base = _field(r, a + ".rope.freq_base", 10000.0)
        self.base_swa = _field(r, a + ".rope.freq_base_swa", 10000.0)
        if _field(r, a + ".rope.scaling.type", "none") != "none":
            raise ValueError("gemma4 with RoPE scaling is not implemented")
        self.pos_scale = 1.0
        self.eps = _field(r, a + ".attention.layer_norm_rms_epsilon")
        self.kv_from = L - _field(r, a + ".attention.shared_kv_layers", 0)
        self.n_ple = _field(r, a + ".embedding_length_per_layer_input", 0)
        self.softcap = _field(r, a + ".final_logit_softcapping", 0.0)
        self.n_expert = _field(r, a + ".expert_count", 0)
        self.n_expert_used = _field(r, a + ".expert_used_count", 0)
        self.embd_scale = np.sqrt(self.n_embd)
        self.act = "gelu_tanh"
        # switches: llama.cpp's choices (the ablations turn them)
        self.attn_div = 1.0        # Gemma 4's scaling = 1 (Q, K normed)
        self.v_norm = True         # weightless RMSNorm of each V head
        self.v_src = "raw_k"       # K-as-V layers: k_proj before k_norm
        self.kv_share = "llama"    # first - 1 (global) / first - 2 (swa)
        self.freqs_on = "global"   # rope_freqs: global layers only
        self.ple_on = True
        self.ple_tok = True
        self.ple_proj = True
        self.out_scale_on = True
        self.router_scale_on = True
        self.expert_scale_on = True
        self.dense_mlp_on = True
        self.norm_topk = True
        self.topk_softmax = False
        T = {t.name: t for t in r.tensors}
        self.qtype = {n: t.tensor_type.name for n, t in T.items()}
        out_name = ("output.weight" if "output.weight" in T
                    else "token_embd.weight")
        self.out_q = self.qtype[out_name] in Q32
        self.emb = _arr(T["token_embd.weight"])
        self.out = _arr(T[out_name])
        self.out_norm = _arr(T["output_norm.weight"]).reshape(-1)
        self.rope_freqs = _arr(T["rope_freqs.weight"]).reshape(-1)
        if self.n_ple:
            self.ple_emb = _arr(T["per_layer_token_embd.weight"])
            self.ple_model_proj = _arr(T["per_layer_model_proj.weight"])
            self.ple_model_q = self.qtype["per_layer_model_proj.weight"] in Q32
            self.ple_norm = _arr(T["per_layer_proj_norm.weight"]).reshape(-1)
        self.layers = [self._g4_layer(T, i) for i in range(L)]

    def _g4_layer(self, T, i):
        """Layer I's tensors (None where the file has none)."""
        def g(n, flat=False):
            n = "blk.%d.%s" % (i, n)
            if n not in T:
                return None
            x = _arr(T[n])
            return x.reshape(-1) if flat else x

        def q(n):
            n = "blk.%d.%s.weight" % (i, n)
            return n in T and self.qtype[n] in Q32

        L = dict(attn_norm=g("attn_norm.weight", 1), q=g("attn_q.weight"),
                 k=g("attn_k.weight"), v=g("attn_v.weight"),
                 o=g("attn_output.weight"),
                 q_norm=g("attn_q_norm.weight", 1),
                 k_norm=g("attn_k_norm.weight", 1),
                 post_attn=g("post_attention_norm.weight", 1),
                 ffn_norm=g("ffn_norm.weight", 1),
                 gate=g("ffn_gate.weight"), up=g("ffn_up.weight"),
                 down=g("ffn_down.weight"),
                 post_ffn=g("post_ffw_norm.weight", 1),
                 router=g("ffn_gate_inp.weight"),
                 router_scale=g("ffn_gate_inp.scale", 1),
                 pre2=g("pre_ffw_norm_2.weight", 1),
                 post1=g("post_ffw_norm_1.weight", 1),
                 post2=g("post_ffw_norm_2.weight", 1),
                 gate_e=g("ffn_gate_exps.weight"),
                 up_e=g("ffn_up_exps.weight"),
                 down_e=g("ffn_down_exps.weight"),
                 exp_scale=g("ffn_down_exps.scale", 1),
                 inp_gate=g("inp_gate.weight"), proj=g("proj.weight"),
                 post_norm=g("post_norm.weight", 1),
                 out_scale=g("layer_output_scale.weight", 1))
        L["quant"] = {n: q(n2) for n, n2 in (
            ("q", "attn_q"), ("k", "attn_k"), ("v", "attn_v"),
            ("o", "attn_output"), ("gate", "ffn_gate"), ("up", "ffn_up"),
            ("down", "ffn_down"), ("inp_gate", "inp_gate"),
            ("proj", "proj"))}
        L["quant_e"] = {n: q("ffn_%s_exps" % n)
                        for n in ("gate", "up", "down")}
        return L

    def _g4_rope(self, x, pos, swa):
        """NEOX rotation of x [T, H, hd] over its first rot dims; a global
        layer's frequencies divided by rope_freqs (Gemma 4's proportional
        RoPE: factors 1 for the rotated pairs, 1e30 for the others)."""
        d = self.rot_swa if swa else self.rot_full
        base = self.base_swa if swa else self.base
        inv = 1.0 / (base ** (np.arange(0, d, 2, dtype=np.float64) / d))
        if self.freqs_on == "all" or (self.freqs_on == "global" and not swa):
            inv = inv / self.rope_freqs[:d // 2]
        ang = np.outer(pos, inv)
        cos = np.cos(np.concatenate([ang, ang], -1))[:, None, :]
        sin = np.sin(np.concatenate([ang, ang], -1))[:, None, :]
        xr = x[..., :d]
        half = np.concatenate([-xr[..., d // 2:], xr[..., :d // 2]], -1)
        out = x.copy()
        out[..., :d] = xr * cos + half * sin
        return out

    def _rms0(self, x):
        """RMSNorm without a weight."""
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps)

    def _norm(self, x, w):
        """RMSNorm of x times w; none where an ablation dropped w."""
        return x if w is None else self._rms(x, w)

    def _g4_kv(self, h, L, il, pos):
        """Layer IL's K, V [T, KV, hd] (rotated, normed)."""
        T = h.shape[0]
        hd = self.hd_swa if self.is_swa[il] else self.hd_full
        KV = self.n_heads_kv[il]
        kraw = self._mm(h, L["k"], L["quant"]["k"])
        vraw = (kraw if L["v"] is None
                else self._mm(h, L["v"], L["quant"]["v"]))
        k = self._norm(kraw.reshape(T, KV, hd), L["k_norm"])
        if L["v"] is None and self.v_src == "normed_k":
            vraw = k.reshape(T, KV * hd)
        v = vraw.reshape(T, KV, hd)
        if self.v_norm:
            v = self._rms0(v)
        return self._g4_rope(k, pos, self.is_swa[il]), v

    def _g4_kv_source(self, il):
        """The layer whose KV cache layer IL reads (llama.cpp's reuse rule:
        a shared layer reads first - 1 if global, first - 2 if sliding;
        "first_of_kind": the first layer of its kind, an ablation)."""
        if il < self.kv_from:
            return il
        if self.kv_share == "first_of_kind":
            return self.is_swa.index(self.is_swa[il])
        return self.kv_from - (2 if self.is_swa[il] else 1)

    def _g4_attn(self, h, L, il, pos, cache):
        """Gemma4Attention of h [T, n_embd] at layer IL."""
        T = h.shape[0]
        swa = self.is_swa[il]
        hd = self.hd_swa if swa else self.hd_full
        H = self.n_heads[il]
        q = self._mm(h, L["q"], L["quant"]["q"]).reshape(T, H, hd)
        q = self._g4_rope(self._norm(q, L["q_norm"]), pos, swa)
        if il < self.kv_from:
            cache[il] = self._g4_kv(h, L, il, pos)
        k, v = cache[self._g4_kv_source(il)]
        rep = H // k.shape[1]
        k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
        mask = np.triu(np.full((T, T), -np.inf), 1)
        if swa and self.n_swa:  # p sees p' when p - p' < n_swa
            mask = mask + np.tril(np.full((T, T), -np.inf), -self.n_swa)
        s = np.einsum("thd,shd->hts", q, k) / self.attn_div + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        a = np.einsum("hts,shd->thd", s, v).reshape(T, H * hd)
        return self._mm(a, L["o"], L["quant"]["o"])

    def _g4_moe(self, x, L):
        """Gemma4's experts beside the MLP: the router reads
        rmsnorm(x) / sqrt(n_embd) * scale (F32), softmax, top k,
        renormalised; each chosen expert (GELU-tanh gated) reads
        pre_ffw_norm_2(x) and its output is times its per-expert scale
        (llama.cpp's ffn_down_exps.scale)."""
        r = self._rms0(x) / np.sqrt(self.n_embd)
        if self.router_scale_on:
            r = r * L["router_scale"]
        logits = r @ L["router"].T
        p = np.exp(logits - logits.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        h = self._rms(x, L["pre2"])
        k = self.n_expert_used
        f = np.zeros_like(h)
        for t in range(h.shape[0]):
            top = np.argsort(-p[t], kind="stable")[:k]
            w = p[t, top] / (p[t, top].sum() if self.norm_topk else 1.0)
            srt = np.sort(p[t])[::-1]
            self.route.append((self._il, t, top.tolist(), w.tolist(),
                               srt[k - 1] - srt[k] if k < len(srt)
                               else 1.0))
            for j, e in enumerate(top):
                y = self._mlp(h[t:t + 1], L["gate_e"][e], L["up_e"][e],
                              L["down_e"][e], L["quant_e"])[0]
                if self.expert_scale_on and L["exp_scale"] is not None:
                    y = y * L["exp_scale"][e]
                f[t] += w[j] * y
        return self._norm(f, L["post2"])

    def _g4_ffn(self, x, L):
        """The FFN block of x [T, n_embd] before post_ffw_norm."""
        h = self._rms(x, L["ffn_norm"])
        f = self._mlp(h, L["gate"], L["up"], L["down"], L["quant"])
        if L["router"] is None:
            return f
        f = self._norm(f, L["post1"]) if self.dense_mlp_on else 0 * f
        return f + self._g4_moe(x, L)

    def _gelu(self, x):
        """GELU-tanh (ggml_gelu: the fp16 table with gelu_fp16)."""
        if self.act == "gelu_erf":
            return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / np.sqrt(2)))
        return _gelu_ggml(x) if self.gelu_fp16 else _gelu_tanh(x)

    def _g4_ple_inputs(self, x0, tokens):
        """Per-layer inputs [T, n_layer, n_ple] (Gemma 3n's
        project_per_layer_inputs): (rmsnorm(per_layer_model_proj x0 /
        sqrt(n_embd)) + per_layer_token_embd[tok] sqrt(n_ple)) / sqrt(2),
        x0 the scaled embedding."""
        T, N = x0.shape[0], self.n_ple
        p = self._mm(x0, self.ple_model_proj, self.ple_model_q)
        p = self._rms((p / np.sqrt(self.n_embd)).reshape(T, -1, N),
                      self.ple_norm)
        e = self.ple_emb[np.asarray(tokens)].reshape(T, -1, N) * np.sqrt(N)
        return ((p if self.ple_proj else 0) +
                (e if self.ple_tok else 0)) / np.sqrt(2.0)

    def _forward_g4(self, tokens):
        """forward() of gemma4."""
        T = len(tokens)
        pos = np.arange(T, dtype=np.float64)
        x = self.emb[np.asarray(tokens)] * self.embd_scale
        ple = self._g4_ple_inputs(x, tokens) if self.n_ple else None
        cache = {}
        self.hidden = []
        self.route = []
        for il, L in enumerate(self.layers):
            self._il = il
            o = self._g4_attn(self._rms(x, L["attn_norm"]), L, il, pos,
                              cache)
            x = x + self._norm(o, L["post_attn"])
            x = x + self._norm(self._g4_ffn(x, L), L["post_ffn"])
            if ple is not None and self.ple_on:
                g = self._gelu(self._mm(x, L["inp_gate"],
                                        L["quant"]["inp_gate"]))
                y = self._mm(g * ple[:, il], L["proj"], L["quant"]["proj"])
                x = x + self._norm(y, L["post_norm"])
            if L["out_scale"] is not None and self.out_scale_on:
                x = x * L["out_scale"][0]
            self.hidden.append(x.copy())
        out = self._mm(self._rms(x, self.out_norm), self.out, self.out_q)
        if self.softcap:
            out = self.softcap * np.tanh(out / self.softcap)
        return out

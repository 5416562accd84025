/*
 * model.h - a transformer described by its GGUF file: global parts, and
 * per layer an attention and an FFN descriptor with optional tensors.
 *
 * NOTES ON THE DESIGN
 *
 * A model is a description of features, not an architecture's name. Both
 * backends run one fixed recipe of optional steps over it (backend_cpu.c
 * cpu_layer, cuda/backend_cuda.cu cu_layer); a step whose tensor is NULL
 * (or whose number is 0) is off. model_archs[] in model.c is the only code
 * that knows architecture names: one row maps an architecture's GGUF keys
 * and tensor names onto these features. The recipe, with each feature's
 * formula (the ones marked [planned] are described here and refused at
 * load or open until a backend runs them, never run wrong; a backend
 * lists the ones it runs in engine_ops.features):
 *
 *   x = token_embd[tok]                                   fp32 residual
 *   x *= embd_scale                                   (gemma: sqrt(n_embd))
 *   per-layer inputs (ple_dim > 0, Gemma 4's E models: P = ple_dim,
 *   L = n_layer), from the scaled x above:
 *     e = ple_embd[tok] sqrt(P)                      [L][P]
 *     p = rmsnorm_P(ple_proj x / sqrt(n_embd)) * ple_proj_norm  [L][P]
 *     pl = (p + e) / sqrt(2)                 pl[il] is layer il's input
 *   for each layer, attention (struct model_attn):
 *     h = rmsnorm(x) * norm
 *     q = Wq h (+bq), k = Wk h (+bk), v = Wv h (+bv)
 *         no Wv: v = Wk h (keys as values)                    (gemma4)
 *     q, k = rmsnorm(per head) * q_norm, k_norm      q/k norm (qwen3, gemma)
 *     v = rmsnorm(per head), no weight                  v_norm (gemma4)
 *     rope(q, k, pos, ropes[rope])     NORM: adjacent pairs, NEOX: halves
 *     k, v into the layer's cache; a layer with kv_layer != itself
 *         (KV sharing, gemma4) computes neither and reads layer
 *         kv_layer's cache (an earlier layer of the same kind)
 *     s_ij = scale * q_i . k_j                 scale = 1/sqrt(head_dim_k)
 *     s_ij = softcap * tanh(s_ij / softcap)          [planned] softcap > 0
 *     j in 0..i (full), i-window < j <= i (sliding)     window (gemma3)
 *     p = softmax over j (and over sinks[h], a logit     sinks (gpt-oss)
 *         with no value)
 *     o = sum_j p_ij v_j
 *     o *= sigmoid(g) per head, g the second half of     gated (qwen35)
 *         each head's Wq rows ([q | g] per head)
 *     o = Wo o (+bo)                                     bo (gpt-oss)
 *     o = rmsnorm(o) * post_norm                          post_norm (gemma)
 *     x += o
 *   (head counts, head dims and the RoPE class may differ from layer to
 *   layer: gemma4's sliding and global layers, MODEL_FEAT_LAYER_SHAPES)
 *   or, in a recurrent layer (kind RECURRENT, struct model_ssm: Qwen3.5's
 *   Gated DeltaNet; H_k key heads, H_v value heads, S dims each):
 *     h = rmsnorm(x) * norm
 *     c = conv(Wqkv h): per channel the causal conv of the last d_conv
 *         inputs (earlier ones from the conv state) with its taps, SiLU
 *     q_j, k_j, v_h = heads of c (q at 0, k at H_k S, v at 2 H_k S)
 *     z = Wz h; beta = sigmoid(Wbeta h); g = softplus(Walpha h +
 *         dt_bias) * a                             (a < 0: a decay)
 *     per value head h, key head j = h % H_k, state S_h [S][S]:
 *       q = q_j / max(|q_j|, eps), k = k_j / max(|k_j|, eps)  (L2)
 *       S_h = e^g S_h; d = beta (v_h - S_h^T k); S_h += k d^T
 *       o_h = S_h^T q / sqrt(S)
 *       o_h = rmsnorm(o_h) * ssm_norm * silu(z_h)
 *     x += Wout o
 *   FFN (struct model_ffn):
 *     h = rmsnorm(x) * norm
 *     dense:   f = Wdown (act(Wgate h) * (Wup h))
 *              act: SiLU x/(1+e^-x); GELU-tanh (gemma)
 *                   0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3)));
 *                   clamped SwiGLU (gpt-oss) of g = Wgate h, u = Wup h:
 *                   g' = min(g, 7), g' / (1 + e^(-1.702 g')) *
 *                   (clamp(u, -7, 7) + 1)
 *     experts: router logits r = Wrouter h (+ router_b) (fp32 weights);
 *              SOFTMAX gating (qwen3moe): p = softmax(r) over all
 *              experts, the n_used largest p chosen, weight_j = p_j;
 *              TOPK_SOFTMAX gating (gpt-oss): the n_used largest r,
 *              weight_j = softmax over those r only;
 *              norm_w: weight_j /= max(sum of the chosen weights,
 *              2^-14); w_scale (when not 0 or 1): weight_j *= w_scale;
 *              f = sum over the chosen j, in the order of the choice
 *              (largest first), of weight_j * Wdown_e (act(Wgate_e h) *
 *              (Wup_e h)), e = the expert of choice j: the rows of
 *              expert e of the 3-D tensors (experts stacked); with
 *              expert biases (gpt-oss) Wgate_e h + gate_b[e], Wup_e h +
 *              up_b[e], Wdown_e (...) + down_b[e]
 *              per-expert output scales (gemma4): Wdown_e (...) *
 *              exp_scale[e], before the weight
 *     shared expert (qwen35moe): f += sigmoid(sh_inp . h) *
 *              Wsh_down (act(Wsh_gate h) * (Wsh_up h))
 *     a dense MLP beside the mixture (gemma4, exp_norm != NULL): two
 *              branches of the same x, each with its own norms:
 *              f1 = rmsnorm(Wsh_down (act(Wsh_gate h) * (Wsh_up h))) *
 *                   sh_post_norm                      (h as above)
 *              the experts take h2 = rmsnorm(x) * exp_norm, the router
 *              rmsnorm(x) / sqrt(n_embd) * router_scale (no weight);
 *              f2 = rmsnorm(experts' f) * exp_post_norm
 *              f = f1 + f2
 *     f = rmsnorm(f) * post_norm                          post_norm (gemma)
 *     x += f
 *   per-layer input (ple_dim > 0): x += rmsnorm(Wple_proj (gelu_tanh(
 *       Wple_gate x) * pl[il])) * ple_post_norm
 *   x *= out_scale                          out_scale != 0 (gemma4)
 *   logits = Wout (rmsnorm(x) * output_norm)   Wout = token_embd if tied
 *   logits = final_softcap * tanh(logits / final_softcap)
 *
 * RoPE classes. A layer names one of ropes[] (Gemma's local and global
 * layers rotate with different bases). A class is its style, rotated dims,
 * base, scaling (none; linear: angles divided by the factor; YaRN, below)
 * and optional per-pair divisors (rope_freqs.weight, llama 3.1+);
 * model.c computes its inverse frequencies once, for both backends:
 *   theta_i(pos) = pos * inv_freq[i],
 *   inv_freq[i] = base^(-2i/n_rot) * freq_scale / freq_factors[i]
 * YaRN (ggml's rope_yarn, as llama.cpp runs it): pair i mixes the scaled
 * and the unscaled frequency, inv_freq[i] = base^(-2i/n_rot) * (fs (1 -
 * ramp_i) + ramp_i), fs = 1 / factor, ramp_i = 1 - clamp((i - lo) / max(
 * 0.001, hi - lo), 0, 1), lo = max(0, floor(d(beta_fast))), hi = min(n_rot
 * - 1, ceil(d(beta_slow))), d(b) = n_rot ln(n_ctx_orig / (2 pi b)) / (2 ln
 * base); and cos, sin times mscale = attn_factor (1 + 0.1 ln factor).
 * RoPE style: Hugging Face's Llama rotates the halves of each head (NEOX);
 * llama.cpp's converter permutes the rows of Wq and Wk of "llama" models
 * so that the same rotation becomes one of adjacent pairs ("normal"
 * style); qwen2 weights are stored un-permuted (halves). The style is the
 * architecture row's.
 *
 * Caches. A layer's cache follows from its attention kind: full (K and V of
 * every position), sliding window (at least its window; engine.h says what
 * truncation needs), recurrent (the conv state, the last d_conv - 1 inputs
 * [d_conv - 1][conv_dim] oldest first, then the states S_h [H_v][S][S]
 * as S_h[i][j], i the value dim, j the key dim: restored from snapshots,
 * engine.h), shared (no cache of its own: it reads an earlier layer's,
 * attn.kv_layer). model_layer_cache() gives each layer's.
 *
 * Adding an architecture (what the next one needs, in order):
 *   1. A row in model_archs[] (model.c): its general.architecture name,
 *      RoPE style, FFN activation, the features its graph may have
 *      (MODEL_FEAT_*) and those every file of it must have. A file of it
 *      with a tensor of a feature the row lacks is refused by name.
 *   2. A feature the loader does not read yet: its bit in MODEL_FEAT_* and
 *      name (model.c model_feature_names), its formula in the recipe
 *      above, its keys and tensors read into the descriptors
 *      (model_describe_layer, model_load_layer; llama.cpp's names, from
 *      src/llama-arch.cpp in the tar of ../shared/peers), its tensor in
 *      model_feature_tensors so other architectures refuse it.
 *   3. The step in each backend's recipe (backend_cpu.c cpu_layer,
 *      cuda/backend_cuda.cu cu_layer_forward; on the GPU a fused kernel
 *      steps aside by a predicate such as cu_qkv_rope_fusable) and the bit
 *      in that backend's engine_ops.features. Until then engine_open
 *      refuses the model, naming the feature.
 *   4. Its parity model: a flag of the random-weight writer
 *      (ui/cmd_mkmodel.c), the float64 reference (tests/oracles/
 *      gen_engine_ref.py) cross-checked against llama-cpp-python, a golden
 *      for t_engine_random, the writer's flags in t_cuda_engine's list.
 *   5. A cache other than full (sliding window, recurrent): its kind in
 *      model_layer_cache, engine.h's truncation contract, both backends'
 *      kv_save/kv_load and the state records (engine.c).
 *
 * Lifetimes (STYLE.md habit 1): struct model_config is immutable after
 * model_load(); struct model_weights points into the GGUF mapping (read
 * only; the gguf_file must outlive the model; a split model's tensors
 * point into their shards' mappings, gguf_split.h) except the small 1-D
 * vectors (norms, biases, rope frequency factors) and the inverse
 * frequencies, which are fp32/fp64 copies owned by the model. Run state and
 * KV cache belong to a backend (engine.h), never to the model.
 *
 * Invariants after a successful model_load():
 *   1. Every tensor a layer's features require is present, of a type
 *      quant_can_compute() accepts, with exactly the shape given in the
 *      field comments below; an error names the first tensor that is not.
 *      A tensor of a feature the architecture's row does not have is
 *      refused by name.
 *   2. Per layer: n_head % n_head_kv == 0; its RoPE class's n_rot is even
 *      and <= head_dim_k; head_dim_k == head_dim_v (the attention here
 *      needs it). A layer reading another's cache (kv_layer != il) reads
 *      an earlier layer of the same kind, n_head_kv and head dims.
 *   3. All counts are positive and bounded (MODEL_MAX_* below), so products
 *      such as n_layer * n_ctx * n_head_kv * head_dim fit in int64_t.
 *   4. cfg.max_* are the largest of the layers' values (buffer sizes).
 */
#ifndef PARLEY_MODEL_H
#define PARLEY_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" { /* included by the CUDA backend */
#endif

struct gguf_file;

/* Limits that keep every size computation far from overflow. */
#define MODEL_MAX_LAYERS       1024
#define MODEL_MAX_EMBD         65536
#define MODEL_MAX_FF           262144
#define MODEL_MAX_HEADS        1024
#define MODEL_MAX_HEAD_DIM     1024
#define MODEL_MAX_VOCAB        4194304
#define MODEL_MAX_CTX          1048576
#define MODEL_MAX_ROPES        2    /* RoPE classes (gemma: local and global) */
#define MODEL_MAX_EXPERTS      1024 /* experts of a layer */
#define MODEL_MAX_EXPERTS_USED 64   /* chosen per token */

/* Features beyond the plain pre-norm decoder, one bit each: what a model
 * uses (model_features) and what a backend runs (engine_ops.features). */
enum model_feature {
	MODEL_FEAT_QKV_BIAS = 1u << 0,     /* bq, bk, bv */
	MODEL_FEAT_ROPE_FACTORS = 1u << 1, /* rope_freqs.weight */
	MODEL_FEAT_ROPE_LINEAR = 1u << 2,  /* linear RoPE scaling */
	MODEL_FEAT_ROPE_YARN = 1u << 3,    /* YaRN RoPE scaling */
	MODEL_FEAT_EMBD_SCALE = 1u << 4,   /* embeddings times a scale */
	MODEL_FEAT_FINAL_SOFTCAP = 1u << 5,
	MODEL_FEAT_QK_NORM = 1u << 6,      /* q/k RMSNorm per head */
	MODEL_FEAT_POST_NORMS = 1u << 7,   /* norms after attention / FFN */
	MODEL_FEAT_ATTN_SLIDING = 1u << 8, /* sliding-window layers */
	MODEL_FEAT_ATTN_SOFTCAP = 1u << 9,
	MODEL_FEAT_ATTN_SINKS = 1u << 10,
	MODEL_FEAT_ATTN_OUT_BIAS = 1u << 11, /* bo */
	MODEL_FEAT_RECURRENT = 1u << 12,     /* linear/recurrent layers */
	MODEL_FEAT_GELU_TANH = 1u << 13,     /* GELU-tanh-gated FFN */
	MODEL_FEAT_EXPERTS = 1u << 14,       /* mixture-of-experts FFN */
	MODEL_FEAT_MOE_BIASES = 1u << 15,    /* router and expert biases */
	MODEL_FEAT_SWIGLU_OAI = 1u << 16,    /* clamped SwiGLU (gpt-oss) */
	MODEL_FEAT_ATTN_GATE = 1u << 17,     /* attention output gate */
	MODEL_FEAT_SHARED_EXPERT = 1u << 18, /* a gated shared expert */
	/* gemma4 */
	MODEL_FEAT_LAYER_SHAPES = 1u << 19,   /* head counts, head dims, n_rot
	                                         or n_ff differ by layer */
	MODEL_FEAT_V_NORM = 1u << 20,         /* values RMS-normed, no weight */
	MODEL_FEAT_K_AS_V = 1u << 21,         /* no Wv: keys used as values */
	MODEL_FEAT_KV_SHARED = 1u << 22,      /* layers reading another's KV */
	MODEL_FEAT_MOE_DENSE = 1u << 23,      /* a dense MLP beside the mixture,
	                                         own norms, scaled router input */
	MODEL_FEAT_EXPERT_SCALES = 1u << 24,  /* per-expert output scales */
	MODEL_FEAT_PER_LAYER_EMBD = 1u << 25, /* per-layer token inputs */
	MODEL_FEAT_OUT_SCALE = 1u << 26,      /* layer output times a scalar */
	MODEL_FEAT_EXPERTS_MERGED = 1u << 27, /* gate and up experts stacked
	                                         in one tensor */
};
#define MODEL_FEAT_COUNT 28

/* Name of the single feature bit F ("sliding-window attention"), static;
 * "?" for anything else. */
const char *model_feature_name(uint32_t f);

/* The first feature of FEATS as a name (the one an error names), or
 * NULL when FEATS is 0. */
const char *model_feature_first(uint32_t feats);

enum model_rope_style {
	MODEL_ROPE_NORM, /* rotate adjacent pairs (x[2i], x[2i+1]) */
	MODEL_ROPE_NEOX, /* rotate halves (x[i], x[i + n_rot/2]) */
};

enum model_rope_scaling {
	MODEL_ROPE_SCALING_NONE,
	MODEL_ROPE_SCALING_LINEAR, /* angles / factor */
	MODEL_ROPE_SCALING_YARN,   /* [planned] */
};

/* A RoPE class: immutable after model_load(). */
struct model_rope {
	enum model_rope_style style;
	int32_t n_rot;                   /* rotated dims (even) */
	float freq_base;                 /* ARCH.rope.freq_base */
	enum model_rope_scaling scaling; /* ARCH.rope.scaling.type */
	float freq_scale;    /* 1 / ARCH.rope.scaling.factor (linear), else 1 */
	float *freq_factors; /* [n_rot / 2] divisors (rope_freqs), or NULL
	                        (owned) */
	double *inv_freq;    /* [n_rot / 2] angle per position (owned) */
	float mscale;        /* cos and sin times it (YaRN), else 1 */
};

enum model_attn_kind {
	MODEL_ATTN_FULL,      /* every earlier position */
	MODEL_ATTN_SLIDING,   /* the last `window` positions */
	MODEL_ATTN_RECURRENT, /* a recurrent state, no KV (struct model_ssm) */
};

enum model_ffn_kind {
	MODEL_FFN_DENSE,   /* one gated MLP */
	MODEL_FFN_EXPERTS, /* routed experts */
};

/* How a mixture's router turns its logits into the chosen experts and
 * their weights (the recipe above). */
enum model_moe_gating {
	MODEL_MOE_SOFTMAX,      /* softmax of all, then the top n_used */
	MODEL_MOE_TOPK_SOFTMAX, /* top n_used logits, softmax of those */
};

enum model_act {
	MODEL_ACT_SILU,       /* silu(gate) * up */
	MODEL_ACT_GELU_TANH,  /* gelu_tanh(gate) * up */
	MODEL_ACT_SWIGLU_OAI, /* g = min(gate, 7), u = clamp(up, -7, 7):
	                         g sigmoid(1.702 g) (u + 1) (gpt-oss) */
};

/* One weight matrix (or vector, or stack of matrices) as stored. */
struct model_tensor {
	const char *name; /* tensor name (points into the gguf_file) */
	uint32_t type;    /* ggml type id (qtype.h) */
	int64_t ne0;      /* elements per row (contiguous) */
	int64_t ne1;      /* rows of one matrix (1 for a vector) */
	int64_t ne2;      /* matrices (experts; 1 for a 2-D tensor) */
	size_t row_size;  /* bytes per row: quant_row_size(type, ne0) */
	const void *data; /* ne2 * ne1 rows of row_size bytes, into the
	                     mapping; NULL: the tensor is absent */
};

/* A layer's attention (W x means: row r of W dotted with x). */
struct model_attn {
	enum model_attn_kind kind;
	int32_t window;     /* sliding: positions attended, itself included */
	int32_t n_head;     /* query heads */
	int32_t n_head_kv;  /* key/value heads (n_head % n_head_kv == 0) */
	int32_t head_dim_k; /* dims of a query/key head */
	int32_t head_dim_v; /* dims of a value head */
	int32_t rope;       /* index into cfg.ropes */
	float scale;        /* of q . k: 1/sqrt(head_dim_k) unless the file
	                       says */
	float softcap;      /* of the scores; 0 = off */
	float *norm;        /* [n_embd] before (owned) */
	float *post_norm;   /* [n_embd] after, or NULL (owned) */
	float *q_norm;      /* [head_dim_k] per-head RMSNorm, or NULL */
	float *k_norm;      /* [head_dim_k] or NULL (owned) */
	struct model_tensor wq; /* [n_head * head_dim_k rows, n_embd] */
	struct model_tensor wk; /* [n_head_kv * head_dim_k rows, n_embd] */
	struct model_tensor wv; /* [n_head_kv * head_dim_v rows, n_embd] */
	struct model_tensor wo; /* [n_embd rows, n_head * head_dim_v] */
	float *bq;              /* [n_head * head_dim_k] or NULL (owned) */
	float *bk;              /* [n_head_kv * head_dim_k] or NULL (owned) */
	float *bv;              /* [n_head_kv * head_dim_v] or NULL (owned) */
	float *bo;              /* [n_embd] or NULL (owned) */
	float *sinks;           /* [n_head] a logit per head, or NULL */
	bool gated;       /* wq has 2 n_head * head_dim_k rows, [q | gate] per
	                     head; o *= sigmoid(gate) before Wo */
	bool v_norm;      /* v RMS-normed per head, no weight */
	int32_t kv_layer; /* the layer whose K/V cache it reads: itself, or
	                     an earlier one (KV sharing: then wk, wv, k_norm
	                     are absent and it writes no cache); wv absent
	                     in a layer of its own: v = Wk h */
};

/* A recurrent layer's Gated DeltaNet (attention kind RECURRENT: the
 * recipe above; its norm is model_attn's). */
struct model_ssm {
	int32_t n_k_heads; /* ARCH.ssm.group_count: query and key heads */
	int32_t n_v_heads; /* ARCH.ssm.time_step_rank: value heads (a
	                      multiple of n_k_heads) */
	int32_t head_dim;  /* ARCH.ssm.state_size: dims of every head */
	int32_t d_conv;    /* ARCH.ssm.conv_kernel: taps of the conv */
	int32_t conv_dim;  /* (2 n_k_heads + n_v_heads) head_dim channels */
	struct model_tensor wqkv;   /* attn_qkv [conv_dim rows, n_embd] */
	struct model_tensor wz;     /* attn_gate [n_v_heads * head_dim
	                               rows, n_embd] */
	struct model_tensor wbeta;  /* ssm_beta [n_v_heads rows, n_embd] */
	struct model_tensor walpha; /* ssm_alpha [n_v_heads rows, n_embd] */
	struct model_tensor wout;   /* ssm_out [n_embd rows, n_v_heads *
	                               head_dim] */
	float *conv;    /* [conv_dim][d_conv] taps, the oldest input's
	                   first (owned) */
	float *dt_bias; /* [n_v_heads] (owned) */
	float *a;       /* [n_v_heads] decay rates (-exp(A_log)) (owned) */
	float *norm;    /* [head_dim] of the output (owned) */
};

/* A layer's feed-forward block. */
struct model_ffn {
	enum model_ffn_kind kind;
	enum model_act act;       /* of the gate */
	int32_t n_ff;             /* hidden size (of one expert) */
	float *norm;              /* [n_embd] before (owned) */
	float *post_norm;         /* [n_embd] after, or NULL (owned) */
	struct model_tensor gate; /* [n_ff rows, n_embd] (x n_expert) */
	struct model_tensor up;   /* [n_ff rows, n_embd] (x n_expert) */
	struct model_tensor down; /* [n_embd rows, n_ff] (x n_expert) */
	/* experts (kind MODEL_FFN_EXPERTS): gate, up and down are stacks of
	   n_expert matrices (ne2) */
	int32_t n_expert;             /* 0 for a dense FFN */
	int32_t n_expert_used;        /* chosen per token, <= n_expert */
	enum model_moe_gating gating; /* of the router's logits */
	bool norm_w;                  /* chosen weights renormalised */
	float w_scale;                /* chosen weights times it (0, 1: off) */
	struct model_tensor router;   /* [n_expert rows, n_embd] */
	/* biases (MODEL_FEAT_MOE_BIASES), or NULL (owned) */
	float *router_b; /* [n_expert] added to the router's logits */
	float *gate_b;   /* [n_expert][n_ff] added to expert e's gate */
	float *up_b;     /* [n_expert][n_ff] to its up product */
	float *down_b;   /* [n_expert][n_embd] to its down product */
	/* a shared expert beside the mixture (MODEL_FEAT_SHARED_EXPERT),
	   else absent (data NULL) */
	struct model_tensor sh_gate; /* [n_ff_sh rows, n_embd] */
	struct model_tensor sh_up;   /* [n_ff_sh rows, n_embd] */
	struct model_tensor sh_down; /* [n_embd rows, n_ff_sh] */
	float *sh_inp;               /* [n_embd] its gate's weights, or NULL:
	                                ungated (owned) */
	/* a dense MLP beside the mixture (MODEL_FEAT_MOE_DENSE: sh_gate,
	   sh_up, sh_down are it, with act; sh_inp NULL), else NULL (owned) */
	float *sh_post_norm;  /* [n_embd] after the dense branch */
	float *exp_norm;      /* [n_embd] the experts' input norm */
	float *exp_post_norm; /* [n_embd] after the experts' sum */
	float *router_scale;  /* [n_embd] of the router's unweighted
	                         rmsnorm(x) / sqrt(n_embd) */
	float *exp_scale;     /* [n_expert] expert e's output times it, or
	                         NULL (owned; MODEL_FEAT_EXPERT_SCALES) */
	/* gate and up of every expert in one stack (MODEL_FEAT_EXPERTS_
	   MERGED; then gate and up are absent): [2 n_ff rows, n_embd] x
	   n_expert, gate rows first (model_expert_gate_up) */
	struct model_tensor gate_up;
};

/* Matrix E of the stack T (experts stacked along ne2) as a 2-D tensor. */
struct model_tensor model_expert(const struct model_tensor *t, int32_t e);

/* Expert E's gate and up matrices of F, whether stacked apart or merged
 * (gate_up). */
void model_expert_gate_up(const struct model_ffn *f, int32_t e,
                          struct model_tensor *gate, struct model_tensor *up);

/* The experts chosen for one token from its router logits R[n_expert]
 * (the recipe above): IDS[n_expert_used] (largest first, the lower index
 * first among equal values) and their weights W[n_expert_used]. SCRATCH
 * holds n_expert floats. One function, so that every backend that routes
 * on the host routes alike. */
void model_moe_route(const struct model_ffn *f, const float *r, float *scratch,
                     int32_t *ids, float *w);

/* model_moe_route, then the experts PINNED[n_expert_used] (another
 * engine's choice, which a reference follows so that a comparison
 * measures the arithmetic, not a near tie's flip) in IDS, weighted from
 * these logits as the recipe weighs a choice (an out-of-range id keeps
 * the own choice's). Returns what the pinned choice gives up: the sum of
 * the scores (softmax probabilities, or logits) of the own choice minus
 * the pinned one's, 0 when they are the same set. */
float model_moe_pin(const struct model_ffn *f, const float *r, float *scratch,
                    const int32_t *pinned, int32_t *ids, float *w);

/* The parameters of a layer's attention scores: one struct on every
 * attention path of both backends. */
struct model_attn_params {
	float scale;        /* of q . k */
	int32_t window;     /* sliding: positions attended; 0 = all earlier */
	float softcap;      /* of the scores; 0 = off */
	const float *sinks; /* [n_head] or NULL (host memory; a device
	                       backend substitutes its copy) */
};

/* A layer's per-layer input (cfg.ple_dim > 0: Gemma 4's E models). */
struct model_ple {
	struct model_tensor gate; /* inp_gate [ple_dim rows, n_embd] */
	struct model_tensor proj; /* proj [n_embd rows, ple_dim] */
	float *post_norm;         /* [n_embd] (owned) */
};

/* The weights of one block. */
struct model_layer {
	struct model_attn attn; /* (its norm only when recurrent) */
	struct model_ssm ssm;   /* attn.kind == MODEL_ATTN_RECURRENT */
	struct model_ffn ffn;
	struct model_ple ple; /* absent (data NULL) unless cfg.ple_dim */
	float out_scale;      /* x times it after the layer; 0: off */
};

/* What a layer's cache holds (engine.h: per-layer caches). */
enum model_cache_kind {
	MODEL_CACHE_FULL,      /* K, V of every position */
	MODEL_CACHE_WINDOW,    /* the last `window` positions are read (both
	                          backends keep every position so far) */
	MODEL_CACHE_RECURRENT, /* a state of fixed size (the caches note) */
	MODEL_CACHE_SHARED,    /* none: it reads layer `src`'s */
};

struct model_cache_desc {
	enum model_cache_kind kind;
	int32_t window;       /* WINDOW: positions that must be kept */
	int32_t k_dim;        /* floats of K per position: n_head_kv * hd_k */
	int32_t v_dim;        /* floats of V per position */
	int64_t conv_floats;  /* RECURRENT: (d_conv - 1) conv_dim */
	int64_t state_floats; /* RECURRENT: n_v_heads head_dim^2 */
	int32_t src;          /* SHARED: the layer whose cache it reads */
};

/* Global hyper-parameters: immutable after model_load(). */
struct model_config {
	const char *arch_name; /* general.architecture (static) */
	int32_t n_vocab;       /* rows of token_embd.weight */
	int32_t n_ctx_train;   /* ARCH.context_length */
	int32_t n_embd;        /* ARCH.embedding_length */
	int32_t n_layer;       /* ARCH.block_count */
	float rms_eps;         /* ARCH.attention.layer_norm_rms_epsilon */
	float embd_scale;      /* embeddings times this; 0 = off */
	float final_softcap;   /* of the logits; 0 = off */
	bool tied_output;      /* no output.weight: LM head = token_embd */
	int32_t n_ropes;       /* classes in ropes[] */
	struct model_rope ropes[MODEL_MAX_ROPES];
	/* the largest of the layers' values (buffer sizes) */
	int32_t max_n_head;      /* query heads */
	int32_t max_head_dim;    /* head_dim_k and head_dim_v */
	int32_t max_q_dim;       /* n_head * head_dim_k */
	int32_t max_o_dim;       /* n_head * head_dim_v */
	int32_t max_kv_dim_k;    /* n_head_kv * head_dim_k */
	int32_t max_kv_dim_v;    /* n_head_kv * head_dim_v */
	int32_t max_ff;          /* n_ff (of one expert) */
	int32_t max_expert;      /* n_expert (0: no mixture) */
	int32_t max_expert_used; /* n_expert_used */
	int32_t max_rot;         /* n_rot of the RoPE classes */
	int32_t max_conv_dim;    /* a recurrent layer's conv_dim */
	int32_t max_ssm_v;       /* its n_v_heads * head_dim */
	int32_t max_ssm_heads;   /* its n_v_heads */
	int32_t max_ff_sh;       /* a shared expert's n_ff_sh */
	int32_t n_recurrent;     /* recurrent layers */
	int32_t n_kv_shared;     /* layers reading another's cache */
	int32_t ple_dim;   /* ARCH.embedding_length_per_layer_input: per-layer
	                      inputs of this many dims (0: none) */
	int32_t n_nextn;   /* multi-token-prediction blocks after the
	                      layers (ARCH.nextn_predict_layers): in
	                      the file, not run */
	uint32_t features; /* MODEL_FEAT_* the model uses */
	int32_t n_vision_tensors; /* v.* and mm.* tensors: a vision tower
	                             the text model does not read */
};

/* All weights: read-only, valid while the gguf_file is open. */
struct model_weights {
	struct model_tensor token_embd; /* [n_vocab rows, n_embd] */
	float *output_norm;             /* [n_embd] (owned copy) */
	struct model_tensor
	    output; /* [n_vocab rows, n_embd]; = token_embd if tied */
	struct model_layer *layers; /* [n_layer] (owned) */
	/* per-layer inputs (cfg.ple_dim > 0), else absent */
	struct model_tensor ple_embd; /* per_layer_token_embd [n_vocab rows,
	                                 n_layer * ple_dim] */
	struct model_tensor ple_proj; /* per_layer_model_proj [n_layer *
	                                 ple_dim rows, n_embd] */
	float *ple_proj_norm;         /* [ple_dim] (owned) */
};

struct model {
	struct model_config cfg;      /* hyper-parameters */
	struct model_weights w;       /* weights */
	const struct gguf_file *file; /* borrowed: must outlive the model */
};

/*
 * Describe the model in F (borrowed: F must stay open until model_free).
 * On success stores a new model in *OUT (free with model_free) and returns
 * 0. On failure returns -1, *OUT is NULL, and err names the key or tensor
 * and the numbers involved; an unknown architecture gets the list of the
 * supported ones.
 */
int model_load(const struct gguf_file *f, struct model **out, char *err,
               size_t errlen);

/* Free the model and its owned copies (not the gguf_file). NULL allowed. */
void model_free(struct model *m);

/* The weight matrices a layer has (absent ones skipped), in a fixed
 * order: wq, wk, wv, wo, gate, up, down, router, the recurrent layer's
 * wqkv, wz, wbeta, walpha, wout, the shared expert's gate, up, down,
 * the merged experts' gate_up, the per-layer input's gate and proj.
 * Returns how many. */
#define MODEL_LAYER_MAX_MATRICES 19
int model_layer_matrices(
    const struct model_layer *l,
    const struct model_tensor *ts[MODEL_LAYER_MAX_MATRICES]);

/* The cache layer IL needs. */
struct model_cache_desc model_layer_cache(const struct model *m, int il);

/* Floats of K and V of every layer's cache for N positions (the one sum
 * the backends' allocations and the engine's state sizes are made of). */
size_t model_cache_floats(const struct model *m, int32_t n);

/* The parameters of attention A's scores. */
struct model_attn_params model_attn_params(const struct model_attn *a);

/* The RoPE class of layer IL. */
const struct model_rope *model_layer_rope(const struct model *m, int il);

/* Whether the KV cache of M can be shifted (engine_kv_shift): every
 * layer with a cache of its own rotates its keys by a RoPE class, whose
 * angle is linear in the position for every class (theta = pos *
 * inv_freq), so a key rotated by -d is the key at pos - d; FULL and
 * WINDOW caches (which keep every position) shift alike, SHARED ones
 * follow their source. False with any RECURRENT layer: its state sums
 * over every position and cannot forget a span. */
bool model_kv_shiftable(const struct model *m);

/* Name of supported architecture I (model_archs[] in model.c), NULL past
 * the last. */
const char *model_arch_at(size_t i);

/* Bytes of the weights the forward pass reads per token (for reports):
 * of a mixture's expert stacks only the n_expert_used chosen matrices. */
uint64_t model_weight_bytes(const struct model *m);

#ifdef __cplusplus
}
#endif

#endif /* PARLEY_MODEL_H */

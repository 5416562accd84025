/*
 * cmd_mkmodel.c - `parley-mkmodel` / `parley dev-mkmodel`: write a GGUF
 * model of any supported architecture and shape with random weights.
 *
 * NOTES ON THE DESIGN
 *
 * The CUDA work uses it to make models of real models' shapes (say
 * Qwen2.5-7B) on a machine without Python and without downloads; the
 * engine tests use it for small random models checked against an
 * independent forward pass. The output is a pure function of the options
 * (seed included): every row of every tensor is drawn from a generator
 * seeded by (seed, tensor name, row), so files are reproducible and rows
 * are produced at write time without holding the model in memory, by
 * every CPU at once (gguf_writer_set_threads).
 *
 * A model is described by features, as model.h describes it: struct
 * mk_model holds the shape, the feature bits (MK_FEAT_*) and the RoPE
 * numbers. An architecture is one row of mk_archs[], the only code that
 * knows architecture names: its GGUF key prefix and the features its name
 * implies (the loader takes the RoPE style from general.architecture, so
 * a style is written by choosing the row that has it). The tensors are
 * two tables, global and per layer; a row names the features that add or
 * drop its tensor, its shape, storage and distribution. A new feature is
 * a bit, its option, its keys in mk_metadata and its rows; every feature
 * gets a random-weight model for the backends' parity tests before any
 * real checkpoint has it.
 *
 * Weights: matrices ~ N(0, 1/n_in) (activations keep unit scale), the
 * embedding ~ N(0, 1) (N(0, 1/n_embd) where the architecture multiplies
 * it by sqrt(n_embd), as gemma's does), norms 1 + N(0, 0.1^2), the final
 * norm times --out-norm-scale (logits that many times larger: peaked, so
 * that greedy tokens are well defined in the engine tests)... all stored
 * in the chosen type. F32, F16, BF16 are the rounded gaussians; Q8_0 is the
 * gaussian quantized as ggml does (d = amax/127, round to nearest); the other
 * quantized types get random quants with scales chosen so the weights have
 * roughly the same range (valid blocks; the values are not a quantization
 * of anything). Norms, biases and rope_freqs are always F32. A Gated
 * DeltaNet layer's (qwen35) decay rates ssm_a ~ -exp(N(0, 0.5^2)) and
 * dt bias ~ N(-2, 0.5^2) give per-step decays exp(softplus(alpha + bias)
 * a) of median 0.85..0.96 per head (a state that remembers tens of
 * tokens; single steps up to 0.999), its conv taps ~ N(0, 1/d_conv) (F32, as
 * llama.cpp keeps ssm_conv1d); with N(0, 1/n_in) projections beta, alpha and z
 * are of unit scale. Gemma 4 (gemma4) does not scale Q K^T: its Q and K
 * norms are head_dim^-1/4 (1 + N(0, 0.1^2)), scores of unit scale as
 * elsewhere; its router reads a vector of elements ~ 1/sqrt(n_embd), so its
 * rows are N(0, 1) (logits ~ N(0, 1)); layer output and per-expert scales
 * are uniform in [0.5, 1.5] (far enough from 1 that dropping one shows);
 * rope_freqs is 1 for the rotated pairs, 1e30 for the rest, as its
 * converter writes the proportional RoPE. A layer's shapes come from a copy
 * of the model with that layer's head dim, KV heads and FFN width
 * (mk_layer_g4). A row that is not whole blocks of a 256-block type gets
 * llama-quantize's fallback type (mk_fallback).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmd.h"
#include "f16.h"
#include "gguf.h"
#include "gguf_split.h"
#include "gguf_write.h"
#include "qtype.h"

/* Features beyond the plain pre-norm decoder (model.h's MODEL_FEAT_*, and
   the untied LM head), one bit each. */
enum mk_feature {
	MK_FEAT_QKV_BIAS = 1u << 0,     /* attn_q/k/v.bias */
	MK_FEAT_ROPE_FACTORS = 1u << 1, /* rope_freqs.weight */
	MK_FEAT_ROPE_LINEAR = 1u << 2,  /* ARCH.rope.scaling.type "linear" */
	MK_FEAT_TIED = 1u << 3,         /* no output.weight */
	MK_FEAT_QK_NORM = 1u << 4,      /* attn_q_norm / attn_k_norm: RMSNorm of
	                                   each head of Q and K before RoPE */
	MK_FEAT_POST_NORMS = 1u << 5,   /* post_attention_norm, post_ffw_norm:
	                                   RMSNorm of each block's output */
	MK_FEAT_EMBD_SCALE = 1u << 6,   /* the loader multiplies the embedding
	                                   by sqrt(n_embd) (by the name: no
	                                   key): token_embd ~ N(0, 1/n_embd) */
	MK_FEAT_SWA = 1u << 7,          /* ARCH.attention.sliding_window (and
	                                   its pattern and RoPE base) */
	MK_FEAT_EXPERTS = 1u << 8,      /* every FFN a mixture: ffn_gate_inp
	                                   (F32 router), ffn_{gate,up,down}_exps
	                                   (3-D, experts stacked) */
	MK_FEAT_OSS = 1u << 9,          /* gpt-oss's extras: attn_output.bias,
	                                   attn_sinks, the router's and experts'
	                                   biases, the FFN norm named
	                                   post_attention_norm */
	MK_FEAT_ROPE_YARN = 1u << 10,   /* ARCH.rope.scaling.type "yarn" */
	MK_FEAT_GDN = 1u << 11,         /* Qwen3.5's hybrid stack: Gated
	                                   DeltaNet layers but every
	                                   full_attention_interval-th, whose
	                                   attention is gated (attn_q holds
	                                   [q | gate] per head), the FFN norm
	                                   named post_attention_norm, the
	                                   ARCH.ssm.* keys, rope sections,
	                                   --nextn-layers MTP blocks */
	MK_FEAT_SHEXP = 1u << 12,       /* a shared expert beside the routed
	                                   ones: ffn_{gate,up,down}_shexp and
	                                   ffn_gate_inp_shexp, its sigmoid
	                                   gate (an F32 vector) */
	MK_FEAT_G4 = 1u << 13,          /* Gemma 4's stack: sliding and global
	                                   layers of their own head dims and
	                                   KV heads, rope_freqs for the global
	                                   ones, layer_output_scale, KV
	                                   sharing; with experts a dense MLP
	                                   beside them (pre_ffw_norm_2,
	                                   post_ffw_norm_1/2, the router's
	                                   scale, per-expert output scales) */
	MK_FEAT_K_EQ_V = 1u << 14,      /* global layers without attn_v: their
	                                   keys (before the K norm) are the
	                                   values (Gemma 4's attention_k_eq_v) */
	MK_FEAT_PLE = 1u << 15,         /* per-layer embeddings (Gemma 4's E
	                                   models): per_layer_token_embd,
	                                   per_layer_model_proj, a gate and
	                                   projection per layer */
	MK_FEAT_DOUBLE_WIDE = 1u << 16, /* the KV-sharing layers' FFN twice
	                                   --n-ff wide (E2B's use_double_wide_
	                                   mlp): feed_forward_length an array */
};

/* What kind a layer is, for the tensor table (not options: set per layer
   by mk_tensors, in the same mask as the features). */
enum mk_layer_kind {
	MK_LAYER_NO_V = 1u << 27,      /* a global layer of MK_FEAT_K_EQ_V */
	MK_LAYER_SHARED = 1u << 28,    /* reads an earlier layer's KV cache:
	                                  no attn_k, attn_v, attn_k_norm */
	MK_LAYER_RECURRENT = 1u << 29, /* a Gated DeltaNet layer */
	MK_LAYER_MTP = 1u << 30,       /* a NextN/MTP block after the stack */
};

/* RoPE styles (model.h's model_rope_style), by their option names. */
enum mk_rope_style { MK_ROPE_NORM, MK_ROPE_NEOX };
static const char *const mk_rope_styles[] = {"norm", "neox"};

/* An architecture: its name, which is the prefix of its GGUF keys, and
   the features the name implies. */
static const struct mk_arch {
	const char *name;        /* general.architecture */
	enum mk_rope_style rope; /* the loader's style for this name */
	uint32_t features;       /* on by default; the loader requires them */
	const char *implied;     /* what else the name means to the loader
	                            (usage text), or NULL; such a row is
	                            chosen by --arch only */
} mk_archs[] = {
    {"llama", MK_ROPE_NORM, 0, NULL},
    {"qwen2", MK_ROPE_NEOX, MK_FEAT_QKV_BIAS, NULL},
    {"qwen3", MK_ROPE_NEOX, MK_FEAT_QK_NORM, "no Q/K/V biases"},
    {"qwen3moe", MK_ROPE_NEOX, MK_FEAT_QK_NORM | MK_FEAT_EXPERTS,
     "no Q/K/V biases, softmax routing, chosen weights renormalised"},
    {"gpt-oss", MK_ROPE_NEOX, MK_FEAT_QKV_BIAS | MK_FEAT_EXPERTS | MK_FEAT_OSS,
     "output bias, attention sinks, biased router and experts, top-k then "
     "softmax, clamped SwiGLU, every other layer sliding"},
    {"gemma3", MK_ROPE_NEOX,
     MK_FEAT_QK_NORM | MK_FEAT_POST_NORMS | MK_FEAT_EMBD_SCALE | MK_FEAT_TIED,
     "embedding x sqrt(n_embd), GELU-tanh FFN"},
    /* llama.cpp rotates them with IMROPE (interleaved M-RoPE), which is
       NEOX for text positions when the sections cover the rotated pairs */
    {"qwen35", MK_ROPE_NEOX, MK_FEAT_QK_NORM | MK_FEAT_GDN,
     "Gated DeltaNet and gated attention layers, M-RoPE sections"},
    {"qwen35moe", MK_ROPE_NEOX,
     MK_FEAT_QK_NORM | MK_FEAT_GDN | MK_FEAT_EXPERTS | MK_FEAT_SHEXP,
     "as qwen35, with qwen3moe's routing and a sigmoid-gated shared "
     "expert"},
    {"gemma4", MK_ROPE_NEOX,
     MK_FEAT_QK_NORM | MK_FEAT_POST_NORMS | MK_FEAT_EMBD_SCALE | MK_FEAT_TIED |
         MK_FEAT_G4,
     "embedding x sqrt(n_embd), GELU-tanh FFN, attention scale 1, a "
     "weightless RMSNorm of V, sliding and global layers"},
};

/* The model to write. */
struct mk_model {
	const struct mk_arch *arch; /* its row of mk_archs[] */
	uint32_t features;          /* MK_FEAT_* */
	enum mk_rope_style rope;    /* must be arch->rope: no key holds it */
	int64_t n_vocab, n_embd, n_ff, n_layer, n_head, n_head_kv, head_dim;
	int64_t n_expert;      /* expert_count (MK_FEAT_EXPERTS) */
	int64_t n_expert_used; /* expert_used_count */
	int64_t n_ff_exp;      /* expert_feed_forward_length (0: n_ff) */
	int64_t n_rot;         /* rope.dimension_count (even, <= head_dim) */
	int64_t n_ctx;         /* context_length */
	double rope_base;      /* rope.freq_base */
	double rope_factor;    /* rope.scaling.factor (MK_FEAT_ROPE_LINEAR,
	                          MK_FEAT_ROPE_YARN) */
	int64_t yarn_orig_ctx; /* rope.scaling.original_context_length (0:
	                          no key) */
	int64_t n_swa;         /* attention.sliding_window (MK_FEAT_SWA) */
	int64_t swa_pattern;   /* attention.sliding_window_pattern (0: no
	                          key, the loader's default) */
	double rope_base_swa;  /* rope.freq_base_swa (0: no key) */
	double out_norm_scale; /* output_norm.weight's factor */
	double rms_eps;        /* layer_norm_rms_epsilon */
	/* MK_FEAT_GDN: the Gated DeltaNet layers' shape (ARCH.ssm.*) */
	int64_t d_conv;      /* ssm.conv_kernel: taps of the causal conv */
	int64_t ssm_state;   /* ssm.state_size: S, dims of a q/k/v head */
	int64_t ssm_k_heads; /* ssm.group_count: H_k, query and key heads */
	int64_t ssm_v_heads; /* ssm.time_step_rank: H_v, value heads (a
	                        multiple of H_k) */
	int64_t ssm_inner;   /* ssm.inner_size (0: H_v S, what llama.cpp
	                        assumes) */
	int64_t fa_interval; /* full_attention_interval: layer il is full
	                        attention iff (il + 1) % it == 0 */
	int64_t rope_sections[4]; /* rope.dimension_sections (all 0: the
	                             default, n_rot/2 split as 11,11,10,0) */
	int64_t n_nextn;          /* nextn_predict_layers: MTP blocks written
	                             after the n_layer of the stack */
	int64_t n_ff_shexp;       /* expert_shared_feed_forward_length
	                             (MK_FEAT_SHEXP; 0: n_ff) */
	/* MK_FEAT_G4: head_dim, n_head_kv and n_rot (= head_dim) are the
	   global layers', as the GGUF keys without _swa */
	int64_t head_dim_swa;     /* attention.key_length_swa (0: head_dim) */
	int64_t n_head_kv_swa;    /* sliding layers' KV heads (0: n_head_kv;
	                             else head_count_kv is an array) */
	int64_t n_kv_shared;      /* attention.shared_kv_layers: the last N
	                             layers read an earlier layer's KV */
	int64_t n_embd_per_layer; /* embedding_length_per_layer_input
	                             (MK_FEAT_PLE) */
	double rope_partial;      /* share of a global head's pairs that
	                             rotate (rope_freqs 1, the others 1e30) */
	double softcap;           /* final_logit_softcapping (0: no key) */
	uint32_t type;            /* type of the layer matrices */
	uint32_t embd_type;       /* type of token_embd */
	uint32_t out_type;        /* type of output.weight */
	uint32_t exp_type;        /* a mixture's expert stacks (UINT32_MAX:
	                             --type; gpt-oss's files: MXFP4) */
	uint32_t more_type;       /* attn_v / ffn_down where llama.cpp's K-quant
	                             mixes give more bits (UINT32_MAX: --type) */
	uint64_t seed;            /* generator seed */
};

/* Options of one run: the model, and what waits for its architecture. */
struct mk_opts {
	const char *arch;     /* --arch, or NULL: chosen by the features */
	const char *out;      /* output path */
	const char *tok_from; /* GGUF to copy tokenizer.* keys from, or NULL */
	int no_vocab;         /* --no-vocab: tokenizer.ggml.model "none" */
	int rope;             /* enum mk_rope_style, -1: the architecture's */
	uint32_t feat_on;     /* features asked for */
	uint32_t feat_off;    /* features refused (--no-qkv-bias) */
	struct mk_model m;
};

/* The sizes a tensor's shape is made of. */
enum mk_dim {
	MK_DIM_NONE,      /* ne1 of a vector */
	MK_DIM_VOCAB,     /* n_vocab */
	MK_DIM_EMBD,      /* n_embd */
	MK_DIM_FF,        /* n_ff */
	MK_DIM_Q,         /* n_head * head_dim */
	MK_DIM_KV,        /* n_head_kv * head_dim */
	MK_DIM_ROT2,      /* n_rot / 2 */
	MK_DIM_HEAD,      /* head_dim */
	MK_DIM_EXPERT,    /* n_expert */
	MK_DIM_HEADS,     /* n_head */
	MK_DIM_FF_EXP,    /* n_ff_exp */
	MK_DIM_Q2,        /* 2 n_head head_dim: gated attention's [q | gate] */
	MK_DIM_EMBD2,     /* 2 n_embd: an MTP block's [embedding | hidden] */
	MK_DIM_CONV,      /* d_conv */
	MK_DIM_SSM_QKV,   /* conv channels: (2 H_k + H_v) S */
	MK_DIM_SSM_V,     /* H_v S */
	MK_DIM_SSM_HEADS, /* H_v */
	MK_DIM_SSM_STATE, /* S */
	MK_DIM_FF_SHEXP,  /* n_ff_shexp */
	MK_DIM_ONE,       /* 1: a scalar kept as a tensor */
	MK_DIM_PLE,       /* n_embd_per_layer */
	MK_DIM_PLE_ALL,   /* n_embd_per_layer * n_layer */
};

/* Where a tensor's storage type comes from. */
enum mk_store {
	MK_STORE_F32,      /* vectors */
	MK_STORE_TYPE,     /* --type */
	MK_STORE_MORE,     /* --more-bits-type in its layers, else --type */
	MK_STORE_EMBD,     /* --embd-type */
	MK_STORE_OUT,      /* --out-type */
	MK_STORE_EXP,      /* --expert-type, else --type */
	MK_STORE_EXP_MORE, /* --more-bits-type in its layers, else as EXP */
};

/* The distribution of a tensor's values. */
enum mk_init {
	MK_INIT_NORM,         /* 1 + N(0, 0.1^2) */
	MK_INIT_MATRIX,       /* N(0, 1/ne0) */
	MK_INIT_EMBD,         /* N(0, 1) */
	MK_INIT_BIAS,         /* N(0, 0.5^2) */
	MK_INIT_FREQS,        /* rope frequency factors, uniform in [1, 8] */
	MK_INIT_OUT_NORM,     /* --out-norm-scale x (1 + N(0, 0.1^2)) */
	MK_INIT_SSM_A,        /* -exp(N(0, 0.5^2)): decay rates -exp(A_log) */
	MK_INIT_DT_BIAS,      /* N(-2, 0.5^2): softplus(alpha + bias) ~ 0.15,
	                         steps that keep some memory over ~10 tokens */
	MK_INIT_SCALE,        /* uniform in [0.5, 1.5]: a layer's output scale,
	                         an expert's (far enough from 1 to matter) */
	MK_INIT_PROPORTIONAL, /* Gemma 4's rope_freqs: 1 for the first
	                         rope_partial of the pairs, 1e30 (no
	                         rotation) for the rest, as its converter */
	MK_INIT_PLE_EMBD,     /* N(0, 1/n_embd_per_layer): llama.cpp multiplies
	                         per-layer embeddings by sqrt(n_embd_per_layer) */
	MK_INIT_QK_NORM,      /* head_dim^-1/4 (1 + N(0, 0.1^2)) */
};

/* A tensor the features may ask for. */
struct mk_tensor_desc {
	const char *name; /* a layer's: after "blk.N." */
	uint32_t needs;   /* written when all these features are on */
	uint32_t unless;  /* and none of these */
	enum mk_dim ne0, ne1;
	enum mk_store store;
	enum mk_init init;
	enum mk_dim ne2; /* a stack of matrices (experts), or MK_DIM_NONE */
};

/* In file order. */
static const struct mk_tensor_desc mk_global_tensors[] = {
    {"token_embd.weight", 0, MK_FEAT_EMBD_SCALE, MK_DIM_EMBD, MK_DIM_VOCAB,
     MK_STORE_EMBD, MK_INIT_EMBD, MK_DIM_NONE},
    {"token_embd.weight", MK_FEAT_EMBD_SCALE, 0, MK_DIM_EMBD, MK_DIM_VOCAB,
     MK_STORE_EMBD, MK_INIT_MATRIX, MK_DIM_NONE},
    {"output_norm.weight", 0, 0, MK_DIM_EMBD, MK_DIM_NONE, MK_STORE_F32,
     MK_INIT_OUT_NORM, MK_DIM_NONE},
    {"output.weight", 0, MK_FEAT_TIED, MK_DIM_EMBD, MK_DIM_VOCAB, MK_STORE_OUT,
     MK_INIT_MATRIX, MK_DIM_NONE},
    {"rope_freqs.weight", MK_FEAT_ROPE_FACTORS, 0, MK_DIM_ROT2, MK_DIM_NONE,
     MK_STORE_F32, MK_INIT_FREQS, MK_DIM_NONE},
    /* Gemma 4 requires one (its global layers' proportional RoPE) */
    {"rope_freqs.weight", MK_FEAT_G4, MK_FEAT_ROPE_FACTORS, MK_DIM_ROT2,
     MK_DIM_NONE, MK_STORE_F32, MK_INIT_PROPORTIONAL, MK_DIM_NONE},
    /* the E models' per-layer embeddings: n_embd_per_layer values per
       layer and token, and their projection from the embedding */
    {"per_layer_token_embd.weight", MK_FEAT_PLE, 0, MK_DIM_PLE_ALL,
     MK_DIM_VOCAB, MK_STORE_EMBD, MK_INIT_PLE_EMBD, MK_DIM_NONE},
    {"per_layer_model_proj.weight", MK_FEAT_PLE, 0, MK_DIM_EMBD, MK_DIM_PLE_ALL,
     MK_STORE_TYPE, MK_INIT_MATRIX, MK_DIM_NONE},
    {"per_layer_proj_norm.weight", MK_FEAT_PLE, 0, MK_DIM_PLE, MK_DIM_NONE,
     MK_STORE_F32, MK_INIT_NORM, MK_DIM_NONE},
};

/* A layer's, and an MTP block's (MK_LAYER_MTP: a full-attention layer
   and its nextn.* tensors). */
static const struct mk_tensor_desc mk_layer_tensors[] = {
    {"attn_norm.weight", 0, 0, MK_DIM_EMBD, MK_DIM_NONE, MK_STORE_F32,
     MK_INIT_NORM, MK_DIM_NONE},
    {"attn_q.weight", 0, MK_FEAT_GDN, MK_DIM_EMBD, MK_DIM_Q, MK_STORE_TYPE,
     MK_INIT_MATRIX, MK_DIM_NONE},
    /* gated attention: per head head_dim rows of q, then of the gate */
    {"attn_q.weight", MK_FEAT_GDN, MK_LAYER_RECURRENT, MK_DIM_EMBD, MK_DIM_Q2,
     MK_STORE_TYPE, MK_INIT_MATRIX, MK_DIM_NONE},
    {"attn_k.weight", 0, MK_LAYER_RECURRENT | MK_LAYER_SHARED, MK_DIM_EMBD,
     MK_DIM_KV, MK_STORE_TYPE, MK_INIT_MATRIX, MK_DIM_NONE},
    {"attn_v.weight", 0, MK_LAYER_RECURRENT | MK_LAYER_SHARED | MK_LAYER_NO_V,
     MK_DIM_EMBD, MK_DIM_KV, MK_STORE_MORE, MK_INIT_MATRIX, MK_DIM_NONE},
    {"attn_q.bias", MK_FEAT_QKV_BIAS, 0, MK_DIM_Q, MK_DIM_NONE, MK_STORE_F32,
     MK_INIT_BIAS, MK_DIM_NONE},
    {"attn_k.bias", MK_FEAT_QKV_BIAS, 0, MK_DIM_KV, MK_DIM_NONE, MK_STORE_F32,
     MK_INIT_BIAS, MK_DIM_NONE},
    {"attn_v.bias", MK_FEAT_QKV_BIAS, 0, MK_DIM_KV, MK_DIM_NONE, MK_STORE_F32,
     MK_INIT_BIAS, MK_DIM_NONE},
    {"attn_q_norm.weight", MK_FEAT_QK_NORM, MK_LAYER_RECURRENT | MK_FEAT_G4,
     MK_DIM_HEAD, MK_DIM_NONE, MK_STORE_F32, MK_INIT_NORM, MK_DIM_NONE},
    {"attn_k_norm.weight", MK_FEAT_QK_NORM, MK_LAYER_RECURRENT | MK_FEAT_G4,
     MK_DIM_HEAD, MK_DIM_NONE, MK_STORE_F32, MK_INIT_NORM, MK_DIM_NONE},
    /* Gemma 4 does not scale Q K^T: norms of head_dim^-1/4 give scores
       of unit scale, as 1/sqrt(head_dim) would (weights near 1 make a
       softmax so sharp that int8 rounding moves whole rows) */
    {"attn_q_norm.weight", MK_FEAT_QK_NORM | MK_FEAT_G4, 0, MK_DIM_HEAD,
     MK_DIM_NONE, MK_STORE_F32, MK_INIT_QK_NORM, MK_DIM_NONE},
    {"attn_k_norm.weight", MK_FEAT_QK_NORM | MK_FEAT_G4, MK_LAYER_SHARED,
     MK_DIM_HEAD, MK_DIM_NONE, MK_STORE_F32, MK_INIT_QK_NORM, MK_DIM_NONE},
    {"attn_output.weight", 0, MK_LAYER_RECURRENT, MK_DIM_Q, MK_DIM_EMBD,
     MK_STORE_TYPE, MK_INIT_MATRIX, MK_DIM_NONE},
    {"attn_output.bias", MK_FEAT_OSS, 0, MK_DIM_EMBD, MK_DIM_NONE, MK_STORE_F32,
     MK_INIT_BIAS, MK_DIM_NONE},
    {"attn_sinks.weight", MK_FEAT_OSS, 0, MK_DIM_HEADS, MK_DIM_NONE,
     MK_STORE_F32, MK_INIT_BIAS, MK_DIM_NONE},
    /* a Gated DeltaNet layer (llama.cpp's create_tensor calls): the conv
       channels [q | k | v], z, the conv's taps (F32, as llama.cpp's
       quantizer leaves them; N(0, 1/d_conv)), the decay's bias and rates,
       beta and alpha, the output's norm and projection */
    {"attn_qkv.weight", MK_FEAT_GDN | MK_LAYER_RECURRENT, 0, MK_DIM_EMBD,
     MK_DIM_SSM_QKV, MK_STORE_TYPE, MK_INIT_MATRIX, MK_DIM_NONE},
    {"attn_gate.weight", MK_FEAT_GDN | MK_LAYER_RECURRENT, 0, MK_DIM_EMBD,
     MK_DIM_SSM_V, MK_STORE_TYPE, MK_INIT_MATRIX, MK_DIM_NONE},
    {"ssm_conv1d.weight", MK_FEAT_GDN | MK_LAYER_RECURRENT, 0, MK_DIM_CONV,
     MK_DIM_SSM_QKV, MK_STORE_F32, MK_INIT_MATRIX, MK_DIM_NONE},
    {"ssm_dt.bias", MK_FEAT_GDN | MK_LAYER_RECURRENT, 0, MK_DIM_SSM_HEADS,
     MK_DIM_NONE, MK_STORE_F32, MK_INIT_DT_BIAS, MK_DIM_NONE},
    {"ssm_a", MK_FEAT_GDN | MK_LAYER_RECURRENT, 0, MK_DIM_SSM_HEADS,
     MK_DIM_NONE, MK_STORE_F32, MK_INIT_SSM_A, MK_DIM_NONE},
    {"ssm_beta.weight", MK_FEAT_GDN | MK_LAYER_RECURRENT, 0, MK_DIM_EMBD,
     MK_DIM_SSM_HEADS, MK_STORE_TYPE, MK_INIT_MATRIX, MK_DIM_NONE},
    {"ssm_alpha.weight", MK_FEAT_GDN | MK_LAYER_RECURRENT, 0, MK_DIM_EMBD,
     MK_DIM_SSM_HEADS, MK_STORE_TYPE, MK_INIT_MATRIX, MK_DIM_NONE},
    {"ssm_norm.weight", MK_FEAT_GDN | MK_LAYER_RECURRENT, 0, MK_DIM_SSM_STATE,
     MK_DIM_NONE, MK_STORE_F32, MK_INIT_NORM, MK_DIM_NONE},
    {"ssm_out.weight", MK_FEAT_GDN | MK_LAYER_RECURRENT, 0, MK_DIM_SSM_V,
     MK_DIM_EMBD, MK_STORE_TYPE, MK_INIT_MATRIX, MK_DIM_NONE},
    {"post_attention_norm.weight", MK_FEAT_POST_NORMS, 0, MK_DIM_EMBD,
     MK_DIM_NONE, MK_STORE_F32, MK_INIT_NORM, MK_DIM_NONE},
    {"ffn_norm.weight", 0, MK_FEAT_OSS | MK_FEAT_GDN, MK_DIM_EMBD, MK_DIM_NONE,
     MK_STORE_F32, MK_INIT_NORM, MK_DIM_NONE},
    /* gpt-oss's and qwen35's FFN norm (Hugging Face's
       post_attention_layernorm) */
    {"post_attention_norm.weight", MK_FEAT_OSS, 0, MK_DIM_EMBD, MK_DIM_NONE,
     MK_STORE_F32, MK_INIT_NORM, MK_DIM_NONE},
    {"post_attention_norm.weight", MK_FEAT_GDN, 0, MK_DIM_EMBD, MK_DIM_NONE,
     MK_STORE_F32, MK_INIT_NORM, MK_DIM_NONE},
    {"ffn_gate.weight", 0, MK_FEAT_EXPERTS, MK_DIM_EMBD, MK_DIM_FF,
     MK_STORE_TYPE, MK_INIT_MATRIX, MK_DIM_NONE},
    {"ffn_up.weight", 0, MK_FEAT_EXPERTS, MK_DIM_EMBD, MK_DIM_FF, MK_STORE_TYPE,
     MK_INIT_MATRIX, MK_DIM_NONE},
    {"ffn_down.weight", 0, MK_FEAT_EXPERTS, MK_DIM_FF, MK_DIM_EMBD,
     MK_STORE_MORE, MK_INIT_MATRIX, MK_DIM_NONE},
    /* Gemma 4's mixtures keep the dense MLP beside the experts */
    {"ffn_gate.weight", MK_FEAT_G4 | MK_FEAT_EXPERTS, 0, MK_DIM_EMBD, MK_DIM_FF,
     MK_STORE_TYPE, MK_INIT_MATRIX, MK_DIM_NONE},
    {"ffn_up.weight", MK_FEAT_G4 | MK_FEAT_EXPERTS, 0, MK_DIM_EMBD, MK_DIM_FF,
     MK_STORE_TYPE, MK_INIT_MATRIX, MK_DIM_NONE},
    {"ffn_down.weight", MK_FEAT_G4 | MK_FEAT_EXPERTS, 0, MK_DIM_FF, MK_DIM_EMBD,
     MK_STORE_MORE, MK_INIT_MATRIX, MK_DIM_NONE},
    /* the router's logits ~ N(0, 1): F32, as llama.cpp's quantizer
       leaves it */
    {"ffn_gate_inp.weight", MK_FEAT_EXPERTS, MK_FEAT_G4, MK_DIM_EMBD,
     MK_DIM_EXPERT, MK_STORE_F32, MK_INIT_MATRIX, MK_DIM_NONE},
    /* Gemma 4's router reads the RMS-normed residual / sqrt(n_embd)
       (elements ~ 1/sqrt(n_embd)) times its scale: N(0, 1) rows give
       logits ~ N(0, 1) */
    {"ffn_gate_inp.weight", MK_FEAT_G4 | MK_FEAT_EXPERTS, 0, MK_DIM_EMBD,
     MK_DIM_EXPERT, MK_STORE_F32, MK_INIT_EMBD, MK_DIM_NONE},
    {"ffn_gate_inp.scale", MK_FEAT_G4 | MK_FEAT_EXPERTS, 0, MK_DIM_EMBD,
     MK_DIM_NONE, MK_STORE_F32, MK_INIT_NORM, MK_DIM_NONE},
    {"pre_ffw_norm_2.weight", MK_FEAT_G4 | MK_FEAT_EXPERTS, 0, MK_DIM_EMBD,
     MK_DIM_NONE, MK_STORE_F32, MK_INIT_NORM, MK_DIM_NONE},
    {"post_ffw_norm_1.weight", MK_FEAT_G4 | MK_FEAT_EXPERTS, 0, MK_DIM_EMBD,
     MK_DIM_NONE, MK_STORE_F32, MK_INIT_NORM, MK_DIM_NONE},
    {"post_ffw_norm_2.weight", MK_FEAT_G4 | MK_FEAT_EXPERTS, 0, MK_DIM_EMBD,
     MK_DIM_NONE, MK_STORE_F32, MK_INIT_NORM, MK_DIM_NONE},
    /* each expert's output times its scale (HF's per_expert_scale) */
    {"ffn_down_exps.scale", MK_FEAT_G4 | MK_FEAT_EXPERTS, 0, MK_DIM_EXPERT,
     MK_DIM_NONE, MK_STORE_F32, MK_INIT_SCALE, MK_DIM_NONE},
    {"ffn_gate_exps.weight", MK_FEAT_EXPERTS, 0, MK_DIM_EMBD, MK_DIM_FF_EXP,
     MK_STORE_EXP, MK_INIT_MATRIX, MK_DIM_EXPERT},
    {"ffn_down_exps.weight", MK_FEAT_EXPERTS, 0, MK_DIM_FF_EXP, MK_DIM_EMBD,
     MK_STORE_EXP_MORE, MK_INIT_MATRIX, MK_DIM_EXPERT},
    {"ffn_up_exps.weight", MK_FEAT_EXPERTS, 0, MK_DIM_EMBD, MK_DIM_FF_EXP,
     MK_STORE_EXP, MK_INIT_MATRIX, MK_DIM_EXPERT},
    {"ffn_gate_inp.bias", MK_FEAT_EXPERTS | MK_FEAT_OSS, 0, MK_DIM_EXPERT,
     MK_DIM_NONE, MK_STORE_F32, MK_INIT_BIAS, MK_DIM_NONE},
    {"ffn_gate_exps.bias", MK_FEAT_EXPERTS | MK_FEAT_OSS, 0, MK_DIM_FF_EXP,
     MK_DIM_EXPERT, MK_STORE_F32, MK_INIT_BIAS, MK_DIM_NONE},
    {"ffn_down_exps.bias", MK_FEAT_EXPERTS | MK_FEAT_OSS, 0, MK_DIM_EMBD,
     MK_DIM_EXPERT, MK_STORE_F32, MK_INIT_BIAS, MK_DIM_NONE},
    {"ffn_up_exps.bias", MK_FEAT_EXPERTS | MK_FEAT_OSS, 0, MK_DIM_FF_EXP,
     MK_DIM_EXPERT, MK_STORE_F32, MK_INIT_BIAS, MK_DIM_NONE},
    /* the shared expert's gate: a logit ~ N(0, 1) per token, a vector
       (llama.cpp's { n_embd }), F32 */
    {"ffn_gate_inp_shexp.weight", MK_FEAT_SHEXP, 0, MK_DIM_EMBD, MK_DIM_NONE,
     MK_STORE_F32, MK_INIT_MATRIX, MK_DIM_NONE},
    {"ffn_gate_shexp.weight", MK_FEAT_SHEXP, 0, MK_DIM_EMBD, MK_DIM_FF_SHEXP,
     MK_STORE_TYPE, MK_INIT_MATRIX, MK_DIM_NONE},
    {"ffn_up_shexp.weight", MK_FEAT_SHEXP, 0, MK_DIM_EMBD, MK_DIM_FF_SHEXP,
     MK_STORE_TYPE, MK_INIT_MATRIX, MK_DIM_NONE},
    {"ffn_down_shexp.weight", MK_FEAT_SHEXP, 0, MK_DIM_FF_SHEXP, MK_DIM_EMBD,
     MK_STORE_MORE, MK_INIT_MATRIX, MK_DIM_NONE},
    {"post_ffw_norm.weight", MK_FEAT_POST_NORMS, 0, MK_DIM_EMBD, MK_DIM_NONE,
     MK_STORE_F32, MK_INIT_NORM, MK_DIM_NONE},
    /* a per-layer embedding gated into the residual: proj(gelu(inp_gate
       x) * the layer's input), RMS-normed by post_norm */
    {"inp_gate.weight", MK_FEAT_PLE, 0, MK_DIM_EMBD, MK_DIM_PLE, MK_STORE_TYPE,
     MK_INIT_MATRIX, MK_DIM_NONE},
    {"proj.weight", MK_FEAT_PLE, 0, MK_DIM_PLE, MK_DIM_EMBD, MK_STORE_TYPE,
     MK_INIT_MATRIX, MK_DIM_NONE},
    {"post_norm.weight", MK_FEAT_PLE, 0, MK_DIM_EMBD, MK_DIM_NONE, MK_STORE_F32,
     MK_INIT_NORM, MK_DIM_NONE},
    /* the residual stream times a scalar at the layer's end */
    {"layer_output_scale.weight", MK_FEAT_G4, 0, MK_DIM_ONE, MK_DIM_NONE,
     MK_STORE_F32, MK_INIT_SCALE, MK_DIM_NONE},
    /* an MTP block's input: eh_proj [rmsnorm(embedding) * enorm |
       rmsnorm(hidden) * hnorm] */
    {"nextn.eh_proj.weight", MK_LAYER_MTP, 0, MK_DIM_EMBD2, MK_DIM_EMBD,
     MK_STORE_TYPE, MK_INIT_MATRIX, MK_DIM_NONE},
    {"nextn.enorm.weight", MK_LAYER_MTP, 0, MK_DIM_EMBD, MK_DIM_NONE,
     MK_STORE_F32, MK_INIT_NORM, MK_DIM_NONE},
    {"nextn.hnorm.weight", MK_LAYER_MTP, 0, MK_DIM_EMBD, MK_DIM_NONE,
     MK_STORE_F32, MK_INIT_NORM, MK_DIM_NONE},
};

#define MK_COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* How a tensor's values are drawn. */
struct mk_tensor {
	uint64_t seed;      /* seed of the tensor (from name and run seed) */
	uint32_t type;      /* storage type */
	uint64_t ne0;       /* elements per row */
	double mean;        /* of the gaussian */
	double std;         /* of the gaussian */
	enum mk_init init;  /* MK_INIT_FREQS: not a gaussian */
	uint64_t n_rotated; /* MK_INIT_PROPORTIONAL: leading values 1 */
};

/* splitmix64: the generator's step. */
static uint64_t mk_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* Uniform in (0, 1). */
static double mk_uniform(uint64_t *s)
{
	return ((double)(mk_next(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* Standard normal (Box-Muller, one value per call). */
static double mk_gauss(uint64_t *s)
{
	double u1 = mk_uniform(s), u2 = mk_uniform(s);

	return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* FNV-1a of a string, mixed with SEED. */
static uint64_t mk_hash(const char *name, uint64_t seed)
{
	uint64_t h = 1469598103934665603ull ^ seed;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 1099511628211ull;
	return h;
}

/* Store half bits at P (unaligned). */
static void mk_put_f16(unsigned char *p, float v)
{
	uint16_t h = f32_to_f16(v);

	memcpy(p, &h, 2);
}

/* Offsets of the fp16 scale fields of one block, and their targets. */
struct mk_block_desc {
	uint32_t type;
	int n_f16;     /* fp16 fields in the block */
	int off[2];    /* their byte offsets */
	double div[2]; /* scale = amplitude / div (negative: minus) */
};

static const struct mk_block_desc mk_blocks[] = {
    {QTYPE_Q4_0, 1, {0, 0}, {8, 0}},
    {QTYPE_Q4_1, 2, {0, 2}, {7.5, -1}},
    {QTYPE_Q5_0, 1, {0, 0}, {16, 0}},
    {QTYPE_Q5_1, 2, {0, 2}, {15.5, -1}},
    {QTYPE_Q2_K, 2, {80, 82}, {22.5, 15}},
    {QTYPE_Q3_K, 1, {108, 0}, {128, 0}},
    {QTYPE_Q4_K, 2, {0, 2}, {472.5, 63}},
    {QTYPE_Q5_K, 2, {0, 2}, {976.5, 63}},
    {QTYPE_Q6_K, 1, {208, 0}, {4096, 0}},
    /* the i-quants' and TQ's d (quant_iq.c's layouts): grid indices,
       signs and sub-scales random (every value of their fields is
       valid), d so that the weights have about the gaussian's range */
    {QTYPE_IQ4_NL, 1, {0, 0}, {140, 0}},
    {QTYPE_IQ4_XS, 1, {0, 0}, {2600, 0}},
    {QTYPE_IQ3_XXS, 1, {0, 0}, {300, 0}},
    {QTYPE_IQ3_S, 1, {0, 0}, {290, 0}},
    {QTYPE_IQ2_XXS, 1, {0, 0}, {115, 0}},
    {QTYPE_IQ2_XS, 1, {0, 0}, {115, 0}},
    {QTYPE_IQ2_S, 1, {0, 0}, {120, 0}},
    {QTYPE_IQ1_S, 1, {0, 0}, {15, 0}},
    {QTYPE_TQ1_0, 1, {52, 0}, {1.7, 0}},
    {QTYPE_TQ2_0, 1, {64, 0}, {2.4, 0}},
};

/* Fill one row of a random-quant type: random bytes, sane scales. */
static int mk_fill_blocks(const struct mk_tensor *t, uint64_t *s,
                          unsigned char *buf, size_t row_bytes)
{
	const struct qtype_info *q = qtype_get(t->type);
	const struct mk_block_desc *d = NULL;
	double amp = 2.0 * t->std;

	if (t->type == QTYPE_IQ1_M) { /* d's four nibbles atop 4 scales */
		unsigned char h[2];

		for (size_t i = 0; i < row_bytes; i++)
			buf[i] = (unsigned char)mk_next(s);
		for (size_t b = 0; b < row_bytes / 56; b++) {
			unsigned char *sc = buf + b * 56 + 48;

			mk_put_f16(h,
			           (float)(amp / 8.0 * (0.5 + mk_uniform(s))));
			for (int k = 0; k < 4; k++) {
				const unsigned nib =
				    (unsigned)((h[0] | h[1] << 8) >> (4 * k)) &
				    15u;

				sc[2 * k + 1] =
				    (unsigned char)((sc[2 * k + 1] & 0x0F) |
				                    nib << 4);
			}
		}
		return 0;
	}
	if (t->type == QTYPE_MXFP4) { /* an E8M0 exponent, 16 nibble bytes */
		const int e0 = 128 + (int)floor(log2(amp / 6.0));

		for (size_t i = 0; i < row_bytes; i++)
			buf[i] = (unsigned char)mk_next(s);
		for (size_t b = 0; b < row_bytes / 17; b++) {
			int e = e0 + (int)(mk_next(s) % 3) - 1;

			buf[b * 17] = (unsigned char)(e < 2     ? 2
			                              : e > 254 ? 254
			                                        : e);
		}
		return 0;
	}
	for (size_t i = 0; i < sizeof(mk_blocks) / sizeof(mk_blocks[0]); i++)
		if (mk_blocks[i].type == t->type)
			d = &mk_blocks[i];
	if (d == NULL || q == NULL)
		return -1;
	for (size_t i = 0; i < row_bytes; i++)
		buf[i] = (unsigned char)mk_next(s);
	for (size_t b = 0; b < row_bytes / q->type_size; b++) {
		unsigned char *blk = buf + b * q->type_size;

		for (int k = 0; k < d->n_f16; k++) {
			double v =
			    amp / fabs(d->div[k]) * (0.5 + mk_uniform(s));

			mk_put_f16(blk + d->off[k],
			           (float)(d->div[k] < 0 ? -v : v));
		}
	}
	return 0;
}

/* Value J of a row of T whose values are not all gaussians. */
static float mk_value(const struct mk_tensor *t, uint64_t *s, uint64_t j)
{
	switch (t->init) {
	case MK_INIT_FREQS:
		return (float)(1.0 + 7.0 * mk_uniform(s));
	case MK_INIT_SSM_A:
		return (float)-exp(t->mean + t->std * mk_gauss(s));
	case MK_INIT_SCALE:
		return (float)(0.5 + mk_uniform(s));
	case MK_INIT_PROPORTIONAL: /* theta / 1e30: a pair left as it is */
		return j < t->n_rotated ? 1.0f : 1e30f;
	default:
		return (float)(t->mean + t->std * mk_gauss(s));
	}
}

/* gguf_writer_fill_fn: row ROW of tensor CTX. */
static int mk_fill(void *ctx, uint64_t row, void *out, size_t row_bytes)
{
	const struct mk_tensor *t = ctx;
	uint64_t s = t->seed ^ (row * 0xD1B54A32D192ED03ull);
	unsigned char *buf = out;
	uint64_t n = t->ne0;

	mk_next(&s);
	if (t->type == QTYPE_F32 || t->type == QTYPE_F16 ||
	    t->type == QTYPE_BF16 || t->type == QTYPE_Q8_0) {
		for (uint64_t i = 0; i < n; i += 32) {
			float v[32], amax = 0;
			uint64_t m = n - i < 32 ? n - i : 32;

			for (uint64_t k = 0; k < m; k++) {
				v[k] = mk_value(t, &s, i + k);
				if (fabsf(v[k]) > amax)
					amax = fabsf(v[k]);
			}
			for (uint64_t k = 0; k < m; k++) {
				uint64_t j = i + k;

				if (t->type == QTYPE_F32) {
					memcpy(buf + 4 * j, &v[k], 4);
				} else if (t->type == QTYPE_F16) {
					mk_put_f16(buf + 2 * j, v[k]);
				} else if (t->type == QTYPE_BF16) {
					uint32_t w;
					uint16_t h;

					memcpy(&w, &v[k], 4);
					w += 0x7FFFu + ((w >> 16) & 1u);
					h = (uint16_t)(w >> 16);
					memcpy(buf + 2 * j, &h, 2);
				}
			}
			if (t->type == QTYPE_Q8_0) {
				/* ggml's quantize_row_q8_0_ref */
				unsigned char *blk = buf + (i / 32) * 34;
				float d = amax / 127.0f;
				float id = d != 0.0f ? 1.0f / d : 0.0f;

				mk_put_f16(blk, d);
				for (int k = 0; k < 32; k++)
					blk[2 + k] =
					    (unsigned char)(int8_t)roundf(v[k] *
					                                  id);
			}
		}
		return 0;
	}
	return mk_fill_blocks(t, &s, buf, row_bytes);
}

/* Parse a type name ("F32", "q8_0", ...). Returns 0 or -1. */
static int mk_parse_type(const char *s, uint32_t *out)
{
	for (uint32_t t = 0; t < QTYPE_COUNT; t++) {
		const struct qtype_info *q = qtype_get(t);

		if (q != NULL && q->blck_size != 0 &&
		    strcasecmp(q->name, s) == 0) {
			*out = t;
			return 0;
		}
	}
	return -1;
}

/* All tensor descriptions live here until the write (owned by
   cmd_mkmodel). */
struct mk_state {
	struct mk_tensor *t; /* [n] */
	size_t n, cap;
};

/* Mean and standard deviation of each enum mk_init (a matrix's std is
   1/sqrt(ne0), set in mk_add). */
static const struct {
	double mean, std;
} mk_inits[] = {
    [MK_INIT_NORM] = {1.0, 0.1}, [MK_INIT_MATRIX] = {0, 0},
    [MK_INIT_EMBD] = {0, 1.0},   [MK_INIT_BIAS] = {0, 0.5},
    [MK_INIT_FREQS] = {0, 0},    [MK_INIT_OUT_NORM] = {1.0, 0.1},
    [MK_INIT_SSM_A] = {0, 0.5},  [MK_INIT_DT_BIAS] = {-2.0, 0.5},
    [MK_INIT_SCALE] = {0, 0},    [MK_INIT_PROPORTIONAL] = {0, 0},
    [MK_INIT_PLE_EMBD] = {0, 0}, [MK_INIT_QK_NORM] = {1.0, 0.1},
};

/* Size D of model M. */
static uint64_t mk_dim(const struct mk_model *m, enum mk_dim d)
{
	switch (d) {
	case MK_DIM_NONE:
		break;
	case MK_DIM_VOCAB:
		return (uint64_t)m->n_vocab;
	case MK_DIM_EMBD:
		return (uint64_t)m->n_embd;
	case MK_DIM_FF:
		return (uint64_t)m->n_ff;
	case MK_DIM_Q:
		return (uint64_t)(m->n_head * m->head_dim);
	case MK_DIM_KV:
		return (uint64_t)(m->n_head_kv * m->head_dim);
	case MK_DIM_ROT2:
		return (uint64_t)m->n_rot / 2;
	case MK_DIM_HEAD:
		return (uint64_t)m->head_dim;
	case MK_DIM_EXPERT:
		return (uint64_t)m->n_expert;
	case MK_DIM_HEADS:
		return (uint64_t)m->n_head;
	case MK_DIM_FF_EXP:
		return (uint64_t)m->n_ff_exp;
	case MK_DIM_Q2:
		return (uint64_t)(2 * m->n_head * m->head_dim);
	case MK_DIM_EMBD2:
		return (uint64_t)(2 * m->n_embd);
	case MK_DIM_CONV:
		return (uint64_t)m->d_conv;
	case MK_DIM_SSM_QKV:
		return (uint64_t)((2 * m->ssm_k_heads + m->ssm_v_heads) *
		                  m->ssm_state);
	case MK_DIM_SSM_V:
		return (uint64_t)(m->ssm_v_heads * m->ssm_state);
	case MK_DIM_SSM_HEADS:
		return (uint64_t)m->ssm_v_heads;
	case MK_DIM_SSM_STATE:
		return (uint64_t)m->ssm_state;
	case MK_DIM_FF_SHEXP:
		return (uint64_t)m->n_ff_shexp;
	case MK_DIM_ONE:
		return 1;
	case MK_DIM_PLE:
		return (uint64_t)m->n_embd_per_layer;
	case MK_DIM_PLE_ALL:
		return (uint64_t)(m->n_embd_per_layer * m->n_layer);
	}
	return 0;
}

/* Storage type S of a tensor of layer IL (-1: a global tensor). */
static uint32_t mk_store_type(const struct mk_model *m, enum mk_store s,
                              int64_t il)
{
	/* llama.cpp's use_more_bits (llama-quant.cpp): the first and last
	   eighth of the layers and every third in between */
	int more =
	    il >= 0 && (il < m->n_layer / 8 || il >= 7 * m->n_layer / 8 ||
	                (il - m->n_layer / 8) % 3 == 2);

	switch (s) {
	case MK_STORE_F32:
		return QTYPE_F32;
	case MK_STORE_MORE:
		return more && m->more_type != UINT32_MAX ? m->more_type
		                                          : m->type;
	case MK_STORE_EMBD:
		return m->embd_type;
	case MK_STORE_OUT:
		return m->out_type;
	case MK_STORE_EXP_MORE:
		if (more && m->more_type != UINT32_MAX)
			return m->more_type;
		/* fall through */
	case MK_STORE_EXP:
		return m->exp_type != UINT32_MAX ? m->exp_type : m->type;
	case MK_STORE_TYPE:
		break;
	}
	return m->type;
}

/* TYPE, or where rows of NE0 are not whole blocks of it, the type
   llama.cpp's quantizer falls back to (tensor_type_fallback: a 256-block
   type to a 32-block one, F16 if that does not fit either), so that real
   shapes such as Gemma 4 26B-A4B's (rows of 704 and 2112) get the mixes
   llama-quantize makes. Types without a fallback are kept (mk_add says
   why they do not fit). */
static uint32_t mk_fallback(uint32_t type, uint64_t ne0)
{
	uint32_t to;

	if (gguf_writer_row_size(type, ne0) != 0)
		return type;
	switch (type) {
	case QTYPE_IQ1_S:
	case QTYPE_IQ1_M:
	case QTYPE_IQ2_XXS:
	case QTYPE_IQ2_XS:
	case QTYPE_IQ2_S:
	case QTYPE_IQ3_XXS:
	case QTYPE_IQ3_S:
	case QTYPE_IQ4_XS:
		to = QTYPE_IQ4_NL;
		break;
	case QTYPE_Q2_K:
	case QTYPE_Q3_K:
	case QTYPE_TQ1_0:
	case QTYPE_TQ2_0:
		to = QTYPE_Q4_0;
		break;
	case QTYPE_Q4_K:
		to = QTYPE_Q5_0;
		break;
	case QTYPE_Q5_K:
		to = QTYPE_Q5_1;
		break;
	case QTYPE_Q6_K:
		to = QTYPE_Q8_0;
		break;
	default:
		return type;
	}
	return gguf_writer_row_size(to, ne0) != 0 ? to : QTYPE_F16;
}

/* Describe tensor D of layer IL (-1: global) and add it to W. Returns 0,
   or -1 with a message naming the tensor in ERR. */
static int mk_add(struct gguf_writer *w, struct mk_state *st,
                  const struct mk_model *m, const struct mk_tensor_desc *d,
                  int64_t il, char *err, size_t errlen)
{
	uint64_t ne[3] = {mk_dim(m, d->ne0), mk_dim(m, d->ne1),
	                  mk_dim(m, d->ne2)};
	uint32_t type = mk_fallback(mk_store_type(m, d->store, il), ne[0]);
	struct mk_tensor *t;
	char name[96];

	if (il < 0)
		snprintf(name, sizeof(name), "%s", d->name);
	else
		snprintf(name, sizeof(name), "blk.%lld.%s", (long long)il,
		         d->name);
	if (gguf_writer_row_size(type, ne[0]) == 0) {
		snprintf(err, errlen,
		         "%s: rows of %llu are not whole %s blocks", name,
		         (unsigned long long)ne[0], qtype_get(type)->name);
		return -1;
	}
	if (st->n == st->cap) {
		snprintf(err, errlen, "%s: too many tensors", name);
		return -1; /* capacity computed up front */
	}
	t = &st->t[st->n++];
	t->seed = mk_hash(name, m->seed);
	t->type = type;
	t->ne0 = ne[0];
	t->mean = mk_inits[d->init].mean;
	t->std = d->init == MK_INIT_MATRIX ? 1.0 / sqrt((double)ne[0])
	         : d->init == MK_INIT_PLE_EMBD
	             ? 1.0 / sqrt((double)m->n_embd_per_layer)
	             : mk_inits[d->init].std;
	/* HF's rope_angles: int(partial_rotary_factor * head_dim // 2) */
	t->n_rotated = (uint64_t)floor(m->rope_partial * (double)ne[0] + 1e-9);
	if (d->init == MK_INIT_OUT_NORM) { /* x 1.0: the same bits */
		t->mean *= m->out_norm_scale;
		t->std *= m->out_norm_scale;
	}
	if (d->init == MK_INIT_QK_NORM) {
		t->mean *= pow((double)m->head_dim, -0.25);
		t->std *= pow((double)m->head_dim, -0.25);
	}
	t->init = d->init;
	if (gguf_writer_add_tensor(w, name, type,
	                           ne[2]   ? 3
	                           : ne[1] ? 2
	                                   : 1,
	                           ne, NULL, mk_fill, t)) {
		snprintf(err, errlen, "%s: out of memory", name);
		return -1;
	}
	return 0;
}

/* Add the tensors of LIST (N rows) that FEATS (M's features and the
   layer's MK_LAYER_* kind) ask for, of layer IL (-1: global ones). Returns
   0 or -1 (mk_add). */
static int mk_add_list(struct gguf_writer *w, struct mk_state *st,
                       const struct mk_model *m, uint32_t feats,
                       const struct mk_tensor_desc *list, size_t n, int64_t il,
                       char *err, size_t errlen)
{
	for (size_t i = 0; i < n; i++) {
		const struct mk_tensor_desc *d = &list[i];

		if ((feats & d->needs) != d->needs || (feats & d->unless) != 0)
			continue;
		if (mk_add(w, st, m, d, il, err, errlen))
			return -1;
	}
	return 0;
}

/* Whether layer IL slides (MK_FEAT_SWA): all but every swa_pattern-th,
   as llama.cpp reads gemma3's pattern key (default 6). */
static int mk_is_swa(const struct mk_model *m, int64_t il)
{
	const int64_t p = m->swa_pattern != 0 ? m->swa_pattern : 6;

	return il % p < p - 1;
}

/* Layer IL of a Gemma 4 model M: LM gets M with the layer's head dim,
   KV heads and FFN width (the shapes mk_dim reads); returns the layer's
   MK_LAYER_* kind. */
static uint32_t mk_layer_g4(const struct mk_model *m, int64_t il,
                            struct mk_model *lm)
{
	uint32_t kind = 0;

	*lm = *m;
	if (mk_is_swa(m, il)) {
		lm->head_dim = m->head_dim_swa;
		lm->n_head_kv = m->n_head_kv_swa;
	} else if (m->features & MK_FEAT_K_EQ_V) {
		kind |= MK_LAYER_NO_V;
	}
	if (il >= m->n_layer - m->n_kv_shared) {
		kind |= MK_LAYER_SHARED;
		if (m->features & MK_FEAT_DOUBLE_WIDE)
			lm->n_ff = 2 * m->n_ff;
	}
	return kind;
}

/* Add every tensor of the model. Returns 0 or -1 (mk_add). */
static int mk_tensors(struct gguf_writer *w, struct mk_state *st,
                      const struct mk_model *m, char *err, size_t errlen)
{
	if (mk_add_list(w, st, m, m->features, mk_global_tensors,
	                MK_COUNT(mk_global_tensors), -1, err, errlen))
		return -1;
	/* the stack, then the MTP blocks (full attention: llama.cpp's
	   is_recr is false past the stack) */
	for (int64_t il = 0; il < m->n_layer + m->n_nextn; il++) {
		uint32_t feats = m->features;
		struct mk_model lm = *m;

		if (il >= m->n_layer)
			feats |= MK_LAYER_MTP;
		else if ((m->features & MK_FEAT_GDN) &&
		         (il + 1) % m->fa_interval != 0)
			feats |= MK_LAYER_RECURRENT;
		else if (m->features & MK_FEAT_G4)
			feats |= mk_layer_g4(m, il, &lm);
		if (mk_add_list(w, st, &lm, feats, mk_layer_tensors,
		                MK_COUNT(mk_layer_tensors), il, err, errlen))
			return -1;
	}
	return 0;
}

/* MK_FEAT_GDN's keys: the Gated DeltaNet's shape, the layer pattern, the
   rope sections, the MTP blocks. */
static void mk_metadata_gdn(struct gguf_writer *w, const struct mk_model *m)
{
	int32_t sec[4];
	char key[128];

#define K(suffix) (snprintf(key, sizeof(key), "%s." suffix, m->arch->name), key)
	gguf_writer_set_u32(w, K("ssm.conv_kernel"), (uint32_t)m->d_conv);
	gguf_writer_set_u32(w, K("ssm.inner_size"), (uint32_t)m->ssm_inner);
	gguf_writer_set_u32(w, K("ssm.state_size"), (uint32_t)m->ssm_state);
	gguf_writer_set_u32(w, K("ssm.time_step_rank"),
	                    (uint32_t)m->ssm_v_heads);
	gguf_writer_set_u32(w, K("ssm.group_count"), (uint32_t)m->ssm_k_heads);
	gguf_writer_set_u32(w, K("full_attention_interval"),
	                    (uint32_t)m->fa_interval);
	for (int i = 0; i < 4; i++)
		sec[i] = (int32_t)m->rope_sections[i];
	gguf_writer_set_arr(w, K("rope.dimension_sections"), GGUF_TYPE_INT32,
	                    sec, 4);
	if (m->n_nextn != 0)
		gguf_writer_set_u32(w, K("nextn_predict_layers"),
		                    (uint32_t)m->n_nextn);
#undef K
}

/* MK_FEAT_G4's keys: per-layer arrays where layers differ (as llama.cpp
   reads head_count_kv, feed_forward_length and the sliding pattern), both
   head dims, KV sharing, per-layer embeddings, the logit softcap. */
static void mk_metadata_g4(struct gguf_writer *w, const struct mk_model *m)
{
	int32_t kv[1024], ff[1024];
	uint8_t swa[1024];
	char key[128];

#define K(suffix) (snprintf(key, sizeof(key), "%s." suffix, m->arch->name), key)
	for (int64_t il = 0; il < m->n_layer; il++) {
		struct mk_model lm;

		mk_layer_g4(m, il, &lm);
		kv[il] = (int32_t)lm.n_head_kv;
		ff[il] = (int32_t)lm.n_ff;
		swa[il] = (uint8_t)mk_is_swa(m, il);
	}
	if (m->features & MK_FEAT_DOUBLE_WIDE)
		gguf_writer_set_arr(w, K("feed_forward_length"),
		                    GGUF_TYPE_INT32, ff, (uint64_t)m->n_layer);
	else
		gguf_writer_set_u32(w, K("feed_forward_length"),
		                    (uint32_t)m->n_ff);
	if (m->n_head_kv_swa != m->n_head_kv)
		gguf_writer_set_arr(w, K("attention.head_count_kv"),
		                    GGUF_TYPE_INT32, kv, (uint64_t)m->n_layer);
	else
		gguf_writer_set_u32(w, K("attention.head_count_kv"),
		                    (uint32_t)m->n_head_kv);
	gguf_writer_set_arr(w, K("attention.sliding_window_pattern"),
	                    GGUF_TYPE_BOOL, swa, (uint64_t)m->n_layer);
	gguf_writer_set_u32(w, K("attention.key_length"),
	                    (uint32_t)m->head_dim);
	gguf_writer_set_u32(w, K("attention.value_length"),
	                    (uint32_t)m->head_dim);
	gguf_writer_set_u32(w, K("attention.key_length_swa"),
	                    (uint32_t)m->head_dim_swa);
	gguf_writer_set_u32(w, K("attention.value_length_swa"),
	                    (uint32_t)m->head_dim_swa);
	gguf_writer_set_u32(w, K("rope.dimension_count_swa"),
	                    (uint32_t)m->head_dim_swa);
	gguf_writer_set_u32(w, K("attention.shared_kv_layers"),
	                    (uint32_t)m->n_kv_shared);
	gguf_writer_set_u32(w, K("embedding_length_per_layer_input"),
	                    (uint32_t)m->n_embd_per_layer);
	if (m->softcap != 0)
		gguf_writer_set_f32(w, K("final_logit_softcapping"),
		                    (float)m->softcap);
#undef K
}

/* Metadata keys: general.* and the architecture's. */
static void mk_metadata(struct gguf_writer *w, const struct mk_model *m)
{
	char key[128];

#define K(suffix) (snprintf(key, sizeof(key), "%s." suffix, m->arch->name), key)
	gguf_writer_set_str(w, "general.architecture", m->arch->name);
	gguf_writer_set_str(w, "general.name", "parley random model");
	gguf_writer_set_u32(w, "general.alignment", 32);
	gguf_writer_set_u32(w, K("block_count"),
	                    (uint32_t)(m->n_layer + m->n_nextn));
	gguf_writer_set_u32(w, K("context_length"), (uint32_t)m->n_ctx);
	gguf_writer_set_u32(w, K("embedding_length"), (uint32_t)m->n_embd);
	if (m->features & MK_FEAT_G4)
		mk_metadata_g4(w, m);
	else
		gguf_writer_set_u32(w, K("feed_forward_length"),
		                    (uint32_t)m->n_ff);
	if (m->features & MK_FEAT_EXPERTS) {
		gguf_writer_set_u32(w, K("expert_count"),
		                    (uint32_t)m->n_expert);
		gguf_writer_set_u32(w, K("expert_used_count"),
		                    (uint32_t)m->n_expert_used);
		gguf_writer_set_u32(w, K("expert_feed_forward_length"),
		                    (uint32_t)m->n_ff_exp);
	}
	if (m->features & MK_FEAT_SHEXP)
		gguf_writer_set_u32(w, K("expert_shared_feed_forward_length"),
		                    (uint32_t)m->n_ff_shexp);
	if (m->features & MK_FEAT_GDN)
		mk_metadata_gdn(w, m);
	gguf_writer_set_u32(w, K("attention.head_count"), (uint32_t)m->n_head);
	if (!(m->features & MK_FEAT_G4))
		gguf_writer_set_u32(w, K("attention.head_count_kv"),
		                    (uint32_t)m->n_head_kv);
	if (m->head_dim * m->n_head != m->n_embd &&
	    !(m->features & MK_FEAT_G4)) {
		gguf_writer_set_u32(w, K("attention.key_length"),
		                    (uint32_t)m->head_dim);
		gguf_writer_set_u32(w, K("attention.value_length"),
		                    (uint32_t)m->head_dim);
	}
	gguf_writer_set_u32(w, K("rope.dimension_count"), (uint32_t)m->n_rot);
	gguf_writer_set_f32(w, K("rope.freq_base"), (float)m->rope_base);
	if (m->features & MK_FEAT_ROPE_YARN) {
		gguf_writer_set_str(w, K("rope.scaling.type"), "yarn");
		gguf_writer_set_f32(w, K("rope.scaling.factor"),
		                    (float)m->rope_factor);
		if (m->yarn_orig_ctx != 0)
			gguf_writer_set_u32(
			    w, K("rope.scaling.original_context_length"),
			    (uint32_t)m->yarn_orig_ctx);
	}
	if (m->features & MK_FEAT_ROPE_LINEAR) {
		gguf_writer_set_str(w, K("rope.scaling.type"), "linear");
		gguf_writer_set_f32(w, K("rope.scaling.factor"),
		                    (float)m->rope_factor);
	}
	if (m->features & MK_FEAT_SWA) {
		gguf_writer_set_u32(w, K("attention.sliding_window"),
		                    (uint32_t)m->n_swa);
		if (m->swa_pattern != 0 && !(m->features & MK_FEAT_G4))
			gguf_writer_set_u32(
			    w, K("attention.sliding_window_pattern"),
			    (uint32_t)m->swa_pattern);
		if (m->rope_base_swa != 0)
			gguf_writer_set_f32(w, K("rope.freq_base_swa"),
			                    (float)m->rope_base_swa);
	}
	gguf_writer_set_f32(w, K("attention.layer_norm_rms_epsilon"),
	                    (float)m->rms_eps);
	gguf_writer_set_u32(w, "general.file_type", 0);
#undef K
}

/* --no-vocab: a tokenizer of no tokens, which llama.cpp loads with
   n_vocab placeholders (ARCH.vocab_size); parley has none either way. */
static void mk_no_vocab(struct gguf_writer *w, const struct mk_model *m)
{
	char key[128];

	snprintf(key, sizeof(key), "%s.vocab_size", m->arch->name);
	gguf_writer_set_u32(w, key, (uint32_t)m->n_vocab);
	gguf_writer_set_str(w, "tokenizer.ggml.model", "none");
}

/* Copy tokenizer.* keys from PATH; sets *n_vocab from the token list. */
static int mk_copy_tokenizer(struct gguf_writer *w, const char *path,
                             int64_t *n_vocab, struct gguf_file **keep)
{
	char err[512];
	struct gguf_file *f = gguf_split_open(path, err, sizeof(err));
	const struct gguf_array *toks;

	if (f == NULL) {
		fprintf(stderr, "parley-mkmodel: %s\n", err);
		return -1;
	}
	if (gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks,
	                 err, sizeof(err)) != GGUF_OK) {
		fprintf(stderr, "parley-mkmodel: %s: %s\n", path, err);
		gguf_close(f);
		return -1;
	}
	if (*n_vocab != 0 && *n_vocab != (int64_t)toks->n) {
		fprintf(stderr,
		        "parley-mkmodel: --n-vocab %lld differs from the %llu "
		        "tokens of %s\n",
		        (long long)*n_vocab, (unsigned long long)toks->n, path);
		gguf_close(f);
		return -1;
	}
	*n_vocab = (int64_t)toks->n;
	for (uint64_t i = 0; i < f->n_kv; i++)
		if (strncmp(f->kv[i].key, "tokenizer.", 10) == 0)
			gguf_writer_copy_kv(w, &f->kv[i]);
	*keep = f; /* strings point into its mapping until the write */
	return 0;
}

/* On/off options of the features (the usage text names an architecture's
   features by the options that turn them on). */
static const struct {
	const char *name, *alias; /* alias: the older spelling, or NULL */
	uint32_t feat;            /* MK_FEAT_* */
	int on;                   /* 1: asks for it, 0: refuses it */
} mk_switches[] = {
    {"--qkv-bias", "--bias", MK_FEAT_QKV_BIAS, 1},
    {"--no-qkv-bias", "--no-bias", MK_FEAT_QKV_BIAS, 0},
    {"--tied", NULL, MK_FEAT_TIED, 1},
    {"--no-tied", NULL, MK_FEAT_TIED, 0},
    {"--rope-freqs", NULL, MK_FEAT_ROPE_FACTORS, 1},
    {"--qk-norm", NULL, MK_FEAT_QK_NORM, 1},
    {"--no-qk-norm", NULL, MK_FEAT_QK_NORM, 0},
    {"--post-norms", NULL, MK_FEAT_POST_NORMS, 1},
    {"--no-post-norms", NULL, MK_FEAT_POST_NORMS, 0},
    {"--attn-k-eq-v", NULL, MK_FEAT_K_EQ_V, 1},
    {"--double-wide-mlp", NULL, MK_FEAT_DOUBLE_WIDE, 1},
};

/* Usage text. */
static void mk_usage(FILE *f)
{
	fputs("usage: parley-mkmodel -o FILE [--arch A] [options]\n"
	      "  --arch A        the architecture and the features it "
	      "implies:\n",
	      f);
	for (size_t i = 0; i < MK_COUNT(mk_archs); i++) {
		fprintf(f, "                    %s: %s RoPE", mk_archs[i].name,
		        mk_rope_styles[mk_archs[i].rope]);
		for (size_t k = 0; k < MK_COUNT(mk_switches); k++)
			if (mk_switches[k].on &&
			    (mk_archs[i].features & mk_switches[k].feat))
				fprintf(f, ", %s", mk_switches[k].name);
		if (mk_archs[i].implied != NULL)
			fprintf(f, "\n                      (by the name: %s)",
			        mk_archs[i].implied);
		fputs("\n", f);
	}
	fputs(
	    "                  (default: the first of llama and qwen2 that\n"
	    "                  agrees with --rope-style and --no-qkv-bias)\n"
	    "  --n-vocab N --n-embd N --n-ff N --n-layer N --n-head N\n"
	    "  --n-head-kv N --head-dim N --n-ctx N --rope-base F\n"
	    "  --rms-eps F --seed N\n"
	    "  --out-norm-scale F  output_norm.weight ~ F (1 + N(0, 0.1^2)):\n"
	    "                  logits F times larger (default 1)\n"
	    "  --type T        layer matrices (F32 F16 BF16 Q8_0 Q4_0 Q4_1\n"
	    "                  Q5_0 Q5_1 Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_NL\n"
	    "                  IQ4_XS IQ3_XXS IQ3_S IQ2_XXS IQ2_XS IQ2_S\n"
	    "                  IQ1_S IQ1_M TQ1_0 TQ2_0 MXFP4)\n"
	    "  --embd-type T   token_embd (default: --type)\n"
	    "  --out-type T    output.weight (default: --type)\n"
	    "  --expert-type T a mixture's expert stacks (default: --type;\n"
	    "                  ffn_down_exps: --more-bits-type where it\n"
	    "                  applies, else this; gpt-oss: MXFP4)\n"
	    "  --more-bits-type T  attn_v and ffn_down in the layers where\n"
	    "                  llama.cpp's K-quant mixes spend more bits\n"
	    "                  (Q4_K_M: --type Q4_K --more-bits-type Q6_K\n"
	    "                  --out-type Q6_K)\n"
	    "  --tied / --no-tied  no output.weight (LM head = token_embd)\n"
	    "                  (default: the architecture's)\n"
	    "  --qkv-bias / --no-qkv-bias  Q/K/V biases (also --bias /\n"
	    "                  --no-bias; default: the architecture's)\n"
	    "  --rope-style norm|neox  rotate adjacent pairs or halves: GGUF\n"
	    "                  keeps it in the architecture, so it must be\n"
	    "                  --arch's or it picks the architecture\n"
	    "  --n-rot N       rope.dimension_count: rotated dims of a head\n"
	    "                  (even; default: the head dim)\n"
	    "  --rope-scaling none|linear|yarn  with linear or yarn,\n"
	    "                  --rope-scale-factor F (>= 1): "
	    "rope.scaling.type\n"
	    "                  and .factor; --yarn-orig-ctx N: YaRN's\n"
	    "                  original_context_length (default: no key)\n"
	    "  --rope-freqs    write rope_freqs.weight (llama-3 style)\n"
	    "  --qk-norm / --no-qk-norm  attn_q_norm, attn_k_norm: RMSNorm of\n"
	    "                  each head of Q and K before RoPE\n"
	    "  --post-norms / --no-post-norms  post_attention_norm,\n"
	    "                  post_ffw_norm: RMSNorm of each block's output\n"
	    "  --sliding-window N  attention.sliding_window: in a sliding\n"
	    "                  layer the token at p sees p' > p - N\n"
	    "  --sliding-window-pattern N  every N-th layer is global, the\n"
	    "                  others slide (default: no key, the loader's 6)\n"
	    "  --rope-base-swa F  rope.freq_base_swa: the sliding layers'\n"
	    "                  RoPE base (default: no key, the loader's\n"
	    "                  10000); --rope-base and --rope-scaling are\n"
	    "                  the global layers'\n"
	    "  --n-expert N --n-expert-used K --n-ff-exp N  a mixture's\n"
	    "                  experts, those chosen per token and their\n"
	    "                  hidden size (qwen3moe; defaults 8, 2, --n-ff)\n",
	    f);
	fputs(
	    "  --n-ff-shexp N  the shared expert's hidden size (qwen35moe;\n"
	    "                  default --n-ff)\n"
	    "  qwen35, qwen35moe (Gated DeltaNet; ARCH.ssm.* keys):\n"
	    "  --ssm-conv-kernel N  taps of the causal conv (default 4)\n"
	    "  --ssm-state-size N   S, dims of a q/k/v head (default\n"
	    "                  --head-dim)\n"
	    "  --ssm-group-count N  H_k, query/key heads (default\n"
	    "                  --n-head-kv)\n"
	    "  --ssm-time-step-rank N  H_v, value heads, a multiple of H_k\n"
	    "                  (default --n-head)\n"
	    "  --ssm-inner-size N  the key ssm.inner_size (default H_v S,\n"
	    "                  the only value llama.cpp reads right)\n"
	    "  --full-attention-interval N  layer i is full (gated)\n"
	    "                  attention iff (i + 1) % N == 0 (default 4)\n"
	    "  --rope-sections A,B,C,D  rope.dimension_sections (M-RoPE\n"
	    "                  pairs per position kind; default n_rot/2\n"
	    "                  split as Qwen3.5's 11,11,10,0 of 32)\n"
	    "  --nextn-layers N  N MTP blocks (blk.n_layer...: a full-\n"
	    "                  attention block, nextn.eh_proj/enorm/hnorm)\n"
	    "                  after the --n-layer of the stack; block_count\n"
	    "                  counts them (default 0)\n"
	    "  gemma4 (--sliding-window N required; --head-dim, --n-head-kv,\n"
	    "  --rope-base are the global layers', --sliding-window-pattern P\n"
	    "  makes layer i global iff i % P == P - 1, default 6):\n"
	    "  --head-dim-swa N  the sliding layers' head dim (default\n"
	    "                  --head-dim): attention.key_length_swa\n"
	    "  --n-head-kv-swa N  the sliding layers' KV heads (default\n"
	    "                  --n-head-kv; differing: head_count_kv per "
	    "layer)\n"
	    "  --rope-partial F  a global head rotates its first F of pairs,\n"
	    "                  rope_freqs 1e30 for the rest (default 0.25)\n"
	    "  --attn-k-eq-v   global layers without attn_v: V = K's\n"
	    "                  projection (31B, 26B-A4B)\n"
	    "  --kv-shared-layers N  the last N layers read the KV of the\n"
	    "                  last earlier layer of their kind\n"
	    "  --double-wide-mlp  those N layers' FFN 2 --n-ff wide (E2B)\n"
	    "  --n-embd-per-layer N  per-layer embeddings of N per layer (E\n"
	    "                  models)\n"
	    "  --n-expert N    experts beside the dense MLP (26B-A4B; with\n"
	    "                  --n-expert-used, --n-ff-exp)\n"
	    "  --final-logit-softcap F  logits F tanh(logits / F)\n"
	    "  --tokenizer-from FILE  copy tokenizer.* keys (sets n_vocab)\n"
	    "  --no-vocab      no tokenizer: tokenizer.ggml.model \"none\"\n"
	    "                  and ARCH.vocab_size, which llama.cpp loads\n"
	    "                  with placeholder tokens\n",
	    f);
}

/* Parse one numeric option value. */
static int mk_num(const char *opt, const char *v, double lo, double hi,
                  double *out)
{
	char *end;
	double d = v ? strtod(v, &end) : 0;

	if (v == NULL || *v == '\0' || *end != '\0' || !(d >= lo && d <= hi)) {
		fprintf(stderr, "parley-mkmodel: %s needs a number in %g..%g\n",
		        opt, lo, hi);
		return -1;
	}
	*out = d;
	return 0;
}

/* Index of V in NAMES (N), or -1 with a message naming option OPT. */
static int mk_pick(const char *opt, const char *v, const char *const *names,
                   size_t n)
{
	for (size_t i = 0; v != NULL && i < n; i++)
		if (strcmp(v, names[i]) == 0)
			return (int)i;
	fprintf(stderr, "parley-mkmodel: %s takes %s", opt, names[0]);
	for (size_t i = 1; i < n; i++)
		fprintf(stderr, "|%s", names[i]);
	fputs("\n", stderr);
	return -1;
}

/* Parse option A, if it is a feature switch, into O. Returns 1 (the
   arguments used), or 0 if A is not a switch. */
static int mk_parse_switch(const char *a, struct mk_opts *o)
{
	for (size_t k = 0; k < MK_COUNT(mk_switches); k++) {
		uint32_t f = mk_switches[k].feat;

		if (strcmp(a, mk_switches[k].name) != 0 &&
		    (mk_switches[k].alias == NULL ||
		     strcmp(a, mk_switches[k].alias) != 0))
			continue;
		o->feat_on =
		    mk_switches[k].on ? o->feat_on | f : o->feat_on & ~f;
		o->feat_off =
		    mk_switches[k].on ? o->feat_off & ~f : o->feat_off | f;
		return 1;
	}
	return 0;
}

/* Parse option A, if it takes a count or a type, with value V (NULL:
   none) into M. Returns 2 (the arguments used), 0 if A is neither, or -1
   with a message. */
static int mk_parse_value(const char *a, const char *v, struct mk_model *m)
{
	const struct {
		const char *name;
		int64_t *dst;
		double max;
	} ints[] = {
	    {"--n-vocab", &m->n_vocab, 4194304},
	    {"--n-embd", &m->n_embd, 65536},
	    {"--n-ff", &m->n_ff, 262144},
	    {"--n-layer", &m->n_layer, 1024},
	    {"--n-head", &m->n_head, 1024},
	    {"--n-head-kv", &m->n_head_kv, 1024},
	    {"--head-dim", &m->head_dim, 1024},
	    {"--n-rot", &m->n_rot, 1024},
	    {"--n-ctx", &m->n_ctx, 1048576},
	    {"--sliding-window", &m->n_swa, 1048576},
	    {"--sliding-window-pattern", &m->swa_pattern, 1024},
	    {"--n-expert", &m->n_expert, 1024},
	    {"--n-expert-used", &m->n_expert_used, 64},
	    {"--n-ff-exp", &m->n_ff_exp, 262144},
	    {"--yarn-orig-ctx", &m->yarn_orig_ctx, 1048576},
	    {"--ssm-conv-kernel", &m->d_conv, 64},
	    {"--ssm-state-size", &m->ssm_state, 1024},
	    {"--ssm-group-count", &m->ssm_k_heads, 1024},
	    {"--ssm-time-step-rank", &m->ssm_v_heads, 1024},
	    {"--ssm-inner-size", &m->ssm_inner, 1048576},
	    {"--full-attention-interval", &m->fa_interval, 1024},
	    {"--nextn-layers", &m->n_nextn, 16},
	    {"--n-ff-shexp", &m->n_ff_shexp, 262144},
	    {"--head-dim-swa", &m->head_dim_swa, 1024},
	    {"--n-head-kv-swa", &m->n_head_kv_swa, 1024},
	    {"--kv-shared-layers", &m->n_kv_shared, 1024},
	    {"--n-embd-per-layer", &m->n_embd_per_layer, 65536},
	};
	const struct {
		const char *name;
		uint32_t *dst;
	} types[] = {
	    {"--type", &m->type},
	    {"--embd-type", &m->embd_type},
	    {"--out-type", &m->out_type},
	    {"--more-bits-type", &m->more_type},
	    {"--expert-type", &m->exp_type},
	};
	double d;

	for (size_t k = 0; k < MK_COUNT(ints); k++) {
		if (strcmp(a, ints[k].name) != 0)
			continue;
		if (mk_num(a, v, 1, ints[k].max, &d))
			return -1;
		*ints[k].dst = (int64_t)d;
		return 2;
	}
	for (size_t k = 0; k < MK_COUNT(types); k++) {
		if (strcmp(a, types[k].name) != 0)
			continue;
		if (v == NULL || mk_parse_type(v, types[k].dst)) {
			fprintf(stderr, "parley-mkmodel: unknown type %s\n",
			        v ? v : "(none)");
			return -1;
		}
		return 2;
	}
	return 0;
}

/* Parse --rope-sections V, "A,B,C,D" (counts of rotated pairs), into
   SEC[4]. Returns 0 or -1 with a message. */
static int mk_parse_sections(const char *a, const char *v, int64_t *sec)
{
	const char *p = v;
	int64_t sum = 0;

	for (int i = 0; p != NULL && i < 4; i++) {
		char *end;
		long x = strtol(p, &end, 10);

		if (end == p || x < 0 || x > 1024 ||
		    *end != (i < 3 ? ',' : '\0'))
			break;
		sec[i] = x;
		sum += x;
		p = end + 1;
		if (i == 3 && sum > 0)
			return 0;
	}
	fprintf(stderr,
	        "parley-mkmodel: %s takes four counts A,B,C,D (not all 0)\n",
	        a);
	return -1;
}

/* Parse option A, if it is one of the RoPE's, with value V (NULL: none)
   into O. Returns 2 (the arguments used), 0 if it is not, or -1. */
static int mk_parse_rope(const char *a, const char *v, struct mk_opts *o)
{
	static const char *const scalings[] = {"none", "linear", "yarn"};
	int k;

	if (strcmp(a, "--rope-base") == 0)
		return mk_num(a, v, 1.0001, 1e12, &o->m.rope_base) ? -1 : 2;
	if (strcmp(a, "--rope-base-swa") == 0)
		return mk_num(a, v, 1.0001, 1e12, &o->m.rope_base_swa) ? -1 : 2;
	if (strcmp(a, "--rope-scale-factor") == 0)
		return mk_num(a, v, 1, 1e6, &o->m.rope_factor) ? -1 : 2;
	if (strcmp(a, "--rope-partial") == 0)
		return mk_num(a, v, 1e-6, 1, &o->m.rope_partial) ? -1 : 2;
	if (strcmp(a, "--rope-sections") == 0)
		return mk_parse_sections(a, v, o->m.rope_sections) ? -1 : 2;
	if (strcmp(a, "--rope-style") == 0) {
		o->rope =
		    mk_pick(a, v, mk_rope_styles, MK_COUNT(mk_rope_styles));
		return o->rope < 0 ? -1 : 2;
	}
	if (strcmp(a, "--rope-scaling") != 0)
		return 0;
	k = mk_pick(a, v, scalings, MK_COUNT(scalings));
	if (k < 0)
		return -1;
	o->feat_on &= ~(uint32_t)(MK_FEAT_ROPE_LINEAR | MK_FEAT_ROPE_YARN);
	if (k == 1)
		o->feat_on |= MK_FEAT_ROPE_LINEAR;
	if (k == 2)
		o->feat_on |= MK_FEAT_ROPE_YARN;
	return 2;
}

/* Parse the command line into O. Returns 0, 1 (help shown) or -1. */
static int mk_parse(int argc, char **argv, struct mk_opts *o)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		double d;
		int used = mk_parse_switch(a, o);

		if (used == 0)
			used = mk_parse_value(a, v, &o->m);
		if (used == 0)
			used = mk_parse_rope(a, v, o);
		if (used < 0)
			return -1;
		if (used > 0) {
			i += used - 1;
			continue;
		}
		if (strcmp(a, "--arch") == 0 && v) {
			o->arch = v;
			i++;
		} else if (strcmp(a, "-o") == 0 && v) {
			o->out = v;
			i++;
		} else if (strcmp(a, "--tokenizer-from") == 0 && v) {
			o->tok_from = v;
			i++;
		} else if (strcmp(a, "--no-vocab") == 0) {
			o->no_vocab = 1;
		} else if (strcmp(a, "--rms-eps") == 0) {
			if (mk_num(a, v, 1e-12, 0.1, &o->m.rms_eps))
				return -1;
			i++;
		} else if (strcmp(a, "--final-logit-softcap") == 0) {
			if (mk_num(a, v, 1e-3, 1e4, &o->m.softcap))
				return -1;
			i++;
		} else if (strcmp(a, "--out-norm-scale") == 0) {
			if (mk_num(a, v, 1e-3, 1e3, &o->m.out_norm_scale))
				return -1;
			i++;
		} else if (strcmp(a, "--seed") == 0) {
			if (mk_num(a, v, 0, 9e15, &d))
				return -1;
			o->m.seed = (uint64_t)d;
			i++;
		} else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			mk_usage(stdout);
			return 1;
		} else {
			fprintf(stderr, "parley-mkmodel: bad option %s\n", a);
			mk_usage(stderr);
			return -1;
		}
	}
	return 0;
}

/* The architecture: --arch, else the first row that has the RoPE style
   asked for and no feature refused. NULL with a message if none. */
static const struct mk_arch *mk_pick_arch(const struct mk_opts *o)
{
	for (size_t i = 0; i < MK_COUNT(mk_archs); i++) {
		const struct mk_arch *a = &mk_archs[i];

		if (o->arch != NULL
		        ? strcmp(o->arch, a->name) == 0
		        : a->implied == NULL &&
		              (o->rope < 0 || (int)a->rope == o->rope) &&
		              (a->features & o->feat_off) == 0)
			return a;
	}
	if (o->arch != NULL)
		fprintf(stderr, "parley-mkmodel: unknown architecture %s\n",
		        o->arch);
	else
		fprintf(stderr, "parley-mkmodel: no architecture has these "
		                "features (--rope-style, --no-qkv-bias)\n");
	return NULL;
}

/* MK_FEAT_GDN's and MK_FEAT_SHEXP's defaults and checks. Returns 0 or -1
   with a message. */
static int mk_check_gdn(struct mk_model *m)
{
	const int64_t half = m->n_rot / 2;
	int64_t *sec = m->rope_sections;

	if (!(m->features & MK_FEAT_GDN)) {
		if (m->d_conv || m->ssm_state || m->ssm_k_heads ||
		    m->ssm_v_heads || m->ssm_inner || m->fa_interval ||
		    m->n_nextn || sec[0] || sec[1] || sec[2] || sec[3]) {
			fprintf(stderr,
			        "parley-mkmodel: --ssm-*, "
			        "--full-attention-interval, --rope-sections "
			        "and --nextn-layers need --arch qwen35 or "
			        "qwen35moe\n");
			return -1;
		}
	} else {
		if (m->d_conv == 0)
			m->d_conv = 4;
		if (m->ssm_state == 0)
			m->ssm_state = m->head_dim;
		if (m->ssm_k_heads == 0)
			m->ssm_k_heads = m->n_head_kv;
		if (m->ssm_v_heads == 0)
			m->ssm_v_heads = m->n_head;
		if (m->ssm_inner == 0) /* anything else: a file llama.cpp
		                          misreads (loader error tests) */
			m->ssm_inner = m->ssm_v_heads * m->ssm_state;
		if (m->fa_interval == 0)
			m->fa_interval = 4; /* llama.cpp's default */
		if (!sec[0] && !sec[1] && !sec[2] && !sec[3]) {
			/* Qwen3.5's 11,11,10 of 32: every rotated pair in a
			   text position's section (IMROPE) */
			sec[0] = (half + 2) / 3;
			sec[1] = (half + 1) / 3;
			sec[2] = half / 3;
		}
		if (m->ssm_v_heads % m->ssm_k_heads != 0) {
			fprintf(stderr, "parley-mkmodel: --ssm-time-step-rank "
			                "(value heads) must be a multiple of "
			                "--ssm-group-count (key heads)\n");
			return -1;
		}
	}
	if (!(m->features & MK_FEAT_SHEXP)) {
		if (m->n_ff_shexp != 0) {
			fprintf(stderr, "parley-mkmodel: --n-ff-shexp needs "
			                "--arch qwen35moe\n");
			return -1;
		}
	} else if (m->n_ff_shexp == 0) {
		m->n_ff_shexp = m->n_ff;
	}
	return 0;
}

/* MK_FEAT_G4's layer pattern and KV sharing as llama.cpp can read them.
   Returns 0 or -1 with a message. */
static int mk_check_g4_layers(const struct mk_model *m)
{
	const int64_t first = m->n_layer - m->n_kv_shared;

	if (m->swa_pattern < 2 || m->swa_pattern > m->n_layer) {
		fprintf(stderr,
		        "parley-mkmodel: gemma4 needs a sliding and a "
		        "global layer: --sliding-window-pattern P with 2 "
		        "<= P <= --n-layer (layer i global iff i %% P == "
		        "P - 1)\n");
		return -1;
	}
	/* llama.cpp's reuse rule (llama_model::create_memory): a shared
	   layer reads layer first - 1 if global, first - 2 if sliding */
	if (m->n_kv_shared != 0 && (first < 2 || mk_is_swa(m, first - 1) ||
	                            !mk_is_swa(m, first - 2))) {
		fprintf(
		    stderr,
		    "parley-mkmodel: --kv-shared-layers N: the shared layers "
		    "read layer F - 1 (global ones) or F - 2 (sliding ones), "
		    "F = --n-layer - N: layer F - 1 must be global, F - 2 "
		    "sliding\n");
		return -1;
	}
	if ((m->features & MK_FEAT_DOUBLE_WIDE) && m->n_kv_shared == 0) {
		fprintf(stderr,
		        "parley-mkmodel: --double-wide-mlp widens the "
		        "KV-sharing layers: it needs --kv-shared-layers\n");
		return -1;
	}
	return 0;
}

/* What gemma4 files must or cannot have (the keys llama.cpp requires,
   the RoPE it reads). Returns 0 or -1 with a message. */
static int mk_check_g4_keys(const struct mk_model *m)
{
	const char *why = NULL;

	if (m->n_swa == 0)
		why = "gemma4 needs --sliding-window N (llama.cpp requires "
		      "the key)";
	else if (m->n_rot != 0)
		why = "gemma4 rotates whole heads (rope.dimension_count = "
		      "--head-dim, _swa = --head-dim-swa): no --n-rot; "
		      "--rope-partial F sets the global layers' rotated share";
	else if (m->features & (MK_FEAT_ROPE_LINEAR | MK_FEAT_ROPE_YARN))
		why = "gemma4 files have no RoPE scaling: no --rope-scaling";
	else if ((m->features & MK_FEAT_ROPE_FACTORS) && m->rope_partial != 0)
		why = "--rope-freqs (random factors) or --rope-partial F "
		      "(Gemma 4's proportional RoPE), not both";
	if (why != NULL)
		fprintf(stderr, "parley-mkmodel: %s\n", why);
	return why != NULL ? -1 : 0;
}

/* MK_FEAT_G4's defaults and checks, before mk_check's own (head_dim and
   n_head_kv are the global layers'). Returns 0 or -1 with a message. */
static int mk_check_g4(struct mk_model *m)
{
	const uint32_t only = MK_FEAT_K_EQ_V | MK_FEAT_DOUBLE_WIDE;

	if (!(m->features & MK_FEAT_G4)) {
		if (!m->head_dim_swa && !m->n_head_kv_swa && !m->n_kv_shared &&
		    !m->n_embd_per_layer && !m->softcap && !m->rope_partial &&
		    !(m->features & only))
			return 0;
		fprintf(stderr, "parley-mkmodel: --head-dim-swa, "
		                "--n-head-kv-swa, --kv-shared-layers, "
		                "--n-embd-per-layer, --final-logit-softcap, "
		                "--rope-partial, --attn-k-eq-v and "
		                "--double-wide-mlp need --arch gemma4\n");
		return -1;
	}
	if (mk_check_g4_keys(m))
		return -1;
	if (m->n_head_kv == 0)
		m->n_head_kv = m->n_head;
	if (m->head_dim == 0)
		m->head_dim = m->n_embd / m->n_head;
	if (m->head_dim_swa == 0)
		m->head_dim_swa = m->head_dim;
	if (m->n_head_kv_swa == 0)
		m->n_head_kv_swa = m->n_head_kv;
	if (m->swa_pattern == 0)
		m->swa_pattern = 6; /* the real models' 5 sliding : 1 global */
	if (m->rope_partial == 0 && !(m->features & MK_FEAT_ROPE_FACTORS))
		m->rope_partial = 0.25;
	if (m->rope_base_swa == 0)
		m->rope_base_swa = 10000.0;
	if (m->n_expert != 0)
		m->features |= MK_FEAT_EXPERTS;
	if (m->n_embd_per_layer != 0)
		m->features |= MK_FEAT_PLE;
	if (m->head_dim % 2 != 0 || m->head_dim_swa % 2 != 0 ||
	    m->n_head % m->n_head_kv_swa != 0) {
		fprintf(stderr, "parley-mkmodel: --head-dim and --head-dim-swa "
		                "must be even, --n-head a multiple of "
		                "--n-head-kv-swa\n");
		return -1;
	}
	return mk_check_g4_layers(m);
}

/* Check the options; fill the model's defaults. Returns 0 or -1. */
static int mk_check(struct mk_opts *o)
{
	struct mk_model *m = &o->m;

	if (o->out == NULL) {
		fprintf(stderr, "parley-mkmodel: need -o FILE\n");
		return -1;
	}
	m->arch = mk_pick_arch(o);
	if (m->arch == NULL)
		return -1;
	m->rope = o->rope >= 0 ? (enum mk_rope_style)o->rope : m->arch->rope;
	if (m->rope != m->arch->rope) {
		fprintf(stderr,
		        "parley-mkmodel: %s files are read with %s RoPE (the "
		        "style follows general.architecture); without --arch "
		        "--rope-style picks the architecture\n",
		        m->arch->name, mk_rope_styles[m->arch->rope]);
		return -1;
	}
	/* --no-qkv-bias with an architecture that requires them writes a
	   file the loader refuses (its error tests) */
	m->features = (m->arch->features & ~o->feat_off) | o->feat_on;
	if (m->n_swa != 0)
		m->features |= MK_FEAT_SWA;
	if (mk_check_g4(m))
		return -1;
	if (m->n_head_kv == 0)
		m->n_head_kv = m->n_head;
	if (m->head_dim == 0)
		m->head_dim = m->n_embd / m->n_head;
	if (m->n_rot == 0)
		m->n_rot = m->head_dim;
	if (m->embd_type == UINT32_MAX)
		m->embd_type = m->type;
	if (m->out_type == UINT32_MAX)
		m->out_type = m->type;
	if (m->n_head % m->n_head_kv != 0 || m->n_rot % 2 != 0 ||
	    m->n_rot < 2 || m->n_rot > m->head_dim) {
		fprintf(stderr, "parley-mkmodel: n_head must be a multiple of "
		                "n_head_kv and n_rot (default: head_dim) even, "
		                "at most head_dim\n");
		return -1;
	}
	if (((m->features & (MK_FEAT_ROPE_LINEAR | MK_FEAT_ROPE_YARN)) != 0) !=
	    (m->rope_factor != 0)) {
		fprintf(stderr, "parley-mkmodel: --rope-scaling linear goes "
		                "with --rope-scale-factor F\n");
		return -1;
	}
	if (m->n_swa != 0)
		m->features |= MK_FEAT_SWA;
	if (m->n_swa == 0 && (m->swa_pattern != 0 || m->rope_base_swa != 0)) {
		fprintf(stderr, "parley-mkmodel: --sliding-window-pattern and "
		                "--rope-base-swa go with --sliding-window N\n");
		return -1;
	}
	if (m->features & MK_FEAT_EXPERTS) {
		if (m->n_expert == 0)
			m->n_expert = 8;
		if (m->n_expert_used == 0)
			m->n_expert_used = 2;
		if (m->n_ff_exp == 0)
			m->n_ff_exp = m->n_ff;
		if (m->n_expert_used > m->n_expert) {
			fprintf(stderr, "parley-mkmodel: --n-expert-used is "
			                "more than --n-expert\n");
			return -1;
		}
	} else if (m->n_expert != 0 || m->n_expert_used != 0 ||
	           m->n_ff_exp != 0) {
		fprintf(stderr, "parley-mkmodel: --n-expert, --n-expert-used "
		                "and --n-ff-exp need a mixture architecture "
		                "(--arch qwen3moe; gemma4: --n-expert)\n");
		return -1;
	}
	if (mk_check_gdn(m))
		return -1;
	if (o->no_vocab && o->tok_from != NULL) {
		fprintf(stderr, "parley-mkmodel: --no-vocab or "
		                "--tokenizer-from, not both\n");
		return -1;
	}
	return 0;
}

/* Entry point: parley-mkmodel ARGS. Returns the process exit status. */
int cmd_mkmodel(int argc, char **argv)
{
	struct mk_opts o = {
	    .rope = -1,
	    .m =
	        {
	            .n_embd = 64,
	            .n_ff = 160,
	            .n_layer = 2,
	            .n_head = 4,
	            .n_ctx = 2048,
	            .rope_base = 10000.0,
	            .out_norm_scale = 1.0,
	            .rms_eps = 1e-6,
	            .type = QTYPE_F32,
	            .embd_type = UINT32_MAX,
	            .more_type = UINT32_MAX,
	            .out_type = UINT32_MAX,
	            .exp_type = UINT32_MAX,
	            .seed = 1,
	        },
	};
	struct gguf_file *tok = NULL;
	struct gguf_writer *w;
	struct mk_state st = {0};
	char err[512];
	int rc;

	rc = mk_parse(argc, argv, &o);
	if (rc != 0)
		return rc > 0 ? 0 : 2;
	if (mk_check(&o))
		return 2;
	w = gguf_writer_new();
	if (w == NULL)
		return 1;
	mk_metadata(w, &o.m);
	/* mk_fill is a function of (tensor, row) only: rows may be made in
	   parallel, the file is the same (a 7.6 GB Q8_0 model's gaussians
	   took minutes on one thread) */
	gguf_writer_set_threads(w, 0);
	if (o.tok_from &&
	    mk_copy_tokenizer(w, o.tok_from, &o.m.n_vocab, &tok)) {
		gguf_writer_free(w);
		return 1;
	}
	if (o.m.n_vocab == 0)
		o.m.n_vocab = 256;
	if (o.no_vocab)
		mk_no_vocab(w, &o.m);
	st.cap =
	    MK_COUNT(mk_global_tensors) +
	    MK_COUNT(mk_layer_tensors) * (size_t)(o.m.n_layer + o.m.n_nextn);
	st.t = calloc(st.cap, sizeof(*st.t));
	if (st.t == NULL)
		snprintf(err, sizeof(err), "out of memory");
	rc = st.t == NULL || mk_tensors(w, &st, &o.m, err, sizeof(err)) ||
	     gguf_writer_write(w, o.out, err, sizeof(err));
	if (rc)
		fprintf(stderr, "parley-mkmodel: %s\n", err);
	gguf_writer_free(w);
	gguf_close(tok);
	free(st.t);
	return rc ? 1 : 0;
}

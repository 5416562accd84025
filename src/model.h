/*
 * model.h - a transformer described by its GGUF file: hyper-parameters and
 * the table of weights.
 *
 * NOTES ON THE DESIGN
 *
 * Everything here comes from the GGUF metadata and tensor table; nothing
 * is hard-coded per model. The supported architectures are the llama
 * family (general.architecture "llama": Llama 2/3, TinyLlama, SmolLM2,
 * Mistral) and qwen2 (Qwen2, Qwen2.5, DeepSeek-R1-Distill-Qwen). Both are
 * the same pre-norm decoder:
 *
 *   x = token_embd[tok]                                   fp32 residual
 *   for each layer:
 *     h = rmsnorm(x) * attn_norm
 *     q = Wq h (+bq), k = Wk h (+bk), v = Wv h (+bv)
 *     rope(q, k, pos)          llama: adjacent pairs; qwen2: NEOX halves
 *     x += Wo attention(q, K[0..pos], V[0..pos])       causal, GQA
 *     h = rmsnorm(x) * ffn_norm
 *     x += Wdown (silu(Wgate h) * (Wup h))
 *   logits = Wout (rmsnorm(x) * output_norm)   Wout = token_embd if tied
 *
 * RoPE style. Hugging Face's Llama rotates the halves of each head (NEOX).
 * llama.cpp's converter permutes the rows of Wq and Wk of "llama" models
 * so that the same rotation becomes one of adjacent pairs (x[2i], x[2i+1])
 * ("normal" style). qwen2 weights are stored un-permuted, so qwen2 uses the
 * halves (x[i], x[i + n_rot/2]). The style is a property of the
 * architecture, recorded in model_config.rope_style.
 *
 * Lifetimes (STYLE.md habit 1): struct model_config is immutable after
 * model_load(); struct model_weights points into the GGUF mapping (read
 * only; the gguf_file must outlive the model) except the small 1-D vectors
 * (norms, biases, rope frequency factors), which are converted to fp32
 * copies owned by the model. Run state and KV cache belong to a backend
 * (engine.h), never to the model.
 *
 * Invariants after a successful model_load():
 *   1. Every tensor the architecture requires is present, of a type
 *      quant_can_compute() accepts, with exactly the shape given in the
 *      field comments below; an error names the first tensor that is not.
 *   2. n_head % n_head_kv == 0; n_rot is even and <= head_dim_k;
 *      head_dim_k == head_dim_v (the attention here needs it).
 *   3. All counts are positive and bounded (MODEL_MAX_* below), so products
 *      such as n_layer * n_ctx * n_head_kv * head_dim fit in int64_t.
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
#define MODEL_MAX_LAYERS   1024
#define MODEL_MAX_EMBD     65536
#define MODEL_MAX_FF       262144
#define MODEL_MAX_HEADS    1024
#define MODEL_MAX_HEAD_DIM 1024
#define MODEL_MAX_VOCAB    4194304
#define MODEL_MAX_CTX      1048576

enum model_arch {
	MODEL_ARCH_LLAMA, /* "llama" */
	MODEL_ARCH_QWEN2, /* "qwen2" */
};

enum model_rope_style {
	MODEL_ROPE_NORM, /* rotate adjacent pairs (x[2i], x[2i+1]) */
	MODEL_ROPE_NEOX, /* rotate halves (x[i], x[i + n_rot/2]) */
};

/* Hyper-parameters: immutable after model_load(). */
struct model_config {
	enum model_arch arch;  /* architecture */
	const char *arch_name; /* "llama" or "qwen2" (static) */
	int32_t n_vocab;       /* rows of token_embd.weight */
	int32_t n_ctx_train;   /* ARCH.context_length */
	int32_t n_embd;        /* ARCH.embedding_length */
	int32_t n_ff;          /* ARCH.feed_forward_length */
	int32_t n_layer;       /* ARCH.block_count */
	int32_t n_head;        /* ARCH.attention.head_count */
	int32_t n_head_kv;     /* ARCH.attention.head_count_kv */
	int32_t head_dim_k;    /* ARCH.attention.key_length or n_embd/n_head */
	int32_t head_dim_v;    /* ARCH.attention.value_length, same default */
	int32_t n_rot;         /* ARCH.rope.dimension_count or head_dim_k */
	float rope_freq_base;  /* ARCH.rope.freq_base, default 10000 */
	float
	    rope_freq_scale; /* 1 / ARCH.rope.scaling.factor (linear), else 1 */
	enum model_rope_style rope_style; /* by architecture, see above */
	float rms_eps;       /* ARCH.attention.layer_norm_rms_epsilon */
	bool tied_output;    /* no output.weight: LM head = token_embd */
	bool has_qkv_bias;   /* attn_q/k/v.bias present (qwen2: always) */
	bool has_rope_freqs; /* rope_freqs.weight present (llama 3.1+) */
};

/* One weight matrix (or vector) as stored in the file. */
struct model_tensor {
	const char *name; /* tensor name (points into the gguf_file) */
	uint32_t type;    /* ggml type id (qtype.h) */
	int64_t ne0;      /* elements per row (contiguous) */
	int64_t ne1;      /* rows (1 for a vector) */
	size_t row_size;  /* bytes per row: quant_row_size(type, ne0) */
	const void *data; /* ne1 rows of row_size bytes, into the mapping */
};

/* The weights of one block. W x means: row r of W dotted with x. */
struct model_layer {
	float *attn_norm;       /* [n_embd] (owned copy) */
	struct model_tensor wq; /* [n_head * head_dim_k rows, n_embd] */
	struct model_tensor wk; /* [n_head_kv * head_dim_k rows, n_embd] */
	struct model_tensor wv; /* [n_head_kv * head_dim_v rows, n_embd] */
	float *bq;              /* [n_head * head_dim_k] or NULL (owned) */
	float *bk;              /* [n_head_kv * head_dim_k] or NULL (owned) */
	float *bv;              /* [n_head_kv * head_dim_v] or NULL (owned) */
	struct model_tensor wo; /* [n_embd rows, n_head * head_dim_v] */
	float *ffn_norm;        /* [n_embd] (owned copy) */
	struct model_tensor w_gate; /* [n_ff rows, n_embd] */
	struct model_tensor w_up;   /* [n_ff rows, n_embd] */
	struct model_tensor w_down; /* [n_embd rows, n_ff] */
};

/* All weights: read-only, valid while the gguf_file is open. */
struct model_weights {
	struct model_tensor token_embd; /* [n_vocab rows, n_embd] */
	float *output_norm;             /* [n_embd] (owned copy) */
	struct model_tensor
	    output;        /* [n_vocab rows, n_embd]; = token_embd if tied */
	float *rope_freqs; /* [n_rot / 2] divisors of the angles, or NULL */
	struct model_layer *layers; /* [n_layer] (owned) */
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

/* The weight matrices of a layer, in a fixed order: wq, wk, wv, wo,
 * w_gate, w_up, w_down. */
#define MODEL_LAYER_MATRICES 7
void model_layer_matrices(const struct model_layer *l,
                          const struct model_tensor *ts[MODEL_LAYER_MATRICES]);

/* Comma-separated list of the supported architectures (static). */
const char *model_supported_archs(void);

/* Bytes of the weights the forward pass reads per token (for reports). */
uint64_t model_weight_bytes(const struct model *m);

#ifdef __cplusplus
}
#endif

#endif /* PARLEY_MODEL_H */

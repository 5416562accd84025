/*
 * model_int.h - what model.c shares with the loaders of its other files
 * (model_ssm.c): the file's shape and the checked key and tensor reads.
 * Not for the backends: they read struct model (model.h).
 */
#ifndef PARLEY_MODEL_INT_H
#define PARLEY_MODEL_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"

struct gguf_file;

/* The file's global hyper-parameters that the layers' descriptors and
 * the RoPE classes are made of. */
struct model_shape {
	int32_t n_layer, n_embd, n_ff, n_head, n_head_kv;
	int32_t head_dim_k, head_dim_v, n_rot, n_ctx_train;
	float rope_freq_base, rope_freq_scale, rms_eps;
	bool rope_linear; /* ARCH.rope.scaling.type = "linear" */
	/* ARCH.rope.scaling.type = "yarn" (rope_freq_scale = 1 / factor) */
	bool rope_yarn;
	int32_t yarn_orig_ctx; /* ARCH.rope.scaling.original_context_length */
	float yarn_beta_fast, yarn_beta_slow, yarn_ext; /* .yarn_* */
	float rope_attn_factor; /* ARCH.rope.scaling.attn_factor, 1 */
	/* sliding-window layers (rows with MODEL_FEAT_ATTN_SLIDING) */
	int32_t swa_window;  /* ARCH.attention.sliding_window; 0: none */
	int32_t swa_pattern; /* ARCH.attention.sliding_window_pattern */
	float rope_base_swa; /* ARCH.rope.freq_base_swa, default 10000 */
	float final_softcap; /* ARCH.final_logit_softcapping, 0: off */
	float attn_scale;    /* ARCH.attention.scale, 0: by head size */
	/* mixtures (rows with MODEL_FEAT_EXPERTS) */
	int32_t n_expert;      /* ARCH.expert_count */
	int32_t n_expert_used; /* ARCH.expert_used_count */
	int32_t n_ff_exp;      /* ARCH.expert_feed_forward_length */
	float expert_w_scale;  /* ARCH.expert_weights_scale, 0: off */
	int32_t n_ff_sh;       /* ARCH.expert_shared_feed_forward_length, else
	                          n_ff (rows with MODEL_FEAT_SHARED_EXPERT) */
	/* recurrent layers (rows with MODEL_FEAT_RECURRENT, model_ssm.c) */
	int32_t ssm_k_heads, ssm_v_heads, ssm_head_dim, ssm_d_conv;
	int32_t full_attn_interval; /* ARCH.full_attention_interval */
	int32_t n_nextn;            /* ARCH.nextn_predict_layers */
	/* per layer (the scalars above for every layer, unless a row with
	   per_layer_keys finds arrays: model_gemma4.c) */
	int32_t l_n_head[MODEL_MAX_LAYERS];    /* attention.head_count */
	int32_t l_n_head_kv[MODEL_MAX_LAYERS]; /* attention.head_count_kv */
	int32_t l_n_ff[MODEL_MAX_LAYERS];      /* feed_forward_length */
	bool l_swa[MODEL_MAX_LAYERS]; /* sliding (swa_window > 0 only) */
	/* sliding layers' heads and rotation (.key_length_swa, .value_
	   length_swa, .rope.dimension_count_swa; else the global ones) */
	int32_t head_dim_swa, n_rot_swa;
	int32_t n_kv_layers; /* layers with a cache of their own, the first
	                        ones (n_layer - .attention.shared_kv_layers) */
	int32_t ple_dim;     /* .embedding_length_per_layer_input, 0: none */
};

/* Read "ARCH.SUFFIX" as u32 into *out; absent: 1 if OPTIONAL, else an
 * error. Returns 0, 1 or -1 (with a message). */
int model_get_u32(const struct gguf_file *f, const char *arch,
                  const char *suffix, bool optional, uint32_t *out, char *err,
                  size_t errlen);

/* Read "ARCH.SUFFIX" as f32 into *out; absent returns 1 (left as it
 * was), another type -1. */
int model_get_f32(const struct gguf_file *f, const char *arch,
                  const char *suffix, float *out, char *err, size_t errlen);

/* 0 when 1 <= V <= MAX, else -1 with a message naming ARCH.WHAT. */
int model_check_range(const char *arch, const char *what, int64_t v,
                      int64_t max, char *err, size_t errlen);

/* Tensor NAME checked: computable type, [NE0, NE1] (NE1 0: 1-D). 0 and
 * *T filled, 1 if absent and OPTIONAL, -1 with a message. */
int model_tensor_get(const struct gguf_file *f, const char *name, int64_t ne0,
                     int64_t ne1, bool optional, struct model_tensor *t,
                     char *err, size_t errlen);

/* A 2-D tensor of NE1 rows of NE0 (1 row: a vector) as a new fp32 array
 * (*OUT, owned) of finite values; 1 and NULL when absent and OPTIONAL. */
int model_rows_get(const struct gguf_file *f, const char *name, int64_t ne0,
                   int64_t ne1, bool optional, float **out, char *err,
                   size_t errlen);

/* A 1-D tensor of N elements (model_rows_get of one row). */
int model_vector_get(const struct gguf_file *f, const char *name, int64_t n,
                     bool optional, float **out, char *err, size_t errlen);

/* model_ssm.c: the recurrent layers' keys into SH (n_layer less the
 * multi-token-prediction blocks), and the rotation's sections checked
 * (text positions: a plain rotation of n_rot dims). */
int model_read_ssm_keys(const struct gguf_file *f, const char *arch,
                        struct model_shape *sh, char *err, size_t errlen);

/* Whether layer IL is recurrent (every full_attn_interval-th is not). */
bool model_layer_recurrent(const struct model_shape *sh, int il);

/* Layer IL's Gated DeltaNet tensors into S (its counts from SH). */
int model_load_ssm(const struct gguf_file *f, const struct model_shape *sh,
                   int il, struct model_ssm *s, char *err, size_t errlen);

/* Layer IL's shared expert (and its gate) into FF. */
int model_load_shared_expert(const struct gguf_file *f,
                             const struct model_shape *sh, int il,
                             struct model_ffn *ff, char *err, size_t errlen);

/* Free S's owned copies. */
void model_ssm_free(struct model_ssm *s);

/* Read "ARCH.SUFFIX" as one u32 for every layer, or (PER_LAYER) an array
 * of n_layer of them, each in 1..MAX, into OUT[n_layer]. Absent: 1 if
 * OPTIONAL (OUT untouched), else an error. Returns 0, 1 or -1. */
int model_get_u32_layers(const struct gguf_file *f, const char *arch,
                         const char *suffix, bool optional, bool per_layer,
                         int32_t n_layer, int64_t max, int32_t *out, char *err,
                         size_t errlen);

/* Layer IL's F32 router (n_embd x n_expert) into FF->router, or -1 with
 * the tensor named in ERR (model.c). */
int model_load_router(const struct gguf_file *f, int il, int64_t n_embd,
                      struct model_ffn *ff, char *err, size_t errlen);
/* Find tensor NAME and check it: computable type, [NE0, NE1, NE2] (NE1 0:
 * 1-D, NE2 0: at most 2-D). 0 and *T filled, 1 if absent and OPTIONAL,
 * -1 with a message. */
int model_tensor_get3(const struct gguf_file *f, const char *name, int64_t ne0,
                      int64_t ne1, int64_t ne2, bool optional,
                      struct model_tensor *t, char *err, size_t errlen);

/* model_gemma4.c: the keys of Gemma 4's layers into SH (the per-layer
 * arrays, the sliding layers' head size and rotation, KV sharing, the
 * per-layer inputs' size). */
int model_read_gemma4_keys(const struct gguf_file *f, const char *arch,
                           struct model_shape *sh, char *err, size_t errlen);

/* Layer IL's KV source: itself, or (KV sharing) the last layer of the
 * same kind with a cache of its own (llama.cpp's choice); -1 with a
 * message when there is none of that kind. */
int model_kv_source(const struct model_shape *sh, int il, char *err,
                    size_t errlen);

/* Layer IL's FFN of a model with MODEL_FEAT_MOE_DENSE (dense, or a
 * mixture with the dense MLP beside it: ffn_gate_inp present) into FF,
 * whose norm, post_norm and descriptors are read already. */
int model_load_moe_dense(const struct gguf_file *f,
                         const struct model_shape *sh, int il,
                         struct model_ffn *ff, char *err, size_t errlen);

/* The per-layer inputs' global tensors (cfg.ple_dim > 0) into M. */
int model_load_ple_globals(const struct gguf_file *f, struct model *m,
                           char *err, size_t errlen);

/* Layer IL's per-layer input tensors and its output scale into L. */
int model_load_ple_layer(const struct gguf_file *f, const struct model *m,
                         int il, struct model_layer *l, char *err,
                         size_t errlen);

/* Free the owned copies of model_load_moe_dense and model_load_ple_*. */
void model_gemma4_free_layer(struct model_layer *l);

#endif /* PARLEY_MODEL_INT_H */

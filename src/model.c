/*
 * model.c - hyper-parameters and weight table from GGUF metadata (model.h).
 */
#include "model.h"
#include "model_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "qtype.h"
#include "quant.h"

/*
 * Architectures: the only code that knows their names. A row maps an
 * architecture onto the description of model.h: its RoPE style, the
 * features its graph may have (read from the file when their tensors are
 * present) and those every file of it must have. The GGUF keys are
 * "NAME.*", the tensors llama.cpp's names (model_load_layer).
 */
static const struct model_arch_row {
	const char *name;           /* general.architecture */
	enum model_rope_style rope; /* of every RoPE class */
	enum model_act act;         /* of the FFN's gate */
	uint32_t feats;             /* MODEL_FEAT_* it may have */
	uint32_t required;          /* MODEL_FEAT_* it must have */
	/* sliding-window layers (MODEL_FEAT_ATTN_SLIDING): every
	   swa_pattern-th layer is global when the file gives no pattern */
	int32_t swa_pattern;
	/* the attention's scale is 1/sqrt(n_embd / n_head) instead of
	   1/sqrt(head_dim) in files of this many layers (Gemma 3 27B's
	   query_pre_attn_scalar, as llama.cpp derives it); 0: never */
	int32_t scale_embd_layers;
	/* a mixture's router (rows with MODEL_FEAT_EXPERTS) */
	enum model_moe_gating gating;
	bool moe_norm_w; /* the chosen weights renormalised */
	/* the FFN's norm tensor (after "blk.N."); NULL: ffn_norm.weight */
	const char *ffn_norm;
	/* sliding layers rotate as the global ones (base, scaling) unless
	   the file gives ARCH.rope.freq_base_swa (gpt-oss); else with base
	   10000 or that key, unscaled (gemma3) */
	bool swa_rope_global;
	/* the attention's scale whatever the file says (gemma4: 1, its
	   q norm scales); 0: the file's, else 1/sqrt(head_dim) */
	float attn_scale;
	bool v_norm; /* values RMS-normed per head, no weight (gemma4) */
	/* the final softcap of a file without final_logit_softcapping
	   (llama.cpp's default for gemma4: 30); 0: off */
	float final_softcap;
	/* head counts, FFN sizes and the sliding pattern may be arrays of
	   one value a layer, the sliding layers have heads and a rotation
	   of their own (model_gemma4.c) */
	bool per_layer_keys;
} model_archs[] = {
    {.name = "llama",
     .rope = MODEL_ROPE_NORM,
     .act = MODEL_ACT_SILU,
     .feats = MODEL_FEAT_QKV_BIAS | MODEL_FEAT_ROPE_FACTORS |
              MODEL_FEAT_ROPE_LINEAR | MODEL_FEAT_ROPE_YARN,
     .required = 0},
    {.name = "qwen2",
     .rope = MODEL_ROPE_NEOX,
     .act = MODEL_ACT_SILU,
     .feats = MODEL_FEAT_QKV_BIAS | MODEL_FEAT_ROPE_FACTORS |
              MODEL_FEAT_ROPE_LINEAR | MODEL_FEAT_ROPE_YARN,
     .required = MODEL_FEAT_QKV_BIAS},
    {.name = "qwen3",
     .rope = MODEL_ROPE_NEOX,
     .act = MODEL_ACT_SILU,
     .feats =
         MODEL_FEAT_QK_NORM | MODEL_FEAT_ROPE_LINEAR | MODEL_FEAT_ROPE_YARN,
     .required = MODEL_FEAT_QK_NORM},
    /* Qwen3-30B-A3B, 235B-A22B: qwen3's attention, every FFN a
       mixture (norm_topk_prob: llama.cpp always renormalises) */
    {.name = "qwen3moe",
     .rope = MODEL_ROPE_NEOX,
     .act = MODEL_ACT_SILU,
     .feats = MODEL_FEAT_QK_NORM | MODEL_FEAT_ROPE_LINEAR |
              MODEL_FEAT_ROPE_YARN | MODEL_FEAT_EXPERTS,
     .required = MODEL_FEAT_QK_NORM | MODEL_FEAT_EXPERTS,
     .gating = MODEL_MOE_SOFTMAX,
     .moe_norm_w = true},
    /* gpt-oss-20b, 120b: Q/K/V and output biases, attention sinks,
       every other layer sliding (window 128), YaRN, a mixture with a
       biased router, top-k then softmax, biased experts and the clamped
       SwiGLU; the FFN's norm is the file's post_attention_norm */
    {.name = "gpt-oss",
     .rope = MODEL_ROPE_NEOX,
     .act = MODEL_ACT_SWIGLU_OAI,
     .feats = MODEL_FEAT_QKV_BIAS | MODEL_FEAT_ATTN_SINKS |
              MODEL_FEAT_ATTN_OUT_BIAS | MODEL_FEAT_ATTN_SLIDING |
              MODEL_FEAT_ROPE_YARN | MODEL_FEAT_EXPERTS |
              MODEL_FEAT_MOE_BIASES | MODEL_FEAT_SWIGLU_OAI,
     .required = MODEL_FEAT_QKV_BIAS | MODEL_FEAT_ATTN_SINKS |
                 MODEL_FEAT_ATTN_OUT_BIAS | MODEL_FEAT_EXPERTS |
                 MODEL_FEAT_MOE_BIASES | MODEL_FEAT_SWIGLU_OAI,
     .swa_pattern = 2,
     .gating = MODEL_MOE_TOPK_SOFTMAX,
     .moe_norm_w = false,
     .ffn_norm = "post_attention_norm.weight",
     .swa_rope_global = true},
    /* Qwen3.5 / 3.6: three of four layers Gated DeltaNet (recurrent),
       the fourth gated full attention with q/k norms and a partial
       rotation; the FFN's norm is the file's post_attention_norm */
    {.name = "qwen35",
     .rope = MODEL_ROPE_NEOX,
     .act = MODEL_ACT_SILU,
     .feats = MODEL_FEAT_QK_NORM | MODEL_FEAT_RECURRENT | MODEL_FEAT_ATTN_GATE |
              MODEL_FEAT_ROPE_LINEAR,
     .required =
         MODEL_FEAT_QK_NORM | MODEL_FEAT_RECURRENT | MODEL_FEAT_ATTN_GATE,
     .ffn_norm = "post_attention_norm.weight"},
    /* Qwen3.5/3.6 mixtures (35B-A3B): qwen35's layers, every FFN a
       mixture (softmax, renormalised) beside a gated shared expert */
    {.name = "qwen35moe",
     .rope = MODEL_ROPE_NEOX,
     .act = MODEL_ACT_SILU,
     .feats = MODEL_FEAT_QK_NORM | MODEL_FEAT_RECURRENT | MODEL_FEAT_ATTN_GATE |
              MODEL_FEAT_ROPE_LINEAR | MODEL_FEAT_EXPERTS |
              MODEL_FEAT_SHARED_EXPERT,
     .required = MODEL_FEAT_QK_NORM | MODEL_FEAT_RECURRENT |
                 MODEL_FEAT_ATTN_GATE | MODEL_FEAT_EXPERTS |
                 MODEL_FEAT_SHARED_EXPERT,
     .gating = MODEL_MOE_SOFTMAX,
     .moe_norm_w = true,
     .ffn_norm = "post_attention_norm.weight"},
    {.name = "gemma3",
     .rope = MODEL_ROPE_NEOX,
     .act = MODEL_ACT_GELU_TANH,
     .feats = MODEL_FEAT_EMBD_SCALE | MODEL_FEAT_QK_NORM |
              MODEL_FEAT_POST_NORMS | MODEL_FEAT_GELU_TANH |
              MODEL_FEAT_ATTN_SLIDING | MODEL_FEAT_ROPE_LINEAR |
              MODEL_FEAT_FINAL_SOFTCAP,
     .required = MODEL_FEAT_EMBD_SCALE | MODEL_FEAT_QK_NORM |
                 MODEL_FEAT_POST_NORMS | MODEL_FEAT_GELU_TANH,
     .swa_pattern = 6,
     .scale_embd_layers = 62},
    /* Gemma 4 (31B, 26B-A4B, E2B/E4B): gemma3's layers with per-layer
       head shapes (sliding and global layers differ), values RMS-normed
       (keys as values where a layer has no Wv), rope_freqs on the
       global layers only, attention scale 1; the last layers of the E
       models read earlier layers' caches; the mixture runs beside a
       dense MLP; the E models add per-layer token inputs */
    {.name = "gemma4",
     .rope = MODEL_ROPE_NEOX,
     .act = MODEL_ACT_GELU_TANH,
     .feats = MODEL_FEAT_EMBD_SCALE | MODEL_FEAT_QK_NORM |
              MODEL_FEAT_POST_NORMS | MODEL_FEAT_GELU_TANH |
              MODEL_FEAT_ATTN_SLIDING | MODEL_FEAT_ROPE_LINEAR |
              MODEL_FEAT_ROPE_FACTORS | MODEL_FEAT_FINAL_SOFTCAP |
              MODEL_FEAT_EXPERTS | MODEL_FEAT_LAYER_SHAPES | MODEL_FEAT_V_NORM |
              MODEL_FEAT_K_AS_V | MODEL_FEAT_KV_SHARED | MODEL_FEAT_MOE_DENSE |
              MODEL_FEAT_EXPERT_SCALES | MODEL_FEAT_PER_LAYER_EMBD |
              MODEL_FEAT_OUT_SCALE | MODEL_FEAT_EXPERTS_MERGED,
     .required = MODEL_FEAT_EMBD_SCALE | MODEL_FEAT_QK_NORM |
                 MODEL_FEAT_POST_NORMS | MODEL_FEAT_GELU_TANH |
                 MODEL_FEAT_V_NORM,
     .swa_pattern = 6,
     .gating = MODEL_MOE_SOFTMAX,
     .moe_norm_w = true,
     .attn_scale = 1.0f,
     .v_norm = true,
     .final_softcap = 30.0f,
     .per_layer_keys = true},
};

#define MODEL_N_ARCHS (sizeof(model_archs) / sizeof(model_archs[0]))

const char *model_arch_at(size_t i)
{
	return i < MODEL_N_ARCHS ? model_archs[i].name : NULL;
}

/* Names of the feature bits, in bit order. */
static const char *const model_feature_names[MODEL_FEAT_COUNT] = {
    "Q/K/V biases",
    "RoPE frequency factors",
    "linear RoPE scaling",
    "YaRN RoPE scaling",
    "embedding scale",
    "final logit softcap",
    "q/k norm",
    "post-attention and post-FFN norms",
    "sliding-window attention",
    "attention logit softcap",
    "attention sinks",
    "attention output bias",
    "recurrent (linear attention) layers",
    "GELU-tanh gated FFN",
    "mixture of experts",
    "router and expert biases",
    "clamped SwiGLU",
    "attention output gate",
    "shared expert",
    "per-layer head shapes",
    "value norm",
    "keys as values",
    "KV cache sharing",
    "dense MLP beside the experts",
    "per-expert output scales",
    "per-layer embeddings",
    "layer output scale",
    "merged gate and up experts",
};

const char *model_feature_name(uint32_t f)
{
	for (int i = 0; i < MODEL_FEAT_COUNT; i++)
		if (f == 1u << i)
			return model_feature_names[i];
	return "?";
}

const char *model_feature_first(uint32_t feats)
{
	for (int i = 0; i < MODEL_FEAT_COUNT; i++)
		if (feats >> i & 1)
			return model_feature_names[i];
	return NULL;
}

/*
 * Tensors of features that an architecture's row may lack: a file of that
 * architecture carrying one is refused by name (its graph would need the
 * feature; running without it would be wrong).
 */
static const struct model_feature_tensor {
	uint32_t feat;      /* MODEL_FEAT_* */
	const char *suffix; /* after "blk.N." */
} model_feature_tensors[] = {
    {MODEL_FEAT_QKV_BIAS, "attn_q.bias"},
    {MODEL_FEAT_QK_NORM, "attn_q_norm.weight"},
    {MODEL_FEAT_QK_NORM, "attn_k_norm.weight"},
    {MODEL_FEAT_POST_NORMS, "post_attention_norm.weight"},
    {MODEL_FEAT_POST_NORMS, "post_ffw_norm.weight"},
    {MODEL_FEAT_ATTN_SINKS, "attn_sinks.weight"},
    {MODEL_FEAT_ATTN_OUT_BIAS, "attn_output.bias"},
    {MODEL_FEAT_EXPERTS, "ffn_gate_inp.weight"},
    {MODEL_FEAT_MOE_BIASES, "ffn_gate_inp.bias"},
    {MODEL_FEAT_RECURRENT, "ssm_conv1d.weight"},
    {MODEL_FEAT_SHARED_EXPERT, "ffn_gate_inp_shexp.weight"},
    {MODEL_FEAT_MOE_DENSE, "pre_ffw_norm_2.weight"},
    {MODEL_FEAT_MOE_DENSE, "ffn_gate_inp.scale"},
    {MODEL_FEAT_EXPERT_SCALES, "ffn_down_exps.scale"},
    {MODEL_FEAT_PER_LAYER_EMBD, "inp_gate.weight"},
    {MODEL_FEAT_OUT_SCALE, "layer_output_scale.weight"},
    {MODEL_FEAT_EXPERTS_MERGED, "ffn_gate_up_exps.weight"},
};

/* Read "ARCH.SUFFIX" as u32 into *out; absent is an error unless OPTIONAL. */
int model_get_u32(const struct gguf_file *f, const char *arch,
                  const char *suffix, bool optional, uint32_t *out, char *err,
                  size_t errlen)
{
	char key[128];
	char e[512];
	int rc;

	snprintf(key, sizeof(key), "%s.%s", arch, suffix);
	rc = gguf_get_u32(f, key, out, e, sizeof(e));
	if (rc == GGUF_ENOKEY && optional)
		return 1;
	if (rc != GGUF_OK) {
		snprintf(err, errlen, "%s: %s", f->path ? f->path : "model", e);
		return -1;
	}
	return 0;
}

/* Read "ARCH.SUFFIX" as f32 into *out; absent returns 1 (left unchanged). */
int model_get_f32(const struct gguf_file *f, const char *arch,
                  const char *suffix, float *out, char *err, size_t errlen)
{
	char key[128];
	char e[512];
	int rc;

	snprintf(key, sizeof(key), "%s.%s", arch, suffix);
	rc = gguf_get_f32(f, key, out, e, sizeof(e));
	if (rc == GGUF_ENOKEY)
		return 1;
	if (rc != GGUF_OK) {
		snprintf(err, errlen, "%s: %s", f->path ? f->path : "model", e);
		return -1;
	}
	return 0;
}

/* Check a bounded positive count; message names the key. */
int model_check_range(const char *arch, const char *what, int64_t v,
                      int64_t max, char *err, size_t errlen)
{
	if (v < 1 || v > max) {
		snprintf(err, errlen, "%s.%s = %lld is out of range (1..%lld)",
		         arch, what, (long long)v, (long long)max);
		return -1;
	}
	return 0;
}

/* Read "ARCH.SUFFIX" as a u32 for every layer or an array of one a layer
 * (model_int.h). */
int model_get_u32_layers(const struct gguf_file *f, const char *arch,
                         const char *suffix, bool optional, bool per_layer,
                         int32_t n_layer, int64_t max, int32_t *out, char *err,
                         size_t errlen)
{
	char key[128];
	const struct gguf_kv *kv;
	uint32_t v;
	int rc;

	snprintf(key, sizeof(key), "%s.%s", arch, suffix);
	kv = gguf_find_kv(f, key);
	if (per_layer && kv != NULL && kv->val.type == GGUF_TYPE_ARRAY) {
		const struct gguf_array *a = &kv->val.v.arr;

		if (a->n != (uint64_t)n_layer ||
		    a->elem_type == GGUF_TYPE_BOOL ||
		    gguf_type_size(a->elem_type) == 0) {
			snprintf(err, errlen,
			         "%s: an array of %llu %s, expected %d "
			         "integers (one a layer)",
			         key, (unsigned long long)a->n,
			         gguf_type_name(a->elem_type), n_layer);
			return -1;
		}
		for (int32_t il = 0; il < n_layer; il++) {
			int64_t x = gguf_arr_i64(a, (uint64_t)il);

			if (x < 1 || x > max) {
				snprintf(err, errlen,
				         "%s[%d] = %lld is out of range "
				         "(1..%lld)",
				         key, il, (long long)x, (long long)max);
				return -1;
			}
			out[il] = (int32_t)x;
		}
		return 0;
	}
	rc = model_get_u32(f, arch, suffix, optional, &v, err, errlen);
	if (rc != 0)
		return rc;
	if (model_check_range(arch, suffix, v, max, err, errlen))
		return -1;
	for (int32_t il = 0; il < n_layer; il++)
		out[il] = (int32_t)v;
	return 0;
}

/* YaRN's keys (llama.cpp's defaults where absent: the training context,
 * beta_fast 32, beta_slow 1, ext_factor 1, attn_factor 1). */
static int model_read_yarn(const struct gguf_file *f, const char *arch,
                           struct model_shape *c, char *err, size_t errlen)
{
	uint32_t v = (uint32_t)c->n_ctx_train;
	float lm = 0.0f;
	int rc;

	rc = model_get_u32(f, arch, "rope.scaling.original_context_length",
	                   true, &v, err, errlen);
	if (rc < 0 ||
	    model_check_range(arch, "rope.scaling.original_context_length", v,
	                      MODEL_MAX_CTX, err, errlen))
		return -1;
	c->yarn_orig_ctx = (int32_t)v;
	c->yarn_beta_fast = 32.0f;
	c->yarn_beta_slow = 1.0f;
	c->yarn_ext = 1.0f;
	c->rope_attn_factor = 1.0f;
	if (model_get_f32(f, arch, "rope.scaling.yarn_beta_fast",
	                  &c->yarn_beta_fast, err, errlen) < 0 ||
	    model_get_f32(f, arch, "rope.scaling.yarn_beta_slow",
	                  &c->yarn_beta_slow, err, errlen) < 0 ||
	    model_get_f32(f, arch, "rope.scaling.yarn_ext_factor", &c->yarn_ext,
	                  err, errlen) < 0 ||
	    model_get_f32(f, arch, "rope.scaling.attn_factor",
	                  &c->rope_attn_factor, err, errlen) < 0 ||
	    model_get_f32(f, arch, "rope.scaling.yarn_log_multiplier", &lm, err,
	                  errlen) < 0)
		return -1;
	if (!(c->yarn_beta_fast > 0.0f && c->yarn_beta_slow > 0.0f &&
	      c->yarn_ext >= 0.0f && c->yarn_ext <= 1.0f &&
	      c->rope_attn_factor > 0.0f && isfinite(c->yarn_beta_fast) &&
	      isfinite(c->yarn_beta_slow) && isfinite(c->rope_attn_factor))) {
		snprintf(err, errlen,
		         "%s.rope.scaling: YaRN beta_fast %g, beta_slow %g, "
		         "ext_factor %g, attn_factor %g out of range",
		         arch, (double)c->yarn_beta_fast,
		         (double)c->yarn_beta_slow, (double)c->yarn_ext,
		         (double)c->rope_attn_factor);
		return -1;
	}
	if (lm != 0.0f) { /* DeepSeek's mscale_all_dim: not this recipe */
		snprintf(err, errlen,
		         "%s.rope.scaling.yarn_log_multiplier = %g: not "
		         "supported",
		         arch, (double)lm);
		return -1;
	}
	return 0;
}

/* The head counts of every layer (PER_LAYER: arrays allowed), each
 * query count a multiple of its key/value count. */
static int model_read_heads(const struct gguf_file *f, const char *arch,
                            bool per_layer, struct model_shape *c, char *err,
                            size_t errlen)
{
	int rc;

	if (model_get_u32_layers(f, arch, "attention.head_count", false,
	                         per_layer, c->n_layer, MODEL_MAX_HEADS,
	                         c->l_n_head, err, errlen))
		return -1;
	memcpy(c->l_n_head_kv, c->l_n_head,
	       (size_t)c->n_layer * sizeof(c->l_n_head[0]));
	rc = model_get_u32_layers(f, arch, "attention.head_count_kv", true,
	                          per_layer, c->n_layer, MODEL_MAX_HEADS,
	                          c->l_n_head_kv, err, errlen);
	if (rc < 0)
		return -1;
	for (int32_t il = 0; il < c->n_layer; il++) {
		if (model_check_range(arch, "attention.head_count_kv",
		                      c->l_n_head_kv[il], c->l_n_head[il], err,
		                      errlen))
			return -1;
		if (c->l_n_head[il] % c->l_n_head_kv[il] != 0) {
			snprintf(err, errlen,
			         "%s.attention.head_count = %d is not a "
			         "multiple of head_count_kv = %d",
			         arch, c->l_n_head[il], c->l_n_head_kv[il]);
			return -1;
		}
	}
	c->n_head = c->l_n_head[0];
	c->n_head_kv = c->l_n_head_kv[0];
	return 0;
}

/* Read and check the hyper-parameters (tensor-independent part); with
 * PER_LAYER, head counts and FFN sizes may be arrays. */
static int model_read_config(const struct gguf_file *f, const char *arch,
                             bool per_layer, struct model_shape *c, char *err,
                             size_t errlen)
{
	uint32_t v;
	float fv;
	int rc;

	if (model_get_u32(f, arch, "block_count", false, &v, err, errlen) ||
	    model_check_range(arch, "block_count", v, MODEL_MAX_LAYERS, err,
	                      errlen))
		return -1;
	c->n_layer = (int32_t)v;
	if (model_get_u32(f, arch, "embedding_length", false, &v, err,
	                  errlen) ||
	    model_check_range(arch, "embedding_length", v, MODEL_MAX_EMBD, err,
	                      errlen))
		return -1;
	c->n_embd = (int32_t)v;
	/* a mixture's files may lack it (model_read_experts) */
	if (model_get_u32_layers(f, arch, "feed_forward_length", true,
	                         per_layer, c->n_layer, MODEL_MAX_FF, c->l_n_ff,
	                         err, errlen) < 0)
		return -1;
	c->n_ff = c->l_n_ff[0];
	if (model_read_heads(f, arch, per_layer, c, err, errlen))
		return -1;
	if (c->n_embd % c->n_head != 0)
		v = 0; /* no default: key_length must then be given */
	else
		v = (uint32_t)(c->n_embd / c->n_head);
	rc = model_get_u32(f, arch, "attention.key_length", true, &v, err,
	                   errlen);
	if (rc < 0 || model_check_range(arch, "attention.key_length", v,
	                                MODEL_MAX_HEAD_DIM, err, errlen))
		return -1;
	c->head_dim_k = (int32_t)v;
	v = (uint32_t)c->head_dim_k;
	rc = model_get_u32(f, arch, "attention.value_length", true, &v, err,
	                   errlen);
	if (rc < 0 || model_check_range(arch, "attention.value_length", v,
	                                MODEL_MAX_HEAD_DIM, err, errlen))
		return -1;
	c->head_dim_v = (int32_t)v;
	if (c->head_dim_v != c->head_dim_k) {
		snprintf(err, errlen,
		         "%s.attention.value_length = %d differs from "
		         "key_length = %d (not supported)",
		         arch, c->head_dim_v, c->head_dim_k);
		return -1;
	}
	v = (uint32_t)c->head_dim_k;
	rc = model_get_u32(f, arch, "rope.dimension_count", true, &v, err,
	                   errlen);
	if (rc < 0)
		return -1;
	if (v < 2 || v > (uint32_t)c->head_dim_k || v % 2 != 0) {
		snprintf(err, errlen,
		         "%s.rope.dimension_count = %u must be even and in "
		         "2..%d (the head size)",
		         arch, v, c->head_dim_k);
		return -1;
	}
	c->n_rot = (int32_t)v;
	c->head_dim_swa = c->head_dim_k;
	c->n_rot_swa = c->n_rot;
	c->n_kv_layers = c->n_layer;
	v = 4096;
	rc = model_get_u32(f, arch, "context_length", true, &v, err, errlen);
	if (rc < 0 || model_check_range(arch, "context_length", v,
	                                MODEL_MAX_CTX, err, errlen))
		return -1;
	c->n_ctx_train = (int32_t)v;
	c->rope_freq_base = 10000.0f;
	if (model_get_f32(f, arch, "rope.freq_base", &c->rope_freq_base, err,
	                  errlen) < 0)
		return -1;
	if (!(c->rope_freq_base > 1.0f) || !isfinite(c->rope_freq_base)) {
		snprintf(err, errlen, "%s.rope.freq_base = %g is not > 1", arch,
		         (double)c->rope_freq_base);
		return -1;
	}
	c->rope_freq_scale = 1.0f;
	{
		char key[128];
		struct gguf_str s;

		snprintf(key, sizeof(key), "%s.rope.scaling.type", arch);
		if (gguf_get_str(f, key, &s, NULL, 0) == GGUF_OK &&
		    !gguf_str_eq(s, "none")) {
			if (!gguf_str_eq(s, "linear") &&
			    !gguf_str_eq(s, "yarn")) {
				snprintf(
				    err, errlen,
				    "%s = \"%.*s\": only \"none\", \"linear\" "
				    "and \"yarn\" RoPE scaling are supported",
				    key, (int)(s.len > 64 ? 64 : s.len), s.ptr);
				return -1;
			}
			c->rope_yarn = gguf_str_eq(s, "yarn");
			fv = 1.0f;
			if (model_get_f32(f, arch, "rope.scaling.factor", &fv,
			                  err, errlen) < 0)
				return -1;
			if (!(fv >= 1.0f) || !isfinite(fv)) {
				snprintf(err, errlen,
				         "%s.rope.scaling.factor = %g is not "
				         ">= 1",
				         arch, (double)fv);
				return -1;
			}
			c->rope_freq_scale = 1.0f / fv;
			c->rope_linear = !c->rope_yarn;
			if (c->rope_yarn &&
			    model_read_yarn(f, arch, c, err, errlen))
				return -1;
		}
	}
	c->rms_eps = 1e-5f;
	rc = model_get_f32(f, arch, "attention.layer_norm_rms_epsilon",
	                   &c->rms_eps, err, errlen);
	if (rc < 0)
		return -1;
	if (rc == 1) {
		snprintf(err, errlen,
		         "%s: missing key %s.attention."
		         "layer_norm_rms_epsilon",
		         f->path ? f->path : "model", arch);
		return -1;
	}
	if (!(c->rms_eps > 0.0f && c->rms_eps < 1.0f)) {
		snprintf(err, errlen,
		         "%s.attention.layer_norm_rms_epsilon = %g is not in "
		         "(0, 1)",
		         arch, (double)c->rms_eps);
		return -1;
	}
	return 0;
}

/* A mixture's keys (rows with MODEL_FEAT_EXPERTS), or, for the other
 * rows, the dense FFN's size that model_read_config left optional. */
static int model_read_experts(const struct gguf_file *f,
                              const struct model_arch_row *ad,
                              struct model_shape *sh, char *err, size_t errlen)
{
	const char *arch = ad->name;
	uint32_t v;
	int rc;

	/* (a row whose mixture is optional: a file without expert_count is
	   dense) */
	if (!(ad->feats & MODEL_FEAT_EXPERTS) ||
	    (!(ad->required & MODEL_FEAT_EXPERTS) &&
	     model_get_u32(f, arch, "expert_count", true, &v, err, errlen) ==
	         1)) {
		if (sh->n_ff == 0) {
			snprintf(err, errlen,
			         "%s: missing key %s.feed_forward_length",
			         f->path ? f->path : "model", arch);
			return -1;
		}
		return 0;
	}
	if (model_get_u32(f, arch, "expert_count", false, &v, err, errlen) ||
	    model_check_range(arch, "expert_count", v, MODEL_MAX_EXPERTS, err,
	                      errlen))
		return -1;
	sh->n_expert = (int32_t)v;
	if (model_get_u32(f, arch, "expert_used_count", false, &v, err,
	                  errlen) ||
	    model_check_range(arch, "expert_used_count", v,
	                      sh->n_expert < MODEL_MAX_EXPERTS_USED
	                          ? sh->n_expert
	                          : MODEL_MAX_EXPERTS_USED,
	                      err, errlen))
		return -1;
	sh->n_expert_used = (int32_t)v;
	v = (uint32_t)sh->n_ff;
	rc = model_get_u32(f, arch, "expert_feed_forward_length", true, &v, err,
	                   errlen);
	if (rc < 0)
		return -1;
	if (rc == 1 && v == 0) {
		snprintf(err, errlen,
		         "%s: missing key %s.expert_feed_forward_length",
		         f->path ? f->path : "model", arch);
		return -1;
	}
	if (model_check_range(arch, "expert_feed_forward_length", v,
	                      MODEL_MAX_FF, err, errlen))
		return -1;
	sh->n_ff_exp = (int32_t)v;
	if ((ad->feats & MODEL_FEAT_MOE_DENSE) && sh->n_ff == 0) {
		snprintf(err, errlen,
		         "%s: missing key %s.feed_forward_length (the dense "
		         "MLP beside the experts)",
		         f->path ? f->path : "model", arch);
		return -1;
	}
	sh->expert_w_scale = 0.0f;
	if (model_get_f32(f, arch, "expert_weights_scale", &sh->expert_w_scale,
	                  err, errlen) < 0)
		return -1;
	if (!(sh->expert_w_scale >= 0.0f) || !isfinite(sh->expert_w_scale)) {
		snprintf(err, errlen,
		         "%s.expert_weights_scale = %g is not >= 0", arch,
		         (double)sh->expert_w_scale);
		return -1;
	}
	return 0;
}

/* The keys of the features the row AD may have (model_read_config read
 * the common ones): sliding windows, the final softcap, a given scale. */
static int model_read_arch_keys(const struct gguf_file *f,
                                const struct model_arch_row *ad,
                                struct model_shape *sh, char *err,
                                size_t errlen)
{
	const char *arch = ad->name;
	uint32_t v;
	int rc;

	sh->attn_scale = 0.0f;
	if (model_get_f32(f, arch, "attention.scale", &sh->attn_scale, err,
	                  errlen) < 0)
		return -1;
	if (!(sh->attn_scale >= 0.0f) || !isfinite(sh->attn_scale)) {
		snprintf(err, errlen, "%s.attention.scale = %g is not >= 0",
		         arch, (double)sh->attn_scale);
		return -1;
	}
	if (model_read_experts(f, ad, sh, err, errlen))
		return -1;
	if ((ad->feats & MODEL_FEAT_RECURRENT) &&
	    model_read_ssm_keys(f, arch, sh, err, errlen))
		return -1;
	if (ad->feats & MODEL_FEAT_SHARED_EXPERT) {
		v = (uint32_t)sh->n_ff;
		rc = model_get_u32(f, arch, "expert_shared_feed_forward_length",
		                   true, &v, err, errlen);
		if (rc < 0 ||
		    model_check_range(arch, "expert_shared_feed_forward_length",
		                      v, MODEL_MAX_FF, err, errlen))
			return -1;
		sh->n_ff_sh = (int32_t)v;
	}
	if (ad->feats & MODEL_FEAT_FINAL_SOFTCAP) {
		sh->final_softcap = ad->final_softcap;
		if (model_get_f32(f, arch, "final_logit_softcapping",
		                  &sh->final_softcap, err, errlen) < 0)
			return -1;
		if (!(sh->final_softcap >= 0.0f) ||
		    !isfinite(sh->final_softcap)) {
			snprintf(err, errlen,
			         "%s.final_logit_softcapping = %g is not >= 0",
			         arch, (double)sh->final_softcap);
			return -1;
		}
	}
	if (!(ad->feats & MODEL_FEAT_ATTN_SLIDING))
		return 0;
	rc = model_get_u32(f, arch, "attention.sliding_window", true, &v, err,
	                   errlen);
	if (rc < 0)
		return -1;
	sh->swa_window = 0; /* absent or 0: every layer global */
	if (rc == 0 && v != 0) {
		if (model_check_range(arch, "attention.sliding_window", v,
		                      MODEL_MAX_CTX, err, errlen))
			return -1;
		sh->swa_window = (int32_t)v;
	}
	v = (uint32_t)ad->swa_pattern;
	/* (gemma4's is an array of one flag a layer: model_gemma4.c) */
	rc = ad->per_layer_keys
	         ? 1
	         : model_get_u32(f, arch, "attention.sliding_window_pattern",
	                         true, &v, err, errlen);
	if (rc < 0 ||
	    model_check_range(arch, "attention.sliding_window_pattern", v,
	                      MODEL_MAX_LAYERS, err, errlen))
		return -1;
	sh->swa_pattern = (int32_t)v;
	/* every swa_pattern-th layer is global (llama.cpp's
	   set_swa_pattern), the others slide */
	for (int32_t il = 0; il < sh->n_layer; il++)
		sh->l_swa[il] = il % sh->swa_pattern < sh->swa_pattern - 1;
	sh->rope_base_swa = ad->swa_rope_global ? sh->rope_freq_base : 10000.0f;
	if (model_get_f32(f, arch, "rope.freq_base_swa", &sh->rope_base_swa,
	                  err, errlen) < 0)
		return -1;
	if (!(sh->rope_base_swa > 1.0f) || !isfinite(sh->rope_base_swa)) {
		snprintf(err, errlen, "%s.rope.freq_base_swa = %g is not > 1",
		         arch, (double)sh->rope_base_swa);
		return -1;
	}
	return 0;
}

/*
 * Find tensor NAME and check it: computable type, ne0 == NE0, ne1 == NE1
 * (NE1 == 0 for a 1-D tensor), ne2 == NE2 (NE2 == 0 for at most 2-D: a
 * stack of NE2 matrices otherwise, the experts of a layer). Returns 0 and
 * fills *t, 1 if absent and OPTIONAL (*t zeroed: data NULL), -1 with a
 * message naming the tensor otherwise.
 */
int model_tensor_get3(const struct gguf_file *f, const char *name, int64_t ne0,
                      int64_t ne1, int64_t ne2, bool optional,
                      struct model_tensor *t, char *err, size_t errlen)
{
	const struct gguf_tensor *g = gguf_find_tensor(f, name);
	uint32_t want_dims = ne2 != 0 ? 3 : ne1 == 0 ? 1 : 2;
	char e[512];

	memset(t, 0, sizeof(*t));
	if (g == NULL) {
		if (optional)
			return 1;
		snprintf(err, errlen, "missing tensor %s", name);
		return -1;
	}
	if (quant_check_tensor(name, g->type, e, sizeof(e)) != 0) {
		snprintf(err, errlen, "%s", e);
		return -1;
	}
	if (!quant_can_compute(g->type)) {
		snprintf(err, errlen, "tensor %s has type %s, not supported",
		         name, qtype_name(g->type));
		return -1;
	}
	if (g->n_dims != want_dims || (int64_t)g->ne[0] != ne0 ||
	    (ne1 != 0 && (int64_t)g->ne[1] != ne1) ||
	    (ne2 != 0 && (int64_t)g->ne[2] != ne2)) {
		if (want_dims == 3)
			snprintf(
			    err, errlen,
			    "tensor %s has shape [%llu, %llu, %llu] (%u "
			    "dims), expected [%lld, %lld, %lld] (3 dims)",
			    name, (unsigned long long)g->ne[0],
			    (unsigned long long)(g->n_dims > 1 ? g->ne[1] : 1),
			    (unsigned long long)(g->n_dims > 2 ? g->ne[2] : 1),
			    g->n_dims, (long long)ne0, (long long)ne1,
			    (long long)ne2);
		else
			snprintf(
			    err, errlen,
			    "tensor %s has shape [%llu, %llu] (%u dims), "
			    "expected [%lld, %lld] (%u dims)",
			    name, (unsigned long long)g->ne[0],
			    (unsigned long long)(g->n_dims > 1 ? g->ne[1] : 1),
			    g->n_dims, (long long)ne0,
			    (long long)(ne1 == 0 ? 1 : ne1), want_dims);
		return -1;
	}
	t->name = g->name;
	t->type = g->type;
	t->ne0 = ne0;
	t->ne1 = ne1 == 0 ? 1 : ne1;
	t->ne2 = ne2 == 0 ? 1 : ne2;
	t->row_size = quant_row_size(g->type, ne0);
	t->data = g->data;
	if (t->row_size == 0 ||
	    (uint64_t)t->row_size * (uint64_t)t->ne1 * (uint64_t)t->ne2 !=
	        g->nbytes) {
		snprintf(err, errlen,
		         "tensor %s: %llu bytes, expected %llu for type %s",
		         name, (unsigned long long)g->nbytes,
		         (unsigned long long)t->row_size * (uint64_t)t->ne1 *
		             (uint64_t)t->ne2,
		         qtype_name(g->type));
		return -1;
	}
	return 0;
}

/* A vector or matrix (model_tensor_get3 without a third dimension). */
int model_tensor_get(const struct gguf_file *f, const char *name, int64_t ne0,
                     int64_t ne1, bool optional, struct model_tensor *t,
                     char *err, size_t errlen)
{
	return model_tensor_get3(f, name, ne0, ne1, 0, optional, t, err,
	                         errlen);
}

/* A 2-D tensor of NE1 rows of NE0 as a new fp32 array (*OUT, owned), or
 * NULL when absent and OPTIONAL; finite values only. */
int model_rows_get(const struct gguf_file *f, const char *name, int64_t ne0,
                   int64_t ne1, bool optional, float **out, char *err,
                   size_t errlen)
{
	struct model_tensor t;
	/* (one row: a vector) */
	int rc = model_tensor_get(f, name, ne0, ne1 == 1 ? 0 : ne1, optional,
	                          &t, err, errlen);

	*out = NULL;
	if (rc != 0)
		return rc;
	*out = malloc((size_t)ne0 * (size_t)ne1 * sizeof(float));
	if (*out == NULL) {
		snprintf(err, errlen, "out of memory for tensor %s", name);
		return -1;
	}
	for (int64_t r = 0; r < ne1; r++)
		quant_dequant_row(t.type,
		                  (const unsigned char *)t.data +
		                      (size_t)r * t.row_size,
		                  *out + (size_t)r * ne0, ne0);
	for (int64_t i = 0; i < ne0 * ne1; i++)
		if (!isfinite((*out)[i])) {
			snprintf(err, errlen,
			         "tensor %s: element %lld is not finite", name,
			         (long long)i);
			free(*out);
			*out = NULL;
			return -1;
		}
	return 0;
}

/* A 1-D tensor of N elements as a new fp32 array (*out, owned), or NULL. */
int model_vector_get(const struct gguf_file *f, const char *name, int64_t n,
                     bool optional, float **out, char *err, size_t errlen)
{
	return model_rows_get(f, name, n, 1, optional, out, err, errlen);
}

/* Refuse a tensor of layer IL whose feature the row AD lacks. */
static int model_refuse_features(const struct gguf_file *f,
                                 const struct model_arch_row *ad, int il,
                                 char *err, size_t errlen)
{
	char name[96];

	for (size_t i = 0; i < sizeof(model_feature_tensors) /
	                           sizeof(model_feature_tensors[0]);
	     i++) {
		const struct model_feature_tensor *ft =
		    &model_feature_tensors[i];

		/* (gpt-oss's FFN norm has a post-norm's name) */
		if ((ad->feats & ft->feat) ||
		    (ad->ffn_norm && strcmp(ft->suffix, ad->ffn_norm) == 0))
			continue;
		snprintf(name, sizeof(name), "blk.%d.%s", il, ft->suffix);
		if (gguf_find_tensor(f, name) != NULL) {
			snprintf(err, errlen,
			         "tensor %s: architecture %s has no %s", name,
			         ad->name, model_feature_name(ft->feat));
			return -1;
		}
	}
	return 0;
}

/* Whether layer IL is a sliding-window layer (model_read_arch_keys). */
static bool model_layer_slides(const struct model_shape *sh, int il)
{
	return sh->swa_window > 0 && sh->l_swa[il];
}

/* The descriptors of layer IL from the file's shape: the layer's head
 * counts and FFN size; a sliding layer attends to its window, has the
 * sliding head size and rotates with RoPE class 1 (its own base and
 * n_rot), a global one with class 0. */
static void model_describe_layer(const struct model_shape *sh,
                                 const struct model_arch_row *ad, int il,
                                 struct model_layer *l)
{
	l->attn.kind = MODEL_ATTN_FULL;
	l->attn.rope = 0;
	l->attn.kv_layer = il;
	l->attn.v_norm = ad->v_norm;
	l->attn.gated = (ad->feats & MODEL_FEAT_ATTN_GATE) != 0;
	if ((ad->feats & MODEL_FEAT_RECURRENT) &&
	    model_layer_recurrent(sh, il)) {
		l->attn.kind = MODEL_ATTN_RECURRENT;
		l->attn.gated = false;
	}
	l->attn.n_head = sh->l_n_head[il];
	l->attn.n_head_kv = sh->l_n_head_kv[il];
	l->attn.head_dim_k = sh->head_dim_k;
	l->attn.head_dim_v = sh->head_dim_v;
	if (model_layer_slides(sh, il)) {
		l->attn.kind = MODEL_ATTN_SLIDING;
		l->attn.window = sh->swa_window;
		l->attn.rope = 1;
		l->attn.head_dim_k = sh->head_dim_swa;
		l->attn.head_dim_v = sh->head_dim_swa;
	}
	if (ad->attn_scale > 0.0f)
		l->attn.scale = ad->attn_scale;
	else if (sh->attn_scale > 0.0f)
		l->attn.scale = sh->attn_scale;
	else if (ad->scale_embd_layers != 0 &&
	         sh->n_layer == ad->scale_embd_layers)
		l->attn.scale = 1.0f / sqrtf((float)(sh->n_embd / sh->n_head));
	else
		l->attn.scale = 1.0f / sqrtf((float)sh->head_dim_k);
	l->ffn.kind = MODEL_FFN_DENSE;
	l->ffn.act = ad->act;
	l->ffn.n_ff = sh->l_n_ff[il];
	if (sh->n_expert > 0) {
		l->ffn.kind = MODEL_FFN_EXPERTS;
		l->ffn.n_ff = sh->n_ff_exp;
		l->ffn.n_expert = sh->n_expert;
		l->ffn.n_expert_used = sh->n_expert_used;
		l->ffn.gating = ad->gating;
		l->ffn.norm_w = ad->moe_norm_w;
		l->ffn.w_scale = sh->expert_w_scale;
	}
}

/* Layer IL's router (n_embd x n_expert) into FF->router. It must be F32:
 * its logits decide which experts run, and llama.cpp's quantizer never
 * rounds it (a rounded router is not the model). */
int model_load_router(const struct gguf_file *f, int il, int64_t n_embd,
                      struct model_ffn *ff, char *err, size_t errlen)
{
	char name[96];

	snprintf(name, sizeof(name), "blk.%d.ffn_gate_inp.weight", il);
	if (model_tensor_get(f, name, n_embd, ff->n_expert, false, &ff->router,
	                     err, errlen))
		return -1;
	if (ff->router.type != QTYPE_F32) {
		snprintf(err, errlen,
		         "tensor %s has type %s: the router must be F32", name,
		         qtype_name(ff->router.type));
		return -1;
	}
	return 0;
}

/* The router and the expert stacks of layer IL's mixture FF. */
static int model_load_experts(const struct gguf_file *f, int il, int32_t n_embd,
                              struct model_ffn *ff, char *err, size_t errlen)
{
	static const char *const sfx[3] = {"ffn_gate_exps.weight",
	                                   "ffn_up_exps.weight",
	                                   "ffn_down_exps.weight"};
	struct model_tensor *ts[3] = {&ff->gate, &ff->up, &ff->down};
	char name[96];

	if (model_load_router(f, il, n_embd, ff, err, errlen))
		return -1;
	for (int k = 0; k < 3; k++) {
		int64_t ne0 = k == 2 ? ff->n_ff : n_embd;
		int64_t ne1 = k == 2 ? n_embd : ff->n_ff;

		snprintf(name, sizeof(name), "blk.%d.%s", il, sfx[k]);
		if (model_tensor_get3(f, name, ne0, ne1, ff->n_expert, false,
		                      ts[k], err, errlen))
			return -1;
	}
	/* a dense FFN's tensors beside the mixture would be a model this
	   recipe does not describe (a shared expert has other names) */
	snprintf(name, sizeof(name), "blk.%d.ffn_gate.weight", il);
	if (gguf_find_tensor(f, name) != NULL) {
		snprintf(err, errlen,
		         "tensor %s: layer %d is a mixture of experts (it has "
		         "ffn_gate_inp)",
		         name, il);
		return -1;
	}
	return 0;
}

/* The router's and the experts' biases of layer IL (gpt-oss): all four or
 * none (REQUIRED: all four). */
static int model_load_moe_biases(const struct gguf_file *f, int il,
                                 int32_t n_embd, struct model_ffn *ff,
                                 bool required, char *err, size_t errlen)
{
	char name[96];
	int rc[4];

	snprintf(name, sizeof(name), "blk.%d.ffn_gate_inp.bias", il);
	rc[0] = model_rows_get(f, name, ff->n_expert, 1, !required,
	                       &ff->router_b, err, errlen);
	snprintf(name, sizeof(name), "blk.%d.ffn_gate_exps.bias", il);
	rc[1] = rc[0] < 0 ? -1
	                  : model_rows_get(f, name, ff->n_ff, ff->n_expert,
	                                   !required, &ff->gate_b, err, errlen);
	snprintf(name, sizeof(name), "blk.%d.ffn_up_exps.bias", il);
	rc[2] = rc[1] < 0 ? -1
	                  : model_rows_get(f, name, ff->n_ff, ff->n_expert,
	                                   !required, &ff->up_b, err, errlen);
	snprintf(name, sizeof(name), "blk.%d.ffn_down_exps.bias", il);
	rc[3] = rc[2] < 0 ? -1
	                  : model_rows_get(f, name, n_embd, ff->n_expert,
	                                   !required, &ff->down_b, err, errlen);
	if (rc[3] < 0)
		return -1;
	if (rc[0] != rc[1] || rc[1] != rc[2] || rc[2] != rc[3]) {
		snprintf(err, errlen,
		         "layer %d: the router's and experts' biases must be "
		         "all present or all absent",
		         il);
		return -1;
	}
	return 0;
}

/* Layer IL reads an earlier layer's cache (model.h invariant 2): which
 * one, checked to have this layer's key/value heads. */
static int model_share_kv(struct model *m, const struct model_shape *sh, int il,
                          char *err, size_t errlen)
{
	struct model_attn *a = &m->w.layers[il].attn;
	const struct model_attn *src;
	int j = model_kv_source(sh, il, err, errlen);

	if (j < 0)
		return -1;
	src = &m->w.layers[j].attn;
	if (src->n_head_kv != a->n_head_kv ||
	    src->head_dim_k != a->head_dim_k ||
	    src->head_dim_v != a->head_dim_v || src->kind != a->kind) {
		snprintf(err, errlen,
		         "layer %d reads layer %d's KV cache (%s."
		         "attention.shared_kv_layers) but has %d KV heads of "
		         "%d dims, that layer %d of %d",
		         il, j, m->cfg.arch_name, a->n_head_kv, a->head_dim_k,
		         src->n_head_kv, src->head_dim_k);
		return -1;
	}
	a->kv_layer = j;
	return 0;
}

/* Load the tensors of layer IL, as its descriptors say. */
static int model_load_layer(const struct gguf_file *f, struct model *m, int il,
                            const struct model_shape *sh,
                            const struct model_arch_row *ad, char *err,
                            size_t errlen)
{
	const struct model_config *c = &m->cfg;
	struct model_attn *a = &m->w.layers[il].attn;
	struct model_ffn *ff = &m->w.layers[il].ffn;
	bool bias_required = (ad->required & MODEL_FEAT_QKV_BIAS) != 0;
	bool has_bias = (c->features & MODEL_FEAT_QKV_BIAS) != 0;
	int64_t nq = (int64_t)a->n_head * a->head_dim_k;
	int64_t nk = (int64_t)a->n_head_kv * a->head_dim_k;
	int64_t nv = (int64_t)a->n_head_kv * a->head_dim_v;
	int64_t no = (int64_t)a->n_head * a->head_dim_v;
	char name[96];
	int rc[3];

	if (model_refuse_features(f, ad, il, err, errlen))
		return -1;
#define T(field, suffix, ne0, ne1)                                             \
	do {                                                                   \
		snprintf(name, sizeof(name), "blk.%d.%s", il, suffix);         \
		if (model_tensor_get(f, name, ne0, ne1, false, &field, err,    \
		                     errlen))                                  \
			return -1;                                             \
	} while (0)
#define V(field, suffix, n, opt, rcv)                                          \
	do {                                                                   \
		snprintf(name, sizeof(name), "blk.%d.%s", il, suffix);         \
		rcv = model_vector_get(f, name, n, opt, &field, err, errlen);  \
		if (rcv < 0)                                                   \
			return -1;                                             \
	} while (0)

	V(a->norm, "attn_norm.weight", c->n_embd, false, rc[0]);
	if (a->kind == MODEL_ATTN_RECURRENT) {
		if (model_load_ssm(f, sh, il, &m->w.layers[il].ssm, err,
		                   errlen))
			return -1;
		goto ffn;
	}
	T(a->wq, "attn_q.weight", c->n_embd, a->gated ? 2 * nq : nq);
	if (il >= sh->n_kv_layers) {
		if (model_share_kv(m, sh, il, err, errlen))
			return -1;
	} else {
		T(a->wk, "attn_k.weight", c->n_embd, nk);
		snprintf(name, sizeof(name), "blk.%d.attn_v.weight", il);
		/* (a layer without Wv uses its keys as values) */
		if (model_tensor_get(f, name, c->n_embd, nv,
		                     (ad->feats & MODEL_FEAT_K_AS_V) != 0,
		                     &a->wv, err, errlen) < 0)
			return -1;
	}
	V(a->bq, "attn_q.bias", nq, !bias_required, rc[0]);
	V(a->bk, "attn_k.bias", nk, !bias_required, rc[1]);
	V(a->bv, "attn_v.bias", nv, !bias_required, rc[2]);
	if (rc[0] != rc[1] || rc[1] != rc[2]) {
		snprintf(err, errlen,
		         "layer %d: attn_q/k/v.bias must be all present or all "
		         "absent",
		         il);
		return -1;
	}
	if ((rc[0] == 0) != has_bias) {
		snprintf(err, errlen,
		         "layer %d: attn_q.bias is %s but it is %s in layer 0",
		         il, rc[0] == 0 ? "present" : "absent",
		         has_bias ? "present" : "absent");
		return -1;
	}
	T(a->wo, "attn_output.weight", no, c->n_embd);
	if (ad->feats & MODEL_FEAT_ATTN_OUT_BIAS)
		V(a->bo, "attn_output.bias", c->n_embd,
		  !(ad->required & MODEL_FEAT_ATTN_OUT_BIAS), rc[0]);
	if (ad->feats & MODEL_FEAT_ATTN_SINKS)
		V(a->sinks, "attn_sinks.weight", a->n_head,
		  !(ad->required & MODEL_FEAT_ATTN_SINKS), rc[0]);
	if (ad->feats & MODEL_FEAT_QK_NORM) {
		bool opt = !(ad->required & MODEL_FEAT_QK_NORM);

		V(a->q_norm, "attn_q_norm.weight", a->head_dim_k, opt, rc[0]);
		rc[1] = rc[0]; /* (a layer of shared KV has no keys) */
		if (a->kv_layer == il)
			V(a->k_norm, "attn_k_norm.weight", a->head_dim_k, opt,
			  rc[1]);
		if (rc[0] != rc[1]) {
			snprintf(
			    err, errlen,
			    "layer %d: attn_q_norm and attn_k_norm must be "
			    "both present or both absent",
			    il);
			return -1;
		}
	}
ffn:
	V(ff->norm, ad->ffn_norm ? ad->ffn_norm : "ffn_norm.weight", c->n_embd,
	  false, rc[0]);
	if (ad->feats & MODEL_FEAT_MOE_DENSE) {
		if (model_load_moe_dense(f, sh, il, ff, err, errlen))
			return -1;
	} else if ((ad->feats & MODEL_FEAT_SHARED_EXPERT) &&
	           model_load_shared_expert(f, sh, il, ff, err, errlen))
		return -1;
	else if (ff->kind == MODEL_FFN_EXPERTS) {
		if (model_load_experts(f, il, c->n_embd, ff, err, errlen) ||
		    ((ad->feats & MODEL_FEAT_MOE_BIASES) &&
		     model_load_moe_biases(
		         f, il, c->n_embd, ff,
		         (ad->required & MODEL_FEAT_MOE_BIASES) != 0, err,
		         errlen)))
			return -1;
	} else {
		T(ff->gate, "ffn_gate.weight", c->n_embd, ff->n_ff);
		T(ff->up, "ffn_up.weight", c->n_embd, ff->n_ff);
		T(ff->down, "ffn_down.weight", ff->n_ff, c->n_embd);
	}
	if (ad->feats & MODEL_FEAT_POST_NORMS) {
		bool opt = !(ad->required & MODEL_FEAT_POST_NORMS);

		V(a->post_norm, "post_attention_norm.weight", c->n_embd, opt,
		  rc[0]);
		V(ff->post_norm, "post_ffw_norm.weight", c->n_embd, opt, rc[1]);
	}
	if ((ad->feats & MODEL_FEAT_PER_LAYER_EMBD) &&
	    model_load_ple_layer(f, m, il, &m->w.layers[il], err, errlen))
		return -1;
#undef T
#undef V
	return 0;
}

/* Load the global tensors and count the vocabulary. */
static int model_load_globals(const struct gguf_file *f, struct model *m,
                              char *err, size_t errlen)
{
	struct model_config *c = &m->cfg;
	const struct gguf_tensor *te = gguf_find_tensor(f, "token_embd.weight");
	int rc;

	if (te == NULL) {
		snprintf(err, errlen, "missing tensor token_embd.weight");
		return -1;
	}
	if (te->n_dims != 2 || te->ne[1] < 1 || te->ne[1] > MODEL_MAX_VOCAB) {
		snprintf(err, errlen,
		         "tensor token_embd.weight: %u dims, %llu rows "
		         "(expected 2 dims, 1..%d rows)",
		         te->n_dims, (unsigned long long)te->ne[1],
		         MODEL_MAX_VOCAB);
		return -1;
	}
	c->n_vocab = (int32_t)te->ne[1];
	if (model_tensor_get(f, "token_embd.weight", c->n_embd, c->n_vocab,
	                     false, &m->w.token_embd, err, errlen))
		return -1;
	if (model_vector_get(f, "output_norm.weight", c->n_embd, false,
	                     &m->w.output_norm, err, errlen))
		return -1;
	rc = model_tensor_get(f, "output.weight", c->n_embd, c->n_vocab, true,
	                      &m->w.output, err, errlen);
	if (rc < 0)
		return -1;
	c->tied_output = rc == 1;
	if (c->tied_output)
		m->w.output = m->w.token_embd;
	return 0;
}

/* The inverse frequencies of class R (theta_i(pos) = pos * inv_freq[i]):
 *   inv_freq[i] = base^(-2i/n_rot) * scale / freq_factors[i] */
static int model_rope_freqs(struct model_rope *r, const struct model_shape *sh,
                            char *err, size_t errlen)
{
	const int nr = r->n_rot;
	double lo = 0, hi = 0;

	r->inv_freq = calloc((size_t)nr / 2 + 1, sizeof(double));
	if (r->inv_freq == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	r->mscale = 1.0f;
	if (r->scaling == MODEL_ROPE_SCALING_YARN) {
		/* ggml_rope_yarn_corr_dims */
		const double lb = 2.0 * log((double)r->freq_base);

		lo = floor(
		    nr *
		    log(sh->yarn_orig_ctx / (2.0 * M_PI * sh->yarn_beta_fast)) /
		    lb);
		hi = ceil(
		    nr *
		    log(sh->yarn_orig_ctx / (2.0 * M_PI * sh->yarn_beta_slow)) /
		    lb);
		lo = lo > 0 ? lo : 0;
		hi = hi < nr - 1 ? hi : nr - 1;
		/* llama.cpp's attn_factor (which cancels get_mscale) times
		   rope_yarn's magnitude for ext_factor != 0 */
		if (sh->yarn_ext != 0.0f)
			r->mscale = sh->rope_attn_factor *
			            (1.0f + 0.1f * logf(1.0f / r->freq_scale));
		else
			r->mscale = sh->rope_attn_factor;
	}
	for (int i = 0; i < nr / 2; i++) {
		double fr = pow((double)r->freq_base, -2.0 * i / (double)nr);

		if (r->scaling == MODEL_ROPE_SCALING_YARN) {
			double y =
			    (i - lo) / (hi - lo > 0.001 ? hi - lo : 0.001);
			double ramp = (1.0 - (y < 0   ? 0
			                      : y > 1 ? 1
			                              : y)) *
			              (double)sh->yarn_ext;

			fr *= (double)r->freq_scale * (1.0 - ramp) + ramp;
		} else {
			fr *= (double)r->freq_scale;
		}
		if (r->freq_factors != NULL)
			fr /= (double)r->freq_factors[i];
		r->inv_freq[i] = fr;
	}
	return 0;
}

/*
 * The RoPE classes from the file's shape: class 0 (the global layers':
 * ARCH.rope.freq_base, the scaling the file gives, rope_freqs.weight) and,
 * where layers slide, class 1 (ARCH.rope.freq_base_swa, unscaled, as
 * llama.cpp's sliding layers).
 */
static int model_load_rope(const struct gguf_file *f, struct model *m,
                           const struct model_shape *sh,
                           const struct model_arch_row *ad, char *err,
                           size_t errlen)
{
	struct model_rope *r = &m->cfg.ropes[0];
	int rc;

	m->cfg.n_ropes = 1;
	r->style = ad->rope;
	r->n_rot = sh->n_rot;
	r->freq_base = sh->rope_freq_base;
	r->scaling = sh->rope_yarn     ? MODEL_ROPE_SCALING_YARN
	             : sh->rope_linear ? MODEL_ROPE_SCALING_LINEAR
	                               : MODEL_ROPE_SCALING_NONE;
	r->freq_scale = sh->rope_freq_scale;
	if (sh->rope_linear)
		m->cfg.features |= MODEL_FEAT_ROPE_LINEAR;
	/* (gemma4's holds a factor for each pair of the global head, of
	   which the rotated ones are read) */
	rc = model_vector_get(f, "rope_freqs.weight",
	                      ad->per_layer_keys ? sh->head_dim_k / 2
	                                         : r->n_rot / 2,
	                      true, &r->freq_factors, err, errlen);
	if (rc < 0)
		return -1;
	if (rc == 0)
		m->cfg.features |= MODEL_FEAT_ROPE_FACTORS;
	for (int i = 0; r->freq_factors != NULL && i < r->n_rot / 2; i++) {
		if (!(r->freq_factors[i] > 0.0f)) {
			snprintf(err, errlen,
			         "tensor rope_freqs.weight: element %d = %g is "
			         "not > 0",
			         i, (double)r->freq_factors[i]);
			return -1;
		}
	}
	if (model_rope_freqs(r, sh, err, errlen))
		return -1;
	if (sh->swa_window == 0)
		return 0;
	r = &m->cfg.ropes[1];
	m->cfg.n_ropes = 2;
	r->style = ad->rope;
	r->n_rot = sh->n_rot_swa;
	r->freq_base = sh->rope_base_swa;
	r->scaling = MODEL_ROPE_SCALING_NONE;
	r->freq_scale = 1.0f;
	if (ad->swa_rope_global) { /* the global layers' scaling too */
		r->scaling = m->cfg.ropes[0].scaling;
		r->freq_scale = m->cfg.ropes[0].freq_scale;
	}
	return model_rope_freqs(r, sh, err, errlen);
}

/* The features of gemma4's layer IL (model_set_features). */
static void model_layer_features(struct model *m, int il)
{
	struct model_config *c = &m->cfg;
	const struct model_layer *l = &m->w.layers[il];
	const struct model_layer *l0 = &m->w.layers[0];

	if (l->attn.kind == MODEL_ATTN_RECURRENT)
		return;
	if (l->attn.v_norm)
		c->features |= MODEL_FEAT_V_NORM;
	if (l->attn.kv_layer != il) {
		c->features |= MODEL_FEAT_KV_SHARED;
		c->n_kv_shared++;
	} else if (l->attn.wv.data == NULL) {
		c->features |= MODEL_FEAT_K_AS_V;
	}
	if (l->attn.n_head != l0->attn.n_head ||
	    l->attn.n_head_kv != l0->attn.n_head_kv ||
	    l->attn.head_dim_k != l0->attn.head_dim_k ||
	    l->ffn.n_ff != l0->ffn.n_ff ||
	    l->ffn.sh_gate.ne1 != l0->ffn.sh_gate.ne1)
		c->features |= MODEL_FEAT_LAYER_SHAPES;
	if (l->ffn.exp_norm != NULL)
		c->features |= MODEL_FEAT_MOE_DENSE;
	if (l->ffn.exp_scale != NULL)
		c->features |= MODEL_FEAT_EXPERT_SCALES;
	if (l->ffn.gate_up.data != NULL)
		c->features |= MODEL_FEAT_EXPERTS_MERGED;
	if (l->out_scale != 0.0f)
		c->features |= MODEL_FEAT_OUT_SCALE;
}

/* cfg.features: what the loaded descriptors use (the Q/K/V biases and
 * the RoPE classes' were set as they were read). */
static void model_set_features(struct model *m, const struct model_shape *sh,
                               const struct model_arch_row *ad)
{
	struct model_config *c = &m->cfg;

	if (c->embd_scale != 0.0f)
		c->features |= MODEL_FEAT_EMBD_SCALE;
	if (c->final_softcap != 0.0f)
		c->features |= MODEL_FEAT_FINAL_SOFTCAP;
	if (sh->swa_window > 0)
		c->features |= MODEL_FEAT_ATTN_SLIDING;
	if (ad->act == MODEL_ACT_GELU_TANH)
		c->features |= MODEL_FEAT_GELU_TANH;
	if (sh->n_expert > 0)
		c->features |= MODEL_FEAT_EXPERTS;
	if (ad->act == MODEL_ACT_SWIGLU_OAI)
		c->features |= MODEL_FEAT_SWIGLU_OAI;
	if (sh->rope_yarn)
		c->features |= MODEL_FEAT_ROPE_YARN;
	for (int il = 0; il < c->n_layer; il++) {
		const struct model_layer *l = &m->w.layers[il];

		if (l->attn.q_norm != NULL)
			c->features |= MODEL_FEAT_QK_NORM;
		if (l->attn.post_norm != NULL || l->ffn.post_norm != NULL)
			c->features |= MODEL_FEAT_POST_NORMS;
		if (l->attn.sinks != NULL)
			c->features |= MODEL_FEAT_ATTN_SINKS;
		if (l->attn.bo != NULL)
			c->features |= MODEL_FEAT_ATTN_OUT_BIAS;
		if (l->ffn.router_b != NULL)
			c->features |= MODEL_FEAT_MOE_BIASES;
		if (l->attn.kind == MODEL_ATTN_RECURRENT) {
			c->features |= MODEL_FEAT_RECURRENT;
			c->n_recurrent++;
		}
		if (l->attn.gated)
			c->features |= MODEL_FEAT_ATTN_GATE;
		if (l->ffn.sh_inp != NULL)
			c->features |= MODEL_FEAT_SHARED_EXPERT;
		model_layer_features(m, il);
	}
	if (c->ple_dim > 0)
		c->features |= MODEL_FEAT_PER_LAYER_EMBD;
	if (c->n_ropes == 2 && c->ropes[0].n_rot != c->ropes[1].n_rot)
		c->features |= MODEL_FEAT_LAYER_SHAPES;
	c->n_nextn = sh->n_nextn;
}

/* Raise *MX to V. */
static void model_max(int32_t *mx, int64_t v)
{
	if (v > *mx)
		*mx = (int32_t)v;
}

/* cfg.max_*: the largest of the layers' values (model.h invariant 4). */
static void model_set_maxima(struct model *m)
{
	struct model_config *c = &m->cfg;

	for (int il = 0; il < c->n_layer; il++) {
		const struct model_attn *a = &m->w.layers[il].attn;
		const struct model_ssm *s = &m->w.layers[il].ssm;

		model_max(&c->max_ff, m->w.layers[il].ffn.n_ff);
		model_max(&c->max_expert, m->w.layers[il].ffn.n_expert);
		model_max(&c->max_expert_used,
		          m->w.layers[il].ffn.n_expert_used);
		model_max(&c->max_ff_sh, m->w.layers[il].ffn.sh_gate.ne1);
		if (a->kind == MODEL_ATTN_RECURRENT) {
			model_max(&c->max_conv_dim, s->conv_dim);
			model_max(&c->max_ssm_v,
			          (int64_t)s->n_v_heads * s->head_dim);
			model_max(&c->max_ssm_heads, s->n_v_heads);
			continue;
		}
		model_max(&c->max_n_head, a->n_head);
		model_max(&c->max_head_dim, a->head_dim_k);
		model_max(&c->max_head_dim, a->head_dim_v);
		/* (a gated layer's query rows hold the gate too) */
		model_max(&c->max_q_dim, (int64_t)a->n_head * a->head_dim_k *
		                             (a->gated ? 2 : 1));
		model_max(&c->max_o_dim, (int64_t)a->n_head * a->head_dim_v);
		model_max(&c->max_kv_dim_k,
		          (int64_t)a->n_head_kv * a->head_dim_k);
		model_max(&c->max_kv_dim_v,
		          (int64_t)a->n_head_kv * a->head_dim_v);
	}
	for (int i = 0; i < c->n_ropes; i++)
		model_max(&c->max_rot, c->ropes[i].n_rot);
}

/* Describe the model in F; see model.h for the contract. */
int model_load(const struct gguf_file *f, struct model **out, char *err,
               size_t errlen)
{
	const struct model_arch_row *ad = NULL;
	struct model_shape sh;
	struct gguf_str s;
	struct model *m;
	uint64_t n_split;
	char e[512];

	*out = NULL;
	/* One shard alone lacks the others' tensors: say so rather than
	 * name the first missing tensor (gguf_split_open merges them). */
	if (f->shards == NULL &&
	    gguf_get_u64(f, "split.count", &n_split, NULL, 0) == GGUF_OK &&
	    n_split > 1) {
		snprintf(err, errlen,
		         "%s: one shard of a model split in %" PRIu64
		         " files (split.count), opened without the others",
		         f->path ? f->path : "model", n_split);
		return -1;
	}
	if (gguf_get_str(f, "general.architecture", &s, e, sizeof(e)) !=
	    GGUF_OK) {
		snprintf(err, errlen, "%s: %s", f->path ? f->path : "model", e);
		return -1;
	}
	for (size_t i = 0; i < MODEL_N_ARCHS; i++)
		if (gguf_str_eq(s, model_archs[i].name))
			ad = &model_archs[i];
	if (ad == NULL && gguf_str_eq(s, "clip")) {
		snprintf(err, errlen,
		         "%s is a multimodal projector (mmproj, architecture "
		         "\"clip\"): parley runs the text model only; give the "
		         "language model's GGUF",
		         f->path ? f->path : "model");
		return -1;
	}
	if (ad == NULL) {
		char names[256];
		size_t n = 0;

		names[0] = '\0';
		for (size_t i = 0; model_arch_at(i) != NULL; i++) {
			int k = snprintf(names + n, sizeof(names) - n, "%s%s",
			                 i ? ", " : "", model_arch_at(i));

			if (k < 0 || (size_t)k >= sizeof(names) - n)
				break;
			n += (size_t)k;
		}
		snprintf(err, errlen,
		         "%s: unsupported architecture \"%.*s\" (supported: "
		         "%s)",
		         f->path ? f->path : "model",
		         (int)(s.len > 64 ? 64 : s.len), s.ptr, names);
		return -1;
	}
	m = calloc(1, sizeof(*m));
	if (m == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	m->file = f;
	m->cfg.arch_name = ad->name;
	memset(&sh, 0, sizeof(sh));
	if (model_read_config(f, ad->name, ad->per_layer_keys, &sh, err,
	                      errlen) ||
	    model_read_arch_keys(f, ad, &sh, err, errlen) ||
	    (ad->per_layer_keys &&
	     model_read_gemma4_keys(f, ad->name, &sh, err, errlen)))
		goto fail;
	if (sh.rope_yarn && !(ad->feats & MODEL_FEAT_ROPE_YARN)) {
		snprintf(err, errlen,
		         "%s.rope.scaling.type = \"yarn\": architecture %s "
		         "has no %s",
		         ad->name, ad->name,
		         model_feature_name(MODEL_FEAT_ROPE_YARN));
		goto fail;
	}
	m->cfg.n_layer = sh.n_layer;
	m->cfg.n_embd = sh.n_embd;
	m->cfg.n_ctx_train = sh.n_ctx_train;
	m->cfg.rms_eps = sh.rms_eps;
	/* Gemma: the embeddings times sqrt(n_embd), as llama.cpp rounds it */
	if (ad->required & MODEL_FEAT_EMBD_SCALE)
		m->cfg.embd_scale = sqrtf((float)sh.n_embd);
	m->cfg.final_softcap = sh.final_softcap;
	m->cfg.ple_dim = sh.ple_dim;
	if (model_load_globals(f, m, err, errlen) ||
	    (m->cfg.ple_dim > 0 && model_load_ple_globals(f, m, err, errlen)) ||
	    model_load_rope(f, m, &sh, ad, err, errlen))
		goto fail;
	m->w.layers = calloc((size_t)m->cfg.n_layer, sizeof(*m->w.layers));
	if (m->w.layers == NULL) {
		snprintf(err, errlen, "out of memory for %d layers",
		         m->cfg.n_layer);
		goto fail;
	}
	if (gguf_find_tensor(f, "blk.0.attn_q.bias") != NULL &&
	    (ad->feats & MODEL_FEAT_QKV_BIAS))
		m->cfg.features |= MODEL_FEAT_QKV_BIAS;
	if ((ad->required & MODEL_FEAT_QKV_BIAS) &&
	    !(m->cfg.features & MODEL_FEAT_QKV_BIAS)) {
		snprintf(err, errlen,
		         "missing tensor blk.0.attn_q.bias (required by %s)",
		         ad->name);
		goto fail;
	}
	for (int il = 0; il < m->cfg.n_layer; il++) {
		model_describe_layer(&sh, ad, il, &m->w.layers[il]);
		if (model_load_layer(f, m, il, &sh, ad, err, errlen))
			goto fail;
	}
	model_set_features(m, &sh, ad);
	model_set_maxima(m);
	/* a vision tower (or projector) beside the text model: not read */
	for (uint64_t i = 0; i < f->n_tensors; i++)
		if (strncmp(f->tensors[i].name, "v.", 2) == 0 ||
		    strncmp(f->tensors[i].name, "mm.", 3) == 0)
			m->cfg.n_vision_tensors++;
	*out = m;
	return 0;
fail:
	model_free(m);
	return -1;
}

int model_layer_matrices(
    const struct model_layer *l,
    const struct model_tensor *ts[MODEL_LAYER_MAX_MATRICES])
{
	const struct model_tensor *all[MODEL_LAYER_MAX_MATRICES] = {
	    &l->attn.wq,     &l->attn.wk,     &l->attn.wv,   &l->attn.wo,
	    &l->ffn.gate,    &l->ffn.up,      &l->ffn.down,  &l->ffn.router,
	    &l->ssm.wqkv,    &l->ssm.wz,      &l->ssm.wbeta, &l->ssm.walpha,
	    &l->ssm.wout,    &l->ffn.sh_gate, &l->ffn.sh_up, &l->ffn.sh_down,
	    &l->ffn.gate_up, &l->ple.gate,    &l->ple.proj};
	int n = 0;

	for (int i = 0; i < MODEL_LAYER_MAX_MATRICES; i++)
		if (all[i]->data != NULL)
			ts[n++] = all[i];
	return n;
}

struct model_cache_desc model_layer_cache(const struct model *m, int il)
{
	const struct model_attn *a = &m->w.layers[il].attn;
	struct model_cache_desc d;

	memset(&d, 0, sizeof(d));
	d.kind = a->kind == MODEL_ATTN_SLIDING     ? MODEL_CACHE_WINDOW
	         : a->kind == MODEL_ATTN_RECURRENT ? MODEL_CACHE_RECURRENT
	                                           : MODEL_CACHE_FULL;
	d.window = a->kind == MODEL_ATTN_SLIDING ? a->window : 0;
	d.src = il;
	if (a->kv_layer != il) { /* it reads layer kv_layer's */
		d.kind = MODEL_CACHE_SHARED;
		d.window = 0;
		d.src = a->kv_layer;
		return d;
	}
	if (a->kind == MODEL_ATTN_RECURRENT) {
		const struct model_ssm *s = &m->w.layers[il].ssm;

		d.conv_floats = (int64_t)(s->d_conv - 1) * s->conv_dim;
		d.state_floats =
		    (int64_t)s->n_v_heads * s->head_dim * s->head_dim;
		return d;
	}
	d.k_dim = a->n_head_kv * a->head_dim_k;
	d.v_dim = a->n_head_kv * a->head_dim_v;
	return d;
}

struct model_attn_params model_attn_params(const struct model_attn *a)
{
	struct model_attn_params p;

	p.scale = a->scale;
	p.window = a->kind == MODEL_ATTN_SLIDING ? a->window : 0;
	p.softcap = a->softcap;
	p.sinks = a->sinks;
	return p;
}

size_t model_cache_floats(const struct model *m, int32_t n)
{
	size_t f = 0;

	for (int il = 0; il < m->cfg.n_layer; il++) {
		struct model_cache_desc d = model_layer_cache(m, il);

		f += (size_t)n * ((size_t)d.k_dim + (size_t)d.v_dim);
	}
	return f;
}

struct model_tensor model_expert(const struct model_tensor *t, int32_t e)
{
	struct model_tensor x = *t;

	x.ne2 = 1;
	x.data = (const unsigned char *)t->data +
	         (size_t)e * (size_t)t->ne1 * t->row_size;
	return x;
}

void model_expert_gate_up(const struct model_ffn *f, int32_t e,
                          struct model_tensor *gate, struct model_tensor *up)
{
	if (f->gate_up.data == NULL) {
		*gate = model_expert(&f->gate, e);
		*up = model_expert(&f->up, e);
		return;
	}
	/* expert e's 2 n_ff rows: gate's, then up's */
	*gate = model_expert(&f->gate_up, e);
	gate->ne1 = f->n_ff;
	*up = *gate;
	up->data = (const unsigned char *)gate->data +
	           (size_t)f->n_ff * gate->row_size;
}

/* The scores the choice is made on (model_moe_route): SOFTMAX gating the
 * softmax of the logits R, as ggml's soft_max (max, exp, 1/sum); else the
 * logits themselves. */
static void model_moe_scores(const struct model_ffn *f, const float *r,
                             float *sc)
{
	const int32_t n = f->n_expert;
	float mx = -INFINITY;
	double sum = 0.0;

	if (f->gating != MODEL_MOE_SOFTMAX) {
		memcpy(sc, r, (size_t)n * sizeof(float));
		return;
	}
	for (int32_t i = 0; i < n; i++)
		if (r[i] > mx)
			mx = r[i];
	for (int32_t i = 0; i < n; i++) {
		sc[i] = expf(r[i] - mx);
		sum += sc[i];
	}
	for (int32_t i = 0; i < n; i++)
		sc[i] *= (float)(1.0 / sum);
}

/* The weights W of the chosen IDS from the scores SC (the recipe). */
static void model_moe_weigh(const struct model_ffn *f, const float *sc,
                            const int32_t *ids, float *w)
{
	const int32_t k = f->n_expert_used;
	float sum_w = 0.0f;

	for (int32_t j = 0; j < k; j++) {
		w[j] = sc[ids[j]];
		sum_w += w[j];
	}
	if (f->gating == MODEL_MOE_TOPK_SOFTMAX) { /* of the chosen only */
		const float mx = w[0];
		double sum = 0.0;

		for (int32_t j = 0; j < k; j++) {
			w[j] = expf(w[j] - mx);
			sum += w[j];
		}
		sum_w = 0.0f;
		for (int32_t j = 0; j < k; j++) {
			w[j] *= (float)(1.0 / sum);
			sum_w += w[j];
		}
	}
	if (f->norm_w) {
		/* ggml clamps the sum at fp16's smallest normal */
		float d = sum_w > 6.103515625e-5f ? sum_w : 6.103515625e-5f;

		for (int32_t j = 0; j < k; j++)
			w[j] /= d;
	}
	if (f->w_scale != 0.0f && f->w_scale != 1.0f)
		for (int32_t j = 0; j < k; j++)
			w[j] *= f->w_scale;
}

void model_moe_route(const struct model_ffn *f, const float *r, float *scratch,
                     int32_t *ids, float *w)
{
	const int32_t n = f->n_expert, k = f->n_expert_used;

	model_moe_scores(f, r, scratch);
	/* the k largest, largest first; among equals the lower index */
	for (int32_t j = 0; j < k; j++) {
		int32_t best = -1;

		for (int32_t i = 0; i < n; i++) {
			bool taken = false;

			for (int32_t p = 0; p < j && !taken; p++)
				taken = ids[p] == i;
			if (!taken && (best < 0 || scratch[i] > scratch[best]))
				best = i;
		}
		ids[j] = best;
	}
	model_moe_weigh(f, scratch, ids, w);
}

float model_moe_pin(const struct model_ffn *f, const float *r, float *scratch,
                    const int32_t *pinned, int32_t *ids, float *w)
{
	const int32_t k = f->n_expert_used;
	float own = 0.0f, got = 0.0f;

	model_moe_route(f, r, scratch, ids, w);
	for (int32_t j = 0; j < k; j++) {
		own += scratch[ids[j]];
		ids[j] = pinned[j] >= 0 && pinned[j] < f->n_expert ? pinned[j]
		                                                   : ids[j];
	}
	for (int32_t j = 0; j < k; j++)
		got += scratch[ids[j]];
	model_moe_weigh(f, scratch, ids, w);
	return own - got;
}

const struct model_rope *model_layer_rope(const struct model *m, int il)
{
	return &m->cfg.ropes[m->w.layers[il].attn.rope];
}

/* Whether M's cache can be shifted (model.h). Every RoPE class here has
 * theta = pos * inv_freq (linear, YaRN, rope_freqs and proportional
 * divisors are folded into inv_freq), so a cached key rotated by -d
 * equals the key rotated at pos - d; a recurrent state sums over every
 * position and cannot lose a span. */
bool model_kv_shiftable(const struct model *m)
{
	for (int il = 0; il < m->cfg.n_layer; il++) {
		struct model_cache_desc d = model_layer_cache(m, il);
		const struct model_attn *a = &m->w.layers[il].attn;

		if (d.kind == MODEL_CACHE_RECURRENT)
			return false;
		if (d.kind != MODEL_CACHE_SHARED &&
		    (a->rope < 0 || a->rope >= m->cfg.n_ropes))
			return false;
	}
	return true;
}

/* Free the model and its owned copies. */
void model_free(struct model *m)
{
	if (m == NULL)
		return;
	for (int il = 0; m->w.layers != NULL && il < m->cfg.n_layer; il++) {
		struct model_attn *a = &m->w.layers[il].attn;
		struct model_ffn *ff = &m->w.layers[il].ffn;

		free(a->norm);
		free(a->post_norm);
		free(a->q_norm);
		free(a->k_norm);
		free(a->bq);
		free(a->bk);
		free(a->bv);
		free(a->bo);
		free(a->sinks);
		free(ff->norm);
		free(ff->post_norm);
		free(ff->router_b);
		free(ff->gate_b);
		free(ff->up_b);
		free(ff->down_b);
		free(ff->sh_inp);
		model_ssm_free(&m->w.layers[il].ssm);
		model_gemma4_free_layer(&m->w.layers[il]);
	}
	for (int i = 0; i < MODEL_MAX_ROPES; i++) {
		free(m->cfg.ropes[i].freq_factors);
		free(m->cfg.ropes[i].inv_freq);
	}
	free(m->w.layers);
	free(m->w.output_norm);
	free(m->w.ple_proj_norm);
	free(m);
}

/* Bytes of one matrix (or stack of them). */
static uint64_t model_tensor_bytes(const struct model_tensor *t)
{
	return (uint64_t)t->row_size * (uint64_t)t->ne1 * (uint64_t)t->ne2;
}

/* Bytes of the weights read per token (LM head included, embeddings not;
 * of an expert stack the n_expert_used matrices a token is routed to). */
uint64_t model_weight_bytes(const struct model *m)
{
	uint64_t n =
	    model_tensor_bytes(&m->w.output) +
	    (m->w.ple_proj.data ? model_tensor_bytes(&m->w.ple_proj) : 0);

	for (int il = 0; il < m->cfg.n_layer; il++) {
		const struct model_ffn *ff = &m->w.layers[il].ffn;
		const struct model_tensor *ts[MODEL_LAYER_MAX_MATRICES];
		int nt = model_layer_matrices(&m->w.layers[il], ts);

		for (int i = 0; i < nt; i++) {
			uint64_t b = model_tensor_bytes(ts[i]);

			if (ts[i]->ne2 > 1)
				b = b / (uint64_t)ts[i]->ne2 *
				    (uint64_t)ff->n_expert_used;
			n += b;
		}
	}
	return n;
}

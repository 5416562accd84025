/*
 * model_ssm.c - the recurrent layers of a model (model.h's Gated DeltaNet,
 * Qwen3.5): their keys, which layers they are, their tensors, and the
 * shared expert that the same architectures' mixtures carry.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "model.h"
#include "model_int.h"

/* Taps of a causal conv the backends handle (Qwen3.5: 4). */
#define MODEL_MAX_CONV 16

/* One ssm.* count into *OUT, required, 1..MAX. */
static int model_ssm_count(const struct gguf_file *f, const char *arch,
                           const char *suffix, int64_t max, int32_t *out,
                           char *err, size_t errlen)
{
	uint32_t v;

	if (model_get_u32(f, arch, suffix, false, &v, err, errlen) ||
	    model_check_range(arch, suffix, v, max, err, errlen))
		return -1;
	*out = (int32_t)v;
	return 0;
}

/*
 * ARCH.rope.dimension_sections (multi-section RoPE, llama.cpp's IMROPE):
 * pair i of the n_rot/2 rotates by the position of section t, h or w by
 * the interleaving rule below, or by the fourth ("e") position. Text
 * tokens have t = h = w = their position and e = 0, so the rotation is a
 * plain one of n_rot dims exactly when no pair falls to e; a file whose
 * sections leave one there is refused rather than rotated wrong.
 */
static int model_check_sections(const struct gguf_file *f, const char *arch,
                                const struct model_shape *sh, char *err,
                                size_t errlen)
{
	const struct gguf_array *a;
	char key[128];
	int64_t s[4] = {0, 0, 0, 0}, sum = 0;
	int rc;

	snprintf(key, sizeof(key), "%s.rope.dimension_sections", arch);
	rc = gguf_get_arr(f, key, GGUF_TYPE_COUNT, &a, err, errlen);
	if (rc == GGUF_ENOKEY)
		return 0;
	if (rc != GGUF_OK)
		return -1;
	if (a->n < 3 || a->n > 4 || gguf_type_size(a->elem_type) == 0) {
		snprintf(err, errlen, "%s: expected 3 or 4 integers", key);
		return -1;
	}
	for (uint64_t i = 0; i < a->n; i++) {
		s[i] = gguf_arr_i64(a, i);
		if (s[i] < 0 || s[i] > sh->n_rot) {
			snprintf(err, errlen, "%s[%llu] = %lld is out of range",
			         key, (unsigned long long)i, (long long)s[i]);
			return -1;
		}
		sum += s[i];
	}
	if (sum < 1 || sum > sh->n_rot / 2) {
		snprintf(err, errlen,
		         "%s: the sections' sum %lld is not in 1..%d (half the "
		         "rotated dims)",
		         key, (long long)sum, sh->n_rot / 2);
		return -1;
	}
	for (int i = 0; i < sh->n_rot / 2; i++) {
		int64_t c = i % sum;
		bool text = (c % 3 == 0 && c < 3 * s[0]) ||
		            (c % 3 == 1 && c < 3 * s[1]) ||
		            (c % 3 == 2 && c < 3 * s[2]);

		if (!text) {
			snprintf(
			    err, errlen,
			    "%s = [%lld, %lld, %lld, %lld]: rotated pair %d "
			    "takes the fourth section's position (not "
			    "supported)",
			    key, (long long)s[0], (long long)s[1],
			    (long long)s[2], (long long)s[3], i);
			return -1;
		}
	}
	return 0;
}

int model_read_ssm_keys(const struct gguf_file *f, const char *arch,
                        struct model_shape *sh, char *err, size_t errlen)
{
	int32_t inner;
	uint32_t v;
	char key[128];
	int rc;

	if (model_ssm_count(f, arch, "ssm.conv_kernel", MODEL_MAX_CONV,
	                    &sh->ssm_d_conv, err, errlen) ||
	    model_ssm_count(f, arch, "ssm.state_size", MODEL_MAX_HEAD_DIM,
	                    &sh->ssm_head_dim, err, errlen) ||
	    model_ssm_count(f, arch, "ssm.group_count", MODEL_MAX_HEADS,
	                    &sh->ssm_k_heads, err, errlen) ||
	    model_ssm_count(f, arch, "ssm.time_step_rank", MODEL_MAX_HEADS,
	                    &sh->ssm_v_heads, err, errlen) ||
	    model_ssm_count(f, arch, "ssm.inner_size",
	                    (int64_t)MODEL_MAX_HEADS * MODEL_MAX_HEAD_DIM,
	                    &inner, err, errlen))
		return -1;
	if (sh->ssm_v_heads % sh->ssm_k_heads != 0) {
		snprintf(err, errlen,
		         "%s.ssm.time_step_rank = %d (value heads) is not a "
		         "multiple of ssm.group_count = %d (key heads)",
		         arch, sh->ssm_v_heads, sh->ssm_k_heads);
		return -1;
	}
	if ((int64_t)sh->ssm_v_heads * sh->ssm_head_dim != inner) {
		snprintf(err, errlen,
		         "%s.ssm.inner_size = %d is not time_step_rank %d x "
		         "state_size %d (value heads of the key heads' size)",
		         arch, inner, sh->ssm_v_heads, sh->ssm_head_dim);
		return -1;
	}
	snprintf(key, sizeof(key), "%s.attention.recurrent_layers", arch);
	if (gguf_find_kv(f, key) != NULL) {
		snprintf(
		    err, errlen,
		    "%s: a list of recurrent layers is not supported (only "
		    "%s.full_attention_interval)",
		    key, arch);
		return -1;
	}
	v = 4; /* llama.cpp's default */
	rc = model_get_u32(f, arch, "full_attention_interval", true, &v, err,
	                   errlen);
	if (rc < 0 || model_check_range(arch, "full_attention_interval", v,
	                                MODEL_MAX_LAYERS, err, errlen))
		return -1;
	sh->full_attn_interval = (int32_t)v;
	v = 0;
	if (model_get_u32(f, arch, "nextn_predict_layers", true, &v, err,
	                  errlen) < 0)
		return -1;
	if (v >= (uint32_t)sh->n_layer) {
		snprintf(err, errlen,
		         "%s.nextn_predict_layers = %u leaves no layer of "
		         "block_count = %d",
		         arch, v, sh->n_layer);
		return -1;
	}
	sh->n_nextn = (int32_t)v;
	sh->n_layer -= sh->n_nextn; /* the blocks after them: not run */
	return model_check_sections(f, arch, sh, err, errlen);
}

bool model_layer_recurrent(const struct model_shape *sh, int il)
{
	return sh->full_attn_interval > 0 &&
	       (il + 1) % sh->full_attn_interval != 0;
}

int model_load_ssm(const struct gguf_file *f, const struct model_shape *sh,
                   int il, struct model_ssm *s, char *err, size_t errlen)
{
	const int64_t ne = sh->n_embd;
	int64_t nv;
	char name[96];

	s->n_k_heads = sh->ssm_k_heads;
	s->n_v_heads = sh->ssm_v_heads;
	s->head_dim = sh->ssm_head_dim;
	s->d_conv = sh->ssm_d_conv;
	s->conv_dim = (2 * s->n_k_heads + s->n_v_heads) * s->head_dim;
	nv = (int64_t)s->n_v_heads * s->head_dim;
#define T(field, suffix, ne0, ne1)                                             \
	do {                                                                   \
		snprintf(name, sizeof(name), "blk.%d.%s", il, suffix);         \
		if (model_tensor_get(f, name, ne0, ne1, false, &s->field, err, \
		                     errlen))                                  \
			return -1;                                             \
	} while (0)
#define R(field, suffix, ne0, ne1)                                             \
	do {                                                                   \
		snprintf(name, sizeof(name), "blk.%d.%s", il, suffix);         \
		if (model_rows_get(f, name, ne0, ne1, false, &s->field, err,   \
		                   errlen))                                    \
			return -1;                                             \
	} while (0)
	T(wqkv, "attn_qkv.weight", ne, s->conv_dim);
	T(wz, "attn_gate.weight", ne, nv);
	T(wbeta, "ssm_beta.weight", ne, s->n_v_heads);
	T(walpha, "ssm_alpha.weight", ne, s->n_v_heads);
	T(wout, "ssm_out.weight", nv, ne);
	R(conv, "ssm_conv1d.weight", s->d_conv, s->conv_dim);
	R(dt_bias, "ssm_dt.bias", s->n_v_heads, 1);
	R(a, "ssm_a", s->n_v_heads, 1);
	R(norm, "ssm_norm.weight", s->head_dim, 1);
#undef T
#undef R
	for (int32_t h = 0; h < s->n_v_heads; h++)
		if (!(s->a[h] <= 0.0f)) { /* e^(g) > 1 would grow the state */
			snprintf(
			    err, errlen,
			    "tensor blk.%d.ssm_a: element %d = %g is not <= "
			    "0 (a decay)",
			    il, h, (double)s->a[h]);
			return -1;
		}
	return 0;
}

int model_load_shared_expert(const struct gguf_file *f,
                             const struct model_shape *sh, int il,
                             struct model_ffn *ff, char *err, size_t errlen)
{
	char name[96];

	snprintf(name, sizeof(name), "blk.%d.ffn_gate_shexp.weight", il);
	if (model_tensor_get(f, name, sh->n_embd, sh->n_ff_sh, false,
	                     &ff->sh_gate, err, errlen))
		return -1;
	snprintf(name, sizeof(name), "blk.%d.ffn_up_shexp.weight", il);
	if (model_tensor_get(f, name, sh->n_embd, sh->n_ff_sh, false,
	                     &ff->sh_up, err, errlen))
		return -1;
	snprintf(name, sizeof(name), "blk.%d.ffn_down_shexp.weight", il);
	if (model_tensor_get(f, name, sh->n_ff_sh, sh->n_embd, false,
	                     &ff->sh_down, err, errlen))
		return -1;
	snprintf(name, sizeof(name), "blk.%d.ffn_gate_inp_shexp.weight", il);
	return model_vector_get(f, name, sh->n_embd, false, &ff->sh_inp, err,
	                        errlen);
}

void model_ssm_free(struct model_ssm *s)
{
	free(s->conv);
	free(s->dt_bias);
	free(s->a);
	free(s->norm);
}

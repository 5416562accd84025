/*
 * model_gemma4.c - what Gemma 4's files add to the description (model.h):
 * per-layer head counts and FFN sizes, the sliding layers' own head size
 * and rotation, KV sharing, the mixture beside a dense MLP and the E
 * models' per-layer inputs. Keys and tensor names are llama.cpp's
 * (src/models/gemma4.cpp, src/llama-model.cpp).
 */
#include "model.h"
#include "model_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "qtype.h"

/* The sliding pattern: an array of one flag a layer (true: sliding), or
 * a number (model_read_arch_keys' rule, already applied), or absent. */
static int model_read_swa_flags(const struct gguf_file *f, const char *arch,
                                struct model_shape *sh, char *err,
                                size_t errlen)
{
	char key[128];
	const struct gguf_kv *kv;
	const struct gguf_array *a;
	uint32_t v;

	snprintf(key, sizeof(key), "%s.attention.sliding_window_pattern", arch);
	kv = gguf_find_kv(f, key);
	if (kv == NULL)
		return 0;
	if (kv->val.type != GGUF_TYPE_ARRAY) {
		if (model_get_u32(f, arch, "attention.sliding_window_pattern",
		                  false, &v, err, errlen) ||
		    model_check_range(arch, "attention.sliding_window_pattern",
		                      v, MODEL_MAX_LAYERS, err, errlen))
			return -1;
		for (int32_t il = 0; il < sh->n_layer; il++)
			sh->l_swa[il] = il % (int32_t)v < (int32_t)v - 1;
		return 0;
	}
	a = &kv->val.v.arr;
	if (a->n != (uint64_t)sh->n_layer ||
	    gguf_type_size(a->elem_type) == 0) {
		snprintf(err, errlen,
		         "%s: an array of %llu %s, expected %d flags (one a "
		         "layer)",
		         key, (unsigned long long)a->n,
		         gguf_type_name(a->elem_type), sh->n_layer);
		return -1;
	}
	for (int32_t il = 0; il < sh->n_layer; il++)
		sh->l_swa[il] = gguf_arr_i64(a, (uint64_t)il) != 0;
	return 0;
}

/* The sliding layers' head size and rotation (defaults: the global
 * layers'), checked as model_read_config checks those. */
static int model_read_swa_heads(const struct gguf_file *f, const char *arch,
                                struct model_shape *sh, char *err,
                                size_t errlen)
{
	uint32_t k = (uint32_t)sh->head_dim_k, v, r;

	if (model_get_u32(f, arch, "attention.key_length_swa", true, &k, err,
	                  errlen) < 0 ||
	    model_check_range(arch, "attention.key_length_swa", k,
	                      MODEL_MAX_HEAD_DIM, err, errlen))
		return -1;
	v = k;
	if (model_get_u32(f, arch, "attention.value_length_swa", true, &v, err,
	                  errlen) < 0)
		return -1;
	if (v != k) {
		snprintf(err, errlen,
		         "%s.attention.value_length_swa = %u differs from "
		         "key_length_swa = %u (not supported)",
		         arch, v, k);
		return -1;
	}
	r = (uint32_t)sh->n_rot;
	if (model_get_u32(f, arch, "rope.dimension_count_swa", true, &r, err,
	                  errlen) < 0)
		return -1;
	if (r < 2 || r > k || r % 2 != 0) {
		snprintf(err, errlen,
		         "%s.rope.dimension_count_swa = %u must be even and in "
		         "2..%u (the sliding layers' head size)",
		         arch, r, k);
		return -1;
	}
	sh->head_dim_swa = (int32_t)k;
	sh->n_rot_swa = (int32_t)r;
	return 0;
}

int model_read_gemma4_keys(const struct gguf_file *f, const char *arch,
                           struct model_shape *sh, char *err, size_t errlen)
{
	uint32_t v = 0;

	if (model_read_swa_flags(f, arch, sh, err, errlen) ||
	    model_read_swa_heads(f, arch, sh, err, errlen))
		return -1;
	if (model_get_u32(f, arch, "attention.shared_kv_layers", true, &v, err,
	                  errlen) < 0)
		return -1;
	/* llama.cpp's sharing reads the last two layers with a cache */
	if (v > 0 && (int64_t)v > (int64_t)sh->n_layer - 2) {
		snprintf(err, errlen,
		         "%s.attention.shared_kv_layers = %u: at most %d of "
		         "%d layers (two must have caches of their own)",
		         arch, v, sh->n_layer - 2, sh->n_layer);
		return -1;
	}
	sh->n_kv_layers = sh->n_layer - (int32_t)v;
	v = 0;
	if (model_get_u32(f, arch, "embedding_length_per_layer_input", true, &v,
	                  err, errlen) < 0 ||
	    (v != 0 &&
	     model_check_range(arch, "embedding_length_per_layer_input", v,
	                       MODEL_MAX_EMBD, err, errlen)))
		return -1;
	sh->ple_dim = (int32_t)v;
	return 0;
}

int model_kv_source(const struct model_shape *sh, int il, char *err,
                    size_t errlen)
{
	/* llama.cpp: the last layer with a cache if global, the one before
	   if sliding (its files end their cached layers sliding, global) */
	const bool swa = sh->swa_window > 0 && sh->l_swa[il];
	const int j = sh->n_kv_layers - (swa ? 2 : 1);

	if (j < 0 || (sh->swa_window > 0 && sh->l_swa[j]) != swa) {
		snprintf(err, errlen,
		         "layer %d (%s) would read layer %d's KV cache, which "
		         "is not %s (attention.shared_kv_layers = %d)",
		         il, swa ? "sliding" : "global", j,
		         swa ? "sliding" : "global",
		         sh->n_layer - sh->n_kv_layers);
		return -1;
	}
	return j;
}

/* The mixture's tensors beside the dense MLP: router, its input scale,
 * the expert stacks (gate and up apart, or merged), the per-expert
 * output scales and the two branches' norms. */
static int model_load_moe_side(const struct gguf_file *f, int il,
                               int32_t n_embd, struct model_ffn *ff, char *err,
                               size_t errlen)
{
	char name[96];
	int rc;

#define G3(field, sfx, ne0, ne1, opt)                                          \
	(snprintf(name, sizeof(name), "blk.%d.%s", il, sfx),                   \
	 model_tensor_get3(f, name, ne0, ne1, ff->n_expert, opt, &field, err,  \
	                   errlen))
#define VEC(field, sfx, n, opt)                                                \
	(snprintf(name, sizeof(name), "blk.%d.%s", il, sfx),                   \
	 model_vector_get(f, name, n, opt, &field, err, errlen))
	if (VEC(ff->router_scale, "ffn_gate_inp.scale", n_embd, false) ||
	    VEC(ff->exp_norm, "pre_ffw_norm_2.weight", n_embd, false) ||
	    VEC(ff->sh_post_norm, "post_ffw_norm_1.weight", n_embd, false) ||
	    VEC(ff->exp_post_norm, "post_ffw_norm_2.weight", n_embd, false) ||
	    VEC(ff->exp_scale, "ffn_down_exps.scale", ff->n_expert, true) < 0)
		return -1;
	rc = G3(ff->gate_up, "ffn_gate_up_exps.weight", n_embd, 2 * ff->n_ff,
	        true);
	if (rc < 0 ||
	    (rc == 1 &&
	     (G3(ff->gate, "ffn_gate_exps.weight", n_embd, ff->n_ff, false) ||
	      G3(ff->up, "ffn_up_exps.weight", n_embd, ff->n_ff, false))) ||
	    G3(ff->down, "ffn_down_exps.weight", ff->n_ff, n_embd, false))
		return -1;
#undef G3
#undef VEC
	/* scales of the gate or up products would need a step this recipe
	   lacks */
	for (int k = 0; k < 2; k++) {
		snprintf(name, sizeof(name), "blk.%d.%s", il,
		         k ? "ffn_up_exps.scale" : "ffn_gate_exps.scale");
		if (gguf_find_tensor(f, name) != NULL) {
			snprintf(err, errlen, "tensor %s: not supported", name);
			return -1;
		}
	}
	return 0;
}

int model_load_moe_dense(const struct gguf_file *f,
                         const struct model_shape *sh, int il,
                         struct model_ffn *ff, char *err, size_t errlen)
{
	const int32_t ne = sh->n_embd, nf = sh->l_n_ff[il];
	struct model_tensor *dense[3];
	char name[96];
	const char *const sfx[3] = {"ffn_gate.weight", "ffn_up.weight",
	                            "ffn_down.weight"};

	snprintf(name, sizeof(name), "blk.%d.ffn_gate_inp.weight", il);
	if (ff->kind == MODEL_FFN_EXPERTS &&
	    gguf_find_tensor(f, name) == NULL) {
		/* a layer without a router is a dense one */
		ff->kind = MODEL_FFN_DENSE;
		ff->n_ff = nf;
		ff->n_expert = ff->n_expert_used = 0;
	}
	/* the dense MLP: the layer's own, or the one beside the mixture */
	dense[0] = ff->kind == MODEL_FFN_DENSE ? &ff->gate : &ff->sh_gate;
	dense[1] = ff->kind == MODEL_FFN_DENSE ? &ff->up : &ff->sh_up;
	dense[2] = ff->kind == MODEL_FFN_DENSE ? &ff->down : &ff->sh_down;
	for (int k = 0; k < 3; k++) {
		snprintf(name, sizeof(name), "blk.%d.%s", il, sfx[k]);
		if (model_tensor_get(f, name, k == 2 ? nf : ne,
		                     k == 2 ? ne : nf, false, dense[k], err,
		                     errlen))
			return -1;
	}
	if (ff->kind == MODEL_FFN_DENSE)
		return 0;
	if (model_load_router(f, il, ne, ff, err, errlen))
		return -1;
	return model_load_moe_side(f, il, ne, ff, err, errlen);
}

int model_load_ple_globals(const struct gguf_file *f, struct model *m,
                           char *err, size_t errlen)
{
	const struct model_config *c = &m->cfg;
	const int64_t np = (int64_t)c->ple_dim * c->n_layer;

	if (model_tensor_get(f, "per_layer_token_embd.weight", np, c->n_vocab,
	                     false, &m->w.ple_embd, err, errlen) ||
	    model_tensor_get(f, "per_layer_model_proj.weight", c->n_embd, np,
	                     false, &m->w.ple_proj, err, errlen) ||
	    model_vector_get(f, "per_layer_proj_norm.weight", c->ple_dim, false,
	                     &m->w.ple_proj_norm, err, errlen))
		return -1;
	return 0;
}

int model_load_ple_layer(const struct gguf_file *f, const struct model *m,
                         int il, struct model_layer *l, char *err,
                         size_t errlen)
{
	const struct model_config *c = &m->cfg;
	float *s = NULL;
	char name[96];
	int rc;

	snprintf(name, sizeof(name), "blk.%d.layer_output_scale.weight", il);
	rc = model_vector_get(f, name, 1, true, &s, err, errlen);
	if (rc < 0)
		return -1;
	l->out_scale = s != NULL ? s[0] : 0.0f;
	free(s);
	if (c->ple_dim == 0)
		return 0;
	snprintf(name, sizeof(name), "blk.%d.inp_gate.weight", il);
	if (model_tensor_get(f, name, c->n_embd, c->ple_dim, false,
	                     &l->ple.gate, err, errlen))
		return -1;
	snprintf(name, sizeof(name), "blk.%d.proj.weight", il);
	if (model_tensor_get(f, name, c->ple_dim, c->n_embd, false,
	                     &l->ple.proj, err, errlen))
		return -1;
	snprintf(name, sizeof(name), "blk.%d.post_norm.weight", il);
	return model_vector_get(f, name, c->n_embd, false, &l->ple.post_norm,
	                        err, errlen);
}

void model_gemma4_free_layer(struct model_layer *l)
{
	free(l->ffn.sh_post_norm);
	free(l->ffn.exp_norm);
	free(l->ffn.exp_post_norm);
	free(l->ffn.router_scale);
	free(l->ffn.exp_scale);
	free(l->ple.post_norm);
}

/*
 * model.c - hyper-parameters and weight table from GGUF metadata (model.h).
 */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "qtype.h"
#include "quant.h"

/* Architectures: name, RoPE style, whether Q/K/V biases are required. */
static const struct model_arch_desc {
	const char *name;
	enum model_arch arch;
	enum model_rope_style rope;
	bool bias_required;
} model_archs[] = {
    {"llama", MODEL_ARCH_LLAMA, MODEL_ROPE_NORM, false},
    {"qwen2", MODEL_ARCH_QWEN2, MODEL_ROPE_NEOX, true},
};

/* Comma-separated list of the supported architectures (static). */
const char *model_supported_archs(void)
{
	return "llama, qwen2";
}

/* Read "ARCH.SUFFIX" as u32 into *out; absent is an error unless OPTIONAL. */
static int model_get_u32(const struct gguf_file *f, const char *arch,
                         const char *suffix, bool optional, uint32_t *out,
                         char *err, size_t errlen)
{
	char key[128];
	char e[256];
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
static int model_get_f32(const struct gguf_file *f, const char *arch,
                         const char *suffix, float *out, char *err,
                         size_t errlen)
{
	char key[128];
	char e[256];
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
static int model_check_range(const char *arch, const char *what, int64_t v,
                             int64_t max, char *err, size_t errlen)
{
	if (v < 1 || v > max) {
		snprintf(err, errlen, "%s.%s = %lld is out of range (1..%lld)",
		         arch, what, (long long)v, (long long)max);
		return -1;
	}
	return 0;
}

/* Read and check the hyper-parameters (tensor-independent part). */
static int model_read_config(const struct gguf_file *f, const char *arch,
                             struct model_config *c, char *err, size_t errlen)
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
	if (model_get_u32(f, arch, "feed_forward_length", false, &v, err,
	                  errlen) ||
	    model_check_range(arch, "feed_forward_length", v, MODEL_MAX_FF, err,
	                      errlen))
		return -1;
	c->n_ff = (int32_t)v;
	if (model_get_u32(f, arch, "attention.head_count", false, &v, err,
	                  errlen) ||
	    model_check_range(arch, "attention.head_count", v, MODEL_MAX_HEADS,
	                      err, errlen))
		return -1;
	c->n_head = (int32_t)v;
	rc = model_get_u32(f, arch, "attention.head_count_kv", true, &v, err,
	                   errlen);
	if (rc < 0)
		return -1;
	if (rc == 1)
		v = (uint32_t)c->n_head;
	if (model_check_range(arch, "attention.head_count_kv", v, c->n_head,
	                      err, errlen))
		return -1;
	c->n_head_kv = (int32_t)v;
	if (c->n_head % c->n_head_kv != 0) {
		snprintf(err, errlen,
		         "%s.attention.head_count = %d is not a multiple of "
		         "head_count_kv = %d",
		         arch, c->n_head, c->n_head_kv);
		return -1;
	}
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
			if (!gguf_str_eq(s, "linear")) {
				snprintf(
				    err, errlen,
				    "%s = \"%.*s\": only \"none\" and "
				    "\"linear\" RoPE scaling are supported",
				    key, (int)(s.len > 64 ? 64 : s.len), s.ptr);
				return -1;
			}
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

/*
 * Find tensor NAME and check it: computable type, ne0 == NE0, ne1 == NE1
 * (NE1 == 0 for a 1-D tensor). Returns 0 and fills *t, 1 if absent and
 * OPTIONAL, -1 with a message naming the tensor otherwise.
 */
static int model_tensor_get(const struct gguf_file *f, const char *name,
                            int64_t ne0, int64_t ne1, bool optional,
                            struct model_tensor *t, char *err, size_t errlen)
{
	const struct gguf_tensor *g = gguf_find_tensor(f, name);
	uint32_t want_dims = ne1 == 0 ? 1 : 2;
	char e[256];

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
	    (ne1 != 0 && (int64_t)g->ne[1] != ne1)) {
		snprintf(err, errlen,
		         "tensor %s has shape [%llu, %llu] (%u dims), expected "
		         "[%lld, %lld] (%u dims)",
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
	t->row_size = quant_row_size(g->type, ne0);
	t->data = g->data;
	if (t->row_size == 0 ||
	    (uint64_t)t->row_size * (uint64_t)t->ne1 != g->nbytes) {
		snprintf(err, errlen,
		         "tensor %s: %llu bytes, expected %llu for type %s",
		         name, (unsigned long long)g->nbytes,
		         (unsigned long long)t->row_size * (uint64_t)t->ne1,
		         qtype_name(g->type));
		return -1;
	}
	return 0;
}

/* A 1-D tensor of N elements as a new fp32 array (*out, owned), or NULL. */
static int model_vector_get(const struct gguf_file *f, const char *name,
                            int64_t n, bool optional, float **out, char *err,
                            size_t errlen)
{
	struct model_tensor t;
	int rc = model_tensor_get(f, name, n, 0, optional, &t, err, errlen);

	*out = NULL;
	if (rc != 0)
		return rc;
	*out = malloc((size_t)n * sizeof(float));
	if (*out == NULL) {
		snprintf(err, errlen, "out of memory for tensor %s", name);
		return -1;
	}
	quant_dequant_row(t.type, t.data, *out, n);
	for (int64_t i = 0; i < n; i++) {
		if (!isfinite((*out)[i])) {
			snprintf(err, errlen,
			         "tensor %s: element %lld is not finite", name,
			         (long long)i);
			free(*out);
			*out = NULL;
			return -1;
		}
	}
	return 0;
}

/* Load the tensors of layer IL. */
static int model_load_layer(const struct gguf_file *f, struct model *m, int il,
                            bool bias_required, char *err, size_t errlen)
{
	const struct model_config *c = &m->cfg;
	struct model_layer *l = &m->w.layers[il];
	int64_t nq = (int64_t)c->n_head * c->head_dim_k;
	int64_t nk = (int64_t)c->n_head_kv * c->head_dim_k;
	int64_t nv = (int64_t)c->n_head_kv * c->head_dim_v;
	int64_t no = (int64_t)c->n_head * c->head_dim_v;
	char name[96];
	int rc[3];

#define T(field, suffix, ne0, ne1)                                             \
	do {                                                                   \
		snprintf(name, sizeof(name), "blk.%d.%s", il, suffix);         \
		if (model_tensor_get(f, name, ne0, ne1, false, &l->field, err, \
		                     errlen))                                  \
			return -1;                                             \
	} while (0)
#define V(field, suffix, n, opt, rcv)                                          \
	do {                                                                   \
		snprintf(name, sizeof(name), "blk.%d.%s", il, suffix);         \
		rcv =                                                          \
		    model_vector_get(f, name, n, opt, &l->field, err, errlen); \
		if (rcv < 0)                                                   \
			return -1;                                             \
	} while (0)

	V(attn_norm, "attn_norm.weight", c->n_embd, false, rc[0]);
	T(wq, "attn_q.weight", c->n_embd, nq);
	T(wk, "attn_k.weight", c->n_embd, nk);
	T(wv, "attn_v.weight", c->n_embd, nv);
	V(bq, "attn_q.bias", nq, !bias_required, rc[0]);
	V(bk, "attn_k.bias", nk, !bias_required, rc[1]);
	V(bv, "attn_v.bias", nv, !bias_required, rc[2]);
	if (rc[0] != rc[1] || rc[1] != rc[2]) {
		snprintf(err, errlen,
		         "layer %d: attn_q/k/v.bias must be all present or all "
		         "absent",
		         il);
		return -1;
	}
	if ((rc[0] == 0) != c->has_qkv_bias) {
		snprintf(err, errlen,
		         "layer %d: attn_q.bias is %s but it is %s in layer 0",
		         il, rc[0] == 0 ? "present" : "absent",
		         c->has_qkv_bias ? "present" : "absent");
		return -1;
	}
	T(wo, "attn_output.weight", no, c->n_embd);
	V(ffn_norm, "ffn_norm.weight", c->n_embd, false, rc[0]);
	T(w_gate, "ffn_gate.weight", c->n_embd, c->n_ff);
	T(w_up, "ffn_up.weight", c->n_embd, c->n_ff);
	T(w_down, "ffn_down.weight", c->n_ff, c->n_embd);
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
	rc = model_vector_get(f, "rope_freqs.weight", c->n_rot / 2, true,
	                      &m->w.rope_freqs, err, errlen);
	if (rc < 0)
		return -1;
	c->has_rope_freqs = rc == 0;
	for (int i = 0; c->has_rope_freqs && i < c->n_rot / 2; i++) {
		if (!(m->w.rope_freqs[i] > 0.0f)) {
			snprintf(err, errlen,
			         "tensor rope_freqs.weight: element %d = %g is "
			         "not > 0",
			         i, (double)m->w.rope_freqs[i]);
			return -1;
		}
	}
	return 0;
}

/* Describe the model in F; see model.h for the contract. */
int model_load(const struct gguf_file *f, struct model **out, char *err,
               size_t errlen)
{
	const struct model_arch_desc *ad = NULL;
	struct gguf_str s;
	struct model *m;
	char e[256];

	*out = NULL;
	if (gguf_get_str(f, "general.architecture", &s, e, sizeof(e)) !=
	    GGUF_OK) {
		snprintf(err, errlen, "%s: %s", f->path ? f->path : "model", e);
		return -1;
	}
	for (size_t i = 0; i < sizeof(model_archs) / sizeof(model_archs[0]);
	     i++)
		if (gguf_str_eq(s, model_archs[i].name))
			ad = &model_archs[i];
	if (ad == NULL) {
		snprintf(err, errlen,
		         "%s: unsupported architecture \"%.*s\" (supported: "
		         "%s)",
		         f->path ? f->path : "model",
		         (int)(s.len > 64 ? 64 : s.len), s.ptr,
		         model_supported_archs());
		return -1;
	}
	m = calloc(1, sizeof(*m));
	if (m == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	m->file = f;
	m->cfg.arch = ad->arch;
	m->cfg.arch_name = ad->name;
	m->cfg.rope_style = ad->rope;
	if (model_read_config(f, ad->name, &m->cfg, err, errlen) ||
	    model_load_globals(f, m, err, errlen))
		goto fail;
	m->w.layers = calloc((size_t)m->cfg.n_layer, sizeof(*m->w.layers));
	if (m->w.layers == NULL) {
		snprintf(err, errlen, "out of memory for %d layers",
		         m->cfg.n_layer);
		goto fail;
	}
	m->cfg.has_qkv_bias = gguf_find_tensor(f, "blk.0.attn_q.bias") != NULL;
	if (ad->bias_required && !m->cfg.has_qkv_bias) {
		snprintf(err, errlen,
		         "missing tensor blk.0.attn_q.bias (required by %s)",
		         ad->name);
		goto fail;
	}
	for (int il = 0; il < m->cfg.n_layer; il++)
		if (model_load_layer(f, m, il, ad->bias_required, err, errlen))
			goto fail;
	*out = m;
	return 0;
fail:
	model_free(m);
	return -1;
}

/* Free the model and its owned copies. */
void model_layer_matrices(const struct model_layer *l,
                          const struct model_tensor *ts[MODEL_LAYER_MATRICES])
{
	ts[0] = &l->wq;
	ts[1] = &l->wk;
	ts[2] = &l->wv;
	ts[3] = &l->wo;
	ts[4] = &l->w_gate;
	ts[5] = &l->w_up;
	ts[6] = &l->w_down;
}

void model_free(struct model *m)
{
	if (m == NULL)
		return;
	for (int il = 0; m->w.layers != NULL && il < m->cfg.n_layer; il++) {
		struct model_layer *l = &m->w.layers[il];

		free(l->attn_norm);
		free(l->ffn_norm);
		free(l->bq);
		free(l->bk);
		free(l->bv);
	}
	free(m->w.layers);
	free(m->w.output_norm);
	free(m->w.rope_freqs);
	free(m);
}

/* Bytes of one matrix. */
static uint64_t model_tensor_bytes(const struct model_tensor *t)
{
	return (uint64_t)t->row_size * (uint64_t)t->ne1;
}

/* Bytes of the weights read per token (LM head included, embeddings not). */
uint64_t model_weight_bytes(const struct model *m)
{
	uint64_t n = model_tensor_bytes(&m->w.output);

	for (int il = 0; il < m->cfg.n_layer; il++) {
		const struct model_layer *l = &m->w.layers[il];

		n += model_tensor_bytes(&l->wq) + model_tensor_bytes(&l->wk) +
		     model_tensor_bytes(&l->wv) + model_tensor_bytes(&l->wo) +
		     model_tensor_bytes(&l->w_gate) +
		     model_tensor_bytes(&l->w_up) +
		     model_tensor_bytes(&l->w_down);
	}
	return n;
}

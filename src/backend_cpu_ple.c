/*
 * backend_cpu_ple.c - the per-layer inputs of Gemma 4's E models on the
 * CPU (model.h's recipe): each token's inputs for every layer made once
 * per chunk, before the layers, and each layer's gated step after its
 * FFN. The scales are applied in ggml's order of operations (llama.cpp's
 * gemma4.cpp), so that fp32 rounding stays llama.cpp's.
 */
#include <math.h>
#include <stdlib.h>

#include "backend_cpu_int.h"
#include "engine_backend.h"
#include "model.h"
#include "quant.h"

void cpu_ple_inputs(struct engine *e, struct cpu_state *s,
                    const int32_t *tokens, int32_t n)
{
	const struct model *m = e->model;
	const struct model_config *c = &m->cfg;
	const struct model_tensor *te = &m->w.ple_embd;
	const int32_t P = c->ple_dim;
	const size_t np = (size_t)P * c->n_layer;
	const float inv_embd = 1.0f / sqrtf((float)c->n_embd);
	const float embd_scale = sqrtf((float)P), inv2 = 1.0f / sqrtf(2.0f);

	/* the projection of the scaled embeddings, normed per layer */
	cpu_matmul(s, &m->w.ple_proj, s->x, n, s->ple);
	for (int32_t t = 0; t < n; t++) {
		float *p = s->ple + (size_t)t * np;

		for (size_t i = 0; i < np; i++)
			p[i] *= inv_embd;
		for (int32_t il = 0; il < c->n_layer; il++)
			cpu_rmsnorm(p + (size_t)il * P, p + (size_t)il * P,
			            m->w.ple_proj_norm, P, c->rms_eps);
		/* plus the token's own row, scaled */
		quant_dequant_row(te->type,
		                  (const unsigned char *)te->data +
		                      (size_t)tokens[t] * te->row_size,
		                  s->pe, (int64_t)np);
		for (size_t i = 0; i < np; i++)
			p[i] = (p[i] + s->pe[i] * embd_scale) * inv2;
	}
}

void cpu_ple_block(struct engine *e, struct cpu_state *s, int il, int32_t n)
{
	const struct model_config *c = &e->model->cfg;
	const struct model_ple *pl = &e->model->w.layers[il].ple;
	const int32_t P = c->ple_dim;
	const size_t np = (size_t)P * c->n_layer;

	/* g = gelu(Wgate x) * the layer's input */
	cpu_matmul(s, &pl->gate, s->x, n, s->pg);
	for (int32_t t = 0; t < n; t++)
		cpu_gate_act(MODEL_ACT_GELU_TANH, s->pg + (size_t)t * P,
		             s->ple + (size_t)t * np + (size_t)il * P, P);
	cpu_matmul(s, &pl->proj, s->pg, n, s->y);
	cpu_rmsnorm_rows(e, s->y, s->y, pl->post_norm, n);
	for (size_t i = 0; i < (size_t)n * c->n_embd; i++)
		s->x[i] += s->y[i];
}

int cpu_ple_alloc(const struct engine *e, struct cpu_state *s)
{
	const struct model_config *c = &e->model->cfg;
	const size_t np = (size_t)c->ple_dim * c->n_layer;

	s->ple = cpu_floats((size_t)s->n_batch, np);
	s->pe = cpu_floats(np, 1);
	s->pg = cpu_floats((size_t)s->n_batch, (size_t)c->ple_dim);
	return s->ple && s->pe && s->pg ? 0 : -1;
}

void cpu_ple_free(struct cpu_state *s)
{
	free(s->ple);
	free(s->pe);
	free(s->pg);
}

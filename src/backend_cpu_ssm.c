/*
 * backend_cpu_ssm.c - the CPU reference of a recurrent layer (model.h's
 * Gated DeltaNet, Qwen3.5) and the slots of its state (engine_backend.h).
 *
 * NOTES ON THE DESIGN
 *
 * Written as the recipe reads, token after token: the state of a value
 * head is a matrix S [S][S] (row i a value dim, contiguous over the key
 * dims j) updated by every token, so a chunk cannot be split across
 * tokens; it is split across value heads instead (one thread a head,
 * the same operations in the same order whatever the thread count, so
 * results do not depend on it). Every dot product of a row of S sums in
 * double; the state itself is fp32, as llama.cpp's and the GPU's.
 *
 * The conv's window is the conv state (the last d_conv - 1 inputs, rows
 * oldest first) followed by the chunk's projections, one buffer, so that
 * a token's taps read d_conv consecutive rows whether they come from the
 * state or the chunk; after the chunk its last d_conv - 1 rows are the
 * new state. A chunk of one token (decode) and one of many give the same
 * values.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu_int.h"
#include "threadpool.h"

/* The delta rule over a chunk, value heads split across threads. */
struct cpu_gdn_job {
	const struct model_ssm *m; /* the layer */
	struct cpu_state *s;       /* ssm_c, ssm_g, ssm_b in; ssm_o out */
	float *state;              /* [n_v_heads][S][S] slot 0's */
	int32_t n;                 /* tokens */
	float eps;                 /* of the L2 norms */
};

/* X [n] / max(|X|, EPS) into Y (ggml's l2_norm: the sum in double). */
static void cpu_l2norm(float *y, const float *x, int n, float eps)
{
	double ss = 0;
	float sc;

	for (int i = 0; i < n; i++)
		ss += (double)x[i] * x[i];
	sc = 1.0f / fmaxf(sqrtf((float)ss), eps);
	for (int i = 0; i < n; i++)
		y[i] = x[i] * sc;
}

/* The heads this thread takes, token after token (the recipe). */
static void cpu_gdn_fn(void *arg, int ith, int nth)
{
	const struct cpu_gdn_job *j = arg;
	const struct model_ssm *m = j->m;
	const int32_t S = m->head_dim, H = m->n_v_heads, HK = m->n_k_heads;
	const int32_t C = m->conv_dim;
	const float oscale = 1.0f / sqrtf((float)S);
	float *qn = j->s->ssm_scr + (size_t)ith * 2 * S, *kn = qn + S;

	for (int32_t h = ith; h < H; h += nth) {
		float *st = j->state + (size_t)h * S * S;
		const int32_t kh = h % HK; /* llama.cpp's pairing */

		for (int32_t t = 0; t < j->n; t++) {
			const float *row = j->s->ssm_c + (size_t)t * C;
			const float *v = row + (size_t)(2 * HK + h) * S;
			const float eg = expf(j->s->ssm_g[(size_t)t * H + h]);
			const float beta = j->s->ssm_b[(size_t)t * H + h];
			float *o =
			    j->s->ssm_o + (size_t)t * H * S + (size_t)h * S;

			cpu_l2norm(qn, row + (size_t)kh * S, S, j->eps);
			cpu_l2norm(kn, row + (size_t)(HK + kh) * S, S, j->eps);
			/* row i of S: decayed, corrected toward v[i] along
			   k, then read along q (its rows are independent) */
			for (int32_t i = 0; i < S; i++) {
				float *r = st + (size_t)i * S;
				double sk = 0, sq = 0;
				float d;

				for (int32_t c = 0; c < S; c++) {
					r[c] *= eg;
					sk += (double)r[c] * kn[c];
				}
				d = (v[i] - (float)sk) * beta;
				for (int32_t c = 0; c < S; c++) {
					r[c] += d * kn[c];
					sq += (double)r[c] * qn[c];
				}
				o[i] = (float)sq * oscale;
			}
		}
	}
}

/* The causal conv of the window (see above) with SiLU, into ssm_c; the
 * conv state STATE becomes the window's last d_conv - 1 rows. */
static void cpu_ssm_conv(const struct model_ssm *m, struct cpu_state *s,
                         float *state, int32_t n)
{
	const int32_t K = m->d_conv, C = m->conv_dim;

	for (int32_t t = 0; t < n; t++)
		for (int32_t c = 0; c < C; c++) {
			const float *w = m->conv + (size_t)c * K;
			float u = 0.0f; /* in float, as ggml's ssm_conv */

			for (int32_t k = 0; k < K; k++)
				u += s->ssm_win[(size_t)(t + k) * C + c] * w[k];
			s->ssm_c[(size_t)t * C + c] = u / (1.0f + expf(-u));
		}
	memcpy(state, s->ssm_win + (size_t)n * C,
	       (size_t)(K - 1) * C * sizeof(float));
}

void cpu_ssm_block(struct engine *e, struct cpu_state *s, int il, int32_t n)
{
	const struct model_config *c = &e->model->cfg;
	const struct model_layer *l = &e->model->w.layers[il];
	const struct model_ssm *m = &l->ssm;
	const int32_t K = m->d_conv, C = m->conv_dim, H = m->n_v_heads;
	const int32_t S = m->head_dim;
	float *conv = s->rs[0] + s->rs_off[il];
	float *state = conv + (size_t)(K - 1) * C;

	cpu_rmsnorm_rows(e, s->xb, s->x, l->attn.norm, n);
	memcpy(s->ssm_win, conv, (size_t)(K - 1) * C * sizeof(float));
	{
		const struct model_tensor *w[3] = {&m->wqkv, &m->wz, &m->wbeta};
		float *y[3] = {s->ssm_win + (size_t)(K - 1) * C, s->ssm_z,
		               s->ssm_b};
		const int64_t ys[3] = {C, (int64_t)H * S, H};

		cpu_matmul_n(s, w, 3, s->xb, n, y, ys, false, MODEL_ACT_SILU);
	}
	cpu_matmul(s, &m->walpha, s->xb, n, s->ssm_g);
	for (int32_t t = 0; t < n; t++)
		for (int32_t h = 0; h < H; h++) {
			float *g = s->ssm_g + (size_t)t * H + h;
			float *b = s->ssm_b + (size_t)t * H + h;
			float a = *g + m->dt_bias[h];

			/* softplus as ggml's (linear past 20) */
			*g = (a > 20.0f ? a : logf(1.0f + expf(a))) * m->a[h];
			*b = 1.0f / (1.0f + expf(-*b));
		}
	cpu_ssm_conv(m, s, conv, n);
	{
		struct cpu_gdn_job j = {m, s, state, n, c->rms_eps};

		threadpool_run(s->tp, cpu_gdn_fn, &j);
	}
	/* each head normed, times silu of its gate */
	for (int32_t t = 0; t < n; t++)
		for (int32_t h = 0; h < H; h++) {
			float *o = s->ssm_o + ((size_t)t * H + h) * S;
			const float *z = s->ssm_z + ((size_t)t * H + h) * S;

			cpu_rmsnorm(o, o, m->norm, S, c->rms_eps);
			for (int32_t i = 0; i < S; i++)
				o[i] *= z[i] / (1.0f + expf(-z[i]));
		}
	cpu_matmul(s, &m->wout, s->ssm_o, n, s->y);
	for (size_t i = 0; i < (size_t)n * c->n_embd; i++)
		s->x[i] += s->y[i];
}

int cpu_ssm_alloc(struct engine *e, struct cpu_state *s)
{
	const struct model *md = e->model;
	const struct model_config *c = &md->cfg;
	const size_t nb = (size_t)s->n_batch;
	int32_t max_s = 0;

	s->rs_off = calloc((size_t)c->n_layer, sizeof(*s->rs_off));
	if (s->rs_off == NULL)
		return -1;
	for (int il = 0; il < c->n_layer; il++) {
		struct model_cache_desc d = model_layer_cache(md, il);
		const struct model_ssm *m = &md->w.layers[il].ssm;

		if (d.kind != MODEL_CACHE_RECURRENT)
			continue;
		s->rs_off[il] = s->rs_floats;
		s->rs_floats += (size_t)(d.conv_floats + d.state_floats);
		if (m->d_conv > s->ssm_max_conv)
			s->ssm_max_conv = m->d_conv;
		if (m->head_dim > max_s)
			max_s = m->head_dim;
	}
	s->ssm_win = cpu_floats(nb + (size_t)s->ssm_max_conv - 1,
	                        (size_t)c->max_conv_dim);
	s->ssm_c = cpu_floats(nb, (size_t)c->max_conv_dim);
	s->ssm_z = cpu_floats(nb, (size_t)c->max_ssm_v);
	s->ssm_o = cpu_floats(nb, (size_t)c->max_ssm_v);
	s->ssm_b = cpu_floats(nb, (size_t)c->max_ssm_heads);
	s->ssm_g = cpu_floats(nb, (size_t)c->max_ssm_heads);
	s->ssm_scr = cpu_floats((size_t)e->n_threads * 2, (size_t)max_s);
	s->rs[0] = cpu_floats(s->rs_floats, 1);
	return s->ssm_win && s->ssm_c && s->ssm_z && s->ssm_o && s->ssm_b &&
	               s->ssm_g && s->ssm_scr && s->rs[0]
	           ? 0
	           : -1;
}

void cpu_ssm_free(struct cpu_state *s)
{
	free(s->ssm_win);
	free(s->ssm_c);
	free(s->ssm_z);
	free(s->ssm_o);
	free(s->ssm_b);
	free(s->ssm_g);
	free(s->ssm_scr);
	free(s->rs_off);
	for (int i = 0; i <= ENGINE_RS_SNAPSHOTS; i++)
		free(s->rs[i]);
}

/* Slot I's floats, allocated on first use (zeros); NULL: no memory. */
static float *cpu_rs_slot(struct cpu_state *s, int i)
{
	if (s->rs[i] == NULL)
		s->rs[i] = cpu_floats(s->rs_floats, 1);
	return s->rs[i];
}

int cpu_rs_copy(struct engine *e, int dst, int src, char *err, size_t errlen)
{
	struct cpu_state *s = e->impl;
	float *d = cpu_rs_slot(s, dst);
	const float *from = src == ENGINE_RS_ZERO ? NULL : cpu_rs_slot(s, src);

	if (d == NULL || (src != ENGINE_RS_ZERO && from == NULL)) {
		snprintf(err, errlen,
		         "out of memory for a recurrent state slot (%.1f MiB)",
		         (double)s->rs_floats * sizeof(float) / 1048576.0);
		return -1;
	}
	if (from == NULL)
		memset(d, 0, s->rs_floats * sizeof(float));
	else
		memcpy(d, from, s->rs_floats * sizeof(float));
	return 0;
}

int cpu_rs_io(struct engine *e, int slot, void *buf, bool load, char *err,
              size_t errlen)
{
	struct cpu_state *s = e->impl;
	float *d = cpu_rs_slot(s, slot);

	if (d == NULL) {
		snprintf(err, errlen,
		         "out of memory for a recurrent state slot (%.1f MiB)",
		         (double)s->rs_floats * sizeof(float) / 1048576.0);
		return -1;
	}
	/* the slot's layout is engine_backend.h's: layer by layer, conv
	   then state */
	if (load)
		memcpy(d, buf, s->rs_floats * sizeof(float));
	else
		memcpy(buf, d, s->rs_floats * sizeof(float));
	return 0;
}

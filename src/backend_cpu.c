/*
 * backend_cpu.c - the CPU reference backend of the engine interface.
 *
 * NOTES ON THE DESIGN
 *
 * Plain and obviously right first: fp32 activations and residual stream,
 * fp32 KV cache, every dot product accumulated in fp32 (or wider) by
 * quant.h, RMSNorm sums and softmax normalisers in double. The forward pass
 * is the one written out in model.h. Speed comes from three things only:
 * rows of every matrix are split across the thread pool; in prefill a
 * chunk of up to n_batch tokens is pushed through each matrix together so
 * each weight row is read once per chunk, not once per token; and a decode
 * step pays for few fork-joins (Q, K and V are one job, gate, up and the
 * SwiGLU product one job: five a layer), each costing well under a
 * microsecond while the workers spin (threadpool.c).
 *
 * Thread count invariance: every output value (a row of a product, one
 * (token, head) of attention) is computed by exactly one thread, with the
 * same operations in the same order whatever the number of threads, and
 * activations are prepared once per input, before the job. So the logits
 * are bit-identical for any n_threads (t_engine checks 1, 2 and 3).
 *
 * Two arithmetics for products with quantized weights:
 *   - default: quant.h's dots, which round the activation vector to int8
 *     blocks (as llama.cpp does). This rounding is discontinuous: on real
 *     models a 1e-7 relative change of the input moves some logits by 0.1
 *     (measured on SmolLM2-135M), so two correct implementations with
 *     different float rounding differ at that level;
 *   - exact_dots: each weight row is dequantized and dotted with the fp32
 *     activations. Continuous, so it can be compared with a float forward
 *     pass (Hugging Face's definition on the dequantized weights) to fp32
 *     precision. Slower (dequantization per row per chunk);
 *   - exact_dot_types: the default, but exact dots for the weight types
 *     it names (cpu_exact): the mix of a GPU that rounds activations to
 *     int8 for some types only, for the GPU parity tests.
 *
 * One recipe: cpu_layer runs every layer's attention and FFN as its
 * descriptors say (model.h), the optional steps skipped where their
 * tensor is NULL; backend_cpu_ops.features lists the features it runs.
 *
 * KV cache layout (fp32), per layer (model_layer_cache: a full layer's
 * n_ctx positions of k_dim and v_dim floats):
 *   k_cache[il][pos * k_dim + kvh * head_dim_k + d]
 *   v_cache[il][pos * v_dim + kvh * head_dim_v + d]
 * so the positions 0..n-1 of one layer are one contiguous run of n * k_dim
 * floats (state save copies those runs). A sliding-window layer (s->win)
 * keeps the positions [e->win_lo, n_past) only, position p in row p -
 * e->win_lo of e->win_cap rows (the window, a chunk and twice the slack
 * of engine.h's invariant 3): before a chunk that would not fit, its rows
 * from the slack before the chunk's window on move down to row 0
 * (cpu_window_move), so
 * the rows a query reads are still one run and every dot is the one a
 * cache of every position computes. With engine_params.kv_type f16
 * or q8_0 a position's row is those k_dim (v_dim) values in that type
 * (q8_0: each head's hd / 32 blocks of quant_q8_0_row, 34 bytes), and
 * the attention dequantizes each row it reads (exact) and computes as
 * with the f32 cache: the only difference is the stored values'
 * rounding. The state's floats are the rows dequantized; loading
 * quantizes them again (the same blocks: engine.h). K is stored after RoPE, V
 * as computed (plus bias, after its norm). A layer of shared KV
 * (model_layer_cache SHARED) has no cache: its queries read layer
 * attn.kv_layer's, which that earlier layer wrote in the same chunk.
 *
 * Grouped-query attention: query head h reads KV head h / (n_head /
 * n_head_kv). Token i of a chunk sits at pos = n_past + i and attends to
 * cache positions 0..pos; the chunk's K/V are written to the cache before
 * any of its queries are evaluated, so prefill and decode see the same
 * keys.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu_int.h"
#include "engine_backend.h"
#include "f16.h"
#include "model.h"
#include "quant.h"
#include "threadpool.h"
#include "trace.h"

/* ---------------------------------------------------------------- jobs */

/*
 * Thread shares of a product's output rows are multiples of 16 rows: one
 * cache line of float32 outputs per token, so two threads never write the
 * same line (no false sharing at the boundaries).
 */
#define CPU_ROW_ALIGN 16

/* Rows of one block in prefill: dotted with each token's vector in turn
 * while they stay in the L1 cache. */
#define CPU_ROW_TILE 16

/* True when rows of TYPE are dotted exactly (exact_dots, or a type of
 * exact_dot_types), false when through int8 activations. */
static bool cpu_exact(const struct cpu_state *s, uint32_t type)
{
	return s->exact || (type < 64 && (s->exact_types >> type & 1));
}

/* One matrix of a product job: Y[t][r] = W row r . (prepared vector t). */
struct cpu_seg {
	const struct model_tensor *w; /* weight [ne1 rows, ne0] */
	const unsigned char *vecs;    /* n_tok prepared vectors for w->type */
	float *y;                     /* [n_tok][y_stride] */
	int64_t y_stride;             /* floats between output rows */
};

/*
 * A product job: up to three matrices that read the same activations (Q, K,
 * V; gate and up), done in one fork-join so a decode step pays for few
 * hand-overs. The rows of the matrices, one after the other, are split
 * across the threads. With gated, seg[0] is the gate and seg[1] the up
 * projection (same rows): each thread takes the same rows of both and then
 * writes act(gate) * up over its gate rows, so no second job is needed.
 * Every output is computed by one thread with the same operations whatever
 * the number of threads, so results do not depend on it.
 */
struct cpu_matmul_job {
	const struct cpu_state *s;       /* for the exact mode's buffers */
	struct cpu_seg seg[CPU_MAX_SEG]; /* the matrices */
	int n_seg;                       /* how many */
	bool gated;                      /* seg[0] = act(seg[0]) * seg[1] */
	enum model_act act;              /* of the gate */
	int32_t n_tok;                   /* tokens */
	size_t vec_stride;               /* bytes between prepared vectors */
};

/* G[i] = act(G[i]) * U[i] for N entries (model.h's FFN activations; the
 * ones engine_ops.features lacks never get here). */
void cpu_gate_act(enum model_act act, float *g, const float *u, long n)
{
	switch (act) {
	case MODEL_ACT_SILU:
		for (long r = 0; r < n; r++)
			g[r] = g[r] / (1.0f + expf(-g[r])) * u[r];
		break;
	case MODEL_ACT_GELU_TANH:
		/* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in ggml's
		   order of operations (its CPU path rounds x to fp16 for a
		   table; this is the formula itself) */
		for (long r = 0; r < n; r++) {
			const float x = g[r];

			g[r] =
			    0.5f * x *
			    (1.0f + tanhf(0.79788456080286535587989211986876f *
			                  x * (1.0f + 0.044715f * x * x))) *
			    u[r];
		}
		break;
	case MODEL_ACT_SWIGLU_OAI:
		/* ggml's swiglu_oai, alpha 1.702, limit 7 */
		for (long r = 0; r < n; r++) {
			const float x = g[r] < 7.0f ? g[r] : 7.0f;
			const float y = u[r] < -7.0f  ? -7.0f
			                : u[r] > 7.0f ? 7.0f
			                              : u[r];

			g[r] = x / (1.0f + expf(1.702f * -x)) * (y + 1.0f);
		}
		break;
	}
}

/* Rows [lo, hi) of segment G for every token of job J on thread ITH. */
static void cpu_matmul_rows(const struct cpu_matmul_job *j,
                            const struct cpu_seg *g, long lo, long hi, int ith)
{
	const struct model_tensor *w = g->w;
	const unsigned char *base = w->data;

	if (cpu_exact(j->s, w->type)) {
		float *wr = j->s->wrow + (size_t)ith * j->s->wrow_stride;
		const float *x = j->s->xsrc;

		for (long r = lo; r < hi; r++) {
			quant_dequant_row(w->type,
			                  base + (size_t)r * w->row_size, wr,
			                  w->ne0);
			/* an F32 vector is the floats themselves (quant.h) */
			for (int32_t t = 0; t < j->n_tok; t++)
				g->y[t * g->y_stride + r] =
				    quant_dot(QTYPE_F32, wr,
				              x + (size_t)t * w->ne0, w->ne0);
		}
		return;
	}
	for (long r0 = lo, nr; r0 < hi; r0 += nr) {
		/* decode: one pass over the rows; prefill: a tile at a time */
		nr = hi - r0;
		if (j->n_tok > 1 && nr > CPU_ROW_TILE)
			nr = CPU_ROW_TILE;
		for (int32_t t = 0; t < j->n_tok; t++)
			quant_dot_rows(w->type, base + (size_t)r0 * w->row_size,
			               w->row_size, nr,
			               g->vecs + (size_t)t * j->vec_stride,
			               w->ne0, g->y + t * g->y_stride + r0, 1);
	}
}

/*
 * This is where the time goes: every weight row is dotted with every
 * prepared token vector. Thread ith takes a contiguous share of the rows.
 */
static void cpu_matmul_fn(void *arg, int ith, int nth)
{
	const struct cpu_matmul_job *j = arg;
	long total = 0, lo, hi, at = 0;

	if (j->gated) {
		const struct cpu_seg *g = &j->seg[0], *u = &j->seg[1];

		threadpool_split_aligned((long)g->w->ne1, CPU_ROW_ALIGN, ith,
		                         nth, &lo, &hi);
		cpu_matmul_rows(j, g, lo, hi, ith);
		cpu_matmul_rows(j, u, lo, hi, ith);
		for (int32_t t = 0; t < j->n_tok; t++)
			cpu_gate_act(j->act, g->y + t * g->y_stride + lo,
			             u->y + t * u->y_stride + lo, hi - lo);
		return;
	}
	for (int k = 0; k < j->n_seg; k++)
		total += (long)j->seg[k].w->ne1;
	threadpool_split_aligned(total, CPU_ROW_ALIGN, ith, nth, &lo, &hi);
	for (int k = 0; k < j->n_seg; k++) {
		long n = (long)j->seg[k].w->ne1;
		long a = lo > at ? lo - at : 0, b = hi - at < n ? hi - at : n;

		if (a < b)
			cpu_matmul_rows(j, &j->seg[k], a, b, ith);
		at += n;
	}
}

/* A preparation job: quantize/convert n_tok activation rows for TYPE. */
struct cpu_prepare_job {
	uint32_t type;       /* weight type the vectors are for */
	const float *x;      /* [n_tok][n] */
	int64_t n;           /* elements per row */
	int32_t n_tok;       /* rows */
	unsigned char *vecs; /* [n_tok][vec_stride] */
	size_t vec_stride;
};

/* Prepare the activation vectors, tokens split across threads. */
static void cpu_prepare_fn(void *arg, int ith, int nth)
{
	const struct cpu_prepare_job *j = arg;
	long lo, hi;

	threadpool_split(j->n_tok, ith, nth, &lo, &hi);
	for (long t = lo; t < hi; t++)
		quant_vec_prepare(j->type, j->x + t * j->n, j->n,
		                  j->vecs + (size_t)t * j->vec_stride);
}

/* Prepare X[n_tok][n] for weights of TYPE into VECS (once per input, not
 * per thread: one thread in decode, tokens split in prefill). */
static void cpu_prepare(struct cpu_state *s, uint32_t type, const float *x,
                        int64_t n, int32_t n_tok, unsigned char *vecs)
{
	struct cpu_prepare_job j = {type, x, n, n_tok, vecs, s->vec_stride};

	s->xsrc = x;
	if (cpu_exact(s, type))
		return;
	if (n_tok == 1)
		cpu_prepare_fn(&j, 0, 1);
	else
		threadpool_run(s->tp, cpu_prepare_fn, &j);
}

/*
 * Y_k = W_k X for the N matrices W[k] (N <= 3, same ne0) and X
 * [n_tok][ne0], in one job; outputs Y[k] with row strides YS[k]. The
 * activations are prepared once per distinct weight type. GATED (ACT):
 * see struct cpu_matmul_job.
 */
void cpu_matmul_n(struct cpu_state *s, const struct model_tensor **w, int n,
                  const float *x, int32_t n_tok, float **y, const int64_t *ys,
                  bool gated, enum model_act act)
{
	struct cpu_matmul_job j = {.s = s,
	                           .n_seg = n,
	                           .gated = gated,
	                           .act = act,
	                           .n_tok = n_tok,
	                           .vec_stride = s->vec_stride};

	for (int k = 0; k < n; k++) {
		const unsigned char *v = NULL;

		for (int p = 0; p < k && v == NULL; p++)
			if (w[p]->type == w[k]->type)
				v = j.seg[p].vecs;
		if (v == NULL) {
			unsigned char *slot =
			    s->vecs + (size_t)k * s->n_batch * s->vec_stride;

			cpu_prepare(s, w[k]->type, x, w[k]->ne0, n_tok, slot);
			v = slot;
		}
		j.seg[k] = (struct cpu_seg){w[k], v, y[k], ys[k]};
	}
	threadpool_run(s->tp, cpu_matmul_fn, &j);
}

/* Y = W X for X [n_tok][w->ne0], Y [n_tok][w->ne1]. */
void cpu_matmul(struct cpu_state *s, const struct model_tensor *w,
                const float *x, int32_t n_tok, float *y)
{
	const int64_t ys = w->ne1;

	cpu_matmul_n(s, &w, 1, x, n_tok, &y, &ys, false, MODEL_ACT_SILU);
}

/* -------------------------------------------------------- elementwise */

/* out = x / sqrt(mean(x^2) + eps) * w, one row of N (w NULL: none). */
void cpu_rmsnorm(float *out, const float *x, const float *w, int n, float eps)
{
	double ss = 0;

	for (int i = 0; i < n; i++)
		ss += (double)x[i] * x[i];
	float scale = (float)(1.0 / sqrt(ss / n + (double)eps));
	if (w == NULL) {
		for (int i = 0; i < n; i++)
			out[i] = x[i] * scale;
		return;
	}
	for (int i = 0; i < n; i++)
		out[i] = x[i] * scale * w[i];
}

/* cos/sin of every pair's angle of class R at position POS into
 * CS[n_rot]. */
static void cpu_rope_table(const struct model_rope *r, int32_t pos, float *cs)
{
	for (int i = 0; i < r->n_rot / 2; i++) {
		double theta = (double)pos * r->inv_freq[i];

		/* (YaRN's magnitude: rotated vectors grow by mscale) */
		cs[2 * i] = (float)cos(theta) * r->mscale;
		cs[2 * i + 1] = (float)sin(theta) * r->mscale;
	}
}

/* Rotate the first n_rot dims of one head vector X (STYLE: pairs/halves). */
static void cpu_rope(float *x, const float *cs, int n_rot,
                     enum model_rope_style style)
{
	int half = n_rot / 2;

	for (int i = 0; i < half; i++) {
		float c = cs[2 * i], sn = cs[2 * i + 1];
		int a = style == MODEL_ROPE_NORM ? 2 * i : i;
		int b = style == MODEL_ROPE_NORM ? 2 * i + 1 : i + half;
		float x0 = x[a], x1 = x[b];

		x[a] = x0 * c - x1 * sn;
		x[b] = x0 * sn + x1 * c;
	}
}

/* ----------------------------------------------------------- attention */

/* The quant.h type of an f16 or q8_0 cache's rows. */
static uint32_t cpu_kv_qtype(enum engine_kv_type t)
{
	return t == ENGINE_KV_F16 ? QTYPE_F16 : QTYPE_Q8_0;
}

/* ATT[i] = Q . key of position LO + i, head KVH of layer KL's f16 or q8_0
 * cache, for I < N: each key dequantized into KR (exact) and dotted as
 * the f32 cache's keys are (quant_dot's F32 kernel). */
static void cpu_attn_scores_q(const struct cpu_state *s, int kl, int kvh,
                              int hd, int32_t lo, int32_t n, const float *q,
                              float *kr, float *att)
{
	const uint32_t t = cpu_kv_qtype(s->kv_type);
	const unsigned char *k = s->kb[kl] + (size_t)lo * s->k_row[kl] +
	                         engine_kv_type_bytes(s->kv_type, hd) * kvh;

	for (int32_t i = 0; i < n; i++, k += s->k_row[kl]) {
		quant_dequant_row(t, k, kr, hd);
		att[i] = quant_dot(QTYPE_F32, kr, q, hd);
	}
}

/* OUT[hdv] = sum over i < N of A[i] times the value of position LO + i,
 * head KVH of layer KL's f16 or q8_0 cache: CPU_KV_GROUP rows at a time
 * dequantized into VR, their weighted sum (quant_f32_mix, into TMP)
 * added to OUT group after group. */
static void cpu_attn_mix_q(const struct cpu_state *s, int kl, int kvh, int hdv,
                           int32_t lo, int32_t n, const float *a, float *vr,
                           float *tmp, float *out)
{
	const uint32_t t = cpu_kv_qtype(s->kv_type);
	const unsigned char *v = s->vb[kl] + (size_t)lo * s->v_row[kl] +
	                         engine_kv_type_bytes(s->kv_type, hdv) * kvh;

	memset(out, 0, (size_t)hdv * sizeof(float));
	for (int32_t i0 = 0; i0 < n; i0 += CPU_KV_GROUP) {
		const int32_t g = n - i0 < CPU_KV_GROUP ? n - i0 : CPU_KV_GROUP;

		for (int32_t j = 0; j < g; j++, v += s->v_row[kl])
			quant_dequant_row(t, v, vr + (size_t)j * hdv, hdv);
		quant_f32_mix(tmp, a + i0, vr, (size_t)hdv, g, hdv);
		for (int d = 0; d < hdv; d++)
			out[d] += tmp[d];
	}
}

/* The row of layer KL's cache that holds position POS. */
static size_t cpu_kv_row(const struct engine *e, const struct cpu_state *s,
                         int kl, int32_t pos)
{
	return (size_t)(pos - (s->win[kl] ? e->win_lo : 0));
}

/* Store one position's K [k_dim] and V [v_dim] into layer IL's cache at
 * AT, in the cache's type (q8_0: quant_q8_0_row, blocks along each head
 * since every head dim is a multiple of 32). */
static void cpu_kv_put(struct cpu_state *s, int il, size_t at, const float *k,
                       const float *v, int32_t kdim, int32_t vdim)
{
	unsigned char *kd = s->kb[il] + at * s->k_row[il];
	unsigned char *vd = s->vb[il] + at * s->v_row[il];

	switch (s->kv_type) {
	case ENGINE_KV_F16:
		for (int32_t i = 0; i < kdim; i++)
			((uint16_t *)kd)[i] = f32_to_f16(k[i]);
		for (int32_t i = 0; i < vdim; i++)
			((uint16_t *)vd)[i] = f32_to_f16(v[i]);
		break;
	case ENGINE_KV_Q8_0:
		quant_q8_0_row(k, kdim, kd);
		quant_q8_0_row(v, vdim, vd);
		break;
	default:
		memcpy(kd, k, (size_t)kdim * sizeof(float));
		memcpy(vd, v, (size_t)vdim * sizeof(float));
	}
}

/* An attention job over (token, head) pairs of one chunk in layer il. */
struct cpu_attn_job {
	const struct engine *e;       /* engine (n_ctx) */
	struct cpu_state *s;          /* buffers */
	const struct model_attn *a;   /* the layer's attention */
	struct model_attn_params par; /* its scores' parameters */
	int il;                       /* layer */
	int32_t n_tok;                /* tokens in the chunk */
	int32_t pos0;                 /* position of the chunk's first token */
};

/* Causal softmax attention for the pairs this thread takes: scores times
 * the scale, over the positions the window allows, with the head's sink
 * where the layer has sinks (the softcap engine_ops.features lacks never
 * gets here). */
static void cpu_attn_fn(void *arg, int ith, int nth)
{
	const struct cpu_attn_job *j = arg;
	const struct model_attn *a = j->a;
	struct cpu_state *s = j->s;
	int hd = a->head_dim_k, hdv = a->head_dim_v;
	int32_t kdim = a->n_head_kv * hd, vdim = a->n_head_kv * hdv;
	int32_t q_dim = a->n_head * hd, o_dim = a->n_head * hdv;
	int group = a->n_head / a->n_head_kv;
	float scale = j->par.scale;
	float *att = s->att + (size_t)ith * j->e->n_ctx;
	/* f16, q8_0: a key row, CPU_KV_GROUP value rows and their sum */
	float *kr =
	    s->kv_type != ENGINE_KV_F32
	        ? s->kvrow + (size_t)ith * (CPU_KV_GROUP + 2) * s->kv_hmax
	        : NULL;
	float *vr = kr ? kr + s->kv_hmax : NULL;
	float *tmp = kr ? vr + CPU_KV_GROUP * s->kv_hmax : NULL;
	/* (a layer of shared KV reads its source's cache) */
	const float *kc = s->k_cache[a->kv_layer];
	const float *vc = s->v_cache[a->kv_layer];
	/* pairs dealt round-robin: a causal chunk's later tokens cost more,
	 * so contiguous shares would leave the first threads idle */
	for (long p = ith; p < (long)j->n_tok * a->n_head; p += nth) {
		int32_t t = (int32_t)(p / a->n_head);
		int h = (int)(p % a->n_head), kvh = h / group;
		int32_t pos = j->pos0 + t;
		const float *q = s->q + (size_t)t * q_dim + (size_t)h * hd;
		float *out = s->xb + (size_t)t * o_dim + (size_t)h * hdv;
		/* a sliding window: positions lo..pos, the last `window` */
		const int32_t lo = j->par.window > 0 && pos >= j->par.window
		                       ? pos - j->par.window + 1
		                       : 0;
		/* a sink: a logit with no value, in the softmax's max and
		   sum (as ggml's soft_max with sinks) */
		const float sink =
		    j->par.sinks != NULL ? j->par.sinks[h] : -INFINITY;
		float mx = sink;
		double sum = 0;

		/* the row of position lo (a window layer's start later) */
		const size_t r0 = cpu_kv_row(j->e, s, a->kv_layer, lo);

		/* quant.h's fp32 dot: fixed order, SIMD when present */
		if (s->kv_type != ENGINE_KV_F32)
			cpu_attn_scores_q(s, a->kv_layer, kvh, hd, (int32_t)r0,
			                  pos + 1 - lo, q, kr, att);
		else
			quant_dot_rows(QTYPE_F32,
			               kc + r0 * kdim + (size_t)kvh * hd,
			               (size_t)kdim * sizeof(float),
			               pos + 1 - lo, q, hd, att, 1);
		for (int32_t i = 0; i <= pos - lo; i++) {
			att[i] = att[i] * scale;
			if (att[i] > mx)
				mx = att[i];
		}
		for (int32_t i = 0; i <= pos - lo; i++) {
			att[i] = expf(att[i] - mx);
			sum += att[i];
		}
		if (j->par.sinks != NULL)
			sum += expf(sink - mx);
		float inv = (float)(1.0 / sum);
		for (int32_t i = 0; i <= pos - lo; i++)
			att[i] = att[i] * inv;
		/* out = sum_i att[i] * V row lo + i, in order of i */
		if (s->kv_type != ENGINE_KV_F32)
			cpu_attn_mix_q(s, a->kv_layer, kvh, hdv, (int32_t)r0,
			               pos + 1 - lo, att, vr, tmp, out);
		else
			quant_f32_mix(out, att,
			              vc + r0 * vdim + (size_t)kvh * hdv, vdim,
			              pos + 1 - lo, hdv);
	}
}

/* --------------------------------------------------------- forward pass */

/* X[n][n_embd] = rmsnorm(X) * W, row by row, into OUT. */
void cpu_rmsnorm_rows(const struct engine *e, float *out, const float *x,
                      const float *w, int32_t n)
{
	const struct model_config *c = &e->model->cfg;

	for (int32_t t = 0; t < n; t++)
		cpu_rmsnorm(out + (size_t)t * c->n_embd,
		            x + (size_t)t * c->n_embd, w, c->n_embd,
		            c->rms_eps);
}

/* A layer of shared KV's queries: q norm and RoPE (no biases: the
 * architecture that shares has none). */
static void cpu_q_finish(struct engine *e, struct cpu_state *s, int il,
                         int32_t n)
{
	const struct model_attn *a = &e->model->w.layers[il].attn;
	const struct model_rope *r = model_layer_rope(e->model, il);
	const int32_t mr = e->model->cfg.max_rot, hd = a->head_dim_k;
	const float *rope_cs = s->rope_cs + (size_t)a->rope * s->n_batch * mr;

	for (int32_t t = 0; t < n; t++) {
		float *q = s->q + (size_t)t * a->n_head * hd;

		for (int h = 0; a->q_norm != NULL && h < a->n_head; h++)
			cpu_rmsnorm(q + (size_t)h * hd, q + (size_t)h * hd,
			            a->q_norm, hd, e->model->cfg.rms_eps);
		for (int h = 0; h < a->n_head; h++)
			cpu_rope(q + (size_t)h * hd, rope_cs + (size_t)t * mr,
			         r->n_rot, r->style);
	}
}

/* Biases, RoPE and the cache: the chunk's q, k, v made ready for the
 * scores (K after RoPE, V plus bias into layer IL's cache). */
static void cpu_qkv_finish(struct engine *e, struct cpu_state *s, int il,
                           int32_t n, int32_t pos0)
{
	const struct model_attn *a = &e->model->w.layers[il].attn;
	const struct model_rope *r = model_layer_rope(e->model, il);
	const float *rope_cs =
	    s->rope_cs + (size_t)a->rope * s->n_batch * e->model->cfg.max_rot;
	int hd = a->head_dim_k;
	int32_t q_dim = a->n_head * hd, kdim = a->n_head_kv * hd;
	int32_t vdim = a->n_head_kv * a->head_dim_v;

	if (a->kv_layer != il) { /* queries only: its keys are another's */
		cpu_q_finish(e, s, il, n);
		return;
	}
	for (int32_t t = 0; t < n; t++) {
		float *q = s->q + (size_t)t * q_dim;
		float *k = s->k + (size_t)t * kdim;
		float *v = s->v + (size_t)t * vdim;
		const float *cs = rope_cs + (size_t)t * e->model->cfg.max_rot;
		size_t at = cpu_kv_row(e, s, il, pos0 + t);

		if (a->bq != NULL) {
			for (int i = 0; i < q_dim; i++)
				q[i] += a->bq[i];
			for (int i = 0; i < kdim; i++)
				k[i] += a->bk[i];
			for (int i = 0; i < vdim; i++)
				v[i] += a->bv[i];
		}
		if (a->q_norm != NULL) { /* per head, before RoPE */
			for (int h = 0; h < a->n_head; h++)
				cpu_rmsnorm(q + (size_t)h * hd,
				            q + (size_t)h * hd, a->q_norm, hd,
				            e->model->cfg.rms_eps);
			for (int h = 0; h < a->n_head_kv; h++)
				cpu_rmsnorm(k + (size_t)h * hd,
				            k + (size_t)h * hd, a->k_norm, hd,
				            e->model->cfg.rms_eps);
		}
		for (int h = 0; a->v_norm && h < a->n_head_kv; h++)
			cpu_rmsnorm(v + (size_t)h * a->head_dim_v,
			            v + (size_t)h * a->head_dim_v, NULL,
			            a->head_dim_v, e->model->cfg.rms_eps);
		for (int h = 0; h < a->n_head; h++)
			cpu_rope(q + (size_t)h * hd, cs, r->n_rot, r->style);
		for (int h = 0; h < a->n_head_kv; h++)
			cpu_rope(k + (size_t)h * hd, cs, r->n_rot, r->style);
		cpu_kv_put(s, il, at, k, v, kdim, vdim);
	}
}

/* The chunk's projections of layer IL's attention from s->xb: q, k, v;
 * q only where the layer reads another's cache; v = k (before any norm)
 * where it has no Wv. */
static void cpu_qkv(struct cpu_state *s, const struct model_attn *a, int il,
                    int32_t n)
{
	const struct model_tensor *w[3] = {&a->wq, &a->wk, &a->wv};
	/* a gated layer's query rows hold [q | gate] per head */
	float *y[3] = {a->gated ? s->qg : s->q, s->k, s->v};
	const int64_t ys[3] = {a->wq.ne1, a->wk.ne1, a->wv.ne1};
	const int nw = a->kv_layer != il ? 1 : a->wv.data == NULL ? 2 : 3;

	cpu_matmul_n(s, w, nw, s->xb, n, y, ys, false, MODEL_ACT_SILU);
	if (a->kv_layer == il && a->wv.data == NULL)
		memcpy(s->v, s->k, (size_t)n * a->wk.ne1 * sizeof(float));
}

/* Attention block of layer il for the chunk; adds into s->x. */
static void cpu_attention_block(struct engine *e, struct cpu_state *s, int il,
                                int32_t n, int32_t pos0)
{
	const struct model_config *c = &e->model->cfg;
	const struct model_attn *a = &e->model->w.layers[il].attn;

	const int32_t hd = a->head_dim_k, q_dim = a->n_head * hd;

	cpu_rmsnorm_rows(e, s->xb, s->x, a->norm, n);
	cpu_qkv(s, a, il, n);
	for (int32_t t = 0; a->gated && t < n; t++)
		for (int h = 0; h < a->n_head; h++)
			memcpy(s->q + (size_t)t * q_dim + (size_t)h * hd,
			       s->qg + (size_t)t * 2 * q_dim +
			           (size_t)h * 2 * hd,
			       (size_t)hd * sizeof(float));
	cpu_qkv_finish(e, s, il, n, pos0);

	struct cpu_attn_job aj = {e, s, a, model_attn_params(a), il, n, pos0};
	threadpool_run(s->tp, cpu_attn_fn, &aj);
	/* the output gate: o *= sigmoid(gate), per head (hd == hd_v) */
	for (int32_t t = 0; a->gated && t < n; t++)
		for (int h = 0; h < a->n_head; h++) {
			float *o = s->xb + (size_t)t * q_dim + (size_t)h * hd;
			const float *g = s->qg + (size_t)t * 2 * q_dim +
			                 (size_t)h * 2 * hd + hd;

			for (int i = 0; i < hd; i++)
				o[i] *= 1.0f / (1.0f + expf(-g[i]));
		}

	cpu_matmul(s, &a->wo, s->xb, n, s->y);
	for (int32_t t = 0; a->bo != NULL && t < n; t++)
		for (int32_t i = 0; i < c->n_embd; i++)
			s->y[(size_t)t * c->n_embd + i] += a->bo[i];
	if (a->post_norm != NULL)
		cpu_rmsnorm_rows(e, s->y, s->y, a->post_norm, n);
	for (size_t i = 0; i < (size_t)n * c->n_embd; i++)
		s->x[i] += s->y[i];
}

/* The gated MLP of gate, up and down on X [n][n_embd] into Y [n][n_embd]
 * (hb, hb2 hold the hidden layer). */
static void cpu_mlp(struct cpu_state *s, const struct model_tensor *gate,
                    const struct model_tensor *up,
                    const struct model_tensor *down, enum model_act act,
                    const float *x, int32_t n, float *y)
{
	/* hb = act(gate x) * (up x), in the same job */
	const struct model_tensor *w[2] = {gate, up};
	float *hy[2] = {s->hb, s->hb2};
	const int64_t ys[2] = {gate->ne1, gate->ne1};

	cpu_matmul_n(s, w, 2, x, n, hy, ys, true, act);
	cpu_matmul(s, down, s->hb, n, y);
}

/* B[0..n) added to each of the N_TOK rows of X (rows of N). */
static void cpu_add_rows(float *x, const float *b, int32_t n_tok, int64_t n)
{
	for (int32_t t = 0; t < n_tok; t++)
		for (int64_t i = 0; i < n; i++)
			x[(size_t)t * n + i] += b[i];
}

/* cpu_mlp with biases (an expert of gpt-oss): gate and up as one job,
 * then their biases, the activation, down and its bias. */
static void cpu_mlp_biased(struct cpu_state *s, const struct model_tensor *gate,
                           const struct model_tensor *up,
                           const struct model_tensor *down, enum model_act act,
                           const float *gb, const float *ub, const float *db,
                           const float *x, int32_t n, float *y)
{
	const struct model_tensor *w[2] = {gate, up};
	float *hy[2] = {s->hb, s->hb2};
	const int64_t nf = gate->ne1, ys[2] = {nf, nf};

	cpu_matmul_n(s, w, 2, x, n, hy, ys, false, act);
	cpu_add_rows(s->hb, gb, n, nf);
	cpu_add_rows(s->hb2, ub, n, nf);
	cpu_gate_act(act, s->hb, s->hb2, (long)n * nf);
	cpu_matmul(s, down, s->hb, n, y);
	cpu_add_rows(y, db, n, down->ne1);
}

/*
 * A mixture's FFN (model.h's recipe) on the normed chunk s->xb into s->y.
 * Each expert any token chose runs once over the tokens that chose it
 * (its rows read once per chunk, as a dense FFN's), their outputs kept per
 * choice; then each token's weighted outputs are summed in the order of
 * its choice. A token's result is the same whatever the chunk it is in
 * and whatever the thread count (each product's rows as in cpu_matmul).
 * With a trace attached, the last token's choice is recorded per layer;
 * a trace that pins the choice (a reference following the engine it
 * checks) sets the last token's instead.
 */
static void cpu_moe(struct engine *e, struct cpu_state *s, int il, int32_t n,
                    const float *rin)
{
	const struct model_ffn *f = &e->model->w.layers[il].ffn;
	const int32_t ne = e->model->cfg.n_embd, k = f->n_expert_used;
	const int32_t kmax = e->model->cfg.max_expert_used;

	const struct trace *tr = e->trace;
	/* a reference pinned to the choice of the engine it checks (the
	   step's last token, or every row the trace has: trace.h
	   pin_experts, pin_rows) */
	const bool pin = tr != NULL && tr->pin_experts && il < tr->n_layer &&
	                 tr->n_experts[il] == k;
	const bool pin_rows = tr != NULL && tr->pin_rows && il < tr->n_layer &&
	                      tr->row_expert_id != NULL;

	cpu_matmul(s, &f->router, rin, n, s->rl);
	if (f->router_b != NULL)
		cpu_add_rows(s->rl, f->router_b, n, f->n_expert);
	if (pin_rows && s->row0 == 0) /* (the step's first chunk) */
		e->trace->expert_dev[il] = 0.0f;
	for (int32_t t = 0; t < n; t++)
		if (pin_rows && s->row0 + t < tr->n_rows) {
			/* expert_dev: the most any pinned row gave up */
			const float d = model_moe_pin(
			    f, s->rl + (size_t)t * f->n_expert, s->rscratch,
			    tr->row_expert_id +
			        ((size_t)(s->row0 + t) * tr->n_layer +
			         (size_t)il) *
			            TRACE_MAX_EXPERTS,
			    s->ids + (size_t)t * kmax,
			    s->wts + (size_t)t * kmax);

			if (!(d <= e->trace->expert_dev[il]))
				e->trace->expert_dev[il] = d;
		} else if (pin && t == n - 1)
			e->trace->expert_dev[il] = model_moe_pin(
			    f, s->rl + (size_t)t * f->n_expert, s->rscratch,
			    tr->expert_id + (size_t)il * TRACE_MAX_EXPERTS,
			    s->ids + (size_t)t * kmax,
			    s->wts + (size_t)t * kmax);
		else
			model_moe_route(f, s->rl + (size_t)t * f->n_expert,
			                s->rscratch, s->ids + (size_t)t * kmax,
			                s->wts + (size_t)t * kmax);
	for (int32_t x = 0; x < f->n_expert; x++) {
		struct model_tensor g, u, d = model_expert(&f->down, x);
		int32_t cnt = 0;

		model_expert_gate_up(f, x, &g, &u);
		for (int32_t t = 0; t < n; t++)
			for (int32_t j = 0; j < k; j++)
				if (s->ids[(size_t)t * kmax + j] == x) {
					s->gtok[cnt] = t * kmax + j;
					memcpy(s->xg + (size_t)cnt * ne,
					       s->xb + (size_t)t * ne,
					       (size_t)ne * sizeof(float));
					cnt++;
				}
		if (cnt == 0)
			continue;
		if (f->gate_b != NULL)
			cpu_mlp_biased(s, &g, &u, &d, f->act,
			               f->gate_b + (size_t)x * f->n_ff,
			               f->up_b + (size_t)x * f->n_ff,
			               f->down_b + (size_t)x * ne, s->xg, cnt,
			               s->yg);
		else
			cpu_mlp(s, &g, &u, &d, f->act, s->xg, cnt, s->yg);
		/* (gemma4: the expert's output scale, before the weight) */
		for (size_t i = 0; f->exp_scale != NULL && i < (size_t)cnt * ne;
		     i++)
			s->yg[i] *= f->exp_scale[x];
		for (int32_t i = 0; i < cnt; i++)
			memcpy(s->acc + (size_t)s->gtok[i] * ne,
			       s->yg + (size_t)i * ne,
			       (size_t)ne * sizeof(float));
	}
	for (int32_t t = 0; t < n; t++) {
		float *y = s->y + (size_t)t * ne;
		const float *w = s->wts + (size_t)t * kmax;
		const float *a = s->acc + (size_t)t * kmax * ne;

		for (int32_t i = 0; i < ne; i++)
			y[i] = w[0] * a[i];
		for (int32_t j = 1; j < k; j++)
			for (int32_t i = 0; i < ne; i++)
				y[i] += w[j] * a[(size_t)j * ne + i];
	}
	if (e->trace != NULL)
		trace_experts(e->trace, il, s->ids + (size_t)(n - 1) * kmax,
		              s->wts + (size_t)(n - 1) * kmax, k);
	if (e->trace != NULL && !e->trace->pin_rows)
		trace_row_experts(e->trace, il, s->row0, n, s->ids, kmax, k);
}

/* A mixture's shared expert (model.h): y += sigmoid(sh_inp . h) times
 * its MLP of the normed chunk s->xb (s->yg holds its output). */
static void cpu_shared_expert(struct engine *e, struct cpu_state *s,
                              const struct model_ffn *f, int32_t n)
{
	const int32_t ne = e->model->cfg.n_embd;

	cpu_mlp(s, &f->sh_gate, &f->sh_up, &f->sh_down, f->act, s->xb, n,
	        s->yg);
	for (int32_t t = 0; t < n; t++) {
		const float *h = s->xb + (size_t)t * ne;
		double dot = 0;
		float g;

		for (int32_t i = 0; i < ne; i++)
			dot += (double)f->sh_inp[i] * h[i];
		g = 1.0f / (1.0f + expf(-(float)dot));
		for (int32_t i = 0; i < ne; i++)
			s->y[(size_t)t * ne + i] +=
			    g * s->yg[(size_t)t * ne + i];
	}
}

/*
 * A mixture beside a dense MLP (gemma4, model.h) on the chunk into s->y,
 * s->xb holding rmsnorm(x) * norm: the dense branch into s->yd, normed;
 * the router's input rmsnorm(x) / sqrt(n_embd) * router_scale into
 * s->rin, in ggml's order of operations; the experts on rmsnorm(x) *
 * exp_norm, their sum normed; the two added.
 */
static void cpu_moe_dense(struct engine *e, struct cpu_state *s, int il,
                          int32_t n)
{
	const struct model_config *c = &e->model->cfg;
	const struct model_ffn *f = &e->model->w.layers[il].ffn;
	const size_t ne = (size_t)c->n_embd;
	const float inv = 1.0f / sqrtf((float)c->n_embd);

	cpu_mlp(s, &f->sh_gate, &f->sh_up, &f->sh_down, f->act, s->xb, n,
	        s->yd);
	cpu_rmsnorm_rows(e, s->yd, s->yd, f->sh_post_norm, n);
	cpu_rmsnorm_rows(e, s->rin, s->x, NULL, n);
	for (size_t i = 0; i < (size_t)n * ne; i++)
		s->rin[i] = s->rin[i] * inv * f->router_scale[i % ne];
	cpu_rmsnorm_rows(e, s->xb, s->x, f->exp_norm, n);
	cpu_moe(e, s, il, n, s->rin);
	cpu_rmsnorm_rows(e, s->y, s->y, f->exp_post_norm, n);
	for (size_t i = 0; i < (size_t)n * ne; i++)
		s->y[i] = s->yd[i] + s->y[i];
}

/* Feed-forward block (a gated MLP or a mixture of them) of layer il for
 * the chunk; adds into s->x. */
static void cpu_ffn_block(struct engine *e, struct cpu_state *s, int il,
                          int32_t n)
{
	const struct model_config *c = &e->model->cfg;
	const struct model_ffn *f = &e->model->w.layers[il].ffn;

	cpu_rmsnorm_rows(e, s->xb, s->x, f->norm, n);
	if (f->exp_norm != NULL)
		cpu_moe_dense(e, s, il, n);
	else if (f->kind == MODEL_FFN_EXPERTS)
		cpu_moe(e, s, il, n, s->xb);
	else
		cpu_mlp(s, &f->gate, &f->up, &f->down, f->act, s->xb, n, s->y);
	if (f->sh_inp != NULL) /* (gemma4's ungated one: cpu_moe_dense) */
		cpu_shared_expert(e, s, f, n);
	if (f->post_norm != NULL)
		cpu_rmsnorm_rows(e, s->y, s->y, f->post_norm, n);
	for (size_t i = 0; i < (size_t)n * c->n_embd; i++)
		s->x[i] += s->y[i];
}

/* The recipe of one layer (model.h) for the chunk. */
static void cpu_layer(struct engine *e, struct cpu_state *s, int il, int32_t n,
                      int32_t pos0)
{
	const struct model_config *c = &e->model->cfg;

	if (e->model->w.layers[il].attn.kind == MODEL_ATTN_RECURRENT)
		cpu_ssm_block(e, s, il, n);
	else
		cpu_attention_block(e, s, il, n, pos0);
	cpu_ffn_block(e, s, il, n);
	if (e->model->w.layers[il].ple.gate.data != NULL)
		cpu_ple_block(e, s, il, n);
	if (e->model->w.layers[il].out_scale != 0.0f)
		for (size_t i = 0; i < (size_t)n * c->n_embd; i++)
			s->x[i] *= e->model->w.layers[il].out_scale;
	if (e->trace != NULL && il < e->trace->n_layer)
		trace_layer(e->trace, il, s->x + (size_t)(n - 1) * c->n_embd,
		            c->n_embd);
}

/* One chunk of n <= n_batch tokens at positions pos0..; logits per flags. */
static void cpu_forward_chunk(struct engine *e, struct cpu_state *s,
                              const int32_t *tokens, int32_t n, int32_t pos0,
                              float *logits, int32_t n_out)
{
	const struct model *m = e->model;
	const struct model_config *c = &m->cfg;
	const struct model_tensor *te = &m->w.token_embd;
	int32_t first_out = n - n_out;

	for (int32_t t = 0; t < n; t++) {
		float *xt = s->x + (size_t)t * c->n_embd;

		quant_dequant_row(te->type,
		                  (const unsigned char *)te->data +
		                      (size_t)tokens[t] * te->row_size,
		                  xt, c->n_embd);
		for (int32_t i = 0; c->embd_scale != 0.0f && i < c->n_embd; i++)
			xt[i] *= c->embd_scale;
		for (int r = 0; r < c->n_ropes; r++)
			cpu_rope_table(&c->ropes[r], pos0 + t,
			               s->rope_cs +
			                   ((size_t)r * s->n_batch + t) *
			                       c->max_rot);
	}
	if (c->ple_dim > 0)
		cpu_ple_inputs(e, s, tokens, n);
	for (int il = 0; il < c->n_layer; il++)
		cpu_layer(e, s, il, n, pos0);
	if (n_out == 0)
		return;
	cpu_rmsnorm_rows(e, s->xb, s->x + (size_t)first_out * c->n_embd,
	                 m->w.output_norm, n_out);
	cpu_matmul(s, &m->w.output, s->xb, n_out, logits);
	if (c->final_softcap != 0.0f) { /* ggml's: scale, tanh, scale */
		const float cap = c->final_softcap, inv = 1.0f / cap;

		for (size_t i = 0; i < (size_t)n_out * c->n_vocab; i++)
			logits[i] = tanhf(logits[i] * inv) * cap;
	}
}

/* Grow e->logits to hold N rows. */
static int cpu_logits_reserve(struct engine *e, struct cpu_state *s, int32_t n,
                              char *err, size_t errlen)
{
	size_t nv = (size_t)e->model->cfg.n_vocab;
	float *p;

	if (n <= s->logits_cap)
		return 0;
	p = realloc(e->logits, (size_t)n * nv * sizeof(float));
	if (p == NULL) {
		snprintf(err, errlen, "out of memory for %d rows of logits", n);
		return -1;
	}
	e->logits = p;
	s->logits_cap = n;
	return 0;
}

/* Before a chunk of M tokens at POS0: where the window layers' rows
 * would not hold it, their rows from the slack before the chunk's first
 * window on (the positions [POS0 - win_need - slack, POS0)) move down to
 * row 0 and win_lo up to that position (the layout note; engine.h
 * invariant 3: a truncation of up to the slack back always finds its
 * window; the rows move once every slack positions or so). */
static void cpu_window_move(struct engine *e, struct cpu_state *s, int32_t pos0,
                            int32_t m)
{
	const int32_t back = e->win_need + s->win_slack;
	const int32_t lo = pos0 > back ? pos0 - back : 0;

	if (pos0 + m - e->win_lo <= e->win_cap || lo <= e->win_lo)
		return;
	for (int il = 0; il < e->model->cfg.n_layer; il++) {
		if (!s->win[il])
			continue;
		memmove(s->kb[il],
		        s->kb[il] + (size_t)(lo - e->win_lo) * s->k_row[il],
		        (size_t)(pos0 - lo) * s->k_row[il]);
		memmove(s->vb[il],
		        s->vb[il] + (size_t)(lo - e->win_lo) * s->v_row[il],
		        (size_t)(pos0 - lo) * s->v_row[il]);
	}
	e->win_lo = lo;
}

/* engine_ops.ws_io: the window layers' rows of the positions [POS -
 * win_need, POS) (from 0) to snapshot slot SLOT, or back to their rows'
 * start (LOAD). */
static int cpu_ws_io(struct engine *e, int slot, int32_t pos, bool load,
                     char *err, size_t errlen)
{
	struct cpu_state *s = e->impl;
	const int32_t lo = pos > e->win_need ? pos - e->win_need : 0;
	unsigned char *p;

	if (s->ws[slot] == NULL) {
		size_t n = 0;

		for (int il = 0; il < e->model->cfg.n_layer; il++)
			if (s->win[il])
				n += (size_t)e->win_need *
				     (s->k_row[il] + s->v_row[il]);
		s->ws[slot] = malloc(n ? n : 1);
		if (s->ws[slot] == NULL) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		e->mem_bytes += n;
	}
	p = s->ws[slot];
	for (int il = 0; il < e->model->cfg.n_layer; il++) {
		unsigned char *c[2] = {s->kb[il], s->vb[il]};
		const size_t row[2] = {s->k_row[il], s->v_row[il]};

		if (!s->win[il])
			continue;
		for (int kv = 0; kv < 2; kv++) {
			/* (a load puts position lo in row 0) */
			unsigned char *r =
			    c[kv] +
			    (load ? 0 : cpu_kv_row(e, s, il, lo)) * row[kv];
			const size_t n = (size_t)(pos - lo) * row[kv];

			if (load)
				memcpy(r, p, n);
			else
				memcpy(p, r, n);
			p += (size_t)e->win_need * row[kv];
		}
	}
	return 0;
}

/* engine_ops.eval: chunks of n_batch tokens through the layer stack. */
static int cpu_eval(struct engine *e, const int32_t *tokens, int32_t n,
                    unsigned flags, char *err, size_t errlen)
{
	struct cpu_state *s = e->impl;
	bool all = (flags & ENGINE_EVAL_ALL) != 0;
	bool none = (flags & ENGINE_EVAL_NO_LOGITS) != 0;
	size_t nv = (size_t)e->model->cfg.n_vocab;

	if (cpu_logits_reserve(e, s, all ? n : 1, err, errlen))
		return -1;
	e->n_logits = 0;
	for (int32_t done = 0; done < n; done += s->n_batch) {
		int32_t m = n - done < s->n_batch ? n - done : s->n_batch;
		bool last = done + m == n;
		int32_t n_out = all ? m : (last && !none ? 1 : 0);
		float *dst = all ? e->logits + (size_t)done * nv : e->logits;

		cpu_window_move(e, s, e->n_past + done, m);
		s->row0 = done;
		cpu_forward_chunk(e, s, tokens + done, m, e->n_past + done, dst,
		                  n_out);
	}
	e->n_logits = all ? n : none ? 0 : 1;
	return 0;
}

/* engine_ops.logits: the CPU's logits are on the host already. */
static const float *cpu_logits(struct engine *e, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	return e->logits;
}

/* ------------------------------------------------------------ KV state */

/* Positions [0, n) of rows of DIM elements, ROW bytes apart at CACHE
 * (an f16 or q8_0 cache), to or from the floats at F: dequantized
 * (exact), or quantized as the cache stores them (cpu_kv_put's). */
static void cpu_kv_convert(const struct cpu_state *s, unsigned char *cache,
                           size_t row, int32_t dim, int32_t n, float *f,
                           bool to_floats)
{
	for (int32_t p = 0; p < n; p++, cache += row, f += dim)
		if (to_floats)
			quant_dequant_row(cpu_kv_qtype(s->kv_type), cache, f,
			                  dim);
		else if (s->kv_type == ENGINE_KV_Q8_0)
			quant_q8_0_row(f, dim, cache);
		else
			for (int32_t i = 0; i < dim; i++)
				((uint16_t *)cache)[i] = f32_to_f16(f[i]);
}

/* Layer by layer, in the state's layout (engine.h: K of the positions
 * a layer holds, then V; a window layer's from e->win_lo on), to or from
 * the floats at F: copied (f32) or converted (an f16 or q8_0 cache,
 * cpu_kv_convert). SKIP: rows of a window layer's data at F that are not
 * kept (a load of more than its rows hold). */
static void cpu_kv_move(struct engine *e, int32_t n, float *f, int32_t skip,
                        bool save)
{
	struct cpu_state *s = e->impl;
	const bool f32 = s->kv_type == ENGINE_KV_F32;

	for (int il = 0; il < e->model->cfg.n_layer; il++) {
		struct model_cache_desc d = model_layer_cache(e->model, il);
		/* a window layer's positions [win_lo, n), whether its rows
		   start there (s->win) or hold every position */
		const bool w = d.kind == MODEL_CACHE_WINDOW;
		const int32_t p0 = w ? e->win_lo : 0, rows = n - p0;
		const size_t r0 = cpu_kv_row(e, s, il, p0);
		const size_t row[2] = {s->k_row[il], s->v_row[il]};
		unsigned char *c[2] = {s->kb[il] + r0 * row[0],
		                       s->vb[il] + r0 * row[1]};
		const int32_t dim[2] = {d.k_dim, d.v_dim};

		for (int kv = 0; kv < 2; kv++) {
			if (w)
				f += (size_t)skip * dim[kv];
			if (f32 && save)
				memcpy(f, c[kv], (size_t)rows * row[kv]);
			else if (f32)
				memcpy(c[kv], f, (size_t)rows * row[kv]);
			else
				cpu_kv_convert(s, c[kv], row[kv], dim[kv], rows,
				               f, save);
			f += (size_t)rows * dim[kv];
		}
	}
}

static int cpu_kv_save(struct engine *e, int32_t n, void *buf, char *err,
                       size_t errlen)
{
	(void)err;
	(void)errlen;
	cpu_kv_move(e, n, buf, 0, true);
	return 0;
}

/* Inverse of cpu_kv_save; of a window layer's positions [e->win_lo, n)
 * more than its rows hold, the last ones are kept (win_lo moves up). */
static int cpu_kv_load(struct engine *e, int32_t n, const void *buf, char *err,
                       size_t errlen)
{
	int32_t skip = 0;

	(void)err;
	(void)errlen;
	if (n - e->win_lo > e->win_cap) {
		skip = n - e->win_lo - e->win_cap;
		e->win_lo += skip;
	}
	/* (only read when loading) */
	cpu_kv_move(e, n, (float *)(uintptr_t)buf, skip, false);
	return 0;
}

/* cos/sin of every pair of class R turned by -D positions into CS[n_rot]
 * (no YaRN magnitude: the cached keys carry it already). */
static void cpu_shift_table(const struct model_rope *r, int32_t d, float *cs)
{
	for (int i = 0; i < r->n_rot / 2; i++) {
		double theta = -(double)d * r->inv_freq[i];

		cs[2 * i] = (float)cos(theta);
		cs[2 * i + 1] = (float)sin(theta);
	}
}

/* engine_ops.kv_shift on layer IL's cache: the N rows from p0 + GAP on
 * move to p0 in ascending order (a row is read before anything lands on
 * it; GAP 0: they stay), each head's key turned by -D: in place in an f32
 * cache; an f16 or q8_0 head (its own blocks) read as floats into the scratch
 * row, turned and stored again by cpu_kv_convert (one more rounding of the key:
 * a fresh evaluation rounds the turned key once). Values move as bytes. */
static void cpu_kv_shift_layer(struct engine *e, int il, int32_t p0,
                               int32_t gap, int32_t n, int32_t d)
{
	struct cpu_state *s = e->impl;
	const struct model_attn *a = &e->model->w.layers[il].attn;
	const struct model_rope *r = model_layer_rope(e->model, il);
	const int32_t hd = a->head_dim_k;
	const size_t kr_row = s->k_row[il], vr_row = s->v_row[il];
	const size_t hb = engine_kv_type_bytes(s->kv_type, (size_t)hd);
	const bool f32 = s->kv_type == ENGINE_KV_F32;
	float cs[MODEL_MAX_HEAD_DIM];

	cpu_shift_table(r, d, cs);
	for (int32_t j = p0; j < p0 + n; j++) {
		unsigned char *k = s->kb[il] + (size_t)j * kr_row;

		if (f32 && gap > 0)
			memcpy(k, k + (size_t)gap * kr_row, kr_row);
		for (int h = 0; h < a->n_head_kv; h++) {
			unsigned char *kh = k + (size_t)h * hb;
			float *kf = f32 ? (float *)kh : s->kvrow;

			if (!f32)
				cpu_kv_convert(s, kh + (size_t)gap * kr_row, hb,
				               hd, 1, kf, true);
			cpu_rope(kf, cs, r->n_rot, r->style);
			if (!f32)
				cpu_kv_convert(s, kh, hb, hd, 1, kf, false);
		}
	}
	if (gap > 0)
		memmove(s->vb[il] + (size_t)p0 * vr_row,
		        s->vb[il] + (size_t)(p0 + gap) * vr_row,
		        (size_t)n * vr_row);
}

/* Shift the cache (engine.h invariant 6): every layer with a cache of
 * its own (a shared one reads its source's). A window layer whose rows
 * start at e->win_lo > 0 holds kept positions only (engine.c checks
 * win_lo >= p0 + d): its rows stay, each key turned, and engine.c moves
 * win_lo down by d. */
static int cpu_kv_shift(struct engine *e, int32_t p0, int32_t d, char *err,
                        size_t errlen)
{
	struct cpu_state *s = e->impl;

	(void)err;
	(void)errlen;
	for (int il = 0; il < e->model->cfg.n_layer; il++) {
		enum model_cache_kind k = model_layer_cache(e->model, il).kind;

		if (s->win[il] && e->win_lo > 0)
			cpu_kv_shift_layer(e, il, 0, 0, e->n_past - e->win_lo,
			                   d);
		else if (k == MODEL_CACHE_FULL || k == MODEL_CACHE_WINDOW)
			cpu_kv_shift_layer(e, il, p0, d, e->n_past - d - p0, d);
	}
	return 0;
}

/* ------------------------------------------------------- open / close */

/* Largest quant_vec_size over the matrices of the model. */
static size_t cpu_max_vec_size(const struct model *m)
{
	const struct model_config *c = &m->cfg;
	size_t mx = quant_vec_size(m->w.output.type, c->n_embd);

	if (m->w.ple_proj.data != NULL) {
		size_t v = quant_vec_size(m->w.ple_proj.type, c->n_embd);

		mx = v > mx ? v : mx;
	}
	for (int il = 0; il < c->n_layer; il++) {
		const struct model_tensor *ts[MODEL_LAYER_MAX_MATRICES];
		int nt = model_layer_matrices(&m->w.layers[il], ts);

		for (int i = 0; i < nt; i++) {
			size_t v = quant_vec_size(ts[i]->type, ts[i]->ne0);

			if (v > mx)
				mx = v;
		}
	}
	return (mx + 63) & ~(size_t)63;
}

/* calloc of a * b floats with an overflow check. */
float *cpu_floats(size_t a, size_t b)
{
	if (b != 0 && a > SIZE_MAX / sizeof(float) / b)
		return NULL;
	return calloc(a * b, sizeof(float));
}

/* Rows of layer IL's cache: e->win_cap for a window layer, n_ctx. */
static size_t cpu_kv_rows(const struct engine *e, const struct cpu_state *s,
                          int il)
{
	return (size_t)(s->win[il] ? e->win_cap : e->n_ctx);
}

/* Bytes of the KV cache: every layer's rows of K and V. */
static size_t cpu_kv_bytes(const struct engine *e, const struct cpu_state *s)
{
	size_t n = 0;

	for (int il = 0; il < e->model->cfg.n_layer; il++) {
		struct model_cache_desc d = model_layer_cache(e->model, il);

		n += cpu_kv_rows(e, s, il) *
		     (engine_kv_type_bytes(s->kv_type, (size_t)d.k_dim) +
		      engine_kv_type_bytes(s->kv_type, (size_t)d.v_dim));
	}
	return n;
}

/* Which layers keep only a window's positions, and how many rows they
 * have (e->win_cap): the window, a chunk and the slack (engine.h
 * invariant 3), where that is fewer than n_ctx and P does not ask for
 * every position. */
static int cpu_window_plan(struct engine *e, struct cpu_state *s,
                           const struct engine_params *p)
{
	const int32_t slack =
	    p->window_slack > 0 ? p->window_slack : ENGINE_WINDOW_SLACK;
	/* the slack kept after a move, and as much again before the next */
	const int64_t cap =
	    (int64_t)e->win_need + 1 + s->n_batch + 2 * (int64_t)slack;

	s->win = calloc((size_t)e->model->cfg.n_layer, 1);
	if (s->win == NULL)
		return -1;
	if (p->window_full || cap >= e->n_ctx)
		return 0;
	e->win_cap = (int32_t)cap;
	s->win_slack = slack;
	for (int il = 0; il < e->model->cfg.n_layer; il++)
		s->win[il] =
		    model_layer_cache(e->model, il).kind == MODEL_CACHE_WINDOW;
	return 0;
}

/* The KV cache: each layer's K and V for n_ctx positions in one
 * allocation (model_cache_floats elements of kv_type), the per-layer
 * pointers into it; an f16 or q8_0 cache's attention scratch. */
static int cpu_kv_alloc(struct engine *e, struct cpu_state *s)
{
	const int32_t nl = e->model->cfg.n_layer;
	const enum engine_kv_type t = s->kv_type;
	const bool f32 = t == ENGINE_KV_F32;
	unsigned char *p;

	s->k_cache = calloc((size_t)nl, sizeof(*s->k_cache));
	s->v_cache = calloc((size_t)nl, sizeof(*s->v_cache));
	s->kb = calloc((size_t)nl, sizeof(*s->kb));
	s->vb = calloc((size_t)nl, sizeof(*s->vb));
	s->k_row = calloc((size_t)nl, sizeof(*s->k_row));
	s->v_row = calloc((size_t)nl, sizeof(*s->v_row));
	s->kv = calloc(cpu_kv_bytes(e, s), 1);
	s->kvrow = f32 ? malloc(1)
	               : cpu_floats((size_t)e->n_threads * (CPU_KV_GROUP + 2),
	                            (size_t)s->kv_hmax);
	if (s->k_cache == NULL || s->v_cache == NULL || s->kb == NULL ||
	    s->vb == NULL || s->k_row == NULL || s->v_row == NULL ||
	    s->kv == NULL || s->kvrow == NULL)
		return -1;
	/* all K first, then all V: the layout of the fp32 cache before
	   per-layer caches, so a uniform model's memory is unchanged */
	p = (unsigned char *)s->kv;
	for (int il = 0; il < nl; il++) {
		s->k_row[il] = engine_kv_type_bytes(
		    t, (size_t)model_layer_cache(e->model, il).k_dim);
		s->kb[il] = p;
		s->k_cache[il] = f32 ? (float *)p : NULL;
		p += cpu_kv_rows(e, s, il) * s->k_row[il];
	}
	for (int il = 0; il < nl; il++) {
		s->v_row[il] = engine_kv_type_bytes(
		    t, (size_t)model_layer_cache(e->model, il).v_dim);
		s->vb[il] = p;
		s->v_cache[il] = f32 ? (float *)p : NULL;
		p += cpu_kv_rows(e, s, il) * s->v_row[il];
	}
	return 0;
}

/* A mixture's buffers (struct cpu_state). */
static int cpu_moe_alloc(const struct model_config *c, struct cpu_state *s)
{
	const size_t nb = (size_t)s->n_batch, ku = (size_t)c->max_expert_used;

	s->rl = cpu_floats(nb, (size_t)c->max_expert);
	s->rscratch = cpu_floats((size_t)c->max_expert, 1);
	s->ids = calloc(nb * ku, sizeof(*s->ids));
	s->wts = cpu_floats(nb, ku);
	s->gtok = calloc(nb * ku, sizeof(*s->gtok));
	s->xg = cpu_floats(nb, (size_t)c->n_embd);
	s->yg = cpu_floats(nb, (size_t)c->n_embd);
	s->acc = cpu_floats(nb * ku, (size_t)c->n_embd);
	return s->rl && s->rscratch && s->ids && s->wts && s->gtok && s->xg &&
	               s->yg && s->acc
	           ? 0
	           : -1;
}

/* engine_ops.close: free the run state and KV cache. */
static void cpu_close(struct engine *e)
{
	struct cpu_state *s = e->impl;

	if (s != NULL) {
		threadpool_free(s->tp);
		free(s->x);
		free(s->xb);
		free(s->q);
		free(s->k);
		free(s->v);
		free(s->hb);
		free(s->hb2);
		free(s->y);
		free(s->att);
		free(s->rope_cs);
		free(s->rl);
		free(s->rscratch);
		free(s->ids);
		free(s->wts);
		free(s->gtok);
		free(s->xg);
		free(s->yg);
		free(s->acc);
		free(s->yd);
		free(s->rin);
		cpu_ple_free(s);
		free(s->vecs);
		free(s->wrow);
		free(s->qg);
		cpu_ssm_free(s);
		free(s->kv);
		free(s->win);
		for (int i = 0; i <= ENGINE_RS_SNAPSHOTS; i++)
			free(s->ws[i]);
		free(s->k_cache);
		free(s->v_cache);
		free(s->kb);
		free(s->vb);
		free(s->k_row);
		free(s->v_row);
		free(s->kvrow);
		free(s);
	}
	free(e->logits);
	e->logits = NULL;
	e->impl = NULL;
}

/*
 * What grows with the context, planned against the memory the host has
 * before any of it is allocated (calloc of a cache larger than memory
 * succeeds, and its pages fail later, killing the process): the KV cache
 * (its real bytes in kv_type) and each thread's attention scores, per
 * token. Refused with the context that fits (a multiple of 256, a 1/16
 * margin for the rest).
 */
static int cpu_mem_plan(const struct engine *e, const struct cpu_state *s,
                        char *err, size_t errlen)
{
	const size_t per =
	    engine_kv_type_bytes(e->kv_type, model_cache_floats(e->model, 1)) +
	    (size_t)e->n_threads * sizeof(float);
	const double need = (double)cpu_kv_bytes(e, s) + (double)e->n_threads *
	                                                     sizeof(float) *
	                                                     (double)e->n_ctx;
	uint64_t avail, room;

	if (engine_host_mem_available(&avail) != 0 || need <= (double)avail)
		return 0;
	room = avail - avail / 16;
	if (room / per >= 256)
		snprintf(err, errlen,
		         "KV cache for %d tokens needs %.2f GiB, %.2f GiB "
		         "available; --ctx %llu fits",
		         e->n_ctx, need / 1073741824.0, avail / 1073741824.0,
		         (unsigned long long)(room / per / 256 * 256));
	else
		snprintf(err, errlen,
		         "KV cache for %d tokens needs %.2f GiB, %.2f GiB "
		         "available: no context of 256 tokens fits",
		         e->n_ctx, need / 1073741824.0, avail / 1073741824.0);
	return -1;
}

/* engine_ops.open: allocate buffers and the KV cache, start the threads. */
static int cpu_open(struct engine *e, const struct engine_params *p, char *err,
                    size_t errlen)
{
	const struct model *m = e->model;
	const struct model_config *c = &m->cfg;
	struct cpu_state *s;
	size_t nb, nctx = (size_t)e->n_ctx, xdim, ffdim;

	s = calloc(1, sizeof(*s));
	if (s == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	e->impl = s;
	s->n_batch = p->n_batch > 0 ? p->n_batch : 64;
	if (s->n_batch > 4096)
		s->n_batch = 4096;
	s->tp = threadpool_new(p->n_threads, err, errlen);
	if (s->tp == NULL)
		goto fail;
	e->n_threads = threadpool_size(s->tp);
	nb = (size_t)s->n_batch;
	s->kv_type = e->kv_type;
	for (int il = 0; il < c->n_layer; il++) {
		const struct model_attn *a = &m->w.layers[il].attn;

		s->kv_hmax =
		    a->head_dim_k > s->kv_hmax ? a->head_dim_k : s->kv_hmax;
		s->kv_hmax =
		    a->head_dim_v > s->kv_hmax ? a->head_dim_v : s->kv_hmax;
	}
	if (cpu_window_plan(e, s, p) != 0) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	if (cpu_mem_plan(e, s, err, errlen) != 0)
		goto fail;
	xdim = (size_t)(c->n_embd > c->max_o_dim ? c->n_embd : c->max_o_dim);
	if ((size_t)c->max_ssm_v > xdim)
		xdim = (size_t)c->max_ssm_v;
	ffdim = (size_t)(c->max_ff > c->max_ff_sh ? c->max_ff : c->max_ff_sh);
	s->x = cpu_floats(nb, (size_t)c->n_embd);
	s->xb = cpu_floats(nb, xdim);
	s->q = cpu_floats(nb, (size_t)c->max_q_dim);
	s->k = cpu_floats(nb, (size_t)c->max_kv_dim_k);
	s->v = cpu_floats(nb, (size_t)c->max_kv_dim_v);
	s->hb = cpu_floats(nb, ffdim);
	s->hb2 = cpu_floats(nb, ffdim);
	s->y = cpu_floats(nb, (size_t)c->n_embd);
	s->att = cpu_floats((size_t)e->n_threads, nctx);
	s->rope_cs = cpu_floats((size_t)c->n_ropes * nb, (size_t)c->max_rot);
	s->vec_stride = cpu_max_vec_size(m);
	s->exact = p->exact_dots;
	s->exact_types = p->exact_dot_types;
	s->wrow_stride = c->n_embd > c->max_ff ? c->n_embd : c->max_ff;
	if (c->max_o_dim > s->wrow_stride)
		s->wrow_stride = c->max_o_dim;
	if (c->max_ssm_v > s->wrow_stride)
		s->wrow_stride = c->max_ssm_v;
	if (c->max_ff_sh > s->wrow_stride)
		s->wrow_stride = c->max_ff_sh;
	if (c->ple_dim > s->wrow_stride)
		s->wrow_stride = c->ple_dim;
	s->wrow = s->exact || s->exact_types != 0
	              ? cpu_floats((size_t)e->n_threads, (size_t)s->wrow_stride)
	              : malloc(1);
	/* one slot of n_batch vectors per matrix of a job (cpu_matmul_n) */
	s->vecs = calloc((size_t)CPU_MAX_SEG * nb, s->vec_stride);
	if (!s->x || !s->xb || !s->q || !s->k || !s->v || !s->hb || !s->hb2 ||
	    !s->y || !s->att || !s->rope_cs || !s->vecs || !s->wrow ||
	    cpu_kv_alloc(e, s) != 0) {
		snprintf(err, errlen,
		         "out of memory for the CPU run state (n_ctx %d, KV "
		         "%.1f MiB)",
		         e->n_ctx,
		         (double)cpu_kv_bytes(e, s) / (1024.0 * 1024.0));
		goto fail;
	}
	if (((c->features & MODEL_FEAT_ATTN_GATE) &&
	     (s->qg = cpu_floats(nb, (size_t)c->max_q_dim)) == NULL) ||
	    (c->n_recurrent > 0 && cpu_ssm_alloc(e, s) != 0)) {
		snprintf(err, errlen,
		         "out of memory for the CPU recurrent-layer buffers "
		         "(n_batch %d)",
		         s->n_batch);
		goto fail;
	}
	if ((c->max_expert > 0 && cpu_moe_alloc(c, s) != 0) ||
	    ((c->features & MODEL_FEAT_MOE_DENSE) &&
	     (!(s->yd = cpu_floats(nb, (size_t)c->n_embd)) ||
	      !(s->rin = cpu_floats(nb, (size_t)c->n_embd)))) ||
	    (c->ple_dim > 0 && cpu_ple_alloc(e, s) != 0)) {
		snprintf(err, errlen,
		         "out of memory for the CPU mixture-of-experts or "
		         "per-layer input buffers (n_batch %d)",
		         s->n_batch);
		goto fail;
	}
	if (cpu_logits_reserve(e, s, 1, err, errlen))
		goto fail;
	/* the weights stay in the file mapping: what this backend holds is
	   the KV cache (kv_type) and the per-chunk activations */
	e->kv_elem_bytes = s->kv_type == ENGINE_KV_F32   ? sizeof(float)
	                   : s->kv_type == ENGINE_KV_F16 ? 2
	                                                 : 1;
	e->int8_act = !p->exact_dots; /* the default dots (quant_dot) */
	e->mem_bytes =
	    cpu_kv_bytes(e, s) +
	    (s->kv_type != ENGINE_KV_F32
	         ? (size_t)e->n_threads * (CPU_KV_GROUP + 2) * s->kv_hmax *
	               sizeof(float)
	         : 0) +
	    nb * sizeof(float) *
	        ((size_t)c->n_embd * 2 + xdim + (size_t)c->max_q_dim +
	         (size_t)c->max_kv_dim_k + (size_t)c->max_kv_dim_v +
	         (size_t)c->max_ff * 2 + (size_t)c->n_ropes * c->max_rot) +
	    (size_t)e->n_threads * nctx * sizeof(float) + nb * s->vec_stride +
	    (size_t)c->n_vocab * sizeof(float) + s->rs_floats * sizeof(float);
	/* per-layer inputs: every layer's, the token row, a layer's gate */
	e->mem_bytes += ((nb + 1) * (size_t)c->ple_dim * c->n_layer +
	                 nb * (size_t)c->ple_dim) *
	                sizeof(float);
	return 0;
fail:
	cpu_close(e);
	return -1;
}

const struct engine_ops backend_cpu_ops = {
    .name = "cpu",
    .kv_types =
        1u << ENGINE_KV_F32 | 1u << ENGINE_KV_F16 | 1u << ENGINE_KV_Q8_0,
    .kv_default = ENGINE_KV_F32,
    .features =
        MODEL_FEAT_QKV_BIAS | MODEL_FEAT_ROPE_FACTORS | MODEL_FEAT_ROPE_LINEAR |
        MODEL_FEAT_EMBD_SCALE | MODEL_FEAT_QK_NORM | MODEL_FEAT_POST_NORMS |
        MODEL_FEAT_ATTN_SLIDING | MODEL_FEAT_GELU_TANH | MODEL_FEAT_EXPERTS |
        MODEL_FEAT_ROPE_YARN | MODEL_FEAT_ATTN_SINKS |
        MODEL_FEAT_ATTN_OUT_BIAS | MODEL_FEAT_MOE_BIASES |
        MODEL_FEAT_SWIGLU_OAI | MODEL_FEAT_RECURRENT | MODEL_FEAT_ATTN_GATE |
        MODEL_FEAT_SHARED_EXPERT | MODEL_FEAT_FINAL_SOFTCAP |
        MODEL_FEAT_LAYER_SHAPES | MODEL_FEAT_V_NORM | MODEL_FEAT_K_AS_V |
        MODEL_FEAT_KV_SHARED | MODEL_FEAT_MOE_DENSE | MODEL_FEAT_EXPERT_SCALES |
        MODEL_FEAT_PER_LAYER_EMBD | MODEL_FEAT_OUT_SCALE |
        MODEL_FEAT_EXPERTS_MERGED,
    .open = cpu_open,
    .eval = cpu_eval,
    .logits = cpu_logits,
    .select = NULL, /* engine_select_row over cpu_logits: the reference */
    .kv_save = cpu_kv_save,
    .kv_load = cpu_kv_load,
    .rs_copy = cpu_rs_copy,
    .rs_io = cpu_rs_io,
    .kv_shift = cpu_kv_shift,
    .kv_shift_types =
        1u << ENGINE_KV_F32 | 1u << ENGINE_KV_F16 | 1u << ENGINE_KV_Q8_0,
    .window_ring = 1,
    .ws_io = cpu_ws_io,
    .close = cpu_close,
};

/*
 * backend_cuda.cu - the CUDA backend of the engine interface (src/engine.h):
 * the forward pass of model.h on one GPU, tested against backend_cpu.c.
 *
 * NOTES ON THE DESIGN
 *
 * Memory, all allocated at open (an out-of-memory is reported there, with
 * what the model needs and what the GPU has free, never in the middle of a
 * reply):
 *   - one arena with every weight in its GGUF type, copied verbatim (the
 *     kernels read the blocks directly; a tied LM head shares the
 *     embedding's copy), and the fp32 norms, biases and RoPE frequencies;
 *   - the KV cache, fp16, [layer][kv_head][pos][dim] (cuda_ops.h): one
 *     head's keys are contiguous for the attention's stream; or, with
 *     engine_params.kv_type q8_0, the same rows as Q8_0 blocks
 *     (cuda_kvq.cuh, 34 bytes a 32 values) and one layer's fp16 copy
 *     for the batch attention (cuda_ctx.d_kv16). A sliding-window layer
 *     keeps its window only (engine.h invariant 3, as backend_cpu.c):
 *     a head's rows are CU_WIN_MARGIN rows of zeros, then e->win_cap rows
 *     holding the positions [e->win_lo, n_past), position p in row
 *     CU_WIN_MARGIN + p - win_lo. The kernels are given the base moved
 *     back by win_lo - CU_WIN_MARGIN rows and the head's row count as
 *     their n_ctx (cu_kv_view), so that position p is still row p for
 *     them: no kernel knows of the ring. They read no row before the
 *     window's start but the rest of a tile or sub-chunk holding it
 *     (fewer than 64 positions: cuda_attn.cu), which the margin keeps
 *     inside the head's rows and finite (masked: 0 times a finite
 *     value). Before a chunk the rows would not hold, the positions
 *     from the slack before its first window on move down to the
 *     margin (cu_window_move, a 2-D copy a piece no longer than the
 *     distance, so no piece overlaps itself) and win_lo moves up; the
 *     decode graphs name the moved base, so they are captured again
 *     (cu_decode_graph compares the win_lo they were made at);
 *   - fp32 activations for a chunk of n_batch tokens (the residual stream
 *     is fp32 across layers: massive activations overflow fp16), the GEMM
 *     scratch (cuda_ctx) and device logits for one row (all rows of a
 *     chunk on demand, for ENGINE_EVAL_ALL).
 *
 * The pass mirrors backend_cpu.c step for step (same order, same RoPE
 * angles, K stored after RoPE, V plus bias), so the CPU reference is a
 * direct check. Everything is enqueued on one stream; the host waits once
 * per chunk, when the logits come back to e->logits.
 *
 * KV state bytes are the CPU backend's layout (fp32; per layer: K of
 * positions [0, n) as [pos][kv_head * dim], then V), so a state saved by
 * one backend loads into the other; fp16 -> fp32 is exact, fp32 -> fp16
 * rounds to nearest; q8_0 blocks dequantize exactly and the floats
 * quantize back to the same blocks (quant_q8_0_row, as the kernels).
 */
#include "cuda_check.cuh"
#include "cuda_knobs.h"
#include "cuda_ops.h"
#include "cuda_select.h"

#include <cuda_fp16.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine_backend.h"
#include "f16.h"
#include "model.h"
extern "C" {
#include "quant.h"
#include "trace.h"
}

/* One layer's weights on the device: its descriptors' (model.h) tensors,
 * NULL where a feature is off. */
struct cu_layer {
	struct cuda_tensor wq, wk, wv, wo; /* attention */
	const float *attn_norm;            /* [n_embd] */
	const float *bq, *bk, *bv;         /* or NULL */
	const float *q_norm, *k_norm;      /* [head_dim_k] or NULL */
	const float *attn_post_norm;       /* [n_embd] or NULL */
	/* the scores' parameters (model_attn_params, sinks on the device) */
	struct cuda_attn_params attn_par;
	struct cuda_tensor gate, up, down; /* FFN (a mixture: stacks, ne2) */
	struct cuda_tensor router; /* a mixture's [n_expert rows, n_embd]
	                              F32, or d NULL: dense */
	const float *bo;           /* [n_embd] attention output bias or NULL */
	/* a mixture's biases (gpt-oss), or NULL */
	const float *router_b;      /* [n_expert] */
	const float *gate_b, *up_b; /* [n_expert][n_ff] */
	const float *down_b;        /* [n_expert][n_embd] */
	const float *ffn_norm;      /* [n_embd] */
	const float *ffn_post_norm; /* [n_embd] or NULL */
	uint16_t *kc, *vc; /* this layer's KV cache, [kv_head][n_ctx][dim] */
	/* a recurrent layer's Gated DeltaNet (model_ssm), else d NULL */
	struct cuda_tensor wqkv, wz, wbeta, walpha, wout;
	const float *conv;     /* [conv_dim][d_conv] taps */
	const float *dt_bias;  /* [n_v_heads] */
	const float *ssm_a;    /* [n_v_heads] */
	const float *ssm_norm; /* [head_dim] */
	/* decode's copy of wbeta's rows then walpha's (one product of the
	   three in decode's one launch), d NULL where their types differ */
	struct cuda_tensor wba;
	size_t rs_off; /* floats before its part of a state slot */
	/* a mixture's shared expert (qwen35moe), else d NULL; sh_inp its
	   gate's weights as one F32 row */
	struct cuda_tensor sh_gate, sh_up, sh_down, sh_inp;
	/* decode's router with sh_inp as its last row: the routing logits
	   and the shared expert's gate logit in one product (F32); d NULL
	   for a router with a bias (its rows the experts' only) */
	struct cuda_tensor router_sh;
	/* a mixture beside a dense MLP (gemma4: sh_gate, sh_up, sh_down are
	   the dense MLP), else NULL: [n_embd] each */
	const float *sh_post_norm, *exp_norm, *exp_post_norm, *router_scale;
	const float *exp_scale; /* [n_expert] expert outputs' scales or NULL */
	/* the per-layer input (cfg.ple_dim > 0), else d NULL */
	struct cuda_tensor ple_gate, ple_proj;
	const float *ple_post_norm; /* [n_embd] */
};

/* Run state of the CUDA backend. */
struct cu_state {
	struct cuda_ctx ctx;
	int ctx_ok;
	int32_t n_batch;      /* tokens per chunk */
	unsigned char *arena; /* weights, norms, biases, inv_freq */
	uint64_t repack;      /* types in their GPU layout (cu_repack_types) */
	struct cu_layer *layers;
	struct cuda_tensor embd, output;
	const float *output_norm;
	/* the per-layer inputs (cfg.ple_dim > 0: Gemma 4's E models), else
	   d NULL: per_layer_token_embd, per_layer_model_proj, its norm */
	struct cuda_tensor ple_embd, ple_proj;
	const float *ple_proj_norm; /* [ple_dim] */
	/* per RoPE class (cfg.ropes): its inverse frequencies [n_rot / 2]
	   and its table [n_ctx][n_rot / 2] cos, sin (cuda_op_rope_table) */
	const double *inv_freq[MODEL_MAX_ROPES];
	float *rope_cs[MODEL_MAX_ROPES];

	/* activations of one chunk (a layer's dims; buffers hold cfg.max_*) */
	int32_t *tok;  /* [n_batch] */
	float *x;      /* [n_batch][n_embd] residual stream */
	float *xb;     /* [n_batch][n_embd] normed input */
	float *q;      /* [n_batch][q_dim] */
	float *k;      /* [n_batch][kv_dim] */
	float *v;      /* [n_batch][kv_dim] */
	float *o;      /* [n_batch][q_dim] attention output */
	float *y;      /* [n_batch][n_embd] a product before its post-norm */
	float *hb;     /* [n_batch][n_ff] */
	float *hb2;    /* [n_batch][n_ff] */
	float *logits; /* [logits_rows][n_vocab] */
	int32_t logits_rows;
	uint16_t *kv;   /* every layer's KV cache, fp16 or q8_0 blocks
	                   (e->kv_type; cu_layer.kc, vc) */
	uint16_t *kv16; /* a q8_0 cache: one layer's K and V in fp16 for the
	                   batch attention (cuda_ctx.d_kv16), else NULL */
	float *qg;      /* [n_batch][max_q_dim] a gated layer's [q | gate]
	                   rows per head (a model with such layers; else NULL) */
	/* recurrent layers (cfg.n_recurrent > 0; else NULL) */
	float *ssm_mix; /* [n_batch][max_conv_dim] the conv's inputs */
	float *ssm_c;   /* [n_batch][max_conv_dim] its outputs: q, k, v */
	float *ssm_z;   /* [n_batch][max_ssm_v] the output gate */
	float *ssm_o;   /* [n_batch][max_ssm_v] the heads' outputs */
	float *ssm_g;   /* [n_batch][max_ssm_heads] the decay's log */
	float *ssm_b;   /* [n_batch][max_ssm_heads] beta (decode: [b | a]) */
	float *sg;      /* [n_batch] a shared expert's gate logit */
	/* a mixture beside a dense MLP (MODEL_FEAT_MOE_DENSE; else NULL) */
	float *yd;  /* [n_batch][n_embd] the dense branch's output */
	float *rin; /* [n_batch][n_embd] the router's input, then the
	               experts' normed sum */
	/* per-layer inputs (cfg.ple_dim > 0; else NULL), P = ple_dim, L =
	   n_layer */
	float *ple; /* [n_batch][L P] every layer's input (cu_ple_inputs) */
	float *pe;  /* [n_batch][L P] the tokens' per-layer embedding rows */
	float *pg;  /* [n_batch][P] a layer's gate */
	/* the recurrent state's slots (engine_backend.h): 0 the live one,
	   read and written in place by every step (the decode graphs name
	   it), the snapshots allocated on first use; each every recurrent
	   layer's conv then state floats, in layer order (cu_layer.rs_off) */
	float *rs[1 + ENGINE_RS_SNAPSHOTS];
	size_t rs_floats; /* of one slot */

	int32_t host_logits_cap; /* rows allocated in e->logits */
	bool host_valid;         /* e->logits holds the last eval's rows */
	struct cuda_select sel;  /* the select step's buffers */
	int sel_ok;              /* sel allocated */

	/* decode graphs (cu_decode_graph): graphs[2b] runs one token at any
	   position below (b + 1) * CU_GRAPH_POS, graphs[2b + 1] the same
	   traced; captured on first use, those of b = 0 at open
	   (cu_graphs_warm) */
	bool use_graphs;         /* PARLEY_CUDA_GRAPHS is not "0" */
	int32_t *d_step;         /* [2] device: token id, position */
	int32_t *h_step;         /* [2] pinned: the next replay's d_step,
	                            copied by the graph's first node */
	bool step_queued;        /* a replay was launched since the stream
	                            last synchronised: it may not have read
	                            h_step yet */
	cudaGraphExec_t *graphs; /* [2 * n_graphs], NULL until captured */
	int32_t n_graphs;
	int32_t graphs_win_lo; /* e->win_lo when the graphs were captured */
	/* the sliding-window layers that keep their window only (the note),
	   by layer; NULL: every layer keeps every position */
	bool *win;
	int32_t win_slack; /* positions kept before the window after a move */
	/* window snapshots (cu_ws_io), pinned host memory, slots
	   1..ENGINE_RS_SNAPSHOTS: each window layer's K then V, [kv_head]
	   [win_need] rows; NULL until used */
	unsigned char *ws[ENGINE_RS_SNAPSHOTS + 1];

	/* a traced step's per-layer statistics, computed on the device
	   (cuda_op_stats) straight into mapped host memory: no copy in the
	   stream (a copy costs the debug pane's decode, BENCHMARKS.md step
	   21), read once the stream is synchronised */
	float *h_tstats; /* [n_layer][4] pinned, mapped host memory */
	float *d_tstats; /* the device's address of h_tstats */
	float *d_snap;   /* [n_layer][n_embd]: a traced decode step's residual
	                    after each layer (cu_decode_kernels) */
	/* the traced decode graph's branch for those statistics, beside the
	   output's norm and product (cu_stats_aside) */
	cudaStream_t side;
	cudaEvent_t side_fork, side_join;

	/* a mixture's FFN (cfg.max_expert > 0; else NULL): K = the largest
	   n_expert_used, a slot per token and choice */
	float *rl;     /* [n_batch][max_expert] router logits */
	int32_t *ids;  /* [n_batch][K] chosen experts (cuda_op_moe_route) */
	int32_t row0;  /* the chunk's first token's row in its step (a
	                  trace's rows: trace.h row_expert_id) */
	int32_t *perm; /* [n_batch K] the slots grouped by expert */
	float *wts;    /* [n_batch][K] their weights */
	float *eh;     /* [n_batch K][max_ff] an expert's gated product */
	float *eh2;    /* [n_batch K][max_ff] its up product (unfused) */
	float *eout;   /* [n_batch K][n_embd] an expert's output */
	/* the last token's choice per layer, written by the routing kernel
	   into mapped host memory (for a trace) */
	int32_t *h_tids; /* [n_layer][K] pinned, mapped */
	float *h_tw;     /* [n_layer][K] */
	int32_t *d_tids; /* their device addresses */
	float *d_tw;
};

#define CU_GRAPH_POS 1024 /* positions per decode graph */
/* The mat-vec's prefetch of its rows while the previous kernel runs
 * (cuda_ops.h prefetch_max): where a product is latency-bound the rows
 * reach L2 in the shadow of the previous kernel; where products are
 * bandwidth-bound and span several waves, the prefetches are extra
 * requests. So every product of a model of up to CU_PREFETCH_MAX, and in
 * bigger models the products of up to CU_PREFETCH_PRODUCT (QKV, wo);
 * the measurements are in BENCHMARKS.md ("moved from code comments").
 * PARLEY_CUDA_PREFETCH=0 or 1: none or every product (for measuring). */
#define CU_PREFETCH_MAX     ((size_t)256 << 20)
#define CU_PREFETCH_PRODUCT ((size_t)8 << 20)

/* 256-byte aligned size (cudaMalloc's alignment; any block type fits). */
static size_t cu_align(size_t n)
{
	return (n + 255) & ~(size_t)255;
}

/* The GGUF types whose weights the engine keeps in their GPU layout
 * (cuda_ops.h, cuda_repack.cu), a mask of 1 << type: Q8_0, Q6_K and Q4_K where
 * their mat-vec takes int8 activations; none when K->repack is 0
 * (PARLEY_CUDA_REPACK=0: the file's layout, to measure one against the
 * other). */
static uint64_t cu_repack_types(const struct cuda_knobs *k)
{
	if (!k->repack)
		return 0;
	return cuda_x8_types() &
	       (((uint64_t)1 << QTYPE_Q8_0) | ((uint64_t)1 << QTYPE_Q6_K) |
	        ((uint64_t)1 << QTYPE_Q4_K));
}

/* Whether T is kept in its GPU layout under the mask REPACK. */
static bool cu_repacked(const struct model_tensor *t, uint64_t repack)
{
	return t->type < 64 && (repack >> t->type & 1) != 0;
}

/* Bytes of T on the device (its GPU layout pads rows to 16 bytes). */
static size_t cu_tensor_bytes(const struct model_tensor *t, uint64_t repack)
{
	const size_t rs =
	    cu_repacked(t, repack)
	        ? cuda_repack_row_size(cuda_repack_type(t->type), t->ne0)
	        : t->row_size;

	return rs * (size_t)t->ne1 * (size_t)t->ne2;
}

/* Whether a recurrent layer's beta and alpha products can be one
 * (cu_layer.wba): the same type. */
static bool cu_ssm_ba_ok(const struct model_ssm *m)
{
	return m->wbeta.data != NULL && m->wbeta.type == m->walpha.type;
}

/* Their rows stacked (beta's, then alpha's) as one tensor over DATA
 * (NULL: the shape only). */
static struct model_tensor cu_ssm_ba(const struct model_ssm *m,
                                     const void *data)
{
	struct model_tensor t = m->wbeta;

	t.ne1 = m->wbeta.ne1 + m->walpha.ne1;
	t.data = data;
	return t;
}

/* Bytes of the arena for model M, the types of REPACK in their GPU
 * layout. */
static size_t cu_arena_bytes(const struct model *m, uint64_t repack)
{
	const struct model_config *c = &m->cfg;
	size_t n = cu_align(cu_tensor_bytes(&m->w.token_embd, repack));

	if (m->w.output.data != m->w.token_embd.data)
		n += cu_align(cu_tensor_bytes(&m->w.output, repack));
	n += cu_align((size_t)c->n_embd * sizeof(float));
	for (int r = 0; r < c->n_ropes; r++)
		n += cu_align((size_t)(c->ropes[r].n_rot / 2) * sizeof(double));
	for (int il = 0; il < c->n_layer; il++) {
		const struct model_layer *l = &m->w.layers[il];
		const struct model_tensor *ts[MODEL_LAYER_MAX_MATRICES];
		int nt = model_layer_matrices(l, ts);

		for (int i = 0; i < nt; i++)
			n += cu_align(cu_tensor_bytes(ts[i], repack));
		n += 2 * cu_align((size_t)c->n_embd * sizeof(float));
		if (l->attn.q_norm != NULL)
			n += 2 * cu_align((size_t)l->attn.head_dim_k *
			                  sizeof(float));
		if (l->attn.post_norm != NULL)
			n += cu_align((size_t)c->n_embd * sizeof(float));
		if (l->ffn.post_norm != NULL)
			n += cu_align((size_t)c->n_embd * sizeof(float));
		if (l->attn.sinks != NULL)
			n += cu_align((size_t)l->attn.n_head * sizeof(float));
		if (l->attn.bo != NULL)
			n += cu_align((size_t)c->n_embd * sizeof(float));
		if (l->ffn.router_b != NULL)
			n += cu_align((size_t)l->ffn.n_expert * sizeof(float)) +
			     2 * cu_align((size_t)l->ffn.n_expert *
			                  (size_t)l->ffn.n_ff * sizeof(float)) +
			     cu_align((size_t)l->ffn.n_expert *
			              (size_t)c->n_embd * sizeof(float));
		if (l->attn.bq != NULL)
			n += cu_align((size_t)l->attn.wq.ne1 * sizeof(float)) +
			     cu_align((size_t)l->attn.wk.ne1 * sizeof(float)) +
			     cu_align((size_t)l->attn.wv.ne1 * sizeof(float));
		if (cu_ssm_ba_ok(&l->ssm)) {
			struct model_tensor ba = cu_ssm_ba(&l->ssm, NULL);

			n += cu_align(cu_tensor_bytes(&ba, repack));
		}
		if (l->attn.kind == MODEL_ATTN_RECURRENT)
			n += cu_align((size_t)l->ssm.conv_dim * l->ssm.d_conv *
			              sizeof(float)) +
			     2 * cu_align((size_t)l->ssm.n_v_heads *
			                  sizeof(float)) +
			     cu_align((size_t)l->ssm.head_dim * sizeof(float));
		if (l->ffn.sh_inp != NULL)
			n +=
			    cu_align((size_t)c->n_embd * sizeof(float)) +
			    (l->ffn.router_b != NULL
			         ? 0
			         : cu_align((size_t)(l->ffn.n_expert + 1) *
			                    (size_t)c->n_embd * sizeof(float)));
		if (l->ffn.exp_norm != NULL)
			n += 4 * cu_align((size_t)c->n_embd * sizeof(float));
		if (l->ffn.exp_scale != NULL)
			n += cu_align((size_t)l->ffn.n_expert * sizeof(float));
		if (l->ffn.gate_up.data != NULL) /* gate and up apart */
			n += 256;
		if (l->ple.post_norm != NULL)
			n += cu_align((size_t)c->n_embd * sizeof(float));
	}
	if (c->ple_dim > 0)
		n += cu_align(cu_tensor_bytes(&m->w.ple_embd, repack)) +
		     cu_align(cu_tensor_bytes(&m->w.ple_proj, repack)) +
		     cu_align((size_t)c->ple_dim * sizeof(float));
	return n;
}

/* Copy N bytes of HOST to the arena at *OFF; returns the device address. */
static void *cu_put(struct cu_state *s, size_t *off, const void *host, size_t n,
                    char *err, size_t errlen, int *rc)
{
	void *d = s->arena + *off;

	*off += cu_align(n);
	if (*rc == 0 &&
	    cudaMemcpy(d, host, n, cudaMemcpyHostToDevice) != cudaSuccess) {
		snprintf(err, errlen, "copying %zu bytes of weights: %s", n,
		         cudaGetErrorString(cudaGetLastError()));
		*rc = -1;
	}
	return d;
}

/* T uploaded at *OFF in its GPU layout, *CT set to describe it: chunks of
 * the file's rows staged in the GEMM's fp16 scratch (free at load), each
 * rearranged from there by cuda_op_repack; all on the stream, in order,
 * synchronised once at the end of cu_upload. */
static void cu_put_repacked(struct cu_state *s, size_t *off,
                            const struct model_tensor *t,
                            struct cuda_tensor *ct, char *err, size_t errlen,
                            int *rc)
{
	const size_t stage = s->ctx.w16_cap * 2; /* bytes of d_w16 */
	const int64_t chunk = (int64_t)(stage / t->row_size);

	ct->type = cuda_repack_type(t->type);
	ct->row_size = cuda_repack_row_size(ct->type, t->ne0);
	const int64_t rows = t->ne1 * t->ne2; /* every matrix of a stack */

	ct->d = s->arena + *off;
	*off += cu_align(ct->row_size * (size_t)rows);
	for (int64_t r0 = 0; *rc == 0 && r0 < rows; r0 += chunk) {
		const int64_t nr = rows - r0 < chunk ? rows - r0 : chunk;

		if (cudaMemcpyAsync(s->ctx.d_w16,
		                    (const unsigned char *)t->data +
		                        (size_t)r0 * t->row_size,
		                    (size_t)nr * t->row_size,
		                    cudaMemcpyHostToDevice,
		                    s->ctx.stream) != cudaSuccess) {
			snprintf(err, errlen, "copying tensor '%s': %s",
			         t->name,
			         cudaGetErrorString(cudaGetLastError()));
			*rc = -1;
		} else if (cuda_op_repack(&s->ctx, t->type, t->ne0, nr,
		                          s->ctx.d_w16,
		                          (unsigned char *)ct->d +
		                              (size_t)r0 * ct->row_size,
		                          err, errlen) != 0) {
			*rc = -1;
		}
	}
}

/* A tensor's device description with its data uploaded at *OFF. */
static struct cuda_tensor cu_put_tensor(struct cu_state *s, size_t *off,
                                        const struct model_tensor *t, char *err,
                                        size_t errlen, int *rc)
{
	struct cuda_tensor ct;

	ct.type = t->type;
	ct.ne0 = t->ne0;
	ct.ne1 = t->ne1;
	ct.ne2 = t->ne2;
	ct.row_size = t->row_size;
	if (cu_repacked(t, s->repack)) {
		cu_put_repacked(s, off, t, &ct, err, errlen, rc);
		return ct;
	}
	ct.d = cu_put(s, off, t->data, cu_tensor_bytes(t, 0), err, errlen, rc);
	if (*rc == 0 && !cuda_ops_type_ok(t->type)) {
		snprintf(err, errlen,
		         "tensor '%s' has type %s, which the CUDA engine does "
		         "not support",
		         t->name, qtype_name(t->type));
		*rc = -1;
	}
	return ct;
}

/* A recurrent layer's beta and alpha rows as one tensor (cu_ssm_ba)
 * uploaded at *OFF: staged in host memory, copied before it is freed. */
static struct cuda_tensor cu_put_ba(struct cu_state *s, size_t *off,
                                    const struct model_ssm *m, char *err,
                                    size_t errlen, int *rc)
{
	const size_t nb = m->wbeta.row_size * (size_t)m->wbeta.ne1;
	const size_t na = m->walpha.row_size * (size_t)m->walpha.ne1;
	unsigned char *buf = (unsigned char *)malloc(nb + na);
	struct cuda_tensor ct;
	struct model_tensor t;

	memset(&ct, 0, sizeof(ct));
	if (buf == NULL) {
		snprintf(err, errlen, "out of host memory");
		*rc = -1;
		return ct;
	}
	memcpy(buf, m->wbeta.data, nb);
	memcpy(buf + nb, m->walpha.data, na);
	t = cu_ssm_ba(m, buf);
	ct = cu_put_tensor(s, off, &t, err, errlen, rc);
	if (*rc == 0 && cudaStreamSynchronize(s->ctx.stream) != cudaSuccess) {
		snprintf(err, errlen, "copying a recurrent layer's gates: %s",
		         cudaGetErrorString(cudaGetLastError()));
		*rc = -1;
	}
	free(buf);
	return ct;
}

/* The router (F32) with the shared expert's gate row after its rows
 * (cu_layer.router_sh) uploaded at *OFF. */
static struct cuda_tensor cu_put_router_sh(struct cu_state *s, size_t *off,
                                           const struct model_ffn *f, size_t en,
                                           char *err, size_t errlen, int *rc)
{
	const size_t nr = f->router.row_size * (size_t)f->router.ne1;
	unsigned char *buf = (unsigned char *)malloc(nr + en);
	struct cuda_tensor ct;

	memset(&ct, 0, sizeof(ct));
	if (buf == NULL) {
		snprintf(err, errlen, "out of host memory");
		*rc = -1;
		return ct;
	}
	memcpy(buf, f->router.data, nr);
	memcpy(buf + nr, f->sh_inp, en); /* F32 rows: the floats */
	ct.type = f->router.type;
	ct.ne0 = f->router.ne0;
	ct.ne1 = f->router.ne1 + 1;
	ct.ne2 = 1;
	ct.row_size = f->router.row_size;
	ct.d = cu_put(s, off, buf, nr + en, err, errlen, rc); /* (waits) */
	free(buf);
	return ct;
}

/* The gate (UP false) or up (UP true) stack of F's merged experts
 * (gate_up: each expert's 2 n_ff rows, gate's first) uploaded at *OFF as
 * a stack of its own, as the stacks apart are: staged in host memory,
 * copied before it is freed. */
static struct cuda_tensor cu_put_gate_up(struct cu_state *s, size_t *off,
                                         const struct model_ffn *f, bool up,
                                         char *err, size_t errlen, int *rc)
{
	const struct model_tensor *gu = &f->gate_up;
	const size_t half = gu->row_size * (size_t)f->n_ff;
	unsigned char *buf = (unsigned char *)malloc(half * (size_t)gu->ne2);
	struct cuda_tensor ct;
	struct model_tensor t = *gu;

	memset(&ct, 0, sizeof(ct));
	if (buf == NULL) {
		snprintf(err, errlen, "out of host memory");
		*rc = -1;
		return ct;
	}
	for (int64_t e = 0; e < gu->ne2; e++)
		memcpy(buf + (size_t)e * half,
		       (const unsigned char *)gu->data +
		           (size_t)(2 * e + (up ? 1 : 0)) * half,
		       half);
	t.ne1 = f->n_ff;
	t.data = buf;
	ct = cu_put_tensor(s, off, &t, err, errlen, rc);
	if (*rc == 0 && cudaStreamSynchronize(s->ctx.stream) != cudaSuccess) {
		snprintf(err, errlen, "copying merged experts: %s",
		         cudaGetErrorString(cudaGetLastError()));
		*rc = -1;
	}
	free(buf);
	return ct;
}

/* An optional vector of N floats at *OFF: its device address, or NULL
 * where HOST is NULL. */
static const float *cu_put_vec(struct cu_state *s, size_t *off,
                               const float *host, size_t n, char *err,
                               size_t errlen, int *rc)
{
	return host == NULL
	           ? NULL
	           : (const float *)cu_put(s, off, host, n * sizeof(float), err,
	                                   errlen, rc);
}

/* Layer IL's weights uploaded at *OFF into D. */
static void cu_put_layer(struct cu_state *s, size_t *off,
                         const struct model_layer *l, struct cu_layer *d,
                         size_t en, char *err, size_t errlen, int *rc)
{
	const struct model_attn *a = &l->attn;
	const struct model_ffn *f = &l->ffn;

	d->wq = cu_put_tensor(s, off, &a->wq, err, errlen, rc);
	d->wk = cu_put_tensor(s, off, &a->wk, err, errlen, rc);
	d->wv = cu_put_tensor(s, off, &a->wv, err, errlen, rc);
	d->wo = cu_put_tensor(s, off, &a->wo, err, errlen, rc);
	if (f->gate_up.data != NULL) { /* merged: two stacks, as apart */
		d->gate = cu_put_gate_up(s, off, f, false, err, errlen, rc);
		d->up = cu_put_gate_up(s, off, f, true, err, errlen, rc);
	} else {
		d->gate = cu_put_tensor(s, off, &f->gate, err, errlen, rc);
		d->up = cu_put_tensor(s, off, &f->up, err, errlen, rc);
	}
	d->down = cu_put_tensor(s, off, &f->down, err, errlen, rc);
	memset(&d->router, 0, sizeof(d->router));
	if (f->router.data != NULL)
		d->router = cu_put_tensor(s, off, &f->router, err, errlen, rc);
	d->bo = a->bo == NULL
	            ? NULL
	            : (const float *)cu_put(s, off, a->bo, en, err, errlen, rc);
	d->router_b = d->gate_b = d->up_b = d->down_b = NULL;
	if (f->router_b != NULL) {
		const size_t ne = (size_t)f->n_expert * sizeof(float);
		const size_t nf = ne * (size_t)f->n_ff;

		d->router_b = (const float *)cu_put(s, off, f->router_b, ne,
		                                    err, errlen, rc);
		d->gate_b = (const float *)cu_put(s, off, f->gate_b, nf, err,
		                                  errlen, rc);
		d->up_b =
		    (const float *)cu_put(s, off, f->up_b, nf, err, errlen, rc);
		d->down_b = (const float *)cu_put(
		    s, off, f->down_b, ne * (size_t)(en / sizeof(float)), err,
		    errlen, rc);
	}
	d->attn_norm =
	    (const float *)cu_put(s, off, a->norm, en, err, errlen, rc);
	d->ffn_norm =
	    (const float *)cu_put(s, off, f->norm, en, err, errlen, rc);
	d->q_norm = d->k_norm = d->attn_post_norm = d->ffn_post_norm = NULL;
	if (a->q_norm != NULL) {
		const size_t hb = (size_t)a->head_dim_k * sizeof(float);

		d->q_norm = (const float *)cu_put(s, off, a->q_norm, hb, err,
		                                  errlen, rc);
		/* (none in a layer of shared KV: it has no keys) */
		d->k_norm = cu_put_vec(s, off, a->k_norm, hb / sizeof(float),
		                       err, errlen, rc);
	}
	if (a->post_norm != NULL)
		d->attn_post_norm = (const float *)cu_put(s, off, a->post_norm,
		                                          en, err, errlen, rc);
	if (f->post_norm != NULL)
		d->ffn_post_norm = (const float *)cu_put(s, off, f->post_norm,
		                                         en, err, errlen, rc);
	{
		const struct model_attn_params p = model_attn_params(a);

		d->attn_par.scale = p.scale;
		d->attn_par.window = p.window;
		d->attn_par.softcap = p.softcap;
		d->attn_par.d_sinks =
		    a->sinks == NULL ? NULL
		                     : (const float *)cu_put(s, off, a->sinks,
		                                             (size_t)a->n_head *
		                                                 sizeof(float),
		                                             err, errlen, rc);
	}
	struct cuda_tensor none;

	memset(&none, 0, sizeof(none));
	d->wqkv = d->wz = d->wbeta = d->walpha = d->wout = d->wba = none;
	d->sh_gate = d->sh_up = d->sh_down = d->sh_inp = d->router_sh = none;
	d->conv = d->dt_bias = d->ssm_a = d->ssm_norm = NULL;
	if (a->kind == MODEL_ATTN_RECURRENT) {
		const struct model_ssm *m = &l->ssm;
		const size_t hv = (size_t)m->n_v_heads * sizeof(float);

		d->wqkv = cu_put_tensor(s, off, &m->wqkv, err, errlen, rc);
		d->wz = cu_put_tensor(s, off, &m->wz, err, errlen, rc);
		d->wbeta = cu_put_tensor(s, off, &m->wbeta, err, errlen, rc);
		d->walpha = cu_put_tensor(s, off, &m->walpha, err, errlen, rc);
		d->wout = cu_put_tensor(s, off, &m->wout, err, errlen, rc);
		d->conv = (const float *)cu_put(s, off, m->conv,
		                                (size_t)m->conv_dim *
		                                    m->d_conv * sizeof(float),
		                                err, errlen, rc);
		d->dt_bias = (const float *)cu_put(s, off, m->dt_bias, hv, err,
		                                   errlen, rc);
		d->ssm_a =
		    (const float *)cu_put(s, off, m->a, hv, err, errlen, rc);
		d->ssm_norm = (const float *)cu_put(
		    s, off, m->norm, (size_t)m->head_dim * sizeof(float), err,
		    errlen, rc);
		if (cu_ssm_ba_ok(m))
			d->wba = cu_put_ba(s, off, m, err, errlen, rc);
	}
	if (f->sh_gate.data != NULL) { /* gated, or the dense MLP beside */
		d->sh_gate =
		    cu_put_tensor(s, off, &f->sh_gate, err, errlen, rc);
		d->sh_up = cu_put_tensor(s, off, &f->sh_up, err, errlen, rc);
		d->sh_down =
		    cu_put_tensor(s, off, &f->sh_down, err, errlen, rc);
	}
	{
		const size_t ne = en / sizeof(float);

		d->sh_post_norm =
		    cu_put_vec(s, off, f->sh_post_norm, ne, err, errlen, rc);
		d->exp_norm =
		    cu_put_vec(s, off, f->exp_norm, ne, err, errlen, rc);
		d->exp_post_norm =
		    cu_put_vec(s, off, f->exp_post_norm, ne, err, errlen, rc);
		d->router_scale =
		    cu_put_vec(s, off, f->router_scale, ne, err, errlen, rc);
		d->exp_scale = cu_put_vec(s, off, f->exp_scale,
		                          (size_t)f->n_expert, err, errlen, rc);
		d->ple_gate = d->ple_proj = none;
		d->ple_post_norm = NULL;
		if (l->ple.gate.data != NULL) {
			d->ple_gate = cu_put_tensor(s, off, &l->ple.gate, err,
			                            errlen, rc);
			d->ple_proj = cu_put_tensor(s, off, &l->ple.proj, err,
			                            errlen, rc);
			d->ple_post_norm = cu_put_vec(s, off, l->ple.post_norm,
			                              ne, err, errlen, rc);
		}
	}
	if (f->sh_inp != NULL) {
		d->sh_inp.type = QTYPE_F32;
		d->sh_inp.ne0 = (int64_t)(en / sizeof(float));
		d->sh_inp.ne1 = 1;
		d->sh_inp.ne2 = 1;
		d->sh_inp.row_size = en;
		d->sh_inp.d = cu_put(s, off, f->sh_inp, en, err, errlen, rc);
		if (f->router_b == NULL)
			d->router_sh =
			    cu_put_router_sh(s, off, f, en, err, errlen, rc);
	}
	d->bq = d->bk = d->bv = NULL;
	if (a->bq != NULL) {
		d->bq = (const float *)cu_put(s, off, a->bq,
		                              (size_t)a->wq.ne1 * sizeof(float),
		                              err, errlen, rc);
		d->bk = (const float *)cu_put(s, off, a->bk,
		                              (size_t)a->wk.ne1 * sizeof(float),
		                              err, errlen, rc);
		d->bv = (const float *)cu_put(s, off, a->bv,
		                              (size_t)a->wv.ne1 * sizeof(float),
		                              err, errlen, rc);
	}
}

/* Upload every weight and the RoPE classes' inverse frequencies (model.c
 * computed them, for both backends). */
static int cu_upload(const struct model *m, struct cu_state *s, char *err,
                     size_t errlen)
{
	const struct model_config *c = &m->cfg;
	size_t off = 0;
	size_t en = (size_t)c->n_embd * sizeof(float);
	int rc = 0;

	s->embd = cu_put_tensor(s, &off, &m->w.token_embd, err, errlen, &rc);
	if (m->w.output.data == m->w.token_embd.data)
		s->output = s->embd; /* tied: one copy */
	else
		s->output =
		    cu_put_tensor(s, &off, &m->w.output, err, errlen, &rc);
	s->output_norm = (const float *)cu_put(s, &off, m->w.output_norm, en,
	                                       err, errlen, &rc);
	for (int r = 0; r < c->n_ropes; r++)
		s->inv_freq[r] = (const double *)cu_put(
		    s, &off, c->ropes[r].inv_freq,
		    (size_t)(c->ropes[r].n_rot / 2) * sizeof(double), err,
		    errlen, &rc);
	for (int il = 0; il < c->n_layer; il++)
		cu_put_layer(s, &off, &m->w.layers[il], &s->layers[il], en, err,
		             errlen, &rc);
	if (c->ple_dim > 0) {
		s->ple_embd =
		    cu_put_tensor(s, &off, &m->w.ple_embd, err, errlen, &rc);
		s->ple_proj =
		    cu_put_tensor(s, &off, &m->w.ple_proj, err, errlen, &rc);
		s->ple_proj_norm =
		    cu_put_vec(s, &off, m->w.ple_proj_norm, (size_t)c->ple_dim,
		               err, errlen, &rc);
	}
	/* the repacked tensors' copies and kernels (cu_put_repacked) */
	if (rc == 0 && cudaStreamSynchronize(s->ctx.stream) != cudaSuccess) {
		snprintf(err, errlen, "rearranging the weights: %s",
		         cudaGetErrorString(cudaGetLastError()));
		rc = -1;
	}
	return rc;
}

/* ----------------------------------------------------------- forward */

/*
 * Whether layer IL's Q/K/V products may rotate Q and K and store K and V
 * in their epilogue (cuda_op_matmul_qkv_rope's fusion): only where
 * nothing comes between the products and the rotation. A layer with a
 * q/k norm takes the products, then the norm, RoPE and the store in one
 * launch (cuda_op_qk_norm_rope_kv_store: the norm of a head needs all of
 * it, which no warp of the products has).
 */
static bool cu_qkv_rope_fusable(const struct model_attn *a)
{
	return a->q_norm == NULL && a->k_norm == NULL && !a->v_norm &&
	       a->wv.data != NULL;
}

/* Rows before a window layer's ring (the note): more than the attention
 * kernels read before a window's start. */
#define CU_WIN_MARGIN 64

/* Layer IL's cache as the kernels address it: position p of KV head h at
 * row h * rows + p of KC, VC (a ring's base moved back: the note). */
struct cu_kv_view {
	uint16_t *kc, *vc;
	int32_t rows;       /* a head's rows: the kernels' n_ctx */
	int32_t p_lo, r_lo; /* the first position held and its row */
};

/* The layer whose cache layer IL reads (its own, or a KV-shared layer's
   source). */
static int cu_kv_src(const struct engine *e, int il)
{
	const struct model_cache_desc d = model_layer_cache(e->model, il);

	return d.kind == MODEL_CACHE_SHARED ? d.src : il;
}

/* Rows of a KV head of layer IL's own cache. */
static int32_t cu_kv_rows(const struct engine *e, const struct cu_state *s,
                          int il)
{
	return s->win != NULL && s->win[il] ? CU_WIN_MARGIN + e->win_cap
	                                    : e->n_ctx;
}

/* Bytes of a row (a position of a KV head) of layer IL's cache, K's and
 * V's alike (cu_open refuses heads of two sizes). */
static size_t cu_kv_row_bytes(const struct engine *e, int il)
{
	return engine_kv_type_bytes(
	    e->kv_type, (size_t)e->model->w.layers[il].attn.head_dim_k);
}

/* Head 0's row of position win_lo in window layer IL's ring of K (KV 0)
 * or V (KV 1): the margin's end (the note). */
static unsigned char *cu_ring_start(const struct engine *e,
                                    const struct cu_state *s, int il, int kv)
{
	return (unsigned char *)(kv ? s->layers[il].vc : s->layers[il].kc) +
	       (size_t)CU_WIN_MARGIN * cu_kv_row_bytes(e, il);
}

static struct cu_kv_view cu_kv_view(const struct engine *e,
                                    const struct cu_state *s, int il)
{
	const int src = cu_kv_src(e, il);
	const struct cu_layer *l = &s->layers[il];
	struct cu_kv_view v = {l->kc, l->vc, e->n_ctx, 0, 0};

	if (s->win != NULL && s->win[src]) {
		/* (halves a row: a q8_0 row's 34-byte blocks are even too) */
		const ptrdiff_t hr = (ptrdiff_t)cu_kv_row_bytes(e, src) / 2;
		const ptrdiff_t back = (ptrdiff_t)CU_WIN_MARGIN - e->win_lo;

		v.kc += back * hr;
		v.vc += back * hr;
		v.rows = cu_kv_rows(e, s, src);
		v.p_lo = e->win_lo;
		v.r_lo = CU_WIN_MARGIN;
	}
	return v;
}

/* The rotation and KV store of layer IL for a chunk at POS0 (RK for the
 * fused epilogue: with its table). */
static struct cuda_rope_kv cu_rope_kv(const struct engine *e,
                                      const struct cu_state *s, int il,
                                      int32_t pos0)
{
	const struct model_attn *a = &e->model->w.layers[il].attn;
	const struct model_rope *r = model_layer_rope(e->model, il);
	const struct cu_kv_view v = cu_kv_view(e, s, il);
	struct cuda_rope_kv rk;

	rk.n_head = a->n_head;
	rk.n_kv = a->n_head_kv;
	rk.head_dim = a->head_dim_k;
	rk.n_rot = r->n_rot;
	rk.d_inv_freq = s->inv_freq[a->rope];
	rk.mscale = model_layer_rope(e->model, il)->mscale;
	rk.pos0 = pos0;
	rk.neox = r->style == MODEL_ROPE_NEOX;
	rk.n_ctx = v.rows;
	rk.il = 0; /* the layer's own cache (cu_layer.kc, vc) */
	rk.d_kc = v.kc;
	rk.d_vc = v.vc;
	rk.d_cs = s->rope_cs[a->rope];
	return rk;
}

/* x += rmsnorm(W IN) * NORM for a product followed by a post-norm (the
 * product into s->y, then its norm added in one launch); XQ: IN's int8
 * activations or NULL, as for cuda_op_matmul_add. OSCALE: the layer's
 * output scale still to apply (0: none), applied in the add's launch
 * when the add ends the layer (then *OSCALE becomes 0), or NULL. XQ_OUT:
 * where the new residual's int8 activations go, made in the add's launch
 * for a product of it that follows (NULL where none was made), or NULL. */
static int cu_post_norm_add(struct engine *e, struct cu_state *s,
                            const struct cuda_tensor *w, const float *in,
                            const void *xq, const float *norm, int32_t n,
                            float *oscale, const void **xq_out, char *err,
                            size_t errlen)
{
	const struct model_config *c = &e->model->cfg;
	const float sc = oscale != NULL ? *oscale : 0.0f;

	if (oscale != NULL)
		*oscale = 0.0f;
	if (cuda_op_matmul_xq(&s->ctx, w, in, xq, n, s->y, err, errlen))
		return -1;
	if (xq_out != NULL)
		return cuda_op_rmsnorm_add_scale_x8(
		    &s->ctx, s->y, norm, c->n_embd, n, c->rms_eps, sc, s->x,
		    xq_out, err, errlen);
	return cuda_op_rmsnorm_add_scale(&s->ctx, s->y, norm, c->n_embd, n,
	                                 c->rms_eps, sc, s->x, err, errlen);
}

/* Attention block of layer il for the chunk; adds into s->x. */
static int cu_attention_block(struct engine *e, struct cu_state *s, int il,
                              int32_t n, int32_t pos0, char *err, size_t errlen)
{
	const struct model_config *c = &e->model->cfg;
	const struct model_attn *a = &e->model->w.layers[il].attn;
	const struct cu_layer *l = &s->layers[il];
	struct cuda_ctx *x = &s->ctx;
	const void *xq; /* the norm's (then the attention's) output as int8
	                   activations, or NULL */
	struct cuda_rope_kv rk = cu_rope_kv(e, s, il, pos0);
	const struct cu_kv_view kvw = cu_kv_view(e, s, il);
	struct cuda_attn_params par = l->attn_par;

	par.p_lo = kvw.p_lo;
	par.r_lo = kvw.r_lo;

	if (cuda_op_rmsnorm_x8(x, s->x, l->attn_norm, c->n_embd, n, c->rms_eps,
	                       s->xb, &xq, err, errlen))
		return -1;
	if (a->kv_layer != il) {
		/* KV sharing (gemma4): the queries only, normed and rotated;
		   the keys and values are layer kv_layer's, in its cache
		   (cu_kv_place), written earlier in this chunk */
		if (cuda_op_matmul_xq(x, &l->wq, s->xb, xq, n,
		                      a->gated ? s->qg : s->q, err, errlen) ||
		    (a->gated &&
		     cuda_op_split_q_gate(x, s->qg, n, a->n_head, a->head_dim_k,
		                          s->q, err, errlen)) ||
		    cuda_op_qkv_norm_rope_store(
		        x, s->q, NULL, NULL, l->q_norm, NULL, 0, c->rms_eps, n,
		        rk.n_head, 0, rk.head_dim, rk.n_rot, rk.d_inv_freq,
		        rk.mscale, pos0, rk.neox, e->n_ctx, 0, NULL, NULL, err,
		        errlen))
			return -1;
	} else if (cu_qkv_rope_fusable(a)) {
		if (cuda_op_matmul_qkv_rope(x, &l->wq, &l->wk, &l->wv, l->bq,
		                            l->bk, l->bv, s->xb, xq, n, s->q,
		                            s->k, s->v, &rk, NULL, err, errlen))
			return -1;
	} else {
		/* the unfused chain: products, then q/k norm (where the
		   layer has it), RoPE and store in one launch; a gated
		   layer's query rows [q | gate] per head split first */
		/* keys as values (gemma4: no Wv): V is the keys' product
		   before their norm, the same product made twice (one
		   launch in decode) */
		const bool kv = a->wv.data == NULL;

		if (cuda_op_matmul_qkv(x, &l->wq, &l->wk, kv ? &l->wk : &l->wv,
		                       l->bq, l->bk, kv ? NULL : l->bv, s->xb,
		                       xq, n, a->gated ? s->qg : s->q, s->k,
		                       s->v, err, errlen) ||
		    (a->gated &&
		     cuda_op_split_q_gate(x, s->qg, n, a->n_head, a->head_dim_k,
		                          s->q, err, errlen)))
			return -1;
		if (cuda_op_qkv_norm_rope_store(
		        x, s->q, s->k, s->v, l->q_norm, l->k_norm, a->v_norm,
		        c->rms_eps, n, rk.n_head, rk.n_kv, rk.head_dim,
		        rk.n_rot, rk.d_inv_freq, rk.mscale, pos0, rk.neox,
		        kvw.rows, 0, kvw.kc, kvw.vc, err, errlen))
			return -1;
	}
	if (cuda_op_attention(x, s->q, kvw.kc, kvw.vc, n, a->n_head,
	                      a->n_head_kv, a->head_dim_k, kvw.rows, 0, pos0,
	                      &par, s->o, &xq, err, errlen))
		return -1;
	if (a->gated) { /* o *= sigmoid(gate): the int8 copy is stale */
		xq = NULL;
		if (cuda_op_sigmoid_mul(
		        x, s->o, s->qg, 2 * (int64_t)a->n_head * a->head_dim_k,
		        n, a->n_head, a->head_dim_k, err, errlen))
			return -1;
	}
	if (l->attn_post_norm != NULL)
		return cu_post_norm_add(e, s, &l->wo, s->o, xq,
		                        l->attn_post_norm, n, NULL, NULL, err,
		                        errlen);
	if (l->bo != NULL) /* y = Wo o, y += bo, x += y: the CPU's order */
		return cuda_op_matmul_add_bias(x, &l->wo, s->o, xq, n, l->bo,
		                               s->x, s->y, err, errlen);
	return cuda_op_matmul_add(x, &l->wo, s->o, xq, n, s->x, 0, err, errlen);
}

/*
 * Recurrent layer IL (model.h's Gated DeltaNet) for the chunk; adds into
 * s->x. The projections, the gates, the causal conv (its state and the
 * delta rule's in slot 0, updated in place), the delta rule over the
 * chunk's tokens in order, the gated norm and the output product. No
 * position: a decode graph replays it as it is.
 */
static int cu_ssm_block(struct engine *e, struct cu_state *s, int il, int32_t n,
                        char *err, size_t errlen)
{
	const struct model_config *c = &e->model->cfg;
	const struct model_ssm *m = &e->model->w.layers[il].ssm;
	const struct cu_layer *l = &s->layers[il];
	struct cuda_ctx *x = &s->ctx;
	const int32_t C = m->conv_dim, H = m->n_v_heads, S = m->head_dim;
	float *conv = s->rs[0] + l->rs_off;
	float *state = conv + (size_t)(m->d_conv - 1) * C;
	const void *xq; /* the norm's output as int8 activations, or NULL */
	/* decode: beta's and alpha's rows as one product, its row [b | a] */
	const bool ba = n == 1 && l->wba.d != NULL;
	float *g = ba ? s->ssm_b + H : s->ssm_g;

	/* the four projections read one input: quantized once, in one
	   mat-vec launch in decode (BENCHMARKS.md: launches are what a 27B
	   shape's step lost to its floor) */
	return cuda_op_rmsnorm_x8(x, s->x, l->attn_norm, c->n_embd, n,
	                          c->rms_eps, s->xb, &xq, err, errlen) ||
	               cuda_op_matmul_qkv(x, &l->wqkv, &l->wz,
	                                  ba ? &l->wba : &l->wbeta, NULL, NULL,
	                                  NULL, s->xb, xq, n, s->ssm_mix,
	                                  s->ssm_z, s->ssm_b, err, errlen) ||
	               (!ba && cuda_op_matmul_xq(x, &l->walpha, s->xb, xq, n,
	                                         s->ssm_g, err, errlen)) ||
	               cuda_op_gdn_gates(x, g, s->ssm_b, l->dt_bias, l->ssm_a,
	                                 n, H, err, errlen) ||
	               cuda_op_ssm_conv(x, s->ssm_mix, C, conv, l->conv, n, C,
	                                m->d_conv, s->ssm_c, err, errlen) ||
	               cuda_op_gdn(x, s->ssm_c, C, g, s->ssm_b, state, n,
	                           m->n_k_heads, H, S, c->rms_eps, s->ssm_o,
	                           err, errlen) ||
	               cuda_op_gdn_norm(x, s->ssm_o, s->ssm_z, l->ssm_norm, n,
	                                H, S, c->rms_eps, err, errlen) ||
	               cuda_op_matmul_add(x, &l->wout, s->ssm_o, NULL, n, s->x,
	                                  0, err, errlen)
	           ? -1
	           : 0;
}

/* Whether layer IL's decode step (N tokens) takes the shared expert's
 * gate logit from the router's product (cu_layer.router_sh). */
static bool cu_router_sh(const struct cu_state *s, int il, int32_t n)
{
	return n == 1 && s->layers[il].router_sh.d != NULL;
}

/*
 * A mixture's shared expert of layer IL beside its experts (model.h),
 * on the normed chunk s->xb, in two steps around the experts (XQ:
 * s->xb's int8 activations, valid until a product quantizes another
 * input, as the experts' down product does): its gated product into hb,
 * before the experts; after them, its down product into y, the gate's
 * logit (decode: the router's last row, already computed; else the fp32
 * mat-vec, as the CPU's dot) and y added into s->x under the gate.
 */
static int cu_shared_gated(struct cu_state *s, int il, int32_t n,
                           const void *xq, char *err, size_t errlen)
{
	const struct cu_layer *l = &s->layers[il];

	return cuda_op_matmul_gated(&s->ctx, MODEL_ACT_SILU, &l->sh_gate,
	                            &l->sh_up, s->xb, xq, n, s->hb, s->hb2, err,
	                            errlen);
}

static int cu_shared_add(struct engine *e, struct cu_state *s, int il,
                         int32_t n, char *err, size_t errlen)
{
	const struct model_config *c = &e->model->cfg;
	const struct cu_layer *l = &s->layers[il];
	struct cuda_ctx *x = &s->ctx;
	const bool folded = cu_router_sh(s, il, n);
	const float *g =
	    folded ? s->rl + e->model->w.layers[il].ffn.n_expert : s->sg;

	return cuda_op_matmul(x, &l->sh_down, s->hb, n, s->y, 0, err, errlen) ||
	               (!folded && cuda_op_matmul(x, &l->sh_inp, s->xb, n,
	                                          s->sg, 1, err, errlen)) ||
	               cuda_op_add_gated(x, s->x, s->y, g, c->n_embd, n, err,
	                                 errlen)
	           ? -1
	           : 0;
}

/* A trace keeping every row's choice (trace_rows, a test's): the chunk's
 * N rows of K ids each, copied to the host and recorded, a wait on the
 * stream a layer. Not in a decode graph's capture (a step of one token:
 * its choice is the last token's, trace_experts). */
static int cu_trace_rows(struct engine *e, struct cu_state *s, int il,
                         int32_t n, int32_t k, char *err, size_t errlen)
{
	struct trace *t = e->trace;
	int32_t *h;

	if (t == NULL || t->row_expert_id == NULL || t->pin_rows ||
	    s->ctx.d_pos != NULL)
		return 0;
	h = (int32_t *)malloc((size_t)n * (size_t)k * sizeof(int32_t));
	if (h == NULL) {
		snprintf(err, errlen, "out of memory for a trace's rows");
		return -1;
	}
	cudaError_t ce =
	    cudaMemcpyAsync(h, s->ids, (size_t)n * (size_t)k * sizeof(int32_t),
	                    cudaMemcpyDeviceToHost, s->ctx.stream);

	if (ce == cudaSuccess)
		ce = cudaStreamSynchronize(s->ctx.stream);
	if (ce == cudaSuccess)
		trace_row_experts(t, il, s->row0, n, h, k, k);
	free(h);
	CUDA_TRY(ce, err, errlen);
	return 0;
}

/*
 * A mixture's FFN of layer IL on the normed chunk s->xb (XQ: its int8
 * activations, or NULL), added into s->x (through its post-norm where it
 * has one): the router's logits (the fp32 mat-vec whatever the chunk,
 * as the CPU's exact dot: the choice follows them), the choice
 * (cuda_op_moe_route; the last token's also into mapped host memory for
 * the trace: always, as a decode graph captured before a trace was
 * attached must leave it too), the chosen experts' gated and down products
 * (mat-vecs that read only their rows) and the weighted sum, all on the
 * device. A chunk whose slots (tokens x chosen) exceed one launch's grid goes
 * in parts.
 */
static int cu_moe_block(struct engine *e, struct cu_state *s, int il, int32_t n,
                        const void *xq, const float *rin, bool dense, char *err,
                        size_t errlen)
{
	const struct model_config *c = &e->model->cfg;
	const struct model_ffn *f = &e->model->w.layers[il].ffn;
	const struct cu_layer *l = &s->layers[il];
	struct cuda_ctx *x = &s->ctx;
	const int32_t k = f->n_expert_used, kmax = c->max_expert_used;
	const int32_t part = 65535 / k;
	/* DENSE (cu_moe_dense): the sum into s->y, its norms the caller's */
	const bool to_y = dense || l->ffn_post_norm != NULL;

	/* (router_sh exists only for a router without a bias) */
	if (cuda_op_matvec_bias(
	        x, cu_router_sh(s, il, n) ? &l->router_sh : &l->router, rin, n,
	        l->router_b, s->rl, err, errlen) ||
	    cuda_op_moe_route(x, s->rl, n, f->n_expert, k, (int)f->gating,
	                      f->norm_w, f->w_scale, s->ids, s->wts,
	                      s->d_tids + (size_t)il * kmax,
	                      s->d_tw + (size_t)il * kmax, err, errlen) ||
	    cu_trace_rows(e, s, il, n, k, err, errlen))
		return -1;
	for (int32_t t0 = 0; t0 < n; t0 += part) {
		const int32_t nt = n - t0 < part ? n - t0 : part;
		const int32_t *ids = s->ids + (size_t)t0 * k;
		float *out = (to_y ? s->y : s->x) + (size_t)t0 * c->n_embd;
		/* several tokens: their slots grouped by expert */
		const int32_t *perm = nt > 1 ? s->perm : NULL;

		if ((perm != NULL &&
		     cuda_op_moe_sort(x, ids, nt * k, f->n_expert, s->perm, err,
		                      errlen)) ||
		    cuda_op_moe_gated(x, f->act, &l->gate, &l->up,
		                      s->xb + (size_t)t0 * c->n_embd,
		                      t0 == 0 && nt == n ? xq : NULL, nt, k,
		                      ids, perm, l->gate_b, l->up_b, s->eh,
		                      s->eh2, err, errlen) ||
		    /* the down products and their sum in one launch where
		       no per-expert scale comes between them */
		    (l->exp_scale == NULL
		         ? cuda_op_moe_down_sum(
		               x, &l->down, s->eh, nt, k, ids, perm, l->down_b,
		               s->wts + (size_t)t0 * k, s->eout, out, !to_y,
		               err, errlen)
		         : cuda_op_moe_down(x, &l->down, s->eh, nt * k, ids,
		                            perm, l->down_b, s->eout, err,
		                            errlen) ||
		               cuda_op_moe_scale(x, s->eout, l->exp_scale, ids,
		                                 nt * k, c->n_embd, err,
		                                 errlen) ||
		               cuda_op_moe_combine(
		                   x, s->eout, s->wts + (size_t)t0 * k, nt, k,
		                   c->n_embd, out, !to_y, err, errlen)))
			return -1;
	}
	if (!dense && l->ffn_post_norm != NULL)
		return cuda_op_rmsnorm_add(x, s->y, l->ffn_post_norm, c->n_embd,
		                           n, c->rms_eps, s->x, err, errlen);
	return 0;
}

/*
 * A mixture beside a dense MLP (gemma4, model.h) of layer IL on the
 * chunk, s->xb holding rmsnorm(x) * norm (XQ its int8 activations or
 * NULL), added into s->x through the FFN's post-norm: the dense branch
 * into s->yd, normed; the router's input rmsnorm(x) / sqrt(n_embd) *
 * router_scale into s->rin; the experts on rmsnorm(x) * exp_norm (into
 * s->xb, after the dense branch read it), their sum into s->y, normed
 * into s->rin (the routing has read it); the two added (backend_cpu.c
 * cpu_moe_dense's order).
 */
static int cu_moe_dense(struct engine *e, struct cu_state *s, int il, int32_t n,
                        const void *xq, float *oscale, char *err, size_t errlen)
{
	const struct model_config *c = &e->model->cfg;
	const struct model_ffn *f = &e->model->w.layers[il].ffn;
	const struct cu_layer *l = &s->layers[il];
	struct cuda_ctx *x = &s->ctx;
	const int32_t ne = c->n_embd;
	const float inv = 1.0f / sqrtf((float)ne), eps = c->rms_eps;
	const void *xq2; /* the experts' input as int8 activations, or NULL */

	if (cuda_op_matmul_gated(x, f->act, &l->sh_gate, &l->sh_up, s->xb, xq,
	                         n, s->hb, s->hb2, err, errlen) ||
	    cuda_op_matmul(x, &l->sh_down, s->hb, n, s->y, 0, err, errlen) ||
	    cuda_op_rmsnorm(x, s->y, l->sh_post_norm, ne, n, eps, s->yd, err,
	                    errlen) ||
	    cuda_op_rmsnorm_mul(x, s->x, l->router_scale, ne, n, eps, inv,
	                        s->rin, err, errlen) ||
	    cuda_op_rmsnorm_x8(x, s->x, l->exp_norm, ne, n, eps, s->xb, &xq2,
	                       err, errlen) ||
	    /* (a router whose mat-vec quantizes its input, s->rin, leaves
	       those quants where xq2 points: the experts then quantize
	       s->xb themselves) */
	    cu_moe_block(e, s, il, n,
	                 cuda_op_matvec_x8(x, &l->router, n) ? NULL : xq2,
	                 s->rin, true, err, errlen) ||
	    /* the experts' post-norm plus the dense branch's output */
	    cuda_op_rmsnorm_plus(x, s->y, l->exp_post_norm, ne, n, eps, s->yd,
	                         s->rin, err, errlen))
		return -1;
	if (l->ffn_post_norm != NULL) {
		const float sc = *oscale;

		*oscale = 0.0f;
		return cuda_op_rmsnorm_add_scale(x, s->rin, l->ffn_post_norm,
		                                 ne, n, eps, sc, s->x, err,
		                                 errlen);
	}
	return cuda_op_add(x, s->x, s->rin, (int64_t)n * ne, err, errlen);
}

/* Feed-forward block (a gated MLP) of layer il; adds into s->x. SNAP: the
 * new residual also written there by the down product's launch
 * (cuda_op_matmul_add_copy; the caller checked that it applies), or
 * NULL. OSCALE, XQ_OUT: as for cu_post_norm_add, where the block ends in
 * one (*XQ_OUT is NULL where no activations were made). */
static int cu_ffn_block(struct engine *e, struct cu_state *s, int il, int32_t n,
                        float *snap, float *oscale, const void **xq_out,
                        char *err, size_t errlen)
{
	const struct model_config *c = &e->model->cfg;
	const struct model_ffn *f = &e->model->w.layers[il].ffn;
	const struct cu_layer *l = &s->layers[il];
	struct cuda_ctx *x = &s->ctx;
	const void *xq; /* the norm's output as int8 activations, or NULL */

	if (cuda_op_rmsnorm_x8(x, s->x, l->ffn_norm, c->n_embd, n, c->rms_eps,
	                       s->xb, &xq, err, errlen))
		return -1;
	if (f->kind == MODEL_FFN_EXPERTS) { /* (cu_snap_ok: no SNAP then) */
		const bool sh = l->sh_inp.d != NULL;

		if (f->exp_norm != NULL)
			return cu_moe_dense(e, s, il, n, xq, oscale, err,
			                    errlen);
		return (sh && cu_shared_gated(s, il, n, xq, err, errlen)) ||
		               cu_moe_block(e, s, il, n, xq, s->xb, false, err,
		                            errlen) ||
		               (sh && cu_shared_add(e, s, il, n, err, errlen))
		           ? -1
		           : 0;
	}
	if (cuda_op_matmul_gated(x, f->act, &l->gate, &l->up, s->xb, xq, n,
	                         s->hb, s->hb2, err, errlen))
		return -1;
	if (l->ffn_post_norm != NULL) /* (cu_snap_ok: no SNAP then) */
		return cu_post_norm_add(e, s, &l->down, s->hb, NULL,
		                        l->ffn_post_norm, n, oscale, xq_out,
		                        err, errlen);
	if (snap != NULL)
		return cuda_op_matmul_add_copy(x, &l->down, s->hb, NULL, n,
		                               s->x, snap, err, errlen);
	return cuda_op_matmul_add(x, &l->down, s->hb, NULL, n, s->x, 0, err,
	                          errlen);
}

/* Layer IL's per-layer input step (the E models, model.h) after its FFN:
 * g = gelu_tanh(Wgate x) * the layer's slice of s->ple, x +=
 * rmsnorm(Wproj g) * post_norm (backend_cpu_ple.c's order). XQ: x's int8
 * activations as the FFN's last launch made them, or NULL; OSCALE as for
 * cu_post_norm_add. */
static int cu_ple_block(struct engine *e, struct cu_state *s, int il, int32_t n,
                        const void *xq, float *oscale, char *err, size_t errlen)
{
	const struct model_config *c = &e->model->cfg;
	const struct cu_layer *l = &s->layers[il];
	const int32_t P = c->ple_dim;
	const float *u = s->ple + (size_t)il * P;
	const int64_t ldu = (int64_t)P * c->n_layer;
	const void *gq = NULL; /* the gate's int8 activations, or NULL */

	return cuda_op_matmul_xq(&s->ctx, &l->ple_gate, s->x, xq, n, s->pg, err,
	                         errlen) ||
	               cuda_op_gate_act_rows_x8(&s->ctx, MODEL_ACT_GELU_TANH,
	                                        s->pg, u, P, n, ldu, &gq, err,
	                                        errlen) ||
	               cu_post_norm_add(e, s, &l->ple_proj, s->pg, gq,
	                                l->ple_post_norm, n, oscale, NULL, err,
	                                errlen)
	           ? -1
	           : 0;
}

/* The recipe of one layer (model.h) for a chunk of N tokens at POS0
 * (ignored in a captured step: cuda_ctx.d_pos): prefill and the decode
 * graphs run this one function. SNAP as for cu_ffn_block. */
static int cu_layer_forward(struct engine *e, struct cu_state *s, int il,
                            int32_t n, int32_t pos0, float *snap, char *err,
                            size_t errlen)
{
	const struct model_layer *ml = &e->model->w.layers[il];
	const bool rec = ml->attn.kind == MODEL_ATTN_RECURRENT;
	const bool ple = ml->ple.gate.data != NULL;
	/* the output scale (gemma4), offered to the launch of the layer's
	   last post-norm add (which sets it to 0 once taken) */
	float sc = ml->out_scale, none = 0.0f;
	/* the residual's int8 activations for the per-layer input's gate,
	   made by the FFN's last launch (NULL: the gate's mat-vec makes
	   them) */
	const void *xq = NULL;

	if ((rec ? cu_ssm_block(e, s, il, n, err, errlen)
	         : cu_attention_block(e, s, il, n, pos0, err, errlen)) ||
	    cu_ffn_block(e, s, il, n, snap, ple ? &none : &sc, ple ? &xq : NULL,
	                 err, errlen) ||
	    (ple && cu_ple_block(e, s, il, n, xq, &sc, err, errlen)))
		return -1;
	return sc != 0.0f ? cuda_op_scale(&s->ctx, s->x,
	                                  (int64_t)n * e->model->cfg.n_embd, sc,
	                                  err, errlen)
	                  : 0;
}

/* The residual stream of N tokens (device ids D_TOK) from the
 * embedding, times the model's scale where it has one. */
static int cu_embed(struct engine *e, struct cu_state *s, const int32_t *d_tok,
                    int32_t n, char *err, size_t errlen)
{
	const struct model_config *c = &e->model->cfg;

	if (cuda_op_get_rows(&s->ctx, &s->embd, d_tok, n,
	                     c->embd_scale != 0.0f ? c->embd_scale : 1.0f, s->x,
	                     err, errlen))
		return -1;
	if (c->ple_dim == 0)
		return 0;
	/* the per-layer inputs (model.h) of every layer from the scaled
	   embeddings: the projection, normed per layer, plus each token's
	   per-layer embedding row times sqrt(P) (backend_cpu_ple.c) */
	return cuda_op_matmul(&s->ctx, &s->ple_proj, s->x, n, s->ple, 0, err,
	                      errlen) ||
	               cuda_op_get_rows(&s->ctx, &s->ple_embd, d_tok, n,
	                                sqrtf((float)c->ple_dim), s->pe, err,
	                                errlen) ||
	               cuda_op_ple_inputs(&s->ctx, s->ple, s->pe,
	                                  s->ple_proj_norm, c->ple_dim,
	                                  (int64_t)n * c->n_layer, c->rms_eps,
	                                  1.0f / sqrtf((float)c->n_embd),
	                                  1.0f / sqrtf(2.0f), err, errlen)
	           ? -1
	           : 0;
}

/* The LM head: logits of the N_OUT residual rows at X into s->logits
 * (prefill's last rows and the decode graphs' one row). */
static int cu_lm_head(struct engine *e, struct cu_state *s, const float *x,
                      int32_t n_out, char *err, size_t errlen)
{
	const struct model_config *c = &e->model->cfg;

	if (cuda_op_rmsnorm(&s->ctx, x, s->output_norm, c->n_embd, n_out,
	                    c->rms_eps, s->xb, err, errlen) ||
	    cuda_op_matmul(&s->ctx, &s->output, s->xb, n_out, s->logits, 0, err,
	                   errlen) ||
	    (c->final_softcap != 0.0f &&
	     cuda_op_softcap(&s->ctx, s->logits, (int64_t)n_out * c->n_vocab,
	                     c->final_softcap, err, errlen)))
		return -1;
	return 0;
}

/* Whether E's trace wants whole residual vectors (verification), which
 * only a host copy per layer gives; a trace without them gets its
 * statistics from the device (cu_trace_stats). */
static bool cu_trace_captures(const struct engine *e)
{
	return e->trace != NULL && e->trace->n_embd > 0;
}

/* Per-layer statistics and vector of the last token's residual, when
 * capturing (the one host round trip per layer, only then). */
static int cu_trace_layer(struct engine *e, struct cu_state *s, int il,
                          int32_t n, char *err, size_t errlen)
{
	const int32_t ne = e->model->cfg.n_embd;
	float *h = (float *)malloc((size_t)ne * sizeof(float));

	if (h == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (cudaMemcpyAsync(h, s->x + (size_t)(n - 1) * ne,
	                    (size_t)ne * sizeof(float), cudaMemcpyDeviceToHost,
	                    s->ctx.stream) != cudaSuccess ||
	    cudaStreamSynchronize(s->ctx.stream) != cudaSuccess) {
		free(h);
		CUDA_TRY(cudaGetLastError(), err, errlen);
		snprintf(err, errlen, "trace copy failed");
		return -1;
	}
	trace_layer(e->trace, il, h, ne); /* stats, and the vector */
	free(h);
	return 0;
}

/* Layer IL's statistics of the residual row ROW into d_tstats (enqueued;
 * cu_trace_fill reads them once the stream is done). */
static int cu_trace_stats(struct engine *e, struct cu_state *s, int il,
                          int32_t row, char *err, size_t errlen)
{
	const int32_t ne = e->model->cfg.n_embd;

	return cuda_op_stats(&s->ctx, s->x + (size_t)row * ne, ne,
	                     s->d_tstats + 4 * il, err, errlen);
}

/* Layers whose statistics the trace takes (the model's, at most the
 * trace's). */
static int cu_trace_layers(const struct engine *e)
{
	return e->model->cfg.n_layer < e->trace->n_layer ? e->model->cfg.n_layer
	                                                 : e->trace->n_layer;
}

/* The last token's choice of experts in each mixture layer, as the
 * routing kernels left it in mapped host memory (the stream is done). */
static void cu_trace_experts(struct engine *e, struct cu_state *s)
{
	const struct model_config *c = &e->model->cfg;
	const int nl = cu_trace_layers(e);

	for (int il = 0; s->h_tids != NULL && il < nl; il++) {
		const struct model_ffn *f = &e->model->w.layers[il].ffn;
		const size_t o = (size_t)il * c->max_expert_used;

		if (f->kind == MODEL_FFN_EXPERTS)
			trace_experts(e->trace, il, s->h_tids + o, s->h_tw + o,
			              f->n_expert_used);
	}
}

/* Wait for the step (its statistics kernels wrote h_tstats) and fill the
 * trace. */
static int cu_trace_fill(struct engine *e, struct cu_state *s, char *err,
                         size_t errlen)
{
	const int nl = cu_trace_layers(e);

	CUDA_TRY(cudaStreamSynchronize(s->ctx.stream), err, errlen);
	for (int il = 0; il < nl; il++) {
		const float *v = s->h_tstats + 4 * il;
		struct trace_stats st = {v[0], v[1], v[2], v[3]};

		trace_layer_stats(e->trace, il, &st);
	}
	cu_trace_experts(e, s);
	return 0;
}

/* ops.trace_settle: the statistics a deferred step left on their way. */
static int cu_trace_settle(struct engine *e, char *err, size_t errlen)
{
	return cu_trace_fill(e, (struct cu_state *)e->impl, err, errlen);
}

/* One chunk of n <= n_batch tokens at pos0; N_OUT logits rows (the last
 * n_out tokens) to HOST_LOGITS. */
static int cu_forward_chunk(struct engine *e, struct cu_state *s,
                            const int32_t *tokens, int32_t n, int32_t pos0,
                            float *host_logits, int32_t n_out, char *err,
                            size_t errlen)
{
	const struct model_config *c = &e->model->cfg;
	struct cuda_ctx *x = &s->ctx;

	CUDA_TRY(cudaMemcpyAsync(s->tok, tokens, (size_t)n * sizeof(int32_t),
	                         cudaMemcpyHostToDevice, x->stream),
	         err, errlen);
	if (cu_embed(e, s, s->tok, n, err, errlen))
		return -1;
	for (int il = 0; il < c->n_layer; il++) {
		if (cu_layer_forward(e, s, il, n, pos0, NULL, err, errlen))
			return -1;
		if (e->trace != NULL && il < e->trace->n_layer &&
		    (cu_trace_captures(e)
		         ? cu_trace_layer(e, s, il, n, err, errlen)
		         : cu_trace_stats(e, s, il, n - 1, err, errlen)))
			return -1;
	}
	if (n_out > 0) {
		const float *last = s->x + (size_t)(n - n_out) * c->n_embd;
		size_t bytes = (size_t)n_out * c->n_vocab * sizeof(float);

		if (cu_lm_head(e, s, last, n_out, err, errlen))
			return -1;
		/* one row stays on the device for select; all rows of a
		   chunk (ENGINE_EVAL_ALL) come back, the buffer is reused */
		if (host_logits != NULL)
			CUDA_TRY(cudaMemcpyAsync(host_logits, s->logits, bytes,
			                         cudaMemcpyDeviceToHost,
			                         x->stream),
			         err, errlen);
	}
	if (e->trace != NULL && !cu_trace_captures(e))
		return cu_trace_fill(e, s, err, errlen); /* waits */
	CUDA_TRY(cudaStreamSynchronize(x->stream), err, errlen);
	if (e->trace != NULL)
		cu_trace_experts(e, s);
	return 0;
}

/* ------------------------------------------------------ decode graphs */

/*
 * A decode step (one token, its logits row left on the device for
 * select) is ~10 small kernels per layer; launched one by one, the CPU's
 * launch overhead and the gaps between kernels cost more than the weights
 * take to read on a small model. So the step is captured once into a CUDA
 * graph and replayed: the token and its position live in device memory
 * (s->d_step, cuda_ctx.d_pos), copied from pinned host memory (s->h_step)
 * by the graph's first node, so the graph never changes with them (a
 * copy of its own before each replay cost more, BENCHMARKS.md step 46). The
 * attention's launch shape depends on the context length, so graph b covers
 * positions below (b + 1) * CU_GRAPH_POS: at most n_ctx / CU_GRAPH_POS + 1
 * captures in a session. Every buffer a graph names is allocated at open,
 * except the device logits (cu_dev_logits drops the graphs when it reallocates
 * them) and the graphs' own attention scratch (allocated once, at the first
 * capture, for every bucket: cuda_op_attention_graph_reserve). A traced
 * step (the debug pane's per-layer statistics) has its own graph with
 * the statistics kernels in it, read from mapped host memory; a trace that
 * captures whole vectors (verification) needs a host copy per layer, so
 * those steps take the plain path.
 */
static void cu_graphs_drop(struct cu_state *s)
{
	for (int32_t b = 0; b < 2 * s->n_graphs; b++)
		if (s->graphs[b] != NULL) {
			cudaGraphExecDestroy(s->graphs[b]);
			s->graphs[b] = NULL;
		}
}

/* Whether every layer's down product can leave a copy of the residual
 * (cuda_op_matmul_add_copy) in a decode step. */
static bool cu_snap_ok(const struct engine *e, struct cu_state *s)
{
	for (int il = 0; il < e->model->cfg.n_layer; il++)
		if (s->layers[il].ffn_post_norm != NULL ||
		    s->layers[il].router.d != NULL ||
		    /* steps after the down product */
		    e->model->w.layers[il].ple.gate.data != NULL ||
		    e->model->w.layers[il].out_scale != 0.0f ||
		    !cuda_op_matmul_add_copy_ok(&s->ctx, &s->layers[il].down,
		                                s->hb, 1))
			return false;
	return true;
}

/*
 * Under capture: the statistics of the residual copies in s->d_snap on a
 * branch of the graph (s->side), so that they run beside the output's
 * norm and product instead of before them (a kernel in the step's chain
 * costs a boundary and its own latency, BENCHMARKS.md step 44). Its
 * launch is an ordinary one: it waits for the last down product to
 * complete. *FORKED is set once the branch exists: the caller then joins
 * it (cu_stats_join) whatever else fails, as a capture ends only with
 * every stream it forked joined back.
 */
static int cu_stats_aside(struct engine *e, struct cu_state *s, bool *forked,
                          char *err, size_t errlen)
{
	const struct model_config *c = &e->model->cfg;
	struct cuda_ctx side = s->ctx;

	side.stream = s->side;
	side.pdl = 0;
	CUDA_TRY(cudaEventRecord(s->side_fork, s->ctx.stream), err, errlen);
	CUDA_TRY(cudaStreamWaitEvent(s->side, s->side_fork, 0), err, errlen);
	*forked = true;
	return cuda_op_stats_rows(&side, s->d_snap, c->n_embd, c->n_layer,
	                          s->d_tstats, err, errlen);
}

/* The branch of cu_stats_aside joined back into the step's stream. */
static int cu_stats_join(struct cu_state *s, char *err, size_t errlen)
{
	CUDA_TRY(cudaEventRecord(s->side_join, s->side), err, errlen);
	CUDA_TRY(cudaStreamWaitEvent(s->ctx.stream, s->side_join, 0), err,
	         errlen);
	return 0;
}

/*
 * The kernels of one decode step, positions and token from s->d_step;
 * TRACED: with the statistics of each layer's output. Those come from
 * copies of the residual that the down products leave in s->d_snap, one
 * launch for all the layers' statistics at the end, on a branch of its
 * own (a launch a layer cost the debug pane's steps, BENCHMARKS.md), or, where
 * a down product cannot copy, a launch after each layer.
 */
static int cu_decode_kernels(struct engine *e, struct cu_state *s, bool traced,
                             char *err, size_t errlen)
{
	const struct model_config *c = &e->model->cfg;
	const bool snap = traced && cu_snap_ok(e, s);

	if (cu_embed(e, s, s->d_step, 1, err, errlen))
		return -1;
	for (int il = 0; il < c->n_layer; il++)
		if (cu_layer_forward(e, s, il, 1, 0,
		                     snap ? s->d_snap + (size_t)il * c->n_embd
		                          : NULL,
		                     err, errlen) ||
		    (traced && !snap &&
		     cu_trace_stats(e, s, il, 0, err, errlen)))
			return -1;
	bool forked = false;
	int rc = snap ? cu_stats_aside(e, s, &forked, err, errlen) : 0;

	if (rc == 0 && cu_lm_head(e, s, s->x, 1, err, errlen))
		rc = -1;
	if (forked) {
		char jerr[256];

		if (cu_stats_join(s, jerr, sizeof(jerr)) != 0 && rc == 0) {
			snprintf(err, errlen, "%s", jerr);
			rc = -1;
		}
	}
	return rc;
}

/* Capture graph B (B / 2: the positions, B % 2: traced). */
static int cu_graph_capture(struct engine *e, struct cu_state *s, int32_t b,
                            char *err, size_t errlen)
{
	const struct model_config *c = &e->model->cfg;
	struct cuda_ctx *x = &s->ctx;
	int32_t cap = (b / 2 + 1) * CU_GRAPH_POS;
	cudaGraph_t g = NULL;
	cudaError_t ce;
	int rc;

	if (cap > e->n_ctx)
		cap = e->n_ctx;
	/* every layer's shape; the scratch is set once, by the layer that
	   needs the most (Gemma 4's sliding and global layers differ) */
	int most = 0;
	size_t most_f = 0;

	for (int il = 0; il < c->n_layer; il++) {
		const struct model_attn *a = &e->model->w.layers[il].attn;
		const size_t f = cuda_op_attention_graph_floats(
		    x, a->n_head, a->n_head_kv, a->head_dim_k, e->n_ctx,
		    CU_GRAPH_POS);

		if (f > most_f) {
			most_f = f;
			most = il;
		}
	}
	for (int k = -1; k < c->n_layer; k++) {
		const struct model_attn *a =
		    &e->model->w.layers[k < 0 ? most : k].attn;

		if (cuda_op_attention_graph_reserve(x, a->n_head, a->n_head_kv,
		                                    a->head_dim_k, e->n_ctx,
		                                    CU_GRAPH_POS, err, errlen))
			return -1;
	}
	CUDA_TRY(
	    cudaStreamBeginCapture(x->stream, cudaStreamCaptureModeThreadLocal),
	    err, errlen);
	/* the first node: every kernel of the step comes after this copy by
	   an ordinary edge, so they may read the position before their PDL
	   wait (cuda_launch.cuh) */
	ce = cudaMemcpyAsync(s->d_step, s->h_step, 2 * sizeof(int32_t),
	                     cudaMemcpyHostToDevice, x->stream);
	rc = 0;
	if (ce != cudaSuccess) {
		snprintf(err, errlen, "decode graph: step copy: %s",
		         cudaGetErrorString(ce));
		rc = -1;
	}
	x->d_pos = s->d_step + 1;
	x->pos_cap = cap;
	if (rc == 0)
		rc = cu_decode_kernels(e, s, b % 2 != 0, err, errlen);
	x->d_pos = NULL;
	x->pos_cap = 0;
	ce = cudaStreamEndCapture(x->stream, &g);
	if (rc != 0) {
		if (g != NULL)
			cudaGraphDestroy(g);
		(void)cudaGetLastError();
		return -1;
	}
	CUDA_TRY(ce, err, errlen);
	ce = cudaGraphInstantiate(&s->graphs[b], g, 0);
	cudaGraphDestroy(g);
	if (ce != cudaSuccess) {
		s->graphs[b] = NULL;
		CUDA_TRY(ce, err, errlen);
	}
	return 0;
}

/*
 * Capture the first bucket's graphs, plain and traced, at load: a
 * capture loads the decode kernels' modules (lazily loaded, on first
 * use) and instantiates some 300 nodes on SmolLM2, milliseconds that
 * otherwise fell into the first reply's decode time. Not followed by
 * cudaGraphUpload: the graph uploaded second decoded slower for as long
 * as it was used (BENCHMARKS.md, "moved from code comments").
 */
static int cu_graphs_warm(struct engine *e, struct cu_state *s, char *err,
                          size_t errlen)
{
	if (!s->use_graphs)
		return 0;
	for (int32_t b = 0; b < 2; b++)
		if (s->graphs[b] == NULL &&
		    cu_graph_capture(e, s, b, err, errlen))
			return -1;
	CUDA_TRY(cudaStreamSynchronize(s->ctx.stream), err, errlen);
	return 0;
}

/* One token at position e->n_past through the graph of its bucket. */
static int cu_decode_graph(struct engine *e, struct cu_state *s, int32_t tok,
                           char *err, size_t errlen)
{
	const bool traced = e->trace != NULL;
	const int32_t b = e->n_past / CU_GRAPH_POS * 2 + (traced ? 1 : 0);

	if (s->graphs_win_lo != e->win_lo) {
		/* the graphs name the ring's base at their win_lo (the note):
		   made again */
		CUDA_TRY(cudaStreamSynchronize(s->ctx.stream), err, errlen);
		s->step_queued = false;
		cu_graphs_drop(s);
		s->graphs_win_lo = e->win_lo;
	}
	if (s->graphs[b] == NULL && cu_graph_capture(e, s, b, err, errlen))
		return -1;
	/* the previous replay reads h_step when the GPU reaches it: a select
	   in between waited for it (the usual order); else wait here */
	if (s->step_queued)
		CUDA_TRY(cudaStreamSynchronize(s->ctx.stream), err, errlen);
	s->h_step[0] = tok;
	s->h_step[1] = e->n_past;
	CUDA_TRY(cudaGraphLaunch(s->graphs[b], s->ctx.stream), err, errlen);
	s->step_queued = true;
	if (!traced)
		return 0;
	/* the debug pane's trace (no logits, no verifier holding the step):
	   the engine fills it after the select's own wait (engine.c
	   engine_trace_settle): one host synchronisation a token */
	if (e->trace->skip_logits && !e->trace->hold) {
		e->trace_deferred = 1;
		return 0;
	}
	return cu_trace_fill(e, s, err, errlen);
}

/* Grow e->logits to N rows. */
static int cu_host_logits(struct engine *e, struct cu_state *s, int32_t n,
                          char *err, size_t errlen)
{
	size_t nv = (size_t)e->model->cfg.n_vocab;
	float *p;

	if (n <= s->host_logits_cap)
		return 0;
	p = (float *)realloc(e->logits, (size_t)n * nv * sizeof(float));
	if (p == NULL) {
		snprintf(err, errlen, "out of memory for %d rows of logits", n);
		return -1;
	}
	e->logits = p;
	s->host_logits_cap = n;
	return 0;
}

/* Device logits for N rows (all rows of a chunk only on request). */
static int cu_dev_logits(struct engine *e, struct cu_state *s, int32_t n,
                         char *err, size_t errlen)
{
	size_t bytes = (size_t)n * e->model->cfg.n_vocab * sizeof(float);

	if (n <= s->logits_rows)
		return 0;
	CUDA_TRY(cudaStreamSynchronize(s->ctx.stream), err, errlen);
	cu_graphs_drop(s); /* they name the old buffer */
	cudaFree(s->logits);
	s->logits = NULL;
	s->logits_rows = 0;
	CUDA_TRY(cudaMalloc((void **)&s->logits, bytes), err, errlen);
	s->logits_rows = n;
	return 0;
}

static int cu_window_move(struct engine *e, struct cu_state *s, int32_t pos0,
                          int32_t m, char *err, size_t errlen);

/* engine_ops.eval: chunks of n_batch tokens through the layer stack. */
static int cu_eval(struct engine *e, const int32_t *tokens, int32_t n,
                   unsigned flags, char *err, size_t errlen)
{
	struct cu_state *s = (struct cu_state *)e->impl;
	bool all = (flags & ENGINE_EVAL_ALL) != 0;
	bool none = (flags & ENGINE_EVAL_NO_LOGITS) != 0;
	size_t nv = (size_t)e->model->cfg.n_vocab;

	e->n_logits = 0;
	if (cu_host_logits(e, s, all ? n : 1, err, errlen) ||
	    cu_dev_logits(e, s, all ? (n < s->n_batch ? n : s->n_batch) : 1,
	                  err, errlen))
		return -1;
	if (n == 1 && !all && !none && s->use_graphs && !cu_trace_captures(e)) {
		if (cu_window_move(e, s, e->n_past, 1, err, errlen) ||
		    cu_decode_graph(e, s, tokens[0], err, errlen))
			return -1;
		e->n_logits = 1;
		s->host_valid = false;
		return 0;
	}
	for (int32_t done = 0; done < n; done += s->n_batch) {
		int32_t m = n - done < s->n_batch ? n - done : s->n_batch;
		bool last = done + m == n;
		int32_t n_out = all ? m : (last && !none ? 1 : 0);
		float *dst = all ? e->logits + (size_t)done * nv : NULL;

		s->row0 = done;
		if (cu_window_move(e, s, e->n_past + done, m, err, errlen) ||
		    cu_forward_chunk(e, s, tokens + done, m, e->n_past + done,
		                     dst, n_out, err, errlen))
			return -1;
	}
	e->n_logits = all ? n : none ? 0 : 1;
	s->host_valid = all;
	return 0;
}

/* Select over the host copy of an ENGINE_EVAL_ALL eval's last row. */
static int cu_select_host(struct engine *e, const struct engine_select_req *q,
                          char *err, size_t errlen)
{
	int32_t nv = e->model->cfg.n_vocab;

	return engine_select_row(e->logits + (size_t)(e->n_logits - 1) * nv, nv,
	                         q, &e->sel, err, errlen);
}

/* engine_ops.logits: the full row read on request (ENGINE_EVAL_ALL rows
   came back during the eval). */
static int cu_logits_fetch(struct engine *e, char *err, size_t errlen)
{
	struct cu_state *s = (struct cu_state *)e->impl;
	size_t bytes = (size_t)e->model->cfg.n_vocab * sizeof(float);

	if (s->host_valid)
		return 0;
	CUDA_TRY(cudaMemcpyAsync(e->logits, s->logits, bytes,
	                         cudaMemcpyDeviceToHost, s->ctx.stream),
	         err, errlen);
	CUDA_TRY(cudaStreamSynchronize(s->ctx.stream), err, errlen);
	s->host_valid = true;
	return 0;
}

static const float *cu_logits(struct engine *e, char *err, size_t errlen)
{
	return cu_logits_fetch(e, err, errlen) == 0 ? e->logits : NULL;
}

/* engine_ops.select: on the device row, only the answer comes back. */
static int cu_select(struct engine *e, const struct engine_select_req *q,
                     char *err, size_t errlen)
{
	struct cu_state *s = (struct cu_state *)e->impl;
	const float *row = s->logits;

	if (s->host_valid) /* ENGINE_EVAL_ALL: the last chunk's last row */
		return cu_select_host(e, q, err, errlen);
	if (cuda_select_run(&s->sel, s->ctx.stream, s->ctx.pdl, row, q, &e->sel,
	                    err, errlen))
		return -1;
	s->step_queued = false; /* the select waited for the stream */
	return 0;
}

/* engine_ops.bandwidth: device memory, measured now. */
static int cu_bandwidth(struct engine *e, double *bytes_per_s, char *err,
                        size_t errlen)
{
	struct cu_state *s = (struct cu_state *)e->impl;

	CUDA_TRY(cudaStreamSynchronize(s->ctx.stream), err, errlen);
	return cuda_read_bandwidth(bytes_per_s, err, errlen);
}

/* ------------------------------------------------------------ KV state */

/* cu_kv_copy's conversion of a q8_0 cache's rows: STAGE's N positions of
 * NKV heads of HD ([kv_head][pos] rows of blocks) to or from BUF's floats
 * ([pos][kv_head][hd]): dequantized (exact), or quantized as the kernels
 * store them (quant_q8_0_row: the same bytes). */
static void cu_kv_q8_convert(unsigned char *stage, float *buf, size_t n,
                             size_t nkv, size_t hd, int to_host)
{
	const size_t rb = engine_kv_type_bytes(ENGINE_KV_Q8_0, hd);

	for (size_t p = 0; p < n; p++)
		for (size_t h = 0; h < nkv; h++)
			if (to_host)
				quant_dequant_row(
				    QTYPE_Q8_0, stage + (h * n + p) * rb,
				    buf + (p * nkv + h) * hd, (int64_t)hd);
			else
				quant_q8_0_row(buf + (p * nkv + h) * hd,
				               (int64_t)hd,
				               stage + (h * n + p) * rb);
}

/*
 * Copy N positions of one cache of layer IL between the device (CACHE:
 * the first one's row of head 0, [kv_head][ROWS][dim] fp16, or rows of
 * q8_0 blocks) and BUF ([pos][kv_head][dim] fp32). TO_HOST: device ->
 * BUF, else BUF -> device. STAGE: n_kv * n * dim halves.
 */
static int cu_kv_copy(struct engine *e, uint16_t *cache, int32_t rows, int il,
                      int32_t n, float *buf, uint16_t *stage, int to_host,
                      char *err, size_t errlen)
{
	const struct model_attn *a = &e->model->w.layers[il].attn;
	const size_t hd = (size_t)a->head_dim_k, nkv = (size_t)a->n_head_kv;
	const size_t rb = engine_kv_type_bytes(e->kv_type, hd);
	const size_t run = (size_t)n * rb, pitch = (size_t)rows * rb;
	const int q8 = e->kv_type == ENGINE_KV_Q8_0;

	if (q8 && !to_host)
		cu_kv_q8_convert((unsigned char *)stage, buf, (size_t)n, nkv,
		                 hd, 0);
	if (!q8 && !to_host)
		for (size_t p = 0; p < (size_t)n; p++)
			for (size_t h = 0; h < nkv; h++)
				for (size_t d = 0; d < hd; d++)
					stage[(h * n + p) * hd + d] =
					    f32_to_f16(
					        buf[(p * nkv + h) * hd + d]);
	/* one contiguous run of n positions per KV head: a 2-D copy */
	CUDA_TRY(to_host ? cudaMemcpy2D(stage, run, cache, pitch, run, nkv,
	                                cudaMemcpyDeviceToHost)
	                 : cudaMemcpy2D(cache, pitch, stage, run, run, nkv,
	                                cudaMemcpyHostToDevice),
	         err, errlen);
	if (q8 && to_host)
		cu_kv_q8_convert((unsigned char *)stage, buf, (size_t)n, nkv,
		                 hd, 1);
	if (!q8 && to_host)
		for (size_t p = 0; p < (size_t)n; p++)
			for (size_t h = 0; h < nkv; h++)
				for (size_t d = 0; d < hd; d++)
					buf[(p * nkv + h) * hd + d] =
					    f16_to_f32(
					        stage[(h * n + p) * hd + d]);
	return 0;
}

/* Save (TO_HOST) or load the positions of every layer, K then V, in the
 * engine's layout (engine.h invariant 5: a sliding-window layer's from
 * e->win_lo on, every other layer's from 0 to N). SKIP: positions of a
 * window layer's data at BUF that are not kept (a load of more than its
 * rows hold: the first ones). */
static int cu_kv_move(struct engine *e, int32_t n, float *buf, int32_t skip,
                      int to_host, char *err, size_t errlen)
{
	struct cu_state *s = (struct cu_state *)e->impl;
	const struct model_config *c = &e->model->cfg;
	const size_t most = (size_t)n * c->max_kv_dim_k;
	uint16_t *stage;
	int rc = 0;

	if (n == 0)
		return 0;
	stage = (uint16_t *)malloc(most * sizeof(uint16_t));
	if (stage == NULL) {
		snprintf(err, errlen, "out of memory for %zu bytes of staging",
		         most * sizeof(uint16_t));
		return -1;
	}
	if (cudaStreamSynchronize(s->ctx.stream) != cudaSuccess) {
		free(stage);
		CUDA_TRY(cudaGetLastError(), err, errlen);
		snprintf(err, errlen, "waiting for the stream failed");
		return -1;
	}
	for (int il = 0; rc == 0 && il < c->n_layer; il++) {
		const struct model_cache_desc d =
		    model_layer_cache(e->model, il);
		const bool w = d.kind == MODEL_CACHE_WINDOW;
		const int32_t p0 = w ? e->win_lo : 0, cnt = n - p0;
		const struct cu_kv_view v = cu_kv_view(e, s, il);
		/* the row of position p0 (a ring: the margin's end) and a
		   head's row in halves */
		const size_t r0 = (size_t)(p0 - v.p_lo + v.r_lo);
		const size_t hr = cu_kv_row_bytes(e, il) / sizeof(uint16_t);
		float *bk, *bv;

		/* a layer of shared KV has no cache of its own (nor bytes) */
		if (d.kind == MODEL_CACHE_SHARED)
			continue;
		bk = buf + (w ? (size_t)skip * d.k_dim : 0);
		bv = bk + (size_t)cnt * d.k_dim +
		     (w ? (size_t)skip * d.v_dim : 0);
		if (cnt > 0)
			rc = cu_kv_copy(e, s->layers[il].kc + r0 * hr, v.rows,
			                il, cnt, bk, stage, to_host, err,
			                errlen) ||
			     cu_kv_copy(e, s->layers[il].vc + r0 * hr, v.rows,
			                il, cnt, bv, stage, to_host, err,
			                errlen);
		buf = bv + (size_t)cnt * d.v_dim;
	}
	free(stage);
	return rc ? -1 : 0;
}

static int cu_kv_save(struct engine *e, int32_t n, void *buf, char *err,
                      size_t errlen)
{
	return cu_kv_move(e, n, (float *)buf, 0, 1, err, errlen);
}

/* Inverse of cu_kv_save; of a window layer's positions [e->win_lo, n)
 * more than its ring holds, the last ones are kept (win_lo moves up). */
static int cu_kv_load(struct engine *e, int32_t n, const void *buf, char *err,
                      size_t errlen)
{
	struct cu_state *s = (struct cu_state *)e->impl;
	int32_t skip = 0;

	if (s->win != NULL && n - e->win_lo > e->win_cap) {
		skip = n - e->win_lo - e->win_cap;
		e->win_lo += skip;
	}
	/* cu_kv_copy only reads BUF when loading */
	return cu_kv_move(e, n, (float *)(uintptr_t)buf, skip, 0, err, errlen);
}

/* engine_ops.kv_shift (engine.h invariant 6): every layer with a cache of
 * its own, on the stream (cuda_kvshift.cu); a shared layer reads its
 * source's. A launch that fails leaves the cache half moved: -2. */
static int cu_kv_shift(struct engine *e, int32_t p0, int32_t d, char *err,
                       size_t errlen)
{
	struct cu_state *s = (struct cu_state *)e->impl;
	const int32_t n = e->n_past - d - p0;

	if (e->kv_type != ENGINE_KV_F16 &&
	    e->kv_type != ENGINE_KV_Q8_0) { /* (engine.c checks it too) */
		snprintf(err, errlen,
		         "the cuda backend shifts an f16 or q8_0 KV cache, "
		         "not %s",
		         engine_kv_type_name(e->kv_type));
		return -1;
	}
	for (int il = 0; il < e->model->cfg.n_layer; il++) {
		const struct model_attn *a = &e->model->w.layers[il].attn;
		const struct model_rope *r = model_layer_rope(e->model, il);
		const enum model_cache_kind k =
		    model_layer_cache(e->model, il).kind;
		const bool ring = s->win != NULL && s->win[il];
		/* a ring whose rows start past 0 holds kept positions only
		   (engine.c checks win_lo >= p0 + d): its keys turn where they
		   are and engine.c moves win_lo down by d; else the rows of
		   [p0 + d, n_past) move to p0's (a ring's: after its margin) */
		const bool turn = ring && e->win_lo > 0;
		const int32_t r0 =
		    turn ? CU_WIN_MARGIN : (ring ? CU_WIN_MARGIN : 0) + p0;

		if (k != MODEL_CACHE_FULL && k != MODEL_CACHE_WINDOW)
			continue;
		if (cuda_op_kv_shift(
		        &s->ctx, s->layers[il].kc, s->layers[il].vc,
		        a->n_head_kv, cu_kv_rows(e, s, il), a->head_dim_k,
		        a->head_dim_v, r->n_rot, r->style == MODEL_ROPE_NEOX,
		        s->inv_freq[a->rope], r0, d, turn ? 0 : d,
		        turn ? e->n_past - e->win_lo : n, err, errlen) != 0)
			return -2;
	}
	return 0;
}

/* Before a chunk of M tokens at POS0: where the window layers' rings would
 * not hold it, the positions from the slack before the chunk's first
 * window on ([POS0 - win_need - slack, POS0)) move down to the margin's
 * end and win_lo up to the first of them (the note; backend_cpu.c's
 * cpu_window_move, the same rule). The rows move on the stream in 2-D
 * copies (a run a KV head) of at most the distance moved, in ascending
 * order: no copy reads a row an earlier one wrote, nor overlaps itself. */
static int cu_window_move(struct engine *e, struct cu_state *s, int32_t pos0,
                          int32_t m, char *err, size_t errlen)
{
	const int32_t back = e->win_need + s->win_slack;
	const int32_t lo = pos0 > back ? pos0 - back : 0;

	if (s->win == NULL || pos0 + m - e->win_lo <= e->win_cap ||
	    lo <= e->win_lo)
		return 0;
	const int32_t dist = lo - e->win_lo, keep = pos0 - lo;

	for (int il = 0; il < e->model->cfg.n_layer; il++) {
		const struct model_attn *a = &e->model->w.layers[il].attn;
		const size_t rb = cu_kv_row_bytes(e, il);
		const size_t pitch = (size_t)cu_kv_rows(e, s, il) * rb;

		if (!s->win[il])
			continue;
		for (int kv = 0; kv < 2; kv++) {
			unsigned char *r0 = cu_ring_start(e, s, il, kv);

			for (int32_t done = 0; done < keep; done += dist) {
				const int32_t piece =
				    keep - done < dist ? keep - done : dist;

				CUDA_TRY(cudaMemcpy2DAsync(
				             r0 + (size_t)done * rb, pitch,
				             r0 + (size_t)(dist + done) * rb,
				             pitch, (size_t)piece * rb,
				             (size_t)a->n_head_kv,
				             cudaMemcpyDeviceToDevice,
				             s->ctx.stream),
				         err, errlen);
			}
		}
	}
	e->win_lo = lo;
	return 0;
}

/* engine_ops.ws_io: the window layers' rows of the positions [POS -
 * win_need, POS) (from 0) to window snapshot slot SLOT, pinned host
 * memory allocated at its first use (each layer's K then V, [kv_head]
 * [win_need] rows), or back to the rows after the margin (LOAD: engine.c
 * then sets win_lo to the first of them). */
static int cu_ws_io(struct engine *e, int slot, int32_t pos, bool load,
                    char *err, size_t errlen)
{
	struct cu_state *s = (struct cu_state *)e->impl;
	const int32_t lo = pos > e->win_need ? pos - e->win_need : 0;
	const int32_t cnt = pos - lo;
	unsigned char *p;

	if (s->win == NULL || slot < 1 || slot > ENGINE_RS_SNAPSHOTS) {
		snprintf(err, errlen, "no window snapshot slot %d", slot);
		return -1;
	}
	if (s->ws[slot] == NULL) {
		size_t n = 0;

		for (int il = 0; il < e->model->cfg.n_layer; il++)
			if (s->win[il])
				n += 2 * (size_t)e->win_need *
				     (size_t)e->model->w.layers[il]
				         .attn.n_head_kv *
				     cu_kv_row_bytes(e, il);
		CUDA_TRY(cudaMallocHost((void **)&s->ws[slot], n ? n : 1), err,
		         errlen);
	}
	p = s->ws[slot];
	for (int il = 0; il < e->model->cfg.n_layer; il++) {
		const struct model_attn *a = &e->model->w.layers[il].attn;
		const size_t rb = cu_kv_row_bytes(e, il);
		const size_t pitch = (size_t)cu_kv_rows(e, s, il) * rb;
		const size_t hp = (size_t)e->win_need * rb;
		/* (a load puts position lo at the margin's end) */
		const size_t off = load ? 0 : (size_t)(lo - e->win_lo);

		if (!s->win[il])
			continue;
		for (int kv = 0; kv < 2; kv++) {
			unsigned char *r =
			    cu_ring_start(e, s, il, kv) + off * rb;

			if (cnt > 0)
				CUDA_TRY(
				    load
				        ? cudaMemcpy2DAsync(
				              r, pitch, p, hp, (size_t)cnt * rb,
				              (size_t)a->n_head_kv,
				              cudaMemcpyHostToDevice,
				              s->ctx.stream)
				        : cudaMemcpy2DAsync(
				              p, hp, r, pitch, (size_t)cnt * rb,
				              (size_t)a->n_head_kv,
				              cudaMemcpyDeviceToHost,
				              s->ctx.stream),
				    err, errlen);
			p += (size_t)a->n_head_kv * hp;
		}
	}
	CUDA_TRY(cudaStreamSynchronize(s->ctx.stream), err, errlen);
	return 0;
}

/* ------------------------------------------------------- open / close */

/* Halves of a q8_0 cache's fp16 scratch (cuda_ctx.d_kv16): K and V of the
 * widest layer at every position; 0 for an fp16 cache. */
static size_t cu_kv16_halves(const struct engine *e)
{
	size_t most = 0;

	if (e->kv_type != ENGINE_KV_Q8_0)
		return 0;
	for (int il = 0; il < e->model->cfg.n_layer; il++) {
		const struct model_cache_desc d =
		    model_layer_cache(e->model, il);

		most = (size_t)d.k_dim > most ? (size_t)d.k_dim : most;
		most = (size_t)d.v_dim > most ? (size_t)d.v_dim : most;
	}
	return 2 * most * (size_t)e->n_ctx;
}

/* engine_ops.close: free everything open allocated. */
static void cu_close(struct engine *e)
{
	struct cu_state *s = (struct cu_state *)e->impl;

	if (s != NULL) {
		if (s->ctx_ok) {
			cudaStreamSynchronize(s->ctx.stream);
			cuda_ctx_free(&s->ctx);
		}
		if (s->sel_ok)
			cuda_select_free(&s->sel);
		if (s->graphs != NULL) {
			cu_graphs_drop(s);
			free(s->graphs);
		}
		for (int i = 0; i <= ENGINE_RS_SNAPSHOTS; i++)
			if (s->ws[i] != NULL)
				cudaFreeHost(s->ws[i]);
		free(s->win);
		cudaFreeHost(s->h_tstats);
		cudaFreeHost(s->h_step);
		cudaFreeHost(s->h_tids);
		cudaFreeHost(s->h_tw);
		if (s->side_fork != NULL)
			cudaEventDestroy(s->side_fork);
		if (s->side_join != NULL)
			cudaEventDestroy(s->side_join);
		if (s->side != NULL)
			cudaStreamDestroy(s->side);
		void *bufs[] = {s->arena,   s->tok,    s->x,      s->xb,
		                s->q,       s->k,      s->v,      s->o,
		                s->y,       s->hb,     s->hb2,    s->logits,
		                s->kv,      s->d_step, s->d_snap, s->kv16,
		                s->rl,      s->ids,    s->wts,    s->eh,
		                s->eh2,     s->eout,   s->perm,   s->qg,
		                s->ssm_mix, s->ssm_c,  s->ssm_z,  s->ssm_o,
		                s->ssm_g,   s->ssm_b,  s->sg,     s->yd,
		                s->rin,     s->ple,    s->pe,     s->pg};
		for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
			cudaFree(bufs[i]);
		for (int i = 0; i <= ENGINE_RS_SNAPSHOTS; i++)
			cudaFree(s->rs[i]);
		for (int r = 0; r < MODEL_MAX_ROPES; r++)
			cudaFree(s->rope_cs[r]);
		free(s->layers);
		free(s);
	}
	free(e->logits);
	e->logits = NULL;
	e->impl = NULL;
}

/* Each layer's KV cache in s->kv (model_layer_cache's sizes): all the
 * keys, then all the values, so a model whose layers share one shape has
 * the layout of one [layer][kv_head][pos][dim] cache, as before per-layer
 * caches. */
/* Which sliding-window layers keep their window only (the note), and
 * e->win_cap: backend_cpu.c's rule (the window, a chunk and twice the
 * slack), where that and the margin are fewer rows than n_ctx and P does
 * not ask for every position. 0, or -1 out of memory. */
static int cu_window_plan(struct engine *e, struct cu_state *s,
                          const struct engine_params *p)
{
	const int32_t nl = e->model->cfg.n_layer;
	const int32_t slack =
	    p->window_slack > 0 ? p->window_slack : ENGINE_WINDOW_SLACK;
	const int64_t cap =
	    (int64_t)e->win_need + 1 + s->n_batch + 2 * (int64_t)slack;
	bool any = false;

	for (int il = 0; il < nl; il++) {
		const struct model_cache_desc d =
		    model_layer_cache(e->model, il);
		const struct model_attn *a = &e->model->w.layers[il].attn;

		any = any || d.kind == MODEL_CACHE_WINDOW;
		/* a layer reading a sliding layer's cache must read no
		   further back than its window (Gemma 4's do: same kind) */
		if (d.kind == MODEL_CACHE_SHARED &&
		    model_layer_cache(e->model, d.src).kind ==
		        MODEL_CACHE_WINDOW &&
		    (a->kind != MODEL_ATTN_SLIDING ||
		     a->window > model_layer_cache(e->model, d.src).window))
			return 0;
	}
	if (!any || p->window_full || cap + CU_WIN_MARGIN >= e->n_ctx)
		return 0;
	s->win = (bool *)calloc((size_t)nl, sizeof(bool));
	if (s->win == NULL)
		return -1;
	e->win_cap = (int32_t)cap;
	s->win_slack = slack;
	for (int il = 0; il < nl; il++)
		s->win[il] =
		    model_layer_cache(e->model, il).kind == MODEL_CACHE_WINDOW;
	return 0;
}

/* Bytes of the KV cache: every layer's rows of K and V (cu_kv_place). */
static size_t cu_kv_bytes(const struct engine *e, const struct cu_state *s)
{
	size_t n = 0;

	for (int il = 0; il < e->model->cfg.n_layer; il++) {
		const struct model_cache_desc d =
		    model_layer_cache(e->model, il);

		n += engine_kv_type_bytes(
		         e->kv_type, (size_t)cu_kv_rows(e, s, il) * d.k_dim) +
		     engine_kv_type_bytes(
		         e->kv_type, (size_t)cu_kv_rows(e, s, il) * d.v_dim);
	}
	return n;
}

static void cu_kv_place(const struct engine *e, struct cu_state *s)
{
	const int32_t nl = e->model->cfg.n_layer;
	uint16_t *p = s->kv;

	/* a layer of shared KV (gemma4) names its source's, an earlier
	   layer's */
	for (int il = 0; il < nl; il++) {
		const struct model_cache_desc d =
		    model_layer_cache(e->model, il);

		s->layers[il].kc =
		    d.kind == MODEL_CACHE_SHARED ? s->layers[d.src].kc : p;
		p += engine_kv_type_bytes(
		         e->kv_type, (size_t)cu_kv_rows(e, s, il) * d.k_dim) /
		     sizeof(uint16_t);
	}
	for (int il = 0; il < nl; il++) {
		const struct model_cache_desc d =
		    model_layer_cache(e->model, il);

		s->layers[il].vc =
		    d.kind == MODEL_CACHE_SHARED ? s->layers[d.src].vc : p;
		p += engine_kv_type_bytes(
		         e->kv_type, (size_t)cu_kv_rows(e, s, il) * d.v_dim) /
		     sizeof(uint16_t);
	}
}

/* The first allocation of cu_open that failed: its CUDA error and what
 * it was for, so the message says what the driver said (not always "out
 * of memory": a sticky error from an earlier fault reads the same). */
struct cu_alloc_fail {
	cudaError_t ce;   /* cudaSuccess while none failed */
	const char *what; /* static */
	size_t bytes;
};

/* Note CE (of WHAT, N bytes) in *AF if it is the first failure. */
static void cu_alloc_note(struct cu_alloc_fail *af, cudaError_t ce,
                          const char *what, size_t n)
{
	if (ce == cudaSuccess || af->ce != cudaSuccess)
		return;
	(void)cudaGetLastError(); /* not sticky: clear it */
	af->ce = ce;
	af->what = what;
	af->bytes = n;
}

/* cudaMalloc of N bytes into *P (NULL on failure, noted in *AF). */
static void cu_alloc(void **p, size_t n, const char *what,
                     struct cu_alloc_fail *af)
{
	cudaError_t ce = cudaMalloc(p, n ? n : 1);

	if (ce != cudaSuccess)
		*p = NULL;
	cu_alloc_note(af, ce, what, n);
}

#define GIB (1024.0 * 1024.0 * 1024.0)

/* Bytes of the recurrent layers' buffers for NB tokens a chunk and one
 * state slot (0: none), each layer's offset in a slot into s->layers
 * (when allocated). */
static size_t cu_ssm_bytes(const struct engine *e, struct cu_state *s,
                           size_t nb)
{
	const struct model_config *c = &e->model->cfg;
	size_t slot = 0;

	if (c->n_recurrent == 0)
		return 0;
	for (int il = 0; il < c->n_layer; il++) {
		struct model_cache_desc d = model_layer_cache(e->model, il);

		if (d.kind != MODEL_CACHE_RECURRENT)
			continue;
		if (s->layers != NULL)
			s->layers[il].rs_off = slot;
		slot += (size_t)(d.conv_floats + d.state_floats);
	}
	s->rs_floats = slot;
	return (nb * (2 * (size_t)c->max_conv_dim + 2 * (size_t)c->max_ssm_v +
	              3 * (size_t)c->max_ssm_heads) +
	        slot) *
	       sizeof(float);
}

/* The recurrent layers' buffers and state slot 0 (zeros: an empty
 * sequence). */
static void cu_ssm_alloc(const struct model_config *c, struct cu_state *s,
                         size_t nb, struct cu_alloc_fail *af)
{
	cu_alloc((void **)&s->ssm_mix, nb * c->max_conv_dim * sizeof(float),
	         "recurrent activations", af);
	cu_alloc((void **)&s->ssm_c, nb * c->max_conv_dim * sizeof(float),
	         "recurrent activations", af);
	cu_alloc((void **)&s->ssm_z, nb * c->max_ssm_v * sizeof(float),
	         "recurrent activations", af);
	cu_alloc((void **)&s->ssm_o, nb * c->max_ssm_v * sizeof(float),
	         "recurrent activations", af);
	cu_alloc((void **)&s->ssm_g, nb * c->max_ssm_heads * sizeof(float),
	         "recurrent activations", af);
	/* (decode's [b | a] row: two heads' worth, cu_layer.wba) */
	cu_alloc((void **)&s->ssm_b, 2 * nb * c->max_ssm_heads * sizeof(float),
	         "recurrent activations", af);
	cu_alloc((void **)&s->rs[0], s->rs_floats * sizeof(float),
	         "the recurrent state", af);
	if (s->rs[0] != NULL)
		cu_alloc_note(
		    af, cudaMemset(s->rs[0], 0, s->rs_floats * sizeof(float)),
		    "the recurrent state", 0);
}

/* Slot I of the recurrent state, allocated on first use; NULL with a
 * message when the GPU has no room. */
static float *cu_rs_slot(struct cu_state *s, int i, char *err, size_t errlen)
{
	if (s->rs[i] == NULL &&
	    cudaMalloc((void **)&s->rs[i], s->rs_floats * sizeof(float)) !=
	        cudaSuccess) {
		(void)cudaGetLastError();
		s->rs[i] = NULL;
		snprintf(err, errlen,
		         "no GPU memory for a snapshot of the recurrent state "
		         "(%.1f MiB)",
		         (double)s->rs_floats * sizeof(float) / 1048576.0);
	}
	return s->rs[i];
}

/* engine_ops.rs_copy: on the stream, after the steps before it. */
static int cu_rs_copy(struct engine *e, int dst, int src, char *err,
                      size_t errlen)
{
	struct cu_state *s = (struct cu_state *)e->impl;
	const size_t bytes = s->rs_floats * sizeof(float);
	float *d = cu_rs_slot(s, dst, err, errlen);
	const float *from =
	    src == ENGINE_RS_ZERO ? NULL : cu_rs_slot(s, src, err, errlen);

	if (d == NULL || (src != ENGINE_RS_ZERO && from == NULL))
		return -1;
	if (from == NULL)
		CUDA_TRY(cudaMemsetAsync(d, 0, bytes, s->ctx.stream), err,
		         errlen);
	else
		CUDA_TRY(cudaMemcpyAsync(d, from, bytes,
		                         cudaMemcpyDeviceToDevice,
		                         s->ctx.stream),
		         err, errlen);
	return 0;
}

/* engine_ops.rs_io: slot SLOT to or from host memory (the layouts are
 * the same: fp32, engine_backend.h). Waits. */
static int cu_rs_io(struct engine *e, int slot, void *buf, bool load, char *err,
                    size_t errlen)
{
	struct cu_state *s = (struct cu_state *)e->impl;
	const size_t bytes = s->rs_floats * sizeof(float);
	float *d = cu_rs_slot(s, slot, err, errlen);

	if (d == NULL)
		return -1;
	CUDA_TRY(cudaStreamSynchronize(s->ctx.stream), err, errlen);
	CUDA_TRY(load ? cudaMemcpy(d, buf, bytes, cudaMemcpyHostToDevice)
	              : cudaMemcpy(buf, d, bytes, cudaMemcpyDeviceToHost),
	         err, errlen);
	return 0;
}

/* engine_ops.open: check the memory, upload the weights, allocate. */
/* Bytes of a mixture's buffers for NB tokens a chunk (0: dense). */
static size_t cu_moe_bytes(const struct model_config *c, size_t nb)
{
	const size_t slots = nb * (size_t)c->max_expert_used;

	if (c->max_expert == 0)
		return 0;
	return (nb * (size_t)c->max_expert + 1) * sizeof(float) +
	       slots * (2 * sizeof(int32_t) + sizeof(float)) +
	       slots * (2 * (size_t)c->max_ff + (size_t)c->n_embd) *
	           sizeof(float);
}

/* A mixture's buffers (struct cu_state) for NB tokens a chunk. */
static void cu_moe_alloc(const struct model_config *c, struct cu_state *s,
                         size_t nb, struct cu_alloc_fail *af)
{
	const size_t slots = nb * (size_t)c->max_expert_used;
	const size_t tk = (size_t)c->n_layer * (size_t)c->max_expert_used;

	/* (+ 1: decode's router_sh row) */
	cu_alloc((void **)&s->rl, (nb * c->max_expert + 1) * sizeof(float),
	         "router logits", af);
	cu_alloc((void **)&s->ids, slots * sizeof(int32_t), "expert choices",
	         af);
	cu_alloc((void **)&s->perm, slots * sizeof(int32_t), "expert order",
	         af);
	cu_alloc((void **)&s->wts, slots * sizeof(float), "expert weights", af);
	cu_alloc((void **)&s->eh, slots * c->max_ff * sizeof(float),
	         "expert activations", af);
	cu_alloc((void **)&s->eh2, slots * c->max_ff * sizeof(float),
	         "expert activations", af);
	cu_alloc((void **)&s->eout, slots * c->n_embd * sizeof(float),
	         "expert outputs", af);
	cu_alloc_note(af,
	              cudaHostAlloc((void **)&s->h_tids, tk * sizeof(int32_t),
	                            cudaHostAllocMapped),
	              "mapped host memory", tk * sizeof(int32_t));
	cu_alloc_note(af,
	              cudaHostAlloc((void **)&s->h_tw, tk * sizeof(float),
	                            cudaHostAllocMapped),
	              "mapped host memory", tk * sizeof(float));
	if (af->ce == cudaSuccess)
		cu_alloc_note(
		    af,
		    cudaHostGetDevicePointer((void **)&s->d_tids, s->h_tids, 0),
		    "mapped host memory", 0);
	if (af->ce == cudaSuccess)
		cu_alloc_note(
		    af, cudaHostGetDevicePointer((void **)&s->d_tw, s->h_tw, 0),
		    "mapped host memory", 0);
}

static int cu_open(struct engine *e, const struct engine_params *p, char *err,
                   size_t errlen)
{
	const struct model *m = e->model;
	const struct model_config *c = &m->cfg;
	struct cu_state *s;
	struct cuda_knobs knobs; /* the PARLEY_CUDA_* variables, read now:
	                            tests change them between engines */
	int ndev = 0;
	struct cu_alloc_fail af = {cudaSuccess, NULL, 0};
	size_t nb, nctx = (size_t)e->n_ctx, kv, act, w16, x16, need, mfree = 0,
	           mtotal = 0, max_in, arena;

	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
		(void)cudaGetLastError();
		snprintf(err, errlen, "no CUDA device");
		return -1;
	}
	for (int il = 0; il < c->n_layer; il++) {
		const struct model_attn *a = &m->w.layers[il].attn;

		if (a->head_dim_v != a->head_dim_k) {
			snprintf(err, errlen,
			         "layer %d: key and value head sizes differ "
			         "(%d, %d): the CUDA engine needs them equal",
			         il, a->head_dim_k, a->head_dim_v);
			return -1;
		}
		if (a->head_dim_k > CUDA_ATTN_MAX_HEAD_DIM) {
			snprintf(err, errlen,
			         "layer %d: head_dim %d: the CUDA engine "
			         "handles up to %d",
			         il, a->head_dim_k, CUDA_ATTN_MAX_HEAD_DIM);
			return -1;
		}
	}
	CUDA_TRY(cudaSetDevice(0), err, errlen);
	{
		cudaDeviceProp prop;

		CUDA_TRY(cudaGetDeviceProperties(&prop, 0), err, errlen);
		snprintf(e->device, sizeof(e->device), "%s", prop.name);
	}
	s = (struct cu_state *)calloc(1, sizeof(*s));
	if (s == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	e->impl = s;
	e->n_threads = 1;
	s->n_batch = p->n_batch > 0 ? p->n_batch : 512;
	if (s->n_batch > 4096)
		s->n_batch = 4096;
	nb = (size_t)s->n_batch;
	max_in = (size_t)c->n_embd;
	if ((size_t)c->max_ff > max_in)
		max_in = (size_t)c->max_ff;
	if ((size_t)c->max_q_dim > max_in)
		max_in = (size_t)c->max_q_dim;
	if ((size_t)c->max_ssm_v > max_in) /* a recurrent layer's output */
		max_in = (size_t)c->max_ssm_v;
	if ((size_t)c->max_ff_sh > max_in) /* a shared expert's down */
		max_in = (size_t)c->max_ff_sh;
	if ((size_t)c->ple_dim > max_in) /* a per-layer input's proj */
		max_in = (size_t)c->ple_dim;
	/* a mixture's down product reads n_expert_used inputs a token */
	if ((size_t)c->max_expert_used * (size_t)c->max_ff > max_in)
		max_in = (size_t)c->max_expert_used * (size_t)c->max_ff;

	/* what the GPU must hold, before allocating any of it */
	cuda_knobs_read(&knobs);
	s->repack = cu_repack_types(&knobs);
	arena = cu_arena_bytes(m, s->repack);
	/* K and V of every layer in the cache's type (cu_kv_place: a
	   sliding-window layer's ring, cu_window_plan); a q8_0 cache's fp16
	   scratch of one layer (cu_kv16_halves) with it */
	if (cu_window_plan(e, s, p) != 0) {
		snprintf(err, errlen, "out of host memory");
		goto fail;
	}
	kv = cu_kv_bytes(e, s) + cu_kv16_halves(e) * sizeof(uint16_t);
	act = nb * sizeof(float) *
	      (4 * (size_t)c->n_embd + 3 * (size_t)c->max_q_dim +
	       3 * (size_t)c->max_kv_dim_k + 2 * (size_t)c->max_ff + 1);
	for (int r = 0; r < c->n_ropes; r++) /* rope_cs */
		act += nctx * (size_t)c->ropes[r].n_rot * sizeof(float);
	act += cu_moe_bytes(c, nb) + cu_ssm_bytes(e, s, nb);
	if (c->features & MODEL_FEAT_ATTN_GATE)
		act += nb * (size_t)c->max_q_dim * sizeof(float);
	if ((size_t)c->max_ff_sh > (size_t)c->max_ff) /* hb, hb2 */
		act +=
		    2 * nb * ((size_t)c->max_ff_sh - c->max_ff) * sizeof(float);
	if (c->features & MODEL_FEAT_SHARED_EXPERT)
		act += nb * sizeof(float);
	if (c->features & MODEL_FEAT_MOE_DENSE) /* yd, rin */
		act += 2 * nb * (size_t)c->n_embd * sizeof(float);
	if (c->ple_dim > 0) /* ple, pe, pg */
		act += nb * (2 * (size_t)c->n_layer + 1) * (size_t)c->ple_dim *
		       sizeof(float);
	w16 = (size_t)16 << 20; /* fp16 weight rows per GEMM chunk */
	if (w16 < max_in)
		w16 = max_in;
	x16 = nb * max_in;
	need = arena + kv + act + 2 * (w16 + 2 * x16) + /* + int8 x */
	       (size_t)c->n_vocab * sizeof(float);
	CUDA_TRY(cudaMemGetInfo(&mfree, &mtotal), err, errlen);
	if (need > mfree) {
		/* what grows with the context: the KV cache and the RoPE
		   tables; the largest context (a multiple of 256) that fits */
		size_t per =
		    engine_kv_type_bytes(e->kv_type, model_cache_floats(m, 1)) +
		    cu_kv16_halves(e) / nctx * sizeof(uint16_t);
		size_t fixed;
		char fit[96] = "; the weights alone do not fit";

		for (int r = 0; r < c->n_ropes; r++)
			per += (size_t)c->ropes[r].n_rot * sizeof(float);
		/* (a 1/64 margin for the allocator's rounding) */
		fixed = need - nctx * per + mfree / 64;
		if (fixed < mfree && (mfree - fixed) / per >= 256)
			snprintf(fit, sizeof(fit), "; --ctx %zu fits",
			         (mfree - fixed) / per / 256 * 256);
		snprintf(err, errlen,
		         "model needs %.2f GiB on the GPU (weights %.2f, KV "
		         "cache for %d tokens %.2f), %.2f GiB free%s",
		         need / GIB, arena / GIB, e->n_ctx, kv / GIB,
		         mfree / GIB, fit);
		goto fail;
	}
	if (cuda_ctx_init(&s->ctx, w16, x16, err, errlen) != 0)
		goto fail;
	s->ctx_ok = 1;
	s->ctx.kv_q8 = e->kv_type == ENGINE_KV_Q8_0;
	s->layers =
	    (struct cu_layer *)calloc((size_t)c->n_layer, sizeof(*s->layers));
	cu_alloc((void **)&s->arena, arena, "the weights", &af);
	cu_alloc((void **)&s->tok, nb * sizeof(int32_t), "token ids", &af);
	cu_alloc((void **)&s->d_step, 2 * sizeof(int32_t), "the step", &af);
	cu_alloc_note(&af,
	              cudaHostAlloc((void **)&s->h_step, 2 * sizeof(int32_t),
	                            cudaHostAllocDefault),
	              "pinned host memory", 2 * sizeof(int32_t));
	s->n_graphs = (e->n_ctx + CU_GRAPH_POS - 1) / CU_GRAPH_POS;
	s->graphs = (cudaGraphExec_t *)calloc(2 * (size_t)s->n_graphs,
	                                      sizeof(*s->graphs));
	cu_alloc((void **)&s->d_snap,
	         (size_t)c->n_layer * c->n_embd * sizeof(float),
	         "the trace's residual copies", &af);
	cu_alloc_note(&af,
	              cudaHostAlloc((void **)&s->h_tstats,
	                            (size_t)c->n_layer * 4 * sizeof(float),
	                            cudaHostAllocMapped),
	              "mapped host memory", (size_t)c->n_layer * 4 * 4);
	if (af.ce == cudaSuccess)
		cu_alloc_note(&af,
		              cudaHostGetDevicePointer((void **)&s->d_tstats,
		                                       s->h_tstats, 0),
		              "mapped host memory", 0);
	cu_alloc_note(
	    &af, cudaStreamCreateWithFlags(&s->side, cudaStreamNonBlocking),
	    "a stream", 0);
	cu_alloc_note(
	    &af,
	    cudaEventCreateWithFlags(&s->side_fork, cudaEventDisableTiming),
	    "an event", 0);
	cu_alloc_note(
	    &af,
	    cudaEventCreateWithFlags(&s->side_join, cudaEventDisableTiming),
	    "an event", 0);
	s->use_graphs = knobs.graphs;
	s->ctx.x8_off = cuda_x8_types() == 0;
	s->ctx.lanes_off = !knobs.lane_groups;
	s->ctx.moe_fuse_off = !knobs.moe_fuse;
	s->ctx.norm_fuse_off = !knobs.norm_fuse;
	if (!knobs.pdl)
		s->ctx.pdl = 0; /* ordinary launches (to measure) */
	/* without PDL there is no previous kernel to overlap with */
	s->ctx.prefetch_max = !s->ctx.pdl ? 0
	                      : knobs.prefetch >= 0
	                          ? (knobs.prefetch ? SIZE_MAX : 0)
	                      : arena <= CU_PREFETCH_MAX ? SIZE_MAX
	                                                 : CU_PREFETCH_PRODUCT;
	cu_alloc((void **)&s->x, nb * c->n_embd * sizeof(float), "activations",
	         &af);
	cu_alloc((void **)&s->xb, nb * c->n_embd * sizeof(float), "activations",
	         &af);
	cu_alloc((void **)&s->q, nb * c->max_q_dim * sizeof(float),
	         "activations", &af);
	cu_alloc((void **)&s->k, nb * c->max_kv_dim_k * sizeof(float),
	         "activations", &af);
	cu_alloc((void **)&s->v, nb * c->max_kv_dim_k * sizeof(float),
	         "activations", &af);
	cu_alloc((void **)&s->o, nb * c->max_q_dim * sizeof(float),
	         "activations", &af);
	cu_alloc((void **)&s->y, nb * c->n_embd * sizeof(float), "activations",
	         &af);
	{
		const size_t ff =
		    (size_t)(c->max_ff > c->max_ff_sh ? c->max_ff
		                                      : c->max_ff_sh);

		cu_alloc((void **)&s->hb, nb * ff * sizeof(float),
		         "activations", &af);
		cu_alloc((void **)&s->hb2, nb * ff * sizeof(float),
		         "activations", &af);
	}
	if (c->features & MODEL_FEAT_ATTN_GATE)
		cu_alloc((void **)&s->qg, nb * c->max_q_dim * sizeof(float),
		         "activations", &af);
	if (c->features & MODEL_FEAT_SHARED_EXPERT)
		cu_alloc((void **)&s->sg, nb * sizeof(float), "activations",
		         &af);
	if (c->features & MODEL_FEAT_MOE_DENSE) {
		cu_alloc((void **)&s->yd, nb * c->n_embd * sizeof(float),
		         "activations", &af);
		cu_alloc((void **)&s->rin, nb * c->n_embd * sizeof(float),
		         "activations", &af);
	}
	if (c->ple_dim > 0) {
		const size_t np = (size_t)c->ple_dim * c->n_layer;

		cu_alloc((void **)&s->ple, nb * np * sizeof(float),
		         "per-layer inputs", &af);
		cu_alloc((void **)&s->pe, nb * np * sizeof(float),
		         "per-layer inputs", &af);
		cu_alloc((void **)&s->pg, nb * c->ple_dim * sizeof(float),
		         "per-layer inputs", &af);
	}
	if (c->n_recurrent > 0 && s->layers != NULL) {
		cu_ssm_bytes(e, s, nb); /* the layers' offsets */
		cu_ssm_alloc(c, s, nb, &af);
	}
	cu_alloc((void **)&s->kv, kv - cu_kv16_halves(e) * sizeof(uint16_t),
	         "the KV cache", &af);
	if (s->ctx.kv_q8) {
		cu_alloc((void **)&s->kv16,
		         cu_kv16_halves(e) * sizeof(uint16_t),
		         "the q8_0 cache's fp16 scratch", &af);
		s->ctx.d_kv16 = s->kv16;
		s->ctx.kv16_cap = cu_kv16_halves(e);
	}
	if (c->max_expert > 0)
		cu_moe_alloc(c, s, nb, &af);
	for (int r = 0; r < c->n_ropes; r++)
		cu_alloc((void **)&s->rope_cs[r],
		         nctx * (size_t)c->ropes[r].n_rot * sizeof(float),
		         "a RoPE table", &af);
	if (af.ce == cudaSuccess && s->layers != NULL) {
		cu_kv_place(e, s);
		/* zeros: a ring's margin rows are read, masked (the note);
		   a q8_0 scratch's too, through the same addresses */
		cu_alloc_note(
		    &af,
		    cudaMemsetAsync(s->kv, 0,
		                    kv - cu_kv16_halves(e) * sizeof(uint16_t),
		                    s->ctx.stream),
		    "the KV cache", 0);
		if (s->kv16 != NULL)
			cu_alloc_note(&af,
			              cudaMemsetAsync(s->kv16, 0,
			                              cu_kv16_halves(e) *
			                                  sizeof(uint16_t),
			                              s->ctx.stream),
			              "the q8_0 cache's fp16 scratch", 0);
	}
	if (af.ce != cudaSuccess) {
		snprintf(err, errlen,
		         "allocating %s (%zu bytes): %s (the model needs %.2f "
		         "GiB on the GPU, %.2f GiB were free)",
		         af.what, af.bytes, cudaGetErrorString(af.ce),
		         need / GIB, mfree / GIB);
		goto fail;
	}
	if (s->layers == NULL || s->graphs == NULL) {
		snprintf(err, errlen, "out of host memory");
		goto fail;
	}
	if (cu_upload(m, s, err, errlen) != 0)
		goto fail;
	for (int r = 0; r < c->n_ropes; r++)
		if (cuda_op_rope_table(&s->ctx, s->inv_freq[r],
		                       c->ropes[r].mscale, c->ropes[r].n_rot,
		                       e->n_ctx, s->rope_cs[r], err,
		                       errlen) != 0)
			goto fail;
	if (cu_host_logits(e, s, 1, err, errlen) != 0 ||
	    cu_dev_logits(e, s, 1, err, errlen) != 0 ||
	    cuda_select_init(&s->sel, c->n_vocab, err, errlen) != 0)
		goto fail;
	s->sel_ok = 1;
	if (cu_graphs_warm(e, s, err, errlen) != 0)
		goto fail;
	/* fp16 cache, or q8_0 (int8 and a scale a block) */
	e->kv_elem_bytes = s->ctx.kv_q8 ? 1 : (int32_t)sizeof(uint16_t);
	e->mem_bytes = need;
	/* decode's mat-vec quantizes its input to int8 blocks as the CPU's
	   default dots do (cuda_vecdot8.cuh) for these weight types */
	e->int8_act =
	    !s->ctx.x8_off && engine_model_uses_types(m, cuda_x8_types());
	return 0;
fail:
	cu_close(e);
	return -1;
}

/* A decode step is queued (a graph launch, or its kernels); only a trace
   that captures whole vectors copies them back during the eval. */
extern "C" const struct engine_ops backend_cuda_ops = {
    .name = "cuda",
    .features =
        MODEL_FEAT_QKV_BIAS | MODEL_FEAT_ROPE_FACTORS | MODEL_FEAT_ROPE_LINEAR |
        MODEL_FEAT_EMBD_SCALE | MODEL_FEAT_QK_NORM | MODEL_FEAT_POST_NORMS |
        MODEL_FEAT_ATTN_SLIDING | MODEL_FEAT_GELU_TANH | MODEL_FEAT_EXPERTS |
        MODEL_FEAT_ATTN_SINKS | MODEL_FEAT_ATTN_OUT_BIAS |
        MODEL_FEAT_ROPE_YARN | MODEL_FEAT_MOE_BIASES | MODEL_FEAT_SWIGLU_OAI |
        MODEL_FEAT_RECURRENT | MODEL_FEAT_ATTN_GATE | MODEL_FEAT_SHARED_EXPERT |
        MODEL_FEAT_FINAL_SOFTCAP | MODEL_FEAT_LAYER_SHAPES | MODEL_FEAT_V_NORM |
        MODEL_FEAT_K_AS_V | MODEL_FEAT_KV_SHARED | MODEL_FEAT_MOE_DENSE |
        MODEL_FEAT_EXPERT_SCALES | MODEL_FEAT_PER_LAYER_EMBD |
        MODEL_FEAT_OUT_SCALE | MODEL_FEAT_EXPERTS_MERGED,
    .kv_types = 1u << ENGINE_KV_F16 | 1u << ENGINE_KV_Q8_0,
    .kv_default = ENGINE_KV_F16,
    .open = cu_open,
    .eval = cu_eval,
    .logits = cu_logits,
    .select = cu_select,
    .kv_save = cu_kv_save,
    .kv_load = cu_kv_load,
    .bandwidth = cu_bandwidth,
    .close = cu_close,
    .rs_copy = cu_rs_copy,
    .rs_io = cu_rs_io,
    .kv_shift = cu_kv_shift,
    .kv_shift_types = 1u << ENGINE_KV_F16 | 1u << ENGINE_KV_Q8_0,
    .trace_settle = cu_trace_settle,
    .window_ring = 1,
    .ws_io = cu_ws_io,
    .eval_queues = 1,
};

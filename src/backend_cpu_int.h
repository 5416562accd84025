/*
 * backend_cpu_int.h - what the CPU backend's files share: the run state
 * and the products and norms (backend_cpu.c), the recurrent layers
 * (backend_cpu_ssm.c). Not part of the engine interface.
 */
#ifndef PARLEY_BACKEND_CPU_INT_H
#define PARLEY_BACKEND_CPU_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine_backend.h"
#include "model.h"

#define CPU_MAX_SEG 3 /* matrices one job can cover (Q, K and V) */

/* Value rows of an f16 or q8_0 cache dequantized at a time for the
 * attention's weighted sum (per thread, with the key row and the sum). */
#define CPU_KV_GROUP 32

/* Run state of the CPU backend: mutable, owned by the engine. */
struct cpu_state {
	struct threadpool *tp; /* row-splitting workers */
	int32_t n_batch;       /* tokens per chunk */

	/* activations of one chunk (n_batch rows each) */
	/* (the layer's dims; buffers hold the largest, cfg.max_*) */
	float *x;   /* [n_batch][n_embd] residual stream */
	float *xb;  /* [n_batch][max(n_embd, o_dim)] normed input / attn out */
	float *q;   /* [n_batch][q_dim] queries (after RoPE) */
	float *k;   /* [n_batch][kv_dim_k] keys of the chunk */
	float *v;   /* [n_batch][kv_dim_v] values of the chunk */
	float *hb;  /* [n_batch][n_ff] gate, then act(gate) * up */
	float *hb2; /* [n_batch][n_ff] up */
	float *y;   /* [n_batch][n_embd] output of a projection */
	float *att; /* [n_threads][n_ctx] attention scores per thread */
	float *rope_cs; /* [n_ropes][n_batch][max_rot] cos, sin interleaved
	                   per pair, of each RoPE class */

	/* a mixture's FFN (cfg.max_expert > 0; else NULL) */
	float *rl;       /* [n_batch][max_expert] router logits */
	float *rscratch; /* [max_expert] model_moe_route's */
	int32_t *ids;    /* [n_batch][max_expert_used] chosen experts */
	int32_t row0;    /* the chunk's first token's row in its step (a
	                    trace's rows: trace.h row_expert_id) */
	float *wts;      /* [n_batch][max_expert_used] their weights */
	int32_t *gtok;   /* [n_batch] tokens routed to one expert */
	float *xg;       /* [n_batch][n_embd] their normed inputs */
	float *yg;       /* [n_batch][n_embd] that expert's outputs */
	float *acc;      /* [n_batch][max_expert_used][n_embd] outputs per
	                    choice, summed in the order of the choice */
	/* a mixture beside a dense MLP (MODEL_FEAT_MOE_DENSE; else NULL) */
	float *yd;  /* [n_batch][n_embd] the dense branch's output */
	float *rin; /* [n_batch][n_embd] the router's input */

	/* per-layer inputs (cfg.ple_dim > 0; else NULL: backend_cpu_ple.c) */
	float *ple; /* [n_batch][n_layer * ple_dim] every layer's input */
	float *pe;  /* [n_layer * ple_dim] one token's embedding row */
	float *pg;  /* [n_batch][ple_dim] a layer's gate */

	bool exact;           /* engine_params.exact_dots */
	uint64_t exact_types; /* engine_params.exact_dot_types */
	float *wrow;         /* [n_threads][max_ne0] dequantized rows (exact) */
	int64_t wrow_stride; /* floats per thread in wrow */
	const float *xsrc;   /* exact: the activations [n_tok][ne0] */

	/* prepared activation vectors (quant_vec_prepare) */
	unsigned char *vecs; /* [CPU_MAX_SEG][n_batch][vec_stride] */
	size_t vec_stride;   /* bytes per prepared vector (max over types) */

	/* a gated attention's query rows [q | gate] per head (a model with
	   such layers; else NULL) */
	float *qg; /* [n_batch][max_q_dim] */

	/* recurrent layers (cfg.n_recurrent > 0; else NULL: backend_cpu_ssm.c)
	 */
	float *ssm_win;       /* [n_batch + d_conv - 1][max_conv_dim] the conv's
	                         inputs: the conv state's rows, then the chunk's */
	float *ssm_c;         /* [n_batch][max_conv_dim] the conv's outputs */
	float *ssm_z;         /* [n_batch][max_ssm_v] the output gate */
	float *ssm_b;         /* [n_batch][max_ssm_heads] beta */
	float *ssm_g;         /* [n_batch][max_ssm_heads] the decay's log */
	float *ssm_o;         /* [n_batch][max_ssm_v] the heads' outputs */
	float *ssm_scr;       /* [n_threads][2][head_dim] normed q and k */
	int32_t ssm_max_conv; /* the largest d_conv */
	/* state slots (engine_backend.h): 0 the live state, the snapshots
	   allocated on first use; each every recurrent layer's conv floats
	   then state floats (model.h), in layer order */
	float *rs[1 + ENGINE_RS_SNAPSHOTS];
	size_t rs_floats; /* of one slot */
	size_t *rs_off;   /* [n_layer] layer il's offset in a slot */

	/* KV cache, per layer (see above) */
	float *kv;       /* every layer's K and V, one allocation (bytes of
	                    kv_type: engine_kv_type_bytes) */
	float **k_cache; /* [n_layer] -> [n_ctx][k_dim]: an f32 cache's */
	float **v_cache; /* [n_layer] -> [n_ctx][v_dim] (f32; else NULL) */
	enum engine_kv_type kv_type; /* e->kv_type: f32, f16 or q8_0 */
	unsigned char **kb, **vb;    /* [n_layer] -> layer's K, V rows in
	                                any type (kb[il] == k_cache[il] in f32) */
	size_t *k_row, *v_row;       /* [n_layer] bytes of a position's row */
	float *kvrow;    /* f16, q8_0: [n_threads][CPU_KV_GROUP + 2][kv_hmax]
	                    rows dequantized for the attention */
	int32_t kv_hmax; /* the largest head dim of K or V */
	/* per layer: 1 where its cache keeps positions [e->win_lo, n_past)
	   only (a sliding-window layer: row p - e->win_lo holds position
	   p, engine.h invariant 3), 0 where row p holds p */
	unsigned char *win;
	int32_t win_slack; /* positions kept before the window on a move */
	/* window snapshots (engine_window.c): each window layer's K then V
	   rows of win_need positions, allocated at their first use */
	unsigned char *ws[1 + ENGINE_RS_SNAPSHOTS];

	int32_t logits_cap; /* rows allocated in engine.logits */
};

/* Y_k = W_k X for the N matrices W[k] (N <= CPU_MAX_SEG, same ne0) and X
 * [n_tok][ne0] in one job; output rows of Y[k] YS[k] floats apart. GATED:
 * Y[0] = act(Y[0]) * Y[1] (gate and up). */
void cpu_matmul_n(struct cpu_state *s, const struct model_tensor **w, int n,
                  const float *x, int32_t n_tok, float **y, const int64_t *ys,
                  bool gated, enum model_act act);

/* Y = W X for X [n_tok][w->ne0], Y [n_tok][w->ne1]. */
void cpu_matmul(struct cpu_state *s, const struct model_tensor *w,
                const float *x, int32_t n_tok, float *y);

/* OUT = X / sqrt(mean(X^2) + EPS) * W, one row of N. */
void cpu_rmsnorm(float *out, const float *x, const float *w, int n, float eps);

/* N rows of n_embd: rmsnorm(X) * W into OUT. */
void cpu_rmsnorm_rows(const struct engine *e, float *out, const float *x,
                      const float *w, int32_t n);

/* G[i] = act(G[i]) * U[i] for N entries. */
void cpu_gate_act(enum model_act act, float *g, const float *u, long n);

/* backend_cpu_ple.c: the chunk's per-layer inputs (model.h) of TOKENS[N]
 * from the scaled embeddings in s->x, into s->ple. */
void cpu_ple_inputs(struct engine *e, struct cpu_state *s,
                    const int32_t *tokens, int32_t n);

/* Layer IL's per-layer input step on the chunk (adds into s->x). */
void cpu_ple_block(struct engine *e, struct cpu_state *s, int il, int32_t n);

/* Their buffers; 0 or -1 (out of memory). */
int cpu_ple_alloc(const struct engine *e, struct cpu_state *s);
void cpu_ple_free(struct cpu_state *s);

/* calloc of A * B floats, NULL on overflow or no memory. */
float *cpu_floats(size_t a, size_t b);

/* backend_cpu_ssm.c: recurrent layer IL (model.h's Gated DeltaNet) on
 * the chunk of N tokens in s->x (adds into it), its state in slot 0. */
void cpu_ssm_block(struct engine *e, struct cpu_state *s, int il, int32_t n);

/* Its buffers and slot 0 (zeros); 0 or -1 (out of memory). */
int cpu_ssm_alloc(struct engine *e, struct cpu_state *s);
void cpu_ssm_free(struct cpu_state *s);

/* engine_ops.rs_copy and rs_io. */
int cpu_rs_copy(struct engine *e, int dst, int src, char *err, size_t errlen);
int cpu_rs_io(struct engine *e, int slot, void *buf, bool load, char *err,
              size_t errlen);

#endif /* PARLEY_BACKEND_CPU_INT_H */

/*
 * cuda_ops.h - the CUDA backend's operations, one launcher per op (C
 * interface, so the C parity test tests/t_cuda_ops.c calls exactly what
 * the backend calls).
 *
 * NOTES ON THE DESIGN
 *
 * Every pointer named d_* is device memory. Activations are fp32 and
 * token-major: row t of an [n_tok][dim] buffer starts at t * dim. Weights
 * are GGUF tensors copied verbatim to the device: ne1 rows of row_size
 * bytes, each row ne0 elements of a ggml type (cuda_quant.cuh). The KV
 * cache is fp16, [layer][kv_head][pos][dim], so one head's keys of a layer
 * are one contiguous run the attention streams through; with ctx->kv_q8
 * each (kv_head, pos) row is dim / 32 Q8_0 blocks instead (cuda_kvq.cuh;
 * the uint16_t pointers then address bytes of blocks): every KV store
 * quantizes and the attention reads the blocks (a batch through an fp16
 * copy of the layer, ctx->d_kv16).
 *
 * Every launcher enqueues on ctx->stream and returns 0, or -1 with a
 * message in err (a launch failure, a cuBLAS status, a type the GPU code
 * does not know); it never synchronises except where it says so.
 */
#ifndef PARLEY_CUDA_OPS_H
#define PARLEY_CUDA_OPS_H

#include "cuda_ctx.h" /* struct cuda_ctx, cuda_ctx_init, cuda_ctx_free */
#include "model.h"    /* enum model_act */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Tokens from which a product goes through cuBLAS instead of mat-vec. */
#define CUDA_GEMM_MIN_TOKENS 8

/* Head dimensions the attention kernels handle (Gemma 4's global layers:
 * 512; the one-warp kernel's registers per lane, the split decode
 * kernel's shared memory). */
#define CUDA_ATTN_MAX_HEAD_DIM 512

/* A weight matrix on the device. */
struct cuda_tensor {
	uint32_t type;   /* ggml type id */
	int64_t ne0;     /* elements per row */
	int64_t ne1;     /* rows (of one matrix of a stack) */
	size_t row_size; /* bytes per row */
	const void *d;   /* ne2 * ne1 * row_size bytes */
	int64_t ne2;     /* matrices stacked (a mixture's experts); 0 or 1:
	                    one */
};

/* True when the GPU code has kernels for ggml type T. */
int cuda_ops_type_ok(uint32_t t);

/* D_OUT[r][0..ne0) = rows ROWS[r] of W dequantized to fp32 times SCALE
 * (one float multiplication: 1 leaves them exact; the embedding's scale
 * of gemma3, model.h), r < n_rows. D_ROWS are device int32 row indices
 * (token ids for the embedding). */
int cuda_op_get_rows(struct cuda_ctx *ctx, const struct cuda_tensor *w,
                     const int32_t *d_rows, int32_t n_rows, float scale,
                     float *d_out, char *err, size_t errlen);

/*
 * Y[t][r] = W row r . X[t] for t < n_tok: X [n_tok][w->ne0],
 * Y [n_tok][w->ne1]. Fewer than CUDA_GEMM_MIN_TOKENS tokens: a mat-vec
 * that reads the quantized blocks, fp32 sums (of int8 activations for the
 * types below). Otherwise: rows of W
 * dequantized to fp16 in ctx->d_w16, X converted to fp16, cublasGemmEx
 * with fp32 accumulation and fp32 output; up to CUDA_QGEMM_MAX_TOKENS
 * tokens (PARLEY_CUDA_QGEMM_MAX), the quantized GEMM instead
 * (cuda_op_qgemm: the same roundings, no fp16 copy of W). FORCE: 0 = by
 * n_tok, 1 = always mat-vec, 2 = always cuBLAS, 3 = always the quantized
 * GEMM (tests).
 */
int cuda_op_matmul(struct cuda_ctx *ctx, const struct cuda_tensor *w,
                   const float *d_x, int32_t n_tok, float *d_y, int force,
                   char *err, size_t errlen);

/* cuda_op_matmul with FORCE 1 (the mat-vec), then D_B [w->ne1] (or
 * NULL) added to each token's output as cuda_op_add_bias adds it: in the
 * mat-vec's epilogue where W takes the unit mat-vec (a mixture's biased
 * router, gpt-oss: one launch fewer), the same floats. */
int cuda_op_matvec_bias(struct cuda_ctx *ctx, const struct cuda_tensor *w,
                        const float *d_x, int32_t n_tok, const float *d_b,
                        float *d_y, char *err, size_t errlen);

/* Batches of up to this many tokens take the quantized GEMM by default
 * (BENCHMARKS.md, issue 34). */
#define CUDA_QGEMM_MAX_TOKENS 64

/*
 * Y (+)= W X on the tensor cores straight from W's blocks (cuda_qgemm.cu):
 * D_X16 the N_TOK tokens' inputs in fp16 [n_tok][w->ne0], D_Y
 * [n_tok][w->ne1] fp32, ADD: Y += W X. Uses ctx->d_w16 as scratch.
 * cuda_op_qgemm_ok: whether it takes W over N_TOK tokens (a type with a
 * decoder, ne0 a multiple of 8, the inputs within ctx->d_x16).
 */
int cuda_op_qgemm_ok(const struct cuda_ctx *ctx, const struct cuda_tensor *w,
                     int32_t n_tok);
int cuda_op_qgemm(struct cuda_ctx *ctx, const struct cuda_tensor *w,
                  const void *d_x16, int32_t n_tok, float *d_y, int add,
                  char *err, size_t errlen);

/* cuda_op_matmul (FORCE 0) given X's int8 activations D_XQ as
 * cuda_op_rmsnorm_x8 or the attention left them (or NULL: the mat-vec
 * quantizes X itself where it needs them). */
int cuda_op_matmul_xq(struct cuda_ctx *ctx, const struct cuda_tensor *w,
                      const float *d_x, const void *d_xq, int32_t n_tok,
                      float *d_y, char *err, size_t errlen);

/*
 * Int8 activations of the mat-vec (cuda_vecdot8.cuh): for Q8_0, Q4_0,
 * Q4_1, Q5_0, Q5_1, Q4_K, Q6_K and MXFP4 weights, unless ctx->x8_off, the
 * mat-vec first quantizes X per 32 exactly as the CPU engine's
 * quant_vec_prepare does for a Q8_0 row, then computes the exact products with
 * those activations. cuda_op_matvec_x8: whether the mat-vec path (fewer than
 * CUDA_GEMM_MIN_TOKENS tokens, or FORCE 1) of W over N_TOK tokens does.
 * cuda_x8_types: the weight types (bit 1 << type) whose mat-vec does in
 * the backend (for Q4_1 and Q4_K when their rows are 4- and 16-byte
 * aligned: whole even block counts, any row of Q4_K); 0 when
 * PARLEY_CUDA_MATVEC_F32=1 switches int8 activations off.
 * cuda_op_quantize_x8: the quantization alone, N_TOK rows of NE0 (a
 * multiple of 32) floats into D_XQ, cuda_x8_stride(ne0) bytes a token:
 * int8 quants [ne0], float scales [ne0/32], float d * sum(quants)
 * [ne0/32] (the CPU's three arrays, in another order).
 */
int cuda_op_matvec_x8(const struct cuda_ctx *ctx, const struct cuda_tensor *w,
                      int32_t n_tok);
/* The lanes of a row group of W's unit mat-vec over N_TOK tokens, GATED
 * or a plain product (32: a whole warp; 8 or 16 for rows of few units
 * with int8 activations: cuda_matmul.cu cm_lanes; 0: no unit mat-vec). */
int cuda_op_matvec_lanes(const struct cuda_ctx *ctx,
                         const struct cuda_tensor *w, int32_t n_tok, int gated);
uint64_t cuda_x8_types(void);
size_t cuda_x8_stride(int64_t ne0);
/* True when ctx->d_xq can hold N_TOK tokens of NE0 int8 activations and
 * they are on (not ctx->x8_off; NE0 a multiple of 32): the one condition
 * of the mat-vec, cuda_op_rmsnorm_x8 and the attention merge. */
int cuda_x8_room(const struct cuda_ctx *ctx, int64_t ne0, int32_t n_tok);
int cuda_op_quantize_x8(struct cuda_ctx *ctx, const float *d_x, int32_t n_tok,
                        int64_t ne0, void *d_xq, char *err, size_t errlen);

/*
 * The GPU layouts of Q8_0, Q6_K and Q4_K (cuda_quant.cuh note 5, made at
 * load by cuda_repack.cu): for Q8_0 and Q6_K each field of a row's blocks
 * gathered into one 16-byte aligned array, so the mat-vec reads the
 * quants 16 bytes at a time; for Q4_K the scales and mins re-packed so
 * that they decode from one 16-byte load. A tensor in such a layout has type
 * cuda_repack_type(its GGUF type) and row_size cuda_repack_row_size(that, ne0);
 * every op takes it and gives the same values as on the file's layout, bit for
 * bit. Its mat-vec needs int8 activations (otherwise: the element-wise one).
 * cuda_repack_type: the layout's type id for a GGUF TYPE that has one,
 * else TYPE. cuda_op_repack: N_ROWS rows of NE0 elements of TYPE, in the
 * file's layout at D_SRC (device), into the GPU layout at D_DST.
 */
uint32_t cuda_repack_type(uint32_t type);
size_t cuda_repack_row_size(uint32_t rtype, int64_t ne0);
int cuda_op_repack(struct cuda_ctx *ctx, uint32_t type, int64_t ne0,
                   int64_t n_rows, const void *d_src, void *d_dst, char *err,
                   size_t errlen);

/* Y[t][r] += W row r . X[t]: cuda_op_matmul with the residual add fused
 * (mat-vec: the row's sum added in place; GEMM: beta = 1). D_XQ: X's int8
 * activations as cuda_op_attention left them, or NULL (the mat-vec
 * quantizes X itself where it needs them). */
int cuda_op_matmul_add(struct cuda_ctx *ctx, const struct cuda_tensor *w,
                       const float *d_x, const void *d_xq, int32_t n_tok,
                       float *d_y, int force, char *err, size_t errlen);

/* Y[t][r] += (W row r . X[t] + B[r]): the products, then the bias, then
 * the residual add, as cuda_op_matmul_xq, cuda_op_add_bias and cuda_op_add
 * into D_TMP ([n_tok][w->ne1]) compute them (the CPU's order: gpt-oss's
 * attention output), in one mat-vec launch where W takes the unit mat-vec
 * (its epilogue adds y + (sum + b): the same floats), else those three.
 * D_XQ as for cuda_op_matmul_add. */
int cuda_op_matmul_add_bias(struct cuda_ctx *ctx, const struct cuda_tensor *w,
                            const float *d_x, const void *d_xq, int32_t n_tok,
                            const float *d_b, float *d_y, float *d_tmp,
                            char *err, size_t errlen);

/* cuda_op_matmul_add that also writes Y's new rows to D_COPY
 * ([n_tok][w->ne1]) in the same launch: a snapshot of the residual stream
 * without a launch of its own (the traced decode step's per-layer
 * statistics, backend_cuda.cu). Only the fast mat-vec has it:
 * cuda_op_matmul_add_copy_ok says whether it applies (else -1, nothing
 * done). */
int cuda_op_matmul_add_copy_ok(const struct cuda_ctx *ctx,
                               const struct cuda_tensor *w, const float *d_x,
                               int32_t n_tok);
int cuda_op_matmul_add_copy(struct cuda_ctx *ctx, const struct cuda_tensor *w,
                            const float *d_x, const void *d_xq, int32_t n_tok,
                            float *d_y, float *d_copy, char *err,
                            size_t errlen);

/* Q = WQ X (+ BQ), K = WK X (+ BK), V = WV X (+ BV) (shapes as
 * cuda_op_matmul; a NULL bias: none): when n_tok < CUDA_GEMM_MIN_TOKENS,
 * one mat-vec launch for the three if they share a type with a fast
 * mat-vec (cuda_vecdot.cuh), or for Q and K and one for V, the biases
 * added in the epilogue; otherwise three cuda_op_matmul and
 * cuda_op_add_bias. The same values either way. D_XQ: X's int8
 * activations as cuda_op_rmsnorm_x8 left them, or NULL (the mat-vec
 * quantizes X itself where it needs them). */
int cuda_op_matmul_qkv(struct cuda_ctx *ctx, const struct cuda_tensor *wq,
                       const struct cuda_tensor *wk,
                       const struct cuda_tensor *wv, const float *d_bq,
                       const float *d_bk, const float *d_bv, const float *d_x,
                       const void *d_xq, int32_t n_tok, float *d_q, float *d_k,
                       float *d_v, char *err, size_t errlen);

/* The rotary embedding and the KV store of one layer's attention
 * (cuda_op_rope_kv_store's arguments): RoPE on N_HEAD query and N_KV key
 * heads of HEAD_DIM, the first N_ROT dims rotated with D_INV_FREQ
 * (device, n_rot / 2) at positions POS0.. (ctx->d_pos in a captured
 * step), NEOX the pairing; K and V stored into layer IL of the fp16
 * caches D_KC, D_VC of N_CTX positions. D_CS: the rotations'
 * cos and sin as cuda_op_rope_table made them for these D_INV_FREQ and
 * N_CTX, or NULL (then no epilogue: cuda_op_matmul_qkv_rope). */
struct cuda_rope_kv {
	int32_t n_head, n_kv, head_dim, n_rot;
	const double *d_inv_freq;
	float mscale; /* cos and sin times it (YaRN's magnitude), else 1 */
	int32_t pos0;
	int neox;
	int32_t n_ctx, il;
	uint16_t *d_kc, *d_vc;
	const float *d_cs;
};

/* D_CS[(p * n_rot/2 + i) * 2 + 0, 1] = cos, sin of p * D_INV_FREQ[i] for
 * the N_CTX positions p, as the RoPE kernels compute them (double
 * argument, rounded to float: the same bits), so that the QKV epilogue
 * reads them instead of computing them on its critical path. D_CS holds
 * n_ctx * n_rot floats. The epilogue reads it before its PDL wait
 * (cuda_launch.cuh), as it reads a weight, so the call returns once the
 * table is complete (it synchronises the stream: a load-time op). */
int cuda_op_rope_table(struct cuda_ctx *ctx, const double *d_inv_freq,
                       float mscale, int32_t n_rot, int32_t n_ctx, float *d_cs,
                       char *err, size_t errlen);

/* cuda_op_matmul_qkv then cuda_op_rope_kv_store with RK, the same
 * floats; when every product takes the fast mat-vec and RK has its
 * table (d_cs), the rotation and the store are made by the products'
 * epilogues (a warp's two rows are a rotated pair, either style), with
 * no launch of their own. *FUSED (if not NULL): 1 if they were. */
int cuda_op_matmul_qkv_rope(struct cuda_ctx *ctx, const struct cuda_tensor *wq,
                            const struct cuda_tensor *wk,
                            const struct cuda_tensor *wv, const float *d_bq,
                            const float *d_bk, const float *d_bv,
                            const float *d_x, const void *d_xq, int32_t n_tok,
                            float *d_q, float *d_k, float *d_v,
                            const struct cuda_rope_kv *rk, int *fused,
                            char *err, size_t errlen);

/* G = act(GATE X) * (UP X) ([n_tok][gate->ne1]), ACT a gated FFN's
 * activation (model.h enum model_act: SiLU or GELU-tanh, cuda_act.cuh;
 * another is refused with a message): one mat-vec launch under the same
 * conditions as cuda_op_matmul_qkv (D_U untouched), otherwise two
 * products (UP X into D_U, same shape) and cuda_op_gate_act. D_XQ as for
 * cuda_op_matmul_qkv. */
int cuda_op_matmul_gated(struct cuda_ctx *ctx, enum model_act act,
                         const struct cuda_tensor *gate,
                         const struct cuda_tensor *up, const float *d_x,
                         const void *d_xq, int32_t n_tok, float *d_g,
                         float *d_u, char *err, size_t errlen);

/*
 * A mixture of experts (model.h's recipe; backend_cuda.cu runs it with no
 * host round trip, so decode graphs capture it):
 *
 * cuda_op_moe_route: the choice of each of N_TOK tokens from its router
 * logits D_RL [n_tok][n_expert] (one warp a token, model_moe_route's
 * arithmetic: GATING enum model_moe_gating, NORM_W, W_SCALE): the experts
 * D_IDS [n_tok][k] (best first, the lower index among equals) and their
 * weights D_W [n_tok][k]. D_TRACE_IDS / D_TRACE_W (k each, or NULL): the
 * last token's choice also there (mapped host memory: the trace).
 *
 * cuda_op_moe_gated: for slot s = t k + j (t < N_TOK, j < K) and expert
 * e = D_IDS[s]: D_G[s] = act(GATE_e X[t]) * (UP_e X[t]) (GATE and UP stacks
 * of ne2 experts, ne1 rows each; D_U scratch of the same shape as D_G).
 * cuda_op_moe_down: D_Y[s] = DOWN_e D_H[s] for N_SLOTS slots. Both are
 * mat-vecs that read only the chosen experts' rows (cuda_matmul.cu), with
 * int8 activations where the dense products have them, the same values as
 * cuda_op_matmul of that expert's matrix; a prefill chunk's are grouped
 * products instead (cuda_op_moe_grouped below). D_XQ as for cuda_op_matmul_qkv.
 * D_GATE_B, D_UP_B, D_DOWN_B (or NULL): the experts' biases ([n_expert]
 * rows of the product's size), added to the products before the activation
 * and to the down product's output (gpt-oss).
 * D_PERM (or NULL): the order in which a launch takes the slots, from
 * cuda_op_moe_sort (N_SLOTS slots of D_IDS grouped by expert, so that the
 * slots of one expert run together and its rows come from L2: a prefill
 * chunk's); the values do not depend on it.
 *
 * cuda_op_moe_combine: D_OUT[t] = sum over j in order of D_W[t k + j] *
 * D_A[t k + j] (rows of N), or D_OUT[t] += that when ADD (the residual):
 * the CPU's operations in its order.
 */
int cuda_op_moe_route(struct cuda_ctx *ctx, const float *d_rl, int32_t n_tok,
                      int32_t n_expert, int32_t k, int gating, int norm_w,
                      float w_scale, int32_t *d_ids, float *d_w,
                      int32_t *d_trace_ids, float *d_trace_w, char *err,
                      size_t errlen);
int cuda_op_moe_gated(struct cuda_ctx *ctx, enum model_act act,
                      const struct cuda_tensor *gate,
                      const struct cuda_tensor *up, const float *d_x,
                      const void *d_xq, int32_t n_tok, int32_t k,
                      const int32_t *d_ids, const int32_t *d_perm,
                      const float *d_gate_b, const float *d_up_b, float *d_g,
                      float *d_u, char *err, size_t errlen);
int cuda_op_moe_down(struct cuda_ctx *ctx, const struct cuda_tensor *down,
                     const float *d_h, int32_t n_slots, const int32_t *d_ids,
                     const int32_t *d_perm, const float *d_down_b, float *d_y,
                     char *err, size_t errlen);
/* D_Y[s][i] += D_B[e][i], e = D_IDS[s], for N_SLOTS rows of N: the
 * experts' biases (gpt-oss; D_B [n_expert][n]). */
int cuda_op_moe_add_bias(struct cuda_ctx *ctx, float *d_y, const float *d_b,
                         const int32_t *d_ids, int32_t n_slots, int64_t n,
                         char *err, size_t errlen);
/* D_Y[s][i] *= D_SCALE[e], e = D_IDS[s], for N_SLOTS rows of N: each
 * expert's output scale (gemma4; D_SCALE [n_expert]), before its
 * weight. */
int cuda_op_moe_scale(struct cuda_ctx *ctx, float *d_y, const float *d_scale,
                      const int32_t *d_ids, int32_t n_slots, int64_t n,
                      char *err, size_t errlen);
int cuda_op_moe_sort(struct cuda_ctx *ctx, const int32_t *d_ids,
                     int32_t n_slots, int32_t n_expert, int32_t *d_perm,
                     char *err, size_t errlen);
int cuda_op_moe_combine(struct cuda_ctx *ctx, const float *d_a,
                        const float *d_w, int32_t n_tok, int32_t k, int64_t n,
                        float *d_out, int add, char *err, size_t errlen);
/* cuda_op_moe_down of N_TOK tokens' K slots each into D_Y, then
 * cuda_op_moe_combine of D_Y with D_W into D_OUT, ADD as there: the same
 * values (bit for bit) in one launch where the down product takes the
 * unit mat-vec with int8 activations and K <= 32 (D_Y then untouched);
 * else those ops. */
int cuda_op_moe_down_sum(struct cuda_ctx *ctx, const struct cuda_tensor *down,
                         const float *d_h, int32_t n_tok, int32_t k,
                         const int32_t *d_ids, const int32_t *d_perm,
                         const float *d_down_b, const float *d_w, float *d_y,
                         float *d_out, int add, char *err, size_t errlen);

/*
 * Grouped expert products (cuda_moe.cu): cuda_op_moe_gated and
 * cuda_op_moe_down take them, instead of the mat-vec, when
 * cuda_op_moe_grouped says so for their stack (the gated product: for
 * both gate and up) over N_SLOTS slots: more than MODEL_MAX_EXPERTS_USED
 * slots (never one token's: decode keeps the mat-vec) and at least one
 * slot per expert of the stack on average (a prefill chunk), the type
 * decoded by cuda_quant.cuh, at most 1,024 experts and 65,535 slots, and
 * the plan (4 + 4 (n_slots / 64 + 1 + min(n_expert, n_slots)) + n_slots
 * int32) fits ctx->d_w16, which it overwrites. Each expert's slots are
 * then one tensor-core product (counted and ordered on the device: no
 * host round trip), its rows decoded to fp16 and the inputs converted to
 * fp16 as the dense GEMM does (cuda_op_matmul), fp32 sums: the same
 * values as the mat-vec within the GEMM's fp16 roundings; D_PERM is not
 * needed. The contract is cuda_op_moe_gated's and cuda_op_moe_down's
 * (D_U untouched where gate and up share a type and a row size: the
 * activation is applied in the same launch). cuda_op_moe_gated_grouped
 * and cuda_op_moe_down_grouped run them whenever they apply (-1 with a
 * message otherwise). cuda_op_moe_grouped_force (tests; not thread-safe):
 * 0 = by size, 1 = always the mat-vec, 2 = grouped wherever it applies.
 */
int cuda_op_moe_grouped(const struct cuda_ctx *ctx, const struct cuda_tensor *w,
                        int32_t n_slots);
void cuda_op_moe_grouped_force(int force);
int cuda_op_moe_gated_grouped(struct cuda_ctx *ctx, enum model_act act,
                              const struct cuda_tensor *gate,
                              const struct cuda_tensor *up, const float *d_x,
                              int32_t n_tok, int32_t k, const int32_t *d_ids,
                              const float *d_gate_b, const float *d_up_b,
                              float *d_g, float *d_u, char *err, size_t errlen);
int cuda_op_moe_down_grouped(struct cuda_ctx *ctx,
                             const struct cuda_tensor *down, const float *d_h,
                             int32_t n_slots, const int32_t *d_ids,
                             const float *d_down_b, float *d_y, char *err,
                             size_t errlen);

/* OUT[t] = X[t] / sqrt(mean(X[t]^2) + eps) * W, rows of N. W is a weight:
 * no earlier work in the stream may still be writing it (the kernel
 * reads it before its PDL wait, cuda_launch.cuh). */
int cuda_op_rmsnorm(struct cuda_ctx *ctx, const float *d_x, const float *d_w,
                    int32_t n, int32_t n_tok, float eps, float *d_out,
                    char *err, size_t errlen);

/* X[t] += rmsnorm(Y[t]) * W (a post-norm's output added to the residual),
 * rows of N: cuda_op_rmsnorm into a buffer then cuda_op_add, the same
 * bits, in one launch. W as for cuda_op_rmsnorm. */
int cuda_op_rmsnorm_add(struct cuda_ctx *ctx, const float *d_y,
                        const float *d_w, int32_t n, int32_t n_tok, float eps,
                        float *d_x, char *err, size_t errlen);

/* X[t] = (X[t] + rmsnorm(Y[t]) * W) * OSCALE: cuda_op_rmsnorm_add then
 * cuda_op_scale (a layer's output scale after its last post-norm), the
 * same bits, in one launch (two with ctx->norm_fuse_off); OSCALE 0:
 * cuda_op_rmsnorm_add. */
int cuda_op_rmsnorm_add_scale(struct cuda_ctx *ctx, const float *d_y,
                              const float *d_w, int32_t n, int32_t n_tok,
                              float eps, float oscale, float *d_x, char *err,
                              size_t errlen);

/* cuda_op_rmsnorm_add_scale, and X's new rows quantized too as
 * cuda_op_rmsnorm_x8 quantizes its output (its conditions; *D_XQ as
 * there; none with ctx->norm_fuse_off): for a product of the residual
 * that follows. */
int cuda_op_rmsnorm_add_scale_x8(struct cuda_ctx *ctx, const float *d_y,
                                 const float *d_w, int32_t n, int32_t n_tok,
                                 float eps, float oscale, float *d_x,
                                 const void **d_xq, char *err, size_t errlen);

/* OUT[t] = rmsnorm(X[t]) * W + PLUS[t]: cuda_op_rmsnorm then cuda_op_add
 * into OUT, the same bits, in one launch (PLUS NULL: cuda_op_rmsnorm).
 * OUT may be PLUS (each element is read, then written, by one thread;
 * the one launch then even with ctx->norm_fuse_off), not X (every block
 * reads all of its row). */
int cuda_op_rmsnorm_plus(struct cuda_ctx *ctx, const float *d_x,
                         const float *d_w, int32_t n, int32_t n_tok, float eps,
                         const float *d_plus, float *d_out, char *err,
                         size_t errlen);

/* cuda_op_rmsnorm, and when the mat-vec takes int8 activations for N
 * inputs over N_TOK tokens (cuda_op_matvec_x8's conditions but the
 * weight's type), OUT quantized too in the same launch, into ctx->d_xq:
 * *D_XQ is then ctx->d_xq (for cuda_op_matmul_qkv and
 * cuda_op_matmul_gated), NULL otherwise. The quants are those the
 * mat-vec would make of OUT; a launch that quantizes other activations
 * overwrites them. */
int cuda_op_rmsnorm_x8(struct cuda_ctx *ctx, const float *d_x, const float *d_w,
                       int32_t n, int32_t n_tok, float eps, float *d_out,
                       const void **d_xq, char *err, size_t errlen);

/*
 * Rotate the first n_rot dims of each of the N_HEADS heads (head_dim
 * apart) of X[t] by position POS0 + t. D_INV_FREQ [n_rot / 2] doubles:
 * the angle per position of pair i (base, scale and rope_freqs folded in,
 * as backend_cpu.c computes them), cos and sin times MSCALE (YaRN's
 * magnitude, model.h; 1 leaves them exact). NEOX: 0 = adjacent pairs
 * (llama), 1 = halves (qwen2).
 */
int cuda_op_rope(struct cuda_ctx *ctx, float *d_x, int32_t n_tok,
                 int32_t n_heads, int32_t head_dim, int32_t n_rot,
                 const double *d_inv_freq, float mscale, int32_t pos0, int neox,
                 char *err, size_t errlen);

/* X[t][i] += B[i] for i < n, t < n_tok. */
int cuda_op_add_bias(struct cuda_ctx *ctx, float *d_x, const float *d_b,
                     int32_t n, int32_t n_tok, char *err, size_t errlen);

/* X[i] += Y[i] for i < n (the residual stream). */
int cuda_op_add(struct cuda_ctx *ctx, float *d_x, const float *d_y, int64_t n,
                char *err, size_t errlen);

/* X[t][i] += sigmoid(G[t]) Y[t][i] for t < n_tok, i < dim (a shared
 * expert's output under its gate, model.h). */
int cuda_op_add_gated(struct cuda_ctx *ctx, float *d_x, const float *d_y,
                      const float *d_g, int32_t dim, int32_t n_tok, char *err,
                      size_t errlen);

/* G[i] = act(G[i]) * U[i] for i < n (ACT as for cuda_op_matmul_gated). */
int cuda_op_gate_act(struct cuda_ctx *ctx, enum model_act act, float *d_g,
                     const float *d_u, int64_t n, char *err, size_t errlen);

/*
 * Store K [n_tok][n_kv * head_dim] and V (same shape) of positions
 * pos0.. into layer IL of the fp16 caches (each [n_layer][n_kv][n_ctx]
 * [head_dim]), rounding to nearest.
 */
int cuda_op_kv_store(struct cuda_ctx *ctx, const float *d_k, const float *d_v,
                     int32_t n_tok, int32_t n_kv, int32_t head_dim,
                     int32_t n_ctx, int32_t il, int32_t pos0, uint16_t *d_kc,
                     uint16_t *d_vc, char *err, size_t errlen);

/*
 * The context shift of one layer's fp16 caches D_KC [n_kv][n_ctx][hd_k]
 * and D_VC [n_kv][n_ctx][hd_v] (cuda_kvshift.cu; N_CTX rows a head): rows
 * [p0 + gap, p0 + gap + n) move to [p0, p0 + n) in place, each key's
 * first n_rot dims turned by -d positions (D_INV_FREQ and NEOX as for
 * cuda_op_rope, no magnitude: the cached keys carry it), rounded to fp16
 * once. GAP is d for a cache of every position, 0 for a window's ring
 * (its keys turned where they are). With ctx->kv_q8 the caches are q8_0
 * blocks (cuda_kvq.cuh) and each key's row is quantized again whole, as
 * the CPU's shift stores it.
 */
int cuda_op_kv_shift(struct cuda_ctx *ctx, uint16_t *d_kc, uint16_t *d_vc,
                     int32_t n_kv, int32_t n_ctx, int32_t hd_k, int32_t hd_v,
                     int32_t n_rot, int neox, const double *d_inv_freq,
                     int32_t p0, int32_t d, int32_t gap, int32_t n, char *err,
                     size_t errlen);

/*
 * cuda_op_rope of Q (n_head heads) and of K (n_kv heads), then
 * cuda_op_kv_store of K and V, in one launch; the same results bit for
 * bit (Q and K rotated in place too).
 */
int cuda_op_rope_kv_store(struct cuda_ctx *ctx, float *d_q, float *d_k,
                          const float *d_v, int32_t n_tok, int32_t n_head,
                          int32_t n_kv, int32_t head_dim, int32_t n_rot,
                          const double *d_inv_freq, float mscale, int32_t pos0,
                          int neox, int32_t n_ctx, int32_t il, uint16_t *d_kc,
                          uint16_t *d_vc, char *err, size_t errlen);

/*
 * cuda_op_rope_kv_store with a q/k norm first (qwen3, gemma3): each query
 * head RMS-normed by D_QW and each key head by D_KW ([head_dim] each;
 * NULL: that kind is not normed), as cuda_op_rmsnorm norms rows of
 * head_dim (the same bits), then rotated and stored, in one launch. Q
 * and K hold the normed, rotated heads on return.
 */
int cuda_op_qk_norm_rope_kv_store(struct cuda_ctx *ctx, float *d_q, float *d_k,
                                  const float *d_v, const float *d_qw,
                                  const float *d_kw, float eps, int32_t n_tok,
                                  int32_t n_head, int32_t n_kv,
                                  int32_t head_dim, int32_t n_rot,
                                  const double *d_inv_freq, float mscale,
                                  int32_t pos0, int neox, int32_t n_ctx,
                                  int32_t il, uint16_t *d_kc, uint16_t *d_vc,
                                  char *err, size_t errlen);

/*
 * cuda_op_qk_norm_rope_kv_store with Gemma 4's steps (model.h): V_NORM:
 * each value head RMS-normed without a weight (x / sqrt(mean(x^2) +
 * eps), as cpu_rmsnorm with no weight) before its store; N_KV == 0:
 * queries only (a layer that reads another's cache: D_K, D_V and the
 * caches unused, nothing stored). The other arguments and the results
 * are cuda_op_qk_norm_rope_kv_store's, bit for bit where V_NORM is 0.
 */
int cuda_op_qkv_norm_rope_store(struct cuda_ctx *ctx, float *d_q, float *d_k,
                                const float *d_v, const float *d_qw,
                                const float *d_kw, int v_norm, float eps,
                                int32_t n_tok, int32_t n_head, int32_t n_kv,
                                int32_t head_dim, int32_t n_rot,
                                const double *d_inv_freq, float mscale,
                                int32_t pos0, int neox, int32_t n_ctx,
                                int32_t il, uint16_t *d_kc, uint16_t *d_vc,
                                char *err, size_t errlen);

/*
 * Gemma 4's element-wise steps (cuda_elem.cu, backend_cpu.c's order of
 * operations):
 *
 * cuda_op_rmsnorm_mul: OUT[t][i] = ((X[t][i] * s) * MUL) * W[i], s the
 * RMSNorm scale of row X[t] (N floats): the router's input of a mixture
 * beside a dense MLP, rmsnorm(x) / sqrt(n_embd) * router_scale.
 *
 * cuda_op_ple_inputs: the per-layer inputs of the E models, in place:
 * for each of N_ROWS rows r of P floats (a token's layer), p = D_P[r] *
 * INV_EMBD, D_P[r][i] = ((p_i * s) * D_W[i] + D_E[r][i]) * INV2, s the
 * RMSNorm scale of p (D_E: the per-layer embedding rows, already times
 * sqrt(P)).
 *
 * cuda_op_gate_act_rows: D_G[t][i] = act(D_G[t][i]) * D_U[t ldu + i] for
 * i < N, t < N_TOK (a layer's slice of the per-layer inputs as the up).
 *
 * cuda_op_scale: D_X[i] *= S for i < N (a layer's output scale).
 *
 * cuda_op_softcap: D_X[i] = tanhf(D_X[i] * (1 / CAP)) * CAP for i < N
 * (the final logit softcap).
 */
int cuda_op_rmsnorm_mul(struct cuda_ctx *ctx, const float *d_x,
                        const float *d_w, int32_t n, int32_t n_tok, float eps,
                        float mul, float *d_out, char *err, size_t errlen);
int cuda_op_ple_inputs(struct cuda_ctx *ctx, float *d_p, const float *d_e,
                       const float *d_w, int32_t p, int64_t n_rows, float eps,
                       float inv_embd, float inv2, char *err, size_t errlen);
int cuda_op_gate_act_rows(struct cuda_ctx *ctx, enum model_act act, float *d_g,
                          const float *d_u, int32_t n, int32_t n_tok,
                          int64_t ldu, char *err, size_t errlen);
/* cuda_op_gate_act_rows, and D_G's new rows quantized as
 * cuda_op_rmsnorm_x8 quantizes its output (its conditions; *D_XQ as
 * there; none with ctx->norm_fuse_off) in the same launch. */
int cuda_op_gate_act_rows_x8(struct cuda_ctx *ctx, enum model_act act,
                             float *d_g, const float *d_u, int32_t n,
                             int32_t n_tok, int64_t ldu, const void **d_xq,
                             char *err, size_t errlen);
int cuda_op_scale(struct cuda_ctx *ctx, float *d_x, int64_t n, float s,
                  char *err, size_t errlen);
int cuda_op_softcap(struct cuda_ctx *ctx, float *d_x, int64_t n, float cap,
                    char *err, size_t errlen);

/* The parameters of an attention's scores (model.h struct
 * model_attn_params, with the sinks in device memory): one struct on
 * every path of cuda_op_attention. */
struct cuda_attn_params {
	float scale;          /* of q . k (1/sqrt(head_dim) in llama, qwen2) */
	int32_t window;       /* sliding window; 0 = every earlier position */
	float softcap;        /* of the scores; 0 = off */
	const float *d_sinks; /* [n_head] or NULL */
	/* the first position the cache holds and its row among a head's
	   rows: 0, 0; a sliding-window layer's ring (backend_cuda.cu) its
	   win_lo and the ring's margin (the cache's base is moved back so
	   that position p is still row p: only a q8_0 batch's copy to fp16
	   needs them) */
	int32_t p_lo, r_lo;
};

/*
 * Causal grouped-query attention of layer IL: query t (at position
 * pos0 + t) of head h attends to cache positions 0..pos0 + t of KV head
 * h / (n_head / n_kv); Q [n_tok][n_head * head_dim], OUT same shape.
 * Scores scaled by PAR->scale, softmax in fp32 (online, any length);
 * PAR's window, softcap and sinks must be off (refused with a message:
 * not implemented yet).
 * Fewer than CUDA_GEMM_MIN_TOKENS queries: split over the positions, with
 * partials in ctx->d_attn (grown here when too small: that cudaMalloc
 * may synchronise the device), or, in a captured step (ctx->d_pos set),
 * in ctx->d_attn_graph, which is never grown (an error if too small).
 * D_XQ (may be NULL): set to ctx->d_xq when
 * the merge of that split also wrote OUT as int8 activations there (what
 * cuda_op_quantize_x8 would make of it, for cuda_op_matmul_add; head_dim
 * a multiple of 32 and the mat-vec's int8 activations on), else NULL.
 */
int cuda_op_attention(struct cuda_ctx *ctx, const float *d_q,
                      const uint16_t *d_kc, const uint16_t *d_vc, int32_t n_tok,
                      int32_t n_head, int32_t n_kv, int32_t head_dim,
                      int32_t n_ctx, int32_t il, int32_t pos0,
                      const struct cuda_attn_params *par, float *d_out,
                      const void **d_xq, char *err, size_t errlen);

/* D_OUT[0..3] = min, max, mean, rms of X[0..n) (struct trace_stats's
 * order; sums in double, as trace_stats_of). One block. */
int cuda_op_stats(struct cuda_ctx *ctx, const float *d_x, int32_t n,
                  float *d_out, char *err, size_t errlen);
/* cuda_op_stats of each of N_ROWS rows of N at D_X into D_OUT[4 r ..], in
 * one launch (the same values, a block a row). */
int cuda_op_stats_rows(struct cuda_ctx *ctx, const float *d_x, int32_t n,
                       int32_t n_rows, float *d_out, char *err, size_t errlen);

/* Allocate the decode graphs' attention scratch (cuda_ctx.d_attn_graph)
 * for one token of N_HEAD heads (N_KV KV heads) of HEAD_DIM at every
 * pos_cap of STEP, 2 STEP, .. up to N_CTX positions: once, before the
 * first capture (a capture must not allocate, and a graph keeps the
 * address it was captured with). */
int cuda_op_attention_graph_reserve(struct cuda_ctx *ctx, int32_t n_head,
                                    int32_t n_kv, int32_t head_dim,
                                    int32_t n_ctx, int32_t step, char *err,
                                    size_t errlen);
/* The floats cuda_op_attention_graph_reserve would reserve for that
 * shape: a model whose layers differ (Gemma 4's sliding and global ones)
 * reserves once, for the layer that needs the most. */
size_t cuda_op_attention_graph_floats(const struct cuda_ctx *ctx,
                                      int32_t n_head, int32_t n_kv,
                                      int32_t head_dim, int32_t n_ctx,
                                      int32_t step);

/*
 * The recurrent layers of Qwen3.5 (Gated DeltaNet) and the output gate of
 * its gated attention (cuda_ssm.cu, the arithmetic of backend_cpu_ssm.c).
 *
 * cuda_op_ssm_conv: causal depthwise conv1d of K <= 8 taps with SiLU over
 * C channels: channel c's input at token t is D_X[t * ldx + c], the inputs
 * before the first token come from D_STATE [K-1][C] (row r: the input
 * K-1-r tokens back; row K-2 the latest; zeros on a fresh sequence);
 * u = sum over k < K of D_W[c K + k] * in(t - (K-1) + k) (from 0, taps in
 * order, each product rounded); D_Y[t C + c] = u / (1 + e^-u). D_STATE
 * then holds the last K-1 inputs, in place: a sequence in one call or
 * split over several gives the same bits. D_Y must not overlap D_X.
 *
 * cuda_op_gdn_gates: per token t and head h, in place:
 * D_A[t HV + h] = softplus(D_A + D_DT_BIAS[h]) * D_SSM_A[h] (ggml's:
 * x > 20 ? x : log1pf(e^x)), D_B[t HV + h] = 1 / (1 + e^-D_B).
 *
 * cuda_op_gdn: the gated delta rule. Row t of D_QKV (stride LD floats, a
 * multiple of 4; D_QKV and D_S 16-byte aligned) holds HK query heads of S
 * at 0, HK key heads at HK S, HV value heads at 2 HK S; D_S [HV][S][S]
 * (element [h][j][i]: j a value dim, i a key dim) fp32, updated in place.
 * For each token in order and value head h (key head h % HK, HV a
 * multiple of HK): q, k divided by max(L2 norm, EPS); S_h *= e^G[t][h];
 * d[j] = (v[j] - S_h[j] . k) * BETA[t][h]; S_h[j][i] += d[j] k[i];
 * D_O[t HV S + h S + j] = (S_h[j] . q) / sqrt(S). S a power of two,
 * 16..256. Fewer than CUDA_GDN_CHUNK_MIN_TOKENS tokens: token after token
 * (decode reads and writes the state once; no allocation, so a captured
 * decode step may hold it); more: in chunks of 64 tokens (the WY form of
 * llama.cpp's build_delta_net_chunking), the same values within fp32
 * rounding, with HV * 2 * 64 * 64 floats of scratch a chunk for up to
 * 1,024 tokens at a time, allocated and freed stream-ordered
 * (cudaMallocAsync / cudaFreeAsync on ctx->stream) by the call.
 * cuda_op_gdn_force: FORCE 0 = by n_tok, 1 = token after token, 2 =
 * chunked (tests).
 *
 * cuda_op_gdn_norm: in place, each head's S values of D_O ([n_tok][HV][S])
 * RMS-normed (x / sqrt(mean(x^2) + EPS), as cpu_rmsnorm), times
 * D_W[j], times silu(D_Z[t HV S + h S + j]).
 *
 * cuda_op_sigmoid_mul: D_X[t][h hd + d] *= 1 / (1 + e^-gate), gate =
 * D_GATE[t gate_ld + h 2 hd + hd + d] (a gated query projection's rows per
 * head: [q (hd) | gate (hd)]). cuda_op_split_q_gate: D_Q[t][h hd + d] =
 * D_QG[t][h 2 hd + d] (D_QG rows of 2 n_head hd).
 */
#define CUDA_GDN_CHUNK_MIN_TOKENS 64

int cuda_op_ssm_conv(struct cuda_ctx *ctx, const float *d_x, int64_t ldx,
                     float *d_state, const float *d_w, int32_t n_tok, int32_t C,
                     int32_t K, float *d_y, char *err, size_t errlen);
int cuda_op_gdn_gates(struct cuda_ctx *ctx, float *d_a, float *d_b,
                      const float *d_dt_bias, const float *d_ssm_a,
                      int32_t n_tok, int32_t HV, char *err, size_t errlen);
int cuda_op_gdn(struct cuda_ctx *ctx, const float *d_qkv, int64_t ld,
                const float *d_g, const float *d_beta, float *d_s,
                int32_t n_tok, int32_t HK, int32_t HV, int32_t S, float eps,
                float *d_o, char *err, size_t errlen);
int cuda_op_gdn_force(struct cuda_ctx *ctx, const float *d_qkv, int64_t ld,
                      const float *d_g, const float *d_beta, float *d_s,
                      int32_t n_tok, int32_t HK, int32_t HV, int32_t S,
                      float eps, float *d_o, int force, char *err,
                      size_t errlen);
int cuda_op_gdn_norm(struct cuda_ctx *ctx, float *d_o, const float *d_z,
                     const float *d_w, int32_t n_tok, int32_t HV, int32_t S,
                     float eps, char *err, size_t errlen);
int cuda_op_sigmoid_mul(struct cuda_ctx *ctx, float *d_x, const float *d_gate,
                        int64_t gate_ld, int32_t n_tok, int32_t n_head,
                        int32_t hd, char *err, size_t errlen);
int cuda_op_split_q_gate(struct cuda_ctx *ctx, const float *d_qg, int32_t n_tok,
                         int32_t n_head, int32_t hd, float *d_q, char *err,
                         size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* PARLEY_CUDA_OPS_H */

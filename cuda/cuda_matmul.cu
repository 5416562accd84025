/*
 * cuda_matmul.cu - products with GGUF weights on the GPU: embedding rows,
 * the mat-vec of decode, the cuBLAS GEMM of prefill (in the context of
 * cuda_ctx.cu: stream, cuBLAS handle, scratch).
 *
 * NOTES ON THE DESIGN
 *
 * Mat-vec (fewer than CUDA_GEMM_MIN_TOKENS tokens): one warp per output
 * row (CM_ROWS rows, or gate and up, in the fast path; 2 or 4 warps
 * sharing them when the product has too few rows to fill the GPU,
 * cm_ks), CM_WARPS warps per block; the row is read once per token; fp32
 * sums, one shuffle reduction per row. F32, F16, Q8_0, Q4_0, Q4_1, Q5_0,
 * Q5_1, Q4_K and Q6_K (when aligned), Q2_K, Q3_K, Q5_K, MXFP4, the i-quants
 * and the ternary types: lanes take whole blocks or sub-blocks with wide
 * loads (cm_matvec_unit, cuda_vecdot.cuh), with int8 activations and
 * exact integer block sums for the quantized ones (cuda_vecdot8.cuh;
 * Q2_K, Q3_K, Q5_K, the i-quants, the ternary types and MXFP4 have int8
 * units only). BF16, and every type without an fp32 unit where the
 * activations stay fp32 (PARLEY_CUDA_MATVEC_F32, rows not aligned for its
 * unit): lanes on consecutive elements through the element decoder
 * (cm_matvec), so a warp still reads a contiguous span of the row
 * (coalesced). The residual add and the gated activation (SwiGLU,
 * GEGLU) are fused epilogues.
 *
 * GEMM (prefill): cuBLAS wants plain fp16 matrices, so a chunk of rows of W
 * is dequantized into the fp16 scratch (ctx->d_w16, sized for a bounded
 * number of elements, not the whole model) and X is converted to fp16
 * once; then y = W x is, in cuBLAS's column-major terms,
 *   C (n_rows x n_tok, ldc = n_out) = op_T(A: n_in x n_rows, lda = n_in)
 *                                      * B (n_in x n_tok, ldb = n_in)
 * because a GGUF weight is row-major [n_out][n_in] (n_in contiguous) and
 * our activations are token-major [n_tok][dim]. Accumulation and output
 * are fp32 (CUBLAS_COMPUTE_32F). fp16 keeps 11 significant bits: the
 * inputs of every product are normalised activations or gated outputs,
 * far inside fp16's range; the residual stream itself stays fp32.
 */
#include "cuda_act.cuh"
#include "cuda_check.cuh"
#include "cuda_dec8.cuh"
#include "cuda_knobs.h"
#include "cuda_launch.cuh"
#include "cuda_ops.h"
#include "cuda_quant.cuh"
#include "cuda_reduce.cuh"
#include "cuda_rope.cuh"
#include "cuda_vecdot.cuh"
#include "cuda_vecdot8.cuh"

#include <string.h>
#include <type_traits>

#ifndef CM_WARPS
#define CM_WARPS 4 /* warps (rows) per mat-vec block */
#endif
#ifndef CM_UNROLL
#define CM_UNROLL 1 /* units a lane has in flight in the fast mat-vec */
#endif
static constexpr int cm_unroll = CM_UNROLL; /* (#pragma expands no macro) */

/* ------------------------------------------------------------- kernels */

/* OUT[r][i] = row ROWS[r] of W, element i, as fp32, times SCALE. One
 * thread per element: consecutive threads read consecutive elements of
 * one row. */
template <int T>
__global__ void cm_get_rows(const uint8_t *w, size_t row_size, int64_t ne0,
                            const int32_t *rows, int64_t n, float scale,
                            float *out)
{
	cu_pdl_sync(); /* first: cuda_launch.cuh */
	int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (idx >= n)
		return;
	int64_t r = idx / ne0, i = idx % ne0;
	out[idx] = __fmul_rn(
	    cq_row_elem<T>(w + (size_t)rows[r] * row_size, i, ne0), scale);
}

/* Y[t][row] = W row . X[t] (ADD: Y[t][row] += it); warp per row,
 * blockIdx.y = token. IDS (a mixture's expert products, else NULL): t is
 * a slot (PERM[blockIdx.y] when PERM is not NULL), reading the matrix
 * IDS[t] of the stack (ESTRIDE bytes apart) and X row t / X_DIV. */
template <int T>
__global__ void cm_matvec(const uint8_t *w, size_t row_size, int64_t ne0,
                          int64_t ne1, const float *x, float *y, int add,
                          const int32_t *ids, size_t estride, int x_div,
                          const int32_t *perm)
{
	cu_pdl_sync(); /* first: cuda_launch.cuh */
	const int lane = threadIdx.x & 31;
	const int64_t row = (int64_t)blockIdx.x * CM_WARPS + (threadIdx.x >> 5);
	const int64_t t = perm != NULL ? perm[blockIdx.y] : blockIdx.y;

	if (row >= ne1)
		return;
	const uint8_t *wr = w + (size_t)row * row_size +
	                    (ids != NULL ? (size_t)ids[t] * estride : 0);
	const float *xt = x + (ids != NULL ? t / x_div : t) * ne0;
	float acc = 0.0f;

	for (int64_t i = lane; i < ne0; i += 32)
		acc += cq_row_elem<T>(wr, i, ne0) * xt[i];
	acc = red_warp<red_add>(acc);
	if (lane == 0)
		y[t * ne1 + row] = add ? y[t * ne1 + row] + acc : acc;
}

/* One weight of a fused mat-vec launch. */
struct cm_part {
	const uint8_t *w; /* ne1 rows of row_size bytes */
	size_t row_size;  /* bytes per row */
	int64_t ne1;      /* rows */
	float *y;         /* output [n_tok][ne1] */
	const float *b;   /* [ne1] bias added to the output (CM_SET), or NULL */
};

/* What the epilogue of a QKV launch does for RoPE and the KV store
 * (cuda_op_matmul_qkv_rope): the role of part k is bits 2k.. of ROLES. */
enum { CM_ROLE_NONE, CM_ROLE_Q, CM_ROLE_K, CM_ROLE_V };
struct cm_rope {
	const float2 *cs;    /* [n_ctx][n_rot / 2] cos, sin */
	const int32_t *dpos; /* position of token 0, or NULL: pos0 */
	__half *kc, *vc;     /* [n_layer][n_kv][n_ctx][hd] */
	int32_t pos0, n_rot, hd, n_kv, n_ctx, il;
	int neox;  /* pairs (i, i + n_rot / 2), else (2i, 2i + 1) */
	int roles; /* part k's role: bits 2k.. (CM_ROLE_*) */
};

/* Up to three weights of one type and one input length, read by one
 * launch: global row r of the launch is row r - (rows of the earlier
 * parts) of the first part it falls in. */
#define CM_MAX_PARTS 3
struct cm_parts {
	struct cm_part p[CM_MAX_PARTS];
	int n;        /* parts whose rows the launch covers */
	int64_t rows; /* sum of their ne1 */
	float *copy;  /* CM_ADD of one part: Y's new rows also here, or NULL */
	int act;      /* CM_GATED: enum model_act (cuda_act.cuh) */
	struct cm_rope rope; /* CM_ROPE: the parts' roles and RoPE */
	/* a mixture's expert products (cuda_op_moe_gated, _down), else
	   ids NULL: token t of the launch (blockIdx.y) is slot t, which reads
	   matrix ids[t] of each part's stack (estride bytes apart, the same
	   for the parts) and X row t / x_div */
	const int32_t *ids;
	size_t estride;
	int x_div;
	/* blockIdx.y's slot, where the slots are taken in an order (a
	   chunk's sorted by expert, so that one expert's rows are read from
	   L2 for all its slots: cuda_op_moe_sort), or NULL: slot = y */
	const int32_t *perm;
};

/* What a unit mat-vec writes (CM_ROPE: as CM_SET, then RoPE and the KV
 * store in the epilogue, cm_rope_pair; a mode of its own so that the
 * other launches carry none of its code or registers). */
enum { CM_SET, CM_ADD, CM_GATED, CM_ROPE };

/* The fp32-activation units of cuda_vecdot.cuh in the interface of
 * cuda_vecdot8.cuh's: SRC is a token's activations, XV what a unit takes
 * of them. */
template <int T> struct cm_f32_unit {
	static const int ne = cv_unit<T>::ne;
	typedef const float *src;
	struct xv {
		float v[cv_unit<T>::ne];
	};
	static __device__ __forceinline__ src at(const void *x, int64_t t,
	                                         int64_t ne0)
	{
		return (const float *)x + t * ne0;
	}
	static __device__ __forceinline__ void xload(int64_t u, src x, xv &r)
	{
		cv_unit<T>::xload(u, x, r.v);
	}
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const xv &r)
	{
		return cv_unit<T>::dot(row, u, r.v);
	}
};

/* The int8-activation units (cuda_vecdot8.cuh), same interface. */
template <int T> struct cm_x8_unit : cv8_unit<T> {
	typedef struct cv8_xq src;
	static __device__ __forceinline__ src at(const void *x, int64_t t,
	                                         int64_t ne0)
	{
		return cv8_xq_at(x, t, ne0);
	}
};

/* Whether unit U's dot takes the row's unit count (the GPU layouts'
 * units, cuda_vecdot8.cuh: U::split). */
template <class U, class = void> struct cm_split {
	static const bool v = false;
};
template <class U> struct cm_split<U, std::void_t<decltype(U::split)>> {
	static const bool v = U::split;
};

/* Unit U of a row of NU units dotted with XV. */
template <class U>
static __device__ __forceinline__ float
cm_dot(const uint8_t *row, int64_t nu, int64_t u, const typename U::xv &xv)
{
	if constexpr (cm_split<U>::v)
		return U::dot(row, nu, u, xv);
	else
		return U::dot(row, u, xv);
}

/* A unit's shared-memory table (cuda_vecdot8.cuh, cv8_smem_tab): every
 * thread of the block helps copy it, then a barrier; first thing in the
 * kernel, before its wait for the previous kernel. */
template <class U> static __device__ __forceinline__ void cm_prepare(void)
{
	if constexpr (cv8_prepares<U>::v) {
		U::prepare();
		__syncthreads();
	}
}

/* Rows W[0..R) . XT over units FIRST, FIRST + STEP, .. (< NU) of U per
 * lane, reduced over each group of LW lanes (every lane of the group gets
 * its sums in ACC): lanes on consecutive units, each unit's activations
 * loaded once for the R rows (cuda_vecdot.cuh note 5). */
template <class U, int R, int LW = 32>
static __device__ __forceinline__ void
cm_rows_dot(const uint8_t *const *w, int64_t nu, const typename U::src &xt,
            int64_t first, int step, float *acc)
{
#pragma unroll
	for (int r = 0; r < R; r++)
		acc[r] = 0.0f;
		/* (32-bit unit indices: a row has fewer than 2^31 units, and
		   64-bit index arithmetic was a fifth of the loop's
		   instructions) */
#pragma unroll(cm_unroll)
	for (int u = (int)first; u < (int)nu; u += step) {
		typename U::xv xv;

		U::xload(u, xt, xv);
#pragma unroll
		for (int r = 0; r < R; r++)
			acc[r] += cm_dot<U>(w[r], nu, u, xv);
	}
#pragma unroll
	for (int r = 0; r < R; r++)
		red_xor<LW / 2, 1, red_add>(acc[r]);
}

/* Global row R of PS: its weight row in *W, its output element (token
 * T) in *Y. The loop unrolls to constant indices, so the parts stay in
 * parameter space (a dynamic index would copy them to local memory). */
static __device__ __forceinline__ void cm_locate(const struct cm_parts &ps,
                                                 int64_t r, int64_t t,
                                                 const uint8_t **w, float **y,
                                                 const float **b)
{
	const uint8_t *wp = ps.p[0].w;
	size_t rs = ps.p[0].row_size;
	int64_t ne1 = ps.p[0].ne1;
	float *yp = ps.p[0].y;
	const float *bp = ps.p[0].b;

#pragma unroll
	for (int k = 1; k < CM_MAX_PARTS; k++)
		if (k < ps.n && r >= ne1) {
			r -= ne1;
			wp = ps.p[k].w;
			rs = ps.p[k].row_size;
			ne1 = ps.p[k].ne1;
			yp = ps.p[k].y;
			bp = ps.p[k].b;
		}
	*w = wp + (size_t)r * rs;
	*y = yp == NULL ? NULL : yp + t * ne1 + r;
	*b = bp == NULL ? NULL : bp + r;
}

/* Where the two rows of a CM_ROPE warp lie (cuda_op_matmul_qkv_rope):
 * the warp's pair slot j of head H of part PART (role ROLE), its rows
 * the head's dims A and B, global rows R[0], R[1] of the launch. A
 * rotated pair is one warp's: dims (2j, 2j + 1) for neighbouring pairs,
 * (j, j + n_rot / 2) for NEOX below n_rot / 2 (above it, and for
 * values, the slot takes dims 2j, 2j + 1, which no rotated pair uses):
 * a permutation of the rows, each still dotted by one warp in the same
 * order, so the products are the same floats. */
struct cm_pair {
	int role, a, b;
	int64_t h, r[2];
	bool rot; /* a rotated pair: slot j < n_rot / 2, not a value */
	int j;
};

static __device__ __forceinline__ struct cm_pair
cm_rope_map(const struct cm_parts &ps, int64_t r0)
{
	const struct cm_rope &rp = ps.rope;
	struct cm_pair q;
	int64_t r = r0, ne1 = ps.p[0].ne1;
	int part = 0;

#pragma unroll
	for (int k = 1; k < CM_MAX_PARTS; k++)
		if (k < ps.n && r >= ne1) {
			r -= ne1;
			ne1 = ps.p[k].ne1;
			part = k;
		}
	const int half = rp.n_rot / 2;

	q.role = (rp.roles >> (2 * part)) & 3;
	q.h = r / rp.hd;
	q.j = (int)(r % rp.hd) / 2;
	q.rot = q.role != CM_ROLE_V && q.j < half;
	cu_rope_dims(q.j, half, rp.neox && q.j < half, &q.a, &q.b);
	q.r[0] = r0 - r + q.h * rp.hd + q.a;
	q.r[1] = r0 - r + q.h * rp.hd + q.b;
	return q;
}

/* The cos and sin of the warp's pair Q at position POS, from the table
 * of cuda_op_rope_table (the bits el_rope_kv_store computes). Read
 * before the warp's dot products, so that the load is not on the
 * epilogue's critical path (computing them there, in double precision,
 * was). */
static __device__ __forceinline__ float2 cm_rope_cs(const struct cm_rope &rp,
                                                    const struct cm_pair &q,
                                                    int32_t pos)
{
	if (!q.rot)
		return make_float2(1.0f, 0.0f);
	return rp.cs[(size_t)pos * (size_t)(rp.n_rot / 2) + (size_t)q.j];
}

/* The epilogue's RoPE and KV store for the warp's outputs V[0], V[1]
 * (rows Q.r of the token at POS; CS from cm_rope_cs): rotated as
 * el_rope_kv_store rotates the pair (the same operations, so the same
 * bits) if it is one; a key's or a value's also stored into its fp16
 * cache. */
static __device__ __forceinline__ void cm_rope_pair(const struct cm_parts &ps,
                                                    const struct cm_pair &q,
                                                    int32_t pos, float2 cs,
                                                    float *v)
{
	const struct cm_rope &rp = ps.rope;

	if (q.role == CM_ROLE_NONE)
		return;
	if (q.rot) {
		const float2 y = cu_rope_rotate(v[0], v[1], cs);

		v[0] = y.x;
		v[1] = y.y;
	}
	if (q.role != CM_ROLE_Q) {
		__half *cache = q.role == CM_ROLE_K ? rp.kc : rp.vc;
		const size_t at = (((size_t)rp.il * rp.n_kv + (size_t)q.h) *
		                       (size_t)rp.n_ctx +
		                   (size_t)pos) *
		                  (size_t)rp.hd;

		cache[at + q.a] = __float2half_rn(v[0]);
		cache[at + q.b] = __float2half_rn(v[1]);
	}
}

/* Weight rows per warp of the fast mat-vec: CM_ROWS output rows of
 * CM_SET and CM_ADD, CM_ROWS / 2 of CM_GATED (a gate and an up row each);
 * each unit's activations are loaded once for all of them. 2 rows beat 1
 * (one row a warp was bound by the L1 traffic of re-reading x) and 4 (the
 * registers cut the occupancy): BENCHMARKS.md. */
#ifndef CM_ROWS
#define CM_ROWS 2
#endif

/* Slots of a token cm_moe_down_sum takes (a warp each, one block). */
#define CM_MAX_SUM_SLOTS 32

/* Prefetch the CM_ROWS rows W of ROW_SIZE bytes into L2: 128-byte lines
 * FIRST, FIRST + STEP, .. of each row (the lanes of the warps sharing
 * the rows together cover them once). */
static __device__ __forceinline__ void
cm_prefetch_rows(const uint8_t *const *w, size_t row_size, int first, int step)
{
#pragma unroll
	for (int k = 0; k < CM_ROWS; k++)
		for (size_t o = (size_t)first * 128; o < row_size;
		     o += (size_t)step * 128)
			asm volatile(
			    "prefetch.global.L2 [%0];" ::"l"(w[k] + o));
}

/*
 * The fast mat-vec for the types of cuda_vecdot.cuh, CM_WARPS warps per
 * block, blockIdx.y = token. MODE CM_SET: y = W x; CM_ADD (one part): y +=
 * W x, or y += (W x + b) with a bias (the residual add fused; CM_SET adds a
 * part's bias when it has one, as cuda_op_add_bias would: one rounding);
 * both with CM_ROWS consecutive
 * rows of the parts per warp (the last warp's rows past the end are
 * computed again from the last row, not written). CM_GATED: the launch
 * covers part 0 (gate) only, CM_ROWS / 2 rows per warp, and the warp also
 * dots the same rows of part 1 (up): y0 = act(gate x) * (up x), PS.act's
 * activation as cuda_act.cuh computes it (el_swiglu's, el_geglu's bits).
 * CM_ROPE: CM_SET, then RoPE and the KV store of the warp's two rows
 * (cm_rope_pair). KS (1, 2 or 4, cm_ks) warps share each warp's worth of rows:
 * warp kw of them takes units kw * 32 + lane, + 32 * KS,
 * .., and their sums are added in warp order through shared memory (the result
 * does not depend on timing). PF: token 0's warps prefetch their rows
 * into L2 before waiting for the previous kernel (cuda_launch.cuh).
 * LW (CM_SET and CM_GATED, KS 1): lanes a row group takes; a warp takes
 * 32 / LW groups of rows (cm_lanes: a row of few units, as a mixture's
 * down product of 512 inputs, 8 Q4_K units, left 24 of 32 lanes idle and
 * each warp few bytes in flight). The sums are the same floats: the
 * lanes past a row's units add zeros in the full warp's reduction.
 */
template <class U, int MODE, int LW = 32>
__global__ void cm_matvec_unit(struct cm_parts ps, int64_t ne0, const void *x,
                               int ks, int pf)
{
	static_assert(LW == 32 || ((MODE == CM_SET || MODE == CM_GATED) &&
	                           LW >= 4 && 32 % LW == 0),
	              "row groups narrower than a warp: set and gated only");
	constexpr int64_t rg = MODE == CM_GATED ? CM_ROWS / 2 : CM_ROWS;
	__shared__ float part[CM_WARPS][CM_ROWS];
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

	cm_prepare<U>();
	const int sl = lane & (LW - 1); /* the lane within its group */
	/* (KS is 1, 2 or 4: shifts, not the integer divisions that were a
	   tenth of a short product's instructions) */
	const int lk = ks >> 1 == 2 ? 2 : ks >> 1;
	const int kw = warp & (ks - 1); /* this warp's share of the units */
	const int64_t wi =
	    (int64_t)blockIdx.x * (CM_WARPS >> lk) + (warp >> lk);
	/* a sorted mixture's slot is the sort kernel's output: wait for it
	   (the wait below then returns at once) */
	if (ps.perm != NULL)
		cu_pdl_sync();
	const int64_t t = ps.perm != NULL ? ps.perm[blockIdx.y] : blockIdx.y;
	const int64_t nu = ne0 / U::ne;
	const typename U::src xt =
	    U::at(x, ps.ids != NULL && ps.x_div != 1 ? t / ps.x_div : t, ne0);
	/* CM_GATED: CM_ROWS / 2 outputs of gate and up rows; else CM_ROWS;
	   the warp's from RW, this lane's group's from R0 */
	const int64_t rw = wi * (32 / LW) * rg, r0 = rw + (lane / LW) * rg;
	/* ACTIVE: the group writes rows; READS: the warp dots rows (a group
	   past the end on the last row, not written: the warp's lanes meet
	   in the reduction) */
	const bool active = r0 < ps.rows, reads = rw < ps.rows;
	struct cm_pair pr; /* CM_ROPE: the warp's rows */
	const uint8_t *w[CM_ROWS];
	const float *b[CM_ROWS];
	float *y[CM_ROWS], acc[CM_ROWS];

#pragma unroll
	for (int k = 0; k < CM_ROWS; k++)
		acc[k] = 0.0f;
	if constexpr (MODE == CM_ROPE) {
		static_assert(CM_ROWS == 2, "a warp's rows are a pair");
		if (active)
			pr = cm_rope_map(ps, r0);
	}
	if (reads && MODE == CM_GATED) {
#pragma unroll
		for (int k = 0; k < CM_ROWS / 2; k++) {
			const int64_t r =
			    r0 + k < ps.rows ? r0 + k : ps.rows - 1;

			cm_locate(ps, r, t, &w[2 * k], &y[k], &b[k]);
			w[2 * k + 1] = ps.p[1].w + (size_t)r * ps.p[1].row_size;
		}
	} else if (active && MODE == CM_ROPE) {
#pragma unroll
		for (int k = 0; k < CM_ROWS; k++)
			cm_locate(ps, pr.r[k], t, &w[k], &y[k], &b[k]);
	} else if (reads) {
#pragma unroll
		for (int k = 0; k < CM_ROWS; k++)
			cm_locate(ps, r0 + k < ps.rows ? r0 + k : ps.rows - 1,
			          t, &w[k], &y[k], &b[k]);
	}
	/* PF (ctx->prefetch_max): the weights are no kernel's output, so their
	   rows may head for L2 while the previous kernel finishes
	   (cuda_launch.cuh) */
	if (pf && active && t == 0)
		cm_prefetch_rows(w, ps.p[0].row_size, sl + LW * kw, LW * ks);
	/* E: the epilogue's other operand of each row, loaded by the lane
	   that adds it before the dot products, not after them (one round
	   trip fewer on the kernel's path): the bias of a decode step's QKV
	   (CM_ROPE), a weight, before the wait (cuda_launch.cuh); the
	   residual of CM_ADD, which earlier kernels write, after it. (Not
	   CM_SET's bias: the output product's registers grew.) */
	const bool adds = active && sl == 0 && kw == 0;
	float e[CM_ROWS];

#pragma unroll
	for (int k = 0; k < CM_ROWS; k++)
		e[k] = 0.0f;
	if constexpr (MODE == CM_ROPE)
		if (adds)
#pragma unroll
			for (int k = 0; k < CM_ROWS; k++)
				if (b[k] != NULL)
					e[k] = *b[k];
	/* CM_ROPE: the token's position, its cos and sin, read before the
	   wait: a captured step's position (cuda_launch.cuh) and the table,
	   made at load */
	int32_t pos = 0;
	float2 cs = make_float2(1.0f, 0.0f);

	if constexpr (MODE == CM_ROPE)
		if (adds) {
			pos = (ps.rope.dpos != NULL ? *ps.rope.dpos
			                            : ps.rope.pos0) +
			      (int32_t)t;
			cs = cm_rope_cs(ps.rope, pr, pos);
		}
	cu_pdl_sync();
	if (!reads && ks == 1)
		return; /* (with ks > 1 the whole block meets the barrier) */
	if (ps.ids != NULL && reads) { /* the routing kernel wrote ids */
		const size_t off = (size_t)ps.ids[t] * ps.estride;

#pragma unroll
		for (int k = 0; k < CM_ROWS; k++)
			w[k] += off;
	}
	if constexpr (MODE == CM_ADD)
		if (adds)
#pragma unroll
			for (int k = 0; k < CM_ROWS; k++)
				e[k] = *y[k];
	if (reads)
		cm_rows_dot<U, CM_ROWS, LW>(w, nu, xt, sl + LW * kw, LW * ks,
		                            acc);
	if (ks > 1) { /* the KS warps' sums of the rows, in a fixed order */
		if (lane == 0)
#pragma unroll
			for (int k = 0; k < CM_ROWS; k++)
				part[warp][k] = acc[k];
		__syncthreads();
		if (kw != 0)
			return;
#pragma unroll
		for (int k = 0; k < CM_ROWS; k++) {
			acc[k] = part[warp][k];
			for (int j = 1; j < ks; j++)
				acc[k] += part[warp + j][k];
		}
	}
	if (!active || sl != 0)
		return;
	if constexpr (MODE == CM_GATED) {
		/* the biases of gate and up (part 0's and 1's b: a row per
		   expert where the slots choose one), added before the
		   activation as cuda_op_moe_add_bias adds them */
		const size_t bo = ps.p[0].b == NULL ? 0
		                  : ps.ids != NULL
		                      ? (size_t)ps.ids[t] * (size_t)ps.rows
		                      : 0;
#pragma unroll
		for (int k = 0; k < CM_ROWS / 2; k++) {
			float g = acc[2 * k], u = acc[2 * k + 1];

			if (r0 + k >= ps.rows)
				continue;
			if (ps.p[0].b != NULL) {
				g = __fadd_rn(g, ps.p[0].b[bo + r0 + k]);
				u = __fadd_rn(u, ps.p[1].b[bo + r0 + k]);
			}
			*y[k] = cu_act_mul(ps.act, g, u);
		}
	} else {
		float v[CM_ROWS];

#pragma unroll
		for (int k = 0; k < CM_ROWS; k++)
			if (r0 + k < ps.rows)
				/* CM_ADD (one part): its bias read from the
				   parameters here, not kept in registers
				   through the dot products */
				v[k] =
				    MODE == CM_ADD
				        ? e[k] +
				              (ps.p[0].b == NULL
				                   ? acc[k]
				                   : acc[k] + ps.p[0].b[r0 + k])
				    : b[k] == NULL    ? acc[k]
				    : MODE == CM_ROPE ? acc[k] + e[k]
				                      : acc[k] + *b[k];
		if constexpr (MODE == CM_ROPE)
			cm_rope_pair(ps, pr, pos, cs, v);
#pragma unroll
		for (int k = 0; k < CM_ROWS; k++) {
			if (r0 + k >= ps.rows)
				continue;
			*y[k] = v[k];
			if (MODE == CM_ADD && ps.copy != NULL)
				ps.copy[t * ps.rows + r0 + k] = v[k];
		}
	}
}

/*
 * A mixture's down products of token blockIdx.y's K slots and their
 * weighted sum (cuda_op_moe_down_sum): a block of K warps, warp j on slot
 * t K + j: CM_ROWS rows of each of its 32 / LW row groups of the slot's
 * expert (the block's rows, blockIdx.x's) dotted with the slot's int8
 * activations XQ exactly as cm_matvec_unit<U, CM_SET, LW> with KS 1 dots
 * them (the same floats), plus the expert's bias (BIAS [n_expert][ne1],
 * or NULL), into shared memory; then a thread a row sums the slots in
 * order as mr_combine does (W [n_tok][K]) into OUT (ADD: added to it).
 * One launch and no round trip through memory where the products, the
 * biases and the sum were three.
 */
template <class U, int LW>
__global__ void cm_moe_down_sum(const uint8_t *w0, size_t row_size,
                                size_t estride, int64_t ne0, int64_t ne1,
                                const void *xq, const int32_t *ids,
                                const float *wts, const float *bias, int32_t k,
                                float *out, int add)
{
	constexpr int rb = CM_ROWS * (32 / LW); /* rows a block */
	__shared__ float a[CM_MAX_SUM_SLOTS][rb];
	const int lane = threadIdx.x & 31, j = threadIdx.x >> 5;
	const int sl = lane & (LW - 1), g0 = (lane / LW) * CM_ROWS;
	const int64_t t = blockIdx.y, s = t * k + j;
	const int64_t r0 = (int64_t)blockIdx.x * rb + g0;
	const typename U::src xt = U::at(xq, s, ne0);
	const uint8_t *w[CM_ROWS];
	float acc[CM_ROWS];

	cm_prepare<U>();
	cu_pdl_sync(); /* (the routing and the quantization wrote ids, xq) */
	const int64_t e = ids[s];

#pragma unroll
	for (int r = 0; r < CM_ROWS; r++)
		w[r] = w0 + (size_t)e * estride +
		       (size_t)(r0 + r < ne1 ? r0 + r : ne1 - 1) * row_size;
	cm_rows_dot<U, CM_ROWS, LW>(w, ne0 / U::ne, xt, sl, LW, acc);
	if (sl == 0)
#pragma unroll
		for (int r = 0; r < CM_ROWS; r++)
			a[j][g0 + r] =
			    bias != NULL && r0 + r < ne1
			        ? __fadd_rn(acc[r], bias[e * ne1 + r0 + r])
			        : acc[r];
	__syncthreads();
	const int64_t row = (int64_t)blockIdx.x * rb + threadIdx.x;

	if (threadIdx.x >= rb || row >= ne1)
		return;
	const float *wt = wts + t * k;
	float y = __fmul_rn(wt[0], a[0][threadIdx.x]);

	for (int32_t q = 1; q < k; q++)
		y = __fadd_rn(y, __fmul_rn(wt[q], a[q][threadIdx.x]));
	out[t * ne1 + row] = add ? __fadd_rn(out[t * ne1 + row], y) : y;
}

/* The activations of N_TOK tokens of NE0 (a multiple of 32) floats at X
 * quantized per 32 into XQ (cuda_vecdot8.cuh notes 2 and 4): one warp per
 * block, a lane per element. */
__global__ void cm_quantize_x8(const float *x, int64_t ne0, int64_t n_blocks,
                               uint8_t *xq)
{
	cu_pdl_sync(); /* first: cuda_launch.cuh */
	const int lane = threadIdx.x & 31;
	const int64_t gb =
	    ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;

	if (gb >= n_blocks)
		return;
	const int64_t nb = ne0 / 32, t = gb / nb, i = gb % nb;
	uint8_t *tb = xq + (size_t)t * cv8_xq_stride(ne0);
	float *d = (float *)(tb + ne0);

	cv8_quantize32(x[t * ne0 + i * 32 + lane], lane,
	               (int8_t *)tb + i * 32 + lane, d + i, d + nb + i);
}

/* OUT[r][i] = fp16 of row R0 + r of W, element i, for N elements. */
template <int T>
__global__ void cm_dequant_f16(const uint8_t *w, size_t row_size, int64_t ne0,
                               int64_t r0, int64_t n, __half *out)
{
	cu_pdl_sync(); /* first: cuda_launch.cuh */
	int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (idx >= n)
		return;
	int64_t r = idx / ne0, i = idx % ne0;
	out[idx] = __float2half_rn(
	    cq_row_elem<T>(w + (size_t)(r0 + r) * row_size, i, ne0));
}

/* cm_dequant_f16 for 8 consecutive elements per thread (NE0 % 8 == 0):
 * one division per 8 elements instead of one per element, cq_dec8's
 * decoding and one 16-byte store; the same values as cm_dequant_f16. */
template <int T>
__global__ void cm_dequant8_f16(const uint8_t *w, size_t row_size, int64_t ne0,
                                int64_t r0, int64_t n8, __half *out)
{
	cu_pdl_sync(); /* first: cuda_launch.cuh */
	int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (idx >= n8)
		return;
	const int64_t e = idx * 8, r = e / ne0, i = e % ne0;

	cq_dec8<T>(w + (size_t)(r0 + r) * row_size, i, ne0, out + e);
}

/* OUT[i] = fp16 of X[i]. */
__global__ void cm_to_f16(const float *x, int64_t n, __half *out)
{
	cu_pdl_sync(); /* first: cuda_launch.cuh */
	int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (idx < n)
		out[idx] = __float2half_rn(x[idx]);
}

/* ------------------------------------------------------------ helpers */

/* Blocks of 256 threads covering N elements. */
static unsigned cm_blocks(int64_t n)
{
	return (unsigned)((n + 255) / 256);
}

extern "C" int cuda_ops_type_ok(uint32_t t)
{
	switch (t) {
#define X(T)                                                                   \
	case T:                                                                \
		return 1;
		CQ_FOR_EACH_TYPE(X)
#undef X
	default:
		return 0;
	}
}

/* The message for a type without kernels. */
static int cm_bad_type(uint32_t t, char *err, size_t errlen)
{
	snprintf(err, errlen, "type %s (id %u) has no CUDA kernel",
	         qtype_name(t), t);
	return -1;
}

/* --------------------------------------------------------- launchers */

extern "C" int cuda_op_get_rows(struct cuda_ctx *ctx,
                                const struct cuda_tensor *w,
                                const int32_t *d_rows, int32_t n_rows,
                                float scale, float *d_out, char *err,
                                size_t errlen)
{
	int64_t n = (int64_t)n_rows * w->ne0;
	const uint8_t *wd = (const uint8_t *)w->d;

	switch (w->type) {
#define X(T)                                                                   \
	case T:                                                                \
		cu_launch(ctx, cm_get_rows<T>, cm_blocks(n), 256, 0, wd,       \
		          w->row_size, w->ne0, d_rows, n, scale, d_out);       \
		break;
		CQ_FOR_EACH_TYPE(X)
#undef X
	default:
		return cm_bad_type(w->type, err, errlen);
	}
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

/* The part of one weight with output D_Y. */
static struct cm_part cm_part_of(const struct cuda_tensor *w, float *d_y)
{
	struct cm_part p = {.w = (const uint8_t *)w->d,
	                    .row_size = w->row_size,
	                    .ne1 = w->ne1,
	                    .y = d_y,
	                    .b = NULL};

	return p;
}

/* True when the mat-vec of TYPE over N_TOK tokens of NE0 inputs takes
 * int8 activations (cuda_vecdot8.cuh): a cv8_unit type, not switched off,
 * and the scratch holds them. */
static int cm_x8_ok(const struct cuda_ctx *ctx, uint32_t type, int64_t ne0,
                    int32_t n_tok)
{
	switch (type) {
#define X(T) case T:
		CV8_FOR_EACH_TYPE(X)
#undef X
		break;
	default:
		return 0;
	}
	return cuda_x8_room(ctx, ne0, n_tok);
}

/* True when W has a cv_unit and meets cuda_vecdot.cuh's alignment: rows
 * 16-byte aligned for F32 and F16 (in whole units of 8) and Q4_K, 4-byte for
 * Q4_1 and Q5_1; Q8_0, Q4_0, Q5_0 and Q6_K are read 2 bytes at a time,
 * which every row of them meets (their blocks are 34, 18, 22 and 210
 * bytes), so an odd block
 * count (Qwen2.5-3B's FFN of 11,008 = 43 Q6_K blocks) keeps the unit
 * path, several times faster than the element-wise one. The GPU layouts of
 * Q8_0, Q6_K and Q4_K (cuda_quant.cuh note 5): rows 16-byte aligned, and int8
 * activations for N_TOK tokens, since they have no fp32 unit. X 16-byte
 * aligned. */
static int cm_unit_ok(const struct cuda_ctx *ctx, const struct cuda_tensor *w,
                      const float *d_x, int32_t n_tok)
{
	const uintptr_t al = (uintptr_t)w->d | (uintptr_t)w->row_size;

	if ((uintptr_t)d_x % 16 != 0)
		return 0;
	switch (w->type) {
	case QTYPE_F32:
	case QTYPE_F16:
		return al % 16 == 0 && w->ne0 % 8 == 0;
	case QTYPE_Q4_K:
		return al % 16 == 0;
	case CQ_Q8_0R: /* (the GPU layouts have int8 units only) */
	case CQ_Q6_KR:
	case CQ_Q4_KR:
		return al % 16 == 0 && cm_x8_ok(ctx, w->type, w->ne0, n_tok);
	case QTYPE_MXFP4: /* (an int8 unit only; any alignment) */
		return cm_x8_ok(ctx, w->type, w->ne0, n_tok);
	case QTYPE_Q5_K: /* (int8 units only; read 16 bytes at a time) */
		return al % 16 == 0 && cm_x8_ok(ctx, w->type, w->ne0, n_tok);
	case QTYPE_Q2_K: /* (int8 units only; read 4 bytes at a time) */
		return al % 4 == 0 && cm_x8_ok(ctx, w->type, w->ne0, n_tok);
	case QTYPE_IQ4_XS: /* (int8 units only; read 8 bytes at a time) */
		return al % 8 == 0 && cm_x8_ok(ctx, w->type, w->ne0, n_tok);
	case QTYPE_Q3_K: /* (int8 units only; 16-bit loads) */
	case QTYPE_IQ4_NL:
	case QTYPE_IQ3_XXS:
	case QTYPE_IQ3_S:
	case QTYPE_IQ2_XXS:
	case QTYPE_IQ2_XS:
	case QTYPE_IQ2_S:
	case QTYPE_IQ1_S:
	case QTYPE_IQ1_M:
	case QTYPE_TQ1_0:
	case QTYPE_TQ2_0:
		return al % 2 == 0 && cm_x8_ok(ctx, w->type, w->ne0, n_tok);
	case QTYPE_Q4_1:
	case QTYPE_Q5_1:
		return al % 4 == 0;
	case QTYPE_Q8_0:
	case QTYPE_Q4_0:
	case QTYPE_Q5_0:
	case QTYPE_Q6_K:
		return al % 2 == 0;
	default:
		return 0;
	}
}

extern "C" int cuda_op_matvec_x8(const struct cuda_ctx *ctx,
                                 const struct cuda_tensor *w, int32_t n_tok)
{
	return cm_unit_ok(ctx, w, NULL, n_tok)
	           ? cm_x8_ok(ctx, w->type, w->ne0, n_tok)
	           : 0;
}

extern "C" uint64_t cuda_x8_types(void)
{
	uint64_t m = 0;

	if (cuda_knobs()->matvec_f32)
		return 0;
#define X(T) m |= (uint64_t)1 << T;
	CV8_FOR_EACH_TYPE(X)
#undef X
	return m;
}

extern "C" size_t cuda_x8_stride(int64_t ne0)
{
	return cv8_xq_stride(ne0);
}

extern "C" int cuda_x8_room(const struct cuda_ctx *ctx, int64_t ne0,
                            int32_t n_tok)
{
	return !ctx->x8_off && ne0 % 32 == 0 &&
	       (size_t)n_tok * cv8_xq_stride(ne0) <= ctx->xq_cap;
}

/* The XQ_DONE of cm_unit_launch for D_XQ, the int8 activations an op
 * was given (cuda_op_rmsnorm_x8's, the attention merge's) or NULL. */
static int cm_xq_given(const struct cuda_ctx *ctx, const void *d_xq)
{
	return d_xq != NULL && d_xq == ctx->d_xq;
}

extern "C" int cuda_op_quantize_x8(struct cuda_ctx *ctx, const float *d_x,
                                   int32_t n_tok, int64_t ne0, void *d_xq,
                                   char *err, size_t errlen)
{
	const int64_t n_blocks = (int64_t)n_tok * (ne0 / 32);

	if (ne0 % 32 != 0) {
		snprintf(
		    err, errlen,
		    "int8 activations: %lld elements, not whole blocks of 32",
		    (long long)ne0);
		return -1;
	}
	cu_launch(ctx, cm_quantize_x8, (unsigned)((n_blocks + 7) / 8), 256, 0,
	          d_x, ne0, n_blocks, (uint8_t *)d_xq);
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

/* Resident warps a multiprocessor of cm_matvec_unit (its registers allow
 * 37.5 to 43.75% occupancy on the h100): one full wave is n_sm times. */
#define CM_SM_WARPS 24

/* Warps sharing a row group (cm_matvec_unit's KS) for WARPS row groups of
 * NU units of NE elements: a product with fewer groups than one full wave
 * (Qwen2.5-7B's wo, down and QKV: 1,792 to 2,304) leaves SMs short of
 * loads in flight, so 2 or 4 warps split each group's units, as long as
 * every lane keeps M units (NU >= 32 KS M): M = 1 for units of 32
 * elements, 2 for Q4_K's of 64 (its wo and QKV of 4,096 and 5,120
 * columns at 1 split, the Qwen3-8B's down of 12,288 at 2: +2% on the
 * Qwen3-8B and 14B shapes, -1% on Gemma-3-12B's, BENCHMARKS.md).
 * CM_KSPLIT=0 at build time: always 1 (for measuring);
 * PARLEY_CUDA_KSPLIT_UNITS sets M. */
#ifndef CM_KSPLIT
#define CM_KSPLIT 1
#endif
static int cm_ks(const struct cuda_ctx *ctx, int64_t warps, int64_t nu,
                 int64_t ne)
{
	const int64_t knob = cuda_knobs()->ksplit_units;
	const int64_t m = knob > 0 ? knob : ne > 32 ? 2 : 1;

	if (!CM_KSPLIT || warps >= (int64_t)ctx->n_sm * CM_SM_WARPS)
		return 1;
	return nu >= 4 * 32 * m ? 4 : nu >= 2 * 32 * m ? 2 : 1;
}

/* Lanes of a row group (cm_matvec_unit's LW) for rows of NU units in
 * MODE: the fewest lanes, down to 8, that still give every lane a unit,
 * for the set and gated products with int8 activations (X8; the
 * mixtures' expert products, whose rows can be 512 inputs); else 32. */
static int cm_lanes(const struct cuda_ctx *ctx, int64_t nu, int mode, int x8)
{
	if (!x8 || (mode != CM_SET && mode != CM_GATED) || ctx->lanes_off)
		return 32;
	return nu <= 8 ? 8 : nu <= 16 ? 16 : 32;
}

/* Elements of one unit of cm_matvec_unit for weights of TYPE, NE0 wide,
 * on N_TOK tokens (the unit's ne). */
static int64_t cm_unit_elems(const struct cuda_ctx *ctx, uint32_t type,
                             int64_t ne0, int32_t n_tok)
{
	if (type == QTYPE_F32 || type == QTYPE_F16)
		return 8;
	if (cm_x8_ok(ctx, type, ne0, n_tok))
		switch (type) {
#define X(T)                                                                   \
	case T:                                                                \
		return cv8_unit<T>::ne;
			CV8_FOR_EACH_TYPE(X)
#undef X
		}
	return 32;
}

extern "C" int cuda_op_matvec_lanes(const struct cuda_ctx *ctx,
                                    const struct cuda_tensor *w, int32_t n_tok,
                                    int gated)
{
	if (!cm_unit_ok(ctx, w, NULL, n_tok))
		return 0;
	return cm_lanes(
	    ctx, w->ne0 / cm_unit_elems(ctx, w->type, w->ne0, n_tok),
	    gated ? CM_GATED : CM_SET, cm_x8_ok(ctx, w->type, w->ne0, n_tok));
}

/* Weight bytes of the parts of PS. */
static size_t cm_parts_bytes(const struct cm_parts *ps)
{
	size_t n = 0;

	for (int k = 0; k < ps->n; k++)
		n += (size_t)ps->p[k].ne1 * ps->p[k].row_size;
	return n;
}

/* The launch of cm_unit_launch_n with row groups of LW (8 or 16) lanes
 * (int8 activations, CM_SET or CM_GATED, KS 1). */
static int cm_unit_launch_lw(struct cuda_ctx *ctx, uint32_t type,
                             const struct cm_parts *ps, int64_t ne0, dim3 grid,
                             int mode, int lw, char *err, size_t errlen)
{
	switch ((type * 4 + (uint32_t)mode) * 2 + (lw == 8)) {
#define L(T, M, W)                                                             \
	case (T * 4 + M) * 2 + (W == 8):                                       \
		cu_launch(ctx, cm_matvec_unit<cm_x8_unit<T>, M, W>, grid,      \
		          32 * CM_WARPS, 0, *ps, ne0, ctx->d_xq, 1, 0);        \
		break;
#define X(T)                                                                   \
	L(T, CM_SET, 8) L(T, CM_SET, 16) L(T, CM_GATED, 8) L(T, CM_GATED, 16)
		CV8_FOR_EACH_TYPE(X)
#undef X
#undef L
	default:
		return cm_bad_type(type, err, errlen);
	}
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

/* One cm_matvec_unit launch of type TYPE (cm_unit_ok holds for every
 * part) in MODE over the rows of PS. With int8 activations (cm_x8_ok),
 * D_X is quantized into ctx->d_xq first unless *XQ_DONE says it already
 * is (a second weight on the same input, in stream order after the
 * first); *XQ_DONE is set once it is. */
static int cm_unit_launch_n(struct cuda_ctx *ctx, uint32_t type,
                            const struct cm_parts *ps, int64_t ne0,
                            const float *d_x, int32_t n_tok, int32_t n_grid,
                            int mode, int *xq_done, char *err, size_t errlen)
{
	const int64_t ue = cm_unit_elems(ctx, type, ne0, n_tok);
	const int x8 = cm_x8_ok(ctx, type, ne0, n_tok);
	const int lw = cm_lanes(ctx, ne0 / ue, mode, x8);
	const int64_t per_warp =
	    (mode == CM_GATED ? CM_ROWS / 2 : CM_ROWS) * (32 / lw);
	const int64_t warps = (ps->rows + per_warp - 1) / per_warp;
	/* (an expert product's slots are rows of other matrices) */
	const int ks =
	    lw != 32 ? 1
	             : cm_ks(ctx, ps->ids != NULL ? warps * n_grid : warps,
	                     ne0 / ue, ue);
	const int64_t per_block = CM_WARPS / ks;
	dim3 grid((unsigned)((warps + per_block - 1) / per_block),
	          (unsigned)n_grid);
	/* (an expert product's rows are known after the routing kernel) */
	const int pf =
	    ps->ids == NULL && cm_parts_bytes(ps) <= ctx->prefetch_max;

	if (x8) {
		if (!*xq_done &&
		    cuda_op_quantize_x8(ctx, d_x, n_tok, ne0, ctx->d_xq, err,
		                        errlen) != 0)
			return -1;
		*xq_done = 1;
		if (lw != 32)
			return cm_unit_launch_lw(ctx, type, ps, ne0, grid, mode,
			                         lw, err, errlen);
		switch (type * 4 + (uint32_t)mode) {
#define X(T)                                                                   \
	case T * 4 + CM_SET:                                                   \
		cu_launch(ctx, cm_matvec_unit<cm_x8_unit<T>, CM_SET>, grid,    \
		          32 * CM_WARPS, 0, *ps, ne0, ctx->d_xq, ks, pf);      \
		break;                                                         \
	case T * 4 + CM_ADD:                                                   \
		cu_launch(ctx, cm_matvec_unit<cm_x8_unit<T>, CM_ADD>, grid,    \
		          32 * CM_WARPS, 0, *ps, ne0, ctx->d_xq, ks, pf);      \
		break;                                                         \
	case T * 4 + CM_GATED:                                                 \
		cu_launch(ctx, cm_matvec_unit<cm_x8_unit<T>, CM_GATED>, grid,  \
		          32 * CM_WARPS, 0, *ps, ne0, ctx->d_xq, ks, pf);      \
		break;                                                         \
	case T * 4 + CM_ROPE:                                                  \
		cu_launch(ctx, cm_matvec_unit<cm_x8_unit<T>, CM_ROPE>, grid,   \
		          32 * CM_WARPS, 0, *ps, ne0, ctx->d_xq, ks, pf);      \
		break;
			CV8_FOR_EACH_TYPE(X)
#undef X
		default:
			return cm_bad_type(type, err, errlen);
		}
		CUDA_TRY_LAUNCH(err, errlen);
		return 0;
	}
	switch (type * 4 + (uint32_t)mode) {
#define X(T)                                                                   \
	case T * 4 + CM_SET:                                                   \
		cu_launch(ctx, cm_matvec_unit<cm_f32_unit<T>, CM_SET>, grid,   \
		          32 * CM_WARPS, 0, *ps, ne0, d_x, ks, pf);            \
		break;                                                         \
	case T * 4 + CM_ADD:                                                   \
		cu_launch(ctx, cm_matvec_unit<cm_f32_unit<T>, CM_ADD>, grid,   \
		          32 * CM_WARPS, 0, *ps, ne0, d_x, ks, pf);            \
		break;                                                         \
	case T * 4 + CM_GATED:                                                 \
		cu_launch(ctx, cm_matvec_unit<cm_f32_unit<T>, CM_GATED>, grid, \
		          32 * CM_WARPS, 0, *ps, ne0, d_x, ks, pf);            \
		break;                                                         \
	case T * 4 + CM_ROPE:                                                  \
		cu_launch(ctx, cm_matvec_unit<cm_f32_unit<T>, CM_ROPE>, grid,  \
		          32 * CM_WARPS, 0, *ps, ne0, d_x, ks, pf);            \
		break;
		CV_FOR_EACH_TYPE(X)
#undef X
	default:
		return cm_bad_type(type, err, errlen);
	}
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

/* cm_unit_launch_n with one slot per token (a dense product). */
static int cm_unit_launch(struct cuda_ctx *ctx, uint32_t type,
                          const struct cm_parts *ps, int64_t ne0,
                          const float *d_x, int32_t n_tok, int mode,
                          int *xq_done, char *err, size_t errlen)
{
	return cm_unit_launch_n(ctx, type, ps, ne0, d_x, n_tok, n_tok, mode,
	                        xq_done, err, errlen);
}

/* The mat-vec path: one launch, grid.y over the tokens; ADD: Y += W X. */
static int cm_matvec_launch(struct cuda_ctx *ctx, const struct cuda_tensor *w,
                            const float *d_x, int32_t n_tok, float *d_y,
                            int add, int *xq_done, char *err, size_t errlen)
{
	dim3 grid((unsigned)((w->ne1 + CM_WARPS - 1) / CM_WARPS),
	          (unsigned)n_tok);
	const uint8_t *wd = (const uint8_t *)w->d;

	if (cm_unit_ok(ctx, w, d_x, n_tok)) {
		struct cm_parts ps;

		memset(&ps, 0, sizeof(ps));
		ps.p[0] = cm_part_of(w, d_y);
		ps.n = 1;
		ps.rows = w->ne1;
		return cm_unit_launch(ctx, w->type, &ps, w->ne0, d_x, n_tok,
		                      add ? CM_ADD : CM_SET, xq_done, err,
		                      errlen);
	}
	switch (w->type) {
#define X(T)                                                                   \
	case T:                                                                \
		cu_launch(ctx, cm_matvec<T>, grid, 32 * CM_WARPS, 0, wd,       \
		          w->row_size, w->ne0, w->ne1, d_x, d_y, add,          \
		          (const int32_t *)NULL, (size_t)0, 1,                 \
		          (const int32_t *)NULL);                              \
		break;
		CQ_FOR_EACH_TYPE(X)
#undef X
	default:
		return cm_bad_type(w->type, err, errlen);
	}
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

/* Rows [r0, r0 + n_rows) of W as fp16 into ctx->d_w16. */
static int cm_dequant_launch(struct cuda_ctx *ctx, const struct cuda_tensor *w,
                             int64_t r0, int64_t n_rows, char *err,
                             size_t errlen)
{
	int64_t n = n_rows * w->ne0;
	const uint8_t *wd = (const uint8_t *)w->d;
	__half *out = (__half *)ctx->d_w16;

	switch (w->type) {
#define X(T)                                                                   \
	case T:                                                                \
		if (w->ne0 % 8 == 0)                                           \
			cu_launch(ctx, cm_dequant8_f16<T>, cm_blocks(n / 8),   \
			          256, 0, wd, w->row_size, w->ne0, r0, n / 8,  \
			          out);                                        \
		else                                                           \
			cu_launch(ctx, cm_dequant_f16<T>, cm_blocks(n), 256,   \
			          0, wd, w->row_size, w->ne0, r0, n, out);     \
		break;
		CQ_FOR_EACH_TYPE(X)
#undef X
	default:
		return cm_bad_type(w->type, err, errlen);
	}
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

/* The GEMM path: X to fp16 once, then W chunk by chunk through cuBLAS. */
static int cm_gemm(struct cuda_ctx *ctx, const struct cuda_tensor *w,
                   const float *d_x, int32_t n_tok, float *d_y, int add,
                   char *err, size_t errlen)
{
	const int64_t n_in = w->ne0, n_out = w->ne1;
	const int64_t nx = (int64_t)n_tok * n_in;
	/* whole multiples of 256 rows: every chunk's output starts 1 KiB
	   aligned, so cuBLAS can pick its sm90 kernels (an odd chunk got a
	   much slower sm75 kernel) */
	int64_t chunk = (int64_t)(ctx->w16_cap / (size_t)n_in);

	if (chunk >= 256)
		chunk -= chunk % 256;
	const float alpha = 1.0f, beta = add ? 1.0f : 0.0f; /* Y += */

	if ((size_t)nx > ctx->x16_cap || chunk < 1) {
		snprintf(err, errlen,
		         "GEMM scratch too small: %lld tokens x %lld inputs "
		         "(have %zu, %zu elements)",
		         (long long)n_tok, (long long)n_in, ctx->x16_cap,
		         ctx->w16_cap);
		return -1;
	}
	cu_launch(ctx, cm_to_f16, cm_blocks(nx), 256, 0, d_x, nx,
	          (__half *)ctx->d_x16);
	CUDA_TRY_LAUNCH(err, errlen);
	for (int64_t r0 = 0; r0 < n_out; r0 += chunk) {
		int64_t nr = n_out - r0 < chunk ? n_out - r0 : chunk;

		if (cm_dequant_launch(ctx, w, r0, nr, err, errlen))
			return -1;
		/* same stream: the next chunk's dequantization waits for
		 * this GEMM to have read the scratch */
		CUBLAS_TRY(cublasGemmEx(ctx->blas, CUBLAS_OP_T, CUBLAS_OP_N,
		                        (int)nr, (int)n_tok, (int)n_in, &alpha,
		                        ctx->d_w16, CUDA_R_16F, (int)n_in,
		                        ctx->d_x16, CUDA_R_16F, (int)n_in,
		                        &beta, d_y + r0, CUDA_R_32F, (int)n_out,
		                        CUBLAS_COMPUTE_32F,
		                        CUBLAS_GEMM_DEFAULT),
		           err, errlen);
	}
	return 0;
}

/* The quantized GEMM path: X to fp16 once, then cuda_op_qgemm. */
static int cm_qgemm(struct cuda_ctx *ctx, const struct cuda_tensor *w,
                    const float *d_x, int32_t n_tok, float *d_y, int add,
                    char *err, size_t errlen)
{
	const int64_t nx = (int64_t)n_tok * w->ne0;

	if (!cuda_op_qgemm_ok(ctx, w, n_tok))
		return cuda_op_qgemm(ctx, w, NULL, n_tok, d_y, add, err,
		                     errlen); /* (its message) */
	cu_launch(ctx, cm_to_f16, cm_blocks(nx), 256, 0, d_x, nx,
	          (__half *)ctx->d_x16);
	CUDA_TRY_LAUNCH(err, errlen);
	return cuda_op_qgemm(ctx, w, ctx->d_x16, n_tok, d_y, add, err, errlen);
}

/* Y = W X, or Y += W X when ADD; FORCE as cuda_op_matmul; XQ_DONE as
 * cm_unit_launch. */
static int cm_matmul(struct cuda_ctx *ctx, const struct cuda_tensor *w,
                     const float *d_x, int32_t n_tok, float *d_y, int force,
                     int add, int *xq_done, char *err, size_t errlen)
{
	int gemm = force >= 2 || (force == 0 && n_tok >= CUDA_GEMM_MIN_TOKENS);

	if (!cuda_ops_type_ok(w->type))
		return cm_bad_type(w->type, err, errlen);
	if (force == 3 ||
	    (gemm && force == 0 && n_tok <= cuda_knobs()->qgemm_max &&
	     cuda_op_qgemm_ok(ctx, w, n_tok)))
		return cm_qgemm(ctx, w, d_x, n_tok, d_y, add, err, errlen);
	if (gemm)
		return cm_gemm(ctx, w, d_x, n_tok, d_y, add, err, errlen);
	return cm_matvec_launch(ctx, w, d_x, n_tok, d_y, add, xq_done, err,
	                        errlen);
}

extern "C" int cuda_op_matmul(struct cuda_ctx *ctx, const struct cuda_tensor *w,
                              const float *d_x, int32_t n_tok, float *d_y,
                              int force, char *err, size_t errlen)
{
	int xq_done = 0;

	return cm_matmul(ctx, w, d_x, n_tok, d_y, force, 0, &xq_done, err,
	                 errlen);
}

extern "C" int cuda_op_matvec_bias(struct cuda_ctx *ctx,
                                   const struct cuda_tensor *w,
                                   const float *d_x, int32_t n_tok,
                                   const float *d_b, float *d_y, char *err,
                                   size_t errlen)
{
	int xq_done = 0;
	struct cm_parts ps;

	if (d_b == NULL || ctx->moe_fuse_off || !cm_unit_ok(ctx, w, d_x, n_tok))
		return cm_matmul(ctx, w, d_x, n_tok, d_y, 1, 0, &xq_done, err,
		                 errlen) ||
		               (d_b != NULL &&
		                cuda_op_add_bias(ctx, d_y, d_b, (int32_t)w->ne1,
		                                 n_tok, err, errlen))
		           ? -1
		           : 0;
	memset(&ps, 0, sizeof(ps));
	ps.p[0] = cm_part_of(w, d_y);
	ps.p[0].b = d_b; /* (CM_SET's epilogue adds it: one rounding) */
	ps.n = 1;
	ps.rows = w->ne1;
	return cm_unit_launch(ctx, w->type, &ps, w->ne0, d_x, n_tok, CM_SET,
	                      &xq_done, err, errlen);
}

extern "C" int cuda_op_matmul_xq(struct cuda_ctx *ctx,
                                 const struct cuda_tensor *w, const float *d_x,
                                 const void *d_xq, int32_t n_tok, float *d_y,
                                 char *err, size_t errlen)
{
	int xq_done = cm_xq_given(ctx, d_xq);

	return cm_matmul(ctx, w, d_x, n_tok, d_y, 0, 0, &xq_done, err, errlen);
}

extern "C" int cuda_op_matmul_add_copy_ok(const struct cuda_ctx *ctx,
                                          const struct cuda_tensor *w,
                                          const float *d_x, int32_t n_tok)
{
	return n_tok < CUDA_GEMM_MIN_TOKENS && cm_unit_ok(ctx, w, d_x, n_tok);
}

extern "C" int cuda_op_matmul_add_copy(struct cuda_ctx *ctx,
                                       const struct cuda_tensor *w,
                                       const float *d_x, const void *d_xq,
                                       int32_t n_tok, float *d_y, float *d_copy,
                                       char *err, size_t errlen)
{
	int xq_done = cm_xq_given(ctx, d_xq);
	struct cm_parts ps;

	if (!cuda_op_matmul_add_copy_ok(ctx, w, d_x, n_tok)) {
		snprintf(err, errlen,
		         "matmul_add_copy: not on the fast mat-vec (%s, %d "
		         "tokens)",
		         qtype_name(w->type), n_tok);
		return -1;
	}
	memset(&ps, 0, sizeof(ps));
	ps.p[0] = cm_part_of(w, d_y);
	ps.n = 1;
	ps.rows = w->ne1;
	ps.copy = d_copy;
	return cm_unit_launch(ctx, w->type, &ps, w->ne0, d_x, n_tok, CM_ADD,
	                      &xq_done, err, errlen);
}

extern "C" int cuda_op_matmul_add_bias(struct cuda_ctx *ctx,
                                       const struct cuda_tensor *w,
                                       const float *d_x, const void *d_xq,
                                       int32_t n_tok, const float *d_b,
                                       float *d_y, float *d_tmp, char *err,
                                       size_t errlen)
{
	int xq_done = cm_xq_given(ctx, d_xq);
	struct cm_parts ps;

	if (ctx->moe_fuse_off || n_tok >= CUDA_GEMM_MIN_TOKENS ||
	    !cm_unit_ok(ctx, w, d_x, n_tok))
		return cm_matmul(ctx, w, d_x, n_tok, d_tmp, 0, 0, &xq_done, err,
		                 errlen) ||
		               cuda_op_add_bias(ctx, d_tmp, d_b,
		                                (int32_t)w->ne1, n_tok, err,
		                                errlen) ||
		               cuda_op_add(ctx, d_y, d_tmp,
		                           (int64_t)n_tok * w->ne1, err, errlen)
		           ? -1
		           : 0;
	memset(&ps, 0, sizeof(ps));
	ps.p[0] = cm_part_of(w, d_y);
	ps.p[0].b = d_b; /* (CM_ADD's epilogue: y + (W x + b)) */
	ps.n = 1;
	ps.rows = w->ne1;
	return cm_unit_launch(ctx, w->type, &ps, w->ne0, d_x, n_tok, CM_ADD,
	                      &xq_done, err, errlen);
}

extern "C" int cuda_op_matmul_add(struct cuda_ctx *ctx,
                                  const struct cuda_tensor *w, const float *d_x,
                                  const void *d_xq, int32_t n_tok, float *d_y,
                                  int force, char *err, size_t errlen)
{
	int xq_done = cm_xq_given(ctx, d_xq);

	return cm_matmul(ctx, w, d_x, n_tok, d_y, force, 1, &xq_done, err,
	                 errlen);
}

/* True when A and B can share one unit mat-vec launch over input X
 * (N_TOK tokens). */
static int cm_fusable(const struct cuda_ctx *ctx, const struct cuda_tensor *a,
                      const struct cuda_tensor *b, const float *d_x,
                      int32_t n_tok)
{
	return a->type == b->type && a->ne0 == b->ne0 &&
	       cm_unit_ok(ctx, a, d_x, n_tok) && cm_unit_ok(ctx, b, d_x, n_tok);
}

/* cuda_op_matmul_qkv; ROPE not NULL: every product takes the unit
 * mat-vec (the caller checked) and its epilogue does RoPE and the KV
 * store (cm_rope_pair), the parts' roles set here. */
static int cm_qkv(struct cuda_ctx *ctx, const struct cuda_tensor *wq,
                  const struct cuda_tensor *wk, const struct cuda_tensor *wv,
                  const float *d_bq, const float *d_bk, const float *d_bv,
                  const float *d_x, const void *d_xq, int32_t n_tok, float *d_q,
                  float *d_k, float *d_v, const struct cm_rope *rope, char *err,
                  size_t errlen)
{
	const struct cuda_tensor *w[3] = {wq, wk, wv};
	const float *b[3] = {d_bq, d_bk, d_bv};
	float *y[3] = {d_q, d_k, d_v};
	/* one quantization for the three, or none (cuda_op_rmsnorm_x8) */
	int xq_done = cm_xq_given(ctx, d_xq);
	int i = 0;

	/* one launch for the leading weights that share a unit type (all
	   three, or Q and K when V has another type, as the Q4_K_M mix's
	   Q6_K V of some layers), the biases in its epilogue */
	if (n_tok < CUDA_GEMM_MIN_TOKENS &&
	    cm_fusable(ctx, wq, wk, d_x, n_tok)) {
		struct cm_parts ps;

		memset(&ps, 0, sizeof(ps));
		ps.n = cm_fusable(ctx, wq, wv, d_x, n_tok) ? 3 : 2;
		if (rope != NULL)
			ps.rope = *rope;
		for (int k = 0; k < ps.n; k++) {
			ps.p[k] = cm_part_of(w[k], y[k]);
			ps.p[k].b = b[k];
			ps.rows += w[k]->ne1;
			if (rope != NULL)
				ps.rope.roles |= (CM_ROLE_Q + k) << (2 * k);
		}
		if (cm_unit_launch(ctx, wq->type, &ps, wq->ne0, d_x, n_tok,
		                   rope != NULL ? CM_ROPE : CM_SET, &xq_done,
		                   err, errlen))
			return -1;
		i = ps.n;
	}
	for (; i < 3; i++) {
		if (n_tok < CUDA_GEMM_MIN_TOKENS &&
		    cm_unit_ok(ctx, w[i], d_x, n_tok)) {
			struct cm_parts ps;

			memset(&ps, 0, sizeof(ps));
			ps.p[0] = cm_part_of(w[i], y[i]);
			ps.p[0].b = b[i];
			ps.n = 1;
			ps.rows = w[i]->ne1;
			if (rope != NULL) {
				ps.rope = *rope;
				ps.rope.roles = CM_ROLE_Q + i;
			}
			if (cm_unit_launch(ctx, w[i]->type, &ps, w[i]->ne0, d_x,
			                   n_tok,
			                   rope != NULL ? CM_ROPE : CM_SET,
			                   &xq_done, err, errlen))
				return -1;
			continue;
		}
		if (cm_matmul(ctx, w[i], d_x, n_tok, y[i], 0, 0, &xq_done, err,
		              errlen) ||
		    (b[i] != NULL &&
		     cuda_op_add_bias(ctx, y[i], b[i], (int32_t)w[i]->ne1,
		                      n_tok, err, errlen)))
			return -1;
	}
	return 0;
}

extern "C" int
cuda_op_matmul_qkv(struct cuda_ctx *ctx, const struct cuda_tensor *wq,
                   const struct cuda_tensor *wk, const struct cuda_tensor *wv,
                   const float *d_bq, const float *d_bk, const float *d_bv,
                   const float *d_x, const void *d_xq, int32_t n_tok,
                   float *d_q, float *d_k, float *d_v, char *err, size_t errlen)
{
	return cm_qkv(ctx, wq, wk, wv, d_bq, d_bk, d_bv, d_x, d_xq, n_tok, d_q,
	              d_k, d_v, NULL, err, errlen);
}

extern "C" int cuda_op_matmul_qkv_rope(
    struct cuda_ctx *ctx, const struct cuda_tensor *wq,
    const struct cuda_tensor *wk, const struct cuda_tensor *wv,
    const float *d_bq, const float *d_bk, const float *d_bv, const float *d_x,
    const void *d_xq, int32_t n_tok, float *d_q, float *d_k, float *d_v,
    const struct cuda_rope_kv *rk, int *fused, char *err, size_t errlen)
{
	/* a warp's two rows are a rotated pair (cm_rope_map): even head
	   sizes and rotations, two rows a warp; the cos and sin tabled; an
	   fp16 cache (a q8_0 block needs 32 values no warp of the products
	   holds: the unfused store quantizes them) */
	const int fuse =
	    CM_ROWS == 2 && rk->d_cs != NULL && !ctx->kv_q8 &&
	    rk->head_dim % 2 == 0 && rk->n_rot % 2 == 0 &&
	    n_tok < CUDA_GEMM_MIN_TOKENS && cm_unit_ok(ctx, wq, d_x, n_tok) &&
	    cm_unit_ok(ctx, wk, d_x, n_tok) && cm_unit_ok(ctx, wv, d_x, n_tok);

	if (fused != NULL)
		*fused = fuse;
	if (!fuse)
		return cuda_op_matmul_qkv(ctx, wq, wk, wv, d_bq, d_bk, d_bv,
		                          d_x, d_xq, n_tok, d_q, d_k, d_v, err,
		                          errlen) ||
		               cuda_op_rope_kv_store(
		                   ctx, d_q, d_k, d_v, n_tok, rk->n_head,
		                   rk->n_kv, rk->head_dim, rk->n_rot,
		                   rk->d_inv_freq, rk->mscale, rk->pos0,
		                   rk->neox, rk->n_ctx, rk->il, rk->d_kc,
		                   rk->d_vc, err, errlen)
		           ? -1
		           : 0;
	struct cm_rope rope;

	memset(&rope, 0, sizeof(rope));
	rope.cs = (const float2 *)rk->d_cs;
	rope.dpos = ctx->d_pos;
	rope.kc = (__half *)rk->d_kc;
	rope.vc = (__half *)rk->d_vc;
	rope.pos0 = rk->pos0;
	rope.n_rot = rk->n_rot;
	rope.neox = rk->neox;
	rope.hd = rk->head_dim;
	rope.n_kv = rk->n_kv;
	rope.n_ctx = rk->n_ctx;
	rope.il = rk->il;
	return cm_qkv(ctx, wq, wk, wv, d_bq, d_bk, d_bv, d_x, d_xq, n_tok, d_q,
	              d_k, d_v, &rope, err, errlen);
}

extern "C" int cuda_op_matmul_gated(struct cuda_ctx *ctx, enum model_act act,
                                    const struct cuda_tensor *gate,
                                    const struct cuda_tensor *up,
                                    const float *d_x, const void *d_xq,
                                    int32_t n_tok, float *d_g, float *d_u,
                                    char *err, size_t errlen)
{
	struct cm_parts ps;
	/* one quantization for gate and up, or none (cuda_op_rmsnorm_x8) */
	int xq_done = cm_xq_given(ctx, d_xq);

	/* the fused epilogue (CM_GATED) where both products take the unit
	   mat-vec; else the two products and cuda_op_gate_act */
	if (n_tok >= CUDA_GEMM_MIN_TOKENS || gate->ne1 != up->ne1 ||
	    !cu_act_ok(act) || !cm_fusable(ctx, gate, up, d_x, n_tok))
		return cm_matmul(ctx, gate, d_x, n_tok, d_g, 0, 0, &xq_done,
		                 err, errlen) ||
		               cm_matmul(ctx, up, d_x, n_tok, d_u, 0, 0,
		                         &xq_done, err, errlen) ||
		               cuda_op_gate_act(ctx, act, d_g, d_u,
		                                (int64_t)n_tok * gate->ne1, err,
		                                errlen)
		           ? -1
		           : 0;
	memset(&ps, 0, sizeof(ps));
	ps.p[0] = cm_part_of(gate, d_g);
	ps.p[1] = cm_part_of(up, NULL); /* read only: its row r */
	ps.n = 1;
	ps.rows = gate->ne1;
	ps.act = (int)act;
	return cm_unit_launch(ctx, gate->type, &ps, gate->ne0, d_x, n_tok,
	                      CM_GATED, &xq_done, err, errlen);
}

/* ------------------------------------------------ a mixture's experts */

/* Bytes between two matrices of the stack W. */
static size_t cm_estride(const struct cuda_tensor *w)
{
	return (size_t)w->ne1 * w->row_size;
}

/* D_Y[s] = W_{ids[s]} X[s / X_DIV] for N_SLOTS slots (X: N_X rows):
 * the unit mat-vec where W's type has one, else the element-wise one
 * (fp32 activations, as for a dense product of that type). */
static int cm_moe_product(struct cuda_ctx *ctx, const struct cuda_tensor *w,
                          const float *d_x, int32_t n_x, int32_t n_slots,
                          int x_div, const int32_t *d_ids,
                          const int32_t *d_perm, float *d_y, int *xq_done,
                          char *err, size_t errlen)
{
	const uint8_t *wd = (const uint8_t *)w->d;
	dim3 grid((unsigned)((w->ne1 + CM_WARPS - 1) / CM_WARPS),
	          (unsigned)n_slots);

	if (cm_unit_ok(ctx, w, d_x, n_x)) {
		struct cm_parts ps;

		memset(&ps, 0, sizeof(ps));
		ps.p[0] = cm_part_of(w, d_y);
		ps.n = 1;
		ps.rows = w->ne1;
		ps.ids = d_ids;
		ps.estride = cm_estride(w);
		ps.x_div = x_div;
		ps.perm = d_perm;
		return cm_unit_launch_n(ctx, w->type, &ps, w->ne0, d_x, n_x,
		                        n_slots, CM_SET, xq_done, err, errlen);
	}
	switch (w->type) {
#define X(T)                                                                   \
	case T:                                                                \
		cu_launch(ctx, cm_matvec<T>, grid, 32 * CM_WARPS, 0, wd,       \
		          w->row_size, w->ne0, w->ne1, d_x, d_y, 0, d_ids,     \
		          cm_estride(w), x_div, d_perm);                       \
		break;
		CQ_FOR_EACH_TYPE(X)
#undef X
	default:
		return cm_bad_type(w->type, err, errlen);
	}
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

/* Slots a launch's grid.y can hold. */
#define CM_MAX_SLOTS 65535

/* The checks of the expert products: a stack's slots in one grid. */
static int cm_moe_check(const struct cuda_tensor *w, int32_t n_slots, char *err,
                        size_t errlen)
{
	if (n_slots < 1 || n_slots > CM_MAX_SLOTS || w->ne2 < 1) {
		snprintf(err, errlen,
		         "expert product: %d slots of a stack of %lld (the "
		         "GPU takes 1..%d slots)",
		         n_slots, (long long)w->ne2, CM_MAX_SLOTS);
		return -1;
	}
	return 0;
}

extern "C" int cuda_op_moe_gated(struct cuda_ctx *ctx, enum model_act act,
                                 const struct cuda_tensor *gate,
                                 const struct cuda_tensor *up, const float *d_x,
                                 const void *d_xq, int32_t n_tok, int32_t k,
                                 const int32_t *d_ids, const int32_t *d_perm,
                                 const float *d_gate_b, const float *d_up_b,
                                 float *d_g, float *d_u, char *err,
                                 size_t errlen)
{
	const int32_t n_slots = n_tok * k;
	int xq_done = cm_xq_given(ctx, d_xq);
	struct cm_parts ps;

	if (cm_moe_check(gate, n_slots, err, errlen))
		return -1;
	/* a prefill chunk's: one product per expert (cuda_moe.cu) */
	if (cuda_op_moe_grouped(ctx, gate, n_slots) &&
	    cuda_op_moe_grouped(ctx, up, n_slots))
		return cuda_op_moe_gated_grouped(ctx, act, gate, up, d_x, n_tok,
		                                 k, d_ids, d_gate_b, d_up_b,
		                                 d_g, d_u, err, errlen);
	/* the fused epilogue where gate and up take the unit mat-vec (and
	   lie alike in their stacks), the biases too (between the products
	   and the activation: gpt-oss); else the two products, the biases
	   and cuda_op_gate_act (ctx->moe_fuse_off: always, to compare) */
	if (gate->ne1 != up->ne1 || gate->row_size != up->row_size ||
	    !cu_act_ok(act) || (d_gate_b == NULL) != (d_up_b == NULL) ||
	    ctx->moe_fuse_off || !cm_fusable(ctx, gate, up, d_x, n_tok))
		return cm_moe_product(ctx, gate, d_x, n_tok, n_slots, k, d_ids,
		                      d_perm, d_g, &xq_done, err, errlen) ||
		               cm_moe_product(ctx, up, d_x, n_tok, n_slots, k,
		                              d_ids, d_perm, d_u, &xq_done, err,
		                              errlen) ||
		               (d_gate_b != NULL &&
		                (cuda_op_moe_add_bias(ctx, d_g, d_gate_b, d_ids,
		                                      n_slots, gate->ne1, err,
		                                      errlen) ||
		                 cuda_op_moe_add_bias(ctx, d_u, d_up_b, d_ids,
		                                      n_slots, up->ne1, err,
		                                      errlen))) ||
		               cuda_op_gate_act(ctx, act, d_g, d_u,
		                                (int64_t)n_slots * gate->ne1,
		                                err, errlen)
		           ? -1
		           : 0;
	memset(&ps, 0, sizeof(ps));
	ps.p[0] = cm_part_of(gate, d_g);
	ps.p[1] = cm_part_of(up, NULL); /* read only: its row r */
	ps.p[0].b = d_gate_b;           /* ([n_expert][ne1]: the epilogue's) */
	ps.p[1].b = d_up_b;
	ps.n = 1;
	ps.rows = gate->ne1;
	ps.act = (int)act;
	ps.ids = d_ids;
	ps.estride = cm_estride(gate);
	ps.x_div = k;
	ps.perm = d_perm;
	return cm_unit_launch_n(ctx, gate->type, &ps, gate->ne0, d_x, n_tok,
	                        n_slots, CM_GATED, &xq_done, err, errlen);
}

extern "C" int cuda_op_moe_down(struct cuda_ctx *ctx,
                                const struct cuda_tensor *down,
                                const float *d_h, int32_t n_slots,
                                const int32_t *d_ids, const int32_t *d_perm,
                                const float *d_down_b, float *d_y, char *err,
                                size_t errlen)
{
	int xq_done = 0;

	if (cm_moe_check(down, n_slots, err, errlen))
		return -1;
	if (cuda_op_moe_grouped(ctx, down, n_slots))
		return cuda_op_moe_down_grouped(ctx, down, d_h, n_slots, d_ids,
		                                d_down_b, d_y, err, errlen);
	return cm_moe_product(ctx, down, d_h, n_slots, n_slots, 1, d_ids,
	                      d_perm, d_y, &xq_done, err, errlen) ||
	               (d_down_b != NULL &&
	                cuda_op_moe_add_bias(ctx, d_y, d_down_b, d_ids, n_slots,
	                                     down->ne1, err, errlen))
	           ? -1
	           : 0;
}

extern "C" int cuda_op_moe_down_sum(struct cuda_ctx *ctx,
                                    const struct cuda_tensor *down,
                                    const float *d_h, int32_t n_tok, int32_t k,
                                    const int32_t *d_ids, const int32_t *d_perm,
                                    const float *d_down_b, const float *d_w,
                                    float *d_y, float *d_out, int add,
                                    char *err, size_t errlen)
{
	const int32_t n_slots = n_tok * k;

	if (cm_moe_check(down, n_slots, err, errlen))
		return -1;
	/* the fused launch: the unit mat-vec with int8 activations, the
	   slots of a token in one block; else the products (or the grouped
	   ones of a chunk), then mr_combine */
	if (ctx->moe_fuse_off || k > CM_MAX_SUM_SLOTS ||
	    cuda_op_moe_grouped(ctx, down, n_slots) ||
	    !cm_unit_ok(ctx, down, d_h, n_slots) ||
	    !cm_x8_ok(ctx, down->type, down->ne0, n_slots))
		return cuda_op_moe_down(ctx, down, d_h, n_slots, d_ids, d_perm,
		                        d_down_b, d_y, err, errlen) ||
		               cuda_op_moe_combine(ctx, d_y, d_w, n_tok, k,
		                                   down->ne1, d_out, add, err,
		                                   errlen)
		           ? -1
		           : 0;
	const int64_t ue = cm_unit_elems(ctx, down->type, down->ne0, n_slots);
	const int lw = cm_lanes(ctx, down->ne0 / ue, CM_SET, 1);
	const int64_t rb = CM_ROWS * (32 / lw);
	dim3 grid((unsigned)((down->ne1 + rb - 1) / rb), (unsigned)n_tok);

	if (cuda_op_quantize_x8(ctx, d_h, n_slots, down->ne0, ctx->d_xq, err,
	                        errlen) != 0)
		return -1;
	switch (down->type * 4 + (lw == 8 ? 1 : lw == 16 ? 2 : 0)) {
#define L(T, W)                                                                \
	case T * 4 + (W == 8 ? 1 : W == 16 ? 2 : 0):                           \
		cu_launch(ctx, cm_moe_down_sum<cm_x8_unit<T>, W>, grid,        \
		          32 * k, 0, (const uint8_t *)down->d, down->row_size, \
		          cm_estride(down), down->ne0, down->ne1, ctx->d_xq,   \
		          d_ids, d_w, d_down_b, k, d_out, add);                \
		break;
#define X(T) L(T, 8) L(T, 16) L(T, 32)
		CV8_FOR_EACH_TYPE(X)
#undef X
#undef L
	default:
		return cm_bad_type(down->type, err, errlen);
	}
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

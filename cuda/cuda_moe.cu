/*
 * cuda_moe.cu - a mixture of experts' routing and the weighted sum of its
 * experts' outputs on the GPU (cuda_ops.h; the expert products themselves
 * are mat-vecs of cuda_matmul.cu, or for a prefill chunk the grouped
 * products at the end of this file).
 *
 * NOTES ON THE DESIGN
 *
 * The routing is model_moe_route's arithmetic (model.c), one warp a
 * token: the router's logits spread over the lanes (logit i on lane
 * i % 32), the softmax's maximum and sum reduced over the warp (the sum in
 * double, as the CPU's; the order of its additions differs, far below
 * float's rounding), then k rounds of a warp-wide arg-max over the experts
 * not yet taken, the larger value winning and the lower index among
 * equals: the CPU's scan keeps the first maximum. The choice stays on the
 * device (the expert products read it), so a decode step has no host
 * round trip and its graph captures it. Lane 0 then weights the choice in
 * the CPU's order of operations.
 *
 * Grouped expert products (a prefill chunk's, cuda_op_moe_grouped): the
 * mat-vec runs every (token, expert) slot on its own and decodes the
 * expert's blocks once per slot, which bounds a 512-token chunk
 * (BENCHMARKS.md, issue 30). Here each expert's slots are one matrix
 * product on the tensor cores: mr_tiles counts the slots of each expert
 * on the device (no host round trip: a captured graph could hold it),
 * orders them by expert and cuts each expert's run into tiles of MR_BN
 * slots; a block of mr_gemm takes MR_BM rows of one expert's matrix and
 * one tile, decodes the rows' blocks to fp16 in shared memory as it goes
 * (cq_dec8, 8 elements a thread: the dense GEMM's cm_dequant8_f16
 * without its round trip through ctx->d_w16), gathers the tile's input
 * rows converted to fp16, and accumulates in fp32 with WMMA 16x16x16
 * fragments. The roundings are the dense GEMM's (weights and inputs to
 * fp16, fp32 sums), so the values equal the mat-vec's within them. The
 * epilogue adds the biases, applies the gated activation (gate and up in
 * the same block: one X tile, two weight tiles) and scatters each slot's
 * row back to its place. A slot's sums do not depend on the other slots
 * of its tile (each column of a tensor-core product is summed alone), so
 * the order within an expert, which varies from run to run, changes no
 * value.
 */
#include "cuda_act.cuh"
#include "cuda_check.cuh"
#include "cuda_dec8.cuh"
#include "cuda_launch.cuh"
#include "cuda_ops.h"
#include "cuda_quant.cuh"
#include "cuda_reduce.cuh"

#include <math.h>
#include <mma.h>
#include <stdio.h>
#include <string.h>

/* Experts a lane holds (1024 experts at most: MODEL_MAX_EXPERTS). */
#define MR_PER_LANE 32
/* Tokens (warps) per routing block. */
#define MR_WARPS 4

/* The better of two candidates (value, index): the larger value, the
 * lower index among equals; an index < 0 is no candidate. */
static __device__ __forceinline__ bool mr_better(float v, int i, float bv,
                                                 int bi)
{
	return i >= 0 && (bi < 0 || v > bv || (v == bv && i < bi));
}

/* The choice of token blockIdx.x * MR_WARPS + warp (cuda_op_moe_route),
 * PL experts a lane (32 PL >= N_EXPERT: the loops over a lane's experts
 * run PL times, not MR_PER_LANE; the experts past N_EXPERT were skipped
 * before, so the values are the same). */
template <int PL>
__global__ void mr_route(const float *rl, int32_t n_tok, int32_t n_expert,
                         int32_t k, int gating, int norm_w, float w_scale,
                         int32_t *ids, float *w, int32_t *tr_ids, float *tr_w)
{
	cu_pdl_sync(); /* first: cuda_launch.cuh */
	const int lane = threadIdx.x & 31;
	const int64_t t =
	    (int64_t)blockIdx.x * MR_WARPS + (int64_t)(threadIdx.x >> 5);

	if (t >= n_tok)
		return;
	const float *r = rl + t * n_expert;
	float p[PL];
	uint32_t taken = 0;
	float mx = -INFINITY;

	for (int q = 0; q < PL; q++) {
		const int i = q * 32 + lane;

		p[q] = i < n_expert ? r[i] : -INFINITY;
		if (i < n_expert && p[q] > mx)
			mx = p[q];
	}
	if (gating == MODEL_MOE_SOFTMAX) {
		double sum = 0.0;

		for (int o = 16; o > 0; o >>= 1)
			mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
		for (int q = 0; q < PL; q++)
			if (q * 32 + lane < n_expert) {
				p[q] = expf(p[q] - mx);
				sum += (double)p[q];
			}
		for (int o = 16; o > 0; o >>= 1)
			sum += __shfl_xor_sync(0xffffffffu, sum, o);
		const float inv = (float)(1.0 / sum);

		for (int q = 0; q < PL; q++)
			p[q] = __fmul_rn(p[q], inv);
	}
	/* k rounds of the arg-max over the experts not taken */
	float wv[MODEL_MAX_EXPERTS_USED];
	int32_t iv[MODEL_MAX_EXPERTS_USED];
	float sum_w = 0.0f;

	for (int j = 0; j < k; j++) {
		float bv = 0.0f;
		int bi = -1;

		for (int q = 0; q < PL; q++) {
			const int i = q * 32 + lane;

			if (i < n_expert && !(taken >> q & 1) &&
			    mr_better(p[q], i, bv, bi)) {
				bv = p[q];
				bi = i;
			}
		}
		for (int o = 16; o > 0; o >>= 1) {
			const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
			const int oi = __shfl_xor_sync(0xffffffffu, bi, o);

			if (mr_better(ov, oi, bv, bi)) {
				bv = ov;
				bi = oi;
			}
		}
		if (bi % 32 == lane)
			taken |= 1u << (bi / 32);
		wv[j] = bv;
		iv[j] = bi;
		sum_w = __fadd_rn(sum_w, bv);
	}
	if (lane != 0)
		return;
	if (gating == MODEL_MOE_TOPK_SOFTMAX) { /* of the chosen only */
		const float m0 = wv[0];
		double sum = 0.0;

		for (int j = 0; j < k; j++) {
			wv[j] = expf(wv[j] - m0);
			sum += (double)wv[j];
		}
		const float inv = (float)(1.0 / sum);

		sum_w = 0.0f;
		for (int j = 0; j < k; j++) {
			wv[j] = __fmul_rn(wv[j], inv);
			sum_w = __fadd_rn(sum_w, wv[j]);
		}
	}
	if (norm_w) { /* ggml clamps the sum at fp16's smallest normal */
		const float d =
		    sum_w > 6.103515625e-5f ? sum_w : 6.103515625e-5f;

		for (int j = 0; j < k; j++)
			wv[j] = __fdiv_rn(wv[j], d);
	}
	if (w_scale != 0.0f && w_scale != 1.0f)
		for (int j = 0; j < k; j++)
			wv[j] = __fmul_rn(wv[j], w_scale);
	for (int j = 0; j < k; j++) {
		ids[t * k + j] = iv[j];
		w[t * k + j] = wv[j];
		if (tr_ids != NULL && t == n_tok - 1) {
			tr_ids[j] = iv[j];
			tr_w[j] = wv[j];
		}
	}
}

/* OUT[t][i] (+)= sum over j in order of W[t k + j] * A[t k + j][i]: the
 * CPU's products and sums, unfused. */
__global__ void mr_combine(const float *a, const float *w, int64_t n_tok,
                           int32_t k, int64_t n, float *out, int add)
{
	cu_pdl_sync(); /* first: cuda_launch.cuh */
	const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (idx >= n_tok * n)
		return;
	const int64_t t = idx / n, i = idx % n;
	const float *at = a + (size_t)t * k * n + i;
	const float *wt = w + (size_t)t * k;
	float y = __fmul_rn(wt[0], at[0]);

	for (int32_t j = 1; j < k; j++)
		y = __fadd_rn(y, __fmul_rn(wt[j], at[(size_t)j * n]));
	out[idx] = add ? __fadd_rn(out[idx], y) : y;
}

extern "C" int cuda_op_moe_route(struct cuda_ctx *ctx, const float *d_rl,
                                 int32_t n_tok, int32_t n_expert, int32_t k,
                                 int gating, int norm_w, float w_scale,
                                 int32_t *d_ids, float *d_w,
                                 int32_t *d_trace_ids, float *d_trace_w,
                                 char *err, size_t errlen)
{
	if (n_expert < 1 || n_expert > 32 * MR_PER_LANE || k < 1 ||
	    k > n_expert || k > MODEL_MAX_EXPERTS_USED) {
		snprintf(err, errlen,
		         "mixture routing: %d of %d experts (the GPU takes up "
		         "to %d of %d)",
		         k, n_expert, MODEL_MAX_EXPERTS_USED, 32 * MR_PER_LANE);
		return -1;
	}
	const unsigned nb = (unsigned)((n_tok + MR_WARPS - 1) / MR_WARPS);
#define R(PL)                                                                  \
	cu_launch(ctx, mr_route<PL>, nb, 32 * MR_WARPS, 0, d_rl, n_tok,        \
	          n_expert, k, gating, norm_w, w_scale, d_ids, d_w,            \
	          d_trace_ids, d_trace_w)
	if (n_expert <= 32 * 4)
		R(4);
	else if (n_expert <= 32 * 8)
		R(8);
	else
		R(MR_PER_LANE);
#undef R
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

extern "C" int cuda_op_moe_combine(struct cuda_ctx *ctx, const float *d_a,
                                   const float *d_w, int32_t n_tok, int32_t k,
                                   int64_t n, float *d_out, int add, char *err,
                                   size_t errlen)
{
	const int64_t total = (int64_t)n_tok * n;

	cu_launch(ctx, mr_combine, (unsigned)((total + 255) / 256), 256, 0, d_a,
	          d_w, (int64_t)n_tok, k, n, d_out, add);
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

/* Y[s][i] += B[IDS[s]][i] for N_SLOTS rows of N: each slot's expert's
 * bias (gpt-oss). */
__global__ void mr_add_bias(float *y, const float *b, const int32_t *ids,
                            int64_t n_slots, int64_t n)
{
	cu_pdl_sync(); /* first: cuda_launch.cuh */
	const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (idx >= n_slots * n)
		return;
	const int64_t s = idx / n, i = idx % n;

	y[idx] = __fadd_rn(y[idx], b[(int64_t)ids[s] * n + i]);
}

extern "C" int cuda_op_moe_add_bias(struct cuda_ctx *ctx, float *d_y,
                                    const float *d_b, const int32_t *d_ids,
                                    int32_t n_slots, int64_t n, char *err,
                                    size_t errlen)
{
	const int64_t total = (int64_t)n_slots * n;

	cu_launch(ctx, mr_add_bias, (unsigned)((total + 255) / 256), 256, 0,
	          d_y, d_b, d_ids, (int64_t)n_slots, n);
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

/* Y[s][i] *= SCALE[IDS[s]] for N_SLOTS rows of N: each slot's expert's
 * output scale (gemma4). */
__global__ void mr_scale(float *y, const float *scale, const int32_t *ids,
                         int64_t n_slots, int64_t n)
{
	cu_pdl_sync(); /* first: cuda_launch.cuh */
	const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (idx >= n_slots * n)
		return;
	y[idx] = __fmul_rn(y[idx], scale[ids[idx / n]]);
}

extern "C" int cuda_op_moe_scale(struct cuda_ctx *ctx, float *d_y,
                                 const float *d_scale, const int32_t *d_ids,
                                 int32_t n_slots, int64_t n, char *err,
                                 size_t errlen)
{
	const int64_t total = (int64_t)n_slots * n;

	if (total == 0)
		return 0;
	cu_launch(ctx, mr_scale, (unsigned)((total + 255) / 256), 256, 0, d_y,
	          d_scale, d_ids, (int64_t)n_slots, n);
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

/* Threads of the sorting block. */
#define MR_SORT_THREADS 1024

/* PERM = the N slots grouped by their expert IDS[s] (a counting sort in
 * one block: the counts, their prefix sums, each slot placed at its
 * expert's next free place; the order within an expert varies from run
 * to run, which no value depends on: each slot is computed alone). */
__global__ void mr_sort(const int32_t *ids, int32_t n, int32_t n_expert,
                        int32_t *perm)
{
	__shared__ int32_t at[32 * MR_PER_LANE];

	cu_pdl_sync(); /* first: cuda_launch.cuh */
	for (int32_t e = threadIdx.x; e < n_expert; e += blockDim.x)
		at[e] = 0;
	__syncthreads();
	for (int32_t s = threadIdx.x; s < n; s += blockDim.x)
		atomicAdd(&at[ids[s]], 1);
	__syncthreads();
	if (threadIdx.x == 0) { /* exclusive prefix sums, in place */
		int32_t sum = 0;

		for (int32_t e = 0; e < n_expert; e++) {
			const int32_t c = at[e];

			at[e] = sum;
			sum += c;
		}
	}
	__syncthreads();
	for (int32_t s = threadIdx.x; s < n; s += blockDim.x)
		perm[atomicAdd(&at[ids[s]], 1)] = s;
}

extern "C" int cuda_op_moe_sort(struct cuda_ctx *ctx, const int32_t *d_ids,
                                int32_t n_slots, int32_t n_expert,
                                int32_t *d_perm, char *err, size_t errlen)
{
	if (n_expert < 1 || n_expert > 32 * MR_PER_LANE) {
		snprintf(err, errlen, "expert sort: %d experts (up to %d)",
		         n_expert, 32 * MR_PER_LANE);
		return -1;
	}
	cu_launch(ctx, mr_sort, 1, MR_SORT_THREADS, 0, d_ids, n_slots, n_expert,
	          d_perm);
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

/* ------------------------------------------ grouped expert products */

/* Rows of an expert's matrix a block takes. */
#define MR_BM 64
/* Slots (of one expert) a block takes: a tile. */
#define MR_BN 64
/* Inputs a step of the block's loop decodes. */
#define MR_BK 64
/* Halves a row of a shared input or weight tile takes: MR_BK + 8, so that
 * rows start 16 bytes apart (one 16-byte store of 8 halves) and every
 * fragment, 16 rows apart, 32 bytes aligned (WMMA's rule). */
#define MR_KP (MR_BK + 8)
/* Floats a slot's row of the fp32 input staging takes: a thread's two
 * halves of 32 at 0 and 36, so that the 8 lanes of a 16-byte access
 * (rows 8 apart in banks, the halves 4) meet no bank twice. */
#define MR_XP32 72
/* Floats a slot's column of the shared output tile takes. */
#define MR_MP (MR_BM + 4)
/* Threads of a block: 4 warps, each 32 rows x 32 slots of the tile. */
#define MR_THREADS 128
/* Blocks of mr_gemm a multiprocessor must fit (the registers a thread may
 * take: 1 leaves them to the compiler). A build-time knob, for measuring
 * (BENCHMARKS.md: the gated launch at 168 registers fits 3). */
#ifndef MR_MINB
#define MR_MINB 1
#endif

/* 0: the launchers pick the path by size; 1: always the mat-vec; 2: the
 * grouped products wherever they apply (cuda_op_moe_grouped_force). */
static int mr_force;

/* Tiles of MR_BN slots N slots of N_EXPERT experts can make at most
 * (sum of ceil(count / MR_BN) over the experts that have slots). */
static int32_t mr_max_tiles(int32_t n, int64_t n_expert)
{
	return (n + MR_BN - 1) / MR_BN + (int32_t)(n_expert < n ? n_expert : n);
}

/* Bytes of the plan mr_tiles writes (mr_tiles' layout). */
static size_t mr_plan_bytes(int32_t n, int64_t n_expert)
{
	return sizeof(int32_t) *
	       (4 + 4 * (size_t)mr_max_tiles(n, n_expert) + (size_t)n);
}

/*
 * The plan of the grouped products of N slots of IDS (one block of
 * 32 * MR_PER_LANE threads, an expert a thread for the scan), into
 * PLAN: [0] the tiles' count, [4..) MAX_TILES tiles as int4 (expert, first
 * place in the order, slots, 0), then the N slots ordered by expert (a
 * counting sort as mr_sort's; each expert's run cut into tiles of MR_BN).
 * A slot whose expert is out of range is in no tile (nothing written
 * for it).
 */
static_assert(MR_SORT_THREADS == 32 * MR_PER_LANE,
              "mr_tiles scans an expert a thread");
__global__ void mr_tiles(const int32_t *ids, int32_t n, int32_t n_expert,
                         int32_t *plan, int32_t max_tiles)
{
	__shared__ int32_t cnt[32 * MR_PER_LANE], at[32 * MR_PER_LANE],
	    first[32 * MR_PER_LANE];

	cu_pdl_sync(); /* first: cuda_launch.cuh */
	int4 *tiles = (int4 *)(plan + 4);
	int32_t *order = plan + 4 + 4 * (size_t)max_tiles;

	for (int32_t e = threadIdx.x; e < n_expert; e += blockDim.x)
		cnt[e] = 0;
	__syncthreads();
	for (int32_t s = threadIdx.x; s < n; s += blockDim.x) {
		const int32_t e = ids[s];

		if (e >= 0 && e < n_expert)
			atomicAdd(&cnt[e], 1);
	}
	__syncthreads();
	{ /* places and first tiles, in expert order: a block-wide scan,
	     expert e on thread e */
		__shared__ int32_t wsum[2][32];
		const int e = threadIdx.x, lane = e & 31, wp = e >> 5;
		const int32_t c = e < n_expert ? cnt[e] : 0;
		const int32_t t = (c + MR_BN - 1) / MR_BN;
		int32_t ci = c, ti = t; /* inclusive prefix sums */

		red_warp_scan2(ci, ti, lane);
		if (lane == 31) {
			wsum[0][wp] = ci;
			wsum[1][wp] = ti;
		}
		__syncthreads();
		if (wp == 0) { /* the warps' totals, scanned */
			int32_t a = wsum[0][lane], b = wsum[1][lane];

			red_warp_scan2(a, b, lane);
			wsum[0][lane] = a - wsum[0][lane];
			wsum[1][lane] = b - wsum[1][lane];
		}
		__syncthreads();
		if (e < n_expert) {
			at[e] = wsum[0][wp] + ci - c;
			first[e] = wsum[1][wp] + ti - t;
		}
		if (e == (int)blockDim.x - 1)
			plan[0] = wsum[1][wp] + ti;
	}
	__syncthreads();
	for (int32_t e = threadIdx.x; e < n_expert; e += blockDim.x)
		for (int32_t j = 0; j * MR_BN < cnt[e]; j++)
			tiles[first[e] + j] = make_int4(
			    e, at[e] + j * MR_BN,
			    cnt[e] - j * MR_BN < MR_BN ? cnt[e] - j * MR_BN
			                               : MR_BN,
			    0);
	__syncthreads(); /* (the tiles read at[] before the slots move it) */
	for (int32_t s = threadIdx.x; s < n; s += blockDim.x) {
		const int32_t e = ids[s];

		if (e >= 0 && e < n_expert)
			order[atomicAdd(&at[e], 1)] = s;
	}
}

/* What one grouped launch computes (mr_gemm). */
struct mr_gemm_args {
	const uint8_t *w0; /* the stack (GATED: the gate's) */
	const uint8_t *w1; /* GATED: the up stack, laid out as w0 */
	size_t row_size;   /* bytes per row */
	size_t estride;    /* bytes between two experts' matrices */
	int64_t ne0, ne1;  /* inputs, rows of one matrix */
	const float *x;    /* input rows of ne0 floats */
	int32_t x_div;     /* slot s reads row s / x_div of x */
	const float *b0;   /* [n_expert][ne1] bias of w0's products, or NULL */
	const float *b1;   /* the same for w1's */
	float *y;          /* [n_slots][ne1] */
	int act;           /* GATED: enum model_act */
	const int32_t *plan; /* mr_tiles' */
	int32_t max_tiles;
};

/* Inputs K..K+31 of the row XR (NE0 floats; past NE0 or XR NULL: 0) as
 * fp16 into DST (16-byte aligned): cm_to_f16's rounding. VEC: XR and NE0
 * allow 16-byte loads. */
static __device__ __forceinline__ void
mr_load_x32(const float *xr, int64_t k, int64_t ne0, bool vec, __half *dst)
{
	__align__(16) __half2 h[16];

	if (xr != NULL && vec && k + 32 <= ne0) {
		const float4 *p = (const float4 *)(xr + k);

#pragma unroll
		for (int q = 0; q < 8; q++) {
			const float4 f = p[q];

			h[2 * q] = __floats2half2_rn(f.x, f.y);
			h[2 * q + 1] = __floats2half2_rn(f.z, f.w);
		}
	} else {
#pragma unroll
		for (int q = 0; q < 16; q++) {
			const int64_t i = k + 2 * q;

			h[q] = __floats2half2_rn(
			    xr != NULL && i < ne0 ? xr[i] : 0.0f,
			    xr != NULL && i + 1 < ne0 ? xr[i + 1] : 0.0f);
		}
	}
#pragma unroll
	for (int q = 0; q < 4; q++)
		((uint4 *)dst)[q] = ((const uint4 *)h)[q];
}

/* The asynchronous copies of inputs K..K+31 of the row XR (zeros where XR
 * is NULL: ANY, a valid address, is then read for none) into the 16-byte
 * aligned floats DST, a group of their own (16-byte aligned XR + K). */
static __device__ __forceinline__ void
mr_x32_async(const float *xr, const float *any, int64_t k, float *dst)
{
	const uint32_t a = (uint32_t)__cvta_generic_to_shared(dst);
	const float *src = xr != NULL ? xr + k : any;
	const int n = xr != NULL ? 16 : 0;

#pragma unroll
	for (int q = 0; q < 8; q++)
		asm volatile(
		    "cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(
		        a + 16 * q),
		    "l"(src + (n != 0 ? 4 * q : 0)), "r"(n));
	asm volatile("cp.async.commit_group;");
}

/* Once the thread's own copies (mr_x32_async) have landed: the 32 floats
 * at SRC as fp16 into DST (16-byte aligned), mr_load_x32's rounding. */
static __device__ __forceinline__ void mr_x32_to_f16(const float *src,
                                                     __half *dst)
{
	__align__(16) __half2 h[16];

	asm volatile("cp.async.wait_group 0;" ::: "memory");
#pragma unroll
	for (int q = 0; q < 8; q++) {
		const float4 f = ((const float4 *)src)[q];

		h[2 * q] = __floats2half2_rn(f.x, f.y);
		h[2 * q + 1] = __floats2half2_rn(f.z, f.w);
	}
#pragma unroll
	for (int q = 0; q < 4; q++)
		((uint4 *)dst)[q] = ((const uint4 *)h)[q];
}

/* MXFP4: the bytes of a thread's 8-element pieces of step K0 of its rows
 * WROW (mr_gemm's mapping: piece q of matrix mat is row (tid + 128 q) / 8,
 * elements K0 + ((tid + 128 q) % 8) * 8..) into RAW, ahead of their
 * decoding; a piece without a row or past NE0 is not read. */
template <int NM>
static __device__ __forceinline__ void mr_fetch8(const uint8_t *(*wrow)[4],
                                                 int64_t k0, int64_t ne0,
                                                 int tid, cq_raw8 (*raw)[4])
{
#pragma unroll
	for (int q = 0; q < 4; q++) {
		const int64_t k = k0 + ((tid + MR_THREADS * q) & 7) * 8;

#pragma unroll
		for (int mat = 0; mat < NM; mat++)
			if (wrow[mat][q] != NULL && k + 8 <= ne0)
				raw[mat][q] = cq_fetch8_mxfp4(wrow[mat][q] +
				                                  (k >> 5) * 17,
				                              (int)(k & 31));
	}
}

/*
 * One tile of a grouped product: rows blockIdx.x * MR_BM.. of the matrix
 * of the tile blockIdx.y's expert (tiles past the plan's count exit) times
 * the tile's slots' inputs; GATED: the gate and up products of the same
 * rows, Y = act(gate + b0) * (up + b1), else Y = W X + b0. Shared memory:
 * the fp16 weight and input tiles of a step, then (aliasing them) the fp32
 * output tiles, a slot's rows contiguous for the scatter.
 */
template <int T, bool GATED>
__global__ void __launch_bounds__(MR_THREADS, MR_MINB)
    mr_gemm(struct mr_gemm_args a)
{
	namespace wm = nvcuda::wmma;
	constexpr int nm = GATED ? 2 : 1; /* weight matrices */
	constexpr int w_bytes = nm * MR_BM * MR_KP * 2;
	constexpr int x_bytes = MR_BN * MR_KP * 2;
	constexpr int x32_bytes = MR_BN * MR_XP32 * 4;
	constexpr int c_bytes = nm * MR_BN * MR_MP * 4;
	constexpr int s_bytes = w_bytes + x_bytes + x32_bytes > c_bytes
	                            ? w_bytes + x_bytes + x32_bytes
	                            : c_bytes;
	__shared__ __align__(128) unsigned char sm[s_bytes];
	__half *ws = (__half *)sm;             /* [nm][MR_BM][MR_KP] */
	__half *xs = (__half *)(sm + w_bytes); /* [MR_BN][MR_KP] */
	/* [MR_BN][MR_XP32]: the next step's fp32 inputs on their way */
	float *x32 = (float *)(sm + w_bytes + x_bytes);
	float *cs = (float *)sm; /* [nm][MR_BN][MR_MP] */

	cu_pdl_sync(); /* first: cuda_launch.cuh (the plan, X) */
	if ((int32_t)blockIdx.y >= a.plan[0])
		return;
	const int4 tl = ((const int4 *)(a.plan + 4))[blockIdx.y];
	const int32_t *order = a.plan + 4 + 4 * (size_t)a.max_tiles;
	const int64_t e = tl.x, m0 = (int64_t)blockIdx.x * MR_BM;
	const int32_t p0 = tl.y, cnt = tl.z;
	const int tid = threadIdx.x, warp = tid >> 5;
	const int wr = warp & 1, wc = warp >> 1; /* the warp's 32 x 32 */
	/* a thread's input row (slot tid / 2) and its half of each step */
	const int xn = tid >> 1, xk = (tid & 1) * 32;
	const float *xr =
	    xn < cnt ? a.x + (int64_t)(order[p0 + xn] / a.x_div) * a.ne0 : NULL;
	const bool xvec = a.ne0 % 4 == 0 && (uintptr_t)a.x % 16 == 0;
	/* the inputs of step k0 + MR_BK copied while step k0's products
	   run (their loads' latency was most of the launch's stalls with
	   3 blocks a multiprocessor: BENCHMARKS.md), each thread converting
	   the floats it copied itself; whole steps only */
	const bool xasync = xvec && a.ne0 % MR_BK == 0;
	float *x32t = x32 + xn * MR_XP32 + (xk != 0 ? 36 : 0);
	/* a thread's weight rows: 8 elements of row (tid + 128 q) / 8 at
	   ((tid + 128 q) % 8) * 8 of each step, q < 4 */
	const uint8_t *wrow[nm][4];

#pragma unroll
	for (int q = 0; q < 4; q++) {
		const int64_t row = m0 + ((tid + MR_THREADS * q) >> 3);

#pragma unroll
		for (int mat = 0; mat < nm; mat++)
			wrow[mat][q] = row < a.ne1
			                   ? (mat ? a.w1 : a.w0) +
			                         (size_t)e * a.estride +
			                         (size_t)row * a.row_size
			                   : NULL;
	}
	wm::fragment<wm::accumulator, 16, 16, 16, float> acc[nm][2][2];
	const bool busy = wc * 32 < cnt; /* the warp's slots hold tokens */

#pragma unroll
	for (int mat = 0; mat < nm; mat++)
#pragma unroll
		for (int i = 0; i < 2; i++)
#pragma unroll
			for (int j = 0; j < 2; j++)
				wm::fill_fragment(acc[mat][i][j], 0.0f);
	/* MXFP4 (gpt-oss's experts): the next step's weight bytes are
	   fetched into registers before this step's products, so that their
	   loads overlap the tensor cores' work (cuda_qgemm.cu's way); every
	   other type decodes its step from memory as it stores it */
	constexpr bool ahead = T == QTYPE_MXFP4;
	cq_raw8 raw[nm][4];

	if constexpr (ahead)
		mr_fetch8<nm>(wrow, 0, a.ne0, tid, raw);
	if (xasync)
		mr_x32_async(xr, a.x, xk, x32t);
	for (int64_t k0 = 0; k0 < a.ne0; k0 += MR_BK) {
#pragma unroll
		for (int q = 0; q < 4; q++) {
			const int g = tid + MR_THREADS * q;
			const int64_t k = k0 + (g & 7) * 8;

#pragma unroll
			for (int mat = 0; mat < nm; mat++) {
				__half *dst = ws +
				              (mat * MR_BM + (g >> 3)) * MR_KP +
				              (g & 7) * 8;

				if constexpr (ahead) {
					__align__(16) __half2 h[4];

					if (wrow[mat][q] != NULL &&
					    k + 8 <= a.ne0)
						cq_dec8_mxfp4_raw(raw[mat][q],
						                  (int)(k & 31),
						                  h);
					else
						cq_dec8<T>(NULL, k, a.ne0,
						           (__half *)h);
					*(uint4 *)dst = *(const uint4 *)h;
				} else {
					cq_dec8<T>(wrow[mat][q], k, a.ne0, dst);
				}
			}
		}
		if (xasync)
			mr_x32_to_f16(x32t, xs + xn * MR_KP + xk);
		else
			mr_load_x32(xr, k0 + xk, a.ne0, xvec,
			            xs + xn * MR_KP + xk);
		__syncthreads();
		if constexpr (ahead)
			if (k0 + MR_BK < a.ne0)
				mr_fetch8<nm>(wrow, k0 + MR_BK, a.ne0, tid,
				              raw);
		if (xasync && k0 + MR_BK < a.ne0)
			mr_x32_async(xr, a.x, k0 + MR_BK + xk, x32t);
		if (busy) {
#pragma unroll
			for (int kk = 0; kk < MR_BK; kk += 16) {
				wm::fragment<wm::matrix_b, 16, 16, 16, __half,
				             wm::col_major>
				    fb[2];

#pragma unroll
				for (int j = 0; j < 2; j++)
					wm::load_matrix_sync(
					    fb[j],
					    xs + (wc * 32 + j * 16) * MR_KP +
					        kk,
					    MR_KP);
#pragma unroll
				for (int mat = 0; mat < nm; mat++)
#pragma unroll
					for (int i = 0; i < 2; i++) {
						wm::fragment<wm::matrix_a, 16,
						             16, 16, __half,
						             wm::row_major>
						    fa;

						wm::load_matrix_sync(
						    fa,
						    ws +
						        (mat * MR_BM + wr * 32 +
						         i * 16) *
						            MR_KP +
						        kk,
						    MR_KP);
#pragma unroll
						for (int j = 0; j < 2; j++)
							wm::mma_sync(
							    acc[mat][i][j], fa,
							    fb[j],
							    acc[mat][i][j]);
					}
			}
		}
		__syncthreads(); /* (the next step, or cs, overwrites them) */
	}
	if (busy)
#pragma unroll
		for (int mat = 0; mat < nm; mat++)
#pragma unroll
			for (int i = 0; i < 2; i++)
#pragma unroll
				for (int j = 0; j < 2; j++)
					wm::store_matrix_sync(
					    cs +
					        (mat * MR_BN + wc * 32 +
					         j * 16) *
					            MR_MP +
					        wr * 32 + i * 16,
					    acc[mat][i][j], MR_MP,
					    wm::mem_col_major);
	__syncthreads();
	for (int idx = tid; idx < cnt * MR_BM; idx += MR_THREADS) {
		const int n = idx / MR_BM, m = idx % MR_BM;
		const int64_t row = m0 + m;

		if (row >= a.ne1)
			continue;
		const int64_t s = order[p0 + n];
		float g = cs[n * MR_MP + m];

		if (a.b0 != NULL)
			g = __fadd_rn(g, a.b0[e * a.ne1 + row]);
		if constexpr (GATED) {
			float u = cs[(MR_BN + n) * MR_MP + m];

			if (a.b1 != NULL)
				u = __fadd_rn(u, a.b1[e * a.ne1 + row]);
			g = cu_act_mul(a.act, g, u);
		}
		a.y[s * a.ne1 + row] = g;
	}
}

extern "C" void cuda_op_moe_grouped_force(int force)
{
	mr_force = force;
}

/* Whether the grouped products can take W over N_SLOTS slots: a type
 * with a decoder, a stack mr_tiles can count, its slots in one grid and
 * its plan in the GEMM scratch. */
static int mr_applies(const struct cuda_ctx *ctx, const struct cuda_tensor *w,
                      int32_t n_slots)
{
	return cuda_ops_type_ok(w->type) && w->ne2 >= 1 &&
	       w->ne2 <= 32 * MR_PER_LANE && w->ne0 >= 1 && w->ne1 >= 1 &&
	       n_slots >= 1 && n_slots <= 65535 &&
	       mr_plan_bytes(n_slots, w->ne2) <= ctx->w16_cap * sizeof(__half);
}

extern "C" int cuda_op_moe_grouped(const struct cuda_ctx *ctx,
                                   const struct cuda_tensor *w, int32_t n_slots)
{
	if (mr_force == 1 || !mr_applies(ctx, w, n_slots))
		return 0;
	/* a decoded expert serves one slot or more on average, and never a
	   single token's slots (decode stays on the mat-vec whatever k) */
	return mr_force == 2 ||
	       (n_slots > MODEL_MAX_EXPERTS_USED && n_slots >= w->ne2);
}

/* The plan of N_SLOTS slots of D_IDS over N_EXPERT experts into
 * ctx->d_w16 (mr_tiles); *MAX_TILES: the launches' grid.y. */
static int mr_plan(struct cuda_ctx *ctx, const int32_t *d_ids, int32_t n_slots,
                   int64_t n_expert, int32_t *max_tiles, char *err,
                   size_t errlen)
{
	*max_tiles = mr_max_tiles(n_slots, n_expert);
	cu_launch(ctx, mr_tiles, 1, MR_SORT_THREADS, 0, d_ids, n_slots,
	          (int32_t)n_expert, (int32_t *)ctx->d_w16, *max_tiles);
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

/* One mr_gemm launch of W's type over its rows and the plan's tiles. */
static int mr_gemm_launch(struct cuda_ctx *ctx, const struct cuda_tensor *w,
                          bool gated, const struct mr_gemm_args *a, char *err,
                          size_t errlen)
{
	dim3 grid((unsigned)((w->ne1 + MR_BM - 1) / MR_BM),
	          (unsigned)a->max_tiles);

	switch (w->type * 2 + (gated ? 1u : 0u)) {
#define X(T)                                                                   \
	case T * 2:                                                            \
		cu_launch(ctx, mr_gemm<T, false>, grid, MR_THREADS, 0, *a);    \
		break;                                                         \
	case T * 2 + 1:                                                        \
		cu_launch(ctx, mr_gemm<T, true>, grid, MR_THREADS, 0, *a);     \
		break;
		CQ_FOR_EACH_TYPE(X)
#undef X
	default:
		snprintf(err, errlen, "type %s (id %u) has no CUDA kernel",
		         qtype_name(w->type), w->type);
		return -1;
	}
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

/* The arguments of a product of the stack W into D_Y over the plan in
 * ctx->d_w16 (MAX_TILES tiles). */
static struct mr_gemm_args mr_args(const struct cuda_ctx *ctx,
                                   const struct cuda_tensor *w,
                                   const float *d_x, int32_t x_div,
                                   const float *d_b, float *d_y,
                                   int32_t max_tiles)
{
	struct mr_gemm_args a;

	memset(&a, 0, sizeof(a));
	a.w0 = (const uint8_t *)w->d;
	a.row_size = w->row_size;
	a.estride = (size_t)w->ne1 * w->row_size;
	a.ne0 = w->ne0;
	a.ne1 = w->ne1;
	a.x = d_x;
	a.x_div = x_div;
	a.b0 = d_b;
	a.y = d_y;
	a.plan = (const int32_t *)ctx->d_w16;
	a.max_tiles = max_tiles;
	return a;
}

/* The checks of a grouped product of W over N_SLOTS slots. */
static int mr_grouped_check(const struct cuda_ctx *ctx,
                            const struct cuda_tensor *w, int32_t n_slots,
                            char *err, size_t errlen)
{
	if (!mr_applies(ctx, w, n_slots)) {
		snprintf(err, errlen,
		         "grouped expert product: %s, %d slots of a stack of "
		         "%lld (up to 65535 slots, %d experts, %zu bytes of "
		         "plan in the GEMM scratch)",
		         qtype_name(w->type), n_slots, (long long)w->ne2,
		         32 * MR_PER_LANE, mr_plan_bytes(n_slots, w->ne2));
		return -1;
	}
	return 0;
}

extern "C" int cuda_op_moe_gated_grouped(
    struct cuda_ctx *ctx, enum model_act act, const struct cuda_tensor *gate,
    const struct cuda_tensor *up, const float *d_x, int32_t n_tok, int32_t k,
    const int32_t *d_ids, const float *d_gate_b, const float *d_up_b,
    float *d_g, float *d_u, char *err, size_t errlen)
{
	const int32_t n_slots = n_tok * k;
	int32_t max_tiles;
	struct mr_gemm_args a;

	if (mr_grouped_check(ctx, gate, n_slots, err, errlen) ||
	    mr_grouped_check(ctx, up, n_slots, err, errlen))
		return -1;
	if (gate->ne1 != up->ne1 || gate->ne0 != up->ne0 ||
	    gate->ne2 != up->ne2) {
		snprintf(err, errlen,
		         "grouped expert product: gate %lldx%lldx%lld and up "
		         "%lldx%lldx%lld differ",
		         (long long)gate->ne0, (long long)gate->ne1,
		         (long long)gate->ne2, (long long)up->ne0,
		         (long long)up->ne1, (long long)up->ne2);
		return -1;
	}
	if (mr_plan(ctx, d_ids, n_slots, gate->ne2, &max_tiles, err, errlen))
		return -1;
	a = mr_args(ctx, gate, d_x, k, d_gate_b, d_g, max_tiles);
	/* gate and up in one launch where they lie alike; else two
	   products (biases in their epilogues) and cuda_op_gate_act */
	if (gate->type == up->type && gate->row_size == up->row_size &&
	    cu_act_ok(act)) {
		a.w1 = (const uint8_t *)up->d;
		a.b1 = d_up_b;
		a.act = (int)act;
		return mr_gemm_launch(ctx, gate, true, &a, err, errlen);
	}
	if (mr_gemm_launch(ctx, gate, false, &a, err, errlen))
		return -1;
	a = mr_args(ctx, up, d_x, k, d_up_b, d_u, max_tiles);
	return mr_gemm_launch(ctx, up, false, &a, err, errlen) ||
	               cuda_op_gate_act(ctx, act, d_g, d_u,
	                                (int64_t)n_slots * gate->ne1, err,
	                                errlen)
	           ? -1
	           : 0;
}

extern "C" int cuda_op_moe_down_grouped(struct cuda_ctx *ctx,
                                        const struct cuda_tensor *down,
                                        const float *d_h, int32_t n_slots,
                                        const int32_t *d_ids,
                                        const float *d_down_b, float *d_y,
                                        char *err, size_t errlen)
{
	int32_t max_tiles;
	struct mr_gemm_args a;

	if (mr_grouped_check(ctx, down, n_slots, err, errlen) ||
	    mr_plan(ctx, d_ids, n_slots, down->ne2, &max_tiles, err, errlen))
		return -1;
	a = mr_args(ctx, down, d_h, 1, d_down_b, d_y, max_tiles);
	return mr_gemm_launch(ctx, down, false, &a, err, errlen);
}

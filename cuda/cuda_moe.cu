/*
 * cuda_moe.cu - a mixture of experts' routing and the weighted sum of its
 * experts' outputs on the GPU (cuda_ops.h; the expert products themselves
 * are mat-vecs of cuda_matmul.cu).
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
 */
#include "cuda_check.cuh"
#include "cuda_launch.cuh"
#include "cuda_ops.h"

#include <math.h>

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

/* The choice of token blockIdx.x * MR_WARPS + warp (cuda_op_moe_route). */
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
	float p[MR_PER_LANE];
	uint32_t taken = 0;
	float mx = -INFINITY;

	for (int q = 0; q < MR_PER_LANE; q++) {
		const int i = q * 32 + lane;

		p[q] = i < n_expert ? r[i] : -INFINITY;
		if (i < n_expert && p[q] > mx)
			mx = p[q];
	}
	if (gating == MODEL_MOE_SOFTMAX) {
		double sum = 0.0;

		for (int o = 16; o > 0; o >>= 1)
			mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
		for (int q = 0; q < MR_PER_LANE; q++)
			if (q * 32 + lane < n_expert) {
				p[q] = expf(p[q] - mx);
				sum += (double)p[q];
			}
		for (int o = 16; o > 0; o >>= 1)
			sum += __shfl_xor_sync(0xffffffffu, sum, o);
		const float inv = (float)(1.0 / sum);

		for (int q = 0; q < MR_PER_LANE; q++)
			p[q] = __fmul_rn(p[q], inv);
	}
	/* k rounds of the arg-max over the experts not taken */
	float wv[MODEL_MAX_EXPERTS_USED];
	int32_t iv[MODEL_MAX_EXPERTS_USED];
	float sum_w = 0.0f;

	for (int j = 0; j < k; j++) {
		float bv = 0.0f;
		int bi = -1;

		for (int q = 0; q < MR_PER_LANE; q++) {
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
	cu_launch(ctx, mr_route, (unsigned)((n_tok + MR_WARPS - 1) / MR_WARPS),
	          32 * MR_WARPS, 0, d_rl, n_tok, n_expert, k, gating, norm_w,
	          w_scale, d_ids, d_w, d_trace_ids, d_trace_w);
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

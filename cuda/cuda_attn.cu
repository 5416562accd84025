/*
 * cuda_attn.cu - causal grouped-query attention over the fp16 KV cache,
 * for a batch of queries (prefill: at_kernel) and for fewer than
 * CUDA_GEMM_MIN_TOKENS (decode: as_kernel + as_merge, split over the
 * cached positions; at_kernel when head_dim is not a multiple of 8).
 *
 * NOTES ON THE DESIGN
 *
 * One warp per (token, query head), online softmax over the cached
 * positions in chunks of 32, so any context length works with no score
 * buffer:
 *   - scores: lane j takes key base + j and dots it with the query (kept
 *     in shared memory, read by every lane as a broadcast); the key is one
 *     contiguous run of head_dim halves in the [layer][kv_head][pos][dim]
 *     cache;
 *   - the chunk's maximum and sum are warp reductions; the running output
 *     is rescaled by exp(m_old - m_new) (flash-attention's recurrence);
 *   - values: for each key of the chunk, lanes take consecutive dims
 *     (d = lane + 32 c), so a value row is read coalesced.
 * All arithmetic is fp32; K and V are fp16 as stored. Prefill has many
 * (token, head) pairs to keep the GPU busy; a decode query has few, so
 * its positions are split across blocks (as_kernel below).
 */
#include "cuda_check.cuh"
#include "cuda_ops.h"

#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#define AT_WARPS 4                             /* (token, head) per block */
#define AT_NC    (CUDA_ATTN_MAX_HEAD_DIM / 32) /* output dims per lane */

__global__ void at_kernel(const float *q, const __half *kc, const __half *vc,
                          int32_t n_tok, int32_t n_head, int32_t n_kv,
                          int32_t hd, int32_t n_ctx, int32_t il, int32_t pos0,
                          const int32_t *dpos, float *out)
{
	if (dpos != NULL) /* a captured decode step (cuda_ctx.d_pos) */
		pos0 = *dpos;
	__shared__ float qs[AT_WARPS][CUDA_ATTN_MAX_HEAD_DIM];
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int64_t pair = (int64_t)blockIdx.x * AT_WARPS + warp;

	if (pair >= (int64_t)n_tok * n_head)
		return;
	const int32_t t = (int32_t)(pair / n_head);
	const int h = (int)(pair % n_head), kvh = h / (n_head / n_kv);
	const int32_t pos = pos0 + t;
	const float scale = 1.0f / sqrtf((float)hd);
	const size_t head0 = ((size_t)il * n_kv + (size_t)kvh) * (size_t)n_ctx;
	const __half *kh = kc + head0 * hd, *vh = vc + head0 * hd;
	const float *qv = q + (size_t)pair * hd;
	float acc[AT_NC];
	float m = -INFINITY, l = 0.0f;

	for (int d = lane; d < hd; d += 32)
		qs[warp][d] = qv[d];
	__syncwarp();
#pragma unroll
	for (int c = 0; c < AT_NC; c++)
		acc[c] = 0.0f;

	for (int32_t base = 0; base <= pos; base += 32) {
		const int32_t i = base + lane;
		const bool valid = i <= pos;
		float s = -INFINITY;

		if (valid) {
			const __half *kp = kh + (size_t)i * hd;
			float dot = 0.0f;

			for (int d = 0; d < hd; d++)
				dot += qs[warp][d] * __half2float(kp[d]);
			s = dot * scale;
		}
		float cm = s;
		for (int off = 16; off > 0; off >>= 1)
			cm = fmaxf(cm, __shfl_xor_sync(0xffffffffu, cm, off));
		const float m_new = fmaxf(m, cm); /* finite: key `base` valid */
		const float corr = expf(m - m_new);
		const float p = valid ? expf(s - m_new) : 0.0f;
		float ps = p;
		for (int off = 16; off > 0; off >>= 1)
			ps += __shfl_xor_sync(0xffffffffu, ps, off);
		l = l * corr + ps;
		m = m_new;
#pragma unroll
		for (int c = 0; c < AT_NC; c++)
			acc[c] *= corr;
		const int nvalid = pos - base + 1 < 32 ? pos - base + 1 : 32;
		for (int jj = 0; jj < nvalid; jj++) {
			const float pj = __shfl_sync(0xffffffffu, p, jj);
			const __half *vp = vh + (size_t)(base + jj) * hd;
#pragma unroll
			for (int c = 0; c < AT_NC; c++) {
				const int d = lane + 32 * c;
				if (d < hd)
					acc[c] += pj * __half2float(vp[d]);
			}
		}
	}
	const float inv = 1.0f / l;
	float *o = out + (size_t)pair * hd;
#pragma unroll
	for (int c = 0; c < AT_NC; c++) {
		const int d = lane + 32 * c;
		if (d < hd)
			o[d] = acc[c] * inv;
	}
}

/* ------------------------------------------- split decode attention */

/*
 * Decode (and small batches): flash-decoding. The cached positions of a
 * query are cut into chunks of AS_CH; block (chunk c, KV head with up to
 * AS_G of its query heads, token t) computes, for each of its heads g,
 * the chunk's maximum score m, the sum l of exp(s - m) and the
 * unnormalised sum of exp(s - m) * V, into the scratch; as_merge then
 * combines the chunks of each (token, head) with their log-sum-exp
 * weights exp(m_c - M). So a 3,000-position context keeps ~47 blocks per
 * KV head busy instead of one warp per head, and one K/V read serves the
 * whole GQA group.
 *   - scores: thread p takes position p of the chunk and reads its key
 *     row with 16-byte loads (8 halves; head_dim % 8 == 0 and the cache
 *     is cudaMalloc'ed, so every row is 16-byte aligned); the queries sit
 *     in shared memory and every thread reads the same element (a
 *     broadcast);
 *   - values: thread = (dim group of 8, position slice); the lanes of a
 *     slice read one value row as consecutive 16-byte pieces (coalesced),
 *     and the slices' partial sums are added in slice order (the result
 *     does not depend on timing).
 * All arithmetic is fp32. Chunks past a token's causal length do nothing
 * and the merge never reads them.
 */
#define AS_CH 64 /* positions per block = threads per block */
#define AS_G  8  /* query heads of one KV head per block */

/* Scratch floats of the split path: per (token, head, chunk) hd partial
 * sums and (m, l). */
static size_t as_scratch_floats(int32_t n_tok, int32_t n_head, int32_t hd,
                                int32_t nch)
{
	return (size_t)n_tok * n_head * nch * (size_t)(hd + 2);
}

template <int HD>
__global__ void
as_kernel(const float *q, const __half *kc, const __half *vc, int32_t n_head,
          int32_t n_kv, int32_t hd_arg, int32_t n_ctx, int32_t il, int32_t pos0,
          const int32_t *dpos, int32_t nch, float *part, float *ml)
{
	if (dpos != NULL)
		pos0 = *dpos;
	extern __shared__ float as_sm[];
	const int group = n_head / n_kv, nhb = (group + AS_G - 1) / AS_G;
	const int32_t c = blockIdx.x, t = blockIdx.z;
	const int kvh = blockIdx.y / nhb, g0 = (blockIdx.y % nhb) * AS_G;
	const int ng = group - g0 < AS_G ? group - g0 : AS_G;
	/* a head size known at compile time unrolls the loops over it, so
	   each thread has all its loads in flight at once instead of one
	   L2 round trip per iteration */
	const int hd = HD > 0 ? HD : hd_arg;
	const int32_t len = pos0 + t + 1, p0 = c * AS_CH;
	const int tid = threadIdx.x, dgn = hd / 8, ns = AS_CH / dgn;
	float *qs = as_sm;              /* [AS_G][hd] */
	float *ss = qs + AS_G * hd;     /* [AS_G][AS_CH] scores, then p */
	float *red = ss + AS_G * AS_CH; /* [ns][AS_G][hd] */

	if (p0 >= len)
		return;
	const int np = len - p0 < AS_CH ? len - p0 : AS_CH;
	const size_t head0 = ((size_t)il * n_kv + (size_t)kvh) * (size_t)n_ctx;
	const __half *kh = kc + (head0 + (size_t)p0) * hd;
	const __half *vh = vc + (head0 + (size_t)p0) * hd;
	const int h0 = kvh * group + g0; /* first query head of the block */
	const float scale = 1.0f / sqrtf((float)hd);

#pragma unroll 4
	for (int i = tid; i < ng * hd; i += AS_CH)
		qs[i] = q[((size_t)t * n_head + h0) * hd + i];
	__syncthreads();

	/* scores: thread tid = position p0 + tid */
	{
		float s[AS_G];
#pragma unroll
		for (int g = 0; g < AS_G; g++)
			s[g] = 0.0f;
		if (tid < np) {
			const uint4 *kp =
			    (const uint4 *)(kh + (size_t)tid * hd);

#pragma unroll
			for (int d8 = 0; d8 < (HD > 0 ? HD / 8 : dgn); d8++) {
				const uint4 raw = kp[d8];
				const __half2 *h2 = (const __half2 *)&raw;
				float k[8];
#pragma unroll
				for (int j = 0; j < 4; j++) {
					const float2 f = __half22float2(h2[j]);
					k[2 * j] = f.x;
					k[2 * j + 1] = f.y;
				}
#pragma unroll
				for (int g = 0; g < AS_G; g++) {
					if (g < ng) {
						const float *qg =
						    qs + g * hd + d8 * 8;
#pragma unroll
						for (int j = 0; j < 8; j++)
							s[g] += qg[j] * k[j];
					}
				}
			}
		}
#pragma unroll
		for (int g = 0; g < AS_G; g++)
			ss[g * AS_CH + tid] =
			    tid < np ? s[g] * scale : -INFINITY;
	}
	__syncthreads();

	/* per head: chunk maximum, p = exp(s - m), sum; warp w takes heads
	 * w, w + nwarps, ... (position 0 of the chunk is valid: m finite) */
	{
		const int warp = tid >> 5, lane = tid & 31;
		const int nw = AS_CH / 32;

		for (int g = warp; g < ng; g += nw) {
			float *sg = ss + g * AS_CH;
			float m = -INFINITY, l = 0.0f;

			for (int i = lane; i < AS_CH; i += 32)
				m = fmaxf(m, sg[i]);
			for (int off = 16; off > 0; off >>= 1)
				m = fmaxf(m,
				          __shfl_xor_sync(0xffffffffu, m, off));
			for (int i = lane; i < AS_CH; i += 32) {
				const float p = i < np ? expf(sg[i] - m) : 0.0f;

				sg[i] = p;
				l += p;
			}
			for (int off = 16; off > 0; off >>= 1)
				l += __shfl_xor_sync(0xffffffffu, l, off);
			if (lane == 0) {
				float *o =
				    ml +
				    (((size_t)t * n_head + h0 + g) * nch + c) *
				        2;
				o[0] = m;
				o[1] = l;
			}
		}
	}
	__syncthreads();

	/* values: thread = (dim group dg, slice sl), positions sl, sl+ns.. */
	{
		const int dg = tid % dgn, sl = tid / dgn;

		if (sl < ns) {
			float acc[AS_G][8];
#pragma unroll
			for (int g = 0; g < AS_G; g++)
#pragma unroll
				for (int j = 0; j < 8; j++)
					acc[g][j] = 0.0f;
#pragma unroll 4
			for (int p = sl; p < np; p += ns) {
				const uint4 raw = *(
				    (const uint4 *)(vh + (size_t)p * hd) + dg);
				const __half2 *h2 = (const __half2 *)&raw;
				float v[8];
#pragma unroll
				for (int j = 0; j < 4; j++) {
					const float2 f = __half22float2(h2[j]);
					v[2 * j] = f.x;
					v[2 * j + 1] = f.y;
				}
#pragma unroll
				for (int g = 0; g < AS_G; g++) {
					if (g < ng) {
						const float pg =
						    ss[g * AS_CH + p];
#pragma unroll
						for (int j = 0; j < 8; j++)
							acc[g][j] += pg * v[j];
					}
				}
			}
#pragma unroll
			for (int g = 0; g < AS_G; g++)
				if (g < ng)
#pragma unroll
					for (int j = 0; j < 8; j++)
						red[((size_t)sl * AS_G + g) *
						        hd +
						    dg * 8 + j] = acc[g][j];
		}
	}
	__syncthreads();
	for (int i = tid; i < ng * hd; i += AS_CH) {
		const int g = i / hd, d = i % hd;
		float sum = 0.0f;

		for (int sl = 0; sl < ns; sl++)
			sum += red[((size_t)sl * AS_G + g) * hd + d];
		part[(((size_t)t * n_head + h0 + g) * nch + c) * hd + d] = sum;
	}
}

/* OUT[t][h] = sum_c exp(m_c - M) acc_c / sum_c exp(m_c - M) l_c over the
 * chunks c of token t's causal length; block = (head, token). */
__global__ void as_merge(const float *part, const float *ml, int32_t n_head,
                         int32_t hd, int32_t pos0, const int32_t *dpos,
                         int32_t nch, float *out)
{
	if (dpos != NULL)
		pos0 = *dpos;
	const int h = blockIdx.x, t = blockIdx.y;
	const int32_t len = pos0 + t + 1;
	const int nc = (len + AS_CH - 1) / AS_CH;
	const size_t th = (size_t)t * n_head + h;
	const float *mlh = ml + th * nch * 2;
	float mx = -INFINITY, l = 0.0f;

#pragma unroll 4
	for (int c = 0; c < nc; c++)
		mx = fmaxf(mx, mlh[2 * c]);
#pragma unroll 4
	for (int c = 0; c < nc; c++)
		l += mlh[2 * c + 1] * expf(mlh[2 * c] - mx);
	const float inv = 1.0f / l;
	for (int d = threadIdx.x; d < hd; d += blockDim.x) {
		float acc = 0.0f;

#pragma unroll 4
		for (int c = 0; c < nc; c++)
			acc += part[(th * nch + c) * hd + d] *
			       expf(mlh[2 * c] - mx);
		out[th * hd + d] = acc * inv;
	}
}

/* The split path's scratch in ctx, grown (never shrunk) to N floats.
 * cudaFree of the old buffer waits for the device, so no kernel still
 * reads it; growth is rare (a longer context than ever before). */
static int as_scratch(struct cuda_ctx *ctx, size_t n, char *err, size_t errlen)
{
	if (n <= ctx->attn_cap)
		return 0;
	n += n / 2;
	cudaFree(ctx->d_attn);
	ctx->d_attn = NULL;
	ctx->attn_cap = 0;
	CUDA_TRY(cudaMalloc(&ctx->d_attn, n * sizeof(float)), err, errlen);
	ctx->attn_cap = n;
	return 0;
}

/* The split path: as_kernel then as_merge. */
static int as_launch(struct cuda_ctx *ctx, const float *d_q, const __half *kc,
                     const __half *vc, int32_t n_tok, int32_t n_head,
                     int32_t n_kv, int32_t hd, int32_t n_ctx, int32_t il,
                     int32_t pos0, float *d_out, char *err, size_t errlen)
{
	const int group = n_head / n_kv, nhb = (group + AS_G - 1) / AS_G;
	/* a captured step covers positions up to pos_cap; chunks past a
	   token's length exit at once */
	const int32_t n_pos = ctx->d_pos != NULL ? ctx->pos_cap : pos0 + n_tok;
	const int32_t nch = (n_pos + AS_CH - 1) / AS_CH;
	const size_t nf = as_scratch_floats(n_tok, n_head, hd, nch);
	const size_t smem =
	    sizeof(float) * ((size_t)AS_G * hd + (size_t)AS_G * AS_CH +
	                     (size_t)(AS_CH / (hd / 8)) * AS_G * hd);

	if (as_scratch(ctx, nf, err, errlen))
		return -1;
	float *part = (float *)ctx->d_attn;
	float *ml = part + (size_t)n_tok * n_head * nch * hd;
	dim3 grid((unsigned)nch, (unsigned)(n_kv * nhb), (unsigned)n_tok);

	if (hd == 64)
		as_kernel<64><<<grid, AS_CH, smem, ctx->stream>>>(
		    d_q, kc, vc, n_head, n_kv, hd, n_ctx, il, pos0, ctx->d_pos,
		    nch, part, ml);
	else if (hd == 128)
		as_kernel<128><<<grid, AS_CH, smem, ctx->stream>>>(
		    d_q, kc, vc, n_head, n_kv, hd, n_ctx, il, pos0, ctx->d_pos,
		    nch, part, ml);
	else
		as_kernel<0><<<grid, AS_CH, smem, ctx->stream>>>(
		    d_q, kc, vc, n_head, n_kv, hd, n_ctx, il, pos0, ctx->d_pos,
		    nch, part, ml);
	CUDA_TRY_LAUNCH(err, errlen);
	as_merge<<<dim3((unsigned)n_head, (unsigned)n_tok), 128, 0,
	           ctx->stream>>>(part, ml, n_head, hd, pos0, ctx->d_pos, nch,
	                          d_out);
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

extern "C" int cuda_op_attention(struct cuda_ctx *ctx, const float *d_q,
                                 const uint16_t *d_kc, const uint16_t *d_vc,
                                 int32_t n_tok, int32_t n_head, int32_t n_kv,
                                 int32_t head_dim, int32_t n_ctx, int32_t il,
                                 int32_t pos0, float *d_out, char *err,
                                 size_t errlen)
{
	int64_t pairs = (int64_t)n_tok * n_head;

	if (head_dim > CUDA_ATTN_MAX_HEAD_DIM || n_kv < 1 ||
	    n_head % n_kv != 0) {
		snprintf(err, errlen,
		         "attention with head_dim %d (max %d), %d heads, %d "
		         "KV heads",
		         head_dim, CUDA_ATTN_MAX_HEAD_DIM, n_head, n_kv);
		return -1;
	}
	if (n_tok < CUDA_GEMM_MIN_TOKENS && head_dim % 8 == 0 &&
	    ((uintptr_t)d_kc | (uintptr_t)d_vc) % 16 == 0)
		return as_launch(ctx, d_q, (const __half *)d_kc,
		                 (const __half *)d_vc, n_tok, n_head, n_kv,
		                 head_dim, n_ctx, il, pos0, d_out, err, errlen);
	at_kernel<<<(unsigned)((pairs + AT_WARPS - 1) / AT_WARPS),
	            32 * AT_WARPS, 0, ctx->stream>>>(
	    d_q, (const __half *)d_kc, (const __half *)d_vc, n_tok, n_head,
	    n_kv, head_dim, n_ctx, il, pos0, ctx->d_pos, d_out);
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

extern "C" int cuda_op_attention_reserve(struct cuda_ctx *ctx, int32_t n_tok,
                                         int32_t n_head, int32_t head_dim,
                                         int32_t n_pos, char *err,
                                         size_t errlen)
{
	const int32_t nch = (n_pos + AS_CH - 1) / AS_CH;

	return as_scratch(ctx, as_scratch_floats(n_tok, n_head, head_dim, nch),
	                  err, errlen);
}

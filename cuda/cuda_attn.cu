/*
 * cuda_attn.cu - causal grouped-query attention over the fp16 KV cache,
 * for a batch of queries (prefill) and for one (decode): the same kernel.
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
 * All arithmetic is fp32; K and V are fp16 as stored. Speed (several
 * queries of a GQA group per K/V read, split-K for long contexts) is a
 * later issue's.
 */
#include "cuda_check.cuh"
#include "cuda_ops.h"

#include <cuda_fp16.h>
#include <math.h>

#define AT_WARPS 4                             /* (token, head) per block */
#define AT_NC    (CUDA_ATTN_MAX_HEAD_DIM / 32) /* output dims per lane */

__global__ void at_kernel(const float *q, const __half *kc, const __half *vc,
                          int32_t n_tok, int32_t n_head, int32_t n_kv,
                          int32_t hd, int32_t n_ctx, int32_t il, int32_t pos0,
                          float *out)
{
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
	at_kernel<<<(unsigned)((pairs + AT_WARPS - 1) / AT_WARPS),
	            32 * AT_WARPS, 0, ctx->stream>>>(
	    d_q, (const __half *)d_kc, (const __half *)d_vc, n_tok, n_head,
	    n_kv, head_dim, n_ctx, il, pos0, d_out);
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

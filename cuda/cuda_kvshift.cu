/*
 * cuda_kvshift.cu - the context shift of one layer's fp16 or q8_0 KV cache
 * (engine.h invariant 6): the rows [p0 + gap, p0 + gap + n) move to
 * [p0, p0 + n), each key turned back by d positions with the layer's
 * RoPE, the values moved as they are. A cache of every position moves
 * by gap = d; a sliding-window layer's ring (backend_cuda.cu), whose rows
 * hold kept positions only, turns its keys where they are (gap 0).
 *
 * NOTES ON THE DESIGN
 *
 * One thread per column of the cache (a rotated pair of a key head, an
 * unrotated key dim, a value dim) walks the positions in ascending order:
 * it reads row j + gap before it writes j, and no other thread touches
 * its column, so the move is in place without a scratch buffer (none to
 * allocate in the middle of a reply) and without a race. Consecutive
 * threads take consecutive columns of one head, so each step of the walk
 * reads and writes one contiguous run of a head's row. A shift is rare
 * (the context filled), and this costs one pass over the moved part of
 * the cache, nothing next to evaluating it again.
 *
 * The angle comes from cuda_rope.cuh (cu_rope_cs at position -d, the
 * magnitude 1: the cached keys carry YaRN's mscale already) and the pair
 * from cu_rope_dims, so the rotation is the forward pass's; the result is
 * rounded to fp16 once, as a stored key is.
 *
 * A q8_0 cache (cuda_kvq.cuh) is quantized per 32 values of a head's row,
 * so a key's blocks are read, turned and stored whole: one warp a key
 * head walks the positions in ascending order (it reads row j + gap into
 * shared memory before it stores row j, as above), each lane turning its
 * pairs, then the row quantized again block by block with the cache's own
 * quantizer (kvq_store32: the CPU's bytes for the same floats), every
 * dim, rotated or not, as the CPU's shift stores the whole row through
 * its conversion. One warp a value head moves the rows' bytes.
 */
#include "cuda_check.cuh"
#include "cuda_launch.cuh"
#include "cuda_ops.h"
#include "cuda_rope.cuh"

#include <cuda_fp16.h>

#define KVS_THREADS 128
/* Warps of a q8_0 shift block, and the widest key head it takes. */
#define KVS_Q8_WARPS  4
#define KVS_Q8_MAX_HD 512

#include "cuda_kvq.cuh"

/* Move column C of the layer's caches from row j + gap to j for j in
 * [p0, p0 + n): the first n_kv * (hd_k - half) columns are the keys'
 * (per head: HALF rotated pairs, then the unrotated dims), the next
 * n_kv * hd_v the values'. */
static __global__ void kvs_shift(__half *kc, __half *vc, int32_t n_kv,
                                 int32_t n_ctx, int32_t hd_k, int32_t hd_v,
                                 int32_t n_rot, int neox,
                                 const double *inv_freq, int32_t p0, int32_t d,
                                 int32_t gap, int32_t n)
{
	cu_pdl_sync();
	const int32_t half = n_rot / 2, kcols = hd_k - half;
	const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (c < (int64_t)n_kv * kcols) {
		const int32_t h = (int32_t)(c / kcols),
		              i = (int32_t)(c % kcols);
		__half *base = kc + (size_t)h * n_ctx * hd_k;

		if (i < half) { /* a rotated pair */
			const float2 cs =
			    cu_rope_cs(-(int64_t)d, inv_freq[i], 1.0f);
			int a, b;

			cu_rope_dims(i, half, neox, &a, &b);
			for (int32_t j = p0; j < p0 + n; j++) {
				const __half *src =
				    base + (size_t)(j + gap) * hd_k;
				__half *dst = base + (size_t)j * hd_k;
				const float2 y =
				    cu_rope_rotate(__half2float(src[a]),
				                   __half2float(src[b]), cs);

				dst[a] = __float2half_rn(y.x);
				dst[b] = __float2half_rn(y.y);
			}
			return;
		}
		const int32_t dd = n_rot + (i - half); /* unrotated */

		for (int32_t j = p0; j < p0 + n; j++)
			base[(size_t)j * hd_k + dd] =
			    base[(size_t)(j + gap) * hd_k + dd];
		return;
	}
	const int64_t cv = c - (int64_t)n_kv * kcols;

	if (cv >= (int64_t)n_kv * hd_v)
		return;
	const int32_t h = (int32_t)(cv / hd_v), dd = (int32_t)(cv % hd_v);
	__half *base = vc + (size_t)h * n_ctx * hd_v;

	for (int32_t j = p0; j < p0 + n; j++)
		base[(size_t)j * hd_v + dd] =
		    base[(size_t)(j + gap) * hd_v + dd];
}

/* The q8_0 shift: warps 0 .. n_kv - 1 (over the grid) each a key head,
 * the next n_kv each a value head (HD_K, HD_V multiples of 32, HD_K at
 * most KVS_Q8_MAX_HD). */
static __global__ void kvs_shift_q8(unsigned char *kc, unsigned char *vc,
                                    int32_t n_kv, int32_t n_ctx, int32_t hd_k,
                                    int32_t hd_v, int32_t n_rot, int neox,
                                    const double *inv_freq, int32_t p0,
                                    int32_t d, int32_t gap, int32_t n)
{
	__shared__ float row[KVS_Q8_WARPS][KVS_Q8_MAX_HD];
	const int lane = threadIdx.x & 31, wl = threadIdx.x >> 5;
	const int64_t w = (int64_t)blockIdx.x * KVS_Q8_WARPS + wl;

	cu_pdl_sync();
	if (w >= 2 * (int64_t)n_kv)
		return;
	if (w >= n_kv) { /* a value head: its rows' bytes, 2 at a time */
		const size_t rb = kvq_row_bytes(hd_v);
		unsigned char *base =
		    vc + (size_t)(w - n_kv) * (size_t)n_ctx * rb;

		for (int32_t j = p0; j < p0 + n; j++) {
			const uint16_t *src =
			    (const uint16_t *)(base + (size_t)(j + gap) * rb);
			uint16_t *dst = (uint16_t *)(base + (size_t)j * rb);

			for (size_t o = (size_t)lane; o < rb / 2; o += 32)
				dst[o] = src[o];
		}
		return;
	}
	const size_t rb = kvq_row_bytes(hd_k);
	const int32_t half = n_rot / 2, nb = hd_k / 32;
	unsigned char *base = kc + (size_t)w * (size_t)n_ctx * rb;
	float *r = row[wl];
	/* the turn is the same at every position: each lane's pairs' cos/sin
	 * (double precision) and dims once, not once a position */
	float2 cs[KVS_Q8_MAX_HD / 64];
	int pa[KVS_Q8_MAX_HD / 64], pb[KVS_Q8_MAX_HD / 64];

#pragma unroll
	for (int q = 0; q < KVS_Q8_MAX_HD / 64; q++) {
		const int i = lane + 32 * q;

		if (i < half) {
			cs[q] = cu_rope_cs(-(int64_t)d, inv_freq[i], 1.0f);
			cu_rope_dims(i, half, neox, &pa[q], &pb[q]);
		}
	}
	for (int32_t j = p0; j < p0 + n; j++) {
		const unsigned char *src = base + (size_t)(j + gap) * rb;
		unsigned char *dst = base + (size_t)j * rb;

		for (int32_t b = 0; b < nb; b++) { /* d * q: exact */
			const unsigned char *blk = src + (size_t)b * KVQ_BLOCK;

			r[b * 32 + lane] =
			    __half2float(*(const __half *)blk) *
			    (float)((const int8_t *)blk)[2 + lane];
		}
		__syncwarp();
#pragma unroll
		for (int q = 0; q < KVS_Q8_MAX_HD / 64; q++) { /* its pairs */
			if (lane + 32 * q < half) {
				const float2 y =
				    cu_rope_rotate(r[pa[q]], r[pb[q]], cs[q]);

				r[pa[q]] = y.x;
				r[pb[q]] = y.y;
			}
		}
		__syncwarp();
		for (int32_t b = 0; b < nb; b++)
			kvq_store32(r[b * 32 + lane], lane,
			            dst + (size_t)b * KVQ_BLOCK);
		__syncwarp();
	}
}

extern "C" int cuda_op_kv_shift(struct cuda_ctx *ctx, uint16_t *d_kc,
                                uint16_t *d_vc, int32_t n_kv, int32_t n_ctx,
                                int32_t hd_k, int32_t hd_v, int32_t n_rot,
                                int neox, const double *d_inv_freq, int32_t p0,
                                int32_t d, int32_t gap, int32_t n, char *err,
                                size_t errlen)
{
	const int64_t cols =
	    (int64_t)n_kv * (hd_k - n_rot / 2) + (int64_t)n_kv * hd_v;

	if (n <= 0 || cols == 0)
		return 0;
	if (n_rot < 0 || n_rot % 2 != 0 || n_rot > hd_k || d < 1 || gap < 0 ||
	    p0 < 0 || p0 + gap + n > n_ctx) {
		snprintf(err, errlen,
		         "kv shift: n_rot %d of head dim %d, rows %d+%d+%d "
		         "of %d",
		         n_rot, hd_k, p0, gap, n, n_ctx);
		return -1;
	}
	if (ctx->kv_q8) {
		if (hd_k % 32 != 0 || hd_v % 32 != 0 || hd_k > KVS_Q8_MAX_HD) {
			snprintf(err, errlen,
			         "kv shift: a q8_0 cache of head dims %d, %d "
			         "(multiples of 32, keys up to %d)",
			         hd_k, hd_v, KVS_Q8_MAX_HD);
			return -1;
		}
		cu_launch(
		    ctx, kvs_shift_q8,
		    (unsigned)((2 * n_kv + KVS_Q8_WARPS - 1) / KVS_Q8_WARPS),
		    32 * KVS_Q8_WARPS, 0, (unsigned char *)d_kc,
		    (unsigned char *)d_vc, n_kv, n_ctx, hd_k, hd_v, n_rot, neox,
		    d_inv_freq, p0, d, gap, n);
		CUDA_TRY_LAUNCH(err, errlen);
		return 0;
	}
	cu_launch(ctx, kvs_shift,
	          (unsigned)((cols + KVS_THREADS - 1) / KVS_THREADS),
	          KVS_THREADS, 0, (__half *)d_kc, (__half *)d_vc, n_kv, n_ctx,
	          hd_k, hd_v, n_rot, neox, d_inv_freq, p0, d, gap, n);
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

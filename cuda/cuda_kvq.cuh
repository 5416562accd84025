/*
 * cuda_kvq.cuh - the q8_0 KV cache's blocks on the device (cuda_ctx.kv_q8):
 * GGUF's Q8_0 block, 34 bytes (an fp16 scale d, then 32 int8), along each
 * head, so a head's row of head_dim values at one position is head_dim /
 * 32 blocks and the cache is [kv_head][n_ctx][head_dim / 32] blocks.
 *
 * A warp quantizes one block, a lane a value, with quant_q8_0_row's
 * arithmetic (src/quant.c, quantize_i8): amax over the block (a maximum:
 * exact in any order), d = amax / 127 and id = 1 / d correctly rounded
 * (__fdiv_rn, __frcp_rn: the same under any nvcc flags), q = round(x *
 * id) half away from zero, clamped; d kept as the nearest fp16. So the
 * GPU stores the CPU's bytes for the same floats (tests/t_cuda_ops.c).
 * A block is read as 8-value pieces: two 16-bit loads of the scale and
 * four of the quants (the blocks are 2-byte aligned), each value d * q,
 * exact in fp32.
 */
#ifndef PARLEY_CUDA_KVQ_CUH
#define PARLEY_CUDA_KVQ_CUH

#include "cuda_reduce.cuh"

#include <cuda_fp16.h>
#include <float.h>
#include <stdint.h>

#define KVQ_BLOCK 34 /* bytes of a block of 32 values */

/* Bytes of a row of HD values (HD a multiple of 32). */
static __host__ __device__ __forceinline__ size_t kvq_row_bytes(int hd)
{
	return (size_t)(hd / 32) * KVQ_BLOCK;
}

/* The block at B of the warp's 32 values, X this lane's (every lane
 * calls it). A non-finite value makes the block's d NaN and its quants
 * zero, as on the CPU. */
static __device__ __forceinline__ void kvq_store32(float x, int lane,
                                                   unsigned char *b)
{
	const float a = fabsf(x);
	const float amax = red_warp<red_max>(a);
	const bool fin = __all_sync(0xffffffffu, a <= FLT_MAX);
	float v = 0.0f;
	float d = __int_as_float(0x7fc00000); /* NaN */

	if (fin) {
		d = __fdiv_rn(amax, 127.0f);
		const float id = d != 0.0f ? __frcp_rn(d) : 0.0f;

		v = roundf(__fmul_rn(x, id));
		v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
	}
	((int8_t *)b)[2 + lane] = (int8_t)v;
	if (lane == 0)
		*(__half *)b = __float2half_rn(d);
}

/* An 8-value piece as loaded, before it is used: its block's scale and
 * its 8 int8 (bytes in order), so a kernel can load a sub-chunk ahead into
 * registers. */
struct kvq_raw {
	uint2 q;
	float d;
};

/* Piece P (values 8 P .. 8 P + 7) of the q8_0 row at ROW, as loaded. */
static __device__ __forceinline__ struct kvq_raw
kvq_fetch8(const unsigned char *row, int p)
{
	const unsigned char *b = row + (size_t)(p >> 2) * KVQ_BLOCK;
	const uint16_t *q = (const uint16_t *)(b + 2 + (p & 3) * 8);
	struct kvq_raw r;

	r.d = __half2float(*(const __half *)b);
	r.q.x = (uint32_t)q[0] | (uint32_t)q[1] << 16;
	r.q.y = (uint32_t)q[2] | (uint32_t)q[3] << 16;
	return r;
}

/* The 8 values of piece R into V (d * q, exact). */
static __device__ __forceinline__ void kvq_unpack8(const struct kvq_raw &r,
                                                   float *v)
{
#pragma unroll
	for (int j = 0; j < 4; j++) {
		v[j] = r.d * (float)(int8_t)(r.q.x >> (8 * j));
		v[4 + j] = r.d * (float)(int8_t)(r.q.y >> (8 * j));
	}
}

/* Values 8 P .. 8 P + 7 of the q8_0 row at ROW into V (d * q, exact). */
static __device__ __forceinline__ void kvq_load8(const unsigned char *row,
                                                 int p, float *v)
{
	kvq_unpack8(kvq_fetch8(row, p), v);
}

#endif /* PARLEY_CUDA_KVQ_CUH */

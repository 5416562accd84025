/*
 * cuda_vecdot.cuh - the dot product of one "unit" of a GGUF row (a whole
 * block, or a 32-element sub-block of a K-quant block) with fp32
 * activations: the inner step of the fast mat-vec (cuda_matmul.cu).
 *
 * NOTES ON THE DESIGN
 *
 * 1. One lane takes one unit per iteration and consecutive lanes take
 *    consecutive units, so a warp walks a contiguous span of the row; a
 *    lane reads its unit with the widest loads the format's alignment
 *    allows (cuda_quant.cuh note 3: Q8_0, Q4_0, Q5_0 and Q6_K blocks are
 *    only 2-byte aligned, Q4_1 and Q5_1 4-byte; F32 and F16 units of 8 and
 * Q4_K's 16-byte pieces are 16-byte aligned when the row is, which the launcher
 * checks) instead of one element at a time through cq_elem.
 * 2. The block scale is factored out of the sum: sum_j (q_j * d) x_j =
 *    d * sum_j q_j x_j (and m * sum_j x_j for the formats with a minimum).
 *    Not bit-exact with the element-wise product, but fp32 throughout and
 *    within t_cuda_ops's 1e-6 NMSE of the double reference.
 * 3. X points at the row's first activation and is 16-byte aligned (the
 *    launcher checks), so the unit's activations are float4 loads.
 * 4. cv_unit<T>::ne is the unit's element count; the unit count of a row
 *    is ne0 / ne (a row is whole blocks; F16 rows need ne0 % 8 == 0).
 * 5. Loading and multiplying are separate steps: xload(u, x, xv) puts
 *    the unit's ne activations into registers (in the order dot uses
 *    them), dot(row, u, xv) multiplies one row's unit by them. A warp
 *    that computes several rows (cuda_matmul.cu: gate and up of the gated FFN,
 *    or two rows of one matrix) loads the activations once per unit:
 *    re-reading them for every row made the mat-vec bound by the L1
 *    traffic of the activations (16 weight bytes of Q4_K against 256
 *    bytes of x), not by the weights' DRAM traffic.
 */
#ifndef PARLEY_CUDA_VECDOT_CUH
#define PARLEY_CUDA_VECDOT_CUH

#include "cuda_quant.cuh"

/* Elements XV[0..7] (registers) dotted with Q[0..7]. */
static __device__ __forceinline__ float cv_dot8(const float *xv, const float *q)
{
	return xv[0] * q[0] + xv[1] * q[1] + xv[2] * q[2] + xv[3] * q[3] +
	       xv[4] * q[4] + xv[5] * q[5] + xv[6] * q[6] + xv[7] * q[7];
}

/* Sum of XV[0..7]. */
static __device__ __forceinline__ float cv_sum8(const float *xv)
{
	return ((xv[0] + xv[1]) + (xv[2] + xv[3])) +
	       ((xv[4] + xv[5]) + (xv[6] + xv[7]));
}

/* N (a multiple of 4) activations from X (16-byte aligned) into XV. */
template <int N>
static __device__ __forceinline__ void cv_load(const float *x, float *xv)
{
#pragma unroll
	for (int i = 0; i < N / 4; i++) {
		const float4 a = __ldg((const float4 *)x + i);
		xv[4 * i] = a.x;
		xv[4 * i + 1] = a.y;
		xv[4 * i + 2] = a.z;
		xv[4 * i + 3] = a.w;
	}
}

/* Four bytes of V as floats into Q (signed when S). */
template <bool S>
static __device__ __forceinline__ void cv_bytes4(uint32_t v, float *q)
{
#pragma unroll
	for (int j = 0; j < 4; j++) {
		const uint32_t b = (v >> (8 * j)) & 0xFF;
		q[j] = S ? (float)(int8_t)b : (float)b;
	}
}

template <int T> struct cv_unit;

/* The units of 8 elements (F32, F16): their activations. */
struct cv_unit_8 {
	static const int ne = 8;
	static __device__ __forceinline__ void xload(int64_t u, const float *x,
	                                             float *xv)
	{
		cv_load<8>(x + u * 8, xv);
	}
};

/* F16: 8 halves, one 16-byte load. */
template <> struct cv_unit<QTYPE_F16> : cv_unit_8 {
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const float *xv)
	{
		const uint4 raw = *((const uint4 *)row + u);
		const __half2 *h2 = (const __half2 *)&raw;
		float q[8];
#pragma unroll
		for (int j = 0; j < 4; j++) {
			const float2 f = __half22float2(h2[j]);
			q[2 * j] = f.x;
			q[2 * j + 1] = f.y;
		}
		return cv_dot8(xv, q);
	}
};

/* F32: 8 floats, two 16-byte loads (a mixture's router: its row-per-warp
 * element-wise product read 2 MB at a tenth of the bandwidth). */
template <> struct cv_unit<QTYPE_F32> : cv_unit_8 {
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const float *xv)
	{
		const float4 *p = (const float4 *)row + 2 * u;
		const float4 a = p[0], b = p[1];
		const float q[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};

		return cv_dot8(xv, q);
	}
};

/* Q8_0: d, qs[32] int8; 16-bit loads (2-byte aligned blocks). */
template <> struct cv_unit<QTYPE_Q8_0> {
	static const int ne = 32;
	static __device__ __forceinline__ void xload(int64_t u, const float *x,
	                                             float *xv)
	{
		cv_load<32>(x + u * 32, xv);
	}
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const float *xv)
	{
		const uint8_t *b = row + u * 34;
		const uint16_t *p = (const uint16_t *)b;
		float s = 0.0f;
#pragma unroll
		for (int k = 0; k < 4; k++) {
			float q[8];
#pragma unroll
			for (int j = 0; j < 4; j++) {
				const uint16_t w = p[1 + 4 * k + j];
				q[2 * j] = (float)(int8_t)(w & 0xFF);
				q[2 * j + 1] = (float)(int8_t)(w >> 8);
			}
			s += cv_dot8(xv + 8 * k, q);
		}
		return s * cq_half(b);
	}
};

/* Q4_0: d, qs[16]: low nibble of byte l is element l, high l + 16. */
template <> struct cv_unit<QTYPE_Q4_0> {
	static const int ne = 32;
	static __device__ __forceinline__ void xload(int64_t u, const float *x,
	                                             float *xv)
	{
		cv_load<32>(x + u * 32, xv);
	}
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const float *xv)
	{
		const uint8_t *b = row + u * 18;
		const uint16_t *p = (const uint16_t *)b;
		float s = 0.0f;
#pragma unroll
		for (int k = 0; k < 2; k++) {
			float lo[8], hi[8];
#pragma unroll
			for (int j = 0; j < 4; j++) {
				const uint16_t w = p[1 + 4 * k + j];
				lo[2 * j] = (float)((int)(w & 0xF) - 8);
				hi[2 * j] = (float)((int)((w >> 4) & 0xF) - 8);
				lo[2 * j + 1] =
				    (float)((int)((w >> 8) & 0xF) - 8);
				hi[2 * j + 1] = (float)((int)(w >> 12) - 8);
			}
			s += cv_dot8(xv + 8 * k, lo) +
			     cv_dot8(xv + 16 + 8 * k, hi);
		}
		return s * cq_half(b);
	}
};

/* Q4_1: d, m, qs[16]; 20-byte blocks, 32-bit loads. */
template <> struct cv_unit<QTYPE_Q4_1> {
	static const int ne = 32;
	static __device__ __forceinline__ void xload(int64_t u, const float *x,
	                                             float *xv)
	{
		cv_load<32>(x + u * 32, xv);
	}
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const float *xv)
	{
		const uint8_t *b = row + u * 20;
		const uint32_t *p = (const uint32_t *)b;
		float s = 0.0f, sx = 0.0f;
#pragma unroll
		for (int k = 0; k < 2; k++) {
			float lo[8], hi[8];
#pragma unroll
			for (int j = 0; j < 2; j++) {
				const uint32_t w = p[1 + 2 * k + j];
				cv_bytes4<false>(w & 0x0F0F0F0Fu, lo + 4 * j);
				cv_bytes4<false>((w >> 4) & 0x0F0F0F0Fu,
				                 hi + 4 * j);
			}
			s += cv_dot8(xv + 8 * k, lo) +
			     cv_dot8(xv + 16 + 8 * k, hi);
			sx += cv_sum8(xv + 8 * k) + cv_sum8(xv + 16 + 8 * k);
		}
		return s * cq_half(b) + sx * cq_half(b + 2);
	}
};

/* The fifth bit of element E of a Q5_0/Q5_1 block (qh, bit E) as 16
 * or 0. */
static __device__ __forceinline__ int cv_q5_hi(uint32_t qh, int e)
{
	return (int)((qh >> e) & 1) << 4;
}

/* Q5_0: d, qh[4], qs[16] (22-byte blocks, 16-bit loads): element l < 16
 * is the low nibble of qs[l] with bit l of qh above it, element l + 16
 * the high nibble with bit l + 16; w = d * (q - 16). */
template <> struct cv_unit<QTYPE_Q5_0> {
	static const int ne = 32;
	static __device__ __forceinline__ void xload(int64_t u, const float *x,
	                                             float *xv)
	{
		cv_load<32>(x + u * 32, xv);
	}
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const float *xv)
	{
		const uint8_t *b = row + u * 22;
		const uint16_t *h = (const uint16_t *)(b + 2);
		const uint16_t *p = (const uint16_t *)(b + 6);
		const uint32_t qh = (uint32_t)h[0] | ((uint32_t)h[1] << 16);
		float s = 0.0f;
#pragma unroll
		for (int k = 0; k < 2; k++) {
			float lo[8], hi[8];
#pragma unroll
			for (int j = 0; j < 4; j++) {
				const uint16_t w = p[4 * k + j];
				const int e = 8 * k + 2 * j;

				lo[2 * j] =
				    (float)(((int)(w & 0xF) | cv_q5_hi(qh, e)) -
				            16);
				lo[2 * j + 1] = (float)(((int)((w >> 8) & 0xF) |
				                         cv_q5_hi(qh, e + 1)) -
				                        16);
				hi[2 * j] = (float)(((int)((w >> 4) & 0xF) |
				                     cv_q5_hi(qh, e + 16)) -
				                    16);
				hi[2 * j + 1] = (float)(((int)(w >> 12) |
				                         cv_q5_hi(qh, e + 17)) -
				                        16);
			}
			s += cv_dot8(xv + 8 * k, lo) +
			     cv_dot8(xv + 16 + 8 * k, hi);
		}
		return s * cq_half(b);
	}
};

/* Q5_1: d, m, qh[4], qs[16] (24-byte blocks, 32-bit loads); the bits as
 * Q5_0's, w = d * q + m. */
template <> struct cv_unit<QTYPE_Q5_1> {
	static const int ne = 32;
	static __device__ __forceinline__ void xload(int64_t u, const float *x,
	                                             float *xv)
	{
		cv_load<32>(x + u * 32, xv);
	}
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const float *xv)
	{
		const uint8_t *b = row + u * 24;
		const uint32_t *p = (const uint32_t *)b;
		const uint32_t qh = p[1];
		float s = 0.0f, sx = 0.0f;
#pragma unroll
		for (int k = 0; k < 2; k++) {
			float lo[8], hi[8];
#pragma unroll
			for (int j = 0; j < 2; j++) {
				const uint32_t w = p[2 + 2 * k + j];
#pragma unroll
				for (int i = 0; i < 4; i++) {
					const int e = 8 * k + 4 * j + i;

					lo[4 * j + i] =
					    (float)((int)((w >> (8 * i)) &
					                  0xF) |
					            cv_q5_hi(qh, e));
					hi[4 * j + i] =
					    (float)((int)((w >> (8 * i + 4)) &
					                  0xF) |
					            cv_q5_hi(qh, e + 16));
				}
			}
			s += cv_dot8(xv + 8 * k, lo) +
			     cv_dot8(xv + 16 + 8 * k, hi);
			sx += cv_sum8(xv + 8 * k) + cv_sum8(xv + 16 + 8 * k);
		}
		return s * cq_half(b) + sx * cq_half(b + 2);
	}
};

/* Q4_K, unit = 16 bytes of qs: unit u is super-block u / 8, piece
 * j = u % 8 of its qs (one 16-byte load; the launcher checks that rows
 * are 16-byte aligned, which 144-byte blocks keep). The 32-byte chunk
 * c = j / 2 holds sub-block 2c in its low nibbles and 2c + 1 in its high
 * ones; the piece is half h = j % 2 of the chunk: elements h * 16 ..
 * h * 16 + 15 of both sub-blocks (xv[0..15] and xv[16..31]). So 8
 * consecutive lanes read 128 contiguous bytes. */
template <> struct cv_unit<QTYPE_Q4_K> {
	static const int ne = 32;
	static __device__ __forceinline__ void xload(int64_t u, const float *x,
	                                             float *xv)
	{
		const int j = (int)(u & 7);
		const float *x0 =
		    x + (u >> 3) * 256 + (j >> 1) * 64 + (j & 1) * 16;

		cv_load<16>(x0, xv);
		cv_load<16>(x0 + 32, xv + 16);
	}
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const float *xv)
	{
		const uint8_t *b = row + (u >> 3) * 144;
		const int j = (int)(u & 7), c = j >> 1, h = j & 1;
		const uint4 raw = *(const uint4 *)(b + 16 + c * 32 + h * 16);
		const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
		float s0 = 0.0f, s1 = 0.0f, sx0 = 0.0f, sx1 = 0.0f;
		int sc0, m0, sc1, m1;
#pragma unroll
		for (int k = 0; k < 2; k++) {
			float lo[8], hi[8];
			cv_bytes4<false>(w[2 * k] & 0x0F0F0F0Fu, lo);
			cv_bytes4<false>(w[2 * k + 1] & 0x0F0F0F0Fu, lo + 4);
			cv_bytes4<false>((w[2 * k] >> 4) & 0x0F0F0F0Fu, hi);
			cv_bytes4<false>((w[2 * k + 1] >> 4) & 0x0F0F0F0Fu,
			                 hi + 4);
			s0 += cv_dot8(xv + 8 * k, lo);
			s1 += cv_dot8(xv + 16 + 8 * k, hi);
			sx0 += cv_sum8(xv + 8 * k);
			sx1 += cv_sum8(xv + 16 + 8 * k);
		}
		cq_scale_min_k4(2 * c, b + 4, &sc0, &m0);
		cq_scale_min_k4(2 * c + 1, b + 4, &sc1, &m1);
		const float d = cq_half(b), dm = cq_half(b + 2);
		return (s0 * (d * (float)sc0) - sx0 * (dm * (float)m0)) +
		       (s1 * (d * (float)sc1) - sx1 * (dm * (float)m1));
	}
};

/* Q6_K, unit = group s (0..7) of block u / 8: half n = s / 4, group
 * g = s % 4; element l (0..31) takes a nibble of ql[n*64 + (g&1)*32 + l]
 * (high when g & 2), bits 2g.. of qh[n*32 + l], scale sc[n*8 + 2g + l/16].
 * cv_q6k_at finds them (also for cuda_vecdot8.cuh's unit).
 */
struct cv_q6k_unit {
	const uint16_t *ql; /* 32 bytes: element l's low bits, >> lsh */
	const uint16_t *qh; /* 32 bytes: element l's high 2 bits, >> hsh */
	const int8_t *sc;   /* the scales of elements 0..15 and 16..31 */
	const uint8_t *d;   /* the block's fp16 scale */
	int lsh, hsh;
};

static __device__ __forceinline__ struct cv_q6k_unit
cv_q6k_at(const uint8_t *row, int64_t u)
{
	const uint8_t *b = row + (u >> 3) * 210;
	const int s8 = (int)(u & 7), n = s8 >> 2, g = s8 & 3;
	struct cv_q6k_unit q;

	q.ql = (const uint16_t *)(b + n * 64 + (g & 1) * 32);
	q.qh = (const uint16_t *)(b + 128 + n * 32);
	q.sc = (const int8_t *)(b + 192) + n * 8 + 2 * g;
	q.d = b + 208;
	q.lsh = (g & 2) ? 4 : 0;
	q.hsh = 2 * g;
	return q;
}

template <> struct cv_unit<QTYPE_Q6_K> {
	static const int ne = 32;
	static __device__ __forceinline__ void xload(int64_t u, const float *x,
	                                             float *xv)
	{
		cv_load<32>(x + u * 32, xv);
	}
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const float *xv)
	{
		const struct cv_q6k_unit qu = cv_q6k_at(row, u);
		const uint16_t *ql = qu.ql, *qh = qu.qh;
		const int lsh = qu.lsh, hsh = qu.hsh;
		float half_sum[2];
#pragma unroll
		for (int hh = 0; hh < 2; hh++) {
			float s = 0.0f;
#pragma unroll
			for (int k = 0; k < 2; k++) {
				float q[8];
#pragma unroll
				for (int j = 0; j < 4; j++) {
					const int i = hh * 8 + k * 4 + j;
					const uint32_t l = ql[i], h = qh[i];
					const uint32_t v0 =
					    ((l >> lsh) & 0xF) |
					    (((h >> hsh) & 3) << 4);
					const uint32_t v1 =
					    ((l >> (8 + lsh)) & 0xF) |
					    (((h >> (8 + hsh)) & 3) << 4);
					q[2 * j] = (float)((int)v0 - 32);
					q[2 * j + 1] = (float)((int)v1 - 32);
				}
				s += cv_dot8(xv + hh * 16 + k * 8, q);
			}
			half_sum[hh] = s * (float)qu.sc[hh];
		}
		return (half_sum[0] + half_sum[1]) * cq_half(qu.d);
	}
};

/* Types with a cv_unit (the others use the element-wise mat-vec). */
#define CV_FOR_EACH_TYPE(X)                                                    \
	X(QTYPE_F32)                                                           \
	X(QTYPE_F16)                                                           \
	X(QTYPE_Q8_0)                                                          \
	X(QTYPE_Q4_0)                                                          \
	X(QTYPE_Q4_1)                                                          \
	X(QTYPE_Q5_0)                                                          \
	X(QTYPE_Q5_1)                                                          \
	X(QTYPE_Q4_K)                                                          \
	X(QTYPE_Q6_K)

#endif /* PARLEY_CUDA_VECDOT_CUH */

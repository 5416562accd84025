/*
 * cuda_vecdot8.cuh - the mat-vec's inner step with int8 activations: one
 * unit of a GGUF row (as in cuda_vecdot.cuh) dotted with activations
 * quantized per 32 to int8, in exact integer arithmetic (dp4a).
 *
 * NOTES ON THE DESIGN
 *
 * 1. Why: with fp32 activations a Q4_K unit of 16 weight bytes needs 128
 *    bytes of activations and 32 float conversions and FMAs per row: the
 *    mat-vec was bound by the L1's load traffic and by instructions, far
 *    below DRAM bandwidth. As int8 the activations are 32 bytes, and four
 *    products are one dp4a.
 * 2. The activations (cm_quantize_x8, cuda_matmul.cu) are quantized per 32
 *    exactly as the CPU engine quantizes them for Q4_0, Q4_1 and Q8_0 rows
 *    (src/quant.c quantize_i8: d = amax/127, q = round(x/d), float32 d; a
 *    non-finite block gets d = NaN and zero quants): the same d, sums and
 *    quants bit for bit (t_cuda_ops checks), so the products are the exact
 *    products of the weights with those activations up to the float32
 *    rounding of combining block sums (t_cuda_ops: 1e-6 NMSE against the
 *    double product with the dequantized activations). For K-quant rows
 *    the CPU quantizes per 256 (llama.cpp's Q8_K); the GPU keeps blocks of
 *    32 for every type: one quantization serves every weight of an input,
 *    and the rounding error is never larger (a block's scale follows its
 *    own largest value; blocks of 256 measured worse on t_cuda_engine's
 *    Q4_K model).
 * 3. Rounding activations to int8 is noise of its own: against the exact
 *    reference (fp32 activations) a decode step of the real SmolLM2 moves
 *    by up to 1.2e-3 NMSE, in the CPU engine's default arithmetic as in
 *    this one. The engine tests measure the CPU engine's deviation on the
 *    same model and steps and hold the GPU to it (t_cuda_engine.c).
 * 4. Layout of one token's activations (cv8_xq), cv8_xq_stride(ne0) bytes,
 *    16-byte aligned:
 *      int8_t q[ne0]        quants
 *      float  d[ne0 / 32]   scales
 *      float  ds[ne0 / 32]  d * (sum of the block's quants)
 *    so a lane reads a block's quants with two 16-byte loads.
 * 5. The units are the ones of cuda_vecdot.cuh (same element order, same
 *    weight loads); xload reads what a unit needs of the activations once
 *    for all the rows a warp computes (cuda_vecdot.cuh note 5). Except
 *    Q4_K's (and Q4_KR's): a unit is a whole 64-element chunk of a
 *    super-block (32 bytes of quants), twice cuda_vecdot.cuh's, its
 *    activations' sums taken from ds: the loop's instructions per weight
 *    byte halved (4.7 -> 2.3), decode +5-8% on Q4_K_M files (BENCHMARKS.md,
 *    issue 29).
 */
#ifndef PARLEY_CUDA_VECDOT8_CUH
#define PARLEY_CUDA_VECDOT8_CUH

#include "cuda_quant.cuh"
#include "cuda_reduce.cuh"
#include "cuda_vecdot.cuh" /* the units */

#include <float.h>
#include <type_traits>

/* One token's quantized activations (note 4). */
struct cv8_xq {
	const int8_t *q;
	const float *d;
	const float *ds;
};

/* Bytes of one token's quantized activations for NE0 elements (a
 * multiple of 32): quants, scales, sums, rounded up to 16 bytes. */
static __host__ __device__ __forceinline__ size_t cv8_xq_stride(int64_t ne0)
{
	return (((size_t)ne0 + (size_t)ne0 / 32 * 8) + 15) & ~(size_t)15;
}

/* Token T's activations in the buffer at X. */
static __device__ __forceinline__ struct cv8_xq
cv8_xq_at(const void *x, int64_t t, int64_t ne0)
{
	const uint8_t *b = (const uint8_t *)x + (size_t)t * cv8_xq_stride(ne0);
	struct cv8_xq v = {.q = (const int8_t *)b,
	                   .d = (const float *)(b + ne0),
	                   .ds = (const float *)(b + ne0) + ne0 / 32};

	return v;
}

/*
 * Quantize one block of 32 activations, element LANE of it being V (the
 * 32 lanes of a warp call this together), exactly as src/quant.c's
 * quantize_i8 and vec_q8 do (note 2): d = amax / 127 (IEEE division),
 * q = roundf(x * (1 / d)) clamped to +-127, ds = d * sum(q); a block with
 * an infinity or a NaN gets d = NaN and zero quants. Lane l writes *Q; lane
 * 0 writes *D and *DS.
 */
static __device__ __forceinline__ void
cv8_quantize32(float v, int lane, int8_t *q, float *d, float *ds)
{
	const float a = fabsf(v);
	const int finite = __all_sync(0xffffffffu, a <= FLT_MAX);
	const float amax = red_warp<red_max>(a);
	const float dd =
	    finite ? __fdiv_rn(amax, 127.0f) : __int_as_float(0x7fc00000);
	const float id = finite && dd != 0.0f ? __frcp_rn(dd) : 0.0f;
	const float r =
	    finite ? fminf(fmaxf(roundf(__fmul_rn(v, id)), -127.0f), 127.0f)
	           : 0.0f;
	const int qi = (int)r, sum = red_warp<red_add>(qi);

	*q = (int8_t)qi;
	if (lane == 0) {
		*d = dd;
		*ds = __fmul_rn(dd, (float)sum);
	}
}

/* Quants of block U as 8 words: word j holds elements 4j .. 4j + 3. */
static __device__ __forceinline__ void cv8_load32(const struct cv8_xq &x,
                                                  int64_t u, int *q)
{
	const int4 a = __ldg((const int4 *)(x.q + u * 32));
	const int4 b = __ldg((const int4 *)(x.q + u * 32) + 1);

	q[0] = a.x, q[1] = a.y, q[2] = a.z, q[3] = a.w;
	q[4] = b.x, q[5] = b.y, q[6] = b.z, q[7] = b.w;
}

/* A 32-bit word of a 2-byte aligned block: 16-bit halves at P[0], P[1]. */
static __device__ __forceinline__ int cv8_word2(const uint16_t *p)
{
	return (int)((uint32_t)p[0] | ((uint32_t)p[1] << 16));
}

/* What the 32-element units take of the activations. */
struct cv8_xv32 {
	int q[8];
	float d, ds;
};

template <int T> struct cv8_unit;

/* The units whose activations are one 32-element block: block u. */
struct cv8_unit_block {
	static const int ne = 32;
	typedef struct cv8_xv32 xv;
	static __device__ __forceinline__ void
	xload(int64_t u, const struct cv8_xq &x, xv &v)
	{
		cv8_load32(x, u, v.q);
		v.d = __ldg(x.d + u);
		v.ds = __ldg(x.ds + u);
	}
};

/* Q8_0: d, qs[32] int8; 16-bit loads (34-byte blocks). */
template <> struct cv8_unit<QTYPE_Q8_0> : cv8_unit_block {
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const xv &v)
	{
		const uint8_t *b = row + u * 34;
		const uint16_t *p = (const uint16_t *)b + 1;
		int s = 0;
#pragma unroll
		for (int j = 0; j < 8; j++)
			s = __dp4a(cv8_word2(p + 2 * j), v.q[j], s);
		return cq_half(b) * (v.d * (float)s);
	}
};

/* Sum of the 32 4-bit quants of a Q4_0/Q4_1 block (16 bytes: low nibble of
 * byte l is element l, high l + 16), as the words W(j), j < 4, times
 * the activation block's quants. */
template <class Words>
static __device__ __forceinline__ int cv8_nibbles32(Words word, const int *q)
{
	int s = 0;
#pragma unroll
	for (int j = 0; j < 4; j++) {
		const int w = word(j);
		s = __dp4a(w & 0x0F0F0F0F, q[j], s);
		s = __dp4a((w >> 4) & 0x0F0F0F0F, q[4 + j], s);
	}
	return s;
}

/* Q4_0: d, qs[16]: low nibble of byte l is element l, high l + 16;
 * w = d * (q - 8), so the dot is d * (dx * sum q qx - 8 * ds). */
template <> struct cv8_unit<QTYPE_Q4_0> : cv8_unit_block {
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const xv &v)
	{
		const uint8_t *b = row + u * 18;
		const uint16_t *p =
		    (const uint16_t *)b + 1; /* 2-byte aligned */
		const int s = cv8_nibbles32(
		    [p](int j) { return cv8_word2(p + 2 * j); }, v.q);

		return cq_half(b) * (v.d * (float)s - 8.0f * v.ds);
	}
};

/* Q4_1: d, m, qs[16]; w = d * q + m: d * dx * sum q qx + m * ds. */
template <> struct cv8_unit<QTYPE_Q4_1> : cv8_unit_block {
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const xv &v)
	{
		const uint8_t *b = row + u * 20;
		const int *p = (const int *)b + 1; /* 4-byte aligned */
		const int s = cv8_nibbles32([p](int j) { return p[j]; }, v.q);

		return cq_half(b) * (v.d * (float)s) + cq_half(b + 2) * v.ds;
	}
};

/* The fifth bits of 4 consecutive elements of a Q5_0/Q5_1 block, bits
 * 0..3 of H, as bit 4 of each byte of a word (to OR onto the low
 * nibbles). */
static __device__ __forceinline__ int cv8_q5_hi4(uint32_t h)
{
	return (int)(((h << 4) & 0x00000010u) | ((h << 11) & 0x00001000u) |
	             ((h << 18) & 0x00100000u) | ((h << 25) & 0x10000000u));
}

/* Sum of the 32 5-bit quants of a Q5_0/Q5_1 block (nibbles as Q4_0's,
 * words W(j), j < 4, the fifth bits in QH) times the activation block's
 * quants. */
template <class Words>
static __device__ __forceinline__ int cv8_q5_32(Words word, uint32_t qh,
                                                const int *q)
{
	int s = 0;
#pragma unroll
	for (int j = 0; j < 4; j++) {
		const int w = word(j);
		const int lo = (w & 0x0F0F0F0F) | cv8_q5_hi4(qh >> (4 * j));
		const int hi =
		    ((w >> 4) & 0x0F0F0F0F) | cv8_q5_hi4(qh >> (16 + 4 * j));

		s = __dp4a(lo, q[j], s);
		s = __dp4a(hi, q[4 + j], s);
	}
	return s;
}

/* Q5_0: d, qh[4], qs[16] (2-byte aligned); w = d * (q - 16), so the dot
 * is d * (dx * sum q qx - 16 * ds). */
template <> struct cv8_unit<QTYPE_Q5_0> : cv8_unit_block {
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const xv &v)
	{
		const uint8_t *b = row + u * 22;
		const uint16_t *p = (const uint16_t *)(b + 6);
		const uint32_t qh =
		    (uint32_t)cv8_word2((const uint16_t *)(b + 2));
		const int s = cv8_q5_32(
		    [p](int j) { return cv8_word2(p + 2 * j); }, qh, v.q);

		return cq_half(b) * (v.d * (float)s - 16.0f * v.ds);
	}
};

/* Q5_1: d, m, qh[4], qs[16] (4-byte aligned); w = d * q + m. */
template <> struct cv8_unit<QTYPE_Q5_1> : cv8_unit_block {
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const xv &v)
	{
		const uint8_t *b = row + u * 24;
		const int *p = (const int *)b + 2;
		const int s = cv8_q5_32([p](int j) { return p[j]; },
		                        ((const uint32_t *)b)[1], v.q);

		return cq_half(b) * (v.d * (float)s) + cq_half(b + 2) * v.ds;
	}
};

/* What a Q6_K unit takes of the activations: a block's, and 32 times
 * the sum of each 16 of its quants (the "- 32" of every weight, below). */
struct cv8_xv_q6k : cv8_xv32 {
	int c[2];
};

/* A Q6_K unit's dot given its 8 words of low bits L (>> LSH) and of high
 * bits H (>> HSH), its two scales SC and the block's scale at D. A
 * weight is w - 32 with w in 0..63; the integer sum of (w - 32) q over
 * 16 elements is sum(w q) - 32 sum(q), exactly, so the 6-bit w go into
 * dp4a as they are (bytes below 128: the same as signed) and V.c, made
 * once per unit for all the rows of a warp, is subtracted: three
 * instructions a word fewer than a per-byte subtraction (__vsub4), the
 * same integers and so the same floats. */
static __device__ __forceinline__ float
cv8_q6k_dot(const int *l, const int *h, int lsh, int hsh, const int8_t *sc,
            const uint8_t *d, const struct cv8_xv_q6k &v)
{
	int s[2] = {0, 0};
	/* bits hsh, hsh + 1 of each byte of H to bits 4, 5: a rotation left
	   by 4 - hsh (the bits that wrap around fall outside the mask), so
	   a word is a shift, a rotation and one three-input logic op */
	const int rot = (4 - hsh) & 31;
#pragma unroll
	for (int j = 0; j < 8; j++) {
		const uint32_t w =
		    (((uint32_t)l[j] >> lsh) & 0x0F0F0F0Fu) |
		    (__funnelshift_l((uint32_t)h[j], (uint32_t)h[j], rot) &
		     0x30303030u);

		s[j >> 2] = __dp4a((int)w, v.q[j], s[j >> 2]);
	}
	s[0] -= v.c[0];
	s[1] -= v.c[1];
	return cq_half(d) *
	       (v.d * (float)(s[0] * (int)sc[0] + s[1] * (int)sc[1]));
}

/* The units of Q6_K and its GPU layout: a block's activations and V.c. */
struct cv8_unit_q6k {
	static const int ne = 32;
	typedef struct cv8_xv_q6k xv;
	static __device__ __forceinline__ void
	xload(int64_t u, const struct cv8_xq &x, xv &v)
	{
		cv8_unit_block::xload(u, x, v);
		v.c[0] = v.c[1] = 0;
#pragma unroll
		for (int j = 0; j < 8; j++)
			v.c[j >> 2] = __dp4a(0x20202020, v.q[j], v.c[j >> 2]);
	}
};

/* Q6_K, unit = group s of block u / 8 (cuda_vecdot.cuh): elements
 * u * 32 .. u * 32 + 31, so its activations are block u. Element l:
 * nibble of ql[n*64 + (g&1)*32 + l] (high when g & 2) and bits 2g.. of
 * qh[n*32 + l], minus 32; scale sc[n*8 + 2g + l/16]. */
template <> struct cv8_unit<QTYPE_Q6_K> : cv8_unit_q6k {
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const xv &v)
	{
		const struct cv_q6k_unit q = cv_q6k_at(row, u);
		int l[8], h[8];
#pragma unroll
		for (int j = 0; j < 8; j++) {
			l[j] = cv8_word2(q.ql + 2 * j);
			h[j] = cv8_word2(q.qh + 2 * j);
		}
		return cv8_q6k_dot(l, h, q.lsh, q.hsh, q.sc, q.d, v);
	}
};

/* 32 bytes at P (16-byte aligned) as 8 words. */
static __device__ __forceinline__ void cv8_words32(const uint8_t *p, int *w)
{
	const int4 a = *(const int4 *)p, b = *((const int4 *)p + 1);

	w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w;
	w[4] = b.x, w[5] = b.y, w[6] = b.z, w[7] = b.w;
}

/*
 * The GPU layouts of Q8_0 and Q6_K (cuda_quant.cuh note 5; Q4_K's is
 * below, after its GGUF unit): the units of
 * the GGUF layouts with each 32-byte run of quants read by two 16-byte
 * loads; the same integer sums and the same float operations, so the
 * same results bit for bit. SPLIT: dot takes the row's unit count NU
 * (the field arrays' offsets in the row depend on it).
 */
template <> struct cv8_unit<CQ_Q8_0R> : cv8_unit_block {
	static const bool split = true;
	static __device__ __forceinline__ float
	dot(const uint8_t *row, int64_t nu, int64_t u, const xv &v)
	{
		int w[8], s = 0;

		cv8_words32(row + u * 32, w);
#pragma unroll
		for (int j = 0; j < 8; j++)
			s = __dp4a(w[j], v.q[j], s);
		return cq_half(row + nu * 32 + u * 2) * (v.d * (float)s);
	}
};

/* Q6_KR: unit u = group g of half n of block b = u / 8, as for Q6_K. */
template <> struct cv8_unit<CQ_Q6_KR> : cv8_unit_q6k {
	static const bool split = true;
	static __device__ __forceinline__ float
	dot(const uint8_t *row, int64_t nu, int64_t u, const xv &v)
	{
		const int64_t b = u >> 3, nb = nu >> 3;
		const int s8 = (int)(u & 7), n = s8 >> 2, g = s8 & 3;
		int l[8], h[8];

		cv8_words32(row + b * 128 + n * 64 + (g & 1) * 32, l);
		cv8_words32(row + nb * 128 + b * 64 + n * 32, h);
		return cv8_q6k_dot(l, h, (g & 2) ? 4 : 0, 2 * g,
		                   (const int8_t *)(row + nb * 192) + b * 16 +
		                       n * 8 + 2 * g,
		                   row + nb * 208 + b * 2, v);
	}
};

/* The unsigned bytes of A dotted with the signed bytes of B, plus C: a
 * Q4_K word's high nibbles masked in place are unsigned bytes of 16 times
 * their value (one mask instead of a shift and a mask per word). */
static __device__ __forceinline__ int cv8_dp4a_us(uint32_t a, int b, int c)
{
	int d;

	asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
	return d;
}

/* What a Q4_K unit takes of the activations: the two 32-element blocks
 * of its sub-block pair, their scales and their sums (d * sum(q), made
 * by the quantization: note 4). */
struct cv8_xv_q4k {
	int q0[8], q1[8];
	float2 d, ds;
};

/* Q4_K, unit = chunk c = u % 4 of super-block u / 4: its 32 bytes of qs,
 * whose low nibbles are sub-block 2c (activation block (u / 4) * 8 + 2c)
 * and high nibbles sub-block 2c + 1 (the next block). w = d * sc * q -
 * dmin * m per sub-block, so the pair's dot is d * (dx0 * sc0 * sum(q0
 * qx0) + dx1 * sc1 * sum(q1 qx1)) - dmin * (m0 * ds0 + m1 * ds1), the
 * integer sums exact (|sum * sc| < 2^22, so exact as floats). 64
 * elements a unit, not 32: the block's header is decoded once for twice
 * the bytes, and the activations' sums come with them (BENCHMARKS.md,
 * issue 29's mat-vec step). */
template <> struct cv8_unit<QTYPE_Q4_K> {
	static const int ne = 64;
	typedef struct cv8_xv_q4k xv;
	static __device__ __forceinline__ void
	xload(int64_t u, const struct cv8_xq &x, xv &v)
	{
		const uint32_t b0 =
		    ((uint32_t)u >> 2) * 8 + ((uint32_t)u & 3) * 2;
		const int4 *q = (const int4 *)(x.q + (size_t)b0 * 32);
		const int4 a = __ldg(q), b = __ldg(q + 1), c = __ldg(q + 2),
		           e = __ldg(q + 3);

		v.q0[0] = a.x, v.q0[1] = a.y, v.q0[2] = a.z, v.q0[3] = a.w;
		v.q0[4] = b.x, v.q0[5] = b.y, v.q0[6] = b.z, v.q0[7] = b.w;
		v.q1[0] = c.x, v.q1[1] = c.y, v.q1[2] = c.z, v.q1[3] = c.w;
		v.q1[4] = e.x, v.q1[5] = e.y, v.q1[6] = e.z, v.q1[7] = e.w;
		v.d = __ldg((const float2 *)(x.d + b0));
		v.ds = __ldg((const float2 *)(x.ds + b0));
	}
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const xv &v)
	{
		const uint32_t c = (uint32_t)u & 3;
		const uint8_t *b = row + (size_t)((uint32_t)u >> 2) * 144;
		int s0, s1, sc0, m0, sc1, m1;

		sums(b + 16 + c * 32, v, &s0, &s1);
		cq_scale_min_k4(2 * c, b + 4, &sc0, &m0);
		cq_scale_min_k4(2 * c + 1, b + 4, &sc1, &m1);
		return combine(s0, s1, sc0, m0, sc1, m1, cq_half(b),
		               cq_half(b + 2), v);
	}
	/* The sub-block pair's integer sums S0, S1 with their scales and
	   mins, the block's D and DM: the unit's dot (one order for both
	   layouts, so the same floats). */
	static __device__ __forceinline__ float combine(int s0, int s1, int sc0,
	                                                int m0, int sc1, int m1,
	                                                float d, float dm,
	                                                const xv &v)
	{
		return d * (v.d.x * (float)(s0 * sc0) +
		            v.d.y * (float)(s1 * sc1)) -
		       dm * (v.ds.x * (float)m0 + v.ds.y * (float)m1);
	}
	/* The integer sums of the unit's 32 bytes of quants at P (16-byte
	   aligned; low nibbles against Q0, high ones against Q1). */
	static __device__ __forceinline__ void
	sums(const uint8_t *p, const xv &v, int *s0, int *s1)
	{
		int w[8], a = 0, h = 0;

		cv8_words32(p, w);
#pragma unroll
		for (int k = 0; k < 8; k++) {
			a = __dp4a(w[k] & 0x0F0F0F0F, v.q0[k], a);
			h = cv8_dp4a_us((uint32_t)w[k] & 0xF0F0F0F0u, v.q1[k],
			                h);
		}
		*s0 = a;
		*s1 = h >> 4; /* (every term a multiple of 16: exact) */
	}
};

/* Q4_KR (cuda_quant.cuh note 5): Q4_K's unit and activations; the block's
 * first 16 bytes (d, dmin, the two 48-bit fields) in one load, the
 * sub-block pair's scales and mins decoded from them (cq_q4kr_fields). */
template <> struct cv8_unit<CQ_Q4_KR> : cv8_unit<QTYPE_Q4_K> {
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const xv &v)
	{
		const uint32_t c = (uint32_t)u & 3;
		const uint8_t *b = row + (size_t)((uint32_t)u >> 2) * 144;
		const uint4 hd = *(const uint4 *)b;
		const struct cq_q4kr_words f = cq_q4kr_fields(hd.y, hd.z, hd.w);
		/* the pair's two scales (bits 12c..), its two mins */
		const uint32_t sc = (uint32_t)(f.lo >> (12 * c)) & 0xFFF;
		const uint32_t mn = (uint32_t)(f.hi >> (16 + 12 * c)) & 0xFFF;
		int s0, s1;

		sums(b + 16 + c * 32, v, &s0, &s1);
		return combine(s0, s1, (int)(sc & 63), (int)(mn & 63),
		               (int)(sc >> 6), (int)(mn >> 6),
		               __half2float(__ushort_as_half(
		                   (unsigned short)(hd.x & 0xFFFF))),
		               __half2float(__ushort_as_half(
		                   (unsigned short)(hd.x >> 16))),
		               v);
	}
};

/* Q5_K: d, dmin, scales[12] (Q4_K's packing), qh[32], qs[128]
 * (176-byte blocks, read 16 bytes at a time: rows 16-byte aligned,
 * cm_unit_ok); Q4_K's unit of a 64-element chunk c = u % 4: the low
 * nibbles of qs[32c ..] with bit 2c of qh[l] as their fifth bit are
 * sub-block 2c, the high nibbles with bit 2c + 1 sub-block 2c + 1; the
 * same activations and the same combination of the pair's sums. */
template <> struct cv8_unit<QTYPE_Q5_K> : cv8_unit<QTYPE_Q4_K> {
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const xv &v)
	{
		const uint32_t c = (uint32_t)u & 3;
		const uint8_t *b = row + (size_t)((uint32_t)u >> 2) * 176;
		int w[8], h[8], s0 = 0, s1 = 0, sc0, m0, sc1, m1;

		cv8_words32(b + 48 + c * 32, w);
		cv8_words32(b + 16, h);
#pragma unroll
		for (int k = 0; k < 8; k++) {
			const uint32_t hk = (uint32_t)h[k] >> (2 * c);
			const int lo = (w[k] & 0x0F0F0F0F) |
			               (int)((hk & 0x01010101u) << 4);
			const int hi = ((w[k] >> 4) & 0x0F0F0F0F) |
			               (int)((hk & 0x02020202u) << 3);

			s0 = __dp4a(lo, v.q0[k], s0);
			s1 = __dp4a(hi, v.q1[k], s1);
		}
		cq_scale_min_k4(2 * c, b + 4, &sc0, &m0);
		cq_scale_min_k4(2 * c + 1, b + 4, &sc1, &m1);
		return combine(s0, s1, sc0, m0, sc1, m1, cq_half(b),
		               cq_half(b + 2), v);
	}
};

/* An activation block's 8 words Q in the nibbles' order of a Q4_0-laid
 * block: word 2j holds elements 4j, 16 + 4j, 4j + 1, 17 + 4j, word 2j + 1
 * the next two of each half (once per unit, for all the rows it meets). */
static __device__ __forceinline__ void cv8_nib_order(int *q)
{
	int t[8];
#pragma unroll
	for (int j = 0; j < 4; j++) {
		t[2 * j] = (int)__byte_perm(q[j], q[4 + j], 0x5140);
		t[2 * j + 1] = (int)__byte_perm(q[j], q[4 + j], 0x7362);
	}
#pragma unroll
	for (int j = 0; j < 8; j++)
		q[j] = t[j];
}

/*
 * The 32 4-bit quants of a block laid out as Q4_0's (W: its 16 bytes as 4
 * words; byte l's low nibble is element l, its high one l + 16), each
 * quant's value in a 16-entry int8 table, dotted with the activations Q
 * in the nibbles' order (cv8_nib_order), as two integer sums. A half
 * word's 4 nibbles, as they are, select bytes of LO (entries 0..7): a
 * nibble of 8 or more gives the sign of LO's byte, so LO's entries share
 * one sign (0 or -1 for those nibbles). With their top bits flipped they
 * select bytes of HI (the table's entries 8..15 as the caller stores
 * them), whose entries are all non-negative (0 for the nibbles below 8).
 * *S gets LO's products, *T HI's: the caller's table says how they make
 * the sum. Two byte permutations and two dp4a a half word, against three
 * permutations (both halves of the table and a choice between them) and
 * two more to gather the nibbles' bytes in element order.
 */
static __device__ __forceinline__ void cv8_nib16(const uint32_t *lo,
                                                 const uint32_t *hi,
                                                 const uint32_t *w,
                                                 const int *q, int *s, int *t)
{
	int a = 0, b = 0;
#pragma unroll
	for (int j = 0; j < 4; j++) {
		const uint32_t x = w[j] ^ 0x88888888u;

		a = __dp4a((int)cq_prmt(lo[0], lo[1], w[j]), q[2 * j], a);
		b = __dp4a((int)cq_prmt(hi[0], hi[1], x), q[2 * j], b);
		a = __dp4a((int)cq_prmt(lo[0], lo[1], w[j] >> 16), q[2 * j + 1],
		           a);
		b = __dp4a((int)cq_prmt(hi[0], hi[1], x >> 16), q[2 * j + 1],
		           b);
	}
	*s = a, *t = b;
}

/* The 32-element units whose activations are in the nibbles' order. */
struct cv8_unit_block_nib : cv8_unit_block {
	static __device__ __forceinline__ void
	xload(int64_t u, const struct cv8_xq &x, xv &v)
	{
		cv8_unit_block::xload(u, x, v);
		cv8_nib_order(v.q);
	}
};

/* MXFP4: e (E8M0), qs[16] (17-byte blocks, any alignment); byte l's low
 * nibble is element l, its high one l + 16, each the index of an FP4
 * value (quant_kvalues_mxfp4, doubled to integers) times 2^(e-128): the
 * dot is 2^(e-128) * dx * sum kv[q] qx, the CPU's integer sum
 * (quant_iq.c kern_mxfp4_c). The 16 quant bytes are read as the aligned
 * words that hold them and shifted into place (funnel shifts), a fifth
 * word only where they straddle one. */
template <> struct cv8_unit<QTYPE_MXFP4> : cv8_unit_block_nib {
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const xv &v)
	{
		/* kvalues 0 1 2 3 4 6 8 12, then the same negated: the second
		   half as the first, its sum subtracted (cv8_nib16) */
		const uint32_t kv[2] = {0x03020100u, 0x0C080604u};
		const uint8_t *b = row + u * 17;
		const uintptr_t a = (uintptr_t)(b + 1);
		const uint32_t *p = (const uint32_t *)(a & ~(uintptr_t)3);
		const uint32_t sh = (uint32_t)(a & 3) * 8;
		const unsigned e = b[0];
		uint32_t w[5], q[4];

#pragma unroll
		for (int j = 0; j < 4; j++)
			w[j] = p[j];
		w[4] = sh != 0 ? p[4] : 0;
#pragma unroll
		for (int j = 0; j < 4; j++)
			q[j] = __funnelshift_r(w[j], w[j + 1], sh);
		int s, t;
		cv8_nib16(kv, kv, q, v.q, &s, &t);
		const float d = __uint_as_float(
		    e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23);

		return (d * v.d) * (float)(s - t);
	}
};

/*
 * The i-quants and the ternary types (cuda_quant.cuh note 6) with int8
 * activations. A unit is one 32-element activation block: sub-block
 * u % 8 of the 256-element block u / 8 (IQ4_NL: its block u). Its
 * integer sum is exact, as the CPU's (quant_iq.c unpack_* and
 * kern_*: the same integer quants q, here summed per 32 instead of
 * per 256, note 2), then times the block's float scale and the
 * sub-block's integer one (their product exact: an fp16 d times at most
 * 6 bits), the activations' d, and the sum.
 */

/* IQ4_NL's 16 values (quant_kvalues_iq4nl) for cv8_nib16: entries 0..7
 * as they are (-127 .. -10: -1 for the nibbles of 8 or more), entries
 * 8..15 plus one (2 .. 114), so that an element of 8 or more counts
 * -1 + (kv + 1) times its activation: the sum is S + T. */
#define CV8_KV_IQ4NL_LO                                                        \
	{                                                                      \
		0xBFAD9881u, 0xF6EADDCFu                                       \
	}
#define CV8_KV_IQ4NL_HI                                                        \
	{                                                                      \
		0x271A0E02u, 0x725A4636u                                       \
	}

/* The sum of an IQ4 block (16 bytes as the words W) times Q (in the
 * nibbles' order). */
static __device__ __forceinline__ int cv8_iq4_dot(const uint32_t *w,
                                                  const int *q)
{
	const uint32_t lo[2] = CV8_KV_IQ4NL_LO, hi[2] = CV8_KV_IQ4NL_HI;
	int s, t;

	cv8_nib16(lo, hi, w, q, &s, &t);
	return s + t;
}

/* The sign pattern of a 7-bit sign index I (quant_ksigns_iq2xs): I with
 * bit 7 set where I has an odd number of ones (an even count of
 * negative elements in every group of 8). */
static __device__ __forceinline__ uint32_t cv8_ksigns(uint32_t i)
{
	i &= 127;
	return i | (uint32_t)(__popc(i) & 1) << 7;
}

/* The 4 bytes of G negated where bits 0..3 of S are set (bit j: byte j).
 * The product spreads bit j to bit 8j (shifts of 0, 7, 14, 21: no two
 * overlap, no carries), so N holds a 1 in each byte to negate; then
 * -g = (g ^ 0xFF) + 1 byte by byte, without a carry between bytes since
 * no grid byte is 0 (quant_grids.c: IQ2's 8, 25, 43; IQ3_XXS's 4..62;
 * IQ3_S's 1..15). (The SIMD intrinsics __vcmpne4 and __vsub4 are several
 * instructions each on this GPU.) */
static __device__ __forceinline__ int cv8_signed4(uint32_t g, uint32_t s)
{
	const uint32_t n = ((s & 15) * 0x00204081u) & 0x01010101u;

	return (int)((g ^ (n * 0xFFu)) + n);
}

/* The 8 signed grid bytes of entry G (8 bytes) with the sign bits S
 * (bits 0..7), dotted with the activations' words Q[0], Q[1], plus C. */
static __device__ __forceinline__ int cv8_grid8(uint64_t g, uint32_t s,
                                                const int *q, int c)
{
	c = __dp4a(cv8_signed4((uint32_t)g, s), q[0], c);
	return __dp4a(cv8_signed4((uint32_t)(g >> 32), s >> 4), q[1], c);
}

/* The 8 int8 bytes of an IQ1 grid entry G dotted with Q[0], Q[1]. */
static __device__ __forceinline__ int cv8_grid8s(uint64_t g, const int *q)
{
	return __dp4a((int)(uint32_t)(g >> 32), q[1],
	              __dp4a((int)(uint32_t)g, q[0], 0));
}

/*
 * The codebooks of IQ2_XXS (2 KB), IQ3_XXS (1 KB) and IQ3_S (2 KB) in
 * shared memory. Lanes look entries up by the weights: a warp's 32
 * lookups of an entry of 8 bytes touch about 14 of a 2 KB table's 16 cache
 * lines, and the L1 serves a load one line at a time, so the lookups were
 * most of the L1's work (the 7B IQ2_XXS shape decoded at 15% of the
 * bandwidth floor); in shared memory they cost the bank conflicts of 32
 * random entries, a few cycles. The block copies the table first
 * (U::prepare, all threads, then a barrier: cm_prepare in cuda_matmul.cu),
 * before its wait for the previous kernel (no kernel writes the tables).
 * The larger tables (IQ2_XS 4 KB, IQ2_S 8 KB, IQ1's 16 KB) stay in global
 * memory: a block's copy would be as many bytes as its rows' weights.
 */
static __device__ __forceinline__ uint32_t *cv8_smem_tab(void)
{
	__shared__ __align__(8) uint32_t t[512]; /* the largest: 2 KB */

	return t;
}

/* Copy the N words at SRC into cv8_smem_tab (the block's threads
 * together; a barrier must follow). */
static __device__ __forceinline__ void cv8_smem_fill(const uint32_t *src, int n)
{
	uint32_t *t = cv8_smem_tab();

	for (int i = (int)threadIdx.x; i < n; i += (int)blockDim.x)
		t[i] = src[i];
}

/* Whether unit U copies a table into shared memory (has U::prepare). */
template <class U, class = void> struct cv8_prepares {
	static const bool v = false;
};
template <class U> struct cv8_prepares<U, std::void_t<decltype(U::prepare())>> {
	static const bool v = true;
};

/* The block's d (the fp16 at B) times the sub-block's integer scale SC
 * and F (a power of two): exact. */
static __device__ __forceinline__ float cv8_iq_dsc(const uint8_t *b, int sc,
                                                   float f)
{
	return cq_half(b) * f * (float)sc;
}

/* IQ4_NL: d, qs[16] (18-byte blocks, 2-byte aligned), Q4_0's nibble
 * order, values from the table: d * dx * sum kv[q] qx. */
template <> struct cv8_unit<QTYPE_IQ4_NL> : cv8_unit_block_nib {
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const xv &v)
	{
		const uint8_t *b = row + u * 18;
		const uint16_t *p = (const uint16_t *)(b + 2);
		uint32_t w[4];

#pragma unroll
		for (int j = 0; j < 4; j++)
			w[j] = (uint32_t)cv8_word2(p + 2 * j);
		return (cq_half(b) * v.d) * (float)cv8_iq4_dot(w, v.q);
	}
};

/* IQ4_XS: d, scales_h (u16), scales_l[4], qs[128] (136-byte blocks, read
 * 8 bytes at a time: rows 8-byte aligned, cm_unit_ok); sub-block ib's 16
 * bytes at 8 + 16 ib in IQ4_NL's order, its 6-bit scale (low nibble ib of
 * scales_l, two bits 2 ib of scales_h) minus 32. A unit is Q4_K's: a pair
 * of sub-blocks (2c, 2c + 1, c = u % 4), their activations Q4_K's in the
 * nibbles' order, the header decoded once for both (|sum * sc| <= 32 * 127 *
 * 127 * 32 < 2^24: exact as floats). */
template <> struct cv8_unit<QTYPE_IQ4_XS> : cv8_unit<QTYPE_Q4_K> {
	static __device__ __forceinline__ void
	xload(int64_t u, const struct cv8_xq &x, xv &v)
	{
		cv8_unit<QTYPE_Q4_K>::xload(u, x, v);
		cv8_nib_order(v.q0);
		cv8_nib_order(v.q1);
	}
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const xv &v)
	{
		const uint32_t c = (uint32_t)u & 3;
		const uint8_t *b = row + (size_t)((uint32_t)u >> 2) * 136;
		const uint2 h = *(const uint2 *)b;
		const uint2 *p = (const uint2 *)(b + 8 + 32 * c);
		const uint2 q0 = p[0], q1 = p[1], q2 = p[2], q3 = p[3];
		const uint32_t w0[4] = {q0.x, q0.y, q1.x, q1.y};
		const uint32_t w1[4] = {q2.x, q2.y, q3.x, q3.y};
		const uint32_t lo = h.y >> (8 * c), hi = h.x >> (16 + 4 * c);
		const int sc0 = (int)((lo & 15) | (hi & 3) << 4) - 32;
		const int sc1 = (int)(((lo >> 4) & 15) | (hi & 12) << 2) - 32;
		const int s0 = cv8_iq4_dot(w0, v.q0);
		const int s1 = cv8_iq4_dot(w1, v.q1);

		return __half2float(__ushort_as_half((unsigned short)h.x)) *
		       (v.d.x * (float)(s0 * sc0) + v.d.y * (float)(s1 * sc1));
	}
};

/* IQ2_XXS: d, then per sub-block 8 bytes (66-byte blocks): four grid
 * indices (bytes, an entry of 8 elements each) and a word of four 7-bit
 * sign indices and the 4-bit scale s on top: 2 s + 1, times d / 8. */
template <> struct cv8_unit<QTYPE_IQ2_XXS> : cv8_unit_block {
	static __device__ __forceinline__ void prepare(void)
	{
		cv8_smem_fill((const uint32_t *)cq_iq_tables().iq2xxs, 512);
	}
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const xv &v)
	{
		const uint64_t *grid = (const uint64_t *)cv8_smem_tab();
		const uint8_t *b = row + (u >> 3) * 66;
		const uint8_t *p = b + 2 + 8 * (u & 7);
		const uint32_t a0 = cq_u32(p), a1 = cq_u32(p + 4);
		int s[2] = {0, 0}; /* (two chains of dp4a) */

#pragma unroll
		for (int l = 0; l < 4; l++)
			s[l & 1] = cv8_grid8(grid[(a0 >> (8 * l)) & 255],
			                     cv8_ksigns(a1 >> (7 * l)),
			                     v.q + 2 * l, s[l & 1]);
		return (cv8_iq_dsc(b, 2 * (int)(a1 >> 28) + 1, 0.125f) * v.d) *
		       (float)(s[0] + s[1]);
	}
};

/* IQ2_XS's and IQ2_S's sub-block sum: the integer sums S of its two
 * halves of 16, each times its 4-bit scale s of the byte SC as 2 s + 1
 * (low nibble the first half's). */
static __device__ __forceinline__ int cv8_iq2_halves(const int *s, uint32_t sc)
{
	return s[0] * (int)(2 * (sc & 15) + 1) +
	       s[1] * (int)(2 * (sc >> 4) + 1);
}

/* IQ2_XS: d, per 8 elements a u16 (9-bit grid index, 7-bit sign index),
 * per sub-block a byte of two 4-bit scales at 66 (one per 16). */
template <> struct cv8_unit<QTYPE_IQ2_XS> : cv8_unit_block {
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const xv &v)
	{
		const struct cq_iq_tables t = cq_iq_tables();
		const uint8_t *b = row + (u >> 3) * 74;
		const int ib = (int)(u & 7);
		const uint32_t sc = b[66 + ib];
		int s[2] = {0, 0};

#pragma unroll
		for (int l = 0; l < 4; l++) {
			const uint32_t q = cq_u16(b + 2 + 8 * ib + 2 * l);

			s[l >> 1] =
			    cv8_grid8(t.iq2xs[q & 511], cv8_ksigns(q >> 9),
			              v.q + 2 * l, s[l >> 1]);
		}
		return (cv8_iq_dsc(b, 1, 0.125f) * v.d) *
		       (float)cv8_iq2_halves(s, sc);
	}
};

/* IQ2_S: d, per 8 elements (k) the low byte of a 10-bit grid index at
 * 2 + k and a sign byte at 34 + k, the high bits two a k in the bytes at
 * 66; scales at 74 as IQ2_XS's (82-byte blocks). */
template <> struct cv8_unit<QTYPE_IQ2_S> : cv8_unit_block {
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const xv &v)
	{
		const struct cq_iq_tables t = cq_iq_tables();
		const uint8_t *b = row + (u >> 3) * 82;
		const int ib = (int)(u & 7);
		const uint32_t lo = cq_u32(b + 2 + 4 * ib);
		const uint32_t sg = cq_u32(b + 34 + 4 * ib);
		const uint32_t qh = b[66 + ib], sc = b[74 + ib];
		int s[2] = {0, 0};

#pragma unroll
		for (int l = 0; l < 4; l++)
			s[l >> 1] =
			    cv8_grid8(t.iq2s[((lo >> (8 * l)) & 255) |
			                     ((qh >> (2 * l)) & 3) << 8],
			              sg >> (8 * l), v.q + 2 * l, s[l >> 1]);
		return (cv8_iq_dsc(b, 1, 0.125f) * v.d) *
		       (float)cv8_iq2_halves(s, sc);
	}
};

/* IQ3_XXS: d, per 4 elements a grid index byte at 2 (an entry of 4), per
 * sub-block a word at 66 (four 7-bit sign indices, the 4-bit scale s on
 * top: 2 s + 1, times d / 4; 98-byte blocks). */
template <> struct cv8_unit<QTYPE_IQ3_XXS> : cv8_unit_block {
	static __device__ __forceinline__ void prepare(void)
	{
		cv8_smem_fill(cq_iq_tables().iq3xxs, 256);
	}
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const xv &v)
	{
		const uint32_t *grid = cv8_smem_tab();
		const uint8_t *b = row + (u >> 3) * 98;
		const int ib = (int)(u & 7);
		const uint32_t i[2] = {cq_u32(b + 2 + 8 * ib),
		                       cq_u32(b + 6 + 8 * ib)};
		const uint32_t aux = cq_u32(b + 66 + 4 * ib);
		int s[2] = {0, 0}; /* (two chains of dp4a) */

#pragma unroll
		for (int k = 0; k < 8; k++) {
			const uint32_t g =
			    grid[(i[k >> 2] >> (8 * (k & 3))) & 255];
			const uint32_t sg =
			    cv8_ksigns(aux >> (7 * (k >> 1))) >> (4 * (k & 1));

			s[k & 1] = __dp4a(cv8_signed4(g, sg), v.q[k], s[k & 1]);
		}
		return (cv8_iq_dsc(b, 2 * (int)(aux >> 28) + 1, 0.25f) * v.d) *
		       (float)(s[0] + s[1]);
	}
};

/* IQ3_S: d, per 4 elements (k) a 9-bit grid index (low byte at 2 + k,
 * bit k % 8 of byte 66 + k / 8), a sign bit per element from 74, per
 * sub-block a 4-bit scale s at 106: 2 s + 1, times d (110-byte blocks). */
template <> struct cv8_unit<QTYPE_IQ3_S> : cv8_unit_block {
	static __device__ __forceinline__ void prepare(void)
	{
		cv8_smem_fill(cq_iq_tables().iq3s, 512);
	}
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const xv &v)
	{
		const uint32_t *grid = cv8_smem_tab();
		const uint8_t *b = row + (u >> 3) * 110;
		const int ib = (int)(u & 7);
		const uint32_t i[2] = {cq_u32(b + 2 + 8 * ib),
		                       cq_u32(b + 6 + 8 * ib)};
		const uint32_t qh = b[66 + ib], sg = cq_u32(b + 74 + 4 * ib);
		const int sc = (b[106 + (ib >> 1)] >> (4 * (ib & 1))) & 15;
		int s[2] = {0, 0}; /* (two chains of dp4a) */

#pragma unroll
		for (int k = 0; k < 8; k++) {
			const uint32_t g =
			    grid[((i[k >> 2] >> (8 * (k & 3))) & 255) |
			         ((qh >> k) & 1) << 8];

			s[k & 1] = __dp4a(cv8_signed4(g, sg >> (4 * k)), v.q[k],
			                  s[k & 1]);
		}
		return (cv8_iq_dsc(b, 2 * sc + 1, 1.0f) * v.d) *
		       (float)(s[0] + s[1]);
	}
};

/* What the units of IQ1_S, IQ1_M and the ternary types take of the
 * activations: a block's, and the sums of each 8 of its quants (their
 * weights are q = 8 g + delta, or a digit minus 1: the sum of g qx or of
 * the digits' products, then delta, or -1, times the quants' sum; exact
 * integers, the CPU's). */
struct cv8_xv32s : cv8_xv32 {
	int c[4];
};

struct cv8_unit_block_sums {
	static const int ne = 32;
	typedef struct cv8_xv32s xv;
	static __device__ __forceinline__ void
	xload(int64_t u, const struct cv8_xq &x, xv &v)
	{
		cv8_unit_block::xload(u, x, v);
#pragma unroll
		for (int j = 0; j < 4; j++)
			v.c[j] = __dp4a(0x01010101, v.q[2 * j + 1],
			                __dp4a(0x01010101, v.q[2 * j], 0));
	}
};

/* IQ1_S: d, per 8 elements the low byte of an 11-bit grid index at 2
 * (entries of 8 int8 values -1, 0, 1), per sub-block a u16 at 34: the
 * indices' high bits (3 a group), the scale s (bits 12..14: 2 s + 1,
 * times d / 8) and delta's sign (bit 15); q = 8 g +- 1 (50-byte
 * blocks). */
template <> struct cv8_unit<QTYPE_IQ1_S> : cv8_unit_block_sums {
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const xv &v)
	{
		const struct cq_iq_tables t = cq_iq_tables();
		const uint8_t *b = row + (u >> 3) * 50;
		const int ib = (int)(u & 7);
		const uint32_t lo = cq_u32(b + 2 + 4 * ib);
		const uint32_t h = cq_u16(b + 34 + 2 * ib);
		int s = 0;

#pragma unroll
		for (int l = 0; l < 4; l++)
			s += cv8_grid8s(t.iq1s[((lo >> (8 * l)) & 255) |
			                       ((h >> (3 * l)) & 7) << 8],
			                v.q + 2 * l);
		const int c = v.c[0] + v.c[1] + v.c[2] + v.c[3];

		s = 8 * s + ((h & 0x8000) ? -c : c);
		return (cv8_iq_dsc(b, 2 * (int)((h >> 12) & 7) + 1, 0.125f) *
		        v.d) *
		       (float)s;
	}
};

/* IQ1_M: qs[32] (low bytes of the 11-bit grid indices), qh[16] (a nibble
 * an 8-group: 3 high index bits, delta's sign), scales (four u16: a 3-bit
 * scale s per 16 elements, 2 s + 1, and the block's fp16 d in their top
 * nibbles, times 1/8; 56-byte blocks). */
template <> struct cv8_unit<QTYPE_IQ1_M> : cv8_unit_block_sums {
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const xv &v)
	{
		const struct cq_iq_tables t = cq_iq_tables();
		const uint8_t *b = row + (u >> 3) * 56;
		const int ib = (int)(u & 7);
		const uint32_t lo = cq_u32(b + 4 * ib);
		const uint32_t qh = cq_u16(b + 32 + 2 * ib);
		const uint32_t sc16 = cq_u16(b + 48 + 2 * (ib >> 1));
		const uint32_t dh = (cq_u16(b + 48) >> 12) |
		                    ((cq_u16(b + 50) >> 8) & 0x00F0) |
		                    ((cq_u16(b + 52) >> 4) & 0x0F00) |
		                    (cq_u16(b + 54) & 0xF000);
		int s[2] = {0, 0};

#pragma unroll
		for (int l = 0; l < 4; l++) {
			const uint32_t nib = (qh >> (4 * l)) & 15;
			const int g = cv8_grid8s(
			    t.iq1s[((lo >> (8 * l)) & 255) | (nib & 7) << 8],
			    v.q + 2 * l);

			s[l >> 1] += 8 * g + ((nib & 8) ? -v.c[l] : v.c[l]);
		}
		const int sh = 3 * ((2 * ib) & 3);
		const int sc0 = 2 * (int)((sc16 >> sh) & 7) + 1;
		const int sc1 = 2 * (int)((sc16 >> (sh + 3)) & 7) + 1;
		const float d =
		    __half2float(__ushort_as_half((unsigned short)dh));

		return (d * 0.125f * v.d) * (float)(s[0] * sc0 + s[1] * sc1);
	}
};

/* The base-3 digits N (bytes of 3^N) of TQ1_0's four bytes W, each in
 * bits 0..1 of its byte: digit n of byte q is ((q 3^n mod 256) * 3) >> 8
 * (quant_iq.c tq1_unpack), two bytes at a time in 16-bit lanes (no
 * product leaves its lane: 255 * 81 and 255 * 3 < 2^16). */
static __device__ __forceinline__ uint32_t cv8_tq1_digits(uint32_t w,
                                                          uint32_t p3)
{
	const uint32_t lo = ((w & 0x00FF00FFu) * p3) & 0x00FF00FFu;
	const uint32_t hi = (((w >> 8) & 0x00FF00FFu) * p3) & 0x00FF00FFu;

	return (((lo * 3) >> 8) & 0x00030003u) | ((hi * 3) & 0x03000300u);
}

/* Q2_K: scales[16] (a 4-bit scale and a 4-bit min per 16 elements), qs[64],
 * d, dmin at 80 (84-byte blocks, read 4 bytes at a time: rows 4-byte
 * aligned, cm_unit_ok). Element 128 n + 32 j + e is bits 2j.. of
 * qs[32 n + e], sub-block s8 = 4 n + j, its halves' scale bytes
 * 2 s8 and 2 s8 + 1: w = d sc q - dmin m, so the dot is dx (d (sc0 s0 +
 * sc1 s1) - dmin (m0 c0 + m1 c1)) with the halves' integer sums s and
 * their activations' sums c. */
template <> struct cv8_unit<QTYPE_Q2_K> : cv8_unit_block_sums {
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const xv &v)
	{
		const uint8_t *b = row + (u >> 3) * 84;
		const int s8 = (int)(u & 7), sh = 2 * (s8 & 3);
		const uint32_t *p = (const uint32_t *)(b + 16 + 32 * (s8 >> 2));
		const uint32_t sc = cq_u16(b + 2 * s8);
		int s[2] = {0, 0};

#pragma unroll
		for (int k = 0; k < 8; k++)
			s[k >> 2] = __dp4a((int)((p[k] >> sh) & 0x03030303u),
			                   v.q[k], s[k >> 2]);
		const int a =
		    s[0] * (int)(sc & 15) + s[1] * (int)((sc >> 8) & 15);
		const int m = (v.c[0] + v.c[1]) * (int)((sc >> 4) & 15) +
		              (v.c[2] + v.c[3]) * (int)(sc >> 12);

		return v.d * (cq_half(b + 80) * (float)a -
		              cq_half(b + 82) * (float)m);
	}
};

/* Q3_K: hmask[32], qs[64], scales[12] (16 6-bit scales, minus 32), d at
 * 108 (110-byte blocks, 16-bit loads). Element 128 n + 32 j + e: bits
 * 2j.. of qs[32 n + e], minus 4 unless bit 4 n + j of hmask[e] is set;
 * sub-block s8 = 4 n + j, its halves' scales 2 s8 and 2 s8 + 1. The
 * quants go into dp4a as low + 4 h (0..7) and 4 times the activations'
 * sums come off. */
template <> struct cv8_unit<QTYPE_Q3_K> : cv8_unit_block_sums {
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const xv &v)
	{
		const uint8_t *b = row + (u >> 3) * 110;
		const int s8 = (int)(u & 7), sh = 2 * (s8 & 3);
		const uint8_t *q = b + 32 + 32 * (s8 >> 2);
		int s[2] = {0, 0};

#pragma unroll
		for (int k = 0; k < 8; k++) {
			const uint32_t lo =
			    (cq_u32(q + 4 * k) >> sh) & 0x03030303u;
			const uint32_t hi =
			    ((cq_u32(b + 4 * k) >> s8) & 0x01010101u) << 2;

			s[k >> 2] = __dp4a((int)(lo | hi), v.q[k], s[k >> 2]);
		}
		int sc[2];
#pragma unroll
		for (int h = 0; h < 2; h++) {
			const int i = 2 * s8 + h;
			const int lo4 =
			    (b[96 + (i & 7)] >> (4 * (i >> 3))) & 15;
			const int hi2 =
			    (b[104 + (i & 3)] >> (2 * (i >> 2))) & 3;

			sc[h] = (lo4 | hi2 << 4) - 32;
		}
		const int a = (s[0] - 4 * (v.c[0] + v.c[1])) * sc[0] +
		              (s[1] - 4 * (v.c[2] + v.c[3])) * sc[1];

		return (cq_half(b + 108) * v.d) * (float)a;
	}
};

/* TQ1_0: qs[48], qh[4], d at 52 (54-byte blocks); the quants are base-3
 * digits minus 1: elements 32 n + m digit n of qs[m] (n < 5), 160 +
 * 16 n + m digit n of qs[32 + m] (m < 16), 240 + 4 n + m digit n of
 * qh[m]. Activation word k (elements 4k..4k+3) of sub-block s8 is digit
 * N of the four bytes at A below. */
template <> struct cv8_unit<QTYPE_TQ1_0> : cv8_unit_block_sums {
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const xv &v)
	{
		const uint8_t *b = row + (u >> 3) * 54;
		const int s8 = (int)(u & 7);
		int s = 0;

#pragma unroll
		for (int k = 0; k < 8; k++) {
			int a, n;

			if (s8 < 5)
				a = 4 * k, n = s8;
			else if (s8 < 7)
				a = 32 + 4 * (k & 3),
				n = 2 * (s8 - 5) + (k >> 2);
			else
				a = k < 4 ? 32 + 4 * k : 48,
				n = k < 4 ? 4 : k - 4;
			const uint32_t p3 = n == 0   ? 1
			                    : n == 1 ? 3
			                    : n == 2 ? 9
			                    : n == 3 ? 27
			                             : 81;

			s = __dp4a((int)cv8_tq1_digits(cq_u32(b + a), p3),
			           v.q[k], s);
		}
		s -= v.c[0] + v.c[1] + v.c[2] + v.c[3];
		return (cq_half(b + 52) * v.d) * (float)s;
	}
};

/* TQ2_0: qs[64], d at 64 (66-byte blocks); element 128 j + 32 l + m is
 * bits 2l.. of qs[32 j + m], minus 1: sub-block s8 = 4 j + l. */
template <> struct cv8_unit<QTYPE_TQ2_0> : cv8_unit_block_sums {
	static __device__ __forceinline__ float dot(const uint8_t *row,
	                                            int64_t u, const xv &v)
	{
		const uint8_t *b = row + (u >> 3) * 66;
		const int s8 = (int)(u & 7), sh = 2 * (s8 & 3);
		const uint8_t *p = b + 32 * (s8 >> 2);
		int s = 0;

#pragma unroll
		for (int k = 0; k < 8; k++)
			s = __dp4a(
			    (int)((cq_u32(p + 4 * k) >> sh) & 0x03030303u),
			    v.q[k], s);
		s -= v.c[0] + v.c[1] + v.c[2] + v.c[3];
		return (cq_half(b + 64) * v.d) * (float)s;
	}
};

/* Types with a cv8_unit: every block type of cuda_quant.cuh. */
#define CV8_FOR_EACH_TYPE(X) CQ_FOR_EACH_BLOCK_TYPE(X)

#endif /* PARLEY_CUDA_VECDOT8_CUH */

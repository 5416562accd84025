/*
 * cuda_dec8.cuh - eight consecutive elements of a quantized row as fp16,
 * one 16-byte store: the decoder of the products that go through fp16
 * (cm_dequant8_f16's rows for cuBLAS, the grouped expert products, the
 * quantized GEMM of cuda_qgemm.cu).
 *
 * NOTES ON THE DESIGN
 *
 * 1. The values are cq_row_elem's bit for bit: the same float operations
 *    in the same order (cuda_quant.cuh note 1), each rounded to fp16 once.
 * 2. Eight elements starting at a multiple of 8 lie in one sub-block of
 *    every layout below (Q4_K's 32, Q6_K's 16, Q8_0's 32), so the layouts
 *    the models' batch products read most take the sub-block's scale once
 *    and the eight quants in one or two wide loads, where cq_row_elem
 *    re-derives the scale and loads a byte per element (the decode, not
 *    the memory, bounded the fused products). Their alignment: Q4_K rows
 *    are whole 144-byte blocks, so a block starts 16-byte aligned when its
 *    row does (GGUF aligns tensor data to 32, the device arena to 256);
 *    the GPU layouts are 16-byte aligned by construction (cuda_quant.cuh
 *    note 5). Every other type takes cq_row_elem element by element.
 */
#ifndef PARLEY_CUDA_DEC8_CUH
#define PARLEY_CUDA_DEC8_CUH

#include "cuda_quant.cuh"

#include <cuda_fp16.h>

/* Q4_K's eight elements at J (a multiple of 8) of the block B, in the
 * file's layout or CQ_Q4_KR's (T), as four half2. */
template <int T>
static __device__ __forceinline__ void cq_dec8_q4k(const uint8_t *b, int j,
                                                   __half2 *h)
{
	int sc, m;

	if constexpr (T == CQ_Q4_KR)
		cq_q4kr_scale_min(b, j >> 5, &sc, &m);
	else
		cq_scale_min_k4(j >> 5, b + 4, &sc, &m);
	const float d1 = __fmul_rn(cq_half(b), (float)sc);
	const float m1 = __fmul_rn(cq_half(b + 2), (float)m);
	const uint32_t *q =
	    (const uint32_t *)(b + 16 + (j >> 6) * 32 + (j & 31));
	const int sh = (j & 32) ? 4 : 0; /* the high nibbles: sub-block 2c+1 */
	const uint32_t w[2] = {q[0] >> sh, q[1] >> sh};

#pragma unroll
	for (int e = 0; e < 4; e++) {
		const uint32_t u = w[e >> 1] >> (16 * (e & 1));

		h[e] = __floats2half2_rn(
		    __fsub_rn(__fmul_rn(d1, (float)(u & 15)), m1),
		    __fsub_rn(__fmul_rn(d1, (float)((u >> 8) & 15)), m1));
	}
}

/* CQ_Q6_KR's eight elements at K (a multiple of 8) of ROW (NE0 elements),
 * as four half2 (cq_q6_k_val's arithmetic). */
static __device__ __forceinline__ void
cq_dec8_q6kr(const uint8_t *row, int64_t k, int64_t ne0, __half2 *h)
{
	const int64_t nb = ne0 / 256, bi = k >> 8;
	const int j = (int)(k & 255), n = j >> 7, g = (j & 127) >> 5,
	          l = j & 31;
	const uint2 lq =
	    *(const uint2 *)(row + bi * 128 + n * 64 + (g & 1) * 32 + l);
	const uint2 hq =
	    *(const uint2 *)(row + nb * 128 + bi * 64 + n * 32 + l);
	const int8_t sc =
	    (int8_t)row[nb * 192 + bi * 16 + n * 8 + l / 16 + 2 * g];
	const float ds = __fmul_rn(cq_half(row + nb * 208 + bi * 2), (float)sc);
	const int lsh = (g & 2) ? 4 : 0, hsh = 2 * g;
	float v[8];

#pragma unroll
	for (int e = 0; e < 8; e++) {
		const uint32_t lw = e < 4 ? lq.x : lq.y,
		               hw = e < 4 ? hq.x : hq.y;
		const int s = 8 * (e & 3);
		const int q = (int)(((lw >> (s + lsh)) & 15) |
		                    (((hw >> (s + hsh)) & 3) << 4)) -
		              32;

		v[e] = __fmul_rn(ds, (float)q);
	}
#pragma unroll
	for (int e = 0; e < 4; e++)
		h[e] = __floats2half2_rn(v[2 * e], v[2 * e + 1]);
}

/* CQ_Q8_0R's eight elements at K (a multiple of 8) of ROW (NE0 elements),
 * as four half2 (cq_q8_0_val's arithmetic). */
static __device__ __forceinline__ void
cq_dec8_q80r(const uint8_t *row, int64_t k, int64_t ne0, __half2 *h)
{
	const int64_t bi = k >> 5;
	const uint2 q = *(const uint2 *)(row + bi * 32 + (k & 31));
	const float d = cq_half(row + ne0 / 32 * 32 + bi * 2);

#pragma unroll
	for (int e = 0; e < 4; e++) {
		const uint32_t u = (e < 2 ? q.x : q.y) >> (16 * (e & 1));

		h[e] =
		    __floats2half2_rn(__fmul_rn((float)(int8_t)(u & 0xFF), d),
		                      __fmul_rn((float)(int8_t)(u >> 8), d));
	}
}

/* MXFP4's bytes of elements J..J+7 (J a multiple of 8) of the block at
 * B: its scale E and the eight bytes holding their nibbles, fetched ahead
 * of their decoding where a kernel has other work to do meanwhile
 * (cuda_moe.cu's grouped products). The odd-sized blocks' eight bytes are
 * read as the aligned words that hold them and shifted into place (a
 * third word only where they straddle one: never past the aligned word
 * that holds the last of them), not as eight byte loads. */
struct cq_raw8 {
	uint32_t e, q0, q1;
};

static __device__ __forceinline__ cq_raw8 cq_fetch8_mxfp4(const uint8_t *b,
                                                          int j)
{
	const uintptr_t a = (uintptr_t)(b + 1 + (j & 15));
	const uint32_t *p = (const uint32_t *)(a & ~(uintptr_t)3);
	const uint32_t sh = (uint32_t)(a & 3) * 8;
	const uint32_t w0 = p[0], w1 = p[1], w2 = sh != 0 ? p[2] : 0;
	cq_raw8 r;

	r.e = b[0];
	r.q0 = __funnelshift_r(w0, w1, sh);
	r.q1 = __funnelshift_r(w1, w2, sh);
	return r;
}

/* The eight elements of R (cq_fetch8_mxfp4's at J) as cq_elem<QTYPE_MXFP4>
 * makes each: kv * 2^(e - 128), kv the doubled FP4 value (0, +-1, +-2,
 * +-3, +-4, +-6, +-8, +-12), rounded to fp16. Where that is exact, with
 * the scale 2^E (E = e - 128) from 2^-24 to 2^5, the nibbles' u = kv + 12
 * (0..24) are looked up as bytes (cq_prmt's sign mode: entries 0..7 by
 * the nibbles as they are, the others then 0; entries 8..15 by the
 * nibbles with their top bits flipped), made the halves 1024 + u (0x64
 * above each byte), and one fused multiply-add gives (1024 + u) 2^E -
 * 1036 2^E = kv 2^E exactly (+0 for kv = 0): about 3 instructions an
 * element where the float arithmetic below takes ~9. Other scales: the
 * float arithmetic (the same values). */
static __device__ __forceinline__ void cq_dec8_mxfp4_raw(const cq_raw8 &r,
                                                         int j, __half2 *h)
{
	const unsigned e = r.e;
	const int sh = j < 16 ? 0 : 4;

	if (e - 104u <= 29u) { /* E = e - 128 in -24 .. 5 */
		const int E = (int)e - 128;
		/* the eight nibbles in element order, two a byte */
		const uint32_t y0 = (r.q0 >> sh) & 0x0F0F0F0Fu,
		               y1 = (r.q1 >> sh) & 0x0F0F0F0Fu;
		const uint32_t n =
		    __byte_perm(y0 | y0 >> 4, y1 | y1 >> 4, 0x6420);
		const uint32_t x = n ^ 0x88888888u;
		/* u = kv + 12: 12 13 14 15 16 18 20 24, 12 11 10 9 8 6 4 0 */
		const uint32_t lo0 = 0x0F0E0D0Cu, lo1 = 0x18141210u,
		               hi0 = 0x090A0B0Cu, hi1 = 0x00040608u;
		const uint32_t u0 = cq_prmt(lo0, lo1, n) | cq_prmt(hi0, hi1, x),
		               u1 = cq_prmt(lo0, lo1, n >> 16) |
		                    cq_prmt(hi0, hi1, x >> 16);
		/* 2^E and -1036 2^E as halves (1036 = 1.01171875 2^10) */
		const unsigned short db =
		    E >= -14 ? (unsigned short)((E + 15) << 10)
		             : (unsigned short)(1u << (E + 24));
		const unsigned short cb =
		    (unsigned short)(0x8000u | (unsigned)(E + 25) << 10 | 12u);
		const __half2 d2 = __half2half2(__ushort_as_half(db)),
		              c2 = __half2half2(__ushort_as_half(cb));
		const uint32_t k = 0x64646464u;
		const uint32_t w[4] = {
		    __byte_perm(u0, k, 0x4140), __byte_perm(u0, k, 0x4342),
		    __byte_perm(u1, k, 0x4140), __byte_perm(u1, k, 0x4342)};

#pragma unroll
		for (int p = 0; p < 4; p++)
			h[p] = __hfma2(*(const __half2 *)&w[p], d2, c2);
		return;
	}
	const float d =
	    __uint_as_float(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23);
	float v[8];

#pragma unroll
	for (int i = 0; i < 8; i++) {
		const uint32_t w = i < 4 ? r.q0 : r.q1;
		const unsigned n = (w >> (8 * (i & 3) + sh)) & 0x0Fu;
		const int x =
		    (int)((0x0C08060403020100ull >> (8 * (n & 7))) & 0xFF);

		v[i] = __fmul_rn(d, (float)(n & 8 ? -x : x));
	}
#pragma unroll
	for (int p = 0; p < 4; p++)
		h[p] = __floats2half2_rn(v[2 * p], v[2 * p + 1]);
}

/* MXFP4's elements J..J+7 of the block at B (cq_dec8's): gpt-oss's expert
 * stacks in a prefill's products decode every weight so. */
static __device__ __forceinline__ void cq_dec8_mxfp4(const uint8_t *b, int j,
                                                     __half2 *h)
{
	cq_dec8_mxfp4_raw(cq_fetch8_mxfp4(b, j), j, h);
}

/* Elements K..K+7 of ROW (NE0 elements; those past NE0, or all when ROW
 * is NULL, 0) as fp16 into DST (16-byte aligned); K a multiple of 8. */
template <int T>
static __device__ __forceinline__ void cq_dec8(const uint8_t *row, int64_t k,
                                               int64_t ne0, __half *dst)
{
	__align__(16) __half2 h[4];

	if (row != NULL && k + 8 <= ne0) {
		if constexpr (T == QTYPE_Q4_K || T == CQ_Q4_KR)
			cq_dec8_q4k<T>(row + (k >> 8) * 144, (int)(k & 255), h);
		else if constexpr (T == CQ_Q6_KR)
			cq_dec8_q6kr(row, k, ne0, h);
		else if constexpr (T == CQ_Q8_0R)
			cq_dec8_q80r(row, k, ne0, h);
		else if constexpr (T == QTYPE_MXFP4)
			cq_dec8_mxfp4(row + (k >> 5) * 17, (int)(k & 31), h);
		else {
#pragma unroll
			for (int q = 0; q < 4; q++)
				h[q] = __floats2half2_rn(
				    cq_row_elem<T>(row, k + 2 * q, ne0),
				    cq_row_elem<T>(row, k + 2 * q + 1, ne0));
		}
	} else {
		for (int q = 0; q < 4; q++) {
			const int64_t i = k + 2 * q;
			const float v0 = row != NULL && i < ne0
			                     ? cq_row_elem<T>(row, i, ne0)
			                     : 0.0f;
			const float v1 = row != NULL && i + 1 < ne0
			                     ? cq_row_elem<T>(row, i + 1, ne0)
			                     : 0.0f;

			h[q] = __floats2half2_rn(v0, v1);
		}
	}
	*(uint4 *)dst = *(const uint4 *)h;
}

/* ---- the bytes of 32 elements (cuda_qgemm.cu) -----------------------------
 *
 * A run of 32 elements at a multiple of 32 is one sub-block of Q4_K and
 * Q8_0 and two of Q6_K's: cq_load32 reads its bytes (quants, scales) into
 * registers with 16-byte loads where the layout allows; the quantized GEMM
 * decodes them later (qg_dec32), its loads in flight meanwhile. */

/* The bytes of a 32-element run (what each field holds: cq_load32). */
struct cq_raw32 {
	uint4 q0, q1, q2, q3; /* quants */
	uint4 hd;             /* header: scales and d */
};

/* Whether type T has cq_load32 (else cq_dec8 reads it). */
template <int T> static __device__ __forceinline__ constexpr bool cq_has32()
{
	return T == QTYPE_Q4_K || T == CQ_Q4_KR || T == CQ_Q6_KR ||
	       T == CQ_Q8_0R;
}

/* The bytes of elements K..K+31 (K a multiple of 32, K + 32 <= NE0) of
 * ROW into R: Q4_K / CQ_Q4_KR: q0, q1 the 32 quant bytes, hd the block's
 * first 16 bytes (d, dmin, scales); CQ_Q6_KR: q0, q1 ql, q2, q3 qh, hd.x
 * the run's two scales, hd.y d; CQ_Q8_0R: q0, q1 quants, hd.x d. */
template <int T>
static __device__ __forceinline__ void cq_load32(const uint8_t *row, int64_t k,
                                                 int64_t ne0, cq_raw32 &r)
{
	if constexpr (T == QTYPE_Q4_K || T == CQ_Q4_KR) {
		const uint8_t *b = row + (k >> 8) * 144;
		const uint4 *q =
		    (const uint4 *)(b + 16 + ((k & 255) >> 6) * 32);

		r.hd = *(const uint4 *)b;
		r.q0 = q[0];
		r.q1 = q[1];
	} else if constexpr (T == CQ_Q6_KR) {
		const int64_t nb = ne0 / 256, bi = k >> 8;
		const int j = (int)(k & 255), n = j >> 7, g = (j & 127) >> 5;
		const uint4 *ql =
		    (const uint4 *)(row + bi * 128 + n * 64 + (g & 1) * 32);
		const uint4 *qh =
		    (const uint4 *)(row + nb * 128 + bi * 64 + n * 32);

		r.q0 = ql[0];
		r.q1 = ql[1];
		r.q2 = qh[0];
		r.q3 = qh[1];
		r.hd.x = *(const uint16_t *)(row + nb * 192 + bi * 16 + n * 8 +
		                             2 * g);
		r.hd.y = *(const uint16_t *)(row + nb * 208 + bi * 2);
	} else if constexpr (T == CQ_Q8_0R) {
		const uint4 *q = (const uint4 *)(row + (k >> 5) * 32);

		r.q0 = q[0];
		r.q1 = q[1];
		r.hd.x =
		    *(const uint16_t *)(row + ne0 / 32 * 32 + (k >> 5) * 2);
	}
}

#endif /* PARLEY_CUDA_DEC8_CUH */

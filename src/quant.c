/*
 * quant.c - ggml's block formats: dequantization and dot products.
 *
 * The i-quants, TQ and FP4 types are in quant_iq.c; the activation blocks,
 * dot type and AVX2 helpers both files use are in quant_int.h.
 *
 * Layout of the file: ggml's block structs;
 * dequantization (one function per type, a transcription of ggml's
 * dequantize_row_*); K-quant unpacking; activation quantization; the
 * portable integer block kernels; the dots (float rows, 32-element formats,
 * K-quants) and the portable kernel table; the AVX2 table (quant_avx2.h)
 * and the AVX-512 one (quant_avx512.h); the public functions.
 *
 * See quant.h for the invariants (bit-exact dequantization, identical
 * results on every kernel set).
 */
#include "quant.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "f16.h"
#include "quant_int.h"

/*
 * No fused multiply-add anywhere in this file: the dots must give the same
 * bits on every path (and dequantization must match ggml's rounding), so a
 * build with -march=... and GNU C (whose default is -ffp-contract=fast)
 * must not fuse a*b+c. ISO C mode (-std=c11) is off already.
 */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

/* ---- ggml's blocks (little-endian, 2-byte aligned) ---------------------- */

struct blk_q4_0 {
	uint16_t d;         /* scale, half */
	uint8_t qs[QK / 2]; /* nibbles: low = elements 0..15, high = 16..31 */
};
struct blk_q4_1 {
	uint16_t d, m;      /* scale and minimum, half */
	uint8_t qs[QK / 2]; /* nibbles as Q4_0 */
};
struct blk_q5_0 {
	uint16_t d;         /* scale, half */
	uint8_t qh[4];      /* fifth bits, bit j = element j (LE uint32) */
	uint8_t qs[QK / 2]; /* low four bits as Q4_0 */
};
struct blk_q5_1 {
	uint16_t d, m;      /* scale and minimum, half */
	uint8_t qh[4];      /* fifth bits as Q5_0 */
	uint8_t qs[QK / 2]; /* low four bits as Q4_0 */
};
struct blk_q8_0 {
	uint16_t d;    /* scale, half */
	int8_t qs[QK]; /* quants */
};
struct blk_q2_K {
	uint8_t scales[QK_K / 16]; /* per 16: low nibble scale, high min */
	uint8_t qs[QK_K / 4];      /* 2-bit quants */
	uint16_t d, dmin;          /* super-block scales, half */
};
struct blk_q3_K {
	uint8_t hmask[QK_K / 8]; /* high bits (set: no -4 offset) */
	uint8_t qs[QK_K / 4];    /* low 2 bits */
	uint8_t scales[12];      /* 16 6-bit scales, packed */
	uint16_t d;              /* super-block scale, half */
};
struct blk_q4_K {
	uint16_t d, dmin;     /* super-block scales, half */
	uint8_t scales[12];   /* 8 6-bit scales and 8 6-bit mins, packed */
	uint8_t qs[QK_K / 2]; /* 4-bit quants */
};
struct blk_q5_K {
	uint16_t d, dmin;     /* super-block scales, half */
	uint8_t scales[12];   /* as Q4_K */
	uint8_t qh[QK_K / 8]; /* fifth bits */
	uint8_t qs[QK_K / 2]; /* low 4 bits */
};
struct blk_q6_K {
	uint8_t ql[QK_K / 2];     /* low 4 bits */
	uint8_t qh[QK_K / 4];     /* high 2 bits */
	int8_t scales[QK_K / 16]; /* 8-bit scales per 16 */
	uint16_t d;               /* super-block scale, half */
};

_Static_assert(sizeof(struct blk_q4_0) == 18, "Q4_0 block");
_Static_assert(sizeof(struct blk_q4_1) == 20, "Q4_1 block");
_Static_assert(sizeof(struct blk_q5_0) == 22, "Q5_0 block");
_Static_assert(sizeof(struct blk_q5_1) == 24, "Q5_1 block");
_Static_assert(sizeof(struct blk_q8_0) == 34, "Q8_0 block");
_Static_assert(sizeof(struct blk_q2_K) == 84, "Q2_K block");
_Static_assert(sizeof(struct blk_q3_K) == 110, "Q3_K block");
_Static_assert(sizeof(struct blk_q4_K) == 144, "Q4_K block");
_Static_assert(sizeof(struct blk_q5_K) == 176, "Q5_K block");
_Static_assert(sizeof(struct blk_q6_K) == 210, "Q6_K block");

/* ---- dequantization (ggml's order of float operations) ------------------ */

static void deq_f32(const float *x, float *y, int64_t n)
{
	memcpy(y, x, (size_t)n * sizeof *y);
}

static void deq_f16(const uint16_t *x, float *y, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = f16_to_f32(x[i]);
}

static void deq_bf16(const uint16_t *x, float *y, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = bf16_to_f32(x[i]);
}

static void deq_q4_0(const struct blk_q4_0 *x, float *y, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, y += QK) {
		const float d = f16_to_f32(x[i].d);

		for (int j = 0; j < QK / 2; j++) {
			const int x0 = (x[i].qs[j] & 0x0F) - 8;
			const int x1 = (x[i].qs[j] >> 4) - 8;

			y[j] = x0 * d;
			y[j + QK / 2] = x1 * d;
		}
	}
}

static void deq_q4_1(const struct blk_q4_1 *x, float *y, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, y += QK) {
		const float d = f16_to_f32(x[i].d);
		const float m = f16_to_f32(x[i].m);

		for (int j = 0; j < QK / 2; j++) {
			const int x0 = x[i].qs[j] & 0x0F;
			const int x1 = x[i].qs[j] >> 4;

			y[j] = x0 * d + m;
			y[j + QK / 2] = x1 * d + m;
		}
	}
}

/* The 32 fifth bits of a Q5 block. */
static uint32_t q5_high(const uint8_t qh[4])
{
	return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 |
	       (uint32_t)qh[3] << 24;
}

static void deq_q5_0(const struct blk_q5_0 *x, float *y, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, y += QK) {
		const float d = f16_to_f32(x[i].d);
		const uint32_t qh = q5_high(x[i].qh);

		for (int j = 0; j < QK / 2; j++) {
			const int h0 = ((qh >> j) << 4) & 0x10;
			const int h1 = (qh >> (j + 12)) & 0x10;
			const int x0 = ((x[i].qs[j] & 0x0F) | h0) - 16;
			const int x1 = ((x[i].qs[j] >> 4) | h1) - 16;

			y[j] = x0 * d;
			y[j + QK / 2] = x1 * d;
		}
	}
}

static void deq_q5_1(const struct blk_q5_1 *x, float *y, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, y += QK) {
		const float d = f16_to_f32(x[i].d);
		const float m = f16_to_f32(x[i].m);
		const uint32_t qh = q5_high(x[i].qh);

		for (int j = 0; j < QK / 2; j++) {
			const int h0 = ((qh >> j) << 4) & 0x10;
			const int h1 = (qh >> (j + 12)) & 0x10;
			const int x0 = (x[i].qs[j] & 0x0F) | h0;
			const int x1 = (x[i].qs[j] >> 4) | h1;

			y[j] = x0 * d + m;
			y[j + QK / 2] = x1 * d + m;
		}
	}
}

static void deq_q8_0(const struct blk_q8_0 *x, float *y, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, y += QK) {
		const float d = f16_to_f32(x[i].d);

		for (int j = 0; j < QK; j++)
			y[j] = x[i].qs[j] * d;
	}
}

static void deq_q2_K(const struct blk_q2_K *x, float *y, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++) {
		const float d = f16_to_f32(x[i].d);
		const float min = f16_to_f32(x[i].dmin);
		const uint8_t *q = x[i].qs;
		int is = 0;

		for (int n = 0; n < QK_K; n += 128, q += 32) {
			for (int shift = 0; shift < 8; shift += 2) {
				for (int k = 0; k < 2; k++) {
					const int sc = x[i].scales[is++];
					const float dl = d * (sc & 0xF);
					const float ml = min * (sc >> 4);

					for (int l = 0; l < 16; l++)
						*y++ = dl * ((q[l + 16 * k] >>
						              shift) &
						             3) -
						       ml;
				}
			}
		}
	}
}

/* The 16 signed 6-bit scales of a Q3_K block (ggml's unpacking). */
static void q3k_scales(const uint8_t packed[12], int8_t sc[16])
{
	for (int j = 0; j < 16; j++) {
		const int lo = j < 8 ? packed[j] & 0xF : packed[j - 8] >> 4;
		const int hi = (packed[8 + (j & 3)] >> (2 * (j >> 2))) & 3;

		sc[j] = (int8_t)((lo | hi << 4) - 32);
	}
}

static void deq_q3_K(const struct blk_q3_K *x, float *y, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++) {
		const float d_all = f16_to_f32(x[i].d);
		const uint8_t *q = x[i].qs;
		const uint8_t *hm = x[i].hmask;
		int8_t sc[16];
		int is = 0;
		uint8_t m = 1;

		q3k_scales(x[i].scales, sc);
		for (int n = 0; n < QK_K; n += 128, q += 32) {
			for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
				for (int k = 0; k < 2; k++) {
					const float dl = d_all * sc[is++];

					for (int l = 16 * k; l < 16 * k + 16;
					     l++)
						*y++ = dl *
						       (((q[l] >> shift) & 3) -
						        ((hm[l] & m) ? 0 : 4));
				}
			}
		}
	}
}

/* Scale and minimum J (0..7) of a Q4_K/Q5_K block (ggml's get_scale_min_k4). */
static void q4k_scale_min(int j, const uint8_t *q, int *d, int *m)
{
	if (j < 4) {
		*d = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

/* All 8 scales and mins of a Q4_K/Q5_K block at once (ggml's bit
 * shuffling on 32-bit words): OUT[0..7] scales, OUT[8..15] mins. */
static inline void q4k_unpack(const uint8_t packed[12], uint8_t out[16])
{
	uint32_t u[4];

	memcpy(u, packed, 12);
	u[3] = ((u[2] >> 4) & 0x0f0f0f0fu) | (((u[1] >> 6) & 0x03030303u) << 4);
	const uint32_t mins_lo = u[1] & 0x3f3f3f3fu;
	u[1] = (u[2] & 0x0f0f0f0fu) | (((u[0] >> 6) & 0x03030303u) << 4);
	u[2] = mins_lo;
	u[0] &= 0x3f3f3f3fu;
	memcpy(out, u, 16);
}

static void deq_q4_K(const struct blk_q4_K *x, float *y, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++) {
		const float d = f16_to_f32(x[i].d);
		const float min = f16_to_f32(x[i].dmin);
		const uint8_t *q = x[i].qs;

		for (int j = 0; j < 8; j += 2, q += 32) {
			int sc, m;

			q4k_scale_min(j, x[i].scales, &sc, &m);
			const float d1 = d * sc, m1 = min * m;
			q4k_scale_min(j + 1, x[i].scales, &sc, &m);
			const float d2 = d * sc, m2 = min * m;
			for (int l = 0; l < 32; l++)
				*y++ = d1 * (q[l] & 0xF) - m1;
			for (int l = 0; l < 32; l++)
				*y++ = d2 * (q[l] >> 4) - m2;
		}
	}
}

static void deq_q5_K(const struct blk_q5_K *x, float *y, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++) {
		const float d = f16_to_f32(x[i].d);
		const float min = f16_to_f32(x[i].dmin);
		const uint8_t *ql = x[i].qs;
		const uint8_t *qh = x[i].qh;
		uint8_t u1 = 1, u2 = 2;

		for (int j = 0; j < 8; j += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
			int sc, m;

			q4k_scale_min(j, x[i].scales, &sc, &m);
			const float d1 = d * sc, m1 = min * m;
			q4k_scale_min(j + 1, x[i].scales, &sc, &m);
			const float d2 = d * sc, m2 = min * m;
			for (int l = 0; l < 32; l++)
				*y++ = d1 * ((ql[l] & 0xF) +
				             (qh[l] & u1 ? 16 : 0)) -
				       m1;
			for (int l = 0; l < 32; l++)
				*y++ = d2 * ((ql[l] >> 4) +
				             (qh[l] & u2 ? 16 : 0)) -
				       m2;
		}
	}
}

static void deq_q6_K(const struct blk_q6_K *x, float *y, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++) {
		const float d = f16_to_f32(x[i].d);
		const uint8_t *ql = x[i].ql;
		const uint8_t *qh = x[i].qh;
		const int8_t *sc = x[i].scales;

		for (int n = 0; n < QK_K; n += 128) {
			for (int l = 0; l < 32; l++) {
				const int is = l / 16;
				const int q1 =
				    ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32;
				const int q2 = ((ql[l + 32] & 0xF) |
				                (((qh[l] >> 2) & 3) << 4)) -
				               32;
				const int q3 =
				    ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) -
				    32;
				const int q4 = ((ql[l + 32] >> 4) |
				                (((qh[l] >> 6) & 3) << 4)) -
				               32;

				y[l] = d * sc[is] * q1;
				y[l + 32] = d * sc[is + 2] * q2;
				y[l + 64] = d * sc[is + 4] * q3;
				y[l + 96] = d * sc[is + 6] * q4;
			}
			y += 128;
			ql += 64;
			qh += 32;
			sc += 8;
		}
	}
}

/* ---- K-quant unpacking for the portable dot kernels --------------------- */

/* Quants of a Q2_K block in element order (0..3) and its 16 scales/mins. */
static void unpack_q2_K(const struct blk_q2_K *b, int8_t q[QK_K])
{
	for (int h = 0; h < 2; h++)
		for (int j = 0; j < 4; j++)
			for (int l = 0; l < 32; l++)
				q[128 * h + 32 * j + l] =
				    (int8_t)((b->qs[32 * h + l] >> (2 * j)) &
				             3);
}

/* Quants of a Q3_K block in element order (-4..3). */
static void unpack_q3_K(const struct blk_q3_K *b, int8_t q[QK_K])
{
	for (int h = 0; h < 2; h++)
		for (int j = 0; j < 4; j++) {
			const uint8_t m = (uint8_t)(1u << (4 * h + j));

			for (int l = 0; l < 32; l++)
				q[128 * h + 32 * j + l] =
				    (int8_t)(((b->qs[32 * h + l] >> (2 * j)) &
				              3) -
				             ((b->hmask[l] & m) ? 0 : 4));
		}
}

/* Quants of a Q4_K block in element order (0..15). */
static void unpack_q4_K(const struct blk_q4_K *b, int8_t q[QK_K])
{
	for (int j = 0; j < 4; j++)
		for (int l = 0; l < 32; l++) {
			q[64 * j + l] = (int8_t)(b->qs[32 * j + l] & 0xF);
			q[64 * j + 32 + l] = (int8_t)(b->qs[32 * j + l] >> 4);
		}
}

/* Quants of a Q5_K block in element order (0..31). */
static void unpack_q5_K(const struct blk_q5_K *b, int8_t q[QK_K])
{
	for (int j = 0; j < 4; j++)
		for (int l = 0; l < 32; l++) {
			const uint8_t v = b->qs[32 * j + l], h = b->qh[l];

			q[64 * j + l] =
			    (int8_t)((v & 0xF) | (((h >> (2 * j)) & 1) << 4));
			q[64 * j + 32 + l] =
			    (int8_t)((v >> 4) |
			             (((h >> (2 * j + 1)) & 1) << 4));
		}
}

/* Quants of a Q6_K block in element order (-32..31). */
static void unpack_q6_K(const struct blk_q6_K *b, int8_t q[QK_K])
{
	for (int h = 0; h < 2; h++) {
		const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
		int8_t *o = q + 128 * h;

		for (int l = 0; l < 32; l++) {
			o[l] =
			    (int8_t)(((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32);
			o[l + 32] = (int8_t)(((ql[l + 32] & 0xF) |
			                      (((qh[l] >> 2) & 3) << 4)) -
			                     32);
			o[l + 64] = (int8_t)(((ql[l] >> 4) |
			                      (((qh[l] >> 4) & 3) << 4)) -
			                     32);
			o[l + 96] = (int8_t)(((ql[l + 32] >> 4) |
			                      (((qh[l] >> 6) & 3) << 4)) -
			                     32);
		}
	}
}

/* Sum over sub-blocks of size SUB: scale[j] * (q . x over sub-block j). */
int32_t quant_isum_scaled(const int8_t *q, const int8_t *x, const int *scale,
                          int sub)
{
	int32_t total = 0;

	for (int j = 0; j < QK_K / sub; j++) {
		int32_t s = 0;

		for (int l = 0; l < sub; l++)
			s += q[j * sub + l] * x[j * sub + l];
		total += scale[j] * s;
	}
	return total;
}

/* ---- activation quantization -------------------------------------------- */

/*
 * Quantize the K floats at X to int8 with one scale: d = amax/127,
 * q = round(x/d). A non-finite amax gives d = NaN and zero quants, so every
 * dot with this block is NaN, as the float computation would be.
 */
static float quantize_i8(const float *x, int k, int8_t *q)
{
	float amax = 0.0f;
	int finite = 1;

	for (int j = 0; j < k; j++) {
		const float a = fabsf(x[j]);

		amax = a > amax ? a : amax;
		finite &= a <= FLT_MAX; /* false for inf and NaN */
	}
	if (!finite) {
		memset(q, 0, (size_t)k);
		return NAN;
	}
	const float d = amax / 127.0f;
	const float id = d != 0.0f ? 1.0f / d : 0.0f;

	for (int j = 0; j < k; j++) {
		float v = roundf(x[j] * id);

		v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
		q[j] = (int8_t)v;
	}
	return d;
}

/* GGUF's Q8_0 blocks of N floats (quant.h): quantize_i8's rounding, the
 * scale kept as the nearest fp16 (ggml's quantize_row_q8_0_ref). */
void quant_q8_0_row(const float *x, int64_t n, void *dst)
{
	struct blk_q8_0 *b = dst;

	for (int64_t i = 0; i < n / QK; i++, x += QK)
		b[i].d = f32_to_f16(quantize_i8(x, QK, b[i].qs));
}

/* quantize_i8 or a kernel with its exact results (K a multiple of 32). */
typedef float (*quantize_fn)(const float *x, int k, int8_t *q);

static void vec_q8(quantize_fn quantize, const float *x, int64_t nb, void *vec)
{
	const struct vec_q8 v = vec_q8_view(vec, nb);

	for (int64_t i = 0; i < nb; i++, x += QK) {
		int s = 0;

		v.d[i] = quantize(x, QK, v.qs[i]);
		for (int j = 0; j < QK; j++)
			s += v.qs[i][j];
		v.ds[i] = v.d[i] * (float)s;
	}
}

static void vec_q8k(quantize_fn quantize, const float *x, int64_t nb,
                    struct vblk_q8k *y)
{
	for (int64_t i = 0; i < nb; i++, x += QK_K) {
		y[i].d = quantize(x, QK_K, y[i].qs);
		for (int j = 0; j < QK_K / 16; j++) {
			int s = 0;

			for (int l = 0; l < 16; l++)
				s += y[i].qs[16 * j + l];
			y[i].bsums[j] = (int16_t)s;
		}
	}
}

/* ---- integer block kernels, portable C ---------------------------------- */
/*
 * The exact integer dot of a block's weight quants with the activation
 * quants (isum) and, for the K-quants with minimums, the integer the
 * minimum multiplies (imin).
 */

static int32_t isum_q4_0_c(const struct blk_q4_0 *w, const int8_t *x)
{
	int32_t s = 0;

	for (int j = 0; j < QK / 2; j++)
		s += ((w->qs[j] & 0xF) - 8) * x[j] +
		     ((w->qs[j] >> 4) - 8) * x[j + QK / 2];
	return s;
}

static int32_t isum_q4_1_c(const struct blk_q4_1 *w, const int8_t *x)
{
	int32_t s = 0;

	for (int j = 0; j < QK / 2; j++)
		s += (w->qs[j] & 0xF) * x[j] + (w->qs[j] >> 4) * x[j + QK / 2];
	return s;
}

static int32_t isum_q5_0_c(const struct blk_q5_0 *w, const int8_t *x)
{
	const uint32_t qh = q5_high(w->qh);
	int32_t s = 0;

	for (int j = 0; j < QK / 2; j++) {
		const int x0 = ((w->qs[j] & 0xF) | (((qh >> j) & 1) << 4)) - 16;
		const int x1 =
		    ((w->qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16;

		s += x0 * x[j] + x1 * x[j + QK / 2];
	}
	return s;
}

static int32_t isum_q5_1_c(const struct blk_q5_1 *w, const int8_t *x)
{
	const uint32_t qh = q5_high(w->qh);
	int32_t s = 0;

	for (int j = 0; j < QK / 2; j++) {
		const int x0 = (w->qs[j] & 0xF) | (((qh >> j) & 1) << 4);
		const int x1 = (w->qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);

		s += x0 * x[j] + x1 * x[j + QK / 2];
	}
	return s;
}

static int32_t isum_q8_0_c(const struct blk_q8_0 *w, const int8_t *x)
{
	int32_t s = 0;

	for (int j = 0; j < QK; j++)
		s += w->qs[j] * x[j];
	return s;
}

/* Sum of mins[j] * (activation sum over sub-block j of SUB elements). */
static int32_t imin_bsums(const struct vblk_q8k *v, const int *mins, int sub)
{
	int32_t s = 0;

	for (int j = 0; j < QK_K / sub; j++) {
		int32_t b = 0;

		for (int k = 0; k < sub / 16; k++)
			b += v->bsums[j * (sub / 16) + k];
		s += mins[j] * b;
	}
	return s;
}

static void isum_q2_K_c(const struct blk_q2_K *w, const struct vblk_q8k *v,
                        int64_t nb, int32_t *isum, int32_t *imin)
{
	for (int64_t i = 0; i < nb; i++) {
		int8_t q[QK_K];
		int sc[16], mn[16];

		unpack_q2_K(&w[i], q);
		for (int j = 0; j < 16; j++) {
			sc[j] = w[i].scales[j] & 0xF;
			mn[j] = w[i].scales[j] >> 4;
		}
		isum[i] = quant_isum_scaled(q, v[i].qs, sc, 16);
		imin[i] = imin_bsums(&v[i], mn, 16);
	}
}

static void isum_q3_K_c(const struct blk_q3_K *w, const struct vblk_q8k *v,
                        int64_t nb, int32_t *isum)
{
	for (int64_t i = 0; i < nb; i++) {
		int8_t q[QK_K], s8[16];
		int sc[16];

		unpack_q3_K(&w[i], q);
		q3k_scales(w[i].scales, s8);
		for (int j = 0; j < 16; j++)
			sc[j] = s8[j];
		isum[i] = quant_isum_scaled(q, v[i].qs, sc, 16);
	}
}

static void isum_q4_K_c(const struct blk_q4_K *w, const struct vblk_q8k *v,
                        int64_t nb, int32_t *isum, int32_t *imin)
{
	for (int64_t i = 0; i < nb; i++) {
		int8_t q[QK_K];
		int sc[8], mn[8];

		uint8_t sm[16];

		unpack_q4_K(&w[i], q);
		q4k_unpack(w[i].scales, sm);
		for (int j = 0; j < 8; j++) {
			sc[j] = sm[j];
			mn[j] = sm[8 + j];
		}
		isum[i] = quant_isum_scaled(q, v[i].qs, sc, 32);
		imin[i] = imin_bsums(&v[i], mn, 32);
	}
}

static void isum_q5_K_c(const struct blk_q5_K *w, const struct vblk_q8k *v,
                        int64_t nb, int32_t *isum, int32_t *imin)
{
	for (int64_t i = 0; i < nb; i++) {
		int8_t q[QK_K];
		int sc[8], mn[8];

		uint8_t sm[16];

		unpack_q5_K(&w[i], q);
		q4k_unpack(w[i].scales, sm);
		for (int j = 0; j < 8; j++) {
			sc[j] = sm[j];
			mn[j] = sm[8 + j];
		}
		isum[i] = quant_isum_scaled(q, v[i].qs, sc, 32);
		imin[i] = imin_bsums(&v[i], mn, 32);
	}
}

static void isum_q6_K_c(const struct blk_q6_K *w, const struct vblk_q8k *v,
                        int64_t nb, int32_t *isum)
{
	for (int64_t i = 0; i < nb; i++) {
		int8_t q[QK_K];
		int sc[16];

		unpack_q6_K(&w[i], q);
		for (int j = 0; j < 16; j++)
			sc[j] = w[i].scales[j];
		isum[i] = quant_isum_scaled(q, v[i].qs, sc, 16);
	}
}

/* ---- float rows (x stays float32) --------------------------------------- */
/*
 * 16 running sums, each over the elements i with i % 16 == k, then added in
 * a fixed order: the compiler may vectorize across the 16 lanes without
 * reordering any float operation, so every build gives the same result.
 */
#define FLANES 16

#define DEFINE_DOT_FLOAT(NAME, WT, CONV)                                       \
	static inline __attribute__((always_inline)) float NAME##_body(        \
	    const WT *w, const float *x, int64_t n)                            \
	{                                                                      \
		float acc[FLANES] = {0};                                       \
		int64_t i = 0;                                                 \
                                                                               \
		for (; i + FLANES <= n; i += FLANES)                           \
			for (int k = 0; k < FLANES; k++)                       \
				acc[k] += CONV(w[i + k]) * x[i + k];           \
		for (int k = 0; i < n; i++, k++)                               \
			acc[k] += CONV(w[i]) * x[i];                           \
		for (int k = FLANES / 2; k > 0; k /= 2)                        \
			for (int j = 0; j < k; j++)                            \
				acc[j] += acc[j + k];                          \
		return acc[0];                                                 \
	}

#define CONV_F32(v) (v)
DEFINE_DOT_FLOAT(dot_f32, float, CONV_F32)
DEFINE_DOT_FLOAT(dot_f16, uint16_t, f16_to_f32)
DEFINE_DOT_FLOAT(dot_bf16, uint16_t, bf16_to_f32)

/* ---- dots: the float32 part, shared by all kernels ---------------------- */
/*
 * Rule that keeps the AVX2 and the portable results bit-identical: the
 * kernels differ only in how they get each block's exact integer sums; the
 * float32 operations on them are the same, in the same order, everywhere.
 */

/* quant_f32_mix's kernel. */
typedef void (*mix_fn)(float *out, const float *a, const float *rows,
                       size_t stride, int64_t nrows, int64_t n);

/* One set of kernels: dots indexed by type id (NULL: not computable). */
struct kernels {
	dot_fn dot[QTYPE_COUNT];
	mix_fn mix;
	quantize_fn quantize; /* activation rounding, quantize_i8's bits */
};

/* Half at byte offset OFF of block B. */
static inline float blk_half(const void *b, int off)
{
	uint16_t h;

	memcpy(&h, (const uint8_t *)b + off, sizeof h);
	return f16_to_f32(h);
}

#define DEFINE_DOT32_C(NAME, BLK, ISUM, HAS_MIN)                               \
	static float NAME(const void *row, const void *vec, int64_t n)         \
	{                                                                      \
		const BLK *w = row;                                            \
		const struct vec_q8 v = vec_q8_view(vec, n / QK);              \
		float acc[8] = {0};                                            \
                                                                               \
		for (int64_t i = 0; i < n / QK; i++) {                         \
			const int32_t is = ISUM(&w[i], v.qs[i]);               \
			float t = (blk_half(&w[i], 0) * v.d[i]) * (float)is;   \
                                                                               \
			if (HAS_MIN)                                           \
				t = t + blk_half(&w[i], 2) * v.ds[i];          \
			acc[i % 8] += t;                                       \
		}                                                              \
		return acc8_sum(acc);                                          \
	}

DEFINE_DOT32_C(dot_q4_0_c, struct blk_q4_0, isum_q4_0_c, 0)
DEFINE_DOT32_C(dot_q4_1_c, struct blk_q4_1, isum_q4_1_c, 1)
DEFINE_DOT32_C(dot_q5_0_c, struct blk_q5_0, isum_q5_0_c, 0)
DEFINE_DOT32_C(dot_q5_1_c, struct blk_q5_1, isum_q5_1_c, 1)
DEFINE_DOT32_C(dot_q8_0_c, struct blk_q8_0, isum_q8_0_c, 0)

/* Integer sums of NB K-quant blocks: isum and, with minimums, imin. */
typedef void (*isumk_fn)(const void *w, const struct vblk_q8k *v, int64_t nb,
                         int32_t *isum, int32_t *imin);

#define CHUNK 64 /* K-quant blocks whose integer sums are computed at once */

/*
 * The K-quants: super-block i's term (d*dx)*isum - (dmin*dx)*imin is added
 * to one running sum in block order. D_OFF and DMIN_OFF are the byte
 * offsets of the halves d and dmin in a block of BS bytes (DMIN_OFF < 0:
 * none); KERN gives the integer sums; HALF converts a float16 exactly.
 */
#define DOTK_BODY(HALF)                                                        \
	int32_t isum[CHUNK], imin[CHUNK];                                      \
	float sumf = 0.0f;                                                     \
                                                                               \
	for (int64_t i0 = 0; i0 < nb; i0 += CHUNK) {                           \
		const int64_t nc = nb - i0 < CHUNK ? nb - i0 : CHUNK;          \
                                                                               \
		kern(row + i0 * bs, v + i0, nc, isum, imin);                   \
		for (int64_t i = 0; i < nc; i++) {                             \
			const uint8_t *b = row + (i0 + i) * bs;                \
			uint16_t h;                                            \
                                                                               \
			memcpy(&h, b + d_off, 2);                              \
			const float d = HALF(h) * v[i0 + i].d;                 \
			float t = d * (float)isum[i];                          \
                                                                               \
			if (dmin_off >= 0) {                                   \
				memcpy(&h, b + dmin_off, 2);                   \
				const float m = HALF(h) * v[i0 + i].d;         \
                                                                               \
				t = t - m * (float)imin[i];                    \
			}                                                      \
			sumf += t;                                             \
		}                                                              \
	}                                                                      \
	return sumf

static float dot_k_c(isumk_fn kern, int bs, int d_off, int dmin_off,
                     const uint8_t *row, const struct vblk_q8k *v, int64_t nb)
{
	DOTK_BODY(f16_to_f32);
}

/* dot_fn NAME for K-quant BLK, integer kernel KERN: with minimums (2)
 * or without (1). */
#define DEFINE_DOTK2(NAME, BLK, KERN, DOTK)                                    \
	static void NAME##_k(const void *w, const struct vblk_q8k *v,          \
	                     int64_t nb, int32_t *isum, int32_t *imin)         \
	{                                                                      \
		KERN((const BLK *)w, v, nb, isum, imin);                       \
	}                                                                      \
	static float NAME(const void *row, const void *vec, int64_t n)         \
	{                                                                      \
		return DOTK(NAME##_k, sizeof(BLK), offsetof(BLK, d),           \
		            offsetof(BLK, dmin), row, vec, n / QK_K);          \
	}
#define DEFINE_DOTK1(NAME, BLK, KERN, DOTK)                                    \
	static void NAME##_k(const void *w, const struct vblk_q8k *v,          \
	                     int64_t nb, int32_t *isum, int32_t *imin)         \
	{                                                                      \
		(void)imin;                                                    \
		KERN((const BLK *)w, v, nb, isum);                             \
	}                                                                      \
	static float NAME(const void *row, const void *vec, int64_t n)         \
	{                                                                      \
		return DOTK(NAME##_k, sizeof(BLK), offsetof(BLK, d), -1, row,  \
		            vec, n / QK_K);                                    \
	}

DEFINE_DOTK2(dot_q2_K_c, struct blk_q2_K, isum_q2_K_c, dot_k_c)
DEFINE_DOTK1(dot_q3_K_c, struct blk_q3_K, isum_q3_K_c, dot_k_c)
DEFINE_DOTK2(dot_q4_K_c, struct blk_q4_K, isum_q4_K_c, dot_k_c)
DEFINE_DOTK2(dot_q5_K_c, struct blk_q5_K, isum_q5_K_c, dot_k_c)
DEFINE_DOTK1(dot_q6_K_c, struct blk_q6_K, isum_q6_K_c, dot_k_c)

/* dot_fn for a float format. */
#define DEFINE_DOTF(NAME, BODY, WT)                                            \
	static float NAME(const void *row, const void *vec, int64_t n)         \
	{                                                                      \
		return BODY((const WT *)row, vec, n);                          \
	}

DEFINE_DOTF(dot_f32_c, dot_f32_body, float)
DEFINE_DOTF(dot_f16_c, dot_f16_body, uint16_t)
DEFINE_DOTF(dot_bf16_c, dot_bf16_body, uint16_t)

/* quant_f32_mix, portable: lane e sees exactly the operations of the
 * scalar definition (vectorizing across e reorders nothing). */
static void mix_f32_c(float *out, const float *a, const float *rows,
                      size_t stride, int64_t nrows, int64_t n)
{
	for (int64_t e = 0; e < n; e++)
		out[e] = 0.0f;
	for (int64_t i = 0; i < nrows; i++) {
		const float *v = rows + (size_t)i * stride;

		for (int64_t e = 0; e < n; e++)
			out[e] += a[i] * v[e];
	}
}

/* Table entries for quant_iq.c's types. */
#define IQ_KERNEL_C(name, type, isa512)    [type] = quant_iq_dot_##name##_c,
#define IQ_KERNEL_AVX2(name, type, isa512) [type] = quant_iq_dot_##name##_avx2,
#define IQ_KERNEL_AVX512(name, type, isa512)                                   \
	[type] = quant_iq_dot_##name##_##isa512,

static const struct kernels kernels_c = {
    .mix = mix_f32_c,
    .quantize = quantize_i8,
    .dot = {[QTYPE_F32] = dot_f32_c,
            [QTYPE_F16] = dot_f16_c,
            [QTYPE_BF16] = dot_bf16_c,
            [QTYPE_Q4_0] = dot_q4_0_c,
            [QTYPE_Q4_1] = dot_q4_1_c,
            [QTYPE_Q5_0] = dot_q5_0_c,
            [QTYPE_Q5_1] = dot_q5_1_c,
            [QTYPE_Q8_0] = dot_q8_0_c,
            [QTYPE_Q2_K] = dot_q2_K_c,
            [QTYPE_Q3_K] = dot_q3_K_c,
            [QTYPE_Q4_K] = dot_q4_K_c,
            [QTYPE_Q5_K] = dot_q5_K_c,
            [QTYPE_Q6_K] = dot_q6_K_c,
            QUANT_IQ_TYPES(IQ_KERNEL_C)},
};

#include "quant_avx2.h"
#include "quant_avx512.h"

static enum quant_isa quant_isa_max = QUANT_ISA_AVX512; /* quant_set_isa */

#ifdef QUANT_HAVE_AVX512
/* True when the CPU (and the OS: libgcc checks XCR0) runs the AVX-512
 * kernels. */
static bool quant_cpu_avx512(void)
{
	return __builtin_cpu_supports("avx512f") &&
	       __builtin_cpu_supports("avx512bw") &&
	       __builtin_cpu_supports("avx512vl") &&
	       __builtin_cpu_supports("avx512vnni");
}
#endif

/* The kernels to use now: the widest the CPU runs, up to quant_isa_max. */
static const struct kernels *quant_kernels(void)
{
#ifdef QUANT_HAVE_AVX512
	if (quant_isa_max >= QUANT_ISA_AVX512 && quant_cpu_avx512())
		return &kernels_avx512;
#endif
#ifdef QUANT_HAVE_AVX2
	/* every AVX2 CPU has F16C (clang 14 cannot test for "f16c") */
	if (quant_isa_max >= QUANT_ISA_AVX2 && __builtin_cpu_supports("avx2"))
		return &kernels_avx2;
#endif
	return &kernels_c;
}

void quant_set_isa(enum quant_isa max)
{
	quant_isa_max = max;
}

enum quant_isa quant_isa_active(void)
{
	const struct kernels *k = quant_kernels();

#ifdef QUANT_HAVE_AVX512
	if (k == &kernels_avx512)
		return QUANT_ISA_AVX512;
#endif
	return k == &kernels_c ? QUANT_ISA_C : QUANT_ISA_AVX2;
}

void quant_set_simd(bool on)
{
	quant_set_isa(on ? QUANT_ISA_AVX512 : QUANT_ISA_C);
}

bool quant_simd_active(void)
{
	return quant_kernels() != &kernels_c;
}

/* ---- public interface -----------------------------------------------------
 */

/* The 26 computable types, in the order messages list them. */
static const uint32_t quant_supported[] = {
    QTYPE_F32,   QTYPE_F16,     QTYPE_BF16,  QTYPE_Q8_0,   QTYPE_Q4_0,
    QTYPE_Q4_1,  QTYPE_Q5_0,    QTYPE_Q5_1,  QTYPE_Q2_K,   QTYPE_Q3_K,
    QTYPE_Q4_K,  QTYPE_Q5_K,    QTYPE_Q6_K,  QTYPE_IQ4_NL, QTYPE_IQ4_XS,
    QTYPE_IQ3_S, QTYPE_IQ3_XXS, QTYPE_IQ2_S, QTYPE_IQ2_XS, QTYPE_IQ2_XXS,
    QTYPE_IQ1_M, QTYPE_IQ1_S,   QTYPE_TQ2_0, QTYPE_TQ1_0,  QTYPE_MXFP4,
    QTYPE_NVFP4,
};

/* Kind of activation vector a type's dot wants. */
enum vec_kind { VEC_NONE, VEC_F32, VEC_Q8, VEC_Q8K };

static enum vec_kind vec_kind_of(uint32_t type)
{
	switch (type) {
	case QTYPE_F32:
	case QTYPE_F16:
	case QTYPE_BF16:
		return VEC_F32;
	case QTYPE_Q4_0:
	case QTYPE_Q4_1:
	case QTYPE_Q5_0:
	case QTYPE_Q5_1:
	case QTYPE_Q8_0:
	case QTYPE_IQ4_NL:
	case QTYPE_MXFP4:
	case QTYPE_NVFP4: /* 64-element blocks: two activation blocks */
		return VEC_Q8;
	case QTYPE_Q2_K:
	case QTYPE_Q3_K:
	case QTYPE_Q4_K:
	case QTYPE_Q5_K:
	case QTYPE_Q6_K:
	case QTYPE_IQ2_XXS:
	case QTYPE_IQ2_XS:
	case QTYPE_IQ2_S:
	case QTYPE_IQ3_XXS:
	case QTYPE_IQ3_S:
	case QTYPE_IQ1_S:
	case QTYPE_IQ1_M:
	case QTYPE_IQ4_XS:
	case QTYPE_TQ1_0:
	case QTYPE_TQ2_0:
		return VEC_Q8K;
	default:
		return VEC_NONE;
	}
}

bool quant_can_compute(uint32_t type)
{
	return vec_kind_of(type) != VEC_NONE;
}

size_t quant_row_size(uint32_t type, int64_t n)
{
	const struct qtype_info *qi = qtype_get(type);

	if (qi == NULL || qi->blck_size == 0 || n < 0 || n % qi->blck_size)
		return 0;
	return (size_t)(n / qi->blck_size) * qi->type_size;
}

void quant_dequant_row(uint32_t type, const void *src, float *dst, int64_t n)
{
	const struct qtype_info *qi = qtype_get(type);
	const int64_t nb = qi && qi->blck_size ? n / qi->blck_size : 0;

	switch (type) {
	case QTYPE_F32:
		deq_f32(src, dst, n);
		break;
	case QTYPE_F16:
		deq_f16(src, dst, n);
		break;
	case QTYPE_BF16:
		deq_bf16(src, dst, n);
		break;
	case QTYPE_Q4_0:
		deq_q4_0(src, dst, nb);
		break;
	case QTYPE_Q4_1:
		deq_q4_1(src, dst, nb);
		break;
	case QTYPE_Q5_0:
		deq_q5_0(src, dst, nb);
		break;
	case QTYPE_Q5_1:
		deq_q5_1(src, dst, nb);
		break;
	case QTYPE_Q8_0:
		deq_q8_0(src, dst, nb);
		break;
	case QTYPE_Q2_K:
		deq_q2_K(src, dst, nb);
		break;
	case QTYPE_Q3_K:
		deq_q3_K(src, dst, nb);
		break;
	case QTYPE_Q4_K:
		deq_q4_K(src, dst, nb);
		break;
	case QTYPE_Q5_K:
		deq_q5_K(src, dst, nb);
		break;
	case QTYPE_Q6_K:
		deq_q6_K(src, dst, nb);
		break;
#define IQ_CASE(name, type, isa512) case type:
		QUANT_IQ_TYPES(IQ_CASE)
#undef IQ_CASE
		quant_iq_dequant(type, src, dst, nb);
		break;
	default:
		for (int64_t i = 0; i < n; i++)
			dst[i] = NAN;
		break;
	}
}

size_t quant_vec_size(uint32_t type, int64_t n)
{
	if (n < 0)
		return 0;
	switch (vec_kind_of(type)) {
	case VEC_F32:
		return (size_t)n * sizeof(float);
	case VEC_Q8:
		return (size_t)(n / QK) * (2 * sizeof(float) + QK);
	case VEC_Q8K:
		return (size_t)(n / QK_K) * sizeof(struct vblk_q8k);
	default:
		return 0;
	}
}

void quant_vec_prepare(uint32_t type, const float *x, int64_t n, void *vec)
{
	switch (vec_kind_of(type)) {
	case VEC_F32:
		memcpy(vec, x, (size_t)n * sizeof(float));
		break;
	case VEC_Q8:
		vec_q8(quant_kernels()->quantize, x, n / QK, vec);
		break;
	case VEC_Q8K:
		vec_q8k(quant_kernels()->quantize, x, n / QK_K, vec);
		break;
	default:
		break;
	}
}

void quant_vec_dequant(uint32_t type, const void *vec, double *xhat, int64_t n)
{
	const struct vec_q8 v = vec_q8_view(vec, n / QK);
	const struct vblk_q8k *vk = vec;

	switch (vec_kind_of(type)) {
	case VEC_F32:
		for (int64_t i = 0; i < n; i++)
			xhat[i] = ((const float *)vec)[i];
		break;
	case VEC_Q8:
		for (int64_t i = 0; i < n; i++)
			xhat[i] = (double)v.d[i / QK] * v.qs[i / QK][i % QK];
		break;
	case VEC_Q8K:
		for (int64_t i = 0; i < n; i++)
			xhat[i] =
			    (double)vk[i / QK_K].d * vk[i / QK_K].qs[i % QK_K];
		break;
	default:
		for (int64_t i = 0; i < n; i++)
			xhat[i] = NAN;
		break;
	}
}

float quant_dot(uint32_t type, const void *row, const void *vec, int64_t n)
{
	const struct kernels *k = quant_kernels();

	if (!quant_can_compute(type))
		return NAN;
	return k->dot[type](row, vec, n);
}

void quant_dot_rows(uint32_t type, const void *rows, size_t row_stride,
                    int64_t nrows, const void *vec, int64_t n, float *out,
                    size_t out_stride)
{
	const dot_fn dot =
	    quant_can_compute(type) ? quant_kernels()->dot[type] : NULL;
	const unsigned char *row = rows;

#ifdef QUANT_HAVE_AVX512
	if (type == QTYPE_F32 && dot == dot_f32_avx512 &&
	    row_stride % sizeof(float) == 0 &&
	    dot_rows_f32_avx512(rows, row_stride / sizeof(float), nrows, vec, n,
	                        out, out_stride))
		return;
#endif
#ifdef QUANT_HAVE_AVX2
	/* float rows (attention scores): four rows at a time, same bits */
	if (type == QTYPE_F32 && dot == dot_f32_avx2 &&
	    row_stride % sizeof(float) == 0 &&
	    dot_rows_f32_avx2(rows, row_stride / sizeof(float), nrows, vec, n,
	                      out, out_stride))
		return;
#endif
	for (int64_t r = 0; r < nrows; r++, row += row_stride)
		out[(size_t)r * out_stride] = dot ? dot(row, vec, n) : NAN;
}

void quant_f32_mix(float *out, const float *a, const float *rows, size_t stride,
                   int64_t nrows, int64_t n)
{
	quant_kernels()->mix(out, a, rows, stride, nrows, n);
}

int quant_check_tensor(const char *name, uint32_t type, char *err,
                       size_t errlen)
{
	size_t len;

	if (quant_can_compute(type))
		return 0;
	if (err == NULL || errlen == 0)
		return -1;
	snprintf(err, errlen,
	         "tensor '%s' has type %s (id %u), which the CPU engine does "
	         "not support (supported: ",
	         name, qtype_name(type), (unsigned)type);
	for (size_t i = 0; i < sizeof quant_supported / sizeof *quant_supported;
	     i++) {
		len = strlen(err);
		snprintf(err + len, errlen - len, "%s%s", i ? ", " : "",
		         qtype_name(quant_supported[i]));
	}
	len = strlen(err);
	snprintf(err + len, errlen - len, ")");
	return -1;
}

/*
 * quant.c - ggml's block formats: dequantization and dot products.
 *
 * Layout of the file: block structs; dequantization (one function per type,
 * a transcription of ggml's dequantize_row_*); activation quantization;
 * the integer block kernels (portable C, then AVX2); the dot products, whose
 * float32 part is shared by both kernel sets; the public dispatch.
 *
 * See quant.h for the invariants (bit-exact dequantization, identical
 * results with and without AVX2).
 */
#include "quant.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "f16.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#define QK 32	 /* elements per block of the 32-element formats */
#define QK_K 256 /* elements per K-quant super-block */

/* ---- ggml's blocks (little-endian, 2-byte aligned) ---------------------- */

struct blk_q4_0 {
	uint16_t d;	     /* scale, half */
	uint8_t qs[QK / 2]; /* nibbles: low = elements 0..15, high = 16..31 */
};
struct blk_q4_1 {
	uint16_t d, m;	     /* scale and minimum, half */
	uint8_t qs[QK / 2]; /* nibbles as Q4_0 */
};
struct blk_q5_0 {
	uint16_t d;	     /* scale, half */
	uint8_t qh[4];	     /* fifth bits, bit j = element j (LE uint32) */
	uint8_t qs[QK / 2]; /* low four bits as Q4_0 */
};
struct blk_q5_1 {
	uint16_t d, m;	     /* scale and minimum, half */
	uint8_t qh[4];	     /* fifth bits as Q5_0 */
	uint8_t qs[QK / 2]; /* low four bits as Q4_0 */
};
struct blk_q8_0 {
	uint16_t d;	/* scale, half */
	int8_t qs[QK]; /* quants */
};
struct blk_q2_K {
	uint8_t scales[QK_K / 16]; /* per 16: low nibble scale, high min */
	uint8_t qs[QK_K / 4];	   /* 2-bit quants */
	uint16_t d, dmin;	   /* super-block scales, half */
};
struct blk_q3_K {
	uint8_t hmask[QK_K / 8]; /* high bits (set: no -4 offset) */
	uint8_t qs[QK_K / 4];	 /* low 2 bits */
	uint8_t scales[12];	 /* 16 6-bit scales, packed */
	uint16_t d;		 /* super-block scale, half */
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
	uint8_t ql[QK_K / 2];	  /* low 4 bits */
	uint8_t qh[QK_K / 4];	  /* high 2 bits */
	int8_t scales[QK_K / 16]; /* 8-bit scales per 16 */
	uint16_t d;		  /* super-block scale, half */
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

/* ---- activation blocks (our own layout, 4-byte aligned) ----------------- */

/* x quantized per 32 (for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0). */
struct vblk_q8 {
	float d;       /* scale: x ~ d * qs */
	float ds;      /* d * (sum of qs), for the formats with a minimum */
	int8_t qs[QK]; /* quants, |q| <= 127 */
};
/* x quantized per 256 (for the K-quants), llama.cpp's Q8_K. */
struct vblk_q8k {
	float d;		  /* scale: x ~ d * qs */
	int8_t qs[QK_K];	  /* quants, |q| <= 127 */
	int16_t bsums[QK_K / 16]; /* sum of each 16 quants */
};

_Static_assert(sizeof(struct vblk_q8) == 40, "vec block");
_Static_assert(sizeof(struct vblk_q8k) == 292, "vec K block");

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
						*y++ = dl * ((q[l + 16 * k] >> shift) & 3) - ml;
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

					for (int l = 16 * k; l < 16 * k + 16; l++)
						*y++ = dl * (((q[l] >> shift) & 3) -
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
				*y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
			for (int l = 0; l < 32; l++)
				*y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
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
				const int q1 = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32;
				const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
				const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
				const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;

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
				    (int8_t)((b->qs[32 * h + l] >> (2 * j)) & 3);
}

/* Quants of a Q3_K block in element order (-4..3). */
static void unpack_q3_K(const struct blk_q3_K *b, int8_t q[QK_K])
{
	for (int h = 0; h < 2; h++)
		for (int j = 0; j < 4; j++) {
			const uint8_t m = (uint8_t)(1u << (4 * h + j));

			for (int l = 0; l < 32; l++)
				q[128 * h + 32 * j + l] = (int8_t)(
				    ((b->qs[32 * h + l] >> (2 * j)) & 3) -
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

			q[64 * j + l] = (int8_t)((v & 0xF) | (((h >> (2 * j)) & 1) << 4));
			q[64 * j + 32 + l] =
			    (int8_t)((v >> 4) | (((h >> (2 * j + 1)) & 1) << 4));
		}
}

/* Quants of a Q6_K block in element order (-32..31). */
static void unpack_q6_K(const struct blk_q6_K *b, int8_t q[QK_K])
{
	for (int h = 0; h < 2; h++) {
		const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
		int8_t *o = q + 128 * h;

		for (int l = 0; l < 32; l++) {
			o[l] = (int8_t)(((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32);
			o[l + 32] = (int8_t)(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
			o[l + 64] = (int8_t)(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
			o[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
		}
	}
}

/* Sum over sub-blocks of size SUB: scale[j] * (q . x over sub-block j). */
static int32_t isum_scaled(const int8_t *q, const int8_t *x, const int *scale,
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

static void vec_q8(const float *x, int64_t nb, struct vblk_q8 *y)
{
	for (int64_t i = 0; i < nb; i++, x += QK) {
		int s = 0;

		y[i].d = quantize_i8(x, QK, y[i].qs);
		for (int j = 0; j < QK; j++)
			s += y[i].qs[j];
		y[i].ds = y[i].d * (float)s;
	}
}

static void vec_q8k(const float *x, int64_t nb, struct vblk_q8k *y)
{
	for (int64_t i = 0; i < nb; i++, x += QK_K) {
		y[i].d = quantize_i8(x, QK_K, y[i].qs);
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
 * Each kernel writes, for blocks [0, nb), the exact integer dot of the
 * weight quants with the activation quants (isum) and, for the formats with
 * minimums, the integer the minimum multiplies (imin).
 */

static void isum_q4_0_c(const struct blk_q4_0 *w, const struct vblk_q8 *v,
			int64_t nb, int32_t *isum)
{
	for (int64_t i = 0; i < nb; i++) {
		int32_t s = 0;

		for (int j = 0; j < QK / 2; j++)
			s += ((w[i].qs[j] & 0xF) - 8) * v[i].qs[j] +
			     ((w[i].qs[j] >> 4) - 8) * v[i].qs[j + QK / 2];
		isum[i] = s;
	}
}

static void isum_q4_1_c(const struct blk_q4_1 *w, const struct vblk_q8 *v,
			int64_t nb, int32_t *isum)
{
	for (int64_t i = 0; i < nb; i++) {
		int32_t s = 0;

		for (int j = 0; j < QK / 2; j++)
			s += (w[i].qs[j] & 0xF) * v[i].qs[j] +
			     (w[i].qs[j] >> 4) * v[i].qs[j + QK / 2];
		isum[i] = s;
	}
}

static void isum_q5_0_c(const struct blk_q5_0 *w, const struct vblk_q8 *v,
			int64_t nb, int32_t *isum)
{
	for (int64_t i = 0; i < nb; i++) {
		const uint32_t qh = q5_high(w[i].qh);
		int32_t s = 0;

		for (int j = 0; j < QK / 2; j++) {
			const int x0 = ((w[i].qs[j] & 0xF) | (((qh >> j) & 1) << 4)) - 16;
			const int x1 = ((w[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16;

			s += x0 * v[i].qs[j] + x1 * v[i].qs[j + QK / 2];
		}
		isum[i] = s;
	}
}

static void isum_q5_1_c(const struct blk_q5_1 *w, const struct vblk_q8 *v,
			int64_t nb, int32_t *isum)
{
	for (int64_t i = 0; i < nb; i++) {
		const uint32_t qh = q5_high(w[i].qh);
		int32_t s = 0;

		for (int j = 0; j < QK / 2; j++) {
			const int x0 = (w[i].qs[j] & 0xF) | (((qh >> j) & 1) << 4);
			const int x1 = (w[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);

			s += x0 * v[i].qs[j] + x1 * v[i].qs[j + QK / 2];
		}
		isum[i] = s;
	}
}

static void isum_q8_0_c(const struct blk_q8_0 *w, const struct vblk_q8 *v,
			int64_t nb, int32_t *isum)
{
	for (int64_t i = 0; i < nb; i++) {
		int32_t s = 0;

		for (int j = 0; j < QK; j++)
			s += w[i].qs[j] * v[i].qs[j];
		isum[i] = s;
	}
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
		isum[i] = isum_scaled(q, v[i].qs, sc, 16);
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
		isum[i] = isum_scaled(q, v[i].qs, sc, 16);
	}
}

static void isum_q4_K_c(const struct blk_q4_K *w, const struct vblk_q8k *v,
			int64_t nb, int32_t *isum, int32_t *imin)
{
	for (int64_t i = 0; i < nb; i++) {
		int8_t q[QK_K];
		int sc[8], mn[8];

		unpack_q4_K(&w[i], q);
		for (int j = 0; j < 8; j++)
			q4k_scale_min(j, w[i].scales, &sc[j], &mn[j]);
		isum[i] = isum_scaled(q, v[i].qs, sc, 32);
		imin[i] = imin_bsums(&v[i], mn, 32);
	}
}

static void isum_q5_K_c(const struct blk_q5_K *w, const struct vblk_q8k *v,
			int64_t nb, int32_t *isum, int32_t *imin)
{
	for (int64_t i = 0; i < nb; i++) {
		int8_t q[QK_K];
		int sc[8], mn[8];

		unpack_q5_K(&w[i], q);
		for (int j = 0; j < 8; j++)
			q4k_scale_min(j, w[i].scales, &sc[j], &mn[j]);
		isum[i] = isum_scaled(q, v[i].qs, sc, 32);
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
		isum[i] = isum_scaled(q, v[i].qs, sc, 16);
	}
}

/* ---- float rows (x stays float32) --------------------------------------- */
/*
 * 16 running sums, each over the elements i with i % 16 == k, then added in
 * a fixed order: the compiler may vectorize across the 16 lanes without
 * reordering any float operation, so every build gives the same result.
 */
#define FLANES 16

#define DEFINE_DOT_FLOAT(NAME, WT, CONV)                                      \
	static float NAME(const WT *w, const float *x, int64_t n)             \
	{                                                                     \
		float acc[FLANES] = {0};                                      \
		int64_t i = 0;                                                \
                                                                              \
		for (; i + FLANES <= n; i += FLANES)                          \
			for (int k = 0; k < FLANES; k++)                      \
				acc[k] += CONV(w[i + k]) * x[i + k];          \
		for (int k = 0; i < n; i++, k++)                              \
			acc[k] += CONV(w[i]) * x[i];                          \
		for (int k = FLANES / 2; k > 0; k /= 2)                       \
			for (int j = 0; j < k; j++)                           \
				acc[j] += acc[j + k];                         \
		return acc[0];                                                \
	}

#define CONV_F32(v) (v)
DEFINE_DOT_FLOAT(dot_f32_c, float, CONV_F32)
DEFINE_DOT_FLOAT(dot_f16_c, uint16_t, f16_to_f32)
DEFINE_DOT_FLOAT(dot_bf16_c, uint16_t, bf16_to_f32)

/* ---- kernel selection ---------------------------------------------------- */

typedef void (*isum32_fn)(const void *w, const struct vblk_q8 *v, int64_t nb,
			  int32_t *isum);
typedef void (*isumk_fn)(const void *w, const struct vblk_q8k *v, int64_t nb,
			 int32_t *isum, int32_t *imin);
typedef float (*dotf_fn)(const void *w, const float *x, int64_t n);

/* One set of kernels, indexed by type id (NULL: not this family). */
struct kernels {
	isum32_fn isum32[QTYPE_COUNT]; /* 32-element formats */
	isumk_fn isumk[QTYPE_COUNT];   /* K-quants */
	dotf_fn dotf[QTYPE_COUNT];     /* float formats */
};

/* Adapters from the typed kernels to the table's signatures. */
#define ADAPT32(NAME, BLK)                                                    \
	static void NAME##_a(const void *w, const struct vblk_q8 *v,          \
			     int64_t nb, int32_t *isum)                       \
	{                                                                     \
		NAME((const BLK *)w, v, nb, isum);                            \
	}
#define ADAPTK(NAME, BLK)                                                     \
	static void NAME##_a(const void *w, const struct vblk_q8k *v,         \
			     int64_t nb, int32_t *isum, int32_t *imin)        \
	{                                                                     \
		NAME((const BLK *)w, v, nb, isum, imin);                      \
	}
#define ADAPTK1(NAME, BLK)                                                    \
	static void NAME##_a(const void *w, const struct vblk_q8k *v,         \
			     int64_t nb, int32_t *isum, int32_t *imin)        \
	{                                                                     \
		(void)imin;                                                   \
		NAME((const BLK *)w, v, nb, isum);                            \
	}
#define ADAPTF(NAME, WT)                                                      \
	static float NAME##_a(const void *w, const float *x, int64_t n)       \
	{                                                                     \
		return NAME((const WT *)w, x, n);                             \
	}

ADAPT32(isum_q4_0_c, struct blk_q4_0)
ADAPT32(isum_q4_1_c, struct blk_q4_1)
ADAPT32(isum_q5_0_c, struct blk_q5_0)
ADAPT32(isum_q5_1_c, struct blk_q5_1)
ADAPT32(isum_q8_0_c, struct blk_q8_0)
ADAPTK(isum_q2_K_c, struct blk_q2_K)
ADAPTK1(isum_q3_K_c, struct blk_q3_K)
ADAPTK(isum_q4_K_c, struct blk_q4_K)
ADAPTK(isum_q5_K_c, struct blk_q5_K)
ADAPTK1(isum_q6_K_c, struct blk_q6_K)
ADAPTF(dot_f32_c, float)
ADAPTF(dot_f16_c, uint16_t)
ADAPTF(dot_bf16_c, uint16_t)

static const struct kernels kernels_c = {
	.isum32 = {[QTYPE_Q4_0] = isum_q4_0_c_a,
		   [QTYPE_Q4_1] = isum_q4_1_c_a,
		   [QTYPE_Q5_0] = isum_q5_0_c_a,
		   [QTYPE_Q5_1] = isum_q5_1_c_a,
		   [QTYPE_Q8_0] = isum_q8_0_c_a},
	.isumk = {[QTYPE_Q2_K] = isum_q2_K_c_a,
		  [QTYPE_Q3_K] = isum_q3_K_c_a,
		  [QTYPE_Q4_K] = isum_q4_K_c_a,
		  [QTYPE_Q5_K] = isum_q5_K_c_a,
		  [QTYPE_Q6_K] = isum_q6_K_c_a},
	.dotf = {[QTYPE_F32] = dot_f32_c_a,
		 [QTYPE_F16] = dot_f16_c_a,
		 [QTYPE_BF16] = dot_bf16_c_a},
};

#include "quant_avx2.h"

static bool quant_simd_wanted = true; /* quant_set_simd */

/* The kernels to use now. */
static const struct kernels *quant_kernels(void)
{
#ifdef QUANT_HAVE_AVX2
	if (quant_simd_wanted && __builtin_cpu_supports("avx2"))
		return &kernels_avx2;
#endif
	return &kernels_c;
}

void quant_set_simd(bool on)
{
	quant_simd_wanted = on;
}

bool quant_simd_active(void)
{
	return quant_kernels() != &kernels_c;
}

/* ---- the float32 part of the dots (shared by all kernels) --------------- */

#define CHUNK 64 /* blocks whose integer sums are computed at once */

/* Half at byte offset OFF of block B. */
static float blk_half(const uint8_t *b, int off)
{
	uint16_t h;

	memcpy(&h, b + off, sizeof h);
	return f16_to_f32(h);
}

/* Dot of a row of a 32-element format (TYPE) with quantized activations. */
static float dot_32(uint32_t type, isum32_fn kern, const uint8_t *row,
		    const struct vblk_q8 *v, int64_t nb)
{
	const size_t bs = qtype_get(type)->type_size;
	const bool has_min = type == QTYPE_Q4_1 || type == QTYPE_Q5_1;
	int32_t isum[CHUNK];
	float sumf = 0.0f;

	for (int64_t i0 = 0; i0 < nb; i0 += CHUNK) {
		const int64_t nc = nb - i0 < CHUNK ? nb - i0 : CHUNK;

		kern(row + i0 * bs, v + i0, nc, isum);
		for (int64_t i = 0; i < nc; i++) {
			const uint8_t *b = row + (i0 + i) * bs;
			const float d = blk_half(b, 0) * v[i0 + i].d;
			float t = d * (float)isum[i];

			if (has_min) {
				const float m = blk_half(b, 2) * v[i0 + i].ds;

				t = t + m;
			}
			sumf += t;
		}
	}
	return sumf;
}

/* Byte offsets of d and dmin in a K-quant block (-1: no dmin). */
static void k_offsets(uint32_t type, int *d_off, int *dmin_off)
{
	switch (type) {
	case QTYPE_Q2_K:
		*d_off = offsetof(struct blk_q2_K, d);
		*dmin_off = offsetof(struct blk_q2_K, dmin);
		break;
	case QTYPE_Q3_K:
		*d_off = offsetof(struct blk_q3_K, d);
		*dmin_off = -1;
		break;
	case QTYPE_Q6_K:
		*d_off = offsetof(struct blk_q6_K, d);
		*dmin_off = -1;
		break;
	default: /* Q4_K, Q5_K */
		*d_off = 0;
		*dmin_off = 2;
		break;
	}
}

/* Dot of a row of a K-quant (TYPE) with Q8_K activations. */
static float dot_k(uint32_t type, isumk_fn kern, const uint8_t *row,
		   const struct vblk_q8k *v, int64_t nb)
{
	const size_t bs = qtype_get(type)->type_size;
	int32_t isum[CHUNK], imin[CHUNK];
	int d_off, dmin_off;
	float sumf = 0.0f;

	k_offsets(type, &d_off, &dmin_off);
	for (int64_t i0 = 0; i0 < nb; i0 += CHUNK) {
		const int64_t nc = nb - i0 < CHUNK ? nb - i0 : CHUNK;

		kern(row + i0 * bs, v + i0, nc, isum, imin);
		for (int64_t i = 0; i < nc; i++) {
			const uint8_t *b = row + (i0 + i) * bs;
			const float d = blk_half(b, d_off) * v[i0 + i].d;
			float t = d * (float)isum[i];

			if (dmin_off >= 0) {
				const float m = blk_half(b, dmin_off) * v[i0 + i].d;

				t = t - m * (float)imin[i];
			}
			sumf += t;
		}
	}
	return sumf;
}

/* ---- public interface ----------------------------------------------------- */

/* The 13 computable types, in the order messages list them. */
static const uint32_t quant_supported[] = {
	QTYPE_F32,  QTYPE_F16,	QTYPE_BF16, QTYPE_Q8_0, QTYPE_Q4_0,
	QTYPE_Q4_1, QTYPE_Q5_0, QTYPE_Q5_1, QTYPE_Q2_K, QTYPE_Q3_K,
	QTYPE_Q4_K, QTYPE_Q5_K, QTYPE_Q6_K,
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
		return VEC_Q8;
	case QTYPE_Q2_K:
	case QTYPE_Q3_K:
	case QTYPE_Q4_K:
	case QTYPE_Q5_K:
	case QTYPE_Q6_K:
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
	case QTYPE_F32: deq_f32(src, dst, n); break;
	case QTYPE_F16: deq_f16(src, dst, n); break;
	case QTYPE_BF16: deq_bf16(src, dst, n); break;
	case QTYPE_Q4_0: deq_q4_0(src, dst, nb); break;
	case QTYPE_Q4_1: deq_q4_1(src, dst, nb); break;
	case QTYPE_Q5_0: deq_q5_0(src, dst, nb); break;
	case QTYPE_Q5_1: deq_q5_1(src, dst, nb); break;
	case QTYPE_Q8_0: deq_q8_0(src, dst, nb); break;
	case QTYPE_Q2_K: deq_q2_K(src, dst, nb); break;
	case QTYPE_Q3_K: deq_q3_K(src, dst, nb); break;
	case QTYPE_Q4_K: deq_q4_K(src, dst, nb); break;
	case QTYPE_Q5_K: deq_q5_K(src, dst, nb); break;
	case QTYPE_Q6_K: deq_q6_K(src, dst, nb); break;
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
	case VEC_F32: return (size_t)n * sizeof(float);
	case VEC_Q8: return (size_t)(n / QK) * sizeof(struct vblk_q8);
	case VEC_Q8K: return (size_t)(n / QK_K) * sizeof(struct vblk_q8k);
	default: return 0;
	}
}

void quant_vec_prepare(uint32_t type, const float *x, int64_t n, void *vec)
{
	switch (vec_kind_of(type)) {
	case VEC_F32: memcpy(vec, x, (size_t)n * sizeof(float)); break;
	case VEC_Q8: vec_q8(x, n / QK, vec); break;
	case VEC_Q8K: vec_q8k(x, n / QK_K, vec); break;
	default: break;
	}
}

void quant_vec_dequant(uint32_t type, const void *vec, double *xhat, int64_t n)
{
	const struct vblk_q8 *v = vec;
	const struct vblk_q8k *vk = vec;

	switch (vec_kind_of(type)) {
	case VEC_F32:
		for (int64_t i = 0; i < n; i++)
			xhat[i] = ((const float *)vec)[i];
		break;
	case VEC_Q8:
		for (int64_t i = 0; i < n; i++)
			xhat[i] = (double)v[i / QK].d * v[i / QK].qs[i % QK];
		break;
	case VEC_Q8K:
		for (int64_t i = 0; i < n; i++)
			xhat[i] = (double)vk[i / QK_K].d * vk[i / QK_K].qs[i % QK_K];
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

	switch (vec_kind_of(type)) {
	case VEC_F32: return k->dotf[type](row, vec, n);
	case VEC_Q8: return dot_32(type, k->isum32[type], row, vec, n / QK);
	case VEC_Q8K: return dot_k(type, k->isumk[type], row, vec, n / QK_K);
	default: return NAN;
	}
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
	for (size_t i = 0; i < sizeof quant_supported / sizeof *quant_supported; i++) {
		len = strlen(err);
		snprintf(err + len, errlen - len, "%s%s", i ? ", " : "",
			 qtype_name(quant_supported[i]));
	}
	len = strlen(err);
	snprintf(err + len, errlen - len, ")");
	return -1;
}

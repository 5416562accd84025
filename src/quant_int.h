/*
 * quant_int.h - what quant.c and quant_iq.c share (private to them): the
 * activation blocks, the dot kernel type, the AVX2 helpers, and the
 * i-quant entry points quant.c's kernel tables and switches name.
 *
 * The i-quants (IQ*), ternary (TQ*) and 4-bit float (MXFP4, NVFP4) types
 * live in quant_iq.c under the same contract as quant.c's types (quant.h
 * notes 2 and 3): dequantization in gguf-py's float order, dots as exact
 * integer block sums combined by the same float32 operations on every
 * kernel set.
 */
#ifndef PARLEY_QUANT_INT_H
#define PARLEY_QUANT_INT_H

#include <stdint.h>
#include <string.h>

#define QK   32  /* elements per block of the 32-element formats */
#define QK_K 256 /* elements per K-quant super-block */

/*
 * x quantized per 32 (for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4,
 * NVFP4), for NB blocks, is stored as three arrays so that eight blocks'
 * scales load at once:
 *   float d[nb]       scale: x ~ d * q
 *   float ds[nb]      d * (sum of the block's q), for formats with a minimum
 *   int8_t qs[nb][32] quants, |q| <= 127
 * (40 bytes a block; d, ds and qs start 4-, 4- and 8-byte aligned.)
 */
struct vec_q8 {
	float *d;         /* nb scales */
	float *ds;        /* nb scale * quant sums */
	int8_t (*qs)[QK]; /* nb blocks of quants */
};

/* The arrays of a prepared vector of NB blocks at VEC. */
static inline struct vec_q8 vec_q8_view(const void *vec, int64_t nb)
{
	float *f = (float *)vec;
	struct vec_q8 v = {f, f + nb, (int8_t(*)[QK])(f + 2 * nb)};

	return v;
}

/* x quantized per 256 (for the K-, i- and TQ quants), llama.cpp's Q8_K. */
struct vblk_q8k {
	float d;                  /* scale: x ~ d * qs */
	int8_t qs[QK_K];          /* quants, |q| <= 127 */
	int16_t bsums[QK_K / 16]; /* sum of each 16 quants */
};

_Static_assert(sizeof(struct vblk_q8k) == 292, "vec K block");

/* A row . vector dot of N elements; one per type and kernel set. */
typedef float (*dot_fn)(const void *row, const void *vec, int64_t n);

/*
 * The 32-element formats' running sums: block i's term goes to sum i % 8;
 * the eight are added pairwise at the end (the AVX2 kernels keep the eight
 * sums in one register).
 */
static inline float acc8_sum(const float acc[8])
{
	return ((acc[0] + acc[4]) + (acc[2] + acc[6])) +
	       ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

/* ---- the types of quant_iq.c -------------------------------------------- */

/* Sum over the sub-blocks j of SUB elements of a super-block of QK_K:
 * SCALE[j] * (Q . X over sub-block j), exact integers (quant.c). */
int32_t quant_isum_scaled(const int8_t *q, const int8_t *x, const int *scale,
                          int sub);

/* Dequantize NB blocks of TYPE (an i-quant, TQ1_0, TQ2_0, MXFP4 or NVFP4)
 * at SRC into DST, in gguf-py's float operations. */
void quant_iq_dequant(uint32_t type, const void *src, float *dst, int64_t nb);

/* X(name, TYPE id, the kernel of the AVX-512 table: avx512 where
 * quant_iq.c has one, as the other 32-element 4-bit formats (Q4_0, Q4_1)
 * do, else avx2) for every type quant_iq.c computes. */
#define QUANT_IQ_TYPES(X)                                                      \
	X(iq2_xxs, QTYPE_IQ2_XXS, avx2)                                        \
	X(iq2_xs, QTYPE_IQ2_XS, avx2)                                          \
	X(iq2_s, QTYPE_IQ2_S, avx2)                                            \
	X(iq3_xxs, QTYPE_IQ3_XXS, avx2)                                        \
	X(iq3_s, QTYPE_IQ3_S, avx2)                                            \
	X(iq1_s, QTYPE_IQ1_S, avx2)                                            \
	X(iq1_m, QTYPE_IQ1_M, avx2)                                            \
	X(iq4_nl, QTYPE_IQ4_NL, avx512)                                        \
	X(iq4_xs, QTYPE_IQ4_XS, avx2)                                          \
	X(tq1_0, QTYPE_TQ1_0, avx2)                                            \
	X(tq2_0, QTYPE_TQ2_0, avx2)                                            \
	X(mxfp4, QTYPE_MXFP4, avx512)                                          \
	X(nvfp4, QTYPE_NVFP4, avx2)

/* quant_iq_dot_NAME_c (portable), quant_iq_dot_NAME_avx2 (AVX2 where
 * written, else the portable kernel under that name: tables need one) and
 * the AVX-512 table's (quant_avx512.h: built only where it can be). */
#define QUANT_IQ_DECLARE(name, type, isa512)                                   \
	float quant_iq_dot_##name##_c(const void *row, const void *vec,        \
	                              int64_t n);                              \
	float quant_iq_dot_##name##_avx2(const void *row, const void *vec,     \
	                                 int64_t n);                           \
	float quant_iq_dot_##name##_##isa512(const void *row, const void *vec, \
	                                     int64_t n);
QUANT_IQ_TYPES(QUANT_IQ_DECLARE)
#undef QUANT_IQ_DECLARE

/* Where the AVX-512 kernels can be built (quant_avx512.h, quant_iq.c). */
#if defined(__x86_64__) && !defined(__clang__) && defined(__GNUC__) &&         \
    __GNUC__ >= 9
#define QUANT_CAN_AVX512 1
#endif

/* ---- AVX2 helpers ---------------------------------------------------------
 */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define QUANT_HAVE_AVX2 1

#include <immintrin.h>

#define QUANT_AVX2 __attribute__((target("avx2,f16c")))

/* Sum of the 8 int32 lanes of V. */
QUANT_AVX2 static inline int32_t avx2_hsum_i32(__m256i v)
{
	__m128i s = _mm_add_epi32(_mm256_castsi256_si128(v),
	                          _mm256_extracti128_si256(v, 1));

	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
	return _mm_cvtsi128_si32(s);
}

/* 16 bytes of nibbles as 32 bytes: low nibbles then high nibbles (the
 * 16 bytes in both halves, the upper half shifted right by 4). */
QUANT_AVX2 static inline __m256i avx2_nibbles(const uint8_t *p)
{
	const __m256i q =
	    _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p));

	return _mm256_and_si256(
	    _mm256_srlv_epi32(q, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)),
	    _mm256_set1_epi8(0x0F));
}

/* Byte j = 0xFF where bit j of X is set, else 0. */
QUANT_AVX2 static inline __m256i avx2_bits_to_bytes(uint32_t x)
{
	const __m256i shuf =
	    _mm256_setr_epi64x(0x0000000000000000LL, 0x0101010101010101LL,
	                       0x0202020202020202LL, 0x0303030303030303LL);
	__m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x), shuf);

	b = _mm256_or_si256(b, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfeLL));
	return _mm256_cmpeq_epi8(b, _mm256_set1_epi64x(-1));
}

/* Pairwise int32 sums of unsigned U times signed S (|products| < 2^15). */
QUANT_AVX2 static inline __m256i avx2_dot_us(__m256i u, __m256i s)
{
	return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s),
	                         _mm256_set1_epi16(1));
}

/* Same for signed W times signed X (w = -128 allowed, |x| <= 127). */
QUANT_AVX2 static inline __m256i avx2_dot_ss(__m256i w, __m256i x)
{
	return avx2_dot_us(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
}

/* Lane j = sum of the lanes of P[j], for 8 vectors. */
QUANT_AVX2 static inline __m256i avx2_hsum8_i32(const __m256i p[8])
{
	const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]),
	                                    _mm256_hadd_epi32(p[2], p[3]));
	const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]),
	                                    _mm256_hadd_epi32(p[6], p[7]));

	return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),
	                        _mm256_permute2x128_si256(a, b, 0x31));
}

/* ---- AVX-512 (with VNNI) helpers: quant_avx512.h, quant_iq.c ---------- */
#ifdef QUANT_CAN_AVX512
#define QUANT_AVX512                                                           \
	__attribute__((                                                        \
	    target("avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

/* Lane-wise int32 dots of 64 unsigned bytes U with 64 signed bytes S. */
QUANT_AVX512 static inline __m512i avx512_dot_us(__m512i u, __m512i s)
{
	return _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, s);
}

/* The nibbles of blocks A and B as two 32-byte halves (avx2_nibbles). */
QUANT_AVX512 static inline __m512i avx512_nibbles2(const uint8_t *a,
                                                   const uint8_t *b)
{
	const __m512i q = _mm512_inserti64x4(
	    _mm512_castsi256_si512(_mm256_broadcastsi128_si256(
	        _mm_loadu_si128((const __m128i *)a))),
	    _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)b)),
	    1);

	return _mm512_and_si512(
	    _mm512_srlv_epi32(q, _mm512_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4, 0, 0,
	                                           0, 0, 4, 4, 4, 4)),
	    _mm512_set1_epi8(0x0F));
}

/* Lane-wise sums of groups of four activation quants (for offsets). */
QUANT_AVX512 static inline __m512i avx512_xsum4(__m512i x)
{
	return avx512_dot_us(_mm512_set1_epi8(1), x);
}
#endif /* QUANT_CAN_AVX512 */

#endif /* x86-64 with GCC or clang */

#endif /* PARLEY_QUANT_INT_H */

/*
 * quant_avx2.h - the AVX2 kernels of quant.c (included by quant.c only).
 *
 * Compiled with __attribute__((target("avx2,f16c"))) and chosen at run time
 * (quant_kernels), so the build needs no -mavx2. What makes them give the
 * portable kernels' bits exactly:
 *   - integer block sums are exact whatever the order;
 *   - the float32 operations on them are the portable ones, lane for lane:
 *     the 32-element formats keep the portable code's eight running sums
 *     (block i in sum i % 8) in one register, multiply then add (FMA is
 *     neither enabled nor contracted), and finish with the same tail and
 *     pairwise tree; F16C conversions are exact like f16_to_f32;
 *   - the K-quants share dot_k's float part with the portable path.
 *
 * The byte tricks are llama.cpp's (ggml-cpu/arch/x86/quants.c):
 * _mm256_maddubs_epi16 needs an unsigned first operand, so signed weights
 * multiply as |w| * (x with w's sign); 5th bits are spread to bytes with a
 * shuffle and a compare.
 */
#ifndef PARLEY_QUANT_AVX2_H
#define PARLEY_QUANT_AVX2_H

#ifdef QUANT_HAVE_AVX2 /* quant_int.h: x86-64 with GCC or clang */

/* the helpers (avx2_hsum_i32, avx2_nibbles, ...) are in quant_int.h */
#define AVX2 QUANT_AVX2

/* Per-block int32 lane products of the 32-element formats (8 lanes whose
 * sum is the block's exact integer dot). */
AVX2 static inline __m256i avx2_prod_q4_0(const struct blk_q4_0 *b, __m256i x)
{
	return avx2_dot_ss(
	    _mm256_sub_epi8(avx2_nibbles(b->qs), _mm256_set1_epi8(8)), x);
}

AVX2 static inline __m256i avx2_prod_q4_1(const struct blk_q4_1 *b, __m256i x)
{
	return avx2_dot_us(avx2_nibbles(b->qs), x);
}

AVX2 static inline __m256i avx2_prod_q5_0(const struct blk_q5_0 *b, __m256i x)
{
	/* bit clear: q4 | 0xF0 is q4 - 16 as int8; set: q4 */
	const __m256i hi = _mm256_andnot_si256(
	    avx2_bits_to_bytes(q5_high(b->qh)), _mm256_set1_epi8((char)0xF0));

	return avx2_dot_ss(_mm256_or_si256(avx2_nibbles(b->qs), hi), x);
}

AVX2 static inline __m256i avx2_prod_q5_1(const struct blk_q5_1 *b, __m256i x)
{
	const __m256i hi = _mm256_and_si256(avx2_bits_to_bytes(q5_high(b->qh)),
	                                    _mm256_set1_epi8(0x10));

	return avx2_dot_us(_mm256_or_si256(avx2_nibbles(b->qs), hi), x);
}

AVX2 static inline __m256i avx2_prod_q8_0(const struct blk_q8_0 *b, __m256i x)
{
	return avx2_dot_ss(_mm256_loadu_si256((const __m256i *)b->qs), x);
}

/* Half at byte offset OFF of block B, converted exactly by F16C. */
AVX2 static inline float avx2_blk_half(const void *b, int off)
{
	uint16_t h;

	memcpy(&h, (const uint8_t *)b + off, sizeof h);
	return _cvtsh_ss(h);
}

/*
 * dot_fn NAME for the 32-element format BLK: eight blocks per step, their
 * terms computed as the portable DEFINE_DOT32_C computes them, lane j of
 * the accumulator being running sum j; the last nb % 8 blocks one by one.
 */
#define DEFINE_DOT32_AVX2(NAME, BLK, PROD, HAS_MIN)                            \
	AVX2 static float NAME(const void *row, const void *vec, int64_t n)    \
	{                                                                      \
		const BLK *w = row;                                            \
		const int64_t nb = n / QK;                                     \
		const struct vec_q8 v = vec_q8_view(vec, nb);                  \
		__m256 acc = _mm256_setzero_ps();                              \
		float a[8];                                                    \
		int64_t i = 0;                                                 \
                                                                               \
		for (; i + 8 <= nb; i += 8) {                                  \
			__m256i p[8];                                          \
			uint16_t dh[8], mh[8];                                 \
                                                                               \
			_Pragma("GCC unroll 8") for (int k = 0; k < 8; k++)    \
			{                                                      \
				p[k] =                                         \
				    PROD(&w[i + k],                            \
				         _mm256_loadu_si256(                   \
				             (const __m256i *)v.qs[i + k]));   \
				memcpy(&dh[k], &w[i + k], 2);                  \
				if (HAS_MIN)                                   \
					memcpy(&mh[k],                         \
					       (const uint8_t *)&w[i + k] + 2, \
					       2);                             \
			}                                                      \
			const __m256 is =                                      \
			    _mm256_cvtepi32_ps(avx2_hsum8_i32(p));             \
			__m256 t = _mm256_mul_ps(                              \
			    _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(     \
			                      (const __m128i *)dh)),           \
			                  _mm256_loadu_ps(v.d + i)),           \
			    is);                                               \
			if (HAS_MIN)                                           \
				t = _mm256_add_ps(                             \
				    t, _mm256_mul_ps(                          \
				           _mm256_cvtph_ps(_mm_loadu_si128(    \
				               (const __m128i *)mh)),          \
				           _mm256_loadu_ps(v.ds + i)));        \
			acc = _mm256_add_ps(acc, t);                           \
		}                                                              \
		_mm256_storeu_ps(a, acc);                                      \
		for (; i < nb; i++) {                                          \
			const int32_t is = avx2_hsum_i32(PROD(                 \
			    &w[i],                                             \
			    _mm256_loadu_si256((const __m256i *)v.qs[i])));    \
			float t =                                              \
			    (avx2_blk_half(&w[i], 0) * v.d[i]) * (float)is;    \
                                                                               \
			if (HAS_MIN)                                           \
				t = t + avx2_blk_half(&w[i], 2) * v.ds[i];     \
			a[i % 8] += t;                                         \
		}                                                              \
		return acc8_sum(a);                                            \
	}

DEFINE_DOT32_AVX2(dot_q4_0_avx2, struct blk_q4_0, avx2_prod_q4_0, 0)
DEFINE_DOT32_AVX2(dot_q4_1_avx2, struct blk_q4_1, avx2_prod_q4_1, 1)
DEFINE_DOT32_AVX2(dot_q5_0_avx2, struct blk_q5_0, avx2_prod_q5_0, 0)
DEFINE_DOT32_AVX2(dot_q5_1_avx2, struct blk_q5_1, avx2_prod_q5_1, 1)
DEFINE_DOT32_AVX2(dot_q8_0_avx2, struct blk_q8_0, avx2_prod_q8_0, 0)

/* Shuffles for _mm256_shuffle_epi8: row J repeats int16 lane J of each
 * 128-bit half in all eight lanes of that half. */
static const uint8_t avx2_k4_shuffle[8][32] __attribute__((aligned(32))) = {
#define K4(j)                                                                  \
	{                                                                      \
		2 * j, 2 * j + 1, 2 * j, 2 * j + 1, 2 * j, 2 * j + 1, 2 * j,   \
		    2 * j + 1, 2 * j, 2 * j + 1, 2 * j, 2 * j + 1, 2 * j,      \
		    2 * j + 1, 2 * j, 2 * j + 1, 2 * j, 2 * j + 1, 2 * j,      \
		    2 * j + 1, 2 * j, 2 * j + 1, 2 * j, 2 * j + 1, 2 * j,      \
		    2 * j + 1, 2 * j, 2 * j + 1, 2 * j, 2 * j + 1, 2 * j,      \
		    2 * j + 1                                                  \
	}
    K4(0), K4(1), K4(2), K4(3), K4(4), K4(5), K4(6), K4(7),
#undef K4
};

AVX2 static void isum_q4_K_avx2(const struct blk_q4_K *w,
                                const struct vblk_q8k *v, int64_t nb,
                                int32_t *isum, int32_t *imin)
{
	const __m256i m4 = _mm256_set1_epi8(0x0F);

	for (int64_t i = 0; i < nb; i++) {
		uint32_t u[3];

		/* q4k_unpack in registers: int16 lanes 0..7 scales, 8..15 mins
		 */
		memcpy(u, w[i].scales, 12);
		const uint32_t u3 = ((u[2] >> 4) & 0x0f0f0f0fu) |
		                    (((u[1] >> 6) & 0x03030303u) << 4);
		const uint32_t u2 = u[1] & 0x3f3f3f3fu;
		const uint32_t u1 =
		    (u[2] & 0x0f0f0f0fu) | (((u[0] >> 6) & 0x03030303u) << 4);
		const uint32_t u0 = u[0] & 0x3f3f3f3fu;
		const __m256i sm = _mm256_cvtepu8_epi16(
		    _mm_set_epi32((int)u3, (int)u2, (int)u1, (int)u0));
		const __m256i scales =
		    _mm256_broadcastsi128_si256(_mm256_castsi256_si128(sm));

		/* imin: mins . (sums of 32 activations), as pairs of bsums */
		{
			const __m256i bs =
			    _mm256_loadu_si256((const __m256i *)v[i].bsums);
			const __m128i b8 =
			    _mm_hadd_epi16(_mm256_castsi256_si128(bs),
			                   _mm256_extracti128_si256(bs, 1));
			__m128i t =
			    _mm_madd_epi16(_mm256_extracti128_si256(sm, 1), b8);

			t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4E));
			t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1));
			imin[i] = _mm_cvtsi128_si32(t);
		}
		__m256i acc = _mm256_setzero_si256(),
		        acc2 = _mm256_setzero_si256();

		_Pragma("GCC unroll 4") for (int j = 0; j < 4; j++)
		{
			const __m256i q = _mm256_loadu_si256(
			    (const __m256i *)(w[i].qs + 32 * j));
			const __m256i xl = _mm256_loadu_si256(
			    (const __m256i *)(v[i].qs + 64 * j));
			const __m256i xh = _mm256_loadu_si256(
			    (const __m256i *)(v[i].qs + 64 * j + 32));
			const __m256i pl =
			    _mm256_maddubs_epi16(_mm256_and_si256(q, m4), xl);
			const __m256i ph = _mm256_maddubs_epi16(
			    _mm256_and_si256(_mm256_srli_epi16(q, 4), m4), xh);
			const __m256i sl = _mm256_shuffle_epi8(
			    scales,
			    _mm256_load_si256(
			        (const __m256i *)avx2_k4_shuffle[2 * j]));
			const __m256i sh = _mm256_shuffle_epi8(
			    scales,
			    _mm256_load_si256(
			        (const __m256i *)avx2_k4_shuffle[2 * j + 1]));

			acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pl, sl));
			acc2 =
			    _mm256_add_epi32(acc2, _mm256_madd_epi16(ph, sh));
		}
		isum[i] = avx2_hsum_i32(_mm256_add_epi32(acc, acc2));
	}
}

/* Shuffles for _mm_shuffle_epi8: row G repeats bytes 2G and 2G+1 eight
 * times each (widened, int16 lanes 0..7 = byte 2G, lanes 8..15 = 2G+1). */
static const uint8_t avx2_pair_shuffle[8][16] __attribute__((aligned(16))) = {
#define PAIR(g)                                                                \
	{                                                                      \
		2 * g, 2 * g, 2 * g, 2 * g, 2 * g, 2 * g, 2 * g, 2 * g,        \
		    2 * g + 1, 2 * g + 1, 2 * g + 1, 2 * g + 1, 2 * g + 1,     \
		    2 * g + 1, 2 * g + 1, 2 * g + 1                            \
	}
    PAIR(0), PAIR(1), PAIR(2), PAIR(3), PAIR(4), PAIR(5), PAIR(6), PAIR(7),
#undef PAIR
};

AVX2 static void isum_q6_K_avx2(const struct blk_q6_K *w,
                                const struct vblk_q8k *v, int64_t nb,
                                int32_t *isum)
{
	const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);

	for (int64_t i = 0; i < nb; i++) {
		const __m128i sc8 =
		    _mm_loadu_si128((const __m128i *)w[i].scales);
		/* weights as q + 32 in 0..63 (unsigned): subtract 32 * scale .
		 * bsums */
		__m256i acc = _mm256_madd_epi16(
		    _mm256_cvtepi8_epi16(sc8),
		    _mm256_loadu_si256((const __m256i *)v[i].bsums));

		acc = _mm256_sub_epi32(_mm256_setzero_si256(),
		                       _mm256_slli_epi32(acc, 5));
		__m256i acc2 = _mm256_setzero_si256();

		_Pragma("GCC unroll 2") for (int h = 0; h < 2; h++)
		{
			const uint8_t *ql = w[i].ql + 64 * h,
			              *qh = w[i].qh + 32 * h;
			const int8_t *x = v[i].qs + 128 * h;
			const __m256i l0 =
			    _mm256_loadu_si256((const __m256i *)ql);
			const __m256i l1 =
			    _mm256_loadu_si256((const __m256i *)(ql + 32));
			const __m256i hb =
			    _mm256_loadu_si256((const __m256i *)qh);
			__m256i q[4];

			q[0] = _mm256_or_si256(
			    _mm256_and_si256(l0, m4),
			    _mm256_slli_epi16(_mm256_and_si256(hb, m2), 4));
			q[1] = _mm256_or_si256(
			    _mm256_and_si256(l1, m4),
			    _mm256_slli_epi16(
			        _mm256_and_si256(_mm256_srli_epi16(hb, 2), m2),
			        4));
			q[2] = _mm256_or_si256(
			    _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
			    _mm256_slli_epi16(
			        _mm256_and_si256(_mm256_srli_epi16(hb, 4), m2),
			        4));
			q[3] = _mm256_or_si256(
			    _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
			    _mm256_and_si256(_mm256_srli_epi16(hb, 2),
			                     _mm256_set1_epi8(0x30)));
			_Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)
			{
				const __m256i p = _mm256_maddubs_epi16(
				    q[k], _mm256_loadu_si256(
				              (const __m256i *)(x + 32 * k)));
				const __m256i scv =
				    _mm256_cvtepi8_epi16(_mm_shuffle_epi8(
				        sc8,
				        _mm_load_si128(
				            (const __m128i *)
				                avx2_pair_shuffle[4 * h + k])));

				if (k % 2)
					acc2 = _mm256_add_epi32(
					    acc2, _mm256_madd_epi16(p, scv));
				else
					acc = _mm256_add_epi32(
					    acc, _mm256_madd_epi16(p, scv));
			}
		}
		isum[i] = avx2_hsum_i32(_mm256_add_epi32(acc, acc2));
	}
}

AVX2 static void isum_q5_K_avx2(const struct blk_q5_K *w,
                                const struct vblk_q8k *v, int64_t nb,
                                int32_t *isum, int32_t *imin)
{
	const __m256i m4 = _mm256_set1_epi8(0x0F), m1 = _mm256_set1_epi8(0x01);

	for (int64_t i = 0; i < nb; i++) {
		uint32_t u[3];

		/* as Q4_K: int16 lanes 0..7 scales, 8..15 mins */
		memcpy(u, w[i].scales, 12);
		const uint32_t u3 = ((u[2] >> 4) & 0x0f0f0f0fu) |
		                    (((u[1] >> 6) & 0x03030303u) << 4);
		const uint32_t u2 = u[1] & 0x3f3f3f3fu;
		const uint32_t u1 =
		    (u[2] & 0x0f0f0f0fu) | (((u[0] >> 6) & 0x03030303u) << 4);
		const uint32_t u0 = u[0] & 0x3f3f3f3fu;
		const __m256i sm = _mm256_cvtepu8_epi16(
		    _mm_set_epi32((int)u3, (int)u2, (int)u1, (int)u0));
		const __m256i scales =
		    _mm256_broadcastsi128_si256(_mm256_castsi256_si128(sm));
		const __m256i hb = _mm256_loadu_si256((const __m256i *)w[i].qh);

		{
			const __m256i bs =
			    _mm256_loadu_si256((const __m256i *)v[i].bsums);
			const __m128i b8 =
			    _mm_hadd_epi16(_mm256_castsi256_si128(bs),
			                   _mm256_extracti128_si256(bs, 1));
			__m128i t =
			    _mm_madd_epi16(_mm256_extracti128_si256(sm, 1), b8);

			t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4E));
			t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1));
			imin[i] = _mm_cvtsi128_si32(t);
		}
		__m256i acc = _mm256_setzero_si256(),
		        acc2 = _mm256_setzero_si256();

		_Pragma("GCC unroll 4") for (int j = 0; j < 4; j++)
		{
			const __m256i q = _mm256_loadu_si256(
			    (const __m256i *)(w[i].qs + 32 * j));
			const __m256i hl = _mm256_slli_epi16(
			    _mm256_and_si256(_mm256_srli_epi16(hb, 2 * j), m1),
			    4);
			const __m256i hh = _mm256_slli_epi16(
			    _mm256_and_si256(_mm256_srli_epi16(hb, 2 * j + 1),
			                     m1),
			    4);
			const __m256i ql =
			    _mm256_or_si256(_mm256_and_si256(q, m4), hl);
			const __m256i qv = _mm256_or_si256(
			    _mm256_and_si256(_mm256_srli_epi16(q, 4), m4), hh);
			const __m256i pl = _mm256_maddubs_epi16(
			    ql, _mm256_loadu_si256(
			            (const __m256i *)(v[i].qs + 64 * j)));
			const __m256i ph = _mm256_maddubs_epi16(
			    qv, _mm256_loadu_si256(
			            (const __m256i *)(v[i].qs + 64 * j + 32)));
			const __m256i sl = _mm256_shuffle_epi8(
			    scales,
			    _mm256_load_si256(
			        (const __m256i *)avx2_k4_shuffle[2 * j]));
			const __m256i sh = _mm256_shuffle_epi8(
			    scales,
			    _mm256_load_si256(
			        (const __m256i *)avx2_k4_shuffle[2 * j + 1]));

			acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pl, sl));
			acc2 =
			    _mm256_add_epi32(acc2, _mm256_madd_epi16(ph, sh));
		}
		isum[i] = avx2_hsum_i32(_mm256_add_epi32(acc, acc2));
	}
}

/*
 * Q2_K and Q3_K: 32 quants at a time (bytes 0..15 in one 16-element
 * sub-block, 16..31 in the next), scaled per sub-block with the pair
 * shuffles. SC8 holds the 16 scales as int8.
 */
AVX2 static inline __m256i avx2_q2q3_group(__m256i q, const int8_t *x,
                                           __m128i sc8, int g)
{
	const __m256i p =
	    _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)x));
	const __m256i scv = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(
	    sc8, _mm_load_si128((const __m128i *)avx2_pair_shuffle[g])));

	return _mm256_madd_epi16(p, scv);
}

AVX2 static void isum_q2_K_avx2(const struct blk_q2_K *w,
                                const struct vblk_q8k *v, int64_t nb,
                                int32_t *isum, int32_t *imin)
{
	const __m256i m3 = _mm256_set1_epi8(0x03);

	for (int64_t i = 0; i < nb; i++) {
		const __m128i raw =
		    _mm_loadu_si128((const __m128i *)w[i].scales);
		const __m128i sc8 = _mm_and_si128(raw, _mm_set1_epi8(0x0F));
		const __m128i mn8 =
		    _mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0x0F));
		__m256i acc = _mm256_setzero_si256();

		imin[i] = avx2_hsum_i32(_mm256_madd_epi16(
		    _mm256_cvtepu8_epi16(mn8),
		    _mm256_loadu_si256((const __m256i *)v[i].bsums)));
		for (int h = 0; h < 2; h++) {
			const __m256i q = _mm256_loadu_si256(
			    (const __m256i *)(w[i].qs + 32 * h));

			_Pragma("GCC unroll 4") for (int j = 0; j < 4; j++)
			    acc = _mm256_add_epi32(
			        acc, avx2_q2q3_group(
			                 _mm256_and_si256(
			                     _mm256_srli_epi16(q, 2 * j), m3),
			                 v[i].qs + 128 * h + 32 * j, sc8,
			                 4 * h + j));
		}
		isum[i] = avx2_hsum_i32(acc);
	}
}

AVX2 static void isum_q3_K_avx2(const struct blk_q3_K *w,
                                const struct vblk_q8k *v, int64_t nb,
                                int32_t *isum)
{
	const __m256i m3 = _mm256_set1_epi8(0x03), m1 = _mm256_set1_epi8(0x01);

	for (int64_t i = 0; i < nb; i++) {
		uint32_t a[3];

		/* q3k_scales in registers (ggml's word shuffle), minus 32 */
		memcpy(a, w[i].scales, 12);
		const uint32_t s0 =
		    (a[0] & 0x0f0f0f0fu) | ((a[2] & 0x03030303u) << 4);
		const uint32_t s1 =
		    (a[1] & 0x0f0f0f0fu) | (((a[2] >> 2) & 0x03030303u) << 4);
		const uint32_t s2 = ((a[0] >> 4) & 0x0f0f0f0fu) |
		                    (((a[2] >> 4) & 0x03030303u) << 4);
		const uint32_t s3 = ((a[1] >> 4) & 0x0f0f0f0fu) |
		                    (((a[2] >> 6) & 0x03030303u) << 4);
		const __m128i sc8 = _mm_sub_epi8(
		    _mm_set_epi32((int)s3, (int)s2, (int)s1, (int)s0),
		    _mm_set1_epi8(32));
		const __m256i hb =
		    _mm256_loadu_si256((const __m256i *)w[i].hmask);
		/* weights as q + 4 in 0..7: subtract 4 * scale . bsums */
		__m256i acc = _mm256_madd_epi16(
		    _mm256_cvtepi8_epi16(sc8),
		    _mm256_loadu_si256((const __m256i *)v[i].bsums));

		acc = _mm256_sub_epi32(_mm256_setzero_si256(),
		                       _mm256_slli_epi32(acc, 2));
		for (int h = 0; h < 2; h++) {
			const __m256i q = _mm256_loadu_si256(
			    (const __m256i *)(w[i].qs + 32 * h));

			_Pragma("GCC unroll 4") for (int j = 0; j < 4; j++)
			{
				const __m256i lo = _mm256_and_si256(
				    _mm256_srli_epi16(q, 2 * j), m3);
				const __m256i hi = _mm256_slli_epi16(
				    _mm256_and_si256(
				        _mm256_srli_epi16(hb, 4 * h + j), m1),
				    2);

				acc = _mm256_add_epi32(
				    acc,
				    avx2_q2q3_group(_mm256_or_si256(lo, hi),
				                    v[i].qs + 128 * h + 32 * j,
				                    sc8, 4 * h + j));
			}
		}
		isum[i] = avx2_hsum_i32(acc);
	}
}

/* The float formats: the portable code, compiled for AVX2 + F16C. */
AVX2 static float dot_f32_avx2(const void *row, const void *vec, int64_t n)
{
	return dot_f32_body(row, vec, n);
}

/* dot_f32_body's tree over the 16 running sums held as A0 (sums 0..7) and
 * A1 (8..15): the same additions, lane for lane. */
AVX2 static inline float avx2_tree16(__m256 a0, __m256 a1)
{
	const __m256 s8 = _mm256_add_ps(a0, a1); /* acc[j] += acc[j + 8] */
	const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8),
	                             _mm256_extractf128_ps(s8, 1));
	const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));

	return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

/*
 * F32 rows . one float vector, N a multiple of 16: dot_f32_body's products
 * and sums for four rows at once (independent chains, so the loads of
 * the rows, which in attention come from memory, overlap), the next rows
 * prefetched. Returns false (nothing written) for other N.
 */
AVX2 static bool dot_rows_f32_avx2(const float *rows, size_t stride,
                                   int64_t nrows, const float *x, int64_t n,
                                   float *out, size_t out_stride)
{
	int64_t r = 0;

	if (n % FLANES != 0)
		return false;
	for (; r + 4 <= nrows; r += 4) {
		const float *w = rows + (size_t)r * stride;
		__m256 a[4][2];

		for (int k = 0; k < 4; k++) {
			a[k][0] = _mm256_setzero_ps();
			a[k][1] = _mm256_setzero_ps();
			if (r + 4 + k < nrows)
				for (int64_t i = 0; i < n; i += 16)
					_mm_prefetch(
					    (const char *)(w +
					                   (4 + k) * stride +
					                   i),
					    _MM_HINT_T0);
		}
		for (int64_t i = 0; i < n; i += FLANES) {
			const __m256 x0 = _mm256_loadu_ps(x + i);
			const __m256 x1 = _mm256_loadu_ps(x + i + 8);

			_Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)
			{
				const float *wk = w + (size_t)k * stride + i;

				a[k][0] = _mm256_add_ps(
				    a[k][0],
				    _mm256_mul_ps(_mm256_loadu_ps(wk), x0));
				a[k][1] = _mm256_add_ps(
				    a[k][1],
				    _mm256_mul_ps(_mm256_loadu_ps(wk + 8), x1));
			}
		}
		for (int k = 0; k < 4; k++)
			out[(size_t)(r + k) * out_stride] =
			    avx2_tree16(a[k][0], a[k][1]);
	}
	for (; r < nrows; r++) {
		const float *w = rows + (size_t)r * stride;
		__m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();

		for (int64_t i = 0; i < n; i += FLANES) {
			a0 = _mm256_add_ps(
			    a0, _mm256_mul_ps(_mm256_loadu_ps(w + i),
			                      _mm256_loadu_ps(x + i)));
			a1 = _mm256_add_ps(
			    a1, _mm256_mul_ps(_mm256_loadu_ps(w + i + 8),
			                      _mm256_loadu_ps(x + i + 8)));
		}
		out[(size_t)r * out_stride] = avx2_tree16(a0, a1);
	}
	return true;
}

/* F16 rows: dot_f16_body's 16 running sums as two registers (the same
 * products and sums: multiply then add, no FMA), then its tail and tree. */
AVX2 static float dot_f16_avx2(const void *row, const void *vec, int64_t n)
{
	const uint16_t *w = row;
	const float *x = vec;
	__m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
	float acc[FLANES];
	int64_t i = 0;

	for (; i + FLANES <= n; i += FLANES) {
		const __m256 w0 =
		    _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + i)));
		const __m256 w1 = _mm256_cvtph_ps(
		    _mm_loadu_si128((const __m128i *)(w + i + 8)));

		a0 = _mm256_add_ps(a0,
		                   _mm256_mul_ps(w0, _mm256_loadu_ps(x + i)));
		a1 = _mm256_add_ps(
		    a1, _mm256_mul_ps(w1, _mm256_loadu_ps(x + i + 8)));
	}
	_mm256_storeu_ps(acc, a0);
	_mm256_storeu_ps(acc + 8, a1);
	for (int k = 0; i < n; i++, k++)
		acc[k] += _cvtsh_ss(w[i]) * x[i];
	for (int k = FLANES / 2; k > 0; k /= 2)
		for (int j = 0; j < k; j++)
			acc[j] += acc[j + k];
	return acc[0];
}

AVX2 static float dot_bf16_avx2(const void *row, const void *vec, int64_t n)
{
	return dot_bf16_body(row, vec, n);
}

/* The float part of the K-quant dots, with F16C conversions. */
AVX2 static float dot_k_avx2(isumk_fn kern, int bs, int d_off, int dmin_off,
                             const uint8_t *row, const struct vblk_q8k *v,
                             int64_t nb)
{
	DOTK_BODY(_cvtsh_ss);
}

DEFINE_DOTK2(dot_q2_K_avx2, struct blk_q2_K, isum_q2_K_avx2, dot_k_avx2)
DEFINE_DOTK1(dot_q3_K_avx2, struct blk_q3_K, isum_q3_K_avx2, dot_k_avx2)
DEFINE_DOTK2(dot_q4_K_avx2, struct blk_q4_K, isum_q4_K_avx2, dot_k_avx2)
DEFINE_DOTK2(dot_q5_K_avx2, struct blk_q5_K, isum_q5_K_avx2, dot_k_avx2)
DEFINE_DOTK1(dot_q6_K_avx2, struct blk_q6_K, isum_q6_K_avx2, dot_k_avx2)

/*
 * quant_f32_mix: 32 outputs at a time held in four registers over all the
 * rows (one pass over the outputs per 32, not per row); each lane does the
 * portable code's multiply then add, in its order.
 */
AVX2 static void mix_f32_avx2(float *out, const float *a, const float *rows,
                              size_t stride, int64_t nrows, int64_t n)
{
	int64_t e = 0;

	for (; e + 64 <= n; e += 64) {
		__m256 o[8];
		const float *v = rows + e;

		for (int k = 0; k < 8; k++)
			o[k] = _mm256_setzero_ps();
		for (int64_t i = 0; i < nrows; i++, v += stride) {
			const __m256 ai = _mm256_broadcast_ss(a + i);

			_mm_prefetch((const char *)(v + 4 * stride),
			             _MM_HINT_T0);
			_mm_prefetch((const char *)(v + 4 * stride + 32),
			             _MM_HINT_T0);
			_Pragma("GCC unroll 8") for (int k = 0; k < 8; k++)
			    o[k] = _mm256_add_ps(
			        o[k],
			        _mm256_mul_ps(ai, _mm256_loadu_ps(v + 8 * k)));
		}
		for (int k = 0; k < 8; k++)
			_mm256_storeu_ps(out + e + 8 * k, o[k]);
	}
	for (; e + 32 <= n; e += 32) {
		__m256 o0 = _mm256_setzero_ps(), o1 = _mm256_setzero_ps();
		__m256 o2 = _mm256_setzero_ps(), o3 = _mm256_setzero_ps();
		const float *v = rows + e;

		for (int64_t i = 0; i < nrows; i++, v += stride) {
			const __m256 ai = _mm256_broadcast_ss(a + i);

			o0 = _mm256_add_ps(
			    o0, _mm256_mul_ps(ai, _mm256_loadu_ps(v)));
			o1 = _mm256_add_ps(
			    o1, _mm256_mul_ps(ai, _mm256_loadu_ps(v + 8)));
			o2 = _mm256_add_ps(
			    o2, _mm256_mul_ps(ai, _mm256_loadu_ps(v + 16)));
			o3 = _mm256_add_ps(
			    o3, _mm256_mul_ps(ai, _mm256_loadu_ps(v + 24)));
		}
		_mm256_storeu_ps(out + e, o0);
		_mm256_storeu_ps(out + e + 8, o1);
		_mm256_storeu_ps(out + e + 16, o2);
		_mm256_storeu_ps(out + e + 24, o3);
	}
	for (; e + 8 <= n; e += 8) {
		__m256 o = _mm256_setzero_ps();
		const float *v = rows + e;

		for (int64_t i = 0; i < nrows; i++, v += stride)
			o = _mm256_add_ps(
			    o, _mm256_mul_ps(_mm256_broadcast_ss(a + i),
			                     _mm256_loadu_ps(v)));
		_mm256_storeu_ps(out + e, o);
	}
	if (e < n)
		mix_f32_c(out + e, a, rows + e, stride, nrows, n - e);
}

/*
 * quantize_i8 for K a multiple of 32, eight floats at a time with the
 * same float operations: amax (the same maximum for finite x; a
 * non-finite x goes to the portable code, which returns NaN), d = amax /
 * 127, id = 1 / d, then roundf(x * id), which rounds halves away from
 * zero: t = trunc(p), and t + sign(p) where |p - t| >= 0.5 (p - t is
 * exact), clamped to +-127.
 */
AVX2 static float quantize_i8_avx2(const float *x, int k, int8_t *q)
{
	const __m256 sign = _mm256_set1_ps(-0.0f);
	const __m256 big = _mm256_set1_ps(FLT_MAX);
	__m256 mx = _mm256_setzero_ps(),
	       fin = _mm256_castsi256_ps(_mm256_set1_epi32(-1));

	if (k % 32 != 0)
		return quantize_i8(x, k, q);
	for (int j = 0; j < k; j += 8) {
		const __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + j));

		mx = _mm256_max_ps(mx, a);
		/* false for inf and NaN, as in quantize_i8 */
		fin = _mm256_and_ps(fin, _mm256_cmp_ps(a, big, _CMP_LE_OQ));
	}
	if (_mm256_movemask_ps(fin) != 0xFF)
		return quantize_i8(x, k, q);
	__m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx),
	                       _mm256_extractf128_ps(mx, 1));
	m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
	m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
	const float amax = _mm_cvtss_f32(m4);

	const float d = amax / 127.0f;
	const float id = d != 0.0f ? 1.0f / d : 0.0f;
	const __m256 vid = _mm256_set1_ps(id), half = _mm256_set1_ps(0.5f);
	const __m256 one = _mm256_set1_ps(1.0f), lim = _mm256_set1_ps(127.0f);

	for (int j = 0; j < k; j += 32) {
		__m256i iv[4];

		for (int h = 0; h < 4; h++) {
			const __m256 p =
			    _mm256_mul_ps(_mm256_loadu_ps(x + j + 8 * h), vid);
			__m256 t = _mm256_round_ps(p, _MM_FROUND_TO_ZERO |
			                                  _MM_FROUND_NO_EXC);
			const __m256 up = _mm256_cmp_ps(
			    _mm256_andnot_ps(sign, _mm256_sub_ps(p, t)), half,
			    _CMP_GE_OQ);

			t = _mm256_add_ps(
			    t,
			    _mm256_and_ps(
			        up, _mm256_or_ps(_mm256_and_ps(sign, p), one)));
			t = _mm256_min_ps(
			    _mm256_max_ps(
			        t, _mm256_sub_ps(_mm256_setzero_ps(), lim)),
			    lim);
			iv[h] = _mm256_cvtps_epi32(t);
		}
		/* packs work per 128-bit half: restore element order */
		const __m256i w01 = _mm256_packs_epi32(iv[0], iv[1]);
		const __m256i w23 = _mm256_packs_epi32(iv[2], iv[3]);
		const __m256i b = _mm256_packs_epi16(w01, w23);

		_mm256_storeu_si256(
		    (__m256i *)(q + j),
		    _mm256_permutevar8x32_epi32(
		        b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
	}
	return d;
}

static const struct kernels kernels_avx2 = {
    .mix = mix_f32_avx2,
    .quantize = quantize_i8_avx2,
    .dot = {[QTYPE_F32] = dot_f32_avx2,
            [QTYPE_F16] = dot_f16_avx2,
            [QTYPE_BF16] = dot_bf16_avx2,
            [QTYPE_Q4_0] = dot_q4_0_avx2,
            [QTYPE_Q4_1] = dot_q4_1_avx2,
            [QTYPE_Q5_0] = dot_q5_0_avx2,
            [QTYPE_Q5_1] = dot_q5_1_avx2,
            [QTYPE_Q8_0] = dot_q8_0_avx2,
            [QTYPE_Q2_K] = dot_q2_K_avx2,
            [QTYPE_Q3_K] = dot_q3_K_avx2,
            [QTYPE_Q4_K] = dot_q4_K_avx2,
            [QTYPE_Q5_K] = dot_q5_K_avx2,
            [QTYPE_Q6_K] = dot_q6_K_avx2,
            QUANT_IQ_TYPES(IQ_KERNEL_AVX2)},
};

#undef AVX2
#endif /* QUANT_HAVE_AVX2 */

#endif /* PARLEY_QUANT_AVX2_H */

/*
 * quant_avx512.h - the AVX-512 (with VNNI) kernels of quant.c (included by
 * quant.c only, after quant_avx2.h, whose helpers it uses).
 *
 * Compiled with a target attribute and chosen at run time (quant_kernels)
 * when the CPU has AVX-512 F, BW, VL and VNNI; otherwise the AVX2 set is
 * used. Same promise as the AVX2 kernels: the portable kernels' bits
 * exactly, because
 *   - the integer block sums are exact: VPDPBUSD multiplies unsigned bytes
 *     by signed bytes and adds groups of four into int32 lanes without
 *     saturation; signed weights are made unsigned by an offset (q + 8 for
 *     Q4_0, q + 128 for Q8_0) whose contribution, offset * (sum of the
 *     activation quants), is subtracted again in integers;
 *   - the float32 operations on the block sums are the AVX2 kernels' (the
 *     same eight running sums, multiply then add, the same tail and tree);
 *   - the float dots keep dot_f32_body's 16 running sums as the 16 lanes of
 *     one register and finish with its pairwise tree.
 * The integer products of two blocks fill one 512-bit register (64 weight
 * and 64 activation bytes), twice the AVX2 width.
 *
 * t_quant compares every one of these kernels (and quant_iq.c's AVX-512
 * ones: IQ4_NL, MXFP4) with the portable ones bit for bit, and says
 * "skipped" where the CPU lacks AVX-512 (run: dev-2core, AVX-512 F, BW,
 * VL and VNNI).
 */
#ifndef PARLEY_QUANT_AVX512_H
#define PARLEY_QUANT_AVX512_H

#if defined(QUANT_HAVE_AVX2) && defined(QUANT_CAN_AVX512)
#define QUANT_HAVE_AVX512 1

#define AVX512 QUANT_AVX512

/* Products of blocks W[0] and W[1] with the 64 activation bytes X: int32
 * lanes 0..7 sum to block 0's exact integer dot, lanes 8..15 block 1's. */
AVX512 static inline __m512i avx512_prod2_q4_0(const struct blk_q4_0 *w,
                                               __m512i x)
{
	const __m512i p = avx512_dot_us(avx512_nibbles2(w[0].qs, w[1].qs), x);

	return _mm512_sub_epi32(p, _mm512_slli_epi32(avx512_xsum4(x), 3));
}

AVX512 static inline __m512i avx512_prod2_q4_1(const struct blk_q4_1 *w,
                                               __m512i x)
{
	return avx512_dot_us(avx512_nibbles2(w[0].qs, w[1].qs), x);
}

AVX512 static inline __m512i avx512_prod2_q8_0(const struct blk_q8_0 *w,
                                               __m512i x)
{
	/* q + 128 as an unsigned byte is q with its top bit flipped */
	const __m512i q =
	    _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(
	                           (const __m256i *)w[0].qs)),
	                       _mm256_loadu_si256((const __m256i *)w[1].qs), 1);
	const __m512i p =
	    avx512_dot_us(_mm512_xor_si512(q, _mm512_set1_epi8((char)0x80)), x);

	return _mm512_sub_epi32(p, _mm512_slli_epi32(avx512_xsum4(x), 7));
}

/*
 * dot_fn NAME for the 32-element format BLK: DEFINE_DOT32_AVX2 with the
 * integer products of eight blocks made two at a time by PROD2; TAIL is
 * the AVX2 kernel, which gives the same bits, for rows of fewer than
 * eight blocks.
 */
#define DEFINE_DOT32_AVX512(NAME, BLK, PROD2, PROD, HAS_MIN)                   \
	AVX512 static float NAME(const void *row, const void *vec, int64_t n)  \
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
			_Pragma("GCC unroll 4") for (int k = 0; k < 8; k += 2) \
			{                                                      \
				const __m512i pp =                             \
				    PROD2(&w[i + k],                           \
				          _mm512_loadu_si512(v.qs[i + k]));    \
                                                                               \
				p[k] = _mm512_castsi512_si256(pp);             \
				p[k + 1] = _mm512_extracti64x4_epi64(pp, 1);   \
			}                                                      \
			for (int k = 0; k < 8; k++) {                          \
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

DEFINE_DOT32_AVX512(dot_q4_0_avx512, struct blk_q4_0, avx512_prod2_q4_0,
                    avx2_prod_q4_0, 0)
DEFINE_DOT32_AVX512(dot_q4_1_avx512, struct blk_q4_1, avx512_prod2_q4_1,
                    avx2_prod_q4_1, 1)
DEFINE_DOT32_AVX512(dot_q8_0_avx512, struct blk_q8_0, avx512_prod2_q8_0,
                    avx2_prod_q8_0, 0)

/* dot_f32_body's tree over its 16 running sums held in A (lane k = sum
 * k): the same additions as avx2_tree16. */
AVX512 static inline float avx512_tree16(__m512 a)
{
	return avx2_tree16(
	    _mm512_castps512_ps256(a),
	    _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
}

/* F32 rows: dot_f32_body with its 16 running sums in one register, four
 * rows at a time (dot_rows_f32_avx2 at twice the width). False (nothing
 * written) when N is not a multiple of 16. */
AVX512 static bool dot_rows_f32_avx512(const float *rows, size_t stride,
                                       int64_t nrows, const float *x, int64_t n,
                                       float *out, size_t out_stride)
{
	int64_t r = 0;

	if (n % FLANES != 0)
		return false;
	for (; r + 4 <= nrows; r += 4) {
		const float *w = rows + (size_t)r * stride;
		__m512 a[4];

		for (int k = 0; k < 4; k++) {
			a[k] = _mm512_setzero_ps();
			if (r + 4 + k < nrows)
				for (int64_t i = 0; i < n; i += 16)
					_mm_prefetch(
					    (const char *)(w +
					                   (4 + k) * stride +
					                   i),
					    _MM_HINT_T0);
		}
		for (int64_t i = 0; i < n; i += FLANES) {
			const __m512 xv = _mm512_loadu_ps(x + i);

			_Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)
			    a[k] = _mm512_add_ps(
			        a[k],
			        _mm512_mul_ps(
			            _mm512_loadu_ps(w + (size_t)k * stride + i),
			            xv));
		}
		for (int k = 0; k < 4; k++)
			out[(size_t)(r + k) * out_stride] = avx512_tree16(a[k]);
	}
	for (; r < nrows; r++) {
		const float *w = rows + (size_t)r * stride;
		__m512 a0 = _mm512_setzero_ps();

		for (int64_t i = 0; i < n; i += FLANES)
			a0 = _mm512_add_ps(
			    a0, _mm512_mul_ps(_mm512_loadu_ps(w + i),
			                      _mm512_loadu_ps(x + i)));
		out[(size_t)r * out_stride] = avx512_tree16(a0);
	}
	return true;
}

/* dot_f32 for one row (the n % 16 tail as the portable code does it). */
AVX512 static float dot_f32_avx512(const void *row, const void *vec, int64_t n)
{
	float out;

	if (dot_rows_f32_avx512(row, 0, 1, vec, n, &out, 1))
		return out;
	return dot_f32_body(row, vec, n);
}

static const struct kernels kernels_avx512 = {
    .mix = mix_f32_avx2,
    .quantize = quantize_i8_avx2,
    .dot = {[QTYPE_F32] = dot_f32_avx512,
            [QTYPE_F16] = dot_f16_avx2,
            [QTYPE_BF16] = dot_bf16_avx2,
            [QTYPE_Q4_0] = dot_q4_0_avx512,
            [QTYPE_Q4_1] = dot_q4_1_avx512,
            [QTYPE_Q5_0] = dot_q5_0_avx2,
            [QTYPE_Q5_1] = dot_q5_1_avx2,
            [QTYPE_Q8_0] = dot_q8_0_avx512,
            [QTYPE_Q2_K] = dot_q2_K_avx2,
            [QTYPE_Q3_K] = dot_q3_K_avx2,
            [QTYPE_Q4_K] = dot_q4_K_avx2,
            [QTYPE_Q5_K] = dot_q5_K_avx2,
            [QTYPE_Q6_K] = dot_q6_K_avx2,
            QUANT_IQ_TYPES(IQ_KERNEL_AVX512)},
};

#undef AVX512
#endif /* AVX2 kernels present, GCC 9 or later */

#endif /* PARLEY_QUANT_AVX512_H */

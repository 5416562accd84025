/*
 * f16.h - exact conversions between IEEE half / bfloat16 and float.
 *
 * NOTES ON THE DESIGN
 *
 * 1. f16_to_f32 is exact for every half value (normals, subnormals, zeros,
 *    infinities; NaNs stay NaN) and uses only integer and float operations
 *    that compilers vectorize; it is ggml's portable conversion.
 * 2. bf16_to_f32 is exact by construction (a bfloat16 is the top half of a
 *    float).
 * 3. f32_to_f16 rounds to nearest even, as the hardware and numpy do; used
 *    by tests and by quantizers, never on a hot path.
 */
#ifndef PARLEY_F16_H
#define PARLEY_F16_H

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" { /* included by the CUDA backend */
#endif

/* The float whose bits are W. */
static inline float f16_bits_f32(uint32_t w)
{
	float f;

	memcpy(&f, &w, sizeof f);
	return f;
}

/* The bits of float F. */
static inline uint32_t f16_f32_bits(float f)
{
	uint32_t w;

	memcpy(&w, &f, sizeof w);
	return w;
}

/* Half H (IEEE binary16 bits) as a float, exactly. */
static inline float f16_to_f32(uint16_t h)
{
	const uint32_t w = (uint32_t)h << 16;
	const uint32_t sign = w & 0x80000000u;
	const uint32_t two_w = w + w;
	/* normal: move exponent and mantissa in place, rebias by 2^-112 */
	const float norm =
	    f16_bits_f32((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
	/* subnormal: mantissa * 2^-24, built as (0.5 + m*2^-24) - 0.5 */
	const float denorm = f16_bits_f32((two_w >> 17) | (126u << 23)) - 0.5f;
	const uint32_t bits =
	    two_w < (1u << 27) ? f16_f32_bits(denorm) : f16_f32_bits(norm);

	return f16_bits_f32(sign | bits);
}

/* Bfloat16 H as a float, exactly. */
static inline float bf16_to_f32(uint16_t h)
{
	return f16_bits_f32((uint32_t)h << 16);
}

/* Float F as half bits, rounded to nearest even (overflow gives inf). */
static inline uint16_t f32_to_f16(float f)
{
	const uint32_t w = f16_f32_bits(f);
	const uint32_t sign = (w >> 16) & 0x8000u;
	const uint32_t aw = w & 0x7FFFFFFFu;
	uint32_t e, m, r;

	if (aw > 0x7F800000u) /* NaN: keep it quiet */
		return (uint16_t)(sign | 0x7E00u | ((aw >> 13) & 0x3FFu));
	if (aw >= 0x477FF000u) /* rounds to >= 65520: infinity */
		return (uint16_t)(sign | 0x7C00u);
	if (aw < 0x38800000u) {       /* below 2^-14: subnormal half or zero */
		if (aw < 0x33000000u) /* below 2^-25: rounds to zero */
			return (uint16_t)sign;
		e = aw >> 23;
		m = (aw & 0x7FFFFFu) | 0x800000u;
		/* value = m * 2^(e-150); half subnormal unit 2^-24 */
		uint32_t shift = 126 - e; /* 14..24 */
		r = m >> shift;
		uint32_t rem = m & ((1u << shift) - 1);
		uint32_t half = 1u << (shift - 1);
		if (rem > half || (rem == half && (r & 1)))
			r++;
		return (uint16_t)(sign | r);
	}
	/* normal: rebias exponent, round mantissa from 23 to 10 bits */
	r = ((aw >> 13) - (112u << 10));
	m = aw & 0x1FFFu;
	if (m > 0x1000u || (m == 0x1000u && (r & 1)))
		r++;
	return (uint16_t)(sign | r);
}

#ifdef __cplusplus
}
#endif

#endif /* PARLEY_F16_H */

/*
 * quant_iq.c - ggml's i-quants (IQ1_S .. IQ4_XS), ternary (TQ1_0, TQ2_0)
 * and 4-bit float (MXFP4, NVFP4) formats: dequantization and dot products.
 *
 * Layout of the file: the blocks; small readers; dequantization (one
 * function per type, gguf-py's gguf/quants.py float operations in its
 * order); the dots' float part shared by every kernel set; the portable
 * integer kernels; the AVX2 integer kernels.
 *
 * NOTES ON THE DESIGN (quant.h's contract, applied to these types)
 *
 * 1. Every block field is read with memcpy or as bytes: rows come straight
 *    from the file mapping and MXFP4 blocks are 17 bytes (odd addresses).
 * 2. Bad input cannot index out of range: each grid or table index is a bit
 *    field whose width spans exactly its table (quant_grids.h), so any
 *    bytes decode to some finite weight times a finite scale. Dequantized
 *    values can still be +-inf where ggml's are (MXFP4 with E8M0 = 255).
 * 3. Dots: a block's weights are w = dw * sc_j * q with q and sc_j small
 *    integers and dw one float32 scale per block (or per 16 for NVFP4):
 *      IQ2_*:    dw = d/8,  sc = 2s+1,  q = +-grid (8, 25, 43)
 *      IQ3_XXS:  dw = d/4,  sc = 2s+1,  q = +-grid (4 .. 62)
 *      IQ3_S:    dw = d,    sc = 2s+1,  q = +-grid (1 .. 15)
 *      IQ1_S/M:  dw = d/8,  sc = 2s+1,  q = 8*grid +- 1 (the +-1/8 delta)
 *      IQ4_XS:   dw = d,    sc = s-32,  q = kvalues_iq4nl
 *      IQ4_NL:   dw = d,    q = kvalues_iq4nl;   MXFP4: dw = 2^(e-128),
 *      NVFP4:    dw = ue4m3/2 per 16,  q = doubled e2m1 values
 *      TQ1_0/2:  dw = d,    q = -1, 0, 1
 *    (dividing d by 8 or 4 is exact in float32, even for subnormal halves).
 *    The integer sum over a block, sum_j sc_j * (q . x)_j, is exact in
 *    int32 (at most 43 * 31 * 127 * 256 < 2^26); each kernel set computes
 *    it its own way, and one float32 function (iq_dotk, iq_dot32) combines
 *    the sums, so every kernel set gives the same bits.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "f16.h"
#include "qtype.h"
#include "quant_grids.h"
#include "quant_int.h"

/* No fused multiply-add: dequantization must round as gguf-py does (see
 * quant.c). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

/* ---- ggml's blocks (byte offsets; every field read as bytes) ------------ */
/*
 *  type     bytes  fields (offset: what)
 *  IQ2_XXS   66    0: d half; 2: 8 x (u32 4 grid indices, u32 4x7 sign
 *                  indices + 4-bit scale)
 *  IQ2_XS    74    0: d; 2: 32 u16 (9-bit index, 7-bit sign index);
 *                  66: 8 bytes of two 4-bit scales (per 16)
 *  IQ2_S     82    0: d; 2: 32 index low bytes; 34: 32 sign bytes;
 *                  66: 8 bytes of four 2-bit index highs; 74: scales
 *  IQ3_XXS   98    0: d; 2: 64 grid indices; 66: 8 u32 (4x7 sign
 *                  indices + 4-bit scale)
 *  IQ3_S    110    0: d; 2: 64 index low bytes; 66: 8 bytes of index
 *                  high bits; 74: 32 sign bytes; 106: 4 bytes of scales
 *  IQ1_S     50    0: d; 2: 32 index low bytes; 34: 8 u16 (4x3 index
 *                  highs, 3-bit scale, delta sign)
 *  IQ1_M     56    0: 32 index low bytes; 32: 16 bytes of two (3 index
 *                  highs, delta sign); 48: 4 u16 (4x3-bit scales, and a
 *                  nibble of the half d each)
 *  IQ4_NL    18    0: d; 2: 16 bytes of nibbles (low: 0..15, high: 16..31)
 *  IQ4_XS   136    0: d; 2: u16 scale high bits; 4: 4 bytes of scale
 *                  low nibbles; 8: 8 x 16 bytes of nibbles as IQ4_NL
 *  TQ1_0     54    0: 48 bytes of five base-3 digits; 48: 4 bytes of
 *                  four; 52: d
 *  TQ2_0     66    0: 64 bytes of four 2-bit quants; 64: d
 *  MXFP4     17    0: E8M0 exponent; 1: 16 bytes of nibbles as IQ4_NL
 *  NVFP4     36    0: 4 UE4M3 scales (per 16); 4: 4 x 8 bytes of nibbles
 *                  (low: 0..7, high: 8..15 of each 16)
 */
enum {
	BS_IQ2_XXS = 66,
	BS_IQ2_XS = 74,
	BS_IQ2_S = 82,
	BS_IQ3_XXS = 98,
	BS_IQ3_S = 110,
	BS_IQ1_S = 50,
	BS_IQ1_M = 56,
	BS_IQ4_NL = 18,
	BS_IQ4_XS = 136,
	BS_TQ1_0 = 54,
	BS_TQ2_0 = 66,
	BS_MXFP4 = 17,
	BS_NVFP4 = 36,
};

/* ---- readers ------------------------------------------------------------ */

static inline uint16_t rd16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof v);
	return v;
}

static inline uint32_t rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof v);
	return v;
}

/* The half at P as float32 (exact). */
static inline float rdhalf(const uint8_t *p)
{
	return f16_to_f32(rd16(p));
}

/* The 4 sign bytes of a 32-element group as one mask (bit e: element e
 * negative) from the four 7-bit sign indices in AUX's low 28 bits. */
static inline uint32_t ksigns4(uint32_t aux)
{
	return (uint32_t)quant_ksigns_iq2xs[aux & 127] |
	       (uint32_t)quant_ksigns_iq2xs[(aux >> 7) & 127] << 8 |
	       (uint32_t)quant_ksigns_iq2xs[(aux >> 14) & 127] << 16 |
	       (uint32_t)quant_ksigns_iq2xs[(aux >> 21) & 127] << 24;
}

/* IQ1_M's half d, spread over the top nibbles of its four scale words. */
static inline uint16_t iq1m_d(const uint8_t *sc)
{
	return (uint16_t)((rd16(sc) >> 12) | ((rd16(sc + 2) >> 8) & 0x00F0) |
	                  ((rd16(sc + 4) >> 4) & 0x0F00) |
	                  (rd16(sc + 6) & 0xF000));
}

/* MXFP4's E8M0 scale, halved (ggml_e8m0_to_fp32_half): 2^(e-128), the
 * two smallest as subnormals; never inf or NaN. */
static inline float e8m0_half(uint8_t e)
{
	const uint32_t bits =
	    e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
	float f;

	memcpy(&f, &bits, sizeof f);
	return f;
}

/* NVFP4's unsigned E4M3 scale (bias 7), halved as gguf-py's ue4m3_to_fp32
 * does it: 0x00 and 0x7F are zero and bit 7 is ignored. Exact. */
static inline float ue4m3_half(uint8_t x)
{
	const int e = (x >> 3) & 15, m = x & 7;

	uint32_t bits;
	float f;

	if (x == 0 || x == 0x7F)
		return 0.0f;
	if (e == 0)
		return (float)m * 0x1p-10f;
	/* (1 + m/8) * 2^(e-7) / 2 as float32 bits (no ldexpf: hot loop) */
	bits = (uint32_t)(e - 8 + 127) << 23 | (uint32_t)m << 20;
	memcpy(&f, &bits, sizeof f);
	return f;
}

/* ---- dequantization (gguf-py's order of float operations) --------------- */

/* Y[j] = (DB * byte j of G) * (bit j of NEG ? -1 : 1), for K elements. */
static inline void deq_grid(float db, uint64_t g, uint32_t neg, int k, float *y)
{
	for (int j = 0; j < k; j++)
		y[j] = db * (float)(uint8_t)(g >> (8 * j)) *
		       ((neg >> j) & 1 ? -1.0f : 1.0f);
}

static void deq_iq2_xxs(const uint8_t *b, float *y)
{
	const float d = rdhalf(b);

	for (int ib = 0; ib < 8; ib++) {
		const uint32_t a0 = rd32(b + 2 + 8 * ib),
		               a1 = rd32(b + 6 + 8 * ib);
		const float db = d * (0.5f + (float)(a1 >> 28)) * 0.25f;
		const uint32_t neg = ksigns4(a1);

		for (int l = 0; l < 4; l++, y += 8)
			deq_grid(db, quant_iq2xxs_grid[(a0 >> (8 * l)) & 255],
			         neg >> (8 * l), 8, y);
	}
}

static void deq_iq2_xs(const uint8_t *b, float *y)
{
	const float d = rdhalf(b);

	for (int ib = 0; ib < 8; ib++) {
		const uint8_t sc = b[66 + ib];
		const float db[2] = {d * (0.5f + (float)(sc & 15)) * 0.25f,
		                     d * (0.5f + (float)(sc >> 4)) * 0.25f};

		for (int l = 0; l < 4; l++, y += 8) {
			const uint16_t q = rd16(b + 2 + 2 * (4 * ib + l));

			deq_grid(db[l / 2], quant_iq2xs_grid[q & 511],
			         quant_ksigns_iq2xs[q >> 9], 8, y);
		}
	}
}

/* Grid index of entry K (0..31) of an IQ2_S block: 10 bits. */
static inline int iq2s_index(const uint8_t *b, int k)
{
	return b[2 + k] | ((b[66 + k / 4] >> (2 * (k % 4))) & 3) << 8;
}

static void deq_iq2_s(const uint8_t *b, float *y)
{
	const float d = rdhalf(b);

	for (int ib = 0; ib < 8; ib++) {
		const uint8_t sc = b[74 + ib];
		const float db[2] = {d * (0.5f + (float)(sc & 15)) * 0.25f,
		                     d * (0.5f + (float)(sc >> 4)) * 0.25f};

		for (int l = 0; l < 4; l++, y += 8)
			deq_grid(db[l / 2],
			         quant_iq2s_grid[iq2s_index(b, 4 * ib + l)],
			         b[34 + 4 * ib + l], 8, y);
	}
}

static void deq_iq3_xxs(const uint8_t *b, float *y)
{
	const float d = rdhalf(b);

	for (int ib = 0; ib < 8; ib++) {
		const uint32_t aux = rd32(b + 66 + 4 * ib);
		const float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;
		const uint32_t neg = ksigns4(aux);

		for (int k = 0; k < 8; k++, y += 4)
			deq_grid(db, quant_iq3xxs_grid[b[2 + 8 * ib + k]],
			         neg >> (4 * k), 4, y);
	}
}

/* Grid index of entry K (0..63) of an IQ3_S block: 9 bits. */
static inline int iq3s_index(const uint8_t *b, int k)
{
	return b[2 + k] | ((b[66 + k / 8] >> (k % 8)) & 1) << 8;
}

/* Scale nibble of 32-group IB of an IQ3_S block. */
static inline int iq3s_scale(const uint8_t *b, int ib)
{
	return (b[106 + ib / 2] >> (4 * (ib % 2))) & 15;
}

static void deq_iq3_s(const uint8_t *b, float *y)
{
	const float d = rdhalf(b);

	for (int ib = 0; ib < 8; ib++) {
		const float db = d * (float)(1 + 2 * iq3s_scale(b, ib));
		const uint32_t neg = rd32(b + 74 + 4 * ib);

		for (int k = 0; k < 8; k++, y += 4)
			deq_grid(db, quant_iq3s_grid[iq3s_index(b, 8 * ib + k)],
			         neg >> (4 * k), 4, y);
	}
}

/* Y[j] = DL * (element j of IQ1 grid entry G + DELTA), 8 elements. */
static inline void deq_iq1_grid(float dl, uint64_t g, float delta, float *y)
{
	for (int j = 0; j < 8; j++)
		y[j] = dl * ((float)(int8_t)(uint8_t)(g >> (8 * j)) + delta);
}

static void deq_iq1_s(const uint8_t *b, float *y)
{
	const float d = rdhalf(b);

	for (int ib = 0; ib < 8; ib++) {
		const uint16_t h = rd16(b + 34 + 2 * ib);
		const float dl = d * (float)(2 * ((h >> 12) & 7) + 1);
		const float delta = h & 0x8000 ? -0.125f : 0.125f;

		for (int l = 0; l < 4; l++, y += 8)
			deq_iq1_grid(dl,
			             quant_iq1s_grid[b[2 + 4 * ib + l] |
			                             ((h >> (3 * l)) & 7) << 8],
			             delta, y);
	}
}

/* Scale (0..7) of 16-group G (0..15) of an IQ1_M block. */
static inline int iq1m_scale(const uint8_t *b, int g)
{
	return (rd16(b + 48 + 2 * (g / 4)) >> (3 * (g % 4))) & 7;
}

/* Nibble of entry K (0..31) of an IQ1_M block: 3 index highs, delta sign. */
static inline int iq1m_nibble(const uint8_t *b, int k)
{
	return (b[32 + k / 2] >> (4 * (k % 2))) & 15;
}

static void deq_iq1_m(const uint8_t *b, float *y)
{
	const float d = f16_to_f32(iq1m_d(b + 48));

	for (int k = 0; k < 32; k++, y += 8) {
		const float dl = d * (float)(2 * iq1m_scale(b, k / 2) + 1);
		const int nib = iq1m_nibble(b, k);

		deq_iq1_grid(dl, quant_iq1s_grid[b[k] | (nib & 7) << 8],
		             nib & 8 ? -0.125f : 0.125f, y);
	}
}

/* Y[j] = D * KV[nibble j], nibbles of 16 bytes Q: low ones first. */
static inline void deq_nibbles(float d, const int8_t kv[16], const uint8_t *q,
                               int nbytes, float *y)
{
	for (int j = 0; j < nbytes; j++) {
		y[j] = d * (float)kv[q[j] & 15];
		y[j + nbytes] = d * (float)kv[q[j] >> 4];
	}
}

static void deq_iq4_nl(const uint8_t *b, float *y)
{
	deq_nibbles(rdhalf(b), quant_kvalues_iq4nl, b + 2, 16, y);
}

/* Scale (-32..31) of 32-group IB of an IQ4_XS block. */
static inline int iq4xs_scale(const uint8_t *b, int ib)
{
	return (((b[4 + ib / 2] >> (4 * (ib % 2))) & 15) |
	        ((rd16(b + 2) >> (2 * ib)) & 3) << 4) -
	       32;
}

static void deq_iq4_xs(const uint8_t *b, float *y)
{
	const float d = rdhalf(b);

	for (int ib = 0; ib < 8; ib++, y += 32)
		deq_nibbles(d * (float)iq4xs_scale(b, ib), quant_kvalues_iq4nl,
		            b + 8 + 16 * ib, 16, y);
}

/*
 * TQ1_0's 256 quants (-1, 0, 1) in element order: byte q holds five base-3
 * digits as q = ceil(digits * 256 / 243); digit n is the top base-3 digit
 * of (q * 3^n) mod 256, i.e. ((q * 3^n mod 256) * 3) >> 8.
 */
static void tq1_unpack(const uint8_t *b, int8_t q[QK_K])
{
	static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
	int e = 0;

	for (int n = 0; n < 5; n++)
		for (int m = 0; m < 32; m++)
			q[e++] =
			    (int8_t)((((uint8_t)(b[m] * pow3[n])) * 3 >> 8) -
			             1);
	for (int n = 0; n < 5; n++)
		for (int m = 0; m < 16; m++)
			q[e++] =
			    (int8_t)((((uint8_t)(b[32 + m] * pow3[n])) * 3 >>
			              8) -
			             1);
	for (int n = 0; n < 4; n++)
		for (int m = 0; m < 4; m++)
			q[e++] =
			    (int8_t)((((uint8_t)(b[48 + m] * pow3[n])) * 3 >>
			              8) -
			             1);
}

/* TQ2_0's 256 quants (-1..2) in element order. */
static void tq2_unpack(const uint8_t *b, int8_t q[QK_K])
{
	for (int j = 0; j < 2; j++)
		for (int l = 0; l < 4; l++)
			for (int m = 0; m < 32; m++)
				q[128 * j + 32 * l + m] =
				    (int8_t)(((b[32 * j + m] >> (2 * l)) & 3) -
				             1);
}

static void deq_tq1_0(const uint8_t *b, float *y)
{
	const float d = rdhalf(b + 52);
	int8_t q[QK_K];

	tq1_unpack(b, q);
	for (int j = 0; j < QK_K; j++)
		y[j] = d * (float)q[j];
}

static void deq_tq2_0(const uint8_t *b, float *y)
{
	const float d = rdhalf(b + 64);
	int8_t q[QK_K];

	tq2_unpack(b, q);
	for (int j = 0; j < QK_K; j++)
		y[j] = d * (float)q[j];
}

static void deq_mxfp4(const uint8_t *b, float *y)
{
	deq_nibbles(e8m0_half(b[0]), quant_kvalues_mxfp4, b + 1, 16, y);
}

static void deq_nvfp4(const uint8_t *b, float *y)
{
	for (int s = 0; s < 4; s++, y += 16)
		deq_nibbles(ue4m3_half(b[s]), quant_kvalues_mxfp4,
		            b + 4 + 8 * s, 8, y);
}

void quant_iq_dequant(uint32_t type, const void *src, float *dst, int64_t nb)
{
	void (*deq)(const uint8_t *b, float *y) = NULL;
	size_t bs = 0;
	int64_t k = QK_K;

	switch (type) {
#define DEQ(T, FN, BS, K)                                                      \
	case T:                                                                \
		deq = FN;                                                      \
		bs = BS;                                                       \
		k = K;                                                         \
		break;
		DEQ(QTYPE_IQ2_XXS, deq_iq2_xxs, BS_IQ2_XXS, QK_K)
		DEQ(QTYPE_IQ2_XS, deq_iq2_xs, BS_IQ2_XS, QK_K)
		DEQ(QTYPE_IQ2_S, deq_iq2_s, BS_IQ2_S, QK_K)
		DEQ(QTYPE_IQ3_XXS, deq_iq3_xxs, BS_IQ3_XXS, QK_K)
		DEQ(QTYPE_IQ3_S, deq_iq3_s, BS_IQ3_S, QK_K)
		DEQ(QTYPE_IQ1_S, deq_iq1_s, BS_IQ1_S, QK_K)
		DEQ(QTYPE_IQ1_M, deq_iq1_m, BS_IQ1_M, QK_K)
		DEQ(QTYPE_IQ4_NL, deq_iq4_nl, BS_IQ4_NL, QK)
		DEQ(QTYPE_IQ4_XS, deq_iq4_xs, BS_IQ4_XS, QK_K)
		DEQ(QTYPE_TQ1_0, deq_tq1_0, BS_TQ1_0, QK_K)
		DEQ(QTYPE_TQ2_0, deq_tq2_0, BS_TQ2_0, QK_K)
		DEQ(QTYPE_MXFP4, deq_mxfp4, BS_MXFP4, QK)
		DEQ(QTYPE_NVFP4, deq_nvfp4, BS_NVFP4, 64)
#undef DEQ
	default:
		for (int64_t i = 0; i < nb * k; i++)
			dst[i] = NAN;
		return;
	}
	for (int64_t i = 0; i < nb; i++)
		deq((const uint8_t *)src + i * bs, dst + i * k);
}

/* ---- dots: the float32 part, shared by all kernel sets ------------------ */

#define CHUNK 64 /* blocks (or terms) whose integer sums are made at once */

/* Integer sums and block scales of NB 256-element blocks at W with the
 * activation blocks V: ISUM[i] exact, DW[i] the block's float32 scale. */
typedef void (*iq_kernk_fn)(const uint8_t *w, const struct vblk_q8k *v,
                            int64_t nb, int32_t *isum, float *dw);

/* The 256-element types: block i's term (dw * dx) * isum added to one
 * running sum in block order (as quant.c's K-quants). */
static float iq_dotk(iq_kernk_fn kern, size_t bs, const void *row,
                     const void *vec, int64_t n)
{
	const struct vblk_q8k *v = vec;
	const int64_t nb = n / QK_K;
	int32_t isum[CHUNK];
	float dw[CHUNK], sumf = 0.0f;

	for (int64_t i0 = 0; i0 < nb; i0 += CHUNK) {
		const int64_t nc = nb - i0 < CHUNK ? nb - i0 : CHUNK;

		kern((const uint8_t *)row + i0 * bs, v + i0, nc, isum, dw);
		for (int64_t i = 0; i < nc; i++)
			sumf += (dw[i] * v[i0 + i].d) * (float)isum[i];
	}
	return sumf;
}

/* Integer sums and scales of the TERMS terms of each of NB blocks of the
 * 32-element activation blocks X (term t of the call: ISUM[t], DW[t]). */
typedef void (*iq_kern32_fn)(const uint8_t *w, const int8_t (*x)[QK],
                             int64_t nb, int32_t *isum, float *dw);

/*
 * The types quantizing x per 32 (IQ4_NL, MXFP4: one term per block;
 * NVFP4: 64-element blocks of four 16-element terms): each term
 * (dw * dx) * isum goes to running sum a % 8 of its activation block a,
 * added pairwise at the end (as quant.c's 32-element formats).
 */
static float iq_dot32(iq_kern32_fn kern, size_t bs, int elems, int terms,
                      const void *row, const void *vec, int64_t n)
{
	const struct vec_q8 v = vec_q8_view(vec, n / QK);
	const int64_t nb = n / elems, step = CHUNK / terms;
	const int per_act = terms * QK / elems; /* terms per x block */
	int32_t isum[CHUNK];
	float dw[CHUNK], acc[8] = {0};

	for (int64_t i0 = 0; i0 < nb; i0 += step) {
		const int64_t nc = nb - i0 < step ? nb - i0 : step;

		kern((const uint8_t *)row + i0 * bs, v.qs + i0 * elems / QK, nc,
		     isum, dw);
		if (per_act == 1) { /* one term per activation block */
			const int64_t a0 = i0 * terms, nt = nc * terms;
			int64_t t = 0;

			/* eight terms at once where they start at running sum
			   0 (a step is a multiple of 8): the same operations on
			   each sum, which the compiler can do side by side */
			if (a0 % 8 == 0)
				for (; t + 8 <= nt; t += 8)
					for (int l = 0; l < 8; l++)
						acc[l] += (dw[t + l] *
						           v.d[a0 + t + l]) *
						          (float)isum[t + l];
			for (; t < nt; t++) {
				const int64_t a = a0 + t;

				acc[a % 8] += (dw[t] * v.d[a]) * (float)isum[t];
			}
		} else
			for (int64_t t = 0; t < nc * terms; t++) {
				const int64_t a = (i0 * terms + t) / per_act;

				acc[a % 8] += (dw[t] * v.d[a]) * (float)isum[t];
			}
	}
	return acc8_sum(acc);
}

/* ---- portable integer kernels ------------------------------------------- */
/*
 * Each 256-element type unpacks a block into its integer quants Q in
 * element order, the integer scales SC of its sub-blocks of SUB elements
 * (the return value) and the float32 scale *DW (note 3).
 */

/* Q[j] = +-byte j of G (bit j of NEG: negative), K elements. */
static inline void unpack_grid(uint64_t g, uint32_t neg, int k, int8_t *q)
{
	for (int j = 0; j < k; j++) {
		const int v = (uint8_t)(g >> (8 * j));

		q[j] = (int8_t)((neg >> j) & 1 ? -v : v);
	}
}

static int unpack_iq2_xxs(const uint8_t *b, int8_t *q, int *sc, float *dw)
{
	*dw = rdhalf(b) * 0.125f;
	for (int ib = 0; ib < 8; ib++) {
		const uint32_t a0 = rd32(b + 2 + 8 * ib),
		               a1 = rd32(b + 6 + 8 * ib);
		const uint32_t neg = ksigns4(a1);

		sc[ib] = 2 * (int)(a1 >> 28) + 1;
		for (int l = 0; l < 4; l++, q += 8)
			unpack_grid(quant_iq2xxs_grid[(a0 >> (8 * l)) & 255],
			            neg >> (8 * l), 8, q);
	}
	return 32;
}

static int unpack_iq2_xs(const uint8_t *b, int8_t *q, int *sc, float *dw)
{
	*dw = rdhalf(b) * 0.125f;
	for (int k = 0; k < 32; k++, q += 8) {
		const uint16_t v = rd16(b + 2 + 2 * k);

		unpack_grid(quant_iq2xs_grid[v & 511],
		            quant_ksigns_iq2xs[v >> 9], 8, q);
	}
	for (int j = 0; j < 16; j++)
		sc[j] = 2 * ((b[66 + j / 2] >> (4 * (j % 2))) & 15) + 1;
	return 16;
}

static int unpack_iq2_s(const uint8_t *b, int8_t *q, int *sc, float *dw)
{
	*dw = rdhalf(b) * 0.125f;
	for (int k = 0; k < 32; k++, q += 8)
		unpack_grid(quant_iq2s_grid[iq2s_index(b, k)], b[34 + k], 8, q);
	for (int j = 0; j < 16; j++)
		sc[j] = 2 * ((b[74 + j / 2] >> (4 * (j % 2))) & 15) + 1;
	return 16;
}

static int unpack_iq3_xxs(const uint8_t *b, int8_t *q, int *sc, float *dw)
{
	*dw = rdhalf(b) * 0.25f;
	for (int ib = 0; ib < 8; ib++) {
		const uint32_t aux = rd32(b + 66 + 4 * ib);
		const uint32_t neg = ksigns4(aux);

		sc[ib] = 2 * (int)(aux >> 28) + 1;
		for (int k = 0; k < 8; k++, q += 4)
			unpack_grid(quant_iq3xxs_grid[b[2 + 8 * ib + k]],
			            neg >> (4 * k), 4, q);
	}
	return 32;
}

static int unpack_iq3_s(const uint8_t *b, int8_t *q, int *sc, float *dw)
{
	*dw = rdhalf(b);
	for (int ib = 0; ib < 8; ib++) {
		const uint32_t neg = rd32(b + 74 + 4 * ib);

		sc[ib] = 2 * iq3s_scale(b, ib) + 1;
		for (int k = 0; k < 8; k++, q += 4)
			unpack_grid(quant_iq3s_grid[iq3s_index(b, 8 * ib + k)],
			            neg >> (4 * k), 4, q);
	}
	return 32;
}

/* Q[j] = 8 * (element j of IQ1 grid entry G) + DELTA8 (+-1), 8 elements. */
static inline void unpack_iq1_grid(uint64_t g, int delta8, int8_t *q)
{
	for (int j = 0; j < 8; j++)
		q[j] = (int8_t)(8 * (int8_t)(uint8_t)(g >> (8 * j)) + delta8);
}

static int unpack_iq1_s(const uint8_t *b, int8_t *q, int *sc, float *dw)
{
	*dw = rdhalf(b) * 0.125f;
	for (int ib = 0; ib < 8; ib++) {
		const uint16_t h = rd16(b + 34 + 2 * ib);

		sc[ib] = 2 * ((h >> 12) & 7) + 1;
		for (int l = 0; l < 4; l++, q += 8)
			unpack_iq1_grid(
			    quant_iq1s_grid[b[2 + 4 * ib + l] |
			                    ((h >> (3 * l)) & 7) << 8],
			    h & 0x8000 ? -1 : 1, q);
	}
	return 32;
}

static int unpack_iq1_m(const uint8_t *b, int8_t *q, int *sc, float *dw)
{
	*dw = f16_to_f32(iq1m_d(b + 48)) * 0.125f;
	for (int k = 0; k < 32; k++, q += 8) {
		const int nib = iq1m_nibble(b, k);

		unpack_iq1_grid(quant_iq1s_grid[b[k] | (nib & 7) << 8],
		                nib & 8 ? -1 : 1, q);
	}
	for (int j = 0; j < 16; j++)
		sc[j] = 2 * iq1m_scale(b, j) + 1;
	return 16;
}

static int unpack_iq4_xs(const uint8_t *b, int8_t *q, int *sc, float *dw)
{
	*dw = rdhalf(b);
	for (int ib = 0; ib < 8; ib++, q += 32) {
		const uint8_t *p = b + 8 + 16 * ib;

		sc[ib] = iq4xs_scale(b, ib);
		for (int j = 0; j < 16; j++) {
			q[j] = quant_kvalues_iq4nl[p[j] & 15];
			q[j + 16] = quant_kvalues_iq4nl[p[j] >> 4];
		}
	}
	return 32;
}

static int unpack_tq1_0(const uint8_t *b, int8_t *q, int *sc, float *dw)
{
	*dw = rdhalf(b + 52);
	tq1_unpack(b, q);
	sc[0] = 1;
	return QK_K;
}

static int unpack_tq2_0(const uint8_t *b, int8_t *q, int *sc, float *dw)
{
	*dw = rdhalf(b + 64);
	tq2_unpack(b, q);
	sc[0] = 1;
	return QK_K;
}

/* quant_iq_dot_NAME_c for the 256-element type NAME of BS-byte blocks. */
#define DEFINE_IQK_C(NAME, BS)                                                 \
	static void kern_##NAME##_c(const uint8_t *w,                          \
	                            const struct vblk_q8k *v, int64_t nb,      \
	                            int32_t *isum, float *dw)                  \
	{                                                                      \
		for (int64_t i = 0; i < nb; i++) {                             \
			int8_t q[QK_K];                                        \
			int sc[16];                                            \
			const int sub =                                        \
			    unpack_##NAME(w + i * (BS), q, sc, &dw[i]);        \
                                                                               \
			isum[i] = quant_isum_scaled(q, v[i].qs, sc, sub);      \
		}                                                              \
	}                                                                      \
	float quant_iq_dot_##NAME##_c(const void *row, const void *vec,        \
	                              int64_t n)                               \
	{                                                                      \
		return iq_dotk(kern_##NAME##_c, BS, row, vec, n);              \
	}

DEFINE_IQK_C(iq2_xxs, BS_IQ2_XXS)
DEFINE_IQK_C(iq2_xs, BS_IQ2_XS)
DEFINE_IQK_C(iq2_s, BS_IQ2_S)
DEFINE_IQK_C(iq3_xxs, BS_IQ3_XXS)
DEFINE_IQK_C(iq3_s, BS_IQ3_S)
DEFINE_IQK_C(iq1_s, BS_IQ1_S)
DEFINE_IQK_C(iq1_m, BS_IQ1_M)
DEFINE_IQK_C(iq4_xs, BS_IQ4_XS)
DEFINE_IQK_C(tq1_0, BS_TQ1_0)
DEFINE_IQK_C(tq2_0, BS_TQ2_0)

/* Integer dot of the K nibbles' values KV[nibble] of Q (low nibbles of
 * bytes 0..K/2-1, then high ones) with the K quants X. */
static int32_t nibble_isum(const int8_t kv[16], const uint8_t *q,
                           const int8_t *x, int k)
{
	int32_t s = 0;

	for (int j = 0; j < k / 2; j++)
		s += kv[q[j] & 15] * x[j] + kv[q[j] >> 4] * x[j + k / 2];
	return s;
}

static void kern_iq4_nl_c(const uint8_t *w, const int8_t (*x)[QK], int64_t nb,
                          int32_t *isum, float *dw)
{
	for (int64_t i = 0; i < nb; i++, w += BS_IQ4_NL) {
		dw[i] = rdhalf(w);
		isum[i] = nibble_isum(quant_kvalues_iq4nl, w + 2, x[i], QK);
	}
}

static void kern_mxfp4_c(const uint8_t *w, const int8_t (*x)[QK], int64_t nb,
                         int32_t *isum, float *dw)
{
	for (int64_t i = 0; i < nb; i++, w += BS_MXFP4) {
		dw[i] = e8m0_half(w[0]);
		isum[i] = nibble_isum(quant_kvalues_mxfp4, w + 1, x[i], QK);
	}
}

/* NVFP4: four terms per 64-element block (two per activation block). */
static void kern_nvfp4_c(const uint8_t *w, const int8_t (*x)[QK], int64_t nb,
                         int32_t *isum, float *dw)
{
	for (int64_t i = 0; i < nb; i++, w += BS_NVFP4)
		for (int s = 0; s < 4; s++) {
			dw[4 * i + s] = ue4m3_half(w[s]);
			isum[4 * i + s] =
			    nibble_isum(quant_kvalues_mxfp4, w + 4 + 8 * s,
			                x[2 * i + s / 2] + 16 * (s % 2), 16);
		}
}

float quant_iq_dot_iq4_nl_c(const void *row, const void *vec, int64_t n)
{
	return iq_dot32(kern_iq4_nl_c, BS_IQ4_NL, QK, 1, row, vec, n);
}

float quant_iq_dot_mxfp4_c(const void *row, const void *vec, int64_t n)
{
	return iq_dot32(kern_mxfp4_c, BS_MXFP4, QK, 1, row, vec, n);
}

float quant_iq_dot_nvfp4_c(const void *row, const void *vec, int64_t n)
{
	return iq_dot32(kern_nvfp4_c, BS_NVFP4, 64, 4, row, vec, n);
}

/* ---- AVX2 integer kernels ----------------------------------------------- */
/*
 * The same integer sums as the portable kernels (exact, so equal), the
 * float part being iq_dotk/iq_dot32 itself. Byte products go through
 * _mm256_maddubs_epi16 (unsigned x signed, pairs summed to int16): the
 * grids' magnitudes are at most 62, the nibble values 127, so a pair is at
 * most 2 * 127 * 127 < 2^15 and never saturates.
 */
#ifdef QUANT_HAVE_AVX2

#define AVX2 QUANT_AVX2

/* int16 pair sums of the 32 unsigned grid bytes G times the 32 quants at
 * X, each negated where bit e of NEG is set. */
AVX2 static inline __m256i avx2_grid_dot(__m256i g, uint32_t neg,
                                         const int8_t *x)
{
	const __m256i s =
	    _mm256_or_si256(avx2_bits_to_bytes(neg), _mm256_set1_epi8(1));

	return _mm256_maddubs_epi16(
	    g, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)x), s));
}

/* int16 lanes: SC0 in the low 128 bits (elements 0..15), SC1 above. */
AVX2 static inline __m256i avx2_scales16(int sc0, int sc1)
{
	return _mm256_inserti128_si256(
	    _mm256_castsi128_si256(_mm_set1_epi16((short)sc0)),
	    _mm_set1_epi16((short)sc1), 1);
}

/* Four uint64 grid entries as 32 bytes, entry 0 lowest. */
AVX2 static inline __m256i avx2_grid4(uint64_t a, uint64_t b, uint64_t c,
                                      uint64_t d)
{
	return _mm256_setr_epi64x((long long)a, (long long)b, (long long)c,
	                          (long long)d);
}

AVX2 static void kern_iq2_xxs_avx2(const uint8_t *w, const struct vblk_q8k *v,
                                   int64_t nb, int32_t *isum, float *dw)
{
	for (int64_t i = 0; i < nb; i++, w += BS_IQ2_XXS) {
		__m256i acc = _mm256_setzero_si256();

		dw[i] = rdhalf(w) * 0.125f;
		for (int ib = 0; ib < 8; ib++) {
			const uint32_t a0 = rd32(w + 2 + 8 * ib),
			               a1 = rd32(w + 6 + 8 * ib);
			const __m256i g =
			    avx2_grid4(quant_iq2xxs_grid[a0 & 255],
			               quant_iq2xxs_grid[(a0 >> 8) & 255],
			               quant_iq2xxs_grid[(a0 >> 16) & 255],
			               quant_iq2xxs_grid[a0 >> 24]);
			const __m256i p =
			    avx2_grid_dot(g, ksigns4(a1), v[i].qs + 32 * ib);

			acc = _mm256_add_epi32(
			    acc, _mm256_madd_epi16(
			             p, _mm256_set1_epi16(
			                    (short)(2 * (a1 >> 28) + 1))));
		}
		isum[i] = avx2_hsum_i32(acc);
	}
}

AVX2 static void kern_iq2_xs_avx2(const uint8_t *w, const struct vblk_q8k *v,
                                  int64_t nb, int32_t *isum, float *dw)
{
	for (int64_t i = 0; i < nb; i++, w += BS_IQ2_XS) {
		__m256i acc = _mm256_setzero_si256();

		dw[i] = rdhalf(w) * 0.125f;
		for (int ib = 0; ib < 8; ib++) {
			uint16_t e[4];
			uint32_t neg = 0;

			for (int l = 0; l < 4; l++) {
				e[l] = rd16(w + 2 + 2 * (4 * ib + l));
				neg |= (uint32_t)quant_ksigns_iq2xs[e[l] >> 9]
				       << (8 * l);
			}
			const __m256i g =
			    avx2_grid4(quant_iq2xs_grid[e[0] & 511],
			               quant_iq2xs_grid[e[1] & 511],
			               quant_iq2xs_grid[e[2] & 511],
			               quant_iq2xs_grid[e[3] & 511]);
			const uint8_t sc = w[66 + ib];

			acc = _mm256_add_epi32(
			    acc, _mm256_madd_epi16(
			             avx2_grid_dot(g, neg, v[i].qs + 32 * ib),
			             avx2_scales16(2 * (sc & 15) + 1,
			                           2 * (sc >> 4) + 1)));
		}
		isum[i] = avx2_hsum_i32(acc);
	}
}

AVX2 static void kern_iq2_s_avx2(const uint8_t *w, const struct vblk_q8k *v,
                                 int64_t nb, int32_t *isum, float *dw)
{
	for (int64_t i = 0; i < nb; i++, w += BS_IQ2_S) {
		__m256i acc = _mm256_setzero_si256();

		dw[i] = rdhalf(w) * 0.125f;
		for (int ib = 0; ib < 8; ib++) {
			const __m256i g = avx2_grid4(
			    quant_iq2s_grid[iq2s_index(w, 4 * ib)],
			    quant_iq2s_grid[iq2s_index(w, 4 * ib + 1)],
			    quant_iq2s_grid[iq2s_index(w, 4 * ib + 2)],
			    quant_iq2s_grid[iq2s_index(w, 4 * ib + 3)]);
			const uint8_t sc = w[74 + ib];

			acc = _mm256_add_epi32(
			    acc, _mm256_madd_epi16(
			             avx2_grid_dot(g, rd32(w + 34 + 4 * ib),
			                           v[i].qs + 32 * ib),
			             avx2_scales16(2 * (sc & 15) + 1,
			                           2 * (sc >> 4) + 1)));
		}
		isum[i] = avx2_hsum_i32(acc);
	}
}

AVX2 static void kern_iq3_xxs_avx2(const uint8_t *w, const struct vblk_q8k *v,
                                   int64_t nb, int32_t *isum, float *dw)
{
	for (int64_t i = 0; i < nb; i++, w += BS_IQ3_XXS) {
		__m256i acc = _mm256_setzero_si256();

		dw[i] = rdhalf(w) * 0.25f;
		for (int ib = 0; ib < 8; ib++) {
			const uint8_t *qs = w + 2 + 8 * ib;
			const uint32_t aux = rd32(w + 66 + 4 * ib);
			const __m256i g =
			    _mm256_setr_epi32((int)quant_iq3xxs_grid[qs[0]],
			                      (int)quant_iq3xxs_grid[qs[1]],
			                      (int)quant_iq3xxs_grid[qs[2]],
			                      (int)quant_iq3xxs_grid[qs[3]],
			                      (int)quant_iq3xxs_grid[qs[4]],
			                      (int)quant_iq3xxs_grid[qs[5]],
			                      (int)quant_iq3xxs_grid[qs[6]],
			                      (int)quant_iq3xxs_grid[qs[7]]);

			acc = _mm256_add_epi32(
			    acc, _mm256_madd_epi16(
			             avx2_grid_dot(g, ksigns4(aux),
			                           v[i].qs + 32 * ib),
			             _mm256_set1_epi16(
			                 (short)(2 * (aux >> 28) + 1))));
		}
		isum[i] = avx2_hsum_i32(acc);
	}
}

AVX2 static void kern_iq3_s_avx2(const uint8_t *w, const struct vblk_q8k *v,
                                 int64_t nb, int32_t *isum, float *dw)
{
	for (int64_t i = 0; i < nb; i++, w += BS_IQ3_S) {
		__m256i acc = _mm256_setzero_si256();

		dw[i] = rdhalf(w);
		for (int ib = 0; ib < 8; ib++) {
			int e[8];

			for (int k = 0; k < 8; k++)
				e[k] = (int)
				    quant_iq3s_grid[iq3s_index(w, 8 * ib + k)];
			const __m256i g = _mm256_setr_epi32(
			    e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]);

			acc = _mm256_add_epi32(
			    acc, _mm256_madd_epi16(
			             avx2_grid_dot(g, rd32(w + 74 + 4 * ib),
			                           v[i].qs + 32 * ib),
			             _mm256_set1_epi16(
			                 (short)(2 * iq3s_scale(w, ib) + 1))));
		}
		isum[i] = avx2_hsum_i32(acc);
	}
}

/*
 * IQ1: q = 8g + delta with g in {-1, 0, 1} an int8 grid byte, so
 * q . x = 8 (g . x) + (delta . x); _mm256_sign_epi8(x, g) is g*x exactly
 * and the pair sums stay far inside int16 (8 * 254 + 254).
 */
AVX2 static inline __m256i avx2_iq1_dot(__m256i g, __m256i delta,
                                        const int8_t *x)
{
	const __m256i xv = _mm256_loadu_si256((const __m256i *)x);
	const __m256i one = _mm256_set1_epi8(1);
	const __m256i gx = _mm256_maddubs_epi16(one, _mm256_sign_epi8(xv, g));
	const __m256i dx =
	    _mm256_maddubs_epi16(one, _mm256_sign_epi8(xv, delta));

	return _mm256_add_epi16(_mm256_slli_epi16(gx, 3), dx);
}

AVX2 static void kern_iq1_s_avx2(const uint8_t *w, const struct vblk_q8k *v,
                                 int64_t nb, int32_t *isum, float *dw)
{
	for (int64_t i = 0; i < nb; i++, w += BS_IQ1_S) {
		__m256i acc = _mm256_setzero_si256();

		dw[i] = rdhalf(w) * 0.125f;
		for (int ib = 0; ib < 8; ib++) {
			const uint16_t h = rd16(w + 34 + 2 * ib);
			const uint8_t *qs = w + 2 + 4 * ib;
			const __m256i g = avx2_grid4(
			    quant_iq1s_grid[qs[0] | (h & 7) << 8],
			    quant_iq1s_grid[qs[1] | ((h >> 3) & 7) << 8],
			    quant_iq1s_grid[qs[2] | ((h >> 6) & 7) << 8],
			    quant_iq1s_grid[qs[3] | ((h >> 9) & 7) << 8]);

			acc = _mm256_add_epi32(
			    acc,
			    _mm256_madd_epi16(
			        avx2_iq1_dot(
			            g, _mm256_set1_epi8(h & 0x8000 ? -1 : 1),
			            v[i].qs + 32 * ib),
			        _mm256_set1_epi16(
			            (short)(2 * ((h >> 12) & 7) + 1))));
		}
		isum[i] = avx2_hsum_i32(acc);
	}
}

AVX2 static void kern_iq1_m_avx2(const uint8_t *w, const struct vblk_q8k *v,
                                 int64_t nb, int32_t *isum, float *dw)
{
	for (int64_t i = 0; i < nb; i++, w += BS_IQ1_M) {
		__m256i acc = _mm256_setzero_si256();

		dw[i] = f16_to_f32(iq1m_d(w + 48)) * 0.125f;
		for (int ib = 0; ib < 8; ib++) {
			uint64_t g[4], dl[4];

			for (int l = 0; l < 4; l++) {
				const int k = 4 * ib + l,
				          nib = iq1m_nibble(w, k);

				g[l] = quant_iq1s_grid[w[k] | (nib & 7) << 8];
				dl[l] = nib & 8 ? 0xFFFFFFFFFFFFFFFFull
				                : 0x0101010101010101ull;
			}
			acc = _mm256_add_epi32(
			    acc, _mm256_madd_epi16(
			             avx2_iq1_dot(
			                 avx2_grid4(g[0], g[1], g[2], g[3]),
			                 avx2_grid4(dl[0], dl[1], dl[2], dl[3]),
			                 v[i].qs + 32 * ib),
			             avx2_scales16(
			                 2 * iq1m_scale(w, 2 * ib) + 1,
			                 2 * iq1m_scale(w, 2 * ib + 1) + 1)));
		}
		isum[i] = avx2_hsum_i32(acc);
	}
}

/* The values KV[nibble] of 16 bytes of nibbles at Q (low nibbles in bytes
 * 0..15, high ones in 16..31), by a byte shuffle of the 16-entry table. */
AVX2 static inline __m256i avx2_nibble_values(const int8_t kv[16],
                                              const uint8_t *q)
{
	const __m256i t =
	    _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kv));

	return _mm256_shuffle_epi8(t, avx2_nibbles(q));
}

AVX2 static void kern_iq4_xs_avx2(const uint8_t *w, const struct vblk_q8k *v,
                                  int64_t nb, int32_t *isum, float *dw)
{
	for (int64_t i = 0; i < nb; i++, w += BS_IQ4_XS) {
		__m256i acc = _mm256_setzero_si256();

		dw[i] = rdhalf(w);
		for (int ib = 0; ib < 8; ib++) {
			const __m256i q = avx2_nibble_values(
			    quant_kvalues_iq4nl, w + 8 + 16 * ib);
			const __m256i x = _mm256_loadu_si256(
			    (const __m256i *)(v[i].qs + 32 * ib));
			/* |q| * (x with q's sign), pairs: <= 2 * 127 * 127 */
			const __m256i p = _mm256_maddubs_epi16(
			    _mm256_sign_epi8(q, q), _mm256_sign_epi8(x, q));

			acc = _mm256_add_epi32(
			    acc, _mm256_madd_epi16(
			             p, _mm256_set1_epi16(
			                    (short)iq4xs_scale(w, ib))));
		}
		isum[i] = avx2_hsum_i32(acc);
	}
}

/* TQ2_0: quants stored as q + 1 in 0..3: sum (q + 1) x minus sum x. */
AVX2 static void kern_tq2_0_avx2(const uint8_t *w, const struct vblk_q8k *v,
                                 int64_t nb, int32_t *isum, float *dw)
{
	const __m256i m3 = _mm256_set1_epi8(3);

	for (int64_t i = 0; i < nb; i++, w += BS_TQ2_0) {
		__m256i acc = _mm256_setzero_si256();
		int32_t xsum = 0;

		dw[i] = rdhalf(w + 64);
		for (int j = 0; j < 2; j++) {
			const __m256i q =
			    _mm256_loadu_si256((const __m256i *)(w + 32 * j));

			for (int l = 0; l < 4; l++)
				acc = _mm256_add_epi32(
				    acc,
				    avx2_dot_us(
				        _mm256_and_si256(
				            _mm256_srli_epi16(q, 2 * l), m3),
				        _mm256_loadu_si256((
				            const __m256i *)(v[i].qs + 128 * j +
				                             32 * l))));
		}
		for (int j = 0; j < QK_K / 16; j++)
			xsum += v[i].bsums[j];
		isum[i] = avx2_hsum_i32(acc) - xsum;
	}
}

/* Base-3 digit N of each byte of Q (tq1_unpack's ((q 3^N mod 256) * 3)
 * >> 8), P3 = 3^N in every 16-bit lane: the even bytes and the odd ones
 * multiplied in 16-bit lanes apart (no product leaves its lane: 255 * 81
 * and 255 * 3 < 2^16), the digits back in their bytes. */
AVX2 static inline __m256i tq1_digits(__m256i q, __m256i p3)
{
	const __m256i lo8 = _mm256_set1_epi16(0x00FF),
	              three = _mm256_set1_epi16(3);
	const __m256i e = _mm256_and_si256(_mm256_mullo_epi16(q, p3), lo8);
	const __m256i o = _mm256_and_si256(
	    _mm256_mullo_epi16(_mm256_srli_epi16(q, 8), p3), lo8);

	return _mm256_or_si256(
	    _mm256_srli_epi16(_mm256_mullo_epi16(e, three), 8),
	    _mm256_and_si256(_mm256_mullo_epi16(o, three),
	                     _mm256_set1_epi16((short)0xFF00)));
}

/* TQ1_0: the quants are base-3 digits minus 1 (tq1_unpack's order):
 * elements 32 n + m digit n of qs[m] (n < 5), 160 + 16 n + m digit n of
 * qs[32 + m] (two digits a register, the 16 bytes in both halves), 240 +
 * 4 n + m digit n of qh[m] (the last 16, beside qs[32..47]'s digit 4);
 * sum digit x minus sum x. */
AVX2 static void kern_tq1_0_avx2(const uint8_t *w, const struct vblk_q8k *v,
                                 int64_t nb, int32_t *isum, float *dw)
{
	static const short p3[5] = {1, 3, 9, 27, 81};

	for (int64_t i = 0; i < nb; i++, w += BS_TQ1_0) {
		const __m256i q = _mm256_loadu_si256((const __m256i *)w);
		const __m256i h = _mm256_broadcastsi128_si256(
		    _mm_loadu_si128((const __m128i *)(w + 32)));
		__m256i acc = _mm256_setzero_si256();
		uint8_t last[16];
		int32_t xsum = 0;

		dw[i] = rdhalf(w + 52);
		for (int n = 0; n < 5; n++)
			acc = _mm256_add_epi32(
			    acc, avx2_dot_us(
			             tq1_digits(q, _mm256_set1_epi16(p3[n])),
			             _mm256_loadu_si256(
			                 (const __m256i *)(v[i].qs + 32 * n))));
		for (int n = 0; n < 4; n += 2) /* elements 160 + 16 n .. + 31 */
			acc = _mm256_add_epi32(
			    acc,
			    avx2_dot_us(
			        tq1_digits(h,
			                   _mm256_setr_epi16(
			                       p3[n], p3[n], p3[n], p3[n],
			                       p3[n], p3[n], p3[n], p3[n],
			                       p3[n + 1], p3[n + 1], p3[n + 1],
			                       p3[n + 1], p3[n + 1], p3[n + 1],
			                       p3[n + 1], p3[n + 1])),
			        _mm256_loadu_si256((
			            const __m256i *)(v[i].qs + 160 + 16 * n))));
		for (int n = 0; n < 4; n++)
			for (int m = 0; m < 4; m++)
				last[4 * n + m] =
				    (uint8_t)(((uint8_t)(w[48 + m] * p3[n])) *
				                  3 >>
				              8);
		acc = _mm256_add_epi32(
		    acc,
		    avx2_dot_us(
		        _mm256_inserti128_si256(
		            tq1_digits(h, _mm256_set1_epi16(p3[4])),
		            _mm_loadu_si128((const __m128i *)last), 1),
		        _mm256_loadu_si256((const __m256i *)(v[i].qs + 224))));
		for (int j = 0; j < QK_K / 16; j++)
			xsum += v[i].bsums[j];
		isum[i] = avx2_hsum_i32(acc) - xsum;
	}
}

/*
 * The 32-element nibble formats (QS at byte OFF of each BS-byte block,
 * values KV, block scale SCALE(block)): the sums of eight blocks at once
 * (avx2_hsum8_i32), the last nb % 8 one by one.
 */
#define DEFINE_NIBBLE32_AVX2(NAME, BS, OFF, KV, SCALE)                         \
	AVX2 static void kern_##NAME##_avx2(const uint8_t *w,                  \
	                                    const int8_t(*x)[QK], int64_t nb,  \
	                                    int32_t *isum, float *dw)          \
	{                                                                      \
		int64_t i = 0;                                                 \
                                                                               \
		for (; i + 8 <= nb; i += 8) {                                  \
			__m256i p[8];                                          \
                                                                               \
			for (int k = 0; k < 8; k++) {                          \
				const uint8_t *b = w + (i + k) * (BS);         \
                                                                               \
				p[k] = avx2_dot_ss(                            \
				    avx2_nibble_values(KV, b + (OFF)),         \
				    _mm256_loadu_si256(                        \
				        (const __m256i *)x[i + k]));           \
				dw[i + k] = SCALE(b);                          \
			}                                                      \
			_mm256_storeu_si256((__m256i *)(isum + i),             \
			                    avx2_hsum8_i32(p));                \
		}                                                              \
		for (; i < nb; i++) {                                          \
			const uint8_t *b = w + i * (BS);                       \
                                                                               \
			isum[i] = avx2_hsum_i32(avx2_dot_ss(                   \
			    avx2_nibble_values(KV, b + (OFF)),                 \
			    _mm256_loadu_si256((const __m256i *)x[i])));       \
			dw[i] = SCALE(b);                                      \
		}                                                              \
	}

#define SCALE_HALF0(b) rdhalf(b)
#define SCALE_E8M0(b)  e8m0_half((b)[0])
DEFINE_NIBBLE32_AVX2(iq4_nl, BS_IQ4_NL, 2, quant_kvalues_iq4nl, SCALE_HALF0)
DEFINE_NIBBLE32_AVX2(mxfp4, BS_MXFP4, 1, quant_kvalues_mxfp4, SCALE_E8M0)

/*
 * NVFP4: 16 bytes of nibbles hold two 16-element sub-blocks (8 bytes each,
 * low nibbles first), i.e. one activation block; rearranged into element
 * order, the products' low 128 bits sum to the first sub-block's integer
 * dot and the high 128 bits to the second's.
 */
AVX2 static void kern_nvfp4_avx2(const uint8_t *w, const int8_t (*x)[QK],
                                 int64_t nb, int32_t *isum, float *dw)
{
	const __m256i kv = _mm256_broadcastsi128_si256(
	    _mm_loadu_si128((const __m128i *)quant_kvalues_mxfp4));
	const __m128i m4 = _mm_set1_epi8(0x0F);

	for (int64_t i = 0; i < nb; i++, w += BS_NVFP4)
		for (int p = 0; p < 2; p++) {
			const __m128i q =
			    _mm_loadu_si128((const __m128i *)(w + 4 + 16 * p));
			const __m128i lo = _mm_and_si128(q, m4);
			const __m128i hi =
			    _mm_and_si128(_mm_srli_epi16(q, 4), m4);
			const __m256i idx = _mm256_inserti128_si256(
			    _mm256_castsi128_si256(_mm_unpacklo_epi64(lo, hi)),
			    _mm_unpackhi_epi64(lo, hi), 1);
			const __m256i prod = avx2_dot_ss(
			    _mm256_shuffle_epi8(kv, idx),
			    _mm256_loadu_si256((const __m256i *)x[2 * i + p]));
			__m128i s0 = _mm256_castsi256_si128(prod),
			        s1 = _mm256_extracti128_si256(prod, 1);

			/* the two halves' horizontal sums side by side */
			s0 = _mm_hadd_epi32(s0, s1);
			s0 = _mm_hadd_epi32(s0, s0);
			isum[4 * i + 2 * p] = _mm_cvtsi128_si32(s0);
			isum[4 * i + 2 * p + 1] = _mm_extract_epi32(s0, 1);
			dw[4 * i + 2 * p] = ue4m3_half(w[2 * p]);
			dw[4 * i + 2 * p + 1] = ue4m3_half(w[2 * p + 1]);
		}
}

float quant_iq_dot_nvfp4_avx2(const void *row, const void *vec, int64_t n)
{
	return iq_dot32(kern_nvfp4_avx2, BS_NVFP4, 64, 4, row, vec, n);
}

#define DEFINE_IQK_AVX2(NAME, BS)                                              \
	float quant_iq_dot_##NAME##_avx2(const void *row, const void *vec,     \
	                                 int64_t n)                            \
	{                                                                      \
		return iq_dotk(kern_##NAME##_avx2, BS, row, vec, n);           \
	}

DEFINE_IQK_AVX2(iq2_xxs, BS_IQ2_XXS)
DEFINE_IQK_AVX2(iq2_xs, BS_IQ2_XS)
DEFINE_IQK_AVX2(iq2_s, BS_IQ2_S)
DEFINE_IQK_AVX2(iq3_xxs, BS_IQ3_XXS)
DEFINE_IQK_AVX2(iq3_s, BS_IQ3_S)
DEFINE_IQK_AVX2(iq1_s, BS_IQ1_S)
DEFINE_IQK_AVX2(iq1_m, BS_IQ1_M)
DEFINE_IQK_AVX2(iq4_xs, BS_IQ4_XS)
DEFINE_IQK_AVX2(tq2_0, BS_TQ2_0)
DEFINE_IQK_AVX2(tq1_0, BS_TQ1_0)

float quant_iq_dot_iq4_nl_avx2(const void *row, const void *vec, int64_t n)
{
	return iq_dot32(kern_iq4_nl_avx2, BS_IQ4_NL, QK, 1, row, vec, n);
}

float quant_iq_dot_mxfp4_avx2(const void *row, const void *vec, int64_t n)
{
	return iq_dot32(kern_mxfp4_avx2, BS_MXFP4, QK, 1, row, vec, n);
}

#ifdef QUANT_CAN_AVX512
#define AVX512 QUANT_AVX512

/*
 * The 32-element nibble formats on AVX-512 with VNNI: two blocks a
 * register, their values KV[nibble] + 128 (unsigned: KV with its top bit
 * flipped) times the activation bytes by VPDPBUSD, less 128 times the
 * activations' sums (quant_avx512.h's offset for Q8_0): the same exact
 * integer sums as the AVX2 and portable kernels, so the same floats
 * (iq_dot32 does the rest). Lanes 0..7 hold block 0's products (values of
 * its low nibbles, then its high ones: its elements in order), 8..15
 * block 1's.
 */
AVX512 static inline __m512i avx512_nibble_prod2(__m512i kv, const uint8_t *a,
                                                 const uint8_t *b, __m512i x)
{
	const __m512i p =
	    avx512_dot_us(_mm512_shuffle_epi8(kv, avx512_nibbles2(a, b)), x);

	return _mm512_sub_epi32(p, _mm512_slli_epi32(avx512_xsum4(x), 7));
}

/* kern_NAME_avx2 two blocks at a time (its tail for the last nb % 8). */
#define DEFINE_NIBBLE32_AVX512(NAME, BS, OFF, KV, SCALE)                       \
	AVX512 static void kern_##NAME##_avx512(                               \
	    const uint8_t *w, const int8_t(*x)[QK], int64_t nb, int32_t *isum, \
	    float *dw)                                                         \
	{                                                                      \
		const __m512i kv =                                             \
		    _mm512_xor_si512(_mm512_broadcast_i32x4(_mm_loadu_si128(   \
		                         (const __m128i *)(KV))),              \
		                     _mm512_set1_epi8((char)0x80));            \
		int64_t i = 0;                                                 \
                                                                               \
		for (; i + 8 <= nb; i += 8) {                                  \
			__m256i p[8];                                          \
                                                                               \
			for (int k = 0; k < 8; k += 2) {                       \
				const uint8_t *b = w + (i + k) * (BS);         \
				const __m512i pp = avx512_nibble_prod2(        \
				    kv, b + (OFF), b + (BS) + (OFF),           \
				    _mm512_loadu_si512(x[i + k]));             \
                                                                               \
				p[k] = _mm512_castsi512_si256(pp);             \
				p[k + 1] = _mm512_extracti64x4_epi64(pp, 1);   \
				dw[i + k] = SCALE(b);                          \
				dw[i + k + 1] = SCALE(b + (BS));               \
			}                                                      \
			_mm256_storeu_si256((__m256i *)(isum + i),             \
			                    avx2_hsum8_i32(p));                \
		}                                                              \
		if (i < nb)                                                    \
			kern_##NAME##_avx2(w + i * (BS), x + i, nb - i,        \
			                   isum + i, dw + i);                  \
	}

DEFINE_NIBBLE32_AVX512(iq4_nl, BS_IQ4_NL, 2, quant_kvalues_iq4nl, SCALE_HALF0)
DEFINE_NIBBLE32_AVX512(mxfp4, BS_MXFP4, 1, quant_kvalues_mxfp4, SCALE_E8M0)

float quant_iq_dot_iq4_nl_avx512(const void *row, const void *vec, int64_t n)
{
	return iq_dot32(kern_iq4_nl_avx512, BS_IQ4_NL, QK, 1, row, vec, n);
}

float quant_iq_dot_mxfp4_avx512(const void *row, const void *vec, int64_t n)
{
	return iq_dot32(kern_mxfp4_avx512, BS_MXFP4, QK, 1, row, vec, n);
}
#undef AVX512
#endif /* QUANT_CAN_AVX512 */

#undef AVX2
#endif /* QUANT_HAVE_AVX2 */

/* A build without AVX2 kernels: the portable kernel under the AVX2 name,
 * so every table has every type. */
#ifndef QUANT_HAVE_AVX2
#define PORTABLE_AS_AVX2(NAME, TYPE, ISA512)                                   \
	float quant_iq_dot_##NAME##_avx2(const void *row, const void *vec,     \
	                                 int64_t n)                            \
	{                                                                      \
		return quant_iq_dot_##NAME##_c(row, vec, n);                   \
	}
QUANT_IQ_TYPES(PORTABLE_AS_AVX2)
#undef PORTABLE_AS_AVX2
#endif

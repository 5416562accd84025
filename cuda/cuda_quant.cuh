/*
 * cuda_quant.cuh - ggml's block formats on the GPU: one element of a row,
 * dequantized straight from the GGUF blocks (no fp32 copy of the model).
 *
 * NOTES ON THE DESIGN
 *
 * 1. Each function mirrors src/quant.c's deq_* (itself bit-exact with
 *    ggml): the same integer unpacking and the same float operations in the
 *    same order. nvcc contracts a*b+c into an FMA by default, which rounds
 *    once instead of twice; the explicit __fmul_rn / __fadd_rn / __fsub_rn
 *    forbid that, so every value equals the CPU's bit for bit (t_cuda_ops
 *    checks it).
 * 2. Element-wise on purpose: element i of a row is block i / BS, index
 *    i % BS in it. A warp whose lanes take consecutive elements reads
 *    consecutive bytes of one block (the nibble formats share a byte between
 *    elements j and j + 16, a broadcast within the warp), so the loads
 *    coalesce; the K-quants re-derive their 6-bit scales per element, which
 *    costs integer ALU, not memory. The decode mat-vec of the common types
 *    reads whole blocks instead (cuda_vecdot.cuh); this decoder serves
 *    get_rows, the GEMM's fp16 dequantization and the other types.
 * 3. Blocks are only 2-byte aligned in the file (Q8_0 is 34 bytes), so
 *    nothing wider than a 16-bit load is used on quantized data in the
 *    file's layout (the GPU layouts of note 5 are 16-byte aligned, and
 *    their decoders read wider); fp32 scalars of F32 rows are 4-byte
 *    aligned because GGUF aligns tensor data (32 bytes) and rows of F32 are
 *    whole floats.
 * 4. The type ids are ggml's (src/qtype.h); CQ_BS / CQ_TS give the block
 *    geometry at compile time for the per-type kernels (templates on the
 *    type id, the only C++ used).
 * 5. Three GPU-private row layouts (made at load, cuda_repack.cu): a Q8_0
 *    or Q6_K row with each field of all its NB blocks gathered into one
 *    array, so that the mat-vec reads a block's quants with 16-byte loads
 *    instead of 2-byte ones (the GGUF blocks are 34 and 210 bytes):
 *      CQ_Q8_0R: qs[nb][32], d[nb]
 *      CQ_Q6_KR: ql[nb][128], qh[nb][64], sc[nb][16], d[nb]
 *    the row padded to a multiple of 16 bytes (cq_repack_row_size), so
 *    that every row, and in it every quant array, starts 16-byte aligned;
 *    and CQ_Q4_KR, a Q4_K block whose 12 bytes of 6-bit scales and mins
 *    are re-packed as two 48-bit little-endian fields (scale j at bit 6j,
 *    min j at bit 48 + 6j), so that a sub-block pair's scales and mins are
 *    two shifts of the block's first 16 bytes, read in one load, instead
 *    of byte loads and cq_scale_min_k4's bit fiddling (same block size).
 *    Their ids lie past ggml's and never appear in a file. An element's
 *    value comes from the same decoder as in the GGUF layout (cq_q8_0_val,
 *    cq_q6_k_val, cq_q4_k_val), only the field addresses or the scales'
 *    packing differ: the same floats.
 * 6. The i-quants and the ternary types (IQ4_NL, IQ4_XS, IQ3_XXS, IQ3_S,
 *    IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M, TQ1_0, TQ2_0) mirror
 *    src/quant_iq.c's deq_* the same way (gguf-py's order of operations).
 *    Their blocks have even sizes, so 16-bit loads, and a 32-bit field
 *    is two of them (note 3). Their lookup tables (the grids, the sign
 *    patterns, IQ4_NL's 16 values: 33 KB) are indexed by the weights
 *    themselves, so the lanes of a warp read different entries (a warp
 *    on 32 consecutive elements reads 4 grid entries of IQ2_*, 8 of
 *    IQ3_*; the fp16 dequantization, 8 elements a lane, 32 or 64): in
 *    __constant__ memory those reads would be serialised, one per
 *    distinct address; in global memory through the read-only L1 cache
 *    they cost a transaction per cache line touched (the tables stay
 *    resident in L1 and L2 once the first blocks have used them).
 *    They are src/quant_grids.c itself, included into cq_iq_tables() with
 *    each name made a function-local static: one source of the values,
 *    no upload at run time, and the tables are emitted only into the
 *    modules whose kernels decode these types (a namespace-scope
 *    __device__ array would be in every file that includes this one).
 */
#ifndef PARLEY_CUDA_QUANT_CUH
#define PARLEY_CUDA_QUANT_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

extern "C" {
#include "qtype.h"
#include "quant_grids.h" /* (first: quant_grids.c then skips it) */
}

/* prmt.b32 in its default mode: a selector nibble with its top bit set
 * gives the sign of the byte its low three bits select, in all 8 bits
 * (PTX's own words; the 16-entry lookups of cuda_vecdot8.cuh's cv8_nib16
 * and cuda_dec8.cuh's MXFP4 decoding rely on it). */
static __device__ __forceinline__ uint32_t cq_prmt(uint32_t a, uint32_t b,
                                                   uint32_t s)
{
	uint32_t r;

	asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(s));
	return r;
}

/* A half stored at P (2-byte aligned) as float: exact. */
static __device__ __forceinline__ float cq_half(const uint8_t *p)
{
	return __half2float(__ushort_as_half(*(const uint16_t *)p));
}

/* The GPU-private layouts (note 5). */
#define CQ_Q4_KR 61
#define CQ_Q8_0R 62
#define CQ_Q6_KR 63

/* Elements per block (compile time). */
template <int T> struct cq_geom;
#define CQ_GEOM(T, B, S)                                                       \
	template <> struct cq_geom<T> {                                        \
		static const int bs = B;                                       \
		static const int ts = S;                                       \
	}
CQ_GEOM(QTYPE_F32, 1, 4);
CQ_GEOM(QTYPE_F16, 1, 2);
CQ_GEOM(QTYPE_BF16, 1, 2);
CQ_GEOM(QTYPE_Q4_0, 32, 18);
CQ_GEOM(QTYPE_Q4_1, 32, 20);
CQ_GEOM(QTYPE_Q5_0, 32, 22);
CQ_GEOM(QTYPE_Q5_1, 32, 24);
CQ_GEOM(QTYPE_Q8_0, 32, 34);
CQ_GEOM(QTYPE_Q2_K, 256, 84);
CQ_GEOM(QTYPE_Q3_K, 256, 110);
CQ_GEOM(QTYPE_Q4_K, 256, 144);
CQ_GEOM(QTYPE_Q5_K, 256, 176);
CQ_GEOM(QTYPE_Q6_K, 256, 210);
CQ_GEOM(CQ_Q4_KR, 256, 144);
CQ_GEOM(QTYPE_MXFP4, 32, 17);
CQ_GEOM(QTYPE_IQ4_NL, 32, 18);
CQ_GEOM(QTYPE_IQ4_XS, 256, 136);
CQ_GEOM(QTYPE_IQ3_XXS, 256, 98);
CQ_GEOM(QTYPE_IQ3_S, 256, 110);
CQ_GEOM(QTYPE_IQ2_XXS, 256, 66);
CQ_GEOM(QTYPE_IQ2_XS, 256, 74);
CQ_GEOM(QTYPE_IQ2_S, 256, 82);
CQ_GEOM(QTYPE_IQ1_S, 256, 50);
CQ_GEOM(QTYPE_IQ1_M, 256, 56);
CQ_GEOM(QTYPE_TQ1_0, 256, 54);
CQ_GEOM(QTYPE_TQ2_0, 256, 66);
#undef CQ_GEOM

/* Element J of block B (B points at the block, J < block size). */
template <int T> __device__ float cq_elem(const uint8_t *b, int j);

template <>
__device__ __forceinline__ float cq_elem<QTYPE_F32>(const uint8_t *b, int j)
{
	return *(const float *)b;
}

template <>
__device__ __forceinline__ float cq_elem<QTYPE_F16>(const uint8_t *b, int j)
{
	return cq_half(b);
}

template <>
__device__ __forceinline__ float cq_elem<QTYPE_BF16>(const uint8_t *b, int j)
{
	return __uint_as_float((uint32_t)(*(const uint16_t *)b) << 16);
}

/* MXFP4: e (E8M0), qs[16]; element j the FP4 value of nibble j (low
 * nibbles 0..15, high 16..31: kvalues 0 1 2 3 4 6 8 12, bit 3 the sign)
 * times 2^(e-128) (ggml_e8m0_to_fp32_half; the two smallest exponents as
 * subnormals, as quant_iq.c e8m0_half): one rounding, as the CPU's. */
template <>
__device__ __forceinline__ float cq_elem<QTYPE_MXFP4>(const uint8_t *b, int j)
{
	const unsigned e = b[0];
	const float d =
	    __uint_as_float(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23);
	const uint8_t q = b[1 + (j & 15)];
	const unsigned n = j < 16 ? (q & 0x0Fu) : (q >> 4);
	const int v = (int)((0x0C08060403020100ull >> (8 * (n & 7))) & 0xFF);

	return __fmul_rn(d, (float)(n & 8 ? -v : v));
}

/* Q4_0: d (half), qs[16]; low nibbles are elements 0..15, high 16..31. */
template <>
__device__ __forceinline__ float cq_elem<QTYPE_Q4_0>(const uint8_t *b, int j)
{
	const float d = cq_half(b);
	const uint8_t q = b[2 + (j & 15)];
	const int x = (j < 16 ? (q & 0x0F) : (q >> 4)) - 8;

	return __fmul_rn((float)x, d);
}

/* Q4_1: d, m (half), qs[16]; x * d + m, two roundings as ggml. */
template <>
__device__ __forceinline__ float cq_elem<QTYPE_Q4_1>(const uint8_t *b, int j)
{
	const float d = cq_half(b), m = cq_half(b + 2);
	const uint8_t q = b[4 + (j & 15)];
	const int x = j < 16 ? (q & 0x0F) : (q >> 4);

	return __fadd_rn(__fmul_rn((float)x, d), m);
}

/* The fifth bits of a Q5 block (4 bytes, little-endian, 2-byte aligned). */
static __device__ __forceinline__ uint32_t cq_q5_high(const uint8_t *qh)
{
	return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 |
	       (uint32_t)qh[3] << 24;
}

/* Low four bits (nibble of qs) plus the fifth bit of element J. */
static __device__ __forceinline__ int cq_q5_quant(const uint8_t *qh,
                                                  const uint8_t *qs, int j)
{
	const uint32_t h = cq_q5_high(qh);
	const int l = j & 15;

	if (j < 16)
		return (qs[l] & 0x0F) | (int)(((h >> l) << 4) & 0x10);
	return (qs[l] >> 4) | (int)((h >> (l + 12)) & 0x10);
}

/* Q5_0: d (half), qh[4], qs[16]; (q5 - 16) * d. */
template <>
__device__ __forceinline__ float cq_elem<QTYPE_Q5_0>(const uint8_t *b, int j)
{
	const float d = cq_half(b);

	return __fmul_rn((float)(cq_q5_quant(b + 2, b + 6, j) - 16), d);
}

/* Q5_1: d, m (half), qh[4], qs[16]; q5 * d + m. */
template <>
__device__ __forceinline__ float cq_elem<QTYPE_Q5_1>(const uint8_t *b, int j)
{
	const float d = cq_half(b), m = cq_half(b + 2);

	return __fadd_rn(__fmul_rn((float)cq_q5_quant(b + 4, b + 8, j), d), m);
}

/* Element J of a Q8_0 block whose quants are at QS, its scale at D. */
static __device__ __forceinline__ float cq_q8_0_val(const uint8_t *qs,
                                                    const uint8_t *d, int j)
{
	return __fmul_rn((float)(int8_t)qs[j], cq_half(d));
}

/* Q8_0: d (half), qs[32] int8. */
template <>
__device__ __forceinline__ float cq_elem<QTYPE_Q8_0>(const uint8_t *b, int j)
{
	return cq_q8_0_val(b + 2, b, j);
}

/*
 * Q2_K: scales[16] (low nibble scale, high nibble min), qs[64], d, dmin at
 * 80, 82. quant.c walks two halves of 128 (q advances 32 bytes), in each
 * four shifts, in each two groups of 16 with their own scale byte.
 */
template <>
__device__ __forceinline__ float cq_elem<QTYPE_Q2_K>(const uint8_t *b, int j)
{
	const float d = cq_half(b + 80), min = cq_half(b + 82);
	const int n = j >> 7, r = j & 127, s = r >> 5, k = (r >> 4) & 1;
	const int l = r & 15;
	const int sc = b[n * 8 + s * 2 + k];
	const int q = (b[16 + n * 32 + 16 * k + l] >> (2 * s)) & 3;
	const float dl = __fmul_rn(d, (float)(sc & 0xF));
	const float ml = __fmul_rn(min, (float)(sc >> 4));

	return __fsub_rn(__fmul_rn(dl, (float)q), ml);
}

/*
 * Q3_K: hmask[32], qs[64], scales[12] (16 packed 6-bit scales), d at 108.
 * The high-bit mask m shifts once per 32 elements over the whole block
 * while hmask itself is not advanced (quant.c: hm stays, m <<= 1).
 */
template <>
__device__ __forceinline__ float cq_elem<QTYPE_Q3_K>(const uint8_t *b, int j)
{
	const uint8_t *hm = b, *qs = b + 32, *packed = b + 96;
	const float d_all = cq_half(b + 108);
	const int n = j >> 7, r = j & 127, s = r >> 5, k = (r >> 4) & 1;
	const int l = 16 * k + (r & 15);
	const int is = n * 8 + s * 2 + k;
	const int lo = is < 8 ? packed[is] & 0xF : packed[is - 8] >> 4;
	const int hi = (packed[8 + (is & 3)] >> (2 * (is >> 2))) & 3;
	const int sc = (int)(int8_t)((lo | hi << 4) - 32);
	const uint8_t m = (uint8_t)(1u << (n * 4 + s));
	const int q = ((qs[n * 32 + l] >> (2 * s)) & 3) - ((hm[l] & m) ? 0 : 4);
	const float dl = __fmul_rn(d_all, (float)sc);

	return __fmul_rn(dl, (float)q);
}

/* Scale and minimum J (0..7) of a Q4_K/Q5_K block (get_scale_min_k4). */
static __device__ __forceinline__ void cq_scale_min_k4(int j, const uint8_t *q,
                                                       int *d, int *m)
{
	if (j < 4) {
		*d = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

/*
 * Q4_K: d, dmin (half), scales[12] at 4, qs[128] at 16. Each 64 elements
 * share 32 bytes: the first 32 are the low nibbles (sub-block 2c), the
 * next 32 the high nibbles (sub-block 2c + 1). Element J of block B whose
 * sub-block has scale SC and min M (6 bits each).
 */
static __device__ __forceinline__ float cq_q4_k_val(const uint8_t *b, int j,
                                                    int sc, int m)
{
	const float d = cq_half(b), min = cq_half(b + 2);
	const int c = j >> 6, hiq = (j >> 5) & 1, l = j & 31;
	const uint8_t q = b[16 + c * 32 + l];
	const float d1 = __fmul_rn(d, (float)sc), m1 = __fmul_rn(min, (float)m);
	const int x = hiq ? (q >> 4) : (q & 0xF);

	return __fsub_rn(__fmul_rn(d1, (float)x), m1);
}

template <>
__device__ __forceinline__ float cq_elem<QTYPE_Q4_K>(const uint8_t *b, int j)
{
	int sc, m;

	cq_scale_min_k4(j >> 5, b + 4, &sc, &m);
	return cq_q4_k_val(b, j, sc, m);
}

/* The two 48-bit fields of a CQ_Q4_KR block (note 5) as 64-bit words,
 * from its bytes 4..15 as little-endian words W0, W1, W2: LO = bits
 * 0..63, scale j at bit 6j; HI = bits 32..95, min j at bit 16 + 6j. The
 * one decoding of the layout, from registers: the element's scale and
 * min (cq_q4kr_scale_min) and a sub-block pair's (cv8_unit<CQ_Q4_KR>,
 * which loads the block's first 16 bytes at once) are shifts of these. */
struct cq_q4kr_words {
	uint64_t lo, hi;
};

static __device__ __forceinline__ struct cq_q4kr_words
cq_q4kr_fields(uint32_t w0, uint32_t w1, uint32_t w2)
{
	struct cq_q4kr_words f;

	f.lo = ((uint64_t)w1 << 32) | w0;
	f.hi = ((uint64_t)w2 << 32) | w1;
	return f;
}

/* The 6-bit scale and min of sub-block J of a CQ_Q4_KR block B (the
 * block 16-byte aligned). */
static __device__ __forceinline__ void cq_q4kr_scale_min(const uint8_t *b,
                                                         int j, int *sc, int *m)
{
	const uint32_t *w = (const uint32_t *)(b + 4);
	const struct cq_q4kr_words f = cq_q4kr_fields(w[0], w[1], w[2]);

	*sc = (int)((f.lo >> (6 * j)) & 63);
	*m = (int)((f.hi >> (16 + 6 * j)) & 63);
}

template <>
__device__ __forceinline__ float cq_elem<CQ_Q4_KR>(const uint8_t *b, int j)
{
	int sc, m;

	cq_q4kr_scale_min(b, j >> 5, &sc, &m);
	return cq_q4_k_val(b, j, sc, m);
}

/* Q5_K: as Q4_K plus qh[32] at 16 (fifth bits), qs[128] at 48. */
template <>
__device__ __forceinline__ float cq_elem<QTYPE_Q5_K>(const uint8_t *b, int j)
{
	const float d = cq_half(b), min = cq_half(b + 2);
	const int c = j >> 6, hiq = (j >> 5) & 1, l = j & 31;
	const uint8_t ql = b[48 + c * 32 + l], qh = b[16 + l];
	const uint8_t u = (uint8_t)((hiq ? 2u : 1u) << (2 * c));
	int sc, m;

	cq_scale_min_k4(2 * c + hiq, b + 4, &sc, &m);
	const float d1 = __fmul_rn(d, (float)sc), m1 = __fmul_rn(min, (float)m);
	const int x = (hiq ? (ql >> 4) : (ql & 0xF)) + ((qh & u) ? 16 : 0);

	return __fsub_rn(__fmul_rn(d1, (float)x), m1);
}

/*
 * Element J of a Q6_K block with fields QL[128], QH[64], SC[16] (int8) and
 * its scale at DP (in the file's block: at 0, 128, 192, 208). Per half of
 * 128 (ql += 64, qh += 32, sc += 8) four groups of 32: group g takes the
 * low/high nibble of ql[l] or ql[l + 32] and bits 2g..2g+1 of qh[l]; its
 * scale is sc[l / 16 + 2g]. Value (d * sc) * q, as quant.c.
 */
static __device__ __forceinline__ float cq_q6_k_val(const uint8_t *ql,
                                                    const uint8_t *qh,
                                                    const int8_t *sc,
                                                    const uint8_t *dp, int j)
{
	const int n = j >> 7, r = j & 127, g = r >> 5, l = r & 31;
	const float d = cq_half(dp);

	ql += n * 64;
	qh += n * 32;
	sc += n * 8;
	const uint8_t lq = ql[l + (g & 1) * 32];
	const int lo = (g & 2) ? (lq >> 4) : (lq & 0xF);
	const int q = (lo | (((qh[l] >> (2 * g)) & 3) << 4)) - 32;

	return __fmul_rn(__fmul_rn(d, (float)sc[l / 16 + 2 * g]), (float)q);
}

/* Q6_K: ql[128], qh[64], sc[16], d (cq_q6_k_val). */
template <>
__device__ __forceinline__ float cq_elem<QTYPE_Q6_K>(const uint8_t *b, int j)
{
	return cq_q6_k_val(b, b + 128, (const int8_t *)(b + 192), b + 208, j);
}

/* ---- the i-quants and the ternary types (note 6) ------------------------ */

/* The tables of the i-quants (src/quant_grids.h), in device memory. */
struct cq_iq_tables {
	const uint64_t *iq2xxs, *iq2xs, *iq2s, *iq1s; /* 8 bytes an entry */
	const uint32_t *iq3xxs, *iq3s;                /* 4 bytes an entry */
	const uint8_t *ksigns;       /* 7-bit sign index -> 8 sign bits */
	const int8_t *kvalues_iq4nl; /* a 4-bit quant's value */
	const int8_t *kvalues_mxfp4; /* (defined by quant_grids.c too; unused:
	                                cq_elem<QTYPE_MXFP4> has its own) */
};

/* The tables: src/quant_grids.c included here, each table a static of
 * this function (note 6), read-only global memory (the compiler reads
 * them through the non-coherent cache, ld.global.nc). */
static __device__ __forceinline__ struct cq_iq_tables cq_iq_tables(void)
{
#define quant_iq2xxs_grid   static cq_iq2xxs_grid
#define quant_iq2xs_grid    static cq_iq2xs_grid
#define quant_iq2s_grid     static cq_iq2s_grid
#define quant_iq3xxs_grid   static cq_iq3xxs_grid
#define quant_iq3s_grid     static cq_iq3s_grid
#define quant_iq1s_grid     static cq_iq1s_grid
#define quant_ksigns_iq2xs  static cq_ksigns_iq2xs
#define quant_kvalues_iq4nl static cq_kvalues_iq4nl
#define quant_kvalues_mxfp4 static cq_kvalues_mxfp4
#include "quant_grids.c"
#undef quant_iq2xxs_grid
#undef quant_iq2xs_grid
#undef quant_iq2s_grid
#undef quant_iq3xxs_grid
#undef quant_iq3s_grid
#undef quant_iq1s_grid
#undef quant_ksigns_iq2xs
#undef quant_kvalues_iq4nl
#undef quant_kvalues_mxfp4
	struct cq_iq_tables t = {
	    cq_iq2xxs_grid,  cq_iq2xs_grid,    cq_iq2s_grid,
	    cq_iq1s_grid,    cq_iq3xxs_grid,   cq_iq3s_grid,
	    cq_ksigns_iq2xs, cq_kvalues_iq4nl, cq_kvalues_mxfp4};

	return t;
}

/* The 16-bit field at P (2-byte aligned). */
static __device__ __forceinline__ uint32_t cq_u16(const uint8_t *p)
{
	return *(const uint16_t *)p;
}

/* The 32-bit little-endian field at P (2-byte aligned: two loads). */
static __device__ __forceinline__ uint32_t cq_u32(const uint8_t *p)
{
	return cq_u16(p) | cq_u16(p + 2) << 16;
}

/* Byte K of grid entry G (element K of its 8 or 4 weights). */
static __device__ __forceinline__ uint32_t cq_byte(uint64_t g, int k)
{
	return (uint32_t)(g >> (8 * k)) & 0xFF;
}

/* Bit J (0..31) of quant_iq.c's ksigns4(AUX): sign index J / 8 (7 bits of
 * AUX) through KS, bit J % 8 of its pattern. */
static __device__ __forceinline__ uint32_t cq_ksign(const uint8_t *ks,
                                                    uint32_t aux, int j)
{
	return (uint32_t)(ks[(aux >> (7 * (j >> 3))) & 127] >> (j & 7)) & 1;
}

/* An IQ2/IQ3_XXS sub-block scale, d * (0.5 + S) * F (F 1/4 or 1/2). */
static __device__ __forceinline__ float cq_iq_db(float d, uint32_t s, float f)
{
	return __fmul_rn(__fmul_rn(d, __fadd_rn(0.5f, (float)s)), f);
}

/* A grid weight, (DB * MAG) * (NEG ? -1 : 1): deq_grid's roundings. */
static __device__ __forceinline__ float cq_grid_val(float db, uint32_t mag,
                                                    uint32_t neg)
{
	return __fmul_rn(__fmul_rn(db, (float)mag), neg ? -1.0f : 1.0f);
}

/* An IQ1 weight, DL * (int8 byte E of G + DELTA): deq_iq1_grid's. */
static __device__ __forceinline__ float cq_iq1_val(float dl, uint64_t g, int e,
                                                   float delta)
{
	return __fmul_rn(dl, __fadd_rn((float)(int8_t)cq_byte(g, e), delta));
}

/* IQ2_XXS: d; per 32 (ib) 4 grid indices (bytes) and a word of four 7-bit
 * sign indices and a 4-bit scale (top); a grid entry per 8 elements. */
template <>
__device__ __forceinline__ float cq_elem<QTYPE_IQ2_XXS>(const uint8_t *b, int j)
{
	const struct cq_iq_tables t = cq_iq_tables();
	const int ib = j >> 5;
	const uint32_t a1 = cq_u32(b + 6 + 8 * ib);
	const float db = cq_iq_db(cq_half(b), a1 >> 28, 0.25f);
	const uint64_t g = t.iq2xxs[b[2 + 8 * ib + ((j >> 3) & 3)]];

	return cq_grid_val(db, cq_byte(g, j & 7),
	                   cq_ksign(t.ksigns, a1, j & 31));
}

/* IQ2_XS: d; per 8 elements a u16 (9-bit grid index, 7-bit sign index);
 * per 32 a byte of two 4-bit scales (one per 16) at 66. */
template <>
__device__ __forceinline__ float cq_elem<QTYPE_IQ2_XS>(const uint8_t *b, int j)
{
	const struct cq_iq_tables t = cq_iq_tables();
	const uint32_t q = cq_u16(b + 2 + 2 * (j >> 3)), sc = b[66 + (j >> 5)];
	const float db =
	    cq_iq_db(cq_half(b), (j & 16) ? sc >> 4 : sc & 15, 0.25f);

	return cq_grid_val(db, cq_byte(t.iq2xs[q & 511], j & 7),
	                   (t.ksigns[q >> 9] >> (j & 7)) & 1);
}

/* IQ2_S: d; per 8 elements (k) a 10-bit grid index (low byte at 2 + k,
 * two high bits in the bytes at 66) and a sign byte at 34 + k; scales
 * at 74 as IQ2_XS's. */
template <>
__device__ __forceinline__ float cq_elem<QTYPE_IQ2_S>(const uint8_t *b, int j)
{
	const struct cq_iq_tables t = cq_iq_tables();
	const int k = j >> 3;
	const uint32_t idx =
	    b[2 + k] | ((uint32_t)(b[66 + (k >> 2)] >> (2 * (k & 3))) & 3) << 8;
	const uint32_t sc = b[74 + (j >> 5)];
	const float db =
	    cq_iq_db(cq_half(b), (j & 16) ? sc >> 4 : sc & 15, 0.25f);

	return cq_grid_val(db, cq_byte(t.iq2s[idx], j & 7),
	                   (uint32_t)(b[34 + k] >> (j & 7)) & 1);
}

/* IQ3_XXS: d; per 4 elements a grid index byte at 2; per 32 a word at 66
 * (four 7-bit sign indices, a 4-bit scale on top). */
template <>
__device__ __forceinline__ float cq_elem<QTYPE_IQ3_XXS>(const uint8_t *b, int j)
{
	const struct cq_iq_tables t = cq_iq_tables();
	const uint32_t aux = cq_u32(b + 66 + 4 * (j >> 5));
	const float db = cq_iq_db(cq_half(b), aux >> 28, 0.5f);
	const uint32_t g = t.iq3xxs[b[2 + (j >> 2)]];

	return cq_grid_val(db, cq_byte(g, j & 3),
	                   cq_ksign(t.ksigns, aux, j & 31));
}

/* IQ3_S: d; per 4 elements (k) a 9-bit grid index (low byte at 2 + k,
 * bit k % 8 of byte 66 + k / 8); a sign bit per element from 74; per 32
 * a 4-bit scale at 106, the sub-block's d * (1 + 2 s). */
template <>
__device__ __forceinline__ float cq_elem<QTYPE_IQ3_S>(const uint8_t *b, int j)
{
	const struct cq_iq_tables t = cq_iq_tables();
	const int k = j >> 2, ib = j >> 5;
	const uint32_t idx =
	    b[2 + k] | ((uint32_t)(b[66 + (k >> 3)] >> (k & 7)) & 1) << 8;
	const int s = (b[106 + (ib >> 1)] >> (4 * (ib & 1))) & 15;
	const float db = __fmul_rn(cq_half(b), (float)(1 + 2 * s));

	return cq_grid_val(db, cq_byte(t.iq3s[idx], j & 3),
	                   (uint32_t)(b[74 + (j >> 3)] >> (j & 7)) & 1);
}

/* IQ1_S: d; per 8 elements an 11-bit grid index (low byte at 2, three
 * high bits in the u16 of its 32 at 34, with the 3-bit scale and the
 * delta's sign on top). */
template <>
__device__ __forceinline__ float cq_elem<QTYPE_IQ1_S>(const uint8_t *b, int j)
{
	const struct cq_iq_tables t = cq_iq_tables();
	const int ib = j >> 5, l = (j >> 3) & 3;
	const uint32_t h = cq_u16(b + 34 + 2 * ib);
	const float dl =
	    __fmul_rn(cq_half(b), (float)(2 * ((h >> 12) & 7) + 1));
	const uint32_t idx = b[2 + (j >> 3)] | ((h >> (3 * l)) & 7) << 8;

	return cq_iq1_val(dl, t.iq1s[idx], j & 7,
	                  (h & 0x8000) ? -0.125f : 0.125f);
}

/* IQ1_M: per 8 elements (k) a grid index low byte at k and a nibble at
 * 32 (three high bits, the delta's sign); per 16 a 3-bit scale in the
 * four u16 at 48, whose top nibbles are the half d (iq1m_d). */
template <>
__device__ __forceinline__ float cq_elem<QTYPE_IQ1_M>(const uint8_t *b, int j)
{
	const struct cq_iq_tables t = cq_iq_tables();
	const uint8_t *sc = b + 48;
	const int k = j >> 3, g = j >> 4;
	const uint32_t dh =
	    (cq_u16(sc) >> 12) | ((cq_u16(sc + 2) >> 8) & 0x00F0) |
	    ((cq_u16(sc + 4) >> 4) & 0x0F00) | (cq_u16(sc + 6) & 0xF000);
	const float d = __half2float(__ushort_as_half((unsigned short)dh));
	const int s = (cq_u16(sc + 2 * (g >> 2)) >> (3 * (g & 3))) & 7;
	const float dl = __fmul_rn(d, (float)(2 * s + 1));
	const uint32_t nib = (b[32 + (k >> 1)] >> (4 * (k & 1))) & 15;

	return cq_iq1_val(dl, t.iq1s[b[k] | (nib & 7) << 8], j & 7,
	                  (nib & 8) ? -0.125f : 0.125f);
}

/* IQ4_NL: d, 16 bytes of nibbles as Q4_0's, each the index of one of
 * 16 values (quant_kvalues_iq4nl): d * value. */
template <>
__device__ __forceinline__ float cq_elem<QTYPE_IQ4_NL>(const uint8_t *b, int j)
{
	const uint8_t q = b[2 + (j & 15)];

	return __fmul_rn(
	    cq_half(b),
	    (float)cq_iq_tables().kvalues_iq4nl[j < 16 ? q & 15 : q >> 4]);
}

/* IQ4_XS: d; per 32 a 6-bit scale (low nibble at 4, two high bits in the
 * u16 at 2) minus 32, and 16 bytes of IQ4_NL nibbles at 8: (d * s) *
 * value. */
template <>
__device__ __forceinline__ float cq_elem<QTYPE_IQ4_XS>(const uint8_t *b, int j)
{
	const int ib = j >> 5, l = j & 31;
	const int s = (int)(((b[4 + (ib >> 1)] >> (4 * (ib & 1))) & 15) |
	                    ((cq_u16(b + 2) >> (2 * ib)) & 3) << 4) -
	              32;
	const float dl = __fmul_rn(cq_half(b), (float)s);
	const uint8_t q = b[8 + 16 * ib + (l & 15)];

	return __fmul_rn(
	    dl, (float)cq_iq_tables().kvalues_iq4nl[l < 16 ? q & 15 : q >> 4]);
}

/* TQ1_0: 52 bytes of base-3 digits (five a byte in the first 48, four in
 * the last 4), d at 52. Elements 0..159 are digit j / 32 of byte j % 32,
 * 160..239 digit (j - 160) / 16 of byte 32 + j % 16, 240..255 digit
 * (j - 240) / 4 of byte 48 + j % 4; digit n of byte q is the top base-3
 * digit of (q * 3^n) mod 256, minus one (tq1_unpack). */
template <>
__device__ __forceinline__ float cq_elem<QTYPE_TQ1_0>(const uint8_t *b, int j)
{
	const int at = j < 160   ? j & 31
	               : j < 240 ? 32 + (j & 15)
	                         : 48 + (j & 3);
	const int n = j < 160   ? j >> 5
	              : j < 240 ? (j - 160) >> 4
	                        : (j - 240) >> 2;
	const uint32_t p = (uint32_t)(0x511B090301ull >> (8 * n)) & 0xFF;
	const int q = (int)(((uint32_t)(uint8_t)(b[at] * p) * 3) >> 8) - 1;

	return __fmul_rn(cq_half(b + 52), (float)q);
}

/* TQ2_0: 64 bytes of 2-bit quants plus one, d at 64; element j is bits
 * 2l, 2l + 1 of byte 32 (j / 128) + j % 32, l = (j / 32) % 4. */
template <>
__device__ __forceinline__ float cq_elem<QTYPE_TQ2_0>(const uint8_t *b, int j)
{
	const int q =
	    (int)((b[32 * (j >> 7) + (j & 31)] >> (2 * ((j >> 5) & 3))) & 3) -
	    1;

	return __fmul_rn(cq_half(b + 64), (float)q);
}

/* Bytes of a row of NE0 elements of layout T (note 5): its blocks' bytes
 * rounded up to 16; 0 for a T without such a layout. */
static __host__ __device__ __forceinline__ size_t
cq_repack_row_size(int t, int64_t ne0)
{
	const size_t n = t == CQ_Q8_0R   ? (size_t)ne0 / 32 * 34
	                 : t == CQ_Q6_KR ? (size_t)ne0 / 256 * 210
	                 : t == CQ_Q4_KR ? (size_t)ne0 / 256 * 144
	                                 : 0;

	return (n + 15) & ~(size_t)15;
}

/* Element I of a row at ROW of NE0 elements (any I < NE0). */
template <int T>
static __device__ __forceinline__ float cq_row_elem(const uint8_t *row,
                                                    int64_t i, int64_t ne0)
{
	if constexpr (T == CQ_Q8_0R) {
		const int64_t b = i / 32, nb = ne0 / 32;

		return cq_q8_0_val(row + b * 32, row + nb * 32 + b * 2,
		                   (int)(i % 32));
	} else if constexpr (T == CQ_Q6_KR) {
		const int64_t b = i / 256, nb = ne0 / 256;

		return cq_q6_k_val(row + b * 128, row + nb * 128 + b * 64,
		                   (const int8_t *)(row + nb * 192) + b * 16,
		                   row + nb * 208 + b * 2, (int)(i % 256));
	} else {
		const int bs = cq_geom<T>::bs;

		return cq_elem<T>(row + (i / bs) * cq_geom<T>::ts,
		                  (int)(i % bs));
	}
}

/*
 * Instantiate MACRO(T) once per supported type id, for switch statements
 * that map a run-time type to a kernel instance: the quantized (block)
 * types, and those with the float types.
 */
#define CQ_FOR_EACH_BLOCK_TYPE(X)                                              \
	X(QTYPE_Q4_0)                                                          \
	X(QTYPE_Q4_1)                                                          \
	X(QTYPE_Q5_0)                                                          \
	X(QTYPE_Q5_1)                                                          \
	X(QTYPE_Q8_0)                                                          \
	X(QTYPE_Q2_K)                                                          \
	X(QTYPE_Q3_K)                                                          \
	X(QTYPE_Q4_K)                                                          \
	X(QTYPE_Q5_K)                                                          \
	X(QTYPE_Q6_K)                                                          \
	X(QTYPE_MXFP4)                                                         \
	X(QTYPE_IQ4_NL)                                                        \
	X(QTYPE_IQ4_XS)                                                        \
	X(QTYPE_IQ3_XXS)                                                       \
	X(QTYPE_IQ3_S)                                                         \
	X(QTYPE_IQ2_XXS)                                                       \
	X(QTYPE_IQ2_XS)                                                        \
	X(QTYPE_IQ2_S)                                                         \
	X(QTYPE_IQ1_S)                                                         \
	X(QTYPE_IQ1_M)                                                         \
	X(QTYPE_TQ1_0)                                                         \
	X(QTYPE_TQ2_0)                                                         \
	X(CQ_Q8_0R)                                                            \
	X(CQ_Q6_KR)                                                            \
	X(CQ_Q4_KR)
#define CQ_FOR_EACH_TYPE(X)                                                    \
	X(QTYPE_F32)                                                           \
	X(QTYPE_F16)                                                           \
	X(QTYPE_BF16)                                                          \
	CQ_FOR_EACH_BLOCK_TYPE(X)

#endif /* PARLEY_CUDA_QUANT_CUH */

/*
 * quant.h - ggml's quantized block formats on the CPU: row dequantization
 * and row . vector dot products.
 *
 * NOTES ON THE DESIGN
 *
 * 1. Supported (quant_can_compute), 26 types: F32, F16, BF16, Q8_0, Q4_0,
 *    Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (quant.c), and the
 *    i-quants IQ4_NL, IQ4_XS, IQ3_S, IQ3_XXS, IQ2_S, IQ2_XS, IQ2_XXS,
 *    IQ1_M, IQ1_S, the ternary TQ2_0, TQ1_0 and the 4-bit floats MXFP4,
 *    NVFP4 (quant_iq.c, grids in quant_grids.c). Blocks are read in
 *    ggml's little-endian layout straight from the file mapping; only
 *    2-byte alignment is assumed (Q8_0 blocks are 34 bytes), none for
 *    MXFP4 (17-byte blocks). Any bytes are a valid block: grid indices
 *    are bit fields exactly as wide as their grids.
 * 2. quant_dequant_row is bit-exact with ggml's dequantize_row_* (and with
 *    gguf-py's numpy dequantization): the same float operations in the same
 *    order. quant.c forbids FMA contraction for itself (pragmas for GCC and
 *    clang), so -march=native or GNU C mode cannot change a result.
 * 3. Dot products first convert the activation vector once
 *    (quant_vec_prepare), then dot it with many rows (quant_dot):
 *      - F32, F16, BF16 rows: x stays float32 (exact weights, float32 sums
 *        in 16 interleaved running sums added pairwise).
 *      - Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 rows: x is quantized per 32 to int8
 *        with a float32 scale d = amax/127, q = round(x/d) (llama.cpp's
 *        Q8_0/Q8_1 with the scale kept in float32, not float16); the vector
 *        holds the scales, d * sum(q) and the quants as three arrays.
 *        IQ4_NL and MXFP4 rows too, and NVFP4 (64-element blocks with a
 *        scale per 16: two activation blocks, four terms).
 *      - Q2_K..Q6_K, IQ2_XXS..IQ4_XS, IQ1_S, IQ1_M, TQ1_0, TQ2_0 rows:
 *        x is quantized per 256 the same way (llama.cpp's Q8_K layout:
 *        float32 scale, int8 quants, int16 sums of each 16).
 *    Inside a block the products are summed in exact integer arithmetic;
 *    the float32 operations combining block sums are the same, in the same
 *    order, in the AVX2 kernels (chosen at run time when the CPU has AVX2),
 *    the AVX-512 VNNI kernels (quant_avx512.h; when the CPU has AVX-512 F,
 *    BW, VL and VNNI) and the portable C, so all give bit-identical
 *    results. quant_iq.c's types have AVX2 integer kernels (the AVX-512
 *    set uses them too) except TQ1_0, portable on every set.
 * 4. Precision of quant_dot against the exact dot of the dequantized row
 *    with x: each activation is off by at most 0.5001 * amax(its block)/127,
 *    so |error| <= sum_i |w_i| * 0.5001 * amax_i / 127 plus the float32
 *    rounding of one term per block (t_quant checks this bound).
 * 5. Calling these with a type quant_can_compute rejects is a caller bug:
 *    dequantization writes NaNs and quant_dot returns NaN. Use
 *    quant_check_tensor when loading.
 */
#ifndef PARLEY_QUANT_H
#define PARLEY_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qtype.h"

#ifdef __cplusplus
extern "C" { /* included by the CUDA backend */
#endif

/* True when the CPU engine can dequantize and dot type T (the 26 types of
 * note 1). */
bool quant_can_compute(uint32_t type);

/* Bytes of one row of N elements of type T (N a multiple of the block
 * size); 0 when T has no known size or N is negative or not a multiple. */
size_t quant_row_size(uint32_t type, int64_t n);

/* Dequantize N elements (multiple of the block size) at SRC into DST,
 * exactly as ggml does. SRC needs 2-byte alignment. */
void quant_dequant_row(uint32_t type, const void *src, float *dst, int64_t n);

/*
 * Quantize N floats at X (N a multiple of 32) into N / 32 Q8_0 blocks at
 * DST (34 bytes each, 2-byte alignment): d = amax / 127 kept as the
 * nearest fp16, q = round(x / d) by the float d, clamped to +-127 (the
 * activations' rounding, quant_vec_prepare; ggml's
 * quantize_row_q8_0_ref). A non-finite block gets d NaN and zero quants.
 * The KV cache's q8_0 blocks on every backend.
 */
void quant_q8_0_row(const float *x, int64_t n, void *dst);

/*
 * Dot products with one activation vector: convert x (n floats) once into
 * the form type T's dot wants (quant_vec_size bytes: quantized int8 blocks
 * or plain floats, see note 3), then dot it with any number of rows.
 * N must be a multiple of the type's block size (32, 64 or 256; any N for
 * F32/F16/BF16), the same N for the preparation and the dots.
 * VEC is caller-owned memory of quant_vec_size(type, n) bytes, 4-byte
 * aligned (malloc'd memory is). Results are float32 accumulations.
 * Thread-safe: VEC and ROW are only read by quant_dot.
 * A non-finite x makes every dot with its block NaN.
 */
size_t quant_vec_size(uint32_t type, int64_t n);
void quant_vec_prepare(uint32_t type, const float *x, int64_t n, void *vec);
float quant_dot(uint32_t type, const void *row, const void *vec, int64_t n);

/*
 * quant_dot of NROWS rows, ROW_STRIDE bytes apart from ROWS, with one
 * prepared VEC: OUT[r * out_stride] = quant_dot(type, row r, vec, n). The
 * same bits as the single dots (the same kernel), without choosing the
 * kernel per row: this is the loop the engine's products run.
 */
void quant_dot_rows(uint32_t type, const void *rows, size_t row_stride,
                    int64_t nrows, const void *vec, int64_t n, float *out,
                    size_t out_stride);

/*
 * OUT[e] = sum over i < NROWS of A[i] * ROWS[i * stride + e], for e < N:
 * each OUT[e] starts at 0 and adds the products a[i] * row[e] (float32,
 * multiply then add, no FMA) in the order i = 0, 1, ...; every path (AVX2
 * or portable) gives these bits. The weighted sum of V rows in attention.
 */
void quant_f32_mix(float *out, const float *a, const float *rows, size_t stride,
                   int64_t nrows, int64_t n);

/*
 * The activations as quant_dot sees them: decode VEC (prepared for TYPE
 * from n floats) back into N doubles XHAT (caller-owned). For tests and
 * debugging; exact (each value is a float32 scale times an int8, or the
 * float itself).
 */
void quant_vec_dequant(uint32_t type, const void *vec, double *xhat, int64_t n);

/*
 * Check a tensor can be computed on: returns 0, or writes "tensor 'NAME' has
 * type Q4_2 (id 4), which the CPU engine does not support (supported: F32,
 * F16, ...)" into err (errlen bytes; err may be NULL) and returns -1.
 */
int quant_check_tensor(const char *name, uint32_t type, char *err,
                       size_t errlen);

/* Kernel sets, from the portable C up; each gives the same bits (note 3). */
enum quant_isa {
	QUANT_ISA_C,      /* portable C */
	QUANT_ISA_AVX2,   /* AVX2 + F16C */
	QUANT_ISA_AVX512, /* AVX-512 F/BW/VL + VNNI (GCC builds) */
};

/*
 * Test hook: use no kernel set above MAX (the widest the CPU runs is used
 * up to it; the default is all). Not thread-safe; set it before any dot
 * runs. quant_set_simd(false) is quant_set_isa(QUANT_ISA_C), true the
 * default.
 */
void quant_set_isa(enum quant_isa max);
void quant_set_simd(bool on);

/* The kernel set quant_dot uses on this CPU now. */
enum quant_isa quant_isa_active(void);

/* True when quant_dot uses SIMD kernels (AVX2 or wider) now. */
bool quant_simd_active(void);

#ifdef __cplusplus
}
#endif

#endif /* PARLEY_QUANT_H */

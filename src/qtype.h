/*
 * qtype.h - the ggml tensor types: ids, names, block geometry.
 *
 * Every type id ggml has ever assigned is listed, including the ones later
 * removed (their size is unknown: blck_size 0), so that `parley info` and
 * error messages can name any type a file claims. Whether the engine can
 * compute with a type is a separate question answered by quant.h.
 */
#ifndef PARLEY_QTYPE_H
#define PARLEY_QTYPE_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" { /* included by the CUDA backend */
#endif

enum qtype {
	QTYPE_F32 = 0,
	QTYPE_F16 = 1,
	QTYPE_Q4_0 = 2,
	QTYPE_Q4_1 = 3,
	QTYPE_Q5_0 = 6,
	QTYPE_Q5_1 = 7,
	QTYPE_Q8_0 = 8,
	QTYPE_Q8_1 = 9,
	QTYPE_Q2_K = 10,
	QTYPE_Q3_K = 11,
	QTYPE_Q4_K = 12,
	QTYPE_Q5_K = 13,
	QTYPE_Q6_K = 14,
	QTYPE_Q8_K = 15,
	QTYPE_IQ2_XXS = 16,
	QTYPE_IQ2_XS = 17,
	QTYPE_IQ3_XXS = 18,
	QTYPE_IQ1_S = 19,
	QTYPE_IQ4_NL = 20,
	QTYPE_IQ3_S = 21,
	QTYPE_IQ2_S = 22,
	QTYPE_IQ4_XS = 23,
	QTYPE_I8 = 24,
	QTYPE_I16 = 25,
	QTYPE_I32 = 26,
	QTYPE_I64 = 27,
	QTYPE_F64 = 28,
	QTYPE_IQ1_M = 29,
	QTYPE_BF16 = 30,
	QTYPE_TQ1_0 = 34,
	QTYPE_TQ2_0 = 35,
	QTYPE_MXFP4 = 39,
	QTYPE_NVFP4 = 40,
	QTYPE_Q1_0 = 41,
	QTYPE_COUNT = 42 /* one past the largest id known */
};

struct qtype_info {
	const char *name;   /* as ggml names it: "Q4_K", "F16" */
	uint32_t blck_size; /* elements per block; 0 = removed/unknown */
	uint32_t type_size; /* bytes per block */
};

/* Geometry of type id T, or NULL if T was never assigned by ggml. */
const struct qtype_info *qtype_get(uint32_t t);

/* Name of type id T; "unknown" for ids ggml never assigned. */
const char *qtype_name(uint32_t t);

/* True when T has a known block geometry (size computable). */
bool qtype_sized(uint32_t t);

#ifdef __cplusplus
}
#endif

#endif /* PARLEY_QTYPE_H */

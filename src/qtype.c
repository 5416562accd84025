/*
 * qtype.c - the table of ggml tensor types.
 *
 * Numbers from ggml's type traits (and gguf-py's GGML_QUANT_SIZES, which
 * tests/t_qtype.c checks them against). Ids that ggml assigned and later
 * removed keep their historical name with blck_size 0: a file that uses
 * them can be described but not sized.
 */
#include "qtype.h"

#include <stddef.h>

static const struct qtype_info qtype_table[QTYPE_COUNT] = {
    [0] = {"F32", 1, 4},
    [1] = {"F16", 1, 2},
    [2] = {"Q4_0", 32, 18},
    [3] = {"Q4_1", 32, 20},
    [4] = {"Q4_2", 0, 0}, /* removed from ggml */
    [5] = {"Q4_3", 0, 0}, /* removed from ggml */
    [6] = {"Q5_0", 32, 22},
    [7] = {"Q5_1", 32, 24},
    [8] = {"Q8_0", 32, 34},
    [9] = {"Q8_1", 32, 40},
    [10] = {"Q2_K", 256, 84},
    [11] = {"Q3_K", 256, 110},
    [12] = {"Q4_K", 256, 144},
    [13] = {"Q5_K", 256, 176},
    [14] = {"Q6_K", 256, 210},
    [15] = {"Q8_K", 256, 292},
    [16] = {"IQ2_XXS", 256, 66},
    [17] = {"IQ2_XS", 256, 74},
    [18] = {"IQ3_XXS", 256, 98},
    [19] = {"IQ1_S", 256, 50},
    [20] = {"IQ4_NL", 32, 18},
    [21] = {"IQ3_S", 256, 110},
    [22] = {"IQ2_S", 256, 82},
    [23] = {"IQ4_XS", 256, 136},
    [24] = {"I8", 1, 1},
    [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},
    [27] = {"I64", 1, 8},
    [28] = {"F64", 1, 8},
    [29] = {"IQ1_M", 256, 56},
    [30] = {"BF16", 1, 2},
    [31] = {"Q4_0_4_4", 0, 0}, /* removed: repacked at load time now */
    [32] = {"Q4_0_4_8", 0, 0}, /* removed */
    [33] = {"Q4_0_8_8", 0, 0}, /* removed */
    [34] = {"TQ1_0", 256, 54},
    [35] = {"TQ2_0", 256, 66},
    [36] = {"IQ4_NL_4_4", 0, 0}, /* removed */
    [37] = {"IQ4_NL_4_8", 0, 0}, /* removed */
    [38] = {"IQ4_NL_8_8", 0, 0}, /* removed */
    [39] = {"MXFP4", 32, 17},
    [40] = {"NVFP4", 64, 36},
    [41] = {"Q1_0", 128, 18},
};

/* Geometry of type id T, or NULL if T was never assigned by ggml. */
const struct qtype_info *qtype_get(uint32_t t)
{
	if (t >= QTYPE_COUNT || qtype_table[t].name == NULL)
		return NULL;
	return &qtype_table[t];
}

/* Name of type id T; "unknown" for ids ggml never assigned. */
const char *qtype_name(uint32_t t)
{
	const struct qtype_info *qi = qtype_get(t);

	return qi != NULL ? qi->name : "unknown";
}

/* True when T has a known block geometry (size computable). */
bool qtype_sized(uint32_t t)
{
	const struct qtype_info *qi = qtype_get(t);

	return qi != NULL && qi->blck_size != 0;
}

/*
 * quant_grids.h - the lookup tables of ggml's i-quants and MXFP4
 * (quant_grids.c, generated from gguf-py by tests/oracles/gen_grids.py).
 *
 * A grid entry packs the magnitudes of consecutive weights one byte each,
 * element 0 in the lowest byte. The sizes are powers of two matching the
 * index fields of the blocks (IQ2_XXS 8 bits, IQ2_XS 9, IQ2_S 10, IQ3_XXS
 * 8, IQ3_S 9, IQ1_S/IQ1_M 11), so an index taken from its field is in
 * range whatever the file holds.
 */
#ifndef PARLEY_QUANT_GRIDS_H
#define PARLEY_QUANT_GRIDS_H

#include <stdint.h>

extern const uint64_t quant_iq2xxs_grid[256]; /* bytes 0x08, 0x19, 0x2b */
extern const uint64_t quant_iq2xs_grid[512];  /* bytes 0x08, 0x19, 0x2b */
extern const uint64_t quant_iq2s_grid[1024];  /* bytes 0x08, 0x19, 0x2b */
extern const uint32_t quant_iq3xxs_grid[256]; /* bytes 0x04 .. 0x3e */
extern const uint32_t quant_iq3s_grid[512];   /* bytes 0x01 .. 0x0f */
extern const uint64_t quant_iq1s_grid[2048];  /* int8 -1, 0, 1 */

/* 7-bit sign index -> 8 sign bits (bit j set: element j negative); the
 * eighth bit makes the count of negatives even. */
extern const uint8_t quant_ksigns_iq2xs[128];

/* The 16 values of a 4-bit IQ4_NL/IQ4_XS quant. */
extern const int8_t quant_kvalues_iq4nl[16];

/* MXFP4's e2m1 values, doubled (the E8M0 scale is halved to match). */
extern const int8_t quant_kvalues_mxfp4[16];

#endif /* PARLEY_QUANT_GRIDS_H */

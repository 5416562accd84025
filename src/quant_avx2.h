/*
 * quant_avx2.h - the AVX2 integer kernels of quant.c (included by quant.c
 * only). Compiled with __attribute__((target("avx2"))) and chosen at run
 * time, so the build needs no -mavx2. Each kernel computes exactly the
 * integers its portable twin in quant.c computes.
 */
#ifndef PARLEY_QUANT_AVX2_H
#define PARLEY_QUANT_AVX2_H

#endif /* PARLEY_QUANT_AVX2_H */

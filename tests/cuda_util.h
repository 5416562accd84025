/*
 * cuda_util.h - device memory helpers shared by the CUDA op tests
 * (t_cuda_ops, t_cuda_iq, t_cuda_moe). Static: each test includes it
 * once.
 */
#ifndef PARLEY_CUDA_UTIL_H
#define PARLEY_CUDA_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_ops.h"
#include "f16.h"
#include "quant.h"

/* Device copy of N bytes of HOST, or N uninitialised bytes for NULL
 * (exits the test on failure: without device memory nothing can run). */
static inline void *dev_put(const void *host, size_t n)
{
	void *d = NULL;

	if (cudaMalloc(&d, n ? n : 1) != cudaSuccess ||
	    (host &&
	     cudaMemcpy(d, host, n, cudaMemcpyHostToDevice) != cudaSuccess)) {
		printf("Bail out! cudaMalloc/cudaMemcpy of %zu bytes\n", n);
		exit(1);
	}
	return d;
}

/* Copy N bytes back from the device after the stream finished. */
static inline int dev_get(struct cuda_ctx *ctx, void *host, const void *d,
                          size_t n)
{
	return cudaStreamSynchronize(ctx->stream) == cudaSuccess &&
	               cudaMemcpy(host, d, n, cudaMemcpyDeviceToHost) ==
	                   cudaSuccess
	           ? 0
	           : -1;
}

/* Put half V at P. */
static inline void put_half(unsigned char *p, float v)
{
	uint16_t h = f32_to_f16(v);

	memcpy(p, &h, 2);
}

/* XHAT: N rows of NE0 activations X as the int8 mat-vec sees them (the
 * CPU engine's quantization per 32, dequantized: cuda_vecdot8.cuh note
 * 2). */
static inline void x8_dequant(const float *x, int64_t ne0, int64_t n,
                              double *xhat)
{
	void *vec = malloc(quant_vec_size(QTYPE_Q8_0, ne0));

	for (int64_t t = 0; t < n; t++) {
		quant_vec_prepare(QTYPE_Q8_0, x + t * ne0, ne0, vec);
		quant_vec_dequant(QTYPE_Q8_0, vec, xhat + t * ne0, ne0);
	}
	free(vec);
}

#endif /* PARLEY_CUDA_UTIL_H */

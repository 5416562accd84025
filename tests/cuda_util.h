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

#endif /* PARLEY_CUDA_UTIL_H */

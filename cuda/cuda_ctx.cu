/*
 * cuda_ctx.cu - the context of the CUDA ops (cuda_ctx.h): its stream,
 * cuBLAS handle and scratch, made and freed.
 *
 * The scratch is allocated once, at init, for the largest product the
 * engine will run (the GEMM's fp16 weights and activations, the int8
 * activations in as many bytes as the fp16 ones); only the split
 * attention's partials grow later (cuda_attn.cu), and are freed here.
 */
#include "cuda_ctx.h"
#include "cuda_knobs.h"

#include <cuda_fp16.h>
#include <stdio.h>
#include <string.h>

/* The message of a failed allocation of the GEMM scratch (W16_CAP and
 * X16_CAP as cuda_ctx_init's), RC the allocation's error; the runtime's
 * last error is cleared, so that no later launch check reports it. */
static void cuda_ctx_alloc_err(cudaError_t rc, size_t w16_cap, size_t x16_cap,
                               char *err, size_t errlen)
{
	(void)cudaGetLastError();
	snprintf(err, errlen, "%.1f MiB of GEMM scratch: %s (%s)",
	         (double)(w16_cap + 2 * x16_cap) * 2 / (1 << 20),
	         cudaGetErrorName(rc), cudaGetErrorString(rc));
}

extern "C" int cuda_ctx_init(struct cuda_ctx *ctx, size_t w16_cap,
                             size_t x16_cap, char *err, size_t errlen)
{
	int dev = 0, major = 0;
	cudaError_t rc;
	cublasStatus_t st;

	memset(ctx, 0, sizeof(*ctx));
	ctx->attn_tiles = !cuda_knobs()->attn_mma;
	rc = cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking);
	if (rc != cudaSuccess) {
		(void)cudaGetLastError();
		snprintf(err, errlen, "cudaStreamCreate: %s (%s)",
		         cudaGetErrorName(rc), cudaGetErrorString(rc));
		return -1;
	}
	st = cublasCreate(&ctx->blas);
	if (st == CUBLAS_STATUS_SUCCESS)
		st = cublasSetStream(ctx->blas, ctx->stream);
	if (st != CUBLAS_STATUS_SUCCESS) {
		snprintf(err, errlen, "cuBLAS handle: %s",
		         cublasGetStatusName(st));
		cuda_ctx_free(ctx);
		return -1;
	}
	if ((rc = cudaMalloc(&ctx->d_w16, w16_cap * sizeof(__half))) !=
	        cudaSuccess ||
	    (rc = cudaMalloc(&ctx->d_x16, x16_cap * sizeof(__half))) !=
	        cudaSuccess ||
	    (rc = cudaMalloc(&ctx->d_xq, x16_cap * sizeof(__half))) !=
	        cudaSuccess) {
		cuda_ctx_alloc_err(rc, w16_cap, x16_cap, err, errlen);
		cuda_ctx_free(ctx);
		return -1;
	}
	ctx->w16_cap = w16_cap;
	ctx->x16_cap = x16_cap;
	if ((rc = cudaGetDevice(&dev)) != cudaSuccess ||
	    (rc = cudaDeviceGetAttribute(&major,
	                                 cudaDevAttrComputeCapabilityMajor,
	                                 dev)) != cudaSuccess ||
	    (rc = cudaDeviceGetAttribute(&ctx->n_sm,
	                                 cudaDevAttrMultiProcessorCount,
	                                 dev)) != cudaSuccess) {
		(void)cudaGetLastError();
		snprintf(err, errlen, "device attributes: %s (%s)",
		         cudaGetErrorName(rc), cudaGetErrorString(rc));
		cuda_ctx_free(ctx);
		return -1;
	}
	ctx->pdl = major >= 9;
	/* as many bytes as the fp16 activations: int8 ones take 1.25 bytes
	   an element, for fewer than CUDA_GEMM_MIN_TOKENS tokens */
	ctx->xq_cap = x16_cap * sizeof(__half);
	return 0;
}

extern "C" void cuda_ctx_free(struct cuda_ctx *ctx)
{
	if (ctx->blas)
		cublasDestroy(ctx->blas);
	cudaFree(ctx->d_w16);
	cudaFree(ctx->d_x16);
	cudaFree(ctx->d_xq);
	cudaFree(ctx->d_attn);
	cudaFree(ctx->d_attn_graph);
	if (ctx->stream)
		cudaStreamDestroy(ctx->stream);
	memset(ctx, 0, sizeof(*ctx));
}

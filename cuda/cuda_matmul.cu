/*
 * cuda_matmul.cu - products with GGUF weights on the GPU: embedding rows,
 * the mat-vec of decode, the cuBLAS GEMM of prefill; and the context
 * (stream, cuBLAS handle, scratch) they run in.
 *
 * NOTES ON THE DESIGN
 *
 * Mat-vec (fewer than CUDA_GEMM_MIN_TOKENS tokens): one warp per output
 * row, MM_WARPS rows per block; the row is read once per token; fp32
 * products and sums, one shuffle reduction per row. F16, Q8_0, Q4_0, Q4_1,
 * Q4_K and Q6_K (when aligned): lanes take whole blocks or sub-blocks
 * with wide loads (cm_matvec_unit, cuda_vecdot.cuh). The other types:
 * lanes on consecutive elements through the element decoder (cm_matvec),
 * so a warp still reads a contiguous span of the row (coalesced). Fused
 * epilogues and several rows per warp are later work.
 *
 * GEMM (prefill): cuBLAS wants plain fp16 matrices, so a chunk of rows of W
 * is dequantized into the fp16 scratch (ctx->d_w16, sized for a bounded
 * number of elements, not the whole model) and X is converted to fp16
 * once; then y = W x is, in cuBLAS's column-major terms,
 *   C (n_rows x n_tok, ldc = n_out) = op_T(A: n_in x n_rows, lda = n_in)
 *                                      * B (n_in x n_tok, ldb = n_in)
 * because a GGUF weight is row-major [n_out][n_in] (n_in contiguous) and
 * our activations are token-major [n_tok][dim]. Accumulation and output
 * are fp32 (CUBLAS_COMPUTE_32F). fp16 keeps 11 significant bits: the
 * inputs of every product are normalised activations or SwiGLU outputs,
 * far inside fp16's range; the residual stream itself stays fp32.
 */
#include "cuda_check.cuh"
#include "cuda_ops.h"
#include "cuda_quant.cuh"
#include "cuda_vecdot.cuh"

#include <string.h>

#define MM_WARPS 4 /* warps (rows) per mat-vec block */

/* ------------------------------------------------------------- kernels */

/* OUT[r][i] = row ROWS[r] of W, element i, as fp32. One thread per
 * element: consecutive threads read consecutive elements of one row. */
template <int T>
__global__ void cm_get_rows(const uint8_t *w, size_t row_size, int64_t ne0,
                            const int32_t *rows, int64_t n, float *out)
{
	int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (idx >= n)
		return;
	int64_t r = idx / ne0, i = idx % ne0;
	out[idx] = cq_row_elem<T>(w + (size_t)rows[r] * row_size, i);
}

/* Y[t][row] = W row . X[t]; warp per row, blockIdx.y = token. */
template <int T>
__global__ void cm_matvec(const uint8_t *w, size_t row_size, int64_t ne0,
                          int64_t ne1, const float *x, float *y)
{
	const int lane = threadIdx.x & 31;
	const int64_t row = (int64_t)blockIdx.x * MM_WARPS + (threadIdx.x >> 5);
	const int64_t t = blockIdx.y;

	if (row >= ne1)
		return;
	const uint8_t *wr = w + (size_t)row * row_size;
	const float *xt = x + t * ne0;
	float acc = 0.0f;

	for (int64_t i = lane; i < ne0; i += 32)
		acc += cq_row_elem<T>(wr, i) * xt[i];
	for (int off = 16; off > 0; off >>= 1)
		acc += __shfl_xor_sync(0xffffffffu, acc, off);
	if (lane == 0)
		y[t * ne1 + row] = acc;
}

/* The fast mat-vec for the types of cuda_vecdot.cuh: warp per row, a lane
 * takes whole units (cv_unit<T>), two in flight per iteration so each
 * lane has two loads outstanding; blockIdx.y = token. */
template <int T>
__global__ void cm_matvec_unit(const uint8_t *w, size_t row_size, int64_t ne0,
                               int64_t ne1, const float *x, float *y)
{
	const int lane = threadIdx.x & 31;
	const int64_t row = (int64_t)blockIdx.x * MM_WARPS + (threadIdx.x >> 5);
	const int64_t t = blockIdx.y;
	const int64_t nu = ne0 / cv_unit<T>::ne;

	if (row >= ne1)
		return;
	const uint8_t *wr = w + (size_t)row * row_size;
	const float *xt = x + t * ne0;
	float acc0 = 0.0f, acc1 = 0.0f;
	int64_t u = lane;

	for (; u + 32 < nu; u += 64) {
		acc0 += cv_unit<T>::dot(wr, u, xt);
		acc1 += cv_unit<T>::dot(wr, u + 32, xt);
	}
	if (u < nu)
		acc0 += cv_unit<T>::dot(wr, u, xt);
	acc0 += acc1;
	for (int off = 16; off > 0; off >>= 1)
		acc0 += __shfl_xor_sync(0xffffffffu, acc0, off);
	if (lane == 0)
		y[t * ne1 + row] = acc0;
}

/* OUT[r][i] = fp16 of row R0 + r of W, element i, for N elements. */
template <int T>
__global__ void cm_dequant_f16(const uint8_t *w, size_t row_size, int64_t ne0,
                               int64_t r0, int64_t n, __half *out)
{
	int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (idx >= n)
		return;
	int64_t r = idx / ne0, i = idx % ne0;
	out[idx] =
	    __float2half_rn(cq_row_elem<T>(w + (size_t)(r0 + r) * row_size, i));
}

/* OUT[i] = fp16 of X[i]. */
__global__ void cm_to_f16(const float *x, int64_t n, __half *out)
{
	int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (idx < n)
		out[idx] = __float2half_rn(x[idx]);
}

/* ------------------------------------------------------------ helpers */

/* Blocks of 256 threads covering N elements. */
static unsigned cm_blocks(int64_t n)
{
	return (unsigned)((n + 255) / 256);
}

extern "C" int cuda_ops_type_ok(uint32_t t)
{
	switch (t) {
#define X(T)                                                                   \
	case T:                                                                \
		return 1;
		CQ_FOR_EACH_TYPE(X)
#undef X
	default:
		return 0;
	}
}

/* The message for a type without kernels. */
static int cm_bad_type(uint32_t t, char *err, size_t errlen)
{
	snprintf(err, errlen, "type %s (id %u) has no CUDA kernel",
	         qtype_name(t), t);
	return -1;
}

/* ------------------------------------------------------------ context */

extern "C" int cuda_ctx_init(struct cuda_ctx *ctx, size_t w16_cap,
                             size_t x16_cap, char *err, size_t errlen)
{
	memset(ctx, 0, sizeof(*ctx));
	if (cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking) !=
	    cudaSuccess) {
		snprintf(err, errlen, "cudaStreamCreate: %s",
		         cudaGetErrorString(cudaGetLastError()));
		return -1;
	}
	if (cublasCreate(&ctx->blas) != CUBLAS_STATUS_SUCCESS ||
	    cublasSetStream(ctx->blas, ctx->stream) != CUBLAS_STATUS_SUCCESS ||
	    cudaMalloc(&ctx->d_w16, w16_cap * sizeof(__half)) != cudaSuccess ||
	    cudaMalloc(&ctx->d_x16, x16_cap * sizeof(__half)) != cudaSuccess) {
		snprintf(err, errlen,
		         "cuBLAS handle or %.1f MiB of GEMM scratch: %s",
		         (double)(w16_cap + x16_cap) * 2 / (1 << 20),
		         cudaGetErrorString(cudaGetLastError()));
		cuda_ctx_free(ctx);
		return -1;
	}
	ctx->w16_cap = w16_cap;
	ctx->x16_cap = x16_cap;
	return 0;
}

extern "C" void cuda_ctx_free(struct cuda_ctx *ctx)
{
	if (ctx->blas)
		cublasDestroy(ctx->blas);
	cudaFree(ctx->d_w16);
	cudaFree(ctx->d_x16);
	cudaFree(ctx->d_attn);
	if (ctx->stream)
		cudaStreamDestroy(ctx->stream);
	memset(ctx, 0, sizeof(*ctx));
}

/* --------------------------------------------------------- launchers */

extern "C" int cuda_op_get_rows(struct cuda_ctx *ctx,
                                const struct cuda_tensor *w,
                                const int32_t *d_rows, int32_t n_rows,
                                float *d_out, char *err, size_t errlen)
{
	int64_t n = (int64_t)n_rows * w->ne0;
	const uint8_t *wd = (const uint8_t *)w->d;

	switch (w->type) {
#define X(T)                                                                   \
	case T:                                                                \
		cm_get_rows<T><<<cm_blocks(n), 256, 0, ctx->stream>>>(         \
		    wd, w->row_size, w->ne0, d_rows, n, d_out);                \
		break;
		CQ_FOR_EACH_TYPE(X)
#undef X
	default:
		return cm_bad_type(w->type, err, errlen);
	}
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

/* The mat-vec path: one launch, grid.y over the tokens. */
static int cm_matvec_launch(struct cuda_ctx *ctx, const struct cuda_tensor *w,
                            const float *d_x, int32_t n_tok, float *d_y,
                            char *err, size_t errlen)
{
	dim3 grid((unsigned)((w->ne1 + MM_WARPS - 1) / MM_WARPS),
	          (unsigned)n_tok);
	const uint8_t *wd = (const uint8_t *)w->d;
	/* cuda_vecdot.cuh's alignment: rows 4-byte aligned (16 for F16 and
	 * whole units of 8), activations 16-byte aligned */
	const uintptr_t al = (uintptr_t)wd | (uintptr_t)w->row_size;
	const int unit_ok =
	    (uintptr_t)d_x % 16 == 0 && al % 4 == 0 &&
	    (w->type != QTYPE_F16 || (al % 16 == 0 && w->ne0 % 8 == 0));

	if (unit_ok) {
		switch (w->type) {
#define X(T)                                                                   \
	case T:                                                                \
		cm_matvec_unit<T><<<grid, 32 * MM_WARPS, 0, ctx->stream>>>(    \
		    wd, w->row_size, w->ne0, w->ne1, d_x, d_y);                \
		CUDA_TRY_LAUNCH(err, errlen);                                  \
		return 0;
			CV_FOR_EACH_TYPE(X)
#undef X
		default:
			break; /* the element-wise kernel below */
		}
	}
	switch (w->type) {
#define X(T)                                                                   \
	case T:                                                                \
		cm_matvec<T><<<grid, 32 * MM_WARPS, 0, ctx->stream>>>(         \
		    wd, w->row_size, w->ne0, w->ne1, d_x, d_y);                \
		break;
		CQ_FOR_EACH_TYPE(X)
#undef X
	default:
		return cm_bad_type(w->type, err, errlen);
	}
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

/* Rows [r0, r0 + n_rows) of W as fp16 into ctx->d_w16. */
static int cm_dequant_launch(struct cuda_ctx *ctx, const struct cuda_tensor *w,
                             int64_t r0, int64_t n_rows, char *err,
                             size_t errlen)
{
	int64_t n = n_rows * w->ne0;
	const uint8_t *wd = (const uint8_t *)w->d;
	__half *out = (__half *)ctx->d_w16;

	switch (w->type) {
#define X(T)                                                                   \
	case T:                                                                \
		cm_dequant_f16<T><<<cm_blocks(n), 256, 0, ctx->stream>>>(      \
		    wd, w->row_size, w->ne0, r0, n, out);                      \
		break;
		CQ_FOR_EACH_TYPE(X)
#undef X
	default:
		return cm_bad_type(w->type, err, errlen);
	}
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

/* The GEMM path: X to fp16 once, then W chunk by chunk through cuBLAS. */
static int cm_gemm(struct cuda_ctx *ctx, const struct cuda_tensor *w,
                   const float *d_x, int32_t n_tok, float *d_y, char *err,
                   size_t errlen)
{
	const int64_t n_in = w->ne0, n_out = w->ne1;
	const int64_t nx = (int64_t)n_tok * n_in;
	int64_t chunk = (int64_t)(ctx->w16_cap / (size_t)n_in);
	const float alpha = 1.0f, beta = 0.0f;

	if ((size_t)nx > ctx->x16_cap || chunk < 1) {
		snprintf(err, errlen,
		         "GEMM scratch too small: %lld tokens x %lld inputs "
		         "(have %zu, %zu elements)",
		         (long long)n_tok, (long long)n_in, ctx->x16_cap,
		         ctx->w16_cap);
		return -1;
	}
	cm_to_f16<<<cm_blocks(nx), 256, 0, ctx->stream>>>(d_x, nx,
	                                                  (__half *)ctx->d_x16);
	CUDA_TRY_LAUNCH(err, errlen);
	for (int64_t r0 = 0; r0 < n_out; r0 += chunk) {
		int64_t nr = n_out - r0 < chunk ? n_out - r0 : chunk;

		if (cm_dequant_launch(ctx, w, r0, nr, err, errlen))
			return -1;
		/* same stream: the next chunk's dequantization waits for
		 * this GEMM to have read the scratch */
		CUBLAS_TRY(cublasGemmEx(ctx->blas, CUBLAS_OP_T, CUBLAS_OP_N,
		                        (int)nr, (int)n_tok, (int)n_in, &alpha,
		                        ctx->d_w16, CUDA_R_16F, (int)n_in,
		                        ctx->d_x16, CUDA_R_16F, (int)n_in,
		                        &beta, d_y + r0, CUDA_R_32F, (int)n_out,
		                        CUBLAS_COMPUTE_32F,
		                        CUBLAS_GEMM_DEFAULT),
		           err, errlen);
	}
	return 0;
}

extern "C" int cuda_op_matmul(struct cuda_ctx *ctx, const struct cuda_tensor *w,
                              const float *d_x, int32_t n_tok, float *d_y,
                              int force, char *err, size_t errlen)
{
	int gemm = force == 2 || (force == 0 && n_tok >= CUDA_GEMM_MIN_TOKENS);

	if (!cuda_ops_type_ok(w->type))
		return cm_bad_type(w->type, err, errlen);
	if (gemm)
		return cm_gemm(ctx, w, d_x, n_tok, d_y, err, errlen);
	return cm_matvec_launch(ctx, w, d_x, n_tok, d_y, err, errlen);
}

/*
 * cuda_ctx.h - the context every CUDA op runs in (C interface): the
 * stream, the cuBLAS handle, the scratch of the GEMM path, the int8
 * activations and the split attention, and the launch settings the
 * backend chose. cuda_ctx_init makes one, cuda_ctx_free frees it
 * (cuda_ctx.cu); the ops take it (cuda_ops.h).
 */
#ifndef PARLEY_CUDA_CTX_H
#define PARLEY_CUDA_CTX_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Stream, cuBLAS handle and the scratch of the GEMM path. */
struct cuda_ctx {
	cudaStream_t stream;
	cublasHandle_t blas;
	void *d_w16;    /* fp16 dequantized weight rows (GEMM path) */
	size_t w16_cap; /* elements of d_w16 */
	void *d_x16;    /* fp16 copy of the activations (GEMM path) */
	size_t x16_cap; /* elements of d_x16 */
	void *d_xq;     /* int8 activations of the mat-vec (cuda_vecdot8.cuh) */
	size_t xq_cap;  /* bytes of d_xq */
	/* 1: the mat-vec keeps fp32 activations for every type (the path
	   before int8 activations, kept to measure one against the other and
	   tested on its own; PARLEY_CUDA_MATVEC_F32=1 in the backend,
	   cuda_knobs.h) */
	int x8_off;
	/* 1: every mat-vec row group takes a whole warp (cuda_matmul.cu
	   cm_lanes: short rows then leave lanes idle; kept to test the
	   narrower groups' bits against it; PARLEY_CUDA_LANE_GROUPS=0 in the
	   backend) */
	int lanes_off;
	/* 1: a mixture's gated product with biases and its down product with
	   the weighted sum take the separate launches (cuda_op_moe_gated,
	   cuda_op_moe_down_sum: kept to test the fused ones' bits against
	   them; PARLEY_CUDA_MOE_FUSE=0 in the backend) */
	int moe_fuse_off;
	/* 1: what cuda_op_rmsnorm_add_scale, cuda_op_rmsnorm_plus,
	   cuda_op_rmsnorm_add_scale_x8 and cuda_op_gate_act_rows_x8 fold
	   into one launch takes its own (cuda_op_scale, cuda_op_add; no int8
	   activations: the mat-vec after makes them), the same bits: kept to
	   compare; PARLEY_CUDA_NORM_FUSE=0 in the backend */
	int norm_fuse_off;
	/* 1: kernels launch with programmatic dependent launch
	   (cuda_launch.cuh); set at init on compute capability 9.0+, the
	   backend clears it for PARLEY_CUDA_PDL=0 */
	int pdl;
	/* a mat-vec whose weights are at most this many bytes prefetches its
	   rows into L2 before it waits for the previous kernel
	   (cuda_launch.cuh); the backend sets it where it pays (backend_cuda.cu
	   CU_PREFETCH_MAX, CU_PREFETCH_PRODUCT); 0: never */
	size_t prefetch_max;
	/* multiprocessors of the device (launch shapes that fill the GPU) */
	int n_sm;
	void *d_attn;    /* fp32 partials of the split decode attention */
	size_t attn_cap; /* floats of d_attn (grown on demand) */
	/* the same for the captured decode steps, allocated once for them
	   all (cuda_op_attention_graph_reserve): a graph names its buffer,
	   so d_attn, freed when it grows, must never be in one */
	void *d_attn_graph;
	size_t attn_graph_cap; /* floats of d_attn_graph */
	/* A decode step captured into a CUDA graph (backend_cuda.cu): while
	   d_pos is set, the ops that depend on the position (RoPE, the KV
	   store, attention) read the position of token 0 from the device
	   int *d_pos instead of their pos0 argument, and the attention's
	   launch shape covers pos_cap positions (chunks past the real length
	   exit at once), so one graph serves every position below pos_cap.
	   NULL: positions come from the arguments. *d_pos is written by a
	   copy, never a kernel, and complete before the ops are launched
	   (they read it before their PDL wait: cuda_launch.cuh). */
	const int32_t *d_pos;
	int32_t pos_cap;
	/* 1: the KV cache holds q8_0 blocks (cuda_kvq.cuh; the backend's
	   engine_params.kv_type): the KV stores quantize, the attention
	   reads blocks; 0: fp16. Set by the owner after init */
	int kv_q8;
	/* a batch's attention on the fp32 tiles rather than the tensor
	   cores (PARLEY_CUDA_ATTN_MMA=0 at init, or a test measuring or
	   checking the one against the other) */
	int attn_tiles;
	/* kv_q8 and a batch of queries: a layer's K then V dequantized to
	   fp16 ([n_kv][n_ctx][head_dim] halves each) for the batch
	   kernels; kv16_cap halves in all. Owned by whoever sets it (the
	   backend allocates it at open), NULL: a batch is refused */
	void *d_kv16;
	size_t kv16_cap;
};

/* Create the stream and cuBLAS handle; scratch: W16_CAP fp16 elements of
 * weights (at least one row of the widest matrix) and X16_CAP of
 * activations. Returns 0, or -1 with a message naming the CUDA or cuBLAS
 * error (ctx freed). The caller owns CTX until cuda_ctx_free. */
int cuda_ctx_init(struct cuda_ctx *ctx, size_t w16_cap, size_t x16_cap,
                  char *err, size_t errlen);

/* Free everything CTX holds, the attention scratch the ops grew included
 * (NULL members allowed); CTX is zeroed. */
void cuda_ctx_free(struct cuda_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif /* PARLEY_CUDA_CTX_H */

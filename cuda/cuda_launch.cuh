/*
 * cuda_launch.cuh - how the CUDA backend launches its kernels: with
 * programmatic dependent launch (PDL) where the GPU has it.
 *
 * NOTES ON THE DESIGN
 *
 * A decode step is ~10 small kernels a layer; on a small model each one
 * waits for the previous to drain, then pays its own launch and ramp
 * before its first load: longer than reading its weights takes. With PDL
 * (compute capability 9.0+) a kernel's blocks may be scheduled while the
 * previous kernel still runs; each waits at griddepcontrol.wait until
 * that kernel has finished and its writes are visible. The invariant that
 * makes it safe, for every kernel launched by cu_launch:
 *
 *   cu_pdl_sync() (or cu_pdl_wait()) is executed by every thread before
 *   its first access of memory that earlier work in the stream writes or
 *   reads, and before the thread can exit.
 *
 * (tests/t_cuda_pdl.sh checks it in the source of every file that
 * includes this header.) So a kernel starts its real work only after its
 * predecessor has completed, and by induction after everything earlier
 * in the stream (a kernel cannot complete before its own wait returned).
 * What may run before the wait (each load moved there takes a round trip
 * off the kernel's path):
 *   - index arithmetic;
 *   - reading the weights, which no kernel writes (the mat-vec
 *     prefetches its rows into L2 there, the RMSNorm loads its weight);
 *   - reading a captured step's position (cuda_ctx.d_pos): the decode
 *     graph's first node copies it from pinned host memory, and the
 *     step's first kernel follows that copy by an ordinary edge, so the
 *     copy is complete before any kernel of the step can start; the next
 *     replay's copy comes after this replay;
 *   - prefetching any address into L2 (prefetch.global.L2): every SM's
 *     writes meet in L2, so a line fetched early is not stale; it is a
 *     load into registers (or L1) that must wait.
 * cu_pdl_sync then lets the next kernel be scheduled
 * (launch_dependents): one kernel of look-ahead, whose blocks only fill
 * slots this one leaves.
 *
 * The attribute only lets a kernel overlap the kernel before it, as far
 * as that one allows (launch_dependents, or its end): after a copy the
 * launch is ordinary, and after a cuBLAS kernel the wait covers it.
 * Without PDL (ctx->pdl 0, an older GPU, PARLEY_CUDA_PDL=0) both
 * instructions are no-ops and launches are ordinary.
 */
#ifndef PARLEY_CUDA_LAUNCH_CUH
#define PARLEY_CUDA_LAUNCH_CUH

#include "cuda_ops.h"

#include <cuda_runtime.h>
#include <utility>

/* Wait until the previous kernel in the stream has completed and its
 * writes are visible (no-op when not launched with PDL). */
static __device__ __forceinline__ void cu_pdl_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* Let the next kernel in the stream be scheduled (its blocks wait for
 * this one's completion in their own cu_pdl_wait). */
static __device__ __forceinline__ void cu_pdl_launch_next(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* The first statement of every kernel launched by cu_launch (the
 * invariant above), unless it prefetches weights before cu_pdl_wait. */
static __device__ __forceinline__ void cu_pdl_sync(void)
{
	cu_pdl_wait();
	cu_pdl_launch_next();
}

/* KERNEL<<<GRID, BLOCK, SMEM, STREAM>>>(ARGS...), with PDL when PDL is
 * non-zero. Errors are left for cudaGetLastError (CUDA_TRY_LAUNCH), as
 * for the <<<>>> form. */
template <typename... KArgs, typename... Args>
static inline void cu_launch_on(cudaStream_t stream, int pdl,
                                void (*kernel)(KArgs...), dim3 grid, dim3 block,
                                size_t smem, Args &&...args)
{
	cudaLaunchConfig_t cfg = {};
	cudaLaunchAttribute attr[1] = {};

	cfg.gridDim = grid;
	cfg.blockDim = block;
	cfg.dynamicSmemBytes = smem;
	cfg.stream = stream;
	if (pdl) {
		attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
		attr[0].val.programmaticStreamSerializationAllowed = 1;
		cfg.attrs = attr;
		cfg.numAttrs = 1;
	}
	(void)cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

/* KERNEL<<<GRID, BLOCK, SMEM, ctx->stream>>>(ARGS...), with PDL when
 * ctx->pdl. */
template <typename... KArgs, typename... Args>
static inline void cu_launch(const struct cuda_ctx *ctx,
                             void (*kernel)(KArgs...), dim3 grid, dim3 block,
                             size_t smem, Args &&...args)
{
	cu_launch_on(ctx->stream, ctx->pdl, kernel, grid, block, smem,
	             std::forward<Args>(args)...);
}

#endif /* PARLEY_CUDA_LAUNCH_CUH */

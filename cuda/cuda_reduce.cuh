/*
 * cuda_reduce.cuh - the warp and block reductions of the CUDA kernels,
 * written once: sums, maxima and minima over a warp or the four lanes of
 * a quad (xor butterflies), over a block (the warps' results combined in
 * a fixed order), and a warp's inclusive prefix sum.
 *
 * NOTES ON THE DESIGN
 *
 * 1. A float sum depends on the order of its additions, and every GPU
 *    result is held to the CPU reference's (or to another kernel's) bits,
 *    so the order is in each helper's name and never changes:
 *      red_warp<OP>  xor offsets 16, 8, 4, 2, 1 (all 32 lanes);
 *      red_quad<OP>  xor offsets 1, 2 (lanes 4k .. 4k + 3: the split
 *                    attention's four threads of a position, the tiled
 *                    attention's four threads of a softmax row).
 *    OP is red_add, red_max or red_min, applied in place in the form the
 *    kernels wrote it before: v += the partner's v; v = fmaxf(v, the
 *    partner's v) (fmax for doubles); v = fminf(v, ..) (fmin). The value
 *    keeps the caller's type (float, double or int). The form decides
 *    the operand order of the instruction nvcc emits, so the kernels
 *    compiled to the same machine code with these helpers as with their
 *    own loops.
 * 2. Every lane of the warp calls a helper (full mask) and gets the
 *    result.
 * 3. Block reductions (NT threads, whole warps): red_block reduces each
 *    warp, then every thread combines the warps' results in warp order
 *    (v = r[0], then OP with r[1], r[2], ..), so the rounding does not
 *    depend on timing (the select step's sums). red_block_max_xor
 *    combines the warps' maxima by a second butterfly instead (a maximum
 *    is exact in any order).
 */
#ifndef PARLEY_CUDA_REDUCE_CUH
#define PARLEY_CUDA_REDUCE_CUH

#include <math.h>
#include <stdint.h>

#define RED_FULL 0xffffffffu /* every lane of the warp */

/* A += B */
struct red_add {
	template <class T>
	__device__ __forceinline__ void operator()(T &a, T b) const
	{
		a += b;
	}
};

/* A = fmaxf(A, B), or fmax for doubles */
struct red_max {
	__device__ __forceinline__ void operator()(float &a, float b) const
	{
		a = fmaxf(a, b);
	}
	__device__ __forceinline__ void operator()(double &a, double b) const
	{
		a = fmax(a, b);
	}
};

/* A = fminf(A, B), or fmin for doubles */
struct red_min {
	__device__ __forceinline__ void operator()(float &a, float b) const
	{
		a = fminf(a, b);
	}
	__device__ __forceinline__ void operator()(double &a, double b) const
	{
		a = fmin(a, b);
	}
};

/* V combined by OP, in place, with the lanes at xor offsets FIRST, ..
 * LAST, halving from FIRST down to LAST or doubling from FIRST up to LAST
 * (note 1). */
template <int FIRST, int LAST, class Op, class T>
static __device__ __forceinline__ void red_xor(T &v)
{
	if constexpr (FIRST >= LAST) {
#pragma unroll
		for (int off = FIRST; off >= LAST; off >>= 1)
			Op()(v, __shfl_xor_sync(RED_FULL, v, off));
	} else {
#pragma unroll
		for (int off = FIRST; off <= LAST; off <<= 1)
			Op()(v, __shfl_xor_sync(RED_FULL, v, off));
	}
}

/* V reduced by OP over the warp (offsets 16, 8, 4, 2, 1). */
template <class Op, class T> static __device__ __forceinline__ T red_warp(T v)
{
	red_xor<16, 1, Op>(v);
	return v;
}

/* V reduced by OP over lanes 4k .. 4k + 3 (offsets 1, 2). */
template <class Op, class T> static __device__ __forceinline__ T red_quad(T v)
{
	red_xor<1, 2, Op>(v);
	return v;
}

/* V replaced by its inclusive prefix sum over the lanes up to LANE (this
 * lane's index): steps at offsets 1, 2, 4, 8, 16, each adding the value
 * of the lane that far below, where there is one. */
static __device__ __forceinline__ void red_warp_scan(int32_t &v, int lane)
{
	for (int o = 1; o < 32; o *= 2) {
		const int32_t x = __shfl_up_sync(RED_FULL, v, o);

		if (lane >= o)
			v += x;
	}
}

/* red_warp_scan of A and B side by side (both shuffles of a step, then
 * both additions). */
static __device__ __forceinline__ void red_warp_scan2(int32_t &a, int32_t &b,
                                                      int lane)
{
	for (int o = 1; o < 32; o *= 2) {
		const int32_t xa = __shfl_up_sync(RED_FULL, a, o);
		const int32_t xb = __shfl_up_sync(RED_FULL, b, o);

		if (lane >= o)
			a += xa, b += xb;
	}
}

/* V[0..NV) reduced by OP over the NT threads of the block, every thread
 * getting the results (note 3: the warps in warp order). SH: NV * NT / 32
 * values of shared memory; it may be the previous call's. */
template <int NT, int NV, class Op, class T>
static __device__ void red_block(T *v, T *sh)
{
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

#pragma unroll
	for (int j = 0; j < NV; j++)
		red_xor<16, 1, Op>(v[j]);
	__syncthreads(); /* SH may still be read by a previous call */
	if (lane == 0)
#pragma unroll
		for (int j = 0; j < NV; j++)
			sh[j * (NT / 32) + warp] = v[j];
	__syncthreads();
#pragma unroll
	for (int j = 0; j < NV; j++) {
		v[j] = sh[j * (NT / 32)];
		for (int w = 1; w < NT / 32; w++)
			Op()(v[j], sh[j * (NT / 32) + w]);
	}
}

/* The maximum of the float V over the NT threads of the block, every
 * thread getting it: each warp's maximum into SH[warp] (NT / 32 floats of
 * shared memory), then the warps' maxima by a second butterfly (-inf for
 * the lanes past them). */
template <int NT>
static __device__ __forceinline__ float red_block_max_xor(float v, float *sh)
{
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

	v = red_warp<red_max>(v);
	if (lane == 0)
		sh[warp] = v;
	__syncthreads();
	v = lane < NT / 32 ? sh[lane] : -INFINITY;
	return red_warp<red_max>(v);
}

#endif /* PARLEY_CUDA_REDUCE_CUH */

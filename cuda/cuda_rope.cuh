/*
 * cuda_rope.cuh - the arithmetic of a rotary position embedding, shared
 * by every GPU path that rotates: el_rope and el_rope_kv_store
 * (cuda_elem.cu), the table of cuda_op_rope_table that the QKV
 * products' epilogue reads (cuda_matmul.cu, cm_rope_pair).
 *
 * Invariant: one expression each, so the paths agree bit for bit with
 * each other (t_cuda_ops checks the fused epilogue against the separate
 * launch) and with the CPU reference (backend_cpu.c: the angle in
 * double, cos and sin rounded to float, the rotation in float with one
 * rounding per operation, no contraction).
 */
#ifndef PARLEY_CUDA_ROPE_CUH
#define PARLEY_CUDA_ROPE_CUH

#include <cstdint>

/* cos and sin of the angle of position POS at frequency INV_FREQ, times
 * MSCALE (YaRN's magnitude; 1 leaves them exact). */
static __device__ __forceinline__ float2 cu_rope_cs(int64_t pos,
                                                    double inv_freq,
                                                    float mscale)
{
	const double theta = (double)pos * inv_freq;

	return make_float2(__fmul_rn((float)cos(theta), mscale),
	                   __fmul_rn((float)sin(theta), mscale));
}

/* The pair (X0, X1) rotated by CS (cu_rope_cs). */
static __device__ __forceinline__ float2 cu_rope_rotate(float x0, float x1,
                                                        float2 cs)
{
	return make_float2(__fsub_rn(__fmul_rn(x0, cs.x), __fmul_rn(x1, cs.y)),
	                   __fadd_rn(__fmul_rn(x0, cs.y), __fmul_rn(x1, cs.x)));
}

/* The dims *A, *B of a head that pair I of N_ROT / 2 = HALF rotates:
 * neighbours (2i, 2i + 1), or NEOX's halves (i, i + half). */
static __device__ __forceinline__ void cu_rope_dims(int i, int half, int neox,
                                                    int *a, int *b)
{
	*a = neox ? i : 2 * i;
	*b = neox ? i + half : 2 * i + 1;
}

#endif

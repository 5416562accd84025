/*
 * cuda_act.cuh - the activations of the gated FFN, act(g) * u, as
 * backend_cpu.c computes them: the same formula and order of operations,
 * each product rounded on its own (no fused multiply-add). One definition
 * for the element-wise kernels (cuda_elem.cu) and the mat-vec's gated
 * epilogue (cuda_matmul.cu), so the fused and unfused paths give the same
 * bits.
 */
#ifndef PARLEY_CUDA_ACT_CUH
#define PARLEY_CUDA_ACT_CUH

#include "model.h" /* enum model_act */

/* silu(g) * u = g / (1 + e^-g) * u. */
static __device__ __forceinline__ float cu_silu_mul(float g, float u)
{
	return __fmul_rn(__fdiv_rn(g, 1.0f + expf(-g)), u);
}

/* gelu_tanh(g) * u = 0.5 g (1 + tanh(sqrt(2/pi) g (1 + 0.044715 g^2))) u. */
static __device__ __forceinline__ float cu_gelu_tanh_mul(float g, float u)
{
	const float in =
	    __fmul_rn(__fmul_rn(0.79788456080286535587989211986876f, g),
	              __fadd_rn(1.0f, __fmul_rn(__fmul_rn(0.044715f, g), g)));

	return __fmul_rn(
	    __fmul_rn(__fmul_rn(0.5f, g), __fadd_rn(1.0f, tanhf(in))), u);
}

/* gpt-oss's clamped SwiGLU (ggml's swiglu_oai, alpha 1.702, limit 7):
 * x = min(g, 7), y = clamp(u, -7, 7), x / (1 + e^(1.702 * -x)) * (y + 1). */
static __device__ __forceinline__ float cu_swiglu_oai_mul(float g, float u)
{
	const float x = fminf(g, 7.0f);
	const float y = fminf(fmaxf(u, -7.0f), 7.0f);

	return __fmul_rn(
	    __fdiv_rn(x, __fadd_rn(1.0f, expf(__fmul_rn(1.702f, -x)))),
	    __fadd_rn(y, 1.0f));
}

/* ACT(g) * u for the activations the GPU has (cu_act_ok). */
static __device__ __forceinline__ float cu_act_mul(int act, float g, float u)
{
	return act == MODEL_ACT_GELU_TANH    ? cu_gelu_tanh_mul(g, u)
	       : act == MODEL_ACT_SWIGLU_OAI ? cu_swiglu_oai_mul(g, u)
	                                     : cu_silu_mul(g, u);
}

/* Whether the GPU computes ACT. */
static inline bool cu_act_ok(enum model_act act)
{
	return act == MODEL_ACT_SILU || act == MODEL_ACT_GELU_TANH ||
	       act == MODEL_ACT_SWIGLU_OAI;
}

#endif /* PARLEY_CUDA_ACT_CUH */

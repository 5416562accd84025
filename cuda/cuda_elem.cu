/*
 * cuda_elem.cu - the element-wise and per-row operations of the forward
 * pass: RMSNorm, RoPE, bias add, residual add, the gated activations,
 * KV-cache store,
 * and RoPE + KV store fused (one launch instead of three per layer).
 *
 * NOTES ON THE DESIGN
 *
 * Each kernel mirrors backend_cpu.c's arithmetic so that the GPU and the
 * CPU reference differ only by summation order: products written as
 * __fmul_rn / __fsub_rn where the CPU rounds twice (no FMA contraction),
 * RoPE angles in double from the same double inverse frequencies, the
 * RMSNorm scale from a double square root. One thread per element and
 * consecutive threads on consecutive elements: every access is coalesced,
 * and these ops are a small share of the traffic next to the weights.
 */
#include "cuda_act.cuh"
#include "cuda_check.cuh"
#include "cuda_launch.cuh"
#include "cuda_ops.h"
#include "cuda_kvq.cuh"
#include "cuda_reduce.cuh"
#include "cuda_rope.cuh"
#include "cuda_vecdot8.cuh"

#include <cuda_fp16.h>

#define EL_THREADS 256

/* Blocks of EL_THREADS covering N elements. */
static unsigned el_blocks(int64_t n)
{
	return (unsigned)((n + EL_THREADS - 1) / EL_THREADS);
}

/* RMSNorm of token rows. A decode step's row is cut into spans of
 * EL_NORM_THREADS elements, a block each (grid.x = el_norm_blocks), and
 * every block first sums the squares of the whole row itself, then
 * scales and quantizes its own span: one round of a load and a
 * 32-element quantization per warp instead of a block walking the row
 * (one 1,024-thread block a row made 4 rounds of quantization one after
 * the other). For many tokens (grid.x = 1) a block walks its row in the
 * same spans: the rows run in parallel and a row read by every block
 * would multiply the L2 traffic.
 *
 * The sum of squares is taken in one fixed order whatever the launch,
 * that of EL_NORM_VT "virtual threads" (the earlier one-block kernel's
 * 1,024 threads): virtual thread v sums fma(x_i, x_i, .) over i = v,
 * v + EL_NORM_VT, ..; each virtual warp's 32 sums are added by an xor
 * butterfly (16, 8, 4, 2, 1), then the 32 warps' sums by another. So
 * every block gets the same scale, the same floats as the one-block
 * kernel gave (the first split summed 16-byte loads in another order,
 * and the real SmolLM2 failed tests/cuda_parity where the one-block order
 * passes), and a host model of the order checks the kernel bit for bit
 * (t_cuda_ops).
 *
 * With XQ (N % 32 == 0, so warp w's elements of an iteration are one
 * block) the output is also quantized for the int8 mat-vec
 * (cuda_vecdot8.cuh) into XQ, cuda_x8_stride(n) bytes a token: the same
 * quants as cm_quantize_x8 makes of it, in the same launch. */
#define EL_NORM_THREADS 256
#define EL_NORM_VT      1024
#define EL_NORM_HOLD    4 /* elements a virtual thread loads at once */
static_assert(EL_NORM_VT % EL_NORM_THREADS == 0 && EL_NORM_VT / 32 == 32,
              "el_rmsnorm: whole virtual warps a warp, 32 of them");

/* Blocks a row of N elements for N_TOK tokens. */
static unsigned el_norm_blocks(int32_t n, int32_t n_tok)
{
	return n_tok < CUDA_GEMM_MIN_TOKENS
	           ? (unsigned)((n + EL_NORM_THREADS - 1) / EL_NORM_THREADS)
	           : 1u;
}

/* The RMSNorm scale 1 / sqrt(mean(x^2) + eps) of row XR (N elements) in
 * the fixed order of the note above, for every thread of a block of
 * EL_NORM_THREADS (each calls it; PART is the block's shared scratch of
 * EL_NORM_VT / 32 floats). */
static __device__ __forceinline__ float
el_norm_scale(const float *xr, int32_t n, float eps, float *part)
{
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

	/* warp w plays virtual warps w, w + 8, w + 16, w + 24; every load
	   of the first EL_NORM_HOLD elements of each is issued before the
	   first product (one L2 round trip, not one per virtual warp); a
	   zero past the row adds nothing: fmaf(0, 0, s) == s */
	constexpr int nk = EL_NORM_VT / EL_NORM_THREADS;
	float v[nk][EL_NORM_HOLD];

#pragma unroll
	for (int k = 0; k < nk; k++)
#pragma unroll
		for (int j = 0; j < EL_NORM_HOLD; j++) {
			const int32_t i =
			    (warp + k * (EL_NORM_THREADS / 32)) * 32 + lane +
			    j * EL_NORM_VT;

			v[k][j] = i < n ? xr[i] : 0.0f;
		}
#pragma unroll
	for (int k = 0; k < nk; k++) {
		const int vw = warp + k * (EL_NORM_THREADS / 32);
		float s = 0.0f;

#pragma unroll
		for (int j = 0; j < EL_NORM_HOLD; j++)
			s = __fmaf_rn(v[k][j], v[k][j], s);
		for (int32_t i = vw * 32 + lane + EL_NORM_HOLD * EL_NORM_VT;
		     i < n; i += EL_NORM_VT) /* rows past the held part */
			s = __fmaf_rn(xr[i], xr[i], s);
		s = red_warp<red_add>(s);
		if (lane == 0)
			part[vw] = s;
	}
	__syncthreads();
	const float ss = red_warp<red_add>(part[lane]);

	return (float)(1.0 / sqrt((double)ss / n + (double)eps));
}

/* OUT = rmsnorm(X) * W, or with ACC (a post-norm, cuda_op_rmsnorm_add):
 * ACC += rmsnorm(X) * W, OUT unused: el_add's addition of el_rmsnorm's
 * output, the same bits; the value written quantized into XQ where not
 * NULL. Two
 * launches folded in where a layer's recipe has them (a launch in a
 * decode step costs more than such a pass): PLUS (no ACC, no XQ): OUT =
 * rmsnorm(X) * W + PLUS, el_add's bits after it; OSCALE != 0 (with ACC):
 * ACC = (ACC + rmsnorm(X) * W) * OSCALE, el_scale's bits after the add
 * (gemma4's per-layer output scale). */
__global__ void __launch_bounds__(EL_NORM_THREADS)
    el_rmsnorm(const float *x, const float *w, int32_t n, float eps, float *out,
               uint8_t *xq, float *acc, const float *plus, float oscale)
{
	const int32_t i0 = (int32_t)blockIdx.x * EL_NORM_THREADS;
	const int32_t i1 = gridDim.x > 1 ? min(n, i0 + EL_NORM_THREADS) : n;
	/* the weight of the thread's first output: a weight, which no kernel
	   writes, so it is loaded before the wait (cuda_launch.cuh) instead
	   of one more round trip after the sum of squares */
	const float w0 =
	    i0 + (int32_t)threadIdx.x < i1 ? w[i0 + threadIdx.x] : 0.0f;

	cu_pdl_sync();
	__shared__ float part[EL_NORM_VT / 32];
	const float *xr = x + (size_t)blockIdx.y * n;
	float *orow = (acc != NULL ? acc : out) + (size_t)blockIdx.y * n;
	uint8_t *tb =
	    xq != NULL ? xq + (size_t)blockIdx.y * cv8_xq_stride(n) : NULL;
	float *d = tb != NULL ? (float *)(tb + n) : NULL; /* scales, sums */
	const int lane = threadIdx.x & 31;
	const float scale = el_norm_scale(xr, n, eps, part);

	for (int32_t i = i0 + threadIdx.x; i < i1; i += EL_NORM_THREADS) {
		const float wi = i < i0 + EL_NORM_THREADS ? w0 : w[i];
		const float o = __fmul_rn(__fmul_rn(xr[i], scale), wi);

		float v = o; /* the value written */

		if (acc != NULL) {
			v = orow[i] + o;
			if (oscale != 0.0f)
				v = __fmul_rn(v, oscale);
		} else if (plus != NULL) {
			v = o + plus[(size_t)blockIdx.y * n + i];
		}
		orow[i] = v;
		if (tb != NULL) /* whole warps: N % 32 == 0 */
			cv8_quantize32(v, lane, (int8_t *)tb + i, d + i / 32,
			               d + n / 32 + i / 32);
	}
}

/* One thread per (token, head, pair). */
__global__ void el_rope(float *x, int32_t n_tok, int32_t n_heads,
                        int32_t head_dim, int32_t n_rot, const double *inv_freq,
                        float mscale, int32_t pos0, const int32_t *dpos,
                        int neox)
{
	const int half = n_rot / 2;

	if (dpos != NULL) /* before the wait: cuda_launch.cuh */
		pos0 = *dpos;
	cu_pdl_sync();
	int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (idx >= (int64_t)n_tok * n_heads * half)
		return;
	const int i = (int)(idx % half);
	const int64_t th = idx / half; /* token * n_heads + head */
	const int32_t t = (int32_t)(th / n_heads);
	float *v = x + th * head_dim;
	const float2 cs = cu_rope_cs(pos0 + t, inv_freq[i], mscale);
	int a, b;

	cu_rope_dims(i, half, neox, &a, &b);
	const float2 y = cu_rope_rotate(v[a], v[b], cs);

	v[a] = y.x;
	v[b] = y.y;
}

__global__ void el_add_bias(float *x, const float *b, int32_t n, int64_t total)
{
	cu_pdl_sync(); /* first: cuda_launch.cuh */
	int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (idx < total)
		x[idx] += b[idx % n];
}

__global__ void el_add(float *x, const float *y, int64_t n)
{
	cu_pdl_sync(); /* first: cuda_launch.cuh */
	int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (idx < n)
		x[idx] += y[idx];
}

/* x[t][i] += sigmoid(g[t]) y[t][i] over n_tok rows of dim (a shared
 * expert's output under its gate). */
__global__ void el_add_gated(float *x, const float *y, const float *g,
                             int32_t dim, int64_t n)
{
	cu_pdl_sync();
	int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (idx < n)
		x[idx] += 1.0f / (1.0f + expf(-g[idx / dim])) * y[idx];
}

/* silu(g) * u and gelu_tanh(g) * u (cuda_act.cuh: the CPU's formulas
 * and order of operations), in place into G. */
__global__ void el_swiglu(float *g, const float *u, int64_t n)
{
	cu_pdl_sync(); /* first: cuda_launch.cuh */
	int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (idx < n)
		g[idx] = cu_silu_mul(g[idx], u[idx]);
}

__global__ void el_swiglu_oai(float *g, const float *u, int64_t n)
{
	cu_pdl_sync(); /* first: cuda_launch.cuh */
	int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (idx < n)
		g[idx] = cu_swiglu_oai_mul(g[idx], u[idx]);
}

__global__ void el_geglu(float *g, const float *u, int64_t n)
{
	cu_pdl_sync(); /* first: cuda_launch.cuh */
	int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (idx < n)
		g[idx] = cu_gelu_tanh_mul(g[idx], u[idx]);
}

/* One thread per element of K (and of V): token-major in, head-major out. */
__global__ void el_kv_store(const float *k, const float *v, int32_t n_tok,
                            int32_t n_kv, int32_t head_dim, int32_t n_ctx,
                            int32_t il, int32_t pos0, const int32_t *dpos,
                            __half *kc, __half *vc)
{
	if (dpos != NULL) /* before the wait: cuda_launch.cuh */
		pos0 = *dpos;
	cu_pdl_sync();
	const int64_t kv_dim = (int64_t)n_kv * head_dim;
	int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (idx >= (int64_t)n_tok * kv_dim)
		return;
	const int64_t t = idx / kv_dim, r = idx % kv_dim;
	const int64_t h = r / head_dim, d = r % head_dim;
	const size_t at = (((size_t)il * n_kv + (size_t)h) * (size_t)n_ctx +
	                   (size_t)(pos0 + t)) *
	                      (size_t)head_dim +
	                  (size_t)d;

	kc[at] = __float2half_rn(k[idx]);
	vc[at] = __float2half_rn(v[idx]);
}

/* el_kv_store into a q8_0 cache: a warp per block of 32 values of K or V
 * (kvq_store32), warps [K blocks | V blocks] of the chunk's rows. */
__global__ void el_kv_store_q8(const float *k, const float *v, int32_t n_tok,
                               int32_t n_kv, int32_t head_dim, int32_t n_ctx,
                               int32_t il, int32_t pos0, const int32_t *dpos,
                               unsigned char *kc, unsigned char *vc)
{
	if (dpos != NULL) /* before the wait: cuda_launch.cuh */
		pos0 = *dpos;
	cu_pdl_sync();
	const int nb = head_dim / 32, lane = threadIdx.x & 31;
	const int64_t per = (int64_t)n_tok * n_kv * nb; /* blocks of K */
	int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;

	if (w >= 2 * per) /* a whole warp */
		return;
	const bool is_v = w >= per;
	w -= is_v ? per : 0;
	const int64_t t = w / ((int64_t)n_kv * nb),
	              r = w % ((int64_t)n_kv * nb);
	const int64_t h = r / nb, b = r % nb;
	const size_t row = ((size_t)il * n_kv + (size_t)h) * (size_t)n_ctx +
	                   (size_t)(pos0 + t);

	kvq_store32((is_v ? v : k)[(t * n_kv + h) * head_dim + b * 32 + lane],
	            lane,
	            (is_v ? vc : kc) + row * kvq_row_bytes(head_dim) +
	                (size_t)b * KVQ_BLOCK);
}

/*
 * RoPE of Q and K and the KV store in one launch (decode's chain of three
 * small kernels cost three launch latencies): block = (token, head hh of
 * the n_head query heads followed by the n_kv key heads); pair i of the
 * head rotated as el_rope does (same operations, so the same bits); a key
 * head also stores its rotated pairs, its unrotated dims and the value
 * head hh - n_head into the fp16 caches as el_kv_store does. Q and K are
 * rotated in place, as the unfused ops leave them.
 *
 * NORM (qwen3, gemma3: a q/k norm, model.h): blocks of EL_NORM_THREADS,
 * and each query head (with QW) and key head (with KW) is first
 * RMS-normed by its weight of head_dim as el_rmsnorm norms a row of
 * head_dim (el_norm_scale: the same bits), into shared memory
 * (head_dim floats, dynamic), then rotated from there: one launch where
 * the chain was two norms and this kernel.
 *
 * VNORM (gemma4, NORM blocks only): each value head RMS-normed without a
 * weight (el_norm_scale's scale, one product, as cpu_rmsnorm without a
 * weight) before its store. N_KV == 0: queries only (nothing stored).
 *
 * Q8 (a q8_0 cache, cuda_ctx.kv_q8): a key head's rotated values are
 * left in K (as always), and after a barrier the block's warps quantize
 * them from there, 32 at a time (kvq_store32), and the value head's as
 * el_kv_store_q8 does: a block needs the whole head (its amax) that no
 * thread of the rotation holds.
 */
template <bool NORM>
__global__ void
el_rope_kv_store(float *q, float *k, const float *v, const float *qw,
                 const float *kw, int vnorm, float eps, int32_t n_head,
                 int32_t n_kv, int32_t head_dim, int32_t n_rot,
                 const double *inv_freq, float mscale, int32_t pos0,
                 const int32_t *dpos, int neox, int32_t n_ctx, int32_t il,
                 __half *kc, __half *vc, int q8)
{
	extern __shared__ float el_head[];      /* NORM: the normed head */
	__shared__ float part[EL_NORM_VT / 32]; /* NORM: el_norm_scale's */

	if (dpos != NULL) /* before the wait: cuda_launch.cuh */
		pos0 = *dpos;
	cu_pdl_sync();
	const int32_t t = blockIdx.x / (n_head + n_kv);
	const int hh = (int)(blockIdx.x % (n_head + n_kv));
	const int is_k = hh >= n_head, h = is_k ? hh - n_head : hh;
	const int half = n_rot / 2;
	float *x = is_k ? k + ((size_t)t * n_kv + h) * head_dim
	                : q + ((size_t)t * n_head + h) * head_dim;
	const float *src = x; /* what is rotated: X, or its norm */
	const size_t at = (((size_t)il * n_kv + (size_t)h) * (size_t)n_ctx +
	                   (size_t)(pos0 + t)) *
	                  (size_t)head_dim;

	if constexpr (NORM) {
		const float *w = is_k ? kw : qw;

		if (w != NULL) {
			const float scale =
			    el_norm_scale(x, head_dim, eps, part);

			for (int d = threadIdx.x; d < head_dim; d += blockDim.x)
				el_head[d] =
				    __fmul_rn(__fmul_rn(x[d], scale), w[d]);
			__syncthreads();
			src = el_head;
			/* the unrotated dims: the norm is their value */
			for (int d = 2 * half + threadIdx.x; d < head_dim;
			     d += blockDim.x)
				x[d] = el_head[d];
		}
	}
	for (int i = threadIdx.x; i < half; i += blockDim.x) {
		const float2 cs = cu_rope_cs(pos0 + t, inv_freq[i], mscale);
		int a, b;

		cu_rope_dims(i, half, neox, &a, &b);
		const float2 y = cu_rope_rotate(src[a], src[b], cs);
		const float ya = y.x, yb = y.y;

		x[a] = ya;
		x[b] = yb;
		if (is_k && !q8) {
			kc[at + a] = __float2half_rn(ya);
			kc[at + b] = __float2half_rn(yb);
		}
	}
	if (!is_k)
		return;
	const float *vr = v + ((size_t)t * n_kv + h) * head_dim;
	float vs = 1.0f; /* VNORM: the value head's RMSNorm scale */

	if constexpr (NORM) {
		if (vnorm) {
			__syncthreads(); /* part is read above: reused */
			vs = el_norm_scale(vr, head_dim, eps, part);
		}
	}
	if (q8) {
		const int lane = threadIdx.x & 31, nw = blockDim.x >> 5;
		const size_t rb = kvq_row_bytes(head_dim), r = at / head_dim;
		unsigned char *kb = (unsigned char *)kc + r * rb;
		unsigned char *vb = (unsigned char *)vc + r * rb;

		__syncthreads(); /* the rotated head is in X */
		for (int b = threadIdx.x >> 5; b < head_dim / 32; b += nw) {
			const int d = b * 32 + lane;

			kvq_store32(x[d], lane, kb + (size_t)b * KVQ_BLOCK);
			kvq_store32(NORM && vnorm ? __fmul_rn(vr[d], vs)
			                          : vr[d],
			            lane, vb + (size_t)b * KVQ_BLOCK);
		}
		return;
	}
	for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
		if (d >= 2 * half)
			kc[at + d] = __float2half_rn(src[d]);
		vc[at + d] = __float2half_rn(
		    NORM && vnorm ? __fmul_rn(vr[d], vs) : vr[d]);
	}
}

/* ((X * s) * MUL) * W over a row of N, s its RMSNorm scale: a block
 * (EL_NORM_THREADS) a row, row blockIdx.y (cuda_op_rmsnorm_mul). */
__global__ void __launch_bounds__(EL_NORM_THREADS)
    el_rmsnorm_mul(const float *x, const float *w, int32_t n, float eps,
                   float mul, float *out)
{
	__shared__ float part[EL_NORM_VT / 32];

	cu_pdl_sync();
	const float *xr = x + (size_t)blockIdx.y * n;
	float *o = out + (size_t)blockIdx.y * n;
	const float scale = el_norm_scale(xr, n, eps, part);

	for (int32_t i = threadIdx.x; i < n; i += EL_NORM_THREADS)
		o[i] = __fmul_rn(__fmul_rn(__fmul_rn(xr[i], scale), mul), w[i]);
}

/* The per-layer inputs (cuda_op_ple_inputs): a block a row of P, row
 * blockIdx.x + gridDim.x blockIdx.y; the row scaled in place first, then
 * its norm read back (a block's global writes are visible to it after the
 * barrier), then the sum written over it (el_norm_scale has read the row
 * before its own barrier). */
__global__ void __launch_bounds__(EL_NORM_THREADS)
    el_ple_inputs(float *p, const float *e, const float *w, int32_t n,
                  int64_t n_rows, float eps, float inv_embd, float inv2)
{
	__shared__ float part[EL_NORM_VT / 32];

	cu_pdl_sync();
	const size_t row = (size_t)blockIdx.y * gridDim.x + blockIdx.x;

	if (row >= (size_t)n_rows) /* (a whole block) */
		return;
	float *pr = p + row * n;
	const float *er = e + row * n;

	for (int32_t i = threadIdx.x; i < n; i += EL_NORM_THREADS)
		pr[i] = __fmul_rn(pr[i], inv_embd);
	__syncthreads();
	const float scale = el_norm_scale(pr, n, eps, part);

	for (int32_t i = threadIdx.x; i < n; i += EL_NORM_THREADS)
		pr[i] = __fmul_rn(
		    __fadd_rn(__fmul_rn(__fmul_rn(pr[i], scale), w[i]), er[i]),
		    inv2);
}

/* G[t][i] = act(G[t][i]) * U[t ldu + i] (cuda_op_gate_act_rows), and
 * quantized into XQ (N % 32 == 0: a warp's 32 elements are a block of
 * one row, and all of a warp's threads are in or past the end) where not
 * NULL, as cm_quantize_x8 quantizes G afterwards. */
__global__ void el_gate_act_rows(int act, float *g, const float *u, int32_t n,
                                 int64_t ldu, int64_t total, uint8_t *xq)
{
	cu_pdl_sync(); /* first: cuda_launch.cuh */
	const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (idx >= total)
		return;
	const int64_t t = idx / n;
	const int32_t i = (int32_t)(idx % n);
	const float v = cu_act_mul(act, g[idx], u[t * ldu + i]);

	g[idx] = v;
	if (xq != NULL) {
		uint8_t *tb = xq + (size_t)t * cv8_xq_stride(n);
		float *d = (float *)(tb + n); /* scales, sums */

		cv8_quantize32(v, (int)(threadIdx.x & 31), (int8_t *)tb + i,
		               d + i / 32, d + n / 32 + i / 32);
	}
}

/* X *= S (cuda_op_scale). */
__global__ void el_scale(float *x, int64_t n, float s)
{
	cu_pdl_sync(); /* first: cuda_launch.cuh */
	const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (idx < n)
		x[idx] = __fmul_rn(x[idx], s);
}

/* X = tanhf(X * INV) * CAP (cuda_op_softcap: ggml's scale, tanh, scale). */
__global__ void el_softcap(float *x, int64_t n, float inv, float cap)
{
	cu_pdl_sync(); /* first: cuda_launch.cuh */
	const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (idx < n)
		x[idx] = __fmul_rn(tanhf(__fmul_rn(x[idx], inv)), cap);
}

/* Statistics of one vector for the trace (the debug pane's per-layer
 * column), computed where the vector is, so that a traced step needs no
 * copy of the residual per layer: one block of EL_STATS_THREADS a vector
 * (row blockIdx.x of X, out[4 * blockIdx.x ..]), double sums. */
#define EL_STATS_THREADS 1024
__global__ void __launch_bounds__(EL_STATS_THREADS)
    el_stats(const float *x, int32_t n, float *out)
{
	cu_pdl_sync();               /* first: cuda_launch.cuh */
	x += (size_t)blockIdx.x * n; /* row blockIdx.x */
	out += 4 * blockIdx.x;
	__shared__ double ssum[EL_STATS_THREADS / 32],
	    ssq[EL_STATS_THREADS / 32];
	__shared__ float smin[EL_STATS_THREADS / 32],
	    smax[EL_STATS_THREADS / 32];
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	double sum = 0, sq = 0;
	float mn = x[0], mx = x[0];

#pragma unroll 4
	for (int32_t i = threadIdx.x; i < n; i += EL_STATS_THREADS) {
		const float v = x[i];

		mn = fminf(mn, v);
		mx = fmaxf(mx, v);
		sum += v;
		sq += (double)v * v;
	}
	mn = red_warp<red_min>(mn);
	mx = red_warp<red_max>(mx);
	sum = red_warp<red_add>(sum);
	sq = red_warp<red_add>(sq);
	if (lane == 0) {
		ssum[warp] = sum;
		ssq[warp] = sq;
		smin[warp] = mn;
		smax[warp] = mx;
	}
	__syncthreads();
	/* the warps in warp order, as red_block (cuda_reduce.cuh) combines
	   them, by the one thread that writes the results */
	if (threadIdx.x == 0) {
		for (int w = 1; w < EL_STATS_THREADS / 32; w++) {
			sum += ssum[w];
			sq += ssq[w];
			mn = fminf(mn, smin[w]);
			mx = fmaxf(mx, smax[w]);
		}
		out[0] = mn;
		out[1] = mx;
		out[2] = (float)(sum / (double)n);
		out[3] = (float)sqrt(sq / (double)n);
	}
}

/* ------------------------------------------------------------ launchers */

/* Where a launch for N_TOK tokens of N values writes their int8
 * activations for the mat-vec that follows (ctx->d_xq), or NULL where
 * that mat-vec takes none (a batch, or no room). */
static uint8_t *el_xq_for(const struct cuda_ctx *ctx, int32_t n, int32_t n_tok)
{
	return n > 0 && n_tok > 0 && n_tok < CUDA_GEMM_MIN_TOKENS &&
	               cuda_x8_room(ctx, n, n_tok)
	           ? (uint8_t *)ctx->d_xq
	           : NULL;
}

/* el_rmsnorm over N_TOK rows of N (its arguments). */
static int el_rmsnorm_launch(struct cuda_ctx *ctx, const float *d_x,
                             const float *d_w, int32_t n, int32_t n_tok,
                             float eps, float *d_out, uint8_t *xq, float *acc,
                             const float *plus, float oscale, char *err,
                             size_t errlen)
{
	cu_launch(
	    ctx, el_rmsnorm, dim3(el_norm_blocks(n, n_tok), (unsigned)n_tok),
	    EL_NORM_THREADS, 0, d_x, d_w, n, eps, d_out, xq, acc, plus, oscale);
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

extern "C" int cuda_op_rmsnorm(struct cuda_ctx *ctx, const float *d_x,
                               const float *d_w, int32_t n, int32_t n_tok,
                               float eps, float *d_out, char *err,
                               size_t errlen)
{
	return el_rmsnorm_launch(ctx, d_x, d_w, n, n_tok, eps, d_out, NULL,
	                         NULL, NULL, 0.0f, err, errlen);
}

extern "C" int cuda_op_rmsnorm_plus(struct cuda_ctx *ctx, const float *d_x,
                                    const float *d_w, int32_t n, int32_t n_tok,
                                    float eps, const float *d_plus,
                                    float *d_out, char *err, size_t errlen)
{
	/* ctx->norm_fuse_off: the add in a launch of its own (OUT may not be
	   PLUS then: the norm would overwrite it first) */
	if (ctx->norm_fuse_off && d_plus != NULL && d_out != d_plus)
		return cuda_op_rmsnorm(ctx, d_x, d_w, n, n_tok, eps, d_out, err,
		                       errlen) ||
		               cuda_op_add(ctx, d_out, d_plus,
		                           (int64_t)n * n_tok, err, errlen)
		           ? -1
		           : 0;
	return el_rmsnorm_launch(ctx, d_x, d_w, n, n_tok, eps, d_out, NULL,
	                         NULL, d_plus, 0.0f, err, errlen);
}

extern "C" int cuda_op_rmsnorm_add(struct cuda_ctx *ctx, const float *d_y,
                                   const float *d_w, int32_t n, int32_t n_tok,
                                   float eps, float *d_x, char *err,
                                   size_t errlen)
{
	return el_rmsnorm_launch(ctx, d_y, d_w, n, n_tok, eps, NULL, NULL, d_x,
	                         NULL, 0.0f, err, errlen);
}

extern "C" int cuda_op_rmsnorm_add_scale(struct cuda_ctx *ctx, const float *d_y,
                                         const float *d_w, int32_t n,
                                         int32_t n_tok, float eps, float oscale,
                                         float *d_x, char *err, size_t errlen)
{
	if (ctx->norm_fuse_off && oscale != 0.0f) /* the scale's own launch */
		return cuda_op_rmsnorm_add(ctx, d_y, d_w, n, n_tok, eps, d_x,
		                           err, errlen) ||
		               cuda_op_scale(ctx, d_x, (int64_t)n * n_tok,
		                             oscale, err, errlen)
		           ? -1
		           : 0;
	return el_rmsnorm_launch(ctx, d_y, d_w, n, n_tok, eps, NULL, NULL, d_x,
	                         NULL, oscale, err, errlen);
}

extern "C" int cuda_op_rmsnorm_add_scale_x8(struct cuda_ctx *ctx,
                                            const float *d_y, const float *d_w,
                                            int32_t n, int32_t n_tok, float eps,
                                            float oscale, float *d_x,
                                            const void **d_xq, char *err,
                                            size_t errlen)
{
	uint8_t *xq = ctx->norm_fuse_off ? NULL : el_xq_for(ctx, n, n_tok);

	*d_xq = NULL;
	if (xq == NULL)
		return cuda_op_rmsnorm_add_scale(ctx, d_y, d_w, n, n_tok, eps,
		                                 oscale, d_x, err, errlen);
	if (el_rmsnorm_launch(ctx, d_y, d_w, n, n_tok, eps, NULL, xq, d_x, NULL,
	                      oscale, err, errlen))
		return -1;
	*d_xq = xq;
	return 0;
}

extern "C" int cuda_op_rmsnorm_x8(struct cuda_ctx *ctx, const float *d_x,
                                  const float *d_w, int32_t n, int32_t n_tok,
                                  float eps, float *d_out, const void **d_xq,
                                  char *err, size_t errlen)
{
	uint8_t *xq = el_xq_for(ctx, n, n_tok);

	*d_xq = NULL;
	if (el_rmsnorm_launch(ctx, d_x, d_w, n, n_tok, eps, d_out, xq, NULL,
	                      NULL, 0.0f, err, errlen))
		return -1;
	*d_xq = xq;
	return 0;
}

extern "C" int cuda_op_stats(struct cuda_ctx *ctx, const float *d_x, int32_t n,
                             float *d_out, char *err, size_t errlen)
{
	return cuda_op_stats_rows(ctx, d_x, n, 1, d_out, err, errlen);
}

extern "C" int cuda_op_stats_rows(struct cuda_ctx *ctx, const float *d_x,
                                  int32_t n, int32_t n_rows, float *d_out,
                                  char *err, size_t errlen)
{
	cu_launch(ctx, el_stats, (unsigned)n_rows, EL_STATS_THREADS, 0, d_x, n,
	          d_out);
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

extern "C" int cuda_op_rope(struct cuda_ctx *ctx, float *d_x, int32_t n_tok,
                            int32_t n_heads, int32_t head_dim, int32_t n_rot,
                            const double *d_inv_freq, float mscale,
                            int32_t pos0, int neox, char *err, size_t errlen)
{
	int64_t n = (int64_t)n_tok * n_heads * (n_rot / 2);

	if (n == 0)
		return 0;
	cu_launch(ctx, el_rope, el_blocks(n), EL_THREADS, 0, d_x, n_tok,
	          n_heads, head_dim, n_rot, d_inv_freq, mscale, pos0,
	          ctx->d_pos, neox);
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

/* One thread per (position, pair): cuda_op_rope_table. */
__global__ void el_rope_table(const double *inv_freq, float mscale,
                              int32_t half, int64_t n, float *cs)
{
	cu_pdl_sync(); /* first: cuda_launch.cuh */
	const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (idx >= n)
		return;
	const float2 c = cu_rope_cs(idx / half, inv_freq[idx % half], mscale);

	cs[2 * idx] = c.x;
	cs[2 * idx + 1] = c.y;
}

extern "C" int cuda_op_rope_table(struct cuda_ctx *ctx,
                                  const double *d_inv_freq, float mscale,
                                  int32_t n_rot, int32_t n_ctx, float *d_cs,
                                  char *err, size_t errlen)
{
	const int64_t n = (int64_t)n_ctx * (n_rot / 2);

	if (n == 0)
		return 0;
	cu_launch(ctx, el_rope_table, el_blocks(n), EL_THREADS, 0, d_inv_freq,
	          mscale, n_rot / 2, n, d_cs);
	CUDA_TRY_LAUNCH(err, errlen);
	/* complete on return: its readers take it before their PDL wait */
	CUDA_TRY(cudaStreamSynchronize(ctx->stream), err, errlen);
	return 0;
}

extern "C" int cuda_op_add_bias(struct cuda_ctx *ctx, float *d_x,
                                const float *d_b, int32_t n, int32_t n_tok,
                                char *err, size_t errlen)
{
	int64_t total = (int64_t)n * n_tok;

	cu_launch(ctx, el_add_bias, el_blocks(total), EL_THREADS, 0, d_x, d_b,
	          n, total);
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

extern "C" int cuda_op_add(struct cuda_ctx *ctx, float *d_x, const float *d_y,
                           int64_t n, char *err, size_t errlen)
{
	cu_launch(ctx, el_add, el_blocks(n), EL_THREADS, 0, d_x, d_y, n);
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

extern "C" int cuda_op_add_gated(struct cuda_ctx *ctx, float *d_x,
                                 const float *d_y, const float *d_g,
                                 int32_t dim, int32_t n_tok, char *err,
                                 size_t errlen)
{
	const int64_t n = (int64_t)dim * n_tok;

	cu_launch(ctx, el_add_gated, el_blocks(n), EL_THREADS, 0, d_x, d_y, d_g,
	          dim, n);
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

extern "C" int cuda_op_gate_act(struct cuda_ctx *ctx, enum model_act act,
                                float *d_g, const float *d_u, int64_t n,
                                char *err, size_t errlen)
{
	switch (act) {
	case MODEL_ACT_SILU:
		cu_launch(ctx, el_swiglu, el_blocks(n), EL_THREADS, 0, d_g, d_u,
		          n);
		break;
	case MODEL_ACT_GELU_TANH:
		cu_launch(ctx, el_geglu, el_blocks(n), EL_THREADS, 0, d_g, d_u,
		          n);
		break;
	case MODEL_ACT_SWIGLU_OAI:
		cu_launch(ctx, el_swiglu_oai, el_blocks(n), EL_THREADS, 0, d_g,
		          d_u, n);
		break;
	default:
		snprintf(
		    err, errlen,
		    "gated FFN activation %d is not implemented on the GPU",
		    (int)act);
		return -1;
	}
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

extern "C" int cuda_op_kv_store(struct cuda_ctx *ctx, const float *d_k,
                                const float *d_v, int32_t n_tok, int32_t n_kv,
                                int32_t head_dim, int32_t n_ctx, int32_t il,
                                int32_t pos0, uint16_t *d_kc, uint16_t *d_vc,
                                char *err, size_t errlen)
{
	int64_t n = (int64_t)n_tok * n_kv * head_dim;

	if (ctx->kv_q8) { /* a warp per block of K or V */
		cu_launch(ctx, el_kv_store_q8, el_blocks(2 * n), EL_THREADS, 0,
		          d_k, d_v, n_tok, n_kv, head_dim, n_ctx, il, pos0,
		          ctx->d_pos, (unsigned char *)d_kc,
		          (unsigned char *)d_vc);
		CUDA_TRY_LAUNCH(err, errlen);
		return 0;
	}
	cu_launch(ctx, el_kv_store, el_blocks(n), EL_THREADS, 0, d_k, d_v,
	          n_tok, n_kv, head_dim, n_ctx, il, pos0, ctx->d_pos,
	          (__half *)d_kc, (__half *)d_vc);
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

extern "C" int cuda_op_rope_kv_store(struct cuda_ctx *ctx, float *d_q,
                                     float *d_k, const float *d_v,
                                     int32_t n_tok, int32_t n_head,
                                     int32_t n_kv, int32_t head_dim,
                                     int32_t n_rot, const double *d_inv_freq,
                                     float mscale, int32_t pos0, int neox,
                                     int32_t n_ctx, int32_t il, uint16_t *d_kc,
                                     uint16_t *d_vc, char *err, size_t errlen)
{
	return cuda_op_qk_norm_rope_kv_store(
	    ctx, d_q, d_k, d_v, NULL, NULL, 0.0f, n_tok, n_head, n_kv, head_dim,
	    n_rot, d_inv_freq, mscale, pos0, neox, n_ctx, il, d_kc, d_vc, err,
	    errlen);
}

extern "C" int cuda_op_qk_norm_rope_kv_store(
    struct cuda_ctx *ctx, float *d_q, float *d_k, const float *d_v,
    const float *d_qw, const float *d_kw, float eps, int32_t n_tok,
    int32_t n_head, int32_t n_kv, int32_t head_dim, int32_t n_rot,
    const double *d_inv_freq, float mscale, int32_t pos0, int neox,
    int32_t n_ctx, int32_t il, uint16_t *d_kc, uint16_t *d_vc, char *err,
    size_t errlen)
{
	return cuda_op_qkv_norm_rope_store(
	    ctx, d_q, d_k, d_v, d_qw, d_kw, 0, eps, n_tok, n_head, n_kv,
	    head_dim, n_rot, d_inv_freq, mscale, pos0, neox, n_ctx, il, d_kc,
	    d_vc, err, errlen);
}

extern "C" int cuda_op_qkv_norm_rope_store(
    struct cuda_ctx *ctx, float *d_q, float *d_k, const float *d_v,
    const float *d_qw, const float *d_kw, int v_norm, float eps, int32_t n_tok,
    int32_t n_head, int32_t n_kv, int32_t head_dim, int32_t n_rot,
    const double *d_inv_freq, float mscale, int32_t pos0, int neox,
    int32_t n_ctx, int32_t il, uint16_t *d_kc, uint16_t *d_vc, char *err,
    size_t errlen)
{
	int64_t blocks = (int64_t)n_tok * (n_head + n_kv);

	if (blocks == 0)
		return 0;
	if (d_qw == NULL && d_kw == NULL && !v_norm)
		cu_launch(ctx, el_rope_kv_store<false>, (unsigned)blocks, 64, 0,
		          d_q, d_k, d_v, d_qw, d_kw, 0, eps, n_head, n_kv,
		          head_dim, n_rot, d_inv_freq, mscale, pos0, ctx->d_pos,
		          neox, n_ctx, il, (__half *)d_kc, (__half *)d_vc,
		          ctx->kv_q8);
	else
		cu_launch(ctx, el_rope_kv_store<true>, (unsigned)blocks,
		          EL_NORM_THREADS, (size_t)head_dim * sizeof(float),
		          d_q, d_k, d_v, d_qw, d_kw, v_norm ? 1 : 0, eps,
		          n_head, n_kv, head_dim, n_rot, d_inv_freq, mscale,
		          pos0, ctx->d_pos, neox, n_ctx, il, (__half *)d_kc,
		          (__half *)d_vc, ctx->kv_q8);
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

extern "C" int cuda_op_rmsnorm_mul(struct cuda_ctx *ctx, const float *d_x,
                                   const float *d_w, int32_t n, int32_t n_tok,
                                   float eps, float mul, float *d_out,
                                   char *err, size_t errlen)
{
	if (n_tok == 0)
		return 0;
	cu_launch(ctx, el_rmsnorm_mul, dim3(1u, (unsigned)n_tok),
	          EL_NORM_THREADS, 0, d_x, d_w, n, eps, mul, d_out);
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

extern "C" int cuda_op_ple_inputs(struct cuda_ctx *ctx, float *d_p,
                                  const float *d_e, const float *d_w, int32_t p,
                                  int64_t n_rows, float eps, float inv_embd,
                                  float inv2, char *err, size_t errlen)
{
	/* rows as (x, y): at most 65,535 in y */
	const int64_t gx = n_rows > 65535 ? 65535 : n_rows;

	if (n_rows == 0)
		return 0;
	cu_launch(ctx, el_ple_inputs,
	          dim3((unsigned)gx, (unsigned)((n_rows + gx - 1) / gx)),
	          EL_NORM_THREADS, 0, d_p, d_e, d_w, p, n_rows, eps, inv_embd,
	          inv2);
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

/* The gated rows' launch, quantizing into XQ where not NULL. */
static int el_gate_act_rows_launch(struct cuda_ctx *ctx, enum model_act act,
                                   float *d_g, const float *d_u, int32_t n,
                                   int32_t n_tok, int64_t ldu, uint8_t *xq,
                                   char *err, size_t errlen)
{
	const int64_t total = (int64_t)n * n_tok;

	if (!cu_act_ok(act)) {
		snprintf(
		    err, errlen,
		    "gated FFN activation %d is not implemented on the GPU",
		    (int)act);
		return -1;
	}
	if (total == 0)
		return 0;
	cu_launch(ctx, el_gate_act_rows, el_blocks(total), EL_THREADS, 0,
	          (int)act, d_g, d_u, n, ldu, total, xq);
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

extern "C" int cuda_op_gate_act_rows(struct cuda_ctx *ctx, enum model_act act,
                                     float *d_g, const float *d_u, int32_t n,
                                     int32_t n_tok, int64_t ldu, char *err,
                                     size_t errlen)
{
	return el_gate_act_rows_launch(ctx, act, d_g, d_u, n, n_tok, ldu, NULL,
	                               err, errlen);
}

extern "C" int cuda_op_gate_act_rows_x8(struct cuda_ctx *ctx,
                                        enum model_act act, float *d_g,
                                        const float *d_u, int32_t n,
                                        int32_t n_tok, int64_t ldu,
                                        const void **d_xq, char *err,
                                        size_t errlen)
{
	static_assert(EL_THREADS % 32 == 0, "el_gate_act_rows: whole warps");
	uint8_t *xq = ctx->norm_fuse_off ? NULL : el_xq_for(ctx, n, n_tok);

	*d_xq = NULL;
	if (el_gate_act_rows_launch(ctx, act, d_g, d_u, n, n_tok, ldu, xq, err,
	                            errlen))
		return -1;
	*d_xq = xq;
	return 0;
}

extern "C" int cuda_op_scale(struct cuda_ctx *ctx, float *d_x, int64_t n,
                             float s, char *err, size_t errlen)
{
	if (n == 0)
		return 0;
	cu_launch(ctx, el_scale, el_blocks(n), EL_THREADS, 0, d_x, n, s);
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

extern "C" int cuda_op_softcap(struct cuda_ctx *ctx, float *d_x, int64_t n,
                               float cap, char *err, size_t errlen)
{
	if (n == 0)
		return 0;
	/* the CPU's 1 / cap, in float */
	cu_launch(ctx, el_softcap, el_blocks(n), EL_THREADS, 0, d_x, n,
	          1.0f / cap, cap);
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

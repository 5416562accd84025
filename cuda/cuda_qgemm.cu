/*
 * cuda_qgemm.cu - the product of a quantized matrix and a small batch of
 * tokens on the tensor cores, decoding the weights' blocks on the way
 * (cuda_op_qgemm; cuda_matmul.cu sends a batch here up to a size).
 *
 * NOTES ON THE DESIGN
 *
 * 1. Why: the cuBLAS path (cm_gemm) first writes the whole matrix as fp16
 *    into ctx->d_w16 and cuBLAS reads it back: for a follow-up turn of 64
 *    tokens that round trip (3.6 bytes moved per weight of a Q4_K matrix
 *    instead of 0.56) cost more than the products themselves
 *    (BENCHMARKS.md, issue 34). Here a block decodes its rows' blocks into
 *    shared memory (qg_dec32, cq_dec8 for the rarer types) and multiplies
 *    them there, so every weight byte is read from memory once per tile
 *    of QG_BN tokens.
 * 2. The roundings are those of an fp16 GEMM: weights and inputs to fp16
 *    (the inputs converted once into ctx->d_x16 by the caller; the
 *    weights as note 5 says), products summed in fp32 by WMMA 16x16x16
 *    fragments, so the results agree with cuBLAS's within the fp16 paths'
 *    tolerance. The order is fixed (no atomics): a run repeats bit for
 *    bit, and Q4_K's two layouts give the same floats.
 * 3. Tiles: a block takes QG_BM rows and QG_BN tokens, QG_BK inputs a
 *    step; 8 warps, each 32 rows x 32 tokens (2 x 2 fragments). A thread
 *    decodes 32 weights of one row a step (one sub-block of Q4_K: one
 *    scale, one min, two 16-byte loads of quants; cuda_dec8.cuh) and
 *    copies 16 inputs. The first version decoded 8 weights of 4 rows and
 *    loaded them just before use: 19 instructions a weight and the loads'
 *    latency exposed, 5% of the memory's bandwidth (BENCHMARKS.md). Now
 *    the next step's bytes are loaded into registers while the tensor
 *    cores work on this one; one shared buffer of each tile (27 KB). It
 *    is still far from the memory's speed (8% of its bandwidth on an
 *    8B's 64-token batch): the warps wait on ldmatrix before each mma
 *    (short-scoreboard stalls, 2 blocks of 97 registers a multiprocessor),
 *    and above 64 tokens the cuBLAS path is faster (CUDA_QGEMM_MAX_TOKENS;
 *    BENCHMARKS.md has the figures and the next steps).
 * 4. A batch of few tokens has few tiles (a 4096-row matrix, 64 tokens:
 *    32 blocks for 132 multiprocessors), so the inputs are also cut into
 *    slices (grid.z), enough for two blocks a multiprocessor, each slice
 *    at least QG_MIN_SLICE inputs; each slice writes its partial sums to
 *    ctx->d_w16 (unused on this path) and qg_reduce adds them in slice
 *    order, deterministic where atomics would not be.
 * 5. The decoding of the common layouts (Q4_K, CQ_Q6_KR, CQ_Q8_0R:
 *    qg_dec32) is fp16 arithmetic on integers made from the quants' bits:
 *    0x6400 | n is the half 1024 + n, so one LOP3 and one HSUB2 give two
 *    exact integers, then one HFMA2 or HMUL2 applies the scale (Q4_K:
 *    d * sc and the min dmin * m, each rounded to fp16 first; Q6_K: d *
 *    sc rounded to fp16; Q8_0: d itself, so its products are exactly
 *    cq_row_elem's). The lanes of a word hold bytes 0 and 2, then 1 and
 *    3, so each four weights land in the order 0, 2, 1, 3; the inputs are
 *    stored in the same order (qg_perm), which leaves every sum a sum of
 *    the same products. About 2 instructions a weight where cq_row_elem's
 *    float arithmetic took 7.5: the decoding bounded the kernel
 *    (BENCHMARKS.md). The scales' fp16 rounding (2^-11 relative, shared by
 *    a sub-block) is of the order of the weights' own rounding to fp16
 *    that every fp16 path makes; t_cuda_ops holds the results to the fp16
 *    paths' tolerance against double products.
 */
#include "cuda_check.cuh"
#include "cuda_dec8.cuh"
#include "cuda_launch.cuh"
#include "cuda_ops.h"

#include <mma.h>
#include <stdio.h>

/* Rows of W a block takes. */
#define QG_BM 128
/* Tokens a block takes. */
#define QG_BN 64
/* Inputs a step of the block's loop decodes. */
#define QG_BK 64
/* Halves a row of a shared tile takes: QG_BK + 8, so that rows start 16
 * bytes apart and every fragment 32 bytes aligned (WMMA's rule). */
#define QG_KP (QG_BK + 8)
/* Threads of a block: 8 warps, 4 (rows) x 2 (tokens). */
#define QG_THREADS 256
/* Inputs a slice of a split product takes at least. */
#define QG_MIN_SLICE 512

/* What one launch computes (qg_gemm). */
struct qg_args {
	const uint8_t *w; /* the matrix, rows of row_size bytes */
	size_t row_size;  /* bytes per row */
	int64_t ne0, ne1; /* inputs, rows */
	const __half *x;  /* [n_tok][ne0] the inputs in fp16 */
	int32_t n_tok;    /* tokens */
	int64_t slice;    /* inputs a slice takes (a multiple of QG_BK) */
	float *y;         /* grid.z == 1: [n_tok][ne1]; else the partials,
	                     [grid.z][n_tok][ne1] */
	int add;          /* grid.z == 1: Y += W X instead of Y = W X */
};

/* Byte I (0..15) of the four words of V. */
static __device__ __forceinline__ uint32_t qg_byte(const uint4 &v, int i)
{
	const uint32_t w = i < 4 ? v.x : i < 8 ? v.y : i < 12 ? v.z : v.w;

	return (w >> (8 * (i & 3))) & 0xFF;
}

/* A half's bits H as float: exact. */
static __device__ __forceinline__ float qg_hbits(uint32_t h)
{
	return __half2float(__ushort_as_half((unsigned short)(h & 0xFFFF)));
}

/* The two 16-bit lanes of U (bits 0..15 and 16..31) as a half2 of the
 * integers (U & MASK) - BIAS of each lane (note 5's exponent trick). */
static __device__ __forceinline__ __half2 qg_ints(uint32_t u, uint32_t mask,
                                                  __half2 bias)
{
	const uint32_t v = (u & mask) | 0x64006400u; /* 1024 + lane */

	return __hsub2(*(const __half2 *)&v, bias);
}

/*
 * Elements K..K+31 from R (cq_load32's) as fp16 into DST (16-byte
 * aligned, 32 halves), each four in the order 0, 2, 1, 3 (note 5): the
 * integers straight from their bits, then one fp16 multiply by the
 * sub-block's scale (Q4_K: and its min subtracted in the same FMA).
 */
template <int T>
static __device__ __forceinline__ void qg_dec32(const cq_raw32 &r, int64_t k,
                                                __half *dst)
{
	__align__(16) __half2 h[16];
	const uint32_t w[8] = {r.q0.x, r.q0.y, r.q0.z, r.q0.w,
	                       r.q1.x, r.q1.y, r.q1.z, r.q1.w};

	if constexpr (T == QTYPE_Q4_K || T == CQ_Q4_KR) {
		const int sub = (int)((k & 255) >> 5);
		int sc, m;

		if constexpr (T == CQ_Q4_KR) {
			const struct cq_q4kr_words f =
			    cq_q4kr_fields(r.hd.y, r.hd.z, r.hd.w);

			sc = (int)((f.lo >> (6 * sub)) & 63);
			m = (int)((f.hi >> (16 + 6 * sub)) & 63);
		} else { /* cq_scale_min_k4 on the scales, bytes 4..15 */
			if (sub < 4) {
				sc = (int)qg_byte(r.hd, 4 + sub) & 63;
				m = (int)qg_byte(r.hd, 8 + sub) & 63;
			} else {
				const uint32_t a = qg_byte(r.hd, 8 + sub),
				               lo = qg_byte(r.hd, sub),
				               hi = qg_byte(r.hd, 4 + sub);

				sc = (int)((a & 0xF) | ((lo >> 6) << 4));
				m = (int)((a >> 4) | ((hi >> 6) << 4));
			}
		}
		const __half2 d1 =
		    __float2half2_rn(__fmul_rn(qg_hbits(r.hd.x), (float)sc));
		const __half2 m1 = __float2half2_rn(
		    -__fmul_rn(qg_hbits(r.hd.x >> 16), (float)m));
		const __half2 bias = __float2half2_rn(1024.0f);
		const int sh = (sub & 1) ? 4 : 0; /* high nibbles: sub 2c+1 */

#pragma unroll
		for (int i = 0; i < 8; i++) {
			const uint32_t v = w[i] >> sh;

			h[2 * i] =
			    __hfma2(qg_ints(v, 0x000F000Fu, bias), d1, m1);
			h[2 * i + 1] =
			    __hfma2(qg_ints(v >> 8, 0x000F000Fu, bias), d1, m1);
		}
	} else if constexpr (T == CQ_Q6_KR) {
		const int g = (int)((k & 127) >> 5);
		const float d = qg_hbits(r.hd.y);
		const __half2 ds[2] = {
		    __float2half2_rn(
		        __fmul_rn(d, (float)(int8_t)(r.hd.x & 0xFF))),
		    __float2half2_rn(
		        __fmul_rn(d, (float)(int8_t)((r.hd.x >> 8) & 0xFF)))};
		const __half2 bias = __float2half2_rn(1056.0f); /* 1024 + 32 */
		const int lsh = (g & 2) ? 4 : 0, hsh = 2 * g;
		const uint32_t hw[8] = {r.q2.x, r.q2.y, r.q2.z, r.q2.w,
		                        r.q3.x, r.q3.y, r.q3.z, r.q3.w};

#pragma unroll
		for (int i = 0; i < 8; i++) {
			const uint32_t q =
			    ((w[i] >> lsh) & 0x0F0F0F0Fu) |
			    (((hw[i] >> hsh) & 0x03030303u) << 4);

			h[2 * i] =
			    __hmul2(qg_ints(q, 0x003F003Fu, bias), ds[i >> 2]);
			h[2 * i + 1] = __hmul2(
			    qg_ints(q >> 8, 0x003F003Fu, bias), ds[i >> 2]);
		}
	} else if constexpr (T == CQ_Q8_0R) {
		const __half2 d = __half2half2(
		    __ushort_as_half((unsigned short)(r.hd.x & 0xFFFF)));
		const __half2 bias = __float2half2_rn(1152.0f); /* 1024 + 128 */

#pragma unroll
		for (int i = 0; i < 8; i++) {
			const uint32_t u = w[i] ^ 0x80808080u; /* q + 128 */

			h[2 * i] = __hmul2(qg_ints(u, 0x00FF00FFu, bias), d);
			h[2 * i + 1] =
			    __hmul2(qg_ints(u >> 8, 0x00FF00FFu, bias), d);
		}
	}
#pragma unroll
	for (int q = 0; q < 4; q++)
		((uint4 *)dst)[q] = ((const uint4 *)h)[q];
}

/* Eight halves V in the order of qg_dec32 (each four as 0, 2, 1, 3). */
static __device__ __forceinline__ uint4 qg_perm(uint4 v)
{
	return make_uint4(
	    __byte_perm(v.x, v.y, 0x5410), __byte_perm(v.x, v.y, 0x7632),
	    __byte_perm(v.z, v.w, 0x5410), __byte_perm(v.z, v.w, 0x7632));
}

/* A thread's 32 weights of a step at K (its row WROW, NULL: none; K
 * within the slice or not, IN): the bytes into R (cq_load32) where the
 * type has two stages; nothing else (cq_dec8 reads them when storing). */
template <int T>
static __device__ __forceinline__ void
qg_fetch(const uint8_t *wrow, int64_t k, int64_t ne0, bool in, cq_raw32 &r)
{
	if constexpr (cq_has32<T>())
		if (wrow != NULL && in)
			cq_load32<T>(wrow, k, ne0, r);
}

/* The thread's 32 weights of a step as fp16 into DST (qg_fetch's R). */
template <int T>
static __device__ __forceinline__ void qg_store(const uint8_t *wrow, int64_t k,
                                                int64_t ne0, bool in,
                                                const cq_raw32 &r, __half *dst)
{
	if constexpr (cq_has32<T>()) {
		if (wrow != NULL && in)
			qg_dec32<T>(r, k, dst);
		else
#pragma unroll
			for (int q = 0; q < 4; q++)
				((uint4 *)dst)[q] = make_uint4(0, 0, 0, 0);
	} else {
#pragma unroll
		for (int q = 0; q < 4; q++)
			cq_dec8<T>(in ? wrow : NULL, k + 8 * q, ne0,
			           dst + 8 * q);
	}
}

/* A thread's 16 inputs of a step at K (its token's row XROW, NULL:
 * none), bounded by K_HI (ne0 % 8 == 0: each 8 whole or none), into V. */
static __device__ __forceinline__ void qg_fetch_x(const __half *xrow, int64_t k,
                                                  int64_t k_hi, uint4 *v)
{
#pragma unroll
	for (int q = 0; q < 2; q++)
		v[q] = xrow != NULL && k + 8 * q < k_hi
		           ? *(const uint4 *)(xrow + k + 8 * q)
		           : make_uint4(0, 0, 0, 0);
}

/*
 * Rows blockIdx.x * QG_BM.., tokens blockIdx.y * QG_BN.., inputs of slice
 * blockIdx.z, of Y = W X (note 3). A thread decodes 32 weights of row
 * tid / 2 a step (half tid % 2 of it) and copies 16 inputs of token
 * tid / 4; the next step's bytes are fetched into registers before the
 * products of this one, so their loads overlap the tensor cores' work.
 * Shared memory: the fp16 weight and input tiles of a step, then
 * (aliasing them) each warp's fragment on its way out.
 */
template <int T>
__global__ void __launch_bounds__(QG_THREADS) qg_gemm(struct qg_args a)
{
	namespace wm = nvcuda::wmma;
	__shared__ __align__(128) __half ws[QG_BM * QG_KP];
	__shared__ __align__(128) __half xs[QG_BN * QG_KP];

	cu_pdl_sync(); /* first: cuda_launch.cuh (X) */
	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
	const int wr = warp & 3, wc = warp >> 2; /* the warp's 32 x 32 */
	const int64_t m0 = (int64_t)blockIdx.x * QG_BM;
	const int32_t n0 = (int32_t)blockIdx.y * QG_BN;
	const int64_t k_lo = (int64_t)blockIdx.z * a.slice;
	const int64_t k_hi = k_lo + a.slice < a.ne0 ? k_lo + a.slice : a.ne0;
	const int64_t row = m0 + (tid >> 1);
	const uint8_t *wrow =
	    row < a.ne1 ? a.w + (size_t)row * a.row_size : NULL;
	const int wk = (tid & 1) * 32; /* the thread's weights in a step */
	const int32_t tok = n0 + (tid >> 2);
	const __half *xrow = tok < a.n_tok ? a.x + (size_t)tok * a.ne0 : NULL;
	const int xk = (tid & 3) * 16; /* the thread's inputs in a step */
	__half *wdst = ws + (tid >> 1) * QG_KP + wk;
	__half *xdst = xs + (tid >> 2) * QG_KP + xk;
	wm::fragment<wm::accumulator, 16, 16, 16, float> acc[2][2];
	const bool busy = n0 + wc * 32 < a.n_tok; /* its tokens exist */
	cq_raw32 raw;
	uint4 xv[2];

#pragma unroll
	for (int i = 0; i < 2; i++)
#pragma unroll
		for (int j = 0; j < 2; j++)
			wm::fill_fragment(acc[i][j], 0.0f);
	/* a slice ends at a multiple of QG_BK or at ne0, and the two-stage
	   types' ne0 is a multiple of 32: a thread's 32 are all in or out */
	qg_fetch<T>(wrow, k_lo + wk, a.ne0, k_lo + wk < k_hi, raw);
	qg_fetch_x(xrow, k_lo + xk, k_hi, xv);
	for (int64_t k0 = k_lo; k0 < k_hi; k0 += QG_BK) {
		qg_store<T>(wrow, k0 + wk, a.ne0, k0 + wk < k_hi, raw, wdst);
		/* the inputs in the weights' order */
		((uint4 *)xdst)[0] = cq_has32<T>() ? qg_perm(xv[0]) : xv[0];
		((uint4 *)xdst)[1] = cq_has32<T>() ? qg_perm(xv[1]) : xv[1];
		__syncthreads();
		if (k0 + QG_BK < k_hi) { /* the next step's, in flight */
			const int64_t k1 = k0 + QG_BK;

			qg_fetch<T>(wrow, k1 + wk, a.ne0, k1 + wk < k_hi, raw);
			qg_fetch_x(xrow, k1 + xk, k_hi, xv);
		}
		if (busy) {
#pragma unroll
			for (int kk = 0; kk < QG_BK; kk += 16) {
				wm::fragment<wm::matrix_b, 16, 16, 16, __half,
				             wm::col_major>
				    fb[2];
				wm::fragment<wm::matrix_a, 16, 16, 16, __half,
				             wm::row_major>
				    fa[2];

#pragma unroll
				for (int j = 0; j < 2; j++)
					wm::load_matrix_sync(
					    fb[j],
					    xs + (wc * 32 + j * 16) * QG_KP +
					        kk,
					    QG_KP);
#pragma unroll
				for (int i = 0; i < 2; i++)
					wm::load_matrix_sync(
					    fa[i],
					    ws + (wr * 32 + i * 16) * QG_KP +
					        kk,
					    QG_KP);
#pragma unroll
				for (int i = 0; i < 2; i++)
#pragma unroll
					for (int j = 0; j < 2; j++)
						wm::mma_sync(acc[i][j], fa[i],
						             fb[j], acc[i][j]);
			}
		}
		__syncthreads(); /* (the next step, or cs, overwrites them) */
	}
	if (!busy)
		return;
	/* each fragment through the warp's 16 x 16 floats of shared memory
	   (a token's 16 rows contiguous), then to Y a row run per token */
	float *cs = (float *)ws + warp * 256;
	float *y = a.y + (size_t)blockIdx.z * a.n_tok * a.ne1;

#pragma unroll
	for (int i = 0; i < 2; i++)
#pragma unroll
		for (int j = 0; j < 2; j++) {
			wm::store_matrix_sync(cs, acc[i][j], 16,
			                      wm::mem_col_major);
			__syncwarp();
#pragma unroll
			for (int e = 0; e < 8; e++) {
				const int idx = lane + 32 * e;
				const int64_t r =
				    m0 + wr * 32 + i * 16 + (idx & 15);
				const int32_t t =
				    n0 + wc * 32 + j * 16 + (idx >> 4);

				if (r < a.ne1 && t < a.n_tok) {
					float *o = y + (size_t)t * a.ne1 + r;

					*o = a.add ? __fadd_rn(*o, cs[idx])
					           : cs[idx];
				}
			}
			__syncwarp(); /* (the next fragment overwrites cs) */
		}
}

/* Y[i] (+)= the sum of the N_SLICES partials P[s][i] in slice order, for
 * N elements. */
__global__ void qg_reduce(const float *p, int32_t n_slices, int64_t n, float *y,
                          int add)
{
	cu_pdl_sync(); /* first: cuda_launch.cuh */
	const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= n)
		return;
	float s = p[i];

	for (int32_t z = 1; z < n_slices; z++)
		s = __fadd_rn(s, p[(size_t)z * n + i]);
	y[i] = add ? __fadd_rn(y[i], s) : s;
}

extern "C" int cuda_op_qgemm_ok(const struct cuda_ctx *ctx,
                                const struct cuda_tensor *w, int32_t n_tok)
{
	return cuda_ops_type_ok(w->type) && w->ne0 % 8 == 0 && w->ne1 >= 1 &&
	       n_tok >= 1 && (n_tok + QG_BN - 1) / QG_BN <= 65535 &&
	       (size_t)n_tok * (size_t)w->ne0 <= ctx->x16_cap;
}

/* Slices of the inputs for W over N_TOK tokens (note 4): enough blocks
 * for two a multiprocessor, each slice QG_MIN_SLICE inputs or more, the
 * partials within ctx->d_w16; *SLICE: inputs a slice (a multiple of
 * QG_BK). */
static int32_t qg_slices(const struct cuda_ctx *ctx,
                         const struct cuda_tensor *w, int32_t n_tok,
                         int64_t *slice)
{
	const int64_t tiles =
	    (w->ne1 + QG_BM - 1) / QG_BM * ((n_tok + QG_BN - 1) / QG_BN);
	const int64_t want = 2 * (int64_t)(ctx->n_sm > 0 ? ctx->n_sm : 1);
	int64_t s = tiles >= want ? 1 : (want + tiles - 1) / tiles;
	const int64_t most = w->ne0 / QG_MIN_SLICE;
	const size_t room = ctx->w16_cap * sizeof(__half) /
	                    (sizeof(float) * (size_t)n_tok * (size_t)w->ne1);

	if (s > most)
		s = most;
	if ((size_t)s > room)
		s = (int64_t)room;
	if (s < 1)
		s = 1;
	int64_t per = (w->ne0 + s - 1) / s;

	per = (per + QG_BK - 1) / QG_BK * QG_BK;
	*slice = per;
	return (int32_t)((w->ne0 + per - 1) / per);
}

extern "C" int cuda_op_qgemm(struct cuda_ctx *ctx, const struct cuda_tensor *w,
                             const void *d_x16, int32_t n_tok, float *d_y,
                             int add, char *err, size_t errlen)
{
	struct qg_args a;
	int32_t n_slices;

	if (!cuda_op_qgemm_ok(ctx, w, n_tok)) {
		snprintf(err, errlen,
		         "quantized GEMM: %s, %lld x %lld, %d tokens (a type "
		         "with a decoder, inputs a multiple of 8, the tokens' "
		         "fp16 inputs within %zu elements)",
		         qtype_name(w->type), (long long)w->ne1,
		         (long long)w->ne0, n_tok, ctx->x16_cap);
		return -1;
	}
	a.w = (const uint8_t *)w->d;
	a.row_size = w->row_size;
	a.ne0 = w->ne0;
	a.ne1 = w->ne1;
	a.x = (const __half *)d_x16;
	a.n_tok = n_tok;
	n_slices = qg_slices(ctx, w, n_tok, &a.slice);
	a.y = n_slices > 1 ? (float *)ctx->d_w16 : d_y;
	a.add = n_slices > 1 ? 0 : add;
	dim3 grid((unsigned)((w->ne1 + QG_BM - 1) / QG_BM),
	          (unsigned)((n_tok + QG_BN - 1) / QG_BN), (unsigned)n_slices);

	switch (w->type) {
#define X(T)                                                                   \
	case T:                                                                \
		cu_launch(ctx, qg_gemm<T>, grid, QG_THREADS, 0, a);            \
		break;
		CQ_FOR_EACH_TYPE(X)
#undef X
	default:
		snprintf(err, errlen, "type %s (id %u) has no CUDA kernel",
		         qtype_name(w->type), w->type);
		return -1;
	}
	CUDA_TRY_LAUNCH(err, errlen);
	if (n_slices > 1) {
		const int64_t n = (int64_t)n_tok * w->ne1;

		cu_launch(ctx, qg_reduce, (unsigned)((n + 255) / 256), 256, 0,
		          (const float *)ctx->d_w16, n_slices, n, d_y, add);
		CUDA_TRY_LAUNCH(err, errlen);
	}
	return 0;
}

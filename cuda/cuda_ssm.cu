/*
 * cuda_ssm.cu - the recurrent (Gated DeltaNet) layers of Qwen3.5 on the
 * GPU, and the output gate of its gated attention layers (cuda_ops.h):
 * the causal conv with SiLU, the gates, the delta rule (a sequential
 * kernel and a chunked one), the gated RMSNorm of its output.
 *
 * NOTES ON THE DESIGN
 *
 * 1. The arithmetic is backend_cpu_ssm.c's, token after token; the conv,
 *    the gates, the norm and the output gate use its formulas and its
 *    order of operations (no FMA contraction where the CPU rounds twice),
 *    the delta rule only the same mathematics (its sums are fp32 here,
 *    double on the CPU): t_cuda_ops holds each op to a double loop.
 * 2. The conv: a thread per (channel, run of SSM_CONV_TT tokens), the
 *    channels on consecutive threads (every load and store coalesced),
 *    the last K - 1 inputs in registers. Only a channel's first run
 *    reads the conv state, and the same thread writes the new one after
 *    it, so the in-place update has no race. An output is the same
 *    expression of the same inputs however the tokens are split into
 *    calls: n tokens in one call and in several give the same bits.
 * 3. The delta rule's rows are independent: row j of a value head's state
 *    (a value dim, contiguous over the key dims i) is decayed, corrected
 *    toward v[j] along k and read along q by itself. The sequential
 *    kernel (ssm_seq) gives a row to SSM_LPR(S) lanes (4 .. 32), each
 *    holding S / SSM_LPR float4s of it in registers for every token, so
 *    decode reads and writes the state once, 16 bytes a lane, a row's
 *    lanes on consecutive 16-byte pieces (coalesced); the state is
 *    prefetched into L2 before the PDL wait. Per token the lanes of a row
 *    reduce five sums at once (k.k, q.q, k.q, s.k, s.q: the output is
 *    expanded as eg (s.q) + d (k.q), so no second reduction waits for the
 *    update), and the next token's q, k, v, g, beta are loaded while this
 *    one is computed.
 * 4. The chunked form (llama.cpp's build_delta_net_chunking) for
 *    n_tok >= CUDA_GDN_CHUNK_MIN_TOKENS: per chunk of SSM_C tokens with
 *    G_r the cumulated log-decay, A[r][u] = beta_r (k_r . k_u)
 *    e^(G_r - G_u) (u < r), T = (I + A)^-1, M[r][u] = (q_r . k_u)
 *    e^(G_r - G_u) (u <= r); with S0 the state before the chunk:
 *      D = T (beta (V - e^G (K S0^T)))         the corrections d_r
 *      O = (e^G (Q S0^T) + M D) / sqrt(S)
 *      S1 = e^G_last S0 + D^T (e^(G_last - G) K)
 *    Every exponent is <= 0 (g <= 0): nothing overflows. ssm_chunk_prep
 *    computes T and M of every (chunk, head) in parallel into scratch
 *    (stream-ordered cudaMallocAsync, SSM_SEG_TOKENS tokens at a time);
 *    ssm_chunk_scan walks the chunks in order, a block per (head, SSM_JB
 *    rows of the state), the state's rows in shared memory. The same
 *    values as the sequential kernel within fp32 rounding.
 */
#include "cuda_check.cuh"
#include "cuda_launch.cuh"
#include "cuda_ops.h"
#include "cuda_reduce.cuh"

#include <math.h>

#define SSM_THREADS    256  /* element-wise kernels, chunked kernels */
#define SSM_CONV_MAX_K 8    /* taps of the conv, at most */
#define SSM_CONV_TT    32   /* tokens a conv thread walks */
#define SSM_C          64   /* tokens a chunk */
#define SSM_JB         16   /* state rows a chunk-scan block */
#define SSM_SEG_TOKENS 1024 /* tokens whose T and M are in scratch at once */

static_assert(SSM_CONV_TT >= SSM_CONV_MAX_K,
              "ssm_conv: only a channel's first run reads the state");

/* Blocks of SSM_THREADS covering N elements. */
static unsigned ssm_blocks(int64_t n)
{
	return (unsigned)((n + SSM_THREADS - 1) / SSM_THREADS);
}

/* x / (1 + e^-x), as the CPU rounds it. */
static __device__ __forceinline__ float ssm_silu(float x)
{
	return __fdiv_rn(x, 1.0f + expf(-x));
}

/* ------------------------------------------------------------------------
 * The conv (note 2)
 */

/* Y = silu(causal depthwise conv of the state's rows then X) for the
 * channel of this thread and the tokens of its run (blockIdx.y); the
 * first run then writes the new state. Weights right-aligned in WR so
 * that tap k of K meets the input K - 1 - k tokens back at WIN's end. */
__global__ void __launch_bounds__(SSM_THREADS)
    ssm_conv(const float *x, int64_t ldx, float *state, const float *w,
             int32_t n_tok, int32_t C, int32_t K, float *y)
{
	constexpr int MK = SSM_CONV_MAX_K;
	const int32_t c = (int32_t)(blockIdx.x * SSM_THREADS + threadIdx.x);
	const int32_t t0 = (int32_t)blockIdx.y * SSM_CONV_TT;
	float wr[MK], win[MK], old[MK - 1];

	/* the taps: a weight, read before the wait (cuda_launch.cuh) */
#pragma unroll
	for (int k = 0; k < MK; k++)
		wr[k] = c < C && k >= MK - K ? w[(size_t)c * K + k - (MK - K)]
		                             : 0.0f;
	cu_pdl_sync();
	if (c >= C)
		return;
#pragma unroll
	for (int d = 0; d < MK - 1; d++) {
		/* the inputs before t0: WIN[MK - 1 - d] = in(t0 - 1 - d) */
		const int32_t tau = t0 - 1 - d;

		old[d] = 0.0f;
		win[MK - 1 - d] = 0.0f;
		if (d < K - 1) {
			if (tau < 0) /* only the first run (static_assert) */
				old[d] = state[(size_t)(K - 1 + tau) * C + c];
			win[MK - 1 - d] =
			    tau < 0 ? old[d] : x[(size_t)tau * ldx + c];
		}
	}
	win[0] = 0.0f;
	const int32_t t1 = min(n_tok, t0 + SSM_CONV_TT);

	for (int32_t t = t0; t < t1; t++) {
		float u = 0.0f;

#pragma unroll
		for (int k = 0; k < MK - 1; k++)
			win[k] = win[k + 1];
		win[MK - 1] = x[(size_t)t * ldx + c];
		/* the CPU's sum: from 0, taps in order, each product rounded */
#pragma unroll
		for (int k = 0; k < MK; k++)
			if (k >= MK - K)
				u = __fadd_rn(u, __fmul_rn(win[k], wr[k]));
		y[(size_t)t * C + c] = ssm_silu(u);
	}
	if (t0 != 0)
		return;
#pragma unroll
	for (int r = 0; r < MK - 1; r++) {
		/* the new state: row r = in(n_tok - (K - 1) + r), from X or,
		   for a call of fewer than K - 1 tokens, from the old state (in
		   OLD: OLD[d] = in(-1 - d)) */
		const int32_t tau = n_tok - (K - 1) + r;
		float prev = 0.0f; /* OLD[-1 - tau], without a local array */

#pragma unroll
		for (int d = 0; d < MK - 1; d++)
			if (d == -1 - tau)
				prev = old[d];
		if (r < K - 1)
			state[(size_t)r * C + c] =
			    tau >= 0 ? x[(size_t)tau * ldx + c] : prev;
	}
}

extern "C" int cuda_op_ssm_conv(struct cuda_ctx *ctx, const float *d_x,
                                int64_t ldx, float *d_state, const float *d_w,
                                int32_t n_tok, int32_t C, int32_t K, float *d_y,
                                char *err, size_t errlen)
{
	if (K < 1 || K > SSM_CONV_MAX_K || C < 1 || n_tok < 0 || ldx < C) {
		snprintf(err, errlen,
		         "ssm conv: %d taps (1..%d), %d channels, row stride "
		         "%lld, %d tokens",
		         K, SSM_CONV_MAX_K, C, (long long)ldx, n_tok);
		return -1;
	}
	if (n_tok == 0)
		return 0;
	const dim3 grid((unsigned)((C + SSM_THREADS - 1) / SSM_THREADS),
	                (unsigned)((n_tok + SSM_CONV_TT - 1) / SSM_CONV_TT));

	cu_launch(ctx, ssm_conv, grid, SSM_THREADS, 0, d_x, ldx, d_state, d_w,
	          n_tok, C, K, d_y);
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

/* ------------------------------------------------------------------------
 * Element-wise: the gates, the output gate, the query split
 */

/* A = softplus(A + DT_BIAS[h]) * SSM_A[h] (ggml's softplus, linear past
 * 20), B = sigmoid(B), in place, N = n_tok * HV values. */
__global__ void ssm_gates(float *a, float *b, const float *dt_bias,
                          const float *ssm_a, int64_t n, int32_t HV)
{
	const int64_t idx = (int64_t)blockIdx.x * SSM_THREADS + threadIdx.x;
	const int32_t h = (int32_t)(idx % HV);
	/* weights: read before the wait (cuda_launch.cuh) */
	const float bias = idx < n ? dt_bias[h] : 0.0f;
	const float sa = idx < n ? ssm_a[h] : 0.0f;

	cu_pdl_sync();
	if (idx >= n)
		return;
	const float x = __fadd_rn(a[idx], bias);
	/* softplus as ggml's and the CPU's: log(1 + e^x), linear past 20 */
	const float sp = x > 20.0f ? x : logf(__fadd_rn(1.0f, expf(x)));

	a[idx] = __fmul_rn(sp, sa);
	b[idx] = __fdiv_rn(1.0f, 1.0f + expf(-b[idx]));
}

extern "C" int cuda_op_gdn_gates(struct cuda_ctx *ctx, float *d_a, float *d_b,
                                 const float *d_dt_bias, const float *d_ssm_a,
                                 int32_t n_tok, int32_t HV, char *err,
                                 size_t errlen)
{
	const int64_t n = (int64_t)n_tok * HV;

	if (HV < 1 || n_tok < 0) {
		snprintf(err, errlen, "gdn gates: %d heads, %d tokens", HV,
		         n_tok);
		return -1;
	}
	if (n == 0)
		return 0;
	cu_launch(ctx, ssm_gates, ssm_blocks(n), SSM_THREADS, 0, d_a, d_b,
	          d_dt_bias, d_ssm_a, n, HV);
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

/* X[t][h hd + d] *= sigmoid(GATE[t gate_ld + h 2 hd + hd + d]), N =
 * n_tok * n_head * hd elements (consecutive threads, consecutive d:
 * both rows read in runs of hd floats). */
__global__ void ssm_sigmoid_mul(float *x, const float *gate, int64_t gate_ld,
                                int64_t n, int32_t n_head, int32_t hd)
{
	cu_pdl_sync();
	const int64_t idx = (int64_t)blockIdx.x * SSM_THREADS + threadIdx.x;

	if (idx >= n)
		return;
	const int64_t row = (int64_t)n_head * hd, t = idx / row;
	const int32_t h = (int32_t)(idx % row / hd), d = (int32_t)(idx % hd);
	const float g = gate[t * gate_ld + (int64_t)h * 2 * hd + hd + d];

	x[idx] = __fmul_rn(x[idx], __fdiv_rn(1.0f, 1.0f + expf(-g)));
}

extern "C" int cuda_op_sigmoid_mul(struct cuda_ctx *ctx, float *d_x,
                                   const float *d_gate, int64_t gate_ld,
                                   int32_t n_tok, int32_t n_head, int32_t hd,
                                   char *err, size_t errlen)
{
	const int64_t n = (int64_t)n_tok * n_head * hd;

	if (n_head < 1 || hd < 1 || n_tok < 0 ||
	    gate_ld < 2 * (int64_t)n_head * hd) {
		snprintf(err, errlen,
		         "sigmoid_mul: %d heads of %d, gate row stride %lld",
		         n_head, hd, (long long)gate_ld);
		return -1;
	}
	if (n == 0)
		return 0;
	cu_launch(ctx, ssm_sigmoid_mul, ssm_blocks(n), SSM_THREADS, 0, d_x,
	          d_gate, gate_ld, n, n_head, hd);
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

/* Q[t][h hd + d] = QG[t][h 2 hd + d], N = n_tok * n_head * hd. */
__global__ void ssm_split_q(const float *qg, int64_t n, int32_t n_head,
                            int32_t hd, float *q)
{
	cu_pdl_sync();
	const int64_t idx = (int64_t)blockIdx.x * SSM_THREADS + threadIdx.x;

	if (idx >= n)
		return;
	const int64_t row = (int64_t)n_head * hd, t = idx / row;
	const int32_t h = (int32_t)(idx % row / hd), d = (int32_t)(idx % hd);

	q[idx] = qg[t * 2 * row + (int64_t)h * 2 * hd + d];
}

extern "C" int cuda_op_split_q_gate(struct cuda_ctx *ctx, const float *d_qg,
                                    int32_t n_tok, int32_t n_head, int32_t hd,
                                    float *d_q, char *err, size_t errlen)
{
	const int64_t n = (int64_t)n_tok * n_head * hd;

	if (n_head < 1 || hd < 1 || n_tok < 0) {
		snprintf(err, errlen, "split_q_gate: %d heads of %d", n_head,
		         hd);
		return -1;
	}
	if (n == 0)
		return 0;
	cu_launch(ctx, ssm_split_q, ssm_blocks(n), SSM_THREADS, 0, d_qg, n,
	          n_head, hd, d_q);
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

/* ------------------------------------------------------------------------
 * The gated RMSNorm of the delta rule's output
 */

/* Row (t, h) = blockIdx.x * 8 + warp of O (S values): rmsnorm (the sum
 * of squares in double, the scale from a double square root, as
 * cpu_rmsnorm) times W, times silu(Z), in place. A warp a row: lanes on
 * consecutive values (coalesced), the second pass from L1. */
__global__ void __launch_bounds__(SSM_THREADS)
    ssm_norm(float *o, const float *z, const float *w, int64_t n_rows,
             int32_t S, float eps)
{
	cu_pdl_sync();
	const int lane = threadIdx.x & 31;
	const int64_t row = (int64_t)blockIdx.x * (SSM_THREADS / 32) +
	                    (int64_t)(threadIdx.x >> 5);

	if (row >= n_rows)
		return;
	float *x = o + row * S;
	const float *zr = z + row * S;
	double ss = 0;

	for (int32_t j = lane; j < S; j += 32)
		ss += (double)x[j] * x[j];
	ss = red_warp<red_add>(ss);
	const float sc = (float)(1.0 / sqrt(ss / S + (double)eps));

	for (int32_t j = lane; j < S; j += 32)
		x[j] = __fmul_rn(__fmul_rn(__fmul_rn(x[j], sc), w[j]),
		                 ssm_silu(zr[j]));
}

extern "C" int cuda_op_gdn_norm(struct cuda_ctx *ctx, float *d_o,
                                const float *d_z, const float *d_w,
                                int32_t n_tok, int32_t HV, int32_t S, float eps,
                                char *err, size_t errlen)
{
	const int64_t rows = (int64_t)n_tok * HV;

	if (HV < 1 || S < 1 || n_tok < 0) {
		snprintf(err, errlen, "gdn norm: %d heads of %d", HV, S);
		return -1;
	}
	if (rows == 0)
		return 0;
	cu_launch(
	    ctx, ssm_norm,
	    (unsigned)((rows + SSM_THREADS / 32 - 1) / (SSM_THREADS / 32)),
	    SSM_THREADS, 0, d_o, d_z, d_w, rows, S, eps);
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

/* ------------------------------------------------------------------------
 * The delta rule, token after token (note 3)
 */

/* The launch shape of ssm_seq for head size S (a power of two, 16..256):
 * LPR lanes a state row, each holding NV float4s of it; RPW rows a warp,
 * NW warps and ROWS rows a block. */
template <int S> struct ssm_seq_shape {
	static constexpr int LPR = S / 16 < 4 ? 4 : S / 16 > 32 ? 32 : S / 16;
	static constexpr int NV = S / (4 * LPR);
	static constexpr int RPW = 32 / LPR;
	static constexpr int NW = S / RPW < 4 ? S / RPW : 4;
	static constexpr int ROWS = NW * RPW;
	static_assert(NV >= 1 && S % ROWS == 0, "ssm_seq_shape");
};

/* One token's inputs as a lane of a row needs them: its float4s of q and
 * k (the same mapping as its state's), v of its row, g, beta. */
template <int NV> struct ssm_tok {
	float4 q[NV], k[NV];
	float v, g, b;
};

/* X = token T's inputs for value row J of head H (key head KH), the
 * lane's float4s F = e * LPR + PART. Q, K 16-byte aligned (checked by the
 * launcher). */
template <int S>
static __device__ __forceinline__ void
ssm_tok_load(ssm_tok<ssm_seq_shape<S>::NV> &x, const float *qkv, int64_t ld,
             const float *g, const float *beta, int32_t t, int32_t HK,
             int32_t HV, int32_t h, int32_t kh, int32_t j, int part)
{
	using SH = ssm_seq_shape<S>;
	const float *row = qkv + (int64_t)t * ld;
	const float4 *q4 = (const float4 *)(row + (size_t)kh * S);
	const float4 *k4 = (const float4 *)(row + (size_t)(HK + kh) * S);

#pragma unroll
	for (int e = 0; e < SH::NV; e++) {
		x.q[e] = q4[e * SH::LPR + part];
		x.k[e] = k4[e * SH::LPR + part];
	}
	x.v = row[(size_t)2 * HK * S + (size_t)h * S + j];
	x.g = g[(int64_t)t * HV + h];
	x.b = beta[(int64_t)t * HV + h];
}

/* A += the four products of U and V. */
static __device__ __forceinline__ void ssm_dot4(float &a, float4 u, float4 v)
{
	a = fmaf(u.x, v.x, a);
	a = fmaf(u.y, v.y, a);
	a = fmaf(u.z, v.z, a);
	a = fmaf(u.w, v.w, a);
}

/* Value rows blockIdx.x * ROWS .. of head blockIdx.y over N_TOK tokens in
 * order: the state rows in registers throughout, written back at the end.
 * Every lane of a row computes the row's scalars (the reductions leave
 * them in every lane); lane PART 0 writes the output. */
template <int S>
__global__ void __launch_bounds__(32 * ssm_seq_shape<S>::NW)
    ssm_seq(const float *qkv, int64_t ld, const float *g, const float *beta,
            float *st, int32_t n_tok, int32_t HK, int32_t HV, float eps,
            float *o)
{
	using SH = ssm_seq_shape<S>;
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	const int part = lane % SH::LPR;
	const int32_t h = (int32_t)blockIdx.y, kh = h % HK;
	const int32_t j =
	    (int32_t)blockIdx.x * SH::ROWS + warp * SH::RPW + lane / SH::LPR;
	float4 *srow = (float4 *)(st + ((size_t)h * S + j) * S);

	/* the state row heads for L2 while the previous kernel finishes (a
	   prefetch reads nothing stale: cuda_launch.cuh); one lane a line */
#pragma unroll
	for (int e = 0; e < SH::NV; e++)
		if ((e * SH::LPR + part) % 8 == 0)
			asm volatile("prefetch.global.L2 [%0];" ::"l"(
			    srow + e * SH::LPR + part));
	cu_pdl_sync();
	float4 s[SH::NV];
	ssm_tok<SH::NV> cur, nxt;
	const float oscale = 1.0f / sqrtf((float)S);

#pragma unroll
	for (int e = 0; e < SH::NV; e++)
		s[e] = srow[e * SH::LPR + part];
	if (n_tok > 0)
		ssm_tok_load<S>(cur, qkv, ld, g, beta, 0, HK, HV, h, kh, j,
		                part);
	for (int32_t t = 0; t < n_tok; t++) {
		/* the next token's loads in flight during this one */
		if (t + 1 < n_tok)
			ssm_tok_load<S>(nxt, qkv, ld, g, beta, t + 1, HK, HV, h,
			                kh, j, part);
		float kk = 0.0f, qq = 0.0f, kq = 0.0f, sk = 0.0f, sq = 0.0f;

#pragma unroll
		for (int e = 0; e < SH::NV; e++) {
			ssm_dot4(kk, cur.k[e], cur.k[e]);
			ssm_dot4(qq, cur.q[e], cur.q[e]);
			ssm_dot4(kq, cur.k[e], cur.q[e]);
			ssm_dot4(sk, s[e], cur.k[e]);
			ssm_dot4(sq, s[e], cur.q[e]);
		}
		/* the five sums over the row's lanes, side by side */
#pragma unroll
		for (int off = SH::LPR / 2; off >= 1; off >>= 1) {
			kk += __shfl_xor_sync(RED_FULL, kk, off);
			qq += __shfl_xor_sync(RED_FULL, qq, off);
			kq += __shfl_xor_sync(RED_FULL, kq, off);
			sk += __shfl_xor_sync(RED_FULL, sk, off);
			sq += __shfl_xor_sync(RED_FULL, sq, off);
		}
		const float rk = 1.0f / fmaxf(sqrtf(kk), eps);
		const float rq = 1.0f / fmaxf(sqrtf(qq), eps);
		const float eg = expf(cur.g);
		/* d = (v - eg S.k_n) beta; the output (eg S + d k_n) . q_n */
		const float d = (cur.v - eg * (sk * rk)) * cur.b;
		const float out =
		    (eg * (sq * rq) + d * (kq * (rk * rq))) * oscale;

#pragma unroll
		for (int e = 0; e < SH::NV; e++) {
			s[e].x = fmaf(cur.k[e].x * rk, d, s[e].x * eg);
			s[e].y = fmaf(cur.k[e].y * rk, d, s[e].y * eg);
			s[e].z = fmaf(cur.k[e].z * rk, d, s[e].z * eg);
			s[e].w = fmaf(cur.k[e].w * rk, d, s[e].w * eg);
		}
		if (part == 0)
			o[(int64_t)t * HV * S + (int64_t)h * S + j] = out;
		cur = nxt;
	}
#pragma unroll
	for (int e = 0; e < SH::NV; e++)
		srow[e * SH::LPR + part] = s[e];
}

/* ssm_seq<S> over the heads' rows. */
template <int S>
static void ssm_seq_launch(struct cuda_ctx *ctx, const float *d_qkv, int64_t ld,
                           const float *d_g, const float *d_beta, float *d_s,
                           int32_t n_tok, int32_t HK, int32_t HV, float eps,
                           float *d_o)
{
	using SH = ssm_seq_shape<S>;

	cu_launch(ctx, ssm_seq<S>, dim3(S / SH::ROWS, (unsigned)HV),
	          32 * SH::NW, 0, d_qkv, ld, d_g, d_beta, d_s, n_tok, HK, HV,
	          eps, d_o);
}

/* ------------------------------------------------------------------------
 * The delta rule in chunks (note 4)
 */

/* Shared memory of the chunk kernels for head size S, in floats: rows of
 * keys and queries padded to S + 4 (16-byte aligned rows whose float4s
 * fall in distinct banks for 8 consecutive rows), A padded alike. */
template <int S> struct ssm_chunk_smem {
	static constexpr int KS = S + 4;      /* row stride of K, Q, state */
	static constexpr int AS = SSM_C + 4;  /* row stride of A */
	static constexpr int KQ = SSM_C * KS; /* floats of K (and of Q) */
	/* prep: K, Q, A, raw g, G, beta */
	static constexpr size_t prep = 2 * KQ + SSM_C * AS + 3 * SSM_C;
	/* scan: K, Q, the state's rows, R, D, raw g, G, beta, decay */
	static constexpr size_t scan =
	    2 * KQ + SSM_JB * KS + 2 * SSM_C * SSM_JB + 4 * SSM_C;
};

/* SX[r][0..S) (row stride S + 4) = row R of the chunk starting at token
 * T0 (N real tokens; zeros past them) at offset OFF of QKV rows, divided
 * by max(|row|, EPS): warp w takes rows w, w + 8, .. (SSM_C / 8 rows,
 * all its loads issued before the first sum), lanes on consecutive
 * values (coalesced). The same code in both chunk kernels: the same
 * bits. */
template <int S>
static __device__ void ssm_load_rows(float *sx, const float *qkv, int64_t ld,
                                     int64_t off, int32_t t0, int32_t n,
                                     float eps)
{
	constexpr int NE = S < 32 ? 1 : S / 32, RW = SSM_C / 8;
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	float v[RW][NE];

#pragma unroll
	for (int rr = 0; rr < RW; rr++) {
		const int r = warp + 8 * rr;
		const float *src = qkv + (int64_t)(t0 + r) * ld + off;

#pragma unroll
		for (int e = 0; e < NE; e++) {
			const int i = lane + 32 * e;

			v[rr][e] = r < n && i < S ? src[i] : 0.0f;
		}
	}
#pragma unroll
	for (int rr = 0; rr < RW; rr++) {
		const int r = warp + 8 * rr;
		float ss = 0.0f;

#pragma unroll
		for (int e = 0; e < NE; e++)
			ss = fmaf(v[rr][e], v[rr][e], ss);
		ss = red_warp<red_add>(ss);
		const float sc = 1.0f / fmaxf(sqrtf(ss), eps);

#pragma unroll
		for (int e = 0; e < NE; e++)
			if (lane + 32 * e < S)
				sx[r * (S + 4) + lane + 32 * e] = v[rr][e] * sc;
	}
}

/* The chunk's gates of head H: SB[r] = beta, SG[r] = G_r = g_0 + .. + g_r
 * (each thread r < SSM_C adds in order: the same bits in both kernels),
 * zeros for g and beta past the N real tokens. SGR: scratch. Ends with a
 * barrier. */
static __device__ void ssm_load_gates(float *sgr, float *sg, float *sb,
                                      const float *g, const float *beta,
                                      int32_t t0, int32_t n, int32_t HV,
                                      int32_t h)
{
	const int r = threadIdx.x;

	if (r < SSM_C) {
		const int64_t at = (int64_t)(t0 + r) * HV + h;

		sgr[r] = r < n ? g[at] : 0.0f;
		sb[r] = r < n ? beta[at] : 0.0f;
	}
	__syncthreads();
	if (r < SSM_C) {
		float G = 0.0f;

		for (int u = 0; u <= r; u++)
			G += sgr[u];
		sg[r] = G;
	}
	__syncthreads();
}

/* T and M of chunk blockIdx.x (tokens T0 + 64 blockIdx.x .., N_TOK in the
 * segment) and value head blockIdx.y, into TM[(chunk * HV + h) * 2 + 0,
 * 1] (SSM_C x SSM_C each, row-major). KK = K K^T and QK = Q K^T by 4x4
 * register tiles (rows ty + 16a, columns tx + 16b: a warp's B rows are 16
 * consecutive rows, distinct banks); T by forward substitution, a column
 * a thread (threads 0..63: every thread reads the same A[r][u], a
 * broadcast). */
template <int S>
__global__ void __launch_bounds__(SSM_THREADS, 2)
    ssm_chunk_prep(const float *qkv, int64_t ld, const float *g,
                   const float *beta, int32_t t0, int32_t n_tok, int32_t HK,
                   int32_t HV, float eps, float *tm)
{
	using SM = ssm_chunk_smem<S>;
	extern __shared__ float4 ssm_smem4[];
	float *sk = (float *)ssm_smem4, *sq = sk + SM::KQ;
	float *sa = sq + SM::KQ, *sgr = sa + SSM_C * SM::AS;
	float *sg = sgr + SSM_C, *sb = sg + SSM_C;
	const int32_t c = (int32_t)blockIdx.x, h = (int32_t)blockIdx.y;
	const int32_t kh = h % HK, tc = t0 + c * SSM_C;
	const int32_t n = min(SSM_C, n_tok - c * SSM_C);
	const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
	float *tmat = tm + ((int64_t)c * HV + h) * 2 * SSM_C * SSM_C;
	float *mmat = tmat + SSM_C * SSM_C;

	cu_pdl_sync();
	ssm_load_rows<S>(sk, qkv, ld, (int64_t)(HK + kh) * S, tc, n, eps);
	ssm_load_rows<S>(sq, qkv, ld, (int64_t)kh * S, tc, n, eps);
	ssm_load_gates(sgr, sg, sb, g, beta, tc, n, HV, h); /* barriers */

	float kk[4][4] = {}, qk[4][4] = {};

	for (int i = 0; i < S; i += 4) {
		float4 kr[4], qr[4], ku[4];

#pragma unroll
		for (int a = 0; a < 4; a++) {
			kr[a] =
			    *(const float4 *)&sk[(ty + 16 * a) * SM::KS + i];
			qr[a] =
			    *(const float4 *)&sq[(ty + 16 * a) * SM::KS + i];
			ku[a] =
			    *(const float4 *)&sk[(tx + 16 * a) * SM::KS + i];
		}
#pragma unroll
		for (int a = 0; a < 4; a++)
#pragma unroll
			for (int b = 0; b < 4; b++) {
				ssm_dot4(kk[a][b], kr[a], ku[b]);
				ssm_dot4(qk[a][b], qr[a], ku[b]);
			}
	}
	/* A strictly lower, M lower with its diagonal; the decays <= 1 */
#pragma unroll
	for (int a = 0; a < 4; a++)
#pragma unroll
		for (int b = 0; b < 4; b++) {
			const int r = ty + 16 * a, u = tx + 16 * b;
			const float dec = u <= r ? expf(sg[r] - sg[u]) : 0.0f;

			sa[r * SM::AS + u] =
			    u < r ? sb[r] * kk[a][b] * dec : 0.0f;
			mmat[r * SSM_C + u] = u <= r ? qk[a][b] * dec : 0.0f;
		}
	__syncthreads();
	if (tid >= SSM_C)
		return;
	/* column TID of T = (I + A)^-1: x_r = [r == col] - sum_{u<r} A[r][u]
	   x_u (zero above the diagonal, one on it); four partial sums a
	   row, the chain a quarter as long */
	float x[SSM_C];

#pragma unroll
	for (int r = 0; r < SSM_C; r++) {
		float4 acc =
		    make_float4(r == tid ? 1.0f : 0.0f, 0.0f, 0.0f, 0.0f);

#pragma unroll
		for (int u = 0; u < r; u += 4) {
			const float4 a4 = *(const float4 *)&sa[r * SM::AS + u];

			acc.x = fmaf(-a4.x, x[u], acc.x);
			if (u + 1 < r)
				acc.y = fmaf(-a4.y, x[u + 1], acc.y);
			if (u + 2 < r)
				acc.z = fmaf(-a4.z, x[u + 2], acc.z);
			if (u + 3 < r)
				acc.w = fmaf(-a4.w, x[u + 3], acc.w);
		}
		x[r] = (acc.x + acc.y) + (acc.z + acc.w);
		tmat[r * SSM_C + tid] = x[r];
	}
}

/* A chunk-scan block's shared memory (ssm_chunk_smem<S>::scan). */
struct ssm_scan_sh {
	float *k, *q;          /* [SSM_C][S + 4] the chunk's keys, queries */
	float *s;              /* [SSM_JB][S + 4] the block's state rows */
	float *r, *d;          /* [SSM_C][SSM_JB] R, D */
	float *gr, *g, *b, *f; /* [SSM_C] raw g, G, beta, decay to the end */
};

/* X = K S0^T and P = Q S0^T at (rows RB + 16a, column JJ): a warp reads 2
 * rows of K and Q (broadcasts) and 16 state rows (distinct banks). */
template <int S>
static __device__ __forceinline__ void
ssm_scan_xp(const ssm_scan_sh &sh, int rb, int jj, float x[4], float p[4])
{
	constexpr int KS = S + 4;

	for (int i = 0; i < S; i += 4) {
		const float4 s4 = *(const float4 *)&sh.s[jj * KS + i];

#pragma unroll
		for (int a = 0; a < 4; a++) {
			const int r = rb + 16 * a;

			ssm_dot4(x[a], *(const float4 *)&sh.k[r * KS + i], s4);
			ssm_dot4(p[a], *(const float4 *)&sh.q[r * KS + i], s4);
		}
	}
}

/* D = T R at (rows RB + 16a, column JJ) into sh.d: T (zero above its
 * diagonal) from L2 / L1, each row read by the 16 threads of a column
 * group at once. */
static __device__ __forceinline__ void
ssm_scan_d(const ssm_scan_sh &sh, const float *tmat, int rb, int jj)
{
	float d[4] = {};

	for (int u = 0; u < SSM_C; u += 4) {
		const float4 r4 = make_float4(
		    sh.r[u * SSM_JB + jj], sh.r[(u + 1) * SSM_JB + jj],
		    sh.r[(u + 2) * SSM_JB + jj], sh.r[(u + 3) * SSM_JB + jj]);

#pragma unroll
		for (int a = 0; a < 4; a++)
			ssm_dot4(
			    d[a],
			    *(const float4 *)&tmat[(rb + 16 * a) * SSM_C + u],
			    r4);
	}
#pragma unroll
	for (int a = 0; a < 4; a++)
		sh.d[(rb + 16 * a) * SSM_JB + jj] = d[a];
}

/* K's rows times their decay to the chunk's end, in place (consecutive
 * threads on consecutive float4s). */
template <int S>
static __device__ __forceinline__ void ssm_scan_kdecay(const ssm_scan_sh &sh)
{
	for (int e = threadIdx.x; e < SSM_C * S / 4; e += SSM_THREADS) {
		const int r = e / (S / 4), i = 4 * (e % (S / 4));
		float4 *k4 = (float4 *)&sh.k[r * (S + 4) + i];
		const float f = sh.f[r];

		k4->x *= f, k4->y *= f, k4->z *= f, k4->w *= f;
	}
}

/* O = (e^G P + M D) / sqrt(S) at (rows RB + 16a, column JJ) for the N
 * real tokens of the chunk at token TC (EP: e^G P); M from L2 / L1. */
template <int S>
static __device__ __forceinline__ void
ssm_scan_out(const ssm_scan_sh &sh, const float *mmat, const float ep[4],
             int rb, int jj, int32_t tc, int32_t n, int32_t HV, int32_t h,
             int32_t j0, float *o)
{
	const float oscale = 1.0f / sqrtf((float)S);

#pragma unroll
	for (int a = 0; a < 4; a++) {
		const int r = rb + 16 * a;
		float acc = ep[a];

		for (int u = 0; u < SSM_C; u += 4)
			ssm_dot4(acc, *(const float4 *)&mmat[r * SSM_C + u],
			         make_float4(sh.d[u * SSM_JB + jj],
			                     sh.d[(u + 1) * SSM_JB + jj],
			                     sh.d[(u + 2) * SSM_JB + jj],
			                     sh.d[(u + 3) * SSM_JB + jj]));
		if (r < n)
			o[(int64_t)(tc + r) * HV * S + (int64_t)h * S + j0 +
			  jj] = acc * oscale;
	}
}

/* S1 = e^G_last S0 + D^T (decayed K), in place: two state rows x a float4
 * of keys a thread; a warp's 32 items are JW row pairs x IW consecutive
 * float4s of a K row (one wavefront a load), D's two values one float2. */
template <int S>
static __device__ __forceinline__ void ssm_scan_update(const ssm_scan_sh &sh)
{
	constexpr int KS = S + 4, IW = S / 4 < 8 ? S / 4 : 8, JW = 32 / IW;
	constexpr int JT = (SSM_JB / 2) / JW;
	const float egl = expf(sh.g[SSM_C - 1]);

	for (int e = threadIdx.x; e < (SSM_JB / 2) * (S / 4);
	     e += SSM_THREADS) {
		const int w = e / 32, l = e % 32;
		const int jp = (w % JT) * JW + l / IW; /* row pair */
		const int i = 4 * ((w / JT) * IW + l % IW);
		float4 a0 = make_float4(0.0f, 0.0f, 0.0f, 0.0f), a1 = a0;

		for (int u = 0; u < SSM_C; u++) {
			const float2 d2 =
			    *(const float2 *)&sh.d[u * SSM_JB + 2 * jp];
			const float4 k4 = *(const float4 *)&sh.k[u * KS + i];

			a0.x = fmaf(d2.x, k4.x, a0.x);
			a0.y = fmaf(d2.x, k4.y, a0.y);
			a0.z = fmaf(d2.x, k4.z, a0.z);
			a0.w = fmaf(d2.x, k4.w, a0.w);
			a1.x = fmaf(d2.y, k4.x, a1.x);
			a1.y = fmaf(d2.y, k4.y, a1.y);
			a1.z = fmaf(d2.y, k4.z, a1.z);
			a1.w = fmaf(d2.y, k4.w, a1.w);
		}
		float4 *s0 = (float4 *)&sh.s[(2 * jp) * KS + i];
		float4 *s1 = (float4 *)&sh.s[(2 * jp + 1) * KS + i];

		s0->x = fmaf(egl, s0->x, a0.x);
		s0->y = fmaf(egl, s0->y, a0.y);
		s0->z = fmaf(egl, s0->z, a0.z);
		s0->w = fmaf(egl, s0->w, a0.w);
		s1->x = fmaf(egl, s1->x, a1.x);
		s1->y = fmaf(egl, s1->y, a1.y);
		s1->z = fmaf(egl, s1->z, a1.z);
		s1->w = fmaf(egl, s1->w, a1.w);
	}
}

/* The block's state rows between D_S (rows of S) and sh.s (rows of
 * S + 4), TO_SHARED or back: consecutive threads on consecutive float4s. */
template <int S>
static __device__ __forceinline__ void
ssm_scan_state(const ssm_scan_sh &sh, float *shead, bool to_shared)
{
	for (int e = threadIdx.x; e < SSM_JB * S / 4; e += SSM_THREADS) {
		const int r = e / (S / 4), i = 4 * (e % (S / 4));
		float4 *sm = (float4 *)&sh.s[r * (S + 4) + i];
		float4 *gm = (float4 *)&shead[r * S + i];

		if (to_shared)
			*sm = *gm;
		else
			*gm = *sm;
	}
}

/* The chunks of the segment (tokens T0 .., N_TOK) in order for value head
 * blockIdx.y, state rows J0 = blockIdx.x * SSM_JB .. J0 + SSM_JB - 1 in
 * shared memory throughout (note 4). A thread owns column jj = tid % 16
 * of rows tid / 16 + 16a of X, P, R, D and O. T and M are read from
 * L2 / L1 (every block of the head reads them; the shared memory left is
 * for a second block per SM). */
template <int S>
__global__ void __launch_bounds__(SSM_THREADS, 2)
    ssm_chunk_scan(const float *qkv, int64_t ld, const float *g,
                   const float *beta, const float *tm, float *st, int32_t t0,
                   int32_t n_tok, int32_t HK, int32_t HV, float eps, float *o)
{
	using SM = ssm_chunk_smem<S>;
	extern __shared__ float4 ssm_smem4[];
	ssm_scan_sh sh;
	const int32_t h = (int32_t)blockIdx.y, kh = h % HK;
	const int32_t j0 = (int32_t)blockIdx.x * SSM_JB;
	const int tid = threadIdx.x, jj = tid % SSM_JB, rb = tid / SSM_JB;
	float *shead = st + ((size_t)h * S + j0) * S;

	sh.k = (float *)ssm_smem4;
	sh.q = sh.k + SM::KQ;
	sh.s = sh.q + SM::KQ;
	sh.r = sh.s + SSM_JB * SM::KS;
	sh.d = sh.r + SSM_C * SSM_JB;
	sh.gr = sh.d + SSM_C * SSM_JB;
	sh.g = sh.gr + SSM_C;
	sh.b = sh.g + SSM_C;
	sh.f = sh.b + SSM_C;
	cu_pdl_sync();
	ssm_scan_state<S>(sh, shead, true);
	for (int32_t c0 = 0; c0 < n_tok; c0 += SSM_C) {
		const int32_t tc = t0 + c0, n = min(SSM_C, n_tok - c0);
		const float *tmat =
		    tm + ((int64_t)(c0 / SSM_C) * HV + h) * 2 * SSM_C * SSM_C;
		float v[4], x[4] = {}, p[4] = {};

		/* V of the thread's four (row, column)s first: in flight
		   during the loads of K and Q */
#pragma unroll
		for (int a = 0; a < 4; a++) {
			const int r = rb + 16 * a;

			v[a] = r < n ? qkv[(int64_t)(tc + r) * ld +
			                   (int64_t)(2 * HK + h) * S + j0 + jj]
			             : 0.0f;
		}
		ssm_load_rows<S>(sh.k, qkv, ld, (int64_t)(HK + kh) * S, tc, n,
		                 eps);
		ssm_load_rows<S>(sh.q, qkv, ld, (int64_t)kh * S, tc, n, eps);
		ssm_load_gates(sh.gr, sh.g, sh.b, g, beta, tc, n, HV, h);
		ssm_scan_xp<S>(sh, rb, jj, x, p);
		/* R = beta (V - e^G X); P becomes e^G P */
#pragma unroll
		for (int a = 0; a < 4; a++) {
			const int r = rb + 16 * a;
			const float eG = expf(sh.g[r]);

			sh.r[r * SSM_JB + jj] = sh.b[r] * (v[a] - eG * x[a]);
			p[a] *= eG;
		}
		if (tid < SSM_C) /* K's row decays toward the chunk's end */
			sh.f[tid] = expf(sh.g[SSM_C - 1] - sh.g[tid]);
		__syncthreads();
		/* K, last read by X as it was, scaled meanwhile */
		ssm_scan_d(sh, tmat, rb, jj);
		ssm_scan_kdecay<S>(sh);
		__syncthreads();
		ssm_scan_out<S>(sh, tmat + SSM_C * SSM_C, p, rb, jj, tc, n, HV,
		                h, j0, o);
		ssm_scan_update<S>(sh);
		__syncthreads(); /* before the next chunk's loads */
	}
	ssm_scan_state<S>(sh, shead, false);
}

/* 0 after a launch, or -1 with its error (CUDA_TRY_LAUNCH). */
static int ssm_launch_rc(char *err, size_t errlen)
{
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

/* The chunked delta rule over N_TOK tokens: SSM_SEG_TOKENS at a time,
 * prep then scan, T and M in stream-ordered scratch freed at the end
 * (also on an error). */
template <int S>
static int ssm_chunked(struct cuda_ctx *ctx, const float *d_qkv, int64_t ld,
                       const float *d_g, const float *d_beta, float *d_s,
                       int32_t n_tok, int32_t HK, int32_t HV, float eps,
                       float *d_o, char *err, size_t errlen)
{
	using SM = ssm_chunk_smem<S>;
	const int32_t seg = min(n_tok, (int32_t)SSM_SEG_TOKENS);
	const int32_t seg_chunks = (seg + SSM_C - 1) / SSM_C;
	const size_t bytes =
	    (size_t)seg_chunks * HV * 2 * SSM_C * SSM_C * sizeof(float);
	float *d_tm = NULL;
	int rc = 0;

	static_assert(SM::scan * sizeof(float) <= 227 * 1024 &&
	                  SM::prep * sizeof(float) <= 227 * 1024,
	              "ssm_chunk_smem: more than an SM's shared memory");
	CUDA_TRY(
	    cudaFuncSetAttribute(ssm_chunk_prep<S>,
	                         cudaFuncAttributeMaxDynamicSharedMemorySize,
	                         (int)(SM::prep * sizeof(float))),
	    err, errlen);
	CUDA_TRY(
	    cudaFuncSetAttribute(ssm_chunk_scan<S>,
	                         cudaFuncAttributeMaxDynamicSharedMemorySize,
	                         (int)(SM::scan * sizeof(float))),
	    err, errlen);
	CUDA_TRY(cudaMallocAsync((void **)&d_tm, bytes, ctx->stream), err,
	         errlen);
	for (int32_t t0 = 0; t0 < n_tok && rc == 0; t0 += SSM_SEG_TOKENS) {
		const int32_t n = min(n_tok - t0, (int32_t)SSM_SEG_TOKENS);
		const unsigned nch = (unsigned)((n + SSM_C - 1) / SSM_C);

		cu_launch(ctx, ssm_chunk_prep<S>, dim3(nch, (unsigned)HV),
		          SSM_THREADS, SM::prep * sizeof(float), d_qkv, ld, d_g,
		          d_beta, t0, n, HK, HV, eps, d_tm);
		rc = ssm_launch_rc(err, errlen);
		if (rc == 0) {
			cu_launch(ctx, ssm_chunk_scan<S>,
			          dim3(S / SSM_JB, (unsigned)HV), SSM_THREADS,
			          SM::scan * sizeof(float), d_qkv, ld, d_g,
			          d_beta, (const float *)d_tm, d_s, t0, n, HK,
			          HV, eps, d_o);
			rc = ssm_launch_rc(err, errlen);
		}
	}
	CUDA_TRY(cudaFreeAsync(d_tm, ctx->stream), err, errlen);
	return rc;
}

/* ------------------------------------------------------------------------
 * The launcher
 */

/* The sequential (CHUNKED 0) or chunked kernels for head size S. */
template <int S>
static int ssm_gdn_run(struct cuda_ctx *ctx, const float *d_qkv, int64_t ld,
                       const float *d_g, const float *d_beta, float *d_s,
                       int32_t n_tok, int32_t HK, int32_t HV, float eps,
                       float *d_o, int chunked, char *err, size_t errlen)
{
	if (chunked)
		return ssm_chunked<S>(ctx, d_qkv, ld, d_g, d_beta, d_s, n_tok,
		                      HK, HV, eps, d_o, err, errlen);
	ssm_seq_launch<S>(ctx, d_qkv, ld, d_g, d_beta, d_s, n_tok, HK, HV, eps,
	                  d_o);
	return ssm_launch_rc(err, errlen);
}

extern "C" int cuda_op_gdn_force(struct cuda_ctx *ctx, const float *d_qkv,
                                 int64_t ld, const float *d_g,
                                 const float *d_beta, float *d_s, int32_t n_tok,
                                 int32_t HK, int32_t HV, int32_t S, float eps,
                                 float *d_o, int force, char *err,
                                 size_t errlen)
{
	const int chunked =
	    force == 0 ? n_tok >= CUDA_GDN_CHUNK_MIN_TOKENS : force == 2;

	if (S < 16 || S > 256 || (S & (S - 1)) != 0 || HK < 1 || HV < 1 ||
	    HV % HK != 0 || n_tok < 0 || ld < (int64_t)(2 * HK + HV) * S) {
		snprintf(err, errlen,
		         "gdn: head size %d (a power of two, 16..256), %d key "
		         "and %d value heads (a multiple), row stride %lld",
		         S, HK, HV, (long long)ld);
		return -1;
	}
	if (ld % 4 != 0 || (uintptr_t)d_qkv % 16 != 0 ||
	    (uintptr_t)d_s % 16 != 0) {
		snprintf(err, errlen,
		         "gdn: q, k and the state must be 16-byte aligned "
		         "(row stride %lld floats)",
		         (long long)ld);
		return -1;
	}
	if (n_tok == 0)
		return 0;
	switch (S) {
	case 16:
		return ssm_gdn_run<16>(ctx, d_qkv, ld, d_g, d_beta, d_s, n_tok,
		                       HK, HV, eps, d_o, chunked, err, errlen);
	case 32:
		return ssm_gdn_run<32>(ctx, d_qkv, ld, d_g, d_beta, d_s, n_tok,
		                       HK, HV, eps, d_o, chunked, err, errlen);
	case 64:
		return ssm_gdn_run<64>(ctx, d_qkv, ld, d_g, d_beta, d_s, n_tok,
		                       HK, HV, eps, d_o, chunked, err, errlen);
	case 128:
		return ssm_gdn_run<128>(ctx, d_qkv, ld, d_g, d_beta, d_s, n_tok,
		                        HK, HV, eps, d_o, chunked, err, errlen);
	default:
		return ssm_gdn_run<256>(ctx, d_qkv, ld, d_g, d_beta, d_s, n_tok,
		                        HK, HV, eps, d_o, chunked, err, errlen);
	}
}

extern "C" int cuda_op_gdn(struct cuda_ctx *ctx, const float *d_qkv, int64_t ld,
                           const float *d_g, const float *d_beta, float *d_s,
                           int32_t n_tok, int32_t HK, int32_t HV, int32_t S,
                           float eps, float *d_o, char *err, size_t errlen)
{
	return cuda_op_gdn_force(ctx, d_qkv, ld, d_g, d_beta, d_s, n_tok, HK,
	                         HV, S, eps, d_o, 0, err, errlen);
}

/*
 * cuda_attn_mma.cuh - the attention of a batch of queries (a prompt, a
 * follow-up turn deep in a conversation) on tensor cores: flash attention
 * with mma.sync (fp16 inputs, fp32 sums) over the fp16 KV cache, for head
 * sizes 64, 128, 256 and 512. Included by cuda_attn.cu, whose cuda_op_attention
 * launches it and whose at_merge_kernel combines its key chunks.
 *
 * NOTES ON THE DESIGN
 *
 * 1. A block is (ROWS query rows, one KV head, one chunk of keys). Its
 *    rows are (token, query head of the KV head's group) pairs in that
 *    order, so the group's heads share every K and V tile a block loads
 *    (at_tile_kernel, the fp32 kernel before this one, loaded them once
 *    per query head) and a group of 7 or 16 heads is no special case. A
 *    warp owns 16 rows.
 * 2. Per tile of KT keys: S = Q K^T on mma.sync.m16n8k16 (the queries'
 *    fragments in registers for the whole walk, the keys' read from
 *    shared memory by ldmatrix), the causal and window mask, the online
 *    softmax in registers (a row's 16 scores a thread, the row's maximum
 *    over the 4 lanes that share it), then O += P V with P passed from
 *    the score accumulators to the A operand without shared memory (the
 *    m16n8k16 accumulator layout of two n-tiles is the A layout of one
 *    k-step) and V by ldmatrix.trans. The next tile's K and V arrive by
 *    cp.async while this one is computed (two stages).
 * 3. Numbers: the queries are scaled by scale * log2(e) in fp32 and then
 *    rounded to fp16 (the GEMM's inputs are rounded so too), the scores
 *    and the softmax are fp32 in base 2 (exp2), P is rounded to fp16 for
 *    the second product, every sum is fp32. The row maximum written for
 *    the merge is converted back to base e. Against the fp32 kernels the
 *    output moves by ~1e-7 NMSE (t_cuda_ops).
 * 4. Keys past the block's range (the chunk's end, the causal end of its
 *    last row) are zero-filled by cp.async and masked: a stale cache row
 *    (any bits, a NaN) never reaches a product with a nonzero weight.
 *    A row whose scores are all masked in a tile keeps m = -inf; its p are
 *    0 and its accumulators stay 0 (the maximum used for exp2 is 0 then).
 * 5. Heads of 256 and 512 (Gemma 3's, Gemma 4's): a warp's 16 rows of
 *    queries and outputs in registers would be 2x and 4x those of 128,
 *    past the register file. So CS warps share 16 rows, each holding a
 *    slice of HD / CS dims (CS = 2 for 256, 4 for 512; 64 / CS rows a
 *    block): each takes its slice's part of S = Q K^T, the parts are
 *    summed through shared memory (in the slices' order, so every warp of
 *    the group has the same S and the same softmax), and each adds P V
 *    for its slice of the output. A 512 head's tile is 32 keys (two
 *    stages of K and V fit in shared memory).
 */
#ifndef PARLEY_CUDA_ATTN_MMA_CUH
#define PARLEY_CUDA_ATTN_MMA_CUH

#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#define AM_THREADS 128 /* 4 warps */

/* The shape of at_mma_kernel<HD> (note 5): CS warps share 16 rows, ROWS
 * rows a block, KT keys a tile; its dynamic shared memory (bytes): the
 * queries [ROWS][P] and two stages of K [KT][P] and V [KT][P] halves, P =
 * HD + 8 (rows 16-byte aligned; a row stride of 16 mod 128 bytes keeps
 * ldmatrix's eight row reads on distinct banks), then with CS > 1 each
 * warp's part of S (KT / 8 x 4 floats a lane). */
template <int HD> struct am_smem {
	static constexpr int CS = HD <= 128 ? 1 : HD / 128;
	static constexpr int ROWS = 64 / CS;
	static constexpr int KT = HD <= 256 ? 64 : 32;
	static constexpr int P = HD + 8;
	static constexpr size_t q = 0;
	static constexpr size_t kv = q + sizeof(__half) * ROWS * P;
	static constexpr size_t stage = sizeof(__half) * 2 * KT * P;
	static constexpr size_t sx = kv + 2 * stage;
	static constexpr size_t bytes =
	    sx + (CS > 1 ? sizeof(float) * AM_THREADS * (KT / 8) * 4 : 0);
};

/* D += A B on one m16n8k16 tile (fp16 in, fp32 sums). */
static __device__ __forceinline__ void am_mma(float *d, const uint32_t *a,
                                              uint32_t b0, uint32_t b1)
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
	             "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
	             "{%0,%1,%2,%3};"
	             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
	               "r"(b1));
}

/* Four 8x8 fp16 matrices from shared memory, lane l giving row l % 8 of
 * matrix l / 8 at P; TRANS: transposed. */
template <bool TRANS>
static __device__ __forceinline__ void am_ldsm4(uint32_t *r, const __half *p)
{
	const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);

	if constexpr (TRANS)
		asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 "
		             "{%0,%1,%2,%3}, [%4];"
		             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		             : "r"(a));
	else
		asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 "
		             "{%0,%1,%2,%3}, [%4];"
		             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		             : "r"(a));
}

/* 16 bytes from global SRC to shared DST, or zeros where !VALID. */
static __device__ __forceinline__ void am_cp16(__half *dst, const __half *src,
                                               bool valid)
{
	const uint32_t a = (uint32_t)__cvta_generic_to_shared(dst);

	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(a),
	             "l"(src), "r"(valid ? 16 : 0));
}

static __device__ __forceinline__ uint32_t am_pack(float lo, float hi)
{
	const __half2 h = __floats2half2_rn(lo, hi);

	return *(const uint32_t *)&h;
}

/*
 * Rows (token t, head kvh * G + g) = row r0 + i of blockIdx.x's ROWS
 * (r = t * G + g; am_smem<HD>), KV head blockIdx.y, keys of chunk blockIdx.z
 * (CHUNK keys each; CHUNK 0: all of them, one chunk): OUT = softmax(Q K^T *
 * SCALE) V per row, with a sink's logit in the sum where SINKS; or, with
 * CHUNK > 0, each row's unnormalised sums into PART and (m, l) into ML
 * for at_merge_kernel (at_tile_kernel's contract, the same scratch).
 */
template <int HD>
__global__ void __launch_bounds__(AM_THREADS)
    at_mma_kernel(const float *q, const __half *kc, const __half *vc,
                  int32_t n_tok, int32_t n_head, int32_t n_kv, int32_t n_ctx,
                  int32_t il, int32_t pos0, const int32_t *dpos, int32_t chunk,
                  int32_t nch, float scale, int32_t window, const float *sinks,
                  float *part, float *ml, float *out)
{
	cu_pdl_sync(); /* first: cuda_launch.cuh */
	if (dpos != NULL)
		pos0 = *dpos;
	using SM = am_smem<HD>;
	/* a warp's slice of the dims: KS k-steps of S, ND n-tiles of O */
	constexpr int P = SM::P, CS = SM::CS, KT = SM::KT, ROWS = SM::ROWS;
	constexpr int KS = HD / CS / 16, ND = HD / CS / 8;
	extern __shared__ __align__(16) unsigned char am_sm[];
	__half *qs = (__half *)(am_sm + SM::q);
	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
	const int gid = lane >> 2, tig = lane & 3;
	/* the warp's 16 rows (row group rg) and its slice's first dim */
	const int rg = warp / CS, d0 = (warp % CS) * (HD / CS);
	const int G = n_head / n_kv, kvh = blockIdx.y;
	const int64_t n_rows = (int64_t)n_tok * G;
	const int64_t r0 = (int64_t)blockIdx.x * ROWS;
	const int64_t r_end = r0 + ROWS < n_rows ? r0 + ROWS : n_rows;
	const int32_t last = pos0 + (int32_t)((r_end - 1) / G);
	const int32_t k_lo = chunk > 0 ? (int32_t)blockIdx.z * chunk : 0;
	const int32_t k_hi =
	    chunk > 0 && k_lo + chunk - 1 < last ? k_lo + chunk - 1 : last;
	const size_t head0 = ((size_t)il * n_kv + (size_t)kvh) * (size_t)n_ctx;
	const __half *kh = kc + head0 * HD, *vh = vc + head0 * HD;

	if (k_lo > last)
		return; /* no row of the block reaches the chunk */
	/* a sliding window: the tiles before the first row's window hold
	   no key any row attends to */
	int32_t k_start = k_lo;
	const int32_t first = pos0 + (int32_t)(r0 / G);
	if (window > 0 && first - window + 1 > k_lo)
		k_start = k_lo + (first - window + 1 - k_lo) / KT * KT;

	/* K and V of the tile at K0 into stage S (zeros past k_hi) */
	const auto load = [&](int s, int32_t k0) {
		__half *ks = (__half *)(am_sm + SM::kv + s * SM::stage);
		__half *vs = ks + KT * P;

		for (int i = tid; i < KT * (HD / 8); i += AM_THREADS) {
			const int r = i / (HD / 8), c = (i % (HD / 8)) * 8;
			const bool ok = k0 + r <= k_hi;
			/* (a zero fill reads nothing, yet its address is a row
			   the cache holds: k_start is, where a window's ring
			   holds no row of k_lo's, backend_cuda.cu) */
			const size_t at =
			    (size_t)(ok ? k0 + r : k_start) * HD + c;

			am_cp16(ks + r * P + c, kh + at, ok);
			am_cp16(vs + r * P + c, vh + at, ok);
		}
	};
	load(0, k_start);
	asm volatile("cp.async.commit_group;");

	/* the queries, scaled to base 2, as fp16 */
	const float qscale = scale * 1.4426950408889634f;
	for (int i = tid; i < ROWS * (HD / 4); i += AM_THREADS) {
		const int r = i / (HD / 4), d = (i % (HD / 4)) * 4;
		const int64_t gr = r0 + r;
		float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

		if (gr < n_rows) {
			const int64_t t = gr / G, h = kvh * G + gr % G;

			v = *(const float4 *)(q +
			                      ((size_t)t * n_head + h) * HD +
			                      d);
		}
		*(uint2 *)(qs + r * P + d) =
		    make_uint2(am_pack(v.x * qscale, v.y * qscale),
		               am_pack(v.z * qscale, v.w * qscale));
	}
	__syncthreads();
	uint32_t qf[KS][4];
#pragma unroll
	for (int kk = 0; kk < KS; kk++)
		am_ldsm4<false>(qf[kk], qs + (rg * 16 + (lane & 15)) * P + d0 +
		                            kk * 16 + (lane >> 4) * 8);

	/* this thread's two rows: gid and gid + 8 of the warp's 16 */
	int32_t qpos[2];
#pragma unroll
	for (int a = 0; a < 2; a++) {
		const int64_t gr = r0 + rg * 16 + gid + 8 * a;

		qpos[a] = gr < n_rows ? pos0 + (int32_t)(gr / G) : -1;
	}
	float o[ND][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
	for (int j = 0; j < ND; j++)
		o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;

	int it = 0;
	for (int32_t k0 = k_start; k0 <= k_hi; k0 += KT, it++) {
		if (k0 + KT <= k_hi)
			load((it + 1) & 1, k0 + KT);
		asm volatile("cp.async.commit_group;");
		asm volatile("cp.async.wait_group 1;");
		__syncthreads();
		const __half *ks =
		    (const __half *)(am_sm + SM::kv + (it & 1) * SM::stage);
		const __half *vs = ks + KT * P;

		/* S = Q K^T: n-tile j = keys 8j..8j + 7 (the slice's part) */
		float s[KT / 8][4];
#pragma unroll
		for (int j = 0; j < KT / 8; j++) {
			s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
			for (int kk = 0; kk < KS; kk += 2) {
				uint32_t b[4];

				am_ldsm4<false>(
				    b, ks + (j * 8 + (lane & 7)) * P + d0 +
				           kk * 16 + (lane >> 3) * 8);
				am_mma(s[j], qf[kk], b[0], b[1]);
				am_mma(s[j], qf[kk + 1], b[2], b[3]);
			}
		}
		if constexpr (CS > 1) {
			/* the group's parts summed in slice order (note 5): a
			   lane's values sit at the same place of every warp's
			 */
			float *sx = (float *)(am_sm + SM::sx);
#pragma unroll
			for (int j = 0; j < KT / 8; j++)
#pragma unroll
				for (int e = 0; e < 4; e++)
					sx[((warp * (KT / 8) + j) * 4 + e) *
					       32 +
					   lane] = s[j][e];
			__syncthreads();
#pragma unroll
			for (int j = 0; j < KT / 8; j++)
#pragma unroll
				for (int e = 0; e < 4; e++) {
					float t = 0.0f;
#pragma unroll
					for (int c = 0; c < CS; c++)
						t += sx[(((rg * CS + c) *
						              (KT / 8) +
						          j) *
						             4 +
						         e) *
						            32 +
						        lane];
					s[j][e] = t;
				}
		}
		/* mask, online softmax (base 2) */
		float corr[2];
#pragma unroll
		for (int a = 0; a < 2; a++) {
			float mx = -INFINITY;
#pragma unroll
			for (int j = 0; j < KT / 8; j++)
#pragma unroll
				for (int e = 0; e < 2; e++) {
					const int32_t kp =
					    k0 + j * 8 + tig * 2 + e;
					const bool ok = kp <= k_hi &&
					                kp <= qpos[a] &&
					                (window == 0 ||
					                 qpos[a] - kp < window);
					float *v = &s[j][2 * a + e];

					*v = ok ? *v : -INFINITY;
					mx = fmaxf(mx, *v);
				}
			mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
			mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
			const float m_new = fmaxf(m[a], mx);
			const float mu = m_new == -INFINITY ? 0.0f : m_new;
			float sum = 0.0f;

			corr[a] = exp2f(m[a] - mu);
#pragma unroll
			for (int j = 0; j < KT / 8; j++)
#pragma unroll
				for (int e = 0; e < 2; e++) {
					float *v = &s[j][2 * a + e];

					*v = exp2f(*v - mu);
					sum += *v;
				}
			l[a] = l[a] * corr[a] + sum;
			m[a] = m_new;
		}
#pragma unroll
		for (int j = 0; j < ND; j++) {
			o[j][0] *= corr[0], o[j][1] *= corr[0];
			o[j][2] *= corr[1], o[j][3] *= corr[1];
		}
		/* O += P V: k-step kk = keys 16kk..16kk + 15 */
#pragma unroll
		for (int kk = 0; kk < KT / 16; kk++) {
			const uint32_t pa[4] = {
			    am_pack(s[2 * kk][0], s[2 * kk][1]),
			    am_pack(s[2 * kk][2], s[2 * kk][3]),
			    am_pack(s[2 * kk + 1][0], s[2 * kk + 1][1]),
			    am_pack(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
			for (int j = 0; j < ND; j += 2) {
				uint32_t b[4];

				am_ldsm4<true>(
				    b, vs + (kk * 16 + (lane & 15)) * P + d0 +
				           j * 8 + (lane >> 4) * 8);
				am_mma(o[j], pa, b[0], b[1]);
				am_mma(o[j + 1], pa, b[2], b[3]);
			}
		}
		__syncthreads(); /* the stage is read before it is refilled */
	}
	asm volatile("cp.async.wait_group 0;");

	/* the rows' sums over their four lanes, then the outputs */
#pragma unroll
	for (int a = 0; a < 2; a++) {
		l[a] += __shfl_xor_sync(0xffffffffu, l[a], 1);
		l[a] += __shfl_xor_sync(0xffffffffu, l[a], 2);
	}
#pragma unroll
	for (int a = 0; a < 2; a++) {
		const int64_t gr = r0 + rg * 16 + gid + 8 * a;

		if (qpos[a] < 0 || qpos[a] < k_lo)
			continue; /* past the rows, or before the chunk */
		const int64_t t = gr / G, h = kvh * G + gr % G;
		const size_t th = (size_t)t * n_head + (size_t)h;
		/* the maximum in base e (-inf stays -inf) */
		const float m_e = m[a] * 0.6931471805599453f;

		if (chunk > 0) {
			float *pp = part + (th * nch + blockIdx.z) * HD + d0;
#pragma unroll
			for (int j = 0; j < ND; j++)
				*(float2 *)(pp + j * 8 + tig * 2) =
				    make_float2(o[j][2 * a], o[j][2 * a + 1]);
			if (tig == 0 && d0 == 0) {
				ml[(th * nch + blockIdx.z) * 2] = m_e;
				ml[(th * nch + blockIdx.z) * 2 + 1] = l[a];
			}
			continue;
		}
		const float inv =
		    1.0f / (sinks != NULL ? l[a] + expf(sinks[h] - m_e) : l[a]);
		float *po = out + th * HD + d0;
#pragma unroll
		for (int j = 0; j < ND; j++)
			*(float2 *)(po + j * 8 + tig * 2) = make_float2(
			    o[j][2 * a] * inv, o[j][2 * a + 1] * inv);
	}
}

#endif /* PARLEY_CUDA_ATTN_MMA_CUH */

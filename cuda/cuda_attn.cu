/*
 * cuda_attn.cu - causal grouped-query attention over the fp16 KV cache:
 * for a batch of queries (prefill, a follow-up turn) at_tile_kernel (head
 * sizes 64 and 128), its keys split and merged by at_merge_kernel when the
 * tiles alone would leave the GPU idle; for fewer than
 * CUDA_GEMM_MIN_TOKENS (decode) at_split_kernel + at_merge_kernel, split
 * over the cached positions; at_warp_kernel for the rest (other head
 * sizes, head_dim not a multiple of 8, PARLEY_CUDA_ATTN_WARP=1).
 *
 * NOTES ON THE DESIGN
 *
 * at_warp_kernel: one warp per (token, query head), online softmax over
 * the cached positions in chunks of 32, so any context length works with
 * no score buffer:
 *   - scores: lane j takes key base + j and dots it with the query (kept
 *     in shared memory, read by every lane as a broadcast); the key is one
 *     contiguous run of head_dim halves in the [layer][kv_head][pos][dim]
 *     cache;
 *   - the chunk's maximum and sum are warp reductions; the running output
 *     is rescaled by exp(m_old - m_new) (flash-attention's recurrence);
 *   - values: for each key of the chunk, lanes take consecutive dims
 *     (d = lane + 32 c), so a value row is read coalesced.
 * All arithmetic is fp32; K and V are fp16 as stored. A batch has many
 * (token, head) pairs to keep the GPU busy; a decode query has few, so
 * its positions are split across blocks (at_split_kernel below).
 */
#include "cuda_check.cuh"
#include "cuda_knobs.h"
#include "cuda_kvq.cuh"
#include "cuda_launch.cuh"
#include "cuda_ops.h"
#include "cuda_reduce.cuh"
#include "cuda_vecdot8.cuh"

#include "cuda_attn_mma.cuh" /* at_mma_kernel */

#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#define AT_WARPS 4                             /* (token, head) per block */
#define AT_NC    (CUDA_ATTN_MAX_HEAD_DIM / 32) /* output dims per lane */

__global__ void at_warp_kernel(const float *q, const __half *kc,
                               const __half *vc, int32_t n_tok, int32_t n_head,
                               int32_t n_kv, int32_t hd, int32_t n_ctx,
                               int32_t il, int32_t pos0, const int32_t *dpos,
                               float scale, int32_t window, const float *sinks,
                               float *out)
{
	cu_pdl_sync();    /* first: cuda_launch.cuh */
	if (dpos != NULL) /* a captured decode step (cuda_ctx.d_pos) */
		pos0 = *dpos;
	__shared__ float qs[AT_WARPS][CUDA_ATTN_MAX_HEAD_DIM];
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int64_t pair = (int64_t)blockIdx.x * AT_WARPS + warp;

	if (pair >= (int64_t)n_tok * n_head)
		return;
	const int32_t t = (int32_t)(pair / n_head);
	const int h = (int)(pair % n_head), kvh = h / (n_head / n_kv);
	const int32_t pos = pos0 + t;
	const size_t head0 = ((size_t)il * n_kv + (size_t)kvh) * (size_t)n_ctx;
	const __half *kh = kc + head0 * hd, *vh = vc + head0 * hd;
	const float *qv = q + (size_t)pair * hd;
	float acc[AT_NC];
	float m = -INFINITY, l = 0.0f;

	for (int d = lane; d < hd; d += 32)
		qs[warp][d] = qv[d];
	__syncwarp();
#pragma unroll
	for (int c = 0; c < AT_NC; c++)
		acc[c] = 0.0f;

	/* a sliding window: positions lo..pos (key `lo` valid: the running
	   maximum is finite from the first chunk) */
	const int32_t lo = window > 0 && pos >= window ? pos - window + 1 : 0;

	for (int32_t base = lo; base <= pos; base += 32) {
		const int32_t i = base + lane;
		const bool valid = i <= pos;
		float s = -INFINITY;

		if (valid) {
			const __half *kp = kh + (size_t)i * hd;
			float dot = 0.0f;

			for (int d = 0; d < hd; d++)
				dot += qs[warp][d] * __half2float(kp[d]);
			s = dot * scale;
		}
		const float cm = red_warp<red_max>(s);
		const float m_new = fmaxf(m, cm); /* finite: key `base` valid */
		const float corr = expf(m - m_new);
		const float p = valid ? expf(s - m_new) : 0.0f;
		const float ps = red_warp<red_add>(p);
		l = l * corr + ps;
		m = m_new;
#pragma unroll
		for (int c = 0; c < AT_NC; c++)
			acc[c] *= corr;
		const int nvalid = pos - base + 1 < 32 ? pos - base + 1 : 32;
		for (int jj = 0; jj < nvalid; jj++) {
			const float pj = __shfl_sync(0xffffffffu, p, jj);
			const __half *vp = vh + (size_t)(base + jj) * hd;
#pragma unroll
			for (int c = 0; c < AT_NC; c++) {
				const int d = lane + 32 * c;
				if (d < hd)
					acc[c] += pj * __half2float(vp[d]);
			}
		}
	}
	/* a sink (a logit with no value) joins the softmax's sum */
	const float inv = 1.0f / (sinks != NULL ? l + expf(sinks[h] - m) : l);
	float *o = out + (size_t)pair * hd;
#pragma unroll
	for (int c = 0; c < AT_NC; c++) {
		const int d = lane + 32 * c;
		if (d < hd)
			o[d] = acc[c] * inv;
	}
}

/* ------------------------------------------------ tiled prefill attention */

/*
 * Prefill (and any batch of at least CUDA_GEMM_MIN_TOKENS queries, e.g. a
 * follow-up turn over a long cache): block = (tile of AT_TILE_Q consecutive
 * tokens, query head). The block walks the cached positions in tiles of
 * AT_TILE_K keys: K and V tiles go through shared memory once and serve all
 * AT_TILE_Q queries (at_warp_kernel re-reads every key from L2 for every
 * query: a cost quadratic in the prompt). Per key tile:
 *   - scores: thread = 2 queries x 4 keys (a register tile), queries
 *     (pre-scaled, fp32) and keys (fp16) read from shared memory four
 *     dims at a time;
 *   - the causal mask, then each query row's online-softmax step (4
 *     threads per row, max and sum by shuffles; row state m, l in shared
 *     memory): the flash-attention recurrence of at_warp_kernel;
 *   - values: thread = 4 query rows x HD / 16 dims, accumulators in
 *     registers, rescaled by the row's exp(m_old - m_new).
 * All arithmetic is fp32. The first key a block walks is visible to every
 * query it writes, so a row's maximum is finite after the first tile and
 * exp never sees inf - inf. Rows past n_tok (the last tile) compute with
 * zero queries and are not written.
 *
 * Few queries over a long cache (a follow-up turn: 30 tokens after 4,000)
 * give few blocks, each walking every key (one tile: a block per head).
 * There the keys are split too (blockIdx.z = chunk of CHUNK keys,
 * at_tile_split) and each block writes its rows' unnormalised sums and
 * (m, l) for at_merge_kernel, the decode path's log-sum-exp merge; a row
 * whose causal length ends before the chunk writes nothing, and the merge
 * reads only the chunks its length reaches.
 */
#define AT_TILE_Q       32 /* queries per block */
#define AT_TILE_K       32 /* keys per shared-memory tile */
#define AT_TILE_THREADS 128

/* The shared memory of at_tile_kernel<HD>, dynamic (a head of 256 needs
 * 70 KiB, past the 48 KiB of static shared memory): offsets in bytes of
 * the queries [AT_TILE_Q][HD + 4] floats, the key and value tiles
 * [AT_TILE_K][HD + 8] halves (rows 16-byte aligned), the scores
 * [AT_TILE_Q][AT_TILE_K + 1] and the rows' m, l, c; every offset a
 * multiple of 16. */
template <int HD> struct at_tile_smem {
	static constexpr size_t q = 0;
	static constexpr size_t k = q + sizeof(float) * AT_TILE_Q * (HD + 4);
	static constexpr size_t v = k + sizeof(__half) * AT_TILE_K * (HD + 8);
	static constexpr size_t p = v + sizeof(__half) * AT_TILE_K * (HD + 8);
	static constexpr size_t rows =
	    p + sizeof(float) * AT_TILE_Q * (AT_TILE_K + 1);
	static constexpr size_t bytes = rows + sizeof(float) * 3 * AT_TILE_Q;
	static_assert(k % 16 == 0 && v % 16 == 0 && p % 16 == 0,
	              "at_tile_smem: 16-byte aligned tiles");
};

template <int HD>
__global__ void __launch_bounds__(AT_TILE_THREADS)
    at_tile_kernel(const float *q, const __half *kc, const __half *vc,
                   int32_t n_tok, int32_t n_head, int32_t n_kv, int32_t n_ctx,
                   int32_t il, int32_t pos0, const int32_t *dpos, int32_t chunk,
                   int32_t nch, float scale, int32_t window, const float *sinks,
                   float *part, float *ml, float *out)
{
	cu_pdl_sync(); /* first: cuda_launch.cuh */
	if (dpos != NULL)
		pos0 = *dpos;
	constexpr int QP = HD + 4;   /* padded rows: fewer bank conflicts */
	constexpr int KP = HD + 8;   /* halves; rows stay 16-byte aligned */
	constexpr int DPT = HD / 16; /* output dims per thread */
	extern __shared__ __align__(16) unsigned char at_tile_sm[];
	using SM = at_tile_smem<HD>;
	float *qs = (float *)(at_tile_sm + SM::q);
	__half *ks = (__half *)(at_tile_sm + SM::k);
	__half *vs = (__half *)(at_tile_sm + SM::v);
	float(*ps)[AT_TILE_K + 1] =
	    (float(*)[AT_TILE_K + 1])(at_tile_sm + SM::p);
	float *row_m = (float *)(at_tile_sm + SM::rows);
	float *row_l = row_m + AT_TILE_Q, *row_c = row_l + AT_TILE_Q;
	const int tid = threadIdx.x, h = blockIdx.y;
	const int32_t t0 = blockIdx.x * AT_TILE_Q;
	const int nq = n_tok - t0 < AT_TILE_Q ? n_tok - t0 : AT_TILE_Q;
	const int kvh = h / (n_head / n_kv);
	const size_t head0 = ((size_t)il * n_kv + (size_t)kvh) * (size_t)n_ctx;
	const __half *kh = kc + head0 * HD, *vh = vc + head0 * HD;
	const int32_t last = pos0 + t0 + nq - 1; /* the tile's last position */
	/* the keys of this block: all (chunk 0) or chunk blockIdx.z */
	const int32_t k_lo = chunk > 0 ? (int32_t)blockIdx.z * chunk : 0;
	const int32_t k_hi =
	    chunk > 0 && k_lo + chunk - 1 < last ? k_lo + chunk - 1 : last;

	if (k_lo > last)
		return; /* no query of the tile reaches the chunk */

	for (int i = tid; i < AT_TILE_Q * HD; i += AT_TILE_THREADS) {
		const int r = i / HD, d = i % HD;
		qs[r * QP + d] =
		    r < nq ? q[((size_t)(t0 + r) * n_head + h) * HD + d] * scale
		           : 0.0f;
	}
	if (tid < AT_TILE_Q) {
		row_m[tid] = -INFINITY;
		row_l[tid] = 0.0f;
	}
	/* the score tile: queries sq, sq + 16; keys sk + 8 j */
	const int sq = tid / 8, sk = tid % 8;
	/* the output tile: rows orow..orow + 3, dims od..od + DPT - 1 */
	const int orow = (tid / 16) * 4, od = (tid % 16) * DPT;
	float acc[4][DPT];
#pragma unroll
	for (int r = 0; r < 4; r++)
#pragma unroll
		for (int d = 0; d < DPT; d++)
			acc[r][d] = 0.0f;

	/* a sliding window: the key tiles before the tile's first query's
	   window hold no key any query attends to */
	int32_t k_start = k_lo;
	if (window > 0 && pos0 + t0 - window + 1 > k_lo)
		k_start = k_lo + (pos0 + t0 - window + 1 - k_lo) / AT_TILE_K *
		                     AT_TILE_K;
	for (int32_t k0 = k_start; k0 <= k_hi; k0 += AT_TILE_K) {
		const int nk =
		    k_hi - k0 + 1 < AT_TILE_K ? k_hi - k0 + 1 : AT_TILE_K;
		__syncthreads(); /* the previous tile's K, V, P are used up */
		for (int i = tid; i < AT_TILE_K * (HD / 8);
		     i += AT_TILE_THREADS) {
			const int r = i / (HD / 8), c = i % (HD / 8);
			uint4 kv4 = make_uint4(0, 0, 0, 0), vv4 = kv4;
			if (r < nk) {
				kv4 = ((const uint4 *)(kh + (size_t)(k0 + r) *
				                                HD))[c];
				vv4 = ((const uint4 *)(vh + (size_t)(k0 + r) *
				                                HD))[c];
			}
			*(uint4 *)(ks + r * KP + c * 8) = kv4;
			*(uint4 *)(vs + r * KP + c * 8) = vv4;
		}
		__syncthreads();

		/* scores */
		float sc[2][4];
#pragma unroll
		for (int a = 0; a < 2; a++)
#pragma unroll
			for (int j = 0; j < 4; j++)
				sc[a][j] = 0.0f;
#pragma unroll 4
		for (int d = 0; d < HD; d += 4) {
			const float4 qa = *(const float4 *)(qs + sq * QP + d);
			const float4 qb =
			    *(const float4 *)(qs + (sq + 16) * QP + d);
#pragma unroll
			for (int j = 0; j < 4; j++) {
				const uint2 raw = *(
				    const uint2 *)(ks + (sk + 8 * j) * KP + d);
				const float2 k01 =
				    __half22float2(*(const __half2 *)&raw.x);
				const float2 k23 =
				    __half22float2(*(const __half2 *)&raw.y);
				sc[0][j] += qa.x * k01.x + qa.y * k01.y +
				            qa.z * k23.x + qa.w * k23.y;
				sc[1][j] += qb.x * k01.x + qb.y * k01.y +
				            qb.z * k23.x + qb.w * k23.y;
			}
		}
#pragma unroll
		for (int a = 0; a < 2; a++) {
			const int r = sq + 16 * a;
			const int32_t qpos = pos0 + t0 + r;
#pragma unroll
			for (int j = 0; j < 4; j++) {
				const int kj = sk + 8 * j;
				/* causal, and inside a sliding window;
				   a row's tile may be all -inf: its p are 0
				   and its rescale (m_old = -inf) 0 */
				ps[r][kj] =
				    (kj < nk && k0 + kj <= qpos &&
				     (window == 0 || qpos - (k0 + kj) < window))
				        ? sc[a][j]
				        : -INFINITY;
			}
		}
		__syncthreads();

		/* softmax step: 4 threads per row, 8 keys each */
		{
			const int r = tid / 4, part = tid % 4;
			float v[8], mx = -INFINITY;
#pragma unroll
			for (int j = 0; j < 8; j++) {
				v[j] = ps[r][part * 8 + j];
				mx = fmaxf(mx, v[j]);
			}
			mx = red_quad<red_max>(mx);
			const float m_old = row_m[r];
			const float m_new = fmaxf(m_old, mx);
			float sum = 0.0f;
#pragma unroll
			for (int j = 0; j < 8; j++) {
				const float p = v[j] == -INFINITY
				                    ? 0.0f
				                    : expf(v[j] - m_new);
				ps[r][part * 8 + j] = p;
				sum += p;
			}
			sum = red_quad<red_add>(sum);
			__syncwarp();
			if (part == 0) {
				/* m_old is -inf only before the first tile,
				   where the accumulators are still zero */
				const float corr = m_old == -INFINITY
				                       ? 0.0f
				                       : expf(m_old - m_new);
				row_c[r] = corr;
				row_l[r] = row_l[r] * corr + sum;
				row_m[r] = m_new;
			}
		}
		__syncthreads();

		/* values */
#pragma unroll
		for (int r = 0; r < 4; r++) {
			const float c = row_c[orow + r];
#pragma unroll
			for (int d = 0; d < DPT; d++)
				acc[r][d] *= c;
		}
		for (int j = 0; j < nk; j++) {
			float vf[DPT];
#pragma unroll
			for (int d = 0; d < DPT; d += 2) {
				const float2 f = __half22float2(
				    *(const __half2 *)(vs + j * KP + od + d));
				vf[d] = f.x;
				vf[d + 1] = f.y;
			}
#pragma unroll
			for (int r = 0; r < 4; r++) {
				const float p = ps[orow + r][j];
#pragma unroll
				for (int d = 0; d < DPT; d++)
					acc[r][d] += p * vf[d];
			}
		}
	}
	__syncthreads();
#pragma unroll
	for (int r = 0; r < 4; r++) {
		const int row = orow + r;
		if (row >= nq || pos0 + t0 + row < k_lo)
			continue;
		const size_t th = (size_t)(t0 + row) * n_head + h;
		if (chunk > 0) { /* a chunk's share, for at_merge_kernel */
			float *o = part + (th * nch + blockIdx.z) * HD + od;
#pragma unroll
			for (int d = 0; d < DPT; d++)
				o[d] = acc[r][d];
			if (od == 0) {
				ml[(th * nch + blockIdx.z) * 2] = row_m[row];
				ml[(th * nch + blockIdx.z) * 2 + 1] =
				    row_l[row];
			}
			continue;
		}
		const float inv =
		    1.0f / (sinks != NULL
		                ? row_l[row] + expf(sinks[h] - row_m[row])
		                : row_l[row]);
		float *o = out + th * HD + od;
#pragma unroll
		for (int d = 0; d < DPT; d++)
			o[d] = acc[r][d] * inv;
	}
}

/* ------------------------------------------- split decode attention */

/*
 * Decode (and small batches): flash-decoding. The cached positions of a
 * query are cut into chunks of AT_SPLIT_CH * sub positions (at_split_sub picks
 * sub so that the blocks fill the GPU); block (chunk c, KV head with up to
 * AT_SPLIT_G of its query heads, token t) walks its chunk in sub-chunks of
 * AT_SPLIT_CH with an online softmax and writes, for each of its heads g, the
 * chunk's maximum score m, the sum l of exp(s - m) and the unnormalised
 * sum of exp(s - m) * V into the scratch; at_merge_kernel then combines the
 * chunks of each (token, head) with their log-sum-exp weights
 * exp(m_c - M). One K/V read serves the whole GQA group.
 *   - scores: four threads per position, each dotting every fourth
 *     16-byte piece (8 halves; head_dim % 8 == 0 and the cache is
 *     cudaMalloc'ed, so every row is 16-byte aligned) with the queries
 *     (in shared memory, a broadcast), then two shuffles add the four
 *     parts: a warp reads 8 key rows whole (coalesced), and a thread's
 *     chain of products is a quarter of a row;
 *   - softmax: a warp per head, a lane per position: the running maximum
 *     and sum, and the factor alpha = exp(m_old - m_new) that rescales
 *     the sums so far (flash-attention's recurrence);
 *   - values: thread = (dim group of 8, position slice); the lanes of a
 *     slice read one value row as consecutive 16-byte pieces (coalesced);
 *     at the end the slices' partial sums are added in slice order (the
 *     result does not depend on timing).
 * Why four threads a position and sub-chunks: a thread per position over
 * the whole row, a chunk a small block, gave few blocks of long chains
 * of products, and a long context many chunks for the merge to walk
 * (BENCHMARKS.md, "Moved from code comments").
 * All arithmetic is fp32. Chunks past a token's causal length do nothing
 * and the merge never reads them.
 */
#define AT_SPLIT_CH 32  /* positions per sub-chunk: a lane per position */
#define AT_SPLIT_T  128 /* threads per block: 4 per position for the scores */
#define AT_SPLIT_G  8   /* query heads of one KV head per block */
static_assert(AT_SPLIT_CH == 32 && AT_SPLIT_T == 4 * AT_SPLIT_CH,
              "at_split_kernel's layout");
/* Sub-chunks ahead whose keys and values a block asks L2 for while it
 * computes the current one: each sub-chunk is three barrier-separated
 * phases whose loads are otherwise DRAM round trips (a long cache was
 * read at a fraction of the bandwidth). A hint only: the results do not
 * change. AT_SPLIT_PF=0 at build time: none (for measuring). */
#ifndef AT_SPLIT_PF
#define AT_SPLIT_PF 2
#endif

/* Blocks of the split attention that fill the device's multiprocessors
 * AT_FILL times (264 on an H100 or H200): fewer blocks keep too few loads
 * in flight, more give the merge more chunks (twice measured best:
 * BENCHMARKS.md). A build-time knob, for measuring. */
#ifndef AT_FILL
#define AT_FILL 2
#endif
/* 1: groups of up to 4 query heads take at_split_kernel's 4-head
 * instantiation (fewer registers); 0: AT_SPLIT_G's (for measuring). */
#ifndef AT_SPLIT_GR4
#define AT_SPLIT_GR4 1
#endif
/* The 4-head instantiation's fill: 4 of its blocks fit a multiprocessor
 * (122 registers at HD 128) where 3 of the 8-head one's do, and 3 times
 * the multiprocessors measured best (AT_FILL 2, 3, 4, 6: BENCHMARKS.md). */
#ifndef AT_FILL_GR4
#define AT_FILL_GR4 3
#endif
static int32_t at_fill(const struct cuda_ctx *ctx)
{
	return AT_FILL * ctx->n_sm;
}

/* Whether the split path takes the 4-head instantiation: groups of up to
 * 4 query heads a KV head over an fp16 cache of a head size it has. */
static bool at_split_gr4(const struct cuda_ctx *ctx, int32_t group, int32_t hd)
{
	return AT_SPLIT_GR4 && !ctx->kv_q8 && group <= 4 &&
	       (hd == 64 || hd == 128 || hd == 256);
}

/* Sub-chunks per chunk for N_POS positions and N_GROUPS blocks a chunk
 * (KV heads x head blocks x tokens): the fewest for which the chunks
 * still give about FILL blocks (more sub-chunks: fewer chunks for the
 * merge to combine, less parallelism). */
static int32_t at_split_sub(int32_t n_pos, int32_t n_groups, int32_t fill)
{
	const int32_t want = (fill + n_groups - 1) / n_groups; /* chunks */
	const int32_t sub = n_pos / (AT_SPLIT_CH * (want > 0 ? want : 1));

	return sub > 1 ? sub : 1;
}

/* Scratch floats of the split path: per (token, head, chunk) hd partial
 * sums and (m, l). */
static size_t at_split_floats(int32_t n_tok, int32_t n_head, int32_t hd,
                              int32_t nch)
{
	return (size_t)n_tok * n_head * nch * (size_t)(hd + 2);
}

/* The split of N_POS positions for N_TOK tokens (at_split_launch's, and the
 * decode graphs' scratch: cuda_op_attention_graph_reserve): SUB
 * sub-chunks a chunk, NCH chunks, NF floats of scratch. */
struct at_split_shape {
	int32_t sub, nch;
	size_t nf;
};

static struct at_split_shape at_split_shape_of(const struct cuda_ctx *ctx,
                                               int32_t n_tok, int32_t n_head,
                                               int32_t n_kv, int32_t hd,
                                               int32_t n_pos)
{
	const int nhb = (n_head / n_kv + AT_SPLIT_G - 1) / AT_SPLIT_G;
	struct at_split_shape s;

	s.sub = at_split_sub(n_pos, n_kv * nhb * n_tok,
	                     at_split_gr4(ctx, n_head / n_kv, hd)
	                         ? AT_FILL_GR4 * ctx->n_sm
	                         : at_fill(ctx));
	s.nch = (n_pos + AT_SPLIT_CH * s.sub - 1) / (AT_SPLIT_CH * s.sub);
	s.nf = at_split_floats(n_tok, n_head, hd, s.nch);
	return s;
}

/* Shared memory of at_split_kernel: queries [AT_SPLIT_G][hd], p
 * [AT_SPLIT_G][AT_SPLIT_CH], the running (m, l, alpha) [AT_SPLIT_G][3], the
 * value slices' partial sums [AT_SPLIT_T / (hd / 8)][AT_SPLIT_G][hd]. */
static size_t at_split_smem(int32_t hd)
{
	return sizeof(float) *
	       ((size_t)AT_SPLIT_G * hd + (size_t)AT_SPLIT_G * AT_SPLIT_CH +
	        (size_t)AT_SPLIT_G * 3 +
	        (size_t)(AT_SPLIT_T / (hd / 8)) * AT_SPLIT_G * hd);
}

/* The caches at_split_kernel reads: a head's row of a position is
 * row(hd) elements of elem; piece P of it (values 8 P .. 8 P + 7) is
 * fetched as a raw and unpacked into 8 floats, exactly. */
struct at_kv_f16 { /* fp16 */
	using elem = __half;
	using raw = uint4;
	static __device__ __forceinline__ int row(int hd)
	{
		return hd;
	}
	static __device__ __forceinline__ raw fetch(const elem *r, int p)
	{
		return ((const uint4 *)r)[p];
	}
	static __device__ __forceinline__ void unpack(const raw &x, float *v)
	{
		const __half2 *h2 = (const __half2 *)&x;

#pragma unroll
		for (int j = 0; j < 4; j++) {
			const float2 f = __half22float2(h2[j]);

			v[2 * j] = f.x;
			v[2 * j + 1] = f.y;
		}
	}
};

struct at_kv_q8 { /* q8_0 blocks (cuda_ctx.kv_q8, cuda_kvq.cuh) */
	using elem = unsigned char;
	using raw = struct kvq_raw;
	static __device__ __forceinline__ int row(int hd)
	{
		return (int)kvq_row_bytes(hd);
	}
	static __device__ __forceinline__ raw fetch(const elem *r, int p)
	{
		return kvq_fetch8(r, p);
	}
	static __device__ __forceinline__ void unpack(const raw &x, float *v)
	{
		kvq_unpack8(x, v);
	}
};

/*
 * One chunk of the split decode attention over the cache KV (at_kv_f16,
 * or at_kv_q8: each 8-dim piece of a key or value row read as its block's
 * scale and 8 int8, a row head_dim / 32 * 34 bytes, 0.53 of fp16's, so a
 * long cache streams half the bytes; a q8_0 piece takes five 2-byte
 * loads, which is why it decodes slower for now: BENCHMARKS.md). The same
 * blocks, roles, online softmax, scratch and merge for both; all
 * arithmetic fp32.
 */
template <int HD, class KV, int GR = AT_SPLIT_G>
__global__ void at_split_kernel(const float *q, const typename KV::elem *kc,
                                const typename KV::elem *vc, int32_t n_head,
                                int32_t n_kv, int32_t hd_arg, int32_t n_ctx,
                                int32_t il, int32_t pos0, const int32_t *dpos,
                                int32_t nch, int32_t sub, float scale,
                                int32_t window, float *part, float *ml)
{
	using raw = typename KV::raw;

	if (dpos != NULL) /* before the wait: cuda_launch.cuh */
		pos0 = *dpos;
	extern __shared__ float at_sm[];
	const int group = n_head / n_kv,
	          nhb = (group + AT_SPLIT_G - 1) / AT_SPLIT_G;
	const int32_t c = blockIdx.x, t = blockIdx.z;
	const int kvh = blockIdx.y / nhb, g0 = (blockIdx.y % nhb) * AT_SPLIT_G;
	const int ng = group - g0 < AT_SPLIT_G ? group - g0 : AT_SPLIT_G;
	/* a head size known at compile time unrolls the loops over it, so
	   each thread has all its loads in flight at once instead of one
	   L2 round trip per iteration (64, 128 and Gemma's 256: 209
	   registers, no spills; Gemma 4's 512: 255 and 104 bytes spilled;
	   0: any other) */
	const int hd = HD > 0 ? HD : hd_arg;
	const int rs = KV::row(hd); /* elements of a row */
	const int32_t len = pos0 + t + 1, c0 = c * AT_SPLIT_CH * sub;
	const int tid = threadIdx.x, dgn = hd / 8, ns = AT_SPLIT_T / dgn;
	const int warp = tid >> 5, lane = tid & 31;
	const int dg = tid % dgn, sl = tid / dgn; /* values' thread roles */
	/* shared memory (at_split_smem), G = AT_SPLIT_G: queries [G][hd],
	   scores then p [G][AT_SPLIT_CH], m, l, alpha [G][3], the value
	   slices' partial sums [ns][G][hd] */
	float *qs = at_sm;
	float *ss = qs + AT_SPLIT_G * hd;
	float *mla = ss + AT_SPLIT_G * AT_SPLIT_CH;
	float *red = mla + AT_SPLIT_G * 3;

	const size_t head0 = ((size_t)il * n_kv + (size_t)kvh) * (size_t)n_ctx;
	/* the keys and values of the sub-chunk at P into L2, if it is the
	   block's and below LEN: rows of consecutive positions are one run
	   of bytes in the cache, a 128-byte line a thread */
	const auto prefetch = [&](int32_t p) {
		if (AT_SPLIT_PF > 0 && p < c0 + AT_SPLIT_CH * sub && p < len) {
			const int np =
			    len - p < AT_SPLIT_CH ? len - p : AT_SPLIT_CH;
			const size_t bytes =
			    (size_t)np * rs * sizeof(typename KV::elem);
			const char *kb =
			    (const char *)(kc + (head0 + (size_t)p) * rs);
			const char *vb =
			    (const char *)(vc + (head0 + (size_t)p) * rs);

			for (size_t o = (size_t)tid * 128; o < bytes;
			     o += AT_SPLIT_T * 128) {
				asm volatile(
				    "prefetch.global.L2 [%0];" ::"l"(kb + o));
				asm volatile(
				    "prefetch.global.L2 [%0];" ::"l"(vb + o));
			}
		}
	};
	/* the block's first sub-chunks head for L2 while the previous kernel
	   finishes: a prefetch into L2, where every SM's writes meet, reads
	   nothing stale (cuda_launch.cuh), not even the row of the position
	   that the QKV launch is storing */
	/* a sliding window: positions lo..len - 1; a chunk wholly before it
	   reads nothing */
	const int32_t lo = window > 0 && len > window ? len - window : 0;
	const bool before = c0 + AT_SPLIT_CH * sub <= lo;
	/* the block's first sub-chunk with a position of the window: those
	   wholly before it would only be masked (their p 0, nothing to
	   rescale yet: m, l and the sums stay as they start), and a cache
	   that keeps a window's rows only (backend_cuda.cu's ring) holds
	   none of their rows */
	const int32_t cs0 =
	    lo > c0 ? c0 + (lo - c0) / AT_SPLIT_CH * AT_SPLIT_CH : c0;

	for (int k = 0; k < AT_SPLIT_PF && !before; k++)
		prefetch(cs0 + k * AT_SPLIT_CH);
	cu_pdl_sync();
	if (c0 >= len)
		return;
	const int h0 = kvh * group + g0; /* first query head of the block */
	if (before) { /* the merge weighs it exp(-inf - M) = 0 */
		if (tid < ng) {
			float *o =
			    ml +
			    (((size_t)t * n_head + h0 + tid) * nch + c) * 2;

			o[0] = -INFINITY;
			o[1] = 0.0f;
		}
		for (int i = tid; i < ng * hd; i += AT_SPLIT_T)
			part[(((size_t)t * n_head + h0 + i / hd) * nch + c) *
			         hd +
			     i % hd] = 0.0f;
		return;
	}
	float acc[GR][8];

#pragma unroll
	for (int g = 0; g < GR; g++)
#pragma unroll
		for (int j = 0; j < 8; j++)
			acc[g][j] = 0.0f;
	/* With the head size known (HD > 0), a sub-chunk's keys are loaded
	   into registers during the previous sub-chunk's softmax and values,
	   and its values before its own softmax: the three phases no longer
	   wait for memory between their barriers. Only where the loads are
	   issued moves; every product and sum is the same, in the same
	   order. KR: a thread's HD / 32 pieces of its key row (scores);
	   VR: its HD / 32 value rows (positions sl, sl + ns, ..). */
	constexpr int NR = HD > 0 ? HD / 32 : 1;
	raw kr[NR], vr[NR];
	const auto load_k = [&](int32_t p, raw *dst) {
		if constexpr (HD > 0) {
			const int pp = tid >> 2, qd = tid & 3;
			const int n =
			    len - p < AT_SPLIT_CH ? len - p : AT_SPLIT_CH;

			if (p < c0 + AT_SPLIT_CH * sub && p < len && pp < n) {
				const typename KV::elem *kp =
				    kc + (head0 + (size_t)p + (size_t)pp) * rs;
#pragma unroll
				for (int k = 0; k < NR; k++)
					dst[k] = KV::fetch(kp, qd + 4 * k);
			}
		}
	};
	/* VR: the value rows of the sub-chunk at P */
	const auto load_v = [&](int32_t p, raw *dst) {
		if constexpr (HD > 0) {
			const int n =
			    len - p < AT_SPLIT_CH ? len - p : AT_SPLIT_CH;

			if (sl < ns)
#pragma unroll
				for (int k = 0; k < NR; k++) {
					const int pp = sl + k * ns;

					if (pp < n)
						dst[k] = KV::fetch(
						    vc + (head0 + (size_t)p +
						          (size_t)pp) *
						             rs,
						    dg);
				}
		}
	};
	/* the first sub-chunk's keys and values are loaded with the queries
	   (one round trip for all, not one after the other) */
	load_k(cs0, kr);
	load_v(cs0, vr);
#pragma unroll 4
	for (int i = tid; i < ng * hd; i += AT_SPLIT_T)
		qs[i] = q[((size_t)t * n_head + h0) * hd + i];
	if (tid < AT_SPLIT_G) {
		mla[tid * 3] = -INFINITY;
		mla[tid * 3 + 1] = 0.0f;
	}
	__syncthreads();
	for (int32_t p0 = cs0; p0 < c0 + AT_SPLIT_CH * sub && p0 < len;
	     p0 += AT_SPLIT_CH) {
		const int np = len - p0 < AT_SPLIT_CH ? len - p0 : AT_SPLIT_CH;

		prefetch(p0 + AT_SPLIT_PF * AT_SPLIT_CH);
		const typename KV::elem *kh = kc + (head0 + (size_t)p0) * rs;
		const typename KV::elem *vh = vc + (head0 + (size_t)p0) * rs;
		raw kn[NR];

		if constexpr (HD > 0) {
			/* this sub-chunk's values, the next one's keys */
			if (p0 != cs0) /* (the first are loaded) */
				load_v(p0, vr);
			load_k(p0 + AT_SPLIT_CH, kn);
		}

		/* scores: position pp = tid / 4, pieces qd, qd + 4, .. */
		{
			const int pp = tid >> 2, qd = tid & 3;
			float s[GR];
#pragma unroll
			for (int g = 0; g < GR; g++)
				s[g] = 0.0f;
			if (pp < np) {
				const typename KV::elem *kp =
				    kh + (size_t)pp * rs;

#pragma unroll
				for (int k = 0;
				     k < (HD > 0 ? HD / 32 : (dgn + 3) / 4);
				     k++) {
					const int d8 = qd + 4 * k;

					if (HD == 0 && d8 >= dgn)
						break;
					float kv[8];

					KV::unpack(HD > 0 ? kr[k < NR ? k : 0]
					                  : KV::fetch(kp, d8),
					           kv);
#pragma unroll
					for (int g = 0; g < GR; g++) {
						if (g < ng) {
							const float *qg =
							    qs + g * hd +
							    d8 * 8;
#pragma unroll
							for (int j = 0; j < 8;
							     j++)
								s[g] += qg[j] *
								        kv[j];
						}
					}
				}
			}
			/* a position's four parts: lanes 4k .. 4k + 3 */
#pragma unroll
			for (int g = 0; g < GR; g++)
				s[g] = red_quad<red_add>(s[g]);
			if (qd == 0)
#pragma unroll
				for (int g = 0; g < GR; g++)
					ss[g * AT_SPLIT_CH + pp] =
					    pp < np && p0 + pp >= lo
					        ? s[g] * scale
					        : -INFINITY;
		}
		__syncthreads();

		/* softmax: warp w takes heads w, w + 4, ..; lane = position
		 * (without a window position 0 of a sub-chunk is valid and
		 * the maximum finite; a sub-chunk before the window is all
		 * -inf: its p are 0, and alpha, with nothing to rescale, 0) */
		for (int g = warp; g < ng; g += AT_SPLIT_T / 32) {
			float *sg = ss + g * AT_SPLIT_CH;
			const float m_old = mla[g * 3];
			float m = red_warp<red_max>(sg[lane]), l;

			m = fmaxf(m, m_old);
			const float p = lane < np && sg[lane] != -INFINITY
			                    ? expf(sg[lane] - m)
			                    : 0.0f;

			sg[lane] = p;
			l = red_warp<red_add>(p);
			if (lane == 0) {
				/* exp(-inf) = 0: nothing to rescale yet */
				const float alpha =
				    m == -INFINITY ? 0.0f : expf(m_old - m);

				mla[g * 3] = m;
				mla[g * 3 + 1] = mla[g * 3 + 1] * alpha + l;
				mla[g * 3 + 2] = alpha;
			}
		}
		__syncthreads();

		/* values: positions sl, sl + ns, .. of the sub-chunk */
		if (sl < ns) {
#pragma unroll
			for (int g = 0; g < GR; g++) {
				const float a = g < ng ? mla[g * 3 + 2] : 0.0f;
#pragma unroll
				for (int j = 0; j < 8; j++)
					acc[g][j] *= a;
			}
			/* value row P's piece X (its 8 dims dg * 8 ..) into
			   the sums */
			const auto add_row = [&](int p, const raw &x) {
				float v[8];

				KV::unpack(x, v);
#pragma unroll
				for (int g = 0; g < GR; g++) {
					if (g < ng) {
						const float pg =
						    ss[g * AT_SPLIT_CH + p];
#pragma unroll
						for (int j = 0; j < 8; j++)
							acc[g][j] += pg * v[j];
					}
				}
			};
			if constexpr (HD > 0) {
#pragma unroll
				for (int k = 0; k < NR; k++)
					if (sl + k * ns < np)
						add_row(sl + k * ns, vr[k]);
			} else {
#pragma unroll 4
				for (int p = sl; p < np; p += ns)
					add_row(
					    p,
					    KV::fetch(vh + (size_t)p * rs, dg));
			}
		}
		__syncthreads(); /* ss and mla are rewritten next */
		if constexpr (HD > 0)
#pragma unroll
			for (int k = 0; k < NR; k++)
				kr[k] = kn[k];
	}
	if (sl < ns)
#pragma unroll
		for (int g = 0; g < GR; g++)
			if (g < ng)
#pragma unroll
				for (int j = 0; j < 8; j++)
					red[((size_t)sl * AT_SPLIT_G + g) * hd +
					    dg * 8 + j] = acc[g][j];
	if (tid < ng) {
		float *o = ml + (((size_t)t * n_head + h0 + tid) * nch + c) * 2;

		o[0] = mla[tid * 3];
		o[1] = mla[tid * 3 + 1];
	}
	__syncthreads();
	for (int i = tid; i < ng * hd; i += AT_SPLIT_T) {
		const int g = i / hd, d = i % hd;
		float sum = 0.0f;

		for (int k = 0; k < ns; k++)
			sum += red[((size_t)k * AT_SPLIT_G + g) * hd + d];
		part[(((size_t)t * n_head + h0 + g) * nch + c) * hd + d] = sum;
	}
}

/* Positions [p_lo, n_pos) of layer IL's q8_0 K and V (KC, VC: [n_kv][n_ctx]
 * rows) dequantized to fp16 into K16, V16 ([n_kv][n_ctx][hd], addressed
 * as the cache is), a thread per 8-value piece: the batch kernels' input
 * (cuda_op_attention). Each value d * q rounded to the nearest half
 * (2^-11 relative, beside q8_0's 1/254 of the block's largest). */
__global__ void at_kvq_dequant(const unsigned char *kc, const unsigned char *vc,
                               int32_t n_kv, int32_t hd, int32_t n_ctx,
                               int32_t il, int32_t p_lo, int32_t n_pos,
                               __half *k16, __half *v16)
{
	cu_pdl_sync(); /* first: cuda_launch.cuh */
	const int32_t np = n_pos - p_lo;
	const int64_t per = (int64_t)n_kv * np * (hd / 8);
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= 2 * per)
		return;
	const bool is_v = i >= per;
	i -= is_v ? per : 0;
	const int d8 = (int)(i % (hd / 8));
	const int64_t r = i / (hd / 8), h = r / np, p = p_lo + r % np;
	const size_t row = (size_t)h * n_ctx + (size_t)p;
	float v[8];
	__half2 o[4];

	kvq_load8((is_v ? vc : kc) +
	              ((size_t)il * n_kv * n_ctx + row) * kvq_row_bytes(hd),
	          d8, v);
#pragma unroll
	for (int j = 0; j < 4; j++)
		o[j] = __floats2half2_rn(v[2 * j], v[2 * j + 1]);
	*(uint4 *)((is_v ? v16 : k16) + row * hd + d8 * 8) = *(uint4 *)o;
}

/* OUT[t][h] = sum_c exp(m_c - M) acc_c / sum_c exp(m_c - M) l_c over the
 * chunks c (CHUNK positions each) of token t's causal length; block =
 * (head, slice of hd / DS dimensions, token) of AT_MERGE_T threads
 * (at_merge_slices). The sums are taken chunk after chunk, in chunk
 * order, with the same FMAs as the first merge (a thread per dimension
 * walking the chunks), so the floats are that kernel's (a merge that
 * added the chunks in slices changed the real SmolLM2's greedy decode:
 * tests/t_cuda_smollm). What is parallel is the loading: that first
 * kernel's loads were a chain of dependent L2 round trips. Here the
 * maximum M is a block-wide reduction (exact in any order), the weights
 * exp(m_c - M) and the l_c are put in shared memory by all threads at
 * once (up to AT_MERGE_W chunks; beyond, each is read where it is used,
 * as before), and the partial
 * sums of the block's dimensions as many chunks at a time as AT_MERGE_S
 * floats hold, the first stage loaded with the maxima, so a thread's
 * sequence of additions reads shared memory, not L2 (with a slice of 32
 * dimensions, 128 chunks a stage: the 7B after 16,384 positions merges
 * its 74 chunks in one stage, where whole heads took five). Each block
 * recomputes the maximum and the l of its head (a few loads): the slices
 * spread a head's loads over more multiprocessors. */
#define AT_MERGE_T 256        /* threads of at_merge_kernel */
#define AT_MERGE_W 2048       /* chunks whose weights stay in shared memory */
#define AT_MERGE_S (16 * 256) /* staged partial sums (floats) */
static_assert(AT_MERGE_T % 32 == 0 && AT_MERGE_S % AT_MERGE_T == 0,
              "at_merge_kernel: a thread per dimension of a slice");

/* Slices of at_merge_kernel for head size HD over NCH chunks: whole heads
 * when one stage holds every chunk (more blocks would only repeat the
 * maxima), else 32 dimensions each (a warp's outputs, one block of the
 * int8 quantization) where HD allows, so that more multiprocessors load a
 * long merge's partial sums. A head wider than the block's threads (512:
 * Gemma 4's global layers) is always sliced: 32 dimensions each, or the
 * fewest slices of a divisor of HD that fit the threads. */
static int32_t at_merge_slices(int32_t hd, int32_t nch)
{
	if (hd > AT_MERGE_T) {
		int32_t ds = hd % 32 == 0 ? hd / 32 : 2;

		while (hd % ds != 0 || hd / ds > AT_MERGE_T)
			ds++;
		return ds;
	}
	return (int64_t)nch * hd <= AT_MERGE_S || hd % 32 != 0 ? 1 : hd / 32;
}

/* Offset in a head's partial sums of element I of a stage of slices of
 * HDP of HD dimensions (a stage is [chunk][slice dim]). */
static __device__ __forceinline__ size_t at_merge_at(int i, int hdp, int hd)
{
	return hdp == hd ? (size_t)i : (size_t)(i / hdp) * hd + i % hdp;
}

__global__ void __launch_bounds__(AT_MERGE_T)
    at_merge_kernel(const float *part, const float *ml, int32_t n_head,
                    int32_t hd, int32_t ds, int32_t pos0, const int32_t *dpos,
                    int32_t nch, int32_t chunk, const float *sinks, float *out,
                    uint8_t *xq)
{
	__shared__ float w[AT_MERGE_W];  /* exp(m_c - M) */
	__shared__ float lc[AT_MERGE_W]; /* l_c */
	__shared__ float ps[AT_MERGE_S]; /* [j][d]: the slice's partial sums */
	__shared__ float red[AT_MERGE_T / 32];
	__shared__ float l_sh;
	if (dpos != NULL) /* before the wait: cuda_launch.cuh */
		pos0 = *dpos;
	cu_pdl_sync();
	const int h = blockIdx.x / ds, t = blockIdx.y, tid = threadIdx.x;
	const int hdp = hd / ds, d0 = (blockIdx.x % ds) * hdp;
	const int lane = tid & 31;
	const int mc = AT_MERGE_S / hdp; /* chunks a stage */
	const int32_t len = pos0 + t + 1;
	const int nc = (len + chunk - 1) / chunk;
	const size_t th = (size_t)t * n_head + h;
	const float *mlh = ml + th * nch * 2;
	const float *ph = part + th * nch * hd + d0;
	const bool keep = nc <= AT_MERGE_W;
	/* the first stage's partial sums, loaded with the maxima (one round
	   trip for both), staged in ps below */
	constexpr int npre = AT_MERGE_S / AT_MERGE_T;
	const int nj0 = nc < mc ? nc : mc;
	float pre[npre];
	float mx = -INFINITY;

#pragma unroll
	for (int k = 0; k < npre; k++) {
		const int i = tid + k * AT_MERGE_T;

		pre[k] = i < nj0 * hdp ? ph[at_merge_at(i, hdp, hd)] : 0.0f;
	}
	for (int c = tid; c < nc; c += AT_MERGE_T)
		mx = fmaxf(mx, mlh[2 * c]);
	mx = red_block_max_xor<AT_MERGE_T>(mx, red);
	if (keep)
		for (int c = tid; c < nc; c += AT_MERGE_T) {
			w[c] = expf(mlh[2 * c] - mx);
			lc[c] = mlh[2 * c + 1];
		}
#pragma unroll
	for (int k = 0; k < npre; k++) {
		const int i = tid + k * AT_MERGE_T;

		if (i < nj0 * hdp)
			ps[i] = pre[k];
	}
	__syncthreads();
	/* l in chunk order, by a thread of a warp that sums no dimension
	   where there is one (in warp 0 it delayed that warp's sums by its
	   own chain) */
	if (tid == (hdp <= AT_MERGE_T - 32 ? AT_MERGE_T - 32 : 0)) {
		float l = 0.0f;

		for (int c = 0; c < nc; c++) /* (the first kernel's FMAs) */
			l = keep ? __fmaf_rn(lc[c], w[c], l)
			         : __fmaf_rn(mlh[2 * c + 1],
			                     expf(mlh[2 * c] - mx), l);
		if (sinks != NULL) /* the head's sink joins the sum */
			l += expf(sinks[h] - mx);
		l_sh = l;
	}
	float acc = 0.0f;

	for (int c0 = 0; c0 < nc; c0 += mc) {
		const int nj = nc - c0 < mc ? nc - c0 : mc;

		if (c0 > 0) { /* (the first are staged) */
			for (int i = tid; i < nj * hdp; i += AT_MERGE_T)
				ps[i] = ph[(size_t)c0 * hd +
				           at_merge_at(i, hdp, hd)];
			__syncthreads();
		}
		if (tid < hdp)
			for (int j = 0; j < nj; j++)
				acc = __fmaf_rn(
				    ps[j * hdp + tid],
				    keep ? w[c0 + j]
				         : expf(mlh[2 * (c0 + j)] - mx),
				    acc);
		__syncthreads(); /* ps is rewritten next; l_sh is written */
	}
	if (tid < hdp) { /* whole warps: hd % 32 == 0 where XQ is given */
		const float inv = 1.0f / l_sh;

		out[th * hd + d0 + tid] = acc * inv;
		if (xq != NULL) {
			/* the warp's 32 outputs are one block of the token's
			   vector */
			const int64_t ne0 = (int64_t)n_head * hd;
			const int64_t i = (int64_t)h * hd + d0 + tid;
			uint8_t *tb = xq + (size_t)t * cv8_xq_stride(ne0);
			float *dd = (float *)(tb + ne0);

			cv8_quantize32(acc * inv, lane, (int8_t *)tb + i,
			               dd + i / 32, dd + ne0 / 32 + i / 32);
		}
	}
}

/* at_merge_kernel of N_TOK tokens' NCH chunks of CHUNK positions (PART, ML)
 * into D_OUT, and their int8 activations into XQ when not NULL: one
 * launch, its slices chosen by at_merge_slices. */
static void at_merge_launch(struct cuda_ctx *ctx, const float *part,
                            const float *ml, int32_t n_tok, int32_t n_head,
                            int32_t hd, int32_t pos0, const int32_t *dpos,
                            int32_t nch, int32_t chunk, const float *sinks,
                            float *d_out, uint8_t *xq)
{
	const int32_t ds = at_merge_slices(hd, nch);

	cu_launch(ctx, at_merge_kernel,
	          dim3((unsigned)(n_head * ds), (unsigned)n_tok), AT_MERGE_T, 0,
	          part, ml, n_head, hd, ds, pos0, dpos, nch, chunk, sinks,
	          d_out, xq);
}

/* The split path's scratch in ctx, grown (never shrunk) to N floats.
 * cudaFree of the old buffer waits for the device, so no kernel still
 * reads it; growth is rare (a longer context than ever before). */
static int at_scratch(struct cuda_ctx *ctx, size_t n, char *err, size_t errlen)
{
	if (n <= ctx->attn_cap)
		return 0;
	n += n / 2;
	cudaFree(ctx->d_attn);
	ctx->d_attn = NULL;
	ctx->attn_cap = 0;
	CUDA_TRY(cudaMalloc(&ctx->d_attn, n * sizeof(float)), err, errlen);
	ctx->attn_cap = n;
	return 0;
}

/* The generic split kernel's shared memory past 48 KiB (a head of 512:
 * 49 KiB): allowed up to the most any head takes, once per process
 * (the same value each time, so a race between threads is harmless),
 * before the first launch and before a capture (at
 * cuda_op_attention_graph_reserve). */
static int at_split_optin(size_t smem, char *err, size_t errlen)
{
	static bool opted;

	if (opted)
		return 0;
	if (smem > at_split_smem(CUDA_ATTN_MAX_HEAD_DIM)) {
		snprintf(err, errlen, "attention: %zu bytes of shared memory",
		         smem);
		return -1;
	}
	CUDA_TRY(
	    cudaFuncSetAttribute(at_split_kernel<0, at_kv_f16>,
	                         cudaFuncAttributeMaxDynamicSharedMemorySize,
	                         (int)at_split_smem(CUDA_ATTN_MAX_HEAD_DIM)),
	    err, errlen);
	CUDA_TRY(
	    cudaFuncSetAttribute(at_split_kernel<0, at_kv_q8>,
	                         cudaFuncAttributeMaxDynamicSharedMemorySize,
	                         (int)at_split_smem(CUDA_ATTN_MAX_HEAD_DIM)),
	    err, errlen);
	CUDA_TRY(
	    cudaFuncSetAttribute(at_split_kernel<512, at_kv_f16>,
	                         cudaFuncAttributeMaxDynamicSharedMemorySize,
	                         (int)at_split_smem(CUDA_ATTN_MAX_HEAD_DIM)),
	    err, errlen);
	opted = true;
	return 0;
}

/* The split path: at_split_kernel then at_merge_kernel. */
static int at_split_launch(struct cuda_ctx *ctx, const float *d_q,
                           const __half *kc, const __half *vc, int32_t n_tok,
                           int32_t n_head, int32_t n_kv, int32_t hd,
                           int32_t n_ctx, int32_t il, int32_t pos0, float scale,
                           int32_t window, const float *sinks, float *d_out,
                           const void **d_xq, char *err, size_t errlen)
{
	/* the merge quantizes its output for the wo mat-vec when it can
	   (cuda_op_rmsnorm_x8's conditions; a warp's 32 outputs one block) */
	const int x8 = d_xq != NULL && hd % 32 == 0 &&
	               cuda_x8_room(ctx, (int64_t)n_head * hd, n_tok);

	const int group = n_head / n_kv,
	          nhb = (group + AT_SPLIT_G - 1) / AT_SPLIT_G;
	/* a captured step covers positions up to pos_cap; chunks past a
	   token's length exit at once */
	const bool captured = ctx->d_pos != NULL;
	const struct at_split_shape sh =
	    at_split_shape_of(ctx, n_tok, n_head, n_kv, hd,
	                      captured ? ctx->pos_cap : pos0 + n_tok);
	const int32_t sub = sh.sub, nch = sh.nch;
	const size_t nf = sh.nf, smem = at_split_smem(hd);

	if (captured && nf > ctx->attn_graph_cap) {
		snprintf(err, errlen,
		         "attention: the decode graphs' scratch holds %zu "
		         "floats, %zu needed (cuda_op_attention_graph_reserve)",
		         ctx->attn_graph_cap, nf);
		return -1;
	}
	if (!captured && at_scratch(ctx, nf, err, errlen))
		return -1;
	float *part = (float *)(captured ? ctx->d_attn_graph : ctx->d_attn);
	float *ml = part + (size_t)n_tok * n_head * nch * hd;
	dim3 grid((unsigned)nch, (unsigned)(n_kv * nhb), (unsigned)n_tok);

	if (smem > 48 * 1024 && at_split_optin(smem, err, errlen))
		return -1;
	if (ctx->kv_q8) { /* (the same shape: the same scratch and merge) */
		const unsigned char *k8 = (const unsigned char *)kc;
		const unsigned char *v8 = (const unsigned char *)vc;

		if (hd == 64)
			cu_launch(ctx, at_split_kernel<64, at_kv_q8>, grid,
			          AT_SPLIT_T, smem, d_q, k8, v8, n_head, n_kv,
			          hd, n_ctx, il, pos0, ctx->d_pos, nch, sub,
			          scale, window, part, ml);
		else if (hd == 128)
			cu_launch(ctx, at_split_kernel<128, at_kv_q8>, grid,
			          AT_SPLIT_T, smem, d_q, k8, v8, n_head, n_kv,
			          hd, n_ctx, il, pos0, ctx->d_pos, nch, sub,
			          scale, window, part, ml);
		else
			cu_launch(ctx, at_split_kernel<0, at_kv_q8>, grid,
			          AT_SPLIT_T, smem, d_q, k8, v8, n_head, n_kv,
			          hd, n_ctx, il, pos0, ctx->d_pos, nch, sub,
			          scale, window, part, ml);
	} else if (at_split_gr4(ctx, group, hd)) {
		/* groups of up to 4 query heads a KV head (Qwen3, Llama 3,
		   Gemma 3 1B): the block's registers hold 4 heads' sums, not
		   AT_SPLIT_G's, so that more blocks fit a multiprocessor */
		if (hd == 64)
			cu_launch(ctx, at_split_kernel<64, at_kv_f16, 4>, grid,
			          AT_SPLIT_T, smem, d_q, kc, vc, n_head, n_kv,
			          hd, n_ctx, il, pos0, ctx->d_pos, nch, sub,
			          scale, window, part, ml);
		else if (hd == 128)
			cu_launch(ctx, at_split_kernel<128, at_kv_f16, 4>, grid,
			          AT_SPLIT_T, smem, d_q, kc, vc, n_head, n_kv,
			          hd, n_ctx, il, pos0, ctx->d_pos, nch, sub,
			          scale, window, part, ml);
		else
			cu_launch(ctx, at_split_kernel<256, at_kv_f16, 4>, grid,
			          AT_SPLIT_T, smem, d_q, kc, vc, n_head, n_kv,
			          hd, n_ctx, il, pos0, ctx->d_pos, nch, sub,
			          scale, window, part, ml);
	} else if (hd == 64)
		cu_launch(ctx, at_split_kernel<64, at_kv_f16>, grid, AT_SPLIT_T,
		          smem, d_q, kc, vc, n_head, n_kv, hd, n_ctx, il, pos0,
		          ctx->d_pos, nch, sub, scale, window, part, ml);
	else if (hd == 128)
		cu_launch(ctx, at_split_kernel<128, at_kv_f16>, grid,
		          AT_SPLIT_T, smem, d_q, kc, vc, n_head, n_kv, hd,
		          n_ctx, il, pos0, ctx->d_pos, nch, sub, scale, window,
		          part, ml);
	else if (hd == 256)
		cu_launch(ctx, at_split_kernel<256, at_kv_f16>, grid,
		          AT_SPLIT_T, smem, d_q, kc, vc, n_head, n_kv, hd,
		          n_ctx, il, pos0, ctx->d_pos, nch, sub, scale, window,
		          part, ml);
	else if (hd == 512)
		cu_launch(ctx, at_split_kernel<512, at_kv_f16>, grid,
		          AT_SPLIT_T, smem, d_q, kc, vc, n_head, n_kv, hd,
		          n_ctx, il, pos0, ctx->d_pos, nch, sub, scale, window,
		          part, ml);
	else
		cu_launch(ctx, at_split_kernel<0, at_kv_f16>, grid, AT_SPLIT_T,
		          smem, d_q, kc, vc, n_head, n_kv, hd, n_ctx, il, pos0,
		          ctx->d_pos, nch, sub, scale, window, part, ml);
	CUDA_TRY_LAUNCH(err, errlen);
	at_merge_launch(ctx, part, ml, n_tok, n_head, hd, pos0, ctx->d_pos, nch,
	                AT_SPLIT_CH * sub, sinks, d_out,
	                x8 ? (uint8_t *)ctx->d_xq : nullptr);
	CUDA_TRY_LAUNCH(err, errlen);
	if (x8)
		*d_xq = ctx->d_xq;
	return 0;
}

/* The key split of the batched kernels: BLOCKS blocks (query tiles x
 * heads) over N_KEYS keys in tiles of KT. Fewer than FILL blocks
 * (at_fill): *NCH chunks of *CHUNK keys (a whole number of tiles) so that
 * about FILL blocks run; otherwise *CHUNK = 0, *NCH = 1 (no split, no
 * merge). */
static void at_tile_split(int32_t blocks, int32_t n_keys, int32_t fill,
                          int32_t kt, int32_t *chunk, int32_t *nch)
{
	const int32_t want = (fill + blocks - 1) / blocks;
	int32_t c = (n_keys + want - 1) / want;

	*chunk = 0;
	*nch = 1;
	if (blocks >= fill || n_keys <= kt)
		return;
	c = (c + kt - 1) / kt * kt;
	*chunk = c;
	*nch = (n_keys + c - 1) / c;
}

/* at_mma_kernel<HD> over the rows of N_TOK queries (cuda_op_attention's
 * arguments), its keys split into chunks and merged where its blocks
 * alone would leave the GPU idle (a follow-up turn over a long cache). */
template <int HD>
static int at_mma_run(struct cuda_ctx *ctx, const float *d_q, const __half *kc,
                      const __half *vc, int32_t n_tok, int32_t n_head,
                      int32_t n_kv, int32_t n_ctx, int32_t il, int32_t pos0,
                      const struct cuda_attn_params *par, float *d_out,
                      char *err, size_t errlen)
{
	const int64_t rows = (int64_t)n_tok * (n_head / n_kv);
	const int32_t tiles =
	    (int32_t)((rows + am_smem<HD>::ROWS - 1) / am_smem<HD>::ROWS);
	int32_t chunk = 0, nch = 1;
	float *part = NULL, *ml = NULL;
	/* past 48 KiB of shared memory: allowed once per process (the same
	   value each time, so a race between threads is harmless) */
	static bool opted;

	if (!opted)
		CUDA_TRY(cudaFuncSetAttribute(
		             at_mma_kernel<HD>,
		             cudaFuncAttributeMaxDynamicSharedMemorySize,
		             (int)am_smem<HD>::bytes),
		         err, errlen);
	opted = true;
	if (ctx->d_pos == NULL)
		at_tile_split(tiles * n_kv, pos0 + n_tok, at_fill(ctx),
		              am_smem<HD>::KT, &chunk, &nch);
	if (chunk > 0) {
		if (at_scratch(ctx, at_split_floats(n_tok, n_head, HD, nch),
		               err, errlen))
			return -1;
		part = (float *)ctx->d_attn;
		ml = part + (size_t)n_tok * n_head * nch * HD;
	}
	dim3 grid((unsigned)tiles, (unsigned)n_kv, (unsigned)nch);

	cu_launch(ctx, at_mma_kernel<HD>, grid, AM_THREADS, am_smem<HD>::bytes,
	          d_q, kc, vc, n_tok, n_head, n_kv, n_ctx, il, pos0, ctx->d_pos,
	          chunk, nch, par->scale, par->window, par->d_sinks, part, ml,
	          d_out);
	CUDA_TRY_LAUNCH(err, errlen);
	if (chunk > 0) {
		at_merge_launch(ctx, part, ml, n_tok, n_head, HD, pos0, nullptr,
		                nch, chunk, par->d_sinks, d_out, nullptr);
		CUDA_TRY_LAUNCH(err, errlen);
	}
	return 0;
}

static int at_mma_launch(struct cuda_ctx *ctx, const float *d_q,
                         const __half *kc, const __half *vc, int32_t n_tok,
                         int32_t n_head, int32_t n_kv, int32_t hd,
                         int32_t n_ctx, int32_t il, int32_t pos0,
                         const struct cuda_attn_params *par, float *d_out,
                         char *err, size_t errlen)
{
	switch (hd) {
	case 64:
		return at_mma_run<64>(ctx, d_q, kc, vc, n_tok, n_head, n_kv,
		                      n_ctx, il, pos0, par, d_out, err, errlen);
	case 128:
		return at_mma_run<128>(ctx, d_q, kc, vc, n_tok, n_head, n_kv,
		                       n_ctx, il, pos0, par, d_out, err,
		                       errlen);
	case 256:
		return at_mma_run<256>(ctx, d_q, kc, vc, n_tok, n_head, n_kv,
		                       n_ctx, il, pos0, par, d_out, err,
		                       errlen);
	default:
		return at_mma_run<512>(ctx, d_q, kc, vc, n_tok, n_head, n_kv,
		                       n_ctx, il, pos0, par, d_out, err,
		                       errlen);
	}
}

/* A batch over a q8_0 cache: positions [PAR->p_lo, n_pos) of layer *IL's
 * blocks at *KC, *VC dequantized into ctx->d_kv16 (at_kvq_dequant), then
 * *KC, *VC point there, addressed as the cache (position p_lo in row
 * PAR->r_lo of each head's N_CTX rows), and *IL is 0 (the scratch is one
 * layer). */
static int at_kvq_batch(struct cuda_ctx *ctx, const uint16_t **kc,
                        const uint16_t **vc, int32_t n_kv, int32_t hd,
                        int32_t n_ctx, int32_t *il, int32_t n_pos,
                        const struct cuda_attn_params *par, char *err,
                        size_t errlen)
{
	const size_t half = (size_t)n_kv * n_ctx * hd;
	const int64_t n = 2 * (int64_t)n_kv * (n_pos - par->p_lo) * (hd / 8);
	/* (the scratch's base moves as the cache's does: backend_cuda.cu's
	   ring) */
	__half *k16 = (__half *)ctx->d_kv16 +
	              ((ptrdiff_t)par->r_lo - (ptrdiff_t)par->p_lo) * hd;

	if (k16 == NULL || 2 * half > ctx->kv16_cap) {
		snprintf(err, errlen,
		         "attention: a batch over a q8_0 cache needs %zu "
		         "halves of scratch (cuda_ctx.d_kv16), %zu allocated",
		         2 * half, ctx->kv16_cap);
		return -1;
	}
	cu_launch(ctx, at_kvq_dequant, (unsigned)((n + 255) / 256), 256, 0,
	          (const unsigned char *)*kc, (const unsigned char *)*vc, n_kv,
	          hd, n_ctx, *il, par->p_lo, n_pos, k16, k16 + half);
	CUDA_TRY_LAUNCH(err, errlen);
	*kc = (const uint16_t *)k16;
	*vc = (const uint16_t *)(k16 + half);
	*il = 0;
	return 0;
}

extern "C" int
cuda_op_attention(struct cuda_ctx *ctx, const float *d_q, const uint16_t *d_kc,
                  const uint16_t *d_vc, int32_t n_tok, int32_t n_head,
                  int32_t n_kv, int32_t head_dim, int32_t n_ctx, int32_t il,
                  int32_t pos0, const struct cuda_attn_params *par,
                  float *d_out, const void **d_xq, char *err, size_t errlen)
{
	int64_t pairs = (int64_t)n_tok * n_head;
	const float scale = par->scale;

	if (d_xq != NULL)
		*d_xq = NULL;
	/* model.h's attention features these kernels do not have yet: the
	   backend's features refuse such a model at open; here, never run
	   wrong */
	if (par->softcap != 0.0f) {
		snprintf(err, errlen,
		         "attention: a score softcap is not implemented on the "
		         "GPU");
		return -1;
	}

	if (head_dim > CUDA_ATTN_MAX_HEAD_DIM || n_kv < 1 ||
	    n_head % n_kv != 0) {
		snprintf(err, errlen,
		         "attention with head_dim %d (max %d), %d heads, %d "
		         "KV heads",
		         head_dim, CUDA_ATTN_MAX_HEAD_DIM, n_head, n_kv);
		return -1;
	}
	if (ctx->kv_q8) {
		/* decode reads the blocks (at_split_kernel<HD, at_kv_q8>); a
		   batch reads the layer's positions dequantized to fp16 in
		   ctx->d_kv16, with the fp16 kernels below */
		if (head_dim % 32 != 0) {
			snprintf(err, errlen,
			         "attention: a q8_0 cache with head_dim %d "
			         "(a multiple of 32 needed)",
			         head_dim);
			return -1;
		}
		if (n_tok < CUDA_GEMM_MIN_TOKENS)
			return at_split_launch(
			    ctx, d_q, (const __half *)d_kc,
			    (const __half *)d_vc, n_tok, n_head, n_kv, head_dim,
			    n_ctx, il, pos0, scale, par->window, par->d_sinks,
			    d_out, d_xq, err, errlen);
		if (at_kvq_batch(ctx, &d_kc, &d_vc, n_kv, head_dim, n_ctx, &il,
		                 pos0 + n_tok, par, err, errlen))
			return -1;
	}
	if (n_tok < CUDA_GEMM_MIN_TOKENS && head_dim % 8 == 0 &&
	    ((uintptr_t)d_kc | (uintptr_t)d_vc) % 16 == 0)
		return at_split_launch(
		    ctx, d_q, (const __half *)d_kc, (const __half *)d_vc, n_tok,
		    n_head, n_kv, head_dim, n_ctx, il, pos0, scale, par->window,
		    par->d_sinks, d_out, d_xq, err, errlen);
	if ((head_dim == 64 || head_dim == 128 || head_dim == 256 ||
	     head_dim == 512) &&
	    ((uintptr_t)d_q | (uintptr_t)d_kc | (uintptr_t)d_vc) % 16 == 0 &&
	    !ctx->attn_tiles && !cuda_knobs()->attn_warp)
		return at_mma_launch(ctx, d_q, (const __half *)d_kc,
		                     (const __half *)d_vc, n_tok, n_head, n_kv,
		                     head_dim, n_ctx, il, pos0, par, d_out, err,
		                     errlen);
	if ((head_dim == 64 || head_dim == 128 || head_dim == 256) &&
	    ((uintptr_t)d_kc | (uintptr_t)d_vc) % 16 == 0 &&
	    !cuda_knobs()->attn_warp) { /* (the one-warp kernel, to measure) */
		const int32_t tiles = (n_tok + AT_TILE_Q - 1) / AT_TILE_Q;
		int32_t chunk = 0, nch = 1;
		float *part = NULL, *ml = NULL;

		if (ctx->d_pos == NULL)
			at_tile_split(tiles * n_head, pos0 + n_tok,
			              at_fill(ctx), AT_TILE_K, &chunk, &nch);
		if (chunk > 0) {
			if (at_scratch(
			        ctx,
			        at_split_floats(n_tok, n_head, head_dim, nch),
			        err, errlen))
				return -1;
			part = (float *)ctx->d_attn;
			ml = part + (size_t)n_tok * n_head * nch * head_dim;
		}
		dim3 grid((unsigned)tiles, (unsigned)n_head, (unsigned)nch);

		if (head_dim == 64)
			cu_launch(ctx, at_tile_kernel<64>, grid,
			          AT_TILE_THREADS, at_tile_smem<64>::bytes, d_q,
			          (const __half *)d_kc, (const __half *)d_vc,
			          n_tok, n_head, n_kv, n_ctx, il, pos0,
			          ctx->d_pos, chunk, nch, scale, par->window,
			          par->d_sinks, part, ml, d_out);
		else if (head_dim == 128)
			cu_launch(
			    ctx, at_tile_kernel<128>, grid, AT_TILE_THREADS,
			    at_tile_smem<128>::bytes, d_q, (const __half *)d_kc,
			    (const __half *)d_vc, n_tok, n_head, n_kv, n_ctx,
			    il, pos0, ctx->d_pos, chunk, nch, scale,
			    par->window, par->d_sinks, part, ml, d_out);
		else {
			/* past 48 KiB: allowed once per process (the same
			   value each time, so a race between threads is
			   harmless) */
			static bool opted;

			if (!opted)
				CUDA_TRY(
				    cudaFuncSetAttribute(
				        at_tile_kernel<256>,
				        cudaFuncAttributeMaxDynamicSharedMemorySize,
				        (int)at_tile_smem<256>::bytes),
				    err, errlen);
			opted = true;
			cu_launch(
			    ctx, at_tile_kernel<256>, grid, AT_TILE_THREADS,
			    at_tile_smem<256>::bytes, d_q, (const __half *)d_kc,
			    (const __half *)d_vc, n_tok, n_head, n_kv, n_ctx,
			    il, pos0, ctx->d_pos, chunk, nch, scale,
			    par->window, par->d_sinks, part, ml, d_out);
		}
		CUDA_TRY_LAUNCH(err, errlen);
		if (chunk > 0) {
			at_merge_launch(ctx, part, ml, n_tok, n_head, head_dim,
			                pos0, nullptr, nch, chunk, par->d_sinks,
			                d_out, nullptr);
			CUDA_TRY_LAUNCH(err, errlen);
		}
		return 0;
	}
	cu_launch(ctx, at_warp_kernel,
	          (unsigned)((pairs + AT_WARPS - 1) / AT_WARPS), 32 * AT_WARPS,
	          0, d_q, (const __half *)d_kc, (const __half *)d_vc, n_tok,
	          n_head, n_kv, head_dim, n_ctx, il, pos0, ctx->d_pos, scale,
	          par->window, par->d_sinks, d_out);
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}

extern "C" size_t cuda_op_attention_graph_floats(const struct cuda_ctx *ctx,
                                                 int32_t n_head, int32_t n_kv,
                                                 int32_t head_dim,
                                                 int32_t n_ctx, int32_t step)
{
	size_t need = 0;

	/* at_split_launch's split for one token over each graph's pos_cap */
	for (int32_t cap = step;; cap += step) {
		const int32_t n_pos = cap < n_ctx ? cap : n_ctx;
		const size_t nf =
		    at_split_shape_of(ctx, 1, n_head, n_kv, head_dim, n_pos).nf;

		need = nf > need ? nf : need;
		if (n_pos == n_ctx)
			break;
	}
	return need;
}

extern "C" int cuda_op_attention_graph_reserve(struct cuda_ctx *ctx,
                                               int32_t n_head, int32_t n_kv,
                                               int32_t head_dim, int32_t n_ctx,
                                               int32_t step, char *err,
                                               size_t errlen)
{
	const size_t need = cuda_op_attention_graph_floats(
	    ctx, n_head, n_kv, head_dim, n_ctx, step);

	/* (a capture must not change a kernel's attributes) */
	if (at_split_smem(head_dim) > 48 * 1024 &&
	    at_split_optin(at_split_smem(head_dim), err, errlen))
		return -1;
	if (need <= ctx->attn_graph_cap)
		return 0;
	if (ctx->attn_graph_cap != 0) {
		snprintf(err, errlen,
		         "attention: the decode graphs' scratch is set once");
		return -1;
	}
	CUDA_TRY(cudaMalloc(&ctx->d_attn_graph, need * sizeof(float)), err,
	         errlen);
	ctx->attn_graph_cap = need;
	return 0;
}

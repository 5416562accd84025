/*
 * cuda_select.cu - the select step on the device (cuda_select.h).
 *
 * NOTES ON THE DESIGN
 *
 * Why two passes over many blocks: one block over a whole 152k row ran at
 * one SM's pace (the largest kernel of a decode step: a double exp per
 * entry and eight radix passes over the row). The row is cut into tiles
 * of SEL_TILE entries; each tile is one block.
 *
 *   1. penalties: the window's distinct ids and counts are made on the host
 *      (a few hundred ids), uploaded, and applied to a copy of the row with
 *      the reference's formula in round-to-nearest intrinsics - nvcc would
 *      otherwise contract a * b + c into one FMA and round differently;
 *   2. pass 1, sel_tiles (grid: one block of SEL_TILE_THREADS per tile):
 *      the tile's maximum m of the finite logits, then s = sum e^(l - m)
 *      and a = sum e^(l - m) (l - m) in double, for both rows; the lowest
 *      index of a NaN and of a +inf; and the tile's own top min(k, len) of
 *      the penalised row and top min(n_raw, len) of the raw row (sel_block_
 *      select below), written in id order to the candidate arrays at
 *      tile * min(k, SEL_TILE) - contiguous, as only the last tile can be
 *      short, and so in id order over the whole row;
 *   3. pass 2, sel_final (one block of SEL_FINAL_THREADS): the tiles' sums
 *      merged at the greatest tile maximum M (s = sum_t s_t e^(m_t - M),
 *      a = sum_t e^(m_t - M) (a_t + s_t (m_t - M)), the merge of the online
 *      form) in a fixed order: thread j adds tiles j, j + 1024, ... in
 *      order, then a fixed shuffle tree and the warps in index order - the
 *      sums do not depend on timing; the min of the tiles' NaN / +inf
 *      indices; then the same block select over the union of candidates.
 *
 * Why the union holds the answer: rank entries by (key desc, id asc), a
 * total order (the reference's). An entry among the k first of the row has
 * fewer than k entries before it in the row, so fewer than k before it in
 * its tile: it is among its tile's min(k, len) first. Each tile keeps
 * exactly those (ties at its threshold go to its lowest ids), and the
 * union is in id order, so pass 2's "ties to the first in array order"
 * is "ties to the lowest id", as in the reference.
 *
 * The block select (sel_block_select): radix select over order-preserving
 * 32-bit keys, 8-bit digits from the most significant, finds the bucket of
 * the k-th greatest key and how many of it are wanted (a warp finds the
 * digit by a scan over the 256 counts; it stops early once the whole
 * bucket is wanted); then one stable compaction in array order (ballots
 * and a scan of the warps' counts) takes every entry above the bucket and
 * the first "wanted" ones in it. Histograms add with one shared atomic per
 * distinct digit per warp (__match_any_sync): logits share few exponents,
 * so plain atomics would serialise.
 *
 * Cost: the union has n_tiles * min(k, SEL_TILE) entries, small for the
 * sampler's usual k (40: 3,000 for a 152k row); at k >= SEL_TILE every tile
 * passes its whole tile on and pass 2 selects over the whole row in one
 * block - correct, but at the old one-block pace.
 *
 * Scratch (cuda_select_init): n_tiles partials, and five candidate arrays
 * of n_tiles * SEL_TILE entries (k values, k raw, k ids, n values, n ids).
 *
 * Pass 2 writes one block (a header and k + n entries) straight into
 * mapped host memory, and the host sorts the entries by (logit desc, id
 * asc), giving the reference's order. Without penalties the penalised row
 * is the raw row: both passes then select the top max(k, n) of it once,
 * and the host takes the raw top n as the first n of them (the same
 * total order).
 *
 * Invariant: with no NaN or +inf in the row, the ids and penalised logits
 * returned equal engine_select_row's bit for bit; the sums equal its sums
 * to double rounding (the same terms taken at the row's maximum, added in
 * another order).
 */
#include "cuda_check.cuh"
#include "cuda_launch.cuh"
#include "cuda_reduce.cuh"
#include "cuda_select.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEL_TILE          2048 /* entries of a pass-1 tile */
#define SEL_TILE_THREADS  256
#define SEL_FINAL_THREADS 1024
#define SEL_FULL          0xffffffffu

/* Tunable, within: whole warps, a tile an exact number of rounds of the
   block (pass 1 holds it in registers), at most 32 warps (one warp scans
   the warps' counts). Smaller tiles: more blocks, more candidates. */
static_assert(SEL_TILE % SEL_TILE_THREADS == 0 && SEL_TILE_THREADS % 32 == 0 &&
                  SEL_TILE_THREADS <= 1024 && SEL_FINAL_THREADS % 32 == 0 &&
                  SEL_FINAL_THREADS <= 1024,
              "select: tile and block shapes");

/* The result block: this header, then k ids, k penalised logits, k raw
   logits, n_raw ids, n_raw raw logits (4 bytes each). */
struct sel_head {
	double raw_m, raw_s,
	    raw_a;           /* raw row: max, sum e^(l-m), sum e^(l-m)(l-m) */
	double pen_m, pen_s; /* penalised row: max, sum */
	int32_t nan_at;      /* lowest index of a NaN, INT_MAX: none */
	int32_t inf_at;      /* lowest index of a +inf, INT_MAX: none */
	int32_t k, n_raw;    /* entries that follow */
};

/* One tile's pass-1 sums ([0] raw row, [1] penalised row) relative to its
   own maximum m (-inf: no finite logit, s = a = 0), and bad indices; the
   entropy's a of the raw row only (the penalised row's is not wanted). */
struct sel_part {
	double m[2], s[2], a;
	int32_t nan_at, inf_at; /* lowest in the tile, INT_MAX: none */
};

/* Bytes of the result block for K and N_RAW entries. */
static size_t sel_out_bytes(int32_t k, int32_t n_raw)
{
	return sizeof(struct sel_head) + (size_t)(3 * k + 2 * n_raw) * 4;
}

/* Tiles of a row of N entries. */
static int32_t sel_n_tiles(int32_t n)
{
	return (n + SEL_TILE - 1) / SEL_TILE;
}

/* Order-preserving key: a > b as floats iff key(a) > key(b); -0 = +0. */
__device__ static uint32_t sel_key(float f)
{
	uint32_t u = __float_as_uint(f);

	if ((u & 0x7fffffffu) == 0)
		u = 0;
	return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* Finite: counted in the sums (-inf adds nothing; NaN, +inf are errors). */
__device__ static bool sel_finite(float x)
{
	return x > -INFINITY && x < INFINITY;
}

/* The reference's penalty (engine_select.c), without contraction. */
__global__ static void sel_penalise(const float *row, float *pen,
                                    const int32_t *win, int32_t n_win, float rp,
                                    float fp, float pp)
{
	int32_t i = blockIdx.x * blockDim.x + threadIdx.x;

	cu_pdl_sync(); /* first: cuda_launch.cuh */
	if (i >= n_win)
		return;
	int32_t id = win[i], cnt = win[n_win + i];
	float l = row[id];

	l = l <= 0.0f ? __fmul_rn(l, rp) : __fdiv_rn(l, rp);
	l = __fsub_rn(l, __fadd_rn(__fmul_rn((float)cnt, fp), pp));
	pen[id] = l;
}

/* ------------------------------------------------------ block select */

/* Shared state of the block select for NT threads. */
template <int NT> struct sel_shared {
	uint32_t hist[256];
	uint32_t prefix, mask; /* the bucket: keys with key & mask == prefix */
	int32_t remaining;     /* entries of the bucket wanted */
	int32_t bucket;        /* entries in the bucket */
	int2 warp_n[2]
	           [NT / 32]; /* per warp: above, in the bucket (2 buffers) */
};

/*
 * Warp 0: the digit (at SHIFT) of the bucket that holds the sh->remaining-th
 * greatest key, from sh->hist; narrows sh's bucket to it.
 */
template <int NT>
__device__ static void sel_find_digit(struct sel_shared<NT> *sh, int shift)
{
	const int lane = threadIdx.x & 31;
	int32_t need = sh->remaining, h[8], c = 0, incl;

	/* lane l holds digits 255 - 8 l down to 248 - 8 l */
	for (int j = 0; j < 8; j++) {
		h[j] = (int32_t)sh->hist[255 - 8 * lane - j];
		c += h[j];
	}
	incl = c;
	red_warp_scan(incl, lane);
	__syncwarp(); /* every lane has read sh before one writes it */
	/* exactly one lane: the counts are >= 0 and sum to >= need >= 1 */
	if (incl - c < need && need <= incl) {
		int32_t cum = incl - c;

		for (int j = 0; j < 8; j++) {
			if (cum + h[j] >= need) {
				sh->prefix |= (uint32_t)(255 - 8 * lane - j)
				              << shift;
				sh->mask |= 255u << shift;
				sh->remaining = need - cum;
				sh->bucket = h[j];
				break;
			}
			cum += h[j];
		}
	}
}

/*
 * The K greatest of V[0..n) by (key desc, index asc), all NT threads of
 * the block: into OUT_ID / OUT_V (and CARRY[i] into OUT_CARRY when CARRY
 * is given) in index order, exactly min(K, N) entries. The id of V[i] is
 * IDS[i], or ID0 + i when IDS is NULL. Uniform arguments.
 */
template <int NT>
__device__ static void
sel_block_select(const float *__restrict__ v, const int32_t *__restrict__ ids,
                 int32_t id0, const float *__restrict__ carry, int32_t n,
                 int32_t k, int32_t *out_id, float *out_v, float *out_carry,
                 struct sel_shared<NT> *sh)
{
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const uint32_t lt = (1u << lane) - 1u;

	if (k > n)
		k = n;
	if (k <= 0)
		return;
	__syncthreads(); /* SH may still be read by a previous call */
	if (tid == 0) {
		sh->prefix = 0;
		sh->mask = 0;
		sh->remaining = k;
		sh->bucket = n;
	}
	__syncthreads();
	for (int shift = 24; shift >= 0; shift -= 8) {
		if (sh->remaining == sh->bucket)
			break; /* the whole bucket is wanted (uniform) */
		const uint32_t prefix = sh->prefix, mask = sh->mask;

		for (int d = tid; d < 256; d += NT)
			sh->hist[d] = 0;
		__syncthreads();
		for (int32_t c = 0; c < n; c += NT) {
			int32_t i = c + tid;
			uint32_t d = 256, key, peers;

			if (i < n) {
				key = sel_key(v[i]);
				if ((key & mask) == prefix)
					d = (key >> shift) & 255u;
			}
			if (__ballot_sync(SEL_FULL, d != 256) == 0)
				continue; /* uniform in the warp */
			peers = __match_any_sync(SEL_FULL, d);
			if (d != 256 && lane == __ffs(peers) - 1)
				atomicAdd(&sh->hist[d],
				          (uint32_t)__popc(peers));
		}
		__syncthreads();
		if (warp == 0)
			sel_find_digit<NT>(sh, shift);
		__syncthreads();
	}
	/* take every key above the bucket and its first `want` entries */
	const uint32_t T = sh->prefix, mask = sh->mask;
	const int32_t want = sh->remaining, above_all = k - want;
	int32_t base_gt = 0, base_eq = 0;

	for (int32_t c = 0, p = 0; c < n; c += NT, p ^= 1) {
		int32_t i = c + tid;
		uint32_t hi = i < n ? sel_key(v[i]) & mask : 0;
		bool gt = i < n && hi > T, eq = i < n && hi == T;
		uint32_t bg = __ballot_sync(SEL_FULL, gt);
		uint32_t be = __ballot_sync(SEL_FULL, eq);
		int32_t og, oe, tg, te;

		if (lane == 0)
			sh->warp_n[p][warp] = make_int2(__popc(bg), __popc(be));
		__syncthreads();
		/* the warps' counts: exclusive prefix at this warp, total */
		{
			int2 x = lane < NT / 32 ? sh->warp_n[p][lane]
			                        : make_int2(0, 0);
			int32_t sg = x.x, se = x.y; /* above, in the bucket */

			red_warp_scan2(sg, se, lane);
			tg = __shfl_sync(SEL_FULL, sg, 31);
			te = __shfl_sync(SEL_FULL, se, 31);
			og = __shfl_sync(SEL_FULL, sg - x.x, warp);
			oe = __shfl_sync(SEL_FULL, se - x.y, warp);
		}
		og += base_gt + __popc(bg & lt);
		oe += base_eq + __popc(be & lt);
		if (gt || (eq && oe < want)) {
			int32_t at = og + (oe < want ? oe : want);

			out_id[at] = ids ? ids[i] : id0 + i;
			out_v[at] = v[i];
			if (carry)
				out_carry[at] = carry[i];
		}
		base_gt += tg;
		base_eq += te;
		if (base_gt == above_all && base_eq >= want)
			break; /* all taken (uniform) */
	}
}

/* ------------------------------------------------------------ passes */

/* Pass 1: one tile per block (see the notes). */
__global__ static void __launch_bounds__(SEL_TILE_THREADS)
    sel_tiles(const float *raw, const float *pen, int32_t n, int32_t k,
              int32_t n_raw, struct sel_part *part, float *ck_v, int32_t *ck_id,
              float *ck_raw, float *cr_v, int32_t *cr_id)
{
	const int NT = SEL_TILE_THREADS;
	__shared__ struct sel_shared<NT> sh;
	__shared__ double red[3 * NT / 32];
	__shared__ int32_t bad[2];
	const int tid = threadIdx.x;
	const int32_t t0 = blockIdx.x * SEL_TILE;
	const int32_t len = n - t0 < SEL_TILE ? n - t0 : SEL_TILE;
	const float *r = raw + t0, *p = pen + t0;
	/* no penalties: the penalised row is the raw row, whose sums are
	   then taken once (the same terms: the same bits) */
	const bool same = pen == raw;
	double m[2] = {-INFINITY, -INFINITY}, sa[3] = {0.0, 0.0, 0.0};
	float x[SEL_TILE / NT], y[SEL_TILE / NT];

	cu_pdl_sync(); /* first: the row is the previous kernel's */
	if (tid == 0)
		bad[0] = bad[1] = INT_MAX;
		/* the tile into registers: every load issued before the first
		   use (one memory latency, not one per entry); -inf past the
		   row's end */
#pragma unroll
	for (int j = 0; j < SEL_TILE / NT; j++) {
		int32_t i = tid + j * NT;

		x[j] = i < len ? r[i] : -INFINITY;
		y[j] = same || i >= len ? -INFINITY : p[i];
	}
	__syncthreads();
#pragma unroll
	for (int j = 0; j < SEL_TILE / NT; j++) {
		if (x[j] != x[j])
			atomicMin(&bad[0], t0 + tid + j * NT);
		else if (x[j] == INFINITY)
			atomicMin(&bad[1], t0 + tid + j * NT);
		if (sel_finite(x[j]))
			m[0] = fmax(m[0], (double)x[j]);
		if (sel_finite(y[j]))
			m[1] = fmax(m[1], (double)y[j]);
	}
	red_block<NT, 2, red_max>(m, red);
	/* one exp per finite entry, at the tile's maximum */
#pragma unroll
	for (int j = 0; j < SEL_TILE / NT; j++) {
		double d, e;

		if (sel_finite(x[j])) {
			d = (double)x[j] - m[0];
			e = exp(d);
			sa[0] += e;
			sa[1] += e * d;
		}
		if (sel_finite(y[j]))
			sa[2] += exp((double)y[j] - m[1]);
	}
	red_block<NT, 3, red_add>(sa, red);
	if (same) {
		m[1] = m[0];
		sa[2] = sa[0];
	}
	if (tid == 0) {
		struct sel_part *t = part + blockIdx.x;

		t->m[0] = m[0];
		t->s[0] = sa[0];
		t->a = sa[1];
		t->m[1] = m[1];
		t->s[1] = sa[2];
		t->nan_at = bad[0];
		t->inf_at = bad[1];
	}
	{
		int32_t sk = k < SEL_TILE ? k : SEL_TILE;
		int32_t sn = n_raw < SEL_TILE ? n_raw : SEL_TILE;
		size_t ok = (size_t)blockIdx.x * sk,
		       on = (size_t)blockIdx.x * sn;

		sel_block_select<NT>(p, NULL, t0, r, len, k, ck_id + ok,
		                     ck_v + ok, ck_raw + ok, &sh);
		sel_block_select<NT>(r, NULL, t0, NULL, len, n_raw, cr_id + on,
		                     cr_v + on, NULL, &sh);
	}
}

/* Candidates that N_TILES tiles of a row of N leave for a top-K. */
__device__ static int32_t sel_n_cand(int32_t n, int32_t n_tiles, int32_t k)
{
	int32_t last = n - (n_tiles - 1) * SEL_TILE;

	return (n_tiles - 1) * (k < SEL_TILE ? k : SEL_TILE) +
	       (k < last ? k : last);
}

/* Pass 2: one block (see the notes). */
__global__ static void __launch_bounds__(SEL_FINAL_THREADS)
    sel_final(const struct sel_part *part, int32_t n_tiles, int32_t n,
              int32_t k, int32_t n_raw, const float *ck_v, const int32_t *ck_id,
              const float *ck_raw, const float *cr_v, const int32_t *cr_id,
              unsigned char *out)
{
	const int NT = SEL_FINAL_THREADS;
	__shared__ struct sel_shared<NT> sh;
	__shared__ double red[3 * NT / 32];
	__shared__ int32_t bad[2];
	const int tid = threadIdx.x;
	struct sel_head *h = (struct sel_head *)out;
	int32_t *k_id = (int32_t *)(h + 1);
	float *k_v = (float *)(k_id + k);
	float *k_raw = k_v + k;
	int32_t *r_id = (int32_t *)(k_raw + k);
	float *r_v = (float *)(r_id + n_raw);
	double m[2] = {-INFINITY, -INFINITY}, sa[3] = {0.0, 0.0, 0.0};

	cu_pdl_sync(); /* first: the tiles' sums are the previous kernel's */
	if (tid == 0)
		bad[0] = bad[1] = INT_MAX;
	__syncthreads();
	for (int32_t t = tid; t < n_tiles; t += NT) {
		m[0] = fmax(m[0], part[t].m[0]);
		m[1] = fmax(m[1], part[t].m[1]);
		atomicMin(&bad[0], part[t].nan_at);
		atomicMin(&bad[1], part[t].inf_at);
	}
	red_block<NT, 2, red_max>(m, red);
	/* the tiles rescaled to the row's maximum, in a fixed order */
	for (int32_t t = tid; t < n_tiles; t += NT) {
		const struct sel_part *q = part + t;
		double d, e;

		if (q->m[0] > -INFINITY) {
			d = q->m[0] - m[0];
			e = exp(d);
			sa[0] += e * q->s[0];
			sa[1] += e * (q->a + q->s[0] * d);
		}
		if (q->m[1] > -INFINITY)
			sa[2] += exp(q->m[1] - m[1]) * q->s[1];
	}
	red_block<NT, 3, red_add>(sa, red);
	if (tid == 0) {
		h->raw_m = m[0];
		h->raw_s = sa[0];
		h->raw_a = sa[1];
		h->pen_m = m[1];
		h->pen_s = sa[2];
		h->nan_at = bad[0];
		h->inf_at = bad[1];
		h->k = k;
		h->n_raw = n_raw;
	}
	if (bad[0] != INT_MAX || bad[1] != INT_MAX)
		return; /* garbage: the host reports it, nothing to select */
	sel_block_select<NT>(ck_v, ck_id, 0, ck_raw, sel_n_cand(n, n_tiles, k),
	                     k, k_id, k_v, k_raw, &sh);
	sel_block_select<NT>(cr_v, cr_id, 0, NULL,
	                     sel_n_cand(n, n_tiles, n_raw), n_raw, r_id, r_v,
	                     NULL, &sh);
}

/* Allocate; see cuda_select.h. */
int cuda_select_init(struct cuda_select *cs, int32_t n_vocab, char *err,
                     size_t errlen)
{
	size_t ob = sel_out_bytes(ENGINE_SELECT_MAX, ENGINE_SELECT_MAX);
	size_t nc;
	cudaError_t rc;

	memset(cs, 0, sizeof(*cs));
	cs->n_vocab = n_vocab;
	cs->n_tiles = sel_n_tiles(n_vocab);
	nc = (size_t)cs->n_tiles * SEL_TILE;
	if ((rc = cudaMalloc((void **)&cs->d_pen,
	                     (size_t)n_vocab * sizeof(float))) != cudaSuccess ||
	    (rc = cudaMalloc(&cs->d_part,
	                     (size_t)cs->n_tiles * sizeof(struct sel_part))) !=
	        cudaSuccess ||
	    (rc = cudaMalloc(&cs->d_cand, 5 * nc * 4)) != cudaSuccess ||
	    (rc = cudaHostAlloc(&cs->h_out, ob, cudaHostAllocMapped)) !=
	        cudaSuccess ||
	    (rc = cudaHostGetDevicePointer(&cs->d_out, cs->h_out, 0)) !=
	        cudaSuccess) {
		(void)cudaGetLastError();
		cuda_select_free(cs);
		snprintf(err, errlen,
		         "select step buffers (%d entries): %s (%s)", n_vocab,
		         cudaGetErrorName(rc), cudaGetErrorString(rc));
		return -1;
	}
	return 0;
}

/* Free; see cuda_select.h. */
void cuda_select_free(struct cuda_select *cs)
{
	cudaFree(cs->d_pen);
	cudaFree(cs->d_win);
	cudaFree(cs->d_part);
	cudaFree(cs->d_cand);
	cudaFreeHost(cs->h_out); /* d_out is its device address */
	cudaFreeHost(cs->h_win);
	free(cs->h_cnt);
	memset(cs, 0, sizeof(*cs));
}

/* (logit desc, id asc) over pairs packed as {float, int32}. */
struct sel_pair {
	float v;
	int32_t id;
	float raw;
};

static int sel_cmp_pair(const void *pa, const void *pb)
{
	const struct sel_pair *a = (const struct sel_pair *)pa;
	const struct sel_pair *b = (const struct sel_pair *)pb;

	if (a->v != b->v)
		return a->v > b->v ? -1 : 1;
	return (a->id > b->id) - (a->id < b->id);
}

/* The window's distinct in-vocabulary ids, then their counts, into
   cs->h_win (engine_select_window); returns how many, or -1 with a
   message (host memory, or the CUDA error of the pinned or device
   buffer). */
static int32_t sel_window(struct cuda_select *cs,
                          const struct engine_select_req *q, char *err,
                          size_t errlen)
{
	size_t w = q->n_recent > 0 ? (size_t)q->n_recent : 0;
	int32_t d;
	cudaError_t rc;

	if (w == 0 ||
	    (q->repeat_penalty == 1.0f && q->frequency_penalty == 0.0f &&
	     q->presence_penalty == 0.0f))
		return 0;
	if (w > cs->win_cap) {
		/* grown geometrically: a window fills one id a token (up to
		   penalty_last_n), and each growth frees device and pinned
		   memory, which waits for the device */
		const size_t g = 2 * cs->win_cap > 256 ? 2 * cs->win_cap : 256;
		int32_t *hc;

		w = w > g ? w : g;
		hc = (int32_t *)realloc(cs->h_cnt, w * sizeof(*hc));

		if (hc == NULL) {
			snprintf(err, errlen,
			         "select: out of memory for a window of %d",
			         q->n_recent);
			return -1;
		}
		cs->h_cnt = hc;
		cudaFreeHost(cs->h_win);
		cudaFree(cs->d_win);
		cs->h_win = NULL;
		cs->d_win = NULL;
		cs->win_cap = 0;
		if ((rc = cudaMallocHost((void **)&cs->h_win,
		                         2 * w * sizeof(int32_t))) !=
		        cudaSuccess ||
		    (rc = cudaMalloc((void **)&cs->d_win,
		                     2 * w * sizeof(int32_t))) != cudaSuccess) {
			(void)cudaGetLastError();
			snprintf(err, errlen,
			         "select: buffers for a window of %d: %s (%s)",
			         q->n_recent, cudaGetErrorName(rc),
			         cudaGetErrorString(rc));
			return -1;
		}
		cs->win_cap = w;
	}
	/* ids then counts, one contiguous upload */
	d = (int32_t)engine_select_window(q, cs->n_vocab, cs->h_win, cs->h_cnt);
	memcpy(cs->h_win + d, cs->h_cnt, (size_t)d * sizeof(int32_t));
	return d;
}

/* Select; see cuda_select.h. */
int cuda_select_run(struct cuda_select *cs, cudaStream_t stream, int pdl,
                    const float *d_row, const struct engine_select_req *q,
                    struct engine_select_buf *b, char *err, size_t errlen)
{
	int32_t nv = cs->n_vocab;
	int32_t k = q->k < nv ? q->k : nv, nr = q->n_raw < nv ? q->n_raw : nv;
	int32_t n_win = sel_window(cs, q, err, errlen);
	const float *pen = d_row;
	struct sel_head *h = (struct sel_head *)cs->h_out;
	struct sel_pair *pairs;
	/* the entries the device selects: without penalties the raw top
	   n_raw are the first n_raw of the top max(k, n_raw) of the one row,
	   so one selection serves both (ks entries, no raw ones) */
	int32_t ks = k, nrs = nr;

	if (n_win < 0)
		return -1;
	if (n_win > 0) {
		CUDA_TRY(cudaMemcpyAsync(cs->d_pen, d_row,
		                         (size_t)nv * sizeof(float),
		                         cudaMemcpyDeviceToDevice, stream),
		         err, errlen);
		CUDA_TRY(cudaMemcpyAsync(cs->d_win, cs->h_win,
		                         2 * (size_t)n_win * sizeof(int32_t),
		                         cudaMemcpyHostToDevice, stream),
		         err, errlen);
		cu_launch_on(stream, 0, sel_penalise, (n_win + 255) / 256, 256,
		             0, d_row, cs->d_pen, (const int32_t *)cs->d_win,
		             n_win, q->repeat_penalty, q->frequency_penalty,
		             q->presence_penalty);
		CUDA_TRY(cudaGetLastError(), err, errlen);
		pen = cs->d_pen;
	} else {
		ks = k > nr ? k : nr;
		nrs = 0;
	}
	{
		/* the candidate arrays, each n_tiles * SEL_TILE entries */
		size_t nc = (size_t)cs->n_tiles * SEL_TILE;
		float *ck_v = (float *)cs->d_cand, *ck_raw = ck_v + nc;
		int32_t *ck_id = (int32_t *)(ck_raw + nc);
		float *cr_v = (float *)(ck_id + nc);
		int32_t *cr_id = (int32_t *)(cr_v + nc);
		struct sel_part *part = (struct sel_part *)cs->d_part;

		/* after the product that wrote the row, or a copy: an
		   ordinary launch either way; the final pass overlaps the
		   tiles' tail (PDL) */
		cu_launch_on(stream, pdl, sel_tiles, cs->n_tiles,
		             SEL_TILE_THREADS, 0, d_row, pen, nv, ks, nrs, part,
		             ck_v, ck_id, ck_raw, cr_v, cr_id);
		CUDA_TRY_LAUNCH(err, errlen);
		/* straight into the mapped host block: no copy in the stream */
		cu_launch_on(stream, pdl, sel_final, 1, SEL_FINAL_THREADS, 0,
		             (const struct sel_part *)part, cs->n_tiles, nv, ks,
		             nrs, (const float *)ck_v, (const int32_t *)ck_id,
		             (const float *)ck_raw, (const float *)cr_v,
		             (const int32_t *)cr_id,
		             (unsigned char *)cs->d_out);
		CUDA_TRY_LAUNCH(err, errlen);
	}
	CUDA_TRY(cudaStreamSynchronize(stream), err, errlen);
	if (h->nan_at != INT_MAX || h->inf_at != INT_MAX) {
		int nan_first = h->nan_at < h->inf_at;

		snprintf(err, errlen, "logit of token %d is %s",
		         nan_first ? h->nan_at : h->inf_at,
		         nan_first ? "NaN" : "+inf");
		return -1;
	}
	if (h->pen_s == 0.0) {
		snprintf(err, errlen, "all %d logits are -inf", nv);
		return -1;
	}
	{
		const int32_t *k_id = (const int32_t *)(h + 1);
		const float *k_v = (const float *)(k_id + ks);
		const float *k_raw = k_v + ks;
		const int32_t *r_id = (const int32_t *)(k_raw + ks);
		const float *r_v = (const float *)(r_id + nrs);
		int32_t nmax = k > nr ? k : nr;

		pairs = (struct sel_pair *)malloc(
		    (size_t)(nmax > 0 ? nmax : 1) * sizeof(*pairs));
		if (pairs == NULL) {
			snprintf(err, errlen, "select: out of memory");
			return -1;
		}
		for (int32_t i = 0; i < ks; i++) {
			pairs[i].v = k_v[i];
			pairs[i].id = k_id[i];
			pairs[i].raw = k_raw[i];
		}
		qsort(pairs, (size_t)ks, sizeof(*pairs), sel_cmp_pair);
		for (int32_t i = 0; i < k; i++) {
			b->id[i] = pairs[i].id;
			b->logit[i] = pairs[i].v;
			b->raw_logit[i] = pairs[i].raw;
		}
		/* shared (nrs 0): the raw entries are the sorted pairs' first
		 */
		for (int32_t i = 0; i < nrs; i++) {
			pairs[i].v = r_v[i];
			pairs[i].id = r_id[i];
		}
		qsort(pairs, (size_t)nrs, sizeof(*pairs), sel_cmp_pair);
		for (int32_t i = 0; i < nr; i++) {
			b->raw_id[i] = pairs[i].id;
			b->raw_top[i] = pairs[i].v;
		}
		free(pairs);
	}
	engine_select_publish(b, k, nr, h->raw_m, h->raw_s, h->raw_a, h->pen_m,
	                      h->pen_s);
	return 0;
}

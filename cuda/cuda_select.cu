/*
 * cuda_select.cu - the select step on the device (cuda_select.h) and the
 * read-bandwidth measurement of `parley bench`.
 *
 * NOTES ON THE DESIGN
 *
 * Correct first: one block of 1024 threads does the whole row (a 151k
 * vocabulary is 600 KB: a few microseconds of one SM's bandwidth, small
 * beside a decode step; a multi-block version is speed work for later).
 *
 *   1. penalties: the window's distinct ids and counts are made on the host
 *      (a few hundred ids), uploaded, and applied to a copy of the row with
 *      the reference's formula in round-to-nearest intrinsics - nvcc would
 *      otherwise contract a * b + c into one FMA and round differently;
 *   2. one pass over both rows: online log-sum-exp and entropy sums in
 *      double (the reference's form), and the lowest index of a NaN or
 *      +inf logit;
 *   3. top-k by radix select over order-preserving 32-bit keys (four 8-bit
 *      digits, most significant first) finds the k-th greatest key T and
 *      how many entries equal to T are wanted; entries above T are gathered
 *      in any order, entries equal to T in id order (a block scan per tile)
 *      so that ties go to the lower ids, as in the reference;
 *   4. the same for the raw row's top-n.
 * The host copies one block back (a header and k + n entries) and sorts
 * the entries by (logit desc, id asc), giving the reference's order.
 *
 * Invariant: with no NaN or +inf in the row, the ids and penalised logits
 * returned equal engine_select_row's bit for bit.
 */
#include "cuda_check.cuh"
#include "cuda_select.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEL_THREADS 1024
#define SEL_WARPS   (SEL_THREADS / 32)

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

/* Bytes of the result block for K and N_RAW entries. */
static size_t sel_out_bytes(int32_t k, int32_t n_raw)
{
	return sizeof(struct sel_head) + (size_t)(3 * k + 2 * n_raw) * 4;
}

/* Order-preserving key: a > b as floats iff key(a) > key(b); -0 = +0. */
__device__ static uint32_t sel_key(float f)
{
	uint32_t u = __float_as_uint(f);

	if ((u & 0x7fffffffu) == 0)
		u = 0;
	return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* The reference's penalty (engine_select.c), without contraction. */
__global__ static void sel_penalise(const float *row, float *pen,
                                    const int32_t *win, int32_t n_win, float rp,
                                    float fp, float pp)
{
	int32_t i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= n_win)
		return;
	int32_t id = win[i], cnt = win[n_win + i];
	float l = row[id];

	l = l <= 0.0f ? __fmul_rn(l, rp) : __fdiv_rn(l, rp);
	l = __fsub_rn(l, __fadd_rn(__fmul_rn((float)cnt, fp), pp));
	pen[id] = l;
}

/* Online sums (see engine_select.c's sel_sum_add). */
struct sel_sum {
	double m, s, a;
};

__device__ static void sel_sum_add(struct sel_sum *u, float l)
{
	double x = l, d;

	if (l == -INFINITY || l != l || l == INFINITY)
		return;
	if (u->m == -INFINITY) {
		u->m = x;
	} else if (x > u->m) {
		d = exp(u->m - x);
		u->a = d * (u->a + u->s * (u->m - x));
		u->s = d * u->s;
		u->m = x;
	}
	d = exp(x - u->m);
	u->s += d;
	u->a += d * (x - u->m);
}

/* Merge B into A. */
__device__ static void sel_sum_merge(struct sel_sum *a, struct sel_sum b)
{
	double m, da, db;

	if (b.m == -INFINITY)
		return;
	if (a->m == -INFINITY) {
		*a = b;
		return;
	}
	m = a->m > b.m ? a->m : b.m;
	da = exp(a->m - m);
	db = exp(b.m - m);
	a->a = da * (a->a + a->s * (a->m - m)) + db * (b.a + b.s * (b.m - m));
	a->s = da * a->s + db * b.s;
	a->m = m;
}

/* Block-wide merge of one sel_sum per thread; the result in thread 0. */
__device__ static struct sel_sum sel_block_sum(struct sel_sum v,
                                               struct sel_sum *sh)
{
	sh[threadIdx.x] = v;
	__syncthreads();
	for (int w = SEL_THREADS / 2; w > 0; w /= 2) {
		if ((int)threadIdx.x < w)
			sel_sum_merge(&sh[threadIdx.x], sh[threadIdx.x + w]);
		__syncthreads();
	}
	return sh[0];
}

/* Shared state of the radix select. */
struct sel_shared {
	uint32_t hist[256];
	uint32_t prefix, mask;
	int32_t remaining;
	int32_t count;
	int32_t taken;
	int32_t warp_n[SEL_WARPS];
};

/*
 * The K greatest of V[0..n) (ties: lower ids) into OUT_ID / OUT_V (and
 * RAW[id] into OUT_RAW when RAW is given), in no particular order.
 */
__device__ static void sel_topk(const float *v, int32_t n, int32_t k,
                                const float *raw, int32_t *out_id, float *out_v,
                                float *out_raw, struct sel_shared *sh)
{
	const int tid = threadIdx.x;

	if (k <= 0)
		return;
	if (tid == 0) {
		sh->prefix = 0;
		sh->mask = 0;
		sh->remaining = k;
	}
	for (int shift = 24; shift >= 0; shift -= 8) {
		for (int d = tid; d < 256; d += SEL_THREADS)
			sh->hist[d] = 0;
		__syncthreads();
		uint32_t prefix = sh->prefix, mask = sh->mask;

		for (int32_t i = tid; i < n; i += SEL_THREADS) {
			uint32_t key = sel_key(v[i]);

			if ((key & mask) == prefix)
				atomicAdd(&sh->hist[(key >> shift) & 255u], 1u);
		}
		__syncthreads();
		if (tid == 0) {
			int32_t cum = 0, need = sh->remaining;

			for (int d = 255; d >= 0; d--) {
				if (cum + (int32_t)sh->hist[d] >= need) {
					sh->remaining = need - cum;
					sh->prefix |= (uint32_t)d << shift;
					sh->mask |= 255u << shift;
					break;
				}
				cum += (int32_t)sh->hist[d];
			}
			sh->count = 0;
			sh->taken = 0;
		}
		__syncthreads();
	}
	/* sh->prefix = T, the k-th greatest key; take every key > T and the
	   first sh->remaining keys == T in id order */
	const uint32_t T = sh->prefix;
	const int32_t want_eq = sh->remaining;

	for (int32_t i = tid; i < n; i += SEL_THREADS)
		if (sel_key(v[i]) > T) {
			int32_t at = atomicAdd(&sh->count, 1);

			out_id[at] = i;
			out_v[at] = v[i];
			if (raw)
				out_raw[at] = raw[i];
		}
	__syncthreads();
	const int32_t base = sh->count; /* = k - want_eq */

	for (int32_t tile = 0; tile < n; tile += SEL_THREADS) {
		int32_t i = tile + tid, taken = sh->taken;
		int f = i < n && sel_key(v[i]) == T;
		unsigned bal = __ballot_sync(0xffffffffu, f);
		int lane = tid & 31, warp = tid >> 5;
		int32_t off = __popc(bal & ((1u << lane) - 1u));

		if (taken >= want_eq)
			break; /* uniform: every thread read the same taken */
		if (lane == 0)
			sh->warp_n[warp] = __popc(bal);
		__syncthreads();
		for (int w = 0; w < warp; w++)
			off += sh->warp_n[w];
		if (f && taken + off < want_eq) {
			int32_t at = base + taken + off;

			out_id[at] = i;
			out_v[at] = v[i];
			if (raw)
				out_raw[at] = raw[i];
		}
		__syncthreads();
		if (tid == 0) {
			int32_t tot = 0;

			for (int w = 0; w < SEL_WARPS; w++)
				tot += sh->warp_n[w];
			sh->taken = taken + tot;
		}
		__syncthreads();
	}
	__syncthreads();
}

/* Everything after the penalties, in one block. */
__global__ static void __launch_bounds__(SEL_THREADS)
    sel_main(const float *raw, const float *pen, int32_t n, int32_t k,
             int32_t n_raw, unsigned char *out)
{
	__shared__ struct sel_sum sums[SEL_THREADS];
	__shared__ struct sel_shared sh;
	__shared__ int32_t bad[2];
	struct sel_head *h = (struct sel_head *)out;
	int32_t *k_id = (int32_t *)(h + 1);
	float *k_v = (float *)(k_id + k);
	float *k_raw = k_v + k;
	int32_t *r_id = (int32_t *)(k_raw + k);
	float *r_v = (float *)(r_id + n_raw);
	struct sel_sum a = {-INFINITY, 0.0, 0.0}, b = {-INFINITY, 0.0, 0.0};

	if (threadIdx.x == 0)
		bad[0] = bad[1] = INT_MAX;
	__syncthreads();
	for (int32_t i = threadIdx.x; i < n; i += SEL_THREADS) {
		float x = raw[i];

		if (x != x)
			atomicMin(&bad[0], i);
		else if (x == INFINITY)
			atomicMin(&bad[1], i);
		sel_sum_add(&a, x);
		sel_sum_add(&b, pen[i]);
	}
	a = sel_block_sum(a, sums);
	__syncthreads();
	if (threadIdx.x == 0) {
		h->raw_m = a.m;
		h->raw_s = a.s;
		h->raw_a = a.a;
	}
	__syncthreads();
	b = sel_block_sum(b, sums);
	if (threadIdx.x == 0) {
		h->pen_m = b.m;
		h->pen_s = b.s;
		h->nan_at = bad[0];
		h->inf_at = bad[1];
		h->k = k;
		h->n_raw = n_raw;
	}
	__syncthreads();
	if (bad[0] != INT_MAX || bad[1] != INT_MAX)
		return; /* garbage: the host reports it, nothing to select */
	sel_topk(pen, n, k, raw, k_id, k_v, k_raw, &sh);
	sel_topk(raw, n, n_raw, NULL, r_id, r_v, NULL, &sh);
}

/* Allocate; see cuda_select.h. */
int cuda_select_init(struct cuda_select *cs, int32_t n_vocab, char *err,
                     size_t errlen)
{
	size_t ob = sel_out_bytes(ENGINE_SELECT_MAX, ENGINE_SELECT_MAX);

	memset(cs, 0, sizeof(*cs));
	cs->n_vocab = n_vocab;
	if (cudaMalloc((void **)&cs->d_pen, (size_t)n_vocab * sizeof(float)) !=
	        cudaSuccess ||
	    cudaMalloc(&cs->d_out, ob) != cudaSuccess ||
	    cudaMallocHost(&cs->h_out, ob) != cudaSuccess) {
		(void)cudaGetLastError();
		cuda_select_free(cs);
		snprintf(err, errlen, "out of GPU memory for the select step");
		return -1;
	}
	return 0;
}

/* Free; see cuda_select.h. */
void cuda_select_free(struct cuda_select *cs)
{
	cudaFree(cs->d_pen);
	cudaFree(cs->d_win);
	cudaFree(cs->d_out);
	cudaFreeHost(cs->h_out);
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
   cs->h_win (engine_select_window); returns how many, or -1 (memory). */
static int32_t sel_window(struct cuda_select *cs,
                          const struct engine_select_req *q)
{
	size_t w = q->n_recent > 0 ? (size_t)q->n_recent : 0;
	int32_t d;

	if (w == 0 ||
	    (q->repeat_penalty == 1.0f && q->frequency_penalty == 0.0f &&
	     q->presence_penalty == 0.0f))
		return 0;
	if (w > cs->win_cap) {
		int32_t *hc = (int32_t *)realloc(cs->h_cnt, w * sizeof(*hc));

		if (hc == NULL)
			return -1;
		cs->h_cnt = hc;
		cudaFreeHost(cs->h_win);
		cudaFree(cs->d_win);
		cs->h_win = NULL;
		cs->d_win = NULL;
		cs->win_cap = 0;
		if (cudaMallocHost((void **)&cs->h_win,
		                   2 * w * sizeof(int32_t)) != cudaSuccess ||
		    cudaMalloc((void **)&cs->d_win, 2 * w * sizeof(int32_t)) !=
		        cudaSuccess) {
			(void)cudaGetLastError();
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
int cuda_select_run(struct cuda_select *cs, cudaStream_t stream,
                    const float *d_row, const struct engine_select_req *q,
                    struct engine_select_buf *b, char *err, size_t errlen)
{
	int32_t nv = cs->n_vocab;
	int32_t k = q->k < nv ? q->k : nv, nr = q->n_raw < nv ? q->n_raw : nv;
	int32_t n_win = sel_window(cs, q);
	const float *pen = d_row;
	struct sel_head *h = (struct sel_head *)cs->h_out;
	struct sel_pair *pairs;

	if (n_win < 0) {
		snprintf(err, errlen,
		         "select: out of memory for a window of %d",
		         q->n_recent);
		return -1;
	}
	if (n_win > 0) {
		CUDA_TRY(cudaMemcpyAsync(cs->d_pen, d_row,
		                         (size_t)nv * sizeof(float),
		                         cudaMemcpyDeviceToDevice, stream),
		         err, errlen);
		CUDA_TRY(cudaMemcpyAsync(cs->d_win, cs->h_win,
		                         2 * (size_t)n_win * sizeof(int32_t),
		                         cudaMemcpyHostToDevice, stream),
		         err, errlen);
		sel_penalise<<<(n_win + 255) / 256, 256, 0, stream>>>(
		    d_row, cs->d_pen, cs->d_win, n_win, q->repeat_penalty,
		    q->frequency_penalty, q->presence_penalty);
		CUDA_TRY(cudaGetLastError(), err, errlen);
		pen = cs->d_pen;
	}
	sel_main<<<1, SEL_THREADS, 0, stream>>>(d_row, pen, nv, k, nr,
	                                        (unsigned char *)cs->d_out);
	CUDA_TRY(cudaGetLastError(), err, errlen);
	CUDA_TRY(cudaMemcpyAsync(cs->h_out, cs->d_out, sel_out_bytes(k, nr),
	                         cudaMemcpyDeviceToHost, stream),
	         err, errlen);
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
		const float *k_v = (const float *)(k_id + k);
		const float *k_raw = k_v + k;
		const int32_t *r_id = (const int32_t *)(k_raw + k);
		const float *r_v = (const float *)(r_id + nr);
		int32_t nmax = k > nr ? k : nr;

		pairs = (struct sel_pair *)malloc(
		    (size_t)(nmax > 0 ? nmax : 1) * sizeof(*pairs));
		if (pairs == NULL) {
			snprintf(err, errlen, "select: out of memory");
			return -1;
		}
		for (int32_t i = 0; i < k; i++) {
			pairs[i].v = k_v[i];
			pairs[i].id = k_id[i];
			pairs[i].raw = k_raw[i];
		}
		qsort(pairs, (size_t)k, sizeof(*pairs), sel_cmp_pair);
		for (int32_t i = 0; i < k; i++) {
			b->id[i] = pairs[i].id;
			b->logit[i] = pairs[i].v;
			b->raw_logit[i] = pairs[i].raw;
		}
		for (int32_t i = 0; i < nr; i++) {
			pairs[i].v = r_v[i];
			pairs[i].id = r_id[i];
		}
		qsort(pairs, (size_t)nr, sizeof(*pairs), sel_cmp_pair);
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

/* ---------------------------------------------------- read bandwidth */

/* Sum of 16-byte words, grid-stride; one partial per block. */
__global__ static void bw_read(const uint4 *p, size_t n, unsigned *out)
{
	unsigned acc = 0;

	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		uint4 v = p[i];

		acc += v.x ^ v.y ^ v.z ^ v.w;
	}
	if (acc == 0x9e3779b9u) /* almost never: keeps the loads alive */
		out[blockIdx.x] = acc;
}

/* Measure; see cuda_select.h. */
int cuda_read_bandwidth(double *bytes_per_s, char *err, size_t errlen)
{
	size_t bytes = (size_t)1 << 30;
	void *buf = NULL;
	unsigned *out = NULL;
	cudaEvent_t a = NULL, b = NULL;
	int sms = 0, rc = -1;
	float ms, best = FLT_MAX;

	/* 1 GiB, or less when the model left little memory free */
	while (bytes >= ((size_t)64 << 20) &&
	       cudaMalloc(&buf, bytes) != cudaSuccess) {
		(void)cudaGetLastError();
		buf = NULL;
		bytes /= 2;
	}
	if (buf == NULL) {
		snprintf(err, errlen,
		         "no GPU memory left to measure bandwidth");
		return -1;
	}
	if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) !=
	        cudaSuccess ||
	    cudaMalloc((void **)&out, (size_t)sms * 8 * sizeof(unsigned)) !=
	        cudaSuccess ||
	    cudaMemset(buf, 1, bytes) != cudaSuccess ||
	    cudaEventCreate(&a) != cudaSuccess ||
	    cudaEventCreate(&b) != cudaSuccess)
		goto out;
	for (int pass = 0; pass < 6; pass++) {
		cudaEventRecord(a, 0);
		bw_read<<<sms * 8, 512>>>((const uint4 *)buf, bytes / 16, out);
		cudaEventRecord(b, 0);
		if (cudaEventSynchronize(b) != cudaSuccess ||
		    cudaEventElapsedTime(&ms, a, b) != cudaSuccess)
			goto out;
		if (pass > 0 && ms < best) /* pass 0 warms up */
			best = ms;
	}
	*bytes_per_s = (double)bytes / (best * 1e-3);
	rc = 0;
out:
	if (rc != 0)
		snprintf(err, errlen, "bandwidth measurement: %s",
		         cudaGetErrorString(cudaGetLastError()));
	if (a)
		cudaEventDestroy(a);
	if (b)
		cudaEventDestroy(b);
	cudaFree(out);
	cudaFree(buf);
	return rc;
}

/*
 * t_cuda_iq.c - the i-quant and ternary weight types on the GPU (IQ4_NL,
 * IQ4_XS, IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M, TQ1_0,
 * TQ2_0: cuda_quant.cuh note 6) against the CPU engine's dequantization
 * (src/quant_iq.c, itself bit-exact with gguf-py), built only when
 * configure found CUDA; prints "1..0 # SKIP" without a device.
 *
 * Per type:
 *   - the GPU takes it (cuda_ops_type_ok) and its mat-vec takes int8
 *     activations (cuda_op_matvec_x8, cuda_x8_types: cuda_vecdot8.cuh's
 *     units);
 *   - get_rows (the embedding, and the decoder every product uses) equals
 *     quant_dequant_row bit for bit: on random valid blocks (random bytes,
 *     the block's half d set to a sane value, as tests/parley-mkmodel
 *     writes them) in rows of 1, 3 and 11 blocks of 256 (or 1, 3, 88 of
 *     IQ4_NL's 32), times the embedding's scale too; on wild blocks (every
 *     byte random, d included: subnormal, huge, infinite and NaN halves;
 *     a NaN equals a NaN, the GPU's are canonical); and on a walk over
 *     every entry of the type's grid, so the device's copy of each table
 *     (quant_grids.c) is checked entry by entry;
 *   - cuda_op_matmul with FORCE 1 (the mat-vec: its int8 units, and the
 *     element-wise one with fp32 activations, ctx->x8_off) and 2
 *     (dequantization to fp16, cuBLAS), 1 and 9 tokens, and a mixture's
 *     expert products (cuda_op_moe_down, both mat-vecs), against the
 *     double dot of the CPU's dequantized rows with the activations the
 *     path reads (the int8 units: the CPU engine's quantization of them,
 *     x8_dequant): the worst relative error |y - ref| / sum |w x| over
 *     the outputs is printed with its bound (mv_bound, gemm_bound say
 *     why), and the worst of each type at the end.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_ops.h"
#include "cuda_util.h"
#include "f16.h"
#include "quant.h"
#include "tap.h"

/* The types, where their half d lies, and its size: d = (0.5 + u) / DIV,
 * u uniform in [0, 1), random sign, so the weights are about unit size
 * (ui/cmd_mkmodel.c mk_blocks' divisors); IQ1_M's d is spread over the
 * top nibbles of its scales (D_OFF -1). All weights are then zero or
 * normal fp16 numbers (the smallest, an IQ4_XS scale of 1 times the
 * value 1, is above 1e-4), so the GEMM's fp16 copy rounds each relatively
 * (gemm_bound). */
static const struct iq_type {
	uint32_t t;
	int d_off;
	double div;
} iq_types[] = {
    {QTYPE_IQ4_NL, 0, 140}, {QTYPE_IQ4_XS, 0, 2600}, {QTYPE_IQ3_XXS, 0, 300},
    {QTYPE_IQ3_S, 0, 290},  {QTYPE_IQ2_XXS, 0, 115}, {QTYPE_IQ2_XS, 0, 115},
    {QTYPE_IQ2_S, 0, 120},  {QTYPE_IQ1_S, 0, 15},    {QTYPE_IQ1_M, -1, 8},
    {QTYPE_TQ1_0, 52, 1.7}, {QTYPE_TQ2_0, 64, 2.4},
};
#define N_TYPES (sizeof(iq_types) / sizeof(iq_types[0]))

/* The worst results of one type, for the summary. */
struct iq_worst {
	int64_t rows_bad;        /* get_rows elements unlike the CPU's */
	double mv, mv_bound;     /* mat-vec: worst relative error, its bound */
	double mv8, mv8_bound;   /* the same with int8 activations */
	double gemm, gemm_bound; /* the same for the GEMM */
};

static uint64_t rng_state = 0x5EED1D0A5EED1D0Aull;

/* splitmix64 */
static uint64_t rng_next(void)
{
	uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static double rng_unif(void)
{
	return (double)(rng_next() >> 11) * (1.0 / 9007199254740992.0);
}

/* Bits of F equal to those of G, or both NaN. */
static int same_float(float f, float g)
{
	uint32_t a, b;

	if (isnan(f) || isnan(g))
		return isnan(f) && isnan(g);
	memcpy(&a, &f, 4);
	memcpy(&b, &g, 4);
	return a == b;
}

/* The half bits of a sane block scale of type Q: (0.5 + u) / div, random
 * sign. */
static uint16_t sane_d(const struct iq_type *q)
{
	const double v = (0.5 + rng_unif()) / q->div;

	return f32_to_f16((float)(rng_next() & 1 ? -v : v));
}

/* NE1 rows of NE0 elements of type Q at P: random bytes; unless WILD,
 * each block's d set by sane_d (IQ1_M: its four nibbles in the top
 * nibbles of the scale words at 48, as iq1m_d reads them). */
static void random_rows(const struct iq_type *q, unsigned char *p, int64_t ne0,
                        int64_t ne1, int wild)
{
	const struct qtype_info *qi = qtype_get(q->t);
	const int64_t nb = ne1 * (ne0 / qi->blck_size);

	for (size_t i = 0; i < quant_row_size(q->t, ne0) * (size_t)ne1; i++)
		p[i] = (unsigned char)rng_next();
	for (int64_t b = 0; b < nb && !wild; b++) {
		unsigned char *blk = p + (size_t)b * qi->type_size;
		const uint16_t h = sane_d(q);

		if (q->d_off >= 0) {
			memcpy(blk + q->d_off, &h, 2);
			continue;
		}
		for (int k = 0; k < 4; k++)
			blk[48 + 2 * k + 1] =
			    (unsigned char)((blk[48 + 2 * k + 1] & 0x0F) |
			                    ((h >> (4 * k)) & 15) << 4);
	}
}

/* Grid entries a block of type T indexes (8 weights each, 4 for IQ3_*),
 * and *N_GRID, the entries of its grid; 0 for a type without a grid. */
static int walk_entries(uint32_t t, int *n_grid)
{
	switch (t) {
	case QTYPE_IQ2_XXS:
		*n_grid = 256;
		return 32;
	case QTYPE_IQ2_XS:
		*n_grid = 512;
		return 32;
	case QTYPE_IQ2_S:
		*n_grid = 1024;
		return 32;
	case QTYPE_IQ3_XXS:
		*n_grid = 256;
		return 64;
	case QTYPE_IQ3_S:
		*n_grid = 512;
		return 64;
	case QTYPE_IQ1_S:
	case QTYPE_IQ1_M:
		*n_grid = 2048;
		return 32;
	default:
		*n_grid = 0;
		return 0;
	}
}

/* Set the grid index of entry K of block B of type T to IDX, the block's
 * other fields as they were (the layouts of quant_iq.c's table). */
static void walk_set(uint32_t t, unsigned char *b, int k, unsigned idx)
{
	uint16_t v;

	switch (t) {
	case QTYPE_IQ2_XXS: /* a byte of the first u32 of each 8 bytes */
		b[2 + 8 * (k / 4) + k % 4] = (unsigned char)idx;
		break;
	case QTYPE_IQ2_XS: /* the low 9 bits of u16 k */
		memcpy(&v, b + 2 + 2 * k, 2);
		v = (uint16_t)((v & ~511u) | idx);
		memcpy(b + 2 + 2 * k, &v, 2);
		break;
	case QTYPE_IQ2_S: /* byte 2 + k, two bits of byte 66 + k / 4 */
		b[2 + k] = (unsigned char)idx;
		b[66 + k / 4] =
		    (unsigned char)((b[66 + k / 4] & ~(3u << (2 * (k % 4)))) |
		                    (idx >> 8) << (2 * (k % 4)));
		break;
	case QTYPE_IQ3_XXS: /* byte 2 + k */
		b[2 + k] = (unsigned char)idx;
		break;
	case QTYPE_IQ3_S: /* byte 2 + k, bit k % 8 of byte 66 + k / 8 */
		b[2 + k] = (unsigned char)idx;
		b[66 + k / 8] =
		    (unsigned char)((b[66 + k / 8] & ~(1u << (k % 8))) |
		                    (idx >> 8) << (k % 8));
		break;
	case QTYPE_IQ1_S: /* byte 2 + k, 3 bits of the u16 at 34 + k / 4 */
		b[2 + k] = (unsigned char)idx;
		memcpy(&v, b + 34 + 2 * (k / 4), 2);
		v = (uint16_t)((v & ~(7u << (3 * (k % 4)))) |
		               (idx >> 8) << (3 * (k % 4)));
		memcpy(b + 34 + 2 * (k / 4), &v, 2);
		break;
	case QTYPE_IQ1_M: /* byte k, the low 3 bits of nibble k at 32 */
		b[k] = (unsigned char)idx;
		b[32 + k / 2] =
		    (unsigned char)((b[32 + k / 2] & ~(7u << (4 * (k % 2)))) |
		                    (idx >> 8) << (4 * (k % 2)));
		break;
	}
}

/* get_rows of the NE1 rows of NE0 elements W (type T, on the device at
 * D_W) in reverse order, times SCALE, against WF (the CPU's rows) times
 * SCALE: the elements whose bits differ (a NaN equals a NaN), or -1 with
 * ERR set when the op failed. */
static int64_t rows_diff(struct cuda_ctx *ctx, uint32_t t, const void *d_w,
                         int64_t ne0, int64_t ne1, const float *wf, float scale,
                         char *err, size_t errlen)
{
	struct cuda_tensor ct = {t, ne0, ne1, quant_row_size(t, ne0), d_w, 1};
	const size_t n = (size_t)(ne0 * ne1);
	int32_t *rows = malloc(sizeof(int32_t) * (size_t)ne1);
	float *got = malloc(sizeof(float) * n);
	void *d_rows, *d_out = dev_put(NULL, sizeof(float) * n);
	int64_t diff = 0;

	for (int64_t r = 0; r < ne1; r++)
		rows[r] = (int32_t)(ne1 - 1 - r); /* reversed: index matters */
	d_rows = dev_put(rows, sizeof(int32_t) * (size_t)ne1);
	if (cuda_op_get_rows(ctx, &ct, d_rows, (int32_t)ne1, scale, d_out, err,
	                     errlen) != 0 ||
	    dev_get(ctx, got, d_out, sizeof(float) * n) != 0)
		diff = -1;
	for (int64_t r = 0; diff >= 0 && r < ne1; r++)
		for (int64_t i = 0; i < ne0; i++) {
			/* one float multiplication, as the GPU's */
			volatile float want =
			    wf[(ne1 - 1 - r) * ne0 + i] * scale;

			diff += !same_float(got[r * ne0 + i], want);
		}
	cudaFree(d_rows);
	cudaFree(d_out);
	free(rows);
	free(got);
	return diff;
}

/* The CPU's dequantization of NE1 rows of NE0 elements W of type T into
 * WF. */
static void dequant_rows(uint32_t t, const unsigned char *w, int64_t ne0,
                         int64_t ne1, float *wf)
{
	const size_t rs = quant_row_size(t, ne0);

	for (int64_t r = 0; r < ne1; r++)
		quant_dequant_row(t, w + (size_t)r * rs, wf + r * ne0, ne0);
}

/*
 * The bound of the mat-vec's relative error |y - ref| / sum |w x| (ref in
 * double, w the exact dequantized weights, the GPU's the same bits): each
 * lane of cm_matvec sums ceil(NE0 / 32) products in fp32 (a fused
 * multiply-add, or a rounded product and sum: at most 2 roundings a
 * term), then the warp adds the 32 partial sums in 5 levels. Every
 * product passes through at most ceil(NE0 / 32) + 6 roundings of 2^-24
 * (relative to the magnitudes summed), so the error is at most (k + 6)
 * 2^-24 sum |w x| to first order; 2 more units cover the higher orders.
 * With int8 activations (cuda_vecdot8.cuh) a lane's term is an exact
 * integer sum times an exact scale, rounded twice (times the activations'
 * d, times the sum) and added once, fewer terms a lane than elements; the
 * reference's activations are the CPU's quantized ones rounded to float
 * once (x8_dequant): the same bound holds.
 */
static double mv_bound(int64_t ne0)
{
	return (double)((ne0 + 31) / 32 + 8) * 0x1p-24;
}

/*
 * The GEMM's bound: each weight and each activation is rounded to fp16
 * once (relative 2^-11 each: all of them are zero or normal fp16 numbers,
 * iq_types, and |x| is in [1/16, 1]), their product is exact in fp32 (22
 * significant bits), so each term is off by at most 2^-10 + 2^-22 of |w x|;
 * cuBLAS sums the NE0 products in fp32 (tensor cores: take a whole unit,
 * 2^-23, a step, for their truncating accumulation), at most NE0 + 8
 * steps to any output.
 */
static double gemm_bound(int64_t ne0)
{
	return 0x1p-10 + 0x1p-22 + (double)(ne0 + 8) * 0x1p-23;
}

/* The worst |Y - REF| / SCALE over N outputs (REF, SCALE in double). */
static double worst_rel(const float *y, const double *ref, const double *scale,
                        size_t n)
{
	double w = 0;

	for (size_t i = 0; i < n; i++) {
		const double e = fabs((double)y[i] - ref[i]);
		const double r = scale[i] > 0 ? e / scale[i] : e;

		if (!(r <= w)) /* (a NaN is the worst) */
			w = r;
	}
	return w;
}

/* Keep the worst of E (bound B) in *W, *WB by their ratio. */
static void keep_worst(double e, double b, double *w, double *wb)
{
	if (!(e / b <= *w / *wb)) {
		*w = e;
		*wb = b;
	}
}

/* cuda_op_matmul of the NE1 x NE0 weight (type T at D_W, the CPU's rows
 * WF) over N_TOK tokens with FORCE (1 mat-vec, 2 GEMM; X8: the mat-vec
 * with int8 activations, else with fp32 ones): one check, the worst
 * relative error against the double dot; updates *WORST. */
static void check_matmul(struct cuda_ctx *ctx, uint32_t t, const void *d_w,
                         int64_t ne0, int64_t ne1, const float *wf,
                         int32_t n_tok, int force, int x8,
                         struct iq_worst *worst)
{
	struct cuda_tensor ct = {t, ne0, ne1, quant_row_size(t, ne0), d_w, 1};
	const size_t nx = (size_t)(n_tok * ne0), ny = (size_t)(n_tok * ne1);
	float *x = malloc(sizeof(float) * nx), *y = malloc(sizeof(float) * ny);
	double *ref = malloc(sizeof(double) * ny);
	double *mag = malloc(sizeof(double) * ny);
	double *xr = malloc(sizeof(double) * nx);
	const double bound = force == 1 ? mv_bound(ne0) : gemm_bound(ne0);
	void *d_x, *d_y = dev_put(NULL, sizeof(float) * ny);
	char err[512] = "";
	double e = INFINITY;
	int path;

	x8 = force == 1 && x8;
	for (size_t i = 0; i < nx; i++) { /* |x| in [1/16, 1], either sign */
		const double v = 0.0625 + 0.9375 * rng_unif();

		x[i] = (float)(rng_next() & 1 ? -v : v);
		xr[i] = x[i];
	}
	if (x8) /* the activations the int8 units read */
		x8_dequant(x, ne0, n_tok, xr);
	for (int32_t k = 0; k < n_tok; k++)
		for (int64_t r = 0; r < ne1; r++) {
			double s = 0, m = 0;

			for (int64_t i = 0; i < ne0; i++) {
				const double p =
				    (double)wf[r * ne0 + i] * xr[k * ne0 + i];

				s += p;
				m += fabs(p);
			}
			ref[k * ne1 + r] = s;
			mag[k * ne1 + r] = m;
		}
	d_x = dev_put(x, sizeof(float) * nx);
	/* NaN bits first, so an output left unwritten fails */
	cudaMemsetAsync(d_y, 0xff, sizeof(float) * ny, ctx->stream);
	ctx->x8_off = force == 1 && !x8;
	/* the path this check is about is the one taken */
	path = force != 1 || cuda_op_matvec_x8(ctx, &ct, n_tok) == x8;
	if (cuda_op_matmul(ctx, &ct, d_x, n_tok, d_y, force, err,
	                   sizeof(err)) == 0 &&
	    dev_get(ctx, y, d_y, sizeof(float) * ny) == 0)
		e = worst_rel(y, ref, mag, ny);
	ctx->x8_off = 0;
	tap_ok(path && e <= bound,
	       "%s matmul %lldx%lld, %d token%s, %s: worst relative error "
	       "%.3g (bound %.3g)%s %s",
	       qtype_name(t), (long long)ne1, (long long)ne0, n_tok,
	       n_tok == 1 ? "" : "s",
	       force == 2 ? "cuBLAS (fp16 inputs)"
	       : x8       ? "mat-vec (int8 activations)"
	                  : "mat-vec (fp32)",
	       e, bound, path ? "" : " (not the path asked for)", err);
	if (force == 2)
		keep_worst(e, bound, &worst->gemm, &worst->gemm_bound);
	else if (x8)
		keep_worst(e, bound, &worst->mv8, &worst->mv8_bound);
	else
		keep_worst(e, bound, &worst->mv, &worst->mv_bound);
	free(xr);
	cudaFree(d_x);
	cudaFree(d_y);
	free(x);
	free(y);
	free(ref);
	free(mag);
}

/* Type Q in rows of NE0 x NE1: get_rows bit for bit (sane and wild
 * blocks, times a scale), the products over 1 and 9 tokens. */
static void test_shape(struct cuda_ctx *ctx, const struct iq_type *q,
                       int64_t ne0, int64_t ne1, struct iq_worst *worst)
{
	static const int32_t toks[] = {1, 9};
	const size_t rs = quant_row_size(q->t, ne0);
	unsigned char *w = malloc(rs * (size_t)ne1);
	float *wf = malloc(sizeof(float) * (size_t)(ne0 * ne1));
	void *d_w = dev_put(NULL, rs * (size_t)ne1);
	char err[512] = "";
	int64_t diff[3];

	for (int wild = 1; wild >= 0; wild--) { /* the sane rows last */
		random_rows(q, w, ne0, ne1, wild);
		dequant_rows(q->t, w, ne0, ne1, wf);
		cudaMemcpy(d_w, w, rs * (size_t)ne1, cudaMemcpyHostToDevice);
		diff[wild] = rows_diff(ctx, q->t, d_w, ne0, ne1, wf, 1.0f, err,
		                       sizeof(err));
	}
	diff[2] = rows_diff(ctx, q->t, d_w, ne0, ne1, wf, 25.298221f, err,
	                    sizeof(err));
	for (int k = 0; k < 3; k++)
		worst->rows_bad += diff[k] < 0 ? ne0 * ne1 : diff[k];
	tap_ok(diff[0] == 0 && diff[1] == 0 && diff[2] == 0,
	       "%s get_rows %lldx%lld: the CPU's bits (differing: %lld, wild "
	       "blocks %lld, times a scale %lld) %s",
	       qtype_name(q->t), (long long)ne0, (long long)ne1,
	       (long long)diff[0], (long long)diff[1], (long long)diff[2], err);
	for (size_t k = 0; k < sizeof(toks) / sizeof(toks[0]); k++)
		for (int force = 1; force <= 3; force++) /* 3: int8 mat-vec */
			check_matmul(ctx, q->t, d_w, ne0, ne1, wf, toks[k],
			             force == 3 ? 1 : force, force == 3, worst);
	cudaFree(d_w);
	free(w);
	free(wf);
}

/* Every entry of the grid of type Q through get_rows: rows of 8 blocks
 * (2,048 elements), block g's entry k indexing (g * entries + k) mod the
 * grid's size, enough rows to reach every entry; the other fields random,
 * d sane (no entry's weights are zero, so a wrong table byte shows). */
static void test_walk(struct cuda_ctx *ctx, const struct iq_type *q,
                      struct iq_worst *worst)
{
	int n_grid, per = walk_entries(q->t, &n_grid);
	const int64_t ne0 = 2048;
	const int64_t ne1 = per ? (n_grid + 8 * per - 1) / (8 * per) : 0;
	const size_t rs = quant_row_size(q->t, ne0);
	const size_t ts = qtype_get(q->t)->type_size;
	unsigned char *w;
	float *wf;
	void *d_w;
	char err[512] = "";
	int64_t diff;

	if (per == 0)
		return;
	w = malloc(rs * (size_t)ne1);
	wf = malloc(sizeof(float) * (size_t)(ne0 * ne1));
	random_rows(q, w, ne0, ne1, 0);
	for (int64_t g = 0; g < ne1 * 8; g++)
		for (int k = 0; k < per; k++)
			walk_set(q->t, w + (size_t)g * ts, k,
			         (unsigned)((g * per + k) % n_grid));
	dequant_rows(q->t, w, ne0, ne1, wf);
	d_w = dev_put(w, rs * (size_t)ne1);
	diff = rows_diff(ctx, q->t, d_w, ne0, ne1, wf, 1.0f, err, sizeof(err));
	worst->rows_bad += diff < 0 ? ne0 * ne1 : diff;
	tap_ok(diff == 0,
	       "%s: all %d grid entries decode as the CPU's (%lld elements "
	       "differ) %s",
	       qtype_name(q->t), n_grid, (long long)diff, err);
	cudaFree(d_w);
	free(w);
	free(wf);
}

/* A mixture's expert products of type Q (cuda_op_moe_down: the mat-vec
 * reading the matrix of each slot's expert; X8: the int8 units, else the
 * element-wise one): a stack of 3 experts of 37 rows of 3 blocks, 5
 * slots, against the double dot (mv_bound). */
static void test_moe(struct cuda_ctx *ctx, const struct iq_type *q, int x8,
                     struct iq_worst *worst)
{
	enum { NE = 3, NE1 = 37, NS = 5 };
	static const int32_t ids[NS] = {2, 0, 1, 2, 0};
	const int64_t ne0 = 3 * qtype_get(q->t)->blck_size;
	const size_t rs = quant_row_size(q->t, ne0);
	unsigned char *w = malloc(rs * NE * NE1);
	float *wf = malloc(sizeof(float) * (size_t)(ne0 * NE * NE1));
	float *x = malloc(sizeof(float) * (size_t)(ne0 * NS));
	double *xr = malloc(sizeof(double) * (size_t)(ne0 * NS));
	float y[NS * NE1];
	double ref[NS * NE1], mag[NS * NE1];
	struct cuda_tensor ct = {q->t, ne0, NE1, rs, NULL, NE};
	void *d_w, *d_x, *d_ids, *d_y = dev_put(NULL, sizeof(y));
	const double bound = mv_bound(ne0);
	char err[512] = "";
	double e = INFINITY;
	int path;

	random_rows(q, w, ne0, NE * NE1, 0);
	dequant_rows(q->t, w, ne0, NE * NE1, wf);
	for (int64_t i = 0; i < ne0 * NS; i++) {
		const double v = 0.0625 + 0.9375 * rng_unif();

		x[i] = (float)(rng_next() & 1 ? -v : v);
		xr[i] = x[i];
	}
	if (x8)
		x8_dequant(x, ne0, NS, xr);
	for (int s = 0; s < NS; s++)
		for (int r = 0; r < NE1; r++) {
			const float *wr = wf + (ids[s] * NE1 + r) * ne0;

			ref[s * NE1 + r] = mag[s * NE1 + r] = 0;
			for (int64_t i = 0; i < ne0; i++) {
				const double p =
				    (double)wr[i] * xr[s * ne0 + i];

				ref[s * NE1 + r] += p;
				mag[s * NE1 + r] += fabs(p);
			}
		}
	d_w = dev_put(w, rs * NE * NE1);
	d_x = dev_put(x, sizeof(float) * (size_t)(ne0 * NS));
	d_ids = dev_put(ids, sizeof(ids));
	ct.d = d_w;
	cudaMemsetAsync(d_y, 0xff, sizeof(y), ctx->stream);
	ctx->x8_off = !x8;
	path = cuda_op_matvec_x8(ctx, &ct, NS) == x8;
	if (cuda_op_moe_down(ctx, &ct, (const float *)d_x, NS,
	                     (const int32_t *)d_ids, NULL, NULL, (float *)d_y,
	                     err, sizeof(err)) == 0 &&
	    dev_get(ctx, y, d_y, sizeof(y)) == 0)
		e = worst_rel(y, ref, mag, NS * NE1);
	ctx->x8_off = 0;
	tap_ok(path && e <= bound,
	       "%s experts' products (%d of a stack of %d, %dx%lld), %s "
	       "activations: worst relative error %.3g (bound %.3g)%s %s",
	       qtype_name(q->t), NS, NE, NE1, (long long)ne0,
	       x8 ? "int8" : "fp32", e, bound,
	       path ? "" : " (not the path asked for)", err);
	if (x8)
		keep_worst(e, bound, &worst->mv8, &worst->mv8_bound);
	else
		keep_worst(e, bound, &worst->mv, &worst->mv_bound);
	free(xr);
	cudaFree(d_w);
	cudaFree(d_x);
	cudaFree(d_ids);
	cudaFree(d_y);
	free(w);
	free(wf);
	free(x);
}

/* The paths type T takes: a GPU type, the int8 mat-vec. */
static void test_paths(struct cuda_ctx *ctx, uint32_t t)
{
	struct cuda_tensor ct = {t, 256, 4, quant_row_size(t, 256), NULL, 1};
	void *d = dev_put(NULL, ct.row_size * 4);

	ct.d = d;
	tap_ok(cuda_ops_type_ok(t) && cuda_op_matvec_x8(ctx, &ct, 1) &&
	           ((cuda_x8_types() >> t) & 1),
	       "%s: a GPU type, int8 activations in its mat-vec",
	       qtype_name(t));
	cudaFree(d);
}

int main(void)
{
	struct iq_worst worst[N_TYPES];
	struct cuda_ctx ctx;
	char err[512] = "";
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
		return tap_skip_all("no CUDA device");
	/* a small fp16 weight scratch, so rows of 2,816 take 3 GEMM chunks
	   of 14 rows */
	if (cuda_ctx_init(&ctx, 40000, 9 * 4096, err, sizeof(err)) != 0) {
		printf("Bail out! %s\n", err);
		return 1;
	}
	memset(worst, 0, sizeof(worst));
	for (size_t i = 0; i < N_TYPES; i++) {
		const struct iq_type *q = &iq_types[i];
		const int64_t bs = qtype_get(q->t)->blck_size;

		worst[i].mv_bound = worst[i].mv8_bound = 1;
		worst[i].gemm_bound = 1;
		test_paths(&ctx, q->t);
		/* one block; odd block counts; a long row (3 GEMM chunks),
		   rows not a multiple of the mat-vec's 4 a block */
		test_shape(&ctx, q, bs, 5, &worst[i]);
		test_shape(&ctx, q, 3 * bs, 37, &worst[i]);
		test_shape(&ctx, q, 2816, 37, &worst[i]);
		test_walk(&ctx, q, &worst[i]);
		test_moe(&ctx, q, 0, &worst[i]);
		test_moe(&ctx, q, 1, &worst[i]);
	}
	for (size_t i = 0; i < N_TYPES; i++)
		tap_diag("%-8s get_rows differing %lld; worst relative error: "
		         "mat-vec %.3g (bound %.3g), int8 %.3g (%.3g), GEMM "
		         "%.3g (%.3g)",
		         qtype_name(iq_types[i].t),
		         (long long)worst[i].rows_bad, worst[i].mv,
		         worst[i].mv_bound, worst[i].mv8, worst[i].mv8_bound,
		         worst[i].gemm, worst[i].gemm_bound);
	cuda_ctx_free(&ctx);
	return tap_done();
}

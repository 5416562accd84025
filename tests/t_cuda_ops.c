/*
 * t_cuda_ops.c - every CUDA op on random inputs against the CPU reference
 * (src/quant.c's dequantization and plain fp32/double math), built only
 * when configure found CUDA; prints "1..0 # SKIP" without a device.
 *
 * Measure: NMSE = mse(gpu, cpu) / mse(cpu, 0) (llama.cpp's
 * test-backend-ops), bound 1e-6 where the GPU computes in fp32 (mat-vec on
 * any weight type, norms, RoPE, attention over fp16-exact K/V) and 5e-4
 * where it rounds to fp16 (the cuBLAS GEMM path). The dequantization
 * itself must be bit-exact (cuda_quant.cuh mirrors quant.c's roundings).
 * Quantized weights are random blocks whose fp16 scales are set to sane
 * values (random quants, valid blocks). Sizes are odd on purpose: rows not
 * a multiple of the 4-row mat-vec block, GEMM chunks that split the rows,
 * head_dim not a multiple of 32, 1, 7 and 512 tokens.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_ops.h"
#include "cuda_util.h"
#include "f16.h"
#include "quant.h"
#include "tap.h"

#define TOL_F32 1e-6
#define TOL_F16 5e-4

static uint64_t rng_state = 0x1234567887654321ull;

/* splitmix64 */
static uint64_t rng_next(void)
{
	uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* Uniform in [lo, hi). */
static float rng_unif(float lo, float hi)
{
	return lo +
	       (hi - lo) * (float)((rng_next() >> 40) * (1.0 / 16777216.0));
}

static void fill_unif(float *x, size_t n, float lo, float hi)
{
	for (size_t i = 0; i < n; i++)
		x[i] = rng_unif(lo, hi);
}

/* mse(g, c) / mse(c, 0). */
static double nmse(const float *g, const float *c, size_t n)
{
	double num = 0, den = 0;

	for (size_t i = 0; i < n; i++) {
		double d = (double)g[i] - c[i];

		num += d * d;
		den += (double)c[i] * c[i];
	}
	return den > 0 ? num / den : num;
}

/* Random row data of type T: random bytes, then the block scales set to
 * finite values of realistic size (d ~ 1e-3..2e-2 with a random sign). */
static void random_rows(uint32_t t, unsigned char *p, int64_t ne0, int64_t ne1)
{
	const struct qtype_info *qi = qtype_get(t);
	size_t rs = quant_row_size(t, ne0);
	int64_t nb = ne1 * (ne0 / qi->blck_size);

	if (t == QTYPE_F32 || t == QTYPE_F16 || t == QTYPE_BF16) {
		for (int64_t i = 0; i < ne0 * ne1; i++) {
			float v = rng_unif(-1.0f, 1.0f);
			uint16_t h;

			if (t == QTYPE_F32) {
				memcpy(p + 4 * i, &v, 4);
				continue;
			}
			h = t == QTYPE_F16 ? f32_to_f16(v)
			                   : (uint16_t)(f16_f32_bits(v) >> 16);
			memcpy(p + 2 * i, &h, 2);
		}
		return;
	}
	for (size_t i = 0; i < rs * (size_t)ne1; i++)
		p[i] = (unsigned char)rng_next();
	for (int64_t b = 0; b < nb; b++) {
		unsigned char *blk = p + (size_t)b * qi->type_size;
		float d = rng_unif(1e-3f, 2e-2f) * (rng_next() & 1 ? 1 : -1);
		float m = rng_unif(-2e-2f, 2e-2f);

		switch (t) {
		case QTYPE_Q4_0:
		case QTYPE_Q5_0:
		case QTYPE_Q8_0:
			put_half(blk, d);
			break;
		case QTYPE_Q4_1:
		case QTYPE_Q5_1:
		case QTYPE_Q4_K:
		case QTYPE_Q5_K:
			put_half(blk, d);
			put_half(blk + 2, m);
			break;
		case QTYPE_Q2_K:
			put_half(blk + 80, d);
			put_half(blk + 82, m);
			break;
		case QTYPE_Q3_K:
			put_half(blk + 108, d);
			break;
		case QTYPE_Q6_K:
			put_half(blk + 208, d);
			break;
		}
	}
}

static const uint32_t all_types[] = {
    QTYPE_F32,  QTYPE_F16,  QTYPE_BF16, QTYPE_Q8_0, QTYPE_Q4_0,
    QTYPE_Q4_1, QTYPE_Q5_0, QTYPE_Q5_1, QTYPE_Q2_K, QTYPE_Q3_K,
    QTYPE_Q4_K, QTYPE_Q5_K, QTYPE_Q6_K};

/* XHAT[t][i]: N_TOK rows of NE0 activations X as the int8 mat-vec sees
 * them (cuda_util.h x8_dequant), as floats (2^-24 relative). */
static void x8_dequant_f32(const float *x, int64_t ne0, int n_tok, float *xhat)
{
	double *d = malloc(sizeof(double) * (size_t)(ne0 * n_tok));

	x8_dequant(x, ne0, n_tok, d);
	for (int64_t i = 0; i < ne0 * n_tok; i++)
		xhat[i] = (float)d[i];
	free(d);
}

/* Dequantization bit-exactness and products for type T, NE0 x NE1. */
static void test_type(struct cuda_ctx *ctx, uint32_t t, int64_t ne0,
                      int64_t ne1)
{
	static const int32_t toks[] = {1, 7, 64, 130, 512};
	char err[512] = "";
	size_t rs = quant_row_size(t, ne0);
	unsigned char *w = malloc(rs * (size_t)ne1);
	float *wf = malloc(sizeof(float) * (size_t)(ne0 * ne1));
	float *got = malloc(sizeof(float) * (size_t)(ne0 * ne1));
	int32_t *rows = malloc(sizeof(int32_t) * (size_t)ne1);
	float *x = malloc(sizeof(float) * (size_t)(512 * ne0));
	float *ycpu = malloc(sizeof(float) * (size_t)(512 * ne1));
	float *ycpu8 = malloc(sizeof(float) * (size_t)(512 * ne1));
	float *xhat = malloc(sizeof(float) * (size_t)(512 * ne0));
	float *ygpu = malloc(sizeof(float) * (size_t)(512 * ne1));
	struct cuda_tensor ct = {t, ne0, ne1, rs, NULL, 1};
	void *d_w, *d_rows, *d_out, *d_x, *d_y;
	int64_t diff = 0;

	random_rows(t, w, ne0, ne1);
	for (int64_t r = 0; r < ne1; r++) {
		quant_dequant_row(t, w + (size_t)r * rs, wf + r * ne0, ne0);
		rows[r] = (int32_t)(ne1 - 1 - r); /* reversed: index matters */
	}
	d_w = dev_put(w, rs * (size_t)ne1);
	ct.d = d_w;
	d_rows = dev_put(rows, sizeof(int32_t) * (size_t)ne1);
	d_out = dev_put(NULL, sizeof(float) * (size_t)(ne0 * ne1));
	if (cuda_op_get_rows(ctx, &ct, d_rows, (int32_t)ne1, 1.0f, d_out, err,
	                     sizeof(err)) != 0 ||
	    dev_get(ctx, got, d_out, sizeof(float) * (size_t)(ne0 * ne1))) {
		tap_ok(0, "%s get_rows: %s", qtype_name(t), err);
		goto out;
	}
	for (int64_t r = 0; r < ne1; r++)
		for (int64_t i = 0; i < ne0; i++)
			diff += f16_f32_bits(got[r * ne0 + i]) !=
			        f16_f32_bits(wf[(ne1 - 1 - r) * ne0 + i]);
	tap_ok(diff == 0, "%s %lldx%lld dequantization bit-exact (%lld differ)",
	       qtype_name(t), (long long)ne0, (long long)ne1, (long long)diff);
	/* the embedding's scale: one float multiplication of each */
	diff = 0;
	if (cuda_op_get_rows(ctx, &ct, d_rows, (int32_t)ne1, 25.298221f, d_out,
	                     err, sizeof(err)) != 0 ||
	    dev_get(ctx, got, d_out, sizeof(float) * (size_t)(ne0 * ne1)))
		diff = -1;
	for (int64_t r = 0; diff >= 0 && r < ne1; r++)
		for (int64_t i = 0; i < ne0; i++) {
			volatile float want =
			    wf[(ne1 - 1 - r) * ne0 + i] * 25.298221f;

			diff += f16_f32_bits(got[r * ne0 + i]) !=
			        f16_f32_bits(want);
		}
	tap_ok(diff == 0, "%s get_rows times a scale: the CPU's bits (%lld)",
	       qtype_name(t), (long long)diff);

	fill_unif(x, (size_t)(512 * ne0), -1.0f, 1.0f);
	x8_dequant_f32(x, ne0, 512, xhat);
	for (int32_t tt = 0; tt < 512; tt++)
		for (int64_t r = 0; r < ne1; r++) {
			double s = 0, s8 = 0;

			for (int64_t i = 0; i < ne0; i++) {
				s += (double)wf[r * ne0 + i] * x[tt * ne0 + i];
				s8 += (double)wf[r * ne0 + i] *
				      xhat[tt * ne0 + i];
			}
			ycpu[tt * ne1 + r] = (float)s;
			ycpu8[tt * ne1 + r] = (float)s8;
		}
	d_x = dev_put(x, sizeof(float) * (size_t)(512 * ne0));
	d_y = dev_put(NULL, sizeof(float) * (size_t)(512 * ne1));
	/* force 0: the mat-vec with fp32 activations (ctx->x8_off), 1: the
	   mat-vec as the backend runs it (int8 activations for the types of
	   cuda_vecdot8.cuh: against the product with the CPU's quantized
	   activations), 2: the cuBLAS GEMM, 3: the quantized GEMM (its
	   slices of the inputs where the rows are few) */
	for (size_t k = 0; k < sizeof(toks) / sizeof(toks[0]); k++) {
		for (int mode = 0; mode <= 3; mode++) {
			int32_t n = toks[k];
			int force = mode >= 2 ? mode : 1, has8;
			double e, tol = force == 1 ? TOL_F32 : TOL_F16;

			if (force == 1 && n == 512 && ne0 * ne1 > 100000)
				continue; /* slow and no different from 7 */
			ctx->x8_off = 0;
			has8 = cuda_op_matvec_x8(ctx, &ct, n);
			if (mode == 0 && !has8)
				continue; /* one mat-vec path: mode 1's */
			if (mode == 3 && !cuda_op_qgemm_ok(ctx, &ct, n))
				continue; /* (rows of an odd length) */
			ctx->x8_off = mode == 0;
			/* on the op's stream: it does not wait for the
			   legacy default stream (cudaStreamNonBlocking) */
			cudaMemsetAsync(d_y, 0xff,
			                sizeof(float) * (size_t)n * ne1,
			                ctx->stream);
			if (cuda_op_matmul(ctx, &ct, d_x, n, d_y, force, err,
			                   sizeof(err)) != 0 ||
			    dev_get(ctx, ygpu, d_y,
			            sizeof(float) * (size_t)n * ne1)) {
				tap_ok(0, "%s matmul: %s", qtype_name(t), err);
				continue;
			}
			e = nmse(ygpu, mode == 1 && has8 ? ycpu8 : ycpu,
			         (size_t)n * ne1);
			tap_ok(e <= tol,
			       "%s matmul %lldx%lld, %d tokens, %s: nmse %.3g "
			       "(<= %g)",
			       qtype_name(t), (long long)ne1, (long long)ne0, n,
			       mode == 2   ? "cuBLAS fp16"
			       : mode == 3 ? "quantized GEMM"
			       : mode == 0 ? "mat-vec, fp32 activations"
			       : has8      ? "mat-vec, int8 activations"
			                   : "mat-vec",
			       e, tol);
			ctx->x8_off = 0;
		}
	}
	cudaFree(d_x);
	cudaFree(d_y);
out:
	cudaFree(d_w);
	cudaFree(d_rows);
	cudaFree(d_out);
	free(w);
	free(wf);
	free(got);
	free(rows);
	free(x);
	free(ycpu);
	free(ycpu8);
	free(xhat);
	free(ygpu);
}

/* Bits of F equal to those of G, or both NaN (the GPU's NaNs are
 * canonical, not the CPU's payload). */
static int same_float(float f, float g)
{
	uint32_t a, b;

	if (isnan(f) || isnan(g))
		return isnan(f) && isnan(g);
	memcpy(&a, &f, 4);
	memcpy(&b, &g, 4);
	return a == b;
}

/* cuda_op_quantize_x8 bit for bit against the CPU's quant_vec_prepare for
 * a Q8_0 row: scales, sums and quants, over blocks of every range, one
 * with an infinity, one with a NaN, one all zeros. */
static void test_quantize_x8(struct cuda_ctx *ctx)
{
	enum { T = 3, NE0 = 320, NB = NE0 / 32 };
	const size_t stride = cuda_x8_stride(NE0);
	float *x = malloc(sizeof(float) * T * NE0);
	unsigned char *got = malloc(stride * T);
	unsigned char *vec = malloc(quant_vec_size(QTYPE_Q8_0, NE0));
	void *d_x, *d_q;
	char err[512] = "";
	int64_t bad = 0;
	int rc;

	for (int t = 0; t < T; t++)
		for (int b = 0; b < NB; b++) {
			const float sc = ldexpf(1.0f, 3 * b - 12 - t);

			fill_unif(x + t * NE0 + b * 32, 32, -sc, sc);
		}
	x[1 * NE0 + 5] = INFINITY;             /* token 1, block 0 */
	x[2 * NE0 + NE0 - 1] = NAN;            /* token 2, last block */
	memset(x + 32, 0, 32 * sizeof(float)); /* token 0, block 1 */
	d_x = dev_put(x, sizeof(float) * T * NE0);
	d_q = dev_put(NULL, stride * T);
	rc = cuda_op_quantize_x8(ctx, (const float *)d_x, T, NE0, d_q, err,
	                         sizeof(err)) ||
	     dev_get(ctx, got, d_q, stride * T);
	for (int t = 0; t < T && !rc; t++) {
		/* the CPU's layout (src/quant.c struct vec_q8): d[nb],
		   ds[nb], qs[nb][32]; the GPU's: qs, d, ds */
		const unsigned char *g = got + t * stride;

		quant_vec_prepare(QTYPE_Q8_0, x + t * NE0, NE0, vec);
		for (int b = 0; b < NB; b++) {
			float gd, gds, cd, cds;

			memcpy(&cd, vec + 4 * b, 4);
			memcpy(&cds, vec + 4 * (NB + b), 4);
			memcpy(&gd, g + NE0 + 4 * b, 4);
			memcpy(&gds, g + NE0 + 4 * (NB + b), 4);
			bad += !same_float(gd, cd) + !same_float(gds, cds);
		}
		bad += memcmp(g, vec + 8 * NB, NE0) != 0;
	}
	tap_ok(!rc && bad == 0,
	       "int8 activations: %d x %d quantized as the CPU does, bit for "
	       "bit (%lld differ) %s",
	       T, NE0, (long long)bad, err);
	cudaFree(d_x);
	cudaFree(d_q);
	free(x);
	free(got);
	free(vec);
}

/* A random weight of type T, NE0 x NE1, on the device (*D) with its
 * dequantized rows in *WF (malloc'ed). */
static struct cuda_tensor fused_weight(uint32_t t, int64_t ne0, int64_t ne1,
                                       void **d, float **wf)
{
	size_t rs = quant_row_size(t, ne0);
	unsigned char *w = malloc(rs * (size_t)ne1);
	struct cuda_tensor ct = {t, ne0, ne1, rs, NULL, 1};

	*wf = malloc(sizeof(float) * (size_t)(ne0 * ne1));
	random_rows(t, w, ne0, ne1);
	for (int64_t r = 0; r < ne1; r++)
		quant_dequant_row(t, w + (size_t)r * rs, *wf + r * ne0, ne0);
	*d = dev_put(w, rs * (size_t)ne1);
	ct.d = *d;
	free(w);
	return ct;
}

/* Y[t][r] = WF row r . X[t] in double, as float. */
static void fused_ref(const float *wf, int64_t ne0, int64_t ne1, const float *x,
                      int n_tok, double *y)
{
	for (int t = 0; t < n_tok; t++)
		for (int64_t r = 0; r < ne1; r++) {
			double s = 0;

			for (int64_t i = 0; i < ne0; i++)
				s += (double)wf[r * ne0 + i] * x[t * ne0 + i];
			y[t * ne1 + r] = s;
		}
}

/* NMSE of N floats on the device at D against REF (doubles). */
static double fused_err(struct cuda_ctx *ctx, const void *d, const double *ref,
                        size_t n)
{
	float *g = malloc(sizeof(float) * n), *c = malloc(sizeof(float) * n);
	double e;

	for (size_t i = 0; i < n; i++)
		c[i] = (float)ref[i];
	e = dev_get(ctx, g, d, sizeof(float) * n) ? 1 : nmse(g, c, n);
	free(g);
	free(c);
	return e;
}

/*
 * The fused products against the double reference: QKV (types TQ, TK,
 * TV), gate/up + SwiGLU (types TQ, TK) and the residual add (type TQ), on
 * N_TOK tokens of NE0 inputs; odd row counts. One launch when the types
 * agree and have a fast mat-vec, the unfused fallback otherwise (mixed
 * types, element-wise types, 8+ tokens: GEMM, fp16 tolerance).
 */
static void test_fused(struct cuda_ctx *ctx, uint32_t tq, uint32_t tk,
                       uint32_t tv, int64_t ne0, int n_tok)
{
	const int64_t nq = 99, nkv = 33, nff = 77;
	const double tol = n_tok < CUDA_GEMM_MIN_TOKENS ? TOL_F32 : TOL_F16;
	float *wq, *wk, *wv, *wu, *x = malloc(sizeof(float) * n_tok * ne0);
	float *xhat = malloc(sizeof(float) * n_tok * ne0);
	float *y0 = malloc(sizeof(float) * n_tok * nq);
	double *rq = malloc(sizeof(double) * n_tok * nq);
	double *rk = malloc(sizeof(double) * n_tok * nkv);
	double *rv = malloc(sizeof(double) * n_tok * nkv);
	double *rg = malloc(sizeof(double) * n_tok * nff);
	double *ru = malloc(sizeof(double) * n_tok * nff);
	void *dq, *dk, *dv, *du, *d_x, *d_q, *d_k, *d_v, *d_g, *d_u;
	struct cuda_tensor cq = fused_weight(tq, ne0, nq, &dq, &wq);
	struct cuda_tensor ck = fused_weight(tk, ne0, nkv, &dk, &wk);
	struct cuda_tensor cv = fused_weight(tv, ne0, nkv, &dv, &wv);
	struct cuda_tensor cu = fused_weight(tk, ne0, nff, &du, &wu);
	struct cuda_tensor cg = cq;
	char err[512] = "";
	int rc;

	cg.ne1 = nff; /* the gate: the first nff rows of wq */
	fill_unif(x, (size_t)n_tok * ne0, -1.0f, 1.0f);
	fill_unif(y0, (size_t)n_tok * nq, -1.0f, 1.0f);
	x8_dequant_f32(x, ne0, n_tok, xhat);
	/* each product against the activations its path reads */
#define XOF(ct)                                                                \
	(n_tok < CUDA_GEMM_MIN_TOKENS && cuda_op_matvec_x8(ctx, &(ct), n_tok)  \
	     ? xhat                                                            \
	     : x)
	fused_ref(wq, ne0, nq, XOF(cq), n_tok, rq);
	fused_ref(wk, ne0, nkv, XOF(ck), n_tok, rk);
	fused_ref(wv, ne0, nkv, XOF(cv), n_tok, rv);
	fused_ref(wq, ne0, nff, XOF(cg), n_tok, rg);
	fused_ref(wu, ne0, nff, XOF(cu), n_tok, ru);
#undef XOF
	d_x = dev_put(x, sizeof(float) * n_tok * ne0);
	d_q = dev_put(NULL, sizeof(float) * n_tok * nq);
	d_k = dev_put(NULL, sizeof(float) * n_tok * nkv);
	d_v = dev_put(NULL, sizeof(float) * n_tok * nkv);
	d_g = dev_put(NULL, sizeof(float) * n_tok * nff);
	d_u = dev_put(NULL, sizeof(float) * n_tok * nff);

	/* biases (qwen2): added in the fused launch's epilogue */
	float *bias = malloc(sizeof(float) * (size_t)(nq + 2 * nkv));
	fill_unif(bias, (size_t)(nq + 2 * nkv), -1.0f, 1.0f);
	for (int64_t t = 0; t < n_tok; t++) {
		for (int64_t i = 0; i < nq; i++)
			rq[t * nq + i] += bias[i];
		for (int64_t i = 0; i < nkv; i++) {
			rk[t * nkv + i] += bias[nq + i];
			rv[t * nkv + i] += bias[nq + nkv + i];
		}
	}
	float *d_b = dev_put(bias, sizeof(float) * (size_t)(nq + 2 * nkv));
	rc = cuda_op_matmul_qkv(ctx, &cq, &ck, &cv, d_b, d_b + nq,
	                        d_b + nq + nkv, d_x, NULL, n_tok, d_q, d_k, d_v,
	                        err, sizeof(err));
	double eq = rc ? 1 : fused_err(ctx, d_q, rq, (size_t)n_tok * nq);
	double ek = rc ? 1 : fused_err(ctx, d_k, rk, (size_t)n_tok * nkv);
	double ev = rc ? 1 : fused_err(ctx, d_v, rv, (size_t)n_tok * nkv);
	tap_ok(!rc && eq <= tol && ek <= tol && ev <= tol,
	       "qkv %s/%s/%s x%lld, %d tokens%s: nmse %.3g %.3g %.3g %s",
	       qtype_name(tq), qtype_name(tk), qtype_name(tv), (long long)ne0,
	       n_tok, ctx->x8_off ? ", fp32 activations" : "", eq, ek, ev, err);

	/* the gated FFN, both activations (one launch on the unit mat-vec,
	   else the products and the element-wise activation) */
	for (int act = MODEL_ACT_SILU; act <= MODEL_ACT_GELU_TANH; act++) {
		double *ra = malloc(sizeof(double) * n_tok * nff);

		for (int64_t i = 0; i < n_tok * nff; i++) {
			const double g = rg[i];

			ra[i] =
			    act == MODEL_ACT_SILU
			        ? g / (1.0 + exp(-g)) * ru[i]
			        : 0.5 * g *
			              (1.0 + tanh(0.79788456080286535588 * g *
			                          (1.0 + 0.044715 * g * g))) *
			              ru[i];
		}
		rc = cuda_op_matmul_gated(ctx, (enum model_act)act, &cg, &cu,
		                          d_x, NULL, n_tok, d_g, d_u, err,
		                          sizeof(err));
		double eg =
		    rc ? 1 : fused_err(ctx, d_g, ra, (size_t)n_tok * nff);
		tap_ok(!rc && eg <= tol,
		       "%s %s/%s x%lld, %d tokens%s: nmse %.3g %s",
		       act == MODEL_ACT_SILU ? "swiglu" : "geglu",
		       qtype_name(tq), qtype_name(tk), (long long)ne0, n_tok,
		       ctx->x8_off ? ", fp32 activations" : "", eg, err);
		free(ra);
	}

	for (int64_t t = 0; t < n_tok; t++) /* matmul_add: no bias */
		for (int64_t i = 0; i < nq; i++)
			rq[t * nq + i] += y0[t * nq + i] - bias[i];
	rc = cudaMemcpy(d_q, y0, sizeof(float) * n_tok * nq,
	                cudaMemcpyHostToDevice) != cudaSuccess ||
	     cudaDeviceSynchronize() != cudaSuccess;
	rc = rc || cuda_op_matmul_add(ctx, &cq, d_x, NULL, n_tok, d_q, 0, err,
	                              sizeof(err));
	eq = rc ? 1 : fused_err(ctx, d_q, rq, (size_t)n_tok * nq);
	tap_ok(!rc && eq <= tol,
	       "matmul_add %s x%lld, %d tokens%s: nmse %.3g %s", qtype_name(tq),
	       (long long)ne0, n_tok, ctx->x8_off ? ", fp32 activations" : "",
	       eq, err);

	void *dev[] = {dq, dk, dv, du, d_x, d_q, d_k, d_v, d_g, d_u, d_b};
	for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
		cudaFree(dev[i]);
	void *host[] = {wq, wk, wv, wu, x, xhat, y0, rq, rk, rv, rg, ru, bias};
	for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++)
		free(host[i]);
}

/* RMSNorm of X[0..n) by W in el_rmsnorm's arithmetic (cuda_elem.cu):
 * 1,024 virtual threads, thread v summing fmaf(x_i, x_i, .) over i = v,
 * v + 1024, ..; an xor butterfly over each virtual warp's 32 sums, then
 * over the 32 warps' sums; the scale from a double square root; two
 * float roundings per output. */
static void rmsnorm_model(const float *x, const float *w, int n, float eps,
                          float *out)
{
	float vt[1024], wsum[32];

	for (int v = 0; v < 1024; v++) {
		vt[v] = 0.0f;
		for (int i = v; i < n; i += 1024)
			vt[v] = fmaf(x[i], x[i], vt[v]);
	}
	for (int wp = 0; wp < 32; wp++) {
		float *l = vt + 32 * wp, t[32];

		for (int off = 16; off > 0; off >>= 1) {
			for (int j = 0; j < 32; j++)
				t[j] = l[j] + l[j ^ off];
			memcpy(l, t, sizeof(t));
		}
		wsum[wp] = l[0];
	}
	for (int off = 16; off > 0; off >>= 1) {
		float t[32];

		for (int j = 0; j < 32; j++)
			t[j] = wsum[j] + wsum[j ^ off];
		memcpy(wsum, t, sizeof(t));
	}
	const float scale =
	    (float)(1.0 / sqrt((double)wsum[0] / n + (double)eps));
	for (int i = 0; i < n; i++) {
		volatile float a =
		    x[i] * scale; /* two roundings, as __fmul_rn */

		out[i] = a * w[i];
	}
}

/*
 * cuda_op_rmsnorm: bit for bit the host model of its order of operations
 * (rmsnorm_model), whether the rows are split over blocks (a decode step)
 * or a block walks each (CUDA_GEMM_MIN_TOKENS rows and more); rows with a
 * few massive activations, as real residual streams have, and widths of
 * one to four elements per virtual thread.
 */
static void test_rmsnorm_order(struct cuda_ctx *ctx)
{
	static const int shapes[][2] = {
	    {576, 1}, {3584, 1}, {896, 3}, {3584, CUDA_GEMM_MIN_TOKENS}};

	for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
		const int n = shapes[k][0], t = shapes[k][1];
		const size_t nx = (size_t)n * t;
		float *x = malloc(sizeof(float) * nx),
		      *w = malloc(sizeof(float) * n);
		float *ref = malloc(sizeof(float) * nx),
		      *got = malloc(sizeof(float) * nx);
		void *d_x, *d_w, *d_o;
		char err[512] = "";
		int rc;

		fill_unif(x, nx, -2.0f, 2.0f);
		fill_unif(w, n, 0.05f, 1.5f);
		for (int r = 0; r < t; r++) { /* massive activations */
			x[(size_t)r * n + 7] = 812.5f;
			x[(size_t)r * n + n / 3] = -433.0f;
		}
		for (int r = 0; r < t; r++)
			rmsnorm_model(x + (size_t)r * n, w, n, 1e-5f,
			              ref + (size_t)r * n);
		d_x = dev_put(x, sizeof(float) * nx);
		d_w = dev_put(w, sizeof(float) * n);
		d_o = dev_put(NULL, sizeof(float) * nx);
		rc = cuda_op_rmsnorm(ctx, (const float *)d_x,
		                     (const float *)d_w, n, t, 1e-5f,
		                     (float *)d_o, err, sizeof(err)) ||
		     dev_get(ctx, got, d_o, sizeof(float) * nx);
		tap_ok(!rc && memcmp(got, ref, sizeof(float) * nx) == 0,
		       "rmsnorm %d x %d: the host model of its order, bit for "
		       "bit %s",
		       t, n, err);
		cudaFree(d_x);
		cudaFree(d_w);
		cudaFree(d_o);
		free(x);
		free(w);
		free(ref);
		free(got);
	}
}

/*
 * cuda_op_rmsnorm_x8: the same fp32 output as cuda_op_rmsnorm, bit for
 * bit; the int8 activations it leaves in ctx->d_xq equal
 * cuda_op_quantize_x8 of that output; QKV (Q and K fused, V apart) and
 * gate/up + SwiGLU given them equal, bit for bit, the same products
 * quantizing the input themselves.
 */
static void test_rmsnorm_x8(struct cuda_ctx *ctx)
{
	enum { T = 3, N = 768, NQ = 99, NKV = 33 };
	const size_t stride = cuda_x8_stride(N);
	float *x = malloc(sizeof(float) * T * N),
	      *w = malloc(sizeof(float) * N);
	float *a = malloc(sizeof(float) * T * N),
	      *b = malloc(sizeof(float) * T * N);
	unsigned char *qa = malloc(stride * T), *qb = malloc(stride * T);
	float *wq, *wk, *wv;
	void *dq, *dk, *dv, *d_x, *d_w, *d_a, *d_b, *d_q2, *d_y;
	struct cuda_tensor cq = fused_weight(QTYPE_Q4_K, N, NQ, &dq, &wq);
	struct cuda_tensor ck = fused_weight(QTYPE_Q4_K, N, NKV, &dk, &wk);
	struct cuda_tensor cv = fused_weight(QTYPE_Q6_K, N, NKV, &dv, &wv);
	const size_t ny = (size_t)T * (NQ + 2 * NKV);
	float *y1 = malloc(sizeof(float) * ny),
	      *y2 = malloc(sizeof(float) * ny);
	const void *xq = NULL;
	char err[512] = "";
	int rc, same_out, same_q, same_y = 0, same_g = 0;

	fill_unif(x, (size_t)T * N, -3.0f, 3.0f);
	fill_unif(w, N, 0.5f, 1.5f);
	d_x = dev_put(x, sizeof(float) * T * N);
	d_w = dev_put(w, sizeof(float) * N);
	d_a = dev_put(NULL, sizeof(float) * T * N);
	d_b = dev_put(NULL, sizeof(float) * T * N);
	d_q2 = dev_put(NULL, stride * T);
	d_y = dev_put(NULL, sizeof(float) * ny);
	rc =
	    cuda_op_rmsnorm(ctx, (const float *)d_x, (const float *)d_w, N, T,
	                    1e-5f, (float *)d_a, err, sizeof(err)) ||
	    cuda_op_rmsnorm_x8(ctx, (const float *)d_x, (const float *)d_w, N,
	                       T, 1e-5f, (float *)d_b, &xq, err, sizeof(err)) ||
	    xq == NULL || dev_get(ctx, qa, xq, stride * T) ||
	    cuda_op_quantize_x8(ctx, (const float *)d_b, T, N, d_q2, err,
	                        sizeof(err)) ||
	    dev_get(ctx, qb, d_q2, stride * T) ||
	    dev_get(ctx, a, d_a, sizeof(float) * T * N) ||
	    dev_get(ctx, b, d_b, sizeof(float) * T * N);
	same_out = !rc && memcmp(a, b, sizeof(float) * T * N) == 0;
	same_q = !rc && memcmp(qa, qb, stride * T) == 0;
	tap_ok(same_out && same_q,
	       "rmsnorm_x8 %d x %d: output = rmsnorm's (%s), int8 = "
	       "quantize_x8 of it (%s) %s",
	       T, N, same_out ? "same" : "differs", same_q ? "same" : "differs",
	       err);
	/* the products given the norm's quants, then quantizing themselves */
	for (int pass = 0; !rc && pass < 2; pass++) {
		float *y = (float *)d_y, *out = pass ? y2 : y1;

		rc = (pass == 0 && cuda_op_rmsnorm_x8(ctx, (const float *)d_x,
		                                      (const float *)d_w, N, T,
		                                      1e-5f, (float *)d_b, &xq,
		                                      err, sizeof(err))) ||
		     cuda_op_matmul_qkv(ctx, &cq, &ck, &cv, NULL, NULL, NULL,
		                        (const float *)d_b, pass ? NULL : xq, T,
		                        y, y + T * NQ, y + T * (NQ + NKV), err,
		                        sizeof(err)) ||
		     dev_get(ctx, out, d_y, sizeof(float) * ny);
	}
	same_y = !rc && memcmp(y1, y2, sizeof(float) * ny) == 0;
	for (int pass = 0; !rc && pass < 2; pass++) {
		float *out = pass ? y2 : y1;

		rc = (pass == 0 && cuda_op_rmsnorm_x8(ctx, (const float *)d_x,
		                                      (const float *)d_w, N, T,
		                                      1e-5f, (float *)d_b, &xq,
		                                      err, sizeof(err))) ||
		     cuda_op_matmul_gated(ctx, MODEL_ACT_SILU, &cq, &cq,
		                          (const float *)d_b, pass ? NULL : xq,
		                          T, (float *)d_y, NULL, err,
		                          sizeof(err)) ||
		     dev_get(ctx, out, d_y, sizeof(float) * T * NQ);
	}
	same_g = !rc && memcmp(y1, y2, sizeof(float) * T * NQ) == 0;
	for (int pass = 0; !rc && pass < 2; pass++) { /* residual add */
		float *out = pass ? y2 : y1;

		rc = cudaMemsetAsync(d_y, 0, sizeof(float) * T * NQ,
		                     ctx->stream) != cudaSuccess ||
		     (pass == 0 && cuda_op_rmsnorm_x8(ctx, (const float *)d_x,
		                                      (const float *)d_w, N, T,
		                                      1e-5f, (float *)d_b, &xq,
		                                      err, sizeof(err))) ||
		     cuda_op_matmul_add(ctx, &cq, (const float *)d_b,
		                        pass ? NULL : xq, T, (float *)d_y, 0,
		                        err, sizeof(err)) ||
		     dev_get(ctx, out, d_y, sizeof(float) * T * NQ);
	}
	same_g = same_g && !rc && memcmp(y1, y2, sizeof(float) * T * NQ) == 0;
	tap_ok(!rc && same_y && same_g,
	       "qkv (Q4_K, Q4_K, Q6_K), swiglu and matmul_add on rmsnorm_x8's "
	       "int8 activations = quantizing themselves, bit for bit (%s, "
	       "%s) %s",
	       same_y ? "same" : "differ", same_g ? "same" : "differ", err);
	/* a post-norm's add (with the output scale) quantizing the new
	   residual, and the gated rows (the per-layer inputs' gate)
	   quantizing theirs: the values of the plain ops, the quants
	   quantize_x8 makes of them */
	for (int op = 0; !rc && op < 2; op++) {
		const int32_t n = op ? 256 : N, ldu = op ? 3 * n : n;
		/* X's floats: Y of the add, the up rows of the gate
		   (T N >= (T - 1) ldu + n) */
		const float *d_u = (const float *)d_x;

		xq = NULL;
		rc = cudaMemcpy(d_a, x, sizeof(float) * T * n,
		                cudaMemcpyHostToDevice) != cudaSuccess ||
		     cudaMemcpy(d_b, x, sizeof(float) * T * n,
		                cudaMemcpyHostToDevice) != cudaSuccess ||
		     (op == 0
		          ? cuda_op_rmsnorm_add_scale(
		                ctx, d_u, (const float *)d_w, n, T, 1e-5f,
		                0.37f, (float *)d_a, err, sizeof(err)) ||
		                cuda_op_rmsnorm_add_scale_x8(
		                    ctx, d_u, (const float *)d_w, n, T, 1e-5f,
		                    0.37f, (float *)d_b, &xq, err, sizeof(err))
		          : cuda_op_gate_act_rows(ctx, MODEL_ACT_GELU_TANH,
		                                  (float *)d_a, d_u, n, T, ldu,
		                                  err, sizeof(err)) ||
		                cuda_op_gate_act_rows_x8(
		                    ctx, MODEL_ACT_GELU_TANH, (float *)d_b, d_u,
		                    n, T, ldu, &xq, err, sizeof(err))) ||
		     xq == NULL ||
		     dev_get(ctx, qa, xq, cuda_x8_stride(n) * T) ||
		     cuda_op_quantize_x8(ctx, (const float *)d_b, T, n, d_q2,
		                         err, sizeof(err)) ||
		     dev_get(ctx, qb, d_q2, cuda_x8_stride(n) * T) ||
		     dev_get(ctx, a, d_a, sizeof(float) * T * n) ||
		     dev_get(ctx, b, d_b, sizeof(float) * T * n);
		same_out = !rc && memcmp(a, b, sizeof(float) * T * n) == 0 &&
		           memcmp(a, x, sizeof(float) * T * n) != 0;
		same_q = !rc && memcmp(qa, qb, cuda_x8_stride(n) * T) == 0;
		tap_ok(same_out && same_q,
		       "%s %d x %d: values = the plain op's (%s), int8 = "
		       "quantize_x8 of them (%s) %s",
		       op ? "gate_act_rows_x8" : "rmsnorm_add_scale_x8", T, n,
		       same_out ? "same" : "differ", same_q ? "same" : "differ",
		       err);
	}
	void *dev[] = {dq, dk, dv, d_x, d_w, d_a, d_b, d_q2, d_y};
	for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
		cudaFree(dev[i]);
	void *host[] = {x, w, a, b, qa, qb, wq, wk, wv, y1, y2};
	for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++)
		free(host[i]);
}

/* RMSNorm, bias, residual add, SwiGLU: fp32 element-wise. */
static void test_elementwise(struct cuda_ctx *ctx)
{
	enum { N = 999, T = 7 };
	static float x[T * N], w[N], y[T * N], ref[T * N], got[T * N];
	char err[512] = "";
	float *d_x, *d_w, *d_y, *d_o;
	int rc;

	fill_unif(x, T * N, -3.0f, 3.0f);
	fill_unif(w, N, 0.5f, 1.5f);
	fill_unif(y, T * N, -3.0f, 3.0f);
	d_x = dev_put(x, sizeof(x));
	d_w = dev_put(w, sizeof(w));
	d_y = dev_put(y, sizeof(y));
	d_o = dev_put(NULL, sizeof(x));

	for (int t = 0; t < T; t++) {
		double ss = 0;

		for (int i = 0; i < N; i++)
			ss += (double)x[t * N + i] * x[t * N + i];
		float sc = (float)(1.0 / sqrt(ss / N + 1e-5));
		for (int i = 0; i < N; i++)
			ref[t * N + i] = x[t * N + i] * sc * w[i];
	}
	rc = cuda_op_rmsnorm(ctx, d_x, d_w, N, T, 1e-5f, d_o, err, sizeof(err));
	rc = rc || dev_get(ctx, got, d_o, sizeof(got));
	tap_ok(!rc && nmse(got, ref, T * N) <= TOL_F32,
	       "rmsnorm %d x %d: nmse %.3g %s", T, N, nmse(got, ref, T * N),
	       err);

	/* the post-norm's add: rmsnorm then add, the same bits */
	{
		static float want[T * N];
		float *d_a = dev_put(y, sizeof(y));

		rc = rc || cuda_op_add(ctx, d_a, d_o, T * N, err, sizeof(err));
		rc = rc || dev_get(ctx, want, d_a, sizeof(want));
		rc = rc || cudaMemcpy(d_a, y, sizeof(y),
		                      cudaMemcpyHostToDevice) != cudaSuccess;
		rc = rc || cuda_op_rmsnorm_add(ctx, d_x, d_w, N, T, 1e-5f, d_a,
		                               err, sizeof(err));
		rc = rc || dev_get(ctx, got, d_a, sizeof(got));
		tap_ok(!rc && memcmp(got, want, sizeof(got)) == 0 &&
		           memcmp(got, y, sizeof(got)) != 0,
		       "rmsnorm_add %d x %d = rmsnorm + add, bit for bit %s", T,
		       N, err);
		for (int n1 = 1; !rc && n1 <= 2; n1++) { /* a decode row */
			rc =
			    cudaMemcpy(d_a, y, sizeof(y),
			               cudaMemcpyHostToDevice) != cudaSuccess ||
			    cuda_op_rmsnorm_add(ctx, d_x, d_w, N, n1, 1e-5f,
			                        d_a, err, sizeof(err)) ||
			    dev_get(ctx, got, d_a, sizeof(got));
			tap_ok(
			    !rc &&
			        memcmp(got, want, sizeof(float) * n1 * N) == 0,
			    "rmsnorm_add of %d row(s), split over blocks: the "
			    "same bits %s",
			    n1, err);
		}
		/* the output scale in the add's launch: rmsnorm_add then
		   scale, the same bits; a decode row split over blocks too */
		for (int n1 = T; !rc && n1 >= 1; n1 -= T - 1) {
			static float want2[T * N];

			rc =
			    cudaMemcpy(d_a, y, sizeof(y),
			               cudaMemcpyHostToDevice) != cudaSuccess ||
			    cuda_op_rmsnorm_add(ctx, d_x, d_w, N, n1, 1e-5f,
			                        d_a, err, sizeof(err)) ||
			    cuda_op_scale(ctx, d_a, (int64_t)n1 * N, 0.37f, err,
			                  sizeof(err)) ||
			    dev_get(ctx, want2, d_a, sizeof(want2)) ||
			    cudaMemcpy(d_a, y, sizeof(y),
			               cudaMemcpyHostToDevice) != cudaSuccess ||
			    cuda_op_rmsnorm_add_scale(ctx, d_x, d_w, N, n1,
			                              1e-5f, 0.37f, d_a, err,
			                              sizeof(err)) ||
			    dev_get(ctx, got, d_a, sizeof(got));
			tap_ok(!rc &&
			           memcmp(got, want2, sizeof(float) * n1 * N) ==
			               0 &&
			           memcmp(got, want, sizeof(float) * n1 * N) !=
			               0,
			       "rmsnorm_add_scale of %d row(s) = rmsnorm_add + "
			       "scale, bit for bit %s",
			       n1, err);
		}
		/* a norm and the add after it: rmsnorm then add; the one
		   launch into another buffer and into the addend itself, and
		   the two launches of ctx->norm_fuse_off */
		for (int n1 = T; !rc && n1 >= 1; n1 -= T - 1) {
			static const char *const how[3] = {
			    "into another buffer", "into its addend",
			    "norm_fuse_off's two launches"};
			static float want3[T * N];
			float *d_b = dev_put(y, sizeof(y));

			rc = cuda_op_rmsnorm(ctx, d_x, d_w, N, n1, 1e-5f, d_a,
			                     err, sizeof(err)) ||
			     cuda_op_add(ctx, d_a, d_y, (int64_t)n1 * N, err,
			                 sizeof(err)) ||
			     dev_get(ctx, want3, d_a, sizeof(want3));
			for (int v = 0; !rc && v < 3; v++) {
				float *o = v == 1 ? d_b : d_a;

				ctx->norm_fuse_off = v == 2;
				rc = cudaMemset(d_a, 0, sizeof(y)) !=
				         cudaSuccess ||
				     cuda_op_rmsnorm_plus(ctx, d_x, d_w, N, n1,
				                          1e-5f,
				                          v == 1 ? d_b : d_y, o,
				                          err, sizeof(err)) ||
				     dev_get(ctx, got, o, sizeof(got));
				tap_ok(
				    !rc && memcmp(got, want3,
				                  sizeof(float) * n1 * N) == 0,
				    "rmsnorm_plus of %d row(s) %s = rmsnorm + "
				    "add, bit for bit %s",
				    n1, how[v], err);
			}
			ctx->norm_fuse_off = 0;
			cudaFree(d_b);
		}
		cudaFree(d_a);
	}

	for (int i = 0; i < T * N; i++)
		ref[i] = x[i] + w[i % N];
	rc = cudaMemcpy(d_o, x, sizeof(x), cudaMemcpyHostToDevice) !=
	     cudaSuccess;
	rc = rc || cuda_op_add_bias(ctx, d_o, d_w, N, T, err, sizeof(err));
	rc = rc || dev_get(ctx, got, d_o, sizeof(got));
	tap_ok(!rc && nmse(got, ref, T * N) <= TOL_F32,
	       "bias add: nmse %.3g %s", nmse(got, ref, T * N), err);

	for (int i = 0; i < T * N; i++)
		ref[i] = x[i] + y[i];
	rc = cudaMemcpy(d_o, x, sizeof(x), cudaMemcpyHostToDevice) !=
	     cudaSuccess;
	rc = rc || cuda_op_add(ctx, d_o, d_y, T * N, err, sizeof(err));
	rc = rc || dev_get(ctx, got, d_o, sizeof(got));
	tap_ok(!rc && nmse(got, ref, T * N) <= TOL_F32,
	       "residual add: nmse %.3g %s", nmse(got, ref, T * N), err);

	for (int i = 0; i < T * N; i++)
		ref[i] = x[i] / (1.0f + expf(-x[i])) * y[i];
	rc = cudaMemcpy(d_o, x, sizeof(x), cudaMemcpyHostToDevice) !=
	     cudaSuccess;
	rc = rc || cuda_op_gate_act(ctx, MODEL_ACT_SILU, d_o, d_y, T * N, err,
	                            sizeof(err));
	rc = rc || dev_get(ctx, got, d_o, sizeof(got));
	tap_ok(!rc && nmse(got, ref, T * N) <= TOL_F32, "swiglu: nmse %.3g %s",
	       nmse(got, ref, T * N), err);
	cudaFree(d_x);
	cudaFree(d_w);
	cudaFree(d_y);
	cudaFree(d_o);
}

/* RoPE in both styles, full and partial rotation, with and without
 * frequency factors; backend_cpu.c's formulas written out again. */
static void test_rope(struct cuda_ctx *ctx, int neox, int n_rot, int factors)
{
	enum { T = 7, H = 3, HD = 64, POS0 = 1000 };
	static float x[T * H * HD], ref[T * H * HD], got[T * H * HD];
	double inv[HD / 2];
	char err[512] = "";
	void *d_x, *d_inv;
	int rc;

	for (int i = 0; i < n_rot / 2; i++) {
		inv[i] = pow(10000.0, -2.0 * i / n_rot) * 0.5;
		if (factors)
			inv[i] /= 1.0 + i % 7;
	}
	fill_unif(x, T * H * HD, -2.0f, 2.0f);
	memcpy(ref, x, sizeof(x));
	for (int t = 0; t < T; t++)
		for (int h = 0; h < H; h++) {
			float *v = ref + (t * H + h) * HD;

			for (int i = 0; i < n_rot / 2; i++) {
				double th = (double)(POS0 + t) * inv[i];
				float c = (float)cos(th), s = (float)sin(th);
				int a = neox ? i : 2 * i;
				int b = neox ? i + n_rot / 2 : 2 * i + 1;
				float x0 = v[a], x1 = v[b];

				v[a] = x0 * c - x1 * s;
				v[b] = x0 * s + x1 * c;
			}
		}
	d_x = dev_put(x, sizeof(x));
	d_inv = dev_put(inv, sizeof(inv));
	rc = cuda_op_rope(ctx, d_x, T, H, HD, n_rot, d_inv, 1.0f, POS0, neox,
	                  err, sizeof(err));
	rc = rc || dev_get(ctx, got, d_x, sizeof(got));
	tap_ok(!rc && nmse(got, ref, T * H * HD) <= TOL_F32,
	       "rope %s n_rot %d%s: nmse %.3g %s", neox ? "neox" : "norm",
	       n_rot, factors ? " rope_freqs" : "", nmse(got, ref, T * H * HD),
	       err);
	cudaFree(d_x);
	cudaFree(d_inv);
}

/* A key and a value cache of BYTES each on the device, zeroed (by the
 * legacy stream: the caller synchronises before an op uses them);
 * nonzero on failure. */
static int zeroed_caches(size_t bytes, void **kc, void **vc)
{
	*kc = dev_put(NULL, bytes);
	*vc = dev_put(NULL, bytes);
	return cudaMemset(*kc, 0, bytes) != cudaSuccess ||
	       cudaMemset(*vc, 0, bytes) != cudaSuccess;
}

/*
 * cuda_op_rope_kv_store against the unfused ops it replaces (cuda_op_rope
 * of Q and K, cuda_op_kv_store; each checked against the CPU above):
 * Q, K and both caches bit for bit. N_ROT < HD leaves dims unrotated.
 */
static void test_rope_kv(struct cuda_ctx *ctx, int neox, int n_rot, int hd,
                         int n_head, int n_kv, int n_tok, int pos0)
{
	const int n_layer = 2, il = 1, n_ctx = pos0 + n_tok + 5;
	const size_t nq = (size_t)n_tok * n_head * hd;
	const size_t nk = (size_t)n_tok * n_kv * hd;
	const size_t cache = (size_t)n_layer * n_kv * n_ctx * hd;
	float *q = malloc(sizeof(float) * nq), *k = malloc(sizeof(float) * nk);
	float *v = malloc(sizeof(float) * nk);
	float *a = malloc(sizeof(float) * (nq + nk));
	float *b = malloc(sizeof(float) * (nq + nk));
	uint16_t *ca = malloc(4 * cache), *cb = malloc(4 * cache);
	double *inv = malloc(sizeof(double) * (size_t)(hd / 2 + 1));
	void *d_inv, *d_v, *d_q[2], *d_k[2], *d_kc[2], *d_vc[2];
	char err[512] = "";
	int rc = 0;
	long bad = 0;

	for (int i = 0; i < n_rot / 2; i++)
		inv[i] = pow(10000.0, -2.0 * i / n_rot);
	fill_unif(q, nq, -2.0f, 2.0f);
	fill_unif(k, nk, -2.0f, 2.0f);
	fill_unif(v, nk, -2.0f, 2.0f);
	d_inv = dev_put(inv, sizeof(double) * (size_t)(hd / 2 + 1));
	d_v = dev_put(v, sizeof(float) * nk);
	for (int j = 0; j < 2; j++) {
		d_q[j] = dev_put(q, sizeof(float) * nq);
		d_k[j] = dev_put(k, sizeof(float) * nk);
		rc = rc || zeroed_caches(2 * cache, &d_kc[j], &d_vc[j]);
	}
	/* the legacy stream's memsets before the op's non-blocking stream */
	rc = rc || cudaDeviceSynchronize() != cudaSuccess;
	rc =
	    rc ||
	    cuda_op_rope(ctx, d_q[0], n_tok, n_head, hd, n_rot, d_inv, 1.0f,
	                 pos0, neox, err, sizeof(err)) ||
	    cuda_op_rope(ctx, d_k[0], n_tok, n_kv, hd, n_rot, d_inv, 1.0f, pos0,
	                 neox, err, sizeof(err)) ||
	    cuda_op_kv_store(ctx, d_k[0], d_v, n_tok, n_kv, hd, n_ctx, il, pos0,
	                     d_kc[0], d_vc[0], err, sizeof(err)) ||
	    cuda_op_rope_kv_store(ctx, d_q[1], d_k[1], d_v, n_tok, n_head, n_kv,
	                          hd, n_rot, d_inv, 1.0f, pos0, neox, n_ctx, il,
	                          d_kc[1], d_vc[1], err, sizeof(err));
	rc = rc || dev_get(ctx, a, d_q[0], sizeof(float) * nq) ||
	     dev_get(ctx, a + nq, d_k[0], sizeof(float) * nk) ||
	     dev_get(ctx, b, d_q[1], sizeof(float) * nq) ||
	     dev_get(ctx, b + nq, d_k[1], sizeof(float) * nk) ||
	     dev_get(ctx, ca, d_kc[0], 2 * cache) ||
	     dev_get(ctx, ca + cache, d_vc[0], 2 * cache) ||
	     dev_get(ctx, cb, d_kc[1], 2 * cache) ||
	     dev_get(ctx, cb + cache, d_vc[1], 2 * cache);
	bad = rc ? -1
	         : (memcmp(a, b, sizeof(float) * (nq + nk)) != 0) +
	               (memcmp(ca, cb, 4 * cache) != 0) * 2;
	/* and the fused op did change something: Q rotated, caches filled */
	bad += !rc && n_rot > 0 && memcmp(b, q, sizeof(float) * nq) == 0;
	tap_ok(!rc && bad == 0,
	       "rope_kv_store %s n_rot %d head_dim %d heads %d/%d, %d tokens "
	       "at %d: same as rope + rope + kv_store (%ld) %s",
	       neox ? "neox" : "norm", n_rot, hd, n_head, n_kv, n_tok, pos0,
	       bad, err);
	for (int j = 0; j < 2; j++) {
		cudaFree(d_q[j]);
		cudaFree(d_k[j]);
		cudaFree(d_kc[j]);
		cudaFree(d_vc[j]);
	}
	cudaFree(d_inv);
	cudaFree(d_v);
	void *host[] = {q, k, v, a, b, ca, cb, inv};
	for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++)
		free(host[i]);
}

/* cuda_op_qk_norm_rope_kv_store bit for bit against its chain: each
 * head of Q (with QN) and of K (with KN) RMS-normed by cuda_op_rmsnorm
 * (rows of HD), then cuda_op_rope_kv_store; the outputs in Q and K and
 * both caches compared, and the norm shown to have acted. */
static void test_qk_norm_rope_kv(struct cuda_ctx *ctx, int neox, int n_rot,
                                 int hd, int n_head, int n_kv, int n_tok,
                                 int pos0, int qn, int kn)
{
	const int n_layer = 2, il = 1, n_ctx = pos0 + n_tok + 5;
	const size_t nq = (size_t)n_tok * n_head * hd;
	const size_t nk = (size_t)n_tok * n_kv * hd;
	const size_t cache = (size_t)n_layer * n_kv * n_ctx * hd;
	float *q = malloc(sizeof(float) * nq), *k = malloc(sizeof(float) * nk);
	float *v = malloc(sizeof(float) * nk),
	      *w = malloc(sizeof(float) * 2 * hd);
	float *a = malloc(sizeof(float) * (nq + nk));
	float *b = malloc(sizeof(float) * (nq + nk));
	float *c = malloc(sizeof(float) * (nq + nk));
	uint16_t *ca = malloc(4 * cache), *cb = malloc(4 * cache);
	double *inv = malloc(sizeof(double) * (size_t)(hd / 2 + 1));
	void *d_inv, *d_v, *d_w, *d_q[3], *d_k[3], *d_kc[3], *d_vc[3];
	const float eps = 1e-6f;
	char err[512] = "";
	int rc = 0;
	long bad = 0;

	for (int i = 0; i < n_rot / 2; i++)
		inv[i] = pow(10000.0, -2.0 * i / n_rot);
	fill_unif(q, nq, -4.0f, 4.0f);
	fill_unif(k, nk, -4.0f, 4.0f);
	fill_unif(v, nk, -2.0f, 2.0f);
	fill_unif(w, (size_t)2 * hd, 0.5f, 2.0f);
	d_inv = dev_put(inv, sizeof(double) * (size_t)(hd / 2 + 1));
	d_v = dev_put(v, sizeof(float) * nk);
	d_w = dev_put(w, sizeof(float) * 2 * hd);
	for (int j = 0; j < 3; j++) {
		d_q[j] = dev_put(q, sizeof(float) * nq);
		d_k[j] = dev_put(k, sizeof(float) * nk);
		rc = rc || zeroed_caches(2 * cache, &d_kc[j], &d_vc[j]);
	}
	rc = rc || cudaDeviceSynchronize() != cudaSuccess;
	/* 0: the chain; 1: the fused op; 2: no norm (the norm acted) */
	if (qn)
		rc = rc || cuda_op_rmsnorm(ctx, d_q[2], (float *)d_w, hd,
		                           n_tok * n_head, eps, (float *)d_q[0],
		                           err, sizeof(err));
	if (kn)
		rc = rc || cuda_op_rmsnorm(ctx, d_k[2], (float *)d_w + hd, hd,
		                           n_tok * n_kv, eps, (float *)d_k[0],
		                           err, sizeof(err));
	rc =
	    rc ||
	    cuda_op_rope_kv_store(ctx, d_q[0], d_k[0], d_v, n_tok, n_head, n_kv,
	                          hd, n_rot, d_inv, 1.0f, pos0, neox, n_ctx, il,
	                          d_kc[0], d_vc[0], err, sizeof(err)) ||
	    cuda_op_qk_norm_rope_kv_store(
	        ctx, d_q[1], d_k[1], d_v, qn ? (float *)d_w : NULL,
	        kn ? (float *)d_w + hd : NULL, eps, n_tok, n_head, n_kv, hd,
	        n_rot, d_inv, 1.0f, pos0, neox, n_ctx, il, d_kc[1], d_vc[1],
	        err, sizeof(err)) ||
	    cuda_op_rope_kv_store(ctx, d_q[2], d_k[2], d_v, n_tok, n_head, n_kv,
	                          hd, n_rot, d_inv, 1.0f, pos0, neox, n_ctx, il,
	                          d_kc[2], d_vc[2], err, sizeof(err));
	rc = rc || dev_get(ctx, a, d_q[0], sizeof(float) * nq) ||
	     dev_get(ctx, a + nq, d_k[0], sizeof(float) * nk) ||
	     dev_get(ctx, b, d_q[1], sizeof(float) * nq) ||
	     dev_get(ctx, b + nq, d_k[1], sizeof(float) * nk) ||
	     dev_get(ctx, c, d_q[2], sizeof(float) * nq) ||
	     dev_get(ctx, c + nq, d_k[2], sizeof(float) * nk) ||
	     dev_get(ctx, ca, d_kc[0], 2 * cache) ||
	     dev_get(ctx, ca + cache, d_vc[0], 2 * cache) ||
	     dev_get(ctx, cb, d_kc[1], 2 * cache) ||
	     dev_get(ctx, cb + cache, d_vc[1], 2 * cache);
	bad = rc ? -1
	         : (memcmp(a, b, sizeof(float) * (nq + nk)) != 0) +
	               (memcmp(ca, cb, 4 * cache) != 0) * 2;
	if (!rc && qn)
		bad += 4 * (memcmp(b, c, sizeof(float) * nq) == 0);
	if (!rc && kn)
		bad += 8 * (memcmp(b + nq, c + nq, sizeof(float) * nk) == 0);
	tap_ok(!rc && bad == 0,
	       "qk_norm_rope_kv_store %s n_rot %d head_dim %d heads %d/%d, "
	       "%d tokens at %d, norms %s%s: same as rmsnorm + rope_kv_store "
	       "(%ld) %s",
	       neox ? "neox" : "norm", n_rot, hd, n_head, n_kv, n_tok, pos0,
	       qn ? "q" : "", kn ? "k" : "", bad, err);
	for (int j = 0; j < 3; j++) {
		cudaFree(d_q[j]);
		cudaFree(d_k[j]);
		cudaFree(d_kc[j]);
		cudaFree(d_vc[j]);
	}
	cudaFree(d_inv);
	cudaFree(d_v);
	cudaFree(d_w);
	void *host[] = {q, k, v, w, a, b, c, ca, cb, inv};
	for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++)
		free(host[i]);
}

/* RMSNorm's scale of X[0..n) as the CPU computes it (double sums). */
static float host_norm_scale(const float *x, int n, float eps)
{
	double ss = 0;

	for (int i = 0; i < n; i++)
		ss += (double)x[i] * x[i];
	return (float)(1.0 / sqrt(ss / n + (double)eps));
}

/*
 * Gemma 4's steps of the QKV chain (cuda_op_qkv_norm_rope_store): with
 * the weightless V norm, Q, K and the key cache are those of
 * cuda_op_qk_norm_rope_kv_store bit for bit and the value cache holds
 * fp16 of rmsnorm(V) (against a host loop); queries only (N_KV 0, no
 * caches): Q the same bits, nothing stored.
 */
static void test_qkv_vnorm(struct cuda_ctx *ctx, int neox, int n_rot, int hd,
                           int n_head, int n_kv, int n_tok, int pos0)
{
	const int n_layer = 2, il = 1, n_ctx = pos0 + n_tok + 5;
	const size_t nq = (size_t)n_tok * n_head * hd;
	const size_t nk = (size_t)n_tok * n_kv * hd;
	const size_t cache = (size_t)n_layer * n_kv * n_ctx * hd;
	float *q = malloc(sizeof(float) * nq), *k = malloc(sizeof(float) * nk);
	float *v = malloc(sizeof(float) * nk),
	      *w = malloc(sizeof(float) * 2 * hd);
	float *a = malloc(sizeof(float) * (nq + nk));
	float *b = malloc(sizeof(float) * (nq + nk));
	float *vref = malloc(sizeof(float) * nk),
	      *vgot = malloc(sizeof(float) * nk);
	uint16_t *ca = malloc(4 * cache), *cb = malloc(4 * cache);
	double *inv = malloc(sizeof(double) * (size_t)(hd / 2 + 1));
	void *d_inv, *d_v, *d_w, *d_q[3], *d_k[2], *d_kc[2], *d_vc[2];
	const float eps = 1e-6f;
	char err[512] = "";
	int rc = 0;
	long bad = 0;

	for (int i = 0; i < n_rot / 2; i++)
		inv[i] = pow(10000.0, -2.0 * i / n_rot);
	fill_unif(q, nq, -4.0f, 4.0f);
	fill_unif(k, nk, -4.0f, 4.0f);
	fill_unif(v, nk, -2.0f, 2.0f);
	fill_unif(w, (size_t)2 * hd, 0.5f, 2.0f);
	for (size_t r = 0; r < nk / hd; r++) {
		const float sc = host_norm_scale(v + r * hd, hd, eps);

		for (int d = 0; d < hd; d++)
			vref[r * hd + d] = v[r * hd + d] * sc;
	}
	d_inv = dev_put(inv, sizeof(double) * (size_t)(hd / 2 + 1));
	d_v = dev_put(v, sizeof(float) * nk);
	d_w = dev_put(w, sizeof(float) * 2 * hd);
	for (int j = 0; j < 2; j++) {
		d_k[j] = dev_put(k, sizeof(float) * nk);
		rc = rc || zeroed_caches(2 * cache, &d_kc[j], &d_vc[j]);
	}
	for (int j = 0; j < 3; j++)
		d_q[j] = dev_put(q, sizeof(float) * nq);
	rc = rc || cudaDeviceSynchronize() != cudaSuccess;
	rc = rc ||
	     cuda_op_qk_norm_rope_kv_store(
	         ctx, d_q[0], d_k[0], d_v, d_w, (float *)d_w + hd, eps, n_tok,
	         n_head, n_kv, hd, n_rot, d_inv, 1.0f, pos0, neox, n_ctx, il,
	         d_kc[0], d_vc[0], err, sizeof(err)) ||
	     cuda_op_qkv_norm_rope_store(
	         ctx, d_q[1], d_k[1], d_v, d_w, (float *)d_w + hd, 1, eps,
	         n_tok, n_head, n_kv, hd, n_rot, d_inv, 1.0f, pos0, neox, n_ctx,
	         il, d_kc[1], d_vc[1], err, sizeof(err)) ||
	     cuda_op_qkv_norm_rope_store(ctx, d_q[2], NULL, NULL, d_w, NULL, 0,
	                                 eps, n_tok, n_head, 0, hd, n_rot,
	                                 d_inv, 1.0f, pos0, neox, n_ctx, il,
	                                 NULL, NULL, err, sizeof(err));
	rc = rc || dev_get(ctx, a, d_q[0], sizeof(float) * nq) ||
	     dev_get(ctx, a + nq, d_k[0], sizeof(float) * nk) ||
	     dev_get(ctx, b, d_q[1], sizeof(float) * nq) ||
	     dev_get(ctx, b + nq, d_k[1], sizeof(float) * nk) ||
	     dev_get(ctx, ca, d_kc[0], 2 * cache) ||
	     dev_get(ctx, cb, d_kc[1], 2 * cache) ||
	     dev_get(ctx, cb + cache, d_vc[1], 2 * cache);
	bad = rc ? -1
	         : (memcmp(a, b, sizeof(float) * (nq + nk)) != 0) +
	               (memcmp(ca, cb, 2 * cache) != 0) * 2;
	for (int t = 0; !rc && t < n_tok; t++)
		for (int h = 0; h < n_kv; h++)
			for (int d = 0; d < hd; d++)
				vgot[((size_t)t * n_kv + h) * hd + d] =
				    f16_to_f32(
				        cb[cache +
				           (((size_t)il * n_kv + h) * n_ctx +
				            pos0 + t) *
				               hd +
				           d]);
	const double e = rc ? 1 : nmse(vgot, vref, nk);
	/* queries only: the same Q */
	rc = rc || dev_get(ctx, b, d_q[2], sizeof(float) * nq);
	bad += !rc && memcmp(a, b, sizeof(float) * nq) != 0 ? 4 : 0;
	tap_ok(!rc && bad == 0 && e <= TOL_F32,
	       "qkv_norm_rope_store %s n_rot %d head_dim %d heads %d/%d, %d "
	       "tokens at %d: Q, K, K cache = qk_norm_rope_kv_store's; V "
	       "normed nmse %.3g; queries only the same Q (%ld) %s",
	       neox ? "neox" : "norm", n_rot, hd, n_head, n_kv, n_tok, pos0, e,
	       bad, err);
	for (int j = 0; j < 2; j++) {
		cudaFree(d_k[j]);
		cudaFree(d_kc[j]);
		cudaFree(d_vc[j]);
	}
	for (int j = 0; j < 3; j++)
		cudaFree(d_q[j]);
	cudaFree(d_inv);
	cudaFree(d_v);
	cudaFree(d_w);
	void *host[] = {q, k, v, w, a, b, vref, vgot, ca, cb, inv};
	for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++)
		free(host[i]);
}

/* gelu_tanh(g) * u as backend_cpu.c computes it. */
static float host_gelu_mul(float g, float u)
{
	return 0.5f * g *
	       (1.0f + tanhf(0.79788456080286535587989211986876f * g *
	                     (1.0f + 0.044715f * g * g))) *
	       u;
}

/*
 * Gemma 4's element-wise ops against host loops of backend_cpu.c's
 * arithmetic: the router's input (rmsnorm / sqrt(n) * scale), the E
 * models' per-layer inputs (N tokens x L layers of P), the per-layer gate
 * over a strided slice, a layer's output scale, the final softcap and the
 * experts' output scales.
 */
static void test_gemma4_elem(struct cuda_ctx *ctx, int n, int T, int P, int L)
{
	const size_t nx = (size_t)T * n, np = (size_t)T * L * P;
	float *x = malloc(sizeof(float) * nx), *w = malloc(sizeof(float) * n);
	float *ref = malloc(sizeof(float) * (nx > np ? nx : np));
	float *got = malloc(sizeof(float) * (nx > np ? nx : np));
	float *p = malloc(sizeof(float) * np), *pe = malloc(sizeof(float) * np);
	float *pw = malloc(sizeof(float) * P);
	const float eps = 1e-6f, inv = 1.0f / sqrtf((float)n);
	char err[512] = "";
	void *d_x, *d_w, *d_o, *d_p, *d_pe, *d_pw;
	int rc;

	fill_unif(x, nx, -3.0f, 3.0f);
	fill_unif(w, n, 0.5f, 1.5f);
	fill_unif(p, np, -20.0f, 20.0f);
	fill_unif(pe, np, -1.0f, 1.0f);
	fill_unif(pw, P, 0.5f, 1.5f);
	d_x = dev_put(x, sizeof(float) * nx);
	d_w = dev_put(w, sizeof(float) * n);
	d_o = dev_put(NULL, sizeof(float) * (nx > np ? nx : np));
	d_p = dev_put(p, sizeof(float) * np);
	d_pe = dev_put(pe, sizeof(float) * np);
	d_pw = dev_put(pw, sizeof(float) * P);

	/* the router's input */
	for (int t = 0; t < T; t++) {
		const float sc = host_norm_scale(x + (size_t)t * n, n, eps);

		for (int i = 0; i < n; i++)
			ref[(size_t)t * n + i] =
			    x[(size_t)t * n + i] * sc * inv * w[i];
	}
	rc = cuda_op_rmsnorm_mul(ctx, d_x, d_w, n, T, eps, inv, d_o, err,
	                         sizeof(err)) ||
	     dev_get(ctx, got, d_o, sizeof(float) * nx);
	tap_ok(!rc && nmse(got, ref, nx) <= TOL_F32,
	       "rmsnorm_mul %d x %d (the router's input): nmse %.3g %s", T, n,
	       rc ? 1.0 : nmse(got, ref, nx), err);

	/* the per-layer inputs */
	for (size_t r = 0; r < (size_t)T * L; r++) {
		float *pr = ref + r * P;

		for (int i = 0; i < P; i++)
			pr[i] = p[r * P + i] * inv;
		const float sc = host_norm_scale(pr, P, eps);

		for (int i = 0; i < P; i++)
			pr[i] = (pr[i] * sc * pw[i] + pe[r * P + i]) *
			        (1.0f / sqrtf(2.0f));
	}
	rc = cuda_op_ple_inputs(ctx, (float *)d_p, d_pe, d_pw, P,
	                        (int64_t)T * L, eps, inv, 1.0f / sqrtf(2.0f),
	                        err, sizeof(err)) ||
	     dev_get(ctx, got, d_p, sizeof(float) * np);
	tap_ok(!rc && nmse(got, ref, np) <= TOL_F32,
	       "ple_inputs %d tokens x %d layers of %d: nmse %.3g %s", T, L, P,
	       rc ? 1.0 : nmse(got, ref, np), err);

	/* the per-layer gate: layer 1's slice of P (rows of L P) as up */
	for (int t = 0; t < T; t++)
		for (int i = 0; i < P; i++)
			ref[(size_t)t * P + i] =
			    host_gelu_mul(x[(size_t)t * P + i],
			                  pe[(size_t)t * L * P + P + i]);
	rc = cudaMemcpy(d_o, x, sizeof(float) * (size_t)T * P,
	                cudaMemcpyHostToDevice) != cudaSuccess ||
	     cuda_op_gate_act_rows(ctx, MODEL_ACT_GELU_TANH, d_o,
	                           (const float *)d_pe + P, P, T,
	                           (int64_t)L * P, err, sizeof(err)) ||
	     dev_get(ctx, got, d_o, sizeof(float) * (size_t)T * P);
	tap_ok(!rc && nmse(got, ref, (size_t)T * P) <= TOL_F32,
	       "gate_act_rows gelu %d x %d, up rows of %d: nmse %.3g %s", T, P,
	       L * P, rc ? 1.0 : nmse(got, ref, (size_t)T * P), err);

	/* the output scale and the softcap (30, on logits of +-100) */
	for (size_t i = 0; i < nx; i++)
		ref[i] = tanhf(x[i] * 33.0f * (1.0f / 30.0f)) * 30.0f;
	rc = cudaMemcpy(d_o, x, sizeof(float) * nx, cudaMemcpyHostToDevice) !=
	         cudaSuccess ||
	     cuda_op_scale(ctx, d_o, (int64_t)nx, 33.0f, err, sizeof(err)) ||
	     cuda_op_softcap(ctx, d_o, (int64_t)nx, 30.0f, err, sizeof(err)) ||
	     dev_get(ctx, got, d_o, sizeof(float) * nx);
	tap_ok(!rc && nmse(got, ref, nx) <= TOL_F32,
	       "scale then softcap of %zu: nmse %.3g %s", nx,
	       rc ? 1.0 : nmse(got, ref, nx), err);

	/* the experts' output scales: T slots of n, experts of 5 */
	{
		int32_t ids[64];
		float sc[5];
		void *d_ids, *d_sc;

		fill_unif(sc, 5, 0.5f, 1.5f);
		for (int t = 0; t < T && t < 64; t++)
			ids[t] = (t * 3 + 1) % 5;
		for (int t = 0; t < T; t++)
			for (int i = 0; i < n; i++)
				ref[(size_t)t * n + i] =
				    x[(size_t)t * n + i] * sc[ids[t]];
		d_ids = dev_put(ids, sizeof(ids));
		d_sc = dev_put(sc, sizeof(sc));
		rc = cudaMemcpy(d_o, x, sizeof(float) * nx,
		                cudaMemcpyHostToDevice) != cudaSuccess ||
		     cuda_op_moe_scale(ctx, d_o, d_sc, d_ids, T, n, err,
		                       sizeof(err)) ||
		     dev_get(ctx, got, d_o, sizeof(float) * nx);
		tap_ok(!rc && memcmp(got, ref, sizeof(float) * nx) == 0,
		       "moe_scale %d slots of %d: exact %s", T, n, err);
		cudaFree(d_ids);
		cudaFree(d_sc);
	}
	cudaFree(d_x);
	cudaFree(d_w);
	cudaFree(d_o);
	cudaFree(d_p);
	cudaFree(d_pe);
	cudaFree(d_pw);
	void *host[] = {x, w, ref, got, p, pe, pw};
	for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++)
		free(host[i]);
}

/*
 * cuda_op_matmul_qkv_rope against cuda_op_matmul_qkv then
 * cuda_op_rope_kv_store: Q, K, V and both caches bit for bit, and whether
 * the epilogue did the rotation and the store (FUSE expected: neighbouring
 * pairs and fast mat-vecs only). Weights of types TQ (Q and K) and TV
 * (V: a launch of its own when it differs) over NE0 inputs; biases when
 * BIAS; DPOS: as in a captured step (the position read from
 * ctx->d_pos, the argument 0), against the unfused ops at POS0.
 */
static void test_qkv_rope(struct cuda_ctx *ctx, uint32_t tq, uint32_t tv,
                          int64_t ne0, int n_head, int n_kv, int hd, int n_rot,
                          int neox, int n_tok, int pos0, int bias, int dpos,
                          int fuse)
{
	const int n_layer = 2, il = 1, n_ctx = pos0 + n_tok + 5;
	const int64_t nq = (int64_t)n_head * hd, nk = (int64_t)n_kv * hd;
	const size_t ny = (size_t)n_tok * (size_t)(nq + 2 * nk);
	const size_t cache = (size_t)n_layer * n_kv * n_ctx * hd;
	float *x = malloc(sizeof(float) * (size_t)(n_tok * ne0));
	float *bs = malloc(sizeof(float) * (size_t)(nq + 2 * nk));
	float *wf[3], *a = malloc(sizeof(float) * ny);
	float *b = malloc(sizeof(float) * ny);
	uint16_t *ca = malloc(4 * cache), *cb = malloc(4 * cache);
	double *inv = malloc(sizeof(double) * (size_t)(hd / 2 + 1));
	/* 0: the unfused ops; 1: the fused op without a table (it must fall
	   back to them); 2: with cuda_op_rope_table's table (the epilogue
	   where FUSE says) */
	void *d_w[3], *d_x, *d_b, *d_inv, *d_y[3], *d_kc[3], *d_vc[3], *d_cs;
	void *d_p = NULL;
	struct cuda_tensor w[3];
	char err[512] = "";
	int rc = 0, fused[3] = {-1, -1, -1};
	long bad = 0;

	w[0] = fused_weight(tq, ne0, nq, &d_w[0], &wf[0]);
	w[1] = fused_weight(tq, ne0, nk, &d_w[1], &wf[1]);
	w[2] = fused_weight(tv, ne0, nk, &d_w[2], &wf[2]);
	for (int i = 0; i < n_rot / 2; i++)
		inv[i] = pow(10000.0, -2.0 * i / n_rot);
	fill_unif(x, (size_t)(n_tok * ne0), -1.0f, 1.0f);
	fill_unif(bs, (size_t)(nq + 2 * nk), -0.5f, 0.5f);
	d_x = dev_put(x, sizeof(float) * (size_t)(n_tok * ne0));
	d_b = dev_put(bs, sizeof(float) * (size_t)(nq + 2 * nk));
	d_inv = dev_put(inv, sizeof(double) * (size_t)(hd / 2 + 1));
	d_p = dev_put(&pos0, sizeof(pos0));
	d_cs = dev_put(NULL, sizeof(float) * (size_t)n_ctx * (size_t)n_rot);
	rc = cuda_op_rope_table(ctx, (const double *)d_inv, 1.0f, n_rot, n_ctx,
	                        (float *)d_cs, err, sizeof(err));
	for (int j = 0; j < 3; j++) {
		d_y[j] = dev_put(NULL, sizeof(float) * ny);
		rc = rc || zeroed_caches(2 * cache, &d_kc[j], &d_vc[j]);
	}
	rc = rc || cudaDeviceSynchronize() != cudaSuccess;
	for (int j = 0; !rc && j < 3; j++) {
		float *q = (float *)d_y[j], *k = q + n_tok * nq,
		      *v = k + n_tok * nk, *bb = (float *)d_b;
		const float *bq = bias ? bb : NULL, *bk = bias ? bb + nq : NULL,
		            *bv = bias ? bb + nq + nk : NULL;
		struct cuda_rope_kv rk = {n_head,
		                          n_kv,
		                          hd,
		                          n_rot,
		                          (const double *)d_inv,
		                          1.0f,
		                          pos0,
		                          neox,
		                          n_ctx,
		                          il,
		                          (uint16_t *)d_kc[j],
		                          (uint16_t *)d_vc[j],
		                          j == 2 ? (const float *)d_cs : NULL};

		if (j == 0) {
			rc = cuda_op_matmul_qkv(ctx, &w[0], &w[1], &w[2], bq,
			                        bk, bv, d_x, NULL, n_tok, q, k,
			                        v, err, sizeof(err)) ||
			     cuda_op_rope_kv_store(
			         ctx, q, k, v, n_tok, n_head, n_kv, hd, n_rot,
			         (const double *)d_inv, 1.0f, pos0, neox, n_ctx,
			         il, (uint16_t *)d_kc[0], (uint16_t *)d_vc[0],
			         err, sizeof(err));
			continue;
		}
		if (dpos) { /* a captured step's position */
			ctx->d_pos = (const int32_t *)d_p;
			rk.pos0 = 0;
		}
		rc = cuda_op_matmul_qkv_rope(ctx, &w[0], &w[1], &w[2], bq, bk,
		                             bv, d_x, NULL, n_tok, q, k, v, &rk,
		                             &fused[j], err, sizeof(err));
		ctx->d_pos = NULL;
	}
	rc = rc || dev_get(ctx, a, d_y[0], sizeof(float) * ny) ||
	     dev_get(ctx, ca, d_kc[0], 2 * cache) ||
	     dev_get(ctx, ca + cache, d_vc[0], 2 * cache);
	for (int j = 1; j < 3; j++) { /* each against the unfused ops */
		rc = rc || dev_get(ctx, b, d_y[j], sizeof(float) * ny) ||
		     dev_get(ctx, cb, d_kc[j], 2 * cache) ||
		     dev_get(ctx, cb + cache, d_vc[j], 2 * cache);
		bad += rc ? 0
		          : (memcmp(a, b, sizeof(float) * ny) != 0) +
		                (memcmp(ca, cb, 4 * cache) != 0) * 2;
	}
	tap_ok(!rc && bad == 0 && fused[1] == 0 && fused[2] == fuse,
	       "qkv_rope %s/%s %s n_rot %d head_dim %d heads %d/%d, %d tokens "
	       "at %d%s%s: same as qkv + rope_kv_store without and with the "
	       "table (%ld), in the epilogue %d %d (expected 0 %d) %s",
	       qtype_name(tq), qtype_name(tv), neox ? "neox" : "norm", n_rot,
	       hd, n_head, n_kv, n_tok, pos0, bias ? ", biases" : "",
	       dpos ? ", device position" : "", bad, fused[1], fused[2], fuse,
	       err);
	for (int j = 0; j < 3; j++) {
		cudaFree(d_y[j]);
		cudaFree(d_kc[j]);
		cudaFree(d_vc[j]);
	}
	void *dev[] = {d_w[0], d_w[1], d_w[2], d_x, d_b, d_inv, d_p, d_cs};
	for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
		cudaFree(dev[i]);
	void *host[] = {x, bs, wf[0], wf[1], wf[2], a, b, ca, cb, inv};
	for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++)
		free(host[i]);
}

/* REF = causal GQA attention in double of N_TOK queries Q (at positions
 * POS0..) over K and V (rows of KVD floats, GROUP query heads a KV head,
 * the last WINDOW positions, 0: all), scaled by 1 / sqrt(HD); ATT:
 * pos0 + n_tok doubles of scratch. */
static void attn_ref(const float *q, const float *k, const float *v, int n_tok,
                     int n_head, int group, int hd, int kvd, int pos0,
                     int32_t window, double *att, float *ref)
{
	for (int t = 0; t < n_tok; t++)
		for (int h = 0; h < n_head; h++) {
			const float *qv = q + ((size_t)t * n_head + h) * hd;
			float *o = ref + ((size_t)t * n_head + h) * hd;
			const int kvh = h / group, pos = pos0 + t;
			const int lo =
			    window > 0 && pos >= window ? pos - window + 1 : 0;
			double mx = -INFINITY, sum = 0;

			for (int i = lo; i <= pos; i++) {
				double d = 0;

				for (int e = 0; e < hd; e++)
					d += (double)qv[e] *
					     k[(size_t)i * kvd + kvh * hd + e];
				att[i] = d / sqrt((double)hd);
				mx = att[i] > mx ? att[i] : mx;
			}
			for (int i = lo; i <= pos; i++)
				sum += att[i] = exp(att[i] - mx);
			for (int e = 0; e < hd; e++) {
				double acc = 0;

				for (int i = lo; i <= pos; i++)
					acc +=
					    att[i] *
					    v[(size_t)i * kvd + kvh * hd + e];
				o[e] = (float)(acc / sum);
			}
		}
}

/* KV store layout and causal GQA attention over N_TOK queries at POS0. */
/* POS_CAP > 0: as in a captured decode step (cuda_ctx.d_pos: the
   position read from the device, the launch shaped for POS_CAP
   positions, the scratch the decode graphs' own); RC_OUT (may be NULL):
   the attention call's result, ERR_OUT its message. */
static void test_attention_at(struct cuda_ctx *ctx, int n_head, int n_kv,
                              int hd, int n_tok, int pos0, int32_t pos_cap,
                              int *rc_out, char *err_out, size_t err_len,
                              int32_t window)
{
	const int n_layer = 2, il = 1, n_pos = pos0 + n_tok;
	const int n_ctx = n_pos + 3 > 600 ? n_pos + 3 : 600;
	const int kvd = n_kv * hd, group = n_head / n_kv;
	size_t cache = (size_t)n_layer * n_kv * n_ctx * hd;
	float *k = malloc(sizeof(float) * (size_t)n_pos * kvd);
	float *v = malloc(sizeof(float) * (size_t)n_pos * kvd);
	float *q = malloc(sizeof(float) * (size_t)n_tok * n_head * hd);
	float *ref = malloc(sizeof(float) * (size_t)n_tok * n_head * hd);
	float *got = malloc(sizeof(float) * (size_t)n_tok * n_head * hd);
	uint16_t *kc = malloc(2 * cache);
	double *att = malloc(sizeof(double) * (size_t)n_pos);
	char err[512] = "";
	void *d_k, *d_v, *d_q, *d_o, *d_kc, *d_vc;
	long bad = 0;
	int rc;

	fill_unif(k, (size_t)n_pos * kvd, -2.0f, 2.0f);
	fill_unif(v, (size_t)n_pos * kvd, -2.0f, 2.0f);
	fill_unif(q, (size_t)n_tok * n_head * hd, -2.0f, 2.0f);
	for (size_t i = 0; i < (size_t)n_pos * kvd; i++) { /* fp16-exact */
		k[i] = f16_to_f32(f32_to_f16(k[i]));
		v[i] = f16_to_f32(f32_to_f16(v[i]));
	}
	attn_ref(q, k, v, n_tok, n_head, group, hd, kvd, pos0, window, att,
	         ref);
	d_k = dev_put(k, sizeof(float) * (size_t)n_pos * kvd);
	d_v = dev_put(v, sizeof(float) * (size_t)n_pos * kvd);
	d_q = dev_put(q, sizeof(float) * (size_t)n_tok * n_head * hd);
	d_o = dev_put(NULL, sizeof(float) * (size_t)n_tok * n_head * hd);
	d_kc = dev_put(NULL, 2 * cache);
	d_vc = dev_put(NULL, 2 * cache);
	rc = cuda_op_kv_store(ctx, d_k, d_v, n_pos, n_kv, hd, n_ctx, il, 0,
	                      d_kc, d_vc, err, sizeof(err));
	rc = rc || dev_get(ctx, kc, d_kc, 2 * cache);
	for (int i = 0; !rc && i < n_pos; i++)
		for (int h = 0; h < n_kv; h++)
			for (int e = 0; e < hd; e++)
				bad +=
				    kc[(((size_t)il * n_kv + h) * n_ctx + i) *
				           hd +
				       e] !=
				    f32_to_f16(k[(size_t)i * kvd + h * hd + e]);
	tap_ok(!rc && bad == 0,
	       "kv_store layout [layer][kv_head][pos][dim], %d positions "
	       "(%ld wrong) %s",
	       n_pos, bad, err);
	/* a sliding window: the rows more than 64 before the first query's
	   window are NaN, as a window's ring does not hold them
	   (backend_cuda.cu: its margin is 64 rows): no kernel may read one
	   (a masked NaN still poisons a sum: NaN x 0) */
	const int32_t cut = window > 0 ? pos0 - window + 1 - 64 : 0;

	for (int h = 0; !rc && cut > 0 && h < n_kv; h++) {
		const size_t at = ((size_t)il * n_kv + h) * n_ctx * hd * 2;

		rc = cudaMemset((char *)d_kc + at, 0xFF,
		                (size_t)cut * hd * 2) != cudaSuccess ||
		     cudaMemset((char *)d_vc + at, 0xFF,
		                (size_t)cut * hd * 2) != cudaSuccess;
	}
	const void *xq = NULL;
	void *d_pos = pos_cap > 0 ? dev_put(&pos0, sizeof(int32_t)) : NULL;

	ctx->d_pos = (const int32_t *)d_pos;
	ctx->pos_cap = pos_cap;
	if (!rc) {
		/* the scale of model.c's descriptors (model_attn_params) */
		const struct cuda_attn_params par = {
		    1.0f / sqrtf((float)hd), window, 0.0f, NULL, 0, 0};

		rc = cuda_op_attention(ctx, d_q, d_kc, d_vc, n_tok, n_head,
		                       n_kv, hd, n_ctx, il, pos0, &par, d_o,
		                       &xq, err, sizeof(err));
		if (rc_out != NULL) {
			*rc_out = rc;
			snprintf(err_out, err_len, "%s", err);
		}
	}
	ctx->d_pos = NULL;
	ctx->pos_cap = 0;
	cudaFree(d_pos);
	rc = rc || dev_get(ctx, got, d_o,
	                   sizeof(float) * (size_t)n_tok * n_head * hd);
	double e = rc ? 1 : nmse(got, ref, (size_t)n_tok * n_head * hd);
	if (rc_out == NULL || *rc_out == 0)
		tap_ok(
		    !rc && e <= TOL_F32,
		    "attention heads %d/%d head_dim %d, %d queries at %d%s%s: "
		    "nmse %.3g %s",
		    n_head, n_kv, hd, n_tok, pos0,
		    pos_cap > 0 ? " (captured step)" : "",
		    window > 0 ? " (sliding window)" : "", e, err);
	/* the split path's merge also quantizes its output for the wo
	   mat-vec: exactly what cuda_op_quantize_x8 makes of that output */
	if (!rc && xq != NULL) {
		const int64_t ne0 = (int64_t)n_head * hd;
		const size_t nb = cuda_x8_stride(ne0) * (size_t)n_tok;
		unsigned char *qa = malloc(nb), *qb = malloc(nb);
		void *d_q2 = dev_put(NULL, nb);

		rc = dev_get(ctx, qa, xq, nb) ||
		     cuda_op_quantize_x8(ctx, (const float *)d_o, n_tok, ne0,
		                         d_q2, err, sizeof(err)) ||
		     dev_get(ctx, qb, d_q2, nb);
		tap_ok(!rc && memcmp(qa, qb, nb) == 0,
		       "attention %d/%d/%d, %d queries: the merge's int8 "
		       "output = quantize_x8 of it, bit for bit %s",
		       n_head, n_kv, hd, n_tok, err);
		cudaFree(d_q2);
		free(qa);
		free(qb);
	}
	cudaFree(d_k);
	cudaFree(d_v);
	cudaFree(d_q);
	cudaFree(d_o);
	cudaFree(d_kc);
	cudaFree(d_vc);
	free(k);
	free(v);
	free(q);
	free(ref);
	free(got);
	free(kc);
	free(att);
}

static void test_attention(struct cuda_ctx *ctx, int n_head, int n_kv, int hd,
                           int n_tok, int pos0)
{
	test_attention_at(ctx, n_head, n_kv, hd, n_tok, pos0, 0, NULL, NULL, 0,
	                  0);
}

/* test_attention with a sliding window of WINDOW positions (model.h's
 * MODEL_ATTN_SLIDING): each path (tiled, split, one warp) masks what lies
 * before it, including whole tiles and chunks. */
static void test_attention_window(struct cuda_ctx *ctx, int n_head, int n_kv,
                                  int hd, int n_tok, int pos0, int32_t window)
{
	test_attention_at(ctx, n_head, n_kv, hd, n_tok, pos0, 0, NULL, NULL, 0,
	                  window);
}

/*
 * The decode graphs' attention scratch (cuda_op_attention_graph_reserve):
 * a captured step uses it, never the scratch the other attention calls
 * grow (cudaFree'd when it grows: a graph holding it wrote into freed
 * memory, found by compute-sanitizer after a prompt longer than the
 * graph's capture). Reserved once for every pos_cap up to n_ctx, it stays
 * where it is while the other scratch grows; a captured step at every
 * bucket's pos_cap computes the attention; one past the reserve is an
 * error, not an allocation (a capture must not allocate).
 */
static void test_attention_graph_scratch(void)
{
	const int n_head = 8, n_kv = 2, hd = 64, n_ctx = 3000, step = 1024;
	char err[512] = "", err2[512] = "";
	struct cuda_ctx c, *ctx = &c;
	int rc;

	if (cuda_ctx_init(ctx, 100000, 512 * 4096, err, sizeof(err)) != 0) {
		tap_ok(0, "graph scratch: a second context: %s", err);
		return;
	}
	/* a short prompt first: the other scratch exists, small */
	test_attention(ctx, n_head, n_kv, hd, 1, 100);
	rc = cuda_op_attention_graph_reserve(ctx, n_head, n_kv, hd, n_ctx, step,
	                                     err, sizeof(err));
	void *at = ctx->d_attn_graph;
	size_t cap = ctx->attn_graph_cap, eager_cap = ctx->attn_cap;

	tap_ok(rc == 0 && at != NULL && cap > 0,
	       "graph scratch: reserved for %d positions (%zu floats) %s",
	       n_ctx, cap, err);
	/* captured steps at the pos_cap of each graph (1024, 2048, n_ctx) */
	test_attention_at(ctx, n_head, n_kv, hd, 1, 1000, 1024, NULL, NULL, 0,
	                  0);
	test_attention_at(ctx, n_head, n_kv, hd, 1, 2000, 2048, NULL, NULL, 0,
	                  0);
	test_attention_at(ctx, n_head, n_kv, hd, 1, 2990, n_ctx, NULL, NULL, 0,
	                  0);
	/* a captured step with a window: chunks before it still merge */
	test_attention_at(ctx, n_head, n_kv, hd, 1, 2500, n_ctx, NULL, NULL, 0,
	                  100);
	/* a long prompt grows the other scratch */
	test_attention(ctx, n_head, n_kv, hd, 7, 2900);
	tap_ok(ctx->attn_cap > eager_cap && ctx->d_attn_graph == at &&
	           ctx->attn_graph_cap == cap,
	       "graph scratch: the other scratch grew (%zu -> %zu floats), "
	       "the graphs' stayed",
	       eager_cap, ctx->attn_cap);
	rc = cuda_op_attention_graph_reserve(ctx, n_head, n_kv, hd, 4 * n_ctx,
	                                     step, err, sizeof(err));
	tap_ok(rc != 0 && ctx->d_attn_graph == at,
	       "graph scratch: a second, larger reserve is refused: %s", err);
	rc = 0;
	test_attention_at(ctx, n_head, n_kv, hd, 1, 3000, 4 * n_ctx, &rc, err2,
	                  sizeof(err2), 0);
	tap_ok(rc != 0 && strstr(err2, "graph") != NULL,
	       "graph scratch: a captured step past the reserve fails: %s",
	       err2);
	cuda_ctx_free(ctx);
}

/* The decode graphs' scratch for heads of 512 beside heads of 256 (a
 * Gemma 4 model): cuda_op_attention_graph_floats says which needs more,
 * that one is reserved, the other fits, and captured steps of both
 * compute the attention (the split kernel's shared memory allowed at the
 * reserve, before any capture). */
static void test_attention_graph_512(void)
{
	const int n_ctx = 3000, step = 1024;
	char err[512] = "";
	struct cuda_ctx c, *ctx = &c;
	size_t f512, f256;
	int rc;

	if (cuda_ctx_init(ctx, 100000, 512 * 4096, err, sizeof(err)) != 0) {
		tap_ok(0, "graph scratch 512: a second context: %s", err);
		return;
	}
	f512 = cuda_op_attention_graph_floats(ctx, 8, 1, 512, n_ctx, step);
	f256 = cuda_op_attention_graph_floats(ctx, 16, 8, 256, n_ctx, step);
	rc = cuda_op_attention_graph_reserve(
	         ctx, f512 >= f256 ? 8 : 16, f512 >= f256 ? 1 : 8,
	         f512 >= f256 ? 512 : 256, n_ctx, step, err, sizeof(err)) ||
	     cuda_op_attention_graph_reserve(
	         ctx, f512 >= f256 ? 16 : 8, f512 >= f256 ? 8 : 1,
	         f512 >= f256 ? 256 : 512, n_ctx, step, err, sizeof(err));
	tap_ok(rc == 0 && ctx->attn_graph_cap == (f512 > f256 ? f512 : f256),
	       "graph scratch: heads of 512 (%zu floats) and 256 (%zu) "
	       "reserved once, for the larger %s",
	       f512, f256, err);
	test_attention_at(ctx, 8, 1, 512, 1, 2000, 2048, NULL, NULL, 0, 0);
	test_attention_at(ctx, 16, 8, 256, 1, 2990, n_ctx, NULL, NULL, 0, 0);
	test_attention_at(ctx, 8, 1, 512, 1, 2990, n_ctx, NULL, NULL, 0, 512);
	cuda_ctx_free(ctx);
}

/* Y (host) = the product of CT over N_TOK tokens of D_X (FORCE as
 * cuda_op_matmul), or -1. */
static int repack_product(struct cuda_ctx *ctx, const struct cuda_tensor *ct,
                          const void *d_x, int n_tok, int force, void *d_y,
                          float *y, char *err, size_t errlen)
{
	if (cuda_op_matmul(ctx, ct, d_x, n_tok, d_y, force, err, errlen) != 0)
		return -1;
	return dev_get(ctx, y, d_y, sizeof(float) * (size_t)n_tok * ct->ne1);
}

/*
 * The GPU layout of type T (cuda_op_repack, cuda_quant.cuh note 5) of a
 * random NE0 x NE1 tensor against the file's layout on the device: rows
 * padded to 16 bytes with zeros; embedding rows, the mat-vec with int8
 * activations (1 and 3 tokens; its 16-byte loads), the fused QKV and
 * SwiGLU launches and the GEMM give the same floats bit for bit; with
 * fp32 activations (no unit for the layout: the element-wise mat-vec)
 * the product is within the usual tolerance of the double reference.
 */
static void test_repack(struct cuda_ctx *ctx, uint32_t t, int64_t ne0,
                        int64_t ne1)
{
	const uint32_t rt = cuda_repack_type(t);
	const size_t rs = quant_row_size(t, ne0);
	const size_t rrs = cuda_repack_row_size(rt, ne0);
	const int64_t nx = 9 * ne0;
	/* outputs: 9 tokens of products, or every row of the embedding */
	const size_t ny = (size_t)(9 * ne1 > ne0 * ne1 ? 9 * ne1 : ne0 * ne1);
	unsigned char *w = malloc(rs * (size_t)ne1);
	unsigned char *h = malloc(rrs * (size_t)ne1);
	float *x = malloc(sizeof(float) * (size_t)nx);
	float *a = malloc(sizeof(float) * ny);
	float *b = malloc(sizeof(float) * ny);
	int32_t *rows = malloc(sizeof(int32_t) * (size_t)ne1);
	struct cuda_tensor cf = {t, ne0, ne1, rs, NULL, 1}, cr = cf;
	void *d_w = NULL, *d_r = NULL, *d_x, *d_y, *d_rows;
	char err[512] = "";
	int rc, pad_ok = 1, same[5] = {0, 0, 0, 0, 0};
	double e = 1;

	random_rows(t, w, ne0, ne1);
	fill_unif(x, (size_t)nx, -1.0f, 1.0f);
	for (int64_t r = 0; r < ne1; r++)
		rows[r] = (int32_t)((r * 5 + 3) % ne1);
	d_w = dev_put(w, rs * (size_t)ne1);
	d_r = dev_put(NULL, rrs * (size_t)ne1);
	d_x = dev_put(x, sizeof(float) * (size_t)nx);
	d_y = dev_put(NULL, sizeof(float) * ny);
	d_rows = dev_put(rows, sizeof(int32_t) * (size_t)ne1);
	cf.d = d_w;
	cr.type = rt;
	cr.row_size = rrs;
	cr.d = d_r;
	rc = rt == t || rrs % 16 != 0 || rrs < rs ||
	     cudaMemset(d_r, 0x5a, rrs * (size_t)ne1) != cudaSuccess ||
	     cudaDeviceSynchronize() != cudaSuccess ||
	     cuda_op_repack(ctx, t, ne0, ne1, d_w, d_r, err, sizeof(err)) ||
	     dev_get(ctx, h, d_r, rrs * (size_t)ne1);
	/* the padding: zeros, and the blocks' bytes all there */
	for (int64_t r = 0; !rc && r < ne1; r++) {
		size_t used = rs; /* bytes of blocks in a row, any layout */

		for (size_t i = used; i < rrs; i++)
			pad_ok &= h[(size_t)r * rrs + i] == 0;
	}
	/* 0: embedding rows; 1, 2: mat-vec (int8), 1 and 3 tokens; 3: GEMM
	   of 9 tokens; 4: QKV + SwiGLU fused launches */
	for (int k = 0; !rc && k < 4; k++) {
		const int n = k == 2 ? 3 : k == 3 ? 9 : 1;
		const size_t bytes =
		    sizeof(float) * (size_t)ne1 * (size_t)(k == 0 ? ne0 : n);

		if (k == 0)
			rc = cuda_op_get_rows(ctx, &cf, d_rows, (int32_t)ne1,
			                      1.0f, d_y, err, sizeof(err)) ||
			     dev_get(ctx, a, d_y, bytes) ||
			     cuda_op_get_rows(ctx, &cr, d_rows, (int32_t)ne1,
			                      1.0f, d_y, err, sizeof(err)) ||
			     dev_get(ctx, b, d_y, bytes);
		else
			rc = repack_product(ctx, &cf, d_x, n, k == 3 ? 2 : 1,
			                    d_y, a, err, sizeof(err)) ||
			     repack_product(ctx, &cr, d_x, n, k == 3 ? 2 : 1,
			                    d_y, b, err, sizeof(err));
		same[k] = !rc && memcmp(a, b, bytes) == 0;
	}
	if (!rc) { /* the quantized GEMM, 9 tokens, with GEMM's same[3]:
		      Q4_K's layouts decode with the same arithmetic, bit
		      for bit; the others' file layouts take cq_dec8's
		      float decoding (cuda_qgemm.cu note 5): within the fp16
		      paths' tolerance of each other */
		rc = repack_product(ctx, &cf, d_x, 9, 3, d_y, a, err,
		                    sizeof(err)) ||
		     repack_product(ctx, &cr, d_x, 9, 3, d_y, b, err,
		                    sizeof(err));
		same[3] =
		    same[3] && !rc &&
		    (t == QTYPE_Q4_K
		         ? memcmp(a, b, sizeof(float) * 9 * (size_t)ne1) == 0
		         : nmse(b, a, 9 * (size_t)ne1) <= TOL_F16);
	}
	if (!rc) { /* Q, K, V = the tensor thrice; gate = up = it */
		float *y = (float *)d_y;

		rc = cuda_op_matmul_qkv(ctx, &cf, &cf, &cf, NULL, NULL, NULL,
		                        d_x, NULL, 1, y, y + ne1, y + 2 * ne1,
		                        err, sizeof(err)) ||
		     dev_get(ctx, a, d_y, sizeof(float) * 3 * ne1) ||
		     cuda_op_matmul_qkv(ctx, &cr, &cr, &cr, NULL, NULL, NULL,
		                        d_x, NULL, 1, y, y + ne1, y + 2 * ne1,
		                        err, sizeof(err)) ||
		     dev_get(ctx, b, d_y, sizeof(float) * 3 * ne1);
		same[4] = !rc && memcmp(a, b, sizeof(float) * 3 * ne1) == 0;
		rc = rc ||
		     cuda_op_matmul_gated(ctx, MODEL_ACT_SILU, &cf, &cf, d_x,
		                          NULL, 1, y, NULL, err, sizeof(err)) ||
		     dev_get(ctx, a, d_y, sizeof(float) * ne1) ||
		     cuda_op_matmul_gated(ctx, MODEL_ACT_SILU, &cr, &cr, d_x,
		                          NULL, 1, y, NULL, err, sizeof(err)) ||
		     dev_get(ctx, b, d_y, sizeof(float) * ne1);
		same[4] =
		    same[4] && !rc && memcmp(a, b, sizeof(float) * ne1) == 0;
	}
	if (!rc) { /* fp32 activations: the element-wise mat-vec */
		float *wf = malloc(sizeof(float) * (size_t)(ne0 * ne1));
		float *ref = malloc(sizeof(float) * (size_t)ne1);

		for (int64_t r = 0; r < ne1; r++) {
			double s = 0;

			quant_dequant_row(t, w + (size_t)r * rs, wf + r * ne0,
			                  ne0);
			for (int64_t i = 0; i < ne0; i++)
				s += (double)wf[r * ne0 + i] * x[i];
			ref[r] = (float)s;
		}
		ctx->x8_off = 1;
		rc = repack_product(ctx, &cr, d_x, 1, 1, d_y, b, err,
		                    sizeof(err));
		ctx->x8_off = 0;
		e = rc ? 1 : nmse(b, ref, (size_t)ne1);
		free(wf);
		free(ref);
	}
	tap_ok(!rc && pad_ok && same[0] && same[1] && same[2] && same[3] &&
	           same[4] && e <= TOL_F32,
	       "%s in its GPU layout, %lldx%lld (rows %zu -> %zu bytes): "
	       "padding zero (%d), embedding rows %s, mat-vec 1 token %s, "
	       "3 tokens %s, GEMMs (cuBLAS, quantized) %s, fused QKV + "
	       "SwiGLU %s (bit for bit); "
	       "fp32 activations nmse %.3g %s",
	       qtype_name(t), (long long)ne0, (long long)ne1, rs, rrs, pad_ok,
	       same[0] ? "same" : "differ", same[1] ? "same" : "differ",
	       same[2] ? "same" : "differ", same[3] ? "same" : "differ",
	       same[4] ? "same" : "differ", e, err);
	void *dev[] = {d_w, d_r, d_x, d_y, d_rows};
	for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
		cudaFree(dev[i]);
	void *host[] = {w, h, x, a, b, rows};
	for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++)
		free(host[i]);
}

/*
 * cuda_op_matmul_add_copy: Y after the product bit for bit as
 * cuda_op_matmul_add leaves it, and the copy equal to it; refused (-1,
 * Y untouched) where the fast mat-vec does not apply. cuda_op_stats_rows:
 * each row's statistics as cuda_op_stats gives them, bit for bit.
 */
static void test_add_copy(struct cuda_ctx *ctx, uint32_t t, int64_t ne0,
                          int n_tok)
{
	const int64_t ne1 = 77;
	const size_t ny = (size_t)n_tok * ne1;
	float *wf, *x = malloc(sizeof(float) * (size_t)n_tok * ne0);
	float *y0 = malloc(sizeof(float) * ny),
	      *ya = malloc(sizeof(float) * ny);
	float *yb = malloc(sizeof(float) * ny),
	      *yc = malloc(sizeof(float) * ny);
	float sa[4 * 8], sb[4 * 8];
	void *dw, *d_x, *d_y, *d_c, *d_s;
	struct cuda_tensor cw = fused_weight(t, ne0, ne1, &dw, &wf);
	const int ok = cuda_op_matmul_add_copy_ok(ctx, &cw, NULL, n_tok);
	char err[512] = "";
	int rc, same = 0, same_stats = 1;

	fill_unif(x, (size_t)n_tok * ne0, -1.0f, 1.0f);
	fill_unif(y0, ny, -1.0f, 1.0f);
	d_x = dev_put(x, sizeof(float) * (size_t)n_tok * ne0);
	d_y = dev_put(y0, sizeof(float) * ny);
	d_c = dev_put(NULL, sizeof(float) * ny);
	d_s = dev_put(NULL, sizeof(sa));
	rc = cuda_op_matmul_add(ctx, &cw, d_x, NULL, n_tok, d_y, 0, err,
	                        sizeof(err)) ||
	     dev_get(ctx, ya, d_y, sizeof(float) * ny) ||
	     cudaMemcpy(d_y, y0, sizeof(float) * ny, cudaMemcpyHostToDevice) !=
	         cudaSuccess ||
	     cudaDeviceSynchronize() != cudaSuccess;
	if (!rc && ok) {
		rc = cuda_op_matmul_add_copy(ctx, &cw, d_x, NULL, n_tok, d_y,
		                             d_c, err, sizeof(err)) ||
		     dev_get(ctx, yb, d_y, sizeof(float) * ny) ||
		     dev_get(ctx, yc, d_c, sizeof(float) * ny);
		same = !rc && memcmp(ya, yb, sizeof(float) * ny) == 0 &&
		       memcmp(yb, yc, sizeof(float) * ny) == 0;
	} else if (!rc) { /* refused, and nothing written */
		same = cuda_op_matmul_add_copy(ctx, &cw, d_x, NULL, n_tok, d_y,
		                               d_c, err, sizeof(err)) != 0 &&
		       !dev_get(ctx, yb, d_y, sizeof(float) * ny) &&
		       memcmp(y0, yb, sizeof(float) * ny) == 0;
	}
	tap_ok(!rc && same, "matmul_add_copy %s x%lld, %d tokens: %s %s",
	       qtype_name(t), (long long)ne0, n_tok,
	       ok ? "Y = matmul_add's, the copy = Y (bit for bit)"
	          : "refused off the fast mat-vec, Y untouched",
	       err);
	/* the statistics of each token's row, one launch and one by one */
	if (n_tok <= 8 && !rc) {
		rc = cuda_op_stats_rows(ctx, d_y, (int32_t)ne1, n_tok, d_s, err,
		                        sizeof(err)) ||
		     dev_get(ctx, sa, d_s, sizeof(float) * 4 * n_tok);
		for (int r = 0; !rc && r < n_tok; r++)
			rc = cuda_op_stats(ctx, (const float *)d_y + r * ne1,
			                   (int32_t)ne1, (float *)d_s + 4 * r,
			                   err, sizeof(err));
		rc = rc || dev_get(ctx, sb, d_s, sizeof(float) * 4 * n_tok);
		same_stats =
		    !rc && memcmp(sa, sb, sizeof(float) * 4 * n_tok) == 0;
		tap_ok(same_stats,
		       "stats_rows of %d rows of %lld = stats of each %s",
		       n_tok, (long long)ne1, err);
	}
	void *dev[] = {dw, d_x, d_y, d_c, d_s};
	for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
		cudaFree(dev[i]);
	void *host[] = {wf, x, y0, ya, yb, yc};
	for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++)
		free(host[i]);
}

/*
 * The recurrent layers of Qwen3.5 (cuda_ssm.cu) against double loops of
 * backend_cpu_ssm.c's recipe. Measure: the worst absolute error over the
 * worst reference magnitude (REL below), printed. Bounds: the element-wise
 * ops round a handful of times (a few ulp: 2e-6); the conv sums at most 8
 * products in fp32 (8 x 2^-24 of the terms' magnitude, and silu's few ulp:
 * 1e-5); the delta rule's dots are fp32 sums of S <= 256 products (at
 * worst S x 2^-24 = 1.5e-5 of the terms' magnitude, typically sqrt(S)
 * times less), and the state carries each token's rounding to the next,
 * damped by the decay and by the contraction I - beta k k^T (|k| = 1,
 * beta < 1), so errors do not grow with the tokens: 1e-4 bounds both
 * paths (the chunked one adds the inverse of a unit triangular matrix of
 * such dots), and the two against each other.
 */
#define TOL_SSM_ELEM 2e-6
#define TOL_SSM_CONV 1e-5
#define TOL_SSM_GDN  1e-4

/* max |g - r| / max |r| over N values. */
static double rel_err(const float *g, const double *r, size_t n)
{
	double num = 0, den = 0;

	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)g[i] - r[i]);

		if (!(d <= num)) /* a NaN counts as the worst */
			num = d != d ? INFINITY : d;
		if (fabs(r[i]) > den)
			den = fabs(r[i]);
	}
	return den > 0 ? num / den : num;
}

/* rel_err of G against the floats F. */
static double rel_err_f(const float *g, const float *f, size_t n)
{
	double *r = malloc(sizeof(double) * n);
	double e;

	for (size_t i = 0; i < n; i++)
		r[i] = f[i];
	e = rel_err(g, r, n);
	free(r);
	return e;
}

/*
 * cuda_op_ssm_conv of C channels, K taps, N tokens (input rows of C + 5
 * floats: a stride wider than the channels) from a random state: the
 * outputs against a double loop, the new state = the last K - 1 inputs
 * exactly; then the same tokens in calls of 1, 2, .. tokens (fewer than
 * K - 1 first: the new state partly from the old) give the same bits,
 * outputs and state.
 */
static void test_ssm_conv(struct cuda_ctx *ctx, int32_t C, int32_t K, int32_t n)
{
	const int64_t ldx = C + 5;
	float *x = malloc(sizeof(float) * (size_t)(n * ldx));
	float *w = malloc(sizeof(float) * (size_t)(C * K));
	float *st0 = malloc(sizeof(float) * (size_t)((K - 1) * C + 1));
	float *y1 = malloc(sizeof(float) * (size_t)(n * C));
	float *y2 = malloc(sizeof(float) * (size_t)(n * C));
	float *s1 = malloc(sizeof(float) * (size_t)((K - 1) * C + 1));
	float *s2 = malloc(sizeof(float) * (size_t)((K - 1) * C + 1));
	float *want_s = malloc(sizeof(float) * (size_t)((K - 1) * C + 1));
	double *ref = malloc(sizeof(double) * (size_t)(n * C));
	const size_t sb = sizeof(float) * (size_t)((K - 1) * C + 1);
	char err[512] = "";
	float *d_x, *d_w, *d_s, *d_y;
	int rc, same = 0, calls = 0;
	double e;

	fill_unif(x, (size_t)(n * ldx), -2.0f, 2.0f);
	fill_unif(w, (size_t)(C * K), -0.5f, 0.5f);
	fill_unif(st0, (size_t)((K - 1) * C + 1), -2.0f, 2.0f);
	for (int32_t t = 0; t < n; t++)
		for (int32_t c = 0; c < C; c++) {
			double u = 0;

			for (int32_t k = 0; k < K; k++) {
				int32_t tau = t - (K - 1) + k;
				double in = tau >= 0
				                ? x[tau * ldx + c]
				                : st0[(K - 1 + tau) * C + c];

				u += in * w[c * K + k];
			}
			ref[t * C + c] = u / (1.0 + exp(-u));
		}
	for (int32_t r = 0; r < K - 1; r++)
		for (int32_t c = 0; c < C; c++) {
			int32_t tau = n - (K - 1) + r;

			want_s[r * C + c] = tau >= 0
			                        ? x[tau * ldx + c]
			                        : st0[(K - 1 + tau) * C + c];
		}
	d_x = dev_put(x, sizeof(float) * (size_t)(n * ldx));
	d_w = dev_put(w, sizeof(float) * (size_t)(C * K));
	d_s = dev_put(st0, sb);
	d_y = dev_put(NULL, sizeof(float) * (size_t)(n * C));
	rc = cuda_op_ssm_conv(ctx, d_x, ldx, d_s, d_w, n, C, K, d_y, err,
	                      sizeof(err)) ||
	     dev_get(ctx, y1, d_y, sizeof(float) * (size_t)(n * C)) ||
	     dev_get(ctx, s1, d_s, sb);
	e = rc ? INFINITY : rel_err(y1, ref, (size_t)(n * C));
	tap_ok(!rc && e <= TOL_SSM_CONV &&
	           memcmp(s1, want_s, sizeof(float) * (size_t)((K - 1) * C)) ==
	               0,
	       "ssm_conv %d channels, %d taps, %d tokens: rel err %.3g, new "
	       "state = the last inputs %s",
	       C, K, n, e, err);
	/* again from the same state, in calls of 1, 2, 3, .. tokens */
	rc = rc ||
	     cudaMemcpy(d_s, st0, sb, cudaMemcpyHostToDevice) != cudaSuccess;
	for (int32_t t = 0, m = 1; !rc && t < n; t += m, m++) {
		if (m > n - t)
			m = n - t;
		rc = cuda_op_ssm_conv(ctx, (const float *)d_x + t * ldx, ldx,
		                      d_s, d_w, m, C, K, d_y + (size_t)t * C,
		                      err, sizeof(err));
		calls++;
	}
	rc = rc || dev_get(ctx, y2, d_y, sizeof(float) * (size_t)(n * C)) ||
	     dev_get(ctx, s2, d_s, sb);
	same = !rc && memcmp(y1, y2, sizeof(float) * (size_t)(n * C)) == 0 &&
	       memcmp(s1, s2, sizeof(float) * (size_t)((K - 1) * C)) == 0;
	tap_ok(same,
	       "ssm_conv in %d calls = in one, outputs and state bit for bit "
	       "(rel err of the split outputs %.3g) %s",
	       calls, rc ? INFINITY : rel_err(y2, ref, (size_t)(n * C)), err);
	void *dev[] = {d_x, d_w, d_s, d_y};
	for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
		cudaFree(dev[i]);
	void *host[] = {x, w, st0, y1, y2, s1, s2, want_s, ref};
	for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++)
		free(host[i]);
}

/*
 * cuda_op_gdn_gates, cuda_op_gdn_norm, cuda_op_sigmoid_mul and
 * cuda_op_split_q_gate against double loops (the split bit for bit).
 * The gates' inputs cross softplus's switch at 20; the norm's heads are
 * 128 (Qwen3.5), 16 (lanes past the head) and 80 (not a power of two).
 */
static void test_ssm_elementwise(struct cuda_ctx *ctx)
{
	enum { T = 7, H = 6, HD = 40, NS = 3 };
	static const int32_t norm_s[NS] = {128, 16, 80};
	static float a[T * H], b[T * H], bias[H], sa[H], ga[T * H], gb[T * H];
	static double ra[T * H], rb[T * H];
	static float q[T * H * HD], qg[T * 2 * H * HD + 8], got[T * H * HD];
	static double rq[T * H * HD];
	char err[512] = "";
	float *d_a, *d_b, *d_bias, *d_sa, *d_x, *d_g;
	int rc;
	double ea, eb;

	fill_unif(a, T * H, -30.0f, 25.0f);
	fill_unif(b, T * H, -8.0f, 8.0f);
	fill_unif(bias, H, -1.0f, 1.0f);
	fill_unif(sa, H, -8.0f, -0.01f);
	for (int i = 0; i < T * H; i++) {
		float x = a[i] + bias[i % H]; /* the float sum, as the GPU */

		/* the CPU engine's softplus (ggml's): log(1 + e^x) in
		   float, so 0 where e^x is under half an ulp of 1 (the
		   float sum's rounding, which the GPU must share) */
		ra[i] = (x > 20.0f ? (double)x : (double)logf(1.0f + expf(x))) *
		        sa[i % H];
		rb[i] = 1.0 / (1.0 + exp(-(double)b[i]));
	}
	d_a = dev_put(a, sizeof(a));
	d_b = dev_put(b, sizeof(b));
	d_bias = dev_put(bias, sizeof(bias));
	d_sa = dev_put(sa, sizeof(sa));
	rc = cuda_op_gdn_gates(ctx, d_a, d_b, d_bias, d_sa, T, H, err,
	                       sizeof(err)) ||
	     dev_get(ctx, ga, d_a, sizeof(ga)) ||
	     dev_get(ctx, gb, d_b, sizeof(gb));
	ea = rc ? INFINITY : 0;
	eb = rc ? INFINITY : 0;
	for (int i = 0; !rc && i < T * H; i++) { /* relative, each value */
		double da = fabs(ga[i] - ra[i]) / fmax(fabs(ra[i]), 1e-30);
		double db = fabs(gb[i] - rb[i]) / fmax(fabs(rb[i]), 1e-30);

		ea = da > ea || da != da ? da : ea;
		eb = db > eb || db != db ? db : eb;
	}
	tap_ok(!rc && ea <= TOL_SSM_ELEM && eb <= TOL_SSM_ELEM,
	       "gdn_gates %d x %d: softplus * a rel err %.3g, sigmoid %.3g %s",
	       T, H, ea, eb, err);

	/* the gated norm, each head size */
	for (int k = 0; k < NS; k++) {
		const int32_t S = norm_s[k];
		const size_t n = (size_t)T * H * S;
		float *o = malloc(sizeof(float) * n),
		      *z = malloc(sizeof(float) * n);
		float *w = malloc(sizeof(float) * (size_t)S);
		float *g = malloc(sizeof(float) * n);
		double *r = malloc(sizeof(double) * n);
		float *d_o, *d_z, *d_w;
		double e;

		fill_unif(o, n, -2.0f, 2.0f);
		fill_unif(z, n, -6.0f, 6.0f);
		fill_unif(w, (size_t)S, 0.5f, 1.5f);
		for (size_t row = 0; row < (size_t)T * H; row++) {
			double ss = 0, sc;

			for (int32_t j = 0; j < S; j++)
				ss += (double)o[row * S + j] * o[row * S + j];
			sc = 1.0 / sqrt(ss / S + 1e-6);
			for (int32_t j = 0; j < S; j++) {
				double zz = z[row * S + j];

				r[row * S + j] = o[row * S + j] * sc * w[j] *
				                 (zz / (1.0 + exp(-zz)));
			}
		}
		d_o = dev_put(o, sizeof(float) * n);
		d_z = dev_put(z, sizeof(float) * n);
		d_w = dev_put(w, sizeof(float) * (size_t)S);
		rc = cuda_op_gdn_norm(ctx, d_o, d_z, d_w, T, H, S, 1e-6f, err,
		                      sizeof(err)) ||
		     dev_get(ctx, g, d_o, sizeof(float) * n);
		e = rc ? INFINITY : rel_err(g, r, n);
		tap_ok(!rc && e <= TOL_SSM_ELEM,
		       "gdn_norm %d x %d heads of %d: rel err %.3g %s", T, H, S,
		       e, err);
		cudaFree(d_o);
		cudaFree(d_z);
		cudaFree(d_w);
		free(o);
		free(z);
		free(w);
		free(g);
		free(r);
	}

	/* the attention's output gate: rows of [q | gate] per head, the
	   gate read with a row stride wider than its rows */
	{
		const int64_t gld = 2 * H * HD + 8;

		fill_unif(q, T * H * HD, -3.0f, 3.0f);
		fill_unif(qg, T * gld, -8.0f, 8.0f);
		for (int t = 0; t < T; t++)
			for (int h = 0; h < H; h++)
				for (int d = 0; d < HD; d++) {
					double gt =
					    qg[t * gld + h * 2 * HD + HD + d];

					rq[(t * H + h) * HD + d] =
					    q[(t * H + h) * HD + d] /
					    (1.0 + exp(-gt));
				}
		d_x = dev_put(q, sizeof(q));
		d_g = dev_put(qg, sizeof(float) * (size_t)(T * gld));
		rc = cuda_op_sigmoid_mul(ctx, d_x, d_g, gld, T, H, HD, err,
		                         sizeof(err)) ||
		     dev_get(ctx, got, d_x, sizeof(got));
		ea = rc ? INFINITY : rel_err(got, rq, T * H * HD);
		tap_ok(!rc && ea <= TOL_SSM_ELEM,
		       "sigmoid_mul %d x %d heads of %d: rel err %.3g %s", T, H,
		       HD, ea, err);
		cudaFree(d_g);
	}
	{ /* the split: rows of 2 H HD floats, exact copies */
		int same;

		fill_unif(qg, T * 2 * H * HD, -8.0f, 8.0f);
		d_g = dev_put(qg, sizeof(float) * (size_t)(T * 2 * H * HD));
		rc = cuda_op_split_q_gate(ctx, d_g, T, H, HD, d_x, err,
		                          sizeof(err)) ||
		     dev_get(ctx, got, d_x, sizeof(got));
		same = !rc;
		for (int t = 0; same && t < T; t++)
			for (int h = 0; h < H; h++)
				same = same &&
				       memcmp(got + (t * H + h) * HD,
				              qg + t * 2 * H * HD + h * 2 * HD,
				              sizeof(float) * HD) == 0;
		tap_ok(same, "split_q_gate %d x %d heads of %d: exact %s", T, H,
		       HD, err);
		cudaFree(d_g);
		cudaFree(d_x);
	}
	cudaFree(d_a);
	cudaFree(d_b);
	cudaFree(d_bias);
	cudaFree(d_sa);
}

/* The gated delta rule in double, token after token (the recipe of
 * cuda_ops.h): N tokens of QKV (rows of LD) from the state ST [hv][S][S]
 * (updated), outputs into O [n][hv][S]. */
static void gdn_ref(const float *qkv, int64_t ld, const float *g,
                    const float *beta, double *st, int32_t n, int32_t hk,
                    int32_t hv, int32_t S, double eps, double *o)
{
	double *q = malloc(sizeof(double) * (size_t)S);
	double *k = malloc(sizeof(double) * (size_t)S);

	for (int32_t t = 0; t < n; t++)
		for (int32_t h = 0; h < hv; h++) {
			const float *row = qkv + t * ld;
			const int32_t kh = h % hk;
			double nq = 0, nk = 0, eg, b;

			for (int32_t i = 0; i < S; i++) {
				q[i] = row[kh * S + i];
				k[i] = row[(hk + kh) * S + i];
				nq += q[i] * q[i];
				nk += k[i] * k[i];
			}
			nq = fmax(sqrt(nq), eps);
			nk = fmax(sqrt(nk), eps);
			for (int32_t i = 0; i < S; i++) {
				q[i] /= nq;
				k[i] /= nk;
			}
			eg = exp((double)g[t * hv + h]);
			b = beta[t * hv + h];
			for (int32_t j = 0; j < S; j++) {
				double *s = st + ((size_t)h * S + j) * S;
				double sk = 0, sq = 0, d;

				for (int32_t i = 0; i < S; i++) {
					s[i] *= eg;
					sk += s[i] * k[i];
				}
				d = (row[(2 * hk + h) * S + j] - sk) * b;
				for (int32_t i = 0; i < S; i++) {
					s[i] += d * k[i];
					sq += s[i] * q[i];
				}
				o[((size_t)t * hv + h) * S + j] = sq / sqrt(S);
			}
		}
	free(q);
	free(k);
}

/* One GPU run of cuda_op_gdn_force from the state ST0 over N tokens: in
 * one call (SPLIT 0), or SPLIT tokens then the rest, or (DECODE) SPLIT
 * tokens then one call a token; outputs into O, the state into S1. */
static int gdn_run(struct cuda_ctx *ctx, const float *d_qkv, int64_t ld,
                   const float *d_g, const float *d_b, float *d_s,
                   const float *st0, size_t sbytes, int32_t n, int32_t hk,
                   int32_t hv, int32_t S, int force, int32_t split, int decode,
                   float *d_o, float *o, float *s1, char *err, size_t errlen)
{
	const size_t orow = (size_t)hv * S;
	int rc =
	    cudaMemcpy(d_s, st0, sbytes, cudaMemcpyHostToDevice) != cudaSuccess;
	int32_t t = 0;

	while (!rc && t < n) {
		int32_t m = t == 0 && split > 0 ? split : decode ? 1 : n - t;

		rc = cuda_op_gdn_force(ctx, d_qkv + t * ld, ld, d_g + t * hv,
		                       d_b + t * hv, d_s, m, hk, hv, S, 1e-6f,
		                       d_o + t * orow, force, err, errlen);
		t += m;
	}
	return rc || dev_get(ctx, o, d_o, sizeof(float) * n * orow) ||
	       dev_get(ctx, s1, d_s, sbytes);
}

/*
 * cuda_op_gdn with HK key and HV value heads of S over N tokens from a
 * random state (a conversation's), against gdn_ref (SLOW: q and k in the
 * range of the conv's SiLU, mostly positive, so keys are alike, and a
 * slow decay, g in [-0.1, 0]: the long memory and the ill-conditioned
 * chunk matrices of real layers; else q, k, v in [-1, 1], g in [-3, 0]):
 * token after token
 * (force 1) and chunked (force 2) in one call, chunked in two calls
 * (SPLIT tokens, then the rest), and the path by size for SPLIT tokens
 * then one call a token (decode); outputs and final state each, and the
 * two paths' outputs against each other.
 */
static void test_gdn(struct cuda_ctx *ctx, int32_t hk, int32_t hv, int32_t S,
                     int32_t n, int32_t split, int slow)
{
	static const char *name[4] = {"sequential", "chunked",
	                              "chunked in 2 calls",
	                              "by size, then decode"};
	const int64_t ld = (int64_t)(2 * hk + hv) * S + 4; /* wider rows */
	const size_t ns = (size_t)hv * S * S, no = (size_t)n * hv * S;
	const size_t sbytes = sizeof(float) * ns;
	float *qkv = malloc(sizeof(float) * (size_t)(n * ld));
	float *g = malloc(sizeof(float) * (size_t)(n * hv));
	float *b = malloc(sizeof(float) * (size_t)(n * hv));
	float *st0 = malloc(sbytes), *s1 = malloc(sbytes);
	float *o[4] = {NULL, NULL, NULL, NULL};
	double *rs = malloc(sizeof(double) * ns),
	       *ro = malloc(sizeof(double) * no);
	char err[512] = "", how[32];
	float *d_qkv, *d_g, *d_b, *d_s, *d_o;
	double eo[4], es[4], ex = INFINITY;
	int rc[4];

	fill_unif(qkv, (size_t)(n * ld), -1.0f, 1.0f);
	for (int32_t t = 0; slow && t < n; t++)
		fill_unif(qkv + t * ld, (size_t)(2 * hk * S), -0.28f, 2.0f);
	fill_unif(g, (size_t)(n * hv), slow ? -0.1f : -3.0f, 0.0f);
	fill_unif(b, (size_t)(n * hv), 0.01f, 0.99f);
	fill_unif(st0, ns, -0.5f, 0.5f);
	for (size_t i = 0; i < ns; i++)
		rs[i] = st0[i];
	gdn_ref(qkv, ld, g, b, rs, n, hk, hv, S, 1e-6, ro);
	d_qkv = dev_put(qkv, sizeof(float) * (size_t)(n * ld));
	d_g = dev_put(g, sizeof(float) * (size_t)(n * hv));
	d_b = dev_put(b, sizeof(float) * (size_t)(n * hv));
	d_s = dev_put(NULL, sbytes);
	d_o = dev_put(NULL, sizeof(float) * no);
	for (int k = 0; k < 4; k++) {
		const int force = k == 0 ? 1 : k == 3 ? 0 : 2;
		const int32_t sp = k < 2 ? 0 : split;

		o[k] = malloc(sizeof(float) * no);
		rc[k] = (k >= 2 && (split <= 0 || split >= n)) ||
		        gdn_run(ctx, d_qkv, ld, d_g, d_b, d_s, st0, sbytes, n,
		                hk, hv, S, force, sp, k == 3, d_o, o[k], s1,
		                err, sizeof(err));
		if (k >= 2 && (split <= 0 || split >= n))
			continue; /* no split of one token */
		eo[k] = rc[k] ? INFINITY : rel_err(o[k], ro, no);
		es[k] = rc[k] ? INFINITY : rel_err(s1, rs, ns);
		snprintf(how, sizeof(how), k >= 2 ? ", split at %d" : "",
		         split);
		tap_ok(!rc[k] && eo[k] <= TOL_SSM_GDN && es[k] <= TOL_SSM_GDN,
		       "gdn %s, %d/%d heads of %d, %d tokens%s%s: rel err "
		       "output %.3g, state %.3g %s",
		       name[k], hk, hv, S, n, how, slow ? ", slow decay" : "",
		       eo[k], es[k], err);
	}
	if (!rc[0] && !rc[1])
		ex = rel_err_f(o[1], o[0], no);
	tap_ok(ex <= TOL_SSM_GDN,
	       "gdn chunked against sequential, %d/%d heads of %d, %d tokens: "
	       "rel err %.3g",
	       hk, hv, S, n, ex);
	void *dev[] = {d_qkv, d_g, d_b, d_s, d_o};
	for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
		cudaFree(dev[i]);
	void *host[] = {qkv, g, b, st0, s1, rs, ro, o[0], o[1], o[2], o[3]};
	for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++)
		free(host[i]);
}

/* ---- the q8_0 KV cache (cuda_ctx.kv_q8, cuda_kvq.cuh) ---- */

/* The blocks of cache C (layer IL of [layer][kv_head][n_ctx] q8_0 rows)
 * at positions POS0.. that differ from quant_q8_0_row of X's N_TOK
 * token-major rows of N_KV heads of HD. */
static long kvq_diff(const unsigned char *c, const float *x, int n_tok,
                     int n_kv, int hd, int n_ctx, int il, int pos0)
{
	const size_t rb = (size_t)hd / 32 * 34;
	unsigned char *want = malloc(rb);
	long bad = 0;

	for (int t = 0; t < n_tok; t++)
		for (int h = 0; h < n_kv; h++) {
			const unsigned char *got =
			    c +
			    (((size_t)il * n_kv + h) * n_ctx + pos0 + t) * rb;

			quant_q8_0_row(x + ((size_t)t * n_kv + h) * hd, hd,
			               want);
			for (size_t b = 0; b < rb / 34; b++)
				bad += memcmp(got + b * 34, want + b * 34,
				              34) != 0;
		}
	free(want);
	return bad;
}

/*
 * A q8_0 cache: cuda_op_kv_store's blocks are quant_q8_0_row's bytes of
 * the same floats; the attention over them against a double loop over the
 * blocks' values: d * q exactly for fewer than CUDA_GEMM_MIN_TOKENS
 * queries (the split kernel reads the blocks), rounded to fp16 for a
 * batch (the layer's fp16 copy, ctx->d_kv16, read by the fp16 kernels).
 */
static void test_kvq_attention(struct cuda_ctx *ctx, int n_head, int n_kv,
                               int hd, int n_tok, int pos0, int32_t window)
{
	const int n_layer = 2, il = 1, n_pos = pos0 + n_tok, n_ctx = n_pos + 3;
	const int kvd = n_kv * hd, group = n_head / n_kv;
	const size_t rb = (size_t)hd / 32 * 34;
	const size_t cache = (size_t)n_layer * n_kv * n_ctx * rb;
	const size_t nq = (size_t)n_tok * n_head * hd,
	             nkv = (size_t)n_pos * kvd;
	const size_t h16 = 2 * (size_t)n_kv * n_ctx * hd;
	float *k = malloc(sizeof(float) * nkv),
	      *v = malloc(sizeof(float) * nkv);
	float *kd = malloc(sizeof(float) * nkv),
	      *vd = malloc(sizeof(float) * nkv);
	float *q = malloc(sizeof(float) * nq),
	      *ref = malloc(sizeof(float) * nq);
	float *got = malloc(sizeof(float) * nq);
	unsigned char *kc = malloc(cache), *vc = malloc(cache);
	double *att = malloc(sizeof(double) * (size_t)n_pos);
	const bool batch = n_tok >= CUDA_GEMM_MIN_TOKENS;
	char err[512] = "";
	void *d_k, *d_v, *d_q, *d_o, *d_kc, *d_vc, *d16;
	long bad;
	int rc;

	fill_unif(k, nkv, -2.0f, 2.0f);
	fill_unif(v, nkv, -2.0f, 2.0f);
	fill_unif(q, nq, -2.0f, 2.0f);
	/* the values the kernels read: the blocks' d * q (a batch: as fp16) */
	for (size_t r = 0; r < nkv / hd; r++) {
		unsigned char *blk = malloc(rb);

		quant_q8_0_row(k + r * hd, hd, blk);
		quant_dequant_row(QTYPE_Q8_0, blk, kd + r * hd, hd);
		quant_q8_0_row(v + r * hd, hd, blk);
		quant_dequant_row(QTYPE_Q8_0, blk, vd + r * hd, hd);
		free(blk);
	}
	for (size_t i = 0; batch && i < nkv; i++) {
		kd[i] = f16_to_f32(f32_to_f16(kd[i]));
		vd[i] = f16_to_f32(f32_to_f16(vd[i]));
	}
	attn_ref(q, kd, vd, n_tok, n_head, group, hd, kvd, pos0, window, att,
	         ref);
	d_k = dev_put(k, sizeof(float) * nkv);
	d_v = dev_put(v, sizeof(float) * nkv);
	d_q = dev_put(q, sizeof(float) * nq);
	d_o = dev_put(NULL, sizeof(float) * nq);
	d_kc = dev_put(NULL, cache);
	d_vc = dev_put(NULL, cache);
	d16 = dev_put(NULL, 2 * h16);
	ctx->kv_q8 = 1;
	ctx->d_kv16 = d16;
	ctx->kv16_cap = h16;
	rc = cuda_op_kv_store(ctx, d_k, d_v, n_pos, n_kv, hd, n_ctx, il, 0,
	                      d_kc, d_vc, err, sizeof(err));
	rc = rc || dev_get(ctx, kc, d_kc, cache) ||
	     dev_get(ctx, vc, d_vc, cache);
	bad = rc ? -1
	         : kvq_diff(kc, k, n_pos, n_kv, hd, n_ctx, il, 0) +
	               kvq_diff(vc, v, n_pos, n_kv, hd, n_ctx, il, 0);
	tap_ok(!rc && bad == 0,
	       "kv_store q8_0, %d positions of %d heads of %d: the blocks are "
	       "quant_q8_0_row's bytes (%ld differ) %s",
	       n_pos, n_kv, hd, bad, err);
	if (!rc) {
		const struct cuda_attn_params par = {
		    1.0f / sqrtf((float)hd), window, 0.0f, NULL, 0, 0};
		const void *xq = NULL;

		rc = cuda_op_attention(ctx, d_q, d_kc, d_vc, n_tok, n_head,
		                       n_kv, hd, n_ctx, il, pos0, &par, d_o,
		                       &xq, err, sizeof(err));
	}
	rc = rc || dev_get(ctx, got, d_o, sizeof(float) * nq);
	{
		const double e = rc ? 1 : nmse(got, ref, nq);

		tap_ok(!rc && e <= TOL_F32,
		       "q8_0 attention heads %d/%d head_dim %d, %d queries at "
		       "%d%s (%s): nmse %.3g %s",
		       n_head, n_kv, hd, n_tok, pos0,
		       window > 0 ? ", sliding window" : "",
		       batch ? "fp16 copy, batch kernels" : "split, blocks", e,
		       err);
	}
	ctx->kv_q8 = 0;
	ctx->d_kv16 = NULL;
	ctx->kv16_cap = 0;
	void *dev[] = {d_k, d_v, d_q, d_o, d_kc, d_vc, d16};
	for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
		cudaFree(dev[i]);
	void *host[] = {k, v, kd, vd, q, ref, got, kc, vc, att};
	for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++)
		free(host[i]);
}

/*
 * The q8_0 stores of the one-launch chains: cuda_op_rope_kv_store (NORM
 * 0) and cuda_op_qkv_norm_rope_store with q/k norms and the V norm (NORM
 * 1). K's blocks are quant_q8_0_row's bytes of the rotated K the op
 * leaves in place, Q and K are the fp16 cache's op's bits (the cache
 * type changes no activation); V's blocks without the norm are those of
 * V; with it, the dequantized V is within 6e-5 NMSE of the host's
 * rmsnorm(V) (half a step a value: at most 3 / 254^2 = 4.7e-5 for
 * uniform values; the normed V's blocks may differ from the host's by
 * the last bit of the norm's scale, so they are not compared byte for
 * byte).
 */
static void test_kvq_rope(struct cuda_ctx *ctx, int norm, int neox, int n_rot,
                          int hd, int n_head, int n_kv, int n_tok, int pos0)
{
	const int n_layer = 2, il = 1, n_ctx = pos0 + n_tok + 5;
	const size_t nq = (size_t)n_tok * n_head * hd;
	const size_t nk = (size_t)n_tok * n_kv * hd;
	const size_t rb = (size_t)hd / 32 * 34;
	const size_t c8 = (size_t)n_layer * n_kv * n_ctx * rb;
	const size_t c16 = (size_t)n_layer * n_kv * n_ctx * hd * 2;
	float *q = malloc(sizeof(float) * nq), *k = malloc(sizeof(float) * nk);
	float *v = malloc(sizeof(float) * nk),
	      *w = malloc(sizeof(float) * 2 * hd);
	float *a = malloc(sizeof(float) * (nq + nk));
	float *b = malloc(sizeof(float) * (nq + nk));
	float *vref = malloc(sizeof(float) * nk),
	      *vgot = malloc(sizeof(float) * nk);
	unsigned char *kc = malloc(c8), *vc = malloc(c8);
	double *inv = malloc(sizeof(double) * (size_t)(hd / 2 + 1));
	void *d_inv, *d_v, *d_w, *d_q[2], *d_k[2], *d_kc[2], *d_vc[2];
	const float eps = 1e-6f;
	char err[512] = "";
	long bad = 0;
	int rc = 0;

	for (int i = 0; i < n_rot / 2; i++)
		inv[i] = pow(10000.0, -2.0 * i / n_rot);
	fill_unif(q, nq, -4.0f, 4.0f);
	fill_unif(k, nk, -4.0f, 4.0f);
	fill_unif(v, nk, -2.0f, 2.0f);
	fill_unif(w, (size_t)2 * hd, 0.5f, 2.0f);
	for (size_t r = 0; r < nk / hd; r++) {
		const float sc =
		    norm ? host_norm_scale(v + r * hd, hd, eps) : 1;

		for (int d = 0; d < hd; d++)
			vref[r * hd + d] =
			    norm ? v[r * hd + d] * sc : v[r * hd + d];
	}
	d_inv = dev_put(inv, sizeof(double) * (size_t)(hd / 2 + 1));
	d_v = dev_put(v, sizeof(float) * nk);
	d_w = dev_put(w, sizeof(float) * 2 * hd);
	for (int j = 0; j < 2; j++) {
		d_q[j] = dev_put(q, sizeof(float) * nq);
		d_k[j] = dev_put(k, sizeof(float) * nk);
		rc = rc || zeroed_caches(j ? c8 : c16, &d_kc[j], &d_vc[j]);
	}
	/* j = 0: the fp16 cache; j = 1: q8_0 */
	for (int j = 0; j < 2 && !rc; j++) {
		ctx->kv_q8 = j;
		rc = norm ? cuda_op_qkv_norm_rope_store(
		                ctx, d_q[j], d_k[j], d_v, d_w,
		                (float *)d_w + hd, 1, eps, n_tok, n_head, n_kv,
		                hd, n_rot, d_inv, 1.0f, pos0, neox, n_ctx, il,
		                d_kc[j], d_vc[j], err, sizeof(err))
		          : cuda_op_rope_kv_store(
		                ctx, d_q[j], d_k[j], d_v, n_tok, n_head, n_kv,
		                hd, n_rot, d_inv, 1.0f, pos0, neox, n_ctx, il,
		                d_kc[j], d_vc[j], err, sizeof(err));
	}
	ctx->kv_q8 = 0;
	rc = rc || dev_get(ctx, a, d_q[0], sizeof(float) * nq) ||
	     dev_get(ctx, a + nq, d_k[0], sizeof(float) * nk) ||
	     dev_get(ctx, b, d_q[1], sizeof(float) * nq) ||
	     dev_get(ctx, b + nq, d_k[1], sizeof(float) * nk) ||
	     dev_get(ctx, kc, d_kc[1], c8) || dev_get(ctx, vc, d_vc[1], c8);
	if (!rc) {
		bad =
		    (memcmp(a, b, sizeof(float) * (nq + nk)) != 0) * 1000 +
		    kvq_diff(kc, b + nq, n_tok, n_kv, hd, n_ctx, il, pos0) +
		    (norm ? 0
		          : kvq_diff(vc, v, n_tok, n_kv, hd, n_ctx, il, pos0));
		for (int t = 0; t < n_tok; t++)
			for (int h = 0; h < n_kv; h++)
				quant_dequant_row(
				    QTYPE_Q8_0,
				    vc + (((size_t)il * n_kv + h) * n_ctx +
				          pos0 + t) *
				             rb,
				    vgot + ((size_t)t * n_kv + h) * hd, hd);
	}
	{
		const double e = rc ? 1 : nmse(vgot, vref, nk);

		tap_ok(!rc && bad == 0 && e <= 6e-5,
		       "%s q8_0 %s n_rot %d head_dim %d heads %d/%d, %d tokens "
		       "at %d: Q, K = the fp16 cache op's; K%s blocks = "
		       "quant_q8_0_row's (%ld wrong); V nmse %.3g %s",
		       norm ? "qkv_norm_rope_store (q/k/v norms)"
		            : "rope_kv_store",
		       neox ? "neox" : "norm", n_rot, hd, n_head, n_kv, n_tok,
		       pos0, norm ? "" : ", V", bad, e, err);
	}
	for (int j = 0; j < 2; j++) {
		cudaFree(d_q[j]);
		cudaFree(d_k[j]);
		cudaFree(d_kc[j]);
		cudaFree(d_vc[j]);
	}
	cudaFree(d_inv);
	cudaFree(d_v);
	cudaFree(d_w);
	void *host[] = {q, k, v, w, a, b, vref, vgot, kc, vc, inv};
	for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++)
		free(host[i]);
}

int main(void)
{
	struct cuda_ctx ctx;
	char err[512] = "";
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
		return tap_skip_all("no CUDA device");
	/* a small fp16 weight scratch, so big matrices take several chunks */
	if (cuda_ctx_init(&ctx, 100000, 512 * 4096, err, sizeof(err)) != 0) {
		printf("Bail out! %s\n", err);
		return 1;
	}
	/* the q8_0 cache: stores and every attention path over it
	   (first: new and short) */
	test_kvq_attention(&ctx, 8, 2, 64, 1, 700, 0);    /* decode */
	test_kvq_attention(&ctx, 8, 2, 128, 3, 2000, 0);  /* small batch */
	test_kvq_attention(&ctx, 4, 1, 256, 1, 300, 0);   /* generic split */
	test_kvq_attention(&ctx, 4, 1, 512, 1, 300, 100); /* window, 512 */
	test_kvq_attention(&ctx, 8, 2, 64, 40, 500, 0);   /* batch: mma */
	test_kvq_attention(&ctx, 4, 2, 128, 33, 100, 0);  /* batch */
	test_kvq_attention(&ctx, 4, 1, 256, 20, 64, 32);  /* mma, window */
	test_kvq_attention(&ctx, 8, 1, 512, 24, 400, 0);  /* mma, 512 */
	test_kvq_attention(&ctx, 2, 1, 96, 9, 50, 0);     /* one warp */
	test_kvq_rope(&ctx, 0, 0, 64, 64, 9, 3, 1, 40);
	test_kvq_rope(&ctx, 0, 1, 32, 128, 4, 2, 33, 0);
	test_kvq_rope(&ctx, 1, 1, 256, 256, 8, 2, 1, 40);
	test_kvq_rope(&ctx, 1, 0, 64, 512, 4, 1, 9, 100);
	for (size_t i = 0; i < sizeof(all_types) / sizeof(all_types[0]); i++) {
		uint32_t t = all_types[i];
		int k = qtype_get(t)->blck_size == 256;

		test_type(&ctx, t, k ? 768 : 288, 333);
		if (t == QTYPE_F32 || t == QTYPE_F16 || t == QTYPE_BF16)
			test_type(&ctx, t, 37, 5); /* odd row length */
		else
			test_type(&ctx, t, k ? 256 : 32, 1);
		/* long rows, 7 rows: the unit mat-vec's two-per-iteration
		   loop and its tail (88 K sub-blocks, 33 blocks, 132 F16
		   units of 8) */
		test_type(&ctx, t, k ? 2816 : 1056, 7);
		/* rows split across 2 and 4 warps (cm_ks: few rows, long
		   ones), a block's second warp pair past the last row */
		test_type(&ctx, t, k ? 2816 : 2048, 5);
		test_type(&ctx, t, 4096, 5);
	}
	test_quantize_x8(&ctx);
	/* the GPU layouts: odd block counts (rows padded), one block, a
	   row as wide as the 7B's down (74 Q6_K blocks) */
	test_repack(&ctx, QTYPE_Q8_0, 288, 333);
	test_repack(&ctx, QTYPE_Q8_0, 32, 7);
	test_repack(&ctx, QTYPE_Q8_0, 2048, 5);
	test_repack(&ctx, QTYPE_Q6_K, 768, 99);
	test_repack(&ctx, QTYPE_Q6_K, 256, 5);
	test_repack(&ctx, QTYPE_Q6_K, 18944, 9);
	/* Q4_K's re-packed scales: the 7B's rows of 3,584 and 18,944 */
	test_repack(&ctx, QTYPE_Q4_K, 768, 99);
	test_repack(&ctx, QTYPE_Q4_K, 256, 5);
	test_repack(&ctx, QTYPE_Q4_K, 3584, 7);
	test_repack(&ctx, QTYPE_Q4_K, 18944, 9);
	test_fused(&ctx, QTYPE_Q4_1, QTYPE_Q4_1, QTYPE_Q4_1, 288,
	           1);                                             /* fused */
	test_fused(&ctx, QTYPE_F16, QTYPE_F16, QTYPE_F16, 296, 3); /* fused */
	/* mixed: Q and K in one launch, V (Q6_K) in its own */
	test_fused(&ctx, QTYPE_Q4_K, QTYPE_Q4_K, QTYPE_Q6_K, 768, 1);
	/* batches of the quantized GEMM: its sums and its add */
	test_fused(&ctx, QTYPE_Q4_K, QTYPE_Q4_K, QTYPE_Q6_K, 768, 9);
	test_fused(&ctx, QTYPE_Q8_0, QTYPE_Q8_0, QTYPE_Q4_0, 288, 40);
	/* mixed: three unit launches, int8 activations quantized once */
	test_fused(&ctx, QTYPE_Q4_0, QTYPE_Q8_0, QTYPE_Q4_0, 288, 3);
	/* Q and K in one launch, V element-wise (BF16: fp32 activations)
	   and its bias added */
	test_fused(&ctx, QTYPE_Q4_K, QTYPE_Q4_K, QTYPE_BF16, 768, 2);
	/* V of a type with an int8 unit only */
	test_fused(&ctx, QTYPE_Q4_K, QTYPE_Q4_K, QTYPE_Q5_K, 768, 2);
	/* Gemma 3's Q4_K_M mix on rows of 640: Q and K Q5_0, V Q8_0 */
	test_fused(&ctx, QTYPE_Q5_0, QTYPE_Q5_0, QTYPE_Q8_0, 640, 1);
	test_fused(&ctx, QTYPE_Q5_1, QTYPE_Q5_1, QTYPE_Q5_1, 288, 3);
	ctx.x8_off = 1; /* the fp32-activation mat-vec */
	test_fused(&ctx, QTYPE_Q4_1, QTYPE_Q4_1, QTYPE_Q4_1, 288, 1);
	test_fused(&ctx, QTYPE_Q4_K, QTYPE_Q4_K, QTYPE_Q6_K, 768, 1);
	test_fused(&ctx, QTYPE_Q5_0, QTYPE_Q5_0, QTYPE_Q8_0, 640, 1);
	/* (int8 units only: the element-wise mat-vec) */
	test_fused(&ctx, QTYPE_Q5_K, QTYPE_Q5_K, QTYPE_Q5_K, 768, 2);
	ctx.x8_off = 0;
	test_fused(&ctx, QTYPE_Q5_K, QTYPE_Q5_K, QTYPE_Q5_K, 768, 2);
	test_fused(&ctx, QTYPE_Q8_0, QTYPE_Q8_0, QTYPE_Q8_0, 288, 9); /* GEMM */
	test_elementwise(&ctx);
	test_rmsnorm_order(&ctx);
	test_rmsnorm_x8(&ctx);
	/* the residual's copy for the traced decode step */
	test_add_copy(&ctx, QTYPE_Q4_1, 576, 1);
	test_add_copy(&ctx, QTYPE_Q4_K, 1536, 3);
	test_add_copy(&ctx, QTYPE_F16, 896, 1);
	test_add_copy(&ctx, QTYPE_Q5_0, 576, 1);
	test_add_copy(&ctx, QTYPE_Q5_K, 768, 1);
	test_add_copy(&ctx, QTYPE_BF16, 768, 1); /* element-wise: refused */
	test_add_copy(&ctx, QTYPE_Q8_0, 576, 9); /* GEMM: refused */
	for (int neox = 0; neox <= 1; neox++) {
		test_rope(&ctx, neox, 64, 0);
		test_rope(&ctx, neox, 32, 1);
	}
	test_rope_kv(&ctx, 0, 64, 64, 9, 3, 1, 40);    /* decode */
	test_rope_kv(&ctx, 1, 32, 64, 14, 2, 7, 100);  /* partial rotation */
	test_rope_kv(&ctx, 1, 128, 128, 4, 2, 33, 0);  /* prefill */
	test_rope_kv(&ctx, 0, 256, 256, 2, 1, 1, 500); /* pairs > threads */
	/* the q/k norm in the same launch: Qwen3's head of 128 (decode and
	   a prefill chunk), Gemma 3's of 256, a partial rotation (the
	   unrotated dims normed too), K alone, a head of 512 */
	test_qk_norm_rope_kv(&ctx, 1, 128, 128, 16, 8, 1, 40, 1, 1);
	test_qk_norm_rope_kv(&ctx, 1, 128, 128, 16, 8, 70, 0, 1, 1);
	test_qk_norm_rope_kv(&ctx, 1, 256, 256, 4, 1, 1, 700, 1, 1);
	test_qk_norm_rope_kv(&ctx, 0, 32, 64, 9, 3, 5, 10, 1, 1);
	test_qk_norm_rope_kv(&ctx, 1, 64, 64, 4, 2, 3, 9, 0, 1);
	test_qk_norm_rope_kv(&ctx, 1, 512, 512, 2, 1, 2, 33, 1, 1);
	/* Gemma 4: the weightless V norm (its heads of 256 and 512, a
	   partial rotation of the global layers' 512, 1 and 9 tokens), the
	   queries-only step of a layer of shared KV */
	test_qkv_vnorm(&ctx, 1, 256, 256, 8, 2, 1, 40);
	test_qkv_vnorm(&ctx, 1, 128, 512, 4, 1, 9, 100);
	test_qkv_vnorm(&ctx, 0, 32, 64, 4, 2, 3, 7);
	test_gemma4_elem(&ctx, 999, 7, 256, 5);
	test_gemma4_elem(&ctx, 2560, 1, 256, 42);
	/* RoPE and the KV store in the QKV products' epilogue: SmolLM2's
	   shape (one launch), a partial rotation with biases over 3 tokens,
	   V of another type (its own launch), a captured step's position,
	   NEOX pairs (Qwen2's, with biases; partial); the GEMM keeps the
	   separate launch */
	test_qkv_rope(&ctx, QTYPE_Q4_1, QTYPE_Q4_1, 576, 9, 3, 64, 64, 0, 1, 40,
	              0, 0, 1);
	test_qkv_rope(&ctx, QTYPE_Q8_0, QTYPE_Q8_0, 256, 4, 2, 64, 32, 0, 3,
	              100, 1, 0, 1);
	test_qkv_rope(&ctx, QTYPE_Q4_K, QTYPE_Q6_K, 768, 4, 1, 128, 128, 0, 1,
	              1500, 0, 0, 1);
	test_qkv_rope(&ctx, QTYPE_F16, QTYPE_F16, 512, 8, 2, 64, 64, 0, 1, 333,
	              0, 1, 1);
	test_qkv_rope(&ctx, QTYPE_Q4_1, QTYPE_Q4_1, 576, 9, 3, 64, 64, 1, 1, 40,
	              1, 0, 1);
	test_qkv_rope(&ctx, QTYPE_Q4_K, QTYPE_Q6_K, 1024, 7, 1, 128, 128, 1, 1,
	              600, 1, 1, 1);
	test_qkv_rope(&ctx, QTYPE_F16, QTYPE_F16, 896, 14, 2, 64, 32, 1, 2, 90,
	              1, 0, 1);
	test_qkv_rope(&ctx, QTYPE_Q8_0, QTYPE_Q8_0, 256, 4, 2, 64, 64, 0, 9, 7,
	              0, 0, 0);
	test_attention(&ctx, 6, 2, 64, 512, 0); /* prefill */
	/* sliding windows: the tiled path (whole key tiles and key-split
	   chunks before the window), the split decode path (sub-chunks and
	   chunks before it), the one-warp path (head_dim 256, 36), windows
	   longer than the cache and of one position */
	test_attention_window(&ctx, 6, 2, 64, 512, 0, 100);
	test_attention_window(&ctx, 4, 1, 128, 64, 3000, 512);
	test_attention_window(&ctx, 4, 1, 256, 40, 700, 512);
	test_attention_window(&ctx, 2, 1, 256, 1, 1500, 512);
	test_attention_window(&ctx, 9, 3, 64, 1, 5000, 700);
	test_attention_window(&ctx, 14, 2, 64, 3, 126, 50);
	test_attention_window(&ctx, 2, 1, 36, 1, 200, 10);
	test_attention_window(&ctx, 4, 2, 128, 1, 30, 1000);
	test_attention_window(&ctx, 4, 2, 64, 9, 100, 1);
	test_attention(&ctx, 6, 2, 64, 7, 40);  /* a chunk after a prefix */
	test_attention(&ctx, 6, 2, 64, 1, 333); /* decode */
	test_attention(&ctx, 4, 4, 80, 3, 100); /* head_dim not 32k, MHA */
	test_attention(&ctx, 8, 1, 128, 5, 31); /* MQA, chunk boundary */
	/* the split decode path: 1..3000 positions, 64-position chunks
	   (boundaries at 64, 128), GQA groups 1, 2, 3, 7 and 16 (two blocks
	   of query heads per KV head), head_dim 80 and 256 */
	test_attention(&ctx, 3, 3, 64, 1, 0);     /* one position */
	test_attention(&ctx, 9, 3, 64, 1, 63);    /* exactly one chunk */
	test_attention(&ctx, 9, 3, 64, 1, 64);    /* one into the next */
	test_attention(&ctx, 4, 2, 128, 1, 2999); /* 3000 positions */
	test_attention(&ctx, 14, 2, 64, 1, 1500); /* group 7 */
	test_attention(&ctx, 14, 2, 64, 3, 126);  /* batch across 128 */
	test_attention(&ctx, 16, 1, 64, 2, 700);  /* group 16 */
	test_attention(&ctx, 2, 1, 256, 1, 200);  /* widest head */
	/* the merge in more than one stage: whole heads of 80 (63 chunks, 51
	   a stage) and slices of 32 of a head of 64 (157 chunks, 128 a
	   stage) */
	test_attention(&ctx, 4, 4, 80, 1, 1999);
	test_attention(&ctx, 2, 1, 64, 1, 4999);
	test_attention(&ctx, 4, 4, 80, 7, 1000); /* 7 queries, MHA */
	test_attention(&ctx, 2, 1, 36, 1, 200);  /* head_dim % 8: one warp */
	/* long caches: each block walks several 32-position sub-chunks with
	   an online softmax (2, then 28 per chunk, partial last chunks) */
	test_attention(&ctx, 4, 1, 64, 1, 20000);
	test_attention(&ctx, 8, 2, 128, 3, 40000);
	/* the batch paths (8+ queries): head_dim 64 and 128 on tensor
	   cores (cuda_attn_mma.cuh: 64 rows of (token, group head) a block,
	   64-key tiles), 256 on the fp32 tiles (32 x 32); a last partial
	   tile, a batch after a long cache (a follow-up turn), GQA and MHA;
	   head_dim 80 keeps the one-warp kernel */
	test_attention(&ctx, 7, 7, 64, 8, 0);       /* the fewest queries */
	test_attention(&ctx, 4, 1, 64, 33, 70);     /* one past a tile */
	test_attention(&ctx, 8, 2, 128, 37, 1000);  /* after a long cache */
	test_attention(&ctx, 14, 2, 128, 64, 0);    /* two whole tiles */
	test_attention(&ctx, 4, 2, 128, 300, 2500); /* many tiles */
	/* fewer than 264 blocks above: keys split into chunks and merged;
	   here 10 tiles x 28 heads, one pass over the keys */
	test_attention(&ctx, 28, 4, 128, 320, 100);
	test_attention(&ctx, 4, 4, 80, 40, 50); /* head_dim 80: one warp */
	/* head_dim 256 (Gemma) on the tensor cores, its dims over 2 warps
	   (32 rows a block): whole tiles, a partial one, keys split and
	   merged after a long cache; then the same on the fp32 tiles (32 x
	   32 in dynamic shared memory, ctx.attn_tiles) */
	for (int tiles = 0; tiles < 2; tiles++) {
		ctx.attn_tiles = tiles;
		test_attention(&ctx, 2, 1, 256, 9, 10);
		test_attention(&ctx, 4, 1, 256, 64, 0);
		test_attention(&ctx, 8, 4, 256, 45, 33);
		test_attention(&ctx, 4, 1, 256, 40, 3000);
		test_attention_window(&ctx, 4, 1, 256, 40, 700, 512);
	}
	ctx.attn_tiles = 0;
	/* head_dim 512 (Gemma 4's global layers) on the tensor cores, its
	   dims over 4 warps (16 rows a block, 32-key tiles): a group of 8
	   (the 31B's), a partial tile, a follow-up turn after a long cache
	   (keys split and merged), a window */
	test_attention(&ctx, 8, 1, 512, 40, 300);
	test_attention(&ctx, 32, 4, 512, 19, 0);
	test_attention(&ctx, 8, 1, 512, 64, 6000);
	test_attention_window(&ctx, 8, 2, 512, 33, 2000, 1024);
	/* a follow-up turn deep in a chat (64 queries of a group of 4 after
	   16,000 positions: the keys split into chunks of whole 64-key
	   tiles), a window over split keys, a group of 7 whose rows straddle
	   the blocks' tokens, and the smaller head */
	test_attention(&ctx, 8, 2, 128, 64, 16000);
	test_attention_window(&ctx, 8, 2, 128, 64, 5000, 1024);
	test_attention(&ctx, 14, 2, 128, 23, 3001);
	test_attention(&ctx, 8, 2, 64, 200, 3000);
	test_attention_window(&ctx, 16, 2, 64, 77, 900, 129);
	/* head_dim 512 (Gemma 4's global layers): decode on the generic
	   split kernel (49 KiB of shared memory) and its merge in slices of
	   32 (a head wider than the merge's threads), one stage and several
	   (a long cache), a window; small batches */
	test_attention(&ctx, 8, 1, 512, 1, 0);
	test_attention(&ctx, 8, 1, 512, 1, 333);
	test_attention(&ctx, 16, 2, 512, 3, 5000);
	test_attention(&ctx, 2, 1, 512, 1, 20000);
	test_attention_window(&ctx, 4, 1, 512, 1, 3000, 512);
	test_attention(&ctx, 8, 1, 512, 20, 40);
	test_attention_window(&ctx, 4, 2, 512, 64, 700, 100);
	test_attention_graph_scratch();
	test_attention_graph_512();
	/* Qwen3.5's recurrent layers: the conv (runs of 32 tokens per
	   thread, a decode row of a real layer's 10,240 channels, 8 and 2
	   taps), the element-wise ops, and the delta rule: decode, tiny heads
	   (16, HV = 2 HK), chunk boundaries (70, 150, 200, 300 tokens, none a
	   multiple of 64), Qwen3.5's heads of 128 (16/32 heads), a head of
	   256, two segments of scratch (1,100 tokens), a state carried over
	   two calls and then through decode steps */
	test_ssm_conv(&ctx, 999, 4, 100);
	test_ssm_conv(&ctx, 10240, 4, 1);
	test_ssm_conv(&ctx, 300, 8, 70);
	test_ssm_conv(&ctx, 64, 2, 5);
	test_ssm_elementwise(&ctx);
	test_gdn(&ctx, 2, 4, 32, 1, 0, 0);
	test_gdn(&ctx, 4, 8, 128, 1, 0, 0);
	test_gdn(&ctx, 2, 4, 32, 3, 1, 0);
	test_gdn(&ctx, 1, 2, 16, 150, 100, 0);
	test_gdn(&ctx, 2, 2, 64, 70, 7, 0);
	test_gdn(&ctx, 2, 4, 128, 200, 130, 0);
	test_gdn(&ctx, 2, 4, 128, 200, 130, 1);
	test_gdn(&ctx, 1, 1, 256, 65, 64, 0);
	test_gdn(&ctx, 16, 32, 128, 300, 257, 0);
	test_gdn(&ctx, 1, 2, 64, 1100, 1030, 1);
	cuda_ctx_free(&ctx);
	return tap_done();
}

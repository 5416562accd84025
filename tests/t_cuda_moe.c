/*
 * t_cuda_moe.c - a mixture's routing and expert products on the GPU
 * (cuda_op_moe_route against the CPU's model_moe_route; cuda_op_moe_gated,
 * cuda_op_moe_down): the grouped tensor-core products of a prefill chunk
 * (cuda_moe.cu) against the mat-vec of every slot (cuda_matmul.cu) and
 * both against a host double reference; built only when configure found
 * CUDA, "1..0 # SKIP" without a device.
 *
 * Each case is a random stack of experts (several types, the GPU layouts
 * of Q8_0, Q4_K and Q6_K as the backend uploads them, 8..128 experts, k
 * 2..8), chunks of 1, 7, 64 and 512 tokens routed uniformly or skewed
 * (one expert in three slots of four tokens, half the experts in none),
 * SiLU, GELU and gpt-oss's clamped SwiGLU with its biases. The bound of
 * each element comes from the path's roundings: the grouped path rounds
 * weights and inputs to fp16 (2^-11 each) and sums in fp32, so its error
 * is at most about 2^-10 sum |w x| plus the sums' rounding; the mat-vec
 * sums the weights with the CPU's int8 activations (compared with the
 * double product of those) or with fp32 ones, so only the sums' rounding.
 * The gated outputs carry the products' errors through act(g) * u
 * (Lipschitz constant of each activation 1.15 at most). A wrong row,
 * expert, slot or bias is off by the values themselves, far above these
 * bounds; the worst ratio error / bound of each check is printed.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_ops.h"
#include "cuda_util.h"
#include "f16.h"
#include "model.h"
#include "quant.h"
#include "tap.h"

static uint64_t rng_state = 0x243F6A8885A308D3ull;

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

/* Random rows of type T (t_cuda_ops.c's random_rows, and MXFP4): random
 * bytes, then the block scales set to finite values of realistic size. */
static void random_rows(uint32_t t, unsigned char *p, int64_t ne0, int64_t ne1)
{
	const struct qtype_info *qi = qtype_get(t);
	size_t rs = quant_row_size(t, ne0);
	int64_t nb = ne1 * (ne0 / qi->blck_size);

	if (t == QTYPE_F16) {
		for (int64_t i = 0; i < ne0 * ne1; i++)
			put_half(p + 2 * i, rng_unif(-1.0f, 1.0f));
		return;
	}
	for (size_t i = 0; i < rs * (size_t)ne1; i++)
		p[i] = (unsigned char)rng_next();
	for (int64_t b = 0; b < nb; b++) {
		unsigned char *blk = p + (size_t)b * qi->type_size;
		float d = rng_unif(1e-3f, 2e-2f) * (rng_next() & 1 ? 1 : -1);
		float m = rng_unif(-2e-2f, 2e-2f);

		switch (t) {
		case QTYPE_Q8_0:
			put_half(blk, d);
			break;
		case QTYPE_Q4_K:
			put_half(blk, d);
			put_half(blk + 2, m);
			break;
		case QTYPE_Q6_K:
			put_half(blk + 208, d);
			break;
		case QTYPE_MXFP4: /* 2^(e - 128) times values up to 12 */
			/* every fourth row's scales past the fp16-exact
			   range of cuda_dec8.cuh's fast decoding (2^6..2^8:
			   its float path), whole rows so that their sums
			   show that path's errors */
			blk[0] = (unsigned char)(b / (ne0 / 32) % 4 == 3
			                             ? 134 + rng_next() % 3
			                             : 121 + rng_next() % 4);
			break;
		}
	}
}

/* A stack of experts on the device and its weights on the host. */
struct stack {
	struct cuda_tensor ct; /* as the ops take it */
	float *w;              /* [ne2][ne1][ne0] dequantized */
	float *b;              /* [ne2][ne1] bias (or NULL) */
	void *d_raw, *d_b;     /* file layout (and GPU layout: ct.d) */
};

/* A random stack of N_EXPERT matrices NE1 x NE0 of type T, in its GPU
 * layout when REPACK and T has one; a random bias when BIAS. */
static int stack_make(struct cuda_ctx *ctx, struct stack *s, uint32_t t,
                      int64_t ne0, int64_t ne1, int n_expert, int repack,
                      int bias)
{
	const int64_t rows = ne1 * n_expert;
	size_t rs = quant_row_size(t, ne0);
	unsigned char *h = malloc(rs * (size_t)rows);
	char err[256] = "";

	memset(s, 0, sizeof(*s));
	s->w = malloc(sizeof(float) * (size_t)(rows * ne0));
	random_rows(t, h, ne0, rows);
	for (int64_t r = 0; r < rows; r++)
		quant_dequant_row(t, h + (size_t)r * rs, s->w + r * ne0, ne0);
	s->d_raw = dev_put(h, rs * (size_t)rows);
	free(h);
	s->ct = (struct cuda_tensor){t, ne0, ne1, rs, s->d_raw, n_expert};
	if (repack && cuda_repack_type(t) != t) {
		uint32_t rt = cuda_repack_type(t);
		size_t rrs = cuda_repack_row_size(rt, ne0);
		void *d = dev_put(NULL, rrs * (size_t)rows);

		if (cuda_op_repack(ctx, t, ne0, rows, s->d_raw, d, err,
		                   sizeof(err)) != 0 ||
		    cudaStreamSynchronize(ctx->stream) != cudaSuccess) {
			tap_diag("repack %s: %s", qtype_name(t), err);
			cudaFree(d);
			return -1;
		}
		cudaFree(s->d_raw);
		s->d_raw = d;
		s->ct.type = rt;
		s->ct.row_size = rrs;
		s->ct.d = d;
	}
	if (bias) {
		s->b = malloc(sizeof(float) * (size_t)rows);
		for (int64_t i = 0; i < rows; i++)
			s->b[i] = rng_unif(-0.5f, 0.5f);
		s->d_b = dev_put(s->b, sizeof(float) * (size_t)rows);
	}
	return 0;
}

static void stack_free(struct stack *s)
{
	cudaFree(s->d_raw);
	cudaFree(s->d_b);
	free(s->w);
	free(s->b);
}

/* IDS [n_tok][k]: k distinct experts a token; SKEW: expert 0 in three
 * tokens of four, the others from the lower half only (at least k). */
static void make_ids(int32_t *ids, int n_tok, int k, int n_expert, int skew)
{
	int range = skew ? (n_expert / 2 > k ? n_expert / 2 : k) : n_expert;

	for (int t = 0; t < n_tok; t++) {
		int32_t *c = ids + (size_t)t * k;
		int j = 0;

		if (skew && rng_next() % 4 != 0)
			c[j++] = 0;
		while (j < k) {
			int32_t e = (int32_t)(rng_next() % (uint64_t)range);
			int dup = 0;

			for (int q = 0; q < j; q++)
				dup |= c[q] == e;
			if (!dup)
				c[j++] = e;
		}
	}
}

/* The activations (model.h, cuda_act.cuh), in double. */
static double act_mul(enum model_act act, double g, double u)
{
	switch (act) {
	case MODEL_ACT_GELU_TANH:
		return 0.5 * g *
		       (1.0 + tanh(0.79788456080286535587989211986876 * g *
		                   (1.0 + 0.044715 * g * g))) *
		       u;
	case MODEL_ACT_SWIGLU_OAI: {
		const double x = g < 7.0 ? g : 7.0;
		const double y = u < -7.0 ? -7.0 : u > 7.0 ? 7.0 : u;

		return x / (1.0 + exp(-1.702 * x)) * (y + 1.0);
	}
	default:
		return g / (1.0 + exp(-g)) * u;
	}
}

/* The bound of |act(g') u' - act(g) u| for |g' - g| <= EG,
 * |u' - u| <= EU (the activation's slope at most 1.15; gpt-oss's u
 * clamped to [-7, 7] and offset by 1), plus the float evaluation of the
 * activation itself. */
static double act_bound(enum model_act act, double g, double u, double eg,
                        double eu)
{
	const double L = 1.15;
	double ua = fabs(u), ag = fabs(act_mul(act, g, 1.0));

	if (act == MODEL_ACT_SWIGLU_OAI) {
		ua = fabs((u < -7.0 ? -7.0 : u > 7.0 ? 7.0 : u) + 1.0);
		ag = fabs(act_mul(act, g, 0.0)); /* x sigmoid(1.702 x) */
	}
	return L * (ua + eu) * eg + (ag + L * eg) * eu +
	       4e-6 * fabs(act_mul(act, g, u)) + 1e-7;
}

/* The bound of a product's error with sum |w x| = SABS over K inputs:
 * FP16 (the grouped path): both factors rounded to fp16, and fp32 sums
 * (the tensor cores' included: K 2^-22); else the mat-vec's fp32 sums. */
static double prod_bound(double sabs, int64_t k, int fp16)
{
	return sabs * ((fp16 ? 1.5 * 0x1p-10 : 0.0) + (double)k * 0x1p-22) +
	       1e-6;
}

/* One case: a mixture's gated and down stacks and its routing. */
struct moe_case {
	uint32_t tg, tu, td; /* types of gate, up and down */
	int repack;          /* Q8_0, Q4_K, Q6_K in their GPU layouts */
	int n_expert, k;
	int64_t n_embd, n_ff; /* the products' sizes */
	enum model_act act;
	int bias; /* gpt-oss's biases */
	int skew; /* make_ids' */
};

/* Worst error / bound of a path's output against its reference. */
struct worst {
	double ratio, err;
};

static void worst_add(struct worst *w, double got, double want, double bound)
{
	const double e = fabs(got - want);
	const double r = isnan(e) ? INFINITY : e / bound; /* NaN: worst */

	if (r > w->ratio)
		w->ratio = r;
	if (isnan(e) || e > w->err)
		w->err = isnan(e) ? INFINITY : e;
}

/* Whether two float arrays of N are the same bits. */
static int same_bits(const float *a, const float *b, size_t n)
{
	return memcmp(a, b, n * sizeof(float)) == 0;
}

/* The host reference of a stack's products over N rows of inputs X (NE0
 * each) for slots s < N_SLOTS (slot s reads row s / X_DIV, expert
 * IDS[s]): Y[s][r] (double, the bias added) and SABS[s][r] = sum |w x|;
 * X8: with the CPU's int8 activations instead (XH: X dequantized so). */
static void ref_products(const struct stack *st, const double *xh,
                         int32_t n_slots, int x_div, const int32_t *ids,
                         double *y, double *sabs)
{
	const int64_t ne0 = st->ct.ne0, ne1 = st->ct.ne1;

	for (int32_t s = 0; s < n_slots; s++) {
		const double *x = xh + (int64_t)(s / x_div) * ne0;
		const float *we = st->w + (int64_t)ids[s] * ne1 * ne0;

		for (int64_t r = 0; r < ne1; r++) {
			const float *wr = we + r * ne0;
			double acc = 0, ab = 0;

			for (int64_t i = 0; i < ne0; i++) {
				acc += (double)wr[i] * x[i];
				ab += fabs((double)wr[i] * x[i]);
			}
			if (st->b != NULL) {
				acc += st->b[(int64_t)ids[s] * ne1 + r];
				ab += fabs(st->b[(int64_t)ids[s] * ne1 + r]) *
				      0x1p-2; /* (one fp32 addition) */
			}
			y[(size_t)s * ne1 + r] = acc;
			sabs[(size_t)s * ne1 + r] = ab;
		}
	}
}

/* X (N rows of NE0 floats) in double, or as the int8 mat-vec sees it. */
static double *x_host(const float *x, int64_t ne0, int64_t n, int x8)
{
	double *d = malloc(sizeof(double) * (size_t)(n * ne0));

	if (x8)
		x8_dequant(x, ne0, n, d);
	else
		for (int64_t i = 0; i < n * ne0; i++)
			d[i] = x[i];
	return d;
}

/* Path names for the messages. */
static const char *path_name(int force)
{
	return force == 2 ? "grouped" : force == 1 ? "mat-vec" : "by size";
}

/*
 * The gated product of C over N_TOK tokens: FORCE 1 (mat-vec, the slots
 * in the sort's order as the backend gives them), 2 (grouped) and 0 (the
 * launcher's choice: the same bits as the forced path it picks), each
 * against the double reference of its arithmetic, the grouped against
 * the mat-vec. Returns the grouped output in *H_OUT (the down product's
 * input).
 */
static void test_gated(struct cuda_ctx *ctx, const struct moe_case *c,
                       const char *name, const struct stack *g,
                       const struct stack *u, const float *x, int n_tok,
                       const int32_t *ids, const int32_t *d_ids,
                       const int32_t *d_perm, float **h_out)
{
	const int k = c->k;
	const int32_t n_slots = n_tok * k;
	const int64_t ne0 = c->n_embd, nf = c->n_ff;
	const size_t ny = (size_t)n_slots * nf;
	float *out[5], *d_x, *d_g, *d_u;
	double *yg[2], *yu[2], *ag[2], *au[2];
	struct worst w[2] = {{0, 0}, {0, 0}}, wd = {0, 0};
	char err[512] = "";
	int x8g, x8u, ok = 1, chose = 0;

	d_x = dev_put(x, sizeof(float) * (size_t)(n_tok * ne0));
	d_g = dev_put(NULL, sizeof(float) * ny);
	d_u = dev_put(NULL, sizeof(float) * ny);
	/* f 3: the mat-vec with every row group a whole warp; f 4: its
	   separate launches (no fused epilogue) */
	for (int f = 0; f < 5; f++) {
		out[f] = malloc(sizeof(float) * ny);
		cuda_op_moe_grouped_force(f == 0 || f >= 3 ? 1
		                          : f == 1         ? 2
		                                           : 0);
		if (f == 2)
			chose = cuda_op_moe_grouped(ctx, &g->ct, n_slots) &&
			        cuda_op_moe_grouped(ctx, &u->ct, n_slots);
		ctx->lanes_off = f == 3;
		ctx->moe_fuse_off = f == 4;
		cudaMemsetAsync(d_g, 0xff, sizeof(float) * ny, ctx->stream);
		if (cuda_op_moe_gated(ctx, c->act, &g->ct, &u->ct, d_x, NULL,
		                      n_tok, k, d_ids,
		                      n_tok > 1 ? d_perm : NULL, g->d_b, u->d_b,
		                      d_g, d_u, err, sizeof(err)) != 0 ||
		    dev_get(ctx, out[f], d_g, sizeof(float) * ny) != 0) {
			tap_diag("%s", err);
			ok = 0;
		}
	}
	ctx->lanes_off = 0;
	ctx->moe_fuse_off = 0;
	cuda_op_moe_grouped_force(0);
	/* the references: [0] the mat-vec's activations, [1] fp32 ones */
	x8g = cuda_op_matvec_x8(ctx, &g->ct, n_tok);
	x8u = cuda_op_matvec_x8(ctx, &u->ct, n_tok);
	for (int p = 0; p < 2; p++) {
		double *xg = x_host(x, ne0, n_tok, p == 0 && x8g);
		double *xu = x_host(x, ne0, n_tok, p == 0 && x8u);

		yg[p] = malloc(sizeof(double) * ny);
		yu[p] = malloc(sizeof(double) * ny);
		ag[p] = malloc(sizeof(double) * ny);
		au[p] = malloc(sizeof(double) * ny);
		ref_products(g, xg, n_slots, k, ids, yg[p], ag[p]);
		ref_products(u, xu, n_slots, k, ids, yu[p], au[p]);
		free(xg);
		free(xu);
	}
	for (size_t i = 0; ok && i < ny; i++) {
		double bm = 0, bg = 0;

		for (int p = 0; p < 2; p++) {
			const double eg = prod_bound(ag[p][i], ne0, p == 1);
			const double eu = prod_bound(au[p][i], ne0, p == 1);
			const double b =
			    act_bound(c->act, yg[p][i], yu[p][i], eg, eu);

			worst_add(&w[p], out[p][i],
			          act_mul(c->act, yg[p][i], yu[p][i]), b);
			*(p ? &bg : &bm) = b;
		}
		/* the triangle through the two references: where the
		   mat-vec takes int8 activations, its reference is the
		   product of those, the grouped path's of the fp32 ones */
		worst_add(&wd, out[1][i], out[0][i],
		          bm + bg +
		              fabs(act_mul(c->act, yg[0][i], yu[0][i]) -
		                   act_mul(c->act, yg[1][i], yu[1][i])));
	}
	tap_ok(ok && w[0].ratio <= 1.0,
	       "%s gated, %d tokens: mat-vec (%s activations) vs double: "
	       "worst %.3g of the bound, |err| %.3g",
	       name, n_tok, x8g || x8u ? "int8" : "fp32", w[0].ratio, w[0].err);
	tap_ok(ok && w[1].ratio <= 1.0,
	       "%s gated, %d tokens: grouped vs double: worst %.3g of the "
	       "bound, |err| %.3g",
	       name, n_tok, w[1].ratio, w[1].err);
	tap_ok(ok && wd.ratio <= 1.0,
	       "%s gated, %d tokens: grouped vs mat-vec: worst %.3g of the "
	       "bound, |diff| %.3g",
	       name, n_tok, wd.ratio, wd.err);
	tap_ok(ok && same_bits(out[2], out[chose ? 1 : 0], ny),
	       "%s gated, %d tokens: by size takes the %s path, its bits", name,
	       n_tok, path_name(chose ? 2 : 1));
	tap_ok(ok && same_bits(out[0], out[3], ny),
	       "%s gated, %d tokens: the mat-vec's row groups of %d lanes "
	       "give a whole warp's bits",
	       name, n_tok, cuda_op_matvec_lanes(ctx, &g->ct, n_tok, 1));
	tap_ok(ok && same_bits(out[0], out[4], ny),
	       "%s gated, %d tokens: the mat-vec's one launch%s gives its "
	       "separate launches' bits",
	       name, n_tok, g->d_b != NULL ? " with the biases" : "");
	*h_out = out[1];
	free(out[0]);
	free(out[2]);
	free(out[3]);
	free(out[4]);
	for (int p = 0; p < 2; p++) {
		free(yg[p]);
		free(yu[p]);
		free(ag[p]);
		free(au[p]);
	}
	cudaFree(d_x);
	cudaFree(d_g);
	cudaFree(d_u);
}

/*
 * cuda_op_moe_down_sum over N_TOK tokens' K slots of D_H, the mat-vec
 * path forced: its one launch (the down products, the biases, the
 * weighted sum added to a residual) against its separate launches
 * (ctx->moe_fuse_off), bit for bit, and the sum against the host's of
 * the separate products (the same float operations in the same order).
 */
static void test_down_sum(struct cuda_ctx *ctx, const char *name,
                          const struct stack *d, const float *d_h, int n_tok,
                          int k, const int32_t *d_ids, const int32_t *d_perm)
{
	const int32_t n_slots = n_tok * k;
	const int64_t ne = d->ct.ne1;
	const size_t nr = (size_t)n_tok * ne, ny = (size_t)n_slots * ne;
	float *wts = malloc(sizeof(float) * (size_t)n_slots);
	float *res = malloc(sizeof(float) * nr), *got[2], *prod;
	float *d_w, *d_y, *d_out;
	char err[512] = "";
	int ok = 1;
	size_t bad = 0;

	for (int32_t i = 0; i < n_slots; i++)
		wts[i] = rng_unif(0.0f, 0.5f);
	for (size_t i = 0; i < nr; i++)
		res[i] = rng_unif(-1.0f, 1.0f);
	d_w = dev_put(wts, sizeof(float) * (size_t)n_slots);
	d_y = dev_put(NULL, sizeof(float) * ny);
	d_out = dev_put(NULL, sizeof(float) * nr);
	prod = malloc(sizeof(float) * ny);
	cuda_op_moe_grouped_force(1);
	for (int f = 0; f < 2; f++) {
		got[f] = malloc(sizeof(float) * nr);
		ctx->moe_fuse_off = f == 1;
		cudaMemcpyAsync(d_out, res, sizeof(float) * nr,
		                cudaMemcpyHostToDevice, ctx->stream);
		if (cuda_op_moe_down_sum(ctx, &d->ct, d_h, n_tok, k, d_ids,
		                         n_tok > 1 ? d_perm : NULL, d->d_b, d_w,
		                         d_y, d_out, 1, err,
		                         sizeof(err)) != 0 ||
		    dev_get(ctx, got[f], d_out, sizeof(float) * nr) != 0 ||
		    (f == 1 && dev_get(ctx, prod, d_y, sizeof(float) * ny))) {
			tap_diag("%s", err);
			ok = 0;
		}
	}
	ctx->moe_fuse_off = 0;
	cuda_op_moe_grouped_force(0);
	for (int t = 0; ok && t < n_tok; t++)
		for (int64_t i = 0; i < ne; i++) {
			volatile float y =
			    wts[t * k] * prod[(size_t)t * k * ne + i];

			for (int q = 1; q < k; q++) {
				volatile float m =
				    wts[t * k + q] *
				    prod[((size_t)t * k + q) * ne + i];

				y = y + m;
			}
			y = res[(size_t)t * ne + i] + y;
			bad +=
			    f16_f32_bits(y) != f16_f32_bits(got[1][t * ne + i]);
		}
	tap_ok(ok && bad == 0 && same_bits(got[0], got[1], nr),
	       "%s down and sum, %d tokens of %d slots: one launch gives the "
	       "separate launches' bits, their sum the host's (%zu differ)",
	       name, n_tok, k, bad);
	for (int f = 0; f < 2; f++)
		free(got[f]);
	free(prod);
	free(wts);
	free(res);
	cudaFree(d_w);
	cudaFree(d_y);
	cudaFree(d_out);
}

/* The down product of C over the N_SLOTS rows of H: as test_gated. */
static void test_down(struct cuda_ctx *ctx, const struct moe_case *c,
                      const char *name, const struct stack *d, const float *h,
                      int n_tok, const int32_t *ids, const int32_t *d_ids,
                      const int32_t *d_perm)
{
	const int32_t n_slots = n_tok * c->k;
	const int64_t nf = c->n_ff, ne = c->n_embd;
	const size_t ny = (size_t)n_slots * ne;
	float *out[4], *d_h, *d_y;
	double *y[2], *sa[2];
	struct worst w[2] = {{0, 0}, {0, 0}}, wd = {0, 0};
	char err[512] = "";
	int x8, ok = 1, chose = 0;

	d_h = dev_put(h, sizeof(float) * (size_t)n_slots * nf);
	d_y = dev_put(NULL, sizeof(float) * ny);
	for (int f = 0; f < 4; f++) { /* (f 3 as in test_gated) */
		out[f] = malloc(sizeof(float) * ny);
		cuda_op_moe_grouped_force(f == 0 || f == 3 ? 1
		                          : f == 1         ? 2
		                                           : 0);
		if (f == 2)
			chose = cuda_op_moe_grouped(ctx, &d->ct, n_slots);
		ctx->lanes_off = f == 3;
		cudaMemsetAsync(d_y, 0xff, sizeof(float) * ny, ctx->stream);
		if (cuda_op_moe_down(ctx, &d->ct, d_h, n_slots, d_ids,
		                     n_tok > 1 ? d_perm : NULL, d->d_b, d_y,
		                     err, sizeof(err)) != 0 ||
		    dev_get(ctx, out[f], d_y, sizeof(float) * ny) != 0) {
			tap_diag("%s", err);
			ok = 0;
		}
	}
	ctx->lanes_off = 0;
	cuda_op_moe_grouped_force(0);
	x8 = cuda_op_matvec_x8(ctx, &d->ct, n_slots);
	for (int p = 0; p < 2; p++) {
		double *xh = x_host(h, nf, n_slots, p == 0 && x8);

		y[p] = malloc(sizeof(double) * ny);
		sa[p] = malloc(sizeof(double) * ny);
		ref_products(d, xh, n_slots, 1, ids, y[p], sa[p]);
		free(xh);
	}
	for (size_t i = 0; ok && i < ny; i++) {
		const double bm = prod_bound(sa[0][i], nf, 0);
		const double bg = prod_bound(sa[1][i], nf, 1);

		worst_add(&w[0], out[0][i], y[0][i], bm);
		worst_add(&w[1], out[1][i], y[1][i], bg);
		/* (the triangle through the two references, as above) */
		worst_add(&wd, out[1][i], out[0][i],
		          bm + bg + fabs(y[0][i] - y[1][i]));
	}
	tap_ok(ok && w[0].ratio <= 1.0,
	       "%s down, %d slots: mat-vec (%s activations) vs double: "
	       "worst %.3g of the bound, |err| %.3g",
	       name, n_slots, x8 ? "int8" : "fp32", w[0].ratio, w[0].err);
	tap_ok(ok && w[1].ratio <= 1.0,
	       "%s down, %d slots: grouped vs double: worst %.3g of the "
	       "bound, |err| %.3g",
	       name, n_slots, w[1].ratio, w[1].err);
	tap_ok(ok && wd.ratio <= 1.0,
	       "%s down, %d slots: grouped vs mat-vec: worst %.3g of the "
	       "bound, |diff| %.3g",
	       name, n_slots, wd.ratio, wd.err);
	tap_ok(ok && same_bits(out[2], out[chose ? 1 : 0], ny),
	       "%s down, %d slots: by size takes the %s path, its bits", name,
	       n_slots, path_name(chose ? 2 : 1));
	tap_ok(ok && same_bits(out[0], out[3], ny),
	       "%s down, %d slots: the mat-vec's row groups of %d lanes give "
	       "a whole warp's bits",
	       name, n_slots, cuda_op_matvec_lanes(ctx, &d->ct, n_slots, 0));
	test_down_sum(ctx, name, d, d_h, n_tok, c->k, d_ids, d_perm);
	for (int f = 0; f < 4; f++)
		free(out[f]);
	for (int p = 0; p < 2; p++) {
		free(y[p]);
		free(sa[p]);
	}
	cudaFree(d_h);
	cudaFree(d_y);
}

/*
 * The routing (cuda_op_moe_route) of N_TOK tokens of random router logits
 * over N_EXPERT experts against the CPU's model_moe_route: the same ids in
 * the same order (every token's logits hold exact ties, which both break
 * by the lower index), the weights within a few float roundings (expf and
 * the softmax's sum differ in order only). Expert counts that take each
 * width of the kernel (4, 8 and 32 experts a lane) and their edges.
 */
static void test_route(struct cuda_ctx *ctx, int32_t n_expert, int32_t k,
                       enum model_moe_gating gating, bool norm_w)
{
	const int n_tok = 9;
	const size_t nr = (size_t)n_tok * n_expert, nk = (size_t)n_tok * k;
	float *rl = malloc(sizeof(float) * nr), *w = malloc(sizeof(float) * nk);
	float *sc = malloc(sizeof(float) * n_expert), cw[64];
	int32_t *ids = malloc(sizeof(int32_t) * nk), cid[64];
	struct model_ffn f;
	char err[256] = "";
	int bad_ids = 0, rc;
	double worst = 0;

	memset(&f, 0, sizeof(f));
	f.kind = MODEL_FFN_EXPERTS;
	f.n_expert = n_expert;
	f.n_expert_used = k;
	f.gating = gating;
	f.norm_w = norm_w;
	f.w_scale = 1.0f;
	for (size_t i = 0; i < nr; i++)
		rl[i] = rng_unif(-4.0f, 4.0f);
	for (int t = 0; t < n_tok; t++) { /* ties among the largest */
		float *r = rl + (size_t)t * n_expert;
		int32_t top = 0;

		for (int32_t e = 1; e < n_expert; e++)
			top = r[e] > r[top] ? e : top;
		r[(top + 1 + t) % n_expert] = r[top];
		r[(size_t)(n_expert - 1 - t % n_expert)] = r[top];
	}
	float *d_rl = dev_put(rl, sizeof(float) * nr),
	      *d_w = dev_put(NULL, sizeof(float) * nk);
	int32_t *d_ids = dev_put(NULL, sizeof(int32_t) * nk);

	rc =
	    cuda_op_moe_route(ctx, d_rl, n_tok, n_expert, k, gating, norm_w,
	                      1.0f, d_ids, d_w, NULL, NULL, err, sizeof(err)) ||
	    dev_get(ctx, ids, d_ids, sizeof(int32_t) * nk) ||
	    dev_get(ctx, w, d_w, sizeof(float) * nk);
	for (int t = 0; !rc && t < n_tok; t++) {
		model_moe_route(&f, rl + (size_t)t * n_expert, sc, cid, cw);
		for (int j = 0; j < k; j++) {
			const double e =
			    fabs((double)w[t * k + j] - cw[j]) /
			    (fabs(cw[j]) > 1e-30 ? fabs(cw[j]) : 1);

			bad_ids += ids[t * k + j] != cid[j];
			worst = e > worst ? e : worst;
		}
	}
	if (rc)
		tap_diag("%s", err);
	tap_ok(!rc && bad_ids == 0 && worst <= 4e-6,
	       "routing, %d experts choosing %d (%s%s): the CPU's ids in its "
	       "order (%d differ), weights within %.3g relative (<= 4e-6)",
	       n_expert, k,
	       gating == MODEL_MOE_SOFTMAX ? "softmax, top-k"
	                                   : "top-k, softmax",
	       norm_w ? ", renormalised" : "", bad_ids, worst);
	free(rl);
	free(w);
	free(sc);
	free(ids);
	cudaFree(d_rl);
	cudaFree(d_w);
	cudaFree(d_ids);
}

/* A biased router's product (cuda_op_matvec_bias, F32 rows as a GGUF
 * router's) over N_TOK tokens: the bias in the mat-vec's epilogue gives
 * the bits of the product and cuda_op_add_bias (ctx->moe_fuse_off). */
static void test_matvec_bias(struct cuda_ctx *ctx, int64_t ne0, int64_t ne1,
                             int32_t n_tok)
{
	const size_t nw = (size_t)(ne0 * ne1), nx = (size_t)(n_tok * ne0),
	             ny = (size_t)(n_tok * ne1);
	float *w = malloc(sizeof(float) * nw), *x = malloc(sizeof(float) * nx);
	float *b = malloc(sizeof(float) * (size_t)ne1), *got[2];
	char err[512] = "";
	int ok = 1;

	for (size_t i = 0; i < nw; i++)
		w[i] = rng_unif(-0.05f, 0.05f);
	for (size_t i = 0; i < nx; i++)
		x[i] = rng_unif(-1.0f, 1.0f);
	for (int64_t i = 0; i < ne1; i++)
		b[i] = rng_unif(-1.0f, 1.0f);
	void *d_w = dev_put(w, sizeof(float) * nw);
	float *d_x = dev_put(x, sizeof(float) * nx),
	      *d_b = dev_put(b, sizeof(float) * (size_t)ne1),
	      *d_y = dev_put(NULL, sizeof(float) * ny);
	struct cuda_tensor ct = {
	    QTYPE_F32, ne0, ne1, sizeof(float) * (size_t)ne0, d_w, 1};

	for (int f = 0; f < 2; f++) {
		got[f] = malloc(sizeof(float) * ny);
		ctx->moe_fuse_off = f == 1;
		if (cuda_op_matvec_bias(ctx, &ct, d_x, n_tok, d_b, d_y, err,
		                        sizeof(err)) != 0 ||
		    dev_get(ctx, got[f], d_y, sizeof(float) * ny) != 0) {
			tap_diag("%s", err);
			ok = 0;
		}
	}
	ctx->moe_fuse_off = 0;
	tap_ok(ok && same_bits(got[0], got[1], ny),
	       "router %lldx%lld F32 with a bias, %d tokens: the bias in the "
	       "mat-vec's launch gives the separate add's bits",
	       (long long)ne1, (long long)ne0, n_tok);
	for (int f = 0; f < 2; f++)
		free(got[f]);
	free(w);
	free(x);
	free(b);
	cudaFree(d_w);
	cudaFree(d_x);
	cudaFree(d_b);
	cudaFree(d_y);
}

/* gpt-oss's attention output (cuda_op_matmul_add_bias): Y += W X + B over
 * N_TOK tokens, W NE1 x NE0 of type T (in its GPU layout), in one launch
 * (the bias and the residual in the mat-vec's epilogue) gives the bits of
 * the product, cuda_op_add_bias and cuda_op_add (ctx->moe_fuse_off). */
static void test_matmul_add_bias(struct cuda_ctx *ctx, uint32_t t, int64_t ne0,
                                 int64_t ne1, int32_t n_tok)
{
	const size_t nx = (size_t)(n_tok * ne0), ny = (size_t)(n_tok * ne1);
	float *x = malloc(sizeof(float) * nx), *y0 = malloc(sizeof(float) * ny);
	float *got[2] = {malloc(sizeof(float) * ny),
	                 malloc(sizeof(float) * ny)};
	float *d_x = NULL, *d_y = NULL, *d_tmp = NULL;
	struct stack w;
	char err[512] = "";
	int ok = stack_make(ctx, &w, t, ne0, ne1, 1, 1, 1) == 0;

	for (size_t i = 0; i < nx; i++)
		x[i] = rng_unif(-1.0f, 1.0f);
	for (size_t i = 0; i < ny; i++)
		y0[i] = rng_unif(-4.0f, 4.0f);
	d_x = dev_put(x, sizeof(float) * nx);
	d_y = dev_put(NULL, sizeof(float) * ny);
	d_tmp = dev_put(NULL, sizeof(float) * ny);
	for (int f = 0; ok && f < 2; f++) {
		ctx->moe_fuse_off = f == 1;
		if (cudaMemcpy(d_y, y0, sizeof(float) * ny,
		               cudaMemcpyHostToDevice) != cudaSuccess ||
		    cuda_op_matmul_add_bias(ctx, &w.ct, d_x, NULL, n_tok,
		                            (const float *)w.d_b, d_y, d_tmp,
		                            err, sizeof(err)) != 0 ||
		    dev_get(ctx, got[f], d_y, sizeof(float) * ny) != 0) {
			tap_diag("%s", err);
			ok = 0;
		}
	}
	ctx->moe_fuse_off = 0;
	/* (and the sum moved the residual: a launch that did nothing
	   fails) */
	tap_ok(ok && same_bits(got[0], got[1], ny) &&
	           memcmp(got[0], y0, sizeof(float) * ny) != 0,
	       "%s %lldx%lld, a bias and the residual add, %d tokens: one "
	       "launch gives the separate launches' bits",
	       qtype_name(t), (long long)ne1, (long long)ne0, n_tok);
	stack_free(&w);
	for (int f = 0; f < 2; f++)
		free(got[f]);
	free(x);
	free(y0);
	cudaFree(d_x);
	cudaFree(d_y);
	cudaFree(d_tmp);
}

/* Case C over chunks of 1, 7, 64 and 512 tokens. */
static void test_case(struct cuda_ctx *ctx, const struct moe_case *c)
{
	static const int chunks[] = {1, 7, 64, 512};
	struct stack g, u, d;
	char name[160];
	char err[256] = "";

	snprintf(name, sizeof(name),
	         "%s/%s/%s%s, %d experts, k %d, %lldx%lld%s%s",
	         qtype_name(c->tg), qtype_name(c->tu), qtype_name(c->td),
	         c->repack ? " (GPU layouts)" : "", c->n_expert, c->k,
	         (long long)c->n_embd, (long long)c->n_ff,
	         c->bias ? ", biases" : "", c->skew ? ", skewed" : "");
	if (stack_make(ctx, &g, c->tg, c->n_embd, c->n_ff, c->n_expert,
	               c->repack, c->bias) ||
	    stack_make(ctx, &u, c->tu, c->n_embd, c->n_ff, c->n_expert,
	               c->repack, c->bias) ||
	    stack_make(ctx, &d, c->td, c->n_ff, c->n_embd, c->n_expert,
	               c->repack, c->bias)) {
		tap_ok(0, "%s: stacks", name);
		return;
	}
	for (size_t q = 0; q < sizeof(chunks) / sizeof(chunks[0]); q++) {
		const int n = chunks[q], k = c->k;
		float *x = malloc(sizeof(float) * (size_t)(n * c->n_embd));
		int32_t *ids = malloc(sizeof(int32_t) * (size_t)(n * k));
		int32_t *d_ids, *d_perm;
		float *h = NULL;

		/* (normed activations' size: the gated outputs, the down
		   product's fp16 inputs, stay far inside fp16's range) */
		for (int64_t i = 0; i < n * c->n_embd; i++)
			x[i] = rng_unif(-0.1f, 0.1f);
		make_ids(ids, n, k, c->n_expert, c->skew);
		d_ids = dev_put(ids, sizeof(int32_t) * (size_t)(n * k));
		d_perm = dev_put(NULL, sizeof(int32_t) * (size_t)(n * k));
		if (n > 1 && cuda_op_moe_sort(ctx, d_ids, n * k, c->n_expert,
		                              d_perm, err, sizeof(err)) != 0)
			tap_ok(0, "%s: sort: %s", name, err);
		test_gated(ctx, c, name, &g, &u, x, n, ids, d_ids, d_perm, &h);
		test_down(ctx, c, name, &d, h, n, ids, d_ids, d_perm);
		free(h);
		free(x);
		free(ids);
		cudaFree(d_ids);
		cudaFree(d_perm);
	}
	stack_free(&g);
	stack_free(&u);
	stack_free(&d);
}

int main(void)
{
	static const struct moe_case cases[] = {
	    /* Q8_0, few experts; rows not a multiple of the block's 64 */
	    {QTYPE_Q8_0, QTYPE_Q8_0, QTYPE_Q8_0, 0, 8, 2, 256, 96,
	     MODEL_ACT_SILU, 0, 0},
	    /* Qwen3-30B-A3B's mix, scaled down: 128 experts, k 8 */
	    {QTYPE_Q4_K, QTYPE_Q4_K, QTYPE_Q6_K, 0, 128, 8, 256, 256,
	     MODEL_ACT_SILU, 0, 1},
	    /* the same in the backend's GPU layouts */
	    {QTYPE_Q4_K, QTYPE_Q4_K, QTYPE_Q6_K, 1, 128, 8, 256, 256,
	     MODEL_ACT_SILU, 0, 0},
	    {QTYPE_Q8_0, QTYPE_Q8_0, QTYPE_Q8_0, 1, 16, 4, 320, 160,
	     MODEL_ACT_SILU, 0, 1},
	    /* Q6_K everywhere, GELU */
	    {QTYPE_Q6_K, QTYPE_Q6_K, QTYPE_Q6_K, 0, 64, 4, 256, 512,
	     MODEL_ACT_GELU_TANH, 0, 1},
	    /* F16: inputs not a multiple of the block's step (200, 72) */
	    {QTYPE_F16, QTYPE_F16, QTYPE_F16, 0, 16, 2, 200, 72, MODEL_ACT_SILU,
	     0, 0},
	    /* gpt-oss: MXFP4 experts, biases, the clamped SwiGLU */
	    {QTYPE_MXFP4, QTYPE_MXFP4, QTYPE_MXFP4, 0, 32, 4, 320, 288,
	     MODEL_ACT_SWIGLU_OAI, 1, 1},
	    {QTYPE_MXFP4, QTYPE_MXFP4, QTYPE_MXFP4, 0, 32, 4, 320, 288,
	     MODEL_ACT_SWIGLU_OAI, 1, 0},
	    /* gate and up of different types: two grouped launches and the
	       activation on its own */
	    {QTYPE_Q4_K, QTYPE_Q6_K, QTYPE_Q8_0, 0, 32, 2, 256, 256,
	     MODEL_ACT_SILU, 1, 0},
	};
	struct cuda_ctx ctx;
	char err[512] = "";
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
		return tap_skip_all("no CUDA device");
	/* the grouped plan lives in the weight scratch; int8 activations
	   for every slot of the down products (512 x 8 of 512) */
	if (cuda_ctx_init(&ctx, 1 << 20, 512 * 8 * 512, err, sizeof(err)) !=
	    0) {
		printf("Bail out! %s\n", err);
		return 1;
	}
	{
		static const int32_t ne[] = {6, 128, 129, 256, 257, 1024};

		for (size_t i = 0; i < sizeof(ne) / sizeof(ne[0]); i++) {
			test_route(&ctx, ne[i], 1, MODEL_MOE_SOFTMAX, false);
			test_route(&ctx, ne[i], ne[i] < 8 ? 4 : 8,
			           MODEL_MOE_SOFTMAX, true);
			test_route(&ctx, ne[i], 4, MODEL_MOE_TOPK_SOFTMAX,
			           false);
		}
	}
	test_matvec_bias(&ctx, 2880, 32, 1); /* gpt-oss-20b's router */
	test_matvec_bias(&ctx, 2048, 128, 3);
	/* gpt-oss-20b's attention output (64 heads of 64 into 2,880) */
	test_matmul_add_bias(&ctx, QTYPE_Q8_0, 4096, 2880, 1);
	test_matmul_add_bias(&ctx, QTYPE_Q8_0, 4096, 2880, 3);
	test_matmul_add_bias(&ctx, QTYPE_Q4_K, 512, 320, 2);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		test_case(&ctx, &cases[i]);
	cuda_ctx_free(&ctx);
	return tap_done();
}

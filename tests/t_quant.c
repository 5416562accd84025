/*
 * t_quant.c - quantized block formats against gguf-py, and the dots.
 *
 * 1. quant_dequant_row on random blocks of every computable type is
 *    bit-identical (memcmp) to gguf-py's numpy dequantization
 *    (tests/data/quant/TYPE.bin, made by tests/oracles/gen_quant.py), and
 *    so on adversarial blocks of the i-quant, TQ and FP4 types
 *    (TYPE.adv.bin: every grid index, sign pattern and scale value,
 *    extreme scales).
 * 2. quant_dot gives the same bits with the AVX2 (and AVX-512) and the
 *    portable kernels, on random and on adversarial rows.
 * 3. quant_dot is checked against float64 references, with a bound that
 *    follows from how the dot is computed (see check_dot):
 *      a. every prepared activation x^_i = d*q_i is within
 *         0.5001 * amax(block)/127 of x_i (round to nearest with float32
 *         d = amax/127 and 1/d: 0.5 + 127 * 3 * 2^-24 < 0.5001);
 *      b. |quant_dot - sum w_i x^_i| <= (nterms + 8) * 2^-24 * sum G_i |x^_i|,
 *         the float32 rounding of nterms block terms of <= 5 roundings each,
 *         where G_i = |d-part of w_i| + |min-part of w_i| (both parts
 *         obtained by dequantizing the block with the other half zeroed),
 *         nterms = blocks per row (16-lane sums of n/16 terms for floats;
 *         NVFP4: one term per 16);
 *    so |quant_dot - sum w_i x_i| <= bound(a) + bound(b).
 * 4. quant_row_size (against gguf-py's sizes.txt), quant_can_compute,
 *    quant_check_tensor's message, quant_vec_size, and NaN propagation
 *    from a non-finite activation.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "f16.h"
#include "quant.h"
#include "tap.h"

/* The data folder: $srcdir/tests/data/quant or ./tests/data/quant. */
static const char *data_dir(void)
{
	static char buf[4096];
	const char *s = getenv("top_srcdir");

	if (s == NULL)
		s = getenv("srcdir");

	snprintf(buf, sizeof buf, "%s/tests/data/quant", s ? s : ".");
	return buf;
}

/* Read file NAME from the data folder; returns malloc'd bytes or NULL. */
static uint8_t *read_data(const char *name, size_t *len)
{
	char path[4200];
	FILE *f;
	uint8_t *buf = NULL;
	long sz;

	snprintf(path, sizeof path, "%s/%s", data_dir(), name);
	f = fopen(path, "rb");
	if (f == NULL)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (sz = ftell(f)) > 0 &&
	    fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)sz)) != NULL &&
	    fread(buf, 1, (size_t)sz, f) != (size_t)sz) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	*len = buf ? (size_t)sz : 0;
	return buf;
}

/* xorshift64*: deterministic test inputs. */
static uint64_t rng_state = 0x853c49e6748fea9bULL;
static double rng_unit(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (double)((rng_state * 2685821657736338717ULL) >> 11) * 0x1p-53;
}

/* An activation vector: normal-ish values, per-32 magnitudes varying over
 * 2^-8..2^8, one block all zero, one block with a single spike. */
static void make_x(float *x, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		const double u = rng_unit(), v = rng_unit();
		const double g =
		    sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);

		x[i] = (float)(g * ldexp(1.0, (int)((i / 32 * 7) % 17) - 8));
	}
	if (n >= 64)
		memset(x + 32, 0, 32 * sizeof *x);
	if (n >= 256)
		x[200] = 1000.0f;
}

/* Byte offset of the min/dmin half in a block of TYPE, or -1. */
static int min_offset(uint32_t type)
{
	switch (type) {
	case QTYPE_Q4_1:
	case QTYPE_Q5_1:
	case QTYPE_Q4_K:
	case QTYPE_Q5_K:
		return 2;
	case QTYPE_Q2_K:
		return 82;
	default:
		return -1;
	}
}

/* Byte offset of the scale half d in a block of TYPE; -1 where the
 * scale is not one half (MXFP4, NVFP4, IQ1_M: see sane_scales). */
static int d_offset(uint32_t type)
{
	switch (type) {
	case QTYPE_Q2_K:
		return 80;
	case QTYPE_Q3_K:
		return 108;
	case QTYPE_Q6_K:
		return 208;
	case QTYPE_TQ1_0:
		return 52;
	case QTYPE_TQ2_0:
		return 64;
	case QTYPE_MXFP4:
	case QTYPE_NVFP4:
	case QTYPE_IQ1_M:
		return -1;
	default:
		return 0;
	}
}

/* Give block B of TYPE a moderate scale where d_offset has none: MXFP4's
 * E8M0 exponent near 2^0 (random bytes reach 2^127, whose products
 * overflow), IQ1_M's half H spread over its four scale words' top
 * nibbles. NVFP4's UE4M3 scales are all moderate. */
static void sane_scales(uint32_t type, uint8_t *b, uint16_t h)
{
	if (type == QTYPE_MXFP4)
		b[0] = (uint8_t)(115 + h % 20);
	if (type == QTYPE_IQ1_M)
		for (int k = 0; k < 4; k++)
			b[49 + 2 * k] = (uint8_t)((b[49 + 2 * k] & 0x0F) |
			                          ((h >> (4 * k)) & 0xF) << 4);
}

/*
 * G_i of note 3b for a row of N elements at ROW: for formats with a
 * minimum, |w_i with min zeroed| + |w_i with d zeroed|; else |w_i|.
 */
static void gross_weights(uint32_t type, const uint8_t *row, int64_t n,
                          double *g)
{
	const struct qtype_info *qi = qtype_get(type);
	const size_t rs = quant_row_size(type, n);
	const int moff = min_offset(type);
	uint8_t *tmp = malloc(rs);
	float *a = malloc((size_t)n * sizeof *a),
	      *b = malloc((size_t)n * sizeof *b);

	if (moff < 0) {
		quant_dequant_row(type, row, a, n);
		for (int64_t i = 0; i < n; i++)
			g[i] = fabs(a[i]);
	} else {
		memcpy(tmp, row, rs);
		for (size_t k = 0; k < rs; k += qi->type_size)
			memset(tmp + k + moff, 0, 2);
		quant_dequant_row(type, tmp, a, n);
		memcpy(tmp, row, rs);
		for (size_t k = 0; k < rs; k += qi->type_size)
			memset(tmp + k + d_offset(type), 0, 2);
		quant_dequant_row(type, tmp, b, n);
		for (int64_t i = 0; i < n; i++)
			g[i] = fabs(a[i]) + fabs(b[i]);
	}
	free(tmp);
	free(a);
	free(b);
}

struct dot_stats {
	double worst_a;   /* max over rows of |x^ err| / bound(a) */
	double worst_b;   /* max of |dot - sum w x^| / bound(b) */
	double worst_rel; /* max of |dot - sum w x| / sum |w x| */
	int fails;
};

/* Block size of the activation quantization of TYPE (1: none). */
static int64_t act_block(uint32_t type)
{
	switch (type) {
	case QTYPE_F32:
	case QTYPE_F16:
	case QTYPE_BF16:
		return 1;
	case QTYPE_IQ4_NL:
	case QTYPE_MXFP4:
	case QTYPE_NVFP4:
		return 32;
	default: /* the K-quants, i-quants and TQ types: Q8_K's 256 */
		return qtype_get(type)->blck_size == 256 ? 256 : 32;
	}
}

/* Float32 terms (block sums) a dot of N elements of TYPE adds. */
static double dot_terms(uint32_t type, int64_t n)
{
	if (act_block(type) == 1)
		return n / 16.0;
	if (type == QTYPE_NVFP4)
		return n / 16.0; /* a scale per 16 */
	return (double)(n / qtype_get(type)->blck_size);
}

/* Check quant_dot of one row (N elements) against note 3. */
static void check_dot(uint32_t type, const uint8_t *row, const float *w,
                      const float *x, int64_t n, struct dot_stats *st)
{
	const int64_t ab = act_block(type);
	const size_t vs = quant_vec_size(type, n);
	void *vec = malloc(vs);
	double *xh = malloc((size_t)n * sizeof *xh);
	double *g = malloc((size_t)n * sizeof *g);
	double ref = 0, refh = 0, absw = 0, bound_a = 0, gx = 0;
	float dot_simd, dot_c;

	quant_vec_prepare(type, x, n, vec);
	quant_vec_dequant(type, vec, xh, n);
	gross_weights(type, row, n, g);
	for (int64_t b = 0; b < n; b += ab) {
		double amax = 0;

		for (int64_t i = b; i < b + ab; i++)
			amax = fmax(amax, fabs(x[i]));
		const double delta = ab == 1 ? 0 : 0.5001 * amax / 127;
		for (int64_t i = b; i < b + ab; i++) {
			if (fabs(xh[i] - x[i]) > delta) {
				st->fails++;
				tap_diag("%s: x^[%lld] = %.9g for x = %.9g, "
				         "off by more than %.9g",
				         qtype_name(type), (long long)i, xh[i],
				         x[i], delta);
			}
			bound_a += fabs(w[i]) * delta;
		}
	}
	for (int64_t i = 0; i < n; i++) {
		ref += (double)w[i] * x[i];
		refh += (double)w[i] * xh[i];
		absw += fabs((double)w[i] * x[i]);
		gx += g[i] * fabs(xh[i]);
	}
	const double nterms = dot_terms(type, n);
	const double bound_b = (nterms + 8) * 0x1p-24 * gx;

	quant_set_simd(true);
	dot_simd = quant_dot(type, row, vec, n);
	quant_set_simd(false);
	dot_c = quant_dot(type, row, vec, n);
	quant_set_simd(true);
	if (memcmp(&dot_simd, &dot_c, sizeof dot_c) != 0) {
		st->fails++;
		tap_diag("%s: AVX2 dot %.9g != portable dot %.9g",
		         qtype_name(type), dot_simd, dot_c);
	}
	const double eb = fabs(dot_c - refh);
	if (!(eb <= bound_b)) {
		st->fails++;
		tap_diag("%s: |dot - sum w x^| = %.3g > %.3g", qtype_name(type),
		         eb, bound_b);
	}
	if (!(fabs(dot_c - ref) <= bound_a + bound_b)) {
		st->fails++;
		tap_diag("%s: |dot - sum w x| = %.3g > %.3g", qtype_name(type),
		         fabs(dot_c - ref), bound_a + bound_b);
	}
	if (bound_a > 0)
		st->worst_a = fmax(st->worst_a, fabs(refh - ref) / bound_a);
	if (bound_b > 0)
		st->worst_b = fmax(st->worst_b, eb / bound_b);
	if (absw > 0)
		st->worst_rel = fmax(st->worst_rel, fabs(dot_c - ref) / absw);
	free(vec);
	free(xh);
	free(g);
}

/*
 * Make a row of a float TYPE usable for dots: the random goldens hold huge
 * values and infinities (fine for conversion, useless for a dot), so
 * elements beyond 2^16 in magnitude are replaced by their value scaled
 * into range (in ROW's own encoding and in W alike).
 */
static void float_row(uint32_t type, uint8_t *row, float *w, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		if (fabsf(w[i]) <= 65536.0f)
			continue;
		w[i] = (float)(rng_unit() - 0.5);
		if (type == QTYPE_F32) {
			memcpy(row + 4 * i, &w[i], 4);
		} else {
			uint32_t b;
			uint16_t h;

			memcpy(&b, &w[i], 4);
			if (type == QTYPE_BF16) {
				b &= 0xFFFF0000u; /* exact: truncate to bfloat16
				                   */
				h = (uint16_t)(b >> 16);
			} else {
				h = f32_to_f16(w[i]);
				w[i] = f16_to_f32(h);
				memcpy(&b, &w[i], 4);
			}
			memcpy(&w[i], &b, 4);
			memcpy(row + 2 * i, &h, 2);
		}
	}
}

/*
 * Read golden file FNAME of TYPE ("PQGT", type, n_blocks, the blocks, then
 * gguf-py's floats) and check its header, which ties the block size to
 * gguf-py's bytes. Returns the malloc'd file and sets *NBP, or NULL (a
 * failed check written).
 */
static uint8_t *golden_read(const char *fname, uint32_t type, uint32_t *nbp)
{
	const char *name = qtype_name(type);
	const struct qtype_info *qi = qtype_get(type);
	size_t len;
	uint8_t *buf = read_data(fname, &len);
	uint32_t t, nb;

	if (buf == NULL) {
		tap_ok(0, "%s: golden %s/%s readable", name, data_dir(), fname);
		return NULL;
	}
	memcpy(&t, buf + 4, 4);
	memcpy(&nb, buf + 8, 4);
	const int64_t n = (int64_t)nb * qi->blck_size;
	const size_t raw = (size_t)nb * qi->type_size;
	if (!tap_ok(len >= 12 && memcmp(buf, "PQGT", 4) == 0 && t == type &&
	                len == 12 + raw + (size_t)n * 4,
	            "%s: golden %s header (%u blocks)", name, fname, nb)) {
		free(buf);
		return NULL;
	}
	*nbp = nb;
	return buf;
}

/* Golden file of TYPE: dequantization bit-exact, then the dots. */
static void check_type(uint32_t type)
{
	const char *name = qtype_name(type);
	const struct qtype_info *qi = qtype_get(type);
	char fname[64];
	uint8_t *buf;
	uint32_t nb;

	snprintf(fname, sizeof fname, "%s.bin", name);
	buf = golden_read(fname, type, &nb);
	if (buf == NULL)
		return;
	const int64_t n = (int64_t)nb * qi->blck_size;
	const size_t raw = (size_t)nb * qi->type_size;
	uint8_t *blocks = buf + 12;
	float *want = malloc((size_t)n * sizeof *want);
	float *got = malloc((size_t)n * sizeof *got);
	int64_t bad = 0, first = -1;

	memcpy(want, buf + 12 + raw, (size_t)n * sizeof *want);
	quant_dequant_row(type, blocks, got, n);
	for (int64_t i = 0; i < n; i++)
		if (memcmp(&got[i], &want[i], sizeof *got) != 0 && bad++ == 0)
			first = i;
	if (first >= 0)
		tap_diag("%s: element %lld: got %.9g, gguf-py %.9g", name,
		         (long long)first, got[first], want[first]);
	tap_ok(bad == 0,
	       "%s: dequantization of %lld elements bit-exact with gguf-py "
	       "(%lld differ)",
	       name, (long long)n, (long long)bad);

	/* also row by row in pieces (the block loop restarts correctly) */
	{
		const int64_t rown =
		    qi->blck_size == 1 ? 256 : 4 * qi->blck_size;
		int64_t bad2 = 0;

		for (int64_t r = 0; r + rown <= n; r += rown) {
			quant_dequant_row(
			    type, blocks + quant_row_size(type, r), got, rown);
			bad2 += memcmp(got, want + r, (size_t)rown * 4) != 0;
		}
		tap_ok(bad2 == 0, "%s: row-wise dequantization matches", name);
	}

	/* dots: rows of 256 (floats), 8 blocks (32-formats) or 2 blocks (K) */
	{
		const int64_t rown = qi->blck_size == 1    ? 256
		                     : qi->blck_size == 32 ? 256
		                                           : 512;
		float *x = malloc((size_t)rown * sizeof *x);
		struct dot_stats st = {0};
		int rows = 0;

		for (int64_t r = 0; r + rown <= n; r += rown, rows++) {
			make_x(x, rown);
			if (qi->blck_size == 1)
				float_row(type,
				          blocks + quant_row_size(type, r),
				          want + r, rown);
			check_dot(type, blocks + quant_row_size(type, r),
			          want + r, x, rown, &st);
		}
		tap_ok(st.fails == 0 && rows > 0,
		       "%s: %d dots within bounds, SIMD == portable (worst: "
		       "act %.3f, fp %.3f of bound; rel err %.2e)",
		       name, rows, st.worst_a, st.worst_b, st.worst_rel);
		free(x);
	}
	free(want);
	free(got);
	free(buf);
}

/*
 * Adversarial golden of TYPE: dequantization bit-exact with gguf-py (NaN
 * never occurs; +-inf does, for MXFP4's largest exponent), and every kernel
 * set's dot of each block (a row of one block) equal to the portable one.
 */
static void check_adversarial(uint32_t type)
{
	const char *name = qtype_name(type);
	const struct qtype_info *qi = qtype_get(type);
	char fname[64];
	uint32_t nb;
	uint8_t *buf;

	snprintf(fname, sizeof fname, "%s.adv.bin", name);
	buf = golden_read(fname, type, &nb);
	if (buf == NULL)
		return;
	const int64_t n = (int64_t)nb * qi->blck_size, bn = qi->blck_size;
	const uint8_t *blocks = buf + 12;
	float *want = malloc((size_t)n * sizeof *want);
	float *got = malloc((size_t)n * sizeof *got);
	float x[256];
	void *vec = malloc(quant_vec_size(type, bn));
	int64_t bad = 0, first = -1;
	int dbad = 0, isas = 0;

	memcpy(want, blocks + (size_t)nb * qi->type_size, (size_t)n * 4);
	quant_dequant_row(type, blocks, got, n);
	for (int64_t i = 0; i < n; i++)
		if (memcmp(&got[i], &want[i], sizeof *got) != 0 && bad++ == 0)
			first = i;
	if (first >= 0)
		tap_diag("%s: adversarial element %lld (block %lld): got "
		         "%.9g, gguf-py %.9g",
		         name, (long long)first, (long long)(first / bn),
		         got[first], want[first]);
	tap_ok(bad == 0,
	       "%s: dequantization of %u adversarial blocks bit-exact with "
	       "gguf-py (%lld differ)",
	       name, nb, (long long)bad);
	for (enum quant_isa isa = QUANT_ISA_AVX2; isa <= QUANT_ISA_AVX512;
	     isa++) {
		quant_set_isa(isa);
		if (quant_isa_active() != isa)
			continue;
		isas++;
		for (uint32_t b = 0; b < nb; b++) {
			const uint8_t *row = blocks + (size_t)b * qi->type_size;
			float a, c;

			make_x(x, bn);
			quant_vec_prepare(type, x, bn, vec);
			a = quant_dot(type, row, vec, bn);
			quant_set_isa(QUANT_ISA_C);
			c = quant_dot(type, row, vec, bn);
			quant_set_isa(isa);
			dbad += memcmp(&a, &c, sizeof a) != 0;
		}
	}
	quant_set_simd(true);
	tap_ok(dbad == 0,
	       "%s: dots of the adversarial blocks identical on %d SIMD "
	       "kernel set(s) and the portable one (%d differ)",
	       name, isas, dbad);
	free(vec);
	free(want);
	free(got);
	free(buf);
}

/* quant_row_size against gguf-py's block geometry (sizes.txt) for every
 * sized type, computable or not. */
static void check_sizes(void)
{
	size_t len;
	uint8_t *txt = read_data("sizes.txt", &len);
	int bad = 0, lines = 0;

	if (!tap_ok(txt != NULL, "sizes.txt readable"))
		return;
	char *s = malloc(len + 1);

	memcpy(s, txt, len);
	s[len] = '\0';
	for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n")) {
		unsigned id, blck, size;
		char tname[64];

		if (sscanf(line, "%u %63s %u %u", &id, tname, &blck, &size) !=
		    4)
			continue;
		lines++;
		/* three blocks, and a row one element short of them */
		if (quant_row_size(id, 3 * (int64_t)blck) != 3 * (size_t)size ||
		    (blck > 1 &&
		     quant_row_size(id, 3 * (int64_t)blck - 1) != 0)) {
			bad++;
			tap_diag(
			    "%s: quant_row_size(%u elements) = %zu, gguf-py "
			    "%u",
			    tname, 3 * blck,
			    quant_row_size(id, 3 * (int64_t)blck), 3 * size);
		}
	}
	tap_ok(lines >= 30 && bad == 0,
	       "quant_row_size agrees with gguf-py on %d types", lines);
	free(s);
	free(txt);
}

/* The message of quant_check_tensor and the type predicates. */
static void check_api(void)
{
	char err[1024];
	const char *want =
	    "tensor 'blk.0.attn_q.weight' has type Q4_2 (id 4), which the CPU "
	    "engine does not support (supported: F32, F16, BF16, Q8_0, Q4_0, "
	    "Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, "
	    "IQ3_S, IQ3_XXS, IQ2_S, IQ2_XS, IQ2_XXS, IQ1_M, IQ1_S, TQ2_0, "
	    "TQ1_0, "
	    "MXFP4, NVFP4)";
	int rc = quant_check_tensor("blk.0.attn_q.weight", 4, err, sizeof err);

	tap_ok(rc == -1 && strcmp(err, want) == 0, "check_tensor message: %s",
	       err);
	rc = quant_check_tensor("x", 200, err, sizeof err);
	tap_ok(rc == -1 &&
	           strncmp(err, "tensor 'x' has type unknown (id 200), which",
	                   43) == 0,
	       "check_tensor names an unknown id: %s", err);
	rc = quant_check_tensor("y", QTYPE_Q8_1, err, 20);
	tap_ok(rc == -1 && strlen(err) == 19,
	       "check_tensor truncates to errlen");
	tap_ok(quant_check_tensor("z", QTYPE_Q6_K, err, sizeof err) == 0,
	       "check_tensor accepts Q6_K");
	int ncomp = 0;
	for (uint32_t t = 0; t < 64; t++)
		ncomp += quant_can_compute(t);
	tap_ok(ncomp == 26, "26 computable types");
	tap_ok(quant_row_size(QTYPE_Q4_K, 512) == 288 &&
	           quant_row_size(QTYPE_Q8_0, 64) == 68 &&
	           quant_row_size(QTYPE_F32, 3) == 12 &&
	           quant_row_size(QTYPE_Q4_0, 33) == 0 &&
	           quant_row_size(4, 32) == 0 &&
	           quant_row_size(QTYPE_Q4_0, -32) == 0,
	       "quant_row_size");
	tap_ok(quant_vec_size(QTYPE_Q4_1, 64) == 80 &&
	           quant_vec_size(QTYPE_Q6_K, 512) == 584 &&
	           quant_vec_size(QTYPE_F16, 10) == 40 &&
	           quant_vec_size(QTYPE_IQ1_S, 256) == 292 &&
	           quant_vec_size(QTYPE_NVFP4, 128) == 160 &&
	           quant_vec_size(QTYPE_Q1_0, 256) == 0,
	       "quant_vec_size");
}

/*
 * AVX2 and portable dots agree bit for bit on many random rows of TYPE
 * (random quant bytes, finite random float16 scales; floats: random values).
 */
/* quant_dot_rows (both kernel sets) gives quant_dot's bits row by row, for
 * row counts around the four-row step of the float kernel and a strided
 * output. */
static void check_dot_rows(uint32_t type, const uint8_t *w, size_t rs,
                           int64_t rows, const void *vec, int64_t n,
                           enum quant_isa isa)
{
	float *one = malloc((size_t)rows * sizeof *one);
	float *many = malloc((size_t)rows * 2 * sizeof *many);
	int bad = 0;

	for (int simd = 0; simd < 2; simd++) {
		quant_set_isa(simd ? isa : QUANT_ISA_C);
		for (int64_t r = 0; r < rows; r++)
			one[r] = quant_dot(type, w + r * rs, vec, n);
		for (int64_t nr = rows - 7; nr <= rows; nr++) {
			quant_dot_rows(type, w, rs, nr, vec, n, many, 2);
			for (int64_t r = 0; r < nr; r++)
				bad += memcmp(&one[r], &many[2 * r],
				              sizeof *one) != 0;
		}
	}
	quant_set_simd(true);
	tap_ok(bad == 0,
	       "%s: quant_dot_rows == quant_dot on %lld rows, %s and "
	       "portable (%d differ)",
	       qtype_name(type), (long long)rows,
	       isa == QUANT_ISA_AVX512 ? "AVX-512" : "AVX2", bad);
	free(one);
	free(many);
}

/* quant_f32_mix against its definition (float, multiply then add, in row
 * order), on both kernel sets, for widths around its 64/32/8 steps. */
static void check_mix(void)
{
	enum { ROWS = 37, STRIDE = 203 };
	float *v = malloc(ROWS * STRIDE * sizeof *v), a[ROWS];
	float out[STRIDE], ref[STRIDE];
	int bad = 0, cases = 0;

	for (int i = 0; i < ROWS * STRIDE; i++)
		v[i] = (float)(rng_unit() - 0.5);
	for (int i = 0; i < ROWS; i++)
		a[i] = (float)rng_unit();
	for (int n = 1; n <= 200; n += (n < 80 ? 1 : 13)) {
		for (int nr = 0; nr <= ROWS; nr += 6) {
			for (int e = 0; e < n; e++) {
				ref[e] = 0.0f;
				for (int i = 0; i < nr; i++) {
					const float p =
					    a[i] * v[i * STRIDE + e];

					ref[e] = ref[e] + p;
				}
			}
			for (int simd = 0; simd < 2; simd++) {
				quant_set_simd(simd);
				quant_f32_mix(out, a, v, STRIDE, nr, n);
				bad += memcmp(out, ref, n * sizeof *out) != 0;
				cases++;
			}
		}
	}
	quant_set_simd(true);
	tap_ok(bad == 0,
	       "quant_f32_mix bit-exact with its definition, AVX2 and "
	       "portable (%d of %d cases differ)",
	       bad, cases);
	free(v);
}

/* quant_vec_prepare gives the same bytes on both kernel sets (the AVX2
 * rounding of activations is roundf's), on vectors with halves, ties,
 * clamping, zero blocks and non-finite blocks. */
static void check_prepare(void)
{
	static const uint32_t types[] = {QTYPE_Q8_0, QTYPE_Q4_K};
	enum { N = 2048 };
	float *x = malloc(N * sizeof *x);
	unsigned char *a = malloc(quant_vec_size(QTYPE_Q4_K, N) + 4096);
	unsigned char *b = malloc(quant_vec_size(QTYPE_Q4_K, N) + 4096);
	int bad = 0, cases = 0;

	for (int rep = 0; rep < 40; rep++) {
		make_x(x, N);
		if (rep % 4 == 1) /* exact halves of the scale: ties */
			for (int i = 0; i < N; i++)
				x[i] = (float)((int)(rng_unit() * 509) - 254) *
				       0.5f;
		if (rep % 4 == 2) { /* a non-finite value in one block */
			x[rep * 7 % N] = rep % 8 == 2 ? INFINITY : NAN;
			x[300] = -0.0f;
		}
		if (rep % 4 == 3) /* one block all zero, one of -0 */
			for (int i = 0; i < 256; i++)
				x[i] = i < 128 ? 0.0f : -0.0f;
		for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
			const size_t sz = quant_vec_size(types[t], N);

			quant_set_simd(true);
			quant_vec_prepare(types[t], x, N, a);
			quant_set_simd(false);
			quant_vec_prepare(types[t], x, N, b);
			bad += memcmp(a, b, sz) != 0;
			cases++;
		}
	}
	quant_set_simd(true);
	tap_ok(bad == 0,
	       "quant_vec_prepare: AVX2 and portable give the same bytes (%d "
	       "of %d vectors differ)",
	       bad, cases);
	free(x);
	free(a);
	free(b);
}

static void check_simd_random(uint32_t type, enum quant_isa isa)
{
	const struct qtype_info *qi = qtype_get(type);
	/* 37 blocks of 32 (a tail after the eight-block steps), 19 of 64 or 5
	 * of 256 */
	const int64_t n = qi->blck_size == 256  ? 1280
	                  : qi->blck_size == 64 ? 1216
	                                        : 1184;
	const int64_t rows = 300;
	const char *isa_name = isa == QUANT_ISA_AVX512 ? "AVX-512" : "AVX2";
	const size_t rs = quant_row_size(type, n);
	uint8_t *w = malloc(rs * rows);
	float *x = malloc(n * sizeof *x);
	void *vec = malloc(quant_vec_size(type, n));
	int bad = 0;

	for (size_t i = 0; i < rs * rows; i++)
		w[i] = (uint8_t)(rng_unit() * 256);
	for (size_t b = 0; b < rs * rows; b += qi->type_size) {
		if (qi->blck_size == 1) { /* finite values of modest size */
			const float f = (float)(rng_unit() - 0.5);
			uint16_t h = type == QTYPE_F16
			                 ? f32_to_f16(f)
			                 : (uint16_t)(f16_f32_bits(f) >> 16);

			if (type == QTYPE_F32)
				memcpy(w + b, &f, 4);
			else
				memcpy(w + b, &h, 2);
			continue;
		}
		const int offs[2] = {d_offset(type), min_offset(type)};
		for (int k = 0; k < 2; k++) {
			if (offs[k] < 0)
				continue;
			const uint16_t h =
			    f32_to_f16((float)((rng_unit() - 0.5) * 0.1));
			memcpy(w + b + offs[k], &h, 2);
		}
		sane_scales(type, w + b,
		            f32_to_f16((float)((rng_unit() - 0.5) * 0.1)));
	}
	make_x(x, n);
	quant_vec_prepare(type, x, n, vec);
	for (int64_t r = 0; r < rows; r++) {
		float a, c;

		quant_set_isa(isa);
		a = quant_dot(type, w + r * rs, vec, n);
		quant_set_simd(false);
		c = quant_dot(type, w + r * rs, vec, n);
		bad += memcmp(&a, &c, sizeof a) != 0;
	}
	quant_set_isa(isa);
	bad +=
	    quant_isa_active() != isa; /* the set compared is the one named */
	quant_set_simd(true);
	tap_ok(bad == 0,
	       "%s: %s and portable dots identical on %lld random rows (%d "
	       "differ)",
	       qtype_name(type), isa_name, (long long)rows, bad);
	check_dot_rows(type, w, rs, rows, vec, n, isa);
	free(w);
	free(x);
	free(vec);
}

/* An inf or NaN activation makes the dots of its block NaN. */
static void check_nan(void)
{
	static const uint32_t types[] = {
	    QTYPE_Q4_1,   QTYPE_Q8_0,  QTYPE_Q4_K,    QTYPE_Q6_K,
	    QTYPE_IQ4_NL, QTYPE_MXFP4, QTYPE_IQ2_XXS, QTYPE_IQ1_M};
	uint8_t row[1024] = {0}; /* >= 512 elements of any of the types */
	float x[512];
	uint8_t vec[2048];
	int ok = 1;

	for (size_t k = 0; k < sizeof types / sizeof *types; k++) {
		for (int i = 0; i < 512; i++)
			x[i] = 1.0f;
		x[7] = k % 2 ? NAN : INFINITY;
		quant_vec_prepare(types[k], x, 512, vec);
		ok &= isnan(quant_dot(types[k], row, vec, 512));
	}
	tap_ok(ok, "non-finite activation gives a NaN dot");
}

int main(void)
{
	static const uint32_t types[] = {
	    QTYPE_F32,     QTYPE_F16,    QTYPE_BF16,   QTYPE_Q8_0,
	    QTYPE_Q4_0,    QTYPE_Q4_1,   QTYPE_Q5_0,   QTYPE_Q5_1,
	    QTYPE_Q2_K,    QTYPE_Q3_K,   QTYPE_Q4_K,   QTYPE_Q5_K,
	    QTYPE_Q6_K,    QTYPE_IQ4_NL, QTYPE_IQ4_XS, QTYPE_IQ3_S,
	    QTYPE_IQ3_XXS, QTYPE_IQ2_S,  QTYPE_IQ2_XS, QTYPE_IQ2_XXS,
	    QTYPE_IQ1_M,   QTYPE_IQ1_S,  QTYPE_TQ2_0,  QTYPE_TQ1_0,
	    QTYPE_MXFP4,   QTYPE_NVFP4,
	};
	/* the types with adversarial goldens (TYPE.adv.bin) */
	static const uint32_t adv_types[] = {
	    QTYPE_IQ4_NL, QTYPE_IQ4_XS, QTYPE_IQ3_S,   QTYPE_IQ3_XXS,
	    QTYPE_IQ2_S,  QTYPE_IQ2_XS, QTYPE_IQ2_XXS, QTYPE_IQ1_M,
	    QTYPE_IQ1_S,  QTYPE_TQ2_0,  QTYPE_TQ1_0,   QTYPE_MXFP4,
	    QTYPE_NVFP4,
	};

	tap_diag("SIMD kernels: %s",
	         quant_isa_active() == QUANT_ISA_AVX512 ? "AVX-512"
	         : quant_isa_active() == QUANT_ISA_AVX2 ? "AVX2"
	                                                : "none (portable C)");
	for (size_t i = 0; i < sizeof types / sizeof *types; i++)
		check_type(types[i]);
	for (size_t i = 0; i < sizeof adv_types / sizeof *adv_types; i++)
		check_adversarial(adv_types[i]);
	check_sizes();
	quant_set_isa(QUANT_ISA_AVX2);
	if (quant_isa_active() == QUANT_ISA_AVX2) {
		for (size_t i = 0; i < sizeof types / sizeof *types; i++)
			check_simd_random(types[i], QUANT_ISA_AVX2);
	} else {
		tap_ok(1, "AVX2 kernels == portable # SKIP skipped: no AVX2 "
		          "on this CPU or build");
	}
	/* the AVX-512 set where the CPU has it, else one skipped check */
	quant_set_isa(QUANT_ISA_AVX512);
	if (quant_isa_active() == QUANT_ISA_AVX512) {
		tap_diag("AVX-512 kernels active");
		for (size_t i = 0; i < sizeof types / sizeof *types; i++)
			check_simd_random(types[i], QUANT_ISA_AVX512);
	} else {
		tap_ok(1, "AVX-512 kernels == portable # SKIP skipped: no "
		          "AVX-512 (F, BW, VL, VNNI) on this CPU or build");
	}
	quant_set_simd(true);
	check_api();
	check_nan();
	check_mix();
	check_prepare();
	return tap_done();
}

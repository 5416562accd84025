/*
 * kvq_accuracy.c - the accuracy of a KV cache type against another over a
 * long sequence (BENCHMARKS.md, "Quantized KV cache"): two engines of one
 * backend, the reference cache type and the one measured, evaluate the
 * same ids in chunks, keeping every position's logits; for each position
 * the logit NMSE (sum (a - b)^2 / sum b^2, b the reference) and whether
 * both argmaxes agree (greedy agreement, teacher-forced: both read the
 * same ids). Printed overall and per depth band. A measuring tool, not a
 * test (its figures are published, its bounds are the tests').
 *
 *   kvq_accuracy -m FILE [--backend cpu|cuda] [--ref f32|f16]
 *                [--kv q8_0|f16] [-n POSITIONS] [--text FILE] [-t N]
 *                [--exact]
 *
 * --exact: both engines with exact dots (engine_params.exact_dots): on
 * the CPU, whose default dots round activations to int8 (a discontinuous
 * rounding that turns any small difference into logit noise of its own),
 * so that the cache's type is the only difference.
 *
 * Ids: --text FILE tokenized by the model's tokenizer (repeated until N
 * positions), else fixed pseudo-random ids (a random-weight model has no
 * tokenizer).
 */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "gguf.h"
#include "gguf_split.h"
#include "model.h"
#include "tok.h"

#define KVQ_CHUNK 256 /* positions a chunk (ENGINE_EVAL_ALL rows) */
#define KVQ_BANDS 6

/* Upper ends of the depth bands reported. */
static const int32_t kvq_band_end[KVQ_BANDS] = {1024,  4096,  8192,
                                                16384, 32768, 1 << 30};

/* Sums of one band. */
struct kvq_band {
	double num, den;  /* sum (a - b)^2, sum b^2 over its rows */
	double worst;     /* largest row NMSE */
	long rows, agree; /* positions; argmaxes that agree */
};

/* Index of the largest of N values (lowest index on ties). */
static int32_t kvq_argmax(const float *x, int32_t n)
{
	int32_t b = 0;

	for (int32_t i = 1; i < n; i++)
		if (x[i] > x[b])
			b = i;
	return b;
}

/* Read FILE whole (malloc'd, *LEN bytes), or NULL. */
static char *kvq_slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *p = NULL;
	long n;

	if (f == NULL)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 &&
	    fseek(f, 0, SEEK_SET) == 0 && (p = malloc((size_t)n)) != NULL &&
	    fread(p, 1, (size_t)n, f) != (size_t)n) {
		free(p);
		p = NULL;
	}
	*len = p ? (size_t)n : 0;
	fclose(f);
	return p;
}

/* N ids into IDS: TEXT's tokens repeated, or pseudo-random ones. */
static int kvq_ids(const struct gguf_file *gf, const char *text, int32_t nv,
                   int32_t *ids, int32_t n)
{
	struct tok_ids t = {0};
	struct tok *tk;
	char err[256], *buf;
	size_t len;

	if (text == NULL) {
		for (int32_t i = 0, x = 12345; i < n; i++) {
			x = (int32_t)(((int64_t)x * 1103515245 + 12345) &
			              0x7fffffff);
			ids[i] = x % nv;
		}
		return 0;
	}
	tk = tok_load(gf, err, sizeof(err));
	buf = kvq_slurp(text, &len);
	if (tk == NULL || buf == NULL ||
	    tok_encode(tk, buf, len, 0, &t, err, sizeof(err)) != 0 ||
	    t.n == 0) {
		fprintf(stderr, "kvq_accuracy: %s: cannot tokenize\n", text);
		return -1;
	}
	fprintf(stderr, "%s: %zu tokens%s\n", text, t.n,
	        t.n < (size_t)n ? ", repeated" : "");
	for (int32_t i = 0; i < n; i++)
		ids[i] = t.v[(size_t)i % t.n];
	free(t.v);
	free(buf);
	tok_free(tk);
	return 0;
}

/* Add rows R0.. of the chunk (N rows of NV logits, A measured, B
 * reference) into the bands. */
static void kvq_add(struct kvq_band *bands, int32_t r0, int32_t n, int32_t nv,
                    const float *a, const float *b)
{
	for (int32_t r = 0; r < n; r++) {
		const float *x = a + (size_t)r * nv, *y = b + (size_t)r * nv;
		struct kvq_band *bd = bands;
		double num = 0, den = 0;

		while (r0 + r >= kvq_band_end[bd - bands])
			bd++;
		for (int32_t i = 0; i < nv; i++) {
			double d = (double)x[i] - y[i];

			num += d * d;
			den += (double)y[i] * y[i];
		}
		bd->num += num;
		bd->den += den;
		bd->worst = num / den > bd->worst ? num / den : bd->worst;
		bd->rows++;
		bd->agree += kvq_argmax(x, nv) == kvq_argmax(y, nv);
	}
}

/* Print the bands and the total. */
static void kvq_print(const struct kvq_band *bands)
{
	struct kvq_band t = {0};

	printf("%-14s %8s %12s %12s %9s\n", "positions", "rows", "NMSE",
	       "worst row", "agree");
	for (int b = 0; b < KVQ_BANDS; b++) {
		const struct kvq_band *x = &bands[b];

		if (x->rows == 0)
			continue;
		printf("%6d..%-6d %8ld %12.3g %12.3g %8.2f%%\n",
		       b ? kvq_band_end[b - 1] : 0, kvq_band_end[b] - 1,
		       x->rows, x->num / x->den, x->worst,
		       100.0 * x->agree / x->rows);
		t.num += x->num;
		t.den += x->den;
		t.worst = x->worst > t.worst ? x->worst : t.worst;
		t.rows += x->rows;
		t.agree += x->agree;
	}
	printf("%-14s %8ld %12.3g %12.3g %8.2f%%\n", "all", t.rows,
	       t.num / t.den, t.worst, 100.0 * t.agree / t.rows);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"backend", required_argument, NULL, 'B'},
	    {"ref", required_argument, NULL, 'R'},
	    {"kv", required_argument, NULL, 'K'},
	    {"text", required_argument, NULL, 'X'},
	    {"exact", no_argument, NULL, 'E'},
	    {NULL, 0, NULL, 0},
	};
	const char *model = NULL, *text = NULL;
	struct engine_params pr = {0}, pq = {0};
	struct engine *er = NULL, *eq = NULL;
	struct kvq_band bands[KVQ_BANDS];
	struct gguf_file *gf = NULL;
	struct model *m = NULL;
	int32_t n = 16384, *ids = NULL, nv;
	char err[512];
	int c, rc = 1;

	memset(bands, 0, sizeof(bands));
	pr.backend = pq.backend = "cpu";
	pr.kv_type = ENGINE_KV_F32;
	pq.kv_type = ENGINE_KV_Q8_0;
	while ((c = getopt_long(argc, argv, "m:n:t:", lo, NULL)) != -1) {
		switch (c) {
		case 'm':
			model = optarg;
			break;
		case 'n':
			n = (int32_t)strtol(optarg, NULL, 10);
			break;
		case 't':
			pr.n_threads = pq.n_threads =
			    (int32_t)strtol(optarg, NULL, 10);
			break;
		case 'B':
			pr.backend = pq.backend = optarg;
			break;
		case 'R':
		case 'K':
			if (engine_kv_type_parse(
			        optarg, c == 'R' ? &pr.kv_type : &pq.kv_type)) {
				fprintf(stderr, "kvq_accuracy: kv type %s?\n",
				        optarg);
				return 2;
			}
			break;
		case 'X':
			text = optarg;
			break;
		case 'E':
			pr.exact_dots = pq.exact_dots = true;
			break;
		default:
			return 2;
		}
	}
	if (model == NULL || n < 1 || n > MODEL_MAX_CTX) {
		fprintf(stderr, "usage: kvq_accuracy -m FILE [--backend B] "
		                "[--ref T] [--kv T] [-n N] [--text FILE]\n");
		return 2;
	}
	pr.n_ctx = pq.n_ctx = n;
	pr.n_batch = pq.n_batch = KVQ_CHUNK;
	gf = gguf_split_open(model, err, sizeof(err));
	if (gf == NULL || model_load(gf, &m, err, sizeof(err)) != 0 ||
	    engine_open(m, &pr, &er, err, sizeof(err)) != 0 ||
	    engine_open(m, &pq, &eq, err, sizeof(err)) != 0)
		goto fail;
	nv = m->cfg.n_vocab;
	ids = malloc((size_t)n * sizeof(*ids));
	if (ids == NULL || kvq_ids(gf, text, nv, ids, n) != 0)
		goto out;
	printf("model %s, backend %s (%s%s), %d positions: %s cache against "
	       "%s\n",
	       model, engine_backend_name(eq),
	       engine_device_name(eq) ? engine_device_name(eq) : "host",
	       pq.exact_dots ? ", exact dots" : "", n,
	       engine_kv_type_name(engine_kv_type(eq)),
	       engine_kv_type_name(engine_kv_type(er)));
	for (int32_t p = 0; p < n; p += KVQ_CHUNK) {
		const int32_t k = n - p < KVQ_CHUNK ? n - p : KVQ_CHUNK;
		const float *a, *b;

		if (engine_eval(er, ids + p, k, ENGINE_EVAL_ALL, err,
		                sizeof(err)) != 0 ||
		    (b = engine_logits(er)) == NULL ||
		    engine_eval(eq, ids + p, k, ENGINE_EVAL_ALL, err,
		                sizeof(err)) != 0 ||
		    (a = engine_logits(eq)) == NULL)
			goto fail;
		/* (the CPU's rows stay valid across the other engine's eval:
		   each engine owns its buffer) */
		b = engine_logits(er);
		kvq_add(bands, p, k, nv, a, b);
	}
	kvq_print(bands);
	rc = 0;
	goto out;
fail:
	fprintf(stderr, "kvq_accuracy: %s\n", err);
out:
	free(ids);
	engine_close(eq);
	engine_close(er);
	model_free(m);
	if (gf)
		gguf_close(gf);
	return rc;
}

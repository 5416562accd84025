/*
 * trace.c - opt-in observation of the forward pass (trace.h).
 */
#include "trace.h"

#include <math.h>
#include <stdlib.h>

/* Allocate a trace; see trace.h. */
struct trace *trace_new(int n_layer, int top_k, FILE *out)
{
	struct trace *t;

	if (n_layer < 1 || n_layer > 65536 || top_k < 1 || top_k > 1024)
		return NULL;
	t = calloc(1, sizeof(*t));
	if (t == NULL)
		return NULL;
	t->n_layer = n_layer;
	t->top_k = top_k;
	t->out = out;
	t->layers = calloc((size_t)n_layer, sizeof(*t->layers));
	t->top_id = calloc((size_t)top_k, sizeof(*t->top_id));
	t->top_logit = calloc((size_t)top_k, sizeof(*t->top_logit));
	t->top_prob = calloc((size_t)top_k, sizeof(*t->top_prob));
	if (!t->layers || !t->top_id || !t->top_logit || !t->top_prob) {
		trace_free(t);
		return NULL;
	}
	return t;
}

/* Free a trace. */
void trace_free(struct trace *t)
{
	if (t == NULL)
		return;
	free(t->layers);
	free(t->top_id);
	free(t->top_logit);
	free(t->top_prob);
	free(t);
}

/* Statistics of X[0..n) (accumulated in double). */
void trace_stats_of(const float *x, int64_t n, struct trace_stats *s)
{
	double sum = 0, sq = 0;
	float mn = x[0], mx = x[0];

	for (int64_t i = 0; i < n; i++) {
		if (x[i] < mn)
			mn = x[i];
		if (x[i] > mx)
			mx = x[i];
		sum += x[i];
		sq += (double)x[i] * x[i];
	}
	s->min = mn;
	s->max = mx;
	s->mean = (float)(sum / (double)n);
	s->rms = (float)sqrt(sq / (double)n);
}

/* Top-k by insertion into the sorted arrays (k is small). */
void trace_set_logits(struct trace *t, const float *logits, int32_t n_vocab)
{
	int k = t->top_k < n_vocab ? t->top_k : n_vocab;
	int have = 0;
	float mx = logits[0];
	double z = 0, ez = 0;

	for (int32_t i = 0; i < n_vocab; i++) {
		float v = logits[i];
		int j;

		if (v > mx)
			mx = v;
		if (have == k && v <= t->top_logit[k - 1])
			continue;
		j = have < k ? have++ : k - 1;
		while (j > 0 && t->top_logit[j - 1] < v) {
			t->top_logit[j] = t->top_logit[j - 1];
			t->top_id[j] = t->top_id[j - 1];
			j--;
		}
		t->top_logit[j] = v;
		t->top_id[j] = i;
	}
	for (int32_t i = 0; i < n_vocab; i++) {
		double e = exp((double)logits[i] - mx);

		z += e;
		ez += e * ((double)logits[i] - mx);
	}
	for (int j = 0; j < k; j++)
		t->top_prob[j] = (float)(exp((double)t->top_logit[j] - mx) / z);
	for (int j = k; j < t->top_k; j++) {
		t->top_id[j] = -1;
		t->top_logit[j] = 0;
		t->top_prob[j] = 0;
	}
	/* H = log z - E[l - mx] */
	t->entropy = (float)(log(z) - ez / z);
}

/* A step without logits: an empty top list, entropy null. */
void trace_clear_logits(struct trace *t)
{
	for (int j = 0; j < t->top_k; j++) {
		t->top_id[j] = -1;
		t->top_logit[j] = 0;
		t->top_prob[j] = 0;
	}
	t->entropy = NAN;
}

/* A float as JSON: non-finite values become null. */
static void trace_num(FILE *f, const char *key, double v)
{
	if (isfinite(v))
		fprintf(f, "\"%s\":%.6g", key, v);
	else
		fprintf(f, "\"%s\":null", key);
}

/* One JSON line per step. */
int trace_write_json(const struct trace *t)
{
	FILE *f = t->out;

	if (f == NULL)
		return 0;
	fprintf(f, "{\"step\":%lld,\"pos\":%d,\"n_tokens\":%d,\"token\":%d,",
	        (long long)t->step, t->pos, t->n_tokens, t->token);
	trace_num(f, "entropy", t->entropy);
	fprintf(f, ",\"top\":[");
	for (int j = 0; j < t->top_k && t->top_id[j] >= 0; j++) {
		fprintf(f, "%s{\"id\":%d,", j ? "," : "", t->top_id[j]);
		trace_num(f, "logit", t->top_logit[j]);
		fputc(',', f);
		trace_num(f, "prob", t->top_prob[j]);
		fputc('}', f);
	}
	fprintf(f, "],\"layers\":[");
	for (int il = 0; il < t->n_layer; il++) {
		const struct trace_stats *s = &t->layers[il];

		fprintf(f, "%s{", il ? "," : "");
		trace_num(f, "min", s->min);
		fputc(',', f);
		trace_num(f, "max", s->max);
		fputc(',', f);
		trace_num(f, "mean", s->mean);
		fputc(',', f);
		trace_num(f, "rms", s->rms);
		fputc('}', f);
	}
	fprintf(f, "]}\n");
	return ferror(f) ? -1 : 0;
}

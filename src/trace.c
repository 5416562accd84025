/*
 * trace.c - opt-in observation of the forward pass (trace.h).
 */
#include "trace.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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
	t->n_experts = calloc((size_t)n_layer, sizeof(*t->n_experts));
	t->expert_dev = calloc((size_t)n_layer, sizeof(*t->expert_dev));
	t->expert_id =
	    calloc((size_t)n_layer * TRACE_MAX_EXPERTS, sizeof(*t->expert_id));
	t->expert_w =
	    calloc((size_t)n_layer * TRACE_MAX_EXPERTS, sizeof(*t->expert_w));
	if (!t->layers || !t->top_id || !t->top_logit || !t->top_prob ||
	    !t->n_experts || !t->expert_id || !t->expert_w || !t->expert_dev) {
		trace_free(t);
		return NULL;
	}
	return t;
}

struct trace *trace_new_layers(int n_layer)
{
	struct trace *t = trace_new(n_layer, 1, NULL);

	if (t != NULL)
		t->skip_logits = 1;
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
	free(t->n_experts);
	free(t->expert_dev);
	free(t->row_expert_id);
	free(t->expert_id);
	free(t->expert_w);
	free(t->resid);
	free(t->verify.diff);
	free(t);
}

/* Start or stop capturing the residual vectors. */
int trace_capture(struct trace *t, int32_t n_embd)
{
	float *r, *d;

	if (n_embd < 0 || n_embd > 65536)
		return -1;
	if (n_embd == 0) {
		free(t->resid);
		free(t->verify.diff);
		t->resid = NULL;
		t->verify.diff = NULL;
		t->n_embd = 0;
		return 0;
	}
	r = calloc((size_t)t->n_layer * (size_t)n_embd, sizeof(*r));
	d = calloc((size_t)t->n_layer, sizeof(*d));
	if (r == NULL || d == NULL) {
		free(r);
		free(d);
		return -1;
	}
	free(t->resid);
	free(t->verify.diff);
	t->resid = r;
	t->verify.diff = d;
	t->n_embd = n_embd;
	return 0;
}

/* A backend's report of layer IL: statistics, and the vector if asked. */
#ifdef PARLEY_TRACE_HOOK
/*
 * Test builds only: tests/parley-hook compiles this file with
 * PARLEY_TRACE_HOOK (parley itself never does, so no environment can
 * reach this). PARLEY_TEST_TRACE_NAN=IL makes every traced eval report
 * a NaN rms for layer IL, as a broken kernel would: what the debug
 * pane's flags are tested with (tests/t_tui_pane.sh).
 */
static void trace_hook(struct trace *t, int il)
{
	const char *v = getenv("PARLEY_TEST_TRACE_NAN");

	if (v != NULL && *v != '\0' && atoi(v) == il)
		t->layers[il].rms = NAN;
}
#endif

void trace_layer(struct trace *t, int il, const float *x, int64_t n)
{
	trace_stats_of(x, n, &t->layers[il]);
#ifdef PARLEY_TRACE_HOOK
	trace_hook(t, il);
#endif
	if (t->resid != NULL && n == t->n_embd)
		memcpy(t->resid + (size_t)il * (size_t)n, x,
		       (size_t)n * sizeof(*x));
}

void trace_layer_stats(struct trace *t, int il, const struct trace_stats *s)
{
	t->layers[il] = *s;
#ifdef PARLEY_TRACE_HOOK
	trace_hook(t, il);
#endif
}

/* Statistics of X[0..n) (accumulated in double). */
/* Pin T to FROM's last choice of experts; see trace.h. */
void trace_pin_experts(struct trace *t, const struct trace *from)
{
	int nl;

	t->pin_experts = from != NULL;
	if (from == NULL)
		return;
	nl = t->n_layer < from->n_layer ? t->n_layer : from->n_layer;
	for (int il = 0; il < t->n_layer; il++) {
		t->n_experts[il] = il < nl ? from->n_experts[il] : 0;
		t->expert_dev[il] = 0.0f;
	}
	memcpy(t->expert_id, from->expert_id,
	       (size_t)nl * TRACE_MAX_EXPERTS * sizeof(*t->expert_id));
}

int trace_rows(struct trace *t, int32_t cap)
{
	int32_t *p = NULL;

	if (cap < 0 || cap > 65536)
		return -1;
	if (cap > 0) {
		p = calloc((size_t)cap * (size_t)t->n_layer * TRACE_MAX_EXPERTS,
		           sizeof(*p));
		if (p == NULL)
			return -1;
	}
	free(t->row_expert_id);
	t->row_expert_id = p;
	t->rows_cap = cap;
	t->n_rows = 0;
	t->pin_rows = 0;
	return 0;
}

void trace_row_experts(struct trace *t, int il, int32_t r0, int32_t n,
                       const int32_t *ids, int32_t stride, int k)
{
	if (t->row_expert_id == NULL || il < 0 || il >= t->n_layer || r0 < 0 ||
	    k < 0 || k > TRACE_MAX_EXPERTS)
		return;
	if (r0 + n > t->rows_cap) {
		t->n_rows = 0; /* the step is longer than the rows kept */
		return;
	}
	for (int32_t r = 0; r < n; r++)
		memcpy(t->row_expert_id +
		           ((size_t)(r0 + r) * t->n_layer + (size_t)il) *
		               TRACE_MAX_EXPERTS,
		       ids + (size_t)r * (size_t)stride,
		       (size_t)k * sizeof(*ids));
	if (r0 + n > t->n_rows)
		t->n_rows = r0 + n;
}

int trace_pin_rows(struct trace *t, const struct trace *from)
{
	t->pin_rows = 0;
	if (from == NULL)
		return 0;
	if (t->row_expert_id == NULL || from->row_expert_id == NULL ||
	    t->rows_cap < from->n_rows || t->n_layer != from->n_layer)
		return -1;
	memcpy(t->row_expert_id, from->row_expert_id,
	       (size_t)from->n_rows * (size_t)t->n_layer * TRACE_MAX_EXPERTS *
	           sizeof(*t->row_expert_id));
	t->n_rows = from->n_rows;
	t->pin_rows = 1;
	return 0;
}

/* Record layer IL's choice of experts; see trace.h. */
void trace_experts(struct trace *t, int il, const int32_t *ids, const float *w,
                   int n)
{
	if (il < 0 || il >= t->n_layer)
		return;
	if (n > TRACE_MAX_EXPERTS)
		n = TRACE_MAX_EXPERTS;
	t->n_experts[il] = n < 0 ? 0 : n;
	for (int j = 0; j < n; j++) {
		t->expert_id[(size_t)il * TRACE_MAX_EXPERTS + j] = ids[j];
		t->expert_w[(size_t)il * TRACE_MAX_EXPERTS + j] = w[j];
	}
}

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
	if (key != NULL)
		fprintf(f, "\"%s\":", key);
	if (isfinite(v))
		fprintf(f, "%.6g", v);
	else
		fputs("null", f);
}

/* The comparison of the step: ,"verify":{...} (first_bad null: none). */
static void trace_write_verify(FILE *f, const struct trace *t)
{
	const struct trace_verify *v = &t->verify;

	fprintf(f, ",\"verify\":{\"worst_layer\":%d,", v->worst_layer);
	trace_num(f, "worst_diff", v->worst_diff);
	if (v->first_bad >= 0)
		fprintf(f, ",\"first_bad\":%d,", v->first_bad);
	else
		fprintf(f, ",\"first_bad\":null,");
	trace_num(f, "logit_nmse", v->logit_nmse);
	fprintf(f, ",\"logits_bad\":%s,\"diff\":[",
	        v->logits_bad ? "true" : "false");
	for (int il = 0; il < t->n_layer && v->diff != NULL; il++) {
		if (il)
			fputc(',', f);
		if (isfinite(v->diff[il]))
			fprintf(f, "%.4g", v->diff[il]);
		else
			fputs("null", f);
	}
	fputs("]}", f);
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
		if (t->n_experts[il] > 0) {
			const size_t o = (size_t)il * TRACE_MAX_EXPERTS;

			fputs(",\"experts\":[", f);
			for (int j = 0; j < t->n_experts[il]; j++) {
				fprintf(f, "%s[%d,", j ? "," : "",
				        t->expert_id[o + j]);
				trace_num(f, NULL, t->expert_w[o + j]);
				fputc(']', f);
			}
			fputc(']', f);
		}
		fputc('}', f);
	}
	fputc(']', f);
	if (t->verify.checked)
		trace_write_verify(f, t);
	fprintf(f, "}\n");
	return ferror(f) ? -1 : 0;
}

/* End the step (see trace.h). */
int trace_end_step(struct trace *t)
{
	int rc = trace_write_json(t);

	t->verify.checked = 0;
	t->step++;
	return rc;
}

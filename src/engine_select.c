/*
 * engine_select.c - the reference definition of the engine's select step
 * (engine.h): from one row of raw logits on the host, the penalised top-k,
 * the raw top-n, the argmax, the log-sum-exp and entropy. The CPU backend
 * uses it as is; a device backend computes the same numbers where its
 * logits are and is compared with this in the parity tests.
 *
 * NOTES ON THE DESIGN
 *
 * One pass over the row does everything: the penalised logit of id i is
 * substituted from a sorted table of the window's distinct ids (the row is
 * never copied or modified), and two bounded min-heaps keep the k greatest
 * penalised and the n greatest raw entries. The sums use the online form
 * (running maximum m, s = sum exp(l - m), a = sum exp(l - m) * (l - m),
 * both rescaled when m grows) in double, so the row is read once.
 *
 * Order: by logit descending, ties by lower id - the sampler's order, so
 * that sampling from the selection picks exactly what sampling from the
 * full row would (tests/t_engine_select.c checks this).
 *
 * Invariants on success: 1 <= k <= n_vocab; id[0] is the penalised argmax;
 * raw_lse >= every raw logit; raw_entropy in [0, ln n_vocab].
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine_backend.h"

/* One heap entry. */
struct sel_ent {
	float logit;
	int32_t id;
};

/* a ranks before b: greater logit, then lower id. */
static int sel_before(const struct sel_ent *a, const struct sel_ent *b)
{
	return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

/* Push X into the bounded min-heap H[0..*n) of capacity CAP (root = the
 * entry that ranks last). */
static void sel_heap_push(struct sel_ent *h, int32_t *n, int32_t cap,
                          struct sel_ent x)
{
	int32_t i;

	if (*n < cap) {
		i = (*n)++;
		while (i > 0 && sel_before(&h[(i - 1) / 2], &x)) {
			h[i] = h[(i - 1) / 2];
			i = (i - 1) / 2;
		}
		h[i] = x;
		return;
	}
	if (cap == 0 || !sel_before(&x, &h[0]))
		return;
	i = 0;
	for (;;) {
		int32_t l = 2 * i + 1, m = i;
		const struct sel_ent *mv = &x;

		if (l < *n && sel_before(mv, &h[l]))
			m = l, mv = &h[l];
		if (l + 1 < *n && sel_before(mv, &h[l + 1]))
			m = l + 1, mv = &h[l + 1];
		if (m == i)
			break;
		h[i] = h[m];
		i = m;
	}
	h[i] = x;
}

/* Sort the heap H[0..n) into rank order (first = greatest). */
static void sel_heap_sort(struct sel_ent *h, int32_t n)
{
	/* pop the last-ranked root to the end, repeatedly */
	for (int32_t end = n - 1; end > 0; end--) {
		struct sel_ent x = h[end];
		int32_t m = end, i = 0;

		h[end] = h[0];
		for (;;) {
			int32_t l = 2 * i + 1, c = i;
			const struct sel_ent *cv = &x;

			if (l < m && sel_before(cv, &h[l]))
				c = l, cv = &h[l];
			if (l + 1 < m && sel_before(cv, &h[l + 1]))
				c = l + 1, cv = &h[l + 1];
			if (c == i)
				break;
			h[i] = h[c];
			i = c;
		}
		h[i] = x;
	}
}

static int sel_cmp_i32(const void *pa, const void *pb)
{
	int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;

	return (a > b) - (a < b);
}

/* The window's distinct ids and counts; see engine_backend.h. */
size_t engine_select_window(const struct engine_select_req *q, int32_t n_vocab,
                            int32_t *ids, int32_t *counts)
{
	size_t w = q->n_recent > 0 ? (size_t)q->n_recent : 0, n = 0, d = 0;

	if (w == 0 ||
	    (q->repeat_penalty == 1.0f && q->frequency_penalty == 0.0f &&
	     q->presence_penalty == 0.0f))
		return 0;
	for (size_t i = 0; i < w; i++)
		if (q->recent[i] >= 0 && q->recent[i] < n_vocab)
			ids[n++] = q->recent[i];
	qsort(ids, n, sizeof(*ids), sel_cmp_i32);
	for (size_t i = 0; i < n;) {
		size_t j = i;

		while (j < n && ids[j] == ids[i])
			j++;
		ids[d] = ids[i];
		counts[d++] = (int32_t)(j - i);
		i = j;
	}
	return d;
}

/*
 * The window's distinct ids (B->win, sorted) with their penalised logits
 * (B->pen_logit): *N_OUT entries. Returns 0 or -1 (memory).
 */
static int sel_penalties(const float *row, int32_t n_vocab,
                         const struct engine_select_req *q,
                         struct engine_select_buf *b, size_t *n_out)
{
	size_t w = q->n_recent > 0 ? (size_t)q->n_recent : 0, d;

	*n_out = 0;
	if (w > b->win_cap) {
		int32_t *p = realloc(b->win, w * sizeof(*p)), *c;
		float *f;

		if (p == NULL)
			return -1;
		b->win = p;
		c = realloc(b->win_cnt, w * sizeof(*c));
		if (c == NULL)
			return -1;
		b->win_cnt = c;
		f = realloc(b->pen_logit, w * sizeof(*f));
		if (f == NULL)
			return -1;
		b->pen_logit = f;
		b->win_cap = w;
	}
	d = engine_select_window(q, n_vocab, b->win, b->win_cnt);
	for (size_t i = 0; i < d; i++) {
		float l = row[b->win[i]];

		/* the sampler's stage 1, operation for operation */
		if (l <= 0.0f)
			l *= q->repeat_penalty;
		else
			l /= q->repeat_penalty;
		l -= (float)b->win_cnt[i] * q->frequency_penalty +
		     q->presence_penalty;
		b->pen_logit[i] = l;
	}
	*n_out = d;
	return 0;
}

/* Online log-sum-exp and entropy accumulator (see the design notes). */
struct sel_sum {
	double m; /* running maximum (-inf before the first finite) */
	double s; /* sum exp(l - m) */
	double a; /* sum exp(l - m) * (l - m) */
};

/* Add logit L (finite or -inf) to U. */
static void sel_sum_add(struct sel_sum *u, float l)
{
	double x = l, d;

	if (l == -INFINITY)
		return;
	if (u->m == -INFINITY) {
		u->m = x; /* the first finite logit: nothing to rescale */
	} else if (x > u->m) {
		/* rescale: s' = s e^(m - x), a' = e^(m - x) (a + s (m - x)) */
		d = exp(u->m - x);
		u->a = d * (u->a + u->s * (u->m - x));
		u->s = d * u->s;
		u->m = x;
	}
	d = exp(x - u->m);
	u->s += d;
	u->a += d * (x - u->m);
}

/* Select; see engine_backend.h. */
int engine_select_row(const float *row, int32_t n_vocab,
                      const struct engine_select_req *q,
                      struct engine_select_buf *b, char *err, size_t errlen)
{
	struct sel_sum raw = {-INFINITY, 0.0, 0.0}, pen = {-INFINITY, 0.0, 0.0};
	int32_t k = q->k < n_vocab ? q->k : n_vocab;
	int32_t nr = q->n_raw < n_vocab ? q->n_raw : n_vocab;
	int32_t nk = 0, nn = 0;
	struct sel_ent *hk, *hr;
	size_t n_pen, p = 0;

	if (sel_penalties(row, n_vocab, q, b, &n_pen) != 0) {
		snprintf(err, errlen,
		         "select: out of memory for a window of %d",
		         q->n_recent);
		return -1;
	}
	/* both heaps in one block: k + nr <= 2 * ENGINE_SELECT_MAX entries */
	hk = malloc((size_t)(k + nr) * sizeof(*hk));
	if (hk == NULL) {
		snprintf(err, errlen, "select: out of memory");
		return -1;
	}
	hr = hk + k;
	for (int32_t i = 0; i < n_vocab; i++) {
		struct sel_ent x = {row[i], i};

		if (x.logit != x.logit || x.logit == INFINITY) {
			snprintf(err, errlen, "logit of token %d is %s", i,
			         x.logit != x.logit ? "NaN" : "+inf");
			free(hk);
			return -1;
		}
		sel_sum_add(&raw, x.logit);
		sel_heap_push(hr, &nn, nr, x);
		if (p < n_pen && b->win[p] == i)
			x.logit = b->pen_logit[p++];
		sel_sum_add(&pen, x.logit);
		sel_heap_push(hk, &nk, k, x);
	}
	if (pen.s == 0.0) {
		snprintf(err, errlen, "all %d logits are -inf", n_vocab);
		free(hk);
		return -1;
	}
	sel_heap_sort(hk, nk);
	sel_heap_sort(hr, nn);
	for (int32_t i = 0; i < nk; i++) {
		b->id[i] = hk[i].id;
		b->logit[i] = hk[i].logit;
		b->raw_logit[i] = row[hk[i].id];
	}
	for (int32_t i = 0; i < nn; i++) {
		b->raw_id[i] = hr[i].id;
		b->raw_top[i] = hr[i].logit;
	}
	free(hk);
	engine_select_publish(b, nk, nn, raw.m, raw.s, raw.a, pen.m, pen.s);
	return 0;
}

/* Point b->out at the entries, derive the sums; see engine_backend.h. */
void engine_select_publish(struct engine_select_buf *b, int32_t k,
                           int32_t n_raw, double raw_m, double raw_s,
                           double raw_a, double pen_m, double pen_s)
{
	b->out.k = k;
	b->out.id = b->id;
	b->out.logit = b->logit;
	b->out.raw_logit = b->raw_logit;
	b->out.n_raw = n_raw;
	b->out.raw_id = b->raw_id;
	b->out.raw_top = b->raw_top;
	/* a raw row of only -inf has no distribution: report -inf, 0 */
	b->out.raw_lse = raw_s > 0.0 ? raw_m + log(raw_s) : -INFINITY;
	b->out.raw_entropy = raw_s > 0.0 ? log(raw_s) - raw_a / raw_s : 0.0;
	b->out.lse = pen_m + log(pen_s);
}

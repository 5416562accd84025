/*
 * sampler.c - penalties, top-k, top-p, min-p, temperature and the draw.
 * See sampler.h for the order of operations and the formulas.
 */
#include "sampler.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SAMPLER_MAX_VOCAB  (1 << 30)
#define SAMPLER_TOPP_FIRST 256  /* first partial selection for top_p */
#define SAMPLER_HEAP_MAX   4096 /* top_k up to this: one pass with a heap */

/* One candidate token during a sampling step. */
struct cand {
	float logit; /* penalised logit (temperature 1) */
	int32_t id;  /* token id */
};

struct sampler {
	struct sampler_config cfg; /* copied at creation, never changed */
	int32_t n_vocab;           /* ids are 0..n_vocab-1 */
	uint64_t rng[4];           /* xoshiro256** state, never all zero */
	struct cand *cand;         /* n_vocab entries of scratch (owned) */
	int32_t *win;              /* penalty window scratch (owned) */
	struct cand *pen;          /* penalised ids, ascending id (owned) */
	size_t n_pen;              /* entries used in pen this step */
	size_t win_cap;            /* entries allocated in win and pen */
};

/* splitmix64: expands a 64-bit seed into well-mixed words. */
static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

void sampler_reseed(struct sampler *s, uint64_t seed)
{
	uint64_t x = seed;

	for (int i = 0; i < 4; i++)
		s->rng[i] = splitmix64(&x);
}

uint64_t sampler_rng_next(struct sampler *s)
{
	uint64_t *r = s->rng;
	uint64_t out = rotl(r[1] * 5, 7) * 9;
	uint64_t t = r[1] << 17;

	r[2] ^= r[0];
	r[3] ^= r[1];
	r[1] ^= r[2];
	r[0] ^= r[3];
	r[2] ^= t;
	r[3] = rotl(r[3], 45);
	return out;
}

double sampler_rng_uniform(struct sampler *s)
{
	return (double)(sampler_rng_next(s) >> 11) * 0x1.0p-53;
}

void sampler_config_default(struct sampler_config *c)
{
	memset(c, 0, sizeof(*c));
	c->temperature = 0.8f;
	c->top_k = 40;
	c->top_p = 0.95f;
	c->min_p = 0.05f;
	c->repeat_penalty = 1.0f;
	c->frequency_penalty = 0.0f;
	c->presence_penalty = 0.0f;
	c->penalty_last_n = 64;
	c->seed = 0;
	c->n_probs = 0;
}

int sampler_config_check(const struct sampler_config *c, char *err,
                         size_t errlen)
{
	const char *what = NULL;

	if (!isfinite(c->temperature))
		what = "temperature must be a finite number";
	else if (!(c->top_p > 0.0f) || !isfinite(c->top_p))
		what = "top_p must be in (0, 1]";
	else if (!(c->min_p <= 1.0f) || !isfinite(c->min_p))
		what = "min_p must be <= 1";
	else if (!(c->repeat_penalty > 0.0f) || !isfinite(c->repeat_penalty))
		what = "repeat_penalty must be > 0";
	else if (!isfinite(c->frequency_penalty))
		what = "frequency_penalty must be finite";
	else if (!isfinite(c->presence_penalty))
		what = "presence_penalty must be finite";
	else if (c->penalty_last_n < -1)
		what = "penalty_last_n must be >= -1";
	else if (c->n_probs < 0 || c->n_probs > SAMPLER_MAX_PROBS)
		what = "n_probs must be in 0..100";
	if (what) {
		snprintf(err, errlen, "sampler: %s", what);
		return -1;
	}
	return 0;
}

struct sampler *sampler_new(const struct sampler_config *c, int32_t n_vocab,
                            char *err, size_t errlen)
{
	struct sampler *s;

	if (sampler_config_check(c, err, errlen) != 0)
		return NULL;
	if (n_vocab < 1 || n_vocab > SAMPLER_MAX_VOCAB) {
		snprintf(err, errlen,
		         "sampler: vocabulary size %ld out of range",
		         (long)n_vocab);
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (s)
		s->cand = malloc((size_t)n_vocab * sizeof(*s->cand));
	if (!s || !s->cand) {
		free(s);
		snprintf(err, errlen, "sampler: out of memory for %ld ids",
		         (long)n_vocab);
		return NULL;
	}
	s->cfg = *c;
	s->n_vocab = n_vocab;
	sampler_reseed(s, c->seed);
	return s;
}

void sampler_free(struct sampler *s)
{
	if (!s)
		return;
	free(s->cand);
	free(s->win);
	free(s->pen);
	free(s);
}

const struct sampler_config *sampler_config(const struct sampler *s)
{
	return &s->cfg;
}

/* The total order of candidates: larger logit first, then lower id. */
static bool cand_gt(const struct cand *a, const struct cand *b)
{
	return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static int cand_cmp(const void *pa, const void *pb)
{
	const struct cand *a = pa, *b = pb;

	return cand_gt(a, b) ? -1 : cand_gt(b, a) ? 1 : 0;
}

static void cand_swap(struct cand *a, struct cand *b)
{
	struct cand t = *a;

	*a = *b;
	*b = t;
}

/* Insertion sort of c[0..n) in descending order (small ranges). */
static void cand_isort(struct cand *c, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		struct cand x = c[i];
		size_t j = i;

		while (j > 0 && cand_gt(&x, &c[j - 1])) {
			c[j] = c[j - 1];
			j--;
		}
		c[j] = x;
	}
}

/*
 * Rearrange c[0..n) so that c[0..k) are the k greatest candidates, in
 * descending order. Quickselect with a median-of-three pivot; falls back
 * to qsort of the remaining range if the partitioning degenerates.
 */
static void cand_select_sorted(struct cand *c, size_t n, size_t k)
{
	size_t lo = 0, hi = n;
	int budget = 64;

	if (k >= n) {
		qsort(c, n, sizeof(*c), cand_cmp);
		return;
	}
	while (hi - lo > 16) {
		size_t mid = lo + (hi - lo) / 2, i = lo;

		if (budget-- == 0) {
			qsort(c + lo, hi - lo, sizeof(*c), cand_cmp);
			break;
		}
		/* median of three into c[hi - 1] */
		if (cand_gt(&c[mid], &c[lo]))
			cand_swap(&c[mid], &c[lo]);
		if (cand_gt(&c[hi - 1], &c[lo]))
			cand_swap(&c[hi - 1], &c[lo]);
		if (cand_gt(&c[mid], &c[hi - 1]))
			cand_swap(&c[mid], &c[hi - 1]);
		for (size_t j = lo; j < hi - 1; j++)
			if (cand_gt(&c[j], &c[hi - 1]))
				cand_swap(&c[i++], &c[j]);
		cand_swap(&c[i], &c[hi - 1]);
		if (i == k || i + 1 == k)
			break;
		if (i < k)
			lo = i + 1;
		else
			hi = i;
	}
	if (hi - lo <= 16)
		cand_isort(c + lo, hi - lo);
	qsort(c, k, sizeof(*c), cand_cmp);
}

static int cmp_i32(const void *pa, const void *pb)
{
	int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;

	return (a > b) - (a < b);
}

/*
 * Stage 1: penalties over the last window of HIST. Fills s->pen with the
 * distinct ids of the window in ascending order and their penalised
 * logits, so that the scans below substitute them without copying or
 * modifying the caller's logits.
 */
static int sampler_penalize(struct sampler *s, const float *logits,
                            const int32_t *hist, size_t n_hist, char *err,
                            size_t errlen)
{
	const struct sampler_config *g = &s->cfg;
	size_t w = n_hist, n = 0;

	s->n_pen = 0;
	if (g->penalty_last_n == 0 || n_hist == 0 ||
	    (g->repeat_penalty == 1.0f && g->frequency_penalty == 0.0f &&
	     g->presence_penalty == 0.0f))
		return 0;
	if (g->penalty_last_n > 0 && (size_t)g->penalty_last_n < w)
		w = (size_t)g->penalty_last_n;
	if (w > s->win_cap) {
		int32_t *p = realloc(s->win, w * sizeof(*p));
		struct cand *q = p ? realloc(s->pen, w * sizeof(*q)) : NULL;

		if (p)
			s->win = p;
		if (!q) {
			snprintf(err, errlen,
			         "sampler: out of memory for a window of %zu",
			         w);
			return -1;
		}
		s->pen = q;
		s->win_cap = w;
	}
	for (size_t i = n_hist - w; i < n_hist; i++)
		if (hist[i] >= 0 && hist[i] < s->n_vocab)
			s->win[n++] = hist[i];
	qsort(s->win, n, sizeof(*s->win), cmp_i32);
	for (size_t i = 0; i < n;) {
		size_t j = i;
		float l = logits[s->win[i]];

		while (j < n && s->win[j] == s->win[i])
			j++;
		if (l <= 0.0f)
			l *= g->repeat_penalty;
		else
			l /= g->repeat_penalty;
		l -=
		    (float)(j - i) * g->frequency_penalty + g->presence_penalty;
		s->pen[s->n_pen].id = s->win[i];
		s->pen[s->n_pen++].logit = l;
		i = j;
	}
	return 0;
}

/* Report a NaN or +inf logit at I. */
static int32_t bad_logit(float l, int32_t i, char *err, size_t errlen)
{
	snprintf(err, errlen, "sampler: logit %ld is %s", (long)i,
	         l != l ? "NaN" : "+inf");
	return -1;
}

/* Sift X down from the root of the min-heap H[0..n) (min = least by
 * cand_gt), replacing the root. */
static void heap_replace_root(struct cand *h, size_t n, struct cand x)
{
	size_t i = 0;

	for (;;) {
		size_t l = 2 * i + 1, m = i;
		const struct cand *mv = &x;

		if (l < n && cand_gt(mv, &h[l]))
			m = l, mv = &h[l];
		if (l + 1 < n && cand_gt(mv, &h[l + 1]))
			m = l + 1, mv = &h[l + 1];
		if (m == i)
			break;
		h[i] = h[m];
		i = m;
	}
	h[i] = x;
}

/*
 * One pass over the (penalised) logits: the K greatest candidates, sorted
 * descending, into s->cand[0..k) with a min-heap, or with GREEDY just the
 * greatest into s->cand[0]. Returns 0, or -1 on a NaN/+inf logit or when
 * every logit is -inf.
 */
static int sampler_scan_top(struct sampler *s, const float *logits, size_t k,
                            char *err, size_t errlen)
{
	struct cand *h = s->cand;
	size_t n = 0, p = 0;
	bool any = false;

	for (int32_t i = 0; i < s->n_vocab; i++) {
		struct cand x = {logits[i], i};

		if (x.logit != x.logit || x.logit == INFINITY)
			return bad_logit(x.logit, i, err, errlen);
		if (p < s->n_pen && s->pen[p].id == i)
			x.logit = s->pen[p++].logit;
		any |= x.logit != -INFINITY;
		if (n < k) { /* sift up */
			size_t j = n++;

			while (j > 0 && cand_gt(&h[(j - 1) / 2], &x)) {
				h[j] = h[(j - 1) / 2];
				j = (j - 1) / 2;
			}
			h[j] = x;
		} else if (cand_gt(&x, &h[0])) {
			heap_replace_root(h, n, x);
		}
	}
	if (!any) {
		snprintf(err, errlen, "sampler: all %ld logits are -inf",
		         (long)s->n_vocab);
		return -1;
	}
	qsort(h, n, sizeof(*h), cand_cmp);
	return 0;
}

/* Stage 5 as a filter: keep logit >= max + ln(min_p); returns new n. */
static size_t sampler_min_p(struct cand *c, size_t n, float min_p)
{
	float mx = -INFINITY, thr;
	size_t m = 0;

	if (min_p <= 0.0f || n <= 1)
		return n;
	for (size_t i = 0; i < n; i++)
		if (c[i].logit > mx)
			mx = c[i].logit;
	thr = mx + logf(min_p);
	for (size_t i = 0; i < n; i++)
		if (c[i].logit >= thr)
			c[m++] = c[i];
	return m;
}

/*
 * Stage 4 on c[0..n): sorts a prefix as needed and returns the kept
 * length. The mass is taken over all n candidates (what stage 3 left),
 * even when min_p will cut further: the two stages commute.
 */
static size_t sampler_top_p(struct cand *c, size_t n, double mass_sum, float mx,
                            float top_p, bool sorted)
{
	double target = (double)top_p * mass_sum;
	size_t m = sorted ? n : SAMPLER_TOPP_FIRST;

	for (;;) {
		double cum = 0.0;

		if (m > n)
			m = n;
		if (!sorted)
			cand_select_sorted(c, n, m);
		for (size_t i = 0; i < m; i++) {
			cum += exp((double)c[i].logit - mx);
			if (cum >= target)
				return i + 1;
		}
		if (m == n)
			return n;
		m *= 4;
	}
}

/* Greedy pick over c[0..n): the largest logit, lowest id on ties. */
static size_t cand_argmax(const struct cand *c, size_t n)
{
	size_t best = 0;

	for (size_t i = 1; i < n; i++)
		if (cand_gt(&c[i], &c[best]))
			best = i;
	return best;
}

/* Fill the raw part of REP from the logits as given. */
static void sampler_report_raw(const struct sampler *s, const float *logits,
                               int32_t chosen, struct sampler_report *rep)
{
	int32_t V = s->n_vocab, want = s->cfg.n_probs;
	float mx = -INFINITY;
	double sum = 0.0, acc = 0.0, lse;
	int32_t nt = 0;

	if (want > V)
		want = V;
	for (int32_t i = 0; i < V; i++)
		if (logits[i] > mx)
			mx = logits[i];
	for (int32_t i = 0; i < V; i++) {
		if (logits[i] == -INFINITY)
			continue;
		double w = exp((double)logits[i] - mx);

		sum += w;
		acc += w * ((double)logits[i] - mx);
	}
	lse = mx + log(sum);
	rep->raw_entropy = (float)(log(sum) - acc / sum);
	rep->chosen_raw_logprob = (float)(logits[chosen] - lse);
	rep->chosen_raw_prob = (float)exp((double)logits[chosen] - lse);
	rep->chosen_raw_rank = 1;
	for (int32_t i = 0; i < V; i++) {
		struct cand x = {logits[i], i}, y = {logits[chosen], chosen};

		rep->chosen_raw_rank += cand_gt(&x, &y);
	}
	/* top-N by insertion into a sorted array of at most want entries */
	for (int32_t i = 0; i < V && want > 0; i++) {
		struct cand x = {logits[i], i};
		int32_t j;

		if (nt == want) {
			struct cand last = {rep->top[nt - 1].logit,
			                    rep->top[nt - 1].id};

			if (!cand_gt(&x, &last))
				continue;
			nt--;
		}
		for (j = nt; j > 0; j--) {
			struct cand y = {rep->top[j - 1].logit,
			                 rep->top[j - 1].id};

			if (!cand_gt(&x, &y))
				break;
			rep->top[j] = rep->top[j - 1];
		}
		rep->top[j].id = i;
		rep->top[j].logit = logits[i];
		nt++;
	}
	for (int32_t j = 0; j < nt; j++) {
		double lp = (double)rep->top[j].logit - lse;

		rep->top[j].logprob = (float)lp;
		rep->top[j].prob = (float)exp(lp);
	}
	rep->n_top = nt;
}

/*
 * Stages 4-6 over the candidates c[0..n) that stage 3 left (SORTED: in
 * rank order): top_p over their mass, min_p, temperature and the draw.
 * Returns the index of the pick in c; fills the sampled part of REP.
 */
static size_t sampler_draw(struct sampler *s, struct cand *c, size_t n,
                           bool sorted, struct sampler_report *rep)
{
	const struct sampler_config *g = &s->cfg;
	double sum = 0.0, acc = 0.0, u, cum = 0.0;
	int32_t kept = 0;
	size_t pick;
	float mx;

	/* stages 4 and 5: top_p over the mass of these n, then min_p */
	if (g->top_p < 1.0f && n > 1) {
		size_t np;

		mx = c[sorted ? 0 : cand_argmax(c, n)].logit;
		sum = 0.0;
		for (size_t i = 0; i < n; i++)
			sum += exp((double)c[i].logit - mx);
		n = sampler_min_p(c, n, g->min_p);
		np = sampler_top_p(c, n, sum, mx, g->top_p, sorted);
		sorted = true;
		if (np < n)
			n = np;
	} else {
		n = sampler_min_p(c, n, g->min_p);
	}

	/* stage 6: temperature and the draw */
	mx = c[sorted ? 0 : cand_argmax(c, n)].logit;
	sum = 0.0;
	for (size_t i = 0; i < n; i++) {
		if (c[i].logit == -INFINITY)
			continue;
		double a = ((double)c[i].logit - mx) / g->temperature;
		double w = exp(a);

		sum += w;
		acc += w * a;
		kept++;
	}
	u = sampler_rng_uniform(s) * sum;
	pick = n;
	for (size_t i = 0; i < n; i++) {
		if (c[i].logit == -INFINITY)
			continue;
		cum += exp(((double)c[i].logit - mx) / g->temperature);
		pick = i;
		if (cum > u)
			break;
	}
	if (rep) {
		rep->chosen = c[pick].id;
		rep->chosen_prob =
		    (float)(exp(((double)c[pick].logit - mx) / g->temperature) /
		            sum);
		rep->entropy = (float)(log(sum) - acc / sum);
		rep->n_kept = kept;
		/* the sampled probability is monotonic in the (penalised)
		   logit: the rank is that of the logit among the kept */
		rep->chosen_rank = 1;
		for (size_t i = 0; i < n; i++)
			rep->chosen_rank +=
			    c[i].logit != -INFINITY && cand_gt(&c[i], &c[pick]);
	}
	return pick;
}

int32_t sampler_sample(struct sampler *s, const float *logits, int32_t n_vocab,
                       const int32_t *hist, size_t n_hist,
                       struct sampler_report *rep, char *err, size_t errlen)
{
	const struct sampler_config *g = &s->cfg;
	struct cand *c = s->cand;
	size_t n = (size_t)n_vocab, pick;
	bool sorted = false, any = false;

	if (n_vocab != s->n_vocab) {
		snprintf(err, errlen,
		         "sampler: %ld logits given, vocabulary has %ld",
		         (long)n_vocab, (long)s->n_vocab);
		return -1;
	}
	if (sampler_penalize(s, logits, hist, n_hist, err, errlen) != 0)
		return -1;

	if (g->temperature <= 0.0f) {
		if (sampler_scan_top(s, logits, 1, err, errlen) != 0)
			return -1;
		if (rep) {
			rep->chosen = c[0].id;
			rep->chosen_prob = 1.0f;
			rep->entropy = 0.0f;
			rep->n_kept = 1;
			rep->chosen_rank = 1;
			sampler_report_raw(s, logits, c[0].id, rep);
		}
		return c[0].id;
	}

	if (g->top_k > 0 && (size_t)g->top_k < n &&
	    g->top_k <= SAMPLER_HEAP_MAX) {
		/* stage 3: top_k in one pass */
		if (sampler_scan_top(s, logits, (size_t)g->top_k, err,
		                     errlen) != 0)
			return -1;
		n = (size_t)g->top_k;
		sorted = true;
	} else {
		size_t p = 0;

		for (int32_t i = 0; i < n_vocab; i++) {
			float l = logits[i];

			if (l != l || l == INFINITY)
				return bad_logit(l, i, err, errlen);
			if (p < s->n_pen && s->pen[p].id == i)
				l = s->pen[p++].logit;
			any |= l != -INFINITY;
			c[i].logit = l;
			c[i].id = i;
		}
		if (!any) {
			snprintf(err, errlen,
			         "sampler: all %ld logits are -inf",
			         (long)n_vocab);
			return -1;
		}
		if (g->top_k > 0 && (size_t)g->top_k < n) { /* stage 3 */
			cand_select_sorted(c, n, (size_t)g->top_k);
			n = (size_t)g->top_k;
			sorted = true;
		}
	}
	pick = sampler_draw(s, c, n, sorted, rep);
	if (rep)
		sampler_report_raw(s, logits, c[pick].id, rep);
	return c[pick].id;
}

/* Candidates a selection must hold; see sampler.h. */
int32_t sampler_select_k(const struct sampler *s, int32_t max)
{
	const struct sampler_config *g = &s->cfg;

	if (g->temperature <= 0.0f)
		return 1;
	/* top_k >= n_vocab keeps every id unsorted (the draw walks id
	   order): only the full row reproduces that */
	if (g->top_k > 0 && g->top_k < s->n_vocab && g->top_k <= max)
		return g->top_k;
	return 0;
}

/* The penalty window's length; see sampler.h. */
size_t sampler_window(const struct sampler *s, size_t n_hist)
{
	const struct sampler_config *g = &s->cfg;

	if (g->penalty_last_n == 0 ||
	    (g->repeat_penalty == 1.0f && g->frequency_penalty == 0.0f &&
	     g->presence_penalty == 0.0f))
		return 0;
	if (g->penalty_last_n > 0 && (size_t)g->penalty_last_n < n_hist)
		return (size_t)g->penalty_last_n;
	return n_hist;
}

/* The raw part of REP from a selection. */
static void sampler_report_top(const struct sampler *s,
                               const struct sampler_top *t, int32_t chosen,
                               struct sampler_report *rep)
{
	int32_t want =
	    s->cfg.n_probs < s->n_vocab ? s->cfg.n_probs : s->n_vocab;
	int32_t at = 0;
	double lp;

	/* the draw compacts the candidates: find the chosen id's entry */
	while (at < t->k - 1 && t->id[at] != chosen)
		at++;
	lp = (double)t->raw_logit[at] - t->raw_lse;

	rep->raw_entropy = (float)t->raw_entropy;
	rep->chosen_raw_logprob = (float)lp;
	rep->chosen_raw_prob = (float)exp(lp);
	rep->chosen_raw_rank = 0; /* unknown unless among the raw entries */
	for (int32_t j = 0; j < t->n_raw; j++)
		if (t->raw_id[j] == chosen) {
			rep->chosen_raw_rank = j + 1;
			break;
		}
	for (int32_t j = 0; j < want; j++) {
		rep->top[j].id = t->raw_id[j];
		rep->top[j].logit = t->raw_top[j];
		lp = (double)t->raw_top[j] - t->raw_lse;
		rep->top[j].logprob = (float)lp;
		rep->top[j].prob = (float)exp(lp);
	}
	rep->n_top = want;
}

/* Choose from a selection; see sampler.h. */
int32_t sampler_sample_top(struct sampler *s, const struct sampler_top *t,
                           struct sampler_report *rep, char *err, size_t errlen)
{
	int32_t k = sampler_select_k(s, INT32_MAX), want = s->cfg.n_probs;
	size_t pick;

	if (want > s->n_vocab)
		want = s->n_vocab;
	if (k == 0 || t->k < k) {
		snprintf(err, errlen,
		         "sampler: a selection of %d candidates, the "
		         "configuration needs %s",
		         t->k, k == 0 ? "the full row" : "more");
		return -1;
	}
	if (rep && t->n_raw < want) {
		snprintf(err, errlen,
		         "sampler: %d raw entries for a report of %d", t->n_raw,
		         want);
		return -1;
	}
	for (int32_t i = 0; i < k; i++) {
		s->cand[i].logit = t->logit[i];
		s->cand[i].id = t->id[i];
	}
	if (k == 1 && s->cfg.temperature <= 0.0f) { /* stage 2: greedy */
		pick = 0;
		if (rep) {
			rep->chosen = s->cand[0].id;
			rep->chosen_prob = 1.0f;
			rep->entropy = 0.0f;
			rep->n_kept = 1;
			rep->chosen_rank = 1;
		}
	} else {
		pick = sampler_draw(s, s->cand, (size_t)k, true, rep);
	}
	if (rep)
		sampler_report_top(s, t, s->cand[pick].id, rep);
	return s->cand[pick].id;
}

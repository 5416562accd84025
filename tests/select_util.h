/*
 * select_util.h - inputs for the select tests (t_engine_select.c on the
 * host reference, t_cuda_select.c on the device): a deterministic PRNG,
 * logits rows with ties and -inf, and the select buffers. Static: each
 * test includes it once.
 */
#ifndef PARLEY_SELECT_UTIL_H
#define PARLEY_SELECT_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine_backend.h"

/* A small deterministic PRNG for the inputs (not the sampler's). */
static uint64_t rs = 0x9e3779b97f4a7c15ull;
static inline uint32_t rnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return (uint32_t)(rs >> 11);
}
static inline float rndf(float lo, float hi)
{
	return lo + (hi - lo) * (float)(rnd() % 1000000) / 1e6f;
}

/* A row of N logits; COARSE rounds them to 0.25 so ties are common;
   NINF sets that many entries to -inf. */
static inline void make_row(float *row, int32_t n, int coarse, int ninf)
{
	for (int32_t i = 0; i < n; i++) {
		row[i] = rndf(-12.0f, 12.0f);
		if (coarse)
			row[i] = floorf(row[i] * 4.0f) / 4.0f;
	}
	for (int j = 0; j < ninf && n > 1; j++)
		row[rnd() % (uint32_t)n] = -INFINITY;
}

static inline void buf_alloc(struct engine_select_buf *b)
{
	memset(b, 0, sizeof(*b));
	b->id = malloc(ENGINE_SELECT_MAX * sizeof(int32_t));
	b->logit = malloc(ENGINE_SELECT_MAX * sizeof(float));
	b->raw_logit = malloc(ENGINE_SELECT_MAX * sizeof(float));
	b->raw_id = malloc(ENGINE_SELECT_MAX * sizeof(int32_t));
	b->raw_top = malloc(ENGINE_SELECT_MAX * sizeof(float));
}

static inline void buf_free(struct engine_select_buf *b)
{
	free(b->id);
	free(b->logit);
	free(b->raw_logit);
	free(b->raw_id);
	free(b->raw_top);
	free(b->win);
	free(b->win_cnt);
	free(b->pen_logit);
}

#endif /* PARLEY_SELECT_UTIL_H */

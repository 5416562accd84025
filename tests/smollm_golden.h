/*
 * smollm_golden.h - the SmolLM2 goldens of tests/data/engine/smollm2.golden
 * (tests/oracles/gen_engine.py): 6 prompts, llama.cpp's greedy tokens and
 * gaps, the float64 reference's teacher-forced argmax and gaps. Shared by
 * the CPU (t_engine_smollm.c) and GPU (t_cuda_smollm.c) tests; static.
 */
#ifndef PARLEY_SMOLLM_GOLDEN_H
#define PARLEY_SMOLLM_GOLDEN_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_util.h"

#define N_PROMPTS 6

struct golden {
	char name[32]; /* prompt name */
	int32_t *ids;  /* prompt ids */
	int32_t n_ids;
	int32_t *gen; /* llama.cpp's greedy tokens */
	int32_t n_gen;
	double gap[256]; /* llama.cpp's top1 - top2 per step */
	int32_t *rtop;   /* float64 reference's argmax per step */
	int32_t n_rtop;
	double rgap[256]; /* float64 reference's top1 - top2 per step */
	double lcpdev;    /* mean |llama.cpp - reference| first logits */
};

/* Parse "N g g g ..." into OUT[0..min(N, 256)). */
static inline void parse_gaps(char *s, double *out)
{
	char *end;
	long n = strtol(s, &end, 10);

	for (long i = 0; i < n && i < 256; i++) {
		s = end;
		out[i] = strtod(s, &end);
	}
}

/* Read the text golden into G[0..N_PROMPTS). Returns prompts read. */
static inline int read_golden(const char *path, struct golden *g)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	int k = -1;

	if (f == NULL)
		return -1;
	while (getline(&line, &cap, f) > 0) {
		if (strncmp(line, "prompt ", 7) == 0 && k + 1 < N_PROMPTS) {
			k++;
			sscanf(line + 7, "%31s", g[k].name);
		} else if (k >= 0 && strncmp(line, "ids ", 4) == 0) {
			g[k].ids = eu_parse_ids(line + 4, &g[k].n_ids);
		} else if (k >= 0 && strncmp(line, "gen ", 4) == 0) {
			g[k].gen = eu_parse_ids(line + 4, &g[k].n_gen);
		} else if (k >= 0 && strncmp(line, "gap ", 4) == 0) {
			parse_gaps(line + 4, g[k].gap);
		} else if (k >= 0 && strncmp(line, "rtop ", 5) == 0) {
			g[k].rtop = eu_parse_ids(line + 5, &g[k].n_rtop);
		} else if (k >= 0 && strncmp(line, "rgap ", 5) == 0) {
			parse_gaps(line + 5, g[k].rgap);
		} else if (k >= 0 && strncmp(line, "lcpdev ", 7) == 0) {
			g[k].lcpdev = strtod(line + 7, NULL);
		}
	}
	free(line);
	fclose(f);
	return k + 1;
}

#endif /* PARLEY_SMOLLM_GOLDEN_H */

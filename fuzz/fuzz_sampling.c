/*
 * fuzz_sampling.c - libFuzzer harness for session_sampling_parse, the
 * sampling settings stored with each reply (messages.sampling: a damaged
 * row, an import's meta).
 *
 * The input is the JSON text. Settings that parse are in range (finite,
 * within +-1e9) and survive a round trip: their JSON (session_sampling_json)
 * parses again to the same settings. A refusal leaves nothing to free.
 */
#include "session.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Whether A and B are the same settings (floats by value: -0 == 0). */
static int same(const struct session_sampling *a,
                const struct session_sampling *b)
{
	const struct sampler_config *x = &a->c, *y = &b->c;

	return x->temperature == y->temperature && x->top_k == y->top_k &&
	       x->top_p == y->top_p && x->min_p == y->min_p &&
	       x->repeat_penalty == y->repeat_penalty &&
	       x->penalty_last_n == y->penalty_last_n &&
	       x->frequency_penalty == y->frequency_penalty &&
	       x->presence_penalty == y->presence_penalty &&
	       x->seed == y->seed && a->seed_random == b->seed_random &&
	       a->remote == b->remote;
}

/* Whether F is a value the parser may keep. */
static int in_range(float f)
{
	return isfinite(f) && fabsf(f) <= 1e9f;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct session_sampling sm, sm2;
	char err[256], *json;

	if (session_sampling_parse((const char *)data, size, &sm, err,
	                           sizeof(err)) != 0)
		return 0;
	if (!in_range(sm.c.temperature) || !in_range(sm.c.top_p) ||
	    !in_range(sm.c.min_p) || !in_range(sm.c.repeat_penalty) ||
	    !in_range(sm.c.frequency_penalty) ||
	    !in_range(sm.c.presence_penalty) || sm.c.top_k < -1000000000 ||
	    sm.c.top_k > 1000000000 || sm.c.penalty_last_n < -1000000000 ||
	    sm.c.penalty_last_n > 1000000000)
		abort(); /* a value out of the parser's promised range */
	json = session_sampling_json(&sm);
	if (json == NULL)
		return 0; /* out of memory */
	if (session_sampling_parse(json, strlen(json), &sm2, err,
	                           sizeof(err)) != 0 ||
	    !same(&sm, &sm2))
		abort(); /* the settings' own JSON reads back otherwise */
	free(json);
	return 0;
}

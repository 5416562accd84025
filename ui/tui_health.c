/*
 * tui_health.c - the debug pane's flags (tui_health.h).
 */
#include "tui_health.h"

#include <math.h>
#include <stdio.h>

/* Any statistic of S NaN or infinite. */
static bool tui_health_nonfinite(const struct trace_stats *s)
{
	return !isfinite(s->min) || !isfinite(s->max) || !isfinite(s->mean) ||
	       !isfinite(s->rms);
}

unsigned tui_health_layer(const struct tui_tok *k, int il)
{
	const struct trace_stats *s;

	if (k->layers == NULL || il < 0 || il >= k->n_layer)
		return 0;
	s = &k->layers[il];
	if (tui_health_nonfinite(s))
		return TUI_FLAG_NAN;
	if (il > 0 && !tui_health_nonfinite(&k->layers[il - 1]) &&
	    s->rms > TUI_HEALTH_JUMP * k->layers[il - 1].rms)
		return TUI_FLAG_JUMP;
	return 0;
}

void tui_health_check(struct tui_tok *k, const struct tui_tok *prev,
                      size_t n_prev, int32_t n_vocab)
{
	int run = 1;

	k->flags = 0;
	k->flag_layer = -1;
	for (int il = 0; il < k->n_layer; il++) {
		unsigned f = tui_health_layer(k, il);

		if (f && k->flag_layer < 0)
			k->flag_layer = il;
		k->flags |= f;
	}
	/* NaN compares false: a NaN entropy is flat too (no information) */
	if (n_vocab > 1 &&
	    !(k->raw_entropy < TUI_HEALTH_FLAT * logf((float)n_vocab)))
		k->flags |= TUI_FLAG_FLAT;
	for (size_t i = n_prev; i > 0 && prev[i - 1].id == k->id; i--)
		run++;
	if (run >= TUI_HEALTH_REPEAT)
		k->flags |= TUI_FLAG_REPEAT;
}

const char *tui_health_describe(unsigned flags, int layer, bool long_form,
                                char *out, size_t n)
{
	int others = -1;
	const char *what;

	for (unsigned f = flags; f; f &= f - 1)
		others++;
	if (flags & TUI_FLAG_NAN)
		what = long_form ? "NaN/Inf in layer" : "NaN L";
	else if (flags & TUI_FLAG_JUMP)
		what = long_form ? "rms jump at layer" : "jump L";
	else if (flags & TUI_FLAG_FLAT)
		what = long_form ? "flat logits (entropy near ln V)" : "flat";
	else if (flags & TUI_FLAG_REPEAT)
		what = long_form ? "the same token repeated" : "repeat";
	else
		what = "";
	if (flags & (TUI_FLAG_NAN | TUI_FLAG_JUMP))
		snprintf(out, n, "%s%s%d", what, long_form ? " " : "", layer);
	else
		snprintf(out, n, "%s", what);
	if (others > 0) {
		size_t k = 0;

		while (k < n && out[k])
			k++;
		snprintf(out + k, n - k, " +%d", others);
	}
	return out;
}

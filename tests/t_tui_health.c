/*
 * t_tui_health.c - the debug pane's flags (ui/tui_health.c) at and around
 * each threshold, their descriptions, and how the pane makes a token's
 * invisible characters visible (tui_pane_visible).
 */
#include "tap.h"
#include "tui_health.h"
#include "tui_int.h"

#include <math.h>
#include <string.h>

#define NL 4     /* layers of the test tokens */
#define V  49152 /* SmolLM2's vocabulary */

static struct trace_stats layers[NL];

/* A healthy token: rms 1, 1.5, 2, 2.5; entropy 2 nats; id ID. */
static struct tui_tok tok(int32_t id)
{
	struct tui_tok k;

	memset(&k, 0, sizeof(k));
	for (int il = 0; il < NL; il++)
		layers[il] = (struct trace_stats){-3, 3, 0, 1 + 0.5f * il};
	k.id = id;
	k.layers = layers;
	k.n_layer = NL;
	k.raw_entropy = 2;
	return k;
}

static void test_layers(void)
{
	struct tui_tok k = tok(5);

	tui_health_check(&k, NULL, 0, V);
	tap_ok(k.flags == 0 && k.flag_layer == -1, "healthy: no flag");
	k = tok(5);
	layers[2].rms = NAN;
	tui_health_check(&k, NULL, 0, V);
	tap_ok(k.flags == TUI_FLAG_NAN && k.flag_layer == 2,
	       "NaN rms in layer 2: NAN at layer 2 (not a jump at 3)");
	k = tok(5);
	layers[1].max = INFINITY;
	tui_health_check(&k, NULL, 0, V);
	tap_ok(k.flags == TUI_FLAG_NAN && k.flag_layer == 1,
	       "an infinite max in layer 1: NAN at layer 1");
	k = tok(5);
	layers[3].rms = layers[2].rms * (TUI_HEALTH_JUMP + 0.5f);
	tui_health_check(&k, NULL, 0, V);
	tap_ok(k.flags == TUI_FLAG_JUMP && k.flag_layer == 3 &&
	           tui_health_layer(&k, 3) == TUI_FLAG_JUMP &&
	           tui_health_layer(&k, 2) == 0,
	       "rms %.1fx the layer before: JUMP at layer 3",
	       TUI_HEALTH_JUMP + 0.5);
	k = tok(5);
	layers[3].rms = layers[2].rms * (TUI_HEALTH_JUMP - 0.5f);
	tui_health_check(&k, NULL, 0, V);
	tap_ok(k.flags == 0, "rms %.1fx: no flag", TUI_HEALTH_JUMP - 0.5);
	k = tok(5);
	k.layers = NULL;
	k.n_layer = 0;
	tui_health_check(&k, NULL, 0, V);
	tap_ok(k.flags == 0 && tui_health_layer(&k, 0) == 0,
	       "no trace: no layer flag");
}

static void test_flat_repeat(void)
{
	struct tui_tok k = tok(5), prev[TUI_HEALTH_REPEAT];

	k.raw_entropy = (TUI_HEALTH_FLAT + 0.01f) * logf(V);
	tui_health_check(&k, NULL, 0, V);
	tap_ok(k.flags == TUI_FLAG_FLAT, "entropy %.3f of ln V: FLAT",
	       TUI_HEALTH_FLAT + 0.01);
	k.raw_entropy = (TUI_HEALTH_FLAT - 0.01f) * logf(V);
	tui_health_check(&k, NULL, 0, V);
	tap_ok(k.flags == 0, "entropy %.3f of ln V: no flag",
	       TUI_HEALTH_FLAT - 0.01);
	k.raw_entropy = NAN;
	tui_health_check(&k, NULL, 0, V);
	tap_ok(k.flags == TUI_FLAG_FLAT, "a NaN entropy counts as flat");
	k = tok(5);
	for (int i = 0; i < TUI_HEALTH_REPEAT; i++)
		prev[i] = tok(5);
	prev[0].id = 6;
	tui_health_check(&k, prev, TUI_HEALTH_REPEAT, V);
	tap_ok(k.flags == TUI_FLAG_REPEAT, "%d times the same id: REPEAT",
	       TUI_HEALTH_REPEAT);
	prev[1].id = 6;
	tui_health_check(&k, prev, TUI_HEALTH_REPEAT, V);
	tap_ok(k.flags == 0, "%d times: no flag", TUI_HEALTH_REPEAT - 1);
}

static void test_describe(void)
{
	char b[96];

	tap_ok(
	    !strcmp(tui_health_describe(TUI_FLAG_NAN, 12, false, b, sizeof(b)),
	            "NaN L12"),
	    "short: %s", b);
	tap_ok(!strcmp(tui_health_describe(TUI_FLAG_NAN | TUI_FLAG_FLAT, 3,
	                                   true, b, sizeof(b)),
	               "NaN/Inf in layer 3 +1"),
	       "long, two flags: %s", b);
	tap_ok(!strcmp(tui_health_describe(TUI_FLAG_REPEAT, -1, false, b,
	                                   sizeof(b)),
	               "repeat"),
	       "short repeat: %s", b);
}

static void test_visible(void)
{
	char b[64];
	int cols = tui_pane_visible(" a\n\t\r\001\x7f\xff"
	                            "é",
	                            10, b, sizeof(b));

	tap_ok(!strcmp(b, "·a↵→␍␁␡\\xffé") && cols == 12,
	       "visible: \"%s\", %d columns", b, cols);
	cols = tui_pane_visible("\xc3", 1, b, sizeof(b));
	tap_ok(!strcmp(b, "\\xc3"), "half a character: \"%s\"", b);
	tui_pane_visible("abcdef", 6, b, 4);
	tap_ok(!strcmp(b, "abc"), "cut to the buffer: \"%s\"", b);
}

int main(void)
{
	test_layers();
	test_flat_repeat();
	test_describe();
	test_visible();
	return tap_done();
}

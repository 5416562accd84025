/*
 * tui_health.h - the debug pane's flags: what the broken engines of the
 * past looked like from outside, checked on every generated token.
 *
 * NOTES ON THE DESIGN
 *
 * A flag is a symptom, not a proof: each threshold below was chosen so
 * that SmolLM2-135M on the CPU reference (a healthy engine) raises none
 * over ordinary chats, while the failures seen during the engine's
 * bring-up ("rect rect rect": NaN or exploding residuals, logits gone
 * flat, one token repeated) raise one at once.
 *
 *   NAN     a layer's residual statistics (min, max, mean or rms) are
 *           NaN or infinite;
 *   JUMP    a layer's rms is more than TUI_HEALTH_JUMP times the rms of
 *           the layer before (SmolLM2's largest step is about 2x, at
 *           layer 1; larger models grow a few "massive activations" early
 *           on, hence a generous factor);
 *   FLAT    the raw distribution's entropy is at least TUI_HEALTH_FLAT of
 *           ln(n_vocab), the entropy of uniform logits (SmolLM2's replies
 *           stay under 7 of 10.8 nats);
 *   REPEAT  the same id sampled TUI_HEALTH_REPEAT times in a row.
 */
#ifndef PARLEY_TUI_HEALTH_H
#define PARLEY_TUI_HEALTH_H

#include "tui_worker.h"

#include <stddef.h>
#include <stdint.h>

#define TUI_HEALTH_JUMP   16.0f
#define TUI_HEALTH_FLAT   0.9f
#define TUI_HEALTH_REPEAT 8

enum {
	TUI_FLAG_NAN = 1,
	TUI_FLAG_JUMP = 2,
	TUI_FLAG_FLAT = 4,
	TUI_FLAG_REPEAT = 8,
};

/* The flags of layer IL of K (NAN, JUMP), 0 when it looks healthy. */
unsigned tui_health_layer(const struct tui_tok *k, int il);

/*
 * Set K's flags and flag_layer (the first layer flagged, or -1). PREV
 * holds the N_PREV tokens of the same reply before K (for REPEAT);
 * N_VOCAB is the vocabulary's size (for FLAT; <= 1: not checked).
 */
void tui_health_check(struct tui_tok *k, const struct tui_tok *prev,
                      size_t n_prev, int32_t n_vocab);

/* A short description of FLAGS and LAYER into OUT ("NaN/Inf at layer 12",
   "layer 3 rms jump", ...); the first flag named, "+N" for others.
   LONG_FORM: words for the pane, else a few characters for the status bar
   ("NaN L12"). Returns OUT. */
const char *tui_health_describe(unsigned flags, int layer, bool long_form,
                                char *out, size_t n);

#endif /* PARLEY_TUI_HEALTH_H */

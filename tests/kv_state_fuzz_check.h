/*
 * kv_state_fuzz_check.h - the KV state loader's contract on hostile
 * bytes, shared by fuzz/fuzz_kv_state.c and its replay in make check
 * (tests/t_fuzz_replay.c), so a finding is checked the same way forever.
 *
 * kv_state_fuzz_open() opens CPU engines (n_ctx KV_STATE_FUZZ_CTX, one
 * thread) on the tiny models of tests/data/engine (four shapes: llama
 * with Q8_0 weights, qwen2 with head dim 32 and tied embeddings, qwen35
 * with recurrent layers: version 3 states, their snapshots; gemma3 with
 * sliding-window layers kept to their window, n_ctx KV_STATE_FUZZ_WCTX,
 * chunks of 1 and a slack of 1: 11 rows, so its states hold those
 * layers from a later position, engine.h invariant 3);
 * kv_state_fuzz_check() offers bytes to each as a saved state:
 *   - refused: -1 with a message, and n_past is 0 (engine.h);
 *   - accepted: n_past is the header's, engine_state_save writes the same
 *     bytes back (the CPU cache is float32: the round trip is exact; a
 *     version 1 state comes back as version 2 with the same K/V bytes
 *     after its header; a window layer given more positions than its
 *     rows keeps the last ones: fewer bytes come back, and those make a
 *     round trip of their own), and
 *     the engine still runs: one eval at n_past (when there is room) and
 *     a greedy select end cleanly (garbage K/V may make NaN logits, which
 *     select must refuse with a message), then truncate to 0 works.
 * Only the CPU backend: the CUDA backend needs a device, which fuzzing
 * machines lack; it shares engine.c's header checks, and its kv_load
 * copies exactly the kv_bytes that engine.c has checked.
 */
#ifndef PARLEY_KV_STATE_FUZZ_CHECK_H
#define PARLEY_KV_STATE_FUZZ_CHECK_H

#include "engine.h"
#include "gguf.h"
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KV_STATE_FUZZ_CTX  8
#define KV_STATE_FUZZ_WCTX 16 /* the window engine's */
#define KV_STATE_FUZZ_N    4

struct kv_state_fuzz {
	struct gguf_file *f[KV_STATE_FUZZ_N];
	struct model *m[KV_STATE_FUZZ_N];
	struct engine *e[KV_STATE_FUZZ_N];
};

static const char *const kv_state_fuzz_models[KV_STATE_FUZZ_N] = {
    "llama_q8_0.gguf", "qwen2_f32_hd32_tied.gguf", "qwen35_f32.gguf",
    "gemma3_f32_swa.gguf"};

/* Open the engines from TOP/tests/data/engine. 0, or -1 with a message. */
static inline int kv_state_fuzz_open(struct kv_state_fuzz *z, const char *top,
                                     char *err, size_t errlen)
{
	memset(z, 0, sizeof(*z));
	for (int i = 0; i < KV_STATE_FUZZ_N; i++) {
		struct engine_params p = {0};
		char path[4096];

		snprintf(path, sizeof(path), "%s/tests/data/engine/%s", top,
		         kv_state_fuzz_models[i]);
		p.backend = "cpu";
		p.n_ctx = KV_STATE_FUZZ_CTX;
		p.n_threads = 1;
		p.n_batch = 4;
		if (i == 3) { /* sliding layers keeping 7 + 1 + 1 + 2 rows */
			p.n_ctx = KV_STATE_FUZZ_WCTX;
			p.n_batch = 1;
			p.window_slack = 1;
		}
		if (!(z->f[i] = gguf_open(path, err, errlen)) ||
		    model_load(z->f[i], &z->m[i], err, errlen) ||
		    engine_open(z->m[i], &p, &z->e[i], err, errlen))
			return -1;
	}
	return 0;
}

static inline void kv_state_fuzz_close(struct kv_state_fuzz *z)
{
	for (int i = 0; i < KV_STATE_FUZZ_N; i++) {
		engine_close(z->e[i]);
		model_free(z->m[i]);
		gguf_close(z->f[i]);
	}
	memset(z, 0, sizeof(*z));
}

/* After an accepted load of DATA[0, size): the checks of the notes. */
static const char *kv_state_fuzz_loaded(struct engine *e, const void *data,
                                        size_t size)
{
	static char why[600];
	char err[512] = "";
	int32_t tok = 1, n_past = engine_n_past(e);
	size_t n = engine_state_size(e);
	char *back = malloc(n ? n : 1);
	struct engine_select_req q = {.k = 1, .repeat_penalty = 1.0f};

	uint32_t version = 0;
	/* the bytes that must come back: all of a version 2 state; a
	   version 1 state's K/V, after its 40-byte header */
	size_t skip = 0, kvn = size;

	if (size >= 8)
		memcpy(&version, (const char *)data + 4, 4);
	if (version == 1) {
		skip = 40;
		kvn = size >= skip ? size - skip : 0;
	}
	if (n_past < 0 || n_past > engine_n_ctx(e)) {
		free(back);
		return "accepted state with n_past out of [0, n_ctx]";
	}
	if (back == NULL)
		return NULL; /* out of memory: nothing to compare */
	if (engine_window_rows(e) > 0 && version != 1 && n < size) {
		/* window rows kept short: what is saved loads and comes back
		   as it is */
		char *again = malloc(n);

		if (again == NULL) {
			free(back);
			return NULL;
		}
		if (engine_state_save(e, back, n, err, sizeof(err)) != n ||
		    engine_state_load(e, back, n, err, sizeof(err)) != 0 ||
		    engine_n_past(e) != n_past ||
		    engine_state_save(e, again, n, err, sizeof(err)) != n ||
		    memcmp(back, again, n) != 0) {
			free(again);
			free(back);
			return "a state kept to the window rows does not come "
			       "back as saved";
		}
		free(again);
		free(back);
		back = NULL;
	} else if (version == 1 ? n < kvn : n != size) {
		free(back);
		return "accepted state of another size than it saves";
	} else if (engine_state_save(e, back, n, err, sizeof(err)) != n ||
	           memcmp(back + (n - kvn), (const char *)data + skip, kvn) !=
	               0) {
		free(back);
		return "save after load differs from the loaded bytes";
	}
	free(back);
	if (n_past < engine_n_ctx(e)) {
		if (engine_eval(e, &tok, 1, 0, err, sizeof(err)) != 0) {
			snprintf(why, sizeof(why), "eval after load: %s", err);
			return why;
		}
		err[0] = '\0';
		if (engine_select(e, &q, err, sizeof(err)) == NULL &&
		    err[0] == '\0')
			return "select refused without a message";
	}
	/* a recurrent model's snapshots (the state's positions, checked on
	   load) are places it can go back to; window layers held from a
	   later position refuse a truncation below what they hold */
	if (!engine_recurrent(e) && n_past > 0 &&
	    engine_rewind_point(e, n_past - 1) != n_past - 1 &&
	    (engine_truncate(e, n_past - 1) == 0 ||
	     engine_rewind_point(e, n_past - 1) != 0))
		return "a truncation the window rows do not hold";
	if (engine_recurrent(e) && n_past > 0 &&
	    engine_truncate(e, engine_rewind_point(e, n_past - 1)) != 0)
		return "truncate to a loaded snapshot failed";
	if (engine_truncate(e, 0) != 0 || engine_n_past(e) != 0)
		return "truncate to 0 failed";
	return NULL;
}

/* The contract on DATA[0, size) for every engine: NULL, or what broke. */
static const char *kv_state_fuzz_check(struct kv_state_fuzz *z,
                                       const void *data, size_t size)
{
	for (int i = 0; i < KV_STATE_FUZZ_N; i++) {
		char err[512] = "";
		const char *why;

		if (engine_state_load(z->e[i], data, size, err, sizeof(err))) {
			if (err[0] == '\0')
				return "refused without a message";
			if (engine_n_past(z->e[i]) != 0)
				return "refused but n_past is not 0";
			continue;
		}
		if ((why = kv_state_fuzz_loaded(z->e[i], data, size)) != NULL)
			return why;
	}
	return NULL;
}

#endif /* PARLEY_KV_STATE_FUZZ_CHECK_H */

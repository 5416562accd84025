/*
 * fuzz_model.c - libFuzzer harness for the model description and the
 * engine's state loader.
 *
 * The input is parsed as a GGUF file from memory; when model_load accepts
 * it and the model is small (so a run stays fast), a CPU engine with a
 * tiny context evaluates two tokens, saves its state and reloads it, then
 * is handed the raw input as a state blob (which must be refused or
 * loaded, never crash).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "engine.h"
#include "gguf.h"
#include "model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];
	struct gguf_file *f =
	    gguf_open_memory(data, size, "fuzz", err, sizeof(err));
	struct engine_params p = {0};
	struct engine *e = NULL;
	struct model *m = NULL;
	int32_t toks[2] = {0, 1};

	if (f == NULL)
		return 0;
	if (model_load(f, &m, err, sizeof(err)) != 0)
		goto out;
	/* keep each run short: at most ~4M multiply-adds per token */
	if (model_weight_bytes(m) > (4u << 20) || m->cfg.n_vocab < 2)
		goto out;
	p.n_ctx = 8;
	p.n_threads = 1;
	p.n_batch = 2;
	if (engine_open(m, &p, &e, err, sizeof(err)) != 0)
		goto out;
	if (engine_eval(e, toks, 2, ENGINE_EVAL_ALL, err, sizeof(err)) == 0) {
		size_t n = engine_state_size(e);
		void *st = malloc(n);

		if (st && engine_state_save(e, st, n, err, sizeof(err)) == n)
			engine_state_load(e, st, n, err, sizeof(err));
		free(st);
	}
	engine_state_load(e, data, size, err, sizeof(err));
out:
	engine_close(e);
	model_free(m);
	gguf_close(f);
	return 0;
}

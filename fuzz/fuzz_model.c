/*
 * fuzz_model.c - libFuzzer harness for the model description and the
 * engine's state loader.
 *
 * The input is parsed as a GGUF file from memory; when model_load accepts
 * it and the model is small (so a run stays fast), a CPU engine with a
 * tiny context evaluates two tokens, saves its state and reloads it, then
 * is handed the raw input as a state blob (which must be refused or
 * loaded, never crash).
 *
 * Split models: an input holding a second "GGUF" magic is also cut before
 * the last one into two shards; when both parse, they are merged
 * (gguf_split_merge, which must refuse or merge, never crash) and the
 * merged file is loaded instead of the whole input.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "gguf.h"
#include "gguf_split.h"
#include "model.h"

/* The input as a model: two shards merged when it cuts into two GGUF
 * files at its last magic (offset > 0), else one file. The second shard
 * is parsed from a copy in *COPY (the caller frees it after the file):
 * tensor offsets are aligned from a file's start, which a mapping puts on
 * a page, and the input's middle is not aligned at all. */
static struct gguf_file *fuzz_open(const uint8_t *data, size_t size,
                                   uint8_t **copy, char *err, size_t errlen)
{
	struct gguf_file **sh;
	size_t cut = size;

	while (cut > 4 && memcmp(data + cut - 4, "GGUF", 4) != 0)
		cut--;
	cut = cut > 4 ? cut - 4 : 0;
	*copy = cut > 0 ? malloc(size - cut) : NULL;
	if (*copy != NULL && (sh = calloc(2, sizeof(*sh))) != NULL) {
		memcpy(*copy, data + cut, size - cut);
		sh[0] = gguf_open_memory(data, cut, "fuzz-00001-of-00002.gguf",
		                         err, errlen);
		sh[1] = gguf_open_memory(
		    *copy, size - cut, "fuzz-00002-of-00002.gguf", err, errlen);
		if (sh[0] != NULL && sh[1] != NULL)
			return gguf_split_merge(sh, 2, err, errlen);
		gguf_close(sh[0]);
		gguf_close(sh[1]);
		free(sh);
	}
	return gguf_open_memory(data, size, "fuzz", err, errlen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];
	uint8_t *copy;
	struct gguf_file *f = fuzz_open(data, size, &copy, err, sizeof(err));
	struct engine_params p = {0};
	struct engine *e = NULL;
	struct model *m = NULL;
	int32_t toks[2] = {0, 1};

	if (f == NULL)
		goto out;
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
	free(copy);
	return 0;
}

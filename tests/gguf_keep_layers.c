/*
 * gguf_keep_layers.c - write a copy of a GGUF model with only its first N
 * layers (real weights, every metadata key copied, ARCH.block_count = N).
 *
 * For GPU runs where the whole model cannot travel (the device tool
 * carries at most 64 MiB): SmolLM2-135M with 8 of its 30 layers is 50 MB
 * and still has the real embedding, tokenizer and weight statistics, so
 * t_cuda_engine can compare the engines on it (PARLEY_TEST_MODEL=FILE).
 * usage: tests/gguf_keep_layers IN.gguf OUT.gguf N
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "gguf_write.h"

int main(int argc, char **argv)
{
	char err[512] = "";
	struct gguf_file *f;
	struct gguf_writer *w;
	int keep, rc = 0;

	if (argc != 4 || (keep = atoi(argv[3])) < 1) {
		fprintf(stderr, "usage: gguf_keep_layers IN.gguf OUT.gguf N\n");
		return 2;
	}
	f = gguf_open(argv[1], err, sizeof(err));
	if (f == NULL) {
		fprintf(stderr, "gguf_keep_layers: %s\n", err);
		return 1;
	}
	w = gguf_writer_new();
	for (uint64_t i = 0; i < f->n_kv; i++) {
		const char *key = f->kv[i].key;
		size_t n = strlen(key);

		if (n > 12 && strcmp(key + n - 12, ".block_count") == 0)
			rc |= gguf_writer_set_u32(w, key, (uint32_t)keep);
		else
			rc |= gguf_writer_copy_kv(w, &f->kv[i]);
	}
	for (uint64_t i = 0; i < f->n_tensors; i++) {
		const struct gguf_tensor *t = &f->tensors[i];
		int il;

		if (sscanf(t->name, "blk.%d.", &il) == 1 && il >= keep)
			continue;
		rc |= gguf_writer_add_tensor(w, t->name, t->type, t->n_dims,
		                             t->ne, t->data, NULL, NULL);
	}
	/* a recorded error is reported by the write */
	if (gguf_writer_write(w, argv[2], err, sizeof(err)) != 0 || rc != 0) {
		fprintf(stderr, "gguf_keep_layers: %s\n", err);
		rc = 1;
	}
	gguf_writer_free(w);
	gguf_close(f);
	return rc ? 1 : 0;
}

/*
 * fuzz_gguf.c - libFuzzer harness for the GGUF reader.
 *
 * Parses the input as a GGUF file from memory and, when it opens, walks
 * every key, array and tensor the way `parley info` does, so that lookups
 * on hostile tables are exercised too.
 */
#include "gguf.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];
	struct gguf_file *f =
	    gguf_open_memory(data, size, "fuzz", err, sizeof(err));
	volatile double sink = 0;

	if (f == NULL)
		return 0;
	for (uint64_t i = 0; i < f->n_kv; i++) {
		const struct gguf_kv *kv = gguf_find_kv(f, f->kv[i].key);
		const struct gguf_array *a = &kv->val.v.arr;

		if (kv->val.type != GGUF_TYPE_ARRAY || a->raw == NULL)
			continue;
		for (uint64_t j = 0; j < a->n && j < 64; j++)
			sink += gguf_arr_f64(a, j) + (double)gguf_arr_i64(a, j);
	}
	for (uint64_t i = 0; i < f->n_tensors; i++) {
		const struct gguf_tensor *t =
		    gguf_find_tensor(f, f->tensors[i].name);
		const uint8_t *p = t->data;

		/* Touch the first and last byte of the data. */
		if (t->nbytes > 0)
			sink += p[0] + p[t->nbytes - 1];
	}
	(void)sink;
	gguf_close(f);
	return 0;
}

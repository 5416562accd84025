/*
 * fuzz_tok_load.c - libFuzzer harness for the tokenizer's loader.
 *
 * The input is a GGUF file (seeds: tests/data/tok/tiny-*.gguf). When the
 * reader and tok_load() accept it, a few texts are encoded with and
 * without special parsing and every id is decoded, through the same
 * checks as fuzz_tok.c, so that a hostile vocabulary (odd merges, empty
 * or huge tokens, strange types) is exercised end to end.
 */
#include "gguf.h"
#include "tok.h"
#include "../tests/tok_fuzz_check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const texts[] = {
	    "hello world",
	    "  <|im_end|>\n\n<tool>x",
	    "ab a\xc3\xa9 \xe2\x96\x81",
	    "123 4567 'll",
	    "\xf0\x9f\x99\x82\xff\xfe",
	    "",
	};
	char err[512];
	struct gguf_file *f =
	    gguf_open_memory(data, size, "fuzz", err, sizeof(err));
	struct tok *t;
	size_t i;

	if (f == NULL)
		return 0;
	t = tok_load(f, err, sizeof(err));
	gguf_close(f);
	if (t == NULL)
		return 0;
	for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		const char *fail =
		    tok_fuzz_check(t, 0, texts[i], strlen(texts[i]));

		/* a hostile vocabulary may lack bytes or decode oddly, but
		   must never break the first two properties */
		if (fail && strcmp(fail, "decode(encode(x)) != x") != 0) {
			fprintf(stderr, "fuzz_tok_load: %s\n", fail);
			abort();
		}
	}
	tok_free(t);
	return 0;
}

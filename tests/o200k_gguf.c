/*
 * o200k_gguf.c - write gpt-oss's vocabulary GGUF (tests/tok_o200k.h: the
 * o200k_base ranks of tests/data/tok/o200k.tokens plus the harmony control
 * tokens, as llama.cpp's converter writes them) to a path, for the tests
 * and scripts that give a random-weight gpt-oss model that vocabulary
 * (`parley dev-mkmodel --tokenizer-from`): tests/t_tui_harmony.sh, and the
 * real shapes on the GPU machine (bench/harmony-shapes.sh).
 *
 *   tests/o200k-gguf OUT.gguf      (top_srcdir finds the ranks)
 */
#include "tok_o200k.h"

#include <stdio.h>

int main(int argc, char **argv)
{
	char err[1200];

	if (argc != 2) {
		fprintf(stderr, "usage: o200k-gguf OUT.gguf\n");
		return 2;
	}
	if (o200k_make(argv[1], err, sizeof(err)) != 0) {
		fprintf(stderr, "o200k-gguf: %s: %s\n", argv[1], err);
		return 1;
	}
	return 0;
}

/*
 * fuzz_tok.c - libFuzzer harness for the tokenizer's encode and decode.
 *
 * The vocabularies are loaded once from ../shared/testdata/vocab (or
 * $PARLEY_SHARED/testdata/vocab): gpt-2, llama-bpe, qwen2 and llama-spm,
 * plus SmolLM2 from the model cache and t_tok_gemma4's synthetic Gemma 4
 * vocabulary (tests/data/tok) when present. The first input byte picks
 * the vocabulary, the rest is the text; tests/tok_fuzz_check.h states the
 * properties checked (no crash, ids in range, streaming output valid
 * UTF-8, decode(encode(x)) == x for valid UTF-8). A violated property
 * aborts, so libFuzzer keeps the input.
 */
#include "gguf.h"
#include "tok.h"
#include "../tests/tok_fuzz_check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static struct tok *toks[6]; /* loaded vocabularies */
static int nfcs[6];         /* 1 for qwen2 */
static size_t n_toks;

static void load(const char *path, int nfc)
{
	char err[512];
	struct gguf_file *f = gguf_open(path, err, sizeof(err));
	struct tok *t = f ? tok_load(f, err, sizeof(err)) : NULL;

	gguf_close(f);
	if (t == NULL) {
		fprintf(stderr, "fuzz_tok: %s\n", err);
		return;
	}
	nfcs[n_toks] = nfc;
	toks[n_toks++] = t;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const char *const names[] = {"gpt-2", "llama-bpe", "qwen2",
	                                    "llama-spm"};
	const char *shared = getenv("PARLEY_SHARED");
	const char *home = getenv("HOME");
	char path[4096];
	size_t i;

	(void)argc;
	(void)argv;
	for (i = 0; i < 4; i++) {
		snprintf(path, sizeof(path),
		         "%s/testdata/vocab/ggml-vocab-%s.gguf",
		         shared ? shared : "../shared", names[i]);
		load(path, i == 2);
	}
	snprintf(path, sizeof(path),
	         "%s/.cache/parley/models/SmolLM2-135M-Instruct.Q4_1.gguf",
	         home ? home : ".");
	load(path, 0);
	/* the synthetic Gemma 4 vocabulary of t_tok_gemma4 (run from the
	   source tree or with top_srcdir set) */
	snprintf(path, sizeof(path), "%s/tests/data/tok/gemma4.gguf",
	         getenv("top_srcdir") ? getenv("top_srcdir") : ".");
	load(path, 0);
	if (n_toks == 0)
		abort(); /* nothing to fuzz: say so loudly */
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *fail;
	size_t k;

	if (size == 0)
		return 0;
	k = data[0] % n_toks;
	fail =
	    tok_fuzz_check(toks[k], nfcs[k], (const char *)data + 1, size - 1);
	if (fail) {
		fprintf(stderr, "fuzz_tok: vocabulary %zu: %s\n", k, fail);
		abort();
	}
	return 0;
}

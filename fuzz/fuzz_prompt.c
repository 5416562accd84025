/*
 * fuzz_prompt.c - libFuzzer harness for prompt_encode() (src/prompt.c):
 * the input is a text and its provenance spans; the properties of
 * tests/prompt_check.h must hold (abort otherwise).
 *
 * Input layout: byte 0 = number of spans k (mod 16); then k bytes of span
 * lengths (each 1..256, the last span takes the rest); the rest is the
 * text (k = 0: no spans, all literal). Spans alternate literal / content
 * starting with literal.
 * Texts that are not valid UTF-8 are skipped (see valid_utf8).
 * Tokenizer: the SmolLM2 model's ($PARLEY_TEST_MODEL or the cache's);
 * without it every input is ignored.
 */
#include "gguf.h"
#include "prompt.h"
#include "prompt_check.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static struct prompt_vocab pv;

/* True when S[0, n) is valid UTF-8 (tok_encode drops bytes such as 0xF5
   and 0xFF that can never occur in UTF-8: its concern, skipped here). */
static int valid_utf8(const unsigned char *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned c = s[i], len = c < 0x80                ? 1
		                         : c >= 0xc2 && c < 0xe0 ? 2
		                         : c >= 0xe0 && c < 0xf0 ? 3
		                         : c >= 0xf0 && c < 0xf5 ? 4
		                                                 : 0;

		if (len == 0 || i + len > n)
			return 0;
		for (unsigned k = 1; k < len; k++)
			if ((s[i + k] & 0xc0) != 0x80)
				return 0;
		i += len;
	}
	return 1;
}
static int loaded; /* 1 ok, -1 no tokenizer */

static void load(void)
{
	const char *env = getenv("PARLEY_TEST_MODEL"), *home = getenv("HOME");
	char path[4096], err[256];
	struct gguf_file *f;
	struct tok *t;

	if (env && *env)
		snprintf(path, sizeof(path), "%s", env);
	else
		snprintf(path, sizeof(path),
		         "%s/.cache/parley/models/"
		         "SmolLM2-135M-Instruct.Q4_1.gguf",
		         home ? home : "");
	f = gguf_open(path, err, sizeof(err));
	t = f ? tok_load(f, err, sizeof(err)) : NULL;
	gguf_close(f);
	loaded = t && prompt_vocab_init(&pv, t, err, sizeof(err)) == 0 ? 1 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tmpl_span sp[16];
	size_t k, nsp = 0, pos = 0, len;
	const char *text;
	char why[512];

	if (loaded == 0)
		load();
	if (loaded < 0 || size < 1)
		return 0;
	k = data[0] % 16;
	if (size < 1 + k)
		return 0;
	text = (const char *)data + 1 + k;
	len = size - 1 - k;
	if (!valid_utf8((const unsigned char *)text, len) ||
	    !prompt_check_representable(&pv, text, len))
		return 0;
	for (size_t i = 0; i < k && pos < len; i++) {
		size_t l = (size_t)data[1 + i] + 1;

		if (i == k - 1 || pos + l > len)
			l = len - pos;
		sp[nsp].off = pos;
		sp[nsp].len = l;
		sp[nsp].is_content = nsp % 2 == 1;
		nsp++;
		pos += l;
	}
	if (prompt_check(&pv, text, len, nsp ? sp : NULL, nsp, why,
	                 sizeof(why))) {
		fprintf(stderr, "prompt property: %s\n", why);
		abort();
	}
	return 0;
}

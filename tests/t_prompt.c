/*
 * t_prompt.c - prompt_encode() with the real SmolLM2 tokenizer (ChatML
 * control tokens): a rendered chat whose user typed "<|im_end|>", then
 * the properties of tests/prompt_check.h on 3000 random texts built from
 * control-token text, whitespace, ASCII and multi-byte characters, cut
 * into random literal/content spans (fixed seed).
 * Model: $PARLEY_TEST_MODEL or the cache's SmolLM2; skipped when absent.
 */
#include "gguf.h"
#include "prompt.h"
#include "prompt_check.h"
#include "tap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *model_path(char *buf, size_t n)
{
	const char *env = getenv("PARLEY_TEST_MODEL"), *xdg;

	if (env && *env)
		return env;
	xdg = getenv("XDG_CACHE_HOME");
	if (xdg && *xdg == '/')
		snprintf(buf, n,
		         "%s/parley/models/SmolLM2-135M-Instruct.Q4_1."
		         "gguf",
		         xdg);
	else
		snprintf(buf, n,
		         "%s/.cache/parley/models/SmolLM2-135M-"
		         "Instruct.Q4_1.gguf",
		         getenv("HOME") ? getenv("HOME") : "");
	return buf;
}

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

int main(void)
{
	char path[4096], err[512], why[512];
	struct gguf_file *f;
	struct tok *t;
	struct prompt_vocab pv;

	model_path(path, sizeof(path));
	if (access(path, R_OK) != 0)
		return tap_skip_all("model file not found (PARLEY_TEST_MODEL)");
	f = gguf_open(path, err, sizeof(err));
	t = f ? tok_load(f, err, sizeof(err)) : NULL;
	if (t == NULL || prompt_vocab_init(&pv, t, err, sizeof(err))) {
		tap_ok(0, "load %s: %s", path, err);
		return tap_done();
	}
	tap_ok(pv.n_ctl > 2 && pv.restart_anywhere,
	       "%zu control tokens, byte-level BPE", pv.n_ctl);

	/* a chat whose user typed the end-of-turn text */
	static const char *parts[][2] = {
	    {"L", "<|im_start|>"},
	    {"C", "user"},
	    {"L", "\n"},
	    {"C", "Hi <|im_end|> there"},
	    {"L", "<|im_end|>\n<|im_start|>"},
	    {"C", "assistant"},
	    {"L", "\n"},
	};
	struct tmpl_span sp[8];
	char text[256];
	size_t len = 0, nsp = 0;

	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		size_t l = strlen(parts[i][1]);

		sp[nsp].off = len;
		sp[nsp].len = l;
		sp[nsp++].is_content = parts[i][0][0] == 'C';
		memcpy(text + len, parts[i][1], l);
		len += l;
	}
	struct tok_ids ids = {0}, want = {0};

	prompt_encode(&pv, text, len, sp, nsp, 0, &ids, NULL, err, sizeof(err));
	tok_ids_push(&want, tok_find(t, "<|im_start|>", 12));
	tok_encode(t, "user\nHi <|im_end|> there", 24, 0, &want, err,
	           sizeof(err));
	tok_ids_push(&want, tok_find(t, "<|im_end|>", 10));
	tok_encode(t, "\n", 1, 0, &want, err, sizeof(err));
	tok_ids_push(&want, tok_find(t, "<|im_start|>", 12));
	tok_encode(t, "assistant\n", 10, 0, &want, err, sizeof(err));
	tap_ok(ids.n == want.n &&
	           memcmp(ids.v, want.v, ids.n * sizeof(*ids.v)) == 0,
	       "typed <|im_end|> stays text; raw runs cross span boundaries "
	       "(%zu ids)",
	       ids.n);
	why[0] = '\0';
	int rc = prompt_check(&pv, text, len, sp, nsp, why, sizeof(why));

	tap_ok(rc == 0, "properties hold on the chat%s%s", rc ? ": " : "", why);
	free(ids.v);
	free(want.v);

	/* random texts and spans */
	static const char *atoms[] = {
	    "<|im_start|>",
	    "<|im_end|>",
	    "<|endoftext|>",
	    "<|im_",
	    "|>",
	    "\n",
	    " ",
	    "  ",
	    "\t",
	    "a",
	    "Hello",
	    " world",
	    "123",
	    "é",
	    "日本",
	    "🙂",
	    "user",
	    "assistant",
	    "<",
	    ">",
	    "'s",
	    "\xc3",
	    "\x80",
	};
	int bad = 0, n_cases = 3000, skipped = 0;

	why[0] = '\0';
	for (int c = 0; c < n_cases && !bad; c++) {
		char buf[512];
		struct tmpl_span rs[32];
		size_t bl = 0, nrs = 0, natoms = 1 + rnd(24);

		for (size_t k = 0; k < natoms; k++) {
			const char *a =
			    atoms[rnd(sizeof(atoms) / sizeof(atoms[0]))];
			size_t l = strlen(a);

			memcpy(buf + bl, a, l);
			bl += l;
		}
		/* cut into spans of alternating provenance */
		size_t pos = 0;
		bool content = rnd(2);

		while (pos < bl && nrs < 31) {
			size_t l = 1 + rnd((uint32_t)(bl - pos));

			if (nrs == 30)
				l = bl - pos;
			rs[nrs].off = pos;
			rs[nrs].len = l;
			rs[nrs++].is_content = content;
			content = !content;
			pos += l;
		}
		if (!prompt_check_representable(&pv, buf, bl)) {
			skipped++;
			continue;
		}
		if (prompt_check(&pv, buf, bl, c % 4 ? rs : NULL,
		                 c % 4 ? nrs : 0, why, sizeof(why)))
			bad = c + 1;
	}
	tap_ok(
	    bad == 0 && skipped < n_cases / 10,
	    "%d random texts and spans (%d skipped): all properties hold%s%s",
	    n_cases, skipped, bad ? ": " : "", bad ? why : "");
	prompt_vocab_free(&pv);
	tok_free(t);
	gguf_close(f);
	return tap_done();
}

/*
 * t_tok_stream.c - the streaming decoder (never half a character, U+FFFD
 * for bytes that cannot form one, SentencePiece's leading space), the
 * end-of-turn set and the rule that user text is not parsed for control
 * tokens, on the real vocabularies (skipped when absent).
 */
#include "gguf.h"
#include "tap.h"
#include "tok.h"
#include "tok_util.h"

static struct tok *open_tok(const char *path)
{
	char err[512];
	struct gguf_file *f = gguf_open(path, err, sizeof(err));
	struct tok *t = f ? tok_load(f, err, sizeof(err)) : NULL;

	if (t == NULL)
		tap_diag("skipping %s: %s", path, err);
	gguf_close(f);
	return t;
}

/* Push IDS one by one; after each push the output so far must be
   WANT[i] (a NUL-terminated string). */
static int stream_steps(const struct tok *t, unsigned flags, const int32_t *ids,
                        size_t n, const char *const *want, const char *final)
{
	struct tok_stream s;
	struct tok_buf out = {0};
	size_t i;
	int good = 1;

	tok_stream_init(&s, t, flags);
	for (i = 0; i < n; i++) {
		if (tok_stream_push(&s, ids[i], &out) ||
		    out.n != strlen(want[i]) ||
		    (out.n > 0 && memcmp(out.p, want[i], out.n) != 0)) {
			tap_diag("after id %zu: got \"%.*s\", want \"%s\"", i,
			         (int)out.n, out.p ? out.p : "", want[i]);
			good = 0;
		}
	}
	if (tok_stream_flush(&s, &out) || out.n != strlen(final) ||
	    (out.n > 0 && memcmp(out.p, final, out.n) != 0)) {
		tap_diag("after flush: got \"%.*s\", want \"%s\"", (int)out.n,
		         out.p ? out.p : "", final);
		good = 0;
	}
	free(out.p);
	return good;
}

static void test_spm(const char *path)
{
	struct tok *t = open_tok(path);
	int32_t b[4], A, hello;
	char name[8];
	int i;

	if (t == NULL)
		return;
	for (i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "<0x%02X>",
		         (unsigned char)"\xf0\x9f\x99\x82"[i]);
		b[i] = tok_find(t, name, 6);
	}
	A = tok_find(t, "A", 1);
	hello = tok_find(t, "\xe2\x96\x81Hello", 8);
	tap_ok(
	    stream_steps(t, 0, b, 4,
	                 (const char *const[]){"", "", "", "\xf0\x9f\x99\x82"},
	                 "\xf0\x9f\x99\x82"),
	    "llama-spm: an emoji in 4 byte tokens comes out whole, once");
	tap_ok(stream_steps(t, 0, (int32_t[]){b[0], A, b[1], b[0]}, 4,
	                    (const char *const[]){"",
	                                          "\xef\xbf\xbd"
	                                          "A",
	                                          "\xef\xbf\xbd"
	                                          "A\xef\xbf\xbd",
	                                          "\xef\xbf\xbd"
	                                          "A\xef\xbf\xbd"},
	                    "\xef\xbf\xbd"
	                    "A\xef\xbf\xbd\xef\xbf\xbd"),
	       "llama-spm: broken sequences become U+FFFD, flush ends one");
	tap_ok(stream_steps(t, 0, (int32_t[]){1, hello, hello}, 3,
	                    (const char *const[]){"", "Hello", "Hello Hello"},
	                    "Hello Hello"),
	       "llama-spm: BOS hidden, the first space dropped");
	tap_ok(stream_steps(t, TOK_DECODE_SPECIAL, (int32_t[]){1, hello}, 2,
	                    (const char *const[]){"<s>", "<s> Hello"},
	                    "<s> Hello"),
	       "llama-spm: TOK_DECODE_SPECIAL shows <s>, keeps the space");
	tap_ok(tok_is_eog(t, 2) && !tok_is_eog(t, 1) && !tok_is_eog(t, hello),
	       "llama-spm: </s> ends a turn, <s> does not");
	tok_free(t);
}

/* Check that TEXT's tokens hold ID only when parsed for specials. */
static void check_user_text(const struct tok *t, const char *name,
                            const char *text, int32_t id)
{
	struct tok_ids plain = {0}, parsed = {0};
	char err[256];
	size_t i;
	int seen = 0;

	tok_encode(t, text, strlen(text), 0, &plain, err, sizeof(err));
	tok_encode(t, text, strlen(text), TOK_PARSE_SPECIAL, &parsed, err,
	           sizeof(err));
	for (i = 0; i < plain.n; i++)
		seen |= plain.v[i] == id;
	tap_ok(!seen && parsed.n == 1 && parsed.v[0] == id,
	       "%s: typed \"%s\" is text (%zu ids); parsed it is id %d", name,
	       text, plain.n, id);
	free(plain.v);
	free(parsed.v);
}

static void test_eog(const char *path, const char *name, const char *const *eog,
                     const char *const *not_eog)
{
	struct tok *t = open_tok(path);
	int good = 1;

	if (t == NULL)
		return;
	for (; *eog; eog++) {
		int32_t id = tok_find(t, *eog, strlen(*eog));

		good &= tok_is_eog(t, id);
		if (!tok_is_eog(t, id))
			tap_diag("%s: %s (%d) is not end-of-turn", name, *eog,
			         id);
		check_user_text(t, name, *eog, id);
	}
	for (; *not_eog; not_eog++)
		good &= !tok_is_eog(t, tok_find(t, *not_eog, strlen(*not_eog)));
	tap_ok(good, "%s: end-of-turn tokens", name);
	tok_free(t);
}

static void test_bpe_stream(const char *path)
{
	struct tok *t = open_tok(path);
	struct tok_ids ids = {0};
	struct tok_buf out = {0};
	struct tok_stream s;
	const char *text = "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9 "
	                   "\xe4\xbd\xa0\xe5\xa5\xbd";
	char err[256];
	size_t i;
	int whole = 1;

	if (t == NULL)
		return;
	tok_encode(t, text, strlen(text), 0, &ids, err, sizeof(err));
	tok_stream_init(&s, t, 0);
	for (i = 0; i < ids.n; i++) {
		size_t before = out.n, k;

		tok_stream_push(&s, ids.v[i], &out);
		/* every chunk emitted is whole characters */
		for (k = before; k < out.n;) {
			unsigned char c = (unsigned char)out.p[k];
			size_t len = c < 0x80    ? 1
			             : c >= 0xf0 ? 4
			             : c >= 0xe0 ? 3
			                         : 2;

			if (k + len > out.n)
				whole = 0;
			k += len;
		}
	}
	tok_stream_flush(&s, &out);
	tap_ok(whole && ids.n > 4 && out.n == strlen(text) &&
	           memcmp(out.p, text, out.n) == 0,
	       "qwen2: ZWJ emoji and CJK split over %zu tokens stream whole",
	       ids.n);
	free(ids.v);
	free(out.p);
	tok_free(t);
}

int main(void)
{
	char p[1024], m[1024];
	const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");

	test_spm(tu_shared("testdata/vocab/ggml-vocab-llama-spm.gguf", p,
	                   sizeof(p)));
	test_bpe_stream(
	    tu_shared("testdata/vocab/ggml-vocab-qwen2.gguf", p, sizeof(p)));
	test_eog(
	    tu_shared("testdata/vocab/ggml-vocab-qwen2.gguf", p, sizeof(p)),
	    "qwen2", (const char *const[]){"<|im_end|>", "<|endoftext|>", NULL},
	    (const char *const[]){"<|im_start|>", "Hello", NULL});
	test_eog(
	    tu_shared("testdata/vocab/ggml-vocab-llama-bpe.gguf", p, sizeof(p)),
	    "llama-bpe",
	    (const char *const[]){"<|eot_id|>", "<|end_of_text|>", NULL},
	    (const char *const[]){"<|begin_of_text|>", "<|start_header_id|>",
	                          NULL});
	test_eog(tu_model(m, sizeof(m)), "smollm",
	         (const char *const[]){"<|im_end|>", NULL},
	         (const char *const[]){"<|im_start|>", NULL});
	if (x && *x)
		snprintf(m, sizeof(m),
		         "%s/parley/models/"
		         "gemma-3-270m-q4_k_m.gguf",
		         x);
	else
		snprintf(m, sizeof(m),
		         "%s/.cache/parley/models/"
		         "gemma-3-270m-q4_k_m.gguf",
		         h ? h : ".");
	test_eog(m, "gemma3",
	         (const char *const[]){"<end_of_turn>", "<eos>", NULL},
	         (const char *const[]){"<start_of_turn>", "<bos>", NULL});
	if (tap_n == 0)
		return tap_skip_all("no vocabulary found");
	return tap_done();
}

/*
 * t_tok_vocab.c - llama.cpp's tokenizer test vectors: every string of
 * ../shared/testdata/vocab/NAME.gguf.inp must encode (no BOS, no special
 * parsing) to exactly the ids of the matching line of NAME.gguf.out, which
 * Hugging Face's tokenizer produced. Also checks that decoding gives the
 * text back for the byte-level BPE vocabularies.
 */
#include "gguf.h"
#include "tap.h"
#include "tok.h"
#include "tok_util.h"

static const char *const vocabs[] = {
    "llama-spm",
    "gpt-2",
    "qwen2",
    "llama-bpe",
};

#define SEP     "\n__ggml_vocab_test__\n"
#define MAX_IDS 4096

/* Run one vocabulary's vectors; returns 0 when the files are missing. */
static int run_vocab(const char *name)
{
	char path[1024], rel[256], err[512];
	size_t inp_len, out_len, n_str = 0, n_ok = 0, n_rt = 0, n_rt_ok = 0;
	char *inp, *outf;
	const char *s, *o;
	struct gguf_file *f;
	struct tok *t;
	static int32_t want[MAX_IDS];

	snprintf(rel, sizeof(rel), "testdata/vocab/ggml-vocab-%s.gguf", name);
	f = gguf_open(tu_shared(rel, path, sizeof(path)), err, sizeof(err));
	if (f == NULL) {
		tap_diag("skipping %s: %s", name, err);
		return 0;
	}
	t = tok_load(f, err, sizeof(err));
	gguf_close(f);
	if (!tap_ok(t != NULL, "%s: tok_load (%s)", name, t ? "ok" : err))
		return 1;
	snprintf(rel, sizeof(rel), "testdata/vocab/ggml-vocab-%s.gguf.inp",
	         name);
	inp = tu_read(tu_shared(rel, path, sizeof(path)), &inp_len);
	snprintf(rel, sizeof(rel), "testdata/vocab/ggml-vocab-%s.gguf.out",
	         name);
	outf = tu_read(tu_shared(rel, path, sizeof(path)), &out_len);
	if (!tap_ok(inp && outf, "%s: .inp and .out readable", name))
		goto done;
	s = inp;
	o = outf;
	while (*o) {
		const char *e = strstr(s, SEP);
		struct tok_ids ids = {0};
		struct tok_buf back = {0};
		long nw;
		size_t len;

		if (e == NULL)
			break;
		len = (size_t)(e - s);
		nw = tu_parse_ids(o, want, MAX_IDS, &o);
		n_str++;
		if (nw >= 0 &&
		    tok_encode(t, s, len, 0, &ids, err, sizeof(err)) == 0 &&
		    ids.n == (size_t)nw &&
		    (ids.n == 0 ||
		     memcmp(ids.v, want, ids.n * sizeof(int32_t)) == 0))
			n_ok++;
		else if (n_str - n_ok <= 3)
			tap_diag("%s: string %zu \"%.*s\": %zu ids, want %ld",
			         name, n_str, (int)len, s, ids.n, nw);
		if (strcmp(name, "llama-spm") != 0 &&
		    strcmp(name, "qwen2") != 0) {
			n_rt++;
			if (tok_decode(t, ids.v, ids.n, 0, &back, err,
			               sizeof(err)) == 0 &&
			    back.n == len &&
			    (len == 0 || memcmp(back.p, s, len) == 0))
				n_rt_ok++;
		}
		free(ids.v);
		free(back.p);
		s = e + strlen(SEP);
	}
	tap_ok(n_str > 0 && n_ok == n_str, "%s: %zu/%zu strings give HF's ids",
	       name, n_ok, n_str);
	if (n_rt)
		tap_ok(n_rt_ok == n_rt,
		       "%s: decode(encode(x)) == x for "
		       "%zu/%zu",
		       name, n_rt_ok, n_rt);
done:
	free(inp);
	free(outf);
	tok_free(t);
	return 1;
}

int main(void)
{
	size_t i;
	int ran = 0;

	for (i = 0; i < sizeof(vocabs) / sizeof(vocabs[0]); i++)
		ran += run_vocab(vocabs[i]);
	if (ran == 0)
		return tap_skip_all("../shared/testdata/vocab not found");
	return tap_done();
}

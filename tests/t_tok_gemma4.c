/*
 * t_tok_gemma4.c - the "gemma4" tokenizer (tokenizer.ggml.model "gemma4")
 * against llama.cpp on a synthetic Gemma 4 vocabulary
 * (tests/data/tok/gemma4.gguf; tests/oracles/gen_tok_gemma4.py made it and
 * the goldens with llama-cpp-python). For each string of gemma4.txt:
 *   - the ids llama_tokenize gives without special parsing (gemma4.ids),
 *     with it (gemma4.special, TOK_PARSE_SPECIAL) and with BOS added
 *     (gemma4.bos: the file says add_bos_token = false, which llama.cpp
 *     overrides for Gemma 4);
 *   - the text llama_token_to_piece gives for those ids (gemma4.dec), with
 *     TOK_DECODE_SPECIAL for the parsed ones;
 *   - decode(encode(x)) == x for valid UTF-8, and the streaming decoder
 *     gives what tok_decode gives.
 */
#include "gguf.h"
#include "tap.h"
#include "tok.h"
#include "tok_util.h"
#include "utf8.h"

#define MAX_IDS  4096
#define MAX_STRS 256

static const char *strs[MAX_STRS]; /* the strings (into the file) */
static size_t lens[MAX_STRS];      /* their lengths */
static size_t n_strs;

/* Parse gemma4.txt ("<len>\n<bytes>\n" each) held in BUF. */
static int read_strs(char *buf, size_t len)
{
	char *p = buf, *end = buf + len;

	while (p < end && n_strs < MAX_STRS) {
		char *e;
		unsigned long n = strtoul(p, &e, 10);

		if (e == p || *e != '\n' || n > (size_t)(end - e - 1))
			return -1;
		strs[n_strs] = e + 1;
		lens[n_strs++] = n;
		p = e + 1 + n + 1;
	}
	return 0;
}

/* Compare every string's ids under FLAGS with the lines of FILE. */
static void check_ids(const struct tok *t, const char *file, unsigned flags)
{
	static int32_t want[MAX_IDS];
	char path[1024], err[256];
	size_t len, i, ok = 0, shown = 0;
	char *f = tu_read(tu_src(file, path, sizeof(path)), &len);
	const char *o = f;

	if (!tap_ok(f != NULL, "%s readable", file))
		return;
	for (i = 0; i < n_strs && *o; i++) {
		struct tok_ids ids = {0};
		long nw = tu_parse_ids(o, want, MAX_IDS, &o);

		if (nw >= 0 &&
		    tok_encode(t, strs[i], lens[i], flags, &ids, err,
		               sizeof(err)) == 0 &&
		    ids.n == (size_t)nw &&
		    (nw == 0 || memcmp(ids.v, want, ids.n * 4) == 0)) {
			ok++;
		} else if (shown++ < 5) {
			size_t k;

			tap_diag("%s: string %zu \"%.*s\" differs", file, i,
			         (int)lens[i], strs[i]);
			for (k = 0; k < ids.n; k++)
				tap_diag("  got %d", ids.v[k]);
			for (k = 0; k < (size_t)(nw > 0 ? nw : 0); k++)
				tap_diag("  want %d", want[k]);
		}
		free(ids.v);
	}
	tap_ok(ok == n_strs && n_strs > 0,
	       "%s: %zu/%zu strings give llama.cpp's ids", file, ok, n_strs);
	free(f);
}

/* Hex of N bytes at P into OUT (2 * n + 1 bytes). */
static void hex(const char *p, size_t n, char *out)
{
	size_t k;

	for (k = 0; k < n; k++)
		sprintf(out + 2 * k, "%02x", (unsigned char)p[k]);
	out[2 * n] = 0;
}

/* Decode the ids of one string under ENC / DEC flags; compare the text
   with WANT (hex), with the string itself when it is valid UTF-8, and the
   streaming decoder's output with tok_decode's. Returns 0 when all hold. */
static int check_one(const struct tok *t, size_t i, unsigned enc, unsigned dec,
                     const char *want, size_t wlen)
{
	static char got[2 * 65536 + 1];
	struct tok_ids ids = {0};
	struct tok_buf d = {0}, s = {0};
	struct tok_stream st;
	char err[256];
	size_t k;
	int bad = 0;

	if (tok_encode(t, strs[i], lens[i], enc, &ids, err, sizeof(err)) ||
	    tok_decode(t, ids.v, ids.n, dec, &d, err, sizeof(err)) ||
	    d.n > 65536) {
		bad = 1;
		goto out;
	}
	hex(d.p, d.n, got);
	if (strlen(got) != wlen || memcmp(got, want, wlen) != 0) {
		tap_diag("string %zu: decoded %s, llama.cpp %.*s", i, got,
		         (int)wlen, want);
		bad = 1;
	}
	if (utf8_check(strs[i], lens[i]) == lens[i] &&
	    (d.n != lens[i] || (d.n > 0 && memcmp(d.p, strs[i], d.n) != 0))) {
		tap_diag("string %zu: decode(encode(x)) != x", i);
		bad = 1;
	}
	tok_stream_init(&st, t, dec);
	for (k = 0; k < ids.n; k++)
		if (tok_stream_push(&st, ids.v[k], &s))
			bad = 1;
	if (tok_stream_flush(&st, &s) || s.n != d.n ||
	    (d.n && memcmp(s.p, d.p, d.n) != 0)) {
		tap_diag("string %zu: the stream differs from tok_decode", i);
		bad = 1;
	}
out:
	free(ids.v);
	free(d.p);
	free(s.p);
	return bad;
}

/* Compare decoding with gemma4.dec: "<plain hex> <special hex>" a line. */
static void check_decode(const struct tok *t)
{
	char path[1024];
	size_t len, i, ok_plain = 0, ok_special = 0;
	char *f = tu_read(
	    tu_src("tests/data/tok/gemma4.dec", path, sizeof(path)), &len);
	const char *o = f;

	if (!tap_ok(f != NULL, "gemma4.dec readable"))
		return;
	for (i = 0; i < n_strs && *o; i++) {
		const char *sp = strchr(o, ' ');
		const char *nl = sp ? strchr(sp, '\n') : NULL;

		if (nl == NULL)
			break;
		ok_plain += !check_one(t, i, 0, 0, o, (size_t)(sp - o));
		ok_special +=
		    !check_one(t, i, TOK_PARSE_SPECIAL, TOK_DECODE_SPECIAL,
		               sp + 1, (size_t)(nl - sp - 1));
		o = nl + 1;
	}
	tap_ok(ok_plain == n_strs,
	       "decode: %zu/%zu strings give llama.cpp's text and round-trip",
	       ok_plain, n_strs);
	tap_ok(ok_special == n_strs,
	       "decode with specials: %zu/%zu strings give llama.cpp's text "
	       "and round-trip",
	       ok_special, n_strs);
	free(f);
}

/* Facts about the vocabulary llama.cpp's loader decides. */
static void check_facts(const struct tok *t)
{
	static const char *const eog[] = {"<turn|>", "<eos>",
	                                  "<|tool_response>"};
	size_t k;

	tap_ok(strcmp(tok_pre_name(t), "gemma4") == 0,
	       "pre-tokenizer is gemma4 (%s)", tok_pre_name(t));
	tap_ok(tok_add_bos(t) && tok_bos(t) == 2,
	       "BOS added although the file says add_bos_token = false");
	for (k = 0; k < 3; k++)
		tap_ok(tok_is_eog(t, tok_find(t, eog[k], strlen(eog[k]))),
		       "%s ends a turn", eog[k]);
	tap_ok(!tok_is_eog(t, tok_find(t, "<|turn>", 7)),
	       "<|turn> does not end a turn");
}

int main(void)
{
	char path[1024], err[256];
	struct gguf_file *f;
	struct tok *t;
	size_t len;
	char *txt = tu_read(
	    tu_src("tests/data/tok/gemma4.txt", path, sizeof(path)), &len);

	const int rd = txt != NULL ? read_strs(txt, len) : -1;

	if (!tap_ok(rd == 0 && n_strs >= 40, "gemma4.txt holds %zu strings",
	            n_strs))
		return tap_done();
	f = gguf_open(tu_src("tests/data/tok/gemma4.gguf", path, sizeof(path)),
	              err, sizeof(err));
	if (!tap_ok(f != NULL, "gemma4.gguf opens (%s)", f ? "ok" : err))
		return tap_done();
	t = tok_load(f, err, sizeof(err));
	gguf_close(f);
	if (!tap_ok(t != NULL, "tok_load (%s)", t ? "ok" : err))
		return tap_done();
	check_facts(t);
	check_ids(t, "tests/data/tok/gemma4.ids", 0);
	check_ids(t, "tests/data/tok/gemma4.special", TOK_PARSE_SPECIAL);
	check_ids(t, "tests/data/tok/gemma4.bos",
	          TOK_PARSE_SPECIAL | TOK_ADD_SPECIAL);
	check_decode(t);
	tok_free(t);
	free(txt);
	return tap_done();
}

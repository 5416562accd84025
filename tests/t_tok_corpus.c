/*
 * t_tok_corpus.c - the tokenizer against its oracles on a corpus of 2,399
 * strings (tests/data/tok/corpus.txt, made by tests/oracles/gen_tok.py):
 * English, code, whitespace runs, \r\n, numbers of 1..40 digits,
 * contractions, emoji and ZWJ sequences, CJK, Arabic, Devanagari,
 * combining marks, random code points, random bytes made valid, long
 * repeated characters. For every tokenizer:
 *   - every string gives exactly the oracle's ids (NAME.ids);
 *   - strings with control-token text give the oracle's ids when parsed
 *     with TOK_PARSE_SPECIAL (NAME.special);
 *   - added tokens marked lstrip / rstrip swallow whitespace as HF's do
 *     (qwen2-strip.*);
 *   - decode(encode(x)) == x (NFC(x) for qwen2; SentencePiece is
 *     lossless here thanks to byte fallback) for
 *     every string whose bytes all have a symbol in the vocabulary
 *     (SmolLM2's lacks 21 of the 256, which HF drops);
 *   - the streaming decoder, fed one id at a time, emits valid UTF-8, and
 *     exactly what tok_decode gives whenever that is valid UTF-8.
 * Vocabularies: ../shared/testdata/vocab (qwen2, llama-bpe, llama-spm),
 * tests/data/tok/llama2-hf.gguf (made from tokenizers/llama2), the
 * SmolLM2 model and the Gemma-3-270M GGUF from the model cache; each one
 * that is absent is skipped with a diagnostic. And o200k, gpt-oss's
 * vocabulary with the "gpt-4o" pre-tokenizer: its GGUF is written here at
 * run time from tests/data/tok/o200k.tokens (the tiktoken ranks) as
 * llama.cpp's converter lays it out (tests/oracles/gen_tok_o200k.py says
 * how), and it also meets o200k-hard.txt, strings aimed at its pattern.
 */
#include "gguf.h"
#include "tap.h"
#include "tok.h"
#include "tok_util.h"

#include "tok_o200k.h"

#include <unistd.h>
#include <utf8proc.h>

#define MAX_IDS 65536

struct strs {
	char **s;   /* strings (pointers into buf) */
	size_t *n;  /* their lengths */
	size_t cnt; /* strings */
	char *buf;  /* the file (owned) */
};

/* Parse a "<len>\n<bytes>\n" file into S. */
static int read_strs(const char *path, struct strs *s)
{
	size_t len, cap = 0;
	char *p, *end;

	memset(s, 0, sizeof(*s));
	s->buf = tu_read(path, &len);
	if (s->buf == NULL)
		return -1;
	p = s->buf;
	end = s->buf + len;
	while (p < end) {
		char *e;
		unsigned long n = strtoul(p, &e, 10);

		if (e == p || *e != '\n' || n > (size_t)(end - e - 1))
			return -1;
		if (s->cnt == cap) {
			cap = cap ? cap * 2 : 1024;
			s->s = realloc(s->s, cap * sizeof(*s->s));
			s->n = realloc(s->n, cap * sizeof(*s->n));
			if (!s->s || !s->n)
				return -1;
		}
		s->s[s->cnt] = e + 1;
		s->n[s->cnt++] = n;
		p = e + 1 + n + 1;
	}
	return 0;
}

static void free_strs(struct strs *s)
{
	free(s->s);
	free(s->n);
	free(s->buf);
}

/* Compare every string of STRS with the id lines of IDS_PATH. */
static void check_ids(const struct tok *t, const char *name,
                      const struct strs *st, const char *ids_path,
                      unsigned flags, const char *what)
{
	static int32_t want[MAX_IDS];
	size_t len, i, ok = 0, shown = 0;
	char err[256];
	char *f = tu_read(ids_path, &len);
	const char *o = f;

	if (!tap_ok(f != NULL, "%s: %s readable", name, ids_path))
		return;
	for (i = 0; i < st->cnt && *o; i++) {
		struct tok_ids ids = {0};
		long nw = tu_parse_ids(o, want, MAX_IDS, &o);

		if (nw >= 0 &&
		    tok_encode(t, st->s[i], st->n[i], flags, &ids, err,
		               sizeof(err)) == 0 &&
		    ids.n == (size_t)nw &&
		    (nw == 0 || memcmp(ids.v, want, ids.n * 4) == 0)) {
			ok++;
		} else if (shown++ < 5) {
			size_t k;

			tap_diag("%s: %s string %zu (%zu bytes) differs", name,
			         what, i, st->n[i]);
			for (k = 0; k < ids.n && k < (size_t)nw; k++)
				if (ids.v[k] != want[k])
					break;
			tap_diag("  first difference at id %zu: got %d, want "
			         "%d (got %zu ids, want %ld)",
			         k, k < ids.n ? ids.v[k] : -1,
			         k < (size_t)nw ? want[k] : -1, ids.n, nw);
		}
		free(ids.v);
	}
	tap_ok(i == st->cnt && ok == st->cnt,
	       "%s: %s: %zu/%zu strings give "
	       "the oracle's ids",
	       name, what, ok, st->cnt);
	free(f);
}

/* All strings in one call, joined by the EOS token's text and parsed with
   TOK_PARSE_SPECIAL: the parts are encoded independently, so the result
   must be every string's oracle ids followed by EOS. One long call also
   exercises the chunk cache (only used for texts >= 4 KB). */
static void check_joined(const struct tok *t, const char *name,
                         const struct strs *st, const char *ids_path)
{
	static int32_t want[MAX_IDS];
	struct tok_ids ids = {0}, exp = {0};
	struct tok_buf text = {0};
	size_t eos_len, len, i;
	const char *eos = tok_text(t, tok_eos(t), &eos_len);
	char *f = tu_read(ids_path, &len), err[256];
	const char *o = f;
	int good = f != NULL && eos != NULL;

	for (i = 0; good && i < st->cnt; i++) {
		long nw = tu_parse_ids(o, want, MAX_IDS, &o);
		long k;

		good = nw >= 0;
		for (k = 0; good && k < nw; k++)
			good = tok_ids_push(&exp, want[k]) == 0;
		good = good && tok_ids_push(&exp, tok_eos(t)) == 0 &&
		       tok_buf_append(&text, st->s[i], st->n[i]) == 0 &&
		       tok_buf_append(&text, eos, eos_len) == 0;
	}
	good = good && tok_encode(t, text.p, text.n, TOK_PARSE_SPECIAL, &ids,
	                          err, sizeof(err)) == 0;
	tap_ok(good && ids.n == exp.n &&
	           memcmp(ids.v, exp.v, ids.n * sizeof(int32_t)) == 0,
	       "%s: all strings in one %zu-byte call, joined by EOS: %zu ids "
	       "as expected",
	       name, text.n, exp.n);
	free(ids.v);
	free(exp.v);
	free(text.p);
	free(f);
}

/* True when the N bytes at P are valid UTF-8. */
static bool valid_utf8(const char *p, size_t n)
{
	utf8proc_int32_t cp;

	while (n > 0) {
		utf8proc_ssize_t l = utf8proc_iterate(
		    (const utf8proc_uint8_t *)p, (utf8proc_ssize_t)n, &cp);

		if (l <= 0)
			return false;
		p += l;
		n -= (size_t)l;
	}
	return true;
}

/* Which bytes have a symbol (a byte-level vocabulary may lack some: HF
   then drops them, and so do we). */
static void byte_cover(const struct tok *t, bool cover[256])
{
	char err[64];
	int b;

	for (b = 0; b < 256; b++) {
		struct tok_ids ids = {0};
		char c = (char)b;

		tok_encode(t, &c, 1, 0, &ids, err, sizeof(err));
		cover[b] = ids.n == 1;
		free(ids.v);
	}
}

/* Round trip and streaming checks over the corpus. */
static void check_decode(const struct tok *t, const char *name,
                         const struct strs *st, bool bpe, bool nfc)
{
	size_t i, rt_ok = 0, rt_n = 0, st_ok = 0;
	bool cover[256];
	char err[256];

	if (bpe)
		byte_cover(t, cover);
	else
		memset(cover, 1, sizeof(cover));
	for (i = 0; i < st->cnt; i++) {
		struct tok_ids ids = {0};
		struct tok_buf dec = {0}, str = {0};
		struct tok_stream s;
		utf8proc_uint8_t *want = NULL;
		utf8proc_ssize_t wn = (utf8proc_ssize_t)st->n[i];
		bool covered = true;
		size_t k;
		int rc = 0;

		for (k = 0; k < st->n[i]; k++)
			covered &= cover[(unsigned char)st->s[i][k]];
		tok_encode(t, st->s[i], st->n[i], 0, &ids, err, sizeof(err));
		tok_decode(t, ids.v, ids.n, 0, &dec, err, sizeof(err));
		tok_stream_init(&s, t, 0);
		for (k = 0; k < ids.n; k++)
			rc |= tok_stream_push(&s, ids.v[k], &str);
		rc |= tok_stream_flush(&s, &str);
		/* the stream is valid UTF-8, and is the decoded text when
		   that is valid */
		if (rc == 0 && valid_utf8(str.p, str.n) &&
		    (!valid_utf8(dec.p, dec.n) ||
		     (str.n == dec.n &&
		      (dec.n == 0 || memcmp(str.p, dec.p, dec.n) == 0))))
			st_ok++;
		if (nfc)
			wn = utf8proc_map((const utf8proc_uint8_t *)st->s[i],
			                  wn, &want,
			                  UTF8PROC_STABLE | UTF8PROC_COMPOSE);
		if (covered) {
			rt_n++;
			if (wn >= 0 && (size_t)wn == dec.n &&
			    (dec.n == 0 ||
			     memcmp(dec.p, want ? (char *)want : st->s[i],
			            dec.n) == 0))
				rt_ok++;
		}
		free(want);
		free(ids.v);
		free(dec.p);
		free(str.p);
	}
	tap_ok(rt_ok == rt_n && rt_n > st->cnt / 2,
	       "%s: decode(encode(x)) == %s for %zu/%zu (%zu strings hold "
	       "bytes the vocabulary lacks)",
	       name, nfc ? "NFC(x)" : "x", rt_ok, rt_n, st->cnt - rt_n);
	tap_ok(st_ok == st->cnt,
	       "%s: streaming decode is valid UTF-8 and "
	       "equals decode for %zu/%zu",
	       name, st_ok, st->cnt);
}

/* HF's lstrip / rstrip: qwen2 with <|im_end|> lstrip, <|im_start|>
   rstrip (tests/data/tok/qwen2-strip.*). */
static void check_strip(const char *path)
{
	char err[512], p[1024];
	struct gguf_file *f = gguf_open(path, err, sizeof(err));
	struct tok *t = f ? tok_load(f, err, sizeof(err)) : NULL;
	struct strs st;

	gguf_close(f);
	if (t == NULL)
		return;
	tap_ok(tok_set_attr(t, tok_find(t, "<|im_end|>", 10),
	                    TOK_ATTR_LSTRIP) == 0 &&
	           tok_set_attr(t, tok_find(t, "<|im_start|>", 12),
	                        TOK_ATTR_RSTRIP) == 0,
	       "qwen2: lstrip / rstrip set");
	if (tap_ok(read_strs(
	               tu_src("tests/data/tok/qwen2-strip.txt", p, sizeof(p)),
	               &st) == 0,
	           "qwen2-strip strings readable"))
		check_ids(
		    t, "qwen2-strip", &st,
		    tu_src("tests/data/tok/qwen2-strip.ids", p, sizeof(p)),
		    TOK_PARSE_SPECIAL, "lstrip/rstrip");
	free_strs(&st);
	tok_free(t);
}

/* Load PATH and run every check for NAME; 0 when PATH is absent. With
   HARD, also compare tests/data/tok/NAME-hard.{txt,ids}. */
static int run(const char *name, const char *path, const struct strs *corpus,
               bool bpe, bool nfc, bool hard)
{
	char err[512], p[1024], rel[256];
	struct gguf_file *f = gguf_open(path, err, sizeof(err));
	struct tok *t;
	struct strs sp;

	if (f == NULL) {
		tap_diag("skipping %s: %s", name, err);
		return 0;
	}
	t = tok_load(f, err, sizeof(err));
	gguf_close(f);
	if (!tap_ok(t != NULL, "%s: tok_load: %s", name, t ? "ok" : err))
		return 1;
	snprintf(rel, sizeof(rel), "tests/data/tok/%s.ids", name);
	check_ids(t, name, corpus, tu_src(rel, p, sizeof(p)), 0, "corpus");
	snprintf(rel, sizeof(rel), "tests/data/tok/%s.special.txt", name);
	if (tap_ok(read_strs(tu_src(rel, p, sizeof(p)), &sp) == 0,
	           "%s: special strings readable", name)) {
		snprintf(rel, sizeof(rel), "tests/data/tok/%s.special", name);
		check_ids(t, name, &sp, tu_src(rel, p, sizeof(p)),
		          TOK_PARSE_SPECIAL, "parse-special");
	}
	free_strs(&sp);
	snprintf(rel, sizeof(rel), "tests/data/tok/%s-hard.txt", name);
	if (hard && tap_ok(read_strs(tu_src(rel, p, sizeof(p)), &sp) == 0,
	                   "%s: hard strings readable", name)) {
		snprintf(rel, sizeof(rel), "tests/data/tok/%s-hard.ids", name);
		check_ids(t, name, &sp, tu_src(rel, p, sizeof(p)), 0, "hard");
		check_decode(t, name, &sp, bpe, nfc);
	}
	if (hard)
		free_strs(&sp);
	check_decode(t, name, corpus, bpe, nfc);
	snprintf(rel, sizeof(rel), "tests/data/tok/%s.ids", name);
	check_joined(t, name, corpus, tu_src(rel, p, sizeof(p)));
	tok_free(t);
	return 1;
}

/* Build the o200k GGUF in a temporary directory and run every check. */
static int run_o200k(const struct strs *corpus)
{
	char dir[] = "/tmp/t_tok_corpus.XXXXXX", path[256], err[512];
	int ran = 0;

	if (!tap_ok(mkdtemp(dir) != NULL, "o200k: temporary directory"))
		return 0;
	snprintf(path, sizeof(path), "%s/o200k.gguf", dir);
	if (tap_ok(o200k_make(path, err, sizeof(err)) == 0,
	           "o200k: vocabulary GGUF written (%s)", err))
		ran = run("o200k", path, corpus, true, false, true);
	unlink(path);
	rmdir(dir);
	return ran;
}

int main(void)
{
	char p[1024], m[1024], g[1024];
	struct strs c;
	const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
	int ran = 0;

	if (read_strs(tu_src("tests/data/tok/corpus.txt", p, sizeof(p)), &c))
		return tap_skip_all("tests/data/tok/corpus.txt unreadable");
	tap_ok(c.cnt >= 2000, "corpus has %zu strings", c.cnt);
	ran +=
	    run("qwen2",
	        tu_shared("testdata/vocab/ggml-vocab-qwen2.gguf", p, sizeof(p)),
	        &c, true, true, false);
	check_strip(p);
	ran += run(
	    "llama-bpe",
	    tu_shared("testdata/vocab/ggml-vocab-llama-bpe.gguf", p, sizeof(p)),
	    &c, true, false, false);
	ran += run(
	    "llama-spm",
	    tu_shared("testdata/vocab/ggml-vocab-llama-spm.gguf", p, sizeof(p)),
	    &c, false, false, false);
	ran += run("llama2-hf",
	           tu_src("tests/data/tok/llama2-hf.gguf", p, sizeof(p)), &c,
	           false, false, false);
	ran += run("smollm", tu_model(m, sizeof(m)), &c, true, false, false);
	if (getenv("PARLEY_TEST_GEMMA"))
		snprintf(g, sizeof(g), "%s", getenv("PARLEY_TEST_GEMMA"));
	else if (x && *x)
		snprintf(g, sizeof(g),
		         "%s/parley/models/"
		         "gemma-3-270m-q4_k_m.gguf",
		         x);
	else
		snprintf(g, sizeof(g),
		         "%s/.cache/parley/models/"
		         "gemma-3-270m-q4_k_m.gguf",
		         h ? h : ".");
	ran += run("gemma3", g, &c, false, false, false);
	ran += run_o200k(&c);
	free_strs(&c);
	if (ran == 0)
		return tap_skip_all("no vocabulary found");
	return tap_done();
}

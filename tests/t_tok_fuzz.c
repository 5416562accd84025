/*
 * t_tok_fuzz.c - the fuzz harnesses' properties (tests/tok_fuzz_check.h)
 * in `make check`: on 3,000 pseudo-random byte strings (fixed seed: raw
 * bytes, then UTF-8 made of random code points) for every vocabulary, and
 * on every regression file kept by fuzz/run.sh under
 * tests/data/tok/crashers (first byte: vocabulary) and
 * tests/data/tok_load/crashers (GGUF files for tok_load). gpt-oss's o200k
 * vocabulary (built at run time, tests/tok_o200k.h) gets the random
 * strings too, as does the synthetic Gemma 4 vocabulary of t_tok_gemma4;
 * both are kept out of the crasher replay, whose first byte picks among
 * the vocabularies above.
 */
#include "gguf.h"
#include "tap.h"
#include "tok.h"
#include "tok_fuzz_check.h"
#include "tok_o200k.h"
#include "tok_util.h"

#include <dirent.h>
#include <unistd.h>

static struct tok *toks[5];
static int nfcs[5];
static size_t n_toks;

static void load(const char *path, int nfc)
{
	char err[512];
	struct gguf_file *f = gguf_open(path, err, sizeof(err));
	struct tok *t = f ? tok_load(f, err, sizeof(err)) : NULL;

	gguf_close(f);
	if (t == NULL) {
		tap_diag("skipping %s: %s", path, err);
		return;
	}
	nfcs[n_toks] = nfc;
	toks[n_toks++] = t;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 11);
}

/* Write CP as UTF-8 at DST; returns the bytes written. */
static size_t tok_utf8_put_test(uint32_t cp, char *dst)
{
	unsigned char *d = (unsigned char *)dst;

	if (cp < 0x80) {
		d[0] = (unsigned char)cp;
		return 1;
	}
	if (cp < 0x800) {
		d[0] = (unsigned char)(0xc0 | cp >> 6);
		d[1] = (unsigned char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		d[0] = (unsigned char)(0xe0 | cp >> 12);
		d[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
		d[2] = (unsigned char)(0x80 | (cp & 0x3f));
		return 3;
	}
	d[0] = (unsigned char)(0xf0 | cp >> 18);
	d[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
	d[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
	d[3] = (unsigned char)(0x80 | (cp & 0x3f));
	return 4;
}

/* A random string into BUF (cap >= 256); returns its length. */
static size_t random_text(char *buf, int utf8)
{
	size_t n = 0, want = next() % 120;

	while (n < want) {
		if (!utf8) {
			buf[n++] = (char)(next() & 0xff);
		} else {
			uint32_t r = next() % 100, cp;

			cp = r < 40   ? 0x20 + next() % 0x5f
			     : r < 50 ? next() % 0x20
			     : r < 70 ? 0x80 + next() % 0x780
			     : r < 90 ? 0x800 + next() % 0xf7fe
			              : 0x10000 + next() % 0x100000;
			if (cp >= 0xd800 && cp <= 0xdfff)
				cp = 0x4e00;
			n += tok_utf8_put_test(cp, buf + n);
		}
	}
	return n;
}

/* Replay the files under REL (text inputs, or GGUF files when GGUF_FILES);
   returns how many there were. The directory must exist and hold at least
   one input (see its README): a replay of nothing proves nothing. */
static int replay(const char *rel, int gguf_files)
{
	char dir[1024], path[2048];
	struct dirent *e;
	int n = 0, bad = 0;
	DIR *d = opendir(tu_src(rel, dir, sizeof(dir)));

	if (d == NULL) {
		tap_ok(0, "%s: the regression directory is missing", rel);
		return 0;
	}
	while ((e = readdir(d)) != NULL) {
		size_t len;
		char *data;

		if (e->d_name[0] == '.' || strcmp(e->d_name, "README") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		data = tu_read(path, &len);
		if (data == NULL) {
			tap_diag("cannot read %s", path);
			bad++;
			continue;
		}
		n++;
		if (gguf_files) {
			char err[512] = "";
			struct gguf_file *f = gguf_open_memory(
			    data, len, e->d_name, err, sizeof(err));
			struct tok *t =
			    f ? tok_load(f, err, sizeof(err)) : NULL;
			const char *fail;

			gguf_close(f);
			fail =
			    t ? tok_fuzz_check(t, 0, "hello <x> 12", 12) : NULL;
			if (t == NULL)
				tap_diag("%s: refused: %s", e->d_name,
				         err[0] ? err : "WITHOUT A MESSAGE");
			if ((fail && strcmp(fail, "decode(encode(x)) != x")) ||
			    (t == NULL && err[0] == '\0'))
				bad++;
			tok_free(t);
		} else if (n_toks == 0) {
			n--; /* no vocabulary to replay it with: not replayed */
		} else if (len > 0) {
			size_t k = (unsigned char)data[0] % n_toks;

			if (tok_fuzz_check(toks[k], nfcs[k], data + 1,
			                   len - 1)) {
				tap_diag("%s fails", path);
				bad++;
			}
		}
		free(data);
	}
	closedir(d);
	tap_ok(n > 0 && bad == 0, "%s: %d regression files replayed, %d failed",
	       rel, n, bad);
	return n;
}

/* 3000 random strings through T: the harness properties hold. */
static void fuzz_random(const struct tok *t, int nfc)
{
	const char *fail = NULL;
	char buf[1024];
	int bad = 0, i;

	for (i = 0; i < 3000; i++) {
		size_t n = random_text(buf, i % 2);
		const char *f = tok_fuzz_check(t, nfc, buf, n);

		if (f) {
			bad++;
			fail = f;
		}
	}
	tap_ok(bad == 0,
	       "%s: 3000 random strings keep the properties "
	       "(%d failed%s%s)",
	       tok_pre_name(t), bad, fail ? ": " : "", fail ? fail : "");
}

/* The same for Gemma 4's (the synthetic vocabulary of t_tok_gemma4: BPE
 * over characters, spaces as U+2581, byte fallback), also kept out of the
 * crasher replay. */
static void fuzz_gemma4(void)
{
	char path[1024], err[512];
	const char *top = getenv("top_srcdir");
	struct gguf_file *f;
	struct tok *t = NULL;

	snprintf(path, sizeof(path), "%s/tests/data/tok/gemma4.gguf",
	         top ? top : ".");
	f = gguf_open(path, err, sizeof(err));
	if (f != NULL)
		t = tok_load(f, err, sizeof(err));
	gguf_close(f);
	if (tap_ok(t != NULL, "gemma4: vocabulary loaded (%s)", t ? "ok" : err))
		fuzz_random(t, 0);
	tok_free(t);
}

/* The same for gpt-oss's vocabulary, written to a temporary file. */
static void fuzz_o200k(void)
{
	char dir[] = "/tmp/t_tok_fuzz.XXXXXX", path[256], err[512];
	struct gguf_file *f = NULL;
	struct tok *t = NULL;

	if (mkdtemp(dir) == NULL) {
		tap_diag("skipping o200k: no temporary directory");
		return;
	}
	snprintf(path, sizeof(path), "%s/o200k.gguf", dir);
	if (o200k_make(path, err, sizeof(err)) == 0 &&
	    (f = gguf_open(path, err, sizeof(err))) != NULL)
		t = tok_load(f, err, sizeof(err));
	gguf_close(f);
	unlink(path);
	rmdir(dir);
	if (tap_ok(t != NULL, "o200k: vocabulary built and loaded (%s)",
	           t ? "ok" : err))
		fuzz_random(t, 0);
	tok_free(t);
}

int main(void)
{
	static const char *const names[] = {"gpt-2", "llama-bpe", "qwen2",
	                                    "llama-spm"};
	char p[1024], rel[256];
	size_t i, k;

	for (i = 0; i < 4; i++) {
		snprintf(rel, sizeof(rel), "testdata/vocab/ggml-vocab-%s.gguf",
		         names[i]);
		load(tu_shared(rel, p, sizeof(p)), i == 2);
	}
	load(tu_model(p, sizeof(p)), 0);
	for (k = 0; k < n_toks; k++)
		fuzz_random(toks[k], nfcs[k]);
	fuzz_o200k();
	fuzz_gemma4();
	replay("tests/data/tok/crashers", 0);
	replay("tests/data/tok_load/crashers", 1);
	for (k = 0; k < n_toks; k++)
		tok_free(toks[k]);
	return tap_done();
}

/*
 * t_hfpull.c - the pure part of `parley pull` (hfpull.c): names (ollama's
 * refused, prefixes dropped, bad ones refused), the hub's listing as
 * hostile input (paths out of the repository, bad hashes, sizes and
 * commits, files without LFS skipped), and the choice of files (the
 * quantization's boundaries, mmproj, split models whole and in order, a
 * shard missing or listed twice, UD- told apart, the choices listed).
 * The network and the cache are t_pull.sh's.
 */
#include "hfpull.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SHA_A  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define COMMIT "0123456789abcdef0123456789abcdef01234567"

/* Parse NAME: 0 with "REPO|QUANT" in OUT, or -1 with the message. */
static int name(const char *arg, char *out, size_t n)
{
	char *repo, *quant, err[400];

	if (hfpull_parse_name(arg, &repo, &quant, err, sizeof(err))) {
		snprintf(out, n, "%s", err);
		return -1;
	}
	snprintf(out, n, "%s|%s", repo, quant ? quant : "");
	free(repo);
	free(quant);
	return 0;
}

static void names(void)
{
	static const char *const good[][2] = {
	    {"unsloth/Qwen3-8B-GGUF", "unsloth/Qwen3-8B-GGUF|"},
	    {"unsloth/Qwen3-8B-GGUF:UD-Q4_K_XL",
	     "unsloth/Qwen3-8B-GGUF|UD-Q4_K_XL"},
	    {"hf.co/a/b:q8_0", "a/b|q8_0"},
	    {"https://huggingface.co/a.b/c_d", "a.b/c_d|"},
	};
	static const char *const bad[] = {
	    "a/b/c",  "/b",     "a/",      "a/.b",  "a/b:", "a/b:Q4 K",
	    "a--x/b", "a/b..c", "a/b:x/y", "a/b c", "-a/b", "a/b:Q4:K",
	};
	char out[400];

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		tap_ok(name(good[i][0], out, sizeof(out)) == 0 &&
		           strcmp(out, good[i][1]) == 0,
		       "name %s: %s", good[i][0], out);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		tap_ok(name(bad[i], out, sizeof(out)) == -1, "name %s: %s",
		       bad[i], out);
	tap_ok(name("qwen3:8b", out, sizeof(out)) == -1 &&
	           strstr(out, "ollama pull qwen3:8b") != NULL,
	       "an ollama name points at ollama");
	tap_ok(name("llama3", out, sizeof(out)) == -1 &&
	           strstr(out, "ollama") != NULL,
	       "so does one without a tag");
}

/* A listing of the files FILES ("path size" per line, NULL-ended). */
static char *listing(const char *const *files)
{
	static char buf[16384];
	size_t o = (size_t)snprintf(buf, sizeof(buf),
	                            "{\"sha\": \"%s\", \"siblings\": ["
	                            "{\"rfilename\": \"README.md\"}",
	                            COMMIT);

	for (size_t i = 0; files[i]; i++)
		o += (size_t)snprintf(buf + o, sizeof(buf) - o,
		                      ", {\"rfilename\": \"%s\", \"lfs\": "
		                      "{\"sha256\": \"" SHA_A "\", \"size\": "
		                      "%zu}}",
		                      files[i], 1000 * (i + 1));
	snprintf(buf + o, sizeof(buf) - o, "]}");
	return buf;
}

/* Parse JSON as the listing of x/y: 0 or -1 (message in ERR). */
static int parse(const char *json, struct hfpull_repo *r, char *err,
                 size_t errlen)
{
	return hfpull_parse_listing(json, strlen(json), "x/y", r, err, errlen);
}

static void listings(void)
{
	static const char *const bad[] = {
	    "not json",
	    "[]",
	    "{\"siblings\": []}",
	    "{\"sha\": \"abc\", \"siblings\": []}",
	    "{\"sha\": \"" COMMIT "\"}",
	    "{\"sha\": \"" COMMIT "\", \"siblings\": {}}",
	    "{\"sha\": \"" COMMIT "\", \"siblings\": [{}]}",
	    "{\"sha\": \"" COMMIT "\", \"siblings\": [{\"rfilename\": 7}]}",
	};
	static const char *const paths[] = {
	    "../x.gguf",
	    "a/../../x.gguf",
	    "/etc/x.gguf",
	    "a//x.gguf",
	    "a/./x.gguf",
	    "a\\\\x.gguf",
	    "a/\\u0001.gguf",
	    "a/",
	    "",
	    "a/..",
	    "a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/x.gguf"};
	static const char *const lfs[] = {
	    "{\"sha256\": \"abc\", \"size\": 1}",
	    "{\"sha256\": \"" SHA_A "\", \"size\": -1}",
	    "{\"sha256\": \"" SHA_A "\", \"size\": 1.5}",
	    "{\"sha256\": \"" SHA_A "\"}",
	    "{\"sha256\": \"" SHA_A "0\", \"size\": 1}",
	    "{\"sha256\": \"g" SHA_A "\", \"size\": 1}",
	};
	struct hfpull_repo r;
	char err[400], json[1200];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		tap_ok(parse(bad[i], &r, err, sizeof(err)) == -1 && r.v == NULL,
		       "listing %s: %s", bad[i], err);
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		snprintf(json, sizeof(json),
		         "{\"sha\": \"" COMMIT
		         "\", \"siblings\": [{\"rfilename\""
		         ": \"%s\", \"lfs\": {\"sha256\": \"" SHA_A "\", "
		         "\"size\": 1}}]}",
		         paths[i]);
		tap_ok(parse(json, &r, err, sizeof(err)) == -1,
		       "a path out of the repository or odd: '%s'", paths[i]);
	}
	for (size_t i = 0; i < sizeof(lfs) / sizeof(lfs[0]); i++) {
		snprintf(json, sizeof(json),
		         "{\"sha\": \"" COMMIT
		         "\", \"siblings\": [{\"rfilename\""
		         ": \"a.gguf\", \"lfs\": %s}]}",
		         lfs[i]);
		tap_ok(parse(json, &r, err, sizeof(err)) == -1,
		       "a bad LFS entry: %s", lfs[i]);
	}
	snprintf(json, sizeof(json),
	         "{\"sha\": \"" COMMIT "\", \"siblings\": [{\"rfilename\": "
	         "\"README.md\"}, {\"rfilename\": \"sub/A.gguf\", \"lfs\": "
	         "{\"sha256\": \"%s\", \"size\": 123456789012}}]}",
	         "ABCDEFABCDEFABCDEFABCDEFABCDEFABCDEFABCDEFABCDEFABCDEFABCDEF"
	         "ABCD");
	tap_ok(parse(json, &r, err, sizeof(err)) == 0 && r.n == 1 &&
	           strcmp(r.v[0].path, "sub/A.gguf") == 0 &&
	           r.v[0].size == 123456789012ull &&
	           strncmp(r.v[0].sha256, "abcdef", 6) == 0 &&
	           strcmp(r.commit, COMMIT) == 0,
	       "a good listing: the LFS file kept (hash case folded), the "
	       "git file skipped");
	hfpull_repo_free(&r);
}

/* Choose QUANT among FILES: the picked paths joined by ' ', or the
   message, into OUT. 0 or -1. */
static int choose(const char *const *files, const char *quant, char *out,
                  size_t n)
{
	struct hfpull_repo r;
	struct hfpull_pick p;
	char err[1500];
	size_t o = 0;
	int rc;

	if (parse(listing(files), &r, err, sizeof(err))) {
		snprintf(out, n, "listing: %s", err);
		return -2;
	}
	rc = hfpull_choose(&r, quant, &p, err, sizeof(err));
	out[0] = '\0';
	if (rc == 0) {
		for (size_t i = 0; i < p.n; i++)
			o += (size_t)snprintf(out + o, n - o, "%s%s",
			                      i ? " " : "", r.v[p.idx[i]].path);
		hfpull_pick_free(&p);
	} else
		snprintf(out, n, "%s", err);
	hfpull_repo_free(&r);
	return rc;
}

static void choices(void)
{
	static const char *const repo[] = {"M-Q4_K_M.gguf",
	                                   "M-Q4_K.gguf",
	                                   "M-Q8_0.gguf",
	                                   "M-IQ4_XS.gguf",
	                                   "mmproj-M-F16.gguf",
	                                   "M-UD-Q4_K_XL.gguf",
	                                   "M-Q4_K_XL.gguf",
	                                   "BF16/M-BF16-00002-of-00002.gguf",
	                                   "BF16/M-BF16-00001-of-00002.gguf",
	                                   "notes.txt",
	                                   NULL};
	static const char *const cases[][2] = {
	    {NULL, "M-Q4_K_M.gguf"},
	    {"q4_k_m", "M-Q4_K_M.gguf"},
	    {"Q4_K", "M-Q4_K.gguf"},
	    {"iq4_xs", "M-IQ4_XS.gguf"},
	    {"UD-Q4_K_XL", "M-UD-Q4_K_XL.gguf"},
	    {"Q4_K_XL", "M-Q4_K_XL.gguf"},
	    {"mmproj", "mmproj-M-F16.gguf"},
	    {"bf16", "BF16/M-BF16-00001-of-00002.gguf "
	             "BF16/M-BF16-00002-of-00002.gguf"},
	};
	static const char *const split_gap[] = {
	    "S-Q8_0-00001-of-00003.gguf", "S-Q8_0-00003-of-00003.gguf", NULL};
	static const char *const split_dup[] = {
	    "S-Q8_0-00001-of-00002.gguf", "S-Q8_0-00001-of-00002.gguf",
	    "S-Q8_0-00002-of-00002.gguf", NULL};
	static const char *const one[] = {"only-F16.gguf", "x.bin", NULL};
	static const char *const none[] = {"model.safetensors", NULL};
	char out[2000];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		tap_ok(choose(repo, cases[i][0], out, sizeof(out)) == 0 &&
		           strcmp(out, cases[i][1]) == 0,
		       "choose %s: %s", cases[i][0] ? cases[i][0] : "(none)",
		       out);
	tap_ok(choose(repo, "F16", out, sizeof(out)) == -1 &&
	           strstr(out, "has no model 'F16'") && strstr(out, "IQ4_XS") &&
	           strstr(out, "UD-Q4_K_XL") &&
	           strstr(out, "BF16/M-BF16-*.gguf (0.0 MB, split)") &&
	           !strstr(out, "mmproj"),
	       "a missing quantization lists the choices, not mmproj:\n%s",
	       out);
	tap_ok(choose(repo, "M", out, sizeof(out)) == -1 &&
	           strstr(out, "models that 'M' names"),
	       "a name in every file is ambiguous");
	tap_ok(choose(split_gap, NULL, out, sizeof(out)) == -1 &&
	           strstr(out, "has 2 of its 3 shards"),
	       "a split with a shard missing: %s", out);
	tap_ok(choose(split_dup, NULL, out, sizeof(out)) == -1 &&
	           strstr(out, "listed twice"),
	       "a split with a shard listed twice: %s", out);
	tap_ok(choose(one, NULL, out, sizeof(out)) == 0 &&
	           strcmp(out, "only-F16.gguf") == 0,
	       "no quantization and one model: that model");
	tap_ok(choose(none, NULL, out, sizeof(out)) == -1 &&
	           strstr(out, "no GGUF files"),
	       "no GGUF files: %s", out);
}

int main(void)
{
	names();
	listings();
	choices();
	return tap_done();
}

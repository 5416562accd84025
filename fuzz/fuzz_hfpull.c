/*
 * fuzz_hfpull.c - libFuzzer harness for the hub's listing as `parley pull`
 * reads it (hfpull_parse_listing) and the choice of files made from it
 * (hfpull_choose).
 *
 * The input's first line is the quantization asked for (empty: none); the
 * rest is the listing's JSON. A listing that parses holds a 40-digit
 * commit and only LFS files with plain relative paths (no "..", no
 * leading '/', no backslash) and 64-digit lowercase hashes; a choice
 * names existing files, each once, every one a .gguf.
 */
#include "hfpull.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Whether the parsed file F keeps the promises of the listing. */
static int file_ok(const struct hfpull_file *f)
{
	size_t n = strlen(f->path);

	return n > 0 && f->path[0] != '/' && strstr(f->path, "//") == NULL &&
	       strchr(f->path, '\\') == NULL && strcmp(f->path, "..") &&
	       strncmp(f->path, "../", 3) && strstr(f->path, "/../") == NULL &&
	       (n < 3 || strcmp(f->path + n - 3, "/..")) &&
	       strlen(f->sha256) == 64 &&
	       strspn(f->sha256, "0123456789abcdef") == 64;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *nl = memchr(data, '\n', size);
	size_t ql = nl ? (size_t)(nl - (const char *)data) : 0;
	struct hfpull_repo r;
	struct hfpull_pick p;
	char err[2048], *quant;

	if (nl == NULL || ql > 64)
		return 0;
	quant = strndup((const char *)data, ql);
	if (quant == NULL)
		return 0;
	if (hfpull_parse_listing(nl + 1, size - ql - 1, "fuzz/repo", &r, err,
	                         sizeof(err)) != 0) {
		free(quant);
		return 0;
	}
	if (strlen(r.commit) != 40)
		abort();
	for (size_t i = 0; i < r.n; i++)
		if (!file_ok(&r.v[i]))
			abort();
	if (hfpull_choose(&r, ql ? quant : NULL, &p, err, sizeof(err)) == 0) {
		for (size_t i = 0; i < p.n; i++) {
			const char *path;

			if (p.idx[i] >= r.n)
				abort();
			path = r.v[p.idx[i]].path;
			if (strlen(path) < 5 ||
			    strcasecmp(path + strlen(path) - 5, ".gguf"))
				abort();
			for (size_t j = 0; j < i; j++)
				if (p.idx[j] == p.idx[i])
					abort();
		}
		if (p.n == 0 || p.label == NULL)
			abort();
		hfpull_pick_free(&p);
	}
	hfpull_repo_free(&r);
	free(quant);
	return 0;
}

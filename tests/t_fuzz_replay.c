/*
 * t_fuzz_replay.c - replay a harness's regression inputs in make check.
 *
 * Linked with one fuzz/fuzz_NAME.c (built as tests/t_fuzz_NAME, with
 * FUZZ_NAME defined to "NAME"), it runs every file of
 * tests/data/NAME/crashers/ through the harness's LLVMFuzzerTestOneInput,
 * after LLVMFuzzerInitialize when the harness has one, as libFuzzer
 * would. A harness aborts when its properties fail, and the sanitizer
 * builds stop at any memory error, so a passing replay means no input
 * there crashes, leaks (ASan builds) or breaks a property. The directory
 * must exist and hold at least one input: a replay of nothing proves
 * nothing. README files are documentation, not inputs.
 */
#include "tap.h"

#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

/* PATH's bytes (malloc'd, *LEN set) or NULL. */
static uint8_t *replay_read(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *b = NULL;
	long n;

	if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
	    fseek(f, 0, SEEK_SET) == 0 && (b = malloc((size_t)n + 1)) &&
	    fread(b, 1, (size_t)n, f) == (size_t)n) {
		*len = (size_t)n;
	} else {
		free(b);
		b = NULL;
	}
	if (f)
		fclose(f);
	return b;
}

int main(int argc, char **argv)
{
	const char *top = getenv("top_srcdir");
	char dir[4096], path[8192];
	DIR *d;
	struct dirent *e;
	int n = 0, bad = 0;

	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	snprintf(dir, sizeof(dir), "%s/tests/data/%s/crashers", top ? top : ".",
	         FUZZ_NAME);
	if ((d = opendir(dir)) == NULL) {
		tap_ok(0, "%s: the regression directory is missing", dir);
		return tap_done();
	}
	while ((e = readdir(d)) != NULL) {
		size_t len;
		uint8_t *b;

		if (e->d_name[0] == '.' || strcmp(e->d_name, "README") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if ((b = replay_read(path, &len)) == NULL) {
			tap_diag("cannot read %s", path);
			bad++;
			continue;
		}
		tap_diag("%s (%zu bytes)", e->d_name, len);
		LLVMFuzzerTestOneInput(b, len);
		free(b);
		n++;
	}
	closedir(d);
	tap_ok(n > 0 && bad == 0,
	       "fuzz_%s: %d regression inputs of %s replayed, %d unreadable",
	       FUZZ_NAME, n, dir, bad);
	return tap_done();
}

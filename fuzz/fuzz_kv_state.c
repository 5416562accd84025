/*
 * fuzz_kv_state.c - libFuzzer harness for the KV state loader
 * (engine_state_load, src/engine.c, and the CPU backend's kv_load).
 *
 * Every input is offered as a saved state to CPU engines on two tiny
 * models of tests/data/engine (found through $top_srcdir, default "."):
 * the contract of tests/kv_state_fuzz_check.h must hold (abort
 * otherwise). Seeds: states the engines saved at n_past 0, 1, 3 and 8
 * (fuzz/seed_kv_state.c), so that mutations get past the header.
 */
#include "kv_state_fuzz_check.h"

#include <stdint.h>

static struct kv_state_fuzz z;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *top = getenv("top_srcdir");
	char err[512];

	(void)argc;
	(void)argv;
	if (kv_state_fuzz_open(&z, top ? top : ".", err, sizeof(err))) {
		fprintf(stderr, "fuzz_kv_state: %s (set top_srcdir)\n", err);
		abort(); /* nothing to fuzz: say so loudly */
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *why = kv_state_fuzz_check(&z, data, size);

	if (why) {
		fprintf(stderr, "fuzz_kv_state: %s\n", why);
		abort();
	}
	return 0;
}

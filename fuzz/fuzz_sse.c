/*
 * fuzz_sse.c - libFuzzer harness for the server-sent events parser: the
 * events must not depend on how the stream is split (the check lives in
 * tests/sse_fuzz_check.h, shared with t_sse, which replays
 * tests/data/sse/crashers/); a failed check aborts.
 */
#include "../tests/sse_fuzz_check.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (sse_fuzz_check((const char *)data, size))
		abort();
	return 0;
}

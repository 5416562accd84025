/*
 * fuzz_json.c - libFuzzer harness for the JSON parser and serializer.
 * The checks live in tests/json_fuzz_check.h (shared with t_json, which
 * replays tests/data/json/crashers/); a failed check aborts.
 */
#include "../tests/json_fuzz_check.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (json_fuzz_check((const char *)data, size))
		abort();
	return 0;
}

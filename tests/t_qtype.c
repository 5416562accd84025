/*
 * t_qtype.c - the ggml type table against gguf-py's GGML_QUANT_SIZES.
 *
 * tests/data/quant/sizes.txt ("id name blck_size type_size", written by
 * tests/oracles/gen_quant.py from gguf-py) must agree with qtype_get() for
 * every id below QTYPE_COUNT; the ids gguf-py no longer lists are the
 * removed ones, which must have blck_size 0 and their old names.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qtype.h"
#include "tap.h"

int main(void)
{
	static const struct {
		uint32_t id;
		const char *name;
	} removed[] = {{4, "Q4_2"},        {5, "Q4_3"},
	               {31, "Q4_0_4_4"},   {32, "Q4_0_4_8"},
	               {33, "Q4_0_8_8"},   {36, "IQ4_NL_4_4"},
	               {37, "IQ4_NL_4_8"}, {38, "IQ4_NL_8_8"}};
	bool seen[QTYPE_COUNT] = {false};
	char path[4096], name[64];
	const char *srcdir =
	    getenv("top_srcdir") ? getenv("top_srcdir") : getenv("srcdir");
	unsigned id, blck, size;
	int bad = 0, lines = 0;
	FILE *f;

	snprintf(path, sizeof path, "%s/tests/data/quant/sizes.txt",
	         srcdir ? srcdir : ".");
	f = fopen(path, "r");
	if (!tap_ok(f != NULL, "open %s", path))
		return tap_done();
	while (fscanf(f, "%u %63s %u %u", &id, name, &blck, &size) == 4) {
		const struct qtype_info *qi = qtype_get(id);

		lines++;
		if (id >= QTYPE_COUNT) {
			tap_diag("gguf-py knows id %u (%s), beyond QTYPE_COUNT",
			         id, name);
			continue;
		}
		seen[id] = true;
		if (qi == NULL || strcmp(qi->name, name) != 0 ||
		    qi->blck_size != blck || qi->type_size != size ||
		    !qtype_sized(id)) {
			bad++;
			tap_diag("id %u: gguf-py %s %u %u, table %s %u %u", id,
			         name, blck, size, qi ? qi->name : "(none)",
			         qi ? qi->blck_size : 0,
			         qi ? qi->type_size : 0);
		}
	}
	fclose(f);
	tap_ok(lines >= 30 && bad == 0, "%d gguf-py types agree with the table",
	       lines);
	for (size_t i = 0; i < sizeof removed / sizeof *removed; i++) {
		const struct qtype_info *qi = qtype_get(removed[i].id);

		tap_ok(!seen[removed[i].id] && qi &&
		           strcmp(qi->name, removed[i].name) == 0 &&
		           qi->blck_size == 0 && !qtype_sized(removed[i].id),
		       "removed id %u is %s with no size", removed[i].id,
		       removed[i].name);
	}
	int named = 0;
	for (uint32_t t = 0; t < QTYPE_COUNT; t++)
		named += qtype_get(t) != NULL;
	tap_ok(named == QTYPE_COUNT, "every id below %d has a name",
	       QTYPE_COUNT);
	tap_ok(qtype_get(QTYPE_COUNT) == NULL &&
	           strcmp(qtype_name(1000), "unknown") == 0 &&
	           !qtype_sized(1000),
	       "ids beyond the table are unknown");
	tap_ok(strcmp(qtype_name(QTYPE_Q6_K), "Q6_K") == 0, "qtype_name");
	return tap_done();
}

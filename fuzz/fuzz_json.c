/*
 * fuzz_json.c - libFuzzer harness for the JSON parser and serializer.
 *
 * Parses the input; when it parses, serializes it compact, indented and
 * ASCII-only, re-parses the compact text (it must parse again and give the
 * same text) and clones the tree.
 */
#include "json.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct json_value *v, *w, *c;
	struct json_fmt compact = {-1, false, false}, ind = {2, true, true};
	char err[256], *a = NULL, *b = NULL, *d = NULL;
	size_t na, nb, nd;

	if (json_parse((const char *)data, size, &v, err, sizeof(err)))
		return 0;
	if (json_serialize(v, &compact, &a, &na, err, sizeof(err)) == 0 &&
	    json_parse(a, na, &w, err, sizeof(err)) == 0) {
		if (json_serialize(w, &compact, &b, &nb, err, sizeof(err)) == 0 &&
		    (nb != na || memcmp(a, b, na) != 0))
			abort(); /* serialize(parse(serialize(x))) changed */
		json_free(w);
	} else if (a) {
		/* NaN/Infinity cannot come from parsed JSON: must re-parse */
		abort();
	}
	json_serialize(v, &ind, &d, &nd, err, sizeof(err));
	c = json_clone(v);
	json_free(c);
	json_free(v);
	free(a);
	free(b);
	free(d);
	return 0;
}

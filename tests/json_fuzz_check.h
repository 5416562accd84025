/*
 * json_fuzz_check.h - the checks of fuzz/fuzz_json.c, shared with
 * tests/t_json.c, which replays tests/data/json/crashers/ through them.
 *
 * json_fuzz_check(data, size) parses the input; when it parses, it
 * serializes it compact, indented and ASCII-only, re-parses the compact
 * text (unless the tree holds a non-finite number: "1e999" parses to
 * infinity as in Python, which json.dumps writes as the non-JSON
 * "Infinity") and requires the same text again, and clones the tree.
 * Returns 0 when every check holds, -1 otherwise; never leaks.
 */
#ifndef PARLEY_JSON_FUZZ_CHECK_H
#define PARLEY_JSON_FUZZ_CHECK_H

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

/* Does V hold a non-finite float anywhere? */
static inline bool json_fuzz_nonfinite(const struct json_value *v, int depth)
{
	size_t i;

	if (depth > JSON_MAX_DEPTH + 1)
		return false;
	if (v->type == JSON_FLOAT)
		return !isfinite(v->u.f);
	if (v->type == JSON_ARRAY)
		for (i = 0; i < v->u.arr.n; i++)
			if (json_fuzz_nonfinite(v->u.arr.items[i], depth + 1))
				return true;
	if (v->type == JSON_OBJECT)
		for (i = 0; i < v->u.obj.n; i++)
			if (json_fuzz_nonfinite(v->u.obj.members[i].val,
			                        depth + 1))
				return true;
	return false;
}

static inline int json_fuzz_check(const char *data, size_t size)
{
	struct json_value *v, *w, *c;
	struct json_fmt compact = {-1, false, false}, ind = {2, true, true};
	char err[256], *a = NULL, *b = NULL, *d = NULL;
	size_t na, nb, nd;
	int rc = 0;

	if (json_parse(data, size, &v, err, sizeof(err)))
		return 0;
	if (json_serialize(v, &compact, &a, &na, err, sizeof(err)))
		rc = -1;
	else if (!json_fuzz_nonfinite(v, 0)) {
		if (json_parse(a, na, &w, err, sizeof(err))) {
			rc = -1; /* our own output must parse */
		} else {
			if (json_serialize(w, &compact, &b, &nb, err,
			                   sizeof(err)) ||
			    nb != na || memcmp(a, b, na) != 0)
				rc = -1; /* and give the same text */
			json_free(w);
		}
	}
	if (json_serialize(v, &ind, &d, &nd, err, sizeof(err)))
		rc = -1;
	c = json_clone(v);
	if (!c)
		rc = -1;
	json_free(c);
	json_free(v);
	free(a);
	free(b);
	free(d);
	return rc;
}

#endif /* PARLEY_JSON_FUZZ_CHECK_H */

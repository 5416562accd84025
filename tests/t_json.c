/*
 * t_json.c - JSON parser, value model and serializer tests.
 *
 * Serializer expectations are Python's json.dumps(..., ensure_ascii=False)
 * outputs (the `tojson` filter of transformers); float formatting is
 * Python's repr.  Parser errors must name line and column.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "json_fuzz_check.h"
#include "tap.h"

#include <dirent.h>

/* S with newlines and tabs shown as \n, \t (for one-line test names);
 * a static buffer, valid until the next call with the same SLOT. */
static const char *esc(const char *s, int slot)
{
	static char buf[2][300];
	size_t o = 0;

	for (; *s && o + 3 < sizeof(buf[0]); s++) {
		if (*s == '\n' || *s == '\t') {
			buf[slot][o++] = '\\';
			buf[slot][o++] = *s == '\n' ? 'n' : 't';
		} else {
			buf[slot][o++] = *s;
		}
	}
	buf[slot][o] = '\0';
	return buf[slot];
}

/* Parse IN, serialize with FMT (NULL: compact), compare with WANT. */
static void roundtrip(const char *in, const struct json_fmt *fmt,
                      const char *want)
{
	struct json_value *v;
	char err[256], *out;
	size_t n;

	if (json_parse(in, strlen(in), &v, err, sizeof(err))) {
		tap_ok(0, "parse %s: %s", in, err);
		return;
	}
	if (json_serialize(v, fmt, &out, &n, err, sizeof(err))) {
		tap_ok(0, "serialize %s: %s", in, err);
		json_free(v);
		return;
	}
	if (!tap_ok(n == strlen(want) && memcmp(out, want, n) == 0, "%s -> %s",
	            esc(in, 0), esc(want, 1)))
		tap_diag("got %s", out);
	free(out);
	json_free(v);
}

/* IN must fail to parse with an error containing WANT. */
static void bad(const char *in, size_t len, const char *want)
{
	struct json_value *v;
	char err[256];
	int rc = json_parse(in, len, &v, err, sizeof(err));

	if (!tap_ok(rc == -1 && v == NULL && strstr(err, want) != NULL,
	            "rejects %.*s: %s", (int)(len > 30 ? 30 : len), esc(in, 0),
	            want))
		tap_diag("got rc %d '%s'", rc, rc ? err : "");
}

static void fmt_double(double f, const char *want)
{
	char buf[48];

	json_fmt_double(f, false, buf, sizeof(buf));
	if (!tap_ok(strcmp(buf, want) == 0, "repr(%.17g) = %s", f, want))
		tap_diag("got %s", buf);
}

int main(void)
{
	struct json_fmt ind2 = {2, false, false}, asc = {-1, true, false};
	struct json_fmt sorted = {-1, false, true};

	/* values and compact output (json.dumps defaults) */
	roundtrip("null", NULL, "null");
	roundtrip(" true ", NULL, "true");
	roundtrip("[1,-2,3.5,1e3,0,-0.0]", NULL,
	          "[1, -2, 3.5, 1000.0, 0, -0.0]");
	roundtrip("{\"a\":1,\"b\":[true,false,null],\"c\":{}}", NULL,
	          "{\"a\": 1, \"b\": [true, false, null], \"c\": {}}");
	roundtrip("\"\\u00e9\\ud83c\\udf89\\n\\t\\\"\\\\\\/\\u0001\"", NULL,
	          "\"é🎉\\n\\t\\\"\\\\/\\u0001\"");
	roundtrip("\"é🎉\"", &asc, "\"\\u00e9\\ud83c\\udf89\"");
	roundtrip("{\"b\":1,\"a\":2,\"b\":3}", NULL, "{\"b\": 3, \"a\": 2}");
	roundtrip("{\"b\":1,\"a\":{\"d\":1,\"c\":2}}", &sorted,
	          "{\"a\": {\"c\": 2, \"d\": 1}, \"b\": 1}");
	roundtrip("{\"a\":[1,{\"b\":[]}],\"c\":\"x\"}", &ind2,
	          "{\n  \"a\": [\n    1,\n    {\n      \"b\": []\n    }\n  ],\n"
	          "  \"c\": \"x\"\n}");
	roundtrip("[]", &ind2, "[]");
	roundtrip("99999999999999999999", NULL, "1e+20");
	roundtrip("-9223372036854775808", NULL, "-9223372036854775808");
	roundtrip("\"\\u0000x\"", NULL, "\"\\u0000x\"");

	/* Python float repr */
	fmt_double(0.1, "0.1");
	fmt_double(1.0, "1.0");
	fmt_double(1e16, "1e+16");
	fmt_double(123456789012345.6, "123456789012345.6");
	fmt_double(1e-4, "0.0001");
	fmt_double(1e-5, "1e-05");
	fmt_double(0.30000000000000004, "0.30000000000000004");
	fmt_double(-2.5e-7, "-2.5e-07");
	fmt_double(1.7976931348623157e308, "1.7976931348623157e+308");
	fmt_double(INFINITY, "inf");
	fmt_double(NAN, "nan");

	/* errors with line and column */
	bad("", 0, "line 1, column 1: value expected");
	bad("[1,\n 2,\n x]", 12, "line 3, column 2: unexpected character 'x'");
	bad("{\"a\" 1}", 7, "line 1, column 6: ':' expected");
	bad("[1 2]", 5, "line 1, column 4: ',' or ']' expected");
	bad("\"abc", 4, "unterminated string");
	bad("\"a\nb\"", 5, "control character");
	bad("\"\\q\"", 4, "invalid escape");
	bad("\"\\ud800\"", 8, "lone surrogate");
	bad("\"\xff\"", 3, "invalid UTF-8");
	bad("\"\xc0\xaf\"", 4, "invalid UTF-8");
	bad("01", 2, "extra data");
	bad("1.", 2, "digit expected");
	bad("[1] x", 5, "line 1, column 5: extra data");
	bad("{\"a\":1,}", 8, "string key expected");
	{
		/* nesting limit, not a stack overflow */
		size_t n = 100000, i;
		char *deep = malloc(n);

		for (i = 0; i < n; i++)
			deep[i] = '[';
		bad(deep, n, "nesting deeper than");
		free(deep);
	}

	/* building trees by hand */
	{
		struct json_value *o = json_new_object(), *a = json_new_array();
		struct json_value *c;
		char *out, err[64];
		size_t n;

		json_array_push(a, json_new_string("x\0y", 3));
		json_array_push(a, json_new_int(7));
		json_object_set(o, "role", 4, json_new_string("user", 4));
		json_object_set(o, "list", 4, a);
		json_object_set(o, "role", 4, json_new_string("assistant", 9));
		c = json_clone(o);
		json_serialize(c, NULL, &out, &n, err, sizeof(err));
		tap_ok(strcmp(out, "{\"role\": \"assistant\", \"list\": "
		                   "[\"x\\u0000y\", 7]}") == 0,
		       "constructors, replace in place, clone: %s", out);
		tap_ok(json_object_get(o, "list") == a &&
		           json_object_get(o, "nope") == NULL &&
		           json_object_get(a, "x") == NULL,
		       "json_object_get");
		tap_ok(json_array_push(o, json_new_null()) == -1,
		       "push onto a non-array fails (and frees the value)");
		free(out);
		json_free(o);
		json_free(c);
	}
	/* fuzz findings replayed through the harness's checks */
	{
		const char *top = getenv("top_srcdir");
		char path[4096];
		DIR *d;
		struct dirent *e;
		int n = 0, bad = 0;

		snprintf(path, sizeof(path), "%s/tests/data/json/crashers",
		         top ? top : ".");
		d = opendir(path);
		while (d && (e = readdir(d))) {
			char file[8192];
			FILE *f;
			char *buf;
			long len;

			if (e->d_name[0] == '.')
				continue;
			snprintf(file, sizeof(file), "%s/%s", path, e->d_name);
			f = fopen(file, "rb");
			if (!f)
				continue;
			fseek(f, 0, SEEK_END);
			len = ftell(f);
			fseek(f, 0, SEEK_SET);
			buf = malloc(len > 0 ? (size_t)len : 1);
			if (buf && len >= 0 &&
			    fread(buf, 1, (size_t)len, f) == (size_t)len) {
				n++;
				if (json_fuzz_check(buf, (size_t)len)) {
					bad++;
					tap_diag("crasher %s fails", e->d_name);
				}
			}
			free(buf);
			fclose(f);
		}
		if (d)
			closedir(d);
		tap_ok(n > 0 && bad == 0,
		       "%d fuzz crashers (%s) pass the "
		       "harness checks",
		       n, path);
	}
	return tap_done();
}

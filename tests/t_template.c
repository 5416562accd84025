/*
 * t_template.c - chat-template interpreter tests.
 *
 * 1. Oracle: every (template, message list) pair of
 *    tests/data/template/manifest.json and of llamacpp/manifest.json there
 *    (llama.cpp's models/templates) renders byte for byte as jinja2 did
 *    (tests/oracles/gen_templates.py), or fails with jinja2's error text.
 *    A case's "vars" object becomes extra variables (enable_thinking),
 *    its "tools" list the tool declarations (ctx.tools).
 *    The match table is printed as TAP diagnostics.
 * 2. Units: expressions, filters, tests, whitespace control, error
 *    positions, limits, provenance spans.
 * 3. Tables: the filter and test tables (template_lib.c) are the only
 *    lists of names: each name there compiles and answers `is filter` /
 *    `is test`, the names equal prompts/README.md's lists and are
 *    jinja2's, and any other name fails with an error naming it.
 * 4. Fuzz crashers under tests/data/template/crashers/ compile and render
 *    without crashing.
 *
 * The data directory is $(top_srcdir)/tests/data/template, found through
 * the environment variable top_srcdir (exported by make check) or ".".
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "promptdir.h"
#include "json.h"
#include "tap.h"
#include "template.h"
#include "template_int.h" /* the filter and test tables */

static char datadir[4096];

/* Read a whole file into a malloc'd buffer; NULL on error. */
static char *slurp(const char *path, size_t *len)
{
	char err[256];

	return promptdir_read_file(path, len, err, sizeof(err));
}

static struct json_value *load_json(const char *path)
{
	size_t n;
	char *s = slurp(path, &n), err[256];
	struct json_value *v = NULL;

	if (!s)
		return NULL;
	if (json_parse(s, n, &v, err, sizeof(err)))
		tap_diag("%s: %s", path, err);
	free(s);
	return v;
}

/* The fixed clock of the oracle: 2025-03-07 09:05:00 (a Friday). */
static struct tm fixed_now(void)
{
	struct tm t;

	memset(&t, 0, sizeof(t));
	t.tm_year = 2025 - 1900;
	t.tm_mon = 2;
	t.tm_mday = 7;
	t.tm_hour = 9;
	t.tm_min = 5;
	t.tm_wday = 5;
	t.tm_yday = 65;
	return t;
}

/* ------------------------------------------------------------- oracle */

#define MAX_T    128
#define MAX_C    32
#define MAX_VARS 8

/* The members of the case's "vars" object as template variables; returns
 * how many (at most MAX_VARS). */
static size_t case_vars(const struct json_value *cs, struct tmpl_var *vars)
{
	const struct json_value *o = json_object_get(cs, "vars");
	size_t i, n = 0;

	if (!o || o->type != JSON_OBJECT)
		return 0;
	for (i = 0; i < o->u.obj.n && n < MAX_VARS; i++, n++) {
		vars[n].name = o->u.obj.members[i].key;
		vars[n].value = o->u.obj.members[i].val;
		vars[n].untrusted = false;
	}
	return n;
}

/* Render every (template, case) pair of DIR/manifest.json. */
static void oracle(const char *dir)
{
	char path[8192];
	struct json_value *man;
	const char *tnames[MAX_T], *cnames[MAX_C];
	static char cell[MAX_T][MAX_C];
	size_t nt = 0, nc = 0, i, j, pass = 0, total = 0;
	struct tm now = fixed_now();

	snprintf(path, sizeof(path), "%s/manifest.json", dir);
	man = load_json(path);
	if (!tap_ok(man && man->type == JSON_ARRAY, "manifest %s loads", path))
		return;
	memset(cell, 0, sizeof(cell));
	for (i = 0; i < man->u.arr.n; i++) {
		const struct json_value *e = man->u.arr.items[i];
		const char *tn = json_object_get(e, "template")->u.str.ptr;
		const char *cn = json_object_get(e, "case")->u.str.ptr;
		const char *gn = json_object_get(e, "golden")->u.str.ptr;
		bool is_err = json_object_get(e, "error")->u.b;
		size_t ti, ci, srclen, glen, outlen;
		char *src, *gold, *out = NULL, err[1024];
		struct json_value *cs;
		struct tmpl *t = NULL;
		struct tmpl_ctx ctx;
		struct tmpl_var vars[MAX_VARS];
		int rc;
		bool ok;

		for (ti = 0; ti < nt && strcmp(tnames[ti], tn); ti++)
			;
		if (ti == nt && nt < MAX_T)
			tnames[nt++] = tn;
		for (ci = 0; ci < nc && strcmp(cnames[ci], cn); ci++)
			;
		if (ci == nc && nc < MAX_C)
			cnames[nc++] = cn;
		snprintf(path, sizeof(path), "%s/templates/%s", dir, tn);
		src = slurp(path, &srclen);
		snprintf(path, sizeof(path), "%s/cases/%s", dir, cn);
		cs = load_json(path);
		snprintf(path, sizeof(path), "%s/golden/%s", dir, gn);
		gold = slurp(path, &glen);
		if (!src || !cs || !gold) {
			tap_ok(0, "%s x %s: data files present", tn, cn);
			goto next;
		}
		rc = tmpl_compile(src, srclen, &t, err, sizeof(err));
		if (rc) {
			tap_ok(0, "%s compiles: %s", tn, err);
			goto next;
		}
		memset(&ctx, 0, sizeof(ctx));
		ctx.messages = json_object_get(cs, "messages");
		ctx.add_generation_prompt =
		    json_object_get(cs, "add_generation_prompt")->u.b;
		ctx.bos_token = json_object_get(e, "bos")->u.str.ptr;
		ctx.eos_token = json_object_get(e, "eos")->u.str.ptr;
		ctx.tools = json_object_get(cs, "tools");
		ctx.now = &now;
		ctx.vars = vars;
		ctx.nvars = case_vars(cs, vars);
		rc = tmpl_render(t, &ctx, &out, &outlen, NULL, NULL, err,
		                 sizeof(err));
		if (is_err) {
			/* jinja2's message is the core of ours: ours may add
			 * "line L, column C: " in front */
			ok = rc != TMPL_OK && strstr(err, gold) != NULL;
			if (!ok)
				tap_diag(
				    "%s x %s: expected error '%s', got rc %d "
				    "'%s'",
				    tn, cn, gold, rc, rc ? err : "(rendered)");
		} else {
			ok = rc == TMPL_OK && outlen == glen &&
			     memcmp(out, gold, glen) == 0;
			if (!ok && rc == TMPL_OK) {
				size_t k = 0;

				while (k < outlen && k < glen &&
				       out[k] == gold[k])
					k++;
				tap_diag(
				    "%s x %s: first difference at byte %zu "
				    "(got %zu bytes, want %zu)",
				    tn, cn, k, outlen, glen);
				tap_diag("  got:  '%.60s'",
				         out + (k > 20 ? k - 20 : 0));
				tap_diag("  want: '%.60s'",
				         gold + (k > 20 ? k - 20 : 0));
			} else if (!ok) {
				tap_diag("%s x %s: error %s", tn, cn, err);
			}
		}
		tap_ok(ok, "%s x %s %s", tn, cn,
		       is_err ? "(error as jinja2)" : "(bytes as jinja2)");
		/* the table shows the first MAX_T x MAX_C pairs */
		if (ti < MAX_T && ci < MAX_C)
			cell[ti][ci] = ok ? (is_err ? 'E' : 'o') : 'X';
		total++;
		pass += ok;
	next:
		free(out);
		tmpl_free(t);
		json_free(cs);
		free(src);
		free(gold);
	}
	tap_diag("match table (o = same bytes, E = same error, X = FAIL):");
	{
		char line[512];
		int o =
		    snprintf(line, sizeof(line), "%-44s", "template \\ case");

		for (j = 0; j < nc; j++)
			o += snprintf(line + o, sizeof(line) - (size_t)o,
			              " %.2s", cnames[j]);
		tap_diag("%s", line);
	}
	for (i = 0; i < nt; i++) {
		char line[512];
		int o = snprintf(line, sizeof(line), "%-44s", tnames[i]);

		for (j = 0; j < nc; j++)
			o += snprintf(line + o, sizeof(line) - (size_t)o,
			              "  %c", cell[i][j] ? cell[i][j] : '-');
		tap_diag("%s", line);
	}
	tap_diag("oracle %s: %zu of %zu (template, case) pairs match jinja2",
	         dir, pass, total);
	json_free(man);
}

/* -------------------------------------------------------------- units */

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

/* Render SRC with MESSAGES (JSON text, may be NULL); result in OUT/ERR. */
static int render(const char *src, const char *messages, char **out, char *err,
                  size_t errlen)
{
	struct tmpl *t;
	struct json_value *msgs = NULL;
	struct tmpl_ctx ctx;
	struct tm now = fixed_now();
	size_t n;
	int rc;

	*out = NULL;
	rc = tmpl_compile(src, strlen(src), &t, err, errlen);
	if (rc)
		return rc;
	if (messages &&
	    json_parse(messages, strlen(messages), &msgs, err, errlen)) {
		tmpl_free(t);
		return -100;
	}
	memset(&ctx, 0, sizeof(ctx));
	ctx.messages = msgs;
	ctx.add_generation_prompt = true;
	ctx.bos_token = "<s>";
	ctx.eos_token = "</s>";
	ctx.now = &now;
	rc = tmpl_render(t, &ctx, out, &n, NULL, NULL, err, errlen);
	json_free(msgs);
	tmpl_free(t);
	return rc;
}

/* Check that SRC renders to WANT. */
static void expect(const char *src, const char *want)
{
	char *out, err[512];
	int rc = render(src, "[{\"role\":\"user\",\"content\":\"Hi there\"}]",
	                &out, err, sizeof(err));

	if (rc) {
		tap_ok(0, "render %s: error %s", esc(src, 0), err);
		return;
	}
	if (!tap_ok(strcmp(out, want) == 0, "%s -> %s", esc(src, 0),
	            esc(want, 1)))
		tap_diag("got '%s'", out);
	free(out);
}

/* Check that SRC fails with code RC and an error containing WANT. */
static void expect_err(const char *src, int want_rc, const char *want)
{
	char *out, err[512];
	int rc = render(src, "[{\"role\":\"user\",\"content\":\"Hi\"}]", &out,
	                err, sizeof(err));

	if (!tap_ok(rc == want_rc && strstr(err, want) != NULL,
	            "error for %s: %s", esc(src, 0), want))
		tap_diag("got rc %d '%s' (out '%s')", rc, err, out ? out : "");
	free(out);
}

/* dictsort, sort and str.format (outputs and messages of jinja2 3.1.6) */
static void sorting(void)
{
	expect("{{ {'b': 1, 'A': 2, 'a': 0, 'C': 3} | dictsort }}",
	       "[('A', 2), ('a', 0), ('b', 1), ('C', 3)]");
	expect("{{ {'b': 1, 'A': 2, 'a': 0, 'C': 3} | dictsort(true) }}",
	       "[('A', 2), ('C', 3), ('a', 0), ('b', 1)]");
	expect("{{ {'b': 1, 'A': 2, 'a': 0} | dictsort(false, 'value', true) "
	       "}}",
	       "[('A', 2), ('b', 1), ('a', 0)]");
	expect("{% for k, v in {'z': 1, 'y': 2} | dictsort %}{{ k }}{{ v }}"
	       "{% endfor %}",
	       "y2z1");
	expect_err("{{ {'x': 1} | dictsort(by='nope') }}", TMPL_ERUNTIME,
	           "You can only sort by either \"key\" or \"value\"");
	expect_err("{{ [1, 2] | dictsort }}", TMPL_ERUNTIME,
	           "'list' object has no attribute 'items'");
	expect("{{ ['b', 'A', 'a', 'C'] | sort }} {{ ['b', 'A', 'a', 'C'] | "
	       "sort(case_sensitive=true) }} {{ [3, 1.5, 2, true] | "
	       "sort(true) }}",
	       "['A', 'a', 'b', 'C'] ['A', 'C', 'a', 'b'] [3, 2, 1.5, True]");
	/* stable, also reversed */
	expect("{{ [{'n': 'x', 'a': 2}, {'n': 'y', 'a': 1}, {'n': 'z', 'a': "
	       "2}] | sort(attribute='a') | map(attribute='n') | list }}",
	       "['y', 'x', 'z']");
	expect("{{ [{'n': 'x', 'a': 2}, {'n': 'y', 'a': 1}, {'n': 'z', 'a': "
	       "2}] | sort(attribute='a', reverse=true) | map(attribute='n') "
	       "| list }}",
	       "['x', 'z', 'y']");
	expect("{{ [{'n': 'b', 'a': 2}, {'n': 'a', 'a': 1}, {'n': 'a', 'a': "
	       "0}] | sort(attribute='n,a') | map(attribute='a') | list }}",
	       "[0, 1, 2]");
	expect("{{ [[2, 'b'], [1, 'c'], [2, 'a']] | sort(attribute='0') }}",
	       "[[1, 'c'], [2, 'b'], [2, 'a']]");
	expect("{{ 'cba' | sort }} {{ {'b': 1, 'a': 2} | sort }}",
	       "['a', 'b', 'c'] ['a', 'b']");
	expect_err("{{ [1, 'a'] | sort }}", TMPL_ERUNTIME,
	           "'<' not supported between instances of 'str' and 'int'");
	/* str.format: fields by position and keyword, with str() */
	expect("{{ '{}-{}'.format(1, 'x') }} {{ '{1}{0}{1}'.format('a', 'b') "
	       "}} {{ '{n}!'.format(n=none) }} {{ '{{x}}'.format() }}",
	       "1-x bab None! {x}");
	expect_err("{{ '{}'.format() }}", TMPL_ERUNTIME,
	           "tuple index out of range");
	expect_err("{{ '{0}{}'.format(1, 2) }}", TMPL_ERUNTIME,
	           "cannot switch from manual field specification to "
	           "automatic field numbering");
	expect_err("{{ 'a}b'.format() }}", TMPL_ERUNTIME,
	           "Single '}' encountered in format string");
	expect_err("{{ '{x}'.format(y=1) }}", TMPL_ERUNTIME, "'x'");
	expect_err("{{ '{:>3}'.format(1) }}", TMPL_ERUNTIME,
	           "format: field '{:>3}' is not supported");
}

/* jinja2 compiles an unknown filter or test inside an if statement or a
 * conditional expression and fails only when it runs; elsewhere (a loop
 * body opens a new frame) the template does not compile. */
static void deferred_names(void)
{
	expect("{% if false %}{{ x | nope }}{% endif %}|{{ 1 if true else x | "
	       "nope }}|{{ (x | nope) if false else 2 }}|{% if false %}{{ 1 is "
	       "nope }}{% endif %}",
	       "|1|2|");
	expect_err("{% if true %}{{ 1 | nope(2) }}{% endif %}", TMPL_ERUNTIME,
	           "No filter named 'nope' found.");
	expect_err("{% if messages is nope %}{% endif %}", TMPL_ERUNTIME,
	           "No test named 'nope' found.");
	expect_err("{% if true %}{% for x in [1] %}{{ x | nope }}{% endfor %}"
	           "{% endif %}",
	           TMPL_ESYNTAX, "line 1, column 37: No filter named 'nope'.");
	expect_err("{% if true %}{% macro m() %}{{ 1 is nope }}{% endmacro %}"
	           "{% endif %}",
	           TMPL_ESYNTAX, "No test named 'nope'.");
	expect_err("{{ x | nope }}{{ 1 if true }}", TMPL_ESYNTAX,
	           "line 1, column 6: No filter named 'nope'.");
}

static void units(void)
{
	/* expressions and operators */
	expect("{{ 1 + 2 * 3 }}", "7");
	expect("{{ (1 + 2) * 3 }}", "9");
	expect("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }}",
	       "3 -4 2 3.5");
	expect("{{ 2 ** 3 ** 2 }}", "64");
	expect("{{ 'a' ~ 1 ~ none }}", "a1None");
	expect("{{ 1 if false }}|{{ 'x' if true else 'y' }}", "|x");
	expect("{{ not 1 == 2 and 3 in [1, 3] }}", "True");
	expect(
	    "{{ 'ell' in 'hello' }} {{ 'k' in {'k': 1} }} {{ 2 not in [1] }}",
	    "True True True");
	expect("{{ [1, 2, 3][1:] }} {{ [1, 2, 3][-1] }} {{ 'héllo'[1:3] }}",
	       "[2, 3] 3 él");
	expect("{{ 'abc'[::-1] }} {{ [1,2,3,4][::2] }} {{ [1,2,3,4][::-2] }} "
	       "{{ [1,2,3,4][-10:10:-1] }} {{ [1,2,3,4][3:0:-1] }}",
	       "cba [1, 3] [4, 2] [] [4, 3, 2]");
	expect("{{ messages[0].content }} {{ messages[0]['role'] }}",
	       "Hi there user");
	expect("{{ messages[5] }}|{{ messages[0].nope }}|", "||");
	expect("{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }}", "True False");
	expect("{{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1.0 }} {{ 1e-5 }}",
	       "0.30000000000000004 1e+20 1.0 1e-05");
	/* whitespace control, trim_blocks, lstrip_blocks */
	expect("a\n  {% if true %}\n  b\n  {% endif %}\nc", "a\n  b\nc");
	expect("a  {%- if true -%}  b  {%- endif %}", "ab");
	expect("  {%+ if true %}x{% endif %}", "  x");
	expect("{{ 'x' }}\n", "x");
	expect("{# comment #}\nx {#- c -#} y", "xy");
	expect("{% raw %}{{ x }}{% endraw %}", "{{ x }}");
	/* filters */
	expect("{{ '  a b  ' | trim }}|{{ 'xxaxx' | trim('x') }}", "a b|a");
	expect("{{ [1, 2] | length }} {{ 'héé' | length }} {{ {'a': 1} | "
	       "length }}",
	       "2 3 1");
	expect("{{ [3, 4] | first }} {{ [3, 4] | last }} {{ 'abc' | last }}",
	       "3 4 c");
	expect("{{ ['a', 'b'] | join(', ') }} {{ [1, 2] | join }}", "a, b 12");
	expect("{{ {'é': [1, 'ü', none, true, 2.5]} | tojson }}",
	       "{\"é\": [1, \"ü\", null, true, 2.5]}");
	expect("{{ {'a': [1]} | tojson(indent=2) }}",
	       "{\n  \"a\": [\n    1\n  ]\n}");
	expect("{{ 'é' | tojson(ensure_ascii=true) }}", "\"\\u00e9\"");
	expect("{{ messages | selectattr('role', 'equalto', 'user') | list | "
	       "length }}",
	       "1");
	expect("{{ messages | rejectattr('role', 'equalto', 'user') | list }}",
	       "[]");
	expect("{{ messages | map(attribute='role') | list }}", "['user']");
	expect("{{ 42 | string }} {{ 'AbC' | lower }} {{ 'straße' | upper }}",
	       "42 abc STRASSE");
	expect("{{ x | default('d') }} {{ '' | default('e', true) }}", "d e");
	expect("{{ 'a-b-c' | replace('-', '+') }} {{ 'aaa' | replace('a', 'b', "
	       "2) }}",
	       "a+b+c bba");
	expect("{{ {'b': 1, 'a': 2} | items | list }}", "[('b', 1), ('a', 2)]");
	sorting();
	deferred_names();
	/* tests */
	expect("{{ x is defined }} {{ x is undefined }} {{ none is none }}",
	       "False True True");
	expect("{{ 'a' is string }} {{ 1 is number }} {{ {} is mapping }}",
	       "True True True");
	expect("{{ [] is iterable }} {{ 'a' is sequence }} {{ 1 is iterable }}",
	       "True True False");
	expect(
	    "{{ 1 is equalto 1 }} {{ 2 is equalto(3) }} {{ x is not defined }}",
	    "True False True");
	/* methods */
	expect("{{ ' a '.strip() }}|{{ ' a '.lstrip() }}|{{ ' a '.rstrip() }}",
	       "a|a | a");
	expect("{{ 'a b  c'.split() }} {{ 'a,b'.split(',') }}",
	       "['a', 'b', 'c'] ['a', 'b']");
	expect("{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }}",
	       "True True");
	expect(
	    "{{ 'ab'.upper() }} {{ 'AB'.lower() }} {{ 'hello world'.title() }}",
	    "AB ab Hello World");
	expect("{{ {'a': 1}.items() | list }} {{ {'a': 1}.get('a') }} "
	       "{{ {'a': 1}.get('b', 0) }}",
	       "[('a', 1)] 1 0");
	expect("{{ 'aXb'.replace('X', '-') }}", "a-b");
	/* statements */
	expect("{% for x in [1, 2, 3] %}{{ loop.index }}{{ loop.index0 }}"
	       "{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
	       "10TrueFalse3;21FalseFalse3;32FalseTrue3;");
	expect("{% for x in [] %}a{% else %}empty{% endfor %}", "empty");
	expect("{% for x in [1,2,3,4] if x is even %}{{ x }}{% endfor %}",
	       "24");
	expect("{% for k, v in {'a': 1}.items() %}{{ k }}={{ v }}{% endfor %}",
	       "a=1");
	expect("{% for x in range(9) %}{% if x == 1 %}{% continue %}{% endif %}"
	       "{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}",
	       "023");
	expect("{% if false %}a{% elif true %}b{% else %}c{% endif %}", "b");
	expect("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ "
	       "x }}",
	       "1");
	expect(
	    "{% set ns = namespace(x=1) %}{% for i in [1] %}{% set ns.x = 2 %}"
	    "{% endfor %}{{ ns.x }}",
	    "2");
	expect("{% set b %}in{{ 1 }}{% endset %}[{{ b }}]", "[in1]");
	expect("{% macro m(a, b='d') %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }}"
	       "{{ m(1, b=2) }}",
	       "1d12");
	expect("{% macro w() %}({{ caller() }}){% endmacro %}{% call w() %}x"
	       "{% endcall %}",
	       "(x)");
	expect("{{ strftime_now('%Y-%m-%d') }}", "2025-03-07");
	expect("{{ bos_token }}{{ eos_token }}{{ add_generation_prompt }}",
	       "<s></s>True");
	expect("{{ '\\n\\t\\u00e9\\x41' }}", "\n\té"
	                                     "A");
	/* errors: syntax with line and column */
	expect_err("a\n{{ 1 + }}", TMPL_ESYNTAX, "line 2, column 8");
	expect_err("{% if x %}", TMPL_ESYNTAX, "Unexpected end of template");
	expect_err("{% for %}", TMPL_ESYNTAX, "line 1, column 8");
	expect_err("{% bogus %}", TMPL_ESYNTAX, "unknown tag 'bogus'");
	expect_err("{{ x | nofilter }}", TMPL_ESYNTAX,
	           "No filter named 'nofilter'");
	expect_err("{{ 'abc }}", TMPL_ESYNTAX, "line 1, column 4");
	expect_err("{# open", TMPL_ESYNTAX, "missing end of comment");
	expect_err("{% break %}", TMPL_ESYNTAX, "outside of a loop");
	expect_err("{{ (1 }}", TMPL_ESYNTAX, "unexpected");
	/* errors at run time */
	expect_err("{{ raise_exception('Roles must alternate') }}", TMPL_ERAISE,
	           "Roles must alternate");
	expect_err("x\n  {{ messages[0].nope + 'a' }}", TMPL_ERUNTIME,
	           "line 2, column 23: 'dict object' has no attribute 'nope'");
	expect_err("{{ y + 1 }}", TMPL_ERUNTIME, "'y' is undefined");
	expect_err("{{ 'a' + 1 }}", TMPL_ERUNTIME,
	           "can only concatenate str (not \"int\") to str");
	expect_err("{{ 1 / 0 }}", TMPL_ERUNTIME, "division by zero");
	expect_err("{% for x in none %}{% endfor %}", TMPL_ERUNTIME,
	           "'NoneType' object is not iterable");
	expect_err("{{ [].append(1) }}", TMPL_ERUNTIME, "unsafe");
	/* limits */
	expect_err("{% for i in range(100000) %}{% for j in range(100000) %}"
	           "{% endfor %}{% endfor %}",
	           TMPL_ELIMIT, "loop iterations");
	expect_err("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}",
	           TMPL_ELIMIT, "nested deeper");
	expect_err("{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}"
	           "{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}"
	           "{% endfor %}",
	           TMPL_ELIMIT, "");
	expect_err("{{ range(1000000) }}", TMPL_ERUNTIME, "Range too big");
	{
		/* deep nesting is a syntax error, not a stack overflow */
		char *src = malloc(20000);
		size_t k;

		for (k = 0; k < 5000; k++)
			src[k] = '(';
		memcpy(src + 5000, "1", 2);
		{
			char *full = malloc(20000);

			snprintf(full, 20000, "{{ %s }}", src);
			expect_err(full, TMPL_ESYNTAX, "nested");
			free(full);
		}
		free(src);
	}
}

/* ------------------------------------------------------------- spans */

static void spans(void)
{
	const char *src = "{% for m in messages %}<|im_start|>{{ m.role }}\n"
	                  "{{ m.content | trim }}<|im_end|>\n{% endfor %}"
	                  "{{ '<|im_start|>assistant\\n' }}";
	const char *msgs = "[{\"role\":\"user\",\"content\":"
	                   "\"  hi <|im_end|> there  \"}]";
	struct tmpl *t;
	struct json_value *mv;
	struct tmpl_ctx ctx;
	struct tmpl_span *sp;
	size_t nsp, n, i, pos = 0;
	char *out, err[256];
	int rc;

	rc = tmpl_compile(src, strlen(src), &t, err, sizeof(err));
	tap_ok(rc == 0, "span template compiles");
	json_parse(msgs, strlen(msgs), &mv, err, sizeof(err));
	memset(&ctx, 0, sizeof(ctx));
	ctx.messages = mv;
	rc = tmpl_render(t, &ctx, &out, &n, &sp, &nsp, err, sizeof(err));
	tap_ok(rc == 0 &&
	           strcmp(out, "<|im_start|>user\nhi <|im_end|> there"
	                       "<|im_end|>\n<|im_start|>assistant\n") == 0,
	       "span template renders");
	for (i = 0; i < nsp; i++) {
		char piece[128];

		snprintf(piece, sizeof(piece), "%.*s", (int)sp[i].len,
		         out + sp[i].off);
		tap_diag("span %zu: off %zu len %zu %s '%s'", i, sp[i].off,
		         sp[i].len, sp[i].is_content ? "content" : "template",
		         esc(piece, 0));
		if (sp[i].off != pos)
			break;
		pos += sp[i].len;
	}
	tap_ok(pos == n, "spans cover the output in order");
	/* expected: template "<|im_start|>", content "user", template "\n",
	 * content "hi <|im_end|> there", template "<|im_end|>\n<|im_start|>
	 * assistant\n" */
	tap_ok(nsp == 5 && !sp[0].is_content && sp[1].is_content &&
	           sp[1].len == 4 && !sp[2].is_content && sp[3].is_content &&
	           sp[3].len == strlen("hi <|im_end|> there") &&
	           memcmp(out + sp[3].off, "hi <|im_end|> there", sp[3].len) ==
	               0 &&
	           !sp[4].is_content,
	       "a control token typed by the user stays inside a content span");
	free(out);
	free(sp);
	json_free(mv);
	tmpl_free(t);

	/* trusted extra variables and derived strings */
	{
		const char *s2 = "{{ (messages[0].content ~ '|' ~ x) | upper }}"
		                 "{{ y }}";
		struct json_value *xv = json_new_string("ab", 2);
		struct json_value *yv = json_new_string("<y>", 3);
		struct tmpl_var vars[2] = {{"x", xv, false}, {"y", yv, true}};

		rc = tmpl_compile(s2, strlen(s2), &t, err, sizeof(err));
		json_parse(msgs, strlen(msgs), &mv, err, sizeof(err));
		memset(&ctx, 0, sizeof(ctx));
		ctx.messages = mv;
		ctx.vars = vars;
		ctx.nvars = 2;
		rc =
		    tmpl_render(t, &ctx, &out, &n, &sp, &nsp, err, sizeof(err));
		tap_ok(rc == 0 && nsp == 1 && sp[0].is_content &&
		           sp[0].len == n,
		       "upper() of content is content as a whole; untrusted "
		       "variables are content");
		free(out);
		free(sp);
		json_free(mv);
		json_free(xv);
		json_free(yv);
		tmpl_free(t);
	}
}

/* ------------------------------------------------- filter and test tables */

/* jinja2 3.1's names: sorted(env.filters), sorted(env.tests) of the
 * ImmutableSandboxedEnvironment the oracle uses.  Ours must be subsets:
 * a name jinja2 lacks would render where transformers fails. */
static const char *const jinja_filters[] = {
    "abs",      "attr",       "batch",       "capitalize",
    "center",   "count",      "d",           "default",
    "dictsort", "e",          "escape",      "filesizeformat",
    "first",    "float",      "forceescape", "format",
    "groupby",  "indent",     "int",         "items",
    "join",     "last",       "length",      "list",
    "lower",    "map",        "max",         "min",
    "pprint",   "random",     "reject",      "rejectattr",
    "replace",  "reverse",    "round",       "safe",
    "select",   "selectattr", "slice",       "sort",
    "string",   "striptags",  "sum",         "title",
    "tojson",   "trim",       "truncate",    "unique",
    "upper",    "urlencode",  "urlize",      "wordcount",
    "wordwrap", "xmlattr",    NULL};
static const char *const jinja_tests[] = {
    "!=",          "<",         "<=",      "==",          ">",        ">=",
    "boolean",     "callable",  "defined", "divisibleby", "eq",       "equalto",
    "escaped",     "even",      "false",   "filter",      "float",    "ge",
    "greaterthan", "gt",        "in",      "integer",     "iterable", "le",
    "lessthan",    "lower",     "lt",      "mapping",     "ne",       "none",
    "number",      "odd",       "sameas",  "sequence",    "string",   "test",
    "true",        "undefined", "upper",   NULL};

static bool in_list(const char *const *list, const char *name)
{
	for (; *list; list++)
		if (strcmp(*list, name) == 0)
			return true;
	return false;
}

#define MAX_DOC_NAMES 64

/* The backquoted words of the bullet "- KEY: ..." of prompts/README.md
 * (up to the next bullet or blank line) into NAMES; returns the count. */
static size_t doc_names(const char *doc, const char *key, char names[][32],
                        size_t max)
{
	const char *p = strstr(doc, key), *end;
	bool quoted = false;
	size_t n = 0;

	if (!p)
		return 0;
	end = p + strlen(key);
	while (*end && strncmp(end, "\n- ", 3) && strncmp(end, "\n\n", 2))
		end++;
	for (p += strlen(key); p < end; p++) {
		size_t k = 0;

		if (*p == '`') {
			quoted = !quoted;
			continue;
		}
		if (!quoted || *p == ' ' || *p == '\n')
			continue;
		while (p + k < end && p[k] != ' ' && p[k] != '\n' &&
		       p[k] != '`' && k < 31)
			k++;
		if (n < max) {
			memcpy(names[n], p, k);
			names[n++][k] = '\0';
		}
		p += k - 1;
	}
	return n;
}

/* One table (filters or tests) against the README's list and jinja2's. */
static void table_vs_doc(const char *what, const char *(*name_at)(size_t),
                         bool (*has)(const char *), const char *doc,
                         const char *key, const char *const *jinja)
{
	char names[MAX_DOC_NAMES][32];
	size_t nd = doc_names(doc, key, names, MAX_DOC_NAMES), nt, i, j;
	size_t missing = 0, extra = 0, foreign = 0, dup = 0;

	for (nt = 0; name_at(nt); nt++) {
		bool listed = false;

		for (j = 0; j < nd && !listed; j++)
			listed = strcmp(names[j], name_at(nt)) == 0;
		if (!listed) {
			tap_diag("%s '%s' is in the table, not in README", what,
			         name_at(nt));
			extra++;
		}
		if (!in_list(jinja, name_at(nt))) {
			tap_diag("%s '%s' is not one of jinja2's", what,
			         name_at(nt));
			foreign++;
		}
		for (j = 0; j < nt; j++)
			dup += strcmp(name_at(j), name_at(nt)) == 0;
	}
	for (i = 0; i < nd; i++) {
		if (!has(names[i])) {
			tap_diag("%s '%s' is in README, not in the table", what,
			         names[i]);
			missing++;
		}
	}
	tap_ok(nd > 10 && nt == nd && !missing && !extra && !dup,
	       "the %s table and prompts/README.md list the same %zu names",
	       what, nt);
	tap_ok(!foreign, "every %s of the table is one of jinja2's", what);
}

/* Every name of the filter table compiles as `| NAME` and is `is filter`;
 * every name of the test table compiles after `is` and is `is test`. */
static void table_names_work(void)
{
	size_t i, bad = 0;
	char src[160], *out, err[512];
	int rc;

	for (i = 0; tmpl_lib_filter_name(i); i++) {
		const char *f = tmpl_lib_filter_name(i);

		snprintf(src, sizeof(src),
		         "{{ '%s' is filter }}{{ '%s' is test }}", f, f);
		rc = render(src, NULL, &out, err, sizeof(err));
		if (rc || strcmp(out, tmpl_lib_has_test(f) ? "TrueTrue"
		                                           : "TrueFalse")) {
			tap_diag("'%s' is filter: rc %d '%s'", f, rc,
			         rc ? err : out);
			bad++;
		}
		free(out);
		/* may fail on the value's type, never on the name */
		snprintf(src, sizeof(src), "{{ [1, 2] | %s }}", f);
		rc = render(src, NULL, &out, err, sizeof(err));
		if (rc == TMPL_ESYNTAX || (rc && strstr(err, "No filter"))) {
			tap_diag("| %s: rc %d '%s'", f, rc, err);
			bad++;
		}
		free(out);
	}
	tap_ok(i > 0 && !bad,
	       "all %zu filters of the table compile, run and are `is "
	       "filter`",
	       i);
	bad = 0;
	for (i = 0; tmpl_lib_test_name(i); i++) {
		const char *t = tmpl_lib_test_name(i);
		bool word = t[0] >= 'a' && t[0] <= 'z';

		/* `is` takes a name; the operator names (==, <, ...) only
		 * reach a test through select/reject, as in jinja2 */
		snprintf(src, sizeof(src),
		         "{{ '%s' is test }}{{ [] | select('%s') | list }}"
		         "{{ 2 is %s(2) if false }}",
		         t, t, word ? t : "eq");
		rc = render(src, NULL, &out, err, sizeof(err));
		if (rc || strcmp(out, "True[]")) {
			tap_diag("'%s' is test: rc %d '%s'", t, rc,
			         rc ? err : out);
			bad++;
		}
		free(out);
	}
	tap_ok(i > 0 && !bad,
	       "all %zu tests of the table compile and are `is test`", i);
}

static void tables(const char *topdir)
{
	char path[4200], *doc;
	size_t n;

	snprintf(path, sizeof(path), "%s/prompts/README.md", topdir);
	doc = slurp(path, &n);
	if (!tap_ok(doc != NULL, "%s loads", path))
		return;
	table_vs_doc("filter", tmpl_lib_filter_name, tmpl_lib_has_filter, doc,
	             "\n- filters:", jinja_filters);
	table_vs_doc("test", tmpl_lib_test_name, tmpl_lib_has_test, doc,
	             "\n- tests:", jinja_tests);
	free(doc);
	table_names_work();

	/* a name not in the table: the same clear error everywhere */
	expect_err("{{ x | bogus }}", TMPL_ESYNTAX,
	           "line 1, column 6: No filter named 'bogus'.");
	expect_err("{% filter bogus %}x{% endfilter %}", TMPL_ESYNTAX,
	           "No filter named 'bogus'.");
	expect_err("{% set a | bogus %}x{% endset %}", TMPL_ESYNTAX,
	           "No filter named 'bogus'.");
	expect_err("{{ [1] | map('bogus') | list }}", TMPL_ERUNTIME,
	           "No filter named 'bogus'.");
	/* jinja2 looks at nothing of a false value, the name included */
	expect("{{ [] | map('bogus') | list }} {{ none | reject('bogus') | "
	       "list }} {{ none | selectattr('a') | list }}",
	       "[] [] []");
	expect_err("{{ x is bogus }}", TMPL_ESYNTAX, "No test named 'bogus'.");
	expect_err("{{ [1] | select('bogus') | list }}", TMPL_ERUNTIME,
	           "No test named 'bogus'.");
	expect_err("{{ [1] | rejectattr('a', 'bogus') | list }}", TMPL_ERUNTIME,
	           "No test named 'bogus'.");
	/* README's "not supported" filters fail the same way */
	expect_err("{{ x | format }}", TMPL_ESYNTAX,
	           "No filter named 'format'");
	expect_err("{{ x | groupby('a') }}", TMPL_ESYNTAX,
	           "No filter named 'groupby'");
	expect_err("{{ x | batch(2) }}", TMPL_ESYNTAX,
	           "No filter named 'batch'");
	/* jinja2's test_filter/test_test ask about the value (checked with
	 * jinja2 3.1.6) */
	expect("{{ 'upper' is filter }} {{ 'bogus' is filter }} {{ 'defined' "
	       "is test }} {{ 'bogus' is test }} {{ 1 is filter }} {{ "
	       "'upper' is test }}",
	       "True False True False False True");
	expect("{{ ['a', 'trim', 'e', 'eq'] | select('filter') | list }}",
	       "['trim', 'e']");
	/* the table's argument counts, as jinja2's Python signatures */
	expect_err("{{ 1 is number 2 }}", TMPL_ERUNTIME,
	           "test 'number' takes no argument");
	expect_err("{{ 4 is divisibleby(2, 3) }}", TMPL_ERUNTIME,
	           "test 'divisibleby' takes one argument");
	expect_err("{{ 4 is sameas }}", TMPL_ERUNTIME,
	           "test 'sameas' needs an argument");
	expect_err("{{ [1, 2] | select('odd', 1) | list }}", TMPL_ERUNTIME,
	           "test 'odd' takes no argument");
	expect("{{ [1, 2, 3, 4] | select('divisibleby', 2) | list }} {{ 3 is "
	       "odd }} {{ 3 is not even }}",
	       "[2, 4] True True");
}

/* ----------------------------------------------------------- crashers */

static void crashers(void)
{
	char path[8192];
	DIR *d;
	struct dirent *e;
	int n = 0, bad = 0;

	snprintf(path, sizeof(path), "%s/crashers", datadir);
	d = opendir(path);
	if (!d) {
		tap_ok(0, "%s: the regression directory is missing", path);
		return;
	}
	while ((e = readdir(d))) {
		size_t len, outlen;
		char *src, *out = NULL, err[256];
		struct tmpl *t;
		struct tmpl_ctx ctx;
		struct json_value *msgs;
		const char *mj = "[{\"role\":\"system\",\"content\":\"s\"},"
		                 "{\"role\":\"user\",\"content\":\"u\"}]";
		struct tmpl_limits lim = {1 << 20, 64 << 20, 32, 100000};

		if (e->d_name[0] == '.' || strcmp(e->d_name, "README") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/crashers/%s", datadir,
		         e->d_name);
		src = slurp(path, &len);
		if (!src) {
			tap_diag("cannot read %s", path);
			bad++;
			continue;
		}
		json_parse(mj, strlen(mj), &msgs, err, sizeof(err));
		if (tmpl_compile(src, len, &t, err, sizeof(err)) == 0) {
			memset(&ctx, 0, sizeof(ctx));
			ctx.messages = msgs;
			ctx.limits = &lim;
			tmpl_render(t, &ctx, &out, &outlen, NULL, NULL, err,
			            sizeof(err));
			free(out);
			tmpl_free(t);
		}
		json_free(msgs);
		free(src);
		n++;
	}
	closedir(d);
	/* a replay of nothing proves nothing: the directory holds inputs */
	tap_ok(n > 0 && bad == 0,
	       "%d hostile inputs (crashers/) replayed without a crash, %d "
	       "unreadable",
	       n, bad);
}

int main(void)
{
	const char *src = getenv("top_srcdir");

	snprintf(datadir, sizeof(datadir), "%s/tests/data/template",
	         src ? src : ".");
	oracle(datadir);
	{
		char lc[4200];

		snprintf(lc, sizeof(lc), "%s/llamacpp", datadir);
		oracle(lc);
	}
	units();
	spans();
	tables(src ? src : ".");
	crashers();
	return tap_done();
}

/*
 * template_lib.c - filters, tests, methods of str/dict/loop, and globals
 * (range, namespace, dict, raise_exception, strftime_now) of the Jinja
 * subset, with the behaviour of jinja2 3.1 and Python 3 str methods.
 *
 * Provenance rule (see template.h, note 4): filters that cut or join
 * strings keep exact content ranges (trim, join, first/last of a string,
 * string); filters that rewrite text (upper, lower, replace, title,
 * tojson) mark the whole result as content when any input had content.
 */
#include "template_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>

#include "template_case.h"
#include "utf8.h"

/* ------------------------------------------------------------- unicode */

uint32_t tmpl_lib_u8dec(const char *p, size_t n, size_t *len)
{
	size_t k = utf8_valid_len(p, n);

	*len = k ? k : 1;
	return k ? utf8_decode(p, k) : UINT32_MAX;
}

/* Python's str.isspace() (and re's \s on str patterns). */
bool tmpl_lib_isspace(uint32_t cp)
{
	return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) ||
	       cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
	       (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
	       cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

/* Python's str.isprintable() for one non-ASCII code point. */
bool tmpl_lib_isprint(uint32_t cp)
{
	utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);

	return !(c == UTF8PROC_CATEGORY_CC || c == UTF8PROC_CATEGORY_CF ||
	         c == UTF8PROC_CATEGORY_CS || c == UTF8PROC_CATEGORY_CO ||
	         c == UTF8PROC_CATEGORY_CN || c == UTF8PROC_CATEGORY_ZL ||
	         c == UTF8PROC_CATEGORY_ZP || c == UTF8PROC_CATEGORY_ZS);
}

static bool is_cased(uint32_t cp)
{
	utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);

	return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL ||
	       c == UTF8PROC_CATEGORY_LT;
}

/* --------------------------------------------------------------- helpers */

enum {
	TF_RANGE = 1,
	TF_NAMESPACE,
	TF_DICT,
	TF_RAISE,
	TF_STRFTIME,
	TF_CYCLE,
	TF_STRIP,
	TF_LSTRIP,
	TF_RSTRIP,
	TF_SPLIT,
	TF_STARTSWITH,
	TF_ENDSWITH,
	TF_UPPER,
	TF_LOWER,
	TF_TITLE,
	TF_CAPITALIZE,
	TF_REPLACE,
	TF_JOIN,
	TF_FIND,
	TF_COUNT,
	TF_FORMAT,
	TF_ITEMS,
	TF_KEYS,
	TF_VALUES,
	TF_GET
};

static struct tval mkfunc(struct trender *r, int id, const char *name,
                          const struct tval *self)
{
	struct tval v = {.k = V_FUNC};

	v.u.fn = tmpl_arena_alloc(&r->arena, sizeof(*v.u.fn));
	v.u.fn->id = id;
	v.u.fn->name = name;
	if (self) {
		v.u.fn->self = tmpl_arena_alloc(&r->arena, sizeof(struct tval));
		*v.u.fn->self = *self;
	}
	return v;
}

/* Argument POS or keyword NAME; false when absent. */
static bool arg(struct tval *args, size_t nargs, const char **kn,
                struct tval *kv, size_t nk, size_t pos, const char *name,
                struct tval *out)
{
	size_t i;

	for (i = 0; name && i < nk; i++) {
		if (strcmp(kn[i], name) == 0) {
			*out = kv[i];
			return true;
		}
	}
	if (pos < nargs) {
		*out = args[pos];
		return true;
	}
	return false;
}

/* One call of a filter or a test: the value left of `|` or `is` and the
 * call's arguments (tests get positional ones only). */
struct fcall {
	struct trender *r; /* the render (arena, limits, errors) */
	struct tval v;     /* the value filtered or tested */
	struct tval *args; /* nargs positional arguments */
	size_t nargs;
	const char **kn; /* nk keyword names */
	struct tval *kv; /* nk keyword values */
	size_t nk;
};

/* Argument POS or keyword NAME of call C; false when absent. */
static bool farg(const struct fcall *c, size_t pos, const char *name,
                 struct tval *out)
{
	return arg(c->args, c->nargs, c->kn, c->kv, c->nk, pos, name, out);
}

/* A NUL-terminated arena copy of S, or NULL when S holds a NUL byte (no
 * filter or test has one in its name). */
static const char *name_of(struct trender *r, const struct tstr *s)
{
	char *z;

	if (s->n && memchr(s->p, 0, s->n))
		return NULL;
	z = tmpl_arena_alloc(&r->arena, s->n + 1);
	if (s->n)
		memcpy(z, s->p, s->n);
	return z;
}

/* A string argument or fail. */
static struct tstr *want_str(struct trender *r, struct tval v, const char *what)
{
	if (v.k == V_UNDEF)
		tmpl_run_undef_fail(r, v);
	if (v.k != V_STR)
		tmpl_run_fail(r, TMPL_ERUNTIME, "%s must be str, not %s", what,
		              tmpl_run_type_name(v));
	return v.u.s;
}

static struct tstr *cstr(struct trender *r, const char *s)
{
	return tmpl_run_str_new(r, s, strlen(s), false);
}

/* Is CP one of the code points of CHARS (NULL: whitespace)? */
static bool strip_member(const struct tstr *chars, uint32_t cp)
{
	size_t j = 0, k;

	if (!chars)
		return tmpl_lib_isspace(cp);
	while (j < chars->n) {
		if (tmpl_lib_u8dec(chars->p + j, chars->n - j, &k) == cp)
			return true;
		j += k;
	}
	return false;
}

/* Python's str.strip family: WHICH 1 left, 2 right, 3 both; CHARS NULL
 * means whitespace. */
static struct tstr *do_strip(struct trender *r, const struct tstr *s,
                             const struct tstr *chars, int which)
{
	size_t a = 0, b = s->n, k;

	if (which & 1) {
		while (a < b) {
			uint32_t cp = tmpl_lib_u8dec(s->p + a, b - a, &k);

			if (cp == UINT32_MAX || !strip_member(chars, cp))
				break;
			a += k;
		}
	}
	if (which & 2) {
		while (b > a) {
			size_t st = b - 1;
			uint32_t cp;

			while (st > a &&
			       ((unsigned char)s->p[st] & 0xc0) == 0x80 &&
			       b - st < 4)
				st--;
			cp = tmpl_lib_u8dec(s->p + st, b - st, &k);
			if (cp == UINT32_MAX || st + k != b) {
				st = b - 1;
				cp = UINT32_MAX;
			}
			if (cp == UINT32_MAX || !strip_member(chars, cp))
				break;
			b = st;
		}
	}
	return tmpl_run_str_sub(r, s, a, b - a);
}

/* Case mapping: MODE 'u' upper, 'l' lower, 't' Python title, 'c'
 * capitalize, 'j' jinja's title filter. */
static struct tstr *do_case(struct trender *r, const struct tstr *s, int mode)
{
	char *d;
	size_t i = 0, o = 0, k;
	bool prev_cased = false, word_start = true, first = true;

	if (s->n > (SIZE_MAX - 16) / 4)
		tmpl_run_fail(r, TMPL_ELIMIT, "string too long");
	d = tmpl_arena_alloc(&r->arena, s->n * 4 + 16);
	while (i < s->n) {
		uint32_t cp = tmpl_lib_u8dec(s->p + i, s->n - i, &k);
		const struct tcase *sc = NULL;
		int32_t m;

		if (cp == UINT32_MAX) {
			d[o++] = s->p[i];
			i += k;
			continue;
		}
		if (cp >= 0xdf) {
			size_t lo = 0, hi = sizeof(tcase_special) /
			                    sizeof(*tcase_special);

			while (lo < hi) {
				size_t mid = (lo + hi) / 2;

				if (tcase_special[mid].cp < cp)
					lo = mid + 1;
				else
					hi = mid;
			}
			if (lo < sizeof(tcase_special) /
			             sizeof(*tcase_special) &&
			    tcase_special[lo].cp == cp)
				sc = &tcase_special[lo];
		}
		if (sc) {
			const char *rep;
			bool up = mode == 'u' || (mode == 't' && !prev_cased) ||
			          (mode == 'c' && first) ||
			          (mode == 'j' && word_start);

			rep = !up                            ? sc->lower
			      : (mode == 't' || mode == 'c') ? sc->title
			                                     : sc->upper;
			memcpy(d + o, rep, strlen(rep));
			o += strlen(rep);
			prev_cased = is_cased(cp);
			word_start = false;
			first = false;
			i += k;
			continue;
		}
		switch (mode) {
		case 'u':
			m = utf8proc_toupper((int32_t)cp);
			break;
		case 'l':
			m = utf8proc_tolower((int32_t)cp);
			if (cp == 0x3a3 && prev_cased) {
				/* Final_Sigma: no cased letter follows */
				size_t k2;
				bool next_cased =
				    i + k < s->n &&
				    is_cased(tmpl_lib_u8dec(s->p + i + k,
				                            s->n - i - k, &k2));

				if (!next_cased)
					m = 0x3c2;
			}
			prev_cased = is_cased(cp);
			break;
		case 't':
			m = prev_cased ? utf8proc_tolower((int32_t)cp)
			               : utf8proc_totitle((int32_t)cp);
			prev_cased = is_cased(cp);
			break;
		case 'c':
			m = first ? utf8proc_totitle((int32_t)cp)
			          : utf8proc_tolower((int32_t)cp);
			break;
		default: /* 'j' */
			if (cp == '-' || cp == '(' || cp == '{' || cp == '[' ||
			    cp == '<' || tmpl_lib_isspace(cp)) {
				m = (int32_t)cp;
				word_start = true;
			} else {
				m = word_start ? utf8proc_toupper((int32_t)cp)
				               : utf8proc_tolower((int32_t)cp);
				word_start = false;
			}
			break;
		}
		first = false;
		o += utf8_put((uint32_t)m, d + o);
		i += k;
	}
	return tmpl_run_str_derived(r, d, o, s->nsp != 0);
}

/* Python str.replace(old, new, count). */
static struct tstr *do_replace(struct trender *r, const struct tstr *s,
                               const struct tstr *old, const struct tstr *new_,
                               int64_t count)
{
	struct tstr *res = tmpl_run_str_new(r, "", 0, false);
	size_t i = 0, last = 0, k;
	bool content = s->nsp || old->nsp || new_->nsp;

	if (old->n == 0) {
		/* insert NEW before every code point and at the end */
		while (count != 0) {
			res = tmpl_run_str_cat(r, res, new_);
			count--;
			if (i >= s->n)
				break;
			tmpl_lib_u8dec(s->p + i, s->n - i, &k);
			res = tmpl_run_str_cat(r, res,
			                       tmpl_run_str_sub(r, s, i, k));
			i += k;
			tmpl_run_step(r);
		}
		res = tmpl_run_str_cat(r, res,
		                       tmpl_run_str_sub(r, s, i, s->n - i));
	} else {
		while (count != 0 && i + old->n <= s->n) {
			if (memcmp(s->p + i, old->p, old->n) == 0) {
				res = tmpl_run_str_cat(
				    r, res,
				    tmpl_run_str_sub(r, s, last, i - last));
				res = tmpl_run_str_cat(r, res, new_);
				i += old->n;
				last = i;
				count--;
				tmpl_run_step(r);
			} else {
				i++;
			}
		}
		res = tmpl_run_str_cat(
		    r, res, tmpl_run_str_sub(r, s, last, s->n - last));
	}
	return tmpl_run_str_derived(r, res->p, res->n, content);
}

/* Python str.split(sep, maxsplit) (SEP NULL: whitespace runs). */
static struct tval do_split(struct trender *r, const struct tstr *s,
                            const struct tstr *sep, int64_t maxsplit)
{
	struct tval parts[1];
	struct tlist *l = tmpl_run_list_new(r, 0);
	size_t cap = 0, i = 0, k;

	(void)parts;
#define PUSH(str)                                                              \
	do {                                                                   \
		if (l->n == cap) {                                             \
			size_t nc_ = cap ? cap * 2 : 8;                        \
			struct tval *nv_ =                                     \
			    tmpl_arena_alloc(&r->arena, nc_ * sizeof(*nv_));   \
			if (l->n)                                              \
				memcpy(nv_, l->v, l->n * sizeof(*nv_));        \
			l->v = nv_;                                            \
			cap = nc_;                                             \
		}                                                              \
		l->v[l->n++] = tv_str(str);                                    \
		tmpl_run_step(r);                                              \
	} while (0)
	if (!sep) {
		while (i < s->n) {
			size_t st;

			while (i < s->n && tmpl_lib_isspace(tmpl_lib_u8dec(
			                       s->p + i, s->n - i, &k)))
				i += k;
			if (i >= s->n)
				break;
			if (maxsplit == 0) {
				size_t e = s->n;

				while (e > i) {
					size_t b = e - 1;

					while (b > i &&
					       ((unsigned char)s->p[b] &
					        0xc0) == 0x80)
						b--;
					if (!tmpl_lib_isspace(tmpl_lib_u8dec(
					        s->p + b, e - b, &k)))
						break;
					e = b;
				}
				PUSH(tmpl_run_str_sub(r, s, i, e - i));
				break;
			}
			st = i;
			while (i < s->n && !tmpl_lib_isspace(tmpl_lib_u8dec(
			                       s->p + i, s->n - i, &k)))
				i += k;
			PUSH(tmpl_run_str_sub(r, s, st, i - st));
			if (maxsplit > 0)
				maxsplit--;
		}
	} else {
		size_t last = 0;

		if (sep->n == 0)
			tmpl_run_fail(r, TMPL_ERUNTIME, "empty separator");
		while (maxsplit != 0 && i + sep->n <= s->n) {
			if (memcmp(s->p + i, sep->p, sep->n) == 0) {
				PUSH(tmpl_run_str_sub(r, s, last, i - last));
				i += sep->n;
				last = i;
				if (maxsplit > 0)
					maxsplit--;
			} else {
				i++;
			}
		}
		PUSH(tmpl_run_str_sub(r, s, last, s->n - last));
	}
#undef PUSH
	return tv_list(l);
}

/* ------------------------------------------------------------- tojson */

struct jopts {
	int indent;        /* < 0: none */
	bool ensure_ascii; /* escape non-ASCII */
	bool sort_keys;    /* sort members */
};

/* An arena buffer for tojson output (nothing to free on errors). */
struct abuf {
	char *p;
	size_t n, cap;
};

static void tj_add(struct trender *r, struct abuf *b, const char *s, size_t n)
{
	if (n > r->lim.max_output || b->n > r->lim.max_output - n)
		tmpl_run_fail(r, TMPL_ELIMIT,
		              "tojson output longer than %zu bytes",
		              r->lim.max_output);
	if (b->n + n > b->cap) {
		size_t ncap = b->cap ? b->cap * 2 : 64;
		char *np;

		while (ncap < b->n + n)
			ncap *= 2;
		np = tmpl_arena_alloc(&r->arena, ncap);
		if (b->n)
			memcpy(np, b->p, b->n);
		b->p = np;
		b->cap = ncap;
	}
	if (n)
		memcpy(b->p + b->n, s, n);
	b->n += n;
}

/* A JSON string literal of S appended to B. */
static void tj_string(struct trender *r, struct abuf *b, const struct tstr *s,
                      bool ensure_ascii)
{
	struct json_buf tmp = {0};

	tmp.max = r->lim.max_output;
	if (json_write_string(&tmp, s->p, s->n, ensure_ascii)) {
		free(tmp.ptr);
		tmpl_run_fail(r, TMPL_ELIMIT, "tojson output too long");
	}
	tj_add(r, b, tmp.ptr, tmp.len);
	free(tmp.ptr);
}

static void tj_nl(struct trender *r, struct abuf *b, const struct jopts *o,
                  int level)
{
	long i;

	if (o->indent < 0)
		return;
	tj_add(r, b, "\n", 1);
	for (i = 0; i < (long)o->indent * level; i++)
		tj_add(r, b, " ", 1);
}

/* JSON key text of a dict key (json.dumps converts scalars). */
static struct tstr *tj_key(struct trender *r, struct tval k)
{
	char num[48];

	switch (k.k) {
	case V_STR:
		return k.u.s;
	case V_INT:
		snprintf(num, sizeof(num), "%lld", (long long)k.u.i);
		break;
	case V_FLOAT:
		json_fmt_double(k.u.f, true, num, sizeof(num));
		break;
	case V_BOOL:
		snprintf(num, sizeof(num), "%s", k.u.b ? "true" : "false");
		break;
	case V_NONE:
		snprintf(num, sizeof(num), "null");
		break;
	default:
		tmpl_run_fail(r, TMPL_ERUNTIME,
		              "keys must be str, int, float, bool or "
		              "None, not %s",
		              tmpl_run_type_name(k));
	}
	{
		size_t n = strlen(num);
		char *d = tmpl_arena_alloc(&r->arena, n + 1);

		memcpy(d, num, n);
		return tmpl_run_str_new(r, d, n, false);
	}
}

static void tj_write(struct trender *r, struct abuf *b, struct tval v,
                     const struct jopts *o, int level)
{
	char num[48];
	size_t i, n;
	const char *sep = o->indent < 0 ? ", " : ",";

	if (level > 256)
		tmpl_run_fail(r, TMPL_ELIMIT,
		              "value nested too deeply for tojson");
	switch (v.k) {
	case V_NONE:
		tj_add(r, b, "null", 4);
		return;
	case V_BOOL:
		tj_add(r, b, v.u.b ? "true" : "false", v.u.b ? 4 : 5);
		return;
	case V_INT:
		n = (size_t)snprintf(num, sizeof(num), "%lld",
		                     (long long)v.u.i);
		tj_add(r, b, num, n);
		return;
	case V_FLOAT:
		n = json_fmt_double(v.u.f, true, num, sizeof(num));
		tj_add(r, b, num, n);
		return;
	case V_STR:
		tj_string(r, b, v.u.s, o->ensure_ascii);
		return;
	case V_LIST:
		if (!v.u.l->n) {
			tj_add(r, b, "[]", 2);
			return;
		}
		tj_add(r, b, "[", 1);
		for (i = 0; i < v.u.l->n; i++) {
			if (i)
				tj_add(r, b, sep, strlen(sep));
			tj_nl(r, b, o, level + 1);
			tj_write(r, b, v.u.l->v[i], o, level + 1);
		}
		tj_nl(r, b, o, level);
		tj_add(r, b, "]", 1);
		return;
	case V_DICT: {
		size_t *ord;

		if (!v.u.d->n) {
			tj_add(r, b, "{}", 2);
			return;
		}
		ord = tmpl_arena_alloc(&r->arena, v.u.d->n * sizeof(*ord));
		for (i = 0; i < v.u.d->n; i++)
			ord[i] = i;
		if (o->sort_keys) {
			/* insertion sort by key (dicts here are small) */
			for (i = 1; i < v.u.d->n; i++) {
				size_t j = i, t = ord[i];

				while (j > 0 &&
				       tmpl_run_order(r, '<', v.u.d->keys[t],
				                      v.u.d->keys[ord[j - 1]],
				                      0) < 0) {
					ord[j] = ord[j - 1];
					j--;
				}
				ord[j] = t;
			}
		}
		tj_add(r, b, "{", 1);
		for (i = 0; i < v.u.d->n; i++) {
			struct tstr *k = tj_key(r, v.u.d->keys[ord[i]]);

			if (i)
				tj_add(r, b, sep, strlen(sep));
			tj_nl(r, b, o, level + 1);
			tj_string(r, b, k, o->ensure_ascii);
			tj_add(r, b, ": ", 2);
			tj_write(r, b, v.u.d->vals[ord[i]], o, level + 1);
		}
		tj_nl(r, b, o, level);
		tj_add(r, b, "}", 1);
		return;
	}
	default:
		tmpl_run_fail(r, TMPL_ERUNTIME,
		              "Object of type %s is not JSON "
		              "serializable",
		              tmpl_run_type_name(v));
	}
}

static struct tval do_tojson(struct trender *r, struct tval v,
                             struct tval *args, size_t nargs, const char **kn,
                             struct tval *kv, size_t nk)
{
	struct jopts o = {-1, false, false};
	struct abuf b = {0};
	struct tval a;

	if (arg(args, nargs, kn, kv, nk, 0, "ensure_ascii", &a))
		o.ensure_ascii = tmpl_run_truthy(r, a);
	if (arg(args, nargs, kn, kv, nk, 1, "indent", &a) && a.k != V_NONE) {
		if (a.k != V_INT || a.u.i < 0 || a.u.i > 64)
			tmpl_run_fail(r, TMPL_ERUNTIME,
			              "tojson: indent must be an "
			              "integer 0..64");
		o.indent = (int)a.u.i;
	}
	if (arg(args, nargs, kn, kv, nk, 3, "sort_keys", &a))
		o.sort_keys = tmpl_run_truthy(r, a);
	if (arg(args, nargs, kn, kv, nk, 2, "separators", &a) && a.k != V_NONE)
		tmpl_run_fail(r, TMPL_ERUNTIME,
		              "tojson: separators are not supported");
	tj_write(r, &b, v, &o, 0);
	return tv_str(tmpl_run_str_derived(r, b.p ? b.p : "", b.n,
	                                   tmpl_run_has_content(v, 0)));
}

/* ----------------------------------------------------- attribute paths */

/* Look up dotted ATTR ("a.b", "0") in V like jinja2's make_attrgetter. */
static struct tval attr_path(struct trender *r, struct tval v,
                             const struct tstr *attr)
{
	size_t a = 0;

	while (a <= attr->n) {
		size_t e = a;
		struct tval key;
		bool digits = true;
		int64_t idx = 0;

		while (e < attr->n && attr->p[e] != '.')
			e++;
		if (e == a)
			digits = false;
		for (size_t i = a; i < e; i++) {
			if (attr->p[i] < '0' || attr->p[i] > '9' || idx > 1e15)
				digits = false;
			else
				idx = idx * 10 + (attr->p[i] - '0');
		}
		key = digits ? tv_int(idx)
		             : tv_str(tmpl_run_str_sub(r, attr, a, e - a));
		v = tmpl_run_getitem(r, v, key);
		if (e >= attr->n)
			break;
		a = e + 1;
	}
	return v;
}

/* --------------------------------------------------------------- tests */

/*
 * Tests (`x is NAME`, select/reject) and filters (`x | NAME`, map) are
 * each one table of {name, function} below (a test row adds its argument
 * count and, for the type tests, the value kinds it accepts instead of a
 * function).  The table is the only list:
 * the parser's "No filter named" check, the `filter`/`test` tests, map,
 * select and the call itself all look names up in it, so what is
 * accepted and what runs cannot drift apart.  An alias is one more row
 * with the same function.
 */

struct filter;
static const struct filter *filter_find(const char *name);

/* The answer of a test for call C; the checks its flags ask for have
 * passed (see test_run). */
typedef bool test_fn(const struct fcall *c);

/* Flags of a test. TEST_ARG: it takes one argument ("is eq 1",
 * "is eq(1)"); without the flag it takes none.  TEST_INT: the value must
 * be an integer (or a bool). */
#define TEST_ARG 1u
#define TEST_INT 2u

/* The bit of value kind K in struct test's kinds. */
#define KIND(k) (1u << (k))

struct test {
	const char *name; /* as written after `is` */
	test_fn *fn;      /* its answer; NULL: the value's kind is in kinds */
	unsigned flags;   /* TEST_* */
	unsigned kinds;   /* KIND(V_*) bits, for a test without fn */
};

/* The first argument, or None. */
static struct tval arg0(const struct fcall *c)
{
	return c->nargs ? c->args[0] : tv_none();
}

/* The value of a TEST_INT test as an integer. */
static int64_t test_int(const struct fcall *c)
{
	return c->v.k == V_INT ? c->v.u.i : c->v.u.b;
}

/* Python's str.isupper() (UPPER) or str.islower(). */
static bool str_all_case(const struct tstr *s, bool upper)
{
	size_t i, k;
	bool any = false;

	for (i = 0; i < s->n; i += k) {
		uint32_t cp = tmpl_lib_u8dec(s->p + i, s->n - i, &k);
		utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);

		if (c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LT) {
			if (!upper)
				return false;
			any = true;
		} else if (c == UTF8PROC_CATEGORY_LL) {
			if (upper)
				return false;
			any = true;
		}
	}
	return any;
}

static bool t_true(const struct fcall *c)
{
	return c->v.k == V_BOOL && c->v.u.b;
}

static bool t_false(const struct fcall *c)
{
	return c->v.k == V_BOOL && !c->v.u.b;
}

static bool t_lower(const struct fcall *c)
{
	return c->v.k == V_STR && str_all_case(c->v.u.s, false);
}

static bool t_upper(const struct fcall *c)
{
	return c->v.k == V_STR && str_all_case(c->v.u.s, true);
}

/* jinja2's test_filter: is the value the name of a filter? */
static bool t_filter(const struct fcall *c)
{
	const char *z;

	if (c->v.k != V_STR)
		return false;
	z = name_of(c->r, c->v.u.s);
	return z && filter_find(z);
}

/* jinja2's test_test: is the value the name of a test? */
static bool t_test(const struct fcall *c)
{
	const char *z;

	if (c->v.k != V_STR)
		return false;
	z = name_of(c->r, c->v.u.s);
	return z && tmpl_lib_has_test(z);
}

static bool t_even(const struct fcall *c)
{
	return test_int(c) % 2 == 0;
}

static bool t_odd(const struct fcall *c)
{
	return test_int(c) % 2 != 0;
}

static bool t_divisibleby(const struct fcall *c)
{
	struct tval a = arg0(c);

	if (a.k != V_INT || a.u.i == 0)
		tmpl_run_fail(c->r, TMPL_ERUNTIME,
		              "divisibleby needs a non-zero integer");
	return a.u.i == -1 || test_int(c) % a.u.i == 0;
}

static bool t_eq(const struct fcall *c)
{
	return tmpl_run_equal(c->v, arg0(c), 0);
}

static bool t_ne(const struct fcall *c)
{
	return !tmpl_run_equal(c->v, arg0(c), 0);
}

static bool t_lt(const struct fcall *c)
{
	return tmpl_run_order(c->r, '<', c->v, arg0(c), 0) < 0;
}

static bool t_gt(const struct fcall *c)
{
	return tmpl_run_order(c->r, '>', c->v, arg0(c), 0) > 0;
}

static bool t_le(const struct fcall *c)
{
	return tmpl_run_order(c->r, 'l', c->v, arg0(c), 0) <= 0;
}

static bool t_ge(const struct fcall *c)
{
	return tmpl_run_order(c->r, 'g', c->v, arg0(c), 0) >= 0;
}

static bool t_in(const struct fcall *c)
{
	return tmpl_run_contains(c->r, c->v, arg0(c));
}

/* Python's `is`: identity, which for our values means the same singleton
 * or an equal immutable scalar/string; containers are never the same. */
static bool t_sameas(const struct fcall *c)
{
	struct tval v = c->v, a = arg0(c);

	if (v.k != a.k)
		return false;
	if (v.k == V_NONE || v.k == V_UNDEF)
		return true;
	if (v.k == V_BOOL)
		return v.u.b == a.u.b;
	return tmpl_run_equal(v, a, 0) && v.k != V_LIST && v.k != V_DICT;
}

/* Every test (jinja2 3.1's complete set).  The kind tests follow
 * jinja2: an Undefined is iterable (it iterates as empty), a sequence and
 * callable; nothing is `escaped` as the environment does not autoescape. */
static const struct test tests[] = {
    {"boolean", NULL, 0, KIND(V_BOOL)},
    {"callable", NULL, 0, KIND(V_FUNC) | KIND(V_MACRO) | KIND(V_UNDEF)},
    {"defined", NULL, 0, ~KIND(V_UNDEF)},
    {"divisibleby", t_divisibleby, TEST_ARG | TEST_INT, 0},
    {"eq", t_eq, TEST_ARG, 0},
    {"equalto", t_eq, TEST_ARG, 0},
    {"==", t_eq, TEST_ARG, 0},
    {"escaped", NULL, 0, 0},
    {"even", t_even, TEST_INT, 0},
    {"false", t_false, 0, 0},
    {"filter", t_filter, 0, 0},
    {"float", NULL, 0, KIND(V_FLOAT)},
    {"ge", t_ge, TEST_ARG, 0},
    {">=", t_ge, TEST_ARG, 0},
    {"gt", t_gt, TEST_ARG, 0},
    {"greaterthan", t_gt, TEST_ARG, 0},
    {">", t_gt, TEST_ARG, 0},
    {"in", t_in, TEST_ARG, 0},
    {"integer", NULL, 0, KIND(V_INT)},
    {"iterable", NULL, 0,
     KIND(V_STR) | KIND(V_LIST) | KIND(V_DICT) | KIND(V_UNDEF) | KIND(V_LOOP)},
    {"le", t_le, TEST_ARG, 0},
    {"<=", t_le, TEST_ARG, 0},
    {"lower", t_lower, 0, 0},
    {"lt", t_lt, TEST_ARG, 0},
    {"lessthan", t_lt, TEST_ARG, 0},
    {"<", t_lt, TEST_ARG, 0},
    {"mapping", NULL, 0, KIND(V_DICT)},
    {"ne", t_ne, TEST_ARG, 0},
    {"!=", t_ne, TEST_ARG, 0},
    {"none", NULL, 0, KIND(V_NONE)},
    {"number", NULL, 0, KIND(V_INT) | KIND(V_FLOAT) | KIND(V_BOOL)},
    {"odd", t_odd, TEST_INT, 0},
    {"sameas", t_sameas, TEST_ARG, 0},
    {"sequence", NULL, 0,
     KIND(V_STR) | KIND(V_LIST) | KIND(V_DICT) | KIND(V_UNDEF)},
    {"string", NULL, 0, KIND(V_STR)},
    {"test", t_test, 0, 0},
    {"true", t_true, 0, 0},
    {"undefined", NULL, 0, KIND(V_UNDEF)},
    {"upper", t_upper, 0, 0},
};

static const struct test *test_find(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(tests) / sizeof(*tests); i++)
		if (strcmp(tests[i].name, name) == 0)
			return &tests[i];
	return NULL;
}

/* Run test T on V with ARGS after the checks its flags ask for, in
 * jinja2's order: the argument count (Python's call), then the value. */
static bool test_run(struct trender *r, const struct test *t, struct tval v,
                     struct tval *args, size_t nargs)
{
	struct fcall c = {r, v, args, nargs, NULL, NULL, 0};

	if ((t->flags & TEST_ARG) && nargs != 1)
		tmpl_run_fail(r, TMPL_ERUNTIME,
		              nargs ? "test '%s' takes one argument"
		                    : "test '%s' needs an argument",
		              t->name);
	if (!(t->flags & TEST_ARG) && nargs)
		tmpl_run_fail(r, TMPL_ERUNTIME, "test '%s' takes no argument",
		              t->name);
	if ((t->flags & TEST_INT) && v.k == V_UNDEF)
		tmpl_run_undef_fail(r, v);
	if ((t->flags & TEST_INT) && v.k != V_INT && v.k != V_BOOL)
		tmpl_run_fail(r, TMPL_ERUNTIME, "test '%s' needs an integer",
		              t->name);
	return t->fn ? t->fn(&c) : (t->kinds & KIND(v.k)) != 0;
}

bool tmpl_lib_has_test(const char *name)
{
	return test_find(name) != NULL;
}

const char *tmpl_lib_test_name(size_t i)
{
	return i < sizeof(tests) / sizeof(*tests) ? tests[i].name : NULL;
}

bool tmpl_lib_test(struct trender *r, const char *name, struct tval v,
                   struct tval *args, size_t nargs)
{
	const struct test *t = test_find(name);

	if (!t)
		tmpl_run_fail(r, TMPL_ERUNTIME, "No test named '%s'.", name);
	return test_run(r, t, v, args, nargs);
}

/* ------------------------------------------------------------- filters */

/* A filter's result for call C. */
typedef struct tval filter_fn(const struct fcall *c);

struct filter {
	const char *name; /* as written after `|` */
	filter_fn *fn;    /* its result */
};

/* Length in Python terms. */
static int64_t py_len(struct trender *r, struct tval v)
{
	switch (v.k) {
	case V_UNDEF:
		return 0;
	case V_STR:
		return (int64_t)tmpl_run_u8len(v.u.s);
	case V_LIST:
		return (int64_t)v.u.l->n;
	case V_DICT:
		return (int64_t)v.u.d->n;
	case V_LOOP:
		return (int64_t)v.u.lp->items->n;
	default:
		tmpl_run_fail(r, TMPL_ERUNTIME,
		              "object of type '%s' has no len()",
		              tmpl_run_type_name(v));
	}
}

/* select/reject (KEEP: what a passing item is kept for) and their
 * ...attr forms (BY_ATTR: the first argument names an attribute). */
static struct tval do_select(const struct fcall *c, bool by_attr, bool keep)
{
	struct trender *r = c->r;
	struct tlist *in, *out;
	const struct tstr *attr = NULL;
	const struct test *test = NULL;
	size_t i, skip = 0;

	/* jinja2 looks at nothing, arguments included, of a false value */
	if (!tmpl_run_truthy(r, c->v))
		return tv_list(tmpl_run_list_new(r, 0));
	in = tmpl_run_iter(r, c->v);
	out = tmpl_run_list_new(r, in->n);
	if (by_attr) {
		if (c->nargs < 1)
			tmpl_run_fail(r, TMPL_ERUNTIME,
			              "Missing parameter for attribute "
			              "name");
		attr = want_str(r, c->args[0], "attribute");
		skip = 1;
	}
	if (c->nargs > skip) {
		struct tstr *t = want_str(r, c->args[skip], "test name");
		const char *z = name_of(r, t);

		test = z ? test_find(z) : NULL;
		if (!test)
			tmpl_run_fail(r, TMPL_ERUNTIME, "No test named '%.*s'.",
			              (int)t->n, t->p);
		skip++;
	}
	out->n = 0;
	for (i = 0; i < in->n; i++) {
		struct tval item =
		    attr ? attr_path(r, in->v[i], attr) : in->v[i];
		bool ok = test ? test_run(r, test, item, c->args + skip,
		                          c->nargs - skip)
		               : tmpl_run_truthy(r, item);

		tmpl_run_step(r);
		if (ok == keep)
			out->v[out->n++] = in->v[i];
	}
	return tv_list(out);
}

static struct tval f_select(const struct fcall *c)
{
	return do_select(c, false, true);
}

static struct tval f_reject(const struct fcall *c)
{
	return do_select(c, false, false);
}

static struct tval f_selectattr(const struct fcall *c)
{
	return do_select(c, true, true);
}

static struct tval f_rejectattr(const struct fcall *c)
{
	return do_select(c, true, false);
}

static struct tval f_map(const struct fcall *c)
{
	struct trender *r = c->r;
	struct tlist *in, *out;
	struct tval a, def;
	bool has_def = arg(NULL, 0, c->kn, c->kv, c->nk, 0, "default", &def);
	size_t i;

	/* as select: a false value maps to nothing, unchecked */
	if (!tmpl_run_truthy(r, c->v))
		return tv_list(tmpl_run_list_new(r, 0));
	in = tmpl_run_iter(r, c->v);
	out = tmpl_run_list_new(r, in->n);
	if (arg(NULL, 0, c->kn, c->kv, c->nk, 0, "attribute", &a)) {
		const struct tstr *attr = want_str(r, a, "attribute");

		for (i = 0; i < in->n; i++) {
			struct tval x = attr_path(r, in->v[i], attr);

			if (x.k == V_UNDEF && has_def)
				x = def;
			out->v[i] = x;
			tmpl_run_step(r);
		}
		return tv_list(out);
	}
	if (c->nargs < 1)
		tmpl_run_fail(r, TMPL_ERUNTIME,
		              "map requires a filter argument");
	{
		struct tstr *name = want_str(r, c->args[0], "filter name");
		const char *z = name_of(r, name);
		const struct filter *f = z ? filter_find(z) : NULL;

		if (!f)
			tmpl_run_fail(r, TMPL_ERUNTIME,
			              "No filter named '%.*s'.", (int)name->n,
			              name->p);
		for (i = 0; i < in->n; i++) {
			struct fcall fc = {
			    r,    in->v[i], c->args + 1, c->nargs - 1, NULL,
			    NULL, 0};

			out->v[i] = f->fn(&fc);
			tmpl_run_step(r);
		}
	}
	return tv_list(out);
}

/* Length of the line break at S[i..] as Python's str.splitlines sees it,
 * or 0. */
static size_t line_break(const struct tstr *s, size_t i)
{
	size_t k;
	uint32_t cp = tmpl_lib_u8dec(s->p + i, s->n - i, &k);

	if (cp == '\r' && i + 1 < s->n && s->p[i + 1] == '\n')
		return 2;
	if (cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c ||
	    (cp >= 0x1c && cp <= 0x1e) || cp == 0x85 || cp == 0x2028 ||
	    cp == 0x2029)
		return k;
	return 0;
}

/* jinja2's indent filter (3.1): every line but the first (FIRST: also the
 * first) gets INDENT in front; blank lines only when BLANK. */
static struct tstr *do_indent(struct trender *r, const struct tstr *s,
                              const struct tstr *ind, bool first, bool blank)
{
	struct tstr *res = cstr(r, ""), *nl = cstr(r, "\n");
	size_t i = 0, start = 0, line = 0;

	/* jinja2 splits s + "\n" with splitlines(): the segments of S
	 * between line breaks, the last one (maybe empty) included */
	for (;;) {
		size_t e = start, b = 0;
		struct tstr *piece;

		while (e < s->n && !(b = line_break(s, e)))
			e +=
			    tmpl_lib_u8dec(s->p + e, s->n - e, &i) == UINT32_MAX
			        ? 1
			        : i;
		piece = tmpl_run_str_sub(r, s, start, e - start);
		if (line > 0) {
			res = tmpl_run_str_cat(r, res, nl);
			if (blank || piece->n)
				res = tmpl_run_str_cat(r, res, ind);
		}
		res = tmpl_run_str_cat(r, res, piece);
		line++;
		tmpl_run_step(r);
		if (e >= s->n)
			break;
		start = e + b;
	}
	if (first)
		res = tmpl_run_str_cat(r, ind, res);
	return res;
}

static struct tval f_indent(const struct fcall *c)
{
	struct trender *r = c->r;
	struct tval w = tv_int(4), f = tv_bool(false), b = tv_bool(false);
	struct tstr *ind;

	farg(c, 0, "width", &w);
	farg(c, 1, "first", &f);
	farg(c, 2, "blank", &b);
	if (w.k == V_STR) {
		ind = w.u.s;
	} else if (w.k == V_INT && w.u.i >= 0 && w.u.i <= 256) {
		char *sp = tmpl_arena_alloc(&r->arena, (size_t)w.u.i + 1);

		memset(sp, ' ', (size_t)w.u.i);
		ind = tmpl_run_str_new(r, sp, (size_t)w.u.i, false);
	} else {
		tmpl_run_fail(r, TMPL_ERUNTIME,
		              "indent: width must be a string "
		              "or an integer 0..256");
	}
	return tv_str(do_indent(r, tmpl_run_to_str(r, c->v), ind,
	                        tmpl_run_truthy(r, f), tmpl_run_truthy(r, b)));
}

static struct tval f_trim(const struct fcall *c)
{
	struct tstr *chars = NULL;
	struct tval a;

	if (farg(c, 0, "chars", &a) && a.k != V_NONE)
		chars = want_str(c->r, a, "trim chars");
	return tv_str(do_strip(c->r, tmpl_run_to_str(c->r, c->v), chars, 3));
}

/* length and its alias count. */
static struct tval f_length(const struct fcall *c)
{
	return tv_int(py_len(c->r, c->v));
}

/* No autoescaping here, so marking a value safe changes nothing. */
static struct tval f_safe(const struct fcall *c)
{
	return c->v;
}

/* markupsafe.escape: & < > " ' */
static struct tval f_escape(const struct fcall *c)
{
	struct trender *r = c->r;
	struct tstr *in = tmpl_run_to_str(r, c->v);
	char *d;
	size_t i, o = 0;

	if (in->n > (SIZE_MAX - 1) / 5)
		tmpl_run_fail(r, TMPL_ELIMIT, "string too long");
	d = tmpl_arena_alloc(&r->arena, in->n * 5 + 1);
	for (i = 0; i < in->n; i++) {
		const char *rep = in->p[i] == '&'    ? "&amp;"
		                  : in->p[i] == '<'  ? "&lt;"
		                  : in->p[i] == '>'  ? "&gt;"
		                  : in->p[i] == '"'  ? "&#34;"
		                  : in->p[i] == '\'' ? "&#39;"
		                                     : NULL;

		if (rep) {
			memcpy(d + o, rep, strlen(rep));
			o += strlen(rep);
		} else {
			d[o++] = in->p[i];
		}
	}
	return tv_str(tmpl_run_str_derived(r, d, o, in->nsp != 0));
}

static struct tval f_string(const struct fcall *c)
{
	return tv_str(tmpl_run_to_str(c->r, c->v));
}

static struct tval f_lower(const struct fcall *c)
{
	return tv_str(do_case(c->r, tmpl_run_to_str(c->r, c->v), 'l'));
}

static struct tval f_upper(const struct fcall *c)
{
	return tv_str(do_case(c->r, tmpl_run_to_str(c->r, c->v), 'u'));
}

/* jinja2's title filter (words start after space, - ( { [ <), which is
 * not Python's str.title(). */
static struct tval f_title(const struct fcall *c)
{
	return tv_str(do_case(c->r, tmpl_run_to_str(c->r, c->v), 'j'));
}

static struct tval f_capitalize(const struct fcall *c)
{
	return tv_str(do_case(c->r, tmpl_run_to_str(c->r, c->v), 'c'));
}

/* default and its alias d. */
static struct tval f_default(const struct fcall *c)
{
	struct trender *r = c->r;
	struct tval def = tv_str(cstr(r, "")), b;
	bool boolean = false;

	farg(c, 0, "default_value", &def);
	if (farg(c, 1, "boolean", &b))
		boolean = tmpl_run_truthy(r, b);
	if (c->v.k == V_UNDEF || (boolean && !tmpl_run_truthy(r, c->v)))
		return def;
	return c->v;
}

static struct tval f_first(const struct fcall *c)
{
	struct tlist *l = tmpl_run_iter(c->r, c->v);

	if (!l->n)
		return tmpl_run_undef_hint(
		    c->r, "No first item, sequence was empty.");
	return l->v[0];
}

static struct tval f_last(const struct fcall *c)
{
	struct tlist *l = tmpl_run_iter(c->r, c->v);

	if (!l->n)
		return tmpl_run_undef_hint(c->r,
		                           "No last item, sequence was empty.");
	return l->v[l->n - 1];
}

static struct tval f_join(const struct fcall *c)
{
	struct trender *r = c->r;
	struct tlist *l = tmpl_run_iter(r, c->v);
	struct tstr *sep = cstr(r, ""), *res = cstr(r, "");
	const struct tstr *attr = NULL;
	struct tval a;
	size_t i;

	if (farg(c, 0, "d", &a))
		sep = tmpl_run_to_str(r, a);
	if (farg(c, 1, "attribute", &a) && a.k != V_NONE)
		attr = want_str(r, a, "attribute");
	for (i = 0; i < l->n; i++) {
		struct tval x = attr ? attr_path(r, l->v[i], attr) : l->v[i];

		if (i)
			res = tmpl_run_str_cat(r, res, sep);
		res = tmpl_run_str_cat(r, res, tmpl_run_to_str(r, x));
		tmpl_run_step(r);
	}
	return tv_str(res);
}

static struct tval f_tojson(const struct fcall *c)
{
	return do_tojson(c->r, c->v, c->args, c->nargs, c->kn, c->kv, c->nk);
}

static struct tval f_list(const struct fcall *c)
{
	struct tlist *l = tmpl_run_iter(c->r, c->v),
	             *copy = tmpl_run_list_new(c->r, l->n);

	if (l->n)
		memcpy(copy->v, l->v, l->n * sizeof(*copy->v));
	return tv_list(copy);
}

/* A dict's (key, value) tuples; also dict.items(). */
static struct tval f_items(const struct fcall *c)
{
	struct trender *r = c->r;
	struct tval v = c->v;
	struct tlist *l;
	size_t i;

	if (v.k == V_UNDEF)
		return tv_list(tmpl_run_list_new(r, 0));
	if (v.k != V_DICT)
		tmpl_run_fail(r, TMPL_ERUNTIME,
		              "Can only get item pairs from a mapping.");
	l = tmpl_run_list_new(r, v.u.d->n);
	for (i = 0; i < v.u.d->n; i++) {
		struct tlist *p = tmpl_run_list_new(r, 2);

		p->v[0] = v.u.d->keys[i];
		p->v[1] = v.u.d->vals[i];
		l->v[i] = tv_list(p);
		l->v[i].tuple = true;
	}
	return tv_list(l);
}

static struct tval f_replace(const struct fcall *c)
{
	struct trender *r = c->r;
	struct tval o, n, cnt = tv_int(-1);

	if (!farg(c, 0, "old", &o) || !farg(c, 1, "new", &n))
		tmpl_run_fail(r, TMPL_ERUNTIME, "replace needs old and new");
	farg(c, 2, "count", &cnt);
	if (cnt.k == V_NONE)
		cnt = tv_int(-1);
	if (cnt.k != V_INT)
		tmpl_run_fail(r, TMPL_ERUNTIME, "replace: count must be int");
	return tv_str(do_replace(r, tmpl_run_to_str(r, c->v),
	                         tmpl_run_to_str(r, o), tmpl_run_to_str(r, n),
	                         cnt.u.i));
}

static struct tval f_reverse(const struct fcall *c)
{
	struct trender *r = c->r;
	struct tlist *l = tmpl_run_iter(r, c->v), *rev;
	size_t i;

	if (c->v.k == V_STR) {
		struct tstr *res = cstr(r, "");

		for (i = l->n; i-- > 0;)
			res = tmpl_run_str_cat(r, res, l->v[i].u.s);
		return tv_str(res);
	}
	rev = tmpl_run_list_new(r, l->n);
	for (i = 0; i < l->n; i++)
		rev->v[i] = l->v[l->n - 1 - i];
	return tv_list(rev);
}

static struct tval f_unique(const struct fcall *c)
{
	struct trender *r = c->r;
	struct tlist *l = tmpl_run_iter(r, c->v),
	             *u = tmpl_run_list_new(r, l->n);
	size_t i, j;

	u->n = 0;
	for (i = 0; i < l->n; i++) {
		bool seen = false;

		for (j = 0; j < u->n && !seen; j++)
			seen = tmpl_run_equal(u->v[j], l->v[i], 0);
		if (!seen)
			u->v[u->n++] = l->v[i];
		tmpl_run_step(r);
	}
	return tv_list(u);
}

/* One item of a sort and the key it is sorted by. */
struct skey {
	struct tval key;  /* compared with Python's < */
	struct tval item; /* what the result holds */
};

/* Python's str.lower() of a string key (jinja2's ignore_case); other
 * kinds as they are. */
static struct tval sort_fold(struct trender *r, struct tval v, bool fold)
{
	return fold && v.k == V_STR ? tv_str(do_case(r, v.u.s, 'l')) : v;
}

/* Python's sorted(): stable, REVERSE keeps equal items in their order;
 * a bottom-up merge sort on V[0..N) that only asks `<` of the keys. */
static void sort_keys(struct trender *r, struct skey *v, size_t n, bool reverse)
{
	struct skey *tmp =
	    tmpl_arena_alloc(&r->arena, (n ? n : 1) * sizeof(*v));
	size_t w, i;

	for (w = 1; w < n; w *= 2) {
		for (i = 0; i < n; i += 2 * w) {
			size_t a = i, m = i + w < n ? i + w : n, b = m;
			size_t e = i + 2 * w < n ? i + 2 * w : n, k = i;

			while (a < m && b < e) {
				bool take_b =
				    reverse ? tmpl_run_order(r, '<', v[a].key,
				                             v[b].key, 0) < 0
				            : tmpl_run_order(r, '<', v[b].key,
				                             v[a].key, 0) < 0;

				tmp[k++] = take_b ? v[b++] : v[a++];
				tmpl_run_step(r);
			}
			while (a < m)
				tmp[k++] = v[a++];
			while (b < e)
				tmp[k++] = v[b++];
		}
		memcpy(v, tmp, n * sizeof(*v));
	}
}

/* How sort and dictsort key an item. */
struct sortspec {
	bool fold;        /* compare strings lowercased (not case_sensitive) */
	int pos;          /* dictsort: 0 the key, 1 the value of the pair */
	struct tval attr; /* sort: attribute paths (str), an index (int) or
	                     none (the item itself) */
};

/* The key of ITEM: dictsort's pair member, or sort's list of the
 * comma-separated dotted paths of the attribute (jinja2's
 * make_multi_attrgetter), each folded when asked. */
static struct tval sort_key(struct trender *r, struct tval item,
                            const struct sortspec *sp)
{
	const struct tval attr = sp->attr;
	struct tlist *key;
	size_t a = 0, e, n = 1, i;

	if (sp->pos >= 0)
		return sort_fold(r, item.u.l->v[sp->pos], sp->fold);
	if (attr.k == V_STR)
		for (i = 0; i < attr.u.s->n; i++)
			n += attr.u.s->p[i] == ',';
	key = tmpl_run_list_new(r, n);
	if (attr.k == V_NONE || attr.k == V_UNDEF) {
		key->v[0] = sort_fold(r, item, sp->fold);
		return tv_list(key);
	}
	if (attr.k != V_STR) {
		key->v[0] =
		    sort_fold(r, tmpl_run_getitem(r, item, attr), sp->fold);
		return tv_list(key);
	}
	for (i = 0; i < n; i++, a = e + 1) {
		for (e = a; e < attr.u.s->n && attr.u.s->p[e] != ','; e++)
			;
		key->v[i] = sort_fold(
		    r,
		    attr_path(r, item, tmpl_run_str_sub(r, attr.u.s, a, e - a)),
		    sp->fold);
	}
	return tv_list(key);
}

/* A new list of L's items sorted by their keys (see sort_keys). */
static struct tval sorted(struct trender *r, const struct tlist *l,
                          const struct sortspec *sp, bool reverse)
{
	struct skey *v =
	    tmpl_arena_alloc(&r->arena, (l->n ? l->n : 1) * sizeof(*v));
	struct tlist *out = tmpl_run_list_new(r, l->n);
	size_t i;

	for (i = 0; i < l->n; i++) {
		v[i].item = l->v[i];
		v[i].key = sort_key(r, l->v[i], sp);
	}
	sort_keys(r, v, l->n, reverse);
	for (i = 0; i < l->n; i++)
		out->v[i] = v[i].item;
	return tv_list(out);
}

/* sort(reverse=false, case_sensitive=false, attribute=none) */
static struct tval f_sort(const struct fcall *c)
{
	struct tval rev = tv_bool(false), cs = tv_bool(false);
	struct sortspec sp = {.pos = -1, .attr = tv_none()};

	farg(c, 0, "reverse", &rev);
	farg(c, 1, "case_sensitive", &cs);
	farg(c, 2, "attribute", &sp.attr);
	sp.fold = !tmpl_run_truthy(c->r, cs);
	return sorted(c->r, tmpl_run_iter(c->r, c->v), &sp,
	              tmpl_run_truthy(c->r, rev));
}

/* dictsort(case_sensitive=false, by='key', reverse=false): the (key,
 * value) tuples of a dict, sorted by the one or the other. */
static struct tval f_dictsort(const struct fcall *c)
{
	struct trender *r = c->r;
	struct tval cs = tv_bool(false), by = tv_none(), rev = tv_bool(false);
	struct sortspec sp = {.pos = 0};

	farg(c, 0, "case_sensitive", &cs);
	farg(c, 2, "reverse", &rev);
	if (farg(c, 1, "by", &by)) {
		const struct tstr *b = by.k == V_STR ? by.u.s : NULL;

		if (b && b->n == 5 && !memcmp(b->p, "value", 5))
			sp.pos = 1;
		else if (!b || b->n != 3 || memcmp(b->p, "key", 3))
			tmpl_run_fail(r, TMPL_ERUNTIME,
			              "You can only sort by either \"key\" or "
			              "\"value\"");
	}
	if (c->v.k == V_UNDEF)
		tmpl_run_undef_fail(r, c->v);
	if (c->v.k != V_DICT)
		tmpl_run_fail(r, TMPL_ERUNTIME,
		              "'%s' object has no attribute 'items'",
		              tmpl_run_type_name(c->v));
	sp.fold = !tmpl_run_truthy(r, cs);
	return sorted(r, f_items(c).u.l, &sp, tmpl_run_truthy(r, rev));
}

/* Python's sum(): ints stay exact (overflow is an error), a float makes
 * the rest float. */
static struct tval f_sum(const struct fcall *c)
{
	struct trender *r = c->r;
	struct tlist *l = tmpl_run_iter(r, c->v);
	struct tval acc = tv_int(0);
	size_t i;

	for (i = 0; i < l->n; i++) {
		struct tval x = l->v[i];

		if (x.k == V_FLOAT ||
		    (acc.k == V_FLOAT && (x.k == V_INT || x.k == V_BOOL))) {
			double a = acc.k == V_FLOAT ? acc.u.f : (double)acc.u.i;
			double b = x.k == V_FLOAT ? x.u.f
			           : x.k == V_INT ? (double)x.u.i
			                          : (double)x.u.b;

			acc = tv_float(a + b);
		} else if (x.k == V_INT || x.k == V_BOOL) {
			int64_t y = x.k == V_INT ? x.u.i : x.u.b, z;

			if (__builtin_add_overflow(acc.u.i, y, &z))
				tmpl_run_fail(r, TMPL_ERUNTIME,
				              "integer too large");
			acc = tv_int(z);
		} else {
			tmpl_run_fail(r, TMPL_ERUNTIME,
			              "unsupported operand type(s) for +: "
			              "'%s' and '%s'",
			              tmpl_run_type_name(acc),
			              tmpl_run_type_name(x));
		}
	}
	return acc;
}

/* max (WANT_MAX) or min: the first of the extreme items, as Python. */
static struct tval min_max(const struct fcall *c, bool want_max)
{
	struct trender *r = c->r;
	struct tlist *l = tmpl_run_iter(r, c->v);
	struct tval acc;
	size_t i;

	if (!l->n)
		return tmpl_run_undef_hint(
		    r, "No aggregated item, sequence was empty.");
	acc = l->v[0];
	for (i = 1; i < l->n; i++) {
		int o = tmpl_run_order(r, '<', l->v[i], acc, 0);

		if (want_max ? o > 0 : o < 0)
			acc = l->v[i];
	}
	return acc;
}

static struct tval f_max(const struct fcall *c)
{
	return min_max(c, true);
}

static struct tval f_min(const struct fcall *c)
{
	return min_max(c, false);
}

static struct tval f_abs(const struct fcall *c)
{
	struct tval v = c->v;

	if (v.k == V_INT && v.u.i != INT64_MIN)
		return tv_int(v.u.i < 0 ? -v.u.i : v.u.i);
	if (v.k == V_FLOAT)
		return tv_float(fabs(v.u.f));
	if (v.k == V_BOOL)
		return tv_int(v.u.b);
	tmpl_run_fail(c->r, TMPL_ERUNTIME, "bad operand type for abs(): '%s'",
	              tmpl_run_type_name(v));
}

/* The int (AS_INT) and float filters: numbers convert, strings parse
 * (surrounding whitespace allowed; int also takes "2.5"), anything else
 * gives the default. */
static struct tval to_number(const struct fcall *c, bool as_int)
{
	struct tval v = c->v, def = as_int ? tv_int(0) : tv_float(0.0);

	farg(c, 0, "default", &def);
	if (v.k == V_INT || v.k == V_BOOL)
		return as_int ? tv_int(v.k == V_INT ? v.u.i : v.u.b)
		              : tv_float(v.k == V_INT ? (double)v.u.i : v.u.b);
	if (v.k == V_FLOAT) {
		if (!as_int)
			return v;
		if (!(v.u.f > -9.2e18 && v.u.f < 9.2e18))
			return def;
		return tv_int((int64_t)v.u.f);
	}
	if (v.k == V_STR) {
		char buf[64], *end;
		struct tstr *s = do_strip(c->r, v.u.s, NULL, 3);
		double d;

		if (s->n == 0 || s->n >= sizeof(buf))
			return def;
		memcpy(buf, s->p, s->n);
		buf[s->n] = '\0';
		if (as_int) {
			long long x = strtoll(buf, &end, 10);

			if (!*end)
				return tv_int(x);
		}
		d = strtod(buf, &end);
		if (*end)
			return def;
		if (!as_int)
			return tv_float(d);
		if (!(d > -9.2e18 && d < 9.2e18))
			return def;
		return tv_int((int64_t)d);
	}
	return def;
}

static struct tval f_int(const struct fcall *c)
{
	return to_number(c, true);
}

static struct tval f_float(const struct fcall *c)
{
	return to_number(c, false);
}

static struct tval f_round(const struct fcall *c)
{
	struct trender *r = c->r;
	struct tval v = c->v, p = tv_int(0), m = tv_str(cstr(r, "common"));
	double x, f;

	farg(c, 0, "precision", &p);
	farg(c, 1, "method", &m);
	if (!(v.k == V_INT || v.k == V_FLOAT || v.k == V_BOOL) ||
	    p.k != V_INT || p.u.i < 0 || p.u.i > 15)
		tmpl_run_fail(r, TMPL_ERUNTIME, "round: bad arguments");
	x = v.k == V_FLOAT ? v.u.f : v.k == V_INT ? (double)v.u.i : v.u.b;
	f = pow(10.0, (double)p.u.i);
	if (m.k == V_STR && m.u.s->n == 4 && !memcmp(m.u.s->p, "ceil", 4))
		return tv_float(ceil(x * f) / f);
	if (m.k == V_STR && m.u.s->n == 5 && !memcmp(m.u.s->p, "floor", 5))
		return tv_float(floor(x * f) / f);
	return tv_float(round(x * f) / f);
}

/* The number of \w+ runs: letters, digits, underscore. */
static struct tval f_wordcount(const struct fcall *c)
{
	struct tstr *s = tmpl_run_to_str(c->r, c->v);
	size_t i, k, n = 0;
	bool in = false;

	for (i = 0; i < s->n; i += k) {
		uint32_t cp = tmpl_lib_u8dec(s->p + i, s->n - i, &k);
		utf8proc_category_t cat =
		    utf8proc_category((utf8proc_int32_t)cp);
		bool w = cp == '_' ||
		         (cat >= UTF8PROC_CATEGORY_LU &&
		          cat <= UTF8PROC_CATEGORY_LO) ||
		         (cat >= UTF8PROC_CATEGORY_ND &&
		          cat <= UTF8PROC_CATEGORY_NO);

		if (w && !in)
			n++;
		in = w;
	}
	return tv_int((int64_t)n);
}

/* Every filter (a subset of jinja2 3.1's; prompts/README.md lists it and
 * t_template checks that the two agree). */
static const struct filter filters[] = {
    {"abs", f_abs},
    {"capitalize", f_capitalize},
    {"count", f_length},
    {"d", f_default},
    {"default", f_default},
    {"dictsort", f_dictsort},
    {"e", f_escape},
    {"escape", f_escape},
    {"first", f_first},
    {"float", f_float},
    {"indent", f_indent},
    {"int", f_int},
    {"items", f_items},
    {"join", f_join},
    {"last", f_last},
    {"length", f_length},
    {"list", f_list},
    {"lower", f_lower},
    {"map", f_map},
    {"max", f_max},
    {"min", f_min},
    {"reject", f_reject},
    {"rejectattr", f_rejectattr},
    {"replace", f_replace},
    {"reverse", f_reverse},
    {"round", f_round},
    {"safe", f_safe},
    {"select", f_select},
    {"selectattr", f_selectattr},
    {"sort", f_sort},
    {"string", f_string},
    {"sum", f_sum},
    {"title", f_title},
    {"tojson", f_tojson},
    {"trim", f_trim},
    {"unique", f_unique},
    {"upper", f_upper},
    {"wordcount", f_wordcount},
};

static const struct filter *filter_find(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(filters) / sizeof(*filters); i++)
		if (strcmp(filters[i].name, name) == 0)
			return &filters[i];
	return NULL;
}

bool tmpl_lib_has_filter(const char *name)
{
	return filter_find(name) != NULL;
}

const char *tmpl_lib_filter_name(size_t i)
{
	return i < sizeof(filters) / sizeof(*filters) ? filters[i].name : NULL;
}

struct tval tmpl_lib_filter(struct trender *r, const char *name, struct tval v,
                            struct tval *args, size_t nargs, const char **kn,
                            struct tval *kv, size_t nk)
{
	const struct filter *f = filter_find(name);
	struct fcall c = {r, v, args, nargs, kn, kv, nk};

	if (!f)
		tmpl_run_fail(r, TMPL_ERUNTIME, "No filter named '%s'.", name);
	return f->fn(&c);
}

/* ------------------------------------------------------ methods, globals */

struct tval tmpl_lib_method(struct trender *r, struct tval self,
                            const char *name, size_t nlen, bool *found)
{
	static const struct {
		int kind; /* V_STR, V_DICT, V_LOOP */
		const char *name;
		int id;
	} m[] = {
	    {V_STR, "strip", TF_STRIP},
	    {V_STR, "lstrip", TF_LSTRIP},
	    {V_STR, "rstrip", TF_RSTRIP},
	    {V_STR, "split", TF_SPLIT},
	    {V_STR, "startswith", TF_STARTSWITH},
	    {V_STR, "endswith", TF_ENDSWITH},
	    {V_STR, "upper", TF_UPPER},
	    {V_STR, "lower", TF_LOWER},
	    {V_STR, "title", TF_TITLE},
	    {V_STR, "capitalize", TF_CAPITALIZE},
	    {V_STR, "replace", TF_REPLACE},
	    {V_STR, "join", TF_JOIN},
	    {V_STR, "find", TF_FIND},
	    {V_STR, "count", TF_COUNT},
	    {V_STR, "format", TF_FORMAT},
	    {V_DICT, "items", TF_ITEMS},
	    {V_DICT, "keys", TF_KEYS},
	    {V_DICT, "values", TF_VALUES},
	    {V_DICT, "get", TF_GET},
	    {V_LOOP, "cycle", TF_CYCLE},
	};
	size_t i;

	(void)nlen;
	*found = false;
	for (i = 0; i < sizeof(m) / sizeof(*m); i++) {
		if ((int)self.k == m[i].kind && strcmp(m[i].name, name) == 0) {
			*found = true;
			return mkfunc(r, m[i].id, m[i].name, &self);
		}
	}
	return tv_none();
}

struct tval tmpl_lib_global(struct trender *r, const char *name, bool *found)
{
	*found = true;
	if (!strcmp(name, "range"))
		return mkfunc(r, TF_RANGE, "range", NULL);
	if (!strcmp(name, "namespace"))
		return mkfunc(r, TF_NAMESPACE, "namespace", NULL);
	if (!strcmp(name, "dict"))
		return mkfunc(r, TF_DICT, "dict", NULL);
	if (!strcmp(name, "raise_exception"))
		return mkfunc(r, TF_RAISE, "raise_exception", NULL);
	if (!strcmp(name, "strftime_now"))
		return mkfunc(r, TF_STRFTIME, "strftime_now", NULL);
	*found = false;
	return tv_none();
}

/* The value of replacement field NAME (N bytes: empty for the next
 * automatic index *AUTO, digits for an index, else a keyword) of
 * str.format; *AUTO becomes -1 once an index is given by number. */
static struct tval format_arg(struct trender *r, const char *name, size_t n,
                              int64_t *autoi, struct tval *args, size_t nargs,
                              const char **kn, struct tval *kv, size_t nk)
{
	int64_t idx = 0;
	size_t i;

	if (n && (name[0] < '0' || name[0] > '9')) {
		for (i = 0; i < nk; i++)
			if (strlen(kn[i]) == n && memcmp(kn[i], name, n) == 0)
				return kv[i];
		tmpl_run_fail(r, TMPL_ERUNTIME, "'%.*s'", (int)n, name);
	}
	if (n == 0 && *autoi < 0)
		tmpl_run_fail(
		    r, TMPL_ERUNTIME,
		    "cannot switch from manual field specification to "
		    "automatic field numbering");
	if (n && *autoi > 0)
		tmpl_run_fail(r, TMPL_ERUNTIME,
		              "cannot switch from automatic field numbering to "
		              "manual field specification");
	for (i = 0; i < n; i++) {
		if (name[i] < '0' || name[i] > '9' || idx > 1000000)
			tmpl_run_fail(r, TMPL_ERUNTIME,
			              "format: field '%.*s' is not supported",
			              (int)n, name);
		idx = idx * 10 + (name[i] - '0');
	}
	if (n)
		*autoi = -1;
	else
		idx = (*autoi)++;
	if ((uint64_t)idx >= nargs)
		tmpl_run_fail(r, TMPL_ERUNTIME, "tuple index out of range");
	return args[idx];
}

/* Python's str.format (the sandbox's: fields by position or keyword,
 * formatted with str()); attribute or index lookups inside a field, a
 * conversion or a format spec fail with a message naming them. */
static struct tstr *do_format(struct trender *r, const struct tstr *s,
                              struct tval *args, size_t nargs, const char **kn,
                              struct tval *kv, size_t nk)
{
	struct tstr *res = cstr(r, "");
	int64_t autoi = 0;
	size_t i = 0, lit = 0;

	while (i < s->n) {
		char ch = s->p[i];
		size_t e, k;

		if (ch != '{' && ch != '}') {
			i++;
			continue;
		}
		res = tmpl_run_str_cat(r, res,
		                       tmpl_run_str_sub(r, s, lit, i - lit));
		if (i + 1 < s->n && s->p[i + 1] == ch) {
			/* "{{" or "}}": one brace */
			res = tmpl_run_str_cat(r, res,
			                       tmpl_run_str_sub(r, s, i, 1));
			i += 2;
			lit = i;
			continue;
		}
		if (ch == '}')
			tmpl_run_fail(
			    r, TMPL_ERUNTIME,
			    "Single '}' encountered in format string");
		for (e = i + 1; e < s->n && s->p[e] != '}' && s->p[e] != '{';
		     e++)
			;
		if (e >= s->n || s->p[e] != '}')
			tmpl_run_fail(r, TMPL_ERUNTIME,
			              e >= s->n
			                  ? "Single '{' encountered in "
			                    "format string"
			                  : "unexpected '{' in field name");
		for (k = i + 1; k < e && !strchr("!:.[", s->p[k]); k++)
			;
		if (k < e)
			tmpl_run_fail(r, TMPL_ERUNTIME,
			              "format: field '%.*s' is not supported "
			              "(only {}, {N}, {name})",
			              (int)(e + 1 - i), s->p + i);
		res = tmpl_run_str_cat(
		    r, res,
		    tmpl_run_to_str(r, format_arg(r, s->p + i + 1, e - i - 1,
		                                  &autoi, args, nargs, kn, kv,
		                                  nk)));
		i = e + 1;
		lit = i;
	}
	return tmpl_run_str_cat(r, res, tmpl_run_str_sub(r, s, lit, i - lit));
}

/* Python str.startswith/endswith with a str or tuple of str. */
static bool affix(struct trender *r, const struct tstr *s, struct tval a,
                  bool end)
{
	size_t i;

	if (a.k == V_LIST && a.tuple) {
		for (i = 0; i < a.u.l->n; i++)
			if (affix(r, s, a.u.l->v[i], end))
				return true;
		return false;
	}
	{
		const struct tstr *p =
		    want_str(r, a, end ? "endswith arg" : "startswith arg");

		if (p->n > s->n)
			return false;
		return memcmp(end ? s->p + s->n - p->n : s->p, p->p, p->n) == 0;
	}
}

struct tval tmpl_lib_call(struct trender *r, const struct tfunc *fn,
                          struct tval *args, size_t nargs, const char **kn,
                          struct tval *kv, size_t nk)
{
	struct tval self = fn->self ? *fn->self : tv_none(), a;
	size_t i;

	switch (fn->id) {
	case TF_RAISE: {
		struct tstr *msg =
		    nargs ? tmpl_run_to_str(r, args[0]) : cstr(r, "");

		/* the message goes to the user as is, without a position */
		tmpl_fail(&r->fail, TMPL_ERAISE, 0, 0, "%.*s", (int)msg->n,
		          msg->p);
	}
	case TF_STRFTIME: {
		struct tstr *f;
		char fmt[256], out[512];
		struct tm tmv;
		size_t n;

		if (!nargs)
			tmpl_run_fail(r, TMPL_ERUNTIME,
			              "strftime_now() needs a format");
		f = want_str(r, args[0], "format");
		if (f->n >= sizeof(fmt) || memchr(f->p, 0, f->n))
			tmpl_run_fail(r, TMPL_ERUNTIME,
			              "strftime_now: format too long");
		memcpy(fmt, f->p, f->n);
		fmt[f->n] = '\0';
		if (r->ctx->now) {
			tmv = *r->ctx->now;
		} else {
			time_t t = time(NULL);

			localtime_r(&t, &tmv);
		}
		/* The format comes from the template by design (Llama-3's
		 * "%d %b %Y"); strftime cannot overrun OUT. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
		n = f->n ? strftime(out, sizeof(out), fmt, &tmv) : 0;
#pragma GCC diagnostic pop
		{
			char *d = tmpl_arena_alloc(&r->arena, n + 1);

			memcpy(d, out, n);
			return tv_str(tmpl_run_str_new(r, d, n, false));
		}
	}
	case TF_RANGE: {
		int64_t st = 0, en, step = 1, cnt = 0, x;
		struct tlist *l;

		for (i = 0; i < nargs; i++)
			if (args[i].k != V_INT)
				tmpl_run_fail(r, TMPL_ERUNTIME,
				              "range() arguments must "
				              "be integers");
		if (nargs == 1) {
			en = args[0].u.i;
		} else if (nargs == 2 || nargs == 3) {
			st = args[0].u.i;
			en = args[1].u.i;
			if (nargs == 3)
				step = args[2].u.i;
		} else {
			tmpl_run_fail(r, TMPL_ERUNTIME,
			              "range expected 1 to 3 arguments");
		}
		if (step == 0)
			tmpl_run_fail(r, TMPL_ERUNTIME,
			              "range() arg 3 must not be zero");
		for (x = st; step > 0 ? x < en : x > en; x += step)
			if (++cnt > 100000)
				tmpl_run_fail(
				    r, TMPL_ERUNTIME,
				    "Range too big. The sandbox blocks ranges "
				    "larger than MAX_RANGE (100000).");
		l = tmpl_run_list_new(r, (size_t)cnt);
		for (i = 0, x = st; i < (size_t)cnt; i++, x += step)
			l->v[i] = tv_int(x);
		return tv_list(l);
	}
	case TF_NAMESPACE:
	case TF_DICT: {
		struct tval d = {.k = fn->id == TF_NAMESPACE ? V_NS : V_DICT};

		d.u.d = tmpl_arena_alloc(&r->arena, sizeof(*d.u.d));
		if (nargs && args[0].k == V_DICT)
			for (i = 0; i < args[0].u.d->n; i++)
				tmpl_run_dict_set(r, d.u.d,
				                  args[0].u.d->keys[i],
				                  args[0].u.d->vals[i]);
		for (i = 0; i < nk; i++)
			tmpl_run_dict_set(r, d.u.d, tv_str(cstr(r, kn[i])),
			                  kv[i]);
		return d;
	}
	case TF_CYCLE:
		if (!nargs)
			tmpl_run_fail(r, TMPL_ERUNTIME,
			              "no items for cycling given");
		return args[self.u.lp->i % nargs];
	case TF_ITEMS: {
		struct fcall c = {r, self, NULL, 0, NULL, NULL, 0};

		return f_items(&c);
	}
	case TF_KEYS:
	case TF_VALUES: {
		struct tlist *l = tmpl_run_list_new(r, self.u.d->n);

		for (i = 0; i < self.u.d->n; i++)
			l->v[i] = fn->id == TF_KEYS ? self.u.d->keys[i]
			                            : self.u.d->vals[i];
		return tv_list(l);
	}
	case TF_GET: {
		bool found;
		struct tval v;

		if (!nargs)
			tmpl_run_fail(r, TMPL_ERUNTIME,
			              "get expected at least 1 argument");
		v = tmpl_run_dict_get(self, args[0], &found);
		if (found)
			return v;
		return nargs > 1 ? args[1] : tv_none();
	}
	default:
		break;
	}
	/* str methods */
	{
		const struct tstr *s = self.u.s;

		switch (fn->id) {
		case TF_STRIP:
		case TF_LSTRIP:
		case TF_RSTRIP: {
			struct tstr *chars = NULL;

			if (nargs && args[0].k != V_NONE)
				chars = want_str(r, args[0], "strip arg");
			return tv_str(do_strip(r, s, chars,
			                       fn->id == TF_STRIP    ? 3
			                       : fn->id == TF_LSTRIP ? 1
			                                             : 2));
		}
		case TF_SPLIT: {
			struct tstr *sep = NULL;
			int64_t maxsplit = -1;

			if (arg(args, nargs, kn, kv, nk, 0, "sep", &a) &&
			    a.k != V_NONE)
				sep = want_str(r, a, "separator");
			if (arg(args, nargs, kn, kv, nk, 1, "maxsplit", &a)) {
				if (a.k != V_INT)
					tmpl_run_fail(r, TMPL_ERUNTIME,
					              "maxsplit must be "
					              "an integer");
				maxsplit = a.u.i;
			}
			return do_split(r, s, sep, maxsplit);
		}
		case TF_STARTSWITH:
		case TF_ENDSWITH:
			if (!nargs)
				tmpl_run_fail(r, TMPL_ERUNTIME,
				              "%s takes one argument",
				              fn->name);
			return tv_bool(
			    affix(r, s, args[0], fn->id == TF_ENDSWITH));
		case TF_UPPER:
			return tv_str(do_case(r, s, 'u'));
		case TF_LOWER:
			return tv_str(do_case(r, s, 'l'));
		case TF_TITLE:
			return tv_str(do_case(r, s, 't'));
		case TF_CAPITALIZE:
			return tv_str(do_case(r, s, 'c'));
		case TF_REPLACE: {
			int64_t count = -1;

			if (nargs < 2)
				tmpl_run_fail(r, TMPL_ERUNTIME,
				              "replace expected at least "
				              "2 arguments");
			if (nargs > 2) {
				if (args[2].k != V_INT)
					tmpl_run_fail(r, TMPL_ERUNTIME,
					              "count must be an "
					              "integer");
				count = args[2].u.i;
			}
			return tv_str(
			    do_replace(r, s, want_str(r, args[0], "old"),
			               want_str(r, args[1], "new"), count));
		}
		case TF_JOIN: {
			struct tlist *l;
			struct tstr *res = cstr(r, "");

			if (!nargs)
				tmpl_run_fail(r, TMPL_ERUNTIME,
				              "join takes one argument");
			l = tmpl_run_iter(r, args[0]);
			for (i = 0; i < l->n; i++) {
				if (l->v[i].k != V_STR)
					tmpl_run_fail(
					    r, TMPL_ERUNTIME,
					    "sequence item %zu: expected str "
					    "instance, %s found",
					    i, tmpl_run_type_name(l->v[i]));
				if (i)
					res = tmpl_run_str_cat(r, res, s);
				res = tmpl_run_str_cat(r, res, l->v[i].u.s);
			}
			return tv_str(res);
		}
		case TF_FIND:
		case TF_COUNT: {
			const struct tstr *sub;
			int64_t cnt = 0;
			size_t j;

			if (!nargs)
				tmpl_run_fail(r, TMPL_ERUNTIME,
				              "%s takes an argument", fn->name);
			sub = want_str(r, args[0], "substring");
			for (j = 0; j + sub->n <= s->n;) {
				if (memcmp(s->p + j, sub->p, sub->n) == 0) {
					if (fn->id == TF_FIND) {
						struct tstr pre = {s->p, j, 0,
						                   NULL};

						return tv_int(
						    (int64_t)tmpl_run_u8len(
						        &pre));
					}
					cnt++;
					j += sub->n ? sub->n : 1;
					if (!sub->n && j > s->n)
						break;
				} else {
					j++;
				}
			}
			if (fn->id == TF_COUNT && sub->n == 0)
				return tv_int((int64_t)tmpl_run_u8len(s) + 1);
			return tv_int(fn->id == TF_FIND ? -1 : cnt);
		}
		case TF_FORMAT:
			return tv_str(do_format(r, s, args, nargs, kn, kv, nk));
		}
	}
	tmpl_run_fail(r, TMPL_ERUNTIME, "cannot call %s", fn->name);
}

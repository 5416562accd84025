/*
 * template_run.c - the evaluator: values, scopes, statements, expressions.
 *
 * Semantics follow jinja2 3.1 in transformers' sandbox: Python truthiness,
 * equality and str(); undefined values print as "" and fail (with jinja2's
 * message) when used in arithmetic, comparison, attribute access or calls;
 * a for-loop iteration gets a fresh scope (its assignments vanish at the
 * next iteration), `if` does not; namespace() attributes are assignable.
 */
#include "template_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEF_MAX_OUTPUT  ((size_t)16 << 20)
#define DEF_MAX_MEMORY  ((size_t)256 << 20)
#define DEF_MAX_DEPTH   64
#define DEF_MAX_STEPS   1000000
#define MAX_VALUE_DEPTH 256 /* nesting walked by equality, repr, json */

_Noreturn void tmpl_run_fail(struct trender *r, int code, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	tmpl_fail(&r->fail, code, r->line, r->col, "%s", buf);
}

void tmpl_run_step(struct trender *r)
{
	if (++r->steps > r->lim.max_steps)
		tmpl_run_fail(r, TMPL_ELIMIT,
		              "more than %llu loop iterations and macro calls",
		              (unsigned long long)r->lim.max_steps);
}

/* --------------------------------------------------------------- strings */

struct tstr *tmpl_run_str_new(struct trender *r, const char *p, size_t n,
                              bool content)
{
	struct tstr *s = tmpl_arena_alloc(&r->arena, sizeof(*s));

	/* never NULL, so that memchr/memcpy/memcmp of 0 bytes are defined: an
	   empty tsbuf has none (the reverse of "",
	   tests/data/template/crashers/empty-reversed-repr.jinja) */
	s->p = p ? p : "";
	s->n = n;
	if (content && n) {
		s->sp = tmpl_arena_alloc(&r->arena, sizeof(*s->sp));
		s->sp[0].off = 0;
		s->sp[0].len = n;
		s->nsp = 1;
	}
	return s;
}

struct tstr *tmpl_run_str_derived(struct trender *r, const char *p, size_t n,
                                  bool content)
{
	return tmpl_run_str_new(r, p, n, content);
}

struct tstr *tmpl_run_str_cat(struct trender *r, const struct tstr *a,
                              const struct tstr *b)
{
	struct tstr *s;
	char *d;
	size_t i, k = 0;

	if (!b->n)
		return (struct tstr *)a;
	if (!a->n)
		return (struct tstr *)b;
	if (a->n > SIZE_MAX / 2 - b->n)
		tmpl_run_fail(r, TMPL_ELIMIT, "string too long");
	s = tmpl_arena_alloc(&r->arena, sizeof(*s));
	d = tmpl_arena_alloc(&r->arena, a->n + b->n);
	memcpy(d, a->p, a->n);
	memcpy(d + a->n, b->p, b->n);
	s->p = d;
	s->n = a->n + b->n;
	if (a->nsp + b->nsp) {
		s->sp = tmpl_arena_alloc(&r->arena,
		                         (a->nsp + b->nsp) * sizeof(*s->sp));
		for (i = 0; i < a->nsp; i++)
			s->sp[k++] = a->sp[i];
		for (i = 0; i < b->nsp; i++) {
			struct tcspan sp = b->sp[i];

			sp.off += a->n;
			if (k && s->sp[k - 1].off + s->sp[k - 1].len == sp.off)
				s->sp[k - 1].len += sp.len;
			else
				s->sp[k++] = sp;
		}
		s->nsp = k;
	}
	return s;
}

struct tstr *tmpl_run_str_sub(struct trender *r, const struct tstr *s,
                              size_t off, size_t n)
{
	struct tstr *d;
	size_t i, k = 0;

	if (off == 0 && n == s->n)
		return (struct tstr *)s;
	d = tmpl_arena_alloc(&r->arena, sizeof(*d));
	d->p = s->p + off;
	d->n = n;
	for (i = 0; i < s->nsp; i++)
		if (s->sp[i].off < off + n && s->sp[i].off + s->sp[i].len > off)
			k++;
	if (k) {
		d->sp = tmpl_arena_alloc(&r->arena, k * sizeof(*d->sp));
		for (i = 0; i < s->nsp; i++) {
			size_t a = s->sp[i].off, b = a + s->sp[i].len;

			if (a >= off + n || b <= off)
				continue;
			if (a < off)
				a = off;
			if (b > off + n)
				b = off + n;
			d->sp[d->nsp].off = a - off;
			d->sp[d->nsp].len = b - a;
			d->nsp++;
		}
	}
	return d;
}

/* Code points in S (invalid bytes count one each). */
size_t tmpl_run_u8len(const struct tstr *s)
{
	size_t i = 0, n = 0, k;

	while (i < s->n) {
		tmpl_lib_u8dec(s->p + i, s->n - i, &k);
		i += k;
		n++;
	}
	return n;
}

/* Byte offset of code point CP of S (S->n when past the end). */
static size_t r_u8off(const struct tstr *s, size_t cp)
{
	size_t i = 0, k;

	while (i < s->n && cp) {
		tmpl_lib_u8dec(s->p + i, s->n - i, &k);
		i += k;
		cp--;
	}
	return i;
}

/* A growable arena string for building text. */
struct tsbuf {
	char *p;
	size_t n, cap;
};

static void tsb_add(struct trender *r, struct tsbuf *b, const char *s, size_t n)
{
	if (b->n + n > b->cap) {
		size_t ncap = b->cap ? b->cap * 2 : 64;
		char *np;

		while (ncap < b->n + n) {
			if (ncap > r->lim.max_memory)
				tmpl_run_fail(r, TMPL_ELIMIT,
				              "string too long");
			ncap *= 2;
		}
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

static void tsb_cstr(struct trender *r, struct tsbuf *b, const char *s)
{
	tsb_add(r, b, s, strlen(s));
}

/* ----------------------------------------------------------- undefined */

static struct tval r_undef(struct trender *r, const char *obj, const char *name,
                           size_t nlen)
{
	struct tval v = {.k = V_UNDEF};

	v.u.u = tmpl_arena_alloc(&r->arena, sizeof(*v.u.u));
	v.u.u->obj = obj;
	v.u.u->name = name;
	v.u.u->nlen = nlen;
	return v;
}

static struct tval r_undef_idx(struct trender *r, const char *obj, int64_t idx)
{
	struct tval v = r_undef(r, obj, NULL, 0);

	v.u.u->is_index = true;
	v.u.u->idx = idx;
	return v;
}

struct tval tmpl_run_undef_hint(struct trender *r, const char *hint)
{
	struct tval v = r_undef(r, NULL, NULL, 0);

	v.u.u->hint = hint;
	return v;
}

_Noreturn void tmpl_run_undef_fail(struct trender *r, struct tval v)
{
	const struct tundef *u = v.u.u;

	if (!u)
		tmpl_run_fail(r, TMPL_ERUNTIME, "value is undefined");
	if (u->hint)
		tmpl_run_fail(r, TMPL_ERUNTIME, "%s", u->hint);
	if (u->is_index)
		tmpl_run_fail(r, TMPL_ERUNTIME, "%s has no element %lld",
		              u->obj ? u->obj : "object", (long long)u->idx);
	if (!u->obj)
		tmpl_run_fail(r, TMPL_ERUNTIME, "'%.*s' is undefined",
		              (int)u->nlen, u->name);
	tmpl_run_fail(r, TMPL_ERUNTIME, "'%s' has no attribute '%.*s'", u->obj,
	              (int)u->nlen, u->name);
}

const char *tmpl_run_type_name(struct tval v)
{
	switch (v.k) {
	case V_UNDEF:
		return "Undefined";
	case V_NONE:
		return "NoneType";
	case V_BOOL:
		return "bool";
	case V_INT:
		return "int";
	case V_FLOAT:
		return "float";
	case V_STR:
		return "str";
	case V_LIST:
		return v.tuple ? "tuple" : "list";
	case V_DICT:
		return "dict";
	case V_NS:
		return "Namespace";
	case V_FUNC:
		return "builtin_function_or_method";
	case V_MACRO:
		return "Macro";
	case V_LOOP:
		return "LoopContext";
	}
	return "object";
}

static const char *r_obj_repr(struct tval v)
{
	switch (v.k) {
	case V_NONE:
		return "None";
	case V_BOOL:
		return "bool object";
	case V_INT:
		return "int object";
	case V_FLOAT:
		return "float object";
	case V_STR:
		return "str object";
	case V_LIST:
		return v.tuple ? "tuple object" : "list object";
	case V_DICT:
		return "dict object";
	case V_NS:
		return "jinja2.utils.Namespace object";
	case V_LOOP:
		return "jinja2.runtime.LoopContext object";
	case V_MACRO:
		return "jinja2.runtime.Macro object";
	default:
		return "builtin_function_or_method object";
	}
}

/* ---------------------------------------------------------- containers */

struct tlist *tmpl_run_list_new(struct trender *r, size_t n)
{
	struct tlist *l = tmpl_arena_alloc(&r->arena, sizeof(*l));

	if (n > r->lim.max_memory / sizeof(struct tval))
		tmpl_run_fail(r, TMPL_ELIMIT, "list too long");
	l->n = n;
	if (n)
		l->v = tmpl_arena_alloc(&r->arena, n * sizeof(*l->v));
	return l;
}

struct tval tmpl_run_dict_get(struct tval d, struct tval key, bool *found)
{
	size_t i;

	*found = false;
	for (i = 0; i < d.u.d->n; i++) {
		if (tmpl_run_equal(d.u.d->keys[i], key, 0)) {
			*found = true;
			return d.u.d->vals[i];
		}
	}
	return tv_none();
}

void tmpl_run_dict_set(struct trender *r, struct tdict *d, struct tval key,
                       struct tval val)
{
	size_t i;

	for (i = 0; i < d->n; i++) {
		if (tmpl_run_equal(d->keys[i], key, 0)) {
			d->vals[i] = val;
			return;
		}
	}
	if (d->n == d->cap) {
		size_t ncap = d->cap ? d->cap * 2 : 4;
		struct tval *nk =
		    tmpl_arena_alloc(&r->arena, ncap * sizeof(*nk));
		struct tval *nv =
		    tmpl_arena_alloc(&r->arena, ncap * sizeof(*nv));

		if (d->n) {
			memcpy(nk, d->keys, d->n * sizeof(*nk));
			memcpy(nv, d->vals, d->n * sizeof(*nv));
		}
		d->keys = nk;
		d->vals = nv;
		d->cap = ncap;
	}
	d->keys[d->n] = key;
	d->vals[d->n] = val;
	d->n++;
}

/* A value for JSON node J; strings borrowed, untrusted when CONTENT. */
static struct tval r_from_json(struct trender *r, const struct json_value *j,
                               bool content, int depth)
{
	size_t i;

	if (depth > MAX_VALUE_DEPTH)
		tmpl_run_fail(r, TMPL_ELIMIT, "context data nested too deeply");
	switch (j->type) {
	case JSON_NULL:
		return tv_none();
	case JSON_BOOL:
		return tv_bool(j->u.b);
	case JSON_INT:
		return tv_int(j->u.i);
	case JSON_FLOAT:
		return tv_float(j->u.f);
	case JSON_STRING:
		return tv_str(
		    tmpl_run_str_new(r, j->u.str.ptr, j->u.str.len, content));
	case JSON_ARRAY: {
		struct tlist *l = tmpl_run_list_new(r, j->u.arr.n);

		for (i = 0; i < j->u.arr.n; i++)
			l->v[i] = r_from_json(r, j->u.arr.items[i], content,
			                      depth + 1);
		return tv_list(l);
	}
	case JSON_OBJECT: {
		struct tval d = {.k = V_DICT};

		d.u.d = tmpl_arena_alloc(&r->arena, sizeof(*d.u.d));
		for (i = 0; i < j->u.obj.n; i++) {
			const struct json_member *m = &j->u.obj.members[i];

			tmpl_run_dict_set(
			    r, d.u.d,
			    tv_str(
			        tmpl_run_str_new(r, m->key, m->klen, content)),
			    r_from_json(r, m->val, content, depth + 1));
		}
		return d;
	}
	}
	return tv_none();
}

/* ---------------------------------------------------------- predicates */

bool tmpl_run_truthy(struct trender *r, struct tval v)
{
	(void)r;
	switch (v.k) {
	case V_UNDEF:
	case V_NONE:
		return false;
	case V_BOOL:
		return v.u.b;
	case V_INT:
		return v.u.i != 0;
	case V_FLOAT:
		return v.u.f != 0;
	case V_STR:
		return v.u.s->n != 0;
	case V_LIST:
		return v.u.l->n != 0;
	case V_DICT:
		return v.u.d->n != 0;
	default:
		return true;
	}
}

static bool is_num(struct tval v)
{
	return v.k == V_BOOL || v.k == V_INT || v.k == V_FLOAT;
}

static double num_f(struct tval v)
{
	return v.k == V_FLOAT ? v.u.f : v.k == V_INT ? (double)v.u.i : v.u.b;
}

static int64_t num_i(struct tval v)
{
	return v.k == V_INT ? v.u.i : v.u.b;
}

bool tmpl_run_equal(struct tval a, struct tval b, int depth)
{
	size_t i;

	if (depth > MAX_VALUE_DEPTH)
		return false;
	if (is_num(a) && is_num(b)) {
		if (a.k != V_FLOAT && b.k != V_FLOAT)
			return num_i(a) == num_i(b);
		return num_f(a) == num_f(b);
	}
	if (a.k != b.k)
		return false;
	switch (a.k) {
	case V_UNDEF:
	case V_NONE:
		return true;
	case V_STR:
		return a.u.s->n == b.u.s->n &&
		       (a.u.s->n == 0 ||
		        memcmp(a.u.s->p, b.u.s->p, a.u.s->n) == 0);
	case V_LIST:
		if (a.tuple != b.tuple || a.u.l->n != b.u.l->n)
			return false;
		for (i = 0; i < a.u.l->n; i++)
			if (!tmpl_run_equal(a.u.l->v[i], b.u.l->v[i],
			                    depth + 1))
				return false;
		return true;
	case V_DICT:
		if (a.u.d->n != b.u.d->n)
			return false;
		for (i = 0; i < a.u.d->n; i++) {
			size_t j;
			bool ok = false;

			for (j = 0; j < b.u.d->n && !ok; j++)
				if (tmpl_run_equal(a.u.d->keys[i],
				                   b.u.d->keys[j], depth + 1))
					ok = tmpl_run_equal(a.u.d->vals[i],
					                    b.u.d->vals[j],
					                    depth + 1);
			if (!ok)
				return false;
		}
		return true;
	case V_NS:
		return a.u.d == b.u.d;
	case V_FUNC:
		return a.u.fn == b.u.fn;
	case V_MACRO:
		return a.u.m == b.u.m;
	case V_LOOP:
		return a.u.lp == b.u.lp;
	default:
		return false;
	}
}

bool tmpl_run_has_content(struct tval v, int depth)
{
	size_t i;

	if (depth > MAX_VALUE_DEPTH)
		return true;
	switch (v.k) {
	case V_STR:
		return v.u.s->nsp != 0;
	case V_LIST:
		for (i = 0; i < v.u.l->n; i++)
			if (tmpl_run_has_content(v.u.l->v[i], depth + 1))
				return true;
		return false;
	case V_DICT:
	case V_NS:
		for (i = 0; i < v.u.d->n; i++)
			if (tmpl_run_has_content(v.u.d->keys[i], depth + 1) ||
			    tmpl_run_has_content(v.u.d->vals[i], depth + 1))
				return true;
		return false;
	default:
		return false;
	}
}

/* ------------------------------------------------------- str() / repr() */

static void repr_into(struct trender *r, struct tsbuf *b, struct tval v,
                      bool quote, int depth);

/* Python repr of a str. */
static void repr_str(struct trender *r, struct tsbuf *b, const struct tstr *s)
{
	bool sq = memchr(s->p, '\'', s->n) != NULL;
	bool dq = memchr(s->p, '"', s->n) != NULL;
	char q = sq && !dq ? '"' : '\'';
	size_t i = 0, k;
	char esc[16];

	tsb_add(r, b, &q, 1);
	while (i < s->n) {
		uint32_t cp = tmpl_lib_u8dec(s->p + i, s->n - i, &k);

		if (cp == (uint32_t)q || cp == '\\') {
			tsb_add(r, b, "\\", 1);
			tsb_add(r, b, s->p + i, 1);
		} else if (cp == '\n') {
			tsb_cstr(r, b, "\\n");
		} else if (cp == '\r') {
			tsb_cstr(r, b, "\\r");
		} else if (cp == '\t') {
			tsb_cstr(r, b, "\\t");
		} else if (cp == UINT32_MAX) {
			snprintf(esc, sizeof(esc), "\\x%02x",
			         (unsigned char)s->p[i]);
			tsb_cstr(r, b, esc);
		} else if (cp < 0x20 || cp == 0x7f ||
		           (cp >= 0x80 && !tmpl_lib_isprint(cp))) {
			if (cp <= 0xff)
				snprintf(esc, sizeof(esc), "\\x%02x", cp);
			else if (cp <= 0xffff)
				snprintf(esc, sizeof(esc), "\\u%04x", cp);
			else
				snprintf(esc, sizeof(esc), "\\U%08x", cp);
			tsb_cstr(r, b, esc);
		} else {
			tsb_add(r, b, s->p + i, k);
		}
		i += k;
	}
	tsb_add(r, b, &q, 1);
}

static void repr_into(struct trender *r, struct tsbuf *b, struct tval v,
                      bool quote, int depth)
{
	char num[48];
	size_t i;

	if (depth > MAX_VALUE_DEPTH)
		tmpl_run_fail(r, TMPL_ELIMIT,
		              "value nested too deeply to print");
	switch (v.k) {
	case V_UNDEF:
		break;
	case V_NONE:
		tsb_cstr(r, b, "None");
		break;
	case V_BOOL:
		tsb_cstr(r, b, v.u.b ? "True" : "False");
		break;
	case V_INT:
		snprintf(num, sizeof(num), "%lld", (long long)v.u.i);
		tsb_cstr(r, b, num);
		break;
	case V_FLOAT:
		json_fmt_double(v.u.f, false, num, sizeof(num));
		tsb_cstr(r, b, num);
		break;
	case V_STR:
		if (quote)
			repr_str(r, b, v.u.s);
		else
			tsb_add(r, b, v.u.s->p, v.u.s->n);
		break;
	case V_LIST:
		tsb_cstr(r, b, v.tuple ? "(" : "[");
		for (i = 0; i < v.u.l->n; i++) {
			if (i)
				tsb_cstr(r, b, ", ");
			repr_into(r, b, v.u.l->v[i], true, depth + 1);
		}
		if (v.tuple && v.u.l->n == 1)
			tsb_cstr(r, b, ",");
		tsb_cstr(r, b, v.tuple ? ")" : "]");
		break;
	case V_DICT:
	case V_NS:
		tsb_cstr(r, b, v.k == V_NS ? "<Namespace {" : "{");
		for (i = 0; i < v.u.d->n; i++) {
			if (i)
				tsb_cstr(r, b, ", ");
			repr_into(r, b, v.u.d->keys[i], true, depth + 1);
			tsb_cstr(r, b, ": ");
			repr_into(r, b, v.u.d->vals[i], true, depth + 1);
		}
		tsb_cstr(r, b, v.k == V_NS ? "}>" : "}");
		break;
	case V_FUNC:
		snprintf(num, sizeof(num), "<built-in function %.20s>",
		         v.u.fn->name);
		tsb_cstr(r, b, num);
		break;
	case V_MACRO:
		tsb_cstr(r, b, "<Macro '");
		tsb_add(r, b, v.u.m->def->s ? v.u.m->def->s : "caller",
		        v.u.m->def->s ? v.u.m->def->sn : 6);
		tsb_cstr(r, b, "'>");
		break;
	case V_LOOP:
		snprintf(num, sizeof(num), "<LoopContext %zu/%zu>",
		         v.u.lp->i + 1, v.u.lp->items->n);
		tsb_cstr(r, b, num);
		break;
	}
}

struct tstr *tmpl_run_to_str(struct trender *r, struct tval v)
{
	struct tsbuf b = {0};

	if (v.k == V_STR)
		return v.u.s;
	repr_into(r, &b, v, false, 0);
	return tmpl_run_str_derived(r, b.p, b.n, tmpl_run_has_content(v, 0));
}

/* ------------------------------------------------------- scopes, names */

static struct tscope *scope_new(struct trender *r, struct tscope *parent)
{
	struct tscope *s = tmpl_arena_alloc(&r->arena, sizeof(*s));

	s->parent = parent;
	return s;
}

static void scope_set(struct trender *r, struct tscope *s, const char *name,
                      struct tval v)
{
	size_t i;

	for (i = 0; i < s->n; i++) {
		if (strcmp(s->names[i], name) == 0) {
			s->vals[i] = v;
			return;
		}
	}
	if (s->n == s->cap) {
		size_t ncap = s->cap ? s->cap * 2 : 2;
		const char **nn =
		    tmpl_arena_alloc(&r->arena, ncap * sizeof(*nn));
		struct tval *nv =
		    tmpl_arena_alloc(&r->arena, ncap * sizeof(*nv));

		if (s->n) {
			memcpy(nn, s->names, s->n * sizeof(*nn));
			memcpy(nv, s->vals, s->n * sizeof(*nv));
		}
		s->names = nn;
		s->vals = nv;
		s->cap = ncap;
	}
	s->names[s->n] = name;
	s->vals[s->n] = v;
	s->n++;
}

static struct tval lookup(struct trender *r, const char *name, size_t nlen)
{
	struct tscope *s;
	size_t i;
	bool found;
	struct tval v;

	for (s = r->scope; s; s = s->parent)
		for (i = s->n; i-- > 0;)
			if (strcmp(s->names[i], name) == 0)
				return s->vals[i];
	for (i = 0; i < r->globals->n; i++)
		if (strcmp(r->globals->names[i], name) == 0)
			return r->globals->vals[i];
	v = tmpl_lib_global(r, name, &found);
	if (found)
		return v;
	return r_undef(r, NULL, name, nlen);
}

/* ------------------------------------------------ attributes, subscripts */

static bool is_unsafe_method(struct tval obj, const char *name)
{
	static const char *const list_m[] = {"append", "extend", "insert",
	                                     "pop",    "remove", "reverse",
	                                     "sort",   "clear",  NULL};
	static const char *const dict_m[] = {"pop",    "popitem", "setdefault",
	                                     "update", "clear",   NULL};
	const char *const *m = obj.k == V_LIST && !obj.tuple ? list_m
	                       : obj.k == V_DICT             ? dict_m
	                                                     : NULL;

	for (; m && *m; m++)
		if (strcmp(*m, name) == 0)
			return true;
	return false;
}

static struct tval loop_attr(struct trender *r, struct tloop *lp,
                             const char *name, size_t nlen, bool *found)
{
	size_t n = lp->items->n, i = lp->i;

	*found = true;
	if (!strcmp(name, "index"))
		return tv_int((int64_t)i + 1);
	if (!strcmp(name, "index0"))
		return tv_int((int64_t)i);
	if (!strcmp(name, "revindex"))
		return tv_int((int64_t)(n - i));
	if (!strcmp(name, "revindex0"))
		return tv_int((int64_t)(n - i - 1));
	if (!strcmp(name, "first"))
		return tv_bool(i == 0);
	if (!strcmp(name, "last"))
		return tv_bool(i + 1 == n);
	if (!strcmp(name, "length"))
		return tv_int((int64_t)n);
	if (!strcmp(name, "depth"))
		return tv_int(1);
	if (!strcmp(name, "depth0"))
		return tv_int(0);
	if (!strcmp(name, "previtem"))
		return i ? lp->items->v[i - 1]
		         : tmpl_run_undef_hint(r, "there is no previous item");
	if (!strcmp(name, "nextitem"))
		return i + 1 < n
		           ? lp->items->v[i + 1]
		           : tmpl_run_undef_hint(r, "there is no next item");
	if (!strcmp(name, "cycle")) {
		struct tval self = {.k = V_LOOP, .u.lp = lp};

		return tmpl_lib_method(r, self, name, nlen, found);
	}
	*found = false;
	return tv_none();
}

static struct tval r_getattr(struct trender *r, struct tval obj,
                             const char *name, size_t nlen)
{
	bool found;
	struct tval v;

	if (obj.k == V_UNDEF)
		tmpl_run_undef_fail(r, obj);
	if (is_unsafe_method(obj, name)) {
		char *h = tmpl_arena_alloc(&r->arena, 128);

		snprintf(h, 128,
		         "access to attribute '%s' of '%s' object is "
		         "unsafe.",
		         name, tmpl_run_type_name(obj));
		return tmpl_run_undef_hint(r, h);
	}
	if (obj.k == V_LOOP) {
		v = loop_attr(r, obj.u.lp, name, nlen, &found);
		if (found)
			return v;
	} else if (obj.k == V_DICT || obj.k == V_STR || obj.k == V_LIST) {
		v = tmpl_lib_method(r, obj, name, nlen, &found);
		if (found)
			return v;
	}
	if (obj.k == V_DICT || obj.k == V_NS) {
		struct tstr key = {name, nlen, 0, NULL};

		v = tmpl_run_dict_get(obj, tv_str(&key), &found);
		if (found)
			return v;
	}
	return r_undef(r, r_obj_repr(obj), name, nlen);
}

/* Python index I into a sequence of N items, or -1 when out of range. */
static int64_t seq_index(int64_t i, size_t n)
{
	if (i < 0)
		i += (int64_t)n;
	if (i < 0 || (uint64_t)i >= n)
		return -1;
	return i;
}

struct tval tmpl_run_getitem(struct trender *r, struct tval obj,
                             struct tval key)
{
	bool found;
	struct tval v;

	if (obj.k == V_UNDEF)
		tmpl_run_undef_fail(r, obj);
	if (obj.k == V_DICT) {
		v = tmpl_run_dict_get(obj, key, &found);
		if (found)
			return v;
	}
	if ((obj.k == V_LIST || obj.k == V_STR) &&
	    (key.k == V_INT || key.k == V_BOOL)) {
		int64_t i;

		if (obj.k == V_LIST) {
			i = seq_index(num_i(key), obj.u.l->n);
			if (i >= 0)
				return obj.u.l->v[i];
		} else {
			i = seq_index(num_i(key), tmpl_run_u8len(obj.u.s));
			if (i >= 0) {
				size_t a = r_u8off(obj.u.s, (size_t)i), k;

				tmpl_lib_u8dec(obj.u.s->p + a, obj.u.s->n - a,
				               &k);
				return tv_str(
				    tmpl_run_str_sub(r, obj.u.s, a, k));
			}
		}
		return r_undef_idx(r, r_obj_repr(obj), num_i(key));
	}
	if (key.k == V_STR) {
		char *name = tmpl_arena_alloc(&r->arena, key.u.s->n + 1);

		memcpy(name, key.u.s->p, key.u.s->n);
		return r_getattr(r, obj, name, key.u.s->n);
	}
	if (key.k == V_INT)
		return r_undef_idx(r, r_obj_repr(obj), key.u.i);
	return tmpl_run_undef_hint(r, "invalid subscript");
}

/* Python slice bounds for N items (PySlice_AdjustIndices). */
static void slice_bounds(struct trender *r, struct tval *parts, size_t n,
                         int64_t *start, int64_t *stop, int64_t *step)
{
	int64_t len = (int64_t)n;
	int k;

	*step = 1;
	if (parts[2].k != V_NONE) {
		if (!is_num(parts[2]) || parts[2].k == V_FLOAT)
			tmpl_run_fail(r, TMPL_ERUNTIME,
			              "slice indices must be integers "
			              "or None");
		*step = num_i(parts[2]);
		if (*step == 0)
			tmpl_run_fail(r, TMPL_ERUNTIME,
			              "slice step cannot be zero");
	}
	for (k = 0; k < 2; k++) {
		int64_t *out = k ? stop : start, v;

		if (parts[k].k == V_NONE) {
			if (*step > 0)
				*out = k ? len : 0;
			else
				*out = k ? -1 : len - 1;
			continue;
		}
		if (!is_num(parts[k]) || parts[k].k == V_FLOAT)
			tmpl_run_fail(r, TMPL_ERUNTIME,
			              "slice indices must be integers "
			              "or None");
		v = num_i(parts[k]);
		if (v < 0) {
			v = v < -len ? -len - 1 : v; /* no overflow below */
			v += len;
			if (v < 0)
				v = *step < 0 ? -1 : 0;
		} else if (v >= len) {
			v = *step < 0 ? len - 1 : len;
		}
		*out = v;
	}
}

static struct tval do_slice(struct trender *r, struct tval obj,
                            struct tval *parts)
{
	int64_t start, stop, step, i;
	size_t n, cnt = 0;

	if (obj.k == V_UNDEF)
		tmpl_run_undef_fail(r, obj);
	if (obj.k != V_LIST && obj.k != V_STR)
		return tmpl_run_undef_hint(r, "object cannot be sliced");
	n = obj.k == V_LIST ? obj.u.l->n : tmpl_run_u8len(obj.u.s);
	slice_bounds(r, parts, n, &start, &stop, &step);
	for (i = start; step > 0 ? i < stop : i > stop; i += step)
		cnt++;
	if (obj.k == V_LIST) {
		struct tlist *l = tmpl_run_list_new(r, cnt);
		struct tval v;
		size_t k = 0;

		for (i = start; step > 0 ? i < stop : i > stop; i += step)
			l->v[k++] = obj.u.l->v[i];
		v = tv_list(l);
		v.tuple = obj.tuple;
		return v;
	}
	if (step == 1) {
		size_t a = r_u8off(obj.u.s, (size_t)start);
		size_t b =
		    r_u8off(obj.u.s, (size_t)(stop > start ? stop : start));

		return tv_str(tmpl_run_str_sub(r, obj.u.s, a, b - a));
	}
	{
		struct tsbuf b = {0};

		for (i = start; step > 0 ? i < stop : i > stop; i += step) {
			size_t a = r_u8off(obj.u.s, (size_t)i), k;

			tmpl_lib_u8dec(obj.u.s->p + a, obj.u.s->n - a, &k);
			tsb_add(r, &b, obj.u.s->p + a, k);
		}
		return tv_str(
		    tmpl_run_str_derived(r, b.p, b.n, obj.u.s->nsp != 0));
	}
}

struct tlist *tmpl_run_iter(struct trender *r, struct tval v)
{
	struct tlist *l;
	size_t i;

	switch (v.k) {
	case V_UNDEF:
		return tmpl_run_list_new(r, 0);
	case V_LIST:
		return v.u.l;
	case V_DICT:
		l = tmpl_run_list_new(r, v.u.d->n);
		for (i = 0; i < v.u.d->n; i++)
			l->v[i] = v.u.d->keys[i];
		return l;
	case V_STR: {
		size_t n = tmpl_run_u8len(v.u.s), a = 0, k;

		l = tmpl_run_list_new(r, n);
		for (i = 0; i < n; i++) {
			tmpl_lib_u8dec(v.u.s->p + a, v.u.s->n - a, &k);
			l->v[i] = tv_str(tmpl_run_str_sub(r, v.u.s, a, k));
			a += k;
		}
		return l;
	}
	default:
		tmpl_run_fail(r, TMPL_ERUNTIME, "'%s' object is not iterable",
		              tmpl_run_type_name(v));
	}
}

/* --------------------------------------------------------------- output */

static void out_add(struct trender *r, struct tout *o, const char *p, size_t n,
                    const struct tcspan *sp, size_t nsp)
{
	size_t i;

	if (!n)
		return;
	if (n > r->lim.max_output || o->n > r->lim.max_output - n)
		tmpl_run_fail(r, TMPL_ELIMIT, "output longer than %zu bytes",
		              r->lim.max_output);
	if (o->n + n > o->cap) {
		size_t ncap = o->cap ? o->cap * 2 : 256;
		char *np;

		while (ncap < o->n + n)
			ncap *= 2;
		np = tmpl_arena_alloc(&r->arena, ncap);
		if (o->n)
			memcpy(np, o->p, o->n);
		o->p = np;
		o->cap = ncap;
	}
	memcpy(o->p + o->n, p, n);
	for (i = 0; i < nsp; i++) {
		struct tcspan s = sp[i];

		s.off += o->n;
		if (o->nsp &&
		    o->sp[o->nsp - 1].off + o->sp[o->nsp - 1].len == s.off) {
			o->sp[o->nsp - 1].len += s.len;
			continue;
		}
		if (o->nsp == o->spcap) {
			size_t ncap = o->spcap ? o->spcap * 2 : 16;
			struct tcspan *ns =
			    tmpl_arena_alloc(&r->arena, ncap * sizeof(*ns));

			if (o->nsp)
				memcpy(ns, o->sp, o->nsp * sizeof(*ns));
			o->sp = ns;
			o->spcap = ncap;
		}
		o->sp[o->nsp++] = s;
	}
	o->n += n;
}

static void out_str(struct trender *r, const struct tstr *s)
{
	out_add(r, r->out, s->p, s->n, s->sp, s->nsp);
}

/* ------------------------------------------------------------ operators */

static struct tval arith(struct trender *r, int op, struct tval a,
                         struct tval b)
{
	if (a.k == V_UNDEF)
		tmpl_run_undef_fail(r, a);
	if (b.k == V_UNDEF)
		tmpl_run_undef_fail(r, b);
	if (op == '+' && a.k == V_STR && b.k == V_STR)
		return tv_str(tmpl_run_str_cat(r, a.u.s, b.u.s));
	if (op == '+' && a.k == V_LIST && b.k == V_LIST && a.tuple == b.tuple) {
		struct tlist *l = tmpl_run_list_new(r, a.u.l->n + b.u.l->n);
		struct tval v;

		if (a.u.l->n)
			memcpy(l->v, a.u.l->v, a.u.l->n * sizeof(*l->v));
		if (b.u.l->n)
			memcpy(l->v + a.u.l->n, b.u.l->v,
			       b.u.l->n * sizeof(*l->v));
		v = tv_list(l);
		v.tuple = a.tuple;
		return v;
	}
	if (op == '*' && ((a.k == V_STR && (b.k == V_INT || b.k == V_BOOL)) ||
	                  (b.k == V_STR && (a.k == V_INT || a.k == V_BOOL)))) {
		const struct tstr *s = a.k == V_STR ? a.u.s : b.u.s;
		int64_t k = a.k == V_STR ? num_i(b) : num_i(a);
		struct tstr *res = tmpl_run_str_new(r, "", 0, false);

		if (k > 0 && s->n && (uint64_t)k > r->lim.max_output / s->n)
			tmpl_run_fail(r, TMPL_ELIMIT,
			              "string repetition too long");
		for (; k > 0; k--)
			res = tmpl_run_str_cat(r, res, s);
		return tv_str(res);
	}
	if (!is_num(a) || !is_num(b)) {
		const char *sym = op == 'F' ? "//" : op == 'P' ? "**" : NULL;
		char o[2] = {(char)op, 0};

		if (op == '+' && a.k == V_STR)
			tmpl_run_fail(r, TMPL_ERUNTIME,
			              "can only concatenate str (not "
			              "\"%s\") to str",
			              tmpl_run_type_name(b));
		if (op == '+' && a.k == V_LIST)
			tmpl_run_fail(r, TMPL_ERUNTIME,
			              "can only concatenate list (not "
			              "\"%s\") to list",
			              tmpl_run_type_name(b));
		tmpl_run_fail(
		    r, TMPL_ERUNTIME,
		    "unsupported operand type(s) for %s: '%s' and '%s'",
		    sym ? sym : o, tmpl_run_type_name(a),
		    tmpl_run_type_name(b));
	}
	if (a.k != V_FLOAT && b.k != V_FLOAT && op != '/') {
		int64_t x = num_i(a), y = num_i(b), z;

		switch (op) {
		case '+':
			if (__builtin_add_overflow(x, y, &z))
				break;
			return tv_int(z);
		case '-':
			if (__builtin_sub_overflow(x, y, &z))
				break;
			return tv_int(z);
		case '*':
			if (__builtin_mul_overflow(x, y, &z))
				break;
			return tv_int(z);
		case 'F':
		case '%':
			if (y == 0)
				tmpl_run_fail(
				    r, TMPL_ERUNTIME,
				    op == 'F'
				        ? "integer division or modulo by zero"
				        : "integer modulo by zero");
			if (x == INT64_MIN && y == -1)
				break;
			z = x / y;
			if ((x % y != 0) && ((x < 0) != (y < 0)))
				z--;
			return tv_int(op == 'F' ? z : x - z * y);
		case 'P':
			if (y >= 0) {
				int64_t acc = 1;

				for (; y > 0; y--)
					if (__builtin_mul_overflow(acc, x,
					                           &acc))
						tmpl_run_fail(
						    r, TMPL_ERUNTIME,
						    "integer too large");
				return tv_int(acc);
			}
			return tv_float(pow((double)x, (double)y));
		}
		tmpl_run_fail(r, TMPL_ERUNTIME, "integer too large");
	}
	{
		double x = num_f(a), y = num_f(b);

		switch (op) {
		case '+':
			return tv_float(x + y);
		case '-':
			return tv_float(x - y);
		case '*':
			return tv_float(x * y);
		case '/':
			if (y == 0)
				tmpl_run_fail(r, TMPL_ERUNTIME,
				              "division by zero");
			return tv_float(x / y);
		case 'F':
			if (y == 0)
				tmpl_run_fail(r, TMPL_ERUNTIME,
				              "float floor division by zero");
			return tv_float(floor(x / y));
		case '%':
			if (y == 0)
				tmpl_run_fail(r, TMPL_ERUNTIME, "float modulo");
			{
				double m = fmod(x, y);

				if (m != 0 && ((m < 0) != (y < 0)))
					m += y;
				return tv_float(m);
			}
		case 'P':
			return tv_float(pow(x, y));
		}
	}
	tmpl_run_fail(r, TMPL_ERUNTIME, "bad operator");
}

/* Python ordering; returns <0, 0, >0. */
int tmpl_run_order(struct trender *r, int op, struct tval a, struct tval b,
                   int depth)
{
	static const char *names[] = {"<", ">", "<=", ">="};
	const char *sym = names[op == '<'   ? 0
	                        : op == '>' ? 1
	                        : op == 'l' ? 2
	                                    : 3];

	if (a.k == V_UNDEF)
		tmpl_run_undef_fail(r, a);
	if (b.k == V_UNDEF)
		tmpl_run_undef_fail(r, b);
	if (depth > MAX_VALUE_DEPTH)
		tmpl_run_fail(r, TMPL_ELIMIT,
		              "values nested too deeply to compare");
	if (is_num(a) && is_num(b)) {
		if (a.k != V_FLOAT && b.k != V_FLOAT)
			return num_i(a) < num_i(b) ? -1 : num_i(a) > num_i(b);
		return num_f(a) < num_f(b) ? -1 : num_f(a) > num_f(b);
	}
	if (a.k == V_STR && b.k == V_STR) {
		size_t n = a.u.s->n < b.u.s->n ? a.u.s->n : b.u.s->n;
		int c = n ? memcmp(a.u.s->p, b.u.s->p, n) : 0;

		if (c)
			return c;
		return a.u.s->n < b.u.s->n ? -1 : a.u.s->n > b.u.s->n;
	}
	if (a.k == V_LIST && b.k == V_LIST && a.tuple == b.tuple) {
		size_t i;

		for (i = 0; i < a.u.l->n && i < b.u.l->n; i++) {
			if (tmpl_run_equal(a.u.l->v[i], b.u.l->v[i], 0))
				continue;
			return tmpl_run_order(r, op, a.u.l->v[i], b.u.l->v[i],
			                      depth + 1);
		}
		return a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n;
	}
	tmpl_run_fail(r, TMPL_ERUNTIME,
	              "'%s' not supported between instances of '%s' and '%s'",
	              sym, tmpl_run_type_name(a), tmpl_run_type_name(b));
}

/* Python "a in b". */
bool tmpl_run_contains(struct trender *r, struct tval a, struct tval b)
{
	size_t i;

	switch (b.k) {
	case V_UNDEF:
		return false;
	case V_STR:
		if (a.k == V_UNDEF)
			tmpl_run_undef_fail(r, a);
		if (a.k != V_STR)
			tmpl_run_fail(r, TMPL_ERUNTIME,
			              "'in <string>' requires string as "
			              "left operand, not %s",
			              tmpl_run_type_name(a));
		if (a.u.s->n == 0)
			return true;
		if (a.u.s->n > b.u.s->n)
			return false;
		for (i = 0; i + a.u.s->n <= b.u.s->n; i++)
			if (memcmp(b.u.s->p + i, a.u.s->p, a.u.s->n) == 0)
				return true;
		return false;
	case V_LIST:
		for (i = 0; i < b.u.l->n; i++)
			if (tmpl_run_equal(a, b.u.l->v[i], 0))
				return true;
		return false;
	case V_DICT: {
		bool found;

		tmpl_run_dict_get(b, a, &found);
		return found;
	}
	default:
		tmpl_run_fail(r, TMPL_ERUNTIME,
		              "argument of type '%s' is not iterable",
		              tmpl_run_type_name(b));
	}
}

/* ------------------------------------------------------------ evaluation */

static void exec_body(struct trender *r, const struct node *body);
static struct tval r_eval(struct trender *r, const struct node *n);

/* Set position for error messages. */
static void at(struct trender *r, const struct node *n)
{
	r->line = n->line;
	r->col = n->col;
}

/* Evaluate the arguments of call-like node N. */
static void eval_args(struct trender *r, const struct node *n,
                      struct tval **args, struct tval **kv)
{
	size_t i;

	*args =
	    n->n ? tmpl_arena_alloc(&r->arena, n->n * sizeof(**args)) : NULL;
	*kv = n->nk ? tmpl_arena_alloc(&r->arena, n->nk * sizeof(**kv)) : NULL;
	for (i = 0; i < n->n; i++)
		(*args)[i] = r_eval(r, n->v[i]);
	for (i = 0; i < n->nk; i++)
		(*kv)[i] = r_eval(r, n->kv[i]);
}

/* Capture the output of BODY as a string. */
static struct tstr *capture(struct trender *r, const struct node *body)
{
	struct tout *saved = r->out, o = {0};
	struct tstr *s;

	r->out = &o;
	exec_body(r, body);
	r->out = saved;
	s = tmpl_arena_alloc(&r->arena, sizeof(*s));
	s->p = o.p ? o.p : "";
	s->n = o.n;
	s->sp = o.sp;
	s->nsp = o.nsp;
	return s;
}

/* Call macro M. */
static struct tval call_macro(struct trender *r, const struct tmacro *m,
                              struct tval *args, size_t nargs, const char **kn,
                              struct tval *kv, size_t nk)
{
	const struct node *def = m->def;
	struct tscope *saved = r->scope;
	struct tscope *s;
	struct tlist *varargs;
	struct tval kwargs = {.k = V_DICT};
	size_t i, j, nextra = nargs > def->n ? nargs - def->n : 0;
	struct tstr *out;
	int saved_line = r->line, saved_col = r->col;

	tmpl_run_step(r);
	if (r->depth >= r->lim.max_depth)
		tmpl_run_fail(r, TMPL_ELIMIT,
		              "macro calls nested deeper than %u",
		              r->lim.max_depth);
	s = scope_new(r, m->scope);
	kwargs.u.d = tmpl_arena_alloc(&r->arena, sizeof(*kwargs.u.d));
	varargs = tmpl_run_list_new(r, nextra);
	for (i = 0; i < nextra; i++)
		varargs->v[i] = args[def->n + i];
	r->scope = s;
	for (i = 0; i < def->n; i++) {
		const struct node *prm = def->v[i];
		struct tval v;
		bool set = false;

		if (i < nargs) {
			v = args[i];
			set = true;
		}
		for (j = 0; j < nk; j++) {
			if (strcmp(kn[j], prm->s) == 0) {
				v = kv[j];
				set = true;
			}
		}
		if (!set && prm->a)
			v = r_eval(r, prm->a);
		if (!set && !prm->a) {
			char *h = tmpl_arena_alloc(&r->arena, 96 + prm->sn);

			snprintf(h, 96 + prm->sn,
			         "parameter '%s' was not provided", prm->s);
			v = tmpl_run_undef_hint(r, h);
		}
		scope_set(r, s, prm->s, v);
	}
	for (j = 0; j < nk; j++) {
		bool is_param = false;

		for (i = 0; i < def->n; i++)
			if (strcmp(kn[j], def->v[i]->s) == 0)
				is_param = true;
		if (strcmp(kn[j], "caller") == 0)
			scope_set(r, s, "caller", kv[j]);
		else if (!is_param)
			tmpl_run_dict_set(r, kwargs.u.d,
			                  tv_str(tmpl_run_str_new(
			                      r, kn[j], strlen(kn[j]), false)),
			                  kv[j]);
	}
	scope_set(r, s, "varargs", tv_list(varargs));
	scope_set(r, s, "kwargs", kwargs);
	r->depth++;
	out = capture(r, def->b);
	r->depth--;
	r->scope = saved;
	r->line = saved_line;
	r->col = saved_col;
	return tv_str(out);
}

static struct tval r_call(struct trender *r, struct tval fn, struct tval *args,
                          size_t nargs, const char **kn, struct tval *kv,
                          size_t nk)
{
	if (fn.k == V_UNDEF)
		tmpl_run_undef_fail(r, fn);
	if (fn.k == V_FUNC)
		return tmpl_lib_call(r, fn.u.fn, args, nargs, kn, kv, nk);
	if (fn.k == V_MACRO)
		return call_macro(r, fn.u.m, args, nargs, kn, kv, nk);
	tmpl_run_fail(r, TMPL_ERUNTIME, "'%s' object is not callable",
	              tmpl_run_type_name(fn));
}

/* Apply the filter node F (operand V). */
static struct tval apply_filter(struct trender *r, const struct node *f,
                                struct tval v)
{
	struct tval *args, *kv;

	eval_args(r, f, &args, &kv);
	at(r, f);
	if (f->unknown)
		tmpl_run_fail(r, TMPL_ERUNTIME, "No filter named '%s' found.",
		              f->s);
	return tmpl_lib_filter(r, f->s, v, args, f->n, f->kn, kv, f->nk);
}

static struct tval r_eval(struct trender *r, const struct node *n)
{
	struct tval a, b;
	size_t i;

	switch (n->k) {
	case N_LIT:
		return n->lit;
	case N_NAME:
		return lookup(r, n->s, n->sn);
	case N_ATTR:
		a = r_eval(r, n->a);
		at(r, n);
		return r_getattr(r, a, n->s, n->sn);
	case N_ITEM:
		a = r_eval(r, n->a);
		b = r_eval(r, n->b);
		at(r, n);
		return tmpl_run_getitem(r, a, b);
	case N_SLICE: {
		struct tval parts[3];

		a = r_eval(r, n->a);
		parts[0] = n->b ? r_eval(r, n->b) : tv_none();
		parts[1] = n->c ? r_eval(r, n->c) : tv_none();
		parts[2] = n->d ? r_eval(r, n->d) : tv_none();
		at(r, n);
		return do_slice(r, a, parts);
	}
	case N_CALL: {
		struct tval *args, *kv;

		a = r_eval(r, n->a);
		eval_args(r, n, &args, &kv);
		at(r, n);
		return r_call(r, a, args, n->n, n->kn, kv, n->nk);
	}
	case N_FILTER:
		a = r_eval(r, n->a);
		return apply_filter(r, n, a);
	case N_TEST: {
		struct tval *args, *kv;
		bool res;

		a = r_eval(r, n->a);
		eval_args(r, n, &args, &kv);
		at(r, n);
		if (n->unknown)
			tmpl_run_fail(r, TMPL_ERUNTIME,
			              "No test named '%s' found.", n->s);
		res = tmpl_lib_test(r, n->s, a, args, n->n);
		return tv_bool(n->neg ? !res : res);
	}
	case N_NEG:
	case N_POS:
		a = r_eval(r, n->a);
		at(r, n);
		if (a.k == V_UNDEF)
			tmpl_run_undef_fail(r, a);
		if (!is_num(a))
			tmpl_run_fail(r, TMPL_ERUNTIME,
			              "bad operand type for unary %c: "
			              "'%s'",
			              n->k == N_NEG ? '-' : '+',
			              tmpl_run_type_name(a));
		if (n->k == N_POS)
			return a.k == V_BOOL ? tv_int(a.u.b) : a;
		if (a.k == V_FLOAT)
			return tv_float(-a.u.f);
		if (num_i(a) == INT64_MIN)
			tmpl_run_fail(r, TMPL_ERUNTIME, "integer too large");
		return tv_int(-num_i(a));
	case N_NOT:
		return tv_bool(!tmpl_run_truthy(r, r_eval(r, n->a)));
	case N_AND:
		a = r_eval(r, n->a);
		return tmpl_run_truthy(r, a) ? r_eval(r, n->b) : a;
	case N_OR:
		a = r_eval(r, n->a);
		return tmpl_run_truthy(r, a) ? a : r_eval(r, n->b);
	case N_BIN:
		a = r_eval(r, n->a);
		b = r_eval(r, n->b);
		at(r, n);
		if (n->op == '~')
			return tv_str(tmpl_run_str_cat(r, tmpl_run_to_str(r, a),
			                               tmpl_run_to_str(r, b)));
		return arith(r, n->op, a, b);
	case N_CMP:
		a = r_eval(r, n->v[0]);
		for (i = 1; i < n->n; i++) {
			bool ok;
			int op = n->ops[i - 1];

			b = r_eval(r, n->v[i]);
			at(r, n);
			switch (op) {
			case 'e':
				ok = tmpl_run_equal(a, b, 0);
				break;
			case 'n':
				ok = !tmpl_run_equal(a, b, 0);
				break;
			case 'i':
				ok = tmpl_run_contains(r, a, b);
				break;
			case 'I':
				ok = !tmpl_run_contains(r, a, b);
				break;
			default: {
				int c = tmpl_run_order(r, op, a, b, 0);

				ok = op == '<'   ? c < 0
				     : op == '>' ? c > 0
				     : op == 'l' ? c <= 0
				                 : c >= 0;
			}
			}
			if (!ok)
				return tv_bool(false);
			a = b;
		}
		return tv_bool(true);
	case N_COND:
		if (tmpl_run_truthy(r, r_eval(r, n->a)))
			return r_eval(r, n->b);
		if (n->c)
			return r_eval(r, n->c);
		return tmpl_run_undef_hint(
		    r, "the inline if-expression evaluated to "
		       "false and no else section was defined.");
	case N_LIST:
	case N_TUPLE: {
		struct tlist *l = tmpl_run_list_new(r, n->n);

		for (i = 0; i < n->n; i++)
			l->v[i] = r_eval(r, n->v[i]);
		a = tv_list(l);
		a.tuple = n->k == N_TUPLE;
		return a;
	}
	case N_DICT:
		a.k = V_DICT;
		a.tuple = false;
		a.u.d = tmpl_arena_alloc(&r->arena, sizeof(*a.u.d));
		for (i = 0; i < n->n; i++) {
			struct tval k = r_eval(r, n->v[i]);

			tmpl_run_dict_set(r, a.u.d, k, r_eval(r, n->kv[i]));
		}
		return a;
	default:
		at(r, n);
		tmpl_run_fail(r, TMPL_ERUNTIME, "not an expression");
	}
}

/* ------------------------------------------------------------ statements */

/* Bind assignment target T to V in scope S. */
static void assign(struct trender *r, struct tscope *s, const struct node *t,
                   struct tval v)
{
	size_t i;

	if (t->k == N_NAME) {
		scope_set(r, s, t->s, v);
		return;
	}
	if (t->k == N_ATTR) {
		struct tval ns = lookup(r, t->a->s, t->a->sn);

		at(r, t);
		if (ns.k != V_NS)
			tmpl_run_fail(r, TMPL_ERUNTIME,
			              "cannot assign attribute on "
			              "non-namespace object");
		tmpl_run_dict_set(
		    r, ns.u.d, tv_str(tmpl_run_str_new(r, t->s, t->sn, false)),
		    v);
		return;
	}
	/* tuple unpacking */
	{
		struct tlist *l;

		at(r, t);
		l = tmpl_run_iter(r, v);
		if (l->n < t->n)
			tmpl_run_fail(r, TMPL_ERUNTIME,
			              "not enough values to unpack "
			              "(expected %zu, got %zu)",
			              t->n, l->n);
		if (l->n > t->n)
			tmpl_run_fail(r, TMPL_ERUNTIME,
			              "too many values to unpack "
			              "(expected %zu)",
			              t->n);
		for (i = 0; i < t->n; i++)
			assign(r, s, t->v[i], l->v[i]);
	}
}

static void exec_for(struct trender *r, const struct node *n)
{
	struct tscope *saved = r->scope;
	struct tlist *items;
	struct tloop *lp;
	struct tval loopv = {.k = V_LOOP};
	size_t i;

	items = tmpl_run_iter(r, r_eval(r, n->b));
	at(r, n);
	if (n->c) {
		struct tlist *f = tmpl_run_list_new(r, items->n);
		size_t k = 0;

		for (i = 0; i < items->n; i++) {
			tmpl_run_step(r);
			r->scope = scope_new(r, saved);
			assign(r, r->scope, n->a, items->v[i]);
			if (tmpl_run_truthy(r, r_eval(r, n->c)))
				f->v[k++] = items->v[i];
		}
		f->n = k;
		items = f;
		r->scope = saved;
	}
	lp = tmpl_arena_alloc(&r->arena, sizeof(*lp));
	lp->items = items;
	loopv.u.lp = lp;
	for (i = 0; i < items->n; i++) {
		tmpl_run_step(r);
		lp->i = i;
		r->scope = scope_new(r, saved);
		scope_set(r, r->scope, "loop", loopv);
		assign(r, r->scope, n->a, items->v[i]);
		exec_body(r, n->d);
		if (r->ctl == 1) {
			r->ctl = 0;
			break;
		}
		r->ctl = 0;
	}
	r->scope = saved;
	if (items->n == 0 && n->e)
		exec_body(r, n->e);
}

static void exec_stmt(struct trender *r, const struct node *n)
{
	switch (n->k) {
	case N_TEXT:
		out_add(r, r->out, n->s, n->sn, NULL, 0);
		break;
	case N_OUT: {
		struct tval v = r_eval(r, n->a);

		at(r, n);
		out_str(r, tmpl_run_to_str(r, v));
		break;
	}
	case N_IF: {
		const struct node *c = n;

		while (c && c->k == N_IF) {
			if (tmpl_run_truthy(r, r_eval(r, c->a))) {
				exec_body(r, c->b);
				return;
			}
			c = c->c;
		}
		if (c)
			exec_body(r, c);
		break;
	}
	case N_FOR:
		exec_for(r, n);
		break;
	case N_SET:
		assign(r, r->scope, n->a, r_eval(r, n->b));
		break;
	case N_SETBLOCK: {
		struct tval v = tv_str(capture(r, n->b));
		size_t i;

		for (i = 0; i < n->n; i++)
			v = apply_filter(r, n->v[i], v);
		assign(r, r->scope, n->a, v);
		break;
	}
	case N_FILTERBLOCK: {
		struct tval v = tv_str(capture(r, n->b));
		size_t i;

		for (i = 0; i < n->n; i++)
			v = apply_filter(r, n->v[i], v);
		out_str(r, tmpl_run_to_str(r, v));
		break;
	}
	case N_MACRO: {
		struct tval v = {.k = V_MACRO};

		v.u.m = tmpl_arena_alloc(&r->arena, sizeof(*v.u.m));
		v.u.m->def = n;
		v.u.m->scope = r->scope;
		scope_set(r, r->scope, n->s, v);
		break;
	}
	case N_CALLBLOCK: {
		const struct node *c = n->a;
		struct tval fn, *args, *kv, caller = {.k = V_MACRO};
		const char **kn;
		size_t i;

		caller.u.m = tmpl_arena_alloc(&r->arena, sizeof(*caller.u.m));
		caller.u.m->def = n;
		caller.u.m->scope = r->scope;
		fn = r_eval(r, c->a);
		eval_args(r, c, &args, &kv);
		kn = tmpl_arena_alloc(&r->arena, (c->nk + 1) * sizeof(*kn));
		{
			struct tval *kv2 = tmpl_arena_alloc(
			    &r->arena, (c->nk + 1) * sizeof(*kv2));

			for (i = 0; i < c->nk; i++) {
				kn[i] = c->kn[i];
				kv2[i] = kv[i];
			}
			kn[c->nk] = "caller";
			kv2[c->nk] = caller;
			at(r, n);
			out_str(r,
			        tmpl_run_to_str(r, r_call(r, fn, args, c->n, kn,
			                                  kv2, c->nk + 1)));
		}
		break;
	}
	case N_BREAK:
		r->ctl = 1;
		break;
	case N_CONTINUE:
		r->ctl = 2;
		break;
	case N_BODY:
		exec_body(r, n);
		break;
	default:
		at(r, n);
		tmpl_run_fail(r, TMPL_ERUNTIME, "not a statement");
	}
}

static void exec_body(struct trender *r, const struct node *body)
{
	size_t i;

	for (i = 0; i < body->n && !r->ctl; i++)
		exec_stmt(r, body->v[i]);
}

/* ---------------------------------------------------------- entry point */

/* Define global NAME (a constant string) as V. */
static void def_global(struct trender *r, const char *name, struct tval v)
{
	scope_set(r, r->globals, name, v);
}

int tmpl_render(const struct tmpl *t, const struct tmpl_ctx *ctx, char **out,
                size_t *outlen, struct tmpl_span **spans, size_t *nspans,
                char *err, size_t errlen)
{
	struct trender *volatile r;
	struct tout top = {0};
	size_t i;
	int code;

	*out = NULL;
	*outlen = 0;
	if (spans) {
		*spans = NULL;
		*nspans = 0;
	}
	if (err && errlen)
		err[0] = '\0';
	r = calloc(1, sizeof(*r));
	if (!r) {
		if (err && errlen)
			snprintf(err, errlen, "out of memory");
		return TMPL_ENOMEM;
	}
	r->ctx = ctx;
	r->fail.err = err;
	r->fail.errlen = errlen;
	r->arena.fail = &r->fail;
	if (ctx->limits)
		r->lim = *ctx->limits;
	if (!r->lim.max_output)
		r->lim.max_output = DEF_MAX_OUTPUT;
	if (!r->lim.max_memory)
		r->lim.max_memory = DEF_MAX_MEMORY;
	if (!r->lim.max_depth)
		r->lim.max_depth = DEF_MAX_DEPTH;
	if (!r->lim.max_steps)
		r->lim.max_steps = DEF_MAX_STEPS;
	r->arena.max = r->lim.max_memory;
	r->arena.line = &r->line;
	r->arena.col = &r->col;
	if (setjmp(r->fail.jb)) {
		code = r->fail.code;
		goto done;
	}
	r->globals = scope_new(r, NULL);
	r->root = scope_new(r, NULL);
	r->scope = r->root;
	r->out = &top;
	def_global(r, "messages",
	           ctx->messages ? r_from_json(r, ctx->messages, true, 0)
	                         : tv_list(tmpl_run_list_new(r, 0)));
	def_global(r, "add_generation_prompt",
	           tv_bool(ctx->add_generation_prompt));
	def_global(r, "bos_token",
	           tv_str(tmpl_run_str_new(
	               r, ctx->bos_token ? ctx->bos_token : "",
	               ctx->bos_token ? strlen(ctx->bos_token) : 0, false)));
	def_global(r, "eos_token",
	           tv_str(tmpl_run_str_new(
	               r, ctx->eos_token ? ctx->eos_token : "",
	               ctx->eos_token ? strlen(ctx->eos_token) : 0, false)));
	def_global(r, "tools",
	           ctx->tools ? r_from_json(r, ctx->tools, true, 0)
	                      : tv_none());
	def_global(r, "documents", tv_none());
	for (i = 0; i < ctx->nvars; i++) {
		const struct tmpl_var *v = &ctx->vars[i];
		size_t nl = strlen(v->name);
		char *name = tmpl_arena_alloc(&r->arena, nl + 1);

		memcpy(name, v->name, nl);
		def_global(r, name,
		           v->value ? r_from_json(r, v->value, v->untrusted, 0)
		                    : tv_none());
	}
	exec_body(r, t->root);
	/* hand the result over in malloc'd memory */
	*out = malloc(top.n + 1);
	if (!*out) {
		if (err && errlen)
			snprintf(err, errlen, "out of memory");
		code = TMPL_ENOMEM;
		goto done;
	}
	if (top.n)
		memcpy(*out, top.p, top.n);
	(*out)[top.n] = '\0';
	*outlen = top.n;
	if (spans) {
		size_t k = 0, pos = 0, cap = 2 * top.nsp + 1;
		struct tmpl_span *sp = malloc(cap * sizeof(*sp));

		if (!sp) {
			free(*out);
			*out = NULL;
			if (err && errlen)
				if (err && errlen)
					snprintf(err, errlen, "out of memory");
			code = TMPL_ENOMEM;
			goto done;
		}
		for (i = 0; i < top.nsp; i++) {
			if (top.sp[i].off > pos)
				sp[k++] = (struct tmpl_span){
				    pos, top.sp[i].off - pos, false};
			sp[k++] = (struct tmpl_span){top.sp[i].off,
			                             top.sp[i].len, true};
			pos = top.sp[i].off + top.sp[i].len;
		}
		if (top.n > pos)
			sp[k++] = (struct tmpl_span){pos, top.n - pos, false};
		*spans = sp;
		*nspans = k;
	}
	code = TMPL_OK;
done:
	tmpl_arena_free(&r->arena);
	free(r);
	return code;
}

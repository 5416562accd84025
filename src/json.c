/*
 * json.c - JSON parser, value model and Python-compatible serializer.
 * See json.h for the design notes.
 */
#include "json.h"

#include "utf8.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- values */

/* A zeroed node of type T, or NULL. */
static struct json_value *json_alloc(enum json_type t)
{
	struct json_value *v = calloc(1, sizeof(*v));

	if (v)
		v->type = t;
	return v;
}

struct json_value *json_new_null(void)
{
	return json_alloc(JSON_NULL);
}

struct json_value *json_new_bool(bool b)
{
	struct json_value *v = json_alloc(JSON_BOOL);

	if (v)
		v->u.b = b;
	return v;
}

struct json_value *json_new_int(int64_t i)
{
	struct json_value *v = json_alloc(JSON_INT);

	if (v)
		v->u.i = i;
	return v;
}

struct json_value *json_new_float(double f)
{
	struct json_value *v = json_alloc(JSON_FLOAT);

	if (v)
		v->u.f = f;
	return v;
}

struct json_value *json_new_string(const char *s, size_t len)
{
	struct json_value *v;

	if (len == SIZE_MAX)
		return NULL;
	v = json_alloc(JSON_STRING);
	if (!v)
		return NULL;
	v->u.str.ptr = malloc(len + 1);
	if (!v->u.str.ptr) {
		free(v);
		return NULL;
	}
	if (len)
		memcpy(v->u.str.ptr, s, len);
	v->u.str.ptr[len] = '\0';
	v->u.str.len = len;
	return v;
}

struct json_value *json_new_array(void)
{
	return json_alloc(JSON_ARRAY);
}

struct json_value *json_new_object(void)
{
	return json_alloc(JSON_OBJECT);
}

void json_free(struct json_value *v)
{
	size_t i;

	if (!v)
		return;
	switch (v->type) {
	case JSON_STRING:
		free(v->u.str.ptr);
		break;
	case JSON_ARRAY:
		for (i = 0; i < v->u.arr.n; i++)
			json_free(v->u.arr.items[i]);
		free(v->u.arr.items);
		break;
	case JSON_OBJECT:
		for (i = 0; i < v->u.obj.n; i++) {
			free(v->u.obj.members[i].key);
			json_free(v->u.obj.members[i].val);
		}
		free(v->u.obj.members);
		break;
	default:
		break;
	}
	free(v);
}

/* Make room for one more element of SIZE bytes in *P (N used, *CAP). */
static int json_grow(void **p, size_t n, size_t *cap, size_t size)
{
	size_t ncap;
	void *np;

	if (n < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 4;
	if (ncap > SIZE_MAX / size)
		return -1;
	np = realloc(*p, ncap * size);
	if (!np)
		return -1;
	*p = np;
	*cap = ncap;
	return 0;
}

int json_array_push(struct json_value *a, struct json_value *v)
{
	if (!a || a->type != JSON_ARRAY || !v ||
	    json_grow((void **)&a->u.arr.items, a->u.arr.n, &a->u.arr.cap,
	              sizeof(*a->u.arr.items))) {
		json_free(v);
		return -1;
	}
	a->u.arr.items[a->u.arr.n++] = v;
	return 0;
}

int json_object_set(struct json_value *o, const char *key, size_t klen,
                    struct json_value *v)
{
	struct json_member *m;
	size_t i;

	if (!o || o->type != JSON_OBJECT || !v || klen == SIZE_MAX)
		goto fail;
	for (i = 0; i < o->u.obj.n; i++) {
		m = &o->u.obj.members[i];
		if (m->klen == klen && memcmp(m->key, key, klen) == 0) {
			json_free(m->val);
			m->val = v;
			return 0;
		}
	}
	if (json_grow((void **)&o->u.obj.members, o->u.obj.n, &o->u.obj.cap,
	              sizeof(*o->u.obj.members)))
		goto fail;
	m = &o->u.obj.members[o->u.obj.n];
	m->key = malloc(klen + 1);
	if (!m->key)
		goto fail;
	if (klen)
		memcpy(m->key, key, klen);
	m->key[klen] = '\0';
	m->klen = klen;
	m->val = v;
	o->u.obj.n++;
	return 0;
fail:
	json_free(v);
	return -1;
}

const struct json_value *json_object_get(const struct json_value *o,
                                         const char *key)
{
	size_t i, klen = strlen(key);

	if (!o || o->type != JSON_OBJECT)
		return NULL;
	for (i = 0; i < o->u.obj.n; i++)
		if (o->u.obj.members[i].klen == klen &&
		    memcmp(o->u.obj.members[i].key, key, klen) == 0)
			return o->u.obj.members[i].val;
	return NULL;
}

struct json_value *json_clone(const struct json_value *v)
{
	struct json_value *c = NULL;
	size_t i;

	switch (v->type) {
	case JSON_NULL:
		return json_new_null();
	case JSON_BOOL:
		return json_new_bool(v->u.b);
	case JSON_INT:
		return json_new_int(v->u.i);
	case JSON_FLOAT:
		return json_new_float(v->u.f);
	case JSON_STRING:
		return json_new_string(v->u.str.ptr, v->u.str.len);
	case JSON_ARRAY:
		c = json_new_array();
		for (i = 0; c && i < v->u.arr.n; i++) {
			if (json_array_push(c, json_clone(v->u.arr.items[i]))) {
				json_free(c);
				return NULL;
			}
		}
		return c;
	case JSON_OBJECT:
		c = json_new_object();
		for (i = 0; c && i < v->u.obj.n; i++) {
			const struct json_member *m = &v->u.obj.members[i];

			if (json_object_set(c, m->key, m->klen,
			                    json_clone(m->val))) {
				json_free(c);
				return NULL;
			}
		}
		return c;
	}
	return NULL;
}

/* ---------------------------------------------------------------- parser */

struct json_parser {
	const char *s; /* input */
	size_t len;    /* input bytes */
	size_t pos;    /* next byte */
	char *err;     /* message buffer */
	size_t errlen; /* its size */
	int failed;    /* an error was written */
};

/* Record an error at the current position: "line L, column C: ...". */
static void jp_fail(struct json_parser *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void jp_fail(struct json_parser *p, const char *fmt, ...)
{
	size_t i, line = 1, col = 1;
	va_list ap;
	int n;

	if (p->failed)
		return;
	p->failed = 1;
	if (!p->err || !p->errlen)
		return;
	for (i = 0; i < p->pos && i < p->len; i++) {
		if (p->s[i] == '\n') {
			line++;
			col = 1;
		} else {
			col++;
		}
	}
	n = snprintf(p->err, p->errlen, "line %zu, column %zu: ", line, col);
	if (n < 0 || (size_t)n >= p->errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
	va_end(ap);
}

/* Skip JSON whitespace. */
static void jp_ws(struct json_parser *p)
{
	while (p->pos < p->len &&
	       (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' ||
	        p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
		p->pos++;
}

/* Append code point CP as UTF-8 to B. */
static int jp_put_utf8(struct json_buf *b, uint32_t cp)
{
	char u[4];

	return json_buf_add(b, u, utf8_put(cp, u));
}

/* Four hex digits at p->pos; -1 on error. */
static long jp_hex4(struct json_parser *p)
{
	long v = 0;
	int i;

	if (p->len - p->pos < 4)
		return -1;
	for (i = 0; i < 4; i++) {
		char c = p->s[p->pos + (size_t)i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	p->pos += 4;
	return v;
}

/* Parse a string literal (p->pos at the opening quote) into B. */
static int jp_string(struct json_parser *p, struct json_buf *b)
{
	p->pos++;
	for (;;) {
		unsigned char c;
		size_t start = p->pos;

		while (p->pos < p->len && (unsigned char)p->s[p->pos] >= 0x20 &&
		       p->s[p->pos] != '"' && p->s[p->pos] != '\\' &&
		       (unsigned char)p->s[p->pos] < 0x80)
			p->pos++;
		if (p->pos > start &&
		    json_buf_add(b, p->s + start, p->pos - start))
			goto nomem;
		if (p->pos >= p->len) {
			jp_fail(p, "unterminated string");
			return -1;
		}
		c = (unsigned char)p->s[p->pos];
		if (c == '"') {
			p->pos++;
			return 0;
		}
		if (c >= 0x80) {
			size_t k =
			    utf8_valid_len((const unsigned char *)p->s + p->pos,
			                   p->len - p->pos);

			if (!k) {
				jp_fail(p, "invalid UTF-8 in string");
				return -1;
			}
			if (json_buf_add(b, p->s + p->pos, k))
				goto nomem;
			p->pos += k;
			continue;
		}
		if (c < 0x20) {
			jp_fail(p, "control character 0x%02x in string", c);
			return -1;
		}
		/* backslash */
		p->pos++;
		if (p->pos >= p->len) {
			jp_fail(p, "unterminated string");
			return -1;
		}
		c = (unsigned char)p->s[p->pos++];
		{
			const char *esc = "\"\"\\\\//b\bf\fn\nr\rt\t";
			const char *e;
			long cp, lo;

			for (e = esc; *e; e += 2)
				if (*e == (char)c)
					break;
			if (*e) {
				if (json_buf_add(b, e + 1, 1))
					goto nomem;
				continue;
			}
			if (c != 'u') {
				p->pos--;
				jp_fail(p, "invalid escape '\\%c'", c);
				return -1;
			}
			cp = jp_hex4(p);
			if (cp < 0) {
				jp_fail(p, "invalid \\u escape");
				return -1;
			}
			if (cp >= 0xd800 && cp <= 0xdbff) {
				if (p->len - p->pos < 6 ||
				    p->s[p->pos] != '\\' ||
				    p->s[p->pos + 1] != 'u') {
					jp_fail(p, "lone surrogate \\u%04lx",
					        cp);
					return -1;
				}
				p->pos += 2;
				lo = jp_hex4(p);
				if (lo < 0xdc00 || lo > 0xdfff) {
					jp_fail(p, "lone surrogate \\u%04lx",
					        cp);
					return -1;
				}
				cp = 0x10000 + ((cp - 0xd800) << 10) +
				     (lo - 0xdc00);
			} else if (cp >= 0xdc00 && cp <= 0xdfff) {
				jp_fail(p, "lone surrogate \\u%04lx", cp);
				return -1;
			}
			if (jp_put_utf8(b, (uint32_t)cp))
				goto nomem;
		}
	}
nomem:
	jp_fail(p, "out of memory");
	return -1;
}

/* Parse a number at p->pos. */
static struct json_value *jp_number(struct json_parser *p)
{
	size_t start = p->pos;
	int is_float = 0;
	char tmp[64], *buf = tmp, *end;
	size_t n;
	struct json_value *v;

	if (p->s[p->pos] == '-')
		p->pos++;
	if (p->pos < p->len && p->s[p->pos] == '0') {
		p->pos++;
	} else if (p->pos < p->len && p->s[p->pos] >= '1' &&
	           p->s[p->pos] <= '9') {
		while (p->pos < p->len && p->s[p->pos] >= '0' &&
		       p->s[p->pos] <= '9')
			p->pos++;
	} else {
		jp_fail(p, "invalid number");
		return NULL;
	}
	if (p->pos < p->len && p->s[p->pos] == '.') {
		is_float = 1;
		p->pos++;
		if (p->pos >= p->len || p->s[p->pos] < '0' ||
		    p->s[p->pos] > '9') {
			jp_fail(p, "digit expected after '.'");
			return NULL;
		}
		while (p->pos < p->len && p->s[p->pos] >= '0' &&
		       p->s[p->pos] <= '9')
			p->pos++;
	}
	if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
		is_float = 1;
		p->pos++;
		if (p->pos < p->len &&
		    (p->s[p->pos] == '+' || p->s[p->pos] == '-'))
			p->pos++;
		if (p->pos >= p->len || p->s[p->pos] < '0' ||
		    p->s[p->pos] > '9') {
			jp_fail(p, "digit expected in exponent");
			return NULL;
		}
		while (p->pos < p->len && p->s[p->pos] >= '0' &&
		       p->s[p->pos] <= '9')
			p->pos++;
	}
	n = p->pos - start;
	if (n >= sizeof(tmp)) {
		buf = malloc(n + 1);
		if (!buf) {
			jp_fail(p, "out of memory");
			return NULL;
		}
	}
	memcpy(buf, p->s + start, n);
	buf[n] = '\0';
	errno = 0;
	if (!is_float) {
		long long ll = strtoll(buf, &end, 10);

		if (errno == 0) {
			v = json_new_int((int64_t)ll);
			goto done;
		}
	}
	v = json_new_float(strtod(buf, &end));
done:
	if (buf != tmp)
		free(buf);
	if (!v)
		jp_fail(p, "out of memory");
	return v;
}

static struct json_value *jp_value(struct json_parser *p, int depth);

/* Parse an array (p->pos at '['). */
static struct json_value *jp_array(struct json_parser *p, int depth)
{
	struct json_value *a = json_new_array(), *v;

	if (!a) {
		jp_fail(p, "out of memory");
		return NULL;
	}
	p->pos++;
	jp_ws(p);
	if (p->pos < p->len && p->s[p->pos] == ']') {
		p->pos++;
		return a;
	}
	for (;;) {
		v = jp_value(p, depth + 1);
		if (!v)
			goto fail;
		if (json_array_push(a, v)) {
			jp_fail(p, "out of memory");
			goto fail;
		}
		jp_ws(p);
		if (p->pos < p->len && p->s[p->pos] == ',') {
			p->pos++;
			continue;
		}
		if (p->pos < p->len && p->s[p->pos] == ']') {
			p->pos++;
			return a;
		}
		jp_fail(p, "',' or ']' expected");
		goto fail;
	}
fail:
	json_free(a);
	return NULL;
}

/* Parse an object (p->pos at '{'). */
static struct json_value *jp_object(struct json_parser *p, int depth)
{
	struct json_value *o = json_new_object(), *v;
	struct json_buf key = {0};

	if (!o) {
		jp_fail(p, "out of memory");
		return NULL;
	}
	p->pos++;
	jp_ws(p);
	if (p->pos < p->len && p->s[p->pos] == '}') {
		p->pos++;
		return o;
	}
	for (;;) {
		jp_ws(p);
		if (p->pos >= p->len || p->s[p->pos] != '"') {
			jp_fail(p, "string key expected");
			goto fail;
		}
		key.len = 0;
		if (jp_string(p, &key))
			goto fail;
		jp_ws(p);
		if (p->pos >= p->len || p->s[p->pos] != ':') {
			jp_fail(p, "':' expected");
			goto fail;
		}
		p->pos++;
		v = jp_value(p, depth + 1);
		if (!v)
			goto fail;
		if (json_object_set(o, key.ptr ? key.ptr : "", key.len, v)) {
			jp_fail(p, "out of memory");
			goto fail;
		}
		jp_ws(p);
		if (p->pos < p->len && p->s[p->pos] == ',') {
			p->pos++;
			continue;
		}
		if (p->pos < p->len && p->s[p->pos] == '}') {
			p->pos++;
			free(key.ptr);
			return o;
		}
		jp_fail(p, "',' or '}' expected");
		goto fail;
	}
fail:
	free(key.ptr);
	json_free(o);
	return NULL;
}

/* Parse any value at p->pos (after whitespace). */
static struct json_value *jp_value(struct json_parser *p, int depth)
{
	struct json_value *v;
	char c;

	jp_ws(p);
	if (depth > JSON_MAX_DEPTH) {
		jp_fail(p, "nesting deeper than %d", JSON_MAX_DEPTH);
		return NULL;
	}
	if (p->pos >= p->len) {
		jp_fail(p, "value expected, end of input found");
		return NULL;
	}
	c = p->s[p->pos];
	if (c == '{')
		return jp_object(p, depth);
	if (c == '[')
		return jp_array(p, depth);
	if (c == '"') {
		struct json_buf b = {0};

		if (jp_string(p, &b)) {
			free(b.ptr);
			return NULL;
		}
		v = json_alloc(JSON_STRING);
		if (!v) {
			free(b.ptr);
			jp_fail(p, "out of memory");
			return NULL;
		}
		if (!b.ptr) {
			b.ptr = calloc(1, 1);
			if (!b.ptr) {
				free(v);
				jp_fail(p, "out of memory");
				return NULL;
			}
		}
		v->u.str.ptr = b.ptr;
		v->u.str.len = b.len;
		return v;
	}
	if (c == '-' || (c >= '0' && c <= '9'))
		return jp_number(p);
	if (p->len - p->pos >= 4 && memcmp(p->s + p->pos, "true", 4) == 0) {
		p->pos += 4;
		v = json_new_bool(true);
	} else if (p->len - p->pos >= 5 &&
	           memcmp(p->s + p->pos, "false", 5) == 0) {
		p->pos += 5;
		v = json_new_bool(false);
	} else if (p->len - p->pos >= 4 &&
	           memcmp(p->s + p->pos, "null", 4) == 0) {
		p->pos += 4;
		v = json_new_null();
	} else {
		jp_fail(p, "unexpected character '%c'",
		        (unsigned char)c >= 0x20 && (unsigned char)c < 0x7f
		            ? c
		            : '?');
		return NULL;
	}
	if (!v)
		jp_fail(p, "out of memory");
	return v;
}

int json_parse(const char *text, size_t len, struct json_value **out, char *err,
               size_t errlen)
{
	struct json_parser p = {text, len, 0, err, errlen, 0};
	struct json_value *v;

	*out = NULL;
	if (err && errlen)
		err[0] = '\0';
	v = jp_value(&p, 0);
	if (!v)
		return -1;
	jp_ws(&p);
	if (p.pos < p.len) {
		jp_fail(&p, "extra data after the value");
		json_free(v);
		return -1;
	}
	*out = v;
	return 0;
}

/* ------------------------------------------------------------ serializer */

int json_buf_add(struct json_buf *b, const char *s, size_t len)
{
	size_t max = b->max ? b->max : ((size_t)1 << 30);

	if (len > max || b->len > max - len)
		return -1;
	if (b->len + len + 1 > b->cap) {
		size_t ncap = b->cap ? b->cap : 64;
		char *np;

		while (ncap < b->len + len + 1)
			ncap *= 2;
		np = realloc(b->ptr, ncap);
		if (!np)
			return -1;
		b->ptr = np;
		b->cap = ncap;
	}
	if (len)
		memcpy(b->ptr + b->len, s, len);
	b->len += len;
	b->ptr[b->len] = '\0';
	return 0;
}

size_t json_fmt_double(double f, bool json_flavour, char *buf, size_t n)
{
	char tmp[40], digits[24];
	int prec, exp10, nd, k, i;
	size_t o = 0;
	char *e;

	if (isnan(f))
		return (size_t)snprintf(buf, n, "%s",
		                        json_flavour ? "NaN" : "nan");
	if (isinf(f))
		return (size_t)snprintf(
		    buf, n, "%s",
		    f < 0 ? (json_flavour ? "-Infinity" : "-inf")
		          : (json_flavour ? "Infinity" : "inf"));
	/* shortest digit string that reads back as F */
	for (prec = 1; prec <= 17; prec++) {
		snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, f);
		if (strtod(tmp, NULL) == f)
			break;
	}
	/* tmp is [-]d[.ddd]e[+-]xx */
	nd = 0;
	for (i = 0; tmp[i] && tmp[i] != 'e'; i++)
		if (tmp[i] >= '0' && tmp[i] <= '9')
			digits[nd++] = tmp[i];
	digits[nd] = '\0';
	e = strchr(tmp, 'e');
	exp10 = e ? atoi(e + 1) : 0;
	while (nd > 1 && digits[nd - 1] == '0')
		digits[--nd] = '\0';
	{
		char out[48];
		size_t w = 0;

		if (signbit(f))
			out[w++] = '-';
		if (exp10 >= -4 && exp10 < 16) {
			/* fixed notation; Python's repr switches to
			 * scientific at 1e16 and below 1e-4 */
			if (exp10 < 0) {
				out[w++] = '0';
				out[w++] = '.';
				for (k = 0; k < -exp10 - 1; k++)
					out[w++] = '0';
				for (k = 0; k < nd; k++)
					out[w++] = digits[k];
			} else {
				for (k = 0; k <= exp10; k++)
					out[w++] = k < nd ? digits[k] : '0';
				out[w++] = '.';
				if (nd > exp10 + 1) {
					for (k = exp10 + 1; k < nd; k++)
						out[w++] = digits[k];
				} else {
					out[w++] = '0';
				}
			}
		} else {
			out[w++] = digits[0];
			if (nd > 1) {
				out[w++] = '.';
				for (k = 1; k < nd; k++)
					out[w++] = digits[k];
			}
			w += (size_t)snprintf(out + w, sizeof(out) - w,
			                      "e%c%02d", exp10 < 0 ? '-' : '+',
			                      exp10 < 0 ? -exp10 : exp10);
		}
		out[w] = '\0';
		o = (size_t)snprintf(buf, n, "%s", out);
	}
	return o;
}

int json_write_string(struct json_buf *b, const char *s, size_t len,
                      bool ensure_ascii)
{
	size_t i, start = 0;
	char esc[16];

	if (json_buf_add(b, "\"", 1))
		return -1;
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		const char *rep = NULL;
		size_t rlen = 2, skip = 1;

		if (c == '"')
			rep = "\\\"";
		else if (c == '\\')
			rep = "\\\\";
		else if (c == '\n')
			rep = "\\n";
		else if (c == '\r')
			rep = "\\r";
		else if (c == '\t')
			rep = "\\t";
		else if (c == '\b')
			rep = "\\b";
		else if (c == '\f')
			rep = "\\f";
		else if (c < 0x20) {
			snprintf(esc, sizeof(esc), "\\u%04x", c);
			rep = esc;
			rlen = 6;
		} else if (c >= 0x80 && ensure_ascii) {
			size_t k = utf8_valid_len((const unsigned char *)s + i,
			                          len - i);
			uint32_t cp;
			size_t j;

			if (!k) {
				/* not UTF-8: escape the byte as a code point */
				cp = c;
				k = 1;
			} else {
				cp = k == 2   ? c & 0x1f
				     : k == 3 ? c & 0x0f
				              : c & 0x07;
				for (j = 1; j < k; j++)
					cp = (cp << 6) |
					     ((unsigned char)s[i + j] & 0x3f);
			}
			if (cp >= 0x10000) {
				cp -= 0x10000;
				snprintf(esc, sizeof(esc), "\\u%04x\\u%04x",
				         0xd800 + (cp >> 10),
				         0xdc00 + (cp & 0x3ff));
				rlen = 12;
			} else {
				snprintf(esc, sizeof(esc), "\\u%04x", cp);
				rlen = 6;
			}
			rep = esc;
			skip = k;
		}
		if (rep) {
			if (json_buf_add(b, s + start, i - start) ||
			    json_buf_add(b, rep, rlen))
				return -1;
			i += skip - 1;
			start = i + 1;
		}
	}
	if (json_buf_add(b, s + start, len - start))
		return -1;
	return json_buf_add(b, "\"", 1);
}

/* Newline plus LEVEL*INDENT spaces. */
static int json_newline(struct json_buf *b, const struct json_fmt *fmt,
                        int level)
{
	long k, n = (long)fmt->indent * level;

	if (json_buf_add(b, "\n", 1))
		return -1;
	for (k = 0; k < n; k++)
		if (json_buf_add(b, " ", 1))
			return -1;
	return 0;
}

/* qsort helper: members by key bytes. */
static int json_member_cmp(const void *a, const void *b)
{
	const struct json_member *x = *(const struct json_member *const *)a;
	const struct json_member *y = *(const struct json_member *const *)b;
	size_t n = x->klen < y->klen ? x->klen : y->klen;
	int c = memcmp(x->key, y->key, n);

	if (c)
		return c;
	return x->klen < y->klen ? -1 : x->klen > y->klen;
}

int json_write(struct json_buf *b, const struct json_value *v,
               const struct json_fmt *fmt, int level)
{
	char num[48];
	size_t i, n;
	const char *sep = fmt->indent < 0 ? ", " : ",";

	if (level > JSON_MAX_DEPTH * 4)
		return -1;
	switch (v->type) {
	case JSON_NULL:
		return json_buf_add(b, "null", 4);
	case JSON_BOOL:
		return v->u.b ? json_buf_add(b, "true", 4)
		              : json_buf_add(b, "false", 5);
	case JSON_INT:
		n = (size_t)snprintf(num, sizeof(num), "%lld",
		                     (long long)v->u.i);
		return json_buf_add(b, num, n);
	case JSON_FLOAT:
		n = json_fmt_double(v->u.f, true, num, sizeof(num));
		return json_buf_add(b, num, n);
	case JSON_STRING:
		return json_write_string(b, v->u.str.ptr, v->u.str.len,
		                         fmt->ensure_ascii);
	case JSON_ARRAY:
		if (v->u.arr.n == 0)
			return json_buf_add(b, "[]", 2);
		if (json_buf_add(b, "[", 1))
			return -1;
		for (i = 0; i < v->u.arr.n; i++) {
			if (i && json_buf_add(b, sep, strlen(sep)))
				return -1;
			if (fmt->indent >= 0 && json_newline(b, fmt, level + 1))
				return -1;
			if (json_write(b, v->u.arr.items[i], fmt, level + 1))
				return -1;
		}
		if (fmt->indent >= 0 && json_newline(b, fmt, level))
			return -1;
		return json_buf_add(b, "]", 1);
	case JSON_OBJECT: {
		const struct json_member **order;
		int rc = -1;

		if (v->u.obj.n == 0)
			return json_buf_add(b, "{}", 2);
		order = malloc(v->u.obj.n * sizeof(*order));
		if (!order)
			return -1;
		for (i = 0; i < v->u.obj.n; i++)
			order[i] = &v->u.obj.members[i];
		if (fmt->sort_keys)
			qsort(order, v->u.obj.n, sizeof(*order),
			      json_member_cmp);
		if (json_buf_add(b, "{", 1))
			goto out;
		for (i = 0; i < v->u.obj.n; i++) {
			if (i && json_buf_add(b, sep, strlen(sep)))
				goto out;
			if (fmt->indent >= 0 && json_newline(b, fmt, level + 1))
				goto out;
			if (json_write_string(b, order[i]->key, order[i]->klen,
			                      fmt->ensure_ascii) ||
			    json_buf_add(b, ": ", 2) ||
			    json_write(b, order[i]->val, fmt, level + 1))
				goto out;
		}
		if (fmt->indent >= 0 && json_newline(b, fmt, level))
			goto out;
		rc = json_buf_add(b, "}", 1);
	out:
		free(order);
		return rc;
	}
	}
	return -1;
}

int json_serialize(const struct json_value *v, const struct json_fmt *fmt,
                   char **out, size_t *outlen, char *err, size_t errlen)
{
	struct json_buf b = {0};
	struct json_fmt def = {-1, false, false};

	*out = NULL;
	*outlen = 0;
	if (!fmt)
		fmt = &def;
	if (json_write(&b, v, fmt, 0) || json_buf_add(&b, "", 0)) {
		free(b.ptr);
		if (err && errlen)
			snprintf(err, errlen,
			         "json: out of memory while "
			         "serializing");
		return -1;
	}
	*out = b.ptr;
	*outlen = b.len;
	return 0;
}

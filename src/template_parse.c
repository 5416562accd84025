/*
 * template_parse.c - arena, lexer and parser of the Jinja subset.
 *
 * The lexer follows jinja2's (lexer.py) rules with trim_blocks and
 * lstrip_blocks on: line endings are normalized to "\n", one trailing
 * newline of the source is dropped, "{%-"/"-%}" strip all whitespace,
 * "{%+"/"+%}" disable lstrip/trim, a block or comment tag alone on its
 * line after only spaces loses those spaces, and the first newline after
 * "%}" or "#}" is removed.  The parser is a recursive descent over the
 * token array with jinja2's operator precedence (filters and tests bind
 * tighter than arithmetic).
 */
#include "template_int.h"
#include "utf8.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NEST 200 /* parser recursion (expressions and blocks) */

/* ----------------------------------------------------------------- arena */

struct tchunk {
	struct tchunk *next; /* older chunk */
	size_t used, cap;    /* bytes */
	max_align_t data[];  /* payload */
};

void *tmpl_arena_alloc(struct tarena *a, size_t n)
{
	struct tchunk *c = a->head;
	size_t al = sizeof(max_align_t);

	n = (n + al - 1) / al * al;
	if (n == 0)
		n = al;
	if (!c || c->cap - c->used < n) {
		size_t cap = n > 65536 ? n : 65536;

		if (cap > a->max || a->total > a->max - cap)
			tmpl_fail(a->fail, TMPL_ELIMIT, a->line ? *a->line : 0,
			          a->col ? *a->col : 0,
			          "template memory limit of %zu bytes reached",
			          a->max);
		c = malloc(sizeof(*c) + cap);
		if (!c)
			tmpl_fail(a->fail, TMPL_ENOMEM, 0, 0, "out of memory");
		c->next = a->head;
		c->used = 0;
		c->cap = cap;
		a->head = c;
		a->total += cap;
	}
	{
		void *p = (char *)c->data + c->used;

		c->used += n;
		memset(p, 0, n);
		return p;
	}
}

void tmpl_arena_free(struct tarena *a)
{
	struct tchunk *c = a->head, *next;

	for (; c; c = next) {
		next = c->next;
		free(c);
	}
	a->head = NULL;
	a->total = 0;
}

_Noreturn void tmpl_fail(struct tfail *f, int code, int line, int col,
                         const char *fmt, ...)
{
	va_list ap;
	int n = 0;

	f->code = code;
	if (f->err && f->errlen) {
		if (line > 0)
			n = snprintf(f->err, f->errlen,
			             "line %d, column %d: ", line, col);
		if (n < 0 || (size_t)n >= f->errlen)
			n = 0;
		va_start(ap, fmt);
		vsnprintf(f->err + n, f->errlen - (size_t)n, fmt, ap);
		va_end(ap);
	}
	longjmp(f->jb, 1);
}

/* ----------------------------------------------------------------- lexer */

enum tkind {
	TK_EOF,
	TK_DATA,
	TK_VBEGIN,
	TK_VEND,
	TK_BBEGIN,
	TK_BEND,
	TK_NAME,
	TK_STRING,
	TK_INT,
	TK_FLOAT,
	TK_OP
};

struct token {
	enum tkind k;  /* kind */
	const char *p; /* text: name, operator, decoded string, data */
	size_t n;      /* its length */
	int line, col; /* position */
	int64_t i;     /* TK_INT */
	double f;      /* TK_FLOAT */
};

struct lexer {
	struct tmpl *t;     /* arena, fail */
	const char *s;      /* normalized source */
	size_t len;         /* its length */
	size_t pos;         /* next byte */
	struct token *tk;   /* tokens */
	size_t ntk, cap;    /* used / allocated */
	bool line_starting; /* last match ended with "\n" */
	size_t pos_off;     /* lx_pos cache: offset, */
	int pos_line;       /* its line */
	int pos_col;        /* and column */
};

/* Line and column of byte OFF of the normalized source (columns count
 * code points).  Scans on from the last answer when OFF is not before it,
 * so lexing stays linear. */
static void lx_pos(struct lexer *lx, size_t off, int *line, int *col)
{
	size_t i = 0;
	int l = 1, c = 1;

	if (off >= lx->pos_off) {
		i = lx->pos_off;
		l = lx->pos_line;
		c = lx->pos_col;
	}
	for (; i < off && i < lx->len; i++) {
		if (lx->s[i] == '\n') {
			l++;
			c = 1;
		} else if (((unsigned char)lx->s[i] & 0xc0) != 0x80) {
			c++;
		}
	}
	lx->pos_off = i;
	lx->pos_line = l;
	lx->pos_col = c;
	*line = l;
	*col = c;
}

_Noreturn static void lx_fail(struct lexer *lx, size_t off, const char *msg,
                              ...) __attribute__((format(printf, 3, 4)));
_Noreturn static void lx_fail(struct lexer *lx, size_t off, const char *msg,
                              ...)
{
	char buf[256];
	va_list ap;
	int line, col;

	va_start(ap, msg);
	vsnprintf(buf, sizeof(buf), msg, ap);
	va_end(ap);
	lx_pos(lx, off, &line, &col);
	tmpl_fail(&lx->t->fail, TMPL_ESYNTAX, line, col, "%s", buf);
}

/* Append a token of kind K for text P/N starting at source offset OFF. */
static struct token *lx_emit(struct lexer *lx, enum tkind k, const char *p,
                             size_t n, size_t off)
{
	struct token *t;

	if (lx->ntk == lx->cap) {
		size_t ncap = lx->cap ? lx->cap * 2 : 64;
		struct token *nt =
		    tmpl_arena_alloc(&lx->t->arena, ncap * sizeof(*nt));

		if (lx->ntk)
			memcpy(nt, lx->tk, lx->ntk * sizeof(*nt));
		lx->tk = nt;
		lx->cap = ncap;
	}
	t = &lx->tk[lx->ntk++];
	t->k = k;
	t->p = p;
	t->n = n;
	lx_pos(lx, off, &t->line, &t->col);
	return t;
}

/* Length of the Python-whitespace character at P (N left), or 0. */
static size_t lx_space(const char *p, size_t n)
{
	size_t len;
	uint32_t cp = tmpl_lib_u8dec(p, n, &len);

	return tmpl_lib_isspace(cp) ? len : 0;
}

/* Bytes of whitespace at S[pos..]. */
static size_t lx_span_ws(const char *s, size_t len, size_t pos)
{
	size_t start = pos, k;

	while (pos < len && (k = lx_space(s + pos, len - pos)))
		pos += k;
	return pos - start;
}

/* Is S[a..b) all whitespace (and non-empty)? */
static bool lx_all_ws(const char *s, size_t a, size_t b)
{
	return b > a && lx_span_ws(s, b, a) == b - a;
}

/* Emit template text S[a..b) with the strip rules for the tag that
 * follows (SIGN '-', '+' or 0; IS_VAR: the tag is "{{"). */
static void lx_text(struct lexer *lx, size_t a, size_t b, char sign,
                    bool is_var)
{
	if (sign == '-') {
		/* strip all trailing whitespace */
		while (b > a) {
			size_t k = b - 1;

			while (k > a &&
			       ((unsigned char)lx->s[k] & 0xc0) == 0x80)
				k--;
			if (!lx_space(lx->s + k, b - k))
				break;
			b = k;
		}
	} else if (sign != '+' && !is_var) {
		size_t l = b;

		while (l > a && lx->s[l - 1] != '\n')
			l--;
		if ((l > a || lx->line_starting) && lx_all_ws(lx->s, l, b))
			b = l;
	}
	if (b > a)
		lx_emit(lx, TK_DATA, lx->s + a, b - a, a);
}

/* Consume a tag end at pos: "-X" eats whitespace, "+X" nothing, "X" one
 * newline when TRIM (block and comment tags).  X is END (2 chars). */
static bool lx_end(struct lexer *lx, const char *end, bool trim, bool plus_ok)
{
	const char *s = lx->s + lx->pos;
	size_t left = lx->len - lx->pos;

	if (left >= 3 && s[0] == '-' && memcmp(s + 1, end, 2) == 0) {
		lx->pos += 3;
		lx->pos += lx_span_ws(lx->s, lx->len, lx->pos);
	} else if (plus_ok && left >= 3 && s[0] == '+' &&
	           memcmp(s + 1, end, 2) == 0) {
		lx->pos += 3;
	} else if (left >= 2 && memcmp(s, end, 2) == 0) {
		lx->pos += 2;
		if (trim && lx->pos < lx->len && lx->s[lx->pos] == '\n')
			lx->pos++;
	} else {
		return false;
	}
	lx->line_starting = lx->s[lx->pos - 1] == '\n';
	return true;
}

/* Lex a string literal at pos (Python unicode-escape decoding). */
static void lx_string(struct lexer *lx)
{
	size_t start = lx->pos, i;
	char q = lx->s[lx->pos];
	char *d;
	size_t dn = 0;

	for (i = start + 1; i < lx->len && lx->s[i] != q; i++)
		if (lx->s[i] == '\\')
			i++;
	if (i >= lx->len)
		lx_fail(lx, start, "unexpected end of string literal");
	d = tmpl_arena_alloc(&lx->t->arena, i - start + 1);
	for (i = start + 1; lx->s[i] != q; i++) {
		char c = lx->s[i];
		uint32_t cp;
		int k, nd, h;

		if (c != '\\') {
			d[dn++] = c;
			continue;
		}
		c = lx->s[++i];
		switch (c) {
		case '\n':
			continue;
		case '\\':
		case '\'':
		case '"':
			d[dn++] = c;
			continue;
		case 'a':
			d[dn++] = '\a';
			continue;
		case 'b':
			d[dn++] = '\b';
			continue;
		case 'f':
			d[dn++] = '\f';
			continue;
		case 'n':
			d[dn++] = '\n';
			continue;
		case 'r':
			d[dn++] = '\r';
			continue;
		case 't':
			d[dn++] = '\t';
			continue;
		case 'v':
			d[dn++] = '\v';
			continue;
		case 'x':
		case 'u':
		case 'U':
			nd = c == 'x' ? 2 : c == 'u' ? 4 : 8;
			cp = 0;
			for (k = 0; k < nd; k++) {
				h = i + 1 + (size_t)k < lx->len
				        ? utf8_hex_digit(
				              lx->s[i + 1 + (size_t)k])
				        : -1;
				if (h < 0)
					lx_fail(
					    lx, i - 1,
					    "truncated \\%c escape in string",
					    c);
				cp = cp * 16 + (uint32_t)h;
			}
			if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
				lx_fail(lx, i - 1,
				        "escape \\%c is not a valid character",
				        c);
			i += (size_t)nd;
			/* the escape takes nd+2 source bytes >= 4 output */
			dn += utf8_put(cp, d + dn);
			continue;
		default:
			if (c >= '0' && c <= '7') {
				cp = 0;
				for (k = 0; k < 3 && lx->s[i] >= '0' &&
				            lx->s[i] <= '7';
				     k++, i++)
					cp =
					    cp * 8 + (uint32_t)(lx->s[i] - '0');
				i--;
				dn += utf8_put(cp, d + dn);
				continue;
			}
			d[dn++] = '\\';
			d[dn++] = c;
			continue;
		}
	}
	lx_emit(lx, TK_STRING, d, dn, start);
	lx->pos = i + 1;
}

/* Lex a number at pos. */
static void lx_number(struct lexer *lx)
{
	size_t start = lx->pos, i = start;
	bool is_float = false;
	char buf[64];
	size_t bn = 0;
	struct token *t;

	while (i < lx->len && ((lx->s[i] >= '0' && lx->s[i] <= '9') ||
	                       (lx->s[i] == '_' && i + 1 < lx->len &&
	                        lx->s[i + 1] >= '0' && lx->s[i + 1] <= '9')))
		i++;
	if (i + 1 < lx->len && lx->s[i] == '.' && lx->s[i + 1] >= '0' &&
	    lx->s[i + 1] <= '9') {
		is_float = true;
		i++;
		while (i < lx->len && ((lx->s[i] >= '0' && lx->s[i] <= '9') ||
		                       lx->s[i] == '_'))
			i++;
	}
	if (i < lx->len && (lx->s[i] == 'e' || lx->s[i] == 'E')) {
		size_t j = i + 1;

		if (j < lx->len && (lx->s[j] == '+' || lx->s[j] == '-'))
			j++;
		if (j < lx->len && lx->s[j] >= '0' && lx->s[j] <= '9') {
			is_float = true;
			i = j;
			while (i < lx->len && lx->s[i] >= '0' &&
			       lx->s[i] <= '9')
				i++;
		}
	}
	for (size_t k = start; k < i; k++) {
		if (lx->s[k] == '_')
			continue;
		if (bn + 1 >= sizeof(buf))
			lx_fail(lx, start, "number literal too long");
		buf[bn++] = lx->s[k];
	}
	buf[bn] = '\0';
	t = lx_emit(lx, is_float ? TK_FLOAT : TK_INT, lx->s + start, i - start,
	            start);
	if (is_float) {
		t->f = strtod(buf, NULL);
	} else {
		char *end;
		unsigned long long v = strtoull(buf, &end, 10);

		if (v > INT64_MAX || bn > 19)
			lx_fail(lx, start, "integer literal too large");
		t->i = (int64_t)v;
	}
	lx->pos = i;
}

/* Lex the inside of a {{ }} (IS_VAR) or {% %} tag up to its end. */
static void lx_tag(struct lexer *lx, bool is_var, size_t open_off)
{
	static const char *ops2[] = {"//", "**", "==", "!=", ">=", "<="};
	char stack[MAX_NEST];
	int depth = 0;

	for (;;) {
		char c;

		lx->pos += lx_span_ws(lx->s, lx->len, lx->pos);
		if (lx->pos >= lx->len)
			lx_fail(lx, open_off,
			        "unexpected end of template: "
			        "tag opened here is not closed");
		if (depth == 0) {
			size_t off = lx->pos;

			if (is_var ? lx_end(lx, "}}", false, false)
			           : lx_end(lx, "%}", true, true)) {
				lx_emit(lx, is_var ? TK_VEND : TK_BEND,
				        lx->s + off, 0, off);
				return;
			}
		}
		c = lx->s[lx->pos];
		if (c >= '0' && c <= '9') {
			lx_number(lx);
			continue;
		}
		if (c == '_' || (c >= 'a' && c <= 'z') ||
		    (c >= 'A' && c <= 'Z')) {
			size_t s = lx->pos;

			while (
			    lx->pos < lx->len &&
			    (lx->s[lx->pos] == '_' ||
			     (lx->s[lx->pos] >= 'a' && lx->s[lx->pos] <= 'z') ||
			     (lx->s[lx->pos] >= 'A' && lx->s[lx->pos] <= 'Z') ||
			     (lx->s[lx->pos] >= '0' && lx->s[lx->pos] <= '9')))
				lx->pos++;
			lx_emit(lx, TK_NAME, lx->s + s, lx->pos - s, s);
			continue;
		}
		if (c == '\'' || c == '"') {
			lx_string(lx);
			continue;
		}
		{
			size_t k, n = 0, left = lx->len - lx->pos;

			for (k = 0; k < sizeof(ops2) / sizeof(*ops2); k++)
				if (left >= 2 &&
				    memcmp(lx->s + lx->pos, ops2[k], 2) == 0)
					n = 2;
			if (!n && strchr("+-/*%~[](){}.:|,;=<>", c) && c)
				n = 1;
			if (!n)
				lx_fail(lx, lx->pos, "unexpected char '%c'",
				        (unsigned char)c >= 0x20 &&
				                (unsigned char)c < 0x7f
				            ? c
				            : '?');
			if (n == 1 && strchr("([{", c)) {
				if (depth >= MAX_NEST)
					lx_fail(lx, lx->pos,
					        "brackets nested too deeply");
				stack[depth++] = c == '('   ? ')'
				                 : c == '[' ? ']'
				                            : '}';
			} else if (n == 1 && strchr(")]}", c)) {
				if (depth == 0)
					lx_fail(lx, lx->pos, "unexpected '%c'",
					        c);
				if (stack[depth - 1] != c)
					lx_fail(
					    lx, lx->pos,
					    "unexpected '%c', expected '%c'", c,
					    stack[depth - 1]);
				depth--;
			}
			lx_emit(lx, TK_OP, lx->s + lx->pos, n, lx->pos);
			lx->pos += n;
		}
	}
}

/* Is there "{%[-+]?\s*WORD\s*" at OFF? Returns the offset after it or 0. */
static size_t lx_word_tag(struct lexer *lx, size_t off, const char *word,
                          char *sign)
{
	size_t p = off + 2, wl = strlen(word);

	*sign = 0;
	if (p < lx->len && (lx->s[p] == '-' || lx->s[p] == '+'))
		*sign = lx->s[p++];
	p += lx_span_ws(lx->s, lx->len, p);
	if (lx->len - p < wl || memcmp(lx->s + p, word, wl) != 0)
		return 0;
	p += wl;
	if (p < lx->len &&
	    (lx->s[p] == '_' || (lx->s[p] >= 'a' && lx->s[p] <= 'z') ||
	     (lx->s[p] >= '0' && lx->s[p] <= '9')))
		return 0;
	p += lx_span_ws(lx->s, lx->len, p);
	return p;
}

/* Lex a {% raw %} block whose opening tag ends at pos. */
static void lx_raw(struct lexer *lx, size_t open_off)
{
	size_t i;
	char sign;

	for (i = lx->pos; i + 1 < lx->len; i++) {
		size_t p;

		if (lx->s[i] != '{' || lx->s[i + 1] != '%')
			continue;
		p = lx_word_tag(lx, i, "endraw", &sign);
		if (!p)
			continue;
		lx_text(lx, lx->pos, i, sign, false);
		lx->pos = p;
		if (!lx_end(lx, "%}", true, true))
			lx_fail(lx, p, "expected '%%}' after endraw");
		return;
	}
	lx_fail(lx, open_off, "missing end of raw directive");
}

/* Tokenize the whole normalized source. */
static void lx_run(struct lexer *lx)
{
	lx->line_starting = true;
	while (lx->pos < lx->len) {
		size_t i, a = lx->pos;
		char kind = 0, sign = 0;

		for (i = a; i + 1 < lx->len; i++) {
			if (lx->s[i] == '{' &&
			    (lx->s[i + 1] == '{' || lx->s[i + 1] == '%' ||
			     lx->s[i + 1] == '#')) {
				kind = lx->s[i + 1];
				break;
			}
		}
		if (!kind) {
			lx_emit(lx, TK_DATA, lx->s + a, lx->len - a, a);
			break;
		}
		if (i + 2 < lx->len &&
		    (lx->s[i + 2] == '-' || lx->s[i + 2] == '+'))
			sign = lx->s[i + 2];
		if (kind == '%') {
			char rs;
			size_t p = lx_word_tag(lx, i, "raw", &rs);

			if (p) {
				size_t save = lx->pos;

				lx->pos = p;
				if (lx->len - p >= 3 && lx->s[p] == '-' &&
				    memcmp(lx->s + p + 1, "%}", 2) == 0) {
					lx_text(lx, a, i, sign, false);
					lx->pos =
					    p + 3 +
					    lx_span_ws(lx->s, lx->len, p + 3);
					lx_raw(lx, i);
					continue;
				}
				if (lx->len - p >= 2 &&
				    memcmp(lx->s + p, "%}", 2) == 0) {
					lx_text(lx, a, i, sign, false);
					lx->pos = p + 2;
					lx_raw(lx, i);
					continue;
				}
				lx->pos = save;
			}
		}
		lx_text(lx, a, i, sign, kind == '{');
		lx->pos = i + 2 + (sign ? 1 : 0);
		if (kind == '#') {
			size_t j;

			for (j = lx->pos; j < lx->len; j++) {
				lx->pos = j;
				if (lx->s[j] == '+' || lx->s[j] == '-' ||
				    lx->s[j] == '#')
					if (lx_end(lx, "#}", true, true))
						break;
			}
			if (j >= lx->len)
				lx_fail(lx, i, "missing end of comment tag");
			continue;
		}
		lx_emit(lx, kind == '{' ? TK_VBEGIN : TK_BBEGIN, lx->s + i, 2,
		        i);
		lx_tag(lx, kind == '{', i);
	}
	lx_emit(lx, TK_EOF, lx->s + lx->len, 0, lx->len);
}

/* ---------------------------------------------------------------- parser */

/*
 * An unknown filter or test name is an error when the template compiles,
 * except inside an if statement's test and branches or a conditional
 * expression (jinja2's "soft frames"): there jinja2 compiles it and fails
 * only if the branch runs ("No filter named 'x' found.").  A loop, macro,
 * call, filter or set block inside opens a frame that is not soft again.
 * The first non-soft unknown name is pending until its statement ends,
 * because the expression it is in may still turn out to be the value part
 * of `value if test else other`.
 */
struct parser {
	struct lexer *lx;            /* tokens */
	size_t i;                    /* current token */
	int depth;                   /* recursion */
	int loops;                   /* enclosing for loops (break/continue) */
	bool soft;                   /* in a soft frame (see above) */
	const struct node *pending;  /* first non-soft unknown name, or NULL */
	const struct token *pend_tk; /* its token, for the message */
};

#define P_TK(p) (&(p)->lx->tk[(p)->i])

_Noreturn static void p_fail(struct parser *p, const struct token *t,
                             const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
_Noreturn static void p_fail(struct parser *p, const struct token *t,
                             const char *fmt, ...)
{
	char buf[300];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	tmpl_fail(&p->lx->t->fail, TMPL_ESYNTAX, t->line, t->col, "%s", buf);
}

/* Token text for messages (bounded). */
static const char *p_desc(struct parser *p, const struct token *t, char *buf,
                          size_t n)
{
	(void)p;
	switch (t->k) {
	case TK_EOF:
		return "end of template";
	case TK_VEND:
		return "end of print statement";
	case TK_BEND:
		return "end of statement block";
	case TK_STRING:
		return "'string'";
	case TK_INT:
		return "'integer'";
	case TK_FLOAT:
		return "'float'";
	case TK_DATA:
		return "template data";
	default:
		snprintf(buf, n, "'%.*s'", (int)(t->n > 40 ? 40 : t->n), t->p);
		return buf;
	}
}

static bool p_is_op(struct parser *p, const char *op)
{
	const struct token *t = P_TK(p);

	return t->k == TK_OP && t->n == strlen(op) &&
	       memcmp(t->p, op, t->n) == 0;
}

static bool p_is_name(struct parser *p, const char *name)
{
	const struct token *t = P_TK(p);

	return t->k == TK_NAME && t->n == strlen(name) &&
	       memcmp(t->p, name, t->n) == 0;
}

static bool p_skip_op(struct parser *p, const char *op)
{
	if (!p_is_op(p, op))
		return false;
	p->i++;
	return true;
}

static bool p_skip_name(struct parser *p, const char *name)
{
	if (!p_is_name(p, name))
		return false;
	p->i++;
	return true;
}

static void p_expect_op(struct parser *p, const char *op)
{
	char buf[64];

	if (!p_skip_op(p, op))
		p_fail(p, P_TK(p), "expected token '%s', got %s", op,
		       p_desc(p, P_TK(p), buf, sizeof(buf)));
}

static void p_expect_bend(struct parser *p)
{
	char buf[64];

	if (P_TK(p)->k != TK_BEND)
		p_fail(p, P_TK(p), "expected end of statement block, got %s",
		       p_desc(p, P_TK(p), buf, sizeof(buf)));
	p->i++;
}

/* A new node of kind K at token T. */
static struct node *p_node(struct parser *p, enum nkind k,
                           const struct token *t)
{
	struct node *n = tmpl_arena_alloc(&p->lx->t->arena, sizeof(*n));

	n->k = k;
	n->line = t->line;
	n->col = t->col;
	return n;
}

/* Arena copy of S/N, NUL-terminated. */
static const char *p_strdup(struct parser *p, const char *s, size_t n)
{
	char *d = tmpl_arena_alloc(&p->lx->t->arena, n + 1);

	memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

/* A growable node vector (arena). */
struct nvec {
	struct node **v;
	size_t n, cap;
};

static void nv_push(struct parser *p, struct nvec *v, struct node *n)
{
	if (v->n == v->cap) {
		size_t ncap = v->cap ? v->cap * 2 : 4;
		struct node **nv =
		    tmpl_arena_alloc(&p->lx->t->arena, ncap * sizeof(*nv));

		if (v->n)
			memcpy(nv, v->v, v->n * sizeof(*nv));
		v->v = nv;
		v->cap = ncap;
	}
	v->v[v->n++] = n;
}

static void p_enter(struct parser *p)
{
	if (++p->depth > MAX_NEST)
		p_fail(p, P_TK(p), "template nested deeper than %d", MAX_NEST);
}

static struct node *p_expr(struct parser *p, bool condexpr);
static struct node *p_tuple(struct parser *p, bool condexpr, bool explicit_);
static struct node *p_unary(struct parser *p, bool with_filter);
static struct node *p_primary(struct parser *p);
static struct node *p_postfix(struct parser *p, struct node *n);

/* Call arguments after '(' up to ')'; fills N's v/kv/kn. */
static void p_args(struct parser *p, struct node *n)
{
	struct nvec args = {0}, kvals = {0};
	const char **kn = NULL;
	size_t nk = 0, kcap = 0;

	p_expect_op(p, "(");
	while (!p_is_op(p, ")")) {
		if (args.n || nk)
			p_expect_op(p, ",");
		if (p_is_op(p, ")"))
			break;
		if (P_TK(p)->k == TK_NAME && p->lx->tk[p->i + 1].k == TK_OP &&
		    p->lx->tk[p->i + 1].n == 1 &&
		    p->lx->tk[p->i + 1].p[0] == '=') {
			if (nk == kcap) {
				size_t nc = kcap ? kcap * 2 : 4;
				const char **nn = tmpl_arena_alloc(
				    &p->lx->t->arena, nc * sizeof(*nn));

				if (nk)
					memcpy(nn, kn, nk * sizeof(*nn));
				kn = nn;
				kcap = nc;
			}
			kn[nk++] = p_strdup(p, P_TK(p)->p, P_TK(p)->n);
			p->i += 2;
			nv_push(p, &kvals, p_expr(p, true));
		} else {
			if (nk)
				p_fail(p, P_TK(p),
				       "positional argument after "
				       "keyword argument");
			nv_push(p, &args, p_expr(p, true));
		}
	}
	p->i++;
	n->v = args.v;
	n->n = args.n;
	n->kv = kvals.v;
	n->kn = kn;
	n->nk = nk;
}

/* A dotted name after '|' or 'is'. */
static void p_dotted(struct parser *p, struct node *n)
{
	const struct token *t = P_TK(p);
	char buf[64];

	if (t->k != TK_NAME)
		p_fail(p, t, "expected a name, got %s",
		       p_desc(p, t, buf, sizeof(buf)));
	n->s = p_strdup(p, t->p, t->n);
	n->sn = t->n;
	p->i++;
}

/* Filter or test node F (at token T) names nothing of the tables: it
 * fails when it runs, and now unless the frame is soft (see struct
 * parser). */
static void p_unknown(struct parser *p, struct node *f, const struct token *t)
{
	f->unknown = true;
	if (!p->soft && !p->pending) {
		p->pending = f;
		p->pend_tk = t;
	}
}

/* Fail on a pending unknown name: its statement has ended. */
static void p_check_pending(struct parser *p)
{
	if (p->pending)
		p_fail(p, p->pend_tk, "No %s named '%s'.",
		       p->pending->k == N_FILTER ? "filter" : "test",
		       p->pending->s);
}

/* Set P's soft flag to SOFT; returns the old one (to restore). */
static bool p_soft(struct parser *p, bool soft)
{
	bool old = p->soft;

	p->soft = soft;
	return old;
}

/* Filters, tests and calls after a unary expression. */
static struct node *p_filter_expr(struct parser *p, struct node *n)
{
	for (;;) {
		const struct token *t = P_TK(p);

		if (p_is_op(p, "|")) {
			struct node *f = p_node(p, N_FILTER, t);

			p->i++;
			p_dotted(p, f);
			f->a = n;
			if (p_is_op(p, "("))
				p_args(p, f);
			if (!tmpl_lib_has_filter(f->s))
				p_unknown(p, f, t);
			n = f;
		} else if (p_is_name(p, "is")) {
			struct node *f = p_node(p, N_TEST, t);
			const struct token *c;

			p->i++;
			if (p_skip_name(p, "not"))
				f->neg = true;
			p_dotted(p, f);
			f->a = n;
			c = P_TK(p);
			if (p_is_op(p, "(")) {
				p_args(p, f);
			} else if ((c->k == TK_NAME || c->k == TK_STRING ||
			            c->k == TK_INT || c->k == TK_FLOAT ||
			            p_is_op(p, "[") || p_is_op(p, "{")) &&
			           !p_is_name(p, "else") &&
			           !p_is_name(p, "or") &&
			           !p_is_name(p, "and")) {
				if (p_is_name(p, "is"))
					p_fail(p, c,
					       "You cannot chain multiple "
					       "tests with is");
				f->v = tmpl_arena_alloc(&p->lx->t->arena,
				                        sizeof(*f->v));
				f->v[0] = p_postfix(p, p_primary(p));
				f->n = 1;
			}
			if (!tmpl_lib_has_test(f->s))
				p_unknown(p, f, t);
			n = f;
		} else if (p_is_op(p, "(")) {
			struct node *c = p_node(p, N_CALL, t);

			c->a = n;
			p_args(p, c);
			n = c;
		} else {
			return n;
		}
	}
}

/* Subscript inside [...]: an expression or a slice. */
static struct node *p_subscript(struct parser *p, struct node *obj,
                                const struct token *t)
{
	struct node *a = NULL, *parts[3] = {NULL, NULL, NULL};
	int k = 0;

	if (!p_is_op(p, ":"))
		a = p_expr(p, true);
	if (!p_is_op(p, ":")) {
		struct node *n = p_node(p, N_ITEM, t);

		if (!a)
			p_fail(p, P_TK(p), "expected an expression");
		if (p_is_op(p, ",")) {
			/* x[a, b]: the key is a tuple */
			struct node *tup = p_node(p, N_TUPLE, t);
			struct nvec items = {0};

			nv_push(p, &items, a);
			while (p_skip_op(p, ",") && !p_is_op(p, "]"))
				nv_push(p, &items, p_expr(p, true));
			tup->v = items.v;
			tup->n = items.n;
			a = tup;
		}
		n->a = obj;
		n->b = a;
		return n;
	}
	parts[0] = a;
	while (k < 2 && p_skip_op(p, ":")) {
		k++;
		if (!p_is_op(p, ":") && !p_is_op(p, "]") && !p_is_op(p, ","))
			parts[k] = p_expr(p, true);
	}
	{
		struct node *n = p_node(p, N_SLICE, t);

		n->a = obj;
		n->b = parts[0];
		n->c = parts[1];
		n->d = parts[2];
		return n;
	}
}

/* Attribute, subscript and call suffixes. */
static struct node *p_postfix(struct parser *p, struct node *n)
{
	for (;;) {
		const struct token *t = P_TK(p);

		if (p_is_op(p, ".")) {
			const struct token *nt;

			p->i++;
			nt = P_TK(p);
			if (nt->k == TK_NAME) {
				struct node *a = p_node(p, N_ATTR, t);

				a->a = n;
				a->s = p_strdup(p, nt->p, nt->n);
				a->sn = nt->n;
				p->i++;
				n = a;
			} else if (nt->k == TK_INT) {
				struct node *a = p_node(p, N_ITEM, t);

				a->a = n;
				a->b = p_node(p, N_LIT, nt);
				a->b->lit = tv_int(nt->i);
				p->i++;
				n = a;
			} else {
				p_fail(p, nt,
				       "expected name or number after '.'");
			}
		} else if (p_is_op(p, "[")) {
			p->i++;
			p_enter(p);
			n = p_subscript(p, n, t);
			p->depth--;
			p_expect_op(p, "]");
		} else if (p_is_op(p, "(")) {
			struct node *c = p_node(p, N_CALL, t);

			c->a = n;
			p_args(p, c);
			n = c;
		} else {
			return n;
		}
	}
}

/* A literal string value. */
static struct tval p_strval(struct parser *p, const char *s, size_t n)
{
	struct tstr *ts = tmpl_arena_alloc(&p->lx->t->arena, sizeof(*ts));

	ts->p = s;
	ts->n = n;
	return tv_str(ts);
}

static struct node *p_primary(struct parser *p)
{
	const struct token *t = P_TK(p);
	struct node *n;
	char buf[64];

	p_enter(p);
	if (t->k == TK_NAME) {
		static const char *const lits[] = {"true",  "True", "false",
		                                   "False", "none", "None"};
		size_t k;

		p->i++;
		for (k = 0; k < 6; k++) {
			if (t->n == strlen(lits[k]) &&
			    memcmp(t->p, lits[k], t->n) == 0) {
				n = p_node(p, N_LIT, t);
				n->lit = k < 2   ? tv_bool(true)
				         : k < 4 ? tv_bool(false)
				                 : tv_none();
				goto out;
			}
		}
		n = p_node(p, N_NAME, t);
		n->s = p_strdup(p, t->p, t->n);
		n->sn = t->n;
	} else if (t->k == TK_STRING) {
		/* adjacent literals concatenate */
		size_t total = 0, j = p->i, o = 0;
		char *d;

		while (p->lx->tk[j].k == TK_STRING)
			total += p->lx->tk[j++].n;
		d = tmpl_arena_alloc(&p->lx->t->arena, total + 1);
		while (p->lx->tk[p->i].k == TK_STRING) {
			memcpy(d + o, p->lx->tk[p->i].p, p->lx->tk[p->i].n);
			o += p->lx->tk[p->i].n;
			p->i++;
		}
		n = p_node(p, N_LIT, t);
		n->lit = p_strval(p, d, total);
	} else if (t->k == TK_INT || t->k == TK_FLOAT) {
		p->i++;
		n = p_node(p, N_LIT, t);
		n->lit = t->k == TK_INT ? tv_int(t->i) : tv_float(t->f);
	} else if (p_is_op(p, "(")) {
		p->i++;
		n = p_tuple(p, true, true);
		p_expect_op(p, ")");
	} else if (p_is_op(p, "[")) {
		struct nvec items = {0};

		p->i++;
		while (!p_is_op(p, "]")) {
			if (items.n)
				p_expect_op(p, ",");
			if (p_is_op(p, "]"))
				break;
			nv_push(p, &items, p_expr(p, true));
		}
		p->i++;
		n = p_node(p, N_LIST, t);
		n->v = items.v;
		n->n = items.n;
	} else if (p_is_op(p, "{")) {
		struct nvec keys = {0}, vals = {0};

		p->i++;
		while (!p_is_op(p, "}")) {
			if (keys.n)
				p_expect_op(p, ",");
			if (p_is_op(p, "}"))
				break;
			nv_push(p, &keys, p_expr(p, true));
			p_expect_op(p, ":");
			nv_push(p, &vals, p_expr(p, true));
		}
		p->i++;
		n = p_node(p, N_DICT, t);
		n->v = keys.v;
		n->n = keys.n;
		n->kv = vals.v;
		n->nk = vals.n;
	} else {
		p_fail(p, t, "unexpected %s", p_desc(p, t, buf, sizeof(buf)));
	}
out:
	p->depth--;
	return n;
}

static struct node *p_unary(struct parser *p, bool with_filter)
{
	const struct token *t = P_TK(p);
	struct node *n;

	p_enter(p);
	if (p_is_op(p, "-") || p_is_op(p, "+")) {
		n = p_node(p, p_is_op(p, "-") ? N_NEG : N_POS, t);
		p->i++;
		n->a = p_unary(p, false);
	} else {
		n = p_primary(p);
	}
	n = p_postfix(p, n);
	if (with_filter)
		n = p_filter_expr(p, n);
	p->depth--;
	return n;
}

/* A binary node OP of A and B at token T. */
static struct node *p_bin(struct parser *p, int op, struct node *a,
                          struct node *b, const struct token *t)
{
	struct node *n = p_node(p, N_BIN, t);

	n->op = op;
	n->a = a;
	n->b = b;
	return n;
}

static struct node *p_pow(struct parser *p)
{
	struct node *n = p_unary(p, true);

	while (p_is_op(p, "**")) {
		const struct token *t = P_TK(p);

		p->i++;
		n = p_bin(p, 'P', n, p_unary(p, true), t);
	}
	return n;
}

static struct node *p_math2(struct parser *p)
{
	struct node *n = p_pow(p);

	for (;;) {
		const struct token *t = P_TK(p);
		int op = p_is_op(p, "*")    ? '*'
		         : p_is_op(p, "/")  ? '/'
		         : p_is_op(p, "//") ? 'F'
		         : p_is_op(p, "%")  ? '%'
		                            : 0;

		if (!op)
			return n;
		p->i++;
		n = p_bin(p, op, n, p_pow(p), t);
	}
}

static struct node *p_concat(struct parser *p)
{
	struct node *n = p_math2(p);

	while (p_is_op(p, "~")) {
		const struct token *t = P_TK(p);

		p->i++;
		n = p_bin(p, '~', n, p_math2(p), t);
	}
	return n;
}

static struct node *p_math1(struct parser *p)
{
	struct node *n = p_concat(p);

	for (;;) {
		const struct token *t = P_TK(p);
		int op = p_is_op(p, "+") ? '+' : p_is_op(p, "-") ? '-' : 0;

		if (!op)
			return n;
		p->i++;
		n = p_bin(p, op, n, p_concat(p), t);
	}
}

static struct node *p_compare(struct parser *p)
{
	struct node *first = p_math1(p), *n = NULL;
	struct nvec ops_n = {0};
	int ops[64], nops = 0;

	for (;;) {
		const struct token *t = P_TK(p);
		int op = p_is_op(p, "==")     ? 'e'
		         : p_is_op(p, "!=")   ? 'n'
		         : p_is_op(p, "<")    ? '<'
		         : p_is_op(p, ">")    ? '>'
		         : p_is_op(p, "<=")   ? 'l'
		         : p_is_op(p, ">=")   ? 'g'
		         : p_is_name(p, "in") ? 'i'
		                              : 0;

		if (!op && p_is_name(p, "not") &&
		    p->lx->tk[p->i + 1].k == TK_NAME &&
		    p->lx->tk[p->i + 1].n == 2 &&
		    memcmp(p->lx->tk[p->i + 1].p, "in", 2) == 0) {
			op = 'I';
			p->i++;
		}
		if (!op)
			break;
		if (nops == 63)
			p_fail(p, t, "comparison chain too long");
		if (!n) {
			n = p_node(p, N_CMP, t);
			nv_push(p, &ops_n, first);
		}
		p->i++;
		ops[nops++] = op;
		nv_push(p, &ops_n, p_math1(p));
	}
	if (!n)
		return first;
	n->v = ops_n.v;
	n->n = ops_n.n;
	n->ops = tmpl_arena_alloc(&p->lx->t->arena, (size_t)nops * sizeof(int));
	memcpy(n->ops, ops, (size_t)nops * sizeof(int));
	return n;
}

static struct node *p_not(struct parser *p)
{
	const struct token *t = P_TK(p);

	if (p_is_name(p, "not")) {
		struct node *n = p_node(p, N_NOT, t);

		p->i++;
		p_enter(p);
		n->a = p_not(p);
		p->depth--;
		return n;
	}
	return p_compare(p);
}

static struct node *p_and(struct parser *p)
{
	struct node *n = p_not(p);

	while (p_is_name(p, "and")) {
		struct node *a = p_node(p, N_AND, P_TK(p));

		p->i++;
		a->a = n;
		a->b = p_not(p);
		n = a;
	}
	return n;
}

static struct node *p_or(struct parser *p)
{
	struct node *n = p_and(p);

	while (p_is_name(p, "or")) {
		struct node *a = p_node(p, N_OR, P_TK(p));

		p->i++;
		a->a = n;
		a->b = p_and(p);
		n = a;
	}
	return n;
}

static struct node *p_expr(struct parser *p, bool condexpr)
{
	const struct node *pending = p->pending;
	const struct token *pend_tk = p->pend_tk;
	struct node *n;

	p_enter(p);
	n = p_or(p);
	while (condexpr && p_is_name(p, "if")) {
		struct node *c = p_node(p, N_COND, P_TK(p));
		bool soft = p_soft(p, true);

		/* the value part is soft too: forgive what it named */
		p->pending = pending;
		p->pend_tk = pend_tk;
		p->i++;
		c->b = n;
		c->a = p_or(p);
		if (p_skip_name(p, "else"))
			c->c = p_expr(p, true);
		p_soft(p, soft);
		n = c;
	}
	p->depth--;
	return n;
}

/* Comma-separated expressions; a tuple if there is a comma. */
static struct node *p_tuple(struct parser *p, bool condexpr, bool explicit_)
{
	const struct token *t = P_TK(p);
	struct nvec items = {0};
	bool comma = false;
	struct node *n;

	for (;;) {
		if (items.n) {
			if (!p_skip_op(p, ","))
				break;
			comma = true;
		}
		if (explicit_ && p_is_op(p, ")"))
			break;
		if (!explicit_ && items.n &&
		    (P_TK(p)->k == TK_VEND || P_TK(p)->k == TK_BEND ||
		     p_is_name(p, "if") || p_is_name(p, "in")))
			break;
		nv_push(p, &items, p_expr(p, condexpr));
	}
	if (items.n == 1 && !comma)
		return items.v[0];
	if (!items.n && !explicit_)
		p_fail(p, t, "expected an expression");
	n = p_node(p, N_TUPLE, t);
	n->v = items.v;
	n->n = items.n;
	return n;
}

/* An assignment target: name, name.attr (WITH_NS) or names with commas. */
static struct node *p_target(struct parser *p, bool with_ns)
{
	const struct token *t = P_TK(p);
	struct nvec items = {0};
	char buf[64];

	for (;;) {
		const struct token *nt = P_TK(p);
		struct node *n;

		if (nt->k != TK_NAME)
			p_fail(p, nt, "expected a name to assign to, got %s",
			       p_desc(p, nt, buf, sizeof(buf)));
		p->i++;
		if (with_ns && p_is_op(p, ".") && !items.n) {
			const struct token *at;

			p->i++;
			at = P_TK(p);
			if (at->k != TK_NAME)
				p_fail(p, at, "expected an attribute name");
			p->i++;
			n = p_node(p, N_ATTR, nt);
			n->a = p_node(p, N_NAME, nt);
			n->a->s = p_strdup(p, nt->p, nt->n);
			n->a->sn = nt->n;
			n->s = p_strdup(p, at->p, at->n);
			n->sn = at->n;
			return n;
		}
		n = p_node(p, N_NAME, nt);
		n->s = p_strdup(p, nt->p, nt->n);
		n->sn = nt->n;
		nv_push(p, &items, n);
		if (!p_skip_op(p, ","))
			break;
	}
	if (items.n == 1)
		return items.v[0];
	{
		struct node *n = p_node(p, N_TUPLE, t);

		n->v = items.v;
		n->n = items.n;
		return n;
	}
}

static struct node *p_body(struct parser *p, const char *const *ends,
                           const char *tag, const struct token *open);

/* The statement after "{%" (current token is its name). */
static struct node *p_statement(struct parser *p)
{
	const struct token *t = P_TK(p);
	struct node *n;
	char buf[64];
	bool soft = p->soft; /* restored at the end: see struct parser */

	if (t->k != TK_NAME)
		p_fail(p, t, "tag name expected");
	p->i++;
	p_enter(p);
	if (t->n == 2 && !memcmp(t->p, "if", 2)) {
		static const char *const ends[] = {"elif", "else", "endif",
		                                   NULL};
		struct node *cur;

		p->soft = true;
		n = cur = p_node(p, N_IF, t);
		cur->a = p_tuple(p, false, false);
		p_expect_bend(p);
		for (;;) {
			cur->b = p_body(p, ends, "if", t);
			if (p_skip_name(p, "elif")) {
				struct node *e = p_node(p, N_IF, P_TK(p));

				e->a = p_tuple(p, false, false);
				p_expect_bend(p);
				cur->c = e;
				cur = e;
				continue;
			}
			if (p_skip_name(p, "else")) {
				static const char *const ends2[] = {"endif",
				                                    NULL};

				p_expect_bend(p);
				cur->c = p_body(p, ends2, "if", t);
			}
			p->i++; /* endif */
			break;
		}
	} else if (t->n == 3 && !memcmp(t->p, "for", 3)) {
		static const char *const ends[] = {"endfor", "else", NULL};
		static const char *const ends2[] = {"endfor", NULL};

		n = p_node(p, N_FOR, t);
		n->a = p_target(p, false);
		if (!p_skip_name(p, "in"))
			p_fail(p, P_TK(p), "expected 'in', got %s",
			       p_desc(p, P_TK(p), buf, sizeof(buf)));
		n->b = p_tuple(p, false, false);
		p->soft = false;
		if (p_skip_name(p, "if"))
			n->c = p_expr(p, true);
		if (p_is_name(p, "recursive"))
			p_fail(p, P_TK(p), "recursive loops are not supported");
		p_expect_bend(p);
		p->loops++;
		n->d = p_body(p, ends, "for", t);
		p->loops--;
		if (p_skip_name(p, "else")) {
			p_expect_bend(p);
			n->e = p_body(p, ends2, "for", t);
		}
		p->i++;
	} else if (t->n == 3 && !memcmp(t->p, "set", 3)) {
		struct node *target = p_target(p, true);

		if (p_skip_op(p, "=")) {
			n = p_node(p, N_SET, t);
			n->a = target;
			n->b = p_tuple(p, true, false);
		} else {
			static const char *const ends[] = {"endset", NULL};
			struct nvec filters = {0};

			n = p_node(p, N_SETBLOCK, t);
			n->a = target;
			if (target->k != N_NAME && target->k != N_ATTR)
				p_fail(p, t, "block set needs one name");
			while (p_is_op(p, "|")) {
				p->i++;
				{
					struct node *f =
					    p_node(p, N_FILTER, P_TK(p));

					p_dotted(p, f);
					if (p_is_op(p, "("))
						p_args(p, f);
					if (!tmpl_lib_has_filter(f->s))
						p_fail(p, P_TK(p),
						       "No filter named '%s'.",
						       f->s);
					nv_push(p, &filters, f);
				}
			}
			p_expect_bend(p);
			p->soft = false;
			n->b = p_body(p, ends, "set", t);
			n->v = filters.v;
			n->n = filters.n;
			p->i++;
			p_expect_bend(p);
			goto out;
		}
	} else if ((t->n == 5 && !memcmp(t->p, "break", 5)) ||
	           (t->n == 8 && !memcmp(t->p, "continue", 8))) {
		if (!p->loops)
			p_fail(p, t, "'%.*s' outside of a loop", (int)t->n,
			       t->p);
		n = p_node(p, t->n == 5 ? N_BREAK : N_CONTINUE, t);
	} else if (t->n == 5 && !memcmp(t->p, "macro", 5)) {
		static const char *const ends[] = {"endmacro", NULL};
		const struct token *nt = P_TK(p);
		struct nvec params = {0};
		int saved = p->loops;

		p->soft = false;
		n = p_node(p, N_MACRO, t);
		if (nt->k != TK_NAME)
			p_fail(p, nt, "expected macro name");
		n->s = p_strdup(p, nt->p, nt->n);
		n->sn = nt->n;
		p->i++;
		p_expect_op(p, "(");
		while (!p_is_op(p, ")")) {
			struct node *prm;

			if (params.n)
				p_expect_op(p, ",");
			if (P_TK(p)->k != TK_NAME)
				p_fail(p, P_TK(p), "expected parameter name");
			prm = p_node(p, N_NAME, P_TK(p));
			prm->s = p_strdup(p, P_TK(p)->p, P_TK(p)->n);
			prm->sn = P_TK(p)->n;
			p->i++;
			if (p_skip_op(p, "="))
				prm->a = p_expr(p, true);
			nv_push(p, &params, prm);
		}
		p->i++;
		p_expect_bend(p);
		p->loops = 0;
		n->b = p_body(p, ends, "macro", t);
		p->loops = saved;
		n->v = params.v;
		n->n = params.n;
		p->i++;
	} else if (t->n == 4 && !memcmp(t->p, "call", 4)) {
		static const char *const ends[] = {"endcall", NULL};
		struct nvec params = {0};
		int saved = p->loops;

		n = p_node(p, N_CALLBLOCK, t);
		if (p_skip_op(p, "(")) {
			while (!p_is_op(p, ")")) {
				struct node *prm;

				if (params.n)
					p_expect_op(p, ",");
				if (P_TK(p)->k != TK_NAME)
					p_fail(p, P_TK(p),
					       "expected parameter name");
				prm = p_node(p, N_NAME, P_TK(p));
				prm->s = p_strdup(p, P_TK(p)->p, P_TK(p)->n);
				prm->sn = P_TK(p)->n;
				p->i++;
				if (p_skip_op(p, "="))
					prm->a = p_expr(p, true);
				nv_push(p, &params, prm);
			}
			p->i++;
		}
		n->a = p_expr(p, true);
		if (n->a->k != N_CALL)
			p_fail(p, t, "expected a call expression after 'call'");
		p_expect_bend(p);
		p->loops = 0;
		p->soft = false;
		n->b = p_body(p, ends, "call", t);
		p->loops = saved;
		n->v = params.v;
		n->n = params.n;
		p->i++;
	} else if (t->n == 6 && !memcmp(t->p, "filter", 6)) {
		static const char *const ends[] = {"endfilter", NULL};
		struct nvec filters = {0};

		n = p_node(p, N_FILTERBLOCK, t);
		p->soft = false;
		do {
			struct node *f = p_node(p, N_FILTER, P_TK(p));

			p_dotted(p, f);
			if (p_is_op(p, "("))
				p_args(p, f);
			if (!tmpl_lib_has_filter(f->s))
				p_fail(p, P_TK(p), "No filter named '%s'.",
				       f->s);
			nv_push(p, &filters, f);
		} while (p_skip_op(p, "|"));
		p_expect_bend(p);
		n->b = p_body(p, ends, "filter", t);
		n->v = filters.v;
		n->n = filters.n;
		p->i++;
	} else if (t->n == 10 && !memcmp(t->p, "generation", 10)) {
		/* transformers' AssistantTracker: renders its body as is */
		static const char *const ends[] = {"endgeneration", NULL};

		p_expect_bend(p);
		p->soft = false;
		n = p_body(p, ends, "generation", t);
		p->i++;
	} else {
		p_fail(p, t, "Encountered unknown tag '%.*s'.",
		       (int)(t->n > 40 ? 40 : t->n), t->p);
	}
	p_expect_bend(p);
out:
	p->soft = soft;
	p->depth--;
	return n;
}

/* Statements until one of ENDS (NULL: end of template).  Leaves the
 * parser at the end tag's name. */
static struct node *p_body(struct parser *p, const char *const *ends,
                           const char *tag, const struct token *open)
{
	struct node *body = p_node(p, N_BODY, P_TK(p));
	struct nvec v = {0};

	for (;;) {
		const struct token *t = P_TK(p);

		if (t->k == TK_EOF) {
			if (ends)
				p_fail(p, open,
				       "Unexpected end of template. "
				       "Jinja was looking for the "
				       "following tags: '%s'. The "
				       "innermost block that needs to "
				       "be closed is '%s'.",
				       ends[0], tag);
			break;
		}
		if (t->k == TK_DATA) {
			struct node *n = p_node(p, N_TEXT, t);

			n->s = t->p;
			n->sn = t->n;
			nv_push(p, &v, n);
			p->i++;
		} else if (t->k == TK_VBEGIN) {
			struct node *n = p_node(p, N_OUT, t);
			char buf[64];

			p->i++;
			n->a = p_tuple(p, true, false);
			if (P_TK(p)->k != TK_VEND)
				p_fail(p, P_TK(p),
				       "expected end of print "
				       "statement, got %s",
				       p_desc(p, P_TK(p), buf, sizeof(buf)));
			p->i++;
			p_check_pending(p);
			nv_push(p, &v, n);
		} else if (t->k == TK_BBEGIN) {
			const struct token *nt = &p->lx->tk[p->i + 1];
			size_t k;

			for (k = 0; ends && ends[k]; k++) {
				if (nt->k == TK_NAME &&
				    nt->n == strlen(ends[k]) &&
				    !memcmp(nt->p, ends[k], nt->n)) {
					p->i++;
					goto done;
				}
			}
			if (nt->k == TK_NAME &&
			    ((nt->n > 3 && !memcmp(nt->p, "end", 3)) ||
			     (nt->n == 4 && !memcmp(nt->p, "else", 4)) ||
			     (nt->n == 4 && !memcmp(nt->p, "elif", 4))))
				p_fail(p, nt, "Encountered unknown tag '%.*s'.",
				       (int)(nt->n > 40 ? 40 : nt->n), nt->p);
			p->i++;
			nv_push(p, &v, p_statement(p));
			p_check_pending(p);
		} else {
			p_fail(p, t, "unexpected token");
		}
	}
done:
	body->v = v.v;
	body->n = v.n;
	return body;
}

/* ------------------------------------------------------------ entry points */

/* Normalize, lex and parse SRC into T (errors longjmp to t->fail). */
static void compile_into(struct tmpl *t, const char *src, size_t len)
{
	struct lexer lx;
	struct parser p;
	char *norm;
	size_t i, n = 0;

	/* normalize newlines; drop one trailing newline */
	norm = tmpl_arena_alloc(&t->arena, len + 1);
	for (i = 0; i < len; i++) {
		if (src[i] == '\r') {
			norm[n++] = '\n';
			if (i + 1 < len && src[i + 1] == '\n')
				i++;
		} else {
			norm[n++] = src[i];
		}
	}
	if (n && norm[n - 1] == '\n')
		n--;
	memset(&lx, 0, sizeof(lx));
	lx.t = t;
	lx.s = norm;
	lx.len = n;
	lx.pos_line = 1;
	lx.pos_col = 1;
	/* the source must be UTF-8 (jinja2 works on str) */
	for (i = 0; i < n;) {
		size_t k;

		if (tmpl_lib_u8dec(norm + i, n - i, &k) == UINT32_MAX)
			lx_fail(&lx, i, "template is not valid UTF-8");
		i += k;
	}
	lx_run(&lx);
	memset(&p, 0, sizeof(p));
	p.lx = &lx;
	t->root = p_body(&p, NULL, NULL, NULL);
}

int tmpl_compile(const char *src, size_t len, struct tmpl **out, char *err,
                 size_t errlen)
{
	struct tmpl *volatile t;

	*out = NULL;
	if (err && errlen)
		err[0] = '\0';
	t = calloc(1, sizeof(*t));
	if (!t) {
		if (err && errlen)
			snprintf(err, errlen, "out of memory");
		return TMPL_ENOMEM;
	}
	t->fail.err = err;
	t->fail.errlen = errlen;
	t->arena.fail = &t->fail;
	t->arena.max = len > ((size_t)1 << 26)
	                   ? SIZE_MAX / 4
	                   : (len * 256 + ((size_t)4 << 20));
	if (setjmp(t->fail.jb)) {
		int code = t->fail.code;

		tmpl_arena_free(&t->arena);
		free(t);
		return code;
	}
	compile_into(t, src, len);
	*out = t;
	return TMPL_OK;
}

void tmpl_free(struct tmpl *t)
{
	if (!t)
		return;
	tmpl_arena_free(&t->arena);
	free(t);
}

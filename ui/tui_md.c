/*
 * tui_md.c - Markdown to screen lines through md4c (tui_md.h).
 *
 * Containers (block quotes, list items) push a prefix: the first line of
 * a list item shows its bullet, the lines after it the indentation; a
 * paragraph's prefixes are the concatenation of the containers' own.
 */
#include "tui_md.h"

#include <md4c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TUI_MD_DEPTH 16 /* nesting kept track of; deeper nests flatten */
#define TUI_MD_PAD   16 /* NUL bytes after md4c's input (tui_md_parse) */

/* One container: its prefixes, and for lists the next number. */
struct tui_md_ctx {
	char first[24]; /* prefix of its first line ("• ", "12. ", "┃ ") */
	char cont[24];  /* prefix of the lines after */
	bool used;      /* its first line is out */
	bool list;      /* a list (ul/ol), not an item or a quote */
	bool ordered;   /* an ordered list */
	unsigned next;  /* the next item's number */
	uint16_t at;    /* the prefix's attribute */
};

/* The renderer's state during one md_parse. */
struct tui_md_r {
	struct tui_lay *y;
	struct tui_md_ctx ctx[TUI_MD_DEPTH];
	int n_ctx;
	uint16_t at[TUI_MD_DEPTH]; /* span attributes, innermost last */
	int n_at;
	uint16_t block_at; /* attribute of the block's text (heading, code) */
	bool para;         /* a paragraph is open in the layout */
	bool code;         /* inside a code block */
	bool any;          /* a block was laid out */
	int cell;          /* table cell index in the row */
};

/* The attribute text gets now. */
static uint16_t tui_md_at(const struct tui_md_r *r)
{
	return (uint16_t)((r->n_at ? r->at[r->n_at - 1] : 0) | r->block_at);
}

/* Close the open paragraph, if any. */
static void tui_md_para_end(struct tui_md_r *r)
{
	if (r->para)
		tui_lay_end(r->y);
	r->para = false;
}

/* Open a paragraph with the containers' prefixes (and the code bar). */
static void tui_md_para_begin(struct tui_md_r *r, bool code)
{
	char first[256] = "", cont[256] = "";
	uint16_t at = 0;

	tui_md_para_end(r);
	for (int i = 0; i < r->n_ctx; i++) {
		struct tui_md_ctx *c = &r->ctx[i];

		if (c->list)
			continue;
		strncat(first, c->used ? c->cont : c->first,
		        sizeof(first) - strlen(first) - 1);
		strncat(cont, c->cont, sizeof(cont) - strlen(cont) - 1);
		c->used = true;
		at = c->at;
	}
	if (code) {
		strncat(first, "│ ", sizeof(first) - strlen(first) - 1);
		strncat(cont, "│ ", sizeof(cont) - strlen(cont) - 1);
		at = TUI_COLOR(TUI_C_CODE);
	}
	tui_lay_para(r->y, first, at, cont, at, code);
	r->para = true;
	r->any = true;
}

/* A blank line between blocks, except before the first and right after
   a list item's bullet. */
static void tui_md_gap(struct tui_md_r *r)
{
	if (!r->any)
		return;
	if (r->n_ctx && !r->ctx[r->n_ctx - 1].list &&
	    !r->ctx[r->n_ctx - 1].used)
		return;
	tui_lay_blank(r->y);
}

/* Push a container. */
static struct tui_md_ctx *tui_md_push(struct tui_md_r *r)
{
	struct tui_md_ctx *c;

	if (r->n_ctx == TUI_MD_DEPTH)
		return NULL;
	c = &r->ctx[r->n_ctx++];
	memset(c, 0, sizeof(*c));
	return c;
}

/* The innermost list, or NULL. */
static struct tui_md_ctx *tui_md_list(struct tui_md_r *r)
{
	for (int i = r->n_ctx - 1; i >= 0; i--)
		if (r->ctx[i].list)
			return &r->ctx[i];
	return NULL;
}

static int tui_md_enter_block(MD_BLOCKTYPE t, void *detail, void *ud)
{
	struct tui_md_r *r = ud;
	struct tui_md_ctx *c, *l;

	switch (t) {
	case MD_BLOCK_DOC:
	case MD_BLOCK_THEAD:
	case MD_BLOCK_TBODY:
		break;
	case MD_BLOCK_QUOTE:
		tui_md_para_end(r);
		tui_md_gap(r);
		if ((c = tui_md_push(r)) != NULL) {
			strcpy(c->first, "┃ ");
			strcpy(c->cont, "┃ ");
			c->at = TUI_A_DIM;
		}
		break;
	case MD_BLOCK_UL:
	case MD_BLOCK_OL:
		tui_md_para_end(r);
		if (tui_md_list(r) == NULL)
			tui_md_gap(r);
		if ((c = tui_md_push(r)) != NULL) {
			c->list = true;
			c->ordered = t == MD_BLOCK_OL;
			c->next = c->ordered
			              ? ((MD_BLOCK_OL_DETAIL *)detail)->start
			              : 0;
		}
		break;
	case MD_BLOCK_LI:
		tui_md_para_end(r);
		l = tui_md_list(r);
		if ((c = tui_md_push(r)) != NULL) {
			if (l && l->ordered) {
				snprintf(c->first, sizeof(c->first), "%u. ",
				         l->next++);
				size_t w = strlen(c->first);

				memset(c->cont, ' ', w);
				c->cont[w] = '\0';
			} else {
				strcpy(c->first, "• ");
				strcpy(c->cont, "  ");
			}
			MD_BLOCK_LI_DETAIL *d = detail;

			if (d && d->is_task) /* the box instead of [x] */
				strncat(
				    c->first, d->task_mark == ' ' ? "☐ " : "☑ ",
				    sizeof(c->first) - strlen(c->first) - 1);
		}
		break;
	case MD_BLOCK_HR:
		tui_md_para_end(r);
		tui_md_gap(r);
		tui_md_para_begin(r, false);
		for (int i = 0; i < r->y->width && i < 40; i++)
			tui_lay_text(r->y, "─", 3, TUI_A_DIM);
		tui_md_para_end(r);
		break;
	case MD_BLOCK_H:
		tui_md_gap(r);
		tui_md_para_begin(r, false);
		r->block_at =
		    TUI_A_BOLD | TUI_COLOR(TUI_C_HEADING) |
		    (((MD_BLOCK_H_DETAIL *)detail)->level <= 2 ? TUI_A_UNDER
		                                               : 0);
		break;
	case MD_BLOCK_CODE:
	case MD_BLOCK_HTML:
		tui_md_gap(r);
		tui_md_para_begin(r, true);
		r->code = true;
		r->block_at = TUI_COLOR(TUI_C_CODE);
		break;
	case MD_BLOCK_P:
		tui_md_gap(r);
		tui_md_para_begin(r, false);
		break;
	case MD_BLOCK_TABLE:
		tui_md_para_end(r);
		tui_md_gap(r);
		break;
	case MD_BLOCK_TR:
		tui_md_para_begin(r, false);
		r->cell = 0;
		break;
	case MD_BLOCK_TH:
	case MD_BLOCK_TD:
		if (r->cell++ > 0)
			tui_lay_text(r->y, " │ ", 5, TUI_A_DIM);
		if (t == MD_BLOCK_TH)
			r->block_at = TUI_A_BOLD;
		break;
	}
	return 0;
}

static int tui_md_leave_block(MD_BLOCKTYPE t, void *detail, void *ud)
{
	struct tui_md_r *r = ud;

	(void)detail;
	switch (t) {
	case MD_BLOCK_P:
	case MD_BLOCK_H:
	case MD_BLOCK_CODE:
	case MD_BLOCK_HTML:
	case MD_BLOCK_TR:
		tui_md_para_end(r);
		r->block_at = 0;
		r->code = false;
		break;
	case MD_BLOCK_TH:
	case MD_BLOCK_TD:
		r->block_at = 0;
		break;
	case MD_BLOCK_LI:
	case MD_BLOCK_QUOTE:
	case MD_BLOCK_UL:
	case MD_BLOCK_OL:
		tui_md_para_end(r);
		if (r->n_ctx)
			r->n_ctx--;
		break;
	default:
		break;
	}
	return 0;
}

static int tui_md_enter_span(MD_SPANTYPE t, void *detail, void *ud)
{
	struct tui_md_r *r = ud;
	uint16_t at = r->n_at ? r->at[r->n_at - 1] : 0;

	(void)detail;
	switch (t) {
	case MD_SPAN_EM:
		at |= TUI_A_ITALIC;
		break;
	case MD_SPAN_STRONG:
		at |= TUI_A_BOLD;
		break;
	case MD_SPAN_CODE:
		at = (uint16_t)((at & 0xff) | TUI_COLOR(TUI_C_CODE));
		break;
	case MD_SPAN_A:
	case MD_SPAN_U:
	case MD_SPAN_WIKILINK:
		at |= TUI_A_UNDER;
		break;
	case MD_SPAN_DEL:
		at |= TUI_A_DIM;
		break;
	default:
		break;
	}
	if (r->n_at < TUI_MD_DEPTH)
		r->at[r->n_at++] = at;
	return 0;
}

static int tui_md_leave_span(MD_SPANTYPE t, void *detail, void *ud)
{
	struct tui_md_r *r = ud;

	(void)t;
	(void)detail;
	if (r->n_at)
		r->n_at--;
	return 0;
}

/* The character an entity such as &amp; or &#233; stands for, as UTF-8
   in OUT; 0 when unknown (then shown as written). */
static size_t tui_md_entity(const char *s, size_t n, char *out)
{
	static const struct {
		const char *name, *text;
	} named[] = {{"&amp;", "&"},   {"&lt;", "<"},   {"&gt;", ">"},
	             {"&quot;", "\""}, {"&apos;", "'"}, {"&nbsp;", " "}};
	unsigned long cp = 0;

	for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++)
		if (strlen(named[i].name) == n &&
		    !memcmp(s, named[i].name, n)) {
			strcpy(out, named[i].text);
			return strlen(out);
		}
	if (n < 4 || s[1] != '#')
		return 0;
	cp = s[2] == 'x' || s[2] == 'X' ? strtoul(s + 3, NULL, 16)
	                                : strtoul(s + 2, NULL, 10);
	if (cp == 0 || cp > 0x10ffff)
		return 0;
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

static int tui_md_text(MD_TEXTTYPE t, const MD_CHAR *s, MD_SIZE n, void *ud)
{
	struct tui_md_r *r = ud;
	char ent[8];
	size_t k;

	if (!r->para) /* text straight in a tight list item */
		tui_md_para_begin(r, false);
	switch (t) {
	case MD_TEXT_BR:
	case MD_TEXT_SOFTBR:
		/* a model's line breaks are meant (verse, addresses, steps
		   without list marks): kept, unlike Markdown's soft breaks */
		tui_lay_text(r->y, "\n", 1, tui_md_at(r));
		break;
	case MD_TEXT_NULLCHAR:
		tui_lay_text(r->y, "\xef\xbf\xbd", 3, tui_md_at(r));
		break;
	case MD_TEXT_ENTITY:
		k = tui_md_entity(s, n, ent);
		if (k)
			tui_lay_text(r->y, ent, k, tui_md_at(r));
		else
			tui_lay_text(r->y, s, n, tui_md_at(r));
		break;
	default:
		tui_lay_text(r->y, s, n, tui_md_at(r));
		break;
	}
	return 0;
}

/*
 * md_parse on a copy of TEXT[0, len) followed by TUI_MD_PAD NUL bytes;
 * -1 when out of memory. md4c 0.4.8 (Debian 12's) reads past the end of
 * its input where the text ends inside a link's destination ("[](y", as
 * a reply streaming in has it): fuzz/fuzz_md found it taking the length
 * of a text run from the byte after, a read of gigabytes. A NUL there
 * ends the construct (tests/data/md/crashers/unclosed-link-dest).
 */
static int tui_md_parse(const char *text, size_t len, const MD_PARSER *p,
                        void *ud)
{
	char *copy = malloc(len + TUI_MD_PAD);
	int rc;

	if (copy == NULL)
		return -1;
	memcpy(copy, text, len);
	memset(copy + len, 0, TUI_MD_PAD);
	rc = md_parse(copy, (MD_SIZE)len, p, ud);
	free(copy);
	return rc;
}

int tui_md_lay(struct tui_lay *y, const char *text, size_t len, bool markdown)
{
	MD_PARSER p = {0};
	struct tui_md_r r;

	if (markdown) {
		memset(&r, 0, sizeof(r));
		r.y = y;
		p.flags = MD_DIALECT_GITHUB | MD_FLAG_NOHTML;
		p.enter_block = tui_md_enter_block;
		p.leave_block = tui_md_leave_block;
		p.enter_span = tui_md_enter_span;
		p.leave_span = tui_md_leave_span;
		p.text = tui_md_text;
		if (tui_md_parse(text, len, &p, &r) == 0) {
			tui_md_para_end(&r);
			if (!r.any) { /* an empty reply still takes a line */
				tui_lay_para(y, NULL, 0, NULL, 0, false);
				tui_lay_end(y);
			}
			return 0;
		}
		tui_md_para_end(&r);
	}
	tui_lay_para(y, NULL, 0, NULL, 0, false);
	/* trailing newlines would only add empty lines */
	while (len > 0 && text[len - 1] == '\n')
		len--;
	tui_lay_text(y, text, len, 0);
	tui_lay_end(y);
	return markdown ? -1 : 0;
}

/* Collecting one code block's text. */
struct tui_md_code {
	int nth, seen; /* wanted (1-based), blocks so far */
	bool in;       /* inside the wanted block */
	char *buf;     /* its text (owned until returned) */
	size_t n, cap;
};

static int tui_md_code_enter(MD_BLOCKTYPE t, void *detail, void *ud)
{
	struct tui_md_code *c = ud;

	(void)detail;
	if (t == MD_BLOCK_CODE)
		c->in = ++c->seen == c->nth;
	return 0;
}

static int tui_md_code_leave(MD_BLOCKTYPE t, void *detail, void *ud)
{
	struct tui_md_code *c = ud;

	(void)detail;
	if (t == MD_BLOCK_CODE)
		c->in = false;
	return 0;
}

static int tui_md_code_span(MD_SPANTYPE t, void *detail, void *ud)
{
	(void)t;
	(void)detail;
	(void)ud;
	return 0;
}

static int tui_md_code_text(MD_TEXTTYPE t, const MD_CHAR *s, MD_SIZE n,
                            void *ud)
{
	struct tui_md_code *c = ud;

	(void)t;
	if (!c->in)
		return 0;
	if (c->n + n + 1 > c->cap) {
		size_t cap = (c->n + n + 1) * 2;
		char *b = realloc(c->buf, cap);

		if (b == NULL)
			return -1;
		c->buf = b;
		c->cap = cap;
	}
	memcpy(c->buf + c->n, s, n);
	c->n += n;
	c->buf[c->n] = '\0';
	return 0;
}

char *tui_md_code_block(const char *text, size_t len, int nth, size_t *out_len,
                        int *count)
{
	MD_PARSER p = {0};
	struct tui_md_code c;

	memset(&c, 0, sizeof(c));
	c.nth = nth;
	p.flags = MD_DIALECT_GITHUB | MD_FLAG_NOHTML;
	p.enter_block = tui_md_code_enter;
	p.leave_block = tui_md_code_leave;
	p.enter_span = tui_md_code_span;
	p.leave_span = tui_md_code_span;
	p.text = tui_md_code_text;
	if (tui_md_parse(text, len, &p, &c) != 0) {
		free(c.buf);
		return NULL;
	}
	if (count)
		*count = c.seen;
	if (c.buf == NULL && nth >= 1 && nth <= c.seen)
		c.buf = calloc(1, 1); /* an empty block */
	*out_len = c.n;
	return c.buf;
}

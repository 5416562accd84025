/*
 * tui_lines.c - styled lines and the word-wrapping layout (tui_lines.h).
 */
#include "tui_lines.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define TUI_REPLACEMENT 0xFFFD

void tui_lines_clear(struct tui_lines *l)
{
	for (int i = 0; i < l->n; i++) {
		free(l->v[i].wc);
		free(l->v[i].at);
	}
	free(l->v);
	memset(l, 0, sizeof(*l));
}

int tui_lines_wc_cols(wchar_t c)
{
	if (c < 0x20 || (c >= 0x7f && c < 0xa0) || c > 0x10ffff ||
	    (c >= 0xd800 && c < 0xe000))
		return -1;
	/* wcwidth is what the terminal library draws by: a character it
	   calls unprintable is replaced rather than drawn out of step */
	if (wcwidth(c) < 0)
		return -1;
	return utf8proc_charwidth((utf8proc_int32_t)c);
}

/* Make room for one more cell in cur. 0 or -1 (no memory: dropped). */
static int tui_lay_grow(struct tui_lay *y)
{
	if (y->cur.n < y->cap)
		return 0;
	int cap = y->cap ? y->cap * 2 : 128;
	wchar_t *wc = realloc(y->cur.wc, (size_t)cap * sizeof(*wc));

	if (wc == NULL)
		return -1;
	y->cur.wc = wc;
	uint16_t *at = realloc(y->cur.at, (size_t)cap * sizeof(*at));

	if (at == NULL)
		return -1;
	y->cur.at = at;
	y->cap = cap;
	return 0;
}

/* Append one cell of W columns to cur (no wrapping here). */
static void tui_lay_cell(struct tui_lay *y, wchar_t c, int w, uint16_t at)
{
	if (tui_lay_grow(y))
		return;
	y->cur.wc[y->cur.n] = c;
	y->cur.at[y->cur.n] = at;
	y->cur.n++;
	y->cur.cols += w;
}

/* Copy cur[0, n) to a new line of out. */
static void tui_lay_emit(struct tui_lay *y, int n, int cols)
{
	struct tui_lines *o = y->out;
	struct tui_line *l;

	if (o->n == o->cap) {
		int cap = o->cap ? o->cap * 2 : 32;
		struct tui_line *v = realloc(o->v, (size_t)cap * sizeof(*v));

		if (v == NULL)
			return;
		o->v = v;
		o->cap = cap;
	}
	l = &o->v[o->n];
	/* one more, NUL: ncurses' waddnwstr reads the element after the
	   last one it draws (to attach combining characters), and at the end
	   of a page that read faulted (ASan's t_tui_pane run) */
	l->wc = malloc((size_t)(n + 1) * sizeof(*l->wc));
	l->at = malloc((size_t)(n ? n : 1) * sizeof(*l->at));
	if (l->wc == NULL || l->at == NULL) {
		free(l->wc);
		free(l->at);
		return;
	}
	if (n > 0) { /* cur.wc is NULL before the first cell */
		memcpy(l->wc, y->cur.wc, (size_t)n * sizeof(*l->wc));
		memcpy(l->at, y->cur.at, (size_t)n * sizeof(*l->at));
	}
	l->wc[n] = L'\0';
	l->n = n;
	l->cols = cols;
	o->n++;
}

/* Start a line with the first or continuation prefix. The prefix takes
   at most half the width, so that text always has room. */
static void tui_lay_start(struct tui_lay *y)
{
	const wchar_t *p = y->first ? y->pre1 : y->pre2;
	uint16_t at = y->first ? y->at1 : y->at2;

	y->cur.n = 0;
	y->cur.cols = 0;
	for (; *p; p++) {
		int w = tui_lines_wc_cols(*p);

		if (w < 0 || y->cur.cols + w > y->width / 2)
			break;
		tui_lay_cell(y, *p, w, at);
	}
	y->pre_n = y->cur.n;
	y->col0 = y->cur.cols;
	y->brk = -1;
	y->open = true;
	y->first = false;
}

/* Emit cur and leave no line open. */
static void tui_lay_flush(struct tui_lay *y)
{
	if (!y->open)
		tui_lay_start(y);
	tui_lay_emit(y, y->cur.n, y->cur.cols);
	y->open = false;
}

/* Columns of cur[from, to). */
static int tui_lay_cols(const struct tui_lay *y, int from, int to)
{
	int c = 0;

	for (int i = from; i < to; i++) {
		int w = tui_lines_wc_cols(y->cur.wc[i]);

		c += w > 0 ? w : 0;
	}
	return c;
}

/* Wrap before a character of W columns that does not fit: at the last
   space (text) or here (code, or a word longer than the line). */
static void tui_lay_wrap(struct tui_lay *y)
{
	if (!y->code && y->brk > y->pre_n && y->brk <= y->cur.n) {
		int keep = y->brk, rest = y->cur.n - y->brk, i;
		wchar_t tail_wc[256];
		uint16_t tail_at[256];

		if (rest <= 256) {
			memcpy(tail_wc, y->cur.wc + keep,
			       (size_t)rest * sizeof(wchar_t));
			memcpy(tail_at, y->cur.at + keep,
			       (size_t)rest * sizeof(uint16_t));
			while (keep > y->pre_n && y->cur.wc[keep - 1] == L' ')
				keep--; /* no trailing spaces */
			tui_lay_emit(y, keep, tui_lay_cols(y, 0, keep));
			tui_lay_start(y);
			for (i = 0; i < rest; i++)
				tui_lay_cell(y, tail_wc[i],
				             tui_lines_wc_cols(tail_wc[i]) > 0
				                 ? tui_lines_wc_cols(tail_wc[i])
				                 : 0,
				             tail_at[i]);
			return;
		}
	}
	tui_lay_flush(y);
	tui_lay_start(y);
}

/* Add one character with wrapping. */
static void tui_lay_put(struct tui_lay *y, wchar_t c, uint16_t at)
{
	int w;

	if (!y->open)
		tui_lay_start(y);
	if (c == L'\n') {
		tui_lay_flush(y);
		return;
	}
	if (c == L'\t') {
		int n = TUI_TAB - (y->cur.cols - y->col0) % TUI_TAB;

		while (n-- > 0)
			tui_lay_put(y, L' ', at);
		return;
	}
	w = tui_lines_wc_cols(c);
	if (w < 0) {
		c = TUI_REPLACEMENT;
		w = 1;
	}
	if (w == 0 && y->cur.n == y->pre_n) {
		/* a combining mark with nothing to combine with */
		tui_lay_cell(y, L' ', 1, at);
	}
	if (c == L' ' && !y->code) {
		if (y->cur.cols + 1 > y->width) {
			tui_lay_flush(y); /* the space is the break */
			tui_lay_start(y);
			return;
		}
		tui_lay_cell(y, c, 1, at);
		y->brk = y->cur.n;
		return;
	}
	if (y->cur.cols + w > y->width && y->cur.n > y->pre_n)
		tui_lay_wrap(y);
	if (y->cur.cols + w > y->width)
		return; /* wider than the whole line (width 1, a CJK char) */
	tui_lay_cell(y, c, w, at);
}

void tui_lay_init(struct tui_lay *y, struct tui_lines *out, int width)
{
	memset(y, 0, sizeof(*y));
	y->out = out;
	y->width = width < 1 ? 1 : width;
	y->first = true;
}

/* Decode UTF-8 prefix S into P (at most 63 characters). */
static void tui_lay_prefix(wchar_t *p, const char *s)
{
	size_t n = 0, len = s ? strlen(s) : 0, i = 0;

	while (i < len && n < 63) {
		utf8proc_int32_t cp;
		utf8proc_ssize_t k =
		    utf8proc_iterate((const utf8proc_uint8_t *)s + i,
		                     (utf8proc_ssize_t)(len - i), &cp);

		if (k <= 0)
			break;
		p[n++] = (wchar_t)cp;
		i += (size_t)k;
	}
	p[n] = L'\0';
}

void tui_lay_para(struct tui_lay *y, const char *first, uint16_t first_at,
                  const char *cont, uint16_t cont_at, bool code)
{
	if (y->open)
		tui_lay_flush(y);
	tui_lay_prefix(y->pre1, first);
	tui_lay_prefix(y->pre2, cont);
	y->at1 = first_at;
	y->at2 = cont_at;
	y->code = code;
	y->first = true;
	y->open = false;
}

void tui_lay_text(struct tui_lay *y, const char *s, size_t len, uint16_t at)
{
	size_t i = 0;

	while (i < len) {
		utf8proc_int32_t cp;
		utf8proc_ssize_t k =
		    utf8proc_iterate((const utf8proc_uint8_t *)s + i,
		                     (utf8proc_ssize_t)(len - i), &cp);

		if (k <= 0) {
			cp = TUI_REPLACEMENT;
			k = 1;
		}
		if (cp == '\r' && i + 1 < len && s[i + 1] == '\n') {
			i++;
			continue;
		}
		tui_lay_put(y, (wchar_t)cp, at);
		i += (size_t)k;
	}
}

void tui_lay_end(struct tui_lay *y)
{
	if (y->open || y->first)
		tui_lay_flush(y);
	y->first = true;
	y->pre1[0] = y->pre2[0] = L'\0';
	y->code = false;
}

void tui_lay_blank(struct tui_lay *y)
{
	const struct tui_lines *o = y->out;

	if (y->open)
		tui_lay_flush(y);
	if (o->n == 0 || o->v[o->n - 1].n == 0)
		return;
	y->cur.n = 0;
	y->cur.cols = 0;
	tui_lay_emit(y, 0, 0);
}

void tui_lay_done(struct tui_lay *y)
{
	if (y->open)
		tui_lay_flush(y);
	free(y->cur.wc);
	free(y->cur.at);
	y->cur.wc = NULL;
	y->cur.at = NULL;
	y->cap = 0;
}

int tui_lines_cols(const char *s, size_t len)
{
	size_t i = 0;
	int cols = 0;

	while (i < len) {
		utf8proc_int32_t cp;
		utf8proc_ssize_t k =
		    utf8proc_iterate((const utf8proc_uint8_t *)s + i,
		                     (utf8proc_ssize_t)(len - i), &cp);
		int w;

		if (k <= 0) {
			cp = TUI_REPLACEMENT;
			k = 1;
		}
		w = tui_lines_wc_cols((wchar_t)cp);
		cols += w < 0 ? 1 : w;
		i += (size_t)k;
	}
	return cols;
}

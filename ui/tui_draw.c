/*
 * tui_draw.c - one frame of the full-screen UI: the transcript (bottom
 * anchored, scrolled back by t->scroll lines), the status bar, the input
 * area; the help and list screens. Everything is drawn into ncurses'
 * virtual screen; doupdate() works out the difference and tui_out_flush()
 * sends it to the terminal in one write (tui_out.c).
 */
#include "tui_int.h"

#include "tui_health.h"
#include "tui_md.h"

#include <curses.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TUI_GAUGE         6   /* cells of the context gauge */
#define TUI_PANE_SIDE_MIN 110 /* columns from which the pane is at the side */
#define TUI_PANE_SIDE_W   60  /* its width there, divider included */
#define TUI_PANE_BELOW_H  16  /* rows of the pane below the transcript */

void tui_draw_colors(struct tui *t)
{
	const char *nc = getenv("NO_COLOR");

	/* https://no-color.org: set and not empty turns colour off */
	t->color = has_colors() && !(nc && *nc);
	if (!t->color)
		return;
	start_color();
	use_default_colors();
	init_pair(TUI_C_USER, COLOR_GREEN, -1);
	init_pair(TUI_C_ASSISTANT, COLOR_CYAN, -1);
	init_pair(TUI_C_SYSTEM, COLOR_MAGENTA, -1);
	init_pair(TUI_C_CODE, COLOR_YELLOW, -1);
	init_pair(TUI_C_HEADING, COLOR_BLUE, -1);
	init_pair(TUI_C_NOTICE, COLOR_YELLOW, -1);
	init_pair(TUI_C_MATCH, COLOR_BLACK, COLOR_YELLOW);
	init_pair(TUI_C_ERROR, COLOR_RED, -1);
	init_pair(TUI_C_PLOW, COLOR_RED, -1);
	init_pair(TUI_C_PMID, COLOR_YELLOW, -1);
}

/* The curses attribute and colour pair of cell attribute A. Without
   colours, roles and matches fall back to bold and reverse video. */
static attr_t tui_draw_attr(const struct tui *t, uint16_t a, short *pair)
{
	attr_t r = 0;
	enum tui_color c = TUI_COLOR_OF(a);

	if (a & TUI_A_BOLD)
		r |= A_BOLD;
	if (a & TUI_A_ITALIC)
		r |= A_ITALIC;
	if (a & TUI_A_UNDER)
		r |= A_UNDERLINE;
	if (a & TUI_A_DIM)
		r |= A_DIM;
	if (a & TUI_A_REVERSE)
		r |= A_REVERSE;
	*pair = 0;
	if (c == TUI_C_NONE)
		return r;
	if (t->color) {
		*pair = (short)c;
		return r;
	}
	if (c == TUI_C_MATCH)
		r |= A_REVERSE;
	else if (c == TUI_C_PLOW) /* the non-colour cue of shading */
		r |= A_UNDERLINE;
	else if (c != TUI_C_CODE && c != TUI_C_NOTICE && c != TUI_C_PMID)
		r |= A_BOLD;
	return r;
}

/* Draw L at row Y from column X, in runs of one attribute. */
void tui_draw_line_at(const struct tui *t, int y, int x,
                      const struct tui_line *l)
{
	int i = 0;

	move(y, x);
	while (i < l->n) {
		int j = i;
		short pair;
		attr_t a = tui_draw_attr(t, l->at[i], &pair);

		while (j < l->n && l->at[j] == l->at[i])
			j++;
		attr_set(a, pair, NULL);
		addnwstr(l->wc + i, j - i);
		i = j;
	}
	attr_set(A_NORMAL, 0, NULL);
}

/* Draw L at row Y from column 0. */
static void tui_draw_line(const struct tui *t, int y, const struct tui_line *l)
{
	tui_draw_line_at(t, y, 0, l);
}

/* The reasoning block of reply M above its answer: one dim line with
   its token count, and, unfolded, the text dimmed (in the token view the
   tokens themselves follow instead, tui_tokens_lay). */
static void tui_draw_reasoning(const struct tui_msg *m, struct tui_lay *y,
                               bool tokens)
{
	char head[96];
	uint16_t a = TUI_A_DIM;
	bool streaming = m->live && m->len == 0;

	snprintf(head, sizeof(head), "%s reasoning (%d token%s)%s",
	         m->unfold ? "▾" : "▸", (int)m->n_reasoning,
	         m->n_reasoning == 1 ? "" : "s",
	         streaming           ? " …"
	         : m->reasoning_open ? " … unfinished"
	                             : "");
	tui_lay_para(y, NULL, 0, NULL, 0, false);
	tui_lay_text(y, head, strlen(head), a | TUI_A_ITALIC);
	tui_lay_end(y);
	if (!m->unfold || tokens)
		return;
	tui_lay_para(y, "  ", a, "  ", a, false);
	tui_lay_text(y, m->reasoning ? m->reasoning : "", m->reasoning_len, a);
	tui_lay_end(y);
	if (m->len > 0)
		tui_lay_blank(y);
}

/* Lay message M out at WIDTH (cached until it changes). */
static void tui_draw_layout(struct tui *t, struct tui_msg *m, int width)
{
	struct tui_lay y;
	const char *label = NULL;
	uint16_t lat = TUI_A_BOLD;
	const char *tail = NULL;
	unsigned tag = tui_tokens_tag(t, m);

	if (m->lines_w == width && m->lines_raw == t->raw &&
	    m->lines_tag == tag)
		return;
	m->cur_line = -1;
	tui_lines_clear(&m->lines);
	tui_lay_init(&y, &m->lines, width);
	switch (m->role) {
	case STORE_ROLE_USER:
		label = "you";
		lat |= TUI_COLOR(TUI_C_USER);
		break;
	case STORE_ROLE_ASSISTANT:
		label = t->model[0] ? t->model : "assistant";
		lat |= TUI_COLOR(TUI_C_ASSISTANT);
		break;
	case STORE_ROLE_SYSTEM:
		label = "system prompt";
		lat |= TUI_COLOR(TUI_C_SYSTEM);
		break;
	default:
		break;
	}
	if (label) {
		tui_lay_para(&y, "▍", lat, NULL, 0, false);
		tui_lay_text(&y, label, strlen(label), lat);
		tui_lay_end(&y);
	}
	if (m->role == TUI_ROLE_NOTICE) {
		uint16_t a = TUI_COLOR(TUI_C_NOTICE);

		tui_lay_para(&y, "[", a, NULL, 0, false);
		tui_lay_text(&y, m->text, m->len, a);
		tui_lay_text(&y, "]", 1, a);
		tui_lay_end(&y);
	} else if (m->role == STORE_ROLE_ASSISTANT && tag) {
		if (tui_msg_has_reasoning(m))
			tui_draw_reasoning(m, &y, true);
		tui_tokens_lay(t, m, &y); /* shaded, or the cursor's */
	} else if (m->role == STORE_ROLE_ASSISTANT) {
		if (tui_msg_has_reasoning(m))
			tui_draw_reasoning(m, &y, false);
		if (m->len > 0 || !tui_msg_has_reasoning(m))
			tui_md_lay(&y, m->text, m->len, !t->raw);
	} else {
		tui_md_lay(&y, m->text, m->len, false);
	}
	if (m->live && m->len == 0 && m->reasoning_len == 0)
		tail = "…";
	else if (!m->live && m->role == STORE_ROLE_ASSISTANT)
		tail = m->finish == STORE_FINISH_INTERRUPTED ? "[stopped]"
		       : m->finish == STORE_FINISH_LENGTH    ? "[reply limit "
		                                               "reached]"
		       : m->finish == STORE_FINISH_ERROR     ? "[error]"
		       : m->finish == STORE_FINISH_NONE      ? "[unfinished]"
		                                             : NULL;
	if (tail) {
		tui_lay_para(&y, NULL, 0, NULL, 0, false);
		tui_lay_text(&y, tail, strlen(tail),
		             TUI_A_DIM | TUI_COLOR(TUI_C_NOTICE));
		tui_lay_end(&y);
	}
	tui_lay_blank(&y);
	tui_lay_done(&y);
	m->lines_w = width;
	m->lines_raw = t->raw;
	m->lines_tag = tag;
}

/* The transcript in rows [0, rows). */
static void tui_draw_transcript(struct tui *t, int rows, int cols)
{
	int total = 0, first, row, cur = -1;

	for (size_t i = 0; i < t->n_msgs; i++) {
		tui_draw_layout(t, &t->msgs[i], cols);
		if (t->mode == TUI_MODE_TOKENS && i == t->cur_msg &&
		    t->msgs[i].cur_line >= 0)
			cur = total + t->msgs[i].cur_line;
		total += t->msgs[i].lines.n;
	}
	/* scrolled back: keep the same text in view as lines arrive */
	if (t->scroll > 0 && total > t->last_total)
		t->scroll += total - t->last_total;
	if (t->scroll > total - rows)
		t->scroll = total - rows > 0 ? total - rows : 0;
	t->last_total = total;
	t->view_rows = rows;
	if (cur >= 0) { /* cursor mode: its token in view */
		if (cur < total - rows - t->scroll)
			t->scroll = total - rows - cur;
		else if (cur >= total - t->scroll)
			t->scroll = total - cur - 1;
	}
	first = total - rows - t->scroll;
	if (first < 0)
		first = 0;
	row = 0;
	int idx = 0;

	for (size_t i = 0; i < t->n_msgs && row < rows; i++) {
		const struct tui_lines *l = &t->msgs[i].lines;

		if (idx + l->n <= first) {
			idx += l->n;
			continue;
		}
		for (int j = 0; j < l->n && row < rows; j++, idx++)
			if (idx >= first)
				tui_draw_line(t, row++, &l->v[j]);
	}
}

/* A part of the status bar. */
struct tui_draw_part {
	char s[160];
	int prio; /* lower is kept first */
	int cols;
};

/* The context gauge: "ctx 312/2048 █░░░░░". */
static void tui_draw_gauge(const struct tui *t, char *out, size_t n)
{
	char bar[TUI_GAUGE * 3 + 1];
	int full = t->n_ctx > 0
	               ? (int)((int64_t)t->ctx_used * TUI_GAUGE / t->n_ctx)
	               : 0;
	size_t k = 0;

	for (int i = 0; i < TUI_GAUGE; i++) {
		memcpy(bar + k, i < full ? "█" : "░", 3);
		k += 3;
	}
	bar[k] = '\0';
	snprintf(out, n, "ctx %d/%d %s", t->ctx_used, t->n_ctx, bar);
}

/* The speed part: the last reply's, or the running job's progress. */
static void tui_draw_speed(const struct tui *t, char *out, size_t n)
{
	if (t->busy && t->job != TUI_JOB_OPEN && t->job != TUI_JOB_CLEAR &&
	    t->job != TUI_JOB_MODEL && t->job != TUI_JOB_MODELS) {
		if (t->live_gen == 0 && t->pre_total > 0)
			snprintf(out, n, "prefill %d/%d", t->pre_done,
			         t->pre_total);
		else if (t->live_gen == 0)
			snprintf(out, n, "thinking");
		else {
			double s = (tui_now_ms() - t->live_t0) / 1e3;

			snprintf(out, n, "gen %d tok %.1f t/s", t->live_gen,
			         s > 0 && t->live_gen > 1
			             ? (t->live_gen - 1) / s
			             : 0.0);
		}
	} else if (t->busy && t->job == TUI_JOB_MODEL) {
		snprintf(out, n, "loading %.80s…%s%.40s", t->load_name,
		         t->load_phase[0] ? " " : "", t->load_phase);
	} else if (t->busy && t->job == TUI_JOB_MODELS) {
		snprintf(out, n, "looking for models…");
	} else if (t->busy) {
		snprintf(out, n, "loading");
	} else if (t->have_last && t->last.n_ctx == 0 && t->prefill_tps <= 0) {
		/* a server's reply without its prompt time: no "pp 0" */
		snprintf(out, n, "tg %.1f t/s", t->decode_tps);
	} else if (t->have_last) {
		snprintf(out, n, "pp %.0f tg %.1f t/s", t->prefill_tps,
		         t->decode_tps);
	} else {
		out[0] = '\0';
	}
}

/* Copy UTF-8 S into OUT (N bytes) cut to at most COLS columns, with an
   ellipsis when cut. */
static void tui_draw_cut(const char *s, int cols, char *out, size_t n)
{
	size_t i = 0, o = 0, len = strlen(s);
	int used = 0;

	if (tui_lines_cols(s, len) <= cols) {
		snprintf(out, n, "%s", s);
		return;
	}
	while (i < len) {
		size_t k = 1;
		int w;

		while (i + k < len && (s[i + k] & 0xc0) == 0x80)
			k++;
		w = tui_lines_cols(s + i, k);
		if (used + w > cols - 1 || o + k + 4 > n)
			break;
		memcpy(out + o, s + i, k);
		o += k;
		i += k;
		used += w;
	}
	memcpy(out + o, "…", 4); /* 3 bytes and the NUL */
}

/* PREFIX and a duration of MS milliseconds into OUT (N bytes): "850 ms",
   "2.41 s". */
static void tui_draw_ms(const char *prefix, double ms, char *out, size_t n)
{
	if (ms < 1000)
		snprintf(out, n, "%s%.0f ms", prefix, ms);
	else
		snprintf(out, n, "%s%.2f s", prefix, ms / 1e3);
}

/* The status bar at row Y: the figures, or the message of the moment. */
static void tui_draw_status(struct tui *t, int y, int cols)
{
	struct tui_draw_part p[10];
	int n = 0, used, order[10] = {0};
	const char *sep = " │ "; /* 3 columns */
	char line[1200];
	short pair = 0;
	attr_t a = A_REVERSE;

	memset(p, 0, sizeof(p));
	snprintf(p[n].s, sizeof(p[n].s), "%s", t->model);
	p[n++].prio = 2;
	snprintf(p[n].s, sizeof(p[n].s), "%s", t->backend);
	p[n++].prio = 4;
	/* a remote model (n_ctx 0): no context or cache of ours to show */
	if (t->n_ctx > 0)
		tui_draw_gauge(t, p[n].s, sizeof(p[n].s));
	p[n++].prio = 1;
	/* (of those, kept by a context shift when turns left the window) */
	if (t->n_ctx > 0 && t->have_last && t->last.n_shifted > 0)
		snprintf(p[n].s, sizeof(p[n].s), "reused %d (%d shifted)",
		         t->reused, t->last.n_shifted);
	else if (t->n_ctx > 0)
		snprintf(p[n].s, sizeof(p[n].s), "reused %d", t->reused);
	p[n++].prio = 3;
	tui_draw_speed(t, p[n].s, sizeof(p[n].s));
	p[n++].prio = 1;
	/* the wait before the last reply began (a follow-up turn deep in a
	   long chat: its prompt's evaluation) */
	if (!t->busy && t->have_last && t->last.first_ms > 0)
		tui_draw_ms("first ", t->last.first_ms, p[n].s, sizeof(p[n].s));
	p[n++].prio = 3;
	snprintf(p[n].s, sizeof(p[n].s), "%s",
	         t->title[0]  ? t->title
	         : t->conv_id ? "untitled"
	                      : "new conversation");
	p[n++].prio = 5;
	snprintf(p[n].s, sizeof(p[n].s), "F1 help");
	p[n++].prio = 0;
	if (t->flags) { /* the pane's flags, even with the pane closed */
		char f[96];

		snprintf(p[n].s, sizeof(p[n].s), "⚑ %s tok %zu",
		         tui_health_describe(t->flags, t->flag_layer, false, f,
		                             sizeof(f)),
		         t->flag_tok);
		p[n++].prio = 0;
	}
	if (t->msg[0]) { /* the message replaces all but the help hint */
		tui_draw_cut(t->msg, cols - 2 - 10, p[0].s, sizeof(p[0].s));
		p[0].prio = 0;
		for (int i = 1; i < n; i++)
			if (strcmp(p[i].s, "F1 help") &&
			    strncmp(p[i].s, "⚑", 3))
				p[i].s[0] = '\0';
		if (t->msg_err)
			a |= A_BOLD;
		if (t->msg_err && t->color)
			pair = TUI_C_ERROR;
	}
	for (int i = 0; i < n; i++)
		p[i].cols = tui_lines_cols(p[i].s, strlen(p[i].s));
	/* keep parts by priority while they fit */
	used = 0;
	for (int pr = 0; pr <= 5; pr++)
		for (int i = 0; i < n; i++)
			if (p[i].prio == pr && p[i].s[0]) {
				int w = p[i].cols + (used ? 3 : 0);

				order[i] = used + w <= cols - 2;
				if (order[i])
					used += w;
			}
	line[0] = ' ';
	line[1] = '\0';
	bool any = false;

	for (int i = 0; i < n; i++)
		if (p[i].s[0] && order[i]) {
			if (any)
				strcat(line, sep);
			strcat(line, p[i].s);
			any = true;
		}
	struct tui_lines ls = {0};
	struct tui_lay ly;

	tui_lay_init(&ly, &ls, cols);
	tui_lay_para(&ly, NULL, 0, NULL, 0, true);
	tui_lay_text(&ly, line, strlen(line), 0);
	tui_lay_end(&ly);
	tui_lay_done(&ly);
	move(y, 0);
	attr_set(a, pair, NULL);
	hline(' ', cols);
	if (ls.n > 0)
		addnwstr(ls.v[0].wc, ls.v[0].n);
	attr_set(A_NORMAL, 0, NULL);
	tui_lines_clear(&ls);
}

/* Columns of input character C (a newline ends the row). */
static int tui_draw_in_cols(wchar_t c)
{
	int w = c == L'\t' ? 1 : tui_lines_wc_cols(c);

	return w < 0 ? 1 : w;
}

/*
 * The input laid out at WIDTH: "> " then the text, wrapped at the last
 * column, rows after the first indented by two. Stores the start index
 * of each row in *STARTS (malloc'd) and the cursor's row and column.
 * Returns the number of rows.
 */
static int tui_draw_in_layout(struct tui *t, int width, size_t **starts,
                              int *cur_row, int *cur_col)
{
	size_t len, cur, cap = 16, n = 1;
	const wchar_t *w = tui_input_line(&t->in, &len, &cur);
	size_t *st = malloc(cap * sizeof(*st));
	int col = 2, row = 0;

	if (st == NULL)
		return 0;
	st[0] = 0;
	*cur_row = 0;
	*cur_col = 2;
	for (size_t i = 0; i <= len; i++) {
		if (i == cur) {
			*cur_row = row;
			*cur_col = col;
		}
		if (i == len)
			break;
		int cw = w[i] == L'\n' ? 0 : tui_draw_in_cols(w[i]);

		if (w[i] == L'\n' || col + cw > width) {
			if (n == cap) {
				size_t *p = realloc(st, cap * 2 * sizeof(*p));

				if (p == NULL)
					break;
				st = p;
				cap *= 2;
			}
			st[n++] = w[i] == L'\n' ? i + 1 : i;
			row++;
			col = 2;
			if (i == cur && w[i] != L'\n') {
				*cur_row = row;
				*cur_col = col;
			}
			if (w[i] == L'\n')
				continue;
		}
		col += cw;
	}
	if (*cur_col >= width) /* the cursor after a full last row */
		*cur_col = width - 1;
	*starts = st;
	return (int)n;
}

/* Rows the input needs at WIDTH, at most MAX_ROWS. */
static int tui_draw_input_rows(struct tui *t, int width, int max_rows)
{
	size_t *st = NULL;
	int r, c, n = tui_draw_in_layout(t, width, &st, &r, &c);

	free(st);
	if (n < 1)
		n = 1;
	return n < max_rows ? n : max_rows;
}

/* The input in rows [y, y + rows); places the cursor. */
static void tui_draw_input(struct tui *t, int y, int rows, int cols)
{
	size_t len, cur, *st = NULL;
	const wchar_t *w = tui_input_line(&t->in, &len, &cur);
	int cr, cc, n = tui_draw_in_layout(t, cols, &st, &cr, &cc), first;

	if (st == NULL)
		return;
	first = cr - rows + 1 > 0 ? cr - rows + 1 : 0;
	for (int r = 0; r < rows && first + r < n; r++) {
		size_t a = st[first + r];
		size_t b = first + r + 1 < n ? st[first + r + 1] : len;

		if (b > a && w[b - 1] == L'\n')
			b--;
		move(y + r, 0);
		if (first + r == 0) {
			attr_set(A_BOLD, t->color ? TUI_C_USER : 0, NULL);
			addstr(t->editing ? "✎ " : "> ");
			attr_set(A_NORMAL, 0, NULL);
		} else {
			addstr("  ");
		}
		for (size_t i = a; i < b; i++) {
			wchar_t c = w[i] == L'\t' ? L' ' : w[i];

			if (tui_lines_wc_cols(c) < 0)
				c = 0xFFFD;
			addnwstr(&c, 1);
		}
	}
	free(st);
	move(y + cr - first, cc);
}

/* The help screen: the keys and commands, wrapped to the width. */
static void tui_draw_help(struct tui *t, int rows, int cols)
{
	struct tui_lines ls = {0};
	struct tui_lay y;
	const char *p = tui_cmd_help;

	tui_lay_init(&y, &ls, cols);
	while (*p) {
		const char *e = strchr(p, '\n');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		bool head = n > 0 && p[0] != ' ';

		tui_lay_para(&y, NULL, 0, "                      ", 0, false);
		tui_lay_text(&y, p, n, head ? TUI_A_BOLD : 0);
		tui_lay_end(&y);
		p += n + (e != NULL);
	}
	tui_lay_done(&y);
	if (t->help_top > ls.n - rows)
		t->help_top = ls.n - rows;
	if (t->help_top < 0)
		t->help_top = 0;
	for (int i = 0; i < rows && t->help_top + i < ls.n; i++)
		tui_draw_line(t, i, &ls.v[t->help_top + i]);
	tui_lines_clear(&ls);
}

/* The transcript and, when on, the debug pane: at the side from
   TUI_PANE_SIDE_MIN columns, else below (when the body has room). */
static void tui_draw_body(struct tui *t, int body, int cols)
{
	if (t->pane && cols >= TUI_PANE_SIDE_MIN) {
		int tw = cols - TUI_PANE_SIDE_W;

		tui_draw_transcript(t, body, tw);
		for (int r = 0; r < body; r++)
			mvaddstr(r, tw, "│");
		tui_pane_draw(t, 0, tw + 2, body, TUI_PANE_SIDE_W - 2);
	} else if (t->pane && body >= 8) {
		int ph =
		    body / 2 < TUI_PANE_BELOW_H ? body / 2 : TUI_PANE_BELOW_H;
		int th = body - ph;

		tui_draw_transcript(t, th - 1, cols);
		move(th - 1, 0);
		for (int c = 0; c < cols; c++)
			addstr("─");
		tui_pane_draw(t, th, 0, ph, cols);
	} else {
		tui_draw_transcript(t, body, cols);
	}
}

void tui_draw(struct tui *t)
{
	int rows = LINES, cols = COLS, in_rows, body;

	t->dirty = false;
	erase();
	if (rows < 2 || cols < 4) { /* too small: only the status */
		tui_draw_status(t, rows - 1, cols);
		wnoutrefresh(stdscr);
		doupdate();
		tui_out_flush();
		return;
	}
	if (t->mode == TUI_MODE_HELP || t->mode == TUI_MODE_LIST ||
	    t->mode == TUI_MODE_PROMPT || t->mode == TUI_MODE_MODELS) {
		curs_set(0);
		if (t->mode == TUI_MODE_HELP)
			tui_draw_help(t, rows - 1, cols);
		else if (t->mode == TUI_MODE_MODELS)
			tui_models_draw(t, rows - 1, cols);
		else if (t->mode == TUI_MODE_PROMPT)
			tui_prompt_draw(t, rows - 1, cols);
		else
			tui_list_draw(t, rows - 1, cols);
		tui_draw_status(t, rows - 1, cols);
		wnoutrefresh(stdscr);
		doupdate();
		tui_out_flush();
		return;
	}
	in_rows =
	    t->search.on
	        ? tui_search_rows(t)
	        : tui_draw_input_rows(t, cols, rows / 3 > 1 ? rows / 3 : 1);
	if (in_rows > rows - 1)
		in_rows = rows - 1;
	body = rows - in_rows - 1;
	tui_draw_body(t, body, cols);
	tui_draw_status(t, body, cols);
	curs_set(t->mode == TUI_MODE_TOKENS ? 0 : 1);
	if (t->search.on)
		tui_search_draw(t, body + 1, cols);
	else
		tui_draw_input(t, body + 1, in_rows, cols);
	wnoutrefresh(stdscr);
	doupdate();
	tui_out_flush(); /* the frame, in one write */
}

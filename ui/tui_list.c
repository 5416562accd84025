/*
 * tui_list.c - the conversation list (F3): the stored conversations, most
 * recent first, or full-text search results with the matches marked;
 * open, rename, delete (asked first). It reads and writes through the
 * UI's own store connection (SQLite's WAL lets it beside the worker's).
 */
#include "tui_int.h"

#include <curses.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TUI_LIST_MAX 500    /* conversations listed */
#define TUI_MARK_ON  "\x01" /* search match start, in snippets */
#define TUI_MARK_OFF "\x02"

/* Read the conversations again (keeps the selection in range). */
static void tui_list_load(struct tui *t)
{
	struct tui_list *l = &t->list;
	char err[256];

	store_conv_list_free(l->v, l->n);
	l->v = NULL;
	l->n = 0;
	if (t->st == NULL) {
		tui_say(t, true, "no conversation store (--no-store?)");
		return;
	}
	if (store_conv_list(t->st, 0, TUI_LIST_MAX, &l->v, &l->n, err,
	                    sizeof(err)) != STORE_OK)
		tui_say(t, true, "%s", err);
}

/* Rows shown: the hits when a search ran, else the conversations. */
static size_t tui_list_rows(const struct tui_list *l)
{
	return l->searched ? l->n_hits : l->n;
}

/* The conversation of row I. */
static int64_t tui_list_id(const struct tui_list *l, size_t i)
{
	if (i >= tui_list_rows(l))
		return 0;
	return l->searched ? l->hits[i].conv_id : l->v[i].id;
}

void tui_list_open(struct tui *t)
{
	t->mode = TUI_MODE_LIST;
	t->list.sel = t->list.top = 0;
	t->list.edit = 0;
	t->list.searched = false;
	tui_list_load(t);
}

void tui_list_close(struct tui *t)
{
	struct tui_list *l = &t->list;

	store_conv_list_free(l->v, l->n);
	store_hits_free(l->hits, l->n_hits);
	memset(l, 0, sizeof(*l));
	if (t->mode == TUI_MODE_LIST)
		t->mode = TUI_MODE_CHAT;
}

/* Run the search typed in buf. */
static void tui_list_search(struct tui *t)
{
	struct tui_list *l = &t->list;
	char err[256];

	store_hits_free(l->hits, l->n_hits);
	l->hits = NULL;
	l->n_hits = 0;
	l->searched = false;
	l->sel = l->top = 0;
	if (l->query[0] == '\0' || t->st == NULL)
		return;
	if (store_search(t->st, l->query, 0, 100, TUI_MARK_ON, TUI_MARK_OFF,
	                 &l->hits, &l->n_hits, err, sizeof(err)) != STORE_OK) {
		tui_say(t, true, "%s", err);
		return;
	}
	l->searched = true;
	tui_say(t, false, "%zu match%s for \"%s\"", l->n_hits,
	        l->n_hits == 1 ? "" : "es", l->query);
}

/* Enter on a row: open it (the worker reopens the session). */
static void tui_list_choose(struct tui *t)
{
	int64_t id = tui_list_id(&t->list, (size_t)t->list.sel);

	if (id == 0)
		return;
	if (t->busy) {
		tui_say(t, true, "a reply is running (Ctrl-C stops it)");
		return;
	}
	tui_list_close(t);
	tui_msgs_clear(t);
	tui_start(t, TUI_JOB_OPEN, NULL, 0, id);
	tui_say(t, false, "opening conversation %lld...", (long long)id);
}

/* A key while typing a search or a title. */
static void tui_list_edit_key(struct tui *t, int k, bool fkey)
{
	struct tui_list *l = &t->list;
	char err[256];

	if (fkey && k == KEY_BACKSPACE) {
		k = 127;
		fkey = false;
	}
	if (fkey)
		return;
	if (k == 27 || k == 3) { /* Esc, Ctrl-C */
		l->edit = 0;
		t->msg[0] = '\0';
		return;
	}
	if (k == 127 || k == 8) {
		while (l->buf_n > 0 && (l->buf[--l->buf_n] & 0xc0) == 0x80)
			; /* a whole UTF-8 character */
		l->buf[l->buf_n] = '\0';
	} else if (k == '\r' || k == '\n') {
		int what = l->edit;
		int64_t id = tui_list_id(l, (size_t)l->sel);

		l->edit = 0;
		if (what == 's') {
			snprintf(l->query, sizeof(l->query), "%s", l->buf);
			tui_list_search(t);
		} else if (id && t->st &&
		           store_conv_rename(t->st, id, l->buf, err,
		                             sizeof(err)) != STORE_OK) {
			tui_say(t, true, "%s", err);
		} else if (id) {
			tui_list_load(t);
			if (l->searched)
				tui_list_search(t);
			if (id == t->conv_id)
				tui_refresh_title(t);
			tui_say(t, false, "renamed");
		}
		return;
	} else if (k >= 32) {
		/* UTF-8 whatever the key (tui_input_utf8: no 5-byte forms) */
		wchar_t w = (wchar_t)k;
		char *mb = tui_input_utf8(&w, 1);
		size_t n = mb ? strlen(mb) : 0;

		if (n > 0 && l->buf_n + n < sizeof(l->buf)) {
			memcpy(l->buf + l->buf_n, mb, n);
			l->buf_n += n;
			l->buf[l->buf_n] = '\0';
		}
		free(mb);
	}
	tui_say(t, false, "%s %s",
	        l->edit == 's' ? "search:" : "new title:", l->buf);
}

void tui_list_key(struct tui *t, int k, bool fkey)
{
	struct tui_list *l = &t->list;
	int n = (int)tui_list_rows(l);
	char err[256];

	if (l->edit) {
		tui_list_edit_key(t, k, fkey);
		return;
	}
	if (t->ask == TUI_ASK_DELETE) {
		int64_t id = tui_list_id(l, (size_t)l->sel);

		t->ask = TUI_ASK_NONE;
		t->msg[0] = '\0';
		if (fkey || (k != 'y' && k != 'Y') || id == 0)
			return;
		if (id == t->conv_id) {
			tui_say(t, true, "that is the open conversation");
			return;
		}
		if (store_conv_delete(t->st, id, err, sizeof(err)) != STORE_OK)
			tui_say(t, true, "%s", err);
		else
			tui_say(t, false, "conversation %lld deleted",
			        (long long)id);
		tui_list_load(t);
		if (l->searched)
			tui_list_search(t);
		return;
	}
	t->msg[0] = '\0';
	if (fkey) {
		if (k == KEY_UP && l->sel > 0)
			l->sel--;
		else if (k == KEY_DOWN && l->sel + 1 < n)
			l->sel++;
		else if (k == KEY_PPAGE)
			l->sel = l->sel > 10 ? l->sel - 10 : 0;
		else if (k == KEY_NPAGE)
			l->sel =
			    l->sel + 10 < n ? l->sel + 10 : (n ? n - 1 : 0);
		else if (k == KEY_ENTER)
			tui_list_choose(t);
		else if (k == KEY_F(3))
			tui_list_close(t);
		else if (k == KEY_F(1))
			t->mode = TUI_MODE_HELP;
		return;
	}
	switch (k) {
	case '\r':
	case '\n':
		tui_list_choose(t);
		break;
	case 27:
	case 'q':
	case 3:
		if (l->searched) { /* back to the whole list first */
			l->searched = false;
			l->sel = l->top = 0;
		} else {
			tui_list_close(t);
		}
		break;
	case '/':
	case 's':
		l->edit = 's';
		l->buf_n = 0;
		l->buf[0] = '\0';
		tui_say(t, false, "search: ");
		break;
	case 'r':
		if (n == 0)
			break;
		l->edit = 'r';
		l->buf_n = 0;
		l->buf[0] = '\0';
		tui_say(t, false, "new title: ");
		break;
	case 'd':
		if (n == 0)
			break;
		t->ask = TUI_ASK_DELETE;
		tui_say(t, false, "delete conversation %lld? (y/n)",
		        (long long)tui_list_id(l, (size_t)l->sel));
		break;
	case 'k':
		if (l->sel > 0)
			l->sel--;
		break;
	case 'j':
		if (l->sel + 1 < n)
			l->sel++;
		break;
	default:
		break;
	}
}

/* "2026-11-22 21:03" of a time in milliseconds. */
static void tui_list_date(int64_t ms, char *out, size_t n)
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;

	localtime_r(&s, &tm);
	strftime(out, n, "%Y-%m-%d %H:%M", &tm);
}

/* One row of text at Y: TEXT with the \1..\2 marks as highlights. */
static void tui_list_row(struct tui *t, int y, int cols, const char *text,
                         bool sel)
{
	struct tui_lines ls = {0};
	struct tui_lay ly;
	uint16_t base = sel ? TUI_A_REVERSE : 0, at = base;
	const char *p = text;

	tui_lay_init(&ly, &ls, cols);
	tui_lay_para(&ly, NULL, 0, NULL, 0, true);
	while (*p) {
		size_t n = strcspn(p, TUI_MARK_ON TUI_MARK_OFF "\n");

		tui_lay_text(&ly, p, n, at);
		p += n;
		if (*p == '\x01')
			at = base | TUI_A_BOLD | TUI_COLOR(TUI_C_MATCH);
		else if (*p == '\x02')
			at = base;
		else if (*p == '\n')
			tui_lay_text(&ly, " ", 1, at);
		if (*p)
			p++;
	}
	tui_lay_end(&ly);
	tui_lay_done(&ly);
	if (ls.n > 0) { /* one row: what does not fit is cut */
		struct tui_line *l = &ls.v[0];
		int i = 0;

		move(y, 0);
		while (i < l->n) {
			int j = i;
			short pair = 0;
			attr_t a = 0;

			while (j < l->n && l->at[j] == l->at[i])
				j++;
			if (l->at[i] & TUI_A_REVERSE)
				a |= A_REVERSE;
			if (l->at[i] & TUI_A_BOLD)
				a |= A_BOLD;
			if (TUI_COLOR_OF(l->at[i]) == TUI_C_MATCH) {
				if (t->color)
					pair = TUI_C_MATCH;
				else
					a |= A_UNDERLINE;
			}
			attr_set(a, pair, NULL);
			addnwstr(l->wc + i, j - i);
			i = j;
		}
		if (sel) {
			attr_set(A_REVERSE, 0, NULL);
			for (int c = l->cols; c < cols; c++)
				addch(' ');
		}
		attr_set(A_NORMAL, 0, NULL);
	}
	tui_lines_clear(&ls);
}

void tui_list_draw(struct tui *t, int rows, int cols)
{
	struct tui_list *l = &t->list;
	int n = (int)tui_list_rows(l), body = rows - 1;
	char buf[1024], date[32];

	move(0, 0);
	attr_set(A_BOLD, 0, NULL);
	if (l->searched)
		snprintf(buf, sizeof(buf),
		         "Search \"%s\": %d match%s  (Enter open, Esc all "
		         "conversations)",
		         l->query, n, n == 1 ? "" : "es");
	else
		snprintf(buf, sizeof(buf),
		         "Conversations: %d  (Enter open, / search, r rename, "
		         "d delete, Esc back)",
		         n);
	addnstr(buf, cols);
	attr_set(A_NORMAL, 0, NULL);
	if (n == 0) {
		mvaddnstr(2, 2,
		          l->searched ? "no match" : "no conversation yet",
		          cols - 2);
		return;
	}
	if (l->sel >= n)
		l->sel = n - 1;
	if (body < 1)
		return;
	if (l->sel < l->top)
		l->top = l->sel;
	if (l->sel >= l->top + body)
		l->top = l->sel - body + 1;
	for (int r = 0; r < body && l->top + r < n; r++) {
		int i = l->top + r;

		if (l->searched) {
			const struct store_hit *h = &l->hits[i];

			snprintf(buf, sizeof(buf), "%5lld  %s: %s",
			         (long long)h->conv_id,
			         h->title[0] ? h->title : "(untitled)",
			         h->snippet);
		} else {
			const struct store_conv *c = &l->v[i];
			const char *base = strrchr(c->model_path, '/');

			tui_list_date(c->updated_ms, date, sizeof(date));
			snprintf(buf, sizeof(buf),
			         "%5lld  %s  %-24s  %3lld msgs  %s%s",
			         (long long)c->id, date,
			         c->title[0] ? c->title : "(untitled)",
			         (long long)c->n_messages,
			         base ? base + 1 : c->model_path,
			         c->id == t->conv_id ? "  (open)" : "");
		}
		tui_list_row(t, r + 1, cols, buf, i == l->sel);
	}
}

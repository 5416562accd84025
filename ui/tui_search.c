/*
 * tui_search.c - Ctrl-R in the full-screen UI: the line history searched
 * in parley's own input area, not by libedit's incremental search (which
 * writes its "bck:" prompt into the line itself).
 *
 * The input area shows two rows while searching: a label with the search
 * text, then the newest history entry that holds it, the text marked.
 * Typing narrows the search (from the newest entry again), Backspace
 * widens it, Ctrl-R goes to the next older entry; Enter takes the entry
 * into the input line to edit or send, Esc (or Ctrl-G, Ctrl-C) puts the
 * line back as it was; any other key takes the entry and then does what
 * it does in the chat. The search is the history's only reader while it
 * runs (tui_input_hist_find); taking or restoring a line resets
 * libedit's own history cursor (tui_input_set).
 */
#include "tui_int.h"

#include <curses.h>
#include <stdlib.h>
#include <string.h>

static const char tui_search_label[] = "history search: ";
static const char tui_search_hint[] =
    "Ctrl-R older · Enter takes it · Esc puts your line back";

/* Look for the search text from history place FROM; the entry found
   replaces the match, or none leaves it (false then). */
static bool tui_search_find(struct tui *t, int from)
{
	struct tui_search *s = &t->search;
	size_t at = 0;
	int idx = from;
	wchar_t *w = tui_input_hist_find(&t->in, s->q, s->n, &idx, &at);

	if (w == NULL)
		return false;
	free(s->match);
	s->match = w;
	s->idx = idx;
	s->at = at;
	return true;
}

/* Ctrl-R: the next older entry that holds the search text and is not
   the same line again (the history keeps a line once in a row only). */
static bool tui_search_older(struct tui *t)
{
	struct tui_search *s = &t->search;
	wchar_t *was = s->match;
	bool found;

	s->match = NULL; /* kept in WAS to compare */
	while ((found = tui_search_find(t, s->idx + 1)) &&
	       wcscmp(s->match, was) == 0)
		;
	if (!found) {
		free(s->match);
		s->match = was;
		return false;
	}
	free(was);
	return true;
}

/* The search text changed: the newest entry that holds it, or none. */
static void tui_search_again(struct tui *t)
{
	struct tui_search *s = &t->search;

	if (s->n == 0 || !tui_search_find(t, 0)) {
		free(s->match);
		s->match = NULL;
		s->idx = -1;
	}
}

void tui_search_open(struct tui *t)
{
	struct tui_search *s = &t->search;
	size_t len, cur;
	const wchar_t *w = tui_input_line(&t->in, &len, &cur);

	(void)cur;
	free(s->saved);
	s->saved = tui_input_utf8(w, len);
	if (s->saved == NULL)
		return; /* out of memory: no search */
	s->on = true;
	s->n = 0;
	free(s->match);
	s->match = NULL;
	s->idx = -1;
	tui_say(t, false, "%s", tui_search_hint);
}

/* Leave the search: the match into the line (TAKE and one was found),
   else the line as it was. */
static void tui_search_close(struct tui *t, bool take)
{
	struct tui_search *s = &t->search;
	char *line = NULL;

	if (take && s->match)
		line = tui_input_utf8(s->match, wcslen(s->match));
	tui_input_set(&t->in, line ? line : s->saved ? s->saved : "");
	free(line);
	s->on = false;
	t->msg[0] = '\0';
}

/* Add character C to the search text. */
static void tui_search_add(struct tui *t, wchar_t c)
{
	struct tui_search *s = &t->search;

	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 32;
		wchar_t *q = realloc(s->q, cap * sizeof(*q));

		if (q == NULL)
			return;
		s->q = q;
		s->cap = cap;
	}
	s->q[s->n++] = c;
	tui_search_again(t);
}

bool tui_search_key(struct tui *t, int k, bool fkey)
{
	struct tui_search *s = &t->search;

	if (fkey && k == KEY_RESIZE)
		return true;
	if ((fkey && k == KEY_BACKSPACE) || (!fkey && (k == 127 || k == 8))) {
		if (s->n > 0) {
			s->n--;
			tui_search_again(t);
		}
		return true;
	}
	if (fkey && k == KEY_ENTER)
		k = 13, fkey = false;
	if (fkey) { /* arrows, function keys: take the entry, then the key */
		tui_search_close(t, true);
		return false;
	}
	switch (k) {
	case 18: /* Ctrl-R: the next older entry */
		if (s->n > 0 && s->idx >= 0 && !tui_search_older(t))
			tui_say(t, false, "no older entry holds it");
		return true;
	case 13: /* Enter: take it into the line */
		tui_search_close(t, true);
		return true;
	case 27: /* Esc, Ctrl-G, Ctrl-C: the line as it was */
	case 7:
	case 3:
		tui_search_close(t, false);
		return true;
	default:
		break;
	}
	if (k < 32) { /* another control key: take the entry, then the key */
		tui_search_close(t, true);
		return false;
	}
	tui_search_add(t, (wchar_t)k);
	return true;
}

int tui_search_rows(const struct tui *t)
{
	(void)t;
	return 2;
}

/* Draw W[0, n) from the cursor with attribute A, at most COLS columns;
   the columns used. */
static int tui_search_put(const wchar_t *w, size_t n, attr_t a, short pair,
                          int cols)
{
	int used = 0;

	attr_set(a, pair, NULL);
	for (size_t i = 0; i < n; i++) {
		wchar_t c = w[i] == L'\t' || w[i] == L'\n' ? L' ' : w[i];
		int cw = tui_lines_wc_cols(c);

		if (cw < 0)
			c = 0xFFFD, cw = 1;
		if (used + cw > cols)
			break;
		addnwstr(&c, 1);
		used += cw;
	}
	attr_set(A_NORMAL, 0, NULL);
	return used;
}

/* Columns of W[0, n). */
static int tui_search_cols(const wchar_t *w, size_t n)
{
	int c = 0;

	for (size_t i = 0; i < n; i++) {
		int k = tui_lines_wc_cols(w[i]);

		c += k < 0 ? 1 : k;
	}
	return c;
}

void tui_search_draw(struct tui *t, int y, int cols)
{
	struct tui_search *s = &t->search;
	int lw = (int)strlen(tui_search_label), room, cx;
	size_t q0 = 0, m0 = 0;
	attr_t hl = t->color ? A_NORMAL : A_REVERSE;

	/* the label, then the search text's end where the cursor is */
	move(y, 0);
	attr_set(A_BOLD, t->color ? TUI_C_USER : 0, NULL);
	addnstr(tui_search_label, cols);
	attr_set(A_NORMAL, 0, NULL);
	room = cols - lw - 1;
	while (q0 < s->n && tui_search_cols(s->q + q0, s->n - q0) > room)
		q0++;
	cx = lw + tui_search_put(s->q + q0, s->n - q0, A_NORMAL, 0,
	                         room > 0 ? room : 0);
	/* the entry, its match marked and in view */
	move(y + 1, 0);
	attr_set(A_BOLD, t->color ? TUI_C_USER : 0, NULL);
	addstr("> ");
	attr_set(A_NORMAL, 0, NULL);
	room = cols - 2;
	if (s->match == NULL) {
		const char *why =
		    s->n ? "(no entry holds it)" : "(type what the line held)";

		attr_set(A_DIM, 0, NULL);
		addnstr(why, room);
		attr_set(A_NORMAL, 0, NULL);
	} else {
		size_t len = wcslen(s->match);

		while (m0 < s->at &&
		       tui_search_cols(s->match + m0, s->at + s->n - m0) > room)
			m0++;
		room -= tui_search_put(s->match + m0, s->at - m0, A_NORMAL, 0,
		                       room);
		room -= tui_search_put(s->match + s->at, s->n, hl | A_BOLD,
		                       t->color ? TUI_C_MATCH : 0, room);
		tui_search_put(s->match + s->at + s->n, len - s->at - s->n,
		               A_NORMAL, 0, room);
	}
	move(y, cx < cols ? cx : cols - 1);
}

void tui_search_free(struct tui *t)
{
	struct tui_search *s = &t->search;

	free(s->q);
	free(s->saved);
	free(s->match);
	memset(s, 0, sizeof(*s));
}

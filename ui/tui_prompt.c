/*
 * tui_prompt.c - the prompt view (F6, /prompt): the exact text the chat
 * template rendered for the last turn, token by token.
 *
 * Each token is shown as its text (invisible characters made visible,
 * newlines also breaking the line, so the view keeps the prompt's shape)
 * followed by its id in brackets, dim: "Paris[7042]". Control tokens
 * ("<|im_start|>") are marked in the system colour and bold (reverse
 * without colour). The ids that were already in the KV cache come first,
 * dim; a rule "── evaluated anew from token R (of N) ──" stands where the
 * evaluation started. The data is a copy taken while no job runs (the
 * worker's invariant 1), so the view stays as it was opened.
 */
#include "tui_int.h"

#include <curses.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tui_prompt_close(struct tui *t)
{
	free(t->pv.ids);
	free(t->pv.off);
	free(t->pv.ctl);
	free(t->pv.text);
	memset(&t->pv, 0, sizeof(t->pv));
	if (t->mode == TUI_MODE_PROMPT)
		t->mode = TUI_MODE_CHAT;
}

/* Copy the session's last prompt into t->pv. 0, or -1 (said why). */
static int tui_prompt_copy(struct tui *t, struct session *s)
{
	size_t n, reused, total = 0;
	const int32_t *ids = session_last_prompt(s, &n, &reused);

	if (n == 0) {
		tui_say(t, true,
		        "no prompt yet: the view shows the last turn's");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		size_t len = 0;

		if (session_token_text(s, ids[i], &len, NULL))
			total += len;
	}
	t->pv.ids = malloc(n * sizeof(*t->pv.ids));
	t->pv.off = malloc((n + 1) * sizeof(*t->pv.off));
	t->pv.ctl = malloc(n * sizeof(*t->pv.ctl));
	t->pv.text = malloc(total + 1);
	if (!t->pv.ids || !t->pv.off || !t->pv.ctl || !t->pv.text) {
		tui_prompt_close(t);
		tui_say(t, true, "out of memory");
		return -1;
	}
	total = 0;
	for (size_t i = 0; i < n; i++) {
		size_t len = 0;
		const char *p =
		    session_token_text(s, ids[i], &len, &t->pv.ctl[i]);

		t->pv.ids[i] = ids[i];
		t->pv.off[i] = (uint32_t)total;
		if (p) {
			memcpy(t->pv.text + total, p, len);
			total += len;
		}
	}
	t->pv.off[n] = (uint32_t)total;
	t->pv.n = n;
	t->pv.reused = reused;
	return 0;
}

void tui_prompt_open(struct tui *t)
{
	struct session *s = t->busy ? NULL : tui_worker_session(&t->w);

	if (s == NULL) {
		tui_say(t, true,
		        t->busy ? "a reply is running: the prompt view "
		                  "opens when it is done"
		                : "no session");
		return;
	}
	tui_prompt_close(t);
	if (tui_prompt_copy(t, s) == 0) {
		t->mode = TUI_MODE_PROMPT;
		t->pv.top = 0;
	}
}

void tui_prompt_key(struct tui *t, int k, bool fkey)
{
	int page = LINES > 4 ? LINES - 3 : 1;

	if (fkey && (k == KEY_NPAGE || k == KEY_DOWN))
		t->pv.top += k == KEY_DOWN ? 1 : page;
	else if (fkey && (k == KEY_PPAGE || k == KEY_UP))
		t->pv.top -= k == KEY_UP ? 1 : page;
	else if (fkey && k == KEY_HOME)
		t->pv.top = 0;
	else if (fkey && k == KEY_END)
		t->pv.top = 1 << 30; /* clamped when drawn */
	else if (!(fkey && k == KEY_RESIZE))
		tui_prompt_close(t);
}

/* Lay the prompt's tokens out at WIDTH into OUT. */
static void tui_prompt_lay(const struct tui *t, struct tui_lines *out,
                           int width)
{
	const struct tui_pview *v = &t->pv;
	struct tui_lay y;
	char head[256], buf[512];
	uint16_t cached = TUI_A_DIM;

	tui_lay_init(&y, out, width);
	snprintf(head, sizeof(head),
	         "prompt of the last turn: %zu tokens, %zu reused from the "
	         "KV cache, %zu evaluated anew (any key but PgUp/PgDn/↑/↓ "
	         "closes)",
	         v->n, v->reused, v->n - v->reused);
	tui_lay_para(&y, NULL, 0, NULL, 0, false);
	tui_lay_text(&y, head, strlen(head), TUI_A_BOLD);
	tui_lay_end(&y);
	tui_lay_blank(&y);
	if (v->reused > 0)
		tui_lay_para(&y, NULL, 0, NULL, 0, true);
	for (size_t i = 0; i < v->n; i++) {
		const char *p = v->text + v->off[i];
		size_t n = v->off[i + 1] - v->off[i];
		uint16_t base = i < v->reused ? cached : 0;
		uint16_t at =
		    v->ctl[i] ? (uint16_t)(TUI_A_BOLD | TUI_COLOR(TUI_C_SYSTEM))
		              : base;

		if (i == v->reused) {
			if (i > 0)
				tui_lay_end(&y);
			snprintf(buf, sizeof(buf),
			         "── evaluated anew from token %zu (of %zu) ──",
			         i, v->n);
			tui_lay_para(&y, NULL, 0, NULL, 0, false);
			tui_lay_text(&y, buf, strlen(buf),
			             TUI_A_BOLD | TUI_COLOR(TUI_C_NOTICE));
			tui_lay_end(&y);
			tui_lay_para(&y, NULL, 0, NULL, 0, true);
		}
		tui_pane_visible(p, n, buf, sizeof(buf));
		tui_lay_text(&y, buf, strlen(buf), at);
		snprintf(buf, sizeof(buf), "[%d]", v->ids[i]);
		tui_lay_text(&y, buf, strlen(buf),
		             TUI_A_DIM | (v->ctl[i] ? 0 : base));
		if (memchr(p, '\n', n)) /* keep the prompt's lines */
			tui_lay_text(&y, "\n", 1, base);
	}
	tui_lay_end(&y);
	tui_lay_done(&y);
}

void tui_prompt_draw(struct tui *t, int rows, int cols)
{
	struct tui_lines ls = {0};

	tui_prompt_lay(t, &ls, cols);
	if (t->pv.top > ls.n - rows)
		t->pv.top = ls.n - rows;
	if (t->pv.top < 0)
		t->pv.top = 0;
	for (int i = 0; i < rows && t->pv.top + i < ls.n; i++)
		tui_draw_line_at(t, i, 0, &ls.v[t->pv.top + i]);
	tui_lines_clear(&ls);
}

/*
 * tui_tokens.c - the replies as tokens: their reports as they arrive,
 * the token view of a reply (shading by probability, the cursor), and
 * cursor mode (F4), whose token the debug pane follows.
 *
 * NOTES ON THE DESIGN
 *
 * A reply with reports (tui_msg.toks) can be laid out from its tokens'
 * pieces instead of through Markdown: that is the token view, used when
 * shading is on (F5) and for the reply the cursor is in. It shows the
 * reply as generated (as /raw does), each token with its own attribute:
 * shaded by its raw probability (the model's, before sampling: under
 * greedy decoding the final one is always 1), reverse video under the
 * cursor. A piece may end inside a UTF-8 character (byte tokens); the
 * bytes are held back and the character goes to the token that
 * completes it. Control tokens (the end of turn) show only under the
 * cursor.
 *
 * Shading (TUI_SHADE_LOW, TUI_SHADE_MID): p < LOW in red, or underlined
 * under NO_COLOR; p < MID in yellow (no cue without colour).
 *
 * Cursor mode (TUI_MODE_TOKENS) holds (cur_msg, cur_tok): always a valid
 * token of a reply with reports while the mode is on; leaving the mode,
 * or any change to the transcript that could move messages (tui_remove,
 * a cleared transcript), ends it.
 *
 * Branches, from cursor mode: a digit N (1-9, 0 for 10) branches the
 * cursor's reply at its token to the pane's alternative #N
 * (session_branch_at on the worker): the transcript drops the reply and
 * what follows it, as the session does, and the new reply streams in its
 * place, the kept tokens first. [ and ] make the previous / next sibling
 * of the cursor's reply the active branch (session_switch_branch): the
 * transcript is reloaded from the session and the cursor put back on the
 * same reply, which is now the sibling. Replies are named to the worker
 * by their ordinal among user and assistant messages (tui_job_arg).
 *
 * Reasoning: the first n_reasoning reports of a thinking model's reply
 * are its reasoning's tokens (the <think> tags included). While the
 * block is folded they are not laid out and the cursor skips them
 * (tui_tokens_lo); unfolded, they are laid out dimmed and the cursor
 * reaches them. A reply that is only reasoning has no other token: the
 * cursor landing in it unfolds it (tui_tokens_go), and folding it is
 * refused while the cursor is there. Invariant: the cursor's token is
 * never inside a folded block.
 */
#include "tui_int.h"

#include "tui_health.h"

#include <curses.h>
#include <stdlib.h>
#include <string.h>

#define TUI_SHADE_LOW 0.25f
#define TUI_SHADE_MID 0.6f

size_t tui_tokens_n_reasoning(const struct tui_msg *m)
{
	size_t n = m->n_reasoning > 0 ? (size_t)m->n_reasoning : 0;

	if (!tui_msg_has_reasoning(m))
		return 0;
	return n < m->n_toks ? n : m->n_toks;
}

size_t tui_tokens_lo(const struct tui_msg *m)
{
	size_t n = tui_tokens_n_reasoning(m);

	return !m->unfold && n < m->n_toks ? n : 0;
}

void tui_tokens_free(struct tui_msg *m)
{
	for (size_t i = 0; i < m->n_toks; i++)
		tui_tok_clear(&m->toks[i]);
	free(m->toks);
	m->toks = NULL;
	m->n_toks = m->cap_toks = 0;
}

/* Take K's content over into M's reports (K is left empty); its flags
   are checked, and the reply's flags for the status bar updated. */
void tui_tokens_push(struct tui *t, struct tui_msg *m, struct tui_tok *k)
{
	if (m->n_toks == m->cap_toks) {
		size_t cap = m->cap_toks ? m->cap_toks * 2 : 64;
		struct tui_tok *v = realloc(m->toks, cap * sizeof(*v));

		if (v == NULL) {
			tui_tok_clear(k);
			return;
		}
		m->toks = v;
		m->cap_toks = cap;
	}
	tui_health_check(k, m->toks, m->n_toks, t->n_vocab);
	m->toks[m->n_toks++] = *k;
	memset(k, 0, sizeof(*k));
	if (m->toks[m->n_toks - 1].flags && t->flags == 0) {
		t->flag_layer = m->toks[m->n_toks - 1].flag_layer;
		t->flag_tok = m->n_toks;
	}
	t->flags |= m->toks[m->n_toks - 1].flags;
	if (t->shade ||
	    (t->mode == TUI_MODE_TOKENS && &t->msgs[t->cur_msg] == m))
		m->lines_w = 0;
}

/* The reply of the pane when not in cursor mode: the last with reports,
   or the last reply (which may have none). */
static const struct tui_msg *tui_tokens_last(const struct tui *t)
{
	for (size_t i = t->n_msgs; i > 0; i--) {
		const struct tui_msg *m = &t->msgs[i - 1];

		if (m->role == STORE_ROLE_ASSISTANT && (m->n_toks || !m->live))
			return m;
	}
	return NULL;
}

const struct tui_tok *tui_tokens_target(const struct tui *t,
                                        const struct tui_msg **mp, size_t *idx)
{
	const struct tui_msg *m;

	if (t->mode == TUI_MODE_TOKENS) {
		m = &t->msgs[t->cur_msg];
		*mp = m;
		*idx = t->cur_tok;
		return &m->toks[t->cur_tok];
	}
	m = tui_tokens_last(t);
	*mp = m;
	if (m == NULL || m->n_toks == 0)
		return NULL;
	*idx = m->n_toks - 1;
	return &m->toks[m->n_toks - 1];
}

unsigned tui_tokens_tag(const struct tui *t, const struct tui_msg *m)
{
	unsigned tag = 0;

	if (m->role != STORE_ROLE_ASSISTANT || m->n_toks == 0)
		return 0;
	if (t->shade)
		tag |= 1;
	if (t->mode == TUI_MODE_TOKENS && &t->msgs[t->cur_msg] == m)
		tag |= 2 | (unsigned)(t->cur_tok << 2);
	return tag;
}

/* The attribute of token K (CUR: under the cursor). */
static uint16_t tui_tokens_attr(const struct tui *t, const struct tui_tok *k,
                                bool cur)
{
	uint16_t a = 0;

	if (t->shade && k->p_raw < TUI_SHADE_LOW)
		a = TUI_COLOR(TUI_C_PLOW);
	else if (t->shade && k->p_raw < TUI_SHADE_MID)
		a = TUI_COLOR(TUI_C_PMID);
	if (cur)
		a |= TUI_A_REVERSE;
	return a;
}

/* Bytes of S[0, n) up to the last whole UTF-8 character (the rest is a
   character's start, held back). */
static size_t tui_tokens_whole(const char *s, size_t n)
{
	size_t i = n, k = 0;

	while (i > 0 && k < 4 && ((unsigned char)s[i - 1] & 0xc0) == 0x80) {
		i--;
		k++;
	}
	if (i == 0)
		return n;
	unsigned char c = (unsigned char)s[i - 1];
	size_t need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;

	return need > k + 1 ? i - 1 : n;
}

void tui_tokens_lay(struct tui *t, struct tui_msg *m, struct tui_lay *y)
{
	char held[8];
	size_t nh = 0;
	bool cur_msg = t->mode == TUI_MODE_TOKENS && &t->msgs[t->cur_msg] == m;

	size_t nr = tui_tokens_n_reasoning(m);

	m->cur_line = -1;
	tui_lay_para(y, NULL, 0, NULL, 0, false);
	for (size_t i = m->unfold ? 0 : nr; i < m->n_toks; i++) {
		const struct tui_tok *k = &m->toks[i];
		bool cur = cur_msg && i == t->cur_tok;
		uint16_t at =
		    tui_tokens_attr(t, k, cur) | (i < nr ? TUI_A_DIM : 0);
		char buf[256];
		const char *p = k->text + k->off[0];
		size_t n = k->len[0], w;

		if (cur)
			m->cur_line = y->out->n;
		if (k->ctl[0]) { /* the end of turn: only under the cursor */
			if (cur) {
				tui_pane_visible(p, n, buf, sizeof(buf));
				tui_lay_text(y, buf, strlen(buf),
				             at | TUI_A_DIM);
			}
			continue;
		}
		if (cur && n > 0 && strspn(p, " \n\t") >= n) {
			/* whitespace under the cursor: make it visible */
			tui_pane_visible(p, n, buf, sizeof(buf));
			tui_lay_text(y, buf, strlen(buf), at);
			if (memchr(p, '\n', n))
				tui_lay_text(y, "\n", 1, 0);
			continue;
		}
		/* a character split over tokens goes to the one ending it */
		while (n > 0) {
			size_t c =
			    n < sizeof(held) - nh ? n : sizeof(held) - nh;

			memcpy(held + nh, p, c);
			nh += c;
			p += c;
			n -= c;
			w = tui_tokens_whole(held, nh);
			if (w == 0 && nh < 4)
				break;
			if (w == 0)
				w = nh; /* not UTF-8: shown as replaced */
			tui_lay_text(y, held, w, at);
			memmove(held, held + w, nh - w);
			nh -= w;
		}
	}
	if (nh)
		tui_lay_text(y, held, nh, 0);
	tui_lay_end(y);
}

/* The next (DIR 1) or previous (-1) reply with reports from message I
   (excluded), or (size_t)-1. */
static size_t tui_tokens_msg(const struct tui *t, size_t i, int dir)
{
	while (dir > 0 ? i + 1 < t->n_msgs : i > 0) {
		i = dir > 0 ? i + 1 : i - 1;
		if (t->msgs[i].role == STORE_ROLE_ASSISTANT &&
		    t->msgs[i].n_toks > 0)
			return i;
	}
	return (size_t)-1;
}

/* Move the cursor to (M, K); the views that depend on it follow. A
   token of a folded block unfolds it (see the notes above). */
static void tui_tokens_go(struct tui *t, size_t m, size_t k)
{
	if (k < tui_tokens_n_reasoning(&t->msgs[m]))
		t->msgs[m].unfold = true;
	t->msgs[t->cur_msg].lines_w = 0;
	t->cur_msg = m;
	t->cur_tok = k;
	t->msgs[m].lines_w = 0;
	t->dirty = true;
}

/* One token forward (DIR 1) or back (-1), across replies. */
static void tui_tokens_step(struct tui *t, int dir)
{
	const struct tui_msg *m = &t->msgs[t->cur_msg];
	size_t o;

	if (dir > 0 && t->cur_tok + 1 < m->n_toks)
		tui_tokens_go(t, t->cur_msg, t->cur_tok + 1);
	else if (dir < 0 && t->cur_tok > tui_tokens_lo(m))
		tui_tokens_go(t, t->cur_msg, t->cur_tok - 1);
	else if ((o = tui_tokens_msg(t, t->cur_msg, dir)) != (size_t)-1)
		tui_tokens_go(t, o,
		              dir > 0 ? tui_tokens_lo(&t->msgs[o])
		                      : t->msgs[o].n_toks - 1);
}

/* The next (DIR 1) or previous token whose raw p is under jump_p. */
static void tui_tokens_jump(struct tui *t, int dir)
{
	size_t m = t->cur_msg, k = t->cur_tok;

	for (;;) {
		if (dir > 0 && k + 1 < t->msgs[m].n_toks)
			k++;
		else if (dir < 0 && k > tui_tokens_lo(&t->msgs[m]))
			k--;
		else if ((m = tui_tokens_msg(t, m, dir)) != (size_t)-1)
			k = dir > 0 ? tui_tokens_lo(&t->msgs[m])
			            : t->msgs[m].n_toks - 1;
		else
			break;
		if (t->msgs[m].toks[k].p_raw < t->jump_p) {
			tui_tokens_go(t, m, k);
			return;
		}
	}
	tui_say(t, false, "no %s token under p %.2f",
	        dir > 0 ? "later" : "earlier", t->jump_p);
}

void tui_tokens_enter(struct tui *t)
{
	size_t i = tui_tokens_msg(t, t->n_msgs, -1);

	if (i == (size_t)-1) {
		const struct tui_msg *m = tui_tokens_last(t);

		tui_say(t, true, "%s",
		        m && m->toks_none
		            ? "no token reports stored for this message"
		            : "no reply with token reports yet");
		return;
	}
	t->mode = TUI_MODE_TOKENS;
	t->pane = true; /* the pane follows the cursor */
	tui_tokens_go(t, i, t->msgs[i].n_toks - 1);
	tui_say(t, false,
	        "cursor mode: ←/→ j/k move, n/N under p %.2f (+/-), 1-9 0 "
	        "branch, [/] siblings, Esc leaves",
	        t->jump_p);
}

/* The ordinal of entry I among the user and assistant messages. */
static size_t tui_tokens_ordinal(const struct tui *t, size_t i)
{
	size_t k = 0;

	for (size_t j = 0; j < i; j++)
		if (t->msgs[j].role == STORE_ROLE_USER ||
		    t->msgs[j].role == STORE_ROLE_ASSISTANT)
			k++;
	return k;
}

/* A digit D: branch the cursor's reply at its token to the pane's
   alternative D (1-9; 0 is the 10th). */
static void tui_tokens_branch(struct tui *t, int d)
{
	const struct tui_msg *m = &t->msgs[t->cur_msg];
	const struct tui_tok *k = &m->toks[t->cur_tok];
	int n = d == '0' ? 10 : d - '0';
	struct tui_job_arg a = {0};
	char vis[64];

	if (t->busy) {
		tui_say(t, true, "a reply is running (Ctrl-C stops it)");
		return;
	}
	if (n > k->n_top) {
		tui_say(t, true, "no alternative #%d for this token", n);
		return;
	}
	a.reply = tui_tokens_ordinal(t, t->cur_msg);
	a.pos = (int32_t)t->cur_tok;
	a.val = k->top[n - 1].id;
	tui_pane_visible(k->text + k->off[n], k->len[n], vis, sizeof(vis));
	/* the session drops the reply and what follows; so does the view */
	size_t r = t->cur_msg;

	t->mode = TUI_MODE_CHAT;
	while (t->n_msgs > r)
		tui_drop_last(t);
	if (tui_start_arg(t, TUI_JOB_BRANCH, NULL, 0, &a) == 0)
		tui_say(t, false, "branch at token %d: #%d \"%s\" id %d",
		        a.pos + 1, n, vis, a.val);
}

/* [ or ]: the previous (DIR -1) or next sibling of the cursor's reply. */
static void tui_tokens_sibling(struct tui *t, int dir)
{
	struct tui_job_arg a = {0};

	if (t->busy) {
		tui_say(t, true, "a reply is running (Ctrl-C stops it)");
		return;
	}
	a.reply = tui_tokens_ordinal(t, t->cur_msg);
	a.val = dir;
	t->sib_cursor = true;
	t->sib_msg = t->cur_msg;
	t->sib_tok = t->cur_tok;
	tui_start_arg(t, TUI_JOB_SIBLING, NULL, 0, &a);
}

void tui_tokens_switched(struct tui *t, struct tui_ev *e)
{
	bool cursor = t->sib_cursor;
	size_t i = t->sib_msg;

	t->sib_cursor = false;
	tui_load_msgs(t, e->msgs, e->n_msgs);
	t->have_last = false;
	t->scroll = 0;
	if (cursor && i < t->n_msgs && t->msgs[i].n_toks > 0) {
		t->mode = TUI_MODE_TOKENS;
		t->pane = true;
		tui_tokens_go(t, i,
		              t->sib_tok < t->msgs[i].n_toks
		                  ? t->sib_tok
		                  : t->msgs[i].n_toks - 1);
	}
	tui_say(t, false, "branch %d of %d", e->a, e->b);
}

/* Leave cursor mode. */
static void tui_tokens_leave(struct tui *t)
{
	t->msgs[t->cur_msg].lines_w = 0;
	t->mode = TUI_MODE_CHAT;
	t->msg[0] = '\0';
	t->dirty = true;
}

void tui_tokens_key(struct tui *t, int k, bool fkey)
{
	if (fkey) {
		switch (k) {
		case KEY_LEFT:
		case KEY_UP:
			tui_tokens_step(t, -1);
			break;
		case KEY_RIGHT:
		case KEY_DOWN:
			tui_tokens_step(t, 1);
			break;
		case KEY_HOME:
			tui_tokens_go(t, t->cur_msg,
			              tui_tokens_lo(&t->msgs[t->cur_msg]));
			break;
		case KEY_END:
			tui_tokens_go(t, t->cur_msg,
			              t->msgs[t->cur_msg].n_toks - 1);
			break;
		case KEY_F(2):
			t->pane = !t->pane;
			break;
		case KEY_F(7):
			tui_fold(t, t->cur_msg);
			break;
		case KEY_F(5):
			t->shade = !t->shade;
			for (size_t i = 0; i < t->n_msgs; i++)
				t->msgs[i].lines_w = 0;
			break;
		case KEY_RESIZE:
			break;
		default:
			tui_tokens_leave(t);
		}
		return;
	}
	switch (k) {
	case 'h':
	case 'k':
		tui_tokens_step(t, -1);
		break;
	case 'l':
	case 'j':
		tui_tokens_step(t, 1);
		break;
	case 'n':
		tui_tokens_jump(t, 1);
		break;
	case 'N':
	case 'p':
		tui_tokens_jump(t, -1);
		break;
	case '+':
	case '-':
		t->jump_p += k == '+' ? 0.05f : -0.05f;
		t->jump_p = t->jump_p < 0.05f  ? 0.05f
		            : t->jump_p > 1.0f ? 1.0f
		                               : t->jump_p;
		tui_say(t, false, "n jumps to tokens under p %.2f", t->jump_p);
		break;
	case 'r':
		tui_fold(t, t->cur_msg);
		break;
	case 's':
		t->shade = !t->shade;
		for (size_t i = 0; i < t->n_msgs; i++)
			t->msgs[i].lines_w = 0;
		break;
	case '0':
	case '1':
	case '2':
	case '3':
	case '4':
	case '5':
	case '6':
	case '7':
	case '8':
	case '9':
		tui_tokens_branch(t, k);
		break;
	case '[':
	case ']':
		tui_tokens_sibling(t, k == ']' ? 1 : -1);
		break;
	case 12: /* Ctrl-L */
		clearok(curscr, TRUE);
		break;
	default: /* Esc, q, Enter, Ctrl-C ... */
		tui_tokens_leave(t);
	}
}

void tui_fold(struct tui *t, size_t i)
{
	struct tui_msg *m = &t->msgs[i];
	size_t nr = tui_tokens_n_reasoning(m);
	bool cursor = t->mode == TUI_MODE_TOKENS && t->cur_msg == i;

	if (!tui_msg_has_reasoning(m)) {
		tui_say(t, false, "this reply has no reasoning");
		return;
	}
	if (m->unfold && cursor && t->cur_tok < nr) { /* the cursor leaves */
		if (nr >= m->n_toks) {
			tui_say(t, false,
			        "the reply is only reasoning: the cursor is "
			        "in it");
			return;
		}
		t->cur_tok = nr;
	}
	m->unfold = !m->unfold;
	m->lines_w = 0;
	t->dirty = true;
	tui_say(t, false, "reasoning %s", m->unfold ? "unfolded" : "folded");
}

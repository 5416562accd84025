/*
 * tui_pane.c - the debug pane (F2): what the model wanted at one step of
 * a reply, and how its layers looked.
 *
 * NOTES ON THE DESIGN
 *
 * The pane shows one token (tui_tokens_target: the cursor's in cursor
 * mode, else the last one generated, live while a reply streams) from the
 * copy the worker made of the sampler's report and the trace (struct
 * tui_tok); nothing here touches the session. Two sections, laid out as
 * styled lines at the pane's width:
 *   the report  the chosen token (invisible characters made visible),
 *               its id, probability and rank raw and final, the entropy,
 *               the sampling settings, the layers' rms as a sparkline
 *               (what is left of the layers when the pane is short), the
 *               top TUI_TOP alternatives with logit, probability and a
 *               bar, and the step's flags;
 *   the layers  one row per layer: min, max, rms of the residual after
 *               it, a bar of its rms, "!" where tui_health flags it;
 *               in a mixture of experts, under it the experts the layer
 *               chose for the token, best first, with their weights.
 * On a wide terminal the pane is a column at the side (the report above
 * the layers); below the transcript on a narrow one, the two sections
 * side by side when it is at least 96 columns wide. Rows that do not fit are
 * cut; the first rows of each section are the ones kept.
 *
 * Row formats (tests/t_tui_pane.sh reads them from the screen):
 *   "#R ID LOGIT PROB BAR TEXT"  an alternative, R its raw rank
 *   "L<i> MIN MAX RMS BAR"       layer i
 *   "  e ID:W ID:W ..."          the experts layer i chose (a mixture)
 */
#include "tui_int.h"

#include "tui_health.h"

#include <curses.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TUI_PANE_BAR 8 /* cells of a bar */

/* Bytes of the UTF-8 sequence at S[0, n) when valid, else 0. */
static size_t tui_pane_utf8(const unsigned char *s, size_t n)
{
	size_t k;

	if (s[0] < 0x80)
		return 1;
	k = s[0] >= 0xf0 && s[0] < 0xf5   ? 4
	    : s[0] >= 0xe0                ? 3
	    : s[0] >= 0xc2 && s[0] < 0xe0 ? 2
	                                  : 0;
	if (k == 0 || k > n)
		return 0;
	for (size_t i = 1; i < k; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return k;
}

/*
 * S[0, n) with its invisible characters visible, into OUT (OUTN bytes,
 * NUL-terminated, cut at a whole character): space "·", newline "↵",
 * tab "→", carriage return "␍", other control characters as their
 * Control Pictures (U+2400...), bytes that are not UTF-8 as "\xNN".
 * Returns the display columns used.
 */
int tui_pane_visible(const char *s, size_t n, char *out, size_t outn)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t o = 0, i = 0;
	int cols = 0;

	if (outn == 0)
		return 0;
	while (i < n) {
		char buf[8];
		size_t k = tui_pane_utf8(u + i, n - i), bl;

		if (k == 1 && u[i] == ' ')
			bl = (size_t)snprintf(buf, sizeof(buf), "·");
		else if (k == 1 && u[i] == '\n')
			bl = (size_t)snprintf(buf, sizeof(buf), "↵");
		else if (k == 1 && u[i] == '\t')
			bl = (size_t)snprintf(buf, sizeof(buf), "→");
		else if (k == 1 && u[i] == '\r')
			bl = (size_t)snprintf(buf, sizeof(buf), "␍");
		else if (k == 1 && (u[i] < 0x20 || u[i] == 0x7f)) {
			unsigned cp = u[i] == 0x7f ? 0x2421 : 0x2400 + u[i];

			buf[0] = (char)(0xe0 | (cp >> 12));
			buf[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
			buf[2] = (char)(0x80 | (cp & 0x3f));
			bl = 3;
		} else if (k == 0) {
			bl =
			    (size_t)snprintf(buf, sizeof(buf), "\\x%02x", u[i]);
			k = 1;
		} else {
			memcpy(buf, s + i, k);
			bl = k;
		}
		if (o + bl + 1 > outn)
			break;
		memcpy(out + o, buf, bl);
		o += bl;
		cols += tui_lines_cols(buf, bl);
		i += k;
	}
	out[o] = '\0';
	return cols;
}

/* A bar of FRAC (0..1) in TUI_PANE_BAR cells of eighths, into OUT. */
static void tui_pane_bar(double frac, char *out, size_t n)
{
	static const char *eighth[8] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
	int e = frac > 0 ? (int)lround(frac * TUI_PANE_BAR * 8) : 0;
	size_t o = 0;

	if (!(frac >= 0)) /* NaN */
		e = 0;
	if (e > TUI_PANE_BAR * 8)
		e = TUI_PANE_BAR * 8;
	out[0] = '\0';
	for (int i = 0; i < e / 8 && o + 4 < n; i++)
		o += (size_t)snprintf(out + o, n - o, "█");
	if (e % 8 && o + 4 < n)
		snprintf(out + o, n - o, "%s", eighth[e % 8]);
}

/* The rms of K's layers as a sparkline (one cell a layer, scaled to the
   largest; "!" where tui_health flags the layer) into OUT. */
static void tui_pane_spark(const struct tui_tok *k, char *out, size_t n)
{
	static const char *lv[8] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
	float top = 0;
	size_t o = 0;

	out[0] = '\0';
	for (int il = 0; il < k->n_layer; il++)
		if (isfinite(k->layers[il].rms) && k->layers[il].rms > top)
			top = k->layers[il].rms;
	for (int il = 0; il < k->n_layer && o + 4 < n; il++) {
		float r = k->layers[il].rms;
		int i = top > 0 && isfinite(r) ? (int)(r / top * 7.999f) : 0;

		if (tui_health_layer(k, il))
			o += (size_t)snprintf(out + o, n - o, "!");
		else
			o += (size_t)snprintf(out + o, n - o, "%s",
			                      lv[i < 0   ? 0
			                         : i > 7 ? 7
			                                 : i]);
	}
}

/* One line of TEXT (printf style) with attribute AT into Y. */
static void tui_pane_line(struct tui_lay *y, uint16_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void tui_pane_line(struct tui_lay *y, uint16_t at, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	tui_lay_para(y, NULL, 0, "  ", 0, false);
	tui_lay_text(y, buf, strlen(buf), at);
	tui_lay_end(y);
}

/* The sampling settings of K in words: the live reply's, or those a
   stored reply recorded (an older parley's reply has none). */
static void tui_pane_samp(const struct tui_tok *k, char *out, size_t n)
{
	const struct sampler_config *c = &k->samp;
	const char *rnd = k->seed_random ? " (random)" : "";
	int o;

	if (k->samp_none) {
		snprintf(out, n, "sampling not recorded (an older reply)");
		return;
	}
	if (c->temperature <= 0)
		o = snprintf(out, n, "sampling greedy (temp 0)");
	else if (k->samp_remote) /* what the API was sent (remote_chat.c) */
		o = snprintf(out, n, "sampling temp %g top-p %g seed %llu%s",
		             c->temperature, c->top_p,
		             (unsigned long long)c->seed, rnd);
	else
		o = snprintf(out, n,
		             "sampling temp %g top-k %d top-p %g min-p %g "
		             "seed %llu%s",
		             c->temperature, c->top_k, c->top_p, c->min_p,
		             (unsigned long long)c->seed, rnd);
	if (o > 0 && (size_t)o < n && k->samp_remote &&
	    (c->frequency_penalty != 0.0f || c->presence_penalty != 0.0f))
		snprintf(out + o, n - (size_t)o, " freq %g pres %g",
		         c->frequency_penalty, c->presence_penalty);
	else if (o > 0 && (size_t)o < n &&
	         (c->repeat_penalty != 1.0f || c->frequency_penalty != 0.0f ||
	          c->presence_penalty != 0.0f))
		snprintf(out + o, n - (size_t)o,
		         " repeat %g freq %g pres %g last %d",
		         c->repeat_penalty, c->frequency_penalty,
		         c->presence_penalty, c->penalty_last_n);
}

/* A rank for the report: "3", or ">10" when only the top is known. */
static const char *tui_pane_rank(int32_t r, int n_top, char *buf, size_t n)
{
	if (r > 0)
		snprintf(buf, n, "%d", r);
	else
		snprintf(buf, n, ">%d", n_top);
	return buf;
}

/* Whether pieces A and B of K hold the same bytes. */
static bool tui_pane_same_text(const struct tui_tok *k, int a, int b)
{
	return k->len[a] == k->len[b] &&
	       memcmp(k->text + k->off[a], k->text + k->off[b], k->len[a]) == 0;
}

/* The report section of token IDX (of N; the first NR the reasoning's)
   of K into Y. */
static void tui_pane_report(const struct tui *t, const struct tui_tok *k,
                            size_t idx, size_t n, size_t nr, struct tui_lay *y)
{
	char vis[256], bar[64], r1[16], fin[64];

	tui_pane_line(y, TUI_A_BOLD, "token %zu of %zu%s%s", idx + 1, n,
	              idx < nr ? ", reasoning" : "",
	              t->mode == TUI_MODE_TOKENS ? " (cursor)" : "");
	if (k->flags) {
		char f[96];

		tui_health_describe(k->flags, k->flag_layer, true, f,
		                    sizeof(f));
		tui_pane_line(y, TUI_A_BOLD | TUI_COLOR(TUI_C_ERROR), "⚑ %s",
		              f);
	}
	tui_pane_visible(k->text + k->off[0], k->len[0], vis, sizeof(vis));
	if (k->remote) /* a server's token: its text, no id of ours */
		tui_pane_line(y, 0, "chosen \"%s\" (server token)", vis);
	else
		tui_pane_line(y, 0, "chosen \"%s\" id %d%s", vis, k->id,
		              k->ctl[0] ? " (control)" : "");
	/* a stored report has no final rank (0), a forced token (a branch)
	   no final probability (NaN) */
	if (isnan(k->p))
		snprintf(fin, sizeof(fin), "forced (branch)");
	else if (k->rank > 0)
		snprintf(fin, sizeof(fin), "final p %.4f rank %d", k->p,
		         k->rank);
	else
		snprintf(fin, sizeof(fin), "final p %.4f", k->p);
	tui_pane_line(y, 0, "raw p %.4f rank %s · %s", k->p_raw,
	              tui_pane_rank(k->rank_raw, k->n_top, r1, sizeof(r1)),
	              fin);
	if (k->remote)
		tui_pane_line(y, 0, "entropy %.3f nats over the %d returned",
		              k->raw_entropy, k->n_top);
	else
		tui_pane_line(y, 0,
		              "entropy raw %.3f · final %.3f nats · kept %d",
		              k->raw_entropy, k->entropy, k->n_kept);
	tui_pane_samp(k, vis, sizeof(vis));
	tui_pane_line(y, TUI_A_DIM, "%s", vis);
	if (k->layers) { /* the layers at a glance (also when cut below) */
		char sp[1024];

		tui_pane_spark(k, sp, sizeof(sp));
		tui_pane_line(y, 0, "rms by layer %s", sp);
	}
	tui_pane_line(y, TUI_A_BOLD,
	              k->remote ? "top %d          logprob  prob"
	                        : "top %d      id   logit   prob",
	              k->n_top);
	for (int i = 0; i < k->n_top; i++) {
		const struct sampler_cand *c = &k->top[i];

		tui_pane_bar(c->prob, bar, sizeof(bar));
		tui_pane_visible(k->text + k->off[1 + i], k->len[1 + i], vis,
		                 sizeof(vis));
		/* the chosen one in bold: by id, or by text for a server's
		   tokens (their ids are all -1) */
		bool chosen = c->id == k->id;

		if (k->remote)
			chosen = tui_pane_same_text(k, 1 + i, 0);

		if (k->remote)
			tui_pane_line(y, chosen ? TUI_A_BOLD : 0,
			              "#%-2d %14.2f %6.4f %-*s \"%s\"", i + 1,
			              c->logprob, c->prob,
			              TUI_PANE_BAR + (int)strlen(bar) -
			                  tui_lines_cols(bar, strlen(bar)),
			              bar, vis);
		else
			tui_pane_line(y, chosen ? TUI_A_BOLD : 0,
			              "#%-2d %6d %7.2f %6.4f %-*s \"%s\"",
			              i + 1, c->id, c->logit, c->prob,
			              TUI_PANE_BAR + (int)strlen(bar) -
			                  tui_lines_cols(bar, strlen(bar)),
			              bar, vis);
	}
}

/* The experts layer IL of K chose, "  e ID:W ...", best first. */
static void tui_pane_experts(const struct tui_tok *k, int il, struct tui_lay *y)
{
	char buf[512];
	size_t o = 0;

	o += (size_t)snprintf(buf, sizeof(buf), "  e");
	for (int j = 0; j < k->exp_n[il] && o < sizeof(buf) - 24; j++)
		o += (size_t)snprintf(
		    buf + o, sizeof(buf) - o, " %d:%.2f",
		    k->exp_id[(size_t)il * k->exp_max + j],
		    (double)k->exp_w[(size_t)il * k->exp_max + j]);
	tui_pane_line(y, TUI_A_DIM, "%s", buf);
}

/* The layers section of K into Y. */
static void tui_pane_layers(const struct tui_tok *k, struct tui_lay *y)
{
	float top = 0;
	char bar[64];

	if (k->remote) {
		tui_pane_line(y, TUI_A_DIM,
		              "layers: not available for remote models");
		return;
	}
	if (k->layers == NULL) {
		tui_pane_line(y, TUI_A_DIM, "layers: no trace for this step");
		return;
	}
	for (int il = 0; il < k->n_layer; il++)
		if (isfinite(k->layers[il].rms) && k->layers[il].rms > top)
			top = k->layers[il].rms;
	tui_pane_line(y, TUI_A_BOLD, "layers %d  min       max       rms",
	              k->n_layer);
	for (int il = 0; il < k->n_layer; il++) {
		const struct trace_stats *s = &k->layers[il];
		unsigned f = tui_health_layer(k, il);

		tui_pane_bar(top > 0 ? s->rms / top : 0, bar, sizeof(bar));
		tui_pane_line(y, f ? TUI_A_BOLD | TUI_COLOR(TUI_C_ERROR) : 0,
		              "L%-2d %9.3g %9.3g %9.3g %s%s", il, s->min,
		              s->max, s->rms, bar, f ? " !" : "");
		if (k->exp_n != NULL && k->exp_n[il] > 0)
			tui_pane_experts(k, il, y);
	}
}

/* Draw lines L from row Y, column X, at most ROWS of them. */
static void tui_pane_put(const struct tui *t, const struct tui_lines *l, int y,
                         int x, int rows)
{
	for (int i = 0; i < l->n && i < rows; i++)
		tui_draw_line_at(t, y + i, x, &l->v[i]);
}

void tui_pane_draw(struct tui *t, int y, int x, int rows, int cols)
{
	const struct tui_msg *m = NULL;
	size_t idx = 0;
	const struct tui_tok *k = tui_tokens_target(t, &m, &idx);
	struct tui_lines a = {0}, b = {0};
	struct tui_lay ly;
	bool two = cols >= 96; /* below, wide: the sections side by side */
	int wa = two ? cols - 46 : cols, wb = two ? 45 : cols;

	if (rows < 1 || cols < 8)
		return;
	tui_lay_init(&ly, &a, wa);
	if (k == NULL)
		tui_pane_line(&ly, TUI_A_DIM, "%s",
		              m && m->toks_none
		                  ? "no token reports stored for this message"
		                  : "no reply yet: the pane shows each token "
		                    "of the next one");
	else
		tui_pane_report(t, k, idx, m->n_toks, tui_tokens_n_reasoning(m),
		                &ly);
	tui_lay_done(&ly);
	if (k != NULL) {
		tui_lay_init(&ly, &b, wb);
		tui_pane_layers(k, &ly);
		tui_lay_done(&ly);
	}
	if (!two) { /* a column: the report, then the layers */
		tui_pane_put(t, &a, y, x, rows);
		if (a.n + 1 < rows)
			tui_pane_put(t, &b, y + a.n + 1, x, rows - a.n - 1);
	} else {
		tui_pane_put(t, &a, y, x, rows);
		tui_pane_put(t, &b, y, x + wa + 1, rows);
	}
	tui_lines_clear(&a);
	tui_lines_clear(&b);
}

/*
 * t_tui_lines.c - the full-screen UI's layout (ui/tui_lines.c) and
 * Markdown rendering (ui/tui_md.c) without a terminal: display widths of
 * CJK, emoji, combining marks and tabs; word wrapping; code kept
 * unwrapped where it fits; and, over random text (valid and invalid
 * UTF-8, control bytes, Markdown marks) at random widths, the invariants:
 * no line wider than the layout, no control character ever emitted,
 * every visible character of the input laid out once and in order.
 */
#include "tap.h"
#include "tui_lines.h"
#include "tui_md.h"

#include <locale.h>
#include <stdlib.h>
#include <string.h>

/* Lay TEXT out (Markdown or raw) at WIDTH into L. */
static void lay(struct tui_lines *l, const char *text, int width, bool md)
{
	struct tui_lay y;

	tui_lines_clear(l);
	tui_lay_init(&y, l, width);
	tui_md_lay(&y, text, strlen(text), md);
	tui_lay_done(&y);
}

/* Line I of L as UTF-8 in BUF. */
static const char *line(const struct tui_lines *l, int i, char *buf, size_t n)
{
	size_t o = 0;

	buf[0] = '\0';
	if (i >= l->n)
		return buf;
	for (int k = 0; k < l->v[i].n && o + 8 < n; k++) {
		int w = wctomb(buf + o, l->v[i].wc[k]);

		if (w > 0)
			o += (size_t)w;
	}
	buf[o] = '\0';
	return buf;
}

/* The widths the layout gives the usual suspects. */
static void test_widths(void)
{
	tap_ok(tui_lines_cols("abc", 3) == 3, "ASCII: 1 column each");
	tap_ok(tui_lines_cols("日本語", 9) == 6, "CJK: 2 columns each");
	tap_ok(tui_lines_cols("🎉", 4) == 2, "emoji: 2 columns");
	tap_ok(tui_lines_cols("e\xcc\x81", 3) == 1,
	       "e + combining acute: 1 column");
	tap_ok(tui_lines_cols("\x1b[31m", 5) == 5,
	       "ESC counts as one replaced cell, never as a control");
}

/* Wrapping at word boundaries; code kept as is where it fits. */
static void test_wrap(void)
{
	struct tui_lines l = {0};
	char b[512];

	lay(&l, "the quick brown fox jumps", 10, false);
	tap_ok(l.n == 3 && !strcmp(line(&l, 0, b, sizeof(b)), "the quick") &&
	           !strcmp(line(&l, 1, b, sizeof(b)), "brown fox") &&
	           !strcmp(line(&l, 2, b, sizeof(b)), "jumps"),
	       "raw text wraps at the last space that fits");
	lay(&l, "日本語日本語", 7, false);
	tap_ok(l.n == 2 && l.v[0].cols == 6 && l.v[1].cols == 6,
	       "CJK wraps between characters (6 + 6 columns at width 7)");
	lay(&l, "a\tb", 20, false);
	tap_ok(!strcmp(line(&l, 0, b, sizeof(b)), "a   b"),
	       "a tab goes to the next multiple of 4");
	lay(&l, "```\nint x;\n```\n", 20, true);
	tap_ok(l.n == 1 && !strcmp(line(&l, 0, b, sizeof(b)), "│ int x;"),
	       "a fenced block: a bar, no fences (\"%s\")", b);
	lay(&l, "```\nif (a && b) return c;\n```\n", 12, true);
	tap_ok(l.n == 3 && !strcmp(line(&l, 0, b, sizeof(b)), "│ if (a && b"),
	       "code wider than the screen is cut anywhere, not at spaces "
	       "(\"%s\")",
	       line(&l, 0, b, sizeof(b)));
	lay(&l, "**bold** and *it*", 40, true);
	tap_ok(l.n == 1 && !strcmp(line(&l, 0, b, sizeof(b)), "bold and it") &&
	           (l.v[0].at[0] & TUI_A_BOLD) &&
	           (l.v[0].at[9] & TUI_A_ITALIC) && !(l.v[0].at[5] & 3),
	       "emphasis: marks gone, attributes set");
	lay(&l, "1. one\n2. two\n   - deep", 40, true);
	tap_ok(l.n == 3 && !strcmp(line(&l, 2, b, sizeof(b)), "   • deep"),
	       "nested list under a number: indented bullet (\"%s\")",
	       line(&l, 2, b, sizeof(b)));
	tui_lines_clear(&l);
}

/* Random bytes biased to what breaks renderers. */
static size_t random_text(char *buf, size_t cap, unsigned *seed)
{
	static const char *const bits[] = {
	    "word ",     "**",
	    "*",         "`",
	    "```\n",     "\n",
	    "\n\n",      "- ",
	    "1. ",       "> ",
	    "# ",        "| a | b |\n|---|---|\n",
	    "\t",        "日本",
	    "🎉",         "e\xcc\x81",
	    "\xcc\x81",  "\x1b[2J",
	    "\r",        "\x7f",
	    "\xff",      "\xe6\x97",
	    "&amp;",     "&#0;",
	    "&#x1F600;", "[l](u)",
	    "~~s~~",     "verylongwordwithoutanyspaceatall",
	    "\xc2\x9b"};
	size_t n = 0, k = (size_t)(rand_r(seed) % 60);

	while (k-- > 0) {
		const char *p =
		    bits[rand_r(seed) % (sizeof(bits) / sizeof(*bits))];
		size_t len = strlen(p);

		if (n + len + 1 >= cap)
			break;
		memcpy(buf + n, p, len);
		n += len;
	}
	buf[n] = '\0';
	return n;
}

/* The invariants over random texts and widths. */
static void test_random(void)
{
	struct tui_lines l = {0};
	unsigned seed = 12345;
	int wide = 0, ctrl = 0, cols_wrong = 0, lost = 0;
	char text[4096];

	for (int it = 0; it < 3000; it++) {
		int width = 1 + (int)(rand_r(&seed) % 40);
		bool md = it % 2;
		size_t n = random_text(text, sizeof(text), &seed);
		long want = 0, got = 0;

		lay(&l, text, width, md);
		for (int i = 0; i < l.n; i++) {
			int c = 0;

			for (int k = 0; k < l.v[i].n; k++) {
				wchar_t w = l.v[i].wc[k];
				int cw = tui_lines_wc_cols(w);

				if (cw < 0)
					ctrl++;
				c += cw > 0 ? cw : 0;
				if (w == L'w') /* the letter of "word" */
					got++;
			}
			if (l.v[i].cols > width)
				wide++;
			if (c != l.v[i].cols)
				cols_wrong++;
		}
		for (size_t i = 0; i < n; i++)
			if (text[i] == 'w' && !md)
				want++;
		if (!md && want != got)
			lost++;
	}
	tap_ok(wide == 0,
	       "3000 random texts: no line wider than the layout "
	       "(%d too wide)",
	       wide);
	tap_ok(ctrl == 0,
	       "no control character or invalid byte reaches the "
	       "screen (%d)",
	       ctrl);
	tap_ok(cols_wrong == 0,
	       "each line's column count is the sum of its "
	       "characters' widths (%d wrong)",
	       cols_wrong);
	tap_ok(lost == 0,
	       "raw text: every visible character laid out once "
	       "(%d texts lost some)",
	       lost);
	tui_lines_clear(&l);
}

int main(void)
{
	if (setlocale(LC_ALL, "C.UTF-8") == NULL)
		return tap_skip_all("no C.UTF-8 locale");
	test_widths();
	test_wrap();
	test_random();
	return tap_done();
}

/*
 * fuzz_md.c - libFuzzer harness for the full-screen UI's Markdown
 * renderer (ui/tui_md.c: md4c's callbacks into its own container stack,
 * prefixes, list numbers and table cells) and the layout under it
 * (ui/tui_lines.c: wrapping, widths, tabs, replacement of controls).
 *
 * Input: byte 0 gives the width, 1 + byte 0 % 160 columns; byte 1 a cut
 * point; the rest is the text. The text is laid out as Markdown and raw,
 * whole and cut at the cut point (a reply streams in pieces that may end
 * inside a UTF-8 character or a construct), and its code blocks are
 * extracted. Checked (abort otherwise), as tests/t_tui_lines.c states:
 * no line wider than the layout, each line's columns the sum of its
 * characters' widths, no control character or invalid byte on screen,
 * raw text keeps every 'w'; code blocks 1..count exist, count+1 not.
 */
#include "tui_lines.h"
#include "tui_md.h"

#include <locale.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static __attribute__((noreturn)) void fail(const char *why)
{
	fprintf(stderr, "fuzz_md: %s\n", why);
	abort();
}

/* Lay TEXT[0, len) out at WIDTH and check the lines. */
static void lay(const char *text, size_t len, int width, bool md)
{
	struct tui_lines l = {0};
	struct tui_lay y;
	long want = 0, got = 0;

	tui_lay_init(&y, &l, width);
	tui_md_lay(&y, text, len, md);
	tui_lay_done(&y);
	for (int i = 0; i < l.n; i++) {
		int cols = 0;

		for (int k = 0; k < l.v[i].n; k++) {
			int cw = tui_lines_wc_cols(l.v[i].wc[k]);

			if (cw < 0)
				fail("a control character or invalid byte "
				     "reached a line");
			cols += cw;
			got += l.v[i].wc[k] == L'w';
		}
		if (l.v[i].cols > width)
			fail("a line wider than the layout");
		if (cols != l.v[i].cols)
			fail("a line's columns are not its characters' sum");
	}
	for (size_t i = 0; i < len; i++)
		want += text[i] == 'w';
	if (!md && want != got)
		fail("raw text lost or doubled a visible character");
	tui_lines_clear(&l);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if (setlocale(LC_ALL, "C.UTF-8") == NULL)
		fail("no C.UTF-8 locale");
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data + 2;
	size_t len, cut, n;
	int width, count = 0;
	char *b;

	if (size < 2 || size > 65536) /* longer adds only time */
		return 0;
	width = 1 + data[0] % 160;
	len = size - 2;
	cut = len ? data[1] % (len + 1) : 0;
	for (int md = 0; md < 2; md++) {
		lay(text, cut, width, md);
		lay(text, len, width, md);
	}
	free(tui_md_code_block(text, len, 1, &n, &count));
	for (int i = 1; i <= count + 1 && i <= 64; i++) {
		b = tui_md_code_block(text, len, i, &n, NULL);
		if ((b != NULL) != (i <= count))
			fail("code block count and blocks disagree");
		free(b);
	}
	return 0;
}

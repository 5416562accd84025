/*
 * fuzz_tui_input.c - libFuzzer harness for the full-screen UI's input
 * path: terminal bytes decoded by ncurses the way tui.c sets it up
 * (keypad, the bracketed paste markers of tui_input_define_keys, a UTF-8
 * locale), the keys handed to the input line of ui/tui_input.c (libedit
 * on its private pty) as tui.c's chat mode does.
 *
 * Input: byte 0 gives the read size s = 1 + byte 0 (1..256); the rest
 * is the byte stream the terminal sends, written to ncurses' input pipe
 * s bytes at a time, each read drained before the next is written: a
 * UTF-8 character or an escape sequence split across reads is decoded
 * as ncurses does when its parts arrive apart (ESCDELAY is 0 here, so
 * the parts of a split sequence arrive as separate keys, as they do on
 * a slow line). libedit's requests for more keys (Ctrl-R search, ESC
 * prefixes) get the next keys of the stream.
 *
 * Checked after every key (abort otherwise): the cursor lies within the
 * line; tui_input_utf8 of the line is valid UTF-8 (what a submit sends);
 * a paste between the markers reaches the line whole, at the cursor, in
 * order ('\r' as '\n', NUL left out).
 */
#include "tui_input.h"

#include <locale.h>
#include <stdint.h>

/* LeakSanitizer's switch, where the build has it (clang, gcc). */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FUZZ_HAVE_LSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define FUZZ_HAVE_LSAN 1
#endif
#ifdef FUZZ_HAVE_LSAN
#include <sanitizer/lsan_interface.h>
#else
#define __lsan_disable() ((void)0)
#define __lsan_enable()  ((void)0)
#endif
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int pipe_w = -1;     /* the "terminal's" side of ncurses' input */
static const uint8_t *feed; /* the bytes not yet written */
static size_t feed_n, chunk;
static struct tui_input in;

/* Abort with WHY: libFuzzer keeps the input. */
static __attribute__((noreturn)) void fail(const char *why)
{
	fprintf(stderr, "fuzz_tui_input: %s\n", why);
	abort();
}

/* True when S[0, n) is valid UTF-8 (no overlong form, surrogate or code
   point past U+10FFFF). */
static int valid_utf8(const unsigned char *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned c = s[i], len, cp;

		if (c < 0x80) {
			i++;
			continue;
		}
		len = c >= 0xc2 && c < 0xe0   ? 2
		      : c >= 0xe0 && c < 0xf0 ? 3
		      : c >= 0xf0 && c < 0xf5 ? 4
		                              : 0;
		if (len == 0 || i + len > n)
			return 0;
		cp = c & (0x7f >> len);
		for (unsigned k = 1; k < len; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
		    (cp >= 0xd800 && cp < 0xe000) || cp > 0x10ffff)
			return 0;
		i += len;
	}
	return 1;
}

/* The next key from ncurses, writing the next read when it has none:
   1 with *K, *FKEY; 0 at the end of the input. */
static int next_key(int *k, bool *fkey)
{
	for (;;) {
		wint_t wk;
		int r = wget_wch(stdscr, &wk);

		if (r != ERR) {
			*k = (int)wk;
			*fkey = r == KEY_CODE_YES;
			return 1;
		}
		if (feed_n == 0)
			return 0;
		size_t n = feed_n < chunk ? feed_n : chunk;

		if (write(pipe_w, feed, n) != (ssize_t)n)
			fail("write to the input pipe");
		feed += n;
		feed_n -= n;
	}
}

/* libedit wants another key mid-command (tui.c's tui_wait_edit). */
static int wait_key(void *ud, wchar_t *c)
{
	int k;
	bool fkey;

	(void)ud;
	while (next_key(&k, &fkey)) {
		if (!fkey) {
			*c = (wchar_t)k;
			return 1;
		}
		if ((*c = tui_input_translate(k)) != 0)
			return 1;
	}
	return 0; /* the input ended: abandon the command */
}

/* The line's invariants; on a submit, take the line as tui.c does. */
static void check_line(bool submitted)
{
	size_t len, cur;
	const wchar_t *w = tui_input_line(&in, &len, &cur);
	char *s;

	if (cur > len)
		fail("cursor past the end of the line");
	if ((s = tui_input_utf8(w, len)) == NULL)
		return;
	if (!valid_utf8((const unsigned char *)s, strlen(s)))
		fail("the line's UTF-8 is not valid");
	if (submitted)
		tui_input_reset(&in, s);
	free(s);
}

/* The end marker: the paste must land whole at the cursor. */
static void paste_end(struct tui_paste *p)
{
	size_t len0, cur0, len1, cur1, n = 0;
	const wchar_t *w = tui_input_line(&in, &len0, &cur0);
	wchar_t *before = malloc((len0 + 1) * sizeof(*before));
	wchar_t *want = malloc((p->n + 1) * sizeof(*want));

	if (before == NULL || want == NULL)
		fail("out of memory");
	wmemcpy(before, w, len0);
	/* NULs and non-scalar values (surrogates, past U+10FFFF) are left
	   out */
	for (size_t i = 0; i < p->n; i++)
		if (p->buf[i] != L'\0' && p->buf[i] <= 0x10FFFF &&
		    (p->buf[i] < 0xD800 || p->buf[i] > 0xDFFF))
			want[n++] = p->buf[i];
	tui_input_paste_end(&in, p);
	w = tui_input_line(&in, &len1, &cur1);
	if (len1 != len0 + n || wmemcmp(w, before, cur0) != 0 ||
	    wmemcmp(w + cur0, want, n) != 0 ||
	    wmemcmp(w + cur0 + n, before + cur0, len0 - cur0) != 0)
		fail("a paste did not reach the line whole");
	free(before);
	free(want);
}

/* One key as tui.c's chat mode handles it (the parts about the line). */
static void key(struct tui_paste *p, int k, bool fkey)
{
	size_t len, cur;
	wchar_t c;

	tui_input_line(&in, &len, &cur);
	if (p->on) {
		if (!fkey)
			tui_input_paste_add(p, (wchar_t)k);
		else if (k == TUI_KEY_PASTE_END)
			paste_end(p);
		return;
	}
	if (fkey) {
		if (k == TUI_KEY_PASTE_BEGIN)
			tui_input_paste_begin(p);
		else if ((k != KEY_DC || len > 0) &&
		         (c = tui_input_translate(k)) != 0)
			check_line(tui_input_key(&in, c) == 1);
		return;
	}
	if (k == 3) /* Ctrl-C empties the line */
		tui_input_reset(&in, NULL);
	else if ((k == 4 && len == 0) || k == 26 || k == 12)
		return; /* quit, suspend, redraw: not the line's business */
	else
		check_line(tui_input_key(&in, (wchar_t)k) == 1);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	int fd[2];
	FILE *fin, *fout;
	wchar_t c;
	char err[256];

	(void)argc;
	(void)argv;
	if (setlocale(LC_ALL, "C.UTF-8") == NULL || pipe(fd) != 0 ||
	    (fin = fdopen(fd[0], "r")) == NULL ||
	    (fout = fopen("/dev/null", "w")) == NULL)
		fail("no C.UTF-8 locale, pipe or /dev/null");
	pipe_w = fd[1];
	/* One-time setup, not counted as leaks: libedit's (termcap's
	   tgetent) replaces ncurses' current terminal, leaving the one newterm
	   loaded unreferenced, and ncurses' first read keeps a string it no
	   longer points to; both happen once in the UI too. A first key and
	   input line here do them before any input is fuzzed. */
	__lsan_disable();
	if (newterm("xterm-256color", fout, fin) == NULL)
		fail("no terminfo entry for xterm-256color");
	raw();
	noecho();
	nonl();
	keypad(stdscr, TRUE);
	nodelay(stdscr, TRUE);
	set_escdelay(0);
	tui_input_define_keys();
	feed_n = 0;
	wait_key(NULL, &c);
	if (tui_input_open(&in, NULL, wait_key, NULL, err, sizeof(err)))
		fail(err);
	tui_input_key(&in, L'x');
	tui_input_close(&in);
	__lsan_enable();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tui_paste p = {0};
	char err[256];
	int k;
	bool fkey;

	if (size < 1 || size > 65536) /* longer adds only time */
		return 0;
	/* el_init's termcap tgetent drops a string of ncurses' now and then
	   (once in the UI, at every input here): not counted either; what
	   parley allocates later stays checked */
	__lsan_disable();
	if (tui_input_open(&in, NULL, wait_key, NULL, err, sizeof(err)))
		fail(err);
	__lsan_enable();
	flushinp(); /* nothing of the last input stays in ncurses' queue */
	chunk = (size_t)data[0] + 1;
	feed = data + 1;
	feed_n = size - 1;
	while (next_key(&k, &fkey))
		key(&p, k, fkey);
	tui_input_paste_free(&p);
	tui_input_close(&in);
	return 0;
}

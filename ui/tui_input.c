/*
 * tui_input.c - libedit on a private pty (tui_input.h).
 */
#include "tui_input.h"

#include <errno.h>
#include <fcntl.h>
#include <pty.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TUI_HIST_SIZE 1000

/* A Unicode scalar value: what libedit can hold. ncurses' own UTF-8
   decoder hands on surrogates (ED A0 80 gives U+D800) and values past
   U+10FFFF; in the line libedit's history search converts it to the
   locale with wcrtomb, which fails, and libedit 3.1-20221030 then calls
   abort() (ct_encode_string): the fuzz harness's long run found it
   (tests/data/tui_input/crashers/nonscalar-in-search). */
static bool tui_input_scalar(wchar_t c)
{
	return c >= 0 && c <= 0x10FFFF && (c < 0xD800 || c > 0xDFFF);
}

/* EL_GETCFN: the pushed key, else wait for one through the UI (a key
   read this way, as by ^V, is a scalar value too: others are skipped). */
static int tui_input_getc(EditLine *el, wchar_t *c)
{
	struct tui_input *in = NULL;

	el_wget(el, EL_CLIENTDATA, &in);
	if (in == NULL)
		return 0;
	if (in->has_pending) {
		in->has_pending = false;
		*c = in->pending;
		return 1;
	}
	for (;;) {
		int r = in->wait(in->ud, c);

		if (r != 1 || tui_input_scalar(*c))
			return r;
	}
}

/* Enter: mark the line complete (the UI takes it after el_wgets). */
static unsigned char tui_input_submit(EditLine *el, int ch)
{
	struct tui_input *in = NULL;

	(void)ch;
	el_wget(el, EL_CLIENTDATA, &in);
	if (in)
		in->submitted = true;
	return CC_NEWLINE;
}

/* Ctrl-J, Alt-Enter: a newline inside the message. */
static unsigned char tui_input_newline(EditLine *el, int ch)
{
	(void)ch;
	el_winsertstr(el, L"\n");
	return CC_REFRESH;
}

int tui_input_open(struct tui_input *in, const char *hist_path,
                   tui_input_wait_fn wait, void *ud, char *err, size_t errlen)
{
	HistEventW ev;

	memset(in, 0, sizeof(*in));
	in->master = in->slave = -1;
	in->wait = wait;
	in->ud = ud;
	in->hist_path = hist_path;
	if (openpty(&in->master, &in->slave, NULL, NULL, NULL)) {
		snprintf(err, errlen, "openpty: %s", strerror(errno));
		return -1;
	}
	fcntl(in->master, F_SETFD, FD_CLOEXEC);
	fcntl(in->slave, F_SETFD, FD_CLOEXEC);
	in->fin = fdopen(dup(in->slave), "r");
	in->fnull = fopen("/dev/null", "w");
	if (in->fin == NULL || in->fnull == NULL) {
		snprintf(err, errlen, "cannot open libedit's streams");
		tui_input_close(in);
		return -1;
	}
	in->el = el_init_fd("parley", in->fin, in->fnull, in->fnull, in->slave,
	                    in->slave, in->slave);
	if (in->el == NULL) {
		snprintf(err, errlen, "libedit failed to start");
		tui_input_close(in);
		return -1;
	}
	el_wset(in->el, EL_CLIENTDATA, in);
	el_wset(in->el, EL_EDITOR, L"emacs");
	el_wset(in->el, EL_GETCFN, tui_input_getc);
	el_wset(in->el, EL_ADDFN, L"parley-submit", L"send the message",
	        tui_input_submit);
	el_wset(in->el, EL_ADDFN, L"parley-newline", L"insert a newline",
	        tui_input_newline);
	in->hist = history_winit();
	if (in->hist) {
		history_w(in->hist, &ev, H_SETSIZE, TUI_HIST_SIZE);
		history_w(in->hist, &ev, H_SETUNIQUE, 1);
		if (hist_path)
			history_w(in->hist, &ev, H_LOAD, hist_path);
		el_wset(in->el, EL_HIST, history_w, in->hist);
	}
	el_source(in->el, NULL);
	/* after ~/.editrc, so that these keys keep their meaning here */
	el_wset(in->el, EL_BIND, L"^M", L"parley-submit", NULL);
	el_wset(in->el, EL_BIND, L"^J", L"parley-newline", NULL);
	el_wset(in->el, EL_BIND, L"\033^M", L"parley-newline", NULL);
	/* no numeric arguments (Esc 6 6 2 0 1 ~ repeats ~ 66,201 times, and
	   a search over such a line took minutes: the tui_input fuzz
	   harness's long run found the hang); Esc and a digit insert the
	   digit */
	{
		static const wchar_t *const meta[] = {
		    L"\0330", L"\0331", L"\0332", L"\0333", L"\0334",
		    L"\0335", L"\0336", L"\0337", L"\0338", L"\0339"};

		for (size_t i = 0; i < sizeof(meta) / sizeof(meta[0]); i++)
			el_wset(in->el, EL_BIND, meta[i], L"ed-insert", NULL);
		el_wset(in->el, EL_BIND, L"\033-", L"ed-insert", NULL);
	}
	/* no libedit command line (ed-command, Esc x): its commands (bind,
	   echotc, settc, ...) would write to the terminal under ncurses, and
	   libedit 3.1-20221030 reads through a NULL argv[0] in el_wparse
	   when the command is empty (the fuzz harness's long run found the
	   segfault: tests/data/tui_input/crashers/esc-x-empty-command) */
	el_wset(in->el, EL_BIND, L"\033x", L"ed-insert", NULL);
	el_wset(in->el, EL_BIND, L"\033X", L"ed-insert", NULL);
	el_wset(in->el, EL_UNBUFFERED, 1);
	return 0;
}

void tui_input_close(struct tui_input *in)
{
	if (in->hist)
		history_wend(in->hist);
	if (in->el)
		el_end(in->el);
	if (in->fin)
		fclose(in->fin);
	if (in->fnull)
		fclose(in->fnull);
	if (in->master >= 0)
		close(in->master);
	if (in->slave >= 0)
		close(in->slave);
	memset(in, 0, sizeof(*in));
	in->master = in->slave = -1;
}

int tui_input_key(struct tui_input *in, wchar_t k)
{
	int n = 0;

	if (!tui_input_scalar(k))
		return 0; /* left out, as a terminal would show nothing */
	in->pending = k;
	in->has_pending = true;
	in->submitted = false;
	el_wgets(in->el, &n); /* NULL with n = -1 for an empty line */
	in->has_pending = false;
	return in->submitted ? 1 : 0;
}

/* NUL characters are left out: el_winsertstr takes a C string, and a
   NUL inside the paste (Ctrl-@ pasted) would end it there, losing the
   rest (fuzz/fuzz_tui_input found it:
   tests/data/tui_input/crashers/paste-with-nul). So are values that are
   not Unicode scalars (tui_input_scalar). */
void tui_input_insert(struct tui_input *in, const wchar_t *text, size_t n)
{
	wchar_t *s;
	size_t k = 0;

	if (n == 0) /* an empty paste (TEXT may then be NULL) */
		return;
	s = malloc((n + 1) * sizeof(*s));
	if (s == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		if (text[i] != L'\0' && tui_input_scalar(text[i]))
			s[k++] = text[i];
	s[k] = L'\0';
	if (k > 0)
		el_winsertstr(in->el, s);
	free(s);
}

const wchar_t *tui_input_line(struct tui_input *in, size_t *len, size_t *cursor)
{
	const LineInfoW *li = el_wline(in->el);

	*len = (size_t)(li->lastchar - li->buffer);
	*cursor = (size_t)(li->cursor - li->buffer);
	return li->buffer;
}

void tui_input_reset(struct tui_input *in, const char *text)
{
	HistEventW ev;

	/* toggling EL_UNBUFFERED resets the line and the history cursor */
	el_wset(in->el, EL_UNBUFFERED, 0);
	el_wset(in->el, EL_UNBUFFERED, 1);
	if (text && *text && strchr(text, '\n') == NULL && in->hist) {
		size_t n = strlen(text);
		wchar_t *w = malloc((n + 1) * sizeof(*w));

		if (w && mbstowcs(w, text, n + 1) != (size_t)-1) {
			history_w(in->hist, &ev, H_ENTER, w);
			if (in->hist_path)
				history_w(in->hist, &ev, H_SAVE, in->hist_path);
		}
		free(w);
	}
}

void tui_input_set(struct tui_input *in, const char *text)
{
	size_t n = strlen(text);
	wchar_t *w = malloc((n + 1) * sizeof(*w));

	tui_input_reset(in, NULL);
	if (w && mbstowcs(w, text, n + 1) != (size_t)-1)
		el_winsertstr(in->el, w);
	free(w);
}

/* Whether W holds Q[0, qn) (Q has no terminator); *AT where. */
static bool tui_input_holds(const wchar_t *w, const wchar_t *q, size_t qn,
                            size_t *at)
{
	for (size_t i = 0; w[i]; i++) {
		size_t k = 0;

		while (k < qn && w[i + k] == q[k])
			k++;
		if (k == qn) {
			*at = i;
			return true;
		}
	}
	return false;
}

wchar_t *tui_input_hist_find(struct tui_input *in, const wchar_t *q, size_t qn,
                             int *idx, size_t *at)
{
	HistEventW ev;
	int i = 0;

	if (in->hist == NULL || qn == 0 || *idx < 0)
		return NULL;
	/* H_FIRST is the newest entry, H_NEXT one older */
	for (int r = history_w(in->hist, &ev, H_FIRST); r != -1;
	     r = history_w(in->hist, &ev, H_NEXT), i++) {
		wchar_t *w;

		if (i < *idx || !tui_input_holds(ev.str, q, qn, at))
			continue;
		if ((w = malloc((wcslen(ev.str) + 1) * sizeof(*w))) == NULL)
			return NULL;
		wcscpy(w, ev.str);
		*idx = i;
		return w;
	}
	return NULL;
}

void tui_input_define_keys(void)
{
	define_key("\033[200~", TUI_KEY_PASTE_BEGIN);
	define_key("\033[201~", TUI_KEY_PASTE_END);
}

wchar_t tui_input_translate(int k)
{
	switch (k) {
	case KEY_LEFT:
		return 2; /* ^B */
	case KEY_RIGHT:
		return 6; /* ^F */
	case KEY_UP:
		return 16; /* ^P */
	case KEY_DOWN:
		return 14; /* ^N */
	case KEY_HOME:
		return 1; /* ^A */
	case KEY_END:
		return 5; /* ^E */
	case KEY_BACKSPACE:
		return 8; /* ^H */
	case KEY_DC:
		return 4; /* ^D: delete the character under the cursor */
	case KEY_ENTER:
		return 13;
	default:
		return 0;
	}
}

void tui_input_paste_begin(struct tui_paste *p)
{
	p->on = true;
	p->n = 0;
}

void tui_input_paste_add(struct tui_paste *p, wchar_t k)
{
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 4096;
		wchar_t *b = realloc(p->buf, cap * sizeof(*b));

		if (b == NULL)
			return;
		p->buf = b;
		p->cap = cap;
	}
	p->buf[p->n++] = k == '\r' ? L'\n' : k;
}

void tui_input_paste_end(struct tui_input *in, struct tui_paste *p)
{
	p->on = false;
	tui_input_insert(in, p->buf, p->n);
	p->n = 0;
}

void tui_input_paste_free(struct tui_paste *p)
{
	free(p->buf);
	memset(p, 0, sizeof(*p));
}

/* Encoded by hand, not with wcrtomb: glibc's writes 5- and 6-byte forms
   for values past U+10FFFF, which ncurses hands over for bytes such as
   0xFA (fuzz/fuzz_tui_input found it: tests/data/tui_input/crashers/
   five-byte-form), and the model, the store and the terminal want UTF-8
   whatever the locale. */
char *tui_input_utf8(const wchar_t *w, size_t n)
{
	char *s = malloc(n * 4 + 1), *p = s;

	if (s == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		unsigned long c = (unsigned long)w[i];

		if (c == 0 || !tui_input_scalar(w[i]))
			continue; /* no UTF-8 form (NUL would end the string) */
		if (c < 0x80) {
			*p++ = (char)c;
		} else if (c < 0x800) {
			*p++ = (char)(0xc0 | c >> 6);
			*p++ = (char)(0x80 | (c & 0x3f));
		} else if (c < 0x10000) {
			*p++ = (char)(0xe0 | c >> 12);
			*p++ = (char)(0x80 | (c >> 6 & 0x3f));
			*p++ = (char)(0x80 | (c & 0x3f));
		} else {
			*p++ = (char)(0xf0 | c >> 18);
			*p++ = (char)(0x80 | (c >> 12 & 0x3f));
			*p++ = (char)(0x80 | (c >> 6 & 0x3f));
			*p++ = (char)(0x80 | (c & 0x3f));
		}
	}
	*p = '\0';
	return s;
}

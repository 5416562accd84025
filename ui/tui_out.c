/*
 * tui_out.c - one write per frame. ncurses flushes its output after
 * every cursor movement, so a frame reaches the terminal in many
 * write()s, and a terminal may show it half drawn. Once curses mode is
 * set up (the terminal's modes are ncurses' business only then), file
 * descriptor 1 is pointed at a pipe: what ncurses writes for a frame
 * collects there, and tui_out_flush() sends it to the terminal (a
 * duplicate of the old descriptor 1) in a single write.
 *
 * Standard error is held the same way: while curses runs, fd 2 is an
 * unlinked temporary file, so that a library's message (or a failed
 * assertion's) cannot smear the screen; tui_out_err_release() puts fd 2
 * back and copies what was written there to it, once the terminal is
 * restored (by endwin, or by the fatal-signal path).
 *
 * Invariants: while captured, fd 1 is the pipe's write end and
 * tui_out_fd() the terminal; the pipe holds 1 MiB (a frame of a 300x100
 * screen is far smaller), and is non-blocking on both ends, so that a
 * full pipe can never stop the UI. When the pipe cannot be had, output
 * goes straight to the terminal as before (tui_out_fd() is then 1).
 */
#include "tui_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#define TUI_OUT_PIPE (1 << 20) /* bytes the pipe holds */

static int tui_out_tty = -1;      /* the terminal, while captured */
static int tui_out_pipe = -1;     /* read end of the pipe fd 1 points at */
static int tui_out_err_fd = -1;   /* the real standard error, while held */
static int tui_out_err_file = -1; /* the file fd 2 points at, while held */

/* Hold standard error in an unlinked temporary file. */
static void tui_out_err_capture(void)
{
	char path[] = "/tmp/parley-stderr.XXXXXX";
	int f = mkostemp(path, O_CLOEXEC), e;

	if (f < 0)
		return;
	unlink(path);
	e = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
	if (e < 0 || dup2(f, STDERR_FILENO) < 0) {
		if (e >= 0)
			close(e);
		close(f);
		return;
	}
	tui_out_err_fd = e;
	tui_out_err_file = f;
}

/* Put standard error back and copy what was held to it; called once the
   terminal is restored. Only async-signal-safe calls: the fatal-signal
   path uses it too. */
void tui_out_err_release(void)
{
	char buf[4096];
	ssize_t n;

	if (tui_out_err_fd < 0)
		return;
	dup2(tui_out_err_fd, STDERR_FILENO);
	lseek(tui_out_err_file, 0, SEEK_SET);
	while ((n = read(tui_out_err_file, buf, sizeof(buf))) > 0)
		if (write(STDERR_FILENO, buf, (size_t)n) != n)
			break;
	close(tui_out_err_file);
	close(tui_out_err_fd);
	tui_out_err_fd = tui_out_err_file = -1;
}

int tui_out_fd(void)
{
	return tui_out_tty >= 0 ? tui_out_tty : STDOUT_FILENO;
}

int tui_out_write(const char *buf, size_t n)
{
	int fd = tui_out_fd();

	while (n > 0) {
		ssize_t k = write(fd, buf, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		buf += k;
		n -= (size_t)k;
	}
	return 0;
}

void tui_out_capture(void)
{
	int p[2], tty;

	if (tui_out_pipe >= 0 || pipe2(p, O_CLOEXEC))
		return;
	if (fcntl(p[1], F_SETPIPE_SZ, TUI_OUT_PIPE) < TUI_OUT_PIPE ||
	    (tty = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3)) < 0) {
		close(p[0]);
		close(p[1]);
		return;
	}
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	fcntl(p[1], F_SETFL, O_NONBLOCK);
	if (dup2(p[1], STDOUT_FILENO) < 0) {
		close(p[0]);
		close(p[1]);
		close(tty);
		return;
	}
	close(p[1]);
	tui_out_pipe = p[0];
	tui_out_tty = tty;
	tui_out_err_capture();
}

void tui_out_flush(void)
{
	static char *buf;
	static size_t cap;
	size_t n = 0;

	if (tui_out_pipe < 0)
		return;
	for (;;) {
		if (cap - n < 65536) {
			char *p = realloc(buf, cap + 262144);

			if (p == NULL)
				break;
			buf = p;
			cap += 262144;
		}
		ssize_t k = read(tui_out_pipe, buf + n, cap - n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		n += (size_t)k;
	}
	if (n)
		tui_out_write(buf, n);
}

void tui_out_release(void)
{
	if (tui_out_pipe < 0)
		return;
	tui_out_flush();
	dup2(tui_out_tty, STDOUT_FILENO);
	close(tui_out_tty);
	close(tui_out_pipe);
	tui_out_tty = tui_out_pipe = -1;
}

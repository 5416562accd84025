/*
 * tui_out.c - one write per frame. ncurses flushes its output after
 * every cursor movement, so a frame reaches the terminal in many
 * write()s, and a terminal may show it half drawn. Once curses mode is
 * set up (the terminal's modes are ncurses' business only then), file
 * descriptor 1 is pointed at a pipe: what ncurses writes for a frame
 * collects there, and tui_out_flush() sends it to the terminal (a
 * duplicate of the old descriptor 1) in a single write.
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

static int tui_out_tty = -1;  /* the terminal, while captured */
static int tui_out_pipe = -1; /* read end of the pipe fd 1 points at */

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

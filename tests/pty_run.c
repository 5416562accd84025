/*
 * pty_run.c - run a program on a pseudo-terminal and drive it with a
 * script, like a person at the keyboard; print everything it showed.
 *
 *   pty_run [-t SECONDS] SCRIPT -- PROGRAM [ARGS...]
 *
 * SCRIPT lines (a '#' line is a comment):
 *   expect TEXT    wait until the output since the last match holds TEXT
 *   send TEXT      type TEXT and Enter
 *   type TEXT      type TEXT without Enter
 *   ctrl X         type Ctrl-X (ctrl C, ctrl D)
 *   wait           wait for the program to exit (its status is ours)
 * Keys (send, type, ctrl other than C) are typed only once the program is
 * in its line editor's read, which is observed, not waited for: libedit
 * puts the terminal in non-canonical mode for el_gets and back to
 * canonical mode after it, and the pty's master reads the terminal's
 * mode (tcgetattr). Keys typed earlier would be echoed by the terminal
 * itself, out of order. Ctrl-C needs no wait: the terminal turns it into
 * SIGINT in either mode.
 * The transcript (carriage returns removed) goes to stdout; errors and a
 * hang guard (default 120 s per expect/wait) to stderr with status 3.
 */
#include <errno.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

static int master = -1;
static pid_t child;
static char *seen;    /* output since the last match (malloc'd) */
static size_t n_seen; /* bytes in seen */
static int timeout_s = 120;

/* Monotonic seconds. */
static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Read what is available within MS milliseconds; -1 at end of output. */
static int pump(int ms)
{
	struct pollfd p = {master, POLLIN, 0};
	char buf[4096];
	ssize_t r;

	if (poll(&p, 1, ms) <= 0)
		return 0;
	r = read(master, buf, sizeof(buf));
	if (r <= 0)
		return -1;
	for (ssize_t i = 0; i < r; i++) {
		if (buf[i] == '\r')
			continue;
		fputc(buf[i], stdout);
		char *s = realloc(seen, n_seen + 2);

		if (s == NULL)
			exit(3);
		seen = s;
		seen[n_seen++] = buf[i];
		seen[n_seen] = '\0';
	}
	fflush(stdout);
	return 1;
}

/* Wait until the program reads in its line editor: the terminal is in
   non-canonical mode (see the top). Reads on meanwhile. */
static void editor_read(void)
{
	double end = now_s() + timeout_s;
	struct termios t;

	for (;;) {
		if (tcgetattr(master, &t) != 0) {
			perror("pty_run: tcgetattr");
			kill(child, SIGKILL);
			exit(3);
		}
		if (!(t.c_lflag & ICANON))
			return;
		if (now_s() > end || pump(10) < 0) {
			fprintf(stderr,
			        "pty_run: %s waiting for the program "
			        "to read a line\n",
			        now_s() > end ? "timeout" : "end of output");
			kill(child, SIGKILL);
			exit(3);
		}
	}
}

/* Wait until the output since the last match contains TEXT. */
static void expect(const char *text)
{
	double end = now_s() + timeout_s;

	for (;;) {
		char *at = seen ? strstr(seen, text) : NULL;

		if (at) {
			size_t keep =
			    n_seen - (size_t)(at - seen) - strlen(text);

			memmove(seen, at + strlen(text), keep + 1);
			n_seen = keep;
			return;
		}
		if (now_s() > end || pump(100) < 0) {
			fprintf(stderr, "pty_run: %s waiting for \"%s\"\n",
			        now_s() > end ? "timeout" : "end of output",
			        text);
			kill(child, SIGKILL);
			exit(3);
		}
	}
}

static void type(const char *s, size_t n)
{
	while (n > 0) {
		ssize_t w = write(master, s, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			exit(3);
		s += w;
		n -= (size_t)w;
	}
}

int main(int argc, char **argv)
{
	struct winsize ws = {40, 100, 0, 0};
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	FILE *script;
	int i = 1, status = 0;

	if (argc > 2 && strcmp(argv[1], "-t") == 0) {
		timeout_s = atoi(argv[2]);
		i = 3;
	}
	if (argc - i < 3 || strcmp(argv[i + 1], "--") != 0) {
		fputs("usage: pty_run [-t SECONDS] SCRIPT -- PROGRAM [ARGS]\n",
		      stderr);
		return 2;
	}
	script = fopen(argv[i], "r");
	if (script == NULL) {
		perror(argv[i]);
		return 2;
	}
	child = forkpty(&master, NULL, NULL, &ws);
	if (child < 0) {
		perror("forkpty");
		return 3;
	}
	if (child == 0) {
		execvp(argv[i + 2], argv + i + 2);
		perror(argv[i + 2]);
		_exit(127);
	}
	while ((len = getline(&line, &cap, script)) >= 0) {
		if (len && line[len - 1] == '\n')
			line[--len] = '\0';
		if (line[0] == '#' || line[0] == '\0')
			continue;
		if (strncmp(line, "expect ", 7) == 0) {
			expect(line + 7);
		} else if (strncmp(line, "send ", 5) == 0) {
			editor_read();
			type(line + 5, strlen(line + 5));
			type("\r", 1);
		} else if (strncmp(line, "type ", 5) == 0) {
			editor_read();
			type(line + 5, strlen(line + 5));
		} else if (strncmp(line, "ctrl ", 5) == 0) {
			char c = (char)(line[5] & 0x1f);

			if (c != 0x03)
				editor_read();
			type(&c, 1);
		} else if (strcmp(line, "wait") == 0) {
			double end = now_s() + timeout_s;

			while (pump(100) >= 0 && now_s() < end)
				;
			if (now_s() >= end) {
				fputs("pty_run: timeout waiting for exit\n",
				      stderr);
				kill(child, SIGKILL);
				return 3;
			}
			break;
		} else {
			fprintf(stderr, "pty_run: bad script line: %s\n", line);
			kill(child, SIGKILL);
			return 2;
		}
	}
	free(line);
	fclose(script);
	if (waitpid(child, &status, 0) < 0)
		return 3;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/*
 * kill_at.c - run a program and kill -9 it at a point of its progress,
 * never at a moment of the clock (for the kill tests).
 *
 *   kill_at [-b BYTES | -u W] [-i MS] [-t SECONDS] OUT -- PROGRAM [ARGS...]
 *
 * PROGRAM's stdout goes into a pipe that kill_at reads and copies to the
 * file OUT (stdin and stderr are inherited). Then:
 *   -b BYTES  SIGKILL as soon as BYTES bytes have been read (0: at once,
 *             before the program had a chance to write anything);
 *   -u W      SIGKILL as soon as writes_after (below) reaches W;
 *   neither   let it run to its end.
 * What was already in the pipe at the kill is read too: OUT holds all
 * that the program wrote. One line then goes to stdout:
 *   killed=0|1 status=S bytes=N writes_after=W
 * S is the exit status (128 + signal when killed by one).
 *
 * -i MS: writes_after counts the write()s of the program that
 * provably happened later than MS milliseconds after its first output
 * (the clock is CLOCK_MONOTONIC, the clock parley's session uses). Every
 * read starts with the pipe's whole content (the buffer is larger than a
 * pipe), so the data of a read came from writes made after the previous
 * read began; a read that began at a time T >= first + MS is the fence,
 * and each read after it with data stands for at least one write after
 * T. A small write (under PIPE_BUF) is never split between two reads, so
 * writes_after never counts more writes than there were. Only the order of
 * events on one clock is used, not a speed: a slow machine gives a smaller
 * count.
 *
 * -t SECONDS (default 300) is a hang guard: past it the program is killed
 * and kill_at fails with status 3. Exit status 0 otherwise, 2 on a usage
 * error.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Monotonic milliseconds. */
static double kill_at_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void kill_at_write(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			perror("kill_at: write");
			exit(3);
		}
		p += w;
		n -= (size_t)w;
	}
}

int main(int argc, char **argv)
{
	static char buf[1 << 17]; /* larger than a pipe's capacity */
	long long at_bytes = -1, total = 0;
	double interval = -1, first = -1, limit_s = 300, end;
	int fenced = 0, killed = 0, status = 0, opt;
	long on_update = 0; /* -u W: kill when writes_after >= W */
	long writes_after = 0;
	int p[2], out;
	pid_t pid;

	while ((opt = getopt(argc, argv, "+b:u:i:t:")) != -1) {
		switch (opt) {
		case 'b':
			at_bytes = atoll(optarg);
			break;
		case 'u':
			on_update = atol(optarg);
			break;
		case 'i':
			interval = atof(optarg);
			break;
		case 't':
			limit_s = atof(optarg);
			break;
		default:
			goto usage;
		}
	}
	if (argc - optind < 3 || strcmp(argv[optind + 1], "--") != 0 ||
	    on_update < 0 || (on_update && (interval < 0 || at_bytes >= 0)))
		goto usage;
	out = open(argv[optind], O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (out < 0 || pipe(p) != 0) {
		perror("kill_at");
		return 3;
	}
	pid = fork();
	if (pid < 0) {
		perror("kill_at: fork");
		return 3;
	}
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		close(out);
		execvp(argv[optind + 2], argv + optind + 2);
		perror(argv[optind + 2]);
		_exit(127);
	}
	close(p[1]);
	if (at_bytes == 0) {
		kill(pid, SIGKILL);
		killed = 1;
	}
	end = kill_at_ms() + limit_s * 1e3;
	for (;;) {
		struct pollfd pf = {p[0], POLLIN, 0};
		double t, left = end - kill_at_ms();
		ssize_t r;

		if (left <= 0) {
			fprintf(stderr,
			        "kill_at: hang guard: no end after "
			        "%.0f s, killed\n",
			        limit_s);
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			return 3;
		}
		if (poll(&pf, 1, left > 1000 ? 1000 : (int)left + 1) <= 0)
			continue;
		t = kill_at_ms();
		r = read(p[0], buf, sizeof(buf));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (first < 0)
			first = kill_at_ms();
		else if (fenced)
			writes_after++;
		if (interval >= 0 && !fenced && first >= 0 &&
		    t >= first + interval)
			fenced = 1; /* this read began after the mark */
		kill_at_write(out, buf, (size_t)r);
		total += r;
		if (!killed && ((at_bytes > 0 && total >= at_bytes) ||
		                (on_update && writes_after >= on_update))) {
			kill(pid, SIGKILL);
			killed = 1;
		}
	}
	close(p[0]);
	close(out);
	if (waitpid(pid, &status, 0) < 0) {
		perror("kill_at: waitpid");
		return 3;
	}
	printf("killed=%d status=%d bytes=%lld writes_after=%ld\n", killed,
	       WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
	       total, writes_after);
	return 0;
usage:
	fputs("usage: kill_at [-b BYTES | -u W] [-i MS] [-t SECONDS] OUT -- "
	      "PROGRAM [ARGS...]\n",
	      stderr);
	return 2;
}

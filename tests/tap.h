/*
 * tap.h - a minimal Test Anything Protocol emitter for parley's C tests.
 *
 * Each test program prints "1..N" at the end (plan last, allowed by TAP),
 * one "ok"/"not ok" line per check, and diagnostics as "# ..." lines.
 * automake's tap-driver.sh reads the output; exit status is 0 unless a
 * check failed, so a program is also meaningful run by hand.
 */
#ifndef PARLEY_TAP_H
#define PARLEY_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int tap_n;      /* checks run so far */
static int tap_failed; /* checks that failed */

/* Record one check: COND true passes. Returns COND. */
static inline int tap_ok(int cond, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline int tap_ok(int cond, const char *fmt, ...)
{
	va_list ap;

	tap_n++;
	if (!cond)
		tap_failed++;
	printf("%sok %d - ", cond ? "" : "not ", tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	return cond;
}

/* Print a diagnostic line. */
static inline void tap_diag(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static inline void tap_diag(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

/* Skip the whole program (e.g. a model file is not available). */
static inline int tap_skip_all(const char *why)
{
	printf("1..0 # SKIP %s\n", why);
	return 0;
}

/* Print the plan and return the exit status for main(). */
static inline int tap_done(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}

#endif /* PARLEY_TAP_H */

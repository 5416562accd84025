/*
 * t_threadpool.c - the fork-join pool: every thread runs every job exactly
 * once, threadpool_run returns only after all have finished (also when the
 * workers or the caller went to sleep first), and the split functions cover
 * the items exactly. Run it under ThreadSanitizer too (a race in the
 * hand-over is the classic bug of a spinning pool).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tap.h"
#include "threadpool.h"

#define MAX_T 4

/* State the jobs write: one slot per thread, each on its own line. */
struct tp_test {
	struct {
		long last;  /* job number this thread last ran */
		long count; /* jobs it ran */
		char pad[64 - 2 * sizeof(long)];
	} slot[MAX_T];
	long job;          /* number of the current job (set by the caller) */
	int slow_ith;      /* thread that naps in this job, or -1 */
	atomic_long total; /* runs of all threads */
	int bad_nth;       /* an nth that differed from the pool's size */
	int nth;           /* the pool's size */
};

/* Sleep about US microseconds (only to push the other side to sleep; the
 * checks decide on what the jobs wrote, not on time). */
static void nap_us(long us)
{
	struct timespec ts = {0, us * 1000};

	nanosleep(&ts, NULL);
}

static void tp_job(void *arg, int ith, int nth)
{
	struct tp_test *t = arg;

	if (nth != t->nth)
		t->bad_nth = nth;
	if (ith == t->slow_ith)
		nap_us(1000);
	t->slot[ith].last = t->job;
	t->slot[ith].count++;
	atomic_fetch_add(&t->total, 1);
}

/* N_JOBS jobs on a pool of NTH; NAP_EVERY > 0: every so many jobs the
 * caller naps (workers fall asleep) or one thread naps in the job (the
 * caller falls asleep waiting). */
static void run_jobs(int nth, long n_jobs, long nap_every)
{
	char err[128] = "";
	struct threadpool *tp = threadpool_new(nth, err, sizeof(err));
	struct tp_test *t = calloc(1, sizeof(*t));
	long stale = 0;

	if (!tap_ok(tp != NULL && t != NULL && threadpool_size(tp) == nth,
	            "pool of %d starts %s", nth, err))
		return;
	t->nth = nth;
	atomic_init(&t->total, 0);
	for (long j = 1; j <= n_jobs; j++) {
		t->job = j;
		t->slow_ith = -1;
		if (nap_every > 0 && j % nap_every == 0) {
			if ((j / nap_every) % 2)
				nap_us(1000);
			else
				t->slow_ith = (int)(j / nap_every / 2) % nth;
		}
		threadpool_run(tp, tp_job, t);
		/* every thread has finished job j when run returns */
		for (int i = 0; i < nth; i++)
			stale += t->slot[i].last != j;
	}
	threadpool_free(tp);
	long lo = n_jobs, hi = 0;
	for (int i = 0; i < nth; i++) {
		lo = t->slot[i].count < lo ? t->slot[i].count : lo;
		hi = t->slot[i].count > hi ? t->slot[i].count : hi;
	}
	tap_ok(stale == 0 && lo == n_jobs && hi == n_jobs &&
	           atomic_load(&t->total) == (long)nth * n_jobs &&
	           t->bad_nth == 0,
	       "%d threads, %ld jobs%s: each thread ran each once, run "
	       "returned after all (%ld stale, runs per thread %ld..%ld)",
	       nth, n_jobs, nap_every ? " with sleeps on both sides" : "",
	       stale, lo, hi);
	free(t);
}

/* Shares of threadpool_split_aligned: disjoint, in order, covering [0, n),
 * inner boundaries multiples of ALIGN. */
static int split_ok(long n, long align, int nth)
{
	long prev = 0;

	for (int i = 0; i < nth; i++) {
		long lo, hi;

		threadpool_split_aligned(n, align, i, nth, &lo, &hi);
		if (lo != prev || hi < lo || (hi != n && hi % align != 0))
			return 0;
		prev = hi;
	}
	return prev == n;
}

int main(void)
{
	int bad = 0;

	for (int nth = 1; nth <= MAX_T; nth++)
		run_jobs(nth, 20000, 0);
	run_jobs(2, 400, 10);
	run_jobs(3, 400, 7);
	for (long n = 0; n < 200; n++)
		for (long align = 1; align <= 32; align *= 2)
			for (int nth = 1; nth <= 5; nth++)
				bad += !split_ok(n, align, nth);
	tap_ok(bad == 0,
	       "threadpool_split_aligned covers [0, n) in aligned "
	       "shares (%d bad cases)",
	       bad);
	return tap_done();
}

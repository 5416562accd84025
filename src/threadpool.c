/*
 * threadpool.c - persistent fork-join pthread pool (see threadpool.h).
 *
 * NOTES ON THE DESIGN
 *
 * A decode step of a small model is a few hundred jobs of some tens of
 * microseconds each, so the hand-over must cost well under a microsecond
 * while both sides are awake: the fast path is atomics only, no mutex, no
 * system call. Each side spins (with the CPU's pause hint) for a bounded
 * time, then blocks on a condition variable; the other side takes the
 * mutex only when it sees a sleeper, so a job never pays for a wake-up
 * nobody needs.
 *
 * No lost wake-up (the Dekker pattern, all four accesses seq_cst):
 *   worker:  n_sleeping++  then  read generation  (then wait on cv_job)
 *   caller:  generation++  then  read n_sleeping  (broadcast if > 0)
 * In the single order of seq_cst operations one of the two reads comes
 * after the other side's write: either the worker sees the new generation
 * and does not wait, or the caller sees the sleeper and broadcasts; the
 * broadcast takes the mutex, which the worker holds from its check until
 * pthread_cond_wait releases it, so it cannot fall between the two. The
 * same pattern, with caller_sleeping and n_pending, covers the caller
 * waiting for the last worker.
 *
 * Hot fields sit on cache lines of their own: the generation (written by
 * the caller, polled by the workers) and the pending count (written by the
 * workers, polled by the caller) would otherwise bounce one line between
 * the cores on every poll.
 */
#define _POSIX_C_SOURCE 200809L
#include "threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define threadpool_relax() _mm_pause()
#elif defined(__aarch64__)
#define threadpool_relax() __asm__ __volatile__("yield")
#else
#define threadpool_relax() ((void)0)
#endif

/*
 * How long a waiting side spins before it sleeps: longer than the gap
 * between two jobs of a decode step (norms, RoPE), so a busy engine does
 * not sleep inside a step, short enough that an idle one stops burning a
 * core at once. After THREADPOOL_YIELD_NS of it the spinner yields the
 * core at each clock check: on a machine with more runnable threads than
 * cores, the thread it waits for may be the one that needs the core.
 */
#define THREADPOOL_SPIN_NS  100000L
#define THREADPOOL_YIELD_NS 10000L

/* Polls between two reads of the clock while spinning. */
#define THREADPOOL_SPIN_CHECK 64

#define THREADPOOL_LINE 64 /* bytes of a cache line */

struct threadpool_worker {
	struct threadpool *tp; /* owning pool */
	int ith;               /* index 1..n_threads-1 */
	pthread_t thread;      /* the worker */
};

struct threadpool {
	/* configuration (fixed after threadpool_new) */
	int n_threads; /* threads per job, caller included */
	struct threadpool_worker *workers; /* n_threads - 1 entries (owned) */
	int n_started;                     /* workers actually started */

	/* the current job (written by the caller before bumping generation) */
	threadpool_fn fn; /* job function */
	void *arg;        /* its argument */

	/* synchronisation, hot fields one per cache line (see the notes) */
	alignas(THREADPOOL_LINE) atomic_uint generation; /* +1 per job */
	alignas(THREADPOOL_LINE) atomic_int n_pending;   /* workers not done */
	alignas(THREADPOOL_LINE) atomic_int n_sleeping;  /* on cv_job */
	atomic_bool caller_sleeping;                     /* on cv_done */
	atomic_bool stop;       /* set by threadpool_free */
	pthread_mutex_t mu;     /* guards the sleeps below */
	pthread_cond_t cv_job;  /* workers sleep here waiting for a job */
	pthread_cond_t cv_done; /* the caller sleeps here waiting for workers */
};

/* Number of online CPUs (at least 1). */
int threadpool_cpu_count(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (n < 1)
		return 1;
	if (n > 256)
		return 256;
	return (int)n;
}

/* The share [*lo, *hi) of N items that thread ITH of NTH takes. */
void threadpool_split(long n, int ith, int nth, long *lo, long *hi)
{
	long per = n / nth, rem = n % nth;

	*lo = ith * per + (ith < rem ? ith : rem);
	*hi = *lo + per + (ith < rem ? 1 : 0);
}

/* The share of N items in whole units of ALIGN items (the last unit may be
 * short): thread boundaries fall on multiples of ALIGN. */
void threadpool_split_aligned(long n, long align, int ith, int nth, long *lo,
                              long *hi)
{
	long units = (n + align - 1) / align;

	threadpool_split(units, ith, nth, lo, hi);
	*lo = *lo * align < n ? *lo * align : n;
	*hi = *hi * align < n ? *hi * align : n;
}

/* Monotonic nanoseconds (for the spin budget only). */
static long long threadpool_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/*
 * One step of a bounded spin, called with the poll count I (from 1) and
 * *START (0 before the first call): pause, and every THREADPOOL_SPIN_CHECK
 * polls look at the clock, yield past THREADPOOL_YIELD_NS. False once
 * THREADPOOL_SPIN_NS have passed: time to sleep.
 */
static bool threadpool_spin_step(unsigned i, long long *start)
{
	long long now;

	threadpool_relax();
	if (i % THREADPOOL_SPIN_CHECK != 0)
		return true;
	now = threadpool_now_ns();
	if (*start == 0)
		*start = now;
	if (now - *start > THREADPOOL_SPIN_NS)
		return false;
	if (now - *start > THREADPOOL_YIELD_NS)
		sched_yield();
	return true;
}

/* Spin until the generation differs from SEEN or stop is set; false when
 * the spin budget ran out first. */
static bool threadpool_spin_job(struct threadpool *tp, unsigned seen)
{
	long long start = 0;

	for (unsigned i = 1;; i++) {
		if (atomic_load_explicit(&tp->generation,
		                         memory_order_acquire) != seen ||
		    atomic_load_explicit(&tp->stop, memory_order_relaxed))
			return true;
		if (!threadpool_spin_step(i, &start))
			return false;
	}
}

/* Wait until the generation differs from SEEN or stop is set. */
static unsigned threadpool_wait_job(struct threadpool *tp, unsigned seen)
{
	unsigned g;

	if (threadpool_spin_job(tp, seen))
		return atomic_load_explicit(&tp->generation,
		                            memory_order_acquire);
	pthread_mutex_lock(&tp->mu);
	atomic_fetch_add(&tp->n_sleeping, 1); /* seq_cst: see the notes */
	while ((g = atomic_load(&tp->generation)) == seen &&
	       !atomic_load(&tp->stop))
		pthread_cond_wait(&tp->cv_job, &tp->mu);
	atomic_fetch_sub(&tp->n_sleeping, 1);
	pthread_mutex_unlock(&tp->mu);
	return g;
}

/* Worker thread body: run each new job once, then report completion. */
static void *threadpool_main(void *p)
{
	struct threadpool_worker *w = p;
	struct threadpool *tp = w->tp;
	unsigned seen = 0;

	for (;;) {
		seen = threadpool_wait_job(tp, seen);
		if (atomic_load(&tp->stop))
			break;
		tp->fn(tp->arg, w->ith, tp->n_threads);
		/* seq_cst: pairs with the caller's caller_sleeping store */
		if (atomic_fetch_sub(&tp->n_pending, 1) == 1 &&
		    atomic_load(&tp->caller_sleeping)) {
			pthread_mutex_lock(&tp->mu);
			pthread_cond_signal(&tp->cv_done);
			pthread_mutex_unlock(&tp->mu);
		}
	}
	return NULL;
}

/* Start the pool; ownership of the result passes to the caller. */
struct threadpool *threadpool_new(int n_threads, char *err, size_t errlen)
{
	struct threadpool *tp;

	if (n_threads <= 0)
		n_threads = threadpool_cpu_count();
	if (n_threads > 256) {
		snprintf(err, errlen, "thread count %d exceeds 256", n_threads);
		return NULL;
	}
	tp = aligned_alloc(THREADPOOL_LINE,
	                   (sizeof(*tp) + THREADPOOL_LINE - 1) /
	                       THREADPOOL_LINE * THREADPOOL_LINE);
	if (tp == NULL) {
		snprintf(err, errlen, "out of memory for the thread pool");
		return NULL;
	}
	memset(tp, 0, sizeof(*tp));
	tp->n_threads = n_threads;
	atomic_init(&tp->generation, 0);
	atomic_init(&tp->n_pending, 0);
	atomic_init(&tp->n_sleeping, 0);
	atomic_init(&tp->caller_sleeping, false);
	atomic_init(&tp->stop, false);
	pthread_mutex_init(&tp->mu, NULL);
	pthread_cond_init(&tp->cv_job, NULL);
	pthread_cond_init(&tp->cv_done, NULL);
	if (n_threads > 1) {
		tp->workers =
		    calloc((size_t)n_threads - 1, sizeof(*tp->workers));
		if (tp->workers == NULL) {
			snprintf(err, errlen,
			         "out of memory for the thread pool");
			threadpool_free(tp);
			return NULL;
		}
	}
	for (int i = 0; i < n_threads - 1; i++) {
		struct threadpool_worker *w = &tp->workers[i];

		w->tp = tp;
		w->ith = i + 1;
		if (pthread_create(&w->thread, NULL, threadpool_main, w) != 0) {
			snprintf(err, errlen,
			         "cannot start worker thread %d of %d", i + 1,
			         n_threads - 1);
			threadpool_free(tp);
			return NULL;
		}
		tp->n_started++;
	}
	return tp;
}

/* Stop and join the workers, free the pool. */
void threadpool_free(struct threadpool *tp)
{
	if (tp == NULL)
		return;
	pthread_mutex_lock(&tp->mu);
	atomic_store(&tp->stop, true);
	pthread_cond_broadcast(&tp->cv_job);
	pthread_mutex_unlock(&tp->mu);
	for (int i = 0; i < tp->n_started; i++)
		pthread_join(tp->workers[i].thread, NULL);
	pthread_mutex_destroy(&tp->mu);
	pthread_cond_destroy(&tp->cv_job);
	pthread_cond_destroy(&tp->cv_done);
	free(tp->workers);
	free(tp);
}

/* Number of threads (including the caller) that run each job. */
int threadpool_size(const struct threadpool *tp)
{
	return tp->n_threads;
}

/* Spin until every worker has finished; false when the budget ran out. */
static bool threadpool_spin_done(struct threadpool *tp)
{
	long long start = 0;

	for (unsigned i = 1;; i++) {
		if (atomic_load_explicit(&tp->n_pending,
		                         memory_order_acquire) == 0)
			return true;
		if (!threadpool_spin_step(i, &start))
			return false;
	}
}

/* Run FN on every thread (the caller is thread 0); wait for all. */
void threadpool_run(struct threadpool *tp, threadpool_fn fn, void *arg)
{
	if (tp->n_threads == 1) {
		fn(arg, 0, 1);
		return;
	}
	tp->fn = fn;
	tp->arg = arg;
	atomic_store_explicit(&tp->n_pending, tp->n_threads - 1,
	                      memory_order_relaxed);
	atomic_fetch_add(&tp->generation, 1); /* seq_cst: see the notes */
	if (atomic_load(&tp->n_sleeping) > 0) {
		pthread_mutex_lock(&tp->mu);
		pthread_cond_broadcast(&tp->cv_job);
		pthread_mutex_unlock(&tp->mu);
	}

	fn(arg, 0, tp->n_threads);

	if (threadpool_spin_done(tp))
		return;
	pthread_mutex_lock(&tp->mu);
	atomic_store(&tp->caller_sleeping, true);
	while (atomic_load(&tp->n_pending) != 0)
		pthread_cond_wait(&tp->cv_done, &tp->mu);
	atomic_store(&tp->caller_sleeping, false);
	pthread_mutex_unlock(&tp->mu);
}

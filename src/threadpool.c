/*
 * threadpool.c - persistent fork-join pthread pool (see threadpool.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Spins on the generation counter before sleeping (about 50 µs). */
#define THREADPOOL_SPIN 20000

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

	/* synchronisation */
	atomic_uint generation; /* incremented once per job */
	atomic_int n_pending;   /* workers that have not finished the job */
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

/* Wait until the generation differs from SEEN or stop is set. */
static unsigned threadpool_wait_job(struct threadpool *tp, unsigned seen)
{
	unsigned g;

	for (int i = 0; i < THREADPOOL_SPIN; i++) {
		g = atomic_load_explicit(&tp->generation, memory_order_acquire);
		if (g != seen || atomic_load(&tp->stop))
			return g;
	}
	pthread_mutex_lock(&tp->mu);
	while ((g = atomic_load(&tp->generation)) == seen &&
	       !atomic_load(&tp->stop))
		pthread_cond_wait(&tp->cv_job, &tp->mu);
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
		if (atomic_fetch_sub_explicit(&tp->n_pending, 1,
		                              memory_order_acq_rel) == 1) {
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
	tp = calloc(1, sizeof(*tp));
	if (tp == NULL) {
		snprintf(err, errlen, "out of memory for the thread pool");
		return NULL;
	}
	tp->n_threads = n_threads;
	atomic_init(&tp->generation, 0);
	atomic_init(&tp->n_pending, 0);
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

/* Run FN on every thread (the caller is thread 0); wait for all. */
void threadpool_run(struct threadpool *tp, threadpool_fn fn, void *arg)
{
	if (tp->n_threads == 1) {
		fn(arg, 0, 1);
		return;
	}
	tp->fn = fn;
	tp->arg = arg;
	atomic_store(&tp->n_pending, tp->n_threads - 1);
	pthread_mutex_lock(&tp->mu);
	atomic_fetch_add_explicit(&tp->generation, 1, memory_order_release);
	pthread_cond_broadcast(&tp->cv_job);
	pthread_mutex_unlock(&tp->mu);

	fn(arg, 0, tp->n_threads);

	for (int i = 0; i < THREADPOOL_SPIN; i++)
		if (atomic_load_explicit(&tp->n_pending,
		                         memory_order_acquire) == 0)
			return;
	pthread_mutex_lock(&tp->mu);
	while (atomic_load(&tp->n_pending) != 0)
		pthread_cond_wait(&tp->cv_done, &tp->mu);
	pthread_mutex_unlock(&tp->mu);
}

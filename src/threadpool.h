/*
 * threadpool.h - a small persistent pthread pool for data-parallel loops.
 *
 * NOTES ON THE DESIGN
 *
 * The engine splits every matrix-vector product by rows: each of the N
 * threads takes a contiguous share of the rows. threadpool_run() hands one
 * function to all N threads at once (the calling thread is thread 0 and
 * works too) and returns when every thread has finished it, so a call is a
 * fork-join with an implicit barrier at the end.
 *
 * Invariants:
 *   1. Workers are created once by threadpool_new() and joined by
 *      threadpool_free(); no thread is created per call.
 *   2. At most one threadpool_run() is in flight per pool (the engine calls
 *      it from one thread); generation counts calls, so a worker never runs
 *      the same job twice nor misses one.
 *   3. Waiting sides spin briefly (cheap hand-over between the many small
 *      products of a decode step: atomics only, no lock, no system call)
 *      and then sleep on a condition variable, so an idle engine does not
 *      burn the CPU (threadpool.c explains why no wake-up is lost).
 */
#ifndef PARLEY_THREADPOOL_H
#define PARLEY_THREADPOOL_H

#include <stddef.h>

/* A job: called once per thread with its index ith in [0, nth). */
typedef void (*threadpool_fn)(void *arg, int ith, int nth);

struct threadpool;

/*
 * Start a pool of N_THREADS threads in all (N_THREADS - 1 workers plus the
 * caller); N_THREADS <= 0 means the number of online CPUs. Returns the new
 * pool (free with threadpool_free) or NULL with a message in err.
 */
struct threadpool *threadpool_new(int n_threads, char *err, size_t errlen);

/* Stop and join the workers, free the pool. NULL is allowed. */
void threadpool_free(struct threadpool *tp);

/* Number of threads (including the caller) that run each job. */
int threadpool_size(const struct threadpool *tp);

/* Run FN(ARG, ith, nth) on every thread; return when all have finished. */
void threadpool_run(struct threadpool *tp, threadpool_fn fn, void *arg);

/* The share [*lo, *hi) of N items that thread ITH of NTH takes. */
void threadpool_split(long n, int ith, int nth, long *lo, long *hi);

/* The same in whole units of ALIGN items (ALIGN >= 1): every boundary
 * between two threads' shares is a multiple of ALIGN, so outputs of 16
 * floats per unit never share a cache line between threads. */
void threadpool_split_aligned(long n, long align, int ith, int nth, long *lo,
                              long *hi);

/* Number of online CPUs (at least 1). */
int threadpool_cpu_count(void);

#endif /* PARLEY_THREADPOOL_H */

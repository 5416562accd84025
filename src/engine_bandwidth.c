/*
 * engine_bandwidth.c - the read bandwidth of host memory, measured: the
 * ceiling that `parley bench` divides the CPU backend's decode traffic by.
 *
 * NOTES ON THE DESIGN
 *
 * Decode reads every weight once per token, so the bound is how fast the
 * cores can stream memory they only read. The measurement does exactly
 * that: N threads sum disjoint slices of a buffer much larger than the last
 * level cache (256 MiB), with 4 independent accumulators so the adds do not
 * serialise; the best of 3 passes counts (the first also faults the pages
 * in, and a pass can lose the CPU to another process, never gain). The sums
 * are kept and compared so the compiler cannot drop the reads.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine_backend.h"

#define BW_BYTES  ((size_t)256 << 20) /* buffer: far beyond any LLC */
#define BW_PASSES 3

/* One thread's slice and result. */
struct bw_slice {
	const uint64_t *p; /* first word */
	size_t n;          /* words */
	uint64_t sum;      /* their sum (kept so the reads stay) */
};

/* Sum one slice with 4 independent chains. */
static void *bw_sum(void *arg)
{
	struct bw_slice *s = arg;
	uint64_t a = 0, b = 0, c = 0, d = 0;
	size_t i = 0;

	for (; i + 4 <= s->n; i += 4) {
		a += s->p[i];
		b += s->p[i + 1];
		c += s->p[i + 2];
		d += s->p[i + 3];
	}
	for (; i < s->n; i++)
		a += s->p[i];
	s->sum = a + b + c + d;
	return NULL;
}

static double bw_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Measure; see engine_backend.h. */
int engine_host_bandwidth(int n_threads, double *bytes_per_s, char *err,
                          size_t errlen)
{
	size_t words = BW_BYTES / sizeof(uint64_t);
	uint64_t *buf, want = 0;
	struct bw_slice *sl;
	pthread_t *th;
	double best = 0.0;
	int rc = 0;

	if (n_threads < 1)
		n_threads = 1;
	if (n_threads > 256)
		n_threads = 256;
	buf = malloc(BW_BYTES);
	sl = calloc((size_t)n_threads, sizeof(*sl));
	th = calloc((size_t)n_threads, sizeof(*th));
	if (buf == NULL || sl == NULL || th == NULL) {
		snprintf(err, errlen,
		         "out of memory for the bandwidth buffer (%zu MiB)",
		         BW_BYTES >> 20);
		rc = -1;
		goto out;
	}
	for (size_t i = 0; i < words; i++) {
		buf[i] = i * 0x9e3779b97f4a7c15ull;
		want += buf[i];
	}
	for (int pass = 0; pass < BW_PASSES && rc == 0; pass++) {
		uint64_t got = 0;
		double t0 = bw_now(), dt;
		int started = 0;

		for (int t = 0; t < n_threads; t++) {
			size_t a = words * (size_t)t / (size_t)n_threads;
			size_t b = words * (size_t)(t + 1) / (size_t)n_threads;

			sl[t].p = buf + a;
			sl[t].n = b - a;
			/* thread 0's slice runs on this thread */
			if (t > 0 &&
			    pthread_create(&th[t], NULL, bw_sum, &sl[t]) != 0)
				break;
			started = t + 1;
		}
		if (started > 0)
			bw_sum(&sl[0]);
		for (int t = 1; t < started; t++)
			pthread_join(th[t], NULL);
		dt = bw_now() - t0;
		for (int t = 0; t < started; t++)
			got += sl[t].sum;
		if (started != n_threads || got != want) {
			snprintf(err, errlen, "bandwidth pass %d: %s", pass,
			         started != n_threads ? "cannot start threads"
			                              : "sums differ");
			rc = -1;
		} else if (dt > 0 && (double)BW_BYTES / dt > best) {
			best = (double)BW_BYTES / dt;
		}
	}
	*bytes_per_s = best;
out:
	free(buf);
	free(sl);
	free(th);
	return rc;
}

/* The host memory a new allocation can take without swapping: Linux's
 * MemAvailable (/proc/meminfo). 0 with *BYTES, or -1 where unknown. */
int engine_host_mem_available(uint64_t *bytes)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	unsigned long long kb;
	int rc = -1;

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
			*bytes = (uint64_t)kb * 1024;
			rc = 0;
			break;
		}
	fclose(f);
	return rc;
}

/*
 * cuda_select.h - the engine's select step (engine.h) on the device: the
 * penalised top-k, the raw top-n, the log-sum-exp and entropy of a logits
 * row that stays in device memory. Only the few numbers come back.
 *
 * The answer is the reference's (engine_select_row, src/engine_select.c)
 * exactly: the same ids in the same order with the same penalised logits
 * (the penalty is computed with the same rounding, no contraction), and
 * the sums to double rounding. tests/t_cuda_select.c checks it.
 */
#ifndef PARLEY_CUDA_SELECT_H
#define PARLEY_CUDA_SELECT_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda_devices.h" /* cuda_read_bandwidth, for the callers that
                             include this header alone (backend_cuda.cu,
                             tests/t_cuda_select.c) */
#include "engine_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Device and pinned host buffers of the select step, for one vocabulary
   size (allocated once, at open). */
struct cuda_select {
	int32_t n_vocab; /* row length */
	float *d_pen;    /* [n_vocab] the penalised row */
	int32_t n_tiles; /* pass-1 tiles of a row (cuda_select.cu) */
	void *d_part;    /* [n_tiles] pass 1's per-tile sums, bad ids */
	void *d_cand;    /* [5][n_tiles * tile] pass 1's candidates */
	int32_t *d_win;  /* [win_cap * 2] distinct window ids, then counts */
	size_t win_cap;  /* entries of d_win / h_win */
	void *h_out;     /* the result block (see cuda_select.cu), in
	                    pinned host memory mapped for the device */
	void *d_out;     /* its device address: the final pass writes it */
	int32_t *h_win;  /* [win_cap * 2] pinned staging of the window */
	int32_t *h_cnt;  /* [win_cap] host scratch: the window's counts */
};

/* Allocate for rows of N_VOCAB. Returns 0, or -1 with a message. */
int cuda_select_init(struct cuda_select *cs, int32_t n_vocab, char *err,
                     size_t errlen);

/* Free everything (NULL pointers allowed; CS is zeroed). */
void cuda_select_free(struct cuda_select *cs);

/*
 * Select Q from the row D_ROW (n_vocab floats in device memory) into B,
 * on STREAM, and wait for it; PDL: the passes are launched with
 * programmatic dependent launch (a GPU of compute capability 9.0 or
 * later, cuda_launch.cuh). Returns 0, or -1 with a message (the
 * reference's messages for NaN, +inf and an all -inf row; a CUDA error).
 */
int cuda_select_run(struct cuda_select *cs, cudaStream_t stream, int pdl,
                    const float *d_row, const struct engine_select_req *q,
                    struct engine_select_buf *b, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* PARLEY_CUDA_SELECT_H */

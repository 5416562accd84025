/*
 * engine.h - the engine interface: a model's forward pass over a KV cache,
 * behind a small vtable so the backend ("cpu", later "cuda") is chosen at
 * run time.
 *
 * NOTES ON THE DESIGN
 *
 * The engine knows nothing of chats, templates or text: it maps token ids
 * at positions to logits and keeps the keys and values of the tokens it
 * has seen. Its one piece of state visible to callers is n_past.
 *
 * Invariants (asserted in debug builds by engine.c around every call):
 *   1. The KV cache holds exactly the positions 0..n_past-1, and they are
 *      the keys/values of the tokens the caller evaluated there.
 *   2. engine_eval(tokens[0..n)) evaluates them at positions
 *      n_past..n_past+n-1 and then n_past += n; n >= 1 and
 *      n_past + n <= n_ctx, else it fails and changes nothing.
 *   3. engine_truncate(n_keep) with n_keep <= n_past sets n_past = n_keep;
 *      entries at positions >= n_keep are dead (overwritten later).
 *   4. A failed eval leaves n_past as it was (the cache contents beyond
 *      n_past may have been written: they are dead by invariant 1).
 *   5. engine_state_save() writes n_past and the K/V of 0..n_past-1;
 *      engine_state_load() accepts only bytes saved for the same model
 *      shape and n_ctx-compatible size, and then restores invariant 1.
 *
 * State machine of one engine:
 *
 *      engine_open ──> READY(n_past = 0) ──eval(n)──> READY(n_past += n)
 *                        ▲    │  ▲                        │
 *                        │    │  └───── truncate(k) ──────┘
 *                        │    └── state_load ──> READY(n_past = saved)
 *      engine_close <────┘
 *
 * Logits: after an eval, engine_logits() points to n_vocab floats (the
 * last token), or n * n_vocab when the eval asked for ENGINE_EVAL_ALL
 * (token i's logits at i * n_vocab; for tests and perplexity). The buffer
 * belongs to the engine and is valid until the next eval or close.
 *
 * Positions, RoPE and the causal mask: token i of a batch sits at position
 * p = n_past + i, is rotated by p, and attends to cache positions 0..p
 * (its own included), whether it came in a batch of many or alone.
 */
#ifndef PARLEY_ENGINE_H
#define PARLEY_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct model;
struct trace;
struct engine;

/* engine_eval flags */
#define ENGINE_EVAL_ALL 1u /* keep the logits of every token of the batch */

/* Options for engine_open. Zero means "the default" for every field. */
struct engine_params {
	const char *backend; /* "cpu" (default) or "cuda" */
	int32_t n_ctx;       /* KV capacity in tokens; 0 = model's n_ctx_train,
	                        capped at ENGINE_DEFAULT_MAX_CTX */
	int32_t n_threads;   /* CPU threads; 0 = number of online CPUs */
	int32_t n_batch;     /* tokens per forward chunk in prefill; 0 = 64 */
	bool exact_dots;     /* CPU: dot dequantized weight rows with the fp32
	                        activations, no int8 rounding of activations
	                        (slow; the reference mode that compares with a
	                        float forward pass, see backend_cpu.c) */
};

#define ENGINE_DEFAULT_MAX_CTX 8192

/* What a backend implements. Every function gets the engine it serves. */
struct engine_ops {
	const char *name; /* "cpu", "cuda" */
	/* allocate run state and KV cache for e->model, e->n_ctx */
	int (*open)(struct engine *e, const struct engine_params *p, char *err,
	            size_t errlen);
	/* tokens at positions e->n_past.. ; fill e->logits (see flags) */
	int (*eval)(struct engine *e, const int32_t *tokens, int32_t n,
	            unsigned flags, char *err, size_t errlen);
	/* copy K/V of positions [0, n) of every layer to/from BUF */
	size_t (*kv_bytes)(const struct engine *e, int32_t n);
	int (*kv_save)(struct engine *e, int32_t n, void *buf);
	int (*kv_load)(struct engine *e, int32_t n, const void *buf);
	/* free everything open allocated */
	void (*close)(struct engine *e);
};

/* An open engine. Fields are read-only for callers. */
struct engine {
	const struct engine_ops *ops; /* the backend */
	const struct model *model;    /* borrowed: outlives the engine */
	int32_t n_ctx;                /* KV capacity in tokens */
	int32_t n_past;               /* positions held in the KV cache */
	int32_t n_threads;            /* threads the backend uses */
	struct trace *trace;          /* attached trace or NULL (borrowed) */
	float *logits;    /* [n_logits * n_vocab] (owned by backend) */
	int32_t n_logits; /* rows of logits valid after the last eval */
	void *impl;       /* backend state */
};

/*
 * Open an engine on model M (borrowed: must outlive the engine) with
 * options P (NULL = defaults). On success stores it in *OUT (close with
 * engine_close) and returns 0; on failure returns -1 with a message (an
 * unknown backend gets the list of the available ones).
 */
int engine_open(const struct model *m, const struct engine_params *p,
                struct engine **out, char *err, size_t errlen);

/* Free the engine (not the model, not the trace). NULL allowed. */
void engine_close(struct engine *e);

/*
 * Evaluate TOKENS[0..n) at positions n_past..n_past+n-1 (see the
 * invariants). Returns 0, or -1 with a message (token id out of range,
 * context full, out of memory). FLAGS: 0 or ENGINE_EVAL_ALL.
 */
int engine_eval(struct engine *e, const int32_t *tokens, int32_t n,
                unsigned flags, char *err, size_t errlen);

/* The logits of the last eval: n_vocab floats per kept token. */
const float *engine_logits(const struct engine *e);

/* Number of vocabulary entries (length of one logits row). */
int32_t engine_n_vocab(const struct engine *e);

/* Tokens held in the KV cache. */
int32_t engine_n_past(const struct engine *e);

/* KV capacity in tokens. */
int32_t engine_n_ctx(const struct engine *e);

/* Forget positions >= N_KEEP. Returns 0, or -1 if n_keep > n_past. */
int engine_truncate(struct engine *e, int32_t n_keep);

/* Bytes engine_state_save needs for the current n_past. */
size_t engine_state_size(const struct engine *e);

/*
 * Write the state (a header naming the model shape, n_past, then the K/V
 * of positions 0..n_past-1) into BUF of LEN bytes. Returns the bytes
 * written, or 0 with a message if LEN is too small.
 */
size_t engine_state_save(struct engine *e, void *buf, size_t len, char *err,
                         size_t errlen);

/*
 * Restore a state written by engine_state_save for a model of the same
 * shape. Returns 0, or -1 with a message (wrong magic, other shape, more
 * positions than n_ctx, truncated buffer); on failure n_past is 0.
 */
int engine_state_load(struct engine *e, const void *buf, size_t len, char *err,
                      size_t errlen);

/* Attach (or with NULL detach) a trace; borrowed, must outlive its use. */
void engine_set_trace(struct engine *e, struct trace *t);

/* Comma-separated names of the backends compiled in (static). */
const char *engine_backends(void);

/* The CPU backend's operations (backend_cpu.c). */
extern const struct engine_ops backend_cpu_ops;

#ifdef PARLEY_HAVE_CUDA
/* The CUDA backend's operations (cuda/backend_cuda.cu). */
extern const struct engine_ops backend_cuda_ops;
#endif

#ifdef __cplusplus
}
#endif

#endif /* PARLEY_ENGINE_H */

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
 *      entries at positions >= n_keep are dead (overwritten later). What
 *      that needs depends on each layer's cache (model_layer_cache):
 *        full       K and V of every position: nothing to do;
 *        window W   a layer attending to the last W positions must still
 *                   hold the W - 1 before n_keep after a truncate. A
 *                   backend with window_ring keeps only the positions
 *                   [win_lo, n_past) of such layers (win_lo moves up as
 *                   its eval drops what no later token reads, keeping
 *                   window_slack positions before the window), so a
 *                   truncation to 0 < n_keep < win_lo + W - 1 needs a
 *                   window snapshot at n_keep (engine_snapshot: copies
 *                   of the W - 1 positions before it), else it fails
 *                   and changes nothing: the caller truncates to
 *                   engine_rewind_point(n) (a snapshot's position, or
 *                   0) and re-evaluates from there;
 *                   a shift (invariant 6) must leave them the window of
 *                   the moved positions: win_lo >= p0 + d (else it is
 *                   refused), and win_lo moves down by d with them.
 *                   Other backends, and window_full, keep every
 *                   position (win_lo stays 0);
 *        recurrent  one state, not per position: it is restored
 *                   from the snapshot taken at n_keep (engine_snapshot:
 *                   the session takes them at the prompt's end and the
 *                   end of each turn), zeros at 0; a truncation to where
 *                   no snapshot is fails and changes nothing, so the
 *                   caller truncates to engine_rewind_point(n) and
 *                   re-evaluates from there. Snapshots past n_keep are
 *                   dropped.
 *   4. A failed eval leaves n_past as it was (the cache contents beyond
 *      n_past may have been written: they are dead by invariant 1).
 *   5. engine_state_save() writes n_past and the K/V of 0..n_past-1;
 *      engine_state_load() accepts only bytes saved for the same model
 *      shape and n_ctx-compatible size, and then restores invariant 1.
 *   6. engine_kv_shift(p0, d) with 0 <= p0, d >= 1, p0 + d <= n_past
 *      forgets positions p0..p0+d-1 and moves p0+d..n_past-1 down by d:
 *      each moved key re-rotated by -d with its layer's RoPE (cos and
 *      sin without YaRN's magnitude, which the cached key carries
 *      already), values moved as they are; n_past -= d. A key that
 *      depends only on its token and position (the first layer's) then
 *      equals the key computed at the new position, up to rounding;
 *      deeper layers' K/V of the moved tokens were computed attending
 *      to the forgotten ones and keep that (an approximation, as
 *      llama.cpp's context shift). Refused, nothing changed, where the
 *      model cannot shift (model_kv_shiftable: recurrent layers) or the
 *      backend cannot (no op, a cache type it does not rotate); a
 *      backend failure once it started leaves n_past = p0.
 *
 * State machine of one engine:
 *
 *      engine_open ──> READY(n_past = 0) ──eval(n)──> READY(n_past += n)
 *                        ▲    │  ▲                        │
 *                        │    │  └── truncate(k), kv_shift ┘
 *                        │    └── state_load ──> READY(n_past = saved)
 *      engine_close <────┘
 *
 * Logits stay where the backend computed them (a GPU keeps them on the
 * device). After an eval the caller asks for what it needs of the last
 * row with engine_select(): penalties over the recent ids applied, the
 * top-k ids with their logits, the argmax, the log-sum-exp and entropy of
 * the whole row - a few kilobytes instead of the vocabulary. A full read,
 * engine_logits(), stays available on request (tests, perplexity, sampling
 * with top-k disabled): n_vocab floats of the last token, or n * n_vocab
 * when the eval asked for ENGINE_EVAL_ALL (token i's row at i * n_vocab).
 * An eval with ENGINE_EVAL_NO_LOGITS (a prefill chunk followed by more
 * tokens) computes no logits at all: no final norm, no LM head.
 *
 * Saved state (engine_state_save) has one layout whatever the backend, so
 * a state saved by one backend restores on another. Version 2: a header
 * (magic "PRKV", version, n_layer, n_vocab, n_past, the bytes that
 * follow), then one record per layer describing its cache (kind, window,
 * K and V floats per position, the first position held and its bytes),
 * then each layer's data in turn: for a full layer the keys of positions
 * 0..n_past-1 as float32 [n_past][k_dim] (after RoPE), then the values as
 * float32 [n_past][v_dim], little-endian. A backend that keeps its cache
 * in fp16 widens on save (exact) and rounds to nearest on load; a q8_0
 * cache (engine_params.kv_type) dequantizes on save (exact: an fp16
 * scale times an int8 fits a float) and quantizes on load, which gives
 * back the same blocks, so such a cache saved and loaded again is the
 * same bytes. The floats are the exchange format: a state loads into a
 * cache of any type, converted (the session refuses a state saved with
 * another kv type, as it refuses another backend's: session_load.c). Version 1
 * (one header with n_head_kv and head dims, then the same data) still
 * loads into a model whose layers are all full and of that shape.
 * Version 3 (a model with recurrent layers): version 2 whose recurrent
 * layers' records (kind RECURRENT, no K/V) have no data there; after the
 * layers' data, the live recurrent state (engine_rs_bytes: each recurrent
 * layer's conv then state floats, model.h), then a count of snapshots
 * and each one's position (int32, then 4 zero bytes) and state.
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
extern "C" { /* included by the CUDA backend */
#endif

struct model;
struct trace;
struct engine;

/* engine_eval flags */
#define ENGINE_EVAL_ALL       1u /* keep the logits of every token */
#define ENGINE_EVAL_NO_LOGITS 2u /* compute no logits (more tokens follow) */

/* The element type of the KV cache (engine_params.kv_type). */
enum engine_kv_type {
	ENGINE_KV_DEFAULT = 0, /* the backend's: f32 on the CPU, f16 on a GPU */
	ENGINE_KV_F32,         /* float32 (the CPU's default) */
	ENGINE_KV_F16,         /* IEEE half (the GPU's default) */
	ENGINE_KV_Q8_0,        /* GGUF's Q8_0 blocks along each head: 32
	                          values, an fp16 scale d = amax / 127, int8
	                          q = round(x / d): 34 bytes (quant_q8_0_row) */
};

/* Options for engine_open. Zero means "the default" for every field. */
struct engine_params {
	const char *backend; /* "cpu" (default), "cuda", or "auto": the
	                        first backend that opens, GPU first (see
	                        engine_notice) */
	int32_t n_ctx;       /* KV capacity in tokens; 0 = model's n_ctx_train,
	                        capped at ENGINE_DEFAULT_MAX_CTX */
	int32_t n_threads;   /* CPU threads; 0 = number of online CPUs */
	int32_t n_batch;     /* tokens per forward chunk in prefill; 0: the
	                        backend's (CPU 64, GPU 512) */
	bool exact_dots;     /* CPU: dot dequantized weight rows with the fp32
	                        activations, no int8 rounding of activations
	                        (slow; the reference mode that compares with a
	                        float forward pass, see backend_cpu.c) */
	uint64_t exact_dot_types;    /* CPU, without exact_dots: the weight
	                           types (bit 1 << type id) whose rows are still
	                           dotted exactly, the others through int8
	                           activations: the arithmetic of a GPU mat-vec
	                           that quantizes activations for some types
	                           only (cuda_op_matvec_x8), for the parity
	                           tests */
	enum engine_kv_type kv_type; /* the cache's element type (--kv-type);
	                        a type the backend does not store, or q8_0
	                        with a head size not a multiple of 32, is
	                        refused at open */
	bool window_full;     /* keep every position of the sliding-window
	                         layers (invariant 3) rather than the window,
	                         a chunk and window_slack (the tests' reference) */
	int32_t window_slack; /* positions those keep before their window
	                         (ENGINE_WINDOW_SLACK's); 0 = that */
};

/* Positions a sliding-window layer keeps before its window (a backend
 * with window_ring; its rows hold the window, a chunk and twice this): a
 * truncation up to this many positions back (a regenerate, a branch
 * inside a recent reply) always finds the window it needs, one further
 * back may not, and re-evaluates (engine_rewind_point) */
#define ENGINE_WINDOW_SLACK 2048

#define ENGINE_DEFAULT_MAX_CTX 8192

/*
 * Open an engine on model M (borrowed: must outlive the engine) with
 * options P (NULL = defaults). On success stores it in *OUT (close with
 * engine_close) and returns 0; on failure returns -1 with a message (an
 * unknown backend gets the list of the available ones).
 */
int engine_open(const struct model *m, const struct engine_params *p,
                struct engine **out, char *err, size_t errlen);

/* The name of kv type T ("f32", "f16", "q8_0"; "default"), static. */
const char *engine_kv_type_name(enum engine_kv_type t);

/* Parse NAME ("f32", "f16", "q8_0") into *T: 0, or -1 for another. */
int engine_kv_type_parse(const char *name, enum engine_kv_type *t);

/* Bytes of N cached elements of type T (N a multiple of 32 for q8_0). */
size_t engine_kv_type_bytes(enum engine_kv_type t, size_t n);

/* The element type E's KV cache holds (never ENGINE_KV_DEFAULT). */
enum engine_kv_type engine_kv_type(const struct engine *e);

/* Free the engine (not the model, not the trace). NULL allowed. */
void engine_close(struct engine *e);

/*
 * Evaluate TOKENS[0..n) at positions n_past..n_past+n-1 (see the
 * invariants). Returns 0, or -1 with a message (token id out of range,
 * context full, out of memory). FLAGS: 0, ENGINE_EVAL_ALL or
 * ENGINE_EVAL_NO_LOGITS.
 */
int engine_eval(struct engine *e, const int32_t *tokens, int32_t n,
                unsigned flags, char *err, size_t errlen);

/*
 * The full logits of the last eval, read on request: n_vocab floats per
 * kept token (a device backend copies them to the host here). The buffer
 * belongs to the engine and is valid until the next eval or close.
 * Returns NULL when the last eval kept none (ENGINE_EVAL_NO_LOGITS, or no
 * eval yet) or the copy failed.
 */
const float *engine_logits(struct engine *e);

/* Rows engine_logits returns for the last eval: 1, n with
   ENGINE_EVAL_ALL, 0 with ENGINE_EVAL_NO_LOGITS or before any eval. */
int32_t engine_n_logits(const struct engine *e);

/* ------------------------------------------------------------ select */

/* Largest k and n_raw an engine_select request may ask for. */
#define ENGINE_SELECT_MAX 4096

/* What the caller needs of the last logits row (engine_select). */
struct engine_select_req {
	int32_t k;     /* penalised top entries wanted, 1..ENGINE_SELECT_MAX
	                  (fewer are returned when n_vocab is smaller) */
	int32_t n_raw; /* raw top entries wanted, 0..ENGINE_SELECT_MAX */
	const int32_t *recent;   /* the penalty window: ids, any order,
	                            repeats counted; out-of-vocab ids ignored */
	int32_t n_recent;        /* entries in recent (0: no penalties) */
	float repeat_penalty;    /* 1 = off; logit <= 0 ? *p : /p (> 0) */
	float frequency_penalty; /* 0 = off; minus count * f */
	float presence_penalty;  /* 0 = off; minus p once if count > 0 */
};

/*
 * The answer of engine_select. "raw" is the row as the model computed it;
 * "penalised" the row after the request's penalties (llama.cpp's formula,
 * see sampler.h stage 1). Orders are by logit descending, ties by lower
 * id. Arrays belong to the engine, valid until the next eval, select or
 * close.
 */
struct engine_selection {
	int32_t k;              /* entries in id, logit, raw_logit */
	const int32_t *id;      /* [k] the k greatest penalised logits */
	const float *logit;     /* [k] their penalised logits */
	const float *raw_logit; /* [k] the same ids' raw logits */
	int32_t n_raw;          /* entries in raw_id, raw_top */
	const int32_t *raw_id;  /* [n_raw] the n_raw greatest raw logits */
	const float *raw_top;   /* [n_raw] their raw logits */
	double raw_lse;         /* ln sum exp over the whole raw row */
	double raw_entropy;     /* nats, softmax of the whole raw row */
	double lse;             /* ln sum exp over the whole penalised row */
};

/*
 * Select from the last row of the last eval's logits, where they are (see
 * the design notes). Returns the selection (engine-owned), or NULL with a
 * message: no logits kept, a bad request, a NaN or +inf logit (named by
 * its id: the engine produced garbage), every logit -inf.
 */
const struct engine_selection *engine_select(struct engine *e,
                                             const struct engine_select_req *q,
                                             char *err, size_t errlen);

/*
 * After an "auto" open that fell back (a GPU backend compiled in could not
 * open: no device, too little memory), one line saying why and what was
 * used instead, for the front end to show; NULL otherwise. Owned by E.
 */
const char *engine_notice(const struct engine *e);

/* Name of E's backend ("cpu", "cuda"); static. */
const char *engine_backend_name(const struct engine *e);

/* The device E runs on, as its driver names it ("NVIDIA H100 80GB
   HBM3"), or NULL for the host CPU. Owned by E. */
const char *engine_device_name(const struct engine *e);

/* Threads E's backend uses on the host. */
int32_t engine_n_threads(const struct engine *e);

/* Bytes of memory E's backend holds (device memory for a GPU backend;
   the CPU backend's weights stay in the file mapping and are not
   counted). */
size_t engine_mem_bytes(const struct engine *e);

/* Bytes one decode step reads from the KV cache at N_PAST positions (and
 * reads and writes of a recurrent state). */
size_t engine_kv_read_bytes(const struct engine *e, int32_t n_past);

/*
 * Measure the read bandwidth of the memory E's weights live in (device
 * memory for a GPU backend, host memory for the CPU), bytes/s. Takes a
 * fraction of a second. Returns 0, or -1 with a message.
 */
int engine_measure_bandwidth(struct engine *e, double *bytes_per_s, char *err,
                             size_t errlen);

/* Number of vocabulary entries (length of one logits row). */
int32_t engine_n_vocab(const struct engine *e);

/* Tokens held in the KV cache. */
int32_t engine_n_past(const struct engine *e);

/* KV capacity in tokens. */
int32_t engine_n_ctx(const struct engine *e);

/* Whether a one-token engine_eval returns once its work is queued on a
   device (the CUDA backend), so that what the caller does before its
   next engine_select runs beside the step; false: eval computes before
   it returns (the CPU). */
bool engine_eval_queues(const struct engine *e);

/* Whether some of E's products round the activations to int8 blocks
   (the CPU's default dots; the GPU's mat-vec of quantized weights), so
   that its results differ from exact dots by that rounding: the
   verifier's tolerances (verify.h). */
bool engine_int8_activations(const struct engine *e);

/* Forget positions >= N_KEEP. Returns 0, or -1 if n_keep > n_past or a
 * recurrent state cannot be restored there (invariant 3; nothing
 * changed). */
int engine_truncate(struct engine *e, int32_t n_keep);

/*
 * Shift the cache (invariant 6): forget positions [P0, P0 + D), move
 * [P0 + D, n_past) to [P0, n_past - D) with the keys re-rotated, n_past
 * -= D. Returns 0, or -1 with a message: arguments out of range, a model
 * or backend that cannot shift (nothing changed), or a backend failure
 * (then n_past = P0).
 */
int engine_kv_shift(struct engine *e, int32_t p0, int32_t d, char *err,
                    size_t errlen);

/* Positions a sliding-window layer of E keeps (invariant 3: its window
 * and window_slack before it, a chunk, the slack again), or 0 where it
 * keeps every position. */
int32_t engine_window_rows(const struct engine *e);

/* Whether engine_kv_shift can work on E (the model and the backend
 * allow it); false: the caller evaluates again instead. */
bool engine_can_shift(const struct engine *e);

/* The largest position <= N (and <= n_past) that engine_truncate
 * accepts: N itself for a model without recurrent layers whose window
 * layers still hold what N needs, else n_past, a snapshot's position or
 * 0 (invariant 3). */
int32_t engine_rewind_point(const struct engine *e, int32_t n);

/* Snapshots of the recurrent state an engine keeps (engine_snapshot):
 * a chat returns to the end of its last few turns. */
#define ENGINE_RS_SNAPSHOTS 8

/* A model with recurrent layers: keep a snapshot of the recurrent state
 * at n_past (the lowest-positioned one goes when ENGINE_RS_SNAPSHOTS are
 * kept), so that engine_truncate can return there; sliding-window layers
 * that keep only their window: a copy of the window before n_past
 * (engine_window.c), likewise. Nothing for other models, or when n_past
 * is 0 or already a snapshot's. 0, or -1 with a message. */
int engine_snapshot(struct engine *e, char *err, size_t errlen);

/* Whether engine_snapshot keeps anything for E (recurrent layers, or
 * window layers keeping their window only): a caller that may return to
 * a place takes one there. */
bool engine_snapshots(const struct engine *e);

/* Whether the model has recurrent layers (a truncation needs a
 * snapshot). */
bool engine_recurrent(const struct engine *e);

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

/* Name of the I-th backend compiled in (static), or NULL when I is past
   the last: the table engine_open chooses from. */
const char *engine_backend_at(size_t i);

/* The names of the backends compiled in, joined with ", ", written into
   BUF of LEN bytes (NUL-terminated, truncated to fit); returns BUF. */
const char *engine_backends(char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* PARLEY_ENGINE_H */

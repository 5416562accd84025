/*
 * engine_backend.h - what a backend of the engine implements, and the
 * engine's state as backends see it. Callers of the engine include
 * engine.h only: for them struct engine is opaque.
 *
 * NOTES ON THE DESIGN
 *
 * engine.c checks every argument and keeps the invariants of engine.h
 * (n_past, the state header); a backend only computes. A backend keeps its
 * logits where it computed them; engine.c asks for them through ops.logits
 * (a full read) or ops.select (the few numbers the sampler needs), so a
 * device backend never copies the vocabulary unless asked. A backend
 * without a select of its own gets engine_select_row() over the host row
 * that ops.logits returns: the reference definition.
 */
#ifndef PARLEY_ENGINE_BACKEND_H
#define PARLEY_ENGINE_BACKEND_H

#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ENGINE_RS_ZERO (-1) /* rs_copy's SRC for "all zeros" */

/* What a backend implements. Every function gets the engine it serves. */
struct engine_ops {
	const char *name; /* "cpu", "cuda" */
	/* the model features (MODEL_FEAT_*) its forward recipe runs;
	   engine_open refuses a model that uses another, by name */
	uint32_t features;
	/* the KV element types it stores (bits 1 << enum engine_kv_type)
	   and the one ENGINE_KV_DEFAULT means; engine_open refuses another
	   and resolves the default into e->kv_type before ops.open */
	uint32_t kv_types;
	enum engine_kv_type kv_default;
	/* allocate run state and KV cache for e->model, e->n_ctx */
	int (*open)(struct engine *e, const struct engine_params *p, char *err,
	            size_t errlen);
	/* tokens at positions e->n_past.. ; logits of the last token, of
	   every token (ENGINE_EVAL_ALL) or none (ENGINE_EVAL_NO_LOGITS);
	   sets e->n_logits to the rows kept */
	int (*eval)(struct engine *e, const int32_t *tokens, int32_t n,
	            unsigned flags, char *err, size_t errlen);
	/* the e->n_logits rows of the last eval in host memory (e->logits
	   or a buffer of the backend), or NULL with a message */
	const float *(*logits)(struct engine *e, char *err, size_t errlen);
	/* optional (NULL: engine_select_row over ops.logits' last row):
	   select from the last row where it lives, into e->sel */
	int (*select)(struct engine *e, const struct engine_select_req *q,
	              char *err, size_t errlen);
	/* copy K/V of positions [0, n) of every layer to/from BUF, in the
	   state layout of engine.h (float32, layer by layer, K then V:
	   engine_kv_layer_bytes each); 0, or -1 with a message */
	int (*kv_save)(struct engine *e, int32_t n, void *buf, char *err,
	               size_t errlen);
	int (*kv_load)(struct engine *e, int32_t n, const void *buf, char *err,
	               size_t errlen);
	/* optional (NULL: engine_host_bandwidth): read bandwidth of the
	   memory the weights live in, bytes/s, measured now */
	int (*bandwidth)(struct engine *e, double *bytes_per_s, char *err,
	                 size_t errlen);
	/* free everything open allocated */
	void (*close)(struct engine *e);
	/* models with recurrent layers (model_layer_cache RECURRENT; NULL
	   in a backend that lists no MODEL_FEAT_RECURRENT): every such
	   layer's state in slots, 0 the live one that eval reads and
	   writes, 1..ENGINE_RS_SNAPSHOTS snapshots. rs_copy: slot DST =
	   slot SRC (ENGINE_RS_ZERO: zeros). rs_io: slot SLOT to host BUF
	   (LOAD false) or from it, engine_rs_bytes of them: each recurrent
	   layer in order, its conv floats then its state floats (model.h's
	   layout), float32. 0, or -1 with a message */
	int (*rs_copy)(struct engine *e, int dst, int src, char *err,
	               size_t errlen);
	int (*rs_io)(struct engine *e, int slot, void *buf, bool load,
	             char *err, size_t errlen);
	/* optional (NULL: the backend cannot shift): engine_kv_shift's
	   work on every layer with a cache of its own, arguments checked
	   by engine.c (0 <= p0, 1 <= d, p0 + d <= e->n_past, the model
	   model_kv_shiftable); e->n_past is still the old one. 0; -1
	   with a message, nothing changed (a cache element type it does
	   not rotate); -2 with a message when it failed after it began
	   (positions >= p0 are then lost) */
	int (*kv_shift)(struct engine *e, int32_t p0, int32_t d, char *err,
	                size_t errlen);
	/* the KV element types kv_shift rotates (bits 1 << enum
	   engine_kv_type); engine_can_shift is false for the others */
	uint32_t kv_shift_types;
	/* optional: fill e->trace's layers of the last eval, which left
	   them on their way (e->trace_deferred), waiting for them */
	int (*trace_settle)(struct engine *e, char *err, size_t errlen);
	/* 1: it may keep only the last positions of sliding-window layers
	   (engine.h invariant 3): open sets e->win_cap, eval moves
	   e->win_lo up, kv_save and kv_load move the window layers'
	   positions [e->win_lo, n) (kv_load may raise e->win_lo where they
	   do not fit); 0: it keeps every position and e->win_lo stays 0 */
	int window_ring;
	/* with window_ring: window snapshots (engine_window.c), slots
	   1..ENGINE_RS_SNAPSHOTS: LOAD false copies the window layers'
	   positions [POS - win_need, POS) (from 0) into slot SLOT, LOAD true
	   copies them back to their rows' start (engine.c then sets win_lo
	   to their first). 0, or -1 with a message */
	int (*ws_io)(struct engine *e, int slot, int32_t pos, bool load,
	             char *err, size_t errlen);
	/* 1: an eval of one token returns once its work is queued on a
	   device, so the host's work until the next select overlaps it
	   (engine_eval_queues); 0: eval computes before it returns */
	int eval_queues;
};

/* Buffers behind a struct engine_selection (engine.c owns them). */
struct engine_select_buf {
	struct engine_selection out; /* what engine_select returns */
	int32_t *id;                 /* [ENGINE_SELECT_MAX] */
	float *logit;                /* [ENGINE_SELECT_MAX] */
	float *raw_logit;            /* [ENGINE_SELECT_MAX] */
	int32_t *raw_id;             /* [ENGINE_SELECT_MAX] */
	float *raw_top;              /* [ENGINE_SELECT_MAX] */
	/* scratch of the host path (engine_select_row), grown on demand */
	int32_t *win;     /* [win_cap] the window's distinct ids, sorted */
	int32_t *win_cnt; /* [win_cap] how often each occurs */
	float *pen_logit; /* [win_cap] penalised logit of win[i]'s id */
	size_t win_cap;   /* entries allocated in win and pen_logit */
};

/* An open engine. */
struct engine {
	const struct engine_ops *ops; /* the backend */
	const struct model *model;    /* borrowed: outlives the engine */
	int32_t n_ctx;                /* KV capacity in tokens */
	int32_t n_past;               /* positions held in the KV cache */
	int32_t n_threads;            /* host threads the backend uses */
	struct trace *trace;          /* attached trace or NULL (borrowed) */
	/* 1: the last eval left its trace step open with the layers'
	   statistics still being copied back (a device backend's traced
	   decode step, so the host need not wait for it there: item 6's one
	   synchronisation a token); engine.c completes the step (the
	   backend's trace_settle, then trace_end_step) before the trace can
	   be read: in engine_select, or in whichever engine call comes
	   first. Set by ops.eval only when the trace wants neither the
	   logits nor to hold the step (the debug pane's) */
	int trace_deferred;
	float *logits;         /* [n_logits * n_vocab] host copy (owned by the
	                          backend; a device backend fills it in ops.logits) */
	int32_t n_logits;      /* rows of logits kept by the last eval */
	int32_t kv_elem_bytes; /* bytes of one cached K or V element (1
	                          for q8_0: its scales are kv_type's) */
	enum engine_kv_type kv_type; /* the cache's element type, resolved
	                          by engine_open before ops.open */
	size_t mem_bytes;            /* memory the backend holds (set by open):
	                                device memory for a GPU backend */
	bool int8_act; /* set by open: some products round the activations
	                  to int8 blocks (the CPU's default dots, the GPU's
	                  mat-vec of quantized weights), so results differ
	                  from exact dots by that rounding (verify.h) */
	struct engine_select_buf sel; /* engine_select's answer */
	/* recurrent layers: the position of snapshot slot i (rs_pos[i],
	   i >= 1), -1 when empty; rs_pos[0] unused */
	int32_t rs_pos[1 + ENGINE_RS_SNAPSHOTS];
	/* a failed eval may have left the live recurrent state half
	   updated: no eval until a truncate restores one (engine_rs.c) */
	bool rs_lost;
	/* sliding-window layers (engine.h invariant 3): they hold the
	   positions [win_lo, n_past), at most win_cap of them (n_ctx where
	   the backend keeps every position); win_need = the largest window
	   - 1: the positions before a token that it reads */
	int32_t win_lo, win_cap, win_need;
	/* the position of window snapshot slot i (ws_pos[i], i >= 1), -1
	   when empty (engine_window.c) */
	int32_t ws_pos[1 + ENGINE_RS_SNAPSHOTS];
	char notice[320]; /* why "auto" fell back, or "" */
	char device[256]; /* the device it runs on ("NVIDIA H100 80GB HBM3"),
	                    set by open; "" for the host CPU */
	void *impl;       /* backend state */
};

/*
 * The reference select: Q over ROW[0..n_vocab) (the raw logits, read
 * only) into B (whose five ENGINE_SELECT_MAX arrays must be allocated;
 * the window scratch grows here). Returns 0, or -1 with a message (NaN or
 * +inf logit named by id, every logit -inf, out of memory).
 */
int engine_select_row(const float *row, int32_t n_vocab,
                      const struct engine_select_req *q,
                      struct engine_select_buf *b, char *err, size_t errlen);

/*
 * Read bandwidth of host memory with N_THREADS threads: the best of a few
 * passes summing a buffer far larger than the caches. Returns 0 with
 * *BYTES_PER_S, or -1 with a message (out of memory).
 */
int engine_host_bandwidth(int n_threads, double *bytes_per_s, char *err,
                          size_t errlen);

/*
 * The penalty window of Q: its distinct in-vocabulary ids, ascending, into
 * IDS and how often each occurs into COUNTS (both with room for
 * q->n_recent entries). Returns the number of entries; 0 when every
 * penalty is off. The host and device select steps share it.
 */
size_t engine_select_window(const struct engine_select_req *q, int32_t n_vocab,
                            int32_t *ids, int32_t *counts);

/*
 * Finish B after a select that filled K penalised and N_RAW raw entries:
 * point b->out at them and derive the log-sum-exp and entropy from the
 * online sums (RAW_M, RAW_S, RAW_A: max, sum e^(l-m), sum e^(l-m)(l-m) of
 * the raw row; PEN_M, PEN_S of the penalised row). One definition for the
 * host and device select steps.
 */
void engine_select_publish(struct engine_select_buf *b, int32_t k,
                           int32_t n_raw, double raw_m, double raw_s,
                           double raw_a, double pen_m, double pen_s);

/* engine_bandwidth.c: the host memory a new allocation can take without
 * swapping (Linux's MemAvailable). 0 with *BYTES, or -1 where unknown. */
int engine_host_mem_available(uint64_t *bytes);

/* engine_rs.c: bytes of one slot of recurrent states (rs_io); 0 for a
 * model without recurrent layers. */
size_t engine_rs_bytes(const struct engine *e);

/* The state of an empty sequence (zeros, no snapshots): a state load's
 * start. */
void engine_rs_reset(struct engine *e);

/* The truncation of a model with recurrent layers (engine_truncate):
 * 0 with the live state at N_KEEP, or -1 and nothing changed. */
int engine_rs_truncate(struct engine *e, int32_t n_keep);

/* The recurrent part of a saved state (version 3): its bytes; writing
 * it at P; checking and loading it from P of LEN bytes (its n_past
 * N_PAST). 0, or -1 with a message. */
size_t engine_rs_state_bytes(const struct engine *e);
int engine_rs_state_save(struct engine *e, char *p, char *err, size_t errlen);
int engine_rs_state_load(struct engine *e, const char *p, size_t len,
                         int32_t n_past, char *err, size_t errlen);

/* Bytes of layer IL's K/V data in a saved state with N positions, and
 * of every layer's (the layout engine.h states; float32). */
size_t engine_kv_layer_bytes(const struct engine *e, int il, int32_t n);
size_t engine_kv_state_bytes(const struct engine *e, int32_t n);

/* Whether E's sliding-window layers still hold what a token at position
 * N reads (engine.h invariant 3): N is 0, or they hold [N - win_need, N).
 * Always for a backend that keeps every position. */
bool engine_window_holds(const struct engine *e, int32_t n);

/* engine_rs.c: the bookkeeping of a snapshot slot array POS (rs_pos,
 * ws_pos: positions of slots 1..ENGINE_RS_SNAPSHOTS, -1 when empty):
 * the slot holding position P (0: none); the slot a new snapshot takes
 * (a free one, else the lowest position's: a chat returns to its recent
 * turns more often than to its first); the largest position <= N held
 * (0: none); positions above ABOVE emptied (-1: all). */
int engine_snap_at(const int32_t *pos, int32_t p);
int engine_snap_victim(const int32_t *pos);
int32_t engine_snap_below(const int32_t *pos, int32_t n);
void engine_snap_drop(int32_t *pos, int32_t above);

/* engine_window.c: whether a truncation to N finds the window layers'
 * positions before it (held, or in a window snapshot at N); the
 * truncation's window part (N's snapshot copied back where the rows no
 * longer hold it, snapshots past N dropped; 0, or -1: not possible,
 * nothing changed); window snapshots above ABOVE dropped (-1: all); a
 * window snapshot at n_past (engine_snapshot's; 0, or -1 with a
 * message). */
bool engine_window_at(const struct engine *e, int32_t n);
int engine_ws_truncate(struct engine *e, int32_t n_keep);
void engine_ws_drop(struct engine *e, int32_t above);
int engine_ws_snapshot(struct engine *e, char *err, size_t errlen);

/* Whether a weight matrix of M (a layer's or the output) has a type in
 * TYPES (a mask of 1 << type). */
bool engine_model_uses_types(const struct model *m, uint64_t types);

/* The backends compiled in (backend_cpu.c, cuda/backend_cuda.cu). */
extern const struct engine_ops backend_cpu_ops;
#ifdef PARLEY_HAVE_CUDA
extern const struct engine_ops backend_cuda_ops;
#endif

#ifdef __cplusplus
}
#endif

#endif /* PARLEY_ENGINE_BACKEND_H */

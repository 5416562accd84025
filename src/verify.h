/*
 * verify.h - live verification: a CPU reference engine evaluates, beside
 * the engine that serves (the primary, usually the GPU), the same tokens
 * at the same positions, and every step is compared layer by layer.
 *
 * NOTES ON THE DESIGN
 *
 * The reference is backend "cpu" with engine_params.exact_dots: weight
 * rows dequantized and dotted with the fp32 activations, the continuous
 * reference (backend_cpu.c). The primary's trace captures the last
 * token's residual after each layer (trace_capture); so does the
 * reference's own trace. For each layer il the relative difference is
 *
 *     diff[il] = ||a - b|| / ||b||        (2-norms over n_embd)
 *
 * (a: primary, b: reference), and over the last logits row
 *
 *     nmse = sum (a - b)^2 / sum b^2.
 *
 * A layer is "over tolerance" when diff[il] > verify_tolerance(il); the
 * first such layer is named: a divergence propagates to every later
 * layer, so the first one is where to look. A non-finite value in either
 * vector counts as infinitely different.
 *
 * Why the 2-norm and not max|a - b| / max|b|: real models carry "massive
 * activations", a few residual elements hundreds of times the rest, and
 * the max-norm measures everything against them. On SmolLM2-135M a
 * layer reading the next layer's FFN down-projection moved the max-norm
 * difference of the following tokens by only 0.06..0.18, inside the
 * 0.12 that int8 rounding alone reaches; the 2-norm moved by 0.21..0.44
 * against at most 0.09 for int8 rounding.
 *
 * Tolerances: what a correct primary may differ by, one bound for every
 * layer, chosen by the primary's arithmetic (verify_tolerance):
 *   - int8 activations (engine_int8_activations): the CPU's default dots
 *     and the GPU's mat-vec of quantized weights, which quantizes its
 *     input exactly as the CPU does (cuda/cuda_vecdot8.cuh): activations
 *     rounded to int8 blocks, up to 1/254 of the block's largest element;
 *     discontinuous. Measured
 *     against exact dots on SmolLM2-135M Q4_1 over 2750 generated tokens
 *     (10 prompts, raw and chat): layer diff median about 0.005, rising
 *     from 0.02 at layer 0 to 0.11 at the last; single tokens up to 0.17
 *     at layers 2..7, where the model's massive activations form; logit
 *     NMSE up to 0.046. Bounds VERIFY_TOL_INT8_LAYER = 0.25 and
 *     VERIFY_TOL_INT8_LOGIT = 0.1.
 *   - any other primary (the CPU with exact dots; the GPU with weights
 *     its mat-vec dots with fp32 activations, e.g. F16: GEMM inputs
 *     rounded to fp16 in prefill, 2^-11 relative and continuous, fp16 KV
 *     cache, fp32 dots in decode). Measured on an H100 with SmolLM2-135M
 *     Q4_1 while the GPU's decode still took fp32 activations (parley
 *     generate and chat --verify, 5- and 59-token prompts, 64 steps
 *     each): layer diff at most 0.0011, logit NMSE at most 1.3e-5. (Since
 *     its mat-vec takes int8 activations, a quantized model on the GPU
 *     differs by int8 rounding and takes the bounds above: held to these,
 *     the chat's live verification of SmolLM2 on the GPU flagged correct
 *     steps.) Bounds VERIFY_TOL_LAYER
 *     = 0.01 (9 times that) and VERIFY_TOL_LOGIT = 5e-4 (the bound
 *     tests/t_cuda_engine.c holds whole models to); a wrong matrix moves
 *     its layer by 0.2 or more (below), 20 times the bound.
 *   - a primary whose KV cache is q8_0 (engine_params.kv_type; the
 *     reference keeps fp32): its keys and values rounded to int8 blocks,
 *     up to 1/254 of a block's largest, a deviation of its own added to
 *     the bound of the primary's arithmetic. Measured with the CPU as the
 *     primary, exact dots and a q8_0 cache (so nothing else differs), on
 *     SmolLM2-135M Q4_1 over 1,024 positions of text in chunks of 64 and
 *     32 greedy steps: layer diff up to 0.024 (layer 23, at position
 *     1049), logit NMSE up to 4.5e-4; 43 of 48 steps were over the fp32
 *     bounds. Added: VERIFY_TOL_Q8KV_LAYER = 0.075 (about 3 times);
 *     a wrong matrix (0.21 and more) stays above the sum. The logits
 *     vary more than that first measurement saw: teacher-forced over
 *     1,024 positions of README.md (tests/kvq_accuracy --exact, q8_0
 *     against f32), the worst position's NMSE was 0.0082; and where the
 *     primary also rounds its activations to int8, a small change of the
 *     cache can flip int8 roundings downstream: over 24 replies of 96
 *     tokens (12 questions, chat and raw; CPU, int8 dots against the
 *     exact reference) the worst step's NMSE was 0.0588 with an f32
 *     cache and 0.169 with q8_0 (one step; the next 0.037), over the
 *     0.1 + 1.5e-3 these bounds then gave. Added to the logit bound:
 *     VERIFY_TOL_Q8KV_LOGIT = 0.025 (3 times 0.0082) for exact
 *     arithmetic, VERIFY_TOL_INT8_Q8KV_LOGIT = 0.15 for int8 activations
 *     (0.25 in all, 1.5 times 0.169). (The logits are the blunter check:
 *     a wrong matrix late in the stack moves them by 0.016, and is the
 *     layer check's to catch.)
 * A wrong weight matrix moves its own layer by 0.21..0.9 per token on
 * SmolLM2 (a layer reading the next one's FFN down-projection) and the
 * following layers by about 2.7. The layer check is the sharper one: such
 * a layer late in the stack moved the logits by an NMSE of only 0.016.
 *
 * Keeping in step. The verifier keeps the ids of its reference cache.
 * verify_step gets the ids the primary's cache holds after its eval; the
 * reference is cut to the longest common prefix and evaluates what it
 * lacks before the step's own tokens. So a truncate or a state load of
 * the primary needs no call of its own: the next step catches up (the
 * prefix evaluated again on the CPU, slower, same result). A shift of the
 * primary's cache (engine_kv_shift) does need one, verify_shift: what a
 * shift keeps is not what an evaluation gives (engine.h invariant 6), so
 * the reference shifts alike.
 *
 * Invariants:
 *   1. engine_n_past(reference) == number of ids kept by the verifier.
 *   2. After verify_step returns 0, the reference holds exactly the ids
 *      passed, and the primary's trace step is ended (trace_end_step)
 *      with verify filled.
 *
 * Costs: the reference runs at CPU exact-dot speed for every token the
 * primary evaluates (slow: this is a debugging tool), and the primary's
 * trace reads the full logits row and each layer's residual.
 */
#ifndef PARLEY_VERIFY_H
#define PARLEY_VERIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct engine;
struct model;
struct trace;
struct verify;

/* Tolerances (see the notes): layers ||a-b|| / ||b||, logits NMSE. */
#define VERIFY_TOL_INT8_LAYER      0.25 /* primary "cpu": int8 activations */
#define VERIFY_TOL_INT8_LOGIT      0.1
#define VERIFY_TOL_LAYER           0.01 /* any other primary (GPU: fp16) */
#define VERIFY_TOL_LOGIT           5e-4
#define VERIFY_TOL_Q8KV_LAYER      0.075 /* added for a q8_0 KV cache */
#define VERIFY_TOL_Q8KV_LOGIT      0.025
#define VERIFY_TOL_INT8_Q8KV_LOGIT 0.15 /* the same, int8 activations */
/* A mixture's steps of up to this many tokens are pinned row by row
   (verify_step); a longer one, its last token only. */
#define VERIFY_PIN_ROWS 2048

/* The comparison of one step (one engine_eval of the primary). */
struct verify_report {
	int64_t step;         /* the primary trace's step number */
	int32_t pos;          /* position of the compared (last) token */
	int32_t n_tokens;     /* tokens of the eval */
	int32_t token;        /* the compared token's id */
	int32_t n_caught_up;  /* ids the reference evaluated first to catch
	                         up with the primary (truncate, state load) */
	int32_t worst_layer;  /* layer of the largest difference */
	float worst_diff;     /* that difference */
	int32_t first_bad;    /* first layer over its tolerance, or -1 */
	float first_bad_diff; /* its difference (0 when none) */
	double logit_nmse;    /* NaN: the eval kept no logits */
	bool logits_bad;      /* logit_nmse over logit_tol */
	double layer_tol;     /* the tolerances applied */
	double logit_tol;
	bool rows_pinned; /* a mixture: the reference took the primary's
	                     experts for every row of the step (else for
	                     its last token only) */
	float route_dev;  /* a mixture: the most the primary's choice of
	                     experts gave up for the reference's router
	                     (model_moe_pin: a softmax probability, or a
	                     logit with top-k-then-softmax gating); 0 when
	                     every choice was the reference's own, -1 for
	                     a model without mixture layers */
};

/* Steps summed up (a reply, a run): verify_summary_add. */
struct verify_summary {
	int32_t n_checked;   /* steps compared */
	int32_t n_bad;       /* of those, with a layer or the logits over */
	int32_t worst_layer; /* layer of the largest difference seen, -1 */
	float worst_diff;    /* that difference */
	int32_t worst_pos;   /* position of its token */
	double max_nmse;     /* largest logit NMSE seen, -1 when none */
	int32_t bad_pos;     /* position of the first bad step, or -1 */
	int32_t bad_layer;   /* its first layer over tolerance, -1: only
	                        the logits were */
	double layer_tol;    /* the tolerances of the last step added */
	double logit_tol;
	float max_route_dev; /* a mixture: the largest route_dev seen, -1
	                        when no step had one */
};

/*
 * Open a verifier for PRIMARY (borrowed, must outlive the verifier): a
 * CPU exact-dot engine on REF (borrowed; the primary's own model, or in
 * tests a changed copy) with the primary's n_ctx and N_THREADS threads
 * (0: all). TRACE is the trace the caller attached to the primary, or
 * NULL: the verifier then attaches one of its own. Either way the trace
 * is set to capture and hold (trace.h). Returns 0 with *OUT, or -1 with
 * a message (a model of another shape or vocabulary, out of memory).
 */
int verify_open(struct engine *primary, const struct model *ref,
                struct trace *trace, int32_t n_threads, struct verify **out,
                char *err, size_t errlen);

/*
 * Close V: the reference engine and its trace; the primary's trace is
 * detached and freed when the verifier made it, else released (no more
 * capture or hold). NULL allowed.
 */
void verify_close(struct verify *v);

/*
 * After the primary evaluated the last N_NEW of IDS[0..n_ids) (its cache
 * now holds exactly IDS): bring the reference to IDS, compare the step,
 * fill the primary trace's verify and end its step, and *R when R is not
 * NULL. Returns 0, or -1 with a message: the call does not match the
 * primary's last eval (nothing done), or the reference failed (the
 * primary's step is ended without a comparison; the next call starts
 * over from the common prefix). Every eval of the primary must be
 * followed by one verify_step: the trace's steps are ended here.
 */
int verify_step(struct verify *v, const int32_t *ids, int32_t n_ids,
                int32_t n_new, struct verify_report *r, char *err,
                size_t errlen);

/*
 * The primary's cache, holding IDS[0..n_ids), was shifted
 * (engine_kv_shift(P0, D)): the reference, brought to IDS first where it
 * lagged, shifts alike, so that the steps after it compare a shifted
 * cache with a shifted cache (a reference evaluated afresh would differ
 * from the primary by the shift's own approximation, engine.h). Returns
 * 0, or -1 with a message (the reference cannot shift or failed; the
 * caller turns verification off).
 */
int verify_shift(struct verify *v, const int32_t *ids, int32_t n_ids,
                 int32_t p0, int32_t d, char *err, size_t errlen);

/* The tolerance of layer IL (see the notes), and of the logits. */
double verify_tolerance(const struct verify *v, int il);
double verify_logit_tolerance(const struct verify *v);

/* The primary's trace (the verifier's or the caller's); borrowed. */
const struct trace *verify_trace(const struct verify *v);

/* Start a summary: nothing seen. */
void verify_summary_init(struct verify_summary *s);

/* Add step R to summary S. */
void verify_summary_add(struct verify_summary *s,
                        const struct verify_report *r);

/* Summary S as one line (no newline) into BUF of LEN bytes: steps,
   worst layer difference, largest logit NMSE, the first step and layer
   over tolerance or "all within tolerance". Returns BUF. */
const char *verify_summary_format(const struct verify_summary *s, char *buf,
                                  size_t len);

#endif /* PARLEY_VERIFY_H */

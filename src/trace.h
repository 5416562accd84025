/*
 * trace.h - opt-in observation of the forward pass.
 *
 * NOTES ON THE DESIGN
 *
 * A caller that wants to see inside the engine allocates a struct trace
 * with trace_new() and attaches it with engine_set_trace(). While none is
 * attached the engine computes nothing extra (one NULL test per layer).
 * When one is attached, every engine_eval() fills it for the LAST token of
 * the batch:
 *   - layers[il]: min / max / mean / rms of the fp32 residual stream after
 *     layer il (il = 0..n_layer-1), computed by the backend;
 *   - experts: in a mixture-of-experts layer, the experts the last token
 *     was routed to and their weights (largest first), recorded by the
 *     backend (trace_experts); n_experts[il] = 0 for a dense layer;
 *   - the top-k of the final logits with their softmax probabilities and
 *     the entropy of the whole distribution (computed by engine.c from the
 *     logits, so every backend reports them the same way).
 * If the trace has an output stream, engine_eval() then appends one JSON
 * line per step (trace_write_json). The debug pane reads the struct.
 *
 * Two opt-in extras serve live verification (verify.h), and cost nothing
 * unless asked for:
 *   - capture (trace_capture): the backend also copies the whole residual
 *     vector of the last token after each layer into resid (n_layer x
 *     n_embd floats; the CPU has it at hand, the GPU backend copies it
 *     to the host for the statistics anyway);
 *   - hold: engine_eval leaves the step open instead of ending it; the
 *     verifier compares, fills verify and ends the step itself
 *     (trace_end_step), so the step's JSON line carries the comparison.
 *
 * Life of one step:
 *
 *   engine_eval ──> layers/resid (backend) ──> top-k (engine.c)
 *      ──> [hold: verify_step fills verify] ──> trace_end_step
 *          (JSON line if out, verify.checked = 0, step++)
 *
 * With skip_logits and no hold (the debug pane's trace), a device
 * backend may leave a decode step's layers on their way to the host, so
 * that the host waits once a token, not twice: engine.c then ends the
 * step when engine_select returns (the select waited for the step
 * anyway), or at the engine's next call, whichever comes first. So the
 * layers are the step's once engine_select has returned.
 */
#ifndef PARLEY_TRACE_H
#define PARLEY_TRACE_H

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" { /* included by the CUDA backend */
#endif

/* Experts of one layer a trace keeps (model.h MODEL_MAX_EXPERTS_USED). */
#define TRACE_MAX_EXPERTS 64

/* Statistics of one vector. */
struct trace_stats {
	float min;  /* smallest element */
	float max;  /* largest element */
	float mean; /* arithmetic mean */
	float rms;  /* sqrt(mean of squares) */
};

/* The comparison of one step with a reference engine (verify.c). */
struct trace_verify {
	int checked;         /* 1 when this step was compared, else 0 */
	int32_t worst_layer; /* layer of the largest relative difference */
	float worst_diff;    /* that difference */
	int32_t first_bad;   /* first layer over its tolerance, or -1 */
	double logit_nmse;   /* NMSE of the logits row, NaN: none kept */
	int logits_bad;      /* 1 when logit_nmse is over its tolerance */
	float *diff;         /* [n_layer] relative difference per layer
	                        (allocated by trace_capture) */
};

struct trace {
	/* configuration (set by trace_new, trace_capture, the verifier) */
	int n_layer;     /* entries of layers */
	int top_k;       /* entries of top_id / top_logit / top_prob */
	FILE *out;       /* JSON lines sink, or NULL (borrowed) */
	int32_t n_embd;  /* entries of one captured vector; 0: no capture */
	int hold;        /* 1: the step is ended by trace_end_step's caller
	                    (a verifier), not by engine_eval */
	int skip_logits; /* 1: engine_eval leaves top_* and entropy cleared
	                    and never reads the logits row (a copy on a
	                    device backend): for a caller that has the
	                    sampler's report instead (the debug pane) */

	/* the last step */
	int64_t step;     /* engine_eval calls traced so far, from 0 */
	int32_t pos;      /* position of the last token of the step */
	int32_t n_tokens; /* tokens in the step's batch */
	int32_t token;    /* the last token of the batch */
	struct trace_stats *layers; /* [n_layer] residual after each layer */
	int pin_experts;    /* 1: a backend follows n_experts / expert_id (the
	                       last token's choice in each mixture layer, as
	                       trace_pin_experts copied them from another
	                       engine's trace) instead of its router, for the
	                       step's last token; expert_dev then says what
	                       that choice gave up (model_moe_pin) */
	float *expert_dev;  /* [n_layer] (pin_experts) */
	int32_t *n_experts; /* [n_layer] experts chosen (0: dense) */
	int32_t *expert_id; /* [n_layer][TRACE_MAX_EXPERTS] chosen, best
	                       first */
	float *expert_w;    /* [n_layer][TRACE_MAX_EXPERTS] their weights */
	/* every row's choice (trace_rows): row r of the step's batch (its
	   token at position pos - n_tokens + 1 + r), layer il: the ids at
	   row_expert_id[(r * n_layer + il) * TRACE_MAX_EXPERTS], as many as
	   the layer chooses; NULL (rows_cap 0): none kept */
	int32_t rows_cap; /* rows kept at most: a longer step keeps none */
	int32_t n_rows;   /* rows the step recorded (or that pin) */
	int32_t *row_expert_id; /* [rows_cap][n_layer][TRACE_MAX_EXPERTS] */
	int pin_rows;     /* 1: the CPU backend follows row_expert_id for rows
	                     0..n_rows - 1 of its next step instead of its router
	                     (trace_pin_rows: a reference following a batch of
	                     the engine it checks), pin_experts' way; expert_dev
	                     then says the most a pinned row gave up */
	int32_t *top_id;  /* [top_k] token ids, best first */
	float *top_logit; /* [top_k] their logits */
	float *top_prob;  /* [top_k] their softmax probabilities */
	float entropy;    /* of the softmax, in nats */
	float *resid;     /* [n_layer][n_embd] residual of the last token after
	                     each layer, or NULL (no capture) */
	struct trace_verify verify; /* the comparison, when verified */
};

/*
 * A new trace for a model of N_LAYER layers keeping the TOP_K best logits
 * (1..1024); OUT (borrowed, may be NULL) receives JSON lines. Returns NULL
 * if out of memory or TOP_K is out of range. Free with trace_free.
 */
struct trace *trace_new(int n_layer, int top_k, FILE *out);

/*
 * The debug pane's trace: per-layer statistics only (skip_logits), for a
 * caller that has the sampler's report of the logits instead - the
 * trace's own top-k would cost a device backend a copy of the row per
 * step. NULL if out of memory or N_LAYER is out of range.
 */
struct trace *trace_new_layers(int n_layer);

/* Free a trace. NULL allowed. */
void trace_free(struct trace *t);

/* Statistics of X[0..n). */
void trace_stats_of(const float *x, int64_t n, struct trace_stats *s);

/*
 * Capture the whole residual vector (N_EMBD floats) after each layer from
 * now on, or with N_EMBD 0 stop and free the buffers. Returns 0, or -1 if
 * out of memory or N_EMBD is out of range (the trace is then unchanged).
 */
int trace_capture(struct trace *t, int32_t n_embd);

/*
 * What a backend calls after layer IL (< n_layer) with the last token's
 * residual X[0..n): the statistics into layers[il] and, when capturing
 * vectors of N floats, a copy into resid.
 */
void trace_layer(struct trace *t, int il, const float *x, int64_t n);

/* What a backend that computes the statistics itself (on the device)
 * calls instead, when no vectors are captured: S into layers[il]. */
void trace_layer_stats(struct trace *t, int il, const struct trace_stats *s);

/* What a backend calls in a mixture layer IL with the last token's
 * choice: N experts IDS (best first) and their weights W (N is capped at
 * TRACE_MAX_EXPERTS). */
void trace_experts(struct trace *t, int il, const int32_t *ids, const float *w,
                   int n);

/* Pin T's next step to the choice of experts FROM's last step recorded
 * (a reference following the engine it checks; pin_experts), or with
 * FROM NULL stop pinning. Layers beyond either trace's are not pinned. */
void trace_pin_experts(struct trace *t, const struct trace *from);

/*
 * Keep every row's choice of experts of steps of up to CAP tokens
 * (row_expert_id), or with CAP 0 stop and free them. 0, or -1 if out of
 * memory or CAP is out of range (the trace unchanged).
 */
int trace_rows(struct trace *t, int32_t cap);

/* What a backend calls in a mixture layer IL with rows R0..R0 + N - 1 of
 * the step's choice: K ids a row, row r's at IDS + (r - R0) * STRIDE.
 * Rows past rows_cap are dropped (n_rows 0: the step kept none). */
void trace_row_experts(struct trace *t, int il, int32_t r0, int32_t n,
                       const int32_t *ids, int32_t stride, int k);

/* Pin T's next step, row by row, to the choices FROM's last step kept
 * (pin_rows; T needs trace_rows of at least FROM's n_rows), or with FROM
 * NULL stop. 0, or -1 (T's rows too few: nothing pinned). */
int trace_pin_rows(struct trace *t, const struct trace *from);

/* Fill top_id / top_logit / top_prob / entropy from LOGITS[0..n_vocab). */
void trace_set_logits(struct trace *t, const float *logits, int32_t n_vocab);

/* Mark the step as one without logits (an eval that computed none). */
void trace_clear_logits(struct trace *t);

/* Write the last step as one JSON line to t->out (if set). */
int trace_write_json(const struct trace *t);

/* End the step: its JSON line (trace_write_json), verify.checked = 0,
   step++. engine_eval calls it unless hold is set. Returns the write's
   result. */
int trace_end_step(struct trace *t);

#ifdef __cplusplus
}
#endif

#endif /* PARLEY_TRACE_H */

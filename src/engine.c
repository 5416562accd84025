/*
 * engine.c - the backend-independent half of the engine interface
 * (engine.h): argument checks, the n_past invariant, state headers, trace.
 */
#include "engine_backend.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "trace.h"

/* Magic and version at the start of a saved state (engine.h). */
#define ENGINE_STATE_MAGIC   0x564b5250u /* "PRKV" little-endian */
#define ENGINE_STATE_VERSION 2u /* 3: with recurrent layers (engine.h) */

/* Header of a version 1 state: one shape for every layer. */
struct engine_state_header_v1 {
	uint32_t magic;   /* ENGINE_STATE_MAGIC */
	uint32_t version; /* 1 */
	int32_t n_layer;  /* model shape ... */
	int32_t n_head_kv;
	int32_t head_dim_k;
	int32_t head_dim_v;
	int32_t n_vocab;
	int32_t n_past;    /* positions that follow */
	uint64_t kv_bytes; /* bytes of K/V data after the header */
};

/* Header of a version 2 state; n_layer records follow it. */
struct engine_state_header {
	uint32_t magic;   /* ENGINE_STATE_MAGIC */
	uint32_t version; /* ENGINE_STATE_VERSION */
	int32_t n_layer;
	int32_t n_vocab;
	int32_t n_past;    /* positions saved */
	uint32_t reserved; /* 0 */
	uint64_t kv_bytes; /* bytes after the header: records and data */
};

/* A layer's cache in a version 2 state. */
struct engine_state_layer {
	uint32_t kind;     /* enum model_cache_kind */
	int32_t window;    /* MODEL_CACHE_WINDOW: positions it must keep */
	int32_t k_dim;     /* floats of K per position */
	int32_t v_dim;     /* floats of V per position */
	int32_t pos0;      /* first position held (0 for a full layer) */
	uint32_t reserved; /* 0 */
	uint64_t bytes;    /* of the layer's data */
};

/* Backends compiled in: the one table engine_open picks from and
   engine_backend_at lists, so a backend added here is offered and named
   everywhere. In order of preference for "auto": the CPU reference last,
   the fallback that always opens. */
static const struct engine_ops *const engine_all_backends[] = {
#ifdef PARLEY_HAVE_CUDA
    &backend_cuda_ops,
#endif
    &backend_cpu_ops,
};

#define ENGINE_N_BACKENDS                                                      \
	(sizeof(engine_all_backends) / sizeof(engine_all_backends[0]))

/* Name of backend I of the table, NULL past the last. */
const char *engine_backend_at(size_t i)
{
	return i < ENGINE_N_BACKENDS ? engine_all_backends[i]->name : NULL;
}

/* The table's names joined with ", " into BUF (truncated to LEN). */
const char *engine_backends(char *buf, size_t len)
{
	size_t n = 0;

	if (len == 0)
		return buf;
	buf[0] = '\0';
	for (size_t i = 0; i < ENGINE_N_BACKENDS && n < len; i++) {
		int k = snprintf(buf + n, len - n, "%s%s", i ? ", " : "",
		                 engine_all_backends[i]->name);

		if (k < 0)
			break;
		n += (size_t)k;
	}
	return buf;
}

#ifndef NDEBUG
/* Invariant 1's visible part: 0 <= n_past <= n_ctx. */
static void engine_check(const struct engine *e)
{
	assert(e->n_past >= 0 && e->n_past <= e->n_ctx);
	assert(e->n_ctx > 0);
	assert(e->win_lo >= 0 && e->win_lo <= e->n_past &&
	       e->n_past - e->win_lo <= e->win_cap);
}
#else
#define engine_check(e) ((void)0)
#endif

/* Allocate the fixed arrays of B (window scratch grows later). */
static int engine_select_alloc(struct engine_select_buf *b)
{
	size_t n = ENGINE_SELECT_MAX;

	memset(b, 0, sizeof(*b));
	b->id = malloc(n * sizeof(*b->id));
	b->logit = malloc(n * sizeof(*b->logit));
	b->raw_logit = malloc(n * sizeof(*b->raw_logit));
	b->raw_id = malloc(n * sizeof(*b->raw_id));
	b->raw_top = malloc(n * sizeof(*b->raw_top));
	return b->id && b->logit && b->raw_logit && b->raw_id && b->raw_top
	           ? 0
	           : -1;
}

/* Free what engine_select_alloc and the host select allocated. */
static void engine_select_free(struct engine_select_buf *b)
{
	free(b->id);
	free(b->logit);
	free(b->raw_logit);
	free(b->raw_id);
	free(b->raw_top);
	free(b->win);
	free(b->win_cnt);
	free(b->pen_logit);
	memset(b, 0, sizeof(*b));
}

/* Names of enum engine_kv_type, by value. */
static const char *const engine_kv_names[] = {"default", "f32", "f16", "q8_0"};

const char *engine_kv_type_name(enum engine_kv_type t)
{
	return (unsigned)t < sizeof(engine_kv_names) / sizeof(*engine_kv_names)
	           ? engine_kv_names[t]
	           : "unknown";
}

int engine_kv_type_parse(const char *name, enum engine_kv_type *t)
{
	for (int i = ENGINE_KV_F32; i <= ENGINE_KV_Q8_0; i++)
		if (strcmp(name, engine_kv_names[i]) == 0) {
			*t = (enum engine_kv_type)i;
			return 0;
		}
	return -1;
}

size_t engine_kv_type_bytes(enum engine_kv_type t, size_t n)
{
	switch (t) {
	case ENGINE_KV_F16:
		return n * 2;
	case ENGINE_KV_Q8_0:
		return n / 32 * 34; /* a 2-byte scale per 32 int8 */
	default:
		return n * sizeof(float);
	}
}

enum engine_kv_type engine_kv_type(const struct engine *e)
{
	return e->kv_type;
}

/* The kv type P asks of backend OPS on model M, resolved into *T: 0, or
 * -1 with a message naming the option (a type the backend does not
 * store; q8_0 blocks that would cross a head). */
static int engine_kv_resolve(const struct engine_ops *ops,
                             const struct model *m,
                             const struct engine_params *p,
                             enum engine_kv_type *t, char *err, size_t errlen)
{
	*t = p->kv_type == ENGINE_KV_DEFAULT ? ops->kv_default : p->kv_type;
	if ((unsigned)*t > ENGINE_KV_Q8_0 || !(ops->kv_types >> *t & 1)) {
		char names[64] = "";

		for (int i = ENGINE_KV_F32; i <= ENGINE_KV_Q8_0; i++)
			if (ops->kv_types >> i & 1)
				snprintf(names + strlen(names),
				         sizeof(names) - strlen(names), "%s%s",
				         names[0] ? ", " : "",
				         engine_kv_names[i]);
		snprintf(err, errlen,
		         "--kv-type %s: the %s backend does not store a KV "
		         "cache of that type (it stores %s)",
		         engine_kv_type_name(*t), ops->name, names);
		return -1;
	}
	for (int il = 0; *t == ENGINE_KV_Q8_0 && il < m->cfg.n_layer; il++) {
		const struct model_attn *a = &m->w.layers[il].attn;

		if (model_layer_cache(m, il).kind != MODEL_CACHE_RECURRENT &&
		    (a->head_dim_k % 32 != 0 || a->head_dim_v % 32 != 0)) {
			snprintf(err, errlen,
			         "--kv-type q8_0 needs head sizes that are "
			         "multiples of 32 (its blocks); layer %d has "
			         "%d (K) and %d (V)",
			         il, a->head_dim_k, a->head_dim_v);
			return -1;
		}
	}
	return 0;
}

/* Open an engine on the backend OPS (see engine_open). */
static int engine_open_ops(const struct engine_ops *ops, const struct model *m,
                           const struct engine_params *p, struct engine **out,
                           char *err, size_t errlen)
{
	uint32_t missing = m->cfg.features & ~ops->features;
	enum engine_kv_type kt;
	struct engine *e;

	if (engine_kv_resolve(ops, m, p, &kt, err, errlen) != 0)
		return -1;
	if (missing != 0) {
		snprintf(err, errlen,
		         "the model uses %s, which the %s backend does not run "
		         "yet",
		         model_feature_first(missing), ops->name);
		return -1;
	}
	e = calloc(1, sizeof(*e));
	if (e == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (engine_select_alloc(&e->sel) != 0) {
		engine_select_free(&e->sel);
		free(e);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	e->ops = ops;
	e->model = m;
	e->kv_type = kt;
	for (int i = 0; i <= ENGINE_RS_SNAPSHOTS; i++)
		e->rs_pos[i] = e->ws_pos[i] = -1;
	e->n_ctx = p->n_ctx;
	if (e->n_ctx == 0)
		e->n_ctx = m->cfg.n_ctx_train < ENGINE_DEFAULT_MAX_CTX
		               ? m->cfg.n_ctx_train
		               : ENGINE_DEFAULT_MAX_CTX;
	e->win_cap = e->n_ctx; /* (a backend with window_ring may lower it) */
	for (int il = 0; il < m->cfg.n_layer; il++) {
		struct model_cache_desc d = model_layer_cache(m, il);

		if (d.kind == MODEL_CACHE_WINDOW && d.window - 1 > e->win_need)
			e->win_need = d.window - 1;
	}
	if (ops->open(e, p, err, errlen) != 0) {
		engine_select_free(&e->sel);
		free(e);
		return -1;
	}
	engine_check(e);
	*out = e;
	return 0;
}

/* Open an engine; see engine.h for the contract. */
int engine_open(const struct model *m, const struct engine_params *p,
                struct engine **out, char *err, size_t errlen)
{
	struct engine_params def = {0};
	size_t nb = ENGINE_N_BACKENDS;
	char why[256] = "";
	const char *name;

	*out = NULL;
	if (p == NULL)
		p = &def;
	name = p->backend ? p->backend : "cpu";
	if (p->n_ctx < 0 || p->n_ctx > MODEL_MAX_CTX) {
		snprintf(err, errlen, "context size %d out of range (1..%d)",
		         p->n_ctx, MODEL_MAX_CTX);
		return -1;
	}
	if (strcmp(name, "auto") == 0) {
		/* the table is in order of preference; the last (cpu) is
		   the fallback whose failure is the answer */
		for (size_t i = 0; i < nb; i++) {
			const struct engine_ops *ops = engine_all_backends[i];

			if (engine_open_ops(ops, m, p, out, err, errlen) == 0) {
				if (why[0] != '\0')
					snprintf((*out)->notice,
					         sizeof((*out)->notice),
					         "%s; using the %s backend",
					         why, ops->name);
				return 0;
			}
			snprintf(why, sizeof(why), "%s backend: %s", ops->name,
			         err);
		}
		return -1;
	}
	for (size_t i = 0; i < nb; i++)
		if (strcmp(engine_all_backends[i]->name, name) == 0)
			return engine_open_ops(engine_all_backends[i], m, p,
			                       out, err, errlen);
	{
		char names[256];

		snprintf(err, errlen, "unknown backend \"%s\" (available: %s)",
		         name, engine_backends(names, sizeof(names)));
	}
	return -1;
}

static void engine_trace_settle_quiet(struct engine *e);

/* Free the engine. */
void engine_close(struct engine *e)
{
	if (e == NULL)
		return;
	engine_trace_settle_quiet(e); /* its JSON line, if any, written */
	e->ops->close(e);
	engine_select_free(&e->sel);
	free(e);
}

/* Complete a trace step the last eval left open (e->trace_deferred):
 * the backend fills the layers, then the step ends as engine_eval would
 * have ended it. 0, or -1 with a message. */
static int engine_trace_settle(struct engine *e, char *err, size_t errlen)
{
	if (!e->trace_deferred)
		return 0;
	e->trace_deferred = 0;
	if (e->ops->trace_settle(e, err, errlen) != 0)
		return -1;
	trace_end_step(e->trace);
	return 0;
}

/* engine_trace_settle where no message can be returned: the step still
 * ends (its statistics those of the last complete step, if any). */
static void engine_trace_settle_quiet(struct engine *e)
{
	char msg[128];

	if (e->trace_deferred && engine_trace_settle(e, msg, sizeof(msg)))
		trace_end_step(e->trace);
}

/* Evaluate a batch; see engine.h. */
int engine_eval(struct engine *e, const int32_t *tokens, int32_t n,
                unsigned flags, char *err, size_t errlen)
{
	int32_t n_vocab = e->model->cfg.n_vocab;
	struct trace *t = e->trace;

	engine_check(e);
	if (engine_trace_settle(e, err, errlen))
		return -1;
	if (n < 1) {
		snprintf(err, errlen, "eval of %d tokens", n);
		return -1;
	}
	if (n > e->n_ctx - e->n_past) {
		snprintf(err, errlen,
		         "context full: %d tokens held + %d new > n_ctx %d",
		         e->n_past, n, e->n_ctx);
		return -1;
	}
	for (int32_t i = 0; i < n; i++) {
		if (tokens[i] < 0 || tokens[i] >= n_vocab) {
			snprintf(err, errlen,
			         "token %d (batch index %d) out of range "
			         "0..%d",
			         tokens[i], i, n_vocab - 1);
			return -1;
		}
	}
	if ((flags & ENGINE_EVAL_ALL) && (flags & ENGINE_EVAL_NO_LOGITS)) {
		snprintf(err, errlen, "eval flags ask for all and no logits");
		return -1;
	}
	if (e->rs_lost) {
		snprintf(err, errlen,
		         "the recurrent state was lost by a failed evaluation: "
		         "truncate to %d first",
		         engine_rewind_point(e, e->n_past));
		return -1;
	}
	e->sel.out.k = 0; /* a selection describes the last eval only */
	if (t != NULL && !t->pin_rows)
		t->n_rows = 0; /* (the rows the backend records: this step's) */
	if (e->ops->eval(e, tokens, n, flags, err, errlen) != 0) {
		/* a KV cache's new entries are dead by invariant 1; a
		   recurrent state may be half updated */
		e->rs_lost = engine_recurrent(e);
		engine_check(e);
		return -1;
	}
	e->n_past += n;
	engine_check(e);
	if (t != NULL) {
		/* tracing is opt-in: its full read of the row costs a copy on
		   a device backend, never paid when no trace is attached */
		const float *l = e->n_logits > 0 && !t->skip_logits
		                     ? engine_logits(e)
		                     : NULL;

		t->pos = e->n_past - 1;
		t->n_tokens = n;
		t->token = tokens[n - 1];
		if (l != NULL)
			trace_set_logits(
			    t, l + (size_t)(e->n_logits - 1) * n_vocab,
			    n_vocab);
		else
			trace_clear_logits(t);
		/* else a verifier compares, then ends it; or the step's
		   statistics are still on their way (engine_trace_settle) */
		if (!t->hold && !e->trace_deferred)
			trace_end_step(t);
	}
	return 0;
}

/* Rows of logits kept by the last eval. */
int32_t engine_n_logits(const struct engine *e)
{
	return e->n_logits;
}

/* The full logits of the last eval, read on request. */
const float *engine_logits(struct engine *e)
{
	char msg[128];

	if (e->n_logits <= 0)
		return NULL;
	engine_trace_settle_quiet(e);
	return e->ops->logits(e, msg, sizeof(msg));
}

/* Select from the last row; see engine.h. */
const struct engine_selection *engine_select(struct engine *e,
                                             const struct engine_select_req *q,
                                             char *err, size_t errlen)
{
	int32_t nv = e->model->cfg.n_vocab;
	const float *l;

	if (e->n_logits <= 0) {
		snprintf(err, errlen, "select: the last eval kept no logits");
		return NULL;
	}
	if (q->k < 1 || q->k > ENGINE_SELECT_MAX || q->n_raw < 0 ||
	    q->n_raw > ENGINE_SELECT_MAX || q->n_recent < 0 ||
	    (q->n_recent > 0 && q->recent == NULL) ||
	    !(q->repeat_penalty > 0.0f)) {
		snprintf(err, errlen,
		         "select: bad request (k %d, n_raw %d, window %d, "
		         "repeat penalty %g)",
		         q->k, q->n_raw, q->n_recent, q->repeat_penalty);
		return NULL;
	}
	if (e->ops->select != NULL) {
		/* the select waits for the step anyway: then the trace's
		   statistics are there too (no second wait) */
		if (e->ops->select(e, q, err, errlen) != 0 ||
		    engine_trace_settle(e, err, errlen) != 0)
			return NULL;
		return &e->sel.out;
	}
	l = e->ops->logits(e, err, errlen);
	if (l == NULL)
		return NULL;
	if (engine_select_row(l + (size_t)(e->n_logits - 1) * nv, nv, q,
	                      &e->sel, err, errlen) != 0)
		return NULL;
	return &e->sel.out;
}

/* Name of the backend. */
const char *engine_backend_name(const struct engine *e)
{
	return e->ops->name;
}

/* Why "auto" did not get its first choice, or NULL. */
const char *engine_notice(const struct engine *e)
{
	return e->notice[0] != '\0' ? e->notice : NULL;
}

/* Memory the backend holds. */
size_t engine_mem_bytes(const struct engine *e)
{
	return e->mem_bytes;
}

/* K and V of every layer at N_PAST positions, in the cache's type (q8_0:
 * every head dim a multiple of 32, so the sum is whole blocks). */
size_t engine_kv_read_bytes(const struct engine *e, int32_t n_past)
{
	/* a recurrent state is read and written whole every step */
	return engine_kv_type_bytes(e->kv_type,
	                            model_cache_floats(e->model, n_past)) +
	       2 * engine_rs_bytes(e);
}

size_t engine_kv_layer_bytes(const struct engine *e, int il, int32_t n)
{
	struct model_cache_desc d = model_layer_cache(e->model, il);

	return (size_t)n * ((size_t)d.k_dim + (size_t)d.v_dim) * sizeof(float);
}

size_t engine_kv_state_bytes(const struct engine *e, int32_t n)
{
	return model_cache_floats(e->model, n) * sizeof(float);
}

/* Bytes of the K/V of a state of N_PAST positions whose window layers
 * hold them from POS0 on. */
static size_t engine_kv_held_bytes(const struct engine *e, int32_t n_past,
                                   int32_t pos0)
{
	size_t n = 0;

	for (int il = 0; il < e->model->cfg.n_layer; il++)
		n += engine_kv_layer_bytes(
		    e, il,
		    model_layer_cache(e->model, il).kind == MODEL_CACHE_WINDOW
		        ? n_past - pos0
		        : n_past);
	return n;
}

/* Bandwidth of the weights' memory. */
int engine_measure_bandwidth(struct engine *e, double *bytes_per_s, char *err,
                             size_t errlen)
{
	if (e->ops->bandwidth != NULL)
		return e->ops->bandwidth(e, bytes_per_s, err, errlen);
	return engine_host_bandwidth(e->n_threads, bytes_per_s, err, errlen);
}

/* The device's name, NULL for the host. */
const char *engine_device_name(const struct engine *e)
{
	return e->device[0] != '\0' ? e->device : NULL;
}

/* Host threads of the backend. */
int32_t engine_n_threads(const struct engine *e)
{
	return e->n_threads;
}

/* Length of one logits row. */
int32_t engine_n_vocab(const struct engine *e)
{
	return e->model->cfg.n_vocab;
}

/* Tokens held in the KV cache. */
int32_t engine_n_past(const struct engine *e)
{
	return e->n_past;
}

/* KV capacity in tokens. */
int32_t engine_n_ctx(const struct engine *e)
{
	return e->n_ctx;
}

bool engine_eval_queues(const struct engine *e)
{
	return e->ops->eval_queues != 0;
}

bool engine_int8_activations(const struct engine *e)
{
	return e->int8_act;
}

/* Whether T's type is in TYPES. */
static bool engine_type_in(const struct model_tensor *t, uint64_t types)
{
	return t->type < 64 && (types >> t->type & 1) != 0;
}

bool engine_model_uses_types(const struct model *m, uint64_t types)
{
	if (engine_type_in(&m->w.output, types))
		return true;
	for (int il = 0; il < m->cfg.n_layer; il++) {
		const struct model_tensor *t[MODEL_LAYER_MAX_MATRICES];
		int nt = model_layer_matrices(&m->w.layers[il], t);

		for (int i = 0; i < nt; i++)
			if (engine_type_in(t[i], types))
				return true;
	}
	return false;
}

/* Forget positions >= n_keep. */
int engine_truncate(struct engine *e, int32_t n_keep)
{
	engine_check(e);
	engine_trace_settle_quiet(e);
	if (n_keep < 0 || n_keep > e->n_past)
		return -1;
	if (!engine_window_at(e, n_keep))
		return -1;
	if (engine_recurrent(e) && engine_rs_truncate(e, n_keep) != 0)
		return -1;
	if (engine_ws_truncate(e, n_keep) != 0)
		return -1;
	e->n_past = n_keep;
	engine_check(e);
	return 0;
}

/* Whether E's model and backend can shift its cache. */
bool engine_can_shift(const struct engine *e)
{
	return e->ops->kv_shift != NULL &&
	       (e->ops->kv_shift_types >> e->kv_type & 1) != 0 &&
	       model_kv_shiftable(e->model);
}

/* Shift the cache (engine.h invariant 6). */
int engine_kv_shift(struct engine *e, int32_t p0, int32_t d, char *err,
                    size_t errlen)
{
	int rc;

	engine_check(e);
	engine_trace_settle_quiet(e);
	if (p0 < 0 || d < 1 || p0 > e->n_past - d) {
		snprintf(err, errlen,
		         "kv shift of positions %d..%d+%d out of range: the "
		         "cache holds %d",
		         p0, p0, d, e->n_past);
		return -1;
	}
	if (!model_kv_shiftable(e->model)) {
		snprintf(err, errlen,
		         "the cache of this model cannot be shifted: a "
		         "recurrent layer's state cannot forget positions");
		return -1;
	}
	if (e->win_lo > 0 && e->win_lo < p0 + d) {
		snprintf(err, errlen,
		         "the sliding-window layers keep positions from %d on "
		         "only: a shift of %d..%d+%d would leave them without "
		         "the window of the moved positions",
		         e->win_lo, p0, p0, d);
		return -1;
	}
	if (e->ops->kv_shift == NULL) {
		snprintf(err, errlen, "the %s backend cannot shift the cache",
		         e->ops->name);
		return -1;
	}
	if (!(e->ops->kv_shift_types >> e->kv_type & 1)) {
		snprintf(err, errlen,
		         "the %s backend does not shift a %s KV cache",
		         e->ops->name, engine_kv_type_name(e->kv_type));
		return -1;
	}
	rc = e->ops->kv_shift(e, p0, d, err, errlen);
	if (rc == -2) { /* what came after p0 is lost */
		e->n_past = e->win_lo > 0 ? 0 : p0;
		e->win_lo = 0;
		engine_ws_drop(e, -1);
	}
	if (rc != 0) {
		engine_check(e);
		return -1;
	}
	e->n_past -= d;
	if (e->win_lo > 0) /* (the window layers' rows hold kept ones) */
		e->win_lo -= d;
	engine_ws_drop(e, -1); /* (their positions moved) */
	engine_check(e);
	return 0;
}

/* Bytes of the per-layer records of a version 2 state. */
static size_t engine_records_bytes(const struct engine *e)
{
	return (size_t)e->model->cfg.n_layer *
	       sizeof(struct engine_state_layer);
}

/* Bytes engine_state_save needs. */
size_t engine_state_size(const struct engine *e)
{
	return sizeof(struct engine_state_header) + engine_records_bytes(e) +
	       engine_kv_held_bytes(e, e->n_past, e->win_lo) +
	       (engine_recurrent(e) ? engine_rs_state_bytes(e) : 0);
}

/* The header describing E's model with N_PAST positions. */
static void engine_header(const struct engine *e, int32_t n_past, int32_t pos0,
                          struct engine_state_header *h)
{
	const struct model_config *c = &e->model->cfg;

	memset(h, 0, sizeof(*h));
	h->magic = ENGINE_STATE_MAGIC;
	h->version = engine_recurrent(e) ? 3u : ENGINE_STATE_VERSION;
	h->n_layer = c->n_layer;
	h->n_vocab = c->n_vocab;
	h->n_past = n_past;
	/* (version 3: the recurrent part follows; engine_state_v2) */
	h->kv_bytes = engine_records_bytes(e) +
	              engine_kv_held_bytes(e, n_past, pos0) +
	              (engine_recurrent(e) ? engine_rs_state_bytes(e) : 0);
}

/* Layer IL's record with N_PAST positions, a window layer's from POS0. */
static void engine_layer_record(const struct engine *e, int il, int32_t n_past,
                                int32_t pos0, struct engine_state_layer *r)
{
	struct model_cache_desc d = model_layer_cache(e->model, il);

	memset(r, 0, sizeof(*r));
	r->kind = (uint32_t)d.kind;
	r->window = d.window;
	r->k_dim = d.k_dim;
	r->v_dim = d.v_dim;
	r->pos0 = d.kind == MODEL_CACHE_WINDOW ? pos0 : 0;
	r->bytes = engine_kv_layer_bytes(e, il, n_past - r->pos0);
}

/* Save header, records and K/V; see engine.h. */
size_t engine_state_save(struct engine *e, void *buf, size_t len, char *err,
                         size_t errlen)
{
	struct engine_state_header h;
	size_t need = engine_state_size(e);
	char *p = buf;
	char e2[256];

	engine_trace_settle_quiet(e);
	if (len < need) {
		snprintf(err, errlen, "state buffer of %zu bytes, need %zu",
		         len, need);
		return 0;
	}
	engine_header(e, e->n_past, e->win_lo, &h);
	memcpy(p, &h, sizeof(h));
	p += sizeof(h);
	for (int il = 0; il < e->model->cfg.n_layer; il++) {
		struct engine_state_layer r;

		engine_layer_record(e, il, e->n_past, e->win_lo, &r);
		memcpy(p, &r, sizeof(r));
		p += sizeof(r);
	}
	e2[0] = '\0';
	if (e->ops->kv_save(e, e->n_past, p, e2, sizeof(e2)) != 0) {
		snprintf(err, errlen,
		         "backend %s could not save the KV cache: %s",
		         e->ops->name, e2);
		return 0;
	}
	if (engine_recurrent(e) &&
	    engine_rs_state_save(
	        e, p + engine_kv_held_bytes(e, e->n_past, e->win_lo), err,
	        errlen) != 0)
		return 0;
	return need;
}

/* A version 1 state's header checked against E's model: every layer full
 * and of the one shape it names. Returns 0 with *DATA and *N_PAST, or -1
 * with a message. */
static int engine_state_v1(const struct engine *e, const void *buf, size_t len,
                           const char **data, int32_t *n_past, char *err,
                           size_t errlen)
{
	const struct model_config *c = &e->model->cfg;
	struct engine_state_header_v1 h;

	if (len < sizeof(h)) {
		snprintf(err, errlen,
		         "state of %zu bytes is shorter than its "
		         "header (%zu)",
		         len, sizeof(h));
		return -1;
	}
	memcpy(&h, buf, sizeof(h));
	if (h.n_past < 0 || h.n_past > e->n_ctx) {
		snprintf(err, errlen, "state holds %d positions, n_ctx is %d",
		         h.n_past, e->n_ctx);
		return -1;
	}
	for (int il = 0; il < c->n_layer; il++) {
		struct model_cache_desc d = model_layer_cache(e->model, il);
		int64_t kd = (int64_t)h.n_head_kv * h.head_dim_k;
		int64_t vd = (int64_t)h.n_head_kv * h.head_dim_v;

		if (h.n_layer != c->n_layer || h.n_vocab != c->n_vocab ||
		    d.kind != MODEL_CACHE_FULL || d.k_dim != kd ||
		    d.v_dim != vd) {
			snprintf(
			    err, errlen,
			    "state (version 1) is for another model shape "
			    "(layers %d kv-heads %d head %d vocab %d; this "
			    "model's layer %d: %s cache of %d K floats a "
			    "position, %d layers, vocab %d)",
			    h.n_layer, h.n_head_kv, h.head_dim_k, h.n_vocab, il,
			    d.kind == MODEL_CACHE_FULL ? "a full" : "another",
			    d.k_dim, c->n_layer, c->n_vocab);
			return -1;
		}
	}
	if (h.kv_bytes != engine_kv_state_bytes(e, h.n_past) ||
	    len - sizeof(h) != h.kv_bytes) {
		snprintf(
		    err, errlen,
		    "state has %zu bytes of K/V, expected "
		    "%llu",
		    len - sizeof(h),
		    (unsigned long long)engine_kv_state_bytes(e, h.n_past));
		return -1;
	}
	*data = (const char *)buf + sizeof(h);
	*n_past = h.n_past;
	return 0;
}

/* The first position a version 2 state's window layers hold (its first
 * window layer's record, read where the state is long enough; 0 else:
 * the records' check then says what is wrong). */
static int32_t engine_state_pos0(const struct engine *e, const void *buf,
                                 size_t len)
{
	const size_t h = sizeof(struct engine_state_header);
	struct engine_state_layer r;

	if (len < h + engine_records_bytes(e))
		return 0;
	for (int il = 0; il < e->model->cfg.n_layer; il++)
		if (model_layer_cache(e->model, il).kind ==
		    MODEL_CACHE_WINDOW) {
			memcpy(&r,
			       (const char *)buf + h + (size_t)il * sizeof(r),
			       sizeof(r));
			return r.pos0;
		}
	return 0;
}

/* A version 2 or 3 state's header and records checked against E's
 * model (a model with recurrent layers reads version 3 only, the others
 * version 2). Returns 0 with *DATA, *N_PAST, *POS0 (the first position
 * its window layers hold) and *RS_LEN (the bytes of the recurrent part
 * after the K/V: engine_rs_state_load checks them), or -1 with a
 * message. */
static int engine_state_v2(const struct engine *e, const void *buf, size_t len,
                           const char **data, int32_t *n_past, int32_t *pos0,
                           size_t *rs_len, char *err, size_t errlen)
{
	const struct model_config *c = &e->model->cfg;
	struct engine_state_header h, want;
	const char *p = (const char *)buf + sizeof(h);

	if (len < sizeof(h)) {
		snprintf(err, errlen,
		         "state of %zu bytes is shorter than its "
		         "header (%zu)",
		         len, sizeof(h));
		return -1;
	}
	memcpy(&h, buf, sizeof(h));
	if (h.n_past < 0 || h.n_past > e->n_ctx) {
		snprintf(err, errlen, "state holds %d positions, n_ctx is %d",
		         h.n_past, e->n_ctx);
		return -1;
	}
	*pos0 = engine_state_pos0(e, buf, len);
	if (*pos0 != 0 && (*pos0 < 0 || *pos0 > h.n_past - e->win_need)) {
		snprintf(err, errlen,
		         "state's sliding-window layers hold positions from %d "
		         "of %d: not the %d a next token reads",
		         *pos0, h.n_past, e->win_need);
		return -1;
	}
	if (*pos0 != 0 && !e->ops->window_ring) {
		snprintf(err, errlen,
		         "state's sliding-window layers hold positions from %d "
		         "on; the %s backend keeps every position",
		         *pos0, e->ops->name);
		return -1;
	}
	engine_header(e, h.n_past, *pos0, &want);
	if (h.version != want.version) {
		snprintf(err, errlen,
		         "state version %u is for a model %s recurrent layers "
		         "(this one has %d)",
		         h.version, h.version == 3 ? "with" : "without",
		         c->n_recurrent);
		return -1;
	}
	*rs_len = 0;
	if (h.version == 3 && len - sizeof(h) == h.kv_bytes &&
	    h.kv_bytes >= engine_records_bytes(e) +
	                      engine_kv_held_bytes(e, h.n_past, *pos0)) {
		/* the recurrent part's size depends on its snapshots */
		*rs_len = h.kv_bytes - engine_records_bytes(e) -
		          engine_kv_held_bytes(e, h.n_past, *pos0);
		want.kv_bytes = h.kv_bytes;
	}
	if (h.n_layer != want.n_layer || h.n_vocab != want.n_vocab ||
	    h.reserved != 0) {
		snprintf(err, errlen,
		         "state is for another model shape (layers %d vocab "
		         "%d; this model: %d %d)",
		         h.n_layer, h.n_vocab, want.n_layer, want.n_vocab);
		return -1;
	}
	if (len - sizeof(h) != h.kv_bytes) {
		snprintf(err, errlen,
		         "state is cut short or padded: %zu bytes after its "
		         "header, which says %llu",
		         len - sizeof(h), (unsigned long long)h.kv_bytes);
		return -1;
	}
	if (h.kv_bytes != want.kv_bytes) {
		snprintf(err, errlen,
		         "state has %zu bytes of K/V, expected "
		         "%llu",
		         len - sizeof(h), (unsigned long long)want.kv_bytes);
		return -1;
	}
	for (int il = 0; il < c->n_layer; il++) {
		struct engine_state_layer r, w;

		memcpy(&r, p + (size_t)il * sizeof(r), sizeof(r));
		engine_layer_record(e, il, h.n_past, *pos0, &w);
		if (memcmp(&r, &w, sizeof(r)) != 0) {
			snprintf(
			    err, errlen,
			    "state's layer %d cache (kind %u, window %d, "
			    "K %d, V %d floats, from position %d) is not "
			    "this model's (kind %u, window %d, K %d, V %d, "
			    "from %d)",
			    il, r.kind, r.window, r.k_dim, r.v_dim, r.pos0,
			    w.kind, w.window, w.k_dim, w.v_dim, w.pos0);
			return -1;
		}
	}
	*data = p + engine_records_bytes(e);
	*n_past = h.n_past;
	return 0;
}

/* Restore header + K/V; see engine.h. */
int engine_state_load(struct engine *e, const void *buf, size_t len, char *err,
                      size_t errlen)
{
	uint32_t mv[2] = {0, 0};
	const char *data = NULL;
	int32_t n_past = 0, pos0 = 0;
	size_t rs_len = 0;
	char e2[256];
	int rc;

	engine_trace_settle_quiet(e);
	e->n_past = 0;
	e->win_lo = 0;
	engine_ws_drop(e, -1);
	if (engine_recurrent(e))
		engine_rs_reset(e); /* what a failed load leaves: n_past 0 */
	if (len < sizeof(mv)) {
		snprintf(err, errlen,
		         "state of %zu bytes is shorter than its "
		         "header (%zu)",
		         len, sizeof(struct engine_state_header));
		return -1;
	}
	memcpy(mv, buf, sizeof(mv));
	if (mv[0] != ENGINE_STATE_MAGIC || mv[1] < 1 || mv[1] > 3) {
		snprintf(err, errlen,
		         "not a parley KV state (magic %08x "
		         "version %u; this parley reads versions 1 to 3)",
		         mv[0], mv[1]);
		return -1;
	}
	rc = mv[1] == 1
	         ? engine_state_v1(e, buf, len, &data, &n_past, err, errlen)
	         : engine_state_v2(e, buf, len, &data, &n_past, &pos0, &rs_len,
	                           err, errlen);
	if (rc != 0)
		return -1;
	e2[0] = '\0';
	e->win_lo = pos0; /* (the data's; kv_load may keep fewer) */
	if (e->ops->kv_load(e, n_past, data, e2, sizeof(e2)) != 0) {
		e->win_lo = 0;
		snprintf(err, errlen,
		         "backend %s could not load the KV cache: %s",
		         e->ops->name, e2);
		return -1;
	}
	if (engine_recurrent(e) &&
	    engine_rs_state_load(e,
	                         data + engine_kv_held_bytes(e, n_past, pos0),
	                         rs_len, n_past, err, errlen) != 0) {
		e->win_lo = 0;
		return -1;
	}
	e->n_past = n_past;
	engine_check(e);
	return 0;
}

/* Attach or detach a trace (the old one's open step completed first). */
void engine_set_trace(struct engine *e, struct trace *t)
{
	engine_trace_settle_quiet(e);
	e->trace = t;
}

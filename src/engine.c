/*
 * engine.c - the backend-independent half of the engine interface
 * (engine.h): argument checks, the n_past invariant, state headers, trace.
 */
#include "engine.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "trace.h"

/* Magic and version at the start of a saved state. */
#define ENGINE_STATE_MAGIC   0x564b5250u /* "PRKV" little-endian */
#define ENGINE_STATE_VERSION 1u

/* Header of a saved state: the model shape it belongs to. */
struct engine_state_header {
	uint32_t magic;   /* ENGINE_STATE_MAGIC */
	uint32_t version; /* ENGINE_STATE_VERSION */
	int32_t n_layer;  /* model shape ... */
	int32_t n_head_kv;
	int32_t head_dim_k;
	int32_t head_dim_v;
	int32_t n_vocab;
	int32_t n_past;    /* positions that follow */
	uint64_t kv_bytes; /* bytes of K/V data after the header */
};

/* Backends compiled in. */
static const struct engine_ops *const engine_all_backends[] = {
    &backend_cpu_ops,
#ifdef PARLEY_HAVE_CUDA
    &backend_cuda_ops,
#endif
};

/* Comma-separated names of the backends compiled in. */
const char *engine_backends(void)
{
#ifdef PARLEY_HAVE_CUDA
	return "cpu, cuda";
#else
	return "cpu";
#endif
}

#ifndef NDEBUG
/* Invariant 1's visible part: 0 <= n_past <= n_ctx. */
static void engine_check(const struct engine *e)
{
	assert(e->n_past >= 0 && e->n_past <= e->n_ctx);
	assert(e->n_ctx > 0);
}
#else
#define engine_check(e) ((void)0)
#endif

/* Open an engine; see engine.h for the contract. */
int engine_open(const struct model *m, const struct engine_params *p,
                struct engine **out, char *err, size_t errlen)
{
	struct engine_params def = {0};
	const struct engine_ops *ops = NULL;
	struct engine *e;
	const char *name;

	*out = NULL;
	if (p == NULL)
		p = &def;
	name = p->backend ? p->backend : "cpu";
	for (size_t i = 0;
	     i < sizeof(engine_all_backends) / sizeof(engine_all_backends[0]);
	     i++)
		if (strcmp(engine_all_backends[i]->name, name) == 0)
			ops = engine_all_backends[i];
	if (ops == NULL) {
		snprintf(err, errlen, "unknown backend \"%s\" (available: %s)",
		         name, engine_backends());
		return -1;
	}
	if (p->n_ctx < 0 || p->n_ctx > MODEL_MAX_CTX) {
		snprintf(err, errlen, "context size %d out of range (1..%d)",
		         p->n_ctx, MODEL_MAX_CTX);
		return -1;
	}
	e = calloc(1, sizeof(*e));
	if (e == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	e->ops = ops;
	e->model = m;
	e->n_ctx = p->n_ctx;
	if (e->n_ctx == 0)
		e->n_ctx = m->cfg.n_ctx_train < ENGINE_DEFAULT_MAX_CTX
		               ? m->cfg.n_ctx_train
		               : ENGINE_DEFAULT_MAX_CTX;
	if (ops->open(e, p, err, errlen) != 0) {
		free(e);
		return -1;
	}
	engine_check(e);
	*out = e;
	return 0;
}

/* Free the engine. */
void engine_close(struct engine *e)
{
	if (e == NULL)
		return;
	e->ops->close(e);
	free(e);
}

/* Evaluate a batch; see engine.h. */
int engine_eval(struct engine *e, const int32_t *tokens, int32_t n,
                unsigned flags, char *err, size_t errlen)
{
	int32_t n_vocab = e->model->cfg.n_vocab;
	struct trace *t = e->trace;

	engine_check(e);
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
	if (e->ops->eval(e, tokens, n, flags, err, errlen) != 0) {
		engine_check(e);
		return -1;
	}
	if (t != NULL) {
		t->pos = e->n_past + n - 1;
		t->n_tokens = n;
		t->token = tokens[n - 1];
		trace_set_logits(
		    t, e->logits + (size_t)(e->n_logits - 1) * n_vocab,
		    n_vocab);
		trace_write_json(t);
		t->step++;
	}
	e->n_past += n;
	engine_check(e);
	return 0;
}

/* The logits of the last eval. */
const float *engine_logits(const struct engine *e)
{
	return e->logits;
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

/* Forget positions >= n_keep. */
int engine_truncate(struct engine *e, int32_t n_keep)
{
	engine_check(e);
	if (n_keep < 0 || n_keep > e->n_past)
		return -1;
	e->n_past = n_keep;
	engine_check(e);
	return 0;
}

/* Bytes engine_state_save needs. */
size_t engine_state_size(const struct engine *e)
{
	return sizeof(struct engine_state_header) +
	       e->ops->kv_bytes(e, e->n_past);
}

/* The header describing E's model shape with N_PAST positions. */
static void engine_header(const struct engine *e, int32_t n_past,
                          struct engine_state_header *h)
{
	const struct model_config *c = &e->model->cfg;

	memset(h, 0, sizeof(*h));
	h->magic = ENGINE_STATE_MAGIC;
	h->version = ENGINE_STATE_VERSION;
	h->n_layer = c->n_layer;
	h->n_head_kv = c->n_head_kv;
	h->head_dim_k = c->head_dim_k;
	h->head_dim_v = c->head_dim_v;
	h->n_vocab = c->n_vocab;
	h->n_past = n_past;
	h->kv_bytes = e->ops->kv_bytes(e, n_past);
}

/* Save header + K/V; see engine.h. */
size_t engine_state_save(struct engine *e, void *buf, size_t len, char *err,
                         size_t errlen)
{
	struct engine_state_header h;
	size_t need = engine_state_size(e);

	if (len < need) {
		snprintf(err, errlen, "state buffer of %zu bytes, need %zu",
		         len, need);
		return 0;
	}
	engine_header(e, e->n_past, &h);
	memcpy(buf, &h, sizeof(h));
	if (e->ops->kv_save(e, e->n_past, (char *)buf + sizeof(h)) != 0) {
		snprintf(err, errlen, "backend %s could not save the KV cache",
		         e->ops->name);
		return 0;
	}
	return need;
}

/* Restore header + K/V; see engine.h. */
int engine_state_load(struct engine *e, const void *buf, size_t len, char *err,
                      size_t errlen)
{
	struct engine_state_header h, want;

	e->n_past = 0;
	if (len < sizeof(h)) {
		snprintf(err, errlen,
		         "state of %zu bytes is shorter than its "
		         "header (%zu)",
		         len, sizeof(h));
		return -1;
	}
	memcpy(&h, buf, sizeof(h));
	if (h.magic != ENGINE_STATE_MAGIC ||
	    h.version != ENGINE_STATE_VERSION) {
		snprintf(err, errlen,
		         "not a parley KV state (magic %08x "
		         "version %u)",
		         h.magic, h.version);
		return -1;
	}
	if (h.n_past < 0 || h.n_past > e->n_ctx) {
		snprintf(err, errlen, "state holds %d positions, n_ctx is %d",
		         h.n_past, e->n_ctx);
		return -1;
	}
	engine_header(e, h.n_past, &want);
	if (memcmp(&h, &want, sizeof(h)) != 0) {
		snprintf(err, errlen,
		         "state is for another model shape (layers %d kv-heads "
		         "%d head %d vocab %d; this model: %d %d %d %d)",
		         h.n_layer, h.n_head_kv, h.head_dim_k, h.n_vocab,
		         want.n_layer, want.n_head_kv, want.head_dim_k,
		         want.n_vocab);
		return -1;
	}
	if (len - sizeof(h) != h.kv_bytes) {
		snprintf(err, errlen,
		         "state has %zu bytes of K/V, expected "
		         "%llu",
		         len - sizeof(h), (unsigned long long)h.kv_bytes);
		return -1;
	}
	if (e->ops->kv_load(e, h.n_past, (const char *)buf + sizeof(h)) != 0) {
		snprintf(err, errlen, "backend %s could not load the KV cache",
		         e->ops->name);
		return -1;
	}
	e->n_past = h.n_past;
	engine_check(e);
	return 0;
}

/* Attach or detach a trace. */
void engine_set_trace(struct engine *e, struct trace *t)
{
	e->trace = t;
}

/*
 * t_engine_rs.c - the recurrent state of a Qwen3.5-shaped model (random
 * weights, written by tests/parley-mkmodel at test time) on the CPU
 * engine (engine.h invariant 3, engine_rs.c):
 *
 *   1. the model describes its layers: recurrent ones every layer but
 *      each full_attention_interval-th, gated attention in the others;
 *   2. a truncation to where no snapshot is fails and changes nothing
 *      (the next token's logits are those of an engine never asked);
 *      engine_rewind_point names where one can go;
 *   3. a snapshot, more tokens, a truncation back to it and the same
 *      tokens again: the same logits, bit for bit; a truncation to 0
 *      starts afresh; snapshots past the cut are dropped; the lowest
 *      snapshot goes when ENGINE_RS_SNAPSHOTS are kept;
 *   4. a prefill in one batch, in chunks of 3 and token by token: the
 *      same logits (the state carries across chunks);
 *   5. the saved state (version 3: the live state and the snapshots)
 *      restores into a fresh engine: the next token's logits are the
 *      same, and its snapshots are usable; a damaged state (a snapshot
 *      past n_past, a wrong count, cut short) is refused with a message
 *      and leaves an empty sequence that evaluates as a fresh engine.
 */
#include "engine.h"
#include "engine_util.h"
#include "gguf.h"
#include "model.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N_TOK 40

static int32_t toks[N_TOK];
/* PARLEY_TEST_BACKEND (default cpu): on another engine the same flows,
   the logits compared within BOUND instead of bit for bit: a GPU's
   chunks of 8 or more tokens go through fp16 GEMM inputs, smaller ones
   through the fp32 mat-vec, and its delta rule is chunked or token by
   token (an H200 measured 3e-6 to 1e-5 between them; t_cuda_engine's
   TOL for the same rounding is 5e-4) */
static const char *backend = "cpu";
#define BOUND 1e-4
static struct model *mdl;
static struct gguf_file *file;

/* A CPU engine on the model (n_ctx 128), or NULL (reported). */
static struct engine *open_cpu(int32_t n_batch)
{
	struct engine_params p = {.backend = backend,
	                          .n_ctx = 128,
	                          .n_threads = 2,
	                          .n_batch = n_batch};
	struct engine *e = NULL;
	char err[512];

	if (engine_open(mdl, &p, &e, err, sizeof(err)) != 0)
		tap_diag("engine_open: %s", err);
	return e;
}

/* Evaluate TOKS[from, to) in chunks of STEP, keeping every row of
 * logits into OUT (rows from..to). 0 or -1. */
static int eval_rows(struct engine *e, int32_t from, int32_t to, int32_t step,
                     float *out)
{
	const int32_t nv = mdl->cfg.n_vocab;
	char err[512];

	for (int32_t i = from; i < to; i += step) {
		int32_t n = to - i < step ? to - i : step;

		if (engine_eval(e, toks + i, n, ENGINE_EVAL_ALL, err,
		                sizeof(err)) != 0) {
			tap_diag("eval: %s", err);
			return -1;
		}
		if (out != NULL)
			memcpy(out + (size_t)i * nv, engine_logits(e),
			       (size_t)n * nv * sizeof(float));
	}
	return 0;
}

/* Rows [from, to) of A and B equal: bit for bit on the CPU, else each
 * row's NMSE within BOUND. */
static bool same_rows(const float *a, const float *b, int32_t from, int32_t to)
{
	const size_t nv = (size_t)mdl->cfg.n_vocab;

	if (strcmp(backend, "cpu") == 0)
		return memcmp(a + from * nv, b + from * nv,
		              (size_t)(to - from) * nv * sizeof(float)) == 0;
	for (int32_t r = from; r < to; r++) {
		double d = 0, n = 0;

		for (size_t i = r * nv; i < (r + 1) * nv; i++) {
			d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
			n += (double)b[i] * b[i];
		}
		if (!(d <= BOUND * n)) {
			tap_diag("row %d: nmse %.3g", r, d / n);
			return false;
		}
	}
	return true;
}

/* 1. */
static void test_description(void)
{
	const struct model_config *c = &mdl->cfg;
	int rec = 0, gated = 0;

	for (int il = 0; il < c->n_layer; il++) {
		const struct model_layer *l = &mdl->w.layers[il];

		if (l->attn.kind == MODEL_ATTN_RECURRENT) {
			rec += (il + 1) % 2 != 0;
		} else {
			gated += l->attn.gated && (il + 1) % 2 == 0;
		}
	}
	tap_ok(c->n_layer == 4 && c->n_recurrent == 2 && rec == 2 &&
	           gated == 2 && (c->features & MODEL_FEAT_RECURRENT) &&
	           (c->features & MODEL_FEAT_ATTN_GATE) &&
	           mdl->w.layers[0].ssm.n_v_heads == 4 &&
	           mdl->w.layers[0].ssm.n_k_heads == 2 &&
	           mdl->w.layers[0].ssm.conv_dim == (2 * 2 + 4) * 16 &&
	           model_layer_cache(mdl, 0).kind == MODEL_CACHE_RECURRENT &&
	           model_layer_cache(mdl, 0).k_dim == 0 &&
	           model_layer_cache(mdl, 1).kind == MODEL_CACHE_FULL,
	       "layers 0, 2 recurrent (4 value heads on 2 key heads, 128 "
	       "conv channels), 1, 3 gated attention: %d recurrent",
	       c->n_recurrent);
}

/* 2, 3, 4. */
static void test_truncation(const float *ref)
{
	const size_t nv = (size_t)mdl->cfg.n_vocab;
	float *got = calloc((size_t)N_TOK * nv, sizeof(float));
	struct engine *e = open_cpu(0);
	struct engine *c3 = open_cpu(3);
	char err[512] = "";

	if (got == NULL || e == NULL || c3 == NULL)
		goto out;
	/* 4: chunks of 3 (n_batch 3) and token by token */
	tap_ok(eval_rows(c3, 0, N_TOK, N_TOK, got) == 0 &&
	           same_rows(got, ref, 0, N_TOK),
	       "a prefill in chunks of 3: the one-batch logits");
	engine_truncate(c3, 0);
	tap_ok(eval_rows(c3, 0, N_TOK, 1, got) == 0 &&
	           same_rows(got, ref, 0, N_TOK),
	       "token by token after a truncation to 0: the same logits");

	/* 2: no snapshot at 10: refused, nothing changed */
	eval_rows(e, 0, 20, 20, NULL);
	tap_ok(engine_recurrent(e) && engine_truncate(e, 10) == -1 &&
	           engine_n_past(e) == 20 && engine_rewind_point(e, 10) == 0 &&
	           engine_rewind_point(e, 20) == 20 &&
	           engine_rewind_point(e, 25) == 20,
	       "truncate to 10 without a snapshot: refused (rewind points "
	       "10 -> %d, 20 -> %d)",
	       engine_rewind_point(e, 10), engine_rewind_point(e, 20));
	tap_ok(eval_rows(e, 20, N_TOK, 4, got) == 0 &&
	           same_rows(got, ref, 20, N_TOK),
	       "after the refused truncation: the logits of an engine never "
	       "asked");

	/* 3: snapshots at 8 and 20 */
	engine_truncate(e, 0);
	eval_rows(e, 0, 8, 8, NULL);
	tap_ok(engine_snapshot(e, err, sizeof(err)) == 0, "snapshot at 8 %s",
	       err);
	eval_rows(e, 8, 20, 5, NULL);
	engine_snapshot(e, err, sizeof(err));
	eval_rows(e, 20, N_TOK, N_TOK, NULL);
	tap_ok(engine_rewind_point(e, 19) == 8 &&
	           engine_rewind_point(e, 20) == 20 &&
	           engine_rewind_point(e, 7) == 0,
	       "rewind points with snapshots at 8, 20: 19 -> %d, 20 -> %d, "
	       "7 -> %d",
	       engine_rewind_point(e, 19), engine_rewind_point(e, 20),
	       engine_rewind_point(e, 7));
	tap_ok(engine_truncate(e, 20) == 0 && engine_n_past(e) == 20 &&
	           eval_rows(e, 20, N_TOK, 7, got) == 0 &&
	           same_rows(got, ref, 20, N_TOK),
	       "back to the snapshot at 20, the same tokens: the same logits");
	tap_ok(engine_truncate(e, 8) == 0 && engine_rewind_point(e, 30) == 8 &&
	           eval_rows(e, 8, N_TOK, 32, got) == 0 &&
	           same_rows(got, ref, 8, N_TOK),
	       "back to 8 (the snapshot at 20 dropped): the same logits");
	tap_ok(engine_rewind_point(e, 20) == 8,
	       "the snapshot past the cut is gone: rewind point of 20 is %d",
	       engine_rewind_point(e, 20));
	/* more snapshots than slots: the lowest goes */
	engine_truncate(e, 0);
	for (int i = 0; i < ENGINE_RS_SNAPSHOTS + 1; i++) {
		eval_rows(e, i, i + 1, 1, NULL);
		engine_snapshot(e, err, sizeof(err));
	}
	tap_ok(engine_rewind_point(e, 1) == 0 &&
	           engine_rewind_point(e, 2) == 2 &&
	           engine_rewind_point(e, ENGINE_RS_SNAPSHOTS + 1) ==
	               ENGINE_RS_SNAPSHOTS + 1,
	       "%d snapshots at 1..%d: the one at 1 went (rewind points 1 -> "
	       "%d, 2 -> %d)",
	       ENGINE_RS_SNAPSHOTS + 1, ENGINE_RS_SNAPSHOTS + 1,
	       engine_rewind_point(e, 1), engine_rewind_point(e, 2));
out:
	free(got);
	engine_close(e);
	engine_close(c3);
}

/* Bytes of one copy of every recurrent layer's state (engine.h's state
 * layout: conv then state floats). */
static size_t rs_bytes(void)
{
	size_t n = 0;

	for (int il = 0; il < mdl->cfg.n_layer; il++) {
		struct model_cache_desc d = model_layer_cache(mdl, il);

		n += (size_t)(d.conv_floats + d.state_floats) * sizeof(float);
	}
	return n;
}

/* BUF (N bytes) refused by E with a message naming WHY; E is then an
 * empty sequence whose tokens give REF's logits. */
static void check_bad(struct engine *e, const unsigned char *buf, size_t n,
                      const char *why, const float *ref)
{
	const size_t nv = (size_t)mdl->cfg.n_vocab;
	float *got = calloc((size_t)N_TOK * nv, sizeof(float));
	char err[512] = "";
	int rc = engine_state_load(e, buf, n, err, sizeof(err));

	tap_ok(rc == -1 && strstr(err, why) != NULL && engine_n_past(e) == 0,
	       "a damaged state (%s) refused: %s", why, err);
	tap_ok(got != NULL && eval_rows(e, 0, 10, 10, got) == 0 &&
	           same_rows(got, ref, 0, 10),
	       "then an empty sequence: the fresh engine's logits");
	engine_truncate(e, 0);
	free(got);
}

/* 5. */
static void test_state(const float *ref)
{
	const size_t nv = (size_t)mdl->cfg.n_vocab;
	float *got = calloc((size_t)N_TOK * nv, sizeof(float));
	struct engine *a = open_cpu(0), *b = open_cpu(0);
	unsigned char *st = NULL, *bad = NULL;
	size_t n = 0;
	char err[512] = "";
	uint32_t v = 0;

	if (got == NULL || a == NULL || b == NULL)
		goto out;
	eval_rows(a, 0, 12, 12, NULL);
	engine_snapshot(a, err, sizeof(err));
	eval_rows(a, 12, 30, 18, NULL);
	n = engine_state_size(a);
	st = malloc(n);
	bad = malloc(n);
	if (st == NULL || bad == NULL)
		goto out;
	tap_ok(engine_state_save(a, st, n, err, sizeof(err)) == n, "save %s",
	       err);
	memcpy(&v, st + 4, 4);
	tap_ok(v == 3, "a recurrent model's state is version 3 (%u)", v);
	{
		int rc = engine_state_load(b, st, n, err, sizeof(err));
		int32_t np = engine_n_past(b), rp = engine_rewind_point(b, 20);

		tap_ok(
		    rc == 0 && np == 30 && rp == 12,
		    "loads: n_past %d, its snapshot at 12 kept (rewind point "
		    "of 20: %d) %s",
		    np, rp, err);
	}
	tap_ok(eval_rows(b, 30, N_TOK, 10, got) == 0 &&
	           same_rows(got, ref, 30, N_TOK),
	       "the loaded state's next tokens: the same logits");
	tap_ok(engine_truncate(b, 12) == 0 &&
	           eval_rows(b, 12, N_TOK, 28, got) == 0 &&
	           same_rows(got, ref, 12, N_TOK),
	       "the loaded snapshot at 12: the same logits from there");
	/* damaged: the snapshot's position past n_past, the count, the
	   state cut short (the recurrent part ends it: the live state, the
	   count, one snapshot's position and state) */
	{
		const size_t rb = rs_bytes();
		const size_t at_cnt = n - rb - 16, at_pos = n - rb - 8;
		int32_t v32;

		memcpy(bad, st, n);
		v32 = 35;
		memcpy(bad + at_pos, &v32, 4);
		check_bad(b, bad, n, "position 35", ref);
		memcpy(bad, st, n);
		v32 = 2;
		memcpy(bad + at_cnt, &v32, 4);
		check_bad(b, bad, n, "2 snapshots", ref);
		check_bad(b, st, n - 4, "cut short", ref);
	}
out:
	free(st);
	free(bad);
	free(got);
	engine_close(a);
	engine_close(b);
}

int main(void)
{
	char path[512], cmd[1024], err[512];
	const char *bd = getenv("top_builddir");
	float *ref = NULL;
	struct engine *e;

	if (getenv("PARLEY_TEST_BACKEND") != NULL)
		backend = getenv("PARLEY_TEST_BACKEND");
	snprintf(path, sizeof(path), "/tmp/t_engine_rs_%d.gguf", (int)getpid());
	snprintf(
	    cmd, sizeof(cmd),
	    "%s/tests/parley-mkmodel --arch qwen35 --type F32 --n-vocab 96 "
	    "--n-embd 64 --n-ff 96 --n-layer 4 --n-head 4 --n-head-kv 2 "
	    "--head-dim 16 --n-rot 8 --rope-sections 2,1,1,0 "
	    "--ssm-conv-kernel 4 --ssm-state-size 16 --ssm-group-count 2 "
	    "--ssm-time-step-rank 4 --ssm-inner-size 64 "
	    "--full-attention-interval 2 --out-norm-scale 4 --seed 7 "
	    "-o %s >/dev/null",
	    bd ? bd : ".", path);
	if (!tap_ok(system(cmd) == 0, "parley-mkmodel: a qwen35 model"))
		return tap_done();
	file = gguf_open(path, err, sizeof(err));
	if (!tap_ok(file != NULL &&
	                model_load(file, &mdl, err, sizeof(err)) == 0,
	            "load %s", file ? err : ""))
		goto out;
	for (int i = 0; i < N_TOK; i++)
		toks[i] = (int32_t)((i * 37 + 11) % mdl->cfg.n_vocab);
	test_description();
	ref = calloc((size_t)N_TOK * mdl->cfg.n_vocab, sizeof(float));
	e = open_cpu(0);
	if (ref != NULL && e != NULL &&
	    eval_rows(e, 0, N_TOK, N_TOK, ref) == 0) {
		test_truncation(ref);
		test_state(ref);
	}
	engine_close(e);
out:
	free(ref);
	model_free(mdl);
	gguf_close(file);
	unlink(path);
	return tap_done();
}

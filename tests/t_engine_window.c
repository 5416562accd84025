/*
 * t_engine_window.c - sliding-window layers that keep only their window
 * (engine.h invariant 3) on the CPU engine (or PARLEY_TEST_BACKEND's:
 * cuda on a GPU machine, its caches f16 and q8_0), against the same engine
 * keeping every position (engine_params.window_full), over random-weight
 * models written at test time by tests/parley-mkmodel: gemma3 (window 8
 * on every other layer), gemma4 (sliding and global layers of their own
 * shapes, shared KV), gpt-oss (window 8 with sinks).
 *
 * The ring engine has a chunk of 8 and a slack of 4 (rows: window 8 + 8 +
 * 2 x 4 = 24 of a context of 256), so its rows move down many times. Per
 * model and cache type (f32, f16, q8_0), each check able to fail:
 *   1. 120 ids in chunks of 1 to 29 tokens: every row of logits equal to
 *      the full engine's bit for bit (the same dots over the same keys;
 *      a row read one position off, or a window cut one short, changes
 *      them), the ring's window moved up (win_lo > 0) and its memory
 *      smaller;
 *   1b. 40 decode steps (no row of logits but the last: a GPU's decode
 *      graphs) past another move of the rows: the same logits;
 *   2. a truncation within the slack (3 back) is taken, and the next ids
 *      give the full engine's logits; so is one to the lowest position
 *      whose window the rows hold; one position lower fails,
 *      changes nothing, and engine_rewind_point says 0 for it (the
 *      caller re-evaluates from there: same logits again);
 *   2b. a window snapshot (engine_snapshot) at a position the rows then
 *      leave behind: a truncation there is taken (the snapshot copied
 *      back) and the next ids give the full engine's logits; one a
 *      position above it is refused, engine_rewind_point names it;
 *   3. a saved state holds the window layers' rows from win_lo on (fewer
 *      bytes than the full engine's); it loads into a fresh ring engine,
 *      into a full one, and the full engine's state into a ring one (which
 *      keeps the last rows): each continues with the full engine's
 *      logits. A state whose window layers start past what the next
 *      token reads is refused, naming the position;
 *   4. a context shift that drops positions the window layers still hold
 *      is refused, nothing changed; one below their rows turns the rows'
 *      keys in place and gives the logits of every position's shifted
 *      cache.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "engine_backend.h"
#include "engine_util.h"
#include "gguf.h"
#include "model.h"
#include "tap.h"

#define N_CTX   256
#define N_BATCH 8
#define SLACK   4
#define N_IDS   120

static const struct {
	const char *name;
	const char *args;
} models[] = {
    {"gemma3", "--arch gemma3 --n-head 4 --n-head-kv 1 --head-dim 32 "
               "--sliding-window 8 --sliding-window-pattern 2 "
               "--rope-base-swa 20000"},
    {"gemma4", "--arch gemma4 --n-head 2 --n-head-kv 1 --head-dim 64 "
               "--head-dim-swa 32 --n-layer 4 --sliding-window 8 "
               "--sliding-window-pattern 2 --kv-shared-layers 2"},
    {"gpt-oss", "--arch gpt-oss --n-head 4 --n-head-kv 1 --head-dim 32 "
                "--n-ff 64 --n-expert 8 --n-expert-used 2 --n-ff-exp 32 "
                "--n-layer 2 --sliding-window 8"},
};

/* Write and load a model: parley-mkmodel ARGS (after the shared ones)
 * into PATH. 0 or -1. */
static int make_model(const char *args, const char *path, struct gguf_file **f,
                      struct model **m)
{
	char a[1024];

	snprintf(a, sizeof(a),
	         "--type F32 --n-vocab 300 --n-embd 128 --n-ff 256 --n-layer 3 "
	         "--n-ctx %d --seed 7 %s",
	         N_CTX, args);
	return eu_mkmodel(a, path, f, m);
}

static const char *backend = "cpu"; /* PARLEY_TEST_BACKEND */

/* An engine on M: the window only (RING) or every position. */
static struct engine *open_engine(const struct model *m, bool ring,
                                  enum engine_kv_type kt)
{
	struct engine_params p = {0};
	struct engine *e = NULL;
	char err[512];

	p.backend = backend;
	p.n_ctx = N_CTX;
	p.n_threads = 2;
	p.n_batch = N_BATCH;
	p.kv_type = kt;
	p.window_full = !ring;
	p.window_slack = SLACK;
	if (engine_open(m, &p, &e, err, sizeof(err)) != 0) {
		tap_diag("engine_open: %s", err);
		return NULL;
	}
	return e;
}

/* IDS[0, n) into A and B in the same chunks (sizes from CHUNKS,
 * cycled) with eval FLAGS, the rows of logits each keeps compared (every
 * row with ENGINE_EVAL_ALL, else the last): the first chunk whose rows
 * differ, or -1 when none did (-2: an eval failed). */
static int same_chunks(struct engine *a, struct engine *b, const int32_t *ids,
                       int32_t n, const int32_t *chunks, int n_chunks,
                       unsigned flags)
{
	char err[256];
	int32_t nv = engine_n_vocab(a);

	for (int32_t i = 0, c = 0; i < n; c++) {
		int32_t k = chunks[c % n_chunks];

		if (k > n - i)
			k = n - i;
		if (engine_eval(a, ids + i, k, flags, err, sizeof(err)) != 0 ||
		    engine_eval(b, ids + i, k, flags, err, sizeof(err)) != 0) {
			tap_diag("eval: %s", err);
			return -2;
		}
		if (memcmp(engine_logits(a), engine_logits(b),
		           (size_t)(flags & ENGINE_EVAL_ALL ? k : 1) * nv *
		               sizeof(float)) != 0)
			return c;
		i += k;
	}
	return -1;
}

/* same_chunks with every row of logits. */
static int same_evals(struct engine *a, struct engine *b, const int32_t *ids,
                      int32_t n, const int32_t *chunks, int n_chunks)
{
	return same_chunks(a, b, ids, n, chunks, n_chunks, ENGINE_EVAL_ALL);
}

/* IDS[0, n) one decode step each (the last row's logits only: a GPU's
 * captured decode graphs): the first step whose logits differ, or -1. */
static int same_steps(struct engine *a, struct engine *b, const int32_t *ids,
                      int32_t n)
{
	static const int32_t one[] = {1};

	return same_chunks(a, b, ids, n, one, 1, 0);
}

/* E's state, a new buffer of *LEN bytes, or NULL. */
static char *save(struct engine *e, size_t *len)
{
	char err[256];
	char *buf;

	*len = engine_state_size(e);
	buf = malloc(*len);
	if (buf != NULL &&
	    engine_state_save(e, buf, *len, err, sizeof(err)) != *len) {
		tap_diag("save: %s", err);
		free(buf);
		return NULL;
	}
	return buf;
}

static const int32_t chunks_a[] = {13, 1, 1, 29, 7, 1, 8, 2, 17, 1};
static const int32_t chunks_b[] = {1, 5, 1, 1, 3};

static void check(const struct model *m, const char *name,
                  enum engine_kv_type kt)
{
	const char *tn = engine_kv_type_name(kt);
	struct engine *r = open_engine(m, true, kt);
	struct engine *f = open_engine(m, false, kt);
	struct engine *r2 = NULL, *f2 = NULL;
	int32_t ids[N_IDS + 40], np;
	char *sr = NULL, *sf = NULL, err[256];
	size_t lr = 0, lf = 0;
	int c;

	if (!tap_ok(r != NULL && f != NULL, "%s %s: engines open", name, tn))
		goto out;
	for (int i = 0; i < N_IDS + 40; i++)
		ids[i] = (int32_t)((i * 37 + 11) % 300);
	/* 1 */
	c = same_evals(r, f, ids, N_IDS, chunks_a,
	               sizeof(chunks_a) / sizeof(chunks_a[0]));
	tap_ok(c == -1 && r->win_lo > 0 && r->win_cap == 24 &&
	           engine_window_rows(r) == 24 && engine_window_rows(f) == 0 &&
	           engine_mem_bytes(r) < engine_mem_bytes(f),
	       "%s %s: %d ids, the window only (rows from %d, %d rows) and "
	       "every position give the same logits (first differing chunk "
	       "%d); memory %zu < %zu",
	       name, tn, N_IDS, r->win_lo, r->win_cap, c, engine_mem_bytes(r),
	       engine_mem_bytes(f));
	/* 1b */
	{
		const int32_t lo = r->win_lo;

		c = same_steps(r, f, ids + 7, 40);
		tap_ok(c == -1 && r->win_lo > lo,
		       "%s %s: 40 decode steps (rows from %d, then %d): the "
		       "same logits (first differing step %d)",
		       name, tn, lo, r->win_lo, c);
	}
	/* 2 */
	np = engine_n_past(r);
	tap_ok(engine_truncate(r, np - 3) == 0 &&
	           engine_truncate(f, np - 3) == 0 &&
	           same_evals(r, f, ids + 100, 9, chunks_b, 5) == -1,
	       "%s %s: truncated 3 back (within the slack): the same logits",
	       name, tn);
	{
		/* the lowest position the rows still serve: win_lo + the
		   window - 1 before it; one lower is refused */
		const int32_t k = r->win_lo + r->win_need;

		np = engine_n_past(r);
		tap_ok(engine_truncate(r, k - 1) != 0 &&
		           engine_n_past(r) == np &&
		           engine_rewind_point(r, k - 1) == 0 &&
		           engine_rewind_point(r, k) == k &&
		           engine_truncate(r, k) == 0 &&
		           engine_truncate(f, k) == 0 &&
		           same_evals(r, f, ids + 30, 11, chunks_b, 5) == -1,
		       "%s %s: truncated to %d (the rows' first window), not "
		       "to %d: the same logits",
		       name, tn, k, k - 1);
	}
	np = engine_n_past(r);
	tap_ok(engine_truncate(r, 20) != 0 && engine_n_past(r) == np &&
	           engine_rewind_point(r, 20) == 0 &&
	           engine_rewind_point(r, np - 1) == np - 1,
	       "%s %s: a truncation to 20 (rows from %d) fails, nothing "
	       "changed; rewind point 0",
	       name, tn, r->win_lo);
	/* (both from 0 again, in the same chunk: a GPU's product of a chunk
	   of 20 is not one of its chunks of 13, 1 and 1) */
	tap_ok(engine_truncate(r, 0) == 0 && engine_truncate(f, 0) == 0 &&
	           engine_eval(r, ids, 20, 0, err, sizeof(err)) == 0 &&
	           engine_eval(f, ids, 20, 0, err, sizeof(err)) == 0 &&
	           same_evals(r, f, ids + 20, 20, chunks_b, 5) == -1,
	       "%s %s: from 0 again: the logits of a full cache evaluated "
	       "again there",
	       name, tn);
	/* 2b: a window snapshot at 40, 30 more ids (past the rows), back to
	   it: the logits of the full cache cut back there; 41 and 39 are
	   out of reach (rewind points 40 and 0) */
	{
		const bool snap =
		    engine_snapshot(r, err, sizeof(err)) == 0 &&
		    same_evals(r, f, ids + 40, 30, chunks_b, 5) == -1;
		const int32_t lo = r->win_lo;
		const bool past =
		    lo > 40 - r->win_need && engine_rewind_point(r, 45) == 40 &&
		    engine_truncate(r, 41) != 0 && engine_n_past(r) == 70;
		const bool back =
		    engine_truncate(r, 40) == 0 &&
		    r->win_lo == 40 - r->win_need &&
		    engine_truncate(f, 40) == 0 &&
		    same_evals(r, f, ids + 40, 30, chunks_a, 3) == -1;

		tap_ok(
		    snap && past && back,
		    "%s %s: a window snapshot at 40 (the rows then from %d): "
		    "truncated back to it, the same logits; not to 41",
		    name, tn, lo);
		tap_ok(engine_truncate(r, 40) == 0 &&
		           engine_truncate(f, 40) == 0 &&
		           engine_truncate(r, 39) != 0 &&
		           engine_rewind_point(r, 39) == 0,
		       "%s %s: nor to 39, below the snapshot: rewind point 0",
		       name, tn);
	}
	/* 3 (both at 40 positions, the ring's rows from win_lo on) */
	same_evals(r, f, ids + 40, 30, chunks_a, 3);
	sr = save(r, &lr);
	sf = save(f, &lf);
	if (!tap_ok(sr != NULL && sf != NULL && lr < lf,
	            "%s %s: states saved (%zu bytes, every position %zu)", name,
	            tn, lr, lf))
		goto out;
	r2 = open_engine(m, true, kt);
	f2 = open_engine(m, false, kt);
	tap_ok(r2 && f2 &&
	           engine_state_load(r2, sr, lr, err, sizeof(err)) == 0 &&
	           engine_state_load(f2, sf, lf, err, sizeof(err)) == 0 &&
	           same_evals(r2, f2, ids + 70, 30, chunks_b, 5) == -1,
	       "%s %s: a ring's state loaded into a ring engine continues as "
	       "the full one",
	       name, tn);
	tap_ok(engine_state_load(f2, sr, lr, err, sizeof(err)) == 0 &&
	           engine_state_load(r2, sf, lf, err, sizeof(err)) == 0 &&
	           r2->win_lo > 0 &&
	           same_evals(r2, f2, ids + 50, 30, chunks_b, 5) == -1,
	       "%s %s: crossed (ring's into every position's, every "
	       "position's into a ring, which keeps from %d): the same "
	       "logits",
	       name, tn, r2->win_lo);
	{
		/* the first window layer's record (after the 32-byte
		   header, 32 bytes a layer, pos0 at 16): one position past
		   what the next token reads */
		char *bad = malloc(lr);
		int32_t pos0 = 0;

		for (int il = 0; bad && il < m->cfg.n_layer; il++)
			if (model_layer_cache(m, il).kind ==
			    MODEL_CACHE_WINDOW) {
				memcpy(bad, sr, lr);
				memcpy(&pos0, bad + 16, 4); /* n_past */
				pos0 = pos0 - r->win_need + 1;
				memcpy(bad + 32 + (size_t)il * 32 + 16, &pos0,
				       4);
				break;
			}
		err[0] = '\0';
		tap_ok(bad != NULL &&
		           engine_state_load(r2, bad, lr, err, sizeof(err)) !=
		               0 &&
		           strstr(err, "sliding-window") != NULL &&
		           engine_n_past(r2) == 0,
		       "%s %s: a state whose window starts at %d is refused: "
		       "%s",
		       name, tn, pos0, err);
		free(bad);
	}
	/* 4 (the states of check 3 again) */
	if (engine_state_load(r2, sr, lr, err, sizeof(err)) == 0 &&
	    engine_state_load(f2, sf, lf, err, sizeof(err)) == 0) {
		const int32_t lo = r2->win_lo, d = 6;

		np = engine_n_past(r2);
		err[0] = '\0';
		tap_ok(lo > d &&
		           engine_kv_shift(r2, lo - d + 1, d, err,
		                           sizeof(err)) != 0 &&
		           strstr(err, "sliding-window") &&
		           engine_n_past(r2) == np && r2->win_lo == lo,
		       "%s %s: no shift of %d..%d+%d while the window layers "
		       "keep positions from %d: %s",
		       name, tn, lo - d + 1, lo - d + 1, d, lo, err);
		tap_ok(engine_kv_shift(r2, lo - d, d, err, sizeof(err)) == 0 &&
		           engine_kv_shift(f2, lo - d, d, err, sizeof(err)) ==
		               0 &&
		           r2->win_lo == lo - d &&
		           same_evals(r2, f2, ids + 10, 20, chunks_b, 5) == -1,
		       "%s %s: a shift of %d..%d+%d (below the window layers' "
		       "rows): the logits of every position's shifted cache",
		       name, tn, lo - d, lo - d, d);
	} else {
		tap_ok(0, "%s %s: the states again: %s", name, tn, err);
	}
out:
	free(sr);
	free(sf);
	engine_close(r);
	engine_close(f);
	engine_close(r2);
	engine_close(f2);
}

int main(void)
{
	char dir[] = "/tmp/t_engine_window.XXXXXX";

	if (getenv("PARLEY_TEST_BACKEND") != NULL)
		backend = getenv("PARLEY_TEST_BACKEND");
	if (mkdtemp(dir) == NULL)
		return tap_skip_all("mkdtemp failed");
	for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++) {
		char path[600];
		struct gguf_file *f = NULL;
		struct model *m = NULL;

		snprintf(path, sizeof(path), "%s/m%zu.gguf", dir, i);
		if (tap_ok(make_model(models[i].args, path, &f, &m) == 0,
		           "%s: parley-mkmodel", models[i].name)) {
			if (strcmp(backend, "cpu") == 0) /* (GPU: f16, q8_0) */
				check(m, models[i].name, ENGINE_KV_F32);
			check(m, models[i].name, ENGINE_KV_F16);
			check(m, models[i].name, ENGINE_KV_Q8_0);
		}
		model_free(m);
		gguf_close(f);
		remove(path);
	}
	rmdir(dir);
	return tap_done();
}

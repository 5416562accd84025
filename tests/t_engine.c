/*
 * t_engine.c - the engine's own invariants on random-weight models
 * (the .gguf files under tests/data/engine), independent of any oracle:
 *   - a prefill of N tokens gives the same logits as N one-token decode
 *     steps, and as prefill in chunks (n_batch smaller than N);
 *   - truncate + re-evaluate gives the same logits as never having gone
 *     further; state save + restore (into the same or a fresh engine)
 *     gives the same logits as never having stopped;
 *   - errors: tokens out of range, context full, bad states, unknown
 *     backend, unsupported architecture, missing / misshapen tensors; a
 *     failed call leaves n_past unchanged;
 *   - the trace: per-layer statistics and top-k of the last step, JSON.
 * "Same" is bit-identical here: the CPU backend computes each token's row
 * with the same operations in the same order however tokens are batched,
 * so any difference is a bug (a tolerance would hide a position mix-up).
 */
#include <math.h>
#include <unistd.h>

#include "cmd.h"
#include "engine.h"
#include "engine_util.h"
#include "gguf.h"
#include "gguf_write.h"
#include "model.h"
#include "tap.h"
#include "trace.h"

#define N 24

/* Open model NAME from tests/data/engine; NULL on failure. */
static struct model *open_model(const char *name, struct gguf_file **f)
{
	char path[1024], err[512];
	struct model *m = NULL;

	eu_data_path(name, ".gguf", path, sizeof(path));
	*f = gguf_open(path, err, sizeof(err));
	if (*f == NULL || model_load(*f, &m, err, sizeof(err)) != 0) {
		tap_diag("%s: %s", name, err);
		return NULL;
	}
	return m;
}

/* A new engine with N_BATCH (0 default) and N_THREADS. */
static struct engine *open_engine(const struct model *m, int n_batch,
                                  int n_threads)
{
	struct engine_params p = {0};
	struct engine *e = NULL;
	char err[512];

	p.n_ctx = 64;
	p.n_batch = n_batch;
	p.n_threads = n_threads;
	if (engine_open(m, &p, &e, err, sizeof(err)) != 0)
		tap_diag("engine_open: %s", err);
	return e;
}

/* Largest |a - b| over n. */
static double maxdiff(const float *a, const float *b, size_t n)
{
	double mx = 0;

	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - b[i]);

		if (d > mx || isnan(d))
			mx = isnan(d) ? INFINITY : d;
	}
	return mx;
}

/*
 * The state's versions (engine.h): the version 2 state ST (SSZ bytes, 16
 * positions) rewritten as version 1 (its 40-byte header, then the same
 * K/V) loads into C and continues as the original does (ROW: the logits
 * of token TOK at position 16); a layer record that is not this model's
 * cache is refused naming the layer, an unknown version by its number.
 */
static void check_state_versions(struct engine *c, const struct model *m,
                                 void *st, size_t ssz, const float *row,
                                 int32_t tok, const char *name)
{
	const struct model_attn *a = &m->w.layers[0].attn;
	size_t rec = 32 + 32 * (size_t)m->cfg.n_layer, kvn = ssz - rec;
	int32_t v1h[8] = {0x564b5250,     1,
	                  m->cfg.n_layer, a->n_head_kv,
	                  a->head_dim_k,  a->head_dim_v,
	                  m->cfg.n_vocab, 16};
	uint64_t kvb = kvn;
	unsigned char *v1 = malloc(40 + kvn), *bytes = st;
	char err[512] = "";
	int32_t kdim;

	memcpy(v1, v1h, 32);
	memcpy(v1 + 32, &kvb, 8);
	memcpy(v1 + 40, bytes + rec, kvn);
	engine_truncate(c, 0);
	if (m->cfg.features & (MODEL_FEAT_ATTN_SLIDING | MODEL_FEAT_KV_SHARED |
	                       MODEL_FEAT_LAYER_SHAPES)) {
		/* version 1 describes one full cache shape of every layer */
		tap_ok(engine_state_load(c, v1, 40 + kvn, err, sizeof(err)) ==
		               -1 &&
		           strstr(err, "version 1") != NULL,
		       "%s: a version 1 state refused (layers differ): %s",
		       name, err);
		goto records;
	}
	tap_ok(engine_state_load(c, v1, 40 + kvn, err, sizeof(err)) == 0 &&
	           engine_n_past(c) == 16 &&
	           engine_eval(c, &tok, 1, 0, err, sizeof(err)) == 0 &&
	           maxdiff(row, engine_logits(c), m->cfg.n_vocab) == 0,
	       "%s: a version 1 state loads and continues exactly %s", name,
	       err);
	v1h[3] += 1; /* another head count */
	memcpy(v1, v1h, 32);
	tap_ok(engine_state_load(c, v1, 40 + kvn, err, sizeof(err)) == -1 &&
	           strstr(err, "version 1") != NULL,
	       "%s: a version 1 state of another shape refused: %s", name, err);
records:
	free(v1);
	memcpy(&kdim, bytes + 32 + 32 + 8, 4); /* layer 1's k_dim */
	kdim += 1;
	memcpy(bytes + 32 + 32 + 8, &kdim, 4);
	tap_ok(engine_state_load(c, st, ssz, err, sizeof(err)) == -1 &&
	           strstr(err, "layer 1 cache") != NULL,
	       "%s: a layer record of another cache refused: %s", name, err);
	kdim -= 1;
	memcpy(bytes + 32 + 32 + 8, &kdim, 4);
	bytes[4] = 3;
	tap_ok(engine_state_load(c, st, ssz, err, sizeof(err)) == -1 &&
	           strstr(err, "version 3") != NULL,
	       "%s: an unknown version refused: %s", name, err);
	bytes[4] = 2;
}

/* Prefill vs decode vs chunked prefill, truncate, state. */
static void check_consistency(const char *name)
{
	struct gguf_file *f;
	struct model *m = open_model(name, &f);
	struct engine *a, *b, *c;
	int32_t toks[N], alt[8];
	float *pre, *dec;
	size_t nv, ssz;
	char err[512];
	void *st;
	double d;

	if (!tap_ok(m != NULL, "%s: model loads", name))
		return;
	nv = (size_t)m->cfg.n_vocab;
	for (int i = 0; i < N; i++)
		toks[i] = (int32_t)((i * 37 + 11) % m->cfg.n_vocab);
	for (int i = 0; i < 8; i++)
		alt[i] = (int32_t)((i * 53 + 5) % m->cfg.n_vocab);
	pre = malloc(N * nv * sizeof(float));
	dec = malloc(N * nv * sizeof(float));
	a = open_engine(m, 0, 2);
	b = open_engine(m, 5, 1);
	c = open_engine(m, 0, 2);

	/* prefill of N (one chunk) vs N decode steps vs chunks of 5 */
	engine_eval(a, toks, N, ENGINE_EVAL_ALL, err, sizeof(err));
	memcpy(pre, engine_logits(a), N * nv * sizeof(float));
	for (int i = 0; i < N; i++) {
		engine_eval(c, &toks[i], 1, 0, err, sizeof(err));
		memcpy(dec + i * nv, engine_logits(c), nv * sizeof(float));
	}
	d = maxdiff(pre, dec, N * nv);
	tap_ok(d == 0, "%s: prefill of %d == %d decode steps (max |d| %g)",
	       name, N, N, d);
	/* every output has one owner thread doing the same operations, so
	 * the thread count changes no bit (backend_cpu.c) */
	for (int nt = 1; nt <= 3; nt += 2) {
		struct engine *t = open_engine(m, 0, nt);

		d = t == NULL ? INFINITY : 0;
		for (int i = 0; t != NULL && i < N; i++) {
			double di;

			engine_eval(t, &toks[i], 1, 0, err, sizeof(err));
			di = maxdiff(dec + i * nv, engine_logits(t), nv);
			d = di > d ? di : d;
		}
		tap_ok(d == 0,
		       "%s: %d decode steps with %d thread%s == with 2 "
		       "(max |d| %g)",
		       name, N, nt, nt > 1 ? "s" : "", d);
		engine_close(t);
	}
	engine_eval(b, toks, N, ENGINE_EVAL_ALL, err, sizeof(err));
	d = maxdiff(pre, engine_logits(b), N * nv);
	tap_ok(d == 0,
	       "%s: prefill in chunks of 5 (1 thread) == one chunk "
	       "(2 threads) (max |d| %g)",
	       name, d);
	engine_eval(b, toks, 1, 0, err, sizeof(err)); /* pos N */
	tap_ok(engine_n_past(b) == N + 1, "%s: n_past %d after N+1", name,
	       engine_n_past(b));

	/* truncate + re-evaluate */
	tap_ok(engine_truncate(a, 10) == 0 && engine_n_past(a) == 10,
	       "%s: truncate to 10", name);
	engine_eval(a, toks + 10, N - 10, ENGINE_EVAL_ALL, err, sizeof(err));
	d = maxdiff(pre + 10 * nv, engine_logits(a), (N - 10) * nv);
	tap_ok(d == 0,
	       "%s: truncate(10) + re-eval == never went further "
	       "(max |d| %g)",
	       name, d);
	engine_truncate(a, 12);
	engine_eval(a, alt, 8, 0, err, sizeof(err));
	engine_truncate(a, 12);
	engine_eval(a, toks + 12, 1, 0, err, sizeof(err));
	d = maxdiff(pre + 12 * nv, engine_logits(a), nv);
	tap_ok(d == 0,
	       "%s: other tokens after 12, truncate, re-eval (max "
	       "|d| %g)",
	       name, d);
	tap_ok(engine_truncate(a, 14) == -1 && engine_n_past(a) == 13,
	       "%s: truncate beyond n_past refused", name);

	/* state save at 16, continue, restore into same and fresh engine */
	engine_eval(a, toks + 13, 3, 0, err, sizeof(err));
	ssz = engine_state_size(a);
	st = malloc(ssz);
	tap_ok(engine_state_save(a, st, ssz, err, sizeof(err)) == ssz,
	       "%s: state save (%zu bytes)", name, ssz);
	tap_ok(engine_state_save(a, st, ssz - 1, err, sizeof(err)) == 0,
	       "%s: short buffer refused: %s", name, err);
	engine_eval(a, alt, 8, 0, err, sizeof(err));
	tap_ok(engine_state_load(a, st, ssz, err, sizeof(err)) == 0 &&
	           engine_n_past(a) == 16,
	       "%s: state restore", name);
	engine_eval(a, toks + 16, N - 16, ENGINE_EVAL_ALL, err, sizeof(err));
	d = maxdiff(pre + 16 * nv, engine_logits(a), (N - 16) * nv);
	tap_ok(d == 0, "%s: restored state continues exactly (max |d| %g)",
	       name, d);
	engine_truncate(c, 0);
	tap_ok(engine_state_load(c, st, ssz, err, sizeof(err)) == 0,
	       "%s: state into a second engine", name);
	engine_eval(c, toks + 16, 1, 0, err, sizeof(err));
	d = maxdiff(pre + 16 * nv, engine_logits(c), nv);
	tap_ok(d == 0, "%s: second engine continues exactly (max |d| %g)", name,
	       d);
	((unsigned char *)st)[0] ^= 1;
	tap_ok(engine_state_load(c, st, ssz, err, sizeof(err)) == -1 &&
	           engine_n_past(c) == 0,
	       "%s: bad magic refused: %s", name, err);
	((unsigned char *)st)[0] ^= 1;
	tap_ok(engine_state_load(c, st, ssz - 4, err, sizeof(err)) == -1,
	       "%s: truncated state refused: %s", name, err);
	check_state_versions(c, m, st, ssz, pre + 16 * nv, toks[16], name);

	/* errors leave n_past unchanged */
	{
		int32_t bad = m->cfg.n_vocab;
		int32_t n_past = engine_n_past(a);
		int32_t many[64] = {0};

		tap_ok(engine_eval(a, &bad, 1, 0, err, sizeof(err)) == -1 &&
		           engine_n_past(a) == n_past,
		       "%s: token out of range refused: %s", name, err);
		tap_ok(engine_eval(a, many, 64 - n_past + 1, 0, err,
		                   sizeof(err)) == -1 &&
		           engine_n_past(a) == n_past,
		       "%s: context overflow refused: %s", name, err);
		tap_ok(engine_eval(a, many, 0, 0, err, sizeof(err)) == -1,
		       "%s: empty eval refused", name);
	}
	free(st);
	free(pre);
	free(dec);
	engine_close(a);
	engine_close(b);
	engine_close(c);
	model_free(m);
	gguf_close(f);
}

/* The trace: stats per layer, top-k, JSON. */
static void check_trace(void)
{
	struct gguf_file *f;
	struct model *m = open_model("qwen2_f32_gqa7", &f);
	struct engine *e = m ? open_engine(m, 0, 1) : NULL;
	char err[512], buf[8192];
	FILE *tmp = tmpfile();
	struct trace *t;
	int32_t toks[3] = {1, 2, 3};
	int ok = 1;

	if (!tap_ok(e != NULL && tmp != NULL, "trace: setup"))
		return;
	t = trace_new(m->cfg.n_layer, 5, tmp);
	engine_set_trace(e, t);
	engine_eval(e, toks, 3, 0, err, sizeof(err));
	engine_eval(e, toks, 1, 0, err, sizeof(err));
	for (int il = 0; il < m->cfg.n_layer; il++)
		ok &= isfinite(t->layers[il].rms) && t->layers[il].rms > 0 &&
		      t->layers[il].min <= t->layers[il].mean &&
		      t->layers[il].mean <= t->layers[il].max;
	tap_ok(ok, "trace: layer stats finite and ordered (layer 0 rms %g)",
	       (double)t->layers[0].rms);
	tap_ok(t->top_id[0] == eu_argmax(engine_logits(e), m->cfg.n_vocab) &&
	           t->top_logit[0] >= t->top_logit[4] && t->top_prob[0] > 0 &&
	           t->top_prob[0] <= 1,
	       "trace: top-1 %d is the argmax, p=%.3f, entropy %.3f",
	       t->top_id[0], (double)t->top_prob[0], (double)t->entropy);
	tap_ok(t->step == 2 && t->pos == 3 && t->n_tokens == 1,
	       "trace: step %lld pos %d", (long long)t->step, t->pos);
	rewind(tmp);
	buf[fread(buf, 1, sizeof(buf) - 1, tmp)] = '\0';
	tap_ok(strstr(buf, "{\"step\":0,\"pos\":2,\"n_tokens\":3") != NULL &&
	           strstr(buf, "{\"step\":1,\"pos\":3,") != NULL &&
	           strstr(buf, "\"layers\":[{\"min\":") != NULL,
	       "trace: two JSON lines");
	engine_set_trace(e, NULL);
	trace_free(t);
	fclose(tmp);
	engine_close(e);
	model_free(m);
	gguf_close(f);
}

/* Copy SRC to a temp file, dropping DROP, renaming arch, resizing one. */
static int write_variant(const struct gguf_file *src, const char *path,
                         const char *drop, const char *arch, const char *shrink,
                         const char *extra)
{
	struct gguf_writer *w = gguf_writer_new();
	char err[512];
	int rc;

	for (uint64_t i = 0; i < src->n_kv; i++) {
		if (arch && strcmp(src->kv[i].key, "general.architecture") == 0)
			gguf_writer_set_str(w, "general.architecture", arch);
		else
			gguf_writer_copy_kv(w, &src->kv[i]);
	}
	for (uint64_t i = 0; i < src->n_tensors; i++) {
		const struct gguf_tensor *t = &src->tensors[i];
		uint64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};

		if (drop && strcmp(t->name, drop) == 0)
			continue;
		if (shrink && strcmp(t->name, shrink) == 0)
			ne[1] -= 1;
		gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, ne,
		                       t->data, NULL, NULL);
		/* EXTRA: one more tensor, a copy of the layer's first norm */
		if (extra && strcmp(t->name, "blk.1.attn_norm.weight") == 0)
			gguf_writer_add_tensor(w, extra, t->type, t->n_dims, ne,
			                       t->data, NULL, NULL);
	}
	rc = gguf_writer_write(w, path, err, sizeof(err));
	if (rc)
		tap_diag("%s", err);
	gguf_writer_free(w);
	return rc;
}

/*
 * qwen35 files (tests/data/engine/qwen35_*): the description (recurrent
 * layers, gated attention, the MTP block after the layers skipped); a
 * recurrent layer's tensor missing or misshapen is named; a recurrent
 * tensor in a file of an architecture without such layers is refused.
 */
static void check_qwen35_errors(void)
{
	char path[1024], err[512];
	struct gguf_file *src, *q3 = NULL, *f;
	struct model *m = open_model("qwen35_q8_0", &src);
	struct model *m3 = open_model("qwen3_f32", &q3);
	const char *tmpdir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	struct {
		struct gguf_file *src;
		const char *drop, *shrink, *extra, *expect;
	} cases[] = {
	    {src, "blk.1.ssm_a", NULL, NULL, "missing tensor blk.1.ssm_a"},
	    {src, "blk.2.attn_gate.weight", NULL, NULL,
	     "missing tensor blk.2.attn_gate.weight"},
	    {src, NULL, "blk.0.ssm_conv1d.weight", NULL,
	     "tensor blk.0.ssm_conv1d.weight has shape"},
	    {src, NULL, "blk.3.attn_q.weight", NULL,
	     "tensor blk.3.attn_q.weight has shape"},
	    {q3, NULL, NULL, "blk.1.ssm_conv1d.weight",
	     "tensor blk.1.ssm_conv1d.weight: architecture qwen3 has no "
	     "recurrent (linear attention) layers"},
	};

	tap_ok(m != NULL && m->cfg.n_layer == 4 && m->cfg.n_nextn == 1 &&
	           m->cfg.n_recurrent == 3 &&
	           m->w.layers[0].attn.kind == MODEL_ATTN_RECURRENT &&
	           m->w.layers[3].attn.kind == MODEL_ATTN_FULL &&
	           m->w.layers[3].attn.gated &&
	           m->w.layers[0].ssm.n_v_heads == 6 &&
	           m->w.layers[0].ssm.n_k_heads == 2 &&
	           model_layer_cache(m, 0).kind == MODEL_CACHE_RECURRENT &&
	           (m->cfg.features & MODEL_FEAT_RECURRENT),
	       "qwen35 description: 4 layers of 5 blocks (one MTP block "
	       "skipped), 0-2 recurrent (6 value heads on 2), 3 gated "
	       "attention");
	model_free(m);
	model_free(m3);
	snprintf(path, sizeof(path), "%s/t_engine_q35_%d.gguf", tmpdir,
	         (int)getpid());
	for (size_t k = 0;
	     src != NULL && q3 != NULL && k < sizeof(cases) / sizeof(cases[0]);
	     k++) {
		int rc = -1;

		err[0] = '\0';
		m = NULL;
		if (write_variant(cases[k].src, path, cases[k].drop, NULL,
		                  cases[k].shrink, cases[k].extra) == 0) {
			f = gguf_open(path, err, sizeof(err));
			if (f != NULL) {
				rc = model_load(f, &m, err, sizeof(err));
				model_free(m);
				gguf_close(f);
			}
		}
		tap_ok(rc == -1 && strstr(err, cases[k].expect) != NULL,
		       "qwen35 file error names it: %s", err);
	}
	unlink(path);
	gguf_close(src);
	gguf_close(q3);
}

/*
 * A gemma3 file (tests/data/engine/gemma3_f32_swa): a required tensor of
 * its features missing or misshapen is named with its expected shape; a
 * multimodal projector (architecture clip) says what it is; vision
 * tensors beside the text model are counted, the text model loads.
 */
static void check_gemma_errors(void)
{
	char path[1024], err[512];
	struct gguf_file *src, *f;
	struct model *m = open_model("gemma3_f32_swa", &src);
	const char *tmpdir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	struct {
		const char *drop, *arch, *shrink, *extra, *expect;
	} cases[] = {
	    {"blk.0.attn_q_norm.weight", NULL, NULL, NULL,
	     "missing tensor blk.0.attn_q_norm.weight"},
	    {"blk.1.post_ffw_norm.weight", NULL, NULL, NULL,
	     "missing tensor blk.1.post_ffw_norm.weight"},
	    {NULL, NULL, "blk.1.attn_output.weight", NULL,
	     "tensor blk.1.attn_output.weight has shape"},
	    {NULL, "clip", NULL, NULL,
	     "is a multimodal projector (mmproj, architecture \"clip\"): "
	     "parley runs the text model only"},
	    {NULL, NULL, NULL, "v.blk.0.attn_q.weight", NULL},
	};

	tap_ok(m != NULL && (m->cfg.features & MODEL_FEAT_ATTN_SLIDING) &&
	           m->cfg.n_ropes == 2 && m->cfg.embd_scale > 0.0f &&
	           m->w.layers[0].attn.kind == MODEL_ATTN_SLIDING &&
	           m->w.layers[0].attn.rope == 1 &&
	           m->w.layers[2].attn.kind == MODEL_ATTN_FULL &&
	           m->w.layers[0].ffn.act == MODEL_ACT_GELU_TANH &&
	           m->cfg.n_vision_tensors == 0,
	       "gemma3 description: sliding layers 0-1, global 2, two RoPE "
	       "classes, GELU, embedding scale");
	model_free(m);
	snprintf(path, sizeof(path), "%s/t_engine_g_%d.gguf", tmpdir,
	         (int)getpid());
	for (size_t k = 0; src != NULL && k < sizeof(cases) / sizeof(cases[0]);
	     k++) {
		int rc = -1;

		err[0] = '\0';
		m = NULL;
		if (write_variant(src, path, cases[k].drop, cases[k].arch,
		                  cases[k].shrink, cases[k].extra) == 0) {
			f = gguf_open(path, err, sizeof(err));
			if (f != NULL) {
				rc = model_load(f, &m, err, sizeof(err));
				if (rc == 0 && cases[k].expect == NULL)
					tap_ok(
					    m->cfg.n_vision_tensors == 1,
					    "a vision tensor beside the text "
					    "model: loads, counted (%d)",
					    m->cfg.n_vision_tensors);
				model_free(m);
				gguf_close(f);
			}
		}
		if (cases[k].expect != NULL)
			tap_ok(rc == -1 && strstr(err, cases[k].expect) != NULL,
			       "gemma3 file error names it: %s", err);
		else if (rc != 0)
			tap_ok(0, "a vision tensor beside the text model: %s",
			       err);
	}
	unlink(path);
	gguf_close(src);
}

/* Load a variant of SRC (write_variant's DROP, SHRINK, EXTRA); returns
 * model_load's code, its message in ERR. */
static int load_variant(const struct gguf_file *src, const char *drop,
                        const char *shrink, const char *extra, char *err,
                        size_t errlen)
{
	const char *tmpdir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char path[1024];
	struct gguf_file *f;
	struct model *m = NULL;
	int rc = -1;

	snprintf(path, sizeof(path), "%s/t_engine_g4_%d.gguf", tmpdir,
	         (int)getpid());
	err[0] = '\0';
	if (write_variant(src, path, drop, NULL, shrink, extra) == 0) {
		f = gguf_open(path, err, errlen);
		if (f != NULL) {
			rc = model_load(f, &m, err, errlen);
			model_free(m);
			gguf_close(f);
		}
	}
	unlink(path);
	return rc;
}

/*
 * gemma4 files (tests/data/engine/gemma4_*, gen_arch.py): the description
 * (sliding layers' heads, keys as values, shared KV with no cache of its
 * own, the mixture beside a dense MLP, per-layer inputs); a missing or
 * misshapen tensor of each feature named; a gemma4 tensor in a gemma3
 * file refused by name.
 */
static void check_gemma4(void)
{
	struct gguf_file *d, *mo, *ef, *g3;
	struct model *md = open_model("gemma4_f32", &d);
	struct model *mm = open_model("gemma4_moe_f32", &mo);
	struct model *me = open_model("gemma4_e_f32", &ef);
	struct model *m3 = open_model("gemma3_f32_swa", &g3);
	char err[512];
	struct {
		const struct gguf_file *src;
		const char *drop, *shrink, *extra, *expect;
	} cases[] = {
	    {d, "blk.0.attn_v.weight", NULL, NULL, NULL}, /* keys as values */
	    {d, "blk.2.attn_k.weight", NULL, NULL,
	     "missing tensor blk.2.attn_k.weight"},
	    {d, NULL, "blk.0.attn_q.weight", NULL,
	     "tensor blk.0.attn_q.weight has shape"},
	    {d, "rope_freqs.weight", NULL, NULL, NULL}, /* optional */
	    {mo, "blk.1.ffn_gate_inp.scale", NULL, NULL,
	     "missing tensor blk.1.ffn_gate_inp.scale"},
	    {mo, "blk.0.pre_ffw_norm_2.weight", NULL, NULL,
	     "missing tensor blk.0.pre_ffw_norm_2.weight"},
	    {mo, "blk.0.ffn_up.weight", NULL, NULL,
	     "missing tensor blk.0.ffn_up.weight"},
	    {mo, NULL, "blk.2.ffn_down_exps.weight", NULL,
	     "tensor blk.2.ffn_down_exps.weight has shape"},
	    {ef, "per_layer_proj_norm.weight", NULL, NULL,
	     "missing tensor per_layer_proj_norm.weight"},
	    {ef, "blk.3.inp_gate.weight", NULL, NULL,
	     "missing tensor blk.3.inp_gate.weight"},
	    {ef, NULL, "blk.1.proj.weight", NULL,
	     "tensor blk.1.proj.weight has shape"},
	    {g3, NULL, NULL, "blk.1.inp_gate.weight",
	     "tensor blk.1.inp_gate.weight: architecture gemma3 has no "
	     "per-layer embeddings"},
	    {g3, NULL, NULL, "blk.1.layer_output_scale.weight",
	     "architecture gemma3 has no layer output scale"},
	};

	if (!tap_ok(md && mm && me && m3, "gemma4 files load"))
		return;
	tap_ok(md->w.layers[0].attn.head_dim_k == 16 &&
	           md->w.layers[0].attn.n_head_kv == 2 &&
	           md->w.layers[2].attn.head_dim_k == 32 &&
	           md->w.layers[2].attn.n_head_kv == 1 &&
	           md->w.layers[2].attn.wv.data == NULL &&
	           md->w.layers[0].attn.v_norm &&
	           md->w.layers[2].attn.scale == 1.0f &&
	           md->cfg.ropes[0].n_rot == 32 &&
	           md->cfg.ropes[1].n_rot == 16 &&
	           md->cfg.ropes[0].freq_factors != NULL &&
	           md->cfg.ropes[1].freq_factors == NULL &&
	           md->cfg.final_softcap == 30.0f,
	       "gemma4 dense: sliding heads 2 x 16, global 1 x 32 with keys "
	       "as values, rope_freqs on the global class only, scale 1");
	tap_ok(md->w.layers[3].attn.kv_layer == 1 &&
	           md->w.layers[5].attn.kv_layer == 2 &&
	           model_layer_cache(md, 4).kind == MODEL_CACHE_SHARED &&
	           model_layer_cache(md, 4).k_dim == 0 &&
	           model_layer_cache(md, 4).src == 1 &&
	           md->cfg.n_kv_shared == 3 &&
	           model_cache_floats(md, 1) == 2 * (2 * 2 * 16) + 2 * 32 &&
	           (md->cfg.features & MODEL_FEAT_KV_SHARED) &&
	           (md->cfg.features & MODEL_FEAT_K_AS_V),
	       "gemma4 dense: the last 3 layers read layers 1 and 2's caches, "
	       "no cache of their own (%zu floats a position)",
	       model_cache_floats(md, 1));
	tap_ok(mm->w.layers[0].ffn.kind == MODEL_FFN_EXPERTS &&
	           mm->w.layers[0].ffn.sh_gate.ne1 == 64 &&
	           mm->w.layers[0].ffn.n_ff == 16 &&
	           mm->w.layers[0].ffn.sh_inp == NULL &&
	           mm->w.layers[0].ffn.exp_norm != NULL &&
	           mm->w.layers[0].ffn.router_scale != NULL &&
	           mm->w.layers[0].ffn.exp_scale != NULL &&
	           (mm->cfg.features & MODEL_FEAT_MOE_DENSE),
	       "gemma4 mixture: experts of 16 beside a dense MLP of 64, "
	       "router and expert scales");
	tap_ok(me->cfg.ple_dim == 32 && me->w.ple_embd.ne0 == 160 &&
	           me->w.layers[4].ple.proj.ne1 == 64 &&
	           me->w.layers[2].ffn.n_ff == 128 &&
	           me->w.layers[1].ffn.n_ff == 64 &&
	           (me->cfg.features & MODEL_FEAT_PER_LAYER_EMBD) &&
	           (me->cfg.features & MODEL_FEAT_LAYER_SHAPES),
	       "gemma4 E: per-layer inputs of 32, the shared layers' FFN "
	       "double-wide");
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		int rc =
		    load_variant(cases[k].src, cases[k].drop, cases[k].shrink,
		                 cases[k].extra, err, sizeof(err));

		if (cases[k].expect == NULL)
			tap_ok(rc == 0, "gemma4 file without %s loads %s",
			       cases[k].drop, err);
		else
			tap_ok(rc == -1 && strstr(err, cases[k].expect) != NULL,
			       "gemma4 file error names it: %s", err);
	}
	model_free(md);
	model_free(mm);
	model_free(me);
	model_free(m3);
	gguf_close(d);
	gguf_close(mo);
	gguf_close(ef);
	gguf_close(g3);
}

/* Model description errors name the key / tensor. */
static void check_model_errors(void)
{
	char path[1024], err[512];
	struct gguf_file *src, *f;
	struct model *m;
	struct engine_params p = {0};
	struct engine *e;
	const char *tmpdir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	struct {
		const char *drop, *arch, *shrink, *expect, *extra;
	} cases[] = {
	    {NULL, "gpt2", NULL,
	     "unsupported architecture \"gpt2\" "
	     "(supported: llama, qwen2, qwen3, qwen3moe, gpt-oss, qwen35, "
	     "qwen35moe, gemma3, gemma4)",
	     NULL},
	    {"blk.1.ffn_up.weight", NULL, NULL,
	     "missing tensor blk.1.ffn_up.weight", NULL},
	    {"blk.0.attn_k.bias", NULL, NULL, "blk.0.attn_k.bias", NULL},
	    {NULL, NULL, "blk.1.attn_v.weight",
	     "tensor blk.1.attn_v.weight "
	     "has shape",
	     NULL},
	    {"output_norm.weight", NULL, NULL,
	     "missing tensor output_norm.weight", NULL},
	    /* a tensor of a feature the architecture's row lacks */
	    {NULL, NULL, NULL,
	     "tensor blk.1.attn_q_norm.weight: architecture qwen2 has no "
	     "q/k norm",
	     "blk.1.attn_q_norm.weight"},
	    {NULL, NULL, NULL,
	     "tensor blk.1.post_ffw_norm.weight: architecture qwen2 has no "
	     "post-attention and post-FFN norms",
	     "blk.1.post_ffw_norm.weight"},
	};

	m = open_model("qwen2_f32_gqa7", &src);
	tap_ok(m != NULL && m->w.layers[0].attn.n_head == 14 &&
	           m->w.layers[0].attn.n_head_kv == 2 &&
	           (m->cfg.features & MODEL_FEAT_QKV_BIAS) &&
	           !m->cfg.tied_output &&
	           m->cfg.ropes[0].style == MODEL_ROPE_NEOX &&
	           m->cfg.ropes[0].freq_base == 1000000.0f,
	       "qwen2 description: 14/2 heads, biases, untied, NEOX, base 1e6");
	p.backend = "tpu";
	tap_ok(engine_open(m, &p, &e, err, sizeof(err)) == -1 &&
	           strstr(err, "unknown backend \"tpu\" (available: ") &&
	           strstr(err, "cpu") != NULL,
	       "unknown backend: %s", err);
	/* a feature no backend runs yet is refused by name, never run */
	m->cfg.features |= MODEL_FEAT_ATTN_SOFTCAP;
	p.backend = "auto";
	tap_ok(engine_open(m, &p, &e, err, sizeof(err)) == -1 &&
	           strstr(err, "attention logit softcap, which "
	                       "the cpu backend does not run yet") != NULL,
	       "an unsupported feature refused: %s", err);
	m->cfg.features &= ~(uint32_t)MODEL_FEAT_ATTN_SOFTCAP;
	model_free(m);
	snprintf(path, sizeof(path), "%s/t_engine_%d.gguf", tmpdir,
	         (int)getpid());
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		int rc = -1;

		err[0] = '\0';
		if (write_variant(src, path, cases[k].drop, cases[k].arch,
		                  cases[k].shrink, cases[k].extra) == 0) {
			f = gguf_open(path, err, sizeof(err));
			if (f != NULL) {
				rc = model_load(f, &m, err, sizeof(err));
				if (rc == 0)
					model_free(m);
				gguf_close(f);
			}
		}
		tap_ok(rc == -1 && strstr(err, cases[k].expect) != NULL,
		       "model error names it: %s", err);
	}
	unlink(path);
	gguf_close(src);

	m = open_model("llama_f32_gqa7_tied", &src);
	tap_ok(m != NULL && m->cfg.tied_output &&
	           !(m->cfg.features & MODEL_FEAT_QKV_BIAS) &&
	           m->cfg.ropes[0].style == MODEL_ROPE_NORM &&
	           m->w.output.data == m->w.token_embd.data,
	       "llama description: tied output, no biases, normal RoPE");
	model_free(m);
	gguf_close(src);
	m = open_model("qwen2_f32_hd32_tied", &src);
	tap_ok(m != NULL && m->w.layers[0].attn.head_dim_k == 32 &&
	           m->cfg.ropes[0].n_rot == 32 && m->cfg.n_embd == 64 &&
	           m->w.layers[0].attn.n_head == 4,
	       "key_length 32 with n_embd 64 and 4 heads");
	model_free(m);
	gguf_close(src);
}

/* The backend list comes from the table engine_open picks from: every
   listed name opens an engine of that backend, the joined list and the
   unknown-backend error name exactly those, and "cpu" is one of them. */
static void check_backends(void)
{
	struct gguf_file *f = NULL;
	struct model *m = open_model("llama_f32", &f);
	char list[256], want[256] = "", err[512], small[4];
	struct engine_params p = {0};
	size_t n = 0, opened = 0, refused = 0;
	bool has_cpu = false, distinct = true;
	const char *name;

	if (!tap_ok(m != NULL, "backends: model opens"))
		return;
	p.n_ctx = 16;
	for (; (name = engine_backend_at(n)) != NULL; n++) {
		struct engine *e = NULL;

		for (size_t j = 0; j < n; j++)
			distinct &= strcmp(engine_backend_at(j), name) != 0;
		has_cpu |= strcmp(name, "cpu") == 0;
		snprintf(want + strlen(want), sizeof(want) - strlen(want),
		         "%s%s", n ? ", " : "", name);
		p.backend = name;
		err[0] = '\0';
		if (engine_open(m, &p, &e, err, sizeof(err)) == 0 &&
		    strcmp(engine_backend_name(e), name) == 0)
			opened++;
		else if (strcmp(name, "cpu") != 0 && err[0] != '\0')
			/* a device backend on a machine without its device
			   must refuse with a reason, never crash */
			refused++;
		tap_diag("backend %s: %s", name, e ? "opens" : err);
		engine_close(e);
	}
	tap_ok(n >= 1 && has_cpu && distinct && opened >= 1 &&
	           opened + refused == n,
	       "%zu backend(s) listed, cpu among them, each opens or says "
	       "why not (%zu opened)",
	       n, opened);
	tap_ok(strcmp(engine_backends(list, sizeof(list)), want) == 0,
	       "engine_backends joins the table: \"%s\"", list);
	engine_backends(small, sizeof(small));
	tap_ok(strlen(small) == 3 && strncmp(small, want, 3) == 0,
	       "engine_backends truncates to its buffer: \"%s\"", small);
	p.backend = "no-such-backend";
	{
		struct engine *e = NULL;
		char expect[300];

		snprintf(expect, sizeof(expect), "(available: %s)", want);
		tap_ok(engine_open(m, &p, &e, err, sizeof(err)) == -1 &&
		           e == NULL && strstr(err, expect) != NULL,
		       "an unknown backend lists the table: %s", err);
	}
	model_free(m);
	gguf_close(f);
}

/* parley-mkmodel makes valid models of every computable type. */
static void check_mkmodel_types(void)
{
	static const char *types[] = {"F32",  "F16",  "BF16", "Q8_0", "Q4_0",
	                              "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K",
	                              "Q4_K", "Q5_K", "Q6_K"};
	const char *tmpdir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char path[1024], err[512];

	snprintf(path, sizeof(path), "%.900s/t_engine_mk_%d.gguf", tmpdir,
	         (int)getpid());
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		char *argv[] = {"dev-mkmodel",
		                "--arch",
		                "qwen2",
		                "--n-embd",
		                "256",
		                "--n-ff",
		                "512",
		                "--n-head",
		                "4",
		                "--n-head-kv",
		                "2",
		                "--n-layer",
		                "2",
		                "--n-vocab",
		                "64",
		                "--type",
		                (char *)types[i],
		                "-o",
		                path,
		                NULL};
		struct gguf_file *f = NULL;
		struct model *m = NULL;
		struct engine *e = NULL;
		int32_t toks[4] = {1, 7, 3, 63};
		int ok = cmd_mkmodel((int)(sizeof(argv) / sizeof(argv[0])) - 1,
		                     argv) == 0 &&
		         (f = gguf_open(path, err, sizeof(err))) != NULL &&
		         model_load(f, &m, err, sizeof(err)) == 0 &&
		         m->w.layers[1].ffn.down.type == m->w.token_embd.type &&
		         (e = open_engine(m, 0, 1)) != NULL &&
		         engine_eval(e, toks, 4, 0, err, sizeof(err)) == 0;
		double sd = 0;

		for (int32_t v = 0; ok && v < m->cfg.n_vocab; v++) {
			float x = engine_logits(e)[v];

			ok &= isfinite(x);
			sd += (double)x * x;
		}
		tap_ok(ok && sd > 0,
		       "mkmodel --type %s: loads, 4 tokens give "
		       "finite, non-zero logits",
		       types[i]);
		engine_close(e);
		model_free(m);
		gguf_close(f);
	}
	unlink(path);
}

/*
 * A context whose KV cache cannot fit the host's memory is refused at
 * open, before any allocation, with the context that fits; that one
 * opens. The model (written by tests/parley-mkmodel): 8 layers of 32 KV
 * heads of 256 dims, 512 KiB of fp32 KV per token: 512 GiB at 2^20.
 */
static void check_mem_plan(void)
{
	const char *bd = getenv("top_builddir");
	char path[512], cmd[1024], err[512] = "";
	struct gguf_file *f = NULL;
	struct model *m = NULL;
	struct engine *e = NULL;
	struct engine_params p = {
	    .backend = "cpu", .n_ctx = MODEL_MAX_CTX, .n_threads = 1};
	const char *at;
	long fit = 0;
	int rc;

	snprintf(path, sizeof(path), "/tmp/t_engine_mem_%d.gguf",
	         (int)getpid());
	snprintf(
	    cmd, sizeof(cmd),
	    "%s/tests/parley-mkmodel --arch llama --type Q8_0 --n-vocab 64 "
	    "--n-embd 64 --n-ff 64 --n-layer 8 --n-head 32 --n-head-kv 32 "
	    "--head-dim 256 -o %s >/dev/null",
	    bd ? bd : ".", path);
	if (!tap_ok(system(cmd) == 0, "parley-mkmodel: a model of a large KV"))
		return;
	f = gguf_open(path, err, sizeof(err));
	rc = f == NULL || model_load(f, &m, err, sizeof(err)) ||
	     engine_open(m, &p, &e, err, sizeof(err));
	at = strstr(err, "--ctx ");
	fit = at != NULL ? strtol(at + 6, NULL, 10) : 0;
	tap_ok(rc != 0 && e == NULL &&
	           strstr(err, "KV cache for 1048576 tokens needs 512.00 "
	                       "GiB") != NULL &&
	           fit >= 256 && fit < MODEL_MAX_CTX,
	       "a KV cache beyond the host's memory refused at open: %s", err);
	engine_close(e);
	/* the context it names is the largest multiple of 256 whose cache
	   (and scores) fits 15/16 of what it says is available (opening it
	   would reserve most of the host's memory beside the other tests) */
	{
		const char *av = strstr(err, "GiB, ");
		double gib = av != NULL ? strtod(av + 5, NULL) : 0;
		double per =
		    m != NULL ? (double)model_cache_floats(m, 1) * 4 + 4 : 0;
		double room = gib * 1073741824.0 * 15 / 16;

		tap_ok(per > 0 && fit * per <= room * 1.001 &&
		           (fit + 256) * per > room * 0.999,
		       "--ctx %ld: the largest multiple of 256 in 15/16 of "
		       "%.2f GiB at %.0f bytes a token",
		       fit, gib, per);
	}
	model_free(m);
	gguf_close(f);
	unlink(path);
}

/* Whether the K expert ids at P include X. */
static bool chose(const int32_t *p, int32_t k, int32_t x)
{
	for (int32_t j = 0; j < k; j++)
		if (p[j] == x)
			return true;
	return false;
}

/*
 * A batch's choice of experts row by row (trace_rows, trace_pin_rows): an
 * engine keeps every row's choice of its prefill; one pinned to them gives
 * its logits bit for bit; pinned to them with row 5's choice in the first
 * mixture layer changed, rows 0..4 stay and row 5 moves; a step longer than
 * the rows kept keeps none.
 */
static void check_pin_rows(const char *name)
{
	struct gguf_file *f = NULL;
	struct model *m = open_model(name, &f);
	struct engine *a = m ? open_engine(m, 7, 1) : NULL;
	struct engine *b = m ? open_engine(m, 0, 1) : NULL;
	struct trace *ta = m ? trace_new(m->cfg.n_layer, 1, NULL) : NULL;
	struct trace *tb = m ? trace_new(m->cfg.n_layer, 1, NULL) : NULL;
	int32_t toks[N];
	float *la = NULL;
	char err[256] = "";
	int il = 0, same = 0;
	size_t nv = m ? (size_t)m->cfg.n_vocab : 0, row = 0;

	if (!tap_ok(a && b && ta && tb && trace_rows(ta, N) == 0 &&
	                trace_rows(tb, N) == 0,
	            "%s: pinned rows: setup", name))
		goto out;
	while (il < m->cfg.n_layer &&
	       m->w.layers[il].ffn.kind != MODEL_FFN_EXPERTS)
		il++;
	for (int i = 0; i < N; i++)
		toks[i] = (int32_t)((i * 37 + 5) % m->cfg.n_vocab);
	engine_set_trace(a, ta);
	la = malloc(sizeof(float) * nv * N);
	if (la == NULL ||
	    engine_eval(a, toks, N, ENGINE_EVAL_ALL, err, sizeof(err)) != 0)
		goto out;
	memcpy(la, engine_logits(a), sizeof(float) * nv * N);
	row =
	    ((size_t)(N - 1) * m->cfg.n_layer + (size_t)il) * TRACE_MAX_EXPERTS;
	tap_ok(il < m->cfg.n_layer && ta->n_rows == N &&
	           memcmp(ta->row_expert_id + row,
	                  ta->expert_id + (size_t)il * TRACE_MAX_EXPERTS,
	                  sizeof(int32_t) *
	                      (size_t)m->w.layers[il].ffn.n_expert_used) == 0,
	       "%s: a prefill of %d in chunks of 7 keeps %d rows, the last "
	       "the last token's choice",
	       name, N, ta->n_rows);
	engine_set_trace(b, tb);
	same =
	    trace_pin_rows(tb, ta) == 0 &&
	    engine_eval(b, toks, N, ENGINE_EVAL_ALL, err, sizeof(err)) == 0 &&
	    memcmp(engine_logits(b), la, sizeof(float) * nv * N) == 0;
	tap_ok(same, "%s: pinned to them, the same logits bit for bit %s", name,
	       err);
	{
		/* row 5, the mixture layer: its first expert swapped for one
		   it did not choose */
		const int32_t k = m->w.layers[il].ffn.n_expert_used;
		int32_t *p = tb->row_expert_id +
		             ((size_t)5 * m->cfg.n_layer + (size_t)il) *
		                 TRACE_MAX_EXPERTS;
		int32_t x = 0;

		while (chose(p, k, x))
			x++;
		p[0] = x;
		engine_truncate(b, 0);
		same =
		    engine_eval(b, toks, N, ENGINE_EVAL_ALL, err,
		                sizeof(err)) == 0 &&
		    memcmp(engine_logits(b), la, sizeof(float) * nv * 5) == 0 &&
		    memcmp(engine_logits(b) + nv * 5, la + nv * 5,
		           sizeof(float) * nv) != 0;
		tap_ok(same,
		       "%s: row 5 pinned to expert %d instead: rows 0..4 the "
		       "same, row 5 not %s",
		       name, x, err);
	}
	trace_pin_rows(tb, NULL);
	engine_truncate(a, 0);
	trace_rows(ta, 3);
	tap_ok(engine_eval(a, toks, 5, 0, err, sizeof(err)) == 0 &&
	           ta->n_rows == 0,
	       "%s: a step of 5 with 3 rows kept keeps none", name);
out:
	engine_set_trace(a, NULL);
	engine_set_trace(b, NULL);
	trace_free(ta);
	trace_free(tb);
	free(la);
	engine_close(a);
	engine_close(b);
	model_free(m);
	gguf_close(f);
}

int main(void)
{
	check_consistency("llama_f32");
	check_consistency("qwen2_q8_0");
	check_trace();
	check_pin_rows("gpt_oss_f32");
	check_model_errors();
	check_mem_plan();
	check_gemma_errors();
	check_qwen35_errors();
	check_gemma4();
	/* shared KV, windows and per-layer inputs: truncation, state */
	check_consistency("gemma4_e_f32");
	check_consistency("gemma4_moe_q8_0");
	check_backends();
	check_mkmodel_types();
	return tap_done();
}

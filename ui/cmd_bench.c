/*
 * cmd_bench.c - `parley bench`: load time, prefill and decode tokens/s
 * (median of repeats), memory held, and decode as a share of the memory
 * bandwidth floor, for one model on one backend.
 *
 * What is measured, and why so:
 *   - tokens are fixed pseudo-random ids (seeded): speed does not depend on
 *     the text, and a bench needs no tokenizer;
 *   - prefill times engine_eval of -p tokens at --depth, ending with a
 *     select (k = 1) so a device backend has finished when the clock stops;
 *   - decode times -n steps of greedy select + one-token eval after that
 *     prefill, as a chat does;
 *   - the floor of one decode step is (weight bytes read per token + KV
 *     bytes read at the step's depth) / bandwidth, the bandwidth measured
 *     by the engine on the memory the weights live in, now, on this
 *     machine. The share printed is floor time / measured time.
 * Each figure is the median of -r repeats (the cache is truncated back to
 * the depth between repeats); min and max are printed beside it. One
 * untimed repeat comes first (--no-warmup: none), as llama-bench's warm-up
 * run: a GPU loads each kernel at its first launch and a graph is captured
 * at its first step, costs a chat pays once per session, not per turn.
 * --trace and --top N add what the full-screen chat asks of each step (the
 * debug pane's per-layer trace, the raw top N of the select), so the
 * chat's decode speed can be compared with the plain one.
 */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "config.h"
#include "engine.h"
#include "gguf.h"
#include "gguf_split.h"
#include "model.h"
#include "trace.h"

/* Options of one run. */
struct bench_opts {
	const char *model;   /* GGUF path (NULL: the default model) */
	const char *backend; /* engine backend (default auto) */
	long n_prompt;       /* -p: prefill tokens */
	long n_gen;          /* -n: decode steps */
	long depth;          /* --depth: tokens in the cache before */
	long repeats;        /* -r */
	long n_threads;      /* -t (0: all cores) */
	int trace;           /* --trace: the debug pane's trace attached */
	int no_warmup;       /* --no-warmup: no untimed repeat first */
	int window_full;     /* --full-window-cache */
	long n_top;          /* --top: raw top entries each select returns */
	enum engine_kv_type kv_type; /* --kv-type (0: the backend's) */
};

/* Seconds on the monotonic clock. */
static double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void bench_usage(FILE *f)
{
	fputs(
	    "usage: parley bench [-m FILE] [-p N] [-n N] [-r N] [--depth N]\n"
	    "                    [--backend auto|cuda|cpu] [-t N] [--trace]\n"
	    "                    [--top N] [--kv-type f16|q8_0|f32]\n"
	    "                    [--no-warmup] [--full-window-cache]\n"
	    "  -m FILE|NAME     GGUF model, or a name parley models lists\n"
	    "                   (default: the cache's SmolLM2)\n"
	    "  -p N             prompt tokens to prefill (default 512)\n"
	    "  -n N             tokens to decode (default 128)\n"
	    "  -r N             repeats; figures are medians (default 5)\n"
	    "  --no-warmup      no untimed repeat before the timed ones\n"
	    "  --depth N        tokens already in the cache (default 0)\n"
	    "  --backend NAME   auto, cuda or cpu (default: $PARLEY_BACKEND,\n"
	    "                   else auto)\n"
	    "  -t N             CPU threads (default: all cores)\n"
	    "  --trace          decode with the debug pane's per-layer trace\n"
	    "                   attached, as the full-screen chat does\n"
	    "  --top N          each select also returns the N highest raw\n"
	    "                   logits (the chat asks for 10; default 0)\n"
	    "  --kv-type T      KV cache type: f16 or q8_0 (f32 on the CPU;\n"
	    "                   default: the backend's, f16 GPU, f32 CPU)\n"
	    "  --full-window-cache  sliding-window layers keep every\n"
	    "                   position (default: a long context keeps\n"
	    "                   their window and a slack)\n"
	    "Prints load time, prefill and decode tokens/s, the memory the\n"
	    "backend holds, the KV cache's bytes a position, and decode as a\n"
	    "share of the bandwidth floor.\n",
	    f);
}

/* A non-negative integer option, or -1. */
static long bench_num(const char *s, long max)
{
	char *end;
	long v = strtol(s, &end, 10);

	return end == s || *end != '\0' || v < 0 || v > max ? -1 : v;
}

/* Parse ARGV into O; 0 ok, 1 help shown, 2 usage error. */
static int bench_parse(int argc, char **argv, struct bench_opts *o)
{
	static const struct option lo[] = {
	    {"depth", required_argument, NULL, 'D'},
	    {"backend", required_argument, NULL, 'B'},
	    {"help", no_argument, NULL, 'h'},
	    {"trace", no_argument, NULL, 'T'},
	    {"no-warmup", no_argument, NULL, 'W'},
	    {"top", required_argument, NULL, 'K'},
	    {"kv-type", required_argument, NULL, 'Q'},
	    {"full-window-cache", no_argument, NULL, 'F'},
	    {NULL, 0, NULL, 0},
	};
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "m:p:n:r:t:h", lo, NULL)) != -1) {
		long *dst = NULL, max = 1L << 20;

		switch (c) {
		case 'm':
			o->model = optarg;
			continue;
		case 'B':
			o->backend = optarg;
			continue;
		case 'h':
			bench_usage(stdout);
			return 1;
		case 'T':
			o->trace = 1;
			continue;
		case 'W':
			o->no_warmup = 1;
			continue;
		case 'F':
			o->window_full = 1;
			continue;
		case 'Q':
			if (engine_kv_type_parse(optarg, &o->kv_type) != 0) {
				fprintf(stderr,
				        "parley bench: --kv-type '%s' is not "
				        "f16, q8_0 or f32\n",
				        optarg);
				return 2;
			}
			continue;
		case 'K':
			dst = &o->n_top;
			max = ENGINE_SELECT_MAX;
			break;
		case 'p':
			dst = &o->n_prompt;
			break;
		case 'n':
			dst = &o->n_gen;
			break;
		case 'D':
			dst = &o->depth;
			break;
		case 'r':
			dst = &o->repeats;
			max = 1000;
			break;
		case 't':
			dst = &o->n_threads;
			max = 1024;
			break;
		default:
			bench_usage(stderr);
			return 2;
		}
		if ((*dst = bench_num(optarg, max)) < 0) {
			fprintf(stderr, "parley bench: bad number \"%s\"\n",
			        optarg);
			return 2;
		}
	}
	if (optind < argc || o->repeats < 1 || o->n_prompt + o->n_gen < 1) {
		bench_usage(stderr);
		return 2;
	}
	return 0;
}

static int bench_cmp(const void *pa, const void *pb)
{
	double a = *(const double *)pa, b = *(const double *)pb;

	return (a > b) - (a < b);
}

/* Median, min and max of X[0..n) (sorted in place). */
static void bench_stats(double *x, long n, double *med, double *mn, double *mx)
{
	qsort(x, (size_t)n, sizeof(*x), bench_cmp);
	*mn = x[0];
	*mx = x[n - 1];
	*med = n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* Greedy next id, and the N_TOP highest raw logits beside it (the device
 * finishes its work before this returns). */
static int bench_pick(struct engine *e, int32_t n_top, int32_t *id, char *err,
                      size_t len)
{
	struct engine_select_req q = {
	    .k = 1, .n_raw = n_top, .repeat_penalty = 1.0f};
	const struct engine_selection *s = engine_select(e, &q, err, len);

	if (s == NULL)
		return -1;
	*id = s->id[0];
	return 0;
}

/* The KV cache's bytes a position and which layers hold them: a layer
 * that reads another's cache (KV sharing) holds none, a recurrent one a
 * fixed state (not counted here); a sliding layer keeps every position,
 * or (a long context) its window and a slack (engine.h invariant 3),
 * though it reads only the last `window`. */
static void bench_kv_line(const struct engine *e, const struct model *m)
{
	int own = 0, sliding = 0, shared = 0, rec = 0, window = 0;

	for (int il = 0; il < m->cfg.n_layer; il++) {
		struct model_cache_desc d = model_layer_cache(m, il);

		if (d.kind == MODEL_CACHE_SHARED)
			shared++;
		else if (d.kind == MODEL_CACHE_RECURRENT)
			rec++;
		else
			own++;
		if (d.kind == MODEL_CACHE_WINDOW) {
			sliding++;
			window = d.window > window ? d.window : window;
		}
	}
	printf("kv cache:  %.1f KiB a position: %d of %d layers hold keys "
	       "and values",
	       (double)engine_kv_type_bytes(engine_kv_type(e),
	                                    model_cache_floats(m, 1)) /
	           1024.0,
	       own, m->cfg.n_layer);
	if (sliding > 0 && engine_window_rows(e) > 0)
		printf(" (%d sliding: %d positions kept, the last %d read)",
		       sliding, engine_window_rows(e), window);
	else if (sliding > 0)
		printf(" (%d sliding: every position kept, the last %d read)",
		       sliding, window);
	if (shared > 0)
		printf(", %d read an earlier layer's", shared);
	if (rec > 0)
		printf(", %d recurrent", rec);
	printf("\n");
}
/* One repeat: prefill P tokens, decode N; seconds of each into *TP, *TD. */
static int bench_once(struct engine *e, const int32_t *ids, long p, long n,
                      int32_t n_top, double *tp, double *td, char *err,
                      size_t len)
{
	double t0 = bench_now(), t1;
	int32_t id = ids[0];

	if (p > 0 && (engine_eval(e, ids, (int32_t)p, 0, err, len) != 0 ||
	              bench_pick(e, n_top, &id, err, len) != 0))
		return -1;
	t1 = bench_now();
	*tp = t1 - t0;
	for (long i = 0; i < n; i++) {
		if (engine_eval(e, &id, 1, 0, err, len) != 0 ||
		    bench_pick(e, n_top, &id, err, len) != 0)
			return -1;
	}
	*td = bench_now() - t1;
	return 0;
}

/* Entry point: see the file comment. */
int cmd_bench(int argc, char **argv)
{
	struct bench_opts o = {
	    .backend = "auto", .n_prompt = 512, .n_gen = 128, .repeats = 5};
	struct engine_params ep = {0};
	struct gguf_file *f = NULL;
	struct model *m = NULL;
	struct engine *e = NULL;
	struct trace *tr = NULL;
	char err[512], *def = NULL;
	double *tp = NULL, *td = NULL, t0, t1, t2, bw = 0;
	double pm, pmin, pmax, dm, dmin, dmax;
	int32_t *ids = NULL;
	long total;
	int rc;

	rc = bench_parse(argc, argv, &o);
	if (rc != 0)
		return rc == 1 ? 0 : 2;
	rc = 1;
	if (o.model == NULL &&
	    (o.model = def = config_default_model()) == NULL) {
		snprintf(err, sizeof(err), "no model given and no default");
		goto fail;
	}
	if (def == NULL) { /* -m NAME: resolved before the load is timed */
		if (cmd_model_resolve(NULL, o.model, &def, err, sizeof(err)))
			goto fail;
		o.model = def;
	}
	total = o.depth + o.n_prompt + o.n_gen;
	t0 = bench_now();
	f = gguf_split_open(o.model, err, sizeof(err));
	if (f == NULL || model_load(f, &m, err, sizeof(err)) != 0)
		goto fail;
	t1 = bench_now();
	ep.backend = o.backend;
	ep.n_threads = (int32_t)o.n_threads;
	ep.kv_type = o.kv_type;
	ep.window_full = o.window_full;
	ep.n_ctx = (int32_t)(total + 1);
	if (ep.n_ctx > (int32_t)(1L << 20)) {
		snprintf(err, sizeof(err), "depth + -p + -n too large");
		goto fail;
	}
	ep.n_batch = 512;
	if (engine_open(m, &ep, &e, err, sizeof(err)) != 0)
		goto fail;
	t2 = bench_now();
	if (engine_notice(e) != NULL)
		fprintf(stderr, "parley: %s\n", engine_notice(e));
	ids = malloc((size_t)(total + 1) * sizeof(*ids));
	tp = malloc((size_t)o.repeats * sizeof(*tp));
	td = malloc((size_t)o.repeats * sizeof(*td));
	if (ids == NULL || tp == NULL || td == NULL) {
		snprintf(err, sizeof(err), "out of memory");
		goto fail;
	}
	/* fixed pseudo-random ids: a bench needs no text */
	for (long i = 0, x = 12345; i <= total; i++) {
		x = (x * 1103515245L + 12345L) & 0x7fffffffL;
		ids[i] = (int32_t)(x % m->cfg.n_vocab);
	}
	if (engine_measure_bandwidth(e, &bw, err, sizeof(err)) != 0)
		goto fail;
	if (o.trace) {
		tr = trace_new_layers(m->cfg.n_layer); /* the debug pane's */
		if (tr == NULL) {
			snprintf(err, sizeof(err), "trace: out of memory");
			goto fail;
		}
		engine_set_trace(e, tr);
	}
	printf("model:     %s (%s, %d layers, n_embd %d, vocab %d)\n", o.model,
	       m->cfg.arch_name, m->cfg.n_layer, m->cfg.n_embd, m->cfg.n_vocab);
	printf("backend:   %s, host threads %d, KV cache %s; holds %.1f "
	       "MiB\n",
	       engine_backend_name(e), engine_n_threads(e),
	       engine_kv_type_name(engine_kv_type(e)),
	       (double)engine_mem_bytes(e) / (1024.0 * 1024.0));
	bench_kv_line(e, m);
	printf("load:      %.3f s (file %.3f s, engine %.3f s)\n", t2 - t0,
	       t1 - t0, t2 - t1);
	printf("bandwidth: %.1f GB/s read (measured now)\n", bw / 1e9);
	if (o.depth > 0 &&
	    engine_eval(e, ids + o.n_prompt + o.n_gen + 1, (int32_t)o.depth,
	                ENGINE_EVAL_NO_LOGITS, err, sizeof(err)) != 0)
		goto fail;
	/* each repeat starts from the depth: a recurrent state, or the
	   window of layers keeping only theirs, goes back to a snapshot (a
	   KV cache of every position needs none) */
	if (engine_snapshot(e, err, sizeof(err)) != 0)
		goto fail;
	for (long r = o.no_warmup ? 0 : -1; r < o.repeats; r++) {
		double wp, wd; /* the warm-up's times, not kept */

		if (bench_once(e, ids, o.n_prompt, o.n_gen, (int32_t)o.n_top,
		               r < 0 ? &wp : &tp[r], r < 0 ? &wd : &td[r], err,
		               sizeof(err)) != 0 ||
		    engine_truncate(e, (int32_t)o.depth) != 0)
			goto fail;
	}
	bench_stats(tp, o.repeats, &pm, &pmin, &pmax);
	bench_stats(td, o.repeats, &dm, &dmin, &dmax);
	if (o.n_prompt > 0)
		printf("prefill:   %ld tokens at depth %ld: %.1f tok/s (median "
		       "of %ld; %.1f..%.1f)\n",
		       o.n_prompt, o.depth, (double)o.n_prompt / pm, o.repeats,
		       (double)o.n_prompt / pmax, (double)o.n_prompt / pmin);
	if (o.n_gen > 0) {
		/* the mean step reads the KV of depth + p + (n + 1) / 2 */
		double wb = (double)model_weight_bytes(m);
		double kv = (double)engine_kv_read_bytes(
		    e, (int32_t)(o.depth + o.n_prompt + (o.n_gen + 1) / 2));
		double floor_s = (wb + kv) / bw, step = dm / (double)o.n_gen;

		printf("decode:    %ld tokens after %ld: %.1f tok/s, %.5g "
		       "ms/token (median of %ld; %.1f..%.1f tok/s)\n",
		       o.n_gen, o.depth + o.n_prompt, (double)o.n_gen / dm,
		       step * 1e3, o.repeats, (double)o.n_gen / dmax,
		       (double)o.n_gen / dmin);
		printf("floor:     %.1f MB weights + %.2f MB KV%s per token "
		       "at %.1f GB/s = %.5g ms/token (%.0f tok/s)\n",
		       wb / 1e6, kv / 1e6,
		       engine_recurrent(e) ? " and recurrent state" : "",
		       bw / 1e9, floor_s * 1e3, 1.0 / floor_s);
		printf("decode at %.1f%% of the bandwidth floor\n",
		       100.0 * floor_s / step);
	}
	if (tr != NULL)
		printf("trace:     %lld steps traced, the last at position %d; "
		       "raw top %ld a select\n",
		       (long long)tr->step, tr->pos, o.n_top);
	rc = 0;
fail:
	if (rc != 0)
		fprintf(stderr, "parley bench: %s\n", err);
	free(ids);
	free(tp);
	free(td);
	engine_close(e); /* before the trace it may still fill */
	trace_free(tr);
	model_free(m);
	gguf_close(f);
	free(def);
	return rc;
}

/*
 * cmd_generate.c - `parley generate -m FILE -p TEXT -n N`: raw completion
 * of a text (no chat template), greedy, streamed to stdout; prefill and
 * decode speeds on stderr. The simplest end-to-end use of the engine and
 * the tool behind the CPU benchmark. With --verify every eval is checked
 * against the CPU reference (verify.h), one line per step on stderr; the
 * time the reference takes is left out of the speeds.
 */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "engine.h"
#include "gguf.h"
#include "gguf_split.h"
#include "model.h"
#include "tok.h"
#include "trace.h"
#include "verify.h"

/* Seconds on the monotonic clock. */
static double gen_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Usage text. */
static void gen_usage(FILE *f)
{
	fprintf(
	    f, "usage: parley generate -m FILE (-p TEXT | --ids \"ID ID ...\") "
	       "[options]\n"
	       "  -n N            tokens to generate (default 64)\n"
	       "  -t N            CPU threads (default: all cores)\n"
	       "  -c N            context size (default: prompt + n)\n"
	       "  --backend NAME  auto, cuda or cpu (default: $PARLEY_BACKEND, "
	       "else auto)\n"
	       "  --trace FILE    write a JSON line per step (top-k, layers)\n"
	       "  --verify        check each step against the CPU reference\n"
	       "                  (exact dots): a line per step on stderr;\n"
	       "                  exit status 3 when a step is over tolerance\n"
	       "  --ignore-eos    do not stop at an end-of-generation token\n"
	       "  --kv-type T     KV cache type: f16 or q8_0 (f32 on the "
	       "CPU;\n"
	       "                  default: the backend's)\n"
	       "Greedy decoding; prefill and decode speeds go to stderr.\n"
	       "-m takes a GGUF file or a name parley models lists.\n");
}

/* Parse "ID ID ..." into IDS. */
static int gen_parse_ids(const char *s, struct tok_ids *ids)
{
	char *end;

	for (;;) {
		long v = strtol(s, &end, 10);

		if (end == s)
			break;
		if (v < 0 || v > INT32_MAX || tok_ids_push(ids, (int32_t)v))
			return -1;
		s = end;
	}
	return ids->n > 0 ? 0 : -1;
}

struct gen_opts {
	const char *model, *prompt, *ids, *trace, *backend;
	long n_gen, n_threads, n_ctx;
	int ignore_eos;
	int verify;                  /* --verify */
	enum engine_kv_type kv_type; /* --kv-type (0: the backend's) */
};

/* Parse options; 0 ok, 1 help shown, 2 usage error. */
static int gen_parse(int argc, char **argv, struct gen_opts *o)
{
	static const struct option lo[] = {
	    {"model", required_argument, NULL, 'm'},
	    {"prompt", required_argument, NULL, 'p'},
	    {"ids", required_argument, NULL, 'I'},
	    {"trace", required_argument, NULL, 'T'},
	    {"backend", required_argument, NULL, 'B'},
	    {"ignore-eos", no_argument, NULL, 'E'},
	    {"verify", no_argument, NULL, 'V'},
	    {"kv-type", required_argument, NULL, 'Q'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "m:p:n:t:c:h", lo, NULL)) != -1) {
		switch (c) {
		case 'm':
			o->model = optarg;
			break;
		case 'p':
			o->prompt = optarg;
			break;
		case 'I':
			o->ids = optarg;
			break;
		case 'T':
			o->trace = optarg;
			break;
		case 'B':
			o->backend = optarg;
			break;
		case 'E':
			o->ignore_eos = 1;
			break;
		case 'V':
			o->verify = 1;
			break;
		case 'Q':
			if (engine_kv_type_parse(optarg, &o->kv_type) != 0) {
				fprintf(stderr,
				        "parley generate: --kv-type '%s' is "
				        "not f16, q8_0 or f32\n",
				        optarg);
				return 2;
			}
			break;
		case 'n':
			o->n_gen = strtol(optarg, NULL, 10);
			break;
		case 't':
			o->n_threads = strtol(optarg, NULL, 10);
			break;
		case 'c':
			o->n_ctx = strtol(optarg, NULL, 10);
			break;
		case 'h':
			gen_usage(stdout);
			return 1;
		default:
			gen_usage(stderr);
			return 2;
		}
	}
	if (o->model == NULL || (o->prompt == NULL) == (o->ids == NULL) ||
	    o->n_gen < 0 || o->n_gen > 1000000 || o->n_threads < 0 ||
	    o->n_threads > 256 || o->n_ctx < 0 || o->n_ctx > MODEL_MAX_CTX) {
		gen_usage(stderr);
		return 2;
	}
	return 0;
}

/* Write the bytes collected in B to stdout and empty it. */
static void gen_flush(struct tok_buf *b)
{
	if (b->n > 0) {
		fwrite(b->p, 1, b->n, stdout);
		fflush(stdout);
		b->n = 0;
	}
}

/*
 * After the eval of the last N_NEW of CTX: the verifier's step, one line
 * on stderr, added to SUM. *SPENT gets the seconds it took. Returns 0,
 * or -1 with a message.
 */
static int gen_verify(struct verify *v, const struct tok_ids *ctx,
                      int32_t n_new, struct verify_summary *sum, double *spent,
                      char *err, size_t errlen)
{
	struct verify_report r;
	double t0 = gen_now();

	if (verify_step(v, ctx->v, (int32_t)ctx->n, n_new, &r, err, errlen))
		return -1;
	verify_summary_add(sum, &r);
	fprintf(stderr,
	        "verify: pos %d token %d (%d ids): worst layer %d diff %.3g; ",
	        r.pos, r.token, r.n_tokens, r.worst_layer, r.worst_diff);
	if (r.first_bad >= 0)
		fprintf(stderr, "layer %d OVER tolerance (%.3g > %g); ",
		        r.first_bad, r.first_bad_diff, r.layer_tol);
	if (isnan(r.logit_nmse))
		fprintf(stderr, "no logits\n");
	else
		fprintf(stderr, "logit nmse %.3g%s\n", r.logit_nmse,
		        r.logits_bad ? " OVER tolerance" : "");
	*spent += gen_now() - t0;
	return 0;
}

/* Entry point: see the file comment. */
int cmd_generate(int argc, char **argv)
{
	struct gen_opts o = {.n_gen = 64, .backend = cmd_default_backend()};
	struct engine_params ep = {0};
	struct gguf_file *f = NULL;
	struct model *m = NULL;
	struct tok *tk = NULL;
	struct engine *e = NULL;
	struct trace *tr = NULL;
	struct verify *v = NULL;
	struct verify_summary vs;
	double vt = 0; /* seconds spent verifying (left out of the speeds) */
	FILE *tf = NULL;
	struct tok_ids ids = {0};
	struct tok_buf out = {0};
	struct tok_stream st;
	char err[512];
	double t0, t1, t2, pre_s, dec_s;
	size_t n_prompt;
	long n_done = 0, n_eval = 0;
	int rc = 1;

	rc = gen_parse(argc, argv, &o);
	if (rc != 0)
		return rc == 1 ? 0 : 2;
	rc = 1;
	f = cmd_model_open(o.model, err, sizeof(err));
	if (f == NULL || model_load(f, &m, err, sizeof(err)) != 0 ||
	    (tk = tok_load(f, err, sizeof(err))) == NULL)
		goto fail;
	if (o.ids != NULL) {
		if (gen_parse_ids(o.ids, &ids) != 0) {
			snprintf(err, sizeof(err), "--ids: bad id list");
			goto fail;
		}
	} else if (tok_encode(tk, o.prompt, strlen(o.prompt),
	                      TOK_ADD_SPECIAL | TOK_PARSE_SPECIAL, &ids, err,
	                      sizeof(err)) != 0) {
		goto fail;
	}
	if (ids.n == 0) {
		snprintf(err, sizeof(err), "the prompt gives no tokens");
		goto fail;
	}
	n_prompt = ids.n;
	ep.backend = o.backend;
	ep.n_threads = (int32_t)o.n_threads;
	ep.kv_type = o.kv_type;
	ep.n_ctx = (int32_t)(o.n_ctx ? o.n_ctx : (long)ids.n + o.n_gen + 1);
	if (engine_open(m, &ep, &e, err, sizeof(err)) != 0)
		goto fail;
	if (engine_notice(e) != NULL)
		fprintf(stderr, "parley: %s\n", engine_notice(e));
	if (o.trace != NULL) {
		tf = fopen(o.trace, "w");
		tr = tf ? trace_new(m->cfg.n_layer, 10, tf) : NULL;
		if (tr == NULL) {
			snprintf(err, sizeof(err), "%s: cannot open trace file",
			         o.trace);
			goto fail;
		}
		engine_set_trace(e, tr);
	}
	verify_summary_init(&vs);
	if (o.verify &&
	    verify_open(e, m, tr, (int32_t)o.n_threads, &v, err, sizeof(err)))
		goto fail;
	tok_stream_init(&st, tk, 0);
	t0 = gen_now();
	if (engine_eval(e, ids.v, (int32_t)ids.n, 0, err, sizeof(err)) != 0 ||
	    (v &&
	     gen_verify(v, &ids, (int32_t)ids.n, &vs, &vt, err, sizeof(err))))
		goto fail;
	t1 = gen_now();
	pre_s = t1 - t0 - vt;
	vt = 0;
	for (n_done = 0; n_done < o.n_gen; n_done++) {
		/* greedy: the engine's argmax (lowest id on ties), selected
		   where the logits are; a NaN logit is an error */
		struct engine_select_req q = {.k = 1, .repeat_penalty = 1.0f};
		const struct engine_selection *sel =
		    engine_select(e, &q, err, sizeof(err));
		int32_t id;

		if (sel == NULL)
			goto fail;
		id = sel->id[0];

		if (!o.ignore_eos && tok_is_eog(tk, id))
			break;
		tok_stream_push(&st, id, &out);
		gen_flush(&out);
		if (n_done + 1 < o.n_gen) {
			if (engine_eval(e, &id, 1, 0, err, sizeof(err)) != 0)
				goto fail;
			n_eval++;
			/* ids is the context from here on (verify) */
			if (v && (tok_ids_push(&ids, id) ||
			          gen_verify(v, &ids, 1, &vs, &vt, err,
			                     sizeof(err))))
				goto fail;
		}
	}
	t2 = gen_now();
	dec_s = t2 - t1 - vt;
	tok_stream_flush(&st, &out);
	gen_flush(&out);
	printf("\n");
	fflush(stdout);
	fprintf(stderr,
	        "prefill: %zu tokens in %.3f s (%.1f tokens/s); decode: %ld "
	        "tokens in %.3f s (%.1f tokens/s); %d threads\n",
	        n_prompt, pre_s, (double)n_prompt / pre_s, n_eval, dec_s,
	        n_eval > 0 ? (double)n_eval / dec_s : 0.0, engine_n_threads(e));
	if (v) {
		char line[512];

		fprintf(stderr, "%s\n",
		        verify_summary_format(&vs, line, sizeof(line)));
		rc = vs.n_bad ? 3 : 0;
	} else {
		rc = 0;
	}
fail:
	if (rc == 1)
		fprintf(stderr, "parley generate: %s\n", err);
	verify_close(v);
	engine_close(e);
	trace_free(tr);
	if (tf)
		fclose(tf);
	tok_free(tk);
	model_free(m);
	gguf_close(f);
	free(ids.v);
	free(out.p);
	return rc;
}

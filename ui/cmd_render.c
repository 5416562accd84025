/*
 * cmd_render.c - `parley render`: print exactly what a chat template makes
 * of a message list, for users checking a model's prompt format.
 *
 * Nothing is added to the rendered text, not even a newline. With --count
 * the prompt is also tokenized the way the chat session feeds it (control
 * tokens matched only in the template's own text, BOS per the vocabulary)
 * and the token count goes to stderr.
 */
#include "cmd.h"
#include "gguf.h"
#include "gguf_split.h"
#include "json.h"
#include "prompt.h"
#include "promptdir.h"
#include "template.h"
#include "tok.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void render_usage(FILE *fp)
{
	fputs(
	    "usage: parley render [-m MODEL] [--template NAME|FILE] "
	    "[--messages FILE.json]\n"
	    "                     [--bos TEXT] [--eos TEXT] "
	    "[--no-generation-prompt] [--count]\n"
	    "Print exactly the text a chat template renders for a message "
	    "list.\n"
	    "  -m, --model FILE        take the template, bos and eos from "
	    "this GGUF\n"
	    "                          (or a name parley models lists)\n"
	    "  -t, --template NAME|FILE  a built-in template (parley "
	    "templates) or a .jinja file\n"
	    "  -M, --messages FILE     JSON: [{\"role\":..., \"content\":...}, "
	    "...] or {\"messages\": [...]};\n"
	    "                          '-' or absent: standard input\n"
	    "      --bos TEXT, --eos TEXT  bos_token / eos_token (default: "
	    "the model's, else \"\")\n"
	    "      --no-generation-prompt  add_generation_prompt = false\n"
	    "  -c, --count             print the prompt's token count on "
	    "stderr (needs -m)\n",
	    fp);
}

/* The text of special token ID, or NULL. Malloc'd. */
static char *render_special(const struct tok *t, int32_t id)
{
	size_t len = 0;
	const char *p = id >= 0 ? tok_text(t, id, &len) : NULL;

	return p != NULL ? strndup(p, len) : NULL;
}

/* The message array inside DOC (an array, or an object's "messages"). */
static const struct json_value *render_messages(const struct json_value *doc)
{
	if (doc->type == JSON_OBJECT)
		doc = json_object_get(doc, "messages");
	return doc != NULL && doc->type == JSON_ARRAY ? doc : NULL;
}

/* Token count of the prompt as the chat session builds it. */
static int render_count(const struct tok *t, const char *text, size_t len,
                        const struct tmpl_span *spans, size_t nspans,
                        size_t *count, char *err, size_t errlen)
{
	struct prompt_vocab pv;
	struct tok_ids ids = {0};
	int rc;

	if (prompt_vocab_init(&pv, t, err, errlen) != 0)
		return -1;
	rc = prompt_encode_prompt(&pv, text, len, spans, nspans, &ids, NULL,
	                          err, errlen);
	*count = ids.n;
	free(ids.v);
	prompt_vocab_free(&pv);
	return rc;
}

int cmd_render(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"model", required_argument, NULL, 'm'},
	    {"template", required_argument, NULL, 't'},
	    {"messages", required_argument, NULL, 'M'},
	    {"bos", required_argument, NULL, 'B'},
	    {"eos", required_argument, NULL, 'E'},
	    {"no-generation-prompt", no_argument, NULL, 'G'},
	    {"count", no_argument, NULL, 'c'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *model = NULL, *tname = NULL, *mfile = "-";
	char *bos = NULL, *eos = NULL, *src = NULL, *shown = NULL;
	char *json = NULL, *out = NULL, err[1024];
	bool gen = true, count = false;
	struct gguf_file *gf = NULL;
	struct tok *tok = NULL;
	struct tmpl *tmpl = NULL;
	struct json_value *doc = NULL;
	struct tmpl_span *spans = NULL;
	struct tmpl_ctx ctx = {0};
	size_t srclen = 0, jlen = 0, outlen = 0, nspans = 0, n = 0;
	int c, rc = 1;

	optind = 1;
	while ((c = getopt_long(argc, argv, "m:t:M:ch", opts, NULL)) != -1) {
		switch (c) {
		case 'm':
			model = optarg;
			break;
		case 't':
			tname = optarg;
			break;
		case 'M':
			mfile = optarg;
			break;
		case 'B':
			free(bos);
			bos = strdup(optarg);
			break;
		case 'E':
			free(eos);
			eos = strdup(optarg);
			break;
		case 'G':
			gen = false;
			break;
		case 'c':
			count = true;
			break;
		case 'h':
			render_usage(stdout);
			return 0;
		default:
			render_usage(stderr);
			return 2;
		}
	}
	if (optind != argc || (count && model == NULL)) {
		if (count && model == NULL)
			fprintf(stderr, "parley render: --count needs -m "
			                "MODEL (its tokenizer)\n");
		render_usage(stderr);
		free(bos);
		free(eos);
		return 2;
	}
	if (model != NULL) {
		gf = cmd_model_open(model, err, sizeof(err));
		if (gf == NULL ||
		    (tok = tok_load(gf, err, sizeof(err))) == NULL)
			goto fail;
		if (bos == NULL)
			bos = render_special(tok, tok_bos(tok));
		if (eos == NULL)
			eos = render_special(tok, tok_eos(tok));
	}
	if (promptdir_template(gf, tname, &src, &srclen, &shown, err,
	                       sizeof(err)) != 0)
		goto fail;
	if (tmpl_compile(src, srclen, &tmpl, err, sizeof(err)) != TMPL_OK) {
		fprintf(stderr, "parley: chat template %s: %s\n", shown, err);
		goto out;
	}
	json = strcmp(mfile, "-") == 0
	           ? promptdir_read_file("/dev/stdin", &jlen, err, sizeof(err))
	           : promptdir_read_file(mfile, &jlen, err, sizeof(err));
	if (json == NULL)
		goto fail;
	if (json_parse(json, jlen, &doc, err, sizeof(err)) != 0) {
		fprintf(stderr, "parley: %s: %s\n",
		        strcmp(mfile, "-") == 0 ? "stdin" : mfile, err);
		goto out;
	}
	ctx.messages = render_messages(doc);
	if (ctx.messages == NULL) {
		fprintf(stderr,
		        "parley: %s: expected an array of messages or "
		        "an object with \"messages\"\n",
		        strcmp(mfile, "-") == 0 ? "stdin" : mfile);
		goto out;
	}
	ctx.add_generation_prompt = gen;
	ctx.bos_token = bos;
	ctx.eos_token = eos;
	if (tmpl_render(tmpl, &ctx, &out, &outlen, &spans, &nspans, err,
	                sizeof(err)) != TMPL_OK) {
		fprintf(stderr, "parley: chat template %s: %s\n", shown, err);
		goto out;
	}
	if (fwrite(out, 1, outlen, stdout) != outlen || fflush(stdout) != 0) {
		fprintf(stderr, "parley: writing the output failed\n");
		goto out;
	}
	if (count) {
		if (render_count(tok, out, outlen, spans, nspans, &n, err,
		                 sizeof(err)) != 0)
			goto fail;
		fprintf(stderr, "%zu tokens\n", n);
	}
	rc = 0;
	goto out;
fail:
	fprintf(stderr, "parley: %s\n", err);
out:
	free(out);
	free(spans);
	json_free(doc);
	free(json);
	tmpl_free(tmpl);
	free(src);
	free(shown);
	free(bos);
	free(eos);
	tok_free(tok);
	gguf_close(gf);
	return rc;
}

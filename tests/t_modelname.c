/*
 * t_modelname.c - the parts of -m NAME that need no files: the edit
 * distance, the quantization a file name gives, and modelname_resolve
 * over a list built by hand (exact, case folded, ollama's registry,
 * namespace and default tag, a repository's default Q4_K_M, prefixes,
 * ambiguity, the nearest names, a
 * match that does not open, a name two sources give). t_models.sh runs
 * the same on real files.
 */
#include "modelname.h"
#include "modelstore.h"

#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A list of entries NAMES (source ollama for names without '/' or with
   "hf.co/", else hf); "!" before a name: it does not open. */
static void build(struct modelstore_list *l, const char *const *names, size_t n)
{
	memset(l, 0, sizeof(*l));
	l->v = calloc(n, sizeof(*l->v));
	l->n = l->cap = n;
	for (size_t i = 0; i < n; i++) {
		const char *s = names[i];
		bool bad = s[0] == '!';
		char path[256];

		s += bad;
		snprintf(path, sizeof(path), "/m/%zu.gguf", i);
		l->v[i].name = strdup(s);
		l->v[i].path = strdup(path);
		l->v[i].source = strchr(s, '/') && strncmp(s, "hf.co/", 6)
		                     ? MODELSTORE_HF
		                     : MODELSTORE_OLLAMA;
		l->v[i].opened = !bad;
		l->v[i].ok = !bad;
		l->v[i].why = bad ? strdup("truncated") : NULL;
	}
}

/* Resolve NAME in L: the path, or "error: MESSAGE", in OUT. */
static const char *res(const struct modelstore_list *l, const char *name,
                       char *out, size_t n)
{
	char err[900];
	size_t i;

	if (modelname_resolve(name, l, &i, err, sizeof(err)) == 0)
		snprintf(out, n, "%s", l->v[i].path);
	else
		snprintf(out, n, "error: %s", err);
	return out;
}

/* modelname_distance and modelstore_quant_in_name. */
static void check_pure(void)
{
	static const struct {
		const char *file, *quant; /* NULL: none */
	} q[] = {
	    {"Qwen3-8B-Q4_K_M.gguf", "Q4_K_M"},
	    {"qwen3-8b-q8_0.gguf", "Q8_0"},
	    {"Q4_K_M/Qwen3-8B-Q4_K_M-00001-of-00002.gguf", "Q4_K_M"},
	    {"gemma-3-1b-it-IQ4_XS.gguf", "IQ4_XS"},
	    {"model-BF16.gguf", "BF16"},
	    {"Llama-3.2-1B-Instruct-f16.gguf", "F16"},
	    {"gpt-oss-20b-MXFP4.gguf", "MXFP4"},
	    {"Qwen3-8B-UD-Q4_K_XL.gguf", "UD-Q4_K_XL"},
	    {"Qwen3-8B.gguf", NULL},
	    {"QwQ-32B.gguf", NULL},
	    {"notQ4_0.gguf", NULL},
	};

	tap_ok(modelname_distance("qwen3:8b", "qwen3:8b") == 0, "distance 0");
	tap_ok(modelname_distance("qwen3:8b", "QWEN3:8B") == 0,
	       "distance folds case");
	tap_ok(modelname_distance("qwen4:8b", "qwen3:8b") == 1,
	       "distance: one substitution");
	tap_ok(modelname_distance("kitten", "sitting") == 3,
	       "distance kitten/sitting 3");
	tap_ok(modelname_distance("", "abc") == 3, "distance to empty");
	for (size_t i = 0; i < sizeof(q) / sizeof(q[0]); i++) {
		char *got = modelstore_quant_in_name(q[i].file);

		tap_ok(q[i].quant ? got && strcmp(got, q[i].quant) == 0
		                  : got == NULL,
		       "quant of %s: %s (got %s)", q[i].file,
		       q[i].quant ? q[i].quant : "none", got ? got : "none");
		free(got);
	}
	tap_ok(modelname_is_path("/x/y") && modelname_is_path("./y") &&
	           modelname_is_path("m.GGUF") &&
	           !modelname_is_path("qwen3:8b") &&
	           !modelname_is_path("org/repo:Q8_0"),
	       "what is a path");
}

int main(void)
{
	static const char *const names[] = {
	    "acme/Tiny-GGUF:F16",
	    "acme/Tiny-GGUF:Q8_0",
	    "!acme/Broken-GGUF:Q8_0",
	    "hf.co/acme/Other:Q4_K_M",
	    "qwen3:8b",
	    "qwen3:latest",
	    "someone/mymodel:v1",
	    "acme/Tiny-GGUF:F16",
	    "acme/Pick-GGUF:Q8_0",
	    "acme/Pick-GGUF:Q4_K_M",
	};
	struct modelstore_list l;
	char out[1024];

	check_pure();
	build(&l, names, sizeof(names) / sizeof(names[0]));
	tap_ok(strcmp(res(&l, "qwen3:8b", out, sizeof(out)), "/m/4.gguf") == 0,
	       "exact: %s", out);
	tap_ok(strcmp(res(&l, "library/qwen3:8b", out, sizeof(out)),
	              "/m/4.gguf") == 0,
	       "library/: %s", out);
	tap_ok(strcmp(res(&l, "registry.ollama.ai/library/qwen3:8b", out,
	                  sizeof(out)),
	              "/m/4.gguf") == 0,
	       "registry.ollama.ai/library/: %s", out);
	tap_ok(strcmp(res(&l, "qwen3", out, sizeof(out)), "/m/5.gguf") == 0,
	       "no tag: latest: %s", out);
	tap_ok(strcmp(res(&l, "ACME/tiny-gguf:q8_0", out, sizeof(out)),
	              "/m/1.gguf") == 0,
	       "case folded: %s", out);
	tap_ok(strcmp(res(&l, "acme/Tiny-GGUF:F16", out, sizeof(out)),
	              "/m/0.gguf") == 0,
	       "a name two sources give: the first listed: %s", out);
	tap_ok(strcmp(res(&l, "hf.co/", out, sizeof(out)), "/m/3.gguf") == 0,
	       "a unique prefix: %s", out);
	tap_ok(strcmp(res(&l, "acme/pick-gguf", out, sizeof(out)),
	              "/m/9.gguf") == 0,
	       "a repository without a quantization: Q4_K_M: %s", out);
	tap_ok(strcmp(res(&l, "acme/Tiny-GGUF", out, sizeof(out)),
	              "error: 'acme/Tiny-GGUF' matches 2 models: "
	              "acme/Tiny-GGUF:F16, acme/Tiny-GGUF:Q8_0 (give more of "
	              "the name)") == 0,
	       "ambiguous, the duplicate counted once: %s", out);
	tap_ok(strncmp(res(&l, "qwen4:8b", out, sizeof(out)),
	               "error: no model 'qwen4:8b'; the nearest: qwen3:8b, "
	               "qwen3:latest, ",
	               58) == 0,
	       "unknown: nearest first: %s", out);
	tap_ok(strcmp(res(&l, "acme/Broken", out, sizeof(out)),
	              "error: acme/Broken-GGUF:Q8_0 (/m/2.gguf): "
	              "truncated") == 0,
	       "a match that does not open: its reason: %s", out);
	tap_ok(strncmp(res(&l, "", out, sizeof(out)), "error: no model ''",
	               18) == 0,
	       "an empty name matches nothing: %s", out);
	modelstore_free(&l);
	build(&l, names, 0);
	tap_ok(strstr(res(&l, "qwen3:8b", out, sizeof(out)),
	              "finds no local model") != NULL,
	       "an empty list: %s", out);
	modelstore_free(&l);
	return tap_done();
}

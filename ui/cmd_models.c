/*
 * cmd_models.c - `parley models`: the local models (modelstore.h), an
 * aligned table or --json; with --server URL (or the config's server) the
 * models an OpenAI-compatible server offers (GET /v1/models), one per
 * line. Also -m NAME for every command (cmd_model_resolve, modelname.h)
 * and the API key lookup shared with the chat (cmd_api_key).
 */
#include "cmd.h"

#include "config.h"
#include "gguf_split.h"
#include "modelname.h"
#include "modelstore.h"
#include "remote.h"
#include "sbuf.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* See cmd.h. */
int cmd_api_key(const struct config *cfg, char **key)
{
	char err[512];

	*key = NULL;
	if (cfg->api_key_env) {
		const char *v = getenv(cfg->api_key_env);

		if (v == NULL || v[0] == '\0') {
			fprintf(stderr,
			        "parley: --api-key-env %s: the variable is "
			        "not set or empty\n",
			        cfg->api_key_env);
			return -1;
		}
		*key = strdup(v);
		if (*key == NULL) {
			fputs("parley: out of memory\n", stderr);
			return -1;
		}
		return 0;
	}
	if (cfg->api_key_file &&
	    remote_read_key_file(cfg->api_key_file, key, err, sizeof(err))) {
		fprintf(stderr, "parley: %s\n", err);
		return -1;
	}
	return 0;
}

/* See cmd.h. */
void cmd_key_free(char *key)
{
	if (key) {
		memset(key, 0, strlen(key));
		free(key);
	}
}

/* See cmd.h. */
int cmd_model_resolve(const struct config *cfg, const char *name, char **path,
                      char *err, size_t errlen)
{
	return cmd_model_resolve_name(cfg, name, path, NULL, err, errlen);
}

/* An ollama blob given by its path (a resumed conversation records the
   file): the name ollama's store gives it, so that the status bar and the
   store say "qwen3:8b", not "sha256-...". NULL when none (or no memory). */
static char *cmd_model_blob_name(const struct config *cfg, const char *path)
{
	const char *base = strrchr(path, '/');
	struct modelstore_list l = {0};
	char err[256], *name = NULL;

	base = base ? base + 1 : path;
	if (strncmp(base, "sha256-", 7) != 0 ||
	    modelstore_scan(cfg ? cfg->models_dir : NULL, &l, err,
	                    sizeof(err)) != 0) {
		modelstore_free(&l);
		return NULL;
	}
	for (size_t i = 0; i < l.n && name == NULL; i++) {
		const char *b = strrchr(l.v[i].path, '/');

		/* the blob's name is its content's hash: one model */
		if (l.v[i].source == MODELSTORE_OLLAMA && l.v[i].ok && b &&
		    strcmp(b + 1, base) == 0)
			name = strdup(l.v[i].name);
	}
	modelstore_free(&l);
	return name;
}

/* See cmd.h. */
int cmd_model_resolve_name(const struct config *cfg, const char *name,
                           char **path, char **listed, char *err, size_t errlen)
{
	struct modelstore_list l = {0};
	struct config def;
	size_t i;
	int rc;

	*path = NULL;
	if (listed)
		*listed = NULL;
	if (modelname_is_path(name)) {
		*path = strdup(name);
		if (*path == NULL)
			snprintf(err, errlen, "out of memory");
		else if (listed)
			*listed = cmd_model_blob_name(cfg, name);
		return *path ? 0 : -1;
	}
	config_init(&def);
	if (cfg == NULL && config_load_file(&def, NULL, err, errlen)) {
		config_free(&def);
		return -1;
	}
	rc = modelstore_scan(cfg ? cfg->models_dir : def.models_dir, &l, err,
	                     errlen);
	if (rc == 0)
		rc = modelname_resolve(name, &l, &i, err, errlen);
	if (rc == 0 && ((*path = strdup(l.v[i].path)) == NULL ||
	                (listed && (*listed = strdup(l.v[i].name)) == NULL))) {
		free(*path);
		*path = NULL;
		snprintf(err, errlen, "out of memory");
		rc = -1;
	}
	modelstore_free(&l);
	config_free(&def);
	return rc;
}

/* See cmd.h. */
struct gguf_file *cmd_model_open(const char *name, char *err, size_t errlen)
{
	struct gguf_file *f;
	char *path;

	if (cmd_model_resolve(NULL, name, &path, err, errlen))
		return NULL;
	f = gguf_split_open(path, err, errlen);
	free(path);
	return f;
}

/* PATH with $HOME shown as ~ (for the table; --json gives it whole). */
static const char *models_home(const char *path, char *out, size_t n)
{
	const char *home = getenv("HOME");
	size_t k = home ? strlen(home) : 0;

	if (k > 1 && strncmp(path, home, k) == 0 && path[k] == '/') {
		snprintf(out, n, "~%s", path + k);
		return out;
	}
	return path;
}

#define MODELS_COLS 8 /* columns of the table before the path */

/* The cells of entry E's row. */
static void models_row(const struct modelstore_entry *e,
                       char cell[MODELS_COLS][48])
{
	snprintf(cell[0], 48, "%s", e->arch ? e->arch : "-");
	modelstore_fmt_count(cell[1], 48, e->n_params);
	snprintf(cell[2], 48, "%s", e->quant ? e->quant : "-");
	modelstore_fmt_bytes(cell[3], 48, e->size);
	if (e->n_ctx)
		snprintf(cell[4], 48, "%" PRIu64, e->n_ctx);
	else
		snprintf(cell[4], 48, "-");
	snprintf(cell[5], 48, "%s", e->ok ? "yes" : "no");
	snprintf(cell[6], 48, "%s", modelstore_source_name(e->source));
	cell[7][0] = '\0';
}

/* The aligned table: a header, one line per model, a reason after the
   path of each that cannot run. */
static void models_table(const struct modelstore_list *l)
{
	static const char *const head[MODELS_COLS] = {
	    "ARCH", "PARAMS", "QUANT", "SIZE", "CONTEXT", "RUNS", "SOURCE", ""};
	size_t w[MODELS_COLS] = {0}, wname = 4;
	char cell[MODELS_COLS][48], buf[4096];

	for (size_t c = 0; c < MODELS_COLS; c++)
		w[c] = strlen(head[c]);
	for (size_t i = 0; i < l->n; i++) {
		models_row(&l->v[i], cell);
		if (strlen(l->v[i].name) > wname)
			wname = strlen(l->v[i].name);
		for (size_t c = 0; c < MODELS_COLS; c++)
			if (strlen(cell[c]) > w[c])
				w[c] = strlen(cell[c]);
	}
	printf("%-*s", (int)wname, "NAME");
	for (size_t c = 0; c + 1 < MODELS_COLS; c++)
		printf("  %-*s", (int)w[c], head[c]);
	printf("  PATH\n");
	for (size_t i = 0; i < l->n; i++) {
		const struct modelstore_entry *e = &l->v[i];

		models_row(e, cell);
		printf("%-*s", (int)wname, e->name);
		for (size_t c = 0; c + 1 < MODELS_COLS; c++)
			printf("  %-*s", (int)w[c], cell[c]);
		printf("  %s", models_home(e->path, buf, sizeof(buf)));
		if (!e->ok)
			printf("  (%s)", e->why ? e->why : "cannot be used");
		printf("\n");
	}
}

/* Append "KEY": "S" (or null) to SB. */
static void models_json_str(struct sbuf *sb, const char *key, const char *s)
{
	sbuf_printf(sb, ", \"%s\": ", key);
	if (s == NULL) {
		sbuf_adds(sb, "null");
		return;
	}
	sbuf_adds(sb, "\"");
	sbuf_add_json_str(sb, s, strlen(s));
	sbuf_adds(sb, "\"");
}

/* The list as a JSON array of objects, one per model. */
static int models_json(const struct modelstore_list *l)
{
	struct sbuf sb = {0};
	int rc;

	sbuf_adds(&sb, "[");
	for (size_t i = 0; i < l->n; i++) {
		const struct modelstore_entry *e = &l->v[i];

		sbuf_adds(&sb, i ? ",\n {\"name\": \"" : "\n {\"name\": \"");
		sbuf_add_json_str(&sb, e->name, strlen(e->name));
		sbuf_adds(&sb, "\"");
		models_json_str(&sb, "source",
		                modelstore_source_name(e->source));
		models_json_str(&sb, "path", e->path);
		models_json_str(&sb, "architecture", e->arch);
		sbuf_printf(&sb, ", \"parameters\": %" PRIu64, e->n_params);
		models_json_str(&sb, "quantization", e->quant);
		sbuf_printf(
		    &sb,
		    ", \"size\": %" PRIu64 ", \"context_length\": %" PRIu64
		    ", \"shards\": %u, \"runnable\": %s",
		    e->size, e->n_ctx, e->n_shards, e->ok ? "true" : "false");
		models_json_str(&sb, "why", e->why);
		sbuf_adds(&sb, "}");
	}
	sbuf_adds(&sb, l->n ? "\n]\n" : "]\n");
	rc = sb.failed ? -1 : 0;
	if (rc == 0)
		fputs(sb.buf, stdout);
	else
		fputs("parley: out of memory\n", stderr);
	sbuf_free(&sb);
	return rc;
}

/* `parley models` without a server: the local models. */
static int models_local(const struct config *cfg, bool json)
{
	struct modelstore_list l;
	char err[1024];
	int rc;

	if (modelstore_scan(cfg->models_dir, &l, err, sizeof(err))) {
		fprintf(stderr, "parley: %s\n", err);
		modelstore_free(&l);
		return 1;
	}
	if (json) {
		rc = models_json(&l);
	} else {
		if (l.n > 0)
			models_table(&l);
		else
			fputs("parley: no local models (looked in parley's "
			      "cache, the Hugging Face cache, ollama, LM "
			      "Studio and models-dir)\n",
			      stderr);
		rc = 0;
	}
	modelstore_free(&l);
	return rc == 0 && fflush(stdout) == 0 ? 0 : 1;
}

static void models_usage(FILE *fp)
{
	fputs("usage: parley models [--json] [--models-dir DIR]\n"
	      "       parley models --server URL [OPTIONS]\n"
	      "\n"
	      "List the GGUF models on this machine, one line each: name,\n"
	      "architecture, parameters, quantization, size, context "
	      "length,\nwhether parley can run it (and why not), source and "
	      "file. They\ncome from parley's cache, the Hugging Face cache "
	      "($HF_HOME), ollama\n($OLLAMA_MODELS), LM Studio "
	      "(~/.lmstudio/models) and models-dir;\n-m takes the NAME "
	      "or a unique prefix of it.\n"
	      "\n"
	      "With --server (or the config's server): the models an\n"
	      "OpenAI-compatible server (vLLM, SGLang, llama.cpp's server,"
	      " ollama)\noffers, one per line; the first is what --server "
	      "uses without\n--server-model.\n"
	      "\n"
	      "Options:\n"
	      "      --json              a JSON array of objects, for "
	      "scripts\n"
	      "      --models-dir DIR    also look in DIR (repeatable, or "
	      "a:b)\n"
	      "      --server URL        the server (or the config's server)\n"
	      "      --api-key-env VAR   the API key is in $VAR\n"
	      "      --api-key-file FILE the API key is in FILE (mode 600)\n"
	      "      --server-timeout N  seconds to wait for it (60)\n"
	      "      --insecure          allow plain http to a non-local "
	      "host\n"
	      "      --config FILE       config file\n"
	      "  -h, --help              this text\n",
	      fp);
}

/* `parley models --server`: the server's model names. */
static int models_remote(const struct config *cfg, bool json)
{
	struct remote_opts ro = {0};
	struct remote *r = NULL;
	char err[1024], *key = NULL, **names = NULL;
	size_t n = 0;
	int status = 1;

	if (cmd_api_key(cfg, &key))
		goto out;
	ro.url = cfg->server;
	ro.model = "-"; /* not needed: do not ask for the list twice */
	ro.api_key = key;
	ro.insecure = cfg->insecure;
	ro.timeout_s = cfg->server_timeout;
	if (remote_open(&ro, &r, err, sizeof(err)) ||
	    remote_models(r, &names, &n, err, sizeof(err))) {
		fprintf(stderr, "parley: %s\n", err);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if (!json) {
			printf("%s\n", names[i]);
			continue;
		}
		struct sbuf sb = {0};

		sbuf_add_json_str(&sb, names[i], strlen(names[i]));
		printf("%s\"%s\"", i ? ", " : "[", sb.buf ? sb.buf : "");
		sbuf_free(&sb);
	}
	if (json)
		printf(n ? "]\n" : "[]\n");
	if (n == 0)
		fprintf(stderr, "parley: %s lists no models\n", remote_url(r));
	status = fflush(stdout) == 0 && n > 0 ? 0 : 1;
out:
	remote_models_free(names, n);
	remote_close(r);
	cmd_key_free(key);
	return status;
}

int cmd_models(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"help", no_argument, NULL, 'h'},
	    {"json", no_argument, NULL, 'j'},
	    {"models-dir", required_argument, NULL, 1},
	    {"server", required_argument, NULL, 1},
	    {"api-key-env", required_argument, NULL, 1},
	    {"api-key-file", required_argument, NULL, 1},
	    {"server-timeout", required_argument, NULL, 1},
	    {"insecure", no_argument, NULL, 1},
	    {"config", required_argument, NULL, 2},
	    {NULL, 0, NULL, 0},
	};
	const char *keys[16], *vals[16], *cfg_file = NULL;
	struct config cfg;
	char err[1024];
	size_t nk = 0;
	bool json = false;
	int c, li, status;

	config_init(&cfg);
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, &li)) != -1) {
		if (c == 'h') {
			models_usage(stdout);
			config_free(&cfg);
			return 0;
		}
		if (c == 'j') {
			json = true;
		} else if (c == 2) {
			cfg_file = optarg;
		} else if (c == 1 && nk < 16) {
			keys[nk] = lo[li].name;
			vals[nk++] = optarg ? optarg : "true";
		} else {
			models_usage(stderr);
			config_free(&cfg);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "parley: unexpected argument '%s'\n",
		        argv[optind]);
		config_free(&cfg);
		return 2;
	}
	if (config_load_file(&cfg, cfg_file, err, sizeof(err))) {
		fprintf(stderr, "parley: %s\n", err);
		config_free(&cfg);
		return 2;
	}
	for (size_t i = 0; i < nk; i++)
		if (config_set(&cfg, keys[i], vals[i], err, sizeof(err))) {
			fprintf(stderr, "parley: --%s\n", err);
			config_free(&cfg);
			return 2;
		}
	status =
	    cfg.server ? models_remote(&cfg, json) : models_local(&cfg, json);
	config_free(&cfg);
	return status;
}

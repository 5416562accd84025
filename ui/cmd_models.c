/*
 * cmd_models.c - `parley models --server URL`: the models an
 * OpenAI-compatible server offers (GET /v1/models), one per line; and the
 * API key lookup shared with the chat (cmd_api_key).
 */
#include "cmd.h"

#include "config.h"
#include "remote.h"

#include <getopt.h>
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

static void models_usage(FILE *fp)
{
	fputs("usage: parley models --server URL [OPTIONS]\n"
	      "\n"
	      "List the models an OpenAI-compatible server (vLLM, SGLang, "
	      "llama.cpp's\nserver, ollama) offers, one per line; the first"
	      " is what --server uses\nwithout --server-model.\n"
	      "\n"
	      "Options:\n"
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

int cmd_models(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"help", no_argument, NULL, 'h'},
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
	struct remote_opts ro = {0};
	struct remote *r = NULL;
	char err[1024], *key = NULL, **names = NULL;
	size_t n = 0, nk = 0;
	int c, li, status = 1;

	config_init(&cfg);
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, &li)) != -1) {
		if (c == 'h') {
			models_usage(stdout);
			config_free(&cfg);
			return 0;
		}
		if (c == 2) {
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
	if (cfg.server == NULL) {
		fputs("parley: models needs --server URL (or server in the "
		      "config)\n",
		      stderr);
		config_free(&cfg);
		return 2;
	}
	if (cmd_api_key(&cfg, &key))
		goto out;
	ro.url = cfg.server;
	ro.model = "-"; /* not needed: do not ask for the list twice */
	ro.api_key = key;
	ro.insecure = cfg.insecure;
	ro.timeout_s = cfg.server_timeout;
	if (remote_open(&ro, &r, err, sizeof(err)) ||
	    remote_models(r, &names, &n, err, sizeof(err))) {
		fprintf(stderr, "parley: %s\n", err);
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		printf("%s\n", names[i]);
	if (n == 0)
		fprintf(stderr, "parley: %s lists no models\n", remote_url(r));
	status = fflush(stdout) == 0 && n > 0 ? 0 : 1;
out:
	remote_models_free(names, n);
	remote_close(r);
	cmd_key_free(key);
	config_free(&cfg);
	return status;
}

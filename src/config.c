/*
 * config.c - chat options (see config.h).
 */
#include "config.h"

#include "gguf.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum config_type { CT_FLOAT, CT_INT, CT_U64, CT_STR, CT_BOOL, CT_STOP };

/* One option: its key, type, range and where it goes. */
struct config_opt {
	const char *key;       /* long option name and file key */
	enum config_type type; /* how the value is parsed */
	double lo, hi;         /* accepted range (numbers) */
	unsigned set_bit;      /* CONFIG_SET_* or 0 */
	const char *help;      /* one line */
};

static const struct config_opt config_opts[] = {
    {"model", CT_STR, 0, 0, 0, "GGUF model file"},
    {"system", CT_STR, 0, 0, 0, "system prompt"},
    {"template", CT_STR, 0, 0, 0, "chat template: name or .jinja file"},
    {"db", CT_STR, 0, 0, 0, "conversation database file"},
    {"backend", CT_STR, 0, 0, 0,
     "engine: auto (GPU when present), cuda or cpu (auto)"},
    {"temp", CT_FLOAT, 0, 100, CONFIG_SET_TEMP,
     "temperature, 0 = greedy (default 0.8)"},
    {"top-k", CT_INT, 0, 1e9, CONFIG_SET_TOP_K, "top-k, 0 = off (40)"},
    {"top-p", CT_FLOAT, 1e-9, 1, CONFIG_SET_TOP_P, "top-p, 1 = off (0.95)"},
    {"min-p", CT_FLOAT, 0, 1, CONFIG_SET_MIN_P, "min-p, 0 = off (0.05)"},
    {"repeat-penalty", CT_FLOAT, 1e-6, 100, CONFIG_SET_REPEAT,
     "repetition penalty, 1 = off (1.0)"},
    {"repeat-last-n", CT_INT, -1, 1e9, CONFIG_SET_REPEAT_N,
     "tokens the penalty looks back, -1 = all (64)"},
    {"seed", CT_U64, 0, 0, 0, "sampler seed (default: from the clock)"},
    {"n-predict", CT_INT, -1, 1e9, 0,
     "reply limit in tokens, -1 = none "
     "(512)"},
    {"ctx", CT_INT, 0, 1048576, 0,
     "context in tokens, 0 = model's, "
     "at most 4096 (0)"},
    {"threads", CT_INT, 0, 1024, 0, "CPU threads, 0 = all (0)"},
    {"kv-type", CT_STR, 0, 0, 0,
     "KV cache type: f16 or q8_0 (f32 on the CPU; the backend's)"},
    {"stop", CT_STOP, 0, 0, 0, "stop string (repeatable)"},
    {"save-kv", CT_BOOL, 0, 0, 0,
     "save the KV cache with the "
     "conversation (false)"},
    {"verbose", CT_BOOL, 0, 0, 0,
     "speed and context after each reply "
     "(false)"},
    {"verify", CT_BOOL, 0, 0, 0,
     "check every step against the CPU "
     "reference (false)"},
    {"context-shift", CT_BOOL, 0, 0, 0,
     "a full context shifts the kept turns' cache instead of evaluating "
     "them again (on)"},
    {"full-window-cache", CT_BOOL, 0, 0, 0,
     "sliding-window layers keep every position, not their window and "
     "2,048 before it (off)"},
    {"server", CT_STR, 0, 0, 0, "OpenAI-compatible server URL: a remote model"},
    {"server-model", CT_STR, 0, 0, 0, "the server's model (its first)"},
    {"api-key-env", CT_STR, 0, 0, 0,
     "environment variable holding the API key"},
    {"api-key-file", CT_STR, 0, 0, 0, "file holding the API key (mode 600)"},
    {"server-timeout", CT_INT, 1, 86400, 0,
     "seconds to connect or of server silence (60)"},
    {"insecure", CT_BOOL, 0, 0, 0,
     "allow plain http to a non-local server (false)"},
    {"models-dir", CT_STR, 0, 0, 0,
     "folder of GGUF models for -m NAME (repeatable, or a:b)"},
    {"think", CT_STR, 0, 0, 0,
     "the template's enable_thinking: on or off (Qwen3's, Gemma 4's)"},
    {"thinking", CT_BOOL, 0, 0, 0,
     "-p prints a thinking model's reasoning too (false)"},
    {"hide-thinking", CT_BOOL, 0, 0, 0,
     "the plain REPL does not print the reasoning (false)"},
    {"reasoning", CT_STR, 0, 0, 0,
     "reasoning_effort: low, medium or high (gpt-oss's template)"},
};

#define CONFIG_N_OPTS (sizeof(config_opts) / sizeof(config_opts[0]))

void config_init(struct config *c)
{
	memset(c, 0, sizeof(*c));
	sampler_config_default(&c->samp);
	c->n_predict = 512;
}

void config_free(struct config *c)
{
	free(c->model);
	free(c->system);
	free(c->template_name);
	free(c->db);
	free(c->backend);
	free(c->server);
	free(c->server_model);
	free(c->api_key_env);
	free(c->api_key_file);
	free(c->models_dir);
	for (size_t i = 0; i < c->n_stops; i++)
		free(c->stops[i]);
	memset(c, 0, sizeof(*c));
}

const char *config_keys(void)
{
	static char buf[4096];

	if (buf[0] == '\0') {
		size_t n = 0;

		for (size_t i = 0; i < CONFIG_N_OPTS && n < sizeof(buf); i++)
			n += (size_t)snprintf(
			    buf + n, sizeof(buf) - n, "  %-15s %s\n",
			    config_opts[i].key, config_opts[i].help);
	}
	return buf;
}

/* Replace *DST by a copy of V. */
static int config_str(char **dst, const char *v)
{
	char *d = strdup(v);

	if (d == NULL)
		return -1;
	free(*dst);
	*dst = d;
	return 0;
}

/* Add the folders V (one, or a colon list) to models-dir: the key adds
   rather than replaces, so the file and the command line both count. */
static int config_models_dir(struct config *c, const char *v, char *err,
                             size_t errlen)
{
	size_t n = c->models_dir ? strlen(c->models_dir) : 0, nv = strlen(v);
	char *d;

	if (v[0] == '\0') {
		snprintf(err, errlen, "models-dir: an empty folder name");
		return -1;
	}
	d = realloc(c->models_dir, n + nv + 2);
	if (d == NULL) {
		snprintf(err, errlen, "models-dir: out of memory");
		return -1;
	}
	if (n > 0)
		d[n++] = ':';
	memcpy(d + n, v, nv + 1);
	c->models_dir = d;
	return 0;
}

/* reasoning: the template's reasoning_effort, kept as 1..3. */
static int config_reasoning(struct config *c, const char *v, char *err,
                            size_t errlen)
{
	static const char *const lv[] = {"low", "medium", "high"};

	for (int k = 0; k < 3; k++)
		if (strcmp(v, lv[k]) == 0) {
			c->reasoning = k + 1;
			return 0;
		}
	snprintf(err, errlen, "reasoning: '%s' is not low, medium or high", v);
	return -1;
}

/* Parse a whole number or a float in [lo, hi]. */
static int config_num(const struct config_opt *o, const char *v, double *out,
                      char *err, size_t errlen)
{
	char *end;
	double d;

	errno = 0;
	d = strtod(v, &end);
	if (end == v || *end != '\0' || errno || !isfinite(d) || d < o->lo ||
	    d > o->hi || (o->type == CT_INT && d != floor(d))) {
		snprintf(err, errlen, "%s: '%s' is not %s in [%g, %g]", o->key,
		         v, o->type == CT_INT ? "an integer" : "a number",
		         o->lo, o->hi);
		return -1;
	}
	*out = d;
	return 0;
}

/* Where the string option KEY goes. */
static char **config_str_slot(struct config *c, const char *key)
{
	if (strcmp(key, "model") == 0)
		return &c->model;
	if (strcmp(key, "system") == 0)
		return &c->system;
	if (strcmp(key, "db") == 0)
		return &c->db;
	if (strcmp(key, "backend") == 0)
		return &c->backend;
	if (strcmp(key, "server") == 0)
		return &c->server;
	if (strcmp(key, "server-model") == 0)
		return &c->server_model;
	if (strcmp(key, "api-key-env") == 0)
		return &c->api_key_env;
	if (strcmp(key, "api-key-file") == 0)
		return &c->api_key_file;
	return &c->template_name;
}

/* Store the parsed number D for option O. */
static void config_put(struct config *c, const struct config_opt *o, double d)
{
	const char *k = o->key;

	if (strcmp(k, "temp") == 0)
		c->samp.temperature = (float)d;
	else if (strcmp(k, "top-k") == 0)
		c->samp.top_k = (int32_t)d;
	else if (strcmp(k, "top-p") == 0)
		c->samp.top_p = (float)d;
	else if (strcmp(k, "min-p") == 0)
		c->samp.min_p = (float)d;
	else if (strcmp(k, "repeat-penalty") == 0)
		c->samp.repeat_penalty = (float)d;
	else if (strcmp(k, "repeat-last-n") == 0)
		c->samp.penalty_last_n = (int32_t)d;
	else if (strcmp(k, "n-predict") == 0)
		c->n_predict = (int32_t)d;
	else if (strcmp(k, "ctx") == 0)
		c->n_ctx = (int32_t)d;
	else if (strcmp(k, "threads") == 0)
		c->n_threads = (int32_t)d;
	else if (strcmp(k, "server-timeout") == 0)
		c->server_timeout = (int32_t)d;
	c->set |= o->set_bit;
}

/* Whether KEY names option NAME; '_' stands for '-' (api_key_file). */
static bool config_key_is(const char *name, const char *key)
{
	for (; *name && *key; name++, key++)
		if (*name != *key && !(*name == '-' && *key == '_'))
			return false;
	return *name == *key;
}

int config_set(struct config *c, const char *key, const char *value, char *err,
               size_t errlen)
{
	const struct config_opt *o = NULL;
	double d;

	for (size_t i = 0; i < CONFIG_N_OPTS; i++)
		if (config_key_is(config_opts[i].key, key))
			o = &config_opts[i];
	if (o == NULL) {
		snprintf(err, errlen, "unknown option '%s'", key);
		return -1;
	}
	key = o->key;
	switch (o->type) {
	case CT_FLOAT:
	case CT_INT:
		if (config_num(o, value, &d, err, errlen))
			return -1;
		config_put(c, o, d);
		return 0;
	case CT_U64: {
		char *end;
		unsigned long long u;

		errno = 0;
		u = strtoull(value, &end, 10);
		if (end == value || *end || errno || value[0] == '-') {
			snprintf(err, errlen,
			         "%s: '%s' is not a number in "
			         "[0, 2^64-1]",
			         key, value);
			return -1;
		}
		c->samp.seed = (uint64_t)u;
		c->seed_set = true;
		return 0;
	}
	case CT_BOOL: {
		bool b;

		if (!strcmp(value, "1") || !strcmp(value, "true") ||
		    !strcmp(value, "yes") || !strcmp(value, "on"))
			b = true;
		else if (!strcmp(value, "0") || !strcmp(value, "false") ||
		         !strcmp(value, "no") || !strcmp(value, "off"))
			b = false;
		else {
			snprintf(err, errlen, "%s: '%s' is not true or false",
			         key, value);
			return -1;
		}
		if (strcmp(key, "save-kv") == 0)
			c->save_kv = b;
		else if (strcmp(key, "insecure") == 0)
			c->insecure = b;
		else if (strcmp(key, "verify") == 0)
			c->verify = b;
		else if (strcmp(key, "thinking") == 0)
			c->thinking = b;
		else if (strcmp(key, "hide-thinking") == 0)
			c->hide_thinking = b;
		else if (strcmp(key, "context-shift") == 0)
			c->no_context_shift = !b;
		else if (strcmp(key, "full-window-cache") == 0)
			c->full_window_cache = b;
		else
			c->verbose = b;
		return 0;
	}
	case CT_STOP:
		if (value[0] == '\0' || c->n_stops >= CONFIG_MAX_STOPS) {
			snprintf(err, errlen, "stop: %s",
			         value[0] ? "too many stop strings (16 at most)"
			                  : "an empty stop string");
			return -1;
		}
		c->stops[c->n_stops] = strdup(value);
		if (c->stops[c->n_stops] == NULL)
			goto nomem;
		c->n_stops++;
		return 0;
	case CT_STR:
		if (strcmp(key, "models-dir") == 0)
			return config_models_dir(c, value, err, errlen);
		if (strcmp(key, "reasoning") == 0)
			return config_reasoning(c, value, err, errlen);
		if (strcmp(key, "kv-type") == 0) {
			enum engine_kv_type t;

			if (engine_kv_type_parse(value, &t) != 0) {
				snprintf(
				    err, errlen,
				    "kv-type: '%s' is not f16, q8_0 or f32",
				    value);
				return -1;
			}
			c->kv_type = t;
			return 0;
		}
		if (strcmp(key, "think") == 0) {
			if (strcmp(value, "on") != 0 &&
			    strcmp(value, "off") != 0) {
				snprintf(err, errlen,
				         "think: '%s' is not on or off", value);
				return -1;
			}
			c->think = strcmp(value, "on") == 0 ? 1 : -1;
			return 0;
		}
		if (config_str(config_str_slot(c, key), value))
			goto nomem;
		return 0;
	}
nomem:
	snprintf(err, errlen, "%s: out of memory", key);
	return -1;
}

/* $VAR if absolute, else $HOME/FALLBACK; then "/parley/NAME". */
static char *config_xdg(const char *var, const char *fallback, const char *name)
{
	const char *x = getenv(var), *home = getenv("HOME");
	char buf[4096];
	int n;

	if (x && x[0] == '/')
		n = snprintf(buf, sizeof(buf), "%s/parley/%s", x, name);
	else if (home && *home)
		n = snprintf(buf, sizeof(buf), "%s/%s/parley/%s", home,
		             fallback, name);
	else
		return NULL;
	if (n < 0 || (size_t)n >= sizeof(buf))
		return NULL;
	return strdup(buf);
}

char *config_default_path(void)
{
	return config_xdg("XDG_CONFIG_HOME", ".config", "config");
}

char *config_default_model(void)
{
	return config_xdg("XDG_CACHE_HOME", ".cache",
	                  "models/SmolLM2-135M-Instruct.Q4_1.gguf");
}

/* mkdir -p of the directories in PATH up to its last '/'. */
static void config_mkdirs(const char *path)
{
	char *p = strdup(path);

	if (p == NULL)
		return;
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = '\0';
			mkdir(p, 0700);
			*s = '/';
		}
	free(p);
}

char *config_state_path(const char *name, bool mk)
{
	char *p = config_xdg("XDG_STATE_HOME", ".local/state", name);

	if (p && mk)
		config_mkdirs(p);
	return p;
}

/* Trim ASCII whitespace at both ends of S in place. */
static char *config_trim(char *s)
{
	size_t n;

	while (*s == ' ' || *s == '\t')
		s++;
	n = strlen(s);
	while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' ||
	                 s[n - 1] == '\n' || s[n - 1] == '\r'))
		s[--n] = '\0';
	return s;
}

int config_load_file(struct config *c, const char *path, char *err,
                     size_t errlen)
{
	char *def = NULL, *line = NULL, msg[512];
	size_t cap = 0;
	ssize_t n;
	FILE *fp;
	int lineno = 0, rc = 0;

	if (path == NULL) {
		def = config_default_path();
		if (def == NULL)
			return 0;
		fp = fopen(def, "r");
		if (fp == NULL) {
			free(def);
			return 0;
		}
		path = def;
	} else if ((fp = fopen(path, "r")) == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	while ((n = getline(&line, &cap, fp)) >= 0) {
		char *s, *k, *v;

		lineno++;
		if (n > CONFIG_MAX_LINE) {
			snprintf(err, errlen,
			         "%s:%d: line longer than %d bytes", path,
			         lineno, CONFIG_MAX_LINE);
			rc = -1;
			break;
		}
		s = config_trim(line);
		if (*s == '\0' || *s == '#')
			continue;
		k = s;
		v = s + strcspn(s, " \t=");
		if (*v) {
			*v++ = '\0';
			v = config_trim(v);
			if (*v == '=')
				v = config_trim(v + 1);
		}
		if (config_set(c, config_trim(k), v, msg, sizeof(msg))) {
			snprintf(err, errlen, "%s:%d: %s", path, lineno, msg);
			rc = -1;
			break;
		}
	}
	free(line);
	fclose(fp);
	free(def);
	return rc;
}

void config_apply_model(struct config *c, const struct gguf_file *f)
{
	double d;
	int64_t i;

	if (f == NULL)
		return;
	if (!(c->set & CONFIG_SET_TEMP) &&
	    gguf_get_f64(f, "general.sampling.temp", &d, NULL, 0) == 0 &&
	    d >= 0 && d <= 100)
		c->samp.temperature = (float)d;
	if (!(c->set & CONFIG_SET_TOP_K) &&
	    gguf_get_i64(f, "general.sampling.top_k", &i, NULL, 0) == 0 &&
	    i >= 0 && i <= INT32_MAX)
		c->samp.top_k = (int32_t)i;
	if (!(c->set & CONFIG_SET_TOP_P) &&
	    gguf_get_f64(f, "general.sampling.top_p", &d, NULL, 0) == 0 &&
	    d > 0 && d <= 1)
		c->samp.top_p = (float)d;
	if (!(c->set & CONFIG_SET_MIN_P) &&
	    gguf_get_f64(f, "general.sampling.min_p", &d, NULL, 0) == 0 &&
	    d >= 0 && d <= 1)
		c->samp.min_p = (float)d;
	if (!(c->set & CONFIG_SET_REPEAT) &&
	    gguf_get_f64(f, "general.sampling.penalty_repeat", &d, NULL, 0) ==
	        0 &&
	    d > 0 && d <= 100)
		c->samp.repeat_penalty = (float)d;
	if (!(c->set & CONFIG_SET_REPEAT_N) &&
	    gguf_get_i64(f, "general.sampling.penalty_last_n", &i, NULL, 0) ==
	        0 &&
	    i >= -1 && i <= INT32_MAX)
		c->samp.penalty_last_n = (int32_t)i;
}

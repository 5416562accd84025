/*
 * config.h - chat options: built-in defaults, the model's own defaults,
 * the config file, the command line (later ones win).
 *
 * NOTES ON THE DESIGN
 *
 * One table (config.c) names every option once: its key (the long option
 * name, also the config-file key), its type and where it is stored.
 * config_set() is the only parser of values, shared by the config file,
 * getopt_long and the REPL's /set, so the three accept the same words.
 *
 * The config file, ${XDG_CONFIG_HOME:-~/.config}/parley/config, holds
 * lines "key = value" (or "key value"); '#' starts a comment line; blank
 * lines are ignored. An unknown key or a bad value is an error naming the
 * file and the line. In a key, '_' may stand for '-' (api_key_file).
 *
 * Precedence: sampler_config_default() < the model's general.sampling.*
 * metadata < config file < command line. Options set by the file or the
 * command line are marked (CONFIG_SET_*), and config_apply_model() only
 * fills the ones left unmarked.
 */
#ifndef PARLEY_CONFIG_H
#define PARLEY_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h" /* enum engine_kv_type */
#include "sampler.h"

struct gguf_file;

#define CONFIG_MAX_STOPS 16    /* --stop given at most this often */
#define CONFIG_MAX_LINE  65536 /* longest config file line */

/* Bits of config.set: which options were given explicitly. */
#define CONFIG_SET_TEMP     (1u << 0)
#define CONFIG_SET_TOP_K    (1u << 1)
#define CONFIG_SET_TOP_P    (1u << 2)
#define CONFIG_SET_MIN_P    (1u << 3)
#define CONFIG_SET_REPEAT   (1u << 4)
#define CONFIG_SET_REPEAT_N (1u << 5)

struct config {
	char *model;         /* model file or NULL (owned) */
	char *system;        /* system prompt or NULL (owned) */
	char *template_name; /* template name/path or NULL (owned) */
	char *db;            /* database path or NULL (owned) */
	char *backend; /* engine backend or NULL: $PARLEY_BACKEND, else auto */
	char *stops[CONFIG_MAX_STOPS]; /* stop strings (owned) */
	size_t n_stops;                /* entries in stops */
	struct sampler_config samp;    /* sampling options */
	bool seed_set;                 /* seed given (else: from the clock) */
	int32_t n_predict;             /* -n: reply limit, <= 0 none */
	int32_t n_ctx;                 /* --ctx: 0 = model's (capped) */
	int32_t n_threads;             /* --threads: 0 = online CPUs */
	enum engine_kv_type kv_type;   /* --kv-type: 0 = the backend's */
	bool save_kv;                  /* --save-kv: keep the KV state */
	bool verbose;                  /* --verbose: stats after replies */
	bool verify;                   /* --verify: check against the CPU */
	bool full_window_cache;        /* --full-window-cache */
	bool no_context_shift;         /* --no-context-shift, context-shift =
	                                  off: a full context evaluates the
	                                  kept turns again */
	unsigned set;                  /* CONFIG_SET_* bits */
	/* a remote model (remote.h); the key itself is never kept here */
	char *server;           /* --server URL or NULL (owned) */
	char *server_model;     /* --server-model NAME or NULL (owned) */
	char *api_key_env;      /* --api-key-env VAR or NULL (owned) */
	char *api_key_file;     /* api-key-file PATH or NULL (owned) */
	int32_t server_timeout; /* seconds, 0: the default */
	bool insecure;          /* --insecure: http to a remote host */
	/* models-dir: folders of GGUF files for `parley models` and -m NAME,
	   colon-separated; each models-dir given adds to it */
	char *models_dir; /* (owned) or NULL */
	/* thinking models (the chat's --think, --thinking, --hide-thinking;
	   the command line wins) */
	int think;          /* enable_thinking: 1 on, -1 off, 0 unset */
	bool thinking;      /* -p prints the reasoning too */
	bool hide_thinking; /* the plain REPL does not print it */
	int reasoning;      /* reasoning_effort: 0 unset, 1 low, 2 medium,
	                       3 high (session_set_reasoning) */
};

/* Defaults: sampler_config_default, n_predict 512, nothing else set. */
void config_init(struct config *c);

/* Free what the config owns and zero it. */
void config_free(struct config *c);

/*
 * Set option KEY ("temp", "top-k", ..., the long option names; see
 * config_keys()) from the text VALUE. Returns 0, or -1 with a message
 * naming the key and the accepted range.
 */
int config_set(struct config *c, const char *key, const char *value, char *err,
               size_t errlen);

/* The keys config_set accepts, one line each with a help text (static). */
const char *config_keys(void);

/*
 * Read the config file PATH (NULL: the default path; a missing default
 * file is not an error). Returns 0, or -1 with "FILE:LINE: message".
 */
int config_load_file(struct config *c, const char *path, char *err,
                     size_t errlen);

/* Fill the sampling options not set by the file or the command line from
   the general.sampling.* keys of the model F (already open: the session's
   file, session_gguf), where it has them with a value in range; a missing
   key, another type or a value out of range leaves the default. F NULL:
   nothing. */
void config_apply_model(struct config *c, const struct gguf_file *f);

/* ${XDG_CONFIG_HOME:-$HOME/.config}/parley/config, malloc'd, or NULL. */
char *config_default_path(void);

/* ${XDG_CACHE_HOME:-$HOME/.cache}/parley/models/SmolLM2-135M-Instruct.
   Q4_1.gguf, malloc'd, or NULL. */
char *config_default_model(void);

/* ${XDG_STATE_HOME:-$HOME/.local/state}/parley/NAME, malloc'd, or NULL;
   the directory is created (mode 0700) when MKDIR. */
char *config_state_path(const char *name, bool mkdir);

#endif /* PARLEY_CONFIG_H */

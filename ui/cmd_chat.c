/*
 * cmd_chat.c - `parley [chat] [OPTIONS]`, `parley -p TEXT` (one shot) and
 * `parley resume [ID|--last]`: open a chat session and hand it to a front
 * end: the full-screen UI on a terminal (ui/tui.h), the plain REPL
 * (--plain, pipes, terminals the UI cannot use), the one-shot printer
 * for -p.
 *
 * Options come from, in order (later wins): built-in defaults, the model's
 * general.sampling.* metadata, the config file, the command line
 * (config.h). The sampler seed, when not given, comes from the clock and
 * is shown by --verbose, so any reply can be reproduced.
 */
#include "cmd.h"
#include "repl.h"
#include "tui.h"

#include "config.h"
#include "promptdir.h"
#include "session.h"
#include "store.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CHAT_MAX_OPTS  64          /* options on one command line */
#define CHAT_MAX_STDIN (64u << 20) /* -p - reads at most this much */

/* Set by SIGINT; the session and the REPL poll it (lock-free atomic,
   so the handler may store it). */
static atomic_int chat_intr;

static void chat_on_sigint(int sig)
{
	(void)sig;
	atomic_store(&chat_intr, 1);
}

/* What the command line asked for, besides config options. */
struct chat_args {
	const char *prompt;   /* -p TEXT, or NULL */
	const char *cfg_file; /* --config FILE, or NULL */
	bool plain;           /* --plain */
	bool no_store;        /* --no-store */
	bool no_reports;      /* --no-reports */
	bool last;            /* resume --last */
	int64_t conv_id;      /* resume ID */
	bool model_given;     /* -m or model in the config */
	bool model_cli;       /* -m on the command line */
	bool server_cli;      /* --server on the command line */
	bool system_given;    /* --system on the command line */
	char *preset;         /* --system-preset text (owned) */
	bool thinking;        /* --thinking: -p prints the reasoning too */
	bool hide_thinking;   /* --hide-thinking: the REPL does not show it */
	int think;            /* --think[=on|off]: 1 / -1, 0 not given */
};

enum {
	OPT_PLAIN = 256,
	OPT_NO_STORE,
	OPT_NO_REPORTS,
	OPT_CONFIG,
	OPT_LAST,
	OPT_PRESET,
	OPT_THINKING,
	OPT_HIDE_THINKING,
	OPT_THINK,
	OPT_NO_CONTEXT_SHIFT,
	OPT_FULL_WINDOW_CACHE,
	OPT_KEY, /* options that go straight to config_set */
};

static const struct option chat_long[] = {
    {"help", no_argument, NULL, 'h'},
    {"model", required_argument, NULL, 'm'},
    {"prompt", required_argument, NULL, 'p'},
    {"n-predict", required_argument, NULL, 'n'},
    {"verbose", no_argument, NULL, 'v'},
    {"plain", no_argument, NULL, OPT_PLAIN},
    {"thinking", no_argument, NULL, OPT_THINKING},
    {"hide-thinking", no_argument, NULL, OPT_HIDE_THINKING},
    {"think", optional_argument, NULL, OPT_THINK},
    {"no-store", no_argument, NULL, OPT_NO_STORE},
    {"no-reports", no_argument, NULL, OPT_NO_REPORTS},
    {"config", required_argument, NULL, OPT_CONFIG},
    {"last", no_argument, NULL, OPT_LAST},
    {"system", required_argument, NULL, OPT_KEY},
    {"system-preset", required_argument, NULL, OPT_PRESET},
    {"template", required_argument, NULL, OPT_KEY},
    {"db", required_argument, NULL, OPT_KEY},
    {"temp", required_argument, NULL, OPT_KEY},
    {"top-k", required_argument, NULL, OPT_KEY},
    {"top-p", required_argument, NULL, OPT_KEY},
    {"min-p", required_argument, NULL, OPT_KEY},
    {"repeat-penalty", required_argument, NULL, OPT_KEY},
    {"repeat-last-n", required_argument, NULL, OPT_KEY},
    {"seed", required_argument, NULL, OPT_KEY},
    {"ctx", required_argument, NULL, OPT_KEY},
    {"threads", required_argument, NULL, OPT_KEY},
    {"kv-type", required_argument, NULL, OPT_KEY},
    {"backend", required_argument, NULL, OPT_KEY},
    {"stop", required_argument, NULL, OPT_KEY},
    {"save-kv", no_argument, NULL, OPT_KEY},
    {"verify", no_argument, NULL, OPT_KEY},
    {"no-context-shift", no_argument, NULL, OPT_NO_CONTEXT_SHIFT},
    {"full-window-cache", no_argument, NULL, OPT_FULL_WINDOW_CACHE},
    {"server", required_argument, NULL, OPT_KEY},
    {"server-model", required_argument, NULL, OPT_KEY},
    {"api-key-env", required_argument, NULL, OPT_KEY},
    {"api-key-file", required_argument, NULL, OPT_KEY},
    {"server-timeout", required_argument, NULL, OPT_KEY},
    {"insecure", no_argument, NULL, OPT_KEY},
    {"models-dir", required_argument, NULL, OPT_KEY},
    {"reasoning", required_argument, NULL, OPT_KEY},
    {NULL, 0, NULL, 0},
};

static void chat_usage(FILE *fp, bool resume)
{
	if (resume)
		fputs(
		    "usage: parley resume [ID | --last] [OPTIONS]\n"
		    "\n"
		    "Continue a stored conversation (default: the most recent"
		    ") as if\nparley had never stopped. With -p TEXT, send one"
		    " message and print\nthe reply.\n\n",
		    fp);
	else
		fputs(
		    "usage: parley [chat] [OPTIONS]\n"
		    "       parley -p TEXT [OPTIONS]     (one shot; TEXT - "
		    "reads stdin)\n"
		    "\n"
		    "Chat with a GGUF model: on a terminal the full-screen UI"
		    " (F1 lists its\nkeys and commands), else a plain REPL; or"
		    " with -p one message whose\nreply is printed on stdout."
		    "\n\n",
		    fp);
	fputs(
	    "Options:\n"
	    "  -m, --model NAME        GGUF file, or a name parley models "
	    "lists\n"
	    "                          (qwen3:8b, org/repo:Q4_K_M, a "
	    "prefix;\n"
	    "                          default: the cache's SmolLM2-135M)\n"
	    "      --models-dir DIR    more GGUF files for -m NAME\n"
	    "  -p, --prompt TEXT       one shot: send TEXT, print the reply,"
	    " exit\n"
	    "  -n, --n-predict N       reply limit in tokens, -1 = none "
	    "(512)\n"
	    "      --ctx N             context in tokens (model's, at most "
	    "4096)\n"
	    "      --system TEXT       system prompt\n"
	    "      --system-preset NAME  a built-in system prompt "
	    "(parley templates)\n"
	    "      --template NAME     chat template: model's, chatml, or a "
	    ".jinja file\n"
	    "      --temp X            temperature, 0 = greedy (0.8)\n"
	    "      --top-k N           top-k, 0 = off (40)\n"
	    "      --top-p X           top-p, 1 = off (0.95)\n"
	    "      --min-p X           min-p, 0 = off (0.05)\n"
	    "      --repeat-penalty X  repetition penalty, 1 = off (1.0)\n"
	    "      --repeat-last-n N   tokens the penalty looks back (64)\n"
	    "      --seed N            sampler seed (default: the clock)\n"
	    "      --stop TEXT         stop string (repeatable)\n"
	    "      --threads N         CPU threads (all)\n"
	    "      --kv-type T         KV cache type: f16 or q8_0 (half the"
	    " memory\n"
	    "                          of f16); f32 on the CPU (default: "
	    "f16 on a\n"
	    "                          GPU, f32 on the CPU)\n"
	    "      --backend NAME      engine: auto (GPU when present), cuda "
	    "or cpu\n"
	    "                          (default: $PARLEY_BACKEND, else auto)\n"
	    "      --save-kv           keep the KV cache with the "
	    "conversation\n"
	    "      --verify            check every step against the CPU "
	    "reference\n"
	    "                          (slow; a summary after each reply, "
	    "/verify)\n"
	    "      --no-context-shift  a full context: evaluate the kept "
	    "turns again\n"
	    "                          instead of shifting their cache "
	    "(RoPE models)\n"
	    "      --full-window-cache sliding-window layers keep every "
	    "position\n"
	    "                          (the default keeps each one's window, "
	    "2,048\n"
	    "                          before it and copies of it at each "
	    "turn's end;\n"
	    "                          a branch further back evaluates the "
	    "chat again)\n"
	    "      --server URL        a remote model: an OpenAI-compatible "
	    "server\n"
	    "                          (vLLM, SGLang, llama.cpp, ollama); "
	    "no -m then\n"
	    "      --server-model NAME the server's model (default: its "
	    "first)\n"
	    "      --api-key-env VAR   the server's API key is in $VAR\n"
	    "      --api-key-file FILE the API key is in FILE (mode 600)\n"
	    "      --server-timeout N  seconds to connect or of silence "
	    "(60)\n"
	    "      --insecure          allow plain http to a non-local "
	    "server\n"
	    "      --think[=on|off]    set the template's enable_thinking "
	    "(templates\n"
	    "                          that read it: Qwen3's, Gemma 4's); also "
	    "/think "
	    "on|off\n"
	    "      --reasoning LEVEL   the template's reasoning_effort: low, "
	    "medium\n"
	    "                          or high (gpt-oss's); also /reasoning\n"
	    "      --thinking          -p: print the reasoning too, between "
	    "<think>\n"
	    "                          and </think> (default: the answer "
	    "only)\n"
	    "      --hide-thinking     plain REPL: do not print the "
	    "reasoning\n"
	    "      --plain             the plain REPL, not the full-screen"
	    " UI\n"
	    "      --no-store          do not store the conversation\n"
	    "      --no-reports        do not store the token reports "
	    "(probabilities)\n"
	    "      --db FILE           conversation database\n"
	    "      --config FILE       config file (default "
	    "$XDG_CONFIG_HOME/parley/config)\n"
	    "  -v, --verbose           speed, context and seed after each "
	    "reply\n"
	    "  -h, --help              this text\n",
	    fp);
	if (resume)
		fputs(
		    "      --last              the most recent conversation\n",
		    fp);
}

/* A positive conversation id from S, or 0. */
static int64_t chat_parse_id(const char *s)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (end == s || *end || errno || v <= 0)
		return 0;
	return v;
}

/*
 * Parse ARGV into CFG and A: options are collected first and applied
 * after the config file, so that the command line wins. Returns 0, 2 on
 * a usage error, or -1 for --help (printed).
 */
static int chat_parse(int argc, char **argv, bool resume, struct config *cfg,
                      struct chat_args *a)
{
	const char *keys[CHAT_MAX_OPTS], *vals[CHAT_MAX_OPTS];
	size_t n = 0;
	char err[512];
	int c, li;

	optind = 1;
	while ((c = getopt_long(argc, argv, "hm:p:n:v", chat_long, &li)) !=
	       -1) {
		const char *key = NULL, *val = optarg;

		switch (c) {
		case 'h':
			chat_usage(stdout, resume);
			return -1;
		case 'm':
			key = "model";
			a->model_given = true;
			a->model_cli = true;
			break;
		case 'p':
			a->prompt = optarg;
			break;
		case 'n':
			key = "n-predict";
			break;
		case 'v':
			key = "verbose";
			val = "true";
			break;
		case OPT_PLAIN:
			a->plain = true;
			break;
		case OPT_NO_STORE:
			a->no_store = true;
			break;
		case OPT_THINKING:
			a->thinking = true;
			break;
		case OPT_HIDE_THINKING:
			a->hide_thinking = true;
			break;
		case OPT_THINK:
			if (optarg == NULL || strcmp(optarg, "on") == 0) {
				a->think = 1;
			} else if (strcmp(optarg, "off") == 0) {
				a->think = -1;
			} else {
				fprintf(stderr,
				        "parley: --think takes on or off, not "
				        "'%s'\n",
				        optarg);
				return 2;
			}
			break;
		case OPT_NO_REPORTS:
			a->no_reports = true;
			break;
		case OPT_NO_CONTEXT_SHIFT: /* config key context-shift */
			key = "context-shift";
			val = "off";
			break;
		case OPT_FULL_WINDOW_CACHE:
			key = "full-window-cache";
			val = "on";
			break;
		case OPT_CONFIG:
			a->cfg_file = optarg;
			break;
		case OPT_LAST:
			if (!resume) {
				fputs("parley: --last belongs to parley "
				      "resume\n",
				      stderr);
				return 2;
			}
			a->last = true;
			break;
		case OPT_PRESET:
			free(a->preset);
			if (promptdir_system_preset(optarg, &a->preset, err,
			                            sizeof(err))) {
				fprintf(stderr, "parley: %s\n", err);
				return 2;
			}
			key = "system";
			val = a->preset;
			a->system_given = true;
			break;
		case OPT_KEY:
			key = chat_long[li].name;
			if (strcmp(key, "system") == 0)
				a->system_given = true;
			if (strcmp(key, "server") == 0)
				a->server_cli = true;
			if (val == NULL)
				val = "true";
			break;
		default:
			return 2;
		}
		if (key && n < CHAT_MAX_OPTS) {
			keys[n] = key;
			vals[n++] = val;
		}
	}
	if (resume && optind < argc) {
		a->conv_id = chat_parse_id(argv[optind]);
		if (a->conv_id == 0) {
			fprintf(stderr,
			        "parley: '%s' is not a conversation "
			        "id\n",
			        argv[optind]);
			return 2;
		}
		optind++;
	}
	if (optind < argc) {
		fprintf(stderr,
		        "parley: unexpected argument '%s' (try "
		        "--help)\n",
		        argv[optind]);
		return 2;
	}
	if (config_load_file(cfg, a->cfg_file, err, sizeof(err))) {
		fprintf(stderr, "parley: %s\n", err);
		return 2;
	}
	if (cfg->model)
		a->model_given = true;
	for (size_t i = 0; i < n; i++)
		if (config_set(cfg, keys[i], vals[i], err, sizeof(err))) {
			fprintf(stderr, "parley: --%s\n", err);
			return 2;
		}
	/* the config's thinking keys, where the command line said nothing */
	if (a->think == 0)
		a->think = cfg->think;
	a->thinking = a->thinking || cfg->thinking;
	a->hide_thinking = a->hide_thinking || cfg->hide_thinking;
	if (a->model_cli && a->server_cli) {
		fputs("parley: -m (a local model) and --server (a remote one) "
		      "exclude each other\n",
		      stderr);
		return 2;
	}
	if (a->model_cli && cfg->server) { /* -m overrides the config */
		free(cfg->server);
		cfg->server = NULL;
	}
	return 0;
}

/* Read all of stdin (for -p -). Malloc'd, NUL-terminated, or NULL. */
static char *chat_read_stdin(size_t *len)
{
	char *buf = NULL;
	size_t n = 0, cap = 0;

	for (;;) {
		if (cap - n < 4096) {
			char *p;

			if (cap >= CHAT_MAX_STDIN) {
				fprintf(stderr,
				        "parley: standard input is "
				        "larger than %u MiB\n",
				        CHAT_MAX_STDIN >> 20);
				free(buf);
				return NULL;
			}
			p = realloc(buf, cap + 65536);
			if (p == NULL) {
				free(buf);
				return NULL;
			}
			buf = p;
			cap += 65536;
		}
		size_t r = fread(buf + n, 1, cap - n - 1, stdin);

		n += r;
		if (r == 0)
			break;
	}
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		buf[--n] = '\0';
	*len = n;
	return buf;
}

/* One-shot output: the reply streams to stdout. */
struct chat_oneshot {
	bool at_line_start; /* the last byte written was '\n' */
	bool any;           /* anything written */
	bool in_think;      /* --thinking: inside the printed <think> block */
};

/* --thinking: the reasoning between <think> and </think>, as the model
   wrote it (the answer follows after a blank line). */
static void chat_reasoning(void *ud, const char *t, size_t n)
{
	struct chat_oneshot *o = ud;

	if (!o->in_think)
		fputs("<think>\n", stdout);
	o->in_think = true;
	fwrite(t, 1, n, stdout);
	fflush(stdout);
	o->any = true;
	o->at_line_start = n > 0 && t[n - 1] == '\n';
}

/* Close the printed <think> block, if one is open. */
static void chat_think_end(struct chat_oneshot *o)
{
	if (!o->in_think)
		return;
	fputs(o->at_line_start ? "</think>\n\n" : "\n</think>\n\n", stdout);
	o->in_think = false;
	o->at_line_start = true;
}

static void chat_piece(void *ud, const char *t, size_t n)
{
	struct chat_oneshot *o = ud;

	chat_think_end(o);
	fwrite(t, 1, n, stdout);
	fflush(stdout);
	if (n) {
		o->any = true;
		o->at_line_start = t[n - 1] == '\n';
	}
}

static void chat_notice(void *ud, const char *msg)
{
	(void)ud;
	fprintf(stderr, "parley: %s\n", msg);
}

/* The reply ended inside its reasoning (its limit, Ctrl-C): say so on
   stderr, since stdout may hold nothing of it. */
static void chat_unfinished(struct session *s, bool shown)
{
	size_t n;
	const struct session_msg *m = session_messages(s, &n);

	if (n == 0 || !m[n - 1].reasoning_open)
		return;
	fprintf(stderr,
	        "parley: the reply ended inside its reasoning (%d tokens, "
	        "unfinished; no answer yet)%s\n",
	        m[n - 1].n_reasoning, shown ? "" : "; --thinking prints it");
}

/* Print the stored conversation so far (resume on a terminal). */
static void chat_show_history(struct session *s)
{
	size_t n, i;
	const struct session_msg *m = session_messages(s, &n);

	for (i = 0; i < n; i++) {
		if (m[i].role == STORE_ROLE_SYSTEM)
			printf("[system: %s]\n", m[i].content);
		else if (m[i].role == STORE_ROLE_USER)
			printf("> %s\n", m[i].content);
		else
			printf("%s\n%s", m[i].content,
			       m[i].finish == STORE_FINISH_NONE ||
			               m[i].finish == STORE_FINISH_INTERRUPTED
			           ? "[stopped]\n"
			           : "");
	}
	fflush(stdout);
}

/* The model for a resumed conversation: -m, else the one it used. */
static int chat_resume_model(struct store *st, struct chat_args *a,
                             struct config *cfg)
{
	struct store_conv c;
	struct stat sb;
	char err[512];

	if (a->last) {
		struct store_conv *v = NULL;
		size_t n = 0;

		if (store_conv_list(st, 0, 1, &v, &n, err, sizeof(err)) !=
		    STORE_OK) {
			fprintf(stderr, "parley: %s\n", err);
			return -1;
		}
		if (n == 0) {
			fputs("parley: no conversation to resume\n", stderr);
			store_conv_list_free(v, n);
			return -1;
		}
		a->conv_id = v[0].id;
		store_conv_list_free(v, n);
	}
	if (store_conv_get(st, a->conv_id, &c, NULL, NULL, err, sizeof(err)) !=
	    STORE_OK) {
		fprintf(stderr, "parley: %s\n", err);
		return -1;
	}
	if (!a->model_given && c.model_path[0] &&
	    stat(c.model_path, &sb) == 0) {
		free(cfg->model);
		cfg->model = strdup(c.model_path);
	}
	if (cfg->template_name == NULL && c.template_name[0] &&
	    strcmp(c.template_name, "model") != 0) {
		cfg->template_name = strdup(c.template_name);
	}
	store_conv_clear(&c);
	/* the server (or the local engine) that answered last, unless the
	   command line names another */
	char *srv = NULL, *smod = NULL;

	if (!a->model_cli && !a->server_cli &&
	    store_conv_origin(st, a->conv_id, &srv, &smod, err, sizeof(err)) ==
	        STORE_OK) {
		free(cfg->server);
		cfg->server = NULL;
		if (srv[0]) {
			cfg->server = srv;
			srv = NULL;
			if (smod[0]) {
				free(cfg->server_model);
				cfg->server_model = smod;
				smod = NULL;
			}
		}
	}
	free(srv);
	free(smod);
	return 0;
}

/* -m NAME or the config's model, when not a path: the file of the local
   model of that name (cmd_model_resolve), and in *LISTED its listed name
   (NULL for a path), what the status bar and the store show rather than
   a blob's file name. 0, or -1 (printed). */
static int chat_model_name(struct config *cfg, char **listed)
{
	char err[1024], *path;

	if (cmd_model_resolve_name(cfg, cfg->model, &path, listed, err,
	                           sizeof(err))) {
		fprintf(stderr, "parley: %s\n", err);
		return -1;
	}
	free(cfg->model);
	cfg->model = path;
	return 0;
}

/* Run the chat: shared by `parley`, `parley chat` and `parley resume`. */
static int chat_main(int argc, char **argv, bool resume)
{
	struct config cfg;
	struct chat_args a;
	struct session_opts so;
	struct session *s = NULL;
	struct store *st = NULL;
	struct sigaction sa;
	char err[1024], *dbpath = NULL, *key = NULL, *listed = NULL;
	int rc, status = 1;

	memset(&a, 0, sizeof(a));
	config_init(&cfg);
	rc = chat_parse(argc, argv, resume, &cfg, &a);
	if (rc) {
		free(a.preset);
		config_free(&cfg);
		return rc < 0 ? 0 : rc;
	}
	if (resume && a.no_store) {
		fputs("parley: resume needs the store (no --no-store)\n",
		      stderr);
		goto out;
	}
	if (resume && !a.last && a.conv_id == 0)
		a.last = true;
	if (!a.no_store) {
		if (store_path_resolve(cfg.db, &dbpath, err, sizeof(err)) ||
		    store_open(dbpath, 0, &st, err, sizeof(err))) {
			fprintf(stderr, "parley: %s\n", err);
			goto out;
		}
	}
	if (resume && chat_resume_model(st, &a, &cfg))
		goto out;
	if (cfg.server) {
		if (cmd_api_key(&cfg, &key))
			goto out;
	} else if (cfg.model == NULL &&
	           (cfg.model = config_default_model()) == NULL) {
		fputs("parley: no model (-m FILE) and no HOME for the default "
		      "one\n",
		      stderr);
		goto out;
	} else if (chat_model_name(&cfg, &listed)) {
		goto out;
	}
	if (cfg.server == NULL && access(cfg.model, R_OK) != 0) {
		fprintf(stderr, "parley: %s: %s%s\n", cfg.model,
		        strerror(errno),
		        a.model_given ? ""
		                      : " (run ./setup.sh model, or give "
		                        "-m FILE)");
		goto out;
	}
	if (!cfg.seed_set)
		cfg.samp.seed =
		    (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);

	memset(&so, 0, sizeof(so));
	so.model_path = cfg.model;
	so.model_name = listed;
	so.template_name = cfg.template_name;
	so.system_prompt = cfg.system;
	so.sampling = cfg.samp;
	so.seed_random = !cfg.seed_set; /* the clock's, above */
	so.n_ctx = cfg.n_ctx;
	so.n_threads = cfg.n_threads;
	so.kv_type = (int)cfg.kv_type;
	so.backend = cfg.backend ? cfg.backend : cmd_default_backend();
	so.n_predict = cfg.n_predict;
	for (size_t i = 0; i < cfg.n_stops; i++)
		so.stops[so.n_stops++] = cfg.stops[i];
	so.store = st;
	so.store_reports = !a.no_reports; /* invisible in the output */
	so.conv_id = resume ? a.conv_id : 0;
	so.use_kv_slot = cfg.save_kv;
	so.verify = cfg.verify;
	so.no_context_shift = cfg.no_context_shift;
	so.full_window_cache = cfg.full_window_cache;
	so.cancel = &chat_intr;
	so.notice = chat_notice;
	so.server = cfg.server;
	so.server_model = cfg.server_model;
	so.api_key = key; /* kept until the end: the UI may open again */
	so.insecure = cfg.insecure;
	so.server_timeout = cfg.server_timeout;
	so.think = a.think;
	so.reasoning = cfg.reasoning;
	if (session_open(&so, &s, err, sizeof(err))) {
		fprintf(stderr, "parley: %s\n", err);
		goto out;
	}
	/* the model's general.sampling.* defaults, read from the file the
	   session opened, under the config file and the command line */
	config_apply_model(&cfg, session_gguf(s));
	if (session_set_sampling(s, &cfg.samp, err, sizeof(err))) {
		fprintf(stderr, "parley: %s\n", err);
		goto out;
	}
	if (resume && a.system_given &&
	    session_set_system(s, cfg.system, err, sizeof(err))) {
		fprintf(stderr, "parley: %s\n", err);
		goto out;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = chat_on_sigint;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL); /* no SA_RESTART: reads return EINTR */

	if (a.prompt) {
		struct chat_oneshot o = {true, false, false};
		struct session_cb cb = {
		    chat_piece, NULL, chat_notice,
		    &o,         NULL, a.thinking ? chat_reasoning : NULL};
		struct session_stats ss;
		char *text = NULL;
		size_t len;

		if (strcmp(a.prompt, "-") == 0) {
			text = chat_read_stdin(&len);
			if (text == NULL)
				goto out;
		} else {
			len = strlen(a.prompt);
		}
		rc = session_send(s, text ? text : a.prompt, len, &cb, &ss, err,
		                  sizeof(err));
		free(text);
		if (o.in_think) /* the reply ended inside its reasoning */
			fputs(o.at_line_start ? "</think>\n" : "\n</think>\n",
			      stdout);
		else if (o.any && !o.at_line_start)
			fputs("\n", stdout);
		fflush(stdout);
		if (rc) {
			fprintf(stderr, "parley: %s\n", err);
			goto out;
		}
		chat_unfinished(s, a.thinking);
		if (cfg.verbose && session_server(s))
			fprintf(
			    stderr,
			    "[conversation %" PRId64 ", seed %" PRIu64
			    ", reply %d tokens in %.0f ms (first text after "
			    "%.0f ms), %s at %s, %s]\n",
			    session_conv_id(s), cfg.samp.seed, ss.n_gen,
			    ss.prefill_ms + ss.decode_ms, ss.prefill_ms,
			    session_server_model(s), session_server(s),
			    store_finish_name(ss.finish));
		else if (cfg.verbose)
			fprintf(stderr,
			        "[conversation %" PRId64 ", seed %" PRIu64
			        ", reply %d tokens in %.0f ms, prompt %d "
			        "tokens (%d new) in %.0f ms, context %d/%d, "
			        "%s]\n",
			        session_conv_id(s), cfg.samp.seed, ss.n_gen,
			        ss.decode_ms, ss.n_prompt, ss.n_prompt_eval,
			        ss.prefill_ms, ss.n_ctx_used, ss.n_ctx,
			        store_finish_name(ss.finish));
		if (cfg.verbose) {
			bool loaded = false;
			double ms = session_restore_ms(s, &loaded);

			if (loaded)
				fprintf(stderr,
				        "[KV cache restored from the "
				        "store in %.0f ms]\n",
				        ms);
		}
		if (ss.verify.n_checked > 0) {
			char line[512];

			fprintf(stderr, "[%s]\n",
			        verify_summary_format(&ss.verify, line,
			                              sizeof(line)));
		}
		status = ss.finish == STORE_FINISH_INTERRUPTED ? 130 : 0;
		goto out;
	}

	struct repl_opts ro;
	bool tty = isatty(0) && isatty(1);
	char *hist = NULL;

	memset(&ro, 0, sizeof(ro));
	ro.interactive = tty;
	ro.verbose = cfg.verbose;
	ro.intr = &chat_intr;
	ro.cfg = &cfg;
	ro.hide_thinking = a.hide_thinking;
	ro.dim = tty && getenv("NO_COLOR") == NULL;
	if (tty && !a.plain) {
		char why[256];

		if (tui_usable(why, sizeof(why))) {
			struct tui_opts to;

			hist = config_state_path("history", true);
			memset(&to, 0, sizeof(to));
			to.so = &so;
			to.history_path = hist;
			to.db_path = a.no_store ? NULL : dbpath;
			to.cfg = &cfg;
			to.resumed = resume;
			status = tui_run(s, &to); /* takes S */
			s = NULL;
			free(hist);
			goto out;
		}
		if (strstr(why, "locale")) /* a terminal lacking only that */
			fprintf(stderr, "parley: %s; using the plain REPL\n",
			        why);
	}
	if (tty) {
		hist = config_state_path("history", true);
		ro.history_path = hist;
		bool loaded = false;
		double ms = session_restore_ms(s, &loaded);

		if (session_server(s))
			fprintf(stderr,
			        "[%s at %s; /help lists the commands]\n",
			        session_server_model(s), session_server(s));
		else {
			const char *base = strrchr(cfg.model, '/');

			fprintf(stderr,
			        "[%s, context %d tokens; /help lists the "
			        "commands]\n",
			        base ? base + 1 : cfg.model, session_n_ctx(s));
		}
		if (resume) {
			chat_show_history(s);
			if (loaded)
				fprintf(stderr,
				        "[KV cache restored in %.0f "
				        "ms]\n",
				        ms);
			fprintf(stderr, "[conversation %" PRId64 " resumed]\n",
			        session_conv_id(s));
		}
		if (cfg.verbose)
			fprintf(stderr, "[seed %" PRIu64 "]\n", cfg.samp.seed);
	}
	status = repl_run(s, &ro);
	free(hist);
out:
	session_close(s);
	store_close(st);
	cmd_key_free(key);
	free(dbpath);
	free(listed);
	free(a.preset);
	config_free(&cfg);
	return status;
}

int cmd_chat(int argc, char **argv)
{
	return chat_main(argc, argv, false);
}

int cmd_resume(int argc, char **argv)
{
	return chat_main(argc, argv, true);
}

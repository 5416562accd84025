/*
 * cmd_history.c - the stored conversations from the command line:
 *
 *   parley list [--all] [-n N]        most recently updated first
 *   parley show ID [--branches]       the transcript of the active branch
 *                                     (--branches: the tree of messages)
 *   parley branch ID MSG_ID           make the branch through MSG_ID active
 *   parley search [--raw] TEXT...     full-text search (FTS5)
 *   parley rename ID TITLE
 *   parley rm ID...
 *   parley export ID [--format md|json] [--logprobs] [-o FILE]
 *   parley import FILE.json|-
 *
 * Every command takes --db FILE (else $PARLEY_DB, else the XDG data
 * directory; store.h) and prints results on stdout, errors on stderr.
 */
#include "cmd.h"

#include "store.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

enum {
	HOPT_DB = 256,
	HOPT_ALL,
	HOPT_RAW,
	HOPT_FORMAT,
	HOPT_BRANCHES,
	HOPT_LOGPROBS
};

static const struct option hist_long[] = {
    {"help", no_argument, NULL, 'h'},
    {"db", required_argument, NULL, HOPT_DB},
    {"all", no_argument, NULL, HOPT_ALL},
    {"raw", no_argument, NULL, HOPT_RAW},
    {"format", required_argument, NULL, HOPT_FORMAT},
    {"branches", no_argument, NULL, HOPT_BRANCHES},
    {"logprobs", no_argument, NULL, HOPT_LOGPROBS},
    {"output", required_argument, NULL, 'o'},
    {"limit", required_argument, NULL, 'n'},
    {NULL, 0, NULL, 0},
};

/* Usage of each command: name, arguments, description. */
static const struct {
	const char *name;
	const char *args;
	const char *what;
} hist_usage_tab[] = {
    {"list", "[--all] [-n N]",
     "stored conversations, newest first "
     "(--all: archived too)"},
    {"show", "ID [--branches]",
     "the transcript of a conversation's active branch (--branches: "
     "every message as a tree, * on the active branch)"},
    {"branch", "ID MSG_ID",
     "make the branch through message MSG_ID active (it continues "
     "with its newest replies)"},
    {"search", "[--raw] [-n N] TEXT...",
     "messages containing all the "
     "words (--raw: an FTS5 query)"},
    {"rename", "ID TITLE", "set a conversation's title"},
    {"rm", "ID...", "delete conversations"},
    {"export", "ID [--format md|json] [--logprobs] [-o FILE]",
     "a conversation as Markdown or JSON (OpenAI messages; --logprobs: "
     "each reply's token log-probabilities, OpenAI's logprobs shape)"},
    {"import", "FILE.json|-",
     "a conversation from JSON (export's format "
     "or a bare messages array)"},
};

/* Options of one history command. */
struct hist_args {
	const char *db;     /* --db */
	bool all;           /* --all */
	bool raw;           /* --raw */
	const char *format; /* --format */
	bool branches;      /* --branches */
	bool logprobs;      /* --logprobs */
	const char *output; /* -o */
	long limit;         /* -n */
};

static void hist_usage(FILE *fp, const char *cmd)
{
	for (size_t i = 0; i < sizeof(hist_usage_tab) / sizeof(*hist_usage_tab);
	     i++)
		if (strcmp(cmd, hist_usage_tab[i].name) == 0)
			fprintf(fp, "usage: parley %s %s [--db FILE]\n\n%s.\n",
			        cmd, hist_usage_tab[i].args,
			        hist_usage_tab[i].what);
}

/* Parse options; returns the index of the first operand, -1 after
   --help, -2 on a usage error. */
static int hist_parse(int argc, char **argv, struct hist_args *a)
{
	int c;

	memset(a, 0, sizeof(*a));
	optind = 1;
	while ((c = getopt_long(argc, argv, "ho:n:", hist_long, NULL)) != -1) {
		switch (c) {
		case 'h':
			hist_usage(stdout, argv[0]);
			return -1;
		case HOPT_DB:
			a->db = optarg;
			break;
		case HOPT_ALL:
			a->all = true;
			break;
		case HOPT_RAW:
			a->raw = true;
			break;
		case HOPT_FORMAT:
			a->format = optarg;
			break;
		case HOPT_BRANCHES:
			a->branches = true;
			break;
		case HOPT_LOGPROBS:
			a->logprobs = true;
			break;
		case 'o':
			a->output = optarg;
			break;
		case 'n': {
			char *end;

			errno = 0;
			a->limit = strtol(optarg, &end, 10);
			if (end == optarg || *end || errno || a->limit < 0) {
				fprintf(stderr,
				        "parley: -n: '%s' is not a "
				        "count\n",
				        optarg);
				return -2;
			}
			break;
		}
		default:
			return -2;
		}
	}
	return optind;
}

/* Open the database (created when missing). NULL after a message. */
static struct store *hist_open(const struct hist_args *a)
{
	struct store *st = NULL;
	char err[1024], *path = NULL;

	if (store_path_resolve(a->db, &path, err, sizeof(err)) ||
	    store_open(path, 0, &st, err, sizeof(err))) {
		fprintf(stderr, "parley: %s\n", err);
		st = NULL;
	}
	free(path);
	return st;
}

/* A conversation id; 0 (after a message) when S is not one. */
static int64_t hist_id(const char *s)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (end == s || *end || errno || v <= 0) {
		fprintf(stderr, "parley: '%s' is not a conversation id\n", s);
		return 0;
	}
	return v;
}

/* Common start: parse, check the operand count, open the store. */
static int hist_begin(int argc, char **argv, struct hist_args *a, int min,
                      int max, struct store **st, int *first)
{
	int i = hist_parse(argc, argv, a);

	if (i == -1)
		return 0;
	if (i < 0)
		return 2;
	if (argc - i < min || (max >= 0 && argc - i > max)) {
		hist_usage(stderr, argv[0]);
		return 2;
	}
	*first = i;
	*st = hist_open(a);
	return *st ? -1 : 1;
}

int cmd_list(int argc, char **argv)
{
	struct hist_args a;
	struct store *st;
	struct store_conv *v = NULL;
	size_t n = 0;
	char err[512], *text;
	int i, rc = hist_begin(argc, argv, &a, 0, 0, &st, &i);
	struct winsize ws;
	int width = 0;

	if (rc >= 0)
		return rc;
	if (isatty(1) && ioctl(1, TIOCGWINSZ, &ws) == 0)
		width = ws.ws_col;
	rc = store_conv_list(st, a.all ? STORE_LIST_ARCHIVED : 0,
	                     (size_t)a.limit, &v, &n, err, sizeof(err));
	if (rc != STORE_OK) {
		fprintf(stderr, "parley: %s\n", err);
		store_close(st);
		return 1;
	}
	text = store_fmt_list(v, n, store_now_ms(), width);
	if (text)
		fputs(text, stdout);
	free(text);
	store_conv_list_free(v, n);
	store_close(st);
	return text ? 0 : 1;
}

int cmd_show(int argc, char **argv)
{
	struct hist_args a;
	struct store *st;
	struct store_conv c;
	struct store_msg *m = NULL;
	size_t n = 0;
	char err[512], *text;
	int i, rc = hist_begin(argc, argv, &a, 1, 1, &st, &i);
	int64_t id;

	if (rc >= 0)
		return rc;
	if ((id = hist_id(argv[i])) == 0) {
		store_close(st);
		return 2;
	}
	if (store_conv_get(st, id, &c, &m, &n, err, sizeof(err)) != STORE_OK) {
		fprintf(stderr, "parley: %s\n", err);
		store_close(st);
		return 1;
	}
	if (a.branches) {
		store_msg_free(m, n);
		if (store_msg_list(st, id, &m, &n, err, sizeof(err)) !=
		    STORE_OK) {
			fprintf(stderr, "parley: %s\n", err);
			store_conv_clear(&c);
			store_close(st);
			return 1;
		}
		text = store_fmt_tree(m, n, c.leaf_id);
	} else {
		char *server = NULL, *smodel = NULL;

		if (store_conv_origin(st, id, &server, &smodel, err,
		                      sizeof(err)) != STORE_OK) {
			fprintf(stderr, "parley: %s\n", err);
			store_msg_free(m, n);
			store_conv_clear(&c);
			store_close(st);
			return 1;
		}
		text = store_fmt_show(&c, server, smodel, m, n);
		free(server);
		free(smodel);
	}
	if (text)
		fputs(text, stdout);
	free(text);
	store_msg_free(m, n);
	store_conv_clear(&c);
	store_close(st);
	return text ? 0 : 1;
}

int cmd_branch(int argc, char **argv)
{
	struct hist_args a;
	struct store *st;
	char err[512];
	int i, rc = hist_begin(argc, argv, &a, 2, 2, &st, &i);
	int64_t id, msg, leaf = 0;

	if (rc >= 0)
		return rc;
	if ((id = hist_id(argv[i])) == 0 || (msg = hist_id(argv[i + 1])) == 0) {
		store_close(st);
		return 2;
	}
	rc = store_conv_select(st, id, msg, &leaf, err, sizeof(err));
	if (rc != STORE_OK)
		fprintf(stderr, "parley: %s\n", err);
	else
		printf("%" PRId64 "\n", leaf);
	store_close(st);
	return rc == STORE_OK ? 0 : 1;
}

int cmd_search(int argc, char **argv)
{
	struct hist_args a;
	struct store *st;
	struct store_hit *h = NULL;
	size_t n = 0, len = 0;
	char err[512], *q;
	int i, rc = hist_begin(argc, argv, &a, 1, -1, &st, &i);

	if (rc >= 0)
		return rc;
	for (int k = i; k < argc; k++)
		len += strlen(argv[k]) + 1;
	q = malloc(len + 1);
	if (q == NULL) {
		store_close(st);
		return 1;
	}
	len = 0;
	for (int k = i; k < argc; k++) {
		size_t l = strlen(argv[k]);

		if (k > i)
			q[len++] = ' ';
		memcpy(q + len, argv[k], l);
		len += l;
	}
	q[len] = '\0';
	rc = store_search(st, q, a.raw ? STORE_SEARCH_RAW : 0, (size_t)a.limit,
	                  NULL, NULL, &h, &n, err, sizeof(err));
	free(q);
	if (rc != STORE_OK) {
		fprintf(stderr, "parley: %s\n", err);
		store_close(st);
		return 1;
	}
	char *text = store_fmt_hits(h, n);

	if (text)
		fputs(text, stdout);
	free(text);
	store_hits_free(h, n);
	store_close(st);
	return n ? 0 : 1;
}

int cmd_rename(int argc, char **argv)
{
	struct hist_args a;
	struct store *st;
	char err[512];
	int i, rc = hist_begin(argc, argv, &a, 2, 2, &st, &i);
	int64_t id;

	if (rc >= 0)
		return rc;
	if ((id = hist_id(argv[i])) == 0) {
		store_close(st);
		return 2;
	}
	rc = store_conv_rename(st, id, argv[i + 1], err, sizeof(err));
	if (rc != STORE_OK)
		fprintf(stderr, "parley: %s\n", err);
	store_close(st);
	return rc == STORE_OK ? 0 : 1;
}

int cmd_rm(int argc, char **argv)
{
	struct hist_args a;
	struct store *st;
	char err[512];
	int i, rc = hist_begin(argc, argv, &a, 1, -1, &st, &i), status = 0;

	if (rc >= 0)
		return rc;
	for (; i < argc; i++) {
		int64_t id = hist_id(argv[i]);

		if (id == 0) {
			status = 2;
			continue;
		}
		if (store_conv_delete(st, id, err, sizeof(err)) != STORE_OK) {
			fprintf(stderr, "parley: %s\n", err);
			status = 1;
		}
	}
	store_close(st);
	return status;
}

int cmd_export(int argc, char **argv)
{
	struct hist_args a;
	struct store *st;
	char err[512], *out = NULL;
	size_t len = 0;
	int i, rc = hist_begin(argc, argv, &a, 1, 1, &st, &i);
	int64_t id;
	FILE *fp = stdout;

	if (rc >= 0)
		return rc;
	if ((id = hist_id(argv[i])) == 0) {
		store_close(st);
		return 2;
	}
	if (a.format && strcmp(a.format, "md") && strcmp(a.format, "json") &&
	    strcmp(a.format, "markdown")) {
		fprintf(stderr, "parley: --format: '%s' is not md or json\n",
		        a.format);
		store_close(st);
		return 2;
	}
	if (a.logprobs && !(a.format && strcmp(a.format, "json") == 0)) {
		fputs("parley: --logprobs needs --format json\n", stderr);
		store_close(st);
		return 2;
	}
	if (a.format && strcmp(a.format, "json") == 0)
		rc = store_export_json_flags(
		    st, id, a.logprobs ? STORE_EXPORT_LOGPROBS : 0, &out, &len,
		    err, sizeof(err));
	else
		rc = store_export_md(st, id, &out, &len, err, sizeof(err));
	store_close(st);
	if (rc != STORE_OK) {
		fprintf(stderr, "parley: %s\n", err);
		return 1;
	}
	if (a.output && strcmp(a.output, "-") != 0 &&
	    (fp = fopen(a.output, "w")) == NULL) {
		fprintf(stderr, "parley: %s: %s\n", a.output, strerror(errno));
		free(out);
		return 1;
	}
	rc = fwrite(out, 1, len, fp) == len &&
	     (len == 0 || out[len - 1] == '\n' || fputc('\n', fp) != EOF);
	if (fp != stdout)
		rc = fclose(fp) == 0 && rc;
	else
		rc = fflush(fp) == 0 && rc;
	free(out);
	if (!rc)
		fprintf(stderr, "parley: write error on %s\n",
		        a.output ? a.output : "standard output");
	return rc ? 0 : 1;
}

int cmd_import(int argc, char **argv)
{
	struct hist_args a;
	struct store *st;
	char err[1024], *buf = NULL;
	size_t n = 0, cap = 0;
	int i, rc = hist_begin(argc, argv, &a, 1, 1, &st, &i);
	int64_t id = 0;
	FILE *fp;

	if (rc >= 0)
		return rc;
	if (strcmp(argv[i], "-") != 0) { /* a file: bounded by its size */
		rc = store_import_file(st, argv[i], &id, err, sizeof(err));
		if (rc == STORE_OK)
			printf("%" PRId64 "\n", id);
		else
			fprintf(stderr, "parley: %s\n", err);
		store_close(st);
		return rc == STORE_OK ? 0 : 1;
	}
	fp = stdin;
	if (fp == NULL) {
		fprintf(stderr, "parley: %s: %s\n", argv[i], strerror(errno));
		store_close(st);
		return 1;
	}
	for (;;) {
		if (n == cap) {
			char *p;

			if (cap > STORE_IMPORT_MAX) {
				fprintf(stderr,
				        "parley: %s: larger than %u "
				        "MiB\n",
				        argv[i], STORE_IMPORT_MAX >> 20);
				goto fail;
			}
			p = realloc(buf, cap + 65536);
			if (p == NULL)
				goto fail;
			buf = p;
			cap += 65536;
		}
		size_t r = fread(buf + n, 1, cap - n, fp);

		n += r;
		if (r == 0)
			break;
	}
	if (ferror(fp)) {
		fprintf(stderr, "parley: %s: read error\n", argv[i]);
		goto fail;
	}
	if (store_import_json(st, buf, n, &id, err, sizeof(err)) != STORE_OK) {
		fprintf(stderr, "parley: %s: %s\n", argv[i], err);
		goto fail;
	}
	printf("%" PRId64 "\n", id);
	free(buf);
	if (fp != stdin)
		fclose(fp);
	store_close(st);
	return 0;
fail:
	free(buf);
	if (fp != stdin)
		fclose(fp);
	store_close(st);
	return 1;
}

/*
 * cmd_pull.c - `parley pull ORG/REPO[:QUANT]`: a model from the Hugging
 * Face hub into its cache (hfpull.h), with a progress bar on a terminal
 * (a line per file otherwise), Ctrl-C leaving a partial file that the
 * next pull continues. The model's path goes to stdout, all else to
 * stderr, so `parley -m "$(parley pull ORG/REPO)"` works.
 */
#include "cmd.h"

#include "hfpull.h"

#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Set by SIGINT; libcurl's progress callback polls it (hfpull_opts). */
static atomic_int pull_cancel;

static void pull_on_sigint(int sig)
{
	(void)sig;
	atomic_store(&pull_cancel, 1);
}

/* The progress display's state. */
struct pull_view {
	bool tty;      /* stderr is a terminal: a bar redrawn in place */
	bool drawn;    /* a bar is on the line now */
	size_t file_i; /* this file's number, from 1 */
	size_t n_files;
};

static void pull_usage(FILE *fp)
{
	fputs(
	    "usage: parley pull [-q] ORG/REPO[:QUANT]\n"
	    "\n"
	    "Download a GGUF model from the Hugging Face hub into its cache\n"
	    "(where huggingface_hub, llama.cpp and `parley models` find it)\n"
	    "and print its path. QUANT picks the file by its quantization,\n"
	    "case-insensitively (Q4_K_M, IQ4_XS, UD-Q4_K_XL, ...); without "
	    "it,\n"
	    "Q4_K_M, or the repository's only model. A split model comes\n"
	    "whole. When QUANT names no file or several, the choices are\n"
	    "listed. Each file is checked against the hub's SHA-256 before it\n"
	    "is used; an interrupted download (Ctrl-C, a broken connection)\n"
	    "continues where it stopped when the same pull runs again.\n"
	    "\n"
	    "  -q, --quiet   no progress, only the path\n"
	    "  -h, --help    this text\n"
	    "\n"
	    "Environment: HF_TOKEN (for gated or private repositories; else\n"
	    "the file $HF_TOKEN_PATH or $HF_HOME/token, readable by you "
	    "only),\n"
	    "HF_ENDPOINT (a mirror; default https://huggingface.co),\n"
	    "HF_HUB_CACHE or HF_HOME (the cache; default\n"
	    "~/.cache/huggingface/hub). The token is never stored or shown.\n"
	    "An ollama name (qwen3:8b) is ollama's to pull.\n",
	    fp);
}

/* BYTES in a short human unit into OUT. */
static void pull_bytes(char *out, size_t n, double bytes)
{
	if (bytes >= 1e9)
		snprintf(out, n, "%.2f GB", bytes / 1e9);
	else if (bytes >= 1e6)
		snprintf(out, n, "%.1f MB", bytes / 1e6);
	else
		snprintf(out, n, "%.0f kB", bytes / 1e3);
}

/* hfpull's progress: the bar (a terminal) or a line per finished file. */
static void pull_progress(void *ud, const struct hfpull_progress *p)
{
	struct pull_view *v = ud;
	double got = (double)(p->done - p->start);
	double rate = p->secs > 0.05 ? got / p->secs : 0;
	char size[32], done[32], speed[32], eta[32] = "";
	const char *base =
	    strrchr(p->path, '/') ? strrchr(p->path, '/') + 1 : p->path;

	pull_bytes(size, sizeof(size), (double)p->size);
	pull_bytes(done, sizeof(done), (double)p->done);
	pull_bytes(speed, sizeof(speed), rate);
	if (p->state == HFPULL_CHECKING) {
		if (v->drawn)
			fputs("\r\033[K", stderr);
		v->drawn = false;
		fprintf(stderr,
		        "[%zu/%zu] %s: continuing after %s (checking them "
		        "first)\n",
		        v->file_i, v->n_files, p->path, done);
	} else if (p->state == HFPULL_GETTING) {
		int pct = p->size ? (int)(100.0 * p->done / p->size) : 100;
		char bar[21];
		double left = rate > 0 ? (p->size - p->done) / rate : -1;

		if (!v->tty)
			return;
		for (int i = 0; i < 20; i++)
			bar[i] = i < pct / 5 ? '#' : '.';
		bar[20] = '\0';
		if (left >= 0)
			snprintf(eta, sizeof(eta), "%d:%02d left",
			         (int)(left / 60), (int)left % 60);
		fprintf(stderr,
		        "\r\033[K[%zu/%zu] %.40s [%s] %3d%% %s/%s %s/s %s",
		        v->file_i, v->n_files, base, bar, pct, done, size,
		        speed, eta);
		v->drawn = true;
	} else {
		if (v->drawn)
			fputs("\r\033[K", stderr);
		v->drawn = false;
		if (p->state == HFPULL_HAD)
			fprintf(stderr,
			        "[%zu/%zu] %s: %s, already in the cache\n",
			        v->file_i, v->n_files, p->path, size);
		else
			fprintf(stderr,
			        "[%zu/%zu] %s: %s%s in %.1f s%s%s%s, SHA-256 "
			        "verified\n",
			        v->file_i, v->n_files, p->path, size,
			        p->start ? " (resumed)" : "", p->secs,
			        rate > 0 ? " (" : "", rate > 0 ? speed : "",
			        rate > 0 ? "/s)" : "");
	}
	fflush(stderr);
}

/* Pull model REPO:QUANT with TOKEN (or NULL). 0, or 1 (printed). */
static int pull_run(const char *repo, const char *quant, const char *token,
                    bool quiet)
{
	struct pull_view view = {.tty = isatty(2) == 1};
	struct hfpull_opts o = {0};
	struct hfpull_repo r = {0};
	struct hfpull_pick pick = {0};
	struct hfpull *h = NULL;
	char err[4096], *cache = hfpull_cache_dir(), *first = NULL;
	const char *ep = getenv("HF_ENDPOINT");
	int rc = -1;

	if (cache == NULL) {
		fputs("parley: no cache folder: set HF_HUB_CACHE, HF_HOME or "
		      "HOME\n",
		      stderr);
		return 1;
	}
	o.endpoint = ep && ep[0] ? ep : HFPULL_ENDPOINT;
	o.token = token;
	o.cache = cache;
	o.cancel = &pull_cancel;
	o.progress = quiet ? NULL : pull_progress;
	o.ud = &view;
	if (hfpull_open(&o, &h, err, sizeof(err)) ||
	    (rc = hfpull_list(h, repo, &r, err, sizeof(err))) != 0 ||
	    (rc = hfpull_choose(&r, quant, &pick, err, sizeof(err))) != 0)
		goto done;
	if (!quiet)
		fprintf(stderr, "%s:%s at %.12s: %zu file%s\n", repo,
		        pick.label, r.commit, pick.n, pick.n == 1 ? "" : "s");
	view.n_files = pick.n;
	for (size_t i = 0; i < pick.n && rc == 0; i++) {
		char *path = NULL;

		view.file_i = i + 1;
		rc = hfpull_fetch(h, &r, pick.idx[i], &path, err, sizeof(err));
		if (rc == 0 && i == 0)
			first = path;
		else
			free(path);
	}
	if (rc == 0)
		rc = hfpull_set_ref(cache, &r, err, sizeof(err));
done:
	if (view.drawn)
		fputs("\r\033[K", stderr);
	if (rc == 1)
		snprintf(err, sizeof(err),
		         "interrupted; the partial file is kept in %s: run the "
		         "same pull again to continue",
		         cache);
	if (rc != 0)
		fprintf(stderr, "parley: %s\n", err);
	else
		printf("%s\n", first);
	free(first);
	hfpull_pick_free(&pick);
	hfpull_repo_free(&r);
	hfpull_close(h);
	free(cache);
	return rc == 0 ? 0 : 1;
}

int cmd_pull(int argc, char **argv)
{
	static const struct option opts[] = {{"quiet", no_argument, NULL, 'q'},
	                                     {"help", no_argument, NULL, 'h'},
	                                     {NULL, 0, NULL, 0}};
	struct sigaction sa, old;
	char err[512], *repo, *quant, *token;
	bool quiet = false;
	int c, rc;

	while ((c = getopt_long(argc, argv, "qh", opts, NULL)) != -1) {
		switch (c) {
		case 'q':
			quiet = true;
			break;
		case 'h':
			pull_usage(stdout);
			return 0;
		default:
			pull_usage(stderr);
			return 2;
		}
	}
	if (optind + 1 != argc) {
		pull_usage(stderr);
		return 2;
	}
	if (hfpull_parse_name(argv[optind], &repo, &quant, err, sizeof(err))) {
		fprintf(stderr, "parley: %s\n", err);
		return 1;
	}
	if (!hfpull_available()) {
		fputs(
		    "parley: parley was built without libcurl, so it cannot "
		    "download (install libcurl4-openssl-dev and run configure "
		    "again)\n",
		    stderr);
		rc = 1;
	} else if (hfpull_token(&token, err, sizeof(err))) {
		fprintf(stderr, "parley: %s\n", err);
		rc = 1;
	} else {
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = pull_on_sigint;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGINT, &sa, &old); /* no SA_RESTART */
		rc = pull_run(repo, quant, token, quiet);
		sigaction(SIGINT, &old, NULL);
		hfpull_token_free(token);
	}
	free(repo);
	free(quant);
	return rc;
}

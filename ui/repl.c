/*
 * repl.c - the plain REPL (see repl.h).
 */
#include "repl.h"

#include "config.h"
#include "session.h"

#include <errno.h>
#include <histedit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The state of one REPL run. */
struct repl {
	struct session *s;         /* the chat (borrowed) */
	const struct repl_opts *o; /* options (borrowed) */
	EditLine *el;              /* libedit, NULL when not interactive */
	History *hist;             /* its history, or NULL */
	const char *prompt;        /* what repl_prompt shows */
	struct session_stats last; /* stats of the last reply */
	bool have_last;            /* last is set */
	bool at_line_start;        /* the reply output ended with '\n' */
	bool in_think;             /* printing the reply's reasoning */
};

/* libedit's prompt callback: the prompt of the current read. */
static struct repl *repl_cur;
static char *repl_prompt(EditLine *el)
{
	(void)el;
	return (char *)(repl_cur ? repl_cur->prompt : "");
}

/* Read one line without its newline (malloc'd), or NULL at end of input.
 *INTR is set when Ctrl-C cancelled the read. PUSH pre-fills the line. */
static char *repl_line(struct repl *r, const char *prompt, const char *push,
                       bool *intr)
{
	*intr = false;
	if (r->el) {
		const char *l;
		int n = 0;

		r->prompt = prompt;
		if (push)
			el_push(r->el, push);
		l = el_gets(r->el, &n);
		if (l == NULL || n <= 0) {
			if (r->o->intr && *r->o->intr) {
				*r->o->intr = 0;
				*intr = true;
				fputs("\n", stdout);
				return NULL;
			}
			return NULL;
		}
		if (r->o->intr && *r->o->intr) { /* ^C seen: drop the line */
			*r->o->intr = 0;
			*intr = true;
			return NULL;
		}
		size_t len = strlen(l);
		char *s = malloc(len + 1);

		if (s == NULL)
			return NULL;
		memcpy(s, l, len + 1);
		if (len && s[len - 1] == '\n')
			s[--len] = '\0';
		return s;
	}
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	errno = 0;
	n = getline(&line, &cap, stdin);
	if (n < 0) {
		free(line);
		if (errno == EINTR && r->o->intr && *r->o->intr) {
			*r->o->intr = 0;
			*intr = true;
			clearerr(stdin);
		}
		return NULL;
	}
	if (n > 0 && line[n - 1] == '\n')
		line[--n] = '\0';
	if (n > 0 && line[n - 1] == '\r')
		line[--n] = '\0';
	return line;
}

/* Append LEN bytes of S to the malloc'd *BUF of *N bytes. */
static int repl_append(char **buf, size_t *n, const char *s, size_t len)
{
	char *p = realloc(*buf, *n + len + 1);

	if (p == NULL)
		return -1;
	memcpy(p + *n, s, len);
	*n += len;
	p[*n] = '\0';
	*buf = p;
	return 0;
}

/*
 * Read one input: a line, a line continued with backslashes, or a """
 * block. Returns a malloc'd text (NULL at end of input); *INTR when ^C
 * dropped it.
 */
static char *repl_input(struct repl *r, const char *push, bool *intr)
{
	char *first = repl_line(r, "> ", push, intr), *text = NULL, *l;
	size_t n = 0;

	if (first == NULL)
		return NULL;
	if (strcmp(first, "\"\"\"") == 0) {
		free(first);
		text = calloc(1, 1);
		while (text && (l = repl_line(r, "... ", NULL, intr))) {
			if (strcmp(l, "\"\"\"") == 0) {
				free(l);
				return text;
			}
			if ((n && repl_append(&text, &n, "\n", 1)) ||
			    repl_append(&text, &n, l, strlen(l))) {
				free(l);
				break;
			}
			free(l);
		}
		free(text); /* end of input or ^C inside the block */
		return NULL;
	}
	text = first;
	n = strlen(text);
	while (n > 0 && text[n - 1] == '\\') {
		text[--n] = '\0';
		if (repl_append(&text, &n, "\n", 1) ||
		    (l = repl_line(r, "... ", NULL, intr)) == NULL) {
			if (*intr) {
				free(text);
				return NULL;
			}
			break; /* end of input: take what there is */
		}
		if (repl_append(&text, &n, l, strlen(l))) {
			free(l);
			break;
		}
		free(l);
		n = strlen(text);
	}
	return text;
}

/* End the reasoning's printing (dim off, or its closing tag). */
static void repl_think_end(struct repl *r)
{
	if (!r->in_think)
		return;
	if (r->o->dim)
		fputs("\033[0m", stdout);
	else
		fputs(r->at_line_start ? "</think>" : "\n</think>", stdout);
	fputs(r->at_line_start && r->o->dim ? "\n" : "\n\n", stdout);
	r->in_think = false;
	r->at_line_start = true;
}

/* Session callbacks: stream the reasoning and the reply, show notices. */
static void repl_reasoning(void *ud, const char *t, size_t n)
{
	struct repl *r = ud;

	if (!r->in_think)
		fputs(r->o->dim ? "\033[2m" : "<think>\n", stdout);
	r->in_think = true;
	fwrite(t, 1, n, stdout);
	fflush(stdout);
	r->at_line_start = n > 0 && t[n - 1] == '\n';
}

static void repl_piece(void *ud, const char *t, size_t n)
{
	struct repl *r = ud;

	repl_think_end(r);
	fwrite(t, 1, n, stdout);
	fflush(stdout);
	r->at_line_start = n > 0 && t[n - 1] == '\n';
}

static void repl_notice(void *ud, const char *msg)
{
	struct repl *r = ud;

	if (r->in_think && r->o->dim) /* the notice is not reasoning */
		fputs("\033[0m", stdout);
	r->in_think = r->in_think && !r->o->dim;
	fflush(stdout);
	fprintf(stderr, "%s[%s]\n", r->at_line_start ? "" : "\n", msg);
	r->at_line_start = true;
}

/* The reasoning callback: none with hide_thinking. */
static void (*repl_reasoning_cb(const struct repl *r))(void *, const char *,
                                                       size_t)
{
	return r->o->hide_thinking ? NULL : repl_reasoning;
}

/* One line of statistics of ST. */
static void repl_print_stats(const struct session_stats *st)
{
	double gen_s = st->decode_ms / 1e3, pre_s = st->prefill_ms / 1e3;

	if (st->n_ctx == 0) { /* a remote model: no prompt or cache of ours */
		fprintf(stderr,
		        "[reply %d tokens, %.1f tok/s; first text after %.0f "
		        "ms]\n",
		        st->n_gen, gen_s > 0 ? st->n_gen / gen_s : 0.0,
		        st->prefill_ms);
		return;
	}
	char again[48] = "";

	/* a recurrent state's snapshot was further back (tui_cmd.c too) */
	if (st->n_reeval > 0)
		snprintf(again, sizeof(again), ", %d of them again",
		         st->n_reeval);
	/* turns left a full context: the cache shifted past them */
	if (st->n_shifted > 0)
		snprintf(again, sizeof(again), ", %d kept by a context shift",
		         st->n_shifted);
	fprintf(stderr,
	        "[reply %d tokens, %.1f tok/s; prompt %d tokens (%d new%s), "
	        "%.1f tok/s; context %d/%d; first token after %.0f ms]\n",
	        st->n_gen, gen_s > 0 ? st->n_gen / gen_s : 0.0, st->n_prompt,
	        st->n_prompt_eval, again,
	        pre_s > 0 ? st->n_prompt_eval / pre_s : 0.0, st->n_ctx_used,
	        st->n_ctx, st->first_ms);
}

/* After a reply: end the line, say how it ended, stats if verbose. */
static void repl_after(struct repl *r, int rc, const struct session_stats *st,
                       const char *err)
{
	bool unfinished;
	size_t n;
	const struct session_msg *m = session_messages(r->s, &n);

	if (r->in_think && r->o->dim) {
		fputs("\033[0m", stdout);
		r->in_think = false;
	}
	if (r->in_think) { /* the block the reply never closed */
		fputs(r->at_line_start ? "</think>" : "\n</think>", stdout);
		r->in_think = false;
		r->at_line_start = false;
	}
	if (!r->at_line_start)
		fputs("\n", stdout);
	fflush(stdout);
	unfinished = n > 0 && m[n - 1].reasoning_open;
	if (unfinished && rc == 0)
		fprintf(stderr,
		        "[the reply ended inside its reasoning: %d "
		        "tokens of unfinished reasoning, no answer]\n",
		        m[n - 1].n_reasoning);
	if (r->o->intr) /* a Ctrl-C for this reply is spent now */
		atomic_store(r->o->intr, 0);
	if (rc != 0) {
		fprintf(stderr, "parley: %s\n", err);
		return;
	}
	r->last = *st;
	r->have_last = true;
	if (st->finish == STORE_FINISH_INTERRUPTED)
		fputs("[stopped]\n", stderr);
	else if (st->finish == STORE_FINISH_LENGTH)
		fputs("[reply limit reached]\n", stderr);
	if (r->o->verbose)
		repl_print_stats(st);
	if (st->verify.n_checked > 0) {
		char line[512];

		fprintf(stderr, "[%s]\n",
		        verify_summary_format(&st->verify, line, sizeof(line)));
	}
}

static const char repl_help[] =
    "Type a message and press Enter; end a line with \\ to continue it, or\n"
    "put \"\"\" alone on a line to start and end a block. Ctrl-C stops a\n"
    "reply, Ctrl-D quits. Commands:\n"
    "  /help               this text\n"
    "  /regen              generate the last reply again\n"
    "  /edit [TEXT]        replace your last message (and its reply)\n"
    "  /clear              start a new conversation\n"
    "  /system [TEXT|-]    show, set or (with -) remove the system prompt\n"
    "  /set [KEY VALUE]    show or change an option (temp, top-k, top-p,\n"
    "                      min-p, repeat-penalty, repeat-last-n, seed,\n"
    "                      n-predict)\n"
    "  /save-title TITLE   name this conversation\n"
    "  /stats              speed and context of the last reply\n"
    "  /verify             check each step against the CPU reference "
    "(toggle)\n"
    "  /think on|off       the template's enable_thinking (Qwen3's, Gemma "
    "4's);\n"
    "                      /think alone shows it\n"
    "  /reasoning low|medium|high  the template's reasoning_effort\n"
    "                      (gpt-oss's); /reasoning alone shows it\n"
    "  /quit               leave (also Ctrl-D)\n";

/* The message of the last user turn, or NULL. */
static const char *repl_last_user(struct repl *r)
{
	size_t n;
	const struct session_msg *m = session_messages(r->s, &n);

	while (n > 0)
		if (m[--n].role == STORE_ROLE_USER)
			return m[n].content;
	return NULL;
}

/* /set KEY VALUE, or /set alone to show the options. */
static void repl_set(struct repl *r, char *args)
{
	struct config *c = r->o->cfg;
	char err[256], *key, *val;

	if (c == NULL) {
		fputs("parley: /set is not available here\n", stderr);
		return;
	}
	key = strtok(args, " \t");
	val = key ? strtok(NULL, "") : NULL;
	if (key == NULL) {
		const struct sampler_config *sc = session_sampling(r->s);

		printf("temp %g  top-k %d  top-p %g  min-p %g  "
		       "repeat-penalty %g  repeat-last-n %d  seed %llu  "
		       "n-predict %d\n",
		       sc->temperature, sc->top_k, sc->top_p, sc->min_p,
		       sc->repeat_penalty, sc->penalty_last_n,
		       (unsigned long long)sc->seed, c->n_predict);
		return;
	}
	while (val && (*val == ' ' || *val == '\t'))
		val++;
	if (val == NULL || *val == '\0') {
		fprintf(stderr, "parley: /set %s needs a value\n", key);
		return;
	}
	if (strcmp(key, "n") == 0)
		key = "n-predict";
	if (strcmp(key, "model") == 0 || strcmp(key, "ctx") == 0 ||
	    strcmp(key, "threads") == 0 || strcmp(key, "template") == 0 ||
	    strcmp(key, "db") == 0) {
		fprintf(stderr, "parley: %s cannot change in a running chat\n",
		        key);
		return;
	}
	struct config copy = *c;

	if (config_set(&copy, key, val, err, sizeof(err))) {
		fprintf(stderr, "parley: %s\n", err);
		return;
	}
	/* config_set changed only scalar fields of COPY for these keys */
	if (session_set_sampling(r->s, &copy.samp, err, sizeof(err))) {
		fprintf(stderr, "parley: %s\n", err);
		return;
	}
	c->samp = copy.samp;
	c->n_predict = copy.n_predict;
	c->verbose = copy.verbose;
	session_set_n_predict(r->s, c->n_predict);
}

/* /think on|off: the template's enable_thinking; alone: show it. */
static void repl_think(struct repl *r, const char *arg)
{
	const char *state = session_think_cmd(r->s, arg);

	if (state == NULL)
		fputs("parley: /think on or /think off\n", stderr);
	else
		fprintf(stderr, "[thinking %s]\n", state);
}

/* /reasoning low|medium|high: the template's reasoning_effort; alone:
   show it. */
static void repl_reasoning_level(struct repl *r, const char *arg)
{
	const char *state = session_reasoning_cmd(r->s, arg);

	if (state == NULL)
		fputs("parley: /reasoning low, medium or high\n", stderr);
	else
		fprintf(stderr, "[reasoning %s]\n", state);
}

/* Run slash command LINE. Returns 1 to quit, 0 otherwise. */
static int repl_command(struct repl *r, char *line)
{
	struct session_cb cb = {repl_piece, NULL, repl_notice,
	                        r,          NULL, repl_reasoning_cb(r)};
	struct session_stats st;
	char err[512], *cmd = line + 1, *args;
	int rc;

	args = cmd + strcspn(cmd, " \t");
	if (*args)
		*args++ = '\0';
	while (*args == ' ' || *args == '\t')
		args++;
	if (!strcmp(cmd, "quit") || !strcmp(cmd, "exit") || !strcmp(cmd, "q"))
		return 1;
	if (!strcmp(cmd, "help") || !strcmp(cmd, "?")) {
		fputs(repl_help, stdout);
	} else if (!strcmp(cmd, "regen")) {
		r->at_line_start = true;
		rc = session_regen(r->s, &cb, &st, err, sizeof(err));
		repl_after(r, rc, &st, err);
	} else if (!strcmp(cmd, "edit")) {
		const char *last = repl_last_user(r);
		char *text = NULL;
		bool intr;

		if (last == NULL) {
			fputs("parley: no message to edit yet\n", stderr);
			return 0;
		}
		if (*args) {
			text = strdup(args);
		} else if (r->el && strchr(last, '\n') == NULL) {
			text = repl_input(r, last, &intr);
		} else {
			fputs("parley: /edit TEXT (the new message)\n", stderr);
			return 0;
		}
		if (text == NULL || *text == '\0') {
			free(text);
			return 0;
		}
		r->at_line_start = true;
		rc = session_edit_last(r->s, text, strlen(text), &cb, &st, err,
		                       sizeof(err));
		free(text);
		repl_after(r, rc, &st, err);
	} else if (!strcmp(cmd, "clear")) {
		session_clear(r->s, err, sizeof(err));
		r->have_last = false;
		fputs("[new conversation]\n", stderr);
	} else if (!strcmp(cmd, "system")) {
		size_t n;
		const struct session_msg *m = session_messages(r->s, &n);

		if (*args == '\0') {
			printf("%s\n", n && m[0].role == STORE_ROLE_SYSTEM
			                   ? m[0].content
			                   : "(no system prompt)");
		} else if (session_set_system(r->s,
		                              strcmp(args, "-") ? args : NULL,
		                              err, sizeof(err))) {
			fprintf(stderr, "parley: %s\n", err);
		}
	} else if (!strcmp(cmd, "set")) {
		repl_set(r, args);
	} else if (!strcmp(cmd, "save-title") || !strcmp(cmd, "title")) {
		if (*args == '\0')
			fputs("parley: /save-title TITLE\n", stderr);
		else if (session_set_title(r->s, args, err, sizeof(err)))
			fprintf(stderr, "parley: %s\n", err);
		else
			fprintf(stderr, "[title saved]\n");
	} else if (!strcmp(cmd, "verify")) {
		bool on = !session_verifying(r->s);

		if (session_set_verify(r->s, on, err, sizeof(err)))
			fprintf(stderr, "parley: %s\n", err);
		else
			fprintf(stderr, "[verification %s]\n",
			        on ? "on: a summary after each reply" : "off");
	} else if (!strcmp(cmd, "think")) {
		repl_think(r, args);
	} else if (!strcmp(cmd, "reasoning")) {
		repl_reasoning_level(r, args);
	} else if (!strcmp(cmd, "stats")) {
		if (r->have_last)
			repl_print_stats(&r->last);
		else
			fputs("[no reply yet]\n", stderr);
	} else {
		fprintf(stderr, "parley: unknown command /%s (try /help)\n",
		        cmd);
	}
	return 0;
}

/* Set up libedit and the history file. */
static void repl_editline(struct repl *r)
{
	HistEvent ev;

	r->el = el_init("parley", stdin, stdout, stderr);
	if (r->el == NULL)
		return;
	el_set(r->el, EL_PROMPT, repl_prompt);
	el_set(r->el, EL_EDITOR, "emacs");
	r->hist = history_init();
	if (r->hist) {
		history(r->hist, &ev, H_SETSIZE, 1000);
		history(r->hist, &ev, H_SETUNIQUE, 1);
		if (r->o->history_path)
			history(r->hist, &ev, H_LOAD, r->o->history_path);
		el_set(r->el, EL_HIST, history, r->hist);
	}
	el_source(r->el, NULL);
}

/* Add TEXT to the history (one line each) and save the file. */
static void repl_remember(struct repl *r, const char *text)
{
	HistEvent ev;

	if (r->hist == NULL || strchr(text, '\n'))
		return;
	history(r->hist, &ev, H_ENTER, text);
	if (r->o->history_path)
		history(r->hist, &ev, H_SAVE, r->o->history_path);
}

int repl_run(struct session *s, const struct repl_opts *o)
{
	struct repl r;
	int status = 0;

	memset(&r, 0, sizeof(r));
	r.s = s;
	r.o = o;
	r.at_line_start = true;
	repl_cur = &r;
	if (o->interactive)
		repl_editline(&r);
	for (;;) {
		struct session_cb cb = {repl_piece,  NULL,
		                        repl_notice, &r,
		                        NULL,        repl_reasoning_cb(&r)};
		struct session_stats st;
		char err[512], *text;
		bool intr;
		int rc;

		text = repl_input(&r, NULL, &intr);
		if (text == NULL) {
			if (intr)
				continue;
			if (r.el)
				fputs("\n", stdout);
			break;
		}
		if (text[0] == '\0') {
			free(text);
			continue;
		}
		repl_remember(&r, text);
		if (text[0] == '/' && text[1] != '/') {
			rc = repl_command(&r, text);
			free(text);
			if (rc)
				break;
			continue;
		}
		r.at_line_start = true;
		rc = session_send(s, text[0] == '/' ? text + 1 : text,
		                  strlen(text[0] == '/' ? text + 1 : text), &cb,
		                  &st, err, sizeof(err));
		free(text);
		repl_after(&r, rc, &st, err);
	}
	if (r.hist)
		history_end(r.hist);
	if (r.el)
		el_end(r.el);
	repl_cur = NULL;
	fflush(stdout);
	return status;
}

/*
 * tui.c - the full-screen UI's loop: keys, worker events, signals, and
 * the terminal's setup and restoration (tui.h).
 */
#include "tui_int.h"

#include "config.h"
#include "store.h"
#include "verify.h"

#include <curses.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

/* ---------- the terminal: restored on every exit path ---------- */

static struct termios tui_tios;          /* the terminal before */
static volatile sig_atomic_t tui_active; /* curses mode is on */
static int tui_sig_w = -1;               /* write end, signal pipe */

/* What leaves bracketed paste, the alternate screen and a hidden cursor
   behind, for the fatal-signal path (endwin does this otherwise). */
static const char tui_reset_seq[] = "\033[?2004l\033[0m\033[?25h\033[?1049l";

/* atexit and the normal end: leave curses mode once. */
static void tui_restore(void)
{
	if (!tui_active)
		return;
	tui_active = 0;
	tui_out_release();            /* fd 1 is the terminal again */
	fputs("\033[?2004l", stdout); /* bracketed paste off */
	fflush(stdout);
	endwin();
	tui_out_err_release(); /* what went to stderr meanwhile, now */
}

/* SIGSEGV, SIGABRT (a failed assertion), ...: only async-signal-safe
   calls, then the default action. */
static void tui_on_fatal(int sig)
{
	if (tui_active) {
		tcsetattr(STDIN_FILENO, TCSANOW, &tui_tios);
		if (write(tui_out_fd(), tui_reset_seq,
		          sizeof(tui_reset_seq) - 1) < 0) {
			/* nothing more can be done here */
		}
		tui_out_err_release(); /* what went to stderr, now */
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

/* SIGWINCH, SIGTERM, SIGHUP, SIGINT, SIGTSTP (kill -TSTP; the key is
   Ctrl-Z in raw mode), SIGCONT: a byte for the loop. */
static void tui_on_signal(int sig)
{
	int saved = errno;
	unsigned char b = (unsigned char)sig;

	if (tui_sig_w >= 0 && write(tui_sig_w, &b, 1) < 0) {
		/* the pipe is full: the loop is already woken */
	}
	errno = saved;
}

/* Install the handlers; 0 or -1. */
static int tui_signals(struct tui *t)
{
	static const int loop_sigs[] = {SIGWINCH, SIGTERM, SIGHUP,
	                                SIGINT,   SIGTSTP, SIGCONT};
	static const int fatal[] = {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL};
	struct sigaction sa;
	int p[2];

	if (pipe(p))
		return -1;
	for (int i = 0; i < 2; i++) {
		fcntl(p[i], F_SETFL, O_NONBLOCK);
		fcntl(p[i], F_SETFD, FD_CLOEXEC);
	}
	t->sig_fd = p[0];
	tui_sig_w = p[1];
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = tui_on_signal;
	sa.sa_flags = SA_RESTART;
	for (size_t i = 0; i < sizeof(loop_sigs) / sizeof(loop_sigs[0]); i++)
		sigaction(loop_sigs[i], &sa, NULL);
	sa.sa_handler = tui_on_fatal;
	sa.sa_flags = 0;
	for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
		sigaction(fatal[i], &sa, NULL);
	return 0;
}

/* The terminal may have changed size while curses was not watching:
   take its size now and repaint the whole screen. */
static void tui_resize(struct tui *t)
{
	struct winsize ws;

	if (ioctl(tui_out_fd(), TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 &&
	    ws.ws_col > 0)
		resize_term(ws.ws_row, ws.ws_col);
	/* the terminal's content is unknown: repaint all of it */
	clearok(curscr, TRUE);
	t->dirty = true;
}

/*
 * Ctrl-Z, SIGTSTP: stop like any full-screen program. The terminal is
 * restored first (as on exit), then the process stops itself with the
 * default action; the worker stops with it, as it was (a reply goes on
 * after `fg`). Back here on SIGCONT: curses mode again and the whole
 * screen redrawn at the terminal's size, which may have changed.
 */
static void tui_suspend(struct tui *t)
{
	struct sigaction dfl, old;
	double t0 = tui_now_ms();

	tui_out_release(); /* what endwin writes goes to the terminal */
	fputs("\033[?2004l", stdout); /* bracketed paste off */
	fflush(stdout);
	endwin();
	tui_out_err_release(); /* what went to stderr meanwhile, now */
	memset(&dfl, 0, sizeof(dfl));
	sigemptyset(&dfl.sa_mask);
	dfl.sa_handler = SIG_DFL;
	sigaction(SIGTSTP, &dfl, &old);
	/* the whole job stops, as the terminal's own Ctrl-Z would stop it;
	   an orphaned process group (no shell to resume it) ignores it */
	kill(0, SIGTSTP);
	sigaction(SIGTSTP, &old, NULL);
	/* continued: curses mode back, as tui_screen_on left it */
	tcgetattr(STDIN_FILENO, &tui_tios);
	reset_prog_mode();
	fputs("\033[?2004h", stdout); /* bracketed paste on */
	fflush(stdout);
	tui_out_capture();
	tui_resize(t);
	if (t->live_t0 > 0) /* the live speed leaves the stop out */
		t->live_t0 += tui_now_ms() - t0;
}

/* ---------- small helpers shared by the UI's files ---------- */

double tui_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void tui_say(struct tui *t, bool err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(t->msg, sizeof(t->msg), fmt, ap);
	va_end(ap);
	for (char *p = t->msg; *p; p++) /* one line in the status bar */
		if (*p == '\n' || *p == '\t')
			*p = ' ';
	t->msg_err = err;
	t->dirty = true;
}

/* Append TEXT[0, len) to the NUL-terminated string *BUF of *N bytes,
   *CAP allocated (grown, NUL-terminated even when LEN is 0). 0, or -1
   (no memory: *BUF unchanged). */
static int tui_text_append(char **buf, size_t *n, size_t *cap, const char *text,
                           size_t len)
{
	if (*n + len + 1 > *cap) {
		size_t c = (*n + len + 1) * 2;
		char *p = realloc(*buf, c);

		if (p == NULL)
			return -1;
		*buf = p;
		*cap = c;
	}
	memcpy(*buf + *n, text, len);
	*n += len;
	(*buf)[*n] = '\0';
	return 0;
}

/* Append TEXT[0, len) to M; its lines are laid out again. */
static void tui_msg_append(struct tui_msg *m, const char *text, size_t len)
{
	if (tui_text_append(&m->text, &m->len, &m->cap, text, len) == 0)
		m->lines_w = 0;
}

int tui_msg_reasoning(struct tui_msg *m, const char *text, size_t len)
{
	if (tui_text_append(&m->reasoning, &m->reasoning_len, &m->reasoning_cap,
	                    text, len))
		return -1;
	m->lines_w = 0;
	return 0;
}

bool tui_msg_has_reasoning(const struct tui_msg *m)
{
	return m->role == STORE_ROLE_ASSISTANT &&
	       (m->reasoning_len > 0 || m->reasoning_open);
}

/* Give M the reasoning P[0, len) (copied; may be NULL), N tokens of it,
   OPEN: unfinished. */
static void tui_msg_set_reasoning(struct tui_msg *m, const char *p, size_t len,
                                  int32_t n, bool open)
{
	m->reasoning_len = 0;
	if (p && len)
		tui_msg_reasoning(m, p, len);
	m->n_reasoning = n;
	m->reasoning_open = open;
	m->lines_w = 0;
}

struct tui_msg *tui_add(struct tui *t, int role, const char *text, size_t len)
{
	struct tui_msg *m;

	if (t->n_msgs == t->cap_msgs) {
		size_t cap = t->cap_msgs ? t->cap_msgs * 2 : 16;
		struct tui_msg *v = realloc(t->msgs, cap * sizeof(*v));

		if (v == NULL)
			return NULL;
		t->msgs = v;
		t->cap_msgs = cap;
	}
	m = &t->msgs[t->n_msgs];
	memset(m, 0, sizeof(*m));
	m->role = role;
	if (tui_text_append(&m->text, &m->len, &m->cap, text ? text : "",
	                    text ? len : 0))
		return NULL;
	t->n_msgs++;
	t->dirty = true;
	return m;
}

void tui_drop_last(struct tui *t)
{
	if (t->n_msgs == 0)
		return;
	struct tui_msg *m = &t->msgs[--t->n_msgs];

	free(m->text);
	free(m->reasoning);
	tui_lines_clear(&m->lines);
	tui_tokens_free(m);
	if (t->mode == TUI_MODE_TOKENS) /* its message may be gone */
		t->mode = TUI_MODE_CHAT;
	t->dirty = true;
}

void tui_remove(struct tui *t, size_t i)
{
	if (i >= t->n_msgs)
		return;
	free(t->msgs[i].text);
	free(t->msgs[i].reasoning);
	tui_lines_clear(&t->msgs[i].lines);
	tui_tokens_free(&t->msgs[i]);
	if (t->mode == TUI_MODE_TOKENS) /* messages move */
		t->mode = TUI_MODE_CHAT;
	memmove(t->msgs + i, t->msgs + i + 1,
	        (t->n_msgs - i - 1) * sizeof(*t->msgs));
	t->n_msgs--;
	t->dirty = true;
}

void tui_msgs_clear(struct tui *t)
{
	while (t->n_msgs)
		tui_drop_last(t);
	t->scroll = 0;
}

/* The last entry if it is the reply streaming now, else NULL. */
static struct tui_msg *tui_live(struct tui *t)
{
	if (t->n_msgs && t->msgs[t->n_msgs - 1].live)
		return &t->msgs[t->n_msgs - 1];
	return NULL;
}

int tui_start(struct tui *t, enum tui_job_kind job, const char *text,
              size_t len, int64_t conv_id)
{
	struct tui_job_arg a = {0};

	a.conv_id = conv_id;
	return tui_start_arg(t, job, text, len, &a);
}

int tui_start_arg(struct tui *t, enum tui_job_kind job, const char *text,
                  size_t len, const struct tui_job_arg *arg)
{
	bool gen = job == TUI_JOB_SEND || job == TUI_JOB_REGEN ||
	           job == TUI_JOB_EDIT || job == TUI_JOB_BRANCH;

	if (t->busy) {
		tui_say(t, true, "a reply is running (Ctrl-C stops it)");
		return -1;
	}
	if (gen) {
		struct tui_msg *m = tui_add(t, STORE_ROLE_ASSISTANT, NULL, 0);

		if (m)
			m->live = true;
	}
	if (tui_worker_start_arg(&t->w, job, text, len, arg)) {
		if (gen)
			tui_drop_last(t);
		tui_say(t, true, "out of memory");
		return -1;
	}
	t->busy = true;
	t->job = job;
	if (gen) { /* the flags are the new reply's */
		t->flags = 0;
		t->flag_layer = -1;
		t->flag_tok = 0;
	}
	t->live_gen = 0;
	t->live_t0 = 0;
	t->pre_done = t->pre_total = 0;
	t->scroll = 0;
	t->msg[0] = '\0';
	t->dirty = true;
	return 0;
}

void tui_refresh_title(struct tui *t)
{
	struct store_conv c;
	char err[256];

	t->title[0] = '\0';
	if (t->st == NULL || t->conv_id == 0 ||
	    store_conv_get(t->st, t->conv_id, &c, NULL, NULL, err,
	                   sizeof(err)) != STORE_OK)
		return;
	snprintf(t->title, sizeof(t->title), "%s", c.title);
	store_conv_clear(&c);
}

void tui_load_msgs(struct tui *t, struct tui_ev_msg *v, size_t n)
{
	tui_msgs_clear(t);
	t->flags = 0;
	for (size_t i = 0; i < n; i++) {
		struct tui_msg *m = tui_add(t, v[i].role, v[i].text, v[i].len);

		if (m == NULL)
			continue;
		m->finish = v[i].finish;
		tui_msg_set_reasoning(m, v[i].reasoning, v[i].reasoning_len,
		                      v[i].n_reasoning, v[i].reasoning_open);
		m->toks = v[i].toks;
		m->n_toks = m->cap_toks = v[i].n_toks;
		m->toks_none = m->role == STORE_ROLE_ASSISTANT && !m->n_toks;
		v[i].toks = NULL;
		v[i].n_toks = 0;
	}
}

/* ---------- worker events ---------- */

/* The end of a job: figures, errors, the transcript of a new conv. */
static void tui_on_end(struct tui *t, struct tui_ev *e)
{
	struct tui_msg *m = tui_live(t);
	const struct session_stats *st = &e->st;

	t->busy = false;
	if (!t->msg_err) /* "stopping..." and such are over */
		t->msg[0] = '\0';
	if (m) {
		m->live = false;
		m->finish = st->finish;
		m->lines_w = 0;
		if (e->rc == 0 && tui_msg_has_reasoning(m)) {
			/* the session's count: the tags' tokens too */
			m->n_reasoning = e->n_reasoning;
			m->reasoning_open = e->reasoning_open;
		}
		if (e->rc != 0 && m->len == 0 && m->reasoning_len == 0)
			tui_drop_last(t);
	}
	if (e->rc != 0)
		tui_say(t, true, "%s", e->text ? e->text : "error");
	t->conv_id = e->conv_id;
	if (e->job == TUI_JOB_MODELS) {
		tui_models_scanned(t, e);
	} else if (e->job == TUI_JOB_MODEL) {
		tui_models_loaded(t, e);
	} else if (e->job == TUI_JOB_SIBLING) {
		if (e->rc == 0)
			tui_tokens_switched(t, e);
	} else if (e->job == TUI_JOB_BRANCH && e->rc != 0 && e->msgs) {
		tui_load_msgs(t, e->msgs, e->n_msgs); /* the session's view */
		t->ctx_used = st->n_ctx_used;
	} else if (e->job == TUI_JOB_OPEN || e->job == TUI_JOB_CLEAR) {
		tui_load_msgs(t, e->msgs, e->n_msgs);
		t->ctx_used = st->n_ctx_used;
		t->n_ctx = st->n_ctx;
		t->have_last = false;
		t->reused = 0;
		t->prefill_tps = t->decode_tps = 0;
		if (e->rc == 0 && e->job == TUI_JOB_OPEN)
			tui_say(t, false, "conversation %lld opened",
			        (long long)e->conv_id);
		else if (e->rc == 0)
			tui_say(t, false, "new conversation");
	} else if (e->rc == 0) {
		t->last = *st;
		t->have_last = true;
		t->ctx_used = st->n_ctx_used;
		t->n_ctx = st->n_ctx;
		t->reused = st->n_reused;
		t->prefill_tps = st->prefill_ms > 0 ? st->n_prompt_eval /
		                                          (st->prefill_ms / 1e3)
		                                    : 0;
		if (st->n_ctx == 0) /* a server's reply: its prompt figures,
		                       when it sent them, else none */
			t->prefill_tps = st->server_prompt_ms > 0
			                     ? st->server_prompt_n /
			                           (st->server_prompt_ms / 1e3)
			                     : 0;
		t->decode_tps =
		    st->decode_ms > 0 ? st->n_gen / (st->decode_ms / 1e3) : 0;
		if (st->verify.n_checked > 0) {
			char line[512];

			tui_say(t, st->verify.n_bad > 0, "%s",
			        verify_summary_format(&st->verify, line,
			                              sizeof(line)));
		}
	}
	tui_refresh_title(t);
}

/* Take and apply every queued event. */
static void tui_events(struct tui *t)
{
	struct tui_ev *all = tui_worker_take(&t->w), *e;
	struct tui_msg *m;

	for (e = all; e; e = e->next) {
		switch (e->kind) {
		case TUI_EV_PIECE:
			if ((m = tui_live(t)) != NULL)
				tui_msg_append(m, e->text, e->len);
			break;
		case TUI_EV_REASONING:
			/* the answer has not begun: every token so far is
			   the reasoning's */
			if ((m = tui_live(t)) != NULL &&
			    tui_msg_reasoning(m, e->text, e->len) == 0) {
				m->n_reasoning = t->live_gen;
			}
			break;
		case TUI_EV_TOKEN:
			if (t->live_gen == 0)
				t->live_t0 = tui_now_ms();
			t->live_gen = e->a;
			if ((m = tui_live(t)) == NULL)
				break;
			if (e->tok)
				tui_tokens_push(t, m, e->tok);
			if (m->reasoning_len > 0 && m->len == 0) {
				m->n_reasoning = t->live_gen; /* still in it */
				m->lines_w = 0;
			}
			break;
		case TUI_EV_PROGRESS:
			t->pre_done = e->a;
			t->pre_total = e->b;
			break;
		case TUI_EV_PHASE:
			snprintf(t->load_phase, sizeof(t->load_phase), "%s",
			         e->text);
			break;
		case TUI_EV_NOTICE:
			/* before the live reply, so that the reply stays last
			 */
			if ((m = tui_live(t)) != NULL) {
				struct tui_msg live = *m;

				t->n_msgs--;
				tui_add(t, TUI_ROLE_NOTICE, e->text, e->len);
				if (t->n_msgs < t->cap_msgs)
					t->msgs[t->n_msgs++] = live;
				if (t->mode == TUI_MODE_TOKENS &&
				    t->cur_msg == t->n_msgs - 2)
					t->cur_msg++; /* the reply moved */
			} else {
				tui_add(t, TUI_ROLE_NOTICE, e->text, e->len);
			}
			break;
		case TUI_EV_END:
			tui_on_end(t, e);
			break;
		}
		t->dirty = true;
	}
	tui_ev_free(all);
}

/* ---------- keys ---------- */

/* Service the worker and signals until a key arrives: 1 with *K and
   *FKEY (a KEY_ code), 0 when the UI is quitting. Never busy-waits:
   poll() blocks until the keyboard, the worker or a signal has news. */
static int tui_wait(struct tui *t, int *k, bool *fkey)
{
	for (;;) {
		wint_t wk;
		int r;

		if (t->quit)
			return 0;
		r = wget_wch(stdscr, &wk);
		if (r != ERR) {
			*k = (int)wk;
			*fkey = r == KEY_CODE_YES;
			return 1;
		}
		if (t->dirty)
			tui_draw(t);
		struct pollfd p[3] = {{STDIN_FILENO, POLLIN, 0},
		                      {t->w.pipe[0], POLLIN, 0},
		                      {t->sig_fd, POLLIN, 0}};

		if (poll(p, 3, -1) < 0 && errno != EINTR)
			return 0;
		if (p[0].revents & (POLLHUP | POLLERR)) {
			t->quit = true; /* the terminal went away */
			t->status = 129;
		}
		if (p[2].revents & POLLIN) {
			unsigned char sig[16];
			ssize_t n = read(t->sig_fd, sig, sizeof(sig));

			for (ssize_t i = 0; i < n; i++) {
				if (sig[i] == SIGWINCH || sig[i] == SIGCONT) {
					/* SIGCONT: continued after a stop
					   that was not ours (SIGSTOP) */
					tui_resize(t);
				} else if (sig[i] == SIGTSTP) {
					tui_suspend(t);
				} else {
					t->quit = true;
					t->status = 128 + sig[i];
				}
			}
		}
		if (p[1].revents & POLLIN)
			tui_events(t);
	}
}

/* libedit wants another key in the middle of a command. */
static int tui_wait_edit(void *ud, wchar_t *c)
{
	struct tui *t = ud;

	for (;;) {
		int k;
		bool fkey;

		if (!tui_wait(t, &k, &fkey))
			return 0;
		if (!fkey && k == 3 && t->busy) { /* Ctrl-C stops the reply */
			tui_worker_cancel(&t->w);
			continue;
		}
		if (!fkey && k == 26) { /* Ctrl-Z, in the middle of a command */
			tui_suspend(t);
			continue;
		}
		if (!fkey) {
			*c = (wchar_t)k;
			return 1;
		}
		if (k == KEY_RESIZE) {
			t->dirty = true;
			continue;
		}
		if ((*c = tui_input_translate(k)) != 0)
			return 1;
	}
}

/* The last user message, or NULL. */
static const struct tui_msg *tui_last_user(const struct tui *t)
{
	for (size_t i = t->n_msgs; i > 0; i--)
		if (t->msgs[i - 1].role == STORE_ROLE_USER)
			return &t->msgs[i - 1];
	return NULL;
}

/* Enter: send the line, or run it as a command. */
static void tui_submit(struct tui *t)
{
	size_t len, cur;
	const wchar_t *w = tui_input_line(&t->in, &len, &cur);
	char *text;

	(void)cur;
	if (t->busy) {
		tui_say(t, true,
		        t->job == TUI_JOB_MODEL
		            ? "a model is loading (Ctrl-C stops it); your "
		              "text stays in the input"
		            : "a reply is running (Ctrl-C stops it); "
		              "your text stays in the input");
		return;
	}
	text = tui_input_utf8(w, len);
	if (text == NULL)
		return;
	if (text[strspn(text, " \t\n")] == '\0') {
		free(text);
		return;
	}
	tui_input_reset(&t->in, text);
	if (text[0] == '/' && text[1] != '/') {
		tui_cmd(t, text);
	} else {
		const char *body = text[0] == '/' ? text + 1 : text;
		bool edit = t->editing && tui_last_user(t);

		t->editing = false;
		if (edit) { /* the old turn goes: user message and reply */
			while (t->n_msgs &&
			       t->msgs[t->n_msgs - 1].role != STORE_ROLE_USER)
				tui_drop_last(t);
			tui_drop_last(t);
		}
		tui_add(t, STORE_ROLE_USER, body, strlen(body));
		tui_start(t, edit ? TUI_JOB_EDIT : TUI_JOB_SEND, body,
		          strlen(body), 0);
	}
	free(text);
}

/* Quit now, or ask first while a reply runs. */
static void tui_quit(struct tui *t)
{
	if (t->busy) {
		t->ask = TUI_ASK_QUIT;
		tui_say(t, false, "a reply is running: quit anyway? (y/n)");
		return;
	}
	t->quit = true;
}

/* F7: fold or unfold the reasoning of the last reply that has one. */
static void tui_fold_last(struct tui *t)
{
	for (size_t i = t->n_msgs; i > 0; i--)
		if (tui_msg_has_reasoning(&t->msgs[i - 1])) {
			tui_fold(t, i - 1);
			return;
		}
	tui_say(t, false, "no reply with reasoning");
}

/* A key in chat mode. */
static void tui_key_chat(struct tui *t, int k, bool fkey)
{
	size_t len, cur;
	int page = t->view_rows > 2 ? t->view_rows - 1 : 1;

	tui_input_line(&t->in, &len, &cur);
	if (fkey) {
		wchar_t c;

		switch (k) {
		case KEY_F(1):
			t->mode = TUI_MODE_HELP;
			t->help_top = 0;
			return;
		case KEY_F(2):
			t->pane = !t->pane;
			return;
		case KEY_F(3):
			tui_list_open(t);
			return;
		case KEY_F(4):
			tui_tokens_enter(t);
			return;
		case KEY_F(5):
			t->shade = !t->shade;
			for (size_t i = 0; i < t->n_msgs; i++)
				t->msgs[i].lines_w = 0;
			tui_say(t, false,
			        t->shade ? "reply tokens shaded by probability"
			                 : "shading off");
			return;
		case KEY_F(6):
			tui_prompt_open(t);
			return;
		case KEY_F(7):
			tui_fold_last(t);
			return;
		case KEY_F(8):
			tui_models_open(t);
			return;
		case KEY_PPAGE:
			t->scroll += page;
			return;
		case KEY_NPAGE:
			t->scroll = t->scroll > page ? t->scroll - page : 0;
			return;
		case KEY_RESIZE:
			return;
		case TUI_KEY_PASTE_BEGIN:
			tui_input_paste_begin(&t->paste);
			return;
		case KEY_DC:
			if (len == 0)
				return; /* ^D would mean end of input */
			break;
		default:
			break;
		}
		if ((c = tui_input_translate(k)) != 0 &&
		    tui_input_key(&t->in, c) == 1)
			tui_submit(t);
		return;
	}
	if (k == 3) { /* Ctrl-C */
		if (t->busy) {
			tui_worker_cancel(&t->w);
			tui_say(t, false, "stopping...");
		} else if (len > 0 || t->editing) {
			t->editing = false;
			tui_input_reset(&t->in, NULL);
		} else {
			tui_quit(t);
		}
		return;
	}
	if (k == 4 && len == 0) { /* Ctrl-D on an empty line */
		tui_quit(t);
		return;
	}
	if (k == 18) { /* Ctrl-R: parley's own history search */
		tui_search_open(t);
		return;
	}
	if (k == 12) { /* Ctrl-L */
		clearok(curscr, TRUE);
		return;
	}
	if (tui_input_key(&t->in, (wchar_t)k) == 1)
		tui_submit(t);
}

/* Collect a bracketed paste; inserted in one call at its end. */
static void tui_key_paste(struct tui *t, int k, bool fkey)
{
	if (!fkey)
		tui_input_paste_add(&t->paste, (wchar_t)k);
	else if (k == TUI_KEY_PASTE_END)
		tui_input_paste_end(&t->in, &t->paste);
}

/* Dispatch one key by mode. */
static void tui_key(struct tui *t, int k, bool fkey)
{
	t->dirty = true;
	if (t->paste.on) {
		tui_key_paste(t, k, fkey);
		return;
	}
	if (fkey && k == KEY_RESIZE)
		return;
	if (!fkey && k == 26) { /* Ctrl-Z, in any mode */
		tui_suspend(t);
		return;
	}
	if (t->ask != TUI_ASK_NONE && t->mode == TUI_MODE_CHAT) {
		enum tui_ask a = t->ask;

		t->ask = TUI_ASK_NONE;
		t->msg[0] = '\0';
		if (!fkey && (k == 'y' || k == 'Y') && a == TUI_ASK_QUIT) {
			tui_worker_cancel(&t->w);
			t->quit = true;
		}
		return;
	}
	if (t->mode == TUI_MODE_HELP) { /* scroll keys scroll, others close */
		if (fkey && (k == KEY_NPAGE || k == KEY_DOWN))
			t->help_top += k == KEY_DOWN ? 1 : LINES / 2;
		else if (fkey && (k == KEY_PPAGE || k == KEY_UP))
			t->help_top -= k == KEY_UP ? 1 : LINES / 2;
		else
			t->mode = TUI_MODE_CHAT;
		return;
	}
	if (t->mode == TUI_MODE_LIST) {
		tui_list_key(t, k, fkey);
		return;
	}
	if (t->mode == TUI_MODE_MODELS) {
		tui_models_key(t, k, fkey);
		return;
	}
	if (t->mode == TUI_MODE_PROMPT) {
		tui_prompt_key(t, k, fkey);
		return;
	}
	if (t->mode == TUI_MODE_TOKENS) {
		if (!fkey && k == 3 && t->busy) { /* Ctrl-C still stops */
			tui_worker_cancel(&t->w);
			return;
		}
		tui_tokens_key(t, k, fkey);
		return;
	}
	if (t->search.on && tui_search_key(t, k, fkey))
		return;      /* Ctrl-R's search took the key */
	if (fkey || k != 12) /* a message lasts until the next key; Ctrl-L
	                        redraws the same screen */
		t->msg[0] = '\0';
	tui_key_chat(t, k, fkey);
}

/* ---------- setup ---------- */

/* Curses mode: raw keys, no echo, keypad, bracketed paste. */
static void tui_screen_on(struct tui *t)
{
	tcgetattr(STDIN_FILENO, &tui_tios);
	initscr();
	tui_active = 1;
	raw();
	noecho();
	nonl();
	keypad(stdscr, TRUE);
	nodelay(stdscr, TRUE);
	set_escdelay(25);
	tui_draw_colors(t);
	tui_input_define_keys();
	fputs("\033[?2004h", stdout); /* bracketed paste on */
	fflush(stdout);
	tui_out_capture(); /* from now on, one write per frame */
}

/* Fill the status bar's fixed figures and the first transcript. */
static void tui_init_state(struct tui *t, struct session *s)
{
	size_t n, kvn;
	const struct session_msg *m = session_messages(s, &n);

	tui_models_status(t, s); /* model, backend, context, vocabulary */
	session_kv_tokens(s, &kvn);
	t->ctx_used = (int32_t)kvn;
	t->conv_id = session_conv_id(s);
	t->jump_p = 0.5f;
	t->flag_layer = -1;
	for (size_t i = 0; i < n; i++) {
		struct tui_msg *x =
		    tui_add(t, m[i].role, m[i].content, m[i].len);
		char err[256];

		if (x == NULL)
			continue;
		x->finish = m[i].finish;
		tui_msg_set_reasoning(x, m[i].reasoning, m[i].reasoning_len,
		                      m[i].n_reasoning, m[i].reasoning_open);
		if (x->role == STORE_ROLE_ASSISTANT &&
		    tui_worker_stored_toks(s, i, &x->toks, &x->n_toks, err,
		                           sizeof(err)) == 0)
			x->cap_toks = x->n_toks;
		x->toks_none = x->role == STORE_ROLE_ASSISTANT && !x->n_toks;
	}
}

int tui_run(struct session *s, const struct tui_opts *o)
{
	struct tui *t = calloc(1, sizeof(*t));
	char err[512];
	int status;

	if (t == NULL) {
		session_close(s);
		fputs("parley: out of memory\n", stderr);
		return 1;
	}
	t->o = o;
	t->sig_fd = -1;
	tui_init_state(t, s);
	if (o->db_path &&
	    store_open(o->db_path, 0, &t->st, err, sizeof(err)) != STORE_OK)
		t->st = NULL; /* the list says why when asked */
	tui_refresh_title(t);
	if (tui_signals(t) ||
	    tui_input_open(&t->in, o->history_path, tui_wait_edit, t, err,
	                   sizeof(err)) ||
	    tui_worker_open(&t->w, s, o->so, err, sizeof(err))) {
		fprintf(stderr, "parley: %s\n", err[0] ? err : "setup failed");
		session_close(s);
		tui_input_close(&t->in);
		store_close(t->st);
		free(t);
		return 1;
	}
	t->w.cfg = o->cfg; /* before the first job (tui_worker.h) */
	atexit(tui_restore);
	tui_screen_on(t);
	if (o->resumed)
		tui_say(t, false, "conversation %lld resumed",
		        (long long)t->conv_id);
	t->dirty = true;
	while (!t->quit) {
		int k;
		bool fkey;

		if (tui_wait(t, &k, &fkey))
			tui_key(t, k, fkey);
	}
	tui_restore();
	tui_worker_close(&t->w); /* stops a reply: stored as interrupted */
	tui_input_close(&t->in);
	store_close(t->st);
	tui_list_close(t);
	tui_models_close(t);
	tui_prompt_close(t);
	tui_msgs_clear(t);
	free(t->msgs);
	tui_input_paste_free(&t->paste);
	tui_search_free(t);
	status = t->status;
	close(t->sig_fd);
	free(t);
	return status;
}

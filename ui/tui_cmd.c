/*
 * tui_cmd.c - the full-screen UI's slash commands and its help text.
 * Commands that change the session run only while no job does (the
 * worker's invariant 1): they call the session from this thread then.
 */
#include "tui_int.h"

#include "config.h"
#include "tui_md.h"

#include <curses.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char tui_cmd_help[] =
    "parley - keys\n"
    "  Enter               send the message\n"
    "  Ctrl-J, Alt-Enter   a new line in the message\n"
    "  Ctrl-C              stop the reply; clear the input; quit when "
    "empty\n"
    "  Ctrl-D              quit (on an empty input)\n"
    "  Up, Down            history (shared with the plain REPL)\n"
    "  Ctrl-R              search the history (Ctrl-R again: older; "
    "Enter takes the line, Esc puts yours back)\n"
    "  Ctrl-A/E, Alt-B/F   line start/end, word back/forward\n"
    "  Ctrl-K, Ctrl-Y      kill to the end of the line, yank\n"
    "  PgUp, PgDn          scroll the transcript\n"
    "  F1                  this help (PgUp/PgDn scroll it, other keys "
    "close it)\n"
    "  F2                  the debug pane: a token's probabilities, top 10, "
    "layers, flags\n"
    "  F3                  the stored conversations (also /list)\n"
    "  F4                  cursor mode over the replies' tokens (the pane "
    "follows)\n"
    "  F5                  shade reply tokens by probability (red < 0.25, "
    "yellow < 0.6)\n"
    "  F6                  the prompt view (also /prompt)\n"
    "  F7                  fold / unfold the last reply's reasoning (a "
    "thinking model's)\n"
    "  F8                  the model picker: type to filter, Enter loads "
    "the model, Esc leaves (also /model)\n"
    "  Ctrl-L              redraw the screen\n"
    "  Ctrl-Z              suspend to the shell (fg comes back)\n"
    "\n"
    "Commands\n"
    "  /regen              generate the last reply again\n"
    "  /edit [TEXT]        replace your last message (without TEXT: "
    "edit it in the input)\n"
    "  /system [TEXT|-]    show, set or remove the system prompt\n"
    "  /think [on|off]     the template's enable_thinking (templates that "
    "read it: Qwen3's, Gemma 4's), from the next turn\n"
    "  /reasoning [low|medium|high]  the template's reasoning_effort "
    "(gpt-oss's), from the next turn\n"
    "  /set [KEY VALUE]    show or change temp, top-k, top-p, min-p, "
    "repeat-penalty, repeat-last-n, seed, n-predict\n"
    "  /clear              start a new conversation\n"
    "  /title TITLE        name this conversation\n"
    "  /export [FILE]      the conversation as Markdown (default "
    "parley-ID.md)\n"
    "  /copy [N]           the last reply, or its Nth code block, to the "
    "clipboard (OSC 52; also written to a file)\n"
    "  /raw                replies as generated, or as Markdown again\n"
    "  /stats              speed and context of the last reply\n"
    "  /verify             check each step against the CPU reference "
    "(on/off; a summary after each reply)\n"
    "  /pane               the debug pane on or off (F2)\n"
    "  /prompt             the last prompt as tokens: ids, specials, KV "
    "cache reuse (F6)\n"
    "  /list               the stored conversations (F3)\n"
    "  /model [NAME]       the model picker (F8); with NAME (as -m takes "
    "it) go on with that model: the conversation is rendered anew with "
    "its template\n"
    "  /help               this help (F1)\n"
    "  /quit               leave\n"
    "\n"
    "Cursor mode (F4)\n"
    "  ←/→ h/l j/k         the previous / next token (across replies)\n"
    "  Home, End           the reply's first / last token\n"
    "  n, N                the next / previous token under the bound "
    "(raw p, 0.50)\n"
    "  +, -                raise / lower the bound by 0.05\n"
    "  1-9, 0              branch here to the pane's alternative #1-#10\n"
    "  [, ]                the reply's previous / next sibling branch\n"
    "  r, F7               fold / unfold the reply's reasoning (its "
    "tokens are skipped while folded)\n"
    "  s, F5, F2           shading, the pane\n"
    "  Esc, q, F4          back to the chat\n"
    "\n"
    "Debug pane flags (also in the status bar): NaN/Inf in a layer; a "
    "layer's rms over 16x the previous; raw entropy over 0.9 ln(vocab); "
    "the same token 8 times in a row. Under NO_COLOR shading underlines "
    "tokens under 0.25.\n"
    "\n"
    "Conversation list (F3)\n"
    "  Up, Down, Enter     choose, open\n"
    "  /                   full-text search (Enter runs it, Esc leaves it)\n"
    "  r, d                rename, delete (asks first)\n"
    "  Esc, q, F3          back to the chat\n";

/* The session, when no job runs; else says why not and returns NULL. */
static struct session *tui_cmd_session(struct tui *t)
{
	struct session *s = t->busy ? NULL : tui_worker_session(&t->w);

	if (s == NULL)
		tui_say(t, true,
		        t->busy ? "a reply is running (Ctrl-C stops "
		                  "it)"
		                : "no session");
	return s;
}

/* The last reply's text, or NULL. */
static const struct tui_msg *tui_cmd_last_reply(const struct tui *t)
{
	for (size_t i = t->n_msgs; i > 0; i--)
		if (t->msgs[i - 1].role == STORE_ROLE_ASSISTANT)
			return &t->msgs[i - 1];
	return NULL;
}

/* Standard base64 of S[0, n) (malloc'd). */
static char *tui_cmd_base64(const unsigned char *s, size_t n)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopq"
	                          "rstuvwxyz0123456789+/";
	char *out = malloc((n + 2) / 3 * 4 + 1), *p = out;

	if (out == NULL)
		return NULL;
	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)s[i] << 16;

		if (i + 1 < n)
			v |= (unsigned)s[i + 1] << 8;
		if (i + 2 < n)
			v |= s[i + 2];
		*p++ = tab[(v >> 18) & 63];
		*p++ = tab[(v >> 12) & 63];
		*p++ = i + 1 < n ? tab[(v >> 6) & 63] : '=';
		*p++ = i + 2 < n ? tab[v & 63] : '=';
	}
	*p = '\0';
	return out;
}

/* /copy [N]: OSC 52 to the terminal's clipboard, and a file. */
static void tui_cmd_copy(struct tui *t, const char *args)
{
	const struct tui_msg *m = tui_cmd_last_reply(t);
	char *text = NULL, *b64, *path;
	size_t len = 0;
	int nth = atoi(args), count = 0;

	if (m == NULL || m->len == 0) {
		tui_say(t, true, "no reply to copy yet");
		return;
	}
	if (nth > 0) {
		text = tui_md_code_block(m->text, m->len, nth, &len, &count);
		if (text == NULL) {
			tui_say(t, true, "the last reply has %d code block%s",
			        count, count == 1 ? "" : "s");
			return;
		}
	} else {
		text = strdup(m->text);
		len = m->len;
	}
	if (text == NULL ||
	    (b64 = tui_cmd_base64((unsigned char *)text, len)) == NULL) {
		free(text);
		tui_say(t, true, "out of memory");
		return;
	}
	/* between frames: the last one is out */
	tui_out_write("\033]52;c;", 7);
	tui_out_write(b64, strlen(b64));
	tui_out_write("\a", 1);
	free(b64);
	path = config_state_path("clipboard.txt", true);
	FILE *fp = path ? fopen(path, "w") : NULL;

	if (fp && fwrite(text, 1, len, fp) == len && fclose(fp) == 0)
		tui_say(t, false, "copied %zu bytes (OSC 52; also in %s)", len,
		        path);
	else {
		if (fp)
			fclose(fp);
		tui_say(t, false, "copied %zu bytes (OSC 52)", len);
	}
	free(path);
	free(text);
}

/* /export [FILE]: the conversation as Markdown. */
static void tui_cmd_export(struct tui *t, const char *args)
{
	char err[256], name[64], *md = NULL;
	size_t len = 0;
	const char *file = *args ? args : name;

	if (t->st == NULL || t->conv_id == 0) {
		tui_say(t, true, "nothing stored to export yet");
		return;
	}
	snprintf(name, sizeof(name), "parley-%lld.md", (long long)t->conv_id);
	if (store_export_md(t->st, t->conv_id, &md, &len, err, sizeof(err)) !=
	    STORE_OK) {
		tui_say(t, true, "%s", err);
		return;
	}
	FILE *fp = fopen(file, "w");

	if (fp == NULL || fwrite(md, 1, len, fp) != len || fclose(fp) != 0) {
		tui_say(t, true, "%s: %s", file, strerror(errno));
	} else {
		tui_say(t, false, "exported to %s", file);
	}
	free(md);
}

/* /set [KEY VALUE] (as in the plain REPL). */
static void tui_cmd_set(struct tui *t, char *args)
{
	struct config *c = t->o->cfg;
	struct session *s = tui_cmd_session(t);
	char err[256], *key, *val;

	if (s == NULL)
		return;
	if (c == NULL) {
		tui_say(t, true, "/set is not available here");
		return;
	}
	key = strtok(args, " \t");
	val = key ? strtok(NULL, "") : NULL;
	if (key == NULL) {
		const struct sampler_config *sc = session_sampling(s);

		tui_say(t, false,
		        "temp %g  top-k %d  top-p %g  min-p %g  "
		        "repeat-penalty %g  repeat-last-n %d  seed %llu  "
		        "n-predict %d",
		        sc->temperature, sc->top_k, sc->top_p, sc->min_p,
		        sc->repeat_penalty, sc->penalty_last_n,
		        (unsigned long long)sc->seed, c->n_predict);
		return;
	}
	while (val && (*val == ' ' || *val == '\t'))
		val++;
	if (val == NULL || *val == '\0') {
		tui_say(t, true, "/set %s needs a value", key);
		return;
	}
	if (strcmp(key, "n") == 0)
		key = "n-predict";
	if (!strcmp(key, "model") || !strcmp(key, "ctx") ||
	    !strcmp(key, "threads") || !strcmp(key, "template") ||
	    !strcmp(key, "db")) {
		tui_say(t, true, "%s cannot change in a running chat", key);
		return;
	}
	struct config copy = *c;

	if (config_set(&copy, key, val, err, sizeof(err))) {
		tui_say(t, true, "%s", err);
		return;
	}
	if (copy.samp.n_probs < TUI_TOP) /* the pane's alternatives */
		copy.samp.n_probs = TUI_TOP;
	if (session_set_sampling(s, &copy.samp, err, sizeof(err))) {
		tui_say(t, true, "%s", err);
		return;
	}
	/* config_set changed only scalar fields of COPY for these keys */
	c->samp = copy.samp;
	c->n_predict = copy.n_predict;
	session_set_n_predict(s, c->n_predict);
	tui_say(t, false, "%s = %s", key, val);
}

/* /system [TEXT|-]. */
/* /think on|off: the template's enable_thinking from the next turn (the
 * plain REPL's /think); alone: what it is. */
static void tui_cmd_think(struct tui *t, const char *args)
{
	struct session *s = tui_cmd_session(t);
	const char *state;

	if (s == NULL)
		return;
	if ((state = session_think_cmd(s, args)) == NULL)
		tui_say(t, true, "/think on or /think off");
	else
		tui_say(t, false, "thinking %s", state);
}

/* /reasoning low|medium|high: the template's reasoning_effort from the
 * next turn (the plain REPL's /reasoning); alone: what it is. */
static void tui_cmd_reasoning(struct tui *t, const char *args)
{
	struct session *s = tui_cmd_session(t);
	const char *state;

	if (s == NULL)
		return;
	if ((state = session_reasoning_cmd(s, args)) == NULL)
		tui_say(t, true, "/reasoning low, medium or high");
	else
		tui_say(t, false, "reasoning %s", state);
}

static void tui_cmd_system(struct tui *t, const char *args)
{
	struct session *s = tui_cmd_session(t);
	char err[256];
	size_t n;

	if (s == NULL)
		return;
	const struct session_msg *m = session_messages(s, &n);

	if (*args == '\0') {
		const char *cur = n && m[0].role == STORE_ROLE_SYSTEM
		                      ? m[0].content
		                      : "(no system prompt)";

		tui_add(t, TUI_ROLE_NOTICE, cur, strlen(cur));
		return;
	}
	if (session_set_system(s, strcmp(args, "-") ? args : NULL, err,
	                       sizeof(err))) {
		tui_say(t, true, "%s", err);
		return;
	}
	tui_say(t, false,
	        strcmp(args, "-") ? "system prompt set (from the "
	                            "next reply)"
	                          : "system prompt removed");
}

/* /stats: the last reply's figures as a notice. */
static void tui_cmd_stats(struct tui *t)
{
	const struct session_stats *st = &t->last;
	char buf[512];

	if (!t->have_last) {
		tui_say(t, false, "no reply yet");
		return;
	}
	if (st->n_ctx == 0 && st->server_prompt_ms > 0) /* a server's */
		snprintf(buf, sizeof(buf),
		         "reply %d tokens, %.1f tok/s; first text after %.0f "
		         "ms; the server's prompt: %d tokens in %.0f ms",
		         st->n_gen, t->decode_tps, st->prefill_ms,
		         st->server_prompt_n, st->server_prompt_ms);
	else if (st->n_ctx == 0)
		snprintf(
		    buf, sizeof(buf),
		    "reply %d tokens, %.1f tok/s; first text after %.0f ms",
		    st->n_gen, t->decode_tps, st->prefill_ms);
	else {
		char again[48] = "", shift[48] = "";

		/* a recurrent state's snapshot was further back */
		if (st->n_reeval > 0)
			snprintf(again, sizeof(again),
			         ", %d of them evaluated again", st->n_reeval);
		/* turns left a full context: the cache shifted past them */
		if (st->n_shifted > 0)
			snprintf(shift, sizeof(shift),
			         ", %d of them by a context shift",
			         st->n_shifted);
		snprintf(
		    buf, sizeof(buf),
		    "reply %d tokens, %.1f tok/s; prompt %d tokens (%d "
		    "reused%s, %d new%s), %.1f tok/s; context %d/%d; first "
		    "token after %.0f ms",
		    st->n_gen, t->decode_tps, st->n_prompt, st->n_reused, shift,
		    st->n_prompt_eval, again, t->prefill_tps, st->n_ctx_used,
		    st->n_ctx, st->first_ms);
	}
	tui_add(t, TUI_ROLE_NOTICE, buf, strlen(buf));
}

/* /edit [TEXT]. */
static void tui_cmd_edit(struct tui *t, const char *args)
{
	const struct tui_msg *u = NULL;

	for (size_t i = t->n_msgs; i > 0 && !u; i--)
		if (t->msgs[i - 1].role == STORE_ROLE_USER)
			u = &t->msgs[i - 1];
	if (u == NULL) {
		tui_say(t, true, "no message to edit yet");
		return;
	}
	if (t->busy) {
		tui_say(t, true, "a reply is running (Ctrl-C stops it)");
		return;
	}
	if (*args) {
		while (t->n_msgs &&
		       t->msgs[t->n_msgs - 1].role != STORE_ROLE_USER)
			tui_drop_last(t);
		tui_drop_last(t);
		tui_add(t, STORE_ROLE_USER, args, strlen(args));
		tui_start(t, TUI_JOB_EDIT, args, strlen(args), 0);
		return;
	}
	tui_input_set(&t->in, u->text);
	t->editing = true;
	tui_say(t, false,
	        "editing your last message: Enter sends it, "
	        "Ctrl-C cancels");
}

void tui_cmd(struct tui *t, char *line)
{
	char *cmd = line + 1, *args, err[256];

	args = cmd + strcspn(cmd, " \t\n");
	if (*args)
		*args++ = '\0';
	while (*args == ' ' || *args == '\t' || *args == '\n')
		args++;
	for (size_t n = strlen(args);
	     n && (args[n - 1] == ' ' || args[n - 1] == '\n');)
		args[--n] = '\0';
	if (!strcmp(cmd, "quit") || !strcmp(cmd, "q") || !strcmp(cmd, "exit")) {
		t->quit = !t->busy;
		if (t->busy)
			tui_say(t, true,
			        "a reply is running (Ctrl-C stops it)");
	} else if (!strcmp(cmd, "help") || !strcmp(cmd, "?")) {
		t->mode = TUI_MODE_HELP;
		t->help_top = 0;
	} else if (!strcmp(cmd, "pane")) {
		t->pane = !t->pane;
	} else if (!strcmp(cmd, "prompt")) {
		tui_prompt_open(t);
	} else if (!strcmp(cmd, "list")) {
		tui_list_open(t);
	} else if (!strcmp(cmd, "model") || !strcmp(cmd, "models")) {
		if (*args)
			tui_models_switch(t, args);
		else
			tui_models_open(t);
	} else if (!strcmp(cmd, "regen")) {
		const struct tui_msg *r = tui_cmd_last_reply(t);

		if (r == NULL) {
			tui_say(t, true, "no reply to regenerate yet");
		} else if (!t->busy) {
			/* the old reply goes; notices after it stay */
			tui_remove(t, (size_t)(r - t->msgs));
			tui_start(t, TUI_JOB_REGEN, NULL, 0, 0);
		} else {
			tui_say(t, true, "a reply is running");
		}
	} else if (!strcmp(cmd, "edit")) {
		tui_cmd_edit(t, args);
	} else if (!strcmp(cmd, "system")) {
		tui_cmd_system(t, args);
	} else if (!strcmp(cmd, "think")) {
		tui_cmd_think(t, args);
	} else if (!strcmp(cmd, "reasoning")) {
		tui_cmd_reasoning(t, args);
	} else if (!strcmp(cmd, "set")) {
		tui_cmd_set(t, args);
	} else if (!strcmp(cmd, "clear") || !strcmp(cmd, "new")) {
		tui_start(t, TUI_JOB_CLEAR, NULL, 0, 0);
	} else if (!strcmp(cmd, "title") || !strcmp(cmd, "save-title")) {
		struct session *s = tui_cmd_session(t);

		if (s == NULL)
			return;
		if (*args == '\0')
			tui_say(t, true, "/title TITLE");
		else if (session_set_title(s, args, err, sizeof(err)))
			tui_say(t, true, "%s", err);
		else {
			t->conv_id = session_conv_id(s);
			tui_refresh_title(t);
			tui_say(t, false, "title saved");
		}
	} else if (!strcmp(cmd, "export")) {
		tui_cmd_export(t, args);
	} else if (!strcmp(cmd, "copy")) {
		tui_cmd_copy(t, args);
	} else if (!strcmp(cmd, "raw")) {
		t->raw = !t->raw;
		tui_say(t, false,
		        t->raw ? "replies shown as generated"
		               : "replies shown as Markdown");
	} else if (!strcmp(cmd, "stats")) {
		tui_cmd_stats(t);
	} else if (!strcmp(cmd, "verify")) {
		struct session *s = tui_cmd_session(t);
		bool on;

		if (s == NULL)
			return;
		on = !session_verifying(s);
		if (session_set_verify(s, on, err, sizeof(err)))
			tui_say(t, true, "%s", err);
		else
			tui_say(t, false,
			        on ? "verification on: a summary after each "
			             "reply"
			           : "verification off");
	} else {
		tui_say(t, true, "unknown command /%s (F1 lists them)", cmd);
	}
}

/*
 * tui_models.c - the model picker (F8, /model) of the full-screen UI and
 * switching the conversation to another model.
 *
 * The picker lists what `parley models` lists (modelstore.h), found by
 * the worker (a MODELS job: reading the stores' headers may take a while
 * and never blocks a frame), narrowed as the user types (a substring of
 * the name, case folded). A model parley cannot run is shown dimmed with
 * its reason and cannot be chosen. Choosing one, or /model NAME, starts
 * a MODEL job: the worker loads it beside the old one and swaps them
 * (session_set_model), sending each step as TUI_EV_PHASE for the status
 * bar; the UI stays live (typing, scrolling) and no turn starts while it
 * runs (t->busy, as for a reply). The messages stay: the next turn
 * renders them with the new model's template.
 */
#include "tui_int.h"

#include <curses.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Whether NAME holds F[0, n) (ASCII case folded; n 0: always). */
static bool tui_models_match(const char *name, const char *f, size_t n)
{
	size_t len = strlen(name);

	for (size_t i = 0; n <= len && i <= len - n; i++)
		if (strncasecmp(name + i, f, n) == 0)
			return true;
	return false;
}

/* The rows the filter keeps; the selection stays in range. */
static void tui_models_filter(struct tui *t)
{
	struct tui_models *m = &t->models;

	free(m->rows);
	m->rows = malloc((m->l.n ? m->l.n : 1) * sizeof(*m->rows));
	m->n_rows = 0;
	if (m->rows == NULL)
		return;
	for (size_t i = 0; i < m->l.n; i++)
		if (tui_models_match(m->l.v[i].name, m->filter, m->filter_n))
			m->rows[m->n_rows++] = i;
	if (m->sel >= (int)m->n_rows)
		m->sel = m->n_rows ? (int)m->n_rows - 1 : 0;
	if (m->sel < 0)
		m->sel = 0;
}

void tui_models_status(struct tui *t, struct session *s)
{
	const char *name = session_model_name(s);
	const char *dev = session_device_name(s);

	/* a path: its file's name; a listed name ("qwen3:8b") as it is */
	if (strcmp(name, session_model_path(s)) == 0) {
		const char *base = strrchr(name, '/');
		char *dot;

		snprintf(t->model, sizeof(t->model), "%s",
		         base ? base + 1 : name);
		if ((dot = strstr(t->model, ".gguf")) != NULL)
			*dot = '\0';
	} else {
		snprintf(t->model, sizeof(t->model), "%s", name);
	}
	/* "cuda NVIDIA H100 80GB HBM3", or "cpu" */
	snprintf(t->backend, sizeof(t->backend), "%s%s%s",
	         session_backend_name(s), dev ? " " : "", dev ? dev : "");
	if (session_server(s)) { /* "remote host:port": the server, short */
		const char *h = strstr(session_server(s), "://");
		size_t l;

		h = h ? h + 3 : session_server(s);
		l = strlen(h);
		if (l >= 3 && strcmp(h + l - 3, "/v1") == 0)
			l -= 3;
		snprintf(t->backend, sizeof(t->backend), "remote %.*s", (int)l,
		         h);
	}
	t->n_ctx = session_n_ctx(s);
	t->n_vocab = session_n_vocab(s);
}

/* Whether a job runs (no model may load then); says which. */
static bool tui_models_busy(struct tui *t)
{
	if (!t->busy)
		return false;
	tui_say(t, true, "%s",
	        t->job == TUI_JOB_MODEL    ? "a model is loading"
	        : t->job == TUI_JOB_MODELS ? "still looking for models"
	                                   : "a reply is running (Ctrl-C "
	                                     "stops it)");
	return true;
}

void tui_models_open(struct tui *t)
{
	struct tui_models *m = &t->models;

	if (tui_models_busy(t))
		return;
	tui_models_close(t);
	if (tui_start(t, TUI_JOB_MODELS, NULL, 0, 0))
		return;
	m->scanning = true;
	t->mode = TUI_MODE_MODELS;
}

void tui_models_close(struct tui *t)
{
	struct tui_models *m = &t->models;
	bool scanning = m->scanning;

	modelstore_free(&m->l);
	free(m->rows);
	memset(m, 0, sizeof(*m));
	m->scanning = scanning; /* its END is still to come */
	if (t->mode == TUI_MODE_MODELS)
		t->mode = TUI_MODE_CHAT;
}

void tui_models_scanned(struct tui *t, struct tui_ev *e)
{
	struct tui_models *m = &t->models;

	m->scanning = false;
	if (t->mode != TUI_MODE_MODELS)
		return; /* closed meanwhile: the event frees the list */
	if (e->rc != 0)
		return; /* tui_on_end said why */
	modelstore_free(&m->l);
	m->l = e->models;
	memset(&e->models, 0, sizeof(e->models));
	tui_models_filter(t);
	if (m->l.n == 0)
		tui_say(t, false,
		        "no local models (parley pull, or models-dir in the "
		        "config)");
}

/* Start the MODEL job on NAME and PATH ("" : resolve NAME). */
static void tui_models_load(struct tui *t, const char *name, const char *path)
{
	size_t nl = strlen(name), pl = strlen(path);
	char *text = malloc(nl + 1 + pl + 1);

	if (text == NULL) {
		tui_say(t, true, "out of memory");
		return;
	}
	memcpy(text, name, nl + 1);
	memcpy(text + nl + 1, path, pl + 1);
	if (tui_start(t, TUI_JOB_MODEL, text, nl + 1 + pl, 0) == 0) {
		snprintf(t->load_name, sizeof(t->load_name), "%s", name);
		t->load_phase[0] = '\0';
	}
	free(text);
}

void tui_models_switch(struct tui *t, const char *name)
{
	if (tui_models_busy(t))
		return;
	tui_models_load(t, name, "");
}

/* Enter: load the selected model, unless parley cannot run it. */
static void tui_models_choose(struct tui *t)
{
	struct tui_models *m = &t->models;
	const struct modelstore_entry *e;

	if (m->scanning) {
		tui_say(t, false, "still looking for models...");
		return;
	}
	if (m->n_rows == 0) {
		tui_say(t, true, "no model matches");
		return;
	}
	e = &m->l.v[m->rows[m->sel]];
	if (!e->ok) {
		tui_say(t, true, "%s cannot run here: %s", e->name,
		        e->why ? e->why : "unknown reason");
		return;
	}
	char *name = strdup(e->name), *path = strdup(e->path);

	tui_models_close(t);
	if (name && path)
		tui_models_load(t, name, path);
	else
		tui_say(t, true, "out of memory");
	free(name);
	free(path);
}

void tui_models_loaded(struct tui *t, struct tui_ev *e)
{
	struct session *s = tui_worker_session(&t->w);
	char note[300];

	t->load_phase[0] = '\0';
	if (e->rc != 0) {
		tui_say(t, true, "model %s not loaded: %s", t->load_name,
		        e->text ? e->text : "error");
		return;
	}
	if (s == NULL)
		return;
	tui_models_status(t, s);
	t->ctx_used = 0;
	t->have_last = false;
	t->reused = 0;
	t->prefill_tps = t->decode_tps = 0;
	/* where in the conversation the model changed */
	snprintf(note, sizeof(note), "model: %s", t->model);
	tui_add(t, TUI_ROLE_NOTICE, note, strlen(note));
	tui_say(t, false, "model %s loaded (%s, context %d)", t->model,
	        t->backend, t->n_ctx);
}

/* Remove the filter's last character (UTF-8). */
static void tui_models_backspace(struct tui_models *m)
{
	while (m->filter_n > 0) {
		m->filter_n--;
		if (((unsigned char)m->filter[m->filter_n] & 0xc0) != 0x80)
			break;
	}
	m->filter[m->filter_n] = '\0';
}

/* Add character C to the filter. */
static void tui_models_add(struct tui_models *m, wchar_t c)
{
	char buf[8];
	int n = wctomb(buf, c);

	if (n <= 0 || m->filter_n + (size_t)n + 1 > sizeof(m->filter))
		return;
	memcpy(m->filter + m->filter_n, buf, (size_t)n);
	m->filter_n += (size_t)n;
	m->filter[m->filter_n] = '\0';
	m->sel = m->top = 0;
}

void tui_models_key(struct tui *t, int k, bool fkey)
{
	struct tui_models *m = &t->models;
	int n = (int)m->n_rows;

	if (fkey && k == KEY_RESIZE)
		return;
	t->msg[0] = '\0';
	if (fkey) {
		if (k == KEY_UP && m->sel > 0)
			m->sel--;
		else if (k == KEY_DOWN && m->sel + 1 < n)
			m->sel++;
		else if (k == KEY_PPAGE)
			m->sel = m->sel > 10 ? m->sel - 10 : 0;
		else if (k == KEY_NPAGE)
			m->sel =
			    m->sel + 10 < n ? m->sel + 10 : (n ? n - 1 : 0);
		else if (k == KEY_HOME)
			m->sel = 0;
		else if (k == KEY_END)
			m->sel = n ? n - 1 : 0;
		else if (k == KEY_ENTER)
			tui_models_choose(t);
		else if (k == KEY_BACKSPACE) {
			tui_models_backspace(m);
			tui_models_filter(t);
		} else if (k == KEY_F(8)) {
			tui_models_close(t);
			tui_say(t, false, "model unchanged");
		}
		return;
	}
	switch (k) {
	case '\r':
	case '\n':
		tui_models_choose(t);
		return;
	case 27: /* Esc, Ctrl-G, Ctrl-C: back, nothing changed */
	case 7:
	case 3:
		tui_models_close(t);
		tui_say(t, false, "model unchanged");
		return;
	case 127:
	case 8:
		tui_models_backspace(m);
		tui_models_filter(t);
		return;
	case 21: /* Ctrl-U: the whole filter */
		m->filter_n = 0;
		m->filter[0] = '\0';
		tui_models_filter(t);
		return;
	default:
		break;
	}
	if (k >= 32) {
		tui_models_add(m, (wchar_t)k);
		tui_models_filter(t);
	}
}

/* Draw UTF-8 S from the cursor, at most COLS columns. */
static void tui_models_put(const char *s, int cols)
{
	size_t i = 0, len = strlen(s);
	int used = 0;

	while (i < len) {
		size_t k = 1;
		int w;

		while (i + k < len && (s[i + k] & 0xc0) == 0x80)
			k++;
		w = tui_lines_cols(s + i, k);
		if (used + w > cols)
			break;
		addnstr(s + i, (int)k);
		used += w;
		i += k;
	}
}

/* One entry at row Y: its facts, dimmed with the reason when parley
   cannot run it; SEL in reverse video. */
static void tui_models_row(const struct modelstore_entry *e, int y, int cols,
                           int name_w, bool sel)
{
	char params[16], size[16], line[1024];

	modelstore_fmt_count(params, sizeof(params), e->n_params);
	modelstore_fmt_bytes(size, sizeof(size), e->size);
	if (e->ok)
		snprintf(line, sizeof(line), "  %-*s  %-10s %6s  %-8s %8s  %s",
		         name_w, e->name, e->arch ? e->arch : "-", params,
		         e->quant ? e->quant : "-", size,
		         modelstore_source_name(e->source));
	else
		snprintf(line, sizeof(line), "  %-*s  cannot run: %s", name_w,
		         e->name, e->why ? e->why : "unknown reason");
	move(y, 0);
	attr_set((sel ? A_REVERSE : 0) | (e->ok ? 0 : A_DIM), 0, NULL);
	if (sel)
		hline(' ', cols);
	tui_models_put(line, cols);
	attr_set(A_NORMAL, 0, NULL);
}

void tui_models_draw(struct tui *t, int rows, int cols)
{
	struct tui_models *m = &t->models;
	int body = rows - 2, name_w = 8;
	char head[600];

	snprintf(head, sizeof(head),
	         "Models: %zu of %zu  (type to filter, Enter load, Esc back)",
	         m->n_rows, m->l.n);
	move(0, 0);
	attr_set(A_BOLD, 0, NULL);
	tui_models_put(head, cols);
	attr_set(A_NORMAL, 0, NULL);
	snprintf(head, sizeof(head), "filter: %s", m->filter);
	move(1, 0);
	tui_models_put(head, cols - 1);
	if (m->scanning) {
		mvaddnstr(3, 2, "looking for models...", cols - 2);
		return;
	}
	if (m->n_rows == 0) {
		mvaddnstr(3, 2, m->l.n ? "no model matches" : "no local models",
		          cols - 2);
		return;
	}
	if (body < 1)
		return;
	for (size_t i = 0; i < m->n_rows; i++) {
		int w = tui_lines_cols(m->l.v[m->rows[i]].name,
		                       strlen(m->l.v[m->rows[i]].name));

		if (w > name_w)
			name_w = w < cols / 2 ? w : cols / 2;
	}
	if (m->sel < m->top)
		m->top = m->sel;
	if (m->sel >= m->top + body)
		m->top = m->sel - body + 1;
	for (int r = 0; r < body && m->top + r < (int)m->n_rows; r++)
		tui_models_row(&m->l.v[m->rows[m->top + r]], r + 2, cols,
		               name_w, m->top + r == m->sel);
}

/*
 * store_fmt.c - text for the CLI: conversation tables, transcripts,
 * Markdown, titles; and the growing-string helper the store uses.
 *
 * Everything read from the database is hostile for a terminal: titles and
 * messages may hold escape sequences. The terminal formats (list, show)
 * replace control characters and invalid UTF-8; Markdown export keeps the
 * text as stored (it is data for a file).
 */
#define _POSIX_C_SOURCE 200809L
#include "store_int.h"
#include "utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

char *store_sb_take(struct sbuf *b, size_t *len)
{
	size_t n = b->len;

	if (b->failed) {
		sbuf_free(b);
		return NULL;
	}
	if (len)
		*len = n;
	return sbuf_take(b);
}

/* Length of the valid UTF-8 sequence at S (N bytes left), or 0; the C1
   controls U+0080..U+009F count as invalid: some terminals take them for
   escape sequences. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	size_t k = utf8_valid_len(s, n);

	return k == 2 && utf8_decode(s, 2) < 0xa0 ? 0 : k;
}

void store_sb_safe(struct sbuf *b, const char *s, size_t n, bool keep_newlines)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0;

	while (i < n) {
		size_t k = utf8_seq(u + i, n - i);

		if (k == 1 && (u[i] < 0x20 || u[i] == 0x7f) &&
		    !(keep_newlines && (u[i] == '\n' || u[i] == '\t'))) {
			if (u[i] == '\n' || u[i] == '\t' || u[i] == '\r')
				sbuf_add(b, " ", 1);
			else
				sbuf_printf(b, "^%c", u[i] ^ 0x40);
			i++;
		} else if (k == 0) {
			sbuf_printf(b, "\\x%02x", u[i]);
			i++;
		} else {
			sbuf_add(b, s + i, k);
			i += k;
		}
	}
}

char *store_fmt_title(const char *text, size_t len, size_t max_chars)
{
	struct sbuf b = SBUF_INIT;
	const unsigned char *u = (const unsigned char *)text;
	size_t i = 0, chars = 0;
	bool space = false;

	while (i < len &&
	       (u[i] == ' ' || u[i] == '\n' || u[i] == '\t' || u[i] == '\r'))
		i++;
	while (i < len) {
		size_t k = utf8_seq(u + i, len - i);

		if (k == 1 && (u[i] <= ' ' || u[i] == 0x7f)) {
			space = true;
			i++;
			continue;
		}
		if (chars + (space ? 1 : 0) >= max_chars) {
			sbuf_adds(&b, "...");
			break;
		}
		if (space) {
			sbuf_add(&b, " ", 1);
			chars++;
			space = false;
		}
		if (k == 0) {
			i++; /* drop invalid bytes */
			continue;
		}
		sbuf_add(&b, text + i, k);
		chars++;
		i += k;
	}
	return store_sb_take(&b, NULL);
}

/* "2026-11-21 19:54" (local time) or a relative time when recent. */
static void fmt_when(char *buf, size_t len, int64_t ms, int64_t now_ms)
{
	int64_t d = (now_ms - ms) / 1000;
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (now_ms && d >= 0 && d < 60)
		snprintf(buf, len, "just now");
	else if (now_ms && d >= 0 && d < 3600)
		snprintf(buf, len, "%lld min ago", (long long)(d / 60));
	else if (now_ms && d >= 0 && d < 86400)
		snprintf(buf, len, "%lld h ago", (long long)(d / 3600));
	else if (localtime_r(&t, &tm))
		strftime(buf, len, "%Y-%m-%d %H:%M", &tm);
	else
		snprintf(buf, len, "?");
}

char *store_fmt_list(const struct store_conv *v, size_t n, int64_t now_ms,
                     int width)
{
	struct sbuf b = SBUF_INIT;
	char when[64];

	sbuf_printf(&b, "%6s  %-16s  %5s  %s\n", "ID", "UPDATED", "MSGS",
	            "TITLE");
	for (size_t i = 0; i < n; i++) {
		/* room left for the title after the fixed columns */
		int room = width > 0 ? width - 34 : 0;
		const char *title = v[i].title[0] ? v[i].title : "(untitled)";
		char *t = store_fmt_title(title, strlen(title),
		                          room > 8    ? (size_t)room
		                          : width > 0 ? 8
		                                      : 1000);

		fmt_when(when, sizeof(when), v[i].updated_ms, now_ms);
		sbuf_printf(&b, "%6lld  %-16s  %5lld  ", (long long)v[i].id,
		            when, (long long)v[i].n_messages);
		if (t)
			store_sb_safe(&b, t, strlen(t), false);
		else
			b.failed = true;
		if (v[i].archived)
			sbuf_adds(&b, " [archived]");
		sbuf_add(&b, "\n", 1);
		free(t);
	}
	return store_sb_take(&b, NULL);
}

char *store_fmt_hits(const struct store_hit *h, size_t n)
{
	struct sbuf b = SBUF_INIT;

	for (size_t i = 0; i < n; i++) {
		char *t = store_fmt_title(h[i].title, strlen(h[i].title), 40);
		char *sn =
		    store_fmt_title(h[i].snippet, strlen(h[i].snippet), 200);

		sbuf_printf(&b, "%lld#%lld  %-9s  ", (long long)h[i].conv_id,
		            (long long)h[i].msg_id, store_role_name(h[i].role));
		if (t && sn) {
			store_sb_safe(&b, t, strlen(t), false);
			sbuf_adds(&b, ": ");
			store_sb_safe(&b, sn, strlen(sn), false);
		} else {
			b.failed = true;
		}
		sbuf_add(&b, "\n", 1);
		free(t);
		free(sn);
	}
	return store_sb_take(&b, NULL);
}

/* After a message heading: branch position, finish reason, speed. */
static void fmt_msg_extra(struct sbuf *b, const struct store_msg *m)
{
	const char *f = store_finish_name(m->finish);

	if (m->n_siblings > 1)
		sbuf_printf(b, " (branch %d/%d)", m->sibling_index + 1,
		            m->n_siblings);
	if (m->role != STORE_ROLE_ASSISTANT)
		return;
	if (!f)
		sbuf_adds(b, " [incomplete]");
	else if (m->finish != STORE_FINISH_STOP)
		sbuf_printf(b, " [%s]", f);
	if (m->stats.n_tokens > 0 && m->stats.decode_ms > 0)
		sbuf_printf(b, " (%lld tokens, %.1f tok/s)",
		            (long long)m->stats.n_tokens,
		            m->stats.n_tokens * 1000.0 / m->stats.decode_ms);
}

/* After a reply's heading: the server and model that answered it (a
   conversation may have moved between servers and the local engine). */
static void fmt_msg_origin(struct sbuf *b, const struct store_msg *m)
{
	if (m->role != STORE_ROLE_ASSISTANT || !m->server || !m->server[0])
		return;
	sbuf_adds(b, " from server ");
	store_sb_safe(b, m->server, strlen(m->server), false);
	if (m->server_model && m->server_model[0]) {
		sbuf_adds(b, ", model ");
		store_sb_safe(b, m->server_model, strlen(m->server_model),
		              false);
	}
}

char *store_fmt_show(const struct store_conv *c, const char *server,
                     const char *server_model, const struct store_msg *m,
                     size_t n)
{
	struct sbuf b = SBUF_INIT;
	char when[64];

	fmt_when(when, sizeof(when), c->created_ms, 0);
	sbuf_printf(&b, "#%lld ", (long long)c->id);
	store_sb_safe(&b, c->title[0] ? c->title : "(untitled)",
	              c->title[0] ? strlen(c->title) : 10, false);
	sbuf_printf(&b, "\ncreated %s, model ", when);
	store_sb_safe(&b, c->model_path, strlen(c->model_path), false);
	sbuf_adds(&b, "\n");
	if (server && server[0]) {
		sbuf_adds(&b, "server ");
		store_sb_safe(&b, server, strlen(server), false);
		if (server_model && server_model[0]) {
			sbuf_adds(&b, ", model ");
			store_sb_safe(&b, server_model, strlen(server_model),
			              false);
		}
		sbuf_adds(&b, "\n");
	}
	if (c->system_prompt) {
		sbuf_adds(&b, "\n--- system prompt\n");
		store_sb_safe(&b, c->system_prompt, strlen(c->system_prompt),
		              true);
		sbuf_adds(&b, "\n");
	}
	for (size_t i = 0; i < n; i++) {
		sbuf_adds(&b, "\n");
		sbuf_printf(&b, "--- %s", store_role_name(m[i].role));
		fmt_msg_extra(&b, &m[i]);
		fmt_msg_origin(&b, &m[i]);
		sbuf_adds(&b, "\n");
		if (m[i].reasoning_len || m[i].reasoning_open) {
			sbuf_adds(&b, m[i].reasoning_open
			                  ? "[reasoning, unfinished]\n"
			                  : "[reasoning]\n");
			store_sb_safe(&b, m[i].reasoning, m[i].reasoning_len,
			              true);
			sbuf_adds(&b, "\n[answer]\n");
		}
		store_sb_safe(&b, m[i].content, m[i].len, true);
		sbuf_adds(&b, "\n");
	}
	return store_sb_take(&b, NULL);
}

/* A thinking model's reasoning, folded in a <details> block (GitHub and
   most Markdown viewers show it closed) before the answer. */
static void fmt_md_reasoning(struct sbuf *b, const struct store_msg *m)
{
	if (m->reasoning_len == 0 && !m->reasoning_open)
		return;
	sbuf_adds(b, "<details>\n<summary>Reasoning");
	if (m->reasoning_open)
		sbuf_adds(b, ", unfinished");
	if (m->n_reasoning > 0)
		sbuf_printf(b, " (%lld tokens)", (long long)m->n_reasoning);
	sbuf_adds(b, "</summary>\n\n");
	sbuf_add(b, m->reasoning, m->reasoning_len);
	sbuf_adds(b, "\n\n</details>\n\n");
}

char *store_fmt_markdown(const struct store_conv *c, const struct store_msg *m,
                         size_t n)
{
	struct sbuf b = SBUF_INIT;
	char when[64];

	fmt_when(when, sizeof(when), c->created_ms, 0);
	sbuf_adds(&b, "# ");
	if (c->title[0]) {
		char *t = store_fmt_title(c->title, strlen(c->title), 200);

		if (t)
			sbuf_adds(&b, t);
		else
			b.failed = true;
		free(t);
	} else {
		sbuf_printf(&b, "Conversation %lld", (long long)c->id);
	}
	sbuf_printf(&b, "\n\n- created: %s\n- model: `", when);
	sbuf_adds(&b, c->model_path);
	sbuf_adds(&b, "`\n");
	if (c->template_name[0]) {
		sbuf_adds(&b, "- template: ");
		sbuf_adds(&b, c->template_name);
		sbuf_adds(&b, "\n");
	}
	if (c->system_prompt) {
		sbuf_adds(&b, "\n## System\n\n");
		sbuf_adds(&b, c->system_prompt);
		sbuf_adds(&b, "\n");
	}
	for (size_t i = 0; i < n; i++) {
		const char *r = store_role_name(m[i].role);

		sbuf_printf(&b, "\n## %c%s", r[0] - 'a' + 'A', r + 1);
		fmt_msg_extra(&b, &m[i]);
		sbuf_adds(&b, "\n\n");
		fmt_md_reasoning(&b, &m[i]);
		sbuf_add(&b, m[i].content, m[i].len);
		sbuf_adds(&b, "\n");
	}
	return store_sb_take(&b, NULL);
}

/* Index of message ID in V[0, n) (sorted by id), or n. */
static size_t tree_find(const struct store_msg *v, size_t n, int64_t id)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && v[lo].id == id ? lo : n;
}

/*
 * Depth-first, children by id. A message is indented one step deeper
 * than its parent only where the parent has several children (a branch
 * point), so a conversation without branches stays flat.
 */
char *store_fmt_tree(const struct store_msg *v, size_t n, int64_t leaf_id)
{
	struct sbuf b = SBUF_INIT;
	size_t *parent = malloc((n ? n : 1) * sizeof(*parent));
	size_t *nkids = calloc(n ? n : 1, sizeof(*nkids));
	size_t *stack = malloc((n ? n : 1) * sizeof(*stack));
	size_t *level = calloc(n ? n : 1, sizeof(*level));
	bool *active = calloc(n ? n : 1, sizeof(*active));
	size_t sp = 0;

	if (!parent || !nkids || !stack || !level || !active)
		goto out;
	for (size_t i = 0; i < n; i++) {
		parent[i] =
		    v[i].parent_id ? tree_find(v, n, v[i].parent_id) : n;
		if (parent[i] < i) /* parent_id < id: never a cycle */
			nkids[parent[i]]++;
		else
			parent[i] = n;
	}
	for (size_t i = tree_find(v, n, leaf_id); i < n; i = parent[i])
		active[i] = true;
	for (size_t i = n; i-- > 0;) /* roots, lowest id on top */
		if (parent[i] == n)
			stack[sp++] = i;
	while (sp > 0) {
		size_t i = stack[--sp];
		char *t = store_fmt_title(v[i].content, v[i].len, 60);

		sbuf_printf(&b, "%s %*s#%lld %s", active[i] ? "*" : " ",
		            (int)(2 * level[i]), "", (long long)v[i].id,
		            store_role_name(v[i].role));
		if (v[i].n_siblings > 1)
			sbuf_printf(&b, " [%d/%d]", v[i].sibling_index + 1,
			            v[i].n_siblings);
		if (v[i].finish == STORE_FINISH_NONE)
			sbuf_adds(&b, " [incomplete]");
		sbuf_adds(&b, ": ");
		if (t)
			store_sb_safe(&b, t, strlen(t), false);
		else
			b.failed = true;
		sbuf_add(&b, "\n", 1);
		free(t);
		for (size_t k = n;
		     k-- > i + 1;) /* children, lowest id on top */
			if (parent[k] == i) {
				level[k] = level[i] + (nkids[i] > 1);
				stack[sp++] = k;
			}
	}
out:
	if (!parent || !nkids || !stack || !level || !active)
		b.failed = true;
	free(parent);
	free(nkids);
	free(stack);
	free(level);
	free(active);
	return store_sb_take(&b, NULL);
}

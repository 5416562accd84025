/*
 * t_harmony.c - gpt-oss's harmony replies (src/harmony.c through
 * session_think.c): every cut of a sample reply into pieces (in two, in
 * three around each byte, byte by byte) gives the same reasoning and
 * answer; malformed replies (no <|message|>, an unknown channel, text
 * before the first channel, an overlong header) lose nothing and do not
 * crash; with gpt-oss's vocabulary (tok_o200k.h) the reply's token ids,
 * decoded one at a time as the session decodes them, split the same way,
 * <|return|> and <|call|> end the reply and <|end|> does not; the
 * reasoning_effort levels; with SmolLM2 (skipped without it) and a
 * template of gpt-oss's habits (tests/data/think/effort.jinja), the
 * session passes reasoning_effort and the reasoning as the thinking field,
 * and /reasoning says when a template does not read it.
 *
 * A real gpt-oss reply end to end (the model emitting harmony tokens
 * through the engine) needs a gpt-oss GGUF, not available to the tests:
 * the o200k checks feed the ids a reply would hold through the same
 * decoding and splitting the session uses.
 */
#include "gguf.h"
#include "session_int.h"
#include "tap.h"
#include "tok_o200k.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What the splitter released. */
struct split {
	char reasoning[2048], answer[2048];
	size_t nr, na;
};

static int out(void *ud, bool reasoning, const char *p, size_t len)
{
	struct split *x = ud;
	char *dst = reasoning ? x->reasoning : x->answer;
	size_t *n = reasoning ? &x->nr : &x->na;

	if (*n + len >= sizeof(x->reasoning))
		return -1;
	memcpy(dst + *n, p, len);
	*n += len;
	dst[*n] = '\0';
	return 0;
}

/* Whether the prompt of the replies run splits opened the analysis
   channel (HARMONY_OPEN_ANALYSIS). */
static bool run_opened;

/* Split TEXT cut at CUTS[0, ncut) (ascending). Returns whether the reply
   ended inside its reasoning. */
static bool run(const char *text, const size_t *cuts, size_t ncut,
                struct split *x)
{
	struct session_think t;
	size_t at = 0, len = strlen(text);
	bool inside;

	memset(x, 0, sizeof(*x));
	session_think_init(&t, SESSION_THINK_HARMONY, run_opened);
	for (size_t i = 0; i <= ncut; i++) {
		size_t to = i < ncut ? cuts[i] : len;

		if (session_think_feed(&t, text + at, to - at, out, x))
			tap_diag("feed failed");
		at = to;
	}
	session_think_flush(&t, out, x);
	inside = session_think_inside(&t);
	session_think_free(&t);
	return inside;
}

/* Whether X is REASONING, ANSWER and INSIDE is OPEN. */
static bool same(const struct split *x, bool inside, const char *reasoning,
                 const char *answer, bool open)
{
	return strcmp(x->reasoning, reasoning) == 0 &&
	       strcmp(x->answer, answer) == 0 && inside == open;
}

/* TEXT gives REASONING and ANSWER (and OPEN: cut inside the reasoning)
   at every cut. */
static void check(const char *name, const char *text, const char *reasoning,
                  const char *answer, bool open)
{
	struct split x;
	size_t len = strlen(text), bad = 0, cuts[2];
	bool in = run(text, NULL, 0, &x);

	tap_ok(same(&x, in, reasoning, answer, open),
	       "%s: reasoning \"%s\" answer \"%s\"%s", name, x.reasoning,
	       x.answer, in ? " (unfinished)" : "");
	for (size_t c = 0; c <= len; c++) {
		cuts[0] = c;
		bad +=
		    !same(&x, run(text, cuts, 1, &x), reasoning, answer, open);
		if (c + 1 <= len) {
			cuts[1] = c + 1;
			bad += !same(&x, run(text, cuts, 2, &x), reasoning,
			             answer, open);
		}
	}
	size_t *all = malloc((len ? len : 1) * sizeof(*all));

	for (size_t c = 0; c < len; c++)
		all[c] = c;
	bad += !same(&x, run(text, all, len, &x), reasoning, answer, open);
	free(all);
	tap_ok(bad == 0, "%s: the same at every cut (%zu differ)", name, bad);
}

/* A template that opens the analysis channel in its generation prompt:
   the prompt's end is seen, and the reply's first bytes are reasoning. */
static void test_opened(void)
{
	static const char *const p_open =
	    "<|start|>user<|message|>Hi<|end|><|start|>assistant"
	    "<|channel|>analysis<|message|>\n";
	static const char *const p_plain =
	    "<|start|>user<|message|>Hi<|end|><|start|>assistant";

	tap_ok(session_think_opened(SESSION_THINK_HARMONY, p_open,
	                            strlen(p_open)) &&
	           !session_think_opened(SESSION_THINK_HARMONY, p_plain,
	                                 strlen(p_plain)),
	       "opened: a prompt ending in the analysis channel's header is "
	       "seen, one ending in <|start|>assistant is not");
	run_opened = true;
	check("opened: reasoning, then the final message",
	      "The user greets.<|end|><|start|>assistant<|channel|>final"
	      "<|message|>Hello!<|return|>",
	      "The user greets.", "Hello!", false);
	check("opened: cut inside the reasoning", "Let me think about",
	      "Let me think about", "", true);
	run_opened = false;
	check("not opened: text without a header is the answer",
	      "Let me think about", "", "Let me think about", false);
}

static void test_splits(void)
{
	char longh[400], want[400];

	check("analysis then final",
	      "<|channel|>analysis<|message|>The user greets. Reply."
	      "<|end|><|start|>assistant<|channel|>final<|message|>Hello! "
	      "<b>x</b> a<|b",
	      "The user greets. Reply.", "Hello! <b>x</b> a<|b", false);
	check("text after <|return|> is kept",
	      "<|channel|>final<|message|>Four.<|return|> tail", "",
	      "Four.\n\ntail", false);
	check("a noted body without text",
	      "<|channel|>commentary<|message|><|end|>", "[commentary] ", "",
	      false);
	check("tool call (commentary) noted in the reasoning",
	      "<|channel|>analysis<|message|>Need the weather.<|end|>"
	      "<|start|>assistant<|channel|>commentary to=functions.get_"
	      "weather <|constrain|>json<|message|>{\"city\":\"Paris\"}"
	      "<|call|>",
	      "Need the weather.\n\n[commentary to=functions.get_weather "
	      "json] {\"city\":\"Paris\"}",
	      "", false);
	check("two analysis messages joined",
	      "<|channel|>analysis<|message|>one<|end|><|start|>assistant"
	      "<|channel|>analysis<|message|>two<|end|>",
	      "one\n\ntwo", "", false);
	check("unfinished analysis (limit hit)",
	      "<|channel|>analysis<|message|>step one, step two <|en",
	      "step one, step two <|en", "", true);
	check("missing <|message|>",
	      "<|channel|>analysis The user asks.<|end|><|start|>assistant"
	      "<|channel|>final<|message|>Hi",
	      "The user asks.", "Hi", false);
	check("header cut by the end", "<|channel|>final Hi there", "",
	      "Hi there", false);
	check("unknown channel",
	      "<|channel|>scratch<|message|>x<|end|><|channel|>final"
	      "<|message|>y",
	      "[scratch] x", "y", false);
	check("text before the first channel",
	      "Hello <|channel|>final<|message|>there", "", "Hello \n\nthere",
	      false);
	check("no harmony at all", "Plain answer <|im_end|> <| x", "",
	      "Plain answer <|im_end|> <| x", false);
	check("a body without a channel",
	      "<|start|>assistant<|message|>direct<|end|>\n", "", "direct",
	      false);
	check("stray markers dropped",
	      "<|message|><|constrain|>a<|end|>  b<|start|><|end|>", "",
	      "a\n\nb", false);
	check("UTF-8 kept whole",
	      "<|channel|>analysis<|message|>caf\xc3\xa9<|end|><|channel|>"
	      "final<|message|>\xe2\x9c\x93",
	      "caf\xc3\xa9", "\xe2\x9c\x93", false);
	check("empty", "", "", "", false);

	/* a header that never ends is cut at HARMONY_HEADER_MAX + 1 */
	memcpy(longh, "<|channel|>", 11);
	memset(longh + 11, 'x', 300);
	longh[311] = '\0';
	want[0] = '[';
	memset(want + 1, 'x', HARMONY_HEADER_MAX + 1);
	memcpy(want + HARMONY_HEADER_MAX + 2, "] ", 2);
	memset(want + HARMONY_HEADER_MAX + 4, 'x',
	       300 - HARMONY_HEADER_MAX - 1);
	want[300 + 3] = '\0';
	check("overlong header", longh, want, "", true);
}

/* Session callbacks: what the front end was shown. */
static void cb_piece(void *ud, const char *p, size_t len)
{
	out(ud, false, p, len);
}

static void cb_reasoning(void *ud, const char *p, size_t len)
{
	out(ud, true, p, len);
}

/* Encode TEXT with gpt-oss's vocabulary, decode the ids one at a time
   as session_decode does (stopping at an end-of-turn id) and split the
   pieces through session_reply_text; check the reply. */
static void check_tokens(struct tok *t, const char *name, const char *text,
                         const char *reasoning, const char *answer, bool open,
                         const char *last)
{
	struct tok_ids ids = {0};
	struct tok_buf piece = {0};
	struct tok_stream ts;
	struct session_reply r = {0};
	struct split shown = {0};
	struct session_cb cb = {0};
	char err[256];
	size_t i, n_eog = 0;
	bool ok;

	cb.ud = &shown;
	cb.piece = cb_piece;
	cb.reasoning = cb_reasoning;
	tok_encode(t, text, strlen(text), TOK_PARSE_SPECIAL, &ids, err,
	           sizeof(err));
	session_think_init(&r.think, SESSION_THINK_HARMONY, false);
	tok_stream_init(&ts, t, TOK_DECODE_SPECIAL);
	for (i = 0; i < ids.n; i++) {
		if (tok_is_eog(t, ids.v[i])) {
			session_think_eog(&r.think);
			n_eog++;
			break;
		}
		piece.n = 0;
		tok_stream_push(&ts, ids.v[i], &piece);
		if (session_think_inside(&r.think))
			r.n_reasoning++;
		session_reply_text(&r, piece.p, piece.n, false, &cb);
	}
	piece.n = 0;
	tok_stream_flush(&ts, &piece);
	session_reply_text(&r, piece.p, piece.n, true, &cb);
	ok = r.reasoning.n == strlen(reasoning) && r.text.n == strlen(answer) &&
	     (r.reasoning.n == 0 ||
	      memcmp(r.reasoning.p, reasoning, r.reasoning.n) == 0) &&
	     (r.text.n == 0 || memcmp(r.text.p, answer, r.text.n) == 0) &&
	     strcmp(shown.reasoning, reasoning) == 0 &&
	     strcmp(shown.answer, answer) == 0 &&
	     session_reply_open(&r) == open;
	tap_ok(ok && ids.n > 5 && (last ? i + 1 == ids.n : n_eog == 0),
	       "o200k %s: %zu ids, reasoning \"%.*s\" answer \"%.*s\"%s%s%s",
	       name, ids.n, (int)r.reasoning.n,
	       r.reasoning.p ? r.reasoning.p : "", (int)r.text.n,
	       r.text.p ? r.text.p : "", open ? " (unfinished)" : "",
	       last ? ", ends at " : "", last ? last : "");
	free(ids.v);
	free(piece.p);
	free(r.text.p);
	free(r.reasoning.p);
	session_think_free(&r.think);
}

/* The end-of-turn set of gpt-oss's vocabulary. */
static void check_eog(struct tok *t)
{
	static const char *const eog[] = {"<|return|>", "<|call|>",
	                                  "<|endoftext|>"};
	static const char *const not_eog[] = {"<|end|>", "<|start|>",
	                                      "<|channel|>", "<|message|>"};
	bool ok = true;

	for (size_t k = 0; k < 3; k++)
		ok &= tok_is_eog(t, tok_find(t, eog[k], strlen(eog[k])));
	for (size_t k = 0; k < 4; k++)
		ok &=
		    !tok_is_eog(t, tok_find(t, not_eog[k], strlen(not_eog[k])));
	tap_ok(ok, "o200k: <|return|>, <|call|> end the reply; <|end|> ends "
	           "a message only");
}

static void test_o200k(void)
{
	char dir[] = "/tmp/t_harmony.XXXXXX", path[256], err[1200];
	struct gguf_file *f = NULL;
	struct tok *t = NULL;

	if (!tap_ok(mkdtemp(dir) != NULL, "o200k: temporary directory"))
		return;
	snprintf(path, sizeof(path), "%s/o200k.gguf", dir);
	if (tap_ok(o200k_make(path, err, sizeof(err)) == 0,
	           "o200k: vocabulary GGUF written (%s)", err) &&
	    (f = gguf_open(path, err, sizeof(err))) != NULL)
		t = tok_load(f, err, sizeof(err));
	if (tap_ok(t != NULL, "o200k: tok_load: %s", t ? "ok" : err)) {
		tap_ok(harmony_vocab(t) &&
		           session_think_fmt_of(t) == SESSION_THINK_HARMONY,
		       "o200k: harmony tokens found, the reply format is "
		       "harmony");
		check_eog(t);
		check_tokens(
		    t, "analysis, final, <|return|>",
		    "<|channel|>analysis<|message|>User says hi; "
		    "answer briefly.<|end|><|start|>assistant<|channel|>"
		    "final<|message|>Hello, world! \xc3\xa9t\xc3\xa9"
		    "<|return|>",
		    "User says hi; answer briefly.",
		    "Hello, world! \xc3\xa9t\xc3\xa9", false, "<|return|>");
		check_tokens(
		    t, "tool call ends at <|call|>",
		    "<|channel|>commentary to=functions.f <|constrain|>"
		    "json<|message|>{\"a\":1}<|call|>",
		    "[commentary to=functions.f json] {\"a\":1}", "", false,
		    "<|call|>");
		check_tokens(t, "cut inside the analysis",
		             "<|channel|>analysis<|message|>Let me think",
		             "Let me think", "", true, NULL);
	}
	tok_free(t);
	gguf_close(f);
	unlink(path);
	rmdir(dir);
}

static void test_effort(void)
{
	tap_ok(session_reasoning_parse("low") == 1 &&
	           session_reasoning_parse("medium") == 2 &&
	           session_reasoning_parse("high") == 3 &&
	           session_reasoning_parse("max") == -1 &&
	           session_reasoning_parse("") == -1,
	       "reasoning levels parse");
	tap_ok(strcmp(session_reasoning_name(3), "high") == 0 &&
	           strcmp(session_reasoning_name(0), "unset") == 0 &&
	           strcmp(session_reasoning_name(9), "unset") == 0,
	       "reasoning levels name");
}

/* The last prompt's text (session_last_prompt decoded) into BUF. */
static void last_prompt_text(struct session *s, char *buf, size_t len)
{
	size_t n, reused, at = 0, pl;
	const int32_t *ids = session_last_prompt(s, &n, &reused);

	for (size_t i = 0; i < n; i++) {
		const char *p = session_token_text(s, ids[i], &pl, NULL);

		if (p && at + pl + 1 < len) {
			memcpy(buf + at, p, pl);
			at += pl;
		}
	}
	buf[at] = '\0';
}

/* Open SmolLM2 (greedy, short replies) with template TPL under
   tests/data/think/. NULL when it cannot. */
static struct session *open_smollm(const char *tpl, int reasoning)
{
	struct session_opts o = {0};
	struct session *s = NULL;
	static char model[1024], path[1024];
	char err[512];

	tu_model(model, sizeof(model));
	if (access(model, R_OK) != 0)
		return NULL;
	snprintf(err, sizeof(err), "tests/data/think/%s", tpl);
	o.model_path = model;
	o.template_name = tu_src(err, path, sizeof(path));
	sampler_config_default(&o.sampling);
	o.sampling.temperature = 0;
	o.n_ctx = 1024;
	o.n_threads = 1;
	o.n_predict = 6;
	o.backend = getenv("PARLEY_TEST_BACKEND");
	o.reasoning = reasoning;
	if (session_open(&o, &s, err, sizeof(err)))
		tap_diag("session_open: %s", err);
	return s;
}

/* reasoning_effort and the thinking field reach a template that reads
   them (tests/data/think/effort.jinja, gpt-oss's habits on SmolLM2);
   /reasoning says when a template does not. */
static void test_session(void)
{
	struct session *s = open_smollm("effort.jinja", 3);
	struct session_stats st;
	const struct session_msg *m;
	char err[512], want[1024], *prompt = malloc(65536);
	const char *line;
	size_t n;
	int rc;

	if (s == NULL) {
		tap_diag("no SmolLM2 model: the session checks are skipped");
		free(prompt);
		return;
	}
	tap_ok(s->think_fmt == SESSION_THINK_TAGS && s->tmpl_effort &&
	           s->tmpl_thinking,
	       "a ChatML vocabulary splits <think> tags; the template reads "
	       "reasoning_effort and thinking");
	rc = session_send(s, "What is 2+2?", 12, NULL, &st, err, sizeof(err));
	last_prompt_text(s, prompt, 65536);
	m = session_messages(s, &n);
	tap_ok(rc == 0 && strstr(prompt, "Reasoning: high<|im_end|>") &&
	           n == 2 && m[1].reasoning != NULL,
	       "--reasoning high: the prompt says \"Reasoning: high\"; the "
	       "reply is reasoning (\"%s\")",
	       n == 2 && m[1].reasoning ? m[1].reasoning : "");
	line = session_reasoning_cmd(s, "");
	tap_ok(strcmp(line, "high: reasoning_effort \"high\", from the next "
	                    "turn") == 0,
	       "/reasoning alone: %s", line);
	line = session_reasoning_cmd(s, "low");
	tap_ok(line && session_reasoning(s) == 1, "/reasoning low: %s", line);
	tap_ok(session_reasoning_cmd(s, "max") == NULL &&
	           session_reasoning(s) == 1,
	       "/reasoning max is refused, nothing changes");
	rc = session_send(s, "And 3+3?", 8, NULL, &st, err, sizeof(err));
	last_prompt_text(s, prompt, 65536);
	m = session_messages(s, &n);
	snprintf(want, sizeof(want), "<think>\n%s\n</think>\n\n",
	         n >= 2 && m[1].reasoning ? m[1].reasoning : "?");
	tap_ok(rc == 0 && strstr(prompt, "Reasoning: low<|im_end|>") &&
	           strstr(prompt, want),
	       "the next prompt: \"Reasoning: low\" and the reasoning read "
	       "from the thinking field");
	session_close(s);
	s = open_smollm("think.jinja", 0);
	line = s ? session_reasoning_cmd(s, "high") : NULL;
	tap_ok(line && strstr(line, "template does not read it") &&
	           !s->tmpl_thinking,
	       "a template without reasoning_effort: %s", line ? line : "");
	session_close(s);
	free(prompt);
}

int main(void)
{
	test_splits();
	test_opened();
	test_o200k();
	test_effort();
	test_session();
	return tap_done();
}

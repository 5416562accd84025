/*
 * t_think.c - a thinking model's reply split into reasoning and answer
 * (src/session_think.c): every cut of the text into pieces (byte by
 * byte, at every single position, and a tag split in three) gives the
 * same reasoning and answer as the whole text at once; the prompt that
 * already opened <think>; an unclosed block is unfinished reasoning with
 * nothing lost; a reply without a block passes through untouched.
 *
 * Then llama.cpp's Qwen3 and Qwen3.5 templates (tests/data/template/
 * llamacpp/templates, found through top_srcdir), rendered as
 * session_render does (reasoning_content, enable_thinking unset, true,
 * false): Qwen3.5's generation prompt opens the block itself unless
 * thinking is off, Qwen3's leaves it to the model, and either way the
 * reply splits into the same reasoning and answer.
 */
#include "json.h"
#include "promptdir.h"
#include "session_int.h"
#include "tap.h"
#include "template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the splitter released. */
struct split {
	char reasoning[1024], answer[1024];
	size_t nr, na;
	int n_calls;
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
	x->n_calls++;
	return 0;
}

/* Split TEXT cut at the offsets CUTS[0, ncut) (ascending); OPEN: the
   prompt opened the block. Returns whether the block is left open. */
static bool run(const char *text, const size_t *cuts, size_t ncut, bool open,
                struct split *x)
{
	struct session_think t;
	size_t at = 0, len = strlen(text);
	bool left_open;

	memset(x, 0, sizeof(*x));
	session_think_init(&t, open);
	for (size_t i = 0; i <= ncut; i++) {
		size_t to = i < ncut ? cuts[i] : len;

		if (session_think_feed(&t, text + at, to - at, out, x))
			tap_diag("feed failed");
		at = to;
	}
	session_think_flush(&t, out, x);
	left_open = t.state == SESSION_THINK_IN;
	session_think_free(&t);
	return left_open;
}

/* TEXT gives REASONING and ANSWER (and OPEN_END) at every cut. */
static void check(const char *name, const char *text, bool open,
                  const char *reasoning, const char *answer, bool open_end)
{
	struct split x;
	size_t len = strlen(text), bad = 0, cuts[3];
	bool o;

	o = run(text, NULL, 0, open, &x);
	tap_ok(strcmp(x.reasoning, reasoning) == 0 &&
	           strcmp(x.answer, answer) == 0 && o == open_end,
	       "%s: reasoning \"%s\" answer \"%s\"%s", name, x.reasoning,
	       x.answer, o ? " (unfinished)" : "");
	/* every cut into two pieces, then into three around each byte */
	for (size_t c = 0; c <= len; c++) {
		cuts[0] = c;
		o = run(text, cuts, 1, open, &x);
		bad += strcmp(x.reasoning, reasoning) != 0 ||
		       strcmp(x.answer, answer) != 0 || o != open_end;
		if (c + 1 <= len) {
			cuts[1] = c + 1;
			o = run(text, cuts, 2, open, &x);
			bad += strcmp(x.reasoning, reasoning) != 0 ||
			       strcmp(x.answer, answer) != 0 || o != open_end;
		}
	}
	/* byte by byte */
	size_t *all = malloc(len * sizeof(*all));

	for (size_t c = 0; c < len; c++)
		all[c] = c;
	o = run(text, all, len, open, &x);
	bad += strcmp(x.reasoning, reasoning) != 0 ||
	       strcmp(x.answer, answer) != 0 || o != open_end;
	free(all);
	tap_ok(bad == 0, "%s: the same at every cut (%zu differ)", name, bad);
}

/* The conversation session_render gives a template: an earlier reply's
   reasoning as reasoning_content, the last message the user's. */
static const char think_msgs[] =
    "[{\"role\":\"system\",\"content\":\"Be brief.\"},"
    "{\"role\":\"user\",\"content\":\"2+2?\"},"
    "{\"role\":\"assistant\",\"content\":\"4\","
    "\"reasoning_content\":\"Two and two.\"},"
    "{\"role\":\"user\",\"content\":\"3+3?\"}]";

/* Render llama.cpp's template NAME with enable_thinking THINK (1 on, -1
   off, 0 unset) and the generation prompt; NULL (and a failed check) when
   it does not render. Malloc'd. */
static char *render_lc(const char *name, int think)
{
	const char *top = getenv("top_srcdir");
	char path[4096], err[512], *src, *out = NULL;
	size_t len, outlen;
	struct tmpl *t = NULL;
	struct json_value *msgs = NULL, *b = json_new_bool(think > 0);
	struct tmpl_var var = {"enable_thinking", b, false};
	struct tmpl_ctx ctx = {0};
	int rc = -1;

	snprintf(path, sizeof(path),
	         "%s/tests/data/template/llamacpp/templates/%s",
	         top ? top : ".", name);
	src = promptdir_read_file(path, &len, err, sizeof(err));
	if (src && tmpl_compile(src, len, &t, err, sizeof(err)) == TMPL_OK &&
	    json_parse(think_msgs, sizeof(think_msgs) - 1, &msgs, err,
	               sizeof(err)) == 0) {
		ctx.messages = msgs;
		ctx.add_generation_prompt = true;
		ctx.vars = &var;
		ctx.nvars = think != 0;
		rc = tmpl_render(t, &ctx, &out, &outlen, NULL, NULL, err,
		                 sizeof(err));
	}
	if (rc != TMPL_OK)
		tap_ok(0, "%s renders: %s", path, err);
	tmpl_free(t);
	json_free(msgs);
	json_free(b);
	free(src);
	return rc == TMPL_OK ? out : NULL;
}

/* Template NAME with enable_thinking THINK: the prompt opens the block as
   OPENS says, the earlier reasoning is not in it, and the model's REPLY
   (the block from where the prompt left it) splits into the reasoning and
   answer. */
static void check_template(const char *name, int think, bool opens,
                           const char *reply, const char *reasoning,
                           const char *answer)
{
	static const char *const tn[] = {"off", "unset", "on"};
	char *p = render_lc(name, think);
	struct split x;
	bool open;

	if (p == NULL)
		return;
	open = session_think_opened(p, strlen(p));
	tap_ok(open == opens && strstr(p, "Two and two.") == NULL,
	       "%s, thinking %s: the prompt %s the block, no earlier "
	       "reasoning",
	       name, tn[think + 1], open ? "opens" : "does not open");
	open = run(reply, NULL, 0, open, &x);
	tap_ok(strcmp(x.reasoning, reasoning) == 0 &&
	           strcmp(x.answer, answer) == 0 && !open,
	       "%s, thinking %s: reasoning \"%s\" answer \"%s\"", name,
	       tn[think + 1], x.reasoning, x.answer);
	free(p);
}

int main(void)
{
	check("closed block", "<think>\nLet me add: 2+2=4.\n</think>\n\nFour.",
	      false, "Let me add: 2+2=4.", "Four.", false);
	check("blanks before the tag", "\n <think>a < b</think>yes", false,
	      "a < b", "yes", false);
	check("look-alike tags inside",
	      "<think>x </thin y <think> z</think>ok </think>", false,
	      "x </thin y <think> z", "ok </think>", false);
	check("prompt opened the block", "hmm, 3.\n</think>\n\nThree.", true,
	      "hmm, 3.", "Three.", false);
	check("no block", "Plain answer <think>not reasoning</think>", false,
	      "", "Plain answer <think>not reasoning</think>", false);
	check("blanks only", " \n ", false, "", " \n ", false);
	check("a tag's beginning only", "<thi", false, "", "<thi", false);
	check("unclosed block (limit hit)", "<think>\nstep one, step two </",
	      false, "step one, step two </", "", true);
	check("prompt opened, never closed", "\nstill thinking", true,
	      "still thinking", "", true);
	check("empty block", "<think>\n\n</think>\n\nHi.", false, "", "Hi.",
	      false);
	check("UTF-8 kept whole",
	      "<think>caf\xc3\xa9 \xe2\x9c\x93</think>\xc3\xa9", false,
	      "caf\xc3\xa9 \xe2\x9c\x93", "\xc3\xa9", false);

	tap_ok(session_think_opened("<|im_start|>assistant\n<think>\n", 30),
	       "a prompt ending in <think> opens the block");
	tap_ok(!session_think_opened("assistant\n<think>\n\n</think>\n\n", 27),
	       "a prompt that closed the block (thinking off) does not");
	tap_ok(!session_think_opened("<|im_start|>assistant\n", 22),
	       "a plain generation prompt does not");

	/* Qwen3.5 opens the block in the prompt, Qwen3 lets the model */
	for (int th = -1; th <= 1; th++) {
		check_template("Qwen3.5-4B.jinja", th, th >= 0,
		               th >= 0 ? "Three and three.\n</think>\n\n6"
		                       : "6",
		               th >= 0 ? "Three and three." : "", "6");
		check_template("Qwen-Qwen3-0.6B.jinja", th, false,
		               th >= 0 ? "<think>\nThree and three.\n</think>"
		                         "\n\n6"
		                       : "6",
		               th >= 0 ? "Three and three." : "", "6");
	}
	return tap_done();
}

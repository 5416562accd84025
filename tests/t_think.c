/*
 * t_think.c - a thinking model's reply split into reasoning and answer
 * (src/session_think.c): every cut of the text into pieces (byte by
 * byte, at every single position, and a tag split in three) gives the
 * same reasoning and answer as the whole text at once; the prompt that
 * already opened <think>; an unclosed block is unfinished reasoning with
 * nothing lost; a reply without a block passes through untouched.
 */
#include "session_int.h"
#include "tap.h"

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
	return tap_done();
}

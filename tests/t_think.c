/*
 * t_think.c - a thinking model's reply split into reasoning and answer
 * (src/session_think.c), in both tag formats: <think>...</think> and Gemma
 * 4's <|channel>thought...<channel|>. Every cut of the text into pieces
 * (byte by byte, at every single position, and a tag split in three) gives
 * the same reasoning and answer as the whole text at once; the prompt that
 * already opened the block; an unclosed block is unfinished reasoning with
 * nothing lost; a reply without a block passes through untouched; Gemma
 * 4's later blocks (an empty one closing the answer) are reasoning too and
 * a stray close tag is dropped.
 *
 * Then llama.cpp's Qwen3, Qwen3.5 and Gemma 4 templates (tests/data/
 * template/llamacpp/templates, found through top_srcdir), rendered as
 * session_render does (reasoning_content, enable_thinking unset, true,
 * false): Qwen3.5's generation prompt opens the block itself unless
 * thinking is off, Qwen3's and Gemma 4's leave it to the model (Gemma 4's
 * writes an empty closed block unless thinking is on), and either way the
 * reply splits into the same reasoning and answer.
 *
 * Last, a small vocabulary with Gemma 4's control tokens, written as a
 * GGUF in memory: its format is told by its tokens, <turn|> ends the turn,
 * and a reply's ids decoded as the session decodes them split the same.
 */
#include "gguf.h"
#include "gguf_bytes.h"
#include "json.h"
#include "promptdir.h"
#include "sbuf.h"
#include "session_int.h"
#include "tap.h"
#include "template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAGS    SESSION_THINK_TAGS
#define CHANNEL SESSION_THINK_CHANNEL

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

/* Split TEXT of format FMT cut at the offsets CUTS[0, ncut) (ascending);
   OPEN: the prompt opened the block. Returns whether the block is left
   open. */
static bool run(enum session_think_fmt fmt, const char *text,
                const size_t *cuts, size_t ncut, bool open, struct split *x)
{
	struct session_think t;
	size_t at = 0, len = strlen(text);
	bool left_open;

	memset(x, 0, sizeof(*x));
	session_think_init(&t, fmt, open);
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

/* TEXT of format FMT gives REASONING and ANSWER (and OPEN_END) at every
   cut. */
static void check_fmt(enum session_think_fmt fmt, const char *name,
                      const char *text, bool open, const char *reasoning,
                      const char *answer, bool open_end)
{
	struct split x;
	size_t len = strlen(text), bad = 0, cuts[3];
	bool o;

	o = run(fmt, text, NULL, 0, open, &x);
	tap_ok(strcmp(x.reasoning, reasoning) == 0 &&
	           strcmp(x.answer, answer) == 0 && o == open_end,
	       "%s: reasoning \"%s\" answer \"%s\"%s", name, x.reasoning,
	       x.answer, o ? " (unfinished)" : "");
	/* every cut into two pieces, then into three around each byte */
	for (size_t c = 0; c <= len; c++) {
		cuts[0] = c;
		o = run(fmt, text, cuts, 1, open, &x);
		bad += strcmp(x.reasoning, reasoning) != 0 ||
		       strcmp(x.answer, answer) != 0 || o != open_end;
		if (c + 1 <= len) {
			cuts[1] = c + 1;
			o = run(fmt, text, cuts, 2, open, &x);
			bad += strcmp(x.reasoning, reasoning) != 0 ||
			       strcmp(x.answer, answer) != 0 || o != open_end;
		}
	}
	/* byte by byte */
	size_t *all = malloc(len * sizeof(*all));

	for (size_t c = 0; c < len; c++)
		all[c] = c;
	o = run(fmt, text, all, len, open, &x);
	bad += strcmp(x.reasoning, reasoning) != 0 ||
	       strcmp(x.answer, answer) != 0 || o != open_end;
	free(all);
	tap_ok(bad == 0, "%s: the same at every cut (%zu differ)", name, bad);
}

/* check_fmt for <think> tags. */
static void check(const char *name, const char *text, bool open,
                  const char *reasoning, const char *answer, bool open_end)
{
	check_fmt(TAGS, name, text, open, reasoning, answer, open_end);
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

/* Template NAME with enable_thinking THINK, its model writing format FMT:
   the prompt opens the block as OPENS says and ends in TAIL (unless NULL),
   the earlier reasoning is not in it, and the model's REPLY (the block
   from where the prompt left it) splits into the reasoning and answer. */
static void check_template(const char *name, enum session_think_fmt fmt,
                           int think, bool opens, const char *tail,
                           const char *reply, const char *reasoning,
                           const char *answer)
{
	static const char *const tn[] = {"off", "unset", "on"};
	char *p = render_lc(name, think);
	size_t n, tl = tail ? strlen(tail) : 0;
	struct split x;
	bool open;

	if (p == NULL)
		return;
	n = strlen(p);
	open = session_think_opened(fmt, p, n);
	tap_ok(open == opens && strstr(p, "Two and two.") == NULL &&
	           (tail == NULL || (n >= tl && !strcmp(p + n - tl, tail))),
	       "%s, thinking %s: the prompt %s the block%s, no earlier "
	       "reasoning",
	       name, tn[think + 1], open ? "opens" : "does not open",
	       tail ? " (its tail as expected)" : "");
	open = run(fmt, reply, NULL, 0, open, &x);
	tap_ok(strcmp(x.reasoning, reasoning) == 0 &&
	           strcmp(x.answer, answer) == 0 && !open,
	       "%s, thinking %s: reasoning \"%s\" answer \"%s\"", name,
	       tn[think + 1], x.reasoning, x.answer);
	free(p);
}

/* Gemma 4's tag format, every split. */
static void test_channel(void)
{
	check_fmt(CHANNEL, "gemma4: closed block",
	          "<|channel>thought\nLet me add: 2+2=4.\n<channel|>Four.",
	          false, "Let me add: 2+2=4.", "Four.", false);
	check_fmt(CHANNEL, "gemma4: blanks around",
	          "\n <|channel>thought\n a < b \n<channel|>\n\nyes", false,
	          "a < b", "yes", false);
	check_fmt(CHANNEL, "gemma4: look-alike tags inside",
	          "<|channel>thought x <channel y <|channel>though "
	          "<|channel>thought z<channel|>ok <|channel y",
	          false, "x <channel y <|channel>though <|channel>thought z",
	          "ok <|channel y", false);
	check_fmt(CHANNEL, "gemma4: empty block closing the answer",
	          "<|channel>thought\nsum<channel|>4\n<|channel>thought\n"
	          "<channel|>",
	          false, "sum", "4", false);
	check_fmt(CHANNEL, "gemma4: a later block is reasoning too",
	          "<|channel>thought\none<channel|>A\n\n<|channel>thought\n"
	          "two\n<channel|>\n\nB",
	          false, "one\n\ntwo", "A\n\nB", false);
	check_fmt(CHANNEL, "gemma4: blanks before a later block join",
	          "A <|channel>thought\nx\n<channel|>B", false, "x", "A B",
	          false);
	check_fmt(CHANNEL, "gemma4: blanks after a later block join",
	          "A<|channel>thought\nx\n<channel|> B", false, "x", "A B",
	          false);
	check_fmt(CHANNEL, "gemma4: stray close tags dropped",
	          "<channel|>Four.<channel|>", false, "", "Four.", false);
	check_fmt(CHANNEL, "gemma4: no reasoning at all", "Plain answer.\n",
	          false, "", "Plain answer.\n", false);
	check_fmt(CHANNEL, "gemma4: <think> is only text", "<think>x</think> y",
	          false, "", "<think>x</think> y", false);
	check_fmt(CHANNEL, "gemma4: blanks only", " \n ", false, "", " \n ",
	          false);
	check_fmt(CHANNEL, "gemma4: a tag's beginning only", "<|chan", false,
	          "", "<|chan", false);
	check_fmt(CHANNEL, "gemma4: the answer ends in a tag's beginning",
	          "<|channel>thought\nx<channel|>Four. <|chan", false, "x",
	          "Four. <|chan", false);
	check_fmt(CHANNEL, "gemma4: unclosed block (limit hit)",
	          "<|channel>thought\nstep one, step two <chan", false,
	          "step one, step two <chan", "", true);
	check_fmt(CHANNEL, "gemma4: a later block unclosed",
	          "4 <|channel>thought\nmore", false, "more", "4", true);
	check_fmt(CHANNEL, "gemma4: prompt opened the block",
	          "hmm, 3.\n<channel|>\n6", true, "hmm, 3.", "6", false);
	check_fmt(CHANNEL, "gemma4: prompt opened, never closed",
	          "\nstill thinking", true, "still thinking", "", true);
	check_fmt(CHANNEL, "gemma4: empty block",
	          "<|channel>thought\n<channel|>Hi.", false, "", "Hi.", false);
	check_fmt(CHANNEL, "gemma4: UTF-8 kept whole",
	          "<|channel>thought\ncaf\xc3\xa9 \xe2\x9c\x93<channel|>"
	          "\xc3\xa9",
	          false, "caf\xc3\xa9 \xe2\x9c\x93", "\xc3\xa9", false);

	tap_ok(session_think_opened(CHANNEL,
	                            "<|turn>model\n<|channel>thought\n", 31),
	       "gemma4: a prompt ending in <|channel>thought opens the block");
	tap_ok(!session_think_opened(CHANNEL,
	                             "<|turn>model\n<|channel>thought\n"
	                             "<channel|>",
	                             41),
	       "gemma4: one that closed it (thinking off) does not");
	tap_ok(!session_think_opened(CHANNEL, "<think>\n", 8) &&
	           !session_think_opened(TAGS, "<|channel>thought\n", 18),
	       "each format opens with its own tag only");
}

/* Put KEY of GGUF type TYPE (its value follows) into SB. */
static void put_key(struct sbuf *sb, const char *key, uint32_t type)
{
	gb_str(sb, key);
	gb_u32(sb, type);
}

/* A byte-level BPE vocabulary (GPT-2's 256 byte symbols, no merges) with
   the control tokens EXTRA[0, n_extra), loaded from a GGUF in memory. */
static struct tok *vocab(const char *const *extra, size_t n_extra)
{
	struct sbuf sb = SBUF_INIT;
	struct gguf_file *f;
	struct tok *t = NULL;
	char sym[256][3], err[512] = "";
	size_t n = 256 + n_extra, i;
	unsigned b, cp;

	gb_header(&sb, 3, 0, 5);
	gb_kv_str(&sb, "tokenizer.ggml.model", "gpt2");
	gb_kv_str(&sb, "tokenizer.ggml.pre", "gpt-2");
	put_key(&sb, "tokenizer.ggml.tokens", GGUF_TYPE_ARRAY);
	gb_u32(&sb, GGUF_TYPE_STRING);
	gb_u64(&sb, n);
	/* GPT-2's bytes_to_unicode(): printable bytes stand for themselves,
	   the others for 256, 257, ... in order */
	for (b = 0, cp = 256; b < 256; b++) {
		unsigned c = (b >= 0x21 && b <= 0x7e) ||
		                     (b >= 0xa1 && b <= 0xac) || b >= 0xae
		                 ? b
		                 : cp++;

		memset(sym[b], 0, sizeof(sym[b]));
		if (c < 0x80) {
			sym[b][0] = (char)c;
		} else {
			sym[b][0] = (char)(0xc0 | c >> 6);
			sym[b][1] = (char)(0x80 | (c & 0x3f));
		}
		gb_str(&sb, sym[b]);
	}
	for (i = 0; i < n_extra; i++)
		gb_str(&sb, extra[i]);
	put_key(&sb, "tokenizer.ggml.token_type", GGUF_TYPE_ARRAY);
	gb_u32(&sb, GGUF_TYPE_INT32);
	gb_u64(&sb, n);
	for (i = 0; i < n; i++)
		gb_u32(&sb, i < 256 ? TOK_TYPE_NORMAL : TOK_TYPE_CONTROL);
	put_key(&sb, "tokenizer.ggml.merges", GGUF_TYPE_ARRAY);
	gb_u32(&sb, GGUF_TYPE_STRING);
	gb_u64(&sb, 0);
	f = gguf_open_memory(sb.buf, sb.len, "v.gguf", err, sizeof(err));
	if (f) {
		t = tok_load(f, err, sizeof(err));
		gguf_close(f);
	}
	sbuf_free(&sb);
	if (t == NULL)
		tap_diag("vocabulary: %s", err);
	return t;
}

/* Gemma 4's control tokens in a vocabulary: the format, the end of turn,
   and a reply's ids decoded as the session does (control tokens as text,
   up to the end-of-turn id) split into reasoning and answer. */
static void test_channel_vocab(void)
{
	static const char *const gemma4[] = {
	    "<bos>",      "<eos>",      "<|turn>",  "<turn|>",
	    "<|channel>", "<channel|>", "<|think|>"};
	static const char *const qwen[] = {"<|im_start|>", "<|im_end|>",
	                                   "<think>", "</think>"};
	static const char reply[] = "<|channel>thought\nThree and three."
	                            "\n<channel|>6<turn|>left over";
	struct tok *t = vocab(gemma4, 7), *q = vocab(qwen, 4);
	struct tok_ids ids = {0};
	struct tok_buf piece = {0}, plain = {0};
	struct tok_stream ts;
	struct session_think th;
	struct split x;
	char err[256];
	bool ended = false;

	if (!tap_ok(t && q, "vocabularies with Gemma 4's and Qwen3's tokens "
	                    "load"))
		goto done;
	tap_ok(session_think_fmt_of(t) == CHANNEL &&
	           session_think_fmt_of(q) == TAGS,
	       "the format is told by the vocabulary's tokens: <|channel> "
	       "and <channel|> give Gemma 4's, <think> alone the tags");
	tap_ok(tok_is_eog(t, tok_find(t, "<turn|>", 7)) &&
	           tok_is_eog(t, tok_find(t, "<eos>", 5)) &&
	           !tok_is_eog(t, tok_find(t, "<|turn>", 7)) &&
	           !tok_is_eog(t, tok_find(t, "<channel|>", 10)),
	       "gemma4: <turn|> and <eos> end the turn, <|turn> and "
	       "<channel|> do not");
	if (tok_encode(t, reply, sizeof(reply) - 1, TOK_PARSE_SPECIAL, &ids,
	               err, sizeof(err))) {
		tap_ok(0, "gemma4: the reply encodes: %s", err);
		goto done;
	}
	memset(&x, 0, sizeof(x));
	session_think_init(&th, session_think_fmt_of(t), false);
	tok_stream_init(&ts, t, TOK_DECODE_SPECIAL);
	for (size_t i = 0; i < ids.n && !ended; i++) {
		if (tok_is_eog(t, ids.v[i])) {
			session_think_eog(&th);
			ended = true;
			break;
		}
		piece.n = 0;
		if (tok_stream_push(&ts, ids.v[i], &piece) ||
		    session_think_feed(&th, piece.p, piece.n, out, &x))
			tap_diag("feed failed");
	}
	session_think_flush(&th, out, &x);
	tap_ok(ended && th.state == SESSION_THINK_ANSWER &&
	           !strcmp(x.reasoning, "Three and three.") &&
	           !strcmp(x.answer, "6"),
	       "gemma4: the reply's %zu ids give reasoning \"%s\" answer "
	       "\"%s\", ended at <turn|>",
	       ids.n, x.reasoning, x.answer);
	session_think_free(&th);
	/* the tags are control tokens: a plain decode would hide them */
	tok_decode(t, ids.v, ids.n, 0, &plain, err, sizeof(err));
	tap_ok(plain.n > 0 &&
	           memmem(plain.p, plain.n, "<|channel>", 10) == NULL,
	       "gemma4: a decode without TOK_DECODE_SPECIAL hides the tags "
	       "(the session decodes with it)");
done:
	free(ids.v);
	free(piece.p);
	free(plain.p);
	tok_free(t);
	tok_free(q);
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

	tap_ok(
	    session_think_opened(TAGS, "<|im_start|>assistant\n<think>\n", 30),
	    "a prompt ending in <think> opens the block");
	tap_ok(!session_think_opened(TAGS, "assistant\n<think>\n\n</think>\n\n",
	                             27),
	       "a prompt that closed the block (thinking off) does not");
	tap_ok(!session_think_opened(TAGS, "<|im_start|>assistant\n", 22),
	       "a plain generation prompt does not");
	test_channel();

	/* Qwen3.5 opens the block in the prompt, Qwen3 lets the model;
	   Gemma 4 lets the model when thinking is on, else its prompt
	   closes an empty block and the reply is the answer alone */
	for (int th = -1; th <= 1; th++) {
		check_template("Qwen3.5-4B.jinja", TAGS, th, th >= 0, NULL,
		               th >= 0 ? "Three and three.\n</think>\n\n6"
		                       : "6",
		               th >= 0 ? "Three and three." : "", "6");
		check_template("Qwen-Qwen3-0.6B.jinja", TAGS, th, false, NULL,
		               th >= 0 ? "<think>\nThree and three.\n</think>"
		                         "\n\n6"
		                       : "6",
		               th >= 0 ? "Three and three." : "", "6");
		for (int k = 0; k < 2; k++)
			check_template(
			    k ? "google-gemma-4-31B-it-interleaved.jinja"
			      : "google-gemma-4-31B-it.jinja",
			    CHANNEL, th, false,
			    th > 0 ? "<|turn>model\n"
			           : "<|turn>model\n<|channel>thought\n"
			             "<channel|>",
			    th > 0 ? "<|channel>thought\nThree and three.\n"
			             "<channel|>6"
			           : "6",
			    th > 0 ? "Three and three." : "", "6");
	}
	test_channel_vocab();
	return tap_done();
}

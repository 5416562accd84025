/*
 * t_tok_load.c - tok_load() on small GGUF vocabularies built in memory:
 * a valid byte-level BPE and SentencePiece vocabulary encode and decode as
 * expected, and every malformed one is refused with a message naming the
 * key, the index and the numbers.
 */
#include "gguf.h"
#include "gguf_bytes.h"
#include "sbuf.h"
#include "tap.h"
#include "tok.h"

#include <string.h>

/* A vocabulary to write; NULL / negative fields are left out. */
struct spec {
	const char *model;         /* tokenizer.ggml.model */
	const char *pre;           /* tokenizer.ggml.pre */
	const char *const *tokens; /* n_tokens texts */
	size_t n_tokens;
	const int32_t *types; /* n_types token types */
	size_t n_types;
	const float *scores; /* n_scores scores */
	size_t n_scores;
	const char *const *merges; /* n_merges "a b" strings */
	size_t n_merges;
	int64_t bos; /* bos id, -1 = absent */
};

static void put_key(struct sbuf *sb, const char *key, uint32_t type)
{
	gb_str(sb, key);
	gb_u32(sb, type);
}

/* Write S as a GGUF file (no tensors) into SB. */
static void build(struct sbuf *sb, const struct spec *s)
{
	uint64_t n_kv = 1 + (s->pre != NULL) + (s->tokens != NULL) +
	                (s->types != NULL) + (s->scores != NULL) +
	                (s->merges != NULL) + (s->bos >= 0);
	size_t i;

	gb_header(sb, 3, 0, n_kv);
	gb_kv_str(sb, "tokenizer.ggml.model", s->model);
	if (s->pre)
		gb_kv_str(sb, "tokenizer.ggml.pre", s->pre);
	if (s->tokens) {
		put_key(sb, "tokenizer.ggml.tokens", GGUF_TYPE_ARRAY);
		gb_u32(sb, GGUF_TYPE_STRING);
		gb_u64(sb, s->n_tokens);
		for (i = 0; i < s->n_tokens; i++)
			gb_str(sb, s->tokens[i]);
	}
	if (s->types) {
		put_key(sb, "tokenizer.ggml.token_type", GGUF_TYPE_ARRAY);
		gb_u32(sb, GGUF_TYPE_INT32);
		gb_u64(sb, s->n_types);
		for (i = 0; i < s->n_types; i++)
			gb_u32(sb, (uint32_t)s->types[i]);
	}
	if (s->scores) {
		put_key(sb, "tokenizer.ggml.scores", GGUF_TYPE_ARRAY);
		gb_u32(sb, GGUF_TYPE_FLOAT32);
		gb_u64(sb, s->n_scores);
		for (i = 0; i < s->n_scores; i++)
			gb_f32(sb, s->scores[i]);
	}
	if (s->merges) {
		put_key(sb, "tokenizer.ggml.merges", GGUF_TYPE_ARRAY);
		gb_u32(sb, GGUF_TYPE_STRING);
		gb_u64(sb, s->n_merges);
		for (i = 0; i < s->n_merges; i++)
			gb_str(sb, s->merges[i]);
	}
	if (s->bos >= 0)
		gb_kv_u32(sb, "tokenizer.ggml.bos_token_id", (uint32_t)s->bos);
}

/* Load S; returns the tokenizer or NULL with ERR set. */
static struct tok *load(const struct spec *s, char *err, size_t errlen)
{
	struct sbuf sb = SBUF_INIT;
	struct gguf_file *f;
	struct tok *t = NULL;

	build(&sb, s);
	f = gguf_open_memory(sb.buf, sb.len, "v.gguf", err, errlen);
	if (f) {
		t = tok_load(f, err, errlen);
		gguf_close(f);
	}
	sbuf_free(&sb);
	return t;
}

/* Expect S to be refused with a message containing WANT. */
static void refused(const char *what, const struct spec *s, const char *want)
{
	char err[512] = "";
	struct tok *t = load(s, err, sizeof(err));

	tap_ok(t == NULL && strstr(err, want) != NULL, "%s refused: %s", what,
	       err);
	tok_free(t);
}

/* The 256 byte-level symbols, then extra tokens. */
static const char *bpe_tokens[256 + 8];
static char bpe_text[256][4];

static size_t bpe_vocab(void)
{
	static const char *const extra[] = {
	    "h", "e", "he", "ll", "hell", "hello", "<x>", "\xc4\xa0w"};
	size_t n = 0, i;
	unsigned b;

	/* GPT-2's bytes_to_unicode() */
	for (b = 0; b < 256; b++) {
		unsigned cp = b, k;

		if (!((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) ||
		      (b >= 0xae))) {
			cp = 256;
			for (k = 0; k < b; k++)
				if (!((k >= 0x21 && k <= 0x7e) ||
				      (k >= 0xa1 && k <= 0xac) || (k >= 0xae)))
					cp++;
		}
		if (cp < 0x80) {
			bpe_text[b][0] = (char)cp;
		} else {
			bpe_text[b][0] = (char)(0xc0 | cp >> 6);
			bpe_text[b][1] = (char)(0x80 | (cp & 0x3f));
		}
		bpe_tokens[n++] = bpe_text[b];
	}
	for (i = 2; i < sizeof(extra) / sizeof(extra[0]); i++)
		bpe_tokens[n++] = extra[i];
	return n;
}

static void test_bpe(void)
{
	static const char *const merges[] = {"h e", "l l", "he ll", "hell o",
	                                     "\xc4\xa0 w"};
	static int32_t types[256 + 8];
	size_t n = bpe_vocab(), i;
	struct spec s = {"gpt2", "gpt-2", bpe_tokens, n, types, n,
	                 NULL,   0,       merges,     5, 0};
	struct tok_ids ids = {0};
	struct tok_buf b = {0};
	char err[512];
	struct tok *t;
	int32_t hello, x, sw;
	char msg[128];

	for (i = 0; i < n; i++)
		types[i] = TOK_TYPE_NORMAL;
	types[n - 2] = TOK_TYPE_CONTROL; /* <x> */
	t = load(&s, err, sizeof(err));
	if (!tap_ok(t != NULL, "tiny BPE vocabulary loads (%s)",
	            t ? "ok" : err))
		return;
	hello = tok_find(t, "hello", 5);
	x = tok_find(t, "<x>", 3);
	sw = tok_find(t, "\xc4\xa0w", 3);
	tok_encode(t, "hello w<x>", 10, 0, &ids, err, sizeof(err));
	tap_ok(ids.n == 5 && ids.v[0] == hello && ids.v[1] == sw &&
	           ids.v[2] == '<' - 0 && ids.v[3] == 'x' && ids.v[4] == '>',
	       "merges applied, <x> is text without TOK_PARSE_SPECIAL (%zu "
	       "ids)",
	       ids.n);
	ids.n = 0;
	tok_encode(t, "hello w<x>", 10, TOK_PARSE_SPECIAL, &ids, err,
	           sizeof(err));
	tap_ok(ids.n == 3 && ids.v[2] == x, "TOK_PARSE_SPECIAL: <x> is one "
	                                    "control token");
	tok_decode(t, ids.v, ids.n, 0, &b, err, sizeof(err));
	tap_ok(b.n == 7 && memcmp(b.p, "hello w", 7) == 0,
	       "decode hides the control token");
	b.n = 0;
	tok_decode(t, ids.v, ids.n, TOK_DECODE_SPECIAL, &b, err, sizeof(err));
	tap_ok(b.n == 10 && memcmp(b.p, "hello w<x>", 10) == 0,
	       "TOK_DECODE_SPECIAL shows it");
	tap_ok(tok_is_control(t, x) && !tok_is_control(t, hello),
	       "tok_is_control");
	tap_ok(tok_bos(t) == 0 && !tok_add_bos(t), "gpt-2: no BOS added by "
	                                           "default");
	tap_ok(tok_decode(t, (int32_t[]){(int32_t)n}, 1, 0, &b, err,
	                  sizeof(err)) == -1 &&
	           strstr(err, "out of range") != NULL,
	       "decode refuses an id out of range: %s", err);
	free(ids.v);
	free(b.p);
	tok_free(t);

	/* malformed variants */
	s.pre = "gpt-5";
	refused("unknown pre-tokenizer", &s,
	        "tokenizer.ggml.pre \"gpt-5\" is not a known pre-tokenizer");
	s.pre = NULL;
	refused("BPE without a pre-tokenizer", &s,
	        "tokenizer.ggml.pre \"default\" is not a known");
	s.pre = "qwen2";
	s.model = "bert";
	refused("unknown model", &s,
	        "tokenizer.ggml.model \"bert\" is not "
	        "supported");
	s.model = "gpt2";
	s.merges = (const char *const[]){"h e", "qq z"};
	s.n_merges = 2;
	refused("merge of unknown tokens", &s,
	        "tokenizer.ggml.merges[1] \"qq z\": the left part is not a "
	        "token");
	s.merges = (const char *const[]){"h o"};
	s.n_merges = 1;
	refused("merge whose result is not a token", &s,
	        "merges[0] \"h o\": the merged text is not a token");
	s.merges = (const char *const[]){"hello"};
	refused("merge without a space", &s,
	        "merges[0] \"hello\" is not two tokens");
	s.merges = merges;
	s.n_merges = 5;
	s.bos = (int64_t)n;
	snprintf(msg, sizeof(msg),
	         "bos_token_id = %zu is out of range (%zu "
	         "tokens)",
	         n, n);
	refused("bos id out of range", &s, msg);
	s.bos = 0;
	types[3] = 9;
	refused("token type 9", &s, "token_type[3] = 9 is not a token type");
	types[3] = TOK_TYPE_NORMAL;
	s.n_types = n - 1;
	snprintf(msg, sizeof(msg),
	         "token_type has %zu entries, tokens has "
	         "%zu",
	         n - 1, n);
	refused("token_type of the wrong length", &s, msg);
	s.n_types = n;
	s.tokens = NULL;
	refused("no tokens", &s, "tokenizer.ggml.tokens");
	s.tokens = bpe_tokens;
	s.merges = NULL;
	refused("BPE without merges", &s, "tokenizer.ggml.merges");
}

/* The names llama.cpp gives the o200k pattern load, and split "he's" as
   one word with its contraction (gpt-2 splits off "'s"). */
static void test_pre_gpt4o(void)
{
	static const char *const names[] = {"gpt-4o", "llama4", "kanana2",
	                                    "talkie", "gpt-2"};
	static const char *const merges[] = {"h e", "' s", "he 's"};
	static const char *toks[256 + 8];
	static int32_t types[256 + 8];
	size_t n = bpe_vocab(), i;
	struct spec s = {"gpt2", NULL, toks,   n + 2, types, n + 2,
	                 NULL,   0,    merges, 3,     0};

	for (i = 0; i < n; i++) {
		toks[i] = bpe_tokens[i];
		types[i] = TOK_TYPE_NORMAL;
	}
	toks[n] = "'s";
	toks[n + 1] = "he's";
	types[n] = types[n + 1] = TOK_TYPE_NORMAL;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		struct tok_ids ids = {0};
		char err[512];
		struct tok *t;
		bool o200k = strcmp(names[i], "gpt-2") != 0;

		s.pre = names[i];
		t = load(&s, err, sizeof(err));
		if (!tap_ok(t != NULL && strcmp(tok_pre_name(t), names[i]) == 0,
		            "tokenizer.ggml.pre \"%s\" accepted (%s)", names[i],
		            t ? "ok" : err))
			continue;
		tok_encode(t, "he's", 4, 0, &ids, err, sizeof(err));
		tap_ok(o200k ? ids.n == 1 && ids.v[0] == (int32_t)n + 1
		             : ids.n == 2 && ids.v[1] == (int32_t)n,
		       "%s: \"he's\" is %s (%zu ids)", names[i],
		       o200k ? "one word" : "\"he\" \"'s\"", ids.n);
		free(ids.v);
		tok_free(t);
	}
}

static void test_spm(void)
{
	static const char *const toks[] = {"<unk>",
	                                   "<s>",
	                                   "</s>",
	                                   "<0x41>",
	                                   "<0xC3>",
	                                   "<0xA9>",
	                                   "\xe2\x96\x81",
	                                   "a",
	                                   "b",
	                                   "\xe2\x96\x81"
	                                   "a",
	                                   "ab",
	                                   "\xe2\x96\x81"
	                                   "ab"};
	static const int32_t types[] = {2, 3, 3, 6, 6, 6, 1, 1, 1, 1, 1, 1};
	static const float scores[] = {0,  0,  0,  0,  0,  0,
	                               -1, -2, -3, -4, -5, -6};
	struct spec s = {"llama", "default", toks, 12, types, 12,
	                 scores,  12,        NULL, 0,  1};
	struct tok_ids ids = {0};
	struct tok_buf b = {0};
	struct tok *t;
	char err[512];

	t = load(&s, err, sizeof(err));
	if (!tap_ok(t != NULL, "tiny SentencePiece vocabulary loads (%s)",
	            t ? "ok" : err))
		return;
	tok_encode(t, "ab A\xc3\xa9", 6, TOK_ADD_SPECIAL, &ids, err,
	           sizeof(err));
	/* BOS, ▁ab (score -6 beats ▁a -4? no: ▁a merges first at -4, then
	   ▁a+b = ▁ab), ▁, A -> <0x41>, é -> <0xC3> <0xA9> */
	tap_ok(ids.n == 6 && ids.v[0] == 1 && ids.v[1] == 11 && ids.v[2] == 6 &&
	           ids.v[3] == 3 && ids.v[4] == 4 && ids.v[5] == 5,
	       "BOS, space prefix, merges, byte fallback (%zu ids)", ids.n);
	tok_decode(t, ids.v, ids.n, 0, &b, err, sizeof(err));
	tap_ok(b.n == 6 && memcmp(b.p, "ab A\xc3\xa9", 6) == 0,
	       "decode drops BOS and the prefix space");
	tap_ok(tok_add_bos(t) && tok_eos(t) == -1, "SentencePiece adds BOS "
	                                           "by default");
	free(ids.v);
	free(b.p);
	tok_free(t);
	s.scores = NULL;
	refused("SentencePiece without scores", &s, "tokenizer.ggml.scores");
	s.scores = scores;
	s.n_scores = 11;
	refused("scores of the wrong length", &s,
	        "tokenizer.ggml.scores has 11 entries, tokens has 12");
}

int main(void)
{
	test_bpe();
	test_pre_gpt4o();
	test_spm();
	return tap_done();
}

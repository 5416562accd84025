/*
 * tok_pretok.c - the pre-tokenizers of byte-level BPE: PCRE2 patterns
 * (UTF mode, Unicode properties, JIT when available) that split text into
 * the chunks BPE merges within.
 *
 * The patterns are those of the Hugging Face tokenizer.json files (or, for
 * gpt-2, of HF's ByteLevel pre-tokenizer), with one change: \s and \S are
 * spelled out as Unicode White_Space, which is what Oniguruma (used by HF)
 * means by \s; PCRE2's \s also matches U+180E. Text between matches (only
 * invalid UTF-8 can be left over) becomes a chunk of its own, as with HF's
 * "Isolated" split behaviour.
 *
 * smollm is HF's Sequence[Digits(individual_digits), ByteLevel]: every
 * numeric character (Nd, Nl, No = \p{N}) is a chunk; the runs between them
 * are split by the gpt-2 pattern.
 *
 * gpt-4o is tiktoken's o200k_base pattern (gpt-oss; llama.cpp also gives it
 * to llama4, kanana2 and talkie). A word is an optional character that is
 * no letter, digit, \r or \n, then upper-ish letters (Lu Lt Lm Lo M)
 * followed by lower-ish ones (Ll Lm Lo M), or an upper-ish run alone:
 * "camelCase" -> "camel" "Case", "iPhone" -> "i" "Phone", "abcDEF" ->
 * "abc" "DEF", "HTTPServer" stays whole. A contraction ('s, 'RE, ... in
 * any case, as Unicode case folding has it, so 'ſ counts) sticks to the
 * word before it. Digits go in groups of up to three; punctuation takes
 * one leading space and trailing \r, \n and '/'. llama.cpp spells the
 * contractions '[sS] etc. for its own regex engine; tiktoken and the
 * bpe-openai crate fold them, which is what the goldens hold.
 */
#include "tok_impl.h"

#include <stdio.h>
#include <string.h>

/* Unicode White_Space, for use inside a character class. */
#define WS                                                                     \
	"\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}" \
	"\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

static const char re_gpt2[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+"
    "|[" WS "]+(?![^" WS "])|[" WS "]+";

static const char re_llama3[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"
    "|\\p{N}{1,3}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*|[" WS "]*[\\r\\n]+"
    "|[" WS "]+(?![^" WS "])|[" WS "]+";

static const char re_qwen2[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"
    "|\\p{N}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*|[" WS "]*[\\r\\n]+"
    "|[" WS "]+(?![^" WS "])|[" WS "]+";

/* the gpt-4o pattern's parts: a word's optional first character, its
   upper-ish and lower-ish letters, the contraction that may end it */
#define LEAD "[^\\r\\n\\p{L}\\p{N}]?"
#define UP   "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]"
#define LOW  "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"
#define APOS "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"

static const char re_gpt4o[] =
    "(?:" LEAD UP "*" LOW "+" APOS ")|(?:" LEAD UP "+" LOW "*" APOS ")"
    "|\\p{N}{1,3}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n/]*|[" WS "]*[\\r\\n]+"
    "|[" WS "]+(?![^" WS "])|[" WS "]+";

static const char re_digit[] = "\\p{N}";

/* Compile PATTERN into *OUT (JIT-compiled when PCRE2 supports it). */
static int tok_pretok_one(const char *pattern, pcre2_code **out, char *err,
                          size_t errlen)
{
	PCRE2_UCHAR msg[256];
	PCRE2_SIZE off;
	int ec;

	*out = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
	                     PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF,
	                     &ec, &off, NULL);
	if (*out == NULL) {
		pcre2_get_error_message(ec, msg, sizeof(msg));
		snprintf(err, errlen, "pre-tokenizer pattern, offset %zu: %s",
		         (size_t)off, (const char *)msg);
		return -1;
	}
	/* without JIT (not built in) the interpreter gives the same result */
	(void)pcre2_jit_compile(*out, PCRE2_JIT_COMPLETE);
	return 0;
}

int tok_pretok_compile(struct tok *t, char *err, size_t errlen)
{
	const char *p = re_gpt2;

	if (t->pre == TOK_PRE_LLAMA3)
		p = re_llama3;
	else if (t->pre == TOK_PRE_QWEN2)
		p = re_qwen2;
	else if (t->pre == TOK_PRE_GPT4O)
		p = re_gpt4o;
	if (tok_pretok_one(p, &t->re, err, errlen))
		return -1;
	if (t->pre == TOK_PRE_SMOLLM &&
	    tok_pretok_one(re_digit, &t->re_digits, err, errlen))
		return -1;
	return 0;
}

void tok_pretok_free(struct tok *t)
{
	pcre2_code_free(t->re);
	pcre2_code_free(t->re_digits);
	t->re = t->re_digits = NULL;
}

/* Run RE over S[0..n) and BPE-encode every match and every gap. */
static int tok_pretok_split(const struct tok *t, struct tok_scratch *sc,
                            const pcre2_code *re, const char *s, size_t n,
                            struct tok_ids *out)
{
	size_t off = 0;

	while (off < n) {
		int rc =
		    pcre2_match(re, (PCRE2_SPTR)s, n, off, 0, sc->md, NULL);
		PCRE2_SIZE *ov;

		if (rc == PCRE2_ERROR_NOMATCH)
			return tok_bpe_chunk(t, sc, s + off, n - off, out);
		if (rc < 0)
			return -1;
		ov = pcre2_get_ovector_pointer(sc->md);
		if (ov[0] > off &&
		    tok_bpe_chunk(t, sc, s + off, ov[0] - off, out))
			return -1;
		if (ov[1] <= ov[0]) { /* an empty match cannot happen here */
			size_t k = ov[0] + 1;

			if (tok_bpe_chunk(t, sc, s + ov[0], k - ov[0], out))
				return -1;
			off = k;
			continue;
		}
		if (tok_bpe_chunk(t, sc, s + ov[0], ov[1] - ov[0], out))
			return -1;
		off = ov[1];
	}
	return 0;
}

int tok_pretok_encode(const struct tok *t, struct tok_scratch *sc,
                      const char *s, size_t n, struct tok_ids *out)
{
	size_t off = 0;

	if (sc->md == NULL) {
		sc->md = pcre2_match_data_create(1, NULL);
		if (sc->md == NULL)
			return -1;
	}
	if (t->re_digits == NULL)
		return tok_pretok_split(t, sc, t->re, s, n, out);
	while (off < n) {
		int rc = pcre2_match(t->re_digits, (PCRE2_SPTR)s, n, off, 0,
		                     sc->md, NULL);
		PCRE2_SIZE *ov, a, b;

		if (rc == PCRE2_ERROR_NOMATCH)
			return tok_pretok_split(t, sc, t->re, s + off, n - off,
			                        out);
		if (rc < 0)
			return -1;
		ov = pcre2_get_ovector_pointer(sc->md);
		a = ov[0];
		b = ov[1];
		if (a > off &&
		    tok_pretok_split(t, sc, t->re, s + off, a - off, out))
			return -1;
		if (tok_bpe_chunk(t, sc, s + a, b - a, out))
			return -1;
		off = b > a ? b : a + 1;
	}
	return 0;
}

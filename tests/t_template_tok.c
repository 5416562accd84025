/*
 * t_template_tok.c - rendered chat text -> tokens, with special tokens
 * parsed only outside message content (prompts/README.md, "Special tokens
 * versus message text").
 *
 * The contract, implemented here by encode_chat() with the tokenizer's
 * public interface: a control token's text is recognized only where it
 * lies entirely inside one template (non-content) span; the stretches
 * between recognized control tokens are encoded as plain text, content
 * and template text together, exactly as Hugging Face encodes the
 * sections between special tokens.  Checked on real vocabularies:
 *
 *   1. for every oracle message list without typed control text, the
 *      result equals tok_encode(whole text, TOK_PARSE_SPECIAL), i.e. the
 *      reference tokenization of the rendered prompt;
 *   2. with a user message that types "<|im_end|><|im_start|>system...",
 *      the control ids in the result are exactly those the template wrote,
 *      and decoding gives the rendered text back.
 *
 * Byte-level BPE vocabularies only: SmolLM2 (the real model; skipped when
 * absent) and Qwen2 (../shared vocab; skipped when absent).  SentencePiece
 * with a space prefix needs the tokenizer to know that a stretch does not
 * start the text (HF prepends U+2581 to the first section only), which
 * tok_encode() cannot be told yet; see the report of the template branch.
 */
#include "promptdir.h"
#include "testenv.h"
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "json.h"
#include "tap.h"
#include "template.h"
#include "tok.h"

#include <utf8proc.h>

/* Read a whole file into a malloc'd buffer; NULL on error. */
static char *slurp(const char *path, size_t *len)
{
	char err[256];

	return promptdir_read_file(path, len, err, sizeof(err));
}

/* The control tokens of T (id and text), found once per vocabulary. */
struct ctl {
	int32_t *ids;     /* n ids */
	const char **txt; /* their texts (owned by the tokenizer) */
	size_t *len;      /* their lengths */
	size_t n;
};

static void ctl_load(const struct tok *t, struct ctl *c)
{
	int32_t id, nv = tok_n_vocab(t);

	memset(c, 0, sizeof(*c));
	c->ids = malloc((size_t)nv * sizeof(*c->ids));
	c->txt = malloc((size_t)nv * sizeof(*c->txt));
	c->len = malloc((size_t)nv * sizeof(*c->len));
	for (id = 0; id < nv; id++) {
		size_t n;
		const char *s;

		if (!tok_is_control(t, id))
			continue;
		s = tok_text(t, id, &n);
		if (!s || !n)
			continue;
		c->ids[c->n] = id;
		c->txt[c->n] = s;
		c->len[c->n] = n;
		c->n++;
	}
}

static void ctl_free(struct ctl *c)
{
	free(c->ids);
	free(c->txt);
	free(c->len);
}

/* Encode rendered TEXT whose provenance is SP[0..NSP) into OUT. */
static int encode_chat(const struct tok *t, const struct ctl *c,
                       const char *text, size_t len, const struct tmpl_span *sp,
                       size_t nsp, struct tok_ids *out, char *err,
                       size_t errlen)
{
	size_t s, start = 0;

	for (s = 0; s < nsp; s++) {
		size_t i, end = sp[s].off + sp[s].len;

		if (sp[s].is_content)
			continue;
		for (i = sp[s].off; i < end;) {
			size_t k, best = 0;
			int32_t id = -1;

			/* leftmost-longest control token inside this span */
			for (k = 0; k < c->n; k++) {
				if (c->len[k] > best && c->len[k] <= end - i &&
				    memcmp(text + i, c->txt[k], c->len[k]) ==
				        0) {
					best = c->len[k];
					id = c->ids[k];
				}
			}
			if (!best) {
				i++;
				continue;
			}
			if (i > start && tok_encode(t, text + start, i - start,
			                            0, out, err, errlen))
				return -1;
			if (out->n == out->cap) {
				size_t ncap = out->cap ? out->cap * 2 : 64;
				int32_t *nv =
				    realloc(out->v, ncap * sizeof(*nv));

				if (!nv)
					return -1;
				out->v = nv;
				out->cap = ncap;
			}
			out->v[out->n++] = id;
			i += best;
			start = i;
		}
	}
	if (len > start &&
	    tok_encode(t, text + start, len - start, 0, out, err, errlen))
		return -1;
	return 0;
}

/* Count ids of IDS[0..n) that are control tokens. */
static size_t n_control(const struct tok *t, const struct tok_ids *ids)
{
	size_t i, n = 0;

	for (i = 0; i < ids->n; i++)
		n += tok_is_control(t, ids->v[i]);
	return n;
}

/* Control-token texts (leftmost-longest) inside content spans. */
static size_t content_hits(const struct ctl *c, const char *text,
                           const struct tmpl_span *sp, size_t nsp)
{
	size_t s, hits = 0;

	for (s = 0; s < nsp; s++) {
		size_t i, end = sp[s].off + sp[s].len;

		if (!sp[s].is_content)
			continue;
		for (i = sp[s].off; i < end;) {
			size_t k, best = 0;

			for (k = 0; k < c->n; k++)
				if (c->len[k] > best && c->len[k] <= end - i &&
				    memcmp(text + i, c->txt[k], c->len[k]) == 0)
					best = c->len[k];
			hits += best != 0;
			i += best ? best : 1;
		}
	}
	return hits;
}

/* Run the checks for one vocabulary and template (NFC: the tokenizer
 * normalizes to NFC, so decoding gives the NFC form back). */
static void check_vocab(const char *label, const char *gguf_path,
                        const char *tmpl_src, size_t tmpl_len, const char *bos,
                        const char *eos, const char *casedir, bool nfc)
{
	struct gguf_file *f;
	struct tok *t;
	struct tmpl *tp;
	struct ctl ctl;
	char err[512], path[8192];
	DIR *d;
	struct dirent *e;
	int ncases = 0, nsame = 0;

	f = gguf_open(gguf_path, err, sizeof(err));
	if (!f) {
		tap_diag("%s: %s not available (%s): skipped", label, gguf_path,
		         err);
		return;
	}
	t = tok_load(f, err, sizeof(err));
	gguf_close(f);
	if (!tap_ok(t != NULL, "%s: tokenizer loads", label)) {
		tap_diag("%s", err);
		return;
	}
	if (!tap_ok(tmpl_compile(tmpl_src, tmpl_len, &tp, err, sizeof(err)) ==
	                TMPL_OK,
	            "%s: template compiles", label)) {
		tok_free(t);
		return;
	}
	ctl_load(t, &ctl);
	d = opendir(casedir);
	while (d && (e = readdir(d))) {
		struct json_value *cs;
		struct tmpl_ctx ctx;
		struct tmpl_span *sp;
		size_t n, nsp, clen;
		char *out, *cj;
		struct tok_ids a = {0}, b = {0};
		struct tok_buf back = {0};
		bool typed;

		if (!strstr(e->d_name, ".json"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", casedir, e->d_name);
		cj = slurp(path, &clen);
		if (!cj || json_parse(cj, clen, &cs, err, sizeof(err))) {
			free(cj);
			continue;
		}
		free(cj);
		memset(&ctx, 0, sizeof(ctx));
		ctx.messages = json_object_get(cs, "messages");
		ctx.add_generation_prompt =
		    json_object_get(cs, "add_generation_prompt")->u.b;
		ctx.bos_token = bos;
		ctx.eos_token = eos;
		if (tmpl_render(tp, &ctx, &out, &n, &sp, &nsp, err,
		                sizeof(err)) != TMPL_OK) {
			json_free(cs); /* the template refuses this list */
			continue;
		}
		typed = strstr(e->d_name, "jinja-looking") != NULL;
		encode_chat(t, &ctl, out, n, sp, nsp, &a, err, sizeof(err));
		tok_encode(t, out, n, TOK_PARSE_SPECIAL, &b, err, sizeof(err));
		tok_decode(t, a.v, a.n, TOK_DECODE_SPECIAL, &back, err,
		           sizeof(err));
		ncases += !typed;
		if (!typed) {
			bool same = a.n == b.n &&
			            memcmp(a.v, b.v, a.n * sizeof(*a.v)) == 0;

			nsame += same;
			tap_ok(same,
			       "%s %s: same ids as the whole text with "
			       "special tokens (%zu ids)",
			       label, e->d_name, a.n);
		} else {
			/* every control id comes from the template: those of
			 * the whole-text encoding minus the typed ones */
			size_t hits = content_hits(&ctl, out, sp, nsp);

			tap_ok(hits > 0 &&
			           n_control(t, &a) + hits == n_control(t, &b),
			       "%s %s: typed control text stays text (%zu "
			       "control ids; %zu typed ones not parsed)",
			       label, e->d_name, n_control(t, &a), hits);
		}
		{
			char *want = nfc ? (char *)utf8proc_NFC(
			                       (const utf8proc_uint8_t *)out)
			                 : out;
			size_t wn = want ? strlen(want) : 0;

			tap_ok(want && back.n == wn &&
			           memcmp(back.p, want, wn) == 0,
			       "%s %s: decodes back to the rendered text%s",
			       label, e->d_name, nfc ? " (NFC)" : "");
			if (nfc)
				free(want);
		}
		free(back.p);
		free(a.v);
		free(b.v);
		free(out);
		free(sp);
		json_free(cs);
	}
	if (d)
		closedir(d);
	tap_diag("%s: %d of %d message lists without typed control text "
	         "tokenized as the reference",
	         label, nsame, ncases);
	ctl_free(&ctl);
	tmpl_free(tp);
	tok_free(t);
}

int main(void)
{
	const char *top = getenv("top_srcdir"),
	           *shared = getenv("PARLEY_SHARED");
	const char *model = getenv("PARLEY_TEST_MODEL");
	char mpath[4096], casedir[4096], path[4096];
	struct gguf_file *f;
	char err[512];

	if (!top)
		top = ".";
	snprintf(casedir, sizeof(casedir), "%s/tests/data/template/cases", top);
	if (!model)
		model = testenv_model(mpath, sizeof(mpath));
	/* SmolLM2: its own template from the GGUF */
	f = gguf_open(model, err, sizeof(err));
	if (f) {
		struct gguf_str s;

		if (gguf_get_str(f, "tokenizer.chat_template", &s, err,
		                 sizeof(err)) == GGUF_OK) {
			char *src = malloc(s.len + 1);

			memcpy(src, s.ptr, s.len);
			src[s.len] = '\0';
			check_vocab("SmolLM2", model, src, s.len,
			            "<|im_start|>", "<|im_end|>", casedir,
			            false);
			free(src);
		}
		gguf_close(f);
	} else {
		tap_diag("SmolLM2 model not available (%s)", err);
	}
	/* Qwen2 vocabulary with the Qwen2.5 template */
	{
		size_t n;
		char *src;

		snprintf(path, sizeof(path),
		         "%s/tests/data/template/templates/"
		         "Qwen-Qwen2.5-7B-Instruct.jinja",
		         top);
		src = slurp(path, &n);
		snprintf(mpath, sizeof(mpath),
		         "%s/testdata/vocab/"
		         "ggml-vocab-qwen2.gguf",
		         shared ? shared : "../shared");
		if (src)
			check_vocab("Qwen2", mpath, src, n, "", "<|im_end|>",
			            casedir, true);
		free(src);
	}
	if (tap_n == 0)
		return tap_skip_all("no vocabulary available");
	return tap_done();
}

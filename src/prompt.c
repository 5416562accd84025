/*
 * prompt.c - span-aware prompt encoding (see prompt.h).
 */
#include "prompt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int prompt_marks_push(struct prompt_marks *m, size_t n_tok, size_t n_bytes,
                      bool clean)
{
	if (m == NULL)
		return 0;
	if (m->n > 0 && m->v[m->n - 1].n_tok == n_tok &&
	    m->v[m->n - 1].n_bytes == n_bytes) {
		m->v[m->n - 1].clean |= clean;
		return 0;
	}
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 64;
		struct prompt_mark *v = realloc(m->v, cap * sizeof(*v));

		if (v == NULL)
			return -1;
		m->v = v;
		m->cap = cap;
	}
	m->v[m->n].n_tok = n_tok;
	m->v[m->n].n_bytes = n_bytes;
	m->v[m->n].clean = clean;
	m->n++;
	return 0;
}

/* qsort order of control tokens: longer text first, then by id. */
static const struct tok *prompt_sort_tok;
static int prompt_ctl_cmp(const void *pa, const void *pb)
{
	int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
	size_t la, lb;

	tok_text(prompt_sort_tok, a, &la);
	tok_text(prompt_sort_tok, b, &lb);
	if (la != lb)
		return la > lb ? -1 : 1;
	return a < b ? -1 : a > b;
}

int prompt_vocab_init(struct prompt_vocab *pv, const struct tok *t, char *err,
                      size_t errlen)
{
	int32_t n = tok_n_vocab(t), id;
	size_t k = 0, len;

	memset(pv, 0, sizeof(*pv));
	pv->tok = t;
	for (id = 0; id < n; id++)
		if (tok_is_control(t, id) && tok_text(t, id, &len) && len > 0)
			k++;
	pv->ctl = malloc((k ? k : 1) * sizeof(*pv->ctl));
	if (pv->ctl == NULL) {
		snprintf(err, errlen, "out of memory (%zu control tokens)", k);
		return -1;
	}
	for (id = 0; id < n; id++)
		if (tok_is_control(t, id) && tok_text(t, id, &len) && len > 0)
			pv->ctl[pv->n_ctl++] = id;
	/* qsort has no context argument in C11; this runs once per load */
	prompt_sort_tok = t;
	qsort(pv->ctl, pv->n_ctl, sizeof(*pv->ctl), prompt_ctl_cmp);
	pv->restart_anywhere = strcmp(tok_model_name(t), "bpe") == 0;
	return 0;
}

void prompt_vocab_free(struct prompt_vocab *pv)
{
	free(pv->ctl);
	memset(pv, 0, sizeof(*pv));
}

/* The longest control token at TEXT[i] that ends by LIT_END, or -1. */
static int32_t prompt_ctl_at(const struct prompt_vocab *pv, const char *text,
                             size_t i, size_t lit_end, size_t *tlen)
{
	for (size_t k = 0; k < pv->n_ctl; k++) {
		size_t len;
		const char *s = tok_text(pv->tok, pv->ctl[k], &len);

		if (len <= lit_end - i && s[0] == text[i] &&
		    memcmp(s, text + i, len) == 0) {
			*tlen = len;
			return pv->ctl[k];
		}
	}
	return -1;
}

/* Encode the raw run TEXT[a, b) and mark its end. */
static int prompt_raw(const struct prompt_vocab *pv, const char *text, size_t a,
                      size_t b, struct tok_ids *out, struct prompt_marks *marks,
                      char *err, size_t errlen)
{
	if (b > a && tok_encode(pv->tok, text + a, b - a, 0, out, err, errlen))
		return -1;
	if (prompt_marks_push(marks, out->n, b, pv->restart_anywhere)) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

int prompt_encode(const struct prompt_vocab *pv, const char *text, size_t len,
                  const struct tmpl_span *spans, size_t nspans, size_t from,
                  struct tok_ids *out, struct prompt_marks *marks, char *err,
                  size_t errlen)
{
	struct tmpl_span all = {0, len, false};
	size_t n0 = out->n, s, run = from;

	if (spans == NULL) {
		spans = &all;
		nspans = len > 0;
	}
	for (s = 0; s < nspans; s++) {
		size_t a = spans[s].off, b = spans[s].off + spans[s].len;

		if (b <= from || spans[s].is_content)
			continue;
		if (a < from)
			a = from;
		/* a literal span: look for control tokens inside it */
		for (size_t i = a; i < b;) {
			size_t tlen = 0;
			int32_t id = pv->n_ctl
			                 ? prompt_ctl_at(pv, text, i, b, &tlen)
			                 : -1;

			if (id < 0) {
				i++;
				continue;
			}
			if (prompt_raw(pv, text, run, i, out, marks, err,
			               errlen)) {
				out->n = n0;
				return -1;
			}
			if (tok_ids_push(out, id) ||
			    prompt_marks_push(marks, out->n, i + tlen, true)) {
				snprintf(err, errlen, "out of memory");
				out->n = n0;
				return -1;
			}
			i += tlen;
			run = i;
		}
	}
	if (prompt_raw(pv, text, run, len, out, marks, err, errlen)) {
		out->n = n0;
		return -1;
	}
	return 0;
}

int prompt_encode_prompt(const struct prompt_vocab *pv, const char *text,
                         size_t len, const struct tmpl_span *spans,
                         size_t nspans, struct tok_ids *out,
                         struct prompt_marks *marks, char *err, size_t errlen)
{
	int32_t bos = tok_bos(pv->tok);
	bool add = tok_add_bos(pv->tok) && bos >= 0;

	out->n = 0;
	if (marks != NULL)
		marks->n = 0;
	if ((add && tok_ids_push(out, bos)) ||
	    (marks != NULL && prompt_marks_push(marks, add ? 1 : 0, 0, true))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (prompt_encode(pv, text, len, spans, nspans, 0, out, marks, err,
	                  errlen))
		return -1;
	/* The template wrote bos_token itself: keep one BOS, not two. */
	if (add && out->n > 1 && out->v[1] == bos) {
		memmove(out->v, out->v + 1, (out->n - 1) * sizeof(*out->v));
		out->n--;
		for (size_t k = 0; marks != NULL && k < marks->n; k++)
			if (marks->v[k].n_tok > 0)
				marks->v[k].n_tok--;
	}
	return 0;
}

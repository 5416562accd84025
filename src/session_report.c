/*
 * session_report.c - the token reports of a reply: the sampler's report
 * of each token kept while the reply is generated (and stored with it),
 * read back from the store, and those a branch at a token starts from.
 */
#include "session_int.h"

#include "tok.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Append the bytes of token ID to SET's text; *OFF, *LEN where. An id
   of -1 (a remote model's token, sampler.h) has no piece here: its text
   is TEXT's TLEN bytes (what the server sent). */
static int session_rep_text(struct session *s, struct store_reports *set,
                            int32_t id, const char *text, size_t tlen,
                            uint32_t *off, uint32_t *len)
{
	size_t n = tlen;
	const char *p =
	    id < 0 ? text : tok_piece(s->tok, id, TOK_DECODE_SPECIAL, &n);

	if (p == NULL)
		n = 0;
	*len = (uint32_t)n;
	return store_reports_text(set, p ? p : "", n, off);
}

/* The stored form of sampler report REP (its first STORE_REPORT_TOP
   candidates) appended to SET with the tokens' bytes. 0 or -1 (memory). */
static int session_rep_add(struct session *s, struct store_reports *set,
                           const struct sampler_report *rep, unsigned flags)
{
	struct store_tok_report t;

	memset(&t, 0, sizeof(t));
	t.chosen = rep->chosen;
	t.flags = flags;
	t.prob = rep->chosen_prob;
	t.raw_logprob = rep->chosen_raw_logprob;
	t.entropy = rep->entropy;
	t.raw_entropy = rep->raw_entropy;
	t.n_kept = rep->n_kept;
	t.n_top = rep->n_top < STORE_REPORT_TOP ? rep->n_top : STORE_REPORT_TOP;
	if (session_rep_text(s, set, t.chosen, rep->chosen_text,
	                     strlen(rep->chosen_text), &t.text_off,
	                     &t.text_len))
		return -1;
	for (int32_t j = 0; j < t.n_top; j++) {
		t.top[j].id = rep->top[j].id;
		t.top[j].logit = rep->top[j].logit;
		t.top[j].logprob = rep->top[j].logprob;
		if (session_rep_text(s, set, t.top[j].id, rep->top_text[j],
		                     strlen(rep->top_text[j]),
		                     &t.top[j].text_off, &t.top[j].text_len))
			return -1;
	}
	return store_reports_push(set, &t);
}

/* Copy the text at OFF, LEN of SET into DST (SAMPLER_TEXT_MAX bytes,
   NUL-terminated), cut at a UTF-8 character boundary when too long (only
   a damaged store has such: they were cut so when recorded). */
static void session_rep_copy_text(const struct store_reports *set, uint32_t off,
                                  uint32_t len, char *dst)
{
	const unsigned char *p = (const unsigned char *)set->text + off;
	size_t n = len;

	if (n > SAMPLER_TEXT_MAX - 1) {
		n = SAMPLER_TEXT_MAX - 1;
		while (n > 0 && (p[n] & 0xC0) == 0x80)
			n--;
	}
	if (n)
		memcpy(dst, p, n);
	dst[n] = '\0';
}

/* The sampler report of stored report T of SET (store.h: NaN where
   unknown); the texts of ids -1 (remote) from SET's text. */
void session_rep_to_sampler(const struct store_reports *set,
                            const struct store_tok_report *t,
                            struct sampler_report *rep)
{
	memset(rep, 0, sizeof(*rep));
	rep->chosen = t->chosen;
	rep->chosen_prob = t->prob;
	rep->chosen_raw_logprob = t->raw_logprob;
	rep->chosen_raw_prob = expf(t->raw_logprob);
	rep->entropy = t->entropy;
	rep->raw_entropy = t->raw_entropy;
	rep->n_kept = t->n_kept;
	rep->n_top = t->n_top;
	for (int32_t j = 0; j < t->n_top; j++) {
		rep->top[j].id = t->top[j].id;
		rep->top[j].logit = t->top[j].logit;
		rep->top[j].logprob = t->top[j].logprob;
		rep->top[j].prob = expf(t->top[j].logprob);
		if (t->top[j].id < 0)
			session_rep_copy_text(set, t->top[j].text_off,
			                      t->top[j].text_len,
			                      rep->top_text[j]);
	}
	if (t->chosen < 0)
		session_rep_copy_text(set, t->text_off, t->text_len,
		                      rep->chosen_text);
}

int session_stored_reply(const struct session *s, size_t msg_index,
                         const struct session_msg **m, char *err, size_t errlen)
{
	if (msg_index >= s->n_msgs) {
		snprintf(err, errlen, "no message %zu (of %zu)", msg_index,
		         s->n_msgs);
		return -1;
	}
	*m = &s->msgs[msg_index];
	return s->st != NULL && (*m)->store_id != 0 &&
	       (*m)->role == STORE_ROLE_ASSISTANT;
}

/* Keep the report of the reply's next token (when recording). Past
   STORE_REPORTS_MAX the reply goes on without reports, told once. */
void session_record(struct session *s, struct session_reply *r,
                    const struct sampler_report *rep, unsigned flags,
                    const struct session_cb *cb)
{
	char msg[160];

	if (!r->recording || r->rep_full)
		return;
	if (r->rep.n >= STORE_REPORTS_MAX) {
		r->rep_full = true;
		snprintf(msg, sizeof(msg),
		         "token reports are kept for the first %d tokens of "
		         "a reply; the rest of this one has none",
		         STORE_REPORTS_MAX);
		if (cb && cb->notice)
			cb->notice(cb->ud, msg);
		return;
	}
	if (session_rep_add(s, &r->rep, rep, flags)) {
		r->rep_full = true;
		if (cb && cb->notice)
			cb->notice(cb->ud, "token reports: out of memory; the "
			                   "reply goes on without them");
	}
}

int session_msg_reports(struct session *s, size_t msg_index,
                        struct sampler_report **out, size_t *n, char *err,
                        size_t errlen)
{
	struct store_reports r = {0};
	const struct session_msg *m;
	int rc;

	*out = NULL;
	*n = 0;
	rc = session_stored_reply(s, msg_index, &m, err, errlen);
	if (rc <= 0)
		return rc;
	if (store_msg_reports(s->st, m->store_id, &r, err, errlen) != STORE_OK)
		return -1;
	if (r.n > 0) {
		*out = malloc(r.n * sizeof(**out));
		if (*out == NULL) {
			store_reports_free(&r);
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		for (size_t i = 0; i < r.n; i++)
			session_rep_to_sampler(&r, &r.v[i], &(*out)[i]);
		*n = r.n;
	}
	store_reports_free(&r);
	return 0;
}

/*
 * The forced token's report: the distribution is the one stored for the
 * same position (the context before it is the same), the choice is
 * FORCED; what is not known is NaN (session.h).
 */
int session_rep_forced(struct session *s, struct store_reports *dst,
                       const struct store_reports *src, size_t pos,
                       int32_t forced)
{
	struct store_tok_report t = src->v[pos];

	t.chosen = forced;
	t.flags = STORE_REPORT_FORCED |
	          (tok_is_eog(s->tok, forced) ? STORE_REPORT_EOG : 0);
	t.prob = NAN;
	t.raw_logprob = NAN;
	for (int32_t j = 0; j < t.n_top; j++) {
		if (t.top[j].id == forced)
			t.raw_logprob = t.top[j].logprob;
		if (session_rep_text(s, dst, t.top[j].id,
		                     src->text + t.top[j].text_off,
		                     t.top[j].text_len, &t.top[j].text_off,
		                     &t.top[j].text_len))
			return -1;
	}
	if (session_rep_text(s, dst, forced, NULL, 0, &t.text_off, &t.text_len))
		return -1;
	return store_reports_push(dst, &t);
}

/* Copy report I of SRC (with its texts) to DST. */
int session_rep_copy(struct store_reports *dst, const struct store_reports *src,
                     size_t i)
{
	struct store_tok_report t = src->v[i];

	if (store_reports_text(dst, src->text + t.text_off, t.text_len,
	                       &t.text_off))
		return -1;
	for (int32_t j = 0; j < t.n_top; j++)
		if (store_reports_text(dst, src->text + t.top[j].text_off,
		                       t.top[j].text_len, &t.top[j].text_off))
			return -1;
	return store_reports_push(dst, &t);
}

/*
 * session_prompt.c - a turn's prompt and the KV cache: the window of
 * messages rendered through the chat template, tokenized from what is
 * aligned, fitted to the context and evaluated after the longest common
 * prefix with the cache (steps 1-4 of the notes in session.c, and the
 * shift of step 5).
 */
#include "session_int.h"

#include "engine.h"
#include "model.h"
#include "prompt.h"
#include "template.h"
#include "tok.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SESSION_PREFILL_CHUNK 64 /* ids per eval call (interrupt checks) */

/* ---------- alignment ---------- */

/* Reset align to empty. */
void session_align_clear(struct session *s)
{
	s->al_tok.n = 0;
	s->al_text.n = 0;
	s->al_marks.n = 0;
}

/* Align to the saved ids TOKS[0, n): their decoded text, a mark at each. */
int session_align_ids(struct session *s, const int32_t *toks, size_t n)
{
	size_t i = 0;

	session_align_clear(s);
	if (n > 0 && tok_add_bos(s->tok) && toks[0] == tok_bos(s->tok)) {
		if (tok_ids_push(&s->al_tok, toks[0]))
			return -1;
		i = 1;
	}
	if (prompt_marks_push(&s->al_marks, s->al_tok.n, 0, true))
		return -1;
	for (; i < n; i++) {
		size_t len;
		const char *p =
		    tok_piece(s->tok, toks[i], TOK_DECODE_SPECIAL, &len);

		if (p == NULL)
			return -1;
		if (tok_ids_push(&s->al_tok, toks[i]) ||
		    tok_buf_append(&s->al_text, p, len) ||
		    prompt_marks_push(&s->al_marks, s->al_tok.n, s->al_text.n,
		                      s->pv.restart_anywhere ||
		                          tok_is_control(s->tok, toks[i])))
			return -1;
	}
	return 0;
}

/* ---------- the prompt and the cache ---------- */

/* Render the window with the generation prompt: *T, *SPANS malloc'd. */
static int session_render(struct session *s, char **t, size_t *tlen,
                          struct tmpl_span **spans, size_t *nspans, char *err,
                          size_t errlen)
{
	struct json_value *arr = json_new_array(), *think = NULL,
	                  *effort = NULL;
	struct tmpl_ctx ctx = {0};
	struct tmpl_var var[2] = {0};
	size_t i;
	int rc;

	if (arr == NULL)
		goto nomem;
	for (i = 0; i < s->n_msgs; i++) {
		const struct session_msg *m = &s->msgs[i];
		struct json_value *o;

		if (m->role != STORE_ROLE_SYSTEM && i < s->first)
			continue;
		o = json_new_object();
		if (o == NULL || json_array_push(arr, o) ||
		    json_object_set(
		        o, "role", 4,
		        json_new_string(store_role_name(m->role),
		                        strlen(store_role_name(m->role)))) ||
		    json_object_set(o, "content", 7,
		                    json_new_string(m->content, m->len)))
			goto nomem;
		/* the reasoning as the OpenAI API passes it: the template
		   decides what of it the next prompt holds (Qwen3's keeps
		   the last turn's) */
		if (m->role == STORE_ROLE_ASSISTANT && m->reasoning &&
		    json_object_set(
		        o, "reasoning_content", 17,
		        json_new_string(m->reasoning, m->reasoning_len)))
			goto nomem;
		/* gpt-oss's reads it as the message's thinking */
		if (m->role == STORE_ROLE_ASSISTANT && m->reasoning &&
		    s->tmpl_thinking &&
		    json_object_set(
		        o, "thinking", 8,
		        json_new_string(m->reasoning, m->reasoning_len)))
			goto nomem;
	}
	ctx.vars = var;
	if (s->think) {
		think = json_new_bool(s->think > 0);
		if (think == NULL)
			goto nomem;
		var[ctx.nvars].name = "enable_thinking";
		var[ctx.nvars++].value = think;
	}
	if (s->reasoning) {
		const char *lv = session_reasoning_name(s->reasoning);

		effort = json_new_string(lv, strlen(lv));
		if (effort == NULL)
			goto nomem;
		var[ctx.nvars].name = "reasoning_effort";
		var[ctx.nvars++].value = effort;
	}
	ctx.messages = arr;
	ctx.add_generation_prompt = true;
	ctx.bos_token = s->bos_text;
	ctx.eos_token = s->eos_text;
	rc = tmpl_render(s->tmpl, &ctx, t, tlen, spans, nspans, err, errlen);
	json_free(arr);
	json_free(think);
	json_free(effort);
	if (rc == TMPL_OK)
		s->think_prompt = session_think_opened(s->think_fmt, *t, *tlen);
	return rc == TMPL_OK ? 0 : -1;
nomem:
	json_free(arr);
	json_free(think);
	json_free(effort);
	snprintf(err, errlen, "out of memory rendering %zu messages",
	         s->n_msgs);
	return -1;
}

/* Comparisons session_shift_find and session_tokens_gap may make per
   cached id or aligned byte: the searches stay linear in the context
   however the ids repeat. */
#define SESSION_SHIFT_BUDGET 8

/* Whether turns leaving the window are shifted out of the cache (step
 * 3): asked for, and the engine can. */
static bool session_shifts(const struct session *s)
{
	return s->context_shift && engine_can_shift(s->eng);
}

/*
 * Step 3's shift, in the ids: turns left the window between the prefix
 * OUT holds (al_tok up to the mark at byte *FROM of T) and the turns
 * kept. The kept turns' aligned ids are reused too, as step 2 reuses the
 * previous reply's: the clean mark M2 of al from which al_text matches T
 * from *FROM the longest, then al_tok from M2 up to the last clean mark
 * M3 within that match, their marks moved to where the text now is;
 * *FROM moves past them. So the cache's ids of the kept turns follow the
 * prefix (what engine_kv_shift keeps), however a tokenizer would split
 * their text today. Returns 0 (nothing found: OUT unchanged), -1 when out
 * of memory.
 */
static int session_tokens_gap(struct session *s, const char *t, size_t tlen,
                              struct tok_ids *out, struct prompt_marks *marks,
                              size_t *from)
{
	const size_t b1 = *from, n1 = out->n;
	size_t best = 0, budget = SESSION_SHIFT_BUDGET * s->al_text.n + 64;
	size_t i2 = s->al_marks.n, i3 = s->al_marks.n;

	for (size_t i = 0; i < s->al_marks.n && budget > 0; i++) {
		const struct prompt_mark *m = &s->al_marks.v[i];
		size_t k = 0;

		if (m->n_bytes <= b1 || !m->clean || m->n_tok > s->al_tok.n)
			continue;
		budget--;
		while (b1 + k < tlen && m->n_bytes + k < s->al_text.n &&
		       budget > 0 &&
		       t[b1 + k] == s->al_text.p[m->n_bytes + k]) {
			k++;
			budget--;
		}
		if (k > best) {
			best = k;
			i2 = i;
		}
	}
	for (size_t i = i2 + 1; i < s->al_marks.n; i++) {
		const struct prompt_mark *m = &s->al_marks.v[i];

		if (m->n_bytes > s->al_marks.v[i2].n_bytes + best)
			break;
		if (m->clean && m->n_tok <= s->al_tok.n)
			i3 = i;
	}
	if (i2 == s->al_marks.n || i3 == s->al_marks.n)
		return 0;
	const struct prompt_mark m2 = s->al_marks.v[i2];

	for (size_t k = m2.n_tok; k < s->al_marks.v[i3].n_tok; k++)
		if (tok_ids_push(out, s->al_tok.v[k]))
			return -1;
	for (size_t i = i2 + 1; i <= i3; i++) {
		const struct prompt_mark *m = &s->al_marks.v[i];

		if (prompt_marks_push(marks, m->n_tok - m2.n_tok + n1,
		                      m->n_bytes - m2.n_bytes + b1, m->clean))
			return -1;
	}
	*from = b1 + (s->al_marks.v[i3].n_bytes - m2.n_bytes);
	return 0;
}

/*
 * The ids of prompt T (see the notes, step 2) into OUT with MARKS; GAP:
 * turns left the window and the cache can shift past them
 * (session_tokens_gap).
 */
static int session_tokens(struct session *s, const char *t, size_t tlen,
                          const struct tmpl_span *spans, size_t nspans,
                          bool gap, struct tok_ids *out,
                          struct prompt_marks *marks, char *err, size_t errlen)
{
	size_t l = 0, k, from = 0;
	const struct prompt_mark *best = NULL;

	out->n = 0;
	marks->n = 0;
	while (l < tlen && l < s->al_text.n && t[l] == s->al_text.p[l])
		l++;
	for (k = 0; k < s->al_marks.n; k++) {
		const struct prompt_mark *m = &s->al_marks.v[k];

		if (m->n_bytes > l)
			break;
		if (m->clean && m->n_tok <= s->al_tok.n)
			best = m;
	}
	if (best && best->n_tok > 0) {
		for (k = 0; k < best->n_tok; k++)
			if (tok_ids_push(out, s->al_tok.v[k]))
				goto nomem;
		for (k = 0;
		     k < s->al_marks.n && s->al_marks.v[k].n_tok <= best->n_tok;
		     k++)
			if (prompt_marks_push(marks, s->al_marks.v[k].n_tok,
			                      s->al_marks.v[k].n_bytes,
			                      s->al_marks.v[k].clean))
				goto nomem;
		from = best->n_bytes;
		if (gap && session_tokens_gap(s, t, tlen, out, marks, &from))
			goto nomem;
		return prompt_encode(&s->pv, t, tlen, spans, nspans, from, out,
		                     marks, err, errlen);
	}
	/* from scratch: BOS unless the template wrote it */
	return prompt_encode_prompt(&s->pv, t, tlen, spans, nspans, out, marks,
	                            err, errlen);
nomem:
	snprintf(err, errlen, "out of memory");
	return -1;
}

/* Move the window past the oldest turn. False when none can go. */
static bool session_drop_turn(struct session *s)
{
	size_t i = s->first, last_user = s->n_msgs;

	/* never drop the newest user message (the one being answered) */
	for (size_t k = s->n_msgs; k > s->first; k--)
		if (s->msgs[k - 1].role == STORE_ROLE_USER) {
			last_user = k - 1;
			break;
		}
	if (i >= last_user)
		return false;
	i++; /* the oldest message, then everything up to the next user one */
	while (i < last_user && s->msgs[i].role != STORE_ROLE_USER)
		i++;
	s->first = i;
	return true;
}

/* Tell the current reply's front end MSG (a notice), if it listens. */
static void session_cb_notice(struct session *s, const char *msg)
{
	if (s->cb && s->cb->notice)
		s->cb->notice(s->cb->ud, msg);
}

/*
 * Verify the eval of the last N ids of kv (when verifying): the step into
 * the reply's summary, a notice for the reply's first step over
 * tolerance. A failing reference is a notice and turns verification off:
 * the reply goes on unverified.
 */
static void session_verify_step(struct session *s, size_t n)
{
	struct verify_report r;
	char msg[400], note[512];

	if (s->ver == NULL)
		return;
	if (verify_step(s->ver, s->kv.v, (int32_t)s->kv.n, (int32_t)n, &r, msg,
	                sizeof(msg)) != 0) {
		verify_close(s->ver);
		s->ver = NULL;
		snprintf(note, sizeof(note), "%s; verification is off", msg);
		session_cb_notice(s, note);
		return;
	}
	if ((r.first_bad >= 0 || r.logits_bad) && s->vsum.n_bad == 0) {
		if (r.first_bad >= 0)
			snprintf(note, sizeof(note),
			         "verify: token at position %d: layer %d "
			         "differs from the CPU reference by %.3g (over "
			         "%g)",
			         r.pos, r.first_bad, r.first_bad_diff,
			         r.layer_tol);
		else
			snprintf(note, sizeof(note),
			         "verify: token at position %d: logits differ "
			         "from the CPU reference, NMSE %.3g (over %g)",
			         r.pos, r.logit_nmse, r.logit_tol);
		session_cb_notice(s, note);
	}
	verify_summary_add(&s->vsum, &r);
}

/* Evaluate IDS[0, n) at the end of the cache (chunks, interrupt checks).
   Returns 0, 1 when interrupted, -1 on error. */
int session_eval(struct session *s, const int32_t *ids, size_t n, char *err,
                 size_t errlen)
{
	size_t i = 0;

	while (i < n) {
		size_t c = n - i > SESSION_PREFILL_CHUNK ? SESSION_PREFILL_CHUNK
		                                         : n - i;

		if (session_cancelled(s))
			return 1;
		/* only the last chunk's last token needs logits */
		if (engine_eval(s->eng, ids + i, (int32_t)c,
		                i + c < n ? ENGINE_EVAL_NO_LOGITS : 0, err,
		                errlen))
			return -1;
		for (size_t k = 0; k < c; k++)
			if (tok_ids_push(&s->kv, ids[i + k])) {
				/* invariant 1: the engine forgets what kv
				   could not take */
				engine_truncate(s->eng, (int32_t)s->kv.n);
				snprintf(err, errlen, "out of memory");
				return -1;
			}
		s->n_evaluated += (int64_t)c;
		i += c;
		if (s->cb && s->cb->progress)
			s->cb->progress(s->cb->ud, (int32_t)i, (int32_t)n);
		assert(engine_n_past(s->eng) == (int32_t)s->kv.n); /* inv. 1 */
		session_verify_step(s, c);
	}
	return 0;
}

/*
 * Where the dropped turns were (step 3's shift): kv = kv[0, P) + a run of
 * D ids that left + the ids kept + what changed; IDS[0, n) = kv[0, P) +
 * the ids kept + the rest. The D that keeps the most ids (*M of them,
 * matched from IDS[P]), the smallest on a tie; 0 when none keeps any.
 * Bounded work: at most SESSION_SHIFT_BUDGET comparisons per cached id.
 */
static size_t session_shift_find(const struct tok_ids *kv, const int32_t *ids,
                                 size_t n, size_t p, size_t *m)
{
	size_t best = 0, budget = SESSION_SHIFT_BUDGET * kv->n + 64;

	*m = 0;
	for (size_t d = 1; p + d < kv->n && budget > 0; d++) {
		size_t k = 0, most = kv->n - p - d;

		if (most <= *m)
			break; /* a later run keeps fewer still */
		budget--;
		while (k < most && p + k < n && budget > 0 &&
		       kv->v[p + d + k] == ids[p + k]) {
			k++;
			budget--;
		}
		if (k > *m) {
			*m = k;
			best = d;
			if (k == most || p + k == n)
				break; /* nothing can keep more */
		}
	}
	return best;
}

/*
 * The context shift: the cache, kv[0, P) equal to IDS, loses the run of
 * turns that left (session_shift_find) and keeps what followed them, its
 * keys re-rotated (engine_kv_shift; the verifier's reference alike), so
 * that only the rest of IDS[0, n) is evaluated. kv follows the engine
 * (invariant 1), also when the engine refuses (a notice: the kept ids
 * are evaluated again) or fails. Returns the ids kept by it (0: none).
 */
static size_t session_kv_shift(struct session *s, const int32_t *ids, size_t n,
                               size_t p)
{
	size_t m = 0, d;
	char msg[300], note[400];

	if (!session_shifts(s))
		return 0;
	d = session_shift_find(&s->kv, ids, n, p, &m);
	if (d == 0)
		return 0;
	if (engine_kv_shift(s->eng, (int32_t)p, (int32_t)d, msg, sizeof(msg)) !=
	    0) {
		if ((size_t)engine_n_past(s->eng) < s->kv.n)
			s->kv.n = (size_t)engine_n_past(s->eng);
		snprintf(note, sizeof(note),
		         "context shift: %s; the kept turns are evaluated "
		         "again",
		         msg);
		session_cb_notice(s, note);
		return 0;
	}
	if (s->ver != NULL &&
	    verify_shift(s->ver, s->kv.v, (int32_t)s->kv.n, (int32_t)p,
	                 (int32_t)d, msg, sizeof(msg)) != 0) {
		verify_close(s->ver);
		s->ver = NULL;
		snprintf(note, sizeof(note), "%s; verification is off", msg);
		session_cb_notice(s, note);
	}
	memmove(s->kv.v + p, s->kv.v + p + d,
	        (s->kv.n - p - d) * sizeof(*s->kv.v));
	s->kv.n -= d;
	assert(engine_n_past(s->eng) == (int32_t)s->kv.n); /* invariant 1 */
	return m;
}

/*
 * Step 4, shared by a new turn and a shift: bring the cache to hold
 * exactly IDS[0, n). P = the longest common prefix of IDS and kv; when
 * the window MOVED (turns left) the cache is first shifted past them
 * where it can be (session_kv_shift), which lengthens P; the engine is
 * truncated to P and IDS[P, n) evaluated. When IDS is entirely in the
 * cache its last id is evaluated again (P = n - 1): its logits are what
 * the next token is sampled from.
 *
 * Invariant 1 (kv = exactly the ids whose K/V are in the cache) holds on
 * every return, also after an error or an interrupt: kv is cut to P with
 * the engine, and session_eval appends ids only once they are evaluated.
 * *REUSED gets P, *SHIFTED those of them the shift kept, *MS the time
 * spent shifting and evaluating; kv.n - P ids were evaluated. Returns 0,
 * 1 when interrupted, -1 on error.
 */
static int session_sync_kv(struct session *s, const int32_t *ids, size_t n,
                           bool moved, size_t *reused, size_t *again,
                           size_t *shifted, double *ms, char *err,
                           size_t errlen)
{
	size_t p, p0;
	double t0 = session_ms();
	int rc;

	for (p = 0; p < n && p < s->kv.n && ids[p] == s->kv.v[p]; p++)
		;
	p0 = p;
	*shifted = 0;
	if (moved && p < n && session_kv_shift(s, ids, n, p) > 0)
		for (; p < n && p < s->kv.n && ids[p] == s->kv.v[p]; p++)
			;
	if (p == n && p > 0)
		p--; /* re-evaluate the last id: its logits are needed */
	/* a recurrent state goes back only to a snapshot (engine.h): from
	   there the ids are evaluated again, and *REUSED says so */
	*again = p;
	p = (size_t)engine_rewind_point(s->eng, (int32_t)p);
	*again -= p;
	*reused = p;
	*shifted = p > p0 ? p - p0 : 0;
	*ms = 0;
	if (engine_truncate(s->eng, (int32_t)p)) {
		snprintf(err, errlen, "engine cannot truncate to %zu", p);
		return -1;
	}
	s->kv.n = p;
	assert(engine_n_past(s->eng) == (int32_t)s->kv.n); /* invariant 1 */
	/* with recurrent layers, or window layers keeping their window
	   only, a snapshot before the last id: a regenerate (the same
	   prompt) evaluates that one id again. Sliding-window layers keeping
	   every position (--full-window-cache) take the same two chunks:
	   on a GPU a chunk of one id is a mat-vec, a longer one a GEMM,
	   other roundings, and the option must change no reply */
	if ((engine_snapshots(s->eng) ||
	     (s->model != NULL &&
	      (s->model->cfg.features & MODEL_FEAT_ATTN_SLIDING))) &&
	    n - p > 1) {
		char msg[300];

		rc = session_eval(s, ids + p, n - p - 1, err, errlen);
		/* no room for a snapshot costs a regenerate its prompt, not
		   this turn: said, and the turn goes on */
		if (rc == 0 && engine_snapshot(s->eng, msg, sizeof(msg)) != 0)
			session_cb_notice(s, msg);
		if (rc == 0)
			rc = session_eval(s, ids + n - 1, 1, err, errlen);
	} else {
		rc = session_eval(s, ids + p, n - p, err, errlen);
	}
	*ms = session_ms() - t0;
	return rc;
}

/* Tell CB that DROPPED turns left a full context: SHIFTED ids kept by
 * shifting the cache, EVALUATED evaluated (those kept otherwise and the
 * new ones). */
static void session_full_notice(const struct session_cb *cb, int dropped,
                                size_t shifted, size_t evaluated)
{
	char msg[240];
	int k = snprintf(msg, sizeof(msg),
	                 "context full: the oldest %d turn%s left the context "
	                 "(still in the history); ",
	                 dropped, dropped == 1 ? "" : "s");

	if (shifted > 0)
		snprintf(msg + k, sizeof(msg) - (size_t)k,
		         "%zu tokens kept by shifting, %zu evaluated", shifted,
		         evaluated);
	else
		snprintf(msg + k, sizeof(msg) - (size_t)k,
		         "%zu tokens evaluated", evaluated);
	cb->notice(cb->ud, msg);
}

/*
 * Steps 1-4: render, fit, and bring the cache to the prompt followed by
 * EXTRA[0, n_extra) (a branch's reply ids up to the forced one; aligned
 * like sampled ids). Returns 0, 1 when interrupted during the prefill, -1
 * on error.
 */
int session_prepare(struct session *s, const struct session_cb *cb,
                    struct session_stats *st, const int32_t *extra,
                    size_t n_extra, char *err, size_t errlen)
{
	struct tok_ids ids = {0};
	struct prompt_marks marks = {0};
	struct tmpl_span *spans = NULL;
	char *t = NULL;
	size_t tlen = 0, nspans = 0, p = 0, again = 0, shifted = 0, prompt_n;
	int32_t n_ctx = engine_n_ctx(s->eng), reserve;
	double ms = 0;
	int rc = -1;

	reserve = s->n_predict > 0 ? s->n_predict : SESSION_MIN_REPLY;
	if (reserve > n_ctx / 2)
		reserve = n_ctx / 2;
	for (;;) {
		free(t);
		free(spans);
		t = NULL;
		spans = NULL;
		if (session_render(s, &t, &tlen, &spans, &nspans, err,
		                   errlen) ||
		    session_tokens(s, t, tlen, spans, nspans,
		                   st->n_dropped_turns > 0 && session_shifts(s),
		                   &ids, &marks, err, errlen))
			goto out;
		if ((int64_t)(ids.n + n_extra) + reserve <= n_ctx)
			break;
		if (!session_drop_turn(s)) {
			if ((int64_t)(ids.n + n_extra) < n_ctx)
				break; /* fits, with less room for the reply */
			snprintf(err, errlen,
			         "the prompt needs %zu tokens, the "
			         "context holds %d (use a larger --ctx or a "
			         "shorter message)",
			         ids.n + n_extra, n_ctx);
			goto out;
		}
		st->n_dropped_turns++;
	}
	prompt_n = ids.n;
	for (size_t k = 0; k < n_extra; k++)
		if (tok_ids_push(&ids, extra[k]))
			goto nomem;
	rc = session_sync_kv(s, ids.v, ids.n, st->n_dropped_turns > 0, &p,
	                     &again, &shifted, &ms, err, errlen);
	if (st->n_dropped_turns && cb && cb->notice)
		session_full_notice(cb, st->n_dropped_turns, shifted,
		                    s->kv.n - p);
	s->lp.n = 0; /* the prompt view's copy; none if out of memory */
	for (size_t i = 0; i < ids.n; i++)
		if (tok_ids_push(&s->lp, ids.v[i])) {
			s->lp.n = 0;
			break;
		}
	s->lp_reused = p;
	st->n_prompt = (int32_t)ids.n;
	st->n_reused = (int32_t)p;
	st->n_shifted = (int32_t)shifted;
	st->prefill_ms = ms;
	st->n_prompt_eval = (int32_t)(s->kv.n - p);
	st->n_reeval = (int32_t)again;
	if (again > 0 && cb && cb->notice) {
		char msg[200];

		/* (engine.h invariant 3: a recurrent state goes back to a
		   snapshot, sliding-window layers that keep their window
		   only to where they still hold it, else to 0) */
		snprintf(msg, sizeof(msg),
		         "%s at token %zu: %zu tokens the cache held were "
		         "evaluated again",
		         engine_recurrent(s->eng)
		             ? "the recurrent state went back to a snapshot"
		             : "the sliding-window layers' cache went back",
		         p, again);
		cb->notice(cb->ud, msg);
	}
	if (rc != 0)
		goto out;
	/* the cache now holds the prompt (and EXTRA): align to it */
	s->al_text.n = 0;
	if (tok_buf_append(&s->al_text, t, tlen))
		goto nomem;
	for (size_t k = 0; k < n_extra; k++) {
		size_t plen;
		const char *pc =
		    tok_piece(s->tok, extra[k], TOK_DECODE_SPECIAL, &plen);

		if (pc == NULL || tok_buf_append(&s->al_text, pc, plen) ||
		    prompt_marks_push(&marks, prompt_n + k + 1, s->al_text.n,
		                      s->pv.restart_anywhere ||
		                          tok_is_control(s->tok, extra[k])))
			goto nomem;
	}
	free(s->al_tok.v);
	free(s->al_marks.v);
	s->al_tok = ids;
	s->al_marks = marks;
	ids = (struct tok_ids){0};
	marks = (struct prompt_marks){0};
	goto out;
nomem:
	session_align_clear(s);
	snprintf(err, errlen, "out of memory");
	rc = -1;
out:
	free(ids.v);
	free(marks.v);
	free(t);
	free(spans);
	return rc;
}

/*
 * The context filled up in the middle of a reply: drop the oldest turns,
 * render the prompt again, put the reply's ids so far after it and
 * evaluate what the cache lacks (from the first dropped turn on); the
 * reply then goes on. *REPLY_AT (where the reply starts in kv) is updated.
 * Returns 0, 1 when no turn can be dropped (nothing changed), -1 on error.
 */
int session_shift(struct session *s, size_t *reply_at,
                  const struct session_cb *cb, struct session_stats *st,
                  char *err, size_t errlen)
{
	int32_t n_ctx = engine_n_ctx(s->eng);
	size_t nrep = s->kv.n - *reply_at, p = 0, k;
	struct tok_ids ids = {0};
	struct prompt_marks marks = {0};
	struct tmpl_span *spans = NULL;
	int32_t *rep = NULL;
	char *t = NULL;
	size_t tlen = 0, nspans = 0;
	int dropped = 0, rc = -1;

	rep = malloc((nrep ? nrep : 1) * sizeof(*rep));
	if (rep == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	memcpy(rep, s->kv.v + *reply_at, nrep * sizeof(*rep));
	for (;;) {
		if (!session_drop_turn(s)) {
			rc = 1;
			if (dropped == 0 || ids.n + nrep >= (size_t)n_ctx)
				goto out;
			break; /* fits, with little room left */
		}
		dropped++;
		free(t);
		free(spans);
		t = NULL;
		spans = NULL;
		if (session_render(s, &t, &tlen, &spans, &nspans, err,
		                   errlen) ||
		    session_tokens(s, t, tlen, spans, nspans, session_shifts(s),
		                   &ids, &marks, err, errlen))
			goto out;
		if (ids.n + nrep + SESSION_MIN_REPLY / 2 <= (size_t)n_ctx)
			break;
	}
	/* the new list: prompt ids, then the reply's ids with their pieces */
	size_t prompt_n = ids.n;

	s->al_text.n = 0;
	if (tok_buf_append(&s->al_text, t, tlen))
		goto nomem;
	for (k = 0; k < nrep; k++) {
		size_t plen;
		const char *pc =
		    tok_piece(s->tok, rep[k], TOK_DECODE_SPECIAL, &plen);

		if (tok_ids_push(&ids, rep[k]) ||
		    tok_buf_append(&s->al_text, pc, plen) ||
		    prompt_marks_push(&marks, ids.n, s->al_text.n,
		                      s->pv.restart_anywhere ||
		                          tok_is_control(s->tok, rep[k])))
			goto nomem;
	}
	double ms = 0;
	size_t again = 0, shifted = 0;
	int e = session_sync_kv(s, ids.v, ids.n, true, &p, &again, &shifted,
	                        &ms, err, errlen);

	st->prefill_ms += ms;
	st->n_prompt_eval += (int32_t)(s->kv.n - p);
	st->n_shifted += (int32_t)shifted;
	if (e != 0) {
		session_align_clear(s);
		rc = e > 0 ? 1 : -1;
		goto out;
	}
	free(s->al_tok.v);
	free(s->al_marks.v);
	s->al_tok = ids;
	s->al_marks = marks;
	ids = (struct tok_ids){0};
	marks = (struct prompt_marks){0};
	*reply_at = prompt_n;
	st->n_dropped_turns += dropped;
	if (cb && cb->notice)
		session_full_notice(cb, dropped, shifted, s->kv.n - p);
	rc = 0;
	goto out;
nomem:
	session_align_clear(s);
	snprintf(err, errlen, "out of memory");
	rc = -1;
out:
	free(rep);
	free(ids.v);
	free(marks.v);
	free(t);
	free(spans);
	return rc;
}

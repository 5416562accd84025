/*
 * t_session_shift.c - the context shift in the chat session (session.c
 * notes, step 3) with the real SmolLM2-135M-Instruct on the CPU, greedy,
 * small contexts; two sessions fed the same turns, one shifting (the
 * default), one with opts.no_context_shift (re-evaluation):
 *
 *   1. up to the first full context both are the same (replies, counts);
 *      at it both drop the same turn; the shifting one keeps the kept
 *      turns' ids as they are cached (the sampled ids of their replies),
 *      the other encodes their text again: where those are the same ids
 *      (SmolLM2's greedy replies) the prompts are the same and the
 *      shifting one evaluates exactly the ids the shift kept fewer
 *      (n_prompt_eval + n_shifted = the other's n_prompt_eval; n_reused
 *      more by as many), else (a random model's replies) fewer; the kept
 *      turns are not evaluated (more shifted than evaluated); its notice
 *      says how many were kept by shifting and how many evaluated, the
 *      other's says only what was evaluated; the reply comes; later full
 *      contexts shift too, the other never; the caches stay within the
 *      context;
 *   2. the context fills in the middle of a reply: the reply goes on in
 *      both, the shifting one evaluating fewer ids by exactly the count
 *      it kept;
 *   3. with --verify (session opts.verify) the CPU reference shifts as
 *      the engine does: verification stays on through the shift and no
 *      step of the turn is over its bounds.
 *
 * Model: $PARLEY_TEST_MODEL or the cache's SmolLM2 (testenv.h); skipped
 * when absent.
 */
#include "testenv.h"
#include "session.h"
#include "sink_util.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char model[4096];

/* Greedy, one thread, N_CTX positions, replies of N_PREDICT; SHIFT. */
static struct session_opts opts(int32_t n_ctx, int32_t n_predict, bool shift)
{
	struct session_opts o;

	memset(&o, 0, sizeof(o));
	o.model_path = model;
	sampler_config_default(&o.sampling);
	o.sampling.temperature = 0;
	o.n_ctx = n_ctx;
	o.n_threads = 1;
	o.backend = getenv("PARLEY_TEST_BACKEND");
	o.n_predict = n_predict;
	o.system_prompt = "You are a helpful assistant.";
	o.no_context_shift = !shift;
	return o;
}

/* Notices that told of a shift, since the last send. */
static int shift_notices;

/* sink_notice, counting shift_notices. */
static void notice(void *ud, const char *msg)
{
	shift_notices += strstr(msg, "kept by shifting") != NULL;
	sink_notice(ud, msg);
}

/* Send TEXT; the reply and notices into K (reset first). 0 or -1. */
static int send(struct session *s, const char *text, struct sink *k,
                struct session_stats *st)
{
	struct session_cb cb = {sink_piece, NULL, notice, k, NULL, NULL};
	char err[512];

	shift_notices = 0;
	k->n = 0;
	k->buf[0] = '\0';
	k->notices = 0;
	k->notice[0] = '\0';
	memset(st, 0, sizeof(*st));
	if (session_send(s, text, strlen(text), &cb, st, err, sizeof(err))) {
		tap_diag("session_send: %s", err);
		return -1;
	}
	return 0;
}

/* 1: turns through a 192-token context, shifting and not. */
static void test_turns(void)
{
	struct session_opts oa = opts(192, 16, true), ob = opts(192, 16, false);
	struct session *a = sink_session_open(&oa), *b = sink_session_open(&ob);
	struct session_stats sa, sb;
	struct sink ka = {0}, kb = {0};
	int fails = 0, first = -1, drops_a = 0, shifts_a = 0, shifts_b = 0;
	bool same_before = true, fits = true;
	size_t n;

	for (int i = 0; i < 10; i++) {
		fails += send(a, sink_questions[i], &ka, &sa) != 0;
		fails += send(b, sink_questions[i], &kb, &sb) != 0;
		session_kv_tokens(a, &n);
		fits = fits && n <= 192;
		session_kv_tokens(b, &n);
		fits = fits && n <= 192;
		drops_a += sa.n_dropped_turns > 0;
		shifts_a += sa.n_dropped_turns > 0 && sa.n_shifted > 0;
		shifts_b += sb.n_shifted > 0;
		if (first < 0 && sa.n_dropped_turns == 0)
			same_before = same_before &&
			              strcmp(ka.buf, kb.buf) == 0 &&
			              sa.n_prompt_eval == sb.n_prompt_eval;
		if (first >= 0 || sa.n_dropped_turns == 0)
			continue;
		first = i;
		tap_ok(same_before,
		       "before the context filled (turns 1..%d) both sessions "
		       "gave the same replies and counts",
		       i);
		tap_ok(sb.n_dropped_turns == sa.n_dropped_turns,
		       "turn %d: both dropped %d turn(s); prompts of %d and %d "
		       "tokens",
		       i + 1, sa.n_dropped_turns, sa.n_prompt, sb.n_prompt);
		/* the shifting session keeps the kept replies' sampled ids
		   (session_tokens_gap), the other encodes their text again:
		   the same ids where the model sampled the tokenizer's own
		   split (SmolLM2 here), then the counts add up exactly */
		if (sa.n_prompt == sb.n_prompt)
			tap_ok(
			    sa.n_shifted > 0 && sb.n_shifted == 0 &&
			        sa.n_prompt_eval + sa.n_shifted ==
			            sb.n_prompt_eval &&
			        sa.n_reused == sb.n_reused + sa.n_shifted &&
			        sa.n_prompt_eval == sa.n_prompt - sa.n_reused,
			    "turn %d: shifting kept %d ids and evaluated %d; "
			    "re-evaluation evaluated %d (reused %d vs %d)",
			    i + 1, sa.n_shifted, sa.n_prompt_eval,
			    sb.n_prompt_eval, sa.n_reused, sb.n_reused);
		else
			tap_ok(sa.n_shifted > 0 && sb.n_shifted == 0 &&
			           sa.n_prompt_eval < sb.n_prompt_eval &&
			           sa.n_prompt_eval ==
			               sa.n_prompt - sa.n_reused,
			       "turn %d (the sampled replies encode otherwise "
			       "today): shifting kept %d ids and evaluated %d; "
			       "re-evaluation evaluated %d",
			       i + 1, sa.n_shifted, sa.n_prompt_eval,
			       sb.n_prompt_eval);
		tap_ok(sa.n_shifted > sa.n_prompt_eval,
		       "turn %d: the kept turns were not evaluated again: %d "
		       "shifted > %d evaluated",
		       i + 1, sa.n_shifted, sa.n_prompt_eval);
		char want[128];

		snprintf(want, sizeof(want),
		         "%d tokens kept by shifting, %d evaluated",
		         sa.n_shifted, sa.n_prompt_eval);
		tap_ok(ka.notices == 1 && strstr(ka.notice, "context full") &&
		           strstr(ka.notice, want),
		       "turn %d: the notice says so: \"%s\"", i + 1, ka.notice);
		snprintf(want, sizeof(want), "); %d tokens evaluated",
		         sb.n_prompt_eval);
		tap_ok(kb.notices == 1 && strstr(kb.notice, want) &&
		           !strstr(kb.notice, "shifting"),
		       "turn %d, no shift: \"%s\"", i + 1, kb.notice);
		tap_ok(sa.n_gen > 0 && sa.finish != STORE_FINISH_ERROR,
		       "turn %d: the reply came after the shift (%d tokens; "
		       "%s the re-evaluated session's)",
		       i + 1, sa.n_gen,
		       strcmp(ka.buf, kb.buf) == 0 ? "the same as"
		                                   : "other than");
	}
	tap_ok(fails == 0 && fits && first >= 0,
	       "10 turns in a 192-token context each: no failure, the caches "
	       "within it");
	tap_ok(drops_a > 1 && shifts_a == drops_a && shifts_b == 0,
	       "every full context of the shifting session shifted (%d of %d), "
	       "none of the other's (%d)",
	       shifts_a, drops_a, shifts_b);
	session_close(a);
	session_close(b);
}

/* 2: the context fills in the middle of a reply. */
static void test_mid_reply(void)
{
	struct session_stats st[2];
	struct sink k[2] = {0};
	size_t kvn[2];
	int told[2];

	for (int v = 0; v < 2; v++) {
		struct session_opts o = opts(160, 8, v == 0);
		struct session *s = sink_session_open(&o);

		send(s, sink_questions[0], &k[v], &st[v]);
		session_set_n_predict(s, 0); /* until the context is full */
		send(s, "Write a long story about a dragon and a knight.",
		     &k[v], &st[v]);
		told[v] = shift_notices;
		session_kv_tokens(s, &kvn[v]);
		session_close(s);
	}
	tap_ok(st[0].n_dropped_turns == 1 && st[1].n_dropped_turns == 1 &&
	           st[0].finish == STORE_FINISH_LENGTH &&
	           st[1].finish == STORE_FINISH_LENGTH &&
	           st[0].n_gen > 160 - st[0].n_prompt && kvn[0] <= 160 &&
	           kvn[1] <= 160,
	       "mid-reply: both replies went on past the room they started "
	       "with (%d, %d tokens), caches %zu, %zu <= 160",
	       st[0].n_gen, st[1].n_gen, kvn[0], kvn[1]);
	tap_ok(st[0].n_shifted > 0 && st[1].n_shifted == 0 &&
	           st[0].n_prompt_eval + st[0].n_shifted ==
	               st[1].n_prompt_eval &&
	           told[0] == 1 && told[1] == 0,
	       "mid-reply: the shift kept %d ids, evaluated %d in all "
	       "against %d; %d notice of it (%d without the shift)",
	       st[0].n_shifted, st[0].n_prompt_eval, st[1].n_prompt_eval,
	       told[0], told[1]);
}

/* 3: verification through a shift. */
static void test_verify(void)
{
	struct session_opts o = opts(192, 16, true);
	struct session_stats st;
	struct sink k = {0};
	struct session *s;
	int i;

	o.verify = true;
	s = sink_session_open(&o);
	for (i = 0; i < 10; i++)
		if (send(s, sink_questions[i], &k, &st) != 0 ||
		    st.n_dropped_turns > 0)
			break;
	tap_ok(i < 10 && st.n_shifted > 0 && session_verifying(s) &&
	           st.verify.n_checked > 0 && st.verify.n_bad == 0,
	       "verify: turn %d shifted %d ids; verification still on, %d "
	       "steps checked, %d over the bounds (worst layer difference "
	       "%.3g, logit NMSE %.3g)",
	       i + 1, st.n_shifted, st.verify.n_checked, st.verify.n_bad,
	       st.verify.worst_diff, st.verify.max_nmse);
	session_close(s);
}

int main(void)
{
	testenv_model(model, sizeof(model));
	if (access(model, R_OK) != 0)
		return tap_skip_all("model file not found (PARLEY_TEST_MODEL)");
	test_turns();
	test_mid_reply();
	test_verify();
	return tap_done();
}

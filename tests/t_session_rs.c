/*
 * t_session_rs.c - the chat session's promises on a model with recurrent
 * layers (issue 31 item 2): a Qwen3.5-shaped model of random weights
 * (written at test time by tests/parley-mkmodel) with SmolLM2's tokenizer
 * and chat template, greedy decoding, on the CPU (PARLEY_TEST_BACKEND:
 * another engine). A recurrent state cannot be cut back like a KV cache:
 * the engine keeps snapshots where the session returns (the end of each
 * turn, before the prompt's last id), and each flow must give exactly the
 * replies of a session that never cut anything:
 *
 *   1. turns: each evaluates only its new ids (nothing evaluated again);
 *      over 10 turns each reply is that of a fresh session asked so;
 *   2. regenerate: the same reply, one id evaluated (the snapshot before
 *      the prompt's last id);
 *   3. edit the last message: the reply of a fresh session asked the
 *      edited conversation; what was evaluated again is counted and told;
 *   4. branch at a token of a reply, forcing the token chosen there: the
 *      same reply; the ids evaluated again from the snapshot are counted,
 *      only the forced one is new;
 *   5. resume with the saved state (the live state and its snapshots):
 *      a regenerate evaluates one id, the next turn's reply is that of a
 *      session that never stopped;
 *   6. context full: the oldest turns leave, the prompt differs from the
 *      cache right after the system prompt, where no snapshot is: the
 *      state goes back to the start and the whole prompt is evaluated,
 *      the ids the cache held counted as evaluated again.
 *
 * Skipped without the SmolLM2 model (its tokenizer and template).
 * PARLEY_TEST_RS_MODEL names another such model (1-5 run on it, but the
 * ten turns' check).
 */
#include "testenv.h"
#include "session.h"
#include "store.h"
#include "sink_util.h"
#include "store_util.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char model[512];

static struct session_opts base_opts(int32_t n_ctx)
{
	return sink_opts(model, n_ctx, 10);
}

static const char *const questions[10] = {"What is the capital of France?",
                                          "And of Germany?",
                                          "Name a color.",
                                          "What is 2 + 2?",
                                          "Say hello.",
                                          "Name a fruit.",
                                          "And a vegetable?",
                                          "Count to three.",
                                          "Which is larger, 7 or 9?",
                                          "Thank you."};

/* The reply a fresh session gives after asking Q[0..n). */
static void fresh_reply(const char *const *q, int n, int32_t n_ctx, char *out,
                        size_t len)
{
	struct session_opts o = base_opts(n_ctx);
	struct session *s = sink_session_open(&o);
	struct session_stats st;
	static struct sink k;

	out[0] = '\0';
	for (int i = 0; i < n; i++)
		if (sink_send(s, q[i], &k, &st) != 0)
			break;
	snprintf(out, len, "%s", k.buf);
	session_close(s);
}

/* 1-3. */
static void test_turns(void)
{
	struct session_opts o = base_opts(2048);
	struct session *s = sink_session_open(&o);
	struct session_stats st;
	static struct sink k;
	static char last[8192], ref[8192];
	size_t kvn = 0, prev = 0;
	int64_t dropped = 0; /* ids evaluated, then dropped after a
	                        broken reply */
	bool once = true;
	char err[512];

	for (int i = 0; i < 4; i++) {
		/* a reply that ends inside a character (a random model's
		   can: its text holds U+FFFD) is other tokens in the next
		   prompt: the state then goes back to that turn's snapshot */
		const bool broken = i > 0 && strstr(k.buf, "\xEF\xBF\xBD");

		if (sink_send(s, questions[i], &k, &st) != 0)
			break;
		session_kv_tokens(s, &kvn);
		tap_diag("turn %d: prompt %d reused %d evaluated %d again %d, "
		         "reply %d \"%s\"%s",
		         i + 1, st.n_prompt, st.n_reused, st.n_prompt_eval,
		         st.n_reeval, st.n_gen, k.buf,
		         broken ? " (the reply before holds U+FFFD)" : "");
		if ((!broken &&
		     ((size_t)st.n_reused != prev || st.n_reeval != 0)) ||
		    st.n_prompt_eval != st.n_prompt - st.n_reused)
			once = false;
		if (broken) /* ids the cache held past what was reused */
			dropped += (int64_t)prev - st.n_reused;
		prev = kvn;
	}
	tap_ok(once && session_n_evaluated(s) == (int64_t)kvn + dropped,
	       "4 turns: each reuses the whole cache of the one before, "
	       "nothing evaluated again (%lld ids evaluated, %zu in the "
	       "cache)",
	       (long long)session_n_evaluated(s), kvn);

	/* 2 */
	snprintf(last, sizeof(last), "%s", k.buf);
	{
		struct session_cb cb = sink_cb(&k);
		int rc = session_regen(s, &cb, &st, err, sizeof(err));

		tap_ok(rc == 0 && strcmp(k.buf, last) == 0 &&
		           st.n_prompt_eval == 1 && st.n_reeval == 0,
		       "regenerate: the same reply, %d id evaluated (the "
		       "snapshot before the prompt's last)",
		       st.n_prompt_eval);
	}

	/* 3 */
	{
		struct session_cb cb = sink_cb(&k);
		static const char *const edited[4] = {
		    "What is the capital of France?", "And of Germany?",
		    "Name a color.", "Name a fruit."};
		int rc = session_edit_last(s, edited[3], strlen(edited[3]), &cb,
		                           &st, err, sizeof(err));

		snprintf(last, sizeof(last), "%s", k.buf);
		fresh_reply(edited, 4, 2048, ref, sizeof(ref));
		tap_ok(rc == 0 && strcmp(last, ref) == 0,
		       "edit the last message: the reply of a fresh session "
		       "asked so: \"%s\"",
		       last);
		tap_ok(st.n_prompt_eval == st.n_prompt - st.n_reused &&
		           st.n_prompt_eval < st.n_prompt / 2 &&
		           (st.n_reeval == 0 ||
		            strstr(k.notice, "evaluated again") != NULL),
		       "edit: %d of %d ids evaluated, %d of them again (told)",
		       st.n_prompt_eval, st.n_prompt, st.n_reeval);
	}
	session_close(s);
}

/* 1b. Ten turns, each reply that of a fresh session asked the same. */
static void test_ten_turns(void)
{
	struct session_opts o = base_opts(2048);
	struct session *s = sink_session_open(&o);
	struct session_stats st;
	static struct sink k;
	static char ref[8192];
	int same = 0, n = 0;

	for (int i = 0; i < 10; i++, n++) {
		if (sink_send(s, questions[i], &k, &st) != 0)
			break;
		fresh_reply(questions, i + 1, 2048, ref, sizeof(ref));
		if (strcmp(k.buf, ref) == 0)
			same++;
		else
			tap_diag("turn %d: \"%s\", a fresh session \"%s\"",
			         i + 1, k.buf, ref);
	}
	tap_ok(n == 10 && same == 10,
	       "10 turns: %d of %d replies are a fresh session's", same, n);
	session_close(s);
}

/* 4. */
static void test_branch(void)
{
	char path[512], err[512];
	struct store *db = new_db(path, sizeof(path));
	struct session_opts o = base_opts(2048);
	struct session_stats st;
	static struct sink k;
	static char old[8192];
	struct sampler_report *rep = NULL;
	size_t nm, nr = 0;
	const int32_t at = 4;
	struct session *s;

	if (db == NULL)
		return;
	o.store = db;
	o.store_reports = true;
	s = sink_session_open(&o);
	sink_send(s, questions[0], &k, &st);
	sink_send(s, questions[1], &k, &st);
	snprintf(old, sizeof(old), "%s", k.buf);
	session_messages(s, &nm);
	{
		int rc =
		    session_msg_reports(s, nm - 1, &rep, &nr, err, sizeof(err));

		if (!tap_ok(rc == 0 && nr > (size_t)at,
		            "%zu reports of the last reply %s", nr, err))
			goto out;
	}
	{
		struct session_cb cb = sink_cb(&k);
		int rc = session_branch_at(s, nm - 1, at, rep[at].chosen, &cb,
		                           &st, err, sizeof(err));

		tap_ok(rc == 0 && strcmp(k.buf, old) == 0,
		       "branch at token %d forcing the token chosen there: the "
		       "same reply \"%s\" %s",
		       at, k.buf, rc ? err : "");
		tap_ok(st.n_reeval == at + 1 &&
		           st.n_prompt_eval == st.n_reeval + 1 &&
		           strstr(k.notice, "evaluated again") != NULL,
		       "branch: back to the snapshot before the prompt's last "
		       "id, %d ids evaluated again (told), 1 new (%d in all)",
		       st.n_reeval, st.n_prompt_eval);
	}
out:
	free(rep);
	session_close(s);
	drop_db(db, path);
}

/* 5. */
static void test_resume(void)
{
	char path[512];
	struct store *db = new_db(path, sizeof(path));
	struct session_opts o = base_opts(2048);
	struct session_stats st;
	static struct sink k;
	static char second[8192], straight[8192];
	struct session *s;
	bool loaded = false;
	char err[512];

	if (db == NULL)
		return;
	fresh_reply(questions, 3, 2048, straight, sizeof(straight));
	o.store = db;
	o.use_kv_slot = true;
	s = sink_session_open(&o);
	sink_send(s, questions[0], &k, &st);
	sink_send(s, questions[1], &k, &st);
	snprintf(second, sizeof(second), "%s", k.buf);
	o.conv_id = session_conv_id(s);
	session_close(s); /* saves the state */
	o.system_prompt = NULL;
	s = sink_session_open(&o);
	session_restore_ms(s, &loaded);
	{
		struct session_cb cb = sink_cb(&k);
		int rc = session_regen(s, &cb, &st, err, sizeof(err));

		tap_ok(loaded && rc == 0 && strcmp(k.buf, second) == 0 &&
		           st.n_prompt_eval == 1,
		       "resumed with the saved state (loaded %d): regenerate "
		       "gives the same reply, %d id evaluated (its snapshot "
		       "came back with it)",
		       loaded, st.n_prompt_eval);
	}
	sink_send(s, questions[2], &k, &st);
	tap_ok(strcmp(k.buf, straight) == 0 && st.n_reeval == 0,
	       "the next turn: the reply of a session that never stopped, "
	       "nothing evaluated again (%d reused)",
	       st.n_reused);
	session_close(s);
	drop_db(db, path);
}

/* 6. */
static void test_overflow(void)
{
	struct session_opts o = base_opts(128);
	struct session *s = sink_session_open(&o);
	struct session_stats st;
	static struct sink k;
	bool dropped = false, ok = true;
	int i;

	for (i = 0; i < 6 && !dropped; i++) {
		if (sink_send(s, questions[i], &k, &st) != 0) {
			ok = false;
			break;
		}
		dropped = st.n_dropped_turns > 0;
	}
	tap_ok(ok && dropped && st.n_reused == 0 && st.n_reeval > 0 &&
	           st.n_prompt_eval == st.n_prompt,
	       "context full at turn %d: %d turns left, the state went back "
	       "to the start (%d ids the cache held evaluated again)",
	       i, st.n_dropped_turns, st.n_reeval);
	session_close(s);
}

int main(void)
{
	char src[512], cmd[2048];
	const char *bd = getenv("top_builddir");

	/* PARLEY_TEST_RS_MODEL: a recurrent model with a tokenizer and a
	 * chat template made elsewhere (a real model's shape on the GPU
	 * machine: bench/session-shapes.sh) instead of the small one */
	const char *given = getenv("PARLEY_TEST_RS_MODEL");

	if (given != NULL && given[0] != '\0') {
		snprintf(model, sizeof(model), "%s", given);
		test_turns(); /* (not the 55 sessions of the ten turns' check:
		                 t_tui_recurrent.sh checks ten turns there) */
		test_branch();
		test_resume();
		return tap_done();
	}
	testenv_model(src, sizeof(src));
	if (access(src, R_OK) != 0)
		return tap_skip_all("no SmolLM2 model (its tokenizer)");
	snprintf(model, sizeof(model), "/tmp/t_session_rs_%d.gguf",
	         (int)getpid());
	snprintf(
	    cmd, sizeof(cmd),
	    "%s/tests/parley-mkmodel --arch qwen35 --tokenizer-from %s "
	    "--type Q8_0 --embd-type Q8_0 --tied --n-embd 64 --n-ff 128 "
	    "--n-layer 4 --n-head 4 --n-head-kv 2 --head-dim 32 --n-rot 16 "
	    "--ssm-state-size 32 --ssm-group-count 2 "
	    "--ssm-time-step-rank 4 --full-attention-interval 2 "
	    "--out-norm-scale 8 --seed 3 -o %s >/dev/null",
	    bd ? bd : ".", src, model);
	if (!tap_ok(system(cmd) == 0, "parley-mkmodel: a qwen35 model with "
	                              "SmolLM2's tokenizer"))
		return tap_done();
	test_turns();
	test_ten_turns();
	test_branch();
	test_resume();
	test_overflow();
	unlink(model);
	return tap_done();
}

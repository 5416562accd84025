/*
 * t_session_window.c - the chat session's promises where sliding-window
 * layers keep only their window (engine.h invariant 3, the CPU's
 * default): a Gemma 3-shaped model of random weights (written at test
 * time by tests/parley-mkmodel: window 8 on every other layer) with
 * SmolLM2's tokenizer and chat template, greedy. Each flow runs on a
 * session whose window layers keep their window, a chunk and a slack of
 * 4 (rows of 8 + 64 + 2 x 4 in a context of 1024: they move down every
 * 68 tokens or so) and on one that keeps every position
 * (--full-window-cache), and must give exactly its replies (of 96 tokens:
 * longer than the rows, so a reply's start is never held after it):
 *
 *   1. six turns: the same replies; each turn evaluates only its new ids
 *      (the window never goes back between turns);
 *   2. regenerate: the same reply, one id evaluated: the window layers'
 *      rows no longer hold the prompt's end (the reply is longer than
 *      they are), the window snapshot taken before its last id does;
 *   3. edit the last message: the same reply;
 *   4. branch at a token of the last reply, forcing the token chosen
 *      there: the same reply (on a GPU, or one parting at a near tie:
 *      same_reply), from the snapshot before the prompt's last
 *      id (told); at a token of the first reply, whose snapshot is gone
 *      (8 are kept): from the start (told);
 *   5. resume with the saved state (its window layers from where they
 *      start): a regenerate gives the full session's reply, and so does
 *      the next turn, nothing evaluated again;
 *   6. context full: the oldest turns leave. Evaluated again
 *      (--no-context-shift): the replies of a full session doing so; shifted
 *      (the default: the window layers' rows are all past the dropped
 *      turns, so the shift turns their keys where they are): the replies
 *      of a full session shifting.
 *
 * Skipped without the SmolLM2 model (its tokenizer and template). On the
 * CPU engine, or PARLEY_TEST_BACKEND's (cuda: its ring, backend_cuda.cu).
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

/* Options of the session that keeps the window only (FULL false) or
 * every position. */
static struct session_opts base_opts(bool full, int32_t n_ctx)
{
	struct session_opts o = sink_opts(model, n_ctx, 96);

	o.full_window_cache = full;
	o.window_slack = 4;
	o.n_batch = 64; /* (the CPU's: a GPU's 512 would make rows longer
	                   than the replies) */
	return o;
}

/* Two sessions (window only, every position) on one store each. */
struct pair {
	struct session *s[2];
	struct store *db[2];
	char path[2][512];
	struct sink k[2];
	struct session_stats st[2];
};

static void pair_open(struct pair *p, int32_t n_ctx, bool store, bool no_shift)
{
	memset(p, 0, sizeof(*p));
	for (int i = 0; i < 2; i++) {
		struct session_opts o = base_opts(i == 1, n_ctx);

		if (store) {
			p->db[i] = new_db(p->path[i], sizeof(p->path[i]));
			o.store = p->db[i];
			o.store_reports = true;
			o.use_kv_slot = true;
		}
		o.no_context_shift = no_shift;
		p->s[i] = sink_session_open(&o);
	}
}

static void pair_close(struct pair *p)
{
	for (int i = 0; i < 2; i++) {
		session_close(p->s[i]);
		if (p->db[i] != NULL)
			drop_db(p->db[i], p->path[i]);
	}
}

/* Both send TEXT: 1 when their replies are the same. */
static int pair_send(struct pair *p, const char *text)
{
	for (int i = 0; i < 2; i++)
		if (sink_send(p->s[i], text, &p->k[i], &p->st[i]) != 0)
			return 0;
	return strcmp(p->k[0].buf, p->k[1].buf) == 0;
}

/* Near tie: cuda_parity's line, in logit. */
#define NEAR_TIE 0.1f

/*
 * Whether the two sessions' replies, message I of each, are the same; on
 * a GPU also when they part at a near tie: the ring session evaluated
 * some of the reply's ids again as one chunk (a GEMM and the batch
 * attention) where they were decode steps (a mat-vec, the split
 * attention), other roundings, so where the full session's two best
 * logits were within NEAR_TIE the ring's may choose the second (and the
 * rest of the reply follows that choice: not compared). WHY: where they
 * parted.
 */
static bool same_reply(struct pair *p, size_t i, char *why, size_t len)
{
	const char *b = getenv("PARLEY_TEST_BACKEND");
	struct sampler_report *r[2] = {NULL, NULL};
	size_t n[2] = {0, 0}, j = 0;
	bool near = false;
	char err[256];

	snprintf(why, len, "the same");
	if (strcmp(p->k[0].buf, p->k[1].buf) == 0)
		return true;
	snprintf(why, len, "not the same");
	if (b == NULL || strcmp(b, "cpu") == 0)
		return false;
	if (session_msg_reports(p->s[0], i, &r[0], &n[0], err, sizeof(err)) ==
	        0 &&
	    session_msg_reports(p->s[1], i, &r[1], &n[1], err, sizeof(err)) ==
	        0) {
		while (j < n[0] && j < n[1] && r[0][j].chosen == r[1][j].chosen)
			j++;
		if (j < n[0] && j < n[1] && r[1][j].n_top >= 2) {
			const float gap =
			    r[1][j].top[0].logit - r[1][j].top[1].logit;

			near = gap <= NEAR_TIE &&
			       r[0][j].chosen == r[1][j].top[1].id;
			snprintf(why, len,
			         "parted at token %zu, the full session's two "
			         "best %.4g apart%s",
			         j, (double)gap, near ? " (a near tie)" : "");
		}
	}
	free(r[0]);
	free(r[1]);
	return near;
}

/* 4: both sessions branch at token 4 of their last reply (or the FIRST
 * one), forcing the token chosen there. */
static void branch(struct pair *p, bool first)
{
	struct sampler_report *rep = NULL;
	const struct session_msg *m = NULL;
	size_t nm = 0, nr = 0, at_msg = 0;
	const int32_t at = 4;
	char err[512];
	int rc[2] = {-1, -1};

	m = session_messages(p->s[0], &nm);
	for (size_t i = 0; i < nm; i++)
		if (m[i].role == STORE_ROLE_ASSISTANT) {
			at_msg = i;
			if (first)
				break;
		}
	if (!tap_ok(session_msg_reports(p->s[0], at_msg, &rep, &nr, err,
	                                sizeof(err)) == 0 &&
	                nr > (size_t)at,
	            "%s reply (message %zu): its reports",
	            first ? "the first" : "the last", at_msg)) {
		free(rep);
		return;
	}
	for (int i = 0; i < 2; i++) {
		struct session_cb cb = sink_cb(&p->k[i]);

		rc[i] = session_branch_at(p->s[i], at_msg, at, rep[at].chosen,
		                          &cb, &p->st[i], err, sizeof(err));
	}
	char why[160] = "";
	const bool same =
	    rc[0] == 0 && rc[1] == 0 && same_reply(p, at_msg, why, sizeof(why));

	tap_ok(same && p->st[1].n_reeval == 0 &&
	           (first ? p->st[0].n_reused == 0 && p->st[0].n_reeval > 0
	                  : p->st[0].n_reeval == at + 1) &&
	           strstr(p->k[0].notice, "sliding-window") != NULL,
	       "branch at token %d of the %s reply forcing its token: the "
	       "same reply (%s); %d ids evaluated again from %s (told), every "
	       "position's %d",
	       at, first ? "first" : "last", why, p->st[0].n_reeval,
	       first ? "the start" : "the snapshot before the prompt's last id",
	       p->st[1].n_reeval);
	free(rep);
}

/* 1-4. */
static void test_flows(void)
{
	struct pair p;
	int same = 0, only_new = 0;
	char err[512];

	pair_open(&p, 1024, true, false);
	for (int i = 0; i < 6; i++) {
		same += pair_send(&p, sink_questions[i]);
		only_new += p.st[0].n_reeval == 0 &&
		            p.st[0].n_prompt_eval ==
		                p.st[0].n_prompt - p.st[0].n_reused &&
		            p.st[0].n_reused == p.st[1].n_reused;
		tap_diag("turn %d: prompt %d reused %d evaluated %d; \"%s\"",
		         i + 1, p.st[0].n_prompt, p.st[0].n_reused,
		         p.st[0].n_prompt_eval, p.k[0].buf);
	}
	tap_ok(same == 6 && only_new == 6,
	       "6 turns: %d replies the same as every position's, %d "
	       "evaluating only their new ids",
	       same, only_new);

	/* 2 */
	int rc[2];
	for (int i = 0; i < 2; i++) {
		struct session_cb cb = sink_cb(&p.k[i]);

		rc[i] = session_regen(p.s[i], &cb, &p.st[i], err, sizeof(err));
	}
	tap_ok(rc[0] == 0 && rc[1] == 0 &&
	           strcmp(p.k[0].buf, p.k[1].buf) == 0 &&
	           p.st[0].n_prompt_eval == 1 && p.st[0].n_reeval == 0 &&
	           p.st[1].n_prompt_eval == 1,
	       "regenerate: the same reply, 1 id evaluated (the window "
	       "snapshot before the prompt's last id; the rows no longer hold "
	       "it: the reply is longer than they are)");

	/* 3 */
	for (int i = 0; i < 2; i++) {
		struct session_cb cb = sink_cb(&p.k[i]);

		rc[i] = session_edit_last(p.s[i], sink_questions[7],
		                          strlen(sink_questions[7]), &cb,
		                          &p.st[i], err, sizeof(err));
	}
	tap_ok(rc[0] == 0 && rc[1] == 0 && strcmp(p.k[0].buf, p.k[1].buf) == 0,
	       "edit the last message: the same reply \"%s\"", p.k[0].buf);

	/* 4: in the last reply (back to the snapshot before its prompt's
	   last id), then in the first (past every snapshot kept) */
	branch(&p, false);
	branch(&p, true);
	pair_close(&p);
}

/* 5. */
static void test_resume(void)
{
	char path[512], err[512];
	struct store *db = new_db(path, sizeof(path));
	struct session_opts o = base_opts(false, 1024);
	struct pair ref;
	struct session *s;
	static struct sink k;
	struct session_stats st;
	bool loaded = false;

	if (db == NULL)
		return;
	pair_open(&ref, 1024, false, false);
	for (int i = 0; i < 4; i++)
		pair_send(&ref, sink_questions[i]);
	o.store = db;
	o.use_kv_slot = true;
	s = sink_session_open(&o);
	for (int i = 0; i < 3; i++)
		sink_send(s, sink_questions[i], &k, &st);
	o.conv_id = session_conv_id(s);
	session_close(s); /* saves the state */
	o.system_prompt = NULL;
	s = sink_session_open(&o);
	session_restore_ms(s, &loaded);
	sink_send(s, sink_questions[3], &k, &st);
	tap_ok(loaded && strcmp(k.buf, ref.k[1].buf) == 0 && st.n_reeval == 0,
	       "resumed with the saved state (loaded %d): the next turn is "
	       "every position's, nothing evaluated again (%d reused)",
	       loaded, st.n_reused);
	{
		struct session_cb cb = sink_cb(&k);
		struct session_cb cr = sink_cb(&ref.k[1]);
		int rc = session_regen(s, &cb, &st, err, sizeof(err));

		session_regen(ref.s[1], &cr, &ref.st[1], err, sizeof(err));
		tap_ok(rc == 0 && strcmp(k.buf, ref.k[1].buf) == 0,
		       "and a regenerate: the same reply (%d evaluated again)",
		       st.n_reeval);
	}
	session_close(s);
	drop_db(db, path);
	pair_close(&ref);
}

/* 6: turns until the oldest leaves a context of 320, both sessions
 * shifting the kept turns' cache (SHIFT) or evaluating them again. */
static void test_overflow(bool shift)
{
	struct pair p;
	bool dropped = false;
	int same = 0, i;

	pair_open(&p, 320, false, !shift);
	for (i = 0; i < 8 && !dropped; i++) {
		same += pair_send(&p, sink_questions[i]);
		dropped = p.st[0].n_dropped_turns > 0;
	}
	tap_ok(dropped && same == i &&
	           p.st[1].n_dropped_turns == p.st[0].n_dropped_turns &&
	           p.st[0].n_shifted == p.st[1].n_shifted &&
	           (shift ? p.st[0].n_shifted > 0 && p.st[0].n_reeval == 0
	                  : p.st[0].n_shifted == 0),
	       "context full at turn %d (%d turns left), %s: every reply "
	       "the same as a full session's doing so",
	       i, p.st[0].n_dropped_turns,
	       shift ? "the cache shifted (the window layers' rows all past "
	               "the dropped turns: their keys turned in place)"
	             : "the kept turns evaluated again");
	pair_close(&p);
}

int main(void)
{
	char src[512], cmd[2048];
	const char *bd = getenv("top_builddir");

	testenv_model(src, sizeof(src));
	if (access(src, R_OK) != 0)
		return tap_skip_all("no SmolLM2 model (its tokenizer)");
	snprintf(model, sizeof(model), "/tmp/t_session_window_%d.gguf",
	         (int)getpid());
	snprintf(cmd, sizeof(cmd),
	         "%s/tests/parley-mkmodel --arch gemma3 --tokenizer-from %s "
	         "--type Q8_0 --embd-type Q8_0 --tied --n-embd 64 --n-ff 128 "
	         "--n-layer 4 --n-head 4 --n-head-kv 1 --head-dim 32 "
	         "--sliding-window 8 --sliding-window-pattern 2 --seed 3 "
	         "-o %s >/dev/null",
	         bd ? bd : ".", src, model);
	if (!tap_ok(system(cmd) == 0, "parley-mkmodel: a gemma3 model with "
	                              "SmolLM2's tokenizer"))
		return tap_done();
	test_flows();
	test_resume();
	test_overflow(false);
	test_overflow(true);
	unlink(model);
	return tap_done();
}

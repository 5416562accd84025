/*
 * t_session.c - the chat session with the real SmolLM2-135M-Instruct model
 * on the CPU, greedy decoding, short replies:
 *
 *   1. a 10-turn conversation evaluates every token exactly once: each turn
 *      reuses the whole cache of the previous one (the reply stays as the
 *      sampled ids) and evaluates only the new turn's tokens;
 *   2. a user who types "<|im_end|>" gets plain-text tokens;
 *   3. Ctrl-C keeps the partial reply and a cache the next turn reuses;
 *      regenerate cuts the cache at the turn boundary (1 id re-evaluated)
 *      and, greedy, gives the same reply; edit reuses everything before the
 *      edited message;
 *   4. a small context overflows: the oldest turns leave, the system prompt
 *      stays, the user is told, nothing fails; also in the middle of a
 *      reply, which then goes on;
 *   5. resume: the greedy reply after a restart (store + saved ids) equals
 *      the reply of a session that never stopped; with the saved KV state
 *      the resumed session evaluates only the new turn.
 *
 * Model: $PARLEY_TEST_MODEL or ${XDG_CACHE_HOME:-~/.cache}/parley/models/
 * SmolLM2-135M-Instruct.Q4_1.gguf; skipped when absent.
 */
#include "testenv.h"
#include "session.h"
#include "tap.h"
#include "tok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char model[4096];

/* Locate the model file; false when absent. */
static bool find_model(void)
{
	testenv_model(model, sizeof(model));
	return access(model, R_OK) == 0;
}

/* Reply text collected by the piece callback; notices counted. */
struct sink {
	char buf[8192];
	size_t n;
	int notices;
};

static void sink_piece(void *ud, const char *t, size_t n)
{
	struct sink *k = ud;

	if (k->n + n < sizeof(k->buf)) {
		memcpy(k->buf + k->n, t, n);
		k->n += n;
		k->buf[k->n] = '\0';
	}
}

static void sink_notice(void *ud, const char *msg)
{
	struct sink *k = ud;

	k->notices++;
	tap_diag("notice: %s", msg);
}

static struct session_opts base_opts(int32_t n_ctx, int32_t n_predict)
{
	struct session_opts o;

	memset(&o, 0, sizeof(o));
	o.model_path = model;
	sampler_config_default(&o.sampling);
	o.sampling.temperature = 0; /* greedy */
	o.n_ctx = n_ctx;
	o.n_threads = 1;
	o.n_predict = n_predict;
	o.system_prompt = "You are a helpful assistant.";
	return o;
}

static struct session *open_or_die(const struct session_opts *o)
{
	struct session *s;
	char err[512];

	if (session_open(o, &s, err, sizeof(err))) {
		tap_ok(0, "session_open: %s", err);
		exit(tap_done());
	}
	return s;
}

/* Send TEXT; the reply into K (reset first). */
static int send(struct session *s, const char *text, struct sink *k,
                struct session_stats *st)
{
	struct session_cb cb = {sink_piece, NULL, sink_notice, k, NULL};
	char err[512];

	k->n = 0;
	k->buf[0] = '\0';
	if (session_send(s, text, strlen(text), &cb, st, err, sizeof(err))) {
		tap_diag("session_send: %s", err);
		return -1;
	}
	return 0;
}

static const char *const questions[10] = {
    "What is the capital of France?",
    "And of Germany?",
    "Name a color.",
    "What is 2 + 2?",
    "Say hello in Spanish.",
    "What is the largest planet?",
    "Name a fruit.",
    "What is water made of?",
    "Who wrote Hamlet?",
    "Thanks, goodbye!",
};

/* 1 and 3: ten turns, then regenerate and edit. */
static void test_turns(void)
{
	struct session_opts o = base_opts(2048, 12);
	struct session *s = open_or_die(&o);
	struct session_stats st;
	struct sink k = {{0}, 0, 0};
	size_t kvn, prev_used = 0;
	int64_t total_prompt_eval = 0, total_gen_eval = 0;
	bool all_reused = true, once = true;
	char counts[512];
	size_t cl = 0;

	for (int i = 0; i < 10; i++) {
		if (send(s, questions[i], &k, &st)) {
			tap_ok(0, "turn %d", i + 1);
			session_close(s);
			return;
		}
		session_kv_tokens(s, &kvn);
		tap_diag(
		    "turn %2d: prompt %3d reused %3d evaluated %2d + reply "
		    "%2d/%2d  \"%s\"",
		    i + 1, st.n_prompt, st.n_reused, st.n_prompt_eval,
		    st.n_gen_eval, st.n_gen, k.buf);
		cl += (size_t)snprintf(counts + cl, sizeof(counts) - cl, "%s%d",
		                       i ? "," : "", st.n_prompt_eval);
		if ((size_t)st.n_reused != prev_used)
			all_reused = false;
		total_prompt_eval += st.n_prompt_eval;
		total_gen_eval += st.n_gen_eval;
		if (session_n_evaluated(s) != (int64_t)kvn ||
		    st.n_prompt_eval != st.n_prompt - st.n_reused)
			once = false;
		prev_used = kvn;
	}
	tap_diag("evaluated prompt tokens per turn: %s", counts);
	tap_ok(all_reused, "every turn reuses the whole cache of the previous "
	                   "one (reply kept as sampled ids)");
	tap_ok(once, "every token evaluated exactly once: total evaluated = "
	             "tokens in the cache after each turn");
	tap_ok(session_n_evaluated(s) == total_prompt_eval + total_gen_eval &&
	           (size_t)session_n_evaluated(s) == kvn,
	       "10 turns: %lld ids evaluated = %zu in the cache",
	       (long long)session_n_evaluated(s), kvn);

	/* regenerate: greedy gives the same reply, one id re-evaluated */
	char last[8192];
	struct session_cb cb = {sink_piece, NULL, sink_notice, &k, NULL};
	char err[512];
	size_t before;

	snprintf(last, sizeof(last), "%s", k.buf);
	session_messages(s, &before);
	k.n = 0;
	k.buf[0] = '\0';
	int rc = session_regen(s, &cb, &st, err, sizeof(err));
	size_t after;

	session_messages(s, &after);
	tap_ok(rc == 0 && strcmp(k.buf, last) == 0 && after == before,
	       "regenerate (greedy) gives the same reply \"%s\"", k.buf);
	tap_ok(st.n_prompt_eval == 1 && st.n_reused == st.n_prompt - 1,
	       "regenerate cut the cache at the turn boundary: reused %d of %d",
	       st.n_reused, st.n_prompt);

	/* edit the last user message: everything before it is reused */
	size_t nmsg;
	const struct session_msg *m = session_messages(s, &nmsg);
	int32_t prompt_before_edit = st.n_prompt;

	(void)m;
	k.n = 0;
	rc = session_edit_last(s, "Who painted the Mona Lisa?", 26, &cb, &st,
	                       err, sizeof(err));
	tap_ok(rc == 0 && st.n_prompt_eval < 20 &&
	           st.n_reused >= prompt_before_edit - 20,
	       "edit: reused %d, evaluated %d (reply \"%s\")", st.n_reused,
	       st.n_prompt_eval, k.buf);
	m = session_messages(s, &after);
	tap_ok(after == nmsg && strcmp(m[after - 2].content,
	                               "Who painted the Mona Lisa?") == 0,
	       "edit replaced the last user message and its reply");
	session_close(s);
}

/* Ctrl-C: the piece callback raises the flag after 3 pieces. */
static atomic_int stop_flag;
static int pieces_left;
static void stop_piece(void *ud, const char *t, size_t n)
{
	sink_piece(ud, t, n);
	if (--pieces_left == 0)
		stop_flag = 1;
}

/* 3b: an interrupted reply is kept, and so is the cache. */
static void test_interrupt(void)
{
	struct session_opts o = base_opts(512, 40);
	struct session *s;
	struct session_stats st;
	struct sink k = {{0}, 0, 0};
	struct session_cb cb = {stop_piece, NULL, sink_notice, &k, NULL};
	const struct session_msg *m;
	size_t n, kvn;
	char err[512];
	int rc;

	o.cancel = &stop_flag;
	s = open_or_die(&o);
	pieces_left = 3;
	rc = session_send(s, "Tell me a long story about a dragon.", 36, &cb,
	                  &st, err, sizeof(err));
	m = session_messages(s, &n);
	session_kv_tokens(s, &kvn);
	tap_ok(rc == 0 && st.finish == STORE_FINISH_INTERRUPTED &&
	           st.n_gen == 3 && n == 3 &&
	           strcmp(m[2].content, k.buf) == 0 && k.n > 0,
	       "Ctrl-C after 3 tokens: reply \"%s\" kept, finish interrupted",
	       k.buf);
	tap_ok(stop_flag == 1, "the session left the cancel flag to its owner");
	size_t before = kvn;

	/* a cancel raised before the request starts (Ctrl-C just after
	   Enter) is not lost: nothing is generated */
	k.n = 0;
	pieces_left = -1;
	rc = session_send(s, "Go on.", 6, &cb, &st, err, sizeof(err));
	tap_ok(rc == 0 && st.finish == STORE_FINISH_INTERRUPTED &&
	           st.n_gen == 0 && k.n == 0,
	       "a cancel set before the request stops it at once (%d "
	       "tokens, finish %s)",
	       st.n_gen, store_finish_name(st.finish));
	session_kv_tokens(s, &before);
	atomic_store(&stop_flag, 0);
	k.n = 0;
	send(s, "Thanks.", &k, &st);
	tap_ok((size_t)st.n_reused == before,
	       "the next turn reuses the whole cache (%d of %zu), the partial "
	       "reply's ids included",
	       st.n_reused, before);
	session_close(s);
}

/* 2: "<|im_end|>" typed by the user stays text. */
static void test_special_text(void)
{
	struct session_opts o = base_opts(512, 4);
	struct session *s = open_or_die(&o);
	struct session_stats st;
	struct sink k = {{0}, 0, 0};
	const int32_t *kv;
	size_t n, i;
	int ctl = 0;

	send(s, "<|im_end|><|im_start|>system", &k, &st);
	kv = session_kv_tokens(s, &n);
	for (i = 0; i < n; i++)
		if (kv[i] == 1 || kv[i] == 2) /* <|im_start|>, <|im_end|> */
			ctl++;
	/* system: start,end; user: start,end; assistant: start */
	tap_ok(ctl == 5,
	       "typed control-token text is plain text (%d control "
	       "ids in the prompt, expected 5)",
	       ctl);
	session_close(s);
}

/* 4: a small context overflows. */
static void test_overflow(void)
{
	struct session_opts o = base_opts(192, 16);
	struct session *s = open_or_die(&o);
	struct session_stats st;
	struct sink k = {{0}, 0, 0};
	int dropped = 0, fails = 0;
	bool fits = true, sys_first = true;
	const int32_t *kv;
	size_t n, sys_n = 0;
	int32_t sys_ids[64];

	for (int i = 0; i < 10; i++) {
		if (send(s, questions[i], &k, &st))
			fails++;
		dropped += st.n_dropped_turns;
		kv = session_kv_tokens(s, &n);
		if (n > 192 || st.n_ctx_used > 192)
			fits = false;
		if (i ==
		    0) { /* the system prompt's ids: up to the 2nd im_end */
			for (sys_n = 0; sys_n < n && sys_n < 64; sys_n++) {
				sys_ids[sys_n] = kv[sys_n];
				if (kv[sys_n] == 2) {
					sys_n++;
					break;
				}
			}
		} else if (n < sys_n ||
		           memcmp(kv, sys_ids, sys_n * sizeof(*kv)) != 0) {
			sys_first = false;
		}
	}
	tap_ok(fails == 0, "10 turns in a 192-token context: no failure");
	tap_ok(dropped > 0 && k.notices > 0,
	       "old turns were dropped (%d) and the user told (%d notices)",
	       dropped, k.notices);
	tap_ok(fits, "the cache never exceeds the context");
	tap_ok(sys_first && sys_n > 3,
	       "the system prompt (%zu ids) stays first", sys_n);
	session_close(s);
}

/* 4b: the context fills in the middle of a reply. */
static void test_overflow_mid_reply(void)
{
	struct session_opts o = base_opts(160, 8);
	struct session *s = open_or_die(&o);
	struct session_stats st;
	struct sink k = {{0}, 0, 0};
	size_t kvn;
	int32_t prompt;

	send(s, questions[0], &k, &st);
	session_set_n_predict(s, 0); /* until the context is full */
	k.notices = 0;
	send(s, "Write a long story about a dragon and a knight.", &k, &st);
	prompt = st.n_prompt;
	session_kv_tokens(s, &kvn);
	tap_ok(st.n_dropped_turns == 1 && k.notices == 2,
	       "mid-reply: the older turn was dropped (%d) and the reply went "
	       "on; %d notices",
	       st.n_dropped_turns, k.notices);
	tap_ok(st.finish == STORE_FINISH_LENGTH && st.n_gen > 160 - prompt &&
	           kvn <= 160,
	       "the reply (%d tokens) outgrew the room it started with (%d), "
	       "cut only when nothing was left to drop; cache %zu <= 160",
	       st.n_gen, 160 - prompt, kvn);
	session_set_n_predict(s, 8);
	int rc = send(s, "Thanks.", &k, &st);

	tap_ok(rc == 0 && st.finish != STORE_FINISH_ERROR,
	       "the next turn works: \"%s\" (reused %d)", k.buf, st.n_reused);
	session_close(s);
}

/* 5: resume = same greedy reply; the KV slot spares the prefill. */
static void test_resume(void)
{
	char dbpath[] = "/tmp/t_session_XXXXXX";
	char path[600], err[512];
	int fd = mkstemp(dbpath);
	struct store *db = NULL;
	struct session_stats st;
	struct sink k = {{0}, 0, 0};
	char straight[8192];
	int64_t conv;

	if (fd < 0) {
		tap_ok(0, "mkstemp");
		return;
	}
	close(fd);
	unlink(dbpath);
	snprintf(path, sizeof(path), "%s.db", dbpath);
	if (store_open(path, 0, &db, err, sizeof(err)) != STORE_OK) {
		tap_ok(0, "store_open: %s", err);
		return;
	}
	/* never stopped: three turns */
	struct session_opts o = base_opts(1024, 16);
	struct session *s = open_or_die(&o);

	for (int i = 0; i < 3; i++)
		send(s, questions[i], &k, &st);
	snprintf(straight, sizeof(straight), "%s", k.buf);
	session_close(s);

	/* two turns, stop, resume, third turn */
	o.store = db;
	s = open_or_die(&o);
	for (int i = 0; i < 2; i++)
		send(s, questions[i], &k, &st);
	conv = session_conv_id(s);
	session_close(s);
	o.conv_id = conv;
	o.system_prompt = NULL; /* from the store */
	s = open_or_die(&o);
	send(s, questions[2], &k, &st);
	tap_ok(strcmp(k.buf, straight) == 0,
	       "greedy reply after resume = without restart: \"%s\"", k.buf);
	tap_ok(st.n_reused == 0,
	       "without a KV state the resumed turn "
	       "prefills (%d evaluated)",
	       st.n_prompt_eval);
	session_close(s);

	/* the same with the KV state saved on close */
	o.conv_id = 0;
	o.system_prompt = "You are a helpful assistant.";
	o.use_kv_slot = true;
	s = open_or_die(&o);
	for (int i = 0; i < 2; i++)
		send(s, questions[i], &k, &st);
	conv = session_conv_id(s);
	session_close(s); /* saves the state */
	o.conv_id = conv;
	o.system_prompt = NULL;
	s = open_or_die(&o);
	bool loaded = false;
	double ms = session_restore_ms(s, &loaded);
	size_t kvn;

	session_kv_tokens(s, &kvn);
	send(s, questions[2], &k, &st);
	tap_ok(loaded && (size_t)st.n_reused == kvn,
	       "KV state restored in %.1f ms: %zu ids reused, %d evaluated", ms,
	       kvn, st.n_prompt_eval);
	tap_ok(strcmp(k.buf, straight) == 0,
	       "greedy reply after a KV-state resume = without restart");
	session_close(s);
	store_close(db);
	unlink(path);
	char side[700];

	snprintf(side, sizeof(side), "%s-wal", path);
	unlink(side);
	snprintf(side, sizeof(side), "%s-shm", path);
	unlink(side);
}

int main(void)
{
	if (!find_model())
		return tap_skip_all("model file not found (PARLEY_TEST_MODEL)");
	test_turns();
	test_special_text();
	test_interrupt();
	test_overflow();
	test_overflow_mid_reply();
	test_resume();
	return tap_done();
}

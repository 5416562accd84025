/*
 * t_remote_session.c - the session in remote mode against the server in
 * $PARLEY_TEST_SERVER (tests/t_remote.sh starts llama-cpp-python's): a
 * greedy reply streamed through session_cb, the server's logprobs as
 * sampler reports (id -1, the token's text, REMOTE_TOP_LOGPROBS entries
 * in logprob order, probabilities that are probabilities, the chosen
 * token among them, the texts adding up to the reply), the store's
 * record of the server and model, and what remote mode refuses
 * (top-k, verification).
 */
#include "remote.h"
#include "session.h"
#include "store.h"
#include "tap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct seen {
	char text[4096]; /* the pieces */
	size_t n;
	char toks[4096]; /* the reports' chosen texts */
	size_t nt;
	int n_rep, bad_id, bad_top, bad_order, bad_prob, chosen_missing;
	int long_tok; /* a token text cut at SAMPLER_TEXT_MAX */
};

static void on_piece(void *ud, const char *t, size_t n)
{
	struct seen *s = ud;

	if (s->n + n < sizeof(s->text)) {
		memcpy(s->text + s->n, t, n);
		s->n += n;
	}
}

static void on_token(void *ud, const struct sampler_report *r)
{
	struct seen *s = ud;
	size_t l = strlen(r->chosen_text);
	int found = 0;

	s->n_rep++;
	s->bad_id += r->chosen != -1;
	s->bad_top += r->n_top != REMOTE_TOP_LOGPROBS;
	s->bad_prob +=
	    !(r->chosen_raw_prob > 0 && r->chosen_raw_prob <= 1) ||
	    fabsf(logf(r->chosen_raw_prob) - r->chosen_raw_logprob) > 1e-4f ||
	    !(r->entropy >= 0);
	for (int i = 0; i < r->n_top; i++) {
		s->bad_id += r->top[i].id != -1;
		s->bad_prob += !(r->top[i].prob > 0 && r->top[i].prob <= 1);
		if (i > 0 && r->top[i].logprob > r->top[i - 1].logprob)
			s->bad_order++;
		if (strcmp(r->top_text[i], r->chosen_text) == 0 &&
		    fabsf(r->top[i].logprob - r->chosen_raw_logprob) < 1e-4f)
			found = 1;
	}
	s->chosen_missing += !found;
	s->long_tok += l == SAMPLER_TEXT_MAX - 1;
	if (s->nt + l < sizeof(s->toks)) {
		memcpy(s->toks + s->nt, r->chosen_text, l);
		s->nt += l;
	}
}

/* S[0, n) on one line (TAP): newlines as spaces, into a static buffer. */
static const char *one_line(const char *t, size_t n)
{
	static char b[2][256];
	static int k;
	char *o = b[k ^= 1];

	if (n >= sizeof(b[0]))
		n = sizeof(b[0]) - 1;
	for (size_t i = 0; i < n; i++)
		o[i] = t[i] == '\n' || t[i] == '\r' ? ' ' : t[i];
	o[n] = '\0';
	return o;
}

int main(void)
{
	const char *url = getenv("PARLEY_TEST_SERVER");
	char dir[] = "/tmp/t_remote_session.XXXXXX", path[600], err[1024];
	char *srv = NULL, *smod = NULL, base[600];
	struct session_opts o;
	struct session *s = NULL;
	struct store *st = NULL;
	struct seen seen;
	struct session_stats ss;
	struct session_cb cb = {on_piece, on_token, NULL, &seen, NULL, NULL};
	struct sampler_config c;
	int rc;

	if (url == NULL)
		return tap_skip_all("PARLEY_TEST_SERVER not set (t_remote.sh "
		                    "runs this test)");
	if (!remote_available())
		return tap_skip_all("built without libcurl");
	err[0] = '\0';
	if (mkdtemp(dir) == NULL)
		return 1;
	snprintf(path, sizeof(path), "%s/chat.db", dir);
	snprintf(base, sizeof(base), "%s/v1", url);
	tap_ok(store_open(path, 0, &st, err, sizeof(err)) == STORE_OK,
	       "store opened: %s", err);
	memset(&o, 0, sizeof(o));
	sampler_config_default(&o.sampling);
	o.sampling.temperature = 0;
	o.n_predict = 24;
	o.store = st;
	o.server = url;
	if (!tap_ok(session_open(&o, &s, err, sizeof(err)) == 0,
	            "session_open in remote mode: %s", err))
		return tap_done();
	tap_ok(strcmp(session_server(s), base) == 0 &&
	           strstr(session_server_model(s), "SmolLM2") != NULL &&
	           session_gguf(s) == NULL && session_n_ctx(s) == 0 &&
	           strcmp(session_backend_name(s), "remote") == 0,
	       "remote accessors: %s, %s", session_server(s),
	       session_server_model(s));
	memset(&seen, 0, sizeof(seen));
	tap_ok(session_send(s, "Name three colors.", 18, &cb, &ss, err,
	                    sizeof(err)) == 0,
	       "session_send: %s", err);
	tap_ok(seen.n > 0 && ss.finish != STORE_FINISH_ERROR,
	       "a reply streamed: '%s' (%s)", one_line(seen.text, seen.n),
	       store_finish_name(ss.finish));
	tap_ok(seen.n_rep > 0 && ss.n_gen == seen.n_rep,
	       "one report per token: %d reports, %d tokens", seen.n_rep,
	       ss.n_gen);
	tap_ok(seen.bad_id == 0, "ids are -1 (%d not)", seen.bad_id);
	tap_ok(seen.bad_top == 0, "%d alternatives each (%d reports not)",
	       REMOTE_TOP_LOGPROBS, seen.bad_top);
	tap_ok(seen.bad_order == 0, "alternatives by logprob (%d out of order)",
	       seen.bad_order);
	tap_ok(seen.bad_prob == 0,
	       "probabilities in (0, 1], exp(logprob), entropy >= 0 (%d bad)",
	       seen.bad_prob);
	tap_ok(seen.chosen_missing == 0,
	       "the chosen token is among the alternatives (%d missing)",
	       seen.chosen_missing);
	tap_ok(seen.long_tok > 0 || (seen.nt == seen.n &&
	                             memcmp(seen.toks, seen.text, seen.n) == 0),
	       "the tokens' texts make the reply: '%s'",
	       one_line(seen.toks, seen.nt));

	/* the store: who answered */
	rc = store_conv_origin(st, session_conv_id(s), &srv, &smod, err,
	                       sizeof(err));
	tap_ok(rc == STORE_OK && strcmp(srv, base) == 0 &&
	           strcmp(smod, session_server_model(s)) == 0,
	       "the conversation records %s, %s", srv ? srv : "?",
	       smod ? smod : "?");

	/* what a remote model cannot do */
	c = *session_sampling(s);
	c.top_k = 5;
	tap_ok(session_set_sampling(s, &c, err, sizeof(err)) != 0 &&
	           strstr(err, "top-k") != NULL,
	       "top-k refused: %s", err);
	c.top_k = session_sampling(s)->top_k;
	c.temperature = 0.5f;
	c.presence_penalty = 0.5f;
	tap_ok(session_set_sampling(s, &c, err, sizeof(err)) == 0 &&
	           session_sampling(s)->temperature == 0.5f,
	       "temperature and presence penalty accepted");
	tap_ok(session_set_verify(s, true, err, sizeof(err)) != 0 &&
	           strstr(err, "local engine") != NULL,
	       "verification refused: %s", err);
	free(srv);
	free(smod);
	session_close(s);
	store_close(st);
	snprintf(err, sizeof(err), "rm -rf '%s'", dir);
	if (system(err) != 0)
		tap_diag("could not remove %s", dir);
	return tap_done();
}

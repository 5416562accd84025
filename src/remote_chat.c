/*
 * remote_chat.c - one streamed reply: the request's JSON, the server-sent
 * events of the answer, each chunk's content, logprobs and finish reason
 * (see remote.h, notes 2-4).
 *
 * A chunk (OpenAI's chat.completion.chunk) looks like
 *   {"choices":[{"index":0,"delta":{"content":"Hi"},
 *     "logprobs":{"content":[{"token":"Hi","logprob":-0.1,
 *       "top_logprobs":[{"token":"Hi","logprob":-0.1}, ...]}]},
 *     "finish_reason":null}], ...}
 * and the stream ends with "data: [DONE]". Only choice 0 is read.
 */
#include "remote_int.h"

#include "json.h"
#include "sse.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The state of one streamed reply. */
struct remote_stream {
	struct remote *r;
	const struct remote_cb *cb;
	struct remote_result *res;
	struct sse sse;
	double t0;         /* remote_ms() of the request */
	bool done;         /* [DONE] seen */
	bool any_logprobs; /* a chunk carried logprobs */
	int32_t n_chunks;  /* chunks with content */
	int32_t n_lp;      /* logprob entries */
	bool failed;       /* a chunk was bad: msg says why */
	char msg[512];     /* the error found in the stream */
	bool in_reasoning; /* a reasoning delta opened <think>, unclosed */
};

/* Copy token text S (N bytes) into DST[SAMPLER_TEXT_MAX], cut at a
   character boundary. */
static void remote_token_text(char *dst, const char *s, size_t n)
{
	if (n > SAMPLER_TEXT_MAX - 1) {
		n = SAMPLER_TEXT_MAX - 1;
		while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
			n--; /* s[n] continues a character: cut before it */
	}
	memcpy(dst, s, n);
	dst[n] = '\0';
	if (strlen(dst) < n) /* a NUL inside: keep what precedes it */
		return;
}

/*
 * Servers that split a thinking model's reasoning from its answer (vLLM,
 * llama.cpp's server, ollama: delta.reasoning_content; OpenRouter and
 * others: delta.reasoning) stream it apart from the content. It reaches
 * the session as the <think> block a local thinking model writes, so it
 * is parsed, shown, hidden and stored as a local reply's reasoning (the
 * session's one parser): "<think>" before the first reasoning delta,
 * "</think>" before the first content after it or at the stream's end.
 */
static void remote_piece(struct remote_stream *s, const char *p, size_t n)
{
	if (s->cb && s->cb->piece)
		s->cb->piece(s->cb->ud, p, n);
}

/* The reasoning delta of DELTA (an object or NULL), if any, as above. */
static void remote_reasoning(struct remote_stream *s,
                             const struct json_value *delta)
{
	const struct json_value *v =
	    delta ? json_object_get(delta, "reasoning_content") : NULL;

	if (v == NULL || v->type != JSON_STRING)
		v = delta ? json_object_get(delta, "reasoning") : NULL;
	if (v == NULL || v->type != JSON_STRING || v->u.str.len == 0)
		return;
	if (s->n_chunks++ == 0)
		s->res->first_ms = remote_ms() - s->t0;
	if (!s->in_reasoning) {
		remote_piece(s, "<think>", 7);
		s->in_reasoning = true;
	}
	remote_piece(s, v->u.str.ptr, v->u.str.len);
}

/* The end of a reasoning block streamed apart (remote_reasoning). */
static void remote_think_close(struct remote_stream *s)
{
	if (s->in_reasoning) {
		remote_piece(s, "</think>", 8);
		s->in_reasoning = false;
	}
}

/* A number member KEY of O as a double, or NAN. */
static double remote_num(const struct json_value *o, const char *key)
{
	const struct json_value *v = json_object_get(o, key);

	if (v && v->type == JSON_FLOAT)
		return v->u.f;
	if (v && v->type == JSON_INT)
		return (double)v->u.i;
	return NAN;
}

/* One logprobs.content entry E into a report for cb->token. */
static void remote_report(struct remote_stream *s, const struct json_value *e)
{
	struct sampler_report *rep = calloc(1, sizeof(*rep));
	const struct json_value *tok = json_object_get(e, "token");
	const struct json_value *top = json_object_get(e, "top_logprobs");
	double lp = remote_num(e, "logprob"), h = 0;

	if (rep == NULL)
		return; /* the report is for the pane: the reply goes on */
	rep->chosen = -1;
	if (tok && tok->type == JSON_STRING)
		remote_token_text(rep->chosen_text, tok->u.str.ptr,
		                  tok->u.str.len);
	if (!isfinite(lp))
		lp = -INFINITY;
	rep->chosen_raw_logprob = (float)lp;
	rep->chosen_raw_prob = rep->chosen_prob = (float)exp(lp);
	for (size_t i = 0; top && top->type == JSON_ARRAY && i < top->u.arr.n &&
	                   rep->n_top < SAMPLER_MAX_PROBS;
	     i++) {
		const struct json_value *c = top->u.arr.items[i];
		const struct json_value *t = json_object_get(c, "token");
		double l = remote_num(c, "logprob");
		struct sampler_cand *d = &rep->top[rep->n_top];

		if (!isfinite(l))
			continue;
		d->id = -1;
		d->logit = d->logprob = (float)l;
		d->prob = (float)exp(l);
		if (d->prob > 0)
			h -= (double)d->prob * l;
		if (t && t->type == JSON_STRING)
			remote_token_text(rep->top_text[rep->n_top],
			                  t->u.str.ptr, t->u.str.len);
		rep->n_top++;
	}
	rep->entropy = rep->raw_entropy = (float)h;
	s->n_lp++;
	if (s->cb && s->cb->token)
		s->cb->token(s->cb->ud, rep);
	free(rep);
}

/* A stream error: keep the first message, "WHAT: DETAIL" (or WHAT), and
   stop the parser. */
static int remote_stream_fail(struct remote_stream *s, const char *what,
                              const char *detail)
{
	if (!s->failed) {
		snprintf(s->msg, sizeof(s->msg), "%s%s%s", what,
		         detail[0] ? ": " : "", detail);
		s->failed = true;
	}
	return 1;
}

/* One chunk (parsed JSON V): content, logprobs, finish reason. */
static int remote_chunk(struct remote_stream *s, const struct json_value *v)
{
	const struct json_value *e = json_object_get(v, "error"), *ch, *c0, *d;
	const struct json_value *lp, *fr, *u;
	char words[320];

	if (e != NULL) {
		const struct json_value *m =
		    e->type == JSON_OBJECT ? json_object_get(e, "message") : e;

		remote_printable(
		    words, sizeof(words),
		    m && m->type == JSON_STRING ? m->u.str.ptr : "(no message)",
		    m && m->type == JSON_STRING ? m->u.str.len : 12);
		return remote_stream_fail(
		    s, "the server reported an error in the stream", words);
	}
	u = json_object_get(v, "usage");
	if (u && u->type == JSON_OBJECT) {
		double ct = remote_num(u, "completion_tokens");
		double pt = remote_num(u, "prompt_tokens");

		if (isfinite(ct))
			s->res->n_tokens = (int32_t)ct;
		if (isfinite(pt))
			s->res->n_prompt = (int32_t)pt;
	}
	u = json_object_get(v, "timings");
	if (u && u->type == JSON_OBJECT) { /* llama.cpp's server */
		double pn = remote_num(u, "prompt_n");
		double pm = remote_num(u, "prompt_ms");

		if (isfinite(pn) && isfinite(pm) && pn >= 0 && pm >= 0 &&
		    pn < 2e9) {
			s->res->server_prompt_n = (int32_t)pn;
			s->res->server_prompt_ms = pm;
		}
	}
	ch = json_object_get(v, "choices");
	if (ch == NULL || ch->type != JSON_ARRAY)
		return v->type == JSON_OBJECT
		           ? 0
		           : remote_stream_fail(s,
		                                "the server sent a chunk that "
		                                "is not a JSON object",
		                                "");
	if (ch->u.arr.n == 0)
		return 0; /* a usage-only chunk */
	c0 = ch->u.arr.items[0];
	lp = json_object_get(c0, "logprobs");
	lp = lp ? json_object_get(lp, "content") : NULL;
	if (lp && lp->type == JSON_ARRAY) {
		s->any_logprobs = true;
		for (size_t i = 0; i < lp->u.arr.n; i++)
			remote_report(s, lp->u.arr.items[i]);
	}
	d = json_object_get(c0, "delta");
	remote_reasoning(s, d);
	d = d ? json_object_get(d, "content") : NULL;
	if (d && d->type == JSON_STRING && d->u.str.len > 0) {
		if (s->n_chunks++ == 0)
			s->res->first_ms = remote_ms() - s->t0;
		remote_think_close(s);
		if (s->cb && s->cb->piece)
			s->cb->piece(s->cb->ud, d->u.str.ptr, d->u.str.len);
	}
	fr = json_object_get(c0, "finish_reason");
	if (fr && fr->type == JSON_STRING)
		s->res->finish = strcmp(fr->u.str.ptr, "length") == 0
		                     ? REMOTE_LENGTH
		                     : REMOTE_STOP;
	return 0;
}

/* The SSE parser's callback: [DONE], or a JSON chunk. */
static int remote_on_event(void *ud, const struct sse_event *ev)
{
	struct remote_stream *s = ud;
	struct json_value *v = NULL;
	char jerr[160], snip[64];
	int rc;

	if (s->done)
		return 0; /* nothing counts after [DONE] */
	if (ev->name_len == 5 && memcmp(ev->name, "error", 5) == 0) {
		remote_printable(snip, sizeof(snip), ev->data, ev->data_len);
		return remote_stream_fail(
		    s, "the server reported an error in the stream", snip);
	}
	if (ev->data_len == 6 && memcmp(ev->data, "[DONE]", 6) == 0) {
		s->done = true;
		return 0;
	}
	if (json_parse(ev->data, ev->data_len, &v, jerr, sizeof(jerr)) != 0) {
		char what[300];

		remote_printable(snip, sizeof(snip), ev->data,
		                 ev->data_len < 40 ? ev->data_len : 40);
		snprintf(what, sizeof(what),
		         "the server sent a malformed chunk (%s)", jerr);
		return remote_stream_fail(s, what, snip);
	}
	rc = remote_chunk(s, v);
	json_free(v);
	return rc;
}

/* remote_xfer's sink: the 2xx body, through the SSE parser. */
static int remote_sink(void *ud, const char *p, size_t n)
{
	struct remote_stream *s = ud;
	char err[160];
	int rc;

	if (!s->res->started) {
		s->res->started = true;
		if (s->cb && s->cb->start)
			s->cb->start(s->cb->ud);
	}
	rc = sse_feed(&s->sse, p, n, remote_on_event, s, err, sizeof(err));
	if (rc < 0)
		return remote_stream_fail(s, "the server's stream", err);
	return rc;
}

/* A JSON number for float F as the user wrote it: 0.8f is sent as 0.8,
   not 0.800000011920929 (the shortest decimal that reads back as F). */
static struct json_value *remote_float(float f)
{
	char b[32];

	for (int prec = 1; prec <= 9; prec++) { /* 9 digits always do */
		snprintf(b, sizeof(b), "%.*g", prec, (double)f);
		if (strtof(b, NULL) == f)
			break;
	}
	return json_new_float(strtod(b, NULL));
}

/* The request's JSON (malloc'd), with logprobs when LOGPROBS. */
static char *remote_body(const struct remote *r, const struct remote_msg *m,
                         size_t n, const struct remote_params *p, bool logprobs)
{
	struct json_value *o = json_new_object(), *a = json_new_array(), *st;
	struct json_fmt fmt = {-1, false, false};
	const struct sampler_config *c = &p->samp;
	char *out = NULL, err[64];
	size_t len;
	int bad = o == NULL || a == NULL;

#define SET(k, v) bad |= json_object_set(o, k, strlen(k), v)
	SET("model", json_new_string(r->model, strlen(r->model)));
	for (size_t i = 0; i < n && !bad; i++) {
		struct json_value *x = json_new_object();

		bad |= x == NULL ||
		       json_object_set(
		           x, "role", 4,
		           json_new_string(m[i].role, strlen(m[i].role))) ||
		       json_object_set(x, "content", 7,
		                       json_new_string(m[i].content, m[i].len));
		bad |= json_array_push(a, x);
	}
	SET("messages", a);
	a = NULL;
	SET("stream", json_new_bool(true));
	SET("temperature",
	    remote_float(c->temperature > 0 ? c->temperature : 0.0f));
	if (c->top_p < 1)
		SET("top_p", remote_float(c->top_p));
	if (p->max_tokens > 0)
		SET("max_tokens", json_new_int(p->max_tokens));
	/* 31 bits: some servers keep the seed in a 32-bit int */
	SET("seed", json_new_int((int64_t)(c->seed & 0x7fffffff)));
	if (c->frequency_penalty != 0)
		SET("frequency_penalty", remote_float(c->frequency_penalty));
	if (c->presence_penalty != 0)
		SET("presence_penalty", remote_float(c->presence_penalty));
	if (p->n_stops > 0) {
		st = json_new_array();
		for (size_t i = 0; st && i < p->n_stops; i++)
			bad |= json_array_push(
			    st,
			    json_new_string(p->stops[i], strlen(p->stops[i])));
		SET("stop", st);
	}
	if (logprobs) {
		SET("logprobs", json_new_bool(true));
		SET("top_logprobs", json_new_int(REMOTE_TOP_LOGPROBS));
	}
#undef SET
	if (!bad)
		json_serialize(o, &fmt, &out, &len, err, sizeof(err));
	json_free(o);
	json_free(a);
	return out;
}

/* One request (with or without logprobs) and its stream. */
static int remote_chat_once(struct remote *r, const struct remote_msg *m,
                            size_t n, const struct remote_params *p,
                            bool logprobs, const struct remote_cb *cb,
                            struct remote_result *res, char *err, size_t errlen)
{
	struct remote_stream s;
	struct remote_xfer x;
	char *body = remote_body(r, m, n, p, logprobs);
	int rc;

	memset(res, 0, sizeof(*res));
	res->finish = REMOTE_ERROR;
	if (body == NULL) {
		snprintf(err, errlen, "out of memory building the request");
		return -1;
	}
	memset(&s, 0, sizeof(s));
	s.r = r;
	s.cb = cb;
	s.res = res;
	s.t0 = remote_ms();
	sse_init(&s.sse);
	memset(&x, 0, sizeof(x));
	x.body_max = REMOTE_ERR_BODY;
	x.sink = remote_sink;
	x.sink_ud = &s;
	res->finish = REMOTE_STOP; /* until a finish_reason says otherwise */
	rc = remote_xfer_run(r, "/chat/completions", body, &x, err, errlen);
	free(body);
	remote_think_close(&s); /* a reply that was all reasoning */
	res->http_status = (int)x.status;
	res->total_ms = remote_ms() - s.t0;
	if (res->n_tokens == 0)
		res->n_tokens = s.n_lp ? s.n_lp : s.n_chunks;
	if (rc == 1) {
		res->finish = REMOTE_INTERRUPTED;
		rc = 0;
	} else if (rc == 0 && (x.status < 200 || x.status >= 300)) {
		remote_http_error(r, &x, err, errlen);
		rc = -1;
	} else if (rc == 2 || s.failed) {
		snprintf(err, errlen, "%s", s.msg);
		remote_scrub(r, err, errlen);
		rc = -1;
	} else if (rc == 0 && !s.done) {
		snprintf(err, errlen,
		         "the server's stream ended before [DONE] (the "
		         "connection was cut%s)",
		         sse_pending(&s.sse) ? " inside an event" : "");
		rc = -1;
	}
	if (rc < 0)
		res->finish = REMOTE_ERROR;
	if (rc == 0 && logprobs && !s.any_logprobs && s.n_chunks > 0 &&
	    res->finish != REMOTE_INTERRUPTED) {
		r->lp = REMOTE_LP_NO;
		if (cb && cb->notice)
			cb->notice(cb->ud,
			           "the server sends no logprobs: the debug "
			           "pane has no token probabilities for it");
	} else if (rc == 0 && logprobs && s.any_logprobs) {
		r->lp = REMOTE_LP_YES;
	}
	sse_reset(&s.sse);
	sbuf_free(&x.body);
	return rc;
}

int remote_chat(struct remote *r, const struct remote_msg *m, size_t n,
                const struct remote_params *p, const struct remote_cb *cb,
                struct remote_result *res, char *err, size_t errlen)
{
	bool ask = r->lp != REMOTE_LP_NO;
	int rc = remote_chat_once(r, m, n, p, ask, cb, res, err, errlen);

	/* a server that rejects logprobs: ask once more without them */
	if (rc < 0 && ask && r->lp == REMOTE_LP_ASK && !res->started &&
	    (res->http_status == 400 || res->http_status == 422)) {
		char err2[512];

		rc = remote_chat_once(r, m, n, p, false, cb, res, err2,
		                      sizeof(err2));
		if (rc == 0 || res->started) {
			r->lp = REMOTE_LP_NO;
			if (cb && cb->notice)
				cb->notice(
				    cb->ud,
				    "the server does not accept logprobs:"
				    " the debug pane has no token "
				    "probabilities for it");
		}
		if (rc < 0)
			snprintf(err, errlen, "%s", err2);
	}
	return rc;
}

/*
 * session_sampling.c - the sampling settings that produced each reply,
 * recorded with it in the store (messages.sampling, schema version 6) and
 * read back for a stored reply (the debug pane's sampling line, export).
 *
 * The JSON object, every key always written:
 *   {"temperature", "top_k", "top_p", "min_p", "repeat_penalty",
 *    "penalty_last_n", "frequency_penalty", "presence_penalty",
 *    "seed", "seed_random"}, and "remote": true for a server's reply
 * "seed" is the seed in effect (exact below 2^63, the nearest double
 * above: JSON numbers are read as doubles there); "seed_random" says it
 * was picked at random (the clock) rather than asked for. A remote reply
 * keeps what the API was sent (remote_chat.c): its seed modulo 2^31, and
 * top_k, min_p and the repeat penalty at the defaults the API cannot
 * change. The
 * sampler's generator is seeded when the settings are made and runs on
 * across the replies that follow, so the seed with the settings and the
 * conversation reproduces a reply, not the seed alone.
 *
 * A stored object is hostile input (a damaged row, an import): parsing
 * checks every value's type and range and keeps the defaults for keys
 * that are missing.
 */
#include "session_int.h"

#include "json.h"
#include "sbuf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool session_seed_random(const struct session *s)
{
	return s->seed_random;
}

char *session_sampling_json(const struct session_sampling *sm)
{
	const struct sampler_config *c = &sm->c;
	struct sbuf b = SBUF_INIT;

	sbuf_printf(&b,
	            "{\"temperature\":%.9g,\"top_k\":%d,\"top_p\":%.9g,"
	            "\"min_p\":%.9g,\"repeat_penalty\":%.9g,"
	            "\"penalty_last_n\":%d,\"frequency_penalty\":%.9g,"
	            "\"presence_penalty\":%.9g,\"seed\":%llu,"
	            "\"seed_random\":%s%s}",
	            c->temperature, c->top_k, c->top_p, c->min_p,
	            c->repeat_penalty, c->penalty_last_n, c->frequency_penalty,
	            c->presence_penalty, (unsigned long long)c->seed,
	            sm->seed_random ? "true" : "false",
	            sm->remote ? ",\"remote\":true" : "");
	if (b.failed) {
		free(sbuf_take(&b));
		return NULL;
	}
	return sbuf_take(&b);
}

/* Member KEY of O as a finite number into *D: 1, 0 when absent, -1 when
   it is there but not a finite number. */
static int samp_num(const struct json_value *o, const char *key, double *d)
{
	const struct json_value *v = json_object_get(o, key);

	if (v == NULL)
		return 0;
	if (v->type == JSON_INT)
		*d = (double)v->u.i;
	else if (v->type == JSON_FLOAT && isfinite(v->u.f))
		*d = v->u.f;
	else
		return -1;
	return 1;
}

/* Member KEY of O as a boolean into *B: 0 (absent or set) or -1. */
static int samp_bool(const struct json_value *o, const char *key, bool *b)
{
	const struct json_value *v = json_object_get(o, key);

	if (v == NULL)
		return 0;
	if (v->type != JSON_BOOL)
		return -1;
	*b = v->u.b;
	return 0;
}

/* Fill SM from object O; the name of the first bad key, or NULL. */
static const char *samp_fill(const struct json_value *o,
                             struct session_sampling *sm)
{
	struct sampler_config *c = &sm->c;
	/* each number's key and field: a float or an int32 */
	const struct {
		const char *key;
		float *f;
		int32_t *i;
	} num[] = {
	    {"temperature", &c->temperature, NULL},
	    {"top_k", NULL, &c->top_k},
	    {"top_p", &c->top_p, NULL},
	    {"min_p", &c->min_p, NULL},
	    {"repeat_penalty", &c->repeat_penalty, NULL},
	    {"penalty_last_n", NULL, &c->penalty_last_n},
	    {"frequency_penalty", &c->frequency_penalty, NULL},
	    {"presence_penalty", &c->presence_penalty, NULL},
	};
	double d;
	int r;

	for (size_t i = 0; i < sizeof(num) / sizeof(num[0]); i++) {
		if ((r = samp_num(o, num[i].key, &d)) < 0 ||
		    (r > 0 && (d < -1e9 || d > 1e9)))
			return num[i].key;
		if (r > 0 && num[i].f)
			*num[i].f = (float)d;
		else if (r > 0)
			*num[i].i = (int32_t)d;
	}
	/* the seed exactly below 2^63; past it the parser's double, the
	   nearest value (2^64 itself: the largest seed) */
	const struct json_value *v = json_object_get(o, "seed");

	if (v && v->type == JSON_INT && v->u.i >= 0)
		c->seed = (uint64_t)v->u.i;
	else if (v && v->type == JSON_FLOAT && v->u.f >= 0x1p63 &&
	         v->u.f <= 0x1p64)
		c->seed = v->u.f < 0x1p64 ? (uint64_t)v->u.f : UINT64_MAX;
	else if (v)
		return "seed";
	if (samp_bool(o, "seed_random", &sm->seed_random))
		return "seed_random";
	if (samp_bool(o, "remote", &sm->remote))
		return "remote";
	return NULL;
}

int session_sampling_parse(const char *json, size_t len,
                           struct session_sampling *sm, char *err,
                           size_t errlen)
{
	struct json_value *o = NULL;
	const char *bad;
	char jerr[160];

	memset(sm, 0, sizeof(*sm));
	sampler_config_default(&sm->c);
	if (json_parse(json, len, &o, jerr, sizeof(jerr))) {
		snprintf(err, errlen, "sampling settings: %s", jerr);
		return -1;
	}
	if (o->type != JSON_OBJECT) {
		json_free(o);
		snprintf(err, errlen, "sampling settings: not a JSON object");
		return -1;
	}
	bad = samp_fill(o, sm);
	json_free(o);
	if (bad) {
		snprintf(err, errlen,
		         "sampling settings: \"%s\" is out of range", bad);
		return -1;
	}
	return 0;
}

/* Record the settings in use with reply MSG_ID (just begun in the
   store). A failure is a notice: the reply itself is saved. */
void session_record_sampling(struct session *s, int64_t msg_id,
                             const struct session_cb *cb)
{
	struct session_sampling sm = {0};
	char msg[512], *json;

	if (s->st == NULL || msg_id == 0)
		return;
	sm.c = *sampler_config(s->smp);
	sm.c.n_probs = 0;
	sm.seed_random = s->seed_random;
	sm.remote = s->rem != NULL;
	if (sm.remote) /* what remote_chat sends: 31 bits */
		sm.c.seed &= 0x7fffffff;
	if ((json = session_sampling_json(&sm)) == NULL) {
		session_store_notice(cb, "record the reply's sampling",
		                     "out of memory", "the reply is saved");
		return;
	}
	if (store_msg_set_sampling(s->st, msg_id, json, msg, sizeof(msg)) !=
	    STORE_OK)
		session_store_notice(cb, "record the reply's sampling", msg,
		                     "the reply is saved");
	free(json);
}

int session_msg_sampling(struct session *s, size_t msg_index,
                         struct session_sampling *sm, char *err, size_t errlen)
{
	const struct session_msg *m;
	struct store_msg row;
	int rc = session_stored_reply(s, msg_index, &m, err, errlen);

	if (rc <= 0)
		return rc;
	if (store_msg_get(s->st, m->store_id, &row, err, errlen) != STORE_OK)
		return -1;
	rc = row.sampling_json == NULL ? 0
	     : session_sampling_parse(row.sampling_json,
	                              strlen(row.sampling_json), sm, err,
	                              errlen) == 0
	         ? 1
	         : -1;
	store_msg_clear(&row);
	return rc;
}

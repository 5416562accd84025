/*
 * session_branch.c - the conversation's branches: a reply branched at a
 * token of an older one, the siblings of a message, switching the active
 * branch.
 */
#include "session_int.h"

#include "engine.h"
#include "tok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int session_branch_at(struct session *s, size_t msg_index, int32_t token_pos,
                      int32_t forced_id, const struct session_cb *cb,
                      struct session_stats *st, char *err, size_t errlen)
{
	struct session_reply br;
	struct store_reports old = {0};
	int32_t *ids = NULL;
	const struct session_msg *m;
	int rc = -1;

	memset(&br, 0, sizeof(br));
	if (s->rem != NULL) {
		snprintf(err, errlen,
		         "branching at a token needs the local model's token "
		         "ids: not available for a remote model");
		return -1;
	}
	if (msg_index >= s->n_msgs || msg_index == 0 ||
	    s->msgs[msg_index].role != STORE_ROLE_ASSISTANT ||
	    s->msgs[msg_index - 1].role != STORE_ROLE_USER) {
		snprintf(err, errlen,
		         "message %zu is not a reply to a user message",
		         msg_index);
		return -1;
	}
	m = &s->msgs[msg_index];
	if (forced_id < 0 || forced_id >= engine_n_vocab(s->eng)) {
		snprintf(err, errlen, "token id %d is not in the vocabulary",
		         forced_id);
		return -1;
	}
	if (s->st == NULL || m->store_id == 0) {
		snprintf(err, errlen,
		         "message %zu is not stored: no token "
		         "reports to branch from",
		         msg_index);
		return -1;
	}
	if (store_msg_reports(s->st, m->store_id, &old, err, errlen) !=
	    STORE_OK)
		return -1;
	if (token_pos < 0 || (size_t)token_pos >= old.n) {
		snprintf(err, errlen,
		         "message %zu has %zu token reports; no token at "
		         "position %d",
		         msg_index, old.n, token_pos);
		goto out;
	}
	/* a remote model's reply (continued here with a local model) has
	   its reports stored with ids -1: nothing to replay */
	for (int32_t k = 0; k <= token_pos; k++)
		if (old.v[k].chosen < 0) {
			snprintf(err, errlen,
			         "message %zu came from a remote model: its "
			         "token ids are unknown here, it cannot be "
			         "branched at a token",
			         msg_index);
			goto out;
		}
	/* the kept ids, then the forced one (sampled ids never are eog
	   before the last report, which token_pos < n excludes) */
	ids = malloc(((size_t)token_pos + 1) * sizeof(*ids));
	if (ids == NULL)
		goto nomem;
	for (int32_t k = 0; k < token_pos; k++) {
		ids[k] = old.v[k].chosen;
		if (session_rep_copy(&br.rep, &old, (size_t)k))
			goto nomem;
	}
	ids[token_pos] = forced_id;
	if (session_rep_forced(s, &br.rep, &old, (size_t)token_pos, forced_id))
		goto nomem;
	br.replay = ids;
	br.n_replay = (size_t)token_pos + 1;
	br.end_after_replay = tok_is_eog(s->tok, forced_id);
	/* the old reply stays in the store as a sibling; the new one
	   becomes the leaf when it is stored */
	session_pop_to(s, msg_index);
	if (s->first > msg_index - 1)
		s->first = msg_index - 1;
	rc = session_reply(s, cb, st, &br, err, errlen);
	goto out;
nomem:
	snprintf(err, errlen, "out of memory");
	rc = -1;
out:
	store_reports_free(&br.rep);
	store_reports_free(&old);
	free(ids);
	return rc;
}

int session_sibling(struct session *s, size_t msg_index, int dir,
                    int64_t *msg_id, int32_t *which, int32_t *count, char *err,
                    size_t errlen)
{
	struct store_msg *v = NULL;
	const struct session_msg *m;
	int64_t parent = -1;
	size_t n = 0, self = 0, k = 0, nsib = 0;

	if (msg_index >= s->n_msgs ||
	    s->msgs[msg_index].role == STORE_ROLE_SYSTEM) {
		snprintf(err, errlen, "no message %zu", msg_index);
		return -1;
	}
	m = &s->msgs[msg_index];
	if (s->st == NULL || s->conv_id == 0 || m->store_id == 0) {
		snprintf(err, errlen, "message %zu is not stored", msg_index);
		return -1;
	}
	if (store_msg_list(s->st, s->conv_id, &v, &n, err, errlen) != STORE_OK)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (v[i].id == m->store_id)
			parent = v[i].parent_id;
	/* the siblings by id (store_msg_list's order): find M among them */
	for (size_t i = 0; i < n; i++) {
		if (v[i].parent_id != parent)
			continue;
		if (v[i].id == m->store_id)
			self = nsib;
		nsib++;
	}
	if (parent < 0 || nsib == 0) {
		store_msg_free(v, n);
		snprintf(err, errlen, "message %zu is not in the store",
		         msg_index);
		return -1;
	}
	k = (self + nsib + (size_t)(dir % (int)nsib + (int)nsib)) % nsib;
	for (size_t i = 0, j = 0; i < n; i++) {
		if (v[i].parent_id != parent)
			continue;
		if (j++ == k)
			*msg_id = v[i].id;
	}
	*which = (int32_t)k + 1;
	*count = (int32_t)nsib;
	store_msg_free(v, n);
	return 0;
}

int session_switch_branch(struct session *s, int64_t msg_id, char *err,
                          size_t errlen)
{
	struct store_conv c;
	struct store_msg *m = NULL;
	size_t n = 0, base = session_base(s);
	int rc;

	if (s->st == NULL || s->conv_id == 0) {
		snprintf(err, errlen, "the conversation is not stored");
		return -1;
	}
	if (store_conv_select(s->st, s->conv_id, msg_id, NULL, err, errlen) !=
	    STORE_OK)
		return -1;
	if (store_conv_get(s->st, s->conv_id, &c, &m, &n, err, errlen) !=
	    STORE_OK)
		return -1;
	/* the system prompt stays; the cache and align stay too: the next
	   turn's rendering diverges from them where the branches do
	   (session_prepare), so only what differs is evaluated */
	session_pop_to(s, base);
	rc = session_push_stored(s, m, n);
	store_msg_free(m, n);
	store_conv_clear(&c);
	s->first = session_base(s);
	if (rc) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

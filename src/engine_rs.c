/*
 * engine_rs.c - the recurrent state of a model with recurrent layers
 * (engine.h invariant 3): snapshots, the truncation they allow, and the
 * recurrent part of a saved state (version 3).
 *
 * NOTES ON THE DESIGN
 *
 * A KV cache is cut back by forgetting positions; a recurrent state
 * cannot be: it is one state that every token changed. So the engine
 * keeps copies of it (snapshots, in the backend's slots: device memory
 * on a GPU) at the positions a chat returns to, and a truncation goes to
 * one of those or to 0 (zeros), or fails and changes nothing. The
 * caller asks engine_rewind_point where it can go and re-evaluates from
 * there: the replies are then exactly those of a session that never cut
 * anything, at the cost of the tokens re-evaluated.
 *
 * Invariants: rs_pos[i] (i >= 1) is -1 or a position in 1..n_past whose
 * state slot i holds, positions distinct; slot 0 holds the state after
 * the tokens 0..n_past-1 unless rs_lost (a failed eval), when only a
 * truncation to a snapshot or to 0 makes the engine usable again.
 */
#include <stdio.h>
#include <string.h>

#include "engine_backend.h"
#include "model.h"

bool engine_recurrent(const struct engine *e)
{
	return e->model->cfg.n_recurrent > 0;
}

size_t engine_rs_bytes(const struct engine *e)
{
	size_t n = 0;

	for (int il = 0; il < e->model->cfg.n_layer; il++) {
		struct model_cache_desc d = model_layer_cache(e->model, il);

		if (d.kind == MODEL_CACHE_RECURRENT)
			n += (size_t)(d.conv_floats + d.state_floats) *
			     sizeof(float);
	}
	return n;
}

int engine_snap_at(const int32_t *pos, int32_t p)
{
	for (int i = 1; i <= ENGINE_RS_SNAPSHOTS; i++)
		if (pos[i] == p)
			return i;
	return 0;
}

int engine_snap_victim(const int32_t *pos)
{
	int slot = 0;

	for (int i = 1; i <= ENGINE_RS_SNAPSHOTS; i++) {
		if (pos[i] < 0)
			return i;
		if (slot == 0 || pos[i] < pos[slot])
			slot = i;
	}
	return slot;
}

int32_t engine_snap_below(const int32_t *pos, int32_t n)
{
	int32_t best = 0;

	for (int i = 1; i <= ENGINE_RS_SNAPSHOTS; i++)
		if (pos[i] <= n && pos[i] > best)
			best = pos[i];
	return best;
}

void engine_snap_drop(int32_t *pos, int32_t above)
{
	for (int i = 1; i <= ENGINE_RS_SNAPSHOTS; i++)
		if (pos[i] > above)
			pos[i] = -1;
}

/* The slot of the snapshot at POS, or 0 when none. */
static int engine_rs_slot(const struct engine *e, int32_t pos)
{
	return engine_snap_at(e->rs_pos, pos);
}

void engine_rs_reset(struct engine *e)
{
	char msg[256];

	engine_snap_drop(e->rs_pos, -1);
	e->rs_lost =
	    e->ops->rs_copy(e, 0, ENGINE_RS_ZERO, msg, sizeof(msg)) != 0;
}

int engine_rs_truncate(struct engine *e, int32_t n_keep)
{
	char msg[256];
	int src;

	if (n_keep == e->n_past && !e->rs_lost)
		return 0;
	src = n_keep == 0 ? ENGINE_RS_ZERO : engine_rs_slot(e, n_keep);
	if (src == 0 || e->ops->rs_copy(e, 0, src, msg, sizeof(msg)) != 0)
		return -1;
	e->rs_lost = false;
	engine_snap_drop(e->rs_pos, n_keep);
	return 0;
}

int32_t engine_rewind_point(const struct engine *e, int32_t n)
{
	int32_t best = 0;

	if (n > e->n_past)
		n = e->n_past;
	if (n < 0)
		n = 0;
	if (n == e->n_past && !e->rs_lost)
		return n;
	if (!engine_recurrent(e)) {
		/* window layers: where they hold the window, else the
		   nearest window snapshot below */
		return engine_window_at(e, n) ? n
		                              : engine_snap_below(e->ws_pos, n);
	}
	for (int i = 1; i <= ENGINE_RS_SNAPSHOTS; i++)
		if (e->rs_pos[i] <= n && e->rs_pos[i] > best &&
		    engine_window_at(e, e->rs_pos[i]))
			best = e->rs_pos[i];
	return best;
}

bool engine_snapshots(const struct engine *e)
{
	return engine_recurrent(e) ||
	       (engine_window_rows(e) > 0 && e->ops->ws_io != NULL);
}

/* A snapshot of the recurrent state at n_past (engine_snapshot's). */
static int engine_rs_snapshot(struct engine *e, char *err, size_t errlen)
{
	int slot;
	char msg[256];

	if (!engine_recurrent(e) || e->n_past == 0 ||
	    engine_rs_slot(e, e->n_past) != 0)
		return 0;
	if (e->rs_lost) {
		snprintf(err, errlen,
		         "no snapshot at %d: the recurrent state was lost by "
		         "a failed evaluation",
		         e->n_past);
		return -1;
	}
	slot = engine_snap_victim(e->rs_pos);
	e->rs_pos[slot] = -1;
	if (e->ops->rs_copy(e, slot, 0, msg, sizeof(msg)) != 0) {
		snprintf(err, errlen, "snapshot at %d: %s", e->n_past, msg);
		return -1;
	}
	e->rs_pos[slot] = e->n_past;
	return 0;
}

int engine_snapshot(struct engine *e, char *err, size_t errlen)
{
	return engine_rs_snapshot(e, err, errlen) != 0 ||
	               engine_ws_snapshot(e, err, errlen) != 0
	           ? -1
	           : 0;
}

/* Snapshots held. */
static uint32_t engine_rs_count(const struct engine *e)
{
	uint32_t n = 0;

	for (int i = 1; i <= ENGINE_RS_SNAPSHOTS; i++)
		n += e->rs_pos[i] >= 0;
	return n;
}

size_t engine_rs_state_bytes(const struct engine *e)
{
	size_t rb = engine_rs_bytes(e);

	return rb + 8 + (size_t)engine_rs_count(e) * (8 + rb);
}

int engine_rs_state_save(struct engine *e, char *p, char *err, size_t errlen)
{
	const size_t rb = engine_rs_bytes(e);
	uint32_t hdr[2] = {engine_rs_count(e), 0};
	char msg[256];

	if (e->rs_lost) {
		snprintf(err, errlen,
		         "the recurrent state was lost by a failed "
		         "evaluation: nothing to save");
		return -1;
	}
	if (e->ops->rs_io(e, 0, p, false, msg, sizeof(msg)) != 0)
		goto fail;
	p += rb;
	memcpy(p, hdr, sizeof(hdr));
	p += sizeof(hdr);
	for (int i = 1; i <= ENGINE_RS_SNAPSHOTS; i++) {
		int32_t pos[2] = {e->rs_pos[i], 0};

		if (e->rs_pos[i] < 0)
			continue;
		memcpy(p, pos, sizeof(pos));
		p += sizeof(pos);
		if (e->ops->rs_io(e, i, p, false, msg, sizeof(msg)) != 0)
			goto fail;
		p += rb;
	}
	return 0;
fail:
	snprintf(err, errlen,
	         "backend %s could not save the recurrent state: %s",
	         e->ops->name, msg);
	return -1;
}

/* The snapshot records at P (N of them, LEN bytes from P) checked:
 * positions in 1..N_PAST, distinct, with 4 zero bytes each. */
static int engine_rs_check(const struct engine *e, const char *p, uint32_t n,
                           int32_t n_past, char *err, size_t errlen)
{
	const size_t rb = engine_rs_bytes(e);
	int32_t seen[ENGINE_RS_SNAPSHOTS];

	for (uint32_t i = 0; i < n; i++) {
		int32_t pos[2];

		memcpy(pos, p + (size_t)i * (8 + rb), sizeof(pos));
		if (pos[0] < 1 || pos[0] > n_past || pos[1] != 0) {
			snprintf(err, errlen,
			         "state's snapshot %u is at position %d (of "
			         "1..%d)",
			         i, pos[0], n_past);
			return -1;
		}
		for (uint32_t k = 0; k < i; k++)
			if (seen[k] == pos[0]) {
				snprintf(err, errlen,
				         "state has two snapshots at "
				         "position %d",
				         pos[0]);
				return -1;
			}
		seen[i] = pos[0];
	}
	return 0;
}

int engine_rs_state_load(struct engine *e, const char *p, size_t len,
                         int32_t n_past, char *err, size_t errlen)
{
	const size_t rb = engine_rs_bytes(e);
	uint32_t hdr[2];
	char msg[256];

	if (len < rb + sizeof(hdr)) {
		snprintf(err, errlen,
		         "state's recurrent part has %zu bytes, expected at "
		         "least %zu",
		         len, rb + sizeof(hdr));
		return -1;
	}
	memcpy(hdr, p + rb, sizeof(hdr));
	if (hdr[0] > ENGINE_RS_SNAPSHOTS || hdr[1] != 0 ||
	    len != rb + sizeof(hdr) + (size_t)hdr[0] * (8 + rb)) {
		snprintf(
		    err, errlen,
		    "state's recurrent part: %u snapshots (at most %d) in "
		    "%zu bytes, expected %zu",
		    hdr[0], ENGINE_RS_SNAPSHOTS, len,
		    rb + sizeof(hdr) +
		        (size_t)(hdr[0] <= ENGINE_RS_SNAPSHOTS ? hdr[0] : 0) *
		            (8 + rb));
		return -1;
	}
	if (engine_rs_check(e, p + rb + sizeof(hdr), hdr[0], n_past, err,
	                    errlen))
		return -1;
	for (int i = 1; i <= ENGINE_RS_SNAPSHOTS; i++)
		e->rs_pos[i] = -1;
	if (e->ops->rs_io(e, 0, (void *)p, true, msg, sizeof(msg)) != 0)
		goto fail;
	p += rb + sizeof(hdr);
	for (uint32_t i = 0; i < hdr[0]; i++, p += 8 + rb) {
		int32_t pos;

		memcpy(&pos, p, sizeof(pos));
		if (e->ops->rs_io(e, (int)i + 1, (void *)(p + 8), true, msg,
		                  sizeof(msg)) != 0)
			goto fail;
		e->rs_pos[i + 1] = pos;
	}
	e->rs_lost = false;
	return 0;
fail:
	engine_rs_reset(e); /* not half a state */
	snprintf(err, errlen,
	         "backend %s could not load the recurrent state: %s",
	         e->ops->name, msg);
	return -1;
}

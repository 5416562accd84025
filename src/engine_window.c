/*
 * engine_window.c - sliding-window layers that keep only their window
 * (engine.h invariant 3): what their rows still serve, and snapshots of
 * the window at the positions a chat returns to.
 *
 * NOTES ON THE DESIGN
 *
 * A backend with window_ring keeps such a layer's positions [win_lo,
 * n_past) (its eval moves win_lo up, keeping window_slack positions
 * before the window). A truncation to n needs the win_need positions
 * before n: held when n - win_need >= win_lo. Further back, a regenerate
 * after a long reply would evaluate the whole conversation again; so,
 * as for a recurrent state, the engine keeps copies of the window rows
 * (the win_need positions before p) where the session returns: the
 * prompt's last id and the end of each turn (engine_snapshot). A
 * truncation to such a p copies them back to the rows' start (win_lo =
 * p - win_need); to anywhere else out of reach it fails, and
 * engine_rewind_point names the nearest place it can go.
 *
 * Invariants: ws_pos[i] (i >= 1) is -1 or a position in 1..n_past whose
 * window slot i holds, positions distinct; a shift, a state load and a
 * truncation below one drop it. Snapshots are not part of a saved state.
 */
#include <stdio.h>
#include <string.h>

#include "engine_backend.h"
#include "model.h"

int32_t engine_window_rows(const struct engine *e)
{
	return e->win_cap < e->n_ctx ? e->win_cap : 0;
}

bool engine_window_holds(const struct engine *e, int32_t n)
{
	/* the next token at n reads [n - win_need, n) */
	return n == 0 || e->win_lo == 0 || n - e->win_need >= e->win_lo;
}

bool engine_window_at(const struct engine *e, int32_t n)
{
	return engine_window_holds(e, n) || engine_snap_at(e->ws_pos, n) != 0;
}

void engine_ws_drop(struct engine *e, int32_t above)
{
	engine_snap_drop(e->ws_pos, above);
}

int engine_ws_truncate(struct engine *e, int32_t n_keep)
{
	char msg[256];
	int slot;

	if (n_keep == 0) {
		e->win_lo = 0;
		engine_ws_drop(e, 0);
		return 0;
	}
	if (!engine_window_holds(e, n_keep)) {
		slot = engine_snap_at(e->ws_pos, n_keep);
		if (slot == 0 || e->ops->ws_io == NULL ||
		    e->ops->ws_io(e, slot, n_keep, true, msg, sizeof(msg)) != 0)
			return -1;
		e->win_lo = n_keep > e->win_need ? n_keep - e->win_need : 0;
	}
	engine_ws_drop(e, n_keep);
	return 0;
}

int engine_ws_snapshot(struct engine *e, char *err, size_t errlen)
{
	int slot;
	char msg[256];

	if (engine_window_rows(e) == 0 || e->ops->ws_io == NULL ||
	    e->n_past == 0 || engine_snap_at(e->ws_pos, e->n_past) != 0)
		return 0;
	slot = engine_snap_victim(e->ws_pos);
	e->ws_pos[slot] = -1;
	if (e->ops->ws_io(e, slot, e->n_past, false, msg, sizeof(msg)) != 0) {
		snprintf(err, errlen, "window snapshot at %d: %s", e->n_past,
		         msg);
		return -1;
	}
	e->ws_pos[slot] = e->n_past;
	return 0;
}

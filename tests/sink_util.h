/*
 * sink_util.h - a reply's text and notices as the session tests collect
 * them through struct session_cb (t_session, t_session_rs). Static: each
 * test includes it once.
 */
#ifndef PARLEY_SINK_UTIL_H
#define PARLEY_SINK_UTIL_H

#include <stdio.h>
#include <string.h>

#include "tap.h"

/* Reply text collected by the piece callback; notices counted, the last
 * kept. */
struct sink {
	char buf[8192];
	size_t n;
	int notices;
	char notice[512];
};

static inline void sink_piece(void *ud, const char *t, size_t n)
{
	struct sink *k = ud;

	if (k->n + n < sizeof(k->buf)) {
		memcpy(k->buf + k->n, t, n);
		k->n += n;
		k->buf[k->n] = '\0';
	}
}

static inline void sink_notice(void *ud, const char *msg)
{
	struct sink *k = ud;

	k->notices++;
	snprintf(k->notice, sizeof(k->notice), "%s", msg);
	tap_diag("notice: %s", msg);
}

#endif /* PARLEY_SINK_UTIL_H */

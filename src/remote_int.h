/*
 * remote_int.h - what remote.c (connection, models, HTTP plumbing) and
 * remote_chat.c (the streamed reply) share. Private to the remote module.
 */
#ifndef PARLEY_REMOTE_INT_H
#define PARLEY_REMOTE_INT_H

#include "remote.h"
#include "sbuf.h"

#ifdef PARLEY_HAVE_CURL
#include <curl/curl.h>
#endif

#define REMOTE_ERR_BODY 8192       /* bytes of an error response kept */
#define REMOTE_GET_BODY (4u << 20) /* bytes of a /models answer */
#define REMOTE_BASE_MAX 2048       /* bytes of a base URL */

/* Whether the server gives logprobs (see the notes of remote.h, 2). */
enum remote_lp { REMOTE_LP_ASK, REMOTE_LP_YES, REMOTE_LP_NO };

struct remote {
	char *base;         /* URL ending in /v1 (owned) */
	char *model;        /* model name (owned) */
	char *key;          /* API key or NULL (owned, wiped on close) */
	int timeout_s;      /* connect / silence limit */
	atomic_int *cancel; /* borrowed, or NULL */
	enum remote_lp lp;  /* logprobs: ask, known yes, known no */
#ifdef PARLEY_HAVE_CURL
	CURL *curl; /* one handle: the connection is reused (owned) */
#endif
};

/* One HTTP exchange: what came back. */
struct remote_xfer {
	long status;          /* HTTP status, 0 before the headers */
	char retry_after[64]; /* a 429's Retry-After, printable, or "" */
	struct sbuf body;     /* a non-2xx body, or a GET's (bounded) */
	size_t body_max;      /* bound of body */
	/* a 2xx POST's bytes go here: 0 goes on, nonzero aborts */
	int (*sink)(void *ud, const char *p, size_t n);
	void *sink_ud;
	bool sink_stopped; /* the sink aborted the transfer */
	int curl_code;     /* CURLcode of the transfer */
	char errbuf[256];  /* libcurl's message */
};

/*
 * Run one request: GET PATH (BODY NULL) or POST of the JSON BODY, under
 * r->base. Fills X (x->sink and body_max set by the caller). Returns 0
 * when the transfer completed (any status), 1 when *cancel stopped it,
 * 2 when the sink did, -1 on a transport error (message in ERR).
 */
int remote_xfer_run(struct remote *r, const char *path, const char *body,
                    struct remote_xfer *x, char *err, size_t errlen);

/* The message for a non-2xx response X (the status, the server's own
   message, a 429's Retry-After), scrubbed of the key. */
void remote_http_error(const struct remote *r, const struct remote_xfer *x,
                       char *err, size_t errlen);

/* Replace every occurrence of the key in MSG by "[api key]" (in place,
   within ERRLEN). */
void remote_scrub(const struct remote *r, char *msg, size_t errlen);

/* Copy at most N bytes of S into DST[CAP] without control characters,
   cut at a character boundary, NUL-terminated. */
void remote_printable(char *dst, size_t cap, const char *s, size_t n);

/* Monotonic milliseconds. */
double remote_ms(void);

#endif /* PARLEY_REMOTE_INT_H */

/*
 * remote.h - a model served by an OpenAI-compatible server (vLLM, SGLang,
 * llama.cpp's server, llama-cpp-python, ollama): GET /v1/models and a
 * streamed POST /v1/chat/completions, over libcurl.
 *
 * NOTES ON THE DESIGN
 *
 * The remote is the session's other generator: where the local engine
 * turns rendered tokens into sampled tokens, the server takes the
 * conversation's messages (its own chat template) and streams the reply
 * as server-sent events (sse.h), each a JSON chunk (json.h) with a
 * content delta, optional logprobs and a finish reason; "data: [DONE]"
 * ends a complete stream.
 *
 * Invariants and contracts:
 *   1. Security: TLS certificates are always verified; plain http is
 *      refused for any host but localhost, 127.0.0.1 and ::1 unless
 *      insecure is set; a URL carrying a user or password is refused
 *      (keys go through api_key only); redirects are not followed. The
 *      API key is sent only in the Authorization header, is wiped on
 *      close and never appears in an error message (the server's own
 *      messages are scrubbed of it).
 *   2. Logprobs: the first request asks for logprobs and top_logprobs
 *      (REMOTE_TOP_LOGPROBS). A server that rejects the request with
 *      HTTP 400/422 gets it again without them once; when that succeeds
 *      the remote stops asking and says so once (remote_cb.notice), as it
 *      does for a server that accepts them and sends none.
 *   3. Cancelling: *cancel nonzero aborts the transfer (libcurl closes
 *      the connection, so the server stops generating); the reply so far
 *      is kept and the finish is REMOTE_INTERRUPTED. The flag is only
 *      read.
 *   4. A stream is complete only with its [DONE]: a connection that ends
 *      before it, a chunk that is not JSON or an error event is an error
 *      (remote_result.started tells whether reply text had begun).
 *
 * Without libcurl at configure time every entry point but the pure ones
 * (remote_url_check, remote_check_sampling) fails with a message saying
 * so.
 */
#ifndef PARLEY_REMOTE_H
#define PARLEY_REMOTE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sampler.h"

#define REMOTE_TOP_LOGPROBS    10 /* alternatives asked for per token */
#define REMOTE_DEFAULT_TIMEOUT 60 /* seconds to connect or between bytes */

struct remote;

/* How a remote is opened; zero / NULL fields take defaults. */
struct remote_opts {
	const char *url;     /* http(s)://host[:port][/path]; "/v1" is added
	                        unless the path ends with it (required) */
	const char *model;   /* NULL: the first of the server's models */
	const char *api_key; /* NULL: none; copied, wiped on close */
	bool insecure;       /* allow plain http to a non-loopback host */
	int timeout_s;       /* connect / silence limit; 0: the default */
	atomic_int *cancel;  /* nonzero stops a transfer (borrowed) */
};

/* One message of the conversation sent. */
struct remote_msg {
	const char *role;    /* "system", "user", "assistant" */
	const char *content; /* LEN bytes of UTF-8 */
	size_t len;
};

/* What the request asks of the server's sampler. */
struct remote_params {
	struct sampler_config samp; /* temperature, top_p, penalties, seed
	                               (remote_check_sampling first) */
	int32_t max_tokens;         /* <= 0: the server's limit */
	const char *const *stops;   /* stop strings (borrowed) */
	size_t n_stops;
};

/* Callbacks of one reply; any may be NULL. */
struct remote_cb {
	/* LEN bytes of reply text (whole UTF-8 characters) */
	void (*piece)(void *ud, const char *text, size_t len);
	/* one token's report from the server's logprobs (sampler.h) */
	void (*token)(void *ud, const struct sampler_report *rep);
	/* a message for the user; the reply goes on */
	void (*notice)(void *ud, const char *msg);
	/* the stream began (HTTP 200): called once, before any piece */
	void (*start)(void *ud);
	void *ud;
};

enum remote_finish {
	REMOTE_STOP,        /* the model ended (or a stop string) */
	REMOTE_LENGTH,      /* max_tokens or the server's context */
	REMOTE_INTERRUPTED, /* *cancel */
	REMOTE_ERROR        /* see the message */
};

/* How one reply went. */
struct remote_result {
	enum remote_finish finish;
	bool started;     /* the stream began (remote_cb.start called) */
	int http_status;  /* the response's status, 0 if none */
	int32_t n_tokens; /* tokens: the usage if sent, else the chunks */
	int32_t n_prompt; /* the usage's prompt tokens, 0 if not sent */
	double first_ms;  /* request to the first reply text */
	double total_ms;  /* request to the end */
	/* the server's own prompt timing, when it sends one (llama.cpp's
	   server: "timings" in the last chunk); 0 when it does not */
	int32_t server_prompt_n; /* prompt tokens it evaluated */
	double server_prompt_ms; /* its time on them */
};

/*
 * Check OPTS (URL, security rules), and without opts->model ask the
 * server for its models and take the first. Stores the remote in *OUT
 * (remote_close) and returns 0, or -1 with a message.
 */
int remote_open(const struct remote_opts *opts, struct remote **out, char *err,
                size_t errlen);

/* Free R, wiping the key. NULL allowed. */
void remote_close(struct remote *r);

/* The base URL in use (ending in /v1) and the model's name (borrowed). */
const char *remote_url(const struct remote *r);
const char *remote_model(const struct remote *r);

/*
 * The server's models: a malloc'd array of *N malloc'd names in *NAMES
 * (remote_models_free). Returns 0 or -1 with a message.
 */
int remote_models(struct remote *r, char ***names, size_t *n, char *err,
                  size_t errlen);
void remote_models_free(char **names, size_t n);

/*
 * Send the conversation MSGS[0, n) and stream the reply through CB (see
 * the notes). Returns 0 with res->finish STOP, LENGTH or INTERRUPTED, or
 * -1 with a message (res->finish ERROR; res->started tells whether text
 * may have been delivered).
 */
int remote_chat(struct remote *r, const struct remote_msg *msgs, size_t n,
                const struct remote_params *p, const struct remote_cb *cb,
                struct remote_result *res, char *err, size_t errlen);

/*
 * Check that URL may be used (http or https, a host, no user or
 * password; plain http only for loopback hosts unless INSECURE); writes
 * the base URL (ending in /v1) into BASE. Returns 0 or -1 with a message.
 */
int remote_url_check(const char *url, bool insecure, char *base, size_t baselen,
                     char *err, size_t errlen);

/*
 * Sampling options the API has no field for (top-k, min-p, the repeat
 * penalty and its window) must be at their defaults (sampler.h): 0, or -1
 * with a message naming each one that is not.
 */
int remote_check_sampling(const struct sampler_config *c, char *err,
                          size_t errlen);

/*
 * Read an API key from PATH: the first line, trimmed. The file must not
 * be readable or writable by the group or others. Stores a malloc'd key
 * in *KEY (the caller wipes and frees it) and returns 0, or -1 with a
 * message (that never holds the key).
 */
int remote_read_key_file(const char *path, char **key, char *err,
                         size_t errlen);

/* Whether parley was built with libcurl (remote models work). */
bool remote_available(void);

#endif /* PARLEY_REMOTE_H */

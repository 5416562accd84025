/*
 * remote.c - the connection to an OpenAI-compatible server: the URL and
 * its security rules, the API key, the model list, and the HTTP plumbing
 * the streamed chat (remote_chat.c) runs on. See remote.h.
 */
#include "remote_int.h"

#include "json.h"
#include "secretfile.h"
#include "utf8.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

double remote_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

bool remote_available(void)
{
#ifdef PARLEY_HAVE_CURL
	return true;
#else
	return false;
#endif
}

/* ---------- pure checks ---------- */

/* Whether HOST (brackets stripped) is this machine's loopback. */
static bool remote_loopback(const char *host, size_t n)
{
	return (n == 9 && strncasecmp(host, "localhost", 9) == 0) ||
	       (n == 9 && memcmp(host, "127.0.0.1", 9) == 0) ||
	       (n == 3 && memcmp(host, "::1", 3) == 0);
}

int remote_url_check(const char *url, bool insecure, char *base, size_t baselen,
                     char *err, size_t errlen)
{
	const char *a, *e, *h, *he, *path;
	bool tls;
	size_t plen;

	if (strncasecmp(url, "https://", 8) == 0) {
		tls = true;
		a = url + 8;
	} else if (strncasecmp(url, "http://", 7) == 0) {
		tls = false;
		a = url + 7;
	} else {
		snprintf(err, errlen,
		         "server URL '%.200s': must start with http:// or "
		         "https://",
		         url);
		return -1;
	}
	e = a + strcspn(a, "/?#");
	if (memchr(a, '@', (size_t)(e - a)) != NULL) {
		snprintf(err, errlen,
		         "server URL: a user or password in the URL is not "
		         "accepted (it would be stored with the conversation);"
		         " give the key with --api-key-env or api-key-file");
		return -1;
	}
	if (*e == '?' || *e == '#' || strpbrk(e, "?# \t\r\n") != NULL) {
		snprintf(err, errlen,
		         "server URL '%.200s': no query, fragment or spaces, "
		         "please",
		         url);
		return -1;
	}
	h = a;
	if (*h == '[') {
		he = memchr(h, ']', (size_t)(e - h));
		if (he == NULL)
			goto bad_host;
		h++;
	} else {
		he = memchr(h, ':', (size_t)(e - h));
		if (he == NULL)
			he = e;
	}
	if (he == h)
		goto bad_host;
	if (!tls && !insecure && !remote_loopback(h, (size_t)(he - h))) {
		snprintf(err, errlen,
		         "server URL '%.200s': plain http to a host other than "
		         "localhost would send the conversation and the key "
		         "unencrypted; use https, or --insecure if you must",
		         url);
		return -1;
	}
	path = e;
	plen = strlen(path);
	while (plen > 0 && path[plen - 1] == '/')
		plen--;
	size_t need = (size_t)(path - url) + plen + 4;
	bool has_v1 = plen >= 3 && memcmp(path + plen - 3, "/v1", 3) == 0;

	if (need >= baselen || need >= REMOTE_BASE_MAX) {
		snprintf(err, errlen, "server URL: longer than %d bytes",
		         REMOTE_BASE_MAX);
		return -1;
	}
	snprintf(base, baselen, "%.*s%s", (int)((size_t)(path - url) + plen),
	         url, has_v1 ? "" : "/v1");
	return 0;
bad_host:
	snprintf(err, errlen, "server URL '%.200s': no host name", url);
	return -1;
}

int remote_check_sampling(const struct sampler_config *c, char *err,
                          size_t errlen)
{
	struct sampler_config d;
	char names[200];
	size_t n = 0;

	sampler_config_default(&d);
	names[0] = '\0';
#define REMOTE_LACKS(cond, name)                                               \
	if (cond)                                                              \
		n += (size_t)snprintf(names + n, sizeof(names) - n, "%s%s",    \
		                      n ? ", " : "", name);
	REMOTE_LACKS(c->top_k != d.top_k, "top-k")
	REMOTE_LACKS(c->min_p != d.min_p, "min-p")
	REMOTE_LACKS(c->repeat_penalty != d.repeat_penalty, "repeat-penalty")
	REMOTE_LACKS(c->penalty_last_n != d.penalty_last_n, "repeat-last-n")
#undef REMOTE_LACKS
	if (n == 0)
		return 0;
	snprintf(err, errlen,
	         "the OpenAI API has no field for %s: a remote model cannot "
	         "use %s (leave %s at the default; the API has temp, "
	         "top-p, seed, stop, n-predict and the frequency and "
	         "presence penalties)",
	         names, strchr(names, ',') ? "them" : "it",
	         strchr(names, ',') ? "them" : "it");
	return -1;
}

int remote_read_key_file(const char *path, char **key, char *err, size_t errlen)
{
	if (secretfile_read("api-key-file", path, false, key, err, errlen))
		return -1;
	if (*key == NULL) {
		snprintf(err, errlen,
		         "api-key-file %s: no key on its first line", path);
		return -1;
	}
	return 0;
}

/* ---------- messages ---------- */

void remote_printable(char *dst, size_t cap, const char *s, size_t n)
{
	size_t i = 0, o = 0;

	if (cap == 0)
		return;
	while (i < n && o + 1 < cap) {
		size_t l = utf8_valid_len(s + i, n - i);

		if (l == 0) { /* not UTF-8: skip the byte */
			i++;
			continue;
		}
		if (o + l >= cap)
			break;
		if (l == 1 && ((unsigned char)s[i] < 0x20 || s[i] == 0x7f))
			dst[o++] = ' ';
		else
			memcpy(dst + o, s + i, l), o += l;
		i += l;
	}
	dst[o] = '\0';
}

void remote_scrub(const struct remote *r, char *msg, size_t errlen)
{
	secretfile_scrub(msg, errlen, r->key, "[api key]");
}

/* The server's own words in an error body: error.message, error (a
   string), detail or message; else the body itself. Into OUT. */
static void remote_server_words(const struct remote_xfer *x, char *out,
                                size_t cap)
{
	struct json_value *v = NULL;
	const struct json_value *m = NULL, *e;
	char jerr[64];

	out[0] = '\0';
	if (x->body.len == 0)
		return;
	if (json_parse(x->body.buf, x->body.len, &v, jerr, sizeof(jerr)) == 0 &&
	    v->type == JSON_OBJECT) {
		e = json_object_get(v, "error");
		if (e && e->type == JSON_OBJECT)
			m = json_object_get(e, "message");
		else if (e && e->type == JSON_STRING)
			m = e;
		if (m == NULL || m->type != JSON_STRING)
			m = json_object_get(v, "detail");
		if (m == NULL || m->type != JSON_STRING)
			m = json_object_get(v, "message");
	}
	if (m && m->type == JSON_STRING)
		remote_printable(out, cap, m->u.str.ptr, m->u.str.len);
	else if (v == NULL || m == NULL)
		remote_printable(out, cap, x->body.buf,
		                 x->body.len < 300 ? x->body.len : 300);
	json_free(v);
}

void remote_http_error(const struct remote *r, const struct remote_xfer *x,
                       char *err, size_t errlen)
{
	char words[320], tail[400];
	long s = x->status;

	remote_server_words(x, words, sizeof(words));
	snprintf(tail, sizeof(tail), "%s%s", words[0] ? ": " : "", words);
	if (s == 401 || s == 403)
		snprintf(err, errlen,
		         "the server refused the request (HTTP %ld, %s)%s; %s",
		         s, s == 401 ? "not authorised" : "forbidden", tail,
		         r->key ? "check the API key (--api-key-env, "
		                  "api-key-file)"
		                : "it may want an API key (--api-key-env, "
		                  "api-key-file)");
	else if (s == 404)
		snprintf(err, errlen,
		         "the server has no model '%.200s' or no OpenAI API "
		         "at %.300s (HTTP 404)%s; parley models --server URL "
		         "lists its models",
		         r->model ? r->model : "", r->base, tail);
	else if (s == 429)
		snprintf(
		    err, errlen,
		    "the server is rate limiting (HTTP 429)%s; %s%s%s", tail,
		    x->retry_after[0] ? "retry after " : "try again later",
		    x->retry_after,
		    x->retry_after[0] && strspn(x->retry_after, "0123456789") ==
		                             strlen(x->retry_after)
		        ? " s"
		        : "");
	else if (s >= 500)
		snprintf(err, errlen, "server error (HTTP %ld)%s", s, tail);
	else
		snprintf(err, errlen,
		         "the server rejected the request (HTTP "
		         "%ld)%s",
		         s, tail);
	remote_scrub(r, err, errlen);
}

#ifdef PARLEY_HAVE_CURL

/* ---------- HTTP over libcurl ---------- */

static pthread_once_t remote_once = PTHREAD_ONCE_INIT;
static CURLcode remote_global_rc;

static void remote_global_init(void)
{
	remote_global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* Whether the owner asked to stop. */
static bool remote_cancelled(const struct remote *r)
{
	return r->cancel && atomic_load(r->cancel) != 0;
}

struct remote_run {
	struct remote *r;
	struct remote_xfer *x;
	bool cancelled; /* the progress callback stopped the transfer */
};

/* libcurl's header callback: the status line and Retry-After. */
static size_t remote_on_header(char *p, size_t size, size_t n, void *ud)
{
	struct remote_run *u = ud;
	size_t len = size * n;

	if (len > 12 && strncasecmp(p, "retry-after:", 12) == 0) {
		size_t b = 12;

		while (b < len && (p[b] == ' ' || p[b] == '\t'))
			b++;
		remote_printable(
		    u->x->retry_after, sizeof(u->x->retry_after), p + b,
		    strcspn(p + b, "\r\n") < len - b ? strcspn(p + b, "\r\n")
		                                     : len - b);
	}
	return len;
}

/* libcurl's write callback: a 2xx body to the sink, others kept. */
static size_t remote_on_write(char *p, size_t size, size_t n, void *ud)
{
	struct remote_run *u = ud;
	struct remote_xfer *x = u->x;
	size_t len = size * n;

	if (x->status == 0)
		curl_easy_getinfo(u->r->curl, CURLINFO_RESPONSE_CODE,
		                  &x->status);
	if (remote_cancelled(u->r)) {
		u->cancelled = true;
		return 0;
	}
	if (x->status >= 200 && x->status < 300 && x->sink) {
		if (x->sink(x->sink_ud, p, len) != 0) {
			x->sink_stopped = true;
			return 0;
		}
		return len;
	}
	if (x->body.len < x->body_max)
		sbuf_add(&x->body, p,
		         len < x->body_max - x->body.len
		             ? len
		             : x->body_max - x->body.len);
	return len;
}

/* libcurl's progress callback: the cancel flag (at least once a second,
   also while the server is silent). */
static int remote_on_progress(void *ud, curl_off_t a, curl_off_t b,
                              curl_off_t c, curl_off_t d)
{
	struct remote_run *u = ud;

	(void)a, (void)b, (void)c, (void)d;
	if (remote_cancelled(u->r)) {
		u->cancelled = true;
		return 1;
	}
	return 0;
}

/* The message for a transport error CODE. */
static void remote_curl_error(const struct remote *r, CURLcode code,
                              const char *msg, char *err, size_t errlen)
{
	const char *m = msg[0] ? msg : curl_easy_strerror(code);

	switch (code) {
	case CURLE_COULDNT_CONNECT:
		snprintf(err, errlen, "cannot connect to the server at %s: %s",
		         r->base, m);
		break;
	case CURLE_COULDNT_RESOLVE_HOST:
		snprintf(err, errlen,
		         "cannot find the server's host (DNS) for %s: %s",
		         r->base, m);
		break;
	case CURLE_OPERATION_TIMEDOUT:
		snprintf(err, errlen,
		         "the server at %s did not answer for %d s "
		         "(server-timeout): %s",
		         r->base, r->timeout_s, m);
		break;
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_SSL_CACERT_BADFILE:
		snprintf(err, errlen, "TLS with %s failed: %s", r->base, m);
		break;
	case CURLE_GOT_NOTHING:
	case CURLE_RECV_ERROR:
	case CURLE_PARTIAL_FILE:
		snprintf(err, errlen, "the connection to %s broke: %s", r->base,
		         m);
		break;
	default:
		snprintf(err, errlen, "talking to %s: %s", r->base, m);
	}
	remote_scrub(r, err, errlen);
}

int remote_xfer_run(struct remote *r, const char *path, const char *body,
                    struct remote_xfer *x, char *err, size_t errlen)
{
	struct remote_run u = {r, x, false};
	struct curl_slist *h = NULL, *t;
	char url[REMOTE_BASE_MAX + 64], errbuf[CURL_ERROR_SIZE];
	CURLcode rc;

	x->status = 0;
	x->retry_after[0] = '\0';
	x->sink_stopped = false;
	x->errbuf[0] = errbuf[0] = '\0';
	snprintf(url, sizeof(url), "%s%s", r->base, path);
	curl_easy_reset(r->curl);
	h = curl_slist_append(h, "Accept: application/json, text/event-stream");
	/* no "Expect: 100-continue" wait before a long conversation */
	if (h)
		h = (t = curl_slist_append(h, "Expect:")) ? t : NULL;
	if (h && body)
		h = (t = curl_slist_append(h, "Content-Type: application/json"))
		        ? t
		        : NULL;
	if (h && r->key) {
		struct sbuf auth = SBUF_INIT;

		sbuf_adds(&auth, "Authorization: Bearer ");
		sbuf_adds(&auth, r->key);
		t = auth.failed ? NULL : curl_slist_append(h, auth.buf);
		if (auth.buf)
			explicit_bzero(auth.buf, auth.len);
		sbuf_free(&auth);
		if (t == NULL) {
			curl_slist_free_all(h);
			h = NULL;
		}
	}
	if (h == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	curl_easy_setopt(r->curl, CURLOPT_URL, url);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(r->curl, CURLOPT_PROTOCOLS_STR, "http,https");
#else
	curl_easy_setopt(r->curl, CURLOPT_PROTOCOLS,
	                 (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	curl_easy_setopt(r->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(r->curl, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(r->curl, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(r->curl, CURLOPT_SSL_VERIFYHOST, 2L);
	curl_easy_setopt(r->curl, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(r->curl, CURLOPT_USERAGENT, "parley/" PARLEY_VERSION);
	curl_easy_setopt(r->curl, CURLOPT_CONNECTTIMEOUT, (long)r->timeout_s);
	curl_easy_setopt(r->curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(r->curl, CURLOPT_LOW_SPEED_TIME, (long)r->timeout_s);
	curl_easy_setopt(r->curl, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(r->curl, CURLOPT_HEADERFUNCTION, remote_on_header);
	curl_easy_setopt(r->curl, CURLOPT_HEADERDATA, &u);
	curl_easy_setopt(r->curl, CURLOPT_WRITEFUNCTION, remote_on_write);
	curl_easy_setopt(r->curl, CURLOPT_WRITEDATA, &u);
	curl_easy_setopt(r->curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(r->curl, CURLOPT_XFERINFOFUNCTION, remote_on_progress);
	curl_easy_setopt(r->curl, CURLOPT_XFERINFODATA, &u);
	if (body) {
		curl_easy_setopt(r->curl, CURLOPT_POST, 1L);
		curl_easy_setopt(r->curl, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(r->curl, CURLOPT_POSTFIELDSIZE,
		                 (long)strlen(body));
	} else {
		curl_easy_setopt(r->curl, CURLOPT_HTTPGET, 1L);
		curl_easy_setopt(r->curl, CURLOPT_TIMEOUT, (long)r->timeout_s);
	}
	rc = curl_easy_perform(r->curl);
	/* the header list holds the key: wipe it before it is freed */
	for (t = h; t; t = t->next)
		explicit_bzero(t->data, strlen(t->data));
	curl_slist_free_all(h);
	curl_easy_setopt(r->curl, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(r->curl, CURLOPT_ERRORBUFFER, NULL);
	if (x->status == 0)
		curl_easy_getinfo(r->curl, CURLINFO_RESPONSE_CODE, &x->status);
	x->curl_code = (int)rc;
	remote_printable(x->errbuf, sizeof(x->errbuf), errbuf, strlen(errbuf));
	if (u.cancelled)
		return 1;
	if (x->sink_stopped)
		return 2;
	if (rc != CURLE_OK) {
		remote_curl_error(r, rc, x->errbuf, err, errlen);
		return -1;
	}
	return 0;
}

int remote_models(struct remote *r, char ***names, size_t *n, char *err,
                  size_t errlen)
{
	struct remote_xfer x;
	struct json_value *v = NULL;
	const struct json_value *d;
	char jerr[160];
	int rc;

	*names = NULL;
	*n = 0;
	memset(&x, 0, sizeof(x));
	x.body_max = REMOTE_GET_BODY;
	rc = remote_xfer_run(r, "/models", NULL, &x, err, errlen);
	if (rc == 1)
		snprintf(err, errlen, "interrupted");
	if (rc != 0)
		goto fail;
	if (x.status < 200 || x.status >= 300) {
		remote_http_error(r, &x, err, errlen);
		goto fail;
	}
	if (json_parse(x.body.buf ? x.body.buf : "", x.body.len, &v, jerr,
	               sizeof(jerr)) != 0 ||
	    (d = json_object_get(v, "data")) == NULL || d->type != JSON_ARRAY) {
		snprintf(
		    err, errlen,
		    "%s/models did not answer with an OpenAI model list%s%s",
		    r->base, v ? "" : ": ", v ? "" : jerr);
		goto fail;
	}
	*names = calloc(d->u.arr.n ? d->u.arr.n : 1, sizeof(**names));
	if (*names == NULL)
		goto nomem;
	for (size_t i = 0; i < d->u.arr.n; i++) {
		const struct json_value *id =
		    json_object_get(d->u.arr.items[i], "id");

		if (id == NULL || id->type != JSON_STRING)
			continue;
		(*names)[*n] = strndup(id->u.str.ptr, id->u.str.len);
		if ((*names)[*n] == NULL)
			goto nomem;
		++*n;
	}
	json_free(v);
	sbuf_free(&x.body);
	return 0;
nomem:
	snprintf(err, errlen, "out of memory");
fail:
	remote_models_free(*names, *n);
	*names = NULL;
	*n = 0;
	json_free(v);
	sbuf_free(&x.body);
	return -1;
}

int remote_open(const struct remote_opts *o, struct remote **out, char *err,
                size_t errlen)
{
	struct remote *r;
	char base[REMOTE_BASE_MAX];

	*out = NULL;
	if (o->url == NULL ||
	    remote_url_check(o->url, o->insecure, base, sizeof(base), err,
	                     errlen) != 0) {
		if (o->url == NULL)
			snprintf(err, errlen, "no server URL");
		return -1;
	}
	pthread_once(&remote_once, remote_global_init);
	if (remote_global_rc != CURLE_OK) {
		snprintf(err, errlen, "libcurl: %s",
		         curl_easy_strerror(remote_global_rc));
		return -1;
	}
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		goto nomem;
	r->timeout_s = o->timeout_s > 0 ? o->timeout_s : REMOTE_DEFAULT_TIMEOUT;
	r->cancel = o->cancel;
	r->base = strdup(base);
	r->key = o->api_key && o->api_key[0] ? strdup(o->api_key) : NULL;
	r->model = o->model ? strdup(o->model) : NULL;
	r->curl = curl_easy_init();
	if (r->base == NULL || r->curl == NULL ||
	    (o->api_key && o->api_key[0] && r->key == NULL) ||
	    (o->model && r->model == NULL))
		goto nomem;
	if (r->model == NULL) {
		char **names;
		size_t n;

		if (remote_models(r, &names, &n, err, errlen) != 0)
			goto fail;
		if (n == 0) {
			snprintf(err, errlen,
			         "the server at %s lists no models; give one "
			         "with --server-model",
			         r->base);
			remote_models_free(names, n);
			goto fail;
		}
		r->model = names[0];
		names[0] = NULL;
		remote_models_free(names, n);
	}
	*out = r;
	return 0;
nomem:
	snprintf(err, errlen, "out of memory");
fail:
	remote_close(r);
	return -1;
}

void remote_close(struct remote *r)
{
	if (r == NULL)
		return;
	if (r->curl)
		curl_easy_cleanup(r->curl);
	if (r->key) {
		explicit_bzero(r->key, strlen(r->key));
		free(r->key);
	}
	free(r->base);
	free(r->model);
	free(r);
}

#else /* no libcurl */

static const char remote_no_curl[] =
    "parley was built without libcurl, so it cannot talk to a server "
    "(install libcurl4-openssl-dev and run configure again)";

int remote_xfer_run(struct remote *r, const char *path, const char *body,
                    struct remote_xfer *x, char *err, size_t errlen)
{
	(void)r, (void)path, (void)body, (void)x;
	snprintf(err, errlen, "%s", remote_no_curl);
	return -1;
}

int remote_models(struct remote *r, char ***names, size_t *n, char *err,
                  size_t errlen)
{
	(void)r;
	*names = NULL;
	*n = 0;
	snprintf(err, errlen, "%s", remote_no_curl);
	return -1;
}

int remote_open(const struct remote_opts *o, struct remote **out, char *err,
                size_t errlen)
{
	(void)o;
	*out = NULL;
	snprintf(err, errlen, "%s", remote_no_curl);
	return -1;
}

void remote_close(struct remote *r)
{
	if (r == NULL)
		return;
	free(r->base);
	free(r->model);
	free(r->key);
	free(r);
}

#endif /* PARLEY_HAVE_CURL */

void remote_models_free(char **names, size_t n)
{
	if (names == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

const char *remote_url(const struct remote *r)
{
	return r->base;
}

const char *remote_model(const struct remote *r)
{
	return r->model;
}

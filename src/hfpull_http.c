/*
 * hfpull_http.c - `parley pull` on the wire (see hfpull.h): the listing,
 * and each file's download with its redirects, its resumption and its
 * check, over libcurl.
 *
 * Redirects are followed here, not by libcurl: the hub answers a download
 * with 302 to its CDN, and the token must go to the hub's own origin
 * only (hfpull.h, note 5), whatever libcurl version does by default. A
 * body is written to the partial file only from a 200 or 206; a 206 must
 * start where the partial file ends, a 200 replaces it.
 */
#include "hfpull_int.h"

#include "json.h"
#include "sbuf.h"
#include "sha256.h"
#include "utf8.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#ifdef PARLEY_HAVE_CURL
#include <curl/curl.h>
#endif

#define HFPULL_LIST_MAX  (16u << 20) /* bytes of a listing */
#define HFPULL_ERR_BODY  4096        /* bytes of an error body kept */
#define HFPULL_HOPS      10          /* redirects followed */
#define HFPULL_URL_MAX   8192        /* bytes of a URL */
#define HFPULL_TIMEOUT_S 60

bool hfpull_available(void)
{
#ifdef PARLEY_HAVE_CURL
	return true;
#else
	return false;
#endif
}

/* Copy at most N bytes of S into DST[CAP]: valid UTF-8, control
   characters as spaces. */
static void hfpull_printable(char *dst, size_t cap, const char *s, size_t n)
{
	size_t i = 0, o = 0;

	while (i < n && o + 1 < cap) {
		size_t l = utf8_valid_len(s + i, n - i);

		if (l == 0) {
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

/* The origin of URL ("http://host:80"; scheme and host case folded, the
   default port written) into OUT[N]. 0, or -1 when URL is not http(s). */
static int hfpull_origin(const char *url, char *out, size_t n)
{
	const char *a, *e, *colon;
	bool tls;
	size_t hl;

	if (strncasecmp(url, "https://", 8) == 0)
		tls = true, a = url + 8;
	else if (strncasecmp(url, "http://", 7) == 0)
		tls = false, a = url + 7;
	else
		return -1;
	e = a + strcspn(a, "/?#");
	if (e == a || memchr(a, '@', (size_t)(e - a)))
		return -1;
	colon = a[0] == '[' ? memchr(a, ']', (size_t)(e - a)) : a;
	colon = colon ? memchr(colon, ':', (size_t)(e - colon)) : NULL;
	hl = colon ? (size_t)(colon - a) : (size_t)(e - a);
	if (hl == 0 || hl + 16 > n)
		return -1;
	snprintf(out, n, "%s://%.*s:%.*s", tls ? "https" : "http", (int)hl, a,
	         colon ? (int)(e - colon - 1) : 3,
	         colon ? colon + 1
	         : tls ? "443"
	               : "80");
	for (char *p = out; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	return 0;
}

#ifdef PARLEY_HAVE_CURL

struct hfpull {
	char *endpoint;     /* without a trailing '/' (owned) */
	char origin[300];   /* the endpoint's (hfpull_origin) */
	char *token;        /* or NULL (owned, wiped on close) */
	char *cache;        /* the hub cache folder (owned) */
	atomic_int *cancel; /* borrowed, or NULL */
	int timeout_s;      /* connect and silence limit */
	void (*progress)(void *ud, const struct hfpull_progress *p);
	void *ud;
	CURL *curl; /* one handle: connections reused (owned) */
};

/* One GET, redirects included: what goes in, what came back. */
struct hfpull_get {
	struct hfpull *h;
	/* the download (blob NULL: the body is kept in body) */
	struct hfpull_blob *blob;
	struct sha256 *hash;         /* of the partial file's bytes */
	const struct hfpull_file *f; /* the file */
	double t0;                   /* when the transfer began (s) */
	double last_report;          /* when progress was last called */
	uint64_t start;              /* bytes on disk at t0 */
	/* what came back */
	long status;      /* of the last response */
	bool range_ok;    /* its Content-Range starts at have */
	bool began;       /* its body began */
	struct sbuf body; /* a listing, or an error body */
	size_t body_max;
	bool cancelled; /* *cancel stopped it */
	char stop[300]; /* why the write callback stopped it */
};

static pthread_once_t hfpull_once = PTHREAD_ONCE_INIT;
static CURLcode hfpull_global_rc;

static void hfpull_global_init(void)
{
	hfpull_global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static double hfpull_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static bool hfpull_cancelled(const struct hfpull *h)
{
	return h->cancel && atomic_load(h->cancel) != 0;
}

/* Report G's file as in STATE to the owner. */
static void hfpull_report(struct hfpull_get *g, int state)
{
	struct hfpull_progress p;

	if (g->h->progress == NULL)
		return;
	p.path = g->f->path;
	p.size = g->f->size;
	p.done = g->blob->have;
	p.start = g->start;
	p.secs = hfpull_now() - g->t0;
	p.state = state;
	g->last_report = hfpull_now();
	g->h->progress(g->h->ud, &p);
}

/* libcurl's header callback: a new response resets; Content-Range. */
static size_t hfpull_on_header(char *p, size_t size, size_t n, void *ud)
{
	struct hfpull_get *g = ud;
	size_t len = size * n;
	char line[128];

	if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) {
		g->range_ok = false;
		g->began = false;
		g->status = 0;
	} else if (g->blob && len > 14 && len < sizeof(line) &&
	           strncasecmp(p, "content-range:", 14) == 0) {
		uint64_t a;

		memcpy(line, p, len);
		line[len] = '\0';
		g->range_ok =
		    sscanf(line + 14, " bytes %" SCNu64 "-", &a) == 1 &&
		    a == g->blob->have;
	}
	return len;
}

/* The first bytes of a 2xx download body: where they go. 0, or -1 with
   g->stop. */
static int hfpull_begin_body(struct hfpull_get *g)
{
	g->began = true;
	if (g->status == 206 && !g->range_ok) {
		snprintf(g->stop, sizeof(g->stop),
		         "the server answered another byte range than the "
		         "one asked for");
		return -1;
	}
	if (g->status == 200 && g->blob->have > 0) {
		/* the server ignored the Range: the whole file again */
		if (hfpull_blob_restart(g->blob, g->stop, sizeof(g->stop)))
			return -1;
		sha256_init(g->hash);
		g->start = 0;
	}
	return 0;
}

/* Append N bytes at P to the partial file, hashing them. */
static int hfpull_append(struct hfpull_get *g, const char *p, size_t n)
{
	if (n > g->f->size - g->blob->have) {
		snprintf(g->stop, sizeof(g->stop),
		         "the server sent more than the %" PRIu64
		         " bytes the hub lists",
		         g->f->size);
		return -1;
	}
	sha256_update(g->hash, p, n);
	for (size_t o = 0; o < n;) {
		ssize_t w = write(g->blob->fd, p + o, n - o);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			snprintf(g->stop, sizeof(g->stop), "writing %s: %s",
			         g->blob->part, strerror(errno));
			return -1;
		}
		o += (size_t)w;
	}
	g->blob->have += n;
	return 0;
}

/* libcurl's write callback: a download's bytes to its partial file,
   anything else (a listing, an error) kept within body_max. */
static size_t hfpull_on_write(char *p, size_t size, size_t n, void *ud)
{
	struct hfpull_get *g = ud;
	size_t len = size * n;

	if (g->status == 0)
		curl_easy_getinfo(g->h->curl, CURLINFO_RESPONSE_CODE,
		                  &g->status);
	if (hfpull_cancelled(g->h)) {
		g->cancelled = true;
		return 0;
	}
	if (g->status >= 300 && g->status < 400)
		return len; /* a redirect's body */
	if (g->blob && (g->status == 200 || g->status == 206)) {
		if (!g->began && hfpull_begin_body(g))
			return 0;
		return hfpull_append(g, p, len) ? 0 : len;
	}
	if (g->body.len + len > g->body_max) {
		if (g->status >= 200 && g->status < 300) {
			snprintf(g->stop, sizeof(g->stop),
			         "the answer is larger than %zu bytes",
			         g->body_max);
			return 0;
		}
		len = g->body_max - g->body.len; /* an error: its start */
	}
	sbuf_add(&g->body, p, len);
	return size * n;
}

/* libcurl's progress callback: the cancel flag (at least once a second,
   also while the server is silent), and the owner's progress. */
static int hfpull_on_progress(void *ud, curl_off_t a, curl_off_t b,
                              curl_off_t c, curl_off_t d)
{
	struct hfpull_get *g = ud;

	(void)a, (void)b, (void)c, (void)d;
	if (hfpull_cancelled(g->h)) {
		g->cancelled = true;
		return 1;
	}
	if (g->blob && hfpull_now() - g->last_report >= 0.2)
		hfpull_report(g, HFPULL_GETTING);
	return 0;
}

/* The header list of one request to URL: the token only for the
   endpoint's origin; a Range from the partial file's end. */
static struct curl_slist *hfpull_headers(struct hfpull *h, const char *url,
                                         const struct hfpull_get *g)
{
	struct curl_slist *l = curl_slist_append(NULL, "Accept: */*"), *t;
	char origin[300], range[64];

	if (l && g->blob && g->blob->have > 0) {
		snprintf(range, sizeof(range), "Range: bytes=%" PRIu64 "-",
		         g->blob->have);
		l = (t = curl_slist_append(l, range)) ? t : NULL;
	}
	if (l && h->token && hfpull_origin(url, origin, sizeof(origin)) == 0 &&
	    strcmp(origin, h->origin) == 0) {
		struct sbuf auth = SBUF_INIT;

		sbuf_adds(&auth, "Authorization: Bearer ");
		sbuf_adds(&auth, h->token);
		t = auth.failed ? NULL : curl_slist_append(l, auth.buf);
		if (auth.buf)
			explicit_bzero(auth.buf, auth.len);
		sbuf_free(&auth);
		if (t == NULL) {
			curl_slist_free_all(l);
			l = NULL;
		}
	}
	return l;
}

/* Free a header list, wiping it first (it may hold the token). */
static void hfpull_headers_free(struct curl_slist *l)
{
	for (struct curl_slist *t = l; t; t = t->next)
		explicit_bzero(t->data, strlen(t->data));
	curl_slist_free_all(l);
}

/* The message for a transport error CODE of the GET of WHAT. */
static void hfpull_curl_error(struct hfpull_get *g, CURLcode code,
                              const char *msg, const char *what, char *err,
                              size_t errlen)
{
	const char *m = msg[0] ? msg : curl_easy_strerror(code);
	char tail[200] = "";

	if (g->blob && g->blob->have > 0)
		snprintf(tail, sizeof(tail),
		         "; %.1f of %.1f MB are kept in %s: run the same pull "
		         "again to continue",
		         (double)g->blob->have / 1e6, (double)g->f->size / 1e6,
		         g->blob->part);
	switch (code) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
		snprintf(err, errlen, "cannot reach %s for %s: %s%s",
		         g->h->endpoint, what, m, tail);
		break;
	case CURLE_OPERATION_TIMEDOUT:
		snprintf(err, errlen, "%s: no answer for %d s: %s%s", what,
		         g->h->timeout_s, m, tail);
		break;
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CONNECT_ERROR:
		snprintf(err, errlen, "%s: TLS failed: %s%s", what, m, tail);
		break;
	default:
		snprintf(err, errlen, "%s: the connection broke: %s%s", what, m,
		         tail);
	}
	hfpull_scrub(g->h->token, err, errlen);
}

/* GET URL into G, following redirects (the token only to the endpoint's
   origin, never from https down to http). 0 when a final answer came
   (any status), 1 when cancelled, -1 with a message. */
static int hfpull_get(struct hfpull *h, const char *url0, struct hfpull_get *g,
                      const char *what, char *err, size_t errlen)
{
	char url[HFPULL_URL_MAX], errbuf[CURL_ERROR_SIZE], clean[256];
	CURLcode rc;

	snprintf(url, sizeof(url), "%s", url0);
	for (int hop = 0;; hop++) {
		struct curl_slist *hdr = hfpull_headers(h, url, g);
		char *loc = NULL, o1[300], o2[300];

		if (hdr == NULL) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		g->status = 0;
		g->began = g->range_ok = false;
		errbuf[0] = g->stop[0] = '\0';
		sbuf_free(&g->body);
		curl_easy_reset(h->curl);
		curl_easy_setopt(h->curl, CURLOPT_URL, url);
#if LIBCURL_VERSION_NUM >= 0x075500
		curl_easy_setopt(h->curl, CURLOPT_PROTOCOLS_STR, "http,https");
#else
		curl_easy_setopt(h->curl, CURLOPT_PROTOCOLS,
		                 (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
		curl_easy_setopt(h->curl, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(h->curl, CURLOPT_FOLLOWLOCATION, 0L);
		curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, hdr);
		curl_easy_setopt(h->curl, CURLOPT_USERAGENT,
		                 "parley/" PARLEY_VERSION);
		curl_easy_setopt(h->curl, CURLOPT_CONNECTTIMEOUT,
		                 (long)h->timeout_s);
		curl_easy_setopt(h->curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(h->curl, CURLOPT_LOW_SPEED_TIME,
		                 (long)h->timeout_s);
		curl_easy_setopt(h->curl, CURLOPT_ERRORBUFFER, errbuf);
		curl_easy_setopt(h->curl, CURLOPT_HEADERFUNCTION,
		                 hfpull_on_header);
		curl_easy_setopt(h->curl, CURLOPT_HEADERDATA, g);
		curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION,
		                 hfpull_on_write);
		curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, g);
		curl_easy_setopt(h->curl, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(h->curl, CURLOPT_XFERINFOFUNCTION,
		                 hfpull_on_progress);
		curl_easy_setopt(h->curl, CURLOPT_XFERINFODATA, g);
		if (g->blob == NULL)
			curl_easy_setopt(h->curl, CURLOPT_ACCEPT_ENCODING, "");
		rc = curl_easy_perform(h->curl);
		hfpull_headers_free(hdr);
		curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, NULL);
		curl_easy_setopt(h->curl, CURLOPT_ERRORBUFFER, NULL);
		if (g->status == 0)
			curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE,
			                  &g->status);
		if (g->cancelled)
			return 1;
		if (g->stop[0]) {
			snprintf(err, errlen, "%s: %s", what, g->stop);
			return -1;
		}
		if (rc != CURLE_OK) {
			hfpull_printable(clean, sizeof(clean), errbuf,
			                 strlen(errbuf));
			hfpull_curl_error(g, rc, clean, what, err, errlen);
			return -1;
		}
		if (g->status < 300 || g->status >= 400)
			return 0;
		curl_easy_getinfo(h->curl, CURLINFO_REDIRECT_URL, &loc);
		if (loc == NULL || hop >= HFPULL_HOPS ||
		    hfpull_origin(url, o1, sizeof(o1)) ||
		    hfpull_origin(loc, o2, sizeof(o2)) ||
		    (strncmp(o1, "https:", 6) == 0 &&
		     strncmp(o2, "https:", 6) != 0) ||
		    strlen(loc) >= sizeof(url)) {
			snprintf(err, errlen,
			         "%s: the server's redirect (HTTP %ld) %s",
			         what, g->status,
			         loc == NULL ? "names no place"
			         : hop >= HFPULL_HOPS
			             ? "goes round in circles"
			             : "leads to a URL that is "
			               "refused (not https, or "
			               "too long)");
			return -1;
		}
		memmove(url, loc, strlen(loc) + 1);
	}
}

/* The server's own words in G's error body (its JSON "error", a string
   or an object's "message"), as ": WORDS", or "" - printable, bounded,
   scrubbed of the token. */
static void hfpull_words(const struct hfpull_get *g, char *out, size_t cap)
{
	struct json_value *v = NULL;
	const struct json_value *m = NULL;
	char jerr[64];

	out[0] = '\0';
	if (g->body.len == 0 || g->body.failed ||
	    json_parse(g->body.buf, g->body.len, &v, jerr, sizeof(jerr)) != 0)
		return;
	m = json_object_get(v, "error");
	if (m && m->type == JSON_OBJECT)
		m = json_object_get(m, "message");
	if (m == NULL || m->type != JSON_STRING)
		m = json_object_get(v, "message");
	if (m && m->type == JSON_STRING && cap > 2) {
		snprintf(out, cap, ": ");
		hfpull_printable(out + 2, cap - 2, m->u.str.ptr,
		                 m->u.str.len < 200 ? m->u.str.len : 200);
		hfpull_scrub(g->h->token, out, cap);
	}
	json_free(v);
}

/* The message for G's non-2xx answer to the GET of WHAT of repository
   REPO. */
static void hfpull_status_error(const struct hfpull_get *g, const char *repo,
                                const char *what, char *err, size_t errlen)
{
	const struct hfpull *h = g->h;
	char words[260];
	long s = g->status;

	hfpull_words(g, words, sizeof(words));
	if (s == 401 && h->token == NULL)
		snprintf(err, errlen,
		         "%s: the hub refused it (HTTP 401%s): %s does not "
		         "exist, or it is private or gated; check the name, or "
		         "set HF_TOKEN to a token with access "
		         "(https://huggingface.co/settings/tokens)",
		         what, words, repo);
	else if (s == 401)
		snprintf(err, errlen,
		         "%s: the hub refused the token (HTTP 401%s): check "
		         "HF_TOKEN or the token file, and the name %s",
		         what, words, repo);
	else if (s == 403)
		snprintf(err, errlen,
		         "%s: the hub refused it (HTTP 403%s): %s is gated; "
		         "accept its terms on %s/%s with the account of the "
		         "token",
		         what, words, repo, h->endpoint, repo);
	else if (s == 404)
		snprintf(err, errlen, "%s: not on %s (HTTP 404%s)", what,
		         h->endpoint, words);
	else if (s == 416)
		snprintf(err, errlen,
		         "%s: the server refused to continue the partial file "
		         "(HTTP 416)",
		         what);
	else
		snprintf(err, errlen, "%s: the hub answered HTTP %ld%s%s", what,
		         s, words,
		         s == 429 || s >= 500 ? "; try again later" : "");
	hfpull_scrub(h->token, err, errlen);
}

int hfpull_open(const struct hfpull_opts *o, struct hfpull **out, char *err,
                size_t errlen)
{
	struct hfpull *h;
	size_t n;

	*out = NULL;
	n = strlen(o->endpoint);
	while (n > 0 && o->endpoint[n - 1] == '/')
		n--;
	if (n >= 2048 || strpbrk(o->endpoint, "?# \t\r\n")) {
		snprintf(err, errlen, "HF_ENDPOINT: not a plain URL");
		return -1;
	}
	pthread_once(&hfpull_once, hfpull_global_init);
	if (hfpull_global_rc != CURLE_OK) {
		snprintf(err, errlen, "libcurl: %s",
		         curl_easy_strerror(hfpull_global_rc));
		return -1;
	}
	h = calloc(1, sizeof(*h));
	if (h == NULL)
		goto nomem;
	h->endpoint = strndup(o->endpoint, n);
	if (h->endpoint == NULL)
		goto nomem;
	if (hfpull_origin(h->endpoint, h->origin, sizeof(h->origin))) {
		snprintf(
		    err, errlen,
		    "HF_ENDPOINT '%.200s': must be http:// or https:// and "
		    "a host (no user or password)",
		    h->endpoint);
		goto fail;
	}
	if (o->token && strncmp(h->origin, "http:", 5) == 0 &&
	    strncmp(h->origin, "http://localhost:", 17) &&
	    strncmp(h->origin, "http://127.0.0.1:", 17) &&
	    strncmp(h->origin, "http://[::1]:", 13)) {
		snprintf(err, errlen,
		         "HF_ENDPOINT '%.200s' is plain http: the token would "
		         "travel unencrypted; use https, or unset HF_TOKEN",
		         h->endpoint);
		goto fail;
	}
	h->timeout_s = o->timeout_s > 0 ? o->timeout_s : HFPULL_TIMEOUT_S;
	h->cancel = o->cancel;
	h->progress = o->progress;
	h->ud = o->ud;
	h->token = o->token ? strdup(o->token) : NULL;
	h->cache = strdup(o->cache);
	h->curl = curl_easy_init();
	if ((o->token && h->token == NULL) || h->cache == NULL ||
	    h->curl == NULL)
		goto nomem;
	*out = h;
	return 0;
nomem:
	snprintf(err, errlen, "out of memory");
fail:
	hfpull_close(h);
	return -1;
}

void hfpull_close(struct hfpull *h)
{
	if (h == NULL)
		return;
	if (h->curl)
		curl_easy_cleanup(h->curl);
	hfpull_token_free(h->token);
	free(h->endpoint);
	free(h->cache);
	free(h);
}

int hfpull_list(struct hfpull *h, const char *repo, struct hfpull_repo *r,
                char *err, size_t errlen)
{
	struct hfpull_get g = {.h = h, .body_max = HFPULL_LIST_MAX};
	char url[HFPULL_URL_MAX], what[300];
	int rc;

	memset(r, 0, sizeof(*r));
	snprintf(url, sizeof(url), "%s/api/models/%s/revision/main?blobs=true",
	         h->endpoint, repo);
	snprintf(what, sizeof(what), "the listing of %s", repo);
	rc = hfpull_get(h, url, &g, what, err, errlen);
	if (rc == 0 && g.status != 200) {
		hfpull_status_error(&g, repo, what, err, errlen);
		rc = -1;
	}
	if (rc == 0 && g.body.failed) {
		snprintf(err, errlen, "out of memory");
		rc = -1;
	}
	if (rc == 0)
		rc = hfpull_parse_listing(g.body.buf ? g.body.buf : "",
		                          g.body.len, repo, r, err, errlen);
	sbuf_free(&g.body);
	return rc;
}

/* The resolve URL of file F of R into URL[N]: the path percent-encoded
   but for its slashes. */
static void hfpull_file_url(const struct hfpull *h, const struct hfpull_repo *r,
                            const struct hfpull_file *f, char *url, size_t n)
{
	static const char xd[] = "0123456789ABCDEF";
	size_t o = (size_t)snprintf(url, n, "%s/%s/resolve/%s/", h->endpoint,
	                            r->name, r->commit);

	for (const unsigned char *p = (const void *)f->path; *p && o + 4 < n;
	     p++) {
		if (isalnum(*p) || strchr("-._~/", *p))
			url[o++] = (char)*p;
		else {
			url[o++] = '%';
			url[o++] = xd[*p >> 4];
			url[o++] = xd[*p & 15];
		}
	}
	url[o < n ? o : n - 1] = '\0';
}

/* Hash the partial file's first B->have bytes into S (resuming). 0, 1
   (cancelled), or -1 with a message. */
static int hfpull_hash_part(struct hfpull *h, struct hfpull_blob *b,
                            struct sha256 *s, char *err, size_t errlen)
{
	char buf[1 << 15];

	for (uint64_t off = 0; off < b->have;) {
		size_t want =
		    b->have - off < sizeof(buf) ? b->have - off : sizeof(buf);
		ssize_t n = pread(b->fd, buf, want, (off_t)off);

		if (hfpull_cancelled(h))
			return 1;
		if (n <= 0) {
			snprintf(err, errlen, "reading %s: %s", b->part,
			         n < 0 ? strerror(errno) : "it got shorter");
			return -1;
		}
		sha256_update(s, buf, (size_t)n);
		off += (uint64_t)n;
	}
	return 0;
}

/* Download file F of R into the open blob B (resumed from B->have):
   0 with the file whole and hashed right, 1 cancelled, -1 with a
   message. */
static int hfpull_download(struct hfpull *h, const struct hfpull_repo *r,
                           const struct hfpull_file *f, struct hfpull_blob *b,
                           char *err, size_t errlen)
{
	struct sha256 s;
	struct hfpull_get g = {
	    .h = h, .blob = b, .hash = &s, .f = f, .body_max = HFPULL_ERR_BODY};
	char url[HFPULL_URL_MAX], what[1200], got[65];
	uint8_t d[SHA256_LEN];
	int rc;

	snprintf(what, sizeof(what), "%s: %s", r->name, f->path);
	sha256_init(&s);
	g.t0 = hfpull_now();
	g.start = b->have;
	if (b->have > 0)
		hfpull_report(&g, HFPULL_CHECKING);
	rc = hfpull_hash_part(h, b, &s, err, errlen);
	g.t0 = hfpull_now();
	g.start = b->have;
	hfpull_file_url(h, r, f, url, sizeof(url));
	for (int again = 0; rc == 0 && b->have < f->size; again++) {
		rc = hfpull_get(h, url, &g, what, err, errlen);
		if (rc == 0 && g.status == 416 && again == 0 && b->have > 0) {
			/* the server will not continue it: from the start */
			rc = hfpull_blob_restart(b, err, errlen);
			sha256_init(&s);
			g.start = 0;
			continue;
		}
		if (rc == 0 && g.status != 200 && g.status != 206) {
			hfpull_status_error(&g, r->name, what, err, errlen);
			rc = -1;
		} else if (rc == 0 && b->have != f->size) {
			snprintf(
			    err, errlen,
			    "%s: the server ended the file after %.1f of "
			    "%.1f MB; they are kept in %s: run the same pull "
			    "again to continue",
			    what, (double)b->have / 1e6, (double)f->size / 1e6,
			    b->part);
			rc = -1;
		}
		break;
	}
	sbuf_free(&g.body);
	if (rc != 0)
		return rc;
	sha256_final(&s, d);
	sha256_hex(d, got);
	if (strcmp(got, f->sha256) != 0) {
		hfpull_blob_discard(b);
		snprintf(
		    err, errlen,
		    "%s: SHA-256 mismatch: the hub lists %s, the bytes "
		    "downloaded give %s; they were removed (run the pull "
		    "again; if it happens again, the file on the server is "
		    "broken)",
		    what, f->sha256, got);
		return -1;
	}
	return 0;
}

int hfpull_fetch(struct hfpull *h, const struct hfpull_repo *r, size_t i,
                 char **path, char *err, size_t errlen)
{
	const struct hfpull_file *f = &r->v[i];
	struct hfpull_blob b;
	struct hfpull_get g = {.h = h, .blob = &b, .f = f};
	int rc, state = HFPULL_HAD;

	*path = NULL;
	if (f->sha256[0] == '\0') {
		snprintf(err, errlen,
		         "%s: %s is not an LFS file: no SHA-256 to check it by",
		         r->name, f->path);
		return -1;
	}
	if (hfpull_blob_open(h->cache, r->name, f, &b, err, errlen))
		return -1;
	g.t0 = hfpull_now();
	g.start = b.have;
	if (!b.complete) {
		state = HFPULL_DONE;
		rc = hfpull_download(h, r, f, &b, err, errlen);
		if (rc == 0)
			rc = hfpull_blob_commit(&b, err, errlen);
		if (rc != 0) {
			hfpull_blob_close(&b);
			return rc;
		}
	}
	b.have = f->size;
	hfpull_report(&g, state);
	hfpull_blob_close(&b);
	return hfpull_link(h->cache, r, f, path, err, errlen);
}

#else /* no libcurl */

static const char hfpull_no_curl[] =
    "parley was built without libcurl, so it cannot download (install "
    "libcurl4-openssl-dev and run configure again)";

int hfpull_open(const struct hfpull_opts *o, struct hfpull **out, char *err,
                size_t errlen)
{
	(void)o;
	(void)hfpull_origin, (void)hfpull_printable;
	*out = NULL;
	snprintf(err, errlen, "%s", hfpull_no_curl);
	return -1;
}

void hfpull_close(struct hfpull *h)
{
	(void)h;
}

int hfpull_list(struct hfpull *h, const char *repo, struct hfpull_repo *r,
                char *err, size_t errlen)
{
	(void)h, (void)repo;
	memset(r, 0, sizeof(*r));
	snprintf(err, errlen, "%s", hfpull_no_curl);
	return -1;
}

int hfpull_fetch(struct hfpull *h, const struct hfpull_repo *r, size_t i,
                 char **path, char *err, size_t errlen)
{
	(void)h, (void)r, (void)i;
	*path = NULL;
	snprintf(err, errlen, "%s", hfpull_no_curl);
	return -1;
}

#endif /* PARLEY_HAVE_CURL */

/*
 * store_report.c - token reports: the BLOB format, reading and writing
 * the token_reports table (schema version 3; store.h, rule 5).
 *
 * NOTES ON THE DESIGN
 *
 * A message's reports are rows of token_reports(message_id, first_pos,
 * n_tokens, data): chunks covering positions [first_pos, first_pos +
 * n_tokens) of the reply, which must follow each other from position 0.
 * A reply in progress adds one chunk per periodic update (only the new
 * tokens are written); finishing it replaces the chunks by a single one.
 *
 * The BLOB of a chunk, version 2; integers little-endian, floats IEEE-754
 * binary32 little-endian:
 *
 *   header   u8 version (2), u8 0, u16 0, u32 n_tokens, u32 n_texts
 *   texts    n_texts x { u32 key, u16 len, len bytes }   keys ascending,
 *            each key once: the bytes of every token the chunk mentions
 *   tokens   n_tokens x {
 *              u8 flags (STORE_REPORT_EOG | STORE_REPORT_FORCED),
 *              u8 n_top (<= STORE_REPORT_TOP), u32 chosen key,
 *              f32 prob, f32 raw_logprob, f32 entropy, f32 raw_entropy,
 *              u32 n_kept,
 *              n_top x { u32 key, f32 logit, f32 logprob } }
 *
 * A key names a text. A key below 2^30 is a token id (its text shared by
 * every use of the id within the chunk). An id of -1 (unknown: a remote
 * model's token, sampler.h, whose text came with it) is stored as a key
 * in [2^30, 2^31): 2^30 + k for the k-th id -1 of the chunk, counted in
 * token order (chosen, then top[0..n_top)), each with its own text; it
 * decodes to id -1 and that text. A remote token therefore costs
 * 6 + len more bytes per text than a local one (no sharing).
 *
 * Version 1 (before remote reports) is version 2 without keys of 2^30 or
 * more; it is still read, never written.
 *
 * A token costs 26 + 12 * n_top bytes plus the texts of the keys it
 * brings to the chunk (6 + len bytes each).
 *
 * Invariants checked on decoding (the BLOB is hostile input; a fuzz
 * harness may feed it anything): the version is 1 or 2, every length
 * fits in what is left, the header's n_tokens equals the row's, keys are
 * below 2^31 (2^30 in version 1) and every key used has a text, flags and
 * n_top are in range, probabilities are NaN or in [0, 1], and no byte is
 * left over. A failure is STORE_ECORRUPT naming the message and the byte
 * offset; nothing is appended then.
 */
#include "store_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPORT_VERSION  2          /* written; 1 is still read */
#define REPORT_HDR      12         /* header bytes */
#define REPORT_TOK      26         /* fixed bytes of a token */
#define REPORT_CAND     12         /* bytes of a candidate */
#define REPORT_MAX_ID   (1u << 30) /* ids are below this (sampler.h) */
#define REPORT_MAX_KEY  (1u << 31) /* keys of id -1 are below this */
#define REPORT_TEXT_MAX 65535      /* bytes of one token text */

/* The set ------------------------------------------------------------------ */

void store_reports_free(struct store_reports *r)
{
	free(r->v);
	free(r->text);
	memset(r, 0, sizeof(*r));
}

int store_reports_text(struct store_reports *r, const char *p, size_t len,
                       uint32_t *off)
{
	if (len > UINT32_MAX - r->text_len)
		return -1;
	/* allocated on the first text, even an empty one: r->text + off is
	   then always a valid pointer (NULL + 0 is undefined behaviour; the
	   store_reports fuzz harness found it) */
	if (r->text_len + len > r->text_cap || r->text == NULL) {
		size_t cap = r->text_cap ? r->text_cap : 256;
		char *t;

		while (cap < r->text_len + len)
			cap *= 2;
		if ((t = realloc(r->text, cap)) == NULL)
			return -1;
		r->text = t;
		r->text_cap = cap;
	}
	if (len)
		memcpy(r->text + r->text_len, p, len);
	*off = (uint32_t)r->text_len;
	r->text_len += len;
	return 0;
}

int store_reports_push(struct store_reports *r,
                       const struct store_tok_report *t)
{
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 64;
		struct store_tok_report *v = realloc(r->v, cap * sizeof(*v));

		if (v == NULL)
			return -1;
		r->v = v;
		r->cap = cap;
	}
	r->v[r->n++] = *t;
	return 0;
}

/* Encoding ------------------------------------------------------------------
 */

/* One token text of a chunk: its key (an id, or 2^30 + k for the k-th id
   -1) and where its bytes are in the set. */
struct rtext {
	uint32_t key;
	uint32_t off, len;
};

static int rtext_cmp(const void *a, const void *b)
{
	const struct rtext *x = a, *y = b;

	return (x->key > y->key) - (x->key < y->key);
}

/* The key of ID: the id itself, or for -1 the next remote key (*K counts
   them; the encoder's two passes visit the ids in the same order). */
static uint32_t rtext_key(int32_t id, uint32_t *k)
{
	return id >= 0 ? (uint32_t)id : REPORT_MAX_ID + (*k)++;
}

static unsigned char *put_u16(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
	return p + 2;
}

static unsigned char *put_u32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
	return p + 4;
}

static unsigned char *put_f32(unsigned char *p, float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return put_u32(p, u);
}

/* Check report T of R for encoding; a message in err on failure. */
static int check_report(const struct store_reports *r,
                        const struct store_tok_report *t, size_t pos, char *err,
                        size_t errlen)
{
	bool ok = t->chosen >= -1 && t->chosen < (int32_t)REPORT_MAX_ID &&
	          (t->flags & ~3u) == 0 && t->n_top >= 0 &&
	          t->n_top <= STORE_REPORT_TOP && t->n_kept >= 0 &&
	          (size_t)t->text_off + t->text_len <= r->text_len &&
	          t->text_len <= REPORT_TEXT_MAX;

	for (int32_t j = 0; ok && j < t->n_top; j++) {
		const struct store_tok_cand *c = &t->top[j];

		ok = c->id >= -1 && c->id < (int32_t)REPORT_MAX_ID &&
		     (size_t)c->text_off + c->text_len <= r->text_len &&
		     c->text_len <= REPORT_TEXT_MAX;
	}
	if (!ok)
		snprintf(err, errlen,
		         "token report at position %zu is out of range "
		         "(id, flags, n_top or text)",
		         pos);
	return ok ? STORE_OK : STORE_EINVAL;
}

/* The distinct texts of R->v[from, to), sorted by key, into *OUT (*N).
   Every id -1 gets a key of its own (at most (1 + STORE_REPORT_TOP) *
   STORE_REPORTS_MAX of them: far below 2^30). */
static int collect_texts(const struct store_reports *r, size_t from, size_t to,
                         struct rtext **out, size_t *n)
{
	size_t cap = (to - from) * (1 + STORE_REPORT_TOP), k = 0, u = 0;
	uint32_t rk = 0;
	struct rtext *v = malloc((cap ? cap : 1) * sizeof(*v));

	if (v == NULL)
		return -1;
	for (size_t i = from; i < to; i++) {
		const struct store_tok_report *t = &r->v[i];

		v[k++] = (struct rtext){rtext_key(t->chosen, &rk), t->text_off,
		                        t->text_len};
		for (int32_t j = 0; j < t->n_top; j++)
			v[k++] = (struct rtext){rtext_key(t->top[j].id, &rk),
			                        t->top[j].text_off,
			                        t->top[j].text_len};
	}
	qsort(v, k, sizeof(*v), rtext_cmp);
	for (size_t i = 0; i < k; i++) /* the first text of each key */
		if (u == 0 || v[u - 1].key != v[i].key)
			v[u++] = v[i];
	*out = v;
	*n = u;
	return 0;
}

int store_reports_encode(const struct store_reports *r, size_t from, size_t to,
                         unsigned char **out, size_t *len, char *err,
                         size_t errlen)
{
	struct rtext *tx = NULL;
	size_t ntx = 0, size = REPORT_HDR;
	uint32_t rk = 0; /* keys of ids -1 so far, as collect_texts */
	unsigned char *b, *p;
	int rc;

	*out = NULL;
	*len = 0;
	if (from > to || to > r->n || to - from > STORE_REPORTS_MAX) {
		snprintf(err, errlen, "bad report range [%zu, %zu) of %zu",
		         from, to, r->n);
		return STORE_EINVAL;
	}
	for (size_t i = from; i < to; i++) {
		if ((rc = check_report(r, &r->v[i], i, err, errlen)))
			return rc;
		size += REPORT_TOK + (size_t)r->v[i].n_top * REPORT_CAND;
	}
	if (collect_texts(r, from, to, &tx, &ntx)) {
		snprintf(err, errlen, "token reports: out of memory");
		return STORE_ERR;
	}
	for (size_t i = 0; i < ntx; i++)
		size += 6 + tx[i].len;
	if ((b = malloc(size)) == NULL) {
		free(tx);
		snprintf(err, errlen, "token reports: out of memory");
		return STORE_ERR;
	}
	p = b;
	*p++ = REPORT_VERSION;
	*p++ = 0;
	p = put_u16(p, 0);
	p = put_u32(p, (uint32_t)(to - from));
	p = put_u32(p, (uint32_t)ntx);
	for (size_t i = 0; i < ntx; i++) {
		p = put_u32(p, tx[i].key);
		p = put_u16(p, tx[i].len);
		if (tx[i].len)
			memcpy(p, r->text + tx[i].off, tx[i].len);
		p += tx[i].len;
	}
	for (size_t i = from; i < to; i++) {
		const struct store_tok_report *t = &r->v[i];

		*p++ = (unsigned char)t->flags;
		*p++ = (unsigned char)t->n_top;
		p = put_u32(p, rtext_key(t->chosen, &rk));
		p = put_f32(p, t->prob);
		p = put_f32(p, t->raw_logprob);
		p = put_f32(p, t->entropy);
		p = put_f32(p, t->raw_entropy);
		p = put_u32(p, (uint32_t)t->n_kept);
		for (int32_t j = 0; j < t->n_top; j++) {
			p = put_u32(p, rtext_key(t->top[j].id, &rk));
			p = put_f32(p, t->top[j].logit);
			p = put_f32(p, t->top[j].logprob);
		}
	}
	free(tx);
	*out = b;
	*len = size;
	return STORE_OK;
}

/* Decoding ----------------------------------------------------------------- */

/* A cursor over a hostile BLOB. */
struct rd {
	const unsigned char *p; /* the BLOB */
	size_t len, at;         /* its size, the next byte */
	bool bad;               /* a read went past the end */
};

static uint32_t get_u(struct rd *d, size_t n)
{
	uint32_t v = 0;

	if (d->bad || n > d->len - d->at) {
		d->bad = true;
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		v |= (uint32_t)d->p[d->at + i] << (8 * i);
	d->at += n;
	return v;
}

static float get_f32(struct rd *d)
{
	uint32_t u = get_u(d, 4);
	float f;

	memcpy(&f, &u, 4);
	return f;
}

/* The text entry of KEY in TX[0, n) (sorted), or NULL. */
static const struct rtext *find_text(const struct rtext *tx, size_t n,
                                     uint32_t key)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (tx[mid].key < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && tx[lo].key == key ? &tx[lo] : NULL;
}

/* The id a stored key stands for (-1: a text of its own). */
static int32_t key_id(uint32_t key)
{
	return key < REPORT_MAX_ID ? (int32_t)key : -1;
}

/* A probability as stored: NaN (unknown) or in [0, 1]. */
static bool prob_ok(float f)
{
	return isnan(f) || (f >= 0.0f && f <= 1.0f);
}

/* Read the texts into OUT's text buffer; their keys (each below
   MAX_KEY) and offsets in *TX. */
static const char *read_texts(struct rd *d, uint32_t n, uint32_t max_key,
                              struct store_reports *o, struct rtext **tx)
{
	struct rtext *v;

	/* each entry takes at least 6 bytes: bounds n before allocating */
	if (n > (d->len - d->at) / 6)
		return "more texts than bytes";
	if ((v = malloc((n ? n : 1) * sizeof(*v))) == NULL)
		return "out of memory";
	*tx = v;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t key = get_u(d, 4), len = get_u(d, 2);

		if (d->bad || len > d->len - d->at)
			return "a text runs past the end";
		if (key >= max_key || (i > 0 && key <= v[i - 1].key))
			return "text keys not ascending or out of range";
		v[i].key = key;
		v[i].len = len;
		if (store_reports_text(o, (const char *)d->p + d->at, len,
		                       &v[i].off))
			return "out of memory";
		d->at += len;
	}
	return NULL;
}

/* Read one token into T, its texts from TX. NULL or what is wrong. */
static const char *read_token(struct rd *d, const struct rtext *tx, size_t ntx,
                              struct store_tok_report *t)
{
	const struct rtext *x;
	uint32_t key;

	memset(t, 0, sizeof(*t));
	t->flags = get_u(d, 1);
	t->n_top = (int32_t)get_u(d, 1);
	key = get_u(d, 4);
	t->prob = get_f32(d);
	t->raw_logprob = get_f32(d);
	t->entropy = get_f32(d);
	t->raw_entropy = get_f32(d);
	t->n_kept = (int32_t)get_u(d, 4);
	if (d->bad)
		return "a token runs past the end";
	if ((t->flags & ~3u) != 0 || t->n_top > STORE_REPORT_TOP ||
	    t->n_kept < 0)
		return "bad flags, n_top or n_kept";
	if (!prob_ok(t->prob))
		return "a probability outside [0, 1]";
	if ((x = find_text(tx, ntx, key)) == NULL)
		return "the chosen key has no text";
	t->chosen = key_id(key);
	t->text_off = x->off;
	t->text_len = x->len;
	for (int32_t j = 0; j < t->n_top; j++) {
		struct store_tok_cand *c = &t->top[j];

		key = get_u(d, 4);
		c->logit = get_f32(d);
		c->logprob = get_f32(d);
		if (d->bad)
			return "a candidate runs past the end";
		if ((x = find_text(tx, ntx, key)) == NULL)
			return "a candidate key has no text";
		c->id = key_id(key);
		c->text_off = x->off;
		c->text_len = x->len;
	}
	return NULL;
}

int store_reports_decode(const void *blob, size_t len, int64_t msg_id,
                         size_t n_tokens, struct store_reports *out, char *err,
                         size_t errlen)
{
	struct rd d = {blob, len, 0, false};
	size_t n0 = out->n, t0 = out->text_len;
	struct rtext *tx = NULL;
	const char *why = NULL;
	uint32_t ver, n, ntx;

	if (blob == NULL && len > 0)
		why = "no data";
	ver = get_u(&d, 1);
	get_u(&d, 3);
	n = get_u(&d, 4);
	ntx = get_u(&d, 4);
	if (why == NULL && d.bad)
		why = "shorter than its header";
	else if (why == NULL && ver != 1 && ver != REPORT_VERSION)
		why = "unknown version";
	else if (why == NULL && (n != n_tokens || n > STORE_REPORTS_MAX ||
	                         n > (len - d.at) / REPORT_TOK))
		why = "token count does not match";
	if (why == NULL)
		why = read_texts(&d, ntx,
		                 ver == 1 ? REPORT_MAX_ID : REPORT_MAX_KEY, out,
		                 &tx);
	for (uint32_t i = 0; why == NULL && i < n; i++) {
		struct store_tok_report t;

		if ((why = read_token(&d, tx, ntx, &t)) == NULL &&
		    store_reports_push(out, &t))
			why = "out of memory";
	}
	if (why == NULL && d.at != len)
		why = "bytes left over";
	free(tx);
	if (why == NULL)
		return STORE_OK;
	out->n = n0;
	out->text_len = t0;
	snprintf(err, errlen,
	         "message %lld: token reports (%zu bytes) damaged at byte "
	         "%zu: %s",
	         (long long)msg_id, len, d.at, why);
	return strcmp(why, "out of memory") == 0 ? STORE_ERR : STORE_ECORRUPT;
}

/* Reading and writing rows ------------------------------------------------ */

int store_msg_reports(struct store *st, int64_t msg_id,
                      struct store_reports *out, char *err, size_t errlen)
{
	sqlite3_stmt *s;
	char msg[300];
	int rc;

	out->n = 0;
	out->text_len = 0;
	if ((rc = store_prepare(st,
	                        "SELECT first_pos, n_tokens, data FROM "
	                        "token_reports WHERE message_id = ?1 "
	                        "ORDER BY first_pos",
	                        &s, err, errlen)))
		return rc;
	sqlite3_bind_int64(s, 1, msg_id);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		int64_t pos = sqlite3_column_int64(s, 0);
		int64_t n = sqlite3_column_int64(s, 1);
		const void *b = sqlite3_column_blob(s, 2);
		size_t len = (size_t)sqlite3_column_bytes(s, 2);

		if (pos != (int64_t)out->n || n <= 0 ||
		    n > STORE_REPORTS_MAX - (int64_t)out->n) {
			rc = store_errf(st, STORE_ECORRUPT, err, errlen,
			                "message %lld: token reports: a chunk "
			                "of %lld at position %lld does not "
			                "follow position %zu",
			                (long long)msg_id, (long long)n,
			                (long long)pos, out->n);
			break;
		}
		rc = store_reports_decode(b, len, msg_id, (size_t)n, out, msg,
		                          sizeof(msg));
		if (rc) {
			store_errf(st, rc, err, errlen, "%s", msg);
			break;
		}
	}
	if (rc == SQLITE_DONE)
		rc = STORE_OK;
	else if (rc > 0)
		rc = store_fail(st, rc, "read token reports", err, errlen);
	sqlite3_finalize(s);
	if (rc) {
		out->n = 0;
		out->text_len = 0;
	}
	return rc;
}

int store_report_end(struct store *st, int64_t msg_id, size_t *end, char *err,
                     size_t errlen)
{
	sqlite3_stmt *s;
	int rc;

	if ((rc = store_prepare(st,
	                        "SELECT COALESCE(max(first_pos + n_tokens), "
	                        "0) FROM token_reports WHERE message_id = ?1",
	                        &s, err, errlen)))
		return rc;
	sqlite3_bind_int64(s, 1, msg_id);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		*end = (size_t)sqlite3_column_int64(s, 0);
		rc = STORE_OK;
	} else {
		rc = store_fail(st, rc, "read token reports", err, errlen);
	}
	sqlite3_finalize(s);
	return rc;
}

int store_report_write(struct store *st, int64_t msg_id,
                       const struct store_reports *r, size_t from, char *err,
                       size_t errlen)
{
	unsigned char *b;
	size_t len;
	char msg[300];
	sqlite3_stmt *s;
	int rc;

	if (from >= r->n)
		return STORE_OK;
	if (r->n > STORE_REPORTS_MAX)
		return store_errf(st, STORE_EINVAL, err, errlen,
		                  "message %lld: %zu token reports are more "
		                  "than the %d stored per message",
		                  (long long)msg_id, r->n, STORE_REPORTS_MAX);
	rc = store_reports_encode(r, from, r->n, &b, &len, msg, sizeof(msg));
	if (rc)
		return store_errf(st, rc, err, errlen, "message %lld: %s",
		                  (long long)msg_id, msg);
	rc = store_prepare(st,
	                   "INSERT OR REPLACE INTO token_reports (message_id, "
	                   "first_pos, n_tokens, data) VALUES (?1, ?2, ?3, ?4)",
	                   &s, err, errlen);
	if (rc == STORE_OK) {
		sqlite3_bind_int64(s, 1, msg_id);
		sqlite3_bind_int64(s, 2, (int64_t)from);
		sqlite3_bind_int64(s, 3, (int64_t)(r->n - from));
		sqlite3_bind_blob64(s, 4, b, len, SQLITE_STATIC);
		rc = sqlite3_step(s);
		rc =
		    rc == SQLITE_DONE
		        ? STORE_OK
		        : store_fail(st, rc, "save token reports", err, errlen);
		sqlite3_finalize(s);
	}
	free(b);
	return rc;
}

int store_report_clear(struct store *st, int64_t msg_id, char *err,
                       size_t errlen)
{
	sqlite3_stmt *s;
	int rc;

	if ((rc = store_prepare(st,
	                        "DELETE FROM token_reports WHERE "
	                        "message_id = ?1",
	                        &s, err, errlen)))
		return rc;
	sqlite3_bind_int64(s, 1, msg_id);
	rc = sqlite3_step(s);
	rc = rc == SQLITE_DONE
	         ? STORE_OK
	         : store_fail(st, rc, "replace token reports", err, errlen);
	sqlite3_finalize(s);
	return rc;
}

/*
 * hfpull.c - the pure part of `parley pull` (see hfpull.h): the name, the
 * hub's listing, and which files of a repository make the model asked
 * for. No I/O here: the cache is hfpull_cache.c, the network
 * hfpull_http.c.
 */
#include "hfpull.h"

#include "gguf_split.h"
#include "json.h"
#include "modelstore.h"
#include "sbuf.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define HFPULL_NAME_MAX  96   /* bytes of an org or repo name (the hub's) */
#define HFPULL_QUANT_MAX 64   /* bytes of a quantization name */
#define HFPULL_PATH_MAX  1024 /* bytes of a path in a repository */
#define HFPULL_DEPTH_MAX 16   /* folders in such a path */

/* ---------- the name ---------- */

/* Whether S[0..N) is a hub name: letters, digits, - _ . ; not starting
   with . or -, no "--" or ".." (the cache folder joins with "--"). */
static bool hfpull_name_ok(const char *s, size_t n)
{
	if (n == 0 || n > HFPULL_NAME_MAX || s[0] == '.' || s[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (!isalnum(c) && c != '-' && c != '_' && c != '.')
			return false;
		if (i > 0 && (c == '-' || c == '.') && s[i - 1] == c)
			return false;
	}
	return true;
}

int hfpull_parse_name(const char *arg, char **repo, char **quant, char *err,
                      size_t errlen)
{
	static const char *const prefixes[] = {"https://huggingface.co/",
	                                       "https://hf.co/",
	                                       "huggingface.co/", "hf.co/"};
	const char *s = arg, *slash, *colon;
	size_t rl;

	*repo = *quant = NULL;
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (strncasecmp(s, prefixes[i], strlen(prefixes[i])) == 0) {
			s += strlen(prefixes[i]);
			break;
		}
	colon = strchr(s, ':');
	rl = colon ? (size_t)(colon - s) : strlen(s);
	slash = memchr(s, '/', rl);
	if (slash == NULL) {
		snprintf(
		    err, errlen,
		    "'%.100s' is not a Hugging Face name (ORG/REPO[:QUANT]);"
		    " if it is an ollama model, pull it with `ollama pull "
		    "%.100s` (ollama's registry is not the hub; parley "
		    "models lists what ollama has fetched)",
		    arg, arg);
		return -1;
	}
	if (!hfpull_name_ok(s, (size_t)(slash - s)) ||
	    !hfpull_name_ok(slash + 1, rl - (size_t)(slash - s) - 1)) {
		snprintf(err, errlen,
		         "'%.200s': not a repository name ORG/REPO (letters, "
		         "digits, - _ . in each part, at most %d bytes)",
		         arg, HFPULL_NAME_MAX);
		return -1;
	}
	if (colon) {
		size_t ql = strlen(colon + 1);

		if (ql == 0 || ql > HFPULL_QUANT_MAX ||
		    strspn(colon + 1,
		           "abcdefghijklmnopqrstuvwxyz"
		           "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != ql) {
			snprintf(err, errlen,
			         "'%.200s': the quantization after ':' must be "
			         "a name like Q4_K_M (letters, digits, - _ .)",
			         arg);
			return -1;
		}
		*quant = strdup(colon + 1);
	}
	*repo = strndup(s, rl);
	if (*repo == NULL || (colon && *quant == NULL)) {
		free(*repo), free(*quant);
		*repo = *quant = NULL;
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

/* ---------- the listing ---------- */

/* Whether S is LEN lowercase-or-uppercase hex digits. */
static bool hfpull_hex(const char *s, size_t n, size_t len)
{
	return n == len && strspn(s, "0123456789abcdefABCDEF") >= len;
}

/* Whether P (N bytes) is a plain relative path: no empty, "." or ".."
   part, no leading '/', no backslash or control character. */
static bool hfpull_path_ok(const char *p, size_t n)
{
	size_t depth = 0, part = 0;

	if (n == 0 || n > HFPULL_PATH_MAX || memchr(p, '\0', n))
		return false;
	for (size_t i = 0; i <= n; i++) {
		if (i == n || p[i] == '/') {
			if (part == 0 || (part == 1 && p[i - 1] == '.') ||
			    (part == 2 && p[i - 1] == '.' && p[i - 2] == '.') ||
			    ++depth > HFPULL_DEPTH_MAX)
				return false;
			part = 0;
			continue;
		}
		if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f || p[i] == '\\')
			return false;
		part++;
	}
	return true;
}

/* One sibling S into F: 0, 1 (not a usable file: skipped), -1 (bad). */
static int hfpull_sibling(const struct json_value *s, struct hfpull_file *f)
{
	const struct json_value *name = json_object_get(s, "rfilename"),
	                        *lfs = json_object_get(s, "lfs"), *sha, *size;

	memset(f, 0, sizeof(*f));
	if (name == NULL || name->type != JSON_STRING ||
	    !hfpull_path_ok(name->u.str.ptr, name->u.str.len))
		return -1;
	if (lfs == NULL || lfs->type != JSON_OBJECT)
		return 1; /* a small git file: no SHA-256 to verify it by */
	sha = json_object_get(lfs, "sha256");
	size = json_object_get(lfs, "size");
	if (sha == NULL || sha->type != JSON_STRING ||
	    !hfpull_hex(sha->u.str.ptr, sha->u.str.len, 64) || size == NULL ||
	    size->type != JSON_INT || size->u.i < 0)
		return -1;
	for (int i = 0; i < 64; i++)
		f->sha256[i] = (char)tolower((unsigned char)sha->u.str.ptr[i]);
	f->size = (uint64_t)size->u.i;
	f->path = strndup(name->u.str.ptr, name->u.str.len);
	return f->path ? 0 : -2;
}

int hfpull_parse_listing(const char *json, size_t len, const char *name,
                         struct hfpull_repo *r, char *err, size_t errlen)
{
	struct json_value *v = NULL;
	const struct json_value *sha, *sib;
	char jerr[160];

	memset(r, 0, sizeof(*r));
	if (json_parse(json, len, &v, jerr, sizeof(jerr)) != 0) {
		snprintf(err, errlen, "the hub's listing of %s is not JSON: %s",
		         name, jerr);
		return -1;
	}
	sha = json_object_get(v, "sha");
	sib = json_object_get(v, "siblings");
	if (sha == NULL || sha->type != JSON_STRING ||
	    !hfpull_hex(sha->u.str.ptr, sha->u.str.len, 40) || sib == NULL ||
	    sib->type != JSON_ARRAY) {
		snprintf(err, errlen,
		         "the hub's listing of %s lacks its commit ('sha', 40 "
		         "hex digits) or its files ('siblings')",
		         name);
		goto fail;
	}
	for (int i = 0; i < 40; i++)
		r->commit[i] = (char)tolower((unsigned char)sha->u.str.ptr[i]);
	r->name = strdup(name);
	r->v = calloc(sib->u.arr.n ? sib->u.arr.n : 1, sizeof(*r->v));
	if (r->name == NULL || r->v == NULL)
		goto nomem;
	for (size_t i = 0; i < sib->u.arr.n; i++) {
		int rc = hfpull_sibling(sib->u.arr.items[i], &r->v[r->n]);

		if (rc == -2)
			goto nomem;
		if (rc < 0) {
			snprintf(err, errlen,
			         "the hub's listing of %s: file %zu has a bad "
			         "name, size or SHA-256",
			         name, i + 1);
			goto fail;
		}
		r->n += rc == 0;
	}
	json_free(v);
	return 0;
nomem:
	snprintf(err, errlen, "out of memory");
fail:
	json_free(v);
	hfpull_repo_free(r);
	return -1;
}

void hfpull_repo_free(struct hfpull_repo *r)
{
	for (size_t i = 0; r->v && i < r->n; i++)
		free(r->v[i].path);
	free(r->v);
	free(r->name);
	memset(r, 0, sizeof(*r));
}

/* ---------- the choice ---------- */

/* A model of the repository: a GGUF file or a whole split. */
struct hfpull_model {
	size_t first;   /* index of the file (or of its first shard) */
	size_t keylen;  /* bytes of its path before the shard suffix */
	uint32_t count; /* shards (1: not split) */
	uint32_t found; /* shards listed */
	uint64_t bytes; /* all shards */
	char *label;    /* its quantization, or its stem (owned) */
};

/* Whether path P is a .gguf file. */
static bool hfpull_is_gguf(const char *p)
{
	size_t n = strlen(p);

	return n > 5 && strcasecmp(p + n - 5, ".gguf") == 0;
}

/* Whether Q occurs in P[0..N), case folded, between separators. */
static bool hfpull_has_token(const char *p, size_t n, const char *q)
{
	size_t ql = strlen(q);

	for (size_t i = 0; i + ql <= n; i++)
		if ((i == 0 || strchr("-._/", p[i - 1])) &&
		    (i + ql == n || strchr("-._/", p[i + ql])) &&
		    strncasecmp(p + i, q, ql) == 0)
			return true;
	return false;
}

/* The label of the model whose path is P[0..N): its quantization as
   modelstore names it (with unsloth's "UD-" kept: it is another file),
   else the file's stem. malloc'd. */
static char *hfpull_label(const char *p, size_t n)
{
	char *key = strndup(p, n), *q, *out;
	const char *base, *at = NULL;

	if (key == NULL)
		return NULL;
	base = strrchr(key, '/') ? strrchr(key, '/') + 1 : key;
	q = modelstore_quant_in_name(base);
	if (q == NULL) {
		size_t bl = strlen(base);

		if (bl > 5 && strcasecmp(base + bl - 5, ".gguf") == 0)
			bl -= 5;
		out = strndup(base, bl);
		free(key);
		return out;
	}
	for (const char *s = base; (s = strcasestr(s, q)) != NULL; s++)
		at = s;
	if (at && at - base >= 3 && strncasecmp(at - 3, "UD-", 3) == 0) {
		out = malloc(strlen(q) + 4);
		if (out)
			snprintf(out, strlen(q) + 4, "UD-%s", q);
		free(q);
		q = out;
	}
	free(key);
	return q;
}

/* Group the GGUF files of R into models (mmproj files only when WANT_MM)
   into *M. 0, or -1 (no memory). */
static int hfpull_models(const struct hfpull_repo *r, bool want_mm,
                         struct hfpull_model **m, size_t *nm)
{
	*m = calloc(r->n ? r->n : 1, sizeof(**m));
	*nm = 0;
	if (*m == NULL)
		return -1;
	for (size_t i = 0; i < r->n; i++) {
		const char *p = r->v[i].path;
		size_t key = strlen(p), j;
		uint32_t no = 0, count = 1;

		if (!hfpull_is_gguf(p) ||
		    (strcasestr(p, "mmproj") != NULL) != want_mm)
			continue;
		if (gguf_split_parse_name(p, &key, &no, &count) != 0)
			key = strlen(p), no = 0, count = 1;
		for (j = 0; j < *nm; j++)
			if (count > 1 && (*m)[j].count == count &&
			    (*m)[j].keylen == key &&
			    strncmp(r->v[(*m)[j].first].path, p, key) == 0)
				break;
		if (j == *nm) {
			(*m)[j].first = i;
			(*m)[j].keylen = key;
			(*m)[j].count = count;
			(*m)[j].label = hfpull_label(p, key);
			if ((*m)[j].label == NULL)
				return -1;
			++*nm;
		}
		if (no == 0)
			(*m)[j].first = i;
		(*m)[j].found++;
		(*m)[j].bytes += r->v[i].size;
	}
	return 0;
}

static void hfpull_models_free(struct hfpull_model *m, size_t n)
{
	for (size_t i = 0; m && i < n; i++)
		free(m[i].label);
	free(m);
}

/* The error listing the models M[0..N) of R after HEAD. */
static void hfpull_choices(const struct hfpull_repo *r,
                           const struct hfpull_model *m, size_t n,
                           const char *head, char *err, size_t errlen)
{
	struct sbuf sb = SBUF_INIT;

	sbuf_adds(&sb, head);
	if (n == 0)
		sbuf_adds(&sb, " has no GGUF files");
	else
		sbuf_printf(&sb, "; pull %s:QUANT with one of:", r->name);
	for (size_t i = 0; i < n; i++)
		sbuf_printf(&sb, "\n  %-12s %.*s%s (%.1f MB%s)", m[i].label,
		            (int)m[i].keylen, r->v[m[i].first].path,
		            m[i].count > 1 ? "-*.gguf" : "",
		            (double)m[i].bytes / 1e6,
		            m[i].count > 1 ? ", split" : "");
	snprintf(err, errlen, "%s", sb.failed ? head : sb.buf);
	sbuf_free(&sb);
}

/* The models of M[0..N) that QUANT names, as indexes into *HIT. */
static size_t hfpull_match(const struct hfpull_repo *r,
                           const struct hfpull_model *m, size_t n,
                           const char *quant, size_t *hit)
{
	size_t k = 0, exact = 0, e = 0;

	for (size_t i = 0; i < n; i++)
		if (hfpull_has_token(r->v[m[i].first].path, m[i].keylen, quant))
			hit[k++] = i;
	/* Q4_K_XL also occurs in UD-Q4_K_XL: the exact label wins */
	for (size_t i = 0; i < k; i++)
		if (strcasecmp(m[hit[i]].label, quant) == 0)
			exact++, e = hit[i];
	if (k > 1 && exact == 1) {
		hit[0] = e;
		k = 1;
	}
	return k;
}

/* The pick of model M of R: its files, shards in order. */
static int hfpull_pick_of(const struct hfpull_repo *r,
                          const struct hfpull_model *m, struct hfpull_pick *p,
                          char *err, size_t errlen)
{
	const char *key = r->v[m->first].path;

	if (m->found > m->count) {
		snprintf(err, errlen,
		         "%s: the shards of %.*s are listed twice; the listing "
		         "cannot be trusted",
		         r->name, (int)m->keylen, key);
		return -1;
	}
	if (m->found != m->count) {
		snprintf(err, errlen,
		         "%s: the split model %.*s has %" PRIu32
		         " of its %" PRIu32
		         " shards on the hub; it cannot be pulled",
		         r->name, (int)m->keylen, key, m->found, m->count);
		return -1;
	}
	p->idx = calloc(m->count, sizeof(*p->idx));
	p->label = strdup(m->label);
	if (p->idx == NULL || p->label == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < m->count; i++)
		p->idx[i] = SIZE_MAX;
	for (size_t i = 0; i < r->n; i++) {
		size_t kl;
		uint32_t no, count;

		if (m->count == 1) {
			if (i == m->first)
				p->idx[p->n++] = i;
		} else if (gguf_split_parse_name(r->v[i].path, &kl, &no,
		                                 &count) == 0 &&
		           count == m->count && kl == m->keylen &&
		           strncmp(r->v[i].path, key, kl) == 0 &&
		           p->idx[no] == SIZE_MAX) {
			p->idx[no] = i;
			p->n++;
		}
	}
	if (p->n != m->count) { /* a shard listed twice, another missing */
		snprintf(err, errlen, "%s: the shards of %.*s are listed twice",
		         r->name, (int)m->keylen, key);
		return -1;
	}
	return 0;
}

int hfpull_choose(const struct hfpull_repo *r, const char *quant,
                  struct hfpull_pick *p, char *err, size_t errlen)
{
	struct hfpull_model *m;
	size_t n, *hit, k;
	char head[400];
	int rc = -1;

	memset(p, 0, sizeof(*p));
	if (hfpull_models(r, quant && strcasestr(quant, "mmproj"), &m, &n) ||
	    (hit = calloc(n ? n : 1, sizeof(*hit))) == NULL) {
		hfpull_models_free(m, n);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	k = hfpull_match(r, m, n, quant ? quant : "Q4_K_M", hit);
	if (quant == NULL && k == 0 && n == 1)
		hit[k++] = 0; /* one model: no name needed */
	if (k == 1)
		rc = hfpull_pick_of(r, &m[hit[0]], p, err, errlen);
	else {
		if (n == 0)
			snprintf(head, sizeof(head), "%s", r->name);
		else if (k > 1)
			snprintf(head, sizeof(head),
			         "%s has %zu models that '%s' names", r->name,
			         k, quant ? quant : "Q4_K_M");
		else if (quant)
			snprintf(head, sizeof(head), "%s has no model '%s'",
			         r->name, quant);
		else
			snprintf(head, sizeof(head),
			         "%s has no Q4_K_M model: name the one to pull",
			         r->name);
		hfpull_choices(r, m, n, head, err, errlen);
	}
	if (rc != 0)
		hfpull_pick_free(p);
	free(hit);
	hfpull_models_free(m, n);
	return rc;
}

void hfpull_pick_free(struct hfpull_pick *p)
{
	free(p->idx);
	free(p->label);
	memset(p, 0, sizeof(*p));
}

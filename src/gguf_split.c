/*
 * gguf_split.c - open every shard of a split GGUF model and merge their
 * tensor tables into one gguf_file (gguf_split.h says what is checked).
 *
 * The shards are found by name, as llama.cpp finds them: the path given
 * ends in -NNNNN-of-MMMMM.gguf and the others differ only in NNNNN. Any
 * shard may be given (a user tab-completes the one they see); the name
 * must agree with the file's own split.no and split.count, so a renamed
 * or mixed-up shard is named instead of loading the wrong files.
 */
#include "gguf_split.h"

#include <inttypes.h>
#include <stdbool.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The suffix after the prefix: "-NNNNN-of-MMMMM.gguf". */
#define SPLIT_SUFFIX_LEN 20

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void
split_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* Read the integer KEY of F into *V and check it is at most MAX. Returns
 * GGUF_OK, or the getter's code with err naming the file and key. */
static int split_key(const struct gguf_file *f, const char *key, uint64_t max,
                     uint64_t *v, char *err, size_t errlen)
{
	int rc = gguf_get_u64(f, key, v, err, errlen);

	if (rc != GGUF_OK)
		return rc;
	if (*v > max) {
		split_err(err, errlen,
		          "%s: key '%s' is %" PRIu64 ", more than %" PRIu64,
		          f->path, key, *v, max);
		return GGUF_ETYPE;
	}
	return GGUF_OK;
}

/* Value of the 5 decimal digits at S, or -1 if they are not digits. */
static long split_digits(const char *s)
{
	long v = 0;

	for (int i = 0; i < 5; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

int gguf_split_parse_name(const char *path, size_t *prefix_len, uint32_t *no,
                          uint32_t *count)
{
	size_t len = strlen(path);
	const char *s;
	long a, b;

	/* llama.cpp requires a non-empty prefix as well */
	if (len <= SPLIT_SUFFIX_LEN)
		return -1;
	s = path + len - SPLIT_SUFFIX_LEN;
	if (s[0] != '-' || memcmp(s + 6, "-of-", 4) != 0 ||
	    strcmp(s + 15, ".gguf") != 0)
		return -1;
	a = split_digits(s + 1);
	b = split_digits(s + 10);
	if (a < 1 || b < 1 || a > b || b > GGUF_SPLIT_MAX)
		return -1;
	*prefix_len = len - SPLIT_SUFFIX_LEN;
	*no = (uint32_t)(a - 1);
	*count = (uint32_t)b;
	return 0;
}

char *gguf_split_path(const char *prefix, size_t prefix_len, uint32_t no,
                      uint32_t count)
{
	size_t n = prefix_len + SPLIT_SUFFIX_LEN + 1;
	char *p;

	if (prefix_len > INT_MAX - SPLIT_SUFFIX_LEN - 1 || no >= count ||
	    count > GGUF_SPLIT_MAX || (p = malloc(n)) == NULL)
		return NULL;
	snprintf(p, n, "%.*s-%05" PRIu32 "-of-%05" PRIu32 ".gguf",
	         (int)prefix_len, prefix, no + 1, count);
	return p;
}

const struct gguf_file *gguf_split_file_of(const struct gguf_file *f,
                                           const struct gguf_tensor *t)
{
	return f->shards != NULL && t->shard < f->n_shards ? f->shards[t->shard]
	                                                   : f;
}

/* Check invariant 2 for shard I of N. */
static int split_check_shard(const struct gguf_file *s, uint32_t i, uint32_t n,
                             char *err, size_t errlen)
{
	uint64_t v;

	if (split_key(s, "split.count", GGUF_SPLIT_MAX, &v, err, errlen))
		return -1;
	if (v != n) {
		split_err(err, errlen,
		          "%s: key 'split.count' is %" PRIu64
		          ", expected %" PRIu32
		          " as in the other shards: a shard of another model?",
		          s->path, v, n);
		return -1;
	}
	if (split_key(s, "split.no", GGUF_SPLIT_MAX, &v, err, errlen))
		return -1;
	if (v != i) {
		split_err(err, errlen,
		          "%s: key 'split.no' is %" PRIu64 ", expected %" PRIu32
		          " (shard %" PRIu32 " of %" PRIu32
		          "): shards renamed or mixed up?",
		          s->path, v, i, i + 1, n);
		return -1;
	}
	return 0;
}

/* Check invariant 4: *TOTAL gets the tensors of all N shards. */
static int split_check_count(struct gguf_file **shards, uint32_t n,
                             uint64_t *total, char *err, size_t errlen)
{
	uint64_t want, v;

	/* llama.cpp needs the key in the first shard only; its writers put
	 * it in every shard, where it tells shards of two models apart. */
	if (split_key(shards[0], "split.tensors.count", INT32_MAX, &want, err,
	              errlen))
		return -1;
	*total = 0;
	for (uint32_t i = 0; i < n; i++) {
		const struct gguf_file *s = shards[i];

		if (i > 0 && gguf_find_kv(s, "split.tensors.count") != NULL) {
			if (split_key(s, "split.tensors.count", INT32_MAX, &v,
			              err, errlen))
				return -1;
			if (v != want) {
				split_err(err, errlen,
				          "%s: key 'split.tensors.count' is "
				          "%" PRIu64 ", but %s says %" PRIu64
				          ": shards of different models?",
				          s->path, v, shards[0]->path, want);
				return -1;
			}
		}
		/* stop before the sum can wrap: it must end at want */
		if (s->n_tensors > want - *total) {
			split_err(err, errlen,
			          "%s: key 'split.tensors.count' is %" PRIu64
			          ", but shards 1..%" PRIu32
			          " already hold %" PRIu64 " tensors",
			          shards[0]->path, want, i + 1,
			          *total + s->n_tensors);
			return -1;
		}
		*total += s->n_tensors;
	}
	if (*total != want) {
		split_err(err, errlen,
		          "%s: key 'split.tensors.count' is %" PRIu64
		          ", but the %" PRIu32 " shards hold %" PRIu64
		          " tensors: a shard is "
		          "missing tensors or belongs to another model",
		          shards[0]->path, want, n, *total);
		return -1;
	}
	return 0;
}

static int split_cmp_name(const void *a, const void *b)
{
	const struct gguf_tensor *const *x = a, *const *y = b;

	return strcmp((*x)->name, (*y)->name);
}

/* Build M's tensor table and name index over its shards (invariant 3). */
static int split_tensors(struct gguf_file *m, char *err, size_t errlen)
{
	const struct gguf_tensor **by_name;
	uint64_t k = 0;

	m->tensors =
	    malloc((m->n_tensors ? m->n_tensors : 1) * sizeof(*m->tensors));
	m->tensor_by_name = malloc((m->n_tensors ? m->n_tensors : 1) *
	                           sizeof(*m->tensor_by_name));
	by_name = malloc((m->n_tensors ? m->n_tensors : 1) * sizeof(*by_name));
	if (m->tensors == NULL || m->tensor_by_name == NULL ||
	    by_name == NULL) {
		free(by_name);
		split_err(err, errlen, "%s: out of memory", m->path);
		return -1;
	}
	for (uint32_t i = 0; i < m->n_shards; i++)
		for (uint64_t j = 0; j < m->shards[i]->n_tensors; j++) {
			m->tensors[k] = m->shards[i]->tensors[j];
			m->tensors[k].shard = i;
			by_name[k] = &m->tensors[k];
			k++;
		}
	qsort(by_name, m->n_tensors, sizeof(*by_name), split_cmp_name);
	for (uint64_t i = 0; i < m->n_tensors; i++) {
		if (i > 0 &&
		    strcmp(by_name[i - 1]->name, by_name[i]->name) == 0) {
			/* gguf_open refused duplicates within one file */
			split_err(err, errlen,
			          "tensor '%s' is in two shards: %s and %s",
			          by_name[i]->name,
			          m->shards[by_name[i - 1]->shard]->path,
			          m->shards[by_name[i]->shard]->path);
			free(by_name);
			return -1;
		}
		m->tensor_by_name[i] = (uint64_t)(by_name[i] - m->tensors);
	}
	free(by_name);
	return 0;
}

struct gguf_file *gguf_split_merge(struct gguf_file **shards, uint32_t n,
                                   char *err, size_t errlen)
{
	struct gguf_file *m = NULL;
	uint64_t total = 0;

	if (n < 2 || n > GGUF_SPLIT_MAX) {
		split_err(err, errlen,
		          "a split model has 2..%d shards, not %" PRIu32,
		          GGUF_SPLIT_MAX, n);
		goto fail;
	}
	for (uint32_t i = 0; i < n; i++)
		if (split_check_shard(shards[i], i, n, err, errlen))
			goto fail;
	if (split_check_count(shards, n, &total, err, errlen))
		goto fail;
	m = calloc(1, sizeof(*m));
	if (m == NULL || (m->path = strdup(shards[0]->path)) == NULL) {
		split_err(err, errlen, "%s: out of memory", shards[0]->path);
		free(m);
		goto fail;
	}
	/* From here gguf_close(m) frees the shards too. */
	m->n_shards = n;
	m->shards = shards;
	m->version = shards[0]->version;
	m->alignment = shards[0]->alignment;
	m->n_kv = shards[0]->n_kv;
	m->kv = shards[0]->kv;
	m->kv_by_key = shards[0]->kv_by_key;
	m->n_tensors = total;
	for (uint32_t i = 0; i < n; i++)
		m->size += shards[i]->size;
	if (split_tensors(m, err, errlen)) {
		gguf_close(m);
		return NULL;
	}
	return m;
fail:
	for (uint32_t i = 0; i < n; i++)
		gguf_close(shards[i]);
	free(shards);
	return NULL;
}

/* Open the N shards named after PATH (its prefix PLEN bytes), with F,
 * already open, at position NO; then merge them. Consumes F. */
static struct gguf_file *split_open_all(struct gguf_file *f, const char *path,
                                        size_t plen, uint32_t no, uint32_t n,
                                        char *err, size_t errlen)
{
	struct gguf_file **shards = calloc(n, sizeof(*shards));
	char e[1024];
	bool ok = true;

	if (shards == NULL) {
		split_err(err, errlen, "%s: out of memory", path);
		gguf_close(f);
		return NULL;
	}
	shards[no] = f;
	for (uint32_t i = 0; i < n && ok; i++) {
		char *p;

		if (i == no)
			continue;
		p = gguf_split_path(path, plen, i, n);
		shards[i] = p ? gguf_open(p, e, sizeof(e)) : NULL;
		if (shards[i] == NULL) {
			/* gguf_open's message names the file and why */
			split_err(err, errlen,
			          "shard %" PRIu32 " of %" PRIu32
			          " is missing or unreadable: %s",
			          i + 1, n, p ? e : "out of memory");
			ok = false;
		}
		free(p);
	}
	if (!ok) {
		for (uint32_t i = 0; i < n; i++)
			gguf_close(shards[i]);
		free(shards);
		return NULL;
	}
	return gguf_split_merge(shards, n, err, errlen);
}

struct gguf_file *gguf_split_open(const char *path, char *err, size_t errlen)
{
	struct gguf_file *f = gguf_open(path, err, errlen);
	uint32_t name_no, name_count;
	uint64_t count, no;
	size_t plen;

	if (f == NULL || gguf_find_kv(f, "split.count") == NULL)
		return f;
	if (split_key(f, "split.count", GGUF_SPLIT_MAX, &count, err, errlen))
		goto fail;
	if (count == 0) {
		split_err(err, errlen, "%s: key 'split.count' is 0", f->path);
		goto fail;
	}
	if (count == 1) /* a split of one file is that file */
		return f;
	if (split_key(f, "split.no", GGUF_SPLIT_MAX, &no, err, errlen))
		goto fail;
	if (no >= count) {
		split_err(err, errlen,
		          "%s: key 'split.no' is %" PRIu64
		          ", but split.count is %" PRIu64,
		          f->path, no, count);
		goto fail;
	}
	if (gguf_split_parse_name(path, &plen, &name_no, &name_count) != 0) {
		split_err(err, errlen,
		          "%s: shard %" PRIu64 " of %" PRIu64
		          " (split.no %" PRIu64 ", split.count), but its name "
		          "does not end in -%05" PRIu64 "-of-%05" PRIu64
		          ".gguf, so its other shards cannot be found",
		          f->path, no + 1, count, no, no + 1, count);
		goto fail;
	}
	if (name_count != count || name_no != no) {
		split_err(err, errlen,
		          "%s: keys 'split.no' %" PRIu64 " and 'split.count' "
		          "%" PRIu64 " make it shard %" PRIu64 " of %" PRIu64
		          ", but its name says shard %" PRIu32 " of %" PRIu32
		          ": shards renamed or mixed up?",
		          f->path, no, count, no + 1, count, name_no + 1,
		          name_count);
		goto fail;
	}
	return split_open_all(f, path, plen, (uint32_t)no, (uint32_t)count, err,
	                      errlen);
fail:
	gguf_close(f);
	return NULL;
}

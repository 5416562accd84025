/*
 * modelname.c - resolve -m NAME against the local models (modelname.h).
 */
#include "modelname.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

bool modelname_is_path(const char *name)
{
	size_t n = strlen(name);
	struct stat st;

	return stat(name, &st) == 0 || name[0] == '/' ||
	       strncmp(name, "./", 2) == 0 || strncmp(name, "../", 3) == 0 ||
	       (n >= 5 && strcasecmp(name + n - 5, ".gguf") == 0);
}

/* The distance between the first NA bytes of A and the first NB of B. */
static unsigned modelname_distance_n(const char *a, size_t na, const char *b,
                                     size_t nb)
{
	unsigned row[256], prev, cur;

	if (na > 254 || nb > 254) /* the cap: names are shorter */
		return 255;
	for (size_t j = 0; j <= nb; j++)
		row[j] = (unsigned)j;
	for (size_t i = 1; i <= na; i++) {
		prev = row[0];
		row[0] = (unsigned)i;
		for (size_t j = 1; j <= nb; j++) {
			unsigned sub =
			    prev + (strncasecmp(a + i - 1, b + j - 1, 1) != 0);

			cur = row[j];
			row[j] = sub;
			if (row[j - 1] + 1 < row[j])
				row[j] = row[j - 1] + 1;
			if (cur + 1 < row[j])
				row[j] = cur + 1;
			prev = cur;
		}
	}
	return row[nb] > 255 ? 255 : row[nb];
}

unsigned modelname_distance(const char *a, const char *b)
{
	return modelname_distance_n(a, strlen(a), b, strlen(b));
}

/* How far NAME is from the query Q, for the nearest names: the distance
   to NAME's beginning as long as Q (or to all of NAME when that is
   nearer) first, so that "qwen4:8b" finds "qwen3:latest" before
   "gone:1b", then the whole distance. */
static unsigned modelname_far(const char *q, const char *name)
{
	size_t nq = strlen(q), nn = strlen(name);
	unsigned all = modelname_distance_n(q, nq, name, nn);
	unsigned head = modelname_distance_n(q, nq, name, nn < nq ? nn : nq);

	return (head < all ? head : all) * 256 + all;
}

/* NAME without ollama's default registry and namespace. */
static const char *modelname_short(const char *name)
{
	if (strncasecmp(name, "registry.ollama.ai/", 19) == 0)
		name += 19;
	if (strncasecmp(name, "library/", 8) == 0)
		name += 8;
	return name;
}

/* Whether entry I's name was listed before (same name, another source). */
static bool modelname_seen(const struct modelstore_list *l, size_t i)
{
	for (size_t k = 0; k < i; k++)
		if (strcasecmp(l->v[k].name, l->v[i].name) == 0)
			return true;
	return false;
}

/* Index of the entry named Q exactly (or Q:latest from ollama, or
   Q:Q4_K_M from a repository, the tag and quantization a name without
   one means to ollama, llama.cpp's -hf and parley pull), or -1. */
static long modelname_exact(const char *q, const struct modelstore_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcasecmp(l->v[i].name, q) == 0)
			return (long)i;
	if (strchr(q, ':') != NULL)
		return -1;
	for (size_t i = 0; i < l->n; i++) {
		size_t n = strlen(q);

		if (strncasecmp(l->v[i].name, q, n) != 0)
			continue;
		if (l->v[i].source == MODELSTORE_OLLAMA &&
		    strcmp(l->v[i].name + n, ":latest") == 0)
			return (long)i;
		if ((l->v[i].source == MODELSTORE_HF ||
		     l->v[i].source == MODELSTORE_LMSTUDIO) &&
		    strcmp(l->v[i].name + n, ":Q4_K_M") == 0)
			return (long)i;
	}
	return -1;
}

/* Append ", NAME" (or NAME first) to ERR if it fits. */
static void modelname_list_add(char *err, size_t errlen, bool first,
                               const char *name)
{
	size_t n = strlen(err);

	if (n + strlen(name) + 8 < errlen)
		snprintf(err + n, errlen - n, "%s%s", first ? "" : ", ", name);
}

/* The error for a NAME that several entries start with. */
static int modelname_ambiguous(const char *name, const char *q,
                               const struct modelstore_list *l, size_t count,
                               char *err, size_t errlen)
{
	size_t shown = 0, n = strlen(q);

	snprintf(err, errlen, "'%s' matches %zu models: ", name, count);
	for (size_t i = 0; i < l->n && shown < MODELNAME_SHOWN; i++)
		if (strncasecmp(l->v[i].name, q, n) == 0 &&
		    !modelname_seen(l, i))
			modelname_list_add(err, errlen, shown++ == 0,
			                   l->v[i].name);
	if (count > shown)
		modelname_list_add(err, errlen, false, "...");
	n = strlen(err);
	snprintf(err + n, errlen - n, " (give more of the name)");
	return -1;
}

/* The error for a NAME nothing matches: the nearest names. */
static int modelname_unknown(const char *name, const char *q,
                             const struct modelstore_list *l, char *err,
                             size_t errlen)
{
	size_t best[MODELNAME_SHOWN], nb = 0, n;
	unsigned dist[MODELNAME_SHOWN];

	for (size_t i = 0; i < l->n; i++) {
		unsigned d = modelname_far(q, l->v[i].name);
		size_t k;

		if (modelname_seen(l, i))
			continue;
		for (k = nb; k > 0 && dist[k - 1] > d; k--)
			;
		if (k >= MODELNAME_SHOWN)
			continue;
		/* insert at k, the last one falling off when full */
		for (size_t j = nb < MODELNAME_SHOWN ? nb : nb - 1; j > k;
		     j--) {
			best[j] = best[j - 1];
			dist[j] = dist[j - 1];
		}
		best[k] = i;
		dist[k] = d;
		if (nb < MODELNAME_SHOWN)
			nb++;
	}
	if (nb == 0) {
		snprintf(err, errlen,
		         "no model '%s': not a file, and parley models finds "
		         "no local model (ollama, the Hugging Face cache, LM "
		         "Studio, models-dir)",
		         name);
		return -1;
	}
	snprintf(err, errlen, "no model '%s'; the nearest: ", name);
	for (size_t k = 0; k < nb; k++)
		modelname_list_add(err, errlen, k == 0, l->v[best[k]].name);
	n = strlen(err);
	snprintf(err + n, errlen - n, " (parley models lists them all)");
	return -1;
}

/* Entry I as the answer, unless it cannot be opened. */
static int modelname_pick(const struct modelstore_list *l, size_t i,
                          size_t *idx, char *err, size_t errlen)
{
	const struct modelstore_entry *e = &l->v[i];

	if (!e->opened) {
		snprintf(err, errlen, "%s (%s): %s", e->name, e->path,
		         e->why ? e->why : "cannot be used");
		return -1;
	}
	*idx = i;
	return 0;
}

int modelname_resolve(const char *name, const struct modelstore_list *l,
                      size_t *idx, char *err, size_t errlen)
{
	const char *q = modelname_short(name);
	size_t n = strlen(q), count = 0, hit = 0;
	long i = modelname_exact(q, l);

	if (i < 0 && q != name) /* "library/x" may be a listed name too */
		i = modelname_exact(name, l);
	if (i >= 0)
		return modelname_pick(l, (size_t)i, idx, err, errlen);
	for (size_t k = 0; n > 0 && k < l->n; k++)
		if (strncasecmp(l->v[k].name, q, n) == 0 &&
		    !modelname_seen(l, k)) {
			count++;
			hit = k;
		}
	if (count == 1)
		return modelname_pick(l, hit, idx, err, errlen);
	if (count > 1)
		return modelname_ambiguous(name, q, l, count, err, errlen);
	return modelname_unknown(name, q, l, err, errlen);
}

/*
 * modelstore.c - the list of local models (see modelstore.h): the list
 * itself, reading one candidate's header, walking parley's cache and the
 * models-dir folders, and the quantization a file name gives.
 *
 * NOTES ON THE DESIGN
 *
 * An entry is filled by the same code the chat runs before its first
 * token: gguf_split_open (every shard, every offset bounds-checked, so a
 * truncated file fails here), model_load (architecture, shapes, tensor
 * types) and the CPU backend's feature set, the reference every backend
 * runs. None of these reads tensor data (rope_freqs aside, a few hundred
 * bytes), so the pages of the weights are mapped but never touched.
 * The tokenizer is not built (a hash table of the vocabulary, too slow
 * for a listing): only its kind is checked, as tok_load checks it first.
 */
#include "modelstore.h"
#include "modelstore_int.h"

#include "config.h"
#include "engine_backend.h"
#include "gguf.h"
#include "gguf_split.h"
#include "model.h"
#include "qtype.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* llama.cpp's general.file_type numbers (llama_ftype) and their names;
   0 and 1 (all F32, mostly F16) are left to the tensor count, since
   writers that do not know put 0. */
static const struct {
	uint32_t id;
	const char *name;
} modelstore_ftypes[] = {
    {2, "Q4_0"},    {3, "Q4_1"},    {7, "Q8_0"},       {8, "Q5_0"},
    {9, "Q5_1"},    {10, "Q2_K"},   {11, "Q3_K_S"},    {12, "Q3_K_M"},
    {13, "Q3_K_L"}, {14, "Q4_K_S"}, {15, "Q4_K_M"},    {16, "Q5_K_S"},
    {17, "Q5_K_M"}, {18, "Q6_K"},   {19, "IQ2_XXS"},   {20, "IQ2_XS"},
    {21, "Q2_K_S"}, {22, "IQ3_XS"}, {23, "IQ3_XXS"},   {24, "IQ1_S"},
    {25, "IQ4_NL"}, {26, "IQ3_S"},  {27, "IQ3_M"},     {28, "IQ2_S"},
    {29, "IQ2_M"},  {30, "IQ4_XS"}, {31, "IQ1_M"},     {32, "BF16"},
    {36, "TQ1_0"},  {37, "TQ2_0"},  {38, "MXFP4_MOE"},
};

const char *modelstore_source_name(enum modelstore_source s)
{
	static const char *const names[] = {"parley", "dir", "hf", "ollama",
	                                    "lmstudio"};

	return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

char *modelstore_join(const char *a, const char *b)
{
	size_t na = strlen(a), nb = strlen(b);
	char *p = malloc(na + nb + 2);

	if (p == NULL)
		return NULL;
	memcpy(p, a, na);
	p[na] = '/';
	memcpy(p + na + 1, b, nb + 1);
	return p;
}

char *modelstore_env_dir(const char *var, const char *fallback, const char *sub)
{
	const char *x = var ? getenv(var) : NULL, *home = getenv("HOME");
	char *base, *p;

	if (x && x[0] == '/')
		base = strdup(x);
	else if (home && home[0] && fallback)
		base = modelstore_join(home, fallback);
	else
		return NULL;
	if (base == NULL || sub == NULL)
		return base;
	p = modelstore_join(base, sub);
	free(base);
	return p;
}

/* Whether C ends a quantization token (or starts one). */
static bool modelstore_quant_edge(char c)
{
	return c == '\0' || c == '-' || c == '.' || c == '_' || c == '/';
}

/* Length of a quantization token at S ("Q4_K_M", "IQ4_XS", "F16"), 0 if
   none: [I|T]Q<digit> then letters, digits and '_'; or a float name. */
static size_t modelstore_quant_len(const char *s)
{
	static const char *const floats[] = {"BF16", "F16", "F32", "MXFP4"};
	size_t i = 0;

	for (size_t k = 0; k < sizeof(floats) / sizeof(floats[0]); k++) {
		size_t n = strlen(floats[k]);

		if (strncasecmp(s, floats[k], n) == 0 &&
		    modelstore_quant_edge(s[n]) && s[n] != '_')
			return n;
	}
	if (toupper((unsigned char)s[0]) == 'I' ||
	    toupper((unsigned char)s[0]) == 'T')
		i = 1;
	if (toupper((unsigned char)s[i]) != 'Q' ||
	    !isdigit((unsigned char)s[i + 1]))
		return 0;
	i += 2;
	while (isalnum((unsigned char)s[i]) || s[i] == '_')
		i++;
	return modelstore_quant_edge(s[i]) ? i : 0;
}

char *modelstore_quant_in_name(const char *name)
{
	const char *best = NULL;
	size_t best_len = 0;
	char *q;

	for (const char *s = name; *s; s++) {
		size_t n;

		if (s != name && !modelstore_quant_edge(s[-1]))
			continue;
		n = modelstore_quant_len(s);
		if (n > 0) {
			best = s;
			best_len = n;
			s += n - 1;
		}
	}
	if (best == NULL)
		return NULL;
	/* unsloth's dynamic quantizations: "UD-Q4_K_XL" is one name */
	if (best - name >= 3 && strncasecmp(best - 3, "UD-", 3) == 0 &&
	    (best - 3 == name || modelstore_quant_edge(best[-4]))) {
		best -= 3;
		best_len += 3;
	}
	q = strndup(best, best_len);
	for (size_t i = 0; q && q[i]; i++)
		q[i] = (char)toupper((unsigned char)q[i]);
	return q;
}

char *modelstore_stem(const char *rel)
{
	size_t n = strlen(rel), prefix;
	uint32_t no, count;

	if (gguf_split_parse_name(rel, &prefix, &no, &count) == 0)
		return strndup(rel, prefix);
	if (n >= 5 && strcasecmp(rel + n - 5, ".gguf") == 0)
		n -= 5;
	return strndup(rel, n);
}

/* Whether the file name NAME is a candidate (see modelstore_files). */
static bool modelstore_is_candidate(const char *name)
{
	size_t n = strlen(name), prefix;
	uint32_t no, count;

	if (name[0] == '.' || n < 6 || strcasecmp(name + n - 5, ".gguf") != 0)
		return false;
	return gguf_split_parse_name(name, &prefix, &no, &count) != 0 ||
	       no == 0;
}

/* Append one candidate to *V. */
static int modelstore_files_push(struct modelstore_file **v, size_t *n,
                                 size_t *cap, const char *rel, const char *path,
                                 bool broken)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 16;
		struct modelstore_file *p = realloc(*v, c * sizeof(**v));

		if (p == NULL)
			return -1;
		*v = p;
		*cap = c;
	}
	(*v)[*n].rel = strdup(rel);
	(*v)[*n].path = strdup(path);
	(*v)[*n].broken = broken;
	(*n)++;
	return (*v)[*n - 1].rel && (*v)[*n - 1].path ? 0 : -1;
}

/* Collect the candidates below DIR/REL (REL "" at the top). */
static int modelstore_files_in(const char *dir, const char *rel, int depth,
                               struct modelstore_file **v, size_t *n,
                               size_t *cap)
{
	char *here = rel[0] ? modelstore_join(dir, rel) : strdup(dir);
	DIR *d = here ? opendir(here) : NULL;
	struct dirent *de;
	int rc = here ? 0 : -1;

	while (d != NULL && rc == 0 && (de = readdir(d)) != NULL) {
		char *r, *p;
		struct stat st;
		int found;

		if (de->d_name[0] == '.')
			continue;
		r = rel[0] ? modelstore_join(rel, de->d_name)
		           : strdup(de->d_name);
		p = r ? modelstore_join(dir, r) : NULL;
		found = p ? stat(p, &st) : -1;
		if (p == NULL) {
			rc = -1;
		} else if (found == 0 && S_ISDIR(st.st_mode)) {
			if (depth < MODELSTORE_MAX_DEPTH)
				rc = modelstore_files_in(dir, r, depth + 1, v,
				                         n, cap);
		} else if (modelstore_is_candidate(de->d_name)) {
			/* a symlink to nothing: an HF snapshot whose blob
			   was deleted; listed, so the user sees why */
			bool gone = found != 0 && errno == ENOENT &&
			            lstat(p, &st) == 0 && S_ISLNK(st.st_mode);

			if (gone || found == 0)
				rc = modelstore_files_push(v, n, cap, r, p,
				                           gone);
		}
		free(r);
		free(p);
	}
	if (d)
		closedir(d);
	free(here);
	return rc;
}

static int modelstore_file_cmp(const void *a, const void *b)
{
	return strcmp(((const struct modelstore_file *)a)->rel,
	              ((const struct modelstore_file *)b)->rel);
}

int modelstore_files(const char *dir, struct modelstore_file **out, size_t *n)
{
	size_t cap = 0;

	*out = NULL;
	*n = 0;
	if (modelstore_files_in(dir, "", 0, out, n, &cap)) {
		modelstore_files_free(*out, *n);
		*out = NULL;
		*n = 0;
		return -1;
	}
	if (*n > 1)
		qsort(*out, *n, sizeof(**out), modelstore_file_cmp);
	return 0;
}

void modelstore_files_free(struct modelstore_file *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].rel);
		free(v[i].path);
	}
	free(v);
}

/* The quantization F's metadata or tensors give (static string): its
   general.file_type, else the type holding most bytes. */
static const char *modelstore_file_quant(const struct gguf_file *f)
{
	uint64_t bytes[64] = {0}, most = 0;
	uint32_t ft, best = 0;

	if (gguf_get_u32(f, "general.file_type", &ft, NULL, 0) == GGUF_OK)
		for (size_t i = 0; i < sizeof(modelstore_ftypes) /
		                           sizeof(modelstore_ftypes[0]);
		     i++)
			if (modelstore_ftypes[i].id == ft)
				return modelstore_ftypes[i].name;
	for (uint64_t i = 0; i < f->n_tensors; i++)
		if (f->tensors[i].type < 64)
			bytes[f->tensors[i].type] += f->tensors[i].nbytes;
	for (uint32_t t = 0; t < 64; t++)
		if (bytes[t] > most) {
			most = bytes[t];
			best = t;
		}
	return most ? qtype_name(best) : NULL;
}

/* Fill E's metadata from the open file F. */
static int modelstore_fill_meta(struct modelstore_entry *e,
                                const struct gguf_file *f, const char *quant)
{
	struct gguf_str s;
	char key[128];
	const char *q;

	for (uint64_t i = 0; i < f->n_tensors; i++) {
		uint64_t n = 1;

		for (uint32_t d = 0; d < f->tensors[i].n_dims; d++)
			n *= f->tensors[i].ne[d];
		e->n_params += n;
	}
	e->size = f->size;
	e->n_shards = f->n_shards ? f->n_shards : 1;
	if (gguf_get_str(f, "general.architecture", &s, NULL, 0) == GGUF_OK) {
		e->arch = gguf_str_dup(s);
		if (e->arch == NULL)
			return -1;
		snprintf(key, sizeof(key), "%.100s.context_length", e->arch);
		if (gguf_get_u64(f, key, &e->n_ctx, NULL, 0) != GGUF_OK)
			e->n_ctx = 0;
	}
	/* what the file says it is; the name's word only when it is mute */
	q = modelstore_file_quant(f);
	if (q == NULL)
		q = quant;
	if (q && (e->quant = strdup(q)) == NULL)
		return -1;
	return 0;
}

/* Set E's why to MSG, without a leading "PATH: " (the path is shown). */
static int modelstore_set_why(struct modelstore_entry *e, const char *msg)
{
	size_t n = strlen(e->path);

	if (strncmp(msg, e->path, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ')
		msg += n + 2;
	e->ok = false;
	e->why = strdup(msg);
	return e->why ? 0 : -1;
}

/* tok_load's first check (tok.c): a tokenizer of a kind it reads. The
   whole tokenizer is not built: see the notes. 0, or -1 with MSG. */
static int modelstore_check_tok(const struct gguf_file *f, char *msg,
                                size_t len)
{
	struct gguf_str s;

	if (gguf_get_str(f, "tokenizer.ggml.model", &s, msg, len) != GGUF_OK)
		return -1;
	if (gguf_str_eq(s, "gpt2") || gguf_str_eq(s, "llama"))
		return 0;
	snprintf(msg, len,
	         "tokenizer.ggml.model \"%.*s\" is not supported (supported: "
	         "gpt2, llama)",
	         (int)(s.len > 64 ? 64 : s.len), s.ptr);
	return -1;
}

/* Open E's file and run the engine's checks; a failure becomes E's why. */
static int modelstore_fill(struct modelstore_entry *e, const char *quant,
                           uint64_t expect_size)
{
	char msg[1024];
	struct gguf_file *f;
	struct model *m = NULL;
	struct stat st;
	uint32_t missing;
	int rc;

	if (expect_size && stat(e->path, &st) == 0 &&
	    (uint64_t)st.st_size != expect_size) {
		snprintf(msg, sizeof(msg),
		         "%" PRIu64 " bytes, the manifest says %" PRIu64
		         " (an unfinished download?)",
		         (uint64_t)st.st_size, expect_size);
		return modelstore_set_why(e, msg);
	}
	f = gguf_split_open(e->path, msg, sizeof(msg));
	if (f == NULL)
		return modelstore_set_why(e, msg);
	e->opened = true;
	rc = modelstore_fill_meta(e, f, quant);
	if (rc == 0 && model_load(f, &m, msg, sizeof(msg)) != 0) {
		rc = modelstore_set_why(e, msg);
	} else if (rc == 0) {
		missing = m->cfg.features & ~backend_cpu_ops.features;
		e->ok = missing == 0;
		if (missing) {
			snprintf(msg, sizeof(msg),
			         "the model uses %s, which parley does not run "
			         "yet",
			         model_feature_first(missing));
			rc = modelstore_set_why(e, msg);
		} else if (modelstore_check_tok(f, msg, sizeof(msg))) {
			rc = modelstore_set_why(e, msg);
		}
	}
	model_free(m);
	gguf_close(f);
	return rc;
}

int modelstore_add(struct modelstore_list *l, enum modelstore_source src,
                   const char *name, const char *path, const char *quant,
                   const char *why, uint64_t expect_size, char *err,
                   size_t errlen)
{
	struct modelstore_entry *e;

	if (l->n == l->cap) {
		size_t c = l->cap ? l->cap * 2 : 16;
		struct modelstore_entry *p = realloc(l->v, c * sizeof(*p));

		if (p == NULL)
			goto nomem;
		l->v = p;
		l->cap = c;
	}
	e = &l->v[l->n++];
	memset(e, 0, sizeof(*e));
	e->source = src;
	e->name = strdup(name);
	e->path = strdup(path);
	if (e->name == NULL || e->path == NULL)
		goto nomem;
	if ((why ? modelstore_set_why(e, why)
	         : modelstore_fill(e, quant, expect_size)) == 0)
		return 0;
nomem:
	snprintf(err, errlen, "%s: out of memory", path);
	return -1;
}

/* Add the models below the folder ROOT (parley's cache, a models-dir). */
static int modelstore_walk(struct modelstore_list *l,
                           enum modelstore_source src, const char *root,
                           char *err, size_t errlen)
{
	struct modelstore_file *v;
	size_t n;
	int rc = 0;

	if (modelstore_files(root, &v, &n)) {
		snprintf(err, errlen, "%s: out of memory", root);
		return -1;
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		char *name = modelstore_stem(v[i].rel);

		rc = name ? modelstore_add(l, src, name, v[i].path, NULL,
		                           v[i].broken
		                               ? "a broken symbolic link (its "
		                                 "target is missing)"
		                               : NULL,
		                           0, err, errlen)
		          : -1;
		free(name);
	}
	modelstore_files_free(v, n);
	return rc;
}

/* Add parley's cache and each folder of the colon list DIRS. */
static int modelstore_scan_dirs(const char *dirs, struct modelstore_list *l,
                                char *err, size_t errlen)
{
	char *def = config_default_model(), *slash, *copy, *save = NULL;
	int rc = 0;

	if (def && (slash = strrchr(def, '/')) != NULL) {
		*slash = '\0';
		rc = modelstore_walk(l, MODELSTORE_PARLEY, def, err, errlen);
	}
	free(def);
	if (rc || dirs == NULL)
		return rc;
	copy = strdup(dirs);
	if (copy == NULL) {
		snprintf(err, errlen, "models-dir: out of memory");
		return -1;
	}
	for (char *d = strtok_r(copy, ":", &save); d && rc == 0;
	     d = strtok_r(NULL, ":", &save))
		rc = modelstore_walk(l, MODELSTORE_DIR, d, err, errlen);
	free(copy);
	return rc;
}

static int modelstore_entry_cmp(const void *a, const void *b)
{
	const struct modelstore_entry *x = a, *y = b;
	int c;

	if (x->source != y->source)
		return x->source < y->source ? -1 : 1;
	c = strcmp(x->name, y->name);
	return c ? c : strcmp(x->path, y->path);
}

int modelstore_scan(const char *dirs, struct modelstore_list *l, char *err,
                    size_t errlen)
{
	memset(l, 0, sizeof(*l));
	if (modelstore_scan_dirs(dirs, l, err, errlen) ||
	    modelstore_repo_scan_hf(l, err, errlen) ||
	    modelstore_ollama_scan(l, err, errlen) ||
	    modelstore_repo_scan_lmstudio(l, err, errlen))
		return -1;
	if (l->n > 1)
		qsort(l->v, l->n, sizeof(*l->v), modelstore_entry_cmp);
	return 0;
}

void modelstore_free(struct modelstore_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].name);
		free(l->v[i].path);
		free(l->v[i].arch);
		free(l->v[i].quant);
		free(l->v[i].why);
	}
	free(l->v);
	memset(l, 0, sizeof(*l));
}

void modelstore_fmt_count(char *out, size_t n, uint64_t v)
{
	if (v == 0)
		snprintf(out, n, "-");
	else if (v >= 1000000000)
		snprintf(out, n, "%.1fB", (double)v / 1e9);
	else if (v >= 1000000)
		snprintf(out, n, "%.0fM", (double)v / 1e6);
	else if (v >= 1000)
		snprintf(out, n, "%.0fK", (double)v / 1e3);
	else
		snprintf(out, n, "%llu", (unsigned long long)v);
}

void modelstore_fmt_bytes(char *out, size_t n, uint64_t v)
{
	if (v == 0)
		snprintf(out, n, "-");
	else if (v >= 1000000000)
		snprintf(out, n, "%.1f GB", (double)v / 1e9);
	else if (v >= 1000000)
		snprintf(out, n, "%.0f MB", (double)v / 1e6);
	else
		snprintf(out, n, "%.0f KB", (double)v / 1e3);
}

/*
 * promptdir.c - find and read built-in templates and system presets.
 */
#include "promptdir.h"

#include "gguf.h"
#include "sbuf.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef PARLEY_DATADIR
#define PARLEY_DATADIR "/usr/local/share/parley"
#endif

const char *promptdir_root(void)
{
	const char *dir = getenv("PARLEY_DATA_DIR");

	return dir != NULL && *dir != '\0' ? dir : PARLEY_DATADIR "/prompts";
}

char *promptdir_read_file(const char *path, size_t *len, char *err,
                          size_t errlen)
{
	FILE *fp = fopen(path, "rb");
	struct sbuf sb = SBUF_INIT;
	char chunk[8192];
	size_t r;

	if (fp == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	while ((r = fread(chunk, 1, sizeof(chunk), fp)) > 0) {
		if (sb.len + r > PROMPTDIR_MAX_FILE) {
			snprintf(err, errlen, "%s: larger than %u bytes", path,
			         PROMPTDIR_MAX_FILE);
			goto fail;
		}
		sbuf_add(&sb, chunk, r);
	}
	if (ferror(fp)) {
		snprintf(err, errlen, "%s: read error", path);
		goto fail;
	}
	if (sb.failed) {
		snprintf(err, errlen, "%s: out of memory", path);
		goto fail;
	}
	fclose(fp);
	*len = sb.len;
	return sbuf_take(&sb);
fail:
	fclose(fp);
	sbuf_free(&sb);
	return NULL;
}

/* True when NAME is a plain identifier (no path tricks). */
static bool promptdir_plain_name(const char *name)
{
	if (*name == '\0' || *name == '.')
		return false;
	for (const char *p = name; *p; p++)
		if (*p == '/' || *p == '\\')
			return false;
	return true;
}

/* Read SUBDIR/NAME SUFFIX; on a missing file, list what exists. */
static char *promptdir_read_named(const char *subdir, const char *name,
                                  const char *suffix, const char *what,
                                  size_t *len, char *err, size_t errlen)
{
	struct sbuf path = SBUF_INIT, names = SBUF_INIT;
	char *text = NULL;
	FILE *fp;

	if (!promptdir_plain_name(name)) {
		snprintf(err, errlen, "%s '%s': not a name", what, name);
		return NULL;
	}
	sbuf_printf(&path, "%s/%s/%s%s", promptdir_root(), subdir, name,
	            suffix);
	if (path.failed) {
		snprintf(err, errlen, "out of memory");
		sbuf_free(&path);
		return NULL;
	}
	fp = fopen(path.buf, "rb");
	if (fp == NULL && errno == ENOENT) {
		promptdir_names(subdir, suffix, &names);
		snprintf(err, errlen, "no %s named '%s' (built in: %s)", what,
		         name, names.buf != NULL ? names.buf : "none found");
	} else {
		if (fp != NULL)
			fclose(fp);
		text = promptdir_read_file(path.buf, len, err, errlen);
	}
	sbuf_free(&path);
	sbuf_free(&names);
	return text;
}

const char *promptdir_builtin_for(const struct gguf_file *gf)
{
	/* architecture -> built-in template of its instruct models */
	static const char *const by_arch[][2] = {
	    {"gemma3", "gemma3"},
	};
	struct gguf_str arch;
	size_t i;

	if (gf == NULL ||
	    gguf_get_str(gf, "general.architecture", &arch, NULL, 0) != GGUF_OK)
		return "chatml";
	for (i = 0; i < sizeof(by_arch) / sizeof(by_arch[0]); i++)
		if (arch.len == strlen(by_arch[i][0]) &&
		    memcmp(arch.ptr, by_arch[i][0], arch.len) == 0)
			return by_arch[i][1];
	return "chatml";
}

int promptdir_template(const struct gguf_file *gf, const char *name, char **src,
                       size_t *len, char **shown, char *err, size_t errlen)
{
	struct gguf_str gs;

	*src = *shown = NULL;
	if ((name == NULL || *name == '\0') && gf != NULL &&
	    gguf_get_str(gf, "tokenizer.chat_template", &gs, NULL, 0) ==
	        GGUF_OK &&
	    gs.len > 0) {
		*src = gguf_str_dup(gs);
		*len = gs.len;
		*shown = strdup("model");
	} else {
		if (name == NULL || *name == '\0')
			name = promptdir_builtin_for(gf);
		if (strchr(name, '/') != NULL ||
		    (strlen(name) > 6 &&
		     strcmp(name + strlen(name) - 6, ".jinja") == 0))
			*src = promptdir_read_file(name, len, err, errlen);
		else
			*src = promptdir_read_named("templates", name, ".jinja",
			                            "chat template", len, err,
			                            errlen);
		if (*src == NULL)
			return -1;
		*shown = strdup(name);
	}
	if (*src == NULL || *shown == NULL) {
		free(*src);
		free(*shown);
		*src = *shown = NULL;
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

int promptdir_system_preset(const char *name, char **text, char *err,
                            size_t errlen)
{
	size_t len = 0;

	*text = promptdir_read_named("system", name, ".txt", "system preset",
	                             &len, err, errlen);
	if (*text == NULL)
		return -1;
	if (len > 0 && (*text)[len - 1] == '\n')
		(*text)[len - 1] = '\0';
	return 0;
}

static int promptdir_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int promptdir_names(const char *subdir, const char *suffix, struct sbuf *out)
{
	struct sbuf path = SBUF_INIT;
	size_t slen = strlen(suffix), n = 0, cap = 0;
	char **v = NULL;
	struct dirent *e;
	DIR *d;

	sbuf_printf(&path, "%s/%s", promptdir_root(), subdir);
	d = path.failed ? NULL : opendir(path.buf);
	sbuf_free(&path);
	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL) {
		size_t l = strlen(e->d_name);

		if (e->d_name[0] == '.' || l <= slen ||
		    strcmp(e->d_name + l - slen, suffix) != 0)
			continue;
		if (n == cap) {
			char **nv =
			    realloc(v, (cap ? cap * 2 : 16) * sizeof(*v));

			if (nv == NULL)
				break;
			v = nv;
			cap = cap ? cap * 2 : 16;
		}
		v[n] = strndup(e->d_name, l - slen);
		if (v[n] != NULL)
			n++;
	}
	closedir(d);
	qsort(v, n, sizeof(*v), promptdir_cmp);
	for (size_t i = 0; i < n; i++) {
		sbuf_printf(out, "%s%s", i ? ", " : "", v[i]);
		free(v[i]);
	}
	free(v);
	return (int)n;
}

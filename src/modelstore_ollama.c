/*
 * modelstore_ollama.c - the models of ollama's store (see modelstore.h).
 *
 * NOTES ON THE DESIGN
 *
 * The store ($OLLAMA_MODELS, else ~/.ollama/models) holds
 *     manifests/HOST/NAMESPACE/MODEL/TAG   an OCI image manifest (JSON)
 *     blobs/sha256-HEX                      content-addressed files
 * A manifest's layers[] each have a mediaType, a digest "sha256:HEX" and
 * a size; the layer "application/vnd.ollama.image.model" is the GGUF (the
 * others: template, params, license, projector, adapter). ollama writes a
 * blob as sha256-HEX-partial(-N) and renames it when complete, and writes
 * the manifest last, so a manifest names whole blobs; a blob whose size
 * is not the manifest's is still refused, cheaply (no hash is computed:
 * that would read gigabytes).
 *
 * Names as ollama prints them: registry.ollama.ai/library/qwen3/8b is
 * "qwen3:8b", registry.ollama.ai/NS/M/T is "NS/M:T", any other host keeps
 * its host: "hf.co/ORG/REPO:Q4_K_M". The manifest is hostile input: it is
 * read only up to MODELSTORE_OLLAMA_MAX bytes, and a digest that is not
 * 64 hex digits is refused (it must not lead out of blobs/).
 */
#include "modelstore.h"
#include "modelstore_int.h"

#include "json.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MODELSTORE_OLLAMA_MAX   (1 << 20) /* bytes of a manifest read */
#define MODELSTORE_OLLAMA_MODEL "application/vnd.ollama.image.model"

/* Read the manifest PATH into a new NUL-terminated buffer (caller
   frees), or NULL with the reason in WHY. */
static char *modelstore_ollama_read(const char *path, size_t *len, char *why,
                                    size_t whylen)
{
	FILE *fp = fopen(path, "r");
	char *buf;

	if (fp == NULL) {
		snprintf(why, whylen, "manifest: cannot be read");
		return NULL;
	}
	buf = malloc(MODELSTORE_OLLAMA_MAX + 1);
	if (buf == NULL) {
		fclose(fp);
		snprintf(why, whylen, "manifest: out of memory");
		return NULL;
	}
	*len = fread(buf, 1, MODELSTORE_OLLAMA_MAX + 1, fp);
	fclose(fp);
	if (*len > MODELSTORE_OLLAMA_MAX) {
		snprintf(why, whylen, "manifest: larger than %d bytes",
		         MODELSTORE_OLLAMA_MAX);
		free(buf);
		return NULL;
	}
	buf[*len] = '\0';
	return buf;
}

/* Find the model layer of manifest M: its blob's hex digest into HEX
   (65 bytes) and its size (0 if not given). 0, or -1 with WHY. */
static int modelstore_ollama_layer(const struct json_value *m, char *hex,
                                   uint64_t *size, char *why, size_t whylen)
{
	const struct json_value *layers = json_object_get(m, "layers");

	if (layers == NULL || layers->type != JSON_ARRAY) {
		snprintf(why, whylen, "manifest: no layers array");
		return -1;
	}
	for (size_t i = 0; i < layers->u.arr.n; i++) {
		const struct json_value *l = layers->u.arr.items[i];
		const struct json_value *mt = json_object_get(l, "mediaType");
		const struct json_value *dg = json_object_get(l, "digest");
		const struct json_value *sz = json_object_get(l, "size");
		const char *d;

		if (mt == NULL || mt->type != JSON_STRING ||
		    strcmp(mt->u.str.ptr, MODELSTORE_OLLAMA_MODEL) != 0)
			continue;
		d = dg && dg->type == JSON_STRING ? dg->u.str.ptr : "";
		if (strncmp(d, "sha256:", 7) != 0 || strlen(d + 7) != 64 ||
		    strspn(d + 7, "0123456789abcdef") != 64) {
			snprintf(why, whylen,
			         "manifest: the model layer's digest is not "
			         "sha256:<64 hex digits>");
			return -1;
		}
		memcpy(hex, d + 7, 65);
		*size = sz && sz->type == JSON_INT && sz->u.i > 0
		            ? (uint64_t)sz->u.i
		            : 0;
		return 0;
	}
	snprintf(why, whylen, "manifest: no layer of type %s",
	         MODELSTORE_OLLAMA_MODEL);
	return -1;
}

/* Add the model of the manifest MPATH, called NAME; ROOT is the store. */
static int modelstore_ollama_add(struct modelstore_list *l, const char *root,
                                 const char *name, const char *mpath, char *err,
                                 size_t errlen)
{
	char why[512], msg[256], hex[65], blob[96], *text, *path = NULL;
	struct json_value *m = NULL;
	uint64_t size = 0;
	struct stat st;
	size_t len;
	int rc;

	why[0] = '\0';
	text = modelstore_ollama_read(mpath, &len, why, sizeof(why));
	if (text && json_parse(text, len, &m, msg, sizeof(msg)) != 0)
		snprintf(why, sizeof(why), "manifest: not JSON (%s)", msg);
	else if (m && m->type != JSON_OBJECT)
		snprintf(why, sizeof(why), "manifest: not a JSON object");
	else if (m && modelstore_ollama_layer(m, hex, &size, why,
	                                      sizeof(why)) == 0) {
		snprintf(blob, sizeof(blob), "blobs/sha256-%s", hex);
		path = modelstore_join(root, blob);
		if (path && stat(path, &st) != 0)
			snprintf(why, sizeof(why),
			         "the manifest names blob sha256-%.12s..., "
			         "which is missing",
			         hex);
	}
	free(text);
	json_free(m);
	rc = modelstore_add(l, MODELSTORE_OLLAMA, name,
	                    path && why[0] == '\0' ? path : mpath, NULL,
	                    why[0] ? why : NULL, size, err, errlen);
	free(path);
	return rc;
}

/* The name of HOST/NS/MODEL:TAG as ollama prints it, into OUT. */
static void modelstore_ollama_name(char *out, size_t n, const char *host,
                                   const char *ns, const char *model,
                                   const char *tag)
{
	if (strcmp(host, "registry.ollama.ai") != 0)
		snprintf(out, n, "%s/%s/%s:%s", host, ns, model, tag);
	else if (strcmp(ns, "library") != 0)
		snprintf(out, n, "%s/%s:%s", ns, model, tag);
	else
		snprintf(out, n, "%s:%s", model, tag);
}

/* The names in folder DIR that do not start with '.', sorted; N set. */
static char **modelstore_ollama_ls(const char *dir, size_t *n)
{
	struct dirent **v = NULL;
	int k = dir ? scandir(dir, &v, NULL, alphasort) : -1;
	char **names;

	*n = 0;
	if (k < 0)
		return NULL;
	names = calloc((size_t)k + 1, sizeof(*names));
	for (int i = 0; i < k; i++) {
		if (names && v[i]->d_name[0] != '.')
			names[(*n)++] = strdup(v[i]->d_name);
		free(v[i]);
	}
	free(v);
	return names;
}

static void modelstore_ollama_ls_free(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

/* Walk manifests/HOST/NS/MODEL/TAG below ROOT, DEPTH levels done, the
   components so far in PART[]. */
static int modelstore_ollama_walk(struct modelstore_list *l, const char *root,
                                  const char *dir, const char *part[3],
                                  int depth, char *err, size_t errlen)
{
	size_t n;
	char **names = modelstore_ollama_ls(dir, &n);
	int rc = 0;

	for (size_t i = 0; i < n && rc == 0; i++) {
		char *p = names[i] ? modelstore_join(dir, names[i]) : NULL;
		struct stat st;
		char name[1024];

		if (p == NULL) {
			snprintf(err, errlen, "%s: out of memory", dir);
			rc = -1;
		} else if (depth < 3) {
			part[depth] = names[i];
			rc = modelstore_ollama_walk(l, root, p, part, depth + 1,
			                            err, errlen);
		} else if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) {
			modelstore_ollama_name(name, sizeof(name), part[0],
			                       part[1], part[2], names[i]);
			rc = modelstore_ollama_add(l, root, name, p, err,
			                           errlen);
		}
		free(p);
	}
	modelstore_ollama_ls_free(names, n);
	return rc;
}

int modelstore_ollama_scan(struct modelstore_list *l, char *err, size_t errlen)
{
	char *root =
	    modelstore_env_dir("OLLAMA_MODELS", ".ollama/models", NULL);
	char *man = root ? modelstore_join(root, "manifests") : NULL;
	const char *part[3] = {NULL, NULL, NULL};
	int rc =
	    man ? modelstore_ollama_walk(l, root, man, part, 0, err, errlen)
	        : 0;

	free(man);
	free(root);
	return rc;
}

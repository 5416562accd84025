/*
 * modelstore_repo.c - models kept per Hugging Face repository: the hub
 * cache and LM Studio's folder (see modelstore.h).
 *
 * NOTES ON THE DESIGN
 *
 * Both keep a repository's files below one folder: the hub cache below
 * models--ORG--REPO/snapshots/COMMIT/ (COMMIT read from refs/main; each
 * file a symlink into ../../blobs/, made only once the blob is complete,
 * while the download itself is blobs/X.incomplete), LM Studio below
 * PUBLISHER/REPO/. A repository usually holds one model in several
 * quantizations, named by the file (Qwen3-8B-Q4_K_M.gguf) or a subfolder
 * (Q4_K_M/...-00001-of-00002.gguf), so a model is called ORG/REPO:QUANT,
 * as llama.cpp's -hf and ollama's hf.co/ names do. When the name gives no
 * quantization, or two files of the repository give the same one, the
 * file is called ORG/REPO/STEM instead (its path in the repository
 * without ".gguf"), so that every name stays unique.
 */
#include "modelstore.h"
#include "modelstore_int.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* How many files of V[0..N) give the quantization Q (case folded). */
static size_t modelstore_repo_count(char *const *quants, size_t n,
                                    const char *q)
{
	size_t c = 0;

	for (size_t i = 0; i < n; i++)
		c += quants[i] && strcmp(quants[i], q) == 0;
	return c;
}

/* The name of file REL of repository REPO, QUANT its quantization or
   NULL, UNIQUE whether no other file gives QUANT. */
static char *modelstore_repo_name(const char *repo, const char *rel,
                                  const char *quant, bool unique)
{
	char *stem, *name;
	size_t n;

	if (quant && unique) {
		n = strlen(repo) + strlen(quant) + 2;
		name = malloc(n);
		if (name)
			snprintf(name, n, "%s:%s", repo, quant);
		return name;
	}
	stem = modelstore_stem(rel);
	name = stem ? modelstore_join(repo, stem) : NULL;
	free(stem);
	return name;
}

/* Add the GGUF files below DIR as the models of REPO ("ORG/REPO"). */
static int modelstore_repo_add(struct modelstore_list *l,
                               enum modelstore_source src, const char *repo,
                               const char *dir, char *err, size_t errlen)
{
	struct modelstore_file *v;
	char **quants;
	size_t n;
	int rc = 0;

	if (modelstore_files(dir, &v, &n))
		goto nomem;
	quants = calloc(n ? n : 1, sizeof(*quants));
	if (quants == NULL) {
		modelstore_files_free(v, n);
		goto nomem;
	}
	for (size_t i = 0; i < n; i++)
		quants[i] = modelstore_quant_in_name(v[i].rel);
	for (size_t i = 0; i < n && rc == 0; i++) {
		char *name = modelstore_repo_name(
		    repo, v[i].rel, quants[i],
		    quants[i] &&
		        modelstore_repo_count(quants, n, quants[i]) == 1);

		rc = name ? modelstore_add(l, src, name, v[i].path, quants[i],
		                           v[i].broken
		                               ? "a broken symbolic link (its "
		                                 "blob is missing)"
		                               : NULL,
		                           0, err, errlen)
		          : -1;
		if (name == NULL)
			snprintf(err, errlen, "%s: out of memory", dir);
		free(name);
	}
	for (size_t i = 0; i < n; i++)
		free(quants[i]);
	free(quants);
	modelstore_files_free(v, n);
	return rc;
nomem:
	snprintf(err, errlen, "%s: out of memory", dir);
	return -1;
}

/* Whether S is a plausible commit hash: 7..64 hex digits (refs/main is
   hostile input: it must not lead out of snapshots/). */
static bool modelstore_repo_is_commit(const char *s)
{
	size_t n = strlen(s);

	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]))
			return false;
	return n >= 7 && n <= 64;
}

/* The snapshot folder of the hub repository folder RDIR: the commit of
   refs/main, else the most recently changed snapshot; new string or NULL. */
static char *modelstore_repo_snapshot(const char *rdir)
{
	char *ref = modelstore_join(rdir, "refs/main");
	char *snaps = modelstore_join(rdir, "snapshots"), *best = NULL;
	char hash[80] = "";
	FILE *fp = ref ? fopen(ref, "r") : NULL;
	struct dirent *de;
	struct stat st;
	time_t newest = 0;
	DIR *d;

	if (fp) {
		if (fgets(hash, sizeof(hash), fp) == NULL)
			hash[0] = '\0';
		hash[strcspn(hash, "\r\n \t")] = '\0';
		fclose(fp);
	}
	free(ref);
	if (snaps == NULL)
		return NULL;
	if (modelstore_repo_is_commit(hash)) {
		best = modelstore_join(snaps, hash);
		if (best && stat(best, &st) == 0 && S_ISDIR(st.st_mode)) {
			free(snaps);
			return best;
		}
		free(best);
		best = NULL;
	}
	d = opendir(snaps);
	while (d && (de = readdir(d)) != NULL) {
		char *p;

		if (de->d_name[0] == '.')
			continue;
		p = modelstore_join(snaps, de->d_name);
		if (p && stat(p, &st) == 0 && S_ISDIR(st.st_mode) &&
		    (best == NULL || st.st_mtime > newest)) {
			free(best);
			best = p;
			newest = st.st_mtime;
		} else {
			free(p);
		}
	}
	if (d)
		closedir(d);
	free(snaps);
	return best;
}

/* The hub cache folder: $HF_HUB_CACHE, $HF_HOME/hub, or
   ${XDG_CACHE_HOME:-~/.cache}/huggingface/hub; new string or NULL. */
static char *modelstore_repo_hub_dir(void)
{
	const char *v = getenv("HF_HUB_CACHE");

	if (v && v[0] == '/')
		return strdup(v);
	v = getenv("HF_HOME");
	if (v && v[0] == '/')
		return modelstore_join(v, "hub");
	return modelstore_env_dir("XDG_CACHE_HOME", ".cache",
	                          "huggingface/hub");
}

int modelstore_repo_scan_hf(struct modelstore_list *l, char *err, size_t errlen)
{
	char *root = modelstore_repo_hub_dir();
	DIR *d = root ? opendir(root) : NULL;
	struct dirent *de;
	int rc = 0;

	while (d && rc == 0 && (de = readdir(d)) != NULL) {
		const char *org = de->d_name + 8, *sep;
		char repo[512], *rdir, *snap;

		/* models--ORG--REPO; datasets--, spaces-- are not models */
		if (strncmp(de->d_name, "models--", 8) != 0 ||
		    (sep = strstr(org, "--")) == NULL || sep == org ||
		    sep[2] == '\0' ||
		    (size_t)snprintf(repo, sizeof(repo), "%.*s/%s",
		                     (int)(sep - org), org,
		                     sep + 2) >= sizeof(repo))
			continue;
		rdir = modelstore_join(root, de->d_name);
		snap = rdir ? modelstore_repo_snapshot(rdir) : NULL;
		if (snap)
			rc = modelstore_repo_add(l, MODELSTORE_HF, repo, snap,
			                         err, errlen);
		free(snap);
		free(rdir);
	}
	if (d)
		closedir(d);
	free(root);
	return rc;
}

/* Add LM Studio's models below ROOT/PUBLISHER/REPO. */
static int modelstore_repo_lmstudio_root(struct modelstore_list *l,
                                         const char *root, char *err,
                                         size_t errlen)
{
	DIR *d = root ? opendir(root) : NULL;
	struct dirent *de;
	int rc = 0;

	while (d && rc == 0 && (de = readdir(d)) != NULL) {
		char *pdir;
		DIR *pd;
		struct dirent *re;

		if (de->d_name[0] == '.')
			continue;
		pdir = modelstore_join(root, de->d_name);
		pd = pdir ? opendir(pdir) : NULL;
		while (pd && rc == 0 && (re = readdir(pd)) != NULL) {
			char repo[512], *rdir;

			if (re->d_name[0] == '.' ||
			    (size_t)snprintf(repo, sizeof(repo), "%s/%s",
			                     de->d_name,
			                     re->d_name) >= sizeof(repo))
				continue;
			rdir = modelstore_join(pdir, re->d_name);
			if (rdir)
				rc = modelstore_repo_add(l, MODELSTORE_LMSTUDIO,
				                         repo, rdir, err,
				                         errlen);
			free(rdir);
		}
		if (pd)
			closedir(pd);
		free(pdir);
	}
	if (d)
		closedir(d);
	return rc;
}

int modelstore_repo_scan_lmstudio(struct modelstore_list *l, char *err,
                                  size_t errlen)
{
	char *now = modelstore_env_dir(NULL, ".lmstudio/models", NULL);
	char *old = modelstore_env_dir(NULL, ".cache/lm-studio/models", NULL);
	int rc = modelstore_repo_lmstudio_root(l, now, err, errlen);

	if (rc == 0)
		rc = modelstore_repo_lmstudio_root(l, old, err, errlen);
	free(now);
	free(old);
	return rc;
}

/*
 * hfpull_cache.c - the Hugging Face hub cache as `parley pull` writes it
 * (hfpull.h, note 4), and where the token comes from. The layout is
 * huggingface_hub's, so that it and llama.cpp use what parley pulled:
 *
 *   CACHE/models--ORG--REPO/blobs/SHA256            the file's bytes
 *                          /blobs/SHA256.incomplete while it downloads
 *                          /snapshots/COMMIT/PATH   -> ../../blobs/SHA256
 *                          /refs/main               COMMIT
 *   CACHE/.locks/models--ORG--REPO/SHA256.lock      flock'd meanwhile
 */
#include "hfpull_int.h"
#include "secretfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* A + B + C joined (any may be ""), malloc'd, or NULL. */
static char *hfpull_cat(const char *a, const char *b, const char *c)
{
	size_t n = strlen(a) + strlen(b) + strlen(c) + 1;
	char *s = malloc(n);

	if (s)
		snprintf(s, n, "%s%s%s", a, b, c);
	return s;
}

/* $HF_HOME, else ${XDG_CACHE_HOME:-~/.cache}/huggingface; malloc'd or
   NULL (no HOME either, or no memory). */
static char *hfpull_home(void)
{
	const char *v = getenv("HF_HOME");

	if (v && v[0])
		return strdup(v);
	v = getenv("XDG_CACHE_HOME");
	if (v && v[0])
		return hfpull_cat(v, "/huggingface", "");
	v = getenv("HOME");
	return v && v[0] ? hfpull_cat(v, "/.cache/huggingface", "") : NULL;
}

char *hfpull_cache_dir(void)
{
	const char *v = getenv("HF_HUB_CACHE");
	char *home, *dir;

	if (v && v[0])
		return strdup(v);
	home = hfpull_home();
	dir = home ? hfpull_cat(home, "/hub", "") : NULL;
	free(home);
	return dir;
}

void hfpull_token_free(char *token)
{
	if (token) {
		explicit_bzero(token, strlen(token));
		free(token);
	}
}

/* The token on the first line of the file PATH into *TOKEN (NULL when
   the file does not exist). 0, or -1 with a message. */
static int hfpull_token_file(const char *path, char **token, char *err,
                             size_t errlen)
{
	return secretfile_read("token file", path, true, token, err, errlen);
}

int hfpull_token(char **token, char *err, size_t errlen)
{
	const char *v = getenv("HF_TOKEN");
	char *home, *path;
	int rc;

	*token = NULL;
	if (v && v[0]) {
		*token = strdup(v);
		if (*token == NULL)
			snprintf(err, errlen, "out of memory");
		return *token ? 0 : -1;
	}
	v = getenv("HF_TOKEN_PATH");
	if (v && v[0])
		return hfpull_token_file(v, token, err, errlen);
	home = hfpull_home();
	path = home ? hfpull_cat(home, "/token", "") : NULL;
	rc = path ? hfpull_token_file(path, token, err, errlen) : 0;
	free(home);
	free(path);
	return rc;
}

/* mkdir -p of PATH's folders up to, without, its last N_KEEP parts
   (0: PATH itself too). 0, or -1 with a message. */
static int hfpull_mkdirs(const char *path, int n_keep, char *err, size_t errlen)
{
	char *p = strdup(path), *s;
	int rc = 0;

	if (p == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int i = 0; i < n_keep && (s = strrchr(p, '/')) != NULL; i++)
		*s = '\0';
	for (s = p + 1;; s++) {
		if (*s != '/' && *s != '\0')
			continue;
		char c = *s;

		*s = '\0';
		if (mkdir(p, 0755) != 0 && errno != EEXIST) {
			snprintf(err, errlen, "cannot create %s: %s", p,
			         strerror(errno));
			rc = -1;
			break;
		}
		*s = c;
		if (c == '\0')
			break;
	}
	free(p);
	return rc;
}

/* CACHE/PREFIXmodels--ORG--REPO, malloc'd or NULL. */
static char *hfpull_repo_dir(const char *cache, const char *prefix,
                             const char *repo)
{
	const char *slash = strchr(repo, '/');
	size_t n = strlen(cache) + strlen(prefix) + strlen(repo) + 16;
	char *s = malloc(n);

	if (s && slash)
		snprintf(s, n, "%s/%smodels--%.*s--%s", cache, prefix,
		         (int)(slash - repo), repo, slash + 1);
	return s;
}

void hfpull_blob_close(struct hfpull_blob *b)
{
	if (b->fd >= 0)
		close(b->fd);
	if (b->lock_fd >= 0)
		close(b->lock_fd); /* releases the flock */
	free(b->dir);
	free(b->final);
	free(b->part);
	memset(b, 0, sizeof(*b));
	b->fd = b->lock_fd = -1;
}

/* Take the lock of B's blob SHA (huggingface_hub's file name). */
static int hfpull_blob_lock(const char *cache, const char *repo,
                            const char *sha, struct hfpull_blob *b, char *err,
                            size_t errlen)
{
	char *ldir = hfpull_repo_dir(cache, ".locks/", repo);
	char *lock = ldir ? hfpull_cat(ldir, "/", sha) : NULL;
	char *lockf = lock ? hfpull_cat(lock, ".lock", "") : NULL;
	int rc = -1;

	if (lockf == NULL)
		snprintf(err, errlen, "out of memory");
	else if (hfpull_mkdirs(ldir, 0, err, errlen) == 0) {
		b->lock_fd = open(lockf, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (b->lock_fd < 0)
			snprintf(err, errlen, "cannot open %s: %s", lockf,
			         strerror(errno));
		else if (flock(b->lock_fd, LOCK_EX | LOCK_NB) != 0)
			snprintf(err, errlen,
			         "another download of this file is running "
			         "(%s is locked); wait for it to finish",
			         lockf);
		else
			rc = 0;
	}
	free(ldir);
	free(lock);
	free(lockf);
	return rc;
}

int hfpull_blob_open(const char *cache, const char *repo,
                     const struct hfpull_file *f, struct hfpull_blob *b,
                     char *err, size_t errlen)
{
	struct stat sb;

	memset(b, 0, sizeof(*b));
	b->fd = b->lock_fd = -1;
	b->dir = hfpull_repo_dir(cache, "", repo);
	b->final = b->dir ? hfpull_cat(b->dir, "/blobs/", f->sha256) : NULL;
	b->part = b->final ? hfpull_cat(b->final, ".incomplete", "") : NULL;
	if (b->part == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	if (hfpull_mkdirs(b->final, 1, err, errlen) ||
	    hfpull_blob_lock(cache, repo, f->sha256, b, err, errlen))
		goto fail;
	/* a finished blob got its name only after its hash was checked */
	if (stat(b->final, &sb) == 0 && S_ISREG(sb.st_mode) &&
	    (uint64_t)sb.st_size == f->size) {
		b->complete = true;
		return 0;
	}
	b->fd = open(b->part, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (b->fd < 0 || fstat(b->fd, &sb) != 0) {
		snprintf(err, errlen, "cannot open %s: %s", b->part,
		         strerror(errno));
		goto fail;
	}
	b->have = (uint64_t)sb.st_size;
	if (b->have > f->size && hfpull_blob_restart(b, err, errlen))
		goto fail;
	return 0;
fail:
	hfpull_blob_close(b);
	return -1;
}

int hfpull_blob_restart(struct hfpull_blob *b, char *err, size_t errlen)
{
	if (ftruncate(b->fd, 0) != 0) {
		snprintf(err, errlen, "cannot empty %s: %s", b->part,
		         strerror(errno));
		return -1;
	}
	b->have = 0;
	return 0;
}

int hfpull_blob_commit(struct hfpull_blob *b, char *err, size_t errlen)
{
	if (fsync(b->fd) != 0 || rename(b->part, b->final) != 0) {
		snprintf(err, errlen, "cannot finish %s: %s", b->final,
		         strerror(errno));
		return -1;
	}
	close(b->fd);
	b->fd = -1;
	b->complete = true;
	return 0;
}

void hfpull_blob_discard(struct hfpull_blob *b)
{
	if (b->part)
		unlink(b->part);
}

/* Replace the file PATH by a symlink to TARGET (or by a file holding
   TEXT, when TARGET is NULL) in one rename. 0, or -1 with a message. */
static int hfpull_replace(const char *path, const char *target,
                          const char *text, char *err, size_t errlen)
{
	char *tmp = hfpull_cat(path, ".parley-tmp", "");
	int rc = -1, fd;

	if (tmp == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	unlink(tmp);
	if (target) {
		rc = symlink(target, tmp);
	} else if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	                      0644)) >= 0) {
		size_t n = strlen(text);

		rc = write(fd, text, n) == (ssize_t)n ? 0 : -1;
		rc |= close(fd);
	}
	if (rc == 0)
		rc = rename(tmp, path);
	if (rc != 0) {
		snprintf(err, errlen, "cannot write %s: %s", path,
		         strerror(errno));
		unlink(tmp);
	}
	free(tmp);
	return rc;
}

int hfpull_link(const char *cache, const struct hfpull_repo *r,
                const struct hfpull_file *f, char **out, char *err,
                size_t errlen)
{
	char *dir = hfpull_repo_dir(cache, "", r->name), *snap, *link, *target;
	size_t depth = 0, n;
	int rc = -1;

	*out = NULL;
	for (const char *p = f->path; *p; p++)
		depth += *p == '/';
	n = 3 * depth + 6 + 6 + 64 + 1;
	target = malloc(n);
	snap = dir ? hfpull_cat(dir, "/snapshots/", r->commit) : NULL;
	link = snap ? hfpull_cat(snap, "/", f->path) : NULL;
	if (link == NULL || target == NULL) {
		snprintf(err, errlen, "out of memory");
		goto done;
	}
	/* from snapshots/COMMIT/DIRS: up DIRS, COMMIT and snapshots */
	target[0] = '\0';
	for (size_t i = 0; i < depth + 2; i++)
		strcat(target, "../");
	strcat(target, "blobs/");
	strcat(target, f->sha256);
	if (hfpull_mkdirs(link, 1, err, errlen) == 0 &&
	    hfpull_replace(link, target, NULL, err, errlen) == 0) {
		*out = link;
		link = NULL;
		rc = 0;
	}
done:
	free(dir);
	free(snap);
	free(link);
	free(target);
	return rc;
}

int hfpull_set_ref(const char *cache, const struct hfpull_repo *r, char *err,
                   size_t errlen)
{
	char *dir = hfpull_repo_dir(cache, "", r->name);
	char *ref = dir ? hfpull_cat(dir, "/refs/main", "") : NULL;
	int rc = -1;

	if (ref == NULL)
		snprintf(err, errlen, "out of memory");
	else if (hfpull_mkdirs(ref, 1, err, errlen) == 0)
		rc = hfpull_replace(ref, NULL, r->commit, err, errlen);
	free(dir);
	free(ref);
	return rc;
}

void hfpull_scrub(const char *token, char *msg, size_t errlen)
{
	secretfile_scrub(msg, errlen, token, "[token]");
}

/*
 * hfpull.h - `parley pull ORG/REPO[:QUANT]`: a GGUF model from the Hugging
 * Face hub into the hub's own cache, where huggingface_hub, llama.cpp and
 * `parley models` (modelstore.h) find it.
 *
 * NOTES ON THE DESIGN
 *
 * 1. The name is ORG/REPO[:QUANT] (an hf.co/ or huggingface.co/ prefix is
 *    dropped). A name without '/' (qwen3:8b) is ollama's: its registry
 *    speaks another protocol, so it is refused with a pointer to ollama.
 * 2. The listing: GET ENDPOINT/api/models/ORG/REPO/revision/main?blobs=true
 *    answers the commit ("sha") and every file ("siblings": rfilename,
 *    size, lfs.sha256). All of it is hostile input: a path must be a
 *    plain relative path, a hash 64 hex digits, a commit 40.
 * 3. The choice: the .gguf files, mmproj files left out unless QUANT names
 *    them, a split model (NAME-00001-of-00003.gguf) one choice with all
 *    its shards; QUANT matches case-insensitively between separators
 *    (- . _ /) of the path; no QUANT: Q4_K_M, or the only model. None or
 *    several: the error lists the choices.
 * 4. A file's life in the cache (models--ORG--REPO/):
 *
 *      (absent) --GET--> blobs/SHA.incomplete --whole, hash right--> blobs/SHA
 *                            |   ^                  (fsync, rename)     |
 *               cut, Ctrl-C: |   | next pull: Range     snapshots/COMMIT/PATH
 *               kept as is   +---+ from its size        -> ../../blobs/SHA
 *                            |
 *                hash wrong: removed (resuming it could never help)
 *
 *    The name blobs/SHA appears only by that rename, and the snapshot link
 *    only after it, so nothing half-written is ever taken for a model.
 *    refs/main gets the commit once every chosen file is in place. While a
 *    file downloads, .locks/models--ORG--REPO/SHA.lock is held (flock, as
 *    huggingface_hub's filelock takes it): two pulls never write one file.
 * 5. The token goes only to the endpoint's own origin (scheme, host,
 *    port): the hub answers a download with a redirect to its CDN, which
 *    gets none (huggingface_hub drops it the same way). It is never
 *    stored, and any message that could hold it (a server's words) is
 *    scrubbed.
 */
#ifndef PARLEY_HFPULL_H
#define PARLEY_HFPULL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HFPULL_ENDPOINT "https://huggingface.co"

/* One file of a repository (an LFS file: the only kind pulled). */
struct hfpull_file {
	char *path;      /* relative path in the repository (owned) */
	char sha256[65]; /* the LFS oid, lowercase hex, or "" (not LFS) */
	uint64_t size;   /* bytes */
};

/* A repository at one commit. */
struct hfpull_repo {
	char *name;            /* "ORG/REPO" (owned) */
	char commit[41];       /* the commit the listing is of, hex */
	struct hfpull_file *v; /* the files (owned) */
	size_t n;
};

/* The files of one model: a single GGUF, or every shard of a split. */
struct hfpull_pick {
	size_t *idx; /* indexes into hfpull_repo.v, shards in order (owned) */
	size_t n;
	char *label; /* its quantization as the file names it (owned) */
};

/* What hfpull_fetch reports while it works. */
struct hfpull_progress {
	const char *path; /* the file in the repository */
	uint64_t size;    /* its bytes */
	uint64_t done;    /* bytes of it on disk */
	uint64_t start;   /* bytes on disk when this transfer began */
	double secs;      /* since this transfer began */
	enum {
		HFPULL_CHECKING, /* hashing the partial file's DONE bytes
		                    before the rest is asked for */
		HFPULL_GETTING,  /* bytes arriving */
		HFPULL_DONE,     /* downloaded and verified */
		HFPULL_HAD       /* already in the cache: nothing fetched */
	} state;
};

/* How to reach the hub. */
struct hfpull_opts {
	const char *endpoint; /* "https://huggingface.co" or HF_ENDPOINT */
	const char *token;    /* or NULL; borrowed, never copied into text */
	const char *cache;    /* the hub cache folder (hfpull_cache_dir) */
	atomic_int *cancel;   /* nonzero stops a transfer; or NULL */
	int timeout_s;        /* connect and silence limit; 0: 60 */
	/* called at least once a second while bytes arrive, and at the end
	   of each file; never from another thread */
	void (*progress)(void *ud, const struct hfpull_progress *p);
	void *ud;
};

struct hfpull; /* a connection to the hub */

/* Split ARG into *REPO ("ORG/REPO") and *QUANT (NULL when none), both
   malloc'd for the caller. -1 with a message: an ollama name, a bad
   name. */
int hfpull_parse_name(const char *arg, char **repo, char **quant, char *err,
                      size_t errlen);

/* The hub's listing (LEN bytes of JSON, note 2) of repository NAME into
   *R (the caller frees it with hfpull_repo_free). 0, or -1 with a
   message. */
int hfpull_parse_listing(const char *json, size_t len, const char *name,
                         struct hfpull_repo *r, char *err, size_t errlen);
void hfpull_repo_free(struct hfpull_repo *r);

/* The model of R that QUANT (or NULL) names, into *P (freed with
   hfpull_pick_free). 0, or -1 with a message that lists the choices. */
int hfpull_choose(const struct hfpull_repo *r, const char *quant,
                  struct hfpull_pick *p, char *err, size_t errlen);
void hfpull_pick_free(struct hfpull_pick *p);

/* The hub cache folder: $HF_HUB_CACHE, else $HF_HOME/hub, else
   ${XDG_CACHE_HOME:-~/.cache}/huggingface/hub. malloc'd, or NULL. */
char *hfpull_cache_dir(void);

/* The token: $HF_TOKEN, else the file $HF_TOKEN_PATH, else $HF_HOME/token
   (default ${XDG_CACHE_HOME:-~/.cache}/huggingface/token) when it exists.
   0 with *TOKEN malloc'd or NULL (none), or -1 with a message (a token
   file that others may read, one that cannot be read). Free it with
   hfpull_token_free, which wipes it. */
int hfpull_token(char **token, char *err, size_t errlen);
void hfpull_token_free(char *token);

/* Whether this build can download (libcurl). */
bool hfpull_available(void);

/* A connection to O->endpoint (checked: http or https; a token over plain
   http only to this machine). 0 with *OUT, or -1 with a message. */
int hfpull_open(const struct hfpull_opts *o, struct hfpull **out, char *err,
                size_t errlen);
void hfpull_close(struct hfpull *h);

/* List repository REPO ("ORG/REPO") at main into *R. 0, 1 (cancelled), or
   -1 with a message (401/403: gated or private; 404: no repository). */
int hfpull_list(struct hfpull *h, const char *repo, struct hfpull_repo *r,
                char *err, size_t errlen);

/* Bring file R->v[I] into the cache (note 4): resumed when a partial
   file exists, verified, linked into the snapshot. 0 with *PATH (the
   snapshot path, malloc'd), 1 when cancelled (the partial file kept), or
   -1 with a message. */
int hfpull_fetch(struct hfpull *h, const struct hfpull_repo *r, size_t i,
                 char **path, char *err, size_t errlen);

/* Write refs/main of R's cache folder: R's commit. 0, or -1. */
int hfpull_set_ref(const char *cache, const struct hfpull_repo *r, char *err,
                   size_t errlen);

#endif /* PARLEY_HFPULL_H */

/*
 * hfpull_int.h - what the cache side of `parley pull` (hfpull_cache.c)
 * gives the network side (hfpull_http.c). Private to the hfpull module.
 */
#ifndef PARLEY_HFPULL_INT_H
#define PARLEY_HFPULL_INT_H

#include "hfpull.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A blob being brought into the cache (hfpull.h, note 4). */
struct hfpull_blob {
	char *dir;     /* CACHE/models--ORG--REPO (owned) */
	char *final;   /* DIR/blobs/SHA (owned) */
	char *part;    /* DIR/blobs/SHA.incomplete (owned) */
	int lock_fd;   /* the held .locks/.../SHA.lock, or -1 */
	int fd;        /* part, open for appending, or -1 */
	uint64_t have; /* bytes in part when opened */
	bool complete; /* final already exists with the right size */
};

/* Open the blob of file F of repository REPO under CACHE: take its lock,
   create the folders, then either find the finished blob (complete) or
   open (creating) its partial file. 0, or -1 with a message. */
int hfpull_blob_open(const char *cache, const char *repo,
                     const struct hfpull_file *f, struct hfpull_blob *b,
                     char *err, size_t errlen);
/* Empty the partial file (the server sent the whole file again, or its
   bytes were wrong). 0, or -1 with a message. */
int hfpull_blob_restart(struct hfpull_blob *b, char *err, size_t errlen);
/* The partial file is whole and verified: flush it and give it the
   blob's name. 0, or -1 with a message. */
int hfpull_blob_commit(struct hfpull_blob *b, char *err, size_t errlen);
/* Remove the partial file (its hash was wrong). */
void hfpull_blob_discard(struct hfpull_blob *b);
/* Close the files and release the lock (any state; twice is fine). */
void hfpull_blob_close(struct hfpull_blob *b);

/* Link snapshots/COMMIT/PATH to the blob of F (relative, as the hub cache
   does). 0 with *OUT the link's path (malloc'd), or -1 with a message. */
int hfpull_link(const char *cache, const struct hfpull_repo *r,
                const struct hfpull_file *f, char **out, char *err,
                size_t errlen);

/* Replace every occurrence of TOKEN in MSG by "[token]" (in place, within
   ERRLEN). */
void hfpull_scrub(const char *token, char *msg, size_t errlen);

#endif /* PARLEY_HFPULL_INT_H */

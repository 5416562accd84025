/*
 * modelstore_int.h - what the files of modelstore.h share: adding an
 * entry (which reads the file's header) and finding the GGUF files under
 * a folder.
 */
#ifndef PARLEY_MODELSTORE_INT_H
#define PARLEY_MODELSTORE_INT_H

#include "modelstore.h"

/* Deepest folder level below a walked root that is looked into. */
#define MODELSTORE_MAX_DEPTH 4

/* A candidate file below a folder (modelstore_files). */
struct modelstore_file {
	char *rel;   /* path below the folder, ".gguf" included (owned) */
	char *path;  /* folder/rel (owned) */
	bool broken; /* a symlink whose target is missing */
};

/*
 * Add the model NAME at PATH (both copied) from source SRC. WHY non-NULL:
 * it cannot be used, for that reason (nothing is read). Else the file is
 * opened (a split model: every shard) and its metadata and the engine's
 * checks fill the entry; a failure becomes its why. QUANT: the
 * quantization its name gives, or NULL (then the file's). EXPECT_SIZE: the
 * bytes the store says the file has, or 0. Returns 0, or -1 when out of
 * memory (message in err).
 */
int modelstore_add(struct modelstore_list *l, enum modelstore_source src,
                   const char *name, const char *path, const char *quant,
                   const char *why, uint64_t expect_size, char *err,
                   size_t errlen);

/*
 * The GGUF files below DIR, at most MODELSTORE_MAX_DEPTH folders down,
 * sorted by rel: names ending in ".gguf", not starting with '.', and of a
 * split model only the first shard. Stores a new array in *OUT (free with
 * modelstore_files_free) and its length in *N; a DIR that cannot be read
 * gives none. Returns 0, or -1 when out of memory.
 */
int modelstore_files(const char *dir, struct modelstore_file **out, size_t *n);
void modelstore_files_free(struct modelstore_file *v, size_t n);

/* REL without ".gguf" and without a split suffix "-00001-of-00003", in a
   new string (caller frees), or NULL. */
char *modelstore_stem(const char *rel);

/* "A/B" in a new string (caller frees), or NULL. */
char *modelstore_join(const char *a, const char *b);

/* $VAR when set to an absolute path, else $HOME/FALLBACK, then /SUB
   (SUB may be NULL); a new string, or NULL without either. */
char *modelstore_env_dir(const char *var, const char *fallback,
                         const char *sub);

/* The hf and lmstudio sources (modelstore_repo.c) and the ollama one
   (modelstore_ollama.c); same contract as modelstore_add. */
int modelstore_repo_scan_hf(struct modelstore_list *l, char *err,
                            size_t errlen);
int modelstore_repo_scan_lmstudio(struct modelstore_list *l, char *err,
                                  size_t errlen);
int modelstore_ollama_scan(struct modelstore_list *l, char *err, size_t errlen);

#endif /* PARLEY_MODELSTORE_INT_H */

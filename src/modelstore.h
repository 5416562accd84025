/*
 * modelstore.h - every GGUF model on this machine that parley can find:
 * its own cache, the Hugging Face hub cache, ollama's store, LM Studio's
 * folder and the directories of the config's models-dir.
 *
 * NOTES ON THE DESIGN
 *
 * Sources, in the order of the list (and of precedence when two sources
 * give one name, modelname.h):
 *   parley    ${XDG_CACHE_HOME:-~/.cache}/parley/models (the folder of
 *             config_default_model), walked; NAME = the path below it
 *             without ".gguf"
 *   dir       each models-dir, walked the same way
 *   hf        $HF_HUB_CACHE, else $HF_HOME/hub, else
 *             ${XDG_CACHE_HOME:-~/.cache}/huggingface/hub:
 *             models--ORG--REPO/snapshots/<refs/main>/, its .gguf files
 *             at any depth (symlinks into ../../blobs); NAME =
 *             ORG/REPO:QUANT (modelstore_repo.c)
 *   ollama    $OLLAMA_MODELS, else ~/.ollama/models:
 *             manifests/HOST/NS/NAME/TAG naming the model layer's blob;
 *             NAME = name:tag, ns/name:tag or host/ns/name:tag
 *             (modelstore_ollama.c)
 *   lmstudio  ~/.lmstudio/models/PUBLISHER/REPO/, its .gguf files, and
 *             the older ~/.cache/lm-studio/models; NAME as for hf
 *
 * Invariants of a list:
 *   1. Each entry is one model: a split model (NAME-00001-of-00003.gguf)
 *      is one entry at its first shard; the other shards are not listed.
 *   2. Only names ending in ".gguf" (or an ollama model layer) are
 *      candidates, so a download in progress (*.incomplete, *.part,
 *      ollama's sha256-X-partial) is never one.
 *   3. A candidate that cannot be used (a broken symlink, a truncated
 *      GGUF, a manifest that is not JSON or names a missing or short
 *      blob, an architecture parley does not run) is listed with ok false
 *      and the reason in why, never dropped silently and never resolved.
 *   4. Reading is metadata only: gguf_open parses the header (the mapping's
 *      tensor pages are not touched) and model_load checks what the engine
 *      would check, so a few hundred files take well under a second.
 * A missing or unreadable store directory is not an error: most machines
 * lack most stores.
 */
#ifndef PARLEY_MODELSTORE_H
#define PARLEY_MODELSTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum modelstore_source {
	MODELSTORE_PARLEY, /* parley's own cache */
	MODELSTORE_DIR,    /* a models-dir of the config */
	MODELSTORE_HF,     /* the Hugging Face hub cache */
	MODELSTORE_OLLAMA, /* ollama's store */
	MODELSTORE_LMSTUDIO
};

struct modelstore_entry {
	char *name; /* what -m accepts (owned) */
	char *path; /* the file to open: a GGUF, or its first shard; for a
	               bad ollama manifest the manifest (owned) */
	enum modelstore_source source;
	char *arch;        /* general.architecture, or NULL (owned) */
	char *quant;       /* "Q4_K_M": the file's general.file_type, else its
	                      most common tensor type, else the name's (owned) */
	uint64_t n_params; /* elements of all tensors; 0 unknown */
	uint64_t size;     /* bytes of all its files; 0 unknown */
	uint64_t n_ctx;    /* ARCH.context_length; 0 unknown */
	uint32_t n_shards; /* files of a split model, else 1; 0 unknown */
	bool opened;       /* the file opened: the metadata above is its */
	bool ok;           /* parley can run it (implies opened) */
	char *why;         /* why not (ok false), else NULL (owned) */
};

struct modelstore_list {
	struct modelstore_entry *v; /* n entries, sorted by source then name */
	size_t n;
	size_t cap;
};

/*
 * Find every model: the sources above, plus DIRS (a colon-separated list
 * of directories, or NULL). Fills *L (which the caller frees with
 * modelstore_free, also on failure). Returns 0, or -1 with a message in
 * err (out of memory only: unreadable stores and bad files become
 * entries or are skipped, see the notes).
 */
int modelstore_scan(const char *dirs, struct modelstore_list *l, char *err,
                    size_t errlen);

/* Free what a list holds and zero it. */
void modelstore_free(struct modelstore_list *l);

/* "parley", "dir", "hf", "ollama" or "lmstudio". */
const char *modelstore_source_name(enum modelstore_source s);

/*
 * The quantization a file name gives (case folded to upper: "Q4_K_M",
 * "IQ4_XS", "F16", "BF16", "MXFP4", "UD-Q4_K_XL"), the last one in NAME
 * that stands between '-', '.', '_' or '/' boundaries, in a new string
 * (caller frees), or NULL.
 */
char *modelstore_quant_in_name(const char *name);

/* A listing's figures as text into OUT (N bytes): a count V as "8.2B",
 * "135M", "12K" (parameters), bytes V as "4.7 GB", "81 MB", "12 KB"; "-"
 * for 0 (not known). One format for `parley models` and the picker. */
void modelstore_fmt_count(char *out, size_t n, uint64_t v);
void modelstore_fmt_bytes(char *out, size_t n, uint64_t v);

#endif /* PARLEY_MODELSTORE_H */

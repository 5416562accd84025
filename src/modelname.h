/*
 * modelname.h - what -m NAME (or the config's model) means: a file, or a
 * model of the list modelstore.h finds.
 *
 * NOTES ON THE DESIGN
 *
 * NAME is tried, in this order:
 *   1. a path: an existing file, or a NAME that starts with '/', "./",
 *      "../" or ends in ".gguf" (then the loader says what is wrong);
 *   2. a listed name, exactly, case folded ("qwen3:8b",
 *      "org/repo:q8_0"); an ollama name also with its registry and
 *      namespace ("registry.ollama.ai/library/qwen3:8b",
 *      "library/qwen3:8b") or without its tag (":latest" then); a
 *      repository without its quantization means ":Q4_K_M" when it has
 *      that one (as llama.cpp's -hf and parley pull read it);
 *      when two sources list the same name the first listed wins;
 *   3. the unique listed name that starts with NAME ("qwen3:8" or
 *      "org/repo" when the repository holds one model).
 * A NAME that matches several models is an error listing them; one that
 * matches none is an error listing the nearest names (the fewest edits,
 * modelname_distance). A match that does not open (a broken symlink, a
 * truncated file, a bad manifest) is an error with the reason modelstore
 * gave: nothing half-written is handed to the loader. One that opens but
 * that parley cannot run is returned: `parley info` still shows it, and
 * the chat's loader refuses it with the same reason the list gives.
 */
#ifndef PARLEY_MODELNAME_H
#define PARLEY_MODELNAME_H

#include <stdbool.h>
#include <stddef.h>

#include "modelstore.h"

/* Most names an error lists. */
#define MODELNAME_SHOWN 5

/* Whether NAME is taken as a path (step 1 above); no list is needed. */
bool modelname_is_path(const char *name);

/*
 * Resolve NAME against L. Returns 0 and stores the index of the entry in
 * *IDX, or -1 with a message naming NAME and the matches (several, or the
 * nearest) or the reason the match cannot run. NAME must not be a path
 * (modelname_is_path).
 */
int modelname_resolve(const char *name, const struct modelstore_list *l,
                      size_t *idx, char *err, size_t errlen);

/* Edit distance (Levenshtein, ASCII case folded) between A and B, capped
   at 255. */
unsigned modelname_distance(const char *a, const char *b);

#endif /* PARLEY_MODELNAME_H */

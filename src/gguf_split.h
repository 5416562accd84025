/*
 * gguf_split.h - a model split over several GGUF files (llama.cpp's
 * gguf-split format), opened as one gguf_file.
 *
 * NOTES ON THE DESIGN
 *
 * Big models (gpt-oss-120b) come as shards PREFIX-00001-of-00003.gguf,
 * PREFIX-00002-of-00003.gguf, ... (numbered from 1, five digits). Every
 * shard is a complete GGUF file with its own tensor infos and data section
 * for the tensors it holds, and the keys
 *     split.no             u16  its position, from 0
 *     split.count          u16  the number of shards
 *     split.tensors.count  i32  the tensors of all shards together
 * The first shard (split.no 0) also holds all the model's metadata; the
 * others hold only the split keys.
 *
 * gguf_split_open() opens every shard and returns one merged gguf_file:
 * its metadata is the first shard's, its tensor table the shards' tables
 * one after the other (gguf_tensor.shard says whose), each tensor's data
 * pointing into its shard's mapping. model.c and both engines see one
 * file and need nothing else. A file without split.count (or with 1) is
 * returned as gguf_open() returns it.
 *
 * Invariants of a merged file, each checked with the file and key named:
 *   1. Every shard PREFIX-i-of-N exists and parses (gguf.h's invariants).
 *   2. Each shard's split.count is N and its split.no is its position.
 *   3. No tensor name appears in two shards.
 *   4. The shards hold exactly split.tensors.count tensors (the first
 *      shard's; a shard that carries the key must agree).
 * A merged file owns its shards (f->shards); its kv table and tensor names
 * are the shards' and live as long as they do; gguf_close() frees it all.
 */
#ifndef PARLEY_GGUF_SPLIT_H
#define PARLEY_GGUF_SPLIT_H

#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

#define GGUF_SPLIT_MAX 65535 /* split.count is a u16 */

/*
 * Open the model at PATH: a single GGUF file, or any shard of a split
 * model (then every shard, merged as above; the merged file's path is the
 * first shard's). Returns a gguf_file the caller frees with gguf_close(),
 * or NULL with a message naming the file and key at fault in err.
 */
struct gguf_file *gguf_split_open(const char *path, char *err, size_t errlen);

/*
 * Merge the N shards SHARDS[0..N) (shard i at index i, N >= 2) into one
 * file. Takes ownership of the shards and of the malloc'ed array SHARDS
 * in every case: on failure they are closed and freed, NULL is returned
 * and err says which invariant failed.
 */
struct gguf_file *gguf_split_merge(struct gguf_file **shards, uint32_t n,
                                   char *err, size_t errlen);

/*
 * Parse a shard's file name: PATH ends in "-NNNNN-of-MMMMM.gguf" (five
 * digits each, 1 <= NNNNN <= MMMMM). Stores the length of the prefix
 * before it, NNNNN - 1 (split.no) and MMMMM. Returns 0, or -1 when the
 * name has another form.
 */
int gguf_split_parse_name(const char *path, size_t *prefix_len, uint32_t *no,
                          uint32_t *count);

/* The path of shard NO (0-based) of COUNT whose prefix is the first
 * PREFIX_LEN bytes of PREFIX, in a new string (caller frees), or NULL. */
char *gguf_split_path(const char *prefix, size_t prefix_len, uint32_t no,
                      uint32_t count);

/* The file holding tensor T of F: F itself, or its shard. */
const struct gguf_file *gguf_split_file_of(const struct gguf_file *f,
                                           const struct gguf_tensor *t);

#endif /* PARLEY_GGUF_SPLIT_H */

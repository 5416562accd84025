/*
 * gguf_write.h - write GGUF v3 files: metadata of every type, tensors,
 * alignment. Used by the random-weight model maker (ui/cmd_mkmodel.c) and by
 * tests that need files of a given shape.
 *
 * NOTES ON THE DESIGN
 *
 * A writer collects metadata (serialized at once into a growing buffer, in
 * call order) and tensor descriptions, then gguf_writer_write() writes the
 * file in one pass: header, key/values, tensor infos, padding to the
 * alignment, tensor data (each tensor padded to the alignment). Tensor data
 * is either a caller buffer (borrowed until the write) or produced row by
 * row by a callback at write time, so a multi-gigabyte model never has to
 * be held in memory. Rows of a callback tensor may be produced by several
 * threads (gguf_writer_set_threads), a chunk of rows at a time, each
 * thread a contiguous share of the chunk; the chunk is written in row
 * order, so the file does not depend on the number of threads.
 *
 * Errors are sticky: a setter that fails (duplicate key, out of memory,
 * bad shape) records the first message and returns -1; later calls do
 * nothing and gguf_writer_write() reports the recorded message.
 *
 * The file follows the GGUF specification as gguf_open() reads it:
 * little-endian, strings as u64 length + bytes, general.alignment (u32)
 * honoured when set (default 32).
 */
#ifndef PARLEY_GGUF_WRITE_H
#define PARLEY_GGUF_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

struct gguf_writer;

/*
 * Produce row ROW (0-based; a row is ne[0] elements) of a tensor into BUF
 * of ROW_BYTES bytes. Return 0, or -1 to abort the write. With more than
 * one thread (gguf_writer_set_threads) it is called concurrently for
 * different rows, so it must depend on nothing but CTX (read only) and
 * ROW.
 */
typedef int (*gguf_writer_fill_fn)(void *ctx, uint64_t row, void *buf,
                                   size_t row_bytes);

/* A new empty writer (free with gguf_writer_free), or NULL if out of memory. */
struct gguf_writer *gguf_writer_new(void);

/* Free the writer (not the borrowed tensor buffers). NULL allowed. */
void gguf_writer_free(struct gguf_writer *w);

/* Scalar metadata. KEY is copied. Return 0 or -1 (sticky error). */
int gguf_writer_set_u32(struct gguf_writer *w, const char *key, uint32_t v);
int gguf_writer_set_i32(struct gguf_writer *w, const char *key, int32_t v);
int gguf_writer_set_u64(struct gguf_writer *w, const char *key, uint64_t v);
int gguf_writer_set_f32(struct gguf_writer *w, const char *key, float v);
int gguf_writer_set_bool(struct gguf_writer *w, const char *key, bool v);
int gguf_writer_set_str(struct gguf_writer *w, const char *key, const char *v);

/* An array of N fixed-size elements of type ELEM at DATA (copied). */
int gguf_writer_set_arr(struct gguf_writer *w, const char *key,
                        enum gguf_type elem, const void *data, uint64_t n);

/* An array of N strings (copied). */
int gguf_writer_set_arr_str(struct gguf_writer *w, const char *key,
                            const struct gguf_str *strs, uint64_t n);

/* Copy a key/value read by gguf.h (any type, nested arrays included). */
int gguf_writer_copy_kv(struct gguf_writer *w, const struct gguf_kv *kv);

/*
 * Add a tensor NAME (copied) of ggml type TYPE with N_DIMS (1..4)
 * dimensions NE (ne[0] contiguous, a multiple of the type's block size).
 * Exactly one of DATA (borrowed: must stay valid until the write; nbytes =
 * rows * row size) and FILL (called at write time with CTX) is non-NULL.
 */
int gguf_writer_add_tensor(struct gguf_writer *w, const char *name,
                           uint32_t type, uint32_t n_dims, const uint64_t *ne,
                           const void *data, gguf_writer_fill_fn fill,
                           void *ctx);

/* Produce the rows of FILL tensors with N threads (N <= 0: one per online
 * CPU; the default is 1). The file is the same for every N; if the threads
 * cannot be started the write uses one. Returns 0 or -1 (sticky error). */
int gguf_writer_set_threads(struct gguf_writer *w, int n);

/* Bytes of one row (ne[0] elements) of TYPE, or 0 if not a whole block. */
size_t gguf_writer_row_size(uint32_t type, uint64_t ne0);

/*
 * Write the file to PATH (created or truncated). Returns 0, or -1 with a
 * message naming the file (or the recorded sticky error). The partial file
 * is removed on failure.
 */
int gguf_writer_write(struct gguf_writer *w, const char *path, char *err,
                      size_t errlen);

#endif /* PARLEY_GGUF_WRITE_H */

/*
 * gguf_bytes.h - build GGUF files byte by byte, for tests and fuzz seeds.
 *
 * Deliberately low level: each call appends exactly the bytes named, so a
 * test can write any malformed file it wants (a wrong count, a string that
 * runs past the end). gb_valid() builds a small well-formed file with a few
 * keys of every type and two tensors, the baseline the malformed cases vary.
 */
#ifndef PARLEY_GGUF_BYTES_H
#define PARLEY_GGUF_BYTES_H

#include "sbuf.h"

#include <stdint.h>

void gb_u8(struct sbuf *sb, uint8_t v);
void gb_u32(struct sbuf *sb, uint32_t v);
void gb_u64(struct sbuf *sb, uint64_t v);
void gb_f32(struct sbuf *sb, float v);
/* A GGUF string: u64 length then the bytes of Z. */
void gb_str(struct sbuf *sb, const char *z);
/* Header: magic, version, tensor count, kv count. */
void gb_header(struct sbuf *sb, uint32_t version, uint64_t n_tensors,
               uint64_t n_kv);
/* A key with a u32 value. */
void gb_kv_u32(struct sbuf *sb, const char *key, uint32_t v);
/* A key with a string value. */
void gb_kv_str(struct sbuf *sb, const char *key, const char *v);
/* A tensor descriptor with N_DIMS dims from NE. */
void gb_tensor(struct sbuf *sb, const char *name, uint32_t n_dims,
               const uint64_t *ne, uint32_t type, uint64_t offset);
/* Zero bytes up to the next multiple of ALIGN. */
void gb_pad(struct sbuf *sb, uint32_t align);

/* The baseline valid file (version 3): keys of every type, two F32
 * tensors "a" [4, 2] and "b" [8]. */
void gb_valid(struct sbuf *sb);

#endif /* PARLEY_GGUF_BYTES_H */

/*
 * gguf_bytes.c - GGUF byte builders for tests.
 */
#include "gguf_bytes.h"

#include <string.h>

void gb_u8(struct sbuf *sb, uint8_t v)
{
	sbuf_add(sb, &v, 1);
}

void gb_u32(struct sbuf *sb, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		gb_u8(sb, (uint8_t)(v >> (8 * i)));
}

void gb_u64(struct sbuf *sb, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		gb_u8(sb, (uint8_t)(v >> (8 * i)));
}

void gb_f32(struct sbuf *sb, float v)
{
	uint32_t u;

	memcpy(&u, &v, 4);
	gb_u32(sb, u);
}

void gb_str(struct sbuf *sb, const char *z)
{
	gb_u64(sb, strlen(z));
	sbuf_adds(sb, z);
}

void gb_header(struct sbuf *sb, uint32_t version, uint64_t n_tensors,
               uint64_t n_kv)
{
	sbuf_add(sb, "GGUF", 4);
	gb_u32(sb, version);
	gb_u64(sb, n_tensors);
	gb_u64(sb, n_kv);
}

void gb_kv_u32(struct sbuf *sb, const char *key, uint32_t v)
{
	gb_str(sb, key);
	gb_u32(sb, 4);
	gb_u32(sb, v);
}

void gb_kv_str(struct sbuf *sb, const char *key, const char *v)
{
	gb_str(sb, key);
	gb_u32(sb, 8);
	gb_str(sb, v);
}

void gb_tensor(struct sbuf *sb, const char *name, uint32_t n_dims,
               const uint64_t *ne, uint32_t type, uint64_t offset)
{
	gb_str(sb, name);
	gb_u32(sb, n_dims);
	for (uint32_t i = 0; i < n_dims; i++)
		gb_u64(sb, ne[i]);
	gb_u32(sb, type);
	gb_u64(sb, offset);
}

void gb_pad(struct sbuf *sb, uint32_t align)
{
	while (sb->len % align != 0)
		gb_u8(sb, 0);
}

void gb_valid(struct sbuf *sb)
{
	static const uint64_t ne_a[2] = {4, 2}, ne_b[1] = {8};

	gb_header(sb, 3, 2, 9);
	gb_kv_str(sb, "general.architecture", "llama");
	gb_kv_u32(sb, "llama.block_count", 2);
	gb_str(sb, "test.i8");
	gb_u32(sb, 1);
	gb_u8(sb, 0xfe); /* -2 */
	gb_str(sb, "test.f32");
	gb_u32(sb, 6);
	gb_f32(sb, 0.5f);
	gb_str(sb, "test.bool");
	gb_u32(sb, 7);
	gb_u8(sb, 1);
	gb_str(sb, "test.i64");
	gb_u32(sb, 11);
	gb_u64(sb, (uint64_t)-5);
	/* array of 3 strings */
	gb_str(sb, "test.strs");
	gb_u32(sb, 9);
	gb_u32(sb, 8);
	gb_u64(sb, 3);
	gb_str(sb, "one");
	gb_str(sb, "");
	gb_str(sb, "three");
	/* array of 2 arrays of int32 */
	gb_str(sb, "test.nested");
	gb_u32(sb, 9);
	gb_u32(sb, 9);
	gb_u64(sb, 2);
	gb_u32(sb, 5);
	gb_u64(sb, 2);
	gb_u32(sb, 1);
	gb_u32(sb, (uint32_t)-7);
	gb_u32(sb, 5);
	gb_u64(sb, 0);
	/* array of float32 */
	gb_str(sb, "test.floats");
	gb_u32(sb, 9);
	gb_u32(sb, 6);
	gb_u64(sb, 2);
	gb_f32(sb, 1.5f);
	gb_f32(sb, -2.0f);
	gb_tensor(sb, "a", 2, ne_a, 0, 0);
	gb_tensor(sb, "b", 1, ne_b, 0, 32);
	gb_pad(sb, 32);
	for (int i = 0; i < 16; i++)
		gb_f32(sb, (float)i);
}

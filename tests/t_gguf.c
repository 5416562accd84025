/*
 * t_gguf.c - the GGUF reader: a built valid file, malformed files (each with
 * its specific error), the shared vocab GGUFs and the real SmolLM2 file.
 */
#include "testenv.h"
#include "gguf.h"
#include "gguf_bytes.h"
#include "qtype.h"
#include "tap.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define BIG ((uint64_t)1 << 60)

/* Open the bytes of SB; expect failure with NEEDLE in the message. */
static void expect_fail(struct sbuf *sb, const char *what, const char *needle)
{
	char err[1024] = "";
	struct gguf_file *f =
	    gguf_open_memory(sb->buf, sb->len, "bad.gguf", err, sizeof(err));

	if (!tap_ok(f == NULL && strstr(err, needle) != NULL &&
	                strncmp(err, "bad.gguf: ", 10) == 0,
	            "malformed: %s", what))
		tap_diag("expected '%s', got %s '%s'", needle,
		         f ? "success" : "error", err);
	gguf_close(f);
	sbuf_free(sb);
}

/* Header + one u32 key, then tensor descriptors follow. */
static void tensor_file(struct sbuf *sb, uint64_t n_tensors)
{
	gb_header(sb, 3, n_tensors, 1);
	gb_kv_u32(sb, "k", 1);
}

static void test_malformed(void)
{
	struct sbuf sb = SBUF_INIT;
	uint64_t ne[5] = {4, 2, 1, 1, 1};

	sbuf_add(&sb, "GGU", 3);
	expect_fail(&sb, "3 bytes", "not a GGUF file");

	sbuf_add(&sb, "GGML\3\0\0\0", 8);
	expect_fail(&sb, "wrong magic", "not a GGUF file");

	gb_header(&sb, 1, 0, 0);
	expect_fail(&sb, "version 1", "GGUF version 1 is not supported");

	gb_header(&sb, 4, 0, 0);
	expect_fail(&sb, "version 4", "GGUF version 4 is not supported");

	sbuf_add(&sb, "GGUF\3\0\0\0\0\0", 10);
	expect_fail(&sb, "truncated header", "file ends inside the header");

	gb_header(&sb, 3, 0, BIG);
	expect_fail(&sb, "2^60 keys", "claims 1152921504606846976 metadata");

	gb_header(&sb, 3, BIG, 0);
	expect_fail(&sb, "2^60 tensors", "claims 1152921504606846976 tensors");

	gb_header(&sb, 3, 0, 1);
	gb_u64(&sb, 1000);
	sbuf_adds(&sb, "abcdefghijklmnopqrstuvwxyz");
	expect_fail(&sb, "key runs past the end", "claims 1000 bytes");

	gb_header(&sb, 3, 0, 1);
	gb_str(&sb, "k");
	gb_u32(&sb, 99);
	gb_u32(&sb, 0);
	expect_fail(&sb, "value type 99", "key 'k': value type 99 is not");

	gb_header(&sb, 3, 0, 1);
	gb_str(&sb, "k");
	gb_u32(&sb, 9);
	gb_u32(&sb, 4);
	gb_u64(&sb, BIG);
	expect_fail(&sb, "array length 2^60",
	            "key 'k': array of 1152921504606846976 uint32");

	gb_header(&sb, 3, 0, 1);
	gb_str(&sb, "k");
	gb_u32(&sb, 9);
	gb_u32(&sb, 8);
	gb_u64(&sb, BIG);
	expect_fail(&sb, "string array length 2^60",
	            "array of 1152921504606846976 string");

	gb_header(&sb, 3, 0, 1);
	gb_str(&sb, "k");
	gb_u32(&sb, 8);
	gb_u64(&sb, 100);
	sbuf_adds(&sb, "short");
	expect_fail(&sb, "string value past the end",
	            "claims 100 bytes but only 5 are left");

	gb_header(&sb, 3, 0, 1);
	gb_str(&sb, "k");
	gb_u32(&sb, 9);
	gb_u32(&sb, 13);
	gb_u64(&sb, 0);
	expect_fail(&sb, "array element type 13",
	            "key 'k': array element type 13");

	gb_header(&sb, 3, 0, 1);
	gb_str(&sb, "k");
	gb_u32(&sb, 9);
	for (int i = 0; i < 20; i++) {
		gb_u32(&sb, 9);
		gb_u64(&sb, 1);
	}
	gb_u32(&sb, 4);
	gb_u64(&sb, 0);
	expect_fail(&sb, "arrays nested 20 deep", "nested deeper than 8");

	gb_header(&sb, 3, 0, 1);
	gb_str(&sb, "k");
	gb_u32(&sb, 7);
	gb_u8(&sb, 2);
	expect_fail(&sb, "bool 2", "bool value 2 is neither 0 nor 1");

	gb_header(&sb, 3, 0, 2);
	gb_kv_u32(&sb, "dup", 1);
	gb_kv_u32(&sb, "dup", 2);
	expect_fail(&sb, "duplicate key", "key 'dup' appears more than once");

	gb_header(&sb, 3, 0, 1);
	gb_str(&sb, "k");
	gb_u32(&sb, 4);
	gb_u8(&sb, 1);
	expect_fail(&sb, "u32 value past the end",
	            "key 'k': uint32 value runs past");

	gb_header(&sb, 3, 0, 1);
	gb_kv_u32(&sb, "general.alignment", 24);
	expect_fail(
	    &sb, "alignment 24",
	    "'general.alignment' is 24, not a power of two of at least 8");

	gb_header(&sb, 3, 0, 1);
	gb_kv_u32(&sb, "general.alignment", 4);
	expect_fail(
	    &sb, "alignment 4 (a power of two, below the spec's 8)",
	    "'general.alignment' is 4, not a power of two of at least 8");

	gb_header(&sb, 3, 0, 1);
	gb_kv_str(&sb, "general.alignment", "32");
	expect_fail(&sb, "alignment as a string",
	            "'general.alignment' has type string, expected uint32");

	gb_header(&sb, 3, 0, 1);
	gb_u64(&sb, 3);
	sbuf_add(&sb, "a\0b", 3);
	gb_u32(&sb, 4);
	gb_u32(&sb, 0);
	expect_fail(&sb, "NUL in a key", "contains a NUL byte");

	tensor_file(&sb, 2);
	gb_tensor(&sb, "t", 2, ne, 0, 0);
	gb_tensor(&sb, "t", 2, ne, 0, 32);
	gb_pad(&sb, 32);
	for (int i = 0; i < 16; i++)
		gb_u32(&sb, 0);
	expect_fail(&sb, "duplicate tensor name",
	            "tensor 't' appears more than once");

	tensor_file(&sb, 1);
	gb_tensor(&sb, "t", 5, ne, 0, 0);
	expect_fail(&sb, "5 dims", "tensor 't': 5 dimensions (1..4");

	tensor_file(&sb, 1);
	gb_tensor(&sb, "t", 0, ne, 0, 0);
	gb_pad(&sb, 64);
	expect_fail(&sb, "0 dims", "tensor 't': 0 dimensions");

	{
		uint64_t z[2] = {4, 0};

		tensor_file(&sb, 1);
		gb_tensor(&sb, "t", 2, z, 0, 0);
		gb_pad(&sb, 32);
		expect_fail(&sb, "a zero dimension",
		            "tensor 't': dimension 1 is 0");
	}

	tensor_file(&sb, 1);
	gb_tensor(&sb, "t", 2, ne, 200, 0);
	gb_pad(&sb, 32);
	expect_fail(&sb, "type id 200", "tensor 't': unknown ggml type id 200");

	tensor_file(&sb, 1);
	gb_tensor(&sb, "t", 2, ne, 4, 0);
	gb_pad(&sb, 32);
	expect_fail(&sb, "removed type Q4_2",
	            "type Q4_2 (id 4) was removed from ggml");

	{
		uint64_t odd[1] = {33};

		tensor_file(&sb, 1);
		gb_tensor(&sb, "t", 1, odd, QTYPE_Q4_0, 0);
		gb_pad(&sb, 32);
		for (int i = 0; i < 32; i++)
			gb_u32(&sb, 0);
		expect_fail(&sb, "row not a multiple of the block",
		            "row length 33 is not a multiple of the Q4_0 "
		            "block size 32");
	}

	tensor_file(&sb, 1);
	gb_tensor(&sb, "t", 2, ne, 0, 8);
	gb_pad(&sb, 32);
	for (int i = 0; i < 16; i++)
		gb_u32(&sb, 0);
	expect_fail(&sb, "misaligned data",
	            "tensor 't': data offset 8 is not a multiple of the "
	            "alignment 32");

	tensor_file(&sb, 1);
	gb_tensor(&sb, "blk.3.attn_q.weight", 2, ne, 0, 0);
	gb_pad(&sb, 32);
	for (int i = 0; i < 4; i++)
		gb_u32(&sb, 0);
	expect_fail(&sb, "data past the end",
	            "tensor 'blk.3.attn_q.weight': data [offset 128, 32 bytes] "
	            "ends past the end of the file (144 bytes)");

	tensor_file(&sb, 2);
	gb_tensor(&sb, "x", 2, ne, 0, 0);
	gb_tensor(&sb, "y", 2, ne, 0, 0);
	gb_pad(&sb, 32);
	for (int i = 0; i < 8; i++)
		gb_u32(&sb, 0);
	expect_fail(&sb, "overlapping data", "overlap");

	{
		uint64_t huge[4] = {1u << 30, 1u << 30, 1u << 30, 1u << 30};

		tensor_file(&sb, 1);
		gb_tensor(&sb, "t", 4, huge, 0, 0);
		gb_pad(&sb, 32);
		expect_fail(&sb, "shape overflow",
		            "overflows a 64-bit byte size");
	}

	tensor_file(&sb, 1);
	gb_str(&sb, "a_tensor_name_long_enough_to_pass_the_count_check");
	gb_u32(&sb, 2);
	gb_u64(&sb, 4);
	expect_fail(
	    &sb, "truncated tensor header",
	    "tensor 'a_tensor_name_long_enough_to_pass_the_count_check': "
	    "header runs past the end");
}

static void test_valid(void)
{
	struct sbuf sb = SBUF_INIT;
	struct gguf_file *f;
	const struct gguf_array *arr;
	const struct gguf_tensor *t;
	struct gguf_str s;
	char err[1024];
	uint32_t u32;
	uint64_t u64;
	int64_t i64;
	float fl;
	bool b;

	gb_valid(&sb);
	f = gguf_open_memory(sb.buf, sb.len, "ok.gguf", err, sizeof(err));
	if (!tap_ok(f != NULL, "valid built file opens")) {
		tap_diag("%s", err);
		sbuf_free(&sb);
		return;
	}
	tap_ok(f->version == 3 && f->n_kv == 9 && f->n_tensors == 2,
	       "version 3, 9 keys, 2 tensors");
	tap_ok(gguf_get_str(f, "general.architecture", &s, err, sizeof(err)) ==
	               GGUF_OK &&
	           gguf_str_eq(s, "llama"),
	       "string getter");
	tap_ok(gguf_get_u32(f, "llama.block_count", &u32, err, sizeof(err)) ==
	               GGUF_OK &&
	           u32 == 2,
	       "u32 getter");
	tap_ok(gguf_get_i64(f, "test.i8", &i64, NULL, 0) == GGUF_OK &&
	           i64 == -2,
	       "int8 read sign-extended");
	tap_ok(
	    gguf_get_u64(f, "test.i8", &u64, err, sizeof(err)) == GGUF_ETYPE &&
	        strstr(err, "'test.i8' is -2, expected a non-negative") != NULL,
	    "negative int refused as unsigned: %s", err);
	tap_ok(gguf_get_i64(f, "test.i64", &i64, NULL, 0) == GGUF_OK &&
	           i64 == -5,
	       "int64 getter");
	tap_ok(gguf_get_f32(f, "test.f32", &fl, NULL, 0) == GGUF_OK &&
	           fl == 0.5f,
	       "float getter");
	tap_ok(gguf_get_bool(f, "test.bool", &b, NULL, 0) == GGUF_OK && b,
	       "bool getter");
	tap_ok(gguf_get_u32(f, "general.architecture", &u32, err,
	                    sizeof(err)) == GGUF_ETYPE &&
	           strstr(err, "ok.gguf: key 'general.architecture' has type "
	                       "string, expected an unsigned integer") != NULL,
	       "wrong type: %s", err);
	tap_ok(gguf_get_bool(f, "nope", &b, err, sizeof(err)) == GGUF_ENOKEY &&
	           strstr(err, "key 'nope' is missing") != NULL,
	       "missing key: %s", err);
	tap_ok(gguf_get_arr(f, "test.strs", GGUF_TYPE_STRING, &arr, NULL, 0) ==
	               GGUF_OK &&
	           arr->n == 3 && gguf_str_eq(arr->strs[0], "one") &&
	           gguf_str_eq(arr->strs[1], "") &&
	           gguf_str_eq(arr->strs[2], "three"),
	       "array of strings");
	tap_ok(gguf_get_arr(f, "test.strs", GGUF_TYPE_INT32, &arr, err,
	                    sizeof(err)) == GGUF_ETYPE &&
	           strstr(err, "array of string, expected an array of int32"),
	       "array element type checked: %s", err);
	tap_ok(gguf_get_arr(f, "test.nested", GGUF_TYPE_ARRAY, &arr, NULL, 0) ==
	               GGUF_OK &&
	           arr->n == 2 && arr->elems[0].v.arr.n == 2 &&
	           gguf_arr_i64(&arr->elems[0].v.arr, 1) == -7 &&
	           arr->elems[1].v.arr.n == 0,
	       "nested arrays");
	tap_ok(gguf_get_arr(f, "test.floats", GGUF_TYPE_FLOAT32, &arr, NULL,
	                    0) == GGUF_OK &&
	           gguf_arr_f64(arr, 0) == 1.5 && gguf_arr_f64(arr, 1) == -2.0,
	       "array of float32");
	t = gguf_find_tensor(f, "b");
	tap_ok(t != NULL && t->n_dims == 1 && t->ne[0] == 8 && t->ne[1] == 1 &&
	           t->nbytes == 32 && t->offset == 32,
	       "tensor table entry");
	tap_ok(t != NULL && ((const float *)t->data)[0] == 8.0f,
	       "tensor data pointer");
	tap_ok(gguf_find_tensor(f, "c") == NULL, "absent tensor");
	gguf_close(f);

	/* Every truncation of a valid file fails cleanly (and never reads
	 * outside the buffer: run under ASan in CI). */
	{
		int all = 1;

		for (size_t n = 0; n + 1 < sb.len; n++) {
			char *copy = malloc(n ? n : 1);

			memcpy(copy, sb.buf, n);
			f = gguf_open_memory(copy, n, "cut.gguf", err,
			                     sizeof(err));
			if (f != NULL || strncmp(err, "cut.gguf: ", 10) != 0)
				all = 0;
			gguf_close(f);
			free(copy);
		}
		tap_ok(all, "every truncation of the valid file is refused");
	}

	/* Version 2 has the same layout. */
	sb.buf[4] = 2;
	f = gguf_open_memory(sb.buf, sb.len, "v2.gguf", err, sizeof(err));
	tap_ok(f != NULL && f->version == 2, "version 2 accepted");
	gguf_close(f);
	sbuf_free(&sb);
}

static void test_alignment(void)
{
	struct sbuf sb = SBUF_INIT;
	uint64_t ne[1] = {4};
	struct gguf_file *f;
	char err[1024];

	gb_header(&sb, 3, 1, 1);
	gb_kv_u32(&sb, "general.alignment", 64);
	gb_tensor(&sb, "t", 1, ne, 0, 0);
	gb_pad(&sb, 64);
	gb_f32(&sb, 42.0f);
	for (int i = 0; i < 3; i++)
		gb_f32(&sb, 0);
	f = gguf_open_memory(sb.buf, sb.len, "a.gguf", err, sizeof(err));
	tap_ok(f != NULL && f->alignment == 64 && f->data_offset % 64 == 0 &&
	           ((const float *)f->tensors[0].data)[0] == 42.0f,
	       "general.alignment 64 honoured");
	gguf_close(f);
	sbuf_free(&sb);
}

/* Byte sequences that are not UTF-8, each named for the messages. */
static const struct {
	const char *bytes; /* no NUL: gb_str measures with strlen */
	const char *what;
	unsigned char first; /* the byte the error names */
} bad_utf8[] = {
    {"\xc0\xaf", "overlong '/' (C0 AF)", 0xc0},
    {"\xe0\x80\xaf", "overlong 3-byte '/'", 0xe0},
    {"\x80", "lone continuation byte", 0x80},
    {"\xed\xa0\x80", "surrogate U+D800", 0xed},
    {"\xed\xbf\xbf", "surrogate U+DFFF", 0xed},
    {"\xe2\x82", "truncated 3-byte sequence", 0xe2},
    {"\xf4\x90\x80\x80", "past U+10FFFF", 0xf4},
    {"\xff", "byte FF", 0xff},
};

#define N_BAD_UTF8 (sizeof(bad_utf8) / sizeof(bad_utf8[0]))

/* B with every byte written as \xNN, as the reader shows broken names. */
static const char *hex_escape(char *buf, size_t len, const char *b)
{
	size_t o = 0;

	for (; *b && o + 5 <= len; b++)
		o += (size_t)snprintf(buf + o, len - o, "\\x%02x",
		                      (unsigned char)*b);
	return buf;
}

/* "... is not valid UTF-8 (byte 0xNN at offset OFF" for the checks. */
static const char *utf8_needle(char *buf, size_t len, const char *what,
                               unsigned char b, size_t off)
{
	snprintf(buf, len, "%s is not valid UTF-8 (byte 0x%02x at offset %zu",
	         what, b, off);
	return buf;
}

/* Keys, string values, string array elements and tensor names must be
   UTF-8: each kind of bad sequence in each place is refused at open, the
   error naming the key (or the element, or the index of the key or
   tensor), the byte and its offset in the file. */
static void test_utf8(void)
{
	static const uint64_t ne[1] = {8};
	struct sbuf sb = SBUF_INIT;
	char needle[512], name[64], what[160], esc[64], shown[128];

	for (size_t i = 0; i < N_BAD_UTF8; i++) {
		const char *b = bad_utf8[i].bytes;
		unsigned char c = bad_utf8[i].first;

		/* a key: header 24 bytes, its length 8, then "bad" */
		snprintf(name, sizeof(name), "bad%skey", b);
		gb_header(&sb, 3, 0, 1);
		gb_kv_u32(&sb, name, 1);
		snprintf(what, sizeof(what), "key %s", bad_utf8[i].what);
		snprintf(shown, sizeof(shown),
		         "metadata key 0: name 'bad%skey'",
		         hex_escape(esc, sizeof(esc), b));
		expect_fail(&sb, what,
		            utf8_needle(needle, sizeof(needle), shown, c, 35));

		/* a string value, after a good key; value text at 24 +
		   (8 + 2 + 4 + 4) + (8 + 12 + 4) + 8 = 74, bad at 75 */
		snprintf(name, sizeof(name), "x%s", b);
		gb_header(&sb, 3, 0, 2);
		gb_kv_u32(&sb, "ok", 7);
		gb_kv_str(&sb, "general.name", name);
		snprintf(what, sizeof(what), "string value %s",
		         bad_utf8[i].what);
		expect_fail(&sb, what,
		            utf8_needle(needle, sizeof(needle),
		                        "key 'general.name': string value", c,
		                        75));

		/* element 2 of a string array: 24 + (8 + 9) + 4 + 4 + 8 +
		   (8 + 3) + (8 + 0) + 8 = 84 */
		gb_header(&sb, 3, 0, 1);
		gb_str(&sb, "test.strs");
		gb_u32(&sb, 9);
		gb_u32(&sb, 8);
		gb_u64(&sb, 3);
		gb_str(&sb, "one");
		gb_str(&sb, "");
		gb_str(&sb, b);
		snprintf(what, sizeof(what), "array element %s",
		         bad_utf8[i].what);
		expect_fail(&sb, what,
		            utf8_needle(needle, sizeof(needle),
		                        "key 'test.strs': string array "
		                        "element 2",
		                        c, 84));

		/* tensor 1's name: after "k"=1 (24 + 8 + 1 + 4 + 4 = 41) and
		   tensor 0 "a" (8 + 1 + 4 + 8 + 4 + 8 = 33): 74 + 8 + 1 */
		snprintf(name, sizeof(name), "w%s", b);
		tensor_file(&sb, 2);
		gb_tensor(&sb, "a", 1, ne, 0, 0);
		gb_tensor(&sb, name, 1, ne, 0, 32);
		snprintf(what, sizeof(what), "tensor name %s",
		         bad_utf8[i].what);
		snprintf(shown, sizeof(shown), "tensor 1: name 'w%s'",
		         hex_escape(esc, sizeof(esc), b));
		expect_fail(&sb, what,
		            utf8_needle(needle, sizeof(needle), shown, c, 83));
	}

	/* the name is shown escaped */
	gb_header(&sb, 3, 0, 1);
	gb_kv_u32(&sb, "gen\xc0\xafral", 1);
	expect_fail(&sb, "a broken key is shown with \\x escapes",
	            "metadata key 0: name 'gen\\xc0\\xafral' is not valid");

	/* valid multi-byte text everywhere opens and reads back */
	{
		static const char key[] = "test.caf\xc3\xa9",
		                  val[] = "\xe2\x82\xac 5 \xf0\x9f\x98\x80",
		                  tname[] = "w\xc3\xa9ight";
		struct gguf_file *f;
		struct gguf_str v;
		const struct gguf_array *a;
		char err[1024] = "";

		gb_header(&sb, 3, 1, 2);
		gb_kv_str(&sb, key, val);
		gb_str(&sb, "test.strs");
		gb_u32(&sb, 9);
		gb_u32(&sb, 8);
		gb_u64(&sb, 2);
		gb_str(&sb, "\xed\x9f\xbf"); /* U+D7FF, below the surrogates */
		gb_str(&sb, "\xf4\x8f\xbf\xbf"); /* U+10FFFF */
		gb_tensor(&sb, tname, 1, ne, 0, 0);
		gb_pad(&sb, 32);
		for (int i = 0; i < 8; i++)
			gb_f32(&sb, (float)i);
		f = gguf_open_memory(sb.buf, sb.len, "good.gguf", err,
		                     sizeof(err));
		tap_ok(
		    f != NULL && gguf_get_str(f, key, &v, NULL, 0) == 0 &&
		        gguf_str_eq(v, val) &&
		        gguf_get_arr(f, "test.strs", GGUF_TYPE_STRING, &a, NULL,
		                     0) == 0 &&
		        a->n == 2 &&
		        gguf_str_eq(a->strs[1], "\xf4\x8f\xbf\xbf") &&
		        gguf_find_tensor(f, tname) != NULL,
		    "valid UTF-8 (2-, 3-, 4-byte, U+D7FF, U+10FFFF) in a key, "
		    "a value, array elements and a tensor name opens: %s",
		    err);
		gguf_close(f);
		sbuf_free(&sb);
	}
}

/* The regression file tests/data/gguf/invalid_utf8_value.gguf (a key
   whose string value holds an overlong sequence) is refused by name. */
static void test_utf8_file(void)
{
	const char *top = getenv("top_srcdir");
	char path[4096], err[1024] = "";
	struct gguf_file *f;

	snprintf(path, sizeof(path),
	         "%s/tests/data/gguf/invalid_utf8_value.gguf", top ? top : ".");
	f = gguf_open(path, err, sizeof(err));
	tap_ok(f == NULL && strstr(err, "key 'general.name': string value is "
	                                "not valid UTF-8 (byte 0xc0") != NULL,
	       "invalid_utf8_value.gguf refused: %s", err);
	gguf_close(f);
}

/* A file on disk: missing, directory. */
static void test_files(void)
{
	char err[1024];
	struct gguf_file *f =
	    gguf_open("/nonexistent/x.gguf", err, sizeof(err));

	tap_ok(f == NULL &&
	           strstr(err, "/nonexistent/x.gguf: No such file") != NULL,
	       "missing file: %s", err);
	f = gguf_open("/", err, sizeof(err));
	tap_ok(f == NULL && strstr(err, "not a regular file") != NULL,
	       "directory refused: %s", err);
}

/* The vocab GGUFs of ../shared/testdata. */
static void test_vocab(void)
{
	static const struct {
		const char *file;
		const char *model;
		uint64_t n_vocab;
	} vocabs[] = {
	    {"ggml-vocab-llama-spm.gguf", "llama", 32000},
	    {"ggml-vocab-gpt-2.gguf", "gpt2", 50257},
	    {"ggml-vocab-qwen2.gguf", "gpt2", 151936},
	    {"ggml-vocab-llama-bpe.gguf", "gpt2", 128256},
	};
	const char *shared = getenv("PARLEY_SHARED");
	char path[4096];

	if (shared == NULL) {
		tap_diag("PARLEY_SHARED not set: vocab files not checked");
		return;
	}
	for (size_t i = 0; i < sizeof(vocabs) / sizeof(vocabs[0]); i++) {
		const struct gguf_array *toks, *types;
		struct gguf_file *f;
		struct gguf_str s;
		char err[1024];
		struct stat st;

		snprintf(path, sizeof(path), "%s/testdata/vocab/%s", shared,
		         vocabs[i].file);
		if (stat(path, &st) != 0) {
			tap_diag("%s absent: skipped", path);
			continue;
		}
		f = gguf_open(path, err, sizeof(err));
		if (!tap_ok(f != NULL, "opens %s", vocabs[i].file)) {
			tap_diag("%s", err);
			continue;
		}
		tap_ok(gguf_get_str(f, "tokenizer.ggml.model", &s, NULL, 0) ==
		               GGUF_OK &&
		           gguf_str_eq(s, vocabs[i].model),
		       "%s: tokenizer model %s", vocabs[i].file,
		       vocabs[i].model);
		tap_ok(gguf_get_arr(f, "tokenizer.ggml.tokens",
		                    GGUF_TYPE_STRING, &toks, NULL,
		                    0) == GGUF_OK &&
		           toks->n == vocabs[i].n_vocab,
		       "%s: %llu tokens", vocabs[i].file,
		       (unsigned long long)vocabs[i].n_vocab);
		tap_ok(gguf_get_arr(f, "tokenizer.ggml.token_type",
		                    GGUF_TYPE_INT32, &types, NULL,
		                    0) == GGUF_OK &&
		           types->n == vocabs[i].n_vocab,
		       "%s: token types", vocabs[i].file);
		gguf_close(f);
	}
}

/* The real SmolLM2 model. */
static void test_smollm2(void)
{
	const char *path = getenv("PARLEY_TEST_MODEL");
	const struct gguf_tensor *t;
	struct gguf_file *f;
	char err[1024], buf[4096];
	uint32_t u32;
	float fl;
	int n_q41 = 0, n_f32 = 0, n_q80 = 0;

	if (path == NULL)
		path = testenv_model(buf, sizeof(buf));
	f = gguf_open(path, err, sizeof(err));
	if (f == NULL) {
		tap_diag("SmolLM2 not available (%s): skipped", err);
		return;
	}
	tap_ok(f->version == 3 && f->n_tensors == 272 && f->n_kv == 33,
	       "SmolLM2: v3, 272 tensors, 33 keys");
	tap_ok(gguf_get_u32(f, "llama.block_count", &u32, NULL, 0) == 0 &&
	           u32 == 30,
	       "SmolLM2: 30 layers");
	tap_ok(gguf_get_u32(f, "llama.embedding_length", &u32, NULL, 0) == 0 &&
	           u32 == 576,
	       "SmolLM2: n_embd 576");
	tap_ok(gguf_get_u32(f, "llama.attention.head_count_kv", &u32, NULL,
	                    0) == 0 &&
	           u32 == 3,
	       "SmolLM2: 3 KV heads");
	tap_ok(gguf_get_f32(f, "llama.rope.freq_base", &fl, NULL, 0) == 0 &&
	           fl == 100000.0f,
	       "SmolLM2: rope base 100000");
	for (uint64_t i = 0; i < f->n_tensors; i++) {
		n_q41 += f->tensors[i].type == QTYPE_Q4_1;
		n_f32 += f->tensors[i].type == QTYPE_F32;
		n_q80 += f->tensors[i].type == QTYPE_Q8_0;
	}
	tap_ok(n_q41 == 210 && n_f32 == 61 && n_q80 == 1,
	       "SmolLM2: 210 Q4_1, 61 F32, 1 Q8_0 tensors");
	t = gguf_find_tensor(f, "token_embd.weight");
	tap_ok(t != NULL && t->type == QTYPE_Q8_0 && t->ne[0] == 576 &&
	           t->ne[1] == 49152 && t->nbytes == 30081024,
	       "SmolLM2: token_embd.weight Q8_0 [576, 49152], 30081024 bytes");
	t = gguf_find_tensor(f, "blk.29.ffn_down.weight");
	tap_ok(t != NULL && t->type == QTYPE_Q4_1 && t->ne[0] == 1536 &&
	           t->ne[1] == 576 && t->nbytes == 552960,
	       "SmolLM2: blk.29.ffn_down.weight Q4_1 [1536, 576]");
	gguf_close(f);
}

/* Regression files (fuzz/run.sh copies its findings there; the first
   ones are hand-made hostile files, see the README): each must fail with
   a message or open cleanly. The directory must exist and hold at least
   one file: a replay of nothing proves nothing. */
static void test_crashers(void)
{
	const char *top = getenv("top_srcdir");
	char dir[4096];
	DIR *d;
	struct dirent *e;
	int n = 0, bad = 0;

	snprintf(dir, sizeof(dir), "%s/tests/data/gguf/crashers",
	         top ? top : ".");
	d = opendir(dir);
	if (d == NULL) {
		tap_ok(0, "%s: the regression directory is missing", dir);
		return;
	}
	while ((e = readdir(d)) != NULL) {
		char path[8192], err[1024] = "";
		struct gguf_file *f;

		if (e->d_name[0] == '.' || strcmp(e->d_name, "README") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		f = gguf_open(path, err, sizeof(err));
		if (f == NULL && err[0] == '\0') {
			tap_diag("%s: refused without a message", e->d_name);
			bad++;
		}
		gguf_close(f);
		n++;
	}
	closedir(d);
	tap_ok(n > 0 && bad == 0,
	       "%d regression files replayed without a crash, %d refused "
	       "without a message",
	       n, bad);
}

int main(void)
{
	test_valid();
	test_alignment();
	test_malformed();
	test_utf8();
	test_utf8_file();
	test_files();
	test_vocab();
	test_smollm2();
	test_crashers();
	return tap_done();
}

/*
 * t_config.c - the precedence of the chat options: built-in defaults <
 * the model's general.sampling.* metadata < the config file < the
 * command line; config_apply_model reads an already open GGUF (the
 * session's), fills only what was not set explicitly, and keeps the
 * default for a key of another type or with a value out of range.
 */
#include "config.h"
#include "gguf.h"
#include "gguf_bytes.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A key with a float32 value. */
static void kv_f32(struct sbuf *sb, const char *key, float v)
{
	gb_str(sb, key);
	gb_u32(sb, GGUF_TYPE_FLOAT32);
	gb_f32(sb, v);
}

/* A key with an int32 value. */
static void kv_i32(struct sbuf *sb, const char *key, int32_t v)
{
	gb_str(sb, key);
	gb_u32(sb, GGUF_TYPE_INT32);
	gb_u32(sb, (uint32_t)v);
}

/* A GGUF holding sampling defaults; TOP_P_BAD puts top_p out of range and
   MIN_P_STR gives min_p as a string. */
static struct gguf_file *model_file(struct sbuf *sb, bool top_p_bad,
                                    bool min_p_str)
{
	char err[512];
	struct gguf_file *f;

	gb_header(sb, 3, 0, 7);
	gb_kv_str(sb, "general.architecture", "llama");
	kv_f32(sb, "general.sampling.temp", 0.25f);
	kv_i32(sb, "general.sampling.top_k", 7);
	kv_f32(sb, "general.sampling.top_p", top_p_bad ? 2.0f : 0.5f);
	if (min_p_str)
		gb_kv_str(sb, "general.sampling.min_p", "0.2");
	else
		kv_f32(sb, "general.sampling.min_p", 0.125f);
	kv_f32(sb, "general.sampling.penalty_repeat", 1.5f);
	kv_i32(sb, "general.sampling.penalty_last_n", -1);
	f = gguf_open_memory(sb->buf, sb->len, "sampling.gguf", err,
	                     sizeof(err));
	if (f == NULL)
		tap_diag("%s", err);
	return f;
}

/* The model's values fill every option nobody set. */
static void test_model_defaults(void)
{
	struct sbuf sb = SBUF_INIT;
	struct gguf_file *f = model_file(&sb, false, false);
	struct config c;

	config_init(&c);
	config_apply_model(&c, f);
	tap_ok(f != NULL && c.samp.temperature == 0.25f && c.samp.top_k == 7 &&
	           c.samp.top_p == 0.5f && c.samp.min_p == 0.125f &&
	           c.samp.repeat_penalty == 1.5f && c.samp.penalty_last_n == -1,
	       "the model's general.sampling.* fill the defaults");
	config_free(&c);

	/* NULL: nothing read, nothing changed */
	struct sampler_config def;

	sampler_config_default(&def);
	config_init(&c);
	config_apply_model(&c, NULL);
	tap_ok(memcmp(&c.samp, &def, sizeof(def)) == 0,
	       "no model file: the built-in defaults stay");
	config_free(&c);
	gguf_close(f);
	sbuf_free(&sb);
}

/* Out of range or of another type: the built-in default stays. */
static void test_model_bad_values(void)
{
	struct sbuf sb = SBUF_INIT;
	struct gguf_file *f = model_file(&sb, true, true);
	struct sampler_config def;
	struct config c;

	sampler_config_default(&def);
	config_init(&c);
	config_apply_model(&c, f);
	tap_ok(f != NULL && c.samp.top_p == def.top_p &&
	           c.samp.min_p == def.min_p && c.samp.temperature == 0.25f,
	       "top_p 2.0 and a string min_p are ignored (%g, %g), the "
	       "others applied",
	       c.samp.top_p, c.samp.min_p);
	config_free(&c);
	gguf_close(f);
	sbuf_free(&sb);
}

/* Config file over the model, command line over both. */
static void test_precedence(void)
{
	struct sbuf sb = SBUF_INIT;
	struct gguf_file *f = model_file(&sb, false, false);
	char path[] = "/tmp/t_config_XXXXXX", err[512];
	int fd = mkstemp(path);
	const char text[] = "temp = 0.5\ntop-k 3\n";
	struct config c;
	int rc;

	if (fd < 0 ||
	    write(fd, text, sizeof(text) - 1) != (ssize_t)(sizeof(text) - 1)) {
		tap_ok(0, "config file written");
		return;
	}
	close(fd);
	config_init(&c);
	rc = config_load_file(&c, path, err, sizeof(err));
	rc |= config_set(&c, "top-k", "9", err, sizeof(err)); /* command line */
	config_apply_model(&c, f); /* after both, as chat does */
	tap_ok(rc == 0 && c.samp.temperature == 0.5f && c.samp.top_k == 9 &&
	           c.samp.top_p == 0.5f && c.samp.min_p == 0.125f,
	       "model < config file < command line: temp %g (file), top-k "
	       "%d (command line), top-p %g (model)",
	       c.samp.temperature, c.samp.top_k, c.samp.top_p);
	config_free(&c);
	unlink(path);
	gguf_close(f);
	sbuf_free(&sb);
}

int main(void)
{
	test_model_defaults();
	test_model_bad_values();
	test_precedence();
	return tap_done();
}

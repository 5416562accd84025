/*
 * t_gguf_split.c - split GGUF models (gguf_split.h): a random-weight model
 * (parley-mkmodel) written as shards the way llama.cpp's gguf-split writes
 * them, then:
 *   - any shard opens the whole model: one tensor table, the same bytes;
 *     the CPU engine's logits equal the unsplit model's bit for bit
 *     (the same weights through the same code; any difference is a bug);
 *   - `parley info` on a shard shows the shards and the merged model;
 *   - every broken split is refused with the file and key named: a
 *     missing shard, a shard of another model (split.count, tensor
 *     count), a tensor in two shards, shards out of order, a shard whose
 *     name does not follow the pattern, a shard that is not GGUF, a
 *     wrong split.tensors.count; one shard loaded alone by model_load;
 *   - with the real SmolLM2 (when fetched) in 3 shards: the chat's
 *     one-shot and `parley generate` answer as with the unsplit file.
 * `t_gguf_split --write IN.gguf DIR PREFIX N` writes IN's shards and stops
 * (llama-cpp-python loads such shards, with the unsplit model's logits).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "engine.h"
#include "gguf.h"
#include "gguf_split.h"
#include "gguf_write.h"
#include "model.h"
#include "tap.h"
#include "testenv.h"

/* Options of write_shards. */
#define SPLIT_DUP       1u /* the first tensor also in the last shard */
#define SPLIT_COUNT_OFF 2u /* split.tensors.count one too many */
#define SPLIT_EMPTY_FIRST                                                      \
	4u /* metadata only in shard 1 (--no-tensor-                           \
	      first-split of llama.cpp's gguf-split) */

static char dir[512]; /* the test's temporary directory */

/* DIR/NAME into OUT. */
static const char *tpath(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/%s", dir, name);
	return out;
}

/* DIR/PREFIX-000NO-of-000N.gguf into OUT (NO from 1). */
static const char *shard_path(char *out, size_t n, const char *prefix,
                              uint32_t no, uint32_t count)
{
	snprintf(out, n, "%s/%s-%05u-of-%05u.gguf", dir, prefix, no, count);
	return out;
}

/* Set KEY to V as a u16, the type llama.cpp writes split.no/count in. */
static int set_u16(struct gguf_writer *w, const char *key, uint16_t v)
{
	struct gguf_kv kv;

	memset(&kv, 0, sizeof(kv));
	kv.key = (char *)key;
	kv.val.type = GGUF_TYPE_UINT16;
	kv.val.v.u64 = v;
	return gguf_writer_copy_kv(w, &kv);
}

/* Write F as N shards DIR/PREFIX-*-of-N.gguf: the metadata in the first,
 * the split keys in all, tensors in contiguous runs. Returns 0 or -1. */
static int write_shards(const struct gguf_file *f, const char *prefix,
                        uint32_t n, unsigned opts)
{
	uint64_t nt = f->n_tensors, lo = 0;
	int rc = 0;

	for (uint32_t i = 0; i < n && rc == 0; i++) {
		struct gguf_writer *w = gguf_writer_new();
		uint32_t parts = (opts & SPLIT_EMPTY_FIRST) ? n - 1 : n;
		uint32_t k = (opts & SPLIT_EMPTY_FIRST) ? i : i + 1;
		uint64_t hi = nt * k / parts;
		char path[1024], err[512];

		if (i == 0)
			for (uint64_t j = 0; j < f->n_kv; j++)
				rc |= gguf_writer_copy_kv(w, &f->kv[j]);
		rc |= set_u16(w, "split.no", (uint16_t)i);
		rc |= set_u16(w, "split.count", (uint16_t)n);
		rc |= gguf_writer_set_i32(
		    w, "split.tensors.count",
		    (int32_t)(nt + ((opts & (SPLIT_DUP | SPLIT_COUNT_OFF))
		                        ? 1
		                        : 0)));
		for (; lo < hi; lo++) {
			const struct gguf_tensor *t = &f->tensors[lo];

			rc |= gguf_writer_add_tensor(w, t->name, t->type,
			                             t->n_dims, t->ne, t->data,
			                             NULL, NULL);
		}
		if ((opts & SPLIT_DUP) && i == n - 1)
			rc |= gguf_writer_add_tensor(
			    w, f->tensors[0].name, f->tensors[0].type,
			    f->tensors[0].n_dims, f->tensors[0].ne,
			    f->tensors[0].data, NULL, NULL);
		shard_path(path, sizeof(path), prefix, i + 1, n);
		if (gguf_writer_write(w, path, err, sizeof(err)) != 0 || rc) {
			tap_diag("write %s: %s", path, err);
			rc = -1;
		}
		gguf_writer_free(w);
	}
	return rc;
}

/* Remove the N shards of PREFIX (those that exist). */
static void remove_shards(const char *prefix, uint32_t n)
{
	char p[1024];

	for (uint32_t i = 1; i <= n; i++)
		unlink(shard_path(p, sizeof(p), prefix, i, n));
}

/* Make a random-weight llama of N_LAYER layers at PATH. */
static int make_model(const char *path, const char *n_layer)
{
	char *argv[] = {"dev-mkmodel",   "--arch",    "llama",
	                "--n-embd",      "64",        "--n-ff",
	                "128",           "--n-head",  "4",
	                "--n-head-kv",   "2",         "--n-layer",
	                (char *)n_layer, "--n-vocab", "96",
	                "--type",        "Q8_0",      "-o",
	                (char *)path,    NULL};

	return cmd_mkmodel((int)(sizeof(argv) / sizeof(argv[0])) - 1, argv);
}

/* Logits of a prefill of 6 tokens, then of 2 one-token steps, from the
 * CPU engine on F: 3 * n_vocab floats (caller frees), or NULL. */
static float *run_logits(const struct gguf_file *f, int32_t *n_vocab)
{
	static const int32_t toks[8] = {1, 17, 5, 95, 42, 3, 60, 8};
	struct engine_params p = {0};
	struct model *m = NULL;
	struct engine *e = NULL;
	float *out = NULL;
	char err[512];
	int ok;

	p.backend = "cpu";
	p.n_ctx = 32;
	p.n_threads = 2;
	ok = model_load(f, &m, err, sizeof(err)) == 0 &&
	     engine_open(m, &p, &e, err, sizeof(err)) == 0;
	if (ok) {
		*n_vocab = m->cfg.n_vocab;
		out = malloc(3 * (size_t)m->cfg.n_vocab * sizeof(float));
		ok = out != NULL;
	}
	for (int s = 0; ok && s < 3; s++) {
		int32_t at = s == 0 ? 0 : 5 + s, n = s == 0 ? 6 : 1;

		ok = engine_eval(e, toks + at, n, 0, err, sizeof(err)) == 0 &&
		     engine_logits(e) != NULL;
		if (ok)
			memcpy(out + (size_t)s * m->cfg.n_vocab,
			       engine_logits(e),
			       (size_t)m->cfg.n_vocab * sizeof(float));
	}
	if (!ok) {
		tap_diag("run_logits: %s", err);
		free(out);
		out = NULL;
	}
	engine_close(e);
	model_free(m);
	return out;
}

/* The merged file M holds BASE's tensors: same names, types, shapes and
 * bytes, found by name; each shard holds some. */
static int same_tensors(const struct gguf_file *m, const struct gguf_file *base)
{
	uint64_t per_shard[8] = {0};

	if (m->n_tensors != base->n_tensors || m->n_shards > 8)
		return 0;
	for (uint64_t i = 0; i < base->n_tensors; i++) {
		const struct gguf_tensor *a = &base->tensors[i];
		const struct gguf_tensor *b = gguf_find_tensor(m, a->name);

		if (b == NULL || b->type != a->type || b->n_dims != a->n_dims ||
		    memcmp(b->ne, a->ne, sizeof(a->ne)) != 0 ||
		    b->nbytes != a->nbytes ||
		    memcmp(b->data, a->data, a->nbytes) != 0) {
			tap_diag("tensor %s differs", a->name);
			return 0;
		}
		per_shard[b->shard]++;
	}
	for (uint32_t i = 0; i < m->n_shards; i++)
		if (per_shard[i] != m->shards[i]->n_tensors)
			return 0;
	return 1;
}

/* The split model opens from each shard and runs as the unsplit one. */
static void check_good(const struct gguf_file *base, const char *prefix,
                       uint32_t n, unsigned opts)
{
	float *want, *got;
	int32_t nv = 0, nv2 = 0;
	char p[1024], err[1024];

	if (!tap_ok(write_shards(base, prefix, n, opts) == 0,
	            "%s: written as %u shards", prefix, n))
		return;
	want = run_logits(base, &nv);
	for (uint32_t i = 1; i <= n; i++) {
		struct gguf_file *m = gguf_split_open(
		    shard_path(p, sizeof(p), prefix, i, n), err, sizeof(err));
		char first[1024];

		if (!tap_ok(m != NULL && m->n_shards == n,
		            "%s: opened from shard %u of %u", prefix, i, n)) {
			tap_diag("%s", err);
			continue;
		}
		shard_path(first, sizeof(first), prefix, 1, n);
		tap_ok(strcmp(m->path, first) == 0 &&
		           m->n_kv == base->n_kv + 3 &&
		           gguf_find_kv(m, "general.architecture") != NULL,
		       "%s: the first shard's path and metadata (+3 split "
		       "keys)",
		       prefix);
		tap_ok(same_tensors(m, base),
		       "%s: one tensor table, same bytes, split over the "
		       "shards",
		       prefix);
		if (i == 1) {
			got = run_logits(m, &nv2);
			tap_ok(want != NULL && got != NULL && nv == nv2 &&
			           memcmp(want, got,
			                  3 * (size_t)nv * sizeof(float)) == 0,
			       "%s: CPU logits (prefill 6, decode 2) equal the "
			       "unsplit model's bit for bit",
			       prefix);
			free(got);
		}
		gguf_close(m);
	}
	free(want);
}

/* Opening PATH fails and the message holds each of the NULL-ended
 * strings that follow WHAT. */
static void check_bad(const char *path, const char *what, ...)
{
	struct gguf_file *m;
	char err[1024] = "";
	const char *s;
	va_list ap;
	int ok;

	m = gguf_split_open(path, err, sizeof(err));
	ok = m == NULL;
	va_start(ap, what);
	while ((s = va_arg(ap, const char *)) != NULL)
		ok &= strstr(err, s) != NULL;
	va_end(ap);
	tap_ok(ok, "%s: refused (%s)", what, err);
	gguf_close(m);
}

/* Every broken split is refused, the file and the key named. */
static void check_bad_splits(const struct gguf_file *base,
                             const struct gguf_file *other)
{
	char a[1024], b[1024], c[1024];
	FILE *fp;

	/* a missing shard */
	write_shards(base, "x", 3, 0);
	unlink(shard_path(b, sizeof(b), "x", 2, 3));
	check_bad(shard_path(a, sizeof(a), "x", 1, 3), "a missing shard",
	          "shard 2 of 3 is missing", "x-00002-of-00003.gguf: No such",
	          NULL);
	check_bad(shard_path(a, sizeof(a), "x", 3, 3),
	          "a missing shard, opened from the last",
	          "x-00002-of-00003.gguf: No such", NULL);

	/* a shard of a model split in 2, put in place 2 of 3 */
	write_shards(base, "o", 2, 0);
	rename(shard_path(a, sizeof(a), "o", 2, 2), b);
	check_bad(shard_path(a, sizeof(a), "x", 1, 3),
	          "a shard of another split (split.count)",
	          "x-00002-of-00003.gguf: key 'split.count' is 2, expected 3",
	          NULL);
	check_bad(b, "that shard opened itself (its name disagrees)",
	          "x-00002-of-00003.gguf: keys 'split.no' 1 and "
	          "'split.count' 2 make it shard 2 of 2, but its name says "
	          "shard 2 of 3",
	          NULL);
	remove_shards("o", 2);

	/* a shard of another model, also split in 3 */
	write_shards(other, "y", 3, 0);
	rename(shard_path(a, sizeof(a), "y", 2, 3), b);
	snprintf(c, sizeof(c), "key 'split.tensors.count' is %llu, but",
	         (unsigned long long)other->n_tensors);
	check_bad(shard_path(a, sizeof(a), "x", 1, 3),
	          "a shard of another model (split.tensors.count)",
	          "x-00002-of-00003.gguf: ", c, "x-00001-of-00003.gguf says",
	          NULL);
	remove_shards("y", 3);
	remove_shards("x", 3);

	/* shards out of order: 2 and 3 swapped */
	write_shards(base, "x", 3, 0);
	shard_path(a, sizeof(a), "x", 2, 3);
	shard_path(c, sizeof(c), "x", 3, 3);
	rename(a, tpath(b, sizeof(b), "tmp.gguf"));
	rename(c, a);
	rename(b, c);
	check_bad(shard_path(b, sizeof(b), "x", 1, 3), "shards out of order",
	          "x-00002-of-00003.gguf: key 'split.no' is 2, expected 1 "
	          "(shard 2 of 3)",
	          NULL);
	check_bad(a, "a shard out of order, opened itself",
	          "x-00002-of-00003.gguf: keys 'split.no' 2", NULL);

	/* a shard that is not GGUF */
	fp = fopen(a, "w");
	if (fp != NULL) {
		fputs("not a model, but long enough", fp);
		fclose(fp);
	}
	check_bad(b, "a shard that is not GGUF", "shard 2 of 3",
	          "x-00002-of-00003.gguf: not a GGUF file", NULL);

	/* a shard renamed away from the pattern */
	rename(b, tpath(c, sizeof(c), "plain.gguf"));
	check_bad(c, "a shard whose name hides its siblings",
	          "plain.gguf: shard 1 of 3",
	          "does not end in -00001-of-00003.gguf", NULL);
	unlink(c);
	remove_shards("x", 3);

	/* a tensor in two shards (split.tensors.count counting it twice) */
	write_shards(base, "d", 3, SPLIT_DUP);
	snprintf(c, sizeof(c), "tensor '%s' is in two shards",
	         base->tensors[0].name);
	check_bad(shard_path(a, sizeof(a), "d", 2, 3), "a duplicated tensor", c,
	          "d-00001-of-00003.gguf and", "d-00003-of-00003.gguf", NULL);
	remove_shards("d", 3);

	/* a wrong total */
	write_shards(base, "t", 2, SPLIT_COUNT_OFF);
	snprintf(c, sizeof(c),
	         "key 'split.tensors.count' is %llu, but the 2 shards hold "
	         "%llu tensors",
	         (unsigned long long)base->n_tensors + 1,
	         (unsigned long long)base->n_tensors);
	check_bad(shard_path(a, sizeof(a), "t", 1, 2),
	          "split.tensors.count above the shards' tensors",
	          "t-00001-of-00002.gguf: ", c, NULL);
	remove_shards("t", 2);
}

/* model_load refuses one shard opened alone (gguf_open, not the split
 * open), naming split.count, rather than a missing tensor. */
static void check_shard_alone(const struct gguf_file *base)
{
	struct gguf_file *f;
	struct model *m = NULL;
	char p[1024], err[1024] = "";

	write_shards(base, "s", 2, 0);
	f = gguf_open(shard_path(p, sizeof(p), "s", 1, 2), err, sizeof(err));
	tap_ok(f != NULL && model_load(f, &m, err, sizeof(err)) != 0 &&
	           m == NULL &&
	           strstr(err, "s-00001-of-00002.gguf: one shard") &&
	           strstr(err, "split.count"),
	       "model_load on one shard alone: refused (%s)", err);
	gguf_close(f);
	remove_shards("s", 2);
}

/* Read the output of CMD into BUF; returns the exit status. */
static int run_cmd(const char *cmd, char *buf, size_t n)
{
	FILE *p = popen(cmd, "r");
	size_t got = 0, k;

	if (p == NULL)
		return -1;
	while (got + 1 < n && (k = fread(buf + got, 1, n - 1 - got, p)) > 0)
		got += k;
	buf[got] = '\0';
	return pclose(p);
}

/* `parley info` on the second shard: the shards and the whole model. */
static void check_info(const struct gguf_file *base)
{
	const char *top = getenv("top_builddir");
	static char out[1 << 20];
	char cmd[2048], p[1024], line[1200], want[256];
	int rc;

	write_shards(base, "i", 3, 0);
	snprintf(cmd, sizeof(cmd), "%s/parley info %s", top ? top : ".",
	         shard_path(p, sizeof(p), "i", 2, 3));
	rc = run_cmd(cmd, out, sizeof(out));
	tap_ok(rc == 0 && strstr(out, "\nsplit         3 shards\n"),
	       "parley info: the split's shard count");
	rc = 1;
	for (uint32_t i = 1; i <= 3; i++) {
		struct gguf_file *s = gguf_open(
		    shard_path(p, sizeof(p), "i", i, 3), line, sizeof(line));

		snprintf(line, sizeof(line),
		         "  %-40s %12llu bytes %6llu tensors\n", p,
		         s ? (unsigned long long)s->size : 0ull,
		         s ? (unsigned long long)s->n_tensors : 0ull);
		rc &= s != NULL && strstr(out, line) != NULL;
		gguf_close(s);
	}
	tap_ok(rc, "parley info: each shard's file, size and tensors");
	snprintf(want, sizeof(want), "\ntensors       %llu tensors,",
	         (unsigned long long)base->n_tensors);
	shard_path(p, sizeof(p), "i", 1, 3);
	tap_ok(strstr(out, want) != NULL &&
	           strstr(out, p) == strstr(out, "file") + 14 &&
	           strstr(out, "architecture  llama\n") != NULL &&
	           strstr(out, "  shard 3\n") != NULL,
	       "parley info: the merged model (first shard's path, "
	       "metadata, every tensor with its shard)");
	snprintf(cmd, sizeof(cmd), "%s/parley info --json %s", top ? top : ".",
	         shard_path(p, sizeof(p), "i", 3, 3));
	rc = run_cmd(cmd, out, sizeof(out));
	tap_ok(rc == 0 && strstr(out, "\n \"split\": [\n  {\"file\": ") &&
	           strstr(out, ", \"shard\": 3}") &&
	           strstr(out, "\"general.architecture\": \"llama\""),
	       "parley info --json: the shards and each tensor's shard");
	remove_shards("i", 3);
}

/* By hand: write IN as N shards DIR/PREFIX-*-of-N.gguf (for llama.cpp,
 * or fuzz seeds). */
static int write_cmd(char **argv)
{
	char err[512];
	struct gguf_file *f = gguf_open(argv[2], err, sizeof(err));
	int n = atoi(argv[5]), rc;

	if (f == NULL || n < 2 || n > 99) {
		fprintf(stderr, "t_gguf_split: %s\n", f ? "N: 2..99" : err);
		gguf_close(f);
		return 1;
	}
	snprintf(dir, sizeof(dir), "%s", argv[3]);
	rc = write_shards(f, argv[4], (uint32_t)n, 0);
	gguf_close(f);
	return rc ? 1 : 0;
}

/* The real SmolLM2 (when fetched) in 3 shards, through the command line:
 * the chat's one-shot (the session layer) given the last shard gives the
 * unsplit model's greedy reply, and `parley generate` the same text. */
static void check_cli(void)
{
	const char *top = getenv("top_builddir");
	static char a[4096], b[4096];
	struct gguf_file *f;
	char model[1024], p[1024], cmd[4096], err[512];
	const char *gen = "generate -n 16 --ignore-eos -t 1 --backend cpu -p "
	                  "'The capital of France is'";
	int rc;

	testenv_model(model, sizeof(model));
	f = gguf_open(model, err, sizeof(err));
	if (f == NULL) {
		tap_diag("SmolLM2 not fetched (%s): no command-line checks",
		         err);
		return;
	}
	rc = write_shards(f, "smol", 3, 0);
	gguf_close(f);
	if (!tap_ok(rc == 0, "SmolLM2 written as 3 shards"))
		return;
	/* keep the chat's config and database out of the user's */
	setenv("XDG_CONFIG_HOME", dir, 1);
	setenv("XDG_STATE_HOME", dir, 1);
	snprintf(cmd, sizeof(cmd), "%s/chat.db", dir);
	setenv("PARLEY_DB", cmd, 1);
	snprintf(cmd, sizeof(cmd),
	         "%s/parley -m %s --threads 1 --temp 0 -n 12 --no-store "
	         "--backend cpu --system 'You are a helpful assistant.' -p "
	         "'What is the capital of France?'",
	         top ? top : ".", shard_path(p, sizeof(p), "smol", 3, 3));
	rc = run_cmd(cmd, a, sizeof(a));
	a[strcspn(a, "\n")] = '\0'; /* one line, and the TAP line stays one */
	tap_ok(rc == 0 && strcmp(a, "The capital of France is Paris.") == 0,
	       "parley -m SHARD-3-of-3 -p: SmolLM2's greedy reply (%s)", a);
	snprintf(cmd, sizeof(cmd), "%s/parley %s -m %s 2>/dev/null",
	         top ? top : ".", gen, model);
	rc = run_cmd(cmd, a, sizeof(a));
	snprintf(cmd, sizeof(cmd), "%s/parley %s -m %s 2>/dev/null",
	         top ? top : ".", gen, shard_path(p, sizeof(p), "smol", 1, 3));
	rc |= run_cmd(cmd, b, sizeof(b));
	tap_ok(rc == 0 && a[0] != '\0' && strcmp(a, b) == 0,
	       "parley generate: the split model's 16 greedy tokens are the "
	       "unsplit one's");
	remove_shards("smol", 3);
	unlink(tpath(p, sizeof(p), "chat.db"));
}

int main(int argc, char **argv)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	struct gguf_file *base = NULL, *other = NULL;
	char p[1024], q[1024], err[512];

	if (argc == 6 && strcmp(argv[1], "--write") == 0)
		return write_cmd(argv);
	if (argc != 1) {
		fprintf(stderr, "usage: t_gguf_split [--write IN.gguf DIR "
		                "PREFIX N]\n");
		return 2;
	}
	snprintf(dir, sizeof(dir), "%.400s/t_gguf_split_XXXXXX", tmp);
	if (mkdtemp(dir) == NULL)
		return tap_skip_all("no temporary directory");
	if (!tap_ok(make_model(tpath(p, sizeof(p), "base.gguf"), "3") == 0 &&
	                make_model(tpath(q, sizeof(q), "other.gguf"), "2") ==
	                    0 &&
	                (base = gguf_split_open(p, err, sizeof(err))) != NULL &&
	                (other = gguf_open(q, err, sizeof(err))) != NULL,
	            "two random-weight models")) {
		tap_diag("%s", err);
		return tap_done();
	}
	tap_ok(base->n_shards == 0 && base->shards == NULL,
	       "an unsplit model opens as one file");
	check_good(base, "m", 3, 0);
	remove_shards("m", 3);
	check_good(base, "e", 2, SPLIT_EMPTY_FIRST);
	remove_shards("e", 2);
	check_bad_splits(base, other);
	check_shard_alone(base);
	check_info(base);
	check_cli();
	gguf_close(base);
	gguf_close(other);
	unlink(p);
	unlink(q);
	rmdir(dir);
	return tap_done();
}

/*
 * t_quant_model.c - dequantization of real model files against gguf-py.
 *
 * For SmolLM2-135M-Instruct (Q4_1, Q8_0, F32) and Gemma-3-270M (Q4_K_M:
 * Q4_K, Q6_K, Q5_0, Q8_0, F32), every tensor of a computable type is
 * dequantized row by row and hashed (qhash below, the same function as
 * tests/oracles/gen_quant.py); the hashes must equal those of gguf-py's
 * numpy dequantization in tests/data/quant/{smollm2,gemma3}.hashes.
 * Every row of every tensor is also dotted with an activation vector by the
 * AVX2 and the portable kernels, which must agree bit for bit.
 *
 * Models: $PARLEY_TEST_MODEL or the cache's SmolLM2-135M-Instruct.Q4_1.gguf;
 * $PARLEY_TEST_GEMMA or the cache's gemma-3-270m-q4_k_m.gguf (made by
 * tests/fetch-gemma.sh). An absent model is skipped.
 */
#include "testenv.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "quant.h"
#include "tap.h"

/* qhash: sum over i of splitmix64(bits(y_i) ^ (i * golden)), mod 2^64. */
static uint64_t qhash_add(uint64_t h, const float *y, int64_t n, uint64_t base)
{
	for (int64_t i = 0; i < n; i++) {
		uint32_t b;
		uint64_t z;

		memcpy(&b, &y[i], sizeof b);
		z = b ^ ((base + (uint64_t)i) * 0x9E3779B97F4A7C15ULL);
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
		z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
		h += z ^ (z >> 31);
	}
	return h;
}

/* Path of a model: env variable ENV, else the cache folder's FILE. */
static void model_path(const char *env, const char *file, char *buf, size_t len)
{
	testenv_model_file(env, file, buf, len);
}

struct type_count {
	int match, total; /* tensors of this type: hash equal / compared */
	int dots_bad;     /* rows whose AVX2 and portable dots differ */
};

/* Dequantize, hash and dot every row of tensor T; returns the hash. */
static uint64_t tensor_hash(const struct gguf_tensor *t, float *y, void *vec,
                            const float *x, int *dots_bad)
{
	const int64_t ne0 = (int64_t)t->ne[0];
	const int64_t rows = (int64_t)(t->ne[1] * t->ne[2] * t->ne[3]);
	const size_t rs = quant_row_size(t->type, ne0);
	uint64_t h = 0;

	quant_vec_prepare(t->type, x, ne0, vec);
	for (int64_t r = 0; r < rows; r++) {
		const uint8_t *row = (const uint8_t *)t->data + (size_t)r * rs;
		float a, b;

		quant_dequant_row(t->type, row, y, ne0);
		h = qhash_add(h, y, ne0, (uint64_t)(r * ne0));
		quant_set_simd(true);
		a = quant_dot(t->type, row, vec, ne0);
		quant_set_simd(false);
		b = quant_dot(t->type, row, vec, ne0);
		if (memcmp(&a, &b, sizeof a) != 0)
			(*dots_bad)++;
	}
	quant_set_simd(true);
	return h;
}

/* Compare every tensor of the model at PATH with the goldens in HASHES. */
static void check_model(const char *tag, const char *path, const char *hashes)
{
	struct type_count count[QTYPE_COUNT] = {{0}};
	char err[1024], line[1024], name[512];
	struct gguf_file *f;
	unsigned type;
	uint64_t n, want;
	int unsupported = 0, missing_golden = 0;
	FILE *g;

	f = gguf_open(path, err, sizeof err);
	if (f == NULL) {
		tap_diag("%s not available (%s): skipped", tag, err);
		return;
	}
	g = fopen(hashes, "r");
	if (!tap_ok(g != NULL, "%s: goldens %s readable", tag, hashes)) {
		gguf_close(f);
		return;
	}
	float *y = malloc(1 << 20), *x = malloc(1 << 20);
	void *vec = malloc(1 << 20);
	for (int i = 0; i < (1 << 18); i++)
		x[i] = (float)((i * 7919 % 2001) - 1000) / 1000.0f;
	while (fgets(line, sizeof line, g) != NULL) {
		if (line[0] == '#' ||
		    sscanf(line, "%511s %u %" SCNu64 " %" SCNx64, name, &type,
		           &n, &want) != 4)
			continue;
		const struct gguf_tensor *t = gguf_find_tensor(f, name);
		if (t == NULL || t->type != type || type >= QTYPE_COUNT) {
			tap_diag("%s: tensor %s (type %u) not in the file", tag,
			         name, type);
			missing_golden++;
			continue;
		}
		if (!quant_can_compute(type)) {
			unsupported++;
			continue;
		}
		if (t->ne[0] * 4 > (1 << 20)) {
			tap_diag("%s: %s rows too long for the test", tag,
			         name);
			missing_golden++;
			continue;
		}
		const uint64_t h =
		    tensor_hash(t, y, vec, x, &count[type].dots_bad);
		count[type].total++;
		if (h == want)
			count[type].match++;
		else
			tap_diag("%s: %s (%s): hash %016" PRIx64
			         ", gguf-py %016" PRIx64,
			         tag, name, qtype_name(type), h, want);
	}
	fclose(g);
	int total = 0;
	for (uint32_t ty = 0; ty < QTYPE_COUNT; ty++) {
		if (count[ty].total == 0)
			continue;
		total += count[ty].total;
		tap_ok(
		    count[ty].match == count[ty].total,
		    "%s: %s: %d/%d tensors dequantize bit-exact with gguf-py",
		    tag, qtype_name(ty), count[ty].match, count[ty].total);
		tap_ok(count[ty].dots_bad == 0,
		       "%s: %s: AVX2 and portable dots agree on every row (%d "
		       "differ)",
		       tag, qtype_name(ty), count[ty].dots_bad);
	}
	tap_ok(total + unsupported == (int)f->n_tensors && missing_golden == 0,
	       "%s: all %d tensors covered (%d of unsupported types)", tag,
	       total, unsupported);
	free(y);
	free(x);
	free(vec);
	gguf_close(f);
}

int main(void)
{
	const char *top = getenv("top_srcdir");
	char path[4096], hashes[4096];

	if (top == NULL)
		top = getenv("srcdir");
	if (top == NULL)
		top = ".";
	tap_diag("AVX2 kernels %s",
	         quant_simd_active() ? "active" : "not available");
	model_path("PARLEY_TEST_MODEL", "SmolLM2-135M-Instruct.Q4_1.gguf", path,
	           sizeof path);
	snprintf(hashes, sizeof hashes, "%s/tests/data/quant/smollm2.hashes",
	         top);
	check_model("SmolLM2", path, hashes);
	model_path("PARLEY_TEST_GEMMA", "gemma-3-270m-q4_k_m.gguf", path,
	           sizeof path);
	snprintf(hashes, sizeof hashes, "%s/tests/data/quant/gemma3.hashes",
	         top);
	check_model("Gemma3", path, hashes);
	if (tap_n == 0)
		return tap_skip_all("no model file available");
	return tap_done();
}

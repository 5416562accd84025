/*
 * cmd_mkmodel.c - `parley-mkmodel` / `parley dev-mkmodel`: write a GGUF
 * model of any supported architecture and shape with random weights.
 *
 * NOTES ON THE DESIGN
 *
 * The CUDA work uses it to make models of real models' shapes (say
 * Qwen2.5-7B) on a machine without Python and without downloads; the
 * engine tests use it for small random models checked against an
 * independent forward pass. The output is a pure function of the options
 * (seed included): every row of every tensor is drawn from a generator
 * seeded by (seed, tensor name, row), so files are reproducible and rows
 * are produced at write time without holding the model in memory, by
 * every CPU at once (gguf_writer_set_threads).
 *
 * Weights: matrices ~ N(0, 1/n_in) (activations keep unit scale), the
 * embedding ~ N(0, 1), norms 1 + N(0, 0.1^2)... all stored in the chosen
 * type. F32, F16, BF16 are the rounded gaussians; Q8_0 is the gaussian
 * quantized as ggml does (d = amax/127, round to nearest); the other
 * quantized types get random quants with scales chosen so the weights have
 * roughly the same range (valid blocks; the values are not a quantization
 * of anything). Norms, biases and rope_freqs are always F32.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmd.h"
#include "f16.h"
#include "gguf.h"
#include "gguf_write.h"
#include "qtype.h"

/* Options of one run. */
struct mk_opts {
	const char *arch;     /* "llama" or "qwen2" */
	const char *out;      /* output path */
	const char *tok_from; /* GGUF to copy tokenizer.* keys from, or NULL */
	int64_t n_vocab, n_embd, n_ff, n_layer, n_head, n_head_kv, head_dim;
	int64_t n_ctx;      /* context_length */
	double rope_base;   /* rope.freq_base */
	double rms_eps;     /* layer_norm_rms_epsilon */
	uint32_t type;      /* type of the layer matrices */
	uint32_t embd_type; /* type of token_embd */
	uint32_t out_type;  /* type of output.weight */
	uint32_t more_type; /* attn_v / ffn_down where llama.cpp's K-quant
	                       mixes give more bits (UINT32_MAX: --type) */
	int tied;           /* no output.weight */
	int bias;           /* Q/K/V biases (-1 = by architecture) */
	int rope_freqs;     /* write rope_freqs.weight */
	uint64_t seed;      /* generator seed */
};

/* How a tensor's values are drawn. */
struct mk_tensor {
	uint64_t seed; /* seed of the tensor (from name and run seed) */
	uint32_t type; /* storage type */
	uint64_t ne0;  /* elements per row */
	double mean;   /* of the gaussian */
	double std;    /* of the gaussian */
	int kind;      /* 0 gaussian, 1 rope frequency factors in [1, 8] */
};

/* splitmix64: the generator's step. */
static uint64_t mk_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* Uniform in (0, 1). */
static double mk_uniform(uint64_t *s)
{
	return ((double)(mk_next(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* Standard normal (Box-Muller, one value per call). */
static double mk_gauss(uint64_t *s)
{
	double u1 = mk_uniform(s), u2 = mk_uniform(s);

	return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* FNV-1a of a string, mixed with SEED. */
static uint64_t mk_hash(const char *name, uint64_t seed)
{
	uint64_t h = 1469598103934665603ull ^ seed;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 1099511628211ull;
	return h;
}

/* Store half bits at P (unaligned). */
static void mk_put_f16(unsigned char *p, float v)
{
	uint16_t h = f32_to_f16(v);

	memcpy(p, &h, 2);
}

/* Offsets of the fp16 scale fields of one block, and their targets. */
struct mk_block_desc {
	uint32_t type;
	int n_f16;     /* fp16 fields in the block */
	int off[2];    /* their byte offsets */
	double div[2]; /* scale = amplitude / div (negative: minus) */
};

static const struct mk_block_desc mk_blocks[] = {
    {QTYPE_Q4_0, 1, {0, 0}, {8, 0}},       {QTYPE_Q4_1, 2, {0, 2}, {7.5, -1}},
    {QTYPE_Q5_0, 1, {0, 0}, {16, 0}},      {QTYPE_Q5_1, 2, {0, 2}, {15.5, -1}},
    {QTYPE_Q2_K, 2, {80, 82}, {22.5, 15}}, {QTYPE_Q3_K, 1, {108, 0}, {128, 0}},
    {QTYPE_Q4_K, 2, {0, 2}, {472.5, 63}},  {QTYPE_Q5_K, 2, {0, 2}, {976.5, 63}},
    {QTYPE_Q6_K, 1, {208, 0}, {4096, 0}},
};

/* Fill one row of a random-quant type: random bytes, sane scales. */
static int mk_fill_blocks(const struct mk_tensor *t, uint64_t *s,
                          unsigned char *buf, size_t row_bytes)
{
	const struct qtype_info *q = qtype_get(t->type);
	const struct mk_block_desc *d = NULL;
	double amp = 2.0 * t->std;

	for (size_t i = 0; i < sizeof(mk_blocks) / sizeof(mk_blocks[0]); i++)
		if (mk_blocks[i].type == t->type)
			d = &mk_blocks[i];
	if (d == NULL || q == NULL)
		return -1;
	for (size_t i = 0; i < row_bytes; i++)
		buf[i] = (unsigned char)mk_next(s);
	for (size_t b = 0; b < row_bytes / q->type_size; b++) {
		unsigned char *blk = buf + b * q->type_size;

		for (int k = 0; k < d->n_f16; k++) {
			double v =
			    amp / fabs(d->div[k]) * (0.5 + mk_uniform(s));

			mk_put_f16(blk + d->off[k],
			           (float)(d->div[k] < 0 ? -v : v));
		}
	}
	return 0;
}

/* gguf_writer_fill_fn: row ROW of tensor CTX. */
static int mk_fill(void *ctx, uint64_t row, void *out, size_t row_bytes)
{
	const struct mk_tensor *t = ctx;
	uint64_t s = t->seed ^ (row * 0xD1B54A32D192ED03ull);
	unsigned char *buf = out;
	uint64_t n = t->ne0;

	mk_next(&s);
	if (t->type == QTYPE_F32 || t->type == QTYPE_F16 ||
	    t->type == QTYPE_BF16 || t->type == QTYPE_Q8_0) {
		for (uint64_t i = 0; i < n; i += 32) {
			float v[32], amax = 0;
			uint64_t m = n - i < 32 ? n - i : 32;

			for (uint64_t k = 0; k < m; k++) {
				v[k] = (float)(t->kind == 1
				                   ? 1.0 + 7.0 * mk_uniform(&s)
				                   : t->mean +
				                         t->std * mk_gauss(&s));
				if (fabsf(v[k]) > amax)
					amax = fabsf(v[k]);
			}
			for (uint64_t k = 0; k < m; k++) {
				uint64_t j = i + k;

				if (t->type == QTYPE_F32) {
					memcpy(buf + 4 * j, &v[k], 4);
				} else if (t->type == QTYPE_F16) {
					mk_put_f16(buf + 2 * j, v[k]);
				} else if (t->type == QTYPE_BF16) {
					uint32_t w;
					uint16_t h;

					memcpy(&w, &v[k], 4);
					w += 0x7FFFu + ((w >> 16) & 1u);
					h = (uint16_t)(w >> 16);
					memcpy(buf + 2 * j, &h, 2);
				}
			}
			if (t->type == QTYPE_Q8_0) {
				/* ggml's quantize_row_q8_0_ref */
				unsigned char *blk = buf + (i / 32) * 34;
				float d = amax / 127.0f;
				float id = d != 0.0f ? 1.0f / d : 0.0f;

				mk_put_f16(blk, d);
				for (int k = 0; k < 32; k++)
					blk[2 + k] =
					    (unsigned char)(int8_t)roundf(v[k] *
					                                  id);
			}
		}
		return 0;
	}
	return mk_fill_blocks(t, &s, buf, row_bytes);
}

/* Parse a type name ("F32", "q8_0", ...). Returns 0 or -1. */
static int mk_parse_type(const char *s, uint32_t *out)
{
	for (uint32_t t = 0; t < QTYPE_COUNT; t++) {
		const struct qtype_info *q = qtype_get(t);

		if (q != NULL && q->blck_size != 0 &&
		    strcasecmp(q->name, s) == 0) {
			*out = t;
			return 0;
		}
	}
	return -1;
}

/* All tensor descriptions live here until the write (owned by main). */
struct mk_state {
	struct mk_tensor *t; /* [n] */
	size_t n, cap;
};

/* Describe and add one tensor. */
static int mk_add(struct gguf_writer *w, struct mk_state *st,
                  const struct mk_opts *o, const char *name, uint32_t type,
                  uint64_t ne0, uint64_t ne1, double mean, double std, int kind)
{
	uint64_t ne[2] = {ne0, ne1};
	struct mk_tensor *t;

	if (st->n == st->cap)
		return -1; /* capacity computed up front */
	t = &st->t[st->n++];
	t->seed = mk_hash(name, o->seed);
	t->type = type;
	t->ne0 = ne0;
	t->mean = mean;
	t->std = std;
	t->kind = kind;
	return gguf_writer_add_tensor(w, name, type, ne1 ? 2 : 1, ne, NULL,
	                              mk_fill, t);
}

/* Metadata keys of the architecture. */
static void mk_metadata(struct gguf_writer *w, const struct mk_opts *o)
{
	char key[128];

#define K(suffix) (snprintf(key, sizeof(key), "%s." suffix, o->arch), key)
	gguf_writer_set_str(w, "general.architecture", o->arch);
	gguf_writer_set_str(w, "general.name", "parley random model");
	gguf_writer_set_u32(w, "general.alignment", 32);
	gguf_writer_set_u32(w, K("block_count"), (uint32_t)o->n_layer);
	gguf_writer_set_u32(w, K("context_length"), (uint32_t)o->n_ctx);
	gguf_writer_set_u32(w, K("embedding_length"), (uint32_t)o->n_embd);
	gguf_writer_set_u32(w, K("feed_forward_length"), (uint32_t)o->n_ff);
	gguf_writer_set_u32(w, K("attention.head_count"), (uint32_t)o->n_head);
	gguf_writer_set_u32(w, K("attention.head_count_kv"),
	                    (uint32_t)o->n_head_kv);
	if (o->head_dim * o->n_head != o->n_embd) {
		gguf_writer_set_u32(w, K("attention.key_length"),
		                    (uint32_t)o->head_dim);
		gguf_writer_set_u32(w, K("attention.value_length"),
		                    (uint32_t)o->head_dim);
	}
	gguf_writer_set_u32(w, K("rope.dimension_count"),
	                    (uint32_t)o->head_dim);
	gguf_writer_set_f32(w, K("rope.freq_base"), (float)o->rope_base);
	gguf_writer_set_f32(w, K("attention.layer_norm_rms_epsilon"),
	                    (float)o->rms_eps);
	gguf_writer_set_u32(w, "general.file_type", 0);
#undef K
}

/* Copy tokenizer.* keys from PATH; sets *n_vocab from the token list. */
static int mk_copy_tokenizer(struct gguf_writer *w, const char *path,
                             int64_t *n_vocab, struct gguf_file **keep)
{
	char err[512];
	struct gguf_file *f = gguf_open(path, err, sizeof(err));
	const struct gguf_array *toks;

	if (f == NULL) {
		fprintf(stderr, "parley-mkmodel: %s\n", err);
		return -1;
	}
	if (gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks,
	                 err, sizeof(err)) != GGUF_OK) {
		fprintf(stderr, "parley-mkmodel: %s: %s\n", path, err);
		gguf_close(f);
		return -1;
	}
	if (*n_vocab != 0 && *n_vocab != (int64_t)toks->n) {
		fprintf(stderr,
		        "parley-mkmodel: --n-vocab %lld differs from the %llu "
		        "tokens of %s\n",
		        (long long)*n_vocab, (unsigned long long)toks->n, path);
		gguf_close(f);
		return -1;
	}
	*n_vocab = (int64_t)toks->n;
	for (uint64_t i = 0; i < f->n_kv; i++)
		if (strncmp(f->kv[i].key, "tokenizer.", 10) == 0)
			gguf_writer_copy_kv(w, &f->kv[i]);
	*keep = f; /* strings point into its mapping until the write */
	return 0;
}

/* Usage text. */
static void mk_usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: parley-mkmodel --arch llama|qwen2 -o FILE [options]\n"
	    "  --n-vocab N --n-embd N --n-ff N --n-layer N --n-head N\n"
	    "  --n-head-kv N --head-dim N --n-ctx N --rope-base F\n"
	    "  --rms-eps F --seed N\n"
	    "  --type T        layer matrices (F32 F16 BF16 Q8_0 Q4_0 Q4_1\n"
	    "                  Q5_0 Q5_1 Q2_K Q3_K Q4_K Q5_K Q6_K)\n"
	    "  --embd-type T   token_embd (default: --type)\n"
	    "  --out-type T    output.weight (default: --type)\n"
	    "  --more-bits-type T  attn_v and ffn_down in the layers where\n"
	    "                  llama.cpp's K-quant mixes spend more bits\n"
	    "                  (Q4_K_M: --type Q4_K --more-bits-type Q6_K\n"
	    "                  --out-type Q6_K)\n"
	    "  --tied          no output.weight (LM head = token_embd)\n"
	    "  --bias / --no-bias   Q/K/V biases (default: qwen2 yes)\n"
	    "  --rope-freqs    write rope_freqs.weight (llama-3 style)\n"
	    "  --tokenizer-from FILE  copy tokenizer.* keys (sets n_vocab)\n");
}

/* Parse one numeric option value. */
static int mk_num(const char *opt, const char *v, double lo, double hi,
                  double *out)
{
	char *end;
	double d = v ? strtod(v, &end) : 0;

	if (v == NULL || *v == '\0' || *end != '\0' || !(d >= lo && d <= hi)) {
		fprintf(stderr, "parley-mkmodel: %s needs a number in %g..%g\n",
		        opt, lo, hi);
		return -1;
	}
	*out = d;
	return 0;
}

/* Parse the command line into O. */
static int mk_parse(int argc, char **argv, struct mk_opts *o)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		double d;
		struct {
			const char *name;
			int64_t *dst;
			double max;
		} ints[] = {
		    {"--n-vocab", &o->n_vocab, 4194304},
		    {"--n-embd", &o->n_embd, 65536},
		    {"--n-ff", &o->n_ff, 262144},
		    {"--n-layer", &o->n_layer, 1024},
		    {"--n-head", &o->n_head, 1024},
		    {"--n-head-kv", &o->n_head_kv, 1024},
		    {"--head-dim", &o->head_dim, 1024},
		    {"--n-ctx", &o->n_ctx, 1048576},
		};
		int done = 0;

		for (size_t k = 0; k < sizeof(ints) / sizeof(ints[0]); k++) {
			if (strcmp(a, ints[k].name) == 0) {
				if (mk_num(a, v, 1, ints[k].max, &d))
					return -1;
				*ints[k].dst = (int64_t)d;
				i++;
				done = 1;
			}
		}
		if (done)
			continue;
		if (strcmp(a, "--arch") == 0 && v) {
			o->arch = v;
			i++;
		} else if (strcmp(a, "-o") == 0 && v) {
			o->out = v;
			i++;
		} else if (strcmp(a, "--tokenizer-from") == 0 && v) {
			o->tok_from = v;
			i++;
		} else if (strcmp(a, "--rope-base") == 0) {
			if (mk_num(a, v, 1.0001, 1e12, &o->rope_base))
				return -1;
			i++;
		} else if (strcmp(a, "--rms-eps") == 0) {
			if (mk_num(a, v, 1e-12, 0.1, &o->rms_eps))
				return -1;
			i++;
		} else if (strcmp(a, "--seed") == 0) {
			if (mk_num(a, v, 0, 9e15, &d))
				return -1;
			o->seed = (uint64_t)d;
			i++;
		} else if ((strcmp(a, "--type") == 0 ||
		            strcmp(a, "--embd-type") == 0 ||
		            strcmp(a, "--out-type") == 0 ||
		            strcmp(a, "--more-bits-type") == 0) &&
		           v) {
			uint32_t t;

			if (mk_parse_type(v, &t)) {
				fprintf(stderr,
				        "parley-mkmodel: unknown type %s\n", v);
				return -1;
			}
			if (strcmp(a, "--type") == 0)
				o->type = t;
			else if (strcmp(a, "--embd-type") == 0)
				o->embd_type = t;
			else if (strcmp(a, "--more-bits-type") == 0)
				o->more_type = t;
			else
				o->out_type = t;
			i++;
		} else if (strcmp(a, "--tied") == 0) {
			o->tied = 1;
		} else if (strcmp(a, "--bias") == 0) {
			o->bias = 1;
		} else if (strcmp(a, "--no-bias") == 0) {
			o->bias = 0;
		} else if (strcmp(a, "--rope-freqs") == 0) {
			o->rope_freqs = 1;
		} else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			mk_usage(stdout);
			return 1;
		} else {
			fprintf(stderr, "parley-mkmodel: bad option %s\n", a);
			mk_usage(stderr);
			return -1;
		}
	}
	return 0;
}

/* Check the options; fill defaults. */
static int mk_check(struct mk_opts *o)
{
	if (o->arch == NULL || o->out == NULL ||
	    (strcmp(o->arch, "llama") != 0 && strcmp(o->arch, "qwen2") != 0)) {
		fprintf(stderr, "parley-mkmodel: need --arch llama|qwen2 and "
		                "-o FILE\n");
		return -1;
	}
	if (o->n_head_kv == 0)
		o->n_head_kv = o->n_head;
	if (o->head_dim == 0)
		o->head_dim = o->n_embd / o->n_head;
	if (o->bias < 0)
		o->bias = strcmp(o->arch, "qwen2") == 0;
	if (o->embd_type == UINT32_MAX)
		o->embd_type = o->type;
	if (o->out_type == UINT32_MAX)
		o->out_type = o->type;
	if (o->n_head % o->n_head_kv != 0 || o->head_dim % 2 != 0 ||
	    o->head_dim < 2) {
		fprintf(stderr, "parley-mkmodel: n_head must be a multiple of "
		                "n_head_kv and head_dim even\n");
		return -1;
	}
	return 0;
}

/* Add every tensor of the model. */
static int mk_tensors(struct gguf_writer *w, struct mk_state *st,
                      const struct mk_opts *o)
{
	uint64_t E = (uint64_t)o->n_embd, F = (uint64_t)o->n_ff;
	uint64_t Q = (uint64_t)(o->n_head * o->head_dim);
	uint64_t KV = (uint64_t)(o->n_head_kv * o->head_dim);
	char name[96];
	int rc = 0;

	rc |= mk_add(w, st, o, "token_embd.weight", o->embd_type, E,
	             (uint64_t)o->n_vocab, 0, 1.0, 0);
	rc |= mk_add(w, st, o, "output_norm.weight", QTYPE_F32, E, 0, 1.0, 0.1,
	             0);
	if (!o->tied)
		rc |= mk_add(w, st, o, "output.weight", o->out_type, E,
		             (uint64_t)o->n_vocab, 0, 1.0 / sqrt((double)E), 0);
	if (o->rope_freqs)
		rc |= mk_add(w, st, o, "rope_freqs.weight", QTYPE_F32,
		             (uint64_t)o->head_dim / 2, 0, 0, 0, 1);
	for (int64_t il = 0; il < o->n_layer; il++) {
		/* llama.cpp's use_more_bits (llama-quant.cpp): the first and
		   last eighth of the layers and every third in between */
		int more = il < o->n_layer / 8 || il >= 7 * o->n_layer / 8 ||
		           (il - o->n_layer / 8) % 3 == 2;
		uint32_t vd =
		    more && o->more_type != UINT32_MAX ? o->more_type : o->type;
#define N(s) (snprintf(name, sizeof(name), "blk.%lld." s, (long long)il), name)
		rc |= mk_add(w, st, o, N("attn_norm.weight"), QTYPE_F32, E, 0,
		             1.0, 0.1, 0);
		rc |= mk_add(w, st, o, N("attn_q.weight"), o->type, E, Q, 0,
		             1.0 / sqrt((double)E), 0);
		rc |= mk_add(w, st, o, N("attn_k.weight"), o->type, E, KV, 0,
		             1.0 / sqrt((double)E), 0);
		rc |= mk_add(w, st, o, N("attn_v.weight"), vd, E, KV, 0,
		             1.0 / sqrt((double)E), 0);
		if (o->bias) {
			rc |= mk_add(w, st, o, N("attn_q.bias"), QTYPE_F32, Q,
			             0, 0, 0.5, 0);
			rc |= mk_add(w, st, o, N("attn_k.bias"), QTYPE_F32, KV,
			             0, 0, 0.5, 0);
			rc |= mk_add(w, st, o, N("attn_v.bias"), QTYPE_F32, KV,
			             0, 0, 0.5, 0);
		}
		rc |= mk_add(w, st, o, N("attn_output.weight"), o->type, Q, E,
		             0, 1.0 / sqrt((double)Q), 0);
		rc |= mk_add(w, st, o, N("ffn_norm.weight"), QTYPE_F32, E, 0,
		             1.0, 0.1, 0);
		rc |= mk_add(w, st, o, N("ffn_gate.weight"), o->type, E, F, 0,
		             1.0 / sqrt((double)E), 0);
		rc |= mk_add(w, st, o, N("ffn_up.weight"), o->type, E, F, 0,
		             1.0 / sqrt((double)E), 0);
		rc |= mk_add(w, st, o, N("ffn_down.weight"), vd, F, E, 0,
		             1.0 / sqrt((double)F), 0);
#undef N
	}
	return rc ? -1 : 0;
}

/* Entry point: parley-mkmodel ARGS. Returns the process exit status. */
int cmd_mkmodel(int argc, char **argv)
{
	struct mk_opts o = {
	    .n_embd = 64,
	    .n_ff = 160,
	    .n_layer = 2,
	    .n_head = 4,
	    .n_ctx = 2048,
	    .rope_base = 10000.0,
	    .rms_eps = 1e-6,
	    .type = QTYPE_F32,
	    .embd_type = UINT32_MAX,
	    .more_type = UINT32_MAX,
	    .out_type = UINT32_MAX,
	    .bias = -1,
	    .seed = 1,
	};
	struct gguf_file *tok = NULL;
	struct gguf_writer *w;
	struct mk_state st = {0};
	char err[512];
	int rc;

	rc = mk_parse(argc, argv, &o);
	if (rc != 0)
		return rc > 0 ? 0 : 2;
	if (mk_check(&o))
		return 2;
	w = gguf_writer_new();
	if (w == NULL)
		return 1;
	mk_metadata(w, &o);
	/* mk_fill is a function of (tensor, row) only: rows may be made in
	   parallel, the file is the same (a 7.6 GB Q8_0 model's gaussians
	   took minutes on one thread) */
	gguf_writer_set_threads(w, 0);
	if (o.tok_from && mk_copy_tokenizer(w, o.tok_from, &o.n_vocab, &tok)) {
		gguf_writer_free(w);
		return 1;
	}
	if (o.n_vocab == 0)
		o.n_vocab = 256;
	st.cap = 8 + 12 * (size_t)o.n_layer;
	st.t = calloc(st.cap, sizeof(*st.t));
	rc = st.t == NULL || mk_tensors(w, &st, &o) ||
	     gguf_writer_write(w, o.out, err, sizeof(err));
	if (rc)
		fprintf(stderr, "parley-mkmodel: %s\n",
		        st.t == NULL ? "out of memory" : err);
	gguf_writer_free(w);
	gguf_close(tok);
	free(st.t);
	return rc ? 1 : 0;
}

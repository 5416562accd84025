/*
 * cmd_info.c - `parley info FILE.gguf [--json]`: what a model file holds.
 *
 * Everything shown comes from the file's metadata and tensor table; nothing
 * is known per model. The summary of hyper-parameters reads the standard
 * `<arch>.*` keys of llama.cpp's naming and prints those present; every
 * other key is listed as it is. A shard of a split model shows the whole
 * model (gguf_split.h) and which shard holds what.
 */
#include "cmd.h"
#include "gguf.h"
#include "gguf_split.h"
#include "qtype.h"
#include "sbuf.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Hyper-parameters shown in the summary: label and key suffix. */
static const struct {
	const char *label;
	const char *suffix;
} info_hparams[] = {
    {"layers", "block_count"},
    {"n_embd", "embedding_length"},
    {"n_ff", "feed_forward_length"},
    {"experts", "expert_count"},
    {"experts_used", "expert_used_count"},
    {"n_ff_exp", "expert_feed_forward_length"},
    {"n_head", "attention.head_count"},
    {"n_head_kv", "attention.head_count_kv"},
    {"head_dim_k", "attention.key_length"},
    {"head_dim_v", "attention.value_length"},
    {"n_ctx_train", "context_length"},
    {"rope_dims", "rope.dimension_count"},
    {"rope_base", "rope.freq_base"},
    {"rope_scaling", "rope.scaling.type"},
    {"rope_factor", "rope.scaling.factor"},
    {"swa_window", "attention.sliding_window"},
    {"attn_every", "full_attention_interval"},
    {"ssm_conv", "ssm.conv_kernel"},
    {"ssm_state", "ssm.state_size"},
    {"ssm_k_heads", "ssm.group_count"},
    {"ssm_v_heads", "ssm.time_step_rank"},
    {"mtp_layers", "nextn_predict_layers"},
    {"rms_eps", "attention.layer_norm_rms_epsilon"},
    {"vocab_size", "vocab_size"},
};

/* Most array elements printed inline. */
#define INFO_ARRAY_SHOWN 8

/* Append the value V as text (arrays abbreviated). */
static void info_value_text(struct sbuf *sb, const struct gguf_value *v)
{
	const struct gguf_array *a = &v->v.arr;

	switch (v->type) {
	case GGUF_TYPE_STRING:
		sbuf_adds(sb, "\"");
		sbuf_add_json_str(sb, v->v.str.ptr,
		                  v->v.str.len > 200 ? 200 : v->v.str.len);
		sbuf_adds(sb, v->v.str.len > 200 ? "...\"" : "\"");
		if (v->v.str.len > 200)
			sbuf_printf(sb, " (%" PRIu64 " bytes)", v->v.str.len);
		return;
	case GGUF_TYPE_ARRAY:
		sbuf_printf(sb, "[%" PRIu64 " x %s]", a->n,
		            gguf_type_name(a->elem_type));
		if (a->elem_type == GGUF_TYPE_STRING && a->n > 0) {
			sbuf_adds(sb, " \"");
			sbuf_add_json_str(sb, a->strs[0].ptr,
			                  a->strs[0].len > 40 ? 40
			                                      : a->strs[0].len);
			sbuf_adds(sb, a->n > 1 ? "\", ..." : "\"");
		} else if (a->elem_type != GGUF_TYPE_ARRAY && a->n > 0) {
			uint64_t n =
			    a->n < INFO_ARRAY_SHOWN ? a->n : INFO_ARRAY_SHOWN;

			for (uint64_t i = 0; i < n; i++)
				if (a->elem_type == GGUF_TYPE_FLOAT32 ||
				    a->elem_type == GGUF_TYPE_FLOAT64)
					sbuf_printf(sb, "%s%g", i ? ", " : " ",
					            gguf_arr_f64(a, i));
				else
					sbuf_printf(sb, "%s%" PRId64,
					            i ? ", " : " ",
					            gguf_arr_i64(a, i));
			if (n < a->n)
				sbuf_adds(sb, ", ...");
		}
		return;
	case GGUF_TYPE_BOOL:
		sbuf_adds(sb, v->v.b ? "true" : "false");
		return;
	case GGUF_TYPE_FLOAT32:
	case GGUF_TYPE_FLOAT64:
		sbuf_printf(sb, "%g", v->v.f64);
		return;
	case GGUF_TYPE_INT8:
	case GGUF_TYPE_INT16:
	case GGUF_TYPE_INT32:
	case GGUF_TYPE_INT64:
		sbuf_printf(sb, "%" PRId64, v->v.i64);
		return;
	default:
		sbuf_printf(sb, "%" PRIu64, v->v.u64);
		return;
	}
}

/* Append the value V as JSON (arrays of more than 64 elements become a
 * summary object, so that a 150k-token vocabulary is not printed). */
static void info_value_json(struct sbuf *sb, const struct gguf_value *v)
{
	const struct gguf_array *a = &v->v.arr;

	switch (v->type) {
	case GGUF_TYPE_STRING:
		sbuf_adds(sb, "\"");
		sbuf_add_json_str(sb, v->v.str.ptr, v->v.str.len);
		sbuf_adds(sb, "\"");
		return;
	case GGUF_TYPE_ARRAY:
		if (a->n > 64 || a->elem_type == GGUF_TYPE_ARRAY) {
			sbuf_printf(
			    sb,
			    "{\"array_of\": \"%s\", \"length\": %" PRIu64 "}",
			    gguf_type_name(a->elem_type), a->n);
			return;
		}
		sbuf_adds(sb, "[");
		for (uint64_t i = 0; i < a->n; i++) {
			struct gguf_value e;

			if (i > 0)
				sbuf_adds(sb, ", ");
			if (a->elem_type == GGUF_TYPE_STRING) {
				e.type = GGUF_TYPE_STRING;
				e.v.str = a->strs[i];
				info_value_json(sb, &e);
			} else if (a->elem_type == GGUF_TYPE_BOOL) {
				sbuf_adds(sb, gguf_arr_i64(a, i) ? "true"
				                                 : "false");
			} else if (a->elem_type == GGUF_TYPE_FLOAT32 ||
			           a->elem_type == GGUF_TYPE_FLOAT64) {
				sbuf_printf(sb, "%.9g", gguf_arr_f64(a, i));
			} else {
				sbuf_printf(sb, "%" PRId64, gguf_arr_i64(a, i));
			}
		}
		sbuf_adds(sb, "]");
		return;
	case GGUF_TYPE_FLOAT32:
	case GGUF_TYPE_FLOAT64:
		sbuf_printf(sb, "%.9g", v->v.f64);
		return;
	default:
		info_value_text(sb, v);
		return;
	}
}

/* The architecture name, or NULL when general.architecture is absent. */
static char *info_arch(const struct gguf_file *f)
{
	struct gguf_str s;

	if (gguf_get_str(f, "general.architecture", &s, NULL, 0) != GGUF_OK)
		return NULL;
	return gguf_str_dup(s);
}

/* Per-type totals over the tensor table. */
struct info_totals {
	uint64_t count[QTYPE_COUNT]; /* tensors of each type */
	uint64_t elems[QTYPE_COUNT]; /* elements of each type */
	uint64_t bytes[QTYPE_COUNT]; /* data bytes of each type */
	uint64_t all_bytes;          /* data bytes in all */
	uint64_t all_elems;          /* parameters in all */
};

static void info_sum(const struct gguf_file *f, struct info_totals *t)
{
	memset(t, 0, sizeof(*t));
	for (uint64_t i = 0; i < f->n_tensors; i++) {
		const struct gguf_tensor *tn = &f->tensors[i];
		uint64_t n = tn->ne[0] * tn->ne[1] * tn->ne[2] * tn->ne[3];

		/* Types were validated at open: always < QTYPE_COUNT. */
		t->count[tn->type]++;
		t->elems[tn->type] += n;
		t->bytes[tn->type] += tn->nbytes;
		t->all_bytes += tn->nbytes;
		t->all_elems += n;
	}
}

/* Text of token ID, or NULL if there is no such token. */
static const struct gguf_str *info_token(const struct gguf_file *f, uint64_t id)
{
	const struct gguf_array *toks;

	if (gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks,
	                 NULL, 0) != GGUF_OK ||
	    id >= toks->n)
		return NULL;
	return &toks->strs[id];
}

/* True when KEY names a special token id: tokenizer.ggml.X_token_id. */
static bool info_is_special_key(const char *key)
{
	size_t n = strlen(key);

	return strncmp(key, "tokenizer.ggml.", 15) == 0 && n > 24 &&
	       strcmp(key + n - 9, "_token_id") == 0;
}

static void info_shape_text(struct sbuf *sb, const struct gguf_tensor *t)
{
	sbuf_adds(sb, "[");
	for (uint32_t d = 0; d < t->n_dims; d++)
		sbuf_printf(sb, "%s%" PRIu64, d ? ", " : "", t->ne[d]);
	sbuf_adds(sb, "]");
}

/* The shards of a split model, one line each (nothing for one file). */
static void info_split_text(const struct gguf_file *f, struct sbuf *sb)
{
	if (f->n_shards == 0)
		return;
	sbuf_printf(sb, "split         %" PRIu32 " shards\n", f->n_shards);
	for (uint32_t i = 0; i < f->n_shards; i++)
		sbuf_printf(
		    sb, "  %-40s %12" PRIu64 " bytes %6" PRIu64 " tensors\n",
		    f->shards[i]->path, f->shards[i]->size,
		    f->shards[i]->n_tensors);
}

/* The text report. */
static void info_text(const struct gguf_file *f, struct sbuf *sb)
{
	char *arch = info_arch(f);
	struct info_totals tot;
	const struct gguf_kv *kv;
	const struct gguf_array *arr;
	struct gguf_str s;

	sbuf_printf(sb, "file          %s\n", f->path);
	sbuf_printf(sb,
	            "size          %" PRIu64 " bytes (%.1f MiB), GGUF v%" PRIu32
	            ", %" PRIu64 " metadata keys, %" PRIu64
	            " tensors, alignment %" PRIu32 "\n",
	            f->size, (double)f->size / 1048576.0, f->version, f->n_kv,
	            f->n_tensors, f->alignment);
	info_split_text(f, sb);
	if (gguf_get_str(f, "general.name", &s, NULL, 0) == GGUF_OK) {
		sbuf_adds(sb, "name          ");
		sbuf_add_json_str(sb, s.ptr, s.len);
		sbuf_adds(sb, "\n");
	}
	sbuf_printf(sb, "architecture  %s\n",
	            arch ? arch
	                 : "(none: no "
	                   "general.architecture"
	                   ")");
	if (arch != NULL) {
		for (size_t i = 0;
		     i < sizeof(info_hparams) / sizeof(info_hparams[0]); i++) {
			struct sbuf key = SBUF_INIT;

			sbuf_printf(&key, "%s.%s", arch,
			            info_hparams[i].suffix);
			kv = key.buf ? gguf_find_kv(f, key.buf) : NULL;
			if (kv != NULL) {
				sbuf_printf(sb, "  %-12s ",
				            info_hparams[i].label);
				info_value_text(sb, &kv->val);
				sbuf_adds(sb, "\n");
			}
			sbuf_free(&key);
		}
	}

	sbuf_adds(sb, "tokenizer    ");
	if (gguf_get_str(f, "tokenizer.ggml.model", &s, NULL, 0) == GGUF_OK) {
		sbuf_adds(sb, " model ");
		sbuf_add_json_str(sb, s.ptr, s.len);
	} else {
		sbuf_adds(sb, " (none)");
	}
	if (gguf_get_str(f, "tokenizer.ggml.pre", &s, NULL, 0) == GGUF_OK) {
		sbuf_adds(sb, ", pre-tokenizer ");
		sbuf_add_json_str(sb, s.ptr, s.len);
	}
	if (gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &arr,
	                 NULL, 0) == GGUF_OK)
		sbuf_printf(sb, ", vocab %" PRIu64, arr->n);
	if (gguf_get_arr(f, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &arr,
	                 NULL, 0) == GGUF_OK)
		sbuf_printf(sb, ", %" PRIu64 " merges", arr->n);
	sbuf_adds(sb, "\n");
	for (uint64_t i = 0; i < f->n_kv; i++) {
		const struct gguf_str *tok;
		uint64_t id;

		kv = &f->kv[i];
		if (!info_is_special_key(kv->key) ||
		    gguf_get_u64(f, kv->key, &id, NULL, 0) != GGUF_OK)
			continue;
		sbuf_printf(sb, "  %-12.*s %" PRIu64,
		            (int)(strlen(kv->key) - 24), kv->key + 15, id);
		tok = info_token(f, id);
		if (tok != NULL) {
			sbuf_adds(sb, " \"");
			sbuf_add_json_str(sb, tok->ptr, tok->len);
			sbuf_adds(sb, "\"");
		} else {
			sbuf_adds(sb, " (no such token)");
		}
		sbuf_adds(sb, "\n");
	}
	if (gguf_get_str(f, "tokenizer.chat_template", &s, NULL, 0) == GGUF_OK)
		sbuf_printf(sb, "chat template present (%" PRIu64 " bytes)\n",
		            s.len);
	else
		sbuf_adds(sb, "chat template none\n");

	sbuf_adds(sb, "metadata\n");
	for (uint64_t i = 0; i < f->n_kv; i++) {
		kv = &f->kv[i];
		sbuf_printf(sb, "  %-40s %-8s ", kv->key,
		            gguf_type_name(kv->val.type));
		info_value_text(sb, &kv->val);
		sbuf_adds(sb, "\n");
	}

	info_sum(f, &tot);
	sbuf_printf(sb,
	            "tensors       %" PRIu64 " tensors, %" PRIu64
	            " parameters, %" PRIu64 " bytes\n",
	            f->n_tensors, tot.all_elems, tot.all_bytes);
	for (uint64_t i = 0; i < f->n_tensors; i++) {
		const struct gguf_tensor *t = &f->tensors[i];
		struct sbuf shape = SBUF_INIT;

		info_shape_text(&shape, t);
		sbuf_printf(sb, "  %-40s %-7s %-20s %12" PRIu64, t->name,
		            qtype_name(t->type), shape.buf ? shape.buf : "",
		            t->nbytes);
		if (f->n_shards > 0)
			sbuf_printf(sb, "  shard %" PRIu32, t->shard + 1);
		sbuf_adds(sb, "\n");
		sbuf_free(&shape);
	}
	sbuf_adds(sb, "totals by type\n");
	for (uint32_t ty = 0; ty < QTYPE_COUNT; ty++)
		if (tot.count[ty] > 0)
			sbuf_printf(sb,
			            "  %-7s %5" PRIu64 " tensors %12" PRIu64
			            " parameters %12" PRIu64 " bytes\n",
			            qtype_name(ty), tot.count[ty],
			            tot.elems[ty], tot.bytes[ty]);
	free(arch);
}

/* The JSON report: one object. */
static void info_json(const struct gguf_file *f, struct sbuf *sb)
{
	struct info_totals tot;
	bool first = true;

	sbuf_adds(sb, "{\"file\": \"");
	sbuf_add_json_str(sb, f->path, strlen(f->path));
	sbuf_printf(sb,
	            "\", \"size\": %" PRIu64 ", \"version\": %" PRIu32
	            ", \"alignment\": %" PRIu32 ",",
	            f->size, f->version, f->alignment);
	if (f->n_shards > 0) {
		sbuf_adds(sb, "\n \"split\": [");
		for (uint32_t i = 0; i < f->n_shards; i++) {
			const struct gguf_file *sh = f->shards[i];

			sbuf_adds(sb, i ? ",\n  {\"file\": \""
			                : "\n  {\"file\": \"");
			sbuf_add_json_str(sb, sh->path, strlen(sh->path));
			sbuf_printf(sb,
			            "\", \"size\": %" PRIu64
			            ", \"tensors\": %" PRIu64 "}",
			            sh->size, sh->n_tensors);
		}
		sbuf_adds(sb, "],");
	}
	sbuf_adds(sb, "\n \"metadata\": {");
	for (uint64_t i = 0; i < f->n_kv; i++) {
		sbuf_adds(sb, i ? ",\n  \"" : "\n  \"");
		sbuf_add_json_str(sb, f->kv[i].key, strlen(f->kv[i].key));
		sbuf_adds(sb, "\": ");
		info_value_json(sb, &f->kv[i].val);
	}
	sbuf_adds(sb, "},\n \"special_tokens\": {");
	for (uint64_t i = 0; i < f->n_kv; i++) {
		const struct gguf_kv *kv = &f->kv[i];
		const struct gguf_str *tok;
		uint64_t id;

		if (!info_is_special_key(kv->key) ||
		    gguf_get_u64(f, kv->key, &id, NULL, 0) != GGUF_OK)
			continue;
		sbuf_printf(sb, "%s\n  \"%.*s\": {\"id\": %" PRIu64,
		            first ? "" : ",", (int)(strlen(kv->key) - 24),
		            kv->key + 15, id);
		tok = info_token(f, id);
		if (tok != NULL) {
			sbuf_adds(sb, ", \"text\": \"");
			sbuf_add_json_str(sb, tok->ptr, tok->len);
			sbuf_adds(sb, "\"");
		}
		sbuf_adds(sb, "}");
		first = false;
	}
	sbuf_printf(sb, "},\n \"chat_template\": %s,\n \"tensors\": [",
	            gguf_find_kv(f, "tokenizer.chat_template") ? "true"
	                                                       : "false");
	for (uint64_t i = 0; i < f->n_tensors; i++) {
		const struct gguf_tensor *t = &f->tensors[i];

		sbuf_adds(sb, i ? ",\n  {\"name\": \"" : "\n  {\"name\": \"");
		sbuf_add_json_str(sb, t->name, strlen(t->name));
		sbuf_printf(sb, "\", \"type\": \"%s\", \"shape\": [",
		            qtype_name(t->type));
		for (uint32_t d = 0; d < t->n_dims; d++)
			sbuf_printf(sb, "%s%" PRIu64, d ? ", " : "", t->ne[d]);
		/* the offset in the file that holds it */
		sbuf_printf(sb,
		            "], \"offset\": %" PRIu64 ", \"bytes\": %" PRIu64,
		            gguf_split_file_of(f, t)->data_offset + t->offset,
		            t->nbytes);
		if (f->n_shards > 0)
			sbuf_printf(sb, ", \"shard\": %" PRIu32, t->shard + 1);
		sbuf_adds(sb, "}");
	}
	info_sum(f, &tot);
	sbuf_adds(sb, "],\n \"totals\": {");
	first = true;
	for (uint32_t ty = 0; ty < QTYPE_COUNT; ty++) {
		if (tot.count[ty] == 0)
			continue;
		sbuf_printf(sb,
		            "%s\n  \"%s\": {\"tensors\": %" PRIu64
		            ", \"parameters\": %" PRIu64 ", \"bytes\": %" PRIu64
		            "}",
		            first ? "" : ",", qtype_name(ty), tot.count[ty],
		            tot.elems[ty], tot.bytes[ty]);
		first = false;
	}
	sbuf_printf(sb,
	            "},\n \"n_tensors\": %" PRIu64 ", \"parameters\": %" PRIu64
	            ", \"tensor_bytes\": %" PRIu64 "}\n",
	            f->n_tensors, tot.all_elems, tot.all_bytes);
}

static void info_usage(FILE *fp)
{
	fputs("usage: parley info [--json] FILE.gguf|NAME\n"
	      "Show a GGUF model's architecture, hyper-parameters, tokenizer,\n"
	      "metadata and tensor table; for any shard of a split model\n"
	      "(NAME-00001-of-00003.gguf), its shards and the whole model.\n"
	      "NAME: a model `parley models` lists (qwen3:8b), or a prefix.\n"
	      "  -j, --json   one JSON object instead of text\n"
	      "  -h, --help   this help\n",
	      fp);
}

int cmd_info(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct sbuf sb = SBUF_INIT;
	struct gguf_file *f;
	char err[1024];
	bool json = false;
	int c, rc = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'h':
			info_usage(stdout);
			return 0;
		default:
			info_usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1) {
		info_usage(stderr);
		return 2;
	}
	f = cmd_model_open(argv[optind], err, sizeof(err));
	if (f == NULL) {
		fprintf(stderr, "parley: %s\n", err);
		return 1;
	}
	if (json)
		info_json(f, &sb);
	else
		info_text(f, &sb);
	if (sb.failed) {
		fprintf(stderr, "parley: out of memory\n");
		rc = 1;
	} else if (fwrite(sb.buf, 1, sb.len, stdout) != sb.len ||
	           fflush(stdout) != 0) {
		rc = 1;
	}
	sbuf_free(&sb);
	gguf_close(f);
	return rc;
}

/*
 * cmd_tokenize.c - `parley tokenize -m FILE [--ids|--pieces]
 * [--add-special] [--parse-special] [--] [TEXT]`: show how a model's
 * tokenizer splits a text, for users debugging prompts.
 *
 * Defaults follow llama.cpp's vocab test files: no BOS/EOS is added and
 * special-token text ("<|im_end|>") is not parsed, so the ids are those of
 * the text as a user would have typed it. Without TEXT the text is read
 * from standard input (all of it, bytes as they are).
 *
 * Output: by default one token a line, "ID<TAB>"PIECE"" (the bytes the
 * token decodes to, control tokens as their text, quoted and escaped C
 * style: \n \t \r \" \\, and \xNN for control characters and for bytes
 * that are not part of a valid UTF-8 character, such as one <0xF0> byte
 * token); --ids: the ids on one line separated by spaces; --pieces: the
 * quoted pieces on one line separated by spaces.
 */
#include "cmd.h"
#include "gguf.h"
#include "gguf_split.h"
#include "sbuf.h"
#include "tok.h"
#include "utf8.h"

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKENIZE_MAX_STDIN (64u << 20) /* bytes read from stdin at most */

static void tokenize_usage(FILE *fp)
{
	fputs("usage: parley tokenize -m FILE [--ids|--pieces] [--add-special]"
	      " [--parse-special] [--] [TEXT]\n"
	      "\n"
	      "Print the tokens a model's tokenizer makes of TEXT (or of "
	      "standard input).\n"
	      "\n"
	      "  -m, --model FILE   the GGUF model (or vocab-only) file, or\n"
	      "                     a name parley models lists\n"
	      "      --ids          print only the ids, on one line\n"
	      "      --pieces       print only the pieces, on one line\n"
	      "      --add-special  add BOS/EOS as the model asks\n"
	      "      --parse-special  read special-token text such as "
	      "<|im_start|> as\n"
	      "                     the control token (by default it is "
	      "plain text)\n"
	      "  -h, --help         show this help\n",
	      fp);
}

/* Read all of stdin into *OUT (caller frees). 0, or -1 with a message. */
static int tokenize_read_stdin(struct sbuf *out)
{
	char buf[65536];
	size_t n;

	while ((n = fread(buf, 1, sizeof(buf), stdin)) > 0) {
		if (out->len + n > TOKENIZE_MAX_STDIN) {
			fprintf(stderr,
			        "parley tokenize: standard input is "
			        "longer than %u bytes\n",
			        TOKENIZE_MAX_STDIN);
			return -1;
		}
		sbuf_add(out, buf, n);
	}
	if (ferror(stdin) || out->failed) {
		fprintf(stderr, "parley tokenize: cannot read standard "
		                "input\n");
		return -1;
	}
	return 0;
}

/* Append the N bytes at P to SB quoted and escaped (see the top). */
static void tokenize_quote(struct sbuf *sb, const char *p, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t i = 0;

	sbuf_adds(sb, "\"");
	while (i < n) {
		unsigned char c = (unsigned char)p[i];
		size_t len = c >= 0x80 ? utf8_valid_len(p + i, n - i) : 0;

		if (len > 0) {
			sbuf_add(sb, p + i, len);
			i += len;
			continue;
		}
		if (c == '"' || c == '\\') {
			char e[2] = {'\\', (char)c};

			sbuf_add(sb, e, 2);
		} else if (c == '\n') {
			sbuf_adds(sb, "\\n");
		} else if (c == '\t') {
			sbuf_adds(sb, "\\t");
		} else if (c == '\r') {
			sbuf_adds(sb, "\\r");
		} else if (c >= 0x20 && c < 0x7f) {
			sbuf_add(sb, &c, 1);
		} else {
			char e[4] = {'\\', 'x', hex[c >> 4], hex[c & 15]};

			sbuf_add(sb, e, 4);
		}
		i++;
	}
	sbuf_adds(sb, "\"");
}

/* Format the ids as asked into SB. */
static void tokenize_print(struct sbuf *sb, const struct tok *t,
                           const struct tok_ids *ids, int mode)
{
	size_t i, len;

	for (i = 0; i < ids->n; i++) {
		const char *p =
		    tok_piece(t, ids->v[i], TOK_DECODE_SPECIAL, &len);

		if (mode == 'i') {
			sbuf_printf(sb, "%s%d", i ? " " : "", ids->v[i]);
			continue;
		}
		if (mode == 'p' && i > 0)
			sbuf_adds(sb, " ");
		else if (mode != 'p')
			sbuf_printf(sb, "%d\t", ids->v[i]);
		tokenize_quote(sb, p, len);
		if (mode != 'p')
			sbuf_adds(sb, "\n");
	}
	if (mode != 0)
		sbuf_adds(sb, "\n");
}

int cmd_tokenize(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"model", required_argument, NULL, 'm'},
	    {"ids", no_argument, NULL, 'i'},
	    {"pieces", no_argument, NULL, 'p'},
	    {"add-special", no_argument, NULL, 'a'},
	    {"parse-special", no_argument, NULL, 's'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *model = NULL;
	struct sbuf text = SBUF_INIT, out = SBUF_INIT;
	struct tok_ids ids = {0};
	struct gguf_file *f = NULL;
	struct tok *t = NULL;
	unsigned flags = 0;
	int c, mode = 0, rc = 1;
	char err[512];

	optind = 1;
	while ((c = getopt_long(argc, argv, "m:h", opts, NULL)) != -1) {
		switch (c) {
		case 'm':
			model = optarg;
			break;
		case 'i':
		case 'p':
			if (mode && mode != c) {
				fputs("parley tokenize: --ids and --pieces "
				      "exclude each other\n",
				      stderr);
				return 2;
			}
			mode = c;
			break;
		case 'a':
			flags |= TOK_ADD_SPECIAL;
			break;
		case 's':
			flags |= TOK_PARSE_SPECIAL;
			break;
		case 'h':
			tokenize_usage(stdout);
			return 0;
		default:
			tokenize_usage(stderr);
			return 2;
		}
	}
	if (model == NULL || argc - optind > 1) {
		fputs(model ? "parley tokenize: give the text as one argument "
		              "(quote it) or on standard input\n"
		            : "parley tokenize: -m FILE is required\n",
		      stderr);
		tokenize_usage(stderr);
		return 2;
	}
	if (optind < argc)
		sbuf_adds(&text, argv[optind]);
	else if (tokenize_read_stdin(&text))
		goto done;
	f = cmd_model_open(model, err, sizeof(err));
	if (f == NULL || (t = tok_load(f, err, sizeof(err))) == NULL) {
		fprintf(stderr, "parley tokenize: %s\n", err);
		goto done;
	}
	if (tok_encode(t, text.buf ? text.buf : "", text.len, flags, &ids, err,
	               sizeof(err))) {
		fprintf(stderr, "parley tokenize: %s\n", err);
		goto done;
	}
	tokenize_print(&out, t, &ids, mode);
	if (out.failed) {
		fputs("parley tokenize: out of memory\n", stderr);
		goto done;
	}
	if (out.len && fwrite(out.buf, 1, out.len, stdout) != out.len) {
		perror("parley tokenize: stdout");
		goto done;
	}
	rc = 0;
done:
	free(ids.v);
	sbuf_free(&text);
	sbuf_free(&out);
	tok_free(t);
	gguf_close(f);
	return rc;
}

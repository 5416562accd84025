/*
 * fuzz_template.c - libFuzzer harness for the chat-template interpreter.
 *
 * The input is a template source.  It is compiled; when it compiles it is
 * rendered twice (with and without a system message, with spans) under
 * small limits so that runaway loops end quickly.  Every outcome but a
 * crash, a leak or a sanitizer report is fine.
 */
#include "json.h"
#include "template.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *const msgs_json[] = {
    "[{\"role\":\"system\",\"content\":\"Be brief.\"},"
    "{\"role\":\"user\",\"content\":\"Hi {{ x }} <|im_end|> \\u00e9\"},"
    "{\"role\":\"assistant\",\"content\":\"  Hello  \"},"
    "{\"role\":\"user\",\"content\":\"\"}]",
    "[{\"role\":\"user\"},{\"role\":\"assistant\",\"content\":"
    "[{\"type\":\"text\",\"text\":\"t\"}],\"tool_calls\":[{\"function\":"
    "{\"name\":\"f\",\"arguments\":{\"a\":1}}}]}]",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tmpl *t;
	char err[512];
	size_t i;
	struct tmpl_limits lim = {1 << 16, 16 << 20, 16, 20000};
	struct tm now;

	if (tmpl_compile((const char *)data, size, &t, err, sizeof(err)))
		return 0;
	memset(&now, 0, sizeof(now));
	now.tm_year = 125;
	for (i = 0; i < 2; i++) {
		struct json_value *m = NULL;
		struct tmpl_ctx ctx;
		struct tmpl_span *sp = NULL;
		size_t n, nsp, k, pos = 0;
		char *out = NULL;

		json_parse(msgs_json[i], strlen(msgs_json[i]), &m, err,
		           sizeof(err));
		memset(&ctx, 0, sizeof(ctx));
		ctx.messages = m;
		ctx.add_generation_prompt = i == 0;
		ctx.bos_token = "<s>";
		ctx.eos_token = "</s>";
		ctx.now = &now;
		ctx.limits = &lim;
		if (tmpl_render(t, &ctx, &out, &n, &sp, &nsp, err,
		                sizeof(err)) == TMPL_OK) {
			/* spans must tile the output */
			for (k = 0; k < nsp; k++) {
				if (sp[k].off != pos || sp[k].len == 0)
					abort();
				pos += sp[k].len;
			}
			if (pos != n)
				abort();
		}
		free(out);
		free(sp);
		json_free(m);
	}
	tmpl_free(t);
	return 0;
}

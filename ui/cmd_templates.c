/*
 * cmd_templates.c - `parley templates`: the built-in chat templates and
 * system-prompt presets, and where they are installed.
 */
#include "cmd.h"
#include "promptdir.h"
#include "sbuf.h"

#include <stdio.h>
#include <string.h>

int cmd_templates(int argc, char **argv)
{
	struct sbuf t = SBUF_INIT, s = SBUF_INIT;
	int nt, ns;

	if (argc > 1 &&
	    (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		puts("usage: parley templates\n"
		     "List the built-in chat templates (--template NAME) and "
		     "system prompts\n(--system-preset NAME).");
		return 0;
	}
	if (argc > 1) {
		fputs("usage: parley templates\n", stderr);
		return 2;
	}
	nt = promptdir_names("templates", ".jinja", &t);
	ns = promptdir_names("system", ".txt", &s);
	if (nt < 0 && ns < 0) {
		fprintf(stderr,
		        "parley: cannot read %s (set PARLEY_DATA_DIR "
		        "or install parley)\n",
		        promptdir_root());
		return 1;
	}
	printf("directory       %s\n", promptdir_root());
	printf("templates       %s\n", t.buf != NULL ? t.buf : "");
	printf("system presets  %s\n", s.buf != NULL ? s.buf : "");
	sbuf_free(&t);
	sbuf_free(&s);
	return 0;
}

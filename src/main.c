/*
 * main.c - the parley program: dispatch to a subcommand.
 */
#include "cmd.h"

#include <locale.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

struct command {
	const char *name;		   /* as typed after `parley` */
	int (*run)(int argc, char **argv); /* see cmd.h */
	const char *summary;		   /* one line for --help */
};

static const struct command commands[] = {
    {"info", cmd_info, "show a GGUF model's metadata and tensors"},
    {"devices", cmd_devices, "list the CUDA devices this build can use"},
    {"tokenize", cmd_tokenize, "show the tokens a model makes of a text"},
    {"generate", cmd_generate, "complete a text with a model (no chat template)"},
    {"dev-mkmodel", cmd_mkmodel, NULL}, /* hidden: random-weight models */
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *fp)
{
	fputs("usage: parley COMMAND [OPTIONS] [ARGS]\n"
	      "       parley --help | --version\n"
	      "\n"
	      "A terminal chat application for GGUF language models.\n"
	      "\n"
	      "Commands:\n",
	      fp);
	for (size_t i = 0; i < N_COMMANDS; i++)
		if (commands[i].summary != NULL) /* NULL: hidden */
			fprintf(fp, "  %-10s %s\n", commands[i].name,
				commands[i].summary);
	fputs("\n'parley COMMAND --help' describes a command's options.\n"
	      "The chat itself is not built yet; see README.md.\n",
	      fp);
}

int main(int argc, char **argv)
{
	setlocale(LC_ALL, "");
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
		printf("parley %s\n", PARLEY_VERSION);
		return 0;
	}
	for (size_t i = 0; i < N_COMMANDS; i++)
		if (strcmp(argv[1], commands[i].name) == 0)
			return commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "parley: unknown command '%s' (try parley --help)\n",
		argv[1]);
	return 2;
}

/*
 * main.c - the parley program: dispatch to a subcommand.
 */
#include "cmd.h"

#include <locale.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct command {
	const char *name;                  /* as typed after `parley` */
	int (*run)(int argc, char **argv); /* see cmd.h */
	const char *summary;               /* one line for --help */
};

static const struct command commands[] = {
    {"chat", cmd_chat, "chat with a model (the default command)"},
    {"resume", cmd_resume, "continue a stored conversation [ID|--last]"},
    {"list", cmd_list, "list the stored conversations"},
    {"show", cmd_show, "print a stored conversation"},
    {"branch", cmd_branch, "make another branch of a conversation active"},
    {"search", cmd_search, "search the stored messages"},
    {"rename", cmd_rename, "set a conversation's title"},
    {"rm", cmd_rm, "delete conversations"},
    {"export", cmd_export, "export a conversation (Markdown or JSON)"},
    {"import", cmd_import, "import a conversation from JSON"},
    {"models", cmd_models,
     "list the local GGUF models (or a server's: --server URL)"},
    {"pull", cmd_pull,
     "download a GGUF model from the Hugging Face hub (ORG/REPO[:QUANT])"},
    {"info", cmd_info, "show a GGUF model's metadata and tensors"},
    {"devices", cmd_devices, "list the CUDA devices this build can use"},
    {"tokenize", cmd_tokenize, "show the tokens a model makes of a text"},
    {"render", cmd_render, "print what a chat template makes of messages"},
    {"templates", cmd_templates,
     "list the built-in templates and system prompts"},
    {"generate", cmd_generate,
     "complete a text with a model (no chat template)"},
    {"bench", cmd_bench,
     "measure load, prefill and decode speed against the bandwidth"},
    {"dev-mkmodel", cmd_mkmodel, NULL}, /* hidden: random-weight models */
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

/* See cmd.h. */
const char *cmd_default_backend(void)
{
	const char *b = getenv("PARLEY_BACKEND");

	return b != NULL && b[0] != '\0' ? b : "auto";
}

static void usage(FILE *fp)
{
	fputs(
	    "usage: parley [-m MODEL] [OPTIONS]        chat (full-screen on a "
	    "terminal)\n"
	    "       parley -p TEXT [OPTIONS]           one message, reply on "
	    "stdout\n"
	    "       parley COMMAND [OPTIONS] [ARGS]\n"
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
	fputs("\n'parley chat --help' lists the chat options (model, sampling,"
	      "\ncontext, system prompt); 'parley COMMAND --help' describes a "
	      "command.\n",
	      fp);
}

int main(int argc, char **argv)
{
	setlocale(LC_ALL, "");
	if (argc < 2 || (argv[1][0] == '-' && strcmp(argv[1], "--help") &&
	                 strcmp(argv[1], "-h") &&
	                 strcmp(argv[1], "--version") && strcmp(argv[1], "-V")))
		return cmd_chat(argc, argv); /* `parley [OPTIONS]` chats */
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

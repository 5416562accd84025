/*
 * cmd.h - the subcommands of the parley program.
 *
 * Each takes the subcommand's own argv (argv[0] is the subcommand name),
 * parses its options with getopt_long, prints its results on stdout and its
 * errors on stderr, and returns the process exit status: 0 success,
 * 1 failure, 2 usage error. Library code below this layer (src/, cuda/)
 * never prints or exits: it returns errors for these commands to show.
 */
#ifndef PARLEY_CMD_H
#define PARLEY_CMD_H

#include <stddef.h>

int cmd_info(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_render(int argc, char **argv);
int cmd_templates(int argc, char **argv);
/* parley generate -m FILE -p TEXT -n N: raw completion (cmd_generate.c) */
int cmd_generate(int argc, char **argv);
/* parley bench: prefill/decode speed and the bandwidth floor (cmd_bench.c) */
int cmd_bench(int argc, char **argv);
/* parley dev-mkmodel: random-weight GGUF models (cmd_mkmodel.c; hidden) */
int cmd_mkmodel(int argc, char **argv);

/* cmd_chat.c: the chat (REPL or one shot) and resuming a conversation */
int cmd_chat(int argc, char **argv);
/* `parley models`: the local models, or --server URL's (cmd_models.c) */
int cmd_models(int argc, char **argv);
/* `parley pull ORG/REPO[:QUANT]`: a model from the hub (cmd_pull.c) */
int cmd_pull(int argc, char **argv);
struct config;
struct gguf_file;
/* -m NAME (or the config's model): NAME itself when it is a path, else
   the file of the model `parley models` lists under that name or a unique
   prefix (modelname.h), CFG's models-dir searched too (CFG NULL: the
   default config file's). 0 with *PATH malloc'd, or -1 with a message
   (an ambiguous or unknown name lists the nearest names) in err. */
int cmd_model_resolve(const struct config *cfg, const char *name, char **path,
                      char *err, size_t errlen);
/* The same, and *LISTED (when not NULL) the name the list gives the model
   ("qwen3:latest" for "qwen3"), malloc'd, or NULL when NAME is a path
   (but an ollama blob's path: the name ollama's store gives it). */
int cmd_model_resolve_name(const struct config *cfg, const char *name,
                           char **path, char **listed, char *err,
                           size_t errlen);
/* gguf_split_open of cmd_model_resolve(NULL, NAME): the -m of the tools
   (info, generate, tokenize, render, bench); NULL with err on failure. */
struct gguf_file *cmd_model_open(const char *name, char *err, size_t errlen);
/* The API key of CFG (api-key-env, else api-key-file) into *KEY (NULL:
   none; free with cmd_key_free, which wipes it). 0, or -1 (printed). */
int cmd_api_key(const struct config *cfg, char **key);
void cmd_key_free(char *key);
int cmd_resume(int argc, char **argv);

/* cmd_history.c: the stored conversations */
int cmd_list(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_branch(int argc, char **argv);
int cmd_search(int argc, char **argv);
int cmd_rename(int argc, char **argv);
int cmd_rm(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_import(int argc, char **argv);

/* The engine backend when no --backend or config key names one:
   $PARLEY_BACKEND if set and not empty, else "auto" (main.c). */
const char *cmd_default_backend(void);

#endif /* PARLEY_CMD_H */

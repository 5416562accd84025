/*
 * promptdir.h - the installed prompts tree: built-in chat templates and
 * system-prompt presets (see prompts/README.md).
 *
 * Where it is: $PARLEY_DATA_DIR when set (tests, uninstalled builds), else
 * PARLEY_DATADIR/prompts (the configure prefix). Layout:
 *     templates/NAME.jinja   --template NAME
 *     system/NAME.txt        --system-preset NAME
 * A template argument that contains '/' or ends in ".jinja" is a file path.
 */
#ifndef PARLEY_PROMPTDIR_H
#define PARLEY_PROMPTDIR_H

#include <stddef.h>

struct gguf_file;
struct sbuf;

#define PROMPTDIR_MAX_FILE (4u << 20) /* largest template or preset read */

/* The prompts directory (static storage or the environment's string). */
const char *promptdir_root(void);

/*
 * Read a whole file of at most PROMPTDIR_MAX_FILE bytes into a malloc'd
 * NUL-terminated buffer (caller frees) and its length into *LEN. NULL with
 * a message naming the file on failure.
 */
char *promptdir_read_file(const char *path, size_t *len, char *err,
                          size_t errlen);

/*
 * The name of the built-in template for model file GF (may be NULL) when
 * it carries no tokenizer.chat_template: its architecture's
 * (general.architecture "gemma3": "gemma3"), else "chatml". Static.
 */
const char *promptdir_builtin_for(const struct gguf_file *gf);

/*
 * The source of the chat template chosen by NAME for model file GF (may be
 * NULL): with NAME NULL or "", the model's tokenizer.chat_template when it
 * has one, else promptdir_builtin_for(GF); a NAME with '/' or ".jinja" is read
 * as a file; any other NAME is templates/NAME.jinja. Stores the malloc'd
 * source in *SRC (length *LEN) and a malloc'd name for display ("model",
 * the built-in name or the path) in *SHOWN; the caller frees both.
 * Returns 0, or -1 with a message (an unknown name lists the built-ins).
 */
int promptdir_template(const struct gguf_file *gf, const char *name, char **src,
                       size_t *len, char **shown, char *err, size_t errlen);

/*
 * The text of system preset NAME (system/NAME.txt, one trailing newline
 * removed), malloc'd into *TEXT. Returns 0, or -1 with a message that
 * lists the presets when NAME is unknown.
 */
int promptdir_system_preset(const char *name, char **text, char *err,
                            size_t errlen);

/*
 * Append the names in SUBDIR ("templates" or "system") whose files end in
 * SUFFIX, sorted and comma-separated, to OUT. Returns the count, or -1
 * when the directory cannot be read.
 */
int promptdir_names(const char *subdir, const char *suffix, struct sbuf *out);

#endif /* PARLEY_PROMPTDIR_H */

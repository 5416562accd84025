/*
 * template.h - a Jinja-subset interpreter for models' chat templates.
 *
 * NOTES ON THE DESIGN
 *
 * Models ship their prompt format as a Jinja template; transformers renders
 * it with jinja2's ImmutableSandboxedEnvironment(trim_blocks=True,
 * lstrip_blocks=True, extensions=[loopcontrols]) plus a `tojson` filter
 * that keeps non-ASCII and the globals raise_exception and strftime_now.
 * This module reproduces that output byte for byte for the subset of Jinja
 * real chat templates use (see prompts/README.md for the list).
 *
 *   1. tmpl_compile() lexes and parses the source once into an AST owned
 *      by struct tmpl (an arena).  Syntax errors name line and column.
 *      The compiled template is immutable: it may be rendered any number
 *      of times, also from several threads at once.
 *   2. tmpl_render() evaluates the AST with a context.  All values made
 *      while rendering live in one arena that is dropped at the end; the
 *      caller's JSON trees are only read (strings are borrowed, not
 *      copied).  Errors unwind with longjmp to tmpl_render, which is safe
 *      because nothing but the arena and the output buffer is allocated.
 *   3. Bounded: expression/statement nesting (parse), macro recursion,
 *      total loop iterations + macro calls, output bytes and arena bytes
 *      all have limits (struct tmpl_limits); passing one is an error
 *      naming the limit, never a crash or an unbounded allocation.
 *   4. Provenance: every string value carries the byte ranges that came
 *      from untrusted input (message fields, untrusted variables).  The
 *      ranges survive concatenation, slicing, trim and `~`; operations
 *      that transform text (upper, replace, tojson of a container, ...)
 *      mark their whole result untrusted if any input was.  The renderer
 *      returns the output as spans {offset, len, is_content} so that the
 *      tokenizer parses special tokens only outside content: a user who
 *      types "<|im_end|>" gets the plain text, never the control token.
 *
 * Return codes: TMPL_OK, or a negative TMPL_E* with a message in ERR.
 * For TMPL_ERAISE (the template called raise_exception) the message is
 * exactly the template's text, ready to be shown to the user.
 */
#ifndef PARLEY_TEMPLATE_H
#define PARLEY_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "json.h"

#define TMPL_OK       0
#define TMPL_ESYNTAX  (-1) /* malformed template: "line L, column C: ..." */
#define TMPL_ERUNTIME (-2) /* error while rendering (undefined, types) */
#define TMPL_ERAISE   (-3) /* raise_exception(msg): ERR holds msg */
#define TMPL_ELIMIT   (-4) /* a limit of struct tmpl_limits was reached */
#define TMPL_ENOMEM   (-5) /* the system ran out of memory */

struct tmpl;

/* Resource limits of one compile or render; zero fields take defaults. */
struct tmpl_limits {
	size_t max_output;  /* bytes of rendered text (default 16 MiB) */
	size_t max_memory;  /* arena bytes while rendering (256 MiB) */
	unsigned max_depth; /* macro call depth (64) */
	uint64_t max_steps; /* loop iterations + macro calls (1,000,000) */
};

/* One extra variable visible to the template. */
struct tmpl_var {
	const char *name;               /* NUL-terminated identifier */
	const struct json_value *value; /* borrowed for the render */
	bool untrusted;                 /* its strings count as content */
};

/* What a render sees.  All pointers are borrowed for the call. */
struct tmpl_ctx {
	const struct json_value *messages; /* array of {role, content, ...};
	                                      NULL: empty list. Untrusted. */
	bool add_generation_prompt;        /* the variable of that name */
	const char *bos_token;             /* NULL: "" */
	const char *eos_token;             /* NULL: "" */
	const struct json_value *tools;    /* NULL: none (still defined) */
	const struct tmpl_var *vars;       /* nvars extra variables */
	size_t nvars;
	const struct tm *now;             /* strftime_now's time; NULL: the
	                                     local time at the call */
	const struct tmpl_limits *limits; /* NULL: defaults */
};

/* One run of output bytes of a single provenance. */
struct tmpl_span {
	size_t off;      /* first byte in the output */
	size_t len;      /* bytes, > 0 */
	bool is_content; /* came from untrusted input (parse as plain text) */
};

/*
 * Compile LEN bytes of SRC (UTF-8, no terminator needed) into *OUT, owned
 * by the caller and freed with tmpl_free().  Returns TMPL_OK or
 * TMPL_ESYNTAX / TMPL_ENOMEM with "line L, column C: ..." in ERR.
 */
int tmpl_compile(const char *src, size_t len, struct tmpl **out, char *err,
                 size_t errlen);

/* Free a compiled template (NULL is fine). */
void tmpl_free(struct tmpl *t);

/*
 * Render T with CTX.  On success *OUT is a malloc'd NUL-terminated string
 * (owned by the caller; may hold NUL bytes from the data, *OUTLEN is the
 * true length).  When SPANS is not NULL, *SPANS receives a malloc'd array
 * of *NSPANS spans (owned by the caller) that cover the output in order,
 * adjacent spans differing in is_content.  On error *OUT (and *SPANS) are
 * NULL and ERR holds the message; see the TMPL_E* codes.
 */
int tmpl_render(const struct tmpl *t, const struct tmpl_ctx *ctx, char **out,
                size_t *outlen, struct tmpl_span **spans, size_t *nspans,
                char *err, size_t errlen);

#endif /* PARLEY_TEMPLATE_H */

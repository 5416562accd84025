/*
 * tui_md.h - a message's text as screen lines: Markdown rendered through
 * md4c (headings, emphasis, lists, quotes, tables, fenced code set off by
 * a bar and kept unwrapped where it fits) or the raw text as typed.
 *
 * The renderer is called again on the whole text while a reply streams
 * (md4c parses a few KB in microseconds), so that a construct that
 * completes later (the closing ** or ```) is drawn right once it does.
 */
#ifndef PARLEY_TUI_MD_H
#define PARLEY_TUI_MD_H

#include "tui_lines.h"

#include <stdbool.h>
#include <stddef.h>

/* Lay TEXT[0, len) out into Y: as Markdown when MARKDOWN, else each line
   as typed. Returns 0, or -1 when md4c failed (then laid out raw). */
int tui_md_lay(struct tui_lay *y, const char *text, size_t len, bool markdown);

/*
 * The text of the NTH (1-based) code block of the Markdown TEXT, without
 * its fences: malloc'd (caller frees) with its length in *OUT_LEN, or
 * NULL when there is no such block. *COUNT (may be NULL) receives the
 * number of code blocks.
 */
char *tui_md_code_block(const char *text, size_t len, int nth, size_t *out_len,
                        int *count);

#endif /* PARLEY_TUI_MD_H */

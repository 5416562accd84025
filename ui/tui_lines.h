/*
 * tui_lines.h - styled screen lines and the layout that word-wraps text
 * into them (the full-screen UI's transcript, help and lists).
 *
 * NOTES ON THE DESIGN
 *
 * A line is an array of cells: one wide character each, with its
 * attribute bits (TUI_A_*) and a colour (TUI_C_*). Widths come from
 * utf8proc (CJK and most emoji 2 columns, combining marks 0, attached to
 * the character before them); tabs become spaces to the next multiple of
 * TUI_TAB; control characters and invalid UTF-8 become U+FFFD, so that
 * no byte of a model's output can move the terminal's cursor.
 *
 * The layout fills paragraphs: a paragraph has a prefix for its first
 * line and one for the lines that continue it (list bullets, the bar of
 * a quote or a code block), wraps at the last space that fits (or, for
 * code, or a word longer than the line, at the last character that
 * fits), and treats '\n' as a hard break.
 *
 * Invariant: every line the layout emits is at most WIDTH columns wide.
 */
#ifndef PARLEY_TUI_LINES_H
#define PARLEY_TUI_LINES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <wchar.h>

#define TUI_TAB 4 /* tab stops every TUI_TAB columns */

/* attribute bits of a cell (low byte) */
enum {
	TUI_A_BOLD = 1,
	TUI_A_ITALIC = 2,
	TUI_A_UNDER = 4,
	TUI_A_DIM = 8,
	TUI_A_REVERSE = 16,
};

/* colours (bits 8..11 of a cell's attribute); TUI_C_NONE is the default */
enum tui_color {
	TUI_C_NONE,
	TUI_C_USER,      /* the user's label */
	TUI_C_ASSISTANT, /* the model's label */
	TUI_C_SYSTEM,    /* the system prompt */
	TUI_C_CODE,      /* inline code and code blocks */
	TUI_C_HEADING,   /* Markdown headings */
	TUI_C_NOTICE,    /* notices, [stopped] */
	TUI_C_MATCH,     /* search matches */
	TUI_C_ERROR,     /* errors in the status line */
	TUI_C_PLOW,      /* a reply token of low probability (shading;
	                    underlined under NO_COLOR) */
	TUI_C_PMID,      /* a reply token of middling probability */
	TUI_C_COUNT
};

#define TUI_COLOR(c)    ((uint16_t)((c) << 8))
#define TUI_COLOR_OF(a) ((enum tui_color)(((a) >> 8) & 15))

/* One screen line. */
struct tui_line {
	wchar_t *wc;  /* n characters and a NUL (owned) */
	uint16_t *at; /* n attributes, TUI_A_* | TUI_COLOR() (owned) */
	int n;        /* characters */
	int cols;     /* display columns, <= the layout's width */
};

/* A growing array of lines. */
struct tui_lines {
	struct tui_line *v; /* n lines (owned) */
	int n, cap;
};

/* The layout filling OUT at WIDTH columns (see the notes above). */
struct tui_lay {
	struct tui_lines *out;      /* where lines go (borrowed) */
	int width;                  /* columns, >= 1 */
	struct tui_line cur;        /* the line being filled (owned) */
	int cap;                    /* capacity of cur.wc / cur.at */
	int pre_n;                  /* cells of cur that are its prefix */
	int brk;                    /* index in cur just after a space, or -1 */
	int col0;                   /* columns of the prefix (tab stops count
	                               from here) */
	bool open;                  /* cur holds a started line */
	bool first;                 /* the next line is the paragraph's first */
	bool code;                  /* break anywhere, keep spaces */
	wchar_t pre1[64], pre2[64]; /* first / continuation prefixes */
	uint16_t at1, at2;          /* their attributes */
};

/* Free the lines of L (and keep it usable, empty). */
void tui_lines_clear(struct tui_lines *l);

/* Start laying out into OUT at WIDTH columns. */
void tui_lay_init(struct tui_lay *y, struct tui_lines *out, int width);

/* Begin a paragraph: FIRST prefixes its first line, CONT the others
   (UTF-8, may be NULL); CODE breaks anywhere. Ends any open paragraph. */
void tui_lay_para(struct tui_lay *y, const char *first, uint16_t first_at,
                  const char *cont, uint16_t cont_at, bool code);

/* Add LEN bytes of UTF-8 text S with attribute AT to the paragraph. */
void tui_lay_text(struct tui_lay *y, const char *s, size_t len, uint16_t at);

/* End the paragraph (a paragraph with no text still makes one line). */
void tui_lay_end(struct tui_lay *y);

/* An empty line, unless the last line is already empty or there is none. */
void tui_lay_blank(struct tui_lay *y);

/* End and free the layout's own buffers (OUT keeps its lines). */
void tui_lay_done(struct tui_lay *y);

/* Display columns of the UTF-8 text S[0, len) as the layout counts them. */
int tui_lines_cols(const char *s, size_t len);

/* Columns of one character as the layout counts them (-1: replaced). */
int tui_lines_wc_cols(wchar_t c);

#endif /* PARLEY_TUI_LINES_H */

/*
 * tui_term.c - whether the full-screen UI can run on this terminal
 * (tui.h). Apart from the rest because <term.h> defines macros named
 * like ordinary words (lines, columns, ...).
 */
#include "tui.h"

#include <curses.h>
#include <langinfo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <term.h>
#include <unistd.h>

bool tui_usable(char *why, size_t whylen)
{
	int err = 0;
	const char *term = getenv("TERM");
	char *cup;

	if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
		snprintf(why, whylen, "not a terminal");
		return false;
	}
	if (term == NULL || *term == '\0' || strcmp(term, "dumb") == 0 ||
	    setupterm(NULL, STDOUT_FILENO, &err) != OK) {
		snprintf(why, whylen,
		         "the terminal (TERM=%s) cannot address "
		         "the cursor",
		         term ? term : "");
		return false;
	}
	cup = tigetstr("cup");
	del_curterm(cur_term);
	cur_term = NULL;
	if (cup == NULL || cup == (char *)-1) {
		snprintf(why, whylen,
		         "the terminal (TERM=%s) cannot address "
		         "the cursor",
		         term);
		return false;
	}
	if (strcmp(nl_langinfo(CODESET), "UTF-8") != 0) {
		snprintf(why, whylen,
		         "the full-screen UI needs a UTF-8 locale (the "
		         "character set is %s; try LANG=C.UTF-8)",
		         nl_langinfo(CODESET));
		return false;
	}
	return true;
}

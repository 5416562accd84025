/*
 * t_utf8.c - the shared UTF-8 validator and encoder: RFC 3629 boundaries,
 * and encode/validate/decode round trips over every scalar value.
 */
#include "tap.h"
#include "utf8.h"

#include <string.h>

static void check(const char *bytes, size_t n, size_t want, const char *what)
{
	size_t got = utf8_valid_len(bytes, n);

	tap_ok(got == want, "%s: %zu (want %zu)", what, got, want);
}

int main(void)
{
	char buf[4];
	int bad = 0;

	check("\x7f", 1, 1, "U+007F");
	check("\xc2\x80", 2, 2, "U+0080");
	check("\xdf\xbf", 2, 2, "U+07FF");
	check("\xe0\xa0\x80", 3, 3, "U+0800");
	check("\xef\xbf\xbf", 3, 3, "U+FFFF");
	check("\xf0\x90\x80\x80", 4, 4, "U+10000");
	check("\xf4\x8f\xbf\xbf", 4, 4, "U+10FFFF");
	check("\xc0\x80", 2, 0, "overlong NUL (C0 80)");
	check("\xc1\xbf", 2, 0, "overlong C1 BF");
	check("\xe0\x9f\xbf", 3, 0, "overlong 3-byte");
	check("\xf0\x8f\xbf\xbf", 4, 0, "overlong 4-byte");
	check("\xed\xa0\x80", 3, 0, "surrogate U+D800");
	check("\xed\xbf\xbf", 3, 0, "surrogate U+DFFF");
	check("\xf4\x90\x80\x80", 4, 0, "U+110000");
	check("\xf5\x80\x80\x80", 4, 0, "lead F5");
	check("\x80", 1, 0, "lone continuation byte");
	check("\xe2\x82", 2, 0, "truncated 3-byte");
	check("\xe2\x82\xac", 2, 0, "complete character cut by N");
	check("\xe2\x28\xa1", 3, 0, "bad continuation");
	check("", 0, 0, "N = 0");

	tap_ok(utf8_check("", 0) == 0, "utf8_check: empty is valid");
	tap_ok(utf8_check("a\0b\xc3\xa9\xf0\x9f\x98\x80", 9) == 9,
	       "utf8_check: ASCII, NUL, 2- and 4-byte characters are valid");
	tap_ok(utf8_check("ab\xc0\x80", 4) == 2,
	       "utf8_check: an overlong NUL at offset 2");
	tap_ok(utf8_check("\xc3\xa9\x80z", 4) == 2,
	       "utf8_check: a lone continuation byte after a character");
	tap_ok(utf8_check("x\xed\xa0\x80", 4) == 1,
	       "utf8_check: a surrogate at offset 1");
	tap_ok(utf8_check("abc\xe2\x82", 5) == 3,
	       "utf8_check: a sequence truncated by the end");

	for (uint32_t cp = 0; cp <= 0x10ffff; cp++) {
		size_t n;

		if (cp >= 0xd800 && cp <= 0xdfff)
			continue;
		n = utf8_put(cp, buf);
		if (utf8_valid_len(buf, n) != n || utf8_decode(buf, n) != cp ||
		    utf8_lead_len((unsigned char)buf[0]) != n)
			bad++;
	}
	tap_ok(bad == 0,
	       "every scalar value encodes, validates and decodes "
	       "back (%d failures)",
	       bad);
	return tap_done();
}

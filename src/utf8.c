/*
 * utf8.c - UTF-8 validation and encoding.
 */
#include "utf8.h"

size_t utf8_lead_len(unsigned char c)
{
	if (c < 0x80)
		return 1;
	if ((c & 0xe0) == 0xc0)
		return 2;
	if ((c & 0xf0) == 0xe0)
		return 3;
	if ((c & 0xf8) == 0xf0)
		return 4;
	return 1;
}

uint32_t utf8_decode(const void *p, size_t len)
{
	const unsigned char *s = p;
	uint32_t cp;

	if (len <= 1)
		return s[0];
	cp = s[0] & (0x7f >> len);
	for (size_t i = 1; i < len; i++)
		cp = cp << 6 | (s[i] & 0x3f);
	return cp;
}

size_t utf8_valid_len(const void *p, size_t n)
{
	const unsigned char *s = p;
	size_t len;
	uint32_t cp;

	if (n == 0)
		return 0;
	if (s[0] < 0x80)
		return 1;
	/* 0x80..0xc1 are continuation bytes or overlong 2-byte leads;
	 * 0xf5.. would encode past U+10FFFF. */
	if (s[0] < 0xc2 || s[0] > 0xf4)
		return 0;
	len = utf8_lead_len(s[0]);
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	cp = utf8_decode(s, len);
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

size_t utf8_check(const void *p, size_t n)
{
	const unsigned char *s = p;
	size_t i = 0;

	while (i < n) {
		size_t k = s[i] < 0x80 ? 1 : utf8_valid_len(s + i, n - i);

		if (k == 0)
			return i;
		i += k;
	}
	return n;
}

size_t utf8_put(uint32_t cp, char *dst)
{
	unsigned char *d = (unsigned char *)dst;

	if (cp < 0x80) {
		d[0] = (unsigned char)cp;
		return 1;
	}
	if (cp < 0x800) {
		d[0] = (unsigned char)(0xc0 | cp >> 6);
		d[1] = (unsigned char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		d[0] = (unsigned char)(0xe0 | cp >> 12);
		d[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
		d[2] = (unsigned char)(0x80 | (cp & 0x3f));
		return 3;
	}
	d[0] = (unsigned char)(0xf0 | cp >> 18);
	d[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
	d[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
	d[3] = (unsigned char)(0x80 | (cp & 0x3f));
	return 4;
}

int utf8_hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

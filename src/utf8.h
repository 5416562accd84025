/*
 * utf8.h - the one UTF-8 validator and encoder of the program.
 *
 * Valid means RFC 3629: shortest form, no surrogates (U+D800..U+DFFF),
 * nothing above U+10FFFF. Every module that must not pass broken text on
 * (JSON, the terminal, the tokenizer's stream, the store's formatting) asks
 * these functions instead of keeping its own copy.
 */
#ifndef PARLEY_UTF8_H
#define PARLEY_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Bytes of the character whose lead byte is C: 1..4 (1 for a byte that
 * cannot lead a character). */
size_t utf8_lead_len(unsigned char c);

/* Bytes (1..4) of the valid character at P with N bytes left, or 0 when it
 * is invalid, or truncated by N. N == 0 gives 0. */
size_t utf8_valid_len(const void *p, size_t n);

/* Offset of the first byte of P[0, n) where no valid character starts
 * (utf8_valid_len gives 0 there), or N when all N bytes are valid UTF-8. */
size_t utf8_check(const void *p, size_t n);

/* Decode the valid character of LEN bytes at P (from utf8_valid_len). */
uint32_t utf8_decode(const void *p, size_t len);

/* Encode CP (at most U+10FFFF) at DST, which has room for 4 bytes;
 * returns the bytes written. */
size_t utf8_put(uint32_t cp, char *dst);

/* Value of the ASCII hex digit C (0-9, a-f, A-F), or -1 (the escapes of
 * templates' strings, tokenizers' byte tokens). */
int utf8_hex_digit(char c);

#endif /* PARLEY_UTF8_H */

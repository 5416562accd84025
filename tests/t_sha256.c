/*
 * t_sha256.c - SHA-256 (sha256.h) against FIPS 180-4's examples (NIST's
 * "abc", the 448- and 896-bit messages, a million 'a'), the padding
 * boundaries (55, 56, 63, 64, 65, 119, 120 bytes, digests from Python's
 * hashlib), and the same digest however the bytes are split into calls.
 */
#include "sha256.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

/* The hex digest of N bytes at P, fed in pieces of at most STEP bytes. */
static void digest(const void *p, size_t n, size_t step, char hex[65])
{
	struct sha256 s;
	uint8_t d[SHA256_LEN];

	sha256_init(&s);
	for (size_t o = 0; o < n; o += step)
		sha256_update(&s, (const char *)p + o,
		              n - o < step ? n - o : step);
	if (n == 0)
		sha256_update(&s, "", 0);
	sha256_final(&s, d);
	sha256_hex(d, hex);
}

static void vector(const char *msg, size_t n, const char *want,
                   const char *what)
{
	char hex[65];

	digest(msg, n, n ? n : 1, hex);
	tap_ok(strcmp(hex, want) == 0, "%s: %s", what, hex);
}

int main(void)
{
	static const struct {
		size_t n;
		const char *hex;
	} as[] = {
	    {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734"
	         "318"},
	    {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec67"
	         "38a"},
	    {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2"
	         "f34"},
	    {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df15466"
	         "8eb"},
	    {65, "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0"
	         "ae0"},
	    {119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584"
	          "dcfb"},
	    {120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904"
	          "c21c"},
	};
	const char *m448 =
	    "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	const char *m896 =
	    "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn"
	    "hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
	char *a = malloc(1000000), one[65], hex[65];
	int same = 1;

	if (a == NULL)
		return 1;
	memset(a, 'a', 1000000);
	vector(
	    "", 0,
	    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	    "empty message");
	vector(
	    "abc", 3,
	    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
	    "\"abc\"");
	vector(
	    m448, strlen(m448),
	    "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
	    "448-bit message");
	vector(
	    m896, strlen(m896),
	    "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1",
	    "896-bit message");
	vector(
	    a, 1000000,
	    "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
	    "a million 'a'");
	for (size_t i = 0; i < sizeof(as) / sizeof(as[0]); i++) {
		char what[40];

		snprintf(what, sizeof(what), "%zu x 'a' (padding boundary)",
		         as[i].n);
		vector(a, as[i].n, as[i].hex, what);
	}
	/* the state between calls: every split of 0..300 bytes of varied
	   content gives the one-call digest */
	for (size_t n = 0; n <= 300 && same; n++) {
		for (size_t i = 0; i < n; i++)
			a[i] = (char)(i * 7 + n);
		digest(a, n, n ? n : 1, one);
		for (size_t step = 1; step <= 130 && same; step++) {
			digest(a, n, step, hex);
			same = strcmp(hex, one) == 0;
			if (!same)
				tap_diag(
				    "%zu bytes in steps of %zu: %s, not %s", n,
				    step, hex, one);
		}
	}
	tap_ok(same, "any split of 0..300 bytes into calls: one digest");
	memset(a, 'a', 1000000);
	digest(a, 1000000, 4093, hex);
	tap_ok(strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e0"
	                   "46d39ccc7112cd0") == 0,
	       "a million 'a' in 4093-byte calls");
	free(a);
	return tap_done();
}

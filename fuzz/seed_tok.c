/*
 * seed_tok.c - write fuzz_tok seeds: every 8th string of
 * tests/data/tok/corpus.txt, prefixed with a vocabulary-selector byte.
 *
 *   seed_tok CORPUS.txt OUTDIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	FILE *f, *o;
	char path[4096], *buf;
	long len;
	size_t off = 0, k = 0;

	if (argc != 3 || (f = fopen(argv[1], "rb")) == NULL)
		return 2;
	if (fseek(f, 0, SEEK_END) || (len = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET) || (buf = malloc((size_t)len + 1)) == NULL ||
	    fread(buf, 1, (size_t)len, f) != (size_t)len)
		return 1;
	fclose(f);
	buf[len] = 0;
	while (off < (size_t)len) {
		char *e;
		unsigned long n = strtoul(buf + off, &e, 10);
		unsigned char sel = (unsigned char)(k % 5);

		if (*e != '\n' || n > (size_t)len - (size_t)(e + 1 - buf))
			return 1;
		if (k % 8 == 0) {
			snprintf(path, sizeof(path), "%s/corpus-%04zu", argv[2],
			         k);
			if ((o = fopen(path, "wb")) == NULL)
				return 1;
			fwrite(&sel, 1, 1, o);
			fwrite(e + 1, 1, n, o);
			fclose(o);
		}
		off = (size_t)(e + 1 - buf) + n + 1;
		k++;
	}
	free(buf);
	return 0;
}

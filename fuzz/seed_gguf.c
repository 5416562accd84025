/*
 * seed_gguf.c - write seed inputs for fuzz_gguf into a directory.
 */
#include "gguf_bytes.h"

#include <stdio.h>

int main(int argc, char **argv)
{
	struct sbuf sb = SBUF_INIT;
	char path[4096];
	FILE *fp;

	if (argc != 2) {
		fprintf(stderr, "usage: seed_gguf DIR\n");
		return 2;
	}
	gb_valid(&sb);
	snprintf(path, sizeof(path), "%s/valid.gguf", argv[1]);
	fp = fopen(path, "wb");
	if (fp == NULL || fwrite(sb.buf, 1, sb.len, fp) != sb.len ||
	    fclose(fp) != 0) {
		perror(path);
		return 1;
	}
	sbuf_free(&sb);
	return 0;
}

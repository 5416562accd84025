/*
 * store_fp.c - a cheap fingerprint of a model file, stored with each
 * conversation so that resume can tell whether the same file is loaded.
 *
 * FNV-1a 64 over the file size (8 bytes, little-endian), the first 64 KiB
 * (the GGUF header and metadata) and the last 64 KiB (tensor data). Reading
 * 128 KiB costs nothing next to loading the model; it is not a content
 * hash and does not try to be one (a file edited in its middle only would
 * keep its fingerprint).
 */
#define _POSIX_C_SOURCE 200809L
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FP_SPAN (64 * 1024) /* bytes hashed at each end */

/* FNV-1a 64 of P[0..n) continuing from H. */
static uint64_t fnv1a(uint64_t h, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* Read exactly N bytes at OFF, or fail. */
static int read_at(int fd, unsigned char *buf, size_t n, off_t off)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = pread(fd, buf + got, n - got, off + (off_t)got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

int store_model_fingerprint(const char *path, char *out, size_t outlen,
                            int64_t *size, char *err, size_t errlen)
{
	unsigned char buf[FP_SPAN], sz[8];
	uint64_t h = 0xcbf29ce484222325ULL, n;
	struct stat sb;
	size_t head, tail;
	int fd = open(path, O_RDONLY);

	if (fd < 0 || fstat(fd, &sb) != 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return STORE_ERR;
	}
	n = (uint64_t)sb.st_size;
	for (int i = 0; i < 8; i++)
		sz[i] = (unsigned char)(n >> (8 * i));
	h = fnv1a(h, sz, 8);
	head = n < FP_SPAN ? (size_t)n : FP_SPAN;
	tail = n - head < FP_SPAN ? (size_t)(n - head) : FP_SPAN;
	if (read_at(fd, buf, head, 0) == 0)
		h = fnv1a(h, buf, head);
	else
		goto fail;
	if (read_at(fd, buf, tail, (off_t)(n - tail)) == 0)
		h = fnv1a(h, buf, tail);
	else
		goto fail;
	close(fd);
	snprintf(out, outlen, "fnv1a64:%016llx", (unsigned long long)h);
	if (size)
		*size = (int64_t)n;
	return STORE_OK;
fail:
	snprintf(err, errlen, "%s: read failed", path);
	close(fd);
	return STORE_ERR;
}

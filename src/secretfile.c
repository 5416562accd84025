/*
 * secretfile.c - a secret read from a file only its owner may read
 * (secretfile.h).
 */
#include "secretfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int secretfile_read(const char *label, const char *path, bool missing_ok,
                    char **out, char *err, size_t errlen)
{
	char buf[SECRETFILE_MAX];
	struct stat sb;
	size_t len = 0, b = 0;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	*out = NULL;
	if (fd < 0 && errno == ENOENT && missing_ok)
		return 0;
	if (fd < 0 || fstat(fd, &sb) != 0) {
		snprintf(err, errlen, "%s %s: %s", label, path,
		         strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (!S_ISREG(sb.st_mode) || (sb.st_mode & (S_IRWXG | S_IRWXO))) {
		snprintf(err, errlen,
		         "%s %s: %s (mode %04o), so it is not used; run chmod "
		         "600 %s",
		         label, path,
		         S_ISREG(sb.st_mode) ? "group or others may read or "
		                               "write it"
		                             : "not a regular file",
		         (unsigned)(sb.st_mode & 07777), path);
		close(fd);
		return -1;
	}
	while (len < sizeof(buf) - 1 &&
	       (n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	buf[len] = '\0';
	while (b < len && (buf[b] == ' ' || buf[b] == '\t'))
		b++;
	len = b + strcspn(buf + b, "\r\n");
	while (len > b && (buf[len - 1] == ' ' || buf[len - 1] == '\t'))
		len--;
	if (len > b && (*out = strndup(buf + b, len - b)) == NULL)
		snprintf(err, errlen, "out of memory");
	explicit_bzero(buf, sizeof(buf));
	return len > b && *out == NULL ? -1 : 0;
}

void secretfile_scrub(char *msg, size_t errlen, const char *secret,
                      const char *mask)
{
	size_t kl = secret ? strlen(secret) : 0, ml = strlen(mask);
	char *p = msg;

	if (kl < 4)
		return; /* too short to tell from ordinary text */
	while ((p = strstr(p, secret)) != NULL) {
		size_t at = (size_t)(p - msg), tail = strlen(p + kl);

		if (at + ml + 1 > errlen) {
			*p = '\0'; /* no room for the mask: cut */
			return;
		}
		if (at + ml + tail + 1 > errlen)
			tail = errlen - at - ml - 1;
		memmove(p + ml, p + kl, tail);
		memcpy(p, mask, ml);
		p[ml + tail] = '\0';
		p += ml;
	}
}

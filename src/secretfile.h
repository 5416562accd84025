/*
 * secretfile.h - a secret (an API key, a hub token) read from the first
 * line of a file that only its owner may read or write: the one reader of
 * --api-key-file (remote.c) and the Hugging Face token file (hfpull); and
 * its removal from messages.
 */
#ifndef PARLEY_SECRETFILE_H
#define PARLEY_SECRETFILE_H

#include <stdbool.h>
#include <stddef.h>

/* Bytes of a secret file that are read (the first line of them). */
#define SECRETFILE_MAX 4096

/*
 * *OUT = the first line of the file PATH, blanks trimmed at both ends (a
 * new string: wipe it before freeing), or NULL when the line is empty or,
 * with MISSING_OK, the file does not exist. Returns 0, or -1 with a
 * message naming the file as LABEL PATH ("api-key-file ...", "token file
 * ..."): it cannot be opened, it is not a regular file, its group or
 * others may read or write it (the message says to chmod 600 it), or out
 * of memory. The buffer the file was read into is wiped.
 */
int secretfile_read(const char *label, const char *path, bool missing_ok,
                    char **out, char *err, size_t errlen);

/*
 * Replace each occurrence of SECRET in the message MSG (a string in a
 * buffer of ERRLEN bytes) by MASK ("[api key]"), so that a server's echo
 * of the secret is never shown; cut where the mask does not fit. A secret
 * NULL or shorter than 4 bytes (too short to tell from ordinary text) is
 * left alone.
 */
void secretfile_scrub(char *msg, size_t errlen, const char *secret,
                      const char *mask);

#endif /* PARLEY_SECRETFILE_H */

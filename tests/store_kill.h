/*
 * store_kill.h - what the kill -9 test's writer writes, shared by
 * tests/store_writer.c and tests/store_check.c (see t_store_kill.sh).
 *
 * The reply with message id ID has store_kill_chunks(ID) chunks; chunk K
 * is " cID.K". The writer saves the text so far with store_msg_update()
 * after every STORE_KILL_SAVE_EVERY chunks, and prints "c ID K\n" to its
 * stdout once chunk K is in its text and before that save: so when chunk
 * K was printed, every save of the chunks before it was committed, and a
 * reply in progress holds at least the chunks up to the last multiple of
 * STORE_KILL_SAVE_EVERY below the printed count (the loss bound).
 * Each chunk is also one token report (store.h): chosen = K, its text the
 * chunk, a second candidate K + STORE_KILL_ALT; each save stores the
 * reports since the previous one with the text, so the checker finds
 * exactly one report per stored chunk (text and reports in step).
 */
#ifndef PARLEY_TESTS_STORE_KILL_H
#define PARLEY_TESTS_STORE_KILL_H

#include <stdint.h>
#include <stdio.h>

#define STORE_KILL_SAVE_EVERY 10   /* chunks between two saves */
#define STORE_KILL_ALT        1000 /* the second candidate's id - K */

/* How many chunks the reply ID has: 20 .. 60, a function of ID only. */
static inline int store_kill_chunks(int64_t id)
{
	return 20 + (int)(((uint64_t)id * 2654435761u) % 41);
}

/* Write chunk K of reply ID into BUF (size N); its length. */
static inline int store_kill_chunk(char *buf, size_t n, int64_t id, int k)
{
	return snprintf(buf, n, " c%lld.%d", (long long)id, k);
}

#endif

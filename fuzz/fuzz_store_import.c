/*
 * fuzz_store_import.c - libFuzzer harness for store_import_json.
 *
 * Imports the input into an in-memory store. When the import succeeds the
 * conversation is exported, imported again and exported again; the two
 * exports must be identical (the round trip is the identity), and the
 * imported conversations are deleted so memory stays bounded. A failed
 * import must leave no conversation behind.
 */
#include "store.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static struct store *st;

/* Conversations in the store (list is cheap: it is kept near empty). */
static size_t n_convs(void)
{
	struct store_conv *v;
	size_t n = 0;
	char err[256];

	if (store_conv_list(st, STORE_LIST_ARCHIVED, 0, &v, &n, err,
	                    sizeof(err)) == STORE_OK)
		store_conv_list_free(v, n);
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512], *a = NULL, *b = NULL;
	size_t la = 0, lb = 0;
	int64_t id = 0, id2 = 0;

	if (!st && store_open(":memory:", 0, &st, err, sizeof(err)) != 0)
		abort();
	if (store_import_json(st, (const char *)data, size, &id, err,
	                      sizeof(err)) != STORE_OK) {
		if (id != 0 || n_convs() != 0)
			abort(); /* a failed import wrote something */
		return 0;
	}
	if (store_export_json(st, id, &a, &la, err, sizeof(err)) != STORE_OK ||
	    store_import_json(st, a, la, &id2, err, sizeof(err)) != STORE_OK ||
	    store_export_json(st, id2, &b, &lb, err, sizeof(err)) != STORE_OK ||
	    la != lb || memcmp(a, b, la) != 0)
		abort(); /* the round trip must be the identity */
	free(a);
	free(b);
	store_conv_delete(st, id, err, sizeof(err));
	store_conv_delete(st, id2, err, sizeof(err));
	return 0;
}

/*
 * fuzz_store_reports.c - libFuzzer harness for store_reports_decode, the
 * token-report BLOB of the token_reports table (store_report.c).
 *
 * The first 2 bytes of the input are the row's n_tokens (little-endian),
 * the rest is the BLOB. A BLOB that decodes is encoded again and decoded
 * again: the second decoding must give the same reports and texts (the
 * format has one meaning); one that does not decode must leave the set
 * as it was.
 */
#include "store.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Whether A and B hold the same reports with the same token bytes. */
static int same(const struct store_reports *a, const struct store_reports *b)
{
	if (a->n != b->n)
		return 0;
	for (size_t i = 0; i < a->n; i++) {
		const struct store_tok_report *x = &a->v[i], *y = &b->v[i];

		if (x->chosen != y->chosen || x->flags != y->flags ||
		    x->n_top != y->n_top || x->text_len != y->text_len ||
		    memcmp(a->text + x->text_off, b->text + y->text_off,
		           x->text_len) != 0 ||
		    memcmp(&x->prob, &y->prob, sizeof(x->prob)) != 0)
			return 0;
		for (int32_t j = 0; j < x->n_top; j++)
			if (x->top[j].id != y->top[j].id ||
			    memcmp(&x->top[j].logit, &y->top[j].logit, 4) ||
			    memcmp(&x->top[j].logprob, &y->top[j].logprob, 4))
				return 0;
	}
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct store_reports r = {0}, r2 = {0};
	unsigned char *blob = NULL;
	size_t len = 0, n;
	char err[512];

	if (size < 2)
		return 0;
	n = (size_t)data[0] | (size_t)data[1] << 8;
	if (store_reports_decode(data + 2, size - 2, 1, n, &r, err,
	                         sizeof(err)) != STORE_OK) {
		if (r.n != 0 || r.text_len != 0)
			abort(); /* a refused BLOB appended something */
		store_reports_free(&r);
		return 0;
	}
	if (store_reports_encode(&r, 0, r.n, &blob, &len, err, sizeof(err)) !=
	        STORE_OK ||
	    store_reports_decode(blob, len, 1, n, &r2, err, sizeof(err)) !=
	        STORE_OK ||
	    !same(&r, &r2))
		abort(); /* what decodes must survive a round trip */
	free(blob);
	store_reports_free(&r);
	store_reports_free(&r2);
	return 0;
}

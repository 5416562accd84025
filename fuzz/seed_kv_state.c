/*
 * seed_kv_state.c - write fuzz_kv_state's seeds: the states the fuzzed
 * engines save after evaluating 0, 1, 3 and 8 tokens, and 16 for the
 * window engine (whose window rows then start later) (a snapshot taken
 * after the first: a recurrent model's state then carries one).
 *
 *   seed_kv_state TOP OUTDIR    (TOP: the repository, for tests/data)
 */
#include "kv_state_fuzz_check.h"

int main(int argc, char **argv)
{
	static const int32_t toks[KV_STATE_FUZZ_WCTX] = {
	    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
	/* (the window engine's also full: its window rows from later on) */
	static const int32_t counts[] = {0, 1, 3, KV_STATE_FUZZ_CTX,
	                                 KV_STATE_FUZZ_WCTX};
	struct kv_state_fuzz z;
	char err[512], path[4096];

	if (argc != 3)
		return 2;
	if (kv_state_fuzz_open(&z, argv[1], err, sizeof(err))) {
		fprintf(stderr, "seed_kv_state: %s\n", err);
		return 1;
	}
	for (int i = 0; i < KV_STATE_FUZZ_N; i++) {
		for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]);
		     c++) {
			size_t n;
			char *buf;
			FILE *fp;

			if (counts[c] > engine_n_ctx(z.e[i]))
				continue;
			engine_truncate(z.e[i], 0);
			/* (a recurrent model's state: a snapshot at 1) */
			if (counts[c] &&
			    (engine_eval(z.e[i], toks, 1, 0, err,
			                 sizeof(err)) ||
			     engine_snapshot(z.e[i], err, sizeof(err)) ||
			     (counts[c] > 1 &&
			      engine_eval(z.e[i], toks + 1, counts[c] - 1, 0,
			                  err, sizeof(err))))) {
				fprintf(stderr, "seed_kv_state: %s\n", err);
				return 1;
			}
			n = engine_state_size(z.e[i]);
			if (!(buf = malloc(n)) ||
			    engine_state_save(z.e[i], buf, n, err,
			                      sizeof(err)) != n)
				return 1;
			snprintf(path, sizeof(path), "%s/state-%d-%d", argv[2],
			         i, counts[c]);
			fp = fopen(path, "wb");
			if (!fp || fwrite(buf, 1, n, fp) != n || fclose(fp)) {
				perror(path);
				return 1;
			}
			free(buf);
		}
	}
	kv_state_fuzz_close(&z);
	return 0;
}

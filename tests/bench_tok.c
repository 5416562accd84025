/*
 * bench_tok.c - tokenizer encode speed (a tool, not a test: timings are
 * never asserted).
 *
 *   tests/bench_tok VOCAB.gguf [TEXT_FILE [MEGABYTES]]
 *
 * Encodes MEGABYTES (default 4) of TEXT_FILE (default: the GPL-3 text in
 * /usr/share/common-licenses, English prose) repeated, once as a whole and
 * once as 100 KB pastes, and prints MB/s and tokens/s of CPU time (the best
 * of 3 runs; CPU time because the dev machine's 2 cores are shared).
 * Results go to BENCHMARKS.md by hand.
 */
#include "gguf.h"
#include "tok.h"
#include "tok_util.h"

#include <time.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	const char *src =
	    argc > 2 ? argv[2] : "/usr/share/common-licenses/GPL-3";
	double mb = argc > 3 ? atof(argv[3]) : 4.0, t0 = 0, t1 = 0, t2;
	double best_paste = 0;
	int rep;
	size_t len, want, n = 0, off, paste = 100 * 1024, ntok_paste = 0;
	struct tok_ids ids = {0};
	struct gguf_file *f;
	struct tok *t;
	char err[512], *text, *big;

	if (argc < 2) {
		fprintf(stderr, "usage: %s VOCAB.gguf [TEXT [MB]]\n", argv[0]);
		return 2;
	}
	text = tu_read(src, &len);
	if (text == NULL || len == 0) {
		fprintf(stderr, "%s: cannot read\n", src);
		return 1;
	}
	want = (size_t)(mb * 1e6);
	big = malloc(want);
	if (big == NULL)
		return 1;
	while (n < want) {
		size_t k = len < want - n ? len : want - n;

		memcpy(big + n, text, k);
		n += k;
	}
	f = gguf_open(argv[1], err, sizeof(err));
	t = f ? tok_load(f, err, sizeof(err)) : NULL;
	if (t == NULL) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	for (rep = 0; rep < 3; rep++) {
		double a = now(), b, c;

		ids.n = 0;
		if (tok_encode(t, big, n, 0, &ids, err, sizeof(err))) {
			fprintf(stderr, "%s\n", err);
			return 1;
		}
		b = now();
		ntok_paste = 0;
		for (off = 0; off < n; off += paste) {
			size_t k = n - off < paste ? n - off : paste;

			ids.n = 0;
			tok_encode(t, big + off, k, 0, &ids, err, sizeof(err));
			ntok_paste += ids.n;
		}
		c = now();
		if (rep == 0 || b - a < t1 - t0) {
			t0 = a;
			t1 = b;
		}
		if (rep == 0 || c - b < best_paste)
			best_paste = c - b;
	}
	t2 = t1 + best_paste;
	printf("%s (%s/%s): %.1f MB in one call: %.3f s CPU, %.1f MB/s, %.0f "
	       "tokens/s; 100 KB pastes: %.1f MB/s, %.1f ms per paste\n",
	       argv[1], tok_model_name(t), tok_pre_name(t), n / 1e6, t1 - t0,
	       n / 1e6 / (t1 - t0), ntok_paste / (t1 - t0), n / 1e6 / (t2 - t1),
	       (t2 - t1) * 1e3 / ((n + paste - 1) / paste));
	free(ids.v);
	free(big);
	free(text);
	tok_free(t);
	gguf_close(f);
	return 0;
}

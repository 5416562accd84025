/*
 * sampler.h - choose the next token from a vector of logits.
 *
 * NOTES ON THE DESIGN
 *
 * The sampler is a pure function of (configuration, logits, token history,
 * PRNG state). It owns its PRNG (xoshiro256** seeded through splitmix64,
 * both by Blackman and Vigna), so the same seed, model and prompt give the
 * same reply on every machine; rand() is never used.
 *
 * Order of operations (llama.cpp's default chain, common/sampling.cpp:
 * penalties -> top_k -> top_p -> min_p -> temperature -> dist; the DRY,
 * top-n-sigma, typical-p and XTC stages of that chain are not implemented
 * and behave as llama.cpp's defaults, which disable them):
 *
 *   1. penalties  over the last penalty_last_n ids of the history. For a
 *                 token that occurs count > 0 times in that window
 *                 (llama.cpp, src/llama-sampling.cpp, penalties_apply):
 *                     logit = logit <= 0 ? logit * repeat_penalty
 *                                        : logit / repeat_penalty
 *                     logit -= count * frequency_penalty
 *                            + (count > 0) * presence_penalty
 *   2. greedy     if temperature <= 0: the argmax of the penalised logits
 *                 (ties: the lowest id) is returned; stages 3-6 are skipped
 *                 (they can never remove the argmax).
 *   3. top_k      keep the k largest logits (ties broken by lower id);
 *                 k <= 0 or k >= n_vocab: no-op.
 *   4. top_p      softmax (temperature 1) over what is left, sorted by
 *                 logit; keep the shortest prefix whose cumulative
 *                 probability is >= top_p (at least one token);
 *                 top_p >= 1: no-op.
 *   5. min_p      keep tokens with logit >= max_logit + ln(min_p), i.e.
 *                 p >= min_p * p_max at temperature 1 (at least one);
 *                 min_p <= 0: no-op.
 *   6. temperature logit /= temperature; then dist: softmax over the kept
 *                 tokens and one uniform draw u in [0,1) (53-bit double)
 *                 walked through the cumulative sum in candidate order.
 *
 * Cost per token: O(W log W) for a penalty window of W ids (the penalised
 * values are substituted while scanning; the caller's logits are never
 * copied or modified); greedy is one scan; top_k <= 4096 is one scan with a
 * k-entry min-heap plus O(k log k) to sort the survivors (larger k: a copy
 * and quickselect, O(V) average). With top_k disabled and top_p or min_p
 * enabled, min_p is applied first as an O(V) filter (it commutes with top_p:
 * both keep a prefix of the logit order) and top_p grows a partial
 * selection geometrically (256, 1024, ...) until the mass is reached,
 * so a full O(V log V) sort happens only for nearly flat distributions.
 *
 * Reports (struct sampler_report) are optional and cost one extra O(V)
 * pass (softmax of the raw logits) plus O(V) for the top-N selection.
 * "raw" means the logits exactly as given (before penalties, temperature
 * 1, whole vocabulary); that is what `--logprobs N` prints. "sampled" means
 * the distribution the token was actually drawn from (after penalties,
 * truncation and temperature; a single token with p = 1 when greedy).
 *
 * Invariants: 0 <= returned id < n_vocab; a NaN logit is an error (the
 * engine produced garbage) and is reported with its index; +inf is an
 * error too; -inf is a banned token. If every logit is -inf the call fails.
 */
#ifndef PARLEY_SAMPLER_H
#define PARLEY_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#define SAMPLER_MAX_PROBS 100 /* largest n_probs accepted */
#define SAMPLER_TEXT_MAX  32  /* bytes of a remote token's text, NUL incl. */

/* Sampling options; sampler_config_default() fills in the defaults below. */
struct sampler_config {
	float temperature;       /* 0.8; <= 0 means greedy */
	int32_t top_k;           /* 40; <= 0 disables */
	float top_p;             /* 0.95; >= 1 disables; must be > 0 */
	float min_p;             /* 0.05; <= 0 disables; must be <= 1 */
	float repeat_penalty;    /* 1.0 (off); must be > 0 */
	float frequency_penalty; /* 0.0 (off) */
	float presence_penalty;  /* 0.0 (off) */
	int32_t penalty_last_n;  /* 64 ids of history; 0 disables; -1 = all */
	uint64_t seed;           /* 0; the session picks one and records it */
	int32_t n_probs;         /* 0; top-N entries to report (<= MAX_PROBS) */
};

/* One reported candidate, from the raw distribution. */
struct sampler_cand {
	int32_t id;    /* token id */
	float logit;   /* raw logit as given */
	float prob;    /* softmax of the raw logits over the whole vocab */
	float logprob; /* ln(prob), computed as logit - logsumexp (no ln 0) */
};

/* What one sampling step saw; filled when a report pointer is passed. */
struct sampler_report {
	int32_t chosen;           /* the returned id */
	float chosen_prob;        /* in the sampled distribution */
	float chosen_raw_prob;    /* in the raw distribution */
	float chosen_raw_logprob; /* ln of the above */
	float entropy;            /* nats, sampled distribution */
	float raw_entropy;        /* nats, raw distribution (whole vocab) */
	int32_t n_kept;           /* candidates left after truncation */
	int32_t n_top;            /* entries used in top[] (min(n_probs, V)) */
	struct sampler_cand top[SAMPLER_MAX_PROBS]; /* by raw logit, desc */
	/* added for the debug pane (appended: the fields above keep their
	   places) */
	int32_t chosen_rank;     /* 1-based rank of the chosen id in the
	                            sampled distribution (1 when greedy) */
	int32_t chosen_raw_rank; /* 1-based rank by raw logit (ties: lower
	                            id first); 0 when unknown: a selection
	                            (sampler_sample_top) whose raw entries
	                            do not reach the chosen id */
	/* Remote models (src/remote.c) report tokens by text: their ids are
	   the server's and mean nothing here, so chosen and top[].id are -1,
	   prob/logprob come from the server's logprobs (raw and sampled the
	   same), logit = logprob, n_kept = 0 (unknown) and the entropies are
	   over the entries returned. The texts below are NUL-terminated, cut
	   at a UTF-8 character boundary; they are meaningful only where the
	   matching id is -1 (the sampler does not write them). */
	char chosen_text[SAMPLER_TEXT_MAX];
	char top_text[SAMPLER_MAX_PROBS][SAMPLER_TEXT_MAX];
};

struct sampler;

/* Fill C with the documented defaults. */
void sampler_config_default(struct sampler_config *c);

/* 0 when C is usable; otherwise -1 and a message naming the field. */
int sampler_config_check(const struct sampler_config *c, char *err,
                         size_t errlen);

/*
 * A new sampler for a vocabulary of N_VOCAB ids (1..2^30), seeded from
 * c->seed. The configuration is copied. Returns NULL with a message on a
 * bad configuration or out of memory. Free with sampler_free().
 */
struct sampler *sampler_new(const struct sampler_config *c, int32_t n_vocab,
                            char *err, size_t errlen);

/* Free S and everything it owns. NULL is allowed. */
void sampler_free(struct sampler *s);

/* Restart the PRNG from SEED (as if freshly created with that seed). */
void sampler_reseed(struct sampler *s, uint64_t seed);

/* The configuration in use (owned by S). */
const struct sampler_config *sampler_config(const struct sampler *s);

/*
 * Choose a token. LOGITS holds N_VOCAB floats (must equal the sampler's
 * n_vocab) and is not modified. HIST holds the N_HIST most recent ids of
 * the context, oldest first (prompt and generated tokens; ids outside
 * [0, n_vocab) are ignored); it may be NULL when N_HIST is 0. REP may be
 * NULL; when given it is filled (nothing in it is owned by the caller's
 * heap). Returns the id, or -1 with a message (NaN/inf logit, every logit
 * -inf, n_vocab mismatch).
 */
int32_t sampler_sample(struct sampler *s, const float *logits, int32_t n_vocab,
                       const int32_t *hist, size_t n_hist,
                       struct sampler_report *rep, char *err, size_t errlen);

/*
 * Sampling from a selection instead of the full row (engine_select: the
 * engine computes penalties, top-k and the raw row's statistics where the
 * logits are). The result is the same id, PRNG state and report as
 * sampler_sample on the full row would give (the report's floats up to
 * the rounding of the raw sums), provided the selection was made with
 * sampler_select_k() candidates, sampler_window()'s ids and this
 * sampler's penalties.
 */
struct sampler_top {
	int32_t k;          /* candidates: the k greatest penalised logits */
	const int32_t *id;  /* [k] rank order: logit desc, then lower id */
	const float *logit; /* [k] penalised logits */
	const float *raw_logit; /* [k] the same ids' raw logits */
	int32_t n_raw;          /* raw top entries (>= cfg.n_probs when the
	                           report is wanted, or all of the vocab) */
	const int32_t *raw_id;  /* [n_raw] rank order by raw logit */
	const float *raw_top;   /* [n_raw] their raw logits */
	double raw_lse;         /* ln sum exp of the whole raw row */
	double raw_entropy;     /* nats, of the whole raw row */
};

/*
 * Candidates sampler_sample_top needs: 1 when greedy, top_k when it is
 * between 1 and n_vocab - 1 and at most MAX; 0 when only the full row
 * will do (top_k disabled or >= n_vocab, or larger than MAX).
 */
int32_t sampler_select_k(const struct sampler *s, int32_t max);

/* Of N_HIST history ids, how many (the most recent) the penalties read:
   0 when every penalty is off. */
size_t sampler_window(const struct sampler *s, size_t n_hist);

/*
 * Choose a token from T (see struct sampler_top). Returns the id, or -1
 * with a message (fewer candidates than sampler_select_k asked for, or a
 * report wanted with fewer raw entries than n_probs).
 */
int32_t sampler_sample_top(struct sampler *s, const struct sampler_top *t,
                           struct sampler_report *rep, char *err,
                           size_t errlen);

/*
 * The PRNG, exposed for tests and for callers that need reproducible
 * randomness of their own: the next 64-bit output of xoshiro256**, and a
 * double uniform in [0, 1) with 53 random bits.
 */
uint64_t sampler_rng_next(struct sampler *s);
double sampler_rng_uniform(struct sampler *s);

#endif /* PARLEY_SAMPLER_H */

/*
 * t_moe_route.c - a mixture's choice of experts (model.h: model_moe_route,
 * model_moe_pin) on hand-made router logits, against values worked out
 * here: softmax then top-k (qwen3moe) with and without renormalisation,
 * top-k then softmax (gpt-oss), the weight scale, ties (the lower index
 * first, as the CPU's scan and the GPU's arg-max keep it), a dominant
 * expert, and a pinned choice: its
 * weights from these logits, what it gives up, an out-of-range id.
 */
#include <math.h>
#include <string.h>

#include "model.h"
#include "tap.h"

#define N 6

/* A mixture's FFN of N experts choosing K. */
static struct model_ffn ffn(int32_t k, enum model_moe_gating g, bool norm,
                            float scale)
{
	struct model_ffn f;

	memset(&f, 0, sizeof(f));
	f.kind = MODEL_FFN_EXPERTS;
	f.n_expert = N;
	f.n_expert_used = k;
	f.gating = g;
	f.norm_w = norm;
	f.w_scale = scale;
	return f;
}

/* Softmax of R[0..N) in double. */
static void softmax(const float *r, double *p)
{
	double mx = r[0], s = 0;

	for (int i = 1; i < N; i++)
		mx = r[i] > mx ? r[i] : mx;
	for (int i = 0; i < N; i++)
		s += p[i] = exp((double)r[i] - mx);
	for (int i = 0; i < N; i++)
		p[i] /= s;
}

static bool near(double a, double b)
{
	return fabs(a - b) <= 1e-6 * (fabs(b) > 1 ? fabs(b) : 1);
}

int main(void)
{
	const float r[N] = {0.5f, 2.0f, -1.0f, 1.25f, 2.0f, 0.0f};
	float sc[N], w[4];
	int32_t ids[4];
	double p[N];
	struct model_ffn f;

	softmax(r, p);
	/* softmax then top 3: experts 1 and 4 tie (lower index first), 3 */
	f = ffn(3, MODEL_MOE_SOFTMAX, false, 0);
	model_moe_route(&f, r, sc, ids, w);
	tap_ok(ids[0] == 1 && ids[1] == 4 && ids[2] == 3,
	       "softmax, top 3: experts %d %d %d (1 4 3: a tie keeps the lower "
	       "index first)",
	       ids[0], ids[1], ids[2]);
	tap_ok(near(w[0], p[1]) && near(w[1], p[4]) && near(w[2], p[3]),
	       "their weights are the softmax's probabilities (%.6f %.6f "
	       "%.6f)",
	       w[0], w[1], w[2]);
	f = ffn(3, MODEL_MOE_SOFTMAX, true, 0);
	model_moe_route(&f, r, sc, ids, w);
	{
		const double s = p[1] + p[4] + p[3];

		tap_ok(near(w[0], p[1] / s) && near(w[2], p[3] / s) &&
		           near((double)w[0] + w[1] + w[2], 1.0),
		       "renormalised: the three sum to 1 (%.6f %.6f %.6f)",
		       w[0], w[1], w[2]);
	}
	f = ffn(2, MODEL_MOE_SOFTMAX, true, 2.5f);
	model_moe_route(&f, r, sc, ids, w);
	tap_ok(near(w[0], 1.25) && near(w[1], 1.25),
	       "a weight scale of 2.5 after renormalising two equal ones "
	       "(%.6f %.6f)",
	       w[0], w[1]);
	/* top 2 logits, then the softmax of those two only (gpt-oss) */
	f = ffn(2, MODEL_MOE_TOPK_SOFTMAX, false, 0);
	model_moe_route(&f, r, sc, ids, w);
	tap_ok(ids[0] == 1 && ids[1] == 4 && near(w[0], 0.5) && near(w[1], 0.5),
	       "top-k then softmax: experts 1 4, weights 0.5 0.5");
	{
		const float r2[N] = {3.0f, 1.0f, -2.0f, 0.0f, 0.0f, 0.0f};
		const double e = exp(-2.0);

		f = ffn(2, MODEL_MOE_TOPK_SOFTMAX, false, 0);
		model_moe_route(&f, r2, sc, ids, w);
		tap_ok(
		    ids[0] == 0 && ids[1] == 1 && near(w[0], 1 / (1 + e)) &&
		        near(w[1], e / (1 + e)),
		    "top-k then softmax: logits 3 and 1 weigh 1/(1+e^-2) and "
		    "e^-2/(1+e^-2) (%.6f %.6f)",
		    w[0], w[1]);
	}
	{
		/* a dominant expert: the others' weights vanish */
		const float r3[N] = {0.0f,   -40.0f, -41.0f,
		                     -50.0f, -60.0f, -70.0f};

		f = ffn(3, MODEL_MOE_SOFTMAX, true, 0);
		model_moe_route(&f, r3, sc, ids, w);
		tap_ok(
		    ids[0] == 0 && ids[1] == 1 && ids[2] == 2 &&
		        near(w[0], 1.0) && w[1] < 1e-10f && w[1] > w[2],
		    "renormalised with a dominant expert: 1, then two near 0 "
		    "in order");
	}
	/* a pinned choice */
	{
		const int32_t pin[3] = {2, 5, 0};
		float dev;

		f = ffn(3, MODEL_MOE_SOFTMAX, false, 0);
		dev = model_moe_pin(&f, r, sc, pin, ids, w);
		tap_ok(ids[0] == 2 && ids[1] == 5 && ids[2] == 0 &&
		           near(w[0], p[2]) && near(w[1], p[5]) &&
		           near(w[2], p[0]),
		       "pinned to 2 5 0: those experts, their probabilities");
		tap_ok(near(dev, (p[1] + p[4] + p[3]) - (p[2] + p[5] + p[0])),
		       "what the pin gives up: the own choice's probability "
		       "minus the pinned one's (%.6f)",
		       dev);
		{
			const int32_t same[3] = {3, 1, 4}, bad[3] = {1, 99, 3};

			dev = model_moe_pin(&f, r, sc, same, ids, w);
			tap_ok(dev == 0.0f && ids[0] == 3,
			       "the own set in another order gives up nothing");
			dev = model_moe_pin(&f, r, sc, bad, ids, w);
			tap_ok(
			    ids[1] == 4 && ids[0] == 1 && ids[2] == 3,
			    "an out-of-range pinned id keeps the own choice's "
			    "(%d %d %d)",
			    ids[0], ids[1], ids[2]);
		}
	}
	return tap_done();
}

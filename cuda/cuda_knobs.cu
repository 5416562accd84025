/*
 * cuda_knobs.cu - the PARLEY_CUDA_* variables read into struct cuda_knobs
 * (cuda_knobs.h). Each is parsed exactly as the code that read it alone
 * did before, so a setting keeps its meaning.
 */
#include "cuda_knobs.h"
#include "cuda_ops.h"

#include <stdlib.h>
#include <string.h>

/* 1 when the variable NAME is set to exactly VALUE. */
static int cuda_knobs_is(const char *name, const char *value)
{
	const char *v = getenv(name);

	return v != NULL && strcmp(v, value) == 0;
}

extern "C" void cuda_knobs_read(struct cuda_knobs *k)
{
	const char *pf = getenv("PARLEY_CUDA_PREFETCH");
	const char *aw = getenv("PARLEY_CUDA_ATTN_WARP");
	const char *ku = getenv("PARLEY_CUDA_KSPLIT_UNITS");
	const char *qm = getenv("PARLEY_CUDA_QGEMM_MAX");
	char *end = NULL;
	long qv = qm != NULL ? strtol(qm, &end, 10) : -1;

	k->repack = !cuda_knobs_is("PARLEY_CUDA_REPACK", "0");
	k->graphs = !cuda_knobs_is("PARLEY_CUDA_GRAPHS", "0");
	k->pdl = !cuda_knobs_is("PARLEY_CUDA_PDL", "0");
	k->prefetch = pf == NULL ? -1 : strcmp(pf, "0") != 0;
	k->matvec_f32 = cuda_knobs_is("PARLEY_CUDA_MATVEC_F32", "1");
	k->attn_warp = aw != NULL && aw[0] == '1';
	k->attn_mma = !cuda_knobs_is("PARLEY_CUDA_ATTN_MMA", "0");
	k->lane_groups = !cuda_knobs_is("PARLEY_CUDA_LANE_GROUPS", "0");
	k->moe_fuse = !cuda_knobs_is("PARLEY_CUDA_MOE_FUSE", "0");
	k->norm_fuse = !cuda_knobs_is("PARLEY_CUDA_NORM_FUSE", "0");
	k->ksplit_units =
	    ku != NULL && ku[0] >= '1' && ku[0] <= '8' && ku[1] == '\0'
	        ? ku[0] - '0'
	        : 0;
	k->qgemm_max =
	    qm != NULL && end != qm && *end == '\0' && qv >= 0 && qv <= 1 << 20
	        ? (int)qv
	        : CUDA_QGEMM_MAX_TOKENS;
}

/* The knobs as they are now, by value (cuda_knobs' initialiser). */
static struct cuda_knobs cuda_knobs_now(void)
{
	struct cuda_knobs k;

	cuda_knobs_read(&k);
	return k;
}

extern "C" const struct cuda_knobs *cuda_knobs(void)
{
	/* a block-scope static's initialisation runs once, and a thread
	   that arrives meanwhile waits for it (C++11) */
	static const struct cuda_knobs k = cuda_knobs_now();

	return &k;
}

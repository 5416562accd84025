/*
 * cuda_knobs.h - the CUDA backend's tuning knobs from the environment
 * (C interface): every PARLEY_CUDA_* variable, parsed in one place into
 * one struct. Each knob switches a path off or on to measure one path
 * against another (BENCHMARKS.md); a knob goes once a measurement
 * settles it.
 *
 * cuda_knobs() reads the environment once, at its first call (thread-safe),
 * and returns the same values after: the ops read their knobs through it.
 * cuda_knobs_read() reads it now, for a caller whose knobs must follow
 * the environment from one engine to the next in one process (the
 * backend's open: t_cuda_engine switches PARLEY_CUDA_GRAPHS, _PDL and
 * _REPACK between engines with setenv).
 */
#ifndef PARLEY_CUDA_KNOBS_H
#define PARLEY_CUDA_KNOBS_H

#ifdef __cplusplus
extern "C" {
#endif

/* The knobs; each field names its variable and how the value is read. */
struct cuda_knobs {
	/* PARLEY_CUDA_REPACK: 0 when it is "0" (weights keep the file's
	   layout, cuda_repack.cu), else 1 */
	int repack;
	/* PARLEY_CUDA_GRAPHS: 0 when it is "0" (each decode step's kernels
	   launched one by one), else 1 (CUDA graphs) */
	int graphs;
	/* PARLEY_CUDA_PDL: 0 when it is "0" (plain stream order, no
	   programmatic dependent launch: cuda_launch.cuh), else 1 */
	int pdl;
	/* PARLEY_CUDA_PREFETCH: -1 when unset (the backend's size rule),
	   0 when it is "0" (no product prefetches its rows), 1 for any other
	   value (every product does) */
	int prefetch;
	/* PARLEY_CUDA_MATVEC_F32: 1 when it is "1" (the mat-vec keeps fp32
	   activations: cuda_x8_types() is 0), else 0 */
	int matvec_f32;
	/* PARLEY_CUDA_ATTN_WARP: 1 when its first character is '1' (a batch
	   of queries goes through the one-warp attention kernel instead of
	   the tiled one, cuda_attn.cu), else 0 */
	int attn_warp;
	/* PARLEY_CUDA_ATTN_MMA: 0 when it is "0" (a batch of queries with a
	   head of 64 or 128 takes the fp32 tiled kernel instead of the
	   tensor-core one, cuda_attn_mma.cuh), else 1 */
	int attn_mma;
	/* PARLEY_CUDA_KSPLIT_UNITS: the units each lane must keep for the
	   mat-vec to split a row group's units over 2 or 4 warps
	   (cuda_matmul.cu cm_ks): its value when it is 1 to 8, else 0 (the
	   rule's own, by the unit's size) */
	int ksplit_units;
	/* PARLEY_CUDA_QGEMM_MAX: batches of up to this many tokens take the
	   quantized GEMM (cuda_qgemm.cu) instead of cuBLAS: its value when
	   it is a decimal number (0: never), else CUDA_QGEMM_MAX_TOKENS */
	int qgemm_max;
	/* PARLEY_CUDA_LANE_GROUPS: 0 when it is "0" (every mat-vec row group
	   a whole warp, cuda_ctx.h lanes_off), else 1 */
	int lane_groups;
	/* PARLEY_CUDA_MOE_FUSE: 0 when it is "0" (a mixture's gated product
	   with biases and its down product with the weighted sum in separate
	   launches, cuda_ctx.h moe_fuse_off), else 1 */
	int moe_fuse;
	/* PARLEY_CUDA_NORM_FUSE: 0 when it is "0" (a post-norm's add and a
	   layer's output scale, a norm and the add after it, in separate
	   launches, cuda_ctx.h norm_fuse_off), else 1 */
	int norm_fuse;
};

/* Fill *K from the environment as it is now. */
void cuda_knobs_read(struct cuda_knobs *k);

/* The knobs as the environment had them at the first call; the same
 * static struct for the life of the process (never NULL, not to be
 * freed). Safe to call from several threads at once. */
const struct cuda_knobs *cuda_knobs(void);

#ifdef __cplusplus
}
#endif

#endif /* PARLEY_CUDA_KNOBS_H */

/*
 * cuda_tail.cuh - the last block of a group: where a kernel's blocks
 * write parts of a result and one more step needs all of them (a
 * mixture's routing after the router's logits, the weighted sum of the
 * experts after their down products), the last block of the group to
 * finish does that step in the same launch instead of a launch of its own
 * (a decode step of a mixture is bound by its ~13 launches a layer, not
 * by its bytes: BENCHMARKS.md, issue 30).
 *
 * NOTES ON THE DESIGN
 *
 * Every thread fences its writes (__threadfence: visible to the whole
 * GPU before what follows), the block meets, and thread 0 adds one to
 * the group's counter (cuda_ctx.d_count, zeroed once at init); the block
 * that brings it to N is the last of the N and puts the counter back to 0
 * for the next launch (no other block of this launch touches it again; a
 * later kernel only after its PDL wait, which follows this launch's end).
 * The last block then reads the others' results past L1 (__ldcg: L1 is
 * not coherent between multiprocessors, L2 is where their writes meet).
 * The step it does is the separate kernel's arithmetic in the same order,
 * so the results are the same bits whichever block comes last.
 *
 * A kernel that uses it must bring every thread of every block to the
 * call (no early return), since the block meets at a barrier.
 */
#ifndef PARLEY_CUDA_TAIL_CUH
#define PARLEY_CUDA_TAIL_CUH

/* True in every thread of the block that finishes the group of N blocks
 * counted at *COUNT last (the counter is then 0 again). */
static __device__ __forceinline__ bool cu_last_block(unsigned *count,
                                                     unsigned n)
{
	__shared__ bool last;

	__threadfence();
	__syncthreads();
	if (threadIdx.x == 0) {
		last = atomicAdd(count, 1u) == n - 1;
		if (last)
			*count = 0;
	}
	__syncthreads();
	if (last)
		__threadfence();
	return last;
}

#endif /* PARLEY_CUDA_TAIL_CUH */

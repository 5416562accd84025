/*
 * bench/barrier_cost.cu - what a dependent step costs on this GPU: a
 * kernel boundary inside a CUDA graph (with and without programmatic
 * dependent launch, as the decode step's ~300 kernels are replayed)
 * against a grid-wide barrier inside one persistent kernel (a software
 * barrier on a global counter, and cooperative groups' grid sync).
 *
 * The decode step of a small model is a chain of dependent steps whose
 * work is tiny (SmolLM2: 96 MB of weights over ~300 kernels, 0.1 us of
 * bandwidth each at 3 TB/s, ~2.3 us each measured), so this per-step
 * cost is what bounds it; a persistent kernel pays off only where its
 * barrier is markedly cheaper than a kernel boundary. Every step here is
 * a real dependency: block b reads what block b + 1 wrote in the step
 * before, so no step can start before the previous one has finished
 * everywhere. Standalone (no parley code); bench/barrier-cost.sh builds
 * and runs it on the GPU machine.
 */
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>

namespace cg = cooperative_groups;

#define CK(x)                                                                  \
	do {                                                                   \
		cudaError_t e_ = (x);                                          \
		if (e_ != cudaSuccess) {                                       \
			fprintf(stderr, "barrier_cost: %s: %s\n", #x,          \
			        cudaGetErrorString(e_));                       \
			exit(1);                                               \
		}                                                              \
	} while (0)

#define THREADS 256

/* One dependent step: block b's value from block b + 1's of the last step
 * (IN), into OUT. */
static __device__ __forceinline__ void dep_step(const float *in, float *out,
                                                int nb)
{
	if (threadIdx.x == 0)
		out[blockIdx.x] = in[(blockIdx.x + 1) % nb] + 1.0f;
}

/* A kernel of the graph: PDL's wait and trigger first, as parley's
 * kernels do (cuda_launch.cuh), then the step. */
__global__ void step_kernel(const float *in, float *out, int nb)
{
	asm volatile("griddepcontrol.wait;" ::: "memory");
	asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
	dep_step(in, out, nb);
}

/* A software grid barrier: arrive on COUNT, the last block resets it and
 * advances GEN; the others wait for GEN to move. GEN is read before the
 * arrival, so its advance cannot be missed. */
static __device__ __forceinline__ void grid_barrier(unsigned *count,
                                                    unsigned *gen, unsigned nb)
{
	__syncthreads();
	if (threadIdx.x == 0) {
		volatile unsigned *vg = gen;
		const unsigned g = *vg;

		__threadfence();
		if (atomicAdd(count, 1u) == nb - 1) {
			*count = 0;
			__threadfence();
			atomicAdd(gen, 1u);
		} else {
			while (*vg == g)
				;
		}
		__threadfence();
	}
	__syncthreads();
}

__global__ void persistent_sw(float *a, float *b, int nb, int steps,
                              unsigned *count, unsigned *gen)
{
	for (int s = 0; s < steps; s++) {
		dep_step(s & 1 ? b : a, s & 1 ? a : b, nb);
		grid_barrier(count, gen, (unsigned)nb);
	}
}

/* Dataflow instead of a barrier: block b waits only for the block it
 * reads (its flag at the step's number), as a persistent kernel whose
 * stages start on per-tile flags would. */
__global__ void persistent_flags(float *a, float *b, int nb, int steps,
                                 unsigned *flags, unsigned base)
{
	const int src = (blockIdx.x + 1) % nb;
	volatile unsigned *vf = flags;

	for (int s = 0; s < steps; s++) {
		if (threadIdx.x == 0 && s > 0) {
			while (vf[src] < base + (unsigned)s)
				;
			__threadfence();
		}
		__syncthreads();
		dep_step(s & 1 ? b : a, s & 1 ? a : b, nb);
		__syncthreads();
		if (threadIdx.x == 0) {
			__threadfence();
			vf[blockIdx.x] = base + (unsigned)s + 1;
		}
	}
}

__global__ void persistent_cg(float *a, float *b, int nb, int steps)
{
	cg::grid_group grid = cg::this_grid();

	for (int s = 0; s < steps; s++) {
		dep_step(s & 1 ? b : a, s & 1 ? a : b, nb);
		grid.sync();
	}
}

/* Microseconds per step of a graph of STEPS kernels of NB blocks. */
static double graph_us(int nb, int steps, bool pdl, cudaStream_t st, float *a,
                       float *b)
{
	cudaGraph_t g;
	cudaGraphExec_t ge;
	cudaEvent_t e0, e1;
	float ms = 0;
	const int reps = 20;

	CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
	for (int s = 0; s < steps; s++) {
		cudaLaunchConfig_t cfg = {};
		cudaLaunchAttribute attr[1] = {};

		cfg.gridDim = dim3((unsigned)nb);
		cfg.blockDim = dim3(THREADS);
		cfg.stream = st;
		if (pdl) {
			attr[0].id =
			    cudaLaunchAttributeProgrammaticStreamSerialization;
			attr[0].val.programmaticStreamSerializationAllowed = 1;
			cfg.attrs = attr;
			cfg.numAttrs = 1;
		}
		CK(cudaLaunchKernelEx(&cfg, step_kernel,
		                      (const float *)(s & 1 ? b : a),
		                      s & 1 ? a : b, nb));
	}
	CK(cudaStreamEndCapture(st, &g));
	CK(cudaGraphInstantiate(&ge, g, 0));
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	CK(cudaGraphLaunch(ge, st)); /* warm */
	CK(cudaEventRecord(e0, st));
	for (int r = 0; r < reps; r++)
		CK(cudaGraphLaunch(ge, st));
	CK(cudaEventRecord(e1, st));
	CK(cudaEventSynchronize(e1));
	CK(cudaEventElapsedTime(&ms, e0, e1));
	CK(cudaGraphExecDestroy(ge));
	CK(cudaGraphDestroy(g));
	CK(cudaEventDestroy(e0));
	CK(cudaEventDestroy(e1));
	return ms * 1e3 / reps / steps;
}

/* Microseconds per step of one persistent kernel of NB blocks (KIND 0:
 * the software barrier, 1: grid sync, 2: per-block flags). */
static double persistent_us(int nb, int steps, int kind, cudaStream_t st,
                            float *a, float *b, unsigned *sync)
{
	cudaEvent_t e0, e1;
	float ms = 0;
	const int reps = 20;
	unsigned *count = sync, *gen = sync + 1;
	void *args_sw[] = {&a, &b, &nb, &steps, &count, &gen};
	void *args_cg[] = {&a, &b, &nb, &steps};
	unsigned *flags = sync + 2, base = 0;
	void *args_fl[] = {&a, &b, &nb, &steps, &flags, &base};

	CK(cudaMemsetAsync(flags, 0, 4096 * sizeof(unsigned), st));

	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	for (int r = 0; r <= reps; r++) {
		if (r == 1)
			CK(cudaEventRecord(e0, st)); /* after one warm run */
		void *fn = kind == 1   ? (void *)persistent_cg
		           : kind == 2 ? (void *)persistent_flags
		                       : (void *)persistent_sw;

		CK(cudaLaunchCooperativeKernel(fn, dim3((unsigned)nb),
		                               dim3(THREADS),
		                               kind == 1   ? args_cg
		                               : kind == 2 ? args_fl
		                                           : args_sw,
		                               0, st));
		base += (unsigned)steps; /* the flags of the next run */
	}
	CK(cudaEventRecord(e1, st));
	CK(cudaEventSynchronize(e1));
	CK(cudaEventElapsedTime(&ms, e0, e1));
	CK(cudaEventDestroy(e0));
	CK(cudaEventDestroy(e1));
	return ms * 1e3 / reps / steps;
}

int main(int argc, char **argv)
{
	const int steps = argc > 1 ? atoi(argv[1]) : 300;
	cudaDeviceProp p;
	cudaStream_t st;
	float *a, *b;
	unsigned *sync;
	int per_sm = 0;

	CK(cudaGetDeviceProperties(&p, 0));
	CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, persistent_sw,
	                                                 THREADS, 0));
	CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	CK(cudaMalloc(&a, 4096 * sizeof(float)));
	CK(cudaMalloc(&b, 4096 * sizeof(float)));
	CK(cudaMalloc(&sync, (2 + 4096) * sizeof(unsigned)));
	CK(cudaMemset(a, 0, 4096 * sizeof(float)));
	CK(cudaMemset(b, 0, 4096 * sizeof(float)));
	CK(cudaMemset(sync, 0, (2 + 4096) * sizeof(unsigned)));
	printf("device: %s, %d SMs; %d dependent steps, %d threads a "
	       "block\n",
	       p.name, p.multiProcessorCount, steps, THREADS);
	for (int k = 1; k <= 2 && k <= per_sm; k++) {
		const int nb = k * p.multiProcessorCount;

		printf("%4d blocks: graph kernel %.2f us (PDL) %.2f us (no "
		       "PDL); persistent kernel %.2f us (software barrier) "
		       "%.2f us (grid sync) %.2f us (per-block flags)\n",
		       nb, graph_us(nb, steps, true, st, a, b),
		       graph_us(nb, steps, false, st, a, b),
		       persistent_us(nb, steps, 0, st, a, b, sync),
		       persistent_us(nb, steps, 1, st, a, b, sync),
		       persistent_us(nb, steps, 2, st, a, b, sync));
	}
	return 0;
}

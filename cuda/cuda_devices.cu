/*
 * cuda_devices.cu - what the CUDA devices are (`parley devices`: name,
 * compute capability, memory, datasheet bandwidth) and how fast device
 * memory reads, measured (`parley bench`'s bandwidth, the limit every
 * decode figure is a share of).
 */
#include "cuda_check.cuh"
#include "cuda_devices.h"
#include "cuda_launch.cuh"

#include <float.h>
#include <string.h>

extern "C" int cuda_devices_count(int *n, char *err, size_t errlen)
{
	cudaError_t rc = cudaGetDeviceCount(n);

	/* No driver or no device is a normal situation for a CPU-only
	 * machine: report zero devices, not an error. */
	if (rc == cudaErrorNoDevice || rc == cudaErrorInsufficientDriver) {
		(void)cudaGetLastError();
		*n = 0;
		return 0;
	}
	CUDA_TRY(rc, err, errlen);
	return 0;
}

extern "C" int cuda_devices_get(int i, struct cuda_device_info *info, char *err,
                                size_t errlen)
{
	cudaDeviceProp p;
	int clock_khz = 0, bus_bits = 0;

	memset(info, 0, sizeof(*info));
	CUDA_TRY(cudaGetDeviceProperties(&p, i), err, errlen);
	snprintf(info->name, sizeof(info->name), "%s", p.name);
	info->major = p.major;
	info->minor = p.minor;
	info->sm_count = p.multiProcessorCount;
	info->global_mem = p.totalGlobalMem;
	/* memoryClockRate left cudaDeviceProp in CUDA 13: ask attributes. */
	CUDA_TRY(
	    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, i),
	    err, errlen);
	CUDA_TRY(cudaDeviceGetAttribute(&bus_bits,
	                                cudaDevAttrGlobalMemoryBusWidth, i),
	         err, errlen);
	/* Double data rate: 2 transfers per clock, bus_bits/8 bytes each. */
	info->peak_bw_gbs = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;
	CUDA_TRY(cudaDriverGetVersion(&info->driver_version), err, errlen);
	CUDA_TRY(cudaRuntimeGetVersion(&info->runtime_version), err, errlen);
	return 0;
}

/* ---------------------------------------------------- read bandwidth */

/* Sum of 16-byte words, grid-stride; one partial per block. */
__global__ static void dev_bw_read(const uint4 *p, size_t n, unsigned *out)
{
	unsigned acc = 0;

	cu_pdl_sync(); /* launched ordinarily; the rule of cuda_launch.cuh */
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		uint4 v = p[i];

		acc += v.x ^ v.y ^ v.z ^ v.w;
	}
	if (acc == 0x9e3779b9u) /* almost never: keeps the loads alive */
		out[blockIdx.x] = acc;
}

/* Measure; see cuda_devices.h. */
extern "C" int cuda_read_bandwidth(double *bytes_per_s, char *err,
                                   size_t errlen)
{
	size_t bytes = (size_t)1 << 30;
	void *buf = NULL;
	unsigned *out = NULL;
	cudaEvent_t a = NULL, b = NULL;
	cudaError_t rc_buf = cudaSuccess;
	int sms = 0, rc = -1;
	float ms, best = FLT_MAX;

	/* 1 GiB, or less when the model left little memory free */
	while (bytes >= ((size_t)64 << 20) &&
	       (rc_buf = cudaMalloc(&buf, bytes)) != cudaSuccess) {
		(void)cudaGetLastError();
		buf = NULL;
		bytes /= 2;
	}
	if (buf == NULL) {
		snprintf(err, errlen,
		         "no GPU memory left to measure bandwidth (64 MiB): "
		         "%s (%s)",
		         cudaGetErrorName(rc_buf), cudaGetErrorString(rc_buf));
		return -1;
	}
	if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) !=
	        cudaSuccess ||
	    cudaMalloc((void **)&out, (size_t)sms * 8 * sizeof(unsigned)) !=
	        cudaSuccess ||
	    cudaMemset(buf, 1, bytes) != cudaSuccess ||
	    cudaEventCreate(&a) != cudaSuccess ||
	    cudaEventCreate(&b) != cudaSuccess)
		goto out;
	for (int pass = 0; pass < 6; pass++) {
		cudaEventRecord(a, 0);
		cu_launch_on(0, 0, dev_bw_read, sms * 8, 512, 0,
		             (const uint4 *)buf, bytes / 16, out);
		cudaEventRecord(b, 0);
		if (cudaEventSynchronize(b) != cudaSuccess ||
		    cudaEventElapsedTime(&ms, a, b) != cudaSuccess)
			goto out;
		if (pass > 0 && ms < best) /* pass 0 warms up */
			best = ms;
	}
	*bytes_per_s = (double)bytes / (best * 1e-3);
	rc = 0;
out:
	if (rc != 0)
		snprintf(err, errlen, "bandwidth measurement: %s",
		         cudaGetErrorString(cudaGetLastError()));
	if (a)
		cudaEventDestroy(a);
	if (b)
		cudaEventDestroy(b);
	cudaFree(out);
	cudaFree(buf);
	return rc;
}

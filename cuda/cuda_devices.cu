/*
 * cuda_devices.cu - enumerate CUDA devices for `parley devices`.
 *
 * The first occupant of cuda/: the CUDA backend's kernels join it behind
 * the engine interface (src/engine.h) in a later change.
 */
#include "cuda_check.cuh"
#include "cuda_devices.h"

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

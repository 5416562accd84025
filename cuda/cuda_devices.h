/*
 * cuda_devices.h - what CUDA devices are present (C interface).
 *
 * The numbers matter for performance reports: every decode figure is given
 * as a share of the memory-bandwidth limit, whose datasheet value is
 * computed here from the memory clock and bus width; cuda_read_bandwidth
 * measures it (`parley bench`).
 */
#ifndef PARLEY_CUDA_DEVICES_H
#define PARLEY_CUDA_DEVICES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct cuda_device_info {
	char name[256];      /* e.g. "NVIDIA H100 80GB HBM3" */
	int major, minor;    /* compute capability */
	int sm_count;        /* streaming multiprocessors */
	uint64_t global_mem; /* bytes of device memory */
	double peak_bw_gbs;  /* datasheet HBM bandwidth, GB/s (1e9) */
	int driver_version;  /* e.g. 13000 */
	int runtime_version; /* e.g. 13000 */
};

/*
 * Number of CUDA devices in *n (0 when there is no driver or no GPU: that
 * is not an error). Returns 0, or -1 with a message in err when the
 * runtime fails in another way.
 */
int cuda_devices_count(int *n, char *err, size_t errlen);

/* Fill *info for device I. Returns 0, or -1 with a message in err. */
int cuda_devices_get(int i, struct cuda_device_info *info, char *err,
                     size_t errlen);

/*
 * Read bandwidth of device memory: the best of a few passes of a
 * read-only reduction over a buffer far larger than the L2 cache (1 GiB,
 * or half as much while the allocation fails, down to 64 MiB). Returns 0
 * with *BYTES_PER_S, or -1 with a message (the CUDA error).
 */
int cuda_read_bandwidth(double *bytes_per_s, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* PARLEY_CUDA_DEVICES_H */

/*
 * cmd_devices.c - `parley devices`: the compute devices this build can use.
 */
#include "cmd.h"

#ifdef PARLEY_HAVE_CUDA
#include "cuda_devices.h"
#endif

#include <stdio.h>
#include <string.h>

int cmd_devices(int argc, char **argv)
{
	if (argc > 1 &&
	    (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		puts("usage: parley devices\n"
		     "List the backends of this build and the CUDA devices "
		     "present.");
		return 0;
	}
	if (argc > 1) {
		fprintf(stderr, "usage: parley devices\n");
		return 2;
	}
	puts("cpu     the reference backend (always available)");
#ifdef PARLEY_HAVE_CUDA
	{
		struct cuda_device_info info;
		char err[512];
		int n;

		if (cuda_devices_count(&n, err, sizeof(err)) != 0) {
			fprintf(stderr, "parley: CUDA: %s\n", err);
			return 1;
		}
		if (n == 0)
			puts("cuda    built in; no CUDA device found");
		for (int i = 0; i < n; i++) {
			if (cuda_devices_get(i, &info, err, sizeof(err)) != 0) {
				fprintf(stderr, "parley: CUDA: %s\n", err);
				return 1;
			}
			printf("cuda:%d  %s, compute %d.%d, %d SMs, %.1f GiB, "
			       "memory bandwidth %.0f GB/s (datasheet), "
			       "driver %d, runtime %d\n",
			       i, info.name, info.major, info.minor,
			       info.sm_count,
			       (double)info.global_mem / 1073741824.0,
			       info.peak_bw_gbs, info.driver_version,
			       info.runtime_version);
		}
	}
#else
	puts("cuda    not built (configure found no CUDA toolkit, or "
	     "--without-cuda)");
#endif
	return 0;
}

/*
 * cuda_check.cuh - the one CUDA error macro of the CUDA backend.
 *
 * CUDA_TRY(call, err, errlen) evaluates a CUDA runtime call; on failure it
 * writes "function file:line: call: errorName (errorString)" into err and
 * returns -1 from the enclosing function. Backend code returns errors up to
 * the engine layer, which shows them; nothing here prints or exits.
 * CUDA_TRY_LAUNCH checks cudaGetLastError() after a kernel launch, and in
 * debug builds (PARLEY_DEBUG) also synchronises so that an asynchronous
 * fault is reported at the launch that caused it.
 * CUBLAS_TRY does the same for a cuBLAS call (status name from
 * cublasGetStatusName).
 */
#ifndef PARLEY_CUDA_CHECK_CUH
#define PARLEY_CUDA_CHECK_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>

#define CUDA_TRY(call, err, errlen)                                            \
	do {                                                                   \
		cudaError_t cuda_try_rc_ = (call);                             \
		if (cuda_try_rc_ != cudaSuccess) {                             \
			snprintf((err), (errlen), "%s %s:%d: %s: %s (%s)",     \
			         __func__, __FILE__, __LINE__, #call,          \
			         cudaGetErrorName(cuda_try_rc_),               \
			         cudaGetErrorString(cuda_try_rc_));            \
			return -1;                                             \
		}                                                              \
	} while (0)

#ifdef PARLEY_DEBUG
#define CUDA_TRY_LAUNCH(err, errlen)                                           \
	do {                                                                   \
		CUDA_TRY(cudaGetLastError(), err, errlen);                     \
		CUDA_TRY(cudaDeviceSynchronize(), err, errlen);                \
	} while (0)
#else
#define CUDA_TRY_LAUNCH(err, errlen) CUDA_TRY(cudaGetLastError(), err, errlen)
#endif

#define CUBLAS_TRY(call, err, errlen)                                          \
	do {                                                                   \
		cublasStatus_t cublas_try_rc_ = (call);                        \
		if (cublas_try_rc_ != CUBLAS_STATUS_SUCCESS) {                 \
			snprintf((err), (errlen), "%s %s:%d: %s: %s",          \
			         __func__, __FILE__, __LINE__, #call,          \
			         cublasGetStatusName(cublas_try_rc_));         \
			return -1;                                             \
		}                                                              \
	} while (0)

#endif /* PARLEY_CUDA_CHECK_CUH */

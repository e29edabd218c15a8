/*
 * The CUDA driver, loaded at run time.
 *
 * Nothing in moetune links libcuda: binaries must start on machines without a
 * GPU or driver (CI, build hosts). mt_cuda_load() dlopens libcuda.so.1 once
 * and fills the table `mt_cu` with the entry points listed below; a missing
 * driver is MT_ERR_NO_DRIVER and a driver without a GPU MT_ERR_NO_DEVICE,
 * each with a message. Everything that talks to the GPU (tuner, runtime,
 * GPU tests) goes through this one layer.
 *
 * May call: libc, dlopen. Called by: tuner, runtime, tests.
 */
#ifndef MT_COMMON_CUDA_DRIVER_H
#define MT_COMMON_CUDA_DRIVER_H

#include <cuda.h>
#include <stddef.h>
#include "moetune/status.h"

/* X(name, symbol): `name` is the C name (cuda.h may macro it to a _v2
 * symbol), `symbol` the exported symbol we look up. */
#define MT_CUDA_DRIVER_FUNCS(X)                                   \
    X(cuInit, "cuInit")                                           \
    X(cuDriverGetVersion, "cuDriverGetVersion")                   \
    X(cuDeviceGetCount, "cuDeviceGetCount")                       \
    X(cuDeviceGet, "cuDeviceGet")                                 \
    X(cuDeviceGetName, "cuDeviceGetName")                         \
    X(cuDeviceGetAttribute, "cuDeviceGetAttribute")               \
    X(cuDeviceTotalMem, "cuDeviceTotalMem_v2")                    \
    X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")       \
    X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2")  \
    X(cuCtxSetCurrent, "cuCtxSetCurrent")                         \
    X(cuCtxGetCurrent, "cuCtxGetCurrent")                         \
    X(cuCtxGetDevice, "cuCtxGetDevice")                           \
    X(cuCtxSynchronize, "cuCtxSynchronize")                       \
    X(cuGetErrorName, "cuGetErrorName")                           \
    X(cuGetErrorString, "cuGetErrorString")                       \
    X(cuModuleLoadData, "cuModuleLoadData")                       \
    X(cuModuleUnload, "cuModuleUnload")                           \
    X(cuModuleGetFunction, "cuModuleGetFunction")                 \
    X(cuModuleGetGlobal, "cuModuleGetGlobal_v2")                  \
    X(cuFuncSetAttribute, "cuFuncSetAttribute")                   \
    X(cuFuncGetAttribute, "cuFuncGetAttribute")                   \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor,                \
      "cuOccupancyMaxActiveBlocksPerMultiprocessor")              \
    X(cuLaunchKernel, "cuLaunchKernel")                           \
    X(cuMemAlloc, "cuMemAlloc_v2")                                \
    X(cuMemFree, "cuMemFree_v2")                                  \
    X(cuMemAllocHost, "cuMemAllocHost_v2")                        \
    X(cuMemFreeHost, "cuMemFreeHost")                             \
    X(cuMemcpyHtoD, "cuMemcpyHtoD_v2")                            \
    X(cuMemcpyDtoH, "cuMemcpyDtoH_v2")                            \
    X(cuMemcpyDtoD, "cuMemcpyDtoD_v2")                            \
    X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2")                  \
    X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2")                  \
    X(cuMemsetD8, "cuMemsetD8_v2")                                \
    X(cuMemsetD8Async, "cuMemsetD8Async")                         \
    X(cuMemsetD32Async, "cuMemsetD32Async")                       \
    X(cuMemGetInfo, "cuMemGetInfo_v2")                            \
    X(cuStreamCreate, "cuStreamCreate")                           \
    X(cuStreamDestroy, "cuStreamDestroy_v2")                      \
    X(cuStreamSynchronize, "cuStreamSynchronize")                 \
    X(cuStreamQuery, "cuStreamQuery")                             \
    X(cuStreamBeginCapture, "cuStreamBeginCapture_v2")            \
    X(cuStreamEndCapture, "cuStreamEndCapture")                   \
    X(cuStreamIsCapturing, "cuStreamIsCapturing")                 \
    X(cuGraphInstantiate, "cuGraphInstantiateWithFlags")          \
    X(cuGraphLaunch, "cuGraphLaunch")                             \
    X(cuGraphExecDestroy, "cuGraphExecDestroy")                   \
    X(cuGraphDestroy, "cuGraphDestroy")                           \
    X(cuEventCreate, "cuEventCreate")                             \
    X(cuEventDestroy, "cuEventDestroy_v2")                        \
    X(cuEventRecord, "cuEventRecord")                             \
    X(cuEventSynchronize, "cuEventSynchronize")                   \
    X(cuEventQuery, "cuEventQuery")                               \
    X(cuEventElapsedTime, "cuEventElapsedTime_v2")

/* Entry points of newer drivers, NULL where the driver lacks them: callers
 * check (CUDA 12: cuLaunchKernelEx for programmatic dependent launch,
 * cuTensorMapEncodeTiled for the TMA descriptors of BLOAD=tma kernels,
 * cuOccupancyMaxActiveClusters for the grid of CTA-pair kernels). */
#define MT_CUDA_DRIVER_OPTIONAL(X)                                   \
    X(cuLaunchKernelEx, "cuLaunchKernelEx")                          \
    X(cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled")              \
    X(cuOccupancyMaxActiveClusters, "cuOccupancyMaxActiveClusters")

typedef struct mt_cuda_driver {
#define MT_CU_FIELD(name, sym) __typeof__(name) *name;
    MT_CUDA_DRIVER_FUNCS(MT_CU_FIELD)
    MT_CUDA_DRIVER_OPTIONAL(MT_CU_FIELD)
#undef MT_CU_FIELD
} mt_cuda_driver;

/* The table; valid after mt_cuda_load() returned MT_OK. */
extern mt_cuda_driver mt_cu;

/*
 * Load libcuda.so.1 and cuInit it (once per process, thread-safe). Returns
 * MT_OK, MT_ERR_NO_DRIVER or MT_ERR_NO_DEVICE; the reason is copied to msg.
 */
mt_status mt_cuda_load(char *msg, size_t msg_size);

/* Describe a CUresult as "CUDA_ERROR_X: text" into buf; returns buf. */
const char *mt_cuda_error_text(CUresult r, char *buf, size_t size);

/* Map a CUresult to a moetune status (faults -> MT_ERR_KERNEL_FAULT). */
mt_status mt_cuda_status(CUresult r);

/* Record a failed driver call (statement, file, line, error) into msg and
 * return its status. Used through MT_CU_TRY. */
mt_status mt_cu_fail(CUresult r, const char *stmt, const char *file, int line, char *msg,
                     size_t msg_size);

/* Run a driver call; on failure set `st`, describe it in (msg, msg_size) and
 * jump to the function's `fail` label. */
#define MT_CU_TRY(call, msg, msg_size)                                            \
    do {                                                                          \
        CUresult mt_r_ = (call);                                                  \
        if (mt_r_ != CUDA_SUCCESS) {                                              \
            st = mt_cu_fail(mt_r_, #call, __FILE__, __LINE__, (msg), (msg_size)); \
            goto fail;                                                            \
        }                                                                         \
    } while (0)

/* A device and its retained primary context, plus what it is. */
typedef struct mt_gpu {
    CUdevice dev;
    CUcontext ctx;
    int ordinal;
    int cc_major, cc_minor;
    int sm_count;
    int mem_clock_khz;
    int driver_version;
    size_t max_smem_optin;   /* per block, bytes */
    char name[128];
} mt_gpu;

/* Open GPU `ordinal`, retain its primary context and make it current.
 * MT_ERR_UNSUPPORTED (nothing kept open) for a GPU that no kernel of this
 * build runs on (mt_gpu_arch). */
mt_status mt_gpu_open(int ordinal, mt_gpu *gpu, char *msg, size_t msg_size);
/* Release the primary context; a zeroed or NULL gpu is a no-op. */
void mt_gpu_close(mt_gpu *gpu);

/* The arch string NVRTC wants for this GPU: "sm_90a", "sm_80", ...; NULL
 * where this build has none (compute capability below 8.0 or from 10.0 on,
 * which mt_gpu_open refuses). */
const char *mt_gpu_arch(const mt_gpu *gpu);

#endif

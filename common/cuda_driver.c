/*
 * Run-time loading of the CUDA driver (see cuda_driver.h).
 */
#include "common/cuda_driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"

mt_cuda_driver mt_cu;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static mt_status load_status = MT_ERR_NO_DRIVER;
static char load_msg[256];

static void load_driver(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        snprintf(load_msg, sizeof load_msg,
                 "cannot load libcuda.so.1 (%s); "
                 "GPU work needs an NVIDIA driver and GPU",
                 why ? why : "unknown reason");
        load_status = MT_ERR_NO_DRIVER;
        return;
    }
#define MT_CU_LOAD(name, sym)                                               \
    mt_cu.name = (__typeof__(name) *)dlsym(lib, sym);                       \
    if (!mt_cu.name) {                                                      \
        snprintf(load_msg, sizeof load_msg,                                 \
                 "CUDA driver too old: libcuda.so.1 lacks %s", sym);        \
        load_status = MT_ERR_NO_DRIVER;                                     \
        return;                                                             \
    }
    MT_CUDA_DRIVER_FUNCS(MT_CU_LOAD)
#undef MT_CU_LOAD
#define MT_CU_LOAD_OPTIONAL(name, sym) mt_cu.name = (__typeof__(name) *)dlsym(lib, sym);
    MT_CUDA_DRIVER_OPTIONAL(MT_CU_LOAD_OPTIONAL)
#undef MT_CU_LOAD_OPTIONAL
    CUresult r = mt_cu.cuInit(0);
    if (r != CUDA_SUCCESS) {
        char err[128];
        snprintf(load_msg, sizeof load_msg, "cuInit failed: %s (no usable GPU?)",
                 mt_cuda_error_text(r, err, sizeof err));
        load_status = r == CUDA_ERROR_NO_DEVICE ? MT_ERR_NO_DEVICE : MT_ERR_NO_DRIVER;
        return;
    }
    int count = 0;
    r = mt_cu.cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS || count == 0) {
        snprintf(load_msg, sizeof load_msg, "the CUDA driver reports no GPU");
        load_status = MT_ERR_NO_DEVICE;
        return;
    }
    load_status = MT_OK;
}

mt_status mt_cuda_load(char *msg, size_t msg_size)
{
    pthread_once(&load_once, load_driver);
    if (load_status != MT_OK)
        mt_strlcpy(msg, load_msg, msg_size);
    return load_status;
}

const char *mt_cuda_error_text(CUresult r, char *buf, size_t size)
{
    const char *name = NULL, *text = NULL;
    if (mt_cu.cuGetErrorName)
        mt_cu.cuGetErrorName(r, &name);
    if (mt_cu.cuGetErrorString)
        mt_cu.cuGetErrorString(r, &text);
    if (name)
        snprintf(buf, size, "%s: %s", name, text ? text : "");
    else
        snprintf(buf, size, "CUresult %d", (int)r);
    return buf;
}

mt_status mt_cuda_status(CUresult r)
{
    switch (r) {
    case CUDA_SUCCESS: return MT_OK;
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ASSERT:
        return MT_ERR_KERNEL_FAULT;
    case CUDA_ERROR_LAUNCH_TIMEOUT: return MT_ERR_TIMEOUT;
    case CUDA_ERROR_OUT_OF_MEMORY: return MT_ERR_NO_MEMORY;
    case CUDA_ERROR_NO_DEVICE: return MT_ERR_NO_DEVICE;
    default: return MT_ERR_CUDA;
    }
}

mt_status mt_cu_fail(CUresult r, const char *stmt, const char *file, int line, char *msg,
                     size_t msg_size)
{
    char err[160];
    mt_cuda_error_text(r, err, sizeof err);
    const char *base = strrchr(file, '/');
    return mt_errf(msg, msg_size, mt_cuda_status(r), "%s failed: %s (%s:%d)", stmt, err,
                   base ? base + 1 : file, line);
}

mt_status mt_gpu_open(int ordinal, mt_gpu *gpu, char *msg, size_t msg_size)
{
    memset(gpu, 0, sizeof *gpu);
    mt_status st = mt_cuda_load(msg, msg_size);
    if (st)
        return st;
    int count = 0;
    mt_cu.cuDeviceGetCount(&count);
    if (ordinal < 0 || ordinal >= count) {
        snprintf(msg, msg_size, "GPU %d does not exist (this machine has %d)", ordinal, count);
        return MT_ERR_NO_DEVICE;
    }
    char err[160];
    CUresult r = mt_cu.cuDeviceGet(&gpu->dev, ordinal);
    if (r == CUDA_SUCCESS)
        r = mt_cu.cuDevicePrimaryCtxRetain(&gpu->ctx, gpu->dev);
    if (r == CUDA_SUCCESS)
        r = mt_cu.cuCtxSetCurrent(gpu->ctx);
    if (r != CUDA_SUCCESS) {
        snprintf(msg, msg_size, "cannot open GPU %d: %s", ordinal,
                 mt_cuda_error_text(r, err, sizeof err));
        if (gpu->ctx)
            mt_cu.cuDevicePrimaryCtxRelease(gpu->dev);
        gpu->ctx = NULL;
        return mt_cuda_status(r);
    }
    int smem = 0;
    gpu->ordinal = ordinal;
    mt_cu.cuDeviceGetName(gpu->name, (int)sizeof gpu->name, gpu->dev);
    mt_cu.cuDeviceGetAttribute(&gpu->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, gpu->dev);
    mt_cu.cuDeviceGetAttribute(&gpu->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, gpu->dev);
    mt_cu.cuDeviceGetAttribute(&gpu->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, gpu->dev);
    mt_cu.cuDeviceGetAttribute(&gpu->mem_clock_khz, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, gpu->dev);
    mt_cu.cuDeviceGetAttribute(&smem, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, gpu->dev);
    mt_cu.cuDriverGetVersion(&gpu->driver_version);
    gpu->max_smem_optin = (size_t)smem;
    if (!mt_gpu_arch(gpu)) {
        snprintf(msg, msg_size,
                 "GPU %d (%s) is compute capability %d.%d: moetune's kernels are built for 8.0 to "
                 "9.0 (sm_80, sm_86, sm_89, sm_90a)",
                 ordinal, gpu->name, gpu->cc_major, gpu->cc_minor);
        mt_gpu_close(gpu);
        return MT_ERR_UNSUPPORTED;
    }
    return MT_OK;
}

void mt_gpu_close(mt_gpu *gpu)
{
    if (!gpu || !gpu->ctx)
        return;
    mt_cu.cuDevicePrimaryCtxRelease(gpu->dev);
    gpu->ctx = NULL;
}

const char *mt_gpu_arch(const mt_gpu *gpu)
{
    /* A cubin runs on its own major version at its minor version or above,
     * sm_90a's only on 9.0: nothing of this build runs below 8.0 or from
     * 10.0 on. */
    const int cc = gpu->cc_major * 10 + gpu->cc_minor;
    if (cc < 80 || cc >= 100)
        return NULL;
    if (cc >= 90)
        return "sm_90a";
    if (cc == 89)
        return "sm_89";
    return cc == 86 ? "sm_86" : "sm_80";   /* 8.7 has sm_80's shared memory */
}

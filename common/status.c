/*
 * Names of status codes (see moetune/status.h).
 */
#include "moetune/status.h"

const char *mt_status_str(mt_status st)
{
    static const char *const names[MT_STATUS_COUNT_] = {
        [MT_OK] = "ok",
        [MT_ERR_INVALID_ARG] = "invalid argument",
        [MT_ERR_SHAPE] = "shape mismatch",
        [MT_ERR_DTYPE] = "unsupported dtype",
        [MT_ERR_ALIGNMENT] = "misaligned pointer or dimension",
        [MT_ERR_UNSUPPORTED] = "unsupported",
        [MT_ERR_INCOMPATIBLE] = "incompatible composition",
        [MT_ERR_NO_MEMORY] = "out of memory",
        [MT_ERR_NO_DRIVER] = "no CUDA driver",
        [MT_ERR_NO_DEVICE] = "no GPU",
        [MT_ERR_CUDA] = "CUDA error",
        [MT_ERR_KERNEL_FAULT] = "kernel fault",
        [MT_ERR_TIMEOUT] = "timed out",
        [MT_ERR_NVRTC] = "NVRTC compilation failed",
        [MT_ERR_CUBLAS] = "cuBLAS error",
        [MT_ERR_TEMPLATE] = "template error",
        [MT_ERR_DB] = "database error",
        [MT_ERR_IO] = "I/O error",
        [MT_ERR_NOT_FOUND] = "not found",
        [MT_ERR_MISMATCH] = "result mismatch",
        [MT_ERR_DEVICE_CHECK] = "device-side check failed",
        [MT_ERR_INTERNAL] = "internal error",
    };
    if ((unsigned)st >= MT_STATUS_COUNT_ || !names[st])
        return "unknown status";
    return names[st];
}

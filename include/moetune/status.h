/*
 * moetune status codes, shared by every module.
 *
 * Every fallible moetune call returns an mt_status. MT_OK is zero so that
 * `if (st) goto fail;` reads naturally. The detailed message lives on the
 * handle that failed (or in a caller-provided buffer for handle-less calls).
 */
#ifndef MOETUNE_STATUS_H
#define MOETUNE_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mt_status {
    MT_OK = 0,
    MT_ERR_INVALID_ARG,   /* a NULL, out-of-range or inconsistent argument */
    MT_ERR_SHAPE,         /* tensor shapes disagree with each other or the problem */
    MT_ERR_DTYPE,         /* an element or index dtype that is not accepted */
    MT_ERR_ALIGNMENT,     /* a pointer or a dimension is not aligned as required */
    MT_ERR_UNSUPPORTED,   /* a valid request this build or this GPU cannot serve */
    MT_ERR_INCOMPATIBLE,  /* two composed objects disagree (format, quant mode) */
    MT_ERR_NO_MEMORY,     /* host allocation failed */
    MT_ERR_NO_DRIVER,     /* libcuda.so.1 could not be loaded */
    MT_ERR_NO_DEVICE,     /* the driver loaded but reports no usable GPU */
    MT_ERR_CUDA,          /* a CUDA driver call failed */
    MT_ERR_KERNEL_FAULT,  /* a kernel faulted; the context is lost */
    MT_ERR_TIMEOUT,       /* a kernel or a child process ran past its limit */
    MT_ERR_NVRTC,         /* NVRTC compilation failed; the log is on the handle */
    MT_ERR_CUBLAS,        /* a cuBLAS call failed */
    MT_ERR_TEMPLATE,      /* a Lua template raised an error or returned bad data */
    MT_ERR_DB,            /* SQLite failed, or a database is corrupt/foreign/newer */
    MT_ERR_IO,            /* a file could not be read or written */
    MT_ERR_NOT_FOUND,     /* a lookup found nothing */
    MT_ERR_MISMATCH,      /* a result differs from its reference */
    MT_ERR_DEVICE_CHECK,  /* a device-side check (e.g. topk id out of range) fired */
    MT_ERR_INTERNAL,      /* a bug in moetune: please report it */
    MT_STATUS_COUNT_
} mt_status;

/* Short, static, English name of a status ("invalid argument"). Never NULL. */
const char *mt_status_str(mt_status st);

#ifdef __cplusplus
}
#endif
#endif

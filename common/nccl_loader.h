/*
 * NCCL, loaded at run time.
 *
 * Nothing in moetune links libnccl: like the driver (common/cuda_driver.h),
 * it is dlopen'd on first use, so every binary starts where NCCL is absent
 * and expert parallelism alone reports "NCCL not found". mt_nccl_load()
 * fills the table `mt_nccl` once per process. Before loading it sets
 * NCCL_NVLS_ENABLE=0 unless the environment already says otherwise:
 * NVLink multicast (NVLS) must stay off on the machines moetune runs on.
 *
 * Where it looks: env MT_NCCL_LIB (a path) if set, else "libnccl.so.2"
 * through the loader's search path (a copy next to the binary is found via
 * the $ORIGIN rpath of the tests and benchmarks), else the toolkit's
 * /usr/local/cuda/lib64/libnccl.so.2.
 *
 * May call: libc, dlopen. Called by: runtime/ep.c, tests, benchmarks.
 */
#ifndef MT_COMMON_NCCL_LOADER_H
#define MT_COMMON_NCCL_LOADER_H

#include <stddef.h>
/* nccl.h (and the CUDA runtime headers it includes) are not written for
 * this project's warning set. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wundef"
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop
#include "moetune/status.h"

#define MT_NCCL_FUNCS(X)                     \
    X(ncclGetVersion)                        \
    X(ncclGetUniqueId)                       \
    X(ncclCommInitRank)                      \
    X(ncclCommInitAll)                       \
    X(ncclCommDestroy)                       \
    X(ncclCommAbort)                         \
    X(ncclCommCount)                         \
    X(ncclCommUserRank)                      \
    X(ncclCommCuDevice)                      \
    X(ncclCommGetAsyncError)                 \
    X(ncclGetErrorString)                    \
    X(ncclGetLastError)                      \
    X(ncclGroupStart)                        \
    X(ncclGroupEnd)                          \
    X(ncclSend)                              \
    X(ncclRecv)

typedef struct mt_nccl_lib {
#define MT_NCCL_FIELD(name) __typeof__(name) *name;
    MT_NCCL_FUNCS(MT_NCCL_FIELD)
#undef MT_NCCL_FIELD
    int version;   /* ncclGetVersion's code, e.g. 22805 */
} mt_nccl_lib;

/* The table; valid after mt_nccl_load() returned MT_OK. */
extern mt_nccl_lib mt_nccl;

/*
 * Load NCCL (once per process, thread-safe). MT_OK, or MT_ERR_UNSUPPORTED
 * with a message starting "NCCL not found" (or naming the missing symbol of
 * a too old library); the message is copied to msg.
 */
mt_status mt_nccl_load(char *msg, size_t msg_size);

/* Record a failed NCCL call (statement, file, line, NCCL's error string and
 * last-error text of comm when given) into msg; returns MT_ERR_CUDA. */
mt_status mt_nccl_fail(ncclResult_t r, void *comm, const char *stmt, const char *file, int line,
                       char *msg, size_t msg_size);

/* Run an NCCL call; on failure set `st`, describe it and jump to `fail`. */
#define MT_NCCL_TRY(call, comm, msg, msg_size)                                              \
    do {                                                                                    \
        ncclResult_t mt_nr_ = (call);                                                       \
        if (mt_nr_ != ncclSuccess) {                                                        \
            st = mt_nccl_fail(mt_nr_, (comm), #call, __FILE__, __LINE__, (msg), (msg_size)); \
            goto fail;                                                                      \
        }                                                                                   \
    } while (0)

#endif

/*
 * Run-time loading of NCCL (see nccl_loader.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "common/nccl_loader.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

mt_nccl_lib mt_nccl;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static mt_status load_status = MT_ERR_UNSUPPORTED;
static char load_msg[512];

static void load_nccl(void)
{
    /* NCCL reads its environment at communicator creation; setting it
     * before the library is even loaded covers every communicator of the
     * process (0: do not override a value the user chose). */
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    const char *env = getenv("MT_NCCL_LIB");
    const int chosen = env && *env;   /* the user's path only: no silent fallback */
    const char *tries[] = {chosen ? env : "libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2"};
    void *lib = NULL;
    char why[256] = "";
    for (size_t i = 0; i < (chosen ? 1 : MT_ARRAY_LEN(tries)) && !lib; i++) {
        lib = dlopen(tries[i], RTLD_NOW | RTLD_LOCAL);
        if (!lib && i == 0) {
            const char *e = dlerror();
            mt_strlcpy(why, e ? e : "unknown reason", sizeof why);
        }
    }
    if (!lib) {
        snprintf(load_msg, sizeof load_msg,
                 "NCCL not found: cannot load %s (%s); expert parallelism needs libnccl.so.2 "
                 "(set MT_NCCL_LIB to its path)",
                 tries[0], why);
        return;
    }
#define MT_NCCL_LOAD(name)                                                              \
    mt_nccl.name = (__typeof__(name) *)dlsym(lib, #name);                               \
    if (!mt_nccl.name) {                                                                \
        snprintf(load_msg, sizeof load_msg, "NCCL too old: libnccl.so.2 lacks %s", #name); \
        goto fail;                                                                      \
    }
    MT_NCCL_FUNCS(MT_NCCL_LOAD)
#undef MT_NCCL_LOAD
    if (mt_nccl.ncclGetVersion(&mt_nccl.version) != ncclSuccess) {
        snprintf(load_msg, sizeof load_msg, "NCCL: ncclGetVersion failed");
        goto fail;
    }
    load_status = MT_OK;
    return;
fail:   /* no half-filled table stays behind */
    memset(&mt_nccl, 0, sizeof mt_nccl);
    dlclose(lib);
}

mt_status mt_nccl_load(char *msg, size_t msg_size)
{
    pthread_once(&load_once, load_nccl);
    if (load_status != MT_OK)
        mt_strlcpy(msg, load_msg, msg_size);
    return load_status;
}

mt_status mt_nccl_fail(ncclResult_t r, void *comm, const char *stmt, const char *file, int line,
                       char *msg, size_t msg_size)
{
    const char *text = mt_nccl.ncclGetErrorString ? mt_nccl.ncclGetErrorString(r) : "?";
    const char *last = comm && mt_nccl.ncclGetLastError
                           ? mt_nccl.ncclGetLastError((ncclComm_t)comm)
                           : NULL;
    const char *base = strrchr(file, '/');
    return mt_errf(msg, msg_size, MT_ERR_CUDA, "%s failed: NCCL error %d: %s%s%s (%s:%d)", stmt,
                   (int)r, text ? text : "?", last && *last ? "; " : "", last ? last : "",
                   base ? base + 1 : file, line);
}

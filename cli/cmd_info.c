/*
 * `moetune info`: what this machine offers moetune (driver, GPUs, NVRTC).
 */
#include <nvrtc.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "common/cuda_driver.h"

int mt_cmd_info(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: moetune info\n\nPrints the moetune version, the NVRTC version, and the "
               "CUDA driver and GPUs if any.\nExit code 0 always when it could print; a missing "
               "GPU is reported, not an error.\n");
        return MT_EXIT_OK;
    }
    if (argc > 1) {
        fprintf(stderr, "moetune info: unexpected argument '%s' (usage: moetune info)\n",
                argv[1]);
        return MT_EXIT_USAGE;
    }
    int major = 0, minor = 0;
    nvrtcVersion(&major, &minor);
    printf("moetune %s\nNVRTC %d.%d (compiles for sm_80, sm_89, sm_90a without a GPU)\n",
           MT_VERSION_STRING, major, minor);
    char msg[256];
    mt_status st = mt_cuda_load(msg, sizeof msg);
    if (st != MT_OK) {
        printf("GPU: none (%s)\n", msg);
        printf("Without a GPU: `moetune gen` works; `moetune tune` and the runtime need one.\n");
        return MT_EXIT_OK;
    }
    int count = 0, drv = 0;
    mt_cu.cuDeviceGetCount(&count);
    mt_cu.cuDriverGetVersion(&drv);
    printf("CUDA driver %d.%d, %d GPU(s)\n", drv / 1000, (drv % 1000) / 10, count);
    for (int i = 0; i < count; i++) {
        mt_gpu g;
        if (mt_gpu_open(i, &g, msg, sizeof msg) != MT_OK) {
            printf("  GPU %d: %s\n", i, msg);
            continue;
        }
        printf("  GPU %d: %s, sm_%d%d, %d SMs, %zu KiB shared memory per block, arch %s\n", i,
               g.name, g.cc_major, g.cc_minor, g.sm_count, g.max_smem_optin / 1024,
               mt_gpu_arch(&g));
        mt_gpu_close(&g);
    }
    return MT_EXIT_OK;
}

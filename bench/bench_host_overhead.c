/*
 * Host cost of one modular-kernel call, excluding the GPU work.
 *
 * Two measurements per composition (E=128, topk=8, K=2048, N=768, bf16,
 * M=4 decode batch, built-in defaults):
 *  - "enqueue": wall time of mt_modular_kernel_run with the real driver
 *    (moetune's host path plus the driver's launch cost), streams drained
 *    every 64 calls outside the timed region;
 *  - "moetune": the same calls with the driver's launch and memset entries
 *    replaced by stubs that return at once, i.e. only what libmoetune adds
 *    on the host. The target (issue 7) is < 2 us; cuBLAS experts cannot be
 *    stubbed (cuBLAS calls the runtime directly) and show "enqueue" only.
 *
 *   bench_host_overhead [calls]     (default 20000)
 * Exits 77 without a GPU.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cuda_driver.h"
#include "common/util.h"
#include "moetune/moetune.h"
#include "tuner/harness.h"

static CUresult stub_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                            unsigned by, unsigned bz, unsigned smem, CUstream s, void **params,
                            void **extra)
{
    (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)smem, (void)s;
    (void)params, (void)extra;
    return CUDA_SUCCESS;
}

static CUresult stub_memset(CUdeviceptr p, unsigned v, size_t n, CUstream s)
{
    (void)p, (void)v, (void)n, (void)s;
    return CUDA_SUCCESS;
}

int main(int argc, char **argv)
{
    long calls = argc > 1 ? atol(argv[1]) : 20000;
    if (calls < 100)
        calls = 100;
    mt_context *ctx = NULL;
    mt_status st = mt_context_create(NULL, &ctx);
    if (st) {
        printf("bench_host_overhead: skipped: %s\n", mt_context_errmsg(ctx));
        mt_context_destroy(ctx);
        return st == MT_ERR_NO_DRIVER || st == MT_ERR_NO_DEVICE ? 77 : 1;
    }
    static const struct {
        mt_pf_kind pf;
        mt_experts_kind ex;
        mt_act_format fmt;
    } combos[] = {{MT_PF_STANDARD, MT_EXPERTS_MOETUNE, MT_FORMAT_STANDARD},
                  {MT_PF_BATCHED, MT_EXPERTS_MOETUNE, MT_FORMAT_BATCHED},
                  {MT_PF_BATCHED, MT_EXPERTS_CUBLAS, MT_FORMAT_BATCHED}};
    int worst_ok = 1;
    CUstream stream;
    mt_cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING);
    printf("moetune %s on %s, %ld calls per measurement\n", mt_version(),
           mt_context_device_name(ctx), calls);
    for (size_t c = 0; c < sizeof combos / sizeof combos[0]; c++) {
        mt_prepare_finalize *pf = NULL;
        mt_experts *ex = NULL;
        mt_modular_kernel *mk = NULL;
        mt_problem p;
        mt_problem_init(&p, 256, 128, 8, 2048, 768);
        mt_prepare_finalize_create(combos[c].pf, &pf);
        mt_experts_create(combos[c].ex, combos[c].fmt, &ex);
        char name[96], msg[512];
        snprintf(name, sizeof name, "%s+%s", mt_prepare_finalize_name(pf), mt_experts_name(ex));
        if (mt_modular_kernel_create(ctx, pf, ex, &p, &mk)) {
            printf("%-28s create failed: %s\n", name, mt_modular_kernel_errmsg(mk));
            worst_ok = 0;
            goto next;
        }
        mt_problem q = p;
        q.M = 4;
        mt_problem_data d;
        if (mt_problem_data_make(&d, &q, MT_ROUTING_UNIFORM, 1, 1, msg, sizeof msg)) {
            printf("%-28s data: %s\n", name, msg);
            worst_ok = 0;
            goto next;
        }
        size_t wsz = mt_modular_kernel_workspace_size(mk);
        CUdeviceptr ws;
        mt_cu.cuMemAlloc(&ws, wsz);
        void *wp = (void *)(uintptr_t)ws;
        for (int i = 0; i < 200; i++)
            mt_modular_kernel_run(mk, 4, &d.d, wp, wsz, stream);
        mt_cu.cuStreamSynchronize(stream);
        double total = 0;
        for (long i = 0; i < calls; i++) {
            double t0 = mt_now();
            st = mt_modular_kernel_run(mk, 4, &d.d, wp, wsz, stream);
            total += mt_now() - t0;
            if (st) {
                printf("%-28s run failed: %s\n", name, mt_modular_kernel_errmsg(mk));
                break;
            }
            if (i % 64 == 63)
                mt_cu.cuStreamSynchronize(stream);
        }
        mt_cu.cuStreamSynchronize(stream);
        printf("%-28s enqueue (host, real driver): %.2f us/call\n", name, total / calls * 1e6);
        if (combos[c].ex != MT_EXPERTS_CUBLAS) {
            mt_cuda_driver saved = mt_cu;
            mt_cu.cuLaunchKernel = stub_launch;
            mt_cu.cuMemsetD32Async = stub_memset;
            double t0 = mt_now();
            for (long i = 0; i < calls; i++)
                mt_modular_kernel_run(mk, 4, &d.d, wp, wsz, stream);
            double us = (mt_now() - t0) / calls * 1e6;
            mt_cu = saved;
            int ok = us < 2.0;
            worst_ok &= ok;
            printf("%-28s moetune host overhead:       %.3f us/call (target < 2 us) %s\n", name,
                   us, ok ? "PASS" : "FAIL");
        }
        mt_cu.cuMemFree(ws);
        mt_problem_data_free(&d);
    next:
        mt_modular_kernel_destroy(mk);
        mt_experts_destroy(ex);
        mt_prepare_finalize_destroy(pf);
    }
    mt_cu.cuStreamDestroy(stream);
    mt_context_destroy(ctx);
    printf("bench_host_overhead: %s\n", worst_ok ? "PASS" : "FAIL");
    return worst_ok ? 0 : 1;
}

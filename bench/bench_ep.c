/*
 * Expert parallelism against the single-GPU fused MoE for the same layer.
 *
 * For each rank count R in 1, 2, 4, 8 up to the visible GPUs (one process,
 * one communicator per GPU): every rank gets M tokens and its E/R experts;
 * the table gives the wall time of one EP call (pack + NCCL + experts +
 * NCCL + combine, all ranks, streams drained) and of the single-GPU fused
 * MoE (libmoetune's standard modular kernel on GPU 0 with all E experts)
 * for the same R * M tokens, both with the built-in default kernels.
 *
 *   bench_ep [M] [E] [topk] [K] [N] [quant] [format] [iters]
 *   defaults: 64 64 8 2048 768 none standard 50
 * Exits 77 without a GPU or without NCCL.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cuda_driver.h"
#include "common/util.h"
#include "moetune/ep.h"
#include "moetune/moetune.h"
#include "runtime/rt_internal.h"
#include "tuner/harness.h"

#define MAX_GPUS 8

static mt_context *ctx[MAX_GPUS];
static CUstream streams[MAX_GPUS];

static int cu_ok(CUresult r, const char *what)
{
    if (r != CUDA_SUCCESS)
        fprintf(stderr, "bench_ep: %s failed (CUresult %d)\n", what, (int)r);
    return r == CUDA_SUCCESS;
}

static void use(int g) { mt_cu.cuCtxSetCurrent(ctx[g]->gpu.ctx); }

/* Device copy of host bytes on GPU g (zeros when src is NULL). */
static void *dev_copy(int g, const void *src, size_t bytes)
{
    CUdeviceptr d = 0;
    use(g);
    if (!cu_ok(mt_cu.cuMemAlloc(&d, bytes ? bytes : 16), "cuMemAlloc"))
        exit(1);
    if (!cu_ok(src ? mt_cu.cuMemcpyHtoD(d, src, bytes) : mt_cu.cuMemsetD8(d, 0, bytes ? bytes : 16),
               src ? "cuMemcpyHtoD" : "cuMemsetD8") ||
        !cu_ok(mt_cu.cuCtxSynchronize(), "cuCtxSynchronize"))   /* landed before any stream */
        exit(1);
    return (void *)(uintptr_t)d;
}

/* Tokens [t0, t0 + M) and experts [e0, e0 + ne) of d on GPU g (harness). */
static void slice_on(int g, const mt_problem_data *d, int64_t t0, int64_t M, int64_t e0,
                     int64_t ne, mt_rank_slice *sl)
{
    char msg[256];
    use(g);
    if (mt_rank_slice_upload(d, t0, M, e0, ne, sl, msg, sizeof msg)) {
        fprintf(stderr, "bench_ep: GPU %d: %s\n", g, msg);
        exit(1);
    }
}

static void slice_free(int g, mt_rank_slice *sl)
{
    use(g);
    mt_rank_slice_free(sl);
}

static double drain(int n)
{
    for (int g = 0; g < n; g++) {
        use(g);
        mt_cu.cuStreamSynchronize(streams[g]);
    }
    return mt_now();
}

/* Milliseconds per single-GPU call for p (all experts on GPU 0). */
static double single_gpu_ms(const mt_problem_data *d, const mt_problem *p, int iters)
{
    mt_prepare_finalize *pf = NULL;
    mt_experts *ex = NULL;
    mt_modular_kernel *mk = NULL;
    mt_prepare_finalize_create(MT_PF_STANDARD, &pf);
    mt_experts_create(MT_EXPERTS_MOETUNE, MT_FORMAT_STANDARD, &ex);
    double ms = -1;
    if (mt_modular_kernel_create(ctx[0], pf, ex, p, &mk)) {
        fprintf(stderr, "bench_ep: single GPU: %s\n", mt_modular_kernel_errmsg(mk));
        goto done;
    }
    mt_rank_slice all;
    slice_on(0, d, 0, p->M, 0, p->E, &all);
    const mt_moe_tensors t = all.t;
    const size_t wsz = mt_modular_kernel_workspace_size(mk);
    void *ws = dev_copy(0, NULL, wsz);
    mt_status st = MT_OK;
    for (int i = 0; i < 3 && !st; i++)
        st = mt_modular_kernel_run(mk, p->M, &t, ws, wsz, streams[0]);
    double t0 = drain(1);
    for (int i = 0; i < iters && !st; i++)
        st = mt_modular_kernel_run(mk, p->M, &t, ws, wsz, streams[0]);
    ms = st ? -1 : (drain(1) - t0) * 1e3 / iters;
    use(0);
    mt_cu.cuMemFree((CUdeviceptr)(uintptr_t)ws);
    slice_free(0, &all);
done:
    mt_modular_kernel_destroy(mk);
    mt_experts_destroy(ex);
    mt_prepare_finalize_destroy(pf);
    return ms;
}

/* Milliseconds per EP call over `world` ranks (M tokens each). */
static double ep_ms(const mt_problem_data *d, const mt_problem *p, int64_t M, int world,
                    mt_act_format fmt, int iters, const char **wire)
{
    void *comms[MAX_GPUS] = {0};
    int devs[MAX_GPUS];
    mt_ep *eps[MAX_GPUS] = {0};
    mt_moe_tensors t[MAX_GPUS];
    mt_rank_slice sl[MAX_GPUS];
    void *ws[MAX_GPUS] = {0};
    size_t wss[MAX_GPUS];
    int64_t Ms[MAX_GPUS];
    char msg[512];
    double ms = -1;
    mt_experts *ex = NULL;
    memset(t, 0, sizeof t);
    memset(sl, 0, sizeof sl);
    for (int r = 0; r < world; r++)
        devs[r] = r;
    if (mt_ep_comms_create_local(world, devs, comms, msg, sizeof msg)) {
        fprintf(stderr, "bench_ep: %s\n", msg);
        return -1;
    }
    mt_experts_create(MT_EXPERTS_MOETUNE, fmt, &ex);
    int made = 0;
    for (int r = 0; r < world; r++, made++) {
        mt_ep_config cfg;
        mt_ep_config_init(&cfg);
        cfg.format = fmt;
        cfg.comm = comms[r];
        cfg.rank = r;
        cfg.world = world;
        mt_problem pr = *p;
        pr.M = M;
        if (mt_ep_create(ctx[r], &cfg, ex, &pr, &eps[r])) {
            fprintf(stderr, "bench_ep: rank %d: %s\n", r, mt_ep_errmsg(eps[r]));
            made++;
            goto done;
        }
        int64_t e0, ne;
        mt_ep_local_experts(eps[r], &e0, &ne);
        slice_on(r, d, r * M, M, e0, ne, &sl[r]);
        t[r] = sl[r].t;
        wss[r] = mt_ep_workspace_size(eps[r]);
        ws[r] = dev_copy(r, NULL, wss[r]);
        Ms[r] = M;
    }
    *wire = mt_ep_wire_name(mt_ep_wire_of(eps[0]));
    mt_status st = MT_OK;
    for (int i = 0; i < 3 && !st; i++)
        st = mt_ep_run_group(eps, world, Ms, t, ws, wss, streams);
    double t0 = drain(world);
    for (int i = 0; i < iters && !st; i++)
        st = mt_ep_run_group(eps, world, Ms, t, ws, wss, streams);
    if (st)   /* mt_ep_run_group leaves the reason on the rank that failed */
        for (int r = 0; r < world; r++)
            if (mt_ep_errmsg(eps[r])[0])
                fprintf(stderr, "bench_ep: rank %d: %s\n", r, mt_ep_errmsg(eps[r]));
    ms = st ? -1 : (drain(world) - t0) * 1e3 / iters;
    for (int r = 0; r < world && !st; r++)
        if ((st = mt_ep_read_error(eps[r], M, ws[r])))
            fprintf(stderr, "bench_ep: rank %d: %s\n", r, mt_ep_errmsg(eps[r]));
    if (st)
        ms = -1;
done:
    for (int r = 0; r < made; r++) {
        if (ws[r]) {
            use(r);
            mt_cu.cuMemFree((CUdeviceptr)(uintptr_t)ws[r]);
        }
        if (sl[r].nmem)
            slice_free(r, &sl[r]);
        mt_ep_destroy(eps[r]);
    }
    for (int r = 0; r < world; r++)
        mt_ep_comm_destroy(comms[r]);
    mt_experts_destroy(ex);
    return ms;
}

int main(int argc, char **argv)
{
    char msg[512], ver[32];
    if (mt_cuda_load(msg, sizeof msg)) {
        printf("SKIPPED: bench_ep needs a GPU: %s\n", msg);
        return 77;
    }
    if (mt_ep_nccl_load(ver, sizeof ver, msg, sizeof msg)) {
        printf("bench_ep: %s\nSKIPPED\n", msg);
        return 77;
    }
    const int64_t M = argc > 1 ? atoll(argv[1]) : 64, E = argc > 2 ? atoll(argv[2]) : 64;
    const int64_t topk = argc > 3 ? atoll(argv[3]) : 8, K = argc > 4 ? atoll(argv[4]) : 2048;
    const int64_t N = argc > 5 ? atoll(argv[5]) : 768;
    mt_quant_mode q = MT_QUANT_NONE;
    mt_act_format fmt = MT_FORMAT_STANDARD;
    if ((argc > 6 && mt_quant_mode_parse(argv[6], &q)) || (argc > 7 && mt_act_format_parse(argv[7], &fmt))) {
        fprintf(stderr, "usage: bench_ep [M] [E] [topk] [K] [N] [quant] [format] [iters]\n");
        return 2;
    }
    const int iters = argc > 8 ? atoi(argv[8]) : 50;
    int ngpu = 0;
    mt_cu.cuDeviceGetCount(&ngpu);
    ngpu = ngpu > MAX_GPUS ? MAX_GPUS : ngpu;
    for (int g = 0; g < ngpu; g++) {
        mt_context_config cfg;
        mt_context_config_init(&cfg);
        cfg.device = g;
        if (mt_context_create(&cfg, &ctx[g]) || !cu_ok(mt_cu.cuStreamCreate(&streams[g], CU_STREAM_NON_BLOCKING), "cuStreamCreate")) {
            fprintf(stderr, "bench_ep: GPU %d: %s\n", g, mt_context_errmsg(ctx[g]));
            return 1;
        }
    }
    printf("bench_ep: NCCL %s, %d GPU(s) (%s), NCCL_NVLS_ENABLE=%s\n", ver, ngpu,
           mt_context_device_name(ctx[0]), getenv("NCCL_NVLS_ENABLE"));
    printf("layer: M=%lld tokens per rank, E=%lld, topk=%lld, K=%lld, N=%lld, %s, EP %s format, %d iterations\n",
           (long long)M, (long long)E, (long long)topk, (long long)K, (long long)N,
           mt_quant_mode_name(q), mt_act_format_name(fmt), iters);
    printf("%5s %8s %10s %14s %14s %8s\n", "ranks", "tokens", "wire", "single-GPU ms", "EP ms", "EP/1GPU");
    int rc = 0;
    for (int world = 1; world <= ngpu; world *= 2) {
        mt_problem p;
        mt_problem_init(&p, M * world, E, topk, K, N);
        p.quant.mode = q;
        mt_problem_data d;
        if (mt_problem_data_make(&d, &p, MT_ROUTING_UNIFORM, 7, 0, msg, sizeof msg)) {
            fprintf(stderr, "bench_ep: %s\n", msg);
            return 1;
        }
        const char *wire = "?";
        const double one = single_gpu_ms(&d, &p, iters);
        const double ep = ep_ms(&d, &p, M, world, fmt, iters, &wire);
        printf("%5d %8lld %10s %14.3f %14.3f %8.2f\n", world, (long long)(M * world), wire, one, ep,
               one > 0 && ep > 0 ? ep / one : 0.0);
        rc |= one < 0 || ep < 0;
        mt_problem_data_free(&d);
    }
    if (ngpu < 2)
        printf("(one GPU visible: the multi-rank rows need a machine with several GPUs)\n");
    for (int g = 0; g < ngpu; g++) {
        use(g);
        mt_cu.cuStreamDestroy(streams[g]);
        mt_context_destroy(ctx[g]);
    }
    return rc;
}

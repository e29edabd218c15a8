/*
 * libmoetune example: one fused-MoE layer call from an engine's point of
 * view. Copy it: it uses only moetune.h and the CUDA runtime (for the
 * engine's own device buffers). Without a GPU it says so and exits 0.
 *
 *   moetune_example [SYSTEM_DB [USER_DB]]
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moetune/moetune.h"

#define CUDA_OK(call)                                                               \
    do {                                                                            \
        cudaError_t e_ = (call);                                                    \
        if (e_ != cudaSuccess) {                                                    \
            fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_));      \
            goto out;                                                               \
        }                                                                           \
    } while (0)

static void on_log(void *user, mt_log_level level, const char *message)
{
    (void)user;
    fprintf(stderr, "[moetune %s] %s\n", level == MT_LOG_WARN ? "warn" : "info", message);
}

/* float -> bf16 bits, round to nearest even (no NaNs here). */
static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

static void *upload_bf16(size_t n, float scale, unsigned seed)
{
    uint16_t *h = malloc(n * sizeof *h);
    void *d = NULL;
    for (size_t i = 0; h && i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        h[i] = to_bf16(((float)(seed >> 8) / 16777216.0f - 0.5f) * scale);
    }
    cudaError_t e = h ? cudaMalloc(&d, n * sizeof *h) : cudaErrorMemoryAllocation;
    if (e == cudaSuccess && (e = cudaMemcpy(d, h, n * sizeof *h, cudaMemcpyHostToDevice)) != cudaSuccess) {
        cudaFree(d);
        d = NULL;
    }
    if (e != cudaSuccess)
        fprintf(stderr, "upload of %zu bf16 values: %s\n", n, cudaGetErrorString(e));
    free(h);
    return d;
}

int main(int argc, char **argv)
{
    int rc = 1;
    mt_context *ctx = NULL;
    mt_prepare_finalize *pf = NULL;
    mt_experts *ex = NULL;
    mt_modular_kernel *mk = NULL;
    void *hidden = NULL, *w1 = NULL, *w2 = NULL, *out = NULL, *ws = NULL;
    int32_t *ids = NULL;
    float *weights = NULL, *h_w = NULL;
    int32_t *h_ids = NULL;
    cudaStream_t stream = NULL;

    mt_context_config cfg;
    mt_context_config_init(&cfg);
    cfg.system_db = argc > 1 ? argv[1] : NULL;
    cfg.user_db = argc > 2 ? argv[2] : NULL;
    cfg.log = on_log;
    cfg.log_level = MT_LOG_INFO;
    mt_status st = mt_context_create(&cfg, &ctx);
    if (st == MT_ERR_NO_DRIVER || st == MT_ERR_NO_DEVICE) {
        printf("moetune %s: no GPU here (%s); nothing to run.\n", mt_version(),
               mt_context_errmsg(ctx));
        mt_context_destroy(ctx);
        return 0;
    }
    if (st) {
        fprintf(stderr, "mt_context_create: %s\n", mt_context_errmsg(ctx));
        goto out;
    }

    /* The layer: 8 experts, top-2, hidden 1024, intermediate 512, bf16,
     * silu; the engine's largest batch is 256 tokens. */
    const int64_t max_m = 256, E = 8, topk = 2, K = 1024, N = 512;
    mt_problem p;
    mt_problem_init(&p, max_m, E, topk, K, N);
    if ((st = mt_prepare_finalize_create(MT_PF_STANDARD, &pf)) ||
        (st = mt_experts_create(MT_EXPERTS_MOETUNE, MT_FORMAT_STANDARD, &ex))) {
        fprintf(stderr, "creating the stages: %s\n", mt_status_str(st));
        goto out;
    }
    if (mt_modular_kernel_create(ctx, pf, ex, &p, &mk)) {
        fprintf(stderr, "mt_modular_kernel_create: %s\n", mt_modular_kernel_errmsg(mk));
        goto out;
    }

    /* The engine's buffers (any allocator; 16-byte aligned). */
    const int64_t M = 100;
    hidden = upload_bf16((size_t)(M * K), 2.0f, 1);
    w1 = upload_bf16((size_t)(E * 2 * N * K), 0.1f, 2);
    w2 = upload_bf16((size_t)(E * K * N), 0.1f, 3);
    if (!hidden || !w1 || !w2)
        goto out;   /* upload_bf16 said why */
    h_ids = malloc((size_t)(M * topk) * sizeof *h_ids);
    h_w = malloc((size_t)(M * topk) * sizeof *h_w);
    if (!h_ids || !h_w) {
        fprintf(stderr, "out of host memory\n");
        goto out;
    }
    for (int64_t i = 0; i < M * topk; i++) {
        h_ids[i] = (int32_t)((i / topk * 3 + i % topk) % E);   /* distinct per token */
        h_w[i] = 0.5f;
    }
    CUDA_OK(cudaMalloc((void **)&ids, (size_t)(M * topk) * sizeof *ids));
    CUDA_OK(cudaMalloc((void **)&weights, (size_t)(M * topk) * sizeof *weights));
    CUDA_OK(cudaMemcpy(ids, h_ids, (size_t)(M * topk) * sizeof *ids, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(weights, h_w, (size_t)(M * topk) * sizeof *weights,
                       cudaMemcpyHostToDevice));
    CUDA_OK(cudaMalloc(&out, (size_t)(M * K) * 2));
    size_t ws_size = mt_modular_kernel_workspace_size(mk);
    CUDA_OK(cudaMalloc(&ws, ws_size));
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    mt_moe_tensors t;
    memset(&t, 0, sizeof t);
    t.hidden = hidden;
    t.w1 = w1;
    t.w2 = w2;
    t.topk_ids = ids;
    t.topk_weights = weights;
    t.out = out;
    /* The serving loop: this call enqueues only (no allocation, no sync). */
    if (mt_modular_kernel_run(mk, M, &t, ws, ws_size, (CUstream)stream)) {
        fprintf(stderr, "mt_modular_kernel_run: %s\n", mt_modular_kernel_errmsg(mk));
        goto out;
    }
    CUDA_OK(cudaStreamSynchronize(stream));
    if (mt_modular_kernel_read_error(mk, M, ws)) {   /* off the hot path */
        fprintf(stderr, "device check: %s\n", mt_modular_kernel_errmsg(mk));
        goto out;
    }
    mt_lookup_info info;
    if (mt_modular_kernel_lookup(mk, M, &info)) {
        fprintf(stderr, "mt_modular_kernel_lookup: %s\n", mt_modular_kernel_errmsg(mk));
        goto out;
    }
    uint16_t first[4];
    CUDA_OK(cudaMemcpy(first, out, sizeof first, cudaMemcpyDeviceToHost));
    printf("moetune %s on %s: M=%lld served by %s kernels (%s)\n", mt_version(),
           mt_context_device_name(ctx), (long long)M, mt_lookup_source_name(info.source),
           info.pipeline);
    printf("out[0][0..3] bf16 bits: %04x %04x %04x %04x\n", first[0], first[1], first[2],
           first[3]);
    rc = 0;
out:
    if (stream)
        cudaStreamDestroy(stream);
    cudaFree(hidden);
    cudaFree(w1);
    cudaFree(w2);
    cudaFree(ids);
    cudaFree(weights);
    cudaFree(out);
    cudaFree(ws);
    free(h_ids);
    free(h_w);
    mt_modular_kernel_destroy(mk);   /* before its context */
    mt_experts_destroy(ex);
    mt_prepare_finalize_destroy(pf);
    mt_context_destroy(ctx);
    return rc;
}

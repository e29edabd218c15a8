/*
 * GPU test of the cuBLAS half of the cuBLAS experts composition
 * (runtime/rt_cublas.c): mt_rt_cublas_gemm on its own, per expert
 * Y[e] = X[e] W[e]^T in bf16 and fp16 at the shapes gpu_runtime composes,
 * against a double-precision CPU product of the same rounded inputs.
 *
 * Why it exists: under compute-sanitizer's initcheck, gpu_runtime's cuBLAS
 * composition gave NaN rows while every moetune-only composition stayed
 * clean (docs/RELIABILITY.md). This program has no moetune kernel in it, so
 * running it under initcheck tells whether cuBLAS's own output changes
 * under the tool. Without the tool it must pass.
 */
#include "tests/support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cuda_driver.h"
#include "moetune/numeric.h"
#include "runtime/rt_internal.h"

static mt_gpu gpu;

static int setup(void **state)
{
    (void)state;
    mt_test_require_gpu();
    char msg[256];
    if (mt_gpu_open(0, &gpu, msg, sizeof msg) != MT_OK)
        fail_msg("%s", msg);
    return 0;
}

static uint16_t to_half(mt_dtype dt, float x)
{
    return dt == MT_DTYPE_BF16 ? mt_f32_to_bf16(x) : mt_f32_to_f16(x);
}

static float from_half(mt_dtype dt, uint16_t h)
{
    return dt == MT_DTYPE_BF16 ? mt_bf16_to_f32(h) : mt_f16_to_f32(h);
}

/* One strided-batched product; returns the relative L2 error (INFINITY
 * with any non-finite output). */
static double check_gemm(rt_cublas *cb, mt_dtype dt, int64_t E, int64_t rows, int64_t n,
                         int64_t k, uint64_t seed)
{
    const size_t nw = (size_t)(E * n * k), nx = (size_t)(E * rows * k), ny = (size_t)(E * rows * n);
    uint16_t *hw = malloc(nw * 2), *hx = malloc(nx * 2), *hy = malloc(ny * 2);
    assert_true(hw && hx && hy);
    mt_rng r;
    mt_rng_seed(&r, seed);
    for (size_t i = 0; i < nw; i++)
        hw[i] = to_half(dt, mt_rng_normal(&r) / sqrtf((float)k));
    for (size_t i = 0; i < nx; i++)
        hx[i] = to_half(dt, mt_rng_normal(&r));
    CUdeviceptr dw, dx, dy, dws;
    char msg[512];
    assert_int_equal(mt_cu.cuMemAlloc(&dw, nw * 2), CUDA_SUCCESS);
    assert_int_equal(mt_cu.cuMemAlloc(&dx, nx * 2), CUDA_SUCCESS);
    assert_int_equal(mt_cu.cuMemAlloc(&dy, ny * 2), CUDA_SUCCESS);
    assert_int_equal(mt_cu.cuMemAlloc(&dws, MT_RT_CUBLAS_WS), CUDA_SUCCESS);
    assert_int_equal(mt_cu.cuMemcpyHtoD(dw, hw, nw * 2), CUDA_SUCCESS);
    assert_int_equal(mt_cu.cuMemcpyHtoD(dx, hx, nx * 2), CUDA_SUCCESS);
    if (mt_rt_cublas_bind(cb, (void *)(uintptr_t)dws, NULL, msg, sizeof msg) ||
        mt_rt_cublas_gemm(cb, dt, E, rows, n, k, (void *)(uintptr_t)dw, (void *)(uintptr_t)dx,
                          (void *)(uintptr_t)dy, msg, sizeof msg))
        fail_msg("%s", msg);
    assert_int_equal(mt_cu.cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(mt_cu.cuMemcpyDtoH(hy, dy, ny * 2), CUDA_SUCCESS);
    double err = 0, ref = 0;
    int bad = 0;
    for (int64_t e = 0; e < E; e++)
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < n; j++) {
                double s = 0;
                for (int64_t q = 0; q < k; q++)
                    s += (double)from_half(dt, hx[(e * rows + i) * k + q]) *
                         (double)from_half(dt, hw[(e * n + j) * k + q]);
                const double got = from_half(dt, hy[(e * rows + i) * n + j]);
                bad += !isfinite(got);
                err += (got - s) * (got - s);
                ref += s * s;
            }
    mt_cu.cuMemFree(dw);
    mt_cu.cuMemFree(dx);
    mt_cu.cuMemFree(dy);
    mt_cu.cuMemFree(dws);
    free(hw);
    free(hx);
    free(hy);
    return bad ? INFINITY : sqrt(err / (ref > 0 ? ref : 1));
}

static void test_gemm(void **state)
{
    (void)state;
    char msg[256];
    rt_cublas *cb = NULL;
    if (mt_rt_cublas_create(&cb, msg, sizeof msg))
        fail_msg("%s", msg);
    /* gpu_runtime's two compositions: (E, 2N, K) and (E, K, N) at its token
     * capacities. */
    static const struct { int64_t E, n, k; mt_dtype dt; } shapes[] = {
        {8, 256, 256, MT_DTYPE_BF16}, {8, 256, 128, MT_DTYPE_BF16},
        {10, 512, 512, MT_DTYPE_FP16}, {10, 512, 256, MT_DTYPE_FP16},
    };
    static const int64_t caps[] = {1, 7, 33, 64};
    int failed = 0, runs = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++, runs++) {
            const double e = check_gemm(cb, shapes[s].dt, shapes[s].E, caps[c], shapes[s].n,
                                        shapes[s].k, 7 + runs);
            const int ok = e < 1e-2;
            failed += !ok;
            printf("%s cublas %s E=%lld rows=%lld n=%lld k=%lld rel_l2=%.2e\n", ok ? "PASS" : "FAIL",
                   mt_dtype_name(shapes[s].dt), (long long)shapes[s].E, (long long)caps[c],
                   (long long)shapes[s].n, (long long)shapes[s].k, e);
        }
    mt_rt_cublas_destroy(cb);
    printf("cublas gemm: %d checks, %d failed\n", runs, failed);
    assert_int_equal(failed, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_gemm)};
    return cmocka_run_group_tests(tests, setup, NULL);
}

/*
 * GPU test of moetune/numeric.h: compiles a small kernel with NVRTC for the
 * device's arch, runs CUDA's device conversions (cuda_bf16.h, cuda_fp16.h,
 * cuda_fp8.h) and the activation quantizers on every bf16/fp16/e4m3
 * encoding and on a large float sweep, and compares with the host
 * functions bit for bit. Decoding a NaN encoding to float only has to give
 * a NaN (payloads are counted and printed, not failed): no kernel depends on
 * a NaN's payload.
 */
#include "tests/support.h"

#include <math.h>
/* nvrtc.h tests undefined macros in #if; it is not ours to fix. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wundef"
#include <nvrtc.h>
#pragma GCC diagnostic pop
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cuda_driver.h"
#include "moetune/numeric.h"

#define CUDA_INCLUDE_DIR "/usr/local/cuda/include"

#define CU(call)                                                                   \
    do {                                                                           \
        CUresult r_ = (call);                                                      \
        if (r_ != CUDA_SUCCESS) {                                                  \
            char b_[256];                                                          \
            fail_msg("%s failed: %s", #call, mt_cuda_error_text(r_, b_, sizeof b_)); \
        }                                                                          \
    } while (0)

static const char kernel_src[] =
    "#include <cuda_bf16.h>\n"
    "#include <cuda_fp16.h>\n"
    "#include <cuda_fp8.h>\n"
    "extern \"C\" __global__ void decode(float *bf, float *hf, float *qf) {\n"
    "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < 65536u) {\n"
    "    bf[i] = __bfloat162float(__ushort_as_bfloat16((unsigned short)i));\n"
    "    hf[i] = __half2float(__ushort_as_half((unsigned short)i));\n"
    "  }\n"
    "  if (i < 256u) { __nv_fp8_e4m3 q; q.__x = (__nv_fp8_storage_t)i; qf[i] = (float)q; }\n"
    "}\n"
    /* Float bits: start + i * stride, or (i / nlows) << 16 | lows[i % nlows]. */
    "extern \"C\" __global__ void encode(unsigned long long start, unsigned long long stride,\n"
    "    unsigned n, const unsigned *lows, unsigned nlows, unsigned short *bf,\n"
    "    unsigned short *hf, unsigned char *q) {\n"
    "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i >= n) return;\n"
    "  unsigned bits = lows ? ((i / nlows) << 16 | lows[i % nlows])\n"
    "                       : (unsigned)(start + (unsigned long long)i * stride);\n"
    "  float x = __uint_as_float(bits);\n"
    "  bf[i] = __bfloat16_as_ushort(__float2bfloat16(x));\n"
    "  hf[i] = __half_as_ushort(__float2half(x));\n"
    "  q[i] = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);\n"
    "}\n"
    /* The activation quantizers as numeric.h specifies them. */
    "extern \"C\" __global__ void quant(const float *x, const float *s, unsigned n,\n"
    "    signed char *q8, unsigned char *qf8, float *s8, float *sf8) {\n"
    "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i >= n) return;\n"
    "  float v = x[i] / s[i];\n"
    "  int r = __float2int_rn(v);\n"
    "  q8[i] = (signed char)min(127, max(-127, r));\n"
    "  qf8[i] = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);\n"
    "  float a = fabsf(x[i]);\n"
    "  s8[i] = a == 0.0f ? 1.0f : a / 127.0f;\n"
    "  sf8[i] = a == 0.0f ? 1.0f : a / 448.0f;\n"
    "}\n";

typedef struct gpu_env {
    mt_gpu gpu;
    CUmodule mod;
    CUfunction decode, encode, quant;
} gpu_env;

static gpu_env env;

static uint32_t fbits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float ffrom(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* NVRTC-compile src for the device's arch (extra_opt: one more option, or
 * NULL) and load it. */
static void compile_source(const char *src, const char *file, const char *extra_opt, CUmodule *mod)
{
    nvrtcProgram prog;
    assert_int_equal(nvrtcCreateProgram(&prog, src, file, 0, NULL, NULL), NVRTC_SUCCESS);
    char arch_opt[64];
    snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s", mt_gpu_arch(&env.gpu));
    const char *opts[] = {arch_opt, "-I" CUDA_INCLUDE_DIR, "--std=c++17", extra_opt};
    nvrtcResult rc = nvrtcCompileProgram(prog, extra_opt ? 4 : 3, opts);
    if (rc != NVRTC_SUCCESS) {
        size_t n = 0;
        nvrtcGetProgramLogSize(prog, &n);
        char *log = malloc(n + 1);
        assert_non_null(log);
        log[0] = '\0';
        nvrtcGetProgramLog(prog, log);
        if (strstr(log, "cannot open source file"))
            printf("NVRTC could not find a header: cuda_bf16.h/cuda_fp16.h/cuda_fp8.h are "
                   "expected in " CUDA_INCLUDE_DIR " (is the CUDA toolkit installed there?), "
                   "the templates' headers in MT_TEMPLATE_DIR\n");
        printf("NVRTC (%s, %s) failed: %s\n%s\n", file, arch_opt, nvrtcGetErrorString(rc), log);
        free(log);
        fail_msg("NVRTC compilation failed");
    }
    size_t cubin_size = 0;
    assert_int_equal(nvrtcGetCUBINSize(prog, &cubin_size), NVRTC_SUCCESS);
    char *cubin = malloc(cubin_size);
    assert_non_null(cubin);
    assert_int_equal(nvrtcGetCUBIN(prog, cubin), NVRTC_SUCCESS);
    nvrtcDestroyProgram(&prog);
    CU(mt_cu.cuModuleLoadData(mod, cubin));
    free(cubin);
}

static void compile_module(void)
{
    compile_source(kernel_src, "gpu_numeric.cu", NULL, &env.mod);
    CU(mt_cu.cuModuleGetFunction(&env.decode, env.mod, "decode"));
    CU(mt_cu.cuModuleGetFunction(&env.encode, env.mod, "encode"));
    CU(mt_cu.cuModuleGetFunction(&env.quant, env.mod, "quant"));
}

static int setup(void **state)
{
    (void)state;
    char msg[256];
    if (mt_gpu_open(0, &env.gpu, msg, sizeof msg) != MT_OK) {
        printf("cannot open GPU 0: %s\n", msg);
        return -1;
    }
    printf("GPU: %s (%s)\n", env.gpu.name, mt_gpu_arch(&env.gpu));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (env.mod)
        mt_cu.cuModuleUnload(env.mod);
    mt_gpu_close(&env.gpu);
    return 0;
}

static void launch(CUfunction f, unsigned n, void **args)
{
    unsigned blocks = (n + 255) / 256;
    CU(mt_cu.cuLaunchKernel(f, blocks, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    CU(mt_cu.cuCtxSynchronize());
}

static CUdeviceptr dalloc(size_t bytes)
{
    CUdeviceptr p = 0;
    CU(mt_cu.cuMemAlloc(&p, bytes));
    return p;
}

static void test_compile(void **state)
{
    (void)state;
    compile_module();
}

static void test_decode_all_encodings(void **state)
{
    (void)state;
    if (!env.mod)
        compile_module();
    CUdeviceptr dbf = dalloc(65536 * 4), dhf = dalloc(65536 * 4), dqf = dalloc(256 * 4);
    void *args[] = {&dbf, &dhf, &dqf};
    launch(env.decode, 65536, args);
    static float bf[65536], hf[65536], qf[256];
    CU(mt_cu.cuMemcpyDtoH(bf, dbf, sizeof bf));
    CU(mt_cu.cuMemcpyDtoH(hf, dhf, sizeof hf));
    CU(mt_cu.cuMemcpyDtoH(qf, dqf, sizeof qf));
    long bad = 0, nan_payload = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        float ref[2] = {mt_bf16_to_f32((uint16_t)i), mt_f16_to_f32((uint16_t)i)};
        float got[2] = {bf[i], hf[i]};
        for (int k = 0; k < 2; k++) {
            if (fbits(ref[k]) == fbits(got[k]))
                continue;
            if (isnan(ref[k]) && isnan(got[k])) {
                nan_payload++;
                continue;
            }
            if (bad++ < 8)
                printf("%s %04x -> float: host %08x device %08x\n", k ? "fp16" : "bf16", i,
                       fbits(ref[k]), fbits(got[k]));
        }
    }
    for (uint32_t i = 0; i < 256; i++) {
        float ref = mt_e4m3_to_f32((uint8_t)i);
        if (fbits(ref) == fbits(qf[i]))
            continue;
        if (isnan(ref) && isnan(qf[i])) {
            nan_payload++;
            continue;
        }
        if (bad++ < 16)
            printf("e4m3 %02x -> float: host %08x device %08x\n", i, fbits(ref), fbits(qf[i]));
    }
    if (nan_payload)
        printf("note: %ld NaN decodes differ only in the NaN payload/sign\n", nan_payload);
    mt_cu.cuMemFree(dbf);
    mt_cu.cuMemFree(dhf);
    mt_cu.cuMemFree(dqf);
    assert_int_equal(bad, 0);
}

/* Run `encode` over n floats and compare with the host; returns mismatches. */
static long encode_and_compare(unsigned long long start, unsigned long long stride, unsigned n,
                               const uint32_t *lows, unsigned nlows, CUdeviceptr dbf,
                               CUdeviceptr dhf, CUdeviceptr dq, CUdeviceptr dlows,
                               uint16_t *bf, uint16_t *hf, uint8_t *q)
{
    CUdeviceptr lp = lows ? dlows : 0;
    void *args[] = {&start, &stride, &n, &lp, &nlows, &dbf, &dhf, &dq};
    launch(env.encode, n, args);
    CU(mt_cu.cuMemcpyDtoH(bf, dbf, (size_t)n * 2));
    CU(mt_cu.cuMemcpyDtoH(hf, dhf, (size_t)n * 2));
    CU(mt_cu.cuMemcpyDtoH(q, dq, n));
    long bad = 0;
    for (unsigned i = 0; i < n; i++) {
        uint32_t bits = lows ? (i / nlows) << 16 | lows[i % nlows] : (uint32_t)(start + (unsigned long long)i * stride);
        float x = ffrom(bits);
        uint16_t b = mt_f32_to_bf16(x), h = mt_f32_to_f16(x);
        uint8_t e = mt_f32_to_e4m3(x);
        if (b != bf[i] || h != hf[i] || e != q[i]) {
            if (bad++ < 8)
                printf("x=%a (%08x): bf16 %04x/%04x fp16 %04x/%04x e4m3 %02x/%02x (host/device)\n",
                       (double)x, bits, b, bf[i], h, hf[i], e, q[i]);
        }
    }
    return bad;
}

static void test_encode_sweep(void **state)
{
    (void)state;
    if (!env.mod)
        compile_module();
    const unsigned batch = 1u << 24;
    static const uint32_t lows[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x2000, 0x3000,
                                    0x3001, 0x7fff, 0x8000, 0x8001, 0x9000, 0xffff};
    const unsigned nlows = (unsigned)(sizeof lows / sizeof lows[0]);
    uint16_t *bf = malloc((size_t)batch * 2), *hf = malloc((size_t)batch * 2);
    uint8_t *q = malloc(batch);
    assert_true(bf && hf && q);
    CUdeviceptr dbf = dalloc((size_t)batch * 2), dhf = dalloc((size_t)batch * 2), dq = dalloc(batch);
    CUdeviceptr dlows = dalloc(sizeof lows);
    CU(mt_cu.cuMemcpyHtoD(dlows, lows, sizeof lows));
    long bad = 0;
    /* Every float whose bits are a multiple of 61: ~70M values. */
    const unsigned long long stride = 61, total = (1ull << 32) / stride;
    for (unsigned long long done = 0; done < total; done += batch) {
        unsigned n = (unsigned)(total - done < batch ? total - done : batch);
        bad += encode_and_compare(done * stride, stride, n, NULL, 0, dbf, dhf, dq, dlows, bf, hf, q);
    }
    /* All top halves with low halves at each format's rounding point. */
    bad += encode_and_compare(0, 0, 65536u * nlows, lows, nlows, dbf, dhf, dq, dlows, bf, hf, q);
    mt_cu.cuMemFree(dbf);
    mt_cu.cuMemFree(dhf);
    mt_cu.cuMemFree(dq);
    mt_cu.cuMemFree(dlows);
    free(bf);
    free(hf);
    free(q);
    assert_int_equal(bad, 0);
}

static void test_quantizers(void **state)
{
    (void)state;
    if (!env.mod)
        compile_module();
    const unsigned n = 1u << 22;
    float *x = malloc((size_t)n * 4), *s = malloc((size_t)n * 4);
    float *s8 = malloc((size_t)n * 4), *sf8 = malloc((size_t)n * 4);
    int8_t *q8 = malloc(n);
    uint8_t *qf8 = malloc(n);
    assert_true(x && s && s8 && sf8 && q8 && qf8);
    mt_rng r;
    mt_rng_seed(&r, 2024);
    for (unsigned i = 0; i < n; i++) {
        /* Values over many binades, scales as amax / qmax would give. */
        x[i] = mt_rng_normal(&r) * ldexpf(1.0f, (int)(mt_rng_next(&r) % 40) - 20);
        s[i] = (0.5f + mt_rng_uniform(&r)) * ldexpf(1.0f, (int)(mt_rng_next(&r) % 30) - 22);
    }
    x[0] = 0.0f;
    x[1] = -0.0f;
    x[2] = INFINITY;
    x[3] = 1e30f;
    s[4] = 1.0f;
    x[4] = 2.5f;
    CUdeviceptr dx = dalloc((size_t)n * 4), ds = dalloc((size_t)n * 4), dq8 = dalloc(n), dqf8 = dalloc(n);
    CUdeviceptr ds8 = dalloc((size_t)n * 4), dsf8 = dalloc((size_t)n * 4);
    CU(mt_cu.cuMemcpyHtoD(dx, x, (size_t)n * 4));
    CU(mt_cu.cuMemcpyHtoD(ds, s, (size_t)n * 4));
    unsigned nn = n;
    void *args[] = {&dx, &ds, &nn, &dq8, &dqf8, &ds8, &dsf8};
    launch(env.quant, n, args);
    CU(mt_cu.cuMemcpyDtoH(q8, dq8, n));
    CU(mt_cu.cuMemcpyDtoH(qf8, dqf8, n));
    CU(mt_cu.cuMemcpyDtoH(s8, ds8, (size_t)n * 4));
    CU(mt_cu.cuMemcpyDtoH(sf8, dsf8, (size_t)n * 4));
    long bad = 0;
    for (unsigned i = 0; i < n; i++) {
        int8_t h8 = mt_quant_int8(x[i], s[i]);
        uint8_t hf8 = mt_quant_e4m3(x[i], s[i]);
        float a = fabsf(x[i]);
        float hs8 = mt_act_scale(a, MT_DTYPE_INT8), hsf8 = mt_act_scale(a, MT_DTYPE_FP8_E4M3);
        if (h8 != q8[i] || hf8 != qf8[i] || fbits(hs8) != fbits(s8[i]) || fbits(hsf8) != fbits(sf8[i])) {
            if (bad++ < 8)
                printf("x=%a s=%a: int8 %d/%d e4m3 %02x/%02x s8 %a/%a sf8 %a/%a (host/device)\n",
                       (double)x[i], (double)s[i], h8, q8[i], hf8, qf8[i], (double)hs8,
                       (double)s8[i], (double)hsf8, (double)sf8[i]);
        }
    }
    CUdeviceptr all[] = {dx, ds, dq8, dqf8, ds8, dsf8};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        mt_cu.cuMemFree(all[i]);
    free(x);
    free(s);
    free(s8);
    free(sf8);
    free(q8);
    free(qf8);
    assert_int_equal(bad, 0);
}

/* act_quant_wide.cuh's division steps, run from the templates' own header
 * (MT_TEMPLATE_DIR) as its kernels run them, fallback included: silu_steps
 * against silu() bit for bit; chunk_quotients (unbounded, and bounded where
 * |x / s| <= 448.5) quantized to int8 and e4m3 by quantize_pair against
 * quantize() of x and s, byte for byte, and against x / s bit for bit where
 * that is at least 2^-12 (below, every quotient quantizes to a signed
 * zero). For every bf16 and fp16 value x (the values act_quant quantizes),
 * against the scales of every bf16 amax in [1, 4) (the steps scale with the
 * exponent) and of the extremes. And the act kernels' own chunks
 * (chunk_values, silu by the steps, a chunk with a value outside their
 * domain done again by silu_by_division): every eight consecutive bf16 and
 * fp16 values as a chunk of gate values (up 1), against silu() rounded to
 * the element type, bit for bit (NaN for NaN), and the same eight values
 * through silu8 (the fused GEMM epilogues' silu) against silu(): zeros of
 * both signs, subnormals, values past 40 and 2^64, infinities and NaNs all
 * come in chunks of their own. */
static const char wide_src[] =
    "#include \"act_quant_wide.cuh\"\n"
    "__device__ void check(float x, float s, float q, unsigned *bad) {\n"
    "  const float ref = x / s;\n"
    "  if (fabsf(ref) >= 0x1p-12f && ref == ref && __float_as_uint(q) != __float_as_uint(ref))\n"
    "    atomicAdd(&bad[1], 1u);\n"
    "  if ((mt::quantize_pair<mt::e4m3_tag>(q, 0.0f) & 0xff) != mt::quantize<mt::e4m3_tag>(x, s) ||\n"
    "      (mt::quantize_pair<mt::s8_tag>(q, 0.0f) & 0xff) != mt::quantize<mt::s8_tag>(x, s))\n"
    "    atomicAdd(&bad[2], 1u);\n"
    "}\n"
    "extern \"C\" __global__ void wide_steps(const float *x, unsigned n, const float *s,\n"
    "    unsigned ns, unsigned *bad, unsigned *slow) {\n"
    "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i >= n) return;\n"
    "  const float v = x[i];\n"
    "  bool sl = false;\n"
    "  float g = mt::silu_steps(v, sl);\n"
    "  if (sl) { g = mt::silu(v); atomicAdd(&slow[0], 1u); }\n"
    "  if (__float_as_uint(g) != __float_as_uint(mt::silu(v))) atomicAdd(&bad[0], 1u);\n"
    "  float v8[8], q[8];\n"
    "  for (int k = 0; k < 8; k++) v8[k] = v;\n"
    "  for (unsigned j = 0; j < ns; j++) {\n"
    "    const mt::divisor d = mt::divisor_of(s[j]);\n"
    "    mt::chunk_quotients(v8, d, false, q);\n"
    "    check(v, s[j], q[7], bad);\n"
    "    if (fabsf(v / s[j]) <= 448.5f) {\n"
    "      mt::chunk_quotients(v8, d, true, q);\n"
    "      check(v, s[j], q[7], bad);\n"
    "      atomicAdd(&slow[1], 1u);\n"
    "    }\n"
    "  }\n"
    "}\n"
    "template <class T> __device__ void silu_chunks(unsigned one, unsigned *bad) {\n"
    "  const unsigned c = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (c >= 0x10000 / 8) return;\n"
    "  mt::chunk_raw k;\n"
    "  for (int q = 0; q < 4; q++) {\n"
    "    k.x.w[q] = (8 * c + 2 * q) | (8 * c + 2 * q + 1) << 16;\n"
    "    k.u.w[q] = one | one << 16;\n"
    "  }\n"
    "  k.w = 1.0f;\n"
    "  mt_quant_args a = {};\n"
    "  float v[8];\n"
    "  mt::chunk_values<T, 0, true>(a, k, v);\n"
    "  float g[8];\n"
    "  for (int q = 0; q < 8; q++) g[q] = q & 1 ? mt::hi_of<T>(k.x.w[q / 2]) : mt::lo_of<T>(k.x.w[q / 2]);\n"
    "  for (int q = 0; q < 8; q++) {\n"
    "    const float want = mt::round_to<T>(mt::silu(g[q]));\n"
    "    if (__float_as_uint(v[q]) != __float_as_uint(want) && !(v[q] != v[q] && want != want))\n"
    "      atomicAdd(bad, 1u);\n"
    "  }\n"
    "  float e[8];\n"
    "  for (int q = 0; q < 8; q++) e[q] = g[q];\n"
    "  mt::silu8(e);\n"
    "  for (int q = 0; q < 8; q++) {\n"
    "    const float want = mt::silu(g[q]);\n"
    "    if (__float_as_uint(e[q]) != __float_as_uint(want) && !(e[q] != e[q] && want != want))\n"
    "      atomicAdd(bad + 1, 1u);\n"
    "  }\n"
    "}\n"
    "extern \"C\" __global__ void silu_chunks_bf16(unsigned *bad) { silu_chunks<mt::bf16>(0x3f80u, bad); }\n"
    "extern \"C\" __global__ void silu_chunks_f16(unsigned *bad) { silu_chunks<mt::f16>(0x3c00u, bad); }\n";

static void test_wide_division_steps(void **state)
{
    (void)state;
    const char *tdir = getenv("MT_TEMPLATE_DIR");
    if (!tdir || !*tdir)
        fail_msg("MT_TEMPLATE_DIR is not set (CTest and scripts/gpu-env.sh set it to the templates)");
    char inc[1100];
    snprintf(inc, sizeof inc, "-I%s", tdir);
    CUmodule mod;
    CUfunction f;
    compile_source(wide_src, "wide_steps.cu", inc, &mod);
    CU(mt_cu.cuModuleGetFunction(&f, mod, "wide_steps"));
    const unsigned n = 2u << 16;
    float *x = malloc((size_t)n * 4), s[MT_TEST_QUANT_SCALES_MAX];
    assert_non_null(x);
    for (unsigned b = 0; b < 0x10000; b++) {
        x[b] = mt_bf16_to_f32((uint16_t)b);
        x[0x10000 + b] = mt_f16_to_f32((uint16_t)b);
    }
    unsigned ns = (unsigned)mt_test_quant_scales(s);
    CUdeviceptr dx = dalloc((size_t)n * 4), ds = dalloc(ns * 4), dbad = dalloc(12), dslow = dalloc(8);
    CU(mt_cu.cuMemcpyHtoD(dx, x, (size_t)n * 4));
    CU(mt_cu.cuMemcpyHtoD(ds, s, ns * 4));
    CU(mt_cu.cuMemsetD8(dbad, 0, 12));
    CU(mt_cu.cuMemsetD8(dslow, 0, 8));
    unsigned nn = n;
    void *args[] = {&dx, &nn, &ds, &ns, &dbad, &dslow};
    launch(f, n, args);
    unsigned bad[3], slow[2];
    CU(mt_cu.cuMemcpyDtoH(bad, dbad, 12));
    CU(mt_cu.cuMemcpyDtoH(slow, dslow, 8));
    printf("wide steps: silu %u values (%u by silu() itself), %u differ; quotients of %u pairs "
           "(%u of them bounded too): %u differ from the division, %u quantize otherwise\n", n,
           slow[0], bad[0], n * ns, slow[1], bad[1], bad[2]);
    /* The act kernels' chunks, and the fused GEMM epilogues' eight values
     * (silu8): 8192 a dtype, a thread each. */
    unsigned chunk_bad[2][2];
    CUdeviceptr dchunk = dalloc(8);
    for (int dt = 0; dt < 2; dt++) {
        CUfunction fc;
        CU(mt_cu.cuModuleGetFunction(&fc, mod, dt ? "silu_chunks_f16" : "silu_chunks_bf16"));
        CU(mt_cu.cuMemsetD8(dchunk, 0, 8));
        void *cargs[] = {&dchunk};
        launch(fc, 0x10000 / 8, cargs);
        CU(mt_cu.cuMemcpyDtoH(chunk_bad[dt], dchunk, 8));
    }
    printf("wide steps: act chunks of every bf16 and fp16 value (silu, up 1): %u and %u differ from "
           "silu(); silu8 of them: %u and %u differ\n", chunk_bad[0][0], chunk_bad[1][0], chunk_bad[0][1],
           chunk_bad[1][1]);
    CUdeviceptr all[] = {dx, ds, dbad, dslow, dchunk};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        mt_cu.cuMemFree(all[i]);
    mt_cu.cuModuleUnload(mod);
    free(x);
    assert_int_equal(bad[0], 0);
    assert_int_equal(bad[1], 0);
    assert_int_equal(bad[2], 0);
    for (int dt = 0; dt < 2; dt++) {
        assert_int_equal(chunk_bad[dt][0], 0);
        assert_int_equal(chunk_bad[dt][1], 0);
    }
}

int main(void)
{
    mt_test_require_gpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compile),
        cmocka_unit_test(test_decode_all_encodings),
        cmocka_unit_test(test_encode_sweep),
        cmocka_unit_test(test_quantizers),
        cmocka_unit_test(test_wide_division_steps),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

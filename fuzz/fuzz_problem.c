/*
 * libFuzzer harness: the runtime's problem validation. The input's first
 * bytes fill an mt_problem field by field (each integer from 8 bytes, each
 * enum and flag from 4, so every value, out-of-range enums included, is
 * reachable; small values are favoured by a selector byte); the rest is up
 * to six variant lines, one per pipeline step (the quant step last), parsed with
 * mt_variant_parse and placed in a plan with stand-in function handles (no
 * GPU). Then mt_problem_validate, mt_moe_plan_check, and for a problem and
 * plan that pass, mt_moe_workspace_size, the database key of the problem
 * (its text must parse back to the same key) and mt_moe_run itself against
 * a driver table of stand-ins that check what a real driver would refuse
 * (grid, block and shared-memory sizes; a TMA descriptor's dims, strides and
 * box) instead of launching. May call: common, runtime/moe_launch,
 * moetune/db, fuzz_util.
 */
#include <stdio.h>
#include <string.h>

#include "common/cuda_driver.h"
#include "fuzz/fuzz_util.h"
#include "moetune/db.h"
#include "moetune/problem.h"
#include "runtime/moe_launch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- stand-ins for the driver: what mt_moe_run enqueues must be what a
 * real driver accepts ---- */

static CUresult check_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned smem, CUstream s, void **params,
                             void **extra)
{
    (void)s, (void)extra;
    FUZZ_CHECK(f != NULL && params != NULL && params[0] != NULL);
    FUZZ_CHECK(gx >= 1 && gx <= 0x7fffffffu && gy == 1 && gz == 1);
    FUZZ_CHECK(bx >= 1 && bx <= 1024 && by == 1 && bz == 1);
    FUZZ_CHECK(smem <= 227 * 1024);
    return CUDA_SUCCESS;
}

static CUresult check_memset(CUdeviceptr p, unsigned v, size_t n, CUstream s)
{
    (void)v, (void)s;
    FUZZ_CHECK(p != 0 && n > 0);
    return CUDA_SUCCESS;
}

/* The driver's documented limits for a tiled descriptor; a map outside
 * them is refused as a real driver would (the caller must report it). */
static CUresult check_encode(CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank, void *base,
                             const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
                             const cuuint32_t *unit, CUtensorMapInterleave il, CUtensorMapSwizzle sw,
                             CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill fill)
{
    (void)type, (void)unit, (void)il, (void)l2, (void)fill;
    FUZZ_CHECK(map != NULL && rank >= 1 && rank <= 5);
    memset(map, 0, sizeof *map);
    int ok = ((uintptr_t)base % 16) == 0;
    for (cuuint32_t i = 0; i < rank; i++) {
        ok &= dims[i] >= 1 && dims[i] <= (1ull << 32) && box[i] >= 1 && box[i] <= 256;
        if (i + 1 < rank)
            ok &= strides[i] % 16 == 0 && strides[i] < (1ull << 40);
    }
    ok &= sw != CU_TENSOR_MAP_SWIZZLE_128B || box[0] * (type == CU_TENSOR_MAP_DATA_TYPE_UINT8 ? 1 : 2) <= 128;
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult error_text(CUresult r, const char **out)
{
    (void)r;
    *out = "stand-in error";
    return CUDA_SUCCESS;
}

static void stand_in_driver(void)
{
    memset(&mt_cu, 0, sizeof mt_cu);
    mt_cu.cuLaunchKernel = check_launch;
    mt_cu.cuMemsetD32Async = check_memset;
    mt_cu.cuTensorMapEncodeTiled = check_encode;
    mt_cu.cuGetErrorName = error_text;
    mt_cu.cuGetErrorString = error_text;
}

static int take_small(fuzz_in *in)
{
    uint8_t sel = fuzz_u8(in);
    if (sel < 240)
        return sel % 12 - 1;   /* -1 .. 10: every enum value and a few outside */
    return (int)fuzz_u32(in);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in in = {data, size};
    mt_problem p;
    memset(&p, 0, sizeof p);
    p.M = fuzz_int(&in);
    p.E = fuzz_int(&in);
    p.topk = fuzz_int(&in);
    p.K = fuzz_int(&in);
    p.N = fuzz_int(&in);
    p.dtype = (mt_dtype)take_small(&in);
    p.topk_ids_dtype = (mt_dtype)take_small(&in);
    p.quant.mode = (mt_quant_mode)take_small(&in);
    p.quant.group_size = (int)fuzz_int(&in);
    p.quant.has_zero_point = take_small(&in);
    p.quant.static_act_scale = take_small(&in);
    p.format = (mt_act_format)take_small(&in);
    p.activation = (mt_activation)take_small(&in);
    p.has_expert_map = take_small(&in);
    p.local_E = fuzz_int(&in);
    p.apply_router_weight_on_input = take_small(&in);
    p.max_tokens = fuzz_int(&in);

    char msg[512];
    msg[0] = 'x';
    mt_status st = mt_problem_validate(&p, msg, sizeof msg);
    FUZZ_CHECK(memchr(msg, 0, sizeof msg) != NULL);
    if (st == MT_OK) {
        /* The documented caps that keep the kernels' int32 indices safe. */
        FUZZ_CHECK(p.M >= 0 && p.M <= MT_MAX_TOKENS && p.E >= 1 && p.E <= MT_MAX_EXPERTS);
        FUZZ_CHECK(p.topk >= 1 && p.topk <= p.E);
        FUZZ_CHECK(p.K >= 8 && p.K <= MT_MAX_DIM && p.K % 8 == 0);
        FUZZ_CHECK(p.N >= 8 && p.N <= MT_MAX_DIM && p.N % 8 == 0);
        FUZZ_CHECK(p.local_E >= 1 && p.local_E <= p.E);
        FUZZ_CHECK(mt_dtype_name(p.dtype) != NULL && mt_quant_mode_name(p.quant.mode) != NULL);
        mt_db_key k, back;
        memset(&k, 0, sizeof k);
        memset(&back, 0, sizeof back);
        /* Known finding R4 (docs/RELIABILITY.md): validation accepts flags
         * other than 0/1, whose key text does not parse back. */
        int flags01 = (unsigned)p.apply_router_weight_on_input <= 1 &&
                      (unsigned)p.has_expert_map <= 1 && (unsigned)p.quant.has_zero_point <= 1;
        if ((flags01 || !FUZZ_KNOWN(1)) &&
            mt_db_key_from_problem(&p, "NVIDIA H200", NULL, &k) == MT_OK) {
            char text[512];
            FUZZ_CHECK(mt_db_key_format(&k, text, sizeof text) == MT_OK);
            char why[256] = "";
            if (mt_db_key_parse(text, "NVIDIA H200", &back, why, sizeof why) != MT_OK)
                fprintf(stderr, "key '%s' does not parse back: %s\n", text, why);
            FUZZ_CHECK(mt_db_key_parse(text, "NVIDIA H200", &back, NULL, 0) == MT_OK);
            FUZZ_CHECK(memcmp(&k, &back, sizeof k) == 0);
        }
    }

    /* The plan: variant lines from the rest of the input. */
    mt_moe_plan plan;
    memset(&plan, 0, sizeof plan);
    char line[4096];
    for (int s = 0; s < MT_STEP_ALL && in.n > 0; s++) {
        size_t n = 0;
        while (n < in.n && in.p[n] != '\n')
            n++;
        size_t keep = n < sizeof line - 1 ? n : sizeof line - 1;
        memcpy(line, in.p, keep);
        line[keep] = '\0';
        in.p += n < in.n ? n + 1 : n;
        in.n -= n < in.n ? n + 1 : n;
        if (mt_variant_parse(line, &plan.step[s].v, NULL, 0) == MT_OK)
            plan.step[s].fn = (CUfunction)(uintptr_t)(s + 1);   /* never called */
    }
    /* regress_R2_no_epilogue: a gemm1 variant without an "epilogue"
     * parameter once made the plan check dereference NULL (R2, fixed). */
    st = mt_moe_plan_check(&plan, &p, msg, sizeof msg);
    /* Known finding R7 (docs/RELIABILITY.md): the plan check accepts any
     * BLOCK_M, and the workspace size then divides by 0 or overflows. */
    int64_t bm = mt_variant_int(&plan.step[MT_STEP_GEMM1].v, "BLOCK_M", 16);
    if (st == MT_OK && FUZZ_KNOWN(bm < 1 || bm > 4096))
        return 0;
    if (st == MT_OK) {
        size_t ws = mt_moe_workspace_size(&plan, &p);
        FUZZ_CHECK(ws > 0);
        /* The run on stand-in device pointers (16-byte aligned, never
         * dereferenced): it refuses or enqueues launches a driver accepts. */
        stand_in_driver();
        uintptr_t a = 0x100000;
        mt_moe_tensors t;
        memset(&t, 0, sizeof t);
        t.hidden = (void *)(a += 0x100000);
        t.w1 = (void *)(a += 0x100000);
        t.w2 = (void *)(a += 0x100000);
        t.out = (void *)(a += 0x100000);
        t.topk_ids = (void *)(a += 0x100000);
        t.topk_weights = (void *)(a += 0x100000);
        t.expert_num_tokens = (void *)(a += 0x100000);
        t.expert_map = (void *)(a += 0x100000);
        t.w1_scale = t.w2_scale = (void *)(a += 0x100000);
        t.w1_zero = t.w2_zero = (void *)(a += 0x100000);
        t.a1_scale = t.a2_scale = (void *)(a += 0x100000);
        msg[0] = 'x';
        st = mt_moe_run(&plan, &p, &t, (CUdeviceptr)0x40000000u, ws, NULL, msg, sizeof msg);
        FUZZ_CHECK(memchr(msg, 0, sizeof msg) != NULL);
        FUZZ_CHECK(st == MT_OK || msg[0] != '\0');
    }
    return 0;
}

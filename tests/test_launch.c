/*
 * mt_moe_run's host side against a fake driver table (no GPU): the launch
 * sequence of a default pipeline and the TMA descriptors of BLOAD=tma
 * kernels (templates/moe_args.h b_map), encoded per launch with the
 * weights' view (K x rows x parts x experts), and the clear error when the
 * driver lacks the encoder. The kernels themselves are proved on the GPU
 * (tests/gpu); here every driver call is recorded instead of made.
 */
#include "tests/support.h"

#include <stdint.h>
#include <string.h>

#include "common/cuda_driver.h"
#include "runtime/moe_launch.h"
#include "runtime/rt_internal.h"
#include "templates/gemv_args.h"

/* ---- the fake driver ---- */

typedef struct encode_call {
    CUtensorMapDataType type;
    cuuint32_t rank;
    void *base;
    cuuint64_t dims[5], strides[4];
    cuuint32_t box[5];
    CUtensorMapSwizzle swizzle;
    CUtensorMapFloatOOBfill fill;
} encode_call;

static struct {
    const mt_moe_plan *plan;
    int launches;
    mt_step launched[16];
    int encodes;
    encode_call enc[4];
    mt_gemm_args gemm[2];    /* the arguments gemm1 and gemm2 were launched with */
    mt_gemv_slot_args route[2]; /* the same, for slot-routed GEMMs (grouped_gemv, BLOCK_M 1) and
                                 * those quantizing GEMM1's output (OQUANT=last) */
    mt_gemv_chain_args chain;   /* ... and for a GEMM1 running GEMM2 in its launch (CHAIN) */
    unsigned step_grid[MT_STEP_ALL]; /* the last grid of every step */
    int step_dependent[MT_STEP_ALL]; /* its last launch: programmatic (cuLaunchKernelEx) */
    int dependent;           /* the launch being recorded is (fake_launch_ex) */
    mt_act_args act;         /* the arguments of the last act_and_mul launch */
    mt_reduce_args reduce;   /* ... and of the last reduce launch */
    mt_quant_args quant[2];  /* ... of the quant step and of an act_quant act step */
    int32_t flag;            /* the error flag cuMemcpyDtoH "reads" */
    int memsets;
    CUdeviceptr memset_at[4];
    size_t memset_words[4];
} fake;

static int slot_routed(const mt_variant *v)
{
    return !strcmp(v->family, "grouped_gemv") && mt_variant_int(v, "BLOCK_M", 0) == 1;
}

static CUresult fake_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                            unsigned by, unsigned bz, unsigned smem, CUstream s, void **params,
                            void **extra)
{
    (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)smem, (void)s, (void)extra;
    for (int st = 0; st < MT_STEP_ALL; st++)
        if (fake.plan->step[st].fn == f) {
            if (fake.launches < 16)
                fake.launched[fake.launches] = (mt_step)st;
            fake.step_grid[st] = gx;
            fake.step_dependent[st] = fake.dependent;
            if ((st == MT_STEP_GEMM1 || st == MT_STEP_GEMM2) &&
                (slot_routed(&fake.plan->step[st].v) || mt_variant_quantizes_out(&fake.plan->step[st].v)))
                memcpy(&fake.route[st == MT_STEP_GEMM2], params[0], sizeof(mt_gemv_slot_args));
            if (st == MT_STEP_GEMM1 && mt_variant_chain(&fake.plan->step[st].v) > 0)
                memcpy(&fake.chain, params[0], sizeof(mt_gemv_chain_args));
            if (st == MT_STEP_GEMM1 || st == MT_STEP_GEMM2)
                memcpy(&fake.gemm[st == MT_STEP_GEMM2], params[0], sizeof(mt_gemm_args));
            if (st == MT_STEP_ACT && !strcmp(fake.plan->step[st].v.family, "act_and_mul"))
                memcpy(&fake.act, params[0], sizeof(mt_act_args));
            if (st == MT_STEP_REDUCE)
                memcpy(&fake.reduce, params[0], sizeof(mt_reduce_args));
            if (st == MT_STEP_QUANT ||
                (st == MT_STEP_ACT && !strcmp(fake.plan->step[st].v.family, "act_quant")))
                memcpy(&fake.quant[st == MT_STEP_ACT], params[0], sizeof(mt_quant_args));
        }
    fake.launches++;
    return CUDA_SUCCESS;
}

/* A launch through cuLaunchKernelEx: recorded as a plain one, marked
 * dependent if its attributes allow programmatic serialization. */
static CUresult fake_launch_ex(const CUlaunchConfig *cfg, CUfunction f, void **params, void **extra)
{
    fake.dependent = 0;
    for (unsigned i = 0; i < cfg->numAttrs; i++)
        fake.dependent |= cfg->attrs[i].id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION &&
                          cfg->attrs[i].value.programmaticStreamSerializationAllowed;
    const CUresult r = fake_launch(f, cfg->gridDimX, cfg->gridDimY, cfg->gridDimZ, cfg->blockDimX,
                                   cfg->blockDimY, cfg->blockDimZ, cfg->sharedMemBytes, cfg->hStream, params, extra);
    fake.dependent = 0;
    return r;
}

static CUresult fake_memset(CUdeviceptr p, unsigned v, size_t n, CUstream s)
{
    (void)s;
    assert_int_equal(v, 0);
    if (fake.memsets < 4) {
        fake.memset_at[fake.memsets] = p;
        fake.memset_words[fake.memsets] = n;
    }
    fake.memsets++;
    return CUDA_SUCCESS;
}

/* The workspace's first word as the device left it: fake.flag. */
static CUresult fake_dtoh(void *dst, CUdeviceptr src, size_t bytes)
{
    assert_int_equal(src, 0x80000000u);
    assert_int_equal(bytes, sizeof fake.flag);
    memcpy(dst, &fake.flag, sizeof fake.flag);
    return CUDA_SUCCESS;
}

static CUresult fake_encode(CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank, void *base,
                            const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
                            const cuuint32_t *unit, CUtensorMapInterleave il, CUtensorMapSwizzle sw,
                            CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill fill)
{
    (void)unit, (void)il, (void)l2;
    encode_call *c = &fake.enc[fake.encodes % 4];
    memset(c, 0, sizeof *c);
    c->type = type;
    c->rank = rank;
    c->base = base;
    memcpy(c->dims, dims, rank * sizeof *dims);
    memcpy(c->strides, strides, (rank - 1) * sizeof *strides);
    memcpy(c->box, box, rank * sizeof *box);
    c->swizzle = sw;
    c->fill = fill;
    /* A recognisable descriptor: the call's number in every byte. */
    memset(map, 0xA0 + fake.encodes, sizeof *map);
    fake.encodes++;
    return CUDA_SUCCESS;
}

static void fake_driver(int with_encoder)
{
    memset(&mt_cu, 0, sizeof mt_cu);
    mt_cu.cuLaunchKernel = fake_launch;
    mt_cu.cuMemsetD32Async = fake_memset;
    mt_cu.cuMemcpyDtoH = fake_dtoh;
    mt_cu.cuTensorMapEncodeTiled = with_encoder ? fake_encode : NULL;
    /* cuLaunchKernelEx NULL: no dependent launches, every launch is plain. */
}

/* ---- a default pipeline for p at p->M, its kernels "loaded" ---- */

static void default_plan(const mt_problem *p, mt_moe_plan *plan)
{
    char msg[512];
    mt_db_pipeline pl;
    memset(plan, 0, sizeof *plan);
    assert_int_equal(mt_rt_default_pipeline(p, p->M, "sm_90a", &pl, msg, sizeof msg), MT_OK);
    for (int i = 0; i < pl.nsteps; i++) {
        mt_step s = MT_STEP_ALL;
        for (int k = 0; k < MT_STEP_ALL; k++)
            if (!strcmp(mt_step_name((mt_step)k), pl.steps[i].role))
                s = (mt_step)k;
        assert_true(s < MT_STEP_ALL);
        char *src = NULL;
        assert_int_equal(mt_rt_default_get(pl.steps[i].kernel, &plan->step[s].v, &src, msg, sizeof msg),
                         MT_OK);
        free(src);
        plan->step[s].fn = (CUfunction)(uintptr_t)(0x1000 + 0x10 * s);   /* never called */
    }
    fake.plan = plan;
}

/* Device "pointers": distinct, 256-byte aligned, never dereferenced. */
static mt_moe_tensors fake_tensors(void)
{
    uintptr_t a = 0x10000000;
    mt_moe_tensors t;
    memset(&t, 0, sizeof t);
    t.hidden = (void *)(a += 0x1000000);
    t.w1 = (void *)(a += 0x1000000);
    t.w2 = (void *)(a += 0x1000000);
    t.out = (void *)(a += 0x1000000);
    t.topk_ids = (void *)(a += 0x1000000);
    t.topk_weights = (void *)(a += 0x1000000);
    t.w1_scale = (void *)(a += 0x1000000);
    t.w2_scale = (void *)(a += 0x1000000);
    return t;
}

static mt_status run(const mt_moe_plan *plan, const mt_problem *p, const mt_moe_tensors *t,
                     char *msg, size_t msg_size)
{
    fake.launches = fake.encodes = fake.memsets = 0;
    memset(fake.gemm, 0, sizeof fake.gemm);
    memset(&fake.reduce, 0, sizeof fake.reduce);
    const size_t ws = mt_moe_workspace_size(plan, p);
    return mt_moe_run(plan, p, t, (CUdeviceptr)0x80000000u, ws, NULL, msg, msg_size);
}

static void expect_map(const encode_call *c, const void *base, cuuint32_t type, cuuint64_t k,
                       cuuint64_t rows, cuuint64_t parts, cuuint64_t experts, cuuint64_t es,
                       cuuint64_t expert_stride_elems, cuuint32_t box_rows)
{
    assert_int_equal(c->rank, 4);
    assert_ptr_equal(c->base, base);
    assert_int_equal(c->type, type);
    assert_int_equal(c->dims[0], k);
    assert_int_equal(c->dims[1], rows);
    assert_int_equal(c->dims[2], parts);
    assert_int_equal(c->dims[3], experts);
    assert_int_equal(c->strides[0], k * es);             /* a weight row */
    assert_int_equal(c->strides[1], rows * k * es);      /* gate rows -> up rows */
    assert_int_equal(c->strides[2], expert_stride_elems * es);
    assert_int_equal(c->box[0] * es, 128);               /* one 128-byte line of K */
    assert_int_equal(c->box[1], box_rows);
    assert_int_equal(c->box[2], 1);
    assert_int_equal(c->box[3], 1);
    assert_int_equal(c->swizzle, CU_TENSOR_MAP_SWIZZLE_128B);
    assert_int_equal(c->fill, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

/* bf16 at 128-row tiles: 128x256 "ws" tiles with TMA, GEMM1 fusing silu. */
/* The quantization tensors are checked before anything is enqueued, by one
 * function for mt_moe_run and the engine-facing objects (a batched modular
 * kernel once enqueued its dispatch before finding a NULL w1_scale, an EP
 * call its exchange). */
static void test_quant_tensor_checks(void **state)
{
    (void)state;
    mt_quant_config qc;
    memset(&qc, 0, sizeof qc);
    qc.mode = MT_QUANT_INT8_PER_TOKEN;
    mt_moe_tensors t;
    memset(&t, 0, sizeof t);
    char msg[128];
    assert_int_equal(mt_moe_check_quant_tensors(&qc, &t, 1, msg, sizeof msg), MT_ERR_INVALID_ARG);
    assert_string_equal(msg, "w1_scale is NULL");
    t.w1_scale = (const float *)(uintptr_t)0x1000;
    assert_int_equal(mt_moe_check_quant_tensors(&qc, &t, 0, msg, sizeof msg), MT_ERR_INVALID_ARG);
    assert_string_equal(msg, "w2_scale is NULL");
    t.w2_scale = (const float *)(uintptr_t)0x1002;
    assert_int_equal(mt_moe_check_quant_tensors(&qc, &t, 1, msg, sizeof msg), MT_ERR_ALIGNMENT);
    assert_non_null(strstr(msg, "w2_scale"));
    assert_non_null(strstr(msg, "4-byte aligned"));
    t.w2_scale = (const float *)(uintptr_t)0x1004;
    assert_int_equal(mt_moe_check_quant_tensors(&qc, &t, 1, msg, sizeof msg), MT_OK);
    /* An unused tensor: refused when strict, let pass otherwise. */
    t.a1_scale = (const float *)(uintptr_t)0x2000;
    assert_int_equal(mt_moe_check_quant_tensors(&qc, &t, 1, msg, sizeof msg), MT_ERR_INVALID_ARG);
    assert_string_equal(msg, "a1_scale must be NULL for this problem");
    assert_int_equal(mt_moe_check_quant_tensors(&qc, &t, 0, msg, sizeof msg), MT_OK);
    qc.static_act_scale = 1;
    assert_int_equal(mt_moe_check_quant_tensors(&qc, &t, 1, msg, sizeof msg), MT_ERR_INVALID_ARG);
    assert_string_equal(msg, "a2_scale is NULL");
    /* No quant mode: the scales must be NULL when strict. */
    memset(&qc, 0, sizeof qc);
    memset(&t, 0, sizeof t);
    assert_int_equal(mt_moe_check_quant_tensors(&qc, &t, 1, msg, sizeof msg), MT_OK);
    t.w2_scale = (const float *)(uintptr_t)0x1000;
    assert_int_equal(mt_moe_check_quant_tensors(&qc, &t, 1, msg, sizeof msg), MT_ERR_INVALID_ARG);
    assert_string_equal(msg, "w2_scale must be NULL for this problem");
    /* Zero points with has_zero_point (w4a16 with zeros). */
    qc.mode = MT_QUANT_W4A16;
    qc.has_zero_point = 1;
    t.w1_scale = (const float *)(uintptr_t)0x1000;
    assert_int_equal(mt_moe_check_quant_tensors(&qc, &t, 1, msg, sizeof msg), MT_ERR_INVALID_ARG);
    assert_string_equal(msg, "w1_zero is NULL");
}

static void test_bf16_weight_maps(void **state)
{
    (void)state;
    mt_problem p;
    mt_problem_init(&p, 4096, 8, 2, 512, 384);   /* 1024 rows per expert */
    mt_moe_plan plan;
    default_plan(&p, &plan);
    const mt_variant *g1 = &plan.step[MT_STEP_GEMM1].v, *g2 = &plan.step[MT_STEP_GEMM2].v;
    assert_string_equal(mt_variant_get(g1, "BLOAD"), "tma");
    assert_string_equal(mt_variant_get(g1, "epilogue"), "silu");
    assert_string_equal(mt_variant_get(g2, "BLOAD"), "tma");
    const int64_t bn1 = mt_variant_int(g1, "BLOCK_N", 0), bn2 = mt_variant_int(g2, "BLOCK_N", 0);
    fake_driver(1);
    mt_moe_tensors t = fake_tensors();
    char msg[512] = "";
    assert_int_equal(run(&plan, &p, &t, msg, sizeof msg), MT_OK);
    assert_int_equal(fake.encodes, 2);
    /* w1 [E, 2N, K]: parts 0 (gate) and 1 (up) of N rows, half a tile each. */
    expect_map(&fake.enc[0], t.w1, CU_TENSOR_MAP_DATA_TYPE_UINT16, 512, 384, 2, 8, 2,
               2 * 384 * 512, (cuuint32_t)bn1 / 2);
    /* w2 [E, K, N]: rows are the K output columns, one part. */
    expect_map(&fake.enc[1], t.w2, CU_TENSOR_MAP_DATA_TYPE_UINT16, 384, 512, 1, 8, 2, 512 * 384,
               (cuuint32_t)bn2);
    /* Each GEMM was launched with its own descriptor. */
    unsigned char want[128];
    memset(want, 0xA0, sizeof want);
    assert_memory_equal(fake.gemm[0].b_map, want, sizeof want);
    memset(want, 0xA1, sizeof want);
    assert_memory_equal(fake.gemm[1].b_map, want, sizeof want);
    /* align (two launches for this many slots: count, then place), gemm1,
     * gemm2, reduce; nothing else (the activation is fused). */
    assert_int_equal(fake.launches, 5);
    assert_int_equal(fake.launched[0], MT_STEP_ALIGN);
    assert_int_equal(fake.launched[1], MT_STEP_ALIGN);
    assert_int_equal(fake.launched[2], MT_STEP_GEMM1);
    assert_int_equal(fake.launched[3], MT_STEP_GEMM2);
    assert_int_equal(fake.launched[4], MT_STEP_REDUCE);
}

/* The quantizers' grids with UNITS `units` and max_ctas as each case says. */
typedef struct quant_grid_case {
    int max_ctas;
    unsigned quant_grid, act_grid;
} quant_grid_case;

/* Both tests' problem has 262144 threads' work in either step at UNITS 1
 * (1024 CTAs of 256): with UNITS 4 a quarter of that, at least max_ctas,
 * at most all of it. */
static const quant_grid_case wide_cases[] = {{0, 256, 256}, {100, 256, 256}, {700, 700, 700},
                                             {5000, 1024, 1024}};

static void expect_quant_grids(mt_moe_plan *plan, const mt_problem *p, const mt_moe_tensors *t,
                               const char *units, const quant_grid_case *cases, size_t n)
{
    char msg[512] = "";
    mt_kernel *steps[] = {&plan->step[MT_STEP_QUANT], &plan->step[MT_STEP_ACT]};
    for (int k = 0; k < 2; k++) {
        assert_string_equal(mt_variant_get(&steps[k]->v, "ARITH"), "steps");
        for (int i = 0; i < steps[k]->v.nparams; i++)
            if (!strcmp(steps[k]->v.params[i].name, "UNITS"))
                mt_strlcpy(steps[k]->v.params[i].value, units, sizeof steps[k]->v.params[i].value);
        assert_int_equal(mt_variant_int(&steps[k]->v, "UNITS", 1), atoi(units));
    }
    for (size_t i = 0; i < n; i++) {
        plan->step[MT_STEP_QUANT].max_ctas = plan->step[MT_STEP_ACT].max_ctas = cases[i].max_ctas;
        fake_driver(1);
        assert_int_equal(run(plan, p, t, msg, sizeof msg), MT_OK);
        assert_int_equal(fake.step_grid[MT_STEP_QUANT], cases[i].quant_grid);
        assert_int_equal(fake.step_grid[MT_STEP_ACT], cases[i].act_grid);
    }
}

/* The default plan of the w8a8 tests: M 4096, E 8, topk 2, K 512, N 256. */
static void w8a8_plan(mt_quant_mode mode, mt_problem *p, mt_moe_plan *plan)
{
    mt_problem_init(p, 4096, 8, 2, 512, 256);
    p->quant.mode = mode;
    default_plan(p, plan);
}

/* fp8 block-wise: 8-bit weights, a 128-element line of K. */
static void test_fp8_weight_maps(void **state)
{
    (void)state;
    mt_problem p;
    mt_moe_plan plan;
    w8a8_plan(MT_QUANT_FP8_BLOCK, &p, &plan);
    assert_string_equal(mt_variant_get(&plan.step[MT_STEP_GEMM1].v, "BLOAD"), "tma");
    fake_driver(1);
    mt_moe_tensors t = fake_tensors();
    char msg[512] = "";
    mt_status st = run(&plan, &p, &t, msg, sizeof msg);
    assert_int_equal(st, MT_OK);
    assert_int_equal(fake.encodes, 2);
    const int64_t bn1 = mt_variant_int(&plan.step[MT_STEP_GEMM1].v, "BLOCK_N", 0);
    const char *epi = mt_variant_get(&plan.step[MT_STEP_GEMM1].v, "epilogue");
    const int fused = strcmp(epi, "store") != 0;
    expect_map(&fake.enc[0], t.w1, CU_TENSOR_MAP_DATA_TYPE_UINT8, 512, fused ? 256 : 512,
               fused ? 2 : 1, 8, 1, 2 * 256 * 512, (cuuint32_t)(fused ? bn1 / 2 : bn1));
    /* The activation quantizers: a warp per pass of 32 chunks of a row, 8
     * warps a CTA: the hidden rows (4096 of 64 chunks: two passes) before
     * GEMM1, the 8192 slots' GEMM2 inputs (32 chunks: one) after it, 1024
     * CTAs each with one pass a warp (UNITS 1). A wide quantizer (UNITS 4,
     * the default) gets 4 passes a warp (256 CTAs), but at least the CTAs
     * the GPU holds at once (max_ctas; 0: unknown to this fake driver) and
     * at most a pass a warp. */
    const int tq = plan.step[MT_STEP_QUANT].v.threads, ta = plan.step[MT_STEP_ACT].v.threads;
    assert_int_equal(tq, 256);
    assert_int_equal(ta, 256);
    assert_int_equal(fake.step_grid[MT_STEP_QUANT], 256);
    assert_int_equal(fake.step_grid[MT_STEP_ACT], 256);
    expect_quant_grids(&plan, &p, &t, "1", (const quant_grid_case[]){{0, 1024, 1024}, {5000, 1024, 1024}}, 2);
    expect_quant_grids(&plan, &p, &t, "4", wide_cases, 4);
}

/* Per tensor, a thread takes 8-element chunks: a wide quantizer (UNITS 4)
 * gets 4 chunks a thread, but at least the CTAs the GPU holds at once
 * (max_ctas; 0: unknown to this fake driver) and at most a chunk a thread. */
static void test_wide_tensor_quant_grid(void **state)
{
    (void)state;
    mt_problem p;
    mt_moe_plan plan;
    w8a8_plan(MT_QUANT_FP8_PER_TENSOR, &p, &plan);
    fake_driver(1);
    mt_moe_tensors t = fake_tensors();
    /* 4096 hidden rows of 64 chunks, 8192 GEMM2 input rows of 32. */
    expect_quant_grids(&plan, &p, &t, "4", wide_cases, 4);
}

/* A driver without cuTensorMapEncodeTiled: a clear error naming the step,
 * the kernel and the missing entry point, and no GEMM launched; at a
 * prefill size and at a decode one (sm_90a's swapped default tiles take
 * their weights by TMA too). */
static void test_no_encoder(void **state)
{
    (void)state;
    static const int64_t Ms[] = {4096, 4};
    for (size_t m = 0; m < MT_ARRAY_LEN(Ms); m++) {
        mt_problem p;
        mt_problem_init(&p, Ms[m], 8, 2, 512, 384);
        mt_moe_plan plan;
        default_plan(&p, &plan);
        fake_driver(0);
        mt_moe_tensors t = fake_tensors();
        char msg[512] = "";
        assert_int_equal(run(&plan, &p, &t, msg, sizeof msg), MT_ERR_NO_DRIVER);
        assert_non_null(strstr(msg, "cuTensorMapEncodeTiled"));
        assert_non_null(strstr(msg, "gemm1"));
        assert_non_null(strstr(msg, plan.step[MT_STEP_GEMM1].v.name));
        for (int i = 0; i < fake.launches && i < 16; i++)
            assert_int_not_equal(fake.launched[i], MT_STEP_GEMM1);
    }
}

/* Kernels without TMA need no descriptor: grouped_gemm's mma.sync tiles,
 * the per-tensor modes' default at decode on sm_90a (common/defaults.c). */
static void test_no_map_for_other_kernels(void **state)
{
    (void)state;
    mt_problem p;
    mt_problem_init(&p, 4, 8, 2, 512, 384);
    p.quant.mode = MT_QUANT_FP8_PER_TENSOR;
    mt_moe_plan plan;
    default_plan(&p, &plan);
    assert_null(mt_variant_get(&plan.step[MT_STEP_GEMM1].v, "BLOAD"));
    fake_driver(0);   /* and none is needed */
    mt_moe_tensors t = fake_tensors();
    char msg[512] = "";
    assert_int_equal(run(&plan, &p, &t, msg, sizeof msg), MT_OK);
    assert_int_equal(fake.encodes, 0);
    assert_true(fake.launches >= 4);
}

/* Step s of plan becomes the built-in default variant `name`. */
static void set_gemm(mt_moe_plan *plan, mt_step s, const char *name)
{
    char msg[256], *src = NULL;
    if (mt_rt_default_get(name, &plan->step[s].v, &src, msg, sizeof msg))
        fail_msg("%s: %s", name, msg);
    free(src);
}

/* v's BLOCK_M text becomes `value`, as a damaged database's variant text
 * could say, the kernel behind it unchanged. */
static void claim_block_m(mt_variant *v, const char *value)
{
    for (int i = 0; i < v->nparams; i++)
        if (!strcmp(v->params[i].name, "BLOCK_M"))
            strcpy(v->params[i].value, value);
}

/* CTA pairs (CLUSTER 2): each CTA brings in half a weight tile, so both
 * descriptors have boxes of BLOCK_N / 2 rows (GEMM2's plain tile too); the
 * grid is whole pairs, at most the CTAs the GPU holds at once. */
static void test_pair_weight_maps(void **state)
{
    (void)state;
    static const char *const g1 = "mtk_grouped_gemm_sm90_bf16_none_standard_silu_m128_n256_k64_g8_s4_ppersist"
                                  "_fwait_btma_e32_c2",
                          *const g2 = "mtk_grouped_gemm_sm90_bf16_none_standard_store_m128_n256_k64_g8_s4_ppersist"
                                      "_fwait_btma_e32_c2";
    /* M 4096: 1024 rows per expert; M 40: 80 slots, a few tiles. */
    const struct { int M, max_ctas; } cases[] = {{4096, 132}, {4096, 0}, {40, 132}, {40, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mt_problem p;
        mt_problem_init(&p, cases[i].M, 8, 2, 512, 384);
        mt_moe_plan plan;
        default_plan(&p, &plan);
        set_gemm(&plan, MT_STEP_GEMM1, g1);
        set_gemm(&plan, MT_STEP_GEMM2, g2);
        const mt_step gemms[2] = {MT_STEP_GEMM1, MT_STEP_GEMM2};
        for (int g = 0; g < 2; g++) {
            assert_int_equal(mt_variant_int(&plan.step[gemms[g]].v, "CLUSTER", 1), 2);
            plan.step[gemms[g]].cluster = 2;   /* as mt_kernel_load sets them */
            plan.step[gemms[g]].max_ctas = cases[i].max_ctas;
        }
        fake_driver(1);
        mt_moe_tensors t = fake_tensors();
        char msg[512] = "";
        assert_int_equal(run(&plan, &p, &t, msg, sizeof msg), MT_OK);
        assert_int_equal(fake.encodes, 2);
        expect_map(&fake.enc[0], t.w1, CU_TENSOR_MAP_DATA_TYPE_UINT16, 512, 384, 2, 8, 2, 2 * 384 * 512, 128);
        expect_map(&fake.enc[1], t.w2, CU_TENSOR_MAP_DATA_TYPE_UINT16, 384, 512, 1, 8, 2, 512 * 384, 128);
        /* Tiles: row blocks x column blocks of 128 (GEMM1's silu halves a
         * 256-wide tile) and 256 output columns. */
        const int64_t tiles[2] = {fake.gemm[0].num_m_blocks * ((384 + 127) / 128),
                                  fake.gemm[1].num_m_blocks * ((512 + 255) / 256)};
        for (int g = 0; g < 2; g++) {
            int64_t want = (tiles[g] + 1) / 2 * 2;
            if (cases[i].max_ctas && want > cases[i].max_ctas)
                want = cases[i].max_ctas;
            assert_true(tiles[g] > 0);
            assert_int_equal(fake.step_grid[gemms[g]], (unsigned)want);
            assert_int_equal(fake.step_grid[gemms[g]] % 2, 0);
        }
    }
}

/* Run plan for p with every step marked as keeping the launch protocol (as
 * mt_kernel_load finds the mark) on a driver with cuLaunchKernelEx, each
 * step's last launch recorded as dependent or not. */
static void run_with_pdl(mt_moe_plan *plan, const mt_problem *p)
{
    for (int s = 0; s < MT_STEP_ALL; s++)
        plan->step[s].pdl = 1;
    fake_driver(1);
    mt_cu.cuLaunchKernelEx = fake_launch_ex;
    memset(fake.step_dependent, 0, sizeof fake.step_dependent);
    memset(fake.route, 0, sizeof fake.route);
    mt_moe_tensors t = fake_tensors();
    char msg[512] = "";
    assert_int_equal(run(plan, p, &t, msg, sizeof msg), MT_OK);
}

/* Programmatic dependent launches: every launch but the first, except a
 * GEMM of fewer CTAs than 1024 (its CTAs would bunch on the SMs the step
 * ahead frees first; under a small step, test_decode_gemms_under_small_steps).
 * A dependent GEMM after a step other than the alignment may read before it
 * waits (pdl_early), unless the plan's
 * launch_late or MOETUNE_PDL=late says otherwise; a persistent GEMM whose
 * grid is all the CTAs the GPU holds at once is dependent only when it may
 * read early (GEMM2 here; GEMM1 comes right after the alignment).
 * MOETUNE_PDL=0: no dependent launches. */
static void test_dependent_launches(void **state)
{
    (void)state;
    static const char *const g1 = "mtk_grouped_gemm_sm90_bf16_none_standard_silu_m16_n64_k64_g1_s8_ppersist"
                                  "_fwait_btma_swyes",
                          *const g2s[] = {"mtk_grouped_gemm_sm90_bf16_none_standard_store_m16_n128_k64_g1_s4_pws"
                                          "_fwait_btma_swyes",
                                          "mtk_grouped_gemm_sm90_bf16_none_standard_store_m16_n64_k64_g1_s8"
                                          "_ppersist_fwait_btma_swyes"};
    /* M 4096: GEMM1 fills the 132 CTAs, GEMM2 has a CTA for each of its
     * thousands of tiles (ws) or fills the 132 (persist); M 2: at most 4
     * row blocks, every GEMM under 1024 CTAs and short of 132. */
    static const struct { const char *env; int plan_late; } modes[] = {
        {NULL, 0}, {NULL, 1}, {"late", 0}, {"0", 0}};
    const int Ms[] = {4096, 2};
    for (size_t mode = 0; mode < sizeof modes / sizeof modes[0]; mode++)
        for (int persist2 = 0; persist2 < 2; persist2++)
            for (int i = 0; i < 2; i++) {
                mt_problem p;
                mt_problem_init(&p, Ms[i], 8, 2, 512, 384);
                mt_moe_plan plan;
                default_plan(&p, &plan);
                set_gemm(&plan, MT_STEP_GEMM1, g1);
                set_gemm(&plan, MT_STEP_GEMM2, g2s[persist2]);
                plan.step[MT_STEP_GEMM1].max_ctas = 132;
                plan.step[MT_STEP_GEMM2].max_ctas = persist2 ? 132 : 0;
                plan.launch_late = modes[mode].plan_late;
                if (modes[mode].env)
                    setenv("MOETUNE_PDL", modes[mode].env, 1);
                else
                    unsetenv("MOETUNE_PDL");
                run_with_pdl(&plan, &p);
                const int pdl = !modes[mode].env || strcmp(modes[mode].env, "0"),
                          early = pdl && !modes[mode].env && !modes[mode].plan_late, big = Ms[i] == 4096;
                assert_int_equal(fake.step_grid[MT_STEP_GEMM1] == 132, big);
                if (persist2)
                    assert_int_equal(fake.step_grid[MT_STEP_GEMM2] == 132, big);
                else
                    assert_int_equal(fake.step_grid[MT_STEP_GEMM2] >= 1024, big);
                /* The first launch (one align launch at M 2; at M 4096 its
                 * second phase is dependent). */
                assert_int_equal(fake.step_dependent[MT_STEP_ALIGN], pdl && big);
                assert_int_equal(fake.step_dependent[MT_STEP_GEMM1], 0);
                assert_int_equal(fake.gemm[0].pdl_early, 0);
                const int dep2 = big && (persist2 ? early : pdl);
                assert_int_equal(fake.step_dependent[MT_STEP_GEMM2], dep2);
                assert_int_equal(fake.gemm[1].pdl_early, dep2 && early);
                assert_int_equal(fake.step_dependent[MT_STEP_REDUCE], pdl);
            }
    unsetenv("MOETUNE_PDL");
}

/* A persistent GEMM2 that fills the GPU after GEMM1 is dependent only when
 * it requests weight tiles before its wait: a "persist" tile with TMA
 * weight loads and its whole epilogue tile does, its twin with the
 * epilogue in column chunks (EPI_COLS) waits first and launches the
 * ordinary way. */
static void test_chunked_persist_waits(void **state)
{
    (void)state;
    static const char *const g1 = "mtk_grouped_gemm_sm90_bf16_none_standard_silu_m128_n256_k64_g8_s4_pws_fwait_btma";
    static const struct { const char *g2; int dependent; } cases[] = {
        {"mtk_grouped_gemm_sm90_bf16_none_standard_store_m128_n128_k64_g8_s4_ppersist_fwait_btma", 1},
        {"mtk_grouped_gemm_sm90_bf16_none_standard_store_m128_n256_k64_g8_s4_ppersist_fwait_btma_e32", 0}};
    unsetenv("MOETUNE_PDL");
    for (size_t i = 0; i < MT_ARRAY_LEN(cases); i++) {
        mt_problem p;
        mt_problem_init(&p, 4096, 8, 2, 512, 384);
        mt_moe_plan plan;
        default_plan(&p, &plan);
        set_gemm(&plan, MT_STEP_GEMM1, g1);
        set_gemm(&plan, MT_STEP_GEMM2, cases[i].g2);
        plan.step[MT_STEP_GEMM2].max_ctas = 132;
        run_with_pdl(&plan, &p);
        assert_int_equal(fake.step_grid[MT_STEP_GEMM2], 132);
        assert_int_equal(fake.step_dependent[MT_STEP_GEMM2], cases[i].dependent);
        assert_int_equal(fake.gemm[1].pdl_early, cases[i].dependent);
    }
}

/* The 8-bit decode pipeline: quantization, a slot-routed matrix-vector
 * GEMM1, the act step's quantization, a GEMM2 that sums per token. Both
 * GEMMs have far fewer than 1024 CTAs (but GEMM2 at K 16384 and up), yet
 * each follows a step of at most 8 CTAs (PDL_SMALL_STEP_CTAS), under which
 * they cannot bunch: dependent, reading early, unless the plan is
 * launch=late, MOETUNE_PDL says late or 0, or the step ahead is larger
 * (the quantization's 9 CTAs at K 16640, 16 at M 8 and K 4096). */
static void test_decode_gemms_under_small_steps(void **state)
{
    (void)state;
    static const char *const g1 = "mtk_grouped_gemv_bf16_fp8xblock_standard_silu_m1_n16_w4_u4_a1",
                          *const act = "mtk_act_quant_bf16_fp8_block_none_t256_u4_asteps",
                          *const g2 = "mtk_grouped_gemv_bf16_fp8xblock_standard_sum_m1_n16_w4_u4_a1";
    static const struct {
        int M, K;
        const char *env;
        int plan_late;
        unsigned quant_grid;
        int dep1, dep2, early;
    } cases[] = {{1, 512, NULL, 0, 1, 1, 1, 1},      {1, 512, NULL, 1, 1, 0, 0, 0},
                 {1, 512, "late", 0, 1, 0, 0, 0},    {1, 512, "0", 0, 1, 0, 0, 0},
                 {1, 16384, NULL, 0, 8, 1, 1, 1},    {1, 16640, NULL, 0, 9, 0, 1, 1},
                 {8, 4096, NULL, 0, 16, 0, 1, 1}};
    for (size_t i = 0; i < MT_ARRAY_LEN(cases); i++) {
        mt_problem p;
        mt_problem_init(&p, cases[i].M, 8, 2, cases[i].K, 256);
        p.quant.mode = MT_QUANT_FP8_BLOCK;
        mt_moe_plan plan;
        default_plan(&p, &plan);
        set_gemm(&plan, MT_STEP_GEMM1, g1);
        set_gemm(&plan, MT_STEP_ACT, act);   /* silu in GEMM1: the act step quantizes */
        set_gemm(&plan, MT_STEP_GEMM2, g2);
        plan.step[MT_STEP_QUANT].max_ctas = plan.step[MT_STEP_ACT].max_ctas = 1056;
        plan.launch_late = cases[i].plan_late;
        if (cases[i].env)
            setenv("MOETUNE_PDL", cases[i].env, 1);
        else
            unsetenv("MOETUNE_PDL");
        run_with_pdl(&plan, &p);
        assert_int_equal(fake.launches, 4);
        assert_int_equal(fake.launched[0], MT_STEP_QUANT);
        assert_int_equal(fake.launched[1], MT_STEP_GEMM1);
        assert_int_equal(fake.launched[2], MT_STEP_ACT);
        assert_int_equal(fake.launched[3], MT_STEP_GEMM2);
        assert_true(fake.step_grid[MT_STEP_GEMM1] < 1024);
        assert_int_equal(fake.step_grid[MT_STEP_GEMM2] < 1024, cases[i].M * cases[i].K / 16 < 1024);
        assert_int_equal(fake.step_grid[MT_STEP_QUANT], cases[i].quant_grid);
        assert_true(fake.step_grid[MT_STEP_ACT] <= 8);
        assert_int_equal(fake.step_dependent[MT_STEP_QUANT], 0);
        assert_int_equal(fake.step_dependent[MT_STEP_GEMM1], cases[i].dep1);
        assert_int_equal(fake.route[0].gemm.pdl_early, cases[i].dep1 && cases[i].early);
        assert_int_equal(fake.step_dependent[MT_STEP_GEMM2], cases[i].dep2);
        assert_int_equal(fake.route[1].gemm.pdl_early, cases[i].dep2 && cases[i].early);
    }
    unsetenv("MOETUNE_PDL");
}

/* An fp8 block-wise decode problem (M 2, E 8, topk 2, K 512, N n) in p,
 * and in plan the default pipeline with GEMM1 g1 and GEMM2 g2, both
 * built-in default variants; the fake driver in place, its tensors
 * returned. */
static mt_moe_tensors fp8_block_decode(mt_problem *p, mt_moe_plan *plan, int64_t n, const char *g1, const char *g2)
{
    mt_problem_init(p, 2, 8, 2, 512, n);
    p->quant.mode = MT_QUANT_FP8_BLOCK;
    default_plan(p, plan);
    set_gemm(plan, MT_STEP_GEMM1, g1);
    set_gemm(plan, MT_STEP_GEMM2, g2);
    fake_driver(0);
    return fake_tensors();
}

/* The fake driver saw exactly the n launches of want, in order. */
static void assert_launches(int n, const mt_step *want)
{
    assert_int_equal(fake.launches, n);
    for (int i = 0; i < n; i++)
        assert_int_equal(fake.launched[i], want[i]);
}

/* A slot-routed GEMM1 that quantizes its own A rows (grouped_gemv
 * AQUANT=cta): no quant launch, the hidden states as its A with no scales;
 * refused as GEMM2, for a K over its shared-memory row, and under router
 * weights on the input (each slot's row weighed first), each by name. */
static void test_gemv_quantizes_own_rows(void **state)
{
    (void)state;
    static const char *const g1 = "mtk_grouped_gemv_bf16_fp8xblock_standard_silu_m1_n16_w4_u4_a1_aqcta",
                          *const act = "mtk_act_quant_bf16_fp8_block_none_t256_u4_asteps",
                          *const g2 = "mtk_grouped_gemv_bf16_fp8xblock_standard_sum_m1_n16_w4_u4_a1";
    mt_problem p;
    mt_moe_plan plan;
    mt_moe_tensors t = fp8_block_decode(&p, &plan, 256, g1, g2);
    set_gemm(&plan, MT_STEP_ACT, act);
    char msg[512] = "";
    assert_false(mt_moe_plan_uses(&plan, &p, MT_STEP_QUANT));
    assert_int_equal(run(&plan, &p, &t, msg, sizeof msg), MT_OK);
    assert_launches(3, (const mt_step[]){MT_STEP_GEMM1, MT_STEP_ACT, MT_STEP_GEMM2});
    assert_ptr_equal(fake.route[0].gemm.A, t.hidden);
    assert_null(fake.route[0].gemm.a_scale);
    assert_int_equal(fake.route[0].gemm.lda, 512);
    assert_int_equal(fake.route[0].gemm.a_row_div, 2);   /* slot -> token row */
    assert_non_null(fake.route[1].gemm.a_scale);         /* GEMM2: the act step's scales */
    /* Its AQUANT=step twin keeps the quant step. */
    mt_moe_plan step = plan;
    set_gemm(&step, MT_STEP_GEMM1, "mtk_grouped_gemv_bf16_fp8xblock_standard_silu_m1_n16_w4_u4_a1");
    assert_true(mt_moe_plan_uses(&step, &p, MT_STEP_QUANT));
    assert_int_equal(run(&step, &p, &t, msg, sizeof msg), MT_OK);
    assert_int_equal(fake.launches, 4);
    assert_int_equal(fake.launched[0], MT_STEP_QUANT);
    /* Refused, before any launch. */
    mt_moe_plan bad = plan;
    set_gemm(&bad, MT_STEP_GEMM2, "mtk_grouped_gemv_bf16_fp8xblock_standard_store_m1_n16_w4_u4_a1_aqcta");
    assert_int_equal(run(&bad, &p, &t, msg, sizeof msg), MT_ERR_INCOMPATIBLE);
    assert_non_null(strstr(msg, "which is GEMM1's work"));
    assert_int_equal(fake.launches, 0);
    mt_problem wide = p;
    wide.K = MT_GEMV_AQ_MAX_K + 128;
    assert_int_equal(run(&plan, &wide, &t, msg, sizeof msg), MT_ERR_INCOMPATIBLE);
    assert_non_null(strstr(msg, "at most K=16384"));
    mt_problem weighed = p;
    weighed.apply_router_weight_on_input = 1;
    weighed.topk = 1;
    assert_int_equal(run(&plan, &weighed, &t, msg, sizeof msg), MT_ERR_INCOMPATIBLE);
    assert_non_null(strstr(msg, "router weight first"));
    assert_int_equal(fake.launches, 0);
}

/* A slot-routed GEMM2 that activates and quantizes GEMM1's stored output
 * itself (grouped_gemv AQUANT=silu, gelu): no act launch, GEMM1's output
 * (its gate and up halves, 2N apart) as its A with no scales, and with a
 * self-quantizing GEMM1 the pipeline is the two GEMMs alone; refused after
 * a GEMM1 that applies the activation already, for another activation, as
 * GEMM1, and for more rows than its shared memory holds, each by name. */
static void test_gemv_gemm2_activates_own_rows(void **state)
{
    (void)state;
    static const char *const g1 = "mtk_grouped_gemv_bf16_fp8xblock_standard_store_m1_n16_w4_u4_a1",
                          *const g2 = "mtk_grouped_gemv_bf16_fp8xblock_standard_store_m1_n16_w4_u4_a1_aqsilu";
    mt_problem p;
    mt_moe_plan plan;
    mt_moe_tensors t = fp8_block_decode(&p, &plan, 256, g1, g2);
    char msg[512] = "";
    assert_true(mt_moe_plan_uses(&plan, &p, MT_STEP_QUANT));
    assert_false(mt_moe_plan_uses(&plan, &p, MT_STEP_ACT));
    assert_int_equal(run(&plan, &p, &t, msg, sizeof msg), MT_OK);
    assert_launches(4, (const mt_step[]){MT_STEP_QUANT, MT_STEP_GEMM1, MT_STEP_GEMM2, MT_STEP_REDUCE});
    assert_ptr_equal(fake.route[1].gemm.A, fake.route[0].gemm.C);   /* GEMM1's output as it is */
    assert_int_equal(fake.route[1].gemm.lda, 2 * 256);
    assert_int_equal(fake.route[1].gemm.K, 256);
    assert_null(fake.route[1].gemm.a_scale);
    /* With a GEMM1 that quantizes its own rows and a GEMM2 that sums the
     * topk: the two GEMMs alone. */
    mt_moe_plan two = plan;
    set_gemm(&two, MT_STEP_GEMM1, "mtk_grouped_gemv_bf16_fp8xblock_standard_store_m1_n16_w4_u4_a1_aqcta");
    set_gemm(&two, MT_STEP_GEMM2, "mtk_grouped_gemv_bf16_fp8xblock_standard_sum_m1_n16_w4_u4_a1_aqsilu");
    assert_int_equal(run(&two, &p, &t, msg, sizeof msg), MT_OK);
    assert_launches(2, (const mt_step[]){MT_STEP_GEMM1, MT_STEP_GEMM2});
    assert_ptr_equal(fake.route[1].gemm.A, fake.route[0].gemm.C);
    /* Refused, before any launch. */
    static const struct { const char *g1, *g2; const char *why; } bad[] = {
        {"mtk_grouped_gemv_bf16_fp8xblock_standard_silu_m1_n16_w4_u4_a1", NULL, "applies it already"},
        {NULL, "mtk_grouped_gemv_bf16_fp8xblock_standard_store_m1_n16_w4_u4_a1_aqgelu",
         "the problem's activation is silu"},
        {"mtk_grouped_gemv_bf16_fp8xblock_standard_store_m1_n16_w4_u4_a1_aqsilu", NULL, "is GEMM2's work"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mt_moe_plan b = plan;
        if (bad[i].g1)
            set_gemm(&b, MT_STEP_GEMM1, bad[i].g1);
        if (bad[i].g2)
            set_gemm(&b, MT_STEP_GEMM2, bad[i].g2);
        assert_int_equal(run(&b, &p, &t, msg, sizeof msg), MT_ERR_INCOMPATIBLE);
        assert_non_null(strstr(msg, bad[i].why));
        assert_int_equal(fake.launches, 0);
    }
    /* A token's topk rows of N must fit the shared memory of "sum"; one
     * slot's row is enough for "store". */
    mt_problem wide = p;
    wide.N = MT_GEMV_AQ_MAX_K / 2 + 128;
    assert_int_equal(run(&two, &wide, &t, msg, sizeof msg), MT_ERR_INCOMPATIBLE);
    assert_non_null(strstr(msg, "in shared memory, at most 16384 values"));
    assert_int_equal(fake.launches, 0);
    assert_int_equal(run(&plan, &wide, &t, msg, sizeof msg), MT_OK);
}

/* A slot-routed GEMM1 that quantizes its activated output for GEMM2, the
 * last CTA of each slot's 128-column group that group (grouped_gemv
 * OQUANT=last): no act launch; it gets the workspace's 8-bit rows and
 * scales that GEMM2 then reads, and counters zeroed with the flags (a slot
 * per row, a group of 128 columns a word); with a GEMM1 that quantizes
 * its own A rows too and a GEMM2 that sums the topk, the two GEMMs alone. */
static void test_gemv_gemm1_quantizes_output(void **state)
{
    (void)state;
    static const char *const g1 = "mtk_grouped_gemv_bf16_fp8xblock_standard_silu_m1_n16_w4_u4_a1_oqlast",
                          *const g2 = "mtk_grouped_gemv_bf16_fp8xblock_standard_store_m1_n16_w4_u4_a1";
    mt_problem p;
    mt_moe_plan plan;
    mt_moe_tensors t = fp8_block_decode(&p, &plan, 384, g1, g2);   /* N = 384: three groups a slot */
    char msg[512] = "";
    assert_false(mt_moe_plan_uses(&plan, &p, MT_STEP_ACT));
    assert_int_equal(run(&plan, &p, &t, msg, sizeof msg), MT_OK);
    assert_launches(4, (const mt_step[]){MT_STEP_QUANT, MT_STEP_GEMM1, MT_STEP_GEMM2, MT_STEP_REDUCE});
    assert_non_null(fake.route[0].act_q);
    assert_non_null(fake.route[0].act_scale);
    assert_ptr_equal(fake.route[1].gemm.A, fake.route[0].act_q);        /* GEMM2 reads what GEMM1 wrote */
    assert_ptr_equal(fake.route[1].gemm.a_scale, fake.route[0].act_scale);
    assert_int_equal(fake.route[1].gemm.lda, 384);
    assert_int_equal(fake.route[0].gemm.n_half, 384);
    /* The counters come right after the flags and are zeroed with them: at
     * least a word per slot and group. */
    assert_true(fake.memsets >= 1);
    assert_ptr_equal((void *)(uintptr_t)fake.route[0].gemm.tile_count,
                     (void *)(uintptr_t)(fake.memset_at[0] + 4 * sizeof(int32_t)));
    assert_true(fake.memset_words[0] >= 4 + (size_t)(p.M * p.topk) * 3);
    /* Its OQUANT=step twin keeps the act step. */
    mt_moe_plan step = plan;
    set_gemm(&step, MT_STEP_GEMM1, "mtk_grouped_gemv_bf16_fp8xblock_standard_silu_m1_n16_w4_u4_a1");
    assert_true(mt_moe_plan_uses(&step, &p, MT_STEP_ACT));
    assert_int_equal(run(&step, &p, &t, msg, sizeof msg), MT_OK);
    assert_int_equal(fake.launches, 5);
    assert_null(fake.route[0].act_q);
    /* Both quantizations in GEMM1 and the topk sum in GEMM2: two launches. */
    mt_moe_plan two = plan;
    set_gemm(&two, MT_STEP_GEMM1, "mtk_grouped_gemv_bf16_fp8xblock_standard_silu_m1_n16_w4_u4_a1_aqcta_oqlast");
    set_gemm(&two, MT_STEP_GEMM2, "mtk_grouped_gemv_bf16_fp8xblock_standard_sum_m1_n16_w4_u4_a1");
    assert_int_equal(run(&two, &p, &t, msg, sizeof msg), MT_OK);
    assert_launches(2, (const mt_step[]){MT_STEP_GEMM1, MT_STEP_GEMM2});
    assert_ptr_equal(fake.route[1].gemm.A, fake.route[0].act_q);
    /* A GEMM2 that activates GEMM1's output cannot follow it (its output is
     * activated already), by name, before any launch. */
    mt_moe_plan bad = plan;
    set_gemm(&bad, MT_STEP_GEMM2, "mtk_grouped_gemv_bf16_fp8xblock_standard_store_m1_n16_w4_u4_a1_aqsilu");
    assert_int_equal(run(&bad, &p, &t, msg, sizeof msg), MT_ERR_INCOMPATIBLE);
    assert_non_null(strstr(msg, g1));
    assert_int_equal(fake.launches, 0);
}

/* A tiled GEMM1 that quantizes its activated output for GEMM2
 * (grouped_gemm_sm90 OQUANT=last): no act launch; launched with the
 * routing argument, whose 8-bit rows and scales in the workspace GEMM2
 * then reads; its counters right after the flags and zeroed with them, a
 * word per 64 rows of its row blocks and 128-column group (N = 192: two
 * groups, four row blocks of 128, so 16 words, more than its 12 tiles),
 * GEMM2's after those. Its OQUANT=step twin keeps the act step. */
static void test_sm90_gemm1_quantizes_output(void **state)
{
    (void)state;
    static const char *const g1 = "mtk_grouped_gemm_sm90_bf16_fp8xblock_standard_silu_m128_n128_k128_g8_s5_pws"
                                  "_fwait_btma_oqlast",
                          *const g2 = "mtk_grouped_gemm_sm90_bf16_fp8xblock_standard_store_m128_n128_k128_g8_s5_pws"
                                      "_fwait_btma";
    mt_problem p;
    mt_moe_plan plan;
    mt_moe_tensors t = fp8_block_decode(&p, &plan, 192, g1, g2);
    fake_driver(1);   /* its weights come by TMA */
    char msg[512] = "";
    assert_false(mt_moe_plan_uses(&plan, &p, MT_STEP_ACT));
    assert_int_equal(run(&plan, &p, &t, msg, sizeof msg), MT_OK);
    assert_launches(5, (const mt_step[]){MT_STEP_ALIGN, MT_STEP_QUANT, MT_STEP_GEMM1, MT_STEP_GEMM2,
                                         MT_STEP_REDUCE});
    const mt_gemv_slot_args *r = &fake.route[0];
    assert_non_null(r->act_q);
    assert_non_null(r->act_scale);
    assert_int_equal(r->gemm.n_half, 192);
    assert_int_equal(r->gemm.num_m_blocks, 4);
    assert_ptr_equal(fake.gemm[1].A, r->act_q);   /* GEMM2 reads what GEMM1 wrote */
    assert_ptr_equal(fake.gemm[1].a_scale, r->act_scale);
    assert_int_equal(fake.gemm[1].a_scale_ld, 2);
    assert_true(fake.memsets >= 1);
    assert_ptr_equal((void *)(uintptr_t)r->gemm.tile_count,
                     (void *)(uintptr_t)(fake.memset_at[0] + 4 * sizeof(int32_t)));
    assert_ptr_equal((void *)(uintptr_t)fake.gemm[1].tile_count,
                     (void *)(uintptr_t)(fake.memset_at[0] + (4 + 16) * sizeof(int32_t)));
    assert_true(fake.memset_words[0] >= 4 + 16);
    mt_moe_plan step = plan;
    set_gemm(&step, MT_STEP_GEMM1, "mtk_grouped_gemm_sm90_bf16_fp8xblock_standard_silu_m128_n128_k128_g8_s5_pws"
                                   "_fwait_btma");
    assert_true(mt_moe_plan_uses(&step, &p, MT_STEP_ACT));
    memset(fake.route, 0, sizeof fake.route);
    fake.plan = &step;
    assert_int_equal(run(&step, &p, &t, msg, sizeof msg), MT_OK);
    assert_int_equal(fake.launches, 6);
    assert_null(fake.route[0].act_q);   /* launched with mt_gemm_args alone */
    /* As GEMM2 it is refused, by name, before any launch. */
    mt_moe_plan bad = plan;
    set_gemm(&bad, MT_STEP_GEMM2, g1);
    assert_int_equal(run(&bad, &p, &t, msg, sizeof msg), MT_ERR_INCOMPATIBLE);
    assert_non_null(strstr(msg, g1));
    assert_int_equal(fake.launches, 0);
}

/* A slot-routed GEMM1 that runs GEMM2 in its launch (grouped_gemv CHAIN):
 * the pipeline is that one launch, its argument both GEMMs' as their own
 * launches would take them (GEMM2's that of the "lastsum" tile it runs,
 * reading GEMM1's output, storing per slot and summing into the output
 * tensor), with GEMM2's counters and then a work counter, a CTA counter
 * and a count per slot right after the flags, zeroed with them; a CTA per
 * tile of both GEMMs, however few the GPU holds at once (each CTA takes
 * one); without the align step's
 * bit no memset, GEMM2's bit alone nothing; refused where the tiles would
 * overflow its work counter. In the block modes, quantizing
 * its A rows and its output, one launch too, GEMM2 reading the quantized
 * rows. Refused with another GEMM2 than the tile it runs, by name, before
 * any launch. */
static void test_gemv_chain(void **state)
{
    (void)state;
    mt_problem p;
    mt_moe_plan plan;
    mt_problem_init(&p, 3, 8, 2, 512, 384);
    default_plan(&p, &plan);
    set_gemm(&plan, MT_STEP_GEMM1, "mtk_grouped_gemv_bf16_none_standard_silu_m1_n16_w4_u4_a1_c16");
    set_gemm(&plan, MT_STEP_GEMM2, "mtk_grouped_gemv_bf16_none_standard_lastsum_m1_n16_w4_u4_a1");
    fake_driver(0);
    mt_moe_tensors t = fake_tensors();
    char msg[512] = "";
    for (int s = 0; s < MT_STEP_ALL; s++) {
        assert_int_equal(mt_moe_plan_uses(&plan, &p, (mt_step)s), s == MT_STEP_GEMM1);
        assert_int_equal(mt_moe_plan_needs(&plan, &p, (mt_step)s), s == MT_STEP_GEMM1 || s == MT_STEP_GEMM2);
    }
    assert_int_equal(run(&plan, &p, &t, msg, sizeof msg), MT_OK);
    assert_launches(1, (const mt_step[]){MT_STEP_GEMM1});
    const mt_gemv_chain_args *c = &fake.chain;
    assert_ptr_equal(c->first.gemm.A, t.hidden);
    assert_int_equal(c->first.gemm.N, 2 * 384);
    assert_ptr_equal(c->second.gemm.A, c->first.gemm.C);   /* the activated intermediate */
    assert_ptr_equal(c->second.out, t.out);
    assert_ptr_not_equal(c->second.gemm.C, t.out);         /* the rows per slot */
    assert_ptr_equal(c->second.gemm.row_weight, t.topk_weights);
    assert_int_equal(c->second.gemm.N, 512);
    assert_int_equal(c->second.gemm.K, 384);
    assert_int_equal(c->first.topk, 2);
    assert_int_equal(c->first.gemm.pdl_early, 0);
    assert_int_equal(c->second.gemm.pdl_early, 0);
    /* 6 slots x 48 column blocks (silu: 8 columns a CTA) + 6 x 32 */
    const int64_t tiles1 = 6 * 48, tiles2 = 6 * 32;
    assert_int_equal(fake.step_grid[MT_STEP_GEMM1], tiles1 + tiles2);
    /* the flags, both GEMMs' counters (GEMM2's lastsum ones), the chain's */
    assert_ptr_equal((void *)(uintptr_t)c->second.gemm.tile_count,
                     (void *)(uintptr_t)(fake.memset_at[0] + (4 + tiles1) * sizeof(int32_t)));
    assert_ptr_equal((void *)(uintptr_t)c->work,
                     (void *)(uintptr_t)(fake.memset_at[0] + (4 + tiles1 + tiles2) * sizeof(int32_t)));
    assert_ptr_equal(c->done, c->work + 2);
    assert_int_equal(fake.memset_words[0], 4 + tiles1 + tiles2 + 2 + 6);
    /* Never fewer CTAs than tiles, whatever the GPU holds at once. */
    mt_moe_plan capped = plan;
    capped.step[MT_STEP_GEMM1].max_ctas = 100;
    assert_int_equal(run(&capped, &p, &t, msg, sizeof msg), MT_OK);
    assert_int_equal(fake.step_grid[MT_STEP_GEMM1], tiles1 + tiles2);
    /* Steps: without the align step's bit no memset (the launch re-arms its
     * counters); GEMM2's bit alone launches nothing. */
    const size_t ws = mt_moe_workspace_size(&plan, &p);
    fake.launches = fake.memsets = 0;
    assert_int_equal(mt_moe_run_steps(&plan, &p, &t, (CUdeviceptr)0x40000000, ws,
                                      MT_STEPS_EVERY & ~MT_STEP_BIT(MT_STEP_ALIGN), NULL, msg, sizeof msg), MT_OK);
    assert_int_equal(fake.memsets, 0);
    assert_launches(1, (const mt_step[]){MT_STEP_GEMM1});
    fake.launches = 0;
    assert_int_equal(mt_moe_run_steps(&plan, &p, &t, (CUdeviceptr)0x40000000, ws, MT_STEP_BIT(MT_STEP_GEMM2),
                                      NULL, msg, sizeof msg), MT_OK);
    assert_int_equal(fake.launches, 0);
    /* Any other GEMM2 is refused. */
    static const char *const other[] = {"mtk_grouped_gemv_bf16_none_standard_lastsum_m1_n16_w4_u4_a0",
                                        "mtk_grouped_gemv_bf16_none_standard_sum_m1_n16_w4_u4_a1",
                                        "mtk_grouped_gemv_bf16_none_standard_store_m1_n16_w4_u4_a1"};
    for (int i = 0; i < 3; i++) {
        mt_moe_plan bad = plan;
        set_gemm(&bad, MT_STEP_GEMM2, other[i]);
        assert_int_equal(run(&bad, &p, &t, msg, sizeof msg), MT_ERR_INCOMPATIBLE);
        assert_non_null(strstr(msg, "the plan's gemm2 must name that tile"));
        assert_non_null(strstr(msg, other[i]));
        assert_int_equal(fake.launches, 0);
    }
    /* A batch whose tiles overflow the launch's int32 work counter (1.2M
     * slots x (1792 + 256) tiles): refused, before any launch. */
    mt_problem huge;
    mt_problem_init(&huge, 600000, 8, 2, 4096, 14336);
    assert_int_equal(run(&capped, &huge, &t, msg, sizeof msg), MT_ERR_SHAPE);
    assert_non_null(strstr(msg, "more than its work counter holds"));
    assert_int_equal(fake.launches, 0);
    /* fp8 block-wise: the GEMM1 quantizes its rows and its output. */
    mt_moe_plan q;
    mt_moe_tensors tq = fp8_block_decode(&p, &q, 384, "mtk_grouped_gemv_bf16_fp8xblock_standard_silu_m1_n16_w4_u4_a1_aqcta_oqlast_c16",
                                         "mtk_grouped_gemv_bf16_fp8xblock_standard_lastsum_m1_n16_w4_u4_a1");
    assert_int_equal(run(&q, &p, &tq, msg, sizeof msg), MT_OK);
    assert_launches(1, (const mt_step[]){MT_STEP_GEMM1});
    assert_ptr_equal(c->first.gemm.A, tq.hidden);
    assert_non_null(c->first.act_q);
    assert_ptr_equal(c->second.gemm.A, c->first.act_q);
    assert_ptr_equal(c->second.gemm.a_scale, c->first.act_scale);
    assert_ptr_equal((void *)(uintptr_t)c->first.gemm.tile_count,
                     (void *)(uintptr_t)(fake.memset_at[0] + 4 * sizeof(int32_t)));
    assert_int_equal(fake.memset_words[0], 4 + 4 * 48 + 4 * 32 + 2 + 4);   /* M 2, topk 2, K 512 */
}

/* A tiled GEMM1 under the same small quantization (M 1, fp8 block-wise,
 * after the alignment): a "ws" tile with TMA weight loads requests its
 * first weight tiles before its wait, so it is dependent; a "sync" tile
 * waits first and keeps the ordinary launch. */
static void test_small_step_needs_early_reads(void **state)
{
    (void)state;
    static const struct { const char *g1; int dependent; } cases[] = {
        {"mtk_grouped_gemm_sm90_bf16_fp8xblock_standard_silu_m64_n128_k128_g8_s6_pws_fwait_btma", 1},
        {"mtk_grouped_gemm_sm90_bf16_fp8xblock_standard_silu_m64_n128_k128_g8_s5_psync_fwait_btma", 0}};
    unsetenv("MOETUNE_PDL");
    for (size_t i = 0; i < MT_ARRAY_LEN(cases); i++) {
        mt_problem p;
        mt_problem_init(&p, 1, 8, 2, 512, 256);
        p.quant.mode = MT_QUANT_FP8_BLOCK;
        mt_moe_plan plan;
        default_plan(&p, &plan);
        set_gemm(&plan, MT_STEP_GEMM1, cases[i].g1);
        set_gemm(&plan, MT_STEP_GEMM2, "mtk_grouped_gemm_sm90_bf16_fp8xblock_standard_store_m64_n128_k128_g8_s5_psync"
                                       "_fwait_btma");
        run_with_pdl(&plan, &p);
        assert_int_equal(fake.launched[0], MT_STEP_ALIGN);
        assert_int_equal(fake.launched[1], MT_STEP_QUANT);
        assert_int_equal(fake.launched[2], MT_STEP_GEMM1);
        assert_true(fake.step_grid[MT_STEP_QUANT] <= 8 && fake.step_grid[MT_STEP_GEMM1] < 1024);
        assert_int_equal(fake.step_dependent[MT_STEP_GEMM1], cases[i].dependent);
        assert_int_equal(fake.gemm[0].pdl_early, cases[i].dependent);
    }
}

/* A problem of M tokens over 16 experts (topk 4, K 512, N 384) with an
 * expert map that keeps local_E of them on this rank. */
static mt_problem problem_with_map(int64_t M, int64_t local_E)
{
    mt_problem p;
    mt_problem_init(&p, M, 16, 4, 512, 384);
    p.has_expert_map = 1;
    p.local_E = local_E;
    return p;
}

/* The decode family's slot routing (grouped_gemv, BLOCK_M 1): no alignment
 * launch; both GEMMs get the topk ids, the expert map, the error flag (the
 * workspace's first word, which mt_moe_read_error reads) and the expert
 * counts in their argument, a row block per slot; a plan that mixes it
 * with an aligned GEMM2 is refused. */
static void test_slot_routed_gemv(void **state)
{
    (void)state;
    mt_problem p = problem_with_map(3, 8);
    mt_moe_plan plan;
    default_plan(&p, &plan);
    char msg[512] = "";
    set_gemm(&plan, MT_STEP_GEMM1, "mtk_grouped_gemv_bf16_none_standard_silu_m1_n16_w4_u4_a1");
    set_gemm(&plan, MT_STEP_GEMM2, "mtk_grouped_gemv_bf16_none_standard_store_m1_n16_w4_u4_a1");
    fake_driver(0);
    mt_moe_tensors t = fake_tensors();
    t.expert_map = (const int32_t *)(uintptr_t)0x1A000000;   /* never read */
    assert_int_equal(run(&plan, &p, &t, msg, sizeof msg), MT_OK);
    /* gemm1 (silu fused), gemm2, reduce: no alignment, no act step. */
    assert_int_equal(fake.launches, 3);
    assert_int_equal(fake.launched[0], MT_STEP_GEMM1);
    assert_int_equal(fake.launched[1], MT_STEP_GEMM2);
    assert_int_equal(fake.launched[2], MT_STEP_REDUCE);
    for (int g = 0; g < 2; g++) {
        const mt_gemv_slot_args *r = &fake.route[g];
        assert_ptr_equal(r->topk_ids, t.topk_ids);
        assert_ptr_equal(r->expert_map, t.expert_map);
        assert_ptr_equal(r->error_flag, (int32_t *)(uintptr_t)0x80000000u);
        assert_int_equal(r->num_experts, 16);
        assert_int_equal(r->local_experts, 8);
        assert_int_equal(r->gemm.num_slots, 12);
        assert_int_equal(r->gemm.num_m_blocks, 12);   /* a row block per slot */
    }
    assert_int_equal(fake.route[0].gemm.K, 512);
    assert_int_equal(fake.route[1].gemm.K, 384);
    /* An aligned GEMM2 under a slot-routed GEMM1, even one claiming a
     * BLOCK_M of 1 (variant text from a database): refused before any
     * launch. */
    mt_moe_plan mixed;
    default_plan(&p, &mixed);
    mixed.step[MT_STEP_GEMM1] = plan.step[MT_STEP_GEMM1];
    claim_block_m(&mixed.step[MT_STEP_GEMM2].v, "1");
    fake_driver(0);
    assert_int_not_equal(run(&mixed, &p, &t, msg, sizeof msg), MT_OK);
    assert_non_null(strstr(msg, "route rows by slot"));
    assert_int_equal(fake.launches, 0);
}

/* ---- mt_kernel_load's shared-memory leave, on a fake driver ---- */

static struct {
    int static_smem;        /* what cuFuncGetAttribute reports; -1: it fails */
    int set_calls, set_value;
} fake_fn;

static CUresult fake_module_load(CUmodule *m, const void *image)
{
    (void)image;
    *m = (CUmodule)(uintptr_t)0x2000;
    return CUDA_SUCCESS;
}
static CUresult fake_get_function(CUfunction *f, CUmodule m, const char *name)
{
    (void)m;
    (void)name;
    *f = (CUfunction)(uintptr_t)0x3000;
    return CUDA_SUCCESS;
}
static CUresult fake_get_global(CUdeviceptr *p, size_t *n, CUmodule m, const char *name)
{
    (void)p;
    (void)n;
    (void)m;
    (void)name;
    return CUDA_ERROR_NOT_FOUND;
}
static CUresult fake_func_get(int *value, CUfunction_attribute attr, CUfunction f)
{
    (void)f;
    if (attr != CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES || fake_fn.static_smem < 0)
        return CUDA_ERROR_INVALID_VALUE;
    *value = fake_fn.static_smem;
    return CUDA_SUCCESS;
}
static CUresult fake_func_set(CUfunction f, CUfunction_attribute attr, int value)
{
    (void)f;
    assert_int_equal(attr, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
    fake_fn.set_calls++;
    fake_fn.set_value = value;
    return CUDA_SUCCESS;
}
static CUresult fake_module_unload(CUmodule m)
{
    (void)m;
    return CUDA_SUCCESS;
}

/* A kernel asks for more than the default 48 KiB of shared memory a block
 * when its dynamic and static parts together exceed it (a 48 KiB ring and
 * 32 bytes of static tables failed to launch before, session 44), not
 * otherwise, and a driver that cannot tell the static size counts it as 0. */
static void test_kernel_load_smem_leave(void **state)
{
    (void)state;
    static const struct {
        int dynamic, static_smem, asks;
    } cases[] = {{49152, 32, 1}, {49152, 0, 0}, {46080, 0, 0}, {46080, 4096, 1},
                 {65536, 0, 1},  {0, 49152, 0}, {49152, -1, 0}, {65536, -1, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memset(&mt_cu, 0, sizeof mt_cu);
        mt_cu.cuModuleLoadData = fake_module_load;
        mt_cu.cuModuleGetFunction = fake_get_function;
        mt_cu.cuModuleGetGlobal = fake_get_global;
        mt_cu.cuFuncGetAttribute = fake_func_get;
        mt_cu.cuFuncSetAttribute = fake_func_set;
        mt_cu.cuModuleUnload = fake_module_unload;
        memset(&fake_fn, 0, sizeof fake_fn);
        fake_fn.static_smem = cases[i].static_smem;
        mt_variant v;
        memset(&v, 0, sizeof v);
        snprintf(v.name, sizeof v.name, "mtk_test");
        snprintf(v.family, sizeof v.family, "grouped_gemv");
        snprintf(v.arch, sizeof v.arch, "sm_90a");
        v.threads = 256;
        v.smem_bytes = cases[i].dynamic;
        mt_kernel k;
        char msg[256] = "";
        assert_int_equal(mt_kernel_load(&k, &v, "image", msg, sizeof msg), MT_OK);
        assert_int_equal(fake_fn.set_calls, cases[i].asks);
        if (cases[i].asks)
            assert_int_equal(fake_fn.set_value, cases[i].dynamic);
        mt_kernel_unload(&k);
    }
}

/* The plan of the topk-summing GEMM2 tests: a slot-routed silu GEMM1 and
 * `gemm2`, for p (3 tokens, E 16, topk 4, K 512, N 384), run once: the
 * two GEMM launches and no reduce step. *r: GEMM2's route. */
static void run_summing_gemv(const char *gemm2, mt_problem *p, mt_moe_plan *plan, mt_moe_tensors *t,
                             const mt_gemv_slot_args **r)
{
    char msg[512] = "";
    mt_problem_init(p, 3, 16, 4, 512, 384);
    default_plan(p, plan);
    set_gemm(plan, MT_STEP_GEMM1, "mtk_grouped_gemv_bf16_none_standard_silu_m1_n16_w4_u4_a1");
    set_gemm(plan, MT_STEP_GEMM2, gemm2);
    fake_driver(0);
    *t = fake_tensors();
    assert_int_equal(run(plan, p, t, msg, sizeof msg), MT_OK);
    assert_int_equal(fake.launches, 2);
    assert_int_equal(fake.launched[0], MT_STEP_GEMM1);
    assert_int_equal(fake.launched[1], MT_STEP_GEMM2);
    assert_false(mt_moe_plan_uses(plan, p, MT_STEP_REDUCE));
    *r = &fake.route[1];
    assert_int_equal((*r)->topk, 4);
    assert_int_equal((*r)->gemm.ldc, 512);
    assert_ptr_equal((*r)->gemm.row_weight, t->topk_weights);
}

/* The plan with its GEMM2 as GEMM1 too: refused, before any launch. */
static void expect_gemm2_only(const mt_moe_plan *plan, const mt_problem *p, const mt_moe_tensors *t)
{
    char msg[512] = "";
    mt_moe_plan first = *plan;
    first.step[MT_STEP_GEMM1] = plan->step[MT_STEP_GEMM2];
    fake_driver(0);
    assert_int_equal(run(&first, p, t, msg, sizeof msg), MT_ERR_INCOMPATIBLE);
    assert_non_null(strstr(msg, "only GEMM2"));
    assert_int_equal(fake.launches, 0);
}

/* The plan run on p with a topk of 33 (E 64), past the "sum" tiles' 32. */
static mt_status run_topk33(const mt_moe_plan *plan, const mt_problem *p, const mt_moe_tensors *t, char *msg,
                            size_t msg_size)
{
    mt_problem wide = *p;
    wide.E = 64;
    wide.topk = 33;
    wide.local_E = 64;
    fake_driver(0);
    return run(plan, &wide, t, msg, msg_size);
}

/* The plan with its GEMM2 claiming row blocks of 8 (a damaged database's
 * variant text) behind an aligned GEMM1, run on p. */
static mt_status run_aligned_gemm2(const mt_moe_plan *plan, const mt_problem *p, const mt_moe_tensors *t,
                                   char *msg, size_t msg_size)
{
    mt_moe_plan aligned = *plan;
    claim_block_m(&aligned.step[MT_STEP_GEMM2].v, "8");
    set_gemm(&aligned, MT_STEP_GEMM1, "mtk_grouped_gemv_bf16_none_standard_silu_m8_n16_w8_u4_a1");
    fake_driver(0);
    return run(&aligned, p, t, msg, msg_size);
}

/* A GEMM2 that sums each token's topk slots (grouped_gemv, epilogue
 * "sum"): no reduce launch, a CTA per token and column block, the output
 * tensor as its C; refused as GEMM1 and for a topk over what one warp of
 * the kernel tabulates. */
static void test_token_sum_gemv(void **state)
{
    (void)state;
    mt_problem p;
    mt_moe_plan plan;
    mt_moe_tensors t;
    const mt_gemv_slot_args *r;
    char msg[512] = "";
    run_summing_gemv("mtk_grouped_gemv_bf16_none_standard_sum_m1_n16_w4_u4_a1", &p, &plan, &t, &r);
    assert_ptr_equal(r->gemm.C, t.out);
    assert_int_equal(fake.step_grid[MT_STEP_GEMM2], 3 * (512 / 16));    /* tokens x column blocks */
    assert_int_equal(fake.step_grid[MT_STEP_GEMM1], 12 * (384 / 8));    /* slots x column blocks (silu: 8 a CTA) */
    /* The workspace has no per-slot GEMM2 output. */
    mt_moe_plan per_slot = plan;
    set_gemm(&per_slot, MT_STEP_GEMM2, "mtk_grouped_gemv_bf16_none_standard_store_m1_n16_w4_u4_a1");
    assert_true(mt_moe_workspace_size(&plan, &p) + 12 * 512 * 2 <= mt_moe_workspace_size(&per_slot, &p));

    assert_int_equal(run_topk33(&plan, &p, &t, msg, sizeof msg), MT_ERR_INCOMPATIBLE);
    assert_non_null(strstr(msg, "at most 32 topk slots per token; the problem has topk=33"));
    assert_int_equal(fake.launches, 0);

    /* A summing GEMM2 that does not route by slot: refused, for that reason. */
    assert_int_equal(run_aligned_gemm2(&plan, &p, &t, msg, sizeof msg), MT_ERR_INCOMPATIBLE);
    assert_non_null(strstr(msg, "with a row block per token"));
    assert_int_equal(fake.launches, 0);
    expect_gemm2_only(&plan, &p, &t);
}

/* A GEMM2 whose last CTA of a token sums its slots (grouped_gemv, epilogue
 * "lastsum"): no reduce launch; the store's grid (a CTA per slot and
 * column block) storing rows per slot in the workspace, the output tensor
 * through the route's `out`, and a counter per token and column block after
 * the flag words, which the run's first memset clears. Any topk; refused
 * as GEMM1 and where it does not route by slot. */
static void test_last_cta_sum_gemv(void **state)
{
    (void)state;
    mt_problem p;
    mt_moe_plan plan;
    mt_moe_tensors t;
    const mt_gemv_slot_args *r;
    char msg[512] = "";
    run_summing_gemv("mtk_grouped_gemv_bf16_none_standard_lastsum_m1_n16_w4_u4_a1", &p, &plan, &t, &r);
    assert_ptr_equal(r->out, t.out);
    assert_ptr_not_equal(r->gemm.C, t.out);
    assert_int_equal(fake.step_grid[MT_STEP_GEMM2], 12 * (512 / 16));   /* slots x column blocks */
    /* 3 tokens x 32 column blocks of counters, all inside the memset. */
    const CUdeviceptr counts = (CUdeviceptr)(uintptr_t)r->gemm.tile_count;
    assert_true(fake.memsets >= 1);
    assert_true(counts > fake.memset_at[0]);
    assert_true(counts + 3 * 32 * sizeof(int32_t) <= fake.memset_at[0] + fake.memset_words[0] * sizeof(int32_t));
    /* The per-slot rows stay; the counters come on top of the store's. */
    mt_moe_plan per_slot = plan;
    set_gemm(&per_slot, MT_STEP_GEMM2, "mtk_grouped_gemv_bf16_none_standard_store_m1_n16_w4_u4_a1");
    assert_true(mt_moe_workspace_size(&per_slot, &p) < mt_moe_workspace_size(&plan, &p));
    assert_true(mt_moe_plan_uses(&per_slot, &p, MT_STEP_REDUCE));

    assert_int_equal(run_topk33(&plan, &p, &t, msg, sizeof msg), MT_OK);
    assert_int_equal(fake.launches, 2);

    assert_int_equal(run_aligned_gemm2(&plan, &p, &t, msg, sizeof msg), MT_ERR_INCOMPATIBLE);
    assert_non_null(strstr(msg, "needs a row block per slot"));
    assert_int_equal(fake.launches, 0);
    expect_gemm2_only(&plan, &p, &t);
}

/* GEMM2 reading its A rows by TMA (ALOAD=tma) in the standard format: the
 * intermediate is laid out in the sorted order. GEMM1 writes its rows at
 * their positions (c_sorted), the act step walks the padded positions and
 * skips the padding (sorted rows), GEMM2 reads them so (a_sorted) through
 * a 2-D descriptor of max_padded rows, boxes of BLOCK_M rows; the
 * intermediate buffers grow from the slots to the padded rows. A GEMM1
 * with TMA row loads is refused in the standard format, and allowed in the
 * batched one, where its rows are the experts' [local_E * max_tokens]. */
static void test_sorted_intermediate(void **state)
{
    (void)state;
    static const char *const cp1 = "mtk_grouped_gemm_sm90_bf16_none_standard_store_m128_n256_k64_g8_s4_ppersist"
                                   "_fwait_btma_e32",
                          *const tma2 = "mtk_grouped_gemm_sm90_bf16_none_standard_store_m128_n256_k64_g8_s4_ppersist"
                                        "_fwait_btma_e32_atma",
                          *const act = "mtk_act_and_mul_bf16_silu_t256";
    mt_problem p;
    mt_problem_init(&p, 4096, 8, 2, 512, 384);   /* 8192 slots, 9216 padded positions at 128 rows */
    mt_moe_plan plan;
    default_plan(&p, &plan);
    set_gemm(&plan, MT_STEP_GEMM1, cp1);
    set_gemm(&plan, MT_STEP_ACT, act);
    plan.step[MT_STEP_ACT].fn = (CUfunction)(uintptr_t)0x1100;
    mt_moe_plan by_slot = plan;
    set_gemm(&by_slot, MT_STEP_GEMM2, cp1);
    set_gemm(&plan, MT_STEP_GEMM2, tma2);
    const size_t max_padded = 9216, slots = 8192;
    /* c1 (2N), c2 (N) per padded position instead of per slot. */
    assert_int_equal(mt_moe_workspace_size(&plan, &p) - mt_moe_workspace_size(&by_slot, &p),
                     (max_padded - slots) * 3 * 384 * 2);
    fake_driver(1);
    mt_moe_tensors t = fake_tensors();
    char msg[512] = "";
    assert_int_equal(run(&plan, &p, &t, msg, sizeof msg), MT_OK);
    assert_int_equal(fake.gemm[0].c_sorted, 1);
    assert_int_equal(fake.gemm[0].a_sorted, 0);
    assert_int_equal(fake.gemm[1].a_sorted, 1);
    assert_int_equal(fake.gemm[1].c_sorted, 0);
    /* The act step: rows are the padded positions, told apart by sorted_ids. */
    assert_ptr_equal(fake.act.sorted.ids, fake.gemm[1].sorted_ids);
    assert_ptr_equal(fake.act.sorted.num_padded, fake.gemm[1].num_padded);
    assert_int_equal(fake.act.sorted.num_slots, slots);
    assert_int_equal(fake.act.rows, max_padded);
    assert_null(fake.act.topk_ids);
    assert_ptr_equal(fake.act.out, fake.gemm[1].A);
    /* w1, w2, then GEMM2's rows: K = N, max_padded rows, 128 x 64 boxes. */
    assert_int_equal(fake.encodes, 3);
    const encode_call *c = &fake.enc[2];
    assert_int_equal(c->rank, 2);
    assert_ptr_equal(c->base, fake.gemm[1].A);
    assert_int_equal(c->type, CU_TENSOR_MAP_DATA_TYPE_UINT16);
    assert_int_equal(c->dims[0], 384);
    assert_int_equal(c->dims[1], max_padded);
    assert_int_equal(c->strides[0], 384 * 2);
    assert_int_equal(c->box[0], 64);
    assert_int_equal(c->box[1], 128);
    assert_int_equal(c->swizzle, CU_TENSOR_MAP_SWIZZLE_128B);
    unsigned char want[128];
    memset(want, 0xA2, sizeof want);
    assert_memory_equal(fake.gemm[1].a_map, want, sizeof want);
    /* The same tile as GEMM1: refused, nothing launched. */
    mt_moe_plan first = plan;
    set_gemm(&first, MT_STEP_GEMM1, tma2);
    assert_int_equal(run(&first, &p, &t, msg, sizeof msg), MT_ERR_INCOMPATIBLE);
    assert_non_null(strstr(msg, "reads its A rows by TMA"));
    assert_non_null(strstr(msg, "ALOAD=cp"));
    assert_int_equal(fake.launches, 0);
    /* Batched: GEMM1's rows by TMA too, over the experts' rows. */
    static const char *const b1 = "mtk_grouped_gemm_sm90_bf16_none_batched_store_m128_n256_k64_g8_s4_ppersist"
                                  "_fwait_btma_e32_atma";
    mt_problem q;
    mt_problem_init(&q, 64, 8, 2, 512, 384);
    q.format = MT_FORMAT_BATCHED;
    q.max_tokens = 200;
    mt_moe_plan batched;
    memset(&batched, 0, sizeof batched);
    set_gemm(&batched, MT_STEP_GEMM1, b1);
    set_gemm(&batched, MT_STEP_GEMM2, b1);
    set_gemm(&batched, MT_STEP_ACT, act);
    for (int s = 0; s < MT_STEP_ALL; s++)
        if (batched.step[s].v.name[0])
            batched.step[s].fn = (CUfunction)(uintptr_t)(0x1000 + 0x10 * s);
    fake.plan = &batched;
    t.expert_num_tokens = (void *)0x7f000000;
    if (run(&batched, &q, &t, msg, sizeof msg) != MT_OK)
        fail_msg("batched: %s", msg);
    assert_int_equal(fake.encodes, 4);
    for (int i = 0; i < 2; i++) {
        c = &fake.enc[i == 0 ? 1 : 3];
        assert_int_equal(c->rank, 2);
        assert_ptr_equal(c->base, fake.gemm[i].A);
        assert_int_equal(c->dims[0], i == 0 ? 512 : 384);
        assert_int_equal(c->dims[1], 8 * 200);
        assert_int_equal(fake.gemm[i].a_sorted, 0);
        assert_int_equal(fake.gemm[i].c_sorted, 0);
    }
    assert_null(fake.act.sorted.ids);
}

/* A tiled GEMM2 with the topk sum in its epilogue ("sum"): it adds its rows
 * into fp32 sums, a row per token (sum_topk = topk, C in the workspace,
 * zeroed with the flags before the call's first launch), and the reduce
 * step rounds them (y_f32, one "slot" a token, no ids or weights). The
 * workspace holds M rows of fp32 sums instead of M * topk rows of T. A
 * reduce kernel too old to read fp32, a sum as GEMM1 and the batched
 * format are refused before any launch. */
static void test_tiled_topk_sum(void **state)
{
    (void)state;
    static const char *const g1 = "mtk_grouped_gemm_sm90_bf16_none_standard_silu_m128_n256_k64_g8_s4_ppersist"
                                  "_fwait_btma_e32",
                          *const sum2 = "mtk_grouped_gemm_sm90_bf16_none_standard_sum_m128_n256_k64_g8_s4"
                                        "_ppersist_fwait_btma_e32_atma",
                          *const store2 = "mtk_grouped_gemm_sm90_bf16_none_standard_store_m128_n256_k64_g8_s4"
                                          "_ppersist_fwait_btma_e32_atma";
    mt_problem p;
    mt_problem_init(&p, 300, 8, 4, 512, 384);
    mt_moe_plan plan;
    default_plan(&p, &plan);
    set_gemm(&plan, MT_STEP_GEMM1, g1);
    mt_moe_plan per_slot = plan;
    set_gemm(&per_slot, MT_STEP_GEMM2, store2);
    set_gemm(&plan, MT_STEP_GEMM2, sum2);
    assert_true(mt_moe_plan_uses(&plan, &p, MT_STEP_REDUCE));
    /* c3: 300 x 512 fp32 instead of 1200 x 512 bf16 (both multiples of 256 bytes). */
    assert_int_equal(mt_moe_workspace_size(&per_slot, &p) - mt_moe_workspace_size(&plan, &p),
                     1200 * 512 * 2 - 300 * 512 * 4);
    fake_driver(1);
    mt_moe_tensors t = fake_tensors();
    char msg[512] = "";
    if (run(&plan, &p, &t, msg, sizeof msg) != MT_OK)
        fail_msg("%s", msg);
    assert_int_equal(fake.gemm[0].sum_topk, 0);
    assert_int_equal(fake.gemm[1].sum_topk, 4);
    assert_int_equal(fake.gemm[1].ldc, 512);
    assert_ptr_equal(fake.gemm[1].row_weight, t.topk_weights);
    assert_int_equal(fake.gemm[1].a_sorted, 1);   /* its rows by TMA: the sorted intermediate */
    /* w2's descriptor as a storing GEMM2's: K rows of one part, whole-tile boxes. */
    assert_int_equal(fake.encodes, 3);
    expect_map(&fake.enc[1], t.w2, CU_TENSOR_MAP_DATA_TYPE_UINT16, 384, 512, 1, 8, 2, 512 * 384, 256);
    const uintptr_t sums = (uintptr_t)fake.gemm[1].C;
    assert_true(sums >= 0x80000000u && sums + 300 * 512 * 4 <= 0x80000000u + mt_moe_workspace_size(&plan, &p));
    /* The flags, then the sums, zeroed before the first launch. */
    assert_int_equal(fake.memsets, 2);
    assert_int_equal(fake.memset_at[1], sums);
    assert_int_equal(fake.memset_words[1], 300 * 512);
    assert_int_equal(fake.launched[fake.launches - 1], MT_STEP_REDUCE);
    assert_ptr_equal(fake.reduce.Y, fake.gemm[1].C);
    assert_ptr_equal(fake.reduce.out, t.out);
    assert_int_equal(fake.reduce.y_f32, 1);
    assert_int_equal(fake.reduce.topk, 1);
    assert_int_equal(fake.reduce.M, 300);
    assert_int_equal(fake.reduce.ldy, 512);
    assert_null(fake.reduce.topk_ids);
    assert_null(fake.reduce.topk_weights);
    /* The storing twin: per-slot rows, the reduce step sums them. */
    if (run(&per_slot, &p, &t, msg, sizeof msg) != MT_OK)
        fail_msg("%s", msg);
    assert_int_equal(fake.gemm[1].sum_topk, 0);
    assert_int_equal(fake.memsets, 1);
    assert_int_equal(fake.reduce.y_f32, 0);
    assert_int_equal(fake.reduce.topk, 4);
    assert_ptr_equal(fake.reduce.topk_ids, t.topk_ids);
    /* A reduce kernel of version 3 reads T only: refused. */
    mt_moe_plan old = plan;
    old.step[MT_STEP_REDUCE].v.template_version = 3;
    assert_int_equal(run(&old, &p, &t, msg, sizeof msg), MT_ERR_INCOMPATIBLE);
    assert_non_null(strstr(msg, "fp32 sums"));
    assert_non_null(strstr(msg, "version 4 or later"));
    assert_int_equal(fake.launches, 0);
    assert_int_equal(fake.memsets, 0);
    /* The sum as GEMM1: refused. */
    mt_moe_plan first = plan;
    set_gemm(&first, MT_STEP_GEMM1, sum2);
    assert_int_equal(run(&first, &p, &t, msg, sizeof msg), MT_ERR_INCOMPATIBLE);
    assert_non_null(strstr(msg, "only GEMM2"));
    assert_int_equal(fake.launches, 0);
    /* The batched format has no slots to sum by (a damaged database's text). */
    mt_problem q = p;
    q.format = MT_FORMAT_BATCHED;
    q.max_tokens = 400;
    mt_moe_plan batched = plan;
    for (int s = 0; s < MT_STEP_ALL; s++)
        for (int i = 0; i < batched.step[s].v.nparams; i++)
            if (!strcmp(batched.step[s].v.params[i].name, "format"))
                strcpy(batched.step[s].v.params[i].value, "batched");
    t.expert_num_tokens = (void *)0x7f000000;
    assert_int_equal(run(&batched, &q, &t, msg, sizeof msg), MT_ERR_INCOMPATIBLE);
    assert_non_null(strstr(msg, "sums the topk slots per token, which needs the standard format"));
    assert_int_equal(fake.launches, 0);
}

/* With an expert map, the steps after the routing that take rows as slots
 * (act_and_mul, the quantizers, the reduce) get local_experts, so that a
 * slot whose expert's map entry is outside [-1, local_E) (bad input, which
 * the routing drops and flags) is not taken as local: its rows were never
 * written. Without it a kernel would drop every slot of such a problem. */
static void test_local_experts_filled(void **state)
{
    (void)state;
    static const char *const store = "mtk_grouped_gemm_sm90_bf16_none_standard_store_m128_n256_k64_g8_s4"
                                     "_ppersist_fwait_btma_e32",
                          *const act = "mtk_act_and_mul_bf16_silu_t256";
    mt_problem p = problem_with_map(300, 8);
    mt_moe_plan plan;
    default_plan(&p, &plan);
    set_gemm(&plan, MT_STEP_GEMM1, store);
    set_gemm(&plan, MT_STEP_ACT, act);
    set_gemm(&plan, MT_STEP_GEMM2, store);
    plan.step[MT_STEP_ACT].fn = (CUfunction)(uintptr_t)0x1100;
    fake_driver(1);
    mt_moe_tensors t = fake_tensors();
    t.expert_map = (const int32_t *)(uintptr_t)0x1A000000;   /* never read */
    char msg[512] = "";
    memset(&fake.act, 0, sizeof fake.act);
    if (run(&plan, &p, &t, msg, sizeof msg) != MT_OK)
        fail_msg("%s", msg);
    assert_ptr_equal(fake.act.topk_ids, t.topk_ids);   /* rows are slots */
    assert_ptr_equal(fake.act.expert_map, t.expert_map);
    assert_int_equal(fake.act.num_experts, 16);
    assert_int_equal(fake.act.local_experts, 8);
    assert_ptr_equal(fake.reduce.topk_ids, t.topk_ids);
    assert_ptr_equal(fake.reduce.expert_map, t.expert_map);
    assert_int_equal(fake.reduce.num_experts, 16);
    assert_int_equal(fake.reduce.local_experts, 8);

    /* w8a8 with the router weight on the input: both quantizers' rows are
     * slots (the first one's too). */
    mt_problem q = p;
    q.quant.mode = MT_QUANT_FP8_PER_TENSOR;
    q.apply_router_weight_on_input = 1;
    mt_moe_plan w8;
    default_plan(&q, &w8);
    fake_driver(1);
    memset(fake.quant, 0, sizeof fake.quant);
    if (run(&w8, &q, &t, msg, sizeof msg) != MT_OK)
        fail_msg("w8a8: %s", msg);
    assert_ptr_equal(fake.quant[0].topk_ids, t.topk_ids);
    for (int i = 0; i < 2; i++) {
        assert_ptr_equal(fake.quant[i].expert_map, t.expert_map);
        assert_int_equal(fake.quant[i].num_experts, 16);
        assert_int_equal(fake.quant[i].local_experts, 8);
    }
}

/* mt_moe_read_error decodes the workspace's error flag (templates/moe_args.h):
 * 0 is no error; 1 + slot names a slot whose topk id is out of range;
 * -(1 + slot) a slot whose expert's expert_map entry is outside
 * [-1, local_E), with its own message. */
static void test_read_error_decodes_flag(void **state)
{
    (void)state;
    mt_problem p = problem_with_map(16, 10);
    fake_driver(0);
    char msg[512] = "";
    const CUdeviceptr ws = (CUdeviceptr)0x80000000u;
    fake.flag = 0;
    assert_int_equal(mt_moe_read_error(ws, &p, msg, sizeof msg), MT_OK);

    fake.flag = 1 + (2 * 4 + 1);   /* slot 9: topk_ids[2][1] */
    assert_int_equal(mt_moe_read_error(ws, &p, msg, sizeof msg), MT_ERR_DEVICE_CHECK);
    assert_non_null(strstr(msg, "topk_ids[2][1] is out of range [0, 16)"));
    assert_null(strstr(msg, "expert_map"));

    fake.flag = -(1 + (3 * 4 + 2));   /* slot 14: topk_ids[3][2] */
    assert_int_equal(mt_moe_read_error(ws, &p, msg, sizeof msg), MT_ERR_DEVICE_CHECK);
    assert_non_null(strstr(msg, "topk_ids[3][2]"));
    assert_non_null(strstr(msg, "expert_map entry is outside [-1, local_E=10)"));
    assert_non_null(strstr(msg, "dropped"));
    assert_null(strstr(msg, "out of range"));

    fake.flag = -1;   /* slot 0 */
    assert_int_equal(mt_moe_read_error(ws, &p, msg, sizeof msg), MT_ERR_DEVICE_CHECK);
    assert_non_null(strstr(msg, "topk_ids[0][0] names an expert whose expert_map entry"));
    fake.flag = 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quant_tensor_checks),
        cmocka_unit_test(test_bf16_weight_maps),
        cmocka_unit_test(test_fp8_weight_maps),
        cmocka_unit_test(test_wide_tensor_quant_grid),
        cmocka_unit_test(test_no_encoder),
        cmocka_unit_test(test_no_map_for_other_kernels),
        cmocka_unit_test(test_pair_weight_maps),
        cmocka_unit_test(test_dependent_launches),
        cmocka_unit_test(test_chunked_persist_waits),
        cmocka_unit_test(test_decode_gemms_under_small_steps),
        cmocka_unit_test(test_gemv_quantizes_own_rows),
        cmocka_unit_test(test_gemv_gemm2_activates_own_rows),
        cmocka_unit_test(test_gemv_gemm1_quantizes_output),
        cmocka_unit_test(test_sm90_gemm1_quantizes_output),
        cmocka_unit_test(test_gemv_chain),
        cmocka_unit_test(test_small_step_needs_early_reads),
        cmocka_unit_test(test_slot_routed_gemv),
        cmocka_unit_test(test_token_sum_gemv),
        cmocka_unit_test(test_last_cta_sum_gemv),
        cmocka_unit_test(test_kernel_load_smem_leave),
        cmocka_unit_test(test_sorted_intermediate),
        cmocka_unit_test(test_tiled_topk_sum),
        cmocka_unit_test(test_local_experts_filled),
        cmocka_unit_test(test_read_error_decodes_flag),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Launching a fused-MoE pipeline (see moe_launch.h).
 */
#include "runtime/moe_launch.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cuda_driver.h"
#include "common/util.h"
#include "templates/gemv_args.h"

static const char *const step_names[MT_STEP_ALL] = {"align", "gemm1", "act",
                                                       "gemm2", "reduce", "quant"};

const char *mt_step_name(mt_step s) { return (unsigned)s < MT_STEP_ALL ? step_names[s] : "?"; }

/* The SM number of an arch name ("sm_90a" -> 90, "compute_90" -> 90), 0 if
 * unknown. */
static int arch_sm(const char *arch)
{
    const char *digits = !arch ? NULL
                         : !strncmp(arch, "sm_", 3) ? arch + 3
                         : !strncmp(arch, "compute_", 8) ? arch + 8
                                                         : NULL;
    return digits ? atoi(digits) : 0;
}

mt_status mt_kernel_load(mt_kernel *k, const mt_variant *v, const void *image, char *msg,
                         size_t msg_size)
{
    mt_status st = MT_OK;
    memset(k, 0, sizeof *k);
    k->v = *v;
    MT_CU_TRY(mt_cu.cuModuleLoadData(&k->module, image), msg, msg_size);
    MT_CU_TRY(mt_cu.cuModuleGetFunction(&k->fn, k->module, v->name), msg, msg_size);
    /* Programmatic dependent launch exists from sm_90 on: images for older
     * targets are never launched that way and are not asked for the mark
     * (mt_device.cuh defines it only from sm_90). Every family of ours
     * carries it; the lookup fails (and a sanitizer reports the failed
     * call) only for an image from elsewhere. */
    CUdeviceptr mark;
    size_t mark_size;
    k->pdl = arch_sm(v->arch) >= 90 &&
             mt_cu.cuModuleGetGlobal(&mark, &mark_size, k->module, "mt_pdl_aware") == CUDA_SUCCESS;
    /* A block past 48 KiB of shared memory, dynamic and static together,
     * needs the kernel's leave for its dynamic part (a kernel whose static
     * size cannot be read is taken to have none, as before this asked). */
    int static_smem = 0;
    if (v->smem_bytes > 0 && mt_cu.cuFuncGetAttribute(&static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                                                      k->fn) != CUDA_SUCCESS)
        static_smem = 0;
    if (v->smem_bytes > 0 && (int64_t)v->smem_bytes + static_smem > 48 * 1024)
        MT_CU_TRY(mt_cu.cuFuncSetAttribute(k->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                           v->smem_bytes),
                  msg, msg_size);
    /* A persistent kernel's grid: as many CTAs as fit on the GPU at once
     * (per SM as its registers and shared memory allow, at least one), so
     * that a small tile runs two or three CTAs per SM whose loads and
     * epilogues overlap each other's. "pingpong" is persistent too (its
     * two computing warpgroups take the CTA's tiles in turn). A wide
     * act_quant (UNITS > 1) gets that many CTAs at least (launch_quant). */
    const char *pipe = mt_variant_get(v, "PIPE");
    const int wide_quant = !strcmp(v->family, "act_quant") && mt_variant_int(v, "UNITS", 1) > 1;
    if ((pipe && (!strcmp(pipe, "persist") || !strcmp(pipe, "pingpong"))) || wide_quant) {
        CUdevice dev;
        int sms, per_sm = 0;
        MT_CU_TRY(mt_cu.cuCtxGetDevice(&dev), msg, msg_size);
        MT_CU_TRY(mt_cu.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev), msg,
                  msg_size);
        MT_CU_TRY(mt_cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k->fn, v->threads,
                                                                    (size_t)v->smem_bytes),
                  msg, msg_size);
        k->max_ctas = sms * (per_sm > 1 ? per_sm : 1);
    }
    /* CTAs in clusters (CLUSTER, a kernel attribute): the grid is whole
     * clusters, and a persistent one as many as the GPU holds at once
     * (SMs in a GPC pair up, so that can be fewer than SMs / CLUSTER). */
    k->cluster = (int)mt_variant_int(v, "CLUSTER", 1);
    if (k->cluster > 1 && k->max_ctas > 0) {
        if (!mt_cu.cuOccupancyMaxActiveClusters) {
            st = mt_errf(msg, msg_size, MT_ERR_NO_DRIVER,
                         "kernel %s runs in clusters of %d CTAs, and this CUDA driver lacks "
                         "cuOccupancyMaxActiveClusters (CUDA 12 or newer needed)",
                         v->name, k->cluster);
            goto fail;
        }
        CUlaunchConfig cfg = {.gridDimX = (unsigned)(k->cluster * k->max_ctas), .gridDimY = 1, .gridDimZ = 1,
                              .blockDimX = (unsigned)v->threads, .blockDimY = 1, .blockDimZ = 1,
                              .sharedMemBytes = (unsigned)v->smem_bytes};
        int clusters = 0;
        MT_CU_TRY(mt_cu.cuOccupancyMaxActiveClusters(&clusters, k->fn, &cfg), msg, msg_size);
        if (clusters < 1) {
            st = mt_errf(msg, msg_size, MT_ERR_UNSUPPORTED,
                         "kernel %s: no cluster of %d CTAs (%d threads, %d bytes of shared memory "
                         "each) fits on this GPU at once (cuOccupancyMaxActiveClusters: %d)",
                         v->name, k->cluster, v->threads, v->smem_bytes, clusters);
            goto fail;
        }
        k->max_ctas = k->cluster * clusters;
    }
    return MT_OK;
fail:
    mt_kernel_unload(k);
    return st;
}

void mt_kernel_unload(mt_kernel *k)
{
    if (k && k->module)
        mt_cu.cuModuleUnload(k->module);
    if (k)
        memset(k, 0, sizeof *k);
}

/* Is GEMM kernel k's epilogue `epilogue`? */
static int has_epilogue(const mt_kernel *k, const char *epilogue)
{
    const char *epi = mt_variant_get(&k->v, "epilogue");
    return epi && !strcmp(epi, epilogue);
}

/* Does GEMM kernel k apply the activation-and-mul in its epilogue (silu,
 * gelu: a tile of BLOCK_N / 2 gate and as many up columns)? "store" and
 * the topk sums, "sum" and "lastsum", write the product's columns as they
 * are. */
static int fuses_activation(const mt_kernel *k)
{
    return mt_variant_get(&k->v, "epilogue") && !has_epilogue(k, "store") && !mt_variant_sums_topk(&k->v);
}

static int gemm1_fused(const mt_moe_plan *plan)
{
    return plan->step[MT_STEP_GEMM1].fn && fuses_activation(&plan->step[MT_STEP_GEMM1]);
}

/* Does GEMM kernel k route its rows itself, a row block per slot, without
 * the alignment step (grouped_gemv with BLOCK_M 1; templates/gemv_args.h)? */
static int slot_routed(const mt_kernel *k)
{
    return !strcmp(k->v.family, "grouped_gemv") && mt_variant_int(&k->v, "BLOCK_M", 0) == 1;
}

static int gemm1_quantizes_a(const mt_moe_plan *plan)
{
    return plan->step[MT_STEP_GEMM1].fn && mt_variant_quantizes_a(&plan->step[MT_STEP_GEMM1].v);
}

/* Does the plan's GEMM2 activate and quantize GEMM1's stored output itself
 * (grouped_gemv AQUANT=silu, gelu), or its GEMM1 quantize its activated
 * output for it (OQUANT=last), so that the pipeline has no act step? */
static int gemm2_quantizes_a(const mt_moe_plan *plan)
{
    return plan->step[MT_STEP_GEMM2].fn && mt_variant_quantizes_a(&plan->step[MT_STEP_GEMM2].v);
}
static int gemm1_quantizes_out(const mt_moe_plan *plan)
{
    return plan->step[MT_STEP_GEMM1].fn && mt_variant_quantizes_out(&plan->step[MT_STEP_GEMM1].v);
}

/* Does the plan's GEMM1 run GEMM2 in its own launch (grouped_gemv CHAIN >
 * 0), so that the GEMM2 step, the plan's chained tile, is not launched? */
static int gemm1_chains(const mt_moe_plan *plan)
{
    return plan->step[MT_STEP_GEMM1].fn && mt_variant_chain(&plan->step[MT_STEP_GEMM1].v) > 0;
}

/* Does GEMM kernel k read its A rows by TMA, a box of consecutive rows per
 * tile (grouped_gemm_sm90 ALOAD=tma), so that they must be laid out per
 * expert? */
static int reads_a_by_tma(const mt_kernel *k)
{
    const char *aload = mt_variant_get(&k->v, "ALOAD");
    return aload && !strcmp(aload, "tma");
}

/* Does the plan keep the intermediate between the GEMMs (GEMM1's output,
 * the activation's) in the sorted order, a row per position of sorted_ids,
 * rather than a row per slot: the standard format with a GEMM2 that reads
 * its A rows by TMA. */
static int sorted_intermediate(const mt_moe_plan *plan, const mt_problem *p)
{
    return p->format == MT_FORMAT_STANDARD && plan->step[MT_STEP_GEMM2].fn &&
           reads_a_by_tma(&plan->step[MT_STEP_GEMM2]);
}

/* Does the plan's GEMM2 add each token's topk slots itself (the epilogue
 * "sum")? A slot-routed one (grouped_gemv, a row block
 * per token) then writes the output tensor and leaves the reduce step
 * nothing to do (gemm2_writes_out); a tiled one (grouped_gemm,
 * grouped_gemm_sm90) adds its rows into fp32 sums in the workspace, zeroed
 * with the flags, which the reduce step rounds to the output
 * (gemm2_sums_f32). */
static int gemm2_sums(const mt_moe_plan *plan)
{
    return plan->step[MT_STEP_GEMM2].fn && has_epilogue(&plan->step[MT_STEP_GEMM2], "sum");
}
static int gemm2_writes_out(const mt_moe_plan *plan)
{
    return gemm2_sums(plan) && slot_routed(&plan->step[MT_STEP_GEMM2]);
}
static int gemm2_sums_f32(const mt_moe_plan *plan)
{
    return gemm2_sums(plan) && !slot_routed(&plan->step[MT_STEP_GEMM2]);
}
/* Does the plan's GEMM2 store a row per slot and then, its last CTA of each
 * token and column block, sum them into the output ("lastsum": no reduce
 * step; counters in the workspace, zeroed with the flags)? */
static int gemm2_sums_last(const mt_moe_plan *plan)
{
    return plan->step[MT_STEP_GEMM2].fn && has_epilogue(&plan->step[MT_STEP_GEMM2], "lastsum");
}

/* The first moe_reduce version that reads fp32 sums (mt_reduce_args.y_f32). */
#define REDUCE_F32_VERSION 4

/* Stored kernels read these offsets (templates/moe_args.h): a field added
 * in the middle would shift what kernels built before it read. */
_Static_assert(offsetof(mt_gemm_args, sum_topk) == 188 && offsetof(mt_gemm_args, b_map) == 192 &&
                   offsetof(mt_gemm_args, a_map) == 320 && sizeof(mt_gemm_args) == 448,
               "mt_gemm_args keeps the layout of stored kernels");
_Static_assert(offsetof(mt_gemv_slot_args, topk_ids) == sizeof(mt_gemm_args),
               "mt_gemv_slot_args keeps the layout of stored kernels");
_Static_assert(offsetof(mt_gemv_slot_args, gemm) == 0,
               "grouped_gemm_sm90_out_quant.cuh finds the whole argument from its gemm member");
/* local_experts came after the rest (the sizes these structs had before
 * it): a stored kernel built before it reads the prefix it knows. */
_Static_assert(offsetof(mt_act_args, local_experts) == 80 &&
                   offsetof(mt_quant_args, local_experts) == 128 &&
                   offsetof(mt_reduce_args, y_f32) == 72 &&
                   offsetof(mt_reduce_args, local_experts) == 76,
               "the act, quant and reduce arguments keep the layout of stored kernels");

/* CTAs per output tile of a GEMM kernel (1: not split-K). */
static int64_t split_k(const mt_kernel *k) { return mt_variant_int(&k->v, "SPLIT_K", 1); }

int mt_moe_plan_uses(const mt_moe_plan *plan, const mt_problem *p, mt_step s)
{
    const int w8a8 = mt_quant_is_w8a8(p->quant.mode);
    switch (s) {
    case MT_STEP_ALIGN:
        return p->format == MT_FORMAT_STANDARD && !slot_routed(&plan->step[MT_STEP_GEMM1]);
    case MT_STEP_REDUCE:
        return p->format == MT_FORMAT_STANDARD && !gemm2_writes_out(plan) && !gemm2_sums_last(plan);
    case MT_STEP_ACT:   /* w8a8: it quantizes, unless a GEMM does */
        return w8a8 ? !gemm2_quantizes_a(plan) && !gemm1_quantizes_out(plan) : !gemm1_fused(plan);
    case MT_STEP_QUANT: return w8a8 && !gemm1_quantizes_a(plan);
    case MT_STEP_GEMM2: return !gemm1_chains(plan);
    default: return 1;
    }
}

int mt_moe_plan_needs(const mt_moe_plan *plan, const mt_problem *p, mt_step s)
{
    return mt_moe_plan_uses(plan, p, s) || (s == MT_STEP_GEMM2 && gemm1_chains(plan));
}

/* act_quant's qtype and gran values for a w8a8 mode. */
static const char *quant_qtype(mt_quant_mode q)
{
    return mt_quant_act_dtype(q) == MT_DTYPE_FP8_E4M3 ? "fp8" : "int8";
}
static const char *quant_gran(mt_quant_mode q)
{
    switch (mt_quant_granularity(q)) {
    case MT_GRAN_TENSOR: return "tensor";
    case MT_GRAN_TOKEN: return "token";
    default: return "block";
    }
}

mt_status mt_moe_quant_shape_ok(const mt_problem *p, char *msg, size_t msg_size)
{
    const mt_quant_mode q = p->quant.mode;
    if (mt_quant_is_w8a8(q) && (p->K % 16 || p->N % 16))
        return mt_errf(msg, msg_size, MT_ERR_ALIGNMENT,
                       "quant mode %s needs K and N to be multiples of 16 (K=%lld, N=%lld)",
                       mt_quant_mode_name(q), (long long)p->K, (long long)p->N);
    return MT_OK;
}

mt_status mt_moe_quant_supported(const mt_problem *p, const char *arch, char *msg,
                                 size_t msg_size)
{
    const mt_quant_mode q = p->quant.mode;
    if (mt_quant_act_dtype(q) == MT_DTYPE_FP8_E4M3 && arch_sm(arch) < 89)
        return mt_errf(msg, msg_size, MT_ERR_UNSUPPORTED,
                       "quant mode %s needs fp8 tensor cores (sm_89 or newer); the kernels are "
                       "for %s",
                       mt_quant_mode_name(q), arch ? arch : "(no arch)");
    return mt_moe_quant_shape_ok(p, msg, msg_size);
}

/* Compare a variant parameter with the value the problem needs. */
static mt_status expect_param(const mt_kernel *k, mt_step s, const char *param, const char *want,
                              char *msg, size_t msg_size)
{
    const char *have = mt_variant_get(&k->v, param);
    if (!have || strcmp(have, want) != 0)
        return mt_errf(msg, msg_size, MT_ERR_INCOMPATIBLE,
                       "%s kernel %s has %s=%s but the problem needs %s", mt_step_name(s),
                       k->v.name, param, have ? have : "(none)", want);
    return MT_OK;
}

/* The GEMMs that quantize their own A rows (grouped_gemv AQUANT other than
 * "step"): GEMM1's token rows as they are ("cta"), GEMM2's after the
 * activation-and-mul of GEMM1's stored gate and up halves ("silu",
 * "gelu"), each into shared memory of at most MT_GEMV_AQ_MAX_K bytes (a
 * GEMM2 that sums the topk, "sum", holds every slot of its token). */
static mt_status check_own_quant(const mt_moe_plan *plan, const mt_problem *p, char *msg, size_t msg_size)
{
    const mt_kernel *g1 = &plan->step[MT_STEP_GEMM1], *g2 = &plan->step[MT_STEP_GEMM2];
    const char *act1 = mt_variant_a_activation(&g1->v), *act2 = mt_variant_a_activation(&g2->v);
    if (act1)
        return mt_errf(msg, msg_size, MT_ERR_INCOMPATIBLE,
                       "gemm1 kernel %s applies %s to GEMM1's output before it quantizes it, which "
                       "is GEMM2's work: take its AQUANT=step or AQUANT=cta twin", g1->v.name, act1);
    if (mt_variant_quantizes_a(&g2->v) && !act2)
        return mt_errf(msg, msg_size, MT_ERR_INCOMPATIBLE,
                       "gemm2 kernel %s quantizes its A rows as they are (AQUANT=cta), which is "
                       "GEMM1's work: take its AQUANT=step twin, or its AQUANT=%s twin that "
                       "applies the activation first", g2->v.name, mt_activation_name(p->activation));
    if (mt_variant_quantizes_a(&g1->v) && p->K > MT_GEMV_AQ_MAX_K)
        return mt_errf(msg, msg_size, MT_ERR_INCOMPATIBLE,
                       "gemm1 kernel %s quantizes its A rows in shared memory, at most K=%d; the "
                       "problem has K=%lld", g1->v.name, MT_GEMV_AQ_MAX_K, (long long)p->K);
    if (mt_variant_quantizes_a(&g1->v) && p->apply_router_weight_on_input)
        return mt_errf(msg, msg_size, MT_ERR_INCOMPATIBLE,
                       "gemm1 kernel %s quantizes its token rows as they are, and this problem "
                       "weighs each slot's row by its router weight first (the quant step does "
                       "that): take its AQUANT=step twin", g1->v.name);
    if (mt_variant_quantizes_out(&g2->v))
        return mt_errf(msg, msg_size, MT_ERR_INCOMPATIBLE,
                       "gemm2 kernel %s quantizes its output for a GEMM after it, which is GEMM1's "
                       "work", g2->v.name);
    if (!act2)
        return MT_OK;
    if (strcmp(act2, mt_activation_name(p->activation)))
        return mt_errf(msg, msg_size, MT_ERR_INCOMPATIBLE,
                       "gemm2 kernel %s applies %s to GEMM1's output, and the problem's activation "
                       "is %s: take its AQUANT=%s twin", g2->v.name, act2,
                       mt_activation_name(p->activation), mt_activation_name(p->activation));
    if (gemm1_fused(plan))
        return mt_errf(msg, msg_size, MT_ERR_INCOMPATIBLE,
                       "gemm2 kernel %s applies the activation to GEMM1's stored gate and up "
                       "halves, and gemm1 kernel %s applies it already (epilogue %s): take a "
                       "GEMM1 with epilogue store", g2->v.name, g1->v.name,
                       mt_variant_get(&g1->v, "epilogue"));
    const int64_t rows = gemm2_writes_out(plan) ? p->topk : 1;
    if (rows * p->N > MT_GEMV_AQ_MAX_K)
        return mt_errf(msg, msg_size, MT_ERR_INCOMPATIBLE,
                       "gemm2 kernel %s quantizes %lld row(s) of N=%lld in shared memory, at most "
                       "%d values; take its AQUANT=step twin", g2->v.name, (long long)rows,
                       (long long)p->N, MT_GEMV_AQ_MAX_K);
    return MT_OK;
}

mt_status mt_moe_plan_check(const mt_moe_plan *plan, const mt_problem *p, char *msg,
                            size_t msg_size)
{
    mt_status st = mt_problem_validate(p, msg, msg_size);
    if (st)
        return st;
    if (plan->step[MT_STEP_GEMM1].fn &&
        (st = mt_moe_quant_supported(p, plan->step[MT_STEP_GEMM1].v.arch, msg, msg_size)))
        return st;
    if (plan->step[MT_STEP_GEMM1].fn && mt_variant_sums_topk(&plan->step[MT_STEP_GEMM1].v))
        return mt_errf(msg, msg_size, MT_ERR_INCOMPATIBLE,
                       "gemm1 kernel %s sums the topk slots per token, which only GEMM2 can do",
                       plan->step[MT_STEP_GEMM1].v.name);
    const char *dtype = mt_dtype_name(p->dtype);
    for (int s = 0; s < MT_STEP_ALL; s++) {
        const mt_kernel *k = &plan->step[s];
        if (!mt_moe_plan_needs(plan, p, (mt_step)s))
            continue;
        if (!k->fn)
            return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "the plan has no %s kernel",
                           mt_step_name((mt_step)s));
        if (s != MT_STEP_ALIGN && (st = expect_param(k, (mt_step)s, "dtype", dtype, msg, msg_size)))
            return st;
    }
    const mt_kernel *g1 = &plan->step[MT_STEP_GEMM1], *g2 = &plan->step[MT_STEP_GEMM2];
    if (gemm1_chains(plan) && (!g2->fn || !mt_variant_is_chain_gemm2(&g2->v, &g1->v)))
        return mt_errf(msg, msg_size, MT_ERR_INCOMPATIBLE,
                       "gemm1 kernel %s runs GEMM2 in its launch as the lastsum tile of %lld "
                       "weight rows with its WARPS, UNROLL and AHEAD; the plan's gemm2 must name "
                       "that tile, not %s", g1->v.name, (long long)mt_variant_chain(&g1->v),
                       g2->fn ? g2->v.name : "(none)");
    const char *fmt = mt_act_format_name(p->format), *qn = mt_quant_mode_name(p->quant.mode);
    if ((st = expect_param(g1, MT_STEP_GEMM1, "format", fmt, msg, msg_size)) ||
        (st = expect_param(g2, MT_STEP_GEMM2, "format", fmt, msg, msg_size)) ||
        (st = expect_param(g1, MT_STEP_GEMM1, "quant", qn, msg, msg_size)) ||
        (st = expect_param(g2, MT_STEP_GEMM2, "quant", qn, msg, msg_size)) ||
        (!gemm2_sums(plan) && !gemm2_sums_last(plan) &&
         (st = expect_param(g2, MT_STEP_GEMM2, "epilogue", "store", msg, msg_size))))
        return st;
    if (gemm2_sums_last(plan) && !slot_routed(g2))
        return mt_errf(msg, msg_size, MT_ERR_INCOMPATIBLE,
                       "gemm2 kernel %s sums a token's slots in its last CTA, which needs a row "
                       "block per slot (grouped_gemv, BLOCK_M 1)", g2->v.name);
    if (gemm2_sums_f32(plan) && !strcmp(g2->v.family, "grouped_gemv"))
        return mt_errf(msg, msg_size, MT_ERR_INCOMPATIBLE,
                       "gemm2 kernel %s sums the topk slots per token, which grouped_gemv does "
                       "with a row block per token (BLOCK_M 1)", g2->v.name);
    if (gemm2_sums_f32(plan) && p->format != MT_FORMAT_STANDARD)
        return mt_errf(msg, msg_size, MT_ERR_INCOMPATIBLE,
                       "gemm2 kernel %s sums the topk slots per token, which needs the standard "
                       "format's slots", g2->v.name);
    if (gemm2_sums_f32(plan) && plan->step[MT_STEP_REDUCE].fn &&
        plan->step[MT_STEP_REDUCE].v.template_version < REDUCE_F32_VERSION)
        return mt_errf(msg, msg_size, MT_ERR_INCOMPATIBLE,
                       "gemm2 kernel %s leaves fp32 sums, which reduce kernel %s (moe_reduce "
                       "version %d) cannot read: version %d or later needed",
                       g2->v.name, plan->step[MT_STEP_REDUCE].v.name,
                       plan->step[MT_STEP_REDUCE].v.template_version, REDUCE_F32_VERSION);
    if (gemm2_writes_out(plan) && p->topk > MT_GEMV_SUM_MAX_TOPK)
        return mt_errf(msg, msg_size, MT_ERR_INCOMPATIBLE,
                       "gemm2 kernel %s sums at most %d topk slots per token; the problem has "
                       "topk=%lld", g2->v.name, MT_GEMV_SUM_MAX_TOPK, (long long)p->topk);
    if (mt_quant_is_w8a8(p->quant.mode)) {
        /* quant: the GEMM1 input as is; act: the GEMM2 input, with the
         * activation unless gemm1 already applied it. */
        const int fused = gemm1_fused(plan);
        if (fused && (st = expect_param(g1, MT_STEP_GEMM1, "epilogue",
                                        mt_activation_name(p->activation), msg, msg_size)))
            return st;
        const mt_step qs[2] = {MT_STEP_QUANT, MT_STEP_ACT};
        for (int i = 0; i < 2; i++) {
            const mt_kernel *k = &plan->step[qs[i]];
            if (!mt_moe_plan_uses(plan, p, qs[i]))
                continue;   /* gemm1 quantizes its A rows itself */
            const char *act = i == 0 || fused ? "none" : mt_activation_name(p->activation);
            if (strcmp(k->v.family, "act_quant"))
                return mt_errf(msg, msg_size, MT_ERR_INCOMPATIBLE,
                               "%s kernel %s is not an act_quant kernel, which quant %s needs",
                               mt_step_name(qs[i]), k->v.name, qn);
            if ((st = expect_param(k, qs[i], "qtype", quant_qtype(p->quant.mode), msg, msg_size)) ||
                (st = expect_param(k, qs[i], "gran", quant_gran(p->quant.mode), msg, msg_size)) ||
                (st = expect_param(k, qs[i], "act", act, msg, msg_size)))
                return st;
        }
    } else if (mt_moe_plan_uses(plan, p, MT_STEP_ACT)) {
        if ((st = expect_param(&plan->step[MT_STEP_ACT], MT_STEP_ACT, "activation",
                               mt_activation_name(p->activation), msg, msg_size)))
            return st;
    } else if ((st = expect_param(g1, MT_STEP_GEMM1, "epilogue", mt_activation_name(p->activation),
                                  msg, msg_size))) {
        return st;
    }
    if ((st = check_own_quant(plan, p, msg, msg_size)))
        return st;
    if (mt_variant_int(&g1->v, "BLOCK_M", 0) != mt_variant_int(&g2->v, "BLOCK_M", -1))
        return mt_errf(msg, msg_size, MT_ERR_INCOMPATIBLE,
                       "gemm1 %s and gemm2 %s must share BLOCK_M", g1->v.name, g2->v.name);
    if (slot_routed(g1) != slot_routed(g2))
        return mt_errf(msg, msg_size, MT_ERR_INCOMPATIBLE,
                       "gemm1 %s and gemm2 %s must both route rows by slot (grouped_gemv, "
                       "BLOCK_M 1) or both take them from the alignment step",
                       g1->v.name, g2->v.name);
    if (reads_a_by_tma(g1) && p->format == MT_FORMAT_STANDARD)
        return mt_errf(msg, msg_size, MT_ERR_INCOMPATIBLE,
                       "gemm1 kernel %s reads its A rows by TMA, which needs them laid out per "
                       "expert: in the standard format GEMM1 gathers token rows (take its "
                       "ALOAD=cp twin; ALOAD=tma serves GEMM2 there, or the batched format)",
                       g1->v.name);
    if (slot_routed(g1) && p->format != MT_FORMAT_STANDARD)
        return mt_errf(msg, msg_size, MT_ERR_INCOMPATIBLE,
                       "gemm1 %s routes rows by slot, which needs the standard format's topk ids",
                       g1->v.name);
    /* Variants can come from a database file: bound what the launch
     * arithmetic uses (found by fuzzing, RELIABILITY.md R7). */
    for (int s = 0; s < MT_STEP_ALL; s++) {
        const mt_kernel *k = &plan->step[s];
        if (!k->fn)
            continue;
        const int64_t bm = mt_variant_int(&k->v, "BLOCK_M", 16), bn = mt_variant_int(&k->v, "BLOCK_N", 16);
        const int64_t sk = mt_variant_int(&k->v, "SPLIT_K", 1);
        if (bm < 1 || bm > 256 || bn < 1 || bn > 512 || sk < 1 || sk > 64 || k->v.threads < 1 ||
            k->v.threads > 1024 || k->v.smem_bytes < 0 || k->v.smem_bytes > MT_MAX_SMEM_PER_BLOCK)
            return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG,
                           "%s kernel %s has an impossible launch shape (BLOCK_M %lld, BLOCK_N "
                           "%lld, SPLIT_K %lld, %d threads, %d bytes of shared memory)",
                           mt_step_name((mt_step)s), k->v.name, (long long)bm, (long long)bn,
                           (long long)sk, k->v.threads, k->v.smem_bytes);
    }
    if (!mt_variant_get(&g1->v, "epilogue") || !mt_variant_get(&g2->v, "epilogue"))
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "gemm kernels %s/%s lack an epilogue",
                       g1->v.name, g2->v.name);
    return MT_OK;
}

/* Workspace layout, computed the same way for sizing and for running. */
typedef struct ws_layout {
    size_t flags, sorted_ids, block_expert, c1, c2, c3, total;
    size_t q1, s1, q2, s2;       /* w8a8: quantized GEMM inputs and their scales */
    size_t count1, count2;       /* split-K (and lastsum, count2; OQUANT=last, count1):
                                  * the GEMMs' counters, after the flags */
    int64_t counters1;           /* words at count1 (GEMM1's counters) */
    size_t chain;                /* a chained GEMM1 (CHAIN): its work and CTA counters
                                  * and a count of GEMM1 tiles done per slot, after them */
    size_t partial;              /* split-K: partial sums, shared by the GEMMs */
    size_t cta_counts;           /* align on a grid: per-CTA expert counts */
    int64_t align_ctas;          /* CTAs of the align step (1: one launch) */
    int64_t max_padded, num_m_blocks, rows;
    int64_t rows_mid;            /* rows of the intermediate (c1, c2, q2): `rows`, or
                                  * max_padded in the sorted order */
    int64_t rows1;               /* w8a8: rows of q1 */
    int64_t tiles1, tiles2;      /* output tiles of GEMM1 and GEMM2 */
    int64_t grid1, grid2;        /* their CTAs (gemm_grid) */
    int64_t zero_words;          /* int32 words from `flags` zeroed before each run */
} ws_layout;

/* Flag words at the start of the workspace: [0] the routing error flag
 * (a bad topk id or expert_map entry, templates/moe_args.h),
 * [1] num_padded, [2] and [3] the per-tensor amax of the two quant steps.
 * Split-K and "lastsum" plans put their counters right after them, so that
 * the one memset that clears the flags re-arms the counters too (after a
 * fault left some counted up). */
#define WS_FLAGS 4

/* Output tiles of a GEMM kernel (its grid is that times SPLIT_K). A fused
 * activation's tile yields BLOCK_N / 2 columns. */
static int64_t gemm_tiles(const mt_kernel *k, int64_t num_m_blocks, int64_t out_cols)
{
    int64_t bn = mt_variant_int(&k->v, "BLOCK_N", 64);
    if (fuses_activation(k))
        bn /= 2;
    if (bn < 1)
        bn = 1;   /* a fused BLOCK_N of 1 (no template makes one): no division by 0 */
    return num_m_blocks * ((out_cols + bn - 1) / bn);
}

/* CTAs of a GEMM launch: a CTA per tile and split-K slice, or, for a
 * persistent kernel, at most as many as the GPU holds at once (its CTAs walk
 * the tiles). */
static int64_t gemm_grid(const mt_kernel *k, int64_t tiles)
{
    int64_t ctas = tiles * split_k(k);
    if (k->cluster > 1)   /* whole clusters */
        ctas = (ctas + k->cluster - 1) / k->cluster * k->cluster;
    return k->max_ctas > 0 && ctas > k->max_ctas ? k->max_ctas : ctas;
}

/* Bytes of the partial sums of a split-K GEMM: a BM x BN fp32 tile per
 * CTA; 0 for an unsplit one. */
static size_t partial_bytes(const mt_kernel *k, int64_t tiles)
{
    const int64_t sk = split_k(k);
    return sk > 1 ? (size_t)(tiles * sk * mt_variant_int(&k->v, "BLOCK_M", 16) *
                             mt_variant_int(&k->v, "BLOCK_N", 64)) * sizeof(float)
                  : 0;
}

/* Slots per CTA when the align step runs on a grid. Up to two chunks a
 * single CTA is quicker (one launch); past that its scattered stores of
 * sorted_ids make it the slowest step of a large batch (tens of
 * microseconds at 32k slots on an H200). */
#define ALIGN_CHUNK 1024
/* Every CTA of the second phase reads all CTAs' counts: past this many
 * CTAs the chunks grow instead, so that work stays linear in the slots. */
#define ALIGN_MAX_CTAS 256

static int64_t align_ctas(int64_t slots)
{
    if (slots <= 2 * ALIGN_CHUNK)
        return 1;
    const int64_t ctas = (slots + ALIGN_CHUNK - 1) / ALIGN_CHUNK;
    return ctas < ALIGN_MAX_CTAS ? ctas : ALIGN_MAX_CTAS;
}

/* Activation scales per quantized row of n columns. */
static int64_t act_scales_per_row(const mt_problem *p, int64_t n)
{
    return mt_quant_granularity(p->quant.mode) == MT_GRAN_BLOCK ? (n + 127) / 128 : 1;
}

static size_t take(size_t *off, size_t bytes)
{
    size_t at = *off;
    *off += (bytes + 255) & ~(size_t)255;
    return at;
}

static ws_layout layout(const mt_moe_plan *plan, const mt_problem *p)
{
    ws_layout L;
    memset(&L, 0, sizeof L);
    const int64_t bm = mt_variant_int(&plan->step[MT_STEP_GEMM1].v, "BLOCK_M", 16);
    const size_t es = mt_dtype_size(p->dtype);
    int64_t slots = p->M * p->topk;
    if (p->format == MT_FORMAT_STANDARD) {
        int64_t busy = slots < p->local_E ? slots : p->local_E;
        L.max_padded = (slots + busy * (bm - 1) + bm - 1) / bm * bm;
        L.num_m_blocks = L.max_padded / bm;
        L.rows = slots;
    } else {
        L.num_m_blocks = p->local_E * ((p->max_tokens + bm - 1) / bm);
        L.rows = p->local_E * p->max_tokens;
    }
    const int fused = gemm1_fused(plan), w8a8 = mt_quant_is_w8a8(p->quant.mode);
    const int tensor = mt_quant_granularity(p->quant.mode) == MT_GRAN_TENSOR;
    /* GEMM1 input rows: tokens, or slots when the router weight is applied
     * on input (each slot's weighted row is quantized on its own). */
    L.rows_mid = sorted_intermediate(plan, p) ? L.max_padded : L.rows;
    L.rows1 = p->format == MT_FORMAT_BATCHED ? L.rows
              : p->apply_router_weight_on_input ? slots : p->M;
    const mt_kernel *g1 = &plan->step[MT_STEP_GEMM1], *g2 = &plan->step[MT_STEP_GEMM2];
    L.tiles1 = gemm_tiles(g1, L.num_m_blocks, fused ? p->N : 2 * p->N);
    /* A slot-routed summing GEMM2 takes a row block per token. */
    L.tiles2 = gemm_tiles(g2, gemm2_writes_out(plan) ? p->M : L.num_m_blocks, p->K);
    /* A chained GEMM1: a CTA per tile of both GEMMs, never fewer (each
     * takes one, grouped_gemv_chain.cuh). */
    const int chains = gemm1_chains(plan);
    L.grid1 = chains ? L.tiles1 + L.tiles2 : gemm_grid(g1, L.tiles1);
    L.grid2 = chains ? 0 : gemm_grid(g2, L.tiles2);
    /* Counters: split-K's per tile, a last-CTA sum's per token and column
     * block (fewer than GEMM2's tiles, a tile per slot and block); then a
     * chained launch's work and done counters and per-slot counts. */
    const int counted = split_k(g1) > 1 || split_k(g2) > 1 || gemm2_sums_last(plan) || gemm1_quantizes_out(plan);
    L.counters1 = counted ? L.tiles1 : 0;
    if (gemm1_quantizes_out(plan) && !slot_routed(g1)) {
        /* A tiled GEMM1 counts per 64 rows of its row blocks and 128-column
         * group (templates/grouped_gemm_sm90_out_quant.cuh). */
        const int64_t units = L.num_m_blocks * ((bm + 63) / 64) * ((p->N + 127) / 128);
        L.counters1 = units > L.tiles1 ? units : L.tiles1;
    }
    const int64_t counters = counted ? L.counters1 + L.tiles2 : 0;
    L.zero_words = WS_FLAGS + counters + (chains ? 2 + slots : 0);
    size_t off = 0;
    L.flags = take(&off, (size_t)L.zero_words * sizeof(int32_t));
    L.count1 = L.flags + WS_FLAGS * sizeof(int32_t);
    L.count2 = L.count1 + (size_t)L.counters1 * sizeof(int32_t);
    L.chain = L.count1 + (size_t)counters * sizeof(int32_t);
    L.align_ctas = p->format == MT_FORMAT_STANDARD ? align_ctas(slots) : 1;
    L.cta_counts = take(&off, L.align_ctas > 1 ? (size_t)(L.align_ctas * p->local_E) * sizeof(int32_t)
                                               : 0);
    L.sorted_ids = take(&off, (size_t)L.max_padded * sizeof(int32_t));
    L.block_expert = take(&off, (size_t)(L.max_padded / bm) * sizeof(int32_t));
    L.c1 = take(&off, (size_t)L.rows_mid * (size_t)(fused ? p->N : 2 * p->N) * es);
    L.c2 = take(&off, fused || w8a8 ? 0 : (size_t)L.rows_mid * (size_t)p->N * es);
    if (w8a8) {
        /* (none where GEMM1 quantizes its own A rows) */
        const int q1 = mt_moe_plan_uses(plan, p, MT_STEP_QUANT);
        L.q1 = take(&off, q1 ? (size_t)L.rows1 * (size_t)p->K : 0);
        L.s1 = take(&off, q1 ? (size_t)(tensor ? 1 : L.rows1 * act_scales_per_row(p, p->K)) * sizeof(float) : 0);
        /* (none where GEMM2 quantizes its own A rows) */
        const int q2 = !gemm2_quantizes_a(plan);
        L.q2 = take(&off, q2 ? (size_t)L.rows_mid * (size_t)p->N : 0);
        L.s2 = take(&off, q2 ? (size_t)(tensor ? 1 : L.rows_mid * act_scales_per_row(p, p->N)) * sizeof(float) : 0);
    }
    /* GEMM2's output: a row per slot, or the fp32 sums of a summing GEMM2. */
    L.c3 = take(&off, p->format != MT_FORMAT_STANDARD || gemm2_writes_out(plan) ? 0
                      : gemm2_sums_f32(plan) ? (size_t)p->M * (size_t)p->K * sizeof(float)
                                             : (size_t)L.rows * (size_t)p->K * es);
    /* GEMM2 starts after GEMM1 ends on the stream: one region serves both. */
    const size_t pb1 = partial_bytes(g1, L.tiles1), pb2 = partial_bytes(g2, L.tiles2);
    L.partial = take(&off, pb1 > pb2 ? pb1 : pb2);
    L.total = off;
    return L;
}

size_t mt_moe_workspace_size(const mt_moe_plan *plan, const mt_problem *p)
{
    return layout(plan, p).total;
}

/* The launches of one call, in stream order. Every one after the first
 * whose kernel keeps the protocol of mt_device.cuh (mt_kernel.pdl) goes out
 * as a programmatic dependent launch: it may start under the tail of the
 * launch ahead of it and waits inside for that one's results. The first
 * launch of a call is an ordinary one, so a call starts after everything
 * queued before it. A plan whose pipeline says launch=late has every GEMM
 * wait for the step ahead before it reads anything (no early weight loads,
 * gemm_early; a persistent GEMM, or one under a small step, then launches
 * the ordinary way, launch_is_dependent); MOETUNE_PDL=late in the
 * environment does that for every plan (to time what the early loads
 * bring), MOETUNE_PDL=0 turns dependent launches off. MOETUNE_TRACE=1
 * prints every GEMM launch's arguments on stderr (to place an address a
 * sanitizer reports). Both are read once per call. */
typedef struct launch_seq {
    CUstream stream;
    int pdl;        /* the driver has cuLaunchKernelEx and it is not turned off */
    int early;      /* GEMMs may read the routing and weights before they wait */
    int trace;      /* MOETUNE_TRACE=1 */
    int count;      /* kernels launched so far */
    mt_step last;   /* the step of the last one */
    unsigned last_grid;   /* and its CTAs */
} launch_seq;

static launch_seq launch_seq_start(const mt_moe_plan *plan, CUstream stream)
{
    const char *env = getenv("MOETUNE_PDL"), *trace = getenv("MOETUNE_TRACE");
    launch_seq q = {.stream = stream, .pdl = mt_cu.cuLaunchKernelEx != NULL &&
                                             !(env && !strcmp(env, "0")),
                    .early = !plan->launch_late && !(env && !strcmp(env, "late")),
                    .trace = trace && !strcmp(trace, "1"), .last = MT_STEP_ALL};
    return q;
}

/* A GEMM of fewer CTAs (the grid bounds its real tiles) launches the
 * ordinary way: started under the step ahead, its few CTAs land on the SMs
 * that step frees first, bunched, and the whole GEMM runs slower (H200,
 * Mixtral at M = 1: GEMM2's 128 CTAs, the pipeline 232 -> 279 us;
 * docs/PERFORMANCE.md, session 4). */
#define PDL_MIN_GEMM_CTAS 1024

/* A step ahead of at most this many CTAs (an activation quantization of a
 * few rows) holds at most as many of the GPU's SMs, and the others are free:
 * that step let the GEMM launch only after its own wait, when every step
 * before it had finished. The GEMM's CTAs then spread as in an ordinary
 * launch and cannot bunch. */
#define PDL_SMALL_STEP_CTAS 8

/* May a GEMM launched now read before its wait? Only when the plan allows
 * early reads and the alignment that writes the routing is not the launch
 * right ahead: every launch ahead of that one has finished when this one
 * starts. */
static int may_read_early(const launch_seq *q) { return q->early && q->last != MT_STEP_ALIGN; }

/* Does k, launched with pdl_early, request weight tiles before its wait?
 * grouped_gemm_sm90's "ws" and "persist" tiles with TMA weight loads do;
 * those with the epilogue in column chunks (EPI_COLS) and "pingpong" wait
 * first (templates/grouped_gemm_sm90*.cuh). */
static int loads_before_wait(const mt_kernel *k)
{
    const char *pipe = mt_variant_get(&k->v, "PIPE"), *bload = mt_variant_get(&k->v, "BLOAD");
    return !strcmp(k->v.family, "grouped_gemm_sm90") && pipe && bload && !strcmp(bload, "tma") &&
           (!strcmp(pipe, "ws") || !strcmp(pipe, "persist")) && mt_variant_int(&k->v, "EPI_COLS", 0) == 0;
}

/* Does k, launched with pdl_early, read anything before its wait? The
 * mma.sync family its tile's rows and first weight stages, the slot-routed
 * matrix-vector kernels (grouped_gemv, BLOCK_M 1) their first round of
 * weight chunks, and the tiles of loads_before_wait their first weight
 * tiles; the others wait first. */
static int reads_before_wait(const mt_kernel *k)
{
    return !strcmp(k->v.family, "grouped_gemm") || slot_routed(k) || loads_before_wait(k);
}

/* Would a launch of k with `grid` CTAs now be a dependent one? A persistent
 * GEMM whose grid is all the CTAs the GPU holds at once (mt_kernel.max_ctas)
 * has no free SMs to bunch on: it is dependent when it reads early, its
 * copier then requesting its first weight tiles under the tail of the step
 * ahead. Launched dependent without those reads it was no faster (H200,
 * the tuned pipelines of the five peer problems at 7 M from 1 to 4096:
 * 1.001x the time, DeepSeek-V2-Lite M = 32 1.07x; docs/PERFORMANCE.md,
 * session 25). Nor can a GEMM bunch under a small step ahead
 * (PDL_SMALL_STEP_CTAS): one that reads before its wait is dependent there
 * when it may read early (the decode pipelines of the 8-bit modes, whose
 * slot-routed matrix-vector GEMMs follow the quantization of a few rows);
 * the others keep the ordinary launch their database entries were timed
 * with. */
static int launch_is_dependent(const launch_seq *q, mt_step step, const mt_kernel *k,
                               unsigned grid)
{
    if (!q->pdl || q->count == 0 || !k->pdl)
        return 0;
    if (step != MT_STEP_GEMM1 && step != MT_STEP_GEMM2)
        return 1;
    const int fills_gpu = k->max_ctas > 0 && grid == (unsigned)k->max_ctas;
    const int small_ahead = q->last_grid <= PDL_SMALL_STEP_CTAS;
    return grid >= PDL_MIN_GEMM_CTAS ||
           (may_read_early(q) &&
            ((small_ahead && reads_before_wait(k)) || (fills_gpu && loads_before_wait(k))));
}

static int32_t gemm_early(const launch_seq *q, mt_step step, const mt_kernel *k, unsigned grid)
{
    return may_read_early(q) && launch_is_dependent(q, step, k, grid);
}

static mt_status launch(launch_seq *q, mt_step step, const mt_kernel *k, unsigned grid,
                        void *args, char *msg, size_t msg_size)
{
    mt_status st = MT_OK;
    void *params[] = {args};
    if (grid == 0)
        return MT_OK;
    if (launch_is_dependent(q, step, k, grid)) {
        CUlaunchAttribute attr;
        memset(&attr, 0, sizeof attr);
        attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        CUlaunchConfig cfg = {.gridDimX = grid, .gridDimY = 1, .gridDimZ = 1,
                              .blockDimX = (unsigned)k->v.threads, .blockDimY = 1, .blockDimZ = 1,
                              .sharedMemBytes = (unsigned)k->v.smem_bytes, .hStream = q->stream,
                              .attrs = &attr, .numAttrs = 1};
        MT_CU_TRY(mt_cu.cuLaunchKernelEx(&cfg, k->fn, params, NULL), msg, msg_size);
    } else {
        MT_CU_TRY(mt_cu.cuLaunchKernel(k->fn, grid, 1, 1, (unsigned)k->v.threads, 1, 1,
                                       (unsigned)k->v.smem_bytes, q->stream, params, NULL),
                  msg, msg_size);
    }
    q->count++;
    q->last = step;
    q->last_grid = grid;
    return MT_OK;
fail:
    return st;
}

/* A TMA descriptor of `rank` dimensions over `base` (1- or 2-byte
 * elements; K innermost) into `out`, in the 128-byte swizzle the warpgroup
 * MMA reads; rows and K past the ends read as zeros. `what` names the
 * tensor in the error: its pointer and row bytes are what can be wrong. */
static mt_status encode_tma_map(const mt_kernel *k, mt_step step, uint64_t *out, const void *base,
                                uint64_t es, cuuint32_t rank, const cuuint64_t *dims,
                                const cuuint64_t *strides, const cuuint32_t *box, const char *what,
                                char *msg, size_t msg_size)
{
    if (!mt_cu.cuTensorMapEncodeTiled)
        return mt_errf(msg, msg_size, MT_ERR_NO_DRIVER,
                       "%s kernel %s loads its %s by TMA, and this CUDA driver lacks "
                       "cuTensorMapEncodeTiled (CUDA 12 or newer needed)",
                       mt_step_name(step), k->v.name, what);
    const cuuint32_t unit[4] = {1, 1, 1, 1};
    CUtensorMap map;
    _Static_assert(sizeof map == sizeof ((mt_gemm_args *)0)->b_map, "b_map holds a CUtensorMap");
    _Static_assert(sizeof map == sizeof ((mt_gemm_args *)0)->a_map, "a_map holds a CUtensorMap");
    CUresult r = mt_cu.cuTensorMapEncodeTiled(
        &map, es == 1 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_UINT16, rank,
        (void *)(uintptr_t)base, dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
        CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        char err[128];
        return mt_errf(msg, msg_size, MT_ERR_ALIGNMENT,
                       "%s kernel %s: its %s cannot be read by TMA (%s): the pointer %p must be "
                       "16-byte aligned and its rows of %llu bytes a multiple of 16",
                       mt_step_name(step), k->v.name, what, mt_cuda_error_text(r, err, sizeof err),
                       base, (unsigned long long)strides[0]);
    }
    memcpy(out, &map, sizeof map);
    return MT_OK;
}

/* A BLOAD=tma kernel reads its weight tiles through a TMA descriptor in the
 * argument (templates/moe_args.h b_map): encode it for this launch's B. A
 * box is one 128-byte line of K by the tile's weight rows (half of them per
 * part for a fused activation, whose gate and up rows are parts 0 and 1, or
 * for CTA pairs; a stage of two panels takes a box per panel). Other
 * kernels: nothing to do. */
static mt_status encode_weight_map(const mt_kernel *k, mt_step step, const mt_problem *p,
                                   mt_gemm_args *g, char *msg, size_t msg_size)
{
    const char *bload = mt_variant_get(&k->v, "BLOAD");
    if (!bload || strcmp(bload, "tma"))
        return MT_OK;
    if (!mt_quant_is_w8a8(p->quant.mode) && p->quant.mode != MT_QUANT_NONE)
        return mt_errf(msg, msg_size, MT_ERR_UNSUPPORTED,
                       "%s kernel %s: TMA weight loads exist for 16-bit and w8a8 weights only",
                       mt_step_name(step), k->v.name);
    const int fused = fuses_activation(k);
    const uint64_t es = mt_dtype_size(mt_quant_weight_dtype(&p->quant, p->dtype));
    const uint64_t rows = (uint64_t)(fused ? g->n_half : g->N);
    const uint64_t row_bytes = (uint64_t)g->ldb * es;
    const cuuint64_t dims[4] = {(cuuint64_t)g->K, rows, fused ? 2 : 1, (cuuint64_t)p->local_E};
    const cuuint64_t strides[3] = {row_bytes, rows * row_bytes, (cuuint64_t)g->b_expert_stride * es};
    const int64_t bn = mt_variant_int(&k->v, "BLOCK_N", 0);
    /* A CTA pair's copier brings in half a tile: gate or up rows, else
     * the first or second half of the rows (templates/grouped_gemm_sm90_chunked.cuh). */
    const int halves = fused || k->cluster > 1;
    const cuuint32_t box[4] = {(cuuint32_t)(128 / es), (cuuint32_t)(halves ? bn / 2 : bn), 1, 1};
    return encode_tma_map(k, step, g->b_map, g->B, es, 4, dims, strides, box,
                          step == MT_STEP_GEMM1 ? "weights w1" : "weights w2", msg, msg_size);
}

/* An ALOAD=tma kernel reads its A rows through a_map: a 2-D view (K, rows)
 * of `rows` rows laid out per expert (the batched format's local_E *
 * max_tokens, or the max_padded positions of the sorted order), a box
 * being one 128-byte line of K by the tile's BLOCK_M rows (a stage of two
 * panels takes a box per panel). Other kernels: nothing to do. */
static mt_status encode_rows_map(const mt_kernel *k, mt_step step, const mt_problem *p, int64_t rows,
                                 mt_gemm_args *g, char *msg, size_t msg_size)
{
    if (!reads_a_by_tma(k))
        return MT_OK;
    const uint64_t es = mt_quant_is_w8a8(p->quant.mode) ? 1 : mt_dtype_size(p->dtype);
    const cuuint64_t dims[2] = {(cuuint64_t)g->K, (cuuint64_t)rows};
    const cuuint64_t strides[1] = {(cuuint64_t)g->lda * es};
    const cuuint32_t box[2] = {(cuuint32_t)(128 / es), (cuuint32_t)mt_variant_int(&k->v, "BLOCK_M", 0)};
    return encode_tma_map(k, step, g->a_map, g->A, es, 2, dims, strides, box,
                          step == MT_STEP_GEMM1 ? "A rows (hidden)" : "A rows (the intermediate)",
                          msg, msg_size);
}

/* A GEMM launch's kernel, grid and arguments on stderr (launch_seq.trace). */
static void trace_gemm(mt_step step, const mt_kernel *k, unsigned grid, const mt_gemm_args *g)
{
    fprintf(stderr,
            "moetune: %s %s grid %u x %d threads: A %p B %p C %p lda %lld ldb %lld ldc %lld "
            "N %d K %d n_half %d m_blocks %d max_tokens %d expert_stride %lld a_sorted %d "
            "c_sorted %d sum_topk %d pdl_early %d\n",
            mt_step_name(step), k->v.name, grid, k->v.threads, g->A, g->B, g->C, (long long)g->lda,
            (long long)g->ldb, (long long)g->ldc, g->N, g->K, g->n_half, g->num_m_blocks,
            g->max_tokens, (long long)g->b_expert_stride, g->a_sorted, g->c_sorted, g->sum_topk,
            g->pdl_early);
}

/* A GEMM step's launch: its TMA descriptors first, where it takes them
 * (a_rows: the rows of A they view); a slot-routed kernel gets g inside
 * `route` (its routing fields filled by the caller). */
static mt_status launch_gemm(launch_seq *q, mt_step step, const mt_kernel *k, unsigned grid,
                             const mt_problem *p, int64_t a_rows, mt_gemm_args *g,
                             mt_gemv_slot_args *route, char *msg, size_t msg_size)
{
    if (q->trace)
        trace_gemm(step, k, grid, g);
    mt_status st = encode_weight_map(k, step, p, g, msg, msg_size);
    if (!st)
        st = encode_rows_map(k, step, p, a_rows, g, msg, msg_size);
    if (st)
        return st;
    /* Slot-routed kernels, and those that quantize GEMM1's output for
     * GEMM2 (OQUANT=last: act_q, act_scale), take the routing argument. */
    if (!slot_routed(k) && !mt_variant_quantizes_out(&k->v))
        return launch(q, step, k, grid, g, msg, msg_size);
    route->gemm = *g;
    return launch(q, step, k, grid, route, msg, msg_size);
}

/* A chained GEMM1's launch (CHAIN): both GEMMs' arguments as their own
 * slot-routed launches would take them (g1, and g2 of the plan's chained
 * lastsum tile), and its counters, zeroed with the flags. Its CTAs wait at
 * their start, so neither GEMM reads early. */
static mt_status launch_chain(launch_seq *q, const mt_kernel *k, unsigned grid, const mt_gemm_args *g1,
                              const mt_gemm_args *g2, const mt_gemv_slot_args *route, int32_t *counters,
                              char *msg, size_t msg_size)
{
    mt_gemv_chain_args c = {.first = *route, .second = *route, .work = counters, .done = counters + 2};
    c.first.gemm = *g1;
    c.second.gemm = *g2;
    c.first.gemm.pdl_early = c.second.gemm.pdl_early = 0;
    if (q->trace) {
        trace_gemm(MT_STEP_GEMM1, k, grid, &c.first.gemm);
        trace_gemm(MT_STEP_GEMM2, k, grid, &c.second.gemm);
    }
    return launch(q, MT_STEP_GEMM1, k, grid, &c, msg, msg_size);
}

/* Grid for an elementwise kernel over `items` 8-element chunks. */
static unsigned elementwise_grid(const mt_kernel *k, int64_t items)
{
    int64_t blocks = (items + k->v.threads - 1) / k->v.threads;
    return (unsigned)(blocks > 65535 * 8 ? 65535 * 8 : blocks);
}


static mt_status check_ptr_align(const void *ptr, const char *what, int required,
                                 unsigned align, char *msg, size_t msg_size)
{
    if (required && !ptr)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "%s is NULL", what);
    if ((uintptr_t)ptr % align)
        return mt_errf(msg, msg_size, MT_ERR_ALIGNMENT, "%s (%p) is not %u-byte aligned", what,
                       ptr, align);
    return MT_OK;
}

static mt_status check_ptr(const void *ptr, const char *what, int required, char *msg,
                           size_t msg_size)
{
    return check_ptr_align(ptr, what, required, 16, msg, msg_size);
}

mt_status mt_moe_check_quant_tensors(const mt_quant_config *qc, const mt_moe_tensors *t, int strict,
                                     char *msg, size_t msg_size)
{
    const int quant = qc->mode != MT_QUANT_NONE;
    const struct {
        const void *ptr;
        const char *what;
        int used;
        unsigned align;
    } q[] = {{t->w1_scale, "w1_scale", quant, 4},
             {t->w2_scale, "w2_scale", quant, 4},
             {t->w1_zero, "w1_zero", qc->has_zero_point, 1},
             {t->w2_zero, "w2_zero", qc->has_zero_point, 1},
             {t->a1_scale, "a1_scale", qc->static_act_scale, 4},
             {t->a2_scale, "a2_scale", qc->static_act_scale, 4}};
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
        if (strict && !q[i].used && q[i].ptr)
            return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "%s must be NULL for this problem",
                           q[i].what);
        mt_status st = check_ptr_align(q[i].ptr, q[i].what, q[i].used, q[i].align, msg, msg_size);
        if (st)
            return st;
    }
    return MT_OK;
}

/* Enqueue an act_quant kernel: per-tensor dynamic scales take two launches
 * (amax, then quantize), the others one. */
static mt_status launch_quant(launch_seq *q, mt_step step, const mt_kernel *k, mt_quant_args *qa, char *msg,
                              size_t msg_size)
{
    const char *gran = mt_variant_get(&k->v, "gran");
    const int tensor = !strcmp(gran, "tensor"), token = !strcmp(gran, "token");
    const int64_t units = mt_variant_int(&k->v, "UNITS", 1), chunks = qa->n / 8;
    /* Threads of the work (act_quant.cuh, act_quant_wide.cuh): 8-element
     * chunks (tensor), a warp per row (token), a warp per pass of 32 chunks
     * of a row (block). A thread (tensor) or warp (block) of a wide variant
     * takes up to UNITS chunks or passes, as many as the grid leaves it: the
     * grid is the one that gives each UNITS, but at least the CTAs the GPU
     * holds at once (k->max_ctas) and at most one a thread or warp, so that
     * a small batch is not left to a few CTAs. */
    const int64_t threads = tensor  ? (int64_t)qa->rows * chunks
                            : token ? (int64_t)qa->rows * 32
                                    : (int64_t)qa->rows * ((chunks + 31) / 32) * 32;
    unsigned grid = elementwise_grid(k, threads);
    if (!token && units > 1) {
        const unsigned wide = elementwise_grid(k, (threads + units - 1) / units);
        const unsigned least = k->max_ctas > 0 ? (unsigned)k->max_ctas : 0;
        grid = wide > least ? wide : grid < least ? grid : least;
    }
    mt_status st;
    if (tensor && !qa->static_scale) {
        qa->phase = 0;
        if ((st = launch(q, step, k, grid, qa, msg, msg_size)))
            return st;
    }
    qa->phase = 1;
    return launch(q, step, k, grid, qa, msg, msg_size);
}

mt_status mt_moe_run(const mt_moe_plan *plan, const mt_problem *p, const mt_moe_tensors *t,
                     CUdeviceptr workspace, size_t workspace_size, CUstream stream, char *msg,
                     size_t msg_size)
{
    return mt_moe_run_steps(plan, p, t, workspace, workspace_size, MT_STEPS_EVERY, stream, msg,
                            msg_size);
}

mt_status mt_moe_run_steps(const mt_moe_plan *plan, const mt_problem *p, const mt_moe_tensors *t,
                           CUdeviceptr workspace, size_t workspace_size, unsigned steps,
                           CUstream stream, char *msg, size_t msg_size)
{
    mt_status st = mt_moe_plan_check(plan, p, msg, msg_size);
    if (st)
        return st;
    const int standard = p->format == MT_FORMAT_STANDARD;
    if ((st = check_ptr(t->hidden, "hidden", 1, msg, msg_size)) ||
        (st = check_ptr(t->w1, "w1", 1, msg, msg_size)) ||
        (st = check_ptr(t->w2, "w2", 1, msg, msg_size)) ||
        (st = check_ptr(t->out, "out", 1, msg, msg_size)) ||
        (st = check_ptr(t->topk_ids, "topk_ids", standard, msg, msg_size)) ||
        (st = check_ptr(t->topk_weights, "topk_weights", standard, msg, msg_size)) ||
        (st = check_ptr(t->expert_num_tokens, "expert_num_tokens", !standard, msg, msg_size)) ||
        (st = check_ptr(t->expert_map, "expert_map", p->has_expert_map && standard, msg, msg_size)))
        return st;
    const mt_quant_config *qc = &p->quant;
    const int w8a8 = mt_quant_is_w8a8(qc->mode);
    if ((st = mt_moe_check_quant_tensors(qc, t, 0, msg, msg_size)))
        return st;
    if (p->M == 0 && standard)
        return MT_OK;
    ws_layout L = layout(plan, p);
    if (workspace_size < L.total || !workspace)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG,
                       "workspace of %zu bytes is too small: this call needs %zu", workspace_size,
                       L.total);
    const int fused = gemm1_fused(plan);
    const int64_t slots = p->M * p->topk;
    void *ws = (void *)(uintptr_t)workspace;
    char *base = ws;
    int32_t *flags = (int32_t *)(base + L.flags);
    const int32_t *emap = p->has_expert_map ? t->expert_map : NULL;
    const int64_t bm = mt_variant_int(&plan->step[MT_STEP_GEMM1].v, "BLOCK_M", 16);
    void *c1 = base + L.c1, *c2 = fused ? c1 : base + L.c2;
    /* GEMM2's output: per slot or summed in fp32 for the reduce step, or
     * the result itself. */
    const int sums_f32 = gemm2_sums_f32(plan);
    void *c3 = standard && !gemm2_writes_out(plan) ? base + L.c3 : t->out;
    const int on_input = standard && p->apply_router_weight_on_input;
    /* The intermediate in the sorted order: GEMM1 writes it, the act step
     * reads and writes it, GEMM2 reads it so (ALOAD=tma). */
    const int sorted = sorted_intermediate(plan, p);
    const mt_sorted_rows mid_rows = {
        .ids = sorted ? (const int32_t *)(base + L.sorted_ids) : NULL,
        .num_padded = sorted ? flags + 1 : NULL, .num_slots = (int32_t)slots};

    /* A chained launch counts both GEMMs' tiles, and its CTAs, one a tile,
     * in int32s (grouped_gemv_chain.cuh). */
    if (gemm1_chains(plan) && L.tiles1 + L.tiles2 > INT32_MAX)
        return mt_errf(msg, msg_size, MT_ERR_SHAPE,
                       "M=%lld: gemm1 kernel %s runs both GEMMs' %lld tiles in one launch, more "
                       "than its work counter holds (2^31-1)",
                       (long long)p->M, plan->step[MT_STEP_GEMM1].v.name,
                       (long long)(L.tiles1 + L.tiles2));
    /* Grids are 32-bit: a plan whose GEMM grid would not fit (a damaged
     * database's SPLIT_K on a huge batch) is refused before any launch. */
    if (L.grid1 > INT32_MAX || L.grid2 > INT32_MAX)
        return mt_errf(msg, msg_size, MT_ERR_SHAPE,
                       "M=%lld needs a GEMM grid of more than 2^31-1 CTAs under this plan",
                       (long long)p->M);
    launch_seq seq = launch_seq_start(plan, stream);
    if (steps & MT_STEP_BIT(MT_STEP_ALIGN))
        MT_CU_TRY(mt_cu.cuMemsetD32Async((CUdeviceptr)(uintptr_t)flags, 0, (size_t)L.zero_words,
                                         stream),
                  msg, msg_size);
    if (sums_f32 && (steps & MT_STEP_BIT(MT_STEP_ALIGN)))
        MT_CU_TRY(mt_cu.cuMemsetD32Async((CUdeviceptr)(uintptr_t)c3, 0, (size_t)(p->M * p->K), stream),
                  msg, msg_size);
    if (mt_moe_plan_uses(plan, p, MT_STEP_ALIGN) && (steps & MT_STEP_BIT(MT_STEP_ALIGN))) {
        mt_align_args al = {
            .topk_ids = t->topk_ids, .expert_map = emap,
            .sorted_ids = (int32_t *)(base + L.sorted_ids),
            .block_expert = (int32_t *)(base + L.block_expert), .num_padded = flags + 1,
            .error_flag = flags, .num_slots = (int32_t)slots, .num_experts = (int32_t)p->E,
            .local_experts = (int32_t)p->local_E, .block_m = (int32_t)bm,
            .max_padded = (int32_t)L.max_padded,
            .cta_counts = (int32_t *)(base + L.cta_counts),
            .chunk = (int32_t)((slots + L.align_ctas - 1) / L.align_ctas)};
        for (al.phase = 0; al.phase < (L.align_ctas > 1 ? 2 : 1); al.phase++)
            if ((st = launch(&seq, MT_STEP_ALIGN, &plan->step[MT_STEP_ALIGN], (unsigned)L.align_ctas,
                             &al, msg, msg_size)))
                return st;
    }
    /* The activation quantizations share everything but their input. */
    mt_quant_args qa = {
        .topk_ids = standard && !sorted ? t->topk_ids : NULL, .expert_map = emap,
        .expert_num_tokens = standard ? NULL : t->expert_num_tokens,
        .num_experts = (int32_t)p->E, .local_experts = (int32_t)p->local_E,
        .max_tokens = (int32_t)p->max_tokens, .row_div = 1};
    /* GEMM1's A: the quant step's output, or the hidden states (16-bit
     * operands, or a GEMM1 that quantizes them itself). */
    const int q1_in = mt_moe_plan_uses(plan, p, MT_STEP_QUANT);
    if (q1_in && (steps & MT_STEP_BIT(MT_STEP_QUANT))) {
        mt_quant_args q1 = qa;
        q1.in = t->hidden;
        q1.q = (uint8_t *)(base + L.q1);
        q1.scale = (float *)(base + L.s1);
        q1.static_scale = qc->static_act_scale ? t->a1_scale : NULL;
        q1.amax = flags + 2;
        q1.ld_in = p->K;
        q1.rows = (int32_t)L.rows1;
        q1.n = (int32_t)p->K;
        if (standard && !on_input)
            q1.topk_ids = NULL;   /* rows are tokens: all of them feed GEMM1 */
        else if (on_input)
            q1.topk_ids = t->topk_ids;   /* rows are slots */
        if (on_input) {
            q1.row_weight = t->topk_weights;
            q1.row_div = (int32_t)p->topk;
        }
        if ((st = launch_quant(&seq, MT_STEP_QUANT, &plan->step[MT_STEP_QUANT], &q1, msg, msg_size)))
            return st;
    }
    mt_gemm_args g1 = {
        .A = q1_in ? (const void *)(base + L.q1) : t->hidden, .B = t->w1, .C = c1,
        .lda = p->K, .ldb = p->K,
        .ldc = fused ? p->N : 2 * p->N, .b_expert_stride = 2 * p->N * p->K,
        .sorted_ids = (int32_t *)(base + L.sorted_ids),
        .block_expert = (int32_t *)(base + L.block_expert), .num_padded = flags + 1,
        .expert_num_tokens = t->expert_num_tokens,
        .row_weight = on_input && !w8a8 ? t->topk_weights : NULL,
        .num_slots = (int32_t)slots, .a_row_div = on_input && w8a8 ? 1 : (int32_t)p->topk,
        .max_tokens = (int32_t)p->max_tokens, .num_m_blocks = (int32_t)L.num_m_blocks,
        .N = (int32_t)(2 * p->N), .K = (int32_t)p->K, .n_half = (int32_t)p->N,
        .a_scale = q1_in ? (const float *)(base + L.s1) : NULL, .b_scale = t->w1_scale,
        .b_zero = qc->has_zero_point ? t->w1_zero : NULL,
        .a_scale_ld = (int32_t)act_scales_per_row(p, p->K), .group = qc->group_size,
        .partial = (float *)(base + L.partial), .tile_count = (int32_t *)(base + L.count1),
        .c_sorted = sorted};
    g1.pdl_early = gemm_early(&seq, MT_STEP_GEMM1, &plan->step[MT_STEP_GEMM1], (unsigned)L.grid1);
    /* Slot-routed GEMMs (no alignment step) read the routing themselves. */
    mt_gemv_slot_args route = {.topk_ids = t->topk_ids, .expert_map = emap, .error_flag = flags,
                               .num_experts = (int32_t)p->E, .local_experts = (int32_t)p->local_E,
                               .topk = (int32_t)p->topk, .out = t->out};
    if (gemm1_quantizes_out(plan)) {   /* GEMM1 writes GEMM2's A as the act step would */
        route.act_q = (uint8_t *)(base + L.q2);
        route.act_scale = (float *)(base + L.s2);
    }
    const int chains = gemm1_chains(plan);   /* then GEMM1 launches with GEMM2's argument too, below */
    if ((steps & MT_STEP_BIT(MT_STEP_GEMM1)) && !chains &&
        (st = launch_gemm(&seq, MT_STEP_GEMM1, &plan->step[MT_STEP_GEMM1], (unsigned)L.grid1, p,
                          L.rows1, &g1, &route, msg, msg_size)))
        return st;
    const int run_act = (steps & MT_STEP_BIT(MT_STEP_ACT)) && mt_moe_plan_uses(plan, p, MT_STEP_ACT);
    if (run_act && w8a8) {
        mt_quant_args q2 = qa;
        q2.in = c1;
        q2.q = (uint8_t *)(base + L.q2);
        q2.scale = (float *)(base + L.s2);
        q2.static_scale = qc->static_act_scale ? t->a2_scale : NULL;
        q2.amax = flags + 3;
        q2.ld_in = fused ? p->N : 2 * p->N;
        q2.rows = (int32_t)L.rows_mid;
        q2.sorted = mid_rows;
        q2.n = (int32_t)p->N;
        if ((st = launch_quant(&seq, MT_STEP_ACT, &plan->step[MT_STEP_ACT], &q2, msg, msg_size)))
            return st;
    } else if (run_act && !fused) {
        mt_act_args ac = {.in = c1, .out = c2, .topk_ids = standard && !sorted ? t->topk_ids : NULL,
                          .expert_map = emap,
                          .expert_num_tokens = standard ? NULL : t->expert_num_tokens,
                          .sorted = mid_rows, .rows = (int32_t)L.rows_mid, .N = (int32_t)p->N,
                          .num_experts = (int32_t)p->E, .local_experts = (int32_t)p->local_E,
                          .max_tokens = (int32_t)p->max_tokens};
        const mt_kernel *k = &plan->step[MT_STEP_ACT];
        if ((st = launch(&seq, MT_STEP_ACT, k, elementwise_grid(k, L.rows_mid * (p->N / 8)), &ac, msg,
                         msg_size)))
            return st;
    }
    /* GEMM2's A: GEMM1's gate and up halves where GEMM2 activates and
     * quantizes them itself, else the act step's output (or the same,
     * written by GEMM1; 16-bit: the activation's). */
    const int own_a = gemm2_quantizes_a(plan);
    mt_gemm_args g2 = g1;
    g2.A = own_a ? (const void *)c1 : w8a8 ? (const void *)(base + L.q2) : c2;
    g2.B = t->w2;
    g2.C = c3;
    g2.lda = own_a ? 2 * p->N : p->N;
    g2.ldb = p->N;
    g2.ldc = p->K;
    g2.b_expert_stride = p->K * p->N;
    g2.row_weight = standard && !p->apply_router_weight_on_input ? t->topk_weights : NULL;
    g2.a_row_div = 1;
    g2.a_sorted = sorted;
    g2.c_sorted = 0;
    g2.sum_topk = sums_f32 ? (int32_t)p->topk : 0;
    g2.N = (int32_t)p->K;
    g2.K = (int32_t)p->N;
    g2.n_half = 0;
    g2.a_scale = w8a8 && !own_a ? (const float *)(base + L.s2) : NULL;
    g2.b_scale = t->w2_scale;
    g2.b_zero = qc->has_zero_point ? t->w2_zero : NULL;
    g2.a_scale_ld = (int32_t)act_scales_per_row(p, p->N);
    g2.tile_count = (int32_t *)(base + L.count2);
    g2.pdl_early = gemm_early(&seq, MT_STEP_GEMM2, &plan->step[MT_STEP_GEMM2], (unsigned)L.grid2);
    if (chains && (steps & MT_STEP_BIT(MT_STEP_GEMM1)) &&
        (st = launch_chain(&seq, &plan->step[MT_STEP_GEMM1], (unsigned)L.grid1, &g1, &g2, &route,
                           (int32_t *)(base + L.chain), msg, msg_size)))
        return st;
    if ((steps & MT_STEP_BIT(MT_STEP_GEMM2)) && !chains &&
        (st = launch_gemm(&seq, MT_STEP_GEMM2, &plan->step[MT_STEP_GEMM2], (unsigned)L.grid2, p,
                          L.rows_mid, &g2, &route, msg, msg_size)))
        return st;
    if (mt_moe_plan_uses(plan, p, MT_STEP_REDUCE) && (steps & MT_STEP_BIT(MT_STEP_REDUCE))) {
        mt_reduce_args rd = {.Y = c3, .out = t->out, .topk_ids = t->topk_ids, .expert_map = emap,
                             .ldy = p->K, .M = (int32_t)p->M, .topk = (int32_t)p->topk,
                             .K = (int32_t)p->K, .num_experts = (int32_t)p->E,
                             .local_experts = (int32_t)p->local_E};
        if (sums_f32) {   /* the sums are made: round them, a row per token */
            rd.topk_ids = NULL;
            rd.expert_map = NULL;
            rd.topk = 1;
            rd.y_f32 = 1;
        }
        const mt_kernel *k = &plan->step[MT_STEP_REDUCE];
        if ((st = launch(&seq, MT_STEP_REDUCE, k, elementwise_grid(k, p->M * (p->K / 8)), &rd, msg,
                         msg_size)))
            return st;
    }
    return MT_OK;
fail:
    return st;
}

mt_status mt_moe_combine(const mt_moe_plan *plan, const mt_problem *p, CUdeviceptr Y,
                         CUdeviceptr slot_row, CUdeviceptr topk_weights, CUdeviceptr out,
                         CUstream stream, char *msg, size_t msg_size)
{
    const mt_kernel *k = &plan->step[MT_STEP_REDUCE];
    if (!k->fn)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "the plan has no reduce kernel");
    mt_status st = expect_param(k, MT_STEP_REDUCE, "dtype", mt_dtype_name(p->dtype), msg, msg_size);
    if (st)
        return st;
    mt_reduce_args rd = {.Y = (const void *)(uintptr_t)Y, .out = (void *)(uintptr_t)out,
                         .slot_row = (const int32_t *)(uintptr_t)slot_row,
                         .topk_weights = (const float *)(uintptr_t)topk_weights, .ldy = p->K,
                         .M = (int32_t)p->M, .topk = (int32_t)p->topk, .K = (int32_t)p->K,
                         .num_experts = (int32_t)p->E, .local_experts = (int32_t)p->local_E};
    launch_seq seq = launch_seq_start(plan, stream);
    return launch(&seq, MT_STEP_REDUCE, k, elementwise_grid(k, p->M * (p->K / 8)), &rd, msg,
                  msg_size);
}

mt_status mt_moe_read_error(CUdeviceptr workspace, const mt_problem *p, char *msg,
                            size_t msg_size)
{
    mt_status st = MT_OK;
    int32_t flag = 0;
    MT_CU_TRY(mt_cu.cuMemcpyDtoH(&flag, workspace, sizeof flag), msg, msg_size);
    /* The flag's encoding: templates/moe_args.h (mt_align_args). */
    if (flag > 0) {
        int64_t slot = flag - 1;
        return mt_errf(msg, msg_size, MT_ERR_DEVICE_CHECK,
                       "topk_ids[%lld][%lld] is out of range [0, %lld): the slot was dropped",
                       (long long)(slot / p->topk), (long long)(slot % p->topk), (long long)p->E);
    }
    if (flag < 0) {
        int64_t slot = -(int64_t)flag - 1;
        return mt_errf(msg, msg_size, MT_ERR_DEVICE_CHECK,
                       "topk_ids[%lld][%lld] names an expert whose expert_map entry is outside "
                       "[-1, local_E=%lld): the slot was dropped (as one of another rank)",
                       (long long)(slot / p->topk), (long long)(slot % p->topk),
                       (long long)p->local_E);
    }
    return MT_OK;
fail:
    return st;
}

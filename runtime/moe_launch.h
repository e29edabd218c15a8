/*
 * Launching a fused-MoE pipeline of generated kernels on a stream.
 *
 * A plan holds the loaded kernels of each step (align -> [quant] -> gemm1 ->
 * act -> gemm2 -> reduce; act is absent when gemm1 fuses it, align and
 * reduce are absent in the batched format; a slot-routed gemm1 that runs
 * GEMM2 in its own launch, grouped_gemv CHAIN, is the whole pipeline, its
 * gemm2 the tile it runs, which is loaded and not launched). The w8a8 quant modes add the
 * `quant` step (an act_quant kernel with act=none quantizing the GEMM1
 * input) and their `act` step is an act_quant kernel too: it quantizes the
 * GEMM2 input, with the activation-and-mul folded in (act=silu/gelu) or,
 * when gemm1 fuses the activation, act=none. Weight-only modes use the same
 * steps as MT_QUANT_NONE. See docs/QUANT.md. mt_moe_run does no allocation and no host
 * synchronization, so it can be captured into a CUDA graph: the caller gives
 * a workspace of mt_moe_workspace_size() bytes.
 *
 * Internal to moetune (runtime, tuner, tests); engines use moetune.h.
 * May call: the driver table (common/cuda_driver.h).
 */
#ifndef MT_RUNTIME_MOE_LAUNCH_H
#define MT_RUNTIME_MOE_LAUNCH_H

#include <cuda.h>
#include "moetune/problem.h"
#include "moetune/variant.h"

typedef enum mt_step {
    MT_STEP_ALIGN = 0,
    MT_STEP_GEMM1,
    MT_STEP_ACT,
    MT_STEP_GEMM2,
    MT_STEP_REDUCE,
    MT_STEP_COUNT,                  /* the steps of the unquantized pipelines */
    /* w8a8 only: quantize the GEMM1 input (runs after align). Numbered
     * after the base steps so that code sized by MT_STEP_COUNT still sees
     * the five it knows; a plan holds MT_STEP_ALL. */
    MT_STEP_QUANT = MT_STEP_COUNT,
    MT_STEP_ALL
} mt_step;

/* Role names as stored in the database ("align", "gemm1", ..., "quant");
 * valid for s < MT_STEP_ALL. */
const char *mt_step_name(mt_step s);

typedef struct mt_kernel {
    mt_variant v;
    CUmodule module;
    CUfunction fn;
    int pdl;   /* the image carries mt_pdl_aware: it keeps the launch protocol
                * of mt_device.cuh and may start under the step ahead */
    int max_ctas;   /* the CTAs the GPU holds at once (SMs x CTAs per SM) of a kernel
                     * whose grid goes by it: a persistent GEMM (PIPE persist or
                     * pingpong; its CTAs walk the tiles) takes at most that many,
                     * a wide act_quant (UNITS > 1) at least; 0: neither */
    int cluster;    /* CTAs per cluster (the variant's CLUSTER; 1: none): the grid is
                     * whole clusters */
} mt_kernel;

/* Load a cubin/PTX image and find v->name in it; raises the dynamic shared
 * memory limit when the variant needs more than 48 KiB. */
mt_status mt_kernel_load(mt_kernel *k, const mt_variant *v, const void *image, char *msg,
                         size_t msg_size);
/* Unload; a zeroed kernel is a no-op. */
void mt_kernel_unload(mt_kernel *k);

typedef struct mt_moe_plan {
    mt_kernel step[MT_STEP_ALL];    /* fn == NULL: step not used */
    int launch_late;   /* the GEMMs read nothing before the step ahead is
                        * done (the pipeline's launch=late, which the tuner
                        * chose per entry); 0: early reads where the launch
                        * allows (mt_moe_run) */
} mt_moe_plan;

/* Can kernels built for arch ("sm_90a", "sm_80", "compute_90") run the
 * problem's quant mode? MT_ERR_UNSUPPORTED for fp8 below sm_89 (no fp8 tensor
 * cores); MT_ERR_ALIGNMENT for a w8a8 mode whose K or N is not a multiple
 * of 16 (8-bit rows must be whole 16-byte chunks); MT_OK otherwise. */
mt_status mt_moe_quant_supported(const mt_problem *p, const char *arch, char *msg,
                                 size_t msg_size);
/* Its shape part alone, which needs no arch (mt_compose_check). */
mt_status mt_moe_quant_shape_ok(const mt_problem *p, char *msg, size_t msg_size);

/* Does the plan fit the problem? Checks mt_moe_quant_supported for gemm1's
 * arch, that every needed step is present, that the kernels' dtype/format/
 * activation/quant params match the problem (act_quant's qtype/gran/act for
 * the w8a8 steps), that gemm1 and gemm2 share BLOCK_M (their SPLIT_K may
 * differ) and that launch shapes are sane. The message names the mismatch. */
mt_status mt_moe_plan_check(const mt_moe_plan *plan, const mt_problem *p, char *msg,
                            size_t msg_size);

/* Does a call of p under this plan run step s? (Align and reduce only in
 * the standard format, the act step unless gemm1 fuses it and no w8a8
 * quantization needs it, the quant step only for w8a8, gemm2 unless gemm1
 * runs it in its launch.) */
int mt_moe_plan_uses(const mt_moe_plan *plan, const mt_problem *p, mt_step s);

/* Does the plan need step s's kernel: does it run it, or is it the GEMM2
 * tile that a gemm1 running GEMM2 in its launch (CHAIN) runs? (A stored
 * pipeline names every step so needed.) */
int mt_moe_plan_needs(const mt_moe_plan *plan, const mt_problem *p, mt_step s);

/* Workspace bytes for problem p (p->M tokens) under the plan. A split-K
 * plan (SPLIT_K > 1) adds a tile counter per output tile of each GEMM and
 * a region for the larger GEMM's partial sums (tiles * SPLIT_K * BLOCK_M *
 * BLOCK_N floats); an unsplit plan's size does not depend on them. A GEMM2
 * whose last CTA sums a token's slots ("lastsum") adds the same counters;
 * a gemm1 that runs GEMM2 in its launch (CHAIN) a work counter, a counter
 * of its CTAs done and one per slot. */
size_t mt_moe_workspace_size(const mt_moe_plan *plan, const mt_problem *p);

/* The quantization tensors of t against qc, before anything is enqueued:
 * the weight scales (4-byte aligned) in every quant mode, the zero points
 * with has_zero_point, the static activation scales (4-byte aligned) with
 * static_act_scale, each required non-NULL where used; with strict (the
 * engine-facing objects), each one the problem does not use must be NULL.
 * MT_ERR_INVALID_ARG or MT_ERR_ALIGNMENT naming the tensor. */
mt_status mt_moe_check_quant_tensors(const mt_quant_config *qc, const mt_moe_tensors *t, int strict,
                                     char *msg, size_t msg_size);

/* Run the experts stage (standard format: the whole fused MoE into t->out
 * [M, K]; batched: [local_E, max_tokens, K] into t->out). Device pointers in
 * t, including the quant mode's scales/zero points (problem.h layouts;
 * static a1/a2 scales when p->quant.static_act_scale). Enqueues only:
 * errors found on the GPU (a topk id out of range, an expert_map entry
 * outside [-1, local_E)) land in the workspace's error flag, read with
 * mt_moe_read_error after the stream has been synchronized. */
mt_status mt_moe_run(const mt_moe_plan *plan, const mt_problem *p, const mt_moe_tensors *t,
                     CUdeviceptr workspace, size_t workspace_size, CUstream stream, char *msg,
                     size_t msg_size);

/* Bit of step s in a step mask; MT_STEPS_EVERY = every step. */
#define MT_STEP_BIT(s) (1u << (unsigned)(s))
#define MT_STEPS_EVERY ((1u << MT_STEP_ALL) - 1u)

/* mt_moe_run enqueuing only the launches of the steps in the mask (the
 * flag words, split-K or last-CTA-sum counters and a summing GEMM2's fp32
 * sums are cleared with the align step; a complete split-K, "lastsum" or
 * chained GEMM launch leaves its counters at 0), for timing the
 * steps one by one on a workspace a full run has filled, on the same
 * inputs: a step run alone reads what the steps before it left there (a
 * per-tensor dynamic amax included, which only the align step's memset
 * clears). The quant step is the quantization of the
 * GEMM1 input, the act step the activation (or GEMM2's input quantization).
 * mt_moe_run(...) is mt_moe_run_steps(..., MT_STEPS_EVERY, ...). */
mt_status mt_moe_run_steps(const mt_moe_plan *plan, const mt_problem *p, const mt_moe_tensors *t,
                           CUdeviceptr workspace, size_t workspace_size, unsigned steps,
                           CUstream stream, char *msg, size_t msg_size);

/* Batched finalize: out[t] = sum_j w[t,j] * Y[slot_row[t*topk+j]] (rows -1
 * skipped; weights NULL means 1) with the plan's reduce kernel. */
mt_status mt_moe_combine(const mt_moe_plan *plan, const mt_problem *p, CUdeviceptr Y,
                         CUdeviceptr slot_row, CUdeviceptr topk_weights, CUdeviceptr out,
                         CUstream stream, char *msg, size_t msg_size);

/* After the stream is synchronized: MT_OK or MT_ERR_DEVICE_CHECK with the
 * offending slot in the message, and what was wrong with it (its topk id,
 * or its expert's expert_map entry; the flag's encoding is in
 * templates/moe_args.h). Synchronous (copies 4 bytes). */
mt_status mt_moe_read_error(CUdeviceptr workspace, const mt_problem *p, char *msg,
                            size_t msg_size);

#endif

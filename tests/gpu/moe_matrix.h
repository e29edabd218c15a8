/*
 * The GPU test matrix shared by gpu_moe (bf16/fp16) and gpu_quant (quant
 * modes): compile and load a default kernel set, then for one case make
 * fresh random data, compute the CPU oracle (all tokens when cheap, else a
 * sample), run every default grouped-GEMM variant of the case's dtype,
 * quant and format (fused activation or not) with the output and workspace
 * poisoned (NaN bytes), and compare: the final [M, K] result, and in the
 * batched format the experts' output and the combined result. One line
 * PASS/FAIL per check; counters for the summary.
 */
#ifndef MT_TESTS_GPU_MOE_MATRIX_H
#define MT_TESTS_GPU_MOE_MATRIX_H

#include <stdint.h>
#include "common/cuda_driver.h"
#include "moetune/gen.h"
#include "moetune/problem.h"
#include "tuner/harness.h"

typedef struct qcase {
    int64_t M, E, topk, K, N;
    mt_quant_mode q;
    int group, zp, stat;
    mt_dtype dt;
    mt_act_format fmt;
    mt_activation act;
    int emap, on_input;
    mt_routing routing;
} qcase;

extern mt_gpu mm_gpu;
extern mt_kernel_set mm_kernels;
extern CUstream mm_stream;
extern int mm_failures, mm_runs;

/* Open GPU 0 and load the default kernels that match filter (its arch and
 * defaults_only are set here). 0 on success (cmocka group setup style). */
int mm_setup(const mt_gen_filter *filter);
int mm_teardown(void **state);
/* Run one case (see above). */
void mm_run_case(const qcase *c, uint64_t seed);

#endif

/*
 * What the tuner, the benchmarks and the GPU tests share: compiling and
 * loading variant sets, composing plans from them, random problem data on
 * host and device, and comparing results with the CPU oracle.
 *
 * May call: gen (compile), runtime/moe_launch, oracle, the driver table.
 */
#ifndef MT_TUNER_HARNESS_H
#define MT_TUNER_HARNESS_H

#include <stdint.h>
#include "moetune/gen.h"
#include "moetune/problem.h"
#include "runtime/moe_launch.h"

/* Loaded kernels, one per compiled variant. */
typedef struct mt_kernel_set {
    mt_kernel *k;
    size_t n;
} mt_kernel_set;

/* Compile (through the cache) and load the variants matching f. */
mt_status mt_kernel_set_load(mt_gen *g, const mt_gen_filter *f, mt_kernel_set *set, char *msg,
                             size_t msg_size);
void mt_kernel_set_free(mt_kernel_set *set);

/* Compose a plan for p from the set: gemm1 = the grouped_gemm kernel named
 * gemm1_name; gemm2 = its sibling with epilogue "store" (a kernel that reads
 * its A rows by TMA, ALOAD=tma, in the standard format: gemm2 = its store
 * sibling, gemm1 = its ALOAD=cp twin); align/act/reduce =
 * the first matching kernel of their family. w8a8 quant modes: quant = the
 * first act_quant kernel of the problem's dtype/qtype/gran with act=none,
 * act = the same with act=<activation> (act=none when gemm1 fuses it).
 * MT_ERR_NOT_FOUND names what is missing. The plan borrows the set's
 * modules. */
mt_status mt_plan_compose(const mt_kernel_set *set, const mt_problem *p, const char *gemm1_name,
                          mt_moe_plan *plan, char *msg, size_t msg_size);


/* Random inputs of a problem in host memory (h_*) and on the device (d),
 * as vLLM lays them out. Batched problems also get the standard-format
 * routing they were dispatched from (for the combine step). */
typedef struct mt_problem_data {
    mt_problem p;
    void *h_hidden, *h_w1, *h_w2;
    float *h_w1_scale, *h_w2_scale;   /* quant modes (problem.h layouts) */
    uint8_t *h_w1_zero, *h_w2_zero;   /* weight-only with zero points */
    float h_a_scale[2];               /* static per-tensor a1, a2 scales */
    void *h_bhidden;         /* batched: [local_E, max_tokens, K] */
    int32_t *h_topk_ids, *h_expert_map, *h_counts, *h_row_slot, *h_slot_row;
    float *h_topk_weights;
    mt_moe_tensors h;        /* host view in the problem's format */
    mt_moe_tensors h_std;    /* host view in the standard format (routing) */
    mt_moe_tensors d;        /* device view */
    CUdeviceptr d_slot_row;  /* batched: slot -> row for the combine */
    CUdeviceptr d_mem[24];
    int nd_mem;
} mt_problem_data;

/* Fill with fresh random data from seed: hidden ~ N(0,1), w1 ~ N(0,1)/sqrt(K),
 * w2 ~ N(0,1)/sqrt(N), routing as asked, weights from a softmax. With
 * has_expert_map, a random local_E of the E experts are local. For the
 * batched format p->max_tokens is set to the largest expert count (at
 * least 1). upload = 0 keeps it host-only.
 * Quant modes: the same fp32 weights (one generator stream per expert and
 * matrix, so the result does not depend on the thread count) are quantized
 * as checkpoints ship them (see mt_quantize_weights). Static per-tensor
 * scales: a1 = amax(hidden) / qmax, a2 = 12 / qmax. */
mt_status mt_problem_data_make(mt_problem_data *d, const mt_problem *p, mt_routing routing,
                               uint64_t seed, int upload, char *msg, size_t msg_size);
void mt_problem_data_free(mt_problem_data *d);

/* Distinct experts among `slots` topk ids (local ones: expert_map[e] >= 0,
 * when a map is given); -1 when out of memory. */
int mt_experts_hit(const int32_t *topk_ids, int64_t slots, int64_t E, const int32_t *expert_map);

/* The first of the seeds first, first + stride, ... (tries of them) whose
 * routing (as mt_problem_data_make(p, routing, seed) makes it, without
 * making the rest of the data) reaches `want` distinct experts: *seed and
 * *hit are that one's; when none does, *seed = first and *hit its count.
 * For a benchmark that compares with another run's routing of the same
 * shape: the experts hit set how many weights a small batch reads.
 * Ignores an expert map. MT_ERR_NO_MEMORY when out of memory. */
mt_status mt_routing_seed_for_hits(const mt_problem *p, mt_routing routing, uint64_t first,
                                   uint64_t stride, int tries, int want, uint64_t *seed, int *hit);

/* The seed the tuner makes p's data from (its candidates and its cuBLAS
 * baseline alike), and in *hit the experts its routing hits (as
 * mt_routing_seed_for_hits counts them). Uniform routing without an expert
 * map: the first of M, M + 1000, ... (256 tries) whose routing hits the
 * expected number of experts (mt_expected_experts_hit, rounded), so that a
 * small batch is tuned on a typical routing rather than on whatever seed M
 * draws (Mixtral at M = 8 hits all 8 experts with seed 8, 7.2 on average;
 * the GEMM2 tile count that fills the GPU differs); seed M where it hits
 * that count already (one token; every M whose expected count rounds to E)
 * or where no try does. Other routings and expert maps: seed M.
 * MT_ERR_NO_MEMORY when out of memory. */
mt_status mt_tuning_seed(const mt_problem *p, mt_routing routing, uint64_t *seed, int *hit);

/* What one rank of expert parallelism holds of a problem's data, on the
 * current context's GPU: tokens [tok0, tok0 + M) (hidden, topk ids and
 * weights; one row of buffers when M = 0), experts [e0, e0 + ne) of w1/w2
 * with their scales and zero points, and out [M, K] poisoned with NaN
 * bytes. The whole problem is the slice (0, p.M, 0, p.E). */
typedef struct mt_rank_slice {
    mt_moe_tensors t;        /* device pointers (standard layout) */
    CUdeviceptr mem[12];
    int nmem;
} mt_rank_slice;
mt_status mt_rank_slice_upload(const mt_problem_data *d, int64_t tok0, int64_t M, int64_t e0,
                               int64_t ne, mt_rank_slice *s, char *msg, size_t msg_size);
/* Free (on the current context); a zeroed slice is a no-op. */
void mt_rank_slice_free(mt_rank_slice *s);

/*
 * Quantize one expert's fp32 weight matrix w [rows, cols] (the GEMM reduces
 * over cols) as p's quant mode stores it, into q (rows*cols bytes; w4a16:
 * rows*cols/2, two k per byte as problem.h packs them), scale and zero
 * (this expert's part of the problem.h scale/zero tensors; zero only for
 * weight-only modes with zero points). Scales use numeric.h:
 *   w8a8: s = mt_act_scale(amax) per expert (tensor), per row (token), per
 *         128x128 block (block); q = mt_quant_int8 / mt_quant_e4m3(w, s).
 *   w8a16: s = amax / 127 per group, q = int8 rint(w / s); with zero points
 *         s = (max - min) / 255, z = clamp(rint(-min / s), 0, 255),
 *         q = clamp(rint(w / s) + z, 0, 255) as uint8.
 *   w4a16: s = amax / 7, q = clamp(rint(w / s) + 8, 0, 15); with zero
 *         points s = (max - min) / 15, z and q clamped to [0, 15].
 * A zero range gives s = 1. MT_ERR_INVALID_ARG for MT_QUANT_NONE.
 */
mt_status mt_quantize_weights(const mt_problem *p, const float *w, int64_t rows, int64_t cols,
                              void *q, float *scale, uint8_t *zero);

/* Sizes of one matrix (second = 0: w1, 1: w2) over all local experts:
 * weight bytes, scale count, zero-point count (0 when none). */
void mt_quant_sizes(const mt_problem *p, int second, size_t *wbytes, size_t *nscale,
                    size_t *nzero);

/* Relative L2 error of got (element dtype, rows of K) against ref (floats)
 * over the given rows (NULL: all). nan_count counts non-finite values. */
double mt_rel_l2(const void *got, mt_dtype dt, const float *ref, const int64_t *rows,
                 int64_t nrows, int64_t K, int64_t *nan_count);

#endif

/*
 * The roofline the tables report against: the H200 ceilings measured in this
 * workplace (device-to-device copy 4.3 TB/s, dense bf16 790 TFLOP/s, 8-bit
 * w8a8 twice that), bytes = weights of the distinct experts hit + hidden in +
 * output out, as ../shared/targets.md counts them.
 */
#ifndef MT_TUNER_ROOFLINE_H
#define MT_TUNER_ROOFLINE_H

#include "moetune/problem.h"

#define MT_H200_HBM_BYTES_PER_S 4.3e12
#define MT_H200_BF16_FLOPS 790e12

typedef struct mt_roofline {
    double flops;          /* 2 * M * topk * 3 * K * N */
    double weight_bytes;   /* weights (and scales) of the experts hit */
    double io_bytes;       /* hidden in + out, element dtype */
    double us;             /* max(bytes / bandwidth, flops / peak) */
    int compute_bound;
} mt_roofline;

/* Expected distinct local experts hit by M tokens under uniform routing. */
double mt_expected_experts_hit(const mt_problem *p);

/* The roofline of p (p->M tokens) with `experts_hit` experts read. */
mt_roofline mt_roofline_of(const mt_problem *p, double experts_hit);

#endif

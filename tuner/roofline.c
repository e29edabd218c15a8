/*
 * Roofline arithmetic (see roofline.h).
 */
#include "tuner/roofline.h"

#include <math.h>

double mt_expected_experts_hit(const mt_problem *p)
{
    /* A token picks topk distinct experts: one given expert is missed by a
     * token with probability 1 - topk/E, by all M tokens with its M-th power. */
    const double e = (double)p->E, local = (double)p->local_E;
    return local * (1.0 - pow(1.0 - (double)p->topk / e, (double)p->M));
}

mt_roofline mt_roofline_of(const mt_problem *p, double experts_hit)
{
    mt_roofline r;
    const double es = (double)mt_dtype_size(p->dtype);
    r.flops = 2.0 * (double)(p->M * p->topk) * 3.0 * (double)p->K * (double)p->N;
    r.weight_bytes = experts_hit * (double)(mt_problem_weight_bytes(p, 0) +
                                            mt_problem_weight_bytes(p, 1));
    r.io_bytes = 2.0 * (double)(p->M * p->K) * es;
    /* 8-bit tensor cores (fp8 e4m3, int8) run at twice the bf16 rate. */
    const double peak = mt_quant_is_w8a8(p->quant.mode) ? 2.0 * MT_H200_BF16_FLOPS
                                                        : MT_H200_BF16_FLOPS;
    const double mem_us = (r.weight_bytes + r.io_bytes) / MT_H200_HBM_BYTES_PER_S * 1e6;
    const double cmp_us = r.flops / peak * 1e6;
    r.compute_bound = cmp_us > mem_us;
    r.us = r.compute_bound ? cmp_us : mem_us;
    return r;
}

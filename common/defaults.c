/*
 * Untuned defaults (see defaults.h).
 */
#include "common/defaults.h"

double mt_rows_per_expert(const mt_problem *p)
{
    const int64_t experts = p->local_E > 0 ? p->local_E : p->E;
    return experts > 0 ? (double)p->M * (double)p->topk / (double)experts : 0.0;
}

int64_t mt_default_block_m(const mt_problem *p)
{
    /* Rows per expert decide how full a row tile gets: decode-sized batches
     * leave most of a 64-row tile empty, large prefill batches fill 128. */
    const double a = mt_rows_per_expert(p);
    return a < 24 ? 16 : a < 192 ? 64 : 128;
}

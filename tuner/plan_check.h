/*
 * Checking a composed pipeline against the CPU oracle, the one way the
 * tuner's GPU backend and the benchmark both do it: the oracle's result for
 * a sample of tokens, the device output poisoned (0xFF bytes: NaN in every
 * element type), one run of the plan (batched: and the combine), and the
 * relative L2 error of the sampled rows within the dtype's tolerance.
 *
 * May call: runtime/moe_launch, oracle, tuner/harness, the driver table.
 */
#ifndef MT_TUNER_PLAN_CHECK_H
#define MT_TUNER_PLAN_CHECK_H

#include "runtime/moe_launch.h"
#include "tuner/backend.h"
#include "tuner/harness.h"
#include "tuner/timing.h"

#define MT_CHECK_SAMPLE_TOKENS 32

/* The reference of one problem's data: sampled tokens and the oracle's rows. */
typedef struct mt_plan_ref {
    int64_t tokens[MT_CHECK_SAMPLE_TOKENS];
    int64_t ntokens;
    float *ref;              /* [M, K]; the sampled rows hold the oracle's result */
    void *got;               /* host copy of the device result, [M, K] elements */
    CUdeviceptr comb;        /* batched: the combined [M, K] result; else 0 */
} mt_plan_ref;

/* Sample up to MT_CHECK_SAMPLE_TOKENS tokens evenly over d->p.M, run the
 * oracle on them (d->h_std) and allocate the buffers. On failure what was
 * made is kept for mt_plan_ref_free. */
mt_status mt_plan_ref_make(mt_plan_ref *r, const mt_problem_data *d, char *msg, size_t msg_size);
/* Free; a zeroed reference is a no-op. */
void mt_plan_ref_free(mt_plan_ref *r);

/*
 * Run plan once on d's problem with tensors t (normally &d->d; a test hook
 * may pass altered ones) on `stream`, the output poisoned first, and compare
 * the sampled rows with r. before (may be NULL) is enqueued on the stream
 * after the poisoning and ahead of the plan. out->ok = 1 with out->rel_err
 * when within the tolerance (bf16 1e-2, else 5e-3), else ok = 0 and
 * out->reason says why; out->time_us is left 0. A status other than MT_OK
 * means the run itself failed (a CUDA error, a device-side check).
 */
/* One mt_moe_run call as an mt_enqueue_fn context (for mt_time): the
 * tuner's candidates and the bench's pipelines are timed through it.
 * steps: a step mask for mt_moe_run_steps (0: every step). */
typedef struct mt_plan_call {
    const mt_moe_plan *plan;
    const mt_problem *p;
    const mt_moe_tensors *t;
    CUdeviceptr ws;
    size_t ws_size;
    unsigned steps;
} mt_plan_call;
mt_status mt_plan_call_enqueue(void *call, CUstream stream, char *msg, size_t msg_size);

mt_status mt_plan_check(const mt_plan_ref *r, const mt_moe_plan *plan, const mt_problem_data *d,
                        const mt_moe_tensors *t, CUdeviceptr ws, size_t ws_size, CUstream stream,
                        mt_enqueue_fn before, void *before_ctx, mt_measure *out, char *msg,
                        size_t msg_size);

#endif

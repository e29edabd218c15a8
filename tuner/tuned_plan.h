/*
 * The tuned pipeline of a problem as libmoetune would use it, for the
 * benchmark: the runtime's lookup (runtime/rt_lookup.c: this SKU at the
 * nearest tuned M, then another SKU of the same compute capability; never
 * the built-in defaults here) and the runtime's kernel loader (stored cubin
 * when built for this GPU, else the stored source through NVRTC), composed
 * into an mt_moe_plan for runtime/moe_launch.
 *
 * The lookup and the step mapping are CPU-only (tests/test_bench.c); the
 * composition needs a GPU context.
 *
 * May call: runtime internals (rt_internal.h), db.
 */
#ifndef MT_TUNER_TUNED_PLAN_H
#define MT_TUNER_TUNED_PLAN_H

#include "moetune/db.h"
#include "runtime/moe_launch.h"
#include "runtime/rt_internal.h"

/* What the lookup found for one (problem, M). */
typedef struct mt_tuned_choice {
    int found;                          /* 0: no tuned entry for the problem */
    mt_rt_choice c;                     /* c.info: tuned_m, source, sku, db_path, pipeline text */
    char gemm1[MT_VARIANT_NAME_MAX];    /* the pipeline's gemm1 kernel ("" when none) */
} mt_tuned_choice;

/* The lookup machine of a context (its GPU's SKU, cc, arch, provenance). */
void mt_tuned_machine(const mt_context *ctx, mt_rt_machine *m /* out */);

/*
 * Look up p at M = p->M in dbs (ndbs of them, in priority order) for machine
 * m. No entry for the problem (any M, this SKU or its compute capability):
 * MT_OK with out->found = 0. A database error: its status, the message
 * (which names the file) in msg.
 */
mt_status mt_tuned_lookup(mt_db *const *dbs, int ndbs, const mt_rt_machine *m, const mt_problem *p,
                          mt_tuned_choice *out, char *msg, size_t msg_size);

/*
 * The plan step of each step of a stored pipeline: for i < *n, step_of[i]
 * runs kernel names[i] (borrowed from pl). MT_ERR_UNSUPPORTED, naming the
 * step, for a library (cuBLAS) step or a role the launcher does not know.
 */
mt_status mt_tuned_steps(const mt_db_pipeline *pl, mt_step step_of[MT_DB_MAX_STEPS],
                         const char *names[MT_DB_MAX_STEPS], size_t *n, char *msg,
                         size_t msg_size);

/*
 * Load the kernels of a found choice into ctx (from the database that served
 * it, as the runtime does) and compose them into *plan, checked against p
 * (mt_moe_plan_check). The plan borrows ctx's modules: keep ctx alive while
 * it is used. A pipeline that does not fit p: MT_ERR_INCOMPATIBLE (or the
 * check's status) with the pipeline and the database in msg.
 */
mt_status mt_tuned_plan_compose(mt_context *ctx, const mt_tuned_choice *c, const mt_problem *p,
                                mt_moe_plan *plan /* out */, char *msg, size_t msg_size);

#endif

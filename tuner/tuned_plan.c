/*
 * The tuned pipeline of a problem, found and loaded the runtime's way (see
 * tuned_plan.h).
 */
#include "tuner/tuned_plan.h"

#include <stdio.h>
#include <string.h>

#include "common/util.h"

void mt_tuned_machine(const mt_context *ctx, mt_rt_machine *m)
{
    memset(m, 0, sizeof *m);
    mt_strlcpy(m->sku, ctx->gpu.name, sizeof m->sku);
    mt_strlcpy(m->cc, ctx->cc, sizeof m->cc);
    mt_strlcpy(m->arch, ctx->arch, sizeof m->arch);
    m->prov = ctx->prov;
}

mt_status mt_tuned_lookup(mt_db *const *dbs, int ndbs, const mt_rt_machine *m, const mt_problem *p,
                          mt_tuned_choice *out, char *msg, size_t msg_size)
{
    memset(out, 0, sizeof *out);
    /* no_defaults: the built-in defaults are the bench's untuned column. */
    mt_status st = mt_rt_lookup(dbs, ndbs, m, p, p->M, 1, &out->c, msg, msg_size);
    if (st == MT_ERR_NOT_FOUND)
        return MT_OK;
    if (st)
        return st;
    out->found = 1;
    const char *g1 = mt_db_pipeline_kernel(&out->c.pipeline, "gemm1");
    mt_strlcpy(out->gemm1, g1 ? g1 : "", sizeof out->gemm1);
    return MT_OK;
}

mt_status mt_tuned_steps(const mt_db_pipeline *pl, mt_step step_of[MT_DB_MAX_STEPS],
                         const char *names[MT_DB_MAX_STEPS], size_t *n, char *msg,
                         size_t msg_size)
{
    *n = 0;
    for (int i = 0; i < pl->nsteps && i < MT_DB_MAX_STEPS; i++) {
        int s = 0;
        while (s < MT_STEP_ALL && strcmp(mt_step_name((mt_step)s), pl->steps[i].role))
            s++;
        if (s == MT_STEP_ALL || !strcmp(pl->steps[i].kernel, MT_DB_LIBRARY_KERNEL))
            return mt_errf(msg, msg_size, MT_ERR_UNSUPPORTED,
                           "step %s=%s of a %s pipeline cannot run as moetune kernels",
                           pl->steps[i].role, pl->steps[i].kernel, pl->backend);
        step_of[*n] = (mt_step)s;
        names[(*n)++] = pl->steps[i].kernel;
    }
    return MT_OK;
}

mt_status mt_tuned_plan_compose(mt_context *ctx, const mt_tuned_choice *c, const mt_problem *p,
                                mt_moe_plan *plan, char *msg, size_t msg_size)
{
    const char *from = c->c.db ? mt_db_path(c->c.db) : "?";
    mt_step step_of[MT_DB_MAX_STEPS];
    const char *names[MT_DB_MAX_STEPS];
    const mt_kernel *k[MT_DB_MAX_STEPS];
    size_t n = 0;
    char m2[512];
    memset(plan, 0, sizeof *plan);
    if (!c->found)
        return mt_errf(msg, msg_size, MT_ERR_NOT_FOUND, "no tuned entry to compose");
    mt_status st = mt_tuned_steps(&c->c.pipeline, step_of, names, &n, m2, sizeof m2);
    if (st)
        return mt_errf(msg, msg_size, st, "pipeline %s from %s: %s", c->c.info.pipeline, from, m2);
    /* The loader's contract: called with the context's lock held. */
    pthread_mutex_lock(&ctx->lock);
    st = mt_rt_load_kernels(ctx, c->c.db, c->c.pipeline.arch, names, n, k, msg, msg_size);
    pthread_mutex_unlock(&ctx->lock);
    if (st)
        return st;
    for (size_t i = 0; i < n; i++)
        plan->step[step_of[i]] = *k[i];
    plan->launch_late = c->c.pipeline.launch_late;
    if ((st = mt_moe_plan_check(plan, p, m2, sizeof m2)))
        return mt_errf(msg, msg_size, st, "pipeline %s from %s does not fit: %s",
                       c->c.info.pipeline, from, m2);
    return MT_OK;
}

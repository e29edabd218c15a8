/*
 * The benchmark (see bench.h). Prints a markdown table row per M.
 */
#include "tuner/bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/cuda_driver.h"
#include "common/defaults.h"
#include "common/util.h"
#include "tuner/chart.h"
#include "tuner/cublas_baseline.h"
#include "tuner/harness.h"
#include "tuner/roofline.h"
#include "tuner/timing.h"

typedef struct run_ctx {
    const mt_moe_plan *plan;
    const mt_problem *p;
    const mt_moe_tensors *t;
    CUdeviceptr ws;
    size_t ws_size;
} run_ctx;

static mt_status enqueue_plan(void *ctx, CUstream stream, char *msg, size_t msg_size)
{
    run_ctx *c = ctx;
    return mt_moe_run(c->plan, c->p, c->t, c->ws, c->ws_size, stream, msg, msg_size);
}

typedef struct best {
    double us, min_us, max_us;   /* median and spread of the repetitions */
    char name[MT_VARIANT_NAME_MAX];
} best;

/* Time every default gemm1 candidate composed into a plan for d; keep the
 * best and the untuned default (common/defaults.h). */
static mt_status time_candidates(const mt_kernel_set *set, mt_problem_data *d, mt_timer *tm,
                                 best *fastest, best *dflt, char *msg, size_t msg_size)
{
    mt_status st = MT_OK;
    fastest->us = dflt->us = INFINITY;
    for (size_t i = 0; i < set->n; i++) {
        const mt_variant *v = &set->k[i].v;
        if (strcmp(v->family, "grouped_gemm") ||
            strcmp(mt_variant_get(v, "quant"), mt_quant_mode_name(d->p.quant.mode)) ||
            strcmp(mt_variant_get(v, "dtype"), mt_dtype_name(d->p.dtype)) ||
            strcmp(mt_variant_get(v, "format"), mt_act_format_name(d->p.format)))
            continue;
        const char *epi = mt_variant_get(v, "epilogue");
        if (strcmp(epi, "store") && strcmp(epi, mt_activation_name(d->p.activation)))
            continue;
        mt_moe_plan plan;
        if ((st = mt_plan_compose(set, &d->p, v->name, &plan, msg, msg_size)))
            return st;
        run_ctx c = {&plan, &d->p, &d->d, 0, mt_moe_workspace_size(&plan, &d->p)};
        MT_CU_TRY(mt_cu.cuMemAlloc(&c.ws, c.ws_size), msg, msg_size);
        mt_timing tg;
        st = mt_time(tm, enqueue_plan, &c, &tg, msg, msg_size);
        mt_cu.cuMemFree(c.ws);
        if (st)
            return st;
        if (tg.median_us < fastest->us) {
            fastest->us = tg.median_us;
            fastest->min_us = tg.min_us;
            fastest->max_us = tg.max_us;
            mt_strlcpy(fastest->name, v->name, sizeof fastest->name);
        }
        /* The untuned default: the rule the runtime falls back to. */
        if (!strcmp(epi, mt_activation_name(d->p.activation)) &&
            mt_variant_int(v, "BLOCK_M", 0) == mt_default_block_m(&d->p) && dflt->us == INFINITY) {
            dflt->us = tg.median_us;
            mt_strlcpy(dflt->name, v->name, sizeof dflt->name);
        }
    }
    return MT_OK;
fail:
    return st;
}

/* Time against M (default, best, cuBLAS) and the best's roofline fraction. */
static mt_status write_chart(const mt_bench_opts *o, const double *col, char *msg,
                             size_t msg_size)
{
    double *v = malloc((size_t)o->nM * 5 * sizeof *v);
    if (!v)
        return mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
    for (int c = 0; c < 5; c++)   /* columns to series */
        for (int i = 0; i < o->nM; i++)
            v[c * o->nM + i] = col[5 * i + c];
    char title[256];
    snprintf(title, sizeof title, "%s: time per call (median)", o->label);
    mt_chart charts[2] = {
        {.title = title, .y_label = "microseconds", .log_y = 1, .x = v, .n = o->nM,
         .series = {{"moetune untuned default", v + o->nM}, {"moetune best", v + 2 * o->nM},
                    {"cuBLAS experts only", v + 3 * o->nM}},
         .nseries = 3},
        {.title = "fraction of the H200 roofline (best)", .y_label = "roofline / time",
         .log_y = 0, .x = v, .n = o->nM, .series = {{"moetune best", v + 4 * o->nM}},
         .nseries = 1}};
    mt_status st = mt_chart_write_doc(o->svg, charts, 2);
    free(v);
    if (st)
        mt_errf(msg, msg_size, st, "writing the SVG chart failed (M must increase)");
    return st;
}

mt_status mt_bench_run(const mt_bench_opts *o, char *msg, size_t msg_size)
{
    mt_gpu gpu;
    mt_gen *gen = NULL;
    mt_kernel_set set = {0};
    mt_timer tm = {0};
    double *col = NULL;
    mt_status st = mt_gpu_open(0, &gpu, msg, msg_size);
    if (st)
        return st;
    mt_gen_config cfg = {0};
    if ((st = mt_gen_open(&cfg, &gen))) {
        mt_errf(msg, msg_size, st, "%s", mt_gen_errmsg(gen));
        goto done;
    }
    mt_gen_filter f = {.arch = mt_gpu_arch(&gpu), .defaults_only = 1, .nparams = 1,
                       .params = {{"quant", mt_quant_mode_name(o->shape.quant.mode)}}};
    if ((st = mt_kernel_set_load(gen, &f, &set, msg, msg_size)) ||
        (st = mt_timer_init(&tm, 256u << 20, 3, o->reps, msg, msg_size)))
        goto done;
    const mt_problem *s = &o->shape;
    printf("## %s: E=%lld topk=%lld K=%lld N=%lld %s on %s (%d SMs)\n\n", o->label,
           (long long)s->E, (long long)s->topk, (long long)s->K, (long long)s->N,
           mt_dtype_name(s->dtype), gpu.name, gpu.sm_count);
    printf("| M | experts hit | moetune default us | moetune best us (min-max) | TFLOP/s | "
           "weight GB/s | roofline fraction | best kernel | moetune experts-only us | "
           "cuBLAS grouped experts-only us | experts speed-up vs cuBLAS |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|\n");
    col = calloc((size_t)o->nM * 5, sizeof *col);   /* M, default, best, cuBLAS, roof */
    if (!col) {
        st = mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    for (int mi = 0; mi < o->nM; mi++) {
        mt_problem p = *s;
        p.M = o->Ms[mi];
        mt_problem_data ds, db;
        if ((st = mt_problem_data_make(&ds, &p, MT_ROUTING_UNIFORM, 42 + (uint64_t)mi, 1, msg,
                                       msg_size)))
            goto done;
        p.format = MT_FORMAT_BATCHED;
        if ((st = mt_problem_data_make(&db, &p, MT_ROUTING_UNIFORM, 42 + (uint64_t)mi, 1, msg,
                                       msg_size))) {
            mt_problem_data_free(&ds);
            goto done;
        }
        best fs, dfl, fb, dfb;
        mt_cublas_baseline *cb = NULL;
        mt_timing tc = {0};
        int hit = 0;
        for (int64_t e = 0; e < db.p.local_E; e++)
            hit += db.h_counts[e] > 0;
        st = time_candidates(&set, &ds, &tm, &fs, &dfl, msg, msg_size);
        if (!st)
            st = time_candidates(&set, &db, &tm, &fb, &dfb, msg, msg_size);
        if (!st && p.quant.mode == MT_QUANT_NONE) {   /* cuBLAS baseline: bf16/fp16 only */
            mt_moe_plan plan;
            st = mt_plan_compose(&set, &db.p, fb.name, &plan, msg, msg_size);
            if (!st)
                st = mt_cublas_baseline_create(&db.p, db.h_counts, &db.d, &plan.step[MT_STEP_ACT],
                                               &cb, msg, msg_size);
            if (!st)
                st = mt_time(&tm, mt_cublas_baseline_run, cb, &tc, msg, msg_size);
            mt_cublas_baseline_destroy(cb);
        }
        if (!st) {
            const mt_roofline roof = mt_roofline_of(&ds.p, (double)hit);
            printf("| %lld | %d | %.1f | %.1f (%.1f-%.1f) | %.1f | %.0f | %.2f | %s | %.1f | %.1f | "
                   "%.2fx |\n",
                   (long long)p.M, hit, dfl.us, fs.us, fs.min_us, fs.max_us,
                   roof.flops / fs.us * 1e-6, roof.weight_bytes / fs.us * 1e-3, roof.us / fs.us,
                   fs.name, fb.us, tc.median_us, tc.median_us > 0 ? tc.median_us / fb.us : 0.0);
            double *row = col + 5 * mi;
            row[0] = (double)p.M, row[1] = dfl.us, row[2] = fs.us, row[3] = tc.median_us,
            row[4] = roof.us / fs.us;
            fflush(stdout);
            if (o->json)
                fprintf(o->json,
                        "{\"label\":\"%s\",\"E\":%lld,\"topk\":%lld,\"K\":%lld,\"N\":%lld,"
                        "\"M\":%lld,\"experts_hit\":%d,\"default_us\":%.3f,\"best_us\":%.3f,"
                        "\"best_min_us\":%.3f,\"best_max_us\":%.3f,\"roofline_us\":%.3f,"
                        "\"best_kernel\":\"%s\",\"experts_only_us\":%.3f,\"cublas_us\":%.3f,"
                        "\"cublas_graph\":%d}\n",
                        o->label, (long long)p.E, (long long)p.topk, (long long)p.K,
                        (long long)p.N, (long long)p.M, hit, dfl.us, fs.us, fs.min_us,
                        fs.max_us, roof.us, fs.name, fb.us, tc.median_us, tc.graph);
        }
        mt_problem_data_free(&ds);
        mt_problem_data_free(&db);
        if (st)
            goto done;
    }
    if (o->svg)
        st = write_chart(o, col, msg, msg_size);
done:
    free(col);
    mt_timer_free(&tm);
    mt_kernel_set_free(&set);
    mt_gen_close(gen);
    mt_gpu_close(&gpu);
    return st;
}

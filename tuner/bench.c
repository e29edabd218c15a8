/*
 * The benchmark (see bench.h). Prints a markdown table row per M.
 *
 * May call: tuner (harness, timing, select, roofline, chart, plan_check,
 * tuned_plan, cublas_baseline), gen, db, the runtime internals, the driver.
 */
#include "tuner/bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/cuda_driver.h"
#include "common/defaults.h"
#include "common/json.h"
#include "common/util.h"
#include "moetune/db.h"
#include "tuner/chart.h"
#include "tuner/cublas_baseline.h"
#include "tuner/harness.h"
#include "tuner/plan_check.h"
#include "tuner/roofline.h"
#include "tuner/select.h"
#include "tuner/timing.h"
#include "tuner/tuned_plan.h"

/* The untuned default: the rule the runtime falls back to. */
static int is_untuned_default(const mt_variant *v, const mt_problem *p)
{
    return !strcmp(mt_variant_get(v, "epilogue"), mt_activation_name(p->activation)) &&
           mt_default_gemm_is(v, p);
}

/* Mark in `keep` (one flag per kernel of the set) the gemm1 candidates for
 * p: default-set GEMM variants of p's dtype, quant and format with the
 * store or p's activation epilogue. With max > 0 and more candidates than
 * that, only the untuned default and the best-modelled others, max in all.
 * Returns the number kept, or -1 when out of memory. */
static int pick_candidates(const mt_kernel_set *set, const mt_problem *p, int max, int sm_count,
                           unsigned char *keep)
{
    size_t *at = malloc((set->n ? set->n : 1) * sizeof *at);
    mt_variant *vs = malloc((set->n ? set->n : 1) * sizeof *vs);
    size_t n = 0;
    int kept = -1;
    if (!at || !vs)
        goto done;
    for (size_t i = 0; i < set->n; i++) {
        const mt_variant *v = &set->k[i].v;
        keep[i] = 0;
        if (!mt_variant_is_gemm(v) ||
            strcmp(mt_variant_get(v, "quant"), mt_quant_mode_name(p->quant.mode)) ||
            strcmp(mt_variant_get(v, "dtype"), mt_dtype_name(p->dtype)) ||
            strcmp(mt_variant_get(v, "format"), mt_act_format_name(p->format)))
            continue;
        const char *epi = mt_variant_get(v, "epilogue");
        if (strcmp(epi, "store") && strcmp(epi, mt_activation_name(p->activation)))
            continue;
        at[n] = i;
        vs[n++] = *v;
    }
    kept = 0;
    if (max <= 0 || n <= (size_t)max) {
        for (size_t j = 0; j < n; j++)
            keep[at[j]] = 1;
        kept = (int)n;
        goto done;
    }
    size_t dflt = (size_t)-1;
    for (size_t j = 0; j < n && dflt == (size_t)-1; j++)
        if (is_untuned_default(&vs[j], p))
            dflt = j;
    if (dflt != (size_t)-1) {
        keep[at[dflt]] = 1;
        kept = 1;
    }
    /* Ranked with one spare, in case the default is among the best. */
    size_t *pick = malloc(((size_t)max + 1) * sizeof *pick);
    if (!pick) {
        kept = -1;
        goto done;
    }
    size_t np = mt_select_stage(vs, n, p, 1, 0, sm_count, max + 1, pick);
    for (size_t j = 0; j < np && kept < max; j++)
        if (!keep[at[pick[j]]]) {
            keep[at[pick[j]]] = 1;
            kept++;
        }
    free(pick);
done:
    free(at);
    free(vs);
    return kept;
}

/* Time the gemm1 candidates for d (pick_candidates) composed into plans;
 * keep the best and the untuned default (common/defaults.h). *timed: how
 * many were timed. */
static mt_status time_candidates(const mt_kernel_set *set, mt_problem_data *d, mt_timer *tm,
                                 int max, int sm_count, mt_bench_time *fastest,
                                 mt_bench_time *dflt, int *timed, char *msg, size_t msg_size)
{
    mt_status st = MT_OK;
    fastest->us = fastest->min_us = fastest->max_us = INFINITY;
    dflt->us = dflt->min_us = dflt->max_us = INFINITY;
    fastest->name[0] = dflt->name[0] = '\0';
    unsigned char *keep = malloc(set->n ? set->n : 1);
    if (!keep || (*timed = pick_candidates(set, &d->p, max, sm_count, keep)) < 0) {
        free(keep);
        return mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
    }
    for (size_t i = 0; i < set->n; i++) {
        const mt_variant *v = &set->k[i].v;
        if (!keep[i])
            continue;
        mt_moe_plan plan;
        if ((st = mt_plan_compose(set, &d->p, v->name, &plan, msg, msg_size)))
            goto fail;
        mt_plan_call c = {&plan, &d->p, &d->d, 0, mt_moe_workspace_size(&plan, &d->p), 0};
        MT_CU_TRY(mt_cu.cuMemAlloc(&c.ws, c.ws_size), msg, msg_size);
        mt_timing tg;
        st = mt_time(tm, mt_plan_call_enqueue, &c, &tg, msg, msg_size);
        mt_cu.cuMemFree(c.ws);
        if (st)
            goto fail;
        if (tg.median_us < fastest->us) {
            fastest->us = tg.median_us;
            fastest->min_us = tg.min_us;
            fastest->max_us = tg.max_us;
            mt_strlcpy(fastest->name, v->name, sizeof fastest->name);
        }
        if (is_untuned_default(v, &d->p) && dflt->us == INFINITY) {
            dflt->us = tg.median_us;
            mt_strlcpy(dflt->name, v->name, sizeof dflt->name);
        }
    }
fail:
    free(keep);
    return st;
}

/* Distinct experts that received a token (local ones with an expert map). */
static int experts_hit(const mt_problem_data *d)
{
    const mt_problem *p = &d->p;
    return mt_experts_hit(d->h_topk_ids, p->M * p->topk, p->E, p->has_expert_map ? d->h_expert_map : NULL);
}

/* The tuned choice of d's problem: composed from ctx, checked once against
 * the oracle as the tuner checks candidates, then timed. A pipeline that
 * does not compose or fails its check is not timed: r->tuned_error says
 * why (the benchmark goes on); failures of the run itself are returned. */
static mt_status time_tuned(mt_context *ctx, const mt_tuned_choice *c, mt_problem_data *d,
                            mt_timer *tm, mt_bench_row *r, char *msg, size_t msg_size)
{
    mt_moe_plan plan;
    mt_plan_ref ref;
    mt_measure chk;
    mt_status st = mt_tuned_plan_compose(ctx, c, &d->p, &plan, r->tuned_error,
                                         sizeof r->tuned_error);
    /* A stored pipeline that cannot be used here (incompatible, a kernel that
     * does not load or compile, ...) is reported in its row, not fatal; only
     * running out of memory ends the benchmark. */
    if (st == MT_ERR_NO_MEMORY)
        return mt_errf(msg, msg_size, st, "%s", r->tuned_error);
    if (st)
        return MT_OK;
    r->tuned_error[0] = '\0';
    mt_plan_call rc = {&plan, &d->p, &d->d, 0, mt_moe_workspace_size(&plan, &d->p), 0};
    if ((st = mt_plan_ref_make(&ref, d, msg, msg_size)))
        goto done;
    MT_CU_TRY(mt_cu.cuMemAlloc(&rc.ws, rc.ws_size), msg, msg_size);
    if ((st = mt_plan_check(&ref, &plan, d, &d->d, rc.ws, rc.ws_size, tm->stream, NULL, NULL,
                            &chk, msg, msg_size)))
        goto fail;
    if (!chk.ok) {
        mt_strlcpy(r->tuned_error, chk.reason, sizeof r->tuned_error);
        goto fail;
    }
    mt_timing tg;
    if ((st = mt_time(tm, mt_plan_call_enqueue, &rc, &tg, msg, msg_size)))
        goto fail;
    r->tuned.us = tg.median_us;
    r->tuned.min_us = tg.min_us;
    r->tuned.max_us = tg.max_us;
    /* Where the time goes: each step alone, on the workspace the timed runs
     * filled (so a step reads what its predecessors wrote), same method. */
    for (int s = 0; s < MT_STEP_ALL; s++) {
        if (!mt_moe_plan_uses(&plan, &d->p, (mt_step)s))
            continue;
        rc.steps = MT_STEP_BIT(s);
        if ((st = mt_time(tm, mt_plan_call_enqueue, &rc, &tg, msg, msg_size)))
            goto fail;
        r->tuned_step_us[s] = tg.median_us;
    }
fail:
    if (rc.ws)
        mt_cu.cuMemFree(rc.ws);
done:
    mt_plan_ref_free(&ref);
    return st;
}

static int measured(double us) { return isfinite(us) && us > 0; }

/* JSON number or null (not measured). */
static void json_us(FILE *f, const char *key, double us, int is_measured)
{
    if (is_measured && measured(us))
        fprintf(f, ",\"%s\":%.3f", key, us);
    else
        fprintf(f, ",\"%s\":null", key);
}

/* A JSON string (escaped by the project's JSON writer) or null. */
static void json_val(FILE *f, const char *s)
{
    mt_json_writer w;
    memset(&w, 0, sizeof w);
    if (s)
        mt_jw_string(&w, s);
    if (s && mt_jw_finish(&w) == MT_OK && w.buf.data)
        fputs(w.buf.data, f);
    else
        fputs("null", f);
    mt_json_writer_free(&w);
}

static void json_str(FILE *f, const char *key, const char *s)
{
    fprintf(f, ",\"%s\":", key);
    json_val(f, s);
}

void mt_bench_write_json(FILE *f, const mt_bench_opts *o, const mt_bench_row *r)
{
    const mt_problem *p = &r->p;
    const int found = r->tuned_state == 2;
    fprintf(f, "{\"label\":");
    json_val(f, o->label);
    fprintf(f,
            ",\"quant\":\"%s\",\"dtype\":\"%s\",\"activation\":\"%s\","
            "\"E\":%lld,\"topk\":%lld,\"K\":%lld,\"N\":%lld,\"M\":%lld,\"experts_hit\":%d,"
            "\"seed\":%llu,\"reps\":%d,\"candidates\":%d",
            mt_quant_mode_name(p->quant.mode), mt_dtype_name(p->dtype),
            mt_activation_name(p->activation), (long long)p->E, (long long)p->topk,
            (long long)p->K, (long long)p->N, (long long)p->M, r->experts_hit,
            (unsigned long long)r->seed, o->reps, r->candidates);
    json_us(f, "default_us", r->dflt.us, 1);
    json_str(f, "default_kernel", r->dflt.name);
    json_us(f, "best_us", r->best.us, 1);
    json_us(f, "best_min_us", r->best.min_us, 1);
    json_us(f, "best_max_us", r->best.max_us, 1);
    json_us(f, "roofline_us", r->roofline_us, 1);
    json_str(f, "best_kernel", r->best.name);
    json_us(f, "tuned_us", r->tuned.us, found);
    json_us(f, "tuned_min_us", r->tuned.min_us, found);
    json_us(f, "tuned_max_us", r->tuned.max_us, found);
    json_str(f, "tuned_kernel", found ? r->tuned.name : NULL);
    if (found)
        fprintf(f, ",\"tuned_from_m\":%lld", (long long)r->tuned_from_m);
    else
        fprintf(f, ",\"tuned_from_m\":null");
    json_str(f, "tuned_source", found ? r->tuned_source : NULL);
    json_str(f, "tuned_error", found && r->tuned_error[0] ? r->tuned_error : NULL);
    fputs(",\"tuned_steps_us\":", f);
    int any = 0;
    for (int s = 0; s < MT_STEP_ALL; s++) {
        if (!found || !measured(r->tuned_step_us[s]))
            continue;
        fprintf(f, "%s\"%s\":%.3f", any ? "," : "{", mt_step_name((mt_step)s),
                r->tuned_step_us[s]);
        any = 1;
    }
    fputs(any ? "}" : "null", f);
    json_us(f, "experts_only_us", r->experts_only_us, r->experts_measured);
    json_us(f, "cublas_us", r->cublas_us, r->cublas_measured);
    fprintf(f, ",\"cublas_graph\":%d}\n", r->cublas_graph);
    fflush(f);
}

/* A table cell in microseconds, "-" when not measured. */
static void cell_us(FILE *f, double us)
{
    if (measured(us))
        fprintf(f, " %.1f |", us);
    else
        fputs(" - |", f);
}

void mt_bench_print_header(FILE *f, const mt_bench_opts *o)
{
    const int tuned = o->db_path != NULL;
    fprintf(f, "| M | experts hit |%s moetune default us | moetune best us (min-max) | TFLOP/s | "
               "weight GB/s | H200 roofline fraction | best kernel | moetune experts-only us | "
               "cuBLAS grouped experts-only us | experts speed-up vs cuBLAS |\n"
               "|---|---|%s---|---|---|---|---|---|---|---|---|\n",
            tuned ? " moetune tuned us (min-max) | tuned H200 roofline fraction | tuned kernel "
                    "(entry M) | tuned steps alone us |" : "",
            tuned ? "---|---|---|---|" : "");
}

void mt_bench_print_row(FILE *f, const mt_bench_opts *o, const mt_bench_row *r)
{
    const mt_bench_time *b = &r->best;
    fprintf(f, "| %lld | %d |", (long long)r->p.M, r->experts_hit);
    if (o->db_path) {
        const mt_bench_time *t = &r->tuned;
        if (r->tuned_state == 2 && measured(t->us))
            fprintf(f, " %.1f (%.1f-%.1f) | %.2f |", t->us, t->min_us, t->max_us,
                    r->roofline_us / t->us);
        else
            fputs(" - | - |", f);
        if (r->tuned_state == 2)
            fprintf(f, " %s (M=%lld%s)%s |", t->name, (long long)r->tuned_from_m,
                    strcmp(r->tuned_source, "tuned") ? ", same-cc" : "",
                    r->tuned_error[0] ? ": not timed" : "");
        else
            fputs(" - |", f);
        int any = 0;
        for (int s = 0; s < MT_STEP_ALL; s++)
            if (r->tuned_state == 2 && measured(r->tuned_step_us[s]))
                fprintf(f, "%s%s %.1f", any++ ? ", " : " ", mt_step_name((mt_step)s),
                        r->tuned_step_us[s]);
        fputs(any ? " |" : " - |", f);
    }
    cell_us(f, r->dflt.us);
    if (measured(b->us))
        fprintf(f, " %.1f (%.1f-%.1f) | %.1f | %.0f | %.2f |", b->us, b->min_us, b->max_us,
                r->flops / b->us * 1e-6, r->weight_bytes / b->us * 1e-3, r->roofline_us / b->us);
    else
        fputs(" - | - | - | - |", f);
    fprintf(f, " %s |", b->name[0] ? b->name : "-");
    cell_us(f, r->experts_measured ? r->experts_only_us : NAN);
    cell_us(f, r->cublas_measured ? r->cublas_us : NAN);
    if (r->experts_measured && r->cublas_measured && measured(r->cublas_us) &&
        measured(r->experts_only_us))
        fprintf(f, " %.2fx |\n", r->cublas_us / r->experts_only_us);
    else
        fputs(" - |\n", f);
}

mt_status mt_bench_write_chart(const mt_bench_opts *o, const mt_bench_row *rows, char *msg,
                               size_t msg_size)
{
    enum { X, DFLT, BEST, CUBLAS, TUNED, ROOF_BEST, ROOF_TUNED, NCOL };
    const int n = o->nM;
    double *v = malloc((size_t)(n ? n : 1) * NCOL * sizeof *v);
    if (!v)
        return mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
    int tuned = 0;
    for (int i = 0; i < n; i++) {
        const mt_bench_row *r = &rows[i];
        const int t = r->tuned_state == 2 && measured(r->tuned.us);
        tuned |= t;
        v[X * n + i] = (double)r->p.M;
        v[DFLT * n + i] = r->dflt.us;
        v[BEST * n + i] = r->best.us;
        v[CUBLAS * n + i] = r->cublas_measured ? r->cublas_us : NAN;
        v[TUNED * n + i] = t ? r->tuned.us : NAN;
        v[ROOF_BEST * n + i] = measured(r->best.us) ? r->roofline_us / r->best.us : NAN;
        v[ROOF_TUNED * n + i] = t ? r->roofline_us / r->tuned.us : NAN;
    }
    char title[256];
    snprintf(title, sizeof title, "%s: time per call (median)", o->label);
    mt_chart charts[2] = {
        {.title = title, .y_label = "microseconds", .log_y = 1, .x = v, .n = n,
         .series = {{"moetune untuned default", v + DFLT * n}, {"moetune best", v + BEST * n},
                    {"cuBLAS experts only", v + CUBLAS * n}, {"moetune tuned", v + TUNED * n}},
         .nseries = tuned ? 4 : 3},
        {.title = tuned ? "fraction of the H200 roofline (best, tuned)"
                        : "fraction of the H200 roofline (best)",
         .y_label = "roofline / time", .log_y = 0, .x = v, .n = n,
         .series = {{"moetune best", v + ROOF_BEST * n}, {"moetune tuned", v + ROOF_TUNED * n}},
         .nseries = tuned ? 2 : 1}};
    mt_status st = mt_chart_write_doc(o->svg, charts, 2);
    free(v);
    if (st)
        mt_errf(msg, msg_size, st, "writing the SVG chart failed (M must increase)");
    return st;
}

/* Open the tuned database read-only; its own message names the file. */
static mt_status open_db(const char *path, mt_db **db, char *msg, size_t msg_size)
{
    mt_status st = mt_db_open(path, MT_DB_READONLY, db);
    if (st) {
        mt_errf(msg, msg_size, st, "%s", *db ? mt_db_errmsg(*db) : "out of memory");
        mt_db_close(*db);
        *db = NULL;
    }
    return st;
}

/* Look up the tuned pipeline of every M; say once when the database has
 * no entry for the problem. */
static mt_status lookup_all(const mt_bench_opts *o, mt_db *db, const mt_context *ctx,
                            mt_tuned_choice *ch, char *msg, size_t msg_size)
{
    mt_rt_machine m;
    mt_tuned_machine(ctx, &m);
    int missing = 0;
    for (int i = 0; i < o->nM; i++) {
        mt_problem p = o->shape;
        p.M = o->Ms[i];
        mt_status st = mt_tuned_lookup(&db, 1, &m, &p, &ch[i], msg, msg_size);
        if (st)
            return st;
        missing += !ch[i].found;
    }
    if (missing) {
        mt_db_key key;
        char k[512] = "";
        if (mt_db_key_from_problem(&o->shape, m.sku, NULL, &key) == MT_OK)
            mt_db_key_format(&key, k, sizeof k);
        printf("Note: %s has no tuned entry for %s on %s (cc %s): the tuned column is "
               "empty.\n\n", o->db_path, k, m.sku, m.cc);
    }
    return MT_OK;
}

mt_status mt_bench_run(const mt_bench_opts *o, char *msg, size_t msg_size)
{
    mt_gpu gpu;
    mt_gen *gen = NULL;
    mt_kernel_set set = {0};
    mt_timer tm = {0};
    mt_bench_row *rows = NULL;
    mt_db *db = NULL;
    mt_context *ctx = NULL;
    mt_tuned_choice *ch = NULL;
    memset(&gpu, 0, sizeof gpu);
    /* The database first: a bad file is reported before any GPU work. */
    mt_status st = o->db_path ? open_db(o->db_path, &db, msg, msg_size) : MT_OK;
    if (st || (st = mt_gpu_open(0, &gpu, msg, msg_size)))
        goto done;
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
    rows = calloc((size_t)(o->nM ? o->nM : 1), sizeof *rows);
    ch = calloc((size_t)(o->nM ? o->nM : 1), sizeof *ch);
    if (!rows || !ch) {
        st = mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    const mt_problem *s = &o->shape;
    printf("## %s: E=%lld topk=%lld K=%lld N=%lld %s on %s (%d SMs)\n\n", o->label,
           (long long)s->E, (long long)s->topk, (long long)s->K, (long long)s->N,
           mt_dtype_name(s->dtype), gpu.name, gpu.sm_count);
    if (db) {
        /* The runtime's kernel loader and cache, on the same (primary) context. */
        mt_context_config cc;
        mt_context_config_init(&cc);
        if ((st = mt_context_create(&cc, &ctx))) {
            mt_errf(msg, msg_size, st, "%s", mt_context_errmsg(ctx));
            goto done;
        }
        if ((st = lookup_all(o, db, ctx, ch, msg, msg_size)))
            goto done;
    }
    mt_bench_print_header(stdout, o);
    for (int mi = 0; mi < o->nM; mi++) {
        mt_bench_row *r = &rows[mi];
        mt_problem p = *s;
        p.M = o->Ms[mi];
        mt_problem_data ds, dbat;
        memset(&dbat, 0, sizeof dbat);
        uint64_t seed = 42 + (uint64_t)mi;
        const int want = o->experts_hit_want && !p.has_expert_map ? o->experts_hit_want[mi] : 0;
        if (want > 0) {
            int got = 0;
            if ((st = mt_routing_seed_for_hits(&p, MT_ROUTING_UNIFORM, seed, 1000, 4096, want, &seed,
                                               &got))) {
                mt_errf(msg, msg_size, st, "out of memory choosing the routing");
                goto done;
            }
            if (got != want)
                fprintf(stderr, "moetune bench: M=%lld: no routing of 4096 seeds hits %d experts; "
                        "the usual one (%d hit) is timed\n", (long long)p.M, want, got);
        }
        if ((st = mt_problem_data_make(&ds, &p, MT_ROUTING_UNIFORM, seed, 1, msg, msg_size)))
            goto done;
        /* The same seed: the batched data has the same routing. */
        p.format = MT_FORMAT_BATCHED;
        if (!o->pipeline_only &&
            (st = mt_problem_data_make(&dbat, &p, MT_ROUTING_UNIFORM, seed, 1, msg, msg_size))) {
            mt_problem_data_free(&ds);
            goto done;
        }
        mt_bench_time fb = {.us = INFINITY}, dfb;
        mt_cublas_baseline *cb = NULL;
        mt_timing tc = {0};
        int timed_b = 0;
        r->p = ds.p;
        r->experts_hit = experts_hit(&ds);
        r->seed = seed;
        r->tuned.us = r->tuned.min_us = r->tuned.max_us = INFINITY;
        r->experts_measured = !o->pipeline_only;
        r->cublas_measured = !o->pipeline_only && p.quant.mode == MT_QUANT_NONE;
        if (r->experts_hit < 0)
            st = mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
        if (!st)
            st = time_candidates(&set, &ds, &tm, o->max_candidates, gpu.sm_count, &r->best,
                                 &r->dflt, &r->candidates, msg, msg_size);
        if (db && !st) {
            const mt_tuned_choice *c = &ch[mi];
            r->tuned_state = c->found ? 2 : 1;
            if (c->found) {
                mt_strlcpy(r->tuned.name, c->gemm1, sizeof r->tuned.name);
                r->tuned_from_m = c->c.info.tuned_m;
                r->tuned_source = mt_lookup_source_name(c->c.info.source);
                st = time_tuned(ctx, c, &ds, &tm, r, msg, msg_size);
                if (!st && r->tuned_error[0])
                    fprintf(stderr, "moetune bench: M=%lld: the tuned pipeline %s was not "
                                    "timed: %s\n",
                            (long long)r->p.M, c->c.info.pipeline, r->tuned_error);
            }
        }
        if (!st && !o->pipeline_only)
            st = time_candidates(&set, &dbat, &tm, o->max_candidates, gpu.sm_count, &fb, &dfb,
                                 &timed_b, msg, msg_size);
        if (!st && r->cublas_measured) {   /* cuBLAS baseline: bf16/fp16 only */
            mt_moe_plan plan;
            st = mt_plan_compose(&set, &dbat.p, fb.name, &plan, msg, msg_size);
            if (!st)
                st = mt_cublas_baseline_create(&dbat.p, dbat.h_counts, &dbat.d,
                                               &plan.step[MT_STEP_ACT], &cb, msg, msg_size);
            if (!st)
                st = mt_time(&tm, mt_cublas_baseline_run, cb, &tc, msg, msg_size);
            mt_cublas_baseline_destroy(cb);
        }
        if (!st) {
            const mt_roofline roof = mt_roofline_of(&ds.p, (double)r->experts_hit);
            r->roofline_us = roof.us;
            r->flops = roof.flops;
            r->weight_bytes = roof.weight_bytes;
            r->experts_only_us = fb.us;
            r->cublas_us = tc.median_us;
            r->cublas_graph = tc.graph;
            mt_bench_print_row(stdout, o, r);
            fflush(stdout);
            if (o->json)
                mt_bench_write_json(o->json, o, r);
        }
        mt_problem_data_free(&ds);
        if (!o->pipeline_only)
            mt_problem_data_free(&dbat);
        if (st)
            goto done;
    }
    if (o->svg)
        st = mt_bench_write_chart(o, rows, msg, msg_size);
done:
    free(rows);
    free(ch);
    mt_context_destroy(ctx);   /* the tuned plans' modules */
    mt_timer_free(&tm);
    mt_kernel_set_free(&set);
    mt_gen_close(gen);
    mt_gpu_close(&gpu);
    mt_db_close(db);
    return st;
}

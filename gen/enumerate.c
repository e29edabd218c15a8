/*
 * Targets, enumeration of a family's parameter space, filters and pruning
 * (valid(p, target)), with a report of the pruned points per reason.
 * Calls: gen/template.c, common/util.h.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "gen/gen_internal.h"

/* Shared memory per block is the opt-in maximum of each architecture;
 * threads and shared memory per SM, what an SM holds at once (of which the
 * driver keeps 1 KB a CTA). compute_90, PTX for newer GPUs, takes sm_90's
 * limits. */
static const gen_target targets[] = {
    {"sm_80", 80, 166912, 65536, 1024, 2048, 167936, 0},
    {"sm_86", 86, 101376, 65536, 1024, 1536, 102400, 0},
    {"sm_89", 89, 101376, 65536, 1024, 1536, 102400, 0},
    {"sm_90a", 90, MT_MAX_SMEM_PER_BLOCK, 65536, 1024, 2048, 233472, 0},
    {"compute_90", 90, MT_MAX_SMEM_PER_BLOCK, 65536, 1024, 2048, 233472, 1},
};

/* From the target table, so that a new target needs no second list. */
const char *mt_gen_arch_names(char *buf, size_t size)
{
    size_t used = 0;
    if (size)
        buf[0] = '\0';
    for (size_t i = 0; i < MT_ARRAY_LEN(targets) && used < size; i++) {
        const int n = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", targets[i].arch);
        used += n > 0 ? (size_t)n : 0;
    }
    return buf;
}

const gen_target *gen_target_find(const char *arch)
{
    for (size_t i = 0; arch && i < MT_ARRAY_LEN(targets); i++)
        if (strcmp(targets[i].arch, arch) == 0)
            return &targets[i];
    return NULL;
}

int mt_gen_arch_known(const char *arch) { return gen_target_find(arch) != NULL; }

/* *acc + n, held at INT_MAX: a family no target builds for is counted
 * without a cap on its points. */
static void add_count(int *acc, int n)
{
    *acc = n > INT_MAX - *acc ? INT_MAX : *acc + n;
}

/* Count `count` points pruned for a reason. */
static void add_reason(mt_prune_report *r, const char *prefix, const char *reason, int count)
{
    char full[512], text[sizeof r->reasons[0].reason];
    snprintf(full, sizeof full, "%s%s%s", prefix ? prefix : "", prefix ? ": " : "", reason);
    mt_strlcpy(text, full, sizeof text);
    for (int i = 0; i < r->nreasons; i++)
        if (strcmp(r->reasons[i].reason, text) == 0) {
            add_count(&r->reasons[i].count, count);
            return;
        }
    if (r->nreasons < MT_PRUNE_MAX_REASONS) {
        mt_strlcpy(r->reasons[r->nreasons].reason, text, sizeof text);
        r->reasons[r->nreasons++].count = count;
        return;
    }
    mt_strlcpy(r->reasons[MT_PRUNE_MAX_REASONS - 1].reason, "(other reasons)", sizeof text);
    add_count(&r->reasons[MT_PRUNE_MAX_REASONS - 1].count, count);
}

/* Where the valid variants go, one at a time; cb returns nonzero to stop
 * the walk. */
typedef struct sink {
    int (*cb)(const mt_variant *v, void *ctx);
    void *ctx;
    int stopped;
} sink;

typedef struct out_list {
    mt_variant *v;
    size_t n, cap;
    int oom;
} out_list;

static int out_push(const mt_variant *v, void *ctx)
{
    out_list *o = ctx;
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 64;
        mt_variant *nv = realloc(o->v, cap * sizeof *nv);
        if (!nv)
            return o->oom = 1;
        o->v = nv;
        o->cap = cap;
    }
    o->v[o->n++] = *v;
    return 0;
}

/* The variant at a point for a target, threads and shared memory
 * included; *ok 0 (reason set, v untouched) when a parameter's only_if
 * (unless gates_checked) or valid() refuses it. */
static mt_status point_variant(gen_template *t, const int *point, const gen_target *tg,
                               int gates_checked, int *ok, char *reason, size_t reason_size,
                               mt_variant *v, char *msg, size_t msg_size)
{
    mt_status st = gen_template_valid(t, point, tg, gates_checked, ok, reason, reason_size, msg,
                                      msg_size);
    if (!st && *ok)
        st = gen_template_variant(t, point, tg->arch, v, msg, msg_size);
    if (!st && *ok)
        st = gen_template_launch(t, point, tg, &v->threads, &v->smem_bytes, msg, msg_size);
    return st;
}

/* One point of the walk: pruned (its reason counted) or handed to the
 * sink. */
static mt_status visit_point(mt_gen *g, gen_template *t, const int *point, const gen_target *tg,
                             int strict, int gates_checked, sink *out, mt_prune_report *rep)
{
    char msg[2048], reason[128];
    add_count(&rep->enumerated, 1);
    int ok = 1;
    mt_variant v;
    mt_status st = point_variant(t, point, tg, gates_checked, &ok, reason, sizeof reason, &v, msg,
                                 sizeof msg);
    if (st) {
        char vname[MT_VARIANT_NAME_MAX];
        mt_variant tmp;
        if (gen_template_variant(t, point, tg->arch, &tmp, NULL, 0) == MT_OK)
            mt_strlcpy(vname, tmp.name, sizeof vname);
        else
            mt_strlcpy(vname, "(unnamed point)", sizeof vname);
        return gen_set_err(g, st, "%s (point %s, %s)", msg, vname, tg->arch);
    }
    if (!ok) {
        add_reason(rep, strict ? NULL : t->family, reason, 1);
    } else {
        rep->valid++;
        if (out->cb(&v, out->ctx))
            out->stopped = 1;
    }
    return MT_OK;
}

/* A point as a record whose bytes order like its value indices (each big
 * endian in two bytes: a parameter has at most 4096 values), so that
 * memcmp orders records as the full walk meets their points. */
typedef struct point_rec {
    unsigned char b[2 * MT_VARIANT_MAX_PARAMS];
} point_rec;

static int cmp_recs(const void *x, const void *y)
{
    return memcmp(((const point_rec *)x)->b, ((const point_rec *)y)->b, sizeof(point_rec));
}

/* Do the filters' choices admit every value default d fixes? */
static int default_admitted(const gen_template *t, int d, int *const *choices, const int *nchoices)
{
    for (int p = 0; p < t->nparams; p++) {
        const int fixed = t->defaults[d].value[p];
        int admitted = fixed < 0;
        for (int k = 0; k < nchoices[p] && !admitted; k++)
            admitted = choices[p][k] == fixed;
        if (!admitted)
            return 0;
    }
    return 1;
}

/* How many points the defaults hold among the filters' choices (before
 * those two defaults share are merged): what walk_defaults records. */
static double default_points(const gen_template *t, int *const *choices, const int *nchoices)
{
    double sum = 0;
    for (int d = 0; d < t->ndefaults; d++) {
        double n = default_admitted(t, d, choices, nchoices);
        for (int p = 0; p < t->nparams && n > 0; p++)
            if (t->defaults[d].value[p] < 0)
                n *= nchoices[p];
        sum += n;
    }
    return sum;
}

/* The default points among the filters' choices, visited in the order of
 * the full walk, each once: a default fixes some parameters and leaves the
 * rest (dtype, format, epilogue...) to the filters, so this visits a few
 * thousand points where the full product has tens of millions. */
static mt_status walk_defaults(mt_gen *g, gen_template *t, int *const *choices, const int *nchoices,
                               const gen_target *tg, int strict, sink *out, mt_prune_report *rep)
{
    const int np = t->nparams;
    point_rec *recs = NULL;
    size_t n = 0, cap = 0;
    mt_status st = MT_OK;
    for (int d = 0; d < t->ndefaults && !st; d++) {
        /* Per parameter: the default's value if the filters admit it, or
         * every admitted value where the default leaves it open. */
        int fixed[MT_VARIANT_MAX_PARAMS], idx[MT_VARIANT_MAX_PARAMS] = {0};
        for (int p = 0; p < np; p++)
            fixed[p] = t->defaults[d].value[p];
        int admitted = default_admitted(t, d, choices, nchoices);
        while (admitted) {
            if (n == cap) {
                size_t ncap = cap ? cap * 2 : 256;
                point_rec *nr = realloc(recs, ncap * sizeof *recs);
                if (!nr) {
                    st = gen_set_err(g, MT_ERR_NO_MEMORY, "out of memory");
                    break;
                }
                recs = nr;
                cap = ncap;
            }
            memset(&recs[n], 0, sizeof recs[n]);
            for (int p = 0; p < np; p++) {
                const int k = fixed[p] >= 0 ? fixed[p] : choices[p][idx[p]];
                recs[n].b[2 * p] = (unsigned char)(k >> 8);
                recs[n].b[2 * p + 1] = (unsigned char)(k & 0xff);
            }
            n++;
            int p = np - 1;   /* odometer over the open parameters */
            while (p >= 0 && (fixed[p] >= 0 || ++idx[p] == nchoices[p]))
                idx[p--] = 0;
            admitted = p >= 0;
        }
    }
    if (n)
        qsort(recs, n, sizeof *recs, cmp_recs);
    for (size_t i = 0; i < n && !st && !out->stopped; i++) {
        if (i > 0 && !cmp_recs(&recs[i - 1], &recs[i]))
            continue;   /* met by two defaults */
        int point[MT_VARIANT_MAX_PARAMS];
        for (int p = 0; p < np; p++)
            point[p] = recs[i].b[2 * p] << 8 | recs[i].b[2 * p + 1];
        st = visit_point(g, t, point, tg, strict, 0, out, rep);
    }
    free(recs);
    return st;
}

/* The full walk over the filters' choices. */
typedef struct walk {
    mt_gen *g;
    gen_template *t;
    const gen_target *tg;
    int strict;
    sink *out;
    mt_prune_report *rep;
    int *const *choices;
    const int *nchoices;
    int below[MT_VARIANT_MAX_PARAMS + 1];   /* points under a value of parameter q - 1 */
    int point[MT_VARIANT_MAX_PARAMS];
} walk;

/* Parameters q and on, in the odometer's order (the last turns fastest).
 * Where q's only_if refuses the parameters before it, q's values other
 * than its first are counted as pruned, with the points under them,
 * unvisited: a parameter offered in a corner of the space costs the walk
 * that corner only. */
static mt_status walk_from(walk *w, int q)
{
    gen_template *t = w->t;
    if (q == t->nparams)
        return visit_point(w->g, t, w->point, w->tg, w->strict, 1, w->out, w->rep);
    int open = 1;
    char reason[128] = "", msg[2048];
    if (w->nchoices[q] > 1 || w->choices[q][0] != 0) {
        mt_status st = gen_template_gate(t, q, w->point, w->tg, &open, reason, sizeof reason, msg,
                                         sizeof msg);
        if (st)
            return gen_set_err(w->g, st, "%s (only_if of parameter %s of family %s, %s)", msg,
                               t->params[q].name, t->family, w->tg->arch);
    }
    for (int k = 0; k < w->nchoices[q] && !w->out->stopped; k++) {
        w->point[q] = w->choices[q][k];
        if (!open && w->point[q] != 0) {
            add_count(&w->rep->enumerated, w->below[q + 1]);
            add_reason(w->rep, w->strict ? NULL : t->family, reason, w->below[q + 1]);
            continue;
        }
        mt_status st = walk_from(w, q + 1);
        if (st)
            return st;
    }
    return MT_OK;
}

/* Family t over the walk's cap, left out of a walk of every family with
 * skip_over_cap: named in the report. */
static void note_unwalked(mt_prune_report *rep, const char *family, double points)
{
    if (rep->nunwalked < (int)MT_ARRAY_LEN(rep->unwalked)) {
        mt_strlcpy(rep->unwalked[rep->nunwalked].family, family, sizeof rep->unwalked[0].family);
        rep->unwalked[rep->nunwalked].points = points;
    }
    rep->nunwalked++;
}

/* Walk family t under the filters f for target tg into out, or with
 * check_only only refuse a walk of more than MT_GEN_MAX_WALK_POINTS points
 * (that of the defaults where f asks for them) and walk nothing: the walk
 * of every family checks them all first, so that it refuses before handing
 * out any variant. With skip_over_cap (every family) such a family is
 * left out and noted instead. */
static mt_status enum_family(mt_gen *g, gen_template *t, const mt_gen_filter *f,
                             const gen_target *tg, int strict, int check_only, sink *out,
                             mt_prune_report *rep)
{
    /* allowed[p][k]: the filters on parameter p admit value k. */
    unsigned char *allowed[MT_VARIANT_MAX_PARAMS] = {0};
    int *choices[MT_VARIANT_MAX_PARAMS] = {0}, nchoices[MT_VARIANT_MAX_PARAMS] = {0};
    mt_status st = MT_OK;
    for (int p = 0; p < t->nparams; p++) {
        allowed[p] = calloc((size_t)t->params[p].nvalues, 1);
        choices[p] = calloc((size_t)t->params[p].nvalues, sizeof(int));
        if (!allowed[p] || !choices[p]) {
            st = gen_set_err(g, MT_ERR_NO_MEMORY, "out of memory");
            goto done;
        }
    }
    int filtered[MT_VARIANT_MAX_PARAMS] = {0};
    for (int i = 0; i < f->nparams; i++) {
        const char *name = f->params[i].name, *value = f->params[i].value;
        if (!name || !value) {
            st = gen_set_err(g, MT_ERR_INVALID_ARG, "filter %d lacks a name or a value", i);
            goto done;
        }
        int p = gen_template_param_index(t, name);
        if (p < 0) {
            if (strict) {
                st = gen_set_err(g, MT_ERR_INVALID_ARG, "filter on parameter '%s': family %s "
                                 "has no such parameter", name, t->family);
                goto done;
            }
            continue;
        }
        filtered[p] = 1;
        int k = gen_template_value_index(t, p, value);
        if (k < 0) {
            if (strict && !f->lenient_values) {
                mt_buf b = {0};
                for (int j = 0; j < t->params[p].nvalues; j++)
                    mt_buf_printf(&b, "%s%s", j ? ", " : "", t->params[p].values[j].text);
                st = gen_set_err(g, MT_ERR_INVALID_ARG, "filter %s=%s: value '%s' is not in the "
                                 "domain of parameter '%s' of family %s (%s)", name, value, value,
                                 name, t->family, b.data ? b.data : "");
                mt_buf_free(&b);
                goto done;
            }
            continue;
        }
        allowed[p][k] = 1;
    }
    double total = 1;
    for (int p = 0; p < t->nparams; p++) {
        for (int k = 0; k < t->params[p].nvalues; k++)
            if (!filtered[p] || allowed[p][k])
                choices[p][nchoices[p]++] = k;
        total *= nchoices[p];
    }
    if (total == 0)
        goto done;
    char reason[128];
    const int builds = gen_template_builds_for(t, tg, reason, sizeof reason);
    const double points = f->defaults_only ? default_points(t, choices, nchoices) : total;
    /* A family that does not build for the target is counted, not walked
     * (so no cap on how many); the defaults are walked for their reasons. */
    if ((builds || f->defaults_only) && points > MT_GEN_MAX_WALK_POINTS) {
        if (!strict && f->skip_over_cap) {
            if (!check_only)
                note_unwalked(rep, t->family, points);
            goto done;
        }
        st = gen_set_err(g, MT_ERR_INVALID_ARG, "family %s has %.0f %spoints after the filters; "
                         "add filters (at most %d)", t->family, points,
                         f->defaults_only ? "default " : "", MT_GEN_MAX_WALK_POINTS);
        goto done;
    }
    if (check_only)
        goto done;
    if (f->defaults_only) {
        st = walk_defaults(g, t, choices, nchoices, tg, strict, out, rep);
        goto done;
    }
    if (!builds) {   /* every point refused, none walked */
        const int count = total < INT_MAX ? (int)total : INT_MAX;
        add_count(&rep->enumerated, count);
        add_reason(rep, strict ? NULL : t->family, reason, count);
        goto done;
    }
    walk w = {.g = g, .t = t, .tg = tg, .strict = strict, .out = out, .rep = rep,
              .choices = choices, .nchoices = nchoices};
    w.below[t->nparams] = 1;
    for (int p = t->nparams - 1; p >= 0; p--)
        w.below[p] = w.below[p + 1] * nchoices[p];
    st = walk_from(&w, 0);
done:
    for (int p = 0; p < MT_VARIANT_MAX_PARAMS; p++) {
        free(allowed[p]);
        free(choices[p]);
    }
    return st;
}

mt_status mt_gen_enumerate_each(mt_gen *g, const mt_gen_filter *f,
                                int (*cb)(const mt_variant *v, void *ctx), void *ctx,
                                mt_prune_report *report)
{
    if (!g || !f || !cb)
        return MT_ERR_INVALID_ARG;
    mt_prune_report local;
    mt_prune_report *rep = report ? report : &local;
    memset(rep, 0, sizeof *rep);
    const gen_target *tg = gen_target_find(f->arch);
    char known[MT_GEN_ARCH_NAMES_SIZE];
    if (!tg)
        return gen_set_err(g, MT_ERR_UNSUPPORTED, "unknown arch '%s' (known: %s)",
                           f->arch ? f->arch : "(null)", mt_gen_arch_names(known, sizeof known));
    if (f->nparams < 0 || f->nparams > MT_GEN_MAX_FILTERS)
        return gen_set_err(g, MT_ERR_INVALID_ARG, "%d filters (at most %d)", f->nparams,
                           MT_GEN_MAX_FILTERS);
    sink out = {.cb = cb, .ctx = ctx};
    mt_status st = MT_OK;
    if (f->family) {
        gen_template *t = gen_find_template(g, f->family);
        if (!t)
            return gen_set_err(g, MT_ERR_NOT_FOUND, "no template family '%s'", f->family);
        st = enum_family(g, t, f, tg, 1, 0, &out, rep);
    } else {
        /* Every filter must mean something to some family: checked before
         * the walk, so that no variant is handed out under a filter that is
         * then refused. */
        for (int i = 0; i < f->nparams; i++) {
            int declared = 0, in_domain = 0;
            for (size_t k = 0; k < g->ntemplates; k++) {
                const gen_template *t = &g->templates[k];
                int p = f->params[i].name ? gen_template_param_index(t, f->params[i].name) : -1;
                declared |= p >= 0;
                in_domain |= p >= 0 && f->params[i].value &&
                             gen_template_value_index(t, p, f->params[i].value) >= 0;
            }
            if (!declared)
                return gen_set_err(g, MT_ERR_INVALID_ARG, "filter on parameter '%s': no "
                                   "template declares it", f->params[i].name ? f->params[i].name
                                                                             : "(null)");
            if (!in_domain)
                return gen_set_err(g, MT_ERR_INVALID_ARG, "filter %s=%s: no template has that "
                                   "value in the parameter's domain", f->params[i].name,
                                   f->params[i].value ? f->params[i].value : "(null)");
        }
        for (size_t i = 0; i < g->ntemplates && !st; i++)
            st = enum_family(g, &g->templates[i], f, tg, 0, 1, &out, rep);
        for (size_t i = 0; i < g->ntemplates && !st && !out.stopped; i++)
            st = enum_family(g, &g->templates[i], f, tg, 0, 0, &out, rep);
    }
    return st;
}

mt_status mt_gen_enumerate(mt_gen *g, const mt_gen_filter *f, mt_variant **out, size_t *count,
                           mt_prune_report *report)
{
    if (!g || !f || !out || !count)
        return MT_ERR_INVALID_ARG;
    *out = NULL;
    *count = 0;
    out_list list = {0};
    mt_status st = mt_gen_enumerate_each(g, f, out_push, &list, report);
    if (!st && list.oom)
        st = gen_set_err(g, MT_ERR_NO_MEMORY, "out of memory");
    if (st) {
        free(list.v);
        return st;
    }
    *out = list.v;
    *count = list.n;
    return MT_OK;
}

mt_status mt_gen_find(mt_gen *g, const char *name, const char *arch, mt_variant *out)
{
    if (!g || !name || !out)
        return MT_ERR_INVALID_ARG;
    const gen_target *tg = gen_target_find(arch);
    if (!tg)
        return gen_set_err(g, MT_ERR_NOT_FOUND, "no valid variant named %s for %s: unknown arch",
                           name, arch ? arch : "(null)");
    /* The name is decoded, not searched for: walking a family's space to
     * compare names took seconds per name (grouped_gemm has 1.35 million
     * points). Family names may begin one another (grouped_gemm,
     * grouped_gemm_sm90): every template gets its try. */
    char reason[128] = "";
    for (size_t i = 0; i < g->ntemplates; i++) {
        gen_template *t = &g->templates[i];
        int point[MT_VARIANT_MAX_PARAMS], ok = 1;
        if (!gen_template_decode_name(t, name, point))
            continue;
        char msg[2048];
        mt_status st = point_variant(t, point, tg, 0, &ok, reason, sizeof reason, out, msg,
                                     sizeof msg);
        if (st)
            return gen_set_err(g, st, "%s (variant %s)", msg, name);
        if (ok && strcmp(out->name, name) == 0)
            return MT_OK;
    }
    return gen_set_err(g, MT_ERR_NOT_FOUND, "no valid variant named %s for %s%s%s", name, arch,
                       reason[0] ? ": " : "", reason);
}

mt_status gen_locate(mt_gen *g, const mt_variant *v, gen_template **t, int *point)
{
    *t = gen_find_template(g, v->family);
    if (!*t)
        return gen_set_err(g, MT_ERR_NOT_FOUND, "no template family '%s' (variant %s)",
                           v->family, v->name);
    if (v->template_version != (*t)->version)
        return gen_set_err(g, MT_ERR_INCOMPATIBLE, "variant %s was made by version %d of "
                           "template %s; the loaded one (%s) is version %d", v->name,
                           v->template_version, (*t)->family, (*t)->path, (*t)->version);
    char msg[2048];
    mt_variant check;
    mt_status st = gen_template_point(*t, v, point, msg, sizeof msg);
    if (!st)
        st = gen_template_variant(*t, point, v->arch, &check, msg, sizeof msg);
    if (!st && strcmp(check.name, v->name) != 0)
        st = mt_errf(msg, sizeof msg, MT_ERR_INCOMPATIBLE, "variant name %s does not match its "
                     "parameters (%s)", v->name, check.name);
    return st ? gen_set_err(g, st, "%s", msg) : MT_OK;
}

mt_status mt_gen_resolve(mt_gen *g, const mt_variant *v, mt_variant *out)
{
    if (!g || !v || !out)
        return MT_ERR_INVALID_ARG;
    const gen_target *tg = gen_target_find(v->arch);
    if (!tg)
        return gen_set_err(g, MT_ERR_UNSUPPORTED, "variant %s: unknown arch '%s'", v->name,
                           v->arch);
    gen_template *t = NULL;
    int point[MT_VARIANT_MAX_PARAMS];
    mt_status st = gen_locate(g, v, &t, point);
    if (st)
        return st;
    char msg[2048], reason[128];
    int ok = 1;
    st = point_variant(t, point, tg, 0, &ok, reason, sizeof reason, out, msg, sizeof msg);
    if (st)
        return gen_set_err(g, st, "%s (variant %s)", msg, v->name);
    if (!ok)
        return gen_set_err(g, MT_ERR_NOT_FOUND, "variant %s is not valid for %s under template "
                           "%s (%s): %s", v->name, v->arch, t->family, t->path, reason);
    return MT_OK;
}

/*
 * Kernel lookup: tuned database entries (this SKU, then the same compute
 * capability) and the built-in defaults. Pure CPU: no GPU, no driver, so
 * that the CPU tests can check the order against databases they make.
 *
 * May call: db, common, the generated defaults (runtime/rt_defaults.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_defaults.h"
#include "common/defaults.h"
#include "runtime/rt_internal.h"

const char *mt_template_hash(void) { return mt_rt_templates_hash; }

/* The embedded variant texts, parsed once. */
static mt_variant *default_vars;
static mt_status default_status = MT_OK;
static char default_msg[256];
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

static void parse_defaults(void)
{
    default_vars = calloc(mt_rt_default_variant_count + 1, sizeof *default_vars);
    if (!default_vars) {
        default_status = MT_ERR_NO_MEMORY;
        return;
    }
    for (size_t i = 0; i < mt_rt_default_variant_count; i++) {
        char msg[200];
        if (mt_variant_parse(mt_rt_default_variants[i].text, &default_vars[i], msg, sizeof msg)) {
            default_status = MT_ERR_INTERNAL;
            snprintf(default_msg, sizeof default_msg, "built-in default %zu: %s", i, msg);
            return;
        }
    }
}

static mt_status defaults_ready(char *msg, size_t msg_size)
{
    pthread_once(&default_once, parse_defaults);
    if (default_status)
        return mt_errf(msg, msg_size, default_status, "%s",
                       default_msg[0] ? default_msg : "out of memory");
    return MT_OK;
}

const char *mt_rt_default_family_hash(const char *family)
{
    for (size_t i = 0; i < mt_rt_default_family_count; i++)
        if (!strcmp(mt_rt_default_families[i].family, family))
            return mt_rt_default_families[i].template_hash;
    return NULL;
}

mt_status mt_rt_default_find(const char *family, const char *const *kv, int npairs,
                             mt_variant *out, char *msg, size_t msg_size)
{
    mt_status st = defaults_ready(msg, msg_size);
    if (st)
        return st;
    for (size_t i = 0; i < mt_rt_default_variant_count; i++) {
        const mt_variant *v = &default_vars[i];
        if (strcmp(v->family, family))
            continue;
        int ok = 1;
        for (int j = 0; j < npairs && ok; j++) {
            const char *have = mt_variant_get(v, kv[2 * j]);
            ok = have && !strcmp(have, kv[2 * j + 1]);
        }
        if (ok) {
            *out = *v;
            return MT_OK;
        }
    }
    mt_buf want = {0};
    for (int j = 0; j < npairs; j++)
        mt_buf_printf(&want, "%s%s=%s", j ? "," : "", kv[2 * j], kv[2 * j + 1]);
    st = mt_errf(msg, msg_size, MT_ERR_NOT_FOUND, "no built-in default %s kernel with %s", family,
                 want.data ? want.data : "");
    mt_buf_free(&want);
    return st;
}

mt_status mt_rt_default_get(const char *name, mt_variant *v, char **source, char *msg,
                            size_t msg_size)
{
    mt_status st = defaults_ready(msg, msg_size);
    if (st)
        return st;
    for (size_t i = 0; i < mt_rt_default_variant_count; i++) {
        if (strcmp(default_vars[i].name, name))
            continue;
        const mt_rt_default_variant *d = &mt_rt_default_variants[i];
        const char *const pieces[4] = {mt_rt_default_families[d->family].source_prefix, d->source_head,
                                       mt_rt_default_parts[d->part], d->source_suffix};
        mt_buf b = {0};
        for (int k = 0; k < 4; k++)
            mt_buf_puts(&b, pieces[k]);
        if (b.oom || !b.data) {
            mt_buf_free(&b);
            return mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
        }
        char *s = b.data;
        *v = default_vars[i];
        *source = s;
        return MT_OK;
    }
    return mt_errf(msg, msg_size, MT_ERR_NOT_FOUND, "%s is not a built-in default kernel", name);
}

int mt_rt_default_block_m(const mt_problem *p, int64_t M)
{
    mt_problem at = *p;
    at.M = M;
    return (int)mt_default_block_m(&at);
}

static mt_status add_step(mt_db_pipeline *pl, const char *role, const char *name)
{
    if (pl->nsteps >= MT_DB_MAX_STEPS)
        return MT_ERR_UNSUPPORTED;
    mt_db_step *s = &pl->steps[pl->nsteps++];
    mt_strlcpy(s->role, role, sizeof s->role);
    mt_strlcpy(s->kernel, name, sizeof s->kernel);
    return MT_OK;
}

mt_status mt_rt_default_pipeline(const mt_problem *p, int64_t M, const char *arch,
                                 mt_db_pipeline *out, char *msg, size_t msg_size)
{
    memset(out, 0, sizeof *out);
    mt_strlcpy(out->backend, "default", sizeof out->backend);
    mt_strlcpy(out->arch, arch, sizeof out->arch);
    mt_problem at = *p;
    at.M = M;
    mt_default_gemm dg;
    mt_default_gemm_for(&at, arch, &dg);
    const char *dt = mt_dtype_name(p->dtype), *fmt = mt_act_format_name(p->format);
    const char *g1[10 + MT_ARRAY_LEN(dg.kv)] = {"dtype", dt, "quant", mt_quant_mode_name(p->quant.mode),
                                                "format", fmt, "epilogue", mt_activation_name(p->activation),
                                                "BLOCK_M", dg.block_m};
    memcpy(&g1[10], dg.kv, sizeof dg.kv);
    const int ng1 = 5 + dg.nkv;
    const char *red[] = {"dtype", dt};
    mt_variant al, k1, k2, rd;
    mt_status st;
    const int standard = p->format == MT_FORMAT_STANDARD;
    if (standard && (st = mt_rt_default_find("moe_align", NULL, 0, &al, msg, msg_size)))
        return st;
    if ((st = mt_rt_default_find(dg.family, g1, ng1, &k1, msg, msg_size)))
        return st;
    g1[7] = "store";
    if ((st = mt_rt_default_find(dg.family, g1, ng1, &k2, msg, msg_size)) ||
        (st = mt_rt_default_find("moe_reduce", red, 1, &rd, msg, msg_size)))
        return st;
    mt_variant aq;   /* w8a8: act_quant quantizes both GEMM inputs (gemm1 fuses the act) */
    const int w8a8 = mt_quant_is_w8a8(p->quant.mode);
    if (w8a8) {
        static const char *const gran[] = {"none", "tensor", "token", "block", "group"};
        const char *kv[] = {"dtype", dt, "qtype",
                            mt_quant_act_dtype(p->quant.mode) == MT_DTYPE_FP8_E4M3 ? "fp8" : "int8",
                            "gran", gran[mt_quant_granularity(p->quant.mode)], "act", "none"};
        if ((st = mt_rt_default_find("act_quant", kv, 4, &aq, msg, msg_size)))
            return st;
    }
    if ((standard && (st = add_step(out, "align", al.name))) ||
        (w8a8 && (st = add_step(out, "quant", aq.name))) ||
        (st = add_step(out, "gemm1", k1.name)) ||
        (w8a8 && (st = add_step(out, "act", aq.name))) ||
        (st = add_step(out, "gemm2", k2.name)) || (st = add_step(out, "reduce", rd.name)))
        return mt_errf(msg, msg_size, MT_ERR_UNSUPPORTED,
                       "the default pipeline for %s in the %s format needs more than the %d "
                       "steps a pipeline holds (MT_DB_MAX_STEPS)",
                       mt_quant_mode_name(p->quant.mode), fmt, MT_DB_MAX_STEPS);
    return MT_OK;
}

/* How far a tuned entry reaches: the entry tuned at Mt serves M in
 * [Mt / MT_RT_REACH, Mt * MT_RT_REACH]. Farther away the tile that won at
 * Mt is a guess, worse than the built-in rule, which picks the tile by
 * rows per expert (H200: Qwen3-30B-A3B fp8 at M = 4096 on the M = 128
 * entry's 16-row tiles took 2571 us, on the defaults 1148 us;
 * docs/PERFORMANCE.md, session 4). */
#define MT_RT_REACH 4

static int within_reach(int64_t Mt, int64_t M)
{
    /* M is a validated token count; Mt comes from a file and is not
     * multiplied (a damaged entry's huge M would overflow). */
    return (M + MT_RT_REACH - 1) / MT_RT_REACH <= Mt && M * MT_RT_REACH >= Mt;
}

/* One lookup step over the databases in order; MT_ERR_NOT_FOUND when none
 * has an entry within reach of M. */
static mt_status try_dbs(mt_db *const *dbs, int ndbs, const mt_db_key *key, const char *cc,
                         int64_t M, mt_db_entry *e, int *exact, mt_db **from, char *msg,
                         size_t msg_size)
{
    for (int i = 0; i < ndbs; i++) {
        if (!dbs[i])
            continue;
        mt_status st = cc ? mt_db_lookup_cc(dbs[i], key, cc, M, e, exact)
                          : mt_db_lookup(dbs[i], key, M, e, exact);
        if (st == MT_OK && !within_reach(e->M, M))
            continue;
        if (st == MT_OK) {
            *from = dbs[i];
            return MT_OK;
        }
        if (st != MT_ERR_NOT_FOUND)
            return mt_errf(msg, msg_size, st, "%s", mt_db_errmsg(dbs[i]));
    }
    return MT_ERR_NOT_FOUND;
}

/* Were the kernels of pipeline pl, as db stores them, generated from the
 * templates this library has (per family)? Then the entry is current even
 * when it was tuned under other templates of other families (its
 * provenance's template hash covers them all). 0 when one is not stored. */
static int kernels_current(mt_db *db, const mt_db_pipeline *pl)
{
    for (int i = 0; i < pl->nsteps && i < MT_DB_MAX_STEPS; i++) {
        char family[48], hash[65];
        if (!strcmp(pl->steps[i].kernel, MT_DB_LIBRARY_KERNEL))
            continue;
        if (mt_db_kernel_origin(db, pl->steps[i].kernel, pl->arch, family, hash) != MT_OK)
            return 0;
        const char *built_in = mt_rt_default_family_hash(family);
        if (!built_in || strcmp(built_in, hash))
            return 0;
    }
    return 1;
}

mt_status mt_rt_lookup(mt_db *const *dbs, int ndbs, const mt_rt_machine *m, const mt_problem *p,
                       int64_t M, int no_defaults, mt_rt_choice *out, char *msg, size_t msg_size)
{
    memset(out, 0, sizeof *out);
    out->info.bucket_m = M;
    mt_db_key key;
    mt_status st = mt_db_key_from_problem(p, m->sku, NULL, &key);
    if (st)
        return mt_errf(msg, msg_size, st, "no database key for this problem on %s", m->sku);
    mt_db_entry e;
    int exact = 0;
    mt_db *from = NULL;
    st = try_dbs(dbs, ndbs, &key, NULL, M, &e, &exact, &from, msg, msg_size);
    if (st == MT_ERR_NOT_FOUND && m->cc[0]) {
        st = try_dbs(dbs, ndbs, &key, m->cc, M, &e, &exact, &from, msg, msg_size);
        out->info.source = MT_LOOKUP_SAME_CC;
    }
    if (st == MT_OK) {
        out->pipeline = e.pipeline;
        out->db = from;
        out->info.tuned_m = e.M;
        out->info.exact = exact;
        mt_strlcpy(out->info.db_path, mt_db_path(from), sizeof out->info.db_path);
        mt_strlcpy(out->info.sku, e.key.sku, sizeof out->info.sku);
        mt_db_pipeline_format(&e.pipeline, out->info.pipeline, sizeof out->info.pipeline);
        mt_db_provenance stored = e.prov;
        if (strcmp(stored.template_hash, m->prov.template_hash) && kernels_current(from, &e.pipeline))
            mt_strlcpy(stored.template_hash, m->prov.template_hash, sizeof stored.template_hash);
        mt_db_provenance_mismatch(&stored, &m->prov, out->info.provenance_diff,
                                  sizeof out->info.provenance_diff);
        return MT_OK;
    }
    if (st != MT_ERR_NOT_FOUND)
        return st;
    if (no_defaults) {
        char k[512] = "";
        mt_db_key_format(&key, k, sizeof k);
        return mt_errf(msg, msg_size, MT_ERR_NOT_FOUND,
                       "no tuned entry for %s (cc %s) %s at M=%lld in %d database(s), and the "
                       "built-in defaults are off",
                       m->sku, m->cc, k, (long long)M, ndbs);
    }
    out->info.source = MT_LOOKUP_DEFAULTS;
    if ((st = mt_rt_default_pipeline(p, M, m->arch, &out->pipeline, msg, msg_size)))
        return st;
    mt_db_pipeline_format(&out->pipeline, out->info.pipeline, sizeof out->info.pipeline);
    return MT_OK;
}

const char *mt_lookup_source_name(mt_lookup_source s)
{
    static const char *const names[] = {"tuned", "same-cc", "defaults", "library"};
    return (unsigned)s < MT_ARRAY_LEN(names) ? names[s] : "?";
}

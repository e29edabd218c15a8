/*
 * Growing kernel sets (see kernel_set.h).
 */
#include "tuner/kernel_set.h"

#include <stdlib.h>
#include <string.h>

#include "common/util.h"

const mt_kernel *mt_kernel_set_find(const mt_kernel_set *set, const char *name)
{
    for (size_t i = 0; i < set->n; i++)
        if (!strcmp(set->k[i].v.name, name))
            return &set->k[i];
    return NULL;
}

const mt_kernel *mt_kernel_set_find_sibling(const mt_kernel_set *set, const mt_variant *like,
                                            const char *param, const char *value)
{
    for (size_t i = 0; i < set->n; i++)
        if (mt_variant_same_but(&set->k[i].v, like, param, value))
            return &set->k[i];
    return NULL;
}

const mt_kernel *mt_kernel_set_find_unchained(const mt_kernel_set *set, const mt_variant *chained)
{
    const mt_kernel *twin = mt_kernel_set_find_sibling(set, chained, "CHAIN", "0");
    if (twin || mt_variant_int(chained, "SM_WARPS", 0) == 0)
        return twin;
    const mt_kernel *uncapped = mt_kernel_set_find_sibling(set, chained, "SM_WARPS", "0");
    return uncapped ? mt_kernel_set_find_sibling(set, &uncapped->v, "CHAIN", "0") : NULL;
}

mt_status mt_kernel_set_add(mt_kernel_set *set, mt_gen *g, const mt_variant *v, size_t n,
                            char *msg, size_t msg_size)
{
    mt_variant *todo = malloc((n ? n : 1) * sizeof *todo);
    size_t m = 0;
    mt_kernel_binary *bins = NULL;
    mt_status st = MT_OK;
    if (!todo)
        return mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
    for (size_t i = 0; i < n; i++) {
        int dup = mt_kernel_set_find(set, v[i].name) != NULL;
        for (size_t j = 0; j < m && !dup; j++)
            dup = !strcmp(todo[j].name, v[i].name);
        if (!dup)
            todo[m++] = v[i];
    }
    if (m == 0)
        goto done;
    st = mt_gen_compile(g, todo, m, &bins);
    if (st) {
        for (size_t i = 0; i < m; i++)
            if (bins && bins[i].status) {
                mt_errf(msg, msg_size, st, "compiling %s: %.600s", bins[i].variant.name,
                        bins[i].log ? bins[i].log : mt_gen_errmsg(g));
                break;
            }
        goto done;
    }
    mt_kernel *k = realloc(set->k, (set->n + m) * sizeof *k);
    if (!k) {
        st = mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    set->k = k;
    for (size_t i = 0; i < m; i++) {
        if ((st = mt_kernel_load(&set->k[set->n], &bins[i].variant, bins[i].image, msg,
                                 msg_size)))
            goto done;
        set->n++;
    }
done:
    mt_kernel_binaries_free(bins, m);
    free(todo);
    return st;
}

mt_status mt_kernel_record(mt_gen *g, const mt_variant *v, mt_db_kernel *out, char *msg,
                           size_t msg_size)
{
    mt_kernel_binary *bin = NULL;
    memset(out, 0, sizeof *out);
    mt_status st = mt_gen_compile(g, v, 1, &bin);
    if (st) {
        mt_errf(msg, msg_size, st, "compiling %s: %s", v->name, bin && bin->log ? bin->log : "");
        mt_kernel_binaries_free(bin, 1);
        return st;
    }
    out->variant = bin->variant;
    out->source = bin->source;
    out->source_len = bin->source_len;
    out->image = bin->image;
    out->image_len = bin->image_len;
    out->is_ptx = bin->is_ptx;
    bin->source = NULL;
    bin->image = NULL;
    st = mt_gen_template_hash(g, v->family, out->template_hash);
    mt_kernel_binaries_free(bin, 1);
    if (st)
        mt_errf(msg, msg_size, st, "%s", mt_gen_errmsg(g));
    return st;
}

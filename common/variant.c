/*
 * Plain-C kernel variant descriptions (see moetune/variant.h).
 */
#include "moetune/variant.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

const char *mt_variant_get(const mt_variant *v, const char *name)
{
    for (int i = 0; i < v->nparams; i++)
        if (strcmp(v->params[i].name, name) == 0)
            return v->params[i].value;
    return NULL;
}

mt_status mt_variant_get_int(const mt_variant *v, const char *name, int64_t *out)
{
    const char *s = mt_variant_get(v, name);
    if (!s)
        return MT_ERR_NOT_FOUND;
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno || end == s || *end)
        return MT_ERR_INVALID_ARG;
    *out = x;
    return MT_OK;
}

int64_t mt_variant_int(const mt_variant *v, const char *name, int64_t dflt)
{
    int64_t x;
    return mt_variant_get_int(v, name, &x) == MT_OK ? x : dflt;
}

const char *const mt_gemm_families[] = {"grouped_gemm", "grouped_gemm_sm90", "grouped_gemv", NULL};

int mt_variant_is_gemm(const mt_variant *v)
{
    for (int i = 0; mt_gemm_families[i]; i++)
        if (strcmp(v->family, mt_gemm_families[i]) == 0)
            return 1;
    return 0;
}

int mt_variant_quantizes_a(const mt_variant *v)
{
    const char *aq = mt_variant_get(v, "AQUANT");
    return aq && strcmp(aq, "step") != 0;
}

const char *mt_variant_a_activation(const mt_variant *v)
{
    const char *aq = mt_variant_get(v, "AQUANT");
    return aq && strcmp(aq, "step") && strcmp(aq, "cta") ? aq : NULL;
}

int mt_variant_quantizes_out(const mt_variant *v)
{
    const char *oq = mt_variant_get(v, "OQUANT");
    return oq && !strcmp(oq, "last");
}

int64_t mt_variant_chain(const mt_variant *v) { return mt_variant_int(v, "CHAIN", 0); }

int mt_variant_is_chain_gemm2(const mt_variant *u, const mt_variant *g1)
{
    static const char *const free_params[] = {"epilogue", "BLOCK_N", "AQUANT", "OQUANT", "CHAIN", "SM_WARPS", NULL};
    const char *epi = mt_variant_get(u, "epilogue"), *aq = mt_variant_get(u, "AQUANT"),
               *oq = mt_variant_get(u, "OQUANT");
    return mt_variant_chain(g1) > 0 && !strcmp(u->arch, g1->arch) && epi && !strcmp(epi, "lastsum") &&
           mt_variant_int(u, "BLOCK_N", 0) == mt_variant_chain(g1) && mt_variant_chain(u) == 0 &&
           mt_variant_int(u, "SM_WARPS", 0) == 0 &&
           (!aq || !strcmp(aq, "step")) && (!oq || !strcmp(oq, "step")) &&
           mt_variant_differs_only_among(u, g1, free_params);
}

int mt_variant_sums_topk(const mt_variant *v)
{
    const char *epi = mt_variant_get(v, "epilogue");
    return epi && (!strcmp(epi, "sum") || !strcmp(epi, "lastsum"));
}

int mt_variant_is_gemm2_epilogue(const mt_variant *v)
{
    const char *epi = mt_variant_get(v, "epilogue");
    return epi && (!strcmp(epi, "store") || mt_variant_sums_topk(v));
}

static int fits(const char *s, size_t cap) { return s && strlen(s) < cap; }

mt_status mt_variant_add(mt_variant *v, const char *name, const char *value)
{
    if (v->nparams >= MT_VARIANT_MAX_PARAMS || !fits(name, sizeof v->params[0].name) ||
        !fits(value, sizeof v->params[0].value) || !*name || mt_variant_get(v, name))
        return MT_ERR_INVALID_ARG;
    if (strpbrk(name, ";=") || strpbrk(value, ";="))
        return MT_ERR_INVALID_ARG;
    mt_strlcpy(v->params[v->nparams].name, name, sizeof v->params[0].name);
    mt_strlcpy(v->params[v->nparams].value, value, sizeof v->params[0].value);
    v->nparams++;
    return MT_OK;
}

mt_status mt_variant_make_name(mt_variant *v, const char *const *abbrevs)
{
    return mt_variant_make_name_omitting(v, abbrevs, NULL);
}

mt_status mt_variant_make_name_omitting(mt_variant *v, const char *const *abbrevs,
                                        const char *const *omit)
{
    char name[MT_VARIANT_NAME_MAX];
    int n = snprintf(name, sizeof name, "mtk_%s", v->family);
    for (int i = 0; i < v->nparams && n > 0 && (size_t)n < sizeof name; i++) {
        if (omit && omit[i] && !strcmp(omit[i], v->params[i].value))
            continue;
        const char *ab = abbrevs && abbrevs[i] ? abbrevs[i] : "";
        n += snprintf(name + n, sizeof name - (size_t)n, "_%s", ab);
        for (const char *c = v->params[i].value; *c && (size_t)n < sizeof name - 1; c++) {
            int ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9');
            name[n++] = ok ? *c : 'x';
        }
        name[n < (int)sizeof name ? n : (int)sizeof name - 1] = '\0';
    }
    if (n <= 0 || (size_t)n >= sizeof name - 1)
        return MT_ERR_INVALID_ARG;
    for (const char *c = v->family; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_'))
            return MT_ERR_INVALID_ARG;
    mt_strlcpy(v->name, name, sizeof v->name);
    return MT_OK;
}

mt_status mt_variant_format(const mt_variant *v, char *out, size_t size)
{
    mt_buf b = {0};
    mt_buf_printf(&b, "family=%s;arch=%s;version=%d;threads=%d;smem=%d;name=%s", v->family,
                  v->arch, v->template_version, v->threads, v->smem_bytes, v->name);
    for (int i = 0; i < v->nparams; i++)
        mt_buf_printf(&b, ";p.%s=%s", v->params[i].name, v->params[i].value);
    mt_status st = MT_OK;
    if (b.oom || b.len >= size)
        st = MT_ERR_INVALID_ARG;
    else
        memcpy(out, b.data, b.len + 1);
    mt_buf_free(&b);
    return st;
}

static mt_status parse_int_field(const char *val, int *out)
{
    char *end;
    errno = 0;
    long x = strtol(val, &end, 10);
    if (errno || end == val || *end || x < 0 || x > 1 << 30)
        return MT_ERR_INVALID_ARG;
    *out = (int)x;
    return MT_OK;
}

mt_status mt_variant_parse(const char *text, mt_variant *v, char *msg, size_t msg_size)
{
    if (!v)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "no variant to parse into");
    memset(v, 0, sizeof *v);
    if (!text)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "no variant text given");
    size_t len = strlen(text);
    char *copy = malloc(len + 1);
    if (!copy)
        return mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
    memcpy(copy, text, len + 1);
    mt_status st = MT_OK;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq) {
            st = mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "variant field '%s' has no '='", tok);
            break;
        }
        *eq = '\0';
        const char *key = tok, *val = eq + 1;
        if (strncmp(key, "p.", 2) == 0)
            st = mt_variant_add(v, key + 2, val);
        else if ((strcmp(key, "family") == 0 && v->family[0]) ||
                 (strcmp(key, "arch") == 0 && v->arch[0]) ||
                 (strcmp(key, "name") == 0 && v->name[0]))
            st = MT_ERR_INVALID_ARG;   /* given twice (RELIABILITY.md R3) */
        else if (strcmp(key, "family") == 0)
            st = fits(val, sizeof v->family) ? (mt_strlcpy(v->family, val, sizeof v->family), MT_OK)
                                             : MT_ERR_INVALID_ARG;
        else if (strcmp(key, "arch") == 0)
            st = fits(val, sizeof v->arch) ? (mt_strlcpy(v->arch, val, sizeof v->arch), MT_OK)
                                           : MT_ERR_INVALID_ARG;
        else if (strcmp(key, "name") == 0)
            st = fits(val, sizeof v->name) ? (mt_strlcpy(v->name, val, sizeof v->name), MT_OK)
                                           : MT_ERR_INVALID_ARG;
        else if (strcmp(key, "version") == 0)
            st = parse_int_field(val, &v->template_version);
        else if (strcmp(key, "threads") == 0)
            st = parse_int_field(val, &v->threads);
        else if (strcmp(key, "smem") == 0)
            st = parse_int_field(val, &v->smem_bytes);
        else
            st = MT_ERR_INVALID_ARG;
        if (st) {
            mt_errf(msg, msg_size, st, "bad variant field '%s' = '%s'", key, val);
            break;
        }
    }
    if (!st && (!v->family[0] || !v->name[0]))
        st = mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "variant text lacks family or name");
    free(copy);
    return st;
}

int mt_variant_differs_only_among(const mt_variant *v, const mt_variant *like, const char *const *free_params)
{
    if (strcmp(v->family, like->family) || v->nparams != like->nparams)
        return 0;
    for (int i = 0; i < v->nparams; i++) {
        const char *name = like->params[i].name;
        if (strcmp(v->params[i].name, name))
            return 0;
        int free_param = 0;
        for (int f = 0; free_params[f] && !free_param; f++)
            free_param = !strcmp(name, free_params[f]);
        if (!free_param && strcmp(v->params[i].value, like->params[i].value))
            return 0;
    }
    return 1;
}

int mt_variant_differs_only_in(const mt_variant *v, const mt_variant *like, const char *p1,
                               const char *p2)
{
    const char *const free_params[] = {p1, p2, NULL};
    return mt_variant_differs_only_among(v, like, free_params);
}

int mt_variant_same_but(const mt_variant *v, const mt_variant *like, const char *param,
                        const char *value)
{
    const char *has = mt_variant_get(v, param);
    return !strcmp(v->arch, like->arch) && mt_variant_differs_only_in(v, like, param, NULL) &&
           (!has || !strcmp(has, value));
}

/*
 * Problem keys, pipelines and provenance as values: text forms, parsing,
 * and their mapping to rows (problem_key ids, provenance columns).
 */
#include "db/db_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const roles[] = {"align", "quant", "gemm1", "act", "gemm2", "reduce"};
static const char *const backends[] = {"moetune", "cublas", "default"};


mt_status mt_db_key_from_problem(const mt_problem *p, const char *sku, const char *routing,
                                 mt_db_key *out)
{
    if (!p || !sku || !out || strlen(sku) >= sizeof out->sku)
        return MT_ERR_INVALID_ARG;
    memset(out, 0, sizeof *out);
    if (mt_routing_parse(routing ? routing : "uniform", &out->routing))
        return MT_ERR_INVALID_ARG;
    mt_strlcpy(out->sku, sku, sizeof out->sku);
    out->E = p->E;
    out->topk = p->topk;
    out->K = p->K;
    out->N = p->N;
    out->dtype = p->dtype;
    out->quant = p->quant.mode;
    out->group_size = p->quant.group_size;
    out->has_zero_point = p->quant.has_zero_point;
    out->format = p->format;
    out->activation = p->activation;
    out->has_expert_map = p->has_expert_map;
    out->apply_router_weight_on_input = p->apply_router_weight_on_input;
    return MT_OK;
}

mt_status mt_db_key_format(const mt_db_key *k, char *out, size_t size)
{
    int n = snprintf(out, size,
                     "E=%lld,topk=%lld,K=%lld,N=%lld,dtype=%s,quant=%s,group=%d,zp=%d,"
                     "format=%s,act=%s,expert_map=%d,rw_on_input=%d,routing=%s",
                     (long long)k->E, (long long)k->topk, (long long)k->K, (long long)k->N,
                     mt_dtype_name(k->dtype), mt_quant_mode_name(k->quant), k->group_size,
                     k->has_zero_point, mt_act_format_name(k->format),
                     mt_activation_name(k->activation), k->has_expert_map,
                     k->apply_router_weight_on_input, mt_routing_name(k->routing));
    return n > 0 && (size_t)n < size ? MT_OK : MT_ERR_INVALID_ARG;
}

static int parse_i64(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno || end == s || *end)
        return 0;
    *out = x;
    return 1;
}

mt_status mt_db_key_parse(const char *text, const char *sku, mt_db_key *out, char *msg,
                          size_t msg_size)
{
    static const char *const fields[] = {"E", "topk", "K", "N", "dtype", "quant", "group", "zp",
                                         "format", "act", "expert_map", "rw_on_input", "routing"};
    memset(out, 0, sizeof *out);
    if (!text)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "no key text");
    if (sku && strlen(sku) >= sizeof out->sku)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "SKU name too long");
    mt_strlcpy(out->sku, sku ? sku : "", sizeof out->sku);
    char *copy = strdup(text);
    if (!copy)
        return mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
    unsigned seen = 0;
    mt_status st = MT_OK;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok && !st; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        size_t f = MT_ARRAY_LEN(fields);
        if (eq) {
            *eq = '\0';
            for (f = 0; f < MT_ARRAY_LEN(fields) && strcmp(fields[f], tok) != 0; f++)
                ;
        }
        if (f == MT_ARRAY_LEN(fields) || (seen & (1u << f))) {
            st = mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "bad or repeated key field '%s'", tok);
            break;
        }
        seen |= 1u << f;
        const char *v = eq + 1;
        int64_t x = 0;
        int ok = 1;
        switch (f) {
        case 0: ok = parse_i64(v, &out->E); break;
        case 1: ok = parse_i64(v, &out->topk); break;
        case 2: ok = parse_i64(v, &out->K); break;
        case 3: ok = parse_i64(v, &out->N); break;
        case 4: ok = mt_dtype_parse(v, &out->dtype) == MT_OK; break;
        case 5: ok = mt_quant_mode_parse(v, &out->quant) == MT_OK; break;
        case 6: ok = parse_i64(v, &x) && x >= 0 && x < 1 << 20; out->group_size = (int)x; break;
        case 7: ok = parse_i64(v, &x) && (x == 0 || x == 1); out->has_zero_point = (int)x; break;
        case 8: ok = mt_act_format_parse(v, &out->format) == MT_OK; break;
        case 9: ok = mt_activation_parse(v, &out->activation) == MT_OK; break;
        case 10: ok = parse_i64(v, &x) && (x == 0 || x == 1); out->has_expert_map = (int)x; break;
        case 11:
            ok = parse_i64(v, &x) && (x == 0 || x == 1);
            out->apply_router_weight_on_input = (int)x;
            break;
        default: ok = mt_routing_parse(v, &out->routing) == MT_OK; break;
        }
        if (!ok)
            st = mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "bad value '%s' of key field '%s'", v,
                         fields[f]);
    }
    if (!st && seen != (1u << MT_ARRAY_LEN(fields)) - 1)
        st = mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "key text '%s' lacks fields", text);
    free(copy);
    return st;
}

static int index_of(const char *const *names, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], s) == 0)
            return (int)i;
    return -1;
}

mt_status mt_db_pipeline_format(const mt_db_pipeline *p, char *out, size_t size)
{
    mt_buf b = {0};
    mt_buf_printf(&b, "backend=%s;arch=%s", p->backend, p->arch);
    for (int i = 0; i < p->nsteps && i < MT_DB_MAX_STEPS; i++)
        mt_buf_printf(&b, ";%s=%s", p->steps[i].role, p->steps[i].kernel);
    if (p->launch_late)
        mt_buf_printf(&b, ";launch=late");
    mt_status st = b.oom ? MT_ERR_NO_MEMORY : b.len >= size ? MT_ERR_INVALID_ARG : MT_OK;
    if (!st)
        memcpy(out, b.data, b.len + 1);
    mt_buf_free(&b);
    return st;
}

mt_status mt_db_pipeline_parse(const char *text, mt_db_pipeline *out, char *msg, size_t msg_size)
{
    memset(out, 0, sizeof *out);
    if (!text)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "no pipeline text");
    char *copy = strdup(text);
    if (!copy)
        return mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
    mt_status st = MT_OK;
    int last_role = -1, launch_seen = 0;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ";", &save); tok && !st; tok = strtok_r(NULL, ";", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq || eq[1] == '\0') {
            st = mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "pipeline field '%s' lacks a value", tok);
            break;
        }
        *eq = '\0';
        const char *v = eq + 1;
        int r;
        if (strcmp(tok, "backend") == 0) {
            if (out->backend[0] || index_of(backends, MT_ARRAY_LEN(backends), v) < 0)
                st = mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "bad pipeline backend '%s'", v);
            else
                mt_strlcpy(out->backend, v, sizeof out->backend);
        } else if (strcmp(tok, "arch") == 0) {
            if (out->arch[0] || strlen(v) >= sizeof out->arch)
                st = mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "bad pipeline arch '%s'", v);
            else
                mt_strlcpy(out->arch, v, sizeof out->arch);
        } else if (strcmp(tok, "launch") == 0) {
            if (launch_seen++ || (strcmp(v, "early") && strcmp(v, "late")))
                st = mt_errf(msg, msg_size, MT_ERR_INVALID_ARG,
                             "bad pipeline launch '%s' (once, early or late)", v);
            else
                out->launch_late = !strcmp(v, "late");
        } else if ((r = index_of(roles, MT_ARRAY_LEN(roles), tok)) >= 0) {
            if (r <= last_role || out->nsteps >= MT_DB_MAX_STEPS ||
                strlen(v) >= sizeof out->steps[0].kernel)
                st = mt_errf(msg, msg_size, MT_ERR_INVALID_ARG,
                             "pipeline step '%s' repeated, out of order or too long", tok);
            else {
                mt_strlcpy(out->steps[out->nsteps].role, tok, sizeof out->steps[0].role);
                mt_strlcpy(out->steps[out->nsteps].kernel, v, sizeof out->steps[0].kernel);
                out->nsteps++;
                last_role = r;
            }
        } else
            st = mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "unknown pipeline field '%s'", tok);
    }
    if (!st && !out->backend[0])
        st = mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "pipeline '%s' has no backend", text);
    /* Found by fuzzing (RELIABILITY.md R1): a pipeline without an arch or
     * without its two GEMMs would not format back to parseable text. */
    if (!st && !out->arch[0])
        st = mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "pipeline '%s' has no arch", text);
    if (!st && strcmp(out->backend, "cublas") != 0 &&
        (!mt_db_pipeline_kernel(out, "gemm1") || !mt_db_pipeline_kernel(out, "gemm2")))
        st = mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "pipeline '%s' lacks gemm1 or gemm2",
                     text);
    free(copy);
    return st;
}

const char *mt_db_pipeline_kernel(const mt_db_pipeline *p, const char *role)
{
    for (int i = 0; i < p->nsteps && i < MT_DB_MAX_STEPS; i++)
        if (strcmp(p->steps[i].role, role) == 0)
            return p->steps[i].kernel;
    return NULL;
}

int mt_db_provenance_mismatch(const mt_db_provenance *stored, const mt_db_provenance *current,
                              char *msg, size_t msg_size)
{
    struct { const char *name, *a, *b; } f[] = {
        {"template_hash", stored->template_hash, current->template_hash},
        {"nvrtc_version", stored->nvrtc_version, current->nvrtc_version},
        {"driver_version", stored->driver_version, current->driver_version},
        {"cuda_version", stored->cuda_version, current->cuda_version},
        {"moetune_version", stored->moetune_version, current->moetune_version},
    };
    mt_buf b = {0};
    int n = 0;
    for (size_t i = 0; i < MT_ARRAY_LEN(f); i++)
        if (strcmp(f[i].a, f[i].b) != 0) {
            mt_buf_printf(&b, "%s%s", n ? "," : "", f[i].name);
            n++;
        }
    mt_strlcpy(msg, b.data ? b.data : "", msg_size);
    mt_buf_free(&b);
    return n;
}

void mt_db_vllm_device_name(const char *sku, char *out, size_t size)
{
    mt_strlcpy(out, sku, size);
    for (char *c = out; *c; c++)
        if (*c == ' ')
            *c = '_';
}

void mt_db_shipped_name(const char *sku, char *out, size_t size)
{
    if (!size)
        return;
    size_t n = 0;
    const size_t room = size > 3 ? size - 3 : 0;   /* ".db" and the NUL */
    for (const char *c = sku; *c && n + 1 < room; c++) {
        const char lower = *c >= 'A' && *c <= 'Z' ? (char)(*c - 'A' + 'a') : *c;
        if ((lower >= 'a' && lower <= 'z') || (lower >= '0' && lower <= '9'))
            out[n++] = lower;
        else if (n > 0 && out[n - 1] != '-')
            out[n++] = '-';
    }
    while (n > 0 && out[n - 1] == '-')
        n--;
    out[n] = '\0';
    if (size > 3)
        mt_strlcpy(out + n, ".db", size - n);
}

void mt_db_vllm_selector(const mt_db_key *k, char *out, size_t size)
{
    const char *dt = "";
    switch (k->quant) {
    case MT_QUANT_FP8_PER_TENSOR:
    case MT_QUANT_FP8_PER_TOKEN:
    case MT_QUANT_FP8_BLOCK:
        dt = "fp8_w8a8";
        break;
    case MT_QUANT_INT8_PER_TENSOR:
    case MT_QUANT_INT8_PER_TOKEN:
    case MT_QUANT_INT8_BLOCK:
        dt = "int8_w8a8";
        break;
    case MT_QUANT_W8A16:
        dt = "int8_w8a16";
        break;
    case MT_QUANT_W4A16:
        dt = "int4_w4a16";
        break;
    default:
        break;
    }
    int block = k->quant == MT_QUANT_FP8_BLOCK || k->quant == MT_QUANT_INT8_BLOCK;
    if (!*dt)
        mt_strlcpy(out, "", size);
    else
        snprintf(out, size, "dtype=%s%s", dt, block ? ",block_shape=[128,128]" : "");
}

/* ---- rows ---- */

static int bind_key(sqlite3_stmt *s, int i, const mt_db_key *k)
{
    int rc = SQLITE_OK;
    rc |= sqlite3_bind_int64(s, i + 0, k->E);
    rc |= sqlite3_bind_int64(s, i + 1, k->topk);
    rc |= sqlite3_bind_int64(s, i + 2, k->K);
    rc |= sqlite3_bind_int64(s, i + 3, k->N);
    rc |= mt_db__bind_text(s, i + 4, mt_dtype_name(k->dtype));
    rc |= mt_db__bind_text(s, i + 5, mt_quant_mode_name(k->quant));
    rc |= sqlite3_bind_int(s, i + 6, k->group_size);
    rc |= sqlite3_bind_int(s, i + 7, k->has_zero_point);
    rc |= mt_db__bind_text(s, i + 8, mt_act_format_name(k->format));
    rc |= mt_db__bind_text(s, i + 9, mt_activation_name(k->activation));
    rc |= sqlite3_bind_int(s, i + 10, k->has_expert_map);
    rc |= sqlite3_bind_int(s, i + 11, k->apply_router_weight_on_input);
    rc |= mt_db__bind_text(s, i + 12, mt_routing_name(k->routing));
    return rc ? SQLITE_ERROR : SQLITE_OK;
}

mt_status mt_db__key_check(const mt_db_key *k, char *msg, size_t msg_size)
{
    mt_problem p;
    mt_problem_init(&p, 1, k->E, k->topk, k->K, k->N);
    p.dtype = k->dtype;
    p.quant.mode = k->quant;
    p.quant.group_size = k->group_size;
    p.quant.has_zero_point = k->has_zero_point;
    p.format = k->format;
    p.activation = k->activation;
    p.has_expert_map = k->has_expert_map;
    p.apply_router_weight_on_input = k->apply_router_weight_on_input;
    p.max_tokens = 1;
    return mt_problem_validate(&p, msg, msg_size);
}

mt_status mt_db__key_id(mt_db *db, const mt_db_key *k, int create, int64_t *id)
{
    static const char *const find =
        "SELECT id FROM problem_key WHERE E = ? AND topk = ? AND K = ? AND N = ? AND dtype = ? "
        "AND quant = ? AND group_size = ? AND has_zero_point = ? AND act_format = ? "
        "AND activation = ? AND has_expert_map = ? AND router_on_input = ? AND routing = ?";
    static const char *const insert =
        "INSERT INTO problem_key (E, topk, K, N, dtype, quant, group_size, has_zero_point, "
        "act_format, activation, has_expert_map, router_on_input, routing) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
    *id = 0;
    sqlite3_stmt *s = NULL;
    mt_status st = mt_db__prepare(db, find, &s);
    if (st)
        return st;
    DB_CHECK(db, bind_key(s, 1, k), "bind key");
    int rc = sqlite3_step(s);
    DB_CHECK(db, rc, "find problem key");
    if (rc == SQLITE_ROW) {
        *id = sqlite3_column_int64(s, 0);
    } else if (create) {
        char why[256], text[512];
        if (mt_db__key_check(k, why, sizeof why) != MT_OK) {
            if (mt_db_key_format(k, text, sizeof text) != MT_OK)
                mt_strlcpy(text, "(unprintable)", sizeof text);
            st = mt_db__fail(db, MT_ERR_INVALID_ARG, "problem key %s: %s", text, why);
            goto fail;
        }
        sqlite3_finalize(s);
        st = mt_db__prepare(db, insert, &s);
        if (st)
            return st;
        DB_CHECK(db, bind_key(s, 1, k), "bind key");
        DB_CHECK(db, sqlite3_step(s), "insert problem key");
        *id = sqlite3_last_insert_rowid(db->h);
    }
fail:
    sqlite3_finalize(s);
    return st;
}

mt_status mt_db__read_key(mt_db *db, sqlite3_stmt *s, int col, mt_db_key *k)
{
    char sku[MT_DB_SKU_MAX];
    mt_strlcpy(sku, k->sku, sizeof sku);
    memset(k, 0, sizeof *k);
    mt_strlcpy(k->sku, sku, sizeof k->sku);
    k->E = sqlite3_column_int64(s, col + 0);
    k->topk = sqlite3_column_int64(s, col + 1);
    k->K = sqlite3_column_int64(s, col + 2);
    k->N = sqlite3_column_int64(s, col + 3);
    k->group_size = sqlite3_column_int(s, col + 6);
    k->has_zero_point = sqlite3_column_int(s, col + 7);
    k->has_expert_map = sqlite3_column_int(s, col + 10);
    k->apply_router_weight_on_input = sqlite3_column_int(s, col + 11);
    const char *dt = (const char *)sqlite3_column_text(s, col + 4);
    const char *qm = (const char *)sqlite3_column_text(s, col + 5);
    const char *fm = (const char *)sqlite3_column_text(s, col + 8);
    const char *ac = (const char *)sqlite3_column_text(s, col + 9);
    const char *ro = (const char *)sqlite3_column_text(s, col + 12);
    if (!dt || !qm || !fm || !ac || !ro || mt_dtype_parse(dt, &k->dtype) ||
        mt_quant_mode_parse(qm, &k->quant) || mt_act_format_parse(fm, &k->format) ||
        mt_activation_parse(ac, &k->activation) || mt_routing_parse(ro, &k->routing))
        return mt_db__fail(db, MT_ERR_DB, "a problem_key row has an unknown name (%s/%s/%s/%s/%s)",
                           dt ? dt : "?", qm ? qm : "?", fm ? fm : "?", ac ? ac : "?",
                           ro ? ro : "?");
    return MT_OK;
}

void mt_db__read_prov(sqlite3_stmt *s, int col, mt_db_provenance *p)
{
    memset(p, 0, sizeof *p);
    p->id = sqlite3_column_int64(s, col + 0);
    mt_db__col_text(s, col + 1, p->sku, sizeof p->sku);
    mt_db__col_text(s, col + 2, p->cc, sizeof p->cc);
    p->sm_count = sqlite3_column_int(s, col + 3);
    p->mem_clock_khz = sqlite3_column_int64(s, col + 4);
    mt_db__col_text(s, col + 5, p->driver_version, sizeof p->driver_version);
    mt_db__col_text(s, col + 6, p->cuda_version, sizeof p->cuda_version);
    mt_db__col_text(s, col + 7, p->nvrtc_version, sizeof p->nvrtc_version);
    mt_db__col_text(s, col + 8, p->moetune_version, sizeof p->moetune_version);
    mt_db__col_text(s, col + 9, p->template_hash, sizeof p->template_hash);
    p->created = sqlite3_column_int64(s, col + 10);
}

/*
 * Rows other than entries: provenance, kernels (with their hashes), the
 * tuner's candidate log and vLLM reference configs.
 */
#include "db/db_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

mt_status mt_db_put_provenance(mt_db *db, const mt_db_provenance *p, int64_t *id)
{
    static const char *const find =
        "SELECT id FROM provenance WHERE sku = ?1 AND cc = ?2 AND sm_count = ?3 AND "
        "mem_clock_khz = ?4 AND driver_version = ?5 AND cuda_version = ?6 AND "
        "nvrtc_version = ?7 AND moetune_version = ?8 AND template_hash = ?9";
    static const char *const insert =
        "INSERT INTO provenance (sku, cc, sm_count, mem_clock_khz, driver_version, "
        "cuda_version, nvrtc_version, moetune_version, template_hash, created) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";
    if (!db || !p || !id)
        return db ? mt_db__fail(db, MT_ERR_INVALID_ARG, "put_provenance: NULL argument")
                  : MT_ERR_INVALID_ARG;
    *id = 0;
    if (!p->sku[0] || !p->cc[0])
        return mt_db__fail(db, MT_ERR_INVALID_ARG, "provenance needs a SKU and a compute capability");
    mt_status st = mt_db__begin(db);
    if (st)
        return st;
    sqlite3_stmt *s = NULL;
    for (int pass = 0; pass < 2 && !st && *id == 0; pass++) {
        st = mt_db__prepare(db, pass ? insert : find, &s);
        if (st)
            break;
        mt_db__bind_text(s, 1, p->sku);
        mt_db__bind_text(s, 2, p->cc);
        sqlite3_bind_int(s, 3, p->sm_count);
        sqlite3_bind_int64(s, 4, p->mem_clock_khz);
        mt_db__bind_text(s, 5, p->driver_version);
        mt_db__bind_text(s, 6, p->cuda_version);
        mt_db__bind_text(s, 7, p->nvrtc_version);
        mt_db__bind_text(s, 8, p->moetune_version);
        mt_db__bind_text(s, 9, p->template_hash);
        if (pass)
            sqlite3_bind_int64(s, 10, p->created ? p->created : (int64_t)time(NULL));
        int rc = sqlite3_step(s);
        DB_CHECK(db, rc, pass ? "insert provenance" : "find provenance");
        if (pass)
            *id = sqlite3_last_insert_rowid(db->h);
        else if (rc == SQLITE_ROW)
            *id = sqlite3_column_int64(s, 0);
        sqlite3_finalize(s);
        s = NULL;
    }
fail:
    sqlite3_finalize(s);
    return mt_db__end(db, st);
}

/* ---- kernels ---- */

mt_status mt_db__check_kernel(mt_db *db, const mt_db_kernel *k)
{
    char hex[65];
    mt_sha256_hex(k->source ? k->source : "", k->source_len, hex);
    if (strcmp(hex, k->source_sha256) != 0)
        return mt_db__fail(db, MT_ERR_DB, "kernel %s (%s): source does not match its SHA-256 "
                           "(corrupt or edited)", k->variant.name, k->variant.arch);
    if (k->image_sha256[0] || k->image) {
        mt_sha256_hex(k->image ? k->image : "", k->image_len, hex);
        if (strcmp(hex, k->image_sha256) != 0)
            return mt_db__fail(db, MT_ERR_DB, "kernel %s (%s): image does not match its SHA-256 "
                               "(corrupt or edited)", k->variant.name, k->variant.arch);
    }
    return MT_OK;
}

mt_status mt_db_put_kernel(mt_db *db, const mt_db_kernel *k)
{
    static const char *const sql =
        "INSERT INTO kernel (name, arch, family, variant, source, source_sha256, image, "
        "image_sha256, is_ptx, template_hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) "
        "ON CONFLICT (name, arch) DO UPDATE SET family = excluded.family, "
        "variant = excluded.variant, source = excluded.source, "
        "source_sha256 = excluded.source_sha256, image = excluded.image, "
        "image_sha256 = excluded.image_sha256, is_ptx = excluded.is_ptx, "
        "template_hash = excluded.template_hash";
    if (!db || !k)
        return db ? mt_db__fail(db, MT_ERR_INVALID_ARG, "put_kernel: NULL argument")
                  : MT_ERR_INVALID_ARG;
    const mt_variant *v = &k->variant;
    if (!v->name[0] || !v->arch[0] || !v->family[0] || !k->source)
        return mt_db__fail(db, MT_ERR_INVALID_ARG,
                           "put_kernel: a kernel needs a name, arch, family and source");
    int has_image = k->image && k->image_len > 0;
    char src_hex[65], img_hex[65] = "";
    mt_sha256_hex(k->source, k->source_len, src_hex);
    if (has_image)
        mt_sha256_hex(k->image, k->image_len, img_hex);
    if (k->source_sha256[0] && strcmp(k->source_sha256, src_hex) != 0)
        return mt_db__fail(db, MT_ERR_MISMATCH, "kernel %s: source does not match the SHA-256 "
                           "given with it", v->name);
    if (k->image_sha256[0] && strcmp(k->image_sha256, img_hex) != 0)
        return mt_db__fail(db, MT_ERR_MISMATCH, "kernel %s: image does not match the SHA-256 "
                           "given with it", v->name);
    char text[4096];
    if (mt_variant_format(v, text, sizeof text) != MT_OK)
        return mt_db__fail(db, MT_ERR_INVALID_ARG, "kernel %s: variant text too long", v->name);
    mt_status st = mt_db__begin(db);
    if (st)
        return st;
    sqlite3_stmt *s = NULL;
    st = mt_db__prepare(db, sql, &s);
    if (st)
        goto fail;
    mt_db__bind_text(s, 1, v->name);
    mt_db__bind_text(s, 2, v->arch);
    mt_db__bind_text(s, 3, v->family);
    mt_db__bind_text(s, 4, text);
    sqlite3_bind_text(s, 5, k->source, (int)k->source_len, SQLITE_STATIC);
    mt_db__bind_text(s, 6, src_hex);
    if (has_image) {
        if (k->image_len > (size_t)0x7fffffff) {
            st = mt_db__fail(db, MT_ERR_INVALID_ARG, "kernel %s: image too large", v->name);
            goto fail;
        }
        sqlite3_bind_blob(s, 7, k->image, (int)k->image_len, SQLITE_STATIC);
        mt_db__bind_text(s, 8, img_hex);
    }
    sqlite3_bind_int(s, 9, k->is_ptx ? 1 : 0);
    mt_db__bind_text(s, 10, k->template_hash);
    DB_CHECK(db, sqlite3_step(s), "store kernel");
fail:
    sqlite3_finalize(s);
    return mt_db__end(db, st);
}

void mt_db_kernel_free(mt_db_kernel *k)
{
    if (!k)
        return;
    free(k->source);
    free(k->image);
    k->source = NULL;
    k->image = NULL;
    k->source_len = k->image_len = 0;
}

#define KERNEL_COLS "variant, source, source_sha256, image, image_sha256, is_ptx, template_hash, name, arch"

static mt_status read_kernel_row(mt_db *db, sqlite3_stmt *s, int with_image, mt_db_kernel *k)
{
    memset(k, 0, sizeof *k);
    char msg[256];
    const char *vt = (const char *)sqlite3_column_text(s, 0);
    if (!vt || mt_variant_parse(vt, &k->variant, msg, sizeof msg) != MT_OK) {
        char name[MT_VARIANT_NAME_MAX];
        mt_db__col_text(s, 7, name, sizeof name);
        return mt_db__fail(db, MT_ERR_DB, "kernel %s: stored variant text does not parse", name);
    }
    /* The row's key is the identity; the text is checked against it. */
    char name[MT_VARIANT_NAME_MAX], arch[16];
    mt_db__col_text(s, 7, name, sizeof name);
    mt_db__col_text(s, 8, arch, sizeof arch);
    if (strcmp(name, k->variant.name) != 0 || strcmp(arch, k->variant.arch) != 0)
        return mt_db__fail(db, MT_ERR_DB, "kernel %s (%s): variant text names %s (%s)", name, arch,
                           k->variant.name, k->variant.arch);
    const void *src = sqlite3_column_text(s, 1);
    size_t src_len = (size_t)sqlite3_column_bytes(s, 1);
    k->source = malloc(src_len + 1);
    if (!k->source)
        return mt_db__fail(db, MT_ERR_NO_MEMORY, "out of memory reading kernel %s", name);
    if (src_len)
        memcpy(k->source, src, src_len);
    k->source[src_len] = '\0';
    k->source_len = src_len;
    mt_db__col_text(s, 2, k->source_sha256, sizeof k->source_sha256);
    mt_db__col_text(s, 4, k->image_sha256, sizeof k->image_sha256);
    if (with_image && sqlite3_column_type(s, 3) != SQLITE_NULL) {
        const void *img = sqlite3_column_blob(s, 3);
        size_t n = (size_t)sqlite3_column_bytes(s, 3);
        k->image = malloc(n ? n : 1);
        if (!k->image) {
            mt_db_kernel_free(k);
            return mt_db__fail(db, MT_ERR_NO_MEMORY, "out of memory reading kernel %s", name);
        }
        if (n)
            memcpy(k->image, img, n);
        k->image_len = n;
    }
    k->is_ptx = sqlite3_column_int(s, 5);
    mt_db__col_text(s, 6, k->template_hash, sizeof k->template_hash);
    return MT_OK;
}

/* *s on the row of kernel (name, arch) with the columns `cols`; the caller
 * finalizes *s whatever the status. MT_ERR_NOT_FOUND when not stored. */
static mt_status find_kernel_row(mt_db *db, const char *cols, const char *name, const char *arch,
                                 sqlite3_stmt **s)
{
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT %s FROM kernel WHERE name = ? AND arch = ?", cols);
    *s = NULL;
    mt_status st = mt_db__prepare(db, sql, s);
    if (st)
        return st;
    mt_db__bind_text(*s, 1, name);
    mt_db__bind_text(*s, 2, arch);
    int rc = sqlite3_step(*s);
    DB_CHECK(db, rc, "read kernel");
    if (rc != SQLITE_ROW)
        st = mt_db__fail(db, MT_ERR_NOT_FOUND, "no kernel %s for %s", name, arch);
fail:
    return st;
}

mt_status mt_db_get_kernel(mt_db *db, const char *name, const char *arch, mt_db_kernel *out)
{
    if (!db || !name || !arch || !out)
        return db ? mt_db__fail(db, MT_ERR_INVALID_ARG, "get_kernel: NULL argument")
                  : MT_ERR_INVALID_ARG;
    memset(out, 0, sizeof *out);
    sqlite3_stmt *s = NULL;
    mt_status st = find_kernel_row(db, KERNEL_COLS, name, arch, &s);
    if (st)
        goto fail;
    st = read_kernel_row(db, s, 1, out);
    if (!st)
        st = mt_db__check_kernel(db, out);
    if (st)
        mt_db_kernel_free(out);
fail:
    sqlite3_finalize(s);
    return st;
}

mt_status mt_db_kernel_origin(mt_db *db, const char *name, const char *arch, char family[48],
                              char template_hash[65])
{
    if (!db || !name || !arch || !family || !template_hash)
        return db ? mt_db__fail(db, MT_ERR_INVALID_ARG, "kernel_origin: NULL argument")
                  : MT_ERR_INVALID_ARG;
    family[0] = template_hash[0] = '\0';
    sqlite3_stmt *s = NULL;
    mt_status st = find_kernel_row(db, "family, template_hash", name, arch, &s);
    if (!st) {
        mt_db__col_text(s, 0, family, 48);
        mt_db__col_text(s, 1, template_hash, 65);
    }
    sqlite3_finalize(s);
    return st;
}

mt_status mt_db_set_kernel_template_hash(mt_db *db, const char *name, const char *arch,
                                        const char *source_sha256, const char *template_hash)
{
    if (!db || !name || !arch || !source_sha256 || !template_hash || !template_hash[0])
        return db ? mt_db__fail(db, MT_ERR_INVALID_ARG, "set_kernel_template_hash: NULL argument")
                  : MT_ERR_INVALID_ARG;
    mt_status st = mt_db__begin(db);
    if (st)
        return st;
    sqlite3_stmt *s = NULL;
    st = mt_db__prepare(db, "UPDATE kernel SET template_hash = ?4 WHERE name = ?1 AND "
                            "arch = ?2 AND source_sha256 = ?3", &s);
    if (st)
        goto fail;
    mt_db__bind_text(s, 1, name);
    mt_db__bind_text(s, 2, arch);
    mt_db__bind_text(s, 3, source_sha256);
    mt_db__bind_text(s, 4, template_hash);
    DB_CHECK(db, sqlite3_step(s), "set kernel template hash");
    if (sqlite3_changes(db->h) == 0)
        st = mt_db__fail(db, MT_ERR_NOT_FOUND, "no kernel %s for %s with source %.12s", name,
                         arch, source_sha256);
fail:
    sqlite3_finalize(s);
    return mt_db__end(db, st);
}

mt_status mt_db_foreach_kernel(mt_db *db, int with_image,
                               int (*cb)(const mt_db_kernel *k, void *ctx), void *ctx)
{
    sqlite3_stmt *s = NULL;
    mt_status st = mt_db__prepare(db, "SELECT " KERNEL_COLS " FROM kernel ORDER BY arch, name", &s);
    if (st)
        return st;
    for (;;) {
        int rc = sqlite3_step(s);
        DB_CHECK(db, rc, "list kernels");
        if (rc != SQLITE_ROW)
            break;
        mt_db_kernel k;
        st = read_kernel_row(db, s, with_image, &k);
        if (st)
            goto fail;
        int stop = cb(&k, ctx);
        mt_db_kernel_free(&k);
        if (stop)
            break;
    }
fail:
    sqlite3_finalize(s);
    return st;
}

/* ---- candidates ---- */

static void bind_time(sqlite3_stmt *s, int i, double t)
{
    if (t < 0)
        sqlite3_bind_null(s, i);
    else
        sqlite3_bind_double(s, i, t);
}

mt_status mt_db_record_candidate(mt_db *db, const mt_db_candidate *c)
{
    static const char *const sql =
        "INSERT INTO candidate (sku, key_id, M, pipeline, status, time_us, rel_err, reason, "
        "recorded) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) "
        "ON CONFLICT (sku, key_id, M, pipeline) DO UPDATE SET status = excluded.status, "
        "time_us = excluded.time_us, rel_err = excluded.rel_err, reason = excluded.reason, "
        "recorded = excluded.recorded";
    if (!db || !c || !c->pipeline || !c->key.sku[0])
        return db ? mt_db__fail(db, MT_ERR_INVALID_ARG, "record_candidate: missing SKU or pipeline")
                  : MT_ERR_INVALID_ARG;
    if (c->M < 1 || c->M > MT_MAX_TOKENS || c->recorded < 0)
        return mt_db__fail(db, MT_ERR_INVALID_ARG, "candidate %s M=%lld: %s", c->key.sku,
                           (long long)c->M, c->recorded < 0 ? "recorded before 1970"
                                                            : "M outside [1, 2^20]");
    mt_status st = mt_db__begin(db);
    if (st)
        return st;
    sqlite3_stmt *s = NULL;
    int64_t key_id;
    st = mt_db__key_id(db, &c->key, 1, &key_id);
    if (!st)
        st = mt_db__prepare(db, sql, &s);
    if (st)
        goto fail;
    mt_db__bind_text(s, 1, c->key.sku);
    sqlite3_bind_int64(s, 2, key_id);
    sqlite3_bind_int64(s, 3, c->M);
    mt_db__bind_text(s, 4, c->pipeline);
    mt_db__bind_text(s, 5, c->ok ? "ok" : "rejected");
    bind_time(s, 6, c->time_us);
    bind_time(s, 7, c->rel_err);
    mt_db__bind_text(s, 8, c->reason ? c->reason : "");
    sqlite3_bind_int64(s, 9, c->recorded ? c->recorded : (int64_t)time(NULL));
    DB_CHECK(db, sqlite3_step(s), "record candidate");
fail:
    sqlite3_finalize(s);
    return mt_db__end(db, st);
}

mt_status mt_db_forget_candidates(mt_db *db, const mt_db_key *key, int64_t M, int *count)
{
    if (!db || !key || !key->sku[0])
        return db ? mt_db__fail(db, MT_ERR_INVALID_ARG, "forget_candidates: missing key or SKU")
                  : MT_ERR_INVALID_ARG;
    if (count)
        *count = 0;
    mt_status st = mt_db__begin(db);
    if (st)
        return st;
    int64_t key_id = 0;
    sqlite3_stmt *s = NULL;
    if ((st = mt_db__key_id(db, key, 0, &key_id)) || key_id == 0)
        goto fail;
    st = mt_db__prepare(db, "DELETE FROM candidate WHERE sku = ? AND key_id = ? AND M = ?", &s);
    if (st)
        goto fail;
    mt_db__bind_text(s, 1, key->sku);
    sqlite3_bind_int64(s, 2, key_id);
    sqlite3_bind_int64(s, 3, M);
    DB_CHECK(db, sqlite3_step(s), "forget candidates");
    if (count)
        *count = sqlite3_changes(db->h);
fail:
    sqlite3_finalize(s);
    return mt_db__end(db, st);
}

mt_status mt_db_candidate_seen(mt_db *db, const mt_db_key *key, int64_t M, const char *pipeline,
                               int *seen)
{
    if (!db || !key || !pipeline || !seen)
        return db ? mt_db__fail(db, MT_ERR_INVALID_ARG, "candidate_seen: NULL argument")
                  : MT_ERR_INVALID_ARG;
    *seen = 0;
    int64_t key_id;
    mt_status st = mt_db__key_id(db, key, 0, &key_id);
    if (st || key_id == 0)
        return st;
    sqlite3_stmt *s = NULL;
    st = mt_db__prepare(db, "SELECT 1 FROM candidate WHERE sku = ? AND key_id = ? AND M = ? "
                            "AND pipeline = ?", &s);
    if (st)
        return st;
    mt_db__bind_text(s, 1, key->sku);
    sqlite3_bind_int64(s, 2, key_id);
    sqlite3_bind_int64(s, 3, M);
    mt_db__bind_text(s, 4, pipeline);
    int rc = sqlite3_step(s);
    DB_CHECK(db, rc, "find candidate");
    *seen = rc == SQLITE_ROW;
fail:
    sqlite3_finalize(s);
    return st;
}

static double col_time(sqlite3_stmt *s, int i)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL ? MT_DB_NO_TIME : sqlite3_column_double(s, i);
}

mt_status mt_db_foreach_candidate(mt_db *db, int (*cb)(const mt_db_candidate *c, void *ctx),
                                  void *ctx)
{
    sqlite3_stmt *s = NULL;
    mt_status st = mt_db__prepare(db,
        "SELECT c.sku, c.M, c.pipeline, c.status, c.time_us, c.rel_err, c.reason, c.recorded, "
        MT_DB_KEY_COLS " FROM candidate c JOIN problem_key k ON k.id = c.key_id ORDER BY c.id", &s);
    if (st)
        return st;
    for (;;) {
        int rc = sqlite3_step(s);
        DB_CHECK(db, rc, "list candidates");
        if (rc != SQLITE_ROW)
            break;
        mt_db_candidate c;
        memset(&c, 0, sizeof c);
        mt_db__col_text(s, 0, c.key.sku, sizeof c.key.sku);
        st = mt_db__read_key(db, s, 8, &c.key);
        if (st)
            goto fail;
        c.M = sqlite3_column_int64(s, 1);
        c.pipeline = (const char *)sqlite3_column_text(s, 2);
        const char *status = (const char *)sqlite3_column_text(s, 3);
        c.ok = status && strcmp(status, "ok") == 0;
        c.time_us = col_time(s, 4);
        c.rel_err = col_time(s, 5);
        c.reason = (const char *)sqlite3_column_text(s, 6);
        c.recorded = sqlite3_column_int64(s, 7);
        if (!c.pipeline)
            c.pipeline = "";
        if (cb(&c, ctx))
            break;
    }
fail:
    sqlite3_finalize(s);
    return st;
}

/* ---- vLLM reference configs ---- */

mt_status mt_db_put_vllm_config(mt_db *db, const mt_db_vllm_config *c)
{
    static const char *const sql =
        "INSERT INTO reference_config (device, E, N, selector, M, block_m, block_n, block_k, "
        "group_m, num_warps, num_stages) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) "
        "ON CONFLICT (device, E, N, selector, M) DO UPDATE SET block_m = excluded.block_m, "
        "block_n = excluded.block_n, block_k = excluded.block_k, group_m = excluded.group_m, "
        "num_warps = excluded.num_warps, num_stages = excluded.num_stages";
    if (!db || !c || !c->device[0])
        return db ? mt_db__fail(db, MT_ERR_INVALID_ARG, "put_vllm_config: no device")
                  : MT_ERR_INVALID_ARG;
    if (c->E < 1 || c->N < 1 || c->M < 1)
        return mt_db__fail(db, MT_ERR_INVALID_ARG, "reference config %s E=%lld N=%lld M=%lld: "
                           "E, N and M must be at least 1", c->device, (long long)c->E,
                           (long long)c->N, (long long)c->M);
    mt_status st = mt_db__begin(db);
    if (st)
        return st;
    sqlite3_stmt *s = NULL;
    st = mt_db__prepare(db, sql, &s);
    if (st)
        goto fail;
    mt_db__bind_text(s, 1, c->device);
    sqlite3_bind_int64(s, 2, c->E);
    sqlite3_bind_int64(s, 3, c->N);
    mt_db__bind_text(s, 4, c->selector);
    sqlite3_bind_int64(s, 5, c->M);
    const int vals[] = {c->block_m, c->block_n, c->block_k, c->group_m, c->num_warps, c->num_stages};
    for (int i = 0; i < 6; i++)
        sqlite3_bind_int(s, 6 + i, vals[i]);
    DB_CHECK(db, sqlite3_step(s), "store reference config");
fail:
    sqlite3_finalize(s);
    return mt_db__end(db, st);
}

mt_status mt_db_foreach_vllm_config(mt_db *db, const char *device, int64_t E, int64_t N,
                                    int (*cb)(const mt_db_vllm_config *c, void *ctx), void *ctx)
{
    sqlite3_stmt *s = NULL;
    mt_status st = mt_db__prepare(db,
        "SELECT device, E, N, selector, M, block_m, block_n, block_k, group_m, num_warps, num_stages "
        "FROM reference_config WHERE (?1 IS NULL OR device = ?1) AND (?2 = 0 OR E = ?2) "
        "AND (?3 = 0 OR N = ?3) ORDER BY device, E, N, selector, M", &s);
    if (st)
        return st;
    mt_db__bind_text(s, 1, device);
    sqlite3_bind_int64(s, 2, E);
    sqlite3_bind_int64(s, 3, N);
    for (;;) {
        int rc = sqlite3_step(s);
        DB_CHECK(db, rc, "list reference configs");
        if (rc != SQLITE_ROW)
            break;
        mt_db_vllm_config c;
        memset(&c, 0, sizeof c);
        mt_db__col_text(s, 0, c.device, sizeof c.device);
        c.E = sqlite3_column_int64(s, 1);
        c.N = sqlite3_column_int64(s, 2);
        mt_db__col_text(s, 3, c.selector, sizeof c.selector);
        c.M = sqlite3_column_int64(s, 4);
        int *vals[] = {&c.block_m, &c.block_n, &c.block_k, &c.group_m, &c.num_warps, &c.num_stages};
        for (int i = 0; i < 6; i++)
            *vals[i] = sqlite3_column_int(s, 5 + i);
        if (cb(&c, ctx))
            break;
    }
fail:
    sqlite3_finalize(s);
    return st;
}

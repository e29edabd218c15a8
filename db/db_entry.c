/*
 * Entries: offering a result (faster wins, or newer in a merge by
 * MT_DB_MERGE_NEWER; every offer kept in the history), the nearest-M
 * lookups and iteration.
 */
#include "db/db_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define ENTRY_COLS                                                                       \
    "e.sku, e.M, e.pipeline, e.time_us, e.default_time_us, e.cublas_time_us, e.rel_err, " \
    "e.recorded, " MT_DB_KEY_COLS ", " MT_DB_PROV_COLS
#define ENTRY_KEY_COL 8
#define ENTRY_PROV_COL (ENTRY_KEY_COL + MT_DB_KEY_NCOLS)
#define ENTRY_JOINS                                                                      \
    " e JOIN problem_key k ON k.id = e.key_id JOIN provenance p ON p.id = e.provenance_id"

static mt_status read_entry(mt_db *db, sqlite3_stmt *s, mt_db_entry *e)
{
    memset(e, 0, sizeof *e);
    mt_db__col_text(s, 0, e->key.sku, sizeof e->key.sku);
    mt_status st = mt_db__read_key(db, s, ENTRY_KEY_COL, &e->key);
    if (st)
        return st;
    e->M = sqlite3_column_int64(s, 1);
    char msg[256];
    const char *pt = (const char *)sqlite3_column_text(s, 2);
    if (mt_db_pipeline_parse(pt, &e->pipeline, msg, sizeof msg) != MT_OK)
        return mt_db__fail(db, MT_ERR_DB, "entry %s M=%lld: stored pipeline is bad: %s",
                           e->key.sku, (long long)e->M, msg);
    e->time_us = sqlite3_column_double(s, 3);
    e->default_time_us = sqlite3_column_double(s, 4);
    e->cublas_time_us = sqlite3_column_type(s, 5) == SQLITE_NULL ? MT_DB_NO_TIME
                                                                 : sqlite3_column_double(s, 5);
    e->rel_err = sqlite3_column_double(s, 6);
    e->recorded = sqlite3_column_int64(s, 7);
    mt_db__read_prov(s, ENTRY_PROV_COL, &e->prov);
    return MT_OK;
}

/* Bind the value columns (?1 sku .. ?10 recorded) shared by entry and
 * history inserts. */
static void bind_values(sqlite3_stmt *s, const mt_db_entry *e, int64_t key_id, int64_t prov_id,
                        const char *pipeline)
{
    mt_db__bind_text(s, 1, e->key.sku);
    sqlite3_bind_int64(s, 2, key_id);
    sqlite3_bind_int64(s, 3, e->M);
    mt_db__bind_text(s, 4, pipeline);
    sqlite3_bind_double(s, 5, e->time_us);
    sqlite3_bind_double(s, 6, e->default_time_us);
    if (e->cublas_time_us < 0)
        sqlite3_bind_null(s, 7);
    else
        sqlite3_bind_double(s, 7, e->cublas_time_us);
    sqlite3_bind_double(s, 8, e->rel_err);
    sqlite3_bind_int64(s, 9, prov_id);
    sqlite3_bind_int64(s, 10, e->recorded ? e->recorded : (int64_t)time(NULL));
}

#define VALUE_COLS "sku, key_id, M, pipeline, time_us, default_time_us, cublas_time_us, " \
                   "rel_err, provenance_id, recorded"
#define VALUE_PARAMS "?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10"

static mt_status exec_values(mt_db *db, const char *sql, const mt_db_entry *e, int64_t key_id,
                             int64_t prov_id, const char *what)
{
    char text[MT_DB_PIPELINE_TEXT_MAX], why[256];
    mt_db_pipeline back;
    if (mt_db_pipeline_format(&e->pipeline, text, sizeof text) != MT_OK)
        return mt_db__fail(db, MT_ERR_INVALID_ARG, "pipeline text too long");
    /* Only what reads back: an entry that mt_db_pipeline_parse refuses
     * would make every scan of the file fail (a pipeline without its
     * gemm2, say). */
    if (mt_db_pipeline_parse(text, &back, why, sizeof why) != MT_OK)
        return mt_db__fail(db, MT_ERR_INVALID_ARG, "entry %s M=%lld: %s", e->key.sku, (long long)e->M, why);
    sqlite3_stmt *s = NULL;
    mt_status st = mt_db__prepare(db, sql, &s);
    if (st)
        return st;
    bind_values(s, e, key_id, prov_id, text);
    DB_CHECK(db, sqlite3_step(s), what);
fail:
    sqlite3_finalize(s);
    return st;
}

static int ok_time(double t) { return isfinite(t) && t >= 0; }

/* What is wrong with a record of the entry table or its history, NULL when
 * nothing. The default may have failed its check: then it has no time. A
 * winner's own time was measured: above zero (one of 0 would win every
 * later comparison). A date ahead of this clock is taken as it comes (a
 * file from a machine whose clock runs ahead must still merge), though it
 * wins every later merge by MT_DB_MERGE_NEWER. */
static const char *entry_problem(const mt_db_entry *e)
{
    return !e->key.sku[0]                              ? "no SKU"
           : e->M < 1 || e->M > MT_MAX_TOKENS          ? "M outside [1, 2^20]"
           : !e->pipeline.backend[0]                   ? "no backend"
           : !(ok_time(e->time_us) && e->time_us > 0)  ? "time_us missing or not above 0"
           : !(ok_time(e->default_time_us) || e->default_time_us == MT_DB_NO_TIME)
               ? "default_time_us negative or not finite"
           : !ok_time(e->rel_err)                      ? "rel_err negative or not finite"
           : !isfinite(e->cublas_time_us)              ? "cublas_time_us not finite"
           : e->recorded < 0                           ? "recorded before 1970"
                                                       : NULL;
}

mt_status mt_db__put_history(mt_db *db, const mt_db_entry *e, int64_t key_id,
                             int64_t provenance_id)
{
    const char *bad = entry_problem(e);
    if (bad)
        return mt_db__fail(db, MT_ERR_INVALID_ARG, "history record %s M=%lld: %s", e->key.sku,
                           (long long)e->M, bad);
    return exec_values(db, "INSERT OR IGNORE INTO entry_history (" VALUE_COLS ") VALUES ("
                       VALUE_PARAMS ")", e, key_id, provenance_id, "record entry history");
}

mt_status mt_db__offer_entry(mt_db *db, const mt_db_entry *offer, int64_t provenance_id,
                             mt_db__put_rule rule, mt_db_put_outcome *outcome)
{
    if (!db || !offer)
        return db ? mt_db__fail(db, MT_ERR_INVALID_ARG, "put entry: NULL argument")
                  : MT_ERR_INVALID_ARG;
    /* One "now" for the history record, the comparison and the entry. */
    mt_db_entry dated = *offer;
    if (!dated.recorded)
        dated.recorded = (int64_t)time(NULL);
    const mt_db_entry *e = &dated;
    const char *bad = entry_problem(e);
    if (bad)
        return mt_db__fail(db, MT_ERR_INVALID_ARG, "entry %s M=%lld: %s", e->key.sku,
                           (long long)e->M, bad);
    mt_status st = mt_db__begin(db);
    if (st)
        return st;
    sqlite3_stmt *s = NULL;
    int64_t key_id;
    st = mt_db__key_id(db, &e->key, 1, &key_id);
    if (!st)
        st = mt_db__put_history(db, e, key_id, provenance_id);
    if (!st)
        st = mt_db__prepare(db, "SELECT time_us, recorded FROM entry WHERE sku = ? AND key_id = ? "
                            "AND M = ?", &s);
    if (st)
        goto fail;
    mt_db__bind_text(s, 1, e->key.sku);
    sqlite3_bind_int64(s, 2, key_id);
    sqlite3_bind_int64(s, 3, e->M);
    int rc = sqlite3_step(s);
    DB_CHECK(db, rc, "find entry");
    mt_db_put_outcome out = MT_DB_PUT_INSERTED;
    if (rc == SQLITE_ROW) {
        const int faster = e->time_us < sqlite3_column_double(s, 0);
        const int64_t stored = sqlite3_column_int64(s, 1);
        const int wins = rule == MT_DB__PUT_ALWAYS   ? 1
                         : rule == MT_DB__PUT_NEWER ? e->recorded > stored ||
                                                          (e->recorded == stored && faster)
                                                    : faster;
        out = wins ? MT_DB_PUT_REPLACED : MT_DB_PUT_KEPT;
    }
    if (out != MT_DB_PUT_KEPT)
        st = exec_values(db, "INSERT OR REPLACE INTO entry (" VALUE_COLS ") VALUES ("
                         VALUE_PARAMS ")", e, key_id, provenance_id, "store entry");
    if (!st && outcome)
        *outcome = out;
fail:
    sqlite3_finalize(s);
    return mt_db__end(db, st);
}

mt_status mt_db_put_entry(mt_db *db, const mt_db_entry *e, int64_t provenance_id,
                          mt_db_put_outcome *outcome)
{
    return mt_db__offer_entry(db, e, provenance_id, MT_DB__PUT_FASTER, outcome);
}

mt_status mt_db_replace_entry(mt_db *db, const mt_db_entry *e, int64_t provenance_id,
                              mt_db_put_outcome *outcome)
{
    return mt_db__offer_entry(db, e, provenance_id, MT_DB__PUT_ALWAYS, outcome);
}

/* Nearest-M rule in SQL: smallest |M - Mt|, then the larger Mt, then the
 * SKU name (only differs in the compute-capability lookup). */
static mt_status lookup(mt_db *db, const mt_db_key *key, const char *sku, const char *cc,
                        int64_t M, mt_db_entry *out, int *exact)
{
    if (!db || !key || !out)
        return db ? mt_db__fail(db, MT_ERR_INVALID_ARG, "lookup: NULL argument")
                  : MT_ERR_INVALID_ARG;
    if (exact)
        *exact = 0;
    char ktext[512];
    mt_db_key_format(key, ktext, sizeof ktext);
    int64_t key_id;
    mt_status st = mt_db__key_id(db, key, 0, &key_id);
    if (st)
        return st;
    if (key_id == 0)
        return mt_db__fail(db, MT_ERR_NOT_FOUND, "no entry for %s", ktext);
    sqlite3_stmt *s = NULL;
    st = mt_db__prepare(db, "SELECT " ENTRY_COLS " FROM entry" ENTRY_JOINS
                            " WHERE e.key_id = ?1 AND (?2 IS NULL OR e.sku = ?2) AND "
                            "(?3 IS NULL OR p.cc = ?3) "
                            "ORDER BY abs(e.M - ?4), e.M DESC, e.sku LIMIT 1", &s);
    if (st)
        return st;
    sqlite3_bind_int64(s, 1, key_id);
    mt_db__bind_text(s, 2, sku);
    mt_db__bind_text(s, 3, cc);
    sqlite3_bind_int64(s, 4, M);
    int rc = sqlite3_step(s);
    DB_CHECK(db, rc, "look up entry");
    if (rc != SQLITE_ROW) {
        st = mt_db__fail(db, MT_ERR_NOT_FOUND, "no entry for %s %s %s", sku ? "SKU" : "compute capability",
                         sku ? sku : cc, ktext);
        goto fail;
    }
    st = read_entry(db, s, out);
    if (!st && exact)
        *exact = out->M == M;
fail:
    sqlite3_finalize(s);
    return st;
}

mt_status mt_db_lookup(mt_db *db, const mt_db_key *key, int64_t M, mt_db_entry *out, int *exact)
{
    return lookup(db, key, key ? key->sku : NULL, NULL, M, out, exact);
}

mt_status mt_db_lookup_cc(mt_db *db, const mt_db_key *key, const char *cc, int64_t M,
                          mt_db_entry *out, int *exact)
{
    if (!cc)
        return db ? mt_db__fail(db, MT_ERR_INVALID_ARG, "lookup_cc: no compute capability")
                  : MT_ERR_INVALID_ARG;
    return lookup(db, key, NULL, cc, M, out, exact);
}

mt_status mt_db_foreach_entry(mt_db *db, const mt_db_filter *filter,
                              int (*cb)(const mt_db_entry *e, void *ctx), void *ctx)
{
    if (!db || !cb)
        return db ? mt_db__fail(db, MT_ERR_INVALID_ARG, "foreach_entry: NULL argument")
                  : MT_ERR_INVALID_ARG;
    mt_db_filter none = {0};
    if (!filter)
        filter = &none;
    char sql[1024];
    snprintf(sql, sizeof sql,
             "SELECT " ENTRY_COLS " FROM %s" ENTRY_JOINS
             " WHERE (?1 IS NULL OR e.sku = ?1) AND (?2 = 0 OR k.E = ?2) "
             "ORDER BY e.sku, k.E, k.topk, k.K, k.N, k.dtype, k.quant, k.group_size, "
             "k.has_zero_point, k.act_format, k.activation, k.has_expert_map, "
             "k.router_on_input, k.routing, e.M, e.recorded, e.id",
             filter->history ? "entry_history" : "entry");
    sqlite3_stmt *s = NULL;
    mt_status st = mt_db__prepare(db, sql, &s);
    if (st)
        return st;
    mt_db__bind_text(s, 1, filter->sku);
    sqlite3_bind_int64(s, 2, filter->E);
    for (;;) {
        int rc = sqlite3_step(s);
        DB_CHECK(db, rc, "list entries");
        if (rc != SQLITE_ROW)
            break;
        mt_db_entry e;
        st = read_entry(db, s, &e);
        if (st || cb(&e, ctx))
            break;
    }
fail:
    sqlite3_finalize(s);
    return st;
}

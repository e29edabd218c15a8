/*
 * Tuned-database fixtures for the CPU tests (see db_fixture.h).
 */
#include "db_fixture.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include <sqlite3.h>

#include "common/util.h"
#include "moetune/moetune.h"

void mt_fix_sql(const char *path, const char *sql)
{
    sqlite3 *h = NULL;
    if (sqlite3_open(path, &h) != SQLITE_OK)
        fail_msg("%s: %s", path, h ? sqlite3_errmsg(h) : "out of memory");
    char *err = NULL;
    if (sqlite3_exec(h, sql, NULL, NULL, &err) != SQLITE_OK)
        fail_msg("%s: %s: %s", path, sql, err);
    sqlite3_close(h);
}

void mt_fix_damage_index(const char *path)
{
    mt_fix_sql(path, "PRAGMA writable_schema = ON; "
                     "UPDATE sqlite_schema SET sql = 'CREATE INDEX entry_by_key ON entry "
                     "(key_id, time_us)' WHERE name = 'entry_by_key'");
}

mt_db *mt_fix_open_db(const char *path, int flags)
{
    mt_db *db = NULL;
    if (mt_db_open(path, flags, &db))
        fail_msg("%s", mt_db_errmsg(db));
    return db;
}

int64_t mt_fix_put_prov(mt_db *db, const char *sku, const char *cc, const char *hash)
{
    mt_db_provenance p;
    memset(&p, 0, sizeof p);
    mt_strlcpy(p.sku, sku, sizeof p.sku);
    mt_strlcpy(p.cc, cc, sizeof p.cc);
    mt_strlcpy(p.driver_version, "13.0", sizeof p.driver_version);
    mt_strlcpy(p.cuda_version, "13.0", sizeof p.cuda_version);
    mt_strlcpy(p.nvrtc_version, "13.0", sizeof p.nvrtc_version);
    mt_strlcpy(p.moetune_version, mt_version(), sizeof p.moetune_version);
    mt_strlcpy(p.template_hash, hash, sizeof p.template_hash);
    int64_t id = 0;
    if (mt_db_put_provenance(db, &p, &id))
        fail_msg("%s", mt_db_errmsg(db));
    return id;
}

void mt_fix_put_kernel(mt_db *db, const char *tag, const char *family, const char *hash)
{
    mt_db_kernel k;
    memset(&k, 0, sizeof k);
    snprintf(k.variant.name, sizeof k.variant.name, "mtk_%s", tag);
    mt_strlcpy(k.variant.arch, "sm_90a", sizeof k.variant.arch);
    mt_strlcpy(k.variant.family, family, sizeof k.variant.family);
    char src[sizeof k.variant.name + 64];
    snprintf(src, sizeof src, "extern \"C\" __global__ void %s() {}\n", k.variant.name);
    k.source = src;
    k.source_len = strlen(src);
    mt_strlcpy(k.template_hash, hash, sizeof k.template_hash);
    if (mt_db_put_kernel(db, &k))
        fail_msg("%s", mt_db_errmsg(db));
}

void mt_fix_put_entry(mt_db *db, const mt_problem *p, const char *sku, const char *cc, int64_t M,
                      const char *tag, const char *hash)
{
    mt_db_entry e;
    memset(&e, 0, sizeof e);
    assert_int_equal(mt_db_key_from_problem(p, sku, NULL, &e.key), MT_OK);
    e.M = M;
    char text[512], msg[256];
    snprintf(text, sizeof text,
             "backend=moetune;arch=sm_90a;align=mtk_a;gemm1=mtk_%s;gemm2=mtk_g2;reduce=mtk_r", tag);
    assert_int_equal(mt_db_pipeline_parse(text, &e.pipeline, msg, sizeof msg), MT_OK);
    e.time_us = 10;
    e.default_time_us = 20;
    e.cublas_time_us = MT_DB_NO_TIME;
    if (mt_db_put_entry(db, &e, mt_fix_put_prov(db, sku, cc, hash), NULL))
        fail_msg("%s", mt_db_errmsg(db));
}

/*
 * libFuzzer harness: arbitrary bytes as a database file. The bytes are
 * written to a scratch file and read through every reader of moetune/db.h
 * (fuzz_read_db: open read-only, verify, iterate, look up, fetch kernels);
 * then the same bytes are opened for writing (which may migrate an older
 * schema) and one entry is offered: it must be found again, unless
 * mt_db_verify reports the file damaged. Seed: the harnesses' database.
 * May call: moetune/db, fuzz_util.
 */
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "moetune/db.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_path("in.db");
    fuzz_rm_db(path);
    fuzz_write(path, data, size);
    fuzz_read_db(path);

    fuzz_rm_db(path);
    fuzz_write(path, data, size);
    mt_db *db = NULL;
    if (mt_db_open(path, 0, &db) == MT_OK) {
        mt_db_key k;
        fuzz_seed_key(&k);
        mt_db_entry e;
        memset(&e, 0, sizeof e);
        e.key = k;
        e.M = 3;
        if (mt_db_pipeline_parse("backend=cublas;arch=sm_90a;gemm1=cublas;gemm2=cublas",
                                 &e.pipeline, NULL, 0) == MT_OK) {
            e.time_us = 1.0;
            e.default_time_us = 2.0;
            e.cublas_time_us = 1.0;
            mt_db_provenance p;
            memset(&p, 0, sizeof p);
            memcpy(p.sku, k.sku, sizeof p.sku);
            memcpy(p.cc, "9.0", 4);
            int64_t id = 0;
            if (mt_db_put_provenance(db, &p, &id) == MT_OK) {
                mt_db_put_outcome out;
                /* What was just stored (not kept in favour of a faster
                 * row already there) is found again. */
                if (mt_db_put_entry(db, &e, id, &out) == MT_OK && out != MT_DB_PUT_KEPT) {
                    mt_db_entry got;
                    int exact = 0;
                    /* Only a damaged file (an index that disagrees with its
                     * table: the lookup fails, or answers another row) may
                     * lose it, and verify says so. */
                    if (mt_db_lookup(db, &k, 3, &got, &exact) != MT_OK || exact != 1 ||
                        got.M != 3) {
                        int problems = 0;
                        FUZZ_CHECK(mt_db_verify(db, NULL, NULL, &problems) != MT_OK &&
                                   problems > 0);
                    }
                }
            }
        }
    }
    mt_db_close(db);
    fuzz_rm_db(path);
    return 0;
}

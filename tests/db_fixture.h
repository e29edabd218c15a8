/*
 * Tuned-database fixtures shared by the CPU tests of lookup (test_runtime)
 * and of the bench's tuned column (test_bench): a provenance row, an entry
 * whose gemm1 name tells which one it is, and an open that fails the test;
 * and raw SQL for the tests that damage a file (test_db, test_tune).
 */
#ifndef MT_TESTS_DB_FIXTURE_H
#define MT_TESTS_DB_FIXTURE_H

#include <stdint.h>
#include "moetune/db.h"
#include "moetune/problem.h"

/* Run sql on the file at path straight through SQLite, past moetune/db.h
 * (to damage or age a database); fails the test on an SQL error. */
void mt_fix_sql(const char *path, const char *sql);
/* Damage the file at path as a bad page would: its index entry_by_key now
 * says it holds (key_id, time_us) while its rows hold (key_id, M), so it
 * disagrees with the entry table (PRAGMA integrity_check reports it) and a
 * lookup through it can miss a row. */
void mt_fix_damage_index(const char *path);

/* Open path with flags (MT_DB_CREATE, MT_DB_READONLY); fails the test on error. */
mt_db *mt_fix_open_db(const char *path, int flags);
/* A provenance row: sku, cc, driver/CUDA/NVRTC "13.0", this moetune and
 * template hash `hash`; returns its id. */
int64_t mt_fix_put_prov(mt_db *db, const char *sku, const char *cc, const char *hash);
/* A moetune entry for p at M on sku/cc: align mtk_a, gemm1 mtk_<tag>, gemm2
 * mtk_g2, reduce mtk_r; 10 us tuned, 20 us default, under that provenance. */
void mt_fix_put_entry(mt_db *db, const mt_problem *p, const char *sku, const char *cc, int64_t M,
                      const char *tag, const char *hash);

/* Kernel mtk_<tag> for sm_90a of family `family`, generated (so it says)
 * from that family's templates of hash `hash`; its source only. */
void mt_fix_put_kernel(mt_db *db, const char *tag, const char *family, const char *hash);

#endif

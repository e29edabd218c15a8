/*
 * libFuzzer harness: a valid database with hostile values. The seed
 * database (fuzz_build_db) is built once; each input is a list of edits
 * applied to a copy with raw SQLite, below the API: a column of a row (or
 * of every row) set to an integer (huge, negative), a real (NaN, inf), a
 * text or a blob of the input's bytes, or NULL; rows deleted; the
 * application id and schema version changed. Kernel images and sources
 * that no longer match their hashes, sizes, counts and names out of range
 * all arrive this way. The copy is then read through every reader
 * (fuzz_read_db), merged into a fresh database and exported to JSON and
 * imported back. The API must refuse or report, never crash, and never hand
 * out a kernel that does not match its hash. May call: moetune/db, SQLite,
 * fuzz_util.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "moetune/db.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static const struct {
    const char *table, *column;
} cols[] = {
    {"provenance", "sku"}, {"provenance", "cc"}, {"provenance", "sm_count"},
    {"provenance", "mem_clock_khz"}, {"provenance", "template_hash"}, {"provenance", "created"},
    {"kernel", "name"}, {"kernel", "arch"}, {"kernel", "family"}, {"kernel", "variant"},
    {"kernel", "source"}, {"kernel", "source_sha256"}, {"kernel", "image"},
    {"kernel", "image_sha256"}, {"kernel", "is_ptx"}, {"kernel", "template_hash"},
    {"problem_key", "E"}, {"problem_key", "topk"}, {"problem_key", "K"}, {"problem_key", "N"},
    {"problem_key", "dtype"}, {"problem_key", "quant"}, {"problem_key", "group_size"},
    {"problem_key", "act_format"}, {"problem_key", "activation"}, {"problem_key", "routing"},
    {"problem_key", "has_expert_map"},
    {"entry", "sku"}, {"entry", "key_id"}, {"entry", "M"}, {"entry", "pipeline"},
    {"entry", "time_us"}, {"entry", "cublas_time_us"}, {"entry", "rel_err"},
    {"entry", "provenance_id"}, {"entry", "recorded"},
    {"entry_history", "M"}, {"entry_history", "pipeline"}, {"entry_history", "time_us"},
    {"entry_history", "key_id"}, {"entry_history", "provenance_id"},
    {"candidate", "pipeline"}, {"candidate", "status"}, {"candidate", "M"},
    {"candidate", "time_us"}, {"candidate", "reason"}, {"candidate", "key_id"},
    {"reference_config", "device"}, {"reference_config", "E"}, {"reference_config", "M"},
    {"reference_config", "selector"}, {"reference_config", "block_m"},
    {"reference_config", "num_warps"},
};
#define NCOLS (sizeof cols / sizeof cols[0])

static const int64_t special_ints[] = {0, -1, 1, INT64_MAX, INT64_MIN, INT32_MAX, INT32_MIN,
                                       (int64_t)1 << 32, -((int64_t)1 << 40), 4096, 65536};

static char seed_path[512];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    snprintf(seed_path, sizeof seed_path, "%s", fuzz_path("seed.db"));
    fuzz_build_db(seed_path);
    return 0;
}

/* Bind the value the input chooses to parameter 1 of s. */
static void bind_value(sqlite3_stmt *s, fuzz_in *in)
{
    size_t n;
    const uint8_t *b;
    uint8_t kind = fuzz_u8(in);
    uint64_t u;
    double d;
    switch (kind % 7) {
    case 0:
        sqlite3_bind_int64(s, 1, special_ints[fuzz_u8(in) % (sizeof special_ints / 8)]);
        break;
    case 1: sqlite3_bind_int64(s, 1, (int64_t)fuzz_u64(in)); break;
    case 2:
        u = fuzz_u64(in);
        memcpy(&d, &u, sizeof d);   /* any bit pattern: NaN, inf, subnormal */
        sqlite3_bind_double(s, 1, d);
        break;
    case 3:
        b = fuzz_bytes(in, 255, &n);
        sqlite3_bind_text(s, 1, (const char *)b, (int)n, SQLITE_TRANSIENT);
        break;
    case 4:
        b = fuzz_bytes(in, 255, &n);
        sqlite3_bind_blob(s, 1, b, (int)n, SQLITE_TRANSIENT);
        break;
    case 5: sqlite3_bind_null(s, 1); break;
    default:
        /* a large zero blob (up to 256 KiB: bigger only slows the run) */
        sqlite3_bind_zeroblob(s, 1, (int)(fuzz_u32(in) % (256 << 10)));
        break;
    }
}

static void exec_stmt(sqlite3 *h, const char *sql, fuzz_in *in, int bind)
{
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(h, sql, -1, &s, NULL) != SQLITE_OK)
        return;
    if (bind)
        bind_value(s, in);
    sqlite3_step(s);   /* constraint failures are fine: the edit is skipped */
    sqlite3_finalize(s);
}

static void apply_edits(const char *path, fuzz_in *in)
{
    sqlite3 *h = NULL;
    if (sqlite3_open(path, &h) != SQLITE_OK) {
        sqlite3_close(h);
        return;
    }
    char sql[256];
    for (int edit = 0; edit < 12 && in->n > 0; edit++) {
        uint8_t op = fuzz_u8(in);
        size_t c = fuzz_u8(in) % NCOLS;
        int row = fuzz_u8(in) % 9;   /* 0: every row */
        switch (op % 8) {
        case 6:
            snprintf(sql, sizeof sql, "DELETE FROM %s WHERE rowid = %d", cols[c].table,
                     row ? row : 1);
            exec_stmt(h, sql, in, 0);
            break;
        case 7:
            snprintf(sql, sizeof sql, "PRAGMA %s = %d",
                     row % 2 ? "user_version" : "application_id", (int)fuzz_u32(in) % 5);
            exec_stmt(h, sql, in, 0);
            break;
        default:
            if (row)
                snprintf(sql, sizeof sql, "UPDATE %s SET %s = ?1 WHERE rowid = %d", cols[c].table,
                         cols[c].column, row);
            else
                snprintf(sql, sizeof sql, "UPDATE %s SET %s = ?1", cols[c].table, cols[c].column);
            exec_stmt(h, sql, in, 1);
            break;
        }
    }
    sqlite3_close(h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_path("hostile.db");
    fuzz_rm_db(path);
    fuzz_copy(seed_path, path);
    fuzz_in in = {data, size};
    apply_edits(path, &in);

    fuzz_read_db(path);

    /* Merge into a fresh database; what lands there must read back clean
     * of hash mismatches (fuzz_read_db checks every kernel it hands out). */
    const char *dst = fuzz_path("merged.db");
    fuzz_rm_db(dst);
    mt_db *db = NULL;
    if (mt_db_open(dst, MT_DB_CREATE, &db) == MT_OK) {
        mt_db_merge_stats ms;
        mt_db_merge(db, path, &ms);
        mt_db_close(db);
        fuzz_read_db(dst);
    } else {
        mt_db_close(db);
    }

    /* Export the hostile database to JSON and import that into a fresh one. */
    const char *json = fuzz_path("export.json");
    db = NULL;
    if (mt_db_open(path, MT_DB_READONLY, &db) == MT_OK &&
        mt_db_export_json(db, json, MT_DB_JSON_IMAGES) == MT_OK) {
        mt_db_close(db);
        db = NULL;
        fuzz_rm_db(dst);
        if (mt_db_open(dst, MT_DB_CREATE, &db) == MT_OK) {
            mt_db_merge_stats ms;
            mt_db_import_json(db, json, &ms);
        }
    }
    mt_db_close(db);
    fuzz_rm_db(dst);
    fuzz_rm_db(path);
    return 0;
}

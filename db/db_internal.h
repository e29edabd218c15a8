/*
 * Internals shared by the db/ sources: the handle, SQLite helpers with one
 * check macro, transactions, and key/entry row mapping. Not installed.
 */
#ifndef MT_DB_INTERNAL_H
#define MT_DB_INTERNAL_H

#include <sqlite3.h>

#include "common/util.h"
#include "moetune/db.h"

struct mt_db {
    sqlite3 *h;
    char *path;
    int readonly;
    int tx_depth;        /* 0: none; 1: BEGIN IMMEDIATE; >1: savepoints */
    int wal;             /* this handle put the file in WAL mode (or found it so) */
    char err[1024];
};

/* Set the handle's message "PATH: ..." and return st. */
mt_status mt_db__fail(mt_db *db, mt_status st, const char *fmt, ...) MT_PRINTF(3, 4);
/* Is path the database's own file (or its -wal, -shm or -journal file),
 * by name or by inode? Writing anything else there would destroy it. */
int mt_db__own_file(const mt_db *db, const char *path);
/* Put `context` ahead of the handle's message ("PATH: context: what"),
 * returning st: where a failure happened within a larger task. */
mt_status mt_db__context(mt_db *db, mt_status st, const char *context);
/* Record an SQLite failure (with the statement's purpose and source line). */
mt_status mt_db__sqlfail(mt_db *db, const char *what, const char *file, int line);

/* Jump to `fail` with st set when an SQLite call did not return one of the
 * accepted codes. */
#define DB_CHECK(db, call, what)                                                   \
    do {                                                                           \
        int rc_ = (call);                                                          \
        if (rc_ != SQLITE_OK && rc_ != SQLITE_DONE && rc_ != SQLITE_ROW) {         \
            st = mt_db__sqlfail((db), (what), __FILE__, __LINE__);                 \
            goto fail;                                                             \
        }                                                                          \
    } while (0)

mt_status mt_db__prepare(mt_db *db, const char *sql, sqlite3_stmt **stmt);
mt_status mt_db__exec(mt_db *db, const char *sql);
/* Nested transactions: the outermost is BEGIN IMMEDIATE (so two writers
 * queue on the busy timeout instead of failing on a lock upgrade), inner
 * ones are savepoints. end commits when st == MT_OK, else rolls back, and
 * returns st (or the commit's failure). The first outermost commit of a
 * handle then puts the file in WAL mode: a first write transaction that a
 * writer abandons, or one after the checks that refuse a file, leaves the
 * file as it was, its journal mode too. */
mt_status mt_db__begin(mt_db *db);
mt_status mt_db__end(mt_db *db, mt_status st);
mt_status mt_db__writable(mt_db *db);

/* Bind a text column from a C string; NULL binds SQL NULL. */
int mt_db__bind_text(sqlite3_stmt *s, int i, const char *text);
/* Copy a text column into a fixed buffer (NULL column: ""). */
void mt_db__col_text(sqlite3_stmt *s, int i, char *out, size_t size);

/* A key names a problem moetune can run: that problem at one token (all
 * experts local, batched rows of one) passes mt_problem_validate; its
 * message in msg. Every new problem_key row is checked so (mt_db__key_id),
 * and mt_db_verify checks the stored ones. */
mt_status mt_db__key_check(const mt_db_key *k, char *msg, size_t msg_size);
/* Row id of the problem key (without SKU); create it when create != 0 (a
 * key mt_db__key_check refuses is MT_ERR_INVALID_ARG), else *id = 0 when
 * absent. */
mt_status mt_db__key_id(mt_db *db, const mt_db_key *k, int create, int64_t *id);
/* Where a query over problem_key k fills a key (columns k.E ... k.routing). */
#define MT_DB_KEY_COLS                                                                   \
    "k.E, k.topk, k.K, k.N, k.dtype, k.quant, k.group_size, k.has_zero_point, "          \
    "k.act_format, k.activation, k.has_expert_map, k.router_on_input, k.routing"
#define MT_DB_KEY_NCOLS 13
mt_status mt_db__read_key(mt_db *db, sqlite3_stmt *s, int col, mt_db_key *k);
#define MT_DB_PROV_COLS                                                                  \
    "p.id, p.sku, p.cc, p.sm_count, p.mem_clock_khz, p.driver_version, p.cuda_version, " \
    "p.nvrtc_version, p.moetune_version, p.template_hash, p.created"
#define MT_DB_PROV_NCOLS 11
void mt_db__read_prov(sqlite3_stmt *s, int col, mt_db_provenance *p);

/* Add an entry record to the history (duplicates ignored). */
mt_status mt_db__put_history(mt_db *db, const mt_db_entry *e, int64_t key_id,
                             int64_t provenance_id);

/* When an offered entry replaces the stored one. */
typedef enum mt_db__put_rule {
    MT_DB__PUT_FASTER,   /* strictly lower time (mt_db_put_entry) */
    MT_DB__PUT_ALWAYS,   /* whatever the times (mt_db_replace_entry) */
    MT_DB__PUT_NEWER     /* later recorded, or as recent and strictly faster */
} mt_db__put_rule;
/* mt_db_put_entry under `rule`; offer->recorded 0 counts as now. */
mt_status mt_db__offer_entry(mt_db *db, const mt_db_entry *offer, int64_t provenance_id,
                             mt_db__put_rule rule, mt_db_put_outcome *outcome);

/* Recompute a kernel's hashes; MT_ERR_DB naming it when they differ. */
mt_status mt_db__check_kernel(mt_db *db, const mt_db_kernel *k);

/* Whether db can take a merge, an import or a prune: mt_db__writable, then
 * mt_db_refuse_damaged(db, refused). */
mt_status mt_db__check_destination(mt_db *db, const char *refused);

/* Merge and JSON import feed records through these, one rule set. */
typedef struct mt_db__merger {
    mt_db *db;
    mt_db_merge_rule rule;
    mt_db_merge_stats stats;
    mt_status st;
    sqlite3_stmt *find_kernel;   /* prepared on first use; mt_db__merger_done */
} mt_db__merger;
/* Release what the merge functions below prepared. */
void mt_db__merger_done(mt_db__merger *m);
mt_status mt_db__merge_kernel(mt_db__merger *m, const mt_db_kernel *k);
/* history != 0: only add the record to the history. */
mt_status mt_db__merge_entry(mt_db__merger *m, const mt_db_entry *e, int history);
mt_status mt_db__merge_candidate(mt_db__merger *m, const mt_db_candidate *c);
mt_status mt_db__merge_reference(mt_db__merger *m, const mt_db_vllm_config *c);

/* Schema: the v1 script and the migration to each later version
 * (db/schema.c). mt_db__migrations[i] brings version i+1 to i+2. */
extern const char *const mt_db__schema_v1;
extern const char *const mt_db__migrations[MT_DB_SCHEMA_VERSION - 1];

/* For tests only: create a database at path at an older schema version
 * (1 .. MT_DB_SCHEMA_VERSION), with no rows. */
mt_status mt_db__create_at_version(const char *path, int version, char *msg, size_t msg_size);

#endif

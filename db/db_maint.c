/*
 * Whole-database operations: verify, prune and merge, plus the "merger"
 * that both merge and JSON import feed records through, so that the two
 * follow the same rules.
 */
#include "db/db_internal.h"

#include <stdio.h>
#include <string.h>

/* ---- verify ---- */

typedef struct verify_ctx {
    mt_db *db;
    void (*report)(const char *problem, void *ctx);
    void *rctx;
    int problems;
    char first[1024];
} verify_ctx;

static void problem(verify_ctx *v, const char *text)
{
    /* The first, quoted in one-line messages: its first line (SQLite's
     * integrity check gives a row of many lines), at most 300 characters. */
    if (v->problems++ == 0) {
        const size_t n = strcspn(text, "\n");
        snprintf(v->first, sizeof v->first, "%.*s%s", (int)(n < 300 ? n : 300), text,
                 text[n < 300 ? n : 300] ? " ..." : "");
    }
    if (v->report)
        v->report(text, v->rctx);
}

static int verify_kernel(const mt_db_kernel *k, void *ctx)
{
    verify_ctx *v = ctx;
    if (mt_db__check_kernel(v->db, k))
        problem(v, v->db->err);
    return 0;
}

static mt_status verify_pragma_rows(verify_ctx *v, const char *sql, const char *what)
{
    sqlite3_stmt *s = NULL;
    mt_status st = mt_db__prepare(v->db, sql, &s);
    if (st)
        return st;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(s, 0);
        if (t && strcmp(t, "ok") == 0)
            continue;
        char line[1024];
        snprintf(line, sizeof line, "%s: %s: %s", v->db->path, what, t ? t : "(row)");
        problem(v, line);
    }
    if (rc != SQLITE_DONE) {
        char line[1024];
        snprintf(line, sizeof line, "%s: %s failed: %s", v->db->path, what, sqlite3_errmsg(v->db->h));
        problem(v, line);
    }
    sqlite3_finalize(s);
    return MT_OK;
}

/* The kernel table's statement kernel_present asks with. */
#define FIND_KERNEL_SQL "SELECT 1 FROM kernel WHERE name = ? AND arch = ?"

/* Does the database hold kernel name for arch? find: FIND_KERNEL_SQL,
 * prepared by the caller. */
static mt_status kernel_present(mt_db *db, sqlite3_stmt *find, const char *name, const char *arch,
                                int *present)
{
    mt_status st = MT_OK;
    sqlite3_reset(find);
    mt_db__bind_text(find, 1, name);
    mt_db__bind_text(find, 2, arch);
    int rc = sqlite3_step(find);
    DB_CHECK(db, rc, "find kernel");
    *present = rc == SQLITE_ROW;
fail:
    return st;
}

/* The first step of p from step `from` on whose kernel the database lacks
 * (library steps need none) into *missing, or -1 when it has them all. */
static mt_status missing_kernel(mt_db *db, sqlite3_stmt *find, const mt_db_pipeline *p, int from,
                                int *missing)
{
    mt_status st = MT_OK;
    *missing = -1;
    for (int i = from; i < p->nsteps && *missing < 0 && !st; i++) {
        int present = 1;
        if (strcmp(p->steps[i].kernel, MT_DB_LIBRARY_KERNEL) != 0)
            st = kernel_present(db, find, p->steps[i].kernel, p->arch, &present);
        if (!present)
            *missing = i;
    }
    return st;
}

static mt_status verify_entries(verify_ctx *v)
{
    mt_db *db = v->db;
    sqlite3_stmt *s = NULL, *k = NULL;
    mt_status st = mt_db__prepare(db, "SELECT sku, M, pipeline FROM entry ORDER BY id", &s);
    if (!st)
        st = mt_db__prepare(db, FIND_KERNEL_SQL, &k);
    if (st)
        goto fail;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        const char *sku = (const char *)sqlite3_column_text(s, 0);
        long long M = sqlite3_column_int64(s, 1);
        mt_db_pipeline p;
        char msg[256], line[1024];
        if (M < 1 || M > MT_MAX_TOKENS) {   /* no problem of moetune has it */
            snprintf(line, sizeof line, "%s: entry %s M=%lld: M outside [1, %d]", db->path,
                     sku ? sku : "?", M, MT_MAX_TOKENS);
            problem(v, line);
        }
        if (mt_db_pipeline_parse((const char *)sqlite3_column_text(s, 2), &p, msg, sizeof msg)) {
            snprintf(line, sizeof line, "%s: entry %s M=%lld: bad pipeline: %s", db->path,
                     sku ? sku : "?", M, msg);
            problem(v, line);
            continue;
        }
        for (int from = 0, i; from < p.nsteps; from = i + 1) {
            if ((st = missing_kernel(db, k, &p, from, &i)) || i < 0)
                break;
            snprintf(line, sizeof line, "%s: entry %s M=%lld: %s kernel %s (%s) is missing",
                     db->path, sku ? sku : "?", M, p.steps[i].role, p.steps[i].kernel, p.arch);
            problem(v, line);
        }
        if (st)
            goto fail;
    }
    DB_CHECK(db, rc, "list entries");
fail:
    sqlite3_finalize(s);
    sqlite3_finalize(k);
    return st;
}

/* Each problem key names a problem moetune can run (mt_db__key_check): a
 * key with a name this build does not know, or out of range, was not
 * written by moetune. */
static mt_status verify_keys(verify_ctx *v)
{
    mt_db *db = v->db;
    sqlite3_stmt *s = NULL;
    mt_status st = mt_db__prepare(db, "SELECT k.id, " MT_DB_KEY_COLS " FROM problem_key k "
                                      "ORDER BY k.id", &s);
    if (st)
        return st;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        mt_db_key key;
        memset(&key, 0, sizeof key);
        char why[256], text[512], line[1400];
        const long long id = sqlite3_column_int64(s, 0);
        if (mt_db__read_key(db, s, 1, &key) != MT_OK) {
            snprintf(line, sizeof line, "problem key %lld: %.1000s", id, db->err);
            problem(v, line);
            continue;
        }
        if (mt_db__key_check(&key, why, sizeof why) != MT_OK) {
            if (mt_db_key_format(&key, text, sizeof text) != MT_OK)
                mt_strlcpy(text, "(unprintable)", sizeof text);
            snprintf(line, sizeof line, "%s: problem key %lld (%s): %s", db->path, id, text, why);
            problem(v, line);
        }
    }
    DB_CHECK(db, rc, "list problem keys");
fail:
    sqlite3_finalize(s);
    return st;
}

/* The SQLite level: the b-trees, the indexes against their tables, the
 * references between tables. */
static mt_status verify_storage(verify_ctx *v)
{
    mt_status st = verify_pragma_rows(v, "PRAGMA integrity_check", "integrity check");
    if (!st)
        st = verify_pragma_rows(v, "PRAGMA foreign_key_check", "foreign key check");
    return st;
}

/* What both verifies return: st, or MT_ERR_DB naming the first problem. */
static mt_status verify_result(verify_ctx *v, mt_status st, int *problems)
{
    if (problems)
        *problems = v->problems;
    if (st)
        return st;
    if (v->problems)
        return mt_db__fail(v->db, MT_ERR_DB, "%d problem(s); first: %s", v->problems, v->first);
    return MT_OK;
}

/* The refusals' status: st, else MT_ERR_DB "<damage>, so <refused> (...)"
 * where the check found problems. */
static mt_status refusal(verify_ctx *v, mt_status st, const char *damage, const char *refused)
{
    if (!st && v->problems)
        st = mt_db__fail(v->db, MT_ERR_DB, "%s, so %s (%d problem(s); first: %s; `moetune db "
                         "verify` lists them all)", damage, refused, v->problems, v->first);
    return st;
}

mt_status mt_db_refuse_damaged(mt_db *db, const char *refused)
{
    if (!db || !refused)
        return db ? mt_db__fail(db, MT_ERR_INVALID_ARG, "refuse_damaged: NULL argument")
                  : MT_ERR_INVALID_ARG;
    verify_ctx v = {.db = db};
    return refusal(&v, verify_storage(&v), "the file is damaged", refused);
}

mt_status mt_db_refuse_damaged_kernels(mt_db *db, const char *refused)
{
    if (!db || !refused)
        return db ? mt_db__fail(db, MT_ERR_INVALID_ARG, "refuse_damaged_kernels: NULL argument")
                  : MT_ERR_INVALID_ARG;
    verify_ctx v = {.db = db};
    return refusal(&v, mt_db_foreach_kernel(db, 1, verify_kernel, &v), "a stored kernel is damaged",
                   refused);
}

mt_status mt_db__check_destination(mt_db *db, const char *refused)
{
    mt_status st = mt_db__writable(db);
    return st ? st : mt_db_refuse_damaged(db, refused);
}

mt_status mt_db_verify_storage(mt_db *db, void (*report)(const char *problem, void *ctx),
                               void *ctx, int *problems)
{
    if (!db)
        return MT_ERR_INVALID_ARG;
    verify_ctx v = {.db = db, .report = report, .rctx = ctx};
    return verify_result(&v, verify_storage(&v), problems);
}

mt_status mt_db_verify(mt_db *db, void (*report)(const char *problem, void *ctx), void *ctx,
                       int *problems)
{
    if (!db)
        return MT_ERR_INVALID_ARG;
    verify_ctx v = {.db = db, .report = report, .rctx = ctx};
    mt_status st = verify_storage(&v);
    char line[256];
    sqlite3_stmt *s = NULL;
    if (!st && !(st = mt_db__prepare(db, "PRAGMA application_id", &s))) {
        if (sqlite3_step(s) != SQLITE_ROW || sqlite3_column_int(s, 0) != MT_DB_APPLICATION_ID) {
            snprintf(line, sizeof line, "%s: application_id is not moetune's", db->path);
            problem(&v, line);
        }
        sqlite3_finalize(s);
    }
    if (!st && !(st = mt_db__prepare(db, "PRAGMA user_version", &s))) {
        if (sqlite3_step(s) != SQLITE_ROW || sqlite3_column_int(s, 0) != MT_DB_SCHEMA_VERSION) {
            snprintf(line, sizeof line, "%s: schema version is not %d", db->path,
                     MT_DB_SCHEMA_VERSION);
            problem(&v, line);
        }
        sqlite3_finalize(s);
    }
    if (!st && mt_db_foreach_kernel(db, 1, verify_kernel, &v))
        problem(&v, db->err);   /* a row that cannot even be read */
    if (!st && verify_keys(&v))
        problem(&v, db->err);
    if (!st && verify_entries(&v))
        problem(&v, db->err);
    return verify_result(&v, st, problems);
}

/* ---- prune ---- */

typedef struct used_ctx {
    mt_db *db;
    sqlite3_stmt *ins;
    mt_status st;
} used_ctx;

static int note_used(const mt_db_entry *e, void *ctx)
{
    used_ctx *u = ctx;
    for (int i = 0; i < e->pipeline.nsteps; i++) {
        sqlite3_reset(u->ins);
        mt_db__bind_text(u->ins, 1, e->pipeline.steps[i].kernel);
        mt_db__bind_text(u->ins, 2, e->pipeline.arch);
        if (sqlite3_step(u->ins) != SQLITE_DONE) {
            u->st = mt_db__sqlfail(u->db, "note used kernel", __FILE__, __LINE__);
            return 1;
        }
    }
    return 0;
}

static mt_status exec_count(mt_db *db, const char *sql, const char *sku, const char *hash,
                            int64_t *count)
{
    sqlite3_stmt *s = NULL;
    mt_status st = mt_db__prepare(db, sql, &s);
    if (st)
        return st;
    if (sqlite3_bind_parameter_count(s) >= 1)
        mt_db__bind_text(s, 1, sku);
    if (sqlite3_bind_parameter_count(s) >= 2)
        mt_db__bind_text(s, 2, hash);
    DB_CHECK(db, sqlite3_step(s), "prune");
    if (count)
        *count += sqlite3_changes(db->h);
fail:
    sqlite3_finalize(s);
    return st;
}

#define PRUNE_MATCH(alias)                                                                 \
    "(?1 IS NOT NULL OR ?2 IS NOT NULL) AND (?1 IS NULL OR " alias ".sku = ?1) AND "         \
    "(?2 IS NULL OR p.template_hash <> ?2)"

/* A row of `table` (sku, key_id, M) that goes with a prune: every row of
 * the SKU in a SKU-only prune, else those of an entry that goes. */
#define OF_PRUNED(table)                                                                   \
    "(?2 IS NULL AND " table ".sku = ?1) OR EXISTS (SELECT 1 FROM entry e WHERE e.id IN "    \
    "(SELECT id FROM temp.prune_victim) AND e.sku = " table ".sku AND e.key_id = " table     \
    ".key_id AND e.M = " table ".M)"

/* The template hash a prune keeps: one stored in a provenance row, named
 * whole or by a prefix of at least 6 characters that fits only it (`db
 * show` prints 12). Anything else is refused rather than taken as a hash
 * that every entry differs from, which would delete them all (to delete
 * every entry of a SKU, prune by SKU). */
static mt_status resolve_keep_hash(mt_db *db, const char *h, char full[65])
{
    sqlite3_stmt *s = NULL;
    mt_status st = mt_db__prepare(db, "SELECT DISTINCT template_hash FROM provenance WHERE "
                                      "substr(template_hash, 1, length(?1)) = ?1 "
                                      "ORDER BY template_hash", &s);
    if (st)
        return st;
    mt_db__bind_text(s, 1, h);
    int n = 0, exact = 0, rc;
    char first[65] = "", second[65] = "";
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(s, 0);
        if (!t)
            continue;
        exact |= !strcmp(t, h);
        mt_strlcpy(n ? second : first, t, 65);
        n++;
    }
    DB_CHECK(db, rc, "find template hash");
    if (exact)
        mt_strlcpy(full, h, 65);
    else if (n == 1 && strlen(h) >= 6)
        mt_strlcpy(full, first, 65);
    else if (n > 1)
        st = mt_db__fail(db, MT_ERR_INVALID_ARG, "prune: template hash '%s' fits %d stored "
                         "ones (%.12s, %.12s...): give more of it", h, n, first, second);
    else
        st = mt_db__fail(db, MT_ERR_INVALID_ARG, "prune: template hash '%s' is %s (`moetune db "
                         "show` prints the stored ones; give at least 6 characters of one)", h,
                         n ? "too short to name a stored one" : "none of the stored ones");
fail:
    sqlite3_finalize(s);
    return st;
}

/* A dry run on a read-only handle: the real prune of a private copy in
 * memory, whose counts are the ones a prune of the file would report. */
static mt_status prune_a_copy(mt_db *db, const char *sku, const char *keep,
                              mt_db_prune_stats *stats)
{
    mt_db copy = {.path = db->path};
    mt_status st = MT_OK;
    sqlite3_backup *b = NULL;
    if (sqlite3_open_v2(":memory:", &copy.h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
            SQLITE_OK ||
        !(b = sqlite3_backup_init(copy.h, "main", db->h, "main")) ||
        sqlite3_backup_step(b, -1) != SQLITE_DONE)
        st = mt_db__fail(db, MT_ERR_DB, "prune --dry-run: cannot copy the database into memory: "
                         "%s", copy.h ? sqlite3_errmsg(copy.h) : "out of memory");
    sqlite3_backup_finish(b);
    if (!st)
        st = mt_db__exec(&copy, "PRAGMA foreign_keys = ON");
    if (!st)
        st = mt_db_prune(&copy, sku, keep, 1, stats);
    if (st && copy.err[0])   /* "PATH: ..." of the same path */
        mt_strlcpy(db->err, copy.err, sizeof db->err);
    sqlite3_close_v2(copy.h);
    return st;
}

mt_status mt_db_prune(mt_db *db, const char *sku, const char *keep_template_hash, int dry_run,
                      mt_db_prune_stats *stats)
{
    mt_db_prune_stats local = {0};
    mt_db_prune_stats *ps = stats ? stats : &local;
    memset(ps, 0, sizeof *ps);
    if (!db)
        return MT_ERR_INVALID_ARG;
    if (db->tx_depth)
        return mt_db__fail(db, MT_ERR_INVALID_ARG, "prune inside a transaction");
    if (db->readonly) {
        if (!dry_run)
            return mt_db__fail(db, MT_ERR_INVALID_ARG, "prune: the database was opened "
                               "read-only (only a dry run can use such a handle)");
        return prune_a_copy(db, sku, keep_template_hash, ps);
    }
    /* Through an index that disagrees with its table, kernels in use could
     * look unused, and be deleted. */
    mt_status st = mt_db__check_destination(db, "nothing was pruned from it");
    char keep[65];
    if (!st && keep_template_hash)
        st = resolve_keep_hash(db, keep_template_hash, keep);
    if (!st)
        st = mt_db__begin(db);
    if (st)
        return st;
    const char *h = keep_template_hash ? keep : NULL;
    used_ctx u = {.db = db};
    st = mt_db__exec(db, "CREATE TEMP TABLE IF NOT EXISTS prune_victim (id INTEGER PRIMARY KEY);"
                         "DELETE FROM temp.prune_victim;"
                         "CREATE TEMP TABLE IF NOT EXISTS prune_used (name TEXT, arch TEXT);"
                         "DELETE FROM temp.prune_used;");
    if (!st)
        st = exec_count(db, "INSERT INTO temp.prune_victim SELECT e.id FROM entry e JOIN "
                            "provenance p ON p.id = e.provenance_id WHERE " PRUNE_MATCH("e"),
                        sku, h, NULL);
    /* History rows and candidates: a SKU prune takes all of the SKU's, a
     * template prune those of the (SKU, key, M) whose entry goes. (History
     * rows were matched by their own template hash, so a template prune
     * took the older rows of every entry it kept.) */
    if (!st)
        st = exec_count(db, "DELETE FROM entry_history WHERE " OF_PRUNED("entry_history"), sku, h,
                        &ps->history);
    if (!st)
        st = exec_count(db, "DELETE FROM candidate WHERE " OF_PRUNED("candidate"), sku, h,
                        &ps->candidates);
    if (!st)
        st = exec_count(db, "DELETE FROM entry WHERE id IN (SELECT id FROM temp.prune_victim)",
                        NULL, NULL, &ps->entries);
    if (!st)
        st = mt_db__prepare(db, "INSERT INTO temp.prune_used VALUES (?, ?)", &u.ins);
    if (!st)
        st = mt_db_foreach_entry(db, NULL, note_used, &u);
    if (!st)
        st = u.st;
    if (!st)
        st = exec_count(db, "DELETE FROM kernel WHERE NOT EXISTS (SELECT 1 FROM temp.prune_used u "
                            "WHERE u.name = kernel.name AND u.arch = kernel.arch)",
                        NULL, NULL, &ps->kernels);
    if (!st)
        st = exec_count(db, "DELETE FROM provenance WHERE id NOT IN (SELECT provenance_id FROM "
                            "entry UNION SELECT provenance_id FROM entry_history)",
                        NULL, NULL, &ps->provenance);
    sqlite3_finalize(u.ins);
    if (st || dry_run) {
        mt_status end = mt_db__end(db, st ? st : MT_ERR_NOT_FOUND);   /* roll back */
        return st ? end : MT_OK;
    }
    st = mt_db__end(db, MT_OK);
    if (!st)
        st = mt_db__exec(db, "VACUUM");
    return st;
}

/* ---- merge ---- */

void mt_db__merger_done(mt_db__merger *m)
{
    sqlite3_finalize(m->find_kernel);
    m->find_kernel = NULL;
}

static mt_status merger_find_kernel(mt_db__merger *m, sqlite3_stmt **find)
{
    mt_status st = m->find_kernel ? MT_OK : mt_db__prepare(m->db, FIND_KERNEL_SQL, &m->find_kernel);
    *find = m->find_kernel;
    return st;
}

mt_status mt_db__merge_kernel(mt_db__merger *m, const mt_db_kernel *k)
{
    /* The record is checked whether or not the destination has the kernel:
     * an edited source or image is refused, not counted as present. */
    sqlite3_stmt *find;
    mt_status st = mt_db__check_kernel(m->db, k);
    if (!st)
        st = merger_find_kernel(m, &find);
    if (st)
        return st;
    int present = 0;
    if ((st = kernel_present(m->db, find, k->variant.name, k->variant.arch, &present)))
        return st;
    if (present) {
        m->stats.kernels_present++;   /* the destination's own copy is kept */
    } else {
        st = mt_db_put_kernel(m->db, k);
        if (!st)
            m->stats.kernels_added++;
    }
    return st;
}

mt_status mt_db__merge_entry(mt_db__merger *m, const mt_db_entry *e, int history)
{
    int64_t prov_id, key_id;
    mt_status st = mt_db_put_provenance(m->db, &e->prov, &prov_id);
    if (st)
        return st;
    if (!history) {
        /* A winner must run: its kernels come before it (in the source's
         * kernels, or the destination has them). History records may name
         * kernels pruned since. */
        sqlite3_stmt *find;
        int missing = -1;
        st = merger_find_kernel(m, &find);
        if (!st)
            st = missing_kernel(m->db, find, &e->pipeline, 0, &missing);
        if (!st && missing >= 0)
            st = mt_db__fail(m->db, MT_ERR_NOT_FOUND,
                             "entry %s M=%lld: its %s kernel %s (%s) is neither among the kernels "
                             "merged nor in the database", e->key.sku, (long long)e->M,
                             e->pipeline.steps[missing].role, e->pipeline.steps[missing].kernel,
                             e->pipeline.arch);
        if (st)
            return st;
        mt_db_put_outcome out;
        st = mt_db__offer_entry(m->db, e, prov_id,
                                m->rule == MT_DB_MERGE_NEWER ? MT_DB__PUT_NEWER : MT_DB__PUT_FASTER,
                                &out);
        if (!st)
            (*(out == MT_DB_PUT_INSERTED   ? &m->stats.entries_inserted
               : out == MT_DB_PUT_REPLACED ? &m->stats.entries_replaced
                                           : &m->stats.entries_kept))++;
        return st;
    }
    st = mt_db__key_id(m->db, &e->key, 1, &key_id);
    if (!st)
        st = mt_db__put_history(m->db, e, key_id, prov_id);
    if (!st)
        m->stats.history += sqlite3_changes(m->db->h);
    return st;
}

mt_status mt_db__merge_candidate(mt_db__merger *m, const mt_db_candidate *c)
{
    int seen = 0;
    mt_status st = mt_db_candidate_seen(m->db, &c->key, c->M, c->pipeline, &seen);
    if (!st && !seen) {
        st = mt_db_record_candidate(m->db, c);
        if (!st)
            m->stats.candidates++;
    }
    return st;
}

mt_status mt_db__merge_reference(mt_db__merger *m, const mt_db_vllm_config *c)
{
    mt_status st = mt_db_put_vllm_config(m->db, c);
    if (!st)
        m->stats.references++;
    return st;
}

static int merge_kernel_cb(const mt_db_kernel *k, void *ctx)
{
    mt_db__merger *m = ctx;
    return (m->st = mt_db__merge_kernel(m, k)) != MT_OK;
}

static int merge_history_cb(const mt_db_entry *e, void *ctx)
{
    mt_db__merger *m = ctx;
    return (m->st = mt_db__merge_entry(m, e, 1)) != MT_OK;
}

static int merge_entry_cb(const mt_db_entry *e, void *ctx)
{
    mt_db__merger *m = ctx;
    return (m->st = mt_db__merge_entry(m, e, 0)) != MT_OK;
}

static int merge_candidate_cb(const mt_db_candidate *c, void *ctx)
{
    mt_db__merger *m = ctx;
    return (m->st = mt_db__merge_candidate(m, c)) != MT_OK;
}

static int merge_reference_cb(const mt_db_vllm_config *c, void *ctx)
{
    mt_db__merger *m = ctx;
    return (m->st = mt_db__merge_reference(m, c)) != MT_OK;
}

/* A failure while reading src is reported under src's name. */
static mt_status src_fail(mt_db *db, mt_db *src, mt_status st)
{
    return mt_db__fail(db, st, "merge: %s", mt_db_errmsg(src));
}

mt_status mt_db_merge(mt_db *db, const char *src_path, mt_db_merge_stats *stats)
{
    return mt_db_merge_by(db, src_path, MT_DB_MERGE_FASTER, stats);
}

mt_status mt_db_merge_by(mt_db *db, const char *src_path, mt_db_merge_rule rule,
                         mt_db_merge_stats *stats)
{
    if (stats)
        *stats = (mt_db_merge_stats){0};
    if (!db || !src_path)
        return db ? mt_db__fail(db, MT_ERR_INVALID_ARG, "merge: no source") : MT_ERR_INVALID_ARG;
    if (rule != MT_DB_MERGE_FASTER && rule != MT_DB_MERGE_NEWER)
        return mt_db__fail(db, MT_ERR_INVALID_ARG, "merge: unknown rule %d", (int)rule);
    mt_status st = mt_db__check_destination(db, "nothing was merged into it");
    if (st)
        return st;
    mt_db *src = NULL;
    st = mt_db_open(src_path, MT_DB_READONLY, &src);
    if (st) {
        st = mt_db__fail(db, st, "merge: %s", mt_db_errmsg(src));
        mt_db_close(src);
        return st;
    }
    mt_db__merger m = {.db = db, .rule = rule};
    st = mt_db__begin(db);
    if (st)
        goto done;
    mt_status rs = mt_db_foreach_kernel(src, 1, merge_kernel_cb, &m);
    if (!rs && !m.st)
        rs = mt_db_foreach_entry(src, &(mt_db_filter){.history = 1}, merge_history_cb, &m);
    if (!rs && !m.st)
        rs = mt_db_foreach_entry(src, NULL, merge_entry_cb, &m);
    if (!rs && !m.st)
        rs = mt_db_foreach_candidate(src, merge_candidate_cb, &m);
    if (!rs && !m.st)
        rs = mt_db_foreach_vllm_config(src, NULL, 0, 0, merge_reference_cb, &m);
    if (rs)
        st = src_fail(db, src, rs);
    else if ((st = m.st) != MT_OK) {   /* a record of src the destination refused */
        char where[512];
        snprintf(where, sizeof where, "merge %s", src_path);
        st = mt_db__context(db, st, where);
    }
    /* The merger's statements go before the commit: the switch to WAL that
     * follows a handle's first commit (mt_db__end) waits for none. (A
     * failed begin, below, left none prepared.) */
    mt_db__merger_done(&m);
    st = mt_db__end(db, st);
done:
    mt_db_close(src);
    if (stats)
        *stats = st ? (mt_db_merge_stats){0} : m.stats;
    return st;
}

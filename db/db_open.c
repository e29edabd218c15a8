/*
 * Opening, creating and migrating database files, the handle, and the SQLite
 * helpers every db/ source uses (messages, statements, transactions).
 * Calls SQLite and common/util only.
 */
#define _XOPEN_SOURCE 700   /* realpath */
#include "db/db_internal.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Two tuner processes may write one file: a writer waits this long for
 * the other's transaction before giving up. */
#define DB_BUSY_TIMEOUT_MS 60000

mt_status mt_db__fail(mt_db *db, mt_status st, const char *fmt, ...)
{
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(db->err, sizeof db->err, "%s: %s", db->path ? db->path : "(no path)", what);
    return st;
}

mt_status mt_db__sqlfail(mt_db *db, const char *what, const char *file, int line)
{
    int code = db->h ? sqlite3_extended_errcode(db->h) : SQLITE_ERROR;
    return mt_db__fail(db, MT_ERR_DB, "%s: %s (sqlite code %d) [%s:%d]", what,
                       db->h ? sqlite3_errmsg(db->h) : "no connection", code, file, line);
}

mt_status mt_db__prepare(mt_db *db, const char *sql, sqlite3_stmt **stmt)
{
    *stmt = NULL;
    if (sqlite3_prepare_v2(db->h, sql, -1, stmt, NULL) != SQLITE_OK) {
        sqlite3_finalize(*stmt);
        *stmt = NULL;
        return mt_db__fail(db, MT_ERR_DB, "cannot prepare \"%.80s...\": %s", sql,
                           sqlite3_errmsg(db->h));
    }
    return MT_OK;
}

mt_status mt_db__exec(mt_db *db, const char *sql)
{
    char *err = NULL;
    if (sqlite3_exec(db->h, sql, NULL, NULL, &err) != SQLITE_OK) {
        mt_status st = mt_db__fail(db, MT_ERR_DB, "\"%.60s...\" failed: %s", sql,
                                   err ? err : sqlite3_errmsg(db->h));
        sqlite3_free(err);
        return st;
    }
    return MT_OK;
}

mt_status mt_db__writable(mt_db *db)
{
    if (db->readonly)
        return mt_db__fail(db, MT_ERR_INVALID_ARG, "the database was opened read-only");
    return MT_OK;
}

mt_status mt_db_read_begin(mt_db *db)
{
    if (!db)
        return MT_ERR_INVALID_ARG;
    /* BEGIN is deferred: the snapshot starts at the first read after it. */
    return mt_db__exec(db, "BEGIN");
}

void mt_db_read_end(mt_db *db)
{
    if (db && db->h && !sqlite3_get_autocommit(db->h))
        sqlite3_exec(db->h, "COMMIT", NULL, NULL, NULL);
}

/* Does path's sibling path + suffix ("-wal", "-journal") exist? */
static int sibling_exists(const char *path, const char *suffix)
{
    char side[4200];
    struct stat sb;
    snprintf(side, sizeof side, "%s%s", path, suffix);
    return stat(side, &sb) == 0;
}

/* May this process create files in path's folder? */
static int folder_writable(const char *path)
{
    char dir[4200], real[PATH_MAX];
    if (realpath(path, real))
        path = real;
    mt_strlcpy(dir, path, sizeof dir);
    char *slash = strrchr(dir, '/');
    if (!slash)
        mt_strlcpy(dir, ".", sizeof dir);
    else
        slash[slash == dir ? 1 : 0] = '\0';
    return access(dir, W_OK) == 0;
}

/* Can SQLite keep its -wal and -shm files beside path: its folder
 * writable, and each either absent or a regular file? Where it cannot, a
 * switch to WAL would make the file unreadable and unwritable there. */
static int wal_possible(const char *path)
{
    char real[PATH_MAX];
    if (!folder_writable(path))
        return 0;
    /* beside the file a link names, where SQLite keeps them */
    if (realpath(path, real))
        path = real;
    static const char *const side[] = {"-wal", "-shm"};
    for (size_t i = 0; i < MT_ARRAY_LEN(side); i++) {
        char p[4200];
        struct stat sb;
        snprintf(p, sizeof p, "%s%s", path, side[i]);
        if (lstat(p, &sb) == 0 && !S_ISREG(sb.st_mode))
            return 0;
    }
    return 1;
}

/* Put a writable handle's file in WAL mode, once a handle, outside any
 * transaction (inside one the switch fails, and so does the BEGIN after
 * it). The switch rewrites the file's header: only for a file this handle
 * has written (after_commit) or is creating, never for one it may still
 * refuse. */
static mt_status use_wal(mt_db *db)
{
    if (db->readonly || db->wal || !sqlite3_get_autocommit(db->h))
        return MT_OK;
    mt_status st = mt_db__exec(db, "PRAGMA journal_mode = WAL");
    if (!st)
        db->wal = 1;
    return st;
}

/* A transaction in the file's own journal mode. */
static mt_status begin_as_is(mt_db *db)
{
    mt_status st = mt_db__exec(db, db->tx_depth == 0 ? "BEGIN IMMEDIATE" : "SAVEPOINT mt_nested");
    if (!st)
        db->tx_depth++;
    return st;
}

mt_status mt_db__begin(mt_db *db)
{
    mt_status st = mt_db__writable(db);
    return st ? st : begin_as_is(db);
}

/* After a handle's first commit: WAL from here on (readers never block the
 * writer, a killed writer leaves only uncommitted frames). The first write
 * transaction ran in the file's own journal mode, so that one a writer
 * abandons (an import whose 50th record is bad) leaves a rollback-journal
 * file, as the shipped ones are, byte for byte as it was. The switch is
 * best effort: its data is committed already, and where another
 * connection holds the file past the busy timeout the next commit tries
 * again. */
static void wal_after_commit(mt_db *db)
{
    if (db->wal || !wal_possible(db->path))
        return;
    char keep[sizeof db->err];
    memcpy(keep, db->err, sizeof keep);
    if (use_wal(db))
        memcpy(db->err, keep, sizeof keep);
}

mt_status mt_db__end(mt_db *db, mt_status st)
{
    if (db->tx_depth <= 0)
        return st ? st : mt_db__fail(db, MT_ERR_INTERNAL, "transaction end without begin");
    int outer = db->tx_depth == 1;
    db->tx_depth--;
    if (st == MT_OK) {
        mt_status cst = mt_db__exec(db, outer ? "COMMIT" : "RELEASE mt_nested");
        if (cst == MT_OK && outer)
            wal_after_commit(db);
        if (cst == MT_OK)
            return MT_OK;
        st = cst;
    }
    /* Keep the first message: the rollback's own failure says less. */
    char keep[sizeof db->err];
    memcpy(keep, db->err, sizeof keep);
    if (outer)
        sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
    else
        sqlite3_exec(db->h, "ROLLBACK TO mt_nested; RELEASE mt_nested", NULL, NULL, NULL);
    memcpy(db->err, keep, sizeof keep);
    return st;
}

int mt_db__bind_text(sqlite3_stmt *s, int i, const char *text)
{
    return text ? sqlite3_bind_text(s, i, text, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(s, i);
}

void mt_db__col_text(sqlite3_stmt *s, int i, char *out, size_t size)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    mt_strlcpy(out, t ? (const char *)t : "", size);
}

/* path with its folder made absolute and free of links ("x.db" in the
 * current folder: "/abs/dir/x.db"); 0 when the folder does not resolve. */
static int canonical_path(const char *path, char *out, size_t size)
{
    const char *slash = strrchr(path, '/');
    char dir[4096], *real;
    if (!slash)
        mt_strlcpy(dir, ".", sizeof dir);
    else if (slash == path)
        mt_strlcpy(dir, "/", sizeof dir);
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (!(real = realpath(dir, NULL)))
        return 0;
    int n = snprintf(out, size, "%s/%s", strcmp(real, "/") ? real : "", slash ? slash + 1 : path);
    free(real);
    return n > 0 && (size_t)n < size;
}

int mt_db__own_file(const mt_db *db, const char *path)
{
    static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
    char mine[4200], other[4200], own[4300];
    /* SQLite keeps the -wal and -shm files beside the file a link names. */
    char *real = db->path ? realpath(db->path, NULL) : NULL;
    const int named = real ? (mt_strlcpy(mine, real, sizeof mine), 1)
                           : db->path && canonical_path(db->path, mine, sizeof mine);
    free(real);
    if (!named || !canonical_path(path, other, sizeof other))
        return 0;
    struct stat target;
    const int exists = stat(path, &target) == 0;
    for (size_t i = 0; i < MT_ARRAY_LEN(suffixes); i++) {
        snprintf(own, sizeof own, "%s%s", mine, suffixes[i]);
        struct stat st;
        /* By name, or as another name (a link) of the same file. */
        if (!strcmp(own, other) || (exists && stat(own, &st) == 0 && st.st_dev == target.st_dev &&
                                    st.st_ino == target.st_ino))
            return 1;
    }
    return 0;
}

mt_status mt_db__context(mt_db *db, mt_status st, const char *context)
{
    const char *path = db->path ? db->path : "(no path)";
    const size_t n = strlen(path);
    const char *what = db->err;
    if (!strncmp(what, path, n) && !strncmp(what + n, ": ", 2))
        what += n + 2;
    char copy[sizeof db->err];
    mt_strlcpy(copy, what, sizeof copy);
    return mt_db__fail(db, st, "%s: %s", context, copy);
}

const char *mt_db_errmsg(const mt_db *db)
{
    if (!db)
        return "no database handle (out of memory)";
    return db->err;
}

const char *mt_db_path(const mt_db *db) { return db && db->path ? db->path : ""; }

void mt_db_close(mt_db *db)
{
    if (!db)
        return;
    if (db->h)
        sqlite3_close_v2(db->h);
    free(db->path);
    free(db);
}

static mt_status pragma_int(mt_db *db, const char *sql, int64_t *out)
{
    sqlite3_stmt *s = NULL;
    mt_status st = mt_db__prepare(db, sql, &s);
    if (st)
        return st;
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        *out = sqlite3_column_int64(s, 0);
    else if (rc == SQLITE_DONE)
        *out = 0;
    else
        st = mt_db__fail(db, MT_ERR_DB, "cannot read the database (%s): %s", sql,
                         sqlite3_errmsg(db->h));
    sqlite3_finalize(s);
    return st;
}

/* "file:PATH?immutable=1" with PATH's bytes outside [A-Za-z0-9/._~-]
 * percent-encoded; 0 where it does not fit. */
static int immutable_uri(const char *path, char *out, size_t size)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = (size_t)snprintf(out, size, "file:");
    for (const unsigned char *c = (const unsigned char *)path; *c; c++) {
        if (n + 4 >= size)
            return 0;
        if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
            strchr("/._~-", *c)) {
            out[n++] = (char)*c;
        } else {
            out[n++] = '%';
            out[n++] = hex[*c >> 4];
            out[n++] = hex[*c & 15];
        }
    }
    return snprintf(out + n, size - n, "?immutable=1") < (int)(size - n);
}

/* Roll back the -journal a dead writer left beside path, where this
 * process may write the file and its folder (a live writer's journal is
 * not rolled back: its lock holds the read below until it commits). */
static void roll_back_left_journal(const char *path)
{
    sqlite3 *h = NULL;
    if (access(path, W_OK) != 0 || !folder_writable(path))
        return;
    if (sqlite3_open_v2(path, &h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) == SQLITE_OK) {
        sqlite3_busy_timeout(h, DB_BUSY_TIMEOUT_MS);
        sqlite3_exec(h, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL);
    }
    sqlite3_close_v2(h);
}

/* The header check gives a clear message for non-SQLite and truncated files
 * before SQLite reports a terse "file is not a database". */
static mt_status check_header(mt_db *db, const char *path, int64_t size, int *wal_mode)
{
    unsigned char hdr[100];
    FILE *f = fopen(path, "rb");
    if (!f)
        return mt_db__fail(db, MT_ERR_IO, "cannot read: %s", strerror(errno));
    size_t n = fread(hdr, 1, sizeof hdr, f);
    fclose(f);
    if (n < sizeof hdr || memcmp(hdr, "SQLite format 3", 16) != 0)
        return mt_db__fail(db, MT_ERR_DB, "not an SQLite database (%lld bytes, no SQLite header): "
                           "not a moetune database", (long long)size);
    uint32_t page = ((uint32_t)hdr[16] << 8) | hdr[17];
    if (page == 1)
        page = 65536;
    uint32_t pages = ((uint32_t)hdr[28] << 24) | ((uint32_t)hdr[29] << 16) |
                     ((uint32_t)hdr[30] << 8) | hdr[31];
    int size_valid = memcmp(hdr + 24, hdr + 92, 4) == 0;
    *wal_mode = hdr[18] == 2 && hdr[19] == 2;   /* the file format's read and write versions */
    /* With a -wal file present another process may be checkpointing, and
     * with a -journal file another may be committing (page 1 is written
     * first) or may have died doing so (SQLite rolls that back): either
     * way the file may be shorter than its header says. */
    if (size_valid && !sibling_exists(path, "-wal") && !sibling_exists(path, "-journal") && pages &&
        (int64_t)page * pages > size)
        return mt_db__fail(db, MT_ERR_DB, "truncated database: %lld bytes, its header says %lld",
                           (long long)size, (long long)page * pages);
    return MT_OK;
}

static mt_status count_tables(mt_db *db, int64_t *n)
{
    return pragma_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table'", n);
}

static mt_status run_migrations(mt_db *db, int64_t from, int64_t to)
{
    for (int64_t v = from; v < to; v++) {
        mt_status st = mt_db__exec(db, mt_db__migrations[v - 1]);
        if (st)
            return mt_db__fail(db, st, "migration from schema version %lld to %lld failed: %s",
                               (long long)v, (long long)v + 1, sqlite3_errmsg(db->h));
    }
    return MT_OK;
}

static mt_status set_version(mt_db *db, int version)
{
    char sql[128];
    snprintf(sql, sizeof sql, "PRAGMA application_id = %d; PRAGMA user_version = %d",
             MT_DB_APPLICATION_ID, version);
    return mt_db__exec(db, sql);
}

static mt_status check_tables(mt_db *db);

/* Create (version 0 -> target) or migrate (older -> current) inside one
 * transaction; the version is read again under the write lock because
 * another process may have done it first. */
static mt_status build_schema(mt_db *db, int target)
{
    mt_status st = begin_as_is(db);
    if (st)
        return st;
    int64_t uv = 0, tables = 0;
    st = pragma_int(db, "PRAGMA user_version", &uv);
    if (!st)
        st = count_tables(db, &tables);
    int64_t start = uv;
    if (!st && uv == 0 && tables == 0) {
        st = mt_db__exec(db, mt_db__schema_v1);
        uv = 1;
    }
    if (!st && uv >= 1 && uv < target)
        st = run_migrations(db, uv, target);
    if (!st && start < target)
        st = set_version(db, target);
    /* A migration to this build's schema that leaves a table short of a
     * column (a damaged older file) is refused before its commit: the file
     * keeps every byte. (The tests build older versions: not checked.) */
    if (!st && target == MT_DB_SCHEMA_VERSION)
        st = check_tables(db);
    return mt_db__end(db, st);
}

/* Every column of every table in h, one "\ntable.column" line each, and a
 * closing "\n" (so that "\nT.C\n" finds a column and "\nT." a table). */
static int schema_columns(sqlite3 *h, mt_buf *out)
{
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(h, "SELECT m.name, p.name FROM sqlite_master m, "
                              "pragma_table_info(m.name) p WHERE m.type = 'table' "
                              "ORDER BY m.name, p.cid", -1, &s, NULL) != SQLITE_OK)
        return 0;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        mt_buf_printf(out, "\n%s.%s", (const char *)sqlite3_column_text(s, 0),
                      (const char *)sqlite3_column_text(s, 1));
    sqlite3_finalize(s);
    mt_buf_puts(out, "\n");
    return rc == SQLITE_DONE && !out->oom;
}

/* This build's schema as schema_columns lists it: db/schema.c's version 1
 * and migrations run in memory, as a new file gets them; once a process
 * (NULL when that failed). */
static mt_buf reference;
static int reference_ok;

static void build_reference(void)
{
    sqlite3 *ref = NULL;
    int ok = sqlite3_open_v2(":memory:", &ref, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
             sqlite3_exec(ref, mt_db__schema_v1, NULL, NULL, NULL) == SQLITE_OK;
    for (int v = 1; ok && v < MT_DB_SCHEMA_VERSION; v++)
        ok = sqlite3_exec(ref, mt_db__migrations[v - 1], NULL, NULL, NULL) == SQLITE_OK;
    reference_ok = ok && schema_columns(ref, &reference);
    sqlite3_close(ref);
}

static const char *reference_columns(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, build_reference);
    return reference_ok ? reference.data : NULL;
}

/* Every table of this build's schema, with every column the schema gives
 * it (a file whose table lost a column would open and then fail in the
 * first statement that reads it). */
static mt_status check_tables(mt_db *db)
{
    const char *want = reference_columns();
    if (!want)
        return mt_db__fail(db, MT_ERR_INTERNAL, "cannot build this build's schema in memory");
    mt_buf have = {0};
    mt_status st = MT_OK;
    if (!schema_columns(db->h, &have))
        st = mt_db__fail(db, MT_ERR_DB, "cannot read the database's tables: %s",
                         sqlite3_errmsg(db->h));
    char line[256];
    for (const char *w = want; !st && w[1]; w = strchr(w + 1, '\n')) {
        const size_t n = (size_t)(strchr(w + 1, '\n') - w);   /* "\nT.C" */
        const char *dot = memchr(w, '.', n);
        if (!dot || n + 2 > sizeof line)
            continue;
        memcpy(line, w, n);
        line[n] = '\n';
        line[n + 1] = '\0';
        const int table_len = (int)(dot - w - 1);
        char table[128];
        snprintf(table, sizeof table, "\n%.*s.", table_len, w + 1);
        if (!strstr(have.data, table))
            st = mt_db__fail(db, MT_ERR_DB, "not a moetune database: table '%.*s' is missing",
                             table_len, w + 1);
        else if (!strstr(have.data, line))
            st = mt_db__fail(db, MT_ERR_DB, "not a moetune database of this schema: table "
                             "'%.*s' has no column '%.*s'", table_len, w + 1,
                             (int)(n - (size_t)(dot - w) - 1), dot + 1);
    }
    mt_buf_free(&have);
    return st;
}

static mt_status open_connection(mt_db *db, int flags)
{
    const char *path = db->path;
    int readonly = (flags & MT_DB_READONLY) != 0;
    int create = !readonly && (flags & MT_DB_CREATE);
    int wal_mode = 0;
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (errno != ENOENT)
            return mt_db__fail(db, MT_ERR_IO, "cannot open: %s", strerror(errno));
        if (!create)
            return mt_db__fail(db, MT_ERR_IO, "no such database file%s", readonly
                               ? " (opened read-only, so it is not created)" : "");
    } else if (!S_ISREG(sb.st_mode)) {
        return mt_db__fail(db, MT_ERR_IO, "not a regular file");
    } else if (sb.st_size == 0 && !create) {
        return mt_db__fail(db, MT_ERR_DB, "empty file: not a moetune database");
    } else if (sb.st_size > 0) {
        mt_status st = check_header(db, path, (int64_t)sb.st_size, &wal_mode);
        if (st)
            return st;
    }
    /* A writer's journal goes beside the file: a folder it may not write
     * would fail its first write, after the work it came to store. */
    if (!readonly && !folder_writable(path))
        return mt_db__fail(db, MT_ERR_IO, "cannot be written: its folder is not writable (SQLite "
                           "keeps its journal beside the file): opened for writing");
    /* A -journal a writer left when it died mid-transaction is rolled back
     * by the first connection that may write the file; a read-only one
     * cannot, and would fail every read. Where this process may write the
     * file, a short read-write connection rolls it back first: the file
     * then holds its last commit, as any writer would find it. */
    if (readonly && sibling_exists(path, "-journal"))
        roll_back_left_journal(path);
    int oflags = readonly ? SQLITE_OPEN_READONLY
                          : SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
    /* A WAL file read where no -wal or -shm can be made (a file installed
     * into a read-only folder, checkpointed): SQLite would need them even
     * to read. With no -wal beside it, no writer has frames pending, and
     * none can add any in that folder: the file is read as it stands. */
    char uri[3 * 4096 + 32];
    const char *target = path;
    if (readonly && wal_mode && !sibling_exists(path, "-wal") && !folder_writable(path) &&
        immutable_uri(path, uri, sizeof uri)) {
        target = uri;
        oflags |= SQLITE_OPEN_URI;
    }
    if (sqlite3_open_v2(target, &db->h, oflags | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK)
        return mt_db__fail(db, MT_ERR_DB, "cannot open: %s",
                           db->h ? sqlite3_errmsg(db->h) : "out of memory");
    sqlite3_extended_result_codes(db->h, 1);
    sqlite3_busy_timeout(db->h, DB_BUSY_TIMEOUT_MS);
    db->readonly = readonly;
    /* SQLite opens a file it may not write read-only without a word: a
     * writer would find out at its first write (a tuner after setting up
     * and measuring a candidate). */
    if (!readonly && sqlite3_db_readonly(db->h, "main") == 1)
        return mt_db__fail(db, MT_ERR_IO, "cannot be written (its permissions, or its folder's): "
                           "opened for writing");

    /* The three in one read transaction: another process that commits a
     * new file's schema between two of them would show this one its tables
     * beside an application id of 0, a file to refuse (seen with 8 tuners
     * starting on one new file). */
    int64_t app = 0, uv = 0, tables = 0;
    mt_status st = mt_db_read_begin(db);
    if (!st)
        st = pragma_int(db, "PRAGMA application_id", &app);
    if (!st)
        st = pragma_int(db, "PRAGMA user_version", &uv);
    if (!st)
        st = count_tables(db, &tables);
    mt_db_read_end(db);
    if (st)
        return st;
    int fresh = app == 0 && uv == 0 && tables == 0;
    if (fresh && readonly)
        return mt_db__fail(db, MT_ERR_DB, "empty database: not a moetune database");
    if (!fresh && app != MT_DB_APPLICATION_ID)
        return mt_db__fail(db, MT_ERR_DB,
                           "not a moetune database (SQLite application_id 0x%08llx, %lld tables)",
                           (unsigned long long)(uint32_t)app, (long long)tables);
    if (uv > MT_DB_SCHEMA_VERSION)
        return mt_db__fail(db, MT_ERR_DB,
                           "schema version %lld is newer than this build knows (%d): "
                           "use a newer moetune", (long long)uv, MT_DB_SCHEMA_VERSION);
    if (!fresh && uv < 1)
        return mt_db__fail(db, MT_ERR_DB, "bad schema version %lld", (long long)uv);
    if (uv < MT_DB_SCHEMA_VERSION && readonly)
        return mt_db__fail(db, MT_ERR_DB,
                           "schema version %lld is older than %d and the file was opened "
                           "read-only: open it for writing once to migrate it",
                           (long long)uv, MT_DB_SCHEMA_VERSION);
    /* FULL: a commit survives power loss, each result is worth minutes of
     * GPU time. */
    if (!readonly && (st = mt_db__exec(db, "PRAGMA synchronous = FULL")))
        return st;
    /* WAL: readers never block the writer and a killed writer leaves only
     * uncommitted frames behind. Switching rewrites the file's header, so
     * a file that was there keeps its journal mode until this writer's
     * first commit (mt_db__end), which comes after the writer's own checks
     * (merge, import, prune, tune and refresh refuse a damaged file) and
     * after its first write transaction as a whole: a refused file, or one
     * whose import stopped at a bad record, keeps every byte. A file this open
     * is creating is this writer's own: it goes to WAL before its schema,
     * so that any other connection that finds the schema finds WAL too, and
     * maps the WAL index at its first read, holding its shared lock until
     * it closes: while it is open no other connection can take the new
     * file out of WAL and delete it (mt_db_remove_if_empty). */
    if (!readonly && fresh && (st = use_wal(db)))
        return st;
    /* A new or migrated schema comes in one transaction, in the file's own
     * journal mode, so that a failed migration leaves the file as it was.
     * A damaged file is not migrated: the writer that opened it would
     * refuse it next, and a refused file keeps every byte (its version
     * too). */
    if (!readonly && uv < MT_DB_SCHEMA_VERSION) {
        char refused[96];
        snprintf(refused, sizeof refused, "it was not migrated to schema version %d",
                 MT_DB_SCHEMA_VERSION);
        st = fresh ? MT_OK : mt_db_refuse_damaged(db, refused);
        if (st || (st = build_schema(db, MT_DB_SCHEMA_VERSION)))
            return st;
    }
    st = check_tables(db);
    if (!st)
        st = mt_db__exec(db, "PRAGMA foreign_keys = ON");
    return st;
}

mt_status mt_db_open(const char *path, int flags, mt_db **out)
{
    if (!out)
        return MT_ERR_INVALID_ARG;
    *out = NULL;
    mt_db *db = calloc(1, sizeof *db);
    if (!db)
        return MT_ERR_NO_MEMORY;
    *out = db;
    if (!path || !*path) {
        db->path = strdup("");
        return mt_db__fail(db, MT_ERR_INVALID_ARG, "no database path given");
    }
    db->path = strdup(path);
    if (!db->path)
        return MT_ERR_NO_MEMORY;
    mt_status st = open_connection(db, flags);
    if (st && db->h) {
        /* Close now: a failed handle must hold no lock on the file. */
        sqlite3_close_v2(db->h);
        db->h = NULL;
    }
    return st;
}

mt_status mt_db_remove_if_empty(const char *path, int *removed)
{
    if (removed)
        *removed = 0;
    if (!path)
        return MT_ERR_INVALID_ARG;
    mt_db *db = NULL;
    mt_status st = mt_db_open(path, 0, &db);
    int64_t rows = 0;
    if (!st)
        st = pragma_int(db, "SELECT (SELECT count(*) FROM provenance) + (SELECT count(*) FROM "
                            "kernel) + (SELECT count(*) FROM problem_key) + (SELECT count(*) "
                            "FROM entry) + (SELECT count(*) FROM entry_history) + (SELECT "
                            "count(*) FROM candidate) + (SELECT count(*) FROM reference_config)",
                        &rows);
    /* Nothing in it. Another connection (a second tuner about to write its
     * first row) keeps it: leaving WAL mode needs the only connection, and
     * the exclusive lock is held while the files go. */
    char mode[16] = "";
    if (!st && !rows) {
        sqlite3_stmt *s = NULL;
        if (mt_db__prepare(db, "PRAGMA journal_mode = DELETE", &s) == MT_OK &&
            sqlite3_step(s) == SQLITE_ROW)
            mt_db__col_text(s, 0, mode, sizeof mode);
        sqlite3_finalize(s);
    }
    int alone = !st && !rows && !strcmp(mode, "delete") &&
                sqlite3_exec(db->h, "BEGIN EXCLUSIVE", NULL, NULL, NULL) == SQLITE_OK;
    static const char *const side[] = {"", "-wal", "-shm", "-journal"};
    for (size_t i = 0; alone && i < MT_ARRAY_LEN(side); i++) {
        char name[4096];
        snprintf(name, sizeof name, "%s%s", path, side[i]);
        if (unlink(name) != 0 && errno != ENOENT && i == 0)
            st = MT_ERR_IO;
    }
    if (removed)
        *removed = alone && !st;
    mt_db_close(db);
    return st;
}

mt_status mt_db__create_at_version(const char *path, int version, char *msg, size_t msg_size)
{
    if (version < 1 || version > MT_DB_SCHEMA_VERSION)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "bad schema version %d", version);
    mt_db tmp = {0};
    tmp.path = (char *)path;
    if (sqlite3_open_v2(path, &tmp.h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
        sqlite3_close_v2(tmp.h);
        return mt_errf(msg, msg_size, MT_ERR_DB, "cannot create %s", path);
    }
    mt_status st = mt_db__exec(&tmp, "PRAGMA journal_mode = WAL");
    if (!st)
        st = build_schema(&tmp, version);
    if (st)
        mt_errf(msg, msg_size, st, "%s", tmp.err);
    sqlite3_close_v2(tmp.h);
    return st;
}

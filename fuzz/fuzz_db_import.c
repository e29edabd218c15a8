/*
 * libFuzzer harness: JSON import into a database. The first byte picks the
 * importer: even, mt_db_import_json (the moetune layout, with kernels and
 * their base64 images) into a copy of the seed database; odd,
 * mt_db_import_vllm, where the input's first line is the file name
 * (E=..,N=..,device_name=..[,dtype=..].json, which the importer parses) and
 * the rest the file. A failed import must leave the database as it was
 * (same entry, history and reference counts); a successful one must read
 * back through every reader (fuzz_read_db checks kernels against their
 * hashes). May call: moetune/db, fuzz_util.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fuzz/fuzz_util.h"
#include "moetune/db.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static char seed_path[512];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    snprintf(seed_path, sizeof seed_path, "%s", fuzz_path("seed.db"));
    fuzz_build_db(seed_path);
    return 0;
}

static int count_cb(const mt_db_entry *e, void *ctx)
{
    (void)e;
    (*(long *)ctx)++;
    return 0;
}

static int count_ref(const mt_db_vllm_config *c, void *ctx)
{
    (void)c;
    (*(long *)ctx)++;
    return 0;
}

/* Entries, history rows and reference configs, as one fingerprint. */
static void counts(mt_db *db, long out[3])
{
    out[0] = out[1] = out[2] = 0;
    mt_db_filter f = {0};
    FUZZ_CHECK(mt_db_foreach_entry(db, &f, count_cb, &out[0]) == MT_OK);
    f.history = 1;
    FUZZ_CHECK(mt_db_foreach_entry(db, &f, count_cb, &out[1]) == MT_OK);
    FUZZ_CHECK(mt_db_foreach_vllm_config(db, NULL, 0, 0, count_ref, &out[2]) == MT_OK);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int vllm = data[0] & 1;
    data++, size--;
    char name[200] = "import.json";
    if (vllm) {
        /* The file name: the first line, '/' and NUL made harmless. */
        size_t i = 0;
        while (i < size && data[i] != '\n' && i < sizeof name - 1) {
            name[i] = data[i] == '/' || data[i] == 0 ? '_' : (char)data[i];
            i++;
        }
        name[i] = '\0';
        if (i == 0 || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
            return 0;
        if (i < size)
            i++;
        data += i, size -= i;
    }
    const char *in = fuzz_path(name);
    fuzz_write(in, data, size);

    const char *path = fuzz_path("target.db");
    fuzz_rm_db(path);
    fuzz_copy(seed_path, path);
    mt_db *db = NULL;
    FUZZ_CHECK(mt_db_open(path, 0, &db) == MT_OK);
    long before[3], after[3];
    counts(db, before);
    mt_status st;
    if (vllm) {
        int n = -1;
        st = mt_db_import_vllm(db, in, &n);
        if (st == MT_OK)
            FUZZ_CHECK(n >= 0);
    } else {
        mt_db_merge_stats ms;
        st = mt_db_import_json(db, in, &ms);
    }
    FUZZ_CHECK(mt_db_errmsg(db) != NULL);
    counts(db, after);
    if (st != MT_OK)   /* one transaction: nothing of a failed import stays */
        FUZZ_CHECK(memcmp(before, after, sizeof before) == 0);
    mt_db_close(db);
    unlink(in);
    if (st == MT_OK)
        fuzz_read_db(path);
    fuzz_rm_db(path);
    return 0;
}

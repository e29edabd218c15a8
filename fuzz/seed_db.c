/*
 * Writes the seed database of the database harnesses to argv[1] and, when
 * given, its moetune JSON export (with kernel images) to argv[2]; used once
 * to make fuzz/corpus/db_file/ and the JSON seeds. May call: moetune/db,
 * fuzz_util.
 */
#include <stdio.h>

#include "fuzz/fuzz_util.h"
#include "moetune/db.h"

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: %s OUT.db [OUT.json]\n", argv[0]);
        return 2;
    }
    fuzz_build_db(argv[1]);
    if (argc == 3) {
        mt_db *db = NULL;
        if (mt_db_open(argv[1], MT_DB_READONLY, &db) != MT_OK ||
            mt_db_export_json(db, argv[2], MT_DB_JSON_IMAGES) != MT_OK) {
            fprintf(stderr, "%s\n", mt_db_errmsg(db));
            mt_db_close(db);
            return 1;
        }
        mt_db_close(db);
    }
    return 0;
}

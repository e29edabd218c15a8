/*
 * Bringing the stored kernels of a database up to date with the templates
 * without timing anything. A kernel records the hash of its family's
 * templates; any edit to them (a comment, a pruning rule, another variant's
 * code) changes that hash, and the runtime warns about every stored kernel
 * of the family. A kernel whose variant text and amalgamated source come
 * out of the current templates the same, byte for byte, is still what they
 * generate: its hash is set to the current one. With MT_REFRESH_COMPILE, a
 * kernel whose source changed (an edit to a header every kernel includes)
 * is compiled from the current templates, and where the image holds the
 * same code as the stored one, byte for byte but for the line tables that
 * -lineinfo adds (which move with every line of the source), so the same
 * results and times, the new source and image replace the stored ones
 * with the current hash. Kernels whose source and code did change keep
 * theirs, and are tuned again.
 *
 * May call: gen (resolve, source, template hash, compile), db.
 */
#ifndef MT_TUNER_REFRESH_H
#define MT_TUNER_REFRESH_H

#include <stddef.h>
#include "moetune/db.h"
#include "moetune/gen.h"

/* mt_refresh_kernels' flags */
enum {
    MT_REFRESH_DRY_RUN = 1,   /* count and report only */
    MT_REFRESH_COMPILE = 2,   /* compile the kernels whose source changed, compare their code */
};

typedef struct mt_refresh_stats {
    int current;     /* already of the current templates */
    int refreshed;   /* same variant and source (or code): brought up to date */
    int same_code;   /* of those, another source of the same code (MT_REFRESH_COMPILE) */
    int changed;     /* the current templates make another variant text or source */
    int unknown;     /* not a variant of the current templates (family, name or version) */
} mt_refresh_stats;

/* Check every stored kernel against g's templates; flags: MT_REFRESH_*
 * (0: refresh by the source alone). report (may be NULL) gets one line
 * for each kernel that is not current, saying what was found. stats may
 * be NULL. Errors (the database, a template that fails to load or render)
 * stop the walk; the kernels refreshed before stay refreshed (each is one
 * transaction). A kernel that fails to compile counts as changed. A
 * database whose SQLite file is damaged is refused first
 * (mt_db_refuse_damaged). */
mt_status mt_refresh_kernels(mt_db *db, mt_gen *g, unsigned flags,
                             void (*report)(const char *line, void *ctx), void *ctx,
                             mt_refresh_stats *stats, char *msg, size_t msg_size);

#endif

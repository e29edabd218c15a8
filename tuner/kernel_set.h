/*
 * Growing a kernel set (tuner/harness.h) one batch of variants at a time:
 * the tuner compiles only the candidates it is about to time.
 */
#ifndef MT_TUNER_KERNEL_SET_H
#define MT_TUNER_KERNEL_SET_H

#include "moetune/db.h"
#include "tuner/harness.h"

/* Compile (through the cache) and load the variants not yet in the set. */
mt_status mt_kernel_set_add(mt_kernel_set *set, mt_gen *g, const mt_variant *v, size_t n,
                            char *msg, size_t msg_size);
/* The loaded kernel named `name`, or NULL. */
const mt_kernel *mt_kernel_set_find(const mt_kernel_set *set, const char *name);
/* The first loaded kernel that is `like` but for param = value (its store
 * sibling: "epilogue", "store"), or NULL. */
const mt_kernel *mt_kernel_set_find_sibling(const mt_kernel_set *set, const mt_variant *like,
                                            const char *param, const char *value);
/* The loaded kernel that is a GEMM1 `chained` (CHAIN > 0) but in a launch
 * of its own (CHAIN=0); for one with its registers capped (SM_WARPS > 0)
 * whose capped twin is not loaded, the uncapped one's (a cap changes no
 * result); NULL if neither is loaded. */
const mt_kernel *mt_kernel_set_find_unchained(const mt_kernel_set *set, const mt_variant *chained);

/* The database record of variant v: compiled through the cache, with its
 * source, image and the family's template hash. *out owns its buffers
 * (mt_db_kernel_free). */
mt_status mt_kernel_record(mt_gen *g, const mt_variant *v, mt_db_kernel *out, char *msg,
                           size_t msg_size);

#endif

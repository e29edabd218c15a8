/*
 * Helpers shared by the cmocka tests: temporary folders, random data, and
 * the GPU gate that makes GPU tests report "skipped" (exit 77) with a reason.
 */
#ifndef MT_TESTS_SUPPORT_H
#define MT_TESTS_SUPPORT_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#define MT_TEST_SKIP 77

/* A fresh empty folder under $MT_TEST_TMP (or /tmp); returns a static path. */
const char *mt_test_tmpdir(const char *tag);

/* Deterministic xorshift random numbers for tests. */
typedef struct mt_rng { uint64_t s; } mt_rng;
void mt_rng_seed(mt_rng *r, uint64_t seed);
uint64_t mt_rng_next(mt_rng *r);
float mt_rng_normal(mt_rng *r);     /* N(0, 1) */
float mt_rng_uniform(mt_rng *r);    /* [0, 1) */

/* For GPU tests: if no driver/GPU, print why and exit(77) so CTest says
 * "skipped". Returns only when a GPU is present. */
void mt_test_require_gpu(void);

/* A generator over the real templates (MT_TEMPLATE_DIR, set by CTest),
 * without the compile cache; fails the test when they do not load. */
struct mt_gen *mt_test_open_templates(void);

/* The default variants of one family for sm_90a (malloc'd); fails the test
 * when the walk fails or finds none. */
struct mt_variant *mt_test_sm90a_defaults(struct mt_gen *g, const char *family, size_t *n);

/* The default variants of `family` for `arch` that the name=value pairs kv
 * (nkv strings) keep, compiled: returns how many, *v and *b as many (free
 * them with free() and mt_kernel_binaries_free); fails the test when the
 * walk fails, finds none, or a kernel does not compile (with its log). */
struct mt_kernel_binary;
size_t mt_test_compile_defaults(struct mt_gen *g, const char *family, const char *arch,
                                const char *const *kv, int nkv, struct mt_variant **v,
                                struct mt_kernel_binary **b);

/* The activation scales the quantizer proofs run against (test_numeric's
 * and gpu_numeric's): the e4m3 and the int8 scale of every bf16 amax in
 * [1, 4) (the steps scale with the exponent), scales near the ends of the
 * float range, and 1. Writes at most MT_TEST_QUANT_SCALES_MAX; returns how
 * many. */
#define MT_TEST_QUANT_SCALES_MAX 600
size_t mt_test_quant_scales(float *out);

#endif

/*
 * Test helpers (see support.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "tests/support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/cuda_driver.h"
#include "common/util.h"
#include "moetune/gen.h"
#include "moetune/numeric.h"

const char *mt_test_tmpdir(const char *tag)
{
    static char path[512];
    const char *base = getenv("MT_TEST_TMP");
    snprintf(path, sizeof path, "%s/tmp-%s-%ld", base && *base ? base : "/tmp", tag,
             (long)getpid());
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0)
        fprintf(stderr, "warning: could not clear %s\n", path);
    if (mt_mkdirs(path, NULL, 0) != MT_OK) {
        fprintf(stderr, "cannot create %s\n", path);
        exit(1);
    }
    return path;
}

void mt_rng_seed(mt_rng *r, uint64_t seed) { r->s = seed * 0x9E3779B97F4A7C15ull + 1; }

uint64_t mt_rng_next(mt_rng *r)
{
    uint64_t x = r->s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return r->s = x;
}

float mt_rng_uniform(mt_rng *r) { return (float)(mt_rng_next(r) >> 40) / (float)(1ull << 24); }

float mt_rng_normal(mt_rng *r)
{
    float u1 = mt_rng_uniform(r), u2 = mt_rng_uniform(r);
    if (u1 < 1e-7f)
        u1 = 1e-7f;
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

void mt_test_require_gpu(void)
{
    char msg[256];
    mt_status st = mt_cuda_load(msg, sizeof msg);
    if (st != MT_OK) {
        printf("SKIPPED: this test needs a GPU: %s\n", msg);
        fflush(stdout);
        exit(MT_TEST_SKIP);
    }
}

mt_variant *mt_test_sm90a_defaults(mt_gen *g, const char *family, size_t *n)
{
    mt_gen_filter f = {.family = family, .arch = "sm_90a", .defaults_only = 1};
    mt_variant *v = NULL;
    *n = 0;
    if (mt_gen_enumerate(g, &f, &v, n, NULL) || *n == 0)
        fail_msg("%s defaults for sm_90a: %s", family, *n ? "none" : mt_gen_errmsg(g));
    return v;
}

mt_gen *mt_test_open_templates(void)
{
    mt_gen_config cfg = {.no_cache = 1};
    mt_gen *g = NULL;
    if (mt_gen_open(&cfg, &g))
        fail_msg("templates (MT_TEMPLATE_DIR=%s): %s", getenv("MT_TEMPLATE_DIR") ?
                 getenv("MT_TEMPLATE_DIR") : "(unset)", mt_gen_errmsg(g));
    return g;
}

size_t mt_test_compile_defaults(mt_gen *g, const char *family, const char *arch,
                                const char *const *kv, int nkv, mt_variant **v, mt_kernel_binary **b)
{
    mt_gen_filter f = {.family = family, .arch = arch, .defaults_only = 1};
    for (int i = 0; i + 1 < nkv && f.nparams < MT_GEN_MAX_FILTERS; i += 2, f.nparams++) {
        f.params[f.nparams].name = kv[i];
        f.params[f.nparams].value = kv[i + 1];
    }
    size_t n = 0;
    *v = NULL;
    *b = NULL;
    if (mt_gen_enumerate(g, &f, v, &n, NULL) || n == 0)
        fail_msg("%s defaults for %s: %s", family, arch, n ? "none" : mt_gen_errmsg(g));
    const mt_status st = mt_gen_compile(g, *v, n, b);
    for (size_t i = 0; i < n; i++)
        if (*b && (*b)[i].status)
            fail_msg("compiling %s: %.4000s", (*b)[i].variant.name, (*b)[i].log ? (*b)[i].log : "");
    if (st)
        fail_msg("compiling %s defaults for %s: %s", family, arch, mt_gen_errmsg(g));
    return n;
}

size_t mt_test_quant_scales(float *out)
{
    size_t n = 0;
    for (uint32_t b = 0x3f80; b < 0x4080; b++) {
        out[n++] = mt_act_scale(mt_bf16_to_f32((uint16_t)b), MT_DTYPE_FP8_E4M3);
        out[n++] = mt_act_scale(mt_bf16_to_f32((uint16_t)b), MT_DTYPE_INT8);
    }
    static const int ex[] = {-140, -126, -70, -64, -20, 20, 64, 70, 120, 127};
    for (size_t i = 0; i < sizeof ex / sizeof ex[0]; i++)
        out[n++] = ldexpf(1.37f, ex[i]);
    out[n++] = 1.0f;
    return n;
}

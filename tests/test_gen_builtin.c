/*
 * The real templates (env MT_TEMPLATE_DIR, set by CTest to templates/):
 * every family loads, its default set for sm_90a and sm_80 is non-empty
 * (a Hopper-only family prunes every sm_80 point as "needs sm_90a"), and a
 * sample of it compiles with NVRTC. Kept apart from tests/test_gen.c
 * so that templates still being written do not hide generator failures.
 */
#include "tests/support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moetune/gen.h"

#define SAMPLE_PER_FAMILY 4

static void test_builtin_templates_compile(void **state)
{
    (void)state;
    const char *dir = getenv("MT_TEMPLATE_DIR");
    if (!dir || !*dir)
        fail_msg("MT_TEMPLATE_DIR is not set (CTest sets it to the source templates/ folder)");
    mt_gen_config cfg = {.no_cache = 1};
    mt_gen *g = NULL;
    mt_status st = mt_gen_open(&cfg, &g);
    if (st)
        fail_msg("loading the templates of %s: %s", dir, mt_gen_errmsg(g));
    if (mt_gen_family_count(g) == 0)
        fail_msg("no templates in %s: the real kernel templates (templates/*.lua) are missing",
                 dir);
    static const char *const archs[] = {"sm_90a", "sm_80"};
    for (size_t f = 0; f < mt_gen_family_count(g); f++) {
        const char *family = mt_gen_family_name(g, f);
        char hash[65];
        assert_int_equal(mt_gen_template_hash(g, family, hash), MT_OK);
        for (size_t a = 0; a < 2; a++) {
            mt_gen_filter flt = {.family = family, .arch = archs[a], .defaults_only = 1};
            mt_variant *v = NULL;
            size_t n = 0;
            mt_prune_report r;
            st = mt_gen_enumerate(g, &flt, &v, &n, &r);
            if (st)
                fail_msg("%s for %s: %s", family, archs[a], mt_gen_errmsg(g));
            if (n == 0 && a == 1 && r.nreasons == 1 && !strcmp(r.reasons[0].reason, "needs sm_90a")) {
                /* A Hopper-only family (wgmma): it must say so for every point. */
                printf("  %s sm_80: every default point pruned, \"needs sm_90a\"\n", family);
                free(v);
                continue;
            }
            if (n == 0)
                fail_msg("%s has no valid default variant for %s", family, archs[a]);
            /* An even spread over the default set. */
            mt_variant sample[SAMPLE_PER_FAMILY];
            size_t ns = n < SAMPLE_PER_FAMILY ? n : SAMPLE_PER_FAMILY;
            for (size_t i = 0; i < ns; i++)
                sample[i] = v[i * n / ns];
            free(v);
            mt_kernel_binary *b = NULL;
            st = mt_gen_compile(g, sample, ns, &b);
            if (st)
                fail_msg("%s for %s: %s", family, archs[a], mt_gen_errmsg(g));
            for (size_t i = 0; i < ns; i++) {
                assert_int_equal(b[i].status, MT_OK);
                assert_true(b[i].image_len > 0);
            }
            printf("  %s %s: %d default points, %d valid, compiled %zu\n", family, archs[a],
                   r.enumerated, r.valid, ns);
            mt_kernel_binaries_free(b, ns);
        }
    }
    mt_gen_close(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin_templates_compile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

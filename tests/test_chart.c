/*
 * Tests of the benchmark's SVG chart writer and the roofline arithmetic.
 */
#define _POSIX_C_SOURCE 200809L
#include "tests/support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/chart.h"
#include "tuner/roofline.h"

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static void test_chart_document(void **state)
{
    (void)state;
    const double M[] = {1, 8, 64, 512, 4096};
    const double a[] = {45, 160, 330, 398, 1539}, b[] = {35, 130, 296, 329, NAN};
    mt_chart c = {.title = "qwen3 <bf16> & co", .y_label = "us", .log_y = 1, .x = M, .n = 5,
                  .series = {{"moetune", a}, {"peer", b}}, .nseries = 2};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(mt_chart_write_doc(f, &c, 1), MT_OK);
    fclose(f);
    assert_non_null(strstr(buf, "<svg"));
    assert_non_null(strstr(buf, "</svg>"));
    assert_non_null(strstr(buf, "qwen3 &lt;bf16&gt; &amp; co"));   /* escaped title */
    assert_int_equal(count(buf, "<polyline"), 2);
    /* 5 points in the first series, 4 in the second (NaN left out). */
    char *p1 = strstr(buf, "points=\""), *p2 = strstr(p1 + 1, "points=\"");
    int commas1 = 0, commas2 = 0;
    for (char *q = p1 + 8; *q != '"'; q++)
        commas1 += *q == ',';
    for (char *q = p2 + 8; *q != '"'; q++)
        commas2 += *q == ',';
    assert_int_equal(commas1, 5);
    assert_int_equal(commas2, 4);
    /* x is log2: M=64 lies halfway between M=8 and M=512. */
    double x8, x64, x512, y;
    assert_int_equal(sscanf(p1 + 8, "%*f,%*f %lf,%lf %lf,%lf %lf", &x8, &y, &x64, &y, &x512), 5);
    assert_true(fabs((x8 + x512) / 2 - x64) < 0.2);
    free(buf);
    mt_chart bad = c;
    double back[] = {1, 8, 4, 512, 4096};
    bad.x = back;
    f = fopen("/dev/null", "w");
    assert_int_equal(mt_chart_write(f, &bad, 800, 300, 0), MT_ERR_INVALID_ARG);   /* M not increasing */
    fclose(f);
    /* Every value one power of ten on a log scale (a span of 0 once gave
     * -nan coordinates), and M up to 2^20 written whole, not as 1.04858e+06. */
    const double big[] = {1, 1048576}, ten[] = {10, 10};
    mt_chart flat = {.title = "flat", .y_label = "us", .log_y = 1, .x = big, .n = 2,
                     .series = {{"moetune", ten}}, .nseries = 1};
    f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(mt_chart_write_doc(f, &flat, 1), MT_OK);
    fclose(f);
    assert_null(strstr(buf, "nan"));
    assert_null(strstr(buf, "inf"));
    assert_non_null(strstr(buf, ">1048576</text>"));
    free(buf);
}

static void test_roofline_matches_targets_file(void **state)
{
    (void)state;
    /* ../shared/targets.md: qwen3-30b-a3b M=128, 128 experts hit: 281.2 us (memory bound);
     * M=4096: 391.4 us (compute bound); mixtral M=1, 2 experts: 163.9 us. */
    mt_problem p;
    mt_problem_init(&p, 128, 128, 8, 2048, 768);
    mt_roofline r = mt_roofline_of(&p, 128);
    assert_false(r.compute_bound);
    assert_true(fabs(r.us - 281.2) < 1.0);
    p.M = 4096;
    r = mt_roofline_of(&p, 128);
    assert_true(r.compute_bound);
    assert_true(fabs(r.us - 391.4) < 1.0);
    mt_problem_init(&p, 1, 8, 2, 4096, 14336);
    r = mt_roofline_of(&p, 2);
    assert_true(fabs(r.us - 163.9) < 1.0);
    /* Expected experts hit under uniform routing: 1 token hits exactly topk;
     * targets.md counts 50 of 128 hit at M=8 and 110 at M=32 (one draw). */
    mt_problem_init(&p, 1, 128, 8, 2048, 768);
    assert_true(fabs(mt_expected_experts_hit(&p) - 8.0) < 1e-9);
    p.M = 8;
    assert_true(fabs(mt_expected_experts_hit(&p) - 50.0) < 3.0);
    p.M = 32;
    assert_true(fabs(mt_expected_experts_hit(&p) - 110.0) < 4.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chart_document),
        cmocka_unit_test(test_roofline_matches_targets_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

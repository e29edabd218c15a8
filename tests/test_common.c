/*
 * Tests of the common layer: status names, variants, SHA-256, driver loading,
 * mt_mkdirs of an empty path.
 */
#include "tests/support.h"

#include <string.h>

#include "common/cuda_driver.h"
#include "common/util.h"
#include "moetune/variant.h"

static void test_status_names(void **state)
{
    (void)state;
    for (int s = 0; s < MT_STATUS_COUNT_; s++)
        assert_string_not_equal(mt_status_str((mt_status)s), "unknown status");
    assert_string_equal(mt_status_str((mt_status)999), "unknown status");
}

static void test_sha256_known_vectors(void **state)
{
    (void)state;
    char hex[65];
    mt_sha256_hex("", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    mt_sha256_hex("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    mt_sha256_hex(two_blocks, strlen(two_blocks), hex);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

static void test_variant_roundtrip(void **state)
{
    (void)state;
    mt_variant v = {0};
    strcpy(v.family, "grouped_gemm");
    strcpy(v.arch, "sm_90a");
    v.template_version = 3;
    v.threads = 128;
    v.smem_bytes = 49152;
    assert_int_equal(mt_variant_add(&v, "dtype", "bf16"), MT_OK);
    assert_int_equal(mt_variant_add(&v, "BLOCK_M", "64"), MT_OK);
    assert_int_equal(mt_variant_add(&v, "BLOCK_M", "32"), MT_ERR_INVALID_ARG);
    assert_int_equal(mt_variant_add(&v, "bad;name", "1"), MT_ERR_INVALID_ARG);
    const char *ab[] = {NULL, "m"};
    assert_int_equal(mt_variant_make_name(&v, ab), MT_OK);
    assert_string_equal(v.name, "mtk_grouped_gemm_bf16_m64");
    assert_int_equal(mt_variant_int(&v, "BLOCK_M", 0), 64);
    assert_int_equal(mt_variant_int(&v, "dtype", -1), -1);
    char text[1024], msg[128];
    assert_int_equal(mt_variant_format(&v, text, sizeof text), MT_OK);
    mt_variant w;
    assert_int_equal(mt_variant_parse(text, &w, msg, sizeof msg), MT_OK);
    assert_memory_equal(&v, &w, sizeof v);
    assert_int_equal(mt_variant_parse("family=x;bogus", &w, msg, sizeof msg), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(msg, "bogus"));
    assert_int_equal(mt_variant_parse(NULL, &w, msg, sizeof msg), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(msg, "no variant text"));
    assert_int_equal(mt_variant_parse(text, NULL, msg, sizeof msg), MT_ERR_INVALID_ARG);
}

static void test_driver_absent_is_a_status(void **state)
{
    (void)state;
    char msg[256] = "";
    mt_status st = mt_cuda_load(msg, sizeof msg);
    if (st == MT_OK)
        return; /* a GPU machine: nothing to check here */
    assert_true(st == MT_ERR_NO_DRIVER || st == MT_ERR_NO_DEVICE);
    assert_true(strlen(msg) > 10);
    mt_gpu g;
    assert_int_equal(mt_gpu_open(0, &g, msg, sizeof msg), st);
    mt_gpu_close(&g);
    mt_gpu_close(NULL);
}

/* The NVRTC arch of each compute capability, and none where no kernel of
 * this build runs (an sm_90a cubin does not load on 10.0 or 12.0, an sm_80
 * one not on 7.5; such a GPU once got a context that failed only at its
 * first kernel load). */
static void test_gpu_arch_by_compute_capability(void **state)
{
    (void)state;
    static const struct {
        int major, minor;
        const char *arch;
    } cases[] = {{7, 5, NULL},      {8, 0, "sm_80"},   {8, 6, "sm_86"},   {8, 7, "sm_80"},
                 {8, 9, "sm_89"},   {9, 0, "sm_90a"},  {10, 0, NULL},     {12, 0, NULL}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mt_gpu g;
        memset(&g, 0, sizeof g);
        g.cc_major = cases[i].major;
        g.cc_minor = cases[i].minor;
        const char *arch = mt_gpu_arch(&g);
        if (cases[i].arch)
            assert_string_equal(arch, cases[i].arch);
        else
            assert_null(arch);
    }
}

/* An empty path names no folder (it was once "made" with MT_OK, and the
 * CLI's "DIR/NAME" with DIR "" wrote into "/"). */
static void test_mkdirs_refuses_empty_path(void **state)
{
    (void)state;
    char msg[128] = "";
    assert_int_equal(mt_mkdirs("", msg, sizeof msg), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(msg, "empty path"));
    assert_int_equal(mt_mkdirs(NULL, msg, sizeof msg), MT_ERR_INVALID_ARG);
    assert_int_equal(mt_mkdirs("", NULL, 0), MT_ERR_INVALID_ARG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_names),
        cmocka_unit_test(test_sha256_known_vectors),
        cmocka_unit_test(test_variant_roundtrip),
        cmocka_unit_test(test_driver_absent_is_a_status),
        cmocka_unit_test(test_gpu_arch_by_compute_capability),
        cmocka_unit_test(test_mkdirs_refuses_empty_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

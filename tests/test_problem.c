/*
 * Tests of moetune/problem.h: names and parsing, validation (each rule gives
 * its status and a message naming the field), weight sizes.
 */
#include "tests/support.h"

#include <string.h>

#include "moetune/problem.h"

static void test_name_round_trips(void **state)
{
    (void)state;
    for (int i = 0; i < MT_DTYPE_COUNT_; i++) {
        mt_dtype d = MT_DTYPE_COUNT_;
        assert_int_equal(mt_dtype_parse(mt_dtype_name((mt_dtype)i), &d), MT_OK);
        assert_int_equal(d, i);
    }
    for (int i = 0; i < MT_QUANT_COUNT_; i++) {
        mt_quant_mode q = MT_QUANT_COUNT_;
        assert_int_equal(mt_quant_mode_parse(mt_quant_mode_name((mt_quant_mode)i), &q), MT_OK);
        assert_int_equal(q, i);
    }
    for (int i = 0; i < MT_FORMAT_COUNT_; i++) {
        mt_act_format f = MT_FORMAT_COUNT_;
        assert_int_equal(mt_act_format_parse(mt_act_format_name((mt_act_format)i), &f), MT_OK);
        assert_int_equal(f, i);
    }
    for (int i = 0; i < MT_ACT_COUNT_; i++) {
        mt_activation a = MT_ACT_COUNT_;
        assert_int_equal(mt_activation_parse(mt_activation_name((mt_activation)i), &a), MT_OK);
        assert_int_equal(a, i);
    }
    /* The exact spellings other layers (CLI, database, templates) rely on. */
    assert_string_equal(mt_dtype_name(MT_DTYPE_FP8_E4M3), "fp8e4m3");
    assert_string_equal(mt_quant_mode_name(MT_QUANT_FP8_BLOCK), "fp8-block");
    assert_string_equal(mt_quant_mode_name(MT_QUANT_INT8_PER_TOKEN), "int8-token");
    assert_string_equal(mt_quant_mode_name(MT_QUANT_W4A16), "w4a16");
    assert_string_equal(mt_act_format_name(MT_FORMAT_BATCHED), "batched");
    assert_string_equal(mt_activation_name(MT_ACT_GELU), "gelu");
    assert_string_equal(mt_dtype_name((mt_dtype)99), "unknown");
    mt_dtype d;
    mt_quant_mode q;
    mt_act_format f;
    mt_activation a;
    assert_int_equal(mt_dtype_parse("bfloat16", &d), MT_ERR_INVALID_ARG);
    assert_int_equal(mt_dtype_parse(NULL, &d), MT_ERR_INVALID_ARG);
    assert_int_equal(mt_quant_mode_parse("fp8", &q), MT_ERR_INVALID_ARG);
    assert_int_equal(mt_act_format_parse("", &f), MT_ERR_INVALID_ARG);
    assert_int_equal(mt_activation_parse("relu", &a), MT_ERR_INVALID_ARG);
    /* A NULL result pointer is refused, not written through. */
    assert_int_equal(mt_dtype_parse("bf16", NULL), MT_ERR_INVALID_ARG);
    assert_int_equal(mt_quant_mode_parse("fp8-block", NULL), MT_ERR_INVALID_ARG);
    assert_int_equal(mt_act_format_parse("standard", NULL), MT_ERR_INVALID_ARG);
    assert_int_equal(mt_activation_parse("silu", NULL), MT_ERR_INVALID_ARG);
    assert_int_equal(mt_routing_parse("uniform", NULL), MT_ERR_INVALID_ARG);
    mt_problem_init(NULL, 1, 8, 2, 128, 128);
    assert_int_equal(mt_problem_weight_bytes(NULL, 0), 0);
    assert_int_equal(mt_quant_weight_dtype(NULL, MT_DTYPE_BF16), MT_DTYPE_BF16);
}

static void test_dtype_helpers(void **state)
{
    (void)state;
    assert_int_equal(mt_dtype_size(MT_DTYPE_BF16), 2);
    assert_int_equal(mt_dtype_size(MT_DTYPE_FP32), 4);
    assert_int_equal(mt_dtype_size(MT_DTYPE_FP8_E4M3), 1);
    assert_int_equal(mt_dtype_size(MT_DTYPE_INT64), 8);
    assert_int_equal(mt_dtype_size(MT_DTYPE_COUNT_), 0);
    mt_quant_config qc = {.mode = MT_QUANT_NONE};
    assert_int_equal(mt_quant_weight_dtype(&qc, MT_DTYPE_FP16), MT_DTYPE_FP16);
    qc.mode = MT_QUANT_FP8_BLOCK;
    assert_int_equal(mt_quant_weight_dtype(&qc, MT_DTYPE_BF16), MT_DTYPE_FP8_E4M3);
    qc.mode = MT_QUANT_INT8_PER_TENSOR;
    assert_int_equal(mt_quant_weight_dtype(&qc, MT_DTYPE_BF16), MT_DTYPE_INT8);
    qc.mode = MT_QUANT_W8A16;
    assert_int_equal(mt_quant_weight_dtype(&qc, MT_DTYPE_BF16), MT_DTYPE_INT8);
    qc.has_zero_point = 1;
    assert_int_equal(mt_quant_weight_dtype(&qc, MT_DTYPE_BF16), MT_DTYPE_UINT8);
    qc.mode = MT_QUANT_W4A16;
    assert_int_equal(mt_quant_weight_dtype(&qc, MT_DTYPE_BF16), MT_DTYPE_UINT8);
    int n8a8 = 0;
    for (int i = 0; i < MT_QUANT_COUNT_; i++)
        n8a8 += mt_quant_is_w8a8((mt_quant_mode)i);
    assert_int_equal(n8a8, 6);
    assert_false(mt_quant_is_w8a8(MT_QUANT_W8A16));
    assert_true(mt_quant_is_weight_only(MT_QUANT_W4A16));
    assert_int_equal(mt_quant_granularity(MT_QUANT_INT8_BLOCK), MT_GRAN_BLOCK);
    assert_int_equal(mt_quant_act_dtype(MT_QUANT_INT8_PER_TOKEN), MT_DTYPE_INT8);
}

static void test_weight_bytes(void **state)
{
    (void)state;
    mt_problem p;
    mt_problem_init(&p, 1, 8, 2, 256, 128); /* w1 256 x 256, w2 256 x 128 */
    assert_int_equal(mt_problem_weight_bytes(&p, 0), 256 * 256 * 2);
    assert_int_equal(mt_problem_weight_bytes(&p, 1), 256 * 128 * 2);
    p.quant.mode = MT_QUANT_FP8_PER_TENSOR;
    assert_int_equal(mt_problem_weight_bytes(&p, 0), 256 * 256 + 4);
    p.quant.mode = MT_QUANT_INT8_PER_TOKEN;
    assert_int_equal(mt_problem_weight_bytes(&p, 1), 256 * 128 + 4 * 256);
    p.quant.mode = MT_QUANT_FP8_BLOCK;
    assert_int_equal(mt_problem_weight_bytes(&p, 0), 256 * 256 + 4 * 2 * 2);
    assert_int_equal(mt_problem_weight_bytes(&p, 1), 256 * 128 + 4 * 2 * 1);
    p.quant.mode = MT_QUANT_W8A16;
    p.quant.group_size = 64;
    assert_int_equal(mt_problem_weight_bytes(&p, 0), 256 * 256 + 4 * 256 * 4);
    p.quant.mode = MT_QUANT_W4A16;
    p.quant.has_zero_point = 1;
    /* w2: 256 rows of 128 -> 64 packed bytes, 2 groups: scale + zero byte. */
    assert_int_equal(mt_problem_weight_bytes(&p, 1), 256 * 64 + 256 * 2 * (4 + 1));
}

/* Expect status st and a message containing `needle`. */
static void expect_invalid(const mt_problem *p, mt_status st, const char *needle)
{
    char msg[256] = "x";
    mt_status got = mt_problem_validate(p, msg, sizeof msg);
    if (got != st || !strstr(msg, needle)) {
        print_error("status %d (want %d), message '%s' (want '%s')\n", (int)got, (int)st, msg, needle);
        fail();
    }
}

static void test_validate_ok(void **state)
{
    (void)state;
    mt_problem p;
    mt_problem_init(&p, 0, 8, 2, 128, 64);
    char msg[64] = "stale";
    assert_int_equal(mt_problem_validate(&p, msg, sizeof msg), MT_OK);
    assert_string_equal(msg, "");
    assert_int_equal(p.local_E, 8);
    assert_int_equal(p.dtype, MT_DTYPE_BF16);
    assert_int_equal(p.topk_ids_dtype, MT_DTYPE_INT32);
    assert_int_equal(mt_problem_validate(&p, NULL, 0), MT_OK);
    p.quant.mode = MT_QUANT_W4A16;
    p.quant.group_size = 64;
    p.quant.has_zero_point = 1;
    assert_int_equal(mt_problem_validate(&p, NULL, 0), MT_OK);
    mt_problem_init(&p, 5, 8, 2, 128, 64);
    p.quant.mode = MT_QUANT_INT8_PER_TENSOR;
    p.quant.static_act_scale = 1;
    p.has_expert_map = 1;
    p.local_E = 2;
    p.format = MT_FORMAT_BATCHED;
    p.max_tokens = 16;
    assert_int_equal(mt_problem_validate(&p, NULL, 0), MT_OK);
    assert_int_equal(mt_problem_validate(NULL, msg, sizeof msg), MT_ERR_INVALID_ARG);
}

static void test_validate_shapes(void **state)
{
    (void)state;
    mt_problem p;
    mt_problem_init(&p, -1, 8, 2, 128, 64);
    expect_invalid(&p, MT_ERR_SHAPE, "M=-1");
    mt_problem_init(&p, 1, 0, 1, 128, 64);
    expect_invalid(&p, MT_ERR_SHAPE, "E=0");
    mt_problem_init(&p, 1, 1025, 1, 128, 64);
    expect_invalid(&p, MT_ERR_SHAPE, "E=1025");
    mt_problem_init(&p, 1, 8, 0, 128, 64);
    expect_invalid(&p, MT_ERR_SHAPE, "topk=0");
    mt_problem_init(&p, 1, 8, 9, 128, 64);
    expect_invalid(&p, MT_ERR_SHAPE, "topk=9 exceeds E=8");
    mt_problem_init(&p, 1, 8, 2, 100, 64);
    expect_invalid(&p, MT_ERR_ALIGNMENT, "K=100 must be a multiple of 8");
    mt_problem_init(&p, 1, 8, 2, 0, 64);
    expect_invalid(&p, MT_ERR_ALIGNMENT, "K=0");
    mt_problem_init(&p, 1, 8, 2, 128, 20);
    expect_invalid(&p, MT_ERR_ALIGNMENT, "N=20 must be a multiple of 8");
    mt_problem_init(&p, 1, 8, 2, 1 << 20, 64);
    expect_invalid(&p, MT_ERR_SHAPE, "K=1048576");
    mt_problem_init(&p, (int64_t)1 << 40, 8, 2, 128, 64);
    expect_invalid(&p, MT_ERR_SHAPE, "M=1099511627776");
}

static void test_validate_types(void **state)
{
    (void)state;
    mt_problem p;
    mt_problem_init(&p, 1, 8, 2, 128, 64);
    p.dtype = MT_DTYPE_FP32;
    expect_invalid(&p, MT_ERR_DTYPE, "element dtype must be bf16 or fp16");
    mt_problem_init(&p, 1, 8, 2, 128, 64);
    p.topk_ids_dtype = MT_DTYPE_INT64;
    expect_invalid(&p, MT_ERR_DTYPE,
                   "topk_ids must be int32 (int64 is not accepted; convert the tensor)");
    mt_problem_init(&p, 1, 8, 2, 128, 64);
    p.activation = (mt_activation)7;
    expect_invalid(&p, MT_ERR_INVALID_ARG, "activation");
    mt_problem_init(&p, 1, 8, 2, 128, 64);
    p.format = (mt_act_format)-1;
    expect_invalid(&p, MT_ERR_INVALID_ARG, "format");
    mt_problem_init(&p, 1, 8, 2, 128, 64);
    p.quant.mode = MT_QUANT_COUNT_;
    expect_invalid(&p, MT_ERR_INVALID_ARG, "quant mode");
}

static void test_validate_quant(void **state)
{
    (void)state;
    mt_problem p;
    mt_problem_init(&p, 1, 8, 2, 4096, 1024);
    p.quant.mode = MT_QUANT_W4A16;
    p.quant.group_size = 48;
    expect_invalid(&p, MT_ERR_INVALID_ARG, "quant w4a16 needs group_size 32, 64 or 128 (got 48)");
    mt_problem_init(&p, 1, 8, 2, 4000, 1024);
    p.quant.mode = MT_QUANT_W8A16;
    p.quant.group_size = 128;
    expect_invalid(&p, MT_ERR_ALIGNMENT, "K=4000 is not a multiple of group_size=128");
    mt_problem_init(&p, 1, 8, 2, 4096, 1000);
    p.quant.mode = MT_QUANT_W8A16;
    p.quant.group_size = 128;
    expect_invalid(&p, MT_ERR_ALIGNMENT, "N=1000 is not a multiple of group_size=128");
    mt_problem_init(&p, 1, 8, 2, 4096, 1024);
    p.quant.mode = MT_QUANT_FP8_BLOCK;
    p.quant.group_size = 128;
    expect_invalid(&p, MT_ERR_INVALID_ARG, "group_size=128");
    mt_problem_init(&p, 1, 8, 2, 4096, 1024);
    p.quant.mode = MT_QUANT_FP8_PER_TOKEN;
    p.quant.has_zero_point = 1;
    expect_invalid(&p, MT_ERR_INVALID_ARG, "has_zero_point");
    mt_problem_init(&p, 1, 8, 2, 4096, 1024);
    p.quant.mode = MT_QUANT_FP8_BLOCK;
    p.quant.static_act_scale = 1;
    expect_invalid(&p, MT_ERR_INVALID_ARG, "static_act_scale");
    mt_problem_init(&p, 1, 8, 2, 4096, 1024);
    p.quant.static_act_scale = 1; /* mode none */
    expect_invalid(&p, MT_ERR_INVALID_ARG, "static_act_scale");
}

static void test_validate_experts_and_format(void **state)
{
    (void)state;
    mt_problem p;
    mt_problem_init(&p, 1, 8, 2, 128, 64);
    p.local_E = 4;
    expect_invalid(&p, MT_ERR_SHAPE, "local_E=4 must equal E=8");
    p.has_expert_map = 1;
    p.local_E = 9;
    expect_invalid(&p, MT_ERR_SHAPE, "local_E=9");
    p.local_E = 0;
    expect_invalid(&p, MT_ERR_SHAPE, "local_E=0");
    mt_problem_init(&p, 1, 8, 2, 128, 64);
    p.format = MT_FORMAT_BATCHED;
    expect_invalid(&p, MT_ERR_SHAPE, "max_tokens=0");
    /* The first problem wins: K is checked before the quant config. */
    mt_problem_init(&p, 1, 8, 2, 100, 64);
    p.quant.mode = MT_QUANT_W4A16;
    expect_invalid(&p, MT_ERR_ALIGNMENT, "K=100");
    /* A tiny message buffer is still NUL-terminated. */
    char small[8];
    assert_int_equal(mt_problem_validate(&p, small, sizeof small), MT_ERR_ALIGNMENT);
    assert_true(strlen(small) < sizeof small);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_name_round_trips),
        cmocka_unit_test(test_dtype_helpers),
        cmocka_unit_test(test_weight_bytes),
        cmocka_unit_test(test_validate_ok),
        cmocka_unit_test(test_validate_shapes),
        cmocka_unit_test(test_validate_types),
        cmocka_unit_test(test_validate_quant),
        cmocka_unit_test(test_validate_experts_and_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

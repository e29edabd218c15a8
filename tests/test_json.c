/*
 * Tests of the strict JSON reader, the writer and base64 (common/json.h).
 */
#include "tests/support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"

static mt_json *parse_ok(const char *text)
{
    mt_json *root = NULL;
    char msg[256] = "";
    mt_status st = mt_json_parse(text, strlen(text), NULL, &root, msg, sizeof msg);
    if (st != MT_OK)
        fail_msg("'%s' should parse: %s", text, msg);
    return root;
}

static void test_parse_values(void **state)
{
    (void)state;
    mt_json *r = parse_ok(" {\"a\": [1, -2.5e3, true, false, null], \"s\": \"x\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\","
                          " \"big\": 9223372036854775807, \"frac\": 0.125, \"o\": {}} ");
    assert_int_equal(mt_json_type_of(r), MT_JSON_OBJECT);
    assert_int_equal(mt_json_len(r), 5);
    const mt_json *a = mt_json_get(r, "a");
    assert_int_equal(mt_json_len(a), 5);
    int64_t i;
    double d;
    int b;
    assert_true(mt_json_int(mt_json_at(a, 0), &i));
    assert_int_equal(i, 1);
    assert_false(mt_json_int(mt_json_at(a, 1), &i));
    assert_true(mt_json_num(mt_json_at(a, 1), &d));
    assert_true(d == -2500.0);
    assert_true(mt_json_bool(mt_json_at(a, 2), &b) && b == 1);
    assert_true(mt_json_bool(mt_json_at(a, 3), &b) && b == 0);
    assert_int_equal(mt_json_type_of(mt_json_at(a, 4)), MT_JSON_NULL);
    assert_null(mt_json_at(a, 5));
    size_t n;
    const char *s = mt_json_str(mt_json_get(r, "s"), &n);
    assert_non_null(s);
    const char expect[] = "x\"\\/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80";
    assert_int_equal(n, sizeof expect - 1);
    assert_memory_equal(s, expect, n);
    assert_true(mt_json_int(mt_json_get(r, "big"), &i));
    assert_true(i == INT64_MAX);
    assert_true(mt_json_num(mt_json_get(r, "frac"), &d) && d == 0.125);
    assert_int_equal(mt_json_len(mt_json_get(r, "o")), 0);
    assert_null(mt_json_get(r, "missing"));
    assert_string_equal(mt_json_key_at(r, 1), "s");
    assert_null(mt_json_str(mt_json_get(r, "a"), NULL));
    mt_json_free(r);
    mt_json_free(NULL);
}

static void test_rejects(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "", " ", "[1,]", "{\"a\":1,}", "01", "1.", "-", ".5", "1e", "+1", "tru", "nul", "NaN",
        "[1 2]", "{\"a\" 1}", "{a:1}", "\"abc", "\"a\nb\"", "\"\\x\"", "\"\\u12\"",
        "\"\\udc00\"", "\"\\ud800\"", "\"\\ud800\\u0041\"", "\"\xc0\x80\"", "\"\xed\xa0\x80\"",
        "\"\xff\"", "{\"a\":1,\"a\":2}", "[1] x", "// c\n1", "/* c */ 1", "[", "{", "1e999",
        "'a'", "[\"a\"]]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mt_json *r = (mt_json *)1;
        char msg[256] = "";
        mt_status st = mt_json_parse(bad[i], strlen(bad[i]), NULL, &r, msg, sizeof msg);
        if (st != MT_ERR_INVALID_ARG)
            fail_msg("'%s' should be refused (status %d)", bad[i], st);
        assert_null(r);
        assert_non_null(strstr(msg, "at byte"));
    }
    /* The offset points at the offending character. */
    mt_json *r;
    char msg[256];
    assert_int_equal(mt_json_parse("[1, x]", 6, NULL, &r, msg, sizeof msg), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(msg, "byte 4"));
    /* An embedded NUL is data, not an end: refused as a control character. */
    assert_int_equal(mt_json_parse("\"a\0b\"", 5, NULL, &r, msg, sizeof msg), MT_ERR_INVALID_ARG);
}

static char *nested(int depth)
{
    char *s = malloc((size_t)depth * 2 + 1);
    for (int i = 0; i < depth; i++) {
        s[i] = '[';
        s[depth + i] = ']';
    }
    s[depth * 2] = '\0';
    return s;
}

static void test_limits(void **state)
{
    (void)state;
    mt_json *r;
    char msg[256];
    char *ok = nested(MT_JSON_DEFAULT_MAX_DEPTH);
    assert_int_equal(mt_json_parse(ok, strlen(ok), NULL, &r, msg, sizeof msg), MT_OK);
    mt_json_free(r);
    free(ok);
    /* Far deeper than the limit: refused without deep recursion. */
    char *deep = nested(100000);
    assert_int_equal(mt_json_parse(deep, strlen(deep), NULL, &r, msg, sizeof msg),
                     MT_ERR_INVALID_ARG);
    assert_non_null(strstr(msg, "nesting"));
    free(deep);
    mt_json_limits lim = {.max_bytes = 8};
    assert_int_equal(mt_json_parse("[1,2,3,4,5]", 11, &lim, &r, msg, sizeof msg), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(msg, "limit"));
    mt_json_limits slim = {.max_string = 3};
    assert_int_equal(mt_json_parse("\"abc\"", 5, &slim, &r, msg, sizeof msg), MT_OK);
    mt_json_free(r);
    assert_int_equal(mt_json_parse("\"abcd\"", 6, &slim, &r, msg, sizeof msg), MT_ERR_INVALID_ARG);
    /* Many members: duplicate detection stays fast and exact. */
    mt_buf b = {0};
    mt_buf_puts(&b, "{");
    for (int i = 0; i < 20000; i++)
        mt_buf_printf(&b, "%s\"k%d\":%d", i ? "," : "", i, i);
    mt_buf_puts(&b, "}");
    assert_int_equal(mt_json_parse(b.data, b.len, NULL, &r, msg, sizeof msg), MT_OK);
    assert_int_equal(mt_json_len(r), 20000);
    mt_json_free(r);
    b.data[b.len - 1] = ',';
    mt_buf_puts(&b, "\"k777\":1}");
    assert_int_equal(mt_json_parse(b.data, b.len, NULL, &r, msg, sizeof msg), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(msg, "duplicate"));
    mt_buf_free(&b);
}

static void test_writer_roundtrip(void **state)
{
    (void)state;
    static const double nums[] = {0.0, 0.1, -1.5e-300, 1e300, 3.141592653589793, 123456789.0};
    const char *strs[] = {"plain", "q\"b\\s/", "ctl\x01\x1f\n\t", "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", ""};
    for (int pretty = 0; pretty < 2; pretty++) {
        mt_json_writer w = {.pretty = pretty};
        mt_jw_begin_object(&w);
        mt_jw_key(&w, "nums");
        mt_jw_begin_array(&w);
        for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
            mt_jw_number(&w, nums[i]);
        mt_jw_end_array(&w);
        mt_jw_key(&w, "strs");
        mt_jw_begin_array(&w);
        for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
            mt_jw_string(&w, strs[i]);
        mt_jw_end_array(&w);
        mt_jw_key(&w, "i");
        mt_jw_int(&w, INT64_MIN);
        mt_jw_key(&w, "k\"ey");
        mt_jw_bool(&w, 1);
        mt_jw_key(&w, "n");
        mt_jw_null(&w);
        mt_jw_key(&w, "nul");
        mt_jw_string_n(&w, "a\0b", 3);
        mt_jw_end_object(&w);
        assert_int_equal(mt_jw_finish(&w), MT_OK);
        mt_json *r = parse_ok(w.buf.data);
        const mt_json *a = mt_json_get(r, "nums");
        for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
            double d;
            assert_true(mt_json_num(mt_json_at(a, i), &d));
            assert_true(d == nums[i]);
        }
        const mt_json *s = mt_json_get(r, "strs");
        for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
            assert_string_equal(mt_json_str(mt_json_at(s, i), NULL), strs[i]);
        int64_t x;
        assert_true(mt_json_int(mt_json_get(r, "i"), &x) && x == INT64_MIN);
        assert_non_null(mt_json_get(r, "k\"ey"));
        size_t n;
        const char *nul = mt_json_str(mt_json_get(r, "nul"), &n);
        assert_int_equal(n, 3);
        assert_memory_equal(nul, "a\0b", 3);
        mt_json_free(r);
        mt_json_writer_free(&w);
    }
}

static void test_writer_misuse(void **state)
{
    (void)state;
    mt_json_writer w = {0};
    mt_jw_begin_object(&w);
    mt_jw_int(&w, 1);   /* no key */
    assert_int_equal(mt_jw_finish(&w), MT_ERR_INVALID_ARG);
    mt_json_writer_free(&w);
    mt_json_writer w2 = {0};
    mt_jw_begin_array(&w2);
    mt_jw_number(&w2, NAN);
    assert_int_equal(mt_jw_finish(&w2), MT_ERR_INVALID_ARG);
    mt_json_writer_free(&w2);
    mt_json_writer w3 = {0};
    mt_jw_begin_array(&w3);
    assert_int_equal(mt_jw_finish(&w3), MT_ERR_INVALID_ARG);   /* unclosed */
    mt_json_writer_free(&w3);
    mt_json_writer w4 = {0};
    mt_jw_begin_array(&w4);
    mt_jw_string(&w4, "\xff");   /* not UTF-8 */
    mt_jw_end_array(&w4);
    assert_int_equal(mt_jw_finish(&w4), MT_ERR_INVALID_ARG);
    mt_json_writer_free(&w4);
    mt_json_writer w5 = {0};
    mt_jw_begin_array(&w5);
    mt_jw_end_object(&w5);       /* wrong closer */
    assert_int_equal(mt_jw_finish(&w5), MT_ERR_INVALID_ARG);
    mt_json_writer_free(&w5);
}

static void test_base64(void **state)
{
    (void)state;
    mt_rng rng;
    mt_rng_seed(&rng, 7);
    uint8_t data[64];
    for (size_t n = 0; n < sizeof data; n++) {
        for (size_t i = 0; i < n; i++)
            data[i] = (uint8_t)mt_rng_next(&rng);
        mt_buf b = {0};
        mt_base64_encode(&b, data, n);
        assert_int_equal(b.len, (n + 2) / 3 * 4);
        uint8_t *out;
        size_t len;
        assert_int_equal(mt_base64_decode(b.data ? b.data : "", b.len, &out, &len), MT_OK);
        assert_int_equal(len, n);
        if (n)
            assert_memory_equal(out, data, n);
        free(out);
        mt_buf_free(&b);
    }
    mt_buf b = {0};
    mt_base64_encode(&b, "foobar", 6);
    assert_string_equal(b.data, "Zm9vYmFy");
    mt_buf_free(&b);
    uint8_t *out;
    size_t len;
    static const char *const bad[] = {"Zm9", "Zm9v!mFy", "Z=9v", "Zm==Zm9v", "===="};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(mt_base64_decode(bad[i], strlen(bad[i]), &out, &len), MT_ERR_INVALID_ARG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_values),  cmocka_unit_test(test_rejects),
        cmocka_unit_test(test_limits),        cmocka_unit_test(test_writer_roundtrip),
        cmocka_unit_test(test_writer_misuse), cmocka_unit_test(test_base64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

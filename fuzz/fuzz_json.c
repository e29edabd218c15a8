/*
 * libFuzzer harness: the JSON reader (common/json.h) over arbitrary bytes,
 * under tight and default limits. A tree that parses is walked through
 * every accessor, written back with the JSON writer and parsed again: the
 * writer must accept it and, after one round that normalizes numbers,
 * writing must reproduce the same bytes. The
 * input is also fed to the base64 decoder. May call: common/json.
 */
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void write_tree(mt_json_writer *w, const mt_json *v)
{
    size_t n;
    const char *s;
    double d;
    int64_t i;
    int b;
    switch (mt_json_type_of(v)) {
    case MT_JSON_NULL: mt_jw_null(w); break;
    case MT_JSON_BOOL:
        FUZZ_CHECK(mt_json_bool(v, &b));
        mt_jw_bool(w, b);
        break;
    case MT_JSON_NUMBER:
        FUZZ_CHECK(mt_json_num(v, &d));
        if (mt_json_int(v, &i))
            mt_jw_int(w, i);
        else
            mt_jw_number(w, d);
        break;
    case MT_JSON_STRING:
        s = mt_json_str(v, &n);
        FUZZ_CHECK(s != NULL && s[n] == '\0');
        mt_jw_string_n(w, s, n);
        break;
    case MT_JSON_ARRAY:
        mt_jw_begin_array(w);
        for (size_t k = 0; k < mt_json_len(v); k++)
            write_tree(w, mt_json_at(v, k));
        FUZZ_CHECK(mt_json_at(v, mt_json_len(v)) == NULL);
        mt_jw_end_array(w);
        break;
    case MT_JSON_OBJECT:
        mt_jw_begin_object(w);
        for (size_t k = 0; k < mt_json_len(v); k++) {
            const char *key = mt_json_key_at(v, k);
            FUZZ_CHECK(key != NULL);
            /* A key with an embedded NUL is found only up to it. */
            const mt_json *m = mt_json_get(v, key);
            FUZZ_CHECK(m != NULL);
            mt_jw_key(w, key);
            write_tree(w, mt_json_at(v, k));
        }
        mt_jw_end_object(w);
        break;
    }
}

/* Serialize, or NULL when the writer refused (status in *st). */
static char *serialize(const mt_json *root, size_t *len, mt_status *st)
{
    mt_json_writer w;
    memset(&w, 0, sizeof w);
    write_tree(&w, root);
    *st = mt_jw_finish(&w);
    if (*st) {
        mt_json_writer_free(&w);
        return NULL;
    }
    char *out = w.buf.data;
    *len = w.buf.len;
    w.buf.data = NULL;
    mt_json_writer_free(&w);
    return out;
}

static int has_nul_key(const mt_json *v)
{
    if (mt_json_type_of(v) == MT_JSON_OBJECT || mt_json_type_of(v) == MT_JSON_ARRAY)
        for (size_t k = 0; k < mt_json_len(v); k++) {
            if (mt_json_type_of(v) == MT_JSON_OBJECT && mt_json_get(v, mt_json_key_at(v, k)) !=
                                                            mt_json_at(v, k))
                return 1;
            if (has_nul_key(mt_json_at(v, k)))
                return 1;
        }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char msg[256];
    mt_json *root = NULL;
    mt_json_limits tight = {.max_bytes = 1 << 16, .max_depth = 8, .max_string = 256};
    mt_status st = mt_json_parse((const char *)data, size, &tight, &root, msg, sizeof msg);
    FUZZ_CHECK((st == MT_OK) == (root != NULL));
    mt_json_free(root);
    root = NULL;

    st = mt_json_parse((const char *)data, size, NULL, &root, msg, sizeof msg);
    FUZZ_CHECK((st == MT_OK) == (root != NULL));
    if (st == MT_OK && !has_nul_key(root)) {
        /* Everything the reader accepts is writable (finite numbers, valid
         * UTF-8, depth within the writer's limit), and writing is a fixed
         * point after one round: numbers are normalized once (an integral
         * value is written as an integer, "-0E+2" becomes "-0", then "0"). */
        size_t n1 = 0, n2 = 0, n3 = 0;
        mt_status w1, w2, w3;
        char *t1 = serialize(root, &n1, &w1);
        FUZZ_CHECK(t1 != NULL);
        mt_json *again = NULL, *third = NULL;
        FUZZ_CHECK(mt_json_parse(t1, n1, NULL, &again, msg, sizeof msg) == MT_OK);
        char *t2 = serialize(again, &n2, &w2);
        FUZZ_CHECK(t2 != NULL);
        FUZZ_CHECK(mt_json_parse(t2, n2, NULL, &third, msg, sizeof msg) == MT_OK);
        char *t3 = serialize(third, &n3, &w3);
        FUZZ_CHECK(t3 != NULL && n2 == n3 && memcmp(t2, t3, n2) == 0);
        free(t1);
        free(t2);
        free(t3);
        mt_json_free(again);
        mt_json_free(third);
    }
    mt_json_free(root);

    uint8_t *bin = NULL;
    size_t blen = 0;
    if (mt_base64_decode((const char *)data, size, &bin, &blen) == MT_OK) {
        /* Decoding may accept non-canonical padding bits; the canonical
         * encoding of what it gave must decode to the same bytes. */
        FUZZ_CHECK(blen <= size / 4 * 3);
        mt_buf b = {0};
        mt_base64_encode(&b, bin, blen);
        FUZZ_CHECK(!b.oom && b.len == size);
        uint8_t *bin2 = NULL;
        size_t blen2 = 0;
        FUZZ_CHECK(mt_base64_decode(b.data, b.len, &bin2, &blen2) == MT_OK);
        FUZZ_CHECK(blen2 == blen && (blen == 0 || memcmp(bin, bin2, blen) == 0));
        free(bin2);
        mt_buf_free(&b);
    }
    free(bin);
    return 0;
}

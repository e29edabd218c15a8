/*
 * libFuzzer harness: the text forms stored in databases and JSON files.
 * The first byte picks the parser, the rest (NUL-terminated) is its input:
 * mt_variant_parse, mt_db_key_parse, mt_db_pipeline_parse, and the name
 * parsers (routing, dtype, quant mode, format, activation). What parses
 * must format and parse back to the same value. May call: common,
 * moetune/db, fuzz_util.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "moetune/db.h"
#include "moetune/problem.h"
#include "moetune/variant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void variant_roundtrip(const char *text)
{
    mt_variant v, w;
    char msg[256], out[8192];
    memset(&v, 0, sizeof v);
    if (mt_variant_parse(text, &v, msg, sizeof msg) != MT_OK)
        return;
    FUZZ_CHECK(v.nparams >= 0 && v.nparams <= MT_VARIANT_MAX_PARAMS);
    FUZZ_CHECK(memchr(v.name, 0, sizeof v.name) && memchr(v.family, 0, sizeof v.family));
    for (int i = 0; i < v.nparams; i++) {
        const char *val = mt_variant_get(&v, v.params[i].name);
        FUZZ_CHECK(val != NULL);
        int64_t x;
        mt_variant_get_int(&v, v.params[i].name, &x);
    }
    FUZZ_CHECK(mt_variant_format(&v, out, sizeof out) == MT_OK);
    memset(&w, 0, sizeof w);
    FUZZ_CHECK(mt_variant_parse(out, &w, msg, sizeof msg) == MT_OK);
    /* Field by field: bytes after a string's NUL do not count. */
    FUZZ_CHECK(!strcmp(v.family, w.family) && !strcmp(v.name, w.name) &&
               !strcmp(v.arch, w.arch) && v.template_version == w.template_version &&
               v.threads == w.threads && v.smem_bytes == w.smem_bytes &&
               v.nparams == w.nparams);
    for (int i = 0; i < v.nparams; i++)
        FUZZ_CHECK(!strcmp(v.params[i].name, w.params[i].name) &&
                   !strcmp(v.params[i].value, w.params[i].value));
}

static void key_roundtrip(const char *text)
{
    mt_db_key k, back;
    char msg[256], out[1024];
    memset(&k, 0, sizeof k);
    if (mt_db_key_parse(text, "NVIDIA H200", &k, msg, sizeof msg) != MT_OK)
        return;
    FUZZ_CHECK(mt_db_key_format(&k, out, sizeof out) == MT_OK);
    memset(&back, 0, sizeof back);
    FUZZ_CHECK(mt_db_key_parse(out, "NVIDIA H200", &back, msg, sizeof msg) == MT_OK);
    FUZZ_CHECK(memcmp(&k, &back, sizeof k) == 0);
}

static void pipeline_roundtrip(const char *text)
{
    mt_db_pipeline p, back;
    char msg[256], out[MT_DB_PIPELINE_TEXT_MAX];
    memset(&p, 0, sizeof p);
    if (mt_db_pipeline_parse(text, &p, msg, sizeof msg) != MT_OK)
        return;
    FUZZ_CHECK(p.nsteps >= 0 && p.nsteps <= MT_DB_MAX_STEPS);
    /* Known finding R1 (docs/RELIABILITY.md): a pipeline without arch
     * parses but formats as "arch=", which does not. */
    if (FUZZ_KNOWN(!p.arch[0]))
        return;
    FUZZ_CHECK(mt_db_pipeline_format(&p, out, sizeof out) == MT_OK);
    memset(&back, 0, sizeof back);
    FUZZ_CHECK(mt_db_pipeline_parse(out, &back, msg, sizeof msg) == MT_OK);
    FUZZ_CHECK(memcmp(&p, &back, sizeof p) == 0);
    mt_db_pipeline_kernel(&p, "gemm1");
    mt_db_pipeline_kernel(&p, text);
}

static void names(const char *text)
{
    mt_routing r;
    mt_dtype d;
    mt_quant_mode q;
    mt_act_format f;
    mt_activation a;
    if (mt_routing_parse(text, &r) == MT_OK)
        FUZZ_CHECK(strcmp(mt_routing_name(r), text) == 0);
    if (mt_dtype_parse(text, &d) == MT_OK)
        FUZZ_CHECK(strcmp(mt_dtype_name(d), text) == 0);
    if (mt_quant_mode_parse(text, &q) == MT_OK)
        FUZZ_CHECK(strcmp(mt_quant_mode_name(q), text) == 0);
    if (mt_act_format_parse(text, &f) == MT_OK)
        FUZZ_CHECK(strcmp(mt_act_format_name(f), text) == 0);
    if (mt_activation_parse(text, &a) == MT_OK)
        FUZZ_CHECK(strcmp(mt_activation_name(a), text) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    char *text = malloc(size);
    FUZZ_CHECK(text != NULL);
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    switch (data[0] % 4) {
    case 0: variant_roundtrip(text); break;
    case 1: key_roundtrip(text); break;
    case 2: pipeline_roundtrip(text); break;
    default: names(text); break;
    }
    free(text);
    return 0;
}

/*
 * libFuzzer harness: template loading. The input is written as the one
 * .lua file of a scratch template folder (named after the `family = "..."`
 * it declares, else fuzz.lua; the test headers toy.cuh and toy_math.cuh sit
 * beside it) and loaded with mt_gen_open under a small instruction budget
 * and memory cap; then the template hash, the default variants for sm_90a,
 * the first one again by pinning its parameters, and the rendered source
 * of a few variants. No NVRTC (too slow for a fuzzer). Only the default points are enumerated: a full
 * enumeration may legally walk up to 20M points. May call: moetune/gen,
 * fuzz_util.
 */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz/fuzz_util.h"
#include "moetune/gen.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define GOOD MT_TEMPLATE_DIR_BUILD "/../tests/data/templates/good/"

static char dir[512];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    /* Only the scratch folder: no user or built-in templates. */
    unsetenv("MT_TEMPLATE_PATH");
    snprintf(dir, sizeof dir, "%s", fuzz_path("tpl"));
    FUZZ_CHECK(mkdir(dir, 0700) == 0);
    char to[600];
    snprintf(to, sizeof to, "%s/toy.cuh", dir);
    fuzz_copy(GOOD "toy.cuh", to);
    snprintf(to, sizeof to, "%s/toy_math.cuh", dir);
    fuzz_copy(GOOD "toy_math.cuh", to);
    return 0;
}

/* The family the source declares, so that the file name matches it. */
static void family_of(const uint8_t *data, size_t size, char out[64])
{
    snprintf(out, 64, "fuzz");
    static const char pat[] = "family";
    for (size_t i = 0; i + sizeof pat < size; i++) {
        if (memcmp(data + i, pat, sizeof pat - 1) != 0)
            continue;
        size_t j = i + sizeof pat - 1;
        while (j < size && (data[j] == ' ' || data[j] == '='))
            j++;
        if (j >= size || (data[j] != '"' && data[j] != '\''))
            continue;
        j++;
        size_t n = 0;
        while (j + n < size && n < 40 &&
               ((data[j + n] >= 'a' && data[j + n] <= 'z') ||
                (data[j + n] >= '0' && data[j + n] <= '9') || data[j + n] == '_'))
            n++;
        if (n == 0)
            continue;
        memcpy(out, data + j, n);
        out[n] = '\0';
        return;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char family[64], path[700];
    family_of(data, size, family);
    snprintf(path, sizeof path, "%s/%s.lua", dir, family);
    fuzz_write(path, data, size);

    const char *dirs[] = {dir};
    mt_gen_config cfg = {.template_dirs = dirs, .ntemplate_dirs = 1, .no_builtin = 1,
                         .no_cache = 1, .jobs = 1, .lua_instr_budget = 200000,
                         .lua_mem_limit = 4u << 20};
    mt_gen *g = NULL;
    mt_status st = mt_gen_open(&cfg, &g);
    FUZZ_CHECK(g != NULL);
    FUZZ_CHECK(mt_gen_errmsg(g) != NULL);
    if (st == MT_OK) {
        FUZZ_CHECK(mt_gen_family_count(g) <= 1);
        char hex[65];
        if (mt_gen_family_count(g) == 1) {
            FUZZ_CHECK(strcmp(mt_gen_family_name(g, 0), family) == 0);
            mt_gen_template_hash(g, family, hex);
        }
        mt_gen_filter f;
        memset(&f, 0, sizeof f);
        f.arch = "sm_90a";
        f.defaults_only = 1;
        mt_variant *v = NULL;
        size_t n = 0;
        mt_prune_report rep;
        st = mt_gen_enumerate(g, &f, &v, &n, &rep);
        if (st == MT_OK) {
            FUZZ_CHECK(rep.valid == (int)n && rep.enumerated >= rep.valid);
            for (size_t i = 0; i < n && i < 4; i++) {
                char *src = NULL;
                size_t len = 0;
                FUZZ_CHECK(v[i].threads >= 1 && v[i].smem_bytes >= 0);
                /* Known findings (docs/RELIABILITY.md): R5, a NUL byte in
                 * what render() returns is kept (len counts past it); R8,
                 * an empty render() gives MT_OK and a NULL source. */
                if (mt_gen_source(g, &v[i], &src, &len) == MT_OK &&
                    !FUZZ_KNOWN(src == NULL && len == 0))
                    FUZZ_CHECK(src != NULL && src[len] == '\0' &&
                               (strlen(src) == len || FUZZ_KNOWN(strlen(src) < len)));
                else
                    FUZZ_CHECK(src == NULL);
                free(src);
                /* Pinning every parameter to this point's values finds
                 * exactly this variant in a full enumeration. */
                if (i == 0 && v[i].nparams <= MT_GEN_MAX_FILTERS) {
                    mt_gen_filter one;
                    memset(&one, 0, sizeof one);
                    one.family = family;
                    one.arch = "sm_90a";
                    one.nparams = v[i].nparams;
                    for (int p = 0; p < v[i].nparams; p++) {
                        one.params[p].name = v[i].params[p].name;
                        one.params[p].value = v[i].params[p].value;
                    }
                    mt_variant *w = NULL;
                    size_t nw = 0;
                    if (mt_gen_enumerate(g, &one, &w, &nw, NULL) == MT_OK)
                        FUZZ_CHECK(nw == 1 && strcmp(w[0].name, v[i].name) == 0);
                    free(w);
                }
            }
        }
        free(v);
    }
    mt_gen_close(g);
    unlink(path);
    return 0;
}

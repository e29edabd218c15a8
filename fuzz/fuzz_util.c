/*
 * Helpers shared by the harnesses (see fuzz_util.h).
 */
#define _DEFAULT_SOURCE
#include "fuzz/fuzz_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "moetune/db.h"

void fuzz_fail(const char *file, int line, const char *what)
{
    fprintf(stderr, "%s:%d: invariant broken: %s\n", file, line, what);
    abort();
}

static char tmp_root[256];

static void rm_tmpdir(void)
{
    char cmd[300];
    if (!tmp_root[0])
        return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_root);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmp_root);
}

const char *fuzz_tmpdir(void)
{
    if (tmp_root[0])
        return tmp_root;
    struct stat st;
    const char *base = stat("/dev/shm", &st) == 0 && access("/dev/shm", W_OK) == 0 ? "/dev/shm"
                                                                                     : "/tmp";
    snprintf(tmp_root, sizeof tmp_root, "%s/mt-fuzz-XXXXXX", base);
    if (!mkdtemp(tmp_root))
        fuzz_fail(__FILE__, __LINE__, "mkdtemp");
    atexit(rm_tmpdir);
    return tmp_root;
}

const char *fuzz_path(const char *name)
{
    static char bufs[4][512];
    static int next;
    char *p = bufs[next++ % 4];
    snprintf(p, sizeof bufs[0], "%s/%s", fuzz_tmpdir(), name);
    return p;
}

void fuzz_write(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    FUZZ_CHECK(f != NULL);
    FUZZ_CHECK(n == 0 || fwrite(data, 1, n, f) == n);
    FUZZ_CHECK(fclose(f) == 0);
}

void fuzz_rm_db(const char *path)
{
    static const char *const sfx[] = {"", "-wal", "-shm", "-journal"};
    char p[600];
    for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++) {
        snprintf(p, sizeof p, "%s%s", path, sfx[i]);
        unlink(p);
    }
}

void fuzz_copy(const char *from, const char *to)
{
    char *data = NULL, msg[256];
    size_t n = 0;
    if (mt_file_read(from, &data, &n, msg, sizeof msg) != MT_OK)
        fuzz_fail(__FILE__, __LINE__, msg);
    fuzz_write(to, data, n);
    free(data);
}

uint8_t fuzz_u8(fuzz_in *in)
{
    if (!in->n)
        return 0;
    in->n--;
    return *in->p++;
}

uint32_t fuzz_u32(fuzz_in *in)
{
    uint32_t x = 0;
    for (int i = 0; i < 4; i++)
        x = x << 8 | fuzz_u8(in);
    return x;
}

uint64_t fuzz_u64(fuzz_in *in)
{
    return (uint64_t)fuzz_u32(in) << 32 | fuzz_u32(in);
}

int64_t fuzz_int(fuzz_in *in)
{
    static const int64_t edge[] = {0, 1, -1, 7, 8, 16, 64, 65, 128, 1023, 1024, 1025, 4096, 7168,
                                   65536, 65544, 1 << 20, (1 << 20) + 1, INT32_MAX, INT64_MAX,
                                   INT64_MIN};
    uint8_t sel = fuzz_u8(in);
    if (sel < 128)
        return sel;
    if (sel < 240)
        return edge[sel % (sizeof edge / sizeof edge[0])];
    return (int64_t)fuzz_u64(in);
}

const uint8_t *fuzz_bytes(fuzz_in *in, size_t max, size_t *len)
{
    size_t n = fuzz_u8(in);
    if (n > max)
        n = max;
    if (n > in->n)
        n = in->n;
    const uint8_t *p = in->p;
    in->p += n;
    in->n -= n;
    *len = n;
    return p;
}

/* ---- the seed database ---- */

#define SEED_SKU "NVIDIA H200"
#define SEED_SKU2 "NVIDIA H100 80GB HBM3"

#define DB_OK(db, call)                                                         \
    do {                                                                        \
        if ((call) != MT_OK)                                                    \
            fuzz_fail(__FILE__, __LINE__, mt_db_errmsg(db));                    \
    } while (0)

static void seed_key_of(const char *sku, int64_t N, mt_db_key *k)
{
    mt_problem p;
    mt_problem_init(&p, 1, 64, 8, 2048, N);
    if (mt_db_key_from_problem(&p, sku, "uniform", k) != MT_OK)
        fuzz_fail(__FILE__, __LINE__, "key");
}

void fuzz_seed_key(mt_db_key *k)
{
    seed_key_of(SEED_SKU, 768, k);
}

static int64_t seed_prov(mt_db *db, const char *sku)
{
    mt_db_provenance p;
    memset(&p, 0, sizeof p);
    mt_strlcpy(p.sku, sku, sizeof p.sku);
    mt_strlcpy(p.cc, "9.0", sizeof p.cc);
    p.sm_count = 132;
    p.mem_clock_khz = 2619000;
    mt_strlcpy(p.driver_version, "580.65", sizeof p.driver_version);
    mt_strlcpy(p.cuda_version, "13.0", sizeof p.cuda_version);
    mt_strlcpy(p.nvrtc_version, "13.0.48", sizeof p.nvrtc_version);
    mt_strlcpy(p.moetune_version, "0.1.0", sizeof p.moetune_version);
    mt_strlcpy(p.template_hash, "0123abcd", sizeof p.template_hash);
    int64_t id = 0;
    DB_OK(db, mt_db_put_provenance(db, &p, &id));
    return id;
}

static void seed_kernel(mt_db *db, int bm, int bn, char name[MT_VARIANT_NAME_MAX])
{
    mt_variant v;
    memset(&v, 0, sizeof v);
    mt_strlcpy(v.family, "grouped_gemm", sizeof v.family);
    mt_strlcpy(v.arch, "sm_90a", sizeof v.arch);
    v.template_version = 1;
    v.threads = 128;
    v.smem_bytes = 64 * bm;
    const char *names[] = {"BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "WARPS", "STAGES"};
    const char *ab[] = {"m", "n", "k", "g", "w", "s"};
    int vals[] = {bm, bn, 64, 8, 4, 3};
    char s[16];
    for (int i = 0; i < 6; i++) {
        snprintf(s, sizeof s, "%d", vals[i]);
        if (mt_variant_add(&v, names[i], s) != MT_OK)
            fuzz_fail(__FILE__, __LINE__, "variant");
    }
    if (mt_variant_make_name(&v, ab) != MT_OK)
        fuzz_fail(__FILE__, __LINE__, "variant name");
    char src[400], img[96];
    snprintf(src, sizeof src, "extern \"C\" __global__ void %s() {}\n", v.name);
    for (size_t i = 0; i < sizeof img; i++)
        img[i] = (char)(i * 7 + (size_t)bm);
    mt_db_kernel k;
    memset(&k, 0, sizeof k);
    k.variant = v;
    k.source = src;
    k.source_len = strlen(src);
    k.image = img;
    k.image_len = sizeof img;
    mt_strlcpy(k.template_hash, "0123abcd", sizeof k.template_hash);
    DB_OK(db, mt_db_put_kernel(db, &k));
    mt_strlcpy(name, v.name, MT_VARIANT_NAME_MAX);
}

static void seed_entry(mt_db *db, const mt_db_key *k, int64_t M, double t, const char *g1,
                       const char *g2, int64_t prov)
{
    mt_db_entry e;
    memset(&e, 0, sizeof e);
    e.key = *k;
    e.M = M;
    mt_strlcpy(e.pipeline.backend, "moetune", sizeof e.pipeline.backend);
    mt_strlcpy(e.pipeline.arch, "sm_90a", sizeof e.pipeline.arch);
    e.pipeline.nsteps = 2;
    mt_strlcpy(e.pipeline.steps[0].role, "gemm1", sizeof e.pipeline.steps[0].role);
    mt_strlcpy(e.pipeline.steps[0].kernel, g1, sizeof e.pipeline.steps[0].kernel);
    mt_strlcpy(e.pipeline.steps[1].role, "gemm2", sizeof e.pipeline.steps[1].role);
    mt_strlcpy(e.pipeline.steps[1].kernel, g2, sizeof e.pipeline.steps[1].kernel);
    e.time_us = t;
    e.default_time_us = t * 1.5;
    e.cublas_time_us = M % 2 ? MT_DB_NO_TIME : t * 1.2;
    e.rel_err = 1e-3;
    DB_OK(db, mt_db_put_entry(db, &e, prov, NULL));
}

void fuzz_build_db(const char *path)
{
    fuzz_rm_db(path);
    mt_db *db = NULL;
    DB_OK(db, mt_db_open(path, MT_DB_CREATE, &db));
    int64_t pa = seed_prov(db, SEED_SKU), pb = seed_prov(db, SEED_SKU2);
    char k16[MT_VARIANT_NAME_MAX], k64[MT_VARIANT_NAME_MAX], n128[MT_VARIANT_NAME_MAX],
        n64[MT_VARIANT_NAME_MAX];
    seed_kernel(db, 16, 64, k16);
    seed_kernel(db, 64, 128, k64);
    seed_kernel(db, 16, 128, n128);
    seed_kernel(db, 64, 64, n64);
    mt_db_key ka, kb;
    seed_key_of(SEED_SKU, 768, &ka);
    seed_key_of(SEED_SKU2, 1536, &kb);
    static const int64_t Ms[] = {1, 16, 256, 4096};
    for (int i = 0; i < 4; i++) {
        seed_entry(db, &ka, Ms[i], 10.0 + i, i < 2 ? k16 : k64, i < 2 ? n128 : n64, pa);
        seed_entry(db, &ka, Ms[i], 12.0 + i, k64, n64, pa); /* a slower one: history */
        seed_entry(db, &kb, Ms[i] * 2, 20.0 + i, k16, n128, pb);
    }
    mt_db_candidate c;
    memset(&c, 0, sizeof c);
    c.key = ka;
    c.M = 16;
    c.pipeline = "backend=moetune;arch=sm_90a;gemm1=x;gemm2=y";
    c.ok = 0;
    c.time_us = MT_DB_NO_TIME;
    c.rel_err = 0.5;
    c.reason = "wrong result";
    DB_OK(db, mt_db_record_candidate(db, &c));
    mt_db_vllm_config r;
    memset(&r, 0, sizeof r);
    mt_strlcpy(r.device, "NVIDIA_H200", sizeof r.device);
    r.E = 64;
    r.N = 768;
    r.block_m = 16, r.block_n = 64, r.block_k = 128, r.group_m = 1, r.num_warps = 4;
    r.num_stages = 3;
    for (r.M = 1; r.M <= 64; r.M *= 4)
        DB_OK(db, mt_db_put_vllm_config(db, &r));
    mt_db_close(db);
}

/* ---- reading everything ---- */

typedef struct read_ctx {
    mt_db *db;
    int n;
} read_ctx;

static void check_kernel(const mt_db_kernel *k)
{
    char hex[65];
    /* What the API hands out must be what the hashes promise. */
    if (k->image && k->image_sha256[0]) {
        mt_sha256_hex(k->image, k->image_len, hex);
        FUZZ_CHECK(strcmp(hex, k->image_sha256) == 0);
    }
    if (k->source) {
        FUZZ_CHECK(strlen(k->source) <= k->source_len);
        mt_sha256_hex(k->source, k->source_len, hex);
        FUZZ_CHECK(strcmp(hex, k->source_sha256) == 0);
    }
}

static int on_entry(const mt_db_entry *e, void *ctx)
{
    read_ctx *c = ctx;
    FUZZ_CHECK(e->pipeline.nsteps >= 0 && e->pipeline.nsteps <= MT_DB_MAX_STEPS);
    FUZZ_CHECK(memchr(e->key.sku, 0, sizeof e->key.sku) != NULL);
    /* Look the entry up again, and fetch the kernels it names (a bounded
     * number per database so that big inputs stay fast). */
    if (c->n++ < 16) {
        mt_db_entry got;
        int exact = 0;
        if (mt_db_lookup(c->db, &e->key, e->M, &got, &exact) == MT_OK)
            FUZZ_CHECK(strcmp(got.key.sku, e->key.sku) == 0);
        for (int i = 0; i < e->pipeline.nsteps; i++) {
            mt_db_kernel k;
            memset(&k, 0, sizeof k);
            if (mt_db_get_kernel(c->db, e->pipeline.steps[i].kernel, e->pipeline.arch, &k) ==
                MT_OK)
                check_kernel(&k);
            mt_db_kernel_free(&k);
        }
    }
    return 0;
}

static int on_kernel(const mt_db_kernel *k, void *ctx)
{
    read_ctx *c = ctx;
    /* Iteration hands out the stored bytes as they are (merge, export and
     * verify check them against the hashes); mt_db_get_kernel promises a
     * verified kernel. */
    FUZZ_CHECK(k->image_len == 0 || k->image != NULL);
    if (c->n++ < 8) {
        mt_db_kernel again;
        memset(&again, 0, sizeof again);
        if (mt_db_get_kernel(c->db, k->variant.name, k->variant.arch, &again) == MT_OK)
            check_kernel(&again);
        mt_db_kernel_free(&again);
    }
    return 0;
}

static int on_candidate(const mt_db_candidate *c, void *ctx)
{
    (void)ctx;
    FUZZ_CHECK(c->pipeline != NULL);
    return 0;
}

static int on_ref(const mt_db_vllm_config *c, void *ctx)
{
    (void)ctx;
    FUZZ_CHECK(memchr(c->device, 0, sizeof c->device) != NULL);
    return 0;
}

static void on_problem(const char *problem, void *ctx)
{
    (void)ctx;
    FUZZ_CHECK(problem != NULL);
}

int fuzz_read_db(const char *path)
{
    mt_db *db = NULL;
    mt_status st = mt_db_open(path, MT_DB_READONLY, &db);
    FUZZ_CHECK(db != NULL);
    FUZZ_CHECK(mt_db_errmsg(db) != NULL);
    if (st != MT_OK) {
        mt_db_close(db);
        return st;
    }
    int problems = 0;
    mt_status vst = mt_db_verify(db, on_problem, NULL, &problems);
    FUZZ_CHECK(vst != MT_OK || problems == 0);
    read_ctx c = {db, 0};
    mt_db_filter f = {0};
    mt_db_foreach_entry(db, &f, on_entry, &c);
    f.history = 1;
    c.n = 0;
    mt_db_foreach_entry(db, &f, on_entry, &c);
    f.sku = "NVIDIA H200";
    f.E = 64;
    mt_db_foreach_entry(db, &f, on_entry, &c);
    c.n = 0;
    mt_db_foreach_kernel(db, 1, on_kernel, &c);
    mt_db_foreach_kernel(db, 0, on_kernel, &c);
    mt_db_foreach_candidate(db, on_candidate, NULL);
    mt_db_foreach_vllm_config(db, NULL, 0, 0, on_ref, NULL);
    mt_db_foreach_vllm_config(db, "NVIDIA_H200", 64, 768, on_ref, NULL);
    mt_db_key k;
    fuzz_seed_key(&k);
    mt_db_entry e;
    int exact;
    static const int64_t Ms[] = {0, 1, 17, 4096, INT64_MAX, -1};
    for (size_t i = 0; i < sizeof Ms / sizeof Ms[0]; i++) {
        if (mt_db_lookup(db, &k, Ms[i], &e, &exact) == MT_OK)
            FUZZ_CHECK(strcmp(e.key.sku, k.sku) == 0 && (exact == 0 || e.M == Ms[i]));
        mt_db_lookup_cc(db, &k, "9.0", Ms[i], &e, &exact);
    }
    int seen = 0;
    mt_db_candidate_seen(db, &k, 16, "backend=moetune;arch=sm_90a;gemm1=x;gemm2=y", &seen);
    mt_db_close(db);
    return st;
}

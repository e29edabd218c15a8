/*
 * The fake tuning backend (see backend.h): deterministic, GPU-free numbers
 * from the selection model plus a per-name jitter, and on request a fault
 * (the process kills itself) or a hang, to test the supervisor, the resume
 * path and the database without a GPU.
 */
#define _POSIX_C_SOURCE 200809L
#include "tuner/backend.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "tuner/select.h"

typedef struct fake {
    char fault[128], hang[128], log[512];
    long delay_ms;
    double late;   /* MT_FAKE_LATE */
    /* MT_FAKE_LUCKY "GEMM1 GEMM2": that pair's first time in each launch
     * order reads 0.85 of its time, as a lucky first measurement would. */
    char lucky[520];
    int lucky_used[2];
    /* MT_FAKE_AGAIN "fault|hang|wrong GEMM1 GEMM2": that pair, measured a
     * second time in one launch order by this process (the tuner's final
     * round, as nothing else times a candidate twice), kills the process,
     * hangs, or fails its check, as a kernel that goes wrong only
     * sometimes would. */
    char again_mode[8], again[520];
    int again_seen[2];
    mt_problem p;
} fake;

static mt_status fake_provenance(void *self, mt_db_provenance *out, char *arch, char *msg,
                                 size_t msg_size)
{
    (void)self, (void)msg, (void)msg_size;
    memset(out, 0, sizeof *out);
    mt_strlcpy(out->sku, "FAKE GPU", sizeof out->sku);
    mt_strlcpy(out->cc, "8.0", sizeof out->cc);
    out->sm_count = 132;
    out->mem_clock_khz = 3201000;
    mt_strlcpy(out->driver_version, "fake", sizeof out->driver_version);
    mt_strlcpy(out->cuda_version, "fake", sizeof out->cuda_version);
    mt_strlcpy(out->nvrtc_version, "fake", sizeof out->nvrtc_version);
    mt_strlcpy(out->moetune_version, MT_VERSION_STRING, sizeof out->moetune_version);
    mt_sha256_hex("fake templates", 14, out->template_hash);
    mt_strlcpy(arch, "sm_80", 16);
    return MT_OK;
}

static mt_status make_variant(mt_variant *v, const char *family, const char *const *kv, int n)
{
    memset(v, 0, sizeof *v);
    mt_strlcpy(v->family, family, sizeof v->family);
    mt_strlcpy(v->arch, "sm_80", sizeof v->arch);
    v->template_version = 1;
    v->threads = 128;
    v->smem_bytes = 32768;
    for (int i = 0; i < n; i++)
        if (mt_variant_add(v, kv[2 * i], kv[2 * i + 1]))
            return MT_ERR_INTERNAL;
    return mt_variant_make_name(v, NULL);
}

static mt_status fake_gemm_variants(void *self, const mt_problem *p, int defaults_only,
                                    mt_variant **out, size_t *n, char *msg, size_t msg_size)
{
    (void)self;
    static const char *const bms[] = {"16", "64", "128"}, *const bns[] = {"64", "128"};
    static const char *const epis[] = {"store", "silu", "gelu"}, *const stages[] = {"3", "4"};
    mt_variant *v = calloc(3 * 2 * 3 * 2, sizeof *v);
    size_t k = 0;
    if (!v)
        return mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 2; b++)
            for (int e = 0; e < 3; e++)
                for (int s = 0; s < 2; s++) {
                    if (defaults_only && (strcmp(stages[s], "4") || strcmp(bns[b], "128")))
                        continue;
                    const char *kv[] = {"dtype", mt_dtype_name(p->dtype),
                                        "quant", mt_quant_mode_name(p->quant.mode),
                                        "format", mt_act_format_name(p->format),
                                        "epilogue", epis[e], "BLOCK_M", bms[a], "BLOCK_N", bns[b],
                                        "BLOCK_K", "32", "GROUP_M", "8", "WARPS_M", "2",
                                        "WARPS_N", "2", "STAGES", stages[s]};
                    if (make_variant(&v[k++], "grouped_gemm", kv, 11)) {
                        free(v);
                        return mt_errf(msg, msg_size, MT_ERR_INTERNAL, "fake variant");
                    }
                }
    *out = v;
    *n = k;
    return MT_OK;
}

static mt_status fake_pipeline(void *self, const mt_variant *g1, const mt_variant *g2,
                              mt_variant steps[6], const char *roles[6], int *n, char *msg,
                              size_t msg_size)
{
    const mt_problem *p = &((fake *)self)->p;
    const char *a[] = {"THREADS", "1024"};
    const char *b[] = {"dtype", mt_dtype_name(p->dtype), "activation",
                       mt_activation_name(p->activation), "THREADS", "256"};
    const char *c[] = {"dtype", mt_dtype_name(p->dtype), "THREADS", "256"};
    const int standard = p->format == MT_FORMAT_STANDARD;
    *n = 0;
    if (standard && make_variant(&steps[*n], "moe_align", a, 1) == MT_OK)
        roles[(*n)++] = "align";
    steps[*n] = *g1;
    roles[(*n)++] = "gemm1";
    if (!strcmp(mt_variant_get(g1, "epilogue"), "store") &&
        make_variant(&steps[*n], "act_and_mul", b, 3) == MT_OK)
        roles[(*n)++] = "act";
    steps[*n] = *g2;
    roles[(*n)++] = "gemm2";
    if (standard && make_variant(&steps[*n], "moe_reduce", c, 2) == MT_OK)
        roles[(*n)++] = "reduce";
    return *n >= 2 ? MT_OK : mt_errf(msg, msg_size, MT_ERR_INTERNAL, "fake pipeline");
}

static mt_status fake_open_item(void *self, const mt_problem *p, mt_routing routing, uint64_t seed,
                                char *msg, size_t msg_size)
{
    (void)routing, (void)seed, (void)msg, (void)msg_size;
    ((fake *)self)->p = *p;
    return MT_OK;
}

static void fake_close_item(void *self) { (void)self; }

static double jitter(const char *name)
{
    char hex[65];
    mt_sha256_hex(name, strlen(name), hex);
    return 1.0 + (double)strtoul((char[]){hex[0], hex[1], 0}, NULL, 16) / 2560.0;
}

static mt_status fake_measure(void *self, const mt_variant *g1, const mt_variant *g2,
                              int launch_late, mt_measure *out, char *msg, size_t msg_size)
{
    (void)msg, (void)msg_size;
    fake *f = self;
    if (f->log[0]) {
        FILE *lf = fopen(f->log, "a");
        if (lf) {
            fprintf(lf, "%lld %s %s%s\n", (long long)f->p.M, g1->name, g2->name, launch_late ? " late" : "");
            fclose(lf);
        }
    }
    if (f->delay_ms > 0) {
        struct timespec ts = {f->delay_ms / 1000, (f->delay_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (f->fault[0] && strstr(g1->name, f->fault))
        raise(SIGKILL);   /* what a faulting kernel does to its process, at worst */
    if (f->hang[0] && strstr(g1->name, f->hang))
        for (;;)
            pause();
    char pair[520];
    snprintf(pair, sizeof pair, "%s %s", g1->name, g2->name);
    const int again = f->again[0] && !strcmp(pair, f->again) && ++f->again_seen[launch_late != 0] == 2;
    if (again && !strcmp(f->again_mode, "fault"))
        raise(SIGKILL);
    if (again && !strcmp(f->again_mode, "hang"))
        for (;;)
            pause();
    memset(out, 0, sizeof *out);
    if (again) {   /* "wrong" */
        out->rel_err = 0.5;
        mt_strlcpy(out->reason, "fake: wrong the second time", sizeof out->reason);
        return MT_OK;
    }
    out->ok = 1;
    out->rel_err = 1e-3;
    out->time_us = (mt_gemm_model_us(g1, &f->p, 0, 132) + mt_gemm_model_us(g2, &f->p, 1, 132)) *
                   jitter(g1->name) * jitter(g2->name) + 5.0;
    if (launch_late)
        out->time_us *= f->late;
    if (f->lucky[0] && !strcmp(pair, f->lucky) && !f->lucky_used[launch_late != 0]++)
        out->time_us *= 0.85;
    return MT_OK;
}

static mt_status fake_measure_cublas(void *self, mt_measure *out, char *msg, size_t msg_size)
{
    (void)msg, (void)msg_size;
    fake *f = self;
    memset(out, 0, sizeof *out);
    out->ok = 1;
    out->time_us = 10.0 + (double)(f->p.M * f->p.topk) * 0.5;
    return MT_OK;
}

static mt_status fake_kernel(void *self, const mt_variant *v, mt_db_kernel *out, char *msg,
                             size_t msg_size)
{
    (void)self;
    memset(out, 0, sizeof *out);
    out->variant = *v;
    mt_buf src = {0};
    mt_buf_printf(&src, "// fake kernel %s\n", v->name);
    out->source = src.data;
    out->source_len = src.len;
    out->image = malloc(strlen(v->name) + 1);
    if (src.oom || !out->image) {
        free(out->source);
        free(out->image);
        return mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
    }
    memcpy(out->image, v->name, strlen(v->name) + 1);
    out->image_len = strlen(v->name) + 1;
    mt_sha256_hex("fake templates", 14, out->template_hash);
    return MT_OK;
}

static void fake_destroy(void *self) { free(self); }

mt_status mt_tune_backend_fake(int device, mt_tune_backend *out, char *msg, size_t msg_size)
{
    /* MT_FAKE_BROKEN_DEVICE: a comma-separated list of broken devices;
     * MT_FAKE_BROKEN_STATUS: the status number they fail with (default
     * MT_ERR_NO_DEVICE). */
    const char *bs = getenv("MT_FAKE_BROKEN_STATUS");
    const int broken = bs && atoi(bs) > 0 && atoi(bs) < MT_STATUS_COUNT_ ? atoi(bs)
                                                                         : MT_ERR_NO_DEVICE;
    for (const char *b = getenv("MT_FAKE_BROKEN_DEVICE"); b && *b; b += strcspn(b, ","),
                    b += *b == ',')
        if (atoi(b) == device)
            return mt_errf(msg, msg_size, (mt_status)broken, "fake device %d is broken", device);
    fake *f = calloc(1, sizeof *f);
    if (!f)
        return mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
    /* The environment is read once, here. */
    const char *e;
    if ((e = getenv("MT_FAKE_FAULT")))
        mt_strlcpy(f->fault, e, sizeof f->fault);
    if ((e = getenv("MT_FAKE_HANG")))
        mt_strlcpy(f->hang, e, sizeof f->hang);
    if ((e = getenv("MT_FAKE_LOG")))
        mt_strlcpy(f->log, e, sizeof f->log);
    if ((e = getenv("MT_FAKE_LUCKY")))
        mt_strlcpy(f->lucky, e, sizeof f->lucky);
    int n = 0;
    if ((e = getenv("MT_FAKE_AGAIN")) && *e) {
        if (sscanf(e, " %7[a-z] %n", f->again_mode, &n) != 1 || n == 0 ||
            (strcmp(f->again_mode, "fault") && strcmp(f->again_mode, "hang") &&
             strcmp(f->again_mode, "wrong"))) {
            free(f);
            return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG,
                           "MT_FAKE_AGAIN '%s': want \"fault|hang|wrong GEMM1 GEMM2\"", e);
        }
        mt_strlcpy(f->again, e + n, sizeof f->again);
    }
    if ((e = getenv("MT_FAKE_DELAY_MS")))
        f->delay_ms = atol(e);
    f->late = (e = getenv("MT_FAKE_LATE")) && atof(e) > 0 ? atof(e) : 1.03;
    *out = (mt_tune_backend){
        .name = "fake", .self = f, .provenance = fake_provenance,
        .gemm_variants = fake_gemm_variants, .open_item = fake_open_item,
        .close_item = fake_close_item, .measure = fake_measure,
        .measure_cublas = fake_measure_cublas, .kernel = fake_kernel,
        .pipeline = fake_pipeline, .destroy = fake_destroy};
    return MT_OK;
}

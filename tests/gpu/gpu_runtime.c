/*
 * GPU test of libmoetune through its public API: every prepare/finalize
 * composed with every compatible experts object, served from a database
 * this test writes (kernels compiled here with mt_gen, a pipeline unlike
 * the defaults: unfused activation) and from the built-in defaults, checked
 * against the CPU oracle with the output poisoned first; CUDA-graph
 * capture/replay/compare; four threads on their own streams; the device
 * flag for an out-of-range topk id, and for an expert_map entry outside
 * [-1, local_E) (its slot left out of the output, bit for bit as an entry
 * of -1); argument checks at the boundary.
 *
 * Prints one PASS/FAIL line per check and a summary line. Skipped (77)
 * without a GPU. MT_GPU_RUNTIME_SMALL=1 leaves out the one check on a model
 * shape (the shipped database), so that every shape is small (for
 * compute-sanitizer; every composition, moe_dispatch included, still runs).
 */
#define _POSIX_C_SOURCE 200809L
#include "tests/support.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cuda_driver.h"
#include "common/util.h"
#include "moetune/db.h"
#include "moetune/gen.h"
#include "moetune/moetune.h"
#include "moetune/oracle.h"
#include "runtime/rt_internal.h"
#include "tuner/harness.h"


static mt_gpu gpu;
static mt_context *ctx_db, *ctx_def;
static char db_path[512];
static int checks, failures;
static pthread_mutex_t count_lock = PTHREAD_MUTEX_INITIALIZER;

static void report(int ok, const char *what, const char *detail)
{
    pthread_mutex_lock(&count_lock);
    checks++;
    failures += !ok;
    printf("%s %s%s%s\n", ok ? "PASS" : "FAIL", what, detail && *detail ? ": " : "",
           detail ? detail : "");
    fflush(stdout);
    pthread_mutex_unlock(&count_lock);
}

static void log_cb(void *user, mt_log_level level, const char *message)
{
    (void)user;
    printf("  [log %d] %s\n", (int)level, message);
}

/* The two problem shapes the database holds entries for. */
static mt_problem shape(int which)
{
    mt_problem p;
    mt_problem_init(&p, 64, which ? 16 : 8, 2, which ? 512 : 256, which ? 256 : 128);
    if (which) {
        p.dtype = MT_DTYPE_FP16;
        p.activation = MT_ACT_GELU;
        p.has_expert_map = 1;
        p.local_E = 10;
        p.apply_router_weight_on_input = 1;
    }
    return p;
}

/* Write the database: default-set kernels with BLOCK_M 64 compiled for this
 * GPU, and for each shape and format an entry at M = 64 using the unfused
 * (store + act_and_mul) pipeline. */
static int write_db(void)
{
    mt_gen *g = NULL;
    mt_variant *v = NULL;
    size_t n = 0;
    mt_kernel_binary *b = NULL;
    mt_db *db = NULL;
    int ok = 0;
    char msg[512];
    snprintf(db_path, sizeof db_path, "%s/tuned.db", mt_test_tmpdir("gpu_runtime"));
    mt_gen_config cfg = {0};
    mt_gen_filter f = {.arch = mt_gpu_arch(&gpu), .defaults_only = 1, .nparams = 2};
    f.params[0].name = "BLOCK_M";
    f.params[0].value = "64";
    f.params[1].name = "quant";
    f.params[1].value = "none";
    if (mt_gen_open(&cfg, &g) || mt_gen_enumerate(g, &f, &v, &n, NULL) ||
        mt_gen_compile(g, v, n, &b)) {
        printf("gen: %s\n", mt_gen_errmsg(g));
        goto done;
    }
    if (mt_db_open(db_path, MT_DB_CREATE, &db))
        goto done;
    for (size_t i = 0; i < n; i++) {
        mt_db_kernel k = {.variant = b[i].variant, .source = b[i].source,
                          .source_len = b[i].source_len, .image = b[i].image,
                          .image_len = b[i].image_len, .is_ptx = b[i].is_ptx};
        mt_gen_template_hash(g, b[i].variant.family, k.template_hash);
        if (mt_db_put_kernel(db, &k))
            goto done;
    }
    mt_db_provenance prov;
    mt_rt_current_provenance(&gpu, &prov);
    int64_t pid = 0;
    if (mt_db_put_provenance(db, &prov, &pid))
        goto done;
    for (int s = 0; s < 2; s++)
        for (int fmt = 0; fmt < 2; fmt++) {
            mt_problem p = shape(s);
            p.format = (mt_act_format)fmt;
            p.max_tokens = 64;
            mt_db_entry e;
            memset(&e, 0, sizeof e);
            if (mt_db_key_from_problem(&p, gpu.name, NULL, &e.key))
                goto done;
            e.M = 64;
            e.time_us = 1;
            e.default_time_us = 2;
            e.cublas_time_us = MT_DB_NO_TIME;
            mt_strlcpy(e.pipeline.backend, "moetune", sizeof e.pipeline.backend);
            mt_strlcpy(e.pipeline.arch, mt_gpu_arch(&gpu), sizeof e.pipeline.arch);
            const char *dt = mt_dtype_name(p.dtype), *fm = mt_act_format_name(p.format);
            const char *roles[] = {"align", "gemm1", "act", "gemm2", "reduce"};
            for (int r = 0; r < 5; r++) {
                if (p.format == MT_FORMAT_BATCHED && (r == 0 || r == 4))
                    continue;
                const char *name = NULL;
                for (size_t i = 0; i < n && !name; i++) {
                    const mt_variant *q = &b[i].variant;
                    const char *qd = mt_variant_get(q, "dtype");
                    if (r == 0 && !strcmp(q->family, "moe_align"))
                        name = q->name;
                    else if ((r == 1 || r == 3) && !strcmp(q->family, "grouped_gemm") &&
                             !strcmp(qd, dt) && !strcmp(mt_variant_get(q, "format"), fm) &&
                             !strcmp(mt_variant_get(q, "epilogue"), "store"))
                        name = q->name;
                    else if (r == 2 && !strcmp(q->family, "act_and_mul") && !strcmp(qd, dt) &&
                             !strcmp(mt_variant_get(q, "activation"),
                                     mt_activation_name(p.activation)))
                        name = q->name;
                    else if (r == 4 && !strcmp(q->family, "moe_reduce") && !strcmp(qd, dt))
                        name = q->name;
                }
                if (!name)
                    goto done;
                mt_db_step *st = &e.pipeline.steps[e.pipeline.nsteps++];
                mt_strlcpy(st->role, roles[r], sizeof st->role);
                mt_strlcpy(st->kernel, name, sizeof st->kernel);
            }
            if (mt_db_put_entry(db, &e, pid, NULL))
                goto done;
        }
    ok = 1;
done:
    if (!ok)
        printf("writing the test database failed: %s\n", db ? mt_db_errmsg(db) : "");
    mt_db_close(db);
    mt_kernel_binaries_free(b, n);
    free(v);
    mt_gen_close(g);
    (void)msg;
    return ok;
}

static int setup(void **state)
{
    (void)state;
    char msg[512];
    if (mt_gpu_open(0, &gpu, msg, sizeof msg)) {
        fprintf(stderr, "%s\n", msg);
        return -1;
    }
    double t0 = mt_now();
    if (!write_db())
        return -1;
    printf("database %s written in %.1f s\n", db_path, mt_now() - t0);
    mt_context_config cfg;
    mt_context_config_init(&cfg);
    cfg.system_db = db_path;
    cfg.log = log_cb;
    cfg.log_level = MT_LOG_INFO;
    if (mt_context_create(&cfg, &ctx_db)) {
        fprintf(stderr, "context: %s\n", mt_context_errmsg(ctx_db));
        return -1;
    }
    mt_context_config_init(&cfg);
    if (mt_context_create(&cfg, &ctx_def)) {
        fprintf(stderr, "context: %s\n", mt_context_errmsg(ctx_def));
        return -1;
    }
    printf("moetune %s on %s (%s)\n", mt_version(), mt_context_device_name(ctx_def),
           mt_context_arch(ctx_def));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    mt_context_destroy(ctx_db);
    mt_context_destroy(ctx_def);
    mt_gpu_close(&gpu);
    printf("gpu_runtime: %d checks, %d failed\n", checks, failures);
    return 0;
}

/* The three compatible compositions. */
typedef struct combo {
    mt_pf_kind pf;
    mt_experts_kind ex;
    mt_act_format fmt;
} combo;
static const combo combos[] = {
    {MT_PF_STANDARD, MT_EXPERTS_MOETUNE, MT_FORMAT_STANDARD},
    {MT_PF_BATCHED, MT_EXPERTS_MOETUNE, MT_FORMAT_BATCHED},
    {MT_PF_BATCHED, MT_EXPERTS_CUBLAS, MT_FORMAT_BATCHED},
};

static mt_status make_mk(mt_context *ctx, const combo *c, const mt_problem *p,
                         mt_modular_kernel **mk, char *desc, size_t dsize)
{
    mt_prepare_finalize *pf = NULL;
    mt_experts *ex = NULL;
    mt_prepare_finalize_create(c->pf, &pf);
    mt_experts_create(c->ex, c->fmt, &ex);
    snprintf(desc, dsize, "%s+%s %s/%s E=%lld K=%lld N=%lld%s%s", mt_prepare_finalize_name(pf),
             mt_experts_name(ex), mt_dtype_name(p->dtype), mt_activation_name(p->activation),
             (long long)p->E, (long long)p->K, (long long)p->N,
             p->has_expert_map ? " expert_map" : "",
             p->apply_router_weight_on_input ? " w-on-input" : "");
    mt_status st = mt_modular_kernel_create(ctx, pf, ex, p, mk);
    mt_experts_destroy(ex);
    mt_prepare_finalize_destroy(pf);
    return st;
}

/* Run mk on fresh data with M tokens; compare with the oracle. */
static int run_and_check(mt_modular_kernel *mk, const mt_problem *p0, int64_t M, uint64_t seed,
                         CUstream stream, CUdeviceptr ws, const char *desc, int quiet)
{
    char msg[1600], what[400];
    mt_problem p = *p0;
    p.M = M;
    p.format = MT_FORMAT_STANDARD;
    mt_problem_data d;
    if (mt_problem_data_make(&d, &p, MT_ROUTING_UNIFORM, seed, 1, msg, sizeof msg)) {
        snprintf(what, sizeof what, "data %s M=%lld", desc, (long long)M);
        report(0, what, msg);
        return 0;
    }
    const size_t obytes = (size_t)(M * p.K) * mt_dtype_size(p.dtype);
    float *ref = calloc((size_t)(M * p.K), sizeof *ref);
    void *got = malloc(obytes);
    mt_oracle_fused_moe(&d.p, &d.h_std, NULL, 0, ref, msg, sizeof msg);
    /* Poison on the call's stream: the legacy stream of a plain cuMemsetD8
     * does not order the non-blocking one the call runs on. */
    mt_cu.cuMemsetD8Async((CUdeviceptr)(uintptr_t)d.d.out, 0xFF, obytes, stream);
    mt_cu.cuMemsetD8Async(ws, 0xFF, mt_modular_kernel_workspace_size(mk), stream);
    mt_status st = mt_modular_kernel_run(mk, M, &d.d, (void *)(uintptr_t)ws,
                                         mt_modular_kernel_workspace_size(mk), stream);
    if (!st && mt_cu.cuStreamSynchronize(stream) != CUDA_SUCCESS)
        st = MT_ERR_KERNEL_FAULT;
    if (!st)
        st = mt_modular_kernel_read_error(mk, M, (void *)(uintptr_t)ws);
    mt_lookup_info info;
    mt_modular_kernel_lookup(mk, M, &info);
    int ok = 0;
    if (st) {
        snprintf(msg, sizeof msg, "%s: %s", mt_status_str(st), mt_modular_kernel_errmsg(mk));
    } else {
        mt_cu.cuMemcpyDtoH(got, (CUdeviceptr)(uintptr_t)d.d.out, obytes);
        int64_t nans = 0;
        double err = mt_rel_l2(got, p.dtype, ref, NULL, M, p.K, &nans);
        double tol = p.dtype == MT_DTYPE_BF16 ? 1e-2 : 5e-3;
        ok = err < tol && nans == 0;
        snprintf(msg, sizeof msg, "rel_l2=%.2e nan=%lld (%s: %s)", err, (long long)nans,
                 mt_lookup_source_name(info.source), info.pipeline);
    }
    snprintf(what, sizeof what, "run %s M=%lld", desc, (long long)M);
    if (!ok || !quiet)
        report(ok, what, msg);
    free(ref);
    free(got);
    mt_problem_data_free(&d);
    return ok;
}

static void test_compositions(void **state)
{
    (void)state;
    CUstream stream;
    assert_int_equal(mt_cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    static const int64_t Ms[] = {1, 7, 33, 64};
    int idx = 0;
    for (int which_ctx = 0; which_ctx < 2; which_ctx++)
        for (size_t c = 0; c < MT_ARRAY_LEN(combos); c++)
            for (int s = 0; s < 2; s++) {
                mt_problem p = shape(s);
                char desc[300], what[400];
                mt_modular_kernel *mk = NULL;
                mt_context *ctx = which_ctx ? ctx_def : ctx_db;
                mt_status st = make_mk(ctx, &combos[c], &p, &mk, desc, sizeof desc);
                snprintf(what, sizeof what, "create %s [%s]", desc, which_ctx ? "defaults" : "db");
                report(st == MT_OK, what, st ? mt_modular_kernel_errmsg(mk) : "");
                if (st == MT_OK) {
                    mt_lookup_info info;
                    mt_modular_kernel_lookup(mk, 64, &info);
                    mt_lookup_source want = combos[c].ex == MT_EXPERTS_CUBLAS ? MT_LOOKUP_LIBRARY
                                            : which_ctx ? MT_LOOKUP_DEFAULTS : MT_LOOKUP_TUNED;
                    snprintf(what, sizeof what, "lookup %s is %s", desc,
                             mt_lookup_source_name(want));
                    report(info.source == want, what, info.pipeline);
                    CUdeviceptr ws;
                    assert_int_equal(mt_cu.cuMemAlloc(&ws, mt_modular_kernel_workspace_size(mk)),
                                     CUDA_SUCCESS);
                    for (size_t m = 0; m < MT_ARRAY_LEN(Ms); m++)
                        run_and_check(mk, &p, Ms[m], (uint64_t)idx++, stream, ws, desc, 0);
                    mt_cu.cuMemFree(ws);
                }
                mt_modular_kernel_destroy(mk);
            }
    /* The mismatched compositions fail at creation, naming both sides. */
    mt_problem p = shape(0);
    char desc[300];
    mt_modular_kernel *mk = NULL;
    combo bad = {MT_PF_STANDARD, MT_EXPERTS_MOETUNE, MT_FORMAT_BATCHED};
    mt_status st = make_mk(ctx_def, &bad, &p, &mk, desc, sizeof desc);
    report(st == MT_ERR_INCOMPATIBLE && strstr(mt_modular_kernel_errmsg(mk), "'standard'") &&
               strstr(mt_modular_kernel_errmsg(mk), "'moetune-batched'"),
           "create standard+moetune-batched is refused", mt_modular_kernel_errmsg(mk));
    mt_modular_kernel_destroy(mk);
    mt_cu.cuStreamDestroy(stream);
}

/* Capture one call into a graph, replay it on fresh poison, compare with the
 * eager result bit for bit. */
static void test_graph_capture(void **state)
{
    (void)state;
    CUstream stream;
    assert_int_equal(mt_cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    for (size_t c = 0; c < MT_ARRAY_LEN(combos); c++) {
        mt_problem p = shape(c == 1);
        char desc[300], msg[512];
        mt_modular_kernel *mk = NULL;
        if (make_mk(ctx_def, &combos[c], &p, &mk, desc, sizeof desc)) {
            report(0, "graph create", mt_modular_kernel_errmsg(mk));
            mt_modular_kernel_destroy(mk);
            continue;
        }
        const int64_t M = 33;
        mt_problem q = p;
        q.M = M;
        mt_problem_data d;
        assert_int_equal(mt_problem_data_make(&d, &q, MT_ROUTING_UNIFORM, 99, 1, msg, sizeof msg),
                         MT_OK);
        size_t wsz = mt_modular_kernel_workspace_size(mk);
        const size_t ob = (size_t)(M * q.K) * mt_dtype_size(q.dtype);
        CUdeviceptr ws;
        assert_int_equal(mt_cu.cuMemAlloc(&ws, wsz), CUDA_SUCCESS);
        void *eager = malloc(ob), *replay = malloc(ob);
        mt_status st = mt_modular_kernel_run(mk, M, &d.d, (void *)(uintptr_t)ws, wsz, stream);
        mt_cu.cuStreamSynchronize(stream);
        mt_cu.cuMemcpyDtoH(eager, (CUdeviceptr)(uintptr_t)d.d.out, ob);
        CUgraph graph = NULL;
        CUgraphExec exec = NULL;
        int ok = st == MT_OK;
        ok = ok && mt_cu.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS;
        if (ok) {
            st = mt_modular_kernel_run(mk, M, &d.d, (void *)(uintptr_t)ws, wsz, stream);
            ok = mt_cu.cuStreamEndCapture(stream, &graph) == CUDA_SUCCESS && st == MT_OK;
        }
        ok = ok && mt_cu.cuGraphInstantiate(&exec, graph, 0) == CUDA_SUCCESS;
        int same = 0;
        for (int rep = 0; ok && rep < 3; rep++) {
            mt_cu.cuMemsetD8Async((CUdeviceptr)(uintptr_t)d.d.out, 0xFF, ob, stream);
            ok = mt_cu.cuGraphLaunch(exec, stream) == CUDA_SUCCESS &&
                 mt_cu.cuStreamSynchronize(stream) == CUDA_SUCCESS;
            mt_cu.cuMemcpyDtoH(replay, (CUdeviceptr)(uintptr_t)d.d.out, ob);
            same += ok && !memcmp(eager, replay, ob);
        }
        snprintf(msg, sizeof msg, "%d/3 replays equal the eager call (%s)", same,
                 st ? mt_modular_kernel_errmsg(mk) : "captured");
        char what[400];
        snprintf(what, sizeof what, "graph capture/replay %s M=%lld", desc, (long long)M);
        report(ok && same == 3, what, msg);
        if (exec)
            mt_cu.cuGraphExecDestroy(exec);
        if (graph)
            mt_cu.cuGraphDestroy(graph);
        free(eager);
        free(replay);
        mt_cu.cuMemFree(ws);
        mt_problem_data_free(&d);
        mt_modular_kernel_destroy(mk);
    }
    mt_cu.cuStreamDestroy(stream);
}

typedef struct worker {
    int id;
    int ok;
} worker;

static void *thread_main(void *arg)
{
    worker *w = arg;
    mt_cu.cuCtxSetCurrent(gpu.ctx);
    const combo *c = &combos[w->id % 3];
    mt_problem p = shape(w->id % 2);
    char desc[300];
    mt_modular_kernel *mk = NULL;
    CUstream stream = NULL;
    CUdeviceptr ws = 0;
    w->ok = 0;
    if (make_mk(ctx_db, c, &p, &mk, desc, sizeof desc) ||
        mt_cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) ||
        mt_cu.cuMemAlloc(&ws, mt_modular_kernel_workspace_size(mk)))
        goto done;
    w->ok = 1;
    for (int it = 0; it < 8; it++)
        w->ok &= run_and_check(mk, &p, 1 + (w->id * 13 + it * 7) % 64,
                               (uint64_t)(1000 + w->id * 100 + it), stream, ws, desc, 1);
done:
    if (ws)
        mt_cu.cuMemFree(ws);
    if (stream)
        mt_cu.cuStreamDestroy(stream);
    mt_modular_kernel_destroy(mk);
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    pthread_t th[4];
    worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i].id = i;
        assert_int_equal(pthread_create(&th[i], NULL, thread_main, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        char what[64];
        snprintf(what, sizeof what, "thread %d (own stream, 8 calls)", i);
        report(w[i].ok, what, "");
    }
}

static void test_bad_topk_and_args(void **state)
{
    (void)state;
    CUstream stream;
    assert_int_equal(mt_cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    for (size_t c = 0; c < MT_ARRAY_LEN(combos); c++) {
        mt_problem p = shape(0);
        char desc[300], msg[512], what[400];
        mt_modular_kernel *mk = NULL;
        if (make_mk(ctx_def, &combos[c], &p, &mk, desc, sizeof desc)) {
            report(0, "create", mt_modular_kernel_errmsg(mk));
            mt_modular_kernel_destroy(mk);
            continue;
        }
        mt_problem q = p;
        q.M = 16;
        mt_problem_data d;
        assert_int_equal(mt_problem_data_make(&d, &q, MT_ROUTING_UNIFORM, 7, 1, msg, sizeof msg),
                         MT_OK);
        int32_t bad = (int32_t)q.E + 3;
        mt_cu.cuMemcpyHtoD((CUdeviceptr)(uintptr_t)d.d.topk_ids + 5 * sizeof(int32_t), &bad,
                           sizeof bad);
        mt_cu.cuCtxSynchronize();   /* the DMA has landed before the stream reads it */
        size_t wsz = mt_modular_kernel_workspace_size(mk);
        CUdeviceptr ws;
        assert_int_equal(mt_cu.cuMemAlloc(&ws, wsz), CUDA_SUCCESS);
        void *wp = (void *)(uintptr_t)ws;
        mt_status st = mt_modular_kernel_run(mk, 16, &d.d, wp, wsz, stream);
        mt_cu.cuStreamSynchronize(stream);
        if (!st)
            st = mt_modular_kernel_read_error(mk, 16, wp);
        snprintf(what, sizeof what, "bad topk id flagged %s", desc);
        report(st == MT_ERR_DEVICE_CHECK && strstr(mt_modular_kernel_errmsg(mk), "topk_ids[2][1]"),
               what, mt_modular_kernel_errmsg(mk));
        /* Boundary checks. */
        mt_moe_tensors t = d.d;
        t.hidden = (const char *)t.hidden + 2;
        snprintf(what, sizeof what, "misaligned hidden refused %s", desc);
        report(mt_modular_kernel_run(mk, 16, &t, wp, wsz, stream) == MT_ERR_ALIGNMENT, what,
               mt_modular_kernel_errmsg(mk));
        snprintf(what, sizeof what, "M above max refused %s", desc);
        report(mt_modular_kernel_run(mk, 65, &d.d, wp, wsz, stream) == MT_ERR_SHAPE, what,
               mt_modular_kernel_errmsg(mk));
        snprintf(what, sizeof what, "small workspace refused %s", desc);
        report(mt_modular_kernel_run(mk, 16, &d.d, wp, wsz - 1, stream) == MT_ERR_INVALID_ARG,
               what, mt_modular_kernel_errmsg(mk));
        t = d.d;
        t.topk_ids = NULL;
        snprintf(what, sizeof what, "NULL topk_ids refused %s", desc);
        report(mt_modular_kernel_run(mk, 16, &t, wp, wsz, stream) == MT_ERR_INVALID_ARG, what,
               mt_modular_kernel_errmsg(mk));
        /* Pointers this problem has no use for are refused, not ignored
         * (a static scale passed to a problem of dynamic ones). */
        static const char *const unused[] = {"a1_scale", "w2_zero"};
        for (int u = 0; u < 2; u++) {
            t = d.d;
            if (u)
                t.w2_zero = t.w2;
            else
                t.a1_scale = t.w1;
            char needle[64];
            snprintf(needle, sizeof needle, "%s must be NULL", unused[u]);
            snprintf(what, sizeof what, "unused %s refused %s", unused[u], desc);
            report(mt_modular_kernel_run(mk, 16, &t, wp, wsz, stream) == MT_ERR_INVALID_ARG &&
                       strstr(mt_modular_kernel_errmsg(mk), needle),
                   what, mt_modular_kernel_errmsg(mk));
        }
        mt_cu.cuMemFree(ws);
        mt_problem_data_free(&d);
        mt_modular_kernel_destroy(mk);
    }
    mt_cu.cuStreamDestroy(stream);
}

/* One call of mk on d with expert_map[e] = value (uploaded first), on a
 * poisoned output and workspace: a step that read rows nothing wrote this
 * call would bring the poison (NaN) into the output. The result lands in
 * out (host, M * K elements); returns run or read_error's status. */
static mt_status call_with_map_entry(mt_modular_kernel *mk, mt_problem_data *d, int64_t M,
                                     int32_t e, int32_t value, CUstream stream, CUdeviceptr ws,
                                     void *out)
{
    const size_t obytes = (size_t)(M * d->p.K) * mt_dtype_size(d->p.dtype);
    const size_t wsz = mt_modular_kernel_workspace_size(mk);
    mt_cu.cuMemcpyHtoD((CUdeviceptr)(uintptr_t)d->d.expert_map + (size_t)e * sizeof(int32_t),
                       &value, sizeof value);
    mt_cu.cuCtxSynchronize();   /* the DMA has landed before the stream reads it */
    mt_cu.cuMemsetD8Async((CUdeviceptr)(uintptr_t)d->d.out, 0xFF, obytes, stream);
    mt_cu.cuMemsetD8Async(ws, 0xFF, wsz, stream);
    mt_status st = mt_modular_kernel_run(mk, M, &d->d, (void *)(uintptr_t)ws, wsz, stream);
    if (!st && mt_cu.cuStreamSynchronize(stream) != CUDA_SUCCESS)
        st = MT_ERR_KERNEL_FAULT;
    if (!st)
        st = mt_modular_kernel_read_error(mk, M, (void *)(uintptr_t)ws);
    mt_cu.cuMemcpyDtoH(out, (CUdeviceptr)(uintptr_t)d->d.out, obytes);
    return st;
}

/* Does msg name a slot topk_ids[t][k] of this call whose topk id is e? */
static int names_slot_of(const char *msg, const mt_problem_data *d, int64_t M, int32_t e)
{
    const char *at = strstr(msg, "topk_ids[");
    long long t = -1, k = -1;
    if (!at || sscanf(at, "topk_ids[%lld][%lld]", &t, &k) != 2)
        return 0;
    return t >= 0 && t < M && k >= 0 && k < d->p.topk && d->h_topk_ids[t * d->p.topk + k] == e;
}

/* An expert_map entry outside [-1, local_E) (local_E, far above it, below
 * -1) is bad input: every composition, from the database (unfused act
 * step) and from the defaults, at a decode M (slot-routed GEMMs) and a
 * larger one, must flag it (read_error: MT_ERR_DEVICE_CHECK naming a slot
 * of that expert and its expert_map entry) and leave its slots out: the
 * output equals, bit for bit, that of the same call with the entry -1
 * (the expert on another rank). */
static void test_bad_expert_map(void **state)
{
    (void)state;
    CUstream stream;
    assert_int_equal(mt_cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    static const int64_t Ms[] = {1, 16};
    for (int which_ctx = 0; which_ctx < 2; which_ctx++)
        for (size_t c = 0; c < MT_ARRAY_LEN(combos); c++) {
            mt_problem p = shape(1);   /* the shape with an expert map */
            char desc[300], msg[512], what[600];
            mt_modular_kernel *mk = NULL;
            if (make_mk(which_ctx ? ctx_def : ctx_db, &combos[c], &p, &mk, desc, sizeof desc)) {
                report(0, "create", mt_modular_kernel_errmsg(mk));
                mt_modular_kernel_destroy(mk);
                continue;
            }
            CUdeviceptr ws;
            assert_int_equal(mt_cu.cuMemAlloc(&ws, mt_modular_kernel_workspace_size(mk)), CUDA_SUCCESS);
            for (size_t m = 0; m < MT_ARRAY_LEN(Ms); m++) {
                const int64_t M = Ms[m];
                mt_problem q = p;
                q.M = M;
                mt_problem_data d;
                assert_int_equal(mt_problem_data_make(&d, &q, MT_ROUTING_UNIFORM, 70 + (uint64_t)m, 1,
                                                      msg, sizeof msg),
                                 MT_OK);
                /* The expert of the first slot routed here (else of slot 0):
                 * a step that kept its slots would show in the output. */
                int32_t e = d.h_topk_ids[0];
                for (int64_t s = M * q.topk - 1; s >= 0; s--)
                    if (d.h_expert_map[d.h_topk_ids[s]] >= 0)
                        e = d.h_topk_ids[s];
                const size_t obytes = (size_t)(M * q.K) * mt_dtype_size(q.dtype);
                void *want = malloc(obytes), *got = malloc(obytes);
                const char *src = which_ctx ? "defaults" : "db";
                mt_status st = call_with_map_entry(mk, &d, M, e, -1, stream, ws, want);
                snprintf(what, sizeof what, "expert_map[%d] = -1 runs clean %s M=%lld [%s]", (int)e,
                         desc, (long long)M, src);
                report(st == MT_OK, what, st ? mt_modular_kernel_errmsg(mk) : "");
                const int32_t bad[] = {(int32_t)q.local_E, 1000, -5};
                for (size_t b = 0; st == MT_OK && b < MT_ARRAY_LEN(bad); b++) {
                    const mt_status bst = call_with_map_entry(mk, &d, M, e, bad[b], stream, ws, got);
                    const char *em = mt_modular_kernel_errmsg(mk);
                    snprintf(what, sizeof what, "bad expert_map entry flagged (expert_map[%d] = %d) %s "
                             "M=%lld [%s]", (int)e, (int)bad[b], desc, (long long)M, src);
                    report(bst == MT_ERR_DEVICE_CHECK && strstr(em, "expert_map") &&
                               strstr(em, "outside [-1, local_E") && names_slot_of(em, &d, M, e),
                           what, em);
                    snprintf(what, sizeof what, "bad expert_map slot left out of the output "
                             "(expert_map[%d] = %d) %s M=%lld [%s]", (int)e, (int)bad[b], desc,
                             (long long)M, src);
                    report(bst != MT_ERR_KERNEL_FAULT && bst != MT_ERR_CUDA && !memcmp(want, got, obytes),
                           what, bst == MT_ERR_DEVICE_CHECK ? "" : mt_status_str(bst));
                }
                free(want);
                free(got);
                mt_problem_data_free(&d);
            }
            mt_cu.cuMemFree(ws);
            mt_modular_kernel_destroy(mk);
        }
    mt_cu.cuStreamDestroy(stream);
}

/* The shipped database (db/tuned/) serves this GPU: the tuned entries are
 * found, their provenance matches this machine, and the results match the
 * oracle. This GPU's own file where one is shipped (the H100's since
 * session 41), else the H200's: on another GPU of the same compute
 * capability its entries serve as entries of the same compute capability
 * (the runtime's fallback, rt_lookup.c), and their results match the
 * oracle there too. MT_SHIPPED_DB names another file, MT_SHIPPED_SKU the
 * GPU it is keyed by. */
static void test_shipped_database(void **state)
{
    (void)state;
    char path[600], what[700];
    const char *env = getenv("MT_SHIPPED_DB");
    const char *tdir = getenv("MT_TEMPLATE_DIR");
    const char *small = getenv("MT_GPU_RUNTIME_SMALL");
    if (small && atoi(small)) {
        printf("shipped database: skipped (MT_GPU_RUNTIME_SMALL)\n");
        return;
    }
    const char *sku = getenv("MT_SHIPPED_SKU") ? getenv("MT_SHIPPED_SKU") : "NVIDIA H200";
    if (env)
        snprintf(path, sizeof path, "%s", env);
    else {
        char own[128];
        mt_db_shipped_name(gpu.name, own, sizeof own);
        snprintf(path, sizeof path, "%s/../db/tuned/%s", tdir ? tdir : ".", own);
        if (access(path, R_OK) == 0 && !getenv("MT_SHIPPED_SKU"))
            sku = gpu.name;
        else
            snprintf(path, sizeof path, "%s/../db/tuned/nvidia-h200.db", tdir ? tdir : ".");
    }
    const int own_sku = !strcmp(gpu.name, sku);
    const int same_cc = !own_sku && gpu.cc_major == 9 && gpu.cc_minor == 0;
    if ((!own_sku && !same_cc) || access(path, R_OK) != 0) {
        printf("shipped database: none for %s (cc %d.%d) at %s: skipped\n", gpu.name, gpu.cc_major,
               gpu.cc_minor, path);
        return;
    }
    mt_context_config cfg;
    mt_context_config_init(&cfg);
    cfg.system_db = path;
    cfg.no_defaults = 1;   /* a miss must show, not fall back */
    mt_context *ctx = NULL;
    mt_status st = mt_context_create(&cfg, &ctx);
    report(st == MT_OK, "context on the shipped database", st ? mt_context_errmsg(ctx) : path);
    if (st) {
        mt_context_destroy(ctx);
        return;
    }
    /* A creation that fails inside (no entry for this shape, and no
     * defaults to fall back on): the kernel refuses every call, its
     * message still the reason (such kernels once ran, or crashed). */
    {
        mt_problem miss;
        mt_problem_init(&miss, 64, 8, 2, 256, 128);
        mt_modular_kernel *bad = NULL;
        char dbad[300], reason[512], wbuf[512];
        const mt_status bst = make_mk(ctx, &combos[0], &miss, &bad, dbad, sizeof dbad);
        mt_strlcpy(reason, mt_modular_kernel_errmsg(bad), sizeof reason);
        mt_moe_tensors none;
        memset(&none, 0, sizeof none);
        mt_lookup_info li;
        report(bst != MT_OK && mt_modular_kernel_lookup(bad, 1, &li) == MT_ERR_INVALID_ARG &&
                   mt_modular_kernel_run(bad, 1, &none, wbuf, sizeof wbuf, NULL) == MT_ERR_INVALID_ARG &&
                   mt_modular_kernel_read_error(bad, 1, wbuf) == MT_ERR_INVALID_ARG &&
                   mt_modular_kernel_workspace_size(bad) == 0 &&
                   !strcmp(reason, mt_modular_kernel_errmsg(bad)),
               "a kernel whose creation failed refuses every call", reason);
        mt_modular_kernel_destroy(bad);
    }
    mt_problem p;
    mt_problem_init(&p, 4096, 128, 8, 2048, 768);   /* Qwen3-30B-A3B, as tuned */
    mt_modular_kernel *mk = NULL;
    char desc[300];
    st = make_mk(ctx, &combos[0], &p, &mk, desc, sizeof desc);
    report(st == MT_OK, "create qwen3-30b-a3b from the shipped database",
           st ? mt_modular_kernel_errmsg(mk) : "");
    if (st == MT_OK) {
        static const int64_t Ms[] = {1, 64, 256};
        CUstream stream;
        CUdeviceptr ws;
        assert_int_equal(mt_cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
        assert_int_equal(mt_cu.cuMemAlloc(&ws, mt_modular_kernel_workspace_size(mk)), CUDA_SUCCESS);
        for (size_t m = 0; m < MT_ARRAY_LEN(Ms); m++) {
            mt_lookup_info info;
            mt_modular_kernel_lookup(mk, Ms[m], &info);
            if (own_sku) {
                snprintf(what, sizeof what, "shipped M=%lld is tuned, exact, current", (long long)Ms[m]);
                report(info.source == MT_LOOKUP_TUNED && info.exact && !info.provenance_diff[0], what,
                       info.provenance_diff[0] ? info.provenance_diff : info.pipeline);
            } else {
                snprintf(what, sizeof what, "shipped M=%lld serves %s as the %s's, exact",
                         (long long)Ms[m], gpu.name, sku);
                report(info.source == MT_LOOKUP_SAME_CC && info.exact && !strcmp(info.sku, sku),
                       what, info.pipeline);
            }
            run_and_check(mk, &p, Ms[m], 900u + (uint64_t)m, stream, ws, "shipped", 0);
        }
        mt_cu.cuMemFree(ws);
        mt_cu.cuStreamDestroy(stream);
    }
    mt_modular_kernel_destroy(mk);
    mt_context_destroy(ctx);
}

static void test_summary(void **state)
{
    (void)state;
    printf("gpu_runtime: %d checks so far, %d failed\n", checks, failures);
    assert_int_equal(failures, 0);
}

int main(void)
{
    mt_test_require_gpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compositions),
        cmocka_unit_test(test_graph_capture),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_bad_topk_and_args),
        cmocka_unit_test(test_bad_expert_map),
        cmocka_unit_test(test_shipped_database),
        cmocka_unit_test(test_summary),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

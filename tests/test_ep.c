/*
 * CPU tests of expert parallelism (moetune/ep.h, runtime/ep_layout.h): the
 * expert placement and routing arithmetic, the wire format per quant mode,
 * capacities, the byte layout of the per-peer slots and the workspace, the
 * experts' view of the received rows, a CPU model of one dispatch over all
 * ranks (every valid slot reaches exactly one expert, once), the
 * composition checks, and the GPU-less and NCCL-less edges.
 */
#define _POSIX_C_SOURCE 200809L
#include "tests/support.h"
#include "common/cuda_driver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moetune/ep.h"
#include "moetune/moetune.h"
#include "runtime/ep_layout.h"
#include "runtime/rt_internal.h"

static void test_nccl_load_and_nvls(void **state)
{
    (void)state;
    unsetenv("NCCL_NVLS_ENABLE");   /* before the first load in this process */
    char ver[32] = "", msg[512] = "";
    mt_status st = mt_ep_nccl_load(ver, sizeof ver, msg, sizeof msg);
    if (st == MT_OK) {
        int a, b, c;
        assert_int_equal(sscanf(ver, "%d.%d.%d", &a, &b, &c), 3);
        printf("  NCCL %s loaded\n", ver);
    } else {
        assert_int_equal(st, MT_ERR_UNSUPPORTED);
        assert_true(strstr(msg, "NCCL") != NULL);
        printf("  %s\n", msg);
    }
    const char *nvls = getenv("NCCL_NVLS_ENABLE");
    assert_non_null(nvls);
    assert_string_equal(nvls, "0");
}

static void test_expert_ranges(void **state)
{
    (void)state;
    static const int64_t Es[] = {1, 2, 7, 8, 60, 64, 128, 257, 1024};
    for (size_t i = 0; i < sizeof Es / sizeof Es[0]; i++) {
        const int64_t E = Es[i];
        for (int world = 1; world <= MT_EP_MAX_RANKS && world <= E; world = world < 8 ? world + 1 : world * 2) {
            int64_t next = 0, mn = E, mx = 0;
            int32_t *map = malloc((size_t)E * sizeof *map);
            assert_non_null(map);
            for (int r = 0; r < world; r++) {
                int64_t first = -1, count = -1;
                assert_int_equal(mt_ep_expert_range(E, world, r, &first, &count), MT_OK);
                assert_int_equal(first, next);   /* contiguous, in rank order */
                next = first + count;
                mn = count < mn ? count : mn;
                mx = count > mx ? count : mx;
                assert_int_equal(mt_ep_expert_map(E, world, r, map), MT_OK);
                int64_t local = 0;
                for (int64_t e = 0; e < E; e++) {
                    const int owner = mt_ep_expert_owner(E, world, e);
                    assert_true(owner >= 0 && owner < world);
                    assert_int_equal(owner == r, map[e] >= 0);
                    if (map[e] >= 0) {
                        assert_int_equal(map[e], e - first);
                        local++;
                    }
                }
                assert_int_equal(local, count);
            }
            assert_int_equal(next, E);   /* the ranges cover every expert */
            assert_true(mx - mn <= 1 && mn >= 1);
            free(map);
        }
    }
    int64_t f, c;
    assert_int_equal(mt_ep_expert_range(8, 0, 0, &f, &c), MT_ERR_INVALID_ARG);
    assert_int_equal(mt_ep_expert_range(8, 2, 2, &f, &c), MT_ERR_INVALID_ARG);
    assert_int_equal(mt_ep_expert_range(4, 8, 0, &f, &c), MT_ERR_INVALID_ARG);   /* world > E */
    assert_int_equal(mt_ep_expert_range(128, MT_EP_MAX_RANKS + 1, 0, &f, &c), MT_ERR_INVALID_ARG);
    assert_int_equal(mt_ep_expert_owner(8, 2, 8), -1);
    assert_int_equal(mt_ep_expert_owner(8, 2, -1), -1);
    assert_int_equal(mt_ep_expert_owner(10, 4, 2), 0);   /* 3, 3, 2, 2 */
    assert_int_equal(mt_ep_expert_owner(10, 4, 3), 1);
    assert_int_equal(mt_ep_expert_owner(10, 4, 6), 2);
    assert_int_equal(mt_ep_expert_owner(10, 4, 9), 3);
}

/* Random routing with distinct experts per token (some ids bad when asked). */
static void random_routing(mt_rng *rng, int32_t *ids, int64_t M, int64_t topk, int64_t E, int bad)
{
    for (int64_t t = 0; t < M; t++)
        for (int64_t j = 0; j < topk; j++) {
            int32_t e;
            int dup;
            do {
                e = (int32_t)(mt_rng_next(rng) % (uint64_t)E);
                dup = 0;
                for (int64_t q = 0; q < j; q++)
                    dup |= ids[t * topk + q] == e;
            } while (dup);
            ids[t * topk + j] = e;
            if (bad && mt_rng_next(rng) % 17 == 0)
                ids[t * topk + j] = mt_rng_next(rng) % 2 ? -3 : (int32_t)(E + 5);
        }
}

static void test_route_counts(void **state)
{
    (void)state;
    mt_rng rng;
    mt_rng_seed(&rng, 11);
    const int64_t M = 300, topk = 6, E = 60;
    int32_t *ids = malloc((size_t)(M * topk) * sizeof *ids);
    assert_non_null(ids);
    random_routing(&rng, ids, M, topk, E, 1);
    for (int world = 1; world <= 8; world++) {
        int64_t counts[MT_EP_MAX_RANKS];
        assert_int_equal(mt_ep_route_counts(ids, M, topk, E, world, counts), MT_OK);
        int64_t total = 0;
        for (int r = 0; r < world; r++) {
            /* Independently: tokens with an expert in the rank's range. */
            int64_t first, count, want = 0;
            mt_ep_expert_range(E, world, r, &first, &count);
            for (int64_t t = 0; t < M; t++) {
                int hit = 0;
                for (int64_t j = 0; j < topk; j++)
                    hit |= ids[t * topk + j] >= first && ids[t * topk + j] < first + count;
                want += hit;
            }
            assert_int_equal(counts[r], want);
            assert_true(counts[r] <= M);
            total += counts[r];
        }
        if (world == 1)
            assert_true(total <= M && total > M / 2);
        else
            assert_true(total > M);   /* tokens go to several ranks */
    }
    int64_t c[2];
    assert_int_equal(mt_ep_route_counts(NULL, 4, 2, 8, 2, c), MT_ERR_INVALID_ARG);
    assert_int_equal(mt_ep_route_counts(ids, 0, 2, 8, 2, c), MT_OK);
    assert_int_equal(c[0] + c[1], 0);
    /* The problem's bounds: topk <= E, M <= MT_MAX_TOKENS (a larger M * topk
     * once indexed past the ids). */
    assert_int_equal(mt_ep_route_counts(ids, 1, 9, 8, 2, c), MT_ERR_INVALID_ARG);
    assert_int_equal(mt_ep_route_counts(ids, INT64_MAX / 2 + 1, 2, 8, 2, c), MT_ERR_INVALID_ARG);
    assert_int_equal(mt_ep_route_counts(ids, MT_MAX_TOKENS + 1, 2, 8, 2, c), MT_ERR_INVALID_ARG);
    free(ids);
}

static void test_wire_per_quant_mode(void **state)
{
    (void)state;
    mt_problem p;
    mt_problem_init(&p, 16, 8, 2, 256, 128);
    static const struct { mt_quant_mode q; mt_ep_wire w; } want[] = {
        {MT_QUANT_NONE, MT_EP_WIRE_ELEM},
        {MT_QUANT_FP8_PER_TENSOR, MT_EP_WIRE_ELEM},   /* the scale is global */
        {MT_QUANT_FP8_PER_TOKEN, MT_EP_WIRE_FP8_TOKEN},
        {MT_QUANT_FP8_BLOCK, MT_EP_WIRE_FP8_BLOCK},
        {MT_QUANT_INT8_PER_TENSOR, MT_EP_WIRE_ELEM},
        {MT_QUANT_INT8_PER_TOKEN, MT_EP_WIRE_INT8_TOKEN},
        {MT_QUANT_INT8_BLOCK, MT_EP_WIRE_INT8_BLOCK},
        {MT_QUANT_W8A16, MT_EP_WIRE_ELEM},
        {MT_QUANT_W4A16, MT_EP_WIRE_ELEM},
    };
    assert_int_equal(sizeof want / sizeof want[0], MT_QUANT_COUNT_);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        p.quant.mode = want[i].q;
        p.apply_router_weight_on_input = 0;
        assert_int_equal(mt_ep_wire_for(&p), want[i].w);
        p.apply_router_weight_on_input = 1;   /* weighted rows are quantized */
        assert_int_equal(mt_ep_wire_for(&p), MT_EP_WIRE_ELEM);
    }
    assert_string_equal(mt_ep_wire_name(MT_EP_WIRE_FP8_BLOCK), "fp8-block");
    assert_string_equal(mt_ep_wire_kernel_name(MT_EP_WIRE_INT8_TOKEN), "int8token");
    assert_null(mt_ep_wire_kernel_name(MT_EP_WIRE_COUNT_));
    assert_int_equal(mt_ep_wire_scales(MT_EP_WIRE_ELEM, 4096), 0);
    assert_int_equal(mt_ep_wire_scales(MT_EP_WIRE_FP8_TOKEN, 4096), 1);
    assert_int_equal(mt_ep_wire_scales(MT_EP_WIRE_FP8_BLOCK, 4096), 32);
    assert_int_equal(mt_ep_wire_scales(MT_EP_WIRE_INT8_BLOCK, 4112), 33);   /* a partial group */
    assert_int_equal(mt_ep_wire_row_bytes(MT_EP_WIRE_ELEM, 4096, 2), 8192);
    assert_int_equal(mt_ep_wire_row_bytes(MT_EP_WIRE_FP8_BLOCK, 4096, 2), 4096);
}

static void test_capacity(void **state)
{
    (void)state;
    for (int64_t m = 1; m < 2000; m += 37) {
        const int64_t full = mt_ep_capacity_for(m, 1.0);
        assert_true(full >= m && full % 8 == 0 && full < m + 8);
        const int64_t quarter = mt_ep_capacity_for(m, 0.25);
        assert_true(quarter % 8 == 0 && quarter >= 8 && quarter <= full);
        assert_true((double)quarter >= 0.25 * (double)m);
        assert_int_equal(mt_ep_capacity_for(m, 0.0), full);   /* nonsense factor: safe */
        assert_int_equal(mt_ep_capacity_for(m, 3.0), full);
    }
}

/* [a, a + n) and [b, b + m) do not overlap. */
static int disjoint(size_t a, size_t n, size_t b, size_t m) { return n == 0 || m == 0 || a + n <= b || b + m <= a; }

static void test_layout(void **state)
{
    (void)state;
    mt_problem p;
    mt_problem_init(&p, 100, 16, 4, 7168, 256);
    for (int w = 0; w < MT_EP_WIRE_COUNT_; w++)
        for (int world = 1; world <= 8; world *= 2) {
            const int64_t cap = mt_ep_capacity_for(p.M, world == 1 ? 1.0 : 0.5);
            mt_ep_layout L;
            char msg[256];
            assert_int_equal(mt_ep_layout_make(&p, world, cap, (mt_ep_wire)w, 12345, &L, msg, sizeof msg), MT_OK);
            const size_t c = (size_t)cap, tk = (size_t)p.topk;
            /* The slot's sections: aligned, disjoint, each big enough. */
            const size_t sec[4] = {L.slot_ids, L.slot_weights, L.slot_scales, L.slot_rows};
            const size_t len[4] = {c * tk * 4, c * tk * 4, c * (size_t)L.nscale * 4, c * L.row_bytes};
            for (int i = 0; i < 4; i++) {
                assert_int_equal(sec[i] % 256, 0);
                assert_true(sec[i] + len[i] <= L.slot_bytes);
                for (int j = 0; j < i; j++)
                    assert_true(disjoint(sec[i], len[i], sec[j], len[j]));
            }
            assert_int_equal(L.slot_bytes % 256, 0);
            assert_true(L.slot_bytes < len[0] + len[1] + len[2] + len[3] + 4 * 256);
            assert_int_equal(L.row_bytes, w == MT_EP_WIRE_ELEM ? 7168 * 2 : 7168);
            /* The workspace: every region aligned, disjoint, inside total. */
            const size_t rows = (size_t)world * c, rowb = 7168 * 2;
            const size_t off[] = {L.flags, L.recv_count, L.send_row, L.send, L.recv, L.x,
                                  L.x_ids, L.x_weights, L.y, L.ret, L.inner};
            const size_t sz[] = {(MT_EP_FLAGS + (size_t)world) * 4, (size_t)world * 4,
                                 (size_t)p.M * (size_t)world * 4, world * L.slot_bytes,
                                 world * L.slot_bytes, rows * rowb, rows * tk * 4, rows * tk * 4,
                                 rows * rowb, rows * rowb, 12345};
            for (size_t i = 0; i < sizeof off / sizeof off[0]; i++) {
                assert_int_equal(off[i] % 256, 0);
                assert_true(off[i] + sz[i] <= L.total);
                for (size_t j = 0; j < i; j++)
                    assert_true(disjoint(off[i], sz[i], off[j], sz[j]));
            }
            /* Gathered rows: peer-major, a bijection onto [0, world * cap). */
            char *seen = calloc(rows, 1);
            assert_non_null(seen);
            for (int peer = 0; peer < world; peer++)
                for (int64_t i = 0; i < cap; i++) {
                    const int64_t R = mt_ep_gathered_row(&L, peer, i);
                    assert_true(R >= 0 && R < (int64_t)rows && !seen[R]);
                    seen[R] = 1;
                }
            free(seen);
        }
    mt_ep_layout L;
    char msg[256];
    assert_int_equal(mt_ep_layout_make(&p, 0, 8, MT_EP_WIRE_ELEM, 0, &L, msg, sizeof msg), MT_ERR_INVALID_ARG);
    assert_int_equal(mt_ep_layout_make(&p, 2, 0, MT_EP_WIRE_ELEM, 0, &L, msg, sizeof msg), MT_ERR_INVALID_ARG);
    assert_int_equal(mt_ep_layout_make(&p, 64, MT_MAX_TOKENS / 32, MT_EP_WIRE_ELEM, 0, &L, msg, sizeof msg), MT_ERR_SHAPE);
    assert_true(strstr(msg, "rows") != NULL);
}

static void test_inner_problem_and_map(void **state)
{
    (void)state;
    mt_problem p;
    mt_problem_init(&p, 64, 10, 3, 256, 128);
    mt_ep_config cfg;
    mt_ep_config_init(&cfg);
    cfg.world = 4;
    cfg.rank = 1;
    mt_problem q;
    char msg[512];
    assert_int_equal(mt_ep_inner_problem(&p, &cfg, 24, &q, msg, sizeof msg), MT_OK);
    assert_int_equal(q.M, 96);
    assert_int_equal(q.E, 11);
    assert_int_equal(q.local_E, 3);   /* 10 experts on 4 ranks: 3, 3, 2, 2 */
    assert_true(q.has_expert_map);
    assert_int_equal(q.format, MT_FORMAT_STANDARD);
    int32_t map[11];
    assert_int_equal(mt_ep_inner_map(10, 4, 1, map), MT_OK);
    for (int e = 0; e < 10; e++)
        assert_int_equal(map[e], e >= 3 && e < 6 ? e - 3 : -1);
    assert_int_equal(map[10], -1);   /* the padding id is never local */
    cfg.format = MT_FORMAT_BATCHED;
    assert_int_equal(mt_ep_inner_problem(&p, &cfg, 24, &q, msg, sizeof msg), MT_OK);
    assert_int_equal(q.max_tokens, 96);
    p.max_tokens = 40;
    assert_int_equal(mt_ep_inner_problem(&p, &cfg, 24, &q, msg, sizeof msg), MT_OK);
    assert_int_equal(q.max_tokens, 40);
    /* No local expert receives more than every peer's buffer (a larger
     * max_tokens once sized a 21 GB workspace for 16-token buffers); a
     * negative one is refused, not taken as the default. */
    p.max_tokens = 1 << 20;
    assert_int_equal(mt_ep_inner_problem(&p, &cfg, 24, &q, msg, sizeof msg), MT_OK);
    assert_int_equal(q.max_tokens, 96);
    p.max_tokens = -5;
    assert_int_equal(mt_ep_inner_problem(&p, &cfg, 24, &q, msg, sizeof msg), MT_ERR_SHAPE);
    assert_non_null(strstr(msg, "max_tokens=-5"));
    p.max_tokens = 0;
    p.E = MT_MAX_EXPERTS;
    assert_int_equal(mt_ep_inner_problem(&p, &cfg, 24, &q, msg, sizeof msg), MT_ERR_SHAPE);
    p.E = 10;
    cfg.rank = 4;
    assert_int_equal(mt_ep_inner_problem(&p, &cfg, 24, &q, msg, sizeof msg), MT_ERR_INVALID_ARG);
    assert_true(strstr(msg, "rank") != NULL);
}

/*
 * A CPU model of one dispatch through the layouts: every rank packs its
 * tokens per peer (dedup, capacity), every rank unpacks the rows it
 * received into the gathered layout with the padding id, and the experts'
 * map decides which slots each rank computes. Every valid slot of every
 * token must be computed exactly once, on its owner, and nothing else.
 */
static void test_dispatch_model(void **state)
{
    (void)state;
    mt_rng rng;
    mt_rng_seed(&rng, 5);
    const int64_t topk = 4, E = 24, Mmax = 50;
    for (int world = 1; world <= 8; world *= 2) {
        int64_t M[8];
        int32_t *ids[8];
        int32_t *send_row[8];
        int64_t sent[8][8];   /* [rank][peer] rows used */
        const int64_t cap = mt_ep_capacity_for(Mmax, 1.0);
        int32_t *gathered[8];   /* per receiving rank: [world * cap, topk] ids */
        int32_t *origin[8];     /* per receiving rank: origin token of each row, -1 */
        for (int r = 0; r < world; r++) {
            M[r] = Mmax - (int64_t)(mt_rng_next(&rng) % 20);
            ids[r] = malloc((size_t)(M[r] * topk) * sizeof(int32_t));
            send_row[r] = malloc((size_t)(M[r] * world) * sizeof(int32_t));
            gathered[r] = malloc((size_t)(world * cap * topk) * sizeof(int32_t));
            origin[r] = malloc((size_t)(world * cap) * sizeof(int32_t));
            assert_true(ids[r] && send_row[r] && gathered[r] && origin[r]);
            random_routing(&rng, ids[r], M[r], topk, E, 0);
            memset(sent[r], 0, sizeof sent[r]);
        }
        mt_problem p;
        mt_problem_init(&p, Mmax, E, topk, 128, 128);
        mt_ep_layout L;
        assert_int_equal(mt_ep_layout_make(&p, world, cap, MT_EP_WIRE_ELEM, 0, &L, NULL, 0), MT_OK);
        /* pack */
        for (int r = 0; r < world; r++)
            for (int64_t t = 0; t < M[r]; t++)
                for (int peer = 0; peer < world; peer++) {
                    int needed = 0;
                    for (int64_t j = 0; j < topk; j++)
                        needed |= mt_ep_expert_owner(E, world, ids[r][t * topk + j]) == peer;
                    send_row[r][t * world + peer] = needed ? (int32_t)sent[r][peer]++ : -1;
                    assert_true(sent[r][peer] <= cap);
                }
        /* unpack on each receiving rank q: rows from every peer r */
        for (int q = 0; q < world; q++)
            for (int r = 0; r < world; r++)
                for (int64_t i = 0; i < cap; i++) {
                    const int64_t R = mt_ep_gathered_row(&L, r, i);
                    origin[q][R] = -1;
                    for (int64_t j = 0; j < topk; j++)
                        gathered[q][R * topk + j] = (int32_t)E;   /* padding id */
                    for (int64_t t = 0; t < M[r] && i < sent[r][q]; t++)
                        if (send_row[r][t * world + q] == i) {
                            origin[q][R] = (int32_t)t;
                            memcpy(&gathered[q][R * topk], &ids[r][t * topk], (size_t)topk * 4);
                        }
                }
        /* the experts: count computed slots per (origin rank, token, j) */
        for (int r = 0; r < world; r++) {
            int *hits = calloc((size_t)(M[r] * topk), sizeof *hits);
            assert_non_null(hits);
            for (int q = 0; q < world; q++) {
                int32_t map[25];
                assert_int_equal(mt_ep_inner_map(E, world, q, map), MT_OK);
                for (int64_t i = 0; i < cap; i++) {
                    const int64_t R = mt_ep_gathered_row(&L, r, i);
                    for (int64_t j = 0; j < topk; j++) {
                        const int32_t e = gathered[q][R * topk + j];
                        assert_true(e >= 0 && e <= E);
                        if (map[e] < 0)
                            continue;
                        assert_true(origin[q][R] >= 0);   /* padding is never computed */
                        assert_int_equal(e, ids[r][origin[q][R] * topk + j]);
                        hits[origin[q][R] * topk + j]++;
                    }
                }
            }
            for (int64_t s = 0; s < M[r] * topk; s++)
                assert_int_equal(hits[s], 1);
            /* The send counts agree with the CPU routing counts. */
            int64_t counts[8];
            assert_int_equal(mt_ep_route_counts(ids[r], M[r], topk, E, world, counts), MT_OK);
            for (int q = 0; q < world; q++)
                assert_int_equal(counts[q], sent[r][q]);
            free(hits);
        }
        for (int r = 0; r < world; r++) {
            free(ids[r]);
            free(send_row[r]);
            free(gathered[r]);
            free(origin[r]);
        }
    }
}

static void test_compose_checks(void **state)
{
    (void)state;
    mt_experts *std_ex = NULL, *bat_ex = NULL, *cub = NULL;
    assert_int_equal(mt_experts_create(MT_EXPERTS_MOETUNE, MT_FORMAT_STANDARD, &std_ex), MT_OK);
    assert_int_equal(mt_experts_create(MT_EXPERTS_MOETUNE, MT_FORMAT_BATCHED, &bat_ex), MT_OK);
    assert_int_equal(mt_experts_create(MT_EXPERTS_CUBLAS, MT_FORMAT_BATCHED, &cub), MT_OK);
    mt_problem p;
    mt_problem_init(&p, 64, 16, 2, 256, 128);
    mt_ep_config cfg;
    mt_ep_config_init(&cfg);
    cfg.world = 2;
    char msg[1024];
    assert_int_equal(mt_ep_check(&cfg, std_ex, &p, msg, sizeof msg), MT_OK);
    assert_int_equal(mt_ep_check(&cfg, bat_ex, &p, msg, sizeof msg), MT_ERR_INCOMPATIBLE);
    assert_true(strstr(msg, "format") != NULL && strstr(msg, "moetune-batched") != NULL);
    printf("  %s\n", msg);
    cfg.format = MT_FORMAT_BATCHED;
    assert_int_equal(mt_ep_check(&cfg, bat_ex, &p, msg, sizeof msg), MT_OK);
    assert_int_equal(mt_ep_check(&cfg, cub, &p, msg, sizeof msg), MT_OK);
    p.quant.mode = MT_QUANT_FP8_BLOCK;
    assert_int_equal(mt_ep_check(&cfg, bat_ex, &p, msg, sizeof msg), MT_OK);
    assert_int_equal(mt_ep_check(&cfg, cub, &p, msg, sizeof msg), MT_ERR_INCOMPATIBLE);
    assert_true(strstr(msg, "fp8-block") != NULL);
    printf("  %s\n", msg);
    cfg.world = 17;   /* more ranks than experts */
    assert_int_equal(mt_ep_check(&cfg, bat_ex, &p, msg, sizeof msg), MT_ERR_INVALID_ARG);
    cfg.world = 2;
    /* The rank's own problem is validated too: topk over E, and more tokens
     * than a problem takes, where a capacity kept the experts' problem
     * small (both once passed). */
    p.topk = 17;
    assert_int_equal(mt_ep_check(&cfg, bat_ex, &p, msg, sizeof msg), MT_ERR_SHAPE);
    assert_non_null(strstr(msg, "the problem of rank 0: "));
    assert_non_null(strstr(msg, "topk"));
    p.topk = 2;
    p.M = (int64_t)MT_MAX_TOKENS + 1;
    cfg.capacity = 64;
    assert_int_equal(mt_ep_check(&cfg, bat_ex, &p, msg, sizeof msg), MT_ERR_SHAPE);
    assert_non_null(strstr(msg, "the problem of rank 0: "));
    cfg.capacity = 0;
    p.M = 0;
    assert_int_equal(mt_ep_check(&cfg, bat_ex, &p, msg, sizeof msg), MT_ERR_SHAPE);
    assert_int_equal(mt_ep_check(NULL, bat_ex, &p, msg, sizeof msg), MT_ERR_INVALID_ARG);
    mt_experts_destroy(std_ex);
    mt_experts_destroy(bat_ex);
    mt_experts_destroy(cub);
}

static void test_create_without_gpu(void **state)
{
    (void)state;
    mt_experts *ex = NULL;
    assert_int_equal(mt_experts_create(MT_EXPERTS_MOETUNE, MT_FORMAT_STANDARD, &ex), MT_OK);
    mt_problem p;
    mt_problem_init(&p, 64, 16, 2, 256, 128);
    mt_ep_config cfg;
    mt_ep_config_init(&cfg);
    mt_ep *ep = NULL;
    assert_int_equal(mt_ep_create(NULL, &cfg, ex, &p, &ep), MT_ERR_INVALID_ARG);
    assert_non_null(ep);
    assert_true(strstr(mt_ep_errmsg(ep), "context") != NULL);
    assert_int_equal(mt_ep_workspace_size(ep), 0);
    /* It refuses calls (it once dereferenced its missing kernels), and its
     * message stays the reason. */
    mt_moe_tensors t;
    memset(&t, 0, sizeof t);
    char buf[256];
    assert_int_equal(mt_ep_run(ep, 1, &t, buf, sizeof buf, NULL), MT_ERR_INVALID_ARG);
    assert_int_equal(mt_ep_read_error(ep, 1, buf), MT_ERR_INVALID_ARG);
    assert_true(strstr(mt_ep_errmsg(ep), "context") != NULL);
    mt_ep_destroy(ep);
    /* A context that holds a GPU but failed on its database (made by hand)
     * is refused too, with its reason. */
    mt_context *bad = calloc(1, sizeof *bad);
    assert_non_null(bad);
    bad->gpu.ctx = (CUcontext)(uintptr_t)0x1000;   /* never used: the refusal comes first */
    mt_strlcpy(bad->err, "opening the user database: /u.db: unable to open", sizeof bad->err);
    assert_int_equal(mt_ep_create(bad, &cfg, ex, &p, &ep), MT_ERR_INVALID_ARG);
    assert_string_equal(mt_ep_errmsg(ep),
                        "the context's creation failed: opening the user database: /u.db: unable to open");
    mt_ep_destroy(ep);
    free(bad);
    mt_ep_destroy(NULL);
    assert_non_null(mt_ep_errmsg(NULL));
    assert_int_equal(mt_ep_create(NULL, &cfg, ex, &p, NULL), MT_ERR_INVALID_ARG);
    assert_int_equal(mt_ep_run(NULL, 1, NULL, NULL, 0, NULL), MT_ERR_INVALID_ARG);
    assert_int_equal(mt_ep_run_group(NULL, 1, NULL, NULL, NULL, NULL, NULL), MT_ERR_INVALID_ARG);
    void *comms[2];
    char msg[256];
    assert_int_equal(mt_ep_comms_create_local(0, NULL, comms, msg, sizeof msg), MT_ERR_INVALID_ARG);
    /* Without a driver or a GPU the status says which (it was NCCL's
     * "unhandled cuda error"); on a GPU machine this is a real call, left
     * to gpu_ep. */
    char probe[256];
    const mt_status drv = mt_cuda_load(probe, sizeof probe);
    if (drv == MT_ERR_NO_DRIVER || drv == MT_ERR_NO_DEVICE) {
        const int devices[1] = {0};
        assert_int_equal(mt_ep_comms_create_local(1, devices, comms, msg, sizeof msg), drv);
        assert_string_equal(msg, probe);
    }
    mt_ep_comm_destroy(NULL);
    mt_experts_destroy(ex);
}

/* Every kernel an EP object loads is among libmoetune's built-in defaults. */
static void test_kernels_are_built_in(void **state)
{
    (void)state;
    static const char *const ops[] = {"pack", "unpack", "combine"};
    static const char *const dts[] = {"bf16", "fp16"};
    for (size_t o = 0; o < 3; o++)
        for (size_t d = 0; d < 2; d++)
            for (int w = 0; w < MT_EP_WIRE_COUNT_; w++) {
                const char *wire = o == 2 ? "elem" : mt_ep_wire_kernel_name((mt_ep_wire)w);
                const char *kv[] = {"op", ops[o], "dtype", dts[d], "wire", wire};
                mt_variant v;
                char msg[256];
                assert_int_equal(mt_rt_default_find("moe_ep", kv, 3, &v, msg, sizeof msg), MT_OK);
                assert_string_equal(mt_variant_get(&v, "wire"), wire);
                assert_string_equal(mt_variant_get(&v, "op"), ops[o]);
            }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nccl_load_and_nvls),
        cmocka_unit_test(test_expert_ranges),
        cmocka_unit_test(test_route_counts),
        cmocka_unit_test(test_wire_per_quant_mode),
        cmocka_unit_test(test_capacity),
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_inner_problem_and_map),
        cmocka_unit_test(test_dispatch_model),
        cmocka_unit_test(test_compose_checks),
        cmocka_unit_test(test_create_without_gpu),
        cmocka_unit_test(test_kernels_are_built_in),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

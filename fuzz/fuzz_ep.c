/*
 * libFuzzer harness: the expert-parallelism arithmetic of runtime/ep_layout.c
 * on hostile numbers (issue 12: apply the fuzzing to every new input path).
 * The input fills E, world, rank, a routing, a capacity factor and an
 * unvalidated per-rank problem; the harness checks, against brute force
 * where it can:
 *   - expert ranges partition [0, E) in rank order, sizes E/world or one
 *     more, owner and expert_map agree with them, bad arguments refused;
 *   - per-peer routing counts equal a direct count;
 *   - capacities are multiples of 8 within [8, max_m rounded up to 8];
 *   - a buffer layout that is accepted has 256-aligned sections, each large
 *     enough for what it holds (sizes in 128-bit arithmetic, so a wrapped
 *     size_t shows), in order, inside the total;
 *   - the experts' problem of a rank is valid and what docs/EP.md says.
 * May call: common, runtime/ep_layout, fuzz_util.
 */
#include <math.h>
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "moetune/ep.h"
#include "moetune/problem.h"
#include "runtime/ep_layout.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_ranges(int64_t E, int world)
{
    int valid = world >= 1 && world <= MT_EP_MAX_RANKS && E >= world && E <= MT_MAX_EXPERTS;
    int64_t next = 0, f = 0, c = 0;
    for (int r = -1; r <= (world > 0 && world <= MT_EP_MAX_RANKS ? world : 1); r++) {
        mt_status st = mt_ep_expert_range(E, world, r, &f, &c);
        if (!valid || r < 0 || r >= world) {
            FUZZ_CHECK(st != MT_OK);
            continue;
        }
        FUZZ_CHECK(st == MT_OK && f == next && (c == E / world || c == E / world + 1));
        next += c;
    }
    if (!valid)
        return;
    FUZZ_CHECK(next == E);
    int32_t map[MT_MAX_EXPERTS + 1];
    for (int r = 0; r < world; r++) {
        FUZZ_CHECK(mt_ep_expert_range(E, world, r, &f, &c) == MT_OK);
        FUZZ_CHECK(mt_ep_expert_map(E, world, r, map) == MT_OK);
        for (int64_t e = 0; e < E; e++) {
            const int own = e >= f && e < f + c;
            FUZZ_CHECK(map[e] == (own ? (int32_t)(e - f) : -1));
            FUZZ_CHECK((mt_ep_expert_owner(E, world, e) == r) == own);
        }
    }
    FUZZ_CHECK(mt_ep_expert_owner(E, world, -1) == -1 && mt_ep_expert_owner(E, world, E) == -1);
}

static void check_routing(fuzz_in *in, int64_t E, int world)
{
    const int64_t M = fuzz_u8(in) % 48, topk = fuzz_u8(in) % 10;
    int32_t ids[48 * 9];
    for (int64_t i = 0; i < M * topk; i++)
        ids[i] = (int32_t)(int16_t)(fuzz_u8(in) | (fuzz_u8(in) << 8)) % 1100;
    int64_t counts[MT_EP_MAX_RANKS];
    mt_status st = mt_ep_route_counts(ids, M, topk, E, world, counts);
    if (mt_ep_expert_range(E, world, 0, &(int64_t){0}, &(int64_t){0}) != MT_OK) {
        FUZZ_CHECK(st != MT_OK);
        return;
    }
    if (st != MT_OK)
        return;   /* e.g. topk 0 refused: nothing to compare */
    for (int r = 0; r < world; r++) {
        int64_t want = 0;
        for (int64_t t = 0; t < M; t++) {
            int hit = 0;
            for (int64_t j = 0; j < topk; j++)
                hit |= mt_ep_expert_owner(E, world, ids[t * topk + j]) == r;
            want += hit;
        }
        FUZZ_CHECK(counts[r] == want);
    }
}

static void check_capacity(fuzz_in *in)
{
    const int64_t max_m = fuzz_int(in);
    const uint32_t raw = fuzz_u32(in);
    double factor = raw == 0xFFFFFFFFu ? NAN : (double)(int32_t)raw / (double)(1u << 30);
    const int64_t cap = mt_ep_capacity_for(max_m, factor);
    const int64_t m = max_m < 1 ? 1 : max_m > MT_MAX_TOKENS ? MT_MAX_TOKENS : max_m;
    FUZZ_CHECK(cap >= 8 && cap % 8 == 0 && cap <= (m + 7) / 8 * 8);
    if (factor == 1.0 || !(factor > 0.0) || factor > 1.0)
        FUZZ_CHECK(cap >= m);
}

/* Section [at, at + need) inside [at, next) and 256-aligned. */
static void section(size_t at, size_t next, __int128 need)
{
    FUZZ_CHECK(at % 256 == 0 && next >= at && (__int128)(next - at) >= need);
}

static void check_layout(fuzz_in *in, int world)
{
    mt_problem p;
    mt_problem_init(&p, fuzz_int(in), 8, 2, 128, 128);
    p.topk = fuzz_int(in);
    p.K = fuzz_int(in);
    p.dtype = fuzz_u8(in) & 1 ? MT_DTYPE_FP16 : MT_DTYPE_BF16;
    const int64_t cap = fuzz_int(in);
    const mt_ep_wire wire = (mt_ep_wire)(fuzz_u8(in) % (MT_EP_WIRE_COUNT_ + 1));
    const size_t inner = (size_t)fuzz_int(in);
    mt_ep_layout L;
    char msg[256];
    if (mt_ep_layout_make(&p, world, cap, wire, inner, &L, msg, sizeof msg) != MT_OK) {
        FUZZ_CHECK(msg[0]);
        return;
    }
    FUZZ_CHECK(world >= 1 && cap >= 1 && (unsigned)wire < MT_EP_WIRE_COUNT_);
    const __int128 W = world, c = cap, tk = p.topk, K = p.K, es = (__int128)L.es;
    const __int128 rows = W * c, rowb = K * es;
    section(L.slot_ids, L.slot_weights, c * tk * 4);
    section(L.slot_weights, L.slot_scales, c * tk * 4);
    section(L.slot_scales, L.slot_rows, c * L.nscale * 4);
    section(L.slot_rows, L.slot_bytes, c * (__int128)L.row_bytes);
    section(L.flags, L.recv_count, (MT_EP_FLAGS + W) * 4);
    section(L.recv_count, L.send_row, W * 4);
    section(L.send_row, L.send, (__int128)p.M * W * 4);
    section(L.send, L.recv, W * (__int128)L.slot_bytes);
    section(L.recv, L.x, W * (__int128)L.slot_bytes);
    section(L.x, L.x_ids, rows * rowb);
    section(L.x_ids, L.x_weights, rows * tk * 4);
    section(L.x_weights, L.y, rows * tk * 4);
    section(L.y, L.ret, rows * rowb);
    section(L.ret, L.inner, rows * rowb);
    section(L.inner, L.total, (__int128)inner);
    FUZZ_CHECK(mt_ep_gathered_row(&L, world - 1, cap - 1) == world * cap - 1);
}

static void check_inner_problem(fuzz_in *in, int64_t E, int world)
{
    mt_problem p;
    mt_problem_init(&p, fuzz_int(in), E, (int64_t)(fuzz_u8(in) % 10), 128, 128);
    mt_ep_config cfg;
    memset(&cfg, 0, sizeof cfg);   /* mt_ep_config_init lives with the NCCL parts */
    cfg.world = world;
    cfg.rank = (int)(fuzz_u8(in) % 70) - 2;
    cfg.format = fuzz_u8(in) & 1 ? MT_FORMAT_BATCHED : MT_FORMAT_STANDARD;
    const int64_t cap = fuzz_int(in);
    mt_problem out;
    char msg[512];
    int64_t first, count;
    mt_status st = mt_ep_inner_problem(&p, &cfg, cap, &out, msg, sizeof msg);
    if (mt_ep_expert_range(E, world, cfg.rank, &first, &count) != MT_OK) {
        FUZZ_CHECK(st != MT_OK && msg[0]);
        return;
    }
    if (st != MT_OK) {
        FUZZ_CHECK(msg[0]);
        return;
    }
    FUZZ_CHECK(out.M == world * cap && out.E == E + 1 && out.local_E == count &&
               out.has_expert_map && out.format == cfg.format);
    FUZZ_CHECK(mt_problem_validate(&out, NULL, 0) == MT_OK);
    int32_t map[MT_MAX_EXPERTS + 1];
    FUZZ_CHECK(mt_ep_inner_map(E, world, cfg.rank, map) == MT_OK);
    FUZZ_CHECK(map[E] == -1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in in = {data, size};
    const int64_t E = fuzz_int(&in);
    const int world = (int)(fuzz_u8(&in) % 70) - 2;
    check_ranges(E, world);
    check_routing(&in, E, world);
    check_capacity(&in);
    check_layout(&in, world);
    check_inner_problem(&in, E, world);
    return 0;
}

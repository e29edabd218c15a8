/*
 * Expert parallelism: the byte layout of every buffer (per-peer wire slots,
 * the workspace) and the experts' view of the received tokens. Pure CPU
 * arithmetic, shared by runtime/ep.c (which launches on it) and the CPU
 * tests (which check it without a GPU). docs/EP.md draws it.
 *
 * May call: common.
 */
#ifndef MT_RUNTIME_EP_LAYOUT_H
#define MT_RUNTIME_EP_LAYOUT_H

#include <stddef.h>
#include <stdint.h>
#include "moetune/ep.h"

/* Flag words at the start of the workspace: [0] 1 + the first slot with a
 * topk id outside [0, E); [1] 1 + (token * world + peer) of the first token
 * that did not fit the peer's buffer; [2], [3] spare. send_count [world]
 * follows them, so that one memset clears both. */
#define MT_EP_FLAGS 4

typedef struct mt_ep_layout {
    int world;
    int64_t cap, M, topk, K;
    size_t es;                  /* element bytes */
    mt_ep_wire wire;
    int64_t nscale;             /* fp32 scales per row on the wire (0: elem) */
    size_t row_bytes;           /* one row on the wire (K * es, or K bytes) */
    /* One peer slot of the send/recv buffers (offsets inside the slot):
     * topk ids [cap, topk] int32, weights [cap, topk] fp32, scales
     * [cap, nscale] fp32, rows [cap, row_bytes]. Sections 256-aligned. */
    size_t slot_ids, slot_weights, slot_scales, slot_rows, slot_bytes;
    /* The workspace (offsets, 256-aligned): flags + send_count, recv_count
     * [world], send_row [M, world], send/recv [world] slots, the experts'
     * input x [world * cap, K] with x_ids/x_weights [world * cap, topk],
     * their output y [world * cap, K], the returned rows ret [world * cap,
     * K], and the inner modular kernel's workspace. */
    size_t flags, recv_count, send_row, send, recv, x, x_ids, x_weights, y, ret, inner;
    size_t inner_bytes, total;
} mt_ep_layout;

/* Scales per row and bytes per row on the wire for K columns. */
int64_t mt_ep_wire_scales(mt_ep_wire w, int64_t K);
size_t mt_ep_wire_row_bytes(mt_ep_wire w, int64_t K, size_t elem_bytes);
/* The qtype/gran of a wire ("fp8"/"int8", "token"/"block"); NULL for elem. */
const char *mt_ep_wire_kernel_name(mt_ep_wire w);

/*
 * The layout for p (per-rank: M = max tokens, topk, K, dtype), `world`
 * ranks, `cap` rows per peer and inner_bytes of experts workspace.
 * MT_ERR_INVALID_ARG when an argument is out of range, MT_ERR_SHAPE when a
 * size overflows the int32 indexing of the kernels (world * cap rows).
 */
mt_status mt_ep_layout_make(const mt_problem *p, int world, int64_t cap, mt_ep_wire wire,
                            size_t inner_bytes, mt_ep_layout *out, char *msg, size_t msg_size);

/* Row of the experts' input (and output) that holds row i of peer p's
 * slot: p * cap + i. Rows past a peer's count are padding. */
int64_t mt_ep_gathered_row(const mt_ep_layout *L, int peer, int64_t i);

/* The experts' expert_map over E + 1 ids: rank's map, then id E (the id
 * the padding rows carry) mapped to -1. map: host [E + 1]. */
mt_status mt_ep_inner_map(int64_t E, int world, int rank, int32_t *map /* out [E + 1] */);

/* The experts' problem: p with M = world * cap, E + 1 experts, the rank's
 * expert_map and local_E, the EP format and (batched) max_tokens
 * defaulted to world * cap. Validated. */
mt_status mt_ep_inner_problem(const mt_problem *p, const mt_ep_config *cfg, int64_t cap,
                              mt_problem *out, char *msg, size_t msg_size);

#endif

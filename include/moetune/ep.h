/*
 * moetune expert parallelism (EP) over NCCL: a prepare/finalize that
 * dispatches tokens to the ranks owning their experts and combines the
 * expert outputs back, composed with moetune's experts objects.
 *
 * Each of `world` ranks owns a contiguous range of the E experts
 * (mt_ep_expert_range) and holds only their weights. A call of mt_ep_run
 * on every rank: pack (each token's row, quantized first where the quant
 * mode allows, once per rank that owns one of its topk experts) -> NCCL
 * exchange of fixed-size per-peer buffers -> the experts on the received
 * tokens (standard format, or the batched-experts format [local_E,
 * max_tokens, K] + counts) -> NCCL exchange back -> combine into out [M, K].
 * Every buffer has a fixed capacity, so a call needs no host
 * synchronization and can be captured into a CUDA graph; tokens over the
 * capacity are reported by mt_ep_read_error, never dropped silently.
 * docs/EP.md is the guide.
 *
 * NCCL is loaded at run time (no link dependency); without it the calls
 * that need it return MT_ERR_UNSUPPORTED with "NCCL not found". A
 * communicator is passed as an opaque pointer (an ncclComm_t). Loading NCCL
 * sets NCCL_NVLS_ENABLE=0 unless it is set: NVLink multicast stays off.
 *
 * Conventions as in moetune.h (status codes, messages on the handle,
 * destroy(NULL) is a no-op, device pointers on the rank's GPU).
 */
#ifndef MOETUNE_EP_H
#define MOETUNE_EP_H

#include <stddef.h>
#include <stdint.h>
#include "moetune/moetune.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MT_EP_MAX_RANKS 64

/* ------------------------------------------------------------------------
 * Routing arithmetic (CPU, no GPU, no NCCL)
 * ------------------------------------------------------------------------ */

/* Experts of `rank`: [*first, *first + *count). The first E % world ranks
 * get one expert more. MT_ERR_INVALID_ARG unless 1 <= world <=
 * MT_EP_MAX_RANKS, 0 <= rank < world and world <= E <= MT_MAX_EXPERTS. */
mt_status mt_ep_expert_range(int64_t E, int world, int rank, int64_t *first /* out */,
                             int64_t *count /* out */);
/* The rank owning expert e, or -1 when e is outside [0, E) or the
 * arguments are invalid. */
int mt_ep_expert_owner(int64_t E, int world, int64_t e);
/* Fill map[0..E) with rank's expert_map (global -> local id, -1 elsewhere). */
mt_status mt_ep_expert_map(int64_t E, int world, int rank, int32_t *map /* out [E] */);

/* How many tokens of topk_ids [M, topk] (host) this rank sends to each
 * peer: a token goes once to every rank owning at least one of its
 * experts; ids outside [0, E) are ignored. counts: host [world]. M in
 * [0, MT_MAX_TOKENS] and topk in [1, E], as for a problem. */
mt_status mt_ep_route_counts(const int32_t *topk_ids, int64_t M, int64_t topk, int64_t E,
                             int world, int64_t *counts /* out [world] */);

/* What dispatch puts on the wire for a token row. */
typedef enum mt_ep_wire {
    MT_EP_WIRE_ELEM = 0,      /* the element dtype (bf16/fp16) as is */
    MT_EP_WIRE_FP8_TOKEN,     /* fp8 e4m3 + one fp32 scale per row */
    MT_EP_WIRE_FP8_BLOCK,     /* fp8 e4m3 + one fp32 scale per 128 columns */
    MT_EP_WIRE_INT8_TOKEN,
    MT_EP_WIRE_INT8_BLOCK,
    MT_EP_WIRE_COUNT_
} mt_ep_wire;

/* The wire format for a problem: quantized for the per-token and block
 * w8a8 modes (the experts quantize the received rows again and get the
 * same bytes and scales, see docs/EP.md), the element dtype otherwise
 * (per-tensor scales are global, weight-only modes keep activations, and
 * apply_router_weight_on_input quantizes weighted rows). */
mt_ep_wire mt_ep_wire_for(const mt_problem *p);
/* "elem", "fp8-token", "fp8-block", "int8-token", "int8-block". */
const char *mt_ep_wire_name(mt_ep_wire w);

/* Rows per peer buffer for max_m tokens per rank: max_m (a token can need
 * every rank; taken as at most MT_MAX_TOKENS) scaled by `factor` in (0, 1]
 * (anything else means 1) and rounded up to a multiple of 8, at least 8
 * and at most max_m rounded up to 8. factor 1 never
 * overflows; a smaller one saves memory and bandwidth when the routing is
 * known to be spread (mt_ep_route_counts gives the loads). */
int64_t mt_ep_capacity_for(int64_t max_m, double factor);

/* ------------------------------------------------------------------------
 * The EP object
 * ------------------------------------------------------------------------ */

typedef struct mt_ep mt_ep;

typedef struct mt_ep_config {
    mt_act_format format;    /* the experts' format: standard or batched */
    void *comm;              /* ncclComm_t of this rank (not owned) */
    int rank, world;
    int64_t capacity;        /* rows per peer buffer; 0: the max M (safe) */
} mt_ep_config;

/* Fill *cfg: standard format, one rank, no communicator, capacity 0. */
void mt_ep_config_init(mt_ep_config *cfg);

/*
 * Can the EP prepare/finalize of cfg serve problem p with experts ex?
 * CPU only (comm is not used). p is the per-rank problem: M = the most
 * tokens a rank passes, E global; has_expert_map/local_E/format are set by
 * the EP object (the ranks' expert ranges); max_tokens is the batched
 * capacity per local expert (0: world * capacity; a larger value is taken
 * as world * capacity, the most rows a local expert can receive; negative:
 * MT_ERR_SHAPE). p is validated as a problem of its own first (topk <= E,
 * M within MT_MAX_TOKENS...).
 * MT_OK, MT_ERR_INCOMPATIBLE (format or quant, the message names both
 * objects, as mt_compose_check), MT_ERR_INVALID_ARG (a NULL argument, a bad
 * format, a negative capacity, or world and rank outside 1 <= world <= min(E,
 * MT_EP_MAX_RANKS), 0 <= rank < world), MT_ERR_SHAPE (M < 1; E above
 * MT_MAX_EXPERTS - 1 = 1023, as one expert id is kept for padding rows;
 * world * capacity past MT_MAX_TOKENS), or the problem's validation status.
 * msg: host buffer or NULL.
 */
mt_status mt_ep_check(const mt_ep_config *cfg, const mt_experts *ex, const mt_problem *p,
                      char *msg, size_t msg_size);

/*
 * Create the EP object of this rank on ctx's GPU: checks (mt_ep_check),
 * loads NCCL, composes the local experts (an inner modular kernel for
 * world * capacity tokens) and loads the pack/unpack/combine kernels;
 * allocates a few small device tables (the expert maps). *out is set even
 * on failure (unless MT_ERR_NO_MEMORY): read mt_ep_errmsg, then destroy;
 * until then it refuses every call (MT_ERR_INVALID_ARG, the message still
 * the reason; workspace size 0).
 * Errors: those of mt_ep_check and mt_modular_kernel_create,
 * MT_ERR_UNSUPPORTED (NCCL not found), MT_ERR_CUDA.
 */
mt_status mt_ep_create(mt_context *ctx, const mt_ep_config *cfg, const mt_experts *ex,
                       const mt_problem *p, mt_ep **out);
void mt_ep_destroy(mt_ep *ep);
const char *mt_ep_errmsg(const mt_ep *ep);   /* never NULL */
/* Its name ("ep-standard", "ep-batched"), format, wire, capacity, experts. */
const char *mt_ep_name(const mt_ep *ep);
mt_act_format mt_ep_format(const mt_ep *ep);
mt_ep_wire mt_ep_wire_of(const mt_ep *ep);
int64_t mt_ep_capacity(const mt_ep *ep);
/* This rank's experts: [first, first + count); the caller's w1/w2 and
 * weight scales hold these experts only. */
void mt_ep_local_experts(const mt_ep *ep, int64_t *first, int64_t *count);
/* Bytes of device workspace a call needs (256-byte aligned). */
size_t mt_ep_workspace_size(const mt_ep *ep);

/*
 * One EP MoE call on this rank: t holds DEVICE pointers in the standard
 * layout: hidden/out [M, K], topk_ids [M, topk] (global expert ids) and
 * topk_weights; w1/w2 and their scales for this rank's experts only
 * (local_E of them); expert_map and expert_num_tokens must be NULL. Every
 * rank of the communicator must call it (M may differ, 0 included: a rank
 * without tokens may pass NULL for hidden, out, topk_ids, topk_weights). It
 * enqueues on `stream` only (kernels and NCCL operations in one NCCL
 * group): no allocation, no host synchronization (graph-capturable).
 * Errors (message on ep): MT_ERR_INVALID_ARG, MT_ERR_SHAPE, MT_ERR_ALIGNMENT,
 * MT_ERR_CUDA (NCCL included).
 */
mt_status mt_ep_run(mt_ep *ep, int64_t M, const mt_moe_tensors *t, void *workspace,
                    size_t workspace_size, CUstream stream);

/*
 * The same for n ranks driven by one thread (one process with several
 * GPUs, e.g. communicators from mt_ep_comms_create_local): eps[i] runs
 * M[i] tokens of t[i] with ws[i] on streams[i]. The NCCL operations of all
 * ranks are grouped together, which a single thread needs to avoid a
 * deadlock. On an error the first failing rank's message is on its object.
 */
mt_status mt_ep_run_group(mt_ep *const *eps, int n, const int64_t *M, const mt_moe_tensors *t,
                          void *const *ws, const size_t *ws_size, const CUstream *streams);

/*
 * After the stream of the last call has completed: MT_OK, or
 * MT_ERR_DEVICE_CHECK naming what was found on the GPU: a topk id outside
 * [0, E), a token that did not fit a peer buffer (capacity), or the
 * experts' own checks (the batched capacity per expert). Synchronous.
 */
mt_status mt_ep_read_error(mt_ep *ep, int64_t M, const void *workspace);   /* M: that call's */

/* ------------------------------------------------------------------------
 * NCCL helpers
 * ------------------------------------------------------------------------ */

/* Load NCCL now: MT_OK, or MT_ERR_UNSUPPORTED ("NCCL not found ...") with
 * the reason in msg. Also reports the version ("2.28.5") when version is
 * not NULL. */
mt_status mt_ep_nccl_load(char *version, size_t version_size, char *msg, size_t msg_size);

/* One communicator per local GPU in one process (ncclCommInitAll over
 * devices[0..n)): comms[i] is rank i on devices[i]. Destroy each with
 * mt_ep_comm_destroy. */
mt_status mt_ep_comms_create_local(int n, const int *devices, void **comms /* out [n] */,
                                   char *msg, size_t msg_size);
void mt_ep_comm_destroy(void *comm);

#ifdef __cplusplus
}
#endif
#endif

/*
 * A kernel variant: one valid parameter point of a template family for one
 * architecture. Produced by the generator (from Lua), stored by the database,
 * launched by the runtime (which has no Lua): so the struct is plain C and
 * lives in the common layer.
 *
 * The canonical name is the variant's identity everywhere: database key,
 * compile-cache key part and kernel symbol (extern "C" __global__ NAME).
 * It is "mtk_<family>" followed, for each parameter in the template's
 * declared order, by "_" + abbrev + value (characters outside [A-Za-z0-9]
 * in a value become 'x').
 */
#ifndef MOETUNE_VARIANT_H
#define MOETUNE_VARIANT_H

#include <stddef.h>
#include <stdint.h>
#include "moetune/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most dynamic shared memory any supported target gives a block (the
 * opt-in maximum of sm_90, 227 KiB): what a variant may ask for. */
#define MT_MAX_SMEM_PER_BLOCK 232448

#define MT_VARIANT_MAX_PARAMS 32
#define MT_VARIANT_NAME_MAX 256

typedef struct mt_param {
    char name[32];    /* "BLOCK_M" */
    char value[48];   /* "64", "bf16" */
} mt_param;

typedef struct mt_variant {
    char family[48];              /* "grouped_gemm" */
    char name[MT_VARIANT_NAME_MAX];
    char arch[16];                /* "sm_90a" */
    int template_version;
    int nparams;
    mt_param params[MT_VARIANT_MAX_PARAMS];
    int threads;                  /* threads per block */
    int smem_bytes;               /* dynamic shared memory per block */
} mt_variant;

/* Value of a parameter as text, or NULL when the variant has no such one. */
const char *mt_variant_get(const mt_variant *v, const char *name);
/* Value as an integer; MT_ERR_NOT_FOUND if absent, MT_ERR_INVALID_ARG if
 * not an integer. */
mt_status mt_variant_get_int(const mt_variant *v, const char *name, int64_t *out);
/* Integer value or `dflt` when absent or not an integer. */
int64_t mt_variant_int(const mt_variant *v, const char *name, int64_t dflt);

/* Add a parameter (keeps declaration order). MT_ERR_INVALID_ARG when a name
 * or value is too long, repeated, or the table is full. */
mt_status mt_variant_add(mt_variant *v, const char *name, const char *value);

/* Compute v->name from family, params and their abbreviations (abbrevs[i]
 * for params[i]; NULL means the empty abbreviation). */
mt_status mt_variant_make_name(mt_variant *v, const char *const *abbrevs);
/* The same, leaving out of the name every parameter whose value is
 * omit[i] (omit NULL, or omit[i] NULL: none left out). A template declares
 * such a value for a parameter added after kernels were tuned, so that the
 * names of the points that existed before keep their spelling. */
mt_status mt_variant_make_name_omitting(mt_variant *v, const char *const *abbrevs,
                                        const char *const *omit);

/* 1 when v has the family and parameters of `like` except that parameter
 * `param` has `value` (used to find the GEMM2 sibling of a GEMM1 tile). */
int mt_variant_same_but(const mt_variant *v, const mt_variant *like, const char *param,
                        const char *value);
/* 1 when v has the family and parameter names of `like` and its values
 * everywhere but in p1 and (p2 non-NULL) p2, which may have any value. */
int mt_variant_differs_only_in(const mt_variant *v, const mt_variant *like, const char *p1,
                               const char *p2);
/* The same with the parameters that may differ a NULL-ended list. */
int mt_variant_differs_only_among(const mt_variant *v, const mt_variant *like, const char *const *free_params);

/* The families whose kernels serve the gemm1/gemm2 steps of a pipeline: they
 * share the kernel argument (mt_gemm_args) and the parameter names dtype,
 * quant, format, epilogue, BLOCK_M and BLOCK_N. "grouped_gemm" (mma.sync,
 * sm_80+), "grouped_gemm_sm90" (warpgroup MMA, sm_90a only) and
 * "grouped_gemv" (decode: CUDA-core matrix-vector products, sm_80+).
 * NULL-ended. */
extern const char *const mt_gemm_families[];
/* 1 when v belongs to one of mt_gemm_families. */
int mt_variant_is_gemm(const mt_variant *v);
/* 1 when GEMM variant v quantizes its own A rows, each CTA its slot's rows
 * into shared memory (grouped_gemv AQUANT other than "step"): GEMM1's token
 * rows of the 16-bit hidden states as they are (AQUANT=cta), so that the
 * pipeline has no quant step, or GEMM2's after the activation-and-mul of
 * GEMM1's stored output (AQUANT=silu, gelu), so that it has no act step. */
int mt_variant_quantizes_a(const mt_variant *v);
/* For such a GEMM2 tile, the activation it applies first ("silu",
 * "gelu"); NULL for every other variant (AQUANT=cta included). */
const char *mt_variant_a_activation(const mt_variant *v);
/* 1 when GEMM1 variant v also quantizes its activated output for GEMM2, the
 * last CTA of each slot's 128-column group that group (grouped_gemv
 * OQUANT=last), so that the pipeline has no act step. */
int mt_variant_quantizes_out(const mt_variant *v);
/* The weight rows of the GEMM2 tile that GEMM1 variant v runs in its own
 * launch (grouped_gemv CHAIN > 0: a decode batch in one launch), 0 for a
 * GEMM1 that leaves GEMM2 to a launch of its own. */
int64_t mt_variant_chain(const mt_variant *v);
/* 1 when u is the GEMM2 tile that such a GEMM1 g1 runs: the last CTA's
 * topk sum ("lastsum") of CHAIN weight rows with g1's dtype, quant, format, BLOCK_M,
 * WARPS, UNROLL and AHEAD, fed by it (AQUANT and OQUANT "step"), itself
 * unchained and uncapped (SM_WARPS 0: g1's register cap covers both). A
 * pipeline names it as its GEMM2. */
int mt_variant_is_chain_gemm2(const mt_variant *u, const mt_variant *g1);
/* 1 when GEMM variant v adds each token's topk slots itself, which only a
 * GEMM2 of the standard format does: the epilogue "sum" (a tiled family's
 * rows added into fp32 sums by atomics; grouped_gemv's a row block per
 * token) or "lastsum" (grouped_gemv: rows stored per slot, the last CTA of
 * a token's slots adding them into the output). */
int mt_variant_sums_topk(const mt_variant *v);
/* 1 when v's epilogue is one a GEMM2 may have: "store" (a row per slot, for
 * the reduce step) or a topk sum (mt_variant_sums_topk). */
int mt_variant_is_gemm2_epilogue(const mt_variant *v);

/* Serialize to / parse from one line of text, as stored in the database:
 * "family=F;arch=A;version=V;threads=T;smem=S;name=N;p.K1=V1;p.K2=V2..." */
mt_status mt_variant_format(const mt_variant *v, char *out, size_t size);
mt_status mt_variant_parse(const char *text, mt_variant *v, char *msg, size_t msg_size);

#ifdef __cplusplus
}
#endif
#endif

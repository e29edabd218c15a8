/*
 * Prepare/finalize and experts objects: what each declares (activation
 * format, quant modes) and the composition rule between them. No GPU.
 *
 * May call: runtime/moe_launch (to ask which quant modes the generated
 * kernels take), common.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_internal.h"

static const char *const pf_names[MT_PF_COUNT_] = {"standard", "batched"};

mt_status mt_prepare_finalize_create(mt_pf_kind kind, mt_prepare_finalize **out)
{
    if (!out)
        return MT_ERR_INVALID_ARG;
    *out = NULL;
    if ((unsigned)kind >= MT_PF_COUNT_)
        return MT_ERR_INVALID_ARG;
    mt_prepare_finalize *pf = calloc(1, sizeof *pf);
    if (!pf)
        return MT_ERR_NO_MEMORY;
    pf->kind = kind;
    pf->format = kind == MT_PF_STANDARD ? MT_FORMAT_STANDARD : MT_FORMAT_BATCHED;
    *out = pf;
    return MT_OK;
}

void mt_prepare_finalize_destroy(mt_prepare_finalize *pf) { free(pf); }

const char *mt_prepare_finalize_name(const mt_prepare_finalize *pf)
{
    return pf ? pf_names[pf->kind] : "(null)";
}

mt_act_format mt_prepare_finalize_format(const mt_prepare_finalize *pf)
{
    return pf ? pf->format : MT_FORMAT_COUNT_;
}

int mt_prepare_finalize_accepts(const mt_prepare_finalize *pf, mt_quant_mode q)
{
    /* Both only route slots and move element-dtype rows (quantizing the
     * activations is the experts' business), so every mode passes. */
    return pf && (unsigned)q < MT_QUANT_COUNT_;
}

mt_status mt_experts_create(mt_experts_kind kind, mt_act_format format, mt_experts **out)
{
    if (!out)
        return MT_ERR_INVALID_ARG;
    *out = NULL;
    if ((unsigned)kind >= MT_EXPERTS_COUNT_ || (unsigned)format >= MT_FORMAT_COUNT_)
        return MT_ERR_INVALID_ARG;
    if (kind == MT_EXPERTS_CUBLAS && format != MT_FORMAT_BATCHED)
        return MT_ERR_UNSUPPORTED;
    mt_experts *ex = calloc(1, sizeof *ex);
    if (!ex)
        return MT_ERR_NO_MEMORY;
    ex->kind = kind;
    ex->format = format;
    snprintf(ex->name, sizeof ex->name, "%s-%s", kind == MT_EXPERTS_CUBLAS ? "cublas" : "moetune",
             mt_act_format_name(format));
    *out = ex;
    return MT_OK;
}

void mt_experts_destroy(mt_experts *ex) { free(ex); }
const char *mt_experts_name(const mt_experts *ex) { return ex ? ex->name : "(null)"; }
mt_act_format mt_experts_format(const mt_experts *ex) { return ex ? ex->format : MT_FORMAT_COUNT_; }

int mt_rt_launcher_accepts(mt_quant_mode q, mt_act_format format, const char *arch)
{
    /* Ask the launcher (mt_moe_quant_supported) with a probe problem, so
     * the answer follows the modes it learns. Weight-only modes need a
     * group size to validate. arch NULL: the most capable known target. */
    if ((unsigned)q >= MT_QUANT_COUNT_)
        return 0;
    mt_problem p;
    mt_problem_init(&p, 1, 8, 2, 128, 128);
    p.quant.mode = q;
    p.quant.group_size = mt_quant_is_weight_only(q) ? 128 : 0;
    p.format = format;
    p.max_tokens = 1;
    char msg[256];
    return mt_problem_validate(&p, msg, sizeof msg) == MT_OK &&
           mt_moe_quant_supported(&p, arch ? arch : "sm_90a", msg, sizeof msg) == MT_OK;
}

int mt_experts_accepts(const mt_experts *ex, mt_quant_mode q)
{
    if (!ex || (unsigned)q >= MT_QUANT_COUNT_)
        return 0;
    if (ex->kind == MT_EXPERTS_CUBLAS)
        return q == MT_QUANT_NONE;   /* plain bf16/fp16 GEMMs */
    return mt_rt_launcher_accepts(q, ex->format, NULL);
}

/* "none, fp8-block" for the modes `accepts` takes. */
static void list_modes(const void *obj, int (*accepts)(const void *, mt_quant_mode), char *buf,
                       size_t size)
{
    mt_buf b = {0};
    for (int q = 0; q < MT_QUANT_COUNT_; q++)
        if (accepts(obj, (mt_quant_mode)q))
            mt_buf_printf(&b, "%s%s", b.len ? ", " : "", mt_quant_mode_name((mt_quant_mode)q));
    mt_strlcpy(buf, b.data ? b.data : "none at all", size);
    mt_buf_free(&b);
}

static int pf_accepts(const void *o, mt_quant_mode q) { return mt_prepare_finalize_accepts(o, q); }
static int ex_accepts(const void *o, mt_quant_mode q) { return mt_experts_accepts(o, q); }

mt_status mt_rt_compose_problem(const mt_prepare_finalize *pf, const mt_problem *p,
                                mt_problem *out, char *msg, size_t msg_size)
{
    *out = *p;
    out->format = pf->format;
    /* The batched capacity: 0 means M; a negative one is refused below
     * (mt_problem_validate). */
    if (out->format == MT_FORMAT_BATCHED && out->max_tokens == 0)
        out->max_tokens = out->M > 0 ? out->M : 1;
    mt_status st = mt_problem_validate(out, msg, msg_size);
    if (st) {
        char tmp[512];
        mt_strlcpy(tmp, msg ? msg : "", sizeof tmp);
        return mt_errf(msg, msg_size, st, "bad problem: %s", tmp);
    }
    return MT_OK;
}

mt_status mt_compose_check(const mt_prepare_finalize *pf, const mt_experts *ex,
                           const mt_problem *p, char *msg, size_t msg_size)
{
    if (!pf || !ex || !p)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "%s is NULL",
                       !pf ? "the prepare/finalize" : !ex ? "the experts" : "the problem");
    mt_problem q;
    mt_status st = mt_rt_compose_problem(pf, p, &q, msg, msg_size);
    if (st)
        return st;
    const char *pn = mt_prepare_finalize_name(pf), *en = mt_experts_name(ex);
    if (pf->format != ex->format)
        return mt_errf(msg, msg_size, MT_ERR_INCOMPATIBLE,
                       "cannot compose prepare/finalize '%s' with experts '%s': format mismatch: "
                       "the prepare/finalize produces the %s format, the experts take the %s format",
                       pn, en, mt_act_format_name(pf->format), mt_act_format_name(ex->format));
    const char *mode = mt_quant_mode_name(q.quant.mode);
    char can[256];
    if (!mt_prepare_finalize_accepts(pf, q.quant.mode)) {
        list_modes(pf, pf_accepts, can, sizeof can);
        return mt_errf(msg, msg_size, MT_ERR_INCOMPATIBLE,
                       "cannot compose prepare/finalize '%s' with experts '%s': quant mismatch: "
                       "prepare/finalize '%s' does not take quant mode %s (it takes: %s)",
                       pn, en, pn, mode, can);
    }
    if (!mt_experts_accepts(ex, q.quant.mode)) {
        list_modes(ex, ex_accepts, can, sizeof can);
        return mt_errf(msg, msg_size, MT_ERR_INCOMPATIBLE,
                       "cannot compose prepare/finalize '%s' with experts '%s': quant mismatch: "
                       "experts '%s' do not take quant mode %s (they take: %s)",
                       pn, en, en, mode, can);
    }
    /* The mode's needs of this shape, before any kernel is loaded. */
    return mt_moe_quant_shape_ok(&q, msg, msg_size);
}

/*
 * The oracle's quantization layer: weight rows in every storage format,
 * their scales, activation quantization and the scaled dot product.
 * Layouts are those of moetune/problem.h; weights are indexed by the local
 * expert id.
 *
 * May call: libc, libm, moetune/numeric.h.
 */
#include "oracle/oracle_internal.h"

#include <math.h>

#include "moetune/numeric.h"

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* rows x cols of one expert's matrix; the GEMM reduces over cols. */
static void matrix_dims(const mt_problem *p, int which, int64_t *rows, int64_t *cols)
{
    *rows = which ? p->K : 2 * p->N;
    *cols = which ? p->N : p->K;
}

void mto_weight_row(const mt_problem *p, const mt_moe_tensors *t, int which, int64_t e,
                    int64_t row, float *dst)
{
    int64_t rows, cols;
    matrix_dims(p, which, &rows, &cols);
    const void *w = which ? t->w2 : t->w1;
    int64_t idx = e * rows + row; /* row index over all experts */
    const mt_quant_config *q = &p->quant;
    if (!mt_quant_is_weight_only(q->mode)) {
        mt_dtype wdt = mt_quant_weight_dtype(q, p->dtype);
        const char *base = (const char *)w + (size_t)(idx * cols) * mt_dtype_size(wdt);
        mt_to_float(base, wdt, (size_t)cols, dst);
        return;
    }
    int64_t group = q->group_size, ngroups = cols / group;
    const float *scale = (which ? t->w2_scale : t->w1_scale) + idx * ngroups;
    const uint8_t *zero = q->has_zero_point ? (which ? t->w2_zero : t->w1_zero) + idx * ngroups
                                            : NULL;
    if (q->mode == MT_QUANT_W8A16) {
        const uint8_t *u = (const uint8_t *)w + idx * cols;
        const int8_t *s = (const int8_t *)w + idx * cols;
        for (int64_t k = 0; k < cols; k++) {
            int64_t g = k / group;
            float v = zero ? (float)((int)u[k] - (int)zero[g]) : (float)s[k];
            dst[k] = v * scale[g];
        }
        return;
    }
    /* w4a16: element k is the low nibble of byte k/2 for even k, the high
     * nibble for odd k; unsigned, zero point 8 without explicit zeros. */
    const uint8_t *b = (const uint8_t *)w + idx * (cols / 2);
    for (int64_t k = 0; k < cols; k++) {
        int64_t g = k / group;
        int nib = (k & 1) ? b[k / 2] >> 4 : b[k / 2] & 0xf;
        int z = zero ? (int)zero[g] : 8;
        dst[k] = (float)(nib - z) * scale[g];
    }
}

const float *mto_weight_row_scales(const mt_problem *p, const mt_moe_tensors *t, int which,
                                   int64_t e, int64_t row)
{
    int64_t rows, cols;
    matrix_dims(p, which, &rows, &cols);
    const float *sw = which ? t->w2_scale : t->w1_scale;
    switch (mt_quant_granularity(p->quant.mode)) {
    case MT_GRAN_TENSOR: return sw + e;
    case MT_GRAN_TOKEN: return sw + e * rows + row;
    case MT_GRAN_BLOCK: {
        int64_t rb = ceil_div(rows, MT_QUANT_BLOCK), cb = ceil_div(cols, MT_QUANT_BLOCK);
        return sw + (e * rb + row / MT_QUANT_BLOCK) * cb;
    }
    default: return NULL;
    }
}

int64_t mto_group_len(const mt_problem *p, int64_t n)
{
    return mt_quant_granularity(p->quant.mode) == MT_GRAN_BLOCK ? MT_QUANT_BLOCK : n;
}

int64_t mto_groups(const mt_problem *p, int64_t n) { return ceil_div(n, mto_group_len(p, n)); }

static float amax_of(const float *x, int64_t n)
{
    float m = 0.0f;
    for (int64_t i = 0; i < n; i++)
        m = fmaxf(m, fabsf(x[i]));
    return m;
}

void mto_quant_rows(const mt_problem *p, const float *static_scale, const float *x, int64_t X,
                    int64_t n, float *q, float *s)
{
    mt_dtype qdt = mt_quant_act_dtype(p->quant.mode);
    mt_quant_gran gran = mt_quant_granularity(p->quant.mode);
    int64_t glen = mto_group_len(p, n), ng = mto_groups(p, n);
    float tensor_scale = 1.0f;
    if (gran == MT_GRAN_TENSOR)
        tensor_scale = static_scale ? *static_scale : mt_act_scale(amax_of(x, X * n), qdt);
    for (int64_t r = 0; r < X; r++) {
        const float *xr = x + r * n;
        for (int64_t g = 0; g < ng; g++) {
            int64_t k0 = g * glen, len = n - k0 < glen ? n - k0 : glen;
            float sc = gran == MT_GRAN_TENSOR ? tensor_scale : mt_act_scale(amax_of(xr + k0, len), qdt);
            s[r * ng + g] = sc;
            for (int64_t k = k0; k < k0 + len; k++)
                q[r * n + k] = mt_quant_value(xr[k], sc, qdt);
        }
    }
}

/* Four independent chains: faster, and the order is fixed (deterministic). */
static double dot_d(const float *a, const float *b, int64_t n)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += (double)a[i] * b[i];
        s1 += (double)a[i + 1] * b[i + 1];
        s2 += (double)a[i + 2] * b[i + 2];
        s3 += (double)a[i + 3] * b[i + 3];
    }
    for (; i < n; i++)
        s0 += (double)a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

double mto_scaled_dot(const float *a, const float *w, int64_t n, int64_t g, const float *sa,
                      const float *sw)
{
    if (!sa)
        return dot_d(a, w, n);
    double s = 0;
    for (int64_t k0 = 0, gi = 0; k0 < n; k0 += g, gi++) {
        int64_t len = n - k0 < g ? n - k0 : g;
        s += dot_d(a + k0, w + k0, len) * (double)sa[gi] * (double)sw[gi];
    }
    return s;
}

/*
 * Argument parsing helpers (see args.h).
 */
#include "cli/args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mt_arg_int(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return 0;
    *out = v;
    return 1;
}

int mt_arg_int_list(const char *s, int64_t lo, int64_t hi, int64_t *out, int cap, int *n)
{
    *n = 0;
    while (*s) {
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (errno || end == s || v < lo || v > hi || *n >= cap || (*end && *end != ','))
            return 0;
        out[(*n)++] = v;
        s = *end ? end + 1 : end;
    }
    return *n > 0;
}

#include "tuner/presets.h"

void mt_arg_bad(const char *cmd, const char *opt, const char *val)
{
    fprintf(stderr, "moetune %s: bad value '%s' for %s", cmd, val, opt);
    if (!strcmp(opt, "--M"))
        fprintf(stderr, " (a comma-separated list of at most %d values, each in [1, %d])",
                MT_ARG_MAX_MS, MT_MAX_TOKENS);
    fputc('\n', stderr);
}

void mt_shape_args_init(mt_shape_args *a)
{
    mt_problem_init(&a->shape, 1, 0, 0, 0, 0);
    a->label = "custom";
    a->tp = 1;
}

int mt_shape_args_take(mt_shape_args *a, const char *cmd, const char *opt, const char *val)
{
    mt_problem *s = &a->shape;
    int ok;
    if (!strcmp(opt, "--preset")) {
        const mt_preset *pr = mt_preset_find(val);
        if (!pr) {
            fprintf(stderr, "moetune %s: unknown preset '%s' (--list-presets)\n", cmd, val);
            return -1;
        }
        a->label = pr->name;
        s->E = pr->E, s->topk = pr->topk, s->K = pr->K, s->N = pr->N;
        return 1;
    }
    if (!strcmp(opt, "--E")) ok = mt_arg_int(val, 1, 1024, &s->E);
    else if (!strcmp(opt, "--topk")) ok = mt_arg_int(val, 1, 1024, &s->topk);
    else if (!strcmp(opt, "--K")) ok = mt_arg_int(val, 8, 1 << 20, &s->K);
    else if (!strcmp(opt, "--N")) ok = mt_arg_int(val, 8, 1 << 20, &s->N);
    else if (!strcmp(opt, "--tp")) ok = mt_arg_int(val, 1, 64, &a->tp);
    else if (!strcmp(opt, "--dtype")) ok = mt_dtype_parse(val, &s->dtype) == MT_OK;
    else if (!strcmp(opt, "--format")) ok = mt_act_format_parse(val, &s->format) == MT_OK;
    else if (!strcmp(opt, "--activation")) ok = mt_activation_parse(val, &s->activation) == MT_OK;
    else if (!strcmp(opt, "--quant")) ok = mt_quant_mode_parse(val, &s->quant.mode) == MT_OK;
    else if (!strcmp(opt, "--group-size")) {
        int64_t g = 0;
        ok = mt_arg_int(val, 1, 1 << 16, &g);
        s->quant.group_size = (int)g;
    }
    else return 0;
    if (!ok) {
        mt_arg_bad(cmd, opt, val);
        return -1;
    }
    return 1;
}

int mt_shape_args_finish(mt_shape_args *a, const char *cmd)
{
    mt_problem *s = &a->shape;
    if (s->E == 0) {
        fprintf(stderr, "moetune %s: give --preset NAME or --E --topk --K --N\n", cmd);
        return 0;
    }
    if (s->N % a->tp) {
        fprintf(stderr, "moetune %s: --tp %lld does not divide N=%lld\n", cmd, (long long)a->tp,
                (long long)s->N);
        return 0;
    }
    s->N /= a->tp;
    s->local_E = s->E;
    if (s->format == MT_FORMAT_BATCHED)
        s->max_tokens = 1;   /* set per M from the routing */
    char msg[512];
    if (mt_problem_validate(s, msg, sizeof msg) != MT_OK) {
        fprintf(stderr, "moetune %s: %s\n", cmd, msg);
        return 0;
    }
    return 1;
}

void mt_print_presets(void)
{
    printf("%-18s %5s %5s %6s %6s  %s\n", "preset", "E", "topk", "K", "N", "model");
    for (const mt_preset *p = mt_presets(); p->name; p++)
        printf("%-18s %5lld %5lld %6lld %6lld  %s\n", p->name, (long long)p->E,
               (long long)p->topk, (long long)p->K, (long long)p->N, p->note);
}

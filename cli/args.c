/*
 * Argument parsing helpers (see args.h).
 */
#include "cli/args.h"

#include <stdio.h>
#include <string.h>

int mt_arg_digits(const char *s, const char **end, int64_t *out)
{
    /* Not strtoll: it takes leading spaces and a sign ("--M +1", " 8"). */
    int64_t v = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++) {
        const int d = *p - '0';
        if (v > (INT64_MAX - d) / 10)
            return 0;
        v = v * 10 + d;
    }
    if (p == s)
        return 0;
    *end = p;
    *out = v;
    return 1;
}

int mt_arg_int(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    const char *end;
    int64_t v;
    if (!mt_arg_digits(s, &end, &v) || *end || v < lo || v > hi)
        return 0;
    *out = v;
    return 1;
}

int mt_arg_int_list(const char *s, int64_t lo, int64_t hi, int64_t *out, int cap, int *n)
{
    *n = 0;
    for (;;) {
        const char *end;
        int64_t v;
        if (!mt_arg_digits(s, &end, &v) || v < lo || v > hi || *n >= cap || (*end && *end != ','))
            return 0;
        out[(*n)++] = v;
        if (!*end)
            return 1;
        s = end + 1;   /* an item must follow the comma */
    }
}

/* 1 if opt is one of the NULL-terminated list (NULL: none). */
static int listed(const char *const *list, const char *opt)
{
    for (; list && *list; list++)
        if (!strcmp(*list, opt))
            return 1;
    return 0;
}

int mt_arg_given(const mt_arg_seen *seen, const char *opt)
{
    for (int i = 0; i < seen->n; i++)
        if (!strcmp(seen->given[i], opt))
            return 1;
    return 0;
}

int mt_arg_value(mt_arg_seen *seen, const char *opt, const char *val)
{
    if (!*val) {
        fprintf(stderr, "moetune %s: %s is given an empty value\n", seen->cmd, opt);
        return 0;
    }
    if (listed(seen->repeatable, opt))
        return 1;
    if (mt_arg_given(seen, opt)) {
        fprintf(stderr, "moetune %s: %s is given twice (it takes one value)\n", seen->cmd, opt);
        return 0;
    }
    /* Full only past every option a command knows: an unknown one is
     * refused at its first use. */
    if (seen->n < (int)(sizeof seen->given / sizeof seen->given[0]))
        seen->given[seen->n++] = opt;
    return 1;
}

int mt_arg_exclusive(const char *cmd, int a_given, const char *a, int b_given, const char *b)
{
    if (!a_given || !b_given)
        return 0;
    fprintf(stderr, "moetune %s: %s and %s exclude each other (give one; see --help)\n", cmd, a, b);
    return 1;
}

#include "tuner/presets.h"

void mt_arg_bad(const char *cmd, const char *opt, const char *val)
{
    fprintf(stderr, "moetune %s: bad value '%s' for %s", cmd, val, opt);
    if (!strcmp(opt, "--M"))
        fprintf(stderr, " (a comma-separated list of at most %d values, each in [1, %d])",
                MT_ARG_MAX_MS, MT_MAX_TOKENS);
    else if (!strcmp(opt, "--shard"))
        fprintf(stderr, " (I/N: whole numbers with 0 <= I < N <= %d)", 1 << 20);
    fputc('\n', stderr);
}

void mt_shape_args_init(mt_shape_args *a)
{
    mt_problem_init(&a->shape, 1, 0, 0, 0, 0);
    a->label = "custom";
    a->tp = 1;
    a->preset_opt = a->explicit_opt = NULL;
}

/* --preset and --E/--topk/--K/--N each give the whole shape: mixed, one
 * would silently override the other. 0 after a message when mixed. */
static int one_shape_source(mt_shape_args *a, const char *cmd, const char *opt)
{
    static const char *const explicit_opts[] = {"--E", "--topk", "--K", "--N", NULL};
    const int is_preset = !strcmp(opt, "--preset");
    if (!is_preset && !listed(explicit_opts, opt))
        return 1;
    const char **mine = is_preset ? &a->preset_opt : &a->explicit_opt;
    const char *other = is_preset ? a->explicit_opt : a->preset_opt;
    if (other) {
        fprintf(stderr, "moetune %s: %s and %s both give the shape: give --preset NAME or "
                        "--E --topk --K --N (see --help)\n", cmd, other, opt);
        return 0;
    }
    if (!*mine)
        *mine = opt;
    return 1;
}

int mt_shape_args_take(mt_shape_args *a, const char *cmd, const char *opt, const char *val)
{
    mt_problem *s = &a->shape;
    int ok;
    if (!one_shape_source(a, cmd, opt))
        return -1;
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

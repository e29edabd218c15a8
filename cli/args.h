/*
 * Argument parsing helpers shared by the subcommands: strict integers and
 * comma-separated integer lists (digits only: a sign, a space, trailing
 * junk or an empty list item is refused), the message for a bad value, and
 * the checks every option value passes (not empty, not given twice).
 */
#ifndef MT_CLI_ARGS_H
#define MT_CLI_ARGS_H

#include <stdint.h>

/* 1 if s starts with a decimal number that fits int64_t (digits only: no
 * sign, no space), written to *out with *end just past it; else 0. */
int mt_arg_digits(const char *s, const char **end, int64_t *out);
/* 1 if s is a number (mt_arg_digits, nothing after it) in [lo, hi]
 * (written to *out), else 0. */
int mt_arg_int(const char *s, int64_t lo, int64_t hi, int64_t *out);
/* 1 if s is "a,b,c" of numbers in [lo, hi], at most cap of them (no empty
 * item: "1,", ",1" and "1,,2" are refused). */
int mt_arg_int_list(const char *s, int64_t lo, int64_t hi, int64_t *out, int cap, int *n);
/* The values of M a --M list takes (tune, bench): at most this many, each
 * in [1, MT_MAX_TOKENS]. */
#define MT_ARG_MAX_MS 64
/* Print "moetune CMD: bad value 'VAL' for OPT" (with what --M takes, for
 * --M) on stderr. */
void mt_arg_bad(const char *cmd, const char *opt, const char *val);

/* The value options a command line has given so far, so that one given
 * twice is refused: its last value would silently win over the first. */
typedef struct mt_arg_seen {
    const char *cmd;                  /* "gen list", "db", ...: for messages */
    const char *const *repeatable;    /* documented as repeatable (NULL-terminated; NULL: none) */
    const char *given[32];
    int n;
} mt_arg_seen;

/* 1 when option opt may take the value val; else 0 after a message naming
 * opt on stderr: val is empty (an empty folder once wrote into "/", an
 * empty name selects nothing), or opt was given before and is not
 * repeatable. The caller exits 2. */
int mt_arg_value(mt_arg_seen *seen, const char *opt, const char *val);
/* 1 if a value of the (not repeatable) option opt was taken. */
int mt_arg_given(const mt_arg_seen *seen, const char *opt);
/* 1 when both a and b were given (a_given, b_given), after saying on
 * stderr that they exclude each other; else 0. */
int mt_arg_exclusive(const char *cmd, int a_given, const char *a, int b_given, const char *b);

#include "moetune/problem.h"

/* The problem-shape options shared by `tune` and `bench`. */
typedef struct mt_shape_args {
    mt_problem shape;
    const char *label;
    int64_t tp;
    /* The first of --preset and an explicit shape option given: the shape
     * comes from one or the other (NULL: not given). */
    const char *preset_opt, *explicit_opt;
} mt_shape_args;

#define MT_SHAPE_ARGS_HELP                                                              \
    "  --preset NAME         a model shape (--list-presets shows them)\n"                 \
    "  --E n --topk n --K n --N n   an explicit shape instead\n"                          \
    "  --tp N                tensor-parallel degree: the shard gets N/tp\n"               \
    "  --dtype bf16|fp16     element dtype (default bf16)\n"                              \
    "  --format standard|batched   activation format (default standard)\n"              \
    "  --activation silu|gelu      (default silu)\n"                                    \
    "  --quant MODE          none (default), fp8-tensor, fp8-token, fp8-block,\n"           \
    "                        int8-tensor, int8-token, int8-block, w8a16, w4a16\n"          \
    "  --group-size G        w8a16/w4a16 group size along K (32, 64, 128)\n"

void mt_shape_args_init(mt_shape_args *a);
/* Consume option `opt` with value `val` if it is a shape option: returns 1
 * (taken), 0 (not a shape option) or -1 (bad value, or --preset mixed with
 * --E/--topk/--K/--N; message printed). */
int mt_shape_args_take(mt_shape_args *a, const char *cmd, const char *opt, const char *val);
/* Apply --tp and validate; prints the reason and returns 0 when invalid. */
int mt_shape_args_finish(mt_shape_args *a, const char *cmd);
/* Print the preset table. */
void mt_print_presets(void);


#endif

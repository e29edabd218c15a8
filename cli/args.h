/*
 * Argument parsing helpers shared by the subcommands: strict integers and
 * comma-separated integer lists (a value with trailing junk is refused),
 * and the message for a bad value.
 */
#ifndef MT_CLI_ARGS_H
#define MT_CLI_ARGS_H

#include <stdint.h>

/* 1 if s is an integer in [lo, hi] (written to *out), else 0. */
int mt_arg_int(const char *s, int64_t lo, int64_t hi, int64_t *out);
/* 1 if s is "a,b,c" of integers in [lo, hi], at most cap of them. */
int mt_arg_int_list(const char *s, int64_t lo, int64_t hi, int64_t *out, int cap, int *n);
/* The values of M a --M list takes (tune, bench): at most this many, each
 * in [1, MT_MAX_TOKENS]. */
#define MT_ARG_MAX_MS 64
/* Print "moetune CMD: bad value 'VAL' for OPT" (with what --M takes, for
 * --M) on stderr. */
void mt_arg_bad(const char *cmd, const char *opt, const char *val);

#include "moetune/problem.h"

/* The problem-shape options shared by `tune` and `bench`. */
typedef struct mt_shape_args {
    mt_problem shape;
    const char *label;
    int64_t tp;
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
 * (taken), 0 (not a shape option) or -1 (bad value; message printed). */
int mt_shape_args_take(mt_shape_args *a, const char *cmd, const char *opt, const char *val);
/* Apply --tp and validate; prints the reason and returns 0 when invalid. */
int mt_shape_args_finish(mt_shape_args *a, const char *cmd);
/* Print the preset table. */
void mt_print_presets(void);


#endif

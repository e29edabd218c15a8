/*
 * libFuzzer harness: the CLI's argument parsers (cli/args.c). The first
 * byte picks the bounds and the list capacity; the rest is split at NUL
 * bytes into words. Each word goes through mt_arg_int and mt_arg_int_list
 * (accepted values lie within the bounds, a list holds 1..cap items and
 * nothing is written past cap, a refused argument yields no value); the
 * words as option/value pairs go through the shape options of `tune` and
 * `bench` (mt_shape_args_take, mt_shape_args_finish: a shape they accept
 * must pass mt_problem_validate). Their messages to stderr are sent to
 * /dev/null. May call: cli/args, tuner/presets, fuzz_util.
 */
#define _DEFAULT_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_numbers(const char *s, uint8_t sel)
{
    static const struct {
        int64_t lo, hi;
    } bounds[] = {{0, 1 << 20}, {1, 1024}, {INT64_MIN, INT64_MAX}, {-5, 5}, {8, 65536}};
    int64_t lo = bounds[sel % 5].lo, hi = bounds[sel % 5].hi;
    int cap = 1 + sel / 5 % 16;
    int64_t x = 12345;
    if (mt_arg_int(s, lo, hi, &x))
        FUZZ_CHECK(x >= lo && x <= hi);
    else
        FUZZ_CHECK(x == 12345);
    int64_t list[17];
    int n = -1;
    list[cap] = 777;   /* a guard after the cap */
    if (mt_arg_int_list(s, lo, hi, list, cap, &n)) {
        FUZZ_CHECK(n >= 1 && n <= cap);
        for (int i = 0; i < n; i++)
            FUZZ_CHECK(list[i] >= lo && list[i] <= hi);
    }
    FUZZ_CHECK(n >= 0 && n <= cap && list[cap] == 777);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int devnull = -1;
    if (devnull < 0)
        devnull = open("/dev/null", O_WRONLY);
    if (size < 1)
        return 0;
    char *buf = malloc(size);
    FUZZ_CHECK(buf != NULL);
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = '\0';
    const char *words[64];
    int nw = 0;
    for (size_t i = 0; i < size - 1 && nw < 64; i += strlen(buf + i) + 1)
        words[nw++] = buf + i;
    if (nw == 0)
        words[nw++] = buf;
    for (int i = 0; i < nw; i++)
        check_numbers(words[i], data[0]);

    int saved = dup(2);
    dup2(devnull, 2);
    mt_shape_args a;
    mt_shape_args_init(&a);
    int bad = 0;
    for (int i = 0; i + 1 < nw && !bad; i += 2)
        bad = mt_shape_args_take(&a, "fuzz", words[i], words[i + 1]) < 0;
    int ok = !bad && mt_shape_args_finish(&a, "fuzz");
    dup2(saved, 2);
    close(saved);
    if (ok)
        FUZZ_CHECK(mt_problem_validate(&a.shape, NULL, 0) == MT_OK);
    free(buf);
    return 0;
}

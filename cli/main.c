/*
 * `moetune`: the command-line entry point. Dispatches to one subcommand.
 */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"

typedef struct subcommand {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} subcommand;

static const subcommand subcommands[] = {
    {"gen", mt_cmd_gen, "list, emit and compile kernel variants from the Lua templates"},
    {"tune", mt_cmd_tune, "find the fastest correct pipeline per problem and M (needs a GPU)"},
    {"bench", mt_cmd_bench, "time the fused-MoE pipeline over an M sweep against cuBLAS (needs a GPU)"},
    {"db", mt_cmd_db, "show, export, import, merge, verify, prune, refresh and make "
                      "deterministic tuned databases"},
    {"info", mt_cmd_info, "what this machine has: driver, GPUs, NVRTC"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: moetune <command> [options]   (moetune <command> --help)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        fprintf(f, "  %-6s %s\n", subcommands[i].name, subcommands[i].summary);
    fprintf(f, "\nexit codes: 0 ok, 1 failed, 2 bad usage, 3 needs a GPU/driver that is absent\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return MT_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return MT_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("moetune %s\n", MT_VERSION_STRING);
        return MT_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        if (!strcmp(argv[1], subcommands[i].name))
            return subcommands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "moetune: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return MT_EXIT_USAGE;
}

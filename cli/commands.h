/*
 * The `moetune` subcommands. Each returns a process exit code:
 *   0 success, 1 the work failed (a status was reported), 2 bad usage,
 *   3 a GPU or driver is needed but absent (the message says so).
 */
#ifndef MT_CLI_COMMANDS_H
#define MT_CLI_COMMANDS_H

enum { MT_EXIT_OK = 0, MT_EXIT_FAIL = 1, MT_EXIT_USAGE = 2, MT_EXIT_NO_GPU = 3 };

int mt_cmd_gen(int argc, char **argv);
int mt_cmd_db(int argc, char **argv);
int mt_cmd_tune(int argc, char **argv);
int mt_cmd_info(int argc, char **argv);
int mt_cmd_bench(int argc, char **argv);

#endif

/*
 * The template folders a CLI command works from (gen; db refresh and
 * deterministic), opened the same way for each, with one message for a
 * folder set that holds no template.
 */
#ifndef MT_CLI_TEMPLATES_H
#define MT_CLI_TEMPLATES_H

#include "moetune/gen.h"

/* The generator for command `cmd` (cfg NULL: the default folders); NULL
 * after printing why when it cannot open or finds no template (`where`:
 * what names the folders for this command, for that message). */
mt_gen *mt_cli_open_templates(const mt_gen_config *cfg, const char *cmd, const char *where);

#endif

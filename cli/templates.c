/*
 * The template folders of a CLI command (see templates.h).
 */
#include "cli/templates.h"

#include <stdio.h>

mt_gen *mt_cli_open_templates(const mt_gen_config *cfg, const char *cmd, const char *where)
{
    mt_gen *g = NULL;
    if (mt_gen_open(cfg, &g) != MT_OK) {
        fprintf(stderr, "moetune %s: templates: %s\n", cmd, g ? mt_gen_errmsg(g) : "out of memory");
        mt_gen_close(g);
        return NULL;
    }
    if (mt_gen_family_count(g) == 0) {
        fprintf(stderr, "moetune %s: no templates found (folders searched: %zu; %s name "
                        "them)\n", cmd, mt_gen_template_dir_count(g), where);
        mt_gen_close(g);
        return NULL;
    }
    return g;
}

/* `moetune tune`: being built (see the open issues); reports that plainly. */
#include <stdio.h>
#include "cli/commands.h"
int mt_cmd_tune(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "moetune tune: not built yet in this version\n");
    return MT_EXIT_FAIL;
}

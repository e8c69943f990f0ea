/* cmd_compare.c - placeholder until its owner lands it. */
#include <stdio.h>
#include "commands.h"
int kv_cmd_compare(int argc, char **argv) { (void)argc; fprintf(stderr, "kvlab: %s: not built yet\n", argv[0]); return 1; }

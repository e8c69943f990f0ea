/*
 * commands.h - the kvlab subcommands. Each takes the arguments after its
 * own name (argv[0] is the subcommand name) and returns the process exit
 * status: 0 success, 1 run-time failure, 2 bad input (one line on stderr).
 * Each lives in its own bench/cmd_<name>.c file.
 */
#ifndef KV_COMMANDS_H
#define KV_COMMANDS_H

int kv_cmd_strategies(int argc, char **argv); /* cmd_generate.c */
int kv_cmd_generate(int argc, char **argv);   /* cmd_generate.c */
int kv_cmd_sweep(int argc, char **argv);      /* cmd_sweep.c */
int kv_cmd_sharing(int argc, char **argv);    /* cmd_sharing.c */
int kv_cmd_demo(int argc, char **argv);       /* cmd_demo.c */
int kv_cmd_compare(int argc, char **argv);    /* cmd_compare.c */
int kv_cmd_merge(int argc, char **argv);      /* cmd_merge.c */
int kv_cmd_kernel(int argc, char **argv);     /* cmd_kernel.c */
int kv_cmd_roofline(int argc, char **argv);   /* cmd_roofline.c */
int kv_cmd_export(int argc, char **argv);     /* cmd_export.c: export-synthetic */
int kv_cmd_perplexity(int argc, char **argv); /* cmd_perplexity.c */
int kv_cmd_stale(int argc, char **argv);      /* cmd_stale.c: stale-cache */

#endif /* KV_COMMANDS_H */

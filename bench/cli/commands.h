/*
 * commands.h - the kvlab commands, each a table plus a run function
 * (cli_cmd.h), defined in its own bench/cmd_<name>.c file. main.c lists
 * them; nothing else does.
 */
#ifndef KV_COMMANDS_H
#define KV_COMMANDS_H

#include "cli_cmd.h"

extern const struct kv_cmd kv_cmd_strategies_def; /* cmd_generate.c */
extern const struct kv_cmd kv_cmd_generate_def;   /* cmd_generate.c */
extern const struct kv_cmd kv_cmd_sweep_def;      /* cmd_sweep.c */
extern const struct kv_cmd kv_cmd_sharing_def;    /* cmd_sharing.c */
extern const struct kv_cmd kv_cmd_demo_def;       /* cmd_demo.c */
extern const struct kv_cmd kv_cmd_compare_def;    /* cmd_compare.c */
extern const struct kv_cmd kv_cmd_merge_def;      /* cmd_merge.c */
extern const struct kv_cmd kv_cmd_kernel_def;     /* cmd_kernel.c */
extern const struct kv_cmd kv_cmd_roofline_def;   /* cmd_roofline.c */
extern const struct kv_cmd kv_cmd_export_def;     /* cmd_export.c: export-synthetic */
extern const struct kv_cmd kv_cmd_perplexity_def; /* cmd_perplexity.c */
extern const struct kv_cmd kv_cmd_stale_def;      /* cmd_stale.c: stale-cache */
extern const struct kv_cmd kv_cmd_serving_def;    /* cmd_serving.c */

#endif /* KV_COMMANDS_H */

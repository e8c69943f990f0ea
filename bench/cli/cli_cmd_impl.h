/*
 * cli_cmd_impl.h - what the three files of the command layer share, and
 * nothing outside them includes: the shared option groups' table, and the
 * value parser and its descriptions that both the parser (cli_cmd.c) and
 * the help (cli_help.c) use. cli_values.c holds the value rules.
 */
#ifndef KV_CLI_CMD_IMPL_H
#define KV_CLI_CMD_IMPL_H

#include "cli_cmd.h"

/* bit: the KV_GRP_* a group option belongs to */
struct grp_opt {
    uint32_t group;
    struct kv_opt o;
};

extern const struct grp_opt kv_cmdi_groups[];
extern const size_t kv_cmdi_n_groups;

/* Parses v for o into field (strictly, in o's range and kind); prints one
 * line "kvlab: CMD: OPT expects ..., got 'V'" and returns -1 on failure. */
int kv_cmdi_parse_value(const char *cmd, const struct kv_opt *o, const char *v, void *field);
/* A strategy parameter flag's value, by its table. */
int kv_cmdi_parse_param(const char *cmd, struct kv_cli_flag *f, const char *v);
/* What o expects ("an integer in [1, 100]"), for messages and --help. */
void kv_cmdi_expects(const struct kv_opt *o, char *buf, size_t n);
/* o's value in field as text (its default in --help); "" when none. */
void kv_cmdi_default_str(const struct kv_opt *o, const void *field, char *buf, size_t n);

/* opts (cmd->opts_size bytes) and c <- the command's defaults. */
void kv_cmdi_defaults(const struct kv_cmd *cmd, void *opts, struct kv_cli_common *c);

#endif /* KV_CLI_CMD_IMPL_H */

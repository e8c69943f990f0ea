/*
 * cli_io.h - what every kvlab command does with files, streams and signals,
 * in one place, so no command can do it differently:
 *
 *   kv_cli_check_outputs  every output target judged before any work
 *                         (file_check.h), and no output the same file as
 *                         another output or an input;
 *   kv_cli_load_model     a --model checkpoint loaded with one message line
 *                         and the exit status of its failure;
 *   kv_cli_signals        SIGPIPE ignored (a closed pipe on stderr or stdout
 *                         is a failed write, never a dead process), and
 *                         SIGINT/SIGTERM/SIGHUP remove temporary files before
 *                         the process dies (or only set a flag, for a sweep
 *                         that finishes its file);
 *   kv_cli_finish         the exit status after stdout is flushed and closed:
 *                         output that did not reach its file is exit 1;
 *   kv_cli_error          a message line that names the command under way.
 * Quoting and progress lines are text.h's (below every layer that prints).
 */
#ifndef KV_CLI_IO_H
#define KV_CLI_IO_H

#include <signal.h>
#include <stddef.h>
#include <stdio.h>

#include "../model/file_check.h"
#include "../term/text.h" /* kv_text_q and kv_progress, which every command uses */
#include "../model/kv_model.h"

/* A file a command reads or writes, named by the option that gave it. */
struct kv_cli_file {
    const char *opt;  /* "--out", "--model", ... */
    const char *path; /* NULL: not given (skipped) */
};

/*
 * Checks each output with kv_file_check_output(parent) and refuses an
 * output that is the same file (kv_file_same) as another output or an
 * input. Prints one line, "kvlab: CMD: OPT 'PATH': why", and returns the exit
 * status: 2 when a target is refused, dir_status when its directory cannot
 * take it (1, a run-time failure, for sweep and export-synthetic; 2 for
 * merge: each command keeps the status it documented); 0 when every output
 * can be written.
 */
int kv_cli_check_outputs(const char *cmd, const struct kv_cli_file *outs, int n_out,
                         const struct kv_cli_file *ins, int n_in,
                         enum kv_file_parent parent, int dir_status);

/*
 * Loads the checkpoint at path (kv_checkpoint_load). On failure prints one
 * line, "kvlab: CMD: --model 'PATH': why" (not a regular file, malformed
 * header, a non-finite weight naming the tensor and index ...), and returns
 * the exit status: 1 when memory ran out, 2 otherwise; 0 on success.
 */
int kv_cli_load_model(const char *cmd, const char *path, struct kv_model **out);

/* The same for a --tokenizer file (kv_tokenizer_load with vocab). */
struct kv_tokenizer;
int kv_cli_load_tokenizer(const char *cmd, const char *path, int32_t vocab,
                          struct kv_tokenizer **out);

/*
 * Installs the process's signal dispositions. stop NULL: SIGINT, SIGTERM
 * and SIGHUP remove the registered temporary files (kv_file_remove_pending)
 * and then kill the process as the signal would. stop non-NULL: the first
 * such signal only stores its number in *stop (the caller stops and writes
 * what it finished); a second one acts as with NULL. SIGPIPE is ignored in
 * both cases. main() calls it with NULL before any command runs.
 */
void kv_cli_signals(volatile sig_atomic_t *stop);


/*
 * The exit status once stream f (stdout) is flushed and closed: rc when
 * everything written reached it; otherwise one line on stderr, "kvlab:
 * cannot write WHAT: reason", and 1. A command that already failed (rc != 0)
 * has printed its one line: its status is kept and nothing more printed.
 */
int kv_cli_finish(FILE *f, const char *what, int rc);


/* The command whose run is under way (kv_cmd_main sets it): every
 * kv_cli_error line starts "kvlab: CMD: ", so a helper shared by the
 * commands names the command without being told it. */
void kv_cli_set_command(const char *name);
/* Prints "kvlab: CMD: " and then fmt (which ends in "\n") to stderr. */
void kv_cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));


#endif /* KV_CLI_IO_H */

/*
 * cli_io.c - files, streams and signals for every kvlab command (see
 * cli_io.h).
 */
#include "cli_io.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "../model/checkpoint.h"
#include "../model/file_commit.h"
#include "../model/tokenizer.h"

/* ------------------------------------------------------------------------ */
/* Output targets                                                           */

int kv_cli_check_outputs(const char *cmd, const struct kv_cli_file *outs, int n_out,
                         const struct kv_cli_file *ins, int n_in,
                         enum kv_file_parent parent, int dir_status)
{
    for (int i = 0; i < n_out; i++) {
        if (outs[i].path == NULL)
            continue;
        enum kv_status s = kv_file_check_output(outs[i].path, parent);
        if (s != KV_OK) {
            fprintf(stderr, "kvlab: %s: %s '%s': %s\n", cmd, outs[i].opt,
                    kv_text_q(outs[i].path), kv_file_why());
            return s == KV_ERR_IO ? dir_status : 2;
        }
        for (int j = 0; j < n_in + i; j++) {
            const struct kv_cli_file *o = j < n_in ? &ins[j] : &outs[j - n_in];
            if (o->path != NULL && kv_file_same(outs[i].path, o->path)) {
                fprintf(stderr, "kvlab: %s: %s '%s' is also an %s: the same file as %s "
                                "'%s'; refusing to overwrite it\n", cmd, outs[i].opt,
                        kv_text_q(outs[i].path), j < n_in ? "input" : "output", o->opt,
                        kv_text_q(o->path));
                return 2;
            }
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Inputs                                                                   */

int kv_cli_load_model(const char *cmd, const char *path, struct kv_model **out)
{
    kv_file_set_why("%s", "");
    enum kv_status s = kv_checkpoint_load(path, out);
    if (s == KV_OK)
        return 0;
    const char *why = kv_file_why();
    fprintf(stderr, "kvlab: %s: --model '%s': %s\n", cmd, kv_text_q(path),
            why[0] != '\0' ? why : kv_status_str(s));
    return s == KV_ERR_NOMEM ? 1 : 2;
}

int kv_cli_load_tokenizer(const char *cmd, const char *path, int32_t vocab,
                          struct kv_tokenizer **out)
{
    kv_file_set_why("%s", "");
    enum kv_status s = kv_tokenizer_load(out, path, vocab);
    if (s == KV_OK)
        return 0;
    const char *why = kv_file_why();
    fprintf(stderr, "kvlab: %s: --tokenizer '%s': %s\n", cmd, kv_text_q(path),
            why[0] != '\0' ? why : kv_status_str(s));
    return s == KV_ERR_NOMEM ? 1 : 2;
}

/* ------------------------------------------------------------------------ */
/* Signals                                                                  */

static volatile sig_atomic_t *stop_flag;

static void on_fatal(int sig)
{
    kv_file_remove_pending();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void on_stop(int sig)
{
    if (stop_flag != NULL && *stop_flag == 0) {
        *stop_flag = sig;
        return;
    }
    on_fatal(sig); /* a second signal: stop now */
}

void kv_cli_signals(volatile sig_atomic_t *stop)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
    stop_flag = stop;
    sa.sa_handler = stop != NULL ? on_stop : on_fatal;
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old;
        /* SIGHUP ignored by whoever started us (nohup) stays ignored; SIGINT
         * is taken over even where a shell ignored it for a background job,
         * so `kill -INT` still stops a sweep that writes what it finished */
        if (sigs[i] == SIGHUP && sigaction(sigs[i], NULL, &old) == 0 &&
            old.sa_handler == SIG_IGN)
            continue;
        sigaction(sigs[i], &sa, NULL);
    }
}

/* ------------------------------------------------------------------------ */
/* The command under way                                                    */

static const char *current_cmd;

void kv_cli_set_command(const char *name) { current_cmd = name; }

void kv_cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (current_cmd != NULL)
        fprintf(stderr, "kvlab: %s: ", current_cmd);
    else
        fprintf(stderr, "kvlab: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------------------ */
/* Exit                                                                     */

int kv_cli_finish(FILE *f, const char *what, int rc)
{
    errno = 0;
    int bad = fflush(f) != 0;
    int e = errno;
    bad |= ferror(f) != 0;
    /* A stream closed by whoever started us (>&-) that was never written
     * to fails only its close, with EBADF: nothing was lost then. */
    if (fclose(f) != 0 && !bad && errno != EBADF) {
        bad = 1;
        e = errno;
    }
    if (!bad || rc != 0)
        return rc; /* a failed command has said why already: one line only */
    fprintf(stderr, "kvlab: cannot write %s: %s\n", what,
            e != 0 ? strerror(e) : "an earlier write failed");
    return 1;
}

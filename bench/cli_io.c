/*
 * cli_io.c - files, streams and signals for every kvlab command (see
 * cli_io.h).
 */
#include "cli_io.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "file_commit.h"
#include "tokenizer.h"

/* ------------------------------------------------------------------------ */
/* Quoting                                                                  */

char *kv_cli_quote(char *dst, size_t cap, const char *s, size_t max)
{
    static const char hex[] = "0123456789abcdef";
    if (dst == NULL || cap == 0)
        return dst;
    size_t w = 0, i = 0;
    if (s == NULL)
        s = "";
    for (; i < max && s[i] != '\0'; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[5];
        size_t k = 0;
        if (c == '\n' || c == '\t' || c == '\r' || c == '\\' || c == '\'') {
            esc[k++] = '\\';
            esc[k++] = c == '\n' ? 'n' : c == '\t' ? 't' : c == '\r' ? 'r' : (char)c;
        } else if (c < 0x20 || c == 0x7f) {
            esc[k++] = '\\';
            esc[k++] = 'x';
            esc[k++] = hex[c >> 4];
            esc[k++] = hex[c & 15];
        } else {
            esc[k++] = (char)c;
        }
        if (w + k + 4 > cap) /* room for "..." and the NUL */
            break;
        memcpy(dst + w, esc, k);
        w += k;
    }
    if (i < SIZE_MAX && s[i] != '\0' && w + 4 <= cap) {
        memcpy(dst + w, "...", 3);
        w += 3;
    }
    dst[w] = '\0';
    return dst;
}

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

const char *kv_cli_sentence(const char *s)
{
    /* a sentence from below the CLI (a strategy's why) may quote a value
     * the user gave: its control bytes are escaped, its quotes kept */
    static char bufs[2][600];
    static unsigned next;
    char *b = bufs[next++ % 2];
    static const char hex[] = "0123456789abcdef";
    size_t w = 0;
    for (const unsigned char *p = (const unsigned char *)(s != NULL ? s : ""); *p != '\0'; p++) {
        if (w + 8 > sizeof bufs[0]) {
            memcpy(b + w, "...", 3);
            w += 3;
            break;
        }
        if (*p < 0x20 || *p == 0x7f || *p == '\\') {
            b[w++] = '\\';
            if (*p == '\\') {
                b[w++] = '\\';
            } else {
                b[w++] = 'x';
                b[w++] = hex[*p >> 4];
                b[w++] = hex[*p & 15];
            }
        } else {
            b[w++] = (char)*p;
        }
    }
    b[w] = '\0';
    return b;
}

const char *kv_cli_q(const char *s)
{
    static char bufs[4][512];
    static unsigned next;
    char *b = bufs[next++ % 4];
    return kv_cli_quote(b, sizeof bufs[0], s, 120);
}

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
                    kv_cli_q(outs[i].path), kv_file_why());
            return s == KV_ERR_IO ? dir_status : 2;
        }
        for (int j = 0; j < n_in + i; j++) {
            const struct kv_cli_file *o = j < n_in ? &ins[j] : &outs[j - n_in];
            if (o->path != NULL && kv_file_same(outs[i].path, o->path)) {
                fprintf(stderr, "kvlab: %s: %s '%s' is also an %s: the same file as %s "
                                "'%s'; refusing to overwrite it\n", cmd, outs[i].opt,
                        kv_cli_q(outs[i].path), j < n_in ? "input" : "output", o->opt,
                        kv_cli_q(o->path));
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
    fprintf(stderr, "kvlab: %s: --model '%s': %s\n", cmd, kv_cli_q(path),
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
    fprintf(stderr, "kvlab: %s: --tokenizer '%s': %s\n", cmd, kv_cli_q(path),
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
/* Progress                                                                 */

static int progress_off;

int kv_cli_progress(const char *fmt, ...)
{
    if (progress_off)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    int n = vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (n < 0 || fflush(stderr) != 0 || ferror(stderr)) {
        progress_off = 1; /* EPIPE, a full disk: keep working, stop telling */
        clearerr(stderr);
        return -1;
    }
    return 0;
}

int kv_cli_progress_on(void) { return !progress_off; }

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

/*
 * sysinfo.c - gather a run's provenance: git commit (through popen, so a
 * tarball without .git simply says "unknown"), CPU model from
 * /proc/cpuinfo, OpenBLAS's own description of itself, the compiler and
 * the flags the Makefile passed as KV_CFLAGS, uname, the date and peak RSS.
 *
 * Every string is cleaned for use in a `# key=value` metadata line: newlines
 * and carriage returns become spaces and surrounding blanks are trimmed.
 */
#include "sysinfo.h"

#include "../../kernels/kv_common.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#ifndef KV_CFLAGS
#define KV_CFLAGS "unknown"
#endif

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */

/* dst <- src, truncated to n-1 bytes, one line, trimmed; "unknown" if empty. */
static void set_clean(char *dst, size_t n, const char *src)
{
    if (src == NULL)
        src = "";
    while (*src == ' ' || *src == '\t' || *src == '\n' || *src == '\r')
        src++;
    size_t len = 0;
    for (; src[len] != '\0' && len + 1 < n; len++)
        dst[len] = (src[len] == '\n' || src[len] == '\r') ? ' ' : src[len];
    while (len > 0 && (dst[len - 1] == ' ' || dst[len - 1] == '\t'))
        len--;
    dst[len] = '\0';
    if (len == 0)
        snprintf(dst, n, "unknown");
}

/* First line of a shell command's output, or "" when it fails. */
static void run_line(char *dst, size_t n, const char *cmd)
{
    dst[0] = '\0';
    FILE *f = popen(cmd, "r");
    if (f == NULL)
        return;
    if (fgets(dst, (int)n, f) == NULL)
        dst[0] = '\0';
    /* drain the rest so the child does not get SIGPIPE */
    char sink[256];
    while (fgets(sink, sizeof(sink), f) != NULL) {
    }
    if (pclose(f) != 0)
        dst[0] = '\0';
}

/*
 * The commit of the checkout the running binary was built in (git -C the
 * directory of /proc/self/exe, so running kvlab from elsewhere still names
 * the right tree), else of the working directory.
 */
static void collect_commit(struct kv_sysinfo *si)
{
    char exe[1024], dir[1100], cmd[1400], line[KV_SYSINFO_LEN];
    dir[0] = '\0';
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash != NULL && slash != exe && strchr(exe, '\'') == NULL) {
            *slash = '\0';
            snprintf(dir, sizeof(dir), "-C '%s' ", exe);
        }
    }
    snprintf(cmd, sizeof(cmd), "git %srev-parse --short HEAD 2>/dev/null", dir);
    run_line(line, sizeof(line), cmd);
    set_clean(si->commit, sizeof(si->commit), line);
    if (strcmp(si->commit, "unknown") == 0)
        return;
    /* a modified tracked file makes the commit alone misleading */
    snprintf(cmd, sizeof(cmd),
             "git %sstatus --porcelain --untracked-files=no 2>/dev/null | head -n 1", dir);
    run_line(line, sizeof(line), cmd);
    if (line[0] != '\0') {
        size_t len = strlen(si->commit);
        snprintf(si->commit + len, sizeof(si->commit) - len, "+dirty");
    }
}

static void collect_cpu(struct kv_sysinfo *si)
{
    char line[512];
    const char *found = NULL;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f != NULL) {
        while (fgets(line, sizeof(line), f) != NULL) {
            if (strncmp(line, "model name", 10) == 0) {
                const char *colon = strchr(line, ':');
                if (colon != NULL) {
                    found = colon + 1;
                    break;
                }
            }
        }
        fclose(f);
    }
    set_clean(si->cpu, sizeof(si->cpu), found);
}

/* ------------------------------------------------------------------------ */
/* Public                                                                   */

void kv_sysinfo_collect(struct kv_sysinfo *si)
{
    memset(si, 0, sizeof(*si));
    collect_commit(si);
    collect_cpu(si);
    set_clean(si->blas_core, sizeof(si->blas_core), openblas_get_corename());
    set_clean(si->blas_config, sizeof(si->blas_config), openblas_get_config());
#ifdef __VERSION__
    set_clean(si->compiler, sizeof(si->compiler), __VERSION__);
#else
    set_clean(si->compiler, sizeof(si->compiler), NULL);
#endif
    set_clean(si->cflags, sizeof(si->cflags), KV_CFLAGS);

    struct utsname u;
    if (uname(&u) == 0) {
        char buf[3 * sizeof(u.sysname) + 4];
        snprintf(buf, sizeof(buf), "%s %s %s", u.sysname, u.release, u.machine);
        set_clean(si->os, sizeof(si->os), buf);
        set_clean(si->host, sizeof(si->host), u.nodename);
    } else {
        set_clean(si->os, sizeof(si->os), NULL);
        set_clean(si->host, sizeof(si->host), NULL);
    }

    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm) == NULL ||
        strftime(si->date, sizeof(si->date), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(si->date, sizeof(si->date), "unknown");

    long n = sysconf(_SC_NPROCESSORS_ONLN);
    si->ncpu = n > 0 ? (int)n : 1;
    /* the same figure the kernels and the roofline size themselves by */
    si->l3_bytes = (long)kv_l3_bytes();
}

size_t kv_peak_rss_bytes(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (size_t)ru.ru_maxrss * 1024; /* Linux reports KiB */
}

/* ------------------------------------------------------------------------ */
/* OpenBLAS core selection                                                  */

const char *kv_sysinfo_blas_coretype_hint(void)
{
    if (getenv("OPENBLAS_CORETYPE") != NULL)
        return NULL;
    const char *core = openblas_get_corename();
    if (core == NULL)
        return NULL;
    /* cores without AVX2: what a DYNAMIC_ARCH build falls back to */
    static const char *const weak[] = {"Prescott", "Core2", "Penryn", "Dunnington",
                                       "Nehalem", "Atom", "Sandybridge", "Katmai",
                                       "Coppermine", "Northwood", "Banias"};
    int is_weak = 0;
    for (size_t i = 0; i < sizeof(weak) / sizeof(weak[0]); i++)
        is_weak |= strcasecmp(core, weak[i]) == 0;
    if (!is_weak)
        return NULL;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return "Haswell";
#endif
    return NULL;
}

void kv_sysinfo_blas_reexec(int argc, char **argv)
{
    const char *off = getenv("KVLAB_NO_BLAS_REEXEC");
    if (off != NULL && strcmp(off, "0") != 0)
        return;
    const char *core = kv_sysinfo_blas_coretype_hint();
    if (core == NULL || argc < 1 || argc > 4096)
        return;
    char *args[4098];
    args[0] = "kvlab";
    for (int i = 0; i < argc; i++)
        args[i + 1] = argv[i];
    args[argc + 1] = NULL;
    if (setenv("OPENBLAS_CORETYPE", core, 1) != 0)
        return;
    /* the child must not try again if OpenBLAS still refuses */
    setenv("KVLAB_NO_BLAS_REEXEC", "1", 1);
    execv("/proc/self/exe", args);
    /* exec failed: carry on with the generic kernels */
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv("KVLAB_NO_BLAS_REEXEC");
}

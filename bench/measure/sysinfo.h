/*
 * sysinfo.h - what a result file must say about where it came from: git
 * commit, CPU model, OpenBLAS core and configuration, compiler and flags,
 * date, and the process's peak resident memory.
 *
 * Everything is gathered into fixed-size strings once, at the start of a
 * run, so a result writer can copy them into metadata without allocating.
 * Anything that cannot be found reads "unknown"; nothing here can fail.
 */
#ifndef KV_SYSINFO_H
#define KV_SYSINFO_H

#include <stddef.h>

#define KV_SYSINFO_LEN 256

struct kv_sysinfo {
    char commit[KV_SYSINFO_LEN];      /* `git rev-parse --short HEAD`, "+dirty" if modified */
    char cpu[KV_SYSINFO_LEN];         /* /proc/cpuinfo "model name" */
    char blas_core[KV_SYSINFO_LEN];   /* openblas_get_corename() */
    char blas_config[KV_SYSINFO_LEN]; /* openblas_get_config() */
    char compiler[KV_SYSINFO_LEN];    /* __VERSION__ */
    char cflags[KV_SYSINFO_LEN * 2];  /* the build's CFLAGS (KV_CFLAGS from the Makefile) */
    char os[KV_SYSINFO_LEN];          /* uname: sysname release machine */
    char host[KV_SYSINFO_LEN];        /* uname nodename */
    char date[64];                    /* UTC, ISO 8601: 2026-11-29T09:16:06Z */
    int ncpu;                         /* online processors */
    long l3_bytes;                    /* last-level (L3) cache size, 0 if unknown */
};

/* Fills every field; never fails (unknown fields read "unknown"). */
void kv_sysinfo_collect(struct kv_sysinfo *si);

/* Peak resident set size of this process so far, in bytes (getrusage). */
size_t kv_peak_rss_bytes(void);

/*
 * OpenBLAS picks its kernels when the library loads, from the CPU it
 * recognises; on CPUs newer than the library (this project's VMs) it falls
 * back to the generic "Prescott" kernels and sgemm runs about 4x slower.
 * Returns the OPENBLAS_CORETYPE that matches this CPU ("SkylakeX" with
 * AVX-512, "Haswell" with AVX2+FMA) when OpenBLAS chose a weaker core and
 * the variable is not set; NULL otherwise.
 */
const char *kv_sysinfo_blas_coretype_hint(void);

/*
 * For command-line front ends only: when kv_sysinfo_blas_coretype_hint()
 * names a core, sets OPENBLAS_CORETYPE and re-executes this program
 * (/proc/self/exe) as `kvlab SUBCOMMAND ARGS...` (argv[0] is the
 * subcommand), so OpenBLAS loads with the right kernels. Returns only when
 * nothing needed doing or the exec failed. KVLAB_NO_BLAS_REEXEC=1 turns it off.
 */
void kv_sysinfo_blas_reexec(int argc, char **argv);

#endif /* KV_SYSINFO_H */

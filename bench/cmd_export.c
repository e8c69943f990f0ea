/*
 * cmd_export.c - `kvlab export-synthetic`: write the seeded synthetic model
 * as a llama2.c legacy checkpoint, so any tool that reads that format runs
 * exactly the weights kvlab benchmarks (and `kvlab generate --model` can
 * read them back through the memory-mapped loader).
 *
 * The synthetic model is built in memory from the same options every other
 * subcommand takes, then kv_checkpoint_export() writes it through a
 * temporary file and a rename, so an interrupted export never leaves a
 * half-written checkpoint under the requested name.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "checkpoint.h"
#include "cli_io.h"
#include "cli_opts.h"
#include "cli_cmd.h"
#include "commands.h"
int kv_cmd_export(int argc, char **argv);
#include "tokenizer.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: kvlab export-synthetic --out FILE.bin [model options] [--seed S]\n"
            "                              [--tied] [--tokenizer-out TOK.bin]\n"
            "\n"
            "Writes the synthetic model (seeded random weights) as a llama2.c legacy\n"
            "checkpoint. Model options: --layers --dim --heads --kv-heads --hidden\n"
            "--vocab --max-len --mlp on|off (off writes zero MLP weights, the same\n"
            "function). --tied shares the classifier with the token embedding\n"
            "(positive vocab_size in the header). --tokenizer-out also writes a\n"
            "byte-level tokenizer.bin (token i = byte i; needs --vocab 256).\n");
}

int kv_cmd_export(int argc, char **argv)
{
    struct kv_cli_common c;
    kv_cli_common_defaults(&c);
    const char *out = NULL, *tok_out = NULL;
    int tied = 0;
    for (int i = 1; i < argc;) {
        int r = kv_cli_parse_common(&c, argc, argv, &i);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--tied") == 0) {
            tied = 1;
            i++;
        } else if ((strcmp(a, "--out") == 0 || strcmp(a, "--tokenizer-out") == 0)) {
            if (i + 1 >= argc) {
                fprintf(stderr, "kvlab: %s expects a file name\n", a);
                return 2;
            }
            if (strcmp(a, "--out") == 0)
                out = argv[i + 1];
            else
                tok_out = argv[i + 1];
            i += 2;
        } else if (strncmp(a, "--out=", 6) == 0) {
            out = a + 6;
            i++;
        } else if (strncmp(a, "--tokenizer-out=", 16) == 0) {
            tok_out = a + 16;
            i++;
        } else {
            fprintf(stderr, "kvlab: export-synthetic: unknown option '%s' (try --help)\n",
                    kv_cli_q(a));
            return 2;
        }
    }
    if (out == NULL || out[0] == '\0') {
        fprintf(stderr, "kvlab: export-synthetic needs --out FILE.bin\n");
        return 2;
    }
    if (c.model_path != NULL || c.tokenizer_path != NULL || c.strategy != NULL) {
        fprintf(stderr, "kvlab: export-synthetic takes model options, not --model, "
                        "--tokenizer or --strategy\n");
        return 2;
    }
    /* the model options only: a cache, a batch or threads play no part */
    static const char *const unused[] = {"--window", "--bits", "--group", "--residual",
                                         "--batch", "--threads", NULL};
    if (kv_cli_reject_unused("export-synthetic", &c, unused) != 0)
        return 2;
    if (tok_out != NULL && c.model.vocab_size != 256) {
        fprintf(stderr, "kvlab: --tokenizer-out writes a byte-level tokenizer and needs "
                        "--vocab 256 (got %" PRId32 ")\n", c.model.vocab_size);
        return 2;
    }
    c.model.shared_classifier = tied;
    c.no_cache = 1; /* no cache is built: skip the strategies' checks */
    if (kv_cli_check_common(&c) != 0)
        return 2;
    size_t file_bytes;
    enum kv_status s = kv_checkpoint_file_bytes(&c.model, &file_bytes);
    if (s != KV_OK) {
        fprintf(stderr, "kvlab: export-synthetic: %s\n", kv_status_str(s));
        return 2;
    }
    if (kv_cli_check_memory("the synthetic model", kv_model_weight_bytes(&c.model)) != 0)
        return 2;
    /* Both targets judged before the model is built: a directory, FIFO or
     * device, a read-only file, one file named twice (also as ./a.bin or
     * through a link), a directory that cannot take the file (cli_io.h). */
    const struct kv_cli_file outs[] = {{"--out", out}, {"--tokenizer-out", tok_out}};
    int rc = kv_cli_check_outputs("export-synthetic", outs, 2, NULL, 0,
                                  KV_FILE_PARENT_EXISTS, 1);
    if (rc != 0)
        return rc;

    struct kv_model *m = NULL;
    s = kv_model_create_synthetic(&m, &c.model, c.seed);
    if (s != KV_OK) {
        fprintf(stderr, "kvlab: cannot build the synthetic model: %s\n", kv_status_str(s));
        return 1;
    }
    errno = 0;
    s = kv_checkpoint_export(out, m);
    int e = errno;
    kv_model_destroy(m);
    if (s != KV_OK) {
        fprintf(stderr, "kvlab: cannot write '%s': %s\n", kv_cli_q(out),
                s == KV_ERR_IO && e != 0 ? strerror(e) : kv_status_str(s));
        return 1;
    }
    const struct kv_model_config *mc = &c.model;
    printf("wrote %s: dim %" PRId32 ", hidden %" PRId32 ", layers %" PRId32 ", heads %" PRId32
           ", kv_heads %" PRId32 ", vocab %" PRId32 " (%s classifier), seq_len %" PRId32
           ", mlp %s, seed %" PRIu64 ", %zu bytes\n",
           out, mc->dim, mc->hidden_dim, mc->n_layers, mc->n_heads, mc->n_kv_heads,
           mc->vocab_size, tied ? "shared" : "unshared", mc->max_len,
           mc->mlp ? "on" : "off (zero weights)", c.seed, file_bytes);
    if (tok_out != NULL) {
        struct kv_tokenizer *t = NULL;
        s = kv_tokenizer_create_bytes(&t);
        if (s == KV_OK)
            s = kv_tokenizer_save(t, tok_out);
        kv_tokenizer_destroy(t);
        if (s != KV_OK) {
            fprintf(stderr, "kvlab: cannot write '%s': %s\n", kv_cli_q(tok_out),
                    kv_status_str(s));
            return 1;
        }
        printf("wrote %s: byte-level tokenizer, 256 tokens\n", tok_out);
    }
    return 0;
}

/* transitional: on the command table, parsing its own argv */
const struct kv_cmd kv_cmd_export_def = {.name = "export-synthetic", .summary = "write the synthetic model as a llama2.c checkpoint", .legacy = kv_cmd_export};

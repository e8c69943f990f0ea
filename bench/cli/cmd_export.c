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
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "../model/checkpoint.h"
#include "cli_cmd.h"
#include "cli_io.h"
#include "cli_opts.h"
#include "commands.h"
#include "../model/tokenizer.h"

struct export_opts {
    const char *out, *tok_out;
    int tied;
};

#define E(field) offsetof(struct export_opts, field)
static const struct kv_opt export_opts[] = {
    {.name = "--out", .kind = KV_OPT_OUTPUT, .off = E(out), .meta = "FILE.bin", .required = 1,
     .help = "the checkpoint to write (through a temporary file and a rename)"},
    {.name = "--tied", .kind = KV_OPT_FLAG, .off = E(tied),
     .help = "share the classifier with the token embedding (positive vocab_size in the "
             "header)"},
    {.name = "--tokenizer-out", .kind = KV_OPT_OUTPUT, .off = E(tok_out), .meta = "TOK.bin",
     .help = "also write a byte-level tokenizer.bin (token i = byte i; needs --vocab 256)"},
};
#undef E

/* Everything the run would refuse, before any work: the tokenizer's vocab,
 * the file's byte count, the weights against the machine's memory. */
static int export_check(struct kv_cmd_ctx *x)
{
    const struct export_opts *o = x->opts;
    struct kv_model_config mc = x->c.model;
    mc.shared_classifier = o->tied;
    if (o->tok_out != NULL && mc.vocab_size != 256) {
        fprintf(stderr, "kvlab: export-synthetic: --tokenizer-out writes a byte-level tokenizer "
                        "and needs --vocab 256 (got %" PRId32 ")\n", mc.vocab_size);
        return 2;
    }
    size_t file_bytes;
    enum kv_status s = kv_checkpoint_file_bytes(&mc, &file_bytes);
    if (s != KV_OK) {
        fprintf(stderr, "kvlab: export-synthetic: %s\n", kv_status_str(s));
        return 2;
    }
    if (kv_cli_check_memory("export-synthetic: the synthetic model",
                            kv_model_weight_bytes(&mc)) != 0)
        return 2;
    return 0;
}

static int export_run(struct kv_cmd_ctx *x)
{
    const struct export_opts *o = x->opts;
    struct kv_model_config *mc = &x->c.model;
    mc->shared_classifier = o->tied;
    size_t file_bytes = 0;
    enum kv_status s = kv_checkpoint_file_bytes(mc, &file_bytes); /* checked: fits */
    struct kv_model *m = NULL;
    if (s == KV_OK)
        s = kv_model_create_synthetic(&m, mc, x->c.seed);
    if (s != KV_OK) {
        fprintf(stderr, "kvlab: export-synthetic: cannot build the synthetic model: %s\n",
                kv_status_str(s));
        return 1;
    }
    errno = 0;
    s = kv_checkpoint_export(o->out, m);
    int e = errno;
    kv_model_destroy(m);
    if (s != KV_OK) {
        fprintf(stderr, "kvlab: export-synthetic: cannot write '%s': %s\n", kv_text_q(o->out),
                s == KV_ERR_IO && e != 0 ? strerror(e) : kv_status_str(s));
        return 1;
    }
    char q[1100];
    printf("wrote %s: dim %" PRId32 ", hidden %" PRId32 ", layers %" PRId32 ", heads %" PRId32
           ", kv_heads %" PRId32 ", vocab %" PRId32 " (%s classifier), seq_len %" PRId32
           ", mlp %s, seed %" PRIu64 ", %zu bytes\n",
           kv_text_quote(q, sizeof q, o->out, 1024), mc->dim, mc->hidden_dim, mc->n_layers,
           mc->n_heads, mc->n_kv_heads, mc->vocab_size, o->tied ? "shared" : "unshared",
           mc->max_len, mc->mlp ? "on" : "off (zero weights)", x->c.seed, file_bytes);
    if (o->tok_out != NULL) {
        struct kv_tokenizer *t = NULL;
        s = kv_tokenizer_create_bytes(&t);
        if (s == KV_OK)
            s = kv_tokenizer_save(t, o->tok_out);
        kv_tokenizer_destroy(t);
        if (s != KV_OK) {
            fprintf(stderr, "kvlab: export-synthetic: cannot write '%s': %s\n",
                    kv_text_q(o->tok_out), kv_status_str(s));
            return 1;
        }
        printf("wrote %s: byte-level tokenizer, 256 tokens\n",
               kv_text_quote(q, sizeof q, o->tok_out, 1024));
    }
    return 0;
}

const struct kv_cmd kv_cmd_export_def = {
    .name = "export-synthetic",
    .summary = "write the synthetic model as a llama2.c checkpoint",
    .usage = "--out FILE.bin [model options] [--seed S] [--tied] [--tokenizer-out TOK.bin]",
    .about = "  writes the synthetic model (seeded random weights, the same the other commands\n"
             "  build from the same model options and --seed) as a llama2.c legacy checkpoint;\n"
             "  --mlp off writes zero MLP weights (the same function). Both files are judged\n"
             "  before the model is built and written through a temporary file and a rename.\n",
    .opts = export_opts,
    .n_opts = sizeof export_opts / sizeof export_opts[0],
    .groups = KV_GRP_MODEL | KV_GRP_SEED,
    .opts_size = sizeof(struct export_opts),
    .check = export_check,
    .run = export_run,
    .example = "--out @OUT --layers 1 --dim 16 --heads 2 --kv-heads 2 --hidden 24 --vocab 256 "
               "--max-len 32",
};

/*
 * checkpoint.h - read and write llama2.c legacy checkpoints (format in
 * docs/design.md): seven int32 header fields, then the float32 weight
 * arrays in a fixed order.
 *
 * The one design decision that matters: a loaded checkpoint is memory-mapped
 * read-only and the model's weight pointers point straight into the mapping,
 * so loading costs no copy and no allocation proportional to the weights.
 * Because the pointers go into a mapping, the loader validates the header
 * and the exact file size (computed with checked arithmetic) before it forms
 * a single weight pointer: a truncated or lying file is rejected with
 * KV_ERR_FORMAT and nothing is ever read past the end of the mapping.
 *
 * Usage (what `kvlab generate --model FILE` does):
 *
 *     struct kv_model *m;
 *     enum kv_status s = kv_checkpoint_load("model.bin", &m);
 *     if (s != KV_OK) { print kv_status_str(s); exit 2 for KV_ERR_FORMAT
 *                       and KV_ERR_IO (bad input), 1 otherwise }
 *     ... kv_runner_create(&r, m, ...); kv_forward(r, m, ...) ...
 *     kv_checkpoint_unmap(m);   // harmless when m was not mapped
 *     kv_model_destroy(m);
 *
 * kv_model_destroy() should itself call kv_checkpoint_unmap() when
 * m->mapped; calling kv_checkpoint_unmap() first is always safe (it leaves
 * storage NULL and mapped 0, so a later kv_free(storage) is a no-op).
 */
#ifndef KV_CHECKPOINT_H
#define KV_CHECKPOINT_H

#include "kv_model.h"

/* Bytes of the seven-int32 header. */
#define KV_CHECKPOINT_HEADER_BYTES 28

/*
 * Exact size in bytes of a legacy checkpoint for this configuration
 * (header, weights, the two unused RoPE tables, wcls when unshared).
 * KV_ERR_OVERFLOW when it does not fit in size_t, KV_ERR_INVALID for a
 * NULL c or out, a non-positive dimension or heads not dividing dim.
 */
enum kv_status kv_checkpoint_file_bytes(const struct kv_model_config *c, size_t *out);

/*
 * Reads only the header of `path` into *cfg (mlp = 1, shared_classifier from
 * the sign of vocab_size, max_len = seq_len) and checks it: positive
 * dimensions, n_heads divides dim with an even head size, n_kv_heads divides
 * n_heads, and the file size equals kv_checkpoint_file_bytes(). KV_ERR_IO
 * when the file cannot be opened or read or is not a regular file
 * (kv_file_open_input), KV_ERR_FORMAT when it is malformed; kv_file_why()
 * says which.
 */
enum kv_status kv_checkpoint_read_header(const char *path, struct kv_model_config *cfg);

/*
 * Validates like kv_checkpoint_read_header, then maps the file read-only
 * and returns a model whose weights point into the mapping (mapped = 1,
 * storage = the mapping, storage_bytes = the file size). Every float of the
 * file must be finite (kv_first_nonfinite, one pass over the mapping):
 * a NaN or infinity is KV_ERR_FORMAT, and kv_file_why() names the tensor
 * and the index, as it names every other reason a load failed. The model struct
 * itself comes from kv_alloc. The weights are read-only memory: nothing
 * may write through m->w. On failure *out is NULL and nothing is left
 * mapped or allocated.
 */
enum kv_status kv_checkpoint_load(const char *path, struct kv_model **out);

/*
 * The index of the first NaN or infinity in x[0..n), or n when every value
 * is finite (0 for a NULL x: nothing there is a finite value). The
 * finiteness check of every float kvlab loads: the checkpoint's weights
 * (kv_checkpoint_load) and the tokenizer's scores.
 */
size_t kv_first_nonfinite(const float *x, size_t n);

/* Unmaps a loaded checkpoint's weights (storage = NULL, mapped = 0, weight
 * pointers NULL). Does nothing when m is NULL or not mapped. */
void kv_checkpoint_unmap(struct kv_model *m);

/*
 * Writes m in the legacy format to `path`, through a temporary file in the
 * same directory renamed over `path` only once everything is written, so a
 * failed export never leaves a half-written checkpoint behind. The two
 * unused RoPE tables are filled with cos/sin like llama2.c's exporter. A
 * model without an MLP (cfg.mlp == 0) is written with zero w1/w2/w3, which
 * computes exactly the same function (w2(silu(0) * 0) = 0). vocab_size is
 * written negative when the classifier is not shared.
 */
enum kv_status kv_checkpoint_export(const char *path, const struct kv_model *m);

#endif /* KV_CHECKPOINT_H */

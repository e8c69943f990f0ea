/*
 * tokenizer.h - the llama2.c tokenizer.bin format and its BPE encoder.
 *
 * File format (little-endian): int32 max_token_length, then for each token
 * id 0, 1, ...: float32 merge score, int32 byte length, that many bytes (the
 * token's text, not NUL-terminated). Sentencepiece vocabularies exported by
 * llama2.c name their byte-fallback tokens "<0x00>".."<0xFF>" and use
 * "<s>" / "</s>" for begin / end of sequence.
 *
 * The design decision that matters: the loader reads the whole file and
 * checks every length against the bytes that remain before copying a single
 * piece, so a truncated or lying file is KV_ERR_FORMAT, never an overread.
 *
 * Encoding (the algorithm llama2.c uses): split the text into UTF-8 code
 * points; each code point becomes its own token when the vocabulary has it,
 * otherwise one token per byte ("<0xXX>" when present, else the one-byte
 * piece); then repeatedly merge the adjacent pair whose concatenation is a
 * token with the highest score (leftmost on ties) until no pair merges.
 *
 * Usage (what `kvlab generate --tokenizer FILE --prompt TEXT` does):
 *
 *     struct kv_tokenizer *t;
 *     s = kv_tokenizer_load(&t, path, model->cfg.vocab_size);
 *     int32_t ids[strlen(text) + 3], n;
 *     s = kv_tokenizer_encode(t, text, strlen(text),
 *                             kv_tokenizer_default_flags(t), ids, cap, &n);
 *     ... for each generated id: kv_tokenizer_decode(t, prev, id, &bytes) ...
 *     kv_tokenizer_destroy(t);
 */
#ifndef KV_TOKENIZER_H
#define KV_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "../../kernels/kv_common.h"

struct kv_tokenizer;

/* Encode flags. */
enum kv_tok_flag {
    KV_TOK_BOS = 1u << 0,          /* prepend the "<s>" token (KV_ERR_INVALID if none) */
    KV_TOK_EOS = 1u << 1,          /* append the "</s>" token (KV_ERR_INVALID if none) */
    KV_TOK_DUMMY_PREFIX = 1u << 2, /* prepend " " to non-empty text (sentencepiece) */
};

/*
 * Loads a tokenizer.bin. vocab_size > 0: the file must hold exactly that
 * many tokens (the model's vocabulary); 0: every token up to the end of the
 * file. KV_ERR_IO when the file cannot be read, KV_ERR_FORMAT when it is
 * truncated, has a negative or oversized length, or a different count.
 */
enum kv_status kv_tokenizer_load(struct kv_tokenizer **out, const char *path,
                                 int32_t vocab_size);

/* A byte-level vocabulary: token i is the single byte i (256 tokens, no
 * merges, no BOS/EOS), what the synthetic models use. */
enum kv_status kv_tokenizer_create_bytes(struct kv_tokenizer **out);

/* Builds a tokenizer from n pieces (copied). Same validation as a load. */
enum kv_status kv_tokenizer_create(struct kv_tokenizer **out, int32_t n,
                                   const char *const *pieces, const int32_t *lens,
                                   const float *scores);

/* Writes t in the tokenizer.bin format (temp file + rename). */
enum kv_status kv_tokenizer_save(const struct kv_tokenizer *t, const char *path);

void kv_tokenizer_destroy(struct kv_tokenizer *t);

/* (A NULL t: vocabulary 0, no BOS or EOS, no flags.) */
int32_t kv_tokenizer_vocab_size(const struct kv_tokenizer *t);
int32_t kv_tokenizer_bos(const struct kv_tokenizer *t); /* -1 when absent */
int32_t kv_tokenizer_eos(const struct kv_tokenizer *t); /* -1 when absent */

/* BOS | DUMMY_PREFIX for a sentencepiece vocabulary (one with "<s>"),
 * 0 otherwise. */
unsigned kv_tokenizer_default_flags(const struct kv_tokenizer *t);

/*
 * ids[0..*n_out) <- tokens of text[0..len) (text may contain NUL bytes).
 * max_ids >= len + 3 always suffices. KV_ERR_INVALID when ids is too small,
 * when a flag asks for a token the vocabulary lacks, or when a byte of the
 * text has no token at all.
 */
enum kv_status kv_tokenizer_encode(const struct kv_tokenizer *t, const char *text,
                                   size_t len, unsigned flags, int32_t *ids,
                                   int32_t max_ids, int32_t *n_out);

/* The raw piece of token id (not NUL-terminated; *len bytes). NULL when
 * id is out of range. */
const char *kv_tokenizer_piece(const struct kv_tokenizer *t, int32_t id, int32_t *len);

/*
 * The bytes token `id` stands for when it follows token `prev` (-1 at the
 * start): "<0xXX>" pieces give their byte, and the leading space of a piece
 * right after BOS is dropped (the dummy prefix). *bytes points into t.
 * Returns the byte count, 0 for an out-of-range id (or a NULL t or bytes).
 */
size_t kv_tokenizer_decode(const struct kv_tokenizer *t, int32_t prev, int32_t id,
                           const char **bytes);

/*
 * Decodes ids[0..n) into out (at most cap bytes, NUL-terminated when cap >
 * 0); *len_out (if not NULL) gets the full length, which may exceed cap-1.
 * BOS and EOS tokens produce no text; a NULL ids is no tokens, a NULL out
 * no room (the length only).
 */
void kv_tokenizer_decode_all(const struct kv_tokenizer *t, const int32_t *ids, int32_t n,
                             char *out, size_t cap, size_t *len_out);

/*
 * A short printable form of token id for terminals and logs: the bytes it
 * stands for, single-quoted, with non-printable bytes, quotes and
 * backslashes as \xNN ('a', '\x9f', ' the'); BOS/EOS show their piece
 * ('<s>'). Without a tokenizer (t == NULL) a token is the byte of that
 * value when vocab <= 256, else "#id". buf gets at most cap bytes
 * (NUL-terminated, cap >= 16; long pieces are cut); returns buf (with
 * cap < 16 only an empty string when cap > 0; a NULL buf stays NULL).
 */
const char *kv_token_text(const struct kv_tokenizer *t, int32_t vocab, int32_t prev,
                          int32_t id, char *buf, size_t cap);

#endif /* KV_TOKENIZER_H */

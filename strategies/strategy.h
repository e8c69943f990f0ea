/*
 * strategy.h - the cache strategy interface and the cache object around it.
 *
 * A strategy is one .c file exporting one `const struct kv_strategy_ops`
 * (designated initializers), listed in the registry (registry.c). The core
 * (cache.c) owns lifecycle and memory: it asks the strategy how big its state
 * struct is, allocates it, keeps a copy of the strategy's parameters and the
 * span storage of the views, and wraps every call; the strategy owns
 * behaviour and allocates its own storage through kv_alloc(). Optional
 * methods may be NULL and the wrapper supplies the default.
 *
 * A strategy describes itself, so that code outside strategies/ never names
 * one (SQLite's xDeviceCharacteristics, ggml's supports_op): capability
 * flags (what it can do and promises), a parameter table (its own options:
 * name, CLI flag, range, default, help, whether memory scales with it),
 * describe() (one line for people) and label() (the CSV's strategy name).
 * Its parameters are its own struct, params_size bytes, which only its .c
 * file knows; everybody else reads and writes it through the table
 * (params.c: kv_params_set, kv_params_format, ...).
 *
 * Shapes. The model hands an update for one layer as
 *     k_new, v_new : (batch, n_new, n_kv_heads, head_dim) floats
 * holding the keys/values of n_new consecutive tokens at absolute positions
 * pos0 .. pos0+n_new-1 (RoPE already applied to keys). After the update,
 * view() describes, as a kv_view (kernels/kv_attention.h), every key/value
 * the queries of this step may attend to: past tokens kept by the strategy
 * *and* the n_new new ones, as any number of spans (each with its own K and
 * V descriptors), plus the mask that layer's storage needs (a window,
 * attention sinks). The kernel masks by position, so a span may contain
 * keys that some queries must not see.
 *
 * Pointer lifetime: a view is valid until the next update/reset/crop/
 * reorder/destroy of the cache or the next view of the same layer. A
 * strategy may return spans that point into k_new/v_new (KV_CAP_SHARES_STORAGE:
 * `none` does, it keeps nothing), so the caller keeps k_new/v_new alive until
 * it has run attention.
 */
#ifndef KV_STRATEGY_H
#define KV_STRATEGY_H

#include "../kernels/kv_attention.h"

/* The shape every cache has; the core validates it. A strategy's own
 * options are its parameters (below), not fields here. */
/* The largest parameter struct a strategy may have (kv_strategy_validate
 * refuses more), so callers can hold any strategy's parameters on the stack. */
#define KV_PARAMS_MAX_BYTES 256

struct kv_cache_config {
    int32_t n_layers;
    int32_t batch;
    int32_t n_kv_heads;
    int32_t head_dim;
    int32_t max_len;  /* positions the cache must take: a preallocating cache's
                         capacity; others refuse positions beyond it (0: none) */
};

/* ------------------------------------------------------------------------ */
/* Capabilities                                                             */

/* What a strategy can do and promises; code outside strategies/ asks these,
 * never the name (the conformance suite tests each promise). kv_cap_name
 * gives each flag's short name ("evicts", "score-evicts", ...).
 *
 * Eviction is described by three independent questions, each its own flag,
 * never inferred from the shape of a view (a span's position table is a
 * storage layout, not a promise):
 *   - KV_CAP_EVICTS: does it forget tokens at all? Then it is exact only
 *     under the mask its views carry;
 *   - KV_CAP_SCORE_EVICTS: does it evict what no mask describes? (requires
 *     KV_CAP_EVICTS; kv_strategy_register refuses it alone.) Then nobody can
 *     rebuild its view from the history and a mask: a reference compares it
 *     on the keys its views list (the conformance suite, attention checks);
 *   - KV_CAP_ATTN_MASS: does it need the attention scores? Then the caller
 *     hands it the mass per key (kv_cache_mass_buffer, kv_cache_observe; the
 *     model's forward does). It must stay correct without them.
 * h2o has all three; sliding and sinks only the first. A strategy evicting
 * by key norm would have SCORE_EVICTS without ATTN_MASS, one that only
 * gathers statistics ATTN_MASS without evicting. */
enum kv_cap {
    /* fed only the new tokens; without it the model re-runs the whole
     * sequence every step and the cache exposes only that call's k/v */
    KV_CAP_KEEPS_HISTORY = 1u << 0,
    /* values read back within their dtype's error bound, not bit-exact */
    KV_CAP_LOSSY = 1u << 1,
    /* forgets tokens: exact only under the mask its views carry (with
     * KV_CAP_SCORE_EVICTS: only for the keys it keeps) */
    KV_CAP_EVICTS = 1u << 2,
    /* all storage allocated at creation: updates never allocate, resident
     * bytes are flat */
    KV_CAP_PREALLOCATES = 1u << 3,
    /* takes a multi-token update into a non-empty cache (without it, only
     * an empty cache takes more than one token at a time) */
    KV_CAP_CHUNKED_APPEND = 1u << 4,
    KV_CAP_CROP = 1u << 5,    /* kv_cache_crop */
    KV_CAP_FORK = 1u << 6,    /* kv_cache_fork */
    KV_CAP_REORDER = 1u << 7, /* kv_cache_reorder */
    /* views may point at the caller's k_new/v_new (see pointer lifetime) */
    KV_CAP_SHARES_STORAGE = 1u << 8,
    /* refuses positions past cfg.max_len > 0 with KV_ERR_FULL */
    KV_CAP_BOUNDED = 1u << 9,
    /* needs the attention scores: the mass per key of its views (an
     * eviction score); the caller asks kv_cache_mass_buffer for a buffer,
     * passes it to the kernel (kv_attn_params.mass) and hands it back with
     * kv_cache_observe. Independent of KV_CAP_SCORE_EVICTS */
    KV_CAP_ATTN_MASS = 1u << 10,
    /* evicts what no mask describes (by a score: accumulated attention, a
     * key's norm), so no mask says which keys are gone: its views hold,
     * exactly, the keys it kept, always including the current update's own.
     * Only with KV_CAP_EVICTS; independent of KV_CAP_ATTN_MASS */
    KV_CAP_SCORE_EVICTS = 1u << 11,
    /* its views may serve keys rotated (RoPE, kernels/kv_ops.h) to other
     * positions than they were written at (StreamingLLM's re-indexing):
     * read back, each rotated pair keeps its length, values are exact */
    KV_CAP_REPOSITIONS = 1u << 12,
    /* kv_cache_borrow_prefix: a cache reads another cache's first tokens in
     * place (a prompt prefix shared across requests), holding none of them */
    KV_CAP_BORROW = 1u << 13,
    KV_CAP_ALL = (1u << 14) - 1
};

/* The short name of one flag ("keeps-history", "evicts", "score-evicts",
 * "attention-mass", ...: lower case, '-' between words, a label), NULL for
 * 0, several bits or a bit outside KV_CAP_ALL. Every flag has one, so a
 * list of a strategy's flags is
 *     for (uint32_t bit = 1; bit & KV_CAP_ALL; bit <<= 1)
 *         if (caps & bit) printf(" %s", kv_cap_name(bit)); */
const char *kv_cap_name(uint32_t cap);

/* ------------------------------------------------------------------------ */
/* Parameters                                                               */

enum kv_param_type {
    KV_PARAM_INT = 0, /* any integer in [lo, hi] */
    KV_PARAM_CHOICE,  /* one of choices[0 .. n_choices) */
    /* a text of at most text_size - 1 bytes, in a char field of that size:
     * label characters (kv_label_ok) but '=' (it goes into `k=v;k=v` and a
     * CSV cell); a ',' given is stored as '+', so lists inside it are
     * '+'-separated. The strategy's check() says what it means. */
    KV_PARAM_TEXT,
    KV_PARAM_TYPE_COUNT
};

/* One option of a strategy: an int32_t field of its parameter struct (a
 * char field for KV_PARAM_TEXT). */
struct kv_param {
    const char *name;       /* key in `k=v;k=v` (CSV params) and kv_params_set */
    const char *flag;       /* the CLI option, e.g. "--window" (shared by every
                               strategy with a parameter of that flag) */
    enum kv_param_type type;
    int32_t scales_memory;  /* 1: resident bytes grow with it (size-bearing) */
    int64_t lo, hi;         /* KV_PARAM_INT: accepted range */
    const int32_t *choices; /* KV_PARAM_CHOICE: the accepted values */
    const char *const *names; /* KV_PARAM_CHOICE, or NULL: names[i] spells choices[i]
                                 (--dtype f16, dtype=f16): the CLI and the k=v text
                                 take and print the name, never the number */
    int32_t n_choices;
    int32_t def;            /* default */
    const char *help;       /* one line, for --help and `kvlab strategies` */
    size_t offset;          /* of the field in the parameter struct */
    int32_t text_size;      /* KV_PARAM_TEXT: bytes of the field, NUL included */
    const char *def_text;   /* KV_PARAM_TEXT: default */
};

/* A named parameter set (e.g. "quantized-int4" = "bits=4"): a strategy can
 * be picked by a preset's name wherever a strategy name is accepted
 * (kv_strategy_lookup). Its results are filed under label() of its
 * parameters, which is the preset's own name ("dynamic-f16", "kivi-2",
 * "paged-16"), unless the preset is an alias: parameters equal to the
 * strategy's defaults or to an earlier preset's file under that label
 * ("sinks-original" as "sinks", "quantized:8" as "quantized-int8"), so one
 * configuration never gets two labels (the conformance suite checks it). */
struct kv_preset {
    const char *name;
    const char *params; /* `k=v;k=v`, the parameters it sets */
    int32_t sweep;      /* 1: a series of the default sweep (kvlab sweep without
                           --strategies), 0: only when named */
};

/* ------------------------------------------------------------------------ */
/* Storage breakdown                                                        */

/* What a cache's resident bytes hold (kv_cache_stats): resident = tokens +
 * slack + spare. */
struct kv_cache_stats {
    size_t resident; /* resident_bytes */
    size_t tokens;   /* holding tokens; storage several sequences read counted once */
    size_t slack;    /* held for tokens but holding none: capacity past the length,
                        the empty rows of partly filled blocks (internal
                        fragmentation) */
    size_t spare;    /* kept for reuse, holding nothing (a pool's free blocks) */
    size_t shared;   /* of tokens: bytes more than one sequence reads */
    size_t cow;      /* of copied bytes: copies made because a sequence wrote
                        into storage it shared (copy-on-write) */
};

/* ------------------------------------------------------------------------ */
/* The ops table                                                            */

struct kv_strategy_ops {
    const char *name;        /* registry key, e.g. "dynamic" */
    const char *description; /* one line, for `kvlab strategies` */
    uint32_t caps;           /* enum kv_cap flags */

    /* Parameters: params_size bytes (at most KV_PARAMS_MAX_BYTES) of the
     * strategy's own struct, described field by field by params[0 ..
     * n_params). */
    const struct kv_param *params;
    int32_t n_params;
    size_t params_size;
    const struct kv_preset *presets;
    int32_t n_presets;

    /* sizeof the strategy's state struct. */
    size_t state_size;

    /*
     * Cross-checks of the parameters against the shape, after the table's
     * ranges (a group dividing head_dim). KV_ERR_INVALID (or
     * KV_ERR_OVERFLOW) with one sentence in why. NULL: nothing to check.
     */
    enum kv_status (*check)(const struct kv_cache_config *cfg, const void *params, char *why,
                            size_t why_len);

    /* One line for people: the description with the parameters' values
     * ("ring buffer of ... (window 512)"); returns snprintf's count. NULL:
     * the description. */
    int (*describe)(const struct kv_cache_config *cfg, const void *params, char *buf, size_t n);

    /* The name results are filed under, when the parameters change what the
     * strategy is ("quantized-int4"). NULL: the name. */
    int (*label)(const void *params, char *buf, size_t n);

    /* The dtype the strategy stores its tokens in (the lowest precision it
     * holds), for the CSV's dtype column. NULL: f32. */
    enum kv_dtype (*dtype)(const void *params);

    /*
     * An upper bound of resident_bytes while holding n_tokens tokens per
     * layer, whatever the update sizes were, computed without a cache (the
     * CLI's memory checks; the conformance suite checks the bound holds).
     * KV_ERR_OVERFLOW when it does not fit size_t. NULL: unknown.
     */
    enum kv_status (*bytes_for)(const struct kv_cache_config *cfg, const void *params,
                                int32_t n_tokens, size_t *bytes);

    /* The capabilities of a cache with these parameters, a subset of caps
     * (a per-layer pattern has only what its layers have). NULL: caps. */
    uint32_t (*caps_of)(const struct kv_cache_config *cfg, const void *params);

    /* Most spans view() returns for one layer (NULL: 1). The core allocates
     * that many per layer at creation, so no view ever allocates and no fixed
     * limit applies (a cache with one span per page asks for max_len / page). */
    int32_t (*max_spans)(const struct kv_cache_config *cfg, const void *params);

    /*
     * Validates what check() does not (defence in depth) and sets up state
     * (zeroed memory of state_size bytes); params are checked and stay valid
     * for the cache's life. Preallocating strategies allocate here. On
     * failure it frees whatever it allocated.
     */
    enum kv_status (*init)(void *state, const struct kv_cache_config *cfg, const void *params);

    /* Frees what init/update allocated (not the state struct itself). */
    void (*free)(void *state);

    /*
     * Appends n_new tokens for one layer. Layers are updated in order
     * 0..n_layers-1 each step, each with the same pos0 and n_new. A strategy
     * with history requires pos0 == its current length of that layer
     * (KV_ERR_INVALID otherwise). Returns KV_ERR_FULL (when the tokens do
     * not fit), KV_ERR_INVALID (a multi-token update it cannot take, without
     * KV_CAP_CHUNKED_APPEND) or KV_ERR_NOMEM with the cache unchanged and
     * nothing written.
     */
    enum kv_status (*update)(void *state, int32_t layer, const float *k_new,
                             const float *v_new, int32_t n_new, int32_t pos0);

    /*
     * Fills spans[0..return) for one layer, after that layer's update, in
     * position order, and *mask with what that layer's storage needs for
     * exact semantics (the window of a ring buffer, attention sinks; zeroed
     * by the core before the call, so a strategy needing none leaves it).
     * Returns the number of spans (0..max_spans).
     */
    int32_t (*view)(const void *state, int32_t layer, struct kv_span *spans,
                    struct kv_mask *mask);

    /* Tokens seen so far by this layer (the next pos0). 0 for `none`. */
    int32_t (*seq_len)(const void *state, int32_t layer);

    /* Exact bytes of K/V storage the strategy holds now (all layers, codes
     * + qparams + residual; capacity, not just used slots). */
    size_t (*resident_bytes)(const void *state);

    /* The part of resident_bytes that layer holds (the layers sum to it).
     * NULL: every layer holds the same, resident_bytes / n_layers. */
    size_t (*layer_bytes)(const void *state, int32_t layer);

    /* Bytes written into cache storage by updates since init/reset:
     * new tokens stored plus any relocation (growth copies, re-quantizing,
     * reorders). */
    size_t (*copied_bytes)(const void *state);

    /* Forgets all tokens; keeps preallocated storage. NULL: free + init. */
    void (*reset)(void *state);

    /*
     * KV_CAP_ATTN_MASS (the table has observe exactly when it has the flag):
     * receives the attention mass of the layer's current view, (batch,
     * n_heads, n_keys) floats as kernels/kv_attention.h defines it (n_heads
     * query heads, a multiple of n_kv_heads), after the attention that read
     * that view and before the layer's next update, while the caller's
     * k_new/v_new of that update are still alive. The strategy adds it to
     * its scores and may evict then. A strategy must stay correct (within
     * its mask) when observe is never called.
     */
    void (*observe)(void *state, int32_t layer, const float *mass, int32_t n_heads);

    /* With KV_CAP_ATTN_MASS: 1 when layer wants the mass (a per-layer
     * pattern: only its evicting layers). NULL: every layer. */
    int (*wants_mass)(const void *state, int32_t layer);
    /* The breakdown of resident_bytes (see struct kv_cache_stats). NULL:
     * all of it counts as tokens. */
    void (*stats)(const void *state, struct kv_cache_stats *st);

    /* A picture of one layer's storage for people (the demo: a pool, block
     * tables, reference counts), lines ending in '\n'; snprintf's count.
     * NULL: nothing beyond the spans to show. */
    int (*show)(const void *state, int32_t layer, char *buf, size_t n);

    /* Optional operations, each declared by its capability flag (the table
     * has the method exactly when it has the flag); KV_ERR_UNSUPPORTED
     * without. */

    /* Keeps the first len tokens of every layer (len <= seq_len). */
    enum kv_status (*crop)(void *state, int32_t len);

    /* dst (a state just made by init with the same config and parameters)
     * <- a copy of src's tokens; later updates of either leave the other
     * alone. KV_ERR_NOMEM with dst as init left it. */
    enum kv_status (*fork)(void *dst, const void *src);

    /*
     * dst (a state just made by init, same strategy, parameters and shape,
     * max_len aside) <- the first n tokens of src's sequence 0 (n <= its
     * length) in every sequence: what it can, it reads from src's storage
     * in place and never writes (the core's contract: src outlives dst's
     * use of them and takes no update that rewrites them); the rest it
     * copies. Returns through *borrowed the tokens read in place, which
     * dst's bytes never include. KV_ERR_NOMEM / KV_ERR_FULL with dst as
     * init left it. With KV_CAP_BORROW, as is borrowable.
     */
    enum kv_status (*borrow)(void *dst, const void *src, int32_t n, int32_t *borrowed);
    /* The tokens of an n-token prefix that borrow would read in place. */
    int32_t (*borrowable)(const void *params, int32_t n);

    /*
     * Sequence b of every layer <- sequence src[b] of before, for b < n, and
     * the batch becomes n (the core checked n >= 1, every src[b] in
     * 0..batch-1 and the new shape; a source may be picked several times or
     * not at all): a reorder (a permutation), a beam-search step (each beam
     * its parent's tokens), n continuations of one prompt (n zeros), finished
     * sequences dropped. The strategy updates its own copy of cfg.batch.
     * KV_ERR_FULL when its storage cannot hold n sequences (a preallocated
     * cache past its creation batch), KV_ERR_NOMEM; both with the cache
     * unchanged.
     */
    enum kv_status (*reorder)(void *state, const int32_t *src, int32_t n);
};

/* ------------------------------------------------------------------------ */
/* Labels: the one text rule (params.c)                                     */

/*
 * Every name that ends up in a CSV cell, a plot title or legend, or a
 * message kvlab prints - a strategy's name, a preset's, the label() a
 * strategy returns, a frontier list's labels, a --layers-pattern, the CSV's
 * strategy and label columns - is a label: 1 to KV_LABEL_MAX bytes, each a
 * letter, a digit or one of KV_LABEL_PUNCT. So no comma, quote, backslash,
 * space, ';', '$', backtick or control byte ever reaches a file or a
 * terminal from a label. Checked where a label is made (kv_strategy_register,
 * the frontier list, kv_sweep_check) and again where one is read (the CSV
 * readers of compare and merge).
 */
#define KV_LABEL_MAX 63
#define KV_LABEL_PUNCT "._+-:*=@%"
/* 1 when s is a label (NULL is not). */
int kv_label_ok(const char *s);
/* 1 when c is a character of labels. */
int kv_label_char_ok(int c);
/* 0 when s is a label; else -1 and one sentence in why, naming the first
 * bad character by position and (printable) value or code, e.g. "character
 * 1 (';') is not allowed: a label has only letters, digits and ._+-:*=@%".
 * Only a printable ASCII character is shown as itself; a control byte, a
 * byte past 0x7e, a quote or backslash is named by its code, so the sentence
 * is one clean line whatever s holds. */
int kv_label_why(const char *s, char *why, size_t n);

/* ------------------------------------------------------------------------ */
/* Registry (registry.c)                                                    */

/*
 * Resolving a name: kv_strategy_lookup (below) is the one way, for a
 * strategy's name and a preset's alike. kv_strategy_find is a thin wrapper
 * of it for code that holds a strategy's own name: the table, or NULL when
 * nothing or only a preset has that name (a preset's parameters would be
 * lost; use kv_strategy_lookup for those).
 */
const struct kv_strategy_ops *kv_strategy_find(const char *name);
/* Number of registered strategies and the i-th one (registry order). */
int32_t kv_strategy_count(void);
const struct kv_strategy_ops *kv_strategy_at(int32_t i);

/*
 * Adds a strategy at run time, after the built-in ones (a program's own
 * strategy, or a test double the conformance suite then tests like the
 * others). KV_ERR_INVALID for an incomplete table (no name, init, update,
 * view; a capability flag without its method or the reverse; parameters
 * without a struct) or a name already taken; KV_ERR_FULL when
 * KV_STRATEGY_MAX_EXTRA are registered. Not thread-safe: register before
 * starting threads.
 */
#define KV_STRATEGY_MAX_EXTRA 8
enum kv_status kv_strategy_register(const struct kv_strategy_ops *ops);

/* The completeness checks kv_strategy_register makes (KV_OK for every
 * built-in table: a test says so), and the text rule: the name, every
 * preset's name, every parameter's name (no '='), flag ("--" and a label)
 * and choice names, and the label() of the defaults and of every preset
 * are labels (kv_label_ok). */
enum kv_status kv_strategy_validate(const struct kv_strategy_ops *ops);

/*
 * Reserves command-level option names ("--seed", "--threads", "--out" ...):
 * from then on kv_strategy_register refuses (KV_ERR_INVALID) a table with a
 * parameter whose flag is one of them, so a strategy's option can never
 * shadow a command's. KV_ERR_INVALID, reserving nothing, when a flag does
 * not start with "--" or an already registered strategy (built-in or extra)
 * has a parameter with one of these flags; KV_ERR_FULL past
 * KV_STRATEGY_MAX_RESERVED flags in all. Calls add up; n = 0 clears the
 * reservation. Not thread-safe: call at start-up, like kv_strategy_register.
 */
#define KV_STRATEGY_MAX_RESERVED 256
enum kv_status kv_strategy_reserve_flags(const char *const *flags, int32_t n);
/* 1 when flag is reserved. */
int kv_strategy_flag_reserved(const char *flag);

/*
 * The resolver: a strategy's name or a preset's name -> *ops and, when
 * params is not NULL (at least ops->params_size bytes, params_bytes says
 * how many; filled with the defaults first), the preset's parameters (the
 * defaults for a strategy's own name). KV_ERR_INVALID, *ops NULL, when
 * nothing has that name (or name/ops is NULL, or params_bytes is too
 * small). kv_strategy_label of the parameters it gives is the preset's name
 * (struct kv_preset: aliases aside). Names are unique across strategies and
 * presets (kv_strategy_register), so the answer never depends on order.
 */
enum kv_status kv_strategy_lookup(const char *name, const struct kv_strategy_ops **ops,
                                  void *params, size_t params_bytes);

/* ------------------------------------------------------------------------ */
/* Parameters (params.c)                                                    */

/* Index of the parameter called name, or -1. */
int32_t kv_param_find(const struct kv_strategy_ops *ops, const char *name);
/* 1 when v is within the parameter's range or choices (0 for NULL or a
 * text parameter). */
int kv_param_accepts(const struct kv_param *p, int64_t v);
/* "an integer in [lo, hi]" / "one of 8 or 4" / "one of f32, f16 or bf16",
 * for messages. */
int kv_param_range_str(const struct kv_param *p, char *buf, size_t n);
/* *v <- the value text spells for p: a choice's name for a named choice,
 * else a decimal integer; KV_ERR_INVALID for anything else or a value
 * outside the range or choices. */
enum kv_status kv_param_parse_value(const struct kv_param *p, const char *text, int64_t *v);
/* v as text: its name for a named choice ("f16"), else the number;
 * snprintf's count (0 and nothing written for a NULL or empty buffer). */
int kv_param_value_str(const struct kv_param *p, int64_t v, char *buf, size_t n);

/* params (ops->params_size bytes) <- every parameter's default. */
void kv_params_defaults(const struct kv_strategy_ops *ops, void *params);
/* Sets one parameter by name; KV_ERR_INVALID for an unknown name or a value
 * outside its range (and always for a KV_PARAM_TEXT parameter). */
enum kv_status kv_params_set(const struct kv_strategy_ops *ops, void *params, const char *name,
                             int64_t value);
/* Sets one parameter by name from its text form: a whole decimal integer
 * for INT and CHOICE parameters, the text itself for KV_PARAM_TEXT (within
 * its size and characters); KV_ERR_INVALID otherwise. */
enum kv_status kv_params_set_text(const struct kv_strategy_ops *ops, void *params,
                                  const char *name, const char *text);
/* The value of parameter i (not a KV_PARAM_TEXT one; 0 for a NULL table or
 * block, an index out of range or a text parameter), and the text of a
 * KV_PARAM_TEXT one (NULL for the others and for bad arguments). */
int32_t kv_params_get(const struct kv_strategy_ops *ops, const void *params, int32_t i);
const char *kv_params_get_text(const struct kv_strategy_ops *ops, const void *params, int32_t i);
/* Every range of the table, then ops->check against the shape; one
 * sentence in why (naming the CLI flag) on failure. */
enum kv_status kv_params_check(const struct kv_strategy_ops *ops,
                               const struct kv_cache_config *cfg, const void *params,
                               char *why, size_t why_len);
/* "window=512" / "bits=8;group=32;residual=32" / "dtype=f16" in table
 * order (named choices by name), "-" for a strategy without parameters (the
 * CSV params column); snprintf's count. */
int kv_params_format(const struct kv_strategy_ops *ops, const void *params, char *buf, size_t n);
/* Sets the parameters listed in `k=v;k=v` ("-" or "": none); v as
 * kv_param_parse_value reads it. */
enum kv_status kv_params_parse(const struct kv_strategy_ops *ops, void *params, const char *text);

/* ------------------------------------------------------------------------ */
/* The cache object (cache.c): a strategy plus its state                    */

struct kv_cache {
    const struct kv_strategy_ops *ops;
    struct kv_cache_config cfg;
    void *params;          /* ops->params_size bytes, the cache's own copy */
    void *state;
    struct kv_span *spans; /* (n_layers, max_spans) storage of the views */
    int32_t max_spans;
    uint32_t caps;         /* ops->caps_of(cfg, params), else ops->caps */
    float *mass;           /* KV_CAP_ATTN_MASS: the attention mass buffer */
    size_t mass_cap;       /* its floats (grown to the largest view) */
};

/* Validates the shape (positive sizes, overflow) and the parameters
 * (kv_params_check; params NULL: the table's defaults), then ops->init.
 * KV_ERR_INVALID for a NULL out, ops or cfg, and for a table without init
 * or update, state_size 0, parameters past KV_PARAMS_MAX_BYTES or a
 * parameter table without a struct.
 *
 * Every function of this section takes a NULL cache (or table): the ones
 * returning a status return KV_ERR_INVALID, the size and count getters 0,
 * the text ones an empty string (when buf has room) and 0, the dtype ones
 * f32, kv_cache_has 0, kv_cache_destroy nothing. */
enum kv_status kv_cache_create(struct kv_cache **out, const struct kv_strategy_ops *ops,
                               const struct kv_cache_config *cfg, const void *params);
void kv_cache_destroy(struct kv_cache *c);
enum kv_status kv_cache_update(struct kv_cache *c, int32_t layer, const float *k_new,
                               const float *v_new, int32_t n_new, int32_t pos0);
/* *view <- the spans and mask of one layer (after its update), and the
 * shape of the cache's storage (view->batch, n_kv_heads, head_dim: the
 * cache's, so kv_attn refuses params that differ); KV_ERR_INVALID for a bad
 * layer. The spans live in the cache (see pointer lifetime). */
enum kv_status kv_cache_view(const struct kv_cache *c, int32_t layer, struct kv_view *view);
int32_t kv_cache_seq_len(const struct kv_cache *c, int32_t layer);
size_t kv_cache_resident_bytes(const struct kv_cache *c);
/* The part of the resident bytes that one layer holds (0 for a bad layer). */
size_t kv_cache_layer_bytes(const struct kv_cache *c, int32_t layer);
size_t kv_cache_copied_bytes(const struct kv_cache *c);
/* *st <- the breakdown of the resident bytes (ops->stats, else everything
 * resident as tokens). KV_ERR_INVALID for a NULL st, and for a NULL cache
 * (*st then all zero). */
enum kv_status kv_cache_stats(const struct kv_cache *c, struct kv_cache_stats *st);
/* The strategy's picture of layer's storage (ops->show); 0 and an empty
 * string when it has none (and for a bad layer or a NULL buf). */
int kv_cache_show(const struct kv_cache *c, int32_t layer, char *buf, size_t n);
enum kv_status kv_cache_reset(struct kv_cache *c);
/* 1 when the cache has every flag of caps (its strategy's, for its
 * parameters: ops->caps_of). */
int kv_cache_has(const struct kv_cache *c, uint32_t caps);
/* The capabilities a cache of this strategy and parameters has (0 for a
 * NULL table). */
uint32_t kv_strategy_caps(const struct kv_strategy_ops *ops, const struct kv_cache_config *cfg,
                          const void *params);

/*
 * The attention mass, for a cache with KV_CAP_ATTN_MASS. kv_cache_mass_buffer
 * gives the buffer for layer's view `view` (just taken with kv_cache_view)
 * with n_heads query heads: *mass and *len (floats: batch * n_heads * the
 * view's keys) for kv_attn_params.mass / mass_len, or NULL and 0 when the
 * cache (or that layer) wants none. The buffer belongs to the cache and
 * grows, amortised, to the largest view (KV_ERR_NOMEM, nothing changed).
 * After the attention, kv_cache_observe hands the filled buffer to the
 * strategy (a no-op for a cache that wants none). KV_ERR_INVALID for a bad
 * layer or n_heads (not a positive multiple of n_kv_heads).
 */
enum kv_status kv_cache_mass_buffer(struct kv_cache *c, int32_t layer, const struct kv_view *view,
                                    int32_t n_heads, float **mass, size_t *len);
enum kv_status kv_cache_observe(struct kv_cache *c, int32_t layer, const float *mass,
                                int32_t n_heads);
/* The strategy's one line for this cache (describe, else the description)
 * and its label (label, else the name); snprintf's count (buf NULL: the
 * count of the plain description or name, nothing written). */
int kv_cache_describe(const struct kv_cache *c, char *buf, size_t n);
int kv_cache_label(const struct kv_cache *c, char *buf, size_t n);
/* The dtype the cache stores tokens in (ops->dtype, else f32). */
enum kv_dtype kv_cache_dtype(const struct kv_cache *c);
/* The same for a strategy and parameters, before any cache exists
 * (params NULL: the table's defaults; cfg NULL: the plain description; a
 * dtype outside the enum from the table's dtype method: f32). */
int kv_strategy_describe(const struct kv_strategy_ops *ops, const struct kv_cache_config *cfg,
                         const void *params, char *buf, size_t n);
int kv_strategy_label(const struct kv_strategy_ops *ops, const void *params, char *buf, size_t n);
enum kv_dtype kv_strategy_dtype(const struct kv_strategy_ops *ops, const void *params);
/* The first registered strategy with every flag of `have` and none of
 * `lack` (e.g. an exact growing reference: have KEEPS_HISTORY, lack LOSSY |
 * EVICTS | PREALLOCATES), or NULL. */
const struct kv_strategy_ops *kv_strategy_with(uint32_t have, uint32_t lack);

/* Optional operations (KV_ERR_UNSUPPORTED without the capability):
 * keep the first len tokens (0 <= len <= every layer's length, else
 * KV_ERR_INVALID); a new cache *out with a copy of c's tokens (same batch);
 * sequence b <- sequence src[b] for b < n, the batch becoming n (n >= 1,
 * each src[b] in 0..batch-1, repeats allowed, else KV_ERR_INVALID; see the
 * ops table's reorder), c->cfg.batch updated on success. */
enum kv_status kv_cache_crop(struct kv_cache *c, int32_t len);
enum kv_status kv_cache_fork(struct kv_cache **out, const struct kv_cache *c);
enum kv_status kv_cache_reorder(struct kv_cache *c, const int32_t *src, int32_t n);
/*
 * A prompt prefix shared across caches (KV_CAP_BORROW): *out, a new cache
 * of c's strategy and parameters with config cfg (c's shape, any max_len
 * and batch), holds the first n tokens of c's sequence 0 in every
 * sequence; *borrowed of them it reads from c's storage in place, so c
 * must outlive *out and take no crop, reset or reorder while *out exists
 * (appending to c is fine). KV_ERR_INVALID for a shape that differs or n
 * past c's length (or cfg.max_len).
 */
enum kv_status kv_cache_borrow_prefix(struct kv_cache **out, const struct kv_cache *c,
                                      const struct kv_cache_config *cfg, int32_t n,
                                      int32_t *borrowed);
/* Tokens of an n-token prefix that kv_cache_borrow_prefix would read in
 * place (0 without KV_CAP_BORROW). */
int32_t kv_strategy_borrowable(const struct kv_strategy_ops *ops, const void *params, int32_t n);
/* Convenience forms of kv_cache_reorder: drop sequence b (the batch shrinks
 * by one, the later sequences move down; KV_ERR_INVALID for the last one
 * left or b out of range); sequence dst <- a copy of sequence src (the
 * batch unchanged). */
enum kv_status kv_cache_free_seq(struct kv_cache *c, int32_t b);
enum kv_status kv_cache_copy_seq(struct kv_cache *c, int32_t src, int32_t dst);

/* Upper bound of the resident bytes of a cache of this strategy holding
 * n_tokens per layer, before creating one (ops->bytes_for; KV_ERR_UNSUPPORTED
 * when the strategy cannot say, KV_ERR_OVERFLOW when it exceeds size_t). */
enum kv_status kv_cache_bytes_for(const struct kv_strategy_ops *ops,
                                  const struct kv_cache_config *cfg, const void *params,
                                  int32_t n_tokens, size_t *bytes);

/* The window of the mask the cache's views carry (layer 0), 0 for none. */
int32_t kv_cache_mask_window(const struct kv_cache *c);

/* The registered tables (one per strategies/<name>.c). */
extern const struct kv_strategy_ops kv_strategy_none;
extern const struct kv_strategy_ops kv_strategy_dynamic;
extern const struct kv_strategy_ops kv_strategy_dynamic_concat;
extern const struct kv_strategy_ops kv_strategy_static;
extern const struct kv_strategy_ops kv_strategy_sliding;
extern const struct kv_strategy_ops kv_strategy_sinks;
extern const struct kv_strategy_ops kv_strategy_h2o;
extern const struct kv_strategy_ops kv_strategy_hybrid;
extern const struct kv_strategy_ops kv_strategy_quantized;
extern const struct kv_strategy_ops kv_strategy_paged;

#endif /* KV_STRATEGY_H */

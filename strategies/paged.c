/*
 * paged.c - a paged cache (vLLM's PagedAttention layout): keys and values in
 * fixed-size blocks of `block` tokens drawn from one pool shared by the
 * batch, a block table per sequence per layer, blocks shared between
 * sequences by reference count and copied only when written (copy-on-write).
 *
 * Storage. A block holds one layer of one sequence: K (n_kv_heads, block,
 * head_dim) rows of the cache's dtype (f32, or f16 / bf16 with --dtype, each
 * row rounded once when it is appended), then V of the same shape. The pool allocates blocks in
 * chunks that never move (growth never copies a row); a free list hands
 * them out. Sequence b of layer l with T tokens holds ceil(T / block) blocks,
 * table entries i = 0 .. ceil(T/block)-1, token t in block t / block at row
 * t % block.
 *
 * The design decision: the kernel reads the blocks in place through ONE
 * span per layer whose K and V descriptors are block tables, one table per
 * sequence (kv_tensor.pages with table_stride; kernels/kv_attention.h). The
 * decode kernel keeps its 64-row online-softmax blocks and only cuts them
 * into page runs for its row kernels, so nothing is paid per block beyond a
 * pointer load, and no row is ever gathered into a contiguous copy.
 *
 * Sharing. reorder (kv_cache_reorder: sequence b <- sequence src[b]) copies
 * block-table entries and counts references, never rows: n sequences from
 * one prefilled prompt share its blocks (a shared prompt costs P tokens,
 * not n x P), beam search moves table entries. A sequence that appends into
 * a block it shares first copies the block's filled rows into a block of
 * its own (copy-on-write; counted in copied bytes and in stats().cow); full
 * shared blocks are never written again, so they stay shared.
 *
 * Borrowing (kv_cache_borrow_prefix, a prompt prefix shared across
 * requests that each have a cache of their own, as a serving pool shares a
 * system prompt): a new cache's table entries point at another cache's
 * full blocks of the prefix (id BORROWED, not in its own pool, no
 * reference counted: the lender outlives the borrower), the partly filled
 * last block of the prefix is copied. A borrowed block is read in place
 * and, like a shared one, copied before a row of it is written (only after
 * a crop into it).
 *
 * Growth and refusal. An update first counts the blocks it needs (new
 * blocks and copy-on-write copies; layer 0 counts them for every layer of
 * the step), then takes them all from the pool,
 * growing it by one chunk (max(16, a quarter of the pool, what is needed)
 * blocks, or max(--grow-blocks, what is needed)) when the free list is
 * short; with --max-blocks the pool never
 * exceeds that many blocks and an update that would need more returns
 * KV_ERR_FULL with nothing written, like a full static cache. Apart from
 * such a chunk, a decode step allocates nothing: it takes a block from the
 * free list every `block` tokens. crop and dropped sequences return blocks
 * to the free list (resident bytes are the pool's, free blocks included);
 * reset frees the pool.
 *
 * Accounting. resident bytes = blocks in the pool x block bytes; stats()
 * splits them into token rows (a shared block once), the empty rows of
 * blocks in use (internal fragmentation) and free blocks. copied bytes =
 * rows written by updates + rows copied on write + blocks copied by fork.
 *
 * Parameters: --block-size (tokens per block, default 16), --max-blocks
 * (pool limit, 0 = none), --grow-blocks (the pool's smallest growth, 0 =
 * a quarter of it, 16 or more; 1 = no free blocks held ahead), --dtype f32|f16|bf16 (the storage option of the
 * float stores, kv_store.h). The block tables are sized from cfg.max_len,
 * so the cache needs one (check refuses 0). Presets paged-16, paged-128,
 * paged-16-f16 and paged-16-bf16.
 */
#include <stdio.h>
#include <string.h>

#include "kv_store.h"
#include "strategy.h"

/* ------------------------------------------------------------------------ */
/* Parameters                                                               */

struct paged_params {
    int32_t block;      /* tokens per block */
    int32_t max_blocks; /* pool limit in blocks, 0: grows as needed */
    int32_t grow;       /* blocks the pool grows by at least, 0: a quarter of it (16 or more) */
    int32_t dtype;      /* enum kv_dtype of the rows: f32, f16 or bf16 */
};

static const struct kv_param paged_param_table[] = {
    {.name = "block", .flag = "--block-size", .type = KV_PARAM_INT, .lo = 1, .hi = 1 << 16,
     .def = 16, .help = "tokens per block of the paged cache's pool", .scales_memory = 0,
     .offset = offsetof(struct paged_params, block)},
    {.name = "max_blocks", .flag = "--max-blocks", .type = KV_PARAM_INT, .lo = 0,
     .hi = INT32_MAX, .def = 0,
     .help = "blocks the paged pool may hold, all layers (0: no limit); past it: full",
     .scales_memory = 1, .offset = offsetof(struct paged_params, max_blocks)},
    {.name = "grow", .flag = "--grow-blocks", .type = KV_PARAM_INT, .lo = 0, .hi = 1 << 20,
     .def = 0,
     .help = "blocks the paged pool grows by at least (0: a quarter of it, 16 or more; 1: "
             "only what a step needs, as a pool shared by many requests would)",
     .scales_memory = 1, .offset = offsetof(struct paged_params, grow)},
    KV_STORE_DTYPE_PARAM(struct paged_params, dtype),
};

static const struct kv_preset paged_presets[] = {
    {.name = "paged-16", .params = "block=16"},
    {.name = "paged-128", .params = "block=128"},
    {.name = "paged-16-f16", .params = "block=16;dtype=f16"},
    {.name = "paged-16-bf16", .params = "block=16;dtype=bf16"},
};

/* Smallest chunk the pool grows by, in blocks. */
#define PAGED_MIN_CHUNK 16

/* ------------------------------------------------------------------------ */
/* State                                                                    */

struct paged_layer {
    int32_t len;           /* tokens held by every sequence */
    int32_t *ids;          /* (cap_batch, stride) block ids, -1 past the end */
    const void **kp, **vp; /* (cap_batch, stride) the blocks' K and V pages */
};

struct paged_state {
    struct kv_cache_config cfg;
    int32_t block, max_blocks, grow;
    enum kv_dtype dtype;       /* of the rows: f32, f16 or bf16 */
    int32_t stride;            /* table entries per sequence: ceil(max_len / block) */
    int32_t cap_batch;         /* sequences the tables have room for */
    size_t row_bytes;          /* one row of one kv head, in dtype */
    size_t half;               /* K (or V) of one block: heads * block * row */
    struct paged_layer *layers; /* (n_layers) */
    struct paged_layer *alt;   /* (n_layers) spare tables of cap_batch sequences that a
                                  reorder fills and swaps in (beam steps allocate
                                  nothing), made by the first reorder; or NULL */
    /* the pool */
    char **chunks;             /* (cap_chunks) storage, never moved */
    int32_t n_chunks, cap_chunks;
    int32_t n_blocks;          /* blocks in all chunks */
    int32_t cap_ids;           /* room in the per-block arrays */
    char **base;               /* (cap_ids) address of block id */
    int32_t *ref;              /* (cap_ids) table entries pointing at it */
    int32_t *fill;             /* (cap_ids) rows written in it */
    int32_t *free_ids;         /* (cap_ids) the free list, a stack */
    int32_t n_free;
    size_t used_rows;          /* rows written in blocks in use, each block once */
    size_t copied, cow;        /* bytes, see the opening comment */
};

static size_t block_bytes(const struct paged_state *s) { return 2 * s->half; }

/* Entries of all tables of a batch of `batch`: layers x batch x stride, the
 * most blocks such a cache can use at once. KV_ERR_OVERFLOW past int32. */
static enum kv_status paged_entries(const struct paged_state *s, int32_t batch, int32_t *out)
{
    const int64_t e = (int64_t)s->cfg.n_layers * batch * s->stride;
    if (e > INT32_MAX / 2)
        return KV_ERR_OVERFLOW;
    *out = (int32_t)e;
    return KV_OK;
}

static enum kv_status paged_check(const struct kv_cache_config *cfg, const void *params,
                                  char *why, size_t why_len)
{
    (void)params;
    if (cfg->max_len >= 1)
        return KV_OK;
    if (why != NULL && why_len > 0)
        snprintf(why, why_len, "paged sizes its block tables from --max-len: give one");
    return KV_ERR_INVALID;
}

static enum kv_dtype paged_dtype(const void *params)
{
    return (enum kv_dtype)((const struct paged_params *)params)->dtype;
}

/* paged-16, or paged-16-f16 for a 16-bit store */
static int paged_label(const void *params, char *buf, size_t n)
{
    const struct paged_params *p = params;
    char name[32];
    snprintf(name, sizeof name, "paged-%d", p->block);
    return kv_store_dtype_label(name, paged_dtype(params), buf, n);
}

static int paged_describe(const struct kv_cache_config *cfg, const void *params, char *buf,
                          size_t n)
{
    (void)cfg;
    const struct paged_params *p = params;
    const enum kv_dtype dt = paged_dtype(params);
    char rows[24] = "";
    if (dt != KV_DTYPE_F32)
        snprintf(rows, sizeof rows, ", %s rows", kv_type_traits[dt].name);
    if (p->max_blocks > 0)
        return snprintf(buf, n, "%s (blocks of %d tokens, at most %d blocks%s)",
                        kv_strategy_paged.description, p->block, p->max_blocks, rows);
    return snprintf(buf, n, "%s (blocks of %d tokens%s)", kv_strategy_paged.description,
                    p->block, rows);
}

/* Frees the block tables of layers tab[0 .. n). */
static void paged_free_tables(struct paged_layer *tab, int32_t n)
{
    for (int32_t l = 0; l < n; l++) {
        kv_free(tab[l].ids);
        kv_free((void *)tab[l].kp);
        kv_free((void *)tab[l].vp);
        tab[l].ids = NULL;
        tab[l].kp = tab[l].vp = NULL;
    }
}

/* Frees the pool's storage: every block is gone. */
static void paged_free_pool(struct paged_state *s)
{
    for (int32_t i = 0; i < s->n_chunks; i++)
        kv_free(s->chunks[i]);
    s->n_chunks = 0;
    s->n_blocks = 0;
    s->n_free = 0;
    s->used_rows = 0;
}

static void paged_free(void *state)
{
    struct paged_state *s = state;
    if (s->layers != NULL)
        paged_free_tables(s->layers, s->cfg.n_layers);
    if (s->alt != NULL)
        paged_free_tables(s->alt, s->cfg.n_layers);
    kv_free(s->alt);
    paged_free_pool(s);
    kv_free(s->layers);
    kv_free(s->chunks);
    kv_free(s->base);
    kv_free(s->ref);
    kv_free(s->fill);
    kv_free(s->free_ids);
    memset(s, 0, sizeof *s);
}

/* Fresh tables of `batch` sequences for every layer into tab (n_layers);
 * all or nothing. */
static enum kv_status paged_alloc_tables(const struct paged_state *s, int32_t batch,
                                         struct paged_layer *tab)
{
    const size_t n = (size_t)batch * (size_t)s->stride;
    for (int32_t l = 0; l < s->cfg.n_layers; l++) {
        tab[l].ids = kv_alloc_uninit(n * sizeof *tab[l].ids);
        tab[l].kp = kv_alloc(n * sizeof *tab[l].kp);
        tab[l].vp = kv_alloc(n * sizeof *tab[l].vp);
        if (tab[l].ids == NULL || tab[l].kp == NULL || tab[l].vp == NULL) {
            paged_free_tables(tab, l + 1);
            return KV_ERR_NOMEM;
        }
        for (size_t i = 0; i < n; i++)
            tab[l].ids[i] = -1;
    }
    return KV_OK;
}

/* The per-block arrays with room for cap ids (kept contents); all or nothing. */
static enum kv_status paged_grow_ids(struct paged_state *s, int32_t cap)
{
    if (cap <= s->cap_ids)
        return KV_OK;
    char **base = kv_alloc((size_t)cap * sizeof *base);
    int32_t *ref = kv_alloc((size_t)cap * sizeof *ref);
    int32_t *fill = kv_alloc((size_t)cap * sizeof *fill);
    int32_t *fr = kv_alloc((size_t)cap * sizeof *fr);
    if (base == NULL || ref == NULL || fill == NULL || fr == NULL) {
        kv_free(base);
        kv_free(ref);
        kv_free(fill);
        kv_free(fr);
        return KV_ERR_NOMEM;
    }
    if (s->cap_ids > 0) {
        memcpy(base, s->base, (size_t)s->cap_ids * sizeof *base);
        memcpy(ref, s->ref, (size_t)s->cap_ids * sizeof *ref);
        memcpy(fill, s->fill, (size_t)s->cap_ids * sizeof *fill);
        memcpy(fr, s->free_ids, (size_t)s->cap_ids * sizeof *fr);
    }
    kv_free(s->base);
    kv_free(s->ref);
    kv_free(s->fill);
    kv_free(s->free_ids);
    s->base = base;
    s->ref = ref;
    s->fill = fill;
    s->free_ids = fr;
    s->cap_ids = cap;
    return KV_OK;
}

static enum kv_status paged_init(void *state, const struct kv_cache_config *cfg,
                                 const void *params)
{
    struct paged_state *s = state;
    const struct paged_params *p = params;
    s->cfg = *cfg;
    s->block = p->block;
    s->max_blocks = p->max_blocks;
    s->grow = p->grow;
    s->dtype = paged_dtype(params);
    if (s->block < 1 || cfg->max_len < 1 || s->max_blocks < 0 || s->grow < 0 ||
        (unsigned)s->dtype >= KV_DTYPE_COUNT || kv_type_traits[s->dtype].has_qparams)
        return KV_ERR_INVALID;
    s->stride = (int32_t)(((int64_t)cfg->max_len + s->block - 1) / s->block);
    s->cap_batch = cfg->batch;
    s->row_bytes = kv_store_row_bytes_as(cfg, s->dtype);
    int32_t entries;
    size_t f[3] = {(size_t)cfg->n_kv_heads, (size_t)s->block, s->row_bytes};
    if (kv_mul_sizes(&s->half, 3, f) != KV_OK || s->half > (size_t)PTRDIFF_MAX / 4 ||
        paged_entries(s, cfg->batch, &entries) != KV_OK)
        return KV_ERR_OVERFLOW;
    s->layers = kv_alloc((size_t)cfg->n_layers * sizeof *s->layers);
    s->cap_chunks = 64;
    s->chunks = kv_alloc((size_t)s->cap_chunks * sizeof *s->chunks);
    enum kv_status st = s->layers == NULL || s->chunks == NULL ? KV_ERR_NOMEM : KV_OK;
    if (st == KV_OK)
        st = paged_alloc_tables(s, cfg->batch, s->layers);
    if (st == KV_OK)
        st = paged_grow_ids(s, s->max_blocks > 0 && s->max_blocks < entries ? s->max_blocks
                                                                            : entries);
    if (st != KV_OK) {
        if (s->layers != NULL && s->layers[0].ids != NULL)
            paged_free_tables(s->layers, cfg->n_layers);
        kv_free(s->layers);
        kv_free(s->chunks);
        kv_free(s->base);
        kv_free(s->ref);
        kv_free(s->fill);
        kv_free(s->free_ids);
        memset(s, 0, sizeof *s);
        return st;
    }
    return KV_OK;
}

/* Forgets every token and frees the pool (a reset cache is a new one). */
static void paged_reset(void *state)
{
    struct paged_state *s = state;
    for (int32_t l = 0; l < s->cfg.n_layers; l++) {
        struct paged_layer *L = &s->layers[l];
        const size_t n = (size_t)s->cap_batch * (size_t)s->stride;
        for (size_t i = 0; i < n; i++) {
            L->ids[i] = -1;
            L->kp[i] = L->vp[i] = NULL;
        }
        L->len = 0;
    }
    paged_free_pool(s);
    s->copied = s->cow = 0;
}

/* ------------------------------------------------------------------------ */
/* The pool                                                                 */

/* At least `need` free blocks, growing the pool by one chunk if it must:
 * KV_ERR_FULL past --max-blocks, KV_ERR_NOMEM; nothing changes on failure. */
static enum kv_status pool_reserve(struct paged_state *s, int32_t need)
{
    if (s->n_free >= need)
        return KV_OK;
    const int32_t short_by = need - s->n_free;
    int32_t grow = s->grow > 0 ? s->grow
                   : s->n_blocks / 4 > PAGED_MIN_CHUNK ? s->n_blocks / 4 : PAGED_MIN_CHUNK;
    if (grow < short_by)
        grow = short_by;
    int32_t limit = s->cap_ids; /* never more blocks than the tables can use */
    if (s->max_blocks > 0 && s->max_blocks < limit)
        limit = s->max_blocks;
    if (grow > limit - s->n_blocks)
        grow = limit - s->n_blocks;
    if (grow < short_by)
        return KV_ERR_FULL;
    if (s->n_chunks == s->cap_chunks) {
        char **nc = kv_alloc((size_t)s->cap_chunks * 2 * sizeof *nc);
        if (nc == NULL)
            return KV_ERR_NOMEM;
        memcpy(nc, s->chunks, (size_t)s->n_chunks * sizeof *nc);
        kv_free(s->chunks);
        s->chunks = nc;
        s->cap_chunks *= 2;
    }
    char *chunk = kv_alloc_uninit((size_t)grow * block_bytes(s)); /* rows are written before read */
    if (chunk == NULL)
        return KV_ERR_NOMEM;
    s->chunks[s->n_chunks++] = chunk;
    /* pushed in reverse, so blocks come out in address order */
    for (int32_t j = grow - 1; j >= 0; j--) {
        const int32_t id = s->n_blocks + j;
        s->base[id] = chunk + (size_t)j * block_bytes(s);
        s->ref[id] = 0;
        s->fill[id] = 0;
        s->free_ids[s->n_free++] = id;
    }
    s->n_blocks += grow;
    return KV_OK;
}

static int32_t pool_take(struct paged_state *s)
{
    KV_ASSERT(s->n_free > 0);
    const int32_t id = s->free_ids[--s->n_free];
    s->ref[id] = 1;
    s->fill[id] = 0;
    return id;
}

/* One reference less; the block goes back to the free list at zero. */
static void pool_unref(struct paged_state *s, int32_t id)
{
    KV_ASSERT(id >= 0 && id < s->n_blocks && s->ref[id] > 0);
    if (--s->ref[id] > 0)
        return;
    s->used_rows -= (size_t)s->fill[id];
    s->fill[id] = 0;
    s->free_ids[s->n_free++] = id;
}

/* A table entry that reads another cache's block (borrow). */
#define BORROWED (-2)

/* Table entry i of sequence b of layer L <- block id (or -1). */
static void table_set(const struct paged_state *s, struct paged_layer *L, int32_t b, int32_t i,
                      int32_t id)
{
    const size_t e = (size_t)b * (size_t)s->stride + (size_t)i;
    L->ids[e] = id;
    L->kp[e] = id >= 0 ? s->base[id] : NULL;
    L->vp[e] = id >= 0 ? s->base[id] + s->half : NULL;
}

/* Row r of kv head h of block id, K (kv 0) or V (kv 1). */
static char *block_row(const struct paged_state *s, int32_t id, int kv, int32_t h, int32_t r)
{
    return s->base[id] + (size_t)kv * s->half +
           ((size_t)h * (size_t)s->block + (size_t)r) * s->row_bytes;
}

/* A row of the store <- head_dim floats of the model, copied (f32) or
 * rounded (f16, bf16: the dtype's from_float_row). */
static void block_put(const struct paged_state *s, char *dst, const float *x)
{
    if (s->dtype == KV_DTYPE_F32)
        memcpy(dst, x, s->row_bytes);
    else
        kv_type_traits[s->dtype].from_float_row(dst, NULL, x, s->cfg.head_dim, 1);
}

/* Block dst of pool d <- the first `rows` rows of block src of pool s
 * (the same pool, or a fork's source), K and V, every head. */
static void block_copy_rows(const struct paged_state *d, int32_t dst, const struct paged_state *s,
                            int32_t src, int32_t rows)
{
    for (int kv = 0; kv < 2; kv++)
        for (int32_t h = 0; h < s->cfg.n_kv_heads; h++)
            memcpy(block_row(d, dst, kv, h, 0), block_row(s, src, kv, h, 0),
                   (size_t)rows * s->row_bytes);
}

/* Block dst <- the first `rows` rows of the block whose K and V pages are
 * kp and vp (a borrowed block: the same layout, another cache's pool). */
static void block_copy_pages(const struct paged_state *d, int32_t dst, const void *kp,
                             const void *vp, int32_t rows)
{
    for (int32_t h = 0; h < d->cfg.n_kv_heads; h++) {
        const size_t at = (size_t)h * (size_t)d->block * d->row_bytes;
        memcpy(block_row(d, dst, 0, h, 0), (const char *)kp + at, (size_t)rows * d->row_bytes);
        memcpy(block_row(d, dst, 1, h, 0), (const char *)vp + at, (size_t)rows * d->row_bytes);
    }
}

/* Entry i of sequence b of layer L, borrowed, becomes a block of its own
 * with the borrowed block's first rows copied; the block comes from the
 * free list, which the caller reserved. */
static int32_t own_borrowed(struct paged_state *s, struct paged_layer *L, int32_t b, int32_t i,
                            int32_t rows)
{
    const size_t e = (size_t)b * (size_t)s->stride + (size_t)i;
    const int32_t id = pool_take(s);
    block_copy_pages(s, id, L->kp[e], L->vp[e], rows);
    s->fill[id] = rows;
    s->used_rows += (size_t)rows;
    const size_t bytes = (size_t)rows * 2 * (size_t)s->cfg.n_kv_heads * s->row_bytes;
    s->cow += bytes;
    s->copied += bytes;
    table_set(s, L, b, i, id);
    return id;
}

/* ------------------------------------------------------------------------ */
/* Update                                                                   */

/*
 * Blocks the next n tokens of layer L take from the pool: a new block each
 * time a sequence crosses into one, plus, for each shared partly filled last
 * block, a copy for every sharer but the last to write (who then owns it):
 * ref - 1 copies per distinct block. A block sits at one index of one
 * layer, so its references are exactly its entries at that index; distinct
 * blocks are found by marking fill (negated) for the count and unmarking.
 */
static int32_t blocks_needed(struct paged_state *s, const struct paged_layer *L, int32_t n)
{
    const int32_t len = L->len, B = s->block;
    const int32_t have = (len + B - 1) / B, want = (len + n + B - 1) / B;
    int32_t need = (want - have) * s->cfg.batch;
    if (len % B == 0)
        return need;
    const int32_t *last = L->ids + len / B; /* sequence b's: last[b * stride] */
    for (int32_t b = 0; b < s->cfg.batch; b++) {
        const int32_t id = last[(size_t)b * s->stride];
        if (id == BORROWED)
            need++;
        else if (s->ref[id] > 1 && s->fill[id] >= 0) {
            need += s->ref[id] - 1;
            s->fill[id] = -s->fill[id] - 1;
        }
    }
    for (int32_t b = 0; b < s->cfg.batch; b++) {
        const int32_t id = last[(size_t)b * s->stride];
        if (id >= 0 && s->fill[id] < 0)
            s->fill[id] = -s->fill[id] - 1;
    }
    return need;
}

static enum kv_status paged_update(void *state, int32_t layer, const float *k_new,
                                   const float *v_new, int32_t n_new, int32_t pos0)
{
    struct paged_state *s = state;
    struct paged_layer *L = &s->layers[layer];
    if (pos0 != L->len)
        return KV_ERR_INVALID;
    if (n_new > s->cfg.max_len - L->len)
        return KV_ERR_FULL;
    /* layer 0 reserves the whole step (every layer at this length takes
     * the same tokens), so an exhausted pool refuses before any layer is
     * written; the later layers then find their blocks free */
    int32_t need = 0;
    for (int32_t l = layer == 0 ? 0 : layer; l < (layer == 0 ? s->cfg.n_layers : layer + 1); l++)
        if (s->layers[l].len == pos0)
            need += blocks_needed(s, &s->layers[l], n_new);
    enum kv_status st = pool_reserve(s, need);
    if (st != KV_OK)
        return st;
    const int32_t B = s->block, H = s->cfg.n_kv_heads;
    const size_t tok_row = (size_t)H * (size_t)s->cfg.head_dim; /* floats per token */
    for (int32_t b = 0; b < s->cfg.batch; b++) {
        int32_t t = L->len, done = 0;
        while (done < n_new) {
            const int32_t i = t / B, off = t % B;
            int32_t id;
            if (off == 0) {
                id = pool_take(s);
                table_set(s, L, b, i, id);
            } else {
                id = L->ids[(size_t)b * s->stride + (size_t)i];
                if (id == BORROWED)
                    id = own_borrowed(s, L, b, i, off);
                else if (s->ref[id] > 1) { /* copy-on-write of a shared block */
                    const int32_t own = pool_take(s);
                    block_copy_rows(s, own, s, id, off);
                    s->fill[own] = off;
                    s->used_rows += (size_t)off;
                    const size_t bytes = (size_t)off * 2 * (size_t)H * s->row_bytes;
                    s->cow += bytes;
                    s->copied += bytes;
                    pool_unref(s, id);
                    table_set(s, L, b, i, own);
                    id = own;
                }
            }
            const int32_t cnt = B - off < n_new - done ? B - off : n_new - done;
            for (int32_t j = 0; j < cnt; j++) {
                const size_t src = ((size_t)b * (size_t)n_new + (size_t)(done + j)) * tok_row;
                for (int32_t h = 0; h < H; h++) {
                    block_put(s, block_row(s, id, 0, h, off + j),
                              k_new + src + (size_t)h * s->cfg.head_dim);
                    block_put(s, block_row(s, id, 1, h, off + j),
                              v_new + src + (size_t)h * s->cfg.head_dim);
                }
            }
            s->fill[id] = off + cnt;
            s->used_rows += (size_t)cnt;
            t += cnt;
            done += cnt;
        }
    }
    L->len += n_new;
    s->copied += (size_t)n_new * (size_t)s->cfg.batch * 2 * (size_t)H * s->row_bytes;
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* View and accounting                                                      */

static int32_t paged_view(const void *state, int32_t layer, struct kv_span *spans,
                          struct kv_mask *mask)
{
    (void)mask;
    const struct paged_state *s = state;
    const struct paged_layer *L = &s->layers[layer];
    if (L->len == 0)
        return 0;
    const struct kv_tensor side = {.dtype = s->dtype, .row_stride = s->row_bytes,
                                   .head_stride = (size_t)s->block * s->row_bytes,
                                   .seq_stride = 0, .table_stride = (size_t)s->stride};
    spans[0] = (struct kv_span){.k = side, .v = side, .n_tokens = L->len, .pos0 = 0,
                                .page_tokens = s->block};
    spans[0].k.pages = L->kp;
    spans[0].v.pages = L->vp;
    return 1;
}

static int32_t paged_seq_len(const void *state, int32_t layer)
{
    const struct paged_state *s = state;
    return s->layers[layer].len;
}

static size_t paged_resident_bytes(const void *state)
{
    const struct paged_state *s = state;
    return (size_t)s->n_blocks * block_bytes(s);
}

static size_t paged_copied_bytes(const void *state)
{
    const struct paged_state *s = state;
    return s->copied;
}

static void paged_stats(const void *state, struct kv_cache_stats *st)
{
    const struct paged_state *s = state;
    const size_t row_kv = 2 * (size_t)s->cfg.n_kv_heads * s->row_bytes; /* a token's K+V */
    size_t shared_rows = 0;
    for (int32_t id = 0; id < s->n_blocks; id++)
        if (s->ref[id] > 1)
            shared_rows += (size_t)s->fill[id];
    st->resident = paged_resident_bytes(s);
    st->tokens = s->used_rows * row_kv;
    st->spare = (size_t)s->n_free * block_bytes(s);
    st->slack = st->resident - st->tokens - st->spare;
    st->shared = shared_rows * row_kv;
    st->cow = s->cow;
}

/* Blocks to hold n tokens per layer for every sequence, none shared, and
 * what the pool's chunked growth may add (the largest chunk: a quarter). */
static enum kv_status paged_bytes_for(const struct kv_cache_config *cfg, const void *params,
                                      int32_t n_tokens, size_t *bytes)
{
    const struct paged_params *p = params;
    const size_t per = ((size_t)n_tokens + (size_t)p->block - 1) / (size_t)p->block;
    size_t used, f[3] = {(size_t)cfg->n_layers, (size_t)cfg->batch, per};
    if (kv_mul_sizes(&used, 3, f) != KV_OK)
        return KV_ERR_OVERFLOW;
    const size_t over = p->grow > 0 ? (size_t)p->grow - 1
                        : used / 4 > PAGED_MIN_CHUNK ? used / 4 : PAGED_MIN_CHUNK;
    size_t blocks = used == 0 ? 0 : used + over;
    if (p->max_blocks > 0 && blocks > (size_t)p->max_blocks)
        blocks = (size_t)p->max_blocks;
    size_t g[5] = {blocks, 2, (size_t)cfg->n_kv_heads, (size_t)p->block,
                   kv_store_row_bytes_as(cfg, paged_dtype(params))};
    return kv_mul_sizes(bytes, 5, g);
}

/* ------------------------------------------------------------------------ */
/* Crop, fork, reorder                                                      */

/* Keeps the first len tokens: blocks past them go back to the pool (if no
 * other sequence holds them), a partly kept last block keeps its rows. */
static enum kv_status paged_crop(void *state, int32_t len)
{
    struct paged_state *s = state;
    const int32_t B = s->block, keep = (len + B - 1) / B;
    for (int32_t l = 0; l < s->cfg.n_layers; l++) {
        struct paged_layer *L = &s->layers[l];
        const int32_t have = (L->len + B - 1) / B;
        for (int32_t b = 0; b < s->cfg.batch; b++) {
            for (int32_t i = keep; i < have; i++) {
                if (L->ids[(size_t)b * s->stride + (size_t)i] >= 0)
                    pool_unref(s, L->ids[(size_t)b * s->stride + (size_t)i]);
                table_set(s, L, b, i, -1);
            }
            if (len % B != 0) { /* the last kept block holds len % B rows now */
                const int32_t id = L->ids[(size_t)b * s->stride + (size_t)(keep - 1)];
                if (id >= 0 && s->fill[id] > len % B) {
                    s->used_rows -= (size_t)(s->fill[id] - len % B);
                    s->fill[id] = len % B;
                }
            }
        }
        L->len = len;
    }
    return KV_OK;
}

/* dst (fresh) <- src's blocks, copied into dst's own pool with the same
 * sharing between its sequences (a block id map); rows copied count. */
static enum kv_status paged_fork(void *dst, const void *src)
{
    struct paged_state *d = dst;
    const struct paged_state *s = src;
    int32_t in_use = s->n_blocks - s->n_free; /* and a copy of each borrowed entry */
    for (int32_t l = 0; l < s->cfg.n_layers; l++)
        for (size_t e = 0; e < (size_t)s->cfg.batch * (size_t)s->stride; e++)
            in_use += s->layers[l].ids[e] == BORROWED;
    int32_t *map = kv_alloc(((size_t)s->n_blocks + 1) * sizeof *map);
    if (map == NULL)
        return KV_ERR_NOMEM;
    enum kv_status st = pool_reserve(d, in_use);
    if (st != KV_OK) {
        kv_free(map);
        return st;
    }
    for (int32_t id = 0; id < s->n_blocks; id++)
        map[id] = -1;
    for (int32_t l = 0; l < s->cfg.n_layers; l++) {
        const struct paged_layer *SL = &s->layers[l];
        struct paged_layer *DL = &d->layers[l];
        const int32_t have = (SL->len + s->block - 1) / s->block;
        for (int32_t b = 0; b < s->cfg.batch; b++)
            for (int32_t i = 0; i < have; i++) {
                const size_t e = (size_t)b * s->stride + (size_t)i;
                const int32_t id = SL->ids[e];
                if (id == BORROWED) { /* a fork owns every row it reads */
                    const int32_t own = pool_take(d);
                    const int32_t rows = SL->len - i * s->block < s->block ? SL->len - i * s->block
                                                                          : s->block;
                    block_copy_pages(d, own, SL->kp[e], SL->vp[e], rows);
                    d->fill[own] = rows;
                    d->used_rows += (size_t)rows;
                    d->copied += (size_t)rows * 2 * (size_t)s->cfg.n_kv_heads * s->row_bytes;
                    table_set(d, DL, b, i, own);
                    continue;
                }
                if (map[id] < 0) {
                    map[id] = pool_take(d);
                    block_copy_rows(d, map[id], s, id, s->fill[id]);
                    d->fill[map[id]] = s->fill[id];
                    d->used_rows += (size_t)s->fill[id];
                    d->copied += (size_t)s->fill[id] * 2 * (size_t)s->cfg.n_kv_heads * s->row_bytes;
                } else {
                    d->ref[map[id]]++;
                }
                table_set(d, DL, b, i, map[id]);
            }
        DL->len = SL->len;
    }
    kv_free(map);
    return KV_OK;
}

/*
 * Sequence b <- sequence src[b] for b < n: table entries copied and
 * references counted, no row moves. The new tables are the spare set
 * (s->alt, cleared) when the batch fits the tables' room, swapped in after,
 * so a beam step allocates nothing; otherwise (the first reorder, or a
 * batch past the room) new tables, and room in the per-block arrays, are
 * allocated first, so KV_ERR_NOMEM leaves the cache as it was.
 */
static enum kv_status paged_reorder(void *state, const int32_t *src, int32_t n)
{
    struct paged_state *s = state;
    const int32_t L_n = s->cfg.n_layers;
    const int32_t cap = n > s->cap_batch ? n : s->cap_batch;
    const int reuse = cap == s->cap_batch; /* the old tables become the spare set */
    struct paged_layer *tab = reuse ? s->alt : NULL;
    if (tab != NULL) {
        const size_t e = (size_t)cap * (size_t)s->stride;
        for (int32_t l = 0; l < L_n; l++)
            for (size_t i = 0; i < e; i++) {
                tab[l].ids[i] = -1;
                tab[l].kp[i] = tab[l].vp[i] = NULL;
            }
    } else {
        int32_t entries;
        if (paged_entries(s, cap, &entries) != KV_OK)
            return KV_ERR_OVERFLOW;
        tab = kv_alloc((size_t)L_n * sizeof *tab);
        if (tab == NULL)
            return KV_ERR_NOMEM;
        enum kv_status st = paged_alloc_tables(s, cap, tab);
        if (st == KV_OK) {
            const int32_t want =
                s->max_blocks > 0 && s->max_blocks < entries ? s->max_blocks : entries;
            st = paged_grow_ids(s, want);
            if (st != KV_OK)
                paged_free_tables(tab, L_n);
        }
        if (st != KV_OK) {
            kv_free(tab);
            return st;
        }
    }
    const int32_t B = s->block;
    for (int32_t l = 0; l < L_n; l++) {
        struct paged_layer *L = &s->layers[l];
        const int32_t have = (L->len + B - 1) / B;
        for (int32_t b = 0; b < n; b++) /* the new references first */
            for (int32_t i = 0; i < have; i++) {
                const size_t e = (size_t)src[b] * s->stride + (size_t)i;
                const int32_t id = L->ids[e];
                if (id == BORROWED) {
                    const size_t f = (size_t)b * s->stride + (size_t)i;
                    tab[l].ids[f] = BORROWED;
                    tab[l].kp[f] = L->kp[e];
                    tab[l].vp[f] = L->vp[e];
                    continue;
                }
                s->ref[id]++;
                table_set(s, &tab[l], b, i, id);
            }
        for (int32_t b = 0; b < s->cfg.batch; b++) /* then the old ones go */
            for (int32_t i = 0; i < have; i++)
                if (L->ids[(size_t)b * s->stride + (size_t)i] >= 0)
                    pool_unref(s, L->ids[(size_t)b * s->stride + (size_t)i]);
        tab[l].len = L->len;
    }
    if (reuse) {
        for (int32_t l = 0; l < L_n; l++) { /* swap: the old tables are the spare set */
            const struct paged_layer old = s->layers[l];
            s->layers[l] = tab[l];
            tab[l] = old;
        }
        s->alt = tab;
    } else {
        paged_free_tables(s->layers, L_n);
        memcpy(s->layers, tab, (size_t)L_n * sizeof *tab);
        kv_free(tab);
        if (s->alt != NULL) { /* sized for the old room */
            paged_free_tables(s->alt, L_n);
            kv_free(s->alt);
            s->alt = NULL;
        }
    }
    s->cap_batch = cap;
    s->cfg.batch = n;
    return KV_OK;
}

/* dst (fresh) <- src's first n tokens of sequence 0 in every sequence: its
 * full blocks borrowed, the rest copied into one block of dst's own. */
static enum kv_status paged_borrow(void *dst, const void *src, int32_t n, int32_t *borrowed)
{
    struct paged_state *d = dst;
    const struct paged_state *s = src;
    const int32_t B = d->block, full = n / B, rest = n % B;
    if (s->block != B || s->dtype != d->dtype || n > d->cfg.max_len)
        return KV_ERR_INVALID;
    if (rest > 0) {
        enum kv_status st = pool_reserve(d, d->cfg.n_layers * d->cfg.batch);
        if (st != KV_OK)
            return st;
    }
    for (int32_t l = 0; l < d->cfg.n_layers; l++) {
        const struct paged_layer *SL = &s->layers[l];
        struct paged_layer *DL = &d->layers[l];
        for (int32_t b = 0; b < d->cfg.batch; b++)
            for (int32_t i = 0; i < full + (rest > 0); i++) {
                const size_t f = (size_t)b * d->stride + (size_t)i;
                DL->ids[f] = BORROWED;
                DL->kp[f] = SL->kp[i];
                DL->vp[f] = SL->vp[i];
                if (i == full) /* the partly filled block: copied */
                    own_borrowed(d, DL, b, i, rest);
            }
        DL->len = n;
    }
    *borrowed = full * B;
    return KV_OK;
}

static int32_t paged_borrowable(const void *params, int32_t n)
{
    const struct paged_params *p = params;
    return n - n % p->block;
}

/* ------------------------------------------------------------------------ */
/* A picture for people                                                     */

/*
 *   pool: 12 blocks of 4 tokens (9 in use, 3 free), 2 shared, copy-on-write 512 B
 *   seq 0: [0 1 2* 5]     (blocks in table order; * shared, refs in brackets)
 */
static int paged_show(const void *state, int32_t layer, char *buf, size_t n)
{
    const struct paged_state *s = state;
    const struct paged_layer *L = &s->layers[layer];
    int32_t shared = 0;
    for (int32_t id = 0; id < s->n_blocks; id++)
        shared += s->ref[id] > 1;
    size_t w = 0;
#define OUT(...)                                                                             \
    do {                                                                                     \
        int r_ = snprintf(buf + (w < n ? w : n), w < n ? n - w : 0, __VA_ARGS__);            \
        if (r_ > 0)                                                                          \
            w += (size_t)r_;                                                                 \
    } while (0)
    OUT("pool: %d blocks of %d tokens (%d in use, %d free), %d shared, %zu bytes copied on "
        "write\n", s->n_blocks, s->block, s->n_blocks - s->n_free, s->n_free, shared, s->cow);
    const int32_t have = (L->len + s->block - 1) / s->block;
    for (int32_t b = 0; b < s->cfg.batch; b++) {
        OUT("layer %d seq %d:", layer, b);
        for (int32_t i = 0; i < have; i++) {
            const int32_t id = L->ids[(size_t)b * s->stride + (size_t)i];
            const int32_t rows = i + 1 < have ? s->block : L->len - i * s->block;
            if (id == BORROWED)
                OUT(" b");
            else if (s->ref[id] > 1)
                OUT(" %d(x%d)", id, s->ref[id]);
            else
                OUT(" %d", id);
            if (rows < s->block)
                OUT("[%d/%d]", rows, s->block);
        }
        OUT("\n");
    }
#undef OUT
    return (int)w;
}

/* ------------------------------------------------------------------------ */

const struct kv_strategy_ops kv_strategy_paged = {
    .name = "paged",
    .description = "blocks from a pool shared by the batch, a block table per sequence, "
                   "shared blocks copied on write",
    .caps = KV_CAP_KEEPS_HISTORY | KV_CAP_CHUNKED_APPEND | KV_CAP_BOUNDED | KV_CAP_CROP |
            KV_CAP_FORK | KV_CAP_REORDER | KV_CAP_BORROW,
    .params = paged_param_table,
    .n_params = (int32_t)(sizeof paged_param_table / sizeof paged_param_table[0]),
    .params_size = sizeof(struct paged_params),
    .presets = paged_presets,
    .n_presets = (int32_t)(sizeof paged_presets / sizeof paged_presets[0]),
    .state_size = sizeof(struct paged_state),
    .check = paged_check,
    .describe = paged_describe,
    .label = paged_label,
    .dtype = paged_dtype,
    .bytes_for = paged_bytes_for,
    .init = paged_init,
    .free = paged_free,
    .update = paged_update,
    .view = paged_view,
    .seq_len = paged_seq_len,
    .resident_bytes = paged_resident_bytes,
    .copied_bytes = paged_copied_bytes,
    .reset = paged_reset,
    .stats = paged_stats,
    .show = paged_show,
    .crop = paged_crop,
    .fork = paged_fork,
    .reorder = paged_reorder,
    .borrow = paged_borrow,
    .borrowable = paged_borrowable,
};

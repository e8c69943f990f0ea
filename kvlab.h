/*
 * kvlab.h - the public interface of libkvlab in one include.
 *
 *   #include <kvlab/kvlab.h>
 *   cc prog.c $(pkg-config --cflags --libs kvlab)
 *
 * libkvlab holds the attention kernels and their scalar reference
 * (kernels/), the cache strategies and their registry (strategies/) and the
 * decoder with its generation modes and its checkpoint and tokenizer readers
 * (bench/model/kv_model.h, checkpoint.h, tokenizer.h); the kvlab command line is
 * not part of it. `make install` puts this file and those headers under
 * $(PREFIX)/include/kvlab/ in the source tree's layout, so their relative
 * includes hold there too. The internal headers (the kernel's
 * kv_attention_impl.h, kv_rows.h, kv_simd.h, kv_half.h, and the strategies'
 * storage helpers kv_store.h) are not installed.
 *
 * The contract of every function these headers declare: an argument a
 * caller can pass (a NULL pointer, an enum outside its range, a negative or
 * overflowing count, params that do not match a view) gets an error code
 * (enum kv_status; kv_status_str says which kind) or the neutral value its
 * comment names, never an abort or a read out of bounds. The library holds
 * the definition of each one (tests/e2e_linkall.sh links a program calling
 * all of them against the installed archive alone).
 */
#ifndef KVLAB_H
#define KVLAB_H

#include "kernels/kv_common.h"
#include "kernels/kv_attention.h"
#include "kernels/kv_quant.h"
#include "kernels/kv_ops.h"
#include "strategies/strategy.h"
#include "bench/model/kv_model.h"
#include "bench/model/checkpoint.h"
#include "bench/model/tokenizer.h"

#endif

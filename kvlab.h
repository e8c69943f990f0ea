/*
 * kvlab.h - the public interface of libkvlab in one include.
 *
 *   #include <kvlab/kvlab.h>
 *   cc prog.c $(pkg-config --cflags --libs kvlab)
 *
 * libkvlab holds the attention kernels and their scalar reference
 * (kernels/), the cache strategies and their registry (strategies/) and the
 * decoder with its checkpoint and tokenizer readers (bench/kv_model.h,
 * checkpoint.h, tokenizer.h); the kvlab command line is not part of it.
 * `make install` puts this file and those headers under
 * $(PREFIX)/include/kvlab/ in the source tree's layout, so their relative
 * includes hold there too. The kernel's internal headers (kv_attention_impl.h,
 * kv_rows.h, kv_simd.h) are not installed.
 */
#ifndef KVLAB_H
#define KVLAB_H

#include "kernels/kv_common.h"
#include "kernels/kv_attention.h"
#include "kernels/kv_quant.h"
#include "kernels/kv_ops.h"
#include "strategies/strategy.h"
#include "strategies/kv_store.h"
#include "bench/kv_model.h"
#include "bench/checkpoint.h"
#include "bench/tokenizer.h"

#endif

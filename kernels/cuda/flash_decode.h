// Decoding in the flash-attention family (kernels/cuda/flash_decode.cu): the query-row kernel for a
// step of incremental decoding, and the split-key machinery that kernels/cuda/flash_attention.cu's
// decoding tile shares with it.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "kernels/cuda/common.cuh"

namespace define::kernels::DEFINE_CUDA_NS {

// How many blocks split the keys of a decoding launch of `blocks` blocks over `keys` keys that a
// block takes `tile` at a time (1: no split).
int flash_decode_splits(std::int64_t blocks, std::int64_t keys, int tile);

// Merges the splits' partial rows: part_acc [splits][rows][dv] unnormalised, part_max_sum
// [splits][rows][2] (the running max and sum of each), into out [rows][dv] and lse [rows].
void launch_flash_decode_merge(const char* op, const float* part_acc, const float* part_max_sum, float* out, float* lse,
                               std::int64_t rows, int splits, int dv);

// The forward of kernels/contracts/flash_attention.inc for one query row a head (q [B, H, 1, d])
// without dropout, by the query-row kernel: q, k, v and out of one dtype (float32, float16 or
// bfloat16, read as they are, out rounded once), lse float32. Returns false, having done nothing,
// for other shapes (the decoding tile of flash_attention.cu takes them).
bool flash_decode_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                          const Tensor& key_padding, bool causal, double p, double scale);

// The same for the relative attention of kernels/flash_rel_attention.h (float32; its 16-bit inputs
// arrive widened): one query row a head, no dropout; false, having done nothing, otherwise.
bool flash_rel_decode_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& r, const Tensor& u,
                              const Tensor& w, const Tensor& out, const Tensor& lse, std::int64_t window, double p,
                              double scale);

}  // namespace define::kernels::DEFINE_CUDA_NS

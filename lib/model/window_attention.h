#pragma once
// at::Tensor front end of the window attention kernels (kernels/attention_kernels.h):
// scaled_dot_product_attention with an additive bias, reading only the key chunks
// the bias leaves open; few query vectors per K/V head on CUDA cores, more on
// tensor cores (16-bit types). The transformer uses it on a GPU where it takes the
// shapes, unless SJD_WINDOW_ATTENTION=0 (SJD_WIDE_WINDOW_ATTENTION=0: the tensor
// cores' alone); tests/cuda/test_window_attention_cuda.cpp holds it to float64
// attention and PyTorch's. In a build without CUDA it takes nothing.
#include <ATen/ATen.h>

namespace sjd::model {

// Whether window_attention runs these: a CUDA build; q [rows, heads, W, D] with D a power of two from
// 8 to 128 (every model's here), and heads / kv_heads x W at most 16 (CUDA cores, any floating type)
// or more in bfloat16 / float16 with D from 16 (tensor cores); keys and values [rows, kv_heads, S, D]
// of one layout;
// bias [rows, 1, W, S]; all of one floating dtype on one GPU, last dimensions contiguous, rows
// 16-byte aligned.
bool window_attention_takes(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values,
                            const at::Tensor& bias);

// Whether such a step runs on tensor cores (more than 16 query vectors per K/V head), not CUDA cores.
bool window_attention_on_tensor_cores(const at::Tensor& q, const at::Tensor& keys);

// softmax(q k^T / sqrt(D) + bias) v as [rows, heads, W, D], a transposed view of [rows, W, heads, D]
// memory (the output projection reads it without a copy).
at::Tensor window_attention(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values,
                            const at::Tensor& bias);

}  // namespace sjd::model

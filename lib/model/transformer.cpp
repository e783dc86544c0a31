#include "model/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>

#include <ATen/Context.h>
#include <ATen/SDPBackend.h>
#include <c10/core/InferenceMode.h>

#include "io/device_transfer.h"
#include "model/attention_bias.h"
#include "model/fused_layer_ops.h"
#include "model/norms.h"
#include "model/window_attention.h"

namespace sjd::model {
namespace {

at::Tensor host_long(const std::vector<int64_t>& values, at::IntArrayRef shape, at::Device device) {
  // A read-only view of the host buffer (no copy on a CPU model; the buffer outlives the forward).
  return io::upload(at::from_blob(const_cast<int64_t*>(values.data()), shape, at::TensorOptions().dtype(at::kLong)),
                    device);
}

}  // namespace

// MKL repacks a transposed right-hand matrix on every call, which for the few
// rows of a decode step costs as much as the multiplication; stored input-major
// ([in, out], contiguous) the same projections run 1.3-1.6x faster at 16-32 rows
// (docs/benchmarks.md). cuBLAS reads either layout, so weights on other devices
// keep the checkpoint's [out, in] (on an H100 input-major was 5% faster for
// Lumina 7B's matmuls alone and no faster for Emu3's at two rows:
// scripts/bench_matmul_floor.py). The tensors are replaced one at a time: a
// model never holds two copies of its weights.
Transformer::Transformer(TransformerConfig config, TransformerWeights weights)
    : config_(std::move(config)), weights_(std::move(weights)), input_major_(weights_.embed.is_cpu()) {
  // On by default on a GPU (a Lumina 7B AR step on an H100: 10.3-10.6 ms against 14.8-25.6 ms eager,
  // docs/benchmarks.md); SJD_CUDA_GRAPHS=0 runs every forward eagerly.
  const char* graphs = std::getenv("SJD_CUDA_GRAPHS");
  use_step_graphs(graphs == nullptr || std::string(graphs) != "0");
  const char* fused = std::getenv("SJD_FUSED_LAYER_OPS");
  use_fused_layer_ops(fused == nullptr || std::string(fused) != "0");
  const char* window = std::getenv("SJD_WINDOW_ATTENTION");
  use_window_attention(window == nullptr || std::string(window) != "0");
  const char* wide = std::getenv("SJD_WIDE_WINDOW_ATTENTION");
  use_wide_window_attention(wide == nullptr || std::string(wide) != "0");
  // SJD_SDPA_CUDNN=0 keeps PyTorch's dispatcher from picking cuDNN's attention, so a device
  // session can compare it with the memory-efficient kernel (docs/gpu.md).
  const char* cudnn = std::getenv("SJD_SDPA_CUDNN");
  if (cudnn != nullptr && std::string(cudnn) == "0") at::globalContext().setSDPUseCuDNN(false);
  if (!input_major_) return;
  const auto to_input_major = [](at::Tensor& w) { w = w.t().contiguous(); };
  for (LayerWeights& layer : weights_.layers) {
    for (at::Tensor* w : {&layer.qkv, &layer.o, &layer.gate_up, &layer.down}) to_input_major(*w);
  }
  to_input_major(weights_.lm_head);
}

void Transformer::use_fused_layer_ops(bool on) {
  const bool now = on && device().is_cuda() && fused_layer_ops_built();
  if (now != fused_ops_) graphs_.clear();  // they replay the other kernels
  fused_ops_ = now;
}

void Transformer::use_window_attention(bool on) {
  const bool now = on && device().is_cuda();  // a build without CUDA: window_attention_takes says no
  if (now != window_attention_) graphs_.clear();
  window_attention_ = now;
}

void Transformer::use_wide_window_attention(bool on) {
  if (on != wide_window_attention_) graphs_.clear();
  wide_window_attention_ = on;
}

at::Tensor Transformer::project(const at::Tensor& x, const at::Tensor& w) const {
  return input_major_ ? at::matmul(x, w) : at::matmul(x, w.t());
}

at::Tensor Transformer::embed(const at::Tensor& tokens) const {
  return at::embedding(weights_.embed, tokens);
}

void Transformer::restrict_outputs(const std::vector<int64_t>& token_ids) {
  if (token_ids == head_id_list_) return;  // the same head (every decode of a run asks again)
  for (int64_t id : token_ids) {  // before anything changes: a refused list leaves the old head whole
    if (id < 0 || id >= config_.vocab_size) {
      throw std::out_of_range("output head: token id " + std::to_string(id) + " outside the vocabulary of " +
                              std::to_string(config_.vocab_size));
    }
  }
  // The new rows are made (device memory, which can run out) before the head's state changes, so a
  // failed restriction leaves the old head as it was; only the whole head's move to the host comes
  // after, and if that fails the head stays whole on the device, still consistent.
  graphs_.clear();  // they read the old head rows; dropped first, which frees their memory pool
  if (token_ids.empty() || static_cast<int64_t>(token_ids.size()) >= config_.vocab_size) {
    weights_.lm_head = weights_.lm_head.to(device());  // back from the host, if a restriction sent it there
    head_ids_ = at::Tensor();
    head_rows_ = at::Tensor();
    head_id_list_ = token_ids;
    return;
  }
  const at::Tensor ids = at::tensor(token_ids, at::TensorOptions().dtype(at::kLong));
  at::Tensor ids_on_device = ids.to(device());
  at::Tensor rows = weights_.lm_head.index_select(input_major_ ? 1 : 0, ids.to(weights_.lm_head.device()))
                        .contiguous()
                        .to(device());
  head_ids_ = std::move(ids_on_device);
  head_rows_ = std::move(rows);
  head_id_list_ = token_ids;
  // On a GPU the whole head is not read while it is restricted: it waits in host memory for
  // another restriction, which frees device memory for the KV cache and batches (Lumina 7B:
  // 0.47 GB; Emu3 8B: 1.2 GB).
  if (!device().is_cpu()) weights_.lm_head = weights_.lm_head.to(at::kCPU);
}

void Transformer::reserve(int64_t rows, int64_t tokens_per_row, int64_t position_limit) {
  // A cache (and RoPE table) at least as large is kept: compare's methods and seeds reserve a
  // little more or less in turn, and on a GPU each rebuild drops every captured graph, whose
  // captures would then fall in the next run's time. The extra slots are never attended to.
  if (cache_.rows() != rows || cache_.capacity() < tokens_per_row) {
    graphs_.clear();  // they read the old cache
    cache_ = KvCache();  // the old buffers go before the new ones are made: a peak holds one cache
    cache_ = KvCache(config_.num_layers, rows, config_.num_kv_heads, tokens_per_row, config_.head_dim, dtype(),
                     device());
  } else {
    for (int64_t r = 0; r < rows; ++r) cache_.rollback(r, 0);  // the buffers are reused; the lengths restart
  }
  if (rope_.max_position() < position_limit) {
    graphs_.clear();  // they read the old table
    rope_ = RopeTable(config_, position_limit, dtype(), device());
  }
  next_position_.assign(static_cast<size_t>(rows), 0);
  pending_valid_.assign(static_cast<size_t>(rows), 1);
  pending_root_embedding_.assign(static_cast<size_t>(rows), at::Tensor());
  first_root_.assign(static_cast<size_t>(rows), FirstRoot{});
}

void Transformer::release_cache() {
  graphs_.clear();  // they read the cache
  cache_ = KvCache();
}

void Transformer::open_row(int64_t row, const RowPrompt& prompt) {
  c10::InferenceMode inference_mode;  // as commit_rows: the prompt's keys go into the cache in place
  if (prompt.tokens.empty()) throw std::invalid_argument("transformer: a prompt row has no tokens");
  if (row < 0 || row >= cache_.rows()) throw std::out_of_range("transformer: no cache row " + std::to_string(row));
  const size_t r = static_cast<size_t>(row);
  cache_.rollback(row, 0);
  pending_root_embedding_[r] = at::Tensor();
  const int64_t n = static_cast<int64_t>(prompt.tokens.size()) - 1;  // the last token is the first root
  for (int64_t begin = 0; begin < n; begin += kPrefillChunk) {
    const int64_t count = std::min(kPrefillChunk, n - begin);
    std::vector<int64_t> tokens(prompt.tokens.begin() + begin, prompt.tokens.begin() + begin + count);
    std::vector<int64_t> positions(prompt.positions.begin() + begin, prompt.positions.begin() + begin + count);
    std::vector<uint8_t> valid(prompt.key_valid.begin() + begin, prompt.key_valid.begin() + begin + count);
    // Causal within the chunk; a masked prompt key is hidden from later queries but each slot sees itself.
    std::vector<uint8_t> mask(static_cast<size_t>(count * count), 0);
    for (int64_t i = 0; i < count; ++i) {
      for (int64_t j = 0; j <= i; ++j)
        mask[static_cast<size_t>(i * count + j)] = (valid[static_cast<size_t>(j)] || i == j) ? 1 : 0;
    }
    const at::Tensor hidden =
        prompt.embeddings.defined()
            ? prompt.embeddings.narrow(0, begin, count).unsqueeze(0).to(device(), dtype())
            : embed(at::tensor(tokens, at::TensorOptions().dtype(at::kLong)).to(device()).unsqueeze(0));
    forward_hidden({row}, hidden, positions, mask);
    std::vector<int64_t> kept(static_cast<size_t>(count));
    for (int64_t j = 0; j < count; ++j) kept[static_cast<size_t>(j)] = j;
    cache_.commit_row(row, kept, valid);
  }
  next_position_[r] = prompt.positions.back();
  if (prompt.embeddings.defined()) pending_root_embedding_[r] = prompt.embeddings[n].to(device(), dtype());
  pending_valid_[r] = prompt.key_valid.back();
  first_root_[r] = {cache_.length(row), pending_valid_[r], pending_root_embedding_[r]};
}

void Transformer::lay_out_windows(const std::vector<RowWindow>& windows, int64_t width) {
  const size_t cells = windows.size() * static_cast<size_t>(width);
  step_tokens_.resize(cells);
  step_positions_.resize(cells);
  step_mask_.assign(cells * static_cast<size_t>(width), 0);
  for (size_t w = 0; w < windows.size(); ++w) {
    const RowWindow& window = windows[w];
    const DraftTree& nodes = *window.nodes;
    const int64_t base = next_position_[static_cast<size_t>(window.row)];
    int64_t* tokens = step_tokens_.data() + w * width;
    int64_t* positions = step_positions_.data() + w * width;
    const int64_t used = 1 + static_cast<int64_t>(nodes.size());
    // Padding slots (a narrower window than the batch's widest) repeat the root
    // at its position and see only themselves; nothing real attends to them.
    std::fill(tokens, tokens + width, window.root);
    std::fill(positions, positions + width, base);
    for (size_t i = 0; i < nodes.size(); ++i) {
      tokens[i + 1] = nodes.tokens[i];
      positions[i + 1] = base + nodes.depth[i];
    }
    // Slot 0 is the root; node i attends to the root, its ancestors and itself. A root
    // whose key is masked (a placeholder root, e.g. Lumina's unconditional row) is
    // invisible to the draft nodes too.
    uint8_t* m = step_mask_.data() + w * static_cast<size_t>(width * width);
    const bool root_visible = pending_valid_[static_cast<size_t>(window.row)] != 0;
    m[0] = 1;
    for (size_t i = 0; i < nodes.size(); ++i) {
      uint8_t* slot = m + (static_cast<int64_t>(i) + 1) * width;
      slot[0] = root_visible ? 1 : 0;
      for (int a = static_cast<int>(i); a >= 0; a = nodes.parent[static_cast<size_t>(a)]) slot[a + 1] = 1;
    }
    for (int64_t pad = used; pad < width; ++pad) m[pad * width + pad] = 1;
  }
}

at::Tensor Transformer::forward_rows(const std::vector<RowWindow>& windows) {
  int64_t width = 1;
  std::vector<int64_t> rows;
  for (const RowWindow& w : windows) {
    width = std::max<int64_t>(width, 1 + static_cast<int64_t>(w.nodes->size()));
    rows.push_back(w.row);
  }
  const int64_t count = static_cast<int64_t>(windows.size());
  if (graphs_on_) {
    // A graph's window is padded to one of a few widths (StepGraphs::padded_width; the extra slots
    // repeat the root and see only themselves). Where a row's cache has no room for the padding
    // (a batch with one sequence at its end), the step runs eagerly rather than capture a width
    // of its own.
    int64_t room = cache_.capacity();
    for (int64_t r : rows) room = std::min(room, cache_.capacity() - cache_.length(r));
    const int64_t padded = StepGraphs::padded_width(width);
    if (padded <= room && graphable(rows, padded)) {
      lay_out_windows(windows, padded);
      try {
        // The head's logits at the window's own width, then widened.
        return full_width(forward_graphed(rows, padded).narrow(1, 0, width));
      } catch (const StepGraphs::CaptureFailure& e) {  // memory, an op that cannot be captured: eager from now on
        graphs_on_ = false;
        graphs_.clear();
        graphs_failure_ = e.what();
      }
    }
  }
  lay_out_windows(windows, width);
  at::Tensor hidden = embed(host_long(step_tokens_, {count, width}, device()));
  for (int64_t w = 0; w < count; ++w) {  // a root that is still a prompt embedding (LlamaGen's last caption slot)
    const at::Tensor& root = pending_root_embedding_[static_cast<size_t>(rows[static_cast<size_t>(w)])];
    if (root.defined()) hidden[w][0].copy_(root);
  }
  return full_width(forward_hidden(rows, hidden, step_positions_, step_mask_));
}

void Transformer::commit_rows(const std::vector<RowPath>& paths) {
  // The cache may hold inference tensors (a decode reserves it in InferenceMode): moving kept keys
  // writes them in place, which only InferenceMode allows.
  c10::InferenceMode inference_mode;
  std::vector<KvCache::RowCommit> commits;
  for (const RowPath& p : paths) {
    KvCache::RowCommit c{p.row, {0}, {pending_valid_.at(static_cast<size_t>(p.row))}};
    for (int node : *p.path) {
      c.kept.push_back(node + 1);
      c.valid.push_back(1);
    }
    commits.push_back(std::move(c));
  }
  cache_.commit_rows(commits);
  for (const KvCache::RowCommit& c : commits) {
    const size_t r = static_cast<size_t>(c.row);
    next_position_[r] += static_cast<int64_t>(c.kept.size());
    pending_valid_[r] = 1;
    pending_root_embedding_[r] = at::Tensor();
  }
}

void Transformer::rollback(int64_t tokens) {
  for (int64_t r = 0; r < cache_.rows(); ++r) {
    const FirstRoot& first = first_root_[static_cast<size_t>(r)];
    if (cache_.length(r) - tokens < first.cache_length) {
      throw std::invalid_argument("transformer: a rollback of " + std::to_string(tokens) + " tokens reaches into row " +
                                  std::to_string(r) + "'s prompt");
    }
  }
  for (int64_t r = 0; r < cache_.rows(); ++r) {
    const size_t i = static_cast<size_t>(r);
    cache_.rollback(r, cache_.length(r) - tokens);
    next_position_[i] -= tokens;
    // A generated root is a visible token embedded by its id; the first root is the prompt's own.
    const bool at_first_root = cache_.length(r) == first_root_[i].cache_length;
    pending_valid_[i] = at_first_root ? first_root_[i].valid : 1;
    pending_root_embedding_[i] = at_first_root ? first_root_[i].embedding : at::Tensor();
  }
}

at::Tensor Transformer::attention_bias(const std::vector<int64_t>& rows, int64_t width,
                                       const std::vector<uint8_t>& window_mask, int64_t keys_at_least) {
  int64_t longest = 0;
  for (int64_t r : rows) longest = std::max(longest, cache_.length(r));
  BiasShape shape{width, std::max(longest + width, keys_at_least), 0};
  if (device().is_cpu()) {
    shape.stride = shape.keys;
    return host_attention_bias(cache_, rows, shape, window_mask, bias_host_);
  }
  // On a GPU the key count goes up in steps of kKeyBucket (the extra keys are blocked): cuDNN's
  // attention builds a plan per distinct shape, which a count growing every step would rebuild
  // at every step. Each bias row starts at a multiple of 16 elements: the memory-efficient
  // kernel otherwise pads (copies) a misaligned bias in every layer.
  shape.keys = std::max(shape.keys, std::min((shape.keys + kKeyBucket - 1) / kKeyBucket * kKeyBucket,
                                             cache_.capacity()));
  shape.stride = (shape.keys + 15) / 16 * 16;
  const int64_t count = static_cast<int64_t>(rows.size());
  std::vector<int64_t> rows_and_lengths(rows);
  for (int64_t r : rows) rows_and_lengths.push_back(cache_.length(r));
  const at::Tensor both = host_long(rows_and_lengths, {2, count}, device());
  const at::Tensor masks = io::upload(
      at::from_blob(const_cast<uint8_t*>(window_mask.data()), {count, width, width}, at::kByte), device());
  return device_attention_bias(cache_.device_key_valid().index_select(0, both[0]), both[1], masks, shape, dtype());
}

at::Tensor Transformer::attention(int64_t layer, const std::vector<int64_t>& rows, const at::Tensor& h,
                                  const RopeFactors& rope, const at::Tensor& bias, const KvCache::StepSlots& slots) {
  const LayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
  const int64_t batch = h.size(0), width = h.size(1);
  const int64_t heads = config_.num_heads, kv_heads = config_.num_kv_heads, dim = config_.head_dim;
  const at::Tensor qkv = project(h, w.qkv).view({batch, width, heads + 2 * kv_heads, dim});
  at::Tensor q;  // [rows, heads, W, D]
  if (fused_ops_) {
    const QkvPrologue how{heads, kv_heads, config_.qk_norm ? w.qk_norm_w : at::Tensor(),
                          config_.qk_norm ? w.qk_norm_b : at::Tensor(), config_.qk_norm_eps,
                          config_.rope == RopeKind::k2d};
    q = fused_qkv_prologue(qkv, how, rope, cache_, layer, slots);
  } else {
    at::Tensor qk = qkv.narrow(2, 0, heads + kv_heads);  // q and k heads get the same norm and rotation
    const at::Tensor v = qkv.narrow(2, heads + kv_heads, kv_heads);
    if (config_.qk_norm) qk = head_layer_norm(qk, w.qk_norm_w, w.qk_norm_b, config_.qk_norm_eps);
    qk = rope_.apply(qk, rope);
    q = qk.narrow(2, 0, heads).transpose(1, 2);
    cache_.write(layer, slots, qk.narrow(2, heads, kv_heads), v);
  }
  // Each run of consecutive cache rows attends in one call, reading its keys in place: the rows
  // of a batch with finished sequences between live ones are not copied out of the cache. On
  // the CPU a run is also cut where its rows' lengths drift apart, and each part reads only the
  // keys of its own longest row: in a continuous batch a refilled slot starts short, and one
  // call would make it read (and mask) every key of the longest row.
  const bool cut_by_length = device().is_cpu();
  std::vector<at::Tensor> parts;
  for (size_t begin = 0; begin < rows.size();) {
    int64_t shortest = cache_.length(rows[begin]), longest = shortest;
    size_t end = begin + 1;
    for (; end < rows.size() && rows[end] == rows[end - 1] + 1; ++end) {
      const int64_t length = cache_.length(rows[end]);
      if (cut_by_length && std::max(longest, length) - std::min(shortest, length) > kCpuKeySpread) break;
      shortest = std::min(shortest, length);
      longest = std::max(longest, length);
    }
    const int64_t first = static_cast<int64_t>(begin), count = static_cast<int64_t>(end - begin);
    at::Tensor part_bias = bias.narrow(0, first, count);
    if (cut_by_length) part_bias = part_bias.narrow(3, 0, longest + width);  // the later keys are all masked
    parts.push_back(attend(layer, rows[begin], q.narrow(0, first, count), part_bias));
    begin = end;
  }
  const at::Tensor out = parts.size() == 1 ? parts[0] : at::cat(parts, 0);
  return project(out.transpose(1, 2).reshape({batch, width, heads * dim}), w.o);
}

namespace {

std::string sdp_backend_name(int64_t backend) {
  switch (static_cast<at::SDPBackend>(backend)) {
    case at::SDPBackend::math: return "math";
    case at::SDPBackend::flash_attention: return "flash_attention";
    case at::SDPBackend::efficient_attention: return "efficient_attention";
    case at::SDPBackend::cudnn_attention: return "cudnn_attention";
    case at::SDPBackend::overrideable: return "overrideable";
    case at::SDPBackend::error: break;
  }
  return "none (" + std::to_string(backend) + ")";
}

// [rows, kv_heads, S, D] -> [rows, kv_heads * group, S, D]: each K/V head repeated for its query heads.
at::Tensor repeat_heads(const at::Tensor& x, int64_t group) {
  const int64_t rows = x.size(0), heads = x.size(1), count = x.size(2), dim = x.size(3);
  return x.unsqueeze(2).expand({rows, heads, group, count, dim}).reshape({rows, heads * group, count, dim});
}

}  // namespace

void Transformer::choose_attention_kernel(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values,
                                          const at::Tensor& bias) {
  // PyTorch's own dispatch decides (GPU, dtype, head size, bias alignment); asking it with
  // enable_gqa says whether a fused kernel reads grouped K/V in place. Only the math
  // fallback would lose by that, so repeated heads are kept for it.
  const int64_t group = config_.num_heads / config_.num_kv_heads;
  const int64_t math = static_cast<int64_t>(at::SDPBackend::math);
  int64_t backend = at::_fused_sdp_choice(q, keys, values, bias, 0.0, false, std::nullopt, group > 1);
  gqa_in_kernel_ = group > 1 && backend != math;
  if (group > 1 && !gqa_in_kernel_) {
    // The kernel for repeated heads: asked with as many query heads as K/V heads (a view), which
    // the dispatcher judges alike, rather than with a repeated copy of the cache.
    backend = at::_fused_sdp_choice(q.narrow(1, 0, config_.num_kv_heads), keys, values, bias);
  }
  attention_backend_ = sdp_backend_name(backend);
  if (group > 1) attention_backend_ += gqa_in_kernel_ ? ", GQA in the kernel" : ", K/V heads repeated for GQA";
  attention_chosen_ = true;
}

at::Tensor Transformer::attend(int64_t layer, int64_t first_row, const at::Tensor& q, const at::Tensor& bias) {
  const int64_t batch = q.size(0);
  const int64_t group = config_.num_heads / config_.num_kv_heads, dim = config_.head_dim;
  const int64_t count = bias.size(3);
  at::Tensor keys = cache_.keys(layer, first_row, batch, count);  // [rows, kv_heads, S, D]
  at::Tensor values = cache_.values(layer, first_row, batch, count);
  if (!q.is_cpu()) {
    // GPU: the kernel that skips the blocked key chunks (a graph's bias spans the cache's capacity)
    // where it takes the step (float32 only on CUDA cores: up to 16 query vectors per K/V head);
    // otherwise PyTorch's fused attention. Either takes the run's rows in one call, the bias added
    // to the scores.
    if (window_attention_ && window_attention_takes(q, keys, values, bias) &&
        (wide_window_attention_ || !window_attention_on_tensor_cores(q, keys))) {
      if (!attention_chosen_) {
        attention_backend_ = std::string("sjd window attention on ") +
                             (window_attention_on_tensor_cores(q, keys) ? "tensor cores" : "CUDA cores") +
                             " (blocked key chunks skipped)";
      }
      attention_chosen_ = true;
      return model::window_attention(q, keys, values, bias);
    }
    if (!attention_chosen_) choose_attention_kernel(q, keys, values, bias);
    if (gqa_in_kernel_) return at::scaled_dot_product_attention(q, keys, values, bias, 0.0, false, std::nullopt, true);
    if (group > 1) {
      keys = repeat_heads(keys, group);
      values = repeat_heads(values, group);
    }
    return at::scaled_dot_product_attention(q, keys, values, bias);
  }
  // CPU: the exact math path the CPU tests' tolerances were set against.
  if (group > 1) {
    keys = repeat_heads(keys, group);
    values = repeat_heads(values, group);
  }
  const at::Tensor scores = at::matmul(q, keys.transpose(2, 3)) / std::sqrt(static_cast<double>(dim));
  const at::Tensor probs = at::softmax(scores.to(at::kFloat) + bias, -1);  // [rows, heads, W, S]
  return at::matmul(probs.to(values.scalar_type()), values);  // [rows, heads, W, D]
}

at::Tensor Transformer::head_logits(const at::Tensor& x) const {
  return project(x, head_ids_.defined() ? head_rows_ : weights_.lm_head).to(at::kFloat);
}

at::Tensor Transformer::full_width(const at::Tensor& head) const {
  if (!head_ids_.defined()) return head;
  at::Tensor all = at::full({head.size(0), head.size(1), config_.vocab_size}, std::numeric_limits<float>::lowest(),
                            head.options());
  return all.index_copy_(2, head_ids_, head);
}

at::Tensor Transformer::forward_hidden(const std::vector<int64_t>& rows, const at::Tensor& hidden,
                                       const std::vector<int64_t>& positions,
                                       const std::vector<uint8_t>& window_mask) {
  c10::InferenceMode inference_mode;  // no autograd bookkeeping
  const int64_t batch = hidden.size(0), width = hidden.size(1);
  attention_chosen_ = false;  // the kernel is chosen again for this forward's shapes
  if (device().is_cpu()) attention_backend_ = "cpu math path";
  const KvCache::StepSlots slots = cache_.step_slots(rows, width);  // first: it refuses a step past the capacity
  const at::Tensor bias = attention_bias(rows, width, window_mask);
  const RopeFactors rope = rope_.gather(host_long(positions, {batch, width}, device()));
  return run_layers(rows, hidden, rope, bias, slots);
}

bool Transformer::graphable(const std::vector<int64_t>& rows, int64_t width) const {
  if (rows.empty()) return false;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] != rows[0] + static_cast<int64_t>(i)) return false;  // one run of cache rows: one attention call
    if (pending_root_embedding_[static_cast<size_t>(rows[i])].defined()) return false;  // an input vector, not a token
  }
  return graphs_.takes({rows.front(), static_cast<int64_t>(rows.size()), width});
}

at::Tensor Transformer::forward_graphed(const std::vector<int64_t>& rows, int64_t width) {
  c10::InferenceMode inference_mode;
  const int64_t count = static_cast<int64_t>(rows.size());
  // A new shape's kernels are chosen in its eager warm-up run, for the capture's shapes (a
  // bias over the whole capacity); a replay runs those, and the label keeps the last choice.
  const StepGraphs::Shape shape{rows.front(), count, width};
  if (!graphs_.has(shape)) attention_chosen_ = false;
  const KvCache::StepSlots slots = cache_.step_slots(rows, width);
  // The bias spans the cache's whole capacity: a graph's shapes cannot follow the rows' lengths.
  const StepGraphs::Inputs inputs{host_long(step_tokens_, {count, width}, device()),
                                  host_long(step_positions_, {count, width}, device()),
                                  attention_bias(rows, width, step_mask_, cache_.capacity()), slots.rows,
                                  slots.slots};
  // The graph ends at the head's own rows: the full-width logits are filled outside it, so a
  // graph holds [rows, W, V'] floats (Lumina: 8198 of 65536 per slot), not the whole vocabulary.
  return graphs_.run(shape, inputs, [&](const StepGraphs::Inputs& in) {
    return run_layers(rows, embed(in.tokens), rope_.gather(in.positions), in.bias, {in.slot_rows, in.slot_slots});
  });
}

at::Tensor Transformer::run_layers(const std::vector<int64_t>& rows, const at::Tensor& hidden, const RopeFactors& rope,
                                   const at::Tensor& bias, const KvCache::StepSlots& slots) {
  if (fused_ops_) return run_layers_fused(rows, hidden, rope, bias, slots);
  at::Tensor x = hidden;
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    const LayerWeights& w = weights_.layers[static_cast<size_t>(l)];
    x = x + attention(l, rows, rms_norm(x, w.attn_norm, config_.norm_eps), rope, bias, slots);
    const at::Tensor gate_up = project(rms_norm(x, w.mlp_norm, config_.norm_eps), w.gate_up);
    const int64_t inner = config_.intermediate_size;
    x = x + project(at::silu(gate_up.narrow(-1, 0, inner)) * gate_up.narrow(-1, inner, inner), w.down);
  }
  return head_logits(rms_norm(x, weights_.norm, config_.norm_eps));
}

at::Tensor Transformer::run_layers_fused(const std::vector<int64_t>& rows, const at::Tensor& hidden,
                                         const RopeFactors& rope, const at::Tensor& bias,
                                         const KvCache::StepSlots& slots) {
  const std::vector<LayerWeights>& layers = weights_.layers;
  const double eps = config_.norm_eps;
  // The norm after each add is the next one in the stack: the MLP's, the next layer's input
  // norm, and after the last layer the final norm.
  const auto norm_after = [&](size_t l) -> const at::Tensor& {
    return l + 1 < layers.size() ? layers[l + 1].attn_norm : weights_.norm;
  };
  auto [x, normed] = fused_add_rms_norm(hidden.contiguous(), at::Tensor(),
                                        layers.empty() ? weights_.norm : layers[0].attn_norm, eps);
  for (size_t l = 0; l < layers.size(); ++l) {
    const LayerWeights& w = layers[l];
    const at::Tensor attended = attention(static_cast<int64_t>(l), rows, normed, rope, bias, slots);
    std::tie(x, normed) = fused_add_rms_norm(x, attended, w.mlp_norm, eps);
    const at::Tensor gate_up = project(normed, w.gate_up);  // [gate | up]: the loader fused them so
    std::tie(x, normed) = fused_add_rms_norm(x, project(fused_silu_mul(gate_up), w.down), norm_after(l), eps);
  }
  return head_logits(normed);
}

}  // namespace sjd::model

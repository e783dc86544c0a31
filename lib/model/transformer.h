#pragma once
// One LLaMA-family decoder for all three families: RMSNorm, SwiGLU, RoPE (1D
// or 2D), GQA, optional Chameleon qk-norm, fused or separate qkv (resolved at
// load time). Prefill and window steps share one forward over a set of new
// tokens at given positions, attending to the static KV cache through an
// explicit mask (causal chain or draft tree).
//
// Every row (the CFG rows, later a batch) goes through each projection as one
// matmul; the RoPE table is built once per image; the attention bias is built
// once per forward (on the model's device, model/attention_bias.h) and shared by
// every layer. On a GPU attention is PyTorch's fused kernel, given grouped K/V
// as they are when it takes them (Emu3's GQA); the CPU keeps an exact math path.
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "model/kv_cache.h"
#include "model/rope.h"
#include "model/step_graphs.h"
#include "model/token_model.h"
#include "model/transformer_config.h"
#include "model/transformer_weights.h"

namespace sjd::model {

class Transformer : public TokenModel {
 public:
  // Prompts are prefilled in chunks of at most this many tokens, so a long prompt
  // never needs a [heads, T, T] score matrix.
  static constexpr int64_t kPrefillChunk = 256;
  // On a GPU, attention spans a multiple of this many keys (see attention_bias).
  static constexpr int64_t kKeyBucket = 256;
  // On the CPU, rows whose committed lengths differ by more than this attend in separate calls, each
  // call reading the keys of its own longest row (so a row reads at most this many masked keys). The
  // value is an estimate: an extra call's overhead (tens of microseconds) against reading 128 keys'
  // K and V in every layer of the default model; it was not swept.
  static constexpr int64_t kCpuKeySpread = 128;

  Transformer(TransformerConfig config, TransformerWeights weights);

  const TransformerConfig& config() const { return config_; }
  int64_t vocab_size() const override { return config_.vocab_size; }
  // Where the weights, the KV cache and every activation live.
  at::Device device() const override { return weights_.embed.device(); }
  at::ScalarType dtype() const { return weights_.embed.scalar_type(); }

  void reserve(int64_t rows, int64_t tokens_per_row, int64_t position_limit) override;
  void open_row(int64_t row, const RowPrompt& prompt) override;
  at::Tensor forward_rows(const std::vector<RowWindow>& windows) override;
  void commit_rows(const std::vector<RowPath>& paths) override;
  // Only these token ids get logits from the output head; every other logit is
  // the lowest float (the pipeline masks those tokens anyway). Empty: all. On a GPU
  // the whole head then waits in host memory until a restriction needs it again.
  void restrict_outputs(const std::vector<int64_t>& token_ids) override;
  const std::vector<int64_t>& output_ids() const override {
    return head_ids_.defined() ? head_id_list_ : TokenModel::output_ids();
  }
  // Drops the last `tokens` committed tokens of every row; the next window's
  // root is then the first dropped token again (the prompt's last token with
  // its key validity and input vector, when that is where a row lands). A row
  // cannot go back into its prompt: that throws.
  void rollback(int64_t tokens);

  // Embeddings of `tokens` (int64, any shape) -> [..., H].
  at::Tensor embed(const at::Tensor& tokens) const;

  KvCache& cache() { return cache_; }

  // The attention kernel the last forward ran: "cpu math path" on the CPU; on a GPU the
  // scaled_dot_product_attention backend PyTorch chose for its shapes and bias (e.g.
  // "efficient_attention"), and for GQA whether the kernel took the grouped K/V as they
  // are ("GQA in the kernel") or they were repeated to every query head first.
  const std::string& attention_backend() const { return attention_backend_; }

  // GPU only (on at construction unless SJD_CUDA_GRAPHS=0): window forwards of up to
  // StepGraphs::kMaxShapes shapes replayed from CUDA graphs (model/step_graphs.h); other shapes,
  // and rows that are not one run of the cache, run eagerly.
  void use_step_graphs(bool on) { graphs_on_ = on && device().is_cuda(); }
  int64_t window_slots(int64_t width) const override { return graphs_on_ ? StepGraphs::padded_width(width) : width; }
  bool step_graphs() const { return graphs_on_; }
  // GPU only (on at construction unless SJD_FUSED_LAYER_OPS=0, and only in a CUDA build): the
  // residual adds fused with the norms after them, SwiGLU's product, and the attention prologue
  // (qk-norm, RoPE, K/V write) as one kernel each (model/fused_layer_ops.h); off: the ATen ops.
  void use_fused_layer_ops(bool on);
  bool fused_layer_ops() const { return fused_ops_; }
  // GPU only (on at construction unless SJD_WINDOW_ATTENTION=0, and only in a CUDA build): attention
  // by the kernel that reads only the key chunks the bias leaves open (model/window_attention.h): AR
  // steps and small windows on CUDA cores, wide windows and trees in bfloat16 / float16 on tensor
  // cores; what it does not take (a float32 wide window), and off, go to PyTorch's attention.
  void use_window_attention(bool on);
  bool window_attention() const { return window_attention_; }
  // Its tensor-core kernel alone (on unless SJD_WIDE_WINDOW_ATTENTION=0): off, wide windows go to
  // PyTorch's attention while AR steps and small windows keep the CUDA-core kernel. Each kernel has
  // a switch of its own, so a device check that finds one wrong still measures the other.
  void use_wide_window_attention(bool on);
  bool wide_window_attention() const { return window_attention_ && wide_window_attention_; }
  // Why graphs were switched off during the run (a failed capture); empty if they were not.
  const std::string& step_graphs_failure() const { return graphs_failure_; }
  size_t captured_step_graphs() const { return graphs_.captured(); }
  // Frees the KV cache and the graphs that read it; the next reservation makes a new one.
  void release_cache();
  // What the KV cache and the graphs' static tensors hold: a new reservation reuses or frees it first.
  int64_t held_bytes() const { return cache_.bytes() + graphs_.static_bytes(); }

 private:
  // Builds the step's host buffers (tokens, positions, window mask) for `windows`, padded to `width`.
  void lay_out_windows(const std::vector<RowWindow>& windows, int64_t width);
  // Runs new tokens through the stack for the given cache rows: hidden [rows, W, H],
  // positions int64 [rows, W], `window_mask` [rows][W][W] flattened (1: may
  // attend) among the new tokens. K/V are written after each row's committed
  // length. Returns the head's logits [rows, W, V'] (float32; head_logits: a prefill drops them,
  // a window step widens them with full_width).
  at::Tensor forward_hidden(const std::vector<int64_t>& rows, const at::Tensor& hidden,
                            const std::vector<int64_t>& positions, const std::vector<uint8_t>& window_mask);
  // Additive attention bias [rows, 1, W, keys] (0 or -inf) over each row's committed slots, then its
  // window; keys = longest committed row + W, or keys_at_least if more (on a GPU rounded up, see kKeyBucket).
  at::Tensor attention_bias(const std::vector<int64_t>& rows, int64_t width, const std::vector<uint8_t>& window_mask,
                            int64_t keys_at_least = 0);
  // The layers and the head over `hidden` [rows, W, H] with the step's RoPE factors, bias and KV slots
  // (head_logits: the restricted head's columns only).
  at::Tensor run_layers(const std::vector<int64_t>& rows, const at::Tensor& hidden, const RopeFactors& rope,
                        const at::Tensor& bias, const KvCache::StepSlots& slots);
  // The same with the fused layer kernels: each residual add goes into the norm that follows it.
  at::Tensor run_layers_fused(const std::vector<int64_t>& rows, const at::Tensor& hidden, const RopeFactors& rope,
                              const at::Tensor& bias, const KvCache::StepSlots& slots);
  // Whether this step can run from a graph; the step laid out by lay_out_windows, from its graph
  // (the head's logits, head_logits, at the laid-out width).
  bool graphable(const std::vector<int64_t>& rows, int64_t width) const;
  at::Tensor forward_graphed(const std::vector<int64_t>& rows, int64_t width);
  // softmax(q k^T + bias) v for q.size(0) consecutive cache rows from `first_row` (read in place).
  at::Tensor attend(int64_t layer, int64_t first_row, const at::Tensor& q, const at::Tensor& bias);
  // On a GPU, once per forward: whether the fused kernel takes grouped K/V as they are, and its name.
  void choose_attention_kernel(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values,
                               const at::Tensor& bias);
  // One layer's attention; the new keys and values go to `slots` (the step's, made once for every layer).
  at::Tensor attention(int64_t layer, const std::vector<int64_t>& rows, const at::Tensor& h, const RopeFactors& rope,
                       const at::Tensor& bias, const KvCache::StepSlots& slots);
  // The output head over the final hidden states: float32 [rows, W, V'] for the restricted head's
  // ids (restrict_outputs), or [rows, W, V]; full_width() puts the restricted columns in place among
  // the lowest float.
  at::Tensor head_logits(const at::Tensor& x) const;
  at::Tensor full_width(const at::Tensor& head) const;
  // x [..., in] times a projection weight in this model's layout -> [..., out].
  at::Tensor project(const at::Tensor& x, const at::Tensor& w) const;

  TransformerConfig config_;
  TransformerWeights weights_;  // projections [out, in] as loaded, or input-major [in, out] on a CPU
  bool input_major_;
  KvCache cache_;
  RopeTable rope_;
  at::Tensor head_ids_;   // int64 [V'] token ids the restricted head computes (undefined: all)
  at::Tensor head_rows_;  // those rows of lm_head ([V', H], or [H, V'] input-major)
  std::vector<int64_t> next_position_;  // per row: position of the next root
  std::vector<uint8_t> pending_valid_;  // per row: key validity of the current root
  std::vector<at::Tensor> pending_root_embedding_;  // per row: input vector of a prompt-embedding root
  // Per row: the cache length, key validity and input vector of its first root (the prompt's last
  // token), which a rollback to it restores.
  struct FirstRoot {
    int64_t cache_length = 0;
    uint8_t valid = 1;
    at::Tensor embedding;
  };
  std::vector<FirstRoot> first_root_;
  // Host buffers of one window step, reused so a step creates no host vectors.
  std::vector<int64_t> step_tokens_, step_positions_;
  std::vector<uint8_t> step_mask_;
  std::vector<float> bias_host_;
  bool attention_chosen_ = false;  // choose_attention_kernel ran for this forward
  bool gqa_in_kernel_ = false;
  std::string attention_backend_ = "none yet";
  bool graphs_on_ = false;
  bool fused_ops_ = false;
  bool window_attention_ = false;
  bool wide_window_attention_ = true;
  std::string graphs_failure_;
  StepGraphs graphs_;
  std::vector<int64_t> head_id_list_;  // the ids restrict_outputs was last given
};

}  // namespace sjd::model

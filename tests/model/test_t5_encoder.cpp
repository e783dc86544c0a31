// The FLAN-T5 encoder: its relative-position buckets against the threshold
// form of T5's definition, the whole encoder against a loop-by-loop double-
// precision formula, padding, and the errors a bad checkpoint or input gives.
// (Parity with transformers' T5EncoderModel: tests/python/test_llamagen_parity.py
// runs the hidden "[t5-fixture]" case of test_t5_fixture.cpp.)
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <map>

#include "io/weights.h"
#include "model/t5_encoder.h"

using sjd::model::T5Config;
using sjd::model::T5Encoder;

namespace {

// Bucket of a key `r` positions after the query (negative: before), written as
// thresholds: 16 buckets per side; distances 0..7 exact; then one more bucket
// each time the distance reaches 8 * sqrt(2)^k (k = 1..7), i.e. logarithmic
// bins up to 128, everything beyond in the last bucket.
int64_t bucket_by_thresholds(int64_t r) {
  const int64_t side = r > 0 ? 16 : 0;
  const int64_t distance = r < 0 ? -r : r;
  if (distance < 8) return side + distance;
  int64_t bucket = 8;
  for (int k = 1; k <= 7; ++k) {
    if (static_cast<double>(distance) >= 8.0 * std::pow(2.0, k / 2.0)) ++bucket;
  }
  return side + bucket;
}

T5Config tiny_config() {
  T5Config c;
  c.vocab_size = 20;
  c.d_model = 8;
  c.num_layers = 2;
  c.num_heads = 2;
  c.d_kv = 3;  // inner width 6 != d_model: a transposed projection would not fit
  c.d_ff = 10;
  return c;
}

std::map<std::string, at::Tensor> random_t5(const T5Config& c, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto normal = [&](at::IntArrayRef shape, double scale) { return at::normal(0.0, scale, shape, gen); };
  const int64_t inner = c.num_heads * c.d_kv;
  std::map<std::string, at::Tensor> t;
  t["shared.weight"] = normal({c.vocab_size, c.d_model}, 1.0);
  t["encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"] =
      normal({c.relative_attention_num_buckets, c.num_heads}, 1.0);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = "encoder.block." + std::to_string(i) + ".layer.";
    t[p + "0.layer_norm.weight"] = 1.0 + normal({c.d_model}, 0.2);
    for (const char* w : {"q", "k", "v"}) t[p + "0.SelfAttention." + w + ".weight"] = normal({inner, c.d_model}, 0.5);
    t[p + "0.SelfAttention.o.weight"] = normal({c.d_model, inner}, 0.5);
    t[p + "1.layer_norm.weight"] = 1.0 + normal({c.d_model}, 0.2);
    t[p + "1.DenseReluDense.wi_0.weight"] = normal({c.d_ff, c.d_model}, 0.5);
    t[p + "1.DenseReluDense.wi_1.weight"] = normal({c.d_ff, c.d_model}, 0.5);
    t[p + "1.DenseReluDense.wo.weight"] = normal({c.d_model, c.d_ff}, 0.5);
  }
  t["encoder.final_layer_norm.weight"] = 1.0 + normal({c.d_model}, 0.2);
  return t;
}

sjd::io::WeightMap weight_map(const std::map<std::string, at::Tensor>& tensors) {
  sjd::io::WeightMap w;
  for (const auto& [name, tensor] : tensors) w.insert(name, tensor, "t5-test.safetensors");
  return w;
}

using Matrix = std::vector<std::vector<double>>;

Matrix to_matrix(const at::Tensor& t) {
  const at::Tensor d = t.to(at::kDouble).contiguous();
  Matrix m(static_cast<size_t>(d.size(0)), std::vector<double>(static_cast<size_t>(d.size(1))));
  for (int64_t i = 0; i < d.size(0); ++i)
    for (int64_t j = 0; j < d.size(1); ++j) m[i][j] = d[i][j].item<double>();
  return m;
}

std::vector<double> to_vector(const at::Tensor& t) {
  const at::Tensor d = t.to(at::kDouble).contiguous();
  return std::vector<double>(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
}

// y[r] = W x[r] for every row r (W is [out, in], as checkpoints store it).
Matrix linear_rows(const Matrix& w, const Matrix& x) {
  Matrix y(x.size(), std::vector<double>(w.size(), 0.0));
  for (size_t r = 0; r < x.size(); ++r)
    for (size_t o = 0; o < w.size(); ++o)
      for (size_t i = 0; i < x[r].size(); ++i) y[r][o] += w[o][i] * x[r][i];
  return y;
}

Matrix rms(const Matrix& x, const std::vector<double>& weight, double eps) {
  Matrix y = x;
  for (auto& row : y) {
    double mean_square = 0.0;
    for (double v : row) mean_square += v * v / static_cast<double>(row.size());
    for (size_t i = 0; i < row.size(); ++i) row[i] = weight[i] * row[i] / std::sqrt(mean_square + eps);
  }
  return y;
}

// The T5 encoder spelled out token by token and head by head.
Matrix direct_encoder(const T5Config& c, const std::map<std::string, at::Tensor>& t, const std::vector<int64_t>& ids,
                      const std::vector<uint8_t>& valid) {
  const size_t n = ids.size();
  const Matrix shared = to_matrix(t.at("shared.weight"));
  const Matrix bias = to_matrix(t.at("encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"));
  Matrix x;
  for (int64_t id : ids) x.push_back(shared[static_cast<size_t>(id)]);
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    const std::string p = "encoder.block." + std::to_string(layer) + ".layer.";
    const Matrix h = rms(x, to_vector(t.at(p + "0.layer_norm.weight")), c.layer_norm_epsilon);
    const Matrix q = linear_rows(to_matrix(t.at(p + "0.SelfAttention.q.weight")), h);
    const Matrix k = linear_rows(to_matrix(t.at(p + "0.SelfAttention.k.weight")), h);
    const Matrix v = linear_rows(to_matrix(t.at(p + "0.SelfAttention.v.weight")), h);
    Matrix attended(n, std::vector<double>(static_cast<size_t>(c.num_heads * c.d_kv), 0.0));
    for (int64_t head = 0; head < c.num_heads; ++head) {
      for (size_t i = 0; i < n; ++i) {
        std::vector<double> score(n, -INFINITY);
        double top = -INFINITY;
        for (size_t j = 0; j < n; ++j) {
          if (!valid[j]) continue;
          double s = 0.0;
          for (int64_t d = 0; d < c.d_kv; ++d) s += q[i][head * c.d_kv + d] * k[j][head * c.d_kv + d];
          const int64_t b = bucket_by_thresholds(static_cast<int64_t>(j) - static_cast<int64_t>(i));
          score[j] = s + bias[static_cast<size_t>(b)][static_cast<size_t>(head)];  // no 1/sqrt(d_kv)
          top = std::max(top, score[j]);
        }
        double total = 0.0;
        for (double& s : score) total += (s = std::exp(s - top));
        for (size_t j = 0; j < n; ++j) {
          for (int64_t d = 0; d < c.d_kv; ++d) {
            attended[i][head * c.d_kv + d] += score[j] / total * v[j][head * c.d_kv + d];
          }
        }
      }
    }
    const Matrix o = linear_rows(to_matrix(t.at(p + "0.SelfAttention.o.weight")), attended);
    for (size_t i = 0; i < n; ++i)
      for (size_t d = 0; d < x[i].size(); ++d) x[i][d] += o[i][d];
    const Matrix f = rms(x, to_vector(t.at(p + "1.layer_norm.weight")), c.layer_norm_epsilon);
    Matrix gate = linear_rows(to_matrix(t.at(p + "1.DenseReluDense.wi_0.weight")), f);
    const Matrix up = linear_rows(to_matrix(t.at(p + "1.DenseReluDense.wi_1.weight")), f);
    for (size_t i = 0; i < n; ++i) {
      for (size_t d = 0; d < gate[i].size(); ++d) {
        const double g = gate[i][d];
        const double gelu = 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g)));
        gate[i][d] = gelu * up[i][d];
      }
    }
    const Matrix down = linear_rows(to_matrix(t.at(p + "1.DenseReluDense.wo.weight")), gate);
    for (size_t i = 0; i < n; ++i)
      for (size_t d = 0; d < x[i].size(); ++d) x[i][d] += down[i][d];
  }
  return rms(x, to_vector(t.at("encoder.final_layer_norm.weight")), c.layer_norm_epsilon);
}

double max_difference(const at::Tensor& got, const Matrix& want) {
  double worst = 0.0;
  const at::Tensor values = got.to(at::kDouble).contiguous();
  for (size_t i = 0; i < want.size(); ++i) {
    for (size_t d = 0; d < want[i].size(); ++d) {
      const double value = values[static_cast<int64_t>(i)][static_cast<int64_t>(d)].item<double>();
      worst = std::max(worst, std::abs(value - want[i][d]));
    }
  }
  return worst;
}

}  // namespace

TEST_CASE("T5 relative-position buckets follow the threshold form of the definition", "[model][t5]") {
  for (int64_t r = -400; r <= 400; ++r) {
    INFO("relative position " << r);
    CHECK(sjd::model::t5_relative_position_bucket(r, 32, 128) == bucket_by_thresholds(r));
  }
  // A few values worked out by hand: keys before the query use buckets 0..15, after it 16..31.
  CHECK(sjd::model::t5_relative_position_bucket(0, 32, 128) == 0);
  CHECK(sjd::model::t5_relative_position_bucket(-7, 32, 128) == 7);
  CHECK(sjd::model::t5_relative_position_bucket(7, 32, 128) == 23);
  CHECK(sjd::model::t5_relative_position_bucket(-11, 32, 128) == 8);   // 11 < 8*sqrt(2)
  CHECK(sjd::model::t5_relative_position_bucket(-12, 32, 128) == 9);
  CHECK(sjd::model::t5_relative_position_bucket(119, 32, 128) == 31);
  CHECK(sjd::model::t5_relative_position_bucket(-5000, 32, 128) == 15);
}

TEST_CASE("the T5 encoder equals the loop-by-loop formula", "[model][t5]") {
  const T5Config c = tiny_config();
  const auto tensors = random_t5(c, 11);
  const T5Encoder encoder(c, weight_map(tensors));
  const std::vector<int64_t> ids = {3, 17, 0, 9, 9, 1};
  const at::Tensor got = encoder.encode(ids);
  REQUIRE(got.sizes() == at::IntArrayRef({6, c.d_model}));
  CHECK(max_difference(got, direct_encoder(c, tensors, ids, std::vector<uint8_t>(ids.size(), 1))) < 1e-4);
}

TEST_CASE("pad tokens are invisible: valid rows equal the unpadded encoding", "[model][t5]") {
  const T5Config c = tiny_config();
  const auto tensors = random_t5(c, 12);
  const T5Encoder encoder(c, weight_map(tensors));
  const std::vector<int64_t> ids = {5, 2, 8, 1, 0, 0, 0};
  const std::vector<uint8_t> mask = {1, 1, 1, 1, 0, 0, 0};
  const at::Tensor padded = encoder.encode(ids, mask);
  const at::Tensor alone = encoder.encode({5, 2, 8, 1});
  CHECK(at::allclose(padded.narrow(0, 0, 4), alone, 1e-5, 1e-5));
  CHECK(max_difference(padded, direct_encoder(c, tensors, ids, mask)) < 1e-4);
  // Without the mask the pads change the valid rows (the test would be vacuous otherwise).
  CHECK_FALSE(at::allclose(encoder.encode(ids).narrow(0, 0, 4), alone, 1e-3, 1e-3));
}

TEST_CASE("T5 encoder errors name the tensor, the key or the bad input", "[model][t5][errors]") {
  const T5Config c = tiny_config();
  auto tensors = random_t5(c, 13);
  SECTION("missing tensor") {
    tensors.erase("encoder.block.1.layer.1.DenseReluDense.wi_1.weight");
    CHECK_THROWS_WITH(T5Encoder(c, weight_map(tensors)),
                      Catch::Contains("encoder.block.1.layer.1.DenseReluDense.wi_1.weight") &&
                          Catch::Contains("t5-test.safetensors"));
  }
  SECTION("mis-shaped tensor") {
    tensors["encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"] = at::zeros({16, 2});
    CHECK_THROWS_WITH(T5Encoder(c, weight_map(tensors)),
                      Catch::Contains("relative_attention_bias.weight") && Catch::Contains("[32, 2]") &&
                          Catch::Contains("[16, 2]"));
  }
  SECTION("bad input") {
    const T5Encoder encoder(c, weight_map(tensors));
    CHECK_THROWS_WITH(encoder.encode({1, 20}), Catch::Contains("token id 20"));
    CHECK_THROWS_WITH(encoder.encode({1, 2}, {1}), Catch::Contains("mask has 1 entries for 2 tokens"));
    CHECK_THROWS_WITH(encoder.encode({1, 2}, {0, 0}), Catch::Contains("every token as padding"));
  }
  SECTION("config") {
    nlohmann::json j = {{"vocab_size", 20}, {"d_model", 8}, {"num_layers", 2}, {"num_heads", 2}, {"d_kv", 3},
                        {"d_ff", 10}, {"feed_forward_proj", "relu"}};
    CHECK_THROWS_WITH(sjd::model::parse_t5_config(j, "b.json: text_encoder"),
                      Catch::Contains("b.json: text_encoder.feed_forward_proj"));
    j["feed_forward_proj"] = "gated-gelu";
    j.erase("d_kv");
    CHECK_THROWS_WITH(sjd::model::parse_t5_config(j, "b.json: text_encoder"),
                      Catch::Contains("b.json: text_encoder.d_kv"));
    j["d_kv"] = 3;
    const T5Config parsed = sjd::model::parse_t5_config(j, "b.json: text_encoder");
    CHECK(parsed.relative_attention_num_buckets == 32);
    CHECK(parsed.relative_attention_max_distance == 128);
    CHECK(parsed.layer_norm_epsilon == 1e-6);
  }
}

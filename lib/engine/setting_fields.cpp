#include "engine/setting_fields.h"

#include <limits>

#include "engine/settings_checks.h"

namespace sjd::engine {

const std::vector<SettingField>& setting_fields() {
  using S = GenerationSettings;
  static const std::vector<SettingField> fields = {
      {"method", TextSetting{&S::method}},
      {"window", CountSetting{&S::window, 1, kMaxWindow}},
      {"init", TextSetting{&S::init}},
      {"pd_k", CountSetting{&S::pd_k, 1, 64}},
      {"pd_depth", CountSetting{&S::pd_depth, 0, 16}},
      {"relax", TextSetting{&S::relax}},
      {"delta", NumberSetting{&S::delta, 0.0, 100.0}},
      {"nu", NumberSetting{&S::nu, 0.0, 100.0}},
      {"lantern_k", IntegerSetting<int>{&S::lantern_k, 1, 1024}},
      {"lantern_lambda", NumberSetting{&S::lantern_lambda, 0.0, 1000.0}},
      {"lantern_own_residual", FlagSetting{&S::lantern_own_residual}},
      {"cfg", NumberSetting{&S::cfg, 0.0, kMaxGuidance}},
      {"negative_prompt", TextSetting{&S::negative_prompt}},
      {"temperature", NumberSetting{&S::temperature, kMinTemperature, kMaxTemperature, /*zero_is_greedy=*/true}},
      {"top_k", IntegerSetting<int64_t>{&S::top_k, 0, std::numeric_limits<int32_t>::max()}},
      {"seed", IntegerSetting<uint64_t>{&S::seed, 0, std::numeric_limits<uint64_t>::max()}},
      {"resolution", IntegerSetting<int64_t>{&S::resolution, 0, kMaxResolution}},
      {"device", TextSetting{&S::device}},
      {"dtype", TextSetting{&S::dtype}},
      {"cost_profile", TextSetting{&S::cost_profile}},
      {"batch_size", CountSetting{&S::batch_size, 1, kMaxBatchSize}},
  };
  return fields;
}

const SettingField* find_setting_field(const std::string& key) {
  for (const SettingField& field : setting_fields()) {
    if (key == field.key) return &field;
  }
  return nullptr;
}

}  // namespace sjd::engine

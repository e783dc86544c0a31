#pragma once
// Every generation setting once: its key (the long flag with '_' for '-'), the member of
// GenerationSettings it fills and the values it takes. Reading a JSON layer, writing a run's
// settings, the range checks and the list of keys all walk this table, so a new setting is one
// line here plus its flag in app/cli_common.cpp (a test holds the flags to the table).
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "engine/settings.h"

namespace sjd::engine {

// A name (method, init, relax, device, ...): its parser checks it where it is read.
struct TextSetting {
  std::string GenerationSettings::*member;
};

struct FlagSetting {
  bool GenerationSettings::*member;
};

// A finite number in [lo, hi]; 0 is allowed besides when it means greedy decoding.
struct NumberSetting {
  double GenerationSettings::*member;
  double lo, hi;
  bool zero_is_greedy = false;
};

// A JSON integer that fits T, in [lo, hi].
template <typename T>
struct IntegerSetting {
  T GenerationSettings::*member;
  T lo, hi;
};

// "auto" (kAuto) or an integer in [least, hi].
struct CountSetting {
  int GenerationSettings::*member;
  int least, hi;
};

using SettingKind = std::variant<TextSetting, FlagSetting, NumberSetting, IntegerSetting<int>,
                                 IntegerSetting<int64_t>, IntegerSetting<uint64_t>, CountSetting>;

struct SettingField {
  const char* key;
  SettingKind kind;
};

// In the order a layer is applied: "method" before "relax", since a method entry's
// ":relaxation" sets relax and a relax key of the same layer overrides it.
const std::vector<SettingField>& setting_fields();

// The field of `key`, or nullptr for a key that is not a setting.
const SettingField* find_setting_field(const std::string& key);

}  // namespace sjd::engine

#include "text/hf_normalizers.h"

#include <vector>

#include "text/hf_pieces.h"
#include "text/regex.h"
#include "text/unicode.h"
#include "text/utf8.h"

namespace sjd::text::hf {
namespace {

class UnicodeForm : public Normalizer {
 public:
  explicit UnicodeForm(unicode::NormalForm form) : form_(form) {}
  std::string normalize(std::string text) const override { return unicode::normalize(text, form_); }

 private:
  unicode::NormalForm form_;
};

class Lowercase : public Normalizer {
 public:
  std::string normalize(std::string text) const override { return unicode::to_lower(text); }
};

class Replace : public Normalizer {
 public:
  Replace(Regex pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  std::string normalize(std::string text) const override { return pattern_.replace_all(text, content_); }

 private:
  Regex pattern_;
  std::string content_;
};

class Prepend : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string normalize(std::string text) const override { return text.empty() ? text : prefix_ + text; }

 private:
  std::string prefix_;
};

// Strips White_Space characters from either end.
class Strip : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  std::string normalize(std::string text) const override {
    std::size_t begin = 0, end = text.size();
    if (left_) {
      for (std::size_t i = 0; i < end;) {
        if (!unicode::is_white_space(utf8::next(text, i))) break;
        begin = i;
      }
    }
    if (right_) {
      // Walk forward remembering where the last non-space character ended.
      std::size_t last_kept_end = begin;
      for (std::size_t i = begin; i < end;) {
        if (!unicode::is_white_space(utf8::next(text, i))) last_kept_end = i;
      }
      end = last_kept_end;
    }
    return text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

// Removes combining marks (general category M), as after NFD.
class StripAccents : public Normalizer {
 public:
  std::string normalize(std::string text) const override {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
      const std::size_t begin = i;
      if (!unicode::is_mark(utf8::next(text, i))) out.append(text, begin, i - begin);
    }
    return out;
  }
};

class Sequence : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  std::string normalize(std::string text) const override {
    for (const auto& step : steps_) text = step->normalize(std::move(text));
    return text;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace

std::unique_ptr<Normalizer> parse_normalizer(const JsonNode& node) {
  const std::string type = node.at("type").as_string();
  if (type == "NFC") return std::make_unique<UnicodeForm>(unicode::NormalForm::NFC);
  if (type == "NFD") return std::make_unique<UnicodeForm>(unicode::NormalForm::NFD);
  if (type == "NFKC") return std::make_unique<UnicodeForm>(unicode::NormalForm::NFKC);
  if (type == "NFKD") return std::make_unique<UnicodeForm>(unicode::NormalForm::NFKD);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "StripAccents") return std::make_unique<StripAccents>();
  if (type == "Strip") return std::make_unique<Strip>(node.bool_or("strip_left", true),
                                                      node.bool_or("strip_right", true));
  if (type == "Prepend") return std::make_unique<Prepend>(node.at("prepend").as_string());
  if (type == "Replace") {
    const JsonNode pattern = node.at("pattern");
    return std::make_unique<Replace>(parse_pattern(pattern), node.at("content").as_string());
  }
  if (type == "Sequence") {
    const JsonNode list = node.at("normalizers");
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (std::size_t i = 0; i < list.array_size(); ++i) steps.push_back(parse_normalizer(list.at(i)));
    return std::make_unique<Sequence>(std::move(steps));
  }
  node.at("type").fail("unsupported normalizer \"" + type +
                       "\" (supported: NFC, NFD, NFKC, NFKD, Lowercase, StripAccents, Strip, Prepend, Replace, "
                       "Sequence)");
}

}  // namespace sjd::text::hf

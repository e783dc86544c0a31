#include "text/hf_decoders.h"

#include "text/byte_level_alphabet.h"
#include "text/hf_pieces.h"
#include "text/regex.h"
#include "text/utf8.h"

namespace sjd::text::hf {
namespace {

constexpr const char* kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

// Byte-level tokens back to bytes; a token with a character outside the
// alphabet (an added token, say) contributes its own UTF-8 bytes.
class ByteLevel : public Decoder {
 public:
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    std::string bytes;
    for (const std::string& token : tokens) {
      std::string token_bytes;
      bool in_alphabet = true;
      for (std::size_t i = 0; i < token.size() && in_alphabet;) {
        const auto byte = byte_of_level_char(utf8::next(token, i));
        if (byte) {
          token_bytes += static_cast<char>(*byte);
        } else {
          in_alphabet = false;
        }
      }
      bytes += in_alphabet ? token_bytes : token;
    }
    return {utf8::to_valid(bytes)};
  }
};

// Runs of <0xNN> tokens become the text of their bytes, or one U+FFFD per byte when that is not UTF-8.
class ByteFallback : public Decoder {
 public:
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    std::size_t pending_count = 0;
    const auto flush = [&] {
      if (pending_count == 0) return;
      if (utf8::find_invalid(pending) == std::string::npos) {
        out.push_back(pending);
      } else {
        for (std::size_t i = 0; i < pending_count; ++i) out.emplace_back(kReplacementCharacter);
      }
      pending.clear();
      pending_count = 0;
    };
    for (std::string& token : tokens) {
      if (const auto byte = byte_of_token(token)) {
        pending += static_cast<char>(*byte);
        ++pending_count;
      } else {
        flush();
        out.push_back(std::move(token));
      }
    }
    flush();
    return out;
  }

 private:
  static std::optional<unsigned char> byte_of_token(const std::string& token) {
    if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return std::nullopt;
    const auto digit = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    const int high = digit(token[3]), low = digit(token[4]);
    if (high < 0 || low < 0) return std::nullopt;
    return static_cast<unsigned char>(high * 16 + low);
  }
};

// The replacement character back to spaces; the first token loses its leading one
// unless the encoder never prepends.
class Metaspace : public Decoder {
 public:
  Metaspace(std::string replacement, bool strip_first)
      : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (std::size_t t = 0; t < tokens.size(); ++t) {
      std::string decoded;
      const std::string& token = tokens[t];
      for (std::size_t i = 0; i < token.size();) {
        if (token.compare(i, replacement_.size(), replacement_) == 0) {
          if (!(t == 0 && strip_first_)) decoded += ' ';
          i += replacement_.size();
        } else {
          decoded += token[i++];
        }
      }
      tokens[t] = std::move(decoded);
    }
    return tokens;
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

class Fuse : public Decoder {
 public:
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    std::string joined;
    for (const std::string& token : tokens) joined += token;
    return {joined};
  }
};

// Removes up to `start` leading and `stop` trailing copies of one character from each token.
class Strip : public Decoder {
 public:
  Strip(std::string content, std::size_t start, std::size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (std::string& token : tokens) {
      std::size_t begin = 0;
      for (std::size_t n = 0; n < start_ && token.compare(begin, content_.size(), content_) == 0; ++n) {
        begin += content_.size();
      }
      std::size_t end = token.size();
      for (std::size_t n = 0; n < stop_ && end >= begin + content_.size() &&
                              token.compare(end - content_.size(), content_.size(), content_) == 0;
           ++n) {
        end -= content_.size();
      }
      token = token.substr(begin, end - begin);
    }
    return tokens;
  }

 private:
  std::string content_;
  std::size_t start_, stop_;
};

class Replace : public Decoder {
 public:
  Replace(Regex pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (std::string& token : tokens) token = pattern_.replace_all(token, content_);
    return tokens;
  }

 private:
  Regex pattern_;
  std::string content_;
};

class Sequence : public Decoder {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (const auto& step : steps_) tokens = step->decode_chain(std::move(tokens));
    return tokens;
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

std::size_t non_negative(const JsonNode& node) {
  const int64_t value = node.as_integer();
  if (value < 0) node.fail("must not be negative");
  return static_cast<std::size_t>(value);
}

}  // namespace

std::unique_ptr<Decoder> parse_decoder(const JsonNode& node) {
  const std::string type = node.at("type").as_string();
  if (type == "ByteLevel") return std::make_unique<ByteLevel>();
  if (type == "ByteFallback") return std::make_unique<ByteFallback>();
  if (type == "Fuse") return std::make_unique<Fuse>();
  if (type == "Metaspace") {
    bool strip_first = node.string_or("prepend_scheme", "always") != "never";
    if (const auto legacy = node.find("add_prefix_space"); legacy && !legacy->as_bool()) strip_first = false;
    // An empty replacement or Strip content matches everywhere without moving on: decoding never ended.
    const std::string replacement = node.at("replacement").as_string();
    if (replacement.empty()) node.at("replacement").fail("must not be empty");
    return std::make_unique<Metaspace>(replacement, strip_first);
  }
  if (type == "Strip") {
    const std::string content = node.at("content").as_string();
    if (content.empty()) node.at("content").fail("must not be empty");
    return std::make_unique<Strip>(content, non_negative(node.at("start")),
                                   non_negative(node.at("stop")));
  }
  if (type == "Replace") {
    return std::make_unique<Replace>(parse_pattern(node.at("pattern")), node.at("content").as_string());
  }
  if (type == "Sequence") {
    const JsonNode list = node.at("decoders");
    std::vector<std::unique_ptr<Decoder>> steps;
    for (std::size_t i = 0; i < list.array_size(); ++i) steps.push_back(parse_decoder(list.at(i)));
    return std::make_unique<Sequence>(std::move(steps));
  }
  node.at("type").fail("unsupported decoder \"" + type +
                       "\" (supported: ByteLevel, ByteFallback, Metaspace, Fuse, Strip, Replace, Sequence)");
}

}  // namespace sjd::text::hf

#include "text/caption_cleaning.h"

#include <utility>

#include "text/regex.h"
#include "text/tokenizer.h"
#include "text/unicode.h"
#include "text/utf8.h"

namespace sjd::text {
namespace {

struct CleaningRules {
  Regex person{R"(<person>)", "caption cleaning: <person>"};
  Regex url{R"(\b(?:https?://|www\.)\S*)", "caption cleaning: URL"};
  Regex domain{R"(\b[\w.\-]+\.(?:com|co|ru|net|org|edu|gov|it)\b[\w/\-]*)", "caption cleaning: domain"};
  Regex html_tag{R"(</?[\p{L}][^<>]*>)", "caption cleaning: HTML tag"};
  Regex handle{R"(@[\w]+)", "caption cleaning: @handle"};
  Regex white_space{R"(\s+)", "caption cleaning: white space"};
};

const CleaningRules& rules() {
  static const CleaningRules instance;
  return instance;
}

std::string decode_entities(const std::string& text) {
  static const std::pair<const char*, const char*> kEntities[] = {
      {"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&#39;", "'"}, {"&nbsp;", " "}};
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    bool replaced = false;
    if (text[i] == '&') {
      for (const auto& [entity, character] : kEntities) {
        const std::string_view name(entity);
        if (text.compare(i, name.size(), name) == 0) {
          out += character;
          i += name.size();
          replaced = true;
          break;
        }
      }
    }
    if (!replaced) out += text[i++];
  }
  return out;
}

}  // namespace

std::string clean_caption(const std::string& caption) {
  const std::size_t invalid = utf8::find_invalid(caption);
  if (invalid != std::string::npos) {
    throw TokenizerError("caption cleaning: the caption is not valid UTF-8 at byte " +
                         std::to_string(invalid + 1));
  }
  const CleaningRules& r = rules();
  std::string text = unicode::to_lower(caption);
  text = r.person.replace_all(text, "person");
  text = r.url.replace_all(text, "");
  text = r.domain.replace_all(text, "");
  text = decode_entities(r.html_tag.replace_all(text, ""));
  text = r.handle.replace_all(text, "");
  text = r.white_space.replace_all(text, " ");
  const std::size_t begin = text.find_first_not_of(' ');
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(' ') + 1 - begin);
}

}  // namespace sjd::text

#include "io/delimited_text.h"

#include "io/prompt_file.h"

namespace sjd::io {
namespace {

// Length of the line ending at `at` (LF or CRLF), 0 if there is none.
size_t line_ending_length(std::string_view text, size_t at) {
  if (at < text.size() && text[at] == '\n') return 1;
  if (at + 1 < text.size() && text[at] == '\r' && text[at + 1] == '\n') return 2;
  return 0;
}

bool ends_field(std::string_view text, size_t at) {
  return at == text.size() || text[at] == ',' || line_ending_length(text, at) > 0;
}

// Reads CSV text one field at a time, tracking the current line.
class CsvReader {
 public:
  CsvReader(std::string_view text, const std::filesystem::path& file) : text_(text), file_(file) {}

  std::vector<DelimitedRecord> records() {
    std::vector<DelimitedRecord> records;
    while (at_ < text_.size()) {
      if (size_t ending = line_ending_length(text_, at_)) {  // a blank line
        at_ += ending;
        ++line_;
        continue;
      }
      DelimitedRecord record;
      record.line = line_;
      while (true) {
        record.fields.push_back(opens_quoted_field() ? quoted_field() : plain_field());
        if (at_ < text_.size() && text_[at_] == ',') {
          ++at_;
          continue;
        }
        if (size_t ending = line_ending_length(text_, at_)) {
          at_ += ending;
          ++line_;
        }
        break;
      }
      records.push_back(std::move(record));
    }
    return records;
  }

 private:
  // Whether the field at the cursor is quoted: it starts with '"' and its
  // closing quote ends the field.
  bool opens_quoted_field() const {
    if (at_ >= text_.size() || text_[at_] != '"') return false;
    for (size_t i = at_ + 1; i < text_.size(); ++i) {
      if (text_[i] != '"') continue;
      if (i + 1 < text_.size() && text_[i + 1] == '"') {
        ++i;  // a doubled quote inside the field
        continue;
      }
      return ends_field(text_, i + 1);
    }
    throw PromptFileError(file_.string() + ":" + std::to_string(line_) +
                          ": quoted field is never closed (unterminated quote)");
  }

  std::string quoted_field() {
    std::string field;
    for (++at_;; ++at_) {  // opens_quoted_field() found the closing quote
      const char c = text_[at_];
      if (c == '"') {
        if (at_ + 1 >= text_.size() || text_[at_ + 1] != '"') break;
        ++at_;
      } else if (c == '\n') {
        ++line_;
      }
      field.push_back(c);
    }
    ++at_;
    return field;
  }

  std::string plain_field() {
    const size_t begin = at_;
    while (!ends_field(text_, at_)) ++at_;
    return std::string(text_.substr(begin, at_ - begin));
  }

  std::string_view text_;
  const std::filesystem::path& file_;
  size_t at_ = 0;
  int line_ = 1;
};

}  // namespace

std::vector<DelimitedRecord> parse_csv(std::string_view text, const std::filesystem::path& file) {
  return CsvReader(text, file).records();
}

std::vector<DelimitedRecord> parse_tsv(std::string_view text) {
  std::vector<DelimitedRecord> records;
  int line = 0;
  size_t begin = 0;
  while (begin < text.size()) {
    ++line;
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    std::string_view content = text.substr(begin, end - begin);
    if (!content.empty() && content.back() == '\r') content.remove_suffix(1);
    begin = end + 1;
    if (content.empty()) continue;
    DelimitedRecord record;
    record.line = line;
    size_t field_begin = 0;
    while (true) {
      const size_t tab = content.find('\t', field_begin);
      record.fields.emplace_back(content.substr(field_begin, tab - field_begin));
      if (tab == std::string_view::npos) break;
      field_begin = tab + 1;
    }
    records.push_back(std::move(record));
  }
  return records;
}

}  // namespace sjd::io

#include "io/prompt_file.h"

#include "io/atomic_file.h"
#include "io/delimited_text.h"
#include "io/input_files.h"
#include "text/strict_json.h"
#include "text/unicode.h"
#include "text/utf8.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

namespace sjd::io {
namespace {

enum class PromptFormat { kText, kTsv, kCsv, kJsonLines };

[[noreturn]] void fail(const std::filesystem::path& file, int line, const std::string& what) {
  throw PromptFileError(file.string() + ":" + std::to_string(line) + ": " + what);
}

std::string read_contents(const std::filesystem::path& file) {
  try {
    require_file_at_most(file, "prompt file", kMaxPromptFileBytes);
  } catch (const FileError& error) {
    throw PromptFileError(error.what());
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) throw PromptFileError(file.string() + ": cannot open the prompt file");
  std::ostringstream contents;
  contents << in.rdbuf();
  std::string text = contents.str();
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);  // a UTF-8 byte order mark
  // A CR alone ends a line, as in files saved with classic Mac OS line endings (or pasted from one):
  // a prompt never holds one, and read as text it merged a whole file into one prompt.
  for (size_t at = text.find('\r'); at != std::string::npos; at = text.find('\r', at + 1)) {
    if (at + 1 == text.size() || text[at + 1] != '\n') text[at] = '\n';
  }
  return text;
}

// Each line of `text` with its 1-based number, without LF or CRLF.
template <typename Visit>
void for_each_line(std::string_view text, Visit visit) {
  int number = 0;
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(begin, end - begin);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    visit(line, ++number);
    begin = end + 1;
  }
}

PromptFormat format_of(const std::filesystem::path& file, std::string_view text) {
  std::string extension = file.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (extension == ".json") {
    throw PromptFileError(file.string() + ": a .json file holds one JSON value, not a prompt per line: write it as "
                          ".jsonl (one {\"prompt\": \"...\"} object per line), .txt, .tsv or .csv");
  }
  if (extension == ".txt") return PromptFormat::kText;
  if (extension == ".tsv") return PromptFormat::kTsv;
  if (extension == ".csv") return PromptFormat::kCsv;
  if (extension == ".jsonl") return PromptFormat::kJsonLines;
  const size_t first = text.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && text[first] == '{' ? PromptFormat::kJsonLines : PromptFormat::kText;
}

// A .txt line whose first non-blank character is '#' is a comment.
bool is_comment(std::string_view line) {
  const size_t first = line.find_first_not_of(" \t");
  return first != std::string_view::npos && line[first] == '#';
}

std::vector<PromptEntry> text_prompts(std::string_view text) {
  std::vector<PromptEntry> prompts;
  for_each_line(text, [&](std::string_view line, int number) {
    if (!text::unicode::is_blank(line) && !is_comment(line)) prompts.push_back({std::string(line), number, {}});
  });
  return prompts;
}

std::vector<PromptEntry> json_lines_prompts(std::string_view text, const std::filesystem::path& file) {
  std::vector<PromptEntry> prompts;
  for_each_line(text, [&](std::string_view line, int number) {
    if (text::unicode::is_blank(line)) return;
    nlohmann::json record;
    try {  // strict: {"prompt": "a", "prompt": "b"} would keep the last without a word
      record = text::parse_strict_json(std::string(line), file.string() + ":" + std::to_string(number));
    } catch (const text::StrictJsonError& error) {
      throw PromptFileError(error.what());
    }
    if (!record.is_object()) fail(file, number, "not a JSON object");
    auto prompt = record.find("prompt");
    if (prompt == record.end()) {
      std::string near;  // keys are case-sensitive here, as JSON's are (a CSV header's case is not)
      for (const auto& item : record.items()) {
        std::string key = item.key();
        std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return std::tolower(c); });
        if (key == "prompt") near = " (it has \"" + item.key() + "\": the key is \"prompt\", in lower case)";
      }
      fail(file, number, "no \"prompt\" field" + near);
    }
    if (!prompt->is_string()) fail(file, number, "\"prompt\" is not a string");
    PromptEntry entry{prompt->get<std::string>(), number, {}};
    for (const auto& item : record.items()) {
      if (item.key() != "prompt") entry.other_fields.push_back(item.key());
    }
    prompts.push_back(std::move(entry));
  });
  return prompts;
}

// The prompts of the "Prompt" column of CSV or TSV records (the first is the header).
std::vector<PromptEntry> column_prompts(const std::vector<DelimitedRecord>& records, char separator,
                                        const std::filesystem::path& file) {
  if (records.empty()) return {};
  const std::vector<std::string>& header = records.front().fields;
  auto is_prompt = [](std::string name) {
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    return name == "prompt";
  };
  auto column = std::find_if(header.begin(), header.end(), is_prompt);
  if (column == header.end()) {
    std::string columns;
    for (const auto& name : header) columns += (columns.empty() ? "'" : ", '") + name + "'";
    fail(file, records.front().line, "the header has no 'Prompt' column (columns: " + columns + ")");
  }
  const size_t index = static_cast<size_t>(column - header.begin());
  if (const auto second = std::find_if(column + 1, header.end(), is_prompt); second != header.end()) {
    fail(file, records.front().line, "the header has two 'Prompt' columns (" + std::to_string(index + 1) + " and " +
                                          std::to_string(second - header.begin() + 1) + "): which holds the prompts?");
  }
  const bool prompt_is_last = index + 1 == header.size();

  std::vector<PromptEntry> prompts;
  for (size_t r = 1; r < records.size(); ++r) {
    const DelimitedRecord& record = records[r];
    const size_t count = record.fields.size();
    if (count < header.size() || (count > header.size() && !prompt_is_last)) {
      fail(file, record.line, "the record has " + std::to_string(count) + " fields but the header has " +
                                  std::to_string(header.size()));
    }
    std::string prompt = record.fields[index];
    if (prompt_is_last) {
      for (size_t extra = index + 1; extra < count; ++extra) prompt += separator + record.fields[extra];
    }
    prompts.push_back({std::move(prompt), record.line, {}});
  }
  return prompts;
}

}  // namespace

std::vector<PromptEntry> read_prompts(const std::filesystem::path& file) {
  const std::string text = read_contents(file);
  std::vector<PromptEntry> prompts;
  switch (format_of(file, text)) {
    case PromptFormat::kText: prompts = text_prompts(text); break;
    case PromptFormat::kTsv: prompts = column_prompts(parse_tsv(text), '\t', file); break;
    case PromptFormat::kCsv: prompts = column_prompts(parse_csv(text, file), ',', file); break;
    case PromptFormat::kJsonLines: prompts = json_lines_prompts(text, file); break;
  }
  for (const PromptEntry& entry : prompts) {
    if (text::unicode::is_blank(entry.prompt)) fail(file, entry.line, "the prompt is blank");
  }
  if (prompts.empty()) throw PromptFileError(file.string() + ": the file holds no prompts");
  return prompts;
}

std::string prompt_text_problem(const std::string& prompt) {
  if (prompt.size() > kMaxPromptBytes) {
    return "a length of " + std::to_string(prompt.size()) + " bytes, more than the " +
           std::to_string(kMaxPromptBytes) + " (1 MiB) a prompt may have";
  }
  if (const size_t bad = text::utf8::find_invalid(prompt); bad != std::string::npos) {
    return "invalid UTF-8 at byte " + std::to_string(bad + 1);
  }
  if (const size_t nul = prompt.find('\0'); nul != std::string::npos) {
    return "a NUL byte at byte " + std::to_string(nul + 1);
  }
  return "";
}

}  // namespace sjd::io

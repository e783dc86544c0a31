#pragma once
// Splitting CSV and TSV text into records of fields, keeping line numbers for
// error messages.
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace sjd::io {

struct DelimitedRecord {
  std::vector<std::string> fields;
  int line = 0;  // 1-based line where the record starts
};

// CSV as RFC 4180 writes it: fields separated by ',', records by LF or CRLF;
// a field starting with '"' is quoted and may hold ',', newlines and doubled
// quotes. Hand-written files often contain quotes that were never meant as
// quoting ("Head shot" of a zebra), so a field is read as quoted only when its
// closing quote is followed by a separator or the end of the record;
// otherwise its quotes are literal text. Blank lines are skipped. Throws
// PromptFileError naming `file` and the line for a quote that is never closed.
std::vector<DelimitedRecord> parse_csv(std::string_view text, const std::filesystem::path& file);

// Tab-separated lines, without quoting (as the IANA TSV format has none).
// Blank lines are skipped; a trailing CR is dropped.
std::vector<DelimitedRecord> parse_tsv(std::string_view text);

}  // namespace sjd::io

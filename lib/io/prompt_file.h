#pragma once
// Prompt lists for `sjd batch` and benchmarks, in the formats the usual
// evaluation sets come in (PartiPrompts .tsv, COCO caption .csv, GenEval .txt,
// .jsonl records).
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace sjd::io {

// A prompt file that cannot be read or parsed; the message names the file and line.
class PromptFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct PromptEntry {
  std::string prompt;  // as written (only CSV/JSON quoting is undone)
  int line = 0;        // 1-based line where the prompt's record starts
  std::vector<std::string> other_fields;  // a .jsonl record's keys besides "prompt" (not read)
};

// The largest prompt file read (COCO's 2014 validation captions, 200k of them, are about 10 MB). A file is
// held whole, then as prompts: about twice its size in memory.
constexpr uint64_t kMaxPromptFileBytes = uint64_t{256} << 20;

// The prompts of `file`, in file order, by extension (in any case: .TXT is .txt).
// Lines end with LF, CRLF or a CR alone, in every format.
//  .txt   one prompt per line; blank lines and comments (lines whose first
//         non-blank character is '#') are skipped;
//  .tsv   a header line with one "Prompt" column (any case), tab-separated, no quoting;
//  .csv   a header with one "Prompt" column, RFC 4180 quoting (see delimited_text.h);
//  .jsonl one JSON object per line with a string "prompt" field.
// A .json file is refused (one JSON value is not a list of lines; the error
// names .jsonl). Other extensions are read as .jsonl if the first non-blank
// line starts with '{', else as .txt. In .tsv/.csv, when "Prompt" is the last column, a
// record with more fields than the header is taken to hold an unquoted
// separator inside the prompt, and the extra fields are joined back (the
// COCO caption lists are written that way). Throws PromptFileError for an
// unreadable file, a missing column, a bad record, an empty prompt, or a file
// without prompts.
std::vector<PromptEntry> read_prompts(const std::filesystem::path& file);

// The longest prompt taken, in bytes. Emu3, the longest context of the three families, has 9216 positions,
// and its tokens average about 4 bytes of English text: a prompt of 1 MiB is some 30 times what any model here
// can read. Tokenising one costs about 40 bytes of memory per byte of text (a 10 MB prompt: 380 MB), so
// the longest prompt a file can hold (256 MiB) would take 10 GB only to be refused as too long.
constexpr uint64_t kMaxPromptBytes = uint64_t{1} << 20;

// Why a prompt cannot be used as it is ("invalid UTF-8 at byte 7", "a NUL byte at byte 6": the
// manifest's JSON and the PNG's text chunks cannot hold it; longer than kMaxPromptBytes), or "" when it
// can. Read prompt files keep such prompts, so that a batch records each as failed on its own line.
std::string prompt_text_problem(const std::string& prompt);

}  // namespace sjd::io

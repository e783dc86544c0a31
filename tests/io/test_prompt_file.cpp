// Prompt files in the four formats, their error cases, and the shared
// evaluation prompt sets when the shared data folder is present.
#include "io/prompt_file.h"
#include "testing/test_support.h"

#include <catch2/catch.hpp>

namespace io = sjd::io;
using Catch::Matchers::Contains;
using sjd::testing::TempDir;

namespace {

std::vector<io::PromptEntry> read_written(const TempDir& dir, const std::string& name, const std::string& text) {
  sjd::testing::write_file(dir / name, text);
  return io::read_prompts(dir / name);
}

std::string error_of(const TempDir& dir, const std::string& name, const std::string& text) {
  try {
    read_written(dir, name, text);
  } catch (const io::PromptFileError& error) {
    return error.what();
  }
  FAIL("reading " << name << " did not throw PromptFileError");
  return "";
}

std::vector<std::string> prompts_of(const std::vector<io::PromptEntry>& entries) {
  std::vector<std::string> prompts;
  for (const auto& entry : entries) prompts.push_back(entry.prompt);
  return prompts;
}

std::vector<int> lines_of(const std::vector<io::PromptEntry>& entries) {
  std::vector<int> lines;
  for (const auto& entry : entries) lines.push_back(entry.line);
  return lines;
}

}  // namespace

TEST_CASE("txt: one prompt per non-empty line", "[io][prompts]") {
  TempDir dir("prompts_txt");
  const std::string byte_order_mark = "\xEF\xBB\xBF";
  const auto entries =
      read_written(dir, "p.txt", byte_order_mark + "a photo of a cat\r\n\n   \nan \"astronaut\", riding\n"
                                 "\xE3\x80\x80\xC2\xA0\xE2\x80\x8B\n");  // blank: U+3000, U+00A0, U+200B
  CHECK(prompts_of(entries) == std::vector<std::string>{"a photo of a cat", "an \"astronaut\", riding"});
  CHECK(lines_of(entries) == std::vector<int>{1, 4});
}

TEST_CASE("a CR alone ends a line in every format, as in files saved on classic Mac OS", "[io][prompts]") {
  TempDir dir("prompts_cr");
  // Read as before, these were one prompt holding the CRs (and one .tsv record, one broken JSON line).
  const auto text = read_written(dir, "mac.txt", "a red apple\ra green ring\r\ra blue cube\r");
  CHECK(prompts_of(text) == std::vector<std::string>{"a red apple", "a green ring", "a blue cube"});
  CHECK(lines_of(text) == std::vector<int>{1, 2, 4});
  CHECK(prompts_of(read_written(dir, "mac.tsv", "Prompt\tNote\ra cat\tx\ra dog\ty")) ==
        std::vector<std::string>{"a cat", "a dog"});
  CHECK(prompts_of(read_written(dir, "mac.jsonl", "{\"prompt\": \"a cat\"}\r{\"prompt\": \"a dog\"}")) ==
        std::vector<std::string>{"a cat", "a dog"});
  // CRLF is one line ending, also inside a quoted CSV field.
  CHECK(prompts_of(read_written(dir, "crlf.csv", "Prompt\r\n\"two\r\nlines\"\r\nthird\r")) ==
        std::vector<std::string>{"two\r\nlines", "third"});
}

TEST_CASE("txt: lines whose first non-blank character is # are comments", "[io][prompts]") {
  TempDir dir("prompts_txt_comments");
  const auto entries = read_written(dir, "c.txt", "# GenEval-style header\na red apple\n  # indented note\nprompt #2 keeps its hash\n");
  CHECK(prompts_of(entries) == std::vector<std::string>{"a red apple", "prompt #2 keeps its hash"});
  CHECK(lines_of(entries) == std::vector<int>{2, 4});
  // A file of comments alone holds no prompts.
  CHECK_THAT(error_of(dir, "only.txt", "# nothing here\n#\n"), Contains("no prompts"));
}

TEST_CASE("tsv: the Prompt column of a header line", "[io][prompts]") {
  TempDir dir("prompts_tsv");
  const std::string creme_brulee = "cr\xC3\xA8me br\xC3\xBBl\xC3\xA9" "e";
  const auto entries = read_written(dir, "p.tsv",
                                    "Category\tPrompt\tNote\n"
                                    "Animals\ta \"quoted\" dog\t\n"
                                    "\n"
                                    "Art\t" + creme_brulee + "\tx\r\n");
  CHECK(prompts_of(entries) == std::vector<std::string>{"a \"quoted\" dog", creme_brulee});
  CHECK(lines_of(entries) == std::vector<int>{2, 4});
}

TEST_CASE("csv: RFC 4180 quoting", "[io][prompts]") {
  TempDir dir("prompts_csv");
  const auto entries = read_written(dir, "p.csv",
                                    "id,prompt\r\n"
                                    "1,\"a cat, a dog\"\r\n"
                                    "2,\"she said \"\"hi\"\"\"\n"
                                    "3,\"two\nlines\"\n"
                                    "\n"
                                    "4,plain text\n"
                                    "5,\"\"\"Head shot\"\" of a zebra\"");
  CHECK(prompts_of(entries) == std::vector<std::string>{"a cat, a dog", "she said \"hi\"", "two\nlines", "plain text",
                                                        "\"Head shot\" of a zebra"});
  CHECK(lines_of(entries) == std::vector<int>{2, 3, 4, 7, 8});
}

TEST_CASE("csv: stray quotes and unquoted commas in a last Prompt column", "[io][prompts]") {
  TempDir dir("prompts_csv_loose");
  const auto entries = read_written(dir, "p.csv",
                                    "Prompt\n"
                                    "\"Head shot\" of a zebra.\n"
                                    "A furry, black bear, in the wild.\n"
                                    "Meal of egg \"salad\", apple\n");
  CHECK(prompts_of(entries) == std::vector<std::string>{"\"Head shot\" of a zebra.",
                                                        "A furry, black bear, in the wild.",
                                                        "Meal of egg \"salad\", apple"});
}

TEST_CASE("jsonl: a prompt field per line", "[io][prompts]") {
  TempDir dir("prompts_jsonl");
  const auto entries = read_written(dir, "p.jsonl",
                                    "{\"prompt\": \"a cat\", \"seed\": 3}\n\n{\"prompt\": \"\\u732b \\\"q\\\"\"}\n");
  CHECK(prompts_of(entries) == std::vector<std::string>{"a cat", "\xE7\x8C\xAB \"q\""});
  CHECK(lines_of(entries) == std::vector<int>{1, 3});
  CHECK(entries[0].other_fields == std::vector<std::string>{"seed"});  // kept for the caller's warning
  CHECK(entries[1].other_fields.empty());
}

TEST_CASE("extensions count in any case, and a .json file is named as not a prompt per line", "[io][prompts]") {
  TempDir dir("prompts_case");
  CHECK(prompts_of(read_written(dir, "P.CSV", "Prompt,seed\n\"a, cat\",1\n")) == std::vector<std::string>{"a, cat"});
  CHECK(prompts_of(read_written(dir, "P.Tsv", "Note\tPrompt\nx\ta dog\n")) == std::vector<std::string>{"a dog"});
  CHECK_THAT(error_of(dir, "p.JSON", "[\"a red circle\", \"a blue square\"]\n"),
             Contains("p.JSON: a .json file holds one JSON value") && Contains(".jsonl"));
}

TEST_CASE("unknown extensions are sniffed", "[io][prompts]") {
  TempDir dir("prompts_sniff");
  CHECK(prompts_of(read_written(dir, "list", "\n{\"prompt\": \"json one\"}\n")) ==
        std::vector<std::string>{"json one"});
  CHECK(prompts_of(read_written(dir, "list.prompts", "line one\nline two\n")) ==
        std::vector<std::string>{"line one", "line two"});
}

TEST_CASE("prompt file errors name the file and line", "[io][prompts]") {
  TempDir dir("prompts_errors");
  const std::string root = dir.path().string();

  CHECK_THAT(error_of(dir, "a.tsv", "Category\tNote\nx\ty\n"),
             Contains(root + "/a.tsv:1") && Contains("no 'Prompt' column") && Contains("'Category', 'Note'"));
  CHECK_THAT(error_of(dir, "b.csv", "id,text\n1,x\n"), Contains("b.csv:1") && Contains("no 'Prompt' column"));
  CHECK_THAT(error_of(dir, "c.csv", "Prompt\nok\n\"never closed, at all\nmore\n"),
             Contains("c.csv:3") && Contains("unterminated quote"));
  CHECK_THAT(error_of(dir, "d.jsonl", "{\"prompt\": \"ok\"}\n{\"prompt\": \n"),
             Contains("d.jsonl:2") && Contains("invalid JSON"));
  CHECK_THAT(error_of(dir, "e.jsonl", "{\"text\": \"x\"}\n"), Contains("e.jsonl:1") && Contains("no \"prompt\" field"));
  CHECK_THAT(error_of(dir, "f.jsonl", "{\"Prompt\": \"x\"}\n"),
             Contains("no \"prompt\" field (it has \"Prompt\": the key is \"prompt\", in lower case)"));
  CHECK_THAT(error_of(dir, "f.jsonl", "{\"prompt\": 5}\n"), Contains("f.jsonl:1") && Contains("not a string"));
  CHECK_THAT(error_of(dir, "g.jsonl", "[\"prompt\"]\n"), Contains("g.jsonl:1") && Contains("not a JSON object"));
  CHECK_THAT(error_of(dir, "h.tsv", "Prompt\tNote\nfine\tx\nshort\n"),
             Contains("h.tsv:3") && Contains("1 fields but the header has 2"));
  CHECK_THAT(error_of(dir, "i.csv", "Prompt,Note\na,b,c\n"), Contains("i.csv:2") && Contains("3 fields"));
  CHECK_THAT(error_of(dir, "j.csv", "Prompt,Note\n\"\",x\n"), Contains("j.csv:2") && Contains("blank"));
  // Ideographic and zero width spaces show nothing: a blank prompt, as spaces are.
  CHECK_THAT(error_of(dir, "j.jsonl", "{\"prompt\": \"ok\"}\n{\"prompt\": \"\\u3000\\u200b\"}\n"),
             Contains("j.jsonl:2") && Contains("the prompt is blank"));
  CHECK_THAT(error_of(dir, "k.txt", "\n  \n"), Contains("k.txt") && Contains("no prompts"));
  // Two prompts where one was meant: the reader would have taken one of them without a word.
  CHECK_THAT(error_of(dir, "l.jsonl",
                      "{\"prompt\": \"ok\"}\n{\"prompt\": \"a\", \"id\": {\"prompt\": 1}, \"prompt\": \"b\"}\n"),
             Contains("l.jsonl:2") && Contains("key \"prompt\" appears twice in one object"));
  CHECK(prompts_of(read_written(dir, "nested.jsonl", "{\"meta\": {\"prompt\": \"x\"}, \"prompt\": \"y\"}\n")) ==
        std::vector<std::string>{"y"});
  CHECK_THAT(error_of(dir, "m.csv", "prompt,id,Prompt\na,1,b\n"),
             Contains("m.csv:1") && Contains("two 'Prompt' columns (1 and 3)"));
  CHECK_THAT(error_of(dir, "n.tsv", "Prompt\tPROMPT\na\tb\n"), Contains("n.tsv:1") && Contains("(1 and 2)"));
  CHECK_THROWS_WITH(io::read_prompts(dir / "absent.txt"), Contains("absent.txt") && Contains("not found"));
}

TEST_CASE("shared evaluation prompt sets read completely", "[io][prompts][shared]") {
  const auto prompts_dir = sjd::testing::source_dir() / ".." / "shared" / "data" / "prompts";
  if (!std::filesystem::exists(prompts_dir / "PartiPrompts.tsv") ||
      !std::filesystem::exists(prompts_dir / "coco_captions_30k.csv")) {
    SJD_SKIP_TEST("shared prompt sets not found under " << prompts_dir.string());
  }
  const auto parti = io::read_prompts(prompts_dir / "PartiPrompts.tsv");
  CHECK(parti.size() == 1632);
  CHECK(parti.front().prompt == "bond");
  CHECK(parti.front().line == 2);
  CHECK(parti.back().line == 1633);

  const auto coco = io::read_prompts(prompts_dir / "coco_captions_30k.csv");
  CHECK(coco.size() == 30000);
  CHECK(coco.front().prompt == "This wire metal rack holds several pairs of shoes and sandals");
  CHECK(coco.back().line == 30001);
  for (const auto& entry : coco) {
    INFO("line " << entry.line);
    REQUIRE(entry.prompt.find('\n') == std::string::npos);
  }
}

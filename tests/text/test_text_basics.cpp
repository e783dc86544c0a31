// UTF-8 helpers, the PCRE2 wrapper's dialect, the shared merge loop and strict JSON.
#include <catch2/catch.hpp>

#include <map>

#include "text/pair_merge.h"
#include "text/regex.h"
#include "text/strict_json.h"
#include "text/tokenizer.h"
#include "text/unicode.h"
#include "text/utf8.h"

using sjd::text::Regex;
namespace utf8 = sjd::text::utf8;

TEST_CASE("utf8::find_invalid rejects overlongs, surrogates, stray and truncated bytes", "[text][utf8]") {
  CHECK(utf8::find_invalid("plain ascii") == std::string::npos);
  CHECK(utf8::find_invalid("猫 \xF0\x9F\x90\xB1") == std::string::npos);
  CHECK(utf8::find_invalid("ab\xC0\xAF") == 2);       // overlong '/'
  CHECK(utf8::find_invalid("\xED\xA0\x80") == 0);     // surrogate U+D800
  CHECK(utf8::find_invalid("x\xF4\x90\x80\x80") == 1);  // above U+10FFFF
  CHECK(utf8::find_invalid("abc\xE7\x8C") == 3);      // truncated
  CHECK(utf8::find_invalid("\x80") == 0);
}

TEST_CASE("utf8::to_valid puts one U+FFFD per maximal ill-formed subpart", "[text][utf8]") {
  const std::string replacement = "\xEF\xBF\xBD";
  CHECK(utf8::to_valid("ok") == "ok");
  CHECK(utf8::to_valid("a\xE7\x8C" "b") == "a" + replacement + "b");             // one truncated sequence
  CHECK(utf8::to_valid("\x80\x80") == replacement + replacement);               // two stray bytes
  CHECK(utf8::to_valid("\xF0\x9F\x90") == replacement);                          // truncated emoji
  CHECK(utf8::to_valid("\xED\xA0\x80") == replacement + replacement + replacement);  // surrogate: ED then 2 strays
}

TEST_CASE("utf8::next and append round-trip every sequence length", "[text][utf8]") {
  const std::u32string code_points = {U'a', U'é', U'猫', U'🐱'};
  std::string text;
  for (const char32_t c : code_points) utf8::append(text, c);
  CHECK(text == "aé猫🐱");
  std::u32string decoded;
  for (std::size_t i = 0; i < text.size();) decoded += utf8::next(text, i);
  CHECK(decoded == code_points);
}

TEST_CASE("utf8::whole_prefix cuts between code points, never inside one", "[text][utf8]") {
  CHECK(utf8::whole_prefix("abc", 10) == "abc");
  CHECK(utf8::whole_prefix("abc", 2) == "ab");
  CHECK(utf8::whole_prefix("a\xE7\x8C\xAB", 2) == "a");  // 猫 takes bytes 2-4
  CHECK(utf8::whole_prefix("a\xE7\x8C\xAB", 4) == "a\xE7\x8C\xAB");
  CHECK(utf8::whole_prefix("\xE7\x8C\xAB", 1).empty());
}

TEST_CASE("unicode::is_blank: only white space and default-ignorable code points", "[text][utf8]") {
  using sjd::text::unicode::is_blank;
  CHECK(is_blank(""));
  CHECK(is_blank(" \t\r\n"));
  CHECK(is_blank("\u3000\u00a0\u2028\u200b\ufeff\u2060"));  // ideographic, no-break, line separator, zero width
  CHECK_FALSE(is_blank("\u3000x"));
  CHECK_FALSE(is_blank("\u00b7"));           // a middle dot shows
  CHECK_FALSE(is_blank("\xff"));             // invalid UTF-8 is refused for its bytes, not as blank
  CHECK_FALSE(is_blank(" \xE3\x80"));       // a cut ideographic space
}

TEST_CASE("Regex classes follow the reference engines, not PCRE2's defaults", "[text][regex]") {
  using Matches = std::vector<std::pair<std::size_t, std::size_t>>;
  // \s is White_Space: U+0085 and U+3000 are in it, U+180E (Mongolian vowel separator) is not.
  const Regex spaces(R"(\s+)", "test \\s");
  CHECK(spaces.find_all("a\xC2\x85" "b") == Matches{{1, 3}});
  CHECK(spaces.find_all("a\xE3\x80\x80" "b") == Matches{{1, 4}});
  CHECK(spaces.find_all("a\xE1\xA0\x8E" "b").empty());
  const Regex not_space_or_letter(R"([^\s\p{L}]+)", "test class");
  CHECK(not_space_or_letter.find_all("a\xE1\xA0\x8E" "b") == Matches{{1, 4}});
  // \w takes combining marks (Rust's word class); PCRE2's alone would not.
  const Regex word(R"(\w+)", "test \\w");
  CHECK(word.find_all("e\xCC\x81 x") == Matches{{0, 3}, {4, 5}});
  // Case-insensitive groups and Unicode properties work in UTF mode.
  const Regex contraction(R"((?i:'s)|\p{N})", "test (?i)");
  CHECK(contraction.find_all("IT'S 4") == Matches{{2, 4}, {5, 6}});
}

TEST_CASE("Regex empty matches advance by one character, literals are literal", "[text][regex]") {
  using Matches = std::vector<std::pair<std::size_t, std::size_t>>;
  const Regex empty_or_x("x*", "test empty");
  CHECK(empty_or_x.find_all("ax\xC3\xA9") == Matches{{0, 0}, {1, 2}, {2, 2}, {4, 4}});
  CHECK(Regex::literal("a.b(", "test literal").find_all("a.b( axb(") == Matches{{0, 4}});
  CHECK(Regex::literal("", "test empty literal").find_all("abc").empty());
  CHECK(Regex("[ab]", "test replace").replace_all("cabd", "-") == "c--d");
}

TEST_CASE("Regex errors name the pattern's description, bad text is refused", "[text][regex]") {
  CHECK_THROWS_WITH(Regex("(unclosed", "tokenizer.json: pre_tokenizer.pattern.Regex"),
                    Catch::Contains("tokenizer.json: pre_tokenizer.pattern.Regex: invalid regular expression"));
  CHECK_THROWS_AS(Regex("a", "test").find_all("\xFF"), sjd::text::TokenizerError);
}

TEST_CASE("merge_pairs merges the lowest-ranked pair first, leftmost on ties", "[text][merge]") {
  // Symbols are single letters; the rank table says which neighbours merge.
  const std::string word = "abcab";
  std::map<std::string, int64_t> ranks = {{"ab", 1}, {"bc", 0}, {"ca", 2}, {"abc", 3}, {"aab", 5}};
  std::vector<sjd::text::MergeSymbol> symbols;
  for (std::size_t i = 0; i < word.size(); ++i) symbols.push_back({i, 1, -1});
  const auto rank_of = [&](const sjd::text::MergeSymbol& l, const sjd::text::MergeSymbol& r) -> std::optional<sjd::text::PairMerge> {
    const auto found = ranks.find(word.substr(l.start, l.length + r.length));
    if (found == ranks.end()) return std::nullopt;
    return sjd::text::PairMerge{found->second, found->second};
  };
  // bc (0) first: a|bc|a|b; then ab (1): a|bc|ab; then a+bc = abc (3): abc|ab.
  const auto merged = sjd::text::merge_pairs(symbols, rank_of);
  std::vector<std::string> pieces;
  for (const auto& s : merged) pieces.push_back(word.substr(s.start, s.length));
  CHECK(pieces == std::vector<std::string>{"abc", "ab"});
  // Ties go to the leftmost pair.
  const std::string tie = "aaa";
  ranks = {{"aa", 0}};
  std::vector<sjd::text::MergeSymbol> tie_symbols{{0, 1, -1}, {1, 1, -1}, {2, 1, -1}};
  const auto rank_tie = [&](const sjd::text::MergeSymbol& l, const sjd::text::MergeSymbol& r) -> std::optional<sjd::text::PairMerge> {
    if (tie.substr(l.start, l.length + r.length) != "aa") return std::nullopt;
    return sjd::text::PairMerge{0, 7};
  };
  const auto tied = sjd::text::merge_pairs(tie_symbols, rank_tie);
  REQUIRE(tied.size() == 2);
  CHECK(tied[0].length == 2);
  CHECK(tied[0].id == 7);
}

TEST_CASE("strict JSON refuses repeated keys, deep nesting and numbers too small for a double", "[text][json]") {
  using sjd::text::parse_strict_json;
  const auto refusal = [](const std::string& text) {
    try {
      parse_strict_json(text, "f.json");
    } catch (const sjd::text::StrictJsonError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  // 1e-400 was read as 0 without a word: a temperature of 0 decodes greedily.
  CHECK(refusal(R"({"t": 1e-400})") == "f.json: the number 1e-400 is too close to 0 for a double, which would hold 0");
  CHECK(refusal(R"([0.5, -2.5E-999])").find("the number -2.5E-999 is too close to 0") != std::string::npos);
  // A number of a thousand digits is quoted by its first forty.
  const std::string long_zero = refusal("[0." + std::string(1000, '0') + "1]");
  CHECK(long_zero.find("the number 0." + std::string(38, '0') + "... is too close to 0") != std::string::npos);
  // Zeros written as zeros, and numbers a double holds only as a subnormal, are numbers.
  const auto zeros = parse_strict_json(R"([0.0, -0.0, 0e-400, 0.000E+5, 4e-320, 1e-300])", "f.json");
  CHECK(zeros[0] == 0.0);
  CHECK(zeros[2] == 0.0);
  CHECK(zeros[3] == 0.0);
  CHECK(zeros[4].get<double>() > 0.0);
  CHECK(zeros[5].get<double>() == 1e-300);
  CHECK(refusal(R"({"a": {"k": 1, "k": 2}})") == "f.json: key \"k\" appears twice in one object");
  // The same key in two objects is no repetition.
  CHECK(parse_strict_json(R"({"a": {"k": 1}, "b": {"k": 2}, "k": [{"k": 3}]})", "f.json")["k"][0]["k"] == 3);
  CHECK(refusal(std::string(64, '[') + std::string(64, ']')) == "accepted");
  CHECK(refusal(std::string(65, '[') + std::string(65, ']')).find("nested more than 64 levels deep") !=
        std::string::npos);
  CHECK(refusal("{\"a\": 1,}").find("f.json: invalid JSON: parse error at line 1, column 9") == 0);
  CHECK(refusal("[1] 2").find("f.json: invalid JSON") == 0);  // one value per file
  const auto document = parse_strict_json(R"({"s": "x", "n": null, "b": true, "i": -3, "u": 7, "f": 0.25})", "f.json");
  CHECK(document.dump() == R"({"b":true,"f":0.25,"i":-3,"n":null,"s":"x","u":7})");
}

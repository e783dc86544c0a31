// The matcher that finds special and added tokens in text: leftmost, then longest.
#include <catch2/catch.hpp>

#include <string>

#include "text/literal_matcher.h"

using sjd::text::LiteralMatcher;

TEST_CASE("literals are found leftmost first, the longest where several start together", "[text][literal]") {
  LiteralMatcher matcher;
  CHECK(matcher.empty());
  matcher.add("ab", 1);
  matcher.add("abcd", 2);
  matcher.add("bc", 3);
  matcher.add("", 9);  // ignored: it would match everywhere
  CHECK_FALSE(matcher.empty());
  const auto at = [&](const std::string& text, std::size_t from = 0) { return matcher.find(text, from); };
  auto m = at("xabcdx");
  REQUIRE(m);
  CHECK((m->begin == 1 && m->end == 5 && m->value == 2));
  m = at("xabce");  // "abcd" breaks off at 'e': the longest whole literal from there is "ab"
  REQUIRE(m);
  CHECK((m->begin == 1 && m->end == 3 && m->value == 1));
  m = at("xabce", 2);
  REQUIRE(m);
  CHECK((m->begin == 2 && m->end == 4 && m->value == 3));
  CHECK_FALSE(at("aaxx"));
  CHECK_FALSE(at("", 0));
  matcher.add("ab", 7);  // a repeated literal keeps the last value
  CHECK(at("ab")->value == 7);
}

TEST_CASE("many literals sharing a prefix are found in one walk per text byte", "[text][literal]") {
  // "az", "azz", ..., as an adversarial tokenizer.json may add them; the text has none until its end.
  LiteralMatcher matcher;
  for (int k = 1; k <= 2000; ++k) matcher.add("a" + std::string(static_cast<std::size_t>(k), 'z'), k);
  const std::string text = std::string(200000, 'a') + "azzz";
  const auto m = matcher.find(text, 0);
  REQUIRE(m);
  CHECK((m->begin == 200000 && m->end == 200004 && m->value == 3));
}

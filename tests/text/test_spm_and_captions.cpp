// The SentencePiece loader's errors, and LlamaGen's caption cleaning.
// (Encoding parity with the sentencepiece library is in tests/python/test_tokenizer_parity.py.)
#include <catch2/catch.hpp>

#include "testing/test_support.h"
#include "text/caption_cleaning.h"
#include "text/tokenizer.h"

using sjd::testing::TempDir;
using sjd::text::clean_caption;

TEST_CASE("spm: a missing or broken model is an error naming the file", "[text][spm]") {
  TempDir dir("spm");
  CHECK_THROWS_WITH(sjd::text::load_tokenizer("spm", dir / "absent.model", {}),
                    Catch::Contains("absent.model: cannot load the SentencePiece model"));
  sjd::testing::write_file(dir / "broken.model", "this is not a protobuf");
  CHECK_THROWS_WITH(sjd::text::load_tokenizer("spm", dir / "broken.model", {}),
                    Catch::Contains("broken.model: cannot load the SentencePiece model"));
  CHECK_THROWS_WITH(sjd::text::load_tokenizer("spm", dir / "broken.model", {{"add_eos", true}}),
                    Catch::Contains("add_eos: unknown key (this tokenizer takes no options)"));
}

TEST_CASE("caption cleaning lower-cases and collapses white space", "[text][caption]") {
  CHECK(clean_caption("  A Photo\tof  the\n\nCAT  ") == "a photo of the cat");
  CHECK(clean_caption("\u00c9T\u00c9 \u039a\u0391\u039b\u039f") == "\u00e9t\u00e9 \u03ba\u03b1\u03bb\u03bf");
  CHECK(clean_caption("a\u3000b\u00a0c") == "a b c");
  CHECK(clean_caption("   ") == "");
}

TEST_CASE("caption cleaning removes URLs, HTML tags and @handles", "[text][caption]") {
  CHECK(clean_caption("A dog https://example.com/x?y=1 running") == "a dog running");
  CHECK(clean_caption("see www.Example.org/page now") == "see now");
  CHECK(clean_caption("from shop.example.com/items/42 today") == "from today");
  CHECK(clean_caption("<p>A <b>bold</b> cat</p><br/>") == "a bold cat");
  CHECK(clean_caption("fish &amp; chips &lt;3") == "fish & chips <3");
  CHECK(clean_caption("a < b and c > d") == "a < b and c > d");  // not tags
  CHECK(clean_caption("photo by @jane_doe99 of <person> smiling") == "photo by of person smiling");
  CHECK_THROWS_AS(clean_caption("bad \xFF"), sjd::text::TokenizerError);
}

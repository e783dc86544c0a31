#pragma once
// LlamaGen's prompt cleaning before its T5 tokenizer, reduced to the steps that
// matter for typed prompts. LlamaGen (language/t5.py, after PixArt and
// DeepFloyd IF) runs a long web-caption scrubber; sjd implements this subset:
//  1. lower-case every code point (Unicode full mapping);
//  2. "<person>" becomes "person";
//  3. remove URLs: "http://" / "https://" / "www." and the non-space run after
//     them, and bare domains "name.com" (also .co .ru .net .org .edu .gov .it)
//     with the path after them;
//  4. remove HTML tags ("<b>", "</p>", "<img src=x/>": '<', optional '/', a
//     letter, then anything up to '>'), then decode the entities &amp; &lt;
//     &gt; &quot; &#39; &nbsp;;
//  5. remove "@handle" mentions;
//  6. turn every run of white space into one space and trim both ends.
// Not done (LlamaGen does them): percent-decoding, ftfy repairs, removing CJK
// characters, unifying dashes and quotes, and its heuristics for file names,
// IP addresses, product codes and shop phrases.
#include <string>

namespace sjd::text {

// `caption` must be valid UTF-8; throws TokenizerError otherwise.
std::string clean_caption(const std::string& caption);

}  // namespace sjd::text

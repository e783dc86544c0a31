#include "unknown_arguments.h"

#include <algorithm>
#include <cctype>
#include <regex>
#include <string>
#include <vector>

#include "text/closest_name.h"

namespace sjd::app {
namespace {

// How CLI11 2.x classifies a word (App::_recognize): "--name[=value]" is a long flag,
// "-x..." a short one unless x is a digit (a negative number), anything else a value.
enum class Word { kLong, kShort, kValue, kEndOfFlags };

Word classify(const std::string& word) {
  if (word == "--") return Word::kEndOfFlags;
  const auto starts_name = [](char c) { return c != '-' && c != '!' && c != ' ' && c != '\n'; };
  if (word.size() > 2 && word.compare(0, 2, "--") == 0 && starts_name(word[2])) return Word::kLong;
  if (word.size() > 1 && word[0] == '-' && starts_name(word[1]) && !std::isdigit(static_cast<unsigned char>(word[1]))) {
    return Word::kShort;
  }
  return Word::kValue;
}

// The option `name` names among `command`'s options (its own and --help), or nullptr.
const CLI::Option* find_flag(const CLI::App& command, const std::string& name, bool long_name) {
  for (const CLI::Option* option : command.get_options()) {
    for (const std::string& known : long_name ? option->get_lnames() : option->get_snames()) {
      if (known == name) return option;
    }
  }
  return nullptr;
}

bool takes_value(const CLI::Option& option) { return option.get_items_expected_max() > 0; }

// How many following words a flag takes whatever they look like (CLI11 gathers its minimum count
// unconditionally).
int values_taken(const CLI::Option& option) {
  if (!takes_value(option)) return 0;
  return std::min(option.get_type_size_min(), option.get_items_expected_min());
}

std::string in_command(const CLI::App& command) {
  return command.get_parent() == nullptr ? "" : command.get_name() + ": ";
}

std::string unknown_flag_message(const CLI::App& command, const std::string& typed) {
  std::vector<std::string> known;
  for (const CLI::Option* option : command.get_options()) {
    for (const std::string& name : option->get_lnames()) known.push_back("--" + name);
  }
  std::string message = in_command(command) + "unknown option '" + typed + "'";
  if (typed.compare(0, 2, "--") == 0) {
    if (const auto guess = text::closest_name(typed, known)) message += " -- did you mean '" + *guess + "'?";
  }
  const bool top_level = command.get_parent() == nullptr;
  return message + " (sjd " + (top_level ? "" : command.get_name() + " ") + "--help lists them)";
}

// CLI11 reads "-p=a cat" as the value "=a cat" (as getopt does): a prompt or path starting with '='
// is far likelier a slip than meant. The message gives the two spellings that work.
std::string short_equals_message(const CLI::App& command, const CLI::Option& option, char name,
                                 const std::string& value) {
  const char quote = value.find('\'') == std::string::npos ? '\'' : '"';
  const std::string quoted = quote + value + quote;
  const std::string flag = std::string("-") + name;
  std::string message = in_command(command) + flag + " takes its value after a space (" + flag + " " + quoted + ")";
  if (!option.get_lnames().empty()) {
    message += " or an '=' in its long form (--" + option.get_lnames().front() + "=" + quoted + ")";
  }
  return message;
}

// A word of short flags ("-q", "-L8", "-qp"), read as CLI11 does: flags without a value may be
// clustered, and the first flag with one takes the rest of the word or, if none is left, the next
// words. Returns a problem, or "" with `skip` set to the words its flag takes.
std::string check_short_flags(const CLI::App& command, const std::string& word, int& skip) {
  skip = 0;
  for (size_t j = 1; j < word.size(); ++j) {
    // CLI11 puts "-<rest>" back as a word of its own, and a digit there makes it a value: its call.
    if (j > 1 && std::isdigit(static_cast<unsigned char>(word[j]))) return "";
    const CLI::Option* option = find_flag(command, std::string(1, word[j]), false);
    if (option == nullptr) return unknown_flag_message(command, std::string("-") + word[j]);
    if (!takes_value(*option)) continue;
    const std::string rest = word.substr(j + 1);
    if (!rest.empty() && rest[0] == '=') return short_equals_message(command, *option, word[j], rest.substr(1));
    if (rest.empty()) skip = values_taken(*option);
    return "";
  }
  return "";
}

}  // namespace

std::string unknown_argument_problem(CLI::App& app, int argc, const char* const* argv) {
  for (int i = 1; i < argc && std::string(argv[i]) != "--"; ++i) {
    const std::string word = argv[i];
    // Help is printed whatever else the line holds, as CLI11 does; "-qh" is a cluster ending in -h. Leaving
    // a line to CLI11 is always safe: it only loses the did-you-mean.
    const bool short_cluster = word.size() > 1 && word[0] == '-' && word[1] != '-';
    if (word == "--help" || (short_cluster && word.find('h') != std::string::npos)) return "";
  }
  const CLI::App* command = &app;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    const Word kind = classify(word);
    if (kind == Word::kEndOfFlags) return "";
    if (kind == Word::kValue) {
      if (command != &app) continue;  // a command's own positional words are CLI11's to judge
      std::vector<std::string> names;
      for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
        names.push_back(sub->get_name());
      }
      for (const std::string& name : names) {
        if (name == word) command = app.get_subcommand(word);
      }
      if (command == &app) return text::unknown_name_message("command", word, names);
      continue;
    }
    if (kind == Word::kShort) {
      int skip = 0;
      if (std::string problem = check_short_flags(*command, word, skip); !problem.empty()) return problem;
      i += skip;
      continue;
    }
    const std::string name = word.substr(2, word.find('=') - 2);
    const CLI::Option* flag = find_flag(*command, name, true);
    if (flag == nullptr) return unknown_flag_message(*command, "--" + name);
    if (word.find('=') == std::string::npos) i += values_taken(*flag);
  }
  return "";
}

std::string parse_error_text(const CLI::ParseError& error) {
  static const std::regex repeated(R"(^(\S+): At Most 1 required but received (\d+)$)");
  const std::string text = error.what();
  std::smatch match;
  if (std::regex_match(text, match, repeated)) {
    return match[1].str() + " is given " + match[2].str() + " times; give it once";
  }
  return text;
}

}  // namespace sjd::app

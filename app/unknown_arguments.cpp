#include "unknown_arguments.h"

#include <cctype>
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

// The flag `word` names among `command`'s options (its own and --help), or nullptr.
const CLI::Option* find_flag(const CLI::App& command, const std::string& word, Word kind) {
  const std::string name = kind == Word::kLong ? word.substr(2, word.find('=') - 2) : word.substr(1, 1);
  for (const CLI::Option* option : command.get_options()) {
    const auto& names = kind == Word::kLong ? option->get_lnames() : option->get_snames();
    for (const std::string& known : names) {
      if (known == name) return option;
    }
  }
  return nullptr;
}

// How many following words the flag takes whatever they look like (CLI11 gathers its minimum
// count unconditionally), none when its value is attached ("--seed=3", "-L8").
int values_taken(const CLI::Option& option, const std::string& word, Word kind) {
  const bool attached = kind == Word::kLong ? word.find('=') != std::string::npos : word.size() > 2;
  if (attached || option.get_items_expected_max() == 0) return 0;
  return std::min(option.get_type_size_min(), option.get_items_expected_min());
}

std::string unknown_flag_message(const CLI::App& command, const std::string& word, Word kind) {
  std::vector<std::string> known;
  for (const CLI::Option* option : command.get_options()) {
    for (const std::string& name : option->get_lnames()) known.push_back("--" + name);
  }
  const std::string typed = kind == Word::kLong ? word.substr(0, word.find('=')) : word.substr(0, 2);
  const bool top_level = command.get_parent() == nullptr;
  std::string message = (top_level ? "" : command.get_name() + ": ") + "unknown option '" + typed + "'";
  if (kind == Word::kLong) {
    if (const auto guess = text::closest_name(typed, known)) message += " -- did you mean '" + *guess + "'?";
  }
  return message + " (sjd " + (top_level ? "" : command.get_name() + " ") + "--help lists them)";
}

}  // namespace

std::string unknown_argument_problem(CLI::App& app, int argc, const char* const* argv) {
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
    const CLI::Option* flag = find_flag(*command, word, kind);
    if (flag == nullptr) return unknown_flag_message(*command, word, kind);
    // CLI11 reads "-p=a cat" as the value "=a cat" (as getopt does): a prompt or path starting with '='
    // is far likelier a slip than meant.
    if (kind == Word::kShort && word.size() > 2 && word[2] == '=' && flag->get_items_expected_max() > 0) {
      const std::string long_name = flag->get_lnames().empty() ? "" : "--" + flag->get_lnames().front();
      return command->get_name() + ": " + word.substr(0, 2) + " takes its value after a space (" + word.substr(0, 2) +
             " '" + word.substr(3) + "')" + (long_name.empty() ? "" : " or an '=' in its long form (" + long_name +
             "='" + word.substr(3) + "')");
    }
    i += values_taken(*flag, word, kind);
  }
  return "";
}

}  // namespace sjd::app

#include "run_guarded.h"

#include <c10/util/Exception.h>

#include <iostream>
#include <new>
#include <stdexcept>
#include <string>

#include "engine/bundle.h"
#include "engine/created_folders.h"
#include "io/atomic_file.h"
#include "io/prompt_file.h"
#include "io/text_renderer.h"
#include "io/weights.h"
#include "stop_signals.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace sjd::app {

int& command_exit_code() {
  static int code = 0;
  return code;
}

namespace {

// A message that quotes the user's input can be as long as the input (a 60 MB string in a config file
// came back whole); past a few screens its middle is left out.
std::string shortened(const std::string& message) {
  constexpr size_t kKeep = 2000;  // bytes kept at each end
  if (message.size() <= 2 * kKeep + 100) return message;
  const auto inside_character = [&](size_t at) { return (static_cast<unsigned char>(message[at]) & 0xC0) == 0x80; };
  const size_t head = text::utf8::whole_prefix(message, kKeep).size();
  size_t tail = message.size() - kKeep;
  while (tail < message.size() && inside_character(tail)) ++tail;
  return message.substr(0, head) + " [... " + std::to_string(tail - head) + " bytes left out ...] " +
         message.substr(tail);
}

// Bad input: its message, exit code 2.
int input_error(const char* message) {
  std::cerr << "sjd: " << shortened(message) << "\n";
  return 2;
}

// Anything else: exit code 1.
int run_error(const char* message) {
  std::cerr << "sjd: error: " << shortened(message) << "\n";
  return 1;
}

int exit_code_of(const std::function<int()>& body) {
  try {
    return body();
  } catch (const engine::InputError& e) {
    return input_error(e.what());
  } catch (const io::WeightError& e) {
    return input_error(e.what());
  } catch (const io::PromptFileError& e) {
    return input_error(e.what());
  } catch (const io::FileError& e) {
    return input_error(e.what());
  } catch (const text::TokenizerError& e) {
    return input_error(e.what());
  } catch (const io::FontError& e) {  // $SJD_FONT names no font, or the labels' font is not installed
    return input_error(e.what());
  } catch (const std::invalid_argument& e) {
    return input_error(e.what());
  } catch (const std::bad_alloc&) {  // past every estimate: still one line, not "std::bad_alloc"
    return run_error("out of memory");
  } catch (const c10::Error& e) {  // LibTorch appends a multi-line backtrace to what()
    return run_error(e.what_without_backtrace());
  } catch (const std::exception& e) {
    return run_error(e.what());
  }
}

}  // namespace

int run_guarded(const std::function<int()>& body) {
  install_cleanup_signals();  // a Ctrl-C before the command's own handling also leaves no empty folder
  const int code = exit_code_of(body);
  if (code != 0) engine::remove_empty_created_folders();  // a failed run leaves no empty output folder behind
  return code;
}

}  // namespace sjd::app

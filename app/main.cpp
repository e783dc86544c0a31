// sjd: fast autoregressive text-to-image generation with speculative Jacobi
// decoding and its successors. Subcommands live in cmd_*.cpp; the engine in lib/.
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <new>
#include <string>

#include "cli_common.h"
#include "run_guarded.h"
#include "unknown_arguments.h"

namespace {

// A closed stdin, stdout or stderr (`>&-`) would let the next file sjd opens take its number, and the
// text meant for the terminal would go into that file: each gets a device of its own first, /dev/full
// for the outputs so that writing to them fails (with_stdout_written says so).
bool stdout_was_closed = false;

void occupy_closed_standard_files() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    stdout_was_closed = stdout_was_closed || fd == 1;
    const int opened = ::open(fd == 0 ? "/dev/null" : "/dev/full", fd == 0 ? O_RDONLY : O_WRONLY);
    if (opened >= 0 && opened != fd) ::close(opened);  // the lowest free number is fd's: anything else is odd
  }
}

// What a command printed must have reached its reader: for `tokenize` and `manifest` stdout is the
// whole result, and a full disk or a closed stdout lost it with exit code 0.
int with_stdout_written(int code) {
  errno = 0;
  std::cout.flush();
  if (std::fflush(stdout) != 0 || std::ferror(stdout) || std::cout.fail()) {
    const int error = errno;
    const std::string reason = stdout_was_closed ? "it is closed" : error != 0 ? std::strerror(error) : "";
    std::cerr << "sjd: error: cannot write to standard output" << (reason.empty() ? "" : ": ") << reason << "\n";
    return code != 0 ? code : 1;
  }
  return code;
}

int run(int argc, char** argv);

}  // namespace

int main(int argc, char** argv) {
  occupy_closed_standard_files();
  try {
    return with_stdout_written(run(argc, argv));
  } catch (const std::bad_alloc&) {  // outside a command's own handling (run_guarded): setting up the CLI
    std::cerr << "sjd: error: out of memory\n";
    return 1;
  }
}

namespace {

int run(int argc, char** argv) {
  // A decoding step frees and reallocates the same few-MB temporaries every step;
  // glibc would hand them back to the OS each time (mmap above 128 KiB, heap trim),
  // and an sjd-pac image then took ~128k page faults instead of ~27k.
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  CLI::App app{"sjd: autoregressive text-to-image generation, accelerated by speculative Jacobi decoding"};
  app.require_subcommand(1);
  app.set_version_flag("--version", sjd::app::version_text);
  sjd::app::add_generate_command(app);
  sjd::app::add_batch_command(app);
  sjd::app::add_manifest_command(app);
  sjd::app::add_compare_command(app);
  sjd::app::add_tokenize_command(app);
  sjd::app::add_inspect_command(app);
  sjd::app::add_bench_command(app);
  for (CLI::App* command : app.get_subcommands({})) sjd::app::refuse_empty_values(*command);
  const std::string unknown = sjd::app::unknown_argument_problem(app, argc, argv);
  if (!unknown.empty()) {
    std::cerr << "sjd: " << unknown << "\n";
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::cerr << "sjd: " << sjd::app::parse_error_text(e) << " (see --help)\n";  // bad flags: bad input, one line
    return 2;
  }
  return sjd::app::command_exit_code();
}

}  // namespace

// sjd's OpenMP threads sleep at a barrier instead of spinning, unless the user chose how they wait.
//
// Why: LibTorch's CPU operators run on libgomp, whose idle threads spin for about 300000 iterations
// before they sleep. A decoding step is hundreds of small parallel regions, so where several processes
// share the cores (batch shards on one machine, a test suite, a build) a spinning thread holds a core
// that another process's thread needs, and every region then waits on a descheduled thread. On the
// 2-core development machine three `sjd generate` at once each took 8-35x its time alone with spinning
// and 2-2.5x with OMP_WAIT_POLICY=PASSIVE; alone, passive threads cost about 7-14% (docs/benchmarks.md,
// "OpenMP threads that sleep").
//
// libgomp reads its environment once, in its own initialiser. The only code of this program that runs
// before that is the executable's DT_PREINIT_ARRAY, and a setenv there is lost: the C library's own
// initialiser, which runs after it, sets the environment back to the one the process started with. So
// the program starts itself again from there with the variable added. No library's initialiser has run
// yet (LibTorch's are most of a start's time), so the exec costs a few milliseconds.
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace {

bool chose_openmp_wait(const char* entry) {
  return std::strncmp(entry, "OMP_WAIT_POLICY=", 16) == 0 || std::strncmp(entry, "GOMP_SPINCOUNT=", 15) == 0;
}

// `envp` is read directly: the C library's getenv does not work yet at this point.
void restart_with_passive_openmp_wait(int /*argc*/, char** argv, char** envp) {
  size_t count = 0;
  for (; envp[count] != nullptr; ++count) {
    if (chose_openmp_wait(envp[count])) return;  // the user (or a benchmark) chose: leave it
  }
  char** env = static_cast<char**>(std::malloc((count + 2) * sizeof(char*)));
  if (env == nullptr) return;
  std::memcpy(env, envp, count * sizeof(char*));
  env[count] = const_cast<char*>("OMP_WAIT_POLICY=PASSIVE");
  env[count + 1] = nullptr;
  execve("/proc/self/exe", argv, env);
  std::free(env);  // no /proc (the exec failed): run on with libgomp's default
}

}  // namespace

// The dynamic linker calls the functions of .preinit_array before any shared library's initialiser.
__attribute__((section(".preinit_array"), used)) static void (*const kRestartWithPassiveOpenmpWait)(int, char**,
                                                                                                   char**) =
    &restart_with_passive_openmp_wait;

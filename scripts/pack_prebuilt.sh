#!/usr/bin/env bash
# Copies the binaries a GPU check needs (sjd and tests/tests_cuda, a few MB; after a
# full build also the whole CTest suite, suite.tar.gz) out of a CUDA build folder,
# with a BUILD_INFO saying what they were built from and what they need, so they
# can travel to a GPU machine and be run there with
# `SJD_PREBUILT=DEST scripts/device_check.sh` (docs/gpu.md).
#   scripts/pack_prebuilt.sh BUILD_DIR DEST
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -ne 2 ]; then
  echo "usage: scripts/pack_prebuilt.sh BUILD_DIR DEST" >&2; exit 2
fi
build_dir=$1 dest=$2
for binary in sjd tests/tests_cuda; do
  [ -f "$build_dir/$binary" ] || { echo "pack_prebuilt: no $build_dir/$binary (a CUDA build?)" >&2; exit 2; }
done
newest_version() {  # newest_version GLIBC|GLIBCXX BINARY
  objdump -T "$2" | grep -o -E "$1_[0-9.]+" | sort -V -u | tail -1
}
cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$build_dir/CMakeCache.txt"; }

rm -rf "$dest"
mkdir -p "$dest/tests"
cp "$build_dir/sjd" "$dest/"
cp "$build_dir/tests/tests_cuda" "$dest/tests/"
python=$(cache_value Python3_EXECUTABLE)
# The whole CTest suite too, when the build has every test program (a full build, not SJD_TARGET's
# two): the programs and CTest's files. Those files name this machine's folders and Python, which
# suite.paths records; scripts/device_check.sh points them at its own where it unpacks the suite.
if [ -f "$build_dir/tests/tests_engine" ] && [ -f "$build_dir/CTestTestfile.cmake" ]; then
  mapfile -t suite_files < <(cd "$build_dir" && {
    find . -name CTestTestfile.cmake
    find tests -maxdepth 1 \( -name '*.cmake' -o -name 'tests_*' -type f -perm -u+x \)
  } | sed 's#^\./##' | sort -u)
  tar -czf "$dest/suite.tar.gz" -C "$build_dir" "${suite_files[@]}"
  # The folders as CMake wrote them into those files (not as this shell spells them: a link would differ).
  printf 'build_dir=%s\nsource_dir=%s\npython=%s\n' "$(cache_value CMAKE_CACHEFILE_DIR)" \
    "$(cache_value CMAKE_HOME_DIRECTORY)" "$python" > "$dest/suite.paths"
fi
{
  if [ -n "${SJD_COMMIT:-}" ]; then  # named by the caller: the device tool's copy may hold an older .git
    echo "commit: $SJD_COMMIT (SJD_COMMIT)"
  else
    echo "commit: $(git rev-parse HEAD)$(git diff --quiet HEAD -- lib app tests cmake CMakeLists.txt || echo ' (with local changes)')"
  fi
  echo "built: $(date -u -r "$build_dir/sjd" '+%Y-%m-%d %H:%M UTC') on $(. /etc/os-release; echo "$PRETTY_NAME"), glibc $(ldd --version | head -1 | grep -o '[0-9.]*$')"
  echo "torch: $("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null)"
  echo "nvcc: $("$(cache_value CMAKE_CUDA_COMPILER)" --version | grep -o 'release .*')"
  echo "needs: $(newest_version GLIBC "$dest/sjd") $(newest_version GLIBCXX "$dest/sjd")"
} > "$dest/BUILD_INFO"
echo "pack_prebuilt: $(du -sh "$dest" | cut -f1) in $dest$([ -f "$dest/suite.tar.gz" ] && echo ", the CTest suite included")"
cat "$dest/BUILD_INFO"

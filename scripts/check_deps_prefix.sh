#!/usr/bin/env bash
# Checks the no-apt path of scripts/setup.sh (SJD_DEPS_PREFIX) on a machine that
# HAS the packages installed, by making the system's copies unusable: inside a
# private mount namespace every file of the Debian packages is covered with an
# empty one, so a header, library or CMake file taken from the system instead of
# the prefix breaks the build or the run. Then it checks that CMake recorded
# only paths inside the prefix, and runs the program and a test program with
# the runtime libraries covered too. Needs root (unshare -m) and the .debs of
# scripts/gather_gpu_deps.sh; not run in CI.
#   scripts/check_deps_prefix.sh        (SJD_JOBS, default 2; build folder build-deps)
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=/tmp/sjd-deps-check
build_dir=build-deps
if [ "$(id -u)" -ne 0 ] || ! unshare -m true 2>/dev/null; then
  echo "check_deps_prefix: needs root and unshare -m" >&2; exit 2
fi
read -r -a dev_packages <<< "$(scripts/setup.sh --print-library-packages)"
runtime_packages=($(ls third_party_debs/*.deb | xargs -n1 basename | cut -d_ -f1 | grep -v -x -F "${dev_packages[@]/#/-e}"))

# Regular files only: covering a -dev package's libfoo.so symlink would cover
# the runtime library it points to.
package_files() { dpkg -L "$@" | while IFS= read -r f; do if [ -f "$f" ] && [ ! -L "$f" ]; then echo "$f"; fi; done; }
package_files "${dev_packages[@]}" > /tmp/sjd-dev-files
# mount itself needs libpcre2-8 (through libselinux): cover it last.
package_files "${runtime_packages[@]}" | grep -E '\.so[.0-9]*$' | awk '/pcre2-8/ {last = last $0 "\n"; next} 1; END {printf "%s", last}' > /tmp/sjd-runtime-files
echo "check_deps_prefix: covering $(wc -l < /tmp/sjd-dev-files) files of ${dev_packages[*]}"

rm -f "$build_dir/CMakeCache.txt"  # configure again; what was compiled is kept
unshare -m --propagation private bash -c '
  set -e
  while IFS= read -r f; do mount --bind /dev/null "$f"; done < /tmp/sjd-dev-files
  SJD_DEPS_PREFIX='"$prefix"' SJD_BUILD_DIR='"$build_dir"' SJD_JOBS=${SJD_JOBS:-2} \
    SJD_TARGET="sjd tests_text" scripts/setup.sh'

echo "check_deps_prefix: what CMake found"
outside=0
for key in nlohmann_json_DIR CLI11_DIR Catch2_DIR Stb_INCLUDE_DIR Stb_LIBRARY PCRE2_INCLUDE_DIR PCRE2_LIBRARY \
           SentencePiece_INCLUDE_DIR SentencePiece_LIBRARY ICU_INCLUDE_DIR ICU_UC_LIBRARY_RELEASE ICU_I18N_LIBRARY_RELEASE; do
  value=$(sed -n "s/^$key:[A-Z]*=//p" "$build_dir/CMakeCache.txt")
  echo "  $key = $value"
  case "$value" in "$prefix"/*) ;; *) echo "  ^ not inside $prefix" >&2; outside=1 ;; esac
done
[ "$outside" -eq 0 ] || exit 1

echo "check_deps_prefix: running with the system's runtime libraries covered ($(wc -l < /tmp/sjd-runtime-files) files)"
unshare -m --propagation private bash -c '
  set -e
  while IFS= read -r f; do mount --bind /dev/null "$f"; done < /tmp/sjd-runtime-files
  # grep and sed need libpcre2-8 themselves: filter in bash.
  ldd '"$build_dir"'/sjd | while IFS= read -r line; do
    case $line in *icu*|*pcre*|*stb*|*sentencepiece*) echo "$line" ;; esac
  done
  '"$build_dir"'/sjd generate --model models/default -p "a large blue circle on the left, on a yellow background" \
    -o /tmp/sjd-deps-check.png --seed 7
  OMP_NUM_THREADS=1 '"$build_dir"'/tests/tests_text'
echo "check_deps_prefix: ok"

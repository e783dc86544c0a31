#!/usr/bin/env bash
# The one place that installs what sjd needs and builds it. Idempotent.
#   scripts/setup.sh            install packages (if missing), configure, build into build/
# Environment: SJD_BUILD_DIR (default build), SJD_JOBS (default nproc), SJD_FUZZ=1 (also clang for fuzz/),
#              SJD_TARGET (default: everything; e.g. "sjd" for the program alone).
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${SJD_BUILD_DIR:-build}
jobs=${SJD_JOBS:-$(nproc)}
apt_packages=(cmake g++ ninja-build python3 python3-pip nlohmann-json3-dev libcli11-dev catch2 libstb-dev libpcre2-dev libsentencepiece-dev libicu-dev)
# The fuzz targets (scripts/fuzz.sh) need clang and its libFuzzer runtime.
[ "${SJD_FUZZ:-0}" = 1 ] && apt_packages+=(clang libclang-rt-14-dev)

missing=()
for pkg in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
fi

python=${PYTHON:-python3}
# An existing torch is used as it is (the GPU machine's 2.11 CUDA wheel); otherwise
# the pinned CPU build. The rest of the Python tooling is pinned in requirements.txt.
if ! "$python" -c "import torch" 2>/dev/null; then
  echo "setup: installing torch==2.13.0 (CPU build)"
  "$python" -m pip install -q torch==2.13.0
fi
if ! "$python" -c "import safetensors, pytest, numpy, transformers, tokenizers, tiktoken, sentencepiece" 2>/dev/null; then
  echo "setup: installing Python tooling from requirements.txt"
  grep -v '^torch==' requirements.txt | "$python" -m pip install -q -r /dev/stdin
fi

torch_prefix=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
generator=""
command -v ninja >/dev/null && generator="-G Ninja"
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  cmake -S . -B "$build_dir" $generator -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$torch_prefix" -DPython3_EXECUTABLE="$(command -v "$python")"
fi
start=$(date +%s)
cmake --build "$build_dir" -j "$jobs" ${SJD_TARGET:+--target "$SJD_TARGET"}
echo "setup: build finished in $(( $(date +%s) - start )) s ($build_dir)"

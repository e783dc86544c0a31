#!/usr/bin/env bash
# The one place that installs what sjd needs and builds it. Idempotent.
#   scripts/setup.sh            install packages (if missing), configure, build into build/
#   scripts/setup.sh --print-library-packages
#                               print the Debian library packages the build needs
#                               (what scripts/gather_gpu_deps.sh downloads)
# Environment: SJD_BUILD_DIR (default build), SJD_JOBS (default nproc), SJD_FUZZ=1 (also clang for fuzz/),
#              SJD_TARGET (default: everything; e.g. "sjd" for the program alone,
#                "sjd tests_text" for several),
#              SJD_DEPS_PREFIX: take the Debian libraries from this folder instead of
#                apt (a machine without our packages and without network, such as the
#                GPU machine). The .deb files of SJD_DEPS_DEBS (default third_party_debs,
#                filled by scripts/gather_gpu_deps.sh) are unpacked there with `dpkg -x`
#                first; cmake, a C++ compiler and ninja must already be installed.
#              PYTHON (default python3): the Python whose torch is built against.
#              CUDACXX or CUDA_HOME: the nvcc / CUDA toolkit, when that torch has CUDA
#                (default /usr/local/cuda, else nvcc on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."

# fonts-dejavu-core: DejaVu Sans, the labels of compare.png and --heatmap (found at run time;
# elsewhere SJD_FONT names a .ttf file).
tool_packages=(cmake g++ ninja-build python3 python3-pip fonts-dejavu-core)
library_packages=(nlohmann-json3-dev libcli11-dev catch2 libstb-dev libpcre2-dev libsentencepiece-dev libicu-dev)
if [ "${1:-}" = --print-library-packages ]; then
  echo "${library_packages[@]}"
  exit 0
fi

build_dir=${SJD_BUILD_DIR:-build}
jobs=${SJD_JOBS:-$(nproc)}
deps_prefix=${SJD_DEPS_PREFIX:-}
deps_cmake_args=()
if [ -n "$deps_prefix" ]; then
  scripts/unpack_deps.sh "${SJD_DEPS_DEBS:-third_party_debs}" "$deps_prefix"
  deps_prefix=$(realpath "$deps_prefix")
  deps_libdir=$deps_prefix/usr/lib/x86_64-linux-gnu
  # CMAKE_LIBRARY_PATH: also for a compiler without Debian's multiarch folders.
  # --disable-new-dtags writes the programs' search path as DT_RPATH, which the
  # loader also uses for the libraries' own needs (libicuuc needs libicudata,
  # which a RUNPATH would not find outside the system folders).
  deps_cmake_args=(-DCMAKE_LIBRARY_PATH="$deps_libdir" -DICU_ROOT="$deps_prefix/usr"
                   -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags)
  echo "setup: Debian libraries from $deps_prefix (no apt)"
else
  # The fuzz targets (scripts/fuzz.sh) need clang and its libFuzzer runtime.
  [ "${SJD_FUZZ:-0}" = 1 ] && tool_packages+=(clang libclang-rt-14-dev)
  missing=()
  for pkg in "${tool_packages[@]}" "${library_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing Debian packages: ${missing[*]}"
    sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
  fi
fi

python=${PYTHON:-python3}
# Debian's own python3 is marked externally managed (PEP 668) and its pip refuses to install into it: say
# what to do before pip fails with a screen of text (PIP_BREAK_SYSTEM_PACKAGES=1 is pip's own way past it).
needs_install=0
"$python" -c "import torch, safetensors, pytest, numpy, transformers, tokenizers, tiktoken, sentencepiece" \
  2>/dev/null || needs_install=1
if [ "$needs_install" = 1 ] && [ -z "${SJD_DEPS_PREFIX:-}" ] && [ -z "${PIP_BREAK_SYSTEM_PACKAGES:-}" ] &&
   "$python" -c 'import os, sys, sysconfig
sys.exit(not (sys.prefix == sys.base_prefix and
              os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))))' 2>/dev/null; then
  echo "setup: $python is managed by Debian (PEP 668), so pip may not install torch and requirements.txt into it." >&2
  echo "setup: make a virtual environment and set up with it:" >&2
  echo "         python3 -m venv ~/.venvs/sjd && PYTHON=~/.venvs/sjd/bin/python scripts/setup.sh" >&2
  echo "       (needs Debian's python3-venv), or install into it anyway with PIP_BREAK_SYSTEM_PACKAGES=1." >&2
  exit 1
fi
# An existing torch is used as it is (the GPU machine's 2.11 CUDA wheel); otherwise
# the pinned CPU build. The rest of the Python tooling is pinned in requirements.txt.
if ! "$python" -c "import torch" 2>/dev/null; then
  echo "setup: installing torch==2.13.0 (CPU build)"
  "$python" -m pip install -q torch==2.13.0
fi
if ! "$python" -c "import safetensors, pytest, numpy, transformers, tokenizers, tiktoken, sentencepiece" 2>/dev/null; then
  if [ -n "${SJD_DEPS_PREFIX:-}" ]; then
    # The GPU machine has no network: the program builds without them; only the Python tests need them.
    echo "setup: warning: $python lacks some of requirements.txt's packages (no install with SJD_DEPS_PREFIX)"
  else
    echo "setup: installing Python tooling from requirements.txt"
    grep -v '^torch==' requirements.txt | "$python" -m pip install -q -r /dev/stdin
  fi
fi

torch_prefix=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
# A CUDA Torch's CMake files look for the toolkit with the old FindCUDA, which
# takes the folder above the first nvcc on PATH (wrong for a wrapper script such
# as /usr/local/bin/nvcc), and they link libnvrtc, which a toolkit assembled from
# NVIDIA's pip wheels may lack: then the copy that came with Torch is used.
cuda_cmake_args=()
if "$python" -c 'import sys, torch; sys.exit(torch.version.cuda is None)' 2>/dev/null; then
  nvcc=${CUDACXX:-${CUDA_HOME:-/usr/local/cuda}/bin/nvcc}
  [ -x "$nvcc" ] || nvcc=$(command -v nvcc || true)
  [ -n "$nvcc" ] || { echo "setup: Torch has CUDA but no nvcc was found (set CUDACXX)" >&2; exit 1; }
  # An nvcc found on PATH may be a wrapper script; a dry run names the toolkit it runs from (TOP).
  # One named by CUDACXX is taken as it is.
  if [ -z "${CUDACXX:-}" ]; then
    top=$("$nvcc" --dryrun -c -x cu /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ TOP=//p' | head -1 || true)
    [ -n "$top" ] && [ -x "$top/bin/nvcc" ] && nvcc=$(realpath "$top/bin/nvcc")
  fi
  cuda_root=$(dirname "$(dirname "$(realpath "$nvcc")")")
  cuda_cmake_args=(-DCMAKE_CUDA_COMPILER="$nvcc" -DCUDAToolkit_ROOT="$cuda_root" -DCUDA_TOOLKIT_ROOT_DIR="$cuda_root")
  nvrtc=""
  if [ ! -e "$cuda_root/lib64/libnvrtc.so" ] && [ ! -e "$cuda_root/lib/libnvrtc.so" ]; then
    nvrtc=$("$python" -c 'import glob, os, torch
site = os.path.dirname(os.path.dirname(torch.__file__))
print(min(glob.glob(site + "/nvidia/**/lib/libnvrtc.so.[0-9]*", recursive=True), default=""))')
    [ -n "$nvrtc" ] && cuda_cmake_args+=(-DCUDA_nvrtc_LIBRARY="$nvrtc")
  fi
  echo "setup: Torch has CUDA; nvcc $nvcc${nvrtc:+, nvrtc from $nvrtc}"
fi
generator=""
command -v ninja >/dev/null && generator="-G Ninja"
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  cmake -S . -B "$build_dir" $generator -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$torch_prefix${deps_prefix:+;$deps_prefix/usr}" \
    -DPython3_EXECUTABLE="$(command -v "$python")" "${deps_cmake_args[@]}" "${cuda_cmake_args[@]}"
fi
start=$(date +%s)
cmake --build "$build_dir" -j "$jobs" ${SJD_TARGET:+--target $SJD_TARGET}
echo "setup: build finished in $(( $(date +%s) - start )) s ($build_dir)"

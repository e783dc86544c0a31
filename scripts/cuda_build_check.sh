#!/usr/bin/env bash
# Builds the whole CUDA configuration of sjd on a machine WITHOUT a GPU, so that
# compile and link errors of the CUDA code show up before time on a GPU is spent.
# Not run in CI: it downloads PyTorch's CUDA 13.0 build (several GB).
#   scripts/cuda_build_check.sh [venv|build|inspect|pack|all]      (default all)
# venv:    a throwaway virtual environment OUTSIDE the repository with torch==2.11.0
#          from PyPI (PyPI's Linux x86-64 wheel of 2.11.0 is the CUDA 13.0 build: it
#          depends on cuda-toolkit==13.0.2) and the Python tooling of requirements.txt.
# build:   scripts/setup.sh with that Python: configures against its torch and the
#          local nvcc 13, builds everything (sjd, cuda_ops.cpp, tests_cuda).
# inspect: the CUDA runtime the wheel bundles and the one nvcc links, and what
#          the binaries need at run time (RPATH, needed libraries, glibc).
# pack:    copies sjd and tests_cuda into build-prebuilt/ (git-ignored, 5 MB) to
#          be carried to the GPU machine (docs/gpu.md); after a build of every
#          target (SJD_TARGET unset) also the whole CTest suite (suite.tar.gz, 14 MB
#          in all), which device_check.sh's test stage runs there.
# Environment: SJD_CUDA_VENV (default /work/venv-cu130, or ~/venv-cu130 without a
#              writable /work), SJD_BUILD_DIR (default build-cuda), SJD_JOBS
#              (default 2), CUDACXX / CUDA_HOME as for scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

stage=${1:-all}
default_venv=/work/venv-cu130
[ -d /work ] && [ -w /work ] || default_venv=$HOME/venv-cu130
venv=${SJD_CUDA_VENV:-$default_venv}
build_dir=${SJD_BUILD_DIR:-build-cuda}
case "$stage" in venv|build|inspect|pack|all) ;; *)
  echo "cuda_build_check: unknown stage '$stage' (venv, build, inspect, pack or all)" >&2; exit 2 ;;
esac
case "$(realpath -m "$venv")/" in
  "$(pwd)"/*) echo "cuda_build_check: the venv must lie outside the repository: $venv" >&2; exit 2 ;;
esac

make_venv() {
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  if ! "$venv/bin/python" -c "import torch; assert torch.__version__.startswith('2.11.0')" 2>/dev/null; then
    echo "cuda_build_check: installing torch==2.11.0 into $venv (several GB)"
    "$venv/bin/python" -m pip install -q torch==2.11.0
  fi
  if ! "$venv/bin/python" -c "import sys, torch; sys.exit(torch.version.cuda is None)"; then
    echo "cuda_build_check: the torch in $venv has no CUDA" >&2; exit 1
  fi
  grep -v '^torch==' requirements.txt | "$venv/bin/python" -m pip install -q -r /dev/stdin
  "$venv/bin/python" -c "import torch; print('cuda_build_check: torch', torch.__version__, 'CUDA', torch.version.cuda)"
}

build() {
  if command -v ccache >/dev/null; then
    export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_CUDA_COMPILER_LAUNCHER=ccache
  fi
  PYTHON="$venv/bin/python" SJD_BUILD_DIR="$build_dir" SJD_JOBS=${SJD_JOBS:-2} scripts/setup.sh
  for target in sjd tests/tests_cuda lib/libsjd_kernels.a; do
    [ -f "$build_dir/$target" ] || { echo "cuda_build_check: $build_dir/$target was not built" >&2; exit 1; }
  done
}

newest_version() {  # newest_version GLIBC|GLIBCXX BINARY
  objdump -T "$2" | grep -o -E "$1_[0-9.]+" | sort -V -u | tail -1
}

inspect() {
  local site
  site=$("$venv/bin/python" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
  echo "== nvcc: $(sed -n 's/^CMAKE_CUDA_COMPILER:[A-Z]*=//p' "$build_dir/CMakeCache.txt")"
  "$(sed -n 's/^CMAKE_CUDA_COMPILER:[A-Z]*=//p' "$build_dir/CMakeCache.txt")" --version | tail -2
  echo "== the wheel's CUDA packages"
  "$venv/bin/python" -m pip list 2>/dev/null | grep -E '^(torch|cuda-toolkit|nvidia-cuda-runtime|nvidia-cuda-nvrtc) ' || true
  find "$site/nvidia" -name 'libcudart.so*' -o -name 'libnvrtc.so*' | sed 's/^/  /'
  for binary in "$build_dir/sjd" "$build_dir/tests/tests_cuda"; do
    echo "== $binary"
    readelf -d "$binary" | grep -E 'RPATH|RUNPATH|NEEDED' | sed 's/^ *0x[0-9a-f]* *//'
    echo "-- resolved here (ldd):"
    ldd "$binary" | grep -E 'cuda|nvrtc|torch|c10|not found' || true
    echo "-- newest symbol versions it needs: $(newest_version GLIBC "$binary") $(newest_version GLIBCXX "$binary")"
  done
  echo "== nvcc's code targets for lib/kernels (build.ninja)"
  grep -o -E -e '--generate-code=[^ ]+|-gencode[= ][^ ]+|-arch[= ][^ ]+' "$build_dir/build.ninja" | sort -u
}

case "$stage" in
  venv) make_venv ;;
  build) build ;;
  inspect) inspect ;;
  pack) scripts/pack_prebuilt.sh "$build_dir" build-prebuilt ;;
  all) make_venv; build; inspect; scripts/pack_prebuilt.sh "$build_dir" build-prebuilt ;;
esac

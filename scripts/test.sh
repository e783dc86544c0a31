#!/usr/bin/env bash
# README's second command and what CI runs: set up, build, run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build_dir=${SJD_BUILD_DIR:-build}
ctest --test-dir "$build_dir" --output-on-failure -j "${SJD_JOBS:-$(nproc)}"

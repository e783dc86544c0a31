#!/usr/bin/env bash
# README's second command and what CI runs: set up, build, run every test.
# SJD_FUZZ=1 also builds the libFuzzer targets with clang and runs each for
# FUZZ_SECONDS (default 30; docs/security.md).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build_dir=${SJD_BUILD_DIR:-build}
ctest --test-dir "$build_dir" --output-on-failure -j "${SJD_JOBS:-$(nproc)}"
if [ "${SJD_FUZZ:-0}" = 1 ]; then
  scripts/fuzz.sh
fi

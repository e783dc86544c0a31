#!/usr/bin/env bash
# README's second command and what CI runs: set up, build, run every test.
# SJD_FUZZ=1 also builds the libFuzzer targets with clang and runs each for
# FUZZ_SECONDS (default 30; docs/security.md). SJD_SLURM=0 skips scripts/test_slurm.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build_dir=${SJD_BUILD_DIR:-build}
ctest --test-dir "$build_dir" --output-on-failure -j "${SJD_JOBS:-$(nproc)}"
# The Slurm path with a real one-node cluster (root or sudo: it installs slurm-wlm and munge and starts their
# daemons; about 3 minutes on 2 cores). SJD_SLURM=0 skips it.
if [ "${SJD_SLURM:-1}" = 1 ]; then
  scripts/test_slurm.sh "$build_dir"
fi
if [ "${SJD_FUZZ:-0}" = 1 ]; then
  scripts/fuzz.sh
fi

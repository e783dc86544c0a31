#!/usr/bin/env bash
# Step compression of every method on the bundled default model over a fixed
# prompt list (the first N PartiPrompts), printed by `sjd compare`.
# Usage: scripts/bench_methods.sh [N prompts, default 8] [seeds per prompt, default 2] [extra sjd flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-8}
seeds=${2:-2}
shift $(( $# > 2 ? 2 : $# )) || true
prompts=../shared/data/prompts/PartiPrompts.tsv
if [ ! -f "$prompts" ]; then
  echo "bench_methods: $prompts not found (the shared data folder sits beside the checkout)" >&2
  exit 2
fi
[ -x build/sjd ] || SJD_TARGET=sjd scripts/setup.sh
# The default model is tiny: one thread avoids OpenMP spin-waits on a shared 2-core machine.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
out=out/bench_methods
echo "bench_methods: $(date -u +%F) $(git rev-parse --short HEAD) $(nproc --all) cores; ${count} PartiPrompts x ${seeds} seeds"
build/sjd compare --model models/default --prompts "$prompts" --limit "$count" --seeds "$seeds" \
  --methods ar,jacobi,sjd,scd-mc,scd-gs,sjd-pac,sjd-pac:cool --out-dir "$out" "$@"

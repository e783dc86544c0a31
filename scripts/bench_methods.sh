#!/usr/bin/env bash
# Step compression of every method on the bundled default model over its held-out scene
# captions (scripts/scenes.py, evaluation split), at the model's default sampling
# settings, printed by `sjd compare`.
# Usage: scripts/bench_methods.sh [N captions, default 8] [seeds per caption, default 2] [extra sjd flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-8}
seeds=${2:-2}
shift $(( $# > 2 ? 2 : $# )) || true
[ -x build/sjd ] || SJD_TARGET=sjd scripts/setup.sh
# The default model is tiny: one thread avoids OpenMP spin-waits on a shared 2-core machine.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
out=out/bench_methods
mkdir -p "$out"
python3 scripts/scenes.py --split eval --count "$count" --out-jsonl "$out/prompts.jsonl" --prompts
echo "bench_methods: $(date -u +%F) $(git rev-parse --short HEAD) $(nproc --all) cores; ${count} held-out captions x ${seeds} seeds"
rm -rf "$out/runs" "$out/runs.jsonl"  # fresh timings: compare would resume an earlier benchmark's runs
build/sjd compare --model models/default --prompts "$out/prompts.jsonl" --limit "$count" --seeds "$seeds" \
  --methods ar,jacobi,sjd,scd-mc,scd-gs,sjd-pac,sjd-pac:cool --out-dir "$out" "$@"

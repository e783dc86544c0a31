#!/usr/bin/env bash
# Wall-clock of every lossless method on the bundled default model, CPU, one thread:
# automatic windows (the default) next to the papers' fixed windows, on held-out
# scene captions; then the whole process per method (`sjd generate`, start to PNG).
# Usage: scripts/bench_windows.sh [N captions, default 3] [seeds per caption, default 3]
# Figures only: nothing here asserts a speed. On a shared machine run it when quiet.
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-3}
seeds=${2:-3}
[ -x build/sjd ] || SJD_TARGET=sjd scripts/setup.sh
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
out=out/bench_windows
mkdir -p "$out"
python3 scripts/scenes.py --split eval --count "$count" --out-jsonl "$out/prompts.jsonl" --prompts
echo "bench_windows: $(date -u +%F) $(git rev-parse --short HEAD) $(nproc --all) cores, OMP_NUM_THREADS=$OMP_NUM_THREADS;" \
     "${count} held-out captions x ${seeds} seeds"
compare() {  # compare NAME METHODS [flags...]
  local name=$1 methods=$2
  shift 2
  echo "== $name"
  rm -rf "${out:?}/$name"  # fresh timings: compare would resume the runs of an earlier benchmark
  build/sjd compare --model models/default --prompts "$out/prompts.jsonl" --limit "$count" --seeds "$seeds" \
    --methods "$methods" --out-dir "$out/$name" "$@" | grep -v '^wrote'
}
compare auto ar,sjd,scd-mc,scd-gs,sjd-pac
compare fixed-16 ar,sjd,scd-mc,scd-gs -L 16
compare fixed-8 ar,sjd,scd-mc,scd-gs -L 8
compare pac-paper ar,sjd-pac -L 64 --pd-k 4 --pd-depth 3
compare pac-small ar,sjd-pac -L 8 --pd-k 2 --pd-depth 1

echo "== whole process: sjd generate, start to PNG (best of 3, first caption, seed 0)"
python3 - "$out" <<'PY'
import json, subprocess, sys, time
out = sys.argv[1]
prompt = json.loads(open(f"{out}/prompts.jsonl").readline())["prompt"]
for method in ["ar", "sjd", "scd-mc", "scd-gs", "sjd-pac"]:
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        subprocess.run(["build/sjd", "generate", "--model", "models/default", "-p", prompt, "--seed", "0",
                        "--method", method, "-o", f"{out}/{method}.png"], check=True, capture_output=True)
        best = min(best, time.perf_counter() - start)
    print(f"{method:8s} {best:.3f} s")
PY

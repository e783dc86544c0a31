#!/usr/bin/env bash
# Images per second of `sjd batch` against the batch size on the bundled default
# model: ar, scd-mc and sjd-pac with automatic windows (planned for the batch
# size), plus sjd-pac with a fixed small window, at one and two threads (CPU), or
# on a GPU (DEVICE=cuda; scripts/device_check.sh's batch stage runs it there).
# Each row is one batch run over the same held-out captions (the whole process:
# prefill, decode, VQ decode and PNG writes); the best of `reps` runs is kept.
# Usage: scripts/bench_batch.sh [N captions, default 16] [repetitions, default 2]
# Environment: BATCH_SIZES (default "1 2 4 8 16"; the vs-B=1 column compares with the first), METHODS
# (comma-separated, in order; default "ar,scd-mc,sjd-pac,sjd-pac -L 8 --pd-k 2 --pd-depth 1"), THREADS
# (default "1 2"), SJD (the program, default build/sjd, built if missing), DEVICE (default cpu), DTYPE
# (default f32), SJD_COMMIT (the commit it prints, before the tree's .git: the device tool's copy may hold an
# older one).
# Figures only: nothing here asserts a speed. On a shared machine run it when quiet.
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-16}
reps=${2:-2}
sjd=${SJD:-build/sjd}
[ -n "${SJD:-}" ] || [ -x build/sjd ] || SJD_TARGET=sjd scripts/setup.sh
out=out/bench_batch
mkdir -p "$out"
rm -f "$out/errors.log"
py=${PYTHON:-python3}
"$py" scripts/scenes.py --split eval --count "$count" --out-jsonl "$out/prompts.jsonl" --prompts
commit=${SJD_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
echo "bench_batch: $(date -u +%F) $commit $(nproc --all) cores, --device ${DEVICE:-cpu}" \
     "--dtype ${DTYPE:-f32}; ${count} held-out captions, best of ${reps}"
printf "%-8s %-34s %3s %9s %10s %12s\n" threads method B images/s vs-B=1 compression
for threads in ${THREADS:-1 2}; do
  IFS=, read -r -a methods <<<"${METHODS:-ar,scd-mc,sjd-pac,sjd-pac -L 8 --pd-k 2 --pd-depth 1}"
  for method in "${methods[@]}"; do
    base=""
    for b in ${BATCH_SIZES:-1 2 4 8 16}; do
      best=0 compression=0
      for _ in $(seq "$reps"); do
        rm -rf "$out/run"
        # A failed run (its reason in errors.log) leaves the row at 0 images/s; the table goes on.
        line=$(OMP_NUM_THREADS=$threads "$sjd" batch --model models/default --prompts "$out/prompts.jsonl" \
                 --out-dir "$out/run" --method $method --batch-size "$b" --device "${DEVICE:-cpu}" \
                 --dtype "${DTYPE:-f32}" 2>>"$out/errors.log" | grep "images/s" || true)
        [ -n "$line" ] || continue
        rate=$(sed -E 's/.*\(([0-9.]+) images\/s\).*/\1/' <<<"$line")
        compression=$(sed -E 's/.*compression ([0-9.]+)x.*/\1/' <<<"$line")
        best=$("$py" -c "print(max($best, $rate))")
      done
      [ -n "$base" ] || base=$best
      printf "%-8s %-34s %3s %9.2f %9.2fx %11sx\n" "$threads" "$method" "$b" "$best" \
        "$("$py" -c "print($best / $base if $base > 0 else 0)")" "$compression"
    done
  done
done

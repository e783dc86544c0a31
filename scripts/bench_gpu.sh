#!/usr/bin/env bash
# What a session with the GPU machine runs for docs/benchmarks.md: `sjd bench`
# on CUDA in bf16 for each full-size preset, the PyTorch eager reference of the
# same shapes and weights, and a results.md that puts them side by side with
# the date, machine, commit and commands, and holds them to issue 12's targets
# (scripts/bench_gpu_results.py). Kineto traces of the AR, L = 64 and
# tree steps go to out_dir/profile (sjd bench --profile).
#   scripts/bench_gpu.sh [out_dir]      (SJD_BUILD_DIR: build folder, default build;
#                                        SJD_BENCH_PRESETS: presets, default all three;
#                                        SJD_BENCH_DEVICE: cuda, or cpu for a smoke run with the tiny preset;
#                                        SJD_COMMIT: the commit, named before any .git;
#                                        PYTHON: the Python whose torch runs the eager reference, default python3;
#                                        SJD_BENCH_SECONDS: the script's whole time, so that a `sjd bench` that
#                                        hangs (in its kernel profiles, say) is stopped in time for results.md)
# The eager reference runs first, then `sjd bench`, which writes its JSON before the profiles: whatever
# stops it after that, results.md still gets its figures. Exit 1 when a command failed.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${SJD_BUILD_DIR:-build}
out=${1:-bench_results/$(date -u +%Y%m%d-%H%M%S)}
presets=${SJD_BENCH_PRESETS:-"lumina-7b-768 emu3-8b-720 llamagen-xl-512"}
device=${SJD_BENCH_DEVICE:-cuda}
python=${PYTHON:-python3}
deadline=$(( $(date +%s) + ${SJD_BENCH_SECONDS:-86400} ))
mkdir -p "$out"

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  # The device machine's copy of the tree may hold an old .git: SJD_COMMIT, when given, names the commit.
  if [ -n "${SJD_COMMIT:-}" ]; then
    echo "commit: $SJD_COMMIT (SJD_COMMIT)"
  elif git rev-parse HEAD > /dev/null 2>&1; then
    echo "commit: $(git rev-parse HEAD)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
  else
    echo "commit: unknown (no .git here and no SJD_COMMIT)"
  fi
  echo "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo unknown)"
  echo "torch: $("$python" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)')"
} > "$out/machine.txt"

failed=0
for preset in $presets; do
  sjd_cmd=("$build/sjd" bench --preset "$preset" --device "$device" --dtype bf16 --json "$out/$preset.sjd.json"
           --profile "$out/profile")
  eager_cmd=("$python" scripts/bench_eager_reference.py --preset "$preset" --device "$device" --dtype bf16
             --json "$out/$preset.eager.json")
  echo "\$ ${eager_cmd[*]}" | tee "$out/$preset.eager.txt"
  # At most half of what is left: a hang here must leave sjd bench its time.
  half=$(( (deadline - $(date +%s)) / 2 ))
  timeout --kill-after=5 $(( half > 1 ? half : 1 )) "${eager_cmd[@]}" 2>&1 | tee -a "$out/$preset.eager.txt" || {
    echo "bench_gpu: the eager reference exited ${PIPESTATUS[0]}" | tee -a "$out/$preset.eager.txt"; failed=1; }
  # What is left, less a few seconds for results.md.
  left=$(( deadline - $(date +%s) - 5 ))
  echo "\$ ${sjd_cmd[*]}" | tee "$out/$preset.sjd.txt"
  if [ "$left" -le 0 ]; then
    echo "bench_gpu: no time left for sjd bench" | tee -a "$out/$preset.sjd.txt"; failed=1; continue
  fi
  timeout --kill-after=5 "$left" "${sjd_cmd[@]}" 2>&1 | tee -a "$out/$preset.sjd.txt" || {
    echo "bench_gpu: sjd bench exited ${PIPESTATUS[0]}" | tee -a "$out/$preset.sjd.txt"; failed=1; }
done

"$python" scripts/bench_gpu_results.py "$out" $presets > "$out/results.md"
echo "wrote $out/results.md"
exit $failed

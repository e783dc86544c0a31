#!/usr/bin/env bash
# Seconds per `sjd generate` on the default model alone and with N copies at once, for each way the
# OpenMP threads may wait (docs/cli.md, "CPU threads"; docs/benchmarks.md, "OpenMP threads that sleep").
#   scripts/bench_openmp_wait.sh [N] [ROUNDS]    N copies at once (default 3), ROUNDS alone-and-together rounds (2)
# Each setting is an environment given to sjd: sjd's own (nothing set: passive), libgomp's default spin,
# and no OpenMP pool (one thread).
set -euo pipefail
cd "$(dirname "$0")/.."
copies=${1:-3}
rounds=${2:-2}
sjd=${SJD:-build/sjd}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
settings=("sjd's default (passive)|" "spinning (libgomp's default)|GOMP_SPINCOUNT=300000" "one thread|OMP_NUM_THREADS=1")

# Wall seconds of one generation with environment $1, image $2.
one() {
  local start end
  start=$(date +%s.%N)
  env $1 "$sjd" generate --model models/default -p "a red circle on the left" --seed 1 --quiet -o "$2" >/dev/null
  end=$(date +%s.%N)
  echo "$end - $start" | bc -l | xargs printf "%.2f"
}

echo "| setting | alone (s) | $copies at once (s each) |"
echo "|---|---|---|"
for entry in "${settings[@]}"; do
  name=${entry%%|*}
  environment=${entry#*|}
  alone=() together=()
  for ((r = 0; r < rounds; ++r)); do
    alone+=("$(one "$environment" "$work/alone.png")")
    for ((c = 0; c < copies; ++c)); do one "$environment" "$work/copy$c.png" >"$work/t$c" & done
    wait
    for ((c = 0; c < copies; ++c)); do together+=("$(cat "$work/t$c")"); done
  done
  echo "| $name | ${alone[*]} | ${together[*]} |"
done

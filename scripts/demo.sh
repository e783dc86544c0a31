#!/usr/bin/env bash
# README's first command: set up, build the program, and generate an image with
# the bundled default model. Usage: scripts/demo.sh ["prompt"] [method]
set -euo pipefail
cd "$(dirname "$0")/.."
SJD_TARGET=sjd scripts/setup.sh
prompt=${1:-"a small red circle on the left and a large blue square on the right, on a yellow background"}
method=${2:-sjd-pac}
mkdir -p out
build/sjd generate --model models/default -p "$prompt" --seed 7 --method "$method" \
  -o out/demo.png --stats out/demo_stats.json --heatmap out/demo_heatmap.png
echo "demo: image  $(pwd)/out/demo.png"
echo "demo: stats  $(pwd)/out/demo_stats.json (steps, step compression, latency breakdown)"
echo "demo: where the method committed each token: $(pwd)/out/demo_heatmap.png"

#!/usr/bin/env bash
# Makes an sjd bundle of a default-model transformer, as the shipped one was made: the
# Hugging Face folder's files (config, weights, tokenizer) copied into OUT_DIR, then the
# Lumina-mGPT exporter adds bundle.json and the decoder half of the VQGAN. Used by
# scripts/build_default_model.sh, scripts/device_train.sh and scripts/sweep_bundles.sh.
#
#   scripts/export_default_bundle.sh HF_DIR VQ_DIR IMAGE_SIZE OUT_DIR
#
# HF_DIR: train_default_model.py's output; VQ_DIR: train_vq.py's (vqgan.ckpt, vqgan.yaml);
# IMAGE_SIZE: the pixels per side the transformer was trained at. OUT_DIR's files are replaced.
# The model draws IMAGE_SIZE px images (size token <reserved08800+IMAGE_SIZE/32>); its top-k keeps a
# quarter of the 512 codes, as Lumina-mGPT's 2000 of 8192 does. The guidance scale was measured per
# model: 1.25 for the 128 px one, 1.5 for v2 at 64 px (docs/default_model.md); so was the temperature: 0.8
# for v4 at 128 px (scenes as good or better, as many tokens per step), 1.0 for v2. Every 128 px bundle made
# here gets v4's settings, sweep candidates included, so candidates are judged as the shipped model would be
# drawn. Two entries are added
# afterwards with the built program: the CPU step-cost profile (step_cost/cpu-f32) by `sjd bench
# --calibrate` on the machine it describes, and the windows' acceptance prior (window_prior) by
# scripts/window_prior.py (docs/default_model.md).
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: scripts/export_default_bundle.sh HF_DIR VQ_DIR IMAGE_SIZE OUT_DIR" >&2; exit 2; }
hf=$1 vq=$2 image_size=$3 out=$4
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
for f in "$hf/config.json" "$hf/model.safetensors.index.json" "$vq/vqgan.ckpt" "$vq/vqgan.yaml"; do
  [ -f "$f" ] || { echo "export_default_bundle: $f is missing" >&2; exit 2; }
done
cfg=1.25
[ "$image_size" = 64 ] && cfg=1.5
mkdir -p "$out"
rm -f "$out"/*
cp "$hf"/config.json "$hf"/model.safetensors.index.json "$hf"/tokenizer.json "$hf"/tokenizer_config.json \
   "$hf"/model*.safetensors "$out"/
"$python" scripts/export_bundle.py lumina-mgpt --hf-dir "$out" --out "$out" \
  --vqgan-ckpt "$vq/vqgan.ckpt" --vqgan-yaml "$vq/vqgan.yaml" \
  --resolutions "$image_size" --resolution "$image_size" --top-k 128 --cfg "$cfg" --name sjd-default-scenes
# Drafts start as the code above them: on these flat scenes that takes ~10% fewer steps than random drafts
# with shorter automatic windows (docs/default_model.md, "Draft initialisation"). The method is sjd-pac,
# exact and about 1.4x ar's images/s on a CPU with this model (docs/default_model.md, "Decoding method").
"$python" - "$out/bundle.json" "$image_size" <<'PY'
import json, sys
path, image_size = sys.argv[1], int(sys.argv[2])
with open(path) as f:
    bundle = json.load(f)
bundle["defaults"]["init"] = "repeat-up"
if image_size == 128:
    bundle["defaults"]["temperature"] = 0.8
bundle["defaults"]["method"] = "sjd-pac"
with open(path, "w") as f:
    json.dump(bundle, f, indent=2)
    f.write("\n")
PY

#!/usr/bin/env bash
# Trains a default-model candidate on a GPU machine (issue 15) in ten-minute commands:
# the stages of scripts/build_default_model.sh with --device cuda, the transformer
# paused at a time limit with its whole training state saved, and resumed by the
# next call from the state the previous one brought back. Needs only the machine's
# python3 (torch, numpy, safetensors, tokenizers); no build of sjd.
#
#   scripts/device_train.sh OUT_DIR [FROM_DIR]
#
# OUT_DIR   gets what this call made, every file under 16 MiB: text/ (tokenizer),
#           vq/ (vqgan.ckpt, vqgan.yaml, report), state/ (the paused transformer's
#           training state, in parts), hf/ (the encoded training scenes, codes.npz;
#           then the release files once training has finished), bundle/ (the sjd
#           bundle), a log per stage and stage_seconds.txt.
# FROM_DIR  an earlier call's OUT_DIR, brought back and carried with this call: its
#           text, VQ, encoded scenes and training state are reused (copied to
#           OUT_DIR first), so training continues where it paused.
# Exit code 0: the bundle is in OUT_DIR/bundle; 75: paused, call again with
# FROM_DIR = this OUT_DIR; anything else: a stage failed (its log is in OUT_DIR).
#
# Environment (defaults: the v1 model's settings): DEVICE (cuda), SEED (0),
#   VQ_STEPS (1200), LM_SCENES (16000), LM_STEPS (3000), LM_BATCH (16), LM_LR (3e-3),
#   HIDDEN (256), LAYERS (4), HEADS (4), INTERMEDIATE (704),
#   TIME_LIMIT (seconds of transformer training in this call, default 420),
#   PYTHON (python3).
# docs/default_model.md ("Training on a device machine") has the round trip.
set -uo pipefail
cd "$(dirname "$0")/.."

[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: scripts/device_train.sh OUT_DIR [FROM_DIR]" >&2; exit 2; }
out=$1
from=${2:-}
python=${PYTHON:-python3}
device=${DEVICE:-cuda}
seed=${SEED:-0}
if [ -n "$from" ] && [ ! -d "$from" ]; then
  echo "device_train: FROM_DIR $from is not a folder (an earlier call's OUT_DIR)" >&2
  exit 2
fi
mkdir -p "$out"
if [ -n "$from" ] && [ "$(realpath "$from")" != "$(realpath "$out")" ]; then
  cp -r "$from"/. "$out"/
fi
export PYTHONUNBUFFERED=1

stage() {  # stage NAME command...: runs a stage into OUT_DIR/NAME.log, records its wall time
  local name=$1 start code
  shift
  start=$(date +%s)
  echo "== $name"
  "$@" > "$out/$name.log" 2>&1
  code=$?
  echo "$name $(( $(date +%s) - start )) s (exit $code)" | tee -a "$out/stage_seconds.txt"
  tail -n 3 "$out/$name.log"
  return $code
}

if [ ! -f "$out/text/tokenizer.json" ]; then
  stage text-tokenizer "$python" scripts/train_text_tokenizer.py --out-dir "$out/text" --seed "$seed" || exit 1
fi
if [ ! -f "$out/vq/vqgan.ckpt" ]; then
  stage vq "$python" scripts/train_vq.py --out-dir "$out/vq" --seed "$seed" --device "$device" \
    ${VQ_STEPS:+--steps "$VQ_STEPS"} || exit 1
fi
stage transformer "$python" scripts/train_default_model.py --vq-dir "$out/vq" --text-dir "$out/text" \
  --out-dir "$out/hf" --seed "$seed" --device "$device" --state-dir "$out/state" --compact-state \
  --time-limit "${TIME_LIMIT:-420}" --scenes "${LM_SCENES:-16000}" --steps "${LM_STEPS:-3000}" \
  --batch-size "${LM_BATCH:-16}" --lr "${LM_LR:-3e-3}" --hidden-size "${HIDDEN:-256}" --layers "${LAYERS:-4}" \
  --heads "${HEADS:-4}" --intermediate-size "${INTERMEDIATE:-704}"
code=$?
# The encoded scenes (hf/codes.npz, 8 MB for 16000 scenes) come back for the next call unless they are too big.
if [ -n "$(find "$out/hf" -name codes.npz -size +16383k)" ]; then
  rm "$out/hf/codes.npz"
  echo "device_train: hf/codes.npz is 16 MiB or more; the next call encodes the scenes again"
fi
[ $code -eq 75 ] && { echo "device_train: paused; call again with FROM_DIR = $out"; exit 75; }
[ $code -eq 0 ] || exit 1

# The bundle, as build_default_model.sh makes it (the exporter adds bundle.json and the VQ decoder).
bundle=$out/bundle
rm -rf "$bundle" && mkdir -p "$bundle"
cp "$out"/hf/config.json "$out"/hf/model.safetensors.index.json "$out"/hf/tokenizer.json \
   "$out"/hf/tokenizer_config.json "$out"/hf/model*.safetensors "$bundle"/
stage export "$python" scripts/export_bundle.py lumina-mgpt --hf-dir "$bundle" --out "$bundle" \
  --vqgan-ckpt "$out/vq/vqgan.ckpt" --vqgan-yaml "$out/vq/vqgan.yaml" \
  --resolutions 64 --resolution 64 --top-k 128 --cfg 2.0 --name sjd-default-scenes || exit 1
"$python" - "$bundle/bundle.json" <<'PY' || exit 1
import json, sys
path = sys.argv[1]
with open(path) as f:
    bundle = json.load(f)
bundle["defaults"]["init"] = "repeat-up"  # as build_default_model.sh
with open(path, "w") as f:
    json.dump(bundle, f, indent=2)
    f.write("\n")
PY
# Every file must come back from the device machine: none may reach 16 MiB.
too_big=$(find "$out" -type f -size +16383k)
[ -z "$too_big" ] || { echo "device_train: files of 16 MiB or more will not come back: $too_big" >&2; exit 1; }
echo "device_train: bundle in $bundle"

#!/usr/bin/env bash
# Trains a default-model candidate on a GPU machine (issue 15) in ten-minute commands:
# the stages of scripts/build_default_model.sh with --device cuda, the transformer
# paused before the call's time runs out with its training state saved, and resumed by
# the next call from what the previous one brought back. Needs only the machine's
# python3 (torch, numpy, safetensors, tokenizers); no build of sjd.
#
#   scripts/device_train.sh OUT_DIR [FROM_DIR]
#
# OUT_DIR   what comes back from the machine, within its limits (at most 8 files of
#           under 16 MiB): summary.txt (stage times, the last log lines) and
#           train.tar.gz.partNN, a tar of the work folder: when paused, the text
#           tokenizer, the VQGAN and the transformer's training state (the encoded
#           scenes are left out to keep a carried folder small: the next call encodes
#           them again); when finished, the sjd bundle, the release files and reports.
# FROM_DIR  a folder holding an earlier call's train.tar.gz.part* (its OUT_DIR, brought
#           back and carried with this call): unpacked first, so the tokenizer and VQGAN
#           are reused and training continues where it paused.
# Exit code 0: finished, bundle/ is in the tar; 75: paused, call again with FROM_DIR;
# 2: bad arguments, an unreadable FROM_DIR, a TEXT_DIR or VQ_DIR missing a file, a work folder made
#    with other settings, or a saved state that cannot be resumed (transformer.log names what differs
#    or is altered);
# 1: a stage or the packing failed (summary.txt has the end of its log).
# On a machine still warm, a call without FROM_DIR continues from the work folder itself;
# a sweep on one machine gives each setting its own WORK.
#
# Unpack here: cat OUT_DIR/train.tar.gz.part* | tar -xz -C DEST   (DEST/bundle is the bundle)
#
# Environment (defaults: the shipped model's settings): DEVICE (cuda), SEED (0),
#   VQ_STEPS (1200), LM_SCENES (32000), LM_STEPS (11000), LM_BATCH (16), LM_LR (3e-3),
#   HIDDEN (256), LAYERS (4), HEADS (4), INTERMEDIATE (704), IMAGE_SIZE (64; 128 gives 32x32 codes with
#   the same 64 px VQGAN, which is convolutional),
#   TEXT_DIR and VQ_DIR (a carried tokenizer and VQGAN, e.g. out/v2/text and out/v2/vq, the ones
#   the sweep's candidates trained on: copied instead of trained; part of the work folder's
#   settings, so a resumed run names them the same way; default: trained here, their time taken off
#   the transformer's, the VQGAN's at most VQ_SECONDS: a quarter of CALL_SECONDS, at least 60, as
#   its time on a GPU is not measured; it cannot pause, so one that passes it fails the call),
#   ALL_PAIRS (1: scenes with every (colour, shape) pair, train_default_model.py --all-pairs, v4's data; 0:
#   without the four held-out pairs, v1-v3's; part of the work folder's settings),
#   CALL_SECONDS (this call's budget, default 540: the transformer pauses in time to pack),
#   WORK (the work folder, default /tmp/sjd-train), PYTHON (python3).
# docs/default_model.md ("Training on a device machine") has the round trip.
set -uo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)

[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: scripts/device_train.sh OUT_DIR [FROM_DIR]" >&2; exit 2; }
out=$1
from=${2:-}
python=${PYTHON:-python3}
device=${DEVICE:-cuda}
seed=${SEED:-0}
work=${WORK:-/tmp/sjd-train}
image_size=${IMAGE_SIZE:-64}
budget=${CALL_SECONDS:-540}
# Whole seconds without a leading zero (bash reads 08 as octal); a VQ_SECONDS of 0 would mean no limit.
[[ "$budget" =~ ^(0|[1-9][0-9]*)$ ]] || { echo "device_train: CALL_SECONDS must be whole seconds" >&2; exit 2; }
vq_seconds=${VQ_SECONDS:-$(( budget / 4 > 60 ? budget / 4 : 60 ))}
[[ "$vq_seconds" =~ ^[1-9][0-9]*$ ]] || { echo "device_train: VQ_SECONDS must be whole seconds, at least 1" >&2; exit 2; }
all_pairs=${ALL_PAIRS:-1}
[[ "$all_pairs" =~ ^[01]$ ]] || { echo "device_train: ALL_PAIRS must be 0 or 1" >&2; exit 2; }
scene_flags=()
[ "$all_pairs" = 0 ] || scene_flags=(--all-pairs)
part_bytes=$((15 * 1024 * 1024))
if [ -n "$from" ] && ! ls "$from"/train.tar.gz.part* > /dev/null 2>&1; then
  echo "device_train: FROM_DIR $from holds no train.tar.gz.part* (an earlier call's OUT_DIR)" >&2
  exit 2
fi
if [ -n "$from" ] && [ "$(realpath -m "$from")" = "$(realpath -m "$out")" ]; then
  echo "device_train: OUT_DIR and FROM_DIR must differ (OUT_DIR is emptied first)" >&2
  exit 2
fi
# Everything the work folder's contents depend on: a folder made with other settings is refused,
# so that a warm machine never continues another run's tokenizer, VQGAN or state.
settings="device=$device seed=$seed vq_steps=${VQ_STEPS:-default} scenes=${LM_SCENES:-32000} steps=${LM_STEPS:-11000}"
settings+=" batch=${LM_BATCH:-16} lr=${LM_LR:-3e-3} hidden=${HIDDEN:-256} layers=${LAYERS:-4} heads=${HEADS:-4}"
settings+=" intermediate=${INTERMEDIATE:-704} image_size=$image_size text=${TEXT_DIR:-trained} vq=${VQ_DIR:-trained}"
# Only when set: a folder from before ALL_PAIRS existed holds v1-v3's scenes, which ALL_PAIRS=0 continues.
[ "$all_pairs" = 0 ] || settings+=" all_pairs=1"
mkdir -p "$out"
rm -f "$out"/train.tar.gz.part* "$out"/summary.txt
mkdir -p "$work"
if [ -n "$from" ]; then
  # Only what this script makes: WORK may be any folder.
  (cd "$work" 2>/dev/null && rm -rf text vq state hf bundle settings.txt ./*.log)
  cat "$from"/train.tar.gz.part* | tar -xz -C "$work" || { echo "device_train: cannot unpack $from" >&2; exit 2; }
fi
if [ -f "$work/settings.txt" ] && [ "$(cat "$work/settings.txt")" != "$settings" ]; then
  echo "device_train: $work was made with other settings ($(cat "$work/settings.txt")); give this run" \
       "another WORK" >&2
  exit 2
fi
echo "$settings" > "$work/settings.txt"
export PYTHONUNBUFFERED=1
summary=$out/summary.txt
echo "settings: $settings" > "$summary"

stage() {  # stage NAME command...: runs a stage into WORK/NAME.log, records its wall time
  local name=$1 start code
  shift
  start=$(date +%s)
  echo "== $name"
  "$@" > "$work/$name.log" 2>&1
  code=$?
  { echo "$name: $(( $(date +%s) - start )) s, exit $code"; tail -n 4 "$work/$name.log"; } | tee -a "$summary"
  return $code
}

pack() {  # pack PATH...: the given paths of the work folder into OUT_DIR, in parts under 16 MiB
  local parts bytes
  tar -czf - -C "$work" "$@" | split -b "$part_bytes" -d -a 2 - "$out/train.tar.gz.part" ||
    { echo "device_train: packing $* failed" | tee -a "$summary" >&2; exit 1; }
  parts=$(ls "$out"/train.tar.gz.part* | wc -l)
  bytes=$(du -cb "$out"/train.tar.gz.part* | tail -1 | cut -f1)
  echo "packed $* into $parts part(s), $bytes bytes" | tee -a "$summary"
  # The machine brings back at most 8 files, 64 MiB together (summary.txt is one of them).
  if [ "$parts" -gt 7 ] || [ "$bytes" -gt $((63 * 1024 * 1024)) ]; then
    echo "device_train: $parts parts of $bytes bytes will not all come back" | tee -a "$summary" >&2
    exit 1
  fi
}

carried() {  # carried NAME DIR FILE...: copies a carried DIR into WORK/NAME when it holds every FILE
  local name=$1 dir=$2 file; shift 2
  for file in "$@"; do
    [ -f "$dir/$file" ] || { echo "device_train: $dir has no $file" | tee -a "$summary" >&2; exit 2; }
  done
  rm -rf "${work:?}/$name" && cp -r "$dir" "$work/$name" ||
    { echo "device_train: cannot copy $dir into $work" | tee -a "$summary" >&2; exit 1; }
  echo "$name: carried from $dir" | tee -a "$summary"
}
if [ ! -f "$work/text/tokenizer.json" ]; then
  if [ -n "${TEXT_DIR:-}" ]; then
    carried text "$TEXT_DIR" tokenizer.json vocabulary.json
  else
    stage text-tokenizer "$python" scripts/train_text_tokenizer.py --out-dir "$work/text" --seed "$seed" || exit 1
  fi
fi
if [ ! -f "$work/vq/vqgan.ckpt" ]; then
  if [ -n "${VQ_DIR:-}" ]; then
    carried vq "$VQ_DIR" vqgan.ckpt vqgan.yaml
  else
    # It cannot pause, and its time on a GPU is not measured: one that passes VQ_SECONDS is stopped
    # (exit 124 in the summary), so the call returns with time left to say so.
    stage vq timeout -k 5 "$vq_seconds" "$python" scripts/train_vq.py --out-dir "$work/vq" --seed "$seed" \
      --device "$device" ${VQ_STEPS:+--steps "$VQ_STEPS"} || exit 1
  fi
fi
# What is left of the call's budget, less a minute for the export and the packing.
limit=$(( budget - ($(date +%s) - started) - 60 ))
[ "$limit" -ge 0 ] || limit=0
stage transformer "$python" scripts/train_default_model.py --vq-dir "$work/vq" --text-dir "$work/text" \
  --out-dir "$work/hf" --seed "$seed" --device "$device" --state-dir "$work/state" --compact-state \
  --time-limit "$limit" --scenes "${LM_SCENES:-32000}" --steps "${LM_STEPS:-11000}" \
  --batch-size "${LM_BATCH:-16}" --lr "${LM_LR:-3e-3}" --hidden-size "${HIDDEN:-256}" --layers "${LAYERS:-4}" \
  --heads "${HEADS:-4}" --intermediate-size "${INTERMEDIATE:-704}" --image-size "$image_size" \
  ${scene_flags[@]+"${scene_flags[@]}"}
code=$?
if [ $code -eq 75 ]; then
  pack settings.txt text vq state $(cd "$work" && ls -- *.log)
  # A call carries at most 64 MiB of working tree, of which the tracked files take about 17 MB.
  if [ "$(du -cb "$out"/train.tar.gz.part* | tail -1 | cut -f1)" -gt $((44 * 1024 * 1024)) ]; then
    echo "device_train: these parts are too large to carry into another call next to the tracked tree;" \
         "continue while this machine is warm (a call without FROM_DIR), or train a smaller model" | tee -a "$summary"
  fi
  echo "device_train: paused; call again with FROM_DIR holding $out's parts"
  exit 75
fi
[ $code -eq 2 ] && exit 2  # a saved state made with other settings, or altered (transformer.log says which)
[ $code -eq 0 ] || exit 1
rm -rf "$work/state"  # finished: nothing left to resume

# The bundle, as build_default_model.sh makes it.
stage export scripts/export_default_bundle.sh "$work/hf" "$work/vq" "$image_size" "$work/bundle" || exit 1
pack bundle hf/train_report.json vq/vq_report.json $(cd "$work" && ls -- *.log)
echo "device_train: finished; the bundle is bundle/ in $out's parts"

#!/usr/bin/env bash
# Builds the default model (models/default) from nothing: generated scenes -> text tokenizer,
# VQGAN, transformer at 64 px, the same transformer trained on at 128 px, then on scenes with every
# (colour, shape) pair -> Lumina-mGPT release files -> sjd bundle. Deterministic on a CPU for a seed
# and thread counts (on a GPU the backward passes add in no fixed order). Wall time on a quiet 2-core CPU: 14 min (VQ, one thread), about 90 min
# (transformer at 64 px, two threads, with 7 min of encoding the scenes), about an hour (at 128 px,
# with 7 min of encoding), about 50 min (all pairs, with 8 min of encoding); docs/default_model.md
# has the measured times. DEVICE=cuda trains on a GPU (not yet measured: no GPU has been lent).
#
#   scripts/build_default_model.sh [WORK_DIR] [OUT_DIR]
#     WORK_DIR  intermediate files (default out/default-model): text/, vq/, hf64/, hf128/, hf/
#     OUT_DIR   the bundle (default models/default)
# Environment: SEED (0), VQ_THREADS (1), LM_THREADS (2), DEVICE (cpu), IMAGE_SIZE (128: the bundle's
# images; 64 stops after the first transformer stage, as v2 did; the VQGAN trains at 64 px either way);
# VQ_STEPS, LM_STEPS, LM_SCENES (64 px stage), FT_STEPS, FT_SCENES (128 px stage) and PAIRS_STEPS,
# PAIRS_SCENES (all-pairs stage) override the counts; AUTOCAST (auto) is the training scripts' --autocast:
# auto trains under bf16 autocast on a GPU and on CPUs with AVX512-BF16 (as the shipped model was), in float32 on
# other CPUs, where bf16 is emulated and several times slower; AUTOCAST=bf16 keeps the shipped recipe there too.
# The thread counts and the precision are part of the recipe: another gives other floating-point sums and so
# other weights.
set -euo pipefail
cd "$(dirname "$0")/.."

work=${1:-out/default-model}
out=${2:-models/default}
seed=${SEED:-0}
vq_threads=${VQ_THREADS:-1}
lm_threads=${LM_THREADS:-2}
image_size=${IMAGE_SIZE:-128}
device=${DEVICE:-cpu}
autocast=${AUTOCAST:-auto}
python=${PYTHON:-python3}
# oneDNN's AMX kernels die with SIGILL on VMs that advertise AMX without enabling it.
export ONEDNN_MAX_CPU_ISA=${ONEDNN_MAX_CPU_ISA:-AVX512_CORE_BF16}
mkdir -p "$work" "$out"

stage() {  # stage NAME command...: runs a stage and records its wall time
  local name=$1 start
  shift
  start=$(date +%s)
  echo "== $name"
  "$@"
  echo "$name $(( $(date +%s) - start ))" >> "$work/stage_seconds.txt"
}
: > "$work/stage_seconds.txt"

stage text-tokenizer "$python" scripts/train_text_tokenizer.py --out-dir "$work/text" --seed "$seed"
stage vq "$python" scripts/train_vq.py --out-dir "$work/vq" --seed "$seed" --threads "$vq_threads" \
  --device "$device" --autocast "$autocast" ${VQ_STEPS:+--steps "$VQ_STEPS"}
# 64 px first: 16 x 16 codes teach colours, shapes and places four times cheaper than 32 x 32 do; the
# 128 px stage starts from those weights (RoPE has no learned table) and only learns the finer grid
# (docs/default_model.md, "v3").
lm64=$work/hf64
[ "$image_size" = 64 ] && lm64=$work/hf
stage transformer "$python" scripts/train_default_model.py --vq-dir "$work/vq" --text-dir "$work/text" \
  --out-dir "$lm64" --seed "$seed" --threads "$lm_threads" --device "$device" --autocast "$autocast" \
  --image-size 64 ${LM_STEPS:+--steps "$LM_STEPS"} ${LM_SCENES:+--scenes "$LM_SCENES"}
if [ "$image_size" != 64 ]; then
  stage transformer-$image_size "$python" scripts/train_default_model.py --vq-dir "$work/vq" --text-dir "$work/text" \
    --out-dir "$work/hf$image_size" --seed "$seed" --threads "$lm_threads" --device "$device" --autocast "$autocast" \
    --image-size "$image_size" --init-from "$lm64" --steps "${FT_STEPS:-2000}" --scenes "${FT_SCENES:-16000}"
  # Then every (colour, shape) pair, the four the first stages held out included, on fresh scenes (the next seed)
  # at a third of the learning rate: v3 had drawn a held-out pair right 46% of the time, v4 85% (the evaluation
  # captions stay unseen; docs/default_model.md, "v4").
  stage transformer-all-pairs "$python" scripts/train_default_model.py --vq-dir "$work/vq" --text-dir "$work/text" \
    --out-dir "$work/hf" --seed "$((seed + 1))" --threads "$lm_threads" --device "$device" --autocast "$autocast" \
    --image-size "$image_size" --init-from "$work/hf$image_size" --all-pairs --lr 1e-3 \
    --steps "${PAIRS_STEPS:-1200}" --scenes "${PAIRS_SCENES:-16000}"
fi

# The bundle: the release files plus what the Lumina-mGPT exporter writes (bundle.json, the VQGAN's decoder).
stage export scripts/export_default_bundle.sh "$work/hf" "$work/vq" "$image_size" "$out"
cat "$work/stage_seconds.txt"
du -sh "$out"

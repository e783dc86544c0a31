#!/usr/bin/env bash
# Bundles from what a scripts/device_sweep.sh call brought back, made here: unpacks OUT_DIR's
# sweep.tar.gz.part* into DEST and makes DEST/NAME/bundle of every candidate in it with
# scripts/export_default_bundle.sh, on the VQGAN trained in the call or else VQ_DIR's (default
# out/v2/vq, the one the sweep carried).
#
#   scripts/sweep_bundles.sh OUT_DIR DEST
#
# Then score each on the held-out scenes kept for tuning (docs/default_model.md):
#   scripts/eval_default_model.py --model DEST/NAME/bundle --count 200 --start 200 --methods ar \
#       --out-dir DEST/NAME/eval -- --batch-size 8
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: scripts/sweep_bundles.sh OUT_DIR DEST" >&2; exit 2; }
out=$1 dest=$2
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
ls "$out"/sweep.tar.gz.part* > /dev/null 2>&1 ||
  { echo "sweep_bundles: $out holds no sweep.tar.gz.part* (a device_sweep.sh OUT_DIR)" >&2; exit 2; }
mkdir -p "$dest"
cat "$out"/sweep.tar.gz.part* | tar -xz -C "$dest"
vq=${VQ_DIR:-out/v2/vq}
[ -d "$dest/vq" ] && vq=$dest/vq
for report in "$dest"/*/hf/train_report.json; do
  [ -f "$report" ] || { echo "sweep_bundles: no finished candidate in $out" >&2; exit 2; }
  candidate=$(dirname "$(dirname "$report")")
  size=$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["image_size"])' "$report")
  scripts/export_default_bundle.sh "$candidate/hf" "$vq" "$size" "$candidate/bundle" > "$candidate/export.log"
  "$python" - "$report" "$candidate/bundle" <<'PY'
import json, os, sys
report, bundle = json.load(open(sys.argv[1])), sys.argv[2]
size = sum(os.path.getsize(os.path.join(bundle, f)) for f in os.listdir(bundle))
print(f"{bundle}: {report['parameters'] / 1e6:.2f} M parameters, {report['steps']} steps of {report['batch_size']} on "
      f"{report['scenes']} scenes, final loss {report['final_loss']}; {size / 1e6:.1f} MB")
PY
done

#!/usr/bin/env bash
# Bundles from what a scripts/device_sweep.sh call brought back, made here: every archive its
# sweep.txt says it kept (NAME.tar.gz, or its parts) is checked, unpacked into DEST/NAME
# (replacing what was there) and made DEST/NAME/bundle with scripts/export_default_bundle.sh,
# on the VQGAN the sweep trained (its vq.tar.gz) or else VQ_DIR's (default out/v2/vq, the one
# the sweep carried). Exit code 2: no sweep.txt, no VQGAN, or a candidate trained on another
# VQGAN; 1: an archive that does not unpack (skipped, named; the others are still made).
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
[ -f "$out/sweep.txt" ] || { echo "sweep_bundles: $out holds no sweep.txt (a device_sweep.sh OUT_DIR)" >&2; exit 2; }
mkdir -p "$dest"

archive() {  # archive NAME: OUT_DIR's NAME.tar.gz, or its parts joined, on stdout
  shopt -s nullglob
  local parts=("$out/$1".tar.gz.part*)
  if [ -f "$out/$1.tar.gz" ]; then cat "$out/$1.tar.gz"; elif [ ${#parts[@]} -gt 0 ]; then cat "${parts[@]}"; else return 1; fi
}

unpack() {  # unpack NAME: checks NAME's archive, then unpacks it into DEST, replacing DEST/NAME
  if ! archive "$1" | tar -tz > /dev/null 2>&1; then
    echo "sweep_bundles: $out/$1.tar.gz (or its parts) is missing or does not unpack; skipped" >&2
    return 1
  fi
  rm -rf "${dest:?}/$1"
  archive "$1" | tar -xz -C "$dest"
}

# The names the sweep says it kept: nothing else in OUT_DIR is taken for a candidate.
mapfile -t names < <(sed -n 's/^kept \([A-Za-z0-9][A-Za-z0-9_-]*\): .*/\1/p' "$out/sweep.txt")
failed=0
vq=${VQ_DIR:-out/v2/vq}
if printf '%s\n' "${names[@]}" | grep -qx vq; then
  unpack vq || exit 1
  vq=$dest/vq
fi
[ -f "$vq/vqgan.ckpt" ] || { echo "sweep_bundles: no VQGAN: $vq/vqgan.ckpt is missing (set VQ_DIR)" >&2; exit 2; }
vq_digest=$(sha256sum "$vq/vqgan.ckpt" | cut -d' ' -f1)
made=0
for name in "${names[@]}"; do
  [ "$name" != vq ] && [ "$name" != text ] || continue
  unpack "$name" || { failed=1; continue; }
  report=$dest/$name/hf/train_report.json
  [ -f "$report" ] || { echo "sweep_bundles: $out/$name.tar.gz holds no $name/hf/train_report.json" >&2; exit 2; }
  "$python" - "$report" "$vq_digest" "$vq" <<'PY' || exit 2
import json, sys
report, digest, vq = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
if report.get("vq_digest") != digest:
    sys.exit(f"sweep_bundles: {sys.argv[1]}: trained on another VQGAN than {vq}/vqgan.ckpt (set VQ_DIR)")
PY
  size=$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["image_size"])' "$report")
  scripts/export_default_bundle.sh "$dest/$name/hf" "$vq" "$size" "$dest/$name/bundle" > "$dest/$name/export.log"
  "$python" - "$report" "$dest/$name/bundle" <<'PY'
import json, os, sys
report, bundle = json.load(open(sys.argv[1])), sys.argv[2]
size = sum(os.path.getsize(os.path.join(bundle, f)) for f in os.listdir(bundle))
print(f"{bundle}: {report['parameters'] / 1e6:.2f} M parameters, {report['steps']} steps of {report['batch_size']} on "
      f"{report['scenes']} scenes, final loss {report['final_loss']}; {size / 1e6:.1f} MB")
PY
  made=$((made + 1))
done
[ "$made" -gt 0 ] || [ "$failed" = 1 ] ||
  { echo "sweep_bundles: no finished candidate in $out (its sweep.txt says why)" >&2; exit 2; }
exit $failed

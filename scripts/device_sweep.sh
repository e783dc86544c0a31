#!/usr/bin/env bash
# A sweep of default-model candidates in one ten-minute device-machine call (issue 15): each
# candidate's transformer is trained from scratch, one after another, in an equal share of
# the call (train_default_model.py --finish-within chooses its step count from a timed
# probe), on one tokenizer and VQGAN. What comes back is every finished candidate's Hugging
# Face folder; scripts/sweep_bundles.sh makes them bundles here, and
# scripts/eval_default_model.py scores them. Needs only the machine's python3.
#
#   scripts/device_sweep.sh OUT_DIR CANDIDATES
#
# CANDIDATES  a text file, one candidate per line: a name (letters, digits, - and _), then
#             train_default_model.py flags for it: --image-size and --scenes always, and any of --steps
#             (the most steps), --batch-size, --lr, --hidden-size, --layers, --heads,
#             --intermediate-size; # starts a comment. The script sets the folders, device, seed and
#             time itself. The scenes are encoded once per image size, before the candidates' shares
#             (the largest count; a candidate takes the first of them).
#             scripts/sweep_candidates.txt is the sweep docs/default_model.md proposes.
# OUT_DIR     sweep.txt (each candidate's exit code, steps, ms per step, final loss and time) and
#             sweep.tar.gz.partNN: NAME/hf and NAME/train.log per candidate, and vq/ and text/ when
#             they were trained here. At most 7 parts of 15 MiB come back: about four candidates of
#             7 M parameters.
# Exit code 0: every candidate finished; 1: some did not (sweep.txt says which) or packing failed;
# 2: bad arguments or a bad line in CANDIDATES (named).
# Environment: TEXT_DIR and VQ_DIR (a carried tokenizer and VQGAN, default out/v2/text and out/v2/vq,
#   the shipped model's; trained here when absent), DEVICE (cuda), SEED (0), THREADS (4, per candidate),
#   CALL_SECONDS (540), WORK (/tmp/sjd-sweep, emptied first), PYTHON (python3).
set -uo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)

[ $# -eq 2 ] || { echo "usage: scripts/device_sweep.sh OUT_DIR CANDIDATES" >&2; exit 2; }
out=$1
candidates=$2
python=${PYTHON:-python3}
device=${DEVICE:-cuda}
seed=${SEED:-0}
threads=${THREADS:-4}
budget=${CALL_SECONDS:-540}
work=${WORK:-/tmp/sjd-sweep}
text_dir=${TEXT_DIR:-out/v2/text}
vq_dir=${VQ_DIR:-out/v2/vq}
pack_seconds=30  # kept back at the end for packing

[ -f "$candidates" ] || { echo "device_sweep: CANDIDATES $candidates is not a file" >&2; exit 2; }
value_of() {  # value_of FLAG WORDS...: the value after FLAG among WORDS, or nothing
  local flag=$1 value=""
  shift
  while [ $# -gt 1 ]; do
    [ "$1" = "$flag" ] && value=$2
    shift
  done
  echo "$value"
}

names=() flags=()
declare -A most_scenes  # image size -> the most scenes a candidate trains on at that size
line_number=0
while IFS= read -r line || [ -n "$line" ]; do
  line_number=$((line_number + 1))
  line=${line%%#*}
  read -r -a words <<<"$line"
  [ ${#words[@]} -gt 0 ] || continue
  name=${words[0]}
  where="$candidates:$line_number"
  [[ $name =~ ^[A-Za-z0-9_-]+$ ]] || { echo "device_sweep: $where: '$name' is not a name (letters, digits, - and _)" >&2; exit 2; }
  for earlier in "${names[@]}"; do
    [ "$earlier" != "$name" ] || { echo "device_sweep: $where: '$name' is named twice" >&2; exit 2; }
  done
  for word in "${words[@]:1}"; do
    case $word in
      --out-dir|--vq-dir|--text-dir|--device|--seed|--threads|--state-dir|--time-limit|--finish-within|--init-from)
        echo "device_sweep: $where: $word is set by the sweep itself" >&2; exit 2 ;;
    esac
  done
  size=$(value_of --image-size "${words[@]:1}")
  count=$(value_of --scenes "${words[@]:1}")
  [[ $size =~ ^[0-9]+$ && $count =~ ^[0-9]+$ ]] ||
    { echo "device_sweep: $where: give --image-size and --scenes as numbers" >&2; exit 2; }
  [ "${most_scenes[$size]:-0}" -ge "$count" ] || most_scenes[$size]=$count
  names+=("$name")
  flags+=("${words[*]:1}")
done < "$candidates"
[ ${#names[@]} -gt 0 ] || { echo "device_sweep: $candidates names no candidate" >&2; exit 2; }

rm -rf "$work" && mkdir -p "$work" "$out"
rm -f "$out"/sweep.tar.gz.part* "$out"/sweep.txt
summary=$out/sweep.txt
echo "device_sweep: $(date -u +%FT%TZ), device $device, seed $seed, $budget s, candidates from $candidates" > "$summary"
export PYTHONUNBUFFERED=1

# The tokenizer and VQGAN: carried, or trained here (and then brought back for the bundles).
packed=()
if [ -f "$text_dir/tokenizer.json" ]; then
  cp -r "$text_dir" "$work/text"
else
  "$python" scripts/train_text_tokenizer.py --out-dir "$work/text" --seed "$seed" > "$work/text.log" 2>&1 ||
    { echo "text tokenizer failed: $(tail -n 3 "$work/text.log")" | tee -a "$summary" >&2; exit 1; }
  packed+=(text)
fi
if [ -f "$vq_dir/vqgan.ckpt" ]; then
  cp -r "$vq_dir" "$work/vq"
else
  begun=$(date +%s)
  "$python" scripts/train_vq.py --out-dir "$work/vq" --seed "$seed" --device "$device" > "$work/vq.log" 2>&1 ||
    { echo "VQGAN failed: $(tail -n 3 "$work/vq.log")" | tee -a "$summary" >&2; exit 1; }
  echo "VQGAN trained here: $(( $(date +%s) - begun )) s" | tee -a "$summary"
  packed+=(vq)
fi

# The scenes, once per image size: the candidates' shares are training time only.
for size in "${!most_scenes[@]}"; do
  begun=$(date +%s)
  "$python" scripts/train_default_model.py --vq-dir "$work/vq" --text-dir "$work/text" --out-dir "$work/codes-$size" \
    --device "$device" --seed "$seed" --threads "$threads" --image-size "$size" --scenes "${most_scenes[$size]}" \
    --encode-only > "$work/encode-$size.log" 2>&1 ||
    { echo "encoding failed: $(tail -n 3 "$work/encode-$size.log")" | tee -a "$summary" >&2; exit 1; }
  echo "encoded ${most_scenes[$size]} scenes at $size px: $(( $(date +%s) - begun )) s" | tee -a "$summary"
done

failed=0
for i in "${!names[@]}"; do
  name=${names[$i]}
  left=$(( budget - pack_seconds - ($(date +%s) - started) ))
  share=$(( left / (${#names[@]} - i) ))
  read -r -a extra <<<"${flags[$i]}"
  mkdir -p "$work/$name/hf"
  # train_default_model.py reuses encoded scenes that match its VQGAN, seed and size, and are enough.
  ln -s "$work/codes-$(value_of --image-size "${extra[@]}")/codes.npz" "$work/$name/hf/codes.npz"
  begun=$(date +%s)
  if [ "$share" -lt 10 ]; then
    code=124
    echo "no time left" > "$work/$name/train.log"
  else
    "$python" scripts/train_default_model.py --vq-dir "$work/vq" --text-dir "$work/text" --out-dir "$work/$name/hf" \
      --device "$device" --seed "$seed" --threads "$threads" --finish-within "$share" "${extra[@]}" \
      > "$work/$name/train.log" 2>&1
    code=$?
  fi
  [ $code -eq 0 ] || failed=1
  {
    echo "== $name (${flags[$i]}): exit $code, $(( $(date +%s) - begun )) s of a $share s share"
    grep -E '^(probe|transformer|wrote)' "$work/$name/train.log"
    [ $code -eq 0 ] || tail -n 3 "$work/$name/train.log"
  } | tee -a "$summary"
  [ $code -eq 0 ] && packed+=("$name/hf" "$name/train.log")
done
# The encoded scenes stay here: they are large, and the bundles do not need them.
for name in "${names[@]}"; do rm -f "$work/$name/hf/codes.npz"; done

if [ ${#packed[@]} -gt 0 ]; then
  tar -czf - -C "$work" "${packed[@]}" | split -b $((15 * 1024 * 1024)) -d -a 2 - "$out/sweep.tar.gz.part" ||
    { echo "device_sweep: packing failed" | tee -a "$summary" >&2; exit 1; }
  parts=$(ls "$out"/sweep.tar.gz.part* | wc -l)
  bytes=$(du -cb "$out"/sweep.tar.gz.part* | tail -1 | cut -f1)
  echo "packed ${packed[*]} into $parts part(s), $bytes bytes" | tee -a "$summary"
  if [ "$parts" -gt 7 ]; then
    echo "device_sweep: $parts parts will not all come back (at most 8 files); sweep fewer or smaller candidates" |
      tee -a "$summary" >&2
    exit 1
  fi
fi
echo "device_sweep: $(( $(date +%s) - started )) s in all" | tee -a "$summary"
exit $failed

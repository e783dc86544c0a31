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
# CANDIDATES  a text file, one candidate per line: a name (a letter or digit, then letters, digits,
#             - and _; not "vq" or "text"), then train_default_model.py flags for it: --image-size and
#             --scenes always, and any of --steps (the most steps), --batch-size, --lr, --hidden-size,
#             --layers, --heads, --intermediate-size, --object-loss-weight, each as "--flag value" (no other
#             flag is taken; the scenes, --all-pairs or not, are ALL_PAIRS's for all of them, encoded once); #
#             starts a comment. Every line is also checked by train_default_model.py's own parser before
#             anything runs (a line may end as Windows ends it). The script sets the folders, device, seed
#             and time itself. The scenes are encoded once per image size, before the candidates' shares
#             (the largest count; a candidate takes the first of them).
#             scripts/sweep_candidates.txt is the sweep docs/default_model.md proposes.
# OUT_DIR     best the call's $OUT itself, with nothing else written there (what is there counts toward
#             the 8 files and 64 MiB that come back). It gets sweep.txt (each
#             candidate's exit code, steps, ms per step, final loss and time) and, as soon as each
#             candidate finishes, NAME.tar.gz (NAME/hf and NAME/train.log; parts
#             NAME.tar.gz.partNN past 15 MiB), and vq.tar.gz and text.tar.gz when they were trained
#             here. At most 8 files and 64 MiB come back: an archive that would pass that is not kept
#             (sweep.txt says so). A candidate that overruns its share by a minute, or reaches
#             CALL_SECONDS, is stopped; the others keep what they made. Keep CALL_SECONDS under the
#             call's limit by the packing time (about 30 s).
# Exit code 0: every candidate finished, wrote its model and came back; 1: some did not (sweep.txt says which);
# 2: bad arguments, a bad line in CANDIDATES (named), or a WORK folder the sweep did not make.
# Environment: TEXT_DIR and VQ_DIR (a carried tokenizer and VQGAN, default out/v2/text and out/v2/vq,
#   the shipped model's; trained here when absent), DEVICE (cuda), SEED (0), THREADS (4, per candidate),
#   CALL_SECONDS (540), ENCODE_SECONDS (the most that encoding the scenes may take in all: a third of
#   CALL_SECONDS, at least 60), VQ_SECONDS (the most that training the VQGAN here may take: a quarter of
#   CALL_SECONDS, at least 60), WORK (/tmp/sjd-sweep: made by the sweep, or emptied
#   if an earlier sweep made it), PYTHON (python3), PART_BYTES (the most bytes of an archive part: 15 MiB, the
#   most a file that comes back may have, with a MiB to spare; the tests split with a smaller one), ALL_PAIRS
#   (1: every candidate trains on scenes with every (colour, shape) pair, train_default_model.py --all-pairs, as
#   the shipped v4 was; 0: without the four held-out pairs, as v1-v3 were).
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
# Whole seconds without a leading zero (bash would read 08 as octal), and not 0 (timeout 0 means none).
[[ "$budget" =~ ^[1-9][0-9]*$ ]] || { echo "device_sweep: CALL_SECONDS must be whole seconds" >&2; exit 2; }
encode_seconds=${ENCODE_SECONDS:-$(( budget / 3 > 60 ? budget / 3 : 60 ))}
vq_seconds=${VQ_SECONDS:-$(( budget / 4 > 60 ? budget / 4 : 60 ))}
[[ "$encode_seconds" =~ ^[1-9][0-9]*$ && "$vq_seconds" =~ ^[1-9][0-9]*$ ]] ||
  { echo "device_sweep: ENCODE_SECONDS and VQ_SECONDS must be whole seconds" >&2; exit 2; }
part_bytes=${PART_BYTES:-$((15 * 1024 * 1024))}
[[ "$part_bytes" =~ ^[1-9][0-9]*$ ]] || { echo "device_sweep: PART_BYTES must be a whole number of bytes" >&2; exit 2; }
all_pairs=${ALL_PAIRS:-1}
[[ "$all_pairs" =~ ^[01]$ ]] || { echo "device_sweep: ALL_PAIRS must be 0 or 1" >&2; exit 2; }
scene_flags=()  # the scenes every candidate trains on, and so what is encoded
[ "$all_pairs" = 0 ] || scene_flags=(--all-pairs)
work=$(realpath -m "${WORK:-/tmp/sjd-sweep}")
text_dir=${TEXT_DIR:-out/v2/text}
vq_dir=${VQ_DIR:-out/v2/vq}
pack_seconds=30     # kept back at the end of the call
startup_seconds=10  # of a share: Python's start before train_default_model.py's clock, and writing the folder
overrun_seconds=60  # past its share, a candidate is stopped
max_files=8 max_bytes=$((63 * 1024 * 1024))  # what a device call brings back (with a MiB to spare)

[ -f "$candidates" ] || { echo "device_sweep: CANDIDATES $candidates is not a file" >&2; exit 2; }
if [ -e "$work" ] && [ -n "$(find "$work" -mindepth 1 -maxdepth 1 -print -quit)" ] && [ ! -f "$work/.sjd-sweep" ]; then
  echo "device_sweep: WORK $work is not empty and was not made by a sweep; give another WORK" >&2
  exit 2
fi
out_real=$(realpath -m "$out")
case "$work/" in "$out_real/"*) nested=1 ;; *) case "$out_real/" in "$work/"*) nested=1 ;; *) nested=0 ;; esac ;; esac
[ "$nested" = 0 ] || { echo "device_sweep: WORK $work and OUT_DIR $out must not hold one another" >&2; exit 2; }

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
  line=${line%$'\r'}  # a file saved with Windows line endings
  line=${line%%#*}
  read -r -a words <<<"$line"
  [ ${#words[@]} -gt 0 ] || continue
  name=${words[0]}
  where="$candidates:$line_number"
  [[ $name =~ ^[A-Za-z0-9][A-Za-z0-9_-]*$ ]] && [ "$name" != vq ] && [ "$name" != text ] ||
    { echo "device_sweep: $where: '$name' is not a candidate name (a letter or digit, then letters, digits," \
           "- and _; not vq or text)" >&2; exit 2; }
  for earlier in "${names[@]}"; do
    [ "$earlier" != "$name" ] || { echo "device_sweep: $where: '$name' is named twice" >&2; exit 2; }
  done
  for ((w = 1; w < ${#words[@]}; w += 2)); do
    case ${words[$w]} in
      --image-size|--scenes|--steps|--batch-size|--lr|--hidden-size|--layers|--heads|--intermediate-size) ;;
      --object-loss-weight) ;;
      *) echo "device_sweep: $where: ${words[$w]} is not a candidate flag (--image-size, --scenes, --steps," \
              "--batch-size, --lr, --hidden-size, --layers, --heads, --intermediate-size or --object-loss-weight," \
              "each as --flag value)" >&2
         exit 2 ;;
    esac
  done
  size=$(value_of --image-size "${words[@]:1}")
  count=$(value_of --scenes "${words[@]:1}")
  [[ $size =~ ^[0-9]+$ && $count =~ ^[0-9]+$ ]] ||
    { echo "device_sweep: $where: give --image-size and --scenes as numbers" >&2; exit 2; }
  # The training script's own parser (no abbreviations) judges the rest, before anything runs.
  problem=$("$python" scripts/train_default_model.py --vq-dir . --text-dir . --out-dir . --check-args \
              "${words[@]:1}" 2>&1 >/dev/null) ||
    { echo "device_sweep: $where: $(tail -n 1 <<<"$problem")" >&2; exit 2; }
  [ "${most_scenes[$size]:-0}" -ge "$count" ] || most_scenes[$size]=$count
  names+=("$name")
  flags+=("${words[*]:1}")
done < "$candidates"
[ ${#names[@]} -gt 0 ] || { echo "device_sweep: $candidates names no candidate" >&2; exit 2; }

# Only a folder an earlier sweep made is emptied.
[ ! -f "$work/.sjd-sweep" ] || rm -rf "${work:?}"/* "$work/.sjd-sweep" ||
  { echo "device_sweep: cannot empty WORK $work" >&2; exit 1; }
mkdir -p "$work/cand" "$out" && touch "$work/.sjd-sweep" ||
  { echo "device_sweep: cannot make WORK $work or OUT_DIR $out" >&2; exit 1; }
# Only this sweep's own archives go from OUT_DIR.
for name in "${names[@]}" vq text; do rm -f "$out/$name.tar.gz" "$out/$name".tar.gz.part*; done
rm -f "$out/sweep.txt"
summary=$out/sweep.txt
echo "device_sweep: $(date -u +%FT%TZ), device $device, seed $seed, $budget s, all pairs $all_pairs," \
     "candidates from $candidates" > "$summary"
export PYTHONUNBUFFERED=1

keep() {  # keep NAME DIR PATH...: DIR's PATHs as OUT_DIR/NAME.tar.gz (parts past 15 MiB), if they still fit
  local name=$1 dir=$2 files bytes
  shift 2
  tar -czf "$work/$name.tar.gz" -C "$dir" -- "$@" ||
    { echo "$name: packing failed" | tee -a "$summary" >&2; return 1; }
  bytes=$(stat -c %s "$work/$name.tar.gz")
  files=$(( (bytes + part_bytes - 1) / part_bytes ))
  local kept_files kept_bytes
  kept_files=$(find "$out" -maxdepth 1 -type f | wc -l)
  kept_bytes=$(du -cb "$out" | tail -1 | cut -f1)
  if [ $((kept_files + files)) -gt $max_files ] || [ $((kept_bytes + bytes)) -gt $max_bytes ]; then
    echo "$name: not kept: $bytes bytes in $files file(s) would pass what comes back ($max_files files," \
         "$max_bytes bytes)" | tee -a "$summary" >&2
    rm -f "$work/$name.tar.gz"
    return 1
  fi
  # Into OUT_DIR under a temporary name first, renamed there: a call cut short leaves no half archive.
  local written=1 part
  if [ "$files" -eq 1 ]; then
    cp "$work/$name.tar.gz" "$out/.$name.tmp" && mv "$out/.$name.tmp" "$out/$name.tar.gz" || written=0
  elif split -b "$part_bytes" -d -a 2 "$work/$name.tar.gz" "$out/.$name.tmp.part"; then
    for part in "$out/.$name.tmp.part"*; do
      mv "$part" "$out/$name.tar.gz.part${part##*.tmp.part}" || written=0
    done
  else
    written=0
  fi
  if [ "$written" = 0 ]; then
    echo "$name: writing its archive failed" | tee -a "$summary" >&2
    rm -f "$out/.$name".tmp* "$out/$name.tar.gz" "$out/$name".tar.gz.part*
    return 1
  fi
  rm -f "$work/$name.tar.gz"
  echo "kept $name: $bytes bytes" | tee -a "$summary"
}

# The tokenizer and VQGAN: carried, or trained here (and then brought back for the bundles).
if [ -f "$text_dir/tokenizer.json" ] && [ -f "$text_dir/vocabulary.json" ]; then
  cp -r "$text_dir" "$work/text"
else
  "$python" scripts/train_text_tokenizer.py --out-dir "$work/text" --seed "$seed" > "$work/text.log" 2>&1 ||
    { echo "text tokenizer failed: $(tail -n 3 "$work/text.log")" | tee -a "$summary" >&2; exit 1; }
  keep text "$work" text || exit 1
fi
if [ -f "$vq_dir/vqgan.ckpt" ] && [ -f "$vq_dir/vqgan.yaml" ]; then
  cp -r "$vq_dir" "$work/vq"
else
  # Its time on a GPU has never been measured: one that passes VQ_SECONDS fails with the call's time
  # left to say so.
  begun=$(date +%s)
  timeout -k 5 "$vq_seconds" "$python" scripts/train_vq.py --out-dir "$work/vq" --seed "$seed" --device "$device" \
    > "$work/vq.log" 2>&1 ||
    { echo "VQGAN failed (or passed VQ_SECONDS=$vq_seconds): $(tail -n 3 "$work/vq.log")" | tee -a "$summary" >&2
      exit 1; }
  echo "VQGAN trained here: $(( $(date +%s) - begun )) s" | tee -a "$summary"
  keep vq "$work" vq || exit 1
fi

# The scenes, once per image size: the candidates' shares are training time only. Encoding may take
# ENCODE_SECONDS in all from here (its time on a GPU is not measured yet), so a slow one fails with
# time left to say so rather than leaving the candidates none.
encode_until=$(( $(date +%s) + encode_seconds ))
for size in "${!most_scenes[@]}"; do
  begun=$(date +%s)
  timeout -k 5 $((encode_until > begun ? encode_until - begun : 1)) \
    "$python" scripts/train_default_model.py --vq-dir "$work/vq" --text-dir "$work/text" --out-dir "$work/codes-$size" \
    --device "$device" --seed "$seed" --threads "$threads" --image-size "$size" --scenes "${most_scenes[$size]}" \
    ${scene_flags[@]+"${scene_flags[@]}"} --encode-only > "$work/encode-$size.log" 2>&1 ||
    { echo "encoding failed (or passed ENCODE_SECONDS): $(tail -n 3 "$work/encode-$size.log")" |
        tee -a "$summary" >&2; exit 1; }
  echo "encoded ${most_scenes[$size]} scenes at $size px: $(( $(date +%s) - begun )) s" | tee -a "$summary"
done

failed=0
for i in "${!names[@]}"; do
  name=${names[$i]}
  left=$(( budget - pack_seconds - ($(date +%s) - started) ))
  share=$(( left / (${#names[@]} - i) ))
  read -r -a extra <<<"${flags[$i]}"
  folder=$work/cand/$name
  mkdir -p "$folder/hf"
  # A copy (not a link) of the encoded scenes, which train_default_model.py reuses as they match its VQGAN,
  # seed and size and are enough.
  cp "$work/codes-$(value_of --image-size "${extra[@]}")/codes.npz" "$folder/hf/codes.npz"
  begun=$(date +%s)
  if [ "$share" -le "$startup_seconds" ]; then
    code=124
    echo "no time left" > "$folder/train.log"
  else
    # Stopped a minute past its share, and at the latest when the call's CALL_SECONDS are up.
    stop_after=$((share + overrun_seconds))
    call_left=$((budget - ($(date +%s) - started)))
    [ "$stop_after" -le "$call_left" ] || stop_after=$call_left
    timeout -k 5 "$stop_after" "$python" scripts/train_default_model.py "${extra[@]}" \
      --vq-dir "$work/vq" --text-dir "$work/text" --out-dir "$folder/hf" --device "$device" --seed "$seed" \
      ${scene_flags[@]+"${scene_flags[@]}"} --threads "$threads" --finish-within $((share - startup_seconds)) \
      > "$folder/train.log" 2>&1
    code=$?
  fi
  rm -f "$folder/hf/codes.npz"  # large, and the bundles do not need it
  if [ $code -eq 0 ] && [ ! -f "$folder/hf/train_report.json" ]; then
    code=1
    echo "exited 0 without writing a model" >> "$folder/train.log"
  fi
  {
    echo "== $name (${flags[$i]}): exit $code, $(( $(date +%s) - begun )) s of a $share s share"
    grep -E '^(probe|transformer|wrote)' "$folder/train.log"
    [ $code -eq 0 ] || tail -n 3 "$folder/train.log"
  } | tee -a "$summary"
  if [ $code -ne 0 ] || ! keep "$name" "$work/cand" "$name/hf" "$name/train.log"; then
    failed=1
  fi
done
echo "device_sweep: $(( $(date +%s) - started )) s in all" | tee -a "$summary"
exit $failed
